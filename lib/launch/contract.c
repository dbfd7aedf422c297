/* SPDX-License-Identifier: BSD-3-Clause */
/* contract.c - the rank contract: reads a task's SLURM_* variables, checks
 * them for consistency and produces the variables dpg exports into the task. */
#include "contract.h"
#include "taskdist.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *dpg_src_name(enum dpg_src s)
{
	switch (s) {
	case DPG_SRC_FORMULA: return "formula";
	case DPG_SRC_RESV: return "resv_ports";
	case DPG_SRC_OPTION: return "option";
	case DPG_SRC_USER: return "user";
	case DPG_SRC_NODELIST: return "nodelist";
	}
	return "?";
}

static const char *need(dpg_getenv_fn get, void *ctx, const char *name,
			struct dpg_err *err)
{
	const char *v = get(ctx, name);

	if (v == NULL || *v == '\0') {
		dpg_errf(err, "%s is not set: dpg needs the environment of a task "
			 "launched by srun", name);
		return NULL;
	}
	return v;
}

static int need_u32(dpg_getenv_fn get, void *ctx, const char *name,
		    uint32_t lo, uint32_t *out, struct dpg_err *err)
{
	const char *v = need(get, ctx, name, err);
	unsigned long x;
	char q[64];

	if (v == NULL)
		return -1;
	if (dpg_parse_ulong(v, lo, 0xffffffffUL, &x) != 0)
		return dpg_errf(err, "%s='%s' is not an integer >= %u", name,
				dpg_err_quote(v, q, sizeof(q)), (unsigned)lo);
	*out = (uint32_t)x;
	return 0;
}

/* A value the user exported is "theirs" unless an outer dpg step put it
 * there (then DPG_<name> holds the same value). */
static const char *user_value(dpg_getenv_fn get, void *ctx, const char *name,
			      const char *dpg_name)
{
	const char *v = get(ctx, name), *mine = get(ctx, dpg_name);

	if (v == NULL || *v == '\0')
		return NULL;
	if (mine != NULL && strcmp(mine, v) == 0)
		return NULL;
	return v;
}

/* Parse the tasks-per-node string of the step into a fresh array that the
 * caller frees; checks it against the node and task counts. */
static uint32_t *step_counts(const struct dpg_step *step, const char *tpn,
			     struct dpg_err *err)
{
	uint32_t *counts = calloc(step->num_nodes, sizeof(*counts));
	size_t n = 0;
	uint64_t sum = 0;

	if (counts == NULL) {
		dpg_errf(err, "out of memory for %u node counts", step->num_nodes);
		return NULL;
	}
	if (dpg_tpn_parse(tpn, counts, step->num_nodes, &n, err) != 0) {
		dpg_err_prefix(err, "SLURM_STEP_TASKS_PER_NODE");
		goto fail;
	}
	for (size_t i = 0; i < n; i++)
		sum += counts[i];
	if (n != step->num_nodes || sum != step->world_size) {
		dpg_errf(err, "inconsistent step: SLURM_STEP_TASKS_PER_NODE='%.100s' "
			 "describes %zu nodes and %llu tasks, but the step has %u "
			 "nodes and %u tasks (heterogeneous steps are not supported)",
			 tpn, n, (unsigned long long)sum, step->num_nodes,
			 step->world_size);
		goto fail;
	}
	return counts;
fail:
	free(counts);
	return NULL;
}

static int step_port(dpg_getenv_fn get, void *ctx, const struct dpg_conf *conf,
		     const struct dpg_request *req, struct dpg_step *step,
		     struct dpg_err *err)
{
	const char *user = user_value(get, ctx, DPG_TORCH_MASTER_PORT, DPG_VAR_MASTER_PORT);
	const char *resv = get(ctx, "SLURM_STEP_RESV_PORTS");
	char q[64];

