/* SPDX-License-Identifier: BSD-3-Clause */
/* test_gpuvis.c - unit tests for lib/launch/gpuvis.c: device lists, Slurm's
 * GPU index spaces, visible-device strings, and dpg_gpu_visibility_parse
 * (lib/launch/opts.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuvis.h"
#include "opts.h"
#include "parse.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ================================================================ dpg_int_list_parse */

static void list_ok(const char *s, const int *want, size_t nwant)
{
	int v[DPG_GPUVIS_MAX];
	size_t n = 99;
	struct dpg_err e = { "" };

	if (dpg_int_list_parse(s, v, NELEM(v), &n, &e) != 0)
		fail_msg("\"%s\": %s", s, e.msg);
	assert_int_equal(n, nwant);
	for (size_t i = 0; i < n; i++)
		if (v[i] != want[i])
			fail_msg("\"%s\"[%zu] = %d, want %d", s, i, v[i], want[i]);
}

static void list_bad(const char *s, size_t cap, const char *needle)
{
	int v[DPG_GPUVIS_MAX];
	struct dpg_err e = { "" };
	size_t n = 99;

	if (dpg_int_list_parse(s, v, cap, &n, &e) == 0)
		fail_msg("\"%s\" accepted (%zu items)", s ? s : "(null)", n);
	if (strstr(e.msg, needle) == NULL)
		fail_msg("\"%s\": error \"%s\" lacks \"%s\"", s ? s : "(null)", e.msg, needle);
}

static void test_list_parse(void **state)
{
	static const int a[] = { 0, 2, 3 }, b[] = { 0, 1, 2, 3 }, c[] = { 1, 3, 4, 5 };
	static const int d[] = { 7 }, f[] = { 7, 5 }, g[] = { 10, 4095 }, h[] = { 2, 2 };
	int v[4];
	size_t n = 99;

	(void)state;
	list_ok("0,2,3", a, NELEM(a));
	list_ok("0-3", b, NELEM(b));
	list_ok("1,3-5", c, NELEM(c));
	list_ok("7", d, NELEM(d));
	list_ok("7,5", f, NELEM(f));		/* order kept */
	list_ok("10,4095", g, NELEM(g));
	list_ok("2-2,2", h, NELEM(h));
	list_ok("0-3", b, NELEM(b));

	list_bad("", DPG_GPUVIS_MAX, "empty");
	list_bad(NULL, DPG_GPUVIS_MAX, "empty");
	list_bad("a", DPG_GPUVIS_MAX, "invalid device list 'a'");
	list_bad("1,", DPG_GPUVIS_MAX, "invalid device list");
	list_bad(",1", DPG_GPUVIS_MAX, "invalid device list");
	list_bad("1,,2", DPG_GPUVIS_MAX, "invalid device list");
	list_bad("3-1", DPG_GPUVIS_MAX, "invalid device list");
	list_bad("1--2", DPG_GPUVIS_MAX, "invalid device list");
	list_bad("1-", DPG_GPUVIS_MAX, "invalid device list");
	list_bad("-1", DPG_GPUVIS_MAX, "invalid device list");
	list_bad("1 ,2", DPG_GPUVIS_MAX, "invalid device list");
	list_bad("4096", DPG_GPUVIS_MAX, "invalid device list");
	list_bad("123456789", DPG_GPUVIS_MAX, "invalid device list");
	list_bad("0x1", DPG_GPUVIS_MAX, "invalid device list");
	list_bad("GPU-1234", DPG_GPUVIS_MAX, "invalid device list");
	/* over capacity, by single items and by a range */
	list_bad("0,1,2", 2, "names more than 2 devices");
	list_bad("0-3", 2, "names more than 2 devices");
	list_bad("0-4095", DPG_GPUVIS_MAX, "names more than 64 devices");
	/* exactly at capacity is fine */
	assert_int_equal(dpg_int_list_parse("4-7", v, NELEM(v), &n, NULL), 0);
	assert_int_equal(n, 4);
	assert_int_equal(v[3], 7);
	/* a NULL err is allowed on failure */
	assert_int_equal(dpg_int_list_parse("x", v, NELEM(v), &n, NULL), -1);
	assert_int_equal(n, 0);
}

