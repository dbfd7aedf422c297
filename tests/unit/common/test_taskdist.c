/* SPDX-License-Identifier: BSD-3-Clause */
/* test_taskdist.c - unit tests for lib/common/taskdist.c: tasks-per-node strings,
 * distribution names, and block/cyclic/plane rank layouts including errors. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "taskdist.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------ tasks per node */

struct tpn_ok {
	const char *s;
	size_t cap;
	size_t n;
	uint32_t want[8];
};

static const struct tpn_ok tpn_ok_cases[] = {
	{ "2(x3),1", 8, 4, { 2, 2, 2, 1 } },
	{ "4", 8, 1, { 4 } },
	{ "3,2", 8, 2, { 3, 2 } },
	{ "1(x1)", 1, 1, { 1 } },
	{ "1(x5)", 5, 5, { 1, 1, 1, 1, 1 } },
	{ "8(x2),4,2(x2)", 8, 5, { 8, 8, 4, 2, 2 } },
	{ "4294967295", 1, 1, { 4294967295u } },
	{ "007", 1, 1, { 7 } },
};

static void test_tpn_ok(void **state)
{
	size_t i, j;

	(void)state;
	for (i = 0; i < NELEM(tpn_ok_cases); i++) {
		const struct tpn_ok *c = &tpn_ok_cases[i];
		uint32_t counts[8];
		struct dpg_err e = { "" };
		size_t n = 99;

		if (dpg_tpn_parse(c->s, counts, c->cap, &n, &e) != 0)
			fail_msg("\"%s\": %s", c->s, e.msg);
		assert_int_equal(n, c->n);
		for (j = 0; j < n; j++)
			assert_int_equal(counts[j], c->want[j]);
	}
}

struct bad_case {
	const char *s;
	const char *needle;
};

static const struct bad_case tpn_bad_cases[] = {
	{ NULL, "empty" },
	{ "", "empty" },
	{ "0", "is 0" },
	{ "2,0", "is 0" },
	{ "2(x0)", "repeat count at offset 3 is 0" },
	{ "2(x3", "expected ')'" },
	{ "2(3)", "expected 'x'" },
	{ "2(y3)", "expected 'x'" },
	{ "2x3", "unexpected 'x'" },
	{ "2(x)", "expected a repeat count" },
	{ "2,", "expected a task count at offset 2, found end of input" },
	{ ",2", "expected a task count at offset 0" },
	{ "2,,3", "expected a task count" },
	{ "a", "expected a task count" },
	{ "-1", "found '-'" },
	{ "+1", "found '+'" },
	{ " 1", "byte 0x20" },
	{ "2 ,3", "byte 0x20" },
	{ "1\x01", "byte 0x01" },
	{ "4294967296", "larger than 4294967295" },
	{ "99999999999999999999999", "larger than" },
	{ "2(x3)junk", "unexpected 'j'" },
	{ "2(x3),", "found end of input" },
	{ "1(x9)", "more than 8 nodes" },
	{ "1(x4),1(x5)", "more than 8 nodes" },
	{ "1,1,1,1,1,1,1,1,1", "more than 8 nodes" },
	/* must fail fast, not loop for 2^64 */
	{ "1(x18446744073709551615)", "more than 8 nodes" },
	{ "1(x18446744073709551616)", "larger than" },
};

static void test_tpn_bad(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < NELEM(tpn_bad_cases); i++) {
		const struct bad_case *c = &tpn_bad_cases[i];
		uint32_t counts[8];
		struct dpg_err e;
		size_t n = 99;

		memset(&e, 0, sizeof(e));
		if (dpg_tpn_parse(c->s, counts, 8, &n, &e) != -1)
			fail_msg("\"%s\" accepted", c->s ? c->s : "(null)");
		if (n != 0 || strstr(e.msg, c->needle) == NULL)
			fail_msg("\"%s\": n=%zu, message \"%s\" lacks \"%s\"",
				 c->s ? c->s : "(null)", n, e.msg, c->needle);
		if (strncmp(e.msg, "tasks per node \"", 16) != 0)
			fail_msg("message \"%s\" does not name the input", e.msg);
	}
}

