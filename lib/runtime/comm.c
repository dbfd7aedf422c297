/* SPDX-License-Identifier: BSD-3-Clause */
/* comm.c - a context's communicators: the size-1 "self" backend, starting
 * the CPU or NCCL backend, split, destroy, abort, and the mesh registry. */
#include "comm.h"

#include "cpu_backend.h"
#include "gpumod.h"
#include "le.h"
#include "store.h"
#include "xchg.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ accessors */

dpg_comm_t *dpg_world(dpg_ctx_t *ctx)
{
	return (ctx == NULL || ctx->world == NULL) ? NULL : &ctx->world->c;
}

int dpg_comm_rank(const dpg_comm_t *comm)
{
	return comm == NULL ? -1 : comm->rank;
}

int dpg_comm_size(const dpg_comm_t *comm)
{
	return comm == NULL ? -1 : comm->size;
}

/* ------------------------------------------------------------ self backend */

/* A communicator of one rank on host memory: every collective is a copy. */
static int self_allreduce(struct dpg_comm *c, const void *send, void *recv,
			  size_t count, dpg_dtype_t dt, dpg_op_t op, void *stream,
			  struct dpg_err *err)
{
	(void)c; (void)op; (void)stream; (void)err;
	if (send != recv && count > 0)
		memmove(recv, send, count * dpg_dtype_size(dt));
	return 0;
}

static int self_reduce_scatter(struct dpg_comm *c, const void *send, void *recv,
			       size_t recvcount, dpg_dtype_t dt, dpg_op_t op,
			       void *stream, struct dpg_err *err)
{
	return self_allreduce(c, send, recv, recvcount, dt, op, stream, err);
}

static int self_all_gather(struct dpg_comm *c, const void *send, void *recv,
			   size_t sendcount, dpg_dtype_t dt, void *stream,
			   struct dpg_err *err)
{
	return self_allreduce(c, send, recv, sendcount, dt, DPG_SUM, stream, err);
}

static int self_broadcast(struct dpg_comm *c, void *buf, size_t count,
			  dpg_dtype_t dt, int root, void *stream, struct dpg_err *err)
{
	(void)c; (void)buf; (void)count; (void)dt; (void)root; (void)stream;
	(void)err;
	return 0;
}

static int self_barrier(struct dpg_comm *c, struct dpg_err *err)
{
	(void)c; (void)err;
	return 0;
}

static void self_abort(struct dpg_comm *c)
{
	(void)c;
}

static void self_destroy(struct dpg_comm *c)
{
	(void)c;
}

static const struct dpg_comm_ops self_ops = {
	.name = "self",
	.allreduce = self_allreduce,
	.reduce_scatter = self_reduce_scatter,
	.all_gather = self_all_gather,
	.broadcast = self_broadcast,
	.barrier = self_barrier,
	.abort = self_abort,
	.destroy = self_destroy,
};

/* ------------------------------------------------------------ comm list */

static void comm_link(struct dpg_ctx *ctx, struct rt_comm *rc)
{
	pthread_mutex_lock(&ctx->lock);
	rc->prev = NULL;
	rc->next = ctx->comms;
	if (ctx->comms != NULL)
		ctx->comms->prev = rc;
	ctx->comms = rc;
	pthread_mutex_unlock(&ctx->lock);
}

static void comm_unlink(struct dpg_ctx *ctx, struct rt_comm *rc)
{
	pthread_mutex_lock(&ctx->lock);
	if (rc->prev != NULL)
		rc->prev->next = rc->next;
	else if (ctx->comms == rc)
		ctx->comms = rc->next;
	if (rc->next != NULL)
		rc->next->prev = rc->prev;
	rc->next = rc->prev = NULL;
	pthread_mutex_unlock(&ctx->lock);
}

