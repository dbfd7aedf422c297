/* SPDX-License-Identifier: BSD-3-Clause */
/* detsum.h - order-independent gradient sums for the deterministic sharded
 * step: fp32 -> 64-bit fixed point (exact, associative adds) and back. */
#ifndef DPG_LIB_DETSUM_H
#define DPG_LIB_DETSUM_H

#include <stddef.h>
#include <stdint.h>

/* Fixed point: x is stored as llrint(x * 2^DPG_FIX_BITS).  Resolution 2^-32
 * (smaller magnitudes round to 0, the same way on every rank); sums must
 * stay below DPG_FIX_LIMIT in magnitude (2^50 units = 2^18 in value) so that
 * their squares can be added exactly in 128 bits. */
#define DPG_FIX_BITS 32
#define DPG_FIX_LIMIT (INT64_C(1) << 50)

/* acc[i] += fix(g[i]) and g[i] = 0.  Returns 0, or -1 when a value or a
 * running sum leaves the range (NaN and Inf included); *bad gets the
 * offending value. */
int dpg_fix_fold(float *g, int64_t *acc, size_t n, double *bad);

/* out[i] = x[i] * 2^-DPG_FIX_BITS rounded to fp32; *sumsq += x[i]^2 exactly
 * (in units of 2^-2*DPG_FIX_BITS).  Returns -1 when |x[i]| >= DPG_FIX_LIMIT. */
int dpg_fix_to_f32(const int64_t *x, float *out, size_t n, unsigned __int128 *sumsq);

/* An unsigned 128-bit value as four 32-bit limbs in int64 slots (so that
 * limbs of up to 2^31 ranks can be summed by an integer allreduce), and
 * back (carries folded; the result modulo 2^128). */
void dpg_u128_to_limbs(unsigned __int128 v, int64_t limbs[4]);
unsigned __int128 dpg_u128_from_limbs(const int64_t limbs[4]);

#endif
