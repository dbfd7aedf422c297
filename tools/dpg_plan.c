/* SPDX-License-Identifier: BSD-3-Clause */
/* dpg_plan.c - dpg-plan: prints what the plugin would export for a step,
 * one row per task, using the same lib/ code as the plugin. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "bindenv.h"
#include "conf.h"
#include "contract.h"
#include "hostlist.h"
#include "opts.h"
#include "plan.h"
#include "taskdist.h"
#include "topo.h"

#define MAX_TASKS 10000000u
#define TABLE_MAX 32

/* A tiny environment table: what the plugin would read from the task. */
struct table {
	size_t n;
	struct {
		const char *name;
		char value[DPG_ENV_VALUE_MAX];
	} kv[TABLE_MAX];
};

static const char *table_get(void *ctx, const char *name)
{
	struct table *t = ctx;

	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->kv[i].name, name) == 0)
			return t->kv[i].value;
	return NULL;
}

static int table_set(struct table *t, const char *name, const char *value)
{
	size_t i;

	for (i = 0; i < t->n && strcmp(t->kv[i].name, name) != 0; i++)
		;
	if (i == TABLE_MAX || strlen(value) >= sizeof(t->kv[i].value)) {
		fprintf(stderr, "dpg-plan: value of %s is too long\n", name);
		return -1;
	}
	t->kv[i].name = name;
	snprintf(t->kv[i].value, sizeof(t->kv[i].value), "%s", value);
	if (i == t->n)
		t->n++;
	return 0;
}

static int table_setu(struct table *t, const char *name, unsigned long v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%lu", v);
	return table_set(t, name, buf);
}

struct args {
	const char *expand, *nodelist, *tpn, *dist, *plugstack;
	const char *topology, *alloc_gpus, *alloc_cpus;
	char host[64];
	unsigned long ntasks, per_node, job_id, step_id;
	bool have_ntasks, have_per_node, json;
	struct dpg_conf conf;
	struct dpg_request req;
};

static void usage(FILE *f)
{
	fprintf(f,
"usage: dpg-plan --expand NODELIST\n"
"       dpg-plan [--nodelist NODELIST --ntasks N] [--tasks-per-node SPEC |\n"
"                --ntasks-per-node K] [--distribution block|cyclic|plane=N]\n"
"                [--job-id J] [--step-id S] [--gpus-per-task G] [--port P]\n"
"                [--conf KEY=VALUE]... [--plugstack FILE] [--json]\n"
"                [--topology FILE.xml [--gpus LIST] [--cpus LIST]\n"
"                 [--bind closest|none] [--gpu-visibility isolate|ordered]]\n"
"\n"
"Prints what the dpg SPANK plugin exports to each task of a step.  Without\n"
"--nodelist the step is read from SLURM_* variables (inside srun or sbatch).\n"
"SPEC is Slurm's tasks-per-node form, e.g. '2(x3),1'; without it tasks are\n"
"spread evenly.  --conf takes plugstack.conf arguments of the plugin;\n"
"--plugstack reads them from the dpg.so line of a plugstack.conf file.\n"
"--topology adds each task's GPUs, NICs and CPUs as the plugin binds them on\n"
"a node with that hwloc XML topology (alone: one node with --tasks-per-node N\n"
"tasks); --gpus/--cpus are what Slurm allocated there (default: all).\n");
}

/* Apply the arguments of the dpg.so line of a plugstack.conf file. */
static int read_plugstack(const char *path, struct dpg_conf *conf)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	int found = 0, rc = 0;

	if (f == NULL) {
		perror(path);
		return -1;
	}
	while (rc == 0 && fgets(line, sizeof(line), f) != NULL) {
		char *save = NULL, *kw = strtok_r(line, " \t\r\n", &save);
		char *so = kw ? strtok_r(NULL, " \t\r\n", &save) : NULL;
		const char *base;
		struct dpg_err err;

		if (kw == NULL || kw[0] == '#' || so == NULL ||
		    (strcmp(kw, "required") != 0 && strcmp(kw, "optional") != 0))
			continue;
		base = strrchr(so, '/') ? strrchr(so, '/') + 1 : so;
		if (strcmp(base, "dpg.so") != 0)
			continue;
		found = 1;
		for (char *a; rc == 0 && (a = strtok_r(NULL, " \t\r\n", &save)) != NULL;)
			if (dpg_conf_parse_arg(conf, a, &err) != 0) {
				fprintf(stderr, "dpg-plan: %s: %s\n", path, err.msg);
				rc = -1;
			}
	}
	fclose(f);
	if (rc == 0 && !found) {
		fprintf(stderr, "dpg-plan: %s has no 'required|optional .../dpg.so' line\n", path);
		rc = -1;
	}
	return rc;
}

