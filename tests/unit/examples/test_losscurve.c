/* SPDX-License-Identifier: BSD-3-Clause */
/* test_losscurve.c - tests of tests/gpu/losscurve.c, the loss-curve comparison of train's GPU check:
 * train's step lines parsed, other lines ignored, curves within and beyond the tolerance, NaN, shape. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "losscurve.h"

static void test_line(void **state)
{
	long s = -1;
	double x = -1;

	(void)state;
	assert_int_equal(losscurve_line("step 12/100 loss 2.377144 lr 1.0e-03 grad_norm 1.206 "
					"samples/s 49729\n", &s, &x), 1);
	assert_int_equal(s, 12);
	assert_true(x == 2.377144);
	assert_int_equal(losscurve_line("step 3/3 loss 0.5", &s, &x), 1);
	assert_int_equal(s, 3);
	assert_int_equal(losscurve_line("done: steps 30 final_loss 1.677434", &s, &x), 0);
	assert_int_equal(losscurve_line("saved step 20 to ck", &s, &x), 0);
	assert_int_equal(losscurve_line("step 3/3 loss", &s, &x), 0);
	assert_int_equal(losscurve_line("step 3/3 loss 0.5x", &s, &x), 0);
	assert_int_equal(losscurve_line("forward and backward on the GPU (x, y)", &s, &x), 0);
}

/* A curve from train-like output text. */
static void curve_of(const char *text, struct loss_curve *c)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");

	assert_non_null(f);
	memset(c, 0, sizeof(*c));
	assert_int_equal(losscurve_read(f, c), 0);
	fclose(f);
}

#define REF "forward and backward on the GPU (m, CUDA)\n" \
	"step 1/3 loss 2.000000 lr 1e-3\nstep 2/3 loss 1.000000 lr 1e-3\n" \
	"step 3/3 loss 0.500000 lr 1e-3\ndone: steps 3 final_loss 0.5\n"

static int cmp(const char *a_text, const char *b_text, double *worst, char *msg)
{
	struct loss_curve a, b;
	int rc;

	curve_of(a_text, &a);
	curve_of(b_text, &b);
	rc = losscurve_compare(&a, &b, 1e-3, 1e-5, worst, msg, 256);
	losscurve_free(&a);
	losscurve_free(&b);
	return rc;
}

static void test_read(void **state)
{
	struct loss_curve c;

	(void)state;
	curve_of(REF, &c);
	assert_int_equal(c.n, 3);
	assert_int_equal(c.step[0], 1);
	assert_int_equal(c.step[2], 3);
	assert_true(c.loss[1] == 1.0);
	losscurve_free(&c);
	assert_null(c.step);
}

static void test_within(void **state)
{
	char msg[256];
	double worst = -1;

	(void)state;
	assert_int_equal(cmp(REF, REF, &worst, msg), 0);
	assert_true(worst == 0.0);
	/* step 1 off by 1e-3 of 2.0 + 1e-5 = 2.01e-3: 2.0e-3 is inside */
	assert_int_equal(cmp(REF, "step 1/3 loss 2.002000\nstep 2/3 loss 1.0\nstep 3/3 loss 0.5\n",
			     &worst, msg), 0);
	assert_true(worst > 0.99 && worst < 1.0);
}

static void test_beyond(void **state)
{
	char msg[256];
	double worst = 0;

	(void)state;
	assert_int_equal(cmp(REF, "step 1/3 loss 2.0\nstep 2/3 loss 1.0\nstep 3/3 loss 0.5006\n",
			     &worst, msg), 1);
	assert_non_null(strstr(msg, "step 3:"));
	assert_true(isinf(worst));
	assert_int_equal(cmp(REF, "step 1/3 loss 2.0\nstep 2/3 loss nan\nstep 3/3 loss 0.5\n",
			     NULL, msg), 1);
	assert_non_null(strstr(msg, "step 2:"));
}

static void test_shape(void **state)
{
	char msg[256];

	(void)state;
	assert_int_equal(cmp(REF, "step 1/3 loss 2.0\nstep 2/3 loss 1.0\n", NULL, msg), 1);
	assert_non_null(strstr(msg, "3 and 2 steps"));
	assert_int_equal(cmp(REF, "step 1/3 loss 2.0\nstep 2/3 loss 1.0\nstep 4/4 loss 0.5\n",
			     NULL, msg), 1);
	assert_non_null(strstr(msg, "step 3 in one curve, 4"));
	assert_int_equal(cmp("no steps\n", "none either\n", NULL, msg), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_line),
		cmocka_unit_test(test_read),
		cmocka_unit_test(test_within),
		cmocka_unit_test(test_beyond),
		cmocka_unit_test(test_shape),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
