/* reduce.c - the bulk combine loops of the CPU collectives.
 *
 * Every (dtype, op) pair gets its own loop so that the op is a constant and
 * the loop vectorizes.  Work goes in tiles of DPG_RED_TILE elements with a
 * constant trip count: that vectorizes even under GCC's -O2 "very cheap"
 * cost model (no epilogue, no alias versioning: the loops carry an ivdep
 * pragma, which is right because dst is either disjoint from or exactly
 * equal to each source).  On x86-64 with GCC each loop is also cloned for
 * AVX-512 and AVX2 (function multiversioning, picked once by the dynamic
 * loader through an ifunc).  Build this file with -O3 for best results.
 */
#include "reduce.h"

#include <stddef.h>
#include <stdint.h>

#define DPG_RED_TILE 256

#if defined(__GNUC__) && !defined(__clang__)
#define DPG_IVDEP _Pragma("GCC ivdep")
#elif defined(__clang__)
#define DPG_IVDEP _Pragma("clang loop vectorize(assume_safety)")
#else
#define DPG_IVDEP
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
	!defined(DPG_NO_MULTIVERSION)
#define DPG_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DPG_CLONES
#endif

/* One kernel per (element type, accumulation type, op):
 *   NAME   function name
 *   T      element type in memory, A accumulation type
 *   LD(x)  element -> A, ST(a) A -> element, OP(a,b) combine, DIV(a,n) avg. */
#define DPG_RED_KERNEL(NAME, T, A, LD, ST, OP, DIV, FIN)			\
DPG_CLONES static void NAME(T *dst, const T *const *src, int nsrc,		\
			    size_t count, int div)				\
{										\
	size_t i = 0;								\
	int q;									\
										\
	for (; i + DPG_RED_TILE <= count; i += DPG_RED_TILE) {			\
		T *d = dst + i;							\
		const T *s0 = src[0] + i;					\
		const T *sl = src[nsrc - 1] + i;				\
		A acc[DPG_RED_TILE];						\
		int k;								\
										\
		if (nsrc == 1) {						\
			DPG_IVDEP						\
			for (k = 0; k < DPG_RED_TILE; k++) {			\
				A a = LD(s0[k]);				\
				d[k] = ST(FIN ? DIV(a, div) : a);		\
			}							\
			continue;						\
		}								\
		if (nsrc == 2) {						\
			DPG_IVDEP						\
			for (k = 0; k < DPG_RED_TILE; k++) {			\
				A a = OP(LD(s0[k]), LD(sl[k]));			\
				d[k] = ST(FIN ? DIV(a, div) : a);		\
			}							\
			continue;						\
		}								\
		{								\
			const T *s1 = src[1] + i;				\
										\
			for (k = 0; k < DPG_RED_TILE; k++)			\
				acc[k] = OP(LD(s0[k]), LD(s1[k]));		\
		}								\
		for (q = 2; q < nsrc - 1; q++) {				\
			const T *s = src[q] + i;				\
										\
			for (k = 0; k < DPG_RED_TILE; k++)			\
				acc[k] = OP(acc[k], LD(s[k]));			\
		}								\
		DPG_IVDEP							\
		for (k = 0; k < DPG_RED_TILE; k++) {				\
			A a = OP(acc[k], LD(sl[k]));				\
			d[k] = ST(FIN ? DIV(a, div) : a);			\
		}								\
	}									\
	for (; i < count; i++) {						\
		A a = LD(src[0][i]);						\
										\
		for (q = 1; q < nsrc; q++)					\
			a = OP(a, LD(src[q][i]));				\
		dst[i] = ST(FIN ? DIV(a, div) : a);				\
	}									\
}

#define ID(x) (x)
#define F16LD(x) dpg_f16_to_f32(x)
#define F16ST(x) dpg_f32_to_f16(x)
#define BF16LD(x) dpg_bf16_to_f32(x)
#define BF16ST(x) dpg_f32_to_bf16(x)

