/* SPDX-License-Identifier: BSD-3-Clause */
/* optim.c - the host loops of the optimizer step over a shard: AdamW, SGD,
 * the fixed-order sum of squares and the bulk bf16 conversions. */

/* The arithmetic is optim.h's element functions; these loops only make it
 * fast: restrict pointers, the hyper-parameters copied to a local, loops
 * cloned for AVX-512 and AVX2 on x86-64 with GCC (picked once by an ifunc,
 * as in reduce.c).  Results must stay bit-identical to the element
 * functions, hence to the CUDA kernels built with --fmad=false: FMA
 * contraction is turned off below (the AVX2/AVX-512 clones have FMA, and
 * -std=gnu11 lets GCC contract).
 *
 * AdamW's square root: without -fno-math-errno GCC keeps a libm call for a
 * negative operand (errno) beside every sqrtf, and a loop with a call does
 * not vectorize.  So AdamW goes in tiles: the moments of a tile (vector
 * loop), the square roots of the tile (SSE sqrtps on x86-64, correctly
 * rounded like sqrtf; plain sqrtf elsewhere or when the build has
 * -fno-math-errno, where it vectorizes by itself), then the parameters.
 */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
/* before any function, optim.h's included: applies to all of them */
#pragma GCC optimize("fp-contract=off")
#endif

#include "optim.h"

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"

#if defined(__x86_64__) && defined(__SSE2__) && !defined(__NO_MATH_ERRNO__)
#include <immintrin.h>
#define DPG_OPT_SSE_SQRT 1
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
	!defined(DPG_NO_MULTIVERSION)
#define DPG_OPT_CLONES \
	__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DPG_OPT_CLONES
#endif

#if defined(__GNUC__)
#define DPG_OPT_INLINE static inline __attribute__((always_inline))
#else
#define DPG_OPT_INLINE static inline
#endif

/* AdamW elements per tile (the square-root scratch lives on the stack) */
#define DPG_OPT_TILE 256

/* s[k] = sqrtf(s[k]) for k < cnt, correctly rounded. */
DPG_OPT_INLINE void sqrt_tile(float *s, size_t cnt)
{
	size_t k = 0;

#ifdef DPG_OPT_SSE_SQRT
	for (; k + 4 <= cnt; k += 4)
		_mm_storeu_ps(s + k, _mm_sqrt_ps(_mm_loadu_ps(s + k)));
	for (; k < cnt; k++)
		s[k] = _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(s[k])));
#else
	for (; k < cnt; k++)
		s[k] = sqrtf(s[k]);
#endif
}

/* cnt <= DPG_OPT_TILE elements of AdamW: dpg_adamw_elem, in three passes. */
DPG_OPT_INLINE void adamw_tile(float *restrict p, float *restrict m, float *restrict v,
			       const float *restrict g, size_t cnt,
			       const struct dpg_adamw_hp *h)
{
	float s[DPG_OPT_TILE];
	size_t k;

	for (k = 0; k < cnt; k++)
		s[k] = dpg_adamw_moments(&m[k], &v[k], g[k], h);
	sqrt_tile(s, cnt);
	for (k = 0; k < cnt; k++)
		dpg_adamw_apply(&p[k], m[k], s[k], h);
}

DPG_OPT_CLONES
void dpg_adamw_update(float *restrict p, float *restrict m, float *restrict v,
		      const float *restrict g, size_t n, const struct dpg_adamw_hp *hp)
{
	const struct dpg_adamw_hp h = *hp;
	size_t i = 0;

	for (; i + DPG_OPT_TILE <= n; i += DPG_OPT_TILE)
		adamw_tile(p + i, m + i, v + i, g + i, DPG_OPT_TILE, &h);
	if (i < n)
		adamw_tile(p + i, m + i, v + i, g + i, n - i, &h);
}

DPG_OPT_CLONES
void dpg_sgd_update(float *restrict p, float *restrict buf, const float *restrict g,
		    size_t n, const struct dpg_sgd_hp *hp)
{
	const struct dpg_sgd_hp h = *hp;

	for (size_t i = 0; i < n; i++)
		dpg_sgd_elem(&p[i], &buf[i], g[i], &h);
}

DPG_OPT_CLONES
double dpg_sumsq_f32(const float *restrict x, size_t n)
{
	double acc[DPG_SUMSQ_LANES] = { 0 };
	size_t i = 0;
	int k, w;

	for (; i + DPG_SUMSQ_LANES <= n; i += DPG_SUMSQ_LANES) {
		for (k = 0; k < DPG_SUMSQ_LANES; k++) {
			double d = x[i + k];

			acc[k] += d * d;
		}
	}
	for (k = 0; i + (size_t)k < n; k++) {
		double d = x[i + (size_t)k];

		acc[k] += d * d;
	}
	for (w = DPG_SUMSQ_LANES / 2; w > 0; w /= 2)
		for (k = 0; k < w; k++)
			acc[k] += acc[k + w];
	return acc[0];
}

DPG_OPT_CLONES
void dpg_f32_to_bf16_n(const float *restrict in, uint16_t *restrict out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = dpg_f32_to_bf16(in[i]);
}

DPG_OPT_CLONES
void dpg_bf16_to_f32_n(const uint16_t *restrict in, float *restrict out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = dpg_bf16_to_f32(in[i]);
}
