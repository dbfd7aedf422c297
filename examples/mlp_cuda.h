/* SPDX-License-Identifier: BSD-3-Clause */
/* mlp_cuda.h - the elementwise kernels of mlp-cuda.so (mlp_cuda.cu), each the GPU loop over one
 * function of mlp_math.h; tests/gpu/test_mlp_gpu calls them to compare with the host loops. */
#ifndef DPG_EXAMPLE_MLP_CUDA_H
#define DPG_EXAMPLE_MLP_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "mlp_dev.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Each returns 0 or a cudaError_t value; pointers are device memory; the
 * default stream; asynchronous. */
/* out[i][o] = mlp_act((double)b[o] + out[i][o], act), out n x n_out */
int mlp_cuda_bias_act(float *out, const float *b, int n, int n_out, int act);
/* per sample i: loss[i] = mlp_xent(z[i], c, y[i], scale, g[i]) */
int mlp_cuda_xent(const float *z, const int *y, int n, int c, double scale, float *g,
		  double *loss);
/* gb[o] += (float)mlp_col_sum(g, n, n_out, o) */
int mlp_cuda_col_sum_add(const float *g, int n, int n_out, float *gb);
/* gin[i] = mlp_dtanh(acc[i], act[i]) for i < count */
int mlp_cuda_dtanh(const float *acc, const float *act, size_t count, float *gin);
/* out[i] = mlp_bf16_to_f32(in[i]) */
int mlp_cuda_bf16_to_f32(const uint16_t *in, float *out, size_t count);

/* the module's table (its one export) */
const struct mlp_dev_ops *mlp_dev_v1(void);

#ifdef __cplusplus
}
#endif

#endif
