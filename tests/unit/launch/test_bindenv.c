/* SPDX-License-Identifier: BSD-3-Clause */
/* test_bindenv.c - unit tests for lib/launch/bindenv.c: a plan row and the
 * task's environment -> the binding variables exported to the task
 * (dpg_bind_env), and dpg_bind_parse from lib/launch/opts.c. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bindenv.h"
#include "contract.h"
#include "gpuvis.h"
#include "opts.h"
#include "plan.h"
#include "topo.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

#define SYN "synthetic-2s-4gpu-2sw.xml"
#define AMD "amd-1s-nps2-4gpu-slingshot.xml"
#define NOGPU "nogpu-ethernet.xml"

/* ================================================================ helpers */

/* The source tree: DPG_SRCDIR from the build (absolute), else where this
 * file is, from __FILE__ (relative to the build directory). */
static void fixture_path(const char *name, char *buf, size_t len)
{
	static const char self[] = "tests/unit/launch/test_bindenv.c";
	const char *f = __FILE__;
	size_t n = strlen(f), s = sizeof(self) - 1;

#ifdef DPG_SRCDIR
	if (DPG_SRCDIR[0] == '/') {
		snprintf(buf, len, "%s/tests/fixtures/topo/%s", DPG_SRCDIR, name);
		return;
	}
#endif
	if (n > s && strcmp(f + n - s, self) == 0)
		snprintf(buf, len, "%.*stests/fixtures/topo/%s", (int)(n - s), f, name);
	else
		snprintf(buf, len, "./tests/fixtures/topo/%s", name);
}

/* What a test allocates is freed by cleanup(), which cmocka runs even after a
 * failed assertion: no leak reports from failing tests. */
static void *scratch_mem[16];
static struct dpg_plan *scratch_plan[4];
static size_t nscratch_mem, nscratch_plan;

static void *scratch(size_t size)
{
	void *p;

	assert_true(nscratch_mem < NELEM(scratch_mem));
	p = calloc(1, size);
	assert_non_null(p);
	scratch_mem[nscratch_mem++] = p;
	return p;
}

static int cleanup(void **state)
{
	(void)state;
	while (nscratch_mem > 0)
		free(scratch_mem[--nscratch_mem]);
	while (nscratch_plan > 0)
		dpg_plan_free(scratch_plan[--nscratch_plan]);
	return 0;
}

static struct dpg_topo *load_fixture(const char *name)
{
	struct dpg_topo *t = NULL;
	struct dpg_err e = { "" };
	char p[4096];

	fixture_path(name, p, sizeof(p));
	if (dpg_topo_load_xml(p, &t, &e) != 0)
		fail_msg("loading %s: %s", p, e.msg);
	assert_non_null(t);
	return t;
}

static struct dpg_plan *make_plan(const char *fixture, uint32_t ntasks,
				  uint32_t G, const char *gpus, enum dpg_bind bind)
{
	struct dpg_topo *t = load_fixture(fixture);
	struct dpg_plan_req r;
	struct dpg_plan *p = NULL;
	struct dpg_err e = { "" };
	int rc;

	memset(&r, 0, sizeof(r));
	r.ntasks = ntasks;
	r.gpus_per_task = G;
	r.gpus = gpus;
	r.policy.bind = bind;
	assert_true(nscratch_plan < NELEM(scratch_plan));
	rc = dpg_plan_make(t, &r, &p, &e);
	dpg_topo_free(t);
	if (rc != 0)
		fail_msg("%s: %u x %u: %s", fixture, ntasks, G, e.msg);
	assert_non_null(p);
	scratch_plan[nscratch_plan++] = p;
	return p;
}

/* A task environment: NULL-terminated name/value pairs. */
struct kv {
	const char *name, *value;
};

static const char *kv_get(void *ctx, const char *name)
{
	for (const struct kv *k = ctx; k != NULL && k->name != NULL; k++)
		if (strcmp(k->name, name) == 0)
			return k->value;
	return NULL;
}

static const struct kv no_env[] = { { NULL, NULL } };