	if (req->port != 0) {
		step->master_port = req->port;
		step->port_src = DPG_SRC_OPTION;
	} else if (user != NULL) {
		unsigned long v;

		if (dpg_parse_ulong(user, 1, 65535, &v) != 0)
			return dpg_errf(err, "MASTER_PORT='%s' set in the environment is "
					"not a port: unset it or pass --dpg-port",
					dpg_err_quote(user, q, sizeof(q)));
		step->master_port = (uint16_t)v;
		step->port_src = DPG_SRC_USER;
	} else if (conf->use_resv_ports && resv != NULL && *resv != '\0') {
		if (dpg_port_from_resv(resv, &step->master_port, err) != 0)
			return -1;
		step->port_src = DPG_SRC_RESV;
	} else {
		step->master_port = dpg_port_for_step(step->job_id, step->step_id,
						      conf->ports);
		step->port_src = DPG_SRC_FORMULA;
	}
	return 0;
}

static int step_addr(dpg_getenv_fn get, void *ctx, const struct dpg_conf *conf,
		     struct dpg_step *step, struct dpg_err *err)
{
	const char *user = user_value(get, ctx, DPG_TORCH_MASTER_ADDR, DPG_VAR_MASTER_ADDR);
	const char *dist = get(ctx, "SLURM_DISTRIBUTION");
	enum dpg_dist d;
	uint32_t plane;

	if (user != NULL) {
		if (strlen(user) >= sizeof(step->master_addr))
			return dpg_errf(err, "MASTER_ADDR set in the environment is "
					"longer than %zu bytes",
					sizeof(step->master_addr) - 1);
		snprintf(step->master_addr, sizeof(step->master_addr), "%s", user);
		step->addr_src = DPG_SRC_USER;
		return 0;
	}
	/* block, cyclic and plane all put rank 0 on the step's first node */
	if (dist != NULL && *dist != '\0' && dpg_dist_parse(dist, &d, &plane, err) != 0)
		return dpg_err_prefix(err, "SLURM_DISTRIBUTION");
	if (dpg_conf_master_addr(conf, step->master_node, step->master_addr,
				 sizeof(step->master_addr), err) != 0)
		return -1;
	step->addr_src = DPG_SRC_NODELIST;
	return 0;
}

int dpg_step_from_env(dpg_getenv_fn get, void *ctx, const struct dpg_conf *conf,
		      const struct dpg_request *req, struct dpg_step *step,
		      struct dpg_err *err)
{
	const char *nodelist, *tpn;
	uint32_t *counts;
	size_t nhosts;

	memset(step, 0, sizeof(*step));
	if (need_u32(get, ctx, "SLURM_JOB_ID", 1, &step->job_id, err) != 0 ||
	    need_u32(get, ctx, "SLURM_STEP_ID", 0, &step->step_id, err) != 0 ||
	    need_u32(get, ctx, "SLURM_STEP_NUM_TASKS", 1, &step->world_size, err) != 0 ||
	    need_u32(get, ctx, "SLURM_STEP_NUM_NODES", 1, &step->num_nodes, err) != 0)
		return -1;
	if (get(ctx, "SLURM_HET_SIZE") != NULL || get(ctx, "SLURM_PACK_SIZE") != NULL)
		return dpg_errf(err, "heterogeneous job step: dpg cannot derive one "
				"rank contract across het components yet; run the "
				"components as separate steps or set the variables yourself");
	if ((nodelist = need(get, ctx, "SLURM_STEP_NODELIST", err)) == NULL ||
	    (tpn = need(get, ctx, "SLURM_STEP_TASKS_PER_NODE", err)) == NULL)
		return -1;
	if (strlen(nodelist) >= sizeof(step->nodelist))
		return dpg_errf(err, "SLURM_STEP_NODELIST is longer than %zu bytes",
				sizeof(step->nodelist) - 1);
	snprintf(step->nodelist, sizeof(step->nodelist), "%s", nodelist);
	if (dpg_hostlist_count(nodelist, DPG_HOSTLIST_DEFAULT_MAX, &nhosts, err) != 0)
		return dpg_err_prefix(err, "SLURM_STEP_NODELIST");
	if (nhosts != step->num_nodes)
		return dpg_errf(err, "inconsistent step: SLURM_STEP_NODELIST='%.100s' "
				"names %zu nodes but SLURM_STEP_NUM_NODES=%u",
				nodelist, nhosts, step->num_nodes);
	if ((counts = step_counts(step, tpn, err)) == NULL)
		return -1;
	free(counts);
	if (dpg_hostlist_nth(nodelist, 0, step->master_node,
			     sizeof(step->master_node), err) != 0)
		return -1;
	if (step_addr(get, ctx, conf, step, err) != 0)
		return -1;
	return step_port(get, ctx, conf, req, step, err);
}

