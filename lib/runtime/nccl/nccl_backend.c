/* SPDX-License-Identifier: BSD-3-Clause */
/* nccl_backend.c - the NCCL backend: dpg_comm_ops mapped onto a nonblocking
 * NCCL communicator.  Every wait (init, enqueue, stream completion,
 * finalize) is a poll bounded by a deadline and the abort flags; on an error
 * or a deadline the NCCL communicator is aborted (ncclCommAbort), as NCCL
 * requires, and every later call fails at once. */
#include "nccl_backend.h"

#include "store.h"	/* DPG_STORE_KEY_MAX */

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* nccl.h declares some functions without prototypes ("f()") */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cuda_runtime.h>
#include <nccl.h>
#pragma GCC diagnostic pop

/* Sleep between polls: short, since collectives are often sub-millisecond. */
#define POLL_US 50
/* A collective's wait spins (no sleep) for its first SPIN_MS: a sleep
 * between polls costs its whole granularity (50-100 us in a VM) on every
 * call, which is most of a 32-128 MiB collective on an H100; past SPIN_MS
 * an overshoot of one POLL_US is below 1% and the core is given back. */
#define SPIN_MS 10

struct nccl_impl {
	ncclComm_t comm;		/* NULL once aborted or destroyed */
	int device;
	double timeout_s;
	const volatile int *ctx_abort;	/* dpg_abort's flag (may be NULL) */
	volatile int aborted;		/* ops->abort was called */
	const char *broken;		/* why the comm is unusable, or NULL */
	int *scratch;			/* one device int for barriers */
	cudaStream_t bstream;		/* barrier's own stream */
	cudaStream_t pstream;		/* all_gather_start's stream, lazily */
	/* where a nonblocking ncclCommSplit of this comm stores the child:
	 * NCCL writes it when the split is done, after the call returned, so
	 * it lives as long as the parent, not on a caller's stack */
	ncclComm_t split_slot;
};

static bool abort_requested(const struct nccl_impl *m)
{
	return __atomic_load_n(&m->aborted, __ATOMIC_SEQ_CST) != 0 ||
	       (m->ctx_abort != NULL && *m->ctx_abort != 0);
}

/* dpg_now_ms()'s clock (net.c), which the store's deadlines are on: this
 * file is built into dpg-cuda.so, apart from libdpg's own functions */
static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t deadline_of(double timeout_s)
{
	return now_ms() + (int64_t)(timeout_s * 1000.0);
}

/* Abort the NCCL communicator (once) and remember why. */
static void kill_comm(struct nccl_impl *m, const char *why)
{
	if (m->comm != NULL) {
		ncclCommAbort(m->comm);
		m->comm = NULL;
	}
	if (m->broken == NULL)
		m->broken = why;
}

/* A status for an NCCL error, with err set; aborts the comm unless the
 * error was an argument one ("the call had no effect"). */
static int nccl_fail(struct nccl_impl *m, const char *what, ncclResult_t r,
		     struct dpg_err *err)
{
	const char *last = m->comm != NULL ? ncclGetLastError(m->comm) : NULL;
	int st;

	if (r == ncclInvalidArgument || r == ncclInvalidUsage) {
		dpg_errf(err, "NCCL %s: %s%s%s", what, ncclGetErrorString(r),
			 last != NULL && *last ? ": " : "", last != NULL ? last : "");
		return -DPG_ERR_INVALID;
	}
	st = r == ncclRemoteError ? -DPG_ERR_PEER : -DPG_ERR_BACKEND;
	dpg_errf(err, "NCCL %s: %s%s%s%s (communicator aborted; NCCL_DEBUG=WARN "
		 "names the failing peer)", what, ncclGetErrorString(r),
		 last != NULL && *last ? ": " : "", last != NULL ? last : "",
		 r == ncclRemoteError ? " (a remote rank failed or exited)" : "");
	kill_comm(m, "an earlier NCCL error");
	return st;
}

static int cuda_fail(struct nccl_impl *m, const char *what, cudaError_t e,
		     struct dpg_err *err)
{
	dpg_errf(err, "CUDA %s: %s (%s)", what, cudaGetErrorString(e),
		 cudaGetErrorName(e));
	kill_comm(m, "an earlier CUDA error");
	return -DPG_ERR_BACKEND;
}

