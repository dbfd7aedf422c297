/* SPDX-License-Identifier: BSD-3-Clause */
/* test_killfail.c - unit tests for lib/launch/killfail.c: yes|no values,
 * srun's command line as the plugin reads it, the decision, the cross-check,
 * and kill_on_fail= in plugstack.conf. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf.h"
#include "killfail.h"

#define assert_contains(haystack, needle)                                   \
	do {                                                                \
		const char *h_ = (haystack), *n_ = (needle);                \
		if (strstr(h_, n_) == NULL)                                 \
			fail_msg("expected '%s' in '%s'", n_, h_);          \
	} while (0)

static void test_parse_yes_no(void **state)
{
	struct dpg_err err;
	bool on = false;
	const char *bad[] = { "", "Yes", "1", "true", "yes ", "nope", NULL };

	(void)state;
	assert_int_equal(dpg_kill_on_fail_parse("yes", "--x", &on, &err), 0);
	assert_true(on);
	assert_int_equal(dpg_kill_on_fail_parse("no", "--x", &on, &err), 0);
	assert_false(on);
	for (int i = 0; bad[i] != NULL; i++) {
		on = true;
		assert_int_equal(dpg_kill_on_fail_parse(bad[i], "--dpg-kill-on-fail",
							&on, &err), -DPG_ERR_INVALID);
		assert_true(on);	/* untouched */
		assert_contains(err.msg, "--dpg-kill-on-fail");
		assert_contains(err.msg, "expected yes");
	}
	assert_int_equal(dpg_kill_on_fail_parse(NULL, "--x", &on, &err), -1);
}

static void test_argv_option(void **state)
{
	char *a1[] = { "srun", "-N3", "--dpg-kill-on-fail=no", "prog", NULL };
	char *a2[] = { "srun", "--dpg-kill-on-fail", "no", "prog", NULL };
	char *a3[] = { "srun", "--dpg-kill-on-fail=no", "--dpg-kill-on-fail=yes", NULL };
	char *a4[] = { "srun", "--dpg-kill-on-failx=no", "-dpg-kill-on-fail=no",
		       "--dpg-kill=no", "--dpg-kill-on-fail", NULL };
	char *a5[] = { "--dpg-kill-on-fail=no", "prog", NULL };	/* argv[0] */
	char *a6[] = { "srun", "--dpg-kill-on-fail=", NULL };

	(void)state;
	assert_string_equal(dpg_argv_option(4, a1, "dpg-kill-on-fail"), "no");
	assert_string_equal(dpg_argv_option(4, a2, "dpg-kill-on-fail"), "no");
	assert_string_equal(dpg_argv_option(3, a3, "dpg-kill-on-fail"), "yes");
	/* longer names, one dash, abbreviations, a value missing at the end */
	assert_null(dpg_argv_option(5, a4, "dpg-kill-on-fail"));
	assert_null(dpg_argv_option(2, a5, "dpg-kill-on-fail"));
	assert_string_equal(dpg_argv_option(2, a6, "dpg-kill-on-fail"), "");
	assert_null(dpg_argv_option(4, a1, "dpg-gpus-per-task"));
}

static void test_cmdline_split(void **state)
{
	char img[] = "srun\0-N3\0\0--dpg-kill-on-fail=no\0prog\0";
	char *argv[6];
	char small[] = "a\0b\0c\0";
	char *argv2[3];
	struct dpg_err err;
	int argc = -1;

	(void)state;
	assert_int_equal(dpg_cmdline_split(img, sizeof(img) - 1, argv, 5, &argc, &err), 0);
	assert_int_equal(argc, 5);
	assert_string_equal(argv[0], "srun");
	assert_string_equal(argv[2], "");	/* srun "" ... keeps its place */
	assert_string_equal(argv[3], "--dpg-kill-on-fail=no");
	assert_string_equal(argv[4], "prog");
	assert_null(argv[5]);
	assert_string_equal(dpg_argv_option(argc, argv, "dpg-kill-on-fail"), "no");
	assert_int_equal(dpg_cmdline_split(small, sizeof(small) - 1, argv2, 2, &argc,
					   &err), -1);
	assert_contains(err.msg, "more than 2 words");
}

