/* SPDX-License-Identifier: BSD-3-Clause */
/* test_join.c - unit tests for lib/runtime/join.c: every source of the rank
 * contract (options, DPG_*, torchrun, SLURM_*, Open MPI, PMI), their
 * precedence, nested launchers and every inconsistency it must refuse. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "contract.h"
#include "join.h"
#include "opts.h"
#include "port.h"

#define SECRET "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

#define assert_contains(haystack, needle)                                   \
	do {                                                                \
		const char *h_ = (haystack), *n_ = (needle);                \
		if (strstr(h_, n_) == NULL)                                 \
			fail_msg("expected '%s' in '%s'", n_, h_);          \
	} while (0)

/* ------------------------------------------------ a table as environment */

#define VARS_MAX 64

struct vars {
	size_t n;
	char *name[VARS_MAX];
	char *value[VARS_MAX];
};

static const char *vars_get(void *ctx, const char *name)
{
	struct vars *v = ctx;

	for (size_t i = 0; i < v->n; i++)
		if (strcmp(v->name[i], name) == 0)
			return v->value[i];
	return NULL;
}

static void vars_unset(struct vars *v, const char *name)
{
	for (size_t i = 0; i < v->n; i++)
		if (strcmp(v->name[i], name) == 0) {
			free(v->name[i]);
			free(v->value[i]);
			v->n--;
			v->name[i] = v->name[v->n];
			v->value[i] = v->value[v->n];
			return;
		}
}

static void vars_set(struct vars *v, const char *name, const char *value)
{
	vars_unset(v, name);
	assert_true(v->n < VARS_MAX);
	v->name[v->n] = strdup(name);
	v->value[v->n] = strdup(value);
	assert_non_null(v->name[v->n]);
	assert_non_null(v->value[v->n]);
	v->n++;
}

static void vars_setu(struct vars *v, const char *name, unsigned long x)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%lu", x);
	vars_set(v, name, buf);
}

static void vars_clear(struct vars *v)
{
	for (size_t i = 0; i < v->n; i++) {
		free(v->name[i]);
		free(v->value[i]);
	}
	v->n = 0;
}

struct fx {
	struct vars env;
	struct dpg_join j;
	struct dpg_err err;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	vars_clear(&f->env);
	free(f);
	return 0;
}

static int resolve(struct fx *f, const dpg_init_opts_t *o)
{
	memset(&f->err, 0, sizeof(f->err));
	return dpg_join_resolve(o, vars_get, &f->env, &f->j, &f->err);
}

/* A resolve that must fail with code, its message naming every needle. */
static void expect_fail(struct fx *f, const dpg_init_opts_t *o, int code,
			const char *needle1, const char *needle2)
{
	int rc = resolve(f, o);

	if (rc != -code)
		fail_msg("expected -%d, got %d (%s)", code, rc, f->err.msg);
	if (needle1 != NULL)
		assert_contains(f->err.msg, needle1);
	if (needle2 != NULL)
		assert_contains(f->err.msg, needle2);
	assert_null(strchr(f->err.msg, '\n'));
}

static void expect_ok(struct fx *f, const dpg_init_opts_t *o)
{
	int rc = resolve(f, o);

	if (rc != 0)
		fail_msg("resolve failed (%d): %s", rc, f->err.msg);
}

/* srun's variables for one task of a step (no plugin). */
static void slurm_task(struct vars *v, unsigned rank, unsigned local,
		       unsigned node, unsigned ntasks, unsigned nnodes,
		       const char *tpn, const char *nodelist)
{
	vars_setu(v, "SLURM_JOB_ID", 4242);
	vars_setu(v, "SLURM_STEP_ID", 3);
	vars_setu(v, "SLURM_PROCID", rank);
	vars_setu(v, "SLURM_LOCALID", local);
	vars_setu(v, "SLURM_NODEID", node);
	vars_setu(v, "SLURM_STEP_NUM_TASKS", ntasks);
	vars_setu(v, "SLURM_STEP_NUM_NODES", nnodes);
	vars_set(v, "SLURM_STEP_TASKS_PER_NODE", tpn);
	vars_set(v, "SLURM_STEP_NODELIST", nodelist);
}

static void torch_task(struct vars *v, unsigned rank, unsigned ws)
{
	vars_setu(v, "RANK", rank);
	vars_setu(v, "WORLD_SIZE", ws);
	vars_set(v, "MASTER_ADDR", "10.0.0.1");
	vars_set(v, "MASTER_PORT", "29500");
}

/* ------------------------------------------------ single process */

static void test_no_environment_is_single(void **state)
{
	struct fx *f = *state;

	expect_ok(f, NULL);
	assert_int_equal(f->j.rank, 0);
	assert_int_equal(f->j.world_size, 1);
	assert_int_equal(f->j.local_rank, 0);
	assert_int_equal(f->j.local_world_size, 1);
	assert_int_equal(f->j.node_rank, 0);
	assert_int_equal(f->j.num_nodes, 1);
	assert_int_equal(f->j.src, DPG_JOIN_SINGLE);
	assert_string_equal(f->j.master_addr, "");
	assert_int_equal(f->j.master_port, 0);
	assert_string_equal(f->j.secret, "");
	assert_true(f->j.timeout_s == DPG_JOIN_DEFAULT_TIMEOUT_S);
	assert_int_equal(f->j.backend, DPG_BACKEND_AUTO);
	assert_int_equal(f->j.device, -1);
	assert_int_equal(f->j.gpu_hint, -1);
	assert_string_equal(f->j.ns, "x");
	assert_false(f->j.have_ids);
}

