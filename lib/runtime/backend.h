/* SPDX-License-Identifier: BSD-3-Clause */
/* backend.h - what a communicator backend sees: the communicator's shape, its
 * operations table, and the one set of arguments every backend's init gets. */
#ifndef DPG_LIB_BACKEND_H
#define DPG_LIB_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "dpg.h"
#include "dtype.h"	/* dpg_dtype_size */
#include "err.h"

struct dpg_comm;
struct dpg_store;

/* The store's set and get (store.h), handed to backends built outside
 * libdpg (the NCCL backend in dpg-cuda.so), which cannot link libdpg's
 * hidden functions. */
typedef int dpg_store_set_fn(struct dpg_store *s, const char *key,
			     const void *val, size_t len, int64_t deadline_ms,
			     struct dpg_err *err);
typedef int dpg_store_get_fn(struct dpg_store *s, const char *key, void **val,
			     size_t *len, int64_t deadline_ms, struct dpg_err *err);

/* Backend return codes besides 0: a dpg_status_t, negated (e.g.
 * -DPG_ERR_PEER), with the message in err naming the peer. */
struct dpg_comm_ops {
	const char *name;	/* "self", "cpu", "nccl" */
	int (*allreduce)(struct dpg_comm *c, const void *send, void *recv,
			 size_t count, dpg_dtype_t dt, dpg_op_t op, void *stream,
			 struct dpg_err *err);
	int (*reduce_scatter)(struct dpg_comm *c, const void *send, void *recv,
			      size_t recvcount, dpg_dtype_t dt, dpg_op_t op,
			      void *stream, struct dpg_err *err);
	int (*all_gather)(struct dpg_comm *c, const void *send, void *recv,
			  size_t sendcount, dpg_dtype_t dt, void *stream,
			  struct dpg_err *err);
	/* Stage 3's prefetch on a device stream (NCCL; NULL elsewhere):
	 * all_gather_start enqueues an all_gather (send != recv) on the
	 * comm's own stream, ordered after the work already given to the
	 * default stream, and returns at once with a ticket; wait_ticket
	 * waits for it (the comm's errors, dpg_abort and the deadline
	 * watched, as every call's wait) and frees it, whatever the outcome. */
	int (*all_gather_start)(struct dpg_comm *c, const void *send, void *recv,
				size_t sendcount, dpg_dtype_t dt, void **ticket,
				struct dpg_err *err);
	int (*wait_ticket)(struct dpg_comm *c, void *ticket, struct dpg_err *err);
	int (*broadcast)(struct dpg_comm *c, void *buf, size_t count,
			 dpg_dtype_t dt, int root, void *stream, struct dpg_err *err);
	int (*barrier)(struct dpg_comm *c, struct dpg_err *err);
	/* Make every blocked or later call fail with DPG_ERR_ABORTED. */
	void (*abort)(struct dpg_comm *c);
	void (*destroy)(struct dpg_comm *c);
};

/* A communicator as every backend and the runtime see it. */
#define DPG_HOST_MAX 64

struct dpg_comm {
	const struct dpg_comm_ops *ops;
	void *impl;			/* backend state */
	struct dpg_ctx *ctx;		/* owner, for errors (never a backend's) */
	int rank, size;
	int *world_ranks;		/* comm rank -> world rank (size entries) */
	uint64_t seq;			/* collectives issued so far */
	char name[64];			/* unique in the job, e.g. "w" / "w.s3.c1" */
};

/* Everything a backend's init may need, so that no backend calls back into
 * the context: comm.c fills it once from the context for every communicator
 * it starts.  The backend's init also gets the communicator with c->rank,
 * c->size, c->name and c->world_ranks set. */
struct dpg_backend_args {
	struct dpg_store *store;	/* rendezvous (may be NULL for one rank) */
	dpg_store_set_fn *store_set;	/* dpg_store_set / dpg_store_get, with */
	dpg_store_get_fn *store_get;	/* deadlines on dpg_now_ms()'s clock */
	const char *key_ns;		/* store key namespace of the job step,
					 * "dpg/<job>.<step>" (no slash at the end) */
	int world_rank;			/* this process in the world */
	const char *host;		/* address peers connect to (and named in
					 * error messages: "peer rank R (HOST)") */
	const char *node;		/* ranks with equal node strings are on one
					 * machine (shared memory) */
	const char *secret;		/* the job secret in hex ("": none); the
					 * CPU backend keys its TCP hellos with it */
	double timeout_s;		/* per call and for init */
	const volatile int *abort;	/* raised: calls end with DPG_ERR_ABORTED */
	int device;			/* CUDA device (NCCL), -1: none */
	/* CPU backend tuning, 0 = default (see cpu_backend.h). */
	unsigned flags;
	size_t shm_slot_bytes;
	size_t tcp_chunk_bytes;
	size_t tcp_lockstep_bytes;
};

#endif
