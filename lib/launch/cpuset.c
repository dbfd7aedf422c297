/* SPDX-License-Identifier: BSD-3-Clause */
/* cpuset.c - the fixed-size set of PU (logical CPU) numbers the planner works
 * in, its Linux CPU-list syntax ("0-11,48-59") and the conversions to and
 * from this process's sched affinity (pure libc, safe in slurmstepd). */
#include "cpuset.h"
#include "parse.h"	/* dpg_ilist_parse */

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#define CPUSET_WORDS (DPG_CPU_MAX / 64)

void dpg_cpuset_zero(struct dpg_cpuset *s)
{
	memset(s, 0, sizeof(*s));
}

void dpg_cpuset_fill(struct dpg_cpuset *s)
{
	memset(s, 0xff, sizeof(*s));
}

void dpg_cpuset_set(struct dpg_cpuset *s, unsigned cpu)
{
	if (cpu < DPG_CPU_MAX)
		s->w[cpu / 64] |= UINT64_C(1) << (cpu % 64);
}

void dpg_cpuset_clr(struct dpg_cpuset *s, unsigned cpu)
{
	if (cpu < DPG_CPU_MAX)
		s->w[cpu / 64] &= ~(UINT64_C(1) << (cpu % 64));
}

bool dpg_cpuset_isset(const struct dpg_cpuset *s, unsigned cpu)
{
	if (cpu >= DPG_CPU_MAX)
		return false;
	return (s->w[cpu / 64] >> (cpu % 64)) & 1u;
}

unsigned dpg_cpuset_count(const struct dpg_cpuset *s)
{
	unsigned n = 0;
	size_t i;

	for (i = 0; i < CPUSET_WORDS; i++)
		n += (unsigned)__builtin_popcountll(s->w[i]);
	return n;
}

bool dpg_cpuset_empty(const struct dpg_cpuset *s)
{
	size_t i;

	for (i = 0; i < CPUSET_WORDS; i++)
		if (s->w[i] != 0)
			return false;
	return true;
}

int dpg_cpuset_next(const struct dpg_cpuset *s, unsigned from)
{
	size_t i;

	if (from >= DPG_CPU_MAX)
		return -1;
	i = from / 64;
	{
		uint64_t w = s->w[i] & (~UINT64_C(0) << (from % 64));

		if (w != 0)
			return (int)(i * 64 + (size_t)__builtin_ctzll(w));
	}
	for (i++; i < CPUSET_WORDS; i++)
		if (s->w[i] != 0)
			return (int)(i * 64 + (size_t)__builtin_ctzll(s->w[i]));
	return -1;
}

void dpg_cpuset_and(struct dpg_cpuset *d, const struct dpg_cpuset *a,
		    const struct dpg_cpuset *b)
{
	size_t i;

	for (i = 0; i < CPUSET_WORDS; i++)
		d->w[i] = a->w[i] & b->w[i];
}

void dpg_cpuset_or(struct dpg_cpuset *d, const struct dpg_cpuset *a,
		   const struct dpg_cpuset *b)
{
	size_t i;

	for (i = 0; i < CPUSET_WORDS; i++)
		d->w[i] = a->w[i] | b->w[i];
}

bool dpg_cpuset_intersects(const struct dpg_cpuset *a,
			   const struct dpg_cpuset *b)
{
	size_t i;

	for (i = 0; i < CPUSET_WORDS; i++)
		if (a->w[i] & b->w[i])
			return true;
	return false;
}

bool dpg_cpuset_subset(const struct dpg_cpuset *sub,
		       const struct dpg_cpuset *super)
{
	size_t i;

	for (i = 0; i < CPUSET_WORDS; i++)
		if (sub->w[i] & ~super->w[i])
			return false;
	return true;
}

bool dpg_cpuset_equal(const struct dpg_cpuset *a, const struct dpg_cpuset *b)
{
	return memcmp(a->w, b->w, sizeof(a->w)) == 0;
}

struct cpu_list {
	struct dpg_cpuset *out;
};

static int cpu_list_add(void *ctx, const struct dpg_ilist_item *it)
{
	struct cpu_list *l = ctx;

	for (unsigned long c = it->lo; c <= it->hi; c++)
		dpg_cpuset_set(l->out, (unsigned)c);
	return 0;
}

int dpg_cpuset_parse(const char *list, struct dpg_cpuset *out,
		     struct dpg_err *err)
{
	struct cpu_list l = { out };
	enum dpg_ilist_status st;
	size_t at = 0;
	char q[96];