int dpg_task_from_env(dpg_getenv_fn get, void *ctx, const struct dpg_step *step,
		      struct dpg_task *task, struct dpg_err *err)
{
	const char *tpn, *name;
	uint32_t *counts;
	char nth[DPG_HOSTNAME_MAX + 1];

	memset(task, 0, sizeof(*task));
	if (need_u32(get, ctx, "SLURM_PROCID", 0, &task->rank, err) != 0 ||
	    need_u32(get, ctx, "SLURM_LOCALID", 0, &task->local_rank, err) != 0 ||
	    need_u32(get, ctx, "SLURM_NODEID", 0, &task->node_rank, err) != 0)
		return -1;
	if (task->rank >= step->world_size)
		return dpg_errf(err, "inconsistent task: SLURM_PROCID=%u but the step "
				"has %u tasks", task->rank, step->world_size);
	if (task->node_rank >= step->num_nodes)
		return dpg_errf(err, "inconsistent task: SLURM_NODEID=%u but the step "
				"has %u nodes", task->node_rank, step->num_nodes);
	if ((tpn = need(get, ctx, "SLURM_STEP_TASKS_PER_NODE", err)) == NULL ||
	    (counts = step_counts(step, tpn, err)) == NULL)
		return -1;
	task->local_world_size = counts[task->node_rank];
	free(counts);
	if (task->local_rank >= task->local_world_size)
		return dpg_errf(err, "inconsistent task: SLURM_LOCALID=%u but node %u "
				"runs %u tasks of this step", task->local_rank,
				task->node_rank, task->local_world_size);
	if (dpg_hostlist_nth(step->nodelist, task->node_rank, nth, sizeof(nth), err) != 0)
		return -1;
	name = get(ctx, "SLURMD_NODENAME");
	if (name != NULL && *name != '\0' && strcmp(name, nth) != 0)
		return dpg_errf(err, "inconsistent task: SLURMD_NODENAME=%.64s but "
				"node %u of SLURM_STEP_NODELIST is %s (heterogeneous "
				"steps 'srun A : B' are not supported)", name,
				task->node_rank, nth);
	snprintf(task->node, sizeof(task->node), "%s", nth);
	return 0;
}

/* Rank/size variables are per task, so a value inherited from the
 * submitting shell is the same in every task and cannot be right for all of
 * them: dpg always overwrites them, and says so when they differed (the
 * inherited values quoted: a newline in one must not forge a log line). */
static void note_overwritten(const struct dpg_env *out, dpg_getenv_fn get,
			     void *ctx, char *notice, size_t len)
{
	static const char *const ranks[] = {
		DPG_TORCH_RANK, DPG_TORCH_LOCAL_RANK, DPG_TORCH_WORLD_SIZE, DPG_TORCH_LOCAL_WORLD_SIZE, DPG_TORCH_NODE_RANK,
	};
	size_t o = 0;

	notice[0] = '\0';
	for (size_t i = 0; i < sizeof(ranks) / sizeof(ranks[0]); i++) {
		const char *had = get(ctx, ranks[i]);
		const char *now = dpg_env_get(out, ranks[i]);
		char q[40];	/* the submitter's text, escaped: it goes to a log */
		int n;

		if (had == NULL || now == NULL || strcmp(had, now) == 0)
			continue;
		n = snprintf(notice + o, len - o, "%s%s=%s", o == 0 ?
			     "dpg: replaced inherited " : ", ", ranks[i],
			     dpg_err_quote(had, q, sizeof(q)));
		if (n < 0 || (size_t)n >= len - o)
			break;
		o += (size_t)n;
	}
	if (o > 0 && o + 40 < len)
		snprintf(notice + o, len - o, " (rank variables are set per task)");
}

int dpg_contract_build(const struct dpg_step *s, const struct dpg_task *t,
		       const struct dpg_request *req, dpg_getenv_fn get, void *ctx,
		       struct dpg_env *out, struct dpg_err *err)
{
	int rc = 0;
	int gpus = req->gpus_per_task < 0 ? 0 : req->gpus_per_task;

