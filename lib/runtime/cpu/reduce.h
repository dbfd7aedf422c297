/* SPDX-License-Identifier: BSD-3-Clause */
/* reduce.h - the bulk CPU combine of the collectives (reduce.c), built on
 * common/dtype.h's element math. */
#ifndef DPG_LIB_REDUCE_H
#define DPG_LIB_REDUCE_H

#include <stdbool.h>
#include <stddef.h>

#include "dpg.h"
#include "dtype.h"	/* dpg_red_*, dpg_dtype_size, f16/bf16 conversions */

/* Bulk CPU combine (reduce.c), vectorized, multiversioned on x86-64:
 * dst[i] = src[0][i] op src[1][i] op ... op src[nsrc-1][i] for i < count,
 * combined left to right in the accumulation type and rounded once; when op
 * is AVG and div > 0 the result is divided by div (pass div = 0 for the
 * partial steps of a multi-step reduction).  nsrc >= 1; dst may be exactly
 * one of the sources (not a partial overlap).  Unknown dt/op: no-op. */
void dpg_reduce_n(void *dst, const void *const *src, int nsrc, size_t count,
		  dpg_dtype_t dt, dpg_op_t op, int div);

/* Two-source convenience form of dpg_reduce_n. */
void dpg_reduce2(void *dst, const void *a, const void *b, size_t count,
		 dpg_dtype_t dt, dpg_op_t op, int div);

/* Multi-step reductions (the ring: one combine per hop) keep their partial
 * results in an accumulation type between the steps, so that the result is
 * rounded (f16 / bf16 sum and avg: f32) or divided (integer avg: i64 for
 * i32, 128 bits for i64) once, at the last step.  dpg_reduce_acc_size: the
 * bytes of one partial, or 0 when partials are plain elements of dt (every
 * other dtype x op: use dpg_reduce2 with div = 0, then the final div).
 * dpg_reduce_acc: acc[i] = own[i] + in[i], in being elements of dt (the
 * first step, in_acc false) or partials.  dpg_reduce_acc_final: dst[i] =
 * own[i] + in[i] (partials), divided by div for avg, rounded once into dt. */
size_t dpg_reduce_acc_size(dpg_dtype_t dt, dpg_op_t op);
void dpg_reduce_acc(void *acc, const void *own, const void *in, bool in_acc, size_t count,
		    dpg_dtype_t dt);
void dpg_reduce_acc_final(void *dst, const void *own, const void *in, size_t count,
			  dpg_dtype_t dt, dpg_op_t op, int div);

/* Which code path dpg_reduce_n takes on this CPU ("avx512", "avx2",
 * "generic"), for benchmarks and logs. */
const char *dpg_reduce_isa(void);

#endif