/* Wait until the communicator's pending operation (init, enqueue,
 * finalize) is no longer ncclInProgress. */
static int wait_comm(struct nccl_impl *m, const char *what, int64_t deadline,
		     struct dpg_err *err)
{
	for (;;) {
		ncclResult_t st = ncclInProgress;
		ncclResult_t r = ncclCommGetAsyncError(m->comm, &st);

		if (r != ncclSuccess)
			return nccl_fail(m, what, r, err);
		if (st == ncclSuccess)
			return 0;
		if (st != ncclInProgress)
			return nccl_fail(m, what, st, err);
		if (abort_requested(m)) {
			kill_comm(m, "dpg_abort");
			dpg_errf(err, "NCCL %s: aborted (dpg_abort was called)", what);
			return -DPG_ERR_ABORTED;
		}
		if (now_ms() >= deadline) {
			kill_comm(m, "an earlier timeout");
			dpg_errf(err, "NCCL %s: not done after %.1f s (a rank did not "
				 "join or is stuck); communicator aborted", what,
				 m->timeout_s);
			return -DPG_ERR_TIMEOUT;
		}
		usleep(POLL_US);
	}
}

/* Wait for the work enqueued on stream s, or (ev not NULL) for event ev,
 * watching NCCL's error state, dpg_abort and the deadline. */
static int wait_work(struct nccl_impl *m, const char *what, cudaStream_t s,
		     cudaEvent_t ev, int64_t deadline, struct dpg_err *err)
{
	int64_t spin_until = now_ms() + SPIN_MS;

	for (;;) {
		cudaError_t ce = ev != NULL ? cudaEventQuery(ev) : cudaStreamQuery(s);
		ncclResult_t st = ncclSuccess;

		if (ce == cudaSuccess)
			return 0;
		if (ce != cudaErrorNotReady)
			return cuda_fail(m, what, ce, err);
		if (ncclCommGetAsyncError(m->comm, &st) != ncclSuccess ||
		    (st != ncclSuccess && st != ncclInProgress))
			return nccl_fail(m, what, st, err);
		if (abort_requested(m)) {
			kill_comm(m, "dpg_abort");
			dpg_errf(err, "NCCL %s: aborted (dpg_abort was called)", what);
			return -DPG_ERR_ABORTED;
		}
		int64_t t = now_ms();

		if (t >= deadline) {
			kill_comm(m, "an earlier timeout");
			dpg_errf(err, "NCCL %s: not complete after %.1f s (a rank did "
				 "not join this collective, or died); communicator "
				 "aborted", what, m->timeout_s);
			return -DPG_ERR_TIMEOUT;
		}
		if (t >= spin_until)
			usleep(POLL_US);
	}
}

static int wait_stream(struct nccl_impl *m, const char *what, cudaStream_t s,
		       int64_t deadline, struct dpg_err *err)
{
	return wait_work(m, what, s, NULL, deadline, err);
}

/* Common entry checks; sets the device for the call and returns the
 * previous one in *prev. */
static int enter(struct nccl_impl *m, const char *what, int *prev,
		 struct dpg_err *err)
{
	cudaError_t ce;

	if (m->broken != NULL || m->comm == NULL) {
		dpg_errf(err, "NCCL %s: the communicator is unusable after %s", what,
			 m->broken != NULL ? m->broken : "an earlier error");
		return m->broken != NULL && strcmp(m->broken, "dpg_abort") == 0 ?
		       -DPG_ERR_ABORTED : -DPG_ERR_BACKEND;
	}
	if (abort_requested(m)) {
		kill_comm(m, "dpg_abort");
		dpg_errf(err, "NCCL %s: aborted (dpg_abort was called)", what);
		return -DPG_ERR_ABORTED;
	}
	if (cudaGetDevice(prev) != cudaSuccess)
		*prev = -1;
	if (*prev != m->device && (ce = cudaSetDevice(m->device)) != cudaSuccess)
		return cuda_fail(m, "cudaSetDevice", ce, err);
	return 0;
}

static void leave(struct nccl_impl *m, int prev)
{
	if (prev >= 0 && prev != m->device)
		cudaSetDevice(prev);
}