/* ================================================================ dpg_gpu_ns_from_slurm */

static void ns_ok(const char *step, const char *vis, struct dpg_gpu_ns *ns)
{
	struct dpg_err e = { "" };

	memset(ns, 0x5a, sizeof(*ns));	/* must be fully overwritten */
	if (dpg_gpu_ns_from_slurm(step, vis, ns, &e) != 0)
		fail_msg("step %s, visible %s: %s", step ? step : "unset",
			 vis ? vis : "unset", e.msg);
}

static void ns_bad(const char *step, const char *vis, const char *needle)
{
	struct dpg_gpu_ns ns;
	struct dpg_err e = { "" };

	if (dpg_gpu_ns_from_slurm(step, vis, &ns, &e) == 0)
		fail_msg("step %s, visible %s accepted", step ? step : "unset",
			 vis ? vis : "unset");
	if (strstr(e.msg, needle) == NULL)
		fail_msg("error \"%s\" lacks \"%s\"", e.msg, needle);
}

static void expect_identity(const struct dpg_gpu_ns *ns)
{
	assert_int_equal(ns->n, 0);
	for (int p = 0; p < 8; p++)
		assert_int_equal(dpg_gpu_ns_index(ns, p), p);
}

static void test_ns_identity(void **state)
{
	struct dpg_gpu_ns ns;

	(void)state;
	/* no Slurm variables at all */
	ns_ok(NULL, NULL, &ns);
	expect_identity(&ns);
	/* SLURM_STEP_GPUS alone: nothing restricts the runtime */
	ns_ok("4,5,6,7", NULL, &ns);
	expect_identity(&ns);
	/* a visible list without an allocation record: physical */
	ns_ok(NULL, "0,1", &ns);
	expect_identity(&ns);
	ns_ok("", "2,3", &ns);
	expect_identity(&ns);
	/* global indices (no device cgroup): identity */
	ns_ok("4,5,6,7", "4,5,6,7", &ns);
	expect_identity(&ns);
	ns_ok("4-7", "4,5,6,7", &ns);
	expect_identity(&ns);
	/* a task's subset by global index */
	ns_ok("4,5,6,7", "6", &ns);
	expect_identity(&ns);
	ns_ok("4,5,6,7", "7,4", &ns);
	expect_identity(&ns);
	/* the whole node: both readings agree */
	ns_ok("0,1,2,3", "0,1,2,3", &ns);
	expect_identity(&ns);
}

static void test_ns_renumbered(void **state)
{
	struct dpg_gpu_ns ns;

	(void)state;
	ns_ok("4,5,6,7", "0,1,2,3", &ns);
	assert_int_equal(ns.n, 4);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(ns.phys[i], 4 + i);
		assert_int_equal(dpg_gpu_ns_index(&ns, 4 + i), i);
	}
	assert_int_equal(dpg_gpu_ns_index(&ns, 0), -1);
	assert_int_equal(dpg_gpu_ns_index(&ns, 3), -1);
	assert_int_equal(dpg_gpu_ns_index(&ns, 8), -1);

	/* a task's subset by local index: still the step's whole namespace */
	ns_ok("4,5,6,7", "2", &ns);
	assert_int_equal(ns.n, 4);
	assert_int_equal(ns.phys[0], 4);
	assert_int_equal(ns.phys[2], 6);
	assert_int_equal(dpg_gpu_ns_index(&ns, 6), 2);

	/* Slurm's list unsorted: local indices follow PCI (physical) order */
	ns_ok("7,5", "0,1", &ns);
	assert_int_equal(ns.n, 2);
	assert_int_equal(ns.phys[0], 5);
	assert_int_equal(ns.phys[1], 7);
	assert_int_equal(dpg_gpu_ns_index(&ns, 5), 0);
	assert_int_equal(dpg_gpu_ns_index(&ns, 7), 1);
	assert_int_equal(dpg_gpu_ns_index(&ns, 6), -1);
	/* ... whereas by global index it is identity */
	ns_ok("7,5", "7,5", &ns);
	expect_identity(&ns);

	/* ranges and gaps */
	ns_ok("1,3-4", "0,2", &ns);
	assert_int_equal(ns.n, 3);
	assert_int_equal(ns.phys[0], 1);
	assert_int_equal(ns.phys[1], 3);
	assert_int_equal(ns.phys[2], 4);
	ns_ok("0,2", "0,1", &ns);		/* 1 is no step GPU: renumbered */
	assert_int_equal(ns.n, 2);
	assert_int_equal(dpg_gpu_ns_index(&ns, 2), 1);
}