static void test_default_opts_are_env(void **state)
{
	struct fx *f = *state;
	dpg_init_opts_t o;

	dpg_init_opts_default(&o);
	expect_ok(f, &o);
	assert_int_equal(f->j.world_size, 1);
	/* a zero-initialised struct means "from the environment" too */
	memset(&o, 0, sizeof(o));
	expect_ok(f, &o);
	assert_int_equal(f->j.world_size, 1);
	assert_int_equal(f->j.src, DPG_JOIN_SINGLE);
	assert_int_equal(f->j.device, 0);	/* device 0 is a real device */
}

static void test_world_of_one_needs_no_secret(void **state)
{
	struct fx *f = *state;

	vars_set(&f->env, "RANK", "0");
	vars_set(&f->env, "WORLD_SIZE", "1");
	expect_ok(f, NULL);
	assert_int_equal(f->j.world_size, 1);
	assert_int_equal(f->j.src, DPG_JOIN_TORCHRUN);
	/* a malformed secret does not matter without peers */
	vars_set(&f->env, "DPG_SECRET", "xyz");
	expect_ok(f, NULL);
}

/* ------------------------------------------------ each source */

static void test_dpg_source(void **state)
{
	struct fx *f = *state;

	vars_set(&f->env, "DPG_CONTRACT", "1");
	vars_set(&f->env, "DPG_RANK", "5");
	vars_set(&f->env, "DPG_WORLD_SIZE", "8");
	vars_set(&f->env, "DPG_LOCAL_RANK", "1");
	vars_set(&f->env, "DPG_LOCAL_WORLD_SIZE", "4");
	vars_set(&f->env, "DPG_NODE_RANK", "1");
	vars_set(&f->env, "DPG_NUM_NODES", "2");
	vars_set(&f->env, "DPG_MASTER_ADDR", "gpu01");
	vars_set(&f->env, "DPG_MASTER_PORT", "21234");
	vars_set(&f->env, "DPG_JOB_ID", "777");
	vars_set(&f->env, "DPG_STEP_ID", "2");
	vars_set(&f->env, "DPG_SECRET", SECRET);
	expect_ok(f, NULL);
	assert_int_equal(f->j.src, DPG_JOIN_DPG);
	assert_int_equal(f->j.rank, 5);
	assert_int_equal(f->j.world_size, 8);
	assert_int_equal(f->j.local_rank, 1);
	assert_int_equal(f->j.local_world_size, 4);
	assert_int_equal(f->j.node_rank, 1);
	assert_int_equal(f->j.num_nodes, 2);
	assert_string_equal(f->j.master_addr, "gpu01");
	assert_int_equal(f->j.master_port, 21234);
	assert_true(f->j.have_ids);
	assert_int_equal(f->j.job_id, 777);
	assert_int_equal(f->j.step_id, 2);
	assert_string_equal(f->j.ns, "777.2");
	assert_string_equal(f->j.secret, SECRET);
}

static void test_torchrun_source(void **state)
{
	struct fx *f = *state;

	torch_task(&f->env, 2, 4);
	vars_set(&f->env, "LOCAL_RANK", "0");
	vars_set(&f->env, "LOCAL_WORLD_SIZE", "1");
	vars_set(&f->env, "GROUP_RANK", "2");
	vars_set(&f->env, "GROUP_WORLD_SIZE", "4");
	vars_set(&f->env, "DPG_SECRET", SECRET);
	expect_ok(f, NULL);
	assert_int_equal(f->j.src, DPG_JOIN_TORCHRUN);
	assert_int_equal(f->j.rank, 2);
	assert_int_equal(f->j.world_size, 4);
	assert_int_equal(f->j.local_rank, 0);
	assert_int_equal(f->j.local_world_size, 1);
	assert_int_equal(f->j.node_rank, 2);	/* GROUP_RANK */
	assert_int_equal(f->j.num_nodes, 4);
	assert_string_equal(f->j.master_addr, "10.0.0.1");
	assert_int_equal(f->j.master_port, 29500);
	assert_string_equal(f->j.ns, "x");
	/* NODE_RANK beats GROUP_RANK */
	vars_set(&f->env, "NODE_RANK", "3");
	vars_set(&f->env, "GROUP_RANK", "3");
	expect_ok(f, NULL);
	assert_int_equal(f->j.node_rank, 3);
}

static void test_torchrun_partial_is_unknown(void **state)
{
	struct fx *f = *state;

	torch_task(&f->env, 1, 2);
	vars_set(&f->env, "DPG_SECRET", SECRET);
	expect_ok(f, NULL);
	assert_int_equal(f->j.local_rank, -1);	/* derived at runtime */
	assert_int_equal(f->j.local_world_size, -1);
	assert_int_equal(f->j.node_rank, -1);
	assert_int_equal(f->j.num_nodes, -1);
}

