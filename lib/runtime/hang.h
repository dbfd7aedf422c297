/* SPDX-License-Identifier: BSD-3-Clause */
/* hang.h - the hang report (hang.c): when a collective times out, the ranks
 * that can still talk say what they were doing.
 *
 * Every rank of a multi-process context runs one responder thread on a store
 * connection of its own, parked in a GET of "<ns>/hang/req/<k>" (k = 1, 2,
 * ...): nothing flows until a report is asked for.  A rank whose collective
 * timed out asks (ADD "<ns>/hang/n" -> k, SET "<ns>/hang/req/<k>"), every
 * responder answers with its rank's record (track.h) as durations on its own
 * clock under "<ns>/hang/<k>/<rank>", and the asker reads the answers until
 * a short deadline (2 s, at most DPG_TIMEOUT).  A stopped process (SIGSTOP,
 * a debugger) or one that is gone does not answer and is named as such; a
 * process busy outside collectives answers from its responder thread.
 * A rank answers with its main thread's collective while it is inside one,
 * else with the one a library thread (the stage-3 prefetch, through
 * dpg_rt_all_gather) is inside or entered last. */
#ifndef DPG_LIB_HANG_H
#define DPG_LIB_HANG_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "track.h"

struct dpg_ctx;
struct dpg_store;

/* How long an asker waits for the answers: DPG_TIMEOUT / 40 within
 * [DPG_HANG_WAIT_MIN_MS, DPG_HANG_WAIT_MS], so that a timed-out call still
 * returns within about DPG_TIMEOUT + 3 % (a stopped rank costs the whole wait). */
#define DPG_HANG_WAIT_MS 2000
#define DPG_HANG_WAIT_MIN_MS 250
int64_t dpg_hang_wait_ms(int64_t timeout_ms);
#define DPG_HANG_LINE_MAX 1536	/* the summary, truncated with "..." */

/* The responder of one context. */
struct dpg_hang {
	struct dpg_store *store;	/* its own connection */
	volatile int stop;		/* raised by dpg_hang_stop */
	pthread_t thread;
	bool running;
	_Atomic int64_t last_ms;	/* when it last answered (dpg_now_ms) */
	int64_t asked_ms;		/* when this rank last asked, 0: never */
};

/* One rank's answer, as the asker parsed it. */
struct dpg_hang_ans {
	bool ok;			/* answered in time */
	struct dpg_track_view v;
	int64_t ago_ms, dur_ms;		/* since its entry; how long it was in */
	char busid[32];			/* "" = no GPU */
};

/* Start ctx's responder on store (connected for it; owned from now on,
 * closed by dpg_hang_stop even when this fails).  Returns 0 or a negated
 * status with e set. */
int dpg_hang_start(struct dpg_ctx *ctx, struct dpg_store *store, struct dpg_err *e);

/* Stop and join the responder, close its connection (idempotent).  A rank
 * that asked for a report (its peers timed out too, and ask in turn) first
 * goes on answering until nobody asked for DPG_HANG_WAIT_MS, at most
 * 2 x DPG_HANG_WAIT_MS, so that the peers' reports still hear from it. */
void dpg_hang_stop(struct dpg_ctx *ctx);

/* Ask every rank and write the summary into out (bounded: returns within
 * about DPG_HANG_WAIT_MS).  comm: the communicator whose call timed out
 * (its name is left out of the lines about it).  "" when there is nobody
 * to ask. */
void dpg_hang_report(struct dpg_ctx *ctx, const char *comm, char *out, size_t len);

/* The summary of n answers (world ranks 0..n-1; node names nodes[r]):
 * "allreduce #812 on w: ranks 0-2,4-5 waiting since 40.1 s; rank 3 (n2, GPU
 * 0000:43:00.0) last entered allreduce #811, 41.0 s ago". */
void dpg_hang_format(const struct dpg_hang_ans *a, int n, const char *const *nodes,
		     double wait_s, char *out, size_t len);

/* "0-2,4-5" for the ranks r with pick[r] (n entries). */
void dpg_hang_ranges(const bool *pick, int n, char *out, size_t len);

#endif
