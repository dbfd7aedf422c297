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
#include "zero_mem.h"
#include "zlayout.h"

/* state of a unit's gathered parameters (stage 3) */
enum { UG_NONE = 0, UG_QUEUED, UG_READY, UG_FAILED };

struct zunit {
	void *full;		/* stage 3: gathered parameters (padded) */
	int gstate;		/* UG_* (under pf.mu once the worker runs) */
	float *grad;		/* stages 2-3: full gradient (padded), lazily */
	int64_t *acc;		/* deterministic: fixed-point sum (padded), lazily */
	bool reduced;		/* reduced in the current optimizer step */
};

/* The stage-3 prefetcher: one thread gathering units in FIFO order on its
 * own communicator (a duplicate of the shard group). */
struct prefetch {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool running, stop;
	int *q;			/* ring of nunits + 1 unit ids */
	int qh, qt, qcap;
	dpg_comm_t *comm;
	dpg_status_t st;	/* first failure */
	char msg[DPG_ERR_MSG_MAX];
};

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
	void *param_shard;	/* stage 3: L.shard_numel */
	float *state[DPG_CKPT_MAX_STATE];	/* master, m / momentum, v */
	float *grad_full;	/* stage 1: L.padded_numel */
	float *grad_shard;	/* stages 2-3: L.shard_numel */
	struct zunit *u;
	void *dscratch;		/* 8 bytes of device memory for small allreduces (GPU) */
	struct dpg_zmem mem;	/* where the buffers live; stage 3's gather buffer pool */
	struct dpg_err merr;	/* the last zero_mem failure (main thread only) */
	struct prefetch pf;
	/* accounting */
	size_t param_bytes, grad_bytes, optim_bytes;
	long micro, step;
	unsigned __int128 det_sumsq;	/* deterministic: this rank's sum of squares */
};

/* The statuses below are dpg_status_t values with the message in the
 * model's context (dpg_ctx_seterr), as the public calls return them. */

/* Record "WHO OP: MESSAGE" in z's context; returns st. */
dpg_status_t dpg_zerr(struct dpg_zero *z, dpg_status_t st, const char *op,
		      const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* DPG_ERR_INVALID unless dpg_zero_commit ran. */
dpg_status_t dpg_zneed_committed(struct dpg_zero *z, const char *op);
/* host <-> z's buffers (dir 0: into the buffer, 1: out of it) */
dpg_status_t dpg_zcopy(struct dpg_zero *z, void *dst, const void *src, size_t bytes,
		       int dir);
/* An allreduce of one host value over comm (through device memory on the GPU). */
dpg_status_t dpg_zsmall_allreduce(struct dpg_zero *z, dpg_comm_t *comm, void *host,
				  dpg_dtype_t dt, dpg_op_t op);
/* Forget the gradients of the current optimizer step. */
dpg_status_t dpg_zclear_grads(struct dpg_zero *z);
/* Working parameters from the master shard (stages 1-2: all-gathered). */
dpg_status_t dpg_zpublish(struct dpg_zero *z);

#endif
