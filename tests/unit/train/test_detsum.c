/* SPDX-License-Identifier: BSD-3-Clause */
/* test_detsum.c - unit tests for lib/train/detsum.c: fixed-point folds that
 * are exact and independent of the order of the inputs, range errors, the
 * exact 128-bit sum of squares and the 32-bit limb encoding. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "detsum.h"

#define NSRC 8
#define N 257

static uint64_t rng(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 11;
}

/* A float spread over many magnitudes, below 2^18 / NSRC in size. */
static float rnd_value(uint64_t *s)
{
	double m = (double)(rng(s) % 2000001) / 1000000.0 - 1.0;	/* [-1, 1] */
	int e = (int)(rng(s) % 45) - 34;				/* 2^-34..2^10 */

	return (float)ldexp(m, e);
}

/* Fold the NSRC gradients into acc in the order perm[]. */
static void fold_in_order(float g[NSRC][N], const int *perm, int64_t *acc)
{
	float tmp[N];
	double bad = 0;

	memset(acc, 0, N * sizeof(*acc));
	for (int k = 0; k < NSRC; k++) {
		memcpy(tmp, g[perm[k]], sizeof(tmp));
		assert_int_equal(dpg_fix_fold(tmp, acc, N, &bad), 0);
		for (int i = 0; i < N; i++)
			assert_true(tmp[i] == 0.0f);	/* folded values are cleared */
	}
}

/* Every permutation tried gives the same accumulator bits, and the same
 * floats and sum of squares out; the sum matches llrint-per-term. */
static void test_fold_order_independent(void **state)
{
	static float g[NSRC][N];
	int64_t ref[N], acc[N], want[N];
	float out_ref[N], out[N];
	unsigned __int128 sq_ref = 0, sq;
	int perm[NSRC];
	uint64_t s = 12345;

	(void)state;
	for (int k = 0; k < NSRC; k++)
		for (int i = 0; i < N; i++)
			g[k][i] = rnd_value(&s);
	for (int k = 0; k < NSRC; k++)
		perm[k] = k;
	fold_in_order(g, perm, ref);
	for (int i = 0; i < N; i++) {
		want[i] = 0;
		for (int k = 0; k < NSRC; k++)
			want[i] += llrint(ldexp((double)g[k][i], DPG_FIX_BITS));
	}
	assert_memory_equal(ref, want, sizeof(ref));
	assert_int_equal(dpg_fix_to_f32(ref, out_ref, N, &sq_ref), 0);
	for (int t = 0; t < 50; t++) {
		for (int k = NSRC - 1; k > 0; k--) {	/* Fisher-Yates */
			int j = (int)(rng(&s) % (uint64_t)(k + 1)), x = perm[k];

			perm[k] = perm[j];
			perm[j] = x;
		}
		fold_in_order(g, perm, acc);
		assert_memory_equal(acc, ref, sizeof(acc));
		sq = 0;
		assert_int_equal(dpg_fix_to_f32(acc, out, N, &sq), 0);
		assert_memory_equal(out, out_ref, sizeof(out));
		assert_true(sq == sq_ref);
	}
}

/* The resolution is 2^-32, with round-to-nearest-even on ties. */
static void test_fold_resolution(void **state)
{
	float g[6] = { ldexpf(1, -32), ldexpf(1, -34), ldexpf(1.5f, -32),
		       ldexpf(2.5f, -32), -ldexpf(1.5f, -32), 0.75f };
	int64_t acc[6] = { 0, 0, 0, 0, 0, 10 };
	double bad = 0;

	(void)state;
	assert_int_equal(dpg_fix_fold(g, acc, 6, &bad), 0);
	assert_int_equal(acc[0], 1);
	assert_int_equal(acc[1], 0);		/* below the resolution */
	assert_int_equal(acc[2], 2);		/* tie: to even */
	assert_int_equal(acc[3], 2);		/* tie: to even */
	assert_int_equal(acc[4], -2);
	assert_int_equal(acc[5], 10 + (INT64_C(3) << 30));	/* adds to acc */
}

/* A value out of range (NaN, Inf, |x| >= 2^18) or a running sum out of
 * range stops the fold with -1 and names the value; earlier elements were
 * folded (and cleared), the offending one is left as it was. */
