/* SPDX-License-Identifier: BSD-3-Clause */
/* shm_impl.h - the node segment's internal layout (header, control lines,
 * handle) and what shm.c, shm_seg.c and shm_direct.c share; not for callers. */
#ifndef DPG_LIB_SHM_IMPL_H
#define DPG_LIB_SHM_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "handoff.h"
#include "xcost.h"
#include "shm.h"

#define SHM_MAGIC 0x3130736d68736770ull	/* "pgshsm01" */
#define SHM_VERSION 2
#define SHM_CL 64

#define SHM_DEFAULT_SLOT (256u << 10)
#define SHM_DEFAULT_SLOT_OVERSUB (1u << 20)
#define SHM_DEFAULT_SETS 4
/* Slots per rank, K * S, by default: more than a core's L2 (1 MiB on the
 * AMD EPYC hosts measured), so that a slot's lines have left the readers'
 * caches before it is written again (see shm_direct.c) */
#define SHM_RING_BYTES (2u << 20)
#define SHM_MAX_SETS 16
#define SHM_DEFAULT_PIPE (1u << 20)
#define SHM_MAX_SEGMENT (64u << 20)
/* Direct allreduce: up to this many bytes, every rank reduces everything. */
#define SHM_SMALL_BYTES (16u << 10)
/* Copies into the user's buffer bypass the cache (non-temporal stores)
 * when the collective writes at least this much: the buffer would not stay
 * in cache anyway, and the stores then need no read-for-ownership. */
#define SHM_NT_BYTES (8u << 20)
/* Copies into the slots stream (non-temporal stores: the lines go to
 * memory, not the writer's cache) in calls of at least STREAM_BYTES when
 * a line written by one local rank takes SLOW_HANDOFF_NS or more to reach
 * another (the median of the last samples, any rank's).  Measured on a
 * 2-vCPU AMD EPYC VM whose host moves the vCPUs (2026-11-27): round trips
 * of 40-135 ns, handoff estimates of 75-120 ns, and copies through a slot
 * at 10-33 GB/s (streamed: 7-23) while the vCPUs share a cache; round trips
 * of 470-520 ns, estimates of 240-320 ns, and copies through a slot at
 * 1.5-4.8 GB/s (streamed: 8-23) when they do not. */
#define SHM_STREAM_BYTES (64u << 10)
#define SHM_SLOW_HANDOFF_NS 200
/* While the handoffs are slow, a writer copies one large call the other
 * way once EXPLORE_MS have passed since the last, and keeps the way whose
 * calls cost less (xcost.h): streaming was 4-8x faster on the AMD VM with
 * its vCPUs apart, and 5-20% slower at 16-64 MiB on an Intel Xeon whose
 * two vCPUs share the L3 but pass a line in 210-240 ns (its mesh), so the
 * latency alone does not tell.  With long calls the gap is EXPLORE_CALLS
 * calls, at most EXPLORE_MAX_MS.  An estimate older than AGE_MS no longer
 * counts (its rank has stopped sampling: e.g. it is always the last to
 * arrive). */
#define SHM_EXPLORE_MS 50
#define SHM_EXPLORE_CALLS 12
#define SHM_EXPLORE_MAX_MS 200
#define SHM_HANDOFF_AGE_MS 250
/* all_gather calls with blocks of at least CMA_BLOCK_BYTES, and broadcasts
 * of at least CMA_BCAST_BYTES, up to CMA_MAX_BYTES (all ranks' together),
 * read the owners' buffers in place where the ranks can and do not
 * outnumber the CPUs (shm_direct.c's single copy, which has the figures) */
#define SHM_CMA_BLOCK_BYTES (8u << 10)
#define SHM_CMA_BCAST_BYTES (8u << 10)
#define SHM_CMA_MAX_BYTES (16u << 20)
#define SHM_CMA_ALIGN 4096	/* a broadcast root's part: whole pages */
/* all_gather / broadcast stages: a quarter of the call, at least this */
#define SHM_CHUNK_DIV 4
#define SHM_MIN_CHUNK (16u << 10)

/* Waits: spin (when not oversubscribed) for dpg_shm_spin_ns, at least
 * SPIN_NS, yield this many times, then sleep in futex slices of at most
 * SLICE_MS. */
#define SHM_SPIN_NS DPG_SHM_SPIN_MIN_NS
#define SHM_YIELDS 4
#define SHM_YIELD_NS 200000
#define SHM_SLICE_MS 50
#define SHM_HEALTH_MS 20

