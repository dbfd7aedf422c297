/* SPDX-License-Identifier: BSD-3-Clause */
/* test_reduce.c - unit tests for lib/runtime/cpu/reduce.c: dpg_reduce_n for
 * every dtype x op against an element-wise reference in double / int64, odd
 * lengths and misaligned buffers (vector tails), 1..4 sources, in place, the
 * avg divisor, NaN propagation, f16/bf16 ties to even, integer wrap-around. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reduce.h"

#define MAXN 4097
#define MAXSRC 4

static const dpg_dtype_t DTYPES[] = { DPG_F32, DPG_F64, DPG_F16, DPG_BF16, DPG_I32, DPG_I64 };
static const dpg_op_t OPS[] = { DPG_SUM, DPG_AVG, DPG_MIN, DPG_MAX };
static const char *const DTN[] = { "f32", "f64", "f16", "bf16", "i32", "i64" };
static const char *const OPN[] = { "sum", "avg", "min", "max" };
static const size_t LENS[] = { 1, 7, 33, 1000, 4097 };

static uint64_t rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static bool is_float(dpg_dtype_t dt)
{
	return dt == DPG_F32 || dt == DPG_F64 || dt == DPG_F16 || dt == DPG_BF16;
}

/* A random element of dt, as raw bits in *v.  Floats are chosen so that any
 * sum of MAXSRC of them is exact in the dtype (the reference can then add
 * in double); integers use the whole range, so that sums wrap. */
static void rnd_elem(dpg_dtype_t dt, uint64_t *s, void *v)
{
	int64_t k = (int64_t)(rng(s) >> 1);

	switch (dt) {
	case DPG_F32: {
		float f = (float)(k % 131073 - 65536) / 16.0f;	/* 2^-4 steps, |f| <= 2^12 */

		memcpy(v, &f, 4);
		break;
	}
	case DPG_F64: {
		double d = ldexp((double)(k % 2000001 - 1000000), (int)(rng(s) % 40) - 30);

		memcpy(v, &d, 8);
		break;
	}
	case DPG_F16: {
		uint16_t h = dpg_f32_to_f16((float)(k % 513 - 256) / 4.0f);	/* |x| <= 64 */

		memcpy(v, &h, 2);
		break;
	}
	case DPG_BF16: {
		uint16_t b = dpg_f32_to_bf16((float)(k % 65 - 32) / 2.0f);	/* |x| <= 16 */

		memcpy(v, &b, 2);
		break;
	}
	case DPG_I32: {
		uint32_t u = (uint32_t)rng(s);

		memcpy(v, &u, 4);
		break;
	}
	case DPG_I64: {
		uint64_t u = rng(s);

		memcpy(v, &u, 8);
		break;
	}
	}
}

/* Element i of a float buffer as a double (exact). */
static double getf(dpg_dtype_t dt, const void *b, size_t i)
{
	switch (dt) {
	case DPG_F32:
		return ((const float *)b)[i];
	case DPG_F64:
		return ((const double *)b)[i];
	case DPG_F16:
		return dpg_f16_to_f32(((const uint16_t *)b)[i]);
	default:
		return dpg_bf16_to_f32(((const uint16_t *)b)[i]);
	}
}

static int64_t geti(dpg_dtype_t dt, const void *b, size_t i)
{
	return dt == DPG_I32 ? ((const int32_t *)b)[i] : ((const int64_t *)b)[i];
}

/* Reference for floats: combine in double (exact for the inputs above),
 * NaN wins min / max; avg divides once in the accumulation type. */
static double ref_float(dpg_dtype_t dt, dpg_op_t op, const double *v, int ns, int div)
{
	double a = v[0];

	for (int q = 1; q < ns; q++) {
		if (isnan(a) || isnan(v[q]))
			a = NAN;
		else if (op == DPG_MIN)
			a = v[q] < a ? v[q] : a;
		else if (op == DPG_MAX)
			a = v[q] > a ? v[q] : a;
		else
			a += v[q];
	}
	if (op != DPG_AVG || div <= 0)
		return a;
	if (dt == DPG_F64)
		return a / div;
	{
		float r = (float)a / (float)div;	/* f32 accumulation, one rounding */

		if (dt == DPG_F16)
			return dpg_f16_to_f32(dpg_f32_to_f16(r));
		if (dt == DPG_BF16)
			return dpg_bf16_to_f32(dpg_f32_to_bf16(r));
		return r;
	}
}

