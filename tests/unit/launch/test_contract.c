/* SPDX-License-Identifier: BSD-3-Clause */
/* test_contract.c - unit tests for lib/launch/contract.c: from a task's SLURM_*
 * environment (a table-backed getenv) to the exported rank contract. */
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
#include "opts.h"
#include "port.h"

#define assert_contains(haystack, needle)                                   \
	do {                                                                \
		const char *h_ = (haystack), *n_ = (needle);                \
		if (strstr(h_, n_) == NULL)                                 \
			fail_msg("expected '%s' in '%s'", n_, h_);          \
	} while (0)

/* ------------------------------------------------ table-backed getenv */

#define ENV_TABLE_MAX 48

struct env_table {
	size_t n;
	char name[ENV_TABLE_MAX][48];
	char *value[ENV_TABLE_MAX];
	unsigned lookups;	/* to check that the getenv is actually used */
};

static const char *table_getenv(void *ctx, const char *name)
{
	struct env_table *t = ctx;

	t->lookups++;
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->name[i], name) == 0)
			return t->value[i];
	return NULL;
}

static void env_unset(struct env_table *t, const char *name)
{
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->name[i], name) == 0) {
			free(t->value[i]);
			t->n--;
			if (i != t->n) {
				memcpy(t->name[i], t->name[t->n], sizeof(t->name[i]));
				t->value[i] = t->value[t->n];
			}
			return;
		}
}

static void env_set(struct env_table *t, const char *name, const char *value)
{
	env_unset(t, name);
	assert_true(t->n < ENV_TABLE_MAX);
	assert_true(strlen(name) < sizeof(t->name[0]));
	snprintf(t->name[t->n], sizeof(t->name[0]), "%s", name);
	t->value[t->n] = strdup(value);
	assert_non_null(t->value[t->n]);
	t->n++;
}

static void env_setu(struct env_table *t, const char *name, unsigned long v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%lu", v);
	env_set(t, name, buf);
}

static void env_clear(struct env_table *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->value[i]);
	t->n = 0;
	t->lookups = 0;
}

/* A step as srun describes it to each of its tasks. */
static void env_step(struct env_table *t, const char *nodelist, unsigned ntasks,
		     unsigned nnodes, const char *tpn, unsigned job, unsigned step)
{
	env_clear(t);
	env_set(t, "SLURM_STEP_NODELIST", nodelist);
	env_setu(t, "SLURM_STEP_NUM_TASKS", ntasks);
	env_setu(t, "SLURM_STEP_NUM_NODES", nnodes);
	env_set(t, "SLURM_STEP_TASKS_PER_NODE", tpn);
	env_setu(t, "SLURM_JOB_ID", job);
	env_setu(t, "SLURM_STEP_ID", step);
}

static void env_task(struct env_table *t, unsigned rank, unsigned local,
		     unsigned node, const char *nodename)
{
	env_setu(t, "SLURM_PROCID", rank);
	env_setu(t, "SLURM_LOCALID", local);
	env_setu(t, "SLURM_NODEID", node);
	if (nodename != NULL)
		env_set(t, "SLURMD_NODENAME", nodename);
	else
		env_unset(t, "SLURMD_NODENAME");
}

/* Everything a test needs: the environment, conf, request and outputs. */
struct fx {
	struct env_table env;
	struct dpg_conf conf;
	struct dpg_request req;
	struct dpg_step step;
	struct dpg_task task;
	struct dpg_env out;
	struct dpg_err err;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	dpg_conf_init(&f->conf);
	dpg_request_init(&f->req);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	env_clear(&f->env);
	free(f);
	return 0;
}

static int step_rc(struct fx *f)
{
	memset(f->err.msg, 0, sizeof(f->err.msg));
	return dpg_step_from_env(table_getenv, &f->env, &f->conf, &f->req,
				 &f->step, &f->err);
}

static void step_ok(struct fx *f)
{
	if (step_rc(f) != 0)
		fail_msg("dpg_step_from_env failed: %s", f->err.msg);
}

static int task_rc(struct fx *f)
{
	memset(f->err.msg, 0, sizeof(f->err.msg));
	return dpg_task_from_env(table_getenv, &f->env, &f->step, &f->task, &f->err);
}

static void task_ok(struct fx *f)
{
	if (task_rc(f) != 0)
		fail_msg("dpg_task_from_env failed: %s", f->err.msg);
}

static void build_ok(struct fx *f)
{
	memset(f->err.msg, 0, sizeof(f->err.msg));
	if (dpg_contract_build(&f->step, &f->task, &f->req, table_getenv, &f->env,
			       &f->out, &f->err) != 0)
		fail_msg("dpg_contract_build failed: %s", f->err.msg);
}

/* step + task + build for one task of the step already in f->env. */
static void contract_for(struct fx *f, unsigned rank, unsigned local,
			 unsigned node, const char *nodename)
{
	env_task(&f->env, rank, local, node, nodename);
	step_ok(f);
	task_ok(f);
	build_ok(f);
}

static void assert_var(const struct dpg_env *e, const char *name, const char *want)
{
	const char *v = dpg_env_get(e, name);

	if (v == NULL)
		fail_msg("%s is not exported", name);
	if (strcmp(v, want) != 0)
		fail_msg("%s='%s', expected '%s'", name, v, want);
}

static void assert_var_u(const struct dpg_env *e, const char *name, unsigned long want)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%lu", want);
	assert_var(e, name, buf);
}

/* The step must fail; the message must contain each NULL-terminated needle. */
static void expect_step_error(struct fx *f, ...)
{
	va_list ap;
	const char *needle;

	if (step_rc(f) != -1)
		fail_msg("dpg_step_from_env accepted the environment");
	assert_true(strlen(f->err.msg) > 0);
	assert_null(strchr(f->err.msg, '\n'));
	va_start(ap, f);
	while ((needle = va_arg(ap, const char *)) != NULL)
		assert_contains(f->err.msg, needle);
	va_end(ap);
	/* and with no error record */
	assert_int_equal(dpg_step_from_env(table_getenv, &f->env, &f->conf, &f->req,
					   &f->step, NULL), -1);
}

