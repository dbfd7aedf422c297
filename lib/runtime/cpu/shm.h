/* SPDX-License-Identifier: BSD-3-Clause */
/* shm.h - the shared-memory side of the CPU backend: one persistent segment
 * per node and communicator, created by the node's first rank (shm_open,
 * its memory reserved, named through the rendezvous store, unlinked by the
 * last local rank to map it), holding
 *   - per local rank: progress counters, a futex "bell" and a waiter count;
 *   - a node-wide failure word (who failed and why), so that one rank's
 *     discovery reaches every local rank at once;
 *   - "direct" mode (the whole communicator on this node): K sets of one
 *     cache-sized slot per rank, through which the collectives run as a
 *     pipeline of copy-in / reduce-out-of-shared-memory / copy-out stages;
 *   - "pipes" mode (a ring that also crosses nodes): one single-producer
 *     single-consumer byte pipe into each local rank, used by the ring
 *     engine of ring.c for the intra-node hops.
 * Waits spin briefly (not at all when the node's ranks outnumber its CPUs),
 * then yield, then sleep on the futex in slices, checking the deadline, the
 * abort flags, the failure word and (through pidfds) that the local peers
 * are alive.  Peer death is reported as DPG_ERR_PEER naming the rank. */
#ifndef DPG_LIB_SHM_H
#define DPG_LIB_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "dpg.h"
#include "err.h"
#include "stamp.h"

struct dpg_store;
struct dpg_shm;

/* Why a rank failed: carried by the failure word and by the TCP notices. */
enum dpg_fail_why {
	DPG_FAIL_NONE = 0,
	DPG_FAIL_EXITED,	/* the process is gone */
	DPG_FAIL_CLOSED,	/* it closed its connection */
	DPG_FAIL_ABORTED,	/* it was aborted (dpg_abort) */
	DPG_FAIL_TIMEOUT,	/* someone timed out waiting for it */
	DPG_FAIL_PROTO,		/* it broke the protocol */
	DPG_FAIL_WAITING,	/* not a failure: the reporter timed out waiting
				 * for culprit, its ring predecessor, and asks
				 * its successor to wait for the verdict (TCP
				 * notices only, never in the failure word) */
	DPG_FAIL_MISMATCH,	/* culprit and reporter issued different
				 * collectives (stamp.h): DPG_ERR_INVALID */
	DPG_FAIL_BADWORD,	/* the node segment's failure word was invalid
				 * (corrupt, or written by another process):
				 * culprit -1, reporter the rank that read it */
	DPG_FAIL_BADNOTICE,	/* culprit sent an invalid failure notice */
};

/* A failure: culprit (comm rank) failed for `why`, as seen by reporter. */
struct dpg_fail {
	int why;
	int culprit;
	int reporter;
};

/* Whether f could come from a rank of an nranks communicator: a known
 * reason, culprit and reporter -1 or a rank (indices that are safe to use). */
bool dpg_fail_valid(const struct dpg_fail *f, int nranks);

/* Format f into err ("peer rank 2 (n2) exited", "... (reported by rank 1)"
 * when reporter != self) and return the negated status for it. */
int dpg_fail_format(const struct dpg_fail *f, int self, const char *const *hosts,
		    struct dpg_err *err);

enum dpg_shm_mode {
	DPG_SHM_DIRECT = 1,	/* every rank of the communicator is local */
	DPG_SHM_PIPES,		/* ring hops between local ranks */
};

