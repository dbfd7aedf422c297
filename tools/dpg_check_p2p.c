/* SPDX-License-Identifier: BSD-3-Clause */
/* dpg_check_p2p.c - dpg-check's point-to-point test: rank 0 and the first
 * task of every other node, one pair at a time, over libdpg's CPU backend
 * (its public API): latency of a 4-byte allreduce, bandwidth of a broadcast. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dpg.h"
#include "dpg_check.h"
#include "net.h"

#define LAT_ITERS 50
#define BW_BYTES (8u << 20)
#define BW_ITERS 4

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct p2p_result {
	double lat_us, gbps;
};

static dpg_status_t measure(dpg_comm_t *pair, float *buf, struct p2p_result *r)
{
	float one = 1.0f;
	double t;
	dpg_status_t st = dpg_all_reduce(pair, &one, &one, 1, DPG_F32, DPG_SUM, NULL);

	t = now_s();
	for (int i = 0; st == DPG_OK && i < LAT_ITERS; i++)
		st = dpg_all_reduce(pair, &one, &one, 1, DPG_F32, DPG_SUM, NULL);
	r->lat_us = (now_s() - t) * 1e6 / LAT_ITERS;
	if (st == DPG_OK)
		st = dpg_broadcast(pair, buf, BW_BYTES / 4, DPG_F32, 0, NULL);
	t = now_s();
	for (int i = 0; st == DPG_OK && i < BW_ITERS; i++)
		st = dpg_broadcast(pair, buf, BW_BYTES / 4, DPG_F32, 0, NULL);
	if (st == DPG_OK)
		st = dpg_all_reduce(pair, &one, &one, 1, DPG_F32, DPG_SUM, NULL);
	t = now_s() - t;
	r->gbps = (double)BW_BYTES * BW_ITERS / (t > 1e-9 ? t : 1e-9) / 1e9;
	return st;
}

static void net_fail(struct dpg_check_row *rows, int from, int to, const char *what)
{
	for (int i = from; i < to; i++)
		dpg_check_set(&rows[i].cell[DPG_CHECK_NET], DPG_CHECK_FAIL, "failed",
			      "%s: check the firewall and routes between this node and "
			      "rank 0's (TCP, any port)", what);
}

/* The test's world: the first task of each node of go; *me is this
 * task's place in it (-1: not in it), list[] the nodes, *port its store. */
static int parse_go(const struct check_step *s, const char *go, int *list,
		    uint16_t *port, int *me)
{
	char *end;
	int n = 0;

	*port = (uint16_t)strtoul(go, &end, 10);
	*me = -1;
	while (*end == ' ' && n < s->nodes) {
		list[n] = (int)strtol(end + 1, &end, 10);
		if (list[n] == s->node_rank && s->local_rank == 0)
			*me = n;
		n++;
	}
	return n;
}

/* The pair of the test's rank 0 and its rank j (node list[j]); rank 0
 * records the result. */
static dpg_status_t one_pair(dpg_ctx_t *ctx, int me, int j, int node, float *buf,
			     struct dpg_check_row *rows)
{
	bool in = me == 0 || me == j;
	dpg_comm_t *pair = NULL;
	struct p2p_result r = { 0, 0 };
	char v[DPG_CHECK_SHORT_MAX];
	dpg_status_t st = dpg_comm_split(dpg_world(ctx), in ? 0 : -1, me, &pair);

	if (st != DPG_OK || pair == NULL)
		return st;
	st = measure(pair, buf, &r);
	if (me == 0 && st == DPG_OK) {
		snprintf(v, sizeof(v), "%.2fGB/s %.0fus", r.gbps, r.lat_us);
		dpg_check_set(&rows[node].cell[DPG_CHECK_NET], DPG_CHECK_OK, v, "%s", "");
	} else if (me == 0) {
		net_fail(rows, node, node + 1, dpg_last_error(ctx));
	}
	dpg_comm_destroy(pair);
	return st;
}

/* The test's world is not the step's: drop what dpg_init would read of the
 * step (DPG_*, SLURM_*, torchrun's, Open MPI's and PMI's names) so that only
 * the explicit options count (SLURMD_NODENAME, the node's name, stays). */
