/* SPDX-License-Identifier: BSD-3-Clause */
/* dtype.h - element math of every dtype: sizes, f16 / bf16 <-> f32 conversions
 * and the combine of every dtype x op, as static inline functions usable from
 * C and from CUDA (__host__ __device__ under nvcc).  The bulk CPU loops built
 * on them live in runtime/cpu/reduce.c (dpg_reduce_n).
 *
 * Semantics (the same in every backend that uses this header):
 *  - f16 and bf16 are reduced in f32: a combine of k buffers converts every
 *    operand to f32, combines in f32 and rounds the result once back to 16
 *    bits (round to nearest, ties to even).  Where a collective combines in
 *    several steps (the ring: one combine per hop), the partial sums stay in
 *    f32 between the steps (the ring carries them as f32 on the wire) and
 *    only the last step rounds: every path gives one rounding of an f32 sum.
 *    The order of the f32 additions follows the algorithm (shared memory:
 *    rank order; the ring: ring order starting after the block's owner), so
 *    two paths can differ where two f32 sums straddle a 16-bit rounding
 *    boundary; every rank of one call gets the same bits.
 *  - Conversions are exact f16/bf16 -> f32; f32 -> f16/bf16 rounds to nearest
 *    even, overflows to +-Inf, keeps subnormals (no flush to zero), keeps
 *    Inf, and turns NaN into a quiet NaN keeping the top payload bits.
 *  - min / max propagate NaN (if either operand is NaN the result is NaN).
 *  - avg = sum, then one division by the number of ranks at the end, in the
 *    accumulation type (f32 for f16/bf16, f64; integers sum in a wider type,
 *    i64 for i32 and 128 bits for i64, so the average never wraps, and the
 *    division truncates toward zero, as C does).
 *  - Integer sums wrap around (two's complement) instead of being undefined.
 */
#ifndef DPG_LIB_DTYPE_H
#define DPG_LIB_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dpg.h"

#ifdef __CUDACC__
#define DPG_RED_FN static __host__ __device__ __forceinline__
#else
#define DPG_RED_FN static inline __attribute__((always_inline))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of one element of dt (0 for an unknown dtype). */
DPG_RED_FN size_t dpg_dtype_size(dpg_dtype_t dt)
{
	switch (dt) {
	case DPG_F16:
	case DPG_BF16:
		return 2;
	case DPG_F32:
	case DPG_I32:
		return 4;
	case DPG_F64:
	case DPG_I64:
		return 8;
	}
	return 0;
}

DPG_RED_FN uint32_t dpg_f32_bits(float f)
{
#ifdef __CUDA_ARCH__
	return __float_as_uint(f);
#else
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
#endif
}

DPG_RED_FN float dpg_bits_f32(uint32_t u)
{
#ifdef __CUDA_ARCH__
	return __uint_as_float(u);
#else
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
#endif
}

/* Branch-free select: c ? a : b for a condition mask m (all ones or zero). */
DPG_RED_FN uint32_t dpg_red_sel(uint32_t m, uint32_t a, uint32_t b)
{
	return (a & m) | (b & ~m);
}

DPG_RED_FN uint32_t dpg_red_mask(int c)
{
	return (uint32_t)0 - (uint32_t)(c != 0);
}

/* IEEE binary16 -> f32, exact.  Branch-free (masks, no ?:) so that the
 * loops using it vectorize. */
DPG_RED_FN float dpg_f16_to_f32(uint16_t h)
{
	uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
	uint32_t mag = (uint32_t)h & 0x7fffu;		/* exponent and mantissa */
	uint32_t exp = mag >> 10;
	/* normal: rebias the exponent by 127 - 15 = 112 */
	uint32_t norm = (mag << 13) + 0x38000000u;
	/* Inf / NaN: all-ones exponent, mantissa kept */
	uint32_t infnan = (mag << 13) | 0x7f800000u;
	/* subnormal (and zero): m * 2^-24, computed exactly as
	 * (1.m * 2^-14) - 2^-14 in f32 */
	float sub = dpg_bits_f32((mag << 13) | 0x38800000u) - dpg_bits_f32(0x38800000u);
	uint32_t r = dpg_red_sel(dpg_red_mask(exp == 31), infnan, norm);

	r = dpg_red_sel(dpg_red_mask(exp == 0), dpg_f32_bits(sub), r);
	return dpg_bits_f32(r | sign);
}