static void test_ns_refused(void **state)
{
	struct dpg_gpu_ns uns;

	(void)state;
	/* UUID forms: 1 = "leave Slurm's value alone", not an error */
	assert_int_equal(dpg_gpu_ns_from_slurm("0,1", "GPU-5c2b4f7e-9a1d-4e6f-8b3a-0c1d2e3f4a5b",
					       &uns, NULL), 1);
	assert_int_equal(dpg_gpu_ns_from_slurm(NULL, "GPU-5c2b4f7e-9a1d-4e6f-8b3a-0c1d2e3f4a5b",
					       &uns, NULL), 1);
	assert_int_equal(dpg_gpu_ns_from_slurm("0", "MIG-GPU-5c2b4f7e-9a1d-4e6f-8b3a-0c1d2e3f4a5b/1/0",
					       &uns, NULL), 1);
	ns_bad("4,5", "9", "matches neither");
	ns_bad("4,5", "9", "SLURM_STEP_GPUS=4,5");
	ns_bad("4,5", "4,9", "matches neither");
	ns_bad("4,5", "0,4", "matches neither");	/* half global, half local */
	ns_bad("4,5", "", "empty");
	ns_bad("4,5", "x", "invalid device list");
	ns_bad("x", "0", "SLURM_STEP_GPUS");
	/* err may be NULL */
	{
		struct dpg_gpu_ns ns;

		assert_int_equal(dpg_gpu_ns_from_slurm("4,5", "9", &ns, NULL), -1);
	}
}

/* ================================================================ dpg_gpu_visible */

static void vis_ok(const struct dpg_gpu_ns *ns, enum dpg_gpu_visibility mode,
		   const int *own, size_t g, const int *order, size_t norder,
		   const char *want)
{
	char buf[256];
	struct dpg_err e = { "" };

	memset(buf, 'x', sizeof(buf));
	if (dpg_gpu_visible(ns, mode, own, g, order, norder, buf, sizeof(buf), &e) != 0)
		fail_msg("visible: %s", e.msg);
	assert_string_equal(buf, want);
}

