/* dpg_plan.c - dpg-plan: prints what the plugin would export for a step,
 * one row per task, using the same lib/ code as the plugin. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "contract.h"
#include "hostlist.h"
#include "opts.h"
#include "taskdist.h"

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
"\n"
"Prints what the dpg SPANK plugin exports to each task of a step.  Without\n"
"--nodelist the step is read from SLURM_* variables (inside srun or sbatch).\n"
"SPEC is Slurm's tasks-per-node form, e.g. '2(x3),1'; without it tasks are\n"
"spread evenly.  --conf takes plugstack.conf arguments of the plugin;\n"
"--plugstack reads them from the dpg.so line of a plugstack.conf file.\n");
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
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct dpg_err err;
	int c;

	while ((c = getopt_long(argc, argv, "e:w:n:t:k:m:j:s:g:p:c:P:Jh", longopts,
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
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return 2;
		}
		if (rc == -1 && (c == 'g' || c == 'p' || c == 'c'))
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

static void print_header(const struct dpg_step *s, bool json)
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
	printf("%-6s %-20s %-9s %-10s %-16s %-20s %s\n", "RANK", "NODE", "NODE_RANK",
	       "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT");
}

static void print_task(const struct dpg_task *t, const struct dpg_env *env,
		       bool json, bool first)
{
	if (!json) {
		printf("%-6u %-20s %-9u %-10u %-16u %-20s %s\n", t->rank, t->node,
		       t->node_rank, t->local_rank, t->local_world_size,
		       dpg_env_get(env, "MASTER_ADDR"), dpg_env_get(env, "MASTER_PORT"));
		return;
	}
	printf("%s{\"rank\":%u,\"node\":", first ? "" : ",", t->rank);
	json_str(t->node);
	printf(",\"node_rank\":%u,\"local_rank\":%u,\"local_world_size\":%u,\"env\":{",
	       t->node_rank, t->local_rank, t->local_world_size);
	for (size_t i = 0; i < env->n; i++) {
		printf("%s\"%s\":", i ? "," : "", env->v[i].name);
		json_str(env->v[i].value);
	}
	printf("}}");
}

static int plan(const struct args *a)
{
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
		const char *ps = table_get(&t, "SLURM_DIST_PLANESIZE");
		unsigned long v;

		if (ps == NULL || dpg_parse_ulong(ps, 1, 0xffffffffUL, &v) != 0) {
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
	print_header(&step, a->json);
	for (uint32_t r = 0; r < step.world_size; r++) {
		if (table_setu(&t, "SLURM_PROCID", r) || table_setu(&t, "SLURM_LOCALID", local_of[r]) ||
		    table_setu(&t, "SLURM_NODEID", node_of[r]))
			goto out;
		if (dpg_task_from_env(table_get, &t, &step, &task, &err) != 0 ||
		    dpg_contract_build(&step, &task, &a->req, NULL, NULL, &env, &err) != 0)
			goto fail_msg;
		print_task(&task, &env, a->json, r == 0);
	}
	if (a->json)
		printf("]}\n");
	rc = 0;
	goto out;
fail_msg:
	fprintf(stderr, "dpg-plan: %s\n", err.msg);
out:
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
	return plan(&a);
}