/* Runs dpg_bind_env into a fresh table; fails the test on error. */
static void bind_ok_step(const struct dpg_plan *p, uint32_t lr, enum dpg_gpu_visibility vis,
			 const char *step_gpus, const struct kv *env, struct dpg_env *out)
{
	struct dpg_bind_req req = { .visibility = vis, .step_gpus = step_gpus };
	struct dpg_err e = { "" };

	memset(out, 0, sizeof(*out));
	if (dpg_bind_env(p, lr, &req, kv_get, (void *)env, out, &e) != 0)
		fail_msg("dpg_bind_env(task %u, step GPUs %s): %s", lr, step_gpus, e.msg);
}

static void bind_ok(const struct dpg_plan *p, uint32_t lr, enum dpg_gpu_visibility vis,
		    const char *ifname, const struct kv *env, struct dpg_env *out)
{
	struct dpg_bind_req req = { .visibility = vis, .socket_ifname = ifname };
	struct dpg_err e = { "" };

	memset(out, 0, sizeof(*out));
	if (dpg_bind_env(p, lr, &req, kv_get, (void *)env, out, &e) != 0)
		fail_msg("dpg_bind_env(task %u): %s", lr, e.msg);
}

/* Runs dpg_bind_env expecting failure with needle in the message. */
static void bind_fails(const struct dpg_plan *p, uint32_t lr, enum dpg_gpu_visibility vis,
		       const struct kv *env, const char *needle)
{
	struct dpg_bind_req req = { .visibility = vis, .socket_ifname = NULL };
	struct dpg_err e = { "" };
	struct dpg_env *out = scratch(sizeof(*out));

	assert_non_null(out);
	if (dpg_bind_env(p, lr, &req, kv_get, (void *)env, out, &e) == 0)
		fail_msg("dpg_bind_env(task %u) should fail with \"%s\"", lr, needle);
	if (strstr(e.msg, needle) == NULL)
		fail_msg("error \"%s\" lacks \"%s\"", e.msg, needle);
}

static void expect_var(const struct dpg_env *env, const char *name, const char *want)
{
	const char *v = dpg_env_get(env, name);

	if (v == NULL)
		fail_msg("%s not exported (want \"%s\")", name, want);
	if (strcmp(v, want) != 0)
		fail_msg("%s=\"%s\", want \"%s\"", name, v, want);
}

static void expect_unset(const struct dpg_env *env, const char *name)
{
	const char *v = dpg_env_get(env, name);

	if (v != NULL)
		fail_msg("%s=\"%s\" exported, want it absent", name, v);
}

/* Every name at most once. */
static void expect_unique(const struct dpg_env *env)
{
	for (size_t i = 0; i < env->n; i++)
		for (size_t j = i + 1; j < env->n; j++)
			if (strcmp(env->v[i].name, env->v[j].name) == 0)
				fail_msg("%s exported twice", env->v[i].name);
}

/* ================================================================ dpg_bind_env */