/* Reference for integers: two's complement wrap-around in the dtype; avg
 * divides the exact sum (it cannot wrap). */
static int64_t ref_int(dpg_dtype_t dt, dpg_op_t op, const int64_t *v, int ns, int div)
{
	int64_t a = v[0];

	if (op == DPG_AVG && div > 0) {
		__int128 x = 0;

		for (int q = 0; q < ns; q++)
			x += v[q];
		x /= div;	/* truncation toward zero */
		/* div < ns can leave the dtype's range: the store wraps */
		return dt == DPG_I32 ? (int32_t)(uint32_t)(uint64_t)(int64_t)x : (int64_t)x;
	}
	for (int q = 1; q < ns; q++) {
		if (op == DPG_MIN)
			a = v[q] < a ? v[q] : a;
		else if (op == DPG_MAX)
			a = v[q] > a ? v[q] : a;
		else
			a = (int64_t)((uint64_t)a + (uint64_t)v[q]);
	}
	if (dt == DPG_I32)
		a = (int32_t)(uint32_t)(uint64_t)a;
	if (op == DPG_AVG && div > 0)
		a /= div;	/* truncation toward zero */
	return a;
}

struct bufs {
	char *src[MAXSRC];
	char *dst;
};

/* One case: random inputs at element offset off, reduce, compare. */
static void check_case(struct bufs *b, int d, int o, int ns, size_t len, bool inplace,
		       int div, size_t off, uint64_t *seed)
{
	dpg_dtype_t dt = DTYPES[d];
	size_t es = dpg_dtype_size(dt);
	const void *s[MAXSRC];
	char *dst = b->dst + off * es;

	for (int q = 0; q < ns; q++) {
		for (size_t i = 0; i < len; i++)
			rnd_elem(dt, seed, b->src[q] + (off + i) * es);
		s[q] = b->src[q] + off * es;
	}
	if (inplace) {
		memcpy(dst, s[0], len * es);
		s[0] = dst;
	}
	dpg_reduce_n(dst, s, ns, len, dt, OPS[o], div);
	for (size_t i = 0; i < len; i++) {
		const char *in0 = inplace ? b->src[0] + off * es : s[0];

		if (is_float(dt)) {
			double v[MAXSRC], w, g = getf(dt, dst, i);

			v[0] = getf(dt, in0, i);
			for (int q = 1; q < ns; q++)
				v[q] = getf(dt, s[q], i);
			w = ref_float(dt, OPS[o], v, ns, div);
			if (!(g == w || (isnan(g) && isnan(w))))
				fail_msg("%s %s nsrc %d len %zu%s div %d [%zu]: %.17g, want %.17g",
					 DTN[d], OPN[o], ns, len, inplace ? " in place" : "",
					 div, i, g, w);
		} else {
			int64_t v[MAXSRC], w, g = geti(dt, dst, i);

			v[0] = geti(dt, in0, i);
			for (int q = 1; q < ns; q++)
				v[q] = geti(dt, s[q], i);
			w = ref_int(dt, OPS[o], v, ns, div);
			if (g != w)
				fail_msg("%s %s nsrc %d len %zu%s div %d [%zu]: %lld, want %lld",
					 DTN[d], OPN[o], ns, len, inplace ? " in place" : "",
					 div, i, (long long)g, (long long)w);
		}
	}
}

static void bufs_alloc(struct bufs *b)
{
	for (int q = 0; q < MAXSRC; q++) {
		b->src[q] = calloc(MAXN + 1, 8);
		assert_non_null(b->src[q]);
	}
	b->dst = calloc(MAXN + 1, 8);
	assert_non_null(b->dst);
}

static void bufs_free(struct bufs *b)
{
	for (int q = 0; q < MAXSRC; q++)
		free(b->src[q]);
	free(b->dst);
}

/* Every dtype x op x length x nsrc, separate and in place, aligned and one
 * element off; avg with div = nsrc, 0 (a partial step: a plain sum) and 3. */