static void expect_task_error(struct fx *f, ...)
{
	va_list ap;
	const char *needle;

	if (task_rc(f) != -1)
		fail_msg("dpg_task_from_env accepted the environment");
	assert_true(strlen(f->err.msg) > 0);
	assert_null(strchr(f->err.msg, '\n'));
	va_start(ap, f);
	while ((needle = va_arg(ap, const char *)) != NULL)
		assert_contains(f->err.msg, needle);
	va_end(ap);
	assert_int_equal(dpg_task_from_env(table_getenv, &f->env, &f->step,
					   &f->task, NULL), -1);
}

static uint16_t default_port(uint32_t job, uint32_t step)
{
	struct dpg_port_range r = { DPG_PORT_DEFAULT_LO, DPG_PORT_DEFAULT_HI };

	return dpg_port_for_step(job, step, r);
}

/* ------------------------------------------------------------ layouts */

/* srun -N3 -n6 (block): two tasks per node, ranks 0..5. */
static void test_block_n3_n6(void **state)
{
	struct fx *f = *state;
	static const char *const nodes[] = { "n1", "n2", "n3" };

	env_step(&f->env, "n[1-3]", 6, 3, "2(x3)", 1234, 0);
	for (unsigned r = 0; r < 6; r++) {
		contract_for(f, r, r % 2, r / 2, nodes[r / 2]);
		assert_true(f->env.lookups > 0);
		assert_int_equal(f->step.world_size, 6);
		assert_int_equal(f->step.num_nodes, 3);
		assert_int_equal(f->step.job_id, 1234);
		assert_int_equal(f->step.step_id, 0);
		assert_string_equal(f->step.nodelist, "n[1-3]");
		assert_string_equal(f->step.master_node, "n1");
		assert_string_equal(f->step.master_addr, "n1");
		assert_int_equal(f->step.addr_src, DPG_SRC_NODELIST);
		assert_int_equal(f->task.rank, r);
		assert_int_equal(f->task.local_rank, r % 2);
		assert_int_equal(f->task.node_rank, r / 2);
		assert_int_equal(f->task.local_world_size, 2);
		assert_string_equal(f->task.node, nodes[r / 2]);
		assert_var_u(&f->out, "RANK", r);
		assert_var_u(&f->out, "LOCAL_RANK", r % 2);
		assert_var_u(&f->out, "WORLD_SIZE", 6);
		assert_var_u(&f->out, "LOCAL_WORLD_SIZE", 2);
		assert_var_u(&f->out, "NODE_RANK", r / 2);
		assert_var_u(&f->out, "GROUP_RANK", r / 2);
		assert_var_u(&f->out, "GROUP_WORLD_SIZE", 3);
		assert_var(&f->out, "MASTER_ADDR", "n1");
		assert_var_u(&f->out, "MASTER_PORT", default_port(1234, 0));
		assert_string_equal(f->out.notice, "");
	}
	/* SLURMD_NODENAME is optional */
	contract_for(f, 5, 1, 2, NULL);
	assert_string_equal(f->task.node, "n3");
}

/* srun -N2 -n5: 3 tasks on the first node, 2 on the second. */
static void test_uneven_n5_on_2(void **state)
{
	struct fx *f = *state;
	static const unsigned node_of[] = { 0, 0, 0, 1, 1 };
	static const unsigned local_of[] = { 0, 1, 2, 0, 1 };
	static const unsigned lws[] = { 3, 2 };

	env_step(&f->env, "node[01-02]", 5, 2, "3,2", 77, 3);
	for (unsigned r = 0; r < 5; r++) {
		char name[16];

		snprintf(name, sizeof(name), "node%02u", node_of[r] + 1);
		contract_for(f, r, local_of[r], node_of[r], name);
		assert_var_u(&f->out, "RANK", r);
		assert_var_u(&f->out, "WORLD_SIZE", 5);
		assert_var_u(&f->out, "LOCAL_RANK", local_of[r]);
		assert_var_u(&f->out, "LOCAL_WORLD_SIZE", lws[node_of[r]]);
		assert_var_u(&f->out, "DPG_LOCAL_WORLD_SIZE", lws[node_of[r]]);
		assert_var_u(&f->out, "NODE_RANK", node_of[r]);
		assert_var(&f->out, "MASTER_ADDR", "node01");
		assert_string_equal(f->task.node, name);
	}
	/* the same with the repeat syntax: "3,2(x1)" and "3(x1),2" */
	env_set(&f->env, "SLURM_STEP_TASKS_PER_NODE", "3(x1),2");
	contract_for(f, 4, 1, 1, "node02");
	assert_var_u(&f->out, "LOCAL_WORLD_SIZE", 2);
}

/* The step's task count, not the job's (sbatch -n8, srun -n4). */
static void test_step_not_job_counts(void **state)
{
	struct fx *f = *state;

	env_step(&f->env, "n[1-2]", 4, 2, "2(x2)", 500, 2);
	env_set(&f->env, "SLURM_NTASKS", "8");
	env_set(&f->env, "SLURM_NPROCS", "8");
	env_set(&f->env, "SLURM_JOB_NUM_NODES", "4");
	env_set(&f->env, "SLURM_NNODES", "4");
	env_set(&f->env, "SLURM_JOB_NODELIST", "n[1-4]");
	env_set(&f->env, "SLURM_NODELIST", "n[1-4]");
	env_set(&f->env, "SLURM_TASKS_PER_NODE", "2(x4)");
	contract_for(f, 3, 1, 1, "n2");
	assert_var(&f->out, "WORLD_SIZE", "4");
	assert_var(&f->out, "DPG_WORLD_SIZE", "4");
	assert_var(&f->out, "ROLE_WORLD_SIZE", "4");
	assert_var(&f->out, "GROUP_WORLD_SIZE", "2");
	assert_var(&f->out, "DPG_NUM_NODES", "2");
	assert_var(&f->out, "LOCAL_WORLD_SIZE", "2");
}

/* ------------------------------------------------------- MASTER_ADDR */