static int num_arg(const char *opt, const char *v, unsigned long lo,
		   unsigned long hi, unsigned long *out)
{
	if (dpg_parse_ulong(v, lo, hi, out) == 0)
		return 0;
	fprintf(stderr, "dpg-plan: invalid %s '%s': expected an integer %lu-%lu\n",
		opt, v, lo, hi);
	return -1;
}

static int parse_args(int argc, char **argv, struct args *a)
{
	static const struct option longopts[] = {
		{ "expand", required_argument, NULL, 'e' },
		{ "nodelist", required_argument, NULL, 'w' },
		{ "ntasks", required_argument, NULL, 'n' },
		{ "tasks-per-node", required_argument, NULL, 't' },
		{ "ntasks-per-node", required_argument, NULL, 'k' },
		{ "distribution", required_argument, NULL, 'm' },
		{ "job-id", required_argument, NULL, 'j' },
		{ "step-id", required_argument, NULL, 's' },
		{ "gpus-per-task", required_argument, NULL, 'g' },
		{ "port", required_argument, NULL, 'p' },
		{ "conf", required_argument, NULL, 'c' },
		{ "plugstack", required_argument, NULL, 'P' },
		{ "json", no_argument, NULL, 'J' },
		{ "topology", required_argument, NULL, 'T' },
		{ "gpus", required_argument, NULL, 'G' },
		{ "cpus", required_argument, NULL, 'C' },
		{ "bind", required_argument, NULL, 'b' },
		{ "gpu-visibility", required_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct dpg_err err;
	int c;

	while ((c = getopt_long(argc, argv, "e:w:n:t:k:m:j:s:g:p:c:P:JhT:G:C:b:v:", longopts,
				NULL)) != -1) {
		int rc = 0;

		switch (c) {
		case 'e': a->expand = optarg; break;
		case 'w': a->nodelist = optarg; break;
		case 'n': rc = num_arg("--ntasks", optarg, 1, MAX_TASKS, &a->ntasks);
			  a->have_ntasks = true; break;
		case 't': a->tpn = optarg; break;
		case 'k': rc = num_arg("--ntasks-per-node", optarg, 1, 100000, &a->per_node);
			  a->have_per_node = true; break;
		case 'm': a->dist = optarg; break;
		case 'j': rc = num_arg("--job-id", optarg, 1, 0xfffffff0UL, &a->job_id); break;
		case 's': rc = num_arg("--step-id", optarg, 0, 0xfffffff0UL, &a->step_id); break;
		case 'g':
			rc = dpg_opt_gpus_per_task(optarg, &a->req.gpus_per_task, &err);
			break;
		case 'p': rc = dpg_opt_port(optarg, &a->req.port, &err); break;
		case 'c': rc = dpg_conf_parse_arg(&a->conf, optarg, &err); break;
		case 'P': rc = read_plugstack(optarg, &a->conf) != 0 ? 1 : 0; break;
		case 'J': a->json = true; break;
		case 'T': a->topology = optarg; break;
		case 'G': a->alloc_gpus = optarg; break;
		case 'C': a->alloc_cpus = optarg; break;
		case 'b': {
			enum dpg_bind b;

			rc = dpg_bind_parse(optarg, &b, &err);
			a->req.bind = (int)b;
			break;
		}
		case 'v': {
			enum dpg_gpu_visibility v;

			rc = dpg_gpu_visibility_parse(optarg, &v, &err);
			a->req.visibility = (int)v;
			break;
		}
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return 2;
		}
		if (rc == -1 && strchr("gpcbv", c) != NULL)
			fprintf(stderr, "dpg-plan: %s\n", err.msg);
		if (rc != 0)
			return 2;
	}
	if (optind != argc) {
		fprintf(stderr, "dpg-plan: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	return 0;
}

static int do_expand(const char *expr)
{
	struct dpg_hostlist hl;
	struct dpg_err err;

	if (dpg_hostlist_expand(expr, DPG_HOSTLIST_DEFAULT_MAX, &hl, &err) != 0) {
		fprintf(stderr, "dpg-plan: %s\n", err.msg);
		return 1;
	}
	for (size_t i = 0; i < hl.count; i++)
		puts(hl.names[i]);
	dpg_hostlist_free(&hl);
	return 0;
}

/* First of several variable names that is set in the real environment. */
static const char *env_first(const char *a, const char *b, const char *c)
{
	const char *v = getenv(a);

	if ((v == NULL || *v == '\0') && b != NULL)
		v = getenv(b);
	if ((v == NULL || *v == '\0') && c != NULL)
		v = getenv(c);
	return (v != NULL && *v != '\0') ? v : NULL;
}

/* Even spread "q+1" on the first r nodes, "q" on the rest, as a tpn spec. */
static int even_tpn(unsigned long ntasks, size_t nnodes, char *buf, size_t len)
{
	unsigned long q = ntasks / nnodes, r = ntasks % nnodes;
	int n;

	if (q == 0)
		return -1;
	if (r == 0)
		n = snprintf(buf, len, "%lu(x%zu)", q, nnodes);
	else
		n = snprintf(buf, len, "%lu(x%lu),%lu(x%lu)", q + 1, r, q,
			     (unsigned long)nnodes - r);
	return (n < 0 || (size_t)n >= len) ? -1 : 0;
}

/* Describe the step in the table, from the arguments or the environment. */
static int build_step_table(const struct args *a, struct table *t)
{
	struct dpg_err err;
	size_t nnodes;
	char tpn[64];
	const char *v;

	if (a->nodelist == NULL && a->topology != NULL &&
	    env_first("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST") == NULL) {
		struct args one = *a;

		/* a node described only by its topology */
		one.nodelist = a->host;
		return build_step_table(&one, t);
	}
	if (a->nodelist == NULL) {
		static const char *const copy[] = {
			"MASTER_ADDR", "MASTER_PORT", "DPG_MASTER_ADDR",
			"DPG_MASTER_PORT", "SLURM_DISTRIBUTION",
			"SLURM_DIST_PLANESIZE", "SLURM_STEP_RESV_PORTS",
			"SLURM_HET_SIZE", "SLURM_PACK_SIZE",
		};
		const char *nl = env_first("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST");
		const char *nt = env_first("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", NULL);
		const char *nn = env_first("SLURM_STEP_NUM_NODES", "SLURM_JOB_NUM_NODES", "SLURM_NNODES");
		const char *tp = env_first("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", NULL);
		const char *job = env_first("SLURM_JOB_ID", "SLURM_JOBID", NULL);
		const char *stp = env_first("SLURM_STEP_ID", "SLURM_STEPID", NULL);

		if (nl == NULL || nt == NULL || nn == NULL || tp == NULL || job == NULL) {
			fprintf(stderr, "dpg-plan: no step described: pass --nodelist "
				"and --ntasks, or run inside srun/sbatch (SLURM_*_NODELIST, "
				"SLURM_*NTASKS, SLURM_*TASKS_PER_NODE, SLURM_JOB_ID)\n");
			return -1;
		}
		if (table_set(t, "SLURM_STEP_NODELIST", nl) || table_set(t, "SLURM_STEP_NUM_TASKS", nt) ||
		    table_set(t, "SLURM_STEP_NUM_NODES", nn) || table_set(t, "SLURM_STEP_TASKS_PER_NODE", tp) ||
		    table_set(t, "SLURM_JOB_ID", job) || table_set(t, "SLURM_STEP_ID", stp ? stp : "0"))
			return -1;
		for (size_t i = 0; i < sizeof(copy) / sizeof(copy[0]); i++)
			if ((v = getenv(copy[i])) != NULL && table_set(t, copy[i], v) != 0)
				return -1;
		if (a->dist != NULL && table_set(t, "SLURM_DISTRIBUTION", a->dist) != 0)
			return -1;
		return 0;
	}
	if (dpg_hostlist_count(a->nodelist, DPG_HOSTLIST_DEFAULT_MAX, &nnodes, &err) != 0) {
		fprintf(stderr, "dpg-plan: --nodelist: %s\n", err.msg);
		return -1;
	}
	if (a->tpn != NULL) {
		if (table_set(t, "SLURM_STEP_TASKS_PER_NODE", a->tpn) != 0)
			return -1;
	} else {
		unsigned long ntasks = a->have_per_node ? a->per_node * nnodes : a->ntasks;

		if (!a->have_ntasks && !a->have_per_node) {
			fprintf(stderr, "dpg-plan: --nodelist needs --ntasks, "
				"--ntasks-per-node or --tasks-per-node\n");
			return -1;
		}
		if (even_tpn(ntasks, nnodes, tpn, sizeof(tpn)) != 0) {
			fprintf(stderr, "dpg-plan: %lu tasks cannot cover %zu nodes\n",
				ntasks, nnodes);
			return -1;
		}
		if (table_set(t, "SLURM_STEP_TASKS_PER_NODE", tpn) != 0)
			return -1;
	}
	if (!a->have_ntasks) {
		/* derive the count from the per-node spec */
		uint32_t *counts = calloc(nnodes, sizeof(*counts));
		size_t n = 0;
		unsigned long sum = 0;

		if (counts == NULL)
			return -1;
		if (dpg_tpn_parse(table_get(t, "SLURM_STEP_TASKS_PER_NODE"), counts,
				  nnodes, &n, &err) != 0) {
			fprintf(stderr, "dpg-plan: --tasks-per-node: %s\n", err.msg);
			free(counts);
			return -1;
		}
		for (size_t i = 0; i < n; i++)
			sum += counts[i];
		free(counts);
		if (table_setu(t, "SLURM_STEP_NUM_TASKS", sum) != 0)
			return -1;
	} else if (table_setu(t, "SLURM_STEP_NUM_TASKS", a->ntasks) != 0) {
		return -1;
	}
	if (table_set(t, "SLURM_STEP_NODELIST", a->nodelist) != 0 ||
	    table_setu(t, "SLURM_STEP_NUM_NODES", nnodes) != 0 ||
	    table_setu(t, "SLURM_JOB_ID", a->job_id) != 0 ||
	    table_setu(t, "SLURM_STEP_ID", a->step_id) != 0)
		return -1;
	if (a->dist != NULL && table_set(t, "SLURM_DISTRIBUTION", a->dist) != 0)
		return -1;
	return 0;
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

/* A comma-separated string as a JSON array of strings. */
static void json_list(const char *s)
{
	putchar('[');
	while (s != NULL && *s != '\0') {
		const char *e = strchr(s, ',');
		size_t n = e ? (size_t)(e - s) : strlen(s);

		printf("\"%.*s\"%s", (int)n, s, e ? "," : "");
		s = e ? e + 1 : NULL;
	}
	putchar(']');
}

static void print_header(const struct dpg_step *s, bool json, bool binding)
{
	if (json) {
		printf("{\"job_id\":%u,\"step_id\":%u,\"world_size\":%u,\"num_nodes\":%u,"
		       "\"nodelist\":", s->job_id, s->step_id, s->world_size, s->num_nodes);
		json_str(s->nodelist);
		printf(",\"master_addr\":");
		json_str(s->master_addr);
		printf(",\"master_port\":%u,\"port_source\":\"%s\",\"tasks\":[",
		       (unsigned)s->master_port, dpg_src_name(s->port_src));
		return;
	}
	printf("# job %u step %u: %u tasks on %u nodes (%s); MASTER_ADDR=%s "
	       "MASTER_PORT=%u (%s)\n", s->job_id, s->step_id, s->world_size,
	       s->num_nodes, s->nodelist, s->master_addr, (unsigned)s->master_port,
	       dpg_src_name(s->port_src));
	printf("%-6s %-20s %-9s %-10s %-16s %-20s %-11s", "RANK", "NODE", "NODE_RANK",
	       "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT");
	if (binding)
		printf(" %-9s %-4s %-14s %-12s %s", "VISIBLE", "NUMA", "CPUS", "NICS", "GPUS");
	putchar('\n');
}

/* The task's visible-device string as the plugin exports it. */
static const char *visible_of(const struct dpg_env *env)
{
	const char *v = dpg_env_get(env, "CUDA_VISIBLE_DEVICES");

	if (v == NULL)
		v = dpg_env_get(env, "ROCR_VISIBLE_DEVICES");
	return v != NULL ? v : "";
}

static void print_task(const struct dpg_task *t, const struct dpg_env *env,
		       const struct dpg_plan_task *b, bool json, bool first)
{
	if (!json) {
		printf("%-6u %-20s %-9u %-10u %-16u %-20s %-11s", t->rank, t->node,
		       t->node_rank, t->local_rank, t->local_world_size,
		       dpg_env_get(env, "MASTER_ADDR"), dpg_env_get(env, "MASTER_PORT"));
		if (b != NULL)
			printf(" %-9s %-4d %-14s %-12s %s", visible_of(env)[0] ? visible_of(env) : "-",
			       b->numa, b->cpus, b->nics[0] ? b->nics : "-",
			       b->gpus[0] ? b->gpus : "-");
		putchar('\n');
		return;
	}
	printf("%s{\"rank\":%u,\"node\":", first ? "" : ",", t->rank);
	json_str(t->node);
	printf(",\"node_rank\":%u,\"local_rank\":%u,\"local_world_size\":%u,",
	       t->node_rank, t->local_rank, t->local_world_size);
	if (b != NULL) {
		printf("\"gpus\":");
		json_list(b->gpus);
		printf(",\"visible\":");
		json_str(visible_of(env));
		printf(",\"nics\":");
		json_list(b->nics);
		printf(",\"cpus\":");
		json_str(b->cpus);
		printf(",\"numa\":%d,", b->numa);
	}
	printf("\"env\":{");
	for (size_t i = 0; i < env->n; i++) {
		printf("%s\"%s\":", i ? "," : "", env->v[i].name);
		json_str(env->v[i].value);
	}
	printf("}}");
}

#define PLAN_CACHE 16

/* Node plans by local task count: nodes with the same count plan alike. */
struct plans {
	struct dpg_topo *topo;
	size_t n;
	struct {
		uint32_t ntasks;
		struct dpg_plan *plan;
	} c[PLAN_CACHE];
};

static void plans_free(struct plans *ps)
{
	for (size_t i = 0; i < ps->n; i++)
		dpg_plan_free(ps->c[i].plan);
	dpg_topo_free(ps->topo);
	memset(ps, 0, sizeof(*ps));
}

static struct dpg_plan *plan_for(struct plans *ps, const struct args *a,
				 uint32_t ntasks, struct dpg_err *err)
{
	struct dpg_plan_req req = {
		.ntasks = ntasks,
		.gpus_per_task = (uint32_t)(a->req.gpus_per_task < 0 ? 0 : a->req.gpus_per_task),
		.gpus = a->alloc_gpus,
		.cpus = a->alloc_cpus,
		.policy = { .bind = (enum dpg_bind)a->req.bind,
			    .allow_gpu_sharing = a->conf.gpu_sharing },
	};
	struct dpg_plan *p;
	size_t slot;

	for (size_t i = 0; i < ps->n; i++)
		if (ps->c[i].ntasks == ntasks)
			return ps->c[i].plan;
	if (dpg_plan_make(ps->topo, &req, &p, err) != 0)
		return NULL;
	slot = ps->n < PLAN_CACHE ? ps->n++ : PLAN_CACHE - 1;
	if (slot == PLAN_CACHE - 1 && ps->c[slot].plan != NULL)
		dpg_plan_free(ps->c[slot].plan);
	ps->c[slot].ntasks = ntasks;
	ps->c[slot].plan = p;
	return p;
}

static int plan(const struct args *a)
{
	static struct plans ps;
	struct dpg_bind_req breq = {
		.visibility = (enum dpg_gpu_visibility)a->req.visibility,
	};
	static struct table t;	/* large: keep it off the stack */
	static struct dpg_env env;
	struct dpg_step step;
	struct dpg_task task;
	struct dpg_err err;
	enum dpg_dist dist = DPG_DIST_BLOCK;
	uint32_t plane = 0, *counts = NULL, *node_of = NULL, *local_of = NULL;
	size_t n = 0;
	int rc = 1;

	if (build_step_table(a, &t) != 0)
		return 1;
	if (dpg_step_from_env(table_get, &t, &a->conf, &a->req, &step, &err) != 0)
		goto fail_msg;
	if (table_get(&t, "SLURM_DISTRIBUTION") != NULL &&
	    dpg_dist_parse(table_get(&t, "SLURM_DISTRIBUTION"), &dist, &plane, &err) != 0)
		goto fail_msg;
	if (dist == DPG_DIST_PLANE && plane == 0) {
		/* srun exports "plane" and the size separately */
		const char *psz = table_get(&t, "SLURM_DIST_PLANESIZE");
		unsigned long v;

		if (psz == NULL || dpg_parse_ulong(psz, 1, 0xffffffffUL, &v) != 0) {
			fprintf(stderr, "dpg-plan: plane distribution without a size: "
				"use --distribution plane=N\n");
			goto out;
		}
		plane = (uint32_t)v;
	}
	counts = calloc(step.num_nodes, sizeof(*counts));
	node_of = calloc(step.world_size, sizeof(*node_of));
	local_of = calloc(step.world_size, sizeof(*local_of));
	if (counts == NULL || node_of == NULL || local_of == NULL) {
		fprintf(stderr, "dpg-plan: out of memory for %u tasks\n", step.world_size);
		goto out;
	}
	if (dpg_tpn_parse(table_get(&t, "SLURM_STEP_TASKS_PER_NODE"), counts,
			  step.num_nodes, &n, &err) != 0 ||
	    dpg_layout(counts, n, dist, plane, node_of, local_of, step.world_size,
		       &err) != 0)
		goto fail_msg;
	if (a->topology != NULL && dpg_topo_load_xml(a->topology, &ps.topo, &err) != 0)
		goto fail_msg;
	/* plan every distinct node shape before printing anything */
	for (uint32_t i = 0; ps.topo != NULL && i < n; i++)
		if (plan_for(&ps, a, counts[i], &err) == NULL)
			goto fail_msg;
	print_header(&step, a->json, ps.topo != NULL);
	for (uint32_t r = 0; r < step.world_size; r++) {
		struct dpg_plan *np = NULL;

		if (table_setu(&t, "SLURM_PROCID", r) || table_setu(&t, "SLURM_LOCALID", local_of[r]) ||
		    table_setu(&t, "SLURM_NODEID", node_of[r]))
			goto out;
		if (dpg_task_from_env(table_get, &t, &step, &task, &err) != 0 ||
		    dpg_contract_build(&step, &task, &a->req, NULL, NULL, &env, &err) != 0)
			goto fail_msg;
		if (ps.topo != NULL &&
		    ((np = plan_for(&ps, a, task.local_world_size, &err)) == NULL ||
		     dpg_bind_env(np, task.local_rank, &breq, NULL, NULL, &env, &err) != 0))
			goto fail_msg;
		print_task(&task, &env, np ? &np->tasks[task.local_rank] : NULL, a->json, r == 0);
	}
	if (a->json)
		printf("]}\n");
	rc = 0;
	goto out;
fail_msg:
	fprintf(stderr, "dpg-plan: %s\n", err.msg);
out:
	plans_free(&ps);
	free(counts);
	free(node_of);
	free(local_of);
	return rc;
}

int main(int argc, char **argv)
{
	struct args a = { .job_id = 1 };
	int rc;

	dpg_conf_init(&a.conf);
	dpg_request_init(&a.req);
	if ((rc = parse_args(argc, argv, &a)) != 0)
		return rc;
	if (a.expand != NULL)
		return do_expand(a.expand);
	if (a.req.gpus_per_task < 0 && a.conf.default_gpus_per_task >= 0)
		a.req.gpus_per_task = a.conf.default_gpus_per_task;
	if (a.req.bind < 0)
		a.req.bind = (int)a.conf.bind;
	if (a.req.visibility < 0)
		a.req.visibility = (int)a.conf.visibility;
	if (a.topology == NULL && a.conf.topology_xml[0] != '\0')
		a.topology = a.conf.topology_xml;
	if (gethostname(a.host, sizeof(a.host)) != 0 || a.host[0] == '\0')
		snprintf(a.host, sizeof(a.host), "localhost");
	a.host[strcspn(a.host, ".")] = '\0';
	return plan(&a);
}
