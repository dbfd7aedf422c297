/* SPDX-License-Identifier: BSD-3-Clause */
/* startup.h - the time of each startup phase of a rank (the plugin's planning,
 * rendezvous, backend setup, first collective), measured with
 * CLOCK_MONOTONIC, and the one greppable line that DPG_VERBOSE=1 prints on
 * rank 0 and on every node leader (local rank 0):
 *
 *   dpg: startup rank 0 (n1): plan 2.1 ms (cached), rendezvous 12.3 ms,
 *   backend 4.5 ms (shm+tcp), first collective 0.8 ms (allreduce)
 *
 * (one line).  "plan -" when the plugin did not say (no --dpg-verbose, or
 * not launched by it).  Rendezvous: dpg_init's start to the agreed world
 * (store, rank claim, greeting); backend: the world communicator's setup;
 * first collective: the first collective call's own duration. */
#ifndef DPG_LIB_STARTUP_H
#define DPG_LIB_STARTUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DPG_STARTUP_HOW_MAX 16

struct dpg_startup {
	bool verbose;			/* DPG_VERBOSE=1 */
	bool done;			/* the first collective was timed */
	double plan_ms;			/* < 0: not known */
	char plan_how[DPG_STARTUP_HOW_MAX];	/* "live", "cached", "xml" */
	int64_t t0_ns, joined_ns, backend_ns;	/* CLOCK_MONOTONIC */
	double first_ms;
	char first_kind[24];		/* "allreduce", ... */
};

/* Start the clock; read DPG_VERBOSE and DPG_STARTUP_PLAN through get
 * (getenv in libdpg; tests pass their own). */
void dpg_startup_begin(struct dpg_startup *s, const char *(*get)(const char *));

/* Parse a DPG_STARTUP_PLAN value ("MS HOW"): 0, or -1 when malformed. */
int dpg_startup_parse_plan(const char *v, double *ms, char *how, size_t how_len);

/* The line (no newline) for rank `rank` on `node`, backend name `backend`. */
int dpg_startup_format(const struct dpg_startup *s, int rank, const char *node,
		       const char *backend, char *buf, size_t len);

static inline double dpg_startup_ms(int64_t from_ns, int64_t to_ns)
{
	return (double)(to_ns - from_ns) / 1e6;
}

#endif
