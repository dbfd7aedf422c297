/* SPDX-License-Identifier: BSD-3-Clause */
/* dpg_zero.h - public API of libdpg's sharded data-parallel training (ZeRO
 * stages 1-3, checkpoints, training helpers), over the runtime of dpg.h.
 *
 * The conventions of dpg.h hold: every call returns a dpg_status_t, the
 * message of a failure is in dpg_last_error() of the model's context.
 */
#ifndef DPG_ZERO_H
#define DPG_ZERO_H

#include "dpg.h"

/* dpg.h's stand-ins that name this header */
#undef dpg_zero_create
#undef dpg_zero_opts_default
#undef dpg_accum_steps
#undef dpg_lr_warmup_cosine
#undef dpg_seed
#undef dpg_shard_batch

#ifdef __cplusplus
extern "C" {
#endif

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
 *
 * The gradient g of a step is the MEAN over world x accum_steps
 * micro-batches: with G the sum of what every rank added into
 * dpg_zero_grad() over the k = accum_steps micro-steps, g = G / (world * k).
 * Add each micro-batch's mean-loss gradient as it is: do NOT divide the
 * loss or the gradients by k (the PyTorch accumulation habit), or the step
 * shrinks by k once more.
 * Clipping (clip_norm = c > 0): n = ||g||_2 over every parameter; when
 * n > c, g *= c / (n + 1e-6).  stats->grad_norm = n, ->clip_scale the factor.
 * Update of each element (t = 1, 2, ... the step, wd = weight_decay; every
 * operation one fp32 rounding, no FMA; m, v, b start at 0):
 *   AdamW (as torch.optim.AdamW, decay decoupled, on the pre-update p):
 *     m = beta1 * m + (1 - beta1) * g
 *     v = beta2 * v + (1 - beta2) * g * g
 *     p = p - lr * wd * p - a * m / (sqrt(v) + e)
 *   with a = lr * sqrt(1 - beta2^t) / (1 - beta1^t) and e = eps * sqrt(1 - beta2^t),
 *   each computed in double and rounded to fp32 once per step: torch's
 *   p -= lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps) in exact
 *   arithmetic, one division per element instead of three.
 *   SGD (as torch.optim.SGD, dampening 0, L2 decay):
 *     b = momentum * b + (g + wd * p);  p = p - lr * b
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

/* Register a tensor of numel elements in unit `unit`; *id gets its index
 * (0, 1, ...).  Units are 0, 1, 2, ... without gaps in registration order:
 * the first parameter is in unit 0, each next one in the unit of the one
 * before or the next (0,0,1,2,2 is right; 0,2 or 1,0 is DPG_ERR_INVALID).
 * The name (< 64 bytes) identifies it in checkpoints. */
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

/* Bytes this rank holds now for working parameters (stage 3: one buffer
 * of the largest unit per gathered unit, plus its shard where param_dtype
 * is bf16; an fp32 working shard is the master copy itself), gradients and
 * optimizer state (fp32 master + moments); cached_bytes: released buffers
 * kept for reuse, each the size of the largest unit: at most two stage-3
 * gather buffers and two unit gradients (stages 2-3, and bf16 reductions);
 * the padded element count of the model and of one shard. */
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
/* Asynchronous save: the same checkpoint as dpg_zero_save, but the call
 * blocks only while this rank's shard of the state is copied into host
 * memory (kept for the next save: the size of the optimizer state,
 * dpg_zero_mem_t.optim_bytes, of extra host memory); a background thread
 * writes and syncs the shard file while training goes on (the parameters
 * may change at once: the checkpoint holds the values of the call).
 * dpg_zero_save_wait waits for the write, then (collective, on the
 * calling thread) every rank agrees, rank 0 writes the metadata and flips
 * dir/latest: latest names the new step only once every shard is durable,
 * and a crash before leaves the previous checkpoint loadable.  A failure
 * of the background write is returned by dpg_zero_save_wait (latest then
 * unchanged).  One save at a time: dpg_zero_save_async, dpg_zero_save and
 * dpg_zero_load first finish the one in flight (as dpg_zero_save_wait; its
 * failure is their result, and the new save is not started).
 * dpg_zero_save_wait with none in flight returns DPG_OK.  dpg_zero_destroy
 * waits for the background write but cannot commit it (that needs every
 * rank): call dpg_zero_save_wait before.  Both collective. */
dpg_status_t dpg_zero_save_async(dpg_zero_t *z, const char *dir, const void *extra,
				 size_t extra_len);
dpg_status_t dpg_zero_save_wait(dpg_zero_t *z);
/* Load dir/latest, at any world size (resharded on load); refuses a
 * corrupt file or another model.  extra gets the saved extra bytes and
 * *extra_len their count: extra NULL ignores them (extra_cap is then not
 * looked at), extra_len NULL does not report the count; a non-NULL extra
 * with less than their count in extra_cap is DPG_ERR_INVALID.  Collective. */
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

#ifdef __cplusplus
}
#endif

#endif