static void test_slurm_source(void **state)
{
	struct fx *f = *state;
	struct dpg_port_range r = { DPG_PORT_DEFAULT_LO, DPG_PORT_DEFAULT_HI };

	slurm_task(&f->env, 3, 1, 1, 6, 3, "2(x3)", "n[07-09]");
	vars_set(&f->env, "SLURM_NTASKS", "99");	/* the job's: ignored */
	vars_set(&f->env, "SLURMD_NODENAME", "n08");
	vars_set(&f->env, "DPG_SECRET", SECRET);
	expect_ok(f, NULL);
	assert_int_equal(f->j.src, DPG_JOIN_SLURM);
	assert_int_equal(f->j.rank, 3);
	assert_int_equal(f->j.world_size, 6);
	assert_int_equal(f->j.local_rank, 1);
	assert_int_equal(f->j.local_world_size, 2);
	assert_int_equal(f->j.node_rank, 1);
	assert_int_equal(f->j.num_nodes, 3);
	assert_string_equal(f->j.master_addr, "n07");
	assert_int_equal(f->j.master_port, dpg_port_for_step(4242, 3, r));
	assert_string_equal(f->j.ns, "4242.3");
	assert_string_equal(f->j.node, "n08");
}

static void test_slurm_uneven_nodes(void **state)
{
	struct fx *f = *state;

	/* -n5 over 2 nodes: 3 and 2 */
	slurm_task(&f->env, 4, 1, 1, 5, 2, "3,2", "a1,b7");
	vars_set(&f->env, "DPG_SECRET", SECRET);
	expect_ok(f, NULL);
	assert_int_equal(f->j.local_world_size, 2);
	assert_string_equal(f->j.master_addr, "a1");
}

static void test_slurm_ntasks_fallback(void **state)
{
	struct fx *f = *state;

	/* an old srun without SLURM_STEP_NUM_TASKS: the job's count inside a step */
	slurm_task(&f->env, 1, 1, 0, 2, 1, "2", "n1");
	vars_unset(&f->env, "SLURM_STEP_NUM_TASKS");
	vars_set(&f->env, "SLURM_NTASKS", "2");
	vars_set(&f->env, "DPG_SECRET", SECRET);
	expect_ok(f, NULL);
	assert_int_equal(f->j.world_size, 2);
	/* never SLURM_NTASKS when the step's own count exists */
	vars_set(&f->env, "SLURM_STEP_NUM_TASKS", "2");
	vars_set(&f->env, "SLURM_NTASKS", "16");
	expect_ok(f, NULL);
	assert_int_equal(f->j.world_size, 2);
}

static void test_slurm_outside_a_step_is_single(void **state)
{
	struct fx *f = *state;

	/* the batch script: SLURM_PROCID=0 and the job's task count */
	vars_set(&f->env, "SLURM_JOB_ID", "99");
	vars_set(&f->env, "SLURM_PROCID", "0");
	vars_set(&f->env, "SLURM_NTASKS", "8");
	vars_set(&f->env, "SLURM_NODELIST", "n[1-2]");
	expect_ok(f, NULL);
	assert_int_equal(f->j.world_size, 1);
	assert_int_equal(f->j.src, DPG_JOIN_SINGLE);
	/* the batch, extern and interactive steps say so by their ids */
	slurm_task(&f->env, 0, 0, 0, 4, 1, "4", "n1");
	vars_set(&f->env, "SLURM_STEP_ID", "4294967291");	/* batch */
	expect_ok(f, NULL);
	assert_int_equal(f->j.world_size, 1);
	vars_set(&f->env, "SLURM_STEP_ID", "4294967292");	/* extern */
	expect_ok(f, NULL);
	assert_int_equal(f->j.world_size, 1);
	vars_set(&f->env, "SLURM_STEP_ID", "4294967290");	/* interactive */
	expect_ok(f, NULL);
	assert_int_equal(f->j.world_size, 1);
}

static void test_ompi_source(void **state)
{
	struct fx *f = *state;

	vars_set(&f->env, "OMPI_COMM_WORLD_RANK", "3");
	vars_set(&f->env, "OMPI_COMM_WORLD_SIZE", "4");
	vars_set(&f->env, "OMPI_COMM_WORLD_LOCAL_RANK", "1");
	vars_set(&f->env, "OMPI_COMM_WORLD_LOCAL_SIZE", "2");
	vars_set(&f->env, "DPG_SECRET", SECRET);
	/* no address to derive */
	expect_fail(f, NULL, DPG_ERR_ENV, "MASTER_ADDR", "OMPI_COMM_WORLD_SIZE=4");
	vars_set(&f->env, "MASTER_ADDR", "head");
	expect_fail(f, NULL, DPG_ERR_ENV, "MASTER_PORT", "MASTER_ADDR=head");
	vars_set(&f->env, "MASTER_PORT", "23456");
	expect_ok(f, NULL);
	assert_int_equal(f->j.src, DPG_JOIN_OMPI);
	assert_int_equal(f->j.rank, 3);
	assert_int_equal(f->j.world_size, 4);
	assert_int_equal(f->j.local_rank, 1);
	assert_int_equal(f->j.local_world_size, 2);
	assert_int_equal(f->j.node_rank, -1);
	assert_string_equal(f->j.master_addr, "head");
	assert_int_equal(f->j.master_port, 23456);
}

static void test_pmi_source(void **state)
{
	struct fx *f = *state;

	vars_set(&f->env, "PMI_RANK", "6");
	vars_set(&f->env, "PMI_SIZE", "7");
	vars_set(&f->env, "MPI_LOCALRANKID", "0");
	vars_set(&f->env, "MPI_LOCALNRANKS", "1");
	vars_set(&f->env, "MASTER_ADDR", "head");
	vars_set(&f->env, "MASTER_PORT", "23456");
	vars_set(&f->env, "DPG_SECRET", SECRET);
	expect_ok(f, NULL);
	assert_int_equal(f->j.src, DPG_JOIN_PMI);
	assert_int_equal(f->j.rank, 6);
	assert_int_equal(f->j.world_size, 7);
	assert_int_equal(f->j.local_world_size, 1);
	/* Open MPI's names come first */
	vars_set(&f->env, "OMPI_COMM_WORLD_RANK", "6");
	vars_set(&f->env, "OMPI_COMM_WORLD_SIZE", "7");
	expect_ok(f, NULL);
	assert_int_equal(f->j.src, DPG_JOIN_OMPI);
	/* and both must agree */
	vars_set(&f->env, "OMPI_COMM_WORLD_RANK", "5");
	expect_fail(f, NULL, DPG_ERR_ENV, "OMPI_COMM_WORLD_RANK=5", "PMI_RANK=6");
}