static void test_all_cases(void **state)
{
	struct bufs b;
	uint64_t seed = 0x9e3779b97f4a7c15ull;

	(void)state;
	bufs_alloc(&b);
	for (int d = 0; d < 6; d++)
		for (int o = 0; o < 4; o++)
			for (size_t li = 0; li < sizeof(LENS) / sizeof(LENS[0]); li++)
				for (int ns = 1; ns <= MAXSRC; ns++)
					for (int ip = 0; ip < 2; ip++) {
						int divs[3] = { ns, 0, 3 };
						int ndiv = OPS[o] == DPG_AVG ? 3 : 1;

						for (int k = 0; k < ndiv; k++)
							check_case(&b, d, o, ns, LENS[li], ip,
								   OPS[o] == DPG_AVG ? divs[k] : 0,
								   (li + (size_t)ip) % 2, &seed);
					}
	bufs_free(&b);
}

/* A div given with op != AVG is ignored. */
static void test_div_only_for_avg(void **state)
{
	struct bufs b;
	uint64_t seed = 77;

	(void)state;
	bufs_alloc(&b);
	for (int d = 0; d < 6; d++)
		for (int o = 0; o < 4; o++)
			if (OPS[o] != DPG_AVG)
				check_case(&b, d, o, 3, 1000, false, 0, 0, &seed);
	/* and the same inputs with div = 7 give the same bits */
	for (int d = 0; d < 6; d++) {
		size_t es = dpg_dtype_size(DTYPES[d]);
		const void *s[2] = { b.src[0], b.src[1] };
		char *again = malloc(1000 * es);

		assert_non_null(again);
		for (size_t i = 0; i < 1000; i++) {
			rnd_elem(DTYPES[d], &seed, b.src[0] + i * es);
			rnd_elem(DTYPES[d], &seed, b.src[1] + i * es);
		}
		dpg_reduce_n(b.dst, s, 2, 1000, DTYPES[d], DPG_SUM, 0);
		dpg_reduce_n(again, s, 2, 1000, DTYPES[d], DPG_SUM, 7);
		assert_memory_equal(again, b.dst, 1000 * es);
		dpg_reduce2(again, s[0], s[1], 1000, DTYPES[d], DPG_SUM, 0);
		assert_memory_equal(again, b.dst, 1000 * es);
		free(again);
	}
	bufs_free(&b);
}

static void put_nan(dpg_dtype_t dt, void *b, size_t i)
{
	switch (dt) {
	case DPG_F32:
		((float *)b)[i] = NAN;
		break;
	case DPG_F64:
		((double *)b)[i] = NAN;
		break;
	case DPG_F16:
		((uint16_t *)b)[i] = 0x7e00;
		break;
	default:
		((uint16_t *)b)[i] = 0x7fc0;
		break;
	}
}

/* A NaN in any source at any position makes that element NaN for every op
 * (min / max included), and only that element. */
static void test_nan_propagates(void **state)
{
	struct bufs b;
	uint64_t seed = 5;
	const size_t len = 1000, where[] = { 0, 1, 15, 16, 31, 500, 998, 999 };

	(void)state;
	bufs_alloc(&b);
	for (int d = 0; d < 4; d++)
		for (int o = 0; o < 4; o++)
			for (int ns = 1; ns <= MAXSRC; ns++)
				for (int nq = 0; nq < ns; nq++) {
					dpg_dtype_t dt = DTYPES[d];
					size_t es = dpg_dtype_size(dt);
					const void *s[MAXSRC];

					for (int q = 0; q < ns; q++) {
						for (size_t i = 0; i < len; i++)
							rnd_elem(dt, &seed, b.src[q] + i * es);
						s[q] = b.src[q];
					}
					for (size_t k = 0; k < sizeof(where) / sizeof(where[0]); k++)
						put_nan(dt, b.src[nq], where[k]);
					dpg_reduce_n(b.dst, s, ns, len, dt, OPS[o],
						     OPS[o] == DPG_AVG ? ns : 0);
					for (size_t i = 0, k = 0; i < len; i++) {
						bool want = k < sizeof(where) / sizeof(where[0]) &&
							    where[k] == i;

						if (want)
							k++;
						if (isnan(getf(dt, b.dst, i)) != want)
							fail_msg("%s %s nsrc %d NaN in src %d: [%zu] %g",
								 DTN[d], OPN[o], ns, nq, i,
								 getf(dt, b.dst, i));
					}
				}
	bufs_free(&b);
}