/* f32 -> IEEE binary16, round to nearest even. */
DPG_RED_FN uint16_t dpg_f32_to_f16(float f)
{
	uint32_t x = dpg_f32_bits(f);
	uint32_t sign = (x >> 16) & 0x8000u;
	uint32_t ax = x & 0x7fffffffu;
	/* normal range: drop 13 mantissa bits with round-half-even, rebias;
	 * a carry out of the mantissa correctly bumps the exponent */
	uint32_t norm = (ax - 0x38000000u + 0xfffu + ((ax >> 13) & 1u)) >> 13;
	/* below 2^-14: adding 0.5f aligns the value to multiples of 2^-24 (the
	 * f16 subnormal step) with the FPU's round-half-even; the low bits of
	 * the sum are then the f16 encoding (0x400 = smallest normal).  The
	 * operand is clamped so that this lane computes no Inf/NaN. */
	float fa = dpg_bits_f32(ax & dpg_red_mask(ax < 0x38800000u));
	uint32_t sub = dpg_f32_bits(fa + 0.5f) - 0x3f000000u;
	/* NaN: quiet, keep the top payload bits */
	uint32_t nan = 0x7e00u | ((ax >> 13) & 0x3ffu);
	uint32_t r = dpg_red_sel(dpg_red_mask(ax >= 0x38800000u), norm, sub);

	r = dpg_red_sel(dpg_red_mask(ax >= 0x477ff000u), 0x7c00u, r); /* >= 65520: Inf */
	r = dpg_red_sel(dpg_red_mask(ax > 0x7f800000u), nan, r);
	return (uint16_t)(r | sign);
}

/* bfloat16 -> f32, exact. */
DPG_RED_FN float dpg_bf16_to_f32(uint16_t b)
{
	return dpg_bits_f32((uint32_t)b << 16);
}

/* f32 -> bfloat16, round to nearest even; overflow gives Inf naturally. */
DPG_RED_FN uint16_t dpg_f32_to_bf16(float f)
{
	uint32_t x = dpg_f32_bits(f);
	uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
	uint32_t nan = (x >> 16) | 0x40u;

	return (uint16_t)dpg_red_sel(dpg_red_mask((x & 0x7fffffffu) > 0x7f800000u),
				     nan, rounded);
}

/* Combine two values of the accumulation types (op AVG combines as SUM). */
DPG_RED_FN float dpg_red_f32(float a, float b, dpg_op_t op)
{
	switch (op) {
	case DPG_MIN:
		return ((a < b) | (a != a)) ? a : b;
	case DPG_MAX:
		return ((a > b) | (a != a)) ? a : b;
	default:
		return a + b;
	}
}

DPG_RED_FN double dpg_red_f64(double a, double b, dpg_op_t op)
{
	switch (op) {
	case DPG_MIN:
		return ((a < b) | (a != a)) ? a : b;
	case DPG_MAX:
		return ((a > b) | (a != a)) ? a : b;
	default:
		return a + b;
	}
}

DPG_RED_FN int32_t dpg_red_i32(int32_t a, int32_t b, dpg_op_t op)
{
	switch (op) {
	case DPG_MIN:
		return a < b ? a : b;
	case DPG_MAX:
		return a > b ? a : b;
	default:
		return (int32_t)((uint32_t)a + (uint32_t)b);	/* wraps */
	}
}

DPG_RED_FN int64_t dpg_red_i64(int64_t a, int64_t b, dpg_op_t op)
{
	switch (op) {
	case DPG_MIN:
		return a < b ? a : b;
	case DPG_MAX:
		return a > b ? a : b;
	default:
		return (int64_t)((uint64_t)a + (uint64_t)b);	/* wraps */
	}
}