static void test_tpn_args(void **state)
{
	uint32_t counts[2];
	struct dpg_err e;
	size_t n;

	(void)state;
	memset(&e, 0, sizeof(e));
	assert_int_equal(dpg_tpn_parse("1", NULL, 2, &n, &e), -1);
	assert_true(e.msg[0] != '\0');
	assert_int_equal(dpg_tpn_parse("1", counts, 2, NULL, &e), -1);
	assert_int_equal(dpg_tpn_parse("1", counts, 0, &n, &e), -1);
	assert_non_null(strstr(e.msg, "more than 0 nodes"));
	assert_int_equal(dpg_tpn_parse("1", counts, 2, &n, NULL), 0);
	assert_int_equal(dpg_tpn_parse("x", counts, 2, &n, NULL), -1);
}

/* ------------------------------------------------------ distribution */

struct dist_ok {
	const char *s;
	enum dpg_dist dist;
	uint32_t plane;
};

static const struct dist_ok dist_ok_cases[] = {
	{ "block", DPG_DIST_BLOCK, 0 },
	{ "cyclic", DPG_DIST_CYCLIC, 0 },
	{ "*", DPG_DIST_BLOCK, 0 },
	{ "BLOCK", DPG_DIST_BLOCK, 0 },
	{ "Cyclic", DPG_DIST_CYCLIC, 0 },
	{ "block:cyclic", DPG_DIST_BLOCK, 0 },
	{ "block:block", DPG_DIST_BLOCK, 0 },
	{ "cyclic:block", DPG_DIST_CYCLIC, 0 },
	{ "cyclic:cyclic", DPG_DIST_CYCLIC, 0 },
	{ "cyclic:fcyclic", DPG_DIST_CYCLIC, 0 },
	{ "block:fcyclic", DPG_DIST_BLOCK, 0 },
	{ "block:block:block", DPG_DIST_BLOCK, 0 },
	{ "cyclic:fcyclic:fcyclic", DPG_DIST_CYCLIC, 0 },
	{ "*:*", DPG_DIST_BLOCK, 0 },
	{ "*:*:*", DPG_DIST_BLOCK, 0 },
	{ "cyclic:*:block", DPG_DIST_CYCLIC, 0 },
	{ "block,pack", DPG_DIST_BLOCK, 0 },
	{ "block,Pack", DPG_DIST_BLOCK, 0 },
	{ "cyclic,NoPack", DPG_DIST_CYCLIC, 0 },
	{ "cyclic:cyclic,nopack", DPG_DIST_CYCLIC, 0 },
	{ "pack", DPG_DIST_BLOCK, 0 },
	{ "NoPack", DPG_DIST_BLOCK, 0 },
	{ "plane=4", DPG_DIST_PLANE, 4 },
	{ "PLANE=2", DPG_DIST_PLANE, 2 },
	{ "plane=1", DPG_DIST_PLANE, 1 },
	{ "plane=2147483647", DPG_DIST_PLANE, 2147483647u },
	{ "plane=4,pack", DPG_DIST_PLANE, 4 },
	{ "plane", DPG_DIST_PLANE, 0 },	/* srun's env: size elsewhere */
	{ "plane,nopack", DPG_DIST_PLANE, 0 },
};

static void test_dist_ok(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < NELEM(dist_ok_cases); i++) {
		const struct dist_ok *c = &dist_ok_cases[i];
		enum dpg_dist d = (enum dpg_dist)77;
		uint32_t plane = 77;
		struct dpg_err e = { "" };

		if (dpg_dist_parse(c->s, &d, &plane, &e) != 0)
			fail_msg("\"%s\": %s", c->s, e.msg);
		if (d != c->dist || plane != c->plane)
			fail_msg("\"%s\": got %d/%u, expected %d/%u", c->s, (int)d,
				 plane, (int)c->dist, c->plane);
	}
}

