/* SPDX-License-Identifier: BSD-3-Clause */
/* optim.c - the host loops of the optimizer step over a shard: AdamW, SGD,
 * the fixed-order sum of squares and the bulk bf16 conversions. */

/* The arithmetic is optim.h's element functions; these loops only make it
 * fast: restrict pointers, the hyper-parameters copied to a local, and on
 * x86-64 with GCC the same source compiled for AVX-512 (x86-64-v4), AVX2
 * (x86-64-v3) and the baseline, picked once by an ifunc from the CPU it
 * runs on (a portable build: no -march).  AdamW and SGD are explicit
 * variants (DPG_OPT_VARIANT, listed by dpg_optim_variants() so that the
 * tests and the bench can call each one); the other loops are target
 * clones, as in reduce.c.  Results must stay bit-identical to the element
 * functions, hence across the variants and to the CUDA kernels built with
 * --fmad=false: FMA contraction is turned off below (the AVX2/AVX-512
 * variants have FMA, and -std=gnu11 lets GCC contract), and nothing here
 * reassociates (no -ffast-math; vector lanes are independent elements).
 *
 * AdamW's square root: with errno semantics GCC keeps a libm call for a
 * negative operand beside every sqrtf, and a loop with a call does not
 * vectorize.  The train wing is built with -fno-math-errno (local.mk;
 * nothing in it reads errno after a math call), so sqrtf is sqrtps at the
 * variant's width (correctly rounded like sqrtf: the same bits) and AdamW
 * is one pass of dpg_adamw_elem over tiles of DPG_OPT_TILE elements.  (A
 * build that turns errno back on still gives the same bits, one libm call
 * per element.)  64 Mi elements on an Intel Xeon (Emerald Rapids, 2
 * vCPUs), against the same-pattern kernels: AdamW in three passes per tile
 * (moments, explicit sqrtps, parameters) with three divisions 0.69-0.78x,
 * with one (optim.h) 0.78-0.81x; one pass 0.85-0.90x; that pass unrolled
 * 8 times 0.89-0.99x, 16 times (a whole tile of 16 lanes) 0.90-1.03x (4
 * interleaved rounds, 8 readings each: medians 0.92, 0.98); SGD unrolled
 * 8 times 0.95-1.03x (0.85-0.96x before).  The division stays a division
 * (a reciprocal would change the bits).
 */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
/* before any function, optim.h's included: applies to all of them */
#pragma GCC optimize("fp-contract=off")
#endif

#include "optim.h"

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"

/* x86-64 with GCC: AdamW and SGD as explicit variants (below), the other
 * loops as target clones; either way picked once by an ifunc. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
	!defined(DPG_NO_MULTIVERSION)
#define DPG_OPT_X86_VARIANTS 1
#define DPG_OPT_CLONES \
	__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DPG_OPT_CLONES
#endif

#if defined(__GNUC__)
#define DPG_OPT_INLINE static inline __attribute__((always_inline))
#else
#define DPG_OPT_INLINE static inline
#endif

/* AdamW elements per tile */
#define DPG_OPT_TILE 256

/* One variant's AdamW and SGD loops (optim.h's element functions, the
 * loops unrolled 16 and 8 times), compiled with TARGET:
 *   adamw_SUF  tiles of DPG_OPT_TILE (a constant trip count for the full
 *              tiles: no epilogue, whatever the cost model)
 *   sgd_SUF    one plain loop */
#define DPG_OPT_VARIANT(SUF, TARGET)							\
TARGET DPG_OPT_INLINE void adamw_tile_##SUF(float *restrict p, float *restrict m,	\
					    float *restrict v, const float *restrict g,	\
					    size_t cnt, const struct dpg_adamw_hp *h)	\
{											\
	_Pragma("GCC unroll 16")							\
	for (size_t k = 0; k < cnt; k++)						\
		dpg_adamw_elem(&p[k], &m[k], &v[k], g[k], h);				\
}											\
											\
TARGET static void adamw_##SUF(float *restrict p, float *restrict m,			\
			       float *restrict v, const float *restrict g, size_t n,	\
			       const struct dpg_adamw_hp *hp)				\
{											\
	const struct dpg_adamw_hp h = *hp;						\
	size_t i = 0;									\
											\
	for (; i + DPG_OPT_TILE <= n; i += DPG_OPT_TILE)				\
		adamw_tile_##SUF(p + i, m + i, v + i, g + i, DPG_OPT_TILE, &h);		\
	if (i < n)									\
		adamw_tile_##SUF(p + i, m + i, v + i, g + i, n - i, &h);		\
}											\
											\
