/* SPDX-License-Identifier: BSD-3-Clause */
/* dpg_check_p2p.c - dpg-check's point-to-point test: rank 0 and the first
 * task of every other node, one pair at a time, over libdpg's CPU backend
 * (its public API): latency of a 4-byte allreduce, bandwidth of a broadcast. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpg.h"
#include "dpg_check.h"
#include "net.h"

#define LAT_ITERS 50
#define BW_BYTES (8u << 20)
#define BW_ITERS 4

struct p2p_result {
	double lat_us, gbps;
};

static dpg_status_t measure(dpg_comm_t *pair, float *buf, struct p2p_result *r)
{
	float one = 1.0f;
	int64_t t;
	dpg_status_t st = dpg_all_reduce(pair, &one, &one, 1, DPG_F32, DPG_SUM, NULL);

	t = dpg_now_ms();
	for (int i = 0; st == DPG_OK && i < LAT_ITERS; i++)
		st = dpg_all_reduce(pair, &one, &one, 1, DPG_F32, DPG_SUM, NULL);
	r->lat_us = (double)(dpg_now_ms() - t) * 1000.0 / LAT_ITERS;
	if (st == DPG_OK)
		st = dpg_broadcast(pair, buf, BW_BYTES / 4, DPG_F32, 0, NULL);
	t = dpg_now_ms();
	for (int i = 0; st == DPG_OK && i < BW_ITERS; i++)
		st = dpg_broadcast(pair, buf, BW_BYTES / 4, DPG_F32, 0, NULL);
	if (st == DPG_OK)
		st = dpg_all_reduce(pair, &one, &one, 1, DPG_F32, DPG_SUM, NULL);
	t = dpg_now_ms() - t;
	r->gbps = (double)BW_BYTES * BW_ITERS / ((double)(t > 0 ? t : 1) / 1000.0) / 1e9;
	return st;
}

static void net_fail(struct dpg_check_row *rows, int from, int to, const char *what)
{
	for (int i = from; i < to; i++)
		dpg_check_set(&rows[i].cell[DPG_CHECK_NET], DPG_CHECK_FAIL, "failed",
			      "%s: check the firewall and routes between this node and "
			      "rank 0's (TCP, any port)", what);
}

/* The pair of rank 0 and node i's first task; rank 0 records the result. */
static dpg_status_t one_pair(const struct check_step *s, dpg_ctx_t *ctx, int i,
			     float *buf, struct dpg_check_row *rows)
{
	bool in = s->rank == 0 || (s->node_rank == i && s->local_rank == 0);
	dpg_comm_t *pair = NULL;
	struct p2p_result r = { 0, 0 };
	char v[DPG_CHECK_SHORT_MAX];
	dpg_status_t st = dpg_comm_split(dpg_world(ctx), in ? 0 : -1, s->rank, &pair);

	if (st != DPG_OK || pair == NULL)
		return st;
	st = measure(pair, buf, &r);
	if (s->rank == 0 && st == DPG_OK) {
		snprintf(v, sizeof(v), "%.2fGB/s %.0fus", r.gbps, r.lat_us);
		dpg_check_set(&rows[i].cell[DPG_CHECK_NET], DPG_CHECK_OK, v, "%s", "");
	} else if (s->rank == 0) {
		net_fail(rows, i, i + 1, dpg_last_error(ctx));
	}
	dpg_comm_destroy(pair);
	return st;
}

static void init_opts(const struct check_step *s, uint16_t port, dpg_init_opts_t *o)
{
	dpg_init_opts_default(o);
	o->rank = s->rank;
	o->world_size = s->world;
	o->local_rank = s->local_rank;
	o->local_world_size = s->local_world;
	o->master_addr = s->master_addr;
	o->master_port = port;
	o->secret = s->secret;
	o->timeout_s = (double)(s->deadline_ms - dpg_now_ms()) / 1000.0;
	if (o->timeout_s < 1.0)
		o->timeout_s = 1.0;
	o->backend = DPG_BACKEND_CPU;
}

int check_p2p(const struct check_step *s, uint16_t port, struct dpg_check_row *rows,
	      struct dpg_err *err)
{
	dpg_init_opts_t o;
	dpg_ctx_t *ctx = NULL;
	float *buf = calloc(BW_BYTES / 4, sizeof(float));
	dpg_status_t st;

	if (buf == NULL)
		return dpg_errs(err, DPG_ERR_NOMEM, "out of memory");
	init_opts(s, port, &o);
	st = dpg_init(&o, &ctx);
	for (int i = 1; st == DPG_OK && i < s->nodes; i++)
		st = one_pair(s, ctx, i, buf, rows);
	if (st != DPG_OK) {
		if (s->rank == 0 && rows[s->nodes - 1].cell[DPG_CHECK_NET].state == DPG_CHECK_NA)
			net_fail(rows, 1, s->nodes, ctx != NULL ? dpg_last_error(ctx)
					: dpg_strerror(st));
		else if (s->rank != 0)
			dpg_errs(err, st, "point-to-point test: %s", ctx != NULL ?
				 dpg_last_error(ctx) : dpg_strerror(st));
	}
	if (s->rank == 0)
		dpg_check_set(&rows[s->node_rank].cell[DPG_CHECK_NET], DPG_CHECK_NA,
			      "rank 0", "%s", "");
	dpg_finalize(&ctx);
	free(buf);
	return st == DPG_OK || s->rank == 0 ? 0 : -(int)st;
}