static void test_master_addr_from_step_nodelist(void **state)
{
	struct fx *f = *state;

	env_step(&f->env, "gpu-[007-009]", 3, 3, "1(x3)", 9, 1);
	env_set(&f->env, "SLURM_JOB_NODELIST", "gpu-[001-009]");
	env_set(&f->env, "SLURM_NODELIST", "gpu-[001-009]");
	contract_for(f, 2, 0, 2, "gpu-009");
	assert_string_equal(f->step.master_node, "gpu-007");
	assert_var(&f->out, "MASTER_ADDR", "gpu-007");
	assert_var(&f->out, "DPG_MASTER_ADDR", "gpu-007");
	assert_string_equal(f->task.node, "gpu-009");

	/* several ranges and names with dashes and dots */
	env_step(&f->env, "rack-2-gpu-[10-11],rack-1-gpu-[03,05]", 4, 4, "1(x4)", 9, 1);
	contract_for(f, 3, 0, 3, "rack-1-gpu-05");
	assert_var(&f->out, "MASTER_ADDR", "rack-2-gpu-10");
	assert_string_equal(f->task.node, "rack-1-gpu-05");

	/* a single plain host */
	env_step(&f->env, "login.cluster-1", 2, 1, "2", 9, 1);
	contract_for(f, 1, 1, 0, "login.cluster-1");
	assert_var(&f->out, "MASTER_ADDR", "login.cluster-1");
}

static void test_master_addr_rule(void **state)
{
	struct fx *f = *state;
	struct dpg_err e;

	assert_int_equal(dpg_conf_parse_arg(&f->conf, "master_addr=%n-ib", &e), 0);
	env_step(&f->env, "gpu-[007-009]", 3, 3, "1(x3)", 9, 1);
	contract_for(f, 1, 0, 1, "gpu-008");
	assert_string_equal(f->step.master_node, "gpu-007");
	assert_string_equal(f->step.master_addr, "gpu-007-ib");
	assert_int_equal(f->step.addr_src, DPG_SRC_NODELIST);
	assert_var(&f->out, "MASTER_ADDR", "gpu-007-ib");
	assert_var(&f->out, "DPG_MASTER_ADDR", "gpu-007-ib");
	/* the task's own node is not rewritten */
	assert_string_equal(f->task.node, "gpu-008");

	assert_int_equal(dpg_conf_parse_arg(&f->conf, "master_addr=%n.fabric.example", &e), 0);
	contract_for(f, 0, 0, 0, "gpu-007");
	assert_var(&f->out, "MASTER_ADDR", "gpu-007.fabric.example");

	assert_int_equal(dpg_conf_parse_arg(&f->conf, "master_addr=ib-%n", &e), 0);
	contract_for(f, 0, 0, 0, "gpu-007");
	assert_var(&f->out, "MASTER_ADDR", "ib-gpu-007");
}

/* The rule's result longer than DPG_ADDR_MAX: an error, not a truncation. */
static void test_master_addr_rule_too_long(void **state)
{
	struct fx *f = *state;
	char node[DPG_HOSTNAME_MAX + 1], arg[DPG_ADDR_FORMAT_MAX + 16];
	struct dpg_err e;

	memset(node, 'h', 250);
	node[250] = '\0';
	snprintf(arg, sizeof(arg), "master_addr=%%n.");
	memset(arg + strlen(arg), 'd', 100);
	arg[strlen("master_addr=%n.") + 100] = '\0';
	assert_int_equal(dpg_conf_parse_arg(&f->conf, arg, &e), 0);
	env_step(&f->env, node, 1, 1, "1", 9, 1);
	expect_step_error(f, "master_addr", NULL);
}

/* -------------------------------------------------------- MASTER_PORT */

static void test_port_formula(void **state)
{
	struct fx *f = *state;
	static const uint32_t jobs[] = { 1, 42, 12767, 12768, 4000000, 99999999 };
	static const uint32_t steps[] = { 0, 1, 2, 17, 1000 };
	struct dpg_err e;

	for (int pass = 0; pass < 2; pass++) {
		struct dpg_port_range r = { DPG_PORT_DEFAULT_LO, DPG_PORT_DEFAULT_HI };

		if (pass == 1) {
			assert_int_equal(dpg_conf_parse_arg(&f->conf,
					"port_range=30000-30010", &e), 0);
			r.lo = 30000;
			r.hi = 30010;
		}
		for (size_t j = 0; j < sizeof(jobs) / sizeof(jobs[0]); j++)
			for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
				uint16_t want = dpg_port_for_step(jobs[j], steps[s], r);

				env_step(&f->env, "n[1-2]", 2, 2, "1(x2)", jobs[j], steps[s]);
				contract_for(f, 0, 0, 0, "n1");
				assert_int_equal(f->step.master_port, want);
				assert_in_range(f->step.master_port, r.lo, r.hi);
				assert_int_equal(f->step.port_src, DPG_SRC_FORMULA);
				assert_var_u(&f->out, "MASTER_PORT", want);
				assert_var_u(&f->out, "DPG_MASTER_PORT", want);
				/* every task of the step computes the same port */
				contract_for(f, 1, 0, 1, "n2");
				assert_var_u(&f->out, "MASTER_PORT", want);
			}
	}
}

static void test_port_option_overrides(void **state)
{
	struct fx *f = *state;

	env_step(&f->env, "n[1-2]", 2, 2, "1(x2)", 42, 1);
	env_set(&f->env, "SLURM_STEP_RESV_PORTS", "12000-12003");
	env_set(&f->env, "MASTER_PORT", "29400");
	f->req.port = 29500;
	contract_for(f, 1, 0, 1, "n2");
	assert_int_equal(f->step.master_port, 29500);
	assert_int_equal(f->step.port_src, DPG_SRC_OPTION);
	assert_var(&f->out, "MASTER_PORT", "29500");
	assert_var(&f->out, "DPG_MASTER_PORT", "29500");
	assert_string_equal(dpg_src_name(f->step.port_src), "option");
}