static void test_visible(void **state)
{
	struct dpg_gpu_ns id, ren;
	static const int order4[] = { 4, 5, 6, 7 };
	static const int order_perm[] = { 6, 7, 4, 5 };	/* tasks own out of PCI order */
	static const int own1[] = { 6 }, own2[] = { 6, 7 };
	char buf[8];
	struct dpg_err e = { "" };

	(void)state;
	ns_ok(NULL, NULL, &id);
	ns_ok("4,5,6,7", "0,1,2,3", &ren);

	/* G = 1 */
	vis_ok(&id, DPG_VIS_ISOLATE, own1, 1, order4, 4, "6");
	vis_ok(&id, DPG_VIS_ORDERED, own1, 1, order4, 4, "4,5,6,7");
	vis_ok(&ren, DPG_VIS_ISOLATE, own1, 1, order4, 4, "2");
	vis_ok(&ren, DPG_VIS_ORDERED, own1, 1, order4, 4, "0,1,2,3");
	/* ordered keeps the tasks' order, not PCI order */
	vis_ok(&id, DPG_VIS_ORDERED, own1, 1, order_perm, 4, "6,7,4,5");
	vis_ok(&ren, DPG_VIS_ORDERED, own1, 1, order_perm, 4, "2,3,0,1");

	/* G = 2: task 1 of 2 owns 6,7 */
	vis_ok(&id, DPG_VIS_ISOLATE, own2, 2, order4, 4, "6,7");
	vis_ok(&ren, DPG_VIS_ISOLATE, own2, 2, order4, 4, "2,3");
	vis_ok(&id, DPG_VIS_ORDERED, own2, 2, order4, 4, "4,5,6,7");
	vis_ok(&ren, DPG_VIS_ORDERED, own2, 2, order4, 4, "0,1,2,3");
	/* own GPUs at LOCAL_RANK * G + k in ordered mode */
	{
		struct dpg_gpu_ns ns;

		ns_ok("4,5,6,7", "0,1,2,3", &ns);
		vis_ok(&ns, DPG_VIS_ORDERED, own2, 2, order_perm, 4, "2,3,0,1");
	}

	/* a GPU the task cannot see */
	{
		static const int bad[] = { 3 };

		if (dpg_gpu_visible(&ren, DPG_VIS_ISOLATE, bad, 1, order4, 4, buf,
				    sizeof(buf), &e) == 0)
			fail_msg("GPU 3 outside the step accepted");
		assert_non_null(strstr(e.msg, "GPU 3 is not among"));
		/* ordered: the list is checked, too */
		e.msg[0] = '\0';
		if (dpg_gpu_visible(&ren, DPG_VIS_ORDERED, own1, 1, bad, 1, buf,
				    sizeof(buf), &e) == 0)
			fail_msg("ordered GPU 3 outside the step accepted");
		assert_non_null(strstr(e.msg, "GPU 3 is not among"));
	}

	/* G = 0: empty string */
	vis_ok(&id, DPG_VIS_ISOLATE, NULL, 0, NULL, 0, "");
	/* too small a buffer: an error, never an overflow */
	if (dpg_gpu_visible(&id, DPG_VIS_ORDERED, own1, 1, order4, 4, buf, 4, &e) == 0)
		fail_msg("\"4,5,6,7\" fit in 4 bytes");
	assert_non_null(strstr(e.msg, "longer than 3 bytes"));
	assert_int_equal(dpg_gpu_visible(&id, DPG_VIS_ORDERED, own1, 1, order4, 4, buf, 8,
					 &e), 0);
	assert_string_equal(buf, "4,5,6,7");
	assert_int_equal(dpg_gpu_visible(&id, DPG_VIS_ORDERED, own1, 1, order4, 4, buf, 0,
					 &e), -1);
}

static void test_visibility_parse(void **state)
{
	enum dpg_gpu_visibility v = DPG_VIS_ORDERED;
	struct dpg_err e = { "" };

	(void)state;
	assert_int_equal(dpg_gpu_visibility_parse("isolate", &v, &e), 0);
	assert_int_equal(v, DPG_VIS_ISOLATE);
	assert_int_equal(dpg_gpu_visibility_parse("ordered", &v, &e), 0);
	assert_int_equal(v, DPG_VIS_ORDERED);
	assert_int_equal(dpg_gpu_visibility_parse("Ordered", &v, &e), -1);
	assert_non_null(strstr(e.msg, "'Ordered'"));
	assert_int_equal(dpg_gpu_visibility_parse("", &v, &e), -1);
	assert_int_equal(dpg_gpu_visibility_parse(NULL, &v, &e), -1);
	assert_int_equal(v, DPG_VIS_ORDERED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_list_parse),
		cmocka_unit_test(test_ns_identity),
		cmocka_unit_test(test_ns_renumbered),
		cmocka_unit_test(test_ns_refused),
		cmocka_unit_test(test_visible),
		cmocka_unit_test(test_visibility_parse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