static const struct bad_case dist_bad_cases[] = {
	{ NULL, "empty" },
	{ "", "empty" },
	{ "arbitrary", "MASTER_ADDR" },
	{ "Arbitrary", "MASTER_ADDR" },
	{ "hostfile", "MASTER_ADDR" },
	{ "arbitrary:cyclic", "MASTER_ADDR" },
	{ "plane=0", "plane size" },
	{ "plane=", "plane size" },
	{ "plane=x", "plane size" },
	{ "plane=-1", "plane size" },
	{ "plane=2147483648", "plane size" },
	{ "plane=99999999999999999999999", "plane size" },
	{ "plane=4:block", "plane size" },
	{ "plane=4,bogus", "Pack or NoPack" },
	{ "planes", "expected \"plane\" or \"plane=N\"" },
	{ "plane:block", "expected \"plane\" or \"plane=N\"" },
	{ "fcyclic", "unknown node distribution" },
	{ "bogus", "unknown node distribution" },
	{ "unknown", "unknown node distribution" },
	{ "block ", "unknown node distribution" },
	{ "block:", "empty level" },
	{ ":block", "empty level" },
	{ "block::cyclic", "empty level" },
	{ "block:cyclic:cyclic:cyclic", "more than three" },
	{ "block:bogus", "socket/core" },
	{ "block:plane", "socket/core" },
	{ "block,foo", "Pack or NoPack" },
	{ "block,", "Pack or NoPack" },
	{ "block,pack,nopack", "Pack or NoPack" },
	{ ",pack", "empty level" },
	{ "bl\x01ock", "unknown node distribution" },
};

static void test_dist_bad(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < NELEM(dist_bad_cases); i++) {
		const struct bad_case *c = &dist_bad_cases[i];
		enum dpg_dist d;
		uint32_t plane;
		struct dpg_err e;

		memset(&e, 0, sizeof(e));
		if (dpg_dist_parse(c->s, &d, &plane, &e) != -1)
			fail_msg("\"%s\" accepted", c->s ? c->s : "(null)");
		if (strstr(e.msg, c->needle) == NULL)
			fail_msg("\"%s\": message \"%s\" lacks \"%s\"",
				 c->s ? c->s : "(null)", e.msg, c->needle);
		if (strncmp(e.msg, "distribution \"", 14) != 0)
			fail_msg("message \"%s\" does not name the input", e.msg);
	}
}

static void test_dist_long_and_args(void **state)
{
	char s[400];
	enum dpg_dist d;
	uint32_t plane;
	struct dpg_err e;

	(void)state;
	memset(s, 'a', sizeof(s) - 1);
	s[sizeof(s) - 1] = '\0';
	memset(&e, 0, sizeof(e));
	assert_int_equal(dpg_dist_parse(s, &d, &plane, &e), -1);
	assert_non_null(strstr(e.msg, "longer than"));
	assert_int_equal(dpg_dist_parse("block", NULL, &plane, &e), -1);
	assert_int_equal(dpg_dist_parse("block", &d, NULL, &e), -1);
	assert_int_equal(dpg_dist_parse("bogus", &d, &plane, NULL), -1);
}

/* ------------------------------------------------------ layout */

struct layout_case {
	const char *name;
	uint32_t counts[4];
	size_t nnodes;
	enum dpg_dist dist;
	uint32_t plane;
	size_t ntasks;
	uint32_t node_of[10];
	uint32_t local_of[10];
};

static const struct layout_case layout_cases[] = {
	/* srun -n5 over 2 nodes: SLURM_STEP_TASKS_PER_NODE=3,2 */
	{ "block 3,2", { 3, 2 }, 2, DPG_DIST_BLOCK, 0, 5,
	  { 0, 0, 0, 1, 1 }, { 0, 1, 2, 0, 1 } },
	{ "cyclic 3,2", { 3, 2 }, 2, DPG_DIST_CYCLIC, 0, 5,
	  { 0, 1, 0, 1, 0 }, { 0, 0, 1, 1, 2 } },
	{ "plane=2 3,2", { 3, 2 }, 2, DPG_DIST_PLANE, 2, 5,
	  { 0, 0, 1, 1, 0 }, { 0, 1, 0, 1, 2 } },
	{ "plane=2 4,4", { 4, 4 }, 2, DPG_DIST_PLANE, 2, 8,
	  { 0, 0, 1, 1, 0, 0, 1, 1 }, { 0, 1, 0, 1, 2, 3, 2, 3 } },
	{ "cyclic 1,3,2", { 1, 3, 2 }, 3, DPG_DIST_CYCLIC, 0, 6,
	  { 0, 1, 2, 1, 2, 1 }, { 0, 0, 0, 1, 1, 2 } },
	{ "plane=3 2,5", { 2, 5 }, 2, DPG_DIST_PLANE, 3, 7,
	  { 0, 0, 1, 1, 1, 1, 1 }, { 0, 1, 0, 1, 2, 3, 4 } },
	{ "plane=8 is block", { 3, 2 }, 2, DPG_DIST_PLANE, 8, 5,
	  { 0, 0, 0, 1, 1 }, { 0, 1, 2, 0, 1 } },
	{ "plane=1 is cyclic", { 3, 2 }, 2, DPG_DIST_PLANE, 1, 5,
	  { 0, 1, 0, 1, 0 }, { 0, 0, 1, 1, 2 } },
	{ "block 1 node", { 4 }, 1, DPG_DIST_BLOCK, 0, 4,
	  { 0, 0, 0, 0 }, { 0, 1, 2, 3 } },
	{ "cyclic 1 node", { 4 }, 1, DPG_DIST_CYCLIC, 0, 4,
	  { 0, 0, 0, 0 }, { 0, 1, 2, 3 } },
	{ "cyclic 1 each", { 1, 1, 1, 1 }, 4, DPG_DIST_CYCLIC, 0, 4,
	  { 0, 1, 2, 3 }, { 0, 0, 0, 0 } },
	{ "plane=2 2,2,1,3", { 2, 2, 1, 3 }, 4, DPG_DIST_PLANE, 2, 8,
	  { 0, 0, 1, 1, 2, 3, 3, 3 }, { 0, 1, 0, 1, 0, 0, 1, 2 } },
};

