/* SPDX-License-Identifier: BSD-3-Clause */
/* dpg.h - public API of libdpg, the runtime companion of the dpg SPANK plugin:
 * join a job from its environment, then run collectives on NCCL or the CPU.
 *
 * Conventions
 *  - Every call returns a dpg_status_t; DPG_OK is 0.  After a failure,
 *    dpg_last_error(ctx) holds one line naming the rank, host, operation and
 *    (where there is one) the peer, e.g.
 *    "rank 3 (n2) allreduce #17 on w: peer rank 0 (10.0.0.1) exited" (the
 *    peer is named by the address its rank was reached at).
 *  - The library never calls exit() or abort() and never blocks forever:
 *    every blocking call ends by the context's deadline (DPG_TIMEOUT seconds,
 *    default 300) with DPG_ERR_TIMEOUT.
 *  - A failed communicator stays failed: after a collective fails with any
 *    status but DPG_ERR_INVALID (arguments refused before anything was
 *    sent), every later call on it fails again without communicating.
 *    There is no repair: dpg_finalize() and, to go on, dpg_init() anew.
 *  - Nodes: two ranks are "of one node" when their node names are equal,
 *    nothing else: SLURMD_NODENAME when set (Slurm sets it), else the short
 *    host name (gethostname up to the first dot).  Ranks of one node use a
 *    shared-memory segment, the others TCP.  To test the TCP path on one
 *    host, give every rank its own name (SLURMD_NODENAME=fake$RANK).
 *  - Thread safety: a context and its communicators may be used from one
 *    thread at a time (collectives on one communicator must be issued in the
 *    same order on every rank, as with MPI and NCCL); dpg_abort() may be
 *    called from any thread at any time; dpg_version() and dpg_strerror()
 *    are always safe.  A context of more than one process runs one thread
 *    of its own (the hang report's responder, parked on the store until a
 *    collective times out somewhere), stopped by dpg_finalize; a process
 *    forked after dpg_init has no such thread (nor a usable context).
 *  - Matching collectives (CPU backend): every collective carries a stamp
 *    of what it is (its number on the communicator, kind, count, dtype, op,
 *    root), sent with its first data, and the ranks compare stamps before
 *    they use each other's data.  Calls that do not match (8 vs 4 elements,
 *    another dtype, op or root, allreduce on one rank and broadcast on
 *    another, or a rank that skipped a call) fail with DPG_ERR_INVALID on
 *    the ranks that meet the mismatch, naming both sides, e.g. "rank 0 (n1)
 *    allreduce #3 on w: collective mismatch: rank 0 (10.0.0.1) issued
 *    allreduce #3 (8 x f32, sum), rank 1 (10.0.0.2) issued broadcast #3 (4 x
 *    f32, root 0)"; the others learn it at once ("collective mismatch: rank
 *    1 ... issued a different collective than rank 2 ..."), the communicator
 *    then stays failed.  Every rank of a communicator of one node, and every
 *    rank of an allreduce, reduce_scatter, all_gather or barrier, fails in
 *    the mismatched call itself; a broadcast over nodes can complete on its
 *    root (which takes nothing from the others: it checks the stamp the
 *    ring sends back at its next call) and on the ranks between the root
 *    and the mismatch, which fail at their next call.
 *    A call refused by its own argument checks (DPG_ERR_INVALID before any
 *    communication) still takes its number, so the peers' matching call is
 *    reported as a mismatch instead of pairing with this rank's next call.
 *    Calls with count 0 are local no-ops and are not compared.  NCCL cannot
 *    carry a stamp in its data path: on DPG_BACKEND_NCCL mismatched calls
 *    are not detected (they hang until the timeout or give wrong data).
 */
#ifndef DPG_H
#define DPG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DPG_VERSION_MAJOR 0
#define DPG_VERSION_MINOR 1
#define DPG_VERSION_PATCH 0
#define DPG_VERSION ((DPG_VERSION_MAJOR * 10000) + (DPG_VERSION_MINOR * 100) + \
		     DPG_VERSION_PATCH)

/* Version of the environment contract (DPG_CONTRACT) this header reads. */
#define DPG_CONTRACT_VERSION 1

typedef enum {
	DPG_OK = 0,
	DPG_ERR_INVALID,	/* bad argument */
	DPG_ERR_ENV,		/* missing or inconsistent environment, on
				 * every rank alike: also an unresolvable
				 * MASTER_ADDR, a MASTER_PORT held by another
				 * process, or answered by a service that is
				 * not a dpg store */
	DPG_ERR_TIMEOUT,	/* a deadline passed */
	DPG_ERR_PEER,		/* a peer died or broke the protocol */
	DPG_ERR_AUTH,		/* wrong or missing job secret (a dpg store
				 * refused it, or it refused ours) */
	DPG_ERR_SYSTEM,		/* a system call failed */
	DPG_ERR_NOMEM,
	DPG_ERR_UNSUPPORTED,	/* e.g. NCCL asked for, GPU module not installed */
	DPG_ERR_BACKEND,	/* NCCL or CUDA reported an error */
	DPG_ERR_ABORTED,	/* dpg_abort() was called */
} dpg_status_t;