static void test_cmdline_read(void **state)
{
	char path[] = "/tmp/test_killfail.XXXXXX";
	const char img[] = "srun\0--dpg-gpus-per-task\0" "0\0hostname\0";
	char buf[64], tiny[8];
	char *argv[8];
	struct dpg_err err;
	int fd, argc = 0;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, img, sizeof(img) - 1), (ssize_t)(sizeof(img) - 1));
	close(fd);
	assert_int_equal(dpg_cmdline_read(path, buf, sizeof(buf), argv, 7, &argc, &err), 0);
	assert_int_equal(argc, 4);
	assert_string_equal(dpg_argv_option(argc, argv, "dpg-gpus-per-task"), "0");
	assert_string_equal(argv[3], "hostname");
	assert_int_equal(dpg_cmdline_read(path, tiny, sizeof(tiny), argv, 7, &argc, &err), -1);
	assert_contains(err.msg, "longer than");
	unlink(path);
	assert_int_equal(dpg_cmdline_read(path, buf, sizeof(buf), argv, 7, &argc, &err), -1);
	assert_contains(err.msg, "cannot open");
	/* this process's own command line: argv[0] is this program */
	assert_int_equal(dpg_cmdline_read("/proc/self/cmdline", buf, sizeof(buf), argv, 7,
					  &argc, &err), 0);
	assert_true(argc >= 1);
	assert_contains(argv[0], "test_killfail");
}

static enum dpg_killfail decide(bool conf, const char *opt, bool step, bool user)
{
	struct dpg_killfail_in in = { .conf = conf, .opt = opt, .dpg_step = step,
				      .user_set = user };
	enum dpg_killfail d = (enum dpg_killfail)99;
	struct dpg_err err;

	assert_int_equal(dpg_killfail_decide(&in, &d, &err), 0);
	return d;
}

static void test_decide(void **state)
{
	struct dpg_killfail_in in = { .conf = true, .opt = "maybe", .dpg_step = true };
	enum dpg_killfail d = DPG_KF_USER;
	struct dpg_err err;

	(void)state;
	assert_int_equal(decide(true, NULL, true, false), DPG_KF_SET);	/* default */
	assert_int_equal(decide(true, "no", true, false), DPG_KF_OFF);	/* user off */
	assert_int_equal(decide(false, NULL, true, false), DPG_KF_OFF);	/* admin off */
	assert_int_equal(decide(false, "yes", true, false), DPG_KF_SET); /* user on */
	assert_int_equal(decide(true, NULL, false, false), DPG_KF_OFF);	/* no dpg step */
	assert_int_equal(decide(true, "yes", false, false), DPG_KF_OFF);
	/* the user's own SLURM_KILL_BAD_EXIT is never overridden */
	assert_int_equal(decide(true, NULL, true, true), DPG_KF_USER);
	assert_int_equal(decide(true, "no", true, true), DPG_KF_USER);
	assert_int_equal(dpg_killfail_decide(&in, &d, &err), -1);
	assert_int_equal(d, DPG_KF_USER);	/* untouched */
	assert_contains(err.msg, "'maybe'");
}

static void test_check(void **state)
{
	struct dpg_err err;

	(void)state;
	assert_int_equal(dpg_killfail_check(DPG_KF_SET, DPG_KF_SET, &err), 0);
	assert_int_equal(dpg_killfail_check(DPG_KF_USER, DPG_KF_USER, &err), 0);
	assert_int_equal(dpg_killfail_check(DPG_KF_SET, DPG_KF_OFF, &err), -1);
	assert_contains(err.msg, "kill-on-fail stays on for this step");
	assert_contains(err.msg, "ask for off");
	assert_contains(err.msg, "pass -K0");
	assert_int_equal(dpg_killfail_check(DPG_KF_OFF, DPG_KF_SET, &err), -1);
	assert_contains(err.msg, "kill-on-fail stays off for this step");
	assert_contains(err.msg, "pass -K1");
}

static void test_conf_key(void **state)
{
	struct dpg_conf c;
	struct dpg_err err;
	char *yes[] = { "kill_on_fail=yes" }, *no[] = { "kill_on_fail=no" };
	char *bad[] = { "kill_on_fail=maybe" }, *off[] = { "kill_on_fail=off" };

	(void)state;
	dpg_conf_init(&c);
	assert_true(c.kill_on_fail);	/* documented default */
	assert_int_equal(dpg_conf_parse(&c, 1, no, &err), 0);
	assert_false(c.kill_on_fail);
	assert_int_equal(dpg_conf_parse(&c, 1, yes, &err), 0);
	assert_true(c.kill_on_fail);
	assert_int_equal(dpg_conf_parse(&c, 1, bad, &err), -1);
	assert_contains(err.msg, "invalid kill_on_fail='maybe'");
	assert_int_equal(dpg_conf_parse(&c, 1, off, &err), 0);	/* like every boolean */
	assert_false(c.kill_on_fail);
	assert_int_equal(dpg_conf_parse_arg(&c, "nokey=1", &err), -1);
	assert_contains(err.msg, "kill_on_fail");	/* listed among the known keys */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_yes_no),
		cmocka_unit_test(test_argv_option),
		cmocka_unit_test(test_cmdline_split),
		cmocka_unit_test(test_cmdline_read),
		cmocka_unit_test(test_decide),
		cmocka_unit_test(test_check),
		cmocka_unit_test(test_conf_key),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