static void test_port_resv(void **state)
{
	struct fx *f = *state;
	struct dpg_err e;

	env_step(&f->env, "n[1-2]", 2, 2, "1(x2)", 42, 1);
	env_set(&f->env, "SLURM_STEP_RESV_PORTS", "12000-12003");
	contract_for(f, 0, 0, 0, "n1");
	assert_int_equal(f->step.master_port, 12000);
	assert_int_equal(f->step.port_src, DPG_SRC_RESV);
	assert_string_equal(dpg_src_name(f->step.port_src), "resv_ports");
	assert_var(&f->out, "MASTER_PORT", "12000");

	env_set(&f->env, "SLURM_STEP_RESV_PORTS", "12005,12009");
	contract_for(f, 0, 0, 0, "n1");
	assert_var(&f->out, "MASTER_PORT", "12005");

	/* an empty value means none were reserved */
	env_set(&f->env, "SLURM_STEP_RESV_PORTS", "");
	contract_for(f, 0, 0, 0, "n1");
	assert_int_equal(f->step.port_src, DPG_SRC_FORMULA);
	assert_var_u(&f->out, "MASTER_PORT", default_port(42, 1));

	/* resv_ports=no ignores them */
	env_set(&f->env, "SLURM_STEP_RESV_PORTS", "12000-12003");
	assert_int_equal(dpg_conf_parse_arg(&f->conf, "resv_ports=no", &e), 0);
	contract_for(f, 0, 0, 0, "n1");
	assert_int_equal(f->step.port_src, DPG_SRC_FORMULA);
	assert_var_u(&f->out, "MASTER_PORT", default_port(42, 1));

	/* a garbled value is an error naming the variable */
	assert_int_equal(dpg_conf_parse_arg(&f->conf, "resv_ports=yes", &e), 0);
	env_set(&f->env, "SLURM_STEP_RESV_PORTS", "abc");
	expect_step_error(f, "SLURM_STEP_RESV_PORTS", NULL);
}

/* -------------------------------------------- user-set MASTER_ADDR/PORT */

static void test_user_values_kept(void **state)
{
	struct fx *f = *state;
	char line[512];

	env_step(&f->env, "n[1-2]", 2, 2, "1(x2)", 42, 1);
	env_set(&f->env, "MASTER_ADDR", "my-rdzv.example");
	env_set(&f->env, "MASTER_PORT", "29400");
	env_set(&f->env, "SLURM_STEP_RESV_PORTS", "12000-12003");
	contract_for(f, 1, 0, 1, "n2");
	assert_int_equal(f->step.addr_src, DPG_SRC_USER);
	assert_int_equal(f->step.port_src, DPG_SRC_USER);
	assert_var(&f->out, "MASTER_ADDR", "my-rdzv.example");
	assert_var(&f->out, "MASTER_PORT", "29400");
	assert_var(&f->out, "DPG_MASTER_ADDR", "my-rdzv.example");
	assert_var(&f->out, "DPG_MASTER_PORT", "29400");
	assert_int_equal(dpg_contract_describe(&f->step, &f->task, &f->req, line,
					       sizeof(line)), 0);
	assert_contains(line, " port_source=user");
	assert_contains(line, " master_addr=my-rdzv.example ");

	/* a user MASTER_ADDR is used as is, without the master_addr rule */
	{
		struct dpg_err e;

		assert_int_equal(dpg_conf_parse_arg(&f->conf, "master_addr=%n-ib", &e), 0);
		contract_for(f, 0, 0, 0, "n1");
		assert_var(&f->out, "MASTER_ADDR", "my-rdzv.example");
	}

	/* only the port */
	env_unset(&f->env, "MASTER_ADDR");
	contract_for(f, 0, 0, 0, "n1");
	assert_int_equal(f->step.addr_src, DPG_SRC_NODELIST);
	assert_var(&f->out, "MASTER_ADDR", "n1-ib");
	assert_var(&f->out, "MASTER_PORT", "29400");

	/* empty values count as unset */
	env_set(&f->env, "MASTER_ADDR", "");
	env_set(&f->env, "MASTER_PORT", "");
	env_unset(&f->env, "SLURM_STEP_RESV_PORTS");
	contract_for(f, 0, 0, 0, "n1");
	assert_var(&f->out, "MASTER_ADDR", "n1-ib");
	assert_var_u(&f->out, "MASTER_PORT", default_port(42, 1));
	assert_int_equal(f->step.port_src, DPG_SRC_FORMULA);
}

/* Values an outer dpg step exported (MASTER_* equal to DPG_MASTER_*) are
 * not the user's: recompute them for this step. */
static void test_inherited_values_recomputed(void **state)
{
	struct fx *f = *state;

	env_step(&f->env, "n[4-5]", 2, 2, "1(x2)", 42, 3);
	env_set(&f->env, "MASTER_ADDR", "n1");
	env_set(&f->env, "DPG_MASTER_ADDR", "n1");
	env_set(&f->env, "MASTER_PORT", "20001");
	env_set(&f->env, "DPG_MASTER_PORT", "20001");
	contract_for(f, 1, 0, 1, "n5");
	assert_int_equal(f->step.addr_src, DPG_SRC_NODELIST);
	assert_int_equal(f->step.port_src, DPG_SRC_FORMULA);
	assert_var(&f->out, "MASTER_ADDR", "n4");
	assert_var_u(&f->out, "MASTER_PORT", default_port(42, 3));

	/* the user changed them after the outer step: theirs again */
	env_set(&f->env, "MASTER_ADDR", "n2");
	env_set(&f->env, "MASTER_PORT", "20002");
	contract_for(f, 1, 0, 1, "n5");
	assert_int_equal(f->step.addr_src, DPG_SRC_USER);
	assert_int_equal(f->step.port_src, DPG_SRC_USER);
	assert_var(&f->out, "MASTER_ADDR", "n2");
	assert_var(&f->out, "MASTER_PORT", "20002");

	/* one inherited, one the user's */
	env_set(&f->env, "MASTER_ADDR", "n1");
	contract_for(f, 1, 0, 1, "n5");
	assert_int_equal(f->step.addr_src, DPG_SRC_NODELIST);
	assert_int_equal(f->step.port_src, DPG_SRC_USER);
	assert_var(&f->out, "MASTER_ADDR", "n4");
	assert_var(&f->out, "MASTER_PORT", "20002");
}

static void test_user_port_not_a_number(void **state)
{
	struct fx *f = *state;
	static const char *const bad[] = { "abc", "0", "65536", "-1", "29500x",
					   " 29500", "2e4" };

	env_step(&f->env, "n[1-2]", 2, 2, "1(x2)", 42, 1);
	env_task(&f->env, 0, 0, 0, "n1");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		env_set(&f->env, "MASTER_PORT", bad[i]);
		expect_step_error(f, "MASTER_PORT", NULL);
	}
	/* --dpg-port makes the bad value irrelevant */
	f->req.port = 29500;
	step_ok(f);
	assert_int_equal(f->step.master_port, 29500);
}

