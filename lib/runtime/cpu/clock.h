/* SPDX-License-Identifier: BSD-3-Clause */
/* clock.h - the CPU backend's fine clock: monotonic nanoseconds for spin and
 * yield budgets (millisecond deadlines use net.h's dpg_now_ms). */
#ifndef DPG_LIB_CPU_CLOCK_H
#define DPG_LIB_CPU_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t dpg_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#endif
