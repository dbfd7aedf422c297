/* SPDX-License-Identifier: BSD-3-Clause */
/* coll.c - the collectives of the public API: one call descriptor, one
 * argument check, one dispatch to the backend, each failure recorded once;
 * and dpg_all_gather_bytes on top of them (or of the store, on NCCL). */

#include "comm.h"
#include "clock.h"
#include "ctx.h"
#include "runtime.h"
#include "store.h"	/* DPG_STORE_VALUE_MAX, DPG_STORE_KEY_MAX */
#include "xchg.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum coll_kind {
	COLL_ALL_REDUCE,
	COLL_REDUCE_SCATTER,
	COLL_ALL_GATHER,
	COLL_BROADCAST,
	COLL_BARRIER,
};

/* One collective call, as the public function got it (broadcast: recv is
 * the buffer; count is per rank for reduce_scatter and all_gather). */
struct coll_call {
	const char *name;	/* in messages: "allreduce", "broadcast", ... */
	enum coll_kind kind;
	const void *send;
	void *recv;
	size_t count;
	dpg_dtype_t dtype;
	dpg_op_t op;
	int root;
	void *stream;
};

/* ------------------------------------------------------------ check, run */

/* n elements of dt times k fit in size_t. */
static bool fits(size_t n, dpg_dtype_t dt, size_t k)
{
	size_t b = dpg_dtype_size(dt);

	return k == 0 || b == 0 || n <= SIZE_MAX / b / k;
}

static bool is_reduction(enum coll_kind k)
{
	return k == COLL_ALL_REDUCE || k == COLL_REDUCE_SCATTER;
}

/* Every argument check of the collectives: 0, or -DPG_ERR_INVALID with
 * "invalid argument: why" in e. */
static int coll_check(const dpg_comm_t *c, const struct coll_call *a,
		      struct dpg_err *e)
{
	const char *inv = "invalid argument";
	bool per_rank = a->kind == COLL_REDUCE_SCATTER || a->kind == COLL_ALL_GATHER;

	if (a->kind == COLL_BARRIER)
		return 0;
	if (dpg_dtype_size(a->dtype) == 0)
		return dpg_errf(e, "%s: unknown dtype %d", inv, (int)a->dtype);
	if (is_reduction(a->kind) && ((int)a->op < 0 || (int)a->op > (int)DPG_MAX))
		return dpg_errf(e, "%s: unknown reduction op %d", inv, (int)a->op);
	if (a->kind == COLL_BROADCAST && (a->root < 0 || a->root >= c->size))
		return dpg_errf(e, "%s: root %d is not a rank of the %d of %s", inv,
				a->root, c->size, c->name);
	if (a->count > 0 && (a->send == NULL || a->recv == NULL))
		return dpg_errf(e, "%s: NULL buffer for %zu elements", inv, a->count);
	if (!per_rank && !fits(a->count, a->dtype, 1))
		return dpg_errf(e, "%s: count %zu overflows", inv, a->count);
	if (per_rank && !fits(a->count, a->dtype, (size_t)c->size))
		return dpg_errf(e, "%s: %s %zu x %d ranks overflows", inv,
				a->kind == COLL_ALL_GATHER ? "sendcount" : "recvcount",
				a->count, c->size);
	return 0;
}

/* The backend's operation for the call. */
static int coll_dispatch(dpg_comm_t *c, const struct coll_call *a,
			 struct dpg_err *e)
{
	switch (a->kind) {
	case COLL_ALL_REDUCE:
		return c->ops->allreduce(c, a->send, a->recv, a->count, a->dtype,
					 a->op, a->stream, e);
	case COLL_REDUCE_SCATTER:
		return c->ops->reduce_scatter(c, a->send, a->recv, a->count,
					      a->dtype, a->op, a->stream, e);
	case COLL_ALL_GATHER:
		return c->ops->all_gather(c, a->send, a->recv, a->count, a->dtype,
					  a->stream, e);
	case COLL_BROADCAST:
		return c->ops->broadcast(c, a->recv, a->count, a->dtype, a->root,
					 a->stream, e);
	case COLL_BARRIER:
		return c->ops->barrier(c, e);
	}
	return dpg_errs(e, DPG_ERR_SYSTEM, "internal: unknown collective %d",
			(int)a->kind);
}

