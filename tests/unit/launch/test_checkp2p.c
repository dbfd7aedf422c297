/* SPDX-License-Identifier: BSD-3-Clause */
/* test_checkp2p.c - unit tests for lib/launch/checkp2p.c: whether a node can
 * run the NCCL test, who takes part in which test, the plan's message. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkp2p.h"

#define N 5

static void test_planned(void **state)
{
	(void)state;
	assert_false(dpg_check_gpu_planned(NULL, NULL));
	assert_false(dpg_check_gpu_planned(NULL, "0"));
	assert_false(dpg_check_gpu_planned(NULL, ""));
	assert_false(dpg_check_gpu_planned(NULL, "x"));
	assert_true(dpg_check_gpu_planned(NULL, "2"));
	assert_true(dpg_check_gpu_planned("0000:43:00.0", NULL));
	/* DPG_GPUS decides where it is set: empty is "none" */
	assert_false(dpg_check_gpu_planned("", "1"));
}

static void test_ready(void **state)
{
	struct dpg_check_gpu g = { .planned = false, .device = -1 };
	struct dpg_check_cell c;

	(void)state;
	dpg_check_nccl_ready(&g, &c);
	assert_int_equal(c.state, DPG_CHECK_NA);
	assert_string_equal(c.value, "no GPU planned");
	assert_string_equal(c.detail, "");
	g.planned = true;
	g.module_err = "cannot load the GPU module /x/dpg-cuda.so: no such file";
	dpg_check_nccl_ready(&g, &c);
	assert_int_equal(c.state, DPG_CHECK_NA);
	assert_string_equal(c.value, "no GPU module");
	assert_string_equal(c.detail, "not measured: cannot load the GPU module "
			    "/x/dpg-cuda.so: no such file");
	g.module_err = NULL;
	dpg_check_nccl_ready(&g, &c);
	assert_string_equal(c.value, "no CUDA device");
	assert_non_null(strstr(c.detail, "CUDA shows this task no device"));
	g.devices = 2;
	dpg_check_nccl_ready(&g, &c);
	assert_string_equal(c.value, "no allocator");
	assert_non_null(strstr(c.detail, "without nvcc"));
	g.allocator = true;
	g.pick_err = "DPG_GPUS names GPU 0000:43:00.0, which CUDA does not show";
	dpg_check_nccl_ready(&g, &c);
	assert_int_equal(c.state, DPG_CHECK_NA);
	assert_string_equal(c.value, "no device");
	assert_non_null(strstr(c.detail, "not measured: DPG_GPUS names GPU"));
	g.device = 1;
	dpg_check_nccl_ready(&g, &c);
	assert_int_equal(c.state, DPG_CHECK_OK);
	assert_string_equal(c.value, "ready");
}

/* N node rows, all fit; ready[i]: node i's first task can run NCCL */
static void rows_init(struct dpg_check_row *rows, const bool *ready)
{
	struct dpg_check_gpu yes = { .planned = true, .devices = 1, .allocator = true,
				     .device = 0 };
	struct dpg_check_gpu no = { .planned = false, .device = -1 };

	memset(rows, 0, N * sizeof(*rows));
	for (int i = 0; i < N; i++) {
		snprintf(rows[i].node, sizeof(rows[i].node), "n%d", i + 1);
		rows[i].tasks = rows[i].expected = 1;
		for (int c = 0; c < DPG_CHECK_NCOLS; c++)
			dpg_check_set(&rows[i].cell[c], DPG_CHECK_OK, "fine", "%s", "");
		dpg_check_set(&rows[i].cell[DPG_CHECK_NET], DPG_CHECK_NA, "", "%s", "");
		dpg_check_nccl_ready(ready[i] ? &yes : &no, &rows[i].cell[DPG_CHECK_NCCL]);
	}
}

