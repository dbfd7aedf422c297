/* SPDX-License-Identifier: BSD-3-Clause */
/* optim.h - the optimizer arithmetic, written once for the C loops (optim.c,
 * used by zero.c) and the CUDA kernels (zero_cuda.cu): AdamW, SGD, bf16. */

/* Every element function is a sequence of single IEEE binary32 operations
 * (no fmaf, no reassociation, sqrtf and / correctly rounded), so that a
 * host build without FMA contraction and an nvcc build with --fmad=false
 * give bit-identical results.  optim.c turns contraction off for its loops
 * (they are also compiled for AVX2/AVX-512, where FMA exists); a C caller of
 * these functions compiled with -march=... that has FMA should do the same
 * (-ffp-contract=off) if it wants bits equal to the GPU's.
 */
#ifndef DPG_LIB_OPTIM_H
#define DPG_LIB_OPTIM_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define DPG_OPT_FN static __host__ __device__ __forceinline__
#elif defined(__GNUC__)
#define DPG_OPT_FN static inline __attribute__((always_inline))
#else
#define DPG_OPT_FN static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* One AdamW step's hyper-parameters: the user's (lr, betas, eps, decay),
 * the gradient's scale, and what step t makes of them (dpg_adamw_hp_at). */
struct dpg_adamw_hp {
	float lr, beta1, beta2, eps, weight_decay;
	float gscale;		/* multiplies the raw gradient first
				 * (1/(ranks*accum) times the clip factor) */
	/* step t (from 1), with bc1 = 1 - beta1^t and bc2 = 1 - beta2^t:
	 * the bias corrections folded into two scalars (Kingma & Ba's
	 * section 2), so that an element costs one division, not three */
	float alpha;		/* lr * sqrt(bc2) / bc1 */
	float eps_hat;		/* eps * sqrt(bc2) */
};

/* One SGD step's hyper-parameters (momentum 0 = plain SGD). */
struct dpg_sgd_hp {
	float lr, momentum, weight_decay, gscale;
};

/* AdamW, first half: scale the gradient, update the moments
 *   g' = g * gscale
 *   m  = beta1 * m + (1 - beta1) * g'
 *   v  = beta2 * v + (1 - beta2) * g' * g'
 * and return the new v, whose square root dpg_adamw_apply() takes.  (The
 * split lets optim.c take the square roots of a tile at once.) */
DPG_OPT_FN float dpg_adamw_moments(float *m, float *v, float g,
				   const struct dpg_adamw_hp *h)
{
	float gs = g * h->gscale;
	float m1 = h->beta1 * *m;
	float m2 = (1.0f - h->beta1) * gs;
	float v1 = h->beta2 * *v;
	float v2 = ((1.0f - h->beta2) * gs) * gs;
	float mn = m1 + m2;
	float vn = v1 + v2;

	*m = mn;
	*v = vn;
	return vn;
}

/* AdamW, second half, from the new m and v_sqrt = sqrt(v):
 *   p = p - lr * wd * p - alpha * m / (v_sqrt + eps_hat)
 * which is PyTorch's torch.optim.AdamW (decoupled decay on the pre-update
 * p; p -= lr * (m / bc1) / (sqrt(v / bc2) + eps)) with the bias
 * corrections moved into alpha and eps_hat: equal in exact arithmetic,
 * one division per element in floats instead of three. */
DPG_OPT_FN void dpg_adamw_apply(float *p, float m, float v_sqrt,
				const struct dpg_adamw_hp *h)
{
	float p0 = *p;
	float lrwd = h->lr * h->weight_decay;
	float decay = lrwd * p0;
	float num = h->alpha * m;
	float den = v_sqrt + h->eps_hat;
	float step = num / den;
	float pd = p0 - decay;

	*p = pd - step;
}