/* A timeout's message goes on with what every rank was doing (hang.h). */
static dpg_status_t coll_hang(dpg_comm_t *c, dpg_status_t st)
{
	struct dpg_ctx *ctx = c->ctx;
	char line[DPG_HANG_LINE_MAX];
	size_t used = strlen(ctx->err);

	dpg_hang_report(ctx, c->name, line, sizeof(line));
	if (line[0] != '\0' && used < sizeof(ctx->err))
		snprintf(ctx->err + used, sizeof(ctx->err) - used, "; the ranks: %s", line);
	return st;
}

/* The startup line's backend word (startup.h). */
static const char *backend_name(const struct dpg_ctx *ctx)
{
	if (ctx->backend == DPG_BACKEND_NCCL)
		return "nccl";
	if (ctx->j.world_size <= 1)
		return "self";
	if (ctx->j.num_nodes <= 1)
		return "shm";
	return ctx->j.local_world_size > 1 ? "shm+tcp" : "tcp";
}

/* The first collective of this context is over: with DPG_VERBOSE, rank 0 and
 * every node leader print the startup line. */
static void startup_done(struct dpg_ctx *ctx, const char *kind, int64_t t0_ns)
{
	struct dpg_startup *s = &ctx->startup;
	char line[DPG_ERR_MSG_MAX];

	s->done = true;
	s->first_ms = dpg_startup_ms(t0_ns, dpg_now_ns());
	snprintf(s->first_kind, sizeof(s->first_kind), "%s", kind);
	if (!s->verbose || (ctx->j.rank != 0 && ctx->j.local_rank > 0))
		return;
	if (dpg_startup_format(s, ctx->j.rank, ctx->node, backend_name(ctx), line,
			       sizeof(line)) == 0) {
		fprintf(stderr, "%s\n", line);
		fflush(stderr);
	}
}

/* Run a checked call: its sequence number, the record of it (track.h), the
 * backend, the failure. */
static dpg_status_t coll_run(dpg_comm_t *c, const struct coll_call *a)
{
	struct dpg_err e = { { 0 } };
	uint64_t seq = c->seq;
	int64_t t_start = c->ctx->startup.done ? 0 : dpg_now_ns();
	int64_t t0 = dpg_track_enter(&c->ctx->track, c->name, a->name, seq, a->count);
	int rc = coll_dispatch(c, a, &e);
	dpg_status_t st;

	dpg_track_leave(&c->ctx->track, t0, rc);
	if (rc == 0 && !c->ctx->startup.done)
		startup_done(c->ctx, a->name, t_start);
	c->seq++;
	if (rc == 0)
		return DPG_OK;
	if (dpg_status_of(rc) != DPG_ERR_INVALID)
		c->ctx->failed = true;
	st = dpg_comm_fail(c, rc, a->name, (int64_t)seq, &e);
	return st == DPG_ERR_TIMEOUT ? coll_hang(c, st) : st;
}

/* A call that failed its argument checks still takes its sequence number:
 * the peers that issued it correctly then meet this rank's next call as a
 * mismatch (the CPU backend compares the numbers) instead of pairing with
 * it.  The failure message names the number too. */
static dpg_status_t coll_refuse(dpg_comm_t *c, int rc, const char *name,
				const struct dpg_err *e)
{
	uint64_t seq = c->seq++;

	return dpg_comm_fail(c, rc, name, (int64_t)seq, e);
}

/* Like NCCL's enqueue check: the comm, the abort flag, the arguments, then
 * the run. */
static dpg_status_t coll_enqueue(dpg_comm_t *c, const struct coll_call *a)
{
	struct dpg_err e = { { 0 } };
	int rc;

	if (!dpg_comm_ok(c))
		return DPG_ERR_INVALID;
	if ((rc = dpg_comm_enter(c, &e)) != 0)
		return dpg_comm_fail(c, rc, a->name, (int64_t)c->seq, &e);
	if ((rc = coll_check(c, a, &e)) != 0)
		return coll_refuse(c, rc, a->name, &e);
	return coll_run(c, a);
}

/* ------------------------------------------------------------ the API */

