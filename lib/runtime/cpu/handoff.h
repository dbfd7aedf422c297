/* SPDX-License-Identifier: BSD-3-Clause */
/* handoff.h - how long a line one local rank writes takes to reach another:
 * a running median of sampled latencies (shm_direct.c's streaming choice). */
#ifndef DPG_LIB_CPU_HANDOFF_H
#define DPG_LIB_CPU_HANDOFF_H

#include <stdint.h>

/* Samples kept: the median of 8 moves only when 5 of them agree, so one
 * rank preempted mid-publish (a huge sample) does not flip it; slots not
 * yet filled count as 0, so neither do the first few samples alone. */
#define DPG_HANDOFF_SAMPLES 8
/* Longer samples are clamped to this (they mean "slow", not how slow). */
#define DPG_HANDOFF_MAX_NS 100000

struct dpg_handoff {
	int32_t ns[DPG_HANDOFF_SAMPLES];
	unsigned n;			/* samples taken so far */
};

/* Keep one sample (negative ones as 0), dropping the oldest. */
void dpg_handoff_note(struct dpg_handoff *h, int64_t ns);

/* The median of the 8 samples kept, 0 for each not yet taken (the lower
 * middle: 0 until 5 samples). */
int32_t dpg_handoff_ns(const struct dpg_handoff *h);

#endif