static struct rt_comm *comm_alloc(struct dpg_ctx *ctx, int rank, int size,
				  const char *name, enum dpg_comm_owner owner,
				  dpg_backend_t kind)
{
	struct rt_comm *rc = calloc(1, sizeof(*rc));

	if (rc == NULL)
		return NULL;
	rc->c.world_ranks = calloc((size_t)size, sizeof(int));
	if (rc->c.world_ranks == NULL) {
		free(rc);
		return NULL;
	}
	rc->c.ctx = ctx;
	rc->c.rank = rank;
	rc->c.size = size;
	snprintf(rc->c.name, sizeof(rc->c.name), "%s", name);
	rc->owner = owner;
	rc->kind = kind;
	return rc;
}

static void comm_free(struct rt_comm *rc)
{
	if (rc == NULL)
		return;
	free(rc->c.world_ranks);
	free(rc);
}

/* ------------------------------------------------------------ backends */

static struct dpg_backend_args backend_args(struct dpg_ctx *ctx)
{
	return (struct dpg_backend_args){
		.store = ctx->store,
		.store_set = dpg_store_set,
		.store_get = dpg_store_get,
		.key_ns = ctx->ns,
		.world_rank = ctx->j.rank,
		.host = ctx->addr,
		.node = ctx->node,
		.secret = ctx->j.secret,
		.timeout_s = (double)ctx->timeout_ms / 1000.0,
		.abort = &ctx->abort_flag,
		.device = ctx->device,
	};
}

/* On NCCL with a module that has ncclCommSplit: the part starts from the
 * parent's communicator (collective over the parent; child NULL: this rank
 * is in no part) instead of a unique id through the store. */
static bool split_by_nccl(struct dpg_ctx *ctx, dpg_comm_t *parent)
{
	return dpg_rt_comm(parent)->kind == DPG_BACKEND_NCCL && ctx->gpu.t != NULL &&
	       ctx->gpu.t->comm_split != NULL && parent->ops != NULL &&
	       strcmp(parent->ops->name, "nccl") == 0;
}

static int comm_split_start(struct dpg_ctx *ctx, dpg_comm_t *parent,
			    struct rt_comm *child, int color, int key,
			    struct dpg_err *e)
{
	struct dpg_backend_args a = backend_args(ctx);

	return ctx->gpu.t->comm_split(parent, child != NULL ? &child->c : NULL,
				      color, key, &a, e);
}

/* Start the backend of a filled-in comm (collective over its members). */
static int comm_start(struct dpg_ctx *ctx, struct rt_comm *rc,
		      struct dpg_err *e)
{
	struct dpg_backend_args a = backend_args(ctx);

	if (rc->kind == DPG_BACKEND_NCCL) {
		if (ctx->gpu.t == NULL)
			return dpg_errs(e, DPG_ERR_UNSUPPORTED, "the NCCL backend "
					"needs the CUDA module, which is not loaded");
		return ctx->gpu.t->comm_init(&rc->c, &a, e);
	}
	if (rc->c.size == 1) {
		rc->c.ops = &self_ops;
		return 0;
	}
	return dpg_cpu_comm_init(&rc->c, &a, e);
}

int dpg_comm_make_world(struct dpg_ctx *ctx, struct dpg_err *e)
{
	struct rt_comm *w = comm_alloc(ctx, ctx->j.rank, ctx->j.world_size, "w",
				       DPG_OWNER_CTX, ctx->backend);
	int rc;

	if (w == NULL)
		return dpg_errs(e, DPG_ERR_NOMEM, "out of memory for the world "
				"communicator");
	for (int r = 0; r < ctx->j.world_size; r++)
		w->c.world_ranks[r] = r;
	rc = comm_start(ctx, w, e);
	if (rc != 0) {
		comm_free(w);
		return rc;
	}
	ctx->world = w;
	comm_link(ctx, w);
	return 0;
}

/* ------------------------------------------------------------ split */

struct member {
	int color, key, rank;
};

static int member_cmp(const void *a, const void *b)
{
	const struct member *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return (x->rank > y->rank) - (x->rank < y->rank);
}

/* A child's name: unique in the job because the parent's is and the split
 * counter orders the parent's splits; hashed when it gets long. */