/* Finish a call: the enqueue result, then completion on the stream. */
static int complete(struct nccl_impl *m, const char *what, ncclResult_t r,
		    cudaStream_t s, int64_t deadline, struct dpg_err *err)
{
	int rc;

	if (r != ncclSuccess && r != ncclInProgress)
		return nccl_fail(m, what, r, err);
	if (r == ncclInProgress && (rc = wait_comm(m, what, deadline, err)) != 0)
		return rc;
	return wait_stream(m, what, s, deadline, err);
}

static bool map_dtype(dpg_dtype_t dt, ncclDataType_t *out)
{
	switch (dt) {
	case DPG_F32: *out = ncclFloat32; return true;
	case DPG_F64: *out = ncclFloat64; return true;
	case DPG_F16: *out = ncclFloat16; return true;
	case DPG_BF16: *out = ncclBfloat16; return true;
	case DPG_I32: *out = ncclInt32; return true;
	case DPG_I64: *out = ncclInt64; return true;
	}
	return false;
}

static bool map_op(dpg_op_t op, ncclRedOp_t *out)
{
	switch (op) {
	case DPG_SUM: *out = ncclSum; return true;
	case DPG_AVG: *out = ncclAvg; return true;
	case DPG_MIN: *out = ncclMin; return true;
	case DPG_MAX: *out = ncclMax; return true;
	}
	return false;
}

static size_t dtype_bytes(dpg_dtype_t dt)
{
	return dpg_dtype_size(dt);
}

static int bad_types(dpg_dtype_t dt, int op, struct dpg_err *err)
{
	dpg_errf(err, "NCCL: unsupported dtype %d or op %d", (int)dt, op);
	return -DPG_ERR_INVALID;
}

/* ------------------------------------------------------------ collectives */

static int n_allreduce(struct dpg_comm *c, const void *send, void *recv,
		       size_t count, dpg_dtype_t dt, dpg_op_t op, void *stream,
		       struct dpg_err *err)
{
	struct nccl_impl *m = c->impl;
	ncclDataType_t t;
	ncclRedOp_t o;
	int prev, rc;

	if (!map_dtype(dt, &t) || !map_op(op, &o))
		return bad_types(dt, (int)op, err);
	if ((rc = enter(m, "allreduce", &prev, err)) != 0)
		return rc;
	rc = complete(m, "allreduce", ncclAllReduce(send, recv, count, t, o, m->comm,
						     (cudaStream_t)stream),
		      (cudaStream_t)stream, deadline_of(m->timeout_s), err);
	leave(m, prev);
	return rc;
}

static int n_reduce_scatter(struct dpg_comm *c, const void *send, void *recv,
			    size_t recvcount, dpg_dtype_t dt, dpg_op_t op,
			    void *stream, struct dpg_err *err)
{
	struct nccl_impl *m = c->impl;
	cudaStream_t s = (cudaStream_t)stream;
	size_t bytes = recvcount * dtype_bytes(dt);
	int64_t deadline = deadline_of(m->timeout_s);
	ncclDataType_t t;
	ncclRedOp_t o;
	cudaError_t ce;
	int prev, rc;

	if (!map_dtype(dt, &t) || !map_op(op, &o))
		return bad_types(dt, (int)op, err);
	if ((rc = enter(m, "reduce_scatter", &prev, err)) != 0)
		return rc;
	if (send == recv && c->rank != 0 && recvcount > 0) {
		/* dpg's in place (result at the start) is not NCCL's (result at
		 * this rank's block): reduce in NCCL's form, then move it */
		char *block = (char *)recv + (size_t)c->rank * bytes;

		rc = complete(m, "reduce_scatter", ncclReduceScatter(send, block,
				recvcount, t, o, m->comm, s), s, deadline, err);
		if (rc == 0 && (ce = cudaMemcpyAsync(recv, block, bytes,
						     cudaMemcpyDeviceToDevice, s)) !=
		    cudaSuccess)
			rc = cuda_fail(m, "cudaMemcpyAsync", ce, err);
		if (rc == 0)
			rc = wait_stream(m, "reduce_scatter", s, deadline, err);
	} else {
		rc = complete(m, "reduce_scatter", ncclReduceScatter(send, recv,
				recvcount, t, o, m->comm, s), s, deadline, err);
	}
	leave(m, prev);
	return rc;
}

static int n_all_gather(struct dpg_comm *c, const void *send, void *recv,
			size_t sendcount, dpg_dtype_t dt, void *stream,
			struct dpg_err *err)
{
	struct nccl_impl *m = c->impl;
	cudaStream_t s = (cudaStream_t)stream;
	size_t bytes = sendcount * dtype_bytes(dt);
	int64_t deadline = deadline_of(m->timeout_s);
	ncclDataType_t t;
	cudaError_t ce;
	int prev, rc;

