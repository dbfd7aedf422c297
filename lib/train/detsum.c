/* SPDX-License-Identifier: BSD-3-Clause */
/* detsum.c - fixed-point folding of gradients and exact 128-bit sums of
 * squares: what makes the deterministic step independent of world size. */
#include "detsum.h"

#include <math.h>

int dpg_fix_fold(float *g, int64_t *acc, size_t n, double *bad)
{
	const double scale = (double)(INT64_C(1) << DPG_FIX_BITS);
	size_t i;

	for (i = 0; i < n; i++) {
		double v = (double)g[i] * scale;	/* exact: a power-of-two scale */
		int64_t q;

		if (!(fabs(v) < (double)DPG_FIX_LIMIT)) {
			*bad = g[i];
			return -1;
		}
		q = (int64_t)llrint(v);
		acc[i] += q;
		if (acc[i] >= DPG_FIX_LIMIT || acc[i] <= -DPG_FIX_LIMIT) {
			*bad = (double)acc[i] / scale;
			return -1;
		}
		g[i] = 0.0f;
	}
	return 0;
}

int dpg_fix_to_f32(const int64_t *x, float *out, size_t n, unsigned __int128 *sumsq)
{
	const double inv = 1.0 / (double)(INT64_C(1) << DPG_FIX_BITS);
	unsigned __int128 s = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		int64_t v = x[i];
		uint64_t a;

		if (v >= DPG_FIX_LIMIT || v <= -DPG_FIX_LIMIT)
			return -1;
		a = (uint64_t)(v < 0 ? -v : v);
		s += (unsigned __int128)a * a;
		out[i] = (float)((double)v * inv);	/* |v| < 2^53: exact, then one rounding */
	}
	*sumsq += s;
	return 0;
}

void dpg_u128_to_limbs(unsigned __int128 v, int64_t limbs[4])
{
	int k;

	for (k = 0; k < 4; k++)
		limbs[k] = (int64_t)(uint64_t)((v >> (32 * k)) & 0xffffffffu);
}

unsigned __int128 dpg_u128_from_limbs(const int64_t limbs[4])
{
	unsigned __int128 v = 0;
	int k;

	for (k = 0; k < 4; k++)
		v += (unsigned __int128)(uint64_t)limbs[k] << (32 * k);
	return v;
}