static void test_bind_syn_ordered(void **state)
{
	struct dpg_plan *p = make_plan(SYN, 4, 1, NULL, DPG_BIND_CLOSEST);
	struct dpg_env *env = scratch(sizeof(*env));
	static const char *const ucx[] = { "mlx5_0:1", "mlx5_0:1", "mlx5_1:1", "mlx5_2:1" };
	static const char *const cpus[] = { "0-1,8-9", "2-3,10-11", "4-5,12-13", "6-7,14-15" };
	static const char *const bus[] = {
		"0000:03:00.0", "0000:04:00.0", "0000:83:00.0", "0000:84:00.0",
	};
	char first_cvd[DPG_ENV_VALUE_MAX] = "", first_hca[DPG_ENV_VALUE_MAX] = "";

	(void)state;
	assert_non_null(env);
	for (uint32_t lr = 0; lr < 4; lr++) {
		const char *cvd, *hca;
		int list[DPG_GPUVIS_MAX];
		size_t n = 0;
		char num[16];

		bind_ok(p, lr, DPG_VIS_ORDERED, NULL, no_env, env);
		expect_unique(env);
		cvd = dpg_env_get(env, "CUDA_VISIBLE_DEVICES");
		hca = dpg_env_get(env, "NCCL_IB_HCA");
		assert_non_null(cvd);
		assert_non_null(hca);
		/* the same list for every task, own GPU at LOCAL_RANK */
		if (lr == 0) {
			snprintf(first_cvd, sizeof(first_cvd), "%s", cvd);
			snprintf(first_hca, sizeof(first_hca), "%s", hca);
		}
		assert_string_equal(cvd, first_cvd);
		assert_int_equal(dpg_int_list_parse(cvd, list, NELEM(list), &n, NULL), 0);
		assert_int_equal(n, 4);
		assert_int_equal(list[lr], p->tasks[lr].gpu[0]);
		assert_string_equal(cvd, "0,1,2,3");
		/* the node's HCAs, exact names, identical in every task */
		assert_string_equal(hca, first_hca);
		assert_int_equal(hca[0], '=');
		assert_string_equal(hca, "=mlx5_0,mlx5_1,mlx5_2");
		expect_var(env, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
		expect_var(env, "DPG_GPU_VISIBILITY", "ordered");
		snprintf(num, sizeof(num), "%u", (unsigned)lr);
		expect_var(env, "JAX_LOCAL_DEVICE_IDS", num);
		expect_var(env, "DPG_GPUS", bus[lr]);
		expect_var(env, "DPG_NICS", p->tasks[lr].nics);
		expect_var(env, "UCX_NET_DEVICES", ucx[lr]);
		expect_var(env, "DPG_CPUS", cpus[lr]);
		snprintf(num, sizeof(num), "%d", lr < 2 ? 0 : 1);
		expect_var(env, "DPG_NUMA", num);
		snprintf(num, sizeof(num), "%u", dpg_cpuset_count(&p->tasks[lr].cpuset));
		expect_var(env, "OMP_NUM_THREADS", num);
		expect_var(env, "OMP_NUM_THREADS", "4");
		expect_unset(env, "ROCR_VISIBLE_DEVICES");
		expect_unset(env, "NCCL_SOCKET_IFNAME");
		expect_unset(env, "GLOO_SOCKET_IFNAME");
	}
}

static void test_bind_syn_isolate(void **state)
{
	struct dpg_plan *p = make_plan(SYN, 4, 1, NULL, DPG_BIND_CLOSEST);
	struct dpg_env *env = scratch(sizeof(*env));
	struct dpg_bind_req req = { .visibility = DPG_VIS_ISOLATE, .socket_ifname = NULL };
	struct dpg_err e = { "" };

	(void)state;
	assert_non_null(env);
	for (uint32_t lr = 0; lr < 4; lr++) {
		char want[16];

		bind_ok(p, lr, DPG_VIS_ISOLATE, NULL, no_env, env);
		snprintf(want, sizeof(want), "%u", (unsigned)p->tasks[lr].gpu[0]);
		expect_var(env, "CUDA_VISIBLE_DEVICES", want);
		expect_var(env, "DPG_GPU_VISIBILITY", "isolate");
		expect_var(env, "NCCL_IB_HCA", "=mlx5_0,mlx5_1,mlx5_2");
	}
	/* a NULL getenv (dpg-plan): physical indices, nothing user-set */
	memset(env, 0, sizeof(*env));
	assert_int_equal(dpg_bind_env(p, 3, &req, NULL, NULL, env, &e), 0);
	expect_var(env, "CUDA_VISIBLE_DEVICES", "3");
	expect_var(env, "OMP_NUM_THREADS", "4");
}

/* Slurm's variables naming the whole node by global index change nothing. */
static void test_bind_slurm_identity(void **state)
{
	struct dpg_plan *p = make_plan(SYN, 4, 1, NULL, DPG_BIND_CLOSEST);
	struct dpg_env *a = scratch(sizeof(*a)), *b = scratch(sizeof(*b));
	static const struct kv slurm[] = {
		{ "SLURM_STEP_GPUS", "0,1,2,3" },
		{ "CUDA_VISIBLE_DEVICES", "0,1,2,3" },
		{ NULL, NULL },
	};

	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	for (int m = 0; m < 2; m++) {
		enum dpg_gpu_visibility vis = m ? DPG_VIS_ORDERED : DPG_VIS_ISOLATE;

		for (uint32_t lr = 0; lr < 4; lr++) {
			bind_ok(p, lr, vis, NULL, no_env, a);
			bind_ok(p, lr, vis, NULL, slurm, b);
			assert_int_equal(a->n, b->n);
			for (size_t i = 0; i < a->n; i++) {
				assert_string_equal(a->v[i].name, b->v[i].name);
				assert_string_equal(a->v[i].value, b->v[i].value);
			}
		}
	}
}

/* A step given GPUs 2,3 of the node: global and renumbered Slurm lists. */
static void test_bind_slurm_subset(void **state)
{
	struct dpg_plan *p = make_plan(SYN, 2, 1, "2,3", DPG_BIND_CLOSEST);
	struct dpg_env *env = scratch(sizeof(*env));
	static const struct kv global[] = {
		{ "SLURM_STEP_GPUS", "2,3" },
		{ "CUDA_VISIBLE_DEVICES", "2,3" },
		{ NULL, NULL },
	};
	static const struct kv renum[] = {
		{ "SLURM_STEP_GPUS", "2,3" },
		{ "CUDA_VISIBLE_DEVICES", "0,1" },
		{ NULL, NULL },
	};
	static const struct kv renum_task1[] = {	/* per-task binding by Slurm */
		{ "SLURM_STEP_GPUS", "2,3" },
		{ "CUDA_VISIBLE_DEVICES", "1" },
		{ NULL, NULL },
	};
	static const struct kv bad[] = {
		{ "SLURM_STEP_GPUS", "2,3" },
		{ "CUDA_VISIBLE_DEVICES", "5" },
		{ NULL, NULL },
	};
	static const struct kv outside[] = {	/* Slurm gave GPUs 0,1: not dpg's */
		{ "SLURM_STEP_GPUS", "0,1" },
		{ "CUDA_VISIBLE_DEVICES", "0,1" },
		{ NULL, NULL },
	};
	static const struct kv outside_renum[] = {
		{ "SLURM_STEP_GPUS", "0,4" },
		{ "CUDA_VISIBLE_DEVICES", "0,1" },
		{ NULL, NULL },
	};

	(void)state;
	assert_non_null(env);
	assert_int_equal(p->tasks[0].gpu[0], 2);
	assert_int_equal(p->tasks[1].gpu[0], 3);

	bind_ok(p, 1, DPG_VIS_ISOLATE, NULL, global, env);
	expect_var(env, "CUDA_VISIBLE_DEVICES", "3");
	bind_ok(p, 1, DPG_VIS_ORDERED, NULL, global, env);
	expect_var(env, "CUDA_VISIBLE_DEVICES", "2,3");

	bind_ok(p, 0, DPG_VIS_ISOLATE, NULL, renum, env);
	expect_var(env, "CUDA_VISIBLE_DEVICES", "0");
	bind_ok(p, 1, DPG_VIS_ISOLATE, NULL, renum, env);
	expect_var(env, "CUDA_VISIBLE_DEVICES", "1");
	bind_ok(p, 0, DPG_VIS_ORDERED, NULL, renum, env);
	expect_var(env, "CUDA_VISIBLE_DEVICES", "0,1");
	bind_ok(p, 1, DPG_VIS_ORDERED, NULL, renum, env);
	expect_var(env, "CUDA_VISIBLE_DEVICES", "0,1");
	bind_ok(p, 1, DPG_VIS_ISOLATE, NULL, renum_task1, env);
	expect_var(env, "CUDA_VISIBLE_DEVICES", "1");

	bind_fails(p, 0, DPG_VIS_ISOLATE, bad, "matches neither");
	bind_fails(p, 0, DPG_VIS_ISOLATE, bad, "CUDA_VISIBLE_DEVICES: ");
	bind_fails(p, 0, DPG_VIS_ISOLATE, outside_renum, "GPU 2 is not among");
	/* global, but GPU 2 is no step GPU: identity cannot tell, physical 2 */
	bind_ok(p, 0, DPG_VIS_ISOLATE, NULL, outside, env);
	expect_var(env, "CUDA_VISIBLE_DEVICES", "2");
}

/* 2 tasks x 2 GPUs: own pair at LOCAL_RANK * 2 in ordered mode. */
static void test_bind_g2(void **state)
{
	struct dpg_plan *p = make_plan(SYN, 2, 2, NULL, DPG_BIND_CLOSEST);
	struct dpg_env *env = scratch(sizeof(*env));
	static const struct kv renum[] = {
		{ "SLURM_STEP_GPUS", "0-3" },
		{ "CUDA_VISIBLE_DEVICES", "0,1,2,3" },
		{ NULL, NULL },
	};

	(void)state;
	assert_non_null(env);
	for (uint32_t lr = 0; lr < 2; lr++) {
		int list[DPG_GPUVIS_MAX];
		size_t n = 0;
		char want[16];

		bind_ok(p, lr, DPG_VIS_ORDERED, NULL, renum, env);
		assert_int_equal(dpg_int_list_parse(dpg_env_get(env, "CUDA_VISIBLE_DEVICES"),
						    list, NELEM(list), &n, NULL), 0);
		assert_int_equal(n, 4);
		assert_int_equal(list[lr * 2], p->tasks[lr].gpu[0]);
		assert_int_equal(list[lr * 2 + 1], p->tasks[lr].gpu[1]);
		snprintf(want, sizeof(want), "%u,%u", lr * 2, lr * 2 + 1);
		expect_var(env, "JAX_LOCAL_DEVICE_IDS", want);
		bind_ok(p, lr, DPG_VIS_ISOLATE, NULL, renum, env);
		expect_var(env, "JAX_LOCAL_DEVICE_IDS", "0,1");
		snprintf(want, sizeof(want), "%u,%u", (unsigned)p->tasks[lr].gpu[0],
			 (unsigned)p->tasks[lr].gpu[1]);
		expect_var(env, "CUDA_VISIBLE_DEVICES", want);
		expect_var(env, "DPG_GPUS", p->tasks[lr].gpus);
	}
}

/* What the user set for NICs, sockets and OpenMP is kept. */
static void test_bind_user_set(void **state)
{
	struct dpg_plan *p = make_plan(SYN, 4, 1, NULL, DPG_BIND_CLOSEST);
	struct dpg_env *env = scratch(sizeof(*env));
	static const struct kv user[] = {
		{ "NCCL_IB_HCA", "mlx5_2" },
		{ "OMP_NUM_THREADS", "1" },
		{ "UCX_NET_DEVICES", "mlx5_1:1" },
		{ "NCCL_SOCKET_IFNAME", "ib0" },
		{ "GLOO_SOCKET_IFNAME", "ib0" },
		{ NULL, NULL },
	};
	static const struct kv empty[] = {	/* set but empty: not the user's choice */
		{ "NCCL_IB_HCA", "" },
		{ "OMP_NUM_THREADS", "" },
		{ NULL, NULL },
	};

	(void)state;
	assert_non_null(env);
	bind_ok(p, 2, DPG_VIS_ORDERED, "eth0", user, env);
	expect_unique(env);
	expect_unset(env, "NCCL_IB_HCA");
	expect_unset(env, "OMP_NUM_THREADS");
	expect_unset(env, "UCX_NET_DEVICES");
	expect_unset(env, "NCCL_SOCKET_IFNAME");
	expect_unset(env, "GLOO_SOCKET_IFNAME");
	expect_var(env, "DPG_NICS", "mlx5_1");
	expect_var(env, "DPG_CPUS", "4-5,12-13");

	bind_ok(p, 2, DPG_VIS_ORDERED, NULL, empty, env);
	expect_var(env, "NCCL_IB_HCA", "=mlx5_0,mlx5_1,mlx5_2");
	expect_var(env, "OMP_NUM_THREADS", "4");
}

static void test_bind_socket_ifname(void **state)
{
	struct dpg_plan *p = make_plan(SYN, 4, 1, NULL, DPG_BIND_CLOSEST);
	struct dpg_env *env = scratch(sizeof(*env));

	(void)state;
	assert_non_null(env);
	for (uint32_t lr = 0; lr < 4; lr++) {
		bind_ok(p, lr, DPG_VIS_ISOLATE, "eth0", no_env, env);
		expect_unique(env);
		expect_var(env, "NCCL_SOCKET_IFNAME", "=eth0");
		expect_var(env, "GLOO_SOCKET_IFNAME", "eth0");
	}
	/* an empty name is none */
	bind_ok(p, 0, DPG_VIS_ISOLATE, "", no_env, env);
	expect_unset(env, "NCCL_SOCKET_IFNAME");
	expect_unset(env, "GLOO_SOCKET_IFNAME");
}

static void test_bind_amd(void **state)
{
	struct dpg_plan *p = make_plan(AMD, 4, 1, NULL, DPG_BIND_CLOSEST);
	struct dpg_env *env = scratch(sizeof(*env));
	static const struct kv renum[] = {
		{ "SLURM_STEP_GPUS", "0,1,2,3" },
		{ "ROCR_VISIBLE_DEVICES", "0,1,2,3" },
		{ NULL, NULL },
	};
	static const struct kv uuid_cuda[] = {	/* Slurm's CUDA list is not read for AMD */
		{ "CUDA_VISIBLE_DEVICES", "GPU-5c2b4f7e-9a1d-4e6f-8b3a-0c1d2e3f4a5b" },
		{ NULL, NULL },
	};
	static const struct kv bad[] = {
		{ "SLURM_STEP_GPUS", "0,1" },
		{ "ROCR_VISIBLE_DEVICES", "7" },
		{ NULL, NULL },
	};

	(void)state;
	assert_non_null(env);
	for (uint32_t lr = 0; lr < 4; lr++) {
		char want[16];

		bind_ok(p, lr, DPG_VIS_ISOLATE, NULL, renum, env);
		expect_unique(env);
		snprintf(want, sizeof(want), "%u", (unsigned)p->tasks[lr].gpu[0]);
		expect_var(env, "ROCR_VISIBLE_DEVICES", want);
		expect_unset(env, "CUDA_VISIBLE_DEVICES");
		expect_unset(env, "CUDA_DEVICE_ORDER");
		expect_var(env, "DPG_GPU_VISIBILITY", "isolate");
		/* Slingshot: no verbs device for UCX or NCCL's IB transport */
		expect_unset(env, "UCX_NET_DEVICES");
		expect_unset(env, "NCCL_IB_HCA");
		expect_var(env, "DPG_NICS", lr < 2 ? "hsi0" : "hsi1");
		expect_var(env, "OMP_NUM_THREADS", "2");

		bind_ok(p, lr, DPG_VIS_ORDERED, NULL, uuid_cuda, env);
		expect_var(env, "ROCR_VISIBLE_DEVICES", "0,1,2,3");
		expect_unset(env, "CUDA_VISIBLE_DEVICES");
	}
	bind_fails(p, 0, DPG_VIS_ISOLATE, bad, "ROCR_VISIBLE_DEVICES");
}

/* CPU-only tasks: no *_VISIBLE_DEVICES, whatever Slurm set. */
static void test_bind_g0(void **state)
{
	struct dpg_plan *p = make_plan(SYN, 2, 0, NULL, DPG_BIND_CLOSEST);
	struct dpg_plan *q = make_plan(NOGPU, 2, 0, NULL, DPG_BIND_CLOSEST);
	struct dpg_env *env = scratch(sizeof(*env));
	static const struct kv slurm[] = {
		{ "SLURM_STEP_GPUS", "4,5" },
		{ "CUDA_VISIBLE_DEVICES", "GPU-5c2b4f7e-9a1d-4e6f-8b3a-0c1d2e3f4a5b" },
		{ NULL, NULL },
	};

	(void)state;
	assert_non_null(env);
	for (uint32_t lr = 0; lr < 2; lr++) {
		bind_ok(p, lr, DPG_VIS_ORDERED, "eth0", slurm, env);
		expect_unique(env);
		expect_unset(env, "CUDA_VISIBLE_DEVICES");
		expect_unset(env, "ROCR_VISIBLE_DEVICES");
		expect_unset(env, "CUDA_DEVICE_ORDER");
		expect_unset(env, "DPG_GPU_VISIBILITY");
		expect_var(env, "DPG_CPUS", p->tasks[lr].cpus);
		expect_var(env, "NCCL_SOCKET_IFNAME", "=eth0");
		assert_non_null(dpg_env_get(env, "OMP_NUM_THREADS"));

		/* Ethernet only: no RDMA variables */
		bind_ok(q, lr, DPG_VIS_ISOLATE, NULL, no_env, env);
		expect_unset(env, "CUDA_VISIBLE_DEVICES");
		expect_unset(env, "UCX_NET_DEVICES");
		expect_unset(env, "NCCL_IB_HCA");
		expect_var(env, "DPG_NICS", lr == 0 ? "eth0" : "eth2");
		expect_var(env, "DPG_CPUS", lr == 0 ? "0-1,4-5" : "2-3,6-7");
		expect_var(env, "DPG_NUMA", lr == 0 ? "0" : "1");
	}
}

static void test_bind_none(void **state)
{
	struct dpg_plan *p = make_plan(SYN, 4, 1, NULL, DPG_BIND_NONE);
	struct dpg_env *env = scratch(sizeof(*env));

	(void)state;
	assert_non_null(env);
	for (uint32_t lr = 0; lr < 4; lr++) {
		bind_ok(p, lr, DPG_VIS_ISOLATE, NULL, no_env, env);
		expect_unset(env, "OMP_NUM_THREADS");
		expect_var(env, "DPG_CPUS", p->tasks[lr].cpus);
		assert_non_null(dpg_env_get(env, "CUDA_VISIBLE_DEVICES"));
	}
}

static void test_bind_errors(void **state)
{
	struct dpg_plan *p = make_plan(SYN, 4, 1, NULL, DPG_BIND_CLOSEST);
	struct dpg_bind_req req = { .visibility = DPG_VIS_ISOLATE, .socket_ifname = NULL };
	struct dpg_env *env = scratch(sizeof(*env));
	struct dpg_err e = { "" };

	(void)state;
	assert_non_null(env);
	assert_int_equal(dpg_bind_env(p, 4, &req, kv_get, (void *)no_env, env, &e), -1);
	assert_non_null(strstr(e.msg, "local task 4 is not in the node's plan (4 tasks)"));
	assert_int_equal(env->n, 0);
	assert_int_equal(dpg_bind_env(p, UINT32_MAX, &req, NULL, NULL, env, &e), -1);
	assert_int_equal(dpg_bind_env(NULL, 0, &req, NULL, NULL, env, &e), -1);
	assert_non_null(strstr(e.msg, "(0 tasks)"));
}

/* gpuvis.h: UUID/MIG forms are refused "(the caller then leaves Slurm's value
 * alone)", and the message says "dpg leaves it as Slurm set it".  So binding
 * must still succeed without CUDA_VISIBLE_DEVICES; failing here makes the
 * plugin export no rank variables at all (task_init fails). */
static void test_bind_uuid_left_alone(void **state)
{
	struct dpg_plan *p = make_plan(SYN, 4, 1, NULL, DPG_BIND_CLOSEST);
	struct dpg_bind_req req = { .visibility = DPG_VIS_ISOLATE, .socket_ifname = NULL };
	struct dpg_env *env = scratch(sizeof(*env));
	struct dpg_err e = { "" };
	static const struct kv uuid[] = {
		{ "SLURM_STEP_GPUS", "0,1,2,3" },
		{ "CUDA_VISIBLE_DEVICES", "GPU-5c2b4f7e-9a1d-4e6f-8b3a-0c1d2e3f4a5b" },
		{ NULL, NULL },
	};

	(void)state;
	assert_non_null(env);
	if (dpg_bind_env(p, 1, &req, kv_get, (void *)uuid, env, &e) != 0)
		fail_msg("UUID CUDA_VISIBLE_DEVICES should be left alone, but "
			 "dpg_bind_env failed: \"%s\"", e.msg);
	expect_unset(env, "CUDA_VISIBLE_DEVICES");
	expect_var(env, "DPG_CPUS", "2-3,10-11");
	expect_var(env, "NCCL_IB_HCA", "=mlx5_0,mlx5_1,mlx5_2");
}

/* Slurm's per-task GPU binding (--gpu-bind=per_task:N, which --gpus-per-task
 * implies in recent Slurm; also --ntasks-per-gpu) rewrites the task's env in
 * gres_common.c:common_gres_set_env() with is_task: SLURM_STEP_GPUS lists only
 * the task's own GPUs by global index, and with ConstrainDevices=yes
 * CUDA_VISIBLE_DEVICES gives their index among the *step's* GPUs.  Step GPUs
 * 2,3 bound one per task: task 0 gets (SLURM_STEP_GPUS=2, CVD=0), task 1
 * (SLURM_STEP_GPUS=3, CVD=1); the runtime sees both GPUs, 2 as 0 and 3 as 1. */
static void test_bind_slurm_per_task_binding(void **state)
{
	struct dpg_plan *p = make_plan(SYN, 2, 1, "2,3", DPG_BIND_CLOSEST);
	struct dpg_env *env = scratch(sizeof(*env));
	static const struct kv global0[] = {	/* no device cgroup */
		{ "SLURM_STEP_GPUS", "2" }, { "CUDA_VISIBLE_DEVICES", "2" }, { NULL, NULL },
	};
	static const struct kv global1[] = {
		{ "SLURM_STEP_GPUS", "3" }, { "CUDA_VISIBLE_DEVICES", "3" }, { NULL, NULL },
	};
	static const struct kv cgroup0[] = {	/* ConstrainDevices=yes */
		{ "SLURM_STEP_GPUS", "2" }, { "CUDA_VISIBLE_DEVICES", "0" }, { NULL, NULL },
	};
	static const struct kv cgroup1[] = {
		{ "SLURM_STEP_GPUS", "3" }, { "CUDA_VISIBLE_DEVICES", "1" }, { NULL, NULL },
	};

	(void)state;
	assert_non_null(env);
	bind_ok(p, 0, DPG_VIS_ISOLATE, NULL, global0, env);
	expect_var(env, "CUDA_VISIBLE_DEVICES", "2");
	bind_ok(p, 1, DPG_VIS_ISOLATE, NULL, global1, env);
	expect_var(env, "CUDA_VISIBLE_DEVICES", "3");
	bind_ok(p, 0, DPG_VIS_ISOLATE, NULL, cgroup0, env);
	expect_var(env, "CUDA_VISIBLE_DEVICES", "0");
	/* A task bound by Slurm sees only its own GPU in SLURM_STEP_GPUS, so
	 * the plugin passes the step-level list it read in user_init. */
	bind_ok_step(p, 1, DPG_VIS_ISOLATE, "2,3", cgroup1, env);
	expect_var(env, "CUDA_VISIBLE_DEVICES", "1");
	bind_ok_step(p, 0, DPG_VIS_ORDERED, "2,3", cgroup0, env);
	expect_var(env, "CUDA_VISIBLE_DEVICES", "0,1");
	bind_ok_step(p, 1, DPG_VIS_ORDERED, "2,3", cgroup1, env);
	expect_var(env, "CUDA_VISIBLE_DEVICES", "0,1");
	bind_ok_step(p, 1, DPG_VIS_ORDERED, "2,3", global1, env);
	expect_var(env, "CUDA_VISIBLE_DEVICES", "2,3");
}

static void test_bind_parse(void **state)
{
	enum dpg_bind b = DPG_BIND_NONE;
	struct dpg_err e = { "" };

	(void)state;
	assert_int_equal(dpg_bind_parse("closest", &b, &e), 0);
	assert_int_equal(b, DPG_BIND_CLOSEST);
	assert_int_equal(dpg_bind_parse("none", &b, &e), 0);
	assert_int_equal(b, DPG_BIND_NONE);
	assert_int_equal(dpg_bind_parse("Closest", &b, &e), -1);
	assert_non_null(strstr(e.msg, "invalid binding 'Closest'"));
	assert_int_equal(dpg_bind_parse("", &b, &e), -1);
	assert_int_equal(dpg_bind_parse("closest ", &b, &e), -1);
	assert_int_equal(dpg_bind_parse(NULL, &b, &e), -1);
	assert_int_equal(dpg_bind_parse("x", &b, NULL), -1);
	assert_int_equal(b, DPG_BIND_NONE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_bind_syn_ordered, cleanup),
		cmocka_unit_test_teardown(test_bind_syn_isolate, cleanup),
		cmocka_unit_test_teardown(test_bind_slurm_identity, cleanup),
		cmocka_unit_test_teardown(test_bind_slurm_subset, cleanup),
		cmocka_unit_test_teardown(test_bind_g2, cleanup),
		cmocka_unit_test_teardown(test_bind_user_set, cleanup),
		cmocka_unit_test_teardown(test_bind_socket_ifname, cleanup),
		cmocka_unit_test_teardown(test_bind_amd, cleanup),
		cmocka_unit_test_teardown(test_bind_g0, cleanup),
		cmocka_unit_test_teardown(test_bind_none, cleanup),
		cmocka_unit_test_teardown(test_bind_errors, cleanup),
		cmocka_unit_test_teardown(test_bind_uuid_left_alone, cleanup),
		cmocka_unit_test_teardown(test_bind_slurm_per_task_binding, cleanup),
		cmocka_unit_test_teardown(test_bind_parse, cleanup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