static void test_fold_range_errors(void **state)
{
	const float big = ldexpf(1, 18);	/* 2^50 units: the limit */
	const float vals[] = { NAN, INFINITY, -INFINITY, big, -big, 3e38f };
	double bad;

	(void)state;
	for (size_t v = 0; v < sizeof(vals) / sizeof(vals[0]); v++) {
		float g[3] = { 1.0f, vals[v], 2.0f };
		int64_t acc[3] = { 0, 0, 0 };

		bad = 0;
		assert_int_equal(dpg_fix_fold(g, acc, 3, &bad), -1);
		if (isnan(vals[v]))
			assert_true(isnan(bad));
		else
			assert_true(bad == (double)vals[v]);
		assert_int_equal(acc[0], INT64_C(1) << 32);
		assert_true(g[0] == 0.0f);
		assert_true(g[1] == vals[v] || (isnan(g[1]) && isnan(vals[v])));
		assert_true(g[2] == 2.0f);
		assert_int_equal(acc[2], 0);
	}
	{	/* just below the limit: accepted */
		float g[1] = { nextafterf(big, 0) };
		int64_t acc[1] = { 0 };

		assert_int_equal(dpg_fix_fold(g, acc, 1, &bad), 0);
		assert_true(acc[0] < DPG_FIX_LIMIT);
	}
	{	/* two in-range values whose sum is not */
		float g[1] = { ldexpf(1.5f, 17) };
		int64_t acc[1] = { (INT64_C(3) << 48) };	/* 0.75 * 2^50 */

		assert_int_equal(dpg_fix_fold(g, acc, 1, &bad), -1);
		assert_true(bad == ldexp(1.5, 17) + 0.75 * ldexp(1, 18));
	}
	{	/* the same from below */
		float g[1] = { -ldexpf(1.5f, 17) };
		int64_t acc[1] = { -(INT64_C(3) << 48) };

		assert_int_equal(dpg_fix_fold(g, acc, 1, &bad), -1);
		assert_true(bad < -ldexp(1, 18) + 1);
	}
}

/* The sum of squares is exact: compare with a long double reference (agrees
 * to the reference's own rounding; loose enough for valgrind, which computes
 * long double as double) and with exact values at the limits. */
static void test_sumsq(void **state)
{
	int64_t x[N];
	float out[N];
	unsigned __int128 sq = 0;
	long double ref = 0;
	uint64_t s = 99;

	(void)state;
	for (int i = 0; i < N; i++) {
		x[i] = (int64_t)(rng(&s) % (uint64_t)(2 * DPG_FIX_LIMIT - 1)) -
		       (DPG_FIX_LIMIT - 1);
		ref += (long double)x[i] * (long double)x[i];
	}
	assert_int_equal(dpg_fix_to_f32(x, out, N, &sq), 0);
	{
		long double got = (long double)sq;

		assert_true(fabsl(got - ref) <= ref * 0x1p-40L);
	}
	for (int i = 0; i < N; i++)
		assert_true(out[i] == (float)ldexp((double)x[i], -DPG_FIX_BITS));

	/* exact at the extremes: (2^50 - 1)^2 = 2^100 - 2^51 + 1, twice */
	{
		int64_t e[3] = { DPG_FIX_LIMIT - 1, -(DPG_FIX_LIMIT - 1), 0 };
		unsigned __int128 one = 1, want = 2 * ((one << 100) - (one << 51) + 1);
		float o[3];

		sq = 7;		/* adds to what is there */
		assert_int_equal(dpg_fix_to_f32(e, o, 3, &sq), 0);
		assert_true(sq == want + 7);
		assert_true(o[2] == 0.0f);
		assert_true(o[0] == -o[1]);
	}
	/* an out-of-range input: -1, the sum left as it was */
	{
		int64_t e[2] = { 5, DPG_FIX_LIMIT };
		float o[2];

		sq = 11;
		assert_int_equal(dpg_fix_to_f32(e, o, 2, &sq), -1);
		assert_true(sq == 11);
		e[1] = -DPG_FIX_LIMIT;
		assert_int_equal(dpg_fix_to_f32(e, o, 2, &sq), -1);
		assert_true(sq == 11);
	}
}

static void test_limbs(void **state)
{
	uint64_t s = 7;
	unsigned __int128 all = ~(unsigned __int128)0;

	(void)state;
	for (int t = 0; t < 1000; t++) {
		unsigned __int128 a = ((unsigned __int128)rng(&s) << 75) ^
				      ((unsigned __int128)rng(&s) << 30) ^ rng(&s);
		unsigned __int128 b = ((unsigned __int128)rng(&s) << 77) ^ rng(&s);
		int64_t la[4], lb[4], sum[4];

		if (t == 0)
			a = all;
		dpg_u128_to_limbs(a, la);
		dpg_u128_to_limbs(b, lb);
		for (int k = 0; k < 4; k++) {
			assert_true(la[k] >= 0 && la[k] <= 0xffffffffll);
			sum[k] = la[k] + lb[k];		/* what an allreduce does */
		}
		assert_true(dpg_u128_from_limbs(la) == a);
		assert_true(dpg_u128_from_limbs(sum) == a + b);	/* carries, mod 2^128 */
	}
	{	/* many ranks' limbs at their maximum */
		int64_t l[4];

		for (int k = 0; k < 4; k++)
			l[k] = INT64_C(0xffffffff) * 1000;
		assert_true(dpg_u128_from_limbs(l) == all * 1000);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fold_order_independent),
		cmocka_unit_test(test_fold_resolution),
		cmocka_unit_test(test_fold_range_errors),
		cmocka_unit_test(test_sumsq),
		cmocka_unit_test(test_limbs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