static void child_name(char *buf, size_t len, const char *parent, uint64_t n,
		       int color)
{
	char full[256];
	uint64_t h = 1469598103934665603ULL;

	snprintf(full, sizeof(full), "%s.%" PRIu64 ".%d", parent, n, color);
	if (strlen(full) < len) {
		snprintf(buf, len, "%s", full);
		return;
	}
	for (const char *p = full; *p != '\0'; p++)
		h = (h ^ (uint8_t)*p) * 1099511628211ULL;
	snprintf(buf, len, "h%016" PRIx64, h);
}

/* One split in progress; what names the call in its failure message. */
struct split {
	dpg_comm_t *comm;
	int color, key;
	uint64_t nsplit;
	struct member *m;	/* comm->size entries */
	int nm;			/* members of my color, first in m */
	int64_t seq;		/* shown in the message (-1: none) */
};

/* Every member's (color, key), through the store. */
static int split_exchange(struct split *s, struct dpg_err *e)
{
	dpg_comm_t *comm = s->comm;
	struct dpg_ctx *ctx = comm->ctx;
	char prefix[DPG_STORE_KEY_MAX + 1];
	uint8_t mine[8];
	struct dpg_xchg x;
	struct dpg_xchg_group g = {
		.store = ctx->store, .prefix = prefix, .me = comm->rank,
		.n = comm->size, .world_ranks = comm->world_ranks,
		.timeout_ms = ctx->timeout_ms,
	};
	int rc;

	if (comm->size == 1) {
		s->m[0] = (struct member){ s->color, s->key, 0 };
		return 0;
	}
	snprintf(prefix, sizeof(prefix), "%s/c/%s/split/%" PRIu64, ctx->ns,
		 comm->name, s->nsplit);
	dpg_le_put32(mine, (uint32_t)s->color);
	dpg_le_put32(mine + 4, (uint32_t)s->key);
	rc = dpg_xchg_run(&g, mine, sizeof(mine), NULL, NULL, &x, e);
	if (rc != 0) {
		ctx->failed = true;
		s->seq = (int64_t)s->nsplit;
	}
	for (int r = 0; rc == 0 && r < comm->size; r++) {
		if (x.vlen[r] != 8)
			rc = dpg_errs(e, DPG_ERR_PEER, "rank %d sent a malformed "
				      "entry", comm->world_ranks[r]);
		else
			s->m[r] = (struct member){ (int)dpg_le_get32(x.val[r]),
						   (int)dpg_le_get32(x.val[r] + 4),
						   r };
	}
	dpg_xchg_free(&x);
	return rc;
}

/* The members of my color, ordered by (key, parent rank); my rank there. */
static int split_order(struct split *s)
{
	int me = -1;

	for (int r = 0; r < s->comm->size; r++)
		if (s->m[r].color == s->color)
			s->m[s->nm++] = s->m[r];
	qsort(s->m, (size_t)s->nm, sizeof(*s->m), member_cmp);
	for (int i = 0; i < s->nm; i++)
		if (s->m[i].rank == s->comm->rank)
			me = i;
	return me;
}

static int split_make_child(struct split *s, enum dpg_comm_owner owner,
			    dpg_comm_t **out, struct dpg_err *e)
{
	dpg_comm_t *comm = s->comm;
	struct dpg_ctx *ctx = comm->ctx;
	struct dpg_err be = { { 0 } };
	struct rt_comm *child;
	char name[64];
	int me = split_order(s), rc;

	child_name(name, sizeof(name), comm->name, s->nsplit, s->color);
	child = comm_alloc(ctx, me, s->nm, name, owner, dpg_rt_comm(comm)->kind);
	if (child == NULL)
		return dpg_errs(e, DPG_ERR_NOMEM, "out of memory");
	for (int i = 0; i < s->nm; i++)
		child->c.world_ranks[i] = comm->world_ranks[s->m[i].rank];
	rc = split_by_nccl(ctx, comm) ?
	     comm_split_start(ctx, comm, child, s->color, s->key, &be) :
	     comm_start(ctx, child, &be);
	if (rc != 0) {
		ctx->failed = true;
		comm_free(child);
		return dpg_errs(e, dpg_status_of(rc), "creating %s (%d ranks): %s",
				name, s->nm, be.msg);
	}
	comm_link(ctx, child);
	*out = &child->c;
	return 0;
}

