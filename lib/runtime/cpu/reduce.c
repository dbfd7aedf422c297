/* SPDX-License-Identifier: BSD-3-Clause */
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

/* Integers: sum, min and max in the element type (sums wrap); avg sums in a
 * wider type (i64 for i32, 128 bits for i64) so that it cannot wrap, and
 * divides there.  A partial step (div == 0) stores the sum cut back to the
 * element type: multi-step reductions carry the wide sum instead (the
 * accumulator functions below). */
#ifndef __SIZEOF_INT128__
#error "the CPU collectives need a 128-bit integer type (avg of i64)"
#endif
typedef __int128 dpg_i128;

#define DPG_RED_IFAMILY(P, T, A, SUM, MIN, MAX)					\
	DPG_RED_KERNEL(P##_sum, T, T, ID, ID, SUM, ID2, 0)			\
	DPG_RED_KERNEL(P##_avg, T, A, WIDE_##A, (T), OPW_SUM, WDIV_##A, div > 0)	\
	DPG_RED_KERNEL(P##_min, T, T, ID, ID, MIN, ID2, 0)			\
	DPG_RED_KERNEL(P##_max, T, T, ID, ID, MAX, ID2, 0)

#define ID2(a, n) ((void)(n), (a))
#define OPW_SUM(a, b) ((a) + (b))
#define WIDE_int64_t(x) ((int64_t)(x))
#define WIDE_dpg_i128(x) ((dpg_i128)(x))
#define WDIV_int64_t(a, n) ((a) / (int64_t)(n))
#define WDIV_dpg_i128(a, n) ((a) / (dpg_i128)(n))

DPG_RED_IFAMILY(red_i32, int32_t, int64_t, OPI32_SUM, OPI32_MIN, OPI32_MAX)
DPG_RED_IFAMILY(red_i64, int64_t, dpg_i128, OPI64_SUM, OPI64_MIN, OPI64_MAX)

/* ---------------------------------------------------------------- 16 bit
 * f16 / bf16 go through f32 tiles: convert each source tile to f32 (padding
 * a short tile with zeros), combine the f32 tiles, convert back once.  The
 * tile conversions are separate functions so that x86 CPUs with F16C get
 * the hardware f16 conversions (same rounding as reduce.h, checked
 * exhaustively in the unit test's conversion case). */
typedef void (*dpg_tile_in_fn)(float *o, const uint16_t *in, size_t m);
typedef void (*dpg_tile_out_fn)(uint16_t *o, const float *in, size_t m);

#define DPG_TILE_CONV(NAME_IN, NAME_OUT, LD, ST)				\
DPG_CLONES static void NAME_IN(float *o, const uint16_t *in, size_t m)	\
{										\
	size_t k;								\
										\
	if (m == DPG_RED_TILE) {						\
		for (k = 0; k < DPG_RED_TILE; k++)				\
			o[k] = LD(in[k]);					\
		return;								\
	}									\
	for (k = 0; k < m; k++)							\
		o[k] = LD(in[k]);						\
	for (; k < DPG_RED_TILE; k++)						\
		o[k] = 0.0f;							\
}										\
DPG_CLONES static void NAME_OUT(uint16_t *o, const float *in, size_t m)	\
{										\
	size_t k;								\
										\
	if (m == DPG_RED_TILE) {						\
		for (k = 0; k < DPG_RED_TILE; k++)				\
			o[k] = ST(in[k]);					\
		return;								\
	}									\
	for (k = 0; k < m; k++)							\
		o[k] = ST(in[k]);						\
}

DPG_TILE_CONV(f16_tile_in, f16_tile_out, dpg_f16_to_f32, dpg_f32_to_f16)
DPG_TILE_CONV(bf16_tile_in, bf16_tile_out, dpg_bf16_to_f32, dpg_f32_to_bf16)

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
	!defined(DPG_NO_MULTIVERSION)
#include <immintrin.h>
#define DPG_HAVE_F16C_PATH 1
#define DPG_F16C __attribute__((target("avx2,f16c")))

DPG_F16C static void f16c_tile_in(float *o, const uint16_t *in, size_t m)
{
	size_t k = 0;

	for (; k + 8 <= m; k += 8)
		_mm256_storeu_ps(o + k, _mm256_cvtph_ps(
				 _mm_loadu_si128((const __m128i *)(const void *)(in + k))));
	for (; k < m; k++)
		o[k] = dpg_f16_to_f32(in[k]);
	for (; k < DPG_RED_TILE; k++)
		o[k] = 0.0f;
}

DPG_F16C static void f16c_tile_out(uint16_t *o, const float *in, size_t m)
{
	size_t k = 0;

	for (; k + 8 <= m; k += 8)
		_mm_storeu_si128((__m128i *)(void *)(o + k), _mm256_cvtps_ph(
				 _mm256_loadu_ps(in + k),
				 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
	for (; k < m; k++)
		o[k] = dpg_f32_to_f16(in[k]);
}
#endif

#define DPG_RED_KERNEL16(NAME, OP, FIN)						\
DPG_CLONES static void NAME(uint16_t *dst, const uint16_t *const *src,		\
			    int nsrc, size_t count, int div,			\
			    dpg_tile_in_fn tin, dpg_tile_out_fn tout)		\
{										\
	float acc[DPG_RED_TILE], tmp[DPG_RED_TILE];				\
	size_t i;								\
	int q, k;								\
										\
	for (i = 0; i < count; i += DPG_RED_TILE) {				\
		size_t m = count - i < DPG_RED_TILE ? count - i : DPG_RED_TILE;	\
										\
		tin(acc, src[0] + i, m);					\
		for (q = 1; q < nsrc; q++) {					\
			tin(tmp, src[q] + i, m);				\
			for (k = 0; k < DPG_RED_TILE; k++)			\
				acc[k] = OP(acc[k], tmp[k]);			\
		}								\
		if (FIN)							\
			for (k = 0; k < DPG_RED_TILE; k++)			\
				acc[k] = dpg_red_div_f32(acc[k], div);		\
		tout(dst + i, acc, m);						\
	}									\
}

DPG_RED_KERNEL16(red_h_sum, OPF_SUM, 0)
DPG_RED_KERNEL16(red_h_avg, OPF_SUM, div > 0)
DPG_RED_KERNEL16(red_h_min, OPF_MIN, 0)
DPG_RED_KERNEL16(red_h_max, OPF_MAX, 0)

static void red_16(uint16_t *dst, const uint16_t *const *src, int nsrc, size_t count,
		   dpg_op_t op, int div, dpg_tile_in_fn tin, dpg_tile_out_fn tout)
{
	switch (op) {
	case DPG_SUM:
		red_h_sum(dst, src, nsrc, count, div, tin, tout);
		break;
	case DPG_AVG:
		red_h_avg(dst, src, nsrc, count, div, tin, tout);
		break;
	case DPG_MIN:
		red_h_min(dst, src, nsrc, count, div, tin, tout);
		break;
	case DPG_MAX:
		red_h_max(dst, src, nsrc, count, div, tin, tout);
		break;
	}
}

#ifdef DPG_HAVE_F16C_PATH
static int have_f16c(void)
{
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
}
#endif

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
#ifdef DPG_HAVE_F16C_PATH
		if (have_f16c()) {
			red_16(dst, (const uint16_t *const *)src, nsrc, count, op, div,
			       f16c_tile_in, f16c_tile_out);
			break;
		}
#endif
		red_16(dst, (const uint16_t *const *)src, nsrc, count, op, div,
		       f16_tile_in, f16_tile_out);
		break;
	case DPG_BF16:
		red_16(dst, (const uint16_t *const *)src, nsrc, count, op, div,
		       bf16_tile_in, bf16_tile_out);
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

/* ---------------------------------------------------------------- steps
 * The accumulators of multi-step reductions (reduce.h). */

size_t dpg_reduce_acc_size(dpg_dtype_t dt, dpg_op_t op)
{
	if ((dt == DPG_F16 || dt == DPG_BF16) && (op == DPG_SUM || op == DPG_AVG))
		return sizeof(float);
	if (dt == DPG_I32 && op == DPG_AVG)
		return sizeof(int64_t);
	if (dt == DPG_I64 && op == DPG_AVG)
		return sizeof(dpg_i128);
	return 0;
}

/* acc = W(own) + (in_acc ? in : W(in)); final: dst = N((W(own) + in) / div) */
#define DPG_ACC_LOOPS(NAME, T, A, W, N, DIV)					\
static void NAME##_acc(A *acc, const T *own, const void *in, bool in_acc,	\
		       size_t count)						\
{										\
	size_t i;								\
										\
	if (in_acc) {								\
		const A *x = in;						\
										\
		for (i = 0; i < count; i++)					\
			acc[i] = x[i] + W(own[i]);				\
	} else {								\
		const T *x = in;						\
										\
		for (i = 0; i < count; i++)					\
			acc[i] = W(x[i]) + W(own[i]);				\
	}									\
}										\
static void NAME##_fin(T *dst, const T *own, const A *in, size_t count,	\
		       int div)							\
{										\
	size_t i;								\
										\
	for (i = 0; i < count; i++) {						\
		A a = in[i] + W(own[i]);					\
										\
		dst[i] = N(div > 0 ? DIV(a, div) : a);				\
	}									\
}

#define I32W(x) ((int64_t)(x))
#define I64W(x) ((dpg_i128)(x))
#define I32N(a) ((int32_t)(a))
#define I64N(a) ((int64_t)(a))
DPG_ACC_LOOPS(acc_f16, uint16_t, float, dpg_f16_to_f32, dpg_f32_to_f16, dpg_red_div_f32)
DPG_ACC_LOOPS(acc_bf16, uint16_t, float, dpg_bf16_to_f32, dpg_f32_to_bf16, dpg_red_div_f32)
DPG_ACC_LOOPS(acc_i32, int32_t, int64_t, I32W, I32N, WDIV_int64_t)
DPG_ACC_LOOPS(acc_i64, int64_t, dpg_i128, I64W, I64N, WDIV_dpg_i128)

void dpg_reduce_acc(void *acc, const void *own, const void *in, bool in_acc, size_t count,
		    dpg_dtype_t dt)
{
	switch (dt) {
	case DPG_F16:
		acc_f16_acc(acc, own, in, in_acc, count);
		break;
	case DPG_BF16:
		acc_bf16_acc(acc, own, in, in_acc, count);
		break;
	case DPG_I32:
		acc_i32_acc(acc, own, in, in_acc, count);
		break;
	case DPG_I64:
		acc_i64_acc(acc, own, in, in_acc, count);
		break;
	default:
		break;
	}
}

void dpg_reduce_acc_final(void *dst, const void *own, const void *in, size_t count,
			  dpg_dtype_t dt, dpg_op_t op, int div)
{
	int d = op == DPG_AVG ? div : 0;

	switch (dt) {
	case DPG_F16:
		acc_f16_fin(dst, own, in, count, d);
		break;
	case DPG_BF16:
		acc_bf16_fin(dst, own, in, count, d);
		break;
	case DPG_I32:
		acc_i32_fin(dst, own, in, count, d);
		break;
	case DPG_I64:
		acc_i64_fin(dst, own, in, count, d);
		break;
	default:
		break;
	}
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
