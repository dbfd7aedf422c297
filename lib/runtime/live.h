/* SPDX-License-Identifier: BSD-3-Clause */
/* live.h - the liveness watch's decisions (live.c) and its thread (watch.c):
 * how a rank of an NCCL job notices that a peer died or stopped.
 *
 * NCCL cannot tell a dead peer from a slow one, and its own timeouts are
 * minutes long, so every rank of a multi-process NCCL context runs one
 * watcher thread on a store connection of its own.  Each round
 * (DPG_LIVE_BEAT_MS) it adds 1 to its heartbeat "<ns>/live/<rank>", reads
 * the heartbeat of the next rank in a ring (rank + 1 mod n) and the death
 * count "<ns>/live/ndead".  A peer whose heartbeat has not moved for the
 * peer timeout (DPG_PEER_TIMEOUT, seconds; on the watcher's own clock, so
 * that nodes' clocks never meet) is declared dead: the first watcher to see
 * it writes "<ns>/live/dead" = "<rank> <silent ms> <watcher>" and counts it,
 * and every watcher reads the record within a round and reports it.  A lost
 * or silent store connection names rank 0, whose process holds the store.
 * The context then aborts every communicator, and every call fails with
 * DPG_ERR_PEER naming the dead rank (comm.c, init.c). */
#ifndef DPG_LIB_LIVE_H
#define DPG_LIB_LIVE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define DPG_LIVE_BEAT_MS 250		/* between a watcher's rounds */
#define DPG_LIVE_DEAD_MS 5000		/* the default peer timeout */
#define DPG_LIVE_DEAD_MIN_MS 1000	/* at least four rounds */
#define DPG_LIVE_MSG_MAX 256
/* A heartbeat at or past this: the rank left (dpg_finalize), not dead. */
#define DPG_LIVE_LEFT (INT64_C(1) << 40)

/* What a watcher knows of the peer it watches. */
struct dpg_live_peer {
	int64_t beat;		/* the heartbeat last read */
	int64_t since_ms;	/* when it last changed (or was first read) */
	bool seen;		/* read at least once */
};

/* One reading of the peer's heartbeat at now_ms (the watcher's clock).
 * Returns true when it has not moved for dead_ms or more, and never once it
 * reached DPG_LIVE_LEFT (the peer left in dpg_finalize). */
bool dpg_live_observe(struct dpg_live_peer *p, int64_t beat, int64_t now_ms,
		      int64_t dead_ms);

/* The rank that rank watches among n (the next one in a ring); -1 when
 * n < 2 or rank is out of range. */
int dpg_live_target(int rank, int n);

/* The peer timeout from DPG_PEER_TIMEOUT's value v (seconds, a decimal;
 * NULL or "": the default; "0": no watch, *out = 0).  Returns 0, or
 * -DPG_ERR_INVALID with e naming the value and the accepted range. */
int dpg_live_dead_ms(const char *v, int64_t *out, struct dpg_err *e);

/* The death record: "<rank> <silent_ms> <watcher>" into buf (returns the
 * length), and back (false on anything else, or a rank outside [0, n)). */
int dpg_live_record(char *buf, size_t len, int rank, int64_t silent_ms,
		    int watcher);
bool dpg_live_parse(const char *s, int n, int *rank, int64_t *silent_ms,
		    int *watcher);

/* The one line every survivor reports: "rank R (NODE) died or stopped: no
 * heartbeat for S s (seen by rank W); every communicator was aborted".
 * node may be NULL or "". */
void dpg_live_message(char *buf, size_t len, int rank, const char *node,
		      int64_t silent_ms, int watcher);

/* The line for a lost store: rank 0 holds it ("rank 0 (NODE) died or
 * stopped: this rank's store connection <how>; ..."). */
void dpg_live_store_message(char *buf, size_t len, const char *node0,
			    const char *how);

/* ------------------------------------------------------------ the watcher */

struct dpg_store;

/* Called once, from the watcher's thread, with the dead rank and the line. */
typedef void dpg_live_dead_fn(void *arg, int rank, const char *msg);

struct dpg_watch {
	struct dpg_store *store;	/* its own connection (owned) */
	const char *ns;			/* "dpg/<job>.<step>" */
	int rank, n;
	int64_t dead_ms, beat_ms;
	const char *const *nodes;	/* node names by world rank (may be NULL) */
	dpg_live_dead_fn *on_dead;
	void *arg;
	volatile int stop;
	bool running;
	int dead_rank;			/* -1 until on_dead was called */
	pthread_t thread;
};

/* Start w's thread (w filled in by the caller, store owned from now on and
 * closed by dpg_watch_stop even when this fails).  Returns 0 or a negated
 * status with e set. */
int dpg_watch_start(struct dpg_watch *w, struct dpg_err *e);

/* Stop and join the thread (it first raises its heartbeat by DPG_LIVE_LEFT:
 * its watcher must not take a rank that left for a dead one), close its
 * connection (idempotent). */
void dpg_watch_stop(struct dpg_watch *w);

#endif