/* The avg finalization: divide by n (n >= 1) in the accumulation type. */
DPG_RED_FN float dpg_red_div_f32(float a, int n)
{
	return a / (float)n;
}

DPG_RED_FN double dpg_red_div_f64(double a, int n)
{
	return a / (double)n;
}

DPG_RED_FN int32_t dpg_red_div_i32(int32_t a, int n)
{
	/* INT32_MIN / -1 cannot happen: n >= 1 */
	return a / (int32_t)n;
}

DPG_RED_FN int64_t dpg_red_div_i64(int64_t a, int n)
{
	return a / (int64_t)n;
}

/* Integer avg of two operands without wrapping: (a + b) / n computed as if
 * in infinite precision, truncated toward zero (n >= 1). */
DPG_RED_FN int32_t dpg_red_avg2_i32(int32_t a, int32_t b, int n)
{
	return (int32_t)(((int64_t)a + (int64_t)b) / (int64_t)n);
}

DPG_RED_FN int64_t dpg_red_avg2_i64(int64_t a, int64_t b, int n)
{
	/* a = qa n + ra, b = qb n + rb: (a + b) / n = qa + qb + (ra + rb) / n,
	 * with |ra + rb| < 2n; no intermediate overflows */
	int64_t q = a / n + b / n, r = a % n + b % n, t = q + r / n, e = r % n;

	if (t > 0 && e < 0)
		return t - 1;
	if (t < 0 && e > 0)
		return t + 1;
	return t;
}

/* Reference element-at-a-time combine of two buffers (any dtype), for code
 * that wants no bulk kernel (device code, tests):
 * dst[i] = a[i] op b[i], then / div when op is AVG and div > 0.
 * dst may equal a or b. */
DPG_RED_FN void dpg_red_elem(void *dst, const void *a, const void *b, size_t i,
			     dpg_dtype_t dt, dpg_op_t op, int div)
{
	int fin = op == DPG_AVG && div > 0;

	switch (dt) {
	case DPG_F32: {
		float r = dpg_red_f32(((const float *)a)[i], ((const float *)b)[i], op);

		((float *)dst)[i] = fin ? dpg_red_div_f32(r, div) : r;
		break;
	}
	case DPG_F64: {
		double r = dpg_red_f64(((const double *)a)[i], ((const double *)b)[i], op);

		((double *)dst)[i] = fin ? dpg_red_div_f64(r, div) : r;
		break;
	}
	case DPG_F16: {
		float r = dpg_red_f32(dpg_f16_to_f32(((const uint16_t *)a)[i]),
				      dpg_f16_to_f32(((const uint16_t *)b)[i]), op);

		((uint16_t *)dst)[i] = dpg_f32_to_f16(fin ? dpg_red_div_f32(r, div) : r);
		break;
	}
	case DPG_BF16: {
		float r = dpg_red_f32(dpg_bf16_to_f32(((const uint16_t *)a)[i]),
				      dpg_bf16_to_f32(((const uint16_t *)b)[i]), op);

		((uint16_t *)dst)[i] = dpg_f32_to_bf16(fin ? dpg_red_div_f32(r, div) : r);
		break;
	}
	case DPG_I32: {
		int32_t x = ((const int32_t *)a)[i], y = ((const int32_t *)b)[i];

		((int32_t *)dst)[i] = fin ? dpg_red_avg2_i32(x, y, div) : dpg_red_i32(x, y, op);
		break;
	}
	case DPG_I64: {
		int64_t x = ((const int64_t *)a)[i], y = ((const int64_t *)b)[i];

		((int64_t *)dst)[i] = fin ? dpg_red_avg2_i64(x, y, div) : dpg_red_i64(x, y, op);
		break;
	}
	}
}


#ifdef __cplusplus
}
#endif

#endif