/* One AdamW element update (p, m, v in place; g the raw gradient). */
DPG_OPT_FN void dpg_adamw_elem(float *p, float *m, float *v, float g,
			       const struct dpg_adamw_hp *h)
{
	float vn = dpg_adamw_moments(m, v, g, h);

	dpg_adamw_apply(p, *m, sqrtf(vn), h);
}

/* One SGD element update, PyTorch's torch.optim.SGD with dampening 0 and
 * L2 decay (buf starts at 0, which equals PyTorch's first-step buf = g):
 *   g' = g * gscale + wd * p;  buf = momentum * buf + g';  p = p - lr * buf */
DPG_OPT_FN void dpg_sgd_elem(float *p, float *buf, float g,
			     const struct dpg_sgd_hp *h)
{
	float p0 = *p;
	float gs = g * h->gscale;
	float d = h->weight_decay * p0;
	float gd = gs + d;
	float mb = h->momentum * *buf;
	float b = mb + gd;
	float step = h->lr * b;

	*buf = b;
	*p = p0 - step;
}

#ifndef __CUDACC__
/* Fill h's step-t scalars (t = 1, 2, ...) from its lr, betas and eps, in
 * double, each rounded once to float. */
static inline void dpg_adamw_hp_at(struct dpg_adamw_hp *h, double t)
{
	double bc1 = 1.0 - pow((double)h->beta1, t);
	double bc2 = 1.0 - pow((double)h->beta2, t);

	h->alpha = (float)((double)h->lr * sqrt(bc2) / bc1);
	h->eps_hat = (float)((double)h->eps * sqrt(bc2));
}

/* The host loops (optim.c): vectorized, compiled for AVX2 / AVX-512 on
 * x86-64 and picked at load time, bit-identical to the element functions above called one element
 * at a time, and so to the CUDA kernels.  Buffers must not overlap. */
void dpg_adamw_update(float *p, float *m, float *v, const float *g, size_t n,
		      const struct dpg_adamw_hp *h);
void dpg_sgd_update(float *p, float *buf, const float *g, size_t n,
		    const struct dpg_sgd_hp *h);

/* The compiled variants of those two loops (the same source built for
 * several instruction sets; on x86-64 with GCC: x86-64-v4 (AVX-512),
 * x86-64-v3 (AVX2), default), best first, the last one runnable
 * everywhere.  dpg_adamw_update / dpg_sgd_update are the first variant
 * whose supported() is true, picked once at load time.  Every variant
 * gives the same bits (no FMA contraction, no reassociation): the unit
 * tests call each one. */
typedef void dpg_adamw_fn(float *p, float *m, float *v, const float *g, size_t n,
			  const struct dpg_adamw_hp *h);
typedef void dpg_sgd_fn(float *p, float *buf, const float *g, size_t n,
			const struct dpg_sgd_hp *h);
struct dpg_optim_variant {
	const char *name;
	int (*supported)(void);	/* this CPU runs it */
	dpg_adamw_fn *adamw;
	dpg_sgd_fn *sgd;
};
const struct dpg_optim_variant *dpg_optim_variants(size_t *count);
/* the name of the variant dpg_adamw_update and dpg_sgd_update run */
const char *dpg_optim_variant_name(void);

/* Sum of x[i]^2 in double in a fixed order that depends on n only (not on
 * the CPU, the alignment or the code path): element i goes to accumulator
 * i % DPG_SUMSQ_LANES, each accumulator adds its elements in index order,
 * then the accumulators are added pairwise (0+8, 1+9, ..., then 0+4, ...).
 * Each square of a float is exact in double. */
#define DPG_SUMSQ_LANES 16
double dpg_sumsq_f32(const float *x, size_t n);

/* Bulk conversions with reduce.h's rounding (f32 -> bf16: nearest even,
 * NaN stays NaN; bf16 -> f32 exact). */
void dpg_f32_to_bf16_n(const float *in, uint16_t *out, size_t n);
void dpg_bf16_to_f32_n(const uint16_t *in, float *out, size_t n);
#endif

#ifdef __cplusplus
}
#endif

#endif