static void test_plan(void **state)
{
	bool ready[N] = { true, true, false, true, true };
	struct dpg_check_row rows[N];
	int cpu[N], nccl[N];
	struct dpg_check_p2p p = { .cpu = cpu, .nccl = nccl };

	(void)state;
	rows_init(rows, ready);
	/* n4 broken (shm): out of both tests; rank 0 on n2 (index 1) */
	dpg_check_set(&rows[3].cell[DPG_CHECK_SHM], DPG_CHECK_FAIL, "0M/9M", "small");
	dpg_check_p2p_plan(rows, N, 1, 40000, &p);
	assert_int_equal(p.port, 40000);
	assert_int_equal(p.ncpu, 4);
	assert_int_equal(cpu[0], 1);
	assert_int_equal(cpu[1], 0);
	assert_int_equal(cpu[2], 2);
	assert_int_equal(cpu[3], 4);
	assert_int_equal(p.nnccl, 3);	/* n3 has no GPU, n4 is broken */
	assert_int_equal(nccl[0], 1);
	assert_int_equal(nccl[1], 0);
	assert_int_equal(nccl[2], 4);
	/* rank 0's node cannot: no NCCL test at all */
	ready[1] = false;
	rows_init(rows, ready);
	dpg_check_p2p_plan(rows, N, 1, 40000, &p);
	assert_int_equal(p.ncpu, 5);
	assert_int_equal(p.nnccl, 0);
	/* only rank 0 and one node without a GPU: no NCCL pair */
	ready[1] = true;
	rows_init(rows, ready);
	dpg_check_p2p_plan(rows, N, 2, 40000, &p);
	assert_int_equal(p.nnccl, 0);
	/* no port, one node: no test */
	dpg_check_p2p_plan(rows, N, 0, 0, &p);
	assert_int_equal(p.ncpu + p.nnccl, 0);
	dpg_check_p2p_plan(rows, 1, 0, 40000, &p);
	assert_int_equal(p.ncpu + p.nnccl, 0);
}

static void test_mark(void **state)
{
	bool ready[N] = { true, true, false, true, true };
	struct dpg_check_row rows[N];
	int cpu[N], nccl[N];
	struct dpg_check_p2p p = { .cpu = cpu, .nccl = nccl };

	(void)state;
	rows_init(rows, ready);
	dpg_check_set(&rows[3].cell[DPG_CHECK_SHM], DPG_CHECK_FAIL, "0M/9M", "small");
	dpg_check_p2p_plan(rows, N, 0, 40000, &p);
	dpg_check_p2p_mark(rows, N, 0, &p);
	assert_string_equal(rows[0].cell[DPG_CHECK_NET].value, "rank 0");
	assert_string_equal(rows[0].cell[DPG_CHECK_NCCL].value, "rank 0");
	assert_string_equal(rows[1].cell[DPG_CHECK_NET].value, "pending");
	assert_string_equal(rows[1].cell[DPG_CHECK_NCCL].value, "pending");
	assert_string_equal(rows[2].cell[DPG_CHECK_NET].value, "pending");
	assert_string_equal(rows[2].cell[DPG_CHECK_NCCL].value, "no GPU planned");
	assert_string_equal(rows[3].cell[DPG_CHECK_NET].value, "skipped");
	assert_string_equal(rows[3].cell[DPG_CHECK_NCCL].value, "skipped");
	assert_int_equal(rows[3].cell[DPG_CHECK_NCCL].state, DPG_CHECK_NA);
	/* rank 0's node without a GPU module: the ready nodes say why not */
	ready[0] = false;
	rows_init(rows, ready);
	dpg_check_set(&rows[0].cell[DPG_CHECK_NCCL], DPG_CHECK_NA, "no GPU module",
		      "not measured: cannot load");
	dpg_check_p2p_plan(rows, N, 0, 40000, &p);
	dpg_check_p2p_mark(rows, N, 0, &p);
	assert_string_equal(rows[0].cell[DPG_CHECK_NCCL].value, "no GPU module");
	assert_string_equal(rows[1].cell[DPG_CHECK_NCCL].value, "not run");
	assert_string_equal(rows[1].cell[DPG_CHECK_NCCL].detail, "not measured: rank 0's "
			    "node n1 cannot run NCCL (no GPU module: not measured: cannot load)");
	assert_string_equal(rows[2].cell[DPG_CHECK_NCCL].value, "no GPU planned");
	for (int i = 0; i < N; i++)
		assert_true(dpg_check_row_fit(&rows[i]));
}

