/* SPDX-License-Identifier: BSD-3-Clause */
/* ring.c - the CPU backend's ring engine and failure-notice protocol (see
 * cpu_backend.h for the overview, ring.h for the interface).
 *
 * The ring engine.  Positions 0..n-1 on the ring; position p sends to p+1
 * and receives from p-1.  A collective is a sequence of T steps; in step t
 * every rank sends one block and receives one block, and the block it sends
 * in step t+1 is the one it received (and, while reducing, combined with
 * its own input) in step t.  The engine treats both directions as byte
 * streams: the out-stream of step t may run up to where the in-stream of
 * step t-1 has been processed, so a block is forwarded piece by piece while
 * the rest of it is still arriving.  One thread, non-blocking sockets (or
 * shared-memory pipes), no per-call allocation.
 *   reduce-scatter step t (0 <= t < n-1): send block (p-t-1), receive block
 *     (p-t-2) and combine it with our own input; after n-1 steps block p is
 *     fully reduced here (the last combine applies avg's division);
 *   all-gather step u: send block (p-u) (our own first), receive (p-u-1)
 *     (small ones two-way where every hop is TCP: see two-way jobs);
 *   allreduce = both (2(n-1) steps, blocks of count/n elements, any count);
 *   broadcast = a chain from the root, pipelined the same way (two chains,
 *     forward and backward, where every hop is TCP: see two-way jobs).
 * Received data for a reduce step goes through a small cache-resident
 * staging buffer (TCP) or is combined straight out of the shared pipe; data
 * for an all-gather step is received in place.
 *   Stamps: before its data every rank sends its call's stamp (stamp.h) to
 * next and checks prev's before it touches prev's data (step -1 of both
 * streams): a difference is a MISMATCH failure, flooded like the others.
 * A broadcast's root needs nothing from prev and its last rank sends
 * nothing to next, so neither exchanges the stamp of that link at once (a
 * small broadcast would cost a round trip): the last rank keeps its stamp
 * and sends it before its next call's, the root owes the check and makes it
 * at its next call that reads from prev (in step -2, before step -1's
 * stamp); after DPG_RING_DEFER broadcasts in a row both do it anyway, so
 * that a program whose ranks disagree on the root is still caught.
 *   Lockstep: a broadcast of p->lockstep bytes or more (j->lock; by
 * default 1 MiB where there are 2 ranks: cpu_backend.c) defers no stamp,
 * and on each forward TCP hop the reader sends its stamp back to its
 * sender on the hop's idle backward lane as it enters the call (the
 * token); the sender's stamp goes at once, its data once the token is in.
 * So each call's data goes into a drained connection in one run, after
 * the reader has taken all of the previous call, as in Open MPI's
 * rendezvous; streaming from one call into the next (the root starting
 * call k+1 while the reader still takes call k) took 12-24% longer at
 * 1-16 MiB (2 ranks on 2 vCPUs; cpu_backend.c has the figures).
 *   One rounding: where the partial sums need a wider type than the element
 * (f16/bf16 sum and avg: f32; integer avg: i64 / 128 bits; reduce.h), the
 * reduce-scatter steps 1..n-2 carry accumulators instead of elements (the
 * first step sends the input, the last combine rounds / divides once), so
 * every path gives one rounding of an f32 sum; those hops carry twice the
 * bytes (f16/bf16).  Pipe positions are aligned to each step's element size.
 *
 * Failure protocol.  Each TCP hop has two connections: the data connection
 * (data forward, notices backward) and a notice connection (notices
 * forward).  A rank that sees a failure (EOF/reset from a neighbour, a dead
 * local process, a deadline, an abort) sends a 16-byte notice both ways and
 * into the node segment; receivers adopt it and pass it on, so it floods the
 * ring.  A neighbour's EOF without a notice means that neighbour died (a
 * live rank always notices before it closes); we still wait a short grace
 * period for a notice that names the real culprit.
 */
#include "ring.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "net.h"
#include "reduce.h"

#define CPU_NOTICE_MAGIC 0x6470676eu	/* "dpgn" */
#define CPU_GRACE_MS 500
#define CPU_POLL_SLICE_MS 100
/* Busy retries before a blocking poll.  A receiver asleep in poll costs
 * its sender a wakeup per segment (on loopback the sender's CPU runs the
 * receive path too): 2-rank broadcasts over TCP at 1-4 MiB moved 4.9-5.8
 * GB/s with 20 us, 6.4-7.7 with 100 or 200 us (Open MPI 5.5-6.9).  1 ms
 * took 12-15% less time than 100 us at 1-4 MiB (interleaved A/Bs) but was
 * taken back: where the ranks outnumber the CPUs without knowing it (CI's
 * netns minicluster: 3 "nodes" of 2 ranks on 2 vCPUs) a waiting rank's
 * spin takes the CPU from the rank it waits for, and training jobs there
 * ran 3-5x longer (node loss 28 -> 145 s).  A rank 100 ms late costs each
 * waiting rank 0.17 ms of CPU (Open MPI spins through the 100 ms).
 *   The budget is per stall: a piece that moves starts it afresh (it ran
 * from the first stall on, so a long transfer slept in poll once per
 * 100 us: 2 ranks, 4 MiB broadcasts over TCP for a second, 4432 context
 * switches, 170 with the budget per stall; the time per call within the
 * noise).  Where
 * the ranks outnumber the CPUs it still runs across stalls: there every
 * spin is taken from a rank that could run (4 ranks on 2 vCPUs, 6
 * interleaved rounds, per stall: allreduce / reduce_scatter 4-16 MiB
 * 0.88-0.96x). */
#define CPU_TCP_SPIN_NS 100000
#define CPU_TCP_YIELD_NS 1000000	/* the same with sched_yield, when the
					 * machine's ranks outnumber its CPUs
					 * (200 us: 4 ranks on 2 vCPUs moved
					 * up to 0.7x of the bytes at 64 KiB-
					 * 1 MiB; a wakeup waits for a slice) */

struct cpu_notice {
	uint32_t magic;
	int32_t why;
	int32_t culprit;
	int32_t reporter;
};
_Static_assert(sizeof(struct cpu_notice) == DPG_RING_NOTICE_BYTES, "notice size");

/* ------------------------------------------------------------ failures */

