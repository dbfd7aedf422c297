/* SPDX-License-Identifier: BSD-3-Clause */
/* ring.h - the CPU backend's ring engine and failure-notice protocol: the
 * communicator state it runs on, the job it runs, and its entry points.
 *
 * cpu_backend.c sets up a struct dpg_cpu (links, node segment, buffers) and
 * describes every collective as a struct dpg_ring_job; ring.c moves the
 * bytes and floods failures (see ring.c for the engine and the protocol). */
#ifndef DPG_LIB_RING_H
#define DPG_LIB_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "dpg.h"
#include "err.h"
#include "shm.h"
#include "stamp.h"

#define DPG_RING_STAGE_BYTES (256u << 10)	/* TCP staging for reduce steps */
#define DPG_RING_NOTICE_BYTES 16		/* one failure notice on the wire */
#define DPG_RING_DEFER 16			/* broadcasts' stamps left for later */

/* How a ring hop is carried: not at all (direct mode, size 1), TCP, or a
 * shared-memory pipe of the node segment. */
enum { DPG_LINK_NONE = 0, DPG_LINK_TCP, DPG_LINK_SHM };

/* One ring neighbour (next or prev). */
struct dpg_cpu_link {
	int kind;
	int peer;		/* comm rank */
	int fd;			/* TCP data connection */
	int cfd;		/* TCP notice connection */
	/* partial notice read on the channel we read notices from */
	unsigned char nbuf[DPG_RING_NOTICE_BYTES];
	size_t nlen;
	bool nclosed;		/* that channel hit EOF / an error */
};

/* One communicator of the CPU backend (c->impl), built by cpu_backend.c's
 * init, run by the ops and the ring engine, freed by cpu_backend.c. */
struct dpg_cpu {
	struct dpg_comm *c;
	int n, rank, pos;
	int *ring;			/* position -> comm rank */
	char **hosts;			/* comm rank -> host, for messages */
	struct dpg_cpu_link next, prev;
	struct dpg_shm *shm;
	bool direct;			/* all ranks local: shm.c algorithms */
	bool tcp_only;			/* every rank on its own node */
	int efd;			/* eventfd: abort kicks the poll */
	atomic_int aborted;
	const volatile int *uabort;
	double timeout_s;
	size_t chunk;
	size_t lockstep;		/* broadcasts of >= lockstep bytes: tok_in/out */
	bool tcp_spin;
	/* sticky failure */
	int fail_rc;
	bool prev_waiting;		/* prev said it times out on its own prev */
	char fail_msg[DPG_ERR_MSG_MAX];
	bool fail_sent;
	/* buffers */
	char *stage;			/* TCP receive staging for reduce steps
					 * (DPG_RING_STAGE_BYTES) */
	char *scratch;			/* reduce_scatter result when recv
					 * overlaps send (grow-only) */
	size_t scratch_cap;
	char *acc;			/* partials in the accumulation type of
					 * reduce.h, one slot per reduce step
					 * (grow-only) */
	size_t acc_cap;
	struct dpg_stamp rstamp;	/* the stamp received from prev */
	struct dpg_stamp bstamp;	/* two-way broadcast: the one from next */
	/* stamps a ring broadcast leaves for later (ring.c): a root's calls
	 * whose stamp from prev is still to be read (owed, read into rowed),
	 * a last rank's stamps not yet sent to next (unsent, + this call's) */
	struct dpg_stamp owed[DPG_RING_DEFER], rowed[DPG_RING_DEFER];
	int nowed;
	struct dpg_stamp unsent[DPG_RING_DEFER + 1];
	int nunsent;
	int32_t *barbuf;		/* n int32 for the ring barrier */
};

/* The host of comm rank `rank`, for messages ("?" when unknown). */
static inline const char *dpg_cpu_host(const struct dpg_cpu *p, int rank)
{
	return rank >= 0 && rank < p->n && p->hosts[rank] != NULL ? p->hosts[rank] : "?";
}

