/* SPDX-License-Identifier: BSD-3-Clause */
/* test_zlayout.c - the sharded model's layout (lib/train/zlayout.c): padding to
 * any group size, shard offsets, ownership ranges and the refusals. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "zlayout.h"

static const char *const NAMES[] = { "w1", "b1", "w2", "b2", "w3" };
static const size_t NUMEL[] = { 1000, 7, 33, 1, 100 };
static const int UNIT[] = { 0, 0, 1, 1, 2 };

static void test_padding_any_group(void **state)
{
	(void)state;
	for (int n = 1; n <= 9; n++) {
		struct dpg_zlayout L;
		struct dpg_err e = { "" };
		size_t shard_off = 0, flat_off = 0, real = 0;

		assert_int_equal(dpg_zlayout_build(&L, 5, NAMES, NUMEL, UNIT, n, &e), 0);
		assert_int_equal(L.nunits, 3);
		assert_int_equal(L.nranks, n);
		for (int u = 0; u < 3; u++) {
			const struct dpg_zunit *U = &L.u[u];

			assert_true(U->padded >= U->numel);
			assert_true(U->padded - U->numel < (size_t)n * DPG_ZALIGN);
			assert_int_equal(U->padded % ((size_t)n * DPG_ZALIGN), 0);
			assert_int_equal(U->shard * (size_t)n, U->padded);
			assert_int_equal(U->shard_off, shard_off);
			assert_int_equal(U->flat_off, flat_off);
			shard_off += U->shard;
			flat_off += U->padded;
			real += U->numel;
		}
		assert_int_equal(L.shard_numel, shard_off);
		assert_int_equal(L.padded_numel, flat_off);
		assert_int_equal(L.numel, real);
		assert_int_equal(L.numel, 1000 + 7 + 33 + 1 + 100);
		/* parameters back to back inside their unit */
		assert_int_equal(L.p[0].unit_off, 0);
		assert_int_equal(L.p[1].unit_off, 1000);
		assert_int_equal(L.p[2].unit_off, 0);
		assert_int_equal(L.p[3].unit_off, 33);
		assert_int_equal(L.u[0].numel, 1007);
		assert_int_equal(L.u[0].first_param, 0);
		assert_int_equal(L.u[1].nparams, 2);
		dpg_zlayout_free(&L);
	}
}

static void test_shard_ranges_cover(void **state)
{
	(void)state;
	for (int n = 1; n <= 7; n++) {
		struct dpg_zlayout L;

		assert_int_equal(dpg_zlayout_build(&L, 5, NAMES, NUMEL, UNIT, n, NULL), 0);
		for (int u = 0; u < L.nunits; u++) {
			size_t covered = 0, prev_hi = 0;

			for (int r = 0; r < n; r++) {
				size_t lo, hi;

				dpg_zlayout_shard_range(&L, u, r, &lo, &hi);
				assert_true(lo <= hi);
				assert_true(hi <= L.u[u].numel);
				assert_int_equal(lo, prev_hi);	/* contiguous, disjoint */
				covered += hi - lo;
				prev_hi = hi;
			}
			assert_int_equal(covered, L.u[u].numel);
		}
		dpg_zlayout_free(&L);
	}
}

static void test_refusals(void **state)
{
	struct dpg_zlayout L;
	struct dpg_err e = { "" };
	const char *names[] = { "a", "b" };
	const char *empty[] = { "a", "" };
	const char *longn[] = { "a",
		"0123456789012345678901234567890123456789012345678901234567890123456789" };
	size_t numel[] = { 4, 4 }, zero[] = { 4, 0 };
	int skip[] = { 0, 2 }, start1[] = { 1, 1 }, down[] = { 1, 0 }, ok[] = { 0, 1 };

	(void)state;
	assert_int_equal(dpg_zlayout_build(&L, 2, names, numel, skip, 2, &e), -1);
	assert_non_null(strstr(e.msg, "unit 2 after unit 0"));
	dpg_zlayout_free(&L);
	assert_int_equal(dpg_zlayout_build(&L, 2, names, numel, start1, 2, &e), -1);
	assert_int_equal(dpg_zlayout_build(&L, 2, names, numel, down, 2, &e), -1);
	assert_int_equal(dpg_zlayout_build(&L, 2, empty, numel, ok, 2, &e), -1);
	assert_non_null(strstr(e.msg, "empty name"));
	assert_int_equal(dpg_zlayout_build(&L, 2, longn, numel, ok, 2, &e), -1);
	assert_non_null(strstr(e.msg, "longer than"));
	assert_int_equal(dpg_zlayout_build(&L, 2, names, zero, ok, 2, &e), -1);
	assert_non_null(strstr(e.msg, "zero elements"));
	assert_int_equal(dpg_zlayout_build(&L, 0, names, numel, ok, 2, &e), -1);
	assert_int_equal(dpg_zlayout_build(&L, 2, names, numel, ok, 0, &e), -1);
	{
		size_t huge[] = { SIZE_MAX - 3, 8 };

		assert_int_equal(dpg_zlayout_build(&L, 2, names, huge, (int[]){ 0, 0 }, 2, &e), -1);
		assert_non_null(strstr(e.msg, "overflow"));
	}
	dpg_zlayout_free(&L);
}

static void test_same_model(void **state)
{
	struct dpg_zlayout a, b, c;
	struct dpg_err e = { "" };
	const char *renamed[] = { "w1", "b1", "w2", "bX", "w3" };
	int unit2[] = { 0, 1, 1, 1, 2 };

	(void)state;
	assert_int_equal(dpg_zlayout_build(&a, 5, NAMES, NUMEL, UNIT, 4, NULL), 0);
	assert_int_equal(dpg_zlayout_build(&b, 5, NAMES, NUMEL, UNIT, 3, NULL), 0);
	assert_int_equal(dpg_zlayout_same_model(&a, &b, &e), 1);	/* group size is not the model */
	assert_int_equal(dpg_zlayout_build(&c, 5, renamed, NUMEL, UNIT, 4, NULL), 0);
	assert_int_equal(dpg_zlayout_same_model(&c, &a, &e), 0);
	assert_non_null(strstr(e.msg, "'bX', expected 'b2'"));
	dpg_zlayout_free(&c);
	assert_int_equal(dpg_zlayout_build(&c, 5, NAMES, NUMEL, unit2, 4, NULL), 0);
	assert_int_equal(dpg_zlayout_same_model(&c, &a, &e), 0);
	assert_non_null(strstr(e.msg, "b1"));
	dpg_zlayout_free(&c);
	assert_int_equal(dpg_zlayout_build(&c, 4, NAMES, NUMEL, UNIT, 4, NULL), 0);
	assert_int_equal(dpg_zlayout_same_model(&c, &a, &e), 0);
	dpg_zlayout_free(&a);
	dpg_zlayout_free(&b);
	dpg_zlayout_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_padding_any_group),
		cmocka_unit_test(test_shard_ranges_cover),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_same_model),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