static void test_user_addr_too_long(void **state)
{
	struct fx *f = *state;
	char addr[DPG_ADDR_MAX + 8];

	memset(addr, 'a', sizeof(addr) - 1);
	addr[sizeof(addr) - 1] = '\0';
	env_step(&f->env, "n[1-2]", 2, 2, "1(x2)", 42, 1);
	env_set(&f->env, "MASTER_ADDR", addr);
	expect_step_error(f, "MASTER_ADDR", NULL);

	/* the longest that fits is kept */
	addr[DPG_ADDR_MAX - 1] = '\0';
	env_set(&f->env, "MASTER_ADDR", addr);
	contract_for(f, 0, 0, 0, "n1");
	assert_var(&f->out, "MASTER_ADDR", addr);
}

/* ---------------------------------------------------- rank variables */

static void test_rank_vars_overwritten(void **state)
{
	struct fx *f = *state;

	env_step(&f->env, "n[1-3]", 6, 3, "2(x3)", 42, 1);
	/* the submitting shell had rank variables of its own */
	env_set(&f->env, "RANK", "7");
	env_set(&f->env, "WORLD_SIZE", "6");
	env_set(&f->env, "LOCAL_RANK", "0");
	contract_for(f, 3, 1, 1, "n2");
	assert_var(&f->out, "RANK", "3");
	assert_var(&f->out, "WORLD_SIZE", "6");
	assert_var(&f->out, "LOCAL_RANK", "1");
	assert_true(strlen(f->out.notice) > 0);
	assert_contains(f->out.notice, " RANK=7");
	assert_contains(f->out.notice, "LOCAL_RANK=0");
	/* WORLD_SIZE was already right: not mentioned */
	assert_null(strstr(f->out.notice, "WORLD_SIZE"));
	assert_null(strchr(f->out.notice, '\n'));

	/* inherited values that happen to match: silent */
	env_set(&f->env, "RANK", "3");
	env_set(&f->env, "LOCAL_RANK", "1");
	env_set(&f->env, "NODE_RANK", "1");
	env_set(&f->env, "LOCAL_WORLD_SIZE", "2");
	contract_for(f, 3, 1, 1, "n2");
	assert_string_equal(f->out.notice, "");

	/* no getenv: no notice, same variables */
	env_set(&f->env, "RANK", "99");
	memset(f->err.msg, 0, sizeof(f->err.msg));
	assert_int_equal(dpg_contract_build(&f->step, &f->task, &f->req, NULL, NULL,
					    &f->out, &f->err), 0);
	assert_var(&f->out, "RANK", "3");
	assert_string_equal(f->out.notice, "");

	/* a long inherited value keeps the notice bounded */
	{
		char big[900];

		memset(big, '9', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\0';
		env_set(&f->env, "RANK", big);
		env_set(&f->env, "LOCAL_RANK", big);
		env_set(&f->env, "WORLD_SIZE", big);
		env_set(&f->env, "LOCAL_WORLD_SIZE", big);
		env_set(&f->env, "NODE_RANK", big);
		contract_for(f, 3, 1, 1, "n2");
		assert_var(&f->out, "RANK", "3");
		assert_true(strlen(f->out.notice) < sizeof(f->out.notice));
		assert_contains(f->out.notice, "RANK=");
	}
}

/* An inherited value is the submitter's text and goes into slurmstepd's
 * log: a newline or escape in it must not start a forged log line. */
static void test_rank_vars_quoted(void **state)
{
	struct fx *f = *state;
	size_t i;

	env_step(&f->env, "n[1-3]", 6, 3, "2(x3)", 42, 1);
	env_set(&f->env, "RANK", "5\nerror: forged");
	env_set(&f->env, "WORLD_SIZE", "\x1b[2K\r9");
	contract_for(f, 3, 1, 1, "n2");
	assert_var(&f->out, "RANK", "3");
	for (i = 0; f->out.notice[i] != '\0'; i++)
		if ((unsigned char)f->out.notice[i] < 0x20 ||
		    (unsigned char)f->out.notice[i] == 0x7f)
			fail_msg("raw byte 0x%02x at %zu in the notice \"%s\"",
				 (unsigned char)f->out.notice[i], i, f->out.notice);
	assert_contains(f->out.notice, " RANK=5\\x0aerror: forged");
	assert_contains(f->out.notice, "WORLD_SIZE=\\x1b[2K\\x0d9");
}

static void test_no_torchelastic_agent_store(void **state)
{
	struct fx *f = *state;

	env_step(&f->env, "n[1-2]", 2, 2, "1(x2)", 42, 1);
	env_set(&f->env, "TORCHELASTIC_USE_AGENT_STORE", "True");
	contract_for(f, 0, 0, 0, "n1");
	for (size_t i = 0; i < f->out.n; i++)
		assert_string_not_equal(f->out.v[i].name, "TORCHELASTIC_USE_AGENT_STORE");
	assert_null(dpg_env_get(&f->out, "TORCHELASTIC_USE_AGENT_STORE"));
	f->req.gpus_per_task = 4;
	f->req.port = 29500;
	contract_for(f, 1, 0, 1, "n2");
	assert_null(dpg_env_get(&f->out, "TORCHELASTIC_USE_AGENT_STORE"));
}

/* Every exported variable of one task, in order. */
static void test_full_export_list(void **state)
{
	struct fx *f = *state;
	char port[8], contract[8], jax[32];
	const struct {
		const char *name, *value;
	} want[] = {
		{ "RANK", "3" },
		{ "LOCAL_RANK", "1" },
		{ "WORLD_SIZE", "6" },
		{ "LOCAL_WORLD_SIZE", "2" },
		{ "NODE_RANK", "1" },
		{ "GROUP_RANK", "1" },
		{ "GROUP_WORLD_SIZE", "3" },
		{ "ROLE_RANK", "3" },
		{ "ROLE_WORLD_SIZE", "6" },
		{ "ROLE_NAME", "default" },
		{ "MASTER_ADDR", "gpu-007" },
		{ "MASTER_PORT", port },
		{ "JAX_COORDINATOR_ADDRESS", jax },
		{ "DPG_CONTRACT", contract },
		{ "DPG_RANK", "3" },
		{ "DPG_WORLD_SIZE", "6" },
		{ "DPG_LOCAL_RANK", "1" },
		{ "DPG_LOCAL_WORLD_SIZE", "2" },
		{ "DPG_NODE_RANK", "1" },
		{ "DPG_NUM_NODES", "3" },
		{ "DPG_MASTER_ADDR", "gpu-007" },
		{ "DPG_MASTER_PORT", port },
		{ "DPG_JOB_ID", "4242" },
		{ "DPG_STEP_ID", "7" },
		{ "DPG_GPUS_PER_TASK", "2" },
	};
	size_t nwant = sizeof(want) / sizeof(want[0]);

	snprintf(port, sizeof(port), "%u", (unsigned)default_port(4242, 7));
	snprintf(jax, sizeof(jax), "gpu-007:%s", port);
	snprintf(contract, sizeof(contract), "%d", DPG_CONTRACT_VARS_VERSION);
	assert_string_equal(contract, "1");
	env_step(&f->env, "gpu-[007-009]", 6, 3, "2(x3)", 4242, 7);
	f->req.gpus_per_task = 2;
	contract_for(f, 3, 1, 1, "gpu-008");
	assert_int_equal(f->out.n, nwant);
	for (size_t i = 0; i < nwant; i++) {
		assert_string_equal(f->out.v[i].name, want[i].name);
		if (strcmp(f->out.v[i].value, want[i].value) != 0)
			fail_msg("%s='%s', expected '%s'", want[i].name,
				 f->out.v[i].value, want[i].value);
		assert_ptr_equal(dpg_env_get(&f->out, want[i].name), f->out.v[i].value);
	}
	/* no name twice */
	for (size_t i = 0; i < f->out.n; i++)
		for (size_t j = i + 1; j < f->out.n; j++)
			assert_string_not_equal(f->out.v[i].name, f->out.v[j].name);
	assert_null(dpg_env_get(&f->out, "SLURM_PROCID"));

	/* JAX's coordinator: an IPv6 MASTER_ADDR in brackets */
	snprintf(f->step.master_addr, sizeof(f->step.master_addr), "fd00::7");
	build_ok(f);
	snprintf(jax, sizeof(jax), "[fd00::7]:%s", port);
	assert_var(&f->out, "JAX_COORDINATOR_ADDRESS", jax);
	assert_var(&f->out, "MASTER_ADDR", "fd00::7");

	/* no --dpg-gpus-per-task: 0 */
	f->req.gpus_per_task = -1;
	contract_for(f, 3, 1, 1, "gpu-008");
	assert_var(&f->out, "DPG_GPUS_PER_TASK", "0");
	f->req.gpus_per_task = 0;
	contract_for(f, 3, 1, 1, "gpu-008");
	assert_var(&f->out, "DPG_GPUS_PER_TASK", "0");
	f->req.gpus_per_task = 64;
	contract_for(f, 3, 1, 1, "gpu-008");
	assert_var(&f->out, "DPG_GPUS_PER_TASK", "64");
}

/* ------------------------------------------------------ special steps */

static void test_special_steps(void **state)
{
	(void)state;
	assert_true(dpg_is_special_step(0xfffffffdu));	/* SLURM_PENDING_STEP */
	assert_true(dpg_is_special_step(0xfffffffcu));	/* SLURM_EXTERN_CONT */
	assert_true(dpg_is_special_step(0xfffffffbu));	/* SLURM_BATCH_SCRIPT */
	assert_true(dpg_is_special_step(0xfffffffau));	/* SLURM_INTERACTIVE_STEP */
	assert_false(dpg_is_special_step(0));
	assert_false(dpg_is_special_step(1));
	assert_false(dpg_is_special_step(1000));
	assert_false(dpg_is_special_step(0xfffffff0u));	/* SLURM_MAX_NORMAL_STEP_ID */
	assert_false(dpg_is_special_step(0xfffffff9u));
}

/* ------------------------------------------------------------ describe */

static void test_describe(void **state)
{
	struct fx *f = *state;
	char line[512], want[512];
	unsigned port = default_port(4242, 7);

	env_step(&f->env, "gpu-[007-009]", 6, 3, "2(x3)", 4242, 7);
	f->req.gpus_per_task = 2;
	contract_for(f, 3, 1, 1, "gpu-008");
	assert_int_equal(dpg_contract_describe(&f->step, &f->task, &f->req, line,
					       sizeof(line)), 0);
	snprintf(want, sizeof(want),
		 "dpg: rank=3 world_size=6 local_rank=1 local_world_size=2 "
		 "node_rank=1 num_nodes=3 node=gpu-008 master_addr=gpu-007 "
		 "master_port=%u port_source=formula gpus_per_task=2", port);
	assert_string_equal(line, want);
	assert_null(strchr(line, '\n'));

	/* too small a buffer: -1, truncated, never overrun */
	{
		size_t len = strlen(want);
		char *buf = malloc(len);

		assert_non_null(buf);
		assert_int_equal(dpg_contract_describe(&f->step, &f->task, &f->req,
						       buf, len), -1);
		assert_int_equal(strlen(buf), len - 1);
		free(buf);
		buf = malloc(len + 1);
		assert_non_null(buf);
		assert_int_equal(dpg_contract_describe(&f->step, &f->task, &f->req,
						       buf, len + 1), 0);
		assert_string_equal(buf, want);
		free(buf);
	}

	/* other port sources and no gpus */
	f->req.gpus_per_task = -1;
	f->req.port = 29500;
	contract_for(f, 0, 0, 0, "gpu-007");
	assert_int_equal(dpg_contract_describe(&f->step, &f->task, &f->req, line,
					       sizeof(line)), 0);
	assert_string_equal(line,
		"dpg: rank=0 world_size=6 local_rank=0 local_world_size=2 "
		"node_rank=0 num_nodes=3 node=gpu-007 master_addr=gpu-007 "
		"master_port=29500 port_source=option gpus_per_task=0");
	f->req.port = 0;
	env_set(&f->env, "SLURM_STEP_RESV_PORTS", "12000-12003");
	contract_for(f, 0, 0, 0, "gpu-007");
	assert_int_equal(dpg_contract_describe(&f->step, &f->task, &f->req, line,
					       sizeof(line)), 0);
	assert_contains(line, " master_port=12000 port_source=resv_ports ");
}

static void test_src_names(void **state)
{
	(void)state;
	assert_string_equal(dpg_src_name(DPG_SRC_FORMULA), "formula");
	assert_string_equal(dpg_src_name(DPG_SRC_RESV), "resv_ports");
	assert_string_equal(dpg_src_name(DPG_SRC_OPTION), "option");
	assert_string_equal(dpg_src_name(DPG_SRC_USER), "user");
	assert_string_equal(dpg_src_name(DPG_SRC_NODELIST), "nodelist");
}

/* ------------------------------------------------------------- errors */

static void test_missing_variables(void **state)
{
	struct fx *f = *state;
	static const char *const step_vars[] = {
		"SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_STEP_NUM_TASKS",
		"SLURM_STEP_NUM_NODES", "SLURM_STEP_NODELIST",
		"SLURM_STEP_TASKS_PER_NODE",
	};
	static const char *const task_vars[] = {
		"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID",
	};

	for (size_t i = 0; i < sizeof(step_vars) / sizeof(step_vars[0]); i++) {
		for (int empty = 0; empty < 2; empty++) {
			env_step(&f->env, "n[1-3]", 6, 3, "2(x3)", 42, 1);
			env_task(&f->env, 0, 0, 0, "n1");
			/* the job-wide variables do not stand in for the step's */
			env_set(&f->env, "SLURM_JOB_NODELIST", "n[1-3]");
			env_set(&f->env, "SLURM_NTASKS", "6");
			env_set(&f->env, "SLURM_JOB_NUM_NODES", "3");
			env_set(&f->env, "SLURM_TASKS_PER_NODE", "2(x3)");
			env_set(&f->env, "SLURM_JOBID", "42");
			if (empty)
				env_set(&f->env, step_vars[i], "");
			else
				env_unset(&f->env, step_vars[i]);
			expect_step_error(f, step_vars[i], NULL);
		}
	}
	for (size_t i = 0; i < sizeof(task_vars) / sizeof(task_vars[0]); i++) {
		env_step(&f->env, "n[1-3]", 6, 3, "2(x3)", 42, 1);
		env_task(&f->env, 0, 0, 0, "n1");
		step_ok(f);
		env_unset(&f->env, task_vars[i]);
		expect_task_error(f, task_vars[i], NULL);
		env_set(&f->env, task_vars[i], "");
		expect_task_error(f, task_vars[i], NULL);
	}
}

static void test_non_numeric(void **state)
{
	struct fx *f = *state;
	static const struct {
		const char *name, *value;
	} step_bad[] = {
		{ "SLURM_JOB_ID", "abc" }, { "SLURM_JOB_ID", "42x" },
		{ "SLURM_JOB_ID", "-42" }, { "SLURM_JOB_ID", "0" },
		{ "SLURM_JOB_ID", " 42" }, { "SLURM_JOB_ID", "4294967296" },
		{ "SLURM_STEP_ID", "one" }, { "SLURM_STEP_ID", "1.0" },
		{ "SLURM_STEP_NUM_TASKS", "6 " }, { "SLURM_STEP_NUM_TASKS", "0" },
		{ "SLURM_STEP_NUM_TASKS", "0x6" },
		{ "SLURM_STEP_NUM_NODES", "three" }, { "SLURM_STEP_NUM_NODES", "0" },
	};
	static const struct {
		const char *name, *value;
	} task_bad[] = {
		{ "SLURM_PROCID", "x" }, { "SLURM_PROCID", "-1" },
		{ "SLURM_PROCID", "+1" }, { "SLURM_LOCALID", "1.5" },
		{ "SLURM_LOCALID", "a" }, { "SLURM_NODEID", "1e0" },
		{ "SLURM_NODEID", "99999999999999999999999" },
	};

	for (size_t i = 0; i < sizeof(step_bad) / sizeof(step_bad[0]); i++) {
		env_step(&f->env, "n[1-3]", 6, 3, "2(x3)", 42, 1);
		env_set(&f->env, step_bad[i].name, step_bad[i].value);
		expect_step_error(f, step_bad[i].name, NULL);
	}
	for (size_t i = 0; i < sizeof(task_bad) / sizeof(task_bad[0]); i++) {
		env_step(&f->env, "n[1-3]", 6, 3, "2(x3)", 42, 1);
		env_task(&f->env, 0, 0, 0, "n1");
		step_ok(f);
		env_set(&f->env, task_bad[i].name, task_bad[i].value);
		expect_task_error(f, task_bad[i].name, NULL);
	}
}

static void test_task_out_of_range(void **state)
{
	struct fx *f = *state;

	env_step(&f->env, "n[1-3]", 6, 3, "2(x3)", 42, 1);
	step_ok(f);
	/* PROCID >= NUM_TASKS */
	env_task(&f->env, 6, 0, 2, "n3");
	expect_task_error(f, "SLURM_PROCID", NULL);
	env_task(&f->env, 4294967295u, 0, 2, "n3");
	expect_task_error(f, "SLURM_PROCID", NULL);
	/* NODEID >= NUM_NODES */
	env_task(&f->env, 5, 1, 3, NULL);
	expect_task_error(f, "SLURM_NODEID", NULL);
	/* LOCALID >= tasks on that node */
	env_task(&f->env, 5, 2, 2, "n3");
	expect_task_error(f, "SLURM_LOCALID", NULL);

	/* uneven: node 0 runs 3 tasks, node 1 runs 2 */
	env_step(&f->env, "n[1-2]", 5, 2, "3,2", 42, 1);
	step_ok(f);
	env_task(&f->env, 2, 2, 0, "n1");
	task_ok(f);
	assert_int_equal(f->task.local_world_size, 3);
	env_task(&f->env, 4, 2, 1, "n2");
	expect_task_error(f, "SLURM_LOCALID", NULL);
}

static void test_inconsistent_step(void **state)
{
	struct fx *f = *state;

	/* nodelist names 3 hosts, SLURM_STEP_NUM_NODES says 2 */
	env_step(&f->env, "n[1-3]", 6, 2, "3(x2)", 42, 1);
	expect_step_error(f, "SLURM_STEP_NODELIST", "SLURM_STEP_NUM_NODES", NULL);
	env_step(&f->env, "n[1-3]", 6, 4, "2(x3)", 42, 1);
	expect_step_error(f, "SLURM_STEP_NODELIST", "SLURM_STEP_NUM_NODES", NULL);

	/* tasks per node add up to 6, SLURM_STEP_NUM_TASKS says 5 */
	env_step(&f->env, "n[1-3]", 5, 3, "2(x3)", 42, 1);
	expect_step_error(f, "SLURM_STEP_TASKS_PER_NODE", NULL);
	env_step(&f->env, "n[1-3]", 7, 3, "2(x3)", 42, 1);
	expect_step_error(f, "SLURM_STEP_TASKS_PER_NODE", NULL);
	/* tasks per node describe fewer nodes than the step has */
	env_step(&f->env, "n[1-3]", 6, 3, "3(x2)", 42, 1);
	expect_step_error(f, "SLURM_STEP_TASKS_PER_NODE", NULL);
}

/* More nodes in the tasks-per-node string than the step has. */
static void test_tpn_too_many_nodes(void **state)
{
	struct fx *f = *state;

	env_step(&f->env, "n[1-3]", 6, 3, "2(x4)", 42, 1);
	expect_step_error(f, "SLURM_STEP_TASKS_PER_NODE", NULL);
	env_step(&f->env, "n[1-3]", 6, 3, "1,1,2,2", 42, 1);
	expect_step_error(f, "SLURM_STEP_TASKS_PER_NODE", NULL);
}

/* A malformed tasks-per-node string. */
static void test_tpn_malformed(void **state)
{
	struct fx *f = *state;
	static const char *const bad[] = { "2(x3", "two", "2(x0)", "0,6", "2,,4", "(x3)" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		env_step(&f->env, "n[1-2]", 6, 2, bad[i], 42, 1);
		expect_step_error(f, "SLURM_STEP_TASKS_PER_NODE", NULL);
	}
}

static void test_nodename_disagrees(void **state)
{
	struct fx *f = *state;

	env_step(&f->env, "n[1-3]", 6, 3, "2(x3)", 42, 1);
	step_ok(f);
	env_task(&f->env, 2, 0, 1, "n1");
	expect_task_error(f, "SLURMD_NODENAME", "n1", "n2", NULL);
	env_task(&f->env, 2, 0, 1, "n2.cluster");
	expect_task_error(f, "SLURMD_NODENAME", NULL);
	env_task(&f->env, 2, 0, 1, "n2");
	task_ok(f);
}

static void test_het_step(void **state)
{
	struct fx *f = *state;

	env_step(&f->env, "n[1-2]", 2, 2, "1(x2)", 42, 1);
	env_set(&f->env, "SLURM_HET_SIZE", "2");
	expect_step_error(f, "heterogeneous", NULL);
	env_unset(&f->env, "SLURM_HET_SIZE");
	env_set(&f->env, "SLURM_PACK_SIZE", "2");
	expect_step_error(f, "heterogeneous", NULL);
}

static void test_distributions(void **state)
{
	struct fx *f = *state;
	static const char *const good[] = { "block", "cyclic", "cyclic:cyclic",
					    "block:block", "plane=2" };

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		env_step(&f->env, "n[4-6]", 6, 3, "2(x3)", 42, 1);
		env_set(&f->env, "SLURM_DISTRIBUTION", good[i]);
		contract_for(f, 0, 0, 0, "n4");
		assert_var(&f->out, "MASTER_ADDR", "n4");
	}
}

