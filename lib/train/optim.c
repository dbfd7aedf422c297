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
 * AdamW's square root: without -fno-math-errno GCC keeps a libm call for a
 * negative operand (errno) beside every sqrtf, and a loop with a call does
 * not vectorize.  So AdamW goes in tiles: the moments of a tile (vector
 * loop), the square roots of the tile (sqrtps at the variant's width: 4,
 * 8 or 16 lanes, correctly rounded like sqrtf; plain sqrtf off x86-64 or
 * when the build has -fno-math-errno, where it vectorizes by itself), then
 * the parameters.  The three divisions per element stay divisions (a
 * reciprocal would change the bits); with 16 lanes they keep up with the
 * memory.
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

#if defined(__x86_64__) && defined(__SSE2__)
#include <immintrin.h>
#if !defined(__NO_MATH_ERRNO__)
#define DPG_OPT_SSE_SQRT 1
#endif
#endif

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

/* AdamW elements per tile (the square-root scratch lives on the stack) */
#define DPG_OPT_TILE 256

/* s[k] = sqrtf(s[k]) for k < cnt, correctly rounded (the portable one). */
DPG_OPT_INLINE void sqrt_tile(float *s, size_t cnt)
{
	size_t k = 0;

#ifdef DPG_OPT_SSE_SQRT
	for (; k + 4 <= cnt; k += 4)
		_mm_storeu_ps(s + k, _mm_sqrt_ps(_mm_loadu_ps(s + k)));
	for (; k < cnt; k++)
		s[k] = _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(s[k])));
#else
	for (; k < cnt; k++)
		s[k] = sqrtf(s[k]);
#endif
}

#ifdef DPG_OPT_X86_VARIANTS
/* The same square roots 8 and 16 at a time (vsqrtps is IEEE's correctly
 * rounded square root at every width: the same bits as sqrtf). */
__attribute__((target("avx"))) DPG_OPT_INLINE void sqrt_tile_avx(float *s, size_t cnt)
{
	size_t k = 0;

	for (; k + 8 <= cnt; k += 8)
		_mm256_storeu_ps(s + k, _mm256_sqrt_ps(_mm256_loadu_ps(s + k)));
	sqrt_tile(s + k, cnt - k);
}

__attribute__((target("avx512f"))) DPG_OPT_INLINE void sqrt_tile_avx512(float *s, size_t cnt)
{
	size_t k = 0;

	for (; k + 16 <= cnt; k += 16)
		_mm512_storeu_ps(s + k, _mm512_sqrt_ps(_mm512_loadu_ps(s + k)));
	sqrt_tile(s + k, cnt - k);
}
#endif

/* One variant's AdamW and SGD loops (optim.h's element functions), compiled
 * with TARGET and square roots by SQRT:
 *   adamw_SUF  tiles of DPG_OPT_TILE: the moments of a tile, its square
 *              roots, then its parameters (a constant trip count for the
 *              full tiles: no epilogue, whatever the cost model)
 *   sgd_SUF    one plain loop */
#define DPG_OPT_VARIANT(SUF, TARGET, SQRT)						\
TARGET DPG_OPT_INLINE void adamw_tile_##SUF(float *restrict p, float *restrict m,	\
					    float *restrict v, const float *restrict g,	\
					    size_t cnt, const struct dpg_adamw_hp *h)	\
{											\
	float s[DPG_OPT_TILE];								\
	size_t k;									\
											\
	for (k = 0; k < cnt; k++)							\
		s[k] = dpg_adamw_moments(&m[k], &v[k], g[k], h);			\
	SQRT(s, cnt);									\
	for (k = 0; k < cnt; k++)							\
		dpg_adamw_apply(&p[k], m[k], s[k], h);					\
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
	for (size_t i = 0; i < n; i++)							\
		dpg_sgd_elem(&p[i], &buf[i], g[i], &h);					\
}

DPG_OPT_VARIANT(default, , sqrt_tile)

#ifdef DPG_OPT_X86_VARIANTS
DPG_OPT_VARIANT(v3, __attribute__((target("arch=x86-64-v3"))), sqrt_tile_avx)
DPG_OPT_VARIANT(v4, __attribute__((target("arch=x86-64-v4"))), sqrt_tile_avx512)

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