static void test_layout_cases(void **state)
{
	size_t i, r;

	(void)state;
	for (i = 0; i < NELEM(layout_cases); i++) {
		const struct layout_case *c = &layout_cases[i];
		uint32_t node_of[10], local_of[10];
		struct dpg_err e = { "" };

		if (dpg_layout(c->counts, c->nnodes, c->dist, c->plane, node_of,
			       local_of, c->ntasks, &e) != 0)
			fail_msg("%s: %s", c->name, e.msg);
		for (r = 0; r < c->ntasks; r++)
			if (node_of[r] != c->node_of[r] ||
			    local_of[r] != c->local_of[r])
				fail_msg("%s: rank %zu on node %u/local %u, expected "
					 "%u/%u", c->name, r, node_of[r], local_of[r],
					 c->node_of[r], c->local_of[r]);
	}
}

/* Invariants for any counts: node i gets exactly counts[i] ranks, its local
 * ids are 0,1,2,... in rank order, and rank 0 is on node 0. */
static void check_invariants(const uint32_t *counts, size_t nnodes,
			     const uint32_t *node_of, const uint32_t *local_of,
			     size_t ntasks)
{
	uint32_t *seen = calloc(nnodes, sizeof(*seen));
	size_t r, i;

	assert_non_null(seen);
	assert_int_equal(node_of[0], 0);
	for (r = 0; r < ntasks; r++) {
		assert_true(node_of[r] < nnodes);
		assert_int_equal(local_of[r], seen[node_of[r]]);
		seen[node_of[r]]++;
	}
	for (i = 0; i < nnodes; i++)
		assert_int_equal(seen[i], counts[i]);
	free(seen);
}

static void test_layout_random(void **state)
{
	uint64_t s = 0x853c49e6748fea9bULL;
	int k;

	(void)state;
	for (k = 0; k < 500; k++) {
		uint32_t counts[16], node_of[16 * 9], local_of[16 * 9];
		size_t nnodes, ntasks = 0, i;
		int d;

		s = s * 6364136223846793005ULL + 1442695040888963407ULL;
		nnodes = 1 + (size_t)((s >> 33) % 16);
		for (i = 0; i < nnodes; i++) {
			s = s * 6364136223846793005ULL + 1442695040888963407ULL;
			counts[i] = 1 + (uint32_t)((s >> 33) % 9);
			ntasks += counts[i];
		}
		for (d = 0; d < 3; d++) {
			uint32_t plane = 1 + (uint32_t)(k % 5);

			assert_int_equal(dpg_layout(counts, nnodes, (enum dpg_dist)d,
						    plane, node_of, local_of,
						    ntasks, NULL), 0);
			check_invariants(counts, nnodes, node_of, local_of, ntasks);
		}
	}
}

/* One huge node and many small ones: must stay linear (no pass per rank
 * over all nodes). */