/* The communicator's own abort flag or the user's is raised. */
static inline bool dpg_cpu_aborted(const struct dpg_cpu *p)
{
	return atomic_load_explicit(&p->aborted, memory_order_relaxed) ||
	       (p->uabort != NULL && *p->uabort);
}

/* ------------------------------------------------------------ ring jobs */

/* A collective as the engine runs it: T_out send steps and T_in receive
 * steps over the ring (see ring.c for which block each step carries),
 * preceded in both directions by the call's stamp (step -1). */
enum { DPG_JOB_ALLREDUCE, DPG_JOB_RS, DPG_JOB_AG, DPG_JOB_BCAST, DPG_JOB_XCHG };

/* One lane of an exchange job (DPG_JOB_XCHG): its one out step sends
 * out_len bytes from src, the first own of them our own and the rest what
 * the lane's in step stores at dst (in_len) as it comes in (all of it at
 * once, once in, when the job is whole); the caller lays the regions out
 * (cpu_backend.c's small reduce-scatter). */
struct dpg_ring_lane {
	const char *src;
	char *dst;
	size_t out_len, own, in_len;
};

struct dpg_ring_job {
	int kind;
	const char *send;
	char *recv;
	size_t count;		/* allreduce: total; RS: recvcount; AG: sendcount */
	size_t es;
	dpg_dtype_t dt;
	dpg_op_t op;
	int T_out, T_in;
	int B_out, B_in;	/* > 0: a two-way job's steps backward (to prev,
				 * from next; TCP hops only; ring.c) */
	int dep;		/* out step t needs in step t - dep (both ways) */
	bool out0_free;		/* out step 0 needs nothing */
	bool lock;		/* a broadcast in lockstep (ring.c; the same on
				 * every rank): no stamp is deferred */
	bool tok_out, tok_in;	/* and on its TCP hops: send our stamp to prev
				 * on the backward lane at once / send data to
				 * next only once its stamp came back that way
				 * (B_out / B_in == 0) */
	bool ne;		/* an all-gather by neighbour exchange (even n,
				 * two-way; ring.c): its steps and each lane's
				 * dep and out0_free follow from our position
				 * (an exchange job's lanes too) */
	struct dpg_ring_lane x[2];	/* DPG_JOB_XCHG: forward, backward */
	bool whole;		/* an out step that forwards waits until its in
				 * step is whole, its own bytes too (ring.c) */
	size_t base, rem;	/* allreduce block split */
	char *rs_final;		/* RS: where the reduced block goes */
	size_t aes;		/* > 0: partials travel as accumulators of
				 * aes bytes (reduce.h), rounded / divided once
				 * at the last reduce step; reduce step t < n-2
				 * keeps its partial at p->acc + t*ablk*aes
				 * (reduce_scatter: t*ablk*es when aes == 0) */
	size_t ablk;		/* elements of the largest block */
	struct dpg_stamp stamp;	/* this rank's call, sent first */
};

static inline int dpg_ring_mod(int a, int n)
{
	a %= n;
	return a < 0 ? a + n : a;
}


/* Rank b's block of a reduce-scatter or all-gather job (j->es set): count
 * elements each, or with base set (a split allreduce) the first rem one
 * element longer: its byte offset and length. */
void dpg_ring_block(const struct dpg_ring_job *j, int b, size_t *off, size_t *len);

/* Run job j over the ring until every step is done: 0, or a negated
 * dpg_status_t with err filled in (the failure is then sticky in p and has
 * been sent to the neighbours and the node segment). */
int dpg_ring_run(struct dpg_cpu *p, const struct dpg_ring_job *j, struct dpg_err *err);

/* Record that this rank was aborted (and tell the others): -DPG_ERR_ABORTED. */
int dpg_ring_fail_abort(struct dpg_cpu *p, struct dpg_err *err);

/* Record an error that shm.c reported (rc, message in err), with the
 * culprit from the node's failure word; returns the sticky status. */
int dpg_ring_fail_shm(struct dpg_cpu *p, int rc, struct dpg_err *err);

#endif