static void test_srun_with_pmi_agrees(void **state)
{
	struct fx *f = *state;

	/* srun --mpi=pmi2 sets PMI_RANK/PMI_SIZE equal to Slurm's */
	slurm_task(&f->env, 1, 1, 0, 2, 1, "2", "n1");
	vars_set(&f->env, "PMI_RANK", "1");
	vars_set(&f->env, "PMI_SIZE", "2");
	vars_set(&f->env, "DPG_SECRET", SECRET);
	expect_ok(f, NULL);
	assert_int_equal(f->j.src, DPG_JOIN_SLURM);
	assert_int_equal(f->j.rank, 1);
}

/* ------------------------------------------------ precedence */

static void test_plugin_contract_round_trip(void **state)
{
	struct fx *f = *state;
	struct dpg_conf conf;
	struct dpg_request req;
	struct dpg_step step;
	struct dpg_task task;
	struct dpg_env out;
	struct dpg_err err;

	/* what the plugin exports is what libdpg reads back */
	dpg_conf_init(&conf);
	dpg_request_init(&req);
	slurm_task(&f->env, 4, 0, 2, 5, 3, "2(x2),1", "gpu[1-3]");
	assert_int_equal(dpg_step_from_env(vars_get, &f->env, &conf, &req, &step,
					   &err), 0);
	assert_int_equal(dpg_task_from_env(vars_get, &f->env, &step, &task, &err), 0);
	assert_int_equal(dpg_contract_build(&step, &task, &req, vars_get, &f->env,
					    &out, &err), 0);
	for (size_t i = 0; i < out.n; i++)
		vars_set(&f->env, out.v[i].name, out.v[i].value);
	vars_set(&f->env, "DPG_SECRET", SECRET);
	expect_ok(f, NULL);
	assert_int_equal(f->j.src, DPG_JOIN_DPG);
	assert_int_equal(f->j.rank, 4);
	assert_int_equal(f->j.world_size, 5);
	assert_int_equal(f->j.local_rank, 0);
	assert_int_equal(f->j.local_world_size, 1);
	assert_int_equal(f->j.node_rank, 2);
	assert_int_equal(f->j.num_nodes, 3);
	assert_string_equal(f->j.master_addr, step.master_addr);
	assert_int_equal(f->j.master_port, step.master_port);
	assert_int_equal(f->j.job_id, 4242);
	assert_int_equal(f->j.step_id, 3);
}

static void test_dpg_beats_torch_beats_slurm_for_address(void **state)
{
	struct fx *f = *state;

	slurm_task(&f->env, 1, 1, 0, 2, 1, "2", "n1");
	vars_set(&f->env, "DPG_SECRET", SECRET);
	vars_set(&f->env, "MASTER_ADDR", "torchaddr");
	vars_set(&f->env, "MASTER_PORT", "20001");
	expect_ok(f, NULL);
	assert_string_equal(f->j.master_addr, "torchaddr");
	assert_int_equal(f->j.master_port, 20001);
	vars_set(&f->env, "DPG_MASTER_ADDR", "dpgaddr");
	vars_set(&f->env, "DPG_MASTER_PORT", "20002");
	expect_ok(f, NULL);
	assert_string_equal(f->j.master_addr, "dpgaddr");
	assert_int_equal(f->j.master_port, 20002);
}

static void test_opts_beat_everything(void **state)
{
	struct fx *f = *state;
	dpg_init_opts_t o;

	slurm_task(&f->env, 1, 1, 0, 2, 1, "2", "n1");
	vars_set(&f->env, "DPG_RANK", "1");
	vars_set(&f->env, "DPG_WORLD_SIZE", "2");
	vars_set(&f->env, "DPG_SECRET", SECRET);
	vars_set(&f->env, "DPG_TIMEOUT", "10");
	vars_set(&f->env, "DPG_BACKEND", "nccl");
	dpg_init_opts_default(&o);
	o.rank = 2;
	o.world_size = 3;
	o.local_rank = 0;
	o.local_world_size = 3;
	o.master_addr = "10.9.9.9";
	o.master_port = 30000;
	o.secret = "ffeeddccbbaa99887766554433221100";
	o.timeout_s = 1.5;
	o.backend = DPG_BACKEND_CPU;
	o.device = 3;
	expect_ok(f, &o);
	assert_int_equal(f->j.src, DPG_JOIN_OPTS);
	assert_int_equal(f->j.rank, 2);
	assert_int_equal(f->j.world_size, 3);
	assert_int_equal(f->j.local_rank, 0);
	assert_int_equal(f->j.local_world_size, 3);
	assert_string_equal(f->j.master_addr, "10.9.9.9");
	assert_int_equal(f->j.master_port, 30000);
	assert_string_equal(f->j.secret, "ffeeddccbbaa99887766554433221100");
	assert_true(f->j.timeout_s == 1.5);
	assert_int_equal(f->j.backend, DPG_BACKEND_CPU);
	assert_int_equal(f->j.device, 3);
	/* a world of one from options needs nothing else */
	vars_clear(&f->env);
	dpg_init_opts_default(&o);
	o.rank = 0;
	o.world_size = 1;
	expect_ok(f, &o);
	assert_int_equal(f->j.world_size, 1);
	assert_int_equal(f->j.src, DPG_JOIN_OPTS);
}

