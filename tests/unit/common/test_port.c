/* SPDX-License-Identifier: BSD-3-Clause */
/* test_port.c - unit tests for lib/common/port.c: the MASTER_PORT formula, its
 * stride, and the parsers for port ranges, single ports and RESV_PORTS. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "port.h"

#define PHI_INV 0.6180339887498949

static const struct dpg_port_range default_range = {
	DPG_PORT_DEFAULT_LO, DPG_PORT_DEFAULT_HI
};

/* Ranges exercised everywhere: default, tiny, full, odd sizes, top end. */
static const struct dpg_port_range ranges[] = {
	{ DPG_PORT_DEFAULT_LO, DPG_PORT_DEFAULT_HI },
	{ 1024, 1024 },
	{ 1024, 1025 },
	{ 1024, 1026 },
	{ 1024, 65535 },
	{ 29500, 29507 },
	{ 60000, 65535 },
	{ 65535, 65535 },
	{ 12000, 12999 },
};
#define NRANGES (sizeof(ranges) / sizeof(ranges[0]))

/* Job/step ids worth trying: small, realistic, Slurm's special step ids
 * (SLURM_BATCH_SCRIPT etc. sit just below 0xffffffff) and the maximum. */
static const uint32_t ids[] = {
	0, 1, 2, 3, 7, 12767, 12768, 12769, 65535, 65536, 4000000, 4012345,
	99999999, 0x7fffffffu, 0x80000000u, 0xfffffffau, 0xfffffffbu,
	0xfffffffcu, 0xfffffffdu, 0xfffffffeu, 0xffffffffu,
};
#define NIDS (sizeof(ids) / sizeof(ids[0]))

static uint32_t range_size(struct dpg_port_range r)
{
	return (uint32_t)r.hi - r.lo + 1;
}