	if (!map_dtype(dt, &t))
		return bad_types(dt, -1, err);
	if ((rc = enter(m, "all_gather", &prev, err)) != 0)
		return rc;
	if (send == recv && c->rank != 0 && sendcount > 0) {
		/* move this rank's data to its block: NCCL's in-place form */
		char *block = (char *)recv + (size_t)c->rank * bytes;

		ce = cudaMemcpyAsync(block, send, bytes, cudaMemcpyDeviceToDevice, s);
		if (ce != cudaSuccess)
			rc = cuda_fail(m, "cudaMemcpyAsync", ce, err);
		else
			rc = complete(m, "all_gather", ncclAllGather(block, recv,
					sendcount, t, m->comm, s), s, deadline, err);
	} else {
		rc = complete(m, "all_gather", ncclAllGather(send, recv, sendcount, t,
							       m->comm, s),
			      s, deadline, err);
	}
	leave(m, prev);
	return rc;
}

static int n_broadcast(struct dpg_comm *c, void *buf, size_t count,
		       dpg_dtype_t dt, int root, void *stream, struct dpg_err *err)
{
	struct nccl_impl *m = c->impl;
	ncclDataType_t t;
	int prev, rc;

	if (!map_dtype(dt, &t))
		return bad_types(dt, -1, err);
	if ((rc = enter(m, "broadcast", &prev, err)) != 0)
		return rc;
	rc = complete(m, "broadcast", ncclBroadcast(buf, buf, count, t, root, m->comm,
						     (cudaStream_t)stream),
		      (cudaStream_t)stream, deadline_of(m->timeout_s), err);
	leave(m, prev);
	return rc;
}

static int n_barrier(struct dpg_comm *c, struct dpg_err *err)
{
	struct nccl_impl *m = c->impl;
	int prev, rc;

	if ((rc = enter(m, "barrier", &prev, err)) != 0)
		return rc;
	rc = complete(m, "barrier", ncclAllReduce(m->scratch, m->scratch, 1, ncclInt32,
						   ncclSum, m->comm, m->bstream),
		      m->bstream, deadline_of(m->timeout_s), err);
	leave(m, prev);
	return rc;
}

/* ------------------------------------------------------------ prefetch */

/* The side stream of all_gather_start, made on first use: non-blocking, so
 * that it runs beside the default stream's compute. */
static int side_stream(struct nccl_impl *m, struct dpg_err *err)
{
	cudaError_t ce;

	if (m->pstream != NULL)
		return 0;
	ce = cudaStreamCreateWithFlags(&m->pstream, cudaStreamNonBlocking);
	if (ce != cudaSuccess) {
		m->pstream = NULL;
		return cuda_fail(m, "cudaStreamCreateWithFlags", ce, err);
	}
	return 0;
}

/* Order the side stream after what the default stream has been given so
 * far (the shard the gather reads is written there), not after later work. */
static int after_default_stream(struct nccl_impl *m, struct dpg_err *err)
{
	cudaEvent_t in = NULL;
	cudaError_t ce;

	ce = cudaEventCreateWithFlags(&in, cudaEventDisableTiming);
	if (ce == cudaSuccess)
		ce = cudaEventRecord(in, NULL);
	if (ce == cudaSuccess)
		ce = cudaStreamWaitEvent(m->pstream, in, 0);
	if (in != NULL)
		cudaEventDestroy(in);	/* released once the wait is done */
	return ce == cudaSuccess ? 0 : cuda_fail(m, "ordering the prefetch stream", ce, err);
}

/* Enqueue an all_gather on the side stream; *ticket: an event recorded after
 * it, for n_wait_ticket.  Returns once NCCL has taken the call. */
static int n_all_gather_start(struct dpg_comm *c, const void *send, void *recv,
			      size_t sendcount, dpg_dtype_t dt, void **ticket,
			      struct dpg_err *err)
{
	struct nccl_impl *m = c->impl;
	cudaEvent_t ev = NULL;
	ncclDataType_t t;
	ncclResult_t r;
	cudaError_t ce;
	int prev, rc;

