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
 *  - Thread safety: a context and its communicators may be used from one
 *    thread at a time (collectives on one communicator must be issued in the
 *    same order on every rank, as with MPI and NCCL); dpg_abort() may be
 *    called from any thread at any time; dpg_version() and dpg_strerror()
 *    are always safe.
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
	DPG_ERR_ENV,		/* missing or inconsistent environment */
	DPG_ERR_TIMEOUT,	/* a deadline passed */
	DPG_ERR_PEER,		/* a peer died or broke the protocol */
	DPG_ERR_AUTH,		/* wrong or missing job secret */
	DPG_ERR_SYSTEM,		/* a system call failed */
	DPG_ERR_NOMEM,
	DPG_ERR_UNSUPPORTED,	/* e.g. NCCL asked for but not built */
	DPG_ERR_BACKEND,	/* NCCL or CUDA reported an error */
	DPG_ERR_ABORTED,	/* dpg_abort() was called */
} dpg_status_t;

typedef enum {
	DPG_F32 = 0,
	DPG_F64,
	DPG_F16,	/* IEEE half; reduced in f32 */
	DPG_BF16,	/* bfloat16; reduced in f32 */
	DPG_I32,
	DPG_I64,
} dpg_dtype_t;

typedef enum {
	DPG_SUM = 0,
	DPG_AVG,	/* sum / size; integers round toward zero */
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
 * resources are freed whatever it returns. */
dpg_status_t dpg_finalize(dpg_ctx_t *ctx);

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

/* ---------------------------------------------------------------------
 * Sharded data parallelism (ZeRO stages 1-3)
 *
 * The program registers its parameter tensors, grouped in units (a unit is
 * what stage 3 gathers at once, e.g. a layer; unit ids count 0, 1, ... in
 * forward order).  Each unit is one flat buffer, padded so that it splits
 * into equal shards over the shard group (any parameter count, any group
 * size); rank i of the group owns the i-th shard of every unit.
 *   stage 1: optimizer state (fp32 master copy, moments) sharded;
 *   stage 2: + gradients reduce-scattered into shards (a unit's full
 *            gradient lives only from its first dpg_zero_grad() to its
 *            reduction);
 *   stage 3: + working parameters sharded; a unit's full parameters exist
 *            between dpg_zero_gather() and dpg_zero_release(), and the unit
 *            named as "next" is gathered in the background meanwhile.
 * One optimizer step = reduce-scatter (average) of the gradients -> optional
 * global-norm clipping -> update of the fp32 master shard (AdamW or SGD
 * with momentum) -> all-gather of the working parameters (stages 1, 2).
 * Buffers are host memory on the CPU backend and device memory on NCCL (on
 * the context's device, which the dpg_zero_* calls make current).
 * A dpg_zero_t is used from one thread, like its context.
 * ------------------------------------------------------------------- */
typedef struct dpg_zero dpg_zero_t;

typedef enum {
	DPG_OPT_ADAMW = 0,	/* Adam with decoupled weight decay */
	DPG_OPT_SGD,		/* SGD with (heavy-ball) momentum, L2 decay */
} dpg_optimizer_t;

typedef struct dpg_zero_opts {
	int stage;			/* 1, 2 or 3 (default 1) */
	dpg_optimizer_t optimizer;	/* default DPG_OPT_ADAMW */
	float beta1, beta2, eps;	/* AdamW; default 0.9, 0.999, 1e-8 */
	float momentum;			/* SGD; default 0.9 (0 = plain SGD) */
	float weight_decay;		/* default 0 */
	float clip_norm;		/* clip the global gradient norm; <= 0: off */
	dpg_dtype_t param_dtype;	/* working parameters: DPG_F32 or DPG_BF16 */
	dpg_dtype_t reduce_dtype;	/* gradient reduction: DPG_F32 or DPG_BF16 */
	int accum_steps;		/* micro-steps per optimizer step (default 1) */
	int shard_size;			/* ranks per shard group; 0 = the world
					 * (full sharding); a divisor of the world
					 * such as the ranks per node = hybrid
					 * sharding: shard inside a group of
					 * consecutive ranks, replicate across */
	int deterministic;		/* 1: the same parameters, bit for bit, at
					 * any world size, stage and shard size, as
					 * long as the micro-batch (and so world x
					 * accum_steps) is the same: gradients are
					 * summed in 64-bit fixed point (resolution
					 * 2^-32, |sum| < 2^18), which is exact and
					 * order-free.  CPU backend, fp32 reduction */
} dpg_zero_opts_t;

/* Defaults (stage 1, AdamW, fp32, no clipping, no accumulation, full). */
void dpg_zero_opts_default(dpg_zero_opts_t *opts);

/* k = global_batch / (micro_batch * dp_size) micro-steps per optimizer
 * step; DPG_ERR_INVALID (message in ctx) when it does not divide. */
dpg_status_t dpg_accum_steps(dpg_ctx_t *ctx, long global_batch, long micro_batch,
			     int dp_size, int *k);

/* A sharded model over ctx's world.  Free with dpg_zero_destroy(). */
dpg_status_t dpg_zero_create(dpg_ctx_t *ctx, const dpg_zero_opts_t *opts,
			     dpg_zero_t **out);
dpg_status_t dpg_zero_destroy(dpg_zero_t *z);

/* Register a tensor of numel elements in unit `unit` (units in
 * non-decreasing order); *id gets its index (0, 1, ...).  The name
 * (< 64 bytes) identifies it in checkpoints. */
dpg_status_t dpg_zero_add_param(dpg_zero_t *z, const char *name, size_t numel,
				int unit, int *id);
/* Lay out and allocate: no dpg_zero_add_param() after this. */
dpg_status_t dpg_zero_commit(dpg_zero_t *z);

/* Set parameter id from numel fp32 values in host memory; every rank must
 * pass the same values (e.g. from the same seed).  Not collective. */
dpg_status_t dpg_zero_set_param(dpg_zero_t *z, int id, const float *values);

/* Stage 3: make unit's full parameters available (all-gather; waits for a
 * prefetch in flight) and start gathering unit `next` in the background
 * (-1: none).  Stages 1-2: no-op.  Collective over the shard group. */
dpg_status_t dpg_zero_gather(dpg_zero_t *z, int unit, int next);
/* Stage 3: free unit's full parameters.  Stages 1-2: no-op. */
dpg_status_t dpg_zero_release(dpg_zero_t *z, int unit);

/* Working parameters of id (param_dtype; stage 3: only while its unit is
 * gathered; NULL otherwise). */
void *dpg_zero_param(dpg_zero_t *z, int id);
/* Gradient of id, fp32, numel elements, for the backward pass to ADD into;
 * zero at the start of each optimizer step; NULL on allocation failure. */
float *dpg_zero_grad(dpg_zero_t *z, int id);

/* Backward finished unit's gradients for this micro-step: on the last
 * micro-step of an optimizer step, stages 2-3 reduce-scatter them now and
 * free the full gradient (optional: dpg_zero_step reduces what is left). */
dpg_status_t dpg_zero_grads_ready(dpg_zero_t *z, int unit);

typedef struct dpg_step_stats {
	int stepped;		/* 1 when this call updated the parameters */
	long step;		/* optimizer steps done so far */
	double grad_norm;	/* global gradient norm before clipping */
	double clip_scale;	/* factor applied to the gradients (1 = none) */
} dpg_step_stats_t;

/* End a micro-step; on every accum_steps-th call, run the optimizer step
 * with learning rate lr (collective).  stats may be NULL. */
dpg_status_t dpg_zero_step(dpg_zero_t *z, float lr, dpg_step_stats_t *stats);

/* Bytes this rank holds now for working parameters (stage 3: its shard
 * plus one buffer of the largest unit per gathered unit), gradients and
 * optimizer state (fp32 master + moments); cached_bytes: released stage-3
 * gather buffers kept for reuse (at most two); the padded element count of
 * the model and of one shard. */
typedef struct dpg_zero_mem {
	size_t param_bytes, grad_bytes, optim_bytes;
	size_t cached_bytes;
	size_t padded_numel, shard_numel;
} dpg_zero_mem_t;
dpg_status_t dpg_zero_memory(const dpg_zero_t *z, dpg_zero_mem_t *mem);

/* Sharded checkpoint in directory dir (created if needed): each rank of
 * the first replica writes its shard of every unit (fp32 master and
 * optimizer state, global offsets, SHA-256) atomically, rank 0 writes the
 * metadata (parameters, step, the caller's extra bytes such as the data
 * position and RNG state) and then flips dir/latest; a crash during a save
 * leaves the previous checkpoint loadable.  Collective. */
dpg_status_t dpg_zero_save(dpg_zero_t *z, const char *dir, const void *extra,
			   size_t extra_len);
/* Load dir/latest, at any world size (resharded on load); refuses a
 * corrupt file or another model.  extra gets up to extra_cap bytes and
 * *extra_len their count (both may be NULL/0).  Collective. */
dpg_status_t dpg_zero_load(dpg_zero_t *z, const char *dir, void *extra,
			   size_t extra_cap, size_t *extra_len);

/* ---- training helpers (pure functions: they take no context, so a
 * failure has no message beyond its status) ---- */

/* Linear warm-up: step s < warmup gets lr_max * (s + 1) / warmup (warmup <= 0:
 * none); then cosine decay from lr_max at step warmup to lr_min at step
 * total, lr_min after. */
float dpg_lr_warmup_cosine(long step, long warmup, long total, float lr_max,
			   float lr_min);
/* A seed for (base, rank, stream): distinct, well mixed (splitmix64). */
uint64_t dpg_seed(uint64_t base, int rank, uint64_t stream);
/* The global batch of step `step` is global_batch consecutive positions of
 * a permutation of [0, n_samples) drawn from (seed, epoch); data-parallel
 * rank dp_rank gets indices[0..global_batch/dp_size).  Every sample of an
 * epoch appears once across ranks and steps (the tail that does not fill a
 * batch is dropped).  DPG_ERR_INVALID for a bad argument (dp_size does not
 * divide global_batch, global_batch > n_samples, rank out of range, a
 * negative step, NULL indices); DPG_ERR_NOMEM. */
dpg_status_t dpg_shard_batch(uint64_t seed, long n_samples, long global_batch,
			     long step, int dp_rank, int dp_size, long *indices);

/* The last error of ctx as one line ("" if none); valid until the next
 * call on ctx. */
const char *dpg_last_error(const dpg_ctx_t *ctx);

/* A short name for a status ("timeout", "peer failure", ...). */
const char *dpg_strerror(dpg_status_t status);

/* The library's version as "MAJOR.MINOR.PATCH". */
const char *dpg_version(void);

#ifdef __cplusplus
}
#endif

#endif