static void test_arbitrary_needs_user_addr(void **state)
{
	struct fx *f = *state;

	env_step(&f->env, "n[4-6]", 6, 3, "2(x3)", 42, 1);
	env_set(&f->env, "SLURM_DISTRIBUTION", "arbitrary");
	expect_step_error(f, "SLURM_DISTRIBUTION", "arbitrary", NULL);

	/* inherited from an outer dpg step: still not the user's */
	env_set(&f->env, "MASTER_ADDR", "n9");
	env_set(&f->env, "DPG_MASTER_ADDR", "n9");
	expect_step_error(f, "SLURM_DISTRIBUTION", "arbitrary", NULL);

	/* with the user's MASTER_ADDR the step is fine */
	env_unset(&f->env, "DPG_MASTER_ADDR");
	contract_for(f, 0, 0, 0, "n4");
	assert_var(&f->out, "MASTER_ADDR", "n9");
	assert_int_equal(f->step.addr_src, DPG_SRC_USER);
}

static void test_malformed_nodelist(void **state)
{
	struct fx *f = *state;
	static const char *const bad[] = { "n[1-", "n[3-1]", "n[1-3", "n]1[",
					   "n[a-c]", "n[1-3],", ",n1", "n[]" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		env_step(&f->env, bad[i], 3, 3, "1(x3)", 42, 1);
		expect_step_error(f, "SLURM_STEP_NODELIST", NULL);
	}
}