#define OPF_SUM(a, b) ((a) + (b))
#define OPF_MIN(a, b) dpg_red_f32((a), (b), DPG_MIN)
#define OPF_MAX(a, b) dpg_red_f32((a), (b), DPG_MAX)
#define OPD_MIN(a, b) dpg_red_f64((a), (b), DPG_MIN)
#define OPD_MAX(a, b) dpg_red_f64((a), (b), DPG_MAX)
#define OPI32_SUM(a, b) dpg_red_i32((a), (b), DPG_SUM)
#define OPI32_MIN(a, b) dpg_red_i32((a), (b), DPG_MIN)
#define OPI32_MAX(a, b) dpg_red_i32((a), (b), DPG_MAX)
#define OPI64_SUM(a, b) dpg_red_i64((a), (b), DPG_SUM)
#define OPI64_MIN(a, b) dpg_red_i64((a), (b), DPG_MIN)
#define OPI64_MAX(a, b) dpg_red_i64((a), (b), DPG_MAX)

/* FIN = 0 for every op but avg; the avg kernels divide when div > 0. */
#define DPG_RED_FAMILY(P, T, A, LD, ST, SUM, MIN, MAX, DIV)			\
	DPG_RED_KERNEL(P##_sum, T, A, LD, ST, SUM, DIV, 0)			\
	DPG_RED_KERNEL(P##_avg, T, A, LD, ST, SUM, DIV, div > 0)		\
	DPG_RED_KERNEL(P##_min, T, A, LD, ST, MIN, DIV, 0)			\
	DPG_RED_KERNEL(P##_max, T, A, LD, ST, MAX, DIV, 0)

DPG_RED_FAMILY(red_f32, float, float, ID, ID, OPF_SUM, OPF_MIN, OPF_MAX, dpg_red_div_f32)
DPG_RED_FAMILY(red_f64, double, double, ID, ID, OPF_SUM, OPD_MIN, OPD_MAX, dpg_red_div_f64)
DPG_RED_FAMILY(red_f16, uint16_t, float, F16LD, F16ST, OPF_SUM, OPF_MIN, OPF_MAX,
	       dpg_red_div_f32)
DPG_RED_FAMILY(red_bf16, uint16_t, float, BF16LD, BF16ST, OPF_SUM, OPF_MIN, OPF_MAX,
	       dpg_red_div_f32)
DPG_RED_FAMILY(red_i32, int32_t, int32_t, ID, ID, OPI32_SUM, OPI32_MIN, OPI32_MAX,
	       dpg_red_div_i32)
DPG_RED_FAMILY(red_i64, int64_t, int64_t, ID, ID, OPI64_SUM, OPI64_MIN, OPI64_MAX,
	       dpg_red_div_i64)

#define DPG_RED_DISPATCH(P, T)							\
	do {									\
		T *d_ = dst;							\
		const T *const *s_ = (const T *const *)src;			\
										\
		switch (op) {							\
		case DPG_SUM:							\
			P##_sum(d_, s_, nsrc, count, div);			\
			return;							\
		case DPG_AVG:							\
			P##_avg(d_, s_, nsrc, count, div);			\
			return;							\
		case DPG_MIN:							\
			P##_min(d_, s_, nsrc, count, div);			\
			return;							\
		case DPG_MAX:							\
			P##_max(d_, s_, nsrc, count, div);			\
			return;							\
		}								\
	} while (0)

void dpg_reduce_n(void *dst, const void *const *src, int nsrc, size_t count,
		  dpg_dtype_t dt, dpg_op_t op, int div)
{
	if (nsrc < 1 || count == 0)
		return;
	switch (dt) {
	case DPG_F32:
		DPG_RED_DISPATCH(red_f32, float);
		break;
	case DPG_F64:
		DPG_RED_DISPATCH(red_f64, double);
		break;
	case DPG_F16:
		DPG_RED_DISPATCH(red_f16, uint16_t);
		break;
	case DPG_BF16:
		DPG_RED_DISPATCH(red_bf16, uint16_t);
		break;
	case DPG_I32:
		DPG_RED_DISPATCH(red_i32, int32_t);
		break;
	case DPG_I64:
		DPG_RED_DISPATCH(red_i64, int64_t);
		break;
	}
}

void dpg_reduce2(void *dst, const void *a, const void *b, size_t count,
		 dpg_dtype_t dt, dpg_op_t op, int div)
{
	const void *src[2] = { a, b };

	dpg_reduce_n(dst, src, 2, count, dt, op, div);
}

const char *dpg_reduce_isa(void)
{
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
	!defined(DPG_NO_MULTIVERSION)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("x86-64-v4"))
		return "avx512";
	if (__builtin_cpu_supports("x86-64-v3"))
		return "avx2";
#endif
	return "generic";
}