typedef enum {
	DPG_F32 = 0,
	DPG_F64,
	DPG_F16,	/* IEEE half; reduced in f32 */
	DPG_BF16,	/* bfloat16; reduced in f32 */
	/* f16 / bf16 sums and averages (CPU backend, any path: shared memory,
	 * TCP ring, any world size) are one rounding of an f32 sum: the ring
	 * carries its partial sums as f32 (twice the bytes on those hops) and
	 * rounds once at the end.  The f32 additions run in the algorithm's
	 * order (shared memory: rank order; ring: ring order), so paths can
	 * differ in the last bit where two f32 sums round to different 16-bit
	 * values; every rank of one call gets the same bits. */
	DPG_I32,
	DPG_I64,
} dpg_dtype_t;

typedef enum {
	DPG_SUM = 0,
	DPG_AVG,	/* sum / size; integers: the exact sum (CPU backend: no
			 * wrap-around, avg(2e9, 2e9) in i32 is 2e9; NCCL's
			 * ncclAvg sums in the type), truncated toward zero */
	DPG_MIN,
	DPG_MAX,
} dpg_op_t;

typedef enum {
	DPG_BACKEND_AUTO = 0,	/* NCCL when built and the task has a GPU */
	DPG_BACKEND_CPU,
	DPG_BACKEND_NCCL,
} dpg_backend_t;

typedef struct dpg_ctx dpg_ctx_t;	/* one per process: the job */
typedef struct dpg_comm dpg_comm_t;	/* a group of ranks on one backend */

/* Explicit settings; -1 / NULL / 0 mean "take it from the environment". */
typedef struct dpg_init_opts {
	int rank, world_size;
	int local_rank, local_world_size;
	const char *master_addr;
	int master_port;
	const char *secret;	/* hex job secret; default DPG_SECRET */
	double timeout_s;	/* default DPG_TIMEOUT or 300 */
	dpg_backend_t backend;	/* default DPG_BACKEND or auto */
	int device;		/* CUDA device for NCCL; default: the plugin's */
} dpg_init_opts_t;

/* Fill opts with "take everything from the environment". */
void dpg_init_opts_default(dpg_init_opts_t *opts);

/* Join the job described by opts and the environment (DPG_*, the torchrun
 * names, SLURM_* under srun, Open MPI / PMI variables).  No distributed
 * environment at all gives a single-process world; an inconsistent one is
 * DPG_ERR_ENV.  On failure *out may still be set so that dpg_last_error()
 * can be read; dpg_finalize() it in every case. */
dpg_status_t dpg_init(const dpg_init_opts_t *opts, dpg_ctx_t **out);

/* Leave the job and free everything (also after errors; NULL is fine).
 * Collective: every rank waits for the others (on the CPU backend a world
 * barrier first, so a rank that died meanwhile is DPG_ERR_PEER at once);
 * resources are freed whatever it returns.  After a successful finalize
 * no rank returns before rank 0's rendezvous store is down, so a new
 * dpg_init (same MASTER_ADDR/PORT, e.g. a restart inside the process) can
 * follow at once on every rank.
 *
 * Write dpg_finalize(&ctx) (C11 and C++; in C99 dpg_finalize_and_clear(&ctx)):
 * it also sets ctx to NULL, so that every later
 * call through it is DPG_ERR_INVALID (dpg_world(NULL) is NULL, the
 * accessors give -1) and a second dpg_finalize(&ctx) is a harmless DPG_OK,
 * where a freed context would be a use after free.  dpg_finalize(ctx) with
 * the pointer itself still works but leaves ctx dangling.  Either way the
 * context's communicators (dpg_world included) and meshes are freed with
 * it: do not keep copies of them past dpg_finalize. */
dpg_status_t dpg_finalize(dpg_ctx_t *ctx);

/* dpg_finalize(&ctx): finalize *ctx and set *ctx = NULL (NULL is fine). */
static inline dpg_status_t dpg_finalize_and_clear(dpg_ctx_t **ctx)
{
	dpg_ctx_t *c = ctx != NULL ? *ctx : NULL;

	if (ctx != NULL)
		*ctx = NULL;
	return (dpg_finalize)(c);
}
#if !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define dpg_finalize(ctx) _Generic((ctx), \
	dpg_ctx_t **: dpg_finalize_and_clear, \
	default: dpg_finalize)(ctx)