	*ticket = NULL;
	if (!map_dtype(dt, &t) || send == recv)
		return bad_types(dt, -1, err);
	if ((rc = enter(m, "all_gather", &prev, err)) != 0)
		return rc;
	if ((rc = side_stream(m, err)) != 0 || (rc = after_default_stream(m, err)) != 0)
		goto out;
	r = ncclAllGather(send, recv, sendcount, t, m->comm, m->pstream);
	if (r != ncclSuccess && r != ncclInProgress) {
		rc = nccl_fail(m, "all_gather", r, err);
		goto out;
	}
	if (r == ncclInProgress &&
	    (rc = wait_comm(m, "all_gather", deadline_of(m->timeout_s), err)) != 0)
		goto out;
	ce = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
	if (ce == cudaSuccess)
		ce = cudaEventRecord(ev, m->pstream);
	if (ce != cudaSuccess) {
		if (ev != NULL)
			cudaEventDestroy(ev);
		rc = cuda_fail(m, "cudaEventRecord", ce, err);
		goto out;
	}
	*ticket = ev;
out:
	leave(m, prev);
	return rc;
}

/* Wait for a ticket of n_all_gather_start and free it, whatever the outcome. */
static int n_wait_ticket(struct dpg_comm *c, void *ticket, struct dpg_err *err)
{
	struct nccl_impl *m = c->impl;
	cudaEvent_t ev = ticket;
	int prev, rc;

	if (ev == NULL)
		return 0;
	if ((rc = enter(m, "all_gather", &prev, err)) == 0) {
		rc = wait_work(m, "all_gather", NULL, ev, deadline_of(m->timeout_s), err);
		leave(m, prev);
	}
	cudaEventDestroy(ev);
	return rc;
}

static void n_abort(struct dpg_comm *c)
{
	struct nccl_impl *m = c->impl;

	/* the thread in (or next entering) a wait calls ncclCommAbort */
	if (m != NULL)
		__atomic_store_n(&m->aborted, 1, __ATOMIC_SEQ_CST);
}

static void n_destroy(struct dpg_comm *c)
{
	struct nccl_impl *m = c->impl;
	struct dpg_err err;
	int prev = -1;

	if (m == NULL)
		return;
	if (cudaGetDevice(&prev) != cudaSuccess)
		prev = -1;
	cudaSetDevice(m->device);
	if (m->comm != NULL) {
		if (m->broken != NULL || abort_requested(m)) {
			kill_comm(m, "destroy");
		} else {
			/* flush and leave together; abort if that cannot finish */
			ncclResult_t r = ncclCommFinalize(m->comm);

			if ((r != ncclSuccess && r != ncclInProgress) ||
			    wait_comm(m, "finalize", deadline_of(m->timeout_s),
				      &err) != 0)
				kill_comm(m, "destroy");
			if (m->comm != NULL) {
				ncclCommDestroy(m->comm);
				m->comm = NULL;
			}
		}
	}
	if (m->scratch != NULL)
		cudaFree(m->scratch);
	if (m->bstream != NULL)
		cudaStreamDestroy(m->bstream);
	if (m->pstream != NULL)
		cudaStreamDestroy(m->pstream);
	if (prev >= 0)
		cudaSetDevice(prev);
	free(m);
	c->impl = NULL;
}

static const struct dpg_comm_ops nccl_ops = {
	.name = "nccl",
	.allreduce = n_allreduce,
	.reduce_scatter = n_reduce_scatter,
	.all_gather = n_all_gather,
	.all_gather_start = n_all_gather_start,
	.wait_ticket = n_wait_ticket,
	.broadcast = n_broadcast,
	.barrier = n_barrier,
	.abort = n_abort,
	.destroy = n_destroy,
};

/* ------------------------------------------------------------ init */