dpg_status_t dpg_comm_split_owned(dpg_comm_t *comm, int color, int key,
				  enum dpg_comm_owner owner, dpg_comm_t **out)
{
	struct split s = { comm, color, key, 0, NULL, 0, -1 };
	struct dpg_err e = { { 0 } };
	int rc;

	if (out != NULL)
		*out = NULL;
	if (!dpg_comm_ok(comm))
		return DPG_ERR_INVALID;
	if ((rc = dpg_comm_enter(comm, &e)) != 0)
		return dpg_comm_fail(comm, rc, "comm_split", (int64_t)comm->seq, &e);
	if (out == NULL)
		return dpg_comm_fail(comm, dpg_errf(&e, "invalid argument: NULL "
						    "output pointer"),
				     "comm_split", -1, &e);
	s.nsplit = dpg_rt_comm(comm)->nsplit++;
	s.m = calloc((size_t)comm->size, sizeof(*s.m));
	if (s.m == NULL)
		rc = dpg_errs(&e, DPG_ERR_NOMEM, "out of memory");
	else
		rc = split_exchange(&s, &e);
	if (rc == 0 && color >= 0)
		rc = split_make_child(&s, owner, out, &e);
	else if (rc == 0 && split_by_nccl(comm->ctx, comm))
		rc = comm_split_start(comm->ctx, comm, NULL, color, key, &e);
	free(s.m);
	return dpg_comm_fail(comm, rc, "comm_split", s.seq, &e);
}

dpg_status_t dpg_comm_split(dpg_comm_t *comm, int color, int key,
			    dpg_comm_t **out)
{
	return dpg_comm_split_owned(comm, color, key, DPG_OWNER_USER, out);
}

/* ------------------------------------------------------------ destroy, abort */

dpg_status_t dpg_comm_destroy_owned(dpg_comm_t *comm)
{
	struct rt_comm *rc;

	if (comm == NULL)
		return DPG_OK;
	rc = dpg_rt_comm(comm);
	if (comm->ctx != NULL)
		comm_unlink(comm->ctx, rc);
	if (comm->ops != NULL && comm->ops->destroy != NULL)
		comm->ops->destroy(comm);
	comm_free(rc);
	return DPG_OK;
}

dpg_status_t dpg_comm_destroy(dpg_comm_t *comm)
{
	struct rt_comm *rc;

	if (comm == NULL)
		return DPG_OK;
	rc = dpg_rt_comm(comm);
	if (rc->owner != DPG_OWNER_USER) {
		dpg_ctx_seterr(comm->ctx, "%s comm_destroy: %s belongs to %s; it is "
			       "freed by %s", dpg_ctx_who(comm->ctx), comm->name,
			       rc->owner == DPG_OWNER_CTX ? "the context" : "a mesh",
			       rc->owner == DPG_OWNER_CTX ? "dpg_finalize" :
			       "dpg_mesh_destroy");
		return DPG_ERR_INVALID;
	}
	dpg_ctx_clear_err(comm->ctx);
	return dpg_comm_destroy_owned(comm);
}

void dpg_comm_destroy_all_but_world(struct dpg_ctx *ctx)
{
	while (ctx->nmesh > 0)
		dpg_mesh_destroy(ctx->meshes[ctx->nmesh - 1]);
	free(ctx->meshes);
	ctx->meshes = NULL;
	ctx->mesh_cap = 0;
	/* user comms next (oldest first), the world last */
	for (;;) {
		struct rt_comm *victim = NULL;

		pthread_mutex_lock(&ctx->lock);
		for (struct rt_comm *rc = ctx->comms; rc != NULL; rc = rc->next)
			if (rc != ctx->world)
				victim = rc;	/* the list is newest first */
		pthread_mutex_unlock(&ctx->lock);
		if (victim == NULL)
			break;
		dpg_comm_destroy_owned(&victim->c);
	}
}