dpg_status_t dpg_all_reduce(dpg_comm_t *comm, const void *send, void *recv,
			    size_t count, dpg_dtype_t dtype, dpg_op_t op,
			    void *stream)
{
	struct coll_call a = {
		.name = "allreduce", .kind = COLL_ALL_REDUCE, .send = send,
		.recv = recv, .count = count, .dtype = dtype, .op = op,
		.stream = stream,
	};

	return coll_enqueue(comm, &a);
}

/* The name of releases before 0.x, kept for compatibility. */
dpg_status_t dpg_allreduce(dpg_comm_t *comm, const void *send, void *recv,
			   size_t count, dpg_dtype_t dtype, dpg_op_t op,
			   void *stream)
{
	return dpg_all_reduce(comm, send, recv, count, dtype, op, stream);
}

dpg_status_t dpg_reduce_scatter(dpg_comm_t *comm, const void *send, void *recv,
				size_t recvcount, dpg_dtype_t dtype, dpg_op_t op,
				void *stream)
{
	struct coll_call a = {
		.name = "reduce_scatter", .kind = COLL_REDUCE_SCATTER,
		.send = send, .recv = recv, .count = recvcount, .dtype = dtype,
		.op = op, .stream = stream,
	};

	return coll_enqueue(comm, &a);
}

dpg_status_t dpg_all_gather(dpg_comm_t *comm, const void *send, void *recv,
			    size_t sendcount, dpg_dtype_t dtype, void *stream)
{
	struct coll_call a = {
		.name = "all_gather", .kind = COLL_ALL_GATHER, .send = send,
		.recv = recv, .count = sendcount, .dtype = dtype, .stream = stream,
	};

	return coll_enqueue(comm, &a);
}

dpg_status_t dpg_broadcast(dpg_comm_t *comm, void *buf, size_t count,
			   dpg_dtype_t dtype, int root, void *stream)
{
	struct coll_call a = {
		.name = "broadcast", .kind = COLL_BROADCAST, .send = buf,
		.recv = buf, .count = count, .dtype = dtype, .root = root,
		.stream = stream,
	};

	return coll_enqueue(comm, &a);
}

dpg_status_t dpg_barrier(dpg_comm_t *comm)
{
	struct coll_call a = { .name = "barrier", .kind = COLL_BARRIER };

	return coll_enqueue(comm, &a);
}

/* ------------------------------------------------------------ all_gather_bytes */

/* The result being built: rank r's bytes are res + offs[r], ls[r] long. */
struct agb {
	uint8_t *res;
	size_t *offs, *ls;
	size_t total;
};

static void agb_free(struct agb *g)
{
	free(g->res);
	free(g->offs);
	free(g->ls);
}

static int agb_alloc_res(struct agb *g, struct dpg_err *e)
{
	g->res = malloc(g->total > 0 ? g->total : 1);
	return g->res == NULL ? dpg_errs(e, DPG_ERR_NOMEM, "out of memory") : 0;
}

/* NCCL buffers live on the GPU: gather host bytes via the store. */
static int agb_store(dpg_comm_t *comm, const void *buf, size_t len,
		     struct agb *g, struct dpg_err *e)
{
	struct dpg_ctx *ctx = comm->ctx;
	char prefix[DPG_STORE_KEY_MAX + 1];
	struct dpg_xchg x;
	struct dpg_xchg_group grp = {
		.store = ctx->store, .prefix = prefix, .me = comm->rank,
		.n = comm->size, .world_ranks = comm->world_ranks,
		.timeout_ms = ctx->timeout_ms,
	};
	int rc;

	snprintf(prefix, sizeof(prefix), "%s/c/%s/agb/%" PRIu64, ctx->ns,
		 comm->name, dpg_rt_comm(comm)->nxchg++);
	if (len > DPG_STORE_VALUE_MAX)
		return dpg_errf(e, "invalid argument: %zu bytes: over the %u bytes "
				"a store exchange carries (NCCL communicators gather "
				"bytes through the store)", len,
				(unsigned)DPG_STORE_VALUE_MAX);
	rc = dpg_xchg_run(&grp, buf, len, NULL, NULL, &x, e);
	if (rc != 0) {
		ctx->failed = true;
		dpg_xchg_free(&x);
		return rc;
	}
	for (int r = 0; r < comm->size; r++)
		g->total += x.vlen[r];
	rc = agb_alloc_res(g, e);
	for (int r = 0; rc == 0 && r < comm->size; r++) {
		g->ls[r] = x.vlen[r];
		g->offs[r] = r == 0 ? 0 : g->offs[r - 1] + g->ls[r - 1];
		if (x.vlen[r] > 0)
			memcpy(g->res + g->offs[r], x.val[r], x.vlen[r]);
	}
	dpg_xchg_free(&x);
	return rc;
}