struct dpg_shm_cfg {
	enum dpg_shm_mode mode;
	int nlocal;			/* local ranks (>= 2) */
	int lrank;			/* this rank's local index */
	const int *ranks;		/* comm rank of each local index */
	const pid_t *pids;		/* pid of each local index */
	bool pid_ok;			/* pids are valid here (same pid namespace) */
	const char *const *hosts;	/* host of every comm rank (messages) */
	int nranks;			/* ranks of the communicator: bounds the
					 * failure word's ranks (0: nlocal in
					 * direct mode, unbounded in pipes mode) */
	int self;			/* this rank's comm rank */
	int oversub;			/* 1: the machine's ranks outnumber its
					 * CPUs (never spin), 0: they don't,
					 * -1: guess from this process's CPUs */
	size_t slot_bytes;		/* direct: bytes per slot (0 = default) */
	int nsets;			/* direct: pipeline depth (0 = default) */
	int stream;			/* direct: copies into the slots with
					 * non-temporal stores: 1 always, -1
					 * never, 0 when lines are slow to pass
					 * between the local CPUs (shm_impl.h) */
	int cma;			/* direct: large all_gathers and
					 * broadcasts read the owners' buffers
					 * in place where every local rank can
					 * (0), or never (-1) */
	size_t pipe_bytes;		/* pipes: bytes per pipe (0 = default) */
	int pipe_to;			/* pipes: local index I write to, or -1 */
	int pipe_from;			/* pipes: local index I read from, or -1 */
	struct dpg_store *store;	/* to publish / look up the segment name */
	const char *key;		/* store key for the segment name */
	int64_t deadline_ms;
	const volatile int *abort;
};

/* Create (local index 0) or attach (others) the node segment.  The creator
 * reserves the segment's memory (a full /dev/shm is an error naming it, not
 * a SIGBUS later) and publishes the name, or its error, under cfg->key; the
 * last local rank to attach removes the name, so that from then on a kill
 * leaves nothing in /dev/shm.  Attachers fail with the creator's error. */
int dpg_shm_open(struct dpg_shm **out, const struct dpg_shm_cfg *cfg,
		 struct dpg_err *err);
/* Every local rank has attached (the caller ran a barrier): drop the name
 * if the last attacher has not (it normally has). */
void dpg_shm_unlink(struct dpg_shm *s);
void dpg_shm_close(struct dpg_shm *s);
/* Remove from dir the names of segments whose creator is gone (killed
 * before every local rank attached, so nobody removed the name): files
 * named as dpg_shm_open names them, of this user, older than min_age_s,
 * that no process holds locked (a creator locks its file from creation on,
 * so a live one, in whatever pid namespace, is never touched).  Best effort;
 * returns how many it removed.  dpg_shm_open's creator runs it on /dev/shm. */
int dpg_shm_sweep(const char *dir, double min_age_s);

/* How long a wait that began at t0 spins before it yields and sleeps: the
 * call's work since from_ns (when the call began, or its last wait that
 * did not end at once; 0: unknown), within MIN_NS..MAX_NS.  A peer doing
 * the same work (a large copy) is about that far behind, and a futex sleep
 * costs its waker a syscall and the sleeper tens of microseconds of wakeup;
 * a small call, or one whose peer has not come, spins briefly, and a
 * waiting rank burns at most what it worked. */
#define DPG_SHM_SPIN_MIN_NS 30000
#define DPG_SHM_SPIN_MAX_NS 1000000
int64_t dpg_shm_spin_ns(int64_t from_ns, int64_t t0);

/* What a blocking call may wait for. */
struct dpg_shm_wait {
	int64_t deadline_ms;
	const volatile int *abort;	/* the user's flag (may be NULL) */
	const volatile int *abort2;	/* the communicator's own flag */
	double timeout_s;		/* for messages */
	const struct dpg_stamp *stamp;	/* direct mode: this rank's call, checked
					 * against every peer's (NULL: none) */
	int64_t start_ns;		/* when the call began (dpg_now_ns), which
					 * sizes the spins (0: its waits' ends) */
};

/* Direct-mode collectives (all ranks of the communicator local; the local
 * index is the comm rank).  Same arguments and semantics as the dpg_comm_ops
 * functions; return 0 or a negated dpg_status_t with err filled in.  With
 * w->stamp, each rank writes its stamp into a cell beside its slot of the
 * collective's first stage and compares every peer's before it reads their
 * data: a mismatch is DPG_ERR_INVALID naming both sides on every rank (the
 * broadcast then waits for every rank to arrive, the barrier is a stage).
 * A collective whose data is complete still fails if the failure word is set
 * when it ends (a peer aborted or failed meanwhile). */
int dpg_shm_allreduce(struct dpg_shm *s, const void *send, void *recv, size_t count,
		      dpg_dtype_t dt, dpg_op_t op, const struct dpg_shm_wait *w,
		      struct dpg_err *err);