/* Sums that fall exactly halfway between two 16-bit values round to the
 * even one, on every lane of a long vector. */
static void test_ties_to_even(void **state)
{
	static const struct {
		dpg_dtype_t dt;
		uint16_t a, b, want;
	} ties[] = {
		{ DPG_F16, 0x3c00, 0x1000, 0x3c00 },	/* 1 + 2^-11 -> 1 */
		{ DPG_F16, 0x3c01, 0x1000, 0x3c02 },	/* (1 + 2^-10) + 2^-11 -> up */
		{ DPG_F16, 0xbc01, 0x9000, 0xbc02 },	/* negative, up in magnitude */
		{ DPG_F16, 0x3c00, 0x1200, 0x3c01 },	/* 1 + 1.5 * 2^-11: above the tie */
		{ DPG_F16, 0x7bff, 0x4c00, 0x7c00 },	/* 65504 + 16: tie, odd -> Inf */
		{ DPG_BF16, 0x3f80, 0x3b80, 0x3f80 },	/* 1 + 2^-8 -> 1 */
		{ DPG_BF16, 0x3f81, 0x3b80, 0x3f82 },	/* (1 + 2^-7) + 2^-8 -> up */
		{ DPG_BF16, 0xbf81, 0xbb80, 0xbf82 },
		{ DPG_BF16, 0x3f80, 0x3bc0, 0x3f81 },	/* 1 + 1.5 * 2^-8: above */
	};
	const size_t len = 4097;
	uint16_t *a = malloc(len * 2), *b = malloc(len * 2), *d = malloc(len * 2);

	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(d);
	for (size_t t = 0; t < sizeof(ties) / sizeof(ties[0]); t++) {
		for (size_t i = 0; i < len; i++) {
			a[i] = ties[t].a;
			b[i] = ties[t].b;
		}
		dpg_reduce2(d, a, b, len, ties[t].dt, DPG_SUM, 0);
		for (size_t i = 0; i < len; i++)
			if (d[i] != ties[t].want)
				fail_msg("tie %zu [%zu]: 0x%04x, want 0x%04x", t, i, d[i],
					 ties[t].want);
	}
	/* avg: 3 / 2 = 1.5 exact; (1 + 2^-10) / 2 in f16 is exact too */
	for (size_t i = 0; i < len; i++) {
		a[i] = 0x3c00;	/* 1 */
		b[i] = 0x4000;	/* 2 */
	}
	dpg_reduce2(d, a, b, len, DPG_F16, DPG_AVG, 2);
	for (size_t i = 0; i < len; i++)
		assert_int_equal(d[i], 0x3e00);	/* 1.5 */
	free(a);
	free(b);
	free(d);
}

/* Integer sums wrap around (two's complement), never saturate. */
static void test_integer_wraparound(void **state)
{
	const size_t len = 33;
	int32_t a32[33], b32[33], c32[33], d32[33];
	int64_t a64[33], b64[33], d64[33];

	(void)state;
	for (size_t i = 0; i < len; i++) {
		a32[i] = INT32_MAX;
		b32[i] = (int32_t)i + 1;
		c32[i] = INT32_MIN;
		a64[i] = INT64_MAX;
		b64[i] = (int64_t)i + 1;
	}
	dpg_reduce2(d32, a32, b32, len, DPG_I32, DPG_SUM, 0);
	dpg_reduce2(d64, a64, b64, len, DPG_I64, DPG_SUM, 0);
	for (size_t i = 0; i < len; i++) {
		assert_int_equal(d32[i], INT32_MIN + (int32_t)i);
		assert_true(d64[i] == INT64_MIN + (int64_t)i);
	}
	{
		const void *s[4] = { c32, c32, c32, b32 };	/* 3 * INT32_MIN + (i + 1) */

		dpg_reduce_n(d32, s, 4, len, DPG_I32, DPG_SUM, 0);
		for (size_t i = 0; i < len; i++)
			assert_int_equal(d32[i], INT32_MIN + (int32_t)i + 1);
	}
	/* avg truncates toward zero: (-7) / 2 = -3 */
	for (size_t i = 0; i < len; i++) {
		a32[i] = -4;
		b32[i] = -3;
	}
	dpg_reduce2(d32, a32, b32, len, DPG_I32, DPG_AVG, 2);
	for (size_t i = 0; i < len; i++)
		assert_int_equal(d32[i], -3);
}

