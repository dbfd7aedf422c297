/* SPDX-License-Identifier: BSD-3-Clause */
/* track.h - what a context's collectives did (track.c): the current or last
 * collective of this rank (read by the hang responder's thread through a
 * seqlock) and the time spent inside collectives (the straggler report). */
#ifndef DPG_LIB_TRACK_H
#define DPG_LIB_TRACK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DPG_TRACK_NAME_WORDS 8	/* the communicator's name: 64 bytes */

/* Where this rank is, as the hang report says it. */
enum dpg_track_state {
	DPG_TRACK_NONE = 0,	/* no collective yet */
	DPG_TRACK_IN,		/* inside a collective now */
	DPG_TRACK_DONE,		/* the last collective returned DPG_OK */
	DPG_TRACK_FAILED,	/* the last collective failed */
};

/* One collective as this rank entered it (plain copy of the record). */
struct dpg_track_view {
	enum dpg_track_state state;
	const char *kind;		/* "allreduce", ... (static strings) */
	uint64_t seq, count;
	int64_t enter_ns, end_ns;	/* CLOCK_MONOTONIC of this process */
	char comm[DPG_TRACK_NAME_WORDS * 8];
};

/* The record, written by the thread issuing collectives and read by any
 * other: every field an atomic, relaxed, under the version counter (odd
 * while a write is under way). */
struct dpg_track {
	_Atomic uint32_t ver;
	_Atomic int state;
	_Atomic(const char *) kind;
	_Atomic uint64_t seq, count;
	_Atomic int64_t enter_ns, end_ns;
	_Atomic uint64_t name[DPG_TRACK_NAME_WORDS];
	/* the issuing thread's own: nanoseconds inside collectives and the
	 * window of the straggler report */
	int64_t coll_ns;		/* since the window began */
	int64_t window_ns;		/* when it began */
	uint64_t steps;			/* dpg_step_mark calls in it */
	uint64_t step0;			/* steps before it */
	uint64_t report_every;		/* DPG_REPORT (0: off) */
	char last_report[512];		/* rank 0: the last report line */
};

/* Start the record and the window (now). */
void dpg_track_init(struct dpg_track *t);

/* The issuing thread enters collective kind #seq of count elements on the
 * communicator named comm; returns the entry time (ns) for dpg_track_leave. */
int64_t dpg_track_enter(struct dpg_track *t, const char *comm, const char *kind,
			uint64_t seq, uint64_t count);

/* It returned with rc (0 or a negated status). */
void dpg_track_leave(struct dpg_track *t, int64_t enter_ns, int rc);

/* A consistent copy of the record, from any thread. */
void dpg_track_read(struct dpg_track *t, struct dpg_track_view *v);

#endif