struct shm_hdr {
	_Atomic uint64_t magic;
	uint64_t size;
	uint32_t version;
	uint32_t mode;
	uint32_t nlocal;
	uint32_t nsets;
	uint64_t slot_bytes;
	uint64_t pipe_bytes;
	uint64_t ctl_off;
	uint64_t data_off;
	_Atomic uint32_t attached;
	_Atomic uint32_t gone;		/* the last attacher removed the name */
	uint32_t split;			/* direct: copy collectives run in stages
					 * under a slot (shm_direct.c); the
					 * creator decides, every rank follows */
	_Alignas(SHM_CL) _Atomic uint64_t fail;
};
/* tests/unit/runtime/test_shm.c corrupts the word here, as a stranger would */
_Static_assert(offsetof(struct shm_hdr, fail) == 128, "failure word offset");

/* One per local rank; each line has one writer (or is the bell). */
struct shm_ctl {
	_Alignas(SHM_CL) _Atomic uint64_t in;	/* owner: stages copied in */
	_Atomic uint64_t red;			/* owner: stages reduced */
	_Atomic uint64_t out;			/* owner: stages copied out */
	_Atomic uint64_t bar;			/* owner: barriers entered */
	int32_t pid;
	_Atomic uint32_t busy;			/* owner: inside a ring collective */
	_Atomic int64_t t_in;			/* owner: when it last published in
						 * of a large call (ns, monotonic) */
	_Atomic int32_t handoff_ns;		/* owner: its handoff estimate */
	_Atomic int64_t handoff_at;		/* owner: when it last sampled (ns) */
	_Alignas(SHM_CL) _Atomic uint32_t bell;	/* futex word, bumped by wakers */
	_Atomic uint32_t nwait;			/* owner: sleeping on bell */
	_Alignas(SHM_CL) _Atomic uint64_t head;	/* pipe into owner: writer's end */
	_Alignas(SHM_CL) _Atomic uint64_t tail;	/* pipe into owner: owner's end */
};

/* the owner's words share the first line, the bell has its own */
_Static_assert(offsetof(struct shm_ctl, bell) == SHM_CL, "control line layout");

struct dpg_shm {
	enum dpg_shm_mode mode;
	int n, me, self;
	int nranks;			/* bound of the failure word's ranks */
	int *ranks;
	const char *const *hosts;
	char name[96];
	bool creator, created, unlinked;
	int lock_fd;			/* creator: holds the file locked, which
					 * tells dpg_shm_sweep it lives; or -1 */
	void *base;
	size_t size;
	struct shm_hdr *hdr;
	struct shm_ctl *ctl;
	char *data;
	int *pidfds;			/* -1: not watched */
	pid_t *pids;
	bool pid_ok, oversub;
	bool split;			/* hdr->split */
	int stream;			/* copies into slots: 1 stream, -1 never,
					 * 0 by the handoff latency */
	int cma;			/* single copy: 1 every rank can read
					 * every other and wants to, -1 not,
					 * 0 not probed yet */
	bool cma_want;			/* this rank's part: configured, pids
					 * valid here */
	struct dpg_handoff handoff;	/* latencies this rank sampled */
	struct dpg_xcost xcost;		/* its large calls' cost, streamed or not */
	int64_t explored_ns;		/* when it last copied a large call the
					 * other way (see stream_in) */
	int64_t call_ns;		/* how long its last large call took */
	int64_t last_health_ms;
	int64_t wait_end_ns;		/* when its last wait that did not end
					 * at once ended (shm_wait's spins) */
	/* direct */
	size_t S;			/* slot bytes */
	int K;
	uint64_t g;			/* next stage */
	uint64_t out_floor;		/* every peer's out was seen >= this
					 * (monotonic: stays true; wait_set_free) */
	char *stamps;			/* K x n stamp cells of SHM_CL bytes */
	const void **srcs;		/* n source pointers, reused */
	/* pipes */
	size_t P;
	int pipe_to, pipe_from;
	uint64_t wpos, rpos;
};

/* What a wait waits for: every local rank's counter of a kind reaching v,
 * one peer's in, or room / data in the pipes. */
enum { W_IN, W_RED, W_OUT, W_BAR, W_ONE_IN, W_PIPE };

struct wcond {
	int kind;
	uint64_t v;
	int q;			/* W_ONE_IN */
	bool rd, wr;		/* W_PIPE */
};

static inline size_t shm_round_up(size_t x, size_t a)
{
	return (x + a - 1) / a * a;
}

/* Store a progress counter and wake whoever sleeps (shm.c). */
void shm_publish(struct dpg_shm *s, _Atomic uint64_t *ctr, uint64_t v);
/* Wait until c holds; max_us > 0: give up (return 0) after that long (shm.c). */
int shm_wait(struct dpg_shm *s, const struct wcond *c, const struct dpg_shm_wait *w,
	     int64_t max_us, struct dpg_err *err);
/* Wait until every local rank's counter of this kind reaches v (shm.c). */
int shm_wait_all(struct dpg_shm *s, int kind, uint64_t v, const struct dpg_shm_wait *w,
		 struct dpg_err *err);
/* Free a segment handle in any state dpg_shm_open leaves it in (shm_seg.c). */
void shm_free(struct dpg_shm *s);

#endif
