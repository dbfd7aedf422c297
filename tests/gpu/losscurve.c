/* SPDX-License-Identifier: BSD-3-Clause */
/* losscurve.c - train's loss curves parsed and compared (losscurve.h); no GPU, so the comparison the
 * GPU check relies on is unit-tested on every machine (tests/unit/examples/test_losscurve.c). */
#include "losscurve.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int losscurve_line(const char *line, long *step, double *loss)
{
	long s, total;
	double x;
	int used = 0;

	if (sscanf(line, "step %ld/%ld loss %lf%n", &s, &total, &x, &used) != 3 || used == 0)
		return 0;
	if (line[used] != '\0' && line[used] != ' ' && line[used] != '\n')
		return 0;
	*step = s;
	*loss = x;
	return 1;
}

static int push(struct loss_curve *c, long step, double loss)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 64;
		long *s = realloc(c->step, cap * sizeof(*s));

		if (s == NULL)
			return -1;
		c->step = s;
		double *l = realloc(c->loss, cap * sizeof(*l));
		if (l == NULL)
			return -1;
		c->loss = l;
		c->cap = cap;
	}
	c->step[c->n] = step;
	c->loss[c->n] = loss;
	c->n++;
	return 0;
}

int losscurve_read(FILE *f, struct loss_curve *c)
{
	char line[512];
	long step;
	double loss;

	while (fgets(line, sizeof(line), f) != NULL)
		if (losscurve_line(line, &step, &loss) && push(c, step, loss) != 0)
			return -1;
	return 0;
}

void losscurve_free(struct loss_curve *c)
{
	free(c->step);
	free(c->loss);
	memset(c, 0, sizeof(*c));
}

int losscurve_compare(const struct loss_curve *a, const struct loss_curve *b, double rtol,
		      double atol, double *worst, char *msg, size_t msg_len)
{
	double w = 0.0;

	if (worst != NULL)
		*worst = 0.0;
	if (a->n == 0 || a->n != b->n) {
		snprintf(msg, msg_len, "the curves have %zu and %zu steps", a->n, b->n);
		return 1;
	}
	for (size_t i = 0; i < a->n; i++) {
		double bound = atol + rtol * fabs(a->loss[i]), d = fabs(a->loss[i] - b->loss[i]);

		if (a->step[i] != b->step[i]) {
			snprintf(msg, msg_len, "line %zu is step %ld in one curve, %ld in the other",
				 i + 1, a->step[i], b->step[i]);
			return 1;
		}
		if (!isfinite(a->loss[i]) || !isfinite(b->loss[i]) || !(d <= bound)) {
			snprintf(msg, msg_len, "step %ld: loss %.6f vs %.6f differ by %.3g, more "
				 "than %.3g (atol %g + rtol %g x |loss|)", a->step[i], a->loss[i],
				 b->loss[i], d, bound, atol, rtol);
			if (worst != NULL)
				*worst = INFINITY;
			return 1;
		}
		if (bound > 0 && d / bound > w)
			w = d / bound;
	}
	if (worst != NULL)
		*worst = w;
	snprintf(msg, msg_len, "%zu steps agree (worst at %.2f of the bound)", a->n, w);
	return 0;
}