TARGET static void sgd_##SUF(float *restrict p, float *restrict buf,			\
			     const float *restrict g, size_t n,				\
			     const struct dpg_sgd_hp *hp)				\
{											\
	const struct dpg_sgd_hp h = *hp;						\
											\
	_Pragma("GCC unroll 8")								\
	for (size_t i = 0; i < n; i++)							\
		dpg_sgd_elem(&p[i], &buf[i], g[i], &h);					\
}

DPG_OPT_VARIANT(default, )

#ifdef DPG_OPT_X86_VARIANTS
DPG_OPT_VARIANT(v3, __attribute__((target("arch=x86-64-v3"))))
DPG_OPT_VARIANT(v4, __attribute__((target("arch=x86-64-v4"))))

/* The checks run inside ifunc resolvers, which the dynamic loader calls
 * while it relocates, before any sanitizer runtime has mapped its shadow
 * memory: they must not be instrumented (ASan/UBSan builds crash otherwise). */
#define DPG_NO_SANITIZE __attribute__((no_sanitize("address", "undefined")))

DPG_NO_SANITIZE static int cpu_v4(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("x86-64-v4");
}

DPG_NO_SANITIZE static int cpu_v3(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("x86-64-v3");
}
#endif

static int cpu_any(void)
{
	return 1;
}

/* best first; the last one runs everywhere */
static const struct dpg_optim_variant variants[] = {
#ifdef DPG_OPT_X86_VARIANTS
	{ "x86-64-v4", cpu_v4, adamw_v4, sgd_v4 },
	{ "x86-64-v3", cpu_v3, adamw_v3, sgd_v3 },
#endif
	{ "default", cpu_any, adamw_default, sgd_default },
};

const struct dpg_optim_variant *dpg_optim_variants(size_t *count)
{
	*count = sizeof(variants) / sizeof(variants[0]);
	return variants;
}

/* the first variant this CPU runs */
static const struct dpg_optim_variant *pick(void)
{
	size_t k = 0;

	while (!variants[k].supported())
		k++;
	return &variants[k];
}

const char *dpg_optim_variant_name(void)
{
	return pick()->name;
}

#ifdef DPG_OPT_X86_VARIANTS
/* ifunc resolvers: run once, by the dynamic loader, maybe before this
 * object's other relocations: they read no table, only the CPU */
DPG_NO_SANITIZE static dpg_adamw_fn *resolve_adamw(void)
{
	return cpu_v4() ? adamw_v4 : cpu_v3() ? adamw_v3 : adamw_default;
}

DPG_NO_SANITIZE static dpg_sgd_fn *resolve_sgd(void)
{
	return cpu_v4() ? sgd_v4 : cpu_v3() ? sgd_v3 : sgd_default;
}

void dpg_adamw_update(float *p, float *m, float *v, const float *g, size_t n,
		      const struct dpg_adamw_hp *h)
	__attribute__((ifunc("resolve_adamw")));
void dpg_sgd_update(float *p, float *buf, const float *g, size_t n,
		    const struct dpg_sgd_hp *h) __attribute__((ifunc("resolve_sgd")));
#else
void dpg_adamw_update(float *p, float *m, float *v, const float *g, size_t n,
		      const struct dpg_adamw_hp *h)
{
	adamw_default(p, m, v, g, n, h);
}

void dpg_sgd_update(float *p, float *buf, const float *g, size_t n,
		    const struct dpg_sgd_hp *h)
{
	sgd_default(p, buf, g, n, h);
}
#endif

DPG_OPT_CLONES
double dpg_sumsq_f32(const float *restrict x, size_t n)
{
	double acc[DPG_SUMSQ_LANES] = { 0 };
	size_t i = 0;
	int k, w;

	for (; i + DPG_SUMSQ_LANES <= n; i += DPG_SUMSQ_LANES) {
		for (k = 0; k < DPG_SUMSQ_LANES; k++) {
			double d = x[i + k];

			acc[k] += d * d;
		}
	}
	for (k = 0; i + (size_t)k < n; k++) {
		double d = x[i + (size_t)k];

		acc[k] += d * d;
	}
	for (w = DPG_SUMSQ_LANES / 2; w > 0; w /= 2)
		for (k = 0; k < w; k++)
			acc[k] += acc[k + w];
	return acc[0];
}

DPG_OPT_CLONES
void dpg_f32_to_bf16_n(const float *restrict in, uint16_t *restrict out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = dpg_f32_to_bf16(in[i]);
}

DPG_OPT_CLONES
void dpg_bf16_to_f32_n(const uint16_t *restrict in, float *restrict out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = dpg_bf16_to_f32(in[i]);
}
