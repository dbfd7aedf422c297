/* SPDX-License-Identifier: BSD-3-Clause */
/* zero_mem.h - the sharded model's buffers: the same operations on host and
 * device memory, and the pools of gather and gradient buffers. */
#ifndef DPG_LIB_ZERO_MEM_H
#define DPG_LIB_ZERO_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct dpg_gpumod_kernels;

/* Released buffers of one size kept for reuse, up to two: fresh memory
 * costs page faults on the host, and cudaMalloc / cudaFree, which
 * synchronize the device, on the GPU.  Every buffer holds the largest unit,
 * so that any unit fits. */
struct dpg_zpool {
	void *spare[2];
	int n;
	size_t bytes;
};

/* Where a model's buffers live.  Every function that can fail returns 0 or
 * -DPG_ERR_NOMEM / -DPG_ERR_BACKEND (CUDA) with its message in err. */
struct dpg_zmem {
	bool on_gpu;
	const struct dpg_gpumod_kernels *k;	/* the CUDA module's kernels (GPU) */
	int device;		/* the CUDA device to make current (GPU; -1: leave it) */
	int param_dtype;	/* dpg_dtype_t of the working parameters (dpg_zmem_cast) */
	struct dpg_zpool gather;	/* stage 3: the gathered units' parameters */
	struct dpg_zpool grad;		/* stages 2-3: the units' full gradients */
	size_t spare_bytes;		/* kept in both */
};

/* On the GPU? Then make m's device current (every buffer of m lives there,
 * whatever device the caller selected since) and return 1. */
int dpg_zmem_gpu(const struct dpg_zmem *m);
/* A CUDA status rc (!= 0) of m's kernels as -DPG_ERR_BACKEND with its message. */
int dpg_zmem_cuda_err(const struct dpg_zmem *m, struct dpg_err *err, int rc);

/* bytes of zeroed memory at *p (NULL for 0 bytes), added to *acct. */
int dpg_zmem_alloc(const struct dpg_zmem *m, void **p, size_t bytes, size_t *acct,
		   struct dpg_err *err);
/* The same without zeroing, for buffers written in full before they are read. */
int dpg_zmem_alloc_raw(const struct dpg_zmem *m, void **p, size_t bytes, size_t *acct,
		       struct dpg_err *err);
/* Free *p (NULL: nothing), set it NULL, take bytes off *acct. */
void dpg_zmem_free(const struct dpg_zmem *m, void **p, size_t bytes, size_t *acct);
/* A buffer of pl's size (counted in *acct, which may be NULL): a kept one,
 * else a new one; with zero > 0 its first zero bytes are zeros, written
 * before it returns (as dpg_zmem_alloc's: work on any stream sees them).
 * dpg_zmem_pool_put gives it back (kept, up to two, or freed). */
int dpg_zmem_pool_get(struct dpg_zmem *m, struct dpg_zpool *pl, size_t zero, void **p,
		      size_t *acct, struct dpg_err *err);
void dpg_zmem_pool_put(struct dpg_zmem *m, struct dpg_zpool *pl, void **p, size_t *acct);
/* Free the kept buffers of both pools. */
void dpg_zmem_pool_drain(struct dpg_zmem *m);

int dpg_zmem_zero(const struct dpg_zmem *m, void *p, size_t bytes, struct dpg_err *err);
/* host <-> buffer copies (dir 0: into the buffer, 1: out of it) */
int dpg_zmem_copy(const struct dpg_zmem *m, void *dst, const void *src, size_t bytes,
		  int dir, struct dpg_err *err);
/* fp32 -> working dtype, both in m's memory */
int dpg_zmem_cast(const struct dpg_zmem *m, void *dst, const float *src, size_t n,
		  struct dpg_err *err);
int dpg_zmem_to_bf16(const struct dpg_zmem *m, const float *in, uint16_t *out, size_t n,
		     struct dpg_err *err);
int dpg_zmem_from_bf16(const struct dpg_zmem *m, const uint16_t *in, float *out,
		       size_t n, struct dpg_err *err);
int dpg_zmem_sumsq(const struct dpg_zmem *m, const float *x, size_t n, double *out,
		   struct dpg_err *err);

#endif