	if (list == NULL || out == NULL)
		return dpg_errf(err, "cpu list: no input");
	dpg_cpuset_zero(out);
	st = dpg_ilist_parse(list, DPG_ILIST_BLANKS | DPG_ILIST_EMPTY_OK,
			     DPG_CPU_MAX - 1, cpu_list_add, &l, &at);
	switch (st) {
	case DPG_ILIST_OK:
		return 0;
	case DPG_ILIST_TOO_LARGE:
		return dpg_errf(err, "cpu list \"%s\": CPU number too large (max %d)",
				dpg_err_quote(list, q, sizeof(q)), DPG_CPU_MAX - 1);
	case DPG_ILIST_DESCENDING:
		return dpg_errf(err, "cpu list \"%s\": descending range at offset %zu",
				dpg_err_quote(list, q, sizeof(q)), at);
	case DPG_ILIST_JUNK:
		return dpg_errf(err, "cpu list \"%s\": unexpected character at offset %zu",
				dpg_err_quote(list, q, sizeof(q)), at);
	default:
		return dpg_errf(err, "cpu list \"%s\": expected a CPU number at offset %zu",
				dpg_err_quote(list, q, sizeof(q)), at);
	}
}

int dpg_cpuset_format(const struct dpg_cpuset *s, char *buf, size_t len,
		      struct dpg_err *err)
{
	size_t o = 0;
	int c;

	if (buf == NULL || len == 0)
		return dpg_errf(err, "cpu list: no output buffer");
	buf[0] = '\0';
	c = dpg_cpuset_next(s, 0);
	while (c >= 0) {
		int e = c, n;

		while (e + 1 < DPG_CPU_MAX && dpg_cpuset_isset(s, (unsigned)e + 1))
			e++;
		if (e == c)
			n = snprintf(buf + o, len - o, "%s%d", o ? "," : "", c);
		else
			n = snprintf(buf + o, len - o, "%s%d-%d", o ? "," : "", c, e);
		if (n < 0 || (size_t)n >= len - o) {
			buf[o] = '\0';
			return dpg_errf(err, "cpu list does not fit in %zu bytes", len);
		}
		o += (size_t)n;
		if (e + 1 >= DPG_CPU_MAX)
			break;
		c = dpg_cpuset_next(s, (unsigned)e + 1);
	}
	return 0;
}

/* ================================================================ affinity */

/* A cpu_set_t big enough for DPG_CPU_MAX, or NULL (err filled). */
static cpu_set_t *affinity_alloc(struct dpg_err *err)
{
	cpu_set_t *m = CPU_ALLOC(DPG_CPU_MAX);

	if (m == NULL)
		dpg_errs(err, DPG_ERR_NOMEM, "cannot allocate a CPU mask");
	else
		CPU_ZERO_S(CPU_ALLOC_SIZE(DPG_CPU_MAX), m);
	return m;
}

int dpg_cpuset_from_affinity(struct dpg_cpuset *out, struct dpg_err *err)
{
	size_t msize = CPU_ALLOC_SIZE(DPG_CPU_MAX);
	cpu_set_t *mask = affinity_alloc(err);
	int rc = 0;

	if (mask == NULL)
		return -DPG_ERR_NOMEM;
	dpg_cpuset_zero(out);
	if (sched_getaffinity(0, msize, mask) != 0) {
		rc = dpg_errs(err, DPG_ERR_SYSTEM, "cannot read the CPU affinity: %s",
			      strerror(errno));
	} else {
		for (unsigned c = 0; c < DPG_CPU_MAX; c++)
			if (CPU_ISSET_S(c, msize, mask))
				dpg_cpuset_set(out, c);
	}
	CPU_FREE(mask);
	return rc;
}

int dpg_cpuset_to_affinity(const struct dpg_cpuset *want, unsigned *nbound,
			   struct dpg_err *err)
{
	size_t msize = CPU_ALLOC_SIZE(DPG_CPU_MAX);
	struct dpg_cpuset now, keep;
	cpu_set_t *mask;
	int rc;

	*nbound = 0;
	if ((rc = dpg_cpuset_from_affinity(&now, err)) != 0)
		return rc;
	dpg_cpuset_and(&keep, want, &now);
	if (dpg_cpuset_empty(&keep))
		return 0;
	if ((mask = affinity_alloc(err)) == NULL)
		return -DPG_ERR_NOMEM;
	for (int c = dpg_cpuset_next(&keep, 0); c >= 0;
	     c = dpg_cpuset_next(&keep, (unsigned)c + 1))
		CPU_SET_S((unsigned)c, msize, mask);
	if (sched_setaffinity(0, msize, mask) != 0)
		rc = dpg_errs(err, DPG_ERR_SYSTEM, "%s", strerror(errno));
	else
		*nbound = dpg_cpuset_count(&keep);
	CPU_FREE(mask);
	return rc;
}
