/* SPDX-License-Identifier: BSD-3-Clause */
/* test_parse.c - unit tests for lib/common/parse.c: dpg_parse_ulong's
 * strictness and bounds, dpg_hex_digit and dpg_int_list_parse. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "parse.h"

static void test_ulong_good(void **state)
{
	unsigned long v = 12345;

	(void)state;
	assert_int_equal(dpg_parse_ulong("0", 0, 10, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(dpg_parse_ulong("10", 0, 10, &v), 0);
	assert_int_equal(v, 10);
	assert_int_equal(dpg_parse_ulong("5", 5, 5, &v), 0);
	assert_int_equal(v, 5);
	assert_int_equal(dpg_parse_ulong("007", 0, 10, &v), 0);	/* decimal, not octal */
	assert_int_equal(v, 7);
	assert_int_equal(dpg_parse_ulong("08", 0, 10, &v), 0);
	assert_int_equal(v, 8);
	assert_int_equal(dpg_parse_ulong("18446744073709551615", 0, ULONG_MAX, &v), 0);
	assert_true(v == ULONG_MAX);
}

/* Rejected input leaves *out untouched. */
static void test_ulong_bad(void **state)
{
	static const char *const bad[] = {
		"", " 1", "1 ", "+1", "-1", "-0", "1x", "0x10", "1.0", "1e3",
		"\t1", "1\n", "a", "--1", "1,2",
		"18446744073709551616",		/* ULONG_MAX + 1: overflow */
		"99999999999999999999",		/* 20 digits, overflow */
		"000000000000000000001",	/* 21 characters */
	};
	unsigned long v = 4242;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (dpg_parse_ulong(bad[i], 0, ULONG_MAX, &v) != -1)
			fail_msg("accepted '%s'", bad[i]);
		assert_int_equal(v, 4242);
	}
	assert_int_equal(dpg_parse_ulong(NULL, 0, 10, &v), -1);
	assert_int_equal(dpg_parse_ulong("11", 0, 10, &v), -1);	/* above hi */
	assert_int_equal(dpg_parse_ulong("4", 5, 10, &v), -1);	/* below lo */
	assert_int_equal(dpg_parse_ulong("0", 1, 10, &v), -1);
	assert_int_equal(v, 4242);
}

static void test_hex_digit(void **state)
{
	(void)state;
	for (int c = 0; c < 256; c++) {
		int want = -1;

		if (c >= '0' && c <= '9')
			want = c - '0';
		else if (c >= 'a' && c <= 'f')
			want = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			want = c - 'A' + 10;
		assert_int_equal(dpg_hex_digit((char)c), want);
	}
}

/* Parse s and compare with the expected list (a -1 terminated array). */
static void list_ok(const char *s, const int *want)
{
	int out[64];
	size_t n = 99, k;
	struct dpg_err err = { "" };

	if (dpg_int_list_parse(s, out, 64, &n, &err) != 0)
		fail_msg("'%s' rejected: %s", s, err.msg);
	for (k = 0; want[k] >= 0; k++)
		;
	assert_int_equal(n, k);
	for (k = 0; k < n; k++)
		assert_int_equal(out[k], want[k]);
}

static void test_list_good(void **state)
{
	(void)state;
	list_ok("0", (const int[]){ 0, -1 });
	list_ok("7", (const int[]){ 7, -1 });
	list_ok("0,2,3", (const int[]){ 0, 2, 3, -1 });
	list_ok("0-3", (const int[]){ 0, 1, 2, 3, -1 });
	list_ok("3-3", (const int[]){ 3, -1 });
	list_ok("1,4-6,9", (const int[]){ 1, 4, 5, 6, 9, -1 });
	list_ok("2,1,2", (const int[]){ 2, 1, 2, -1 });	/* order and repeats kept */
	list_ok("4095", (const int[]){ 4095, -1 });
	list_ok("4094-4095", (const int[]){ 4094, 4095, -1 });
	list_ok("007", (const int[]){ 7, -1 });
}

static void test_list_bad(void **state)
{
	static const char *const bad[] = {
		",", "0,", ",0", "0,,1", "a", "0 ,1", " 0", "0 ", "-1", "1-",
		"-", "3-1", "0-1-2", "4096", "0-4096", "1+2", "0x1", "1;2",
		"12345678", "0,1\n", "1--2",
	};
	int out[16];
	size_t n;
	struct dpg_err err;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err.msg[0] = '\0';
		n = 99;
		if (dpg_int_list_parse(bad[i], out, 16, &n, &err) != -1)
			fail_msg("accepted '%s'", bad[i]);
		assert_int_equal(n, 0);
		if (strstr(err.msg, "invalid device list") == NULL)
			fail_msg("'%s': message '%s'", bad[i], err.msg);
	}
	err.msg[0] = '\0';
	assert_int_equal(dpg_int_list_parse("", out, 16, &n, &err), -1);
	assert_int_equal(n, 0);
	assert_string_equal(err.msg, "empty device list");
	assert_int_equal(dpg_int_list_parse(NULL, out, 16, &n, &err), -1);
	assert_string_equal(err.msg, "empty device list");
	/* a NULL err is allowed */
	assert_int_equal(dpg_int_list_parse("x", out, 16, &n, NULL), -1);
	/* the message quotes non-printable bytes */
	assert_int_equal(dpg_int_list_parse("1\x01", out, 16, &n, &err), -1);
	assert_non_null(strstr(err.msg, "'1\\x01'"));
}

static void test_list_capacity(void **state)
{
	int out[5] = { -7, -7, -7, -7, -7 };
	size_t n;
	struct dpg_err err = { "" };

	(void)state;
	assert_int_equal(dpg_int_list_parse("0-3", out, 4, &n, &err), 0);
	assert_int_equal(n, 4);
	assert_int_equal(out[4], -7);
	assert_int_equal(dpg_int_list_parse("0-4", out, 4, &n, &err), -1);
	assert_non_null(strstr(err.msg, "names more than 4 devices"));
	assert_int_equal(out[4], -7);			/* never written past cap */
	assert_int_equal(dpg_int_list_parse("1,2,3,4,5", out, 4, &n, &err), -1);
	assert_non_null(strstr(err.msg, "more than 4"));
	assert_int_equal(out[4], -7);
	assert_int_equal(dpg_int_list_parse("0", out, 0, &n, &err), -1);
	assert_non_null(strstr(err.msg, "more than 0"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ulong_good),
		cmocka_unit_test(test_ulong_bad),
		cmocka_unit_test(test_hex_digit),
		cmocka_unit_test(test_list_good),
		cmocka_unit_test(test_list_bad),
		cmocka_unit_test(test_list_capacity),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