/* Rank 0 makes the id and publishes it; the others fetch it. */
static int exchange_id(struct dpg_comm *c, const struct dpg_backend_args *a,
		       ncclUniqueId *id, int64_t deadline, struct dpg_err *err)
{
	char key[DPG_STORE_KEY_MAX + 1];
	void *v = NULL;
	size_t len = 0;
	ncclResult_t r;
	int rc;

	if (c->size == 1 && c->rank == 0) {
		r = ncclGetUniqueId(id);
		if (r != ncclSuccess)
			return dpg_errf(err, "ncclGetUniqueId: %s", ncclGetErrorString(r)),
			       -DPG_ERR_BACKEND;
		return 0;
	}
	if (a->store == NULL)
		return dpg_errf(err, "NCCL init of %s: no rendezvous store", c->name),
		       -DPG_ERR_INVALID;
	snprintf(key, sizeof(key), "%s/nccl/%s/id", a->key_ns, c->name);
	if (c->rank == 0) {
		r = ncclGetUniqueId(id);
		if (r != ncclSuccess)
			return dpg_errf(err, "ncclGetUniqueId: %s", ncclGetErrorString(r)),
			       -DPG_ERR_BACKEND;
		return a->store_set(a->store, key, id, sizeof(*id), deadline, err);
	}
	rc = a->store_get(a->store, key, &v, &len, deadline, err);
	if (rc != 0)
		return rc;
	if (len != sizeof(*id)) {
		free(v);
		return dpg_errf(err, "NCCL id of %s has %zu bytes, not %zu (a "
				"different NCCL version on rank 0?)", c->name, len,
				sizeof(*id)),
		       -DPG_ERR_PEER;
	}
	memcpy(id, v, sizeof(*id));
	free(v);
	return 0;
}

int dpg_nccl_comm_init(struct dpg_comm *c, const struct dpg_backend_args *a,
		       struct dpg_err *err)
{
	int64_t deadline = deadline_of(a->timeout_s);
	int device = a->device;
	struct nccl_impl *m;
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	ncclUniqueId id;
	ncclResult_t r;
	cudaError_t ce;
	int rc, prev = -1;

	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return dpg_errf(err, "out of memory"), -DPG_ERR_NOMEM;
	m->device = device;
	m->timeout_s = a->timeout_s;
	m->ctx_abort = a->abort;
	memset(&id, 0, sizeof(id));
	if (cudaGetDevice(&prev) != cudaSuccess)
		prev = -1;
	if ((ce = cudaSetDevice(device)) != cudaSuccess) {
		dpg_errf(err, "cudaSetDevice(%d): %s", device, cudaGetErrorString(ce));
		free(m);
		return -DPG_ERR_BACKEND;
	}
	rc = exchange_id(c, a, &id, deadline, err);
	if (rc != 0)
		goto fail;
	if ((ce = cudaMalloc((void **)&m->scratch, sizeof(int))) != cudaSuccess ||
	    (ce = cudaMemset(m->scratch, 0, sizeof(int))) != cudaSuccess ||
	    (ce = cudaStreamCreateWithFlags(&m->bstream, cudaStreamNonBlocking)) !=
	    cudaSuccess) {
		dpg_errf(err, "CUDA on device %d: %s", device, cudaGetErrorString(ce));
		rc = -DPG_ERR_BACKEND;
		goto fail;
	}
	cfg.blocking = 0;
	cfg.commName = c->name;
	r = ncclCommInitRankConfig(&m->comm, c->size, id, c->rank, &cfg);
	if (r != ncclSuccess && r != ncclInProgress) {
		rc = nccl_fail(m, "ncclCommInitRankConfig", r, err);
		goto fail;
	}
	rc = wait_comm(m, "init", deadline, err);
	if (rc != 0)
		goto fail;
	c->impl = m;
	c->ops = &nccl_ops;
	if (prev >= 0 && prev != device)
		cudaSetDevice(prev);
	return 0;
fail:
	if (m->comm != NULL)
		ncclCommAbort(m->comm);
	if (m->scratch != NULL)
		cudaFree(m->scratch);
	if (m->bstream != NULL)
		cudaStreamDestroy(m->bstream);
	free(m);
	if (prev >= 0 && prev != device)
		cudaSetDevice(prev);
	dpg_err_prefix(err, "NCCL communicator");
	return rc;
}

/* ------------------------------------------------------------ split */

#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
/* Wait for a nonblocking split.  NCCL stores the child's communicator in
 * pm->split_slot only when the split is done, which the parent's async state
 * tells (the split is the parent's pending call); then the child (m, when
 * this rank has one) takes it and waits for its own state. */
