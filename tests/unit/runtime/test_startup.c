/* SPDX-License-Identifier: BSD-3-Clause */
/* test_startup.c - unit tests for lib/runtime/startup.c: DPG_VERBOSE and
 * DPG_STARTUP_PLAN as read, and the startup line's exact format. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <regex.h>
#include <stdio.h>
#include <string.h>

#include "startup.h"

/* The documented grep pattern (libdpg.3, spank-dpg.8, tests/e2e). */
#define LINE_RE "^dpg: startup rank [0-9]+ \\([^)]*\\): plan ([0-9]+\\.[0-9] ms " \
	"\\((live|cached|xml)\\)|-), rendezvous [0-9]+\\.[0-9] ms, backend " \
	"[0-9]+\\.[0-9] ms \\([a-z+]+\\), first collective [0-9]+\\.[0-9] ms \\([a-z_]+\\)$"

static const char *env_verbose, *env_plan;

static const char *fake_get(const char *name)
{
	if (strcmp(name, "DPG_VERBOSE") == 0)
		return env_verbose;
	if (strcmp(name, "DPG_STARTUP_PLAN") == 0)
		return env_plan;
	return NULL;
}

static void test_parse_plan(void **state)
{
	char how[16];
	double ms;

	(void)state;
	assert_int_equal(dpg_startup_parse_plan("2.134 cached", &ms, how, sizeof(how)), 0);
	assert_true(ms > 2.133 && ms < 2.135);
	assert_string_equal(how, "cached");
	assert_int_equal(dpg_startup_parse_plan("0 live", &ms, how, sizeof(how)), 0);
	assert_int_equal(dpg_startup_parse_plan("2.1", &ms, how, sizeof(how)), -1);
	assert_int_equal(dpg_startup_parse_plan("x live", &ms, how, sizeof(how)), -1);
	assert_int_equal(dpg_startup_parse_plan("-1 live", &ms, how, sizeof(how)), -1);
	assert_int_equal(dpg_startup_parse_plan("1 li ve", &ms, how, sizeof(how)), -1);
	assert_int_equal(dpg_startup_parse_plan("1 LIVE", &ms, how, sizeof(how)), -1);
	assert_int_equal(dpg_startup_parse_plan("1 averyveryverylongword", &ms, how, sizeof(how)), -1);
	assert_int_equal(dpg_startup_parse_plan(NULL, &ms, how, sizeof(how)), -1);
}

static void test_begin(void **state)
{
	struct dpg_startup s;

	(void)state;
	env_verbose = NULL;
	env_plan = NULL;
	dpg_startup_begin(&s, fake_get);
	assert_false(s.verbose);
	assert_true(s.plan_ms < 0);
	assert_true(s.t0_ns > 0);
	env_verbose = "0";
	dpg_startup_begin(&s, fake_get);
	assert_false(s.verbose);
	env_verbose = "1";
	env_plan = "4.5 xml";
	dpg_startup_begin(&s, fake_get);
	assert_true(s.verbose);
	assert_string_equal(s.plan_how, "xml");
	env_plan = "garbage";
	dpg_startup_begin(&s, fake_get);
	assert_true(s.plan_ms < 0);
}

static void test_format(void **state)
{
	struct dpg_startup s = { 0 };
	char line[300];
	regex_t re;

	(void)state;
	assert_int_equal(regcomp(&re, LINE_RE, REG_EXTENDED | REG_NOSUB), 0);
	s.plan_ms = 2.14;
	snprintf(s.plan_how, sizeof(s.plan_how), "cached");
	s.t0_ns = 1000000000;
	s.joined_ns = s.t0_ns + 12300000;
	s.backend_ns = s.joined_ns + 4500000;
	s.first_ms = 0.84;
	snprintf(s.first_kind, sizeof(s.first_kind), "allreduce");
	assert_int_equal(dpg_startup_format(&s, 0, "n1", "shm+tcp", line, sizeof(line)), 0);
	assert_string_equal(line, "dpg: startup rank 0 (n1): plan 2.1 ms (cached), rendezvous "
			    "12.3 ms, backend 4.5 ms (shm+tcp), first collective 0.8 ms (allreduce)");
	assert_int_equal(regexec(&re, line, 0, NULL, 0), 0);
	s.plan_ms = -1;
	assert_int_equal(dpg_startup_format(&s, 4, "n2", "tcp", line, sizeof(line)), 0);
	assert_string_equal(line, "dpg: startup rank 4 (n2): plan -, rendezvous 12.3 ms, "
			    "backend 4.5 ms (tcp), first collective 0.8 ms (allreduce)");
	assert_int_equal(regexec(&re, line, 0, NULL, 0), 0);
	/* too small a buffer is an error, never a cut line */
	assert_int_equal(dpg_startup_format(&s, 4, "n2", "tcp", line, 20), -1);
	regfree(&re);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_plan),
		cmocka_unit_test(test_begin),
		cmocka_unit_test(test_format),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
