/* SPDX-License-Identifier: BSD-3-Clause */
/* xcost.h - what a large shared-memory call costs with its slot copies
 * streamed or not, by op and size: shm_direct.c keeps the cheaper. */
#ifndef DPG_LIB_CPU_XCOST_H
#define DPG_LIB_CPU_XCOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ops: shm_direct.c's allreduce, reduce_scatter, all_gather, broadcast */
#define DPG_XCOST_OPS 4
/* sizes from DPG_XCOST_MIN_BYTES in powers of 4, the last open-ended */
#define DPG_XCOST_SIZES 8
#define DPG_XCOST_MIN_BYTES (64u << 10)
/* each mode's cost is the cheapest of its last samples (a late peer only
 * makes a call dearer), counting those younger than AGE_MS */
#define DPG_XCOST_SAMPLES 4
#define DPG_XCOST_AGE_MS 1000

struct dpg_xcost_mode {
	int64_t ns_kib[DPG_XCOST_SAMPLES];	/* ns per KiB of the call */
	int64_t at[DPG_XCOST_SAMPLES];		/* when taken (ns, monotonic) */
	unsigned n;				/* samples taken so far */
};

struct dpg_xcost {
	struct dpg_xcost_mode m[DPG_XCOST_OPS][DPG_XCOST_SIZES][2];	/* [.][.][streamed] */
};

/* Keep one sample: a call of op (0..DPG_XCOST_OPS-1) moving `bytes`, its
 * slot copies streamed or not, took ns, ended at now. */
void dpg_xcost_note(struct dpg_xcost *x, int op, size_t bytes, bool streamed, int64_t ns,
		    int64_t now);

/* Which mode costs less for such a call at now: 1 streamed, 0 not, -1
 * unknown (a mode without a fresh sample). */
int dpg_xcost_pick(const struct dpg_xcost *x, int op, size_t bytes, int64_t now);

#endif