static void test_invalid_opts(void **state)
{
	struct fx *f = *state;
	dpg_init_opts_t o;

	dpg_init_opts_default(&o);
	o.world_size = 4;
	expect_fail(f, &o, DPG_ERR_INVALID, "world_size=4", "without rank");
	dpg_init_opts_default(&o);
	o.rank = 2;
	expect_fail(f, &o, DPG_ERR_INVALID, "rank=2", "without world_size");
	dpg_init_opts_default(&o);
	o.rank = 4;
	o.world_size = 4;
	o.master_addr = "h";
	o.master_port = 20000;
	o.secret = SECRET;
	expect_fail(f, &o, DPG_ERR_ENV, "opts.rank=4", "opts.world_size=4");
	dpg_init_opts_default(&o);
	o.master_port = 70000;
	expect_fail(f, &o, DPG_ERR_INVALID, "master_port=70000", NULL);
	dpg_init_opts_default(&o);
	o.backend = (dpg_backend_t)7;
	expect_fail(f, &o, DPG_ERR_INVALID, "backend=7", NULL);
	dpg_init_opts_default(&o);
	o.rank = -5;
	expect_fail(f, &o, DPG_ERR_INVALID, "rank -5", NULL);
	dpg_init_opts_default(&o);
	o.device = -2;
	expect_fail(f, &o, DPG_ERR_INVALID, "device=-2", NULL);
	dpg_init_opts_default(&o);
	o.local_world_size = 2;
	expect_fail(f, &o, DPG_ERR_INVALID, "local_world_size=2", NULL);
}

/* ------------------------------------------------ nested launchers */

static void test_torchrun_inside_srun(void **state)
{
	struct fx *f = *state;

	/* srun -N2 --ntasks-per-node=1 torchrun --nproc-per-node=4: the
	 * workers inherit the agent's Slurm and dpg variables */
	slurm_task(&f->env, 1, 0, 1, 2, 2, "1(x2)", "n[1-2]");
	vars_set(&f->env, "DPG_RANK", "1");
	vars_set(&f->env, "DPG_WORLD_SIZE", "2");
	torch_task(&f->env, 6, 8);
	vars_set(&f->env, "LOCAL_RANK", "2");
	vars_set(&f->env, "LOCAL_WORLD_SIZE", "4");
	vars_set(&f->env, "DPG_SECRET", SECRET);
	/* without the agent's marker this is an inconsistency ... */
	expect_fail(f, NULL, DPG_ERR_ENV, "DPG_RANK=1", "RANK=6");
	/* ... with it, torchrun describes this process */
	vars_set(&f->env, "TORCHELASTIC_RUN_ID", "none");
	expect_ok(f, NULL);
	assert_int_equal(f->j.src, DPG_JOIN_TORCHRUN);
	assert_int_equal(f->j.rank, 6);
	assert_int_equal(f->j.world_size, 8);
	assert_int_equal(f->j.local_rank, 2);
	assert_int_equal(f->j.local_world_size, 4);
	assert_string_equal(f->j.master_addr, "10.0.0.1");
	assert_string_equal(f->j.ns, "x");
}

static void test_mpirun_inside_allocation(void **state)
{
	struct fx *f = *state;

	/* mpirun inside sbatch starts its daemons with srun (one per node):
	 * Slurm's variables describe the daemon step */
	slurm_task(&f->env, 1, 0, 1, 2, 2, "1(x2)", "n[1-2]");
	vars_set(&f->env, "OMPI_COMM_WORLD_RANK", "5");
	vars_set(&f->env, "OMPI_COMM_WORLD_SIZE", "8");
	vars_set(&f->env, "MASTER_ADDR", "n1");
	vars_set(&f->env, "MASTER_PORT", "24000");
	vars_set(&f->env, "DPG_SECRET", SECRET);
	expect_ok(f, NULL);
	assert_int_equal(f->j.src, DPG_JOIN_OMPI);
	assert_int_equal(f->j.rank, 5);
	assert_int_equal(f->j.world_size, 8);
	assert_int_equal(f->j.local_rank, -1);
	assert_string_equal(f->j.ns, "x");
}

/* ------------------------------------------------ inconsistencies */

static void test_rank_not_below_world(void **state)
{
	struct fx *f = *state;

	torch_task(&f->env, 4, 4);
	vars_set(&f->env, "DPG_SECRET", SECRET);
	expect_fail(f, NULL, DPG_ERR_ENV, "RANK=4", "WORLD_SIZE=4");
	vars_clear(&f->env);
	vars_set(&f->env, "DPG_RANK", "9");
	vars_set(&f->env, "DPG_WORLD_SIZE", "3");
	expect_fail(f, NULL, DPG_ERR_ENV, "DPG_RANK=9", "DPG_WORLD_SIZE=3");
}