/* Every rank's length (one all_gather of int64), checked. */
static int agb_lengths(dpg_comm_t *comm, size_t len, struct agb *g,
		       size_t *pad, struct dpg_err *e)
{
	int n = comm->size;
	int64_t mine = (int64_t)len, *all = calloc((size_t)n, sizeof(*all));
	dpg_status_t st;

	if (all == NULL)
		return dpg_errs(e, DPG_ERR_NOMEM, "out of memory");
	st = dpg_all_gather(comm, &mine, all, 1, DPG_I64, NULL);
	for (int r = 0; st == DPG_OK && r < n; r++) {
		if (all[r] < 0 || (uint64_t)all[r] > (uint64_t)SIZE_MAX / 2 ||
		    g->total > SIZE_MAX / 2) {
			int rc = dpg_errs(e, DPG_ERR_PEER, "rank %d sent an impossible "
					  "length %" PRId64, comm->world_ranks[r],
					  all[r]);

			free(all);
			return rc;
		}
		g->ls[r] = (size_t)all[r];
		g->offs[r] = g->total;
		g->total += g->ls[r];
		if (g->ls[r] > *pad)
			*pad = g->ls[r];
	}
	free(all);
	return -(int)st;	/* a failed all_gather recorded its message */
}

/* Sizes, then one padded all_gather of the bytes. */
static int agb_coll(dpg_comm_t *comm, const void *buf, size_t len,
		    struct agb *g, struct dpg_err *e)
{
	int n = comm->size, rc;
	size_t pad = 0;
	uint8_t *sendb = NULL, *recvb = NULL;

	rc = agb_lengths(comm, len, g, &pad, e);
	if (rc != 0)
		return rc;
	pad = (pad + 7) & ~(size_t)7;
	if (pad > 0 && pad > SIZE_MAX / (size_t)n)
		return dpg_errs(e, DPG_ERR_NOMEM, "out of memory");
	if (pad > 0) {
		sendb = calloc(1, pad);
		recvb = malloc(pad * (size_t)n);
		if (sendb == NULL || recvb == NULL)
			rc = dpg_errs(e, DPG_ERR_NOMEM, "out of memory for %d x %zu "
				      "bytes", n, pad);
		if (rc == 0 && len > 0)
			memcpy(sendb, buf, len);
		if (rc == 0)
			rc = -(int)dpg_all_gather(comm, sendb, recvb, pad / 8,
						  DPG_I64, NULL);
	}
	if (rc == 0)
		rc = agb_alloc_res(g, e);
	for (int r = 0; rc == 0 && r < n; r++)
		if (g->ls[r] > 0)
			memcpy(g->res + g->offs[r], recvb + (size_t)r * pad, g->ls[r]);
	free(sendb);
	free(recvb);
	return rc;
}

static int agb_check(const void *buf, size_t len, void **out, size_t **offsets,
		     size_t **lens, struct dpg_err *e)
{
	if (out == NULL || offsets == NULL || lens == NULL)
		return dpg_errf(e, "invalid argument: NULL output pointer");
	if (len > 0 && buf == NULL)
		return dpg_errf(e, "invalid argument: NULL buffer of %zu bytes", len);
	if (len > (size_t)INT64_MAX / 2)
		return dpg_errf(e, "invalid argument: %zu bytes is too large", len);
	return 0;
}