static void test_nodelist_too_long(void **state)
{
	struct fx *f = *state;
	char nl[DPG_ENV_VALUE_MAX + 16];

	memset(nl, 'n', sizeof(nl) - 1);
	nl[sizeof(nl) - 1] = '\0';
	env_step(&f->env, nl, 1, 1, "1", 42, 1);
	expect_step_error(f, "SLURM_STEP_NODELIST", NULL);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_block_n3_n6),
		T(test_uneven_n5_on_2),
		T(test_step_not_job_counts),
		T(test_master_addr_from_step_nodelist),
		T(test_master_addr_rule),
		T(test_master_addr_rule_too_long),
		T(test_port_formula),
		T(test_port_option_overrides),
		T(test_port_resv),
		T(test_user_values_kept),
		T(test_inherited_values_recomputed),
		T(test_user_port_not_a_number),
		T(test_user_addr_too_long),
		T(test_rank_vars_overwritten),
		T(test_rank_vars_quoted),
		T(test_no_torchelastic_agent_store),
		T(test_full_export_list),
		cmocka_unit_test(test_special_steps),
		T(test_describe),
		cmocka_unit_test(test_src_names),
		T(test_missing_variables),
		T(test_non_numeric),
		T(test_task_out_of_range),
		T(test_inconsistent_step),
		T(test_tpn_too_many_nodes),
		T(test_tpn_malformed),
		T(test_nodename_disagrees),
		T(test_het_step),
		T(test_distributions),
		T(test_arbitrary_needs_user_addr),
		T(test_malformed_nodelist),
		T(test_nodelist_too_long),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, NULL);
}