static int complete_split(struct nccl_impl *pm, struct nccl_impl *m,
			  ncclResult_t r, struct dpg_err *err)
{
	int64_t deadline = deadline_of(pm->timeout_s);
	ncclComm_t nc;
	int rc;

	if (r != ncclSuccess && r != ncclInProgress)
		return nccl_fail(pm, "ncclCommSplit", r, err);
	if ((rc = wait_comm(pm, "split", deadline, err)) != 0)
		return rc;
	nc = __atomic_load_n(&pm->split_slot, __ATOMIC_ACQUIRE);
	pm->split_slot = NULL;
	if (m == NULL) {
		if (nc != NULL)	/* in no part, yet given one: not ours */
			ncclCommAbort(nc);
		return 0;
	}
	if (nc == NULL)
		return dpg_errf(err, "NCCL split: ncclCommSplit completed without a "
				"communicator for this rank"), -DPG_ERR_BACKEND;
	m->comm = nc;
	return wait_comm(m, "split", deadline, err);
}

/* A new impl on the parent's device, with its scratch and barrier stream. */
static int split_impl(const struct nccl_impl *pm, const struct dpg_backend_args *a,
		      struct nccl_impl **out, struct dpg_err *err)
{
	struct nccl_impl *m = calloc(1, sizeof(*m));
	cudaError_t ce;

	if (m == NULL)
		return dpg_errf(err, "out of memory"), -DPG_ERR_NOMEM;
	m->device = pm->device;
	m->timeout_s = a->timeout_s;
	m->ctx_abort = a->abort;
	if ((ce = cudaMalloc((void **)&m->scratch, sizeof(int))) != cudaSuccess ||
	    (ce = cudaMemset(m->scratch, 0, sizeof(int))) != cudaSuccess ||
	    (ce = cudaStreamCreateWithFlags(&m->bstream, cudaStreamNonBlocking)) !=
	    cudaSuccess) {
		dpg_errf(err, "CUDA on device %d: %s", m->device, cudaGetErrorString(ce));
		if (m->scratch != NULL)
			cudaFree(m->scratch);
		free(m);
		return -DPG_ERR_BACKEND;
	}
	*out = m;
	return 0;
}

static void split_free(struct nccl_impl *m)
{
	if (m->comm != NULL)
		ncclCommAbort(m->comm);
	cudaFree(m->scratch);
	cudaStreamDestroy(m->bstream);
	free(m);
}

/* ncclCommSplit of parent's communicator (every member of parent calls it;
 * child NULL: this rank is in no part, NCCL_SPLIT_NOCOLOR).  No store
 * round: NCCL bootstraps the child over the parent. */
int dpg_nccl_comm_split(struct dpg_comm *parent, struct dpg_comm *child,
			int color, int key, const struct dpg_backend_args *a,
			struct dpg_err *err)
{
	struct nccl_impl *pm = parent->impl, *m = NULL;
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	ncclResult_t r;
	int prev, rc;

	if ((rc = enter(pm, "comm_split", &prev, err)) != 0)
		return rc;
	if (child != NULL && (rc = split_impl(pm, a, &m, err)) != 0)
		goto out;
	cfg.blocking = 0;
	if (child != NULL)
		cfg.commName = child->name;
	pm->split_slot = NULL;
	r = ncclCommSplit(pm->comm, child != NULL ? color : NCCL_SPLIT_NOCOLOR, key,
			  &pm->split_slot, &cfg);
	rc = complete_split(pm, m, r, err);
	if (rc == 0 && child != NULL) {
		child->impl = m;
		child->ops = &nccl_ops;
	} else if (m != NULL) {
		split_free(m);
	}
out:
	leave(pm, prev);
	return rc;
}
#endif

int dpg_nccl_device_count(void)
{
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess)
		return 0;
	return n;
}

int dpg_nccl_pick_device(const char *busid, int local_rank, int *device,
			 struct dpg_err *err)
{
	cudaError_t ce;
	int n;

	if (busid != NULL && *busid != '\0') {
		ce = cudaDeviceGetByPCIBusId(device, busid);
		if (ce != cudaSuccess) {
			const char *cvd = getenv("CUDA_VISIBLE_DEVICES");

			return dpg_errf(err, "DPG_GPUS names GPU %s, which CUDA does not "
					"show this process (CUDA_VISIBLE_DEVICES=%s): %s",
					busid, cvd != NULL ? cvd : "(unset)",
					cudaGetErrorString(ce));
		}
		return 0;
	}
	n = dpg_nccl_device_count();
	if (n <= 0)
		return dpg_errf(err, "no CUDA device is visible to this process");
	*device = local_rank % n;
	return 0;
}