static void test_half_pairs(void **state)
{
	struct fx *f = *state;

	vars_set(&f->env, "WORLD_SIZE", "4");
	expect_fail(f, NULL, DPG_ERR_ENV, "WORLD_SIZE=4", "RANK is not");
	vars_clear(&f->env);
	vars_set(&f->env, "RANK", "1");
	expect_fail(f, NULL, DPG_ERR_ENV, "RANK=1", "WORLD_SIZE is not");
	vars_clear(&f->env);
	vars_set(&f->env, "DPG_RANK", "1");
	expect_fail(f, NULL, DPG_ERR_ENV, "DPG_RANK=1", "DPG_WORLD_SIZE");
	vars_clear(&f->env);
	vars_set(&f->env, "OMPI_COMM_WORLD_SIZE", "2");
	expect_fail(f, NULL, DPG_ERR_ENV, "OMPI_COMM_WORLD_SIZE=2",
		    "OMPI_COMM_WORLD_RANK");
	vars_clear(&f->env);
	vars_set(&f->env, "PMI_RANK", "0");
	expect_fail(f, NULL, DPG_ERR_ENV, "PMI_RANK=0", "PMI_SIZE");
}

static void test_rank_disagrees_with_slurm(void **state)
{
	struct fx *f = *state;

	/* RANK=0 inherited from the submitting shell by every task */
	slurm_task(&f->env, 2, 0, 1, 4, 2, "2(x2)", "n[1-2]");
	torch_task(&f->env, 0, 4);
	vars_set(&f->env, "DPG_SECRET", SECRET);
	expect_fail(f, NULL, DPG_ERR_ENV, "RANK=0", "SLURM_PROCID=2");
}

static void test_world_disagrees_with_slurm(void **state)
{
	struct fx *f = *state;

	slurm_task(&f->env, 2, 0, 1, 8, 2, "4(x2)", "n[1-2]");
	torch_task(&f->env, 2, 4);
	vars_set(&f->env, "DPG_SECRET", SECRET);
	expect_fail(f, NULL, DPG_ERR_ENV, "WORLD_SIZE=4", "SLURM_STEP_NUM_TASKS=8");
}

static void test_dpg_disagrees_with_torch(void **state)
{
	struct fx *f = *state;

	vars_set(&f->env, "DPG_RANK", "1");
	vars_set(&f->env, "DPG_WORLD_SIZE", "4");
	vars_set(&f->env, "DPG_LOCAL_RANK", "1");
	torch_task(&f->env, 1, 4);
	vars_set(&f->env, "LOCAL_RANK", "0");
	vars_set(&f->env, "DPG_SECRET", SECRET);
	expect_fail(f, NULL, DPG_ERR_ENV, "DPG_LOCAL_RANK=1", "LOCAL_RANK=0");
}

static void test_local_rank_not_below_local_size(void **state)
{
	struct fx *f = *state;

	torch_task(&f->env, 1, 4);
	vars_set(&f->env, "LOCAL_RANK", "2");
	vars_set(&f->env, "LOCAL_WORLD_SIZE", "2");
	vars_set(&f->env, "DPG_SECRET", SECRET);
	expect_fail(f, NULL, DPG_ERR_ENV, "LOCAL_RANK=2", "LOCAL_WORLD_SIZE=2");
	/* SLURM_LOCALID against the node's count of tasks */
	vars_clear(&f->env);
	slurm_task(&f->env, 3, 3, 1, 6, 2, "3(x2)", "n[1-2]");
	vars_set(&f->env, "DPG_SECRET", SECRET);
	expect_fail(f, NULL, DPG_ERR_ENV, "SLURM_LOCALID=3",
		    "SLURM_STEP_TASKS_PER_NODE=3");
	/* more local ranks than ranks */
	vars_clear(&f->env);
	torch_task(&f->env, 1, 2);
	vars_set(&f->env, "LOCAL_RANK", "1");
	vars_set(&f->env, "LOCAL_WORLD_SIZE", "3");
	vars_set(&f->env, "DPG_SECRET", SECRET);
	expect_fail(f, NULL, DPG_ERR_ENV, "LOCAL_WORLD_SIZE=3", "WORLD_SIZE=2");
	/* LOCAL_RANK alone must still be a rank of the world */
	vars_set(&f->env, "LOCAL_RANK", "2");
	vars_unset(&f->env, "LOCAL_WORLD_SIZE");
	expect_fail(f, NULL, DPG_ERR_ENV, "LOCAL_RANK=2", "WORLD_SIZE=2");
}

static void test_node_rank_not_below_nodes(void **state)
{
	struct fx *f = *state;

	vars_set(&f->env, "DPG_RANK", "1");
	vars_set(&f->env, "DPG_WORLD_SIZE", "4");
	vars_set(&f->env, "DPG_NODE_RANK", "2");
	vars_set(&f->env, "DPG_NUM_NODES", "2");
	expect_fail(f, NULL, DPG_ERR_ENV, "DPG_NODE_RANK=2", "DPG_NUM_NODES=2");
	vars_set(&f->env, "DPG_NODE_RANK", "0");
	vars_set(&f->env, "DPG_NUM_NODES", "5");
	expect_fail(f, NULL, DPG_ERR_ENV, "DPG_NUM_NODES=5", "DPG_WORLD_SIZE=4");
	/* SLURM_NODEID outside the tasks-per-node list */
	vars_clear(&f->env);
	slurm_task(&f->env, 3, 0, 3, 4, 2, "2(x2)", "n[1-2]");
	vars_unset(&f->env, "SLURM_STEP_NUM_NODES");
	expect_fail(f, NULL, DPG_ERR_ENV, "SLURM_NODEID=3",
		    "SLURM_STEP_TASKS_PER_NODE");
}