#endif

/* Tear down every communicator of ctx: calls blocked in other threads
 * return DPG_ERR_ABORTED.  Safe from any thread and from signal-free
 * contexts; the context must still be finalized. */
dpg_status_t dpg_abort(dpg_ctx_t *ctx);

int dpg_rank(const dpg_ctx_t *ctx);
int dpg_world_size(const dpg_ctx_t *ctx);
int dpg_local_rank(const dpg_ctx_t *ctx);
int dpg_local_world_size(const dpg_ctx_t *ctx);
dpg_backend_t dpg_backend(const dpg_ctx_t *ctx);

/* The communicator of all ranks (owned by ctx). */
dpg_comm_t *dpg_world(dpg_ctx_t *ctx);

int dpg_comm_rank(const dpg_comm_t *comm);
int dpg_comm_size(const dpg_comm_t *comm);

/* Collectives.  stream is a cudaStream_t for NCCL (NULL = default stream)
 * and ignored by the CPU backend; send == recv is allowed (in place). */
dpg_status_t dpg_all_reduce(dpg_comm_t *comm, const void *send, void *recv,
			    size_t count, dpg_dtype_t dtype, dpg_op_t op,
			    void *stream);
/* The same as dpg_all_reduce: its earlier name, kept for compatibility. */
dpg_status_t dpg_allreduce(dpg_comm_t *comm, const void *send, void *recv,
			   size_t count, dpg_dtype_t dtype, dpg_op_t op,
			   void *stream);
/* recv gets recvcount elements: this rank's block of the reduced
 * size * recvcount elements of send. */
dpg_status_t dpg_reduce_scatter(dpg_comm_t *comm, const void *send, void *recv,
				size_t recvcount, dpg_dtype_t dtype, dpg_op_t op,
				void *stream);
/* recv gets size * sendcount elements, rank r's at r * sendcount. */
dpg_status_t dpg_all_gather(dpg_comm_t *comm, const void *send, void *recv,
			    size_t sendcount, dpg_dtype_t dtype, void *stream);
dpg_status_t dpg_broadcast(dpg_comm_t *comm, void *buf, size_t count,
			   dpg_dtype_t dtype, int root, void *stream);
dpg_status_t dpg_barrier(dpg_comm_t *comm);

/* Gather a variable-size byte buffer from every rank (host memory, any
 * backend): *out is one malloc'd block holding rank r's bytes at
 * offsets[r] with lengths lens[r]; free(*out), free(*offsets), free(*lens). */
dpg_status_t dpg_all_gather_bytes(dpg_comm_t *comm, const void *buf, size_t len,
				  void **out, size_t **offsets, size_t **lens);

/* New communicator of the ranks that pass the same color, ordered by
 * (key, rank); color < 0 = not a member (*out = NULL). */
dpg_status_t dpg_comm_split(dpg_comm_t *comm, int color, int key,
			    dpg_comm_t **out);
dpg_status_t dpg_comm_destroy(dpg_comm_t *comm);

/* A device mesh of ndims dimensions (outermost first) over the world;
 * sizes multiply to the world size; the innermost dimension is laid out
 * over consecutive ranks, so it stays inside a node when it divides the
 * ranks per node.  dpg_mesh_comm gives this rank's group along dim. */
typedef struct dpg_mesh dpg_mesh_t;
dpg_status_t dpg_mesh_create(dpg_ctx_t *ctx, int ndims, const int *sizes,
			     dpg_mesh_t **out);
dpg_comm_t *dpg_mesh_comm(dpg_mesh_t *mesh, int dim);
int dpg_mesh_coord(const dpg_mesh_t *mesh, int dim);
dpg_status_t dpg_mesh_destroy(dpg_mesh_t *mesh);

