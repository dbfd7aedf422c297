/* SPDX-License-Identifier: BSD-3-Clause */
/* mlp_math.h - the MLP's shape and elementwise arithmetic, written once for the host loops (mlp.h) and
 * the device kernels (mlp_cuda.cu): activation, its derivative, the loss of a sample, a bias gradient. */
#ifndef DPG_EXAMPLE_MLP_MATH_H
#define DPG_EXAMPLE_MLP_MATH_H

/*
 * Each function is the same sequence of IEEE double operations on both
 * sides (no FMA: mlp_cuda.cu is built with --fmad=false, and x86-64 C
 * without -march has none), so mlp_dtanh, mlp_col_sum and mlp_bf16_to_f32
 * give the same bits on the GPU as on the host.  mlp_act and mlp_xent call
 * tanh, exp and log, which CUDA computes within 1-2 double ulps of glibc:
 * rounded to float their results agree to 1 float ulp (tests/gpu/test_mlp_gpu).
 * What is NOT here is the matrix products: the host sums them in double
 * (mlp.h), the GPU in float with cuBLAS (mlp_cuda.cu), in another order.
 */

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <math.h>

#ifdef __CUDACC__
#define MLP_FN static __host__ __device__ __forceinline__
#else
#define MLP_FN static inline
#endif

#define MLP_NTENSORS 6
#define MLP_NUNITS 3

typedef struct mlp_shape {
	int d, h, c;		/* inputs, hidden width, classes */
} mlp_shape_t;

/* A bf16 working parameter as float (bf16 is float's upper half). */
MLP_FN float mlp_bf16_to_f32(uint16_t v)
{
	uint32_t bits = (uint32_t)v << 16;
	float f;

	memcpy(&f, &bits, sizeof(f));
	return f;
}

/* A unit's output from its pre-activation acc (bias + dot product, in
 * double): tanh for the hidden units (act), the identity for the logits. */
MLP_FN float mlp_act(double acc, int act)
{
	return act ? (float)tanh(acc) : (float)acc;
}

/* Back through tanh: the error signal of a pre-activation from
 * acc = sum_o g[o] W[o][k] and the tanh output a it produced. */
MLP_FN float mlp_dtanh(double acc, float a)
{
	return (float)(acc * (1.0 - (double)a * a));
}

/* Softmax cross-entropy of one sample's c logits z with label y: returns
 * its loss and sets g[j] = scale * (softmax(z)[j] - [j == y]). */
MLP_FN double mlp_xent(const float *z, int c, int y, double scale, float *g)
{
	double m = z[0], tot = 0.0;

	for (int j = 1; j < c; j++)
		m = z[j] > m ? z[j] : m;
	for (int j = 0; j < c; j++)
		tot += exp(z[j] - m);
	for (int j = 0; j < c; j++)
		g[j] = (float)(scale * (exp(z[j] - m) / tot - (j == y)));
	return m + log(tot) - z[y];
}

/* Column o of the n x n_out row-major g summed in double, rows in order:
 * the bias gradient of output o. */
MLP_FN double mlp_col_sum(const float *g, int n, int n_out, int o)
{
	double acc = 0.0;

	for (int i = 0; i < n; i++)
		acc += g[(size_t)i * n_out + o];
	return acc;
}

#endif