static void scrub_env(void)
{
	static const char *const prefixes[] = { "DPG_", "SLURM_", "OMPI_", "PMI_", "PMIX_" };
	static const char *const names[] = {
		"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK",
		"GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE",
		"MASTER_ADDR", "MASTER_PORT",
	};
	extern char **environ;
	char name[256];

	for (size_t i = 0; environ[i] != NULL;) {
		size_t n = strcspn(environ[i], "=");
		bool drop = false;

		snprintf(name, sizeof(name), "%.*s", (int)n, environ[i]);
		for (size_t k = 0; k < sizeof(prefixes) / sizeof(prefixes[0]); k++)
			drop = drop || strncmp(name, prefixes[k], strlen(prefixes[k])) == 0;
		for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
			drop = drop || strcmp(name, names[k]) == 0;
		if (drop && n < sizeof(name) && unsetenv(name) == 0)
			continue;	/* environ[i] is the next one now */
		i++;
	}
}

static void init_opts(const struct check_step *s, int me, int n, uint16_t port,
		      dpg_init_opts_t *o)
{
	dpg_init_opts_default(o);
	o->rank = me;
	o->world_size = n;
	o->local_rank = 0;
	o->local_world_size = 1;
	o->master_addr = s->master_addr;
	o->master_port = port;
	o->secret = s->secret;
	o->timeout_s = (double)(s->deadline_ms - dpg_now_ms()) / 1000.0;
	if (o->timeout_s < 1.0)
		o->timeout_s = 1.0;
	o->backend = DPG_BACKEND_CPU;
}

/* Rank 0: the nodes left out of the test (they failed already). */
static void mark_skipped(const struct check_step *s, const int *list, int n,
			 struct dpg_check_row *rows)
{
	for (int i = 0; i < s->nodes; i++) {
		bool in = false;

		for (int k = 0; k < n; k++)
			in = in || list[k] == i;
		if (!in)
			dpg_check_set(&rows[i].cell[DPG_CHECK_NET], DPG_CHECK_NA, "skipped",
				      "%s", "");
	}
	dpg_check_set(&rows[s->node_rank].cell[DPG_CHECK_NET], DPG_CHECK_NA,
		      "rank 0", "%s", "");
}

int check_p2p(const struct check_step *s, const char *go, struct dpg_check_row *rows,
	      struct dpg_err *err)
{
	int *list = calloc((size_t)s->nodes, sizeof(int)), n, me;
	float *buf = calloc(BW_BYTES / 4, sizeof(float));
	dpg_ctx_t *ctx = NULL;
	dpg_init_opts_t o;
	uint16_t port;
	dpg_status_t st = DPG_OK;

	if (list == NULL || buf == NULL) {
		free(list);
		free(buf);
		return dpg_errs(err, DPG_ERR_NOMEM, "out of memory");
	}
	n = parse_go(s, go, list, &port, &me);
	if (s->rank == 0)
		mark_skipped(s, list, port != 0 ? n : 0, rows);
	if (port != 0 && me >= 0 && n > 1) {
		scrub_env();
		init_opts(s, me, n, port, &o);
		st = dpg_init(&o, &ctx);
		for (int j = 1; st == DPG_OK && j < n; j++)
			st = one_pair(ctx, me, j, list[j], buf, rows);
		if (st != DPG_OK && me == 0)
			for (int j = 1; j < n; j++)
				if (rows[list[j]].cell[DPG_CHECK_NET].state == DPG_CHECK_NA)
					net_fail(rows, list[j], list[j] + 1, ctx != NULL ?
						 dpg_last_error(ctx) : dpg_strerror(st));
		if (st != DPG_OK && me != 0)
			dpg_errs(err, st, "point-to-point test: %s", ctx != NULL ?
				 dpg_last_error(ctx) : dpg_strerror(st));
		dpg_finalize(&ctx);
	}
	free(list);
	free(buf);
	return st == DPG_OK || s->rank == 0 ? 0 : -(int)st;
}