/* Straggler report.  libdpg times every collective on this rank (its entry
 * to its return; two clock reads).  A rank that arrives late spends the
 * least time inside collectives, the ones waiting for it the most, so over
 * a window the rank with the least time inside is the one the others
 * waited for, and their wait is how much more time they spent inside than
 * it (durations only: the nodes' clocks are never compared).
 * dpg_step_mark(ctx) marks the end of a training step; with DPG_REPORT=N in
 * the environment (or dpg_report_every(ctx, N)) every N-th mark reports the
 * window of the last N steps, rank 0 printing one line to stderr:
 *   "dpg report: steps 11-20: slowest rank 3 (n2, GPU 0000:43:00.0): the
 *   others waited 12.3 ms per step for it, 41% of a 30.0 ms step"
 * (the device is the PCI bus id from DPG_GPUS, when the task has a GPU).
 * Reporting is collective on the world (an exchange of 64 bytes per rank
 * that is itself not counted): every rank must mark its steps alike and use
 * the same N.  dpg_straggler_report(ctx, buf, len) reports the window since
 * the last report now, on every rank (collective), into buf (NULL, 0: only
 * dpg_straggler_report's own record).  Collectives of every communicator of
 * ctx count, dpg_zero's prefetch thread's not.  On DPG_BACKEND_NCCL a call
 * returns once its stream has finished it, so the waits include the GPU's.
 * Hang report: when a collective times out, its error (dpg_last_error) goes
 * on with what every rank was doing, asked through the store, the answers
 * awaited DPG_TIMEOUT/40 (at least 0.25 s, at most 2 s; see "Hang report"
 * in libdpg(3)), e.g. with DPG_TIMEOUT=40 "; the ranks: allreduce #812 on
 * w: ranks 0-2,4-5 waiting since 40.1 s; rank 3 (n2, GPU 0000:43:00.0) last
 * entered allreduce #811, 41.0 s ago" or "rank 3 (n2): no answer in 1.0 s
 * (stopped, or gone)". */
dpg_status_t dpg_step_mark(dpg_ctx_t *ctx);
dpg_status_t dpg_report_every(dpg_ctx_t *ctx, unsigned steps);
dpg_status_t dpg_straggler_report(dpg_ctx_t *ctx, char *buf, size_t len);

/* Save, then requeue (see "Requeue" in libdpg(3) and spank-dpg(8)).
 * When the environment has DPG_REQUEUE=GRACE (seconds; the plugin sets it
 * for --dpg-requeue=GRACE or the admin's requeue=GRACE), dpg_init installs
 * handlers for SIGUSR1 (Slurm's warning, GRACE s before the time limit) and
 * SIGTERM (preemption; the time limit itself) that only set a flag; with
 * DPG_END_TIME (Unix seconds) as well, the flag also rises by itself GRACE s
 * before that time.  Without DPG_REQUEUE no handler is installed.
 * dpg_stop_requested(ctx, &stop) is collective on the world (a 4-byte
 * MAX allreduce; call it once per step, at the same step on every rank):
 * *stop is 1 on every rank as soon as any rank saw the flag, and stays 1.
 * The program then saves (dpg_zero_save), calls dpg_finalize and exits
 * with DPG_EXIT_REQUEUE, which the batch script turns into
 * "scontrol requeue $SLURM_JOB_ID"; the requeued job resumes from the
 * checkpoint. */
#define DPG_EXIT_REQUEUE 75	/* "requeue me" (EX_TEMPFAIL) */
dpg_status_t dpg_stop_requested(dpg_ctx_t *ctx, int *stop);

/* The last error of ctx as one line: the failure of the last call that
 * reached ctx (any call on it, its communicators, meshes or ZeRO state), ""
 * after a successful one (dpg_abort, which may run in another thread, and
 * the accessors leave it alone).  Valid until the next call on ctx.  A call
 * given a NULL handle (no context to record in) returns DPG_ERR_INVALID and
 * records nothing: dpg_last_error(NULL) returns a fixed text saying so. */
const char *dpg_last_error(const dpg_ctx_t *ctx);

/* A short name for a status ("timeout", "peer failure", ...). */
const char *dpg_strerror(dpg_status_t status);

/* The library's version as "MAJOR.MINOR.PATCH". */
const char *dpg_version(void);

/* The sharded-training API (dpg_zero_*, dpg_accum_steps, dpg_lr_warmup_cosine,
 * dpg_seed, dpg_shard_batch) is in dpg_zero.h, which includes this file.
 * Without it, a call of one of its entry points does not compile and the
 * error names the header (dpg_zero.h removes these macros). */
#ifndef DPG_ZERO_H
#define dpg_zero_create(...) (dpg_zero_create__needs__include_dpg_zero_h)
#define dpg_zero_opts_default(...) (dpg_zero_opts_default__needs__include_dpg_zero_h)
#define dpg_accum_steps(...) (dpg_accum_steps__needs__include_dpg_zero_h)
#define dpg_lr_warmup_cosine(...) (dpg_lr_warmup_cosine__needs__include_dpg_zero_h)
#define dpg_seed(...) (dpg_seed__needs__include_dpg_zero_h)
#define dpg_shard_batch(...) (dpg_shard_batch__needs__include_dpg_zero_h)
#endif

#ifdef __cplusplus
}

/* C++: dpg_finalize(&ctx) as an overload. */
static inline dpg_status_t dpg_finalize(dpg_ctx_t **ctx)
{
	return dpg_finalize_and_clear(ctx);
}
#endif

#endif