static void test_layout_skewed_large(void **state)
{
	size_t nnodes = 100001, ntasks = 1000000 + 100000, i;
	uint32_t *counts = malloc(nnodes * sizeof(*counts));
	uint32_t *node_of = malloc(ntasks * sizeof(*node_of));
	uint32_t *local_of = malloc(ntasks * sizeof(*local_of));

	(void)state;
	assert_non_null(counts);
	assert_non_null(node_of);
	assert_non_null(local_of);
	counts[0] = 1000000;
	for (i = 1; i < nnodes; i++)
		counts[i] = 1;
	assert_int_equal(dpg_layout(counts, nnodes, DPG_DIST_CYCLIC, 0, node_of,
				    local_of, ntasks, NULL), 0);
	check_invariants(counts, nnodes, node_of, local_of, ntasks);
	assert_int_equal(node_of[1], 1);
	assert_int_equal(node_of[100001], 0);	/* round 2: only node 0 left */
	assert_int_equal(local_of[100001], 1);
	free(counts);
	free(node_of);
	free(local_of);
}

static void test_layout_errors(void **state)
{
	uint32_t counts[2] = { 3, 2 }, zero[2] = { 3, 0 };
	uint32_t node_of[5], local_of[5];
	struct dpg_err e;

	(void)state;
#define LAYOUT_FAILS(needle, ...)					\
	do {								\
		memset(&e, 0, sizeof(e));				\
		assert_int_equal(dpg_layout(__VA_ARGS__, &e), -1);	\
		if (strstr(e.msg, needle) == NULL)			\
			fail_msg("message \"%s\" lacks \"%s\"", e.msg, needle); \
	} while (0)
	LAYOUT_FAILS("add up to 5 tasks but ntasks is 4",
		     counts, 2, DPG_DIST_BLOCK, 0, node_of, local_of, 4);
	LAYOUT_FAILS("add up to 5 tasks but ntasks is 6",
		     counts, 2, DPG_DIST_CYCLIC, 0, node_of, local_of, 6);
	LAYOUT_FAILS("node 1 has 0 tasks",
		     zero, 2, DPG_DIST_BLOCK, 0, node_of, local_of, 3);
	LAYOUT_FAILS("0 nodes", counts, 0, DPG_DIST_BLOCK, 0, node_of, local_of, 0);
	LAYOUT_FAILS("must not be NULL",
		     NULL, 2, DPG_DIST_BLOCK, 0, node_of, local_of, 5);
	LAYOUT_FAILS("must not be NULL",
		     counts, 2, DPG_DIST_BLOCK, 0, NULL, local_of, 5);
	LAYOUT_FAILS("must not be NULL",
		     counts, 2, DPG_DIST_BLOCK, 0, node_of, NULL, 5);
	LAYOUT_FAILS("SLURM_DIST_PLANESIZE",
		     counts, 2, DPG_DIST_PLANE, 0, node_of, local_of, 5);
	LAYOUT_FAILS("unknown distribution 42",
		     counts, 2, (enum dpg_dist)42, 0, node_of, local_of, 5);
#undef LAYOUT_FAILS
	assert_int_equal(dpg_layout(counts, 2, DPG_DIST_BLOCK, 0, node_of,
				    local_of, 4, NULL), -1);
}

/* The plugin's path: env strings -> counts + dist -> layout. */
static void test_end_to_end(void **state)
{
	uint32_t counts[4], node_of[8], local_of[8], plane;
	enum dpg_dist d;
	size_t n;

	(void)state;
	assert_int_equal(dpg_tpn_parse("3(x2),2", counts, 4, &n, NULL), 0);
	assert_int_equal(n, 3);
	assert_int_equal(dpg_dist_parse("plane=2", &d, &plane, NULL), 0);
	assert_int_equal(dpg_layout(counts, n, d, plane, node_of, local_of, 8,
				    NULL), 0);
	/* n0: 0,1  n1: 2,3  n2: 4,5  n0: 6  n1: 7 */
	assert_int_equal(node_of[6], 0);
	assert_int_equal(local_of[6], 2);
	assert_int_equal(node_of[7], 1);
	assert_int_equal(local_of[7], 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tpn_ok),
		cmocka_unit_test(test_tpn_bad),
		cmocka_unit_test(test_tpn_args),
		cmocka_unit_test(test_dist_ok),
		cmocka_unit_test(test_dist_bad),
		cmocka_unit_test(test_dist_long_and_args),
		cmocka_unit_test(test_layout_cases),
		cmocka_unit_test(test_layout_random),
		cmocka_unit_test(test_layout_skewed_large),
		cmocka_unit_test(test_layout_errors),
		cmocka_unit_test(test_end_to_end),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