void dpg_comm_abort_all(struct dpg_ctx *ctx)
{
	pthread_mutex_lock(&ctx->lock);
	for (struct rt_comm *rc = ctx->comms; rc != NULL; rc = rc->next)
		if (rc->c.ops != NULL && rc->c.ops->abort != NULL)
			rc->c.ops->abort(&rc->c);
	pthread_mutex_unlock(&ctx->lock);
}

/* ------------------------------------------------------------ meshes */

int dpg_comm_track_mesh(struct dpg_ctx *ctx, dpg_mesh_t *mesh, int add)
{
	if (ctx == NULL || mesh == NULL)
		return -DPG_ERR_INVALID;
	if (!add) {
		for (size_t i = 0; i < ctx->nmesh; i++)
			if (ctx->meshes[i] == mesh) {
				ctx->meshes[i] = ctx->meshes[--ctx->nmesh];
				break;
			}
		return 0;
	}
	if (ctx->nmesh == ctx->mesh_cap) {
		size_t cap = ctx->mesh_cap ? ctx->mesh_cap * 2 : 4;
		dpg_mesh_t **m = realloc(ctx->meshes, cap * sizeof(*m));

		if (m == NULL)
			return -DPG_ERR_NOMEM;
		ctx->meshes = m;
		ctx->mesh_cap = cap;
	}
	ctx->meshes[ctx->nmesh++] = mesh;
	return 0;
}

/* ------------------------------------------------------------ the edge */

bool dpg_comm_ok(const dpg_comm_t *c)
{
	return c != NULL && c->ctx != NULL && c->ops != NULL;
}

int dpg_comm_enter(dpg_comm_t *c, struct dpg_err *e)
{
	const char *dead = NULL;

	dpg_ctx_clear_err(c->ctx);
	if (dpg_ctx_aborted(c->ctx))
		return dpg_errs(e, DPG_ERR_ABORTED, "aborted (dpg_abort was called)");
	if (dpg_ctx_dead_peer(c->ctx, &dead) >= 0)
		return dpg_errs(e, DPG_ERR_PEER, "%s", dead);
	return 0;
}

/* The dead rank behind failure rc, if the liveness watch names one: on
 * NCCL a peer or backend failure may be NCCL's own word for a death the
 * watch has not yet declared (a closed socket is seen at once), so it is
 * given a watch period to name the rank. */
static int dead_peer_of(dpg_comm_t *c, int rc, const char **dead)
{
	dpg_status_t st = dpg_status_of(rc);

	if (dpg_rt_comm(c)->kind == DPG_BACKEND_NCCL &&
	    (st == DPG_ERR_PEER || st == DPG_ERR_BACKEND))
		return dpg_ctx_await_dead_peer(c->ctx, dead);
	return dpg_ctx_dead_peer(c->ctx, dead);
}

dpg_status_t dpg_comm_fail(dpg_comm_t *c, int rc, const char *op, int64_t seq,
			   const struct dpg_err *e)
{
	char what[160];
	const char *dead = NULL;
	struct dpg_err pe;

	/* a call the liveness watch aborted (or that timed out or broke
	 * meanwhile) fails naming the dead rank, unless dpg_abort was called */
	if (rc != 0 && dpg_status_of(rc) != DPG_ERR_INVALID &&
	    !dpg_ctx_aborted(c->ctx) && dead_peer_of(c, rc, &dead) >= 0) {
		dpg_errs(&pe, DPG_ERR_PEER, "%s", dead);
		rc = -DPG_ERR_PEER;
		e = &pe;
	}
	if (seq >= 0)
		snprintf(what, sizeof(what), "%s #%" PRId64 " on %s", op, seq,
			 c->name);
	else
		snprintf(what, sizeof(what), "%s on %s", op, c->name);
	return dpg_ctx_fail(c->ctx, rc, what, e);
}
