/* SPDX-License-Identifier: BSD-3-Clause */
/* test_checkrow.c - unit tests for lib/launch/checkrow.c and checkrow_fmt.c:
 * the rows' wire form, the per-node merge, the table and the JSON. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkrow.h"

static void task_row(struct dpg_check_row *r, const char *node, int rank)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->node, sizeof(r->node), "%s", node);
	r->rank = rank;
	r->tasks = 1;
	for (int c = 0; c < DPG_CHECK_NCOLS; c++)
		dpg_check_set(&r->cell[c], DPG_CHECK_OK, "fine", "%s", "");
	dpg_check_set(&r->cell[DPG_CHECK_GPUS], DPG_CHECK_NA, "none", "%s", "");
}

static void test_roundtrip(void **state)
{
	struct dpg_check_row a, b;
	struct dpg_err e = { "" };
	char buf[8192];

	(void)state;
	task_row(&a, "n2", 5);
	dpg_check_set(&a.cell[DPG_CHECK_SHM], DPG_CHECK_FAIL, "0M/13M",
		      "tab\there, newline\nthere: %d", 7);
	assert_int_equal(dpg_check_encode(&a, buf, sizeof(buf), &e), 0);
	assert_int_equal(dpg_check_decode(buf, strlen(buf), &b, &e), 0);
	assert_string_equal(b.node, "n2");
	assert_int_equal(b.rank, 5);
	assert_int_equal(b.cell[DPG_CHECK_SHM].state, DPG_CHECK_FAIL);
	assert_string_equal(b.cell[DPG_CHECK_SHM].detail, "tab here, newline there: 7");
	assert_int_equal(b.cell[DPG_CHECK_GPUS].state, DPG_CHECK_NA);
	assert_string_equal(b.cell[DPG_CHECK_NET].value, "fine");
	/* too small a buffer is an error, not a truncated row */
	assert_int_equal(dpg_check_encode(&a, buf, 40, &e), -1);
	assert_non_null(strstr(e.msg, "too small"));
}

static void test_decode_bad(void **state)
{
	struct dpg_check_row r;
	struct dpg_err e = { "" };
	const char *bad_head = "nod\tn1\t0\n";
	const char *bad_state = "node\tn1\t0\ngpus\t7\tx\ty\n";
	const char *short_row = "node\tn1\t0\ngpus\t1\tx\t\n";

	(void)state;
	assert_int_equal(dpg_check_decode(bad_head, strlen(bad_head), &r, &e), -1);
	assert_non_null(strstr(e.msg, "line 1"));
	assert_int_equal(dpg_check_decode(bad_state, strlen(bad_state), &r, &e), -1);
	assert_non_null(strstr(e.msg, "state '7'"));
	assert_int_equal(dpg_check_decode(short_row, strlen(short_row), &r, &e), -1);
	assert_non_null(strstr(e.msg, "2 lines, want 11"));
}

static void test_merge(void **state)
{
	struct dpg_check_row n = { .expected = 2 }, t0, t1;

	(void)state;
	task_row(&t0, "n3", 4);
	task_row(&t1, "n3", 5);
	dpg_check_set(&t1.cell[DPG_CHECK_NOFILE], DPG_CHECK_FAIL, "64/90", "too low");
	dpg_check_set(&t1.cell[DPG_CHECK_GPUS], DPG_CHECK_OK, "1/1 seen", "%s", "");
	dpg_check_merge(&n, &t0);
	assert_true(!dpg_check_row_fit(&n));	/* 1 of 2 tasks */
	assert_int_equal(n.expected, 2);
	dpg_check_merge(&n, &t1);
	assert_int_equal(n.tasks, 2);
	assert_int_equal(n.cell[DPG_CHECK_NOFILE].state, DPG_CHECK_FAIL);
	assert_string_equal(n.cell[DPG_CHECK_NOFILE].detail, "rank 5: too low");
	assert_int_equal(n.cell[DPG_CHECK_GPUS].state, DPG_CHECK_OK);
	assert_false(dpg_check_row_fit(&n));
	dpg_check_set(&n.cell[DPG_CHECK_NOFILE], DPG_CHECK_OK, "x", "%s", "");
	assert_true(dpg_check_row_fit(&n));
}

static char *print(bool json, const struct dpg_check_row *rows, size_t n)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	assert_non_null(f);
	if (json)
		dpg_check_print_json(f, rows, n);
	else
		dpg_check_print_table(f, rows, n);
	fclose(f);
	return out;
}

static void test_outputs(void **state)
{
	struct dpg_check_row rows[3] = { { .expected = 1 }, { .expected = 1 }, { .expected = 2 } };
	struct dpg_check_row t;
	char *s;

	(void)state;
	task_row(&t, "n1", 0);
	dpg_check_merge(&rows[0], &t);
	task_row(&t, "n2", 1);
	dpg_check_set(&t.cell[DPG_CHECK_SHM], DPG_CHECK_FAIL, "0M/13M", "shm \"small\"");
	dpg_check_merge(&rows[1], &t);
	snprintf(rows[2].node, sizeof(rows[2].node), "n3");
	snprintf(rows[2].missing, sizeof(rows[2].missing), "0 of 2 tasks reported");
	s = print(false, rows, 3);
	assert_non_null(strstr(s, "NODE       TASKS GPUS"));
	assert_non_null(strstr(s, "n2         1/1 "));
	assert_non_null(strstr(s, "FAIL[1] 0M/13M"));
	assert_non_null(strstr(s, "[1] n2 shm: rank 1: shm \"small\"\n"));
	assert_non_null(strstr(s, "n3: 0 of 2 tasks reported\n"));
	assert_non_null(strstr(s, "dpg-check: 1 of 3 nodes fit\n"));
	/* an N/A cell with a detail: an unnumbered note after the failures */
	assert_null(strstr(s, "n1 nccl:"));
	free(s);
	dpg_check_set(&rows[0].cell[DPG_CHECK_NCCL], DPG_CHECK_NA, "no GPU module",
		      "not measured: %s", "cannot load");
	s = print(false, rows, 3);
	assert_non_null(strstr(s, " NCCL "));
	assert_non_null(strstr(s, "n3: 0 of 2 tasks reported\nn1 nccl: not measured: "
			       "cannot load\ndpg-check: 1 of 3"));
	assert_null(strstr(s, "[2]"));
	assert_non_null(strstr(s, "dpg-check: 1 of 3 nodes fit\n"));
	free(s);
	s = print(true, rows, 3);
	assert_non_null(strstr(s, "{\"fit\":false,\"nodes\":[{\"node\":\"n1\",\"tasks\":1,"
			       "\"expected\":1,\"fit\":true"));
	assert_non_null(strstr(s, "\"shm\":{\"state\":\"fail\",\"value\":\"0M/13M\","
			       "\"detail\":\"rank 1: shm \\\"small\\\"\"}"));
	assert_non_null(strstr(s, "\"node\":\"n3\",\"tasks\":0,\"expected\":2,\"fit\":false"));
	assert_non_null(strstr(s, "\"nccl\":{\"state\":\"n/a\",\"value\":\"no GPU module\","
			       "\"detail\":\"not measured: cannot load\"}"));
	/* a node that never reported: every cell "unknown" */
	assert_non_null(strstr(s, "\"missing\":\"0 of 2 tasks reported\",\"checks\":{"
			       "\"gpus\":{\"state\":\"unknown\""));
	assert_non_null(strstr(s, "\"nccl\":{\"state\":\"unknown\",\"value\":\"\""));
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_decode_bad),
		cmocka_unit_test(test_merge),
		cmocka_unit_test(test_outputs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
