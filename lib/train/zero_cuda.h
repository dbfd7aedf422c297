/* SPDX-License-Identifier: BSD-3-Clause */
/* zero_cuda.h - the sharded step's GPU side (zero_cuda.cu): device memory
 * and lib/optim.h's arithmetic as kernels; zero.c never includes CUDA. */
#ifndef DPG_LIB_ZERO_CUDA_H
#define DPG_LIB_ZERO_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every function returns 0 or a cudaError_t value; dpg_cuda_errstr names it.
 * stream is a cudaStream_t (NULL: the default stream). */
const char *dpg_cuda_errstr(int rc);
int dpg_cuda_set_device(int device);
int dpg_cuda_alloc(void **p, size_t bytes);	/* zeroed */
int dpg_cuda_free(void *p);
int dpg_cuda_memset0(void *p, size_t bytes, void *stream);
int dpg_cuda_h2d(void *dst, const void *src, size_t bytes, void *stream);	/* synchronous */
int dpg_cuda_d2h(void *dst, const void *src, size_t bytes, void *stream);	/* synchronous */
int dpg_cuda_d2d(void *dst, const void *src, size_t bytes, void *stream);
int dpg_cuda_sync(void *stream);

/* The same updates as dpg_adamw_update / dpg_sgd_update (optim.h). */
int dpg_cuda_adamw(float *p, float *m, float *v, const float *g, size_t n,
		   const struct dpg_adamw_hp *h, void *stream);
int dpg_cuda_sgd(float *p, float *buf, const float *g, size_t n,
		 const struct dpg_sgd_hp *h, void *stream);
/* sum of x[i]^2 in double, in a fixed order (deterministic); synchronous */
int dpg_cuda_sumsq(const float *x, size_t n, double *out, void *stream);
int dpg_cuda_scale(float *x, size_t n, float s, void *stream);
int dpg_cuda_f32_to_bf16(const float *in, uint16_t *out, size_t n, void *stream);
int dpg_cuda_bf16_to_f32(const uint16_t *in, float *out, size_t n, void *stream);

#ifdef __cplusplus
}
#endif

#endif
