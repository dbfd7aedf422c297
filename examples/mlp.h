/* SPDX-License-Identifier: BSD-3-Clause */
/* mlp.h - the model of examples/train: a 3-layer tanh MLP classifier with forward and backward over a
 * micro-batch, layer by layer (one unit per layer), a seeded initializer and a synthetic dataset. */
#ifndef DPG_EXAMPLE_MLP_H
#define DPG_EXAMPLE_MLP_H

/*
 * Model: x[D] -> h1 = tanh(W1 x + b1)[H] -> h2 = tanh(W2 h1 + b2)[H]
 *          -> z = W3 h2 + b3 [C] -> softmax cross-entropy with label y.
 * Six tensors, row-major, in three units (one per layer):
 *   0 W1 [H x D]  1 b1 [H]   (unit 0)
 *   2 W2 [H x H]  3 b2 [H]   (unit 1)
 *   4 W3 [C x H]  5 b3 [C]   (unit 2)
 * Gradients are ADDED into the caller's buffers (grad += ...), so that
 * micro-steps accumulate; they are those of grad_scale x (mean loss of the
 * micro-batch).  Plain C, no dependency on libdpg; everything is static
 * inline, no global state.  Dot products accumulate in double.
 *
 * Dataset: sample i of seed s is a pure function of (s, i): its D inputs
 * are standard normal values from a counter-based hash (splitmix64 of
 * (s, i, j)), its label is the argmax of a fixed random teacher network
 * (tanh(A x) -> B, also drawn from s), so the task is learnable.
 */

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mlp_math.h"	/* the shape, the elementwise math (shared with mlp_cuda.cu) */

#define MLP_TEACHER_H 16

/* The model of examples/train. */
static inline mlp_shape_t mlp_default_shape(void)
{
	mlp_shape_t s = { 32, 64, 10 };
	return s;
}

/* ------------------------------------------------------------ tensors */

/* Rows and columns of tensor t (biases are 1 column). */
static inline void mlp_tensor_dims(const mlp_shape_t *s, int t, int *rows, int *cols)
{
	static const int is_bias[MLP_NTENSORS] = { 0, 1, 0, 1, 0, 1 };
	int out = t < 4 ? s->h : s->c;
	int in = t < 2 ? s->d : s->h;

	*rows = out;
	*cols = is_bias[t] ? 1 : in;
}

static inline size_t mlp_numel(const mlp_shape_t *s, int t)
{
	int r, c;

	mlp_tensor_dims(s, t, &r, &c);
	return (size_t)r * (size_t)c;
}

static inline size_t mlp_total_numel(const mlp_shape_t *s)
{
	size_t n = 0;

	for (int t = 0; t < MLP_NTENSORS; t++)
		n += mlp_numel(s, t);
	return n;
}

static inline int mlp_unit_of(int t) { return t / 2; }

static inline const char *mlp_tensor_name(int t)
{
	static const char *const names[MLP_NTENSORS] = {
		"l1.weight", "l1.bias", "l2.weight", "l2.bias", "l3.weight", "l3.bias"
	};
	return t >= 0 && t < MLP_NTENSORS ? names[t] : "?";
}

/* ------------------------------------------------------------ hashing */

static inline uint64_t mlp_mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* A hash of (seed, a, b, c), well mixed. */
static inline uint64_t mlp_hash4(uint64_t seed, uint64_t a, uint64_t b, uint64_t c)
{
	return mlp_mix64(mlp_mix64(mlp_mix64(mlp_mix64(seed) ^ a) ^ b) ^ c);
}

