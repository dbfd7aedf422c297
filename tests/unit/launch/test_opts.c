/* SPDX-License-Identifier: BSD-3-Clause */
/* test_opts.c - unit tests for lib/launch/opts.c: the value parsers of the
 * --dpg-* options (accepted boundaries, rejected forms, the message naming
 * the option), dpg_request_init, dpg_bind_parse and dpg_gpu_visibility_parse. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "opts.h"
#include "requeue.h"

/* Forms every numeric option must refuse. */
static const char *const bad_numbers[] = {
	"", " ", "-1", "+1", "-0", " 1", "1 ", "1\t", "\n1", "1x", "x1", "0x10",
	"1.0", "1e2", "1,2", "one", "--1", "99999999999999999999",
	"18446744073709551616", "123456789012345678901234",
};
#define NBAD (sizeof(bad_numbers) / sizeof(bad_numbers[0]))

static void test_request_init(void **state)
{
	struct dpg_request r;

	(void)state;
	memset(&r, 0x5a, sizeof(r));
	dpg_request_init(&r);
	assert_int_equal(r.gpus_per_task, -1);
	assert_int_equal(r.port, 0);
	assert_false(r.verbose);
	assert_int_equal(r.bind, -1);
	assert_int_equal(r.visibility, -1);
	assert_int_equal(r.requeue, -1);
}

static void test_gpus_per_task_good(void **state)
{
	static const struct { const char *s; int v; } good[] = {
		{ "0", 0 }, { "1", 1 }, { "8", 8 }, { "08", 8 }, { "63", 63 },
		{ "64", DPG_GPUS_PER_TASK_MAX },
	};
	struct dpg_err err = { "" };

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		int v = -5;

		assert_int_equal(dpg_opt_gpus_per_task(good[i].s, &v, &err), 0);
		assert_int_equal(v, good[i].v);
	}
}

static void test_gpus_per_task_bad(void **state)
{
	struct dpg_err err;
	int v = -5;

	(void)state;
	for (size_t i = 0; i < NBAD; i++) {
		err.msg[0] = '\0';
		if (dpg_opt_gpus_per_task(bad_numbers[i], &v, &err) != -1)
			fail_msg("accepted '%s'", bad_numbers[i]);
		assert_non_null(strstr(err.msg, "--dpg-gpus-per-task"));
	}
	assert_int_equal(dpg_opt_gpus_per_task("65", &v, &err), -1);
	assert_non_null(strstr(err.msg, "invalid --dpg-gpus-per-task value '65'"));
	assert_non_null(strstr(err.msg, "0-64"));
	assert_int_equal(dpg_opt_gpus_per_task(NULL, &v, &err), -1);
	assert_non_null(strstr(err.msg, "'(null)'"));
	assert_int_equal(dpg_opt_gpus_per_task("2\x7f", &v, &err), -1);
	assert_non_null(strstr(err.msg, "'2\\x7f'"));		/* quoted */
	assert_int_equal(dpg_opt_gpus_per_task("x", &v, NULL), -1);	/* NULL err */
	assert_int_equal(v, -5);
}

static void test_port_good(void **state)
{
	static const struct { const char *s; unsigned v; } good[] = {
		{ "1024", 1024 }, { "1025", 1025 }, { "29500", 29500 },
		{ "65534", 65534 }, { "65535", 65535 }, { "01024", 1024 },
	};
	struct dpg_err err = { "" };

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		uint16_t p = 7;

		assert_int_equal(dpg_opt_port(good[i].s, &p, &err), 0);
		assert_int_equal(p, good[i].v);
	}
}

static void test_port_bad(void **state)
{
	static const char *const range[] = { "0", "1", "1023", "65536", "70000",
					     "4294967296" };
	struct dpg_err err;
	uint16_t p = 7;

	(void)state;
	for (size_t i = 0; i < NBAD; i++) {
		err.msg[0] = '\0';
		if (dpg_opt_port(bad_numbers[i], &p, &err) != -1)
			fail_msg("accepted '%s'", bad_numbers[i]);
		assert_non_null(strstr(err.msg, "--dpg-port"));
	}
	for (size_t i = 0; i < sizeof(range) / sizeof(range[0]); i++) {
		char want[64];

		err.msg[0] = '\0';
		if (dpg_opt_port(range[i], &p, &err) != -1)
			fail_msg("accepted '%s'", range[i]);
		snprintf(want, sizeof(want), "invalid --dpg-port value '%s'", range[i]);
		assert_non_null(strstr(err.msg, want));
		assert_non_null(strstr(err.msg, "1024-65535"));
	}
	assert_int_equal(dpg_opt_port(NULL, &p, &err), -1);
	assert_non_null(strstr(err.msg, "--dpg-port value '(null)'"));
	assert_int_equal(p, 7);
}