dpg_status_t dpg_all_gather_bytes(dpg_comm_t *comm, const void *buf, size_t len,
				  void **out, size_t **offsets, size_t **lens)
{
	struct dpg_err e = { { 0 } };
	struct agb g = { 0 };
	int rc;

	if (out != NULL)
		*out = NULL;
	if (offsets != NULL)
		*offsets = NULL;
	if (lens != NULL)
		*lens = NULL;
	if (!dpg_comm_ok(comm))
		return DPG_ERR_INVALID;
	if ((rc = dpg_comm_enter(comm, &e)) != 0)
		return dpg_comm_fail(comm, rc, "all_gather_bytes", (int64_t)comm->seq, &e);
	if ((rc = agb_check(buf, len, out, offsets, lens, &e)) != 0)
		return coll_refuse(comm, rc, "all_gather_bytes", &e);
	g.offs = calloc((size_t)comm->size, sizeof(*g.offs));
	g.ls = calloc((size_t)comm->size, sizeof(*g.ls));
	if (g.offs == NULL || g.ls == NULL)
		rc = dpg_errs(&e, DPG_ERR_NOMEM, "out of memory");
	else if (dpg_rt_comm(comm)->kind == DPG_BACKEND_NCCL && comm->size > 1)
		rc = agb_store(comm, buf, len, &g, &e);
	else
		rc = agb_coll(comm, buf, len, &g, &e);
	if (rc != 0) {
		agb_free(&g);
		/* a nested collective recorded its own failure */
		if (e.msg[0] == '\0' && comm->ctx->err[0] != '\0')
			return dpg_status_of(rc);
		return dpg_comm_fail(comm, rc, "all_gather_bytes", -1, &e);
	}
	*out = g.res;
	*offsets = g.offs;
	*lens = g.ls;
	return DPG_OK;
}

/* ------------------------------------------------------------ the train wing */

/* Recorded in the context's second record (track.h), which the hang
 * report reads too: the main thread's record has one writer. */
int dpg_rt_all_gather(dpg_comm_t *comm, const void *send, void *recv,
		      size_t sendcount, dpg_dtype_t dt, uint64_t *seq,
		      struct dpg_err *e)
{
	struct dpg_ctx *ctx = comm->ctx;
	int64_t t0;
	int rc;

	*seq = comm->seq;	/* the backend stamps the call with it */
	pthread_mutex_lock(&ctx->bg_lock);
	t0 = dpg_track_enter(&ctx->bg, comm->name, "all_gather", *seq, sendcount);
	pthread_mutex_unlock(&ctx->bg_lock);
	rc = comm->ops->all_gather(comm, send, recv, sendcount, dt, NULL, e);
	pthread_mutex_lock(&ctx->bg_lock);
	dpg_track_leave(&ctx->bg, t0, rc);
	pthread_mutex_unlock(&ctx->bg_lock);
	comm->seq++;
	return rc;
}

bool dpg_rt_can_start(const dpg_comm_t *comm)
{
	return comm->ops->all_gather_start != NULL && comm->ops->wait_ticket != NULL;
}

/* In the context's second record, from the start to the end of the wait:
 * what a hang report shows is the gather in flight. */
int dpg_rt_all_gather_start(dpg_comm_t *comm, const void *send, void *recv,
			    size_t sendcount, dpg_dtype_t dt, void **ticket,
			    uint64_t *seq, struct dpg_err *e)
{
	struct dpg_ctx *ctx = comm->ctx;
	int rc;

	*seq = comm->seq;
	pthread_mutex_lock(&ctx->bg_lock);
	ctx->bg_t0 = dpg_track_enter(&ctx->bg, comm->name, "all_gather", *seq, sendcount);
	pthread_mutex_unlock(&ctx->bg_lock);
	rc = comm->ops->all_gather_start(comm, send, recv, sendcount, dt, ticket, e);
	comm->seq++;
	if (rc != 0) {
		pthread_mutex_lock(&ctx->bg_lock);
		dpg_track_leave(&ctx->bg, ctx->bg_t0, rc);
		pthread_mutex_unlock(&ctx->bg_lock);
	}
	return rc;
}

int dpg_rt_wait_ticket(dpg_comm_t *comm, void *ticket, struct dpg_err *e)
{
	struct dpg_ctx *ctx = comm->ctx;
	int rc = comm->ops->wait_ticket(comm, ticket, e);

	pthread_mutex_lock(&ctx->bg_lock);
	dpg_track_leave(&ctx->bg, ctx->bg_t0, rc);
	pthread_mutex_unlock(&ctx->bg_lock);
	return rc;
}

_Static_assert(DPG_RT_HANG_LINE_MAX == DPG_HANG_LINE_MAX, "runtime.h's line size");

void dpg_rt_hang_line(dpg_comm_t *comm, char *out, size_t len)
{
	dpg_hang_report(comm->ctx, comm->name, out, len);
}

const char *dpg_rt_comm_name(const dpg_comm_t *comm)
{
	return comm->name;
}