/* Uniform in (0, 1), 53 bits. */
static inline double mlp_unit_uniform(uint64_t h)
{
	return ((double)(h >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* Standard normal (Box-Muller) as a pure function of (seed, a, b, c). */
static inline double mlp_normal(uint64_t seed, uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t h = mlp_hash4(seed, a, b, c);
	double u1 = mlp_unit_uniform(h);
	double u2 = mlp_unit_uniform(mlp_mix64(h ^ 0x5851f42d4c957f2dULL));

	return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* ------------------------------------------------------------ init */

/* Tensor t's initial values from seed (the same on every rank): weights
 * uniform in +-sqrt(6 / (fan_in + fan_out)) (Glorot, for tanh), biases 0.
 * out has mlp_numel(s, t) elements. */
static inline void mlp_init_tensor(const mlp_shape_t *s, uint64_t seed, int t, float *out)
{
	int rows, cols;

	mlp_tensor_dims(s, t, &rows, &cols);
	size_t n = (size_t)rows * (size_t)cols;
	if (cols == 1) {
		memset(out, 0, n * sizeof(float));
		return;
	}
	double a = sqrt(6.0 / (double)(rows + cols));
	for (size_t i = 0; i < n; i++)
		out[i] = (float)(a * (2.0 * mlp_unit_uniform(mlp_hash4(seed, 0x1417, (uint64_t)t, i)) - 1.0));
}

/* ------------------------------------------------------------ dataset */

typedef struct mlp_data {
	mlp_shape_t shape;
	uint64_t seed;
	float *teacher_a;	/* [MLP_TEACHER_H x d], owned */
	float *teacher_b;	/* [c x MLP_TEACHER_H], owned */
} mlp_data_t;

/* The dataset of seed: 0, or -1 when out of memory.  Free with
 * mlp_data_free() (also after a failure). */
static inline int mlp_data_init(mlp_data_t *data, const mlp_shape_t *s, uint64_t seed)
{
	size_t na = (size_t)MLP_TEACHER_H * (size_t)s->d;
	size_t nb = (size_t)s->c * MLP_TEACHER_H;

	data->shape = *s;
	data->seed = seed;
	data->teacher_a = malloc(na * sizeof(float));
	data->teacher_b = malloc(nb * sizeof(float));
	if (data->teacher_a == NULL || data->teacher_b == NULL)
		return -1;
	/* A ~ N(0, 4/d): pre-activations of spread ~2, a nonlinear boundary. */
	for (size_t i = 0; i < na; i++)
		data->teacher_a[i] = (float)(2.0 / sqrt((double)s->d) * mlp_normal(seed, 0x7ea1, 0, i));
	for (size_t i = 0; i < nb; i++)
		data->teacher_b[i] = (float)mlp_normal(seed, 0x7ea1, 1, i);
	return 0;
}

static inline void mlp_data_free(mlp_data_t *data)
{
	free(data->teacher_a);
	free(data->teacher_b);
	data->teacher_a = data->teacher_b = NULL;
}

/* Sample i: x gets d inputs, the return value is its label in [0, c). */
static inline int mlp_data_sample(const mlp_data_t *data, long i, float *x)
{
	const mlp_shape_t *s = &data->shape;
	double hid[MLP_TEACHER_H];
	int best = 0;
	double best_v = -INFINITY;

	for (int j = 0; j < s->d; j++)
		x[j] = (float)mlp_normal(data->seed, 0xda7a, (uint64_t)i, (uint64_t)j);
	for (int k = 0; k < MLP_TEACHER_H; k++) {
		double acc = 0.0;
		for (int j = 0; j < s->d; j++)
			acc += (double)data->teacher_a[(size_t)k * s->d + j] * x[j];
		hid[k] = tanh(acc);
	}
	for (int c = 0; c < s->c; c++) {
		double acc = 0.0;
		for (int k = 0; k < MLP_TEACHER_H; k++)
			acc += (double)data->teacher_b[(size_t)c * MLP_TEACHER_H + k] * hid[k];
		if (acc > best_v) {
			best_v = acc;
			best = c;
		}
	}
	return best;
}

/* ------------------------------------------------------------ workspace */

/* Activations of one micro-batch of up to cap samples. */
typedef struct mlp_work {
	mlp_shape_t shape;
	int cap, n;		/* capacity, samples loaded */
	float *x;		/* [cap x d] inputs */
	int *y;			/* [cap] labels */
	float *h1, *h2;		/* [cap x h] hidden activations (after tanh) */
	float *z;		/* [cap x c] logits */
	float *g3;		/* [cap x c] dL/dz */
	float *g2, *g1;		/* [cap x h] dL/d(pre-activation) of layers 2, 1 */
	double loss_sum;	/* sum of the per-sample losses of the last mlp_loss() */
} mlp_work_t;

/* 0, or -1 when out of memory; free with mlp_work_free() in every case. */
static inline int mlp_work_init(mlp_work_t *w, const mlp_shape_t *s, int cap)
{
	size_t n = (size_t)(cap > 0 ? cap : 1);

	memset(w, 0, sizeof(*w));
	w->shape = *s;
	w->cap = (int)n;
	w->x = calloc(n * (size_t)s->d, sizeof(float));
	w->y = calloc(n, sizeof(int));
	w->h1 = calloc(n * (size_t)s->h, sizeof(float));
	w->h2 = calloc(n * (size_t)s->h, sizeof(float));
	w->z = calloc(n * (size_t)s->c, sizeof(float));
	w->g3 = calloc(n * (size_t)s->c, sizeof(float));
	w->g2 = calloc(n * (size_t)s->h, sizeof(float));
	w->g1 = calloc(n * (size_t)s->h, sizeof(float));
	if (!w->x || !w->y || !w->h1 || !w->h2 || !w->z || !w->g3 || !w->g2 || !w->g1)
		return -1;
	return 0;
}

static inline void mlp_work_free(mlp_work_t *w)
{
	free(w->x); free(w->y); free(w->h1); free(w->h2);
	free(w->z); free(w->g3); free(w->g2); free(w->g1);
	memset(w, 0, sizeof(*w));
}

/* Load samples idx[0..n) (n <= cap) of data into w. */
static inline void mlp_load_batch(const mlp_data_t *data, mlp_work_t *w, const long *idx, int n)
{
	int d = w->shape.d;

	w->n = n < w->cap ? n : w->cap;
	for (int i = 0; i < w->n; i++)
		w->y[i] = mlp_data_sample(data, idx[i], w->x + (size_t)i * d);
}

/* ------------------------------------------------------------ layers */

/* out[i][o] = b[o] + sum_k in[i][k] W[o][k], then tanh when act. */
static inline void mlp_affine(const float *in, int n, int k_in, const float *W, const float *b,
			      int n_out, int act, float *out)
{
	for (int i = 0; i < n; i++) {
		const float *xi = in + (size_t)i * k_in;
		for (int o = 0; o < n_out; o++) {
			const float *wo = W + (size_t)o * k_in;
			double acc = b[o];
			for (int k = 0; k < k_in; k++)
				acc += (double)wo[k] * xi[k];
			out[(size_t)i * n_out + o] = mlp_act(acc, act);
		}
	}
}

/* gW[o][k] += sum_i g[i][o] in[i][k]; gb[o] += sum_i g[i][o]. */
static inline void mlp_affine_grad(const float *in, const float *g, int n, int k_in, int n_out,
				   float *gW, float *gb)
{
	for (int o = 0; o < n_out; o++) {
		gb[o] += (float)mlp_col_sum(g, n, n_out, o);
		for (int k = 0; k < k_in; k++) {
			double acc = 0.0;
			for (int i = 0; i < n; i++)
				acc += (double)g[(size_t)i * n_out + o] * in[(size_t)i * k_in + k];
			gW[(size_t)o * k_in + k] += (float)acc;
		}
	}
}

/* gin[i][k] = (sum_o g[i][o] W[o][k]) * (1 - act[i][k]^2): back through
 * the affine map and the tanh that produced act. */
static inline void mlp_affine_back_tanh(const float *g, const float *W, const float *act, int n,
					int k_in, int n_out, float *gin)
{
	for (int i = 0; i < n; i++) {
		for (int k = 0; k < k_in; k++) {
			double acc = 0.0;
			for (int o = 0; o < n_out; o++)
				acc += (double)g[(size_t)i * n_out + o] * W[(size_t)o * k_in + k];
			gin[(size_t)i * k_in + k] = mlp_dtanh(acc, act[(size_t)i * k_in + k]);
		}
	}
}

/* Forward through unit (layer) u with its weight W and bias b. */
static inline void mlp_forward_unit(mlp_work_t *w, int u, const float *W, const float *b)
{
	const mlp_shape_t *s = &w->shape;

	if (u == 0)
		mlp_affine(w->x, w->n, s->d, W, b, s->h, 1, w->h1);
	else if (u == 1)
		mlp_affine(w->h1, w->n, s->h, W, b, s->h, 1, w->h2);
	else
		mlp_affine(w->h2, w->n, s->h, W, b, s->c, 0, w->z);
}

/* Softmax cross-entropy of the logits: returns the mean loss over the
 * micro-batch (w->loss_sum gets the sum) and sets dL/dz for the gradient
 * of grad_scale x the mean loss. */
static inline float mlp_loss(mlp_work_t *w, float grad_scale)
{
	int c = w->shape.c;
	double sum = 0.0, scale = (double)grad_scale / (w->n > 0 ? w->n : 1);

	for (int i = 0; i < w->n; i++)
		sum += mlp_xent(w->z + (size_t)i * c, c, w->y[i], scale, w->g3 + (size_t)i * c);
	w->loss_sum = sum;
	return w->n > 0 ? (float)(sum / w->n) : 0.0f;
}

/* Backward through unit u (after mlp_loss and the backward of the units
 * above it): adds the unit's gradients into gW and gb and, for u > 0,
 * computes the error signal for unit u - 1.  W is the unit's weight. */
static inline void mlp_backward_unit(mlp_work_t *w, int u, const float *W, float *gW, float *gb)
{
	const mlp_shape_t *s = &w->shape;

	if (u == 2) {
		mlp_affine_grad(w->h2, w->g3, w->n, s->h, s->c, gW, gb);
		mlp_affine_back_tanh(w->g3, W, w->h2, w->n, s->h, s->c, w->g2);
	} else if (u == 1) {
		mlp_affine_grad(w->h1, w->g2, w->n, s->h, s->h, gW, gb);
		mlp_affine_back_tanh(w->g2, W, w->h1, w->n, s->h, s->h, w->g1);
	} else {
		mlp_affine_grad(w->x, w->g1, w->n, s->d, s->h, gW, gb);
	}
}

/* ------------------------------------------------------------ whole model */

/* Mean loss of the loaded micro-batch under params (6 tensors). */
static inline float mlp_forward_loss(mlp_work_t *w, const float *const params[MLP_NTENSORS])
{
	for (int u = 0; u < MLP_NUNITS; u++)
		mlp_forward_unit(w, u, params[2 * u], params[2 * u + 1]);
	return mlp_loss(w, 1.0f);
}

/* Forward and backward of the loaded micro-batch: adds the gradients of
 * the mean loss into grads (6 tensors) and returns the mean loss. */
static inline float mlp_forward_backward(mlp_work_t *w, const float *const params[MLP_NTENSORS],
					 float *const grads[MLP_NTENSORS])
{
	float loss = mlp_forward_loss(w, params);

	for (int u = MLP_NUNITS - 1; u >= 0; u--)
		mlp_backward_unit(w, u, params[2 * u], grads[2 * u], grads[2 * u + 1]);
	return loss;
}

#endif