static uint32_t gcd32(uint32_t a, uint32_t b)
{
	while (b != 0) {
		uint32_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

/* Independent statement of the documented formula, in 64-bit arithmetic
 * without the early reductions port.c does. */
static uint16_t ref_port(uint32_t job, uint32_t step, struct dpg_port_range r)
{
	uint64_t size = range_size(r);
	uint64_t v = (uint64_t)job + (uint64_t)step * dpg_port_stride((uint32_t)size);

	return (uint16_t)(r.lo + v % size);
}

/* A bitmap of "port already seen" for one range. */
struct seen {
	unsigned char *bits;
	struct dpg_port_range r;
};

static void seen_init(struct seen *s, struct dpg_port_range r)
{
	s->r = r;
	s->bits = calloc(range_size(r) / 8 + 1, 1);
	assert_non_null(s->bits);
}

/* Returns 1 if p was new, 0 if it had been seen already. */
static int seen_add(struct seen *s, uint16_t p)
{
	uint32_t i;
	unsigned char m;

	assert_in_range(p, s->r.lo, s->r.hi);
	i = (uint32_t)p - s->r.lo;
	m = (unsigned char)(1u << (i % 8));
	if (s->bits[i / 8] & m)
		return 0;
	s->bits[i / 8] |= m;
	return 1;
}

static void seen_free(struct seen *s)
{
	free(s->bits);
	s->bits = NULL;
}

/* ------------------------------------------------------- dpg_port_for_step */

static void test_for_step_in_range(void **state)
{
	(void)state;
	for (size_t r = 0; r < NRANGES; r++)
		for (size_t j = 0; j < NIDS; j++)
			for (size_t s = 0; s < NIDS; s++) {
				uint16_t p = dpg_port_for_step(ids[j], ids[s], ranges[r]);

				assert_in_range(p, ranges[r].lo, ranges[r].hi);
			}
	/* a dense sweep too */
	for (uint32_t job = 4000000; job < 4000000 + 300; job++)
		for (uint32_t step = 0; step < 300; step++)
			for (size_t r = 0; r < NRANGES; r++) {
				uint16_t p = dpg_port_for_step(job, step, ranges[r]);

				assert_in_range(p, ranges[r].lo, ranges[r].hi);
			}
}

static void test_for_step_matches_formula(void **state)
{
	(void)state;
	for (size_t r = 0; r < NRANGES; r++)
		for (size_t j = 0; j < NIDS; j++)
			for (size_t s = 0; s < NIDS; s++)
				assert_int_equal(dpg_port_for_step(ids[j], ids[s], ranges[r]),
						 ref_port(ids[j], ids[s], ranges[r]));
	for (uint32_t job = 0; job < 200; job++)
		for (uint32_t step = 0; step < 50; step++)
			assert_int_equal(dpg_port_for_step(job, step, default_range),
					 ref_port(job, step, default_range));
}

static void test_for_step_known_values(void **state)
{
	(void)state;
	/* R = 12768, S = 7891; 4000000 mod 12768 = 3616 */
	assert_int_equal(dpg_port_stride(12768), 7891);
	assert_int_equal(dpg_port_for_step(4000000, 0, default_range), 23616);
	assert_int_equal(dpg_port_for_step(4000001, 0, default_range), 23617);
	assert_int_equal(dpg_port_for_step(4000000, 1, default_range),
			 20000 + (3616 + 7891) % 12768);
	assert_int_equal(dpg_port_for_step(4000000, 2, default_range),
			 20000 + (3616 + 2 * 7891) % 12768);
	assert_int_equal(dpg_port_for_step(0, 0, default_range), 20000);
	/* 0xffffffff mod 12768 = 3615 */
	assert_int_equal(dpg_port_for_step(0xffffffffu, 0, default_range),
			 20000 + 3615);
}

static void test_for_step_deterministic(void **state)
{
	(void)state;
	for (size_t r = 0; r < NRANGES; r++)
		for (size_t j = 0; j < NIDS; j++)
			for (size_t s = 0; s < NIDS; s++) {
				uint16_t a = dpg_port_for_step(ids[j], ids[s], ranges[r]);
				uint16_t b = dpg_port_for_step(ids[j], ids[s], ranges[r]);

				assert_int_equal(a, b);
			}
}

/* Steps 0..R-1 of one job get R different ports. */
static void test_for_step_steps_distinct(void **state)
{
	static const uint32_t jobs[] = { 0, 1, 4000000, 4012345, 0xffffffffu };

	(void)state;
	for (size_t r = 0; r < NRANGES; r++) {
		uint32_t size = range_size(ranges[r]);

		for (size_t j = 0; j < sizeof(jobs) / sizeof(jobs[0]); j++) {
			struct seen seen;

			seen_init(&seen, ranges[r]);
			for (uint32_t step = 0; step < size; step++)
				assert_true(seen_add(&seen,
					dpg_port_for_step(jobs[j], step, ranges[r])));
			/* step R wraps onto step 0 */
			assert_int_equal(dpg_port_for_step(jobs[j], size, ranges[r]),
					 dpg_port_for_step(jobs[j], 0, ranges[r]));
			seen_free(&seen);
		}
	}
}

/* Any R consecutive job ids get R different ports for a given step. */
static void test_for_step_consecutive_jobs_distinct(void **state)
{
	static const uint32_t starts[] = { 0, 4000000, 0xffffffffu - 65536 };
	static const uint32_t steps[] = { 0, 1, 5, 0xfffffffbu };

	(void)state;
	for (size_t r = 0; r < NRANGES; r++) {
		uint32_t size = range_size(ranges[r]);

		for (size_t a = 0; a < sizeof(starts) / sizeof(starts[0]); a++)
			for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
				struct seen seen;

				seen_init(&seen, ranges[r]);
				for (uint32_t k = 0; k < size; k++)
					assert_true(seen_add(&seen,
						dpg_port_for_step(starts[a] + k, steps[s],
								  ranges[r])));
				seen_free(&seen);
			}
	}
}

static void test_for_step_tiny_ranges(void **state)
{
	struct dpg_port_range one = { 1024, 1024 }, two = { 1024, 1025 };

	(void)state;
	for (size_t j = 0; j < NIDS; j++)
		for (size_t s = 0; s < NIDS; s++)
			assert_int_equal(dpg_port_for_step(ids[j], ids[s], one), 1024);
	/* R = 2: job parity picks the port, each step flips it */
	assert_int_equal(dpg_port_for_step(4000000, 0, two), 1024);
	assert_int_equal(dpg_port_for_step(4000001, 0, two), 1025);
	assert_int_equal(dpg_port_for_step(4000000, 1, two), 1025);
	assert_int_equal(dpg_port_for_step(4000001, 1, two), 1024);
	assert_int_equal(dpg_port_for_step(0xffffffffu, 0, two), 1025);
	assert_int_equal(dpg_port_for_step(0xffffffffu, 0xffffffffu, two), 1024);
}

static void test_for_step_full_range(void **state)
{
	struct dpg_port_range full = { 1024, 65535 };

	(void)state;
	assert_int_equal(dpg_port_for_step(0, 0, full), 1024);
	assert_int_equal(dpg_port_for_step(64511, 0, full), 65535);
	assert_int_equal(dpg_port_for_step(64512, 0, full), 1024);
	for (size_t j = 0; j < NIDS; j++)
		for (size_t s = 0; s < NIDS; s++)
			assert_in_range(dpg_port_for_step(ids[j], ids[s], full),
					1024, 65535);
}

/* ------------------------------------------------------- dpg_port_stride */

static void test_stride_small(void **state)
{
	(void)state;
	assert_int_equal(dpg_port_stride(1), 1);
	assert_int_equal(dpg_port_stride(2), 1);
	assert_int_equal(dpg_port_stride(3), 2);	/* 1.85 -> 2 */
	assert_int_equal(dpg_port_stride(5), 3);	/* 3.09 -> 3 */
	assert_int_equal(dpg_port_stride(8), 5);	/* 4.94 -> 5 */
	assert_int_equal(dpg_port_stride(10), 7);	/* 6.18 -> 6 shares 2 -> 7 */
}

static void test_stride_coprime_and_near_golden(void **state)
{
	(void)state;
	/* every range size a port range can have */
	for (uint32_t size = 2; size <= 65536 - 1024; size++) {
		uint32_t s = dpg_port_stride(size);
		double ideal = size * PHI_INV, dist = s > ideal ? s - ideal : ideal - s;

		assert_in_range(s, 1, size - 1);
		assert_int_equal(gcd32(s, size), 1);
		/* the nearest coprime is never far: for sizes < 2^16 the gap
		 * between integers coprime with the size is at most 22 */
		assert_true(dist <= 23.0);
		if (size >= 1000)
			assert_true(dist / size < 0.025);
	}
	assert_int_equal(dpg_port_stride(12768), 7891);
	assert_int_equal(dpg_port_stride(64512), 39871);
}

/* --------------------------------------------------------------- parsers */

/* The error message is non-empty and quotes what was wrong, verbatim or
 * escaped with dpg_err_quote(). */
static void assert_err_mentions(const struct dpg_err *err, const char *needle)
{
	char q[DPG_ERR_MSG_MAX];

	assert_true(err->msg[0] != '\0');
	assert_non_null(memchr(err->msg, '\0', sizeof(err->msg)));
	if (needle == NULL || needle[0] == '\0')
		return;
	if (strstr(err->msg, needle) == NULL &&
	    strstr(err->msg, dpg_err_quote(needle, q, sizeof(q))) == NULL)
		fail_msg("error message \"%s\" does not mention \"%s\"",
			 err->msg, needle);
}

static void test_range_parse_good(void **state)
{
	static const struct {
		const char *s;
		uint16_t lo, hi;
	} good[] = {
		{ "20000-32767", 20000, 32767 },
		{ "1024-65535", 1024, 65535 },
		{ "1024-1024", 1024, 1024 },
		{ "65535-65535", 65535, 65535 },
		{ "29500-29507", 29500, 29507 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		struct dpg_port_range r = { 0, 0 };
		struct dpg_err err = { { 0 } };

		assert_int_equal(dpg_port_range_parse(good[i].s, &r, &err), 0);
		assert_int_equal(r.lo, good[i].lo);
		assert_int_equal(r.hi, good[i].hi);
		assert_int_equal(err.msg[0], '\0');
	}
}

static void test_range_parse_bad(void **state)
{
	static const char *const bad[] = {
		"", "abc", "20000", "-", "-1-5", "5-1", "30000-20000",
		"20001-20000", "1000-2000", "1023-2000", "20000-70000",
		"20000-65536", "0-65535", "20000-", "-20000", " 20000-30000",
		"20000 -30000", "20000- 30000", "20000-30000 ", "20000-30000x",
		"x20000-30000", "+20000-30000", "20000-+30000", "20000--30000",
		"20000-30000-40000", "0x4e20-30000", "20000.0-30000",
		"99999999-1", "020000000-30000", "20000-0000030000",
		"20000\n-30000", "20000-30000\n", "\t20000-30000",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct dpg_port_range r = { 1, 2 };
		struct dpg_err err = { { 0 } };

		if (dpg_port_range_parse(bad[i], &r, &err) != -1)
			fail_msg("range \"%s\" was accepted as %u-%u", bad[i],
				 (unsigned)r.lo, (unsigned)r.hi);
		assert_err_mentions(&err, bad[i]);
	}
}

static void test_range_parse_null(void **state)
{
	struct dpg_port_range r = { 1, 2 };
	struct dpg_err err = { { 0 } };

	(void)state;
	assert_int_equal(dpg_port_range_parse(NULL, &r, &err), -1);
	assert_err_mentions(&err, NULL);
	/* a NULL err is allowed: the caller does not want the text */
	assert_int_equal(dpg_port_range_parse("5-1", &r, NULL), -1);
	assert_int_equal(dpg_port_range_parse("2000-3000", &r, NULL), 0);
}

static void test_range_parse_long_input(void **state)
{
	char big[4096];
	struct dpg_port_range r = { 1, 2 };
	struct dpg_err err = { { 0 } };

	(void)state;
	memset(big, '1', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	big[2000] = '-';
	assert_int_equal(dpg_port_range_parse(big, &r, &err), -1);
	assert_true(err.msg[0] != '\0');
	assert_true(strlen(err.msg) < sizeof(err.msg));
}

static void test_port_parse_good(void **state)
{
	static const struct {
		const char *s;
		uint16_t port;
	} good[] = {
		{ "1024", 1024 }, { "29500", 29500 }, { "65535", 65535 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		uint16_t p = 0;
		struct dpg_err err = { { 0 } };

		assert_int_equal(dpg_port_parse(good[i].s, &p, &err), 0);
		assert_int_equal(p, good[i].port);
	}
}

static void test_port_parse_bad(void **state)
{
	static const char *const bad[] = {
		"", "abc", "0", "1", "1023", "65536", "70000", "4294967296",
		"18446744073709551616", "-1", "+29500", " 29500", "29500 ",
		"29500x", "0x7338", "29500.0", "29,500", "29500-29501",
		"29500\n",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint16_t p = 4242;
		struct dpg_err err = { { 0 } };

		if (dpg_port_parse(bad[i], &p, &err) != -1)
			fail_msg("port \"%s\" was accepted as %u", bad[i], (unsigned)p);
		assert_int_equal(p, 4242);	/* untouched on error */
		assert_err_mentions(&err, bad[i]);
	}
	{
		uint16_t p = 4242;
		struct dpg_err err = { { 0 } };

		assert_int_equal(dpg_port_parse(NULL, &p, &err), -1);
		assert_int_equal(p, 4242);
		assert_err_mentions(&err, NULL);
		assert_int_equal(dpg_port_parse("1", &p, NULL), -1);
	}
}

static void test_from_resv_good(void **state)
{
	static const struct {
		const char *s;
		uint16_t port;
	} good[] = {
		{ "12000-12003", 12000 },
		{ "12000,12005", 12000 },
		{ "12000", 12000 },
		{ "12000-12003,12010-12011", 12000 },
		{ "1024", 1024 },
		{ "65535", 65535 },
		{ "65534-65535", 65534 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		uint16_t p = 0;
		struct dpg_err err = { { 0 } };

		assert_int_equal(dpg_port_from_resv(good[i].s, &p, &err), 0);
		assert_int_equal(p, good[i].port);
	}
}

static void test_from_resv_bad(void **state)
{
	/* malformed: the message quotes the whole value */
	static const char *const malformed[] = {
		"", "abc", "-12000", ",12000", " 12000", "12000 ", "12000x",
		"12000;12005", "12000 -12003", "[12000-12003]", "1234567890",
		"123456789-1", "0x2ee0",
	};
	/* well-formed but the first port is outside 1024-65535: the message
	 * quotes that port */
	static const struct {
		const char *s, *needle;
	} out_of_range[] = {
		{ "1000-1003", "1000" },
		{ "0", "0" },
		{ "70000-70003", "70000" },
		{ "65536,65537", "65536" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
		uint16_t p = 4242;
		struct dpg_err err = { { 0 } };

		if (dpg_port_from_resv(malformed[i], &p, &err) != -1)
			fail_msg("RESV_PORTS \"%s\" was accepted as %u",
				 malformed[i], (unsigned)p);
		assert_int_equal(p, 4242);
		assert_err_mentions(&err, malformed[i]);
	}
	for (size_t i = 0; i < sizeof(out_of_range) / sizeof(out_of_range[0]); i++) {
		uint16_t p = 4242;
		struct dpg_err err = { { 0 } };

		if (dpg_port_from_resv(out_of_range[i].s, &p, &err) != -1)
			fail_msg("RESV_PORTS \"%s\" was accepted as %u",
				 out_of_range[i].s, (unsigned)p);
		assert_int_equal(p, 4242);
		assert_err_mentions(&err, out_of_range[i].needle);
	}
	{
		uint16_t p = 4242;
		struct dpg_err err = { { 0 } };

		assert_int_equal(dpg_port_from_resv(NULL, &p, &err), -1);
		assert_int_equal(p, 4242);
		assert_err_mentions(&err, "SLURM_STEP_RESV_PORTS");
		assert_int_equal(dpg_port_from_resv("abc", &p, NULL), -1);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_for_step_in_range),
		cmocka_unit_test(test_for_step_matches_formula),
		cmocka_unit_test(test_for_step_known_values),
		cmocka_unit_test(test_for_step_deterministic),
		cmocka_unit_test(test_for_step_steps_distinct),
		cmocka_unit_test(test_for_step_consecutive_jobs_distinct),
		cmocka_unit_test(test_for_step_tiny_ranges),
		cmocka_unit_test(test_for_step_full_range),
		cmocka_unit_test(test_stride_small),
		cmocka_unit_test(test_stride_coprime_and_near_golden),
		cmocka_unit_test(test_range_parse_good),
		cmocka_unit_test(test_range_parse_bad),
		cmocka_unit_test(test_range_parse_null),
		cmocka_unit_test(test_range_parse_long_input),
		cmocka_unit_test(test_port_parse_good),
		cmocka_unit_test(test_port_parse_bad),
		cmocka_unit_test(test_from_resv_good),
		cmocka_unit_test(test_from_resv_bad),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
