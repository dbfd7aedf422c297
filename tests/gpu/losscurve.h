/* SPDX-License-Identifier: BSD-3-Clause */
/* losscurve.h - train's loss curve read from its output ("step S/T loss X ..." lines) and two curves
 * compared within a tolerance: the GPU-vs-CPU check of train (tests/gpu/train_gpu.sh, loss_cmp). */
#ifndef DPG_TEST_LOSSCURVE_H
#define DPG_TEST_LOSSCURVE_H

#include <stddef.h>
#include <stdio.h>

struct loss_curve {
	long *step;
	double *loss;
	size_t n, cap;
};

/* 1 with *step and *loss for a line "step S/T loss X ...", else 0. */
int losscurve_line(const char *line, long *step, double *loss);

/* Append the step lines of f to c (zeroed first by the caller): 0, or -1
 * when out of memory.  Free with losscurve_free. */
int losscurve_read(FILE *f, struct loss_curve *c);
void losscurve_free(struct loss_curve *c);

/* 0 when a and b have the same steps, at least one, and at every step
 * |a - b| <= atol + rtol * |a| with both finite; else 1 with a line in msg
 * naming the first step that fails.  *worst (may be NULL) gets the largest
 * |a - b| / (atol + rtol * |a|) seen (<= 1 passes). */
int losscurve_compare(const struct loss_curve *a, const struct loss_curve *b, double rtol,
		      double atol, double *worst, char *msg, size_t msg_len);

#endif