int dpg_shm_reduce_scatter(struct dpg_shm *s, const void *send, void *recv,
			   size_t recvcount, dpg_dtype_t dt, dpg_op_t op,
			   const struct dpg_shm_wait *w, struct dpg_err *err);
int dpg_shm_all_gather(struct dpg_shm *s, const void *send, void *recv,
		       size_t sendcount, dpg_dtype_t dt, const struct dpg_shm_wait *w,
		       struct dpg_err *err);
int dpg_shm_broadcast(struct dpg_shm *s, void *buf, size_t count, dpg_dtype_t dt,
		      int root, const struct dpg_shm_wait *w, struct dpg_err *err);
int dpg_shm_barrier(struct dpg_shm *s, const struct dpg_shm_wait *w,
		    struct dpg_err *err);
/* This rank's estimate of a cache-line handoff between local ranks, in ns
 * (0: no sample yet); the largest over the ranks decides streaming. */
int dpg_shm_handoff_ns(const struct dpg_shm *s);
/* Whether large all_gathers and broadcasts read the owners' buffers in
 * place (shm_direct.c's single copy): 1 yes, -1 no, 0 not decided yet (the
 * communicator's first such call decides, for every local rank alike). */
int dpg_shm_single_copy(const struct dpg_shm *s);

/* Pipes mode.  At the start of every collective both ends call
 * dpg_shm_pipe_begin (aligns the pipe positions to 8 bytes so that elements
 * never straddle the wrap-around).  write copies up to len bytes in (a
 * multiple of `align` bytes) and returns how many; peek returns the
 * contiguous readable bytes (0 if none); consume releases them. */
void dpg_shm_pipe_begin(struct dpg_shm *s);
size_t dpg_shm_pipe_write(struct dpg_shm *s, const void *buf, size_t len, size_t align);
const void *dpg_shm_pipe_peek(struct dpg_shm *s, size_t *avail);
void dpg_shm_pipe_consume(struct dpg_shm *s, size_t n);
/* This rank is inside a ring collective (on) or not; whether the rank that
 * writes our in-pipe is (a waiting one is no culprit of our timeout). */
void dpg_shm_set_busy(struct dpg_shm *s, bool on);
bool dpg_shm_pipe_from_busy(struct dpg_shm *s);
/* Round this rank's out-pipe (out) or in-pipe position up to a multiple of
 * a (a power of two <= 4096), for elements wider than 8 bytes: both ends do
 * it at the same point of the stream. */
void dpg_shm_pipe_align(struct dpg_shm *s, bool out, size_t a);
bool dpg_shm_pipe_writable(struct dpg_shm *s);
bool dpg_shm_pipe_readable(struct dpg_shm *s);
/* Sleep until the in-pipe has data (want_read) or the out-pipe has room
 * (want_write), or a failure / abort / the deadline.  max_us > 0 bounds the
 * sleep (for callers that also watch sockets): returns 0 on expiry. */
int dpg_shm_pipe_wait(struct dpg_shm *s, bool want_read, bool want_write,
		      const struct dpg_shm_wait *w, int64_t max_us,
		      struct dpg_err *err);

/* Failure word: publish f to every local rank (first one wins) and wake
 * them all; read it back (false if none).  A word that fails
 * dpg_fail_valid reads as DPG_FAIL_BADWORD. */
void dpg_shm_fail_publish(struct dpg_shm *s, const struct dpg_fail *f);
bool dpg_shm_fail_get(struct dpg_shm *s, struct dpg_fail *f);
/* Non-blocking health check: the failure word, then (at most every 20 ms)
 * whether the pipe peers we still need (writer: want_read, reader:
 * want_write) are alive.  Returns 0 or a negated status (err filled, the
 * failure published). */
int dpg_shm_check(struct dpg_shm *s, bool want_read, bool want_write,
		  struct dpg_err *err);

/* Wake this rank's own waits (for abort from another thread). */
void dpg_shm_kick(struct dpg_shm *s);

/* Whether local ranks outnumber the CPUs this process may run on. */
bool dpg_shm_oversubscribed(const struct dpg_shm *s);

#endif