	memset(out, 0, sizeof(*out));
	/* torchrun's names */
	rc |= dpg_env_add(out, DPG_TORCH_RANK, "%u", t->rank);
	rc |= dpg_env_add(out, DPG_TORCH_LOCAL_RANK, "%u", t->local_rank);
	rc |= dpg_env_add(out, DPG_TORCH_WORLD_SIZE, "%u", s->world_size);
	rc |= dpg_env_add(out, DPG_TORCH_LOCAL_WORLD_SIZE, "%u", t->local_world_size);
	rc |= dpg_env_add(out, DPG_TORCH_NODE_RANK, "%u", t->node_rank);
	rc |= dpg_env_add(out, DPG_TORCH_GROUP_RANK, "%u", t->node_rank);
	rc |= dpg_env_add(out, DPG_TORCH_GROUP_WORLD_SIZE, "%u", s->num_nodes);
	rc |= dpg_env_add(out, DPG_TORCH_ROLE_RANK, "%u", t->rank);
	rc |= dpg_env_add(out, DPG_TORCH_ROLE_WORLD_SIZE, "%u", s->world_size);
	rc |= dpg_env_add(out, DPG_TORCH_ROLE_NAME, "%s", "default");
	rc |= dpg_env_add(out, DPG_TORCH_MASTER_ADDR, "%s", s->master_addr);
	rc |= dpg_env_add(out, DPG_TORCH_MASTER_PORT, "%u", (unsigned)s->master_port);
	/* JAX's: an IPv6 literal goes in brackets before ":port" */
	rc |= dpg_env_add(out, DPG_JAX_COORDINATOR_ADDRESS,
			  strchr(s->master_addr, ':') != NULL ? "[%s]:%u" : "%s:%u",
			  s->master_addr, (unsigned)s->master_port);
	/* dpg's own, read by libdpg */
	rc |= dpg_env_add(out, DPG_VAR_CONTRACT, "%d", DPG_CONTRACT_VARS_VERSION);
	rc |= dpg_env_add(out, DPG_VAR_RANK, "%u", t->rank);
	rc |= dpg_env_add(out, DPG_VAR_WORLD_SIZE, "%u", s->world_size);
	rc |= dpg_env_add(out, DPG_VAR_LOCAL_RANK, "%u", t->local_rank);
	rc |= dpg_env_add(out, DPG_VAR_LOCAL_WORLD_SIZE, "%u", t->local_world_size);
	rc |= dpg_env_add(out, DPG_VAR_NODE_RANK, "%u", t->node_rank);
	rc |= dpg_env_add(out, DPG_VAR_NUM_NODES, "%u", s->num_nodes);
	rc |= dpg_env_add(out, DPG_VAR_MASTER_ADDR, "%s", s->master_addr);
	rc |= dpg_env_add(out, DPG_VAR_MASTER_PORT, "%u", (unsigned)s->master_port);
	rc |= dpg_env_add(out, DPG_VAR_JOB_ID, "%u", s->job_id);
	rc |= dpg_env_add(out, DPG_VAR_STEP_ID, "%u", s->step_id);
	rc |= dpg_env_add(out, DPG_VAR_GPUS_PER_TASK, "%d", gpus);
	if (rc != 0)
		return dpg_errf(err, "internal: environment table overflow");
	if (get != NULL)
		note_overwritten(out, get, ctx, out->notice, sizeof(out->notice));
	return 0;
}

int dpg_contract_describe(const struct dpg_step *s, const struct dpg_task *t,
			  const struct dpg_request *req, char *buf, size_t len)
{
	int n = snprintf(buf, len,
			 "dpg: rank=%u world_size=%u local_rank=%u local_world_size=%u "
			 "node_rank=%u num_nodes=%u node=%s master_addr=%s "
			 "master_port=%u port_source=%s gpus_per_task=%d",
			 t->rank, s->world_size, t->local_rank, t->local_world_size,
			 t->node_rank, s->num_nodes, t->node, s->master_addr,
			 (unsigned)s->master_port, dpg_src_name(s->port_src),
			 req->gpus_per_task < 0 ? 0 : req->gpus_per_task);

	return (n < 0 || (size_t)n >= len) ? -1 : 0;
}
