/* SPDX-License-Identifier: BSD-3-Clause */
/* taskdist.c - Slurm per-node task counts, --distribution values, rank layout.
 * Owns the SLURM_STEP_TASKS_PER_NODE grammar and srun's block/cyclic/plane order. */
#include "taskdist.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * What srun 22.05 puts in SLURM_DISTRIBUTION (set_distribution() in
 * src/common/proc_args.c): "block", "cyclic", "arbitrary", "plane" (the size
 * goes to SLURM_DIST_PLANESIZE, not into this string), or "<node>:<socket>"
 * / "<node>:<socket>:<core>" such as "block:cyclic" or "cyclic:fcyclic",
 * optionally followed by ",pack" or ",nopack".  Users may also type "*" for
 * a level's default, "plane=N", "hostfile" (= arbitrary), or "pack"/"nopack"
 * alone (= the default node distribution).  Slurm compares case-blind.
 *
 * "plane" without "=N" parses to DPG_DIST_PLANE with *plane = 0: the caller
 * must then take the size from SLURM_DIST_PLANESIZE; dpg_layout() refuses
 * a plane size of 0.
 *
 * Layout, as slurm_step_layout.c assigns task ids once the per-node counts
 * are known: block fills node 0, then node 1, ...; cyclic deals one rank at
 * a time round-robin over the nodes that still have room; plane=N deals
 * blocks of up to N ranks the same way.  Exception not modelled: when srun
 * oversubscribes (--overcommit), Slurm's cyclic round-robin is decided by
 * CPUs rather than by final counts, and may differ from this one.
 */

#define TD_QUOTE_MAX 80
#define TD_DIST_LEN_MAX 256		/* longest distribution string */
#define TD_PLANE_MAX UINT64_C(2147483647)	/* srun: INT_MAX */
#define TPN_WHAT "tasks per node"
#define DIST_WHAT "distribution"

