/* SPDX-License-Identifier: BSD-3-Clause */
/* cpuset.h - a fixed-size set of PU (logical CPU) OS indices, its Linux
 * CPU-list syntax, and this process's sched affinity as such a set. */
#ifndef DPG_LIB_CPUSET_H
#define DPG_LIB_CPUSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* Highest supported PU (logical CPU) OS index + 1. */
#define DPG_CPU_MAX 8192

/* Room that always suffices for dpg_cpuset_format() of any set. */
#define DPG_CPUSET_STR_MAX 40960

/* A set of PU OS indices (what Linux calls a CPU number). */
struct dpg_cpuset {
	uint64_t w[DPG_CPU_MAX / 64];
};

void dpg_cpuset_zero(struct dpg_cpuset *s);
void dpg_cpuset_fill(struct dpg_cpuset *s);		/* 0..DPG_CPU_MAX-1 */
void dpg_cpuset_set(struct dpg_cpuset *s, unsigned cpu);	/* ignores >= MAX */
void dpg_cpuset_clr(struct dpg_cpuset *s, unsigned cpu);
bool dpg_cpuset_isset(const struct dpg_cpuset *s, unsigned cpu);
unsigned dpg_cpuset_count(const struct dpg_cpuset *s);
bool dpg_cpuset_empty(const struct dpg_cpuset *s);
/* Lowest member >= from, or -1. */
int dpg_cpuset_next(const struct dpg_cpuset *s, unsigned from);
void dpg_cpuset_and(struct dpg_cpuset *d, const struct dpg_cpuset *a,
		    const struct dpg_cpuset *b);
void dpg_cpuset_or(struct dpg_cpuset *d, const struct dpg_cpuset *a,
		   const struct dpg_cpuset *b);
bool dpg_cpuset_intersects(const struct dpg_cpuset *a,
			   const struct dpg_cpuset *b);
bool dpg_cpuset_subset(const struct dpg_cpuset *sub,
		       const struct dpg_cpuset *super);
bool dpg_cpuset_equal(const struct dpg_cpuset *a, const struct dpg_cpuset *b);

/* Parse a Linux CPU list ("0-11,48-59", "3", "" = empty; spaces around items
 * are accepted).  Every index must be < DPG_CPU_MAX. */
int dpg_cpuset_parse(const char *list, struct dpg_cpuset *out,
		     struct dpg_err *err);

/* Write s as a CPU list ("0-11,48-59"; "" when empty).  Fails if len is too
 * small (DPG_CPUSET_STR_MAX always suffices). */
int dpg_cpuset_format(const struct dpg_cpuset *s, char *buf, size_t len,
		      struct dpg_err *err);

/* This process's CPU affinity (sched_getaffinity) as a set. */
int dpg_cpuset_from_affinity(struct dpg_cpuset *out, struct dpg_err *err);

/* Narrow this process's affinity to want & its current affinity.  *nbound
 * is the number of CPUs kept; 0 (and no change) when want has none of the
 * CPUs this process may run on.  Fails only on a system error. */
int dpg_cpuset_to_affinity(const struct dpg_cpuset *want, unsigned *nbound,
			   struct dpg_err *err);

#endif