/* Integer avg sums in a wider type: avg(2e9, 2e9) = 2e9 (a sum in i32 would
 * wrap to a negative number), the same for i64 near its limits, for the bulk
 * kernel, the accumulator steps of the ring and the element reference. */
static void test_int_avg_no_wrap(void **state)
{
	int32_t a32[40], d32[40];
	int64_t a64[40], d64[40], acc[40 * 2];
	const void *s32[3] = { a32, a32, a32 }, *s64[3] = { a64, a64, a64 };

	(void)state;
	for (int i = 0; i < 40; i++) {
		a32[i] = i % 2 ? -2000000000 : 2000000000;
		a64[i] = i % 2 ? INT64_MIN + 1 : INT64_MAX - (int64_t)i;
	}
	for (int ns = 2; ns <= 3; ns++) {
		dpg_reduce_n(d32, s32, ns, 40, DPG_I32, DPG_AVG, ns);
		dpg_reduce_n(d64, s64, ns, 40, DPG_I64, DPG_AVG, ns);
		for (int i = 0; i < 40; i++) {
			assert_int_equal(d32[i], a32[i]);
			assert_true(d64[i] == a64[i]);
		}
	}
	for (int i = 0; i < 40; i++) {
		dpg_red_elem(d32, a32, a32, (size_t)i, DPG_I32, DPG_AVG, 2);
		dpg_red_elem(d64, a64, a64, (size_t)i, DPG_I64, DPG_AVG, 2);
		assert_int_equal(d32[i], a32[i]);
		assert_true(d64[i] == a64[i]);
	}
	/* three ranks through the ring's accumulators: (a + a) + a, / 3 */
	assert_int_equal(dpg_reduce_acc_size(DPG_I32, DPG_AVG), 8);
	assert_int_equal(dpg_reduce_acc_size(DPG_I64, DPG_AVG), 16);
	assert_int_equal(dpg_reduce_acc_size(DPG_I32, DPG_SUM), 0);
	dpg_reduce_acc(acc, a32, a32, false, 40, DPG_I32);
	dpg_reduce_acc_final(d32, a32, acc, 40, DPG_I32, DPG_AVG, 3);
	dpg_reduce_acc(acc, a64, a64, false, 40, DPG_I64);
	dpg_reduce_acc_final(d64, a64, acc, 40, DPG_I64, DPG_AVG, 3);
	for (int i = 0; i < 40; i++) {
		assert_int_equal(d32[i], a32[i]);
		assert_true(d64[i] == a64[i]);
	}
}

/* Unknown dtype or op, no source, zero count: dst untouched. */
static void test_noop_cases(void **state)
{
	float a[8], b[8], d[8];
	const void *s[2] = { a, b };

	(void)state;
	for (int i = 0; i < 8; i++) {
		a[i] = 1.0f;
		b[i] = 2.0f;
		d[i] = -9.0f;
	}
	dpg_reduce_n(d, s, 2, 8, (dpg_dtype_t)99, DPG_SUM, 0);
	dpg_reduce_n(d, s, 2, 8, DPG_F32, (dpg_op_t)99, 0);
	dpg_reduce_n(d, s, 0, 8, DPG_F32, DPG_SUM, 0);
	dpg_reduce_n(d, s, 2, 0, DPG_F32, DPG_SUM, 0);
	for (int i = 0; i < 8; i++)
		assert_true(d[i] == -9.0f);
	assert_int_equal(dpg_dtype_size((dpg_dtype_t)99), 0);
}

static void test_isa(void **state)
{
	const char *isa = dpg_reduce_isa();

	(void)state;
	assert_non_null(isa);
	assert_true(strcmp(isa, "avx512") == 0 || strcmp(isa, "avx2") == 0 ||
		    strcmp(isa, "generic") == 0);
	assert_string_equal(dpg_reduce_isa(), isa);	/* stable */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_all_cases),
		cmocka_unit_test(test_div_only_for_avg),
		cmocka_unit_test(test_nan_propagates),
		cmocka_unit_test(test_ties_to_even),
		cmocka_unit_test(test_integer_wraparound),
		cmocka_unit_test(test_int_avg_no_wrap),
		cmocka_unit_test(test_noop_cases),
		cmocka_unit_test(test_isa),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