static void test_bind(void **state)
{
	static const char *const bad[] = { "", "Closest", "CLOSEST", "closest ",
					   " none", "nonee", "close", "no", "1" };
	struct dpg_err err;
	enum dpg_bind b = (enum dpg_bind)99;

	(void)state;
	assert_int_equal(dpg_bind_parse("closest", &b, &err), 0);
	assert_int_equal(b, DPG_BIND_CLOSEST);
	assert_int_equal(dpg_bind_parse("none", &b, &err), 0);
	assert_int_equal(b, DPG_BIND_NONE);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[64];

		err.msg[0] = '\0';
		b = (enum dpg_bind)99;
		if (dpg_bind_parse(bad[i], &b, &err) != -1)
			fail_msg("accepted '%s'", bad[i]);
		assert_int_equal(b, 99);
		snprintf(want, sizeof(want), "invalid binding '%s'", bad[i]);
		assert_non_null(strstr(err.msg, want));
		assert_non_null(strstr(err.msg, "closest or none"));
	}
	assert_int_equal(dpg_bind_parse(NULL, &b, &err), -1);
	assert_non_null(strstr(err.msg, "'(null)'"));
	assert_int_equal(dpg_bind_parse("x", &b, NULL), -1);
}

static void test_visibility(void **state)
{
	static const char *const bad[] = { "", "Isolate", "isolated", "order",
					   "ordered ", " isolate", "all", "0" };
	struct dpg_err err;
	enum dpg_gpu_visibility v = (enum dpg_gpu_visibility)99;

	(void)state;
	assert_int_equal(dpg_gpu_visibility_parse("isolate", &v, &err), 0);
	assert_int_equal(v, DPG_VIS_ISOLATE);
	assert_int_equal(dpg_gpu_visibility_parse("ordered", &v, &err), 0);
	assert_int_equal(v, DPG_VIS_ORDERED);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[64];

		err.msg[0] = '\0';
		v = (enum dpg_gpu_visibility)99;
		if (dpg_gpu_visibility_parse(bad[i], &v, &err) != -1)
			fail_msg("accepted '%s'", bad[i]);
		assert_int_equal(v, 99);
		snprintf(want, sizeof(want), "invalid GPU visibility '%s'", bad[i]);
		assert_non_null(strstr(err.msg, want));
		assert_non_null(strstr(err.msg, "isolate or ordered"));
	}
	assert_int_equal(dpg_gpu_visibility_parse(NULL, &v, &err), -1);
	assert_non_null(strstr(err.msg, "'(null)'"));
	assert_int_equal(dpg_gpu_visibility_parse("x", &v, NULL), -1);
}

/* --dpg-requeue=GRACE and requeue=GRACE; the option on a command line */
static void test_requeue(void **state)
{
	static const char line[] = "sbatch\0-N3\0--dpg-requeue=60\0--dpg-requeue\0"
				   "90\0job.sh\0--\0--dpg-requeue=5";
	static const char none[] = "srun\0-n2\0./train";
	static const char bad[] = "srun\0--dpg-requeue=soon\0./train";
	static const char big[] = "sbatch\0--dpg-requeue\0" "100000\0job.sh";
	struct dpg_err err;
	char sig[32];
	int g = -1;

	(void)state;
	assert_int_equal(dpg_requeue_parse("--dpg-requeue", "120", &g, &err), 0);
	assert_int_equal(g, 120);
	assert_int_equal(dpg_requeue_parse("requeue", "0", &g, &err), 0);
	assert_int_equal(g, 0);
	assert_int_not_equal(dpg_requeue_parse("requeue", "-1", &g, &err), 0);
	assert_non_null(strstr(err.msg, "requeue '-1'"));
	/* Slurm's --signal sig_time is 0-65535: the largest GRACE it takes */
	assert_int_equal(dpg_requeue_parse("--dpg-requeue", "65535", &g, &err), 0);
	assert_int_equal(g, 65535);
	g = 7;
	assert_int_not_equal(dpg_requeue_parse("--dpg-requeue", "65536", &g, &err), 0);
	assert_int_equal(g, 7);
	assert_non_null(strstr(err.msg, "--dpg-requeue '65536'"));
	assert_non_null(strstr(err.msg, "0-65535"));
	assert_null(strchr(err.msg, '\n'));
	assert_int_not_equal(dpg_requeue_parse("requeue", "86400", &g, &err), 0);
	assert_non_null(strstr(err.msg, "requeue '86400'"));
	assert_int_not_equal(dpg_requeue_parse("requeue", "", &g, &err), 0);
	assert_int_not_equal(dpg_requeue_parse("requeue", "120s", &g, &err), 0);
	/* the last one before "--" wins, in either spelling */
	g = -1;
	assert_int_equal(dpg_requeue_from_cmdline(line, sizeof(line), &g, &err), 1);
	assert_int_equal(g, 90);
	g = 7;
	assert_int_equal(dpg_requeue_from_cmdline(none, sizeof(none), &g, &err), 0);
	assert_int_equal(g, 7);
	assert_int_equal(dpg_requeue_from_cmdline(bad, sizeof(bad), &g, &err), -1);
	assert_non_null(strstr(err.msg, "'soon'"));
	assert_int_equal(dpg_requeue_from_cmdline(big, sizeof(big), &g, &err), -1);
	assert_non_null(strstr(err.msg, "--dpg-requeue '100000'"));
	assert_non_null(strstr(err.msg, "0-65535"));
	assert_int_equal(dpg_requeue_signal(90, sig, sizeof(sig)), 0);
	assert_string_equal(sig, "USR1@90");
	assert_int_equal(dpg_requeue_signal(90, sig, 4), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_init),
		cmocka_unit_test(test_gpus_per_task_good),
		cmocka_unit_test(test_gpus_per_task_bad),
		cmocka_unit_test(test_port_good),
		cmocka_unit_test(test_port_bad),
		cmocka_unit_test(test_bind),
		cmocka_unit_test(test_visibility),
		cmocka_unit_test(test_requeue),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