static void test_master_addr_missing(void **state)
{
	struct fx *f = *state;

	vars_set(&f->env, "RANK", "1");
	vars_set(&f->env, "WORLD_SIZE", "2");
	vars_set(&f->env, "DPG_SECRET", SECRET);
	expect_fail(f, NULL, DPG_ERR_ENV, "MASTER_ADDR is not set", "WORLD_SIZE=2");
	vars_set(&f->env, "MASTER_ADDR", "h");
	expect_fail(f, NULL, DPG_ERR_ENV, "MASTER_PORT is not set", NULL);
	/* under srun without the plugin both are derived */
	vars_clear(&f->env);
	slurm_task(&f->env, 1, 1, 0, 2, 1, "2", "node17");
	vars_set(&f->env, "DPG_SECRET", SECRET);
	expect_ok(f, NULL);
	assert_string_equal(f->j.master_addr, "node17");
	assert_true(f->j.master_port >= DPG_PORT_DEFAULT_LO &&
		    f->j.master_port <= DPG_PORT_DEFAULT_HI);
}

static void test_non_numeric(void **state)
{
	static const char *const bad[] = { "abc", "-1", "1x", " 1", "+2", "1.0",
					   "99999999999999999999999" };
	static const char *const vars[] = { "RANK", "WORLD_SIZE", "LOCAL_RANK",
					    "LOCAL_WORLD_SIZE", "DPG_RANK",
					    "DPG_WORLD_SIZE", "SLURM_PROCID",
					    "SLURM_STEP_NUM_TASKS",
					    "OMPI_COMM_WORLD_RANK", "PMI_SIZE",
					    "MASTER_PORT", "DPG_MASTER_PORT",
					    "DPG_JOB_ID", "DPG_CONTRACT" };
	struct fx *f = *state;

	for (size_t v = 0; v < sizeof(vars) / sizeof(vars[0]); v++)
		for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++) {
			vars_clear(&f->env);
			vars_set(&f->env, vars[v], bad[b]);
			if (strcmp(vars[v], "SLURM_STEP_NUM_TASKS") == 0)
				vars_set(&f->env, "SLURM_PROCID", "0");
			expect_fail(f, NULL, DPG_ERR_ENV, vars[v], "is not an integer");
		}
	vars_clear(&f->env);
	vars_set(&f->env, "WORLD_SIZE", "0");
	vars_set(&f->env, "RANK", "0");
	expect_fail(f, NULL, DPG_ERR_ENV, "WORLD_SIZE='0'", NULL);
	vars_clear(&f->env);
	vars_set(&f->env, "MASTER_PORT", "65536");
	expect_fail(f, NULL, DPG_ERR_ENV, "MASTER_PORT='65536'", NULL);
	/* an empty value is an unset one */
	vars_clear(&f->env);
	vars_set(&f->env, "RANK", "");
	vars_set(&f->env, "WORLD_SIZE", "");
	expect_ok(f, NULL);
	assert_int_equal(f->j.world_size, 1);
}

static void test_malformed_slurm_lists(void **state)
{
	struct fx *f = *state;

	slurm_task(&f->env, 1, 1, 0, 2, 1, "2(x", "n1");
	vars_set(&f->env, "DPG_SECRET", SECRET);
	expect_fail(f, NULL, DPG_ERR_ENV, "SLURM_STEP_TASKS_PER_NODE", NULL);
	slurm_task(&f->env, 1, 1, 0, 2, 1, "2", "n[1-");
	expect_fail(f, NULL, DPG_ERR_ENV, "SLURM_STEP_NODELIST", NULL);
}

/* ------------------------------------------------ the secret */

static void test_secret_required(void **state)
{
	struct fx *f = *state;

	torch_task(&f->env, 0, 2);
	expect_fail(f, NULL, DPG_ERR_AUTH, "DPG_SECRET", "head -c32 /dev/urandom");
	assert_contains(f->err.msg, "dpg plugin");
	assert_contains(f->err.msg, "WORLD_SIZE=2");
	/* under srun without the plugin too */
	vars_clear(&f->env);
	slurm_task(&f->env, 0, 0, 0, 2, 1, "2", "n1");
	expect_fail(f, NULL, DPG_ERR_AUTH, "DPG_SECRET", "SLURM_STEP_NUM_TASKS=2");
}

static void test_secret_malformed(void **state)
{
	struct fx *f = *state;

	torch_task(&f->env, 0, 2);
	vars_set(&f->env, "DPG_SECRET", "0123");
	expect_fail(f, NULL, DPG_ERR_AUTH, "DPG_SECRET has 4 characters", NULL);
	vars_set(&f->env, "DPG_SECRET", "zz112233445566778899aabbccddeeff");
	expect_fail(f, NULL, DPG_ERR_AUTH, "DPG_SECRET is not hexadecimal", NULL);
	vars_set(&f->env, "DPG_SECRET", "0112233445566778899aabbccddeeff");	/* 31 */
	expect_fail(f, NULL, DPG_ERR_AUTH, "31 characters", NULL);
	vars_set(&f->env, "DPG_SECRET", "00112233445566778899AABBCCDDEEFF");
	expect_ok(f, NULL);
	assert_string_equal(f->j.secret, "00112233445566778899AABBCCDDEEFF");
	{
		dpg_init_opts_t o;

		dpg_init_opts_default(&o);
		o.secret = "nothex";
		expect_fail(f, &o, DPG_ERR_AUTH, "opts.secret", NULL);
	}
}

/* ------------------------------------------------ runtime settings */