static void test_message(void **state)
{
	int cpu[N] = { 2, 0, 4 }, nccl[N] = { 2, 4 }, c2[N], n2[N];
	struct dpg_check_p2p p = { .port = 41234, .ncpu = 3, .nnccl = 2, .cpu = cpu,
				   .nccl = nccl };
	struct dpg_check_p2p q = { .cpu = c2, .nccl = n2 };
	struct dpg_err e = { "" };
	char buf[64];

	(void)state;
	assert_int_equal(dpg_check_p2p_format(&p, buf, sizeof(buf), &e), 0);
	assert_string_equal(buf, "41234 3 2 0 4 2 2 4");
	assert_int_equal(dpg_check_p2p_parse(buf, N, &q, &e), 0);
	assert_int_equal(q.port, 41234);
	assert_int_equal(q.ncpu, 3);
	assert_int_equal(q.nnccl, 2);
	assert_memory_equal(c2, cpu, 3 * sizeof(int));
	assert_memory_equal(n2, nccl, 2 * sizeof(int));
	assert_int_equal(dpg_check_p2p_index(c2, 3, 4), 2);
	assert_int_equal(dpg_check_p2p_index(c2, 3, 1), -1);
	assert_int_equal(dpg_check_p2p_index(n2, 0, 2), -1);
	/* "0": no test (rank 0 could not plan one) */
	assert_int_equal(dpg_check_p2p_parse("0", N, &q, &e), 0);
	assert_int_equal(q.port + q.ncpu + q.nnccl, 0);
	/* a node past the step, a short list, trailing text, no port */
	assert_int_equal(dpg_check_p2p_parse("41234 2 0 5 0", N, &q, &e), -1);
	assert_non_null(strstr(e.msg, "nodes below 5"));
	assert_int_equal(q.port + q.ncpu + q.nnccl, 0);
	assert_int_equal(dpg_check_p2p_parse("41234 3 0 1", N, &q, &e), -1);
	assert_int_equal(dpg_check_p2p_parse("41234 2 0 1 0 x", N, &q, &e), -1);
	assert_int_equal(dpg_check_p2p_parse("41234 6 0 1 2 3 4 0 0", N, &q, &e), -1);
	assert_int_equal(dpg_check_p2p_parse("x", N, &q, &e), -1);
	assert_non_null(strstr(e.msg, "no port"));
	assert_int_equal(dpg_check_p2p_parse("70000 0 0", N, &q, &e), -1);
	/* too small a buffer is an error, not a cut message */
	assert_int_equal(dpg_check_p2p_format(&p, buf, 12, &e), -1);
	assert_non_null(strstr(e.msg, "too small"));
}

static void test_result(void **state)
{
	bool ready[N] = { true, true, true, true, true };
	struct dpg_check_row rows[N];
	int cpu[N], nccl[N];
	struct dpg_check_p2p p = { .cpu = cpu, .nccl = nccl };
	struct dpg_check_cell c;

	(void)state;
	dpg_check_p2p_result(&c, true, true, 21.456, 17.4, "");
	assert_int_equal(c.state, DPG_CHECK_OK);
	assert_string_equal(c.value, "21.46GB/s 17us");
	dpg_check_p2p_result(&c, true, false, 0, 0, "timeout: rank 1");
	assert_int_equal(c.state, DPG_CHECK_FAIL);
	assert_string_equal(c.value, "failed");
	assert_non_null(strstr(c.detail, "timeout: rank 1: NCCL between"));
	assert_non_null(strstr(c.detail, "NCCL_DEBUG=INFO"));
	dpg_check_p2p_result(&c, false, false, 0, 0, "peer failure");
	assert_non_null(strstr(c.detail, "peer failure: check the firewall"));
	/* the CPU test stopped after n2: n3-n5 fail; their NCCL cells not run */
	rows_init(rows, ready);
	dpg_check_p2p_plan(rows, N, 0, 40000, &p);
	dpg_check_p2p_mark(rows, N, 0, &p);
	dpg_check_p2p_result(&rows[1].cell[DPG_CHECK_NET], false, true, 1.5, 60, "");
	dpg_check_p2p_abandon(rows, &p, false, true, "timed out");
	dpg_check_p2p_abandon(rows, &p, true, false, "the CPU test failed first");
	assert_int_equal(rows[1].cell[DPG_CHECK_NET].state, DPG_CHECK_OK);
	assert_int_equal(rows[2].cell[DPG_CHECK_NET].state, DPG_CHECK_FAIL);
	assert_non_null(strstr(rows[4].cell[DPG_CHECK_NET].detail, "timed out: check"));
	assert_string_equal(rows[0].cell[DPG_CHECK_NET].value, "rank 0");
	for (int i = 1; i < N; i++) {
		assert_int_equal(rows[i].cell[DPG_CHECK_NCCL].state, DPG_CHECK_NA);
		assert_string_equal(rows[i].cell[DPG_CHECK_NCCL].value, "not run");
		assert_string_equal(rows[i].cell[DPG_CHECK_NCCL].detail,
				    "not measured: the CPU test failed first");
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_planned),
		cmocka_unit_test(test_ready),
		cmocka_unit_test(test_plan),
		cmocka_unit_test(test_mark),
		cmocka_unit_test(test_message),
		cmocka_unit_test(test_result),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