static void send_notice(int fd, const struct dpg_fail *f)
{
	struct cpu_notice nt = { .magic = CPU_NOTICE_MAGIC, .why = f->why,
				 .culprit = f->culprit, .reporter = f->reporter };

	if (fd >= 0)	/* best effort: a dead peer just doesn't get it */
		(void)!send(fd, &nt, sizeof(nt), MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* Record the (first) failure, tell every neighbour, return its status. */
static int fail_set(struct dpg_cpu *p, const struct dpg_fail *f, struct dpg_err *err)
{
	struct dpg_err e;

	if (p->fail_rc == 0) {
		p->fail_rc = dpg_fail_format(f, p->rank, (const char *const *)p->hosts, &e);
		if (f->why == DPG_FAIL_ABORTED && f->culprit == p->rank)
			p->fail_rc = -DPG_ERR_ABORTED;
		memcpy(p->fail_msg, e.msg, sizeof(p->fail_msg));
	}
	if (!p->fail_sent) {
		p->fail_sent = true;
		if (p->next.kind == DPG_LINK_TCP)
			send_notice(p->next.cfd, f);
		if (p->prev.kind == DPG_LINK_TCP)
			send_notice(p->prev.fd, f);
		dpg_shm_fail_publish(p->shm, f);
	}
	if (err != NULL)
		memcpy(err->msg, p->fail_msg, sizeof(err->msg));
	return p->fail_rc;
}

/* A failure whose message is already in err (shm.c, own timeout, abort). */
static int fail_from(struct dpg_cpu *p, int rc, const struct dpg_fail *f, struct dpg_err *err)
{
	if (p->fail_rc == 0) {
		p->fail_rc = rc;
		memcpy(p->fail_msg, err->msg, sizeof(p->fail_msg));
	}
	if (!p->fail_sent && f != NULL) {
		p->fail_sent = true;
		if (p->next.kind == DPG_LINK_TCP)
			send_notice(p->next.cfd, f);
		if (p->prev.kind == DPG_LINK_TCP)
			send_notice(p->prev.fd, f);
		dpg_shm_fail_publish(p->shm, f);
	}
	memcpy(err->msg, p->fail_msg, sizeof(err->msg));
	return p->fail_rc;
}

/* An error reported by shm.c: its failure word says who and why. */
int dpg_ring_fail_shm(struct dpg_cpu *p, int rc, struct dpg_err *err)
{
	struct dpg_fail f;

	if (dpg_shm_fail_get(p->shm, &f))
		return fail_from(p, rc, &f, err);
	return fail_from(p, rc, NULL, err);
}

static int fail_self(struct dpg_cpu *p, int why, int culprit, int rc, struct dpg_err *err)
{
	struct dpg_fail f = { .why = why, .culprit = culprit, .reporter = p->rank };

	return fail_from(p, rc, &f, err);
}

/* Read whatever is pending on a notice channel: 1 with *f filled for a
 * notice, else 0.  EOF or an error there only marks the channel closed: a
 * neighbour that finished the collective may leave at once, and is a
 * failure only if we still need its data or must still send to it (found
 * by the data path: EOF on receive, EPIPE on send).  A notice whose reason
 * or ranks are out of range (for a communicator of n) blames its sender:
 * its indices are never used. */
static int notice_read(struct dpg_cpu_link *l, int fd, int n, struct dpg_fail *f)
{
	if (l->nclosed)
		return 0;
	for (;;) {
		ssize_t r = recv(fd, l->nbuf + l->nlen, sizeof(l->nbuf) - l->nlen, MSG_DONTWAIT);

		if (r > 0) {
			l->nlen += (size_t)r;
			if (l->nlen == sizeof(l->nbuf)) {
				struct cpu_notice nt;

				memcpy(&nt, l->nbuf, sizeof(nt));
				l->nlen = 0;
				if (nt.magic != CPU_NOTICE_MAGIC) {
					f->why = DPG_FAIL_PROTO;
					f->culprit = l->peer;
					f->reporter = -1;
					return 1;
				}
				f->why = nt.why;
				f->culprit = nt.culprit;
				f->reporter = nt.reporter;
				if (!dpg_fail_valid(f, n)) {
					f->why = DPG_FAIL_BADNOTICE;
					f->culprit = l->peer;
					f->reporter = -1;
				}
				return 1;
			}
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		l->nclosed = true;
		return 0;
	}
}

/* Look for a notice on every channel without blocking: 1 = *f filled.  A
 * WAITING notice from the predecessor is no failure: it is recorded in
 * p->prev_waiting (see timeout_verdict) and reading goes on. */
static int notice_poll(struct dpg_cpu *p, struct dpg_fail *f)
{
	while (p->prev.kind == DPG_LINK_TCP && notice_read(&p->prev, p->prev.cfd, p->n, f) > 0) {
		if (f->why != DPG_FAIL_WAITING)
			return 1;
		if (f->reporter == p->prev.peer)
			p->prev_waiting = true;
	}
	while (p->next.kind == DPG_LINK_TCP && notice_read(&p->next, p->next.fd, p->n, f) > 0)
		if (f->why != DPG_FAIL_WAITING)
			return 1;
	if (p->shm != NULL && dpg_shm_fail_get(p->shm, f))
		return 1;
	return 0;
}

/* Sleep up to 20 ms or until a notice channel stirs (not those to `skip`,
 * a neighbour known to be gone; -1: none). */
static void notice_nap(struct dpg_cpu *p, int skip)
{
	struct pollfd pf[2];
	int np = 0;

	if (p->prev.kind == DPG_LINK_TCP && p->prev.peer != skip && !p->prev.nclosed) {
		pf[np].fd = p->prev.cfd;
		pf[np++].events = POLLIN;
	}
	if (p->next.kind == DPG_LINK_TCP && p->next.peer != skip && !p->next.nclosed) {
		pf[np].fd = p->next.fd;
		pf[np++].events = POLLIN;
	}
	if (np > 0)
		(void)poll(pf, (nfds_t)np, 20);
	else
		usleep(20000);
}

/* Neighbour `peer` closed a connection: wait a little for a notice that
 * explains it (a live rank sends one before it closes), else blame peer. */
static int fail_closed(struct dpg_cpu *p, int peer, int64_t deadline, struct dpg_err *err)
{
	int64_t end = dpg_now_ms() + CPU_GRACE_MS;
	struct dpg_fail f;

	if (end > deadline)
		end = deadline;
	for (;;) {
		if (notice_poll(p, &f) > 0)
			return fail_set(p, &f, err);
		if (dpg_now_ms() >= end)
			break;
		notice_nap(p, peer);
	}
	f.why = DPG_FAIL_CLOSED;
	f.culprit = peer;
	f.reporter = p->rank;
	return fail_set(p, &f, err);
}

/* ------------------------------------------------------------ ring jobs */

static void ar_block(const struct dpg_ring_job *j, int b, size_t *off, size_t *len)
{
	size_t ub = (size_t)b;

	*off = (ub * j->base + (ub < j->rem ? ub : j->rem)) * j->es;
	*len = (j->base + (ub < j->rem ? 1 : 0)) * j->es;
}

/* Rank b's block of a reduce-scatter or all-gather job (ring.h): count elements
 * each, or where base is set (the halves of a split allreduce,
 * cpu_backend.c) ar_block's layout, whatever count the ranks divide. */
void dpg_ring_block(const struct dpg_ring_job *j, int b, size_t *off, size_t *len)
{
	if (j->base == 0) {
		*len = j->count * j->es;
		*off = (size_t)b * *len;
		return;
	}
	ar_block(j, b, off, len);
}

/* What an in step does with the bytes it receives. */
enum {
	IN_COPY,	/* store them (all-gather, broadcast, the stamp) */
	IN_RED,		/* combine with our input, in the element type */
	IN_ACC0,	/* elements + our input -> accumulators (first hop) */
	IN_ACCW,	/* accumulators + our input -> accumulators */
	IN_FIN,		/* accumulators + our input -> elements, rounded once */
};

/* One step: where its bytes come from / go, how many, their element size
 * on the wire, and (in steps) what to do with them. */
struct step {
	char *dst;
	const char *src;	/* out: the bytes; in: our input (own) */
	size_t len, wes;
	size_t own;		/* out: bytes at the front that wait for nothing
				 * (a neighbour exchange's own block) */
	int mode;
	bool final;
};

static bool wide(const struct dpg_ring_job *j)
{
	return j->aes > 0;
}

/* Accumulator slot of reduce step t (one per non-final step). */
static char *acc_slot(const struct dpg_cpu *p, const struct dpg_ring_job *j, int t)
{
	return p->acc + (size_t)t * j->ablk * (wide(j) ? j->aes : j->es);
}

/* Out step t of a reduce-scatter (allreduce's first n-1 steps, or RS) for
 * the block at byte offset off of len bytes of elements: step 0 sends our
 * input, later steps the partial of in step t-1. */
static void out_rs(const struct dpg_cpu *p, const struct dpg_ring_job *j, int t, size_t off,
		   struct step *s)
{
	size_t el = s->len / j->es;

	s->wes = j->es;
	if (t == 0) {
		s->src = j->send + off;
	} else if (wide(j)) {
		s->src = acc_slot(p, j, t - 1);
		s->len = el * j->aes;
		s->wes = j->aes;
	} else if (j->kind == DPG_JOB_ALLREDUCE) {
		s->src = j->recv + off;
	} else {
		s->src = acc_slot(p, j, t - 1);	/* RS: a slot per step */
	}
}

/* A neighbour exchange (j->ne): Chen et al.'s all-gather for an even n in
 * n/2 steps.  In step 0 the ring positions 2m and 2m+1 swap their blocks;
 * in each later step a rank passes the two blocks it took in the step
 * before to its other neighbour.  A rank sends n/2 messages, where the
 * two-way ring sends n - 1 (3 at 4 ranks: one message more per call and
 * a wakeup more where ranks share CPUs).  An even position's steps go to
 * next, prev, next, ... (forward, backward lane), an odd one's to prev,
 * next, ...: on each lane out step k sends its first block pair, then
 * what the lane's in step k - 1 (the lane our block starts on) or k (the
 * other) took.  Lane step k's blocks, out or in: the position of the
 * first, how many (pairs start at even positions: with the identity ring
 * of a two-way job they lie side by side), and whether the first is our
 * own (sent at once). */
static void ne_blocks(int q, bool bwd, bool out, int k, int *first, int *nb, bool *own)
{
	*nb = 2;
	*own = false;
	if (q % 2 == 0 && !bwd) {
		*first = out ? q - 2 * k : q - 2 - 2 * k;
		*nb = out && k == 0 ? 1 : 2;
	} else if (q % 2 == 0) {
		*first = !out && k == 0 ? q + 1 : q + 2 * k;
		*nb = !out && k == 0 ? 1 : 2;
		*own = out && k == 0;
	} else if (bwd) {
		*first = !out ? q + 1 + 2 * k : k == 0 ? q : q + 2 * k - 1;
		*nb = out && k == 0 ? 1 : 2;
	} else {
		*first = q - 1 - 2 * k;
		*nb = !out && k == 0 ? 1 : 2;
	}
}

/* Lane step k of a neighbour exchange into s (zeroed, wes set). */
static void ne_step(const struct dpg_cpu *p, const struct dpg_ring_job *j, bool bwd, bool out,
		    int k, struct step *s)
{
	size_t off, len, off2, len2;
	int first, nb, q;
	bool own;
	char *at;

	ne_blocks(p->pos, bwd, out, k, &first, &nb, &own);
	q = dpg_ring_mod(first, p->n);
	dpg_ring_block(j, p->ring[q], &off, &len);
	at = j->recv + off;
	s->len = len;
	if (nb == 2) {	/* a pair from an even position: side by side */
		dpg_ring_block(j, p->ring[q + 1], &off2, &len2);
		s->len += len2;
	}
	if (out) {
		s->src = at;
		s->own = own ? len : 0;
	} else {
		s->dst = at;
	}
}

/* Where out step t reads from, its length and wire element size. */
static void out_step(const struct dpg_cpu *p, const struct dpg_ring_job *j, int t,
		     struct step *s)
{
	int n = p->n, pos = p->pos;
	size_t off;

	memset(s, 0, sizeof(*s));
	s->wes = j->es;
	if (t < 0) {	/* this call's stamp after those left unsent */
		s->src = (const char *)p->unsent;
		s->len = (size_t)p->nunsent * sizeof(j->stamp);
		s->wes = 8;
		return;
	}
	switch (j->kind) {
	case DPG_JOB_ALLREDUCE:
		if (t < n - 1) {
			ar_block(j, dpg_ring_mod(pos - t - 1, n), &off, &s->len);
			out_rs(p, j, t, off, s);
		} else {
			ar_block(j, dpg_ring_mod(pos - (t - (n - 1)), n), &off, &s->len);
			s->src = j->recv + off;
		}
		return;
	case DPG_JOB_RS:
		dpg_ring_block(j, p->ring[dpg_ring_mod(pos - t - 1, n)], &off, &s->len);
		out_rs(p, j, t, off, s);
		return;
	case DPG_JOB_AG:
		if (j->ne) {
			ne_step(p, j, false, true, t, s);
			return;
		}
		dpg_ring_block(j, p->ring[dpg_ring_mod(pos - t, n)], &off, &s->len);
		s->src = j->recv + off;
		return;
	case DPG_JOB_XCHG:
		s->src = j->x[0].src;
		s->len = j->x[0].out_len;
		s->own = j->x[0].own;
		return;
	default:
		s->len = j->count * j->es;
		s->src = j->recv;
		return;
	}
}

/* In step t of a reduce-scatter into dst (len bytes of elements): plain
 * combines, or accumulators when wide. */
static void in_rs(const struct dpg_cpu *p, const struct dpg_ring_job *j, int t, char *dst,
		  struct step *s)
{
	size_t el = s->len / j->es;

	s->final = t == p->n - 2;
	s->mode = IN_RED;
	s->dst = dst;
	if (!wide(j))
		return;
	if (t > 0) {		/* accumulators on the wire */
		s->len = el * j->aes;
		s->wes = j->aes;
	}
	if (s->final) {
		s->mode = IN_FIN;	/* n >= 3 when wide: t > 0 here */
		return;
	}
	s->mode = t == 0 ? IN_ACC0 : IN_ACCW;
	s->dst = acc_slot(p, j, t);
}

/* Where in step t goes: dst, our input to combine with (src), the wire
 * element size and the mode. */
static void in_step(const struct dpg_cpu *p, const struct dpg_ring_job *j, int t,
		    struct step *s)
{
	int n = p->n, pos = p->pos;
	size_t off;

	memset(s, 0, sizeof(*s));
	s->wes = j->es;
	if (t == -2) {	/* the stamps of the broadcasts we owe a check */
		s->dst = (char *)p->rowed;
		s->len = (size_t)p->nowed * sizeof(p->rowed[0]);
		s->wes = 8;
		return;
	}
	if (t < 0) {	/* this call's */
		s->dst = (char *)&p->rstamp;
		s->len = sizeof(p->rstamp);
		s->wes = 8;
		return;
	}
	switch (j->kind) {
	case DPG_JOB_ALLREDUCE:
		if (t < n - 1) {
			ar_block(j, dpg_ring_mod(pos - t - 2, n), &off, &s->len);
			s->src = j->send + off;
			in_rs(p, j, t, j->recv + off, s);
		} else {
			ar_block(j, dpg_ring_mod(pos - (t - (n - 1)) - 1, n), &off, &s->len);
			s->dst = j->recv + off;
		}
		return;
	case DPG_JOB_RS:
		dpg_ring_block(j, p->ring[dpg_ring_mod(pos - t - 2, n)], &off, &s->len);
		s->src = j->send + off;
		/* a slot per step: in step t + 1 may run while out step t
		 * still sends the partial of in step t */
		in_rs(p, j, t, t == n - 2 ? j->rs_final : acc_slot(p, j, t), s);
		return;
	case DPG_JOB_AG:
		if (j->ne) {
			ne_step(p, j, false, false, t, s);
			return;
		}
		dpg_ring_block(j, p->ring[dpg_ring_mod(pos - t - 1, n)], &off, &s->len);
		s->dst = j->recv + off;
		return;
	case DPG_JOB_XCHG:
		s->dst = j->x[0].dst;
		s->len = j->x[0].in_len;
		return;
	default:
		s->len = j->count * j->es;
		s->dst = j->recv;
		return;
	}
}

/* ------------------------------------------------------------ the engine */

struct eng {
	int ot, it;		/* current out / in step (-1: the stamp, -2: the
				 * owed ones) */
	bool kept;		/* this call's stamp stays unsent (stamps_out) */
	size_t ooff, ioff;	/* bytes done in them */
	size_t staged;		/* TCP: received, not yet combined */
	struct step o, i;	/* the current steps */
	/* the backward lane (two-way jobs, j->B_out / B_in): out to prev on
	 * prev.cfd, in from next on next.cfd; copies only, TCP only */
	int bot, bit;
	size_t booff, bioff;
	struct step bo, bi;
};

static void eng_load_out(struct dpg_cpu *p, const struct dpg_ring_job *j, struct eng *e)
{
	if (e->ot >= j->T_out)
		return;
	out_step(p, j, e->ot, &e->o);
	if (p->next.kind == DPG_LINK_SHM)
		dpg_shm_pipe_align(p->shm, true, e->o.wes);
}

static void eng_load_in(struct dpg_cpu *p, const struct dpg_ring_job *j, struct eng *e)
{
	if (e->it >= j->T_in)
		return;
	in_step(p, j, e->it, &e->i);
	if (p->prev.kind == DPG_LINK_SHM)
		dpg_shm_pipe_align(p->shm, false, e->i.wes);
}

/* A lane's dependency (out step t needs in step t - dep) and whether its
 * out step 0 needs nothing: the job's, or a neighbour exchange's, where
 * the lane our own block starts on forwards what came in one step before
 * (dep 1, step 0 free) and the other forwards what came in the same step
 * (dep 0). */
static int lane_dep(const struct dpg_cpu *p, const struct dpg_ring_job *j, bool bwd)
{
	if (!j->ne)
		return j->dep;
	return (p->pos % 2 == 1) == bwd ? 1 : 0;
}

static bool lane_free0(const struct dpg_cpu *p, const struct dpg_ring_job *j, bool bwd)
{
	return j->ne ? lane_dep(p, j, bwd) == 1 : j->out0_free;
}

/* Bytes of a lane's current out step (ot, of o) that may be sent: the
 * stamp at once, step ot (past its own bytes) as far as in step ot - dep
 * (it, ioff bytes of i done) has been processed (in elements); a whole
 * job's (j->whole) nothing until that in step is done, then all of it, so
 * the message and the stamp before it go as one segment: its reader wakes
 * once, not for our own bytes and again for the rest. */
static size_t lane_limit(const struct dpg_cpu *p, const struct dpg_ring_job *j, bool bwd,
			 int ot, const struct step *o, int it, size_t ioff, const struct step *i)
{
	int need;

	if (ot < 0 || (ot == 0 && lane_free0(p, j, bwd)))
		return o->len;
	need = ot - lane_dep(p, j, bwd);
	if (need < 0 || it > need)
		return o->len;
	if (j->whole)
		return 0;
	if (it == need)
		return o->own + ioff / i->wes * o->wes;
	return o->own;
}

/* Bytes of out step 0 that may go (its lane limit), for a stamp to carry. */
static size_t step0_ready(const struct dpg_cpu *p, const struct dpg_ring_job *j,
			  const struct eng *e, struct step *s0)
{
	out_step(p, j, 0, s0);
	return lane_limit(p, j, false, 0, s0, e->it, e->ioff, &e->i);
}

/* Over TCP, a stamp whose out step 0 waits for data in (a broadcast's
 * forwarding hop) waits with it, so that both go in one segment: sent
 * alone, it woke next once more per call (4 ranks on 2 vCPUs, interleaved
 * A/Bs: 4 KiB broadcasts 13.3 us instead of 15.4, and 23.3 instead of 28.3
 * in a slower spell; 16 KiB 18.9 / 19.2, 35.5 / 38.5). */
static bool stamp_held(const struct dpg_cpu *p, const struct dpg_ring_job *j,
		       const struct eng *e)
{
	struct step s0;

	return e->ot == -1 && e->ooff == 0 && p->next.kind == DPG_LINK_TCP && j->T_out > 0 &&
	       !lane_free0(p, j, false) && step0_ready(p, j, e, &s0) == 0;
}

/* A broadcast in lockstep (j->tok_in) whose reader's stamp has not come
 * back yet: our stamp may go (a reader inside another collective must see
 * it to report the mismatch), the data waits (see the lockstep). */
static bool tok_wait(const struct dpg_ring_job *j, const struct eng *e)
{
	return j->tok_in && e->bit < 0;
}

static size_t out_limit(const struct dpg_cpu *p, const struct dpg_ring_job *j,
			const struct eng *e)
{
	if (tok_wait(j, e))
		return e->ot < 0 ? e->o.len : 0;
	if (stamp_held(p, j, e))
		return 0;
	return lane_limit(p, j, false, e->ot, &e->o, e->it, e->ioff, &e->i);
}

/* ------------------------------------------------------------ two-way jobs
 *
 * A broadcast with B_out / B_in > 0 also runs a backward lane: the same
 * steps towards prev, over the reverse direction of the notice connections
 * (prev.cfd out, next.cfd in; unused otherwise), so that the root's data
 * reaches the ranks behind it backward and travels at most half way round.
 * A two-way all-gather's backward step t sends our own block, then the one
 * its step t - 1 took (block p+t), and takes block p+1+t: with n/2 steps
 * forward and n-1-n/2 backward every block arrives, none twice.  With an
 * even n it runs as a neighbour exchange instead (j->ne, ne_blocks): the
 * same two lanes, n/2 messages in all.  An exchange job (DPG_JOB_XCHG,
 * the small reduce-scatter of 4 ranks) has the same two steps with regions
 * the caller lays out (j->x): each lane's out step starts with its own
 * bytes and forwards the front of what its in step takes.
 * The lane starts with the call's stamp where it carries data, checked
 * before the data is used; the forward hop a two-way broadcast leaves idle
 * keeps its stamp and owes its check like a one-way broadcast's last hop.
 * Only where every hop is TCP (cpu_backend.c). */

/* Where a two-way all-gather's backward step t goes (its offset; its
 * length in *len): out, our own block then the one backward in step t - 1
 * took; in, block pos + 1 + t. */
static size_t bwd_ag_off(const struct dpg_cpu *p, const struct dpg_ring_job *j, int b,
			 size_t *len)
{
	size_t off;

	dpg_ring_block(j, p->ring[dpg_ring_mod(p->pos + b, p->n)], &off, len);
	return off;
}

static void bwd_out_step(const struct dpg_cpu *p, const struct dpg_ring_job *j, int t,
			 struct step *s)
{
	memset(s, 0, sizeof(*s));
	s->wes = t < 0 ? 8 : j->es;
	s->src = t < 0 ? (const char *)&j->stamp : j->recv;
	s->len = t < 0 ? sizeof(j->stamp) : j->count * j->es;
	if (t >= 0 && j->kind == DPG_JOB_XCHG) {
		s->src = j->x[1].src;
		s->len = j->x[1].out_len;
		s->own = j->x[1].own;
	} else if (t >= 0 && j->ne) {
		ne_step(p, j, true, true, t, s);
	} else if (t >= 0 && j->kind == DPG_JOB_AG) {
		s->src += bwd_ag_off(p, j, t, &s->len);
	}
}

static void bwd_in_step(struct dpg_cpu *p, const struct dpg_ring_job *j, int t, struct step *s)
{
	memset(s, 0, sizeof(*s));
	s->wes = t < 0 ? 8 : j->es;
	s->dst = t < 0 ? (char *)&p->bstamp : j->recv;
	s->len = t < 0 ? sizeof(p->bstamp) : j->count * j->es;
	if (t >= 0 && j->kind == DPG_JOB_XCHG) {
		s->dst = j->x[1].dst;
		s->len = j->x[1].in_len;
	} else if (t >= 0 && j->ne) {
		ne_step(p, j, true, false, t, s);
	} else if (t >= 0 && j->kind == DPG_JOB_AG) {
		s->dst += bwd_ag_off(p, j, t + 1, &s->len);
	}
}

/* Bytes of backward out step 0 that may go, for the lane's stamp to carry. */
static size_t bwd_step0_ready(const struct dpg_cpu *p, const struct dpg_ring_job *j,
			      const struct eng *e, struct step *s0)
{
	bwd_out_step(p, j, 0, s0);
	return lane_limit(p, j, true, 0, s0, e->bit, e->bioff, &e->bi);
}

/* Bytes of the current backward out step that may go: the lane's stamp
 * waits for data to go with it, as the forward lane's does (stamp_held). */
static size_t bwd_limit(const struct dpg_cpu *p, const struct dpg_ring_job *j,
			const struct eng *e)
{
	struct step s0;

	if (e->bot == -1 && j->B_out == 0)
		return e->bo.len;	/* a lockstep token: at once */
	if (e->bot == -1 && e->booff == 0 && !lane_free0(p, j, true) &&
	    bwd_step0_ready(p, j, e, &s0) == 0)
		return 0;
	return lane_limit(p, j, true, e->bot, &e->bo, e->bit, e->bioff, &e->bi);
}

static int send_error_to(struct dpg_cpu *p, int peer, ssize_t w, int64_t deadline,
			 struct dpg_err *err);
static int recv_error_from(struct dpg_cpu *p, int peer, ssize_t r, int64_t deadline,
			   struct dpg_err *err);
static int stamp_check_from(struct dpg_cpu *p, int peer, const struct dpg_stamp *mine,
			    const struct dpg_stamp *theirs, struct dpg_err *err);

/* The backward lane's stamp and the start of its step 0 in one sendmsg
 * (one segment: prev wakes once for both; 4 and 5 ranks on 2 vCPUs, 5
 * interleaved rounds: 4-64 KiB broadcasts 9-22% faster, 256 KiB within
 * the noise). */
static int bwd_send_stamp(struct dpg_cpu *p, const struct dpg_ring_job *j, struct eng *e,
			  int64_t deadline, struct dpg_err *err)
{
	size_t srem = e->bo.len - e->booff, ready;
	struct iovec iov[2] = { { (void *)(e->bo.src + e->booff), srem }, { NULL, 0 } };
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = 1 };
	struct step s0;
	ssize_t w;

	if (j->B_out > 0 && (ready = bwd_step0_ready(p, j, e, &s0)) > 0) {
		iov[1].iov_base = (void *)s0.src;
		iov[1].iov_len = ready < p->chunk ? ready : p->chunk;
		m.msg_iovlen = 2;
	}
	w = sendmsg(p->prev.cfd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (w <= 0)
		return send_error_to(p, p->prev.peer, w, deadline, err);
	if ((size_t)w < srem) {
		e->booff += (size_t)w;
		return 1;
	}
	e->bot = 0;
	e->booff = (size_t)w - srem;
	if (m.msg_iovlen == 2)
		e->bo = s0;
	else
		bwd_out_step(p, j, 0, &e->bo);
	return 1;
}

/* One attempt on each backward stream: >0 progress, 0 none, <0 error. */
static int bwd_send(struct dpg_cpu *p, const struct dpg_ring_job *j, struct eng *e,
		    int64_t deadline, struct dpg_err *err)
{
	size_t lim = bwd_limit(p, j, e), len;
	ssize_t w;

	if (e->bot >= j->B_out || lim <= e->booff)
		return 0;
	if (e->bot == -1)
		return bwd_send_stamp(p, j, e, deadline, err);
	len = lim - e->booff < p->chunk ? lim - e->booff : p->chunk;
	w = send(p->prev.cfd, e->bo.src + e->booff, len, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (w <= 0)
		return send_error_to(p, p->prev.peer, w, deadline, err);
	e->booff += (size_t)w;
	return 1;
}

/* The backward lane's stamp and the start of its step 0 in one recvmsg,
 * as the forward lane takes them (tcp_recv_stamp): one syscall fewer a
 * call for every rank that takes data backward (strace of 4-rank 4 KiB
 * broadcasts: 3.1 receives a call that return data, against 4.1; the time
 * a call within the noise of 20 interleaved rounds); step 0's bytes are
 * used only once the stamp matches. */
static int bwd_recv_stamp(struct dpg_cpu *p, const struct dpg_ring_job *j, struct eng *e,
			  int64_t deadline, struct dpg_err *err)
{
	size_t srem = e->bi.len - e->bioff;
	struct iovec iov[2] = { { e->bi.dst + e->bioff, srem }, { NULL, 0 } };
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = 1 };
	struct step s0;
	ssize_t r;
	int rc;

	if (j->B_in > 0) {
		bwd_in_step(p, j, 0, &s0);
		iov[1].iov_base = s0.dst;
		iov[1].iov_len = s0.len < p->chunk ? s0.len : p->chunk;
		m.msg_iovlen = iov[1].iov_len > 0 ? 2 : 1;
	}
	r = recvmsg(p->next.cfd, &m, MSG_DONTWAIT);
	if (r <= 0)
		return recv_error_from(p, p->next.peer, r, deadline, err);
	if ((size_t)r < srem) {
		e->bioff += (size_t)r;
		return 1;
	}
	rc = stamp_check_from(p, p->next.peer, &j->stamp, &p->bstamp, err);
	if (rc != 0)
		return rc;
	e->bit = 0;
	e->bioff = (size_t)r - srem;
	if (j->B_in > 0)
		e->bi = s0;
	return 1;
}

static int bwd_recv(struct dpg_cpu *p, const struct dpg_ring_job *j, struct eng *e,
		    int64_t deadline, struct dpg_err *err)
{
	size_t left = e->bi.len - e->bioff;
	ssize_t r;

	if (e->bit >= j->B_in || left == 0)
		return 0;
	if (e->bit == -1)
		return bwd_recv_stamp(p, j, e, deadline, err);
	r = recv(p->next.cfd, e->bi.dst + e->bioff, left < p->chunk ? left : p->chunk,
		 MSG_DONTWAIT);
	if (r <= 0)
		return recv_error_from(p, p->next.peer, r, deadline, err);
	e->bioff += (size_t)r;
	return 1;
}

/* Process `bytes` (whole wire elements) of the current in step from src. */
static void combine(const struct dpg_cpu *p, const struct dpg_ring_job *j,
		    const struct eng *e, const void *src, size_t bytes)
{
	const struct step *s = &e->i;
	size_t k = e->ioff / s->wes, m = bytes / s->wes, es = j->es;
	const char *own = s->src + k * es;

	switch (s->mode) {
	case IN_RED:
		dpg_reduce2(s->dst + k * es, own, src, m, j->dt, j->op, s->final ? p->n : 0);
		break;
	case IN_ACC0:
	case IN_ACCW:
		dpg_reduce_acc(s->dst + k * j->aes, own, src, s->mode == IN_ACCW, m, j->dt);
		break;
	case IN_FIN:
		dpg_reduce_acc_final(s->dst + k * es, own, src, m, j->dt, j->op, p->n);
		break;
	default:
		memcpy(s->dst + e->ioff, src, bytes);
		break;
	}
}

static int stamp_check(struct dpg_cpu *p, const struct dpg_stamp *mine,
		       const struct dpg_stamp *theirs, struct dpg_err *err);

/* A send to peer (next, or prev on the backward lane) failed (w <= 0): 0
 * to retry, or the failure. */
static int send_error_to(struct dpg_cpu *p, int peer, ssize_t w, int64_t deadline,
			 struct dpg_err *err)
{
	if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return 0;
	if (w < 0 && (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN))
		return fail_closed(p, peer, deadline, err);
	dpg_errf(err, "send to peer rank %d (%s): %s", peer, dpg_cpu_host(p, peer),
		 strerror(errno));
	return fail_self(p, DPG_FAIL_CLOSED, peer, -DPG_ERR_SYSTEM, err);
}

static int send_error(struct dpg_cpu *p, ssize_t w, int64_t deadline, struct dpg_err *err)
{
	return send_error_to(p, p->next.peer, w, deadline, err);
}

/* A receive from peer (prev, or next on the backward lane) failed (r <=
 * 0): 0 to retry, or the failure. */
static int recv_error_from(struct dpg_cpu *p, int peer, ssize_t r, int64_t deadline,
			   struct dpg_err *err)
{
	if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return 0;
	if (r == 0 || errno == ECONNRESET)
		return fail_closed(p, peer, deadline, err);
	dpg_errf(err, "receive from peer rank %d (%s): %s", peer, dpg_cpu_host(p, peer),
		 strerror(errno));
	return fail_self(p, DPG_FAIL_CLOSED, peer, -DPG_ERR_SYSTEM, err);
}

static int recv_error(struct dpg_cpu *p, ssize_t r, int64_t deadline, struct dpg_err *err)
{
	return recv_error_from(p, p->prev.peer, r, deadline, err);
}

/* TCP: the stamp and, when it needs nothing, the start of out step 0 in one
 * sendmsg (a separate stamp segment costs a syscall and a wakeup). */
static int tcp_send_stamp(struct dpg_cpu *p, const struct dpg_ring_job *j, struct eng *e,
			  int64_t deadline, struct dpg_err *err)
{
	size_t srem = e->o.len - e->ooff;
	struct iovec iov[2] = { { (void *)(e->o.src + e->ooff), srem }, { NULL, 0 } };
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = 1 };
	struct step s0;
	ssize_t w;

	if (j->T_out > 0 && !tok_wait(j, e)) {
		size_t ready = step0_ready(p, j, e, &s0);

		iov[1].iov_base = (void *)s0.src;
		iov[1].iov_len = ready < p->chunk ? ready : p->chunk;
		m.msg_iovlen = iov[1].iov_len > 0 ? 2 : 1;
	}
	w = sendmsg(p->next.fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (w <= 0)
		return send_error(p, w, deadline, err);
	if ((size_t)w < srem) {
		e->ooff += (size_t)w;
		return 1;
	}
	p->nunsent = 0;		/* all sent */
	e->ot = 0;
	e->ooff = (size_t)w - srem;
	eng_load_out(p, j, e);
	return 1;
}

/* Received bytes of the current in step over TCP: in place, or staged and
 * combined in whole wire elements. */
static void tcp_took(struct dpg_cpu *p, const struct dpg_ring_job *j, struct eng *e, size_t r)
{
	size_t whole;

	if (e->i.mode == IN_COPY) {
		e->ioff += r;
		return;
	}
	e->staged += r;
	whole = e->staged - e->staged % e->i.wes;
	if (whole > 0) {
		combine(p, j, e, p->stage, whole);
		e->ioff += whole;
		e->staged -= whole;
		if (e->staged > 0)
			memmove(p->stage, p->stage + whole, e->staged);
	}
}

/* TCP: prev's stamp and the start of in step 0 in one recvmsg; step 0's
 * bytes are used only once the stamp matches. */
static int tcp_recv_stamp(struct dpg_cpu *p, const struct dpg_ring_job *j, struct eng *e,
			  int64_t deadline, struct dpg_err *err)
{
	size_t srem = e->i.len - e->ioff;
	struct iovec iov[2] = { { e->i.dst + e->ioff, srem }, { NULL, 0 } };
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = 1 };
	struct step s0;
	ssize_t r;
	int rc;

	if (j->T_in > 0) {
		in_step(p, j, 0, &s0);
		iov[1].iov_base = s0.mode == IN_COPY ? s0.dst : p->stage;
		iov[1].iov_len = s0.mode == IN_COPY ? (s0.len < p->chunk ? s0.len : p->chunk)
			: (s0.len < DPG_RING_STAGE_BYTES ? s0.len : DPG_RING_STAGE_BYTES);
		m.msg_iovlen = iov[1].iov_len > 0 ? 2 : 1;
	}
	r = recvmsg(p->prev.fd, &m, MSG_DONTWAIT);
	if (r <= 0)
		return recv_error(p, r, deadline, err);
	if ((size_t)r < srem) {
		e->ioff += (size_t)r;
		return 1;
	}
	e->ioff += srem;
	rc = stamp_check(p, &j->stamp, &p->rstamp, err);
	if (rc != 0)
		return rc;
	e->it = 0;
	e->ioff = 0;
	e->staged = 0;
	eng_load_in(p, j, e);
	if ((size_t)r > srem)
		tcp_took(p, j, e, (size_t)r - srem);
	return 1;
}

/* One attempt to move out-stream bytes: >0 progress, 0 none, <0 error. */
static int eng_send(struct dpg_cpu *p, const struct dpg_ring_job *j, struct eng *e,
		    int64_t deadline, struct dpg_err *err)
{
	size_t lim = out_limit(p, j, e), len;
	ssize_t w;

	if (lim <= e->ooff)
		return 0;
	len = lim - e->ooff;
	if (len > p->chunk)
		len = p->chunk;
	if (p->next.kind == DPG_LINK_SHM) {
		size_t n = dpg_shm_pipe_write(p->shm, e->o.src + e->ooff, len, e->o.wes);

		e->ooff += n;
		return n > 0;
	}
	if (e->ot < 0)
		return tcp_send_stamp(p, j, e, deadline, err);
	w = send(p->next.fd, e->o.src + e->ooff, len, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (w <= 0)
		return send_error(p, w, deadline, err);
	e->ooff += (size_t)w;
	return 1;
}

/* One attempt to take in-stream bytes: >0 progress, 0 none, <0 error. */
static int eng_recv(struct dpg_cpu *p, const struct dpg_ring_job *j, struct eng *e,
		    int64_t deadline, struct dpg_err *err)
{
	size_t left = e->i.len - e->ioff, want;
	bool red = e->i.mode != IN_COPY;
	ssize_t r;

	if (p->prev.kind == DPG_LINK_SHM) {
		size_t avail;
		const void *src = dpg_shm_pipe_peek(p->shm, &avail);

		if (avail > left)
			avail = left;
		if (red)
			avail -= avail % e->i.wes;
		if (avail == 0)
			return 0;
		combine(p, j, e, src, avail);
		dpg_shm_pipe_consume(p->shm, avail);
		e->ioff += avail;
		return 1;
	}
	if (e->it == -1)
		return tcp_recv_stamp(p, j, e, deadline, err);
	if (left == e->staged)
		return 0;	/* cannot happen: whole elements are combined at once */
	if (red) {
		want = left - e->staged;
		if (want > DPG_RING_STAGE_BYTES - e->staged)
			want = DPG_RING_STAGE_BYTES - e->staged;
		r = recv(p->prev.fd, p->stage + e->staged, want, MSG_DONTWAIT);
	} else {
		want = left < p->chunk ? left : p->chunk;
		r = recv(p->prev.fd, e->i.dst + e->ioff, want, MSG_DONTWAIT);
	}
	if (r <= 0)
		return recv_error(p, r, deadline, err);
	tcp_took(p, j, e, (size_t)r);
	return 1;
}

static int timeout_fail(struct dpg_cpu *p, int waiting_for, struct dpg_err *err)
{
	dpg_errf(err, "timed out after %.3g s waiting for peer rank %d (%s)", p->timeout_s,
		 waiting_for, dpg_cpu_host(p, waiting_for));
	return fail_self(p, DPG_FAIL_TIMEOUT, waiting_for, -DPG_ERR_TIMEOUT, err);
}

/* Wait for a verdict (a failure notice, the node's failure word) after
 * our deadline: CPU_GRACE_MS, or n * CPU_GRACE_MS when `patient` or once
 * prev says it waits too; without one, blame waiting_for. */
static int await_verdict(struct dpg_cpu *p, int waiting_for, bool patient,
			 struct dpg_err *err)
{
	int64_t t0 = dpg_now_ms();
	struct dpg_fail f;

	for (;;) {
		if (notice_poll(p, &f) > 0)
			return fail_set(p, &f, err);
		if (dpg_cpu_aborted(p))
			return dpg_ring_fail_abort(p, err);
		if (dpg_now_ms() - t0 >= (patient || p->prev_waiting ?
					  (int64_t)p->n * CPU_GRACE_MS : CPU_GRACE_MS))
			break;
		notice_nap(p, -1);
	}
	return timeout_fail(p, waiting_for, err);
}

/* Our deadline passed while we wait for input from prev.  On a ring every
 * rank behind a stalled one waits for its own predecessor, so "prev" is the
 * culprit only if prev is not waiting itself: tell next that we are waiting
 * (a WAITING notice), then wait CPU_GRACE_MS for a verdict or for prev's own
 * WAITING notice; if prev waits too (or is on this node, where it cannot say
 * so), wait n * CPU_GRACE_MS for the verdict that then comes down the ring
 * (notices, the node's failure word) from the rank right behind the culprit.
 * Without one, blame prev. */
static int timeout_verdict(struct dpg_cpu *p, int waiting_for, struct dpg_err *err)
{
	struct dpg_fail w = { .why = DPG_FAIL_WAITING, .culprit = p->prev.peer,
			      .reporter = p->rank };

	if (p->n < 3 || p->prev.kind == DPG_LINK_NONE || waiting_for != p->prev.peer)
		return timeout_fail(p, waiting_for, err);
	if (p->next.kind == DPG_LINK_TCP)
		send_notice(p->next.cfd, &w);
	/* a prev on this node says whether it is inside the collective (then
	 * it waits for its own prev: wait for the verdict as if it had sent a
	 * WAITING notice); one that is not is the late rank */
	if (p->prev.kind == DPG_LINK_SHM) {
		if (!dpg_shm_pipe_from_busy(p->shm))
			return timeout_fail(p, waiting_for, err);
		p->prev_waiting = true;
	}
	return await_verdict(p, waiting_for, false, err);
}

int dpg_ring_fail_abort(struct dpg_cpu *p, struct dpg_err *err)
{
	dpg_errf(err, "aborted");
	return fail_self(p, DPG_FAIL_ABORTED, p->rank, -DPG_ERR_ABORTED, err);
}

/* Check notices, abort, deadline, the local peers we need; 0 = go on. */
static int eng_health(struct dpg_cpu *p, int64_t deadline, bool want_in, bool want_out,
		      bool bwd_in, int waiting_for, struct dpg_err *err)
{
	struct dpg_fail f;
	int rc;

	if (dpg_cpu_aborted(p))
		return dpg_ring_fail_abort(p, err);
	if (notice_poll(p, &f) > 0)
		return fail_set(p, &f, err);
	if (p->shm != NULL) {
		rc = dpg_shm_check(p->shm, want_in && p->prev.kind == DPG_LINK_SHM,
				   want_out && p->next.kind == DPG_LINK_SHM, err);
		if (rc != 0)
			return dpg_ring_fail_shm(p, rc, err);
	}
	if (dpg_now_ms() >= deadline)
		/* waiting backward (a two-way job), next may wait itself: the
		 * rank right behind a late one on the forward ring judges it
		 * (timeout_verdict) wherever the late rank sends forward, so
		 * wait for that verdict (a 5-rank two-way all_gather whose
		 * rank 1 never called had rank 4 blame rank 0, which waited
		 * for rank 1); without one, blame next */
		return want_in ? timeout_verdict(p, waiting_for, err) :
		       bwd_in ? await_verdict(p, waiting_for, true, err) :
				timeout_fail(p, waiting_for, err);
	return 0;
}

/* Nothing moved: sleep until a link can move, a notice, abort, deadline. */
static int eng_wait(struct dpg_cpu *p, const struct dpg_ring_job *j, struct eng *e,
		    int64_t deadline, int64_t *backoff_us, struct dpg_err *err)
{
	bool want_in = e->it < j->T_in;
	bool want_out = e->ot < j->T_out && out_limit(p, j, e) > e->ooff;
	bool bwd_in = e->bit < j->B_in;		/* two-way: TCP both ways */
	bool bwd_out = e->bot < j->B_out && bwd_limit(p, j, e) > e->booff;
	bool tcp_in = (want_in && p->prev.kind == DPG_LINK_TCP) || bwd_in;
	bool tcp_out = (want_out && p->next.kind == DPG_LINK_TCP) || bwd_out;
	bool shm_in = want_in && p->prev.kind == DPG_LINK_SHM;
	bool shm_out = want_out && p->next.kind == DPG_LINK_SHM;
	int waiting_for = want_in ? p->prev.peer : bwd_in || want_out ? p->next.peer
			: p->prev.peer;
	struct pollfd pf[6];
	int np = 0, rc, timeout_ms;

	rc = eng_health(p, deadline, want_in, want_out, bwd_in, waiting_for, err);
	if (rc != 0)
		return rc;
	if (!tcp_in && !tcp_out) {
		/* only shared memory to wait for (or nothing: a zero-length tail);
		 * the deadline is ours (eng_health: the verdict protocol), the
		 * pipe wait only sleeps until then */
		int64_t now_ns = dpg_now_ns();	/* dpg_now_ms's clock */
		struct dpg_shm_wait w = { .deadline_ms = deadline + 3600000, .abort = p->uabort,
					  .abort2 = (const volatile int *)&p->aborted,
					  .timeout_s = p->timeout_s, .start_ns = now_ns };
		bool tcp_any = p->prev.kind == DPG_LINK_TCP || p->next.kind == DPG_LINK_TCP;
		int64_t left_us = (deadline - now_ns / 1000000) * 1000 + 1000;

		if (p->shm == NULL) {	/* not reached: nothing to wait for */
			usleep(1000);
			return 0;
		}
		if (left_us > 50000)
			left_us = 50000;
		rc = dpg_shm_pipe_wait(p->shm, shm_in, shm_out, &w, tcp_any ? 2000 : left_us,
				       err);
		return rc != 0 ? dpg_ring_fail_shm(p, rc, err) : 0;
	}
	if (!shm_in && !shm_out && *backoff_us == 0) {
		/* retry a little before blocking: a blocking wakeup costs tens of
		 * microseconds (yielding between retries when oversubscribed) */
		*backoff_us = 1;
		return 0;
	}
	if (want_in && p->prev.kind == DPG_LINK_TCP) {
		pf[np].fd = p->prev.fd;
		pf[np++].events = POLLIN;
	}
	if (p->next.kind == DPG_LINK_TCP && (want_out || !p->next.nclosed)) {
		pf[np].fd = p->next.fd;
		pf[np++].events = (short)((p->next.nclosed ? 0 : POLLIN) | (want_out ? POLLOUT : 0));
	}
	if (p->prev.kind == DPG_LINK_TCP && (!p->prev.nclosed || bwd_out)) {
		pf[np].fd = p->prev.cfd;
		pf[np++].events = (short)((p->prev.nclosed ? 0 : POLLIN) | (bwd_out ? POLLOUT : 0));
	}
	if (bwd_in) {
		pf[np].fd = p->next.cfd;
		pf[np++].events = POLLIN;
	}
	pf[np].fd = p->efd;
	pf[np++].events = POLLIN;
	if (shm_in || shm_out) {
		/* mixed: both a socket and a pipe; poll briefly, back off */
		struct timespec ts;
		int64_t us = *backoff_us < 20 ? 20 : *backoff_us;

		ts.tv_sec = 0;
		ts.tv_nsec = us * 1000;
		ppoll(pf, (nfds_t)np, &ts, NULL);
		*backoff_us = us * 2 > 2000 ? 2000 : us * 2;
		return 0;
	}
	timeout_ms = (int)(deadline - dpg_now_ms());
	if (timeout_ms > CPU_POLL_SLICE_MS)
		timeout_ms = CPU_POLL_SLICE_MS;
	if (timeout_ms < 0)
		timeout_ms = 0;
	poll(pf, (nfds_t)np, timeout_ms);
	return 0;
}

/* A stamp from peer (prev, or next on the backward lane) is in (theirs):
 * the same call as ours (mine), or a mismatch that every rank hears of (a
 * MISMATCH notice naming the peer and us). */
static int stamp_check_from(struct dpg_cpu *p, int peer, const struct dpg_stamp *mine,
			    const struct dpg_stamp *theirs, struct dpg_err *err)
{
	struct dpg_fail f = { .why = DPG_FAIL_MISMATCH, .culprit = peer,
			      .reporter = p->rank };
	int rc;

	if (dpg_stamp_equal(mine, theirs))
		return 0;
	rc = dpg_stamp_mismatch(mine, p->rank, theirs, peer,
				(const char *const *)p->hosts, err);
	if (rc != -DPG_ERR_INVALID)
		f.why = DPG_FAIL_PROTO;
	return fail_from(p, rc, &f, err);
}

static int stamp_check(struct dpg_cpu *p, const struct dpg_stamp *mine,
		       const struct dpg_stamp *theirs, struct dpg_err *err)
{
	return stamp_check_from(p, p->prev.peer, mine, theirs, err);
}

/* One non-blocking attempt to read more of the stamp from prev: bytes read,
 * 0 for none yet, -1 when the link is gone. */
static ssize_t stamp_more(struct dpg_cpu *p, struct eng *e)
{
	size_t left = e->i.len - e->ioff;

	if (p->prev.kind == DPG_LINK_TCP) {
		ssize_t r = recv(p->prev.fd, e->i.dst + e->ioff, left, MSG_DONTWAIT);

		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			return 0;
		return r > 0 ? r : -1;
	} else {
		size_t avail;
		const void *src = dpg_shm_pipe_peek(p->shm, &avail);

		if (avail > left)
			avail = left;
		memcpy(e->i.dst + e->ioff, src, avail);
		dpg_shm_pipe_consume(p->shm, avail);
		return (ssize_t)avail;
	}
}

/* We failed on a neighbour's mismatch notice before prev's stamp was in
 * (the notice overtook it): read the stamp for a moment, and if it differs
 * from ours, make the failure name both sides here too. */
static void stamp_salvage(struct dpg_cpu *p, const struct dpg_ring_job *j, struct eng *e,
			  struct dpg_err *err)
{
	int64_t end = dpg_now_ms() + CPU_GRACE_MS;
	struct dpg_err e2;
	int k;

	while (e->ioff < e->i.len && dpg_now_ms() < end) {
		ssize_t r = stamp_more(p, e);

		if (r < 0)
			return;
		if (r == 0)
			usleep(1000);
		e->ioff += (size_t)r;
	}
	if (e->ioff < e->i.len)
		return;
	for (k = 0; k < (e->it == -2 ? p->nowed : 1); k++) {
		const struct dpg_stamp *mine = e->it == -2 ? &p->owed[k] : &j->stamp;
		const struct dpg_stamp *theirs = e->it == -2 ? &p->rowed[k] : &p->rstamp;

		if (dpg_stamp_equal(mine, theirs))
			continue;
		if (dpg_stamp_mismatch(mine, p->rank, theirs, p->prev.peer,
				       (const char *const *)p->hosts, &e2) != -DPG_ERR_INVALID)
			return;
		memcpy(p->fail_msg, e2.msg, sizeof(p->fail_msg));
		memcpy(err->msg, e2.msg, sizeof(err->msg));
		return;
	}
}

static int ring_run(struct dpg_cpu *p, const struct dpg_ring_job *j, struct eng *e,
		    struct dpg_err *err);

/* A broadcast's rank that takes nothing from prev (the root; on a
 * two-way broadcast also the ranks reached backward) / sends nothing to
 * next (the last rank; two-way: the last forward and the backward ones). */
static bool fwd_idle_in(const struct dpg_ring_job *j)
{
	return j->kind == DPG_JOB_BCAST && j->T_in == 0;
}

static bool fwd_idle_out(const struct dpg_ring_job *j)
{
	return j->kind == DPG_JOB_BCAST && j->T_out == 0;
}

/* This call's first out step: our stamp, after those left unsent (-1), or
 * for a broadcast's last rank, unless DPG_RING_DEFER are waiting or it is
 * in lockstep, none (the stamp waits in p->unsent for the next call). */
static int stamps_out(struct dpg_cpu *p, const struct dpg_ring_job *j)
{
	p->unsent[p->nunsent++] = j->stamp;
	return fwd_idle_out(j) && !j->lock && p->nunsent < DPG_RING_DEFER ? 0 : -1;
}

/* A mismatch while our stamps wait unsent: send them now, best effort,
 * so that next, which waits for them, can name both sides too (its
 * stamp_salvage). */
static void stamps_flush(struct dpg_cpu *p)
{
	size_t len = (size_t)p->nunsent * sizeof(p->unsent[0]);

	if (p->next.kind == DPG_LINK_TCP)
		(void)!send(p->next.fd, p->unsent, len, MSG_DONTWAIT | MSG_NOSIGNAL);
	else if (p->next.kind == DPG_LINK_SHM)
		(void)dpg_shm_pipe_write(p->shm, p->unsent, len, 8);
	p->nunsent = 0;
}

/* The in step after the owed stamps: this call's stamp (-1), or for a
 * broadcast's root not in lockstep nothing (its check is owed: see
 * dpg_ring_run). */
static int after_owed(const struct dpg_ring_job *j)
{
	return fwd_idle_in(j) && !j->lock ? 0 : -1;
}

/* This call's first in step: the owed stamps (-2) when there are any and
 * this call reads from prev (a lockstep broadcast's root does), or when
 * DPG_RING_DEFER are owed. */
static int stamps_in(const struct dpg_cpu *p, const struct dpg_ring_job *j)
{
	if (p->nowed > 0 && (!fwd_idle_in(j) || j->lock || p->nowed == DPG_RING_DEFER))
		return -2;
	return after_owed(j);
}

/* The owed stamps are in: every one equal to ours, or the failure. */
static int owed_check(struct dpg_cpu *p, struct dpg_err *err)
{
	int k, rc;

	for (k = 0; k < p->nowed; k++)
		if ((rc = stamp_check(p, &p->owed[k], &p->rowed[k], err)) != 0)
			return rc;
	p->nowed = 0;
	return 0;
}

int dpg_ring_run(struct dpg_cpu *p, const struct dpg_ring_job *j, struct dpg_err *err)
{
	struct eng e;
	int rc;

	dpg_shm_set_busy(p->shm, true);
	rc = ring_run(p, j, &e, err);
	if (rc == -DPG_ERR_INVALID && e.kept)
		stamps_flush(p);
	if (rc == -DPG_ERR_INVALID && e.it < 0 && e.ioff < e.i.len)
		stamp_salvage(p, j, &e, err);
	if (rc == 0 && fwd_idle_in(j) && !j->lock)
		p->owed[p->nowed++] = j->stamp;	/* < DPG_RING_DEFER: stamps_in */
	dpg_shm_set_busy(p->shm, false);
	return rc;
}

static int ring_run(struct dpg_cpu *p, const struct dpg_ring_job *j, struct eng *ep,
		    struct dpg_err *err)
{
	int64_t deadline = dpg_now_ms() + (int64_t)(p->timeout_s * 1000.0);
	int64_t backoff = 0, spin_t0 = 0;
	unsigned iter = 0;
	int rc;

	memset(ep, 0, sizeof(*ep));
	ep->ot = stamps_out(p, j);	/* the stamps first */
	ep->kept = ep->ot == 0;
	ep->it = stamps_in(p, j);
	ep->bot = j->B_out > 0 || j->tok_out ? -1 : 0;
	ep->bit = j->B_in > 0 || j->tok_in ? -1 : 0;
	if (ep->bot < j->B_out)
		bwd_out_step(p, j, ep->bot, &ep->bo);
	if (ep->bit < j->B_in)
		bwd_in_step(p, j, ep->bit, &ep->bi);
	p->prev_waiting = false;
	if (p->shm != NULL)
		dpg_shm_pipe_begin(p->shm);
	eng_load_out(p, j, ep);
	eng_load_in(p, j, ep);
	for (;;) {
		bool progress = false;

		/* retire finished steps (zero-length ones included) */
		while (ep->ot < j->T_out && ep->ooff == ep->o.len) {
			if (ep->ot == -1)
				p->nunsent = 0;	/* all sent */
			ep->ot++;
			ep->ooff = 0;
			eng_load_out(p, j, ep);
		}
		while (ep->it < j->T_in && ep->ioff == ep->i.len) {
			rc = ep->it == -2 ? owed_check(p, err)
			   : ep->it == -1 ? stamp_check(p, &j->stamp, &p->rstamp, err) : 0;
			if (rc != 0)
				return rc;
			ep->it = ep->it == -2 ? after_owed(j) : ep->it + 1;
			ep->ioff = 0;
			eng_load_in(p, j, ep);
		}
		while (ep->bot < j->B_out && ep->booff == ep->bo.len) {
			ep->booff = 0;
			if (++ep->bot < j->B_out)
				bwd_out_step(p, j, ep->bot, &ep->bo);
		}
		/* (the backward stamp is checked as it comes in: bwd_recv_stamp) */
		while (ep->bit < j->B_in && ep->bioff == ep->bi.len) {
			ep->bioff = 0;
			if (++ep->bit < j->B_in)
				bwd_in_step(p, j, ep->bit, &ep->bi);
		}
		if (ep->ot >= j->T_out && ep->it >= j->T_in && ep->bot >= j->B_out &&
		    ep->bit >= j->B_in)
			return 0;
		if (ep->ot < j->T_out) {
			rc = eng_send(p, j, ep, deadline, err);
			if (rc < 0)
				return rc;
			progress |= rc > 0;
		}
		if (ep->it < j->T_in) {
			rc = eng_recv(p, j, ep, deadline, err);
			if (rc < 0)
				return rc;
			progress |= rc > 0;
		}
		if (ep->bot < j->B_out || ep->bit < j->B_in) {
			rc = bwd_send(p, j, ep, deadline, err);
			if (rc >= 0) {
				progress |= rc > 0;
				rc = bwd_recv(p, j, ep, deadline, err);
			}
			if (rc < 0)
				return rc;
			progress |= rc > 0;
		}
		if (progress) {
			backoff = 0;
			if (p->tcp_spin)
				spin_t0 = 0;	/* see CPU_TCP_SPIN_NS */
			if ((++iter & 255) == 0 && dpg_cpu_aborted(p))
				return dpg_ring_fail_abort(p, err);
			continue;
		}
		if (backoff == 1) {
			/* retrying the sockets before a blocking poll */
			if (spin_t0 == 0)
				spin_t0 = dpg_now_ns();
			if (dpg_now_ns() - spin_t0 <
			    (p->tcp_spin ? CPU_TCP_SPIN_NS : CPU_TCP_YIELD_NS)) {
				if (!p->tcp_spin)
					sched_yield();
				continue;
			}
			spin_t0 = 0;
			backoff = 2;
		}
		rc = eng_wait(p, j, ep, deadline, &backoff, err);
		if (rc < 0)
			return rc;
	}
}

