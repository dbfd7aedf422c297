/* SPDX-License-Identifier: BSD-3-Clause */
/* ctx.h - the context of a process in a job (struct dpg_ctx), shared by the
 * runtime's own files (init, comm, coll); others use runtime.h. */
#ifndef DPG_LIB_CTX_H
#define DPG_LIB_CTX_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "gpumod.h"
#include "hang.h"
#include "join.h"
#include "live.h"
#include "runtime.h"
#include "startup.h"
#include "track.h"

/* room for a message, its prefix and a hang report (hang.h) */
#define DPG_CTX_ERR_MAX (DPG_ERR_MSG_MAX + 256 + DPG_HANG_LINE_MAX)
#define DPG_ADDR_STR_MAX 64

struct rt_comm;

struct dpg_rank_info {
	char node[DPG_HOST_MAX];
	char addr[DPG_ADDR_STR_MAX];
	int cap;		/* NCCL capability, see init.c's nccl_cap() */
};

struct dpg_ctx {
	struct dpg_join j;
	char node[DPG_HOST_MAX];
	char who[DPG_HOST_MAX + 32];
	char ns[64];			/* "dpg/<job>.<step>" */
	char addr[DPG_ADDR_STR_MAX];	/* where peers reach this rank */
	int64_t timeout_ms;
	dpg_backend_t backend;
	int device;
	struct dpg_gpumod_lib gpu;	/* the CUDA module, once loaded */
	int gpu_cap;			/* this rank's NCCL capability (init.c) */
	char gpu_why[DPG_ERR_MSG_MAX];	/* why the module did not load, or "" */
	struct dpg_store_server *srv;
	struct dpg_store *store;
	struct dpg_store_relay *relay;	/* this node's relay, when we lead it */
	char relay_name[64];		/* its socket; "" = straight to rank 0's store */
	volatile int abort_flag;
	volatile int halt_flag;		/* ctx->store's: dpg_abort or a dead peer */
	bool failed;			/* a collective failed: no goodbye barrier */
	bool ready;			/* dpg_init succeeded */
	pthread_mutex_t lock;		/* the comm list (dpg_abort walks it) */
	struct rt_comm *comms;		/* newest first */
	struct rt_comm *world;
	struct dpg_rank_info *ranks;	/* world_size entries (NULL: one rank) */
	dpg_mesh_t **meshes;		/* alive meshes, for dpg_finalize */
	size_t nmesh, mesh_cap;
	struct dpg_track track;		/* the current or last collective */
	struct dpg_track bg;		/* the same of the collectives run by a
					 * library thread (zero.c's prefetch):
					 * writers hold bg_lock */
	pthread_mutex_t bg_lock;
	int64_t bg_t0;			/* entry time of the gather started on a
					 * device stream (dpg_rt_all_gather_start) */
	struct dpg_hang hang;		/* its responder (multi-process) */
	struct dpg_watch watch;		/* the liveness watch (NCCL, live.h) */
	const char **watch_nodes;	/* node names by rank, for its lines */
	int dead_rank;			/* a peer it found dead (atomic), -1 */
	char dead_msg[DPG_LIVE_MSG_MAX];	/* its line, set before dead_rank */
	struct dpg_startup startup;	/* the startup phases' times (DPG_VERBOSE) */
	int64_t stop_grace;		/* DPG_REQUEUE seconds (stop.c), 0 = off */
	int64_t stop_at;		/* DPG_END_TIME - GRACE, 0 = none */
	bool stop_seen;			/* dpg_stop_requested said stop once */
	char err[DPG_CTX_ERR_MAX];
};

/* The rank the liveness watch found dead (-1: none), and its line. */
int dpg_ctx_dead_peer(const struct dpg_ctx *ctx, const char **msg);

/* After an NCCL failure that may be a peer's death (NCCL's own socket
 * error can come before the watch's verdict): wait, at most one watch
 * period and two beats, for the liveness watch to name a dead rank, and
 * return it as dpg_ctx_dead_peer does.  At once without a running watch. */
int dpg_ctx_await_dead_peer(struct dpg_ctx *ctx, const char **msg);

/* dpg_abort was called. */
bool dpg_ctx_aborted(const struct dpg_ctx *ctx);


/* The one mapping at the public edge: an internal return code (0 or a
 * negated dpg_status_t) as a dpg_status_t.  A failure records the last
 * error "<who> <what>: <e's message>" ("<e's message>" when what is NULL;
 * the status's text when e has none); success clears it. */
dpg_status_t dpg_ctx_fail(struct dpg_ctx *ctx, int rc, const char *what,
			  const struct dpg_err *e);

/* An internal return code as a dpg_status_t (unknown codes: SYSTEM). */
dpg_status_t dpg_status_of(int rc);

#endif