static void test_timeout(void **state)
{
	struct fx *f = *state;
	dpg_init_opts_t o;

	vars_set(&f->env, "DPG_TIMEOUT", "2.5");
	expect_ok(f, NULL);
	assert_true(f->j.timeout_s == 2.5);
	dpg_init_opts_default(&o);
	o.timeout_s = 7;
	expect_ok(f, &o);
	assert_true(f->j.timeout_s == 7);
	static const char *const bad[] = { "abc", "0", "-3", "1e99", "nan", "inf",
					   "5s", " 5" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		vars_set(&f->env, "DPG_TIMEOUT", bad[i]);
		expect_fail(f, NULL, DPG_ERR_ENV, "DPG_TIMEOUT", "seconds");
	}
}

static void test_backend(void **state)
{
	struct fx *f = *state;
	dpg_init_opts_t o;

	vars_set(&f->env, "DPG_BACKEND", "cpu");
	expect_ok(f, NULL);
	assert_int_equal(f->j.backend, DPG_BACKEND_CPU);
	vars_set(&f->env, "DPG_BACKEND", "NCCL");
	expect_ok(f, NULL);
	assert_int_equal(f->j.backend, DPG_BACKEND_NCCL);
	vars_set(&f->env, "DPG_BACKEND", "auto");
	expect_ok(f, NULL);
	assert_int_equal(f->j.backend, DPG_BACKEND_AUTO);
	dpg_init_opts_default(&o);
	o.backend = DPG_BACKEND_CPU;
	vars_set(&f->env, "DPG_BACKEND", "nccl");
	expect_ok(f, &o);
	assert_int_equal(f->j.backend, DPG_BACKEND_CPU);
	vars_set(&f->env, "DPG_BACKEND", "gloo");
	expect_fail(f, NULL, DPG_ERR_ENV, "DPG_BACKEND='gloo'", "auto, cpu, nccl");
}

static void test_gpu_hint(void **state)
{
	struct fx *f = *state;

	expect_ok(f, NULL);
	assert_int_equal(f->j.gpu_hint, -1);
	vars_set(&f->env, "CUDA_VISIBLE_DEVICES", "0,1");
	expect_ok(f, NULL);
	assert_int_equal(f->j.gpu_hint, 1);
	static const char *const none[] = { "", "-1", "NoDevFiles" };
	for (size_t i = 0; i < 3; i++) {
		vars_set(&f->env, "CUDA_VISIBLE_DEVICES", none[i]);
		expect_ok(f, NULL);
		assert_int_equal(f->j.gpu_hint, 0);
	}
	/* the plugin's own statement wins */
	vars_set(&f->env, "DPG_GPUS", "0000:3b:00.0,0000:5e:00.0");
	expect_ok(f, NULL);
	assert_int_equal(f->j.gpu_hint, 1);
	assert_string_equal(f->j.gpu_busid, "0000:3b:00.0");
	vars_unset(&f->env, "DPG_GPUS");
	vars_set(&f->env, "CUDA_VISIBLE_DEVICES", "0");
	vars_set(&f->env, "DPG_GPUS_PER_TASK", "0");
	expect_ok(f, NULL);
	assert_int_equal(f->j.gpu_hint, 0);
	vars_set(&f->env, "DPG_GPUS_PER_TASK", "x");
	expect_fail(f, NULL, DPG_ERR_ENV, "DPG_GPUS_PER_TASK", NULL);
}

static void test_src_names_and_process_getenv(void **state)
{
	struct fx *f = *state;

	(void)f;
	for (int s = DPG_JOIN_SINGLE; s <= DPG_JOIN_PMI; s++)
		assert_string_not_equal(dpg_join_src_name((enum dpg_join_src)s), "?");
	assert_string_equal(dpg_join_src_name((enum dpg_join_src)99), "?");
	setenv("DPG_TEST_JOINENV_X", "yes", 1);
	assert_string_equal(dpg_join_process_getenv(NULL, "DPG_TEST_JOINENV_X"), "yes");
	unsetenv("DPG_TEST_JOINENV_X");
	assert_null(dpg_join_process_getenv(NULL, "DPG_TEST_JOINENV_X"));
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_no_environment_is_single),
		T(test_default_opts_are_env),
		T(test_world_of_one_needs_no_secret),
		T(test_dpg_source),
		T(test_torchrun_source),
		T(test_torchrun_partial_is_unknown),
		T(test_slurm_source),
		T(test_slurm_uneven_nodes),
		T(test_slurm_ntasks_fallback),
		T(test_slurm_outside_a_step_is_single),
		T(test_ompi_source),
		T(test_pmi_source),
		T(test_srun_with_pmi_agrees),
		T(test_plugin_contract_round_trip),
		T(test_dpg_beats_torch_beats_slurm_for_address),
		T(test_opts_beat_everything),
		T(test_invalid_opts),
		T(test_torchrun_inside_srun),
		T(test_mpirun_inside_allocation),
		T(test_rank_not_below_world),
		T(test_half_pairs),
		T(test_rank_disagrees_with_slurm),
		T(test_world_disagrees_with_slurm),
		T(test_dpg_disagrees_with_torch),
		T(test_local_rank_not_below_local_size),
		T(test_node_rank_not_below_nodes),
		T(test_master_addr_missing),
		T(test_non_numeric),
		T(test_malformed_slurm_lists),
		T(test_secret_required),
		T(test_secret_malformed),
		T(test_timeout),
		T(test_backend),
		T(test_gpu_hint),
		T(test_src_names_and_process_getenv),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
