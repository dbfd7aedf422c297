/* SPDX-License-Identifier: BSD-3-Clause */
/* zero_impl.h - the sharded model's state, and the helpers zero.c (the model
 * and its step) shares with zero_ckpt.c (its checkpoints); not public. */
#ifndef DPG_LIB_ZERO_IMPL_H
#define DPG_LIB_ZERO_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "dpg_zero.h"
#include "err.h"
#include "runtime.h"	/* DPG_RT_HANG_LINE_MAX */
#include "zero_mem.h"
#include "zlayout.h"

/* state of a unit's gathered parameters (stage 3) */
enum { UG_NONE = 0, UG_QUEUED, UG_READY, UG_FAILED };

struct zunit {
	void *full;		/* stage 3: gathered parameters (padded) */
	int gstate;		/* UG_* (under pf.mu once the worker runs) */
	void *ticket;		/* on a device stream: the gather in flight */
	uint64_t seq;		/* its sequence number, for messages */
	float *grad;		/* stages 2-3: full gradient (padded), lazily */
	bool in_shard;		/* grad is the unit's own shard (one rank a
				 * shard group: zero.c's unit_grad_get) */
	int64_t *acc;		/* deterministic: fixed-point sum (padded), lazily */
	bool reduced;		/* reduced in the current optimizer step */
};

/* The stage-3 prefetcher, on its own communicator (a duplicate of the shard
 * group): on the CPU backend one thread gathering units in FIFO order; on
 * NCCL (dev) no thread: the next unit's all_gather is enqueued on the
 * communicator's own device stream and waited for by the caller. */
struct prefetch {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool running, stop;
	bool dev;		/* the device-stream prefetch (NCCL) is on */
	int *q;			/* ring of nunits + 1 unit ids */
	int qh, qt, qcap;
	dpg_comm_t *comm;
	dpg_status_t st;	/* first failure */
	char msg[DPG_ERR_MSG_MAX];
	/* a timeout's hang report, asked once by the main thread */
	bool asked;
	char ranks[DPG_RT_HANG_LINE_MAX];
};

struct zsave;		/* a dpg_zero_save_async in flight (zero_async.c) */

struct dpg_zero {
	dpg_ctx_t *ctx;
	dpg_zero_opts_t o;
	/* groups */
	dpg_mesh_t *mesh;	/* hybrid sharding only */
	dpg_comm_t *shard;	/* the shard group */
	dpg_comm_t *rep;	/* same shard index across groups (NULL: none) */
	int n, r, nrep;
	/* registration */
	int nparams, cap;
	char (*names)[DPG_ZNAME_MAX];
	size_t *numel;
	int *unit;
	bool committed;
	struct dpg_zlayout L;
	size_t ps;		/* bytes of a working parameter */
	int nstate;		/* master + moments */
	/* buffers (device memory on the GPU) */
	void *param_full;	/* stages 1-2: L.padded_numel working parameters */
	void *param_shard;	/* stage 3: L.shard_numel; fp32: state[0] itself
				 * (not owned, shard_is_master) */
	float *state[DPG_CKPT_MAX_STATE];	/* master, m / momentum, v */
	float *grad_full;	/* stage 1: L.padded_numel */
	float *grad_shard;	/* stages 2-3: L.shard_numel */
	struct zunit *u;
	void *dscratch;		/* 8 bytes of device memory for small allreduces (GPU) */
	struct dpg_zmem mem;	/* where the buffers live; stage 3's gather buffer pool */
	struct prefetch pf;
	/* asynchronous save: the one in flight (until dpg_zero_save_wait) and
	 * its host copy of the state, L.shard_numel each, kept for the next */
	struct zsave *saving;
	float *snap[DPG_CKPT_MAX_STATE];
	/* accounting */
	size_t param_bytes, grad_bytes, optim_bytes;
	long micro, step;
	unsigned __int128 det_sumsq;	/* deterministic: this rank's sum of squares */
};

/* The helpers below follow lib/'s convention (err.h): 0 or a negated
 * dpg_status_t, with "OP: message" in the caller's struct dpg_err.  The
 * public calls turn that into their status once, at the edge (dpg_zedge),
 * which records "WHO OP: message" in the model's context. */

/* The edge: rc (0 or -DPG_ERR_*) as the public status, e's message in z's
 * context. */
dpg_status_t dpg_zedge(struct dpg_zero *z, int rc, const struct dpg_err *e);
/* Wait for every stage-3 gather in flight (before the shard they read
 * changes: the optimizer step, a load). */
void dpg_zdrain(struct dpg_zero *z);
/* A CPU to spare for each rank's prefetch thread (zero.c): `aff` CPUs in
 * this process's set, `online` on the machine, `local` ranks on it. */
bool dpg_zspare_cpu(long aff, long online, long local);
/* -DPG_ERR_INVALID unless dpg_zero_commit ran. */
int dpg_zneed_committed(struct dpg_zero *z, const char *op, struct dpg_err *e);
/* host <-> z's buffers (dir 0: into the buffer, 1: out of it) */
int dpg_zcopy(struct dpg_zero *z, void *dst, const void *src, size_t bytes, int dir,
	      struct dpg_err *e);
/* An allreduce of one host value over comm (through device memory on the GPU). */
int dpg_zsmall_allreduce(struct dpg_zero *z, dpg_comm_t *comm, void *host, dpg_dtype_t dt,
			 dpg_op_t op, struct dpg_err *e);
/* Forget the gradients of the current optimizer step. */
int dpg_zclear_grads(struct dpg_zero *z, struct dpg_err *e);
/* Give back unit's gathered parameters (stage 3; a committed model, a valid unit). */
void dpg_zrelease(struct dpg_zero *z, int unit);
/* Working parameters from the master shard (stages 1-2: all-gathered). */
int dpg_zpublish(struct dpg_zero *z, struct dpg_err *e);

/* zero_ckpt.c: the checks of a save's arguments and state (the same on
 * every rank); and its end, collective: every rank passes its own result
 * (mine), all agree, rank 0 writes the metadata and flips latest, all
 * agree again. */
int dpg_zsave_check(struct dpg_zero *z, const char *dir, const void *extra,
		    size_t extra_len, const char *op, struct dpg_err *e);
int dpg_zsave_commit(struct dpg_zero *z, const char *dir, long step, const void *extra,
		     size_t extra_len, int mine, const char *op, struct dpg_err *e);
/* zero_async.c: finish the asynchronous save in flight, if any (its
 * writer joined, then dpg_zsave_commit: collective); its result. */
int dpg_zsave_settle(struct dpg_zero *z, struct dpg_err *e);
/* Destroy: wait for the writer of a save in flight and drop it (never
 * committed: that needs every rank), and free the host copy. */
void dpg_zsave_drop(struct dpg_zero *z);

#endif