static int td_fail(struct dpg_err *err, const char *what, const char *s,
		   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Error naming the input (what, quoted s) and the problem. */
static int td_fail(struct dpg_err *err, const char *what, const char *s,
		   const char *fmt, ...)
{
	char msg[320], q[TD_QUOTE_MAX];
	va_list ap;

	if (err == NULL)
		return -1;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return dpg_errf(err, "%s \"%s\": %s", what,
			dpg_err_quote(s, q, sizeof(q)), msg);
}

static bool td_is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static const char *td_char_desc(char c, char *buf, size_t len)
{
	unsigned char u = (unsigned char)c;

	if (c == '\0')
		snprintf(buf, len, "end of input");
	else if (u >= 0x21 && u < 0x7f)
		snprintf(buf, len, "'%c'", c);
	else
		snprintf(buf, len, "byte 0x%02x", u);
	return buf;
}

/* ------------------------------------------------------ tasks per node */

/* Parse a decimal number at *p, at most max; name says what it is. */
static int tpn_num(const char *s, const char **p, uint64_t max,
		   const char *name, uint64_t *val, struct dpg_err *err)
{
	const char *q = *p;
	uint64_t v = 0;
	char d[16];

	if (!td_is_digit(*q))
		return td_fail(err, TPN_WHAT, s, "expected a %s at offset %zu, "
			       "found %s", name, (size_t)(q - s),
			       td_char_desc(*q, d, sizeof(d)));
	for (; td_is_digit(*q); q++) {
		uint64_t dig = (uint64_t)(*q - '0');

		if (v > (max - dig) / 10)
			return td_fail(err, TPN_WHAT, s, "%s at offset %zu is "
				       "larger than %" PRIu64, name,
				       (size_t)(*p - s), max);
		v = v * 10 + dig;
	}
	if (v == 0)
		return td_fail(err, TPN_WHAT, s, "%s at offset %zu is 0 (expected "
			       "at least 1)", name, (size_t)(*p - s));
	*val = v;
	*p = q;
	return 0;
}

/* Parse the optional "(xM)" after a count; *rep stays 1 without one. */
static int tpn_repeat(const char *s, const char **p, uint64_t *rep,
		      struct dpg_err *err)
{
	const char *q = *p;
	char d[16];

	*rep = 1;
	if (*q != '(')
		return 0;
	if (q[1] != 'x')
		return td_fail(err, TPN_WHAT, s, "expected 'x' after '(' at "
			       "offset %zu, found %s", (size_t)(q + 1 - s),
			       td_char_desc(q[1], d, sizeof(d)));
	q += 2;
	if (tpn_num(s, &q, UINT64_MAX, "repeat count", rep, err) < 0)
		return -1;
	if (*q != ')')
		return td_fail(err, TPN_WHAT, s, "expected ')' at offset %zu, "
			       "found %s", (size_t)(q - s),
			       td_char_desc(*q, d, sizeof(d)));
	*p = q + 1;
	return 0;
}

int dpg_tpn_parse(const char *s, uint32_t *counts, size_t cap, size_t *nnodes,
		  struct dpg_err *err)
{
	const char *p = s;
	size_t n = 0;
	char d[16];

	if (nnodes != NULL)
		*nnodes = 0;
	if (counts == NULL || nnodes == NULL)
		return dpg_errf(err, "tasks per node: no output array given");
	if (s == NULL || *s == '\0')
		return td_fail(err, TPN_WHAT, s, "empty (expected counts such "
			       "as \"2(x3),1\")");
	for (;;) {
		uint64_t c, rep;

		if (tpn_num(s, &p, UINT32_MAX, "task count", &c, err) < 0 ||
		    tpn_repeat(s, &p, &rep, err) < 0)
			return -1;
		if (rep > cap - n)
			return td_fail(err, TPN_WHAT, s, "describes more than %zu "
				       "nodes", cap);
		for (; rep > 0; rep--)
			counts[n++] = (uint32_t)c;
		if (*p == '\0')
			break;
		if (*p != ',')
			return td_fail(err, TPN_WHAT, s, "unexpected %s at offset "
				       "%zu (expected ',' or the end)",
				       td_char_desc(*p, d, sizeof(d)),
				       (size_t)(p - s));
		p++;
	}
	*nnodes = n;
	return 0;
}

/* ------------------------------------------------------ distribution */

/* Case-blind: is the n-byte span at p exactly word? */
static bool td_ieq(const char *p, size_t n, const char *word)
{
	size_t i;

	if (strlen(word) != n)
		return false;
	for (i = 0; i < n; i++) {
		char c = p[i];

		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (c != word[i])
			return false;
	}
	return true;
}

/* The text after the first ',' must be exactly one pack flag. */
static int dist_flag(const char *s, const char *flag, struct dpg_err *err)
{
	size_t n = strlen(flag);

	if (td_ieq(flag, n, "pack") || td_ieq(flag, n, "nopack"))
		return 0;
	return td_fail(err, DIST_WHAT, s, "unknown qualifier after ',' "
		       "(expected Pack or NoPack)");
}

/* "plane", "plane=N", either optionally followed by ",pack"/",nopack". */
static int dist_plane(const char *s, uint32_t *plane, struct dpg_err *err)
{
	const char *p = s + 5;	/* past "plane" */
	uint64_t v = 0;

	if (*p == '=') {
		const char *q = ++p;

		for (; td_is_digit(*p) && v <= TD_PLANE_MAX; p++)
			v = v * 10 + (uint64_t)(*p - '0');
		if (p == q || v == 0 || v > TD_PLANE_MAX ||
		    (*p != '\0' && *p != ','))
			return td_fail(err, DIST_WHAT, s, "plane size must be "
				       "a number from 1 to %" PRIu64,
				       TD_PLANE_MAX);
	}
	if (*p == ',' && dist_flag(s, p + 1, err) < 0)
		return -1;
	if (*p != '\0' && *p != ',')
		return td_fail(err, DIST_WHAT, s, "expected \"plane\" or "
			       "\"plane=N\"");
	*plane = (uint32_t)v;	/* 0: size is in SLURM_DIST_PLANESIZE */
	return 0;
}

/* First (node) level: block, cyclic or "*" (= block). */
static int dist_node_level(const char *s, const char *p, size_t n,
			   enum dpg_dist *dist, struct dpg_err *err)
{
	if (td_ieq(p, n, "block") || td_ieq(p, n, "*")) {
		*dist = DPG_DIST_BLOCK;
		return 0;
	}
	if (td_ieq(p, n, "cyclic")) {
		*dist = DPG_DIST_CYCLIC;
		return 0;
	}
	if (td_ieq(p, n, "arbitrary") || td_ieq(p, n, "hostfile"))
		return td_fail(err, DIST_WHAT, s, "arbitrary distribution puts "
			       "ranks where SLURM_HOSTFILE says, so rank 0's "
			       "node cannot be derived; set MASTER_ADDR yourself "
			       "or use block, cyclic or plane");
	return td_fail(err, DIST_WHAT, s, "unknown node distribution "
		       "(expected block, cyclic, plane=N or *)");
}

/* Socket and core levels are not ours to use, but must be well formed. */
static int dist_cpu_level(const char *s, const char *p, size_t n,
			  struct dpg_err *err)
{
	if (td_ieq(p, n, "block") || td_ieq(p, n, "cyclic") ||
	    td_ieq(p, n, "fcyclic") || td_ieq(p, n, "*"))
		return 0;
	return td_fail(err, DIST_WHAT, s, "unknown socket/core distribution "
		       "after ':' (expected block, cyclic, fcyclic or *)");
}

/* "node[:socket[:core]]", base_len bytes long. */
static int dist_levels(const char *s, size_t base_len, enum dpg_dist *dist,
		       struct dpg_err *err)
{
	const char *p = s, *end = s + base_len;
	int level;

	for (level = 0; ; level++) {
		const char *colon = memchr(p, ':', (size_t)(end - p));
		size_t n = (size_t)((colon != NULL ? colon : end) - p);

		if (level > 2)
			return td_fail(err, DIST_WHAT, s, "more than three "
				       "':'-separated levels");
		if (n == 0)
			return td_fail(err, DIST_WHAT, s, "empty level "
				       "(expected e.g. \"block\" or \"cyclic:cyclic\")");
		if (level == 0 ? dist_node_level(s, p, n, dist, err) < 0
			       : dist_cpu_level(s, p, n, err) < 0)
			return -1;
		if (colon == NULL)
			return 0;
		p = colon + 1;
	}
}

int dpg_dist_parse(const char *s, enum dpg_dist *dist, uint32_t *plane,
		   struct dpg_err *err)
{
	const char *comma;
	size_t len, base_len;

	if (dist == NULL || plane == NULL)
		return dpg_errf(err, "distribution: no output given");
	*dist = DPG_DIST_BLOCK;
	*plane = 0;
	if (s == NULL || *s == '\0')
		return td_fail(err, DIST_WHAT, s, "empty (expected block, "
			       "cyclic or plane=N, as for srun -m)");
	len = strnlen(s, TD_DIST_LEN_MAX + 1);
	if (len > TD_DIST_LEN_MAX)
		return td_fail(err, DIST_WHAT, s, "longer than %d bytes",
			       TD_DIST_LEN_MAX);
	if (len >= 5 && td_ieq(s, 5, "plane")) {
		*dist = DPG_DIST_PLANE;
		return dist_plane(s, plane, err);
	}
	comma = strchr(s, ',');
	base_len = comma != NULL ? (size_t)(comma - s) : len;
	if (comma != NULL && dist_flag(s, comma + 1, err) < 0)
		return -1;
	if (td_ieq(s, base_len, "pack") || td_ieq(s, base_len, "nopack"))
		return 0;	/* a flag alone: default distribution */
	return dist_levels(s, base_len, dist, err);
}

/* ------------------------------------------------------ layout */

static void layout_block(const uint32_t *counts, size_t nnodes,
			 uint32_t *node_of, uint32_t *local_of)
{
	size_t i, r = 0;
	uint32_t j;

	for (i = 0; i < nnodes; i++)
		for (j = 0; j < counts[i]; j++) {
			node_of[r] = (uint32_t)i;
			local_of[r] = j;
			r++;
		}
}

/* Deal blocks of up to size ranks round-robin over the nodes with room
 * left (size 1 is cyclic).  O(ntasks + nnodes): a node leaves the active
 * list once full, and every pass over the list places a rank per entry. */
static int layout_planes(const uint32_t *counts, size_t nnodes, uint32_t size,
			 uint32_t *node_of, uint32_t *local_of,
			 struct dpg_err *err)
{
	uint32_t *active, *given;
	size_t nactive = nnodes, r = 0, a, i;

	active = calloc(nnodes, 2 * sizeof(*active));
	if (active == NULL)
		return dpg_errf(err, "layout: out of memory for %zu nodes", nnodes);
	given = active + nnodes;
	for (i = 0; i < nnodes; i++)
		active[i] = (uint32_t)i;
	while (nactive > 0) {
		size_t keep = 0;

		for (a = 0; a < nactive; a++) {
			uint32_t node = active[a];
			uint32_t take = counts[node] - given[node];

			if (take > size)
				take = size;
			for (; take > 0; take--, r++) {
				node_of[r] = node;
				local_of[r] = given[node]++;
			}
			if (given[node] < counts[node])
				active[keep++] = node;
		}
		nactive = keep;
	}
	free(active);
	return 0;
}

static int layout_check(const uint32_t *counts, size_t nnodes,
			const uint32_t *node_of, const uint32_t *local_of,
			size_t ntasks, struct dpg_err *err)
{
	uint64_t sum = 0;
	size_t i;

	if (counts == NULL || node_of == NULL || local_of == NULL)
		return dpg_errf(err, "layout: counts, node_of and local_of "
				"must not be NULL");
	if (nnodes == 0 || nnodes > (size_t)UINT32_MAX + 1)
		return dpg_errf(err, "layout: %zu nodes (expected 1 to %" PRIu64
				")", nnodes, (uint64_t)UINT32_MAX + 1);
	for (i = 0; i < nnodes; i++) {
		if (counts[i] == 0)
			return dpg_errf(err, "layout: node %zu has 0 tasks "
					"(every node of a step runs at least one)", i);
		sum += counts[i];
	}
	if (sum != (uint64_t)ntasks)
		return dpg_errf(err, "layout: per-node counts add up to %" PRIu64
				" tasks but ntasks is %zu", sum, ntasks);
	return 0;
}

int dpg_layout(const uint32_t *counts, size_t nnodes, enum dpg_dist dist,
	       uint32_t plane, uint32_t *node_of, uint32_t *local_of,
	       size_t ntasks, struct dpg_err *err)
{
	if (layout_check(counts, nnodes, node_of, local_of, ntasks, err) < 0)
		return -1;
	switch (dist) {
	case DPG_DIST_BLOCK:
		layout_block(counts, nnodes, node_of, local_of);
		return 0;
	case DPG_DIST_CYCLIC:
		return layout_planes(counts, nnodes, 1, node_of, local_of, err);
	case DPG_DIST_PLANE:
		if (plane == 0)
			return dpg_errf(err, "layout: plane distribution with "
					"size 0 (take it from SLURM_DIST_PLANESIZE)");
		return layout_planes(counts, nnodes, plane, node_of, local_of,
				     err);
	}
	return dpg_errf(err, "layout: unknown distribution %d (expected block, "
			"cyclic or plane)", (int)dist);
}
