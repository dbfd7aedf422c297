/* cpu_backend.c - the CPU backend: rendezvous, the ring engine and the
 * failure protocol (see cpu_backend.h for the overview).
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
 *   all-gather step u: send block (p-u) (our own first), receive (p-u-1);
 *   allreduce = both (2(n-1) steps, blocks of count/n elements, any count);
 *   broadcast = a chain from the root, pipelined the same way.
 * Received data for a reduce step goes through a small cache-resident
 * staging buffer (TCP) or is combined straight out of the shared pipe; data
 * for an all-gather step is received in place.
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
#include "cpu_backend.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "net.h"
#include "reduce.h"
#include "shm.h"
#include "store.h"

#define CPU_WIRE_MAGIC "dpgcpu1"
#define CPU_HELLO_MAGIC 0x6470676cu	/* "dpgl" */
#define CPU_NOTICE_MAGIC 0x6470676eu	/* "dpgn" */
#define CPU_HOST_MAX 256

#define CPU_DEFAULT_TIMEOUT_S 300.0
#define CPU_DEFAULT_CHUNK (1u << 20)
#define CPU_STAGE_BYTES (256u << 10)
#define CPU_GRACE_MS 500
#define CPU_POLL_SLICE_MS 100
#define CPU_TCP_SPIN_NS 20000		/* busy retries before a blocking poll */
#define CPU_TCP_YIELD_NS 200000		/* the same with sched_yield, when the
					 * machine's ranks outnumber its CPUs */

enum { LINK_NONE = 0, LINK_TCP, LINK_SHM };
enum { CH_DATA = 0, CH_NOTICE = 1 };

/* What a rank publishes in the store. */
struct cpu_wire {
	char magic[8];
	uint32_t port;
	int32_t pid;
	uint64_t token;		/* peers must present it when they connect */
	uint64_t pidns;		/* inode of /proc/self/ns/pid */
	uint64_t cpus[16];	/* affinity mask (CPUs 0..1023) */
	char uts[64];		/* gethostname: the physical machine */
	char host[CPU_HOST_MAX];
	char node[CPU_HOST_MAX];
};

struct cpu_hello {
	uint32_t magic;
	uint32_t chan;
	int32_t from;
	uint32_t pad;
	uint64_t token;
};

struct cpu_notice {
	uint32_t magic;
	int32_t why;
	int32_t culprit;
	int32_t reporter;
};

struct cpu_link {
	int kind;
	int peer;		/* comm rank */
	int fd;			/* TCP data connection */
	int cfd;		/* TCP notice connection */
	/* partial notice read on the channel we read notices from */
	unsigned char nbuf[sizeof(struct cpu_notice)];
	size_t nlen;
	bool nclosed;		/* that channel hit EOF / an error */
};

struct cpu {
	struct dpg_comm *c;
	int n, rank, pos;
	int *ring;			/* position -> comm rank */
	char **hosts;			/* comm rank -> host, for messages */
	struct cpu_link next, prev;
	struct dpg_shm *shm;
	bool direct;			/* all ranks local: shm.c algorithms */
	int efd;			/* eventfd: abort kicks the poll */
	atomic_int aborted;
	const volatile int *uabort;
	double timeout_s;
	size_t chunk;
	bool tcp_spin;
	/* sticky failure */
	int fail_rc;
	bool prev_waiting;		/* prev said it times out on its own prev */
	char fail_msg[DPG_ERR_MSG_MAX];
	bool fail_sent;
	/* buffers */
	char *stage;			/* TCP receive staging for reduce steps */
	char *scratch;			/* reduce_scatter partials (grow-only) */
	size_t scratch_cap;
	int32_t *barbuf;		/* n int32 for the ring barrier */
};

/* ------------------------------------------------------------ helpers */

static int net_rc(int rc)
{
	return rc;
}

static const char *host_of(const struct cpu *p, int rank)
{
	return rank >= 0 && rank < p->n && p->hosts[rank] != NULL ? p->hosts[rank] : "?";
}

static bool is_aborted(const struct cpu *p)
{
	return atomic_load_explicit(&p->aborted, memory_order_relaxed) ||
	       (p->uabort != NULL && *p->uabort);
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* This process's affinity mask as 16 words. */
static void cpu_mask(uint64_t m[16])
{
	cpu_set_t set;
	int i;

	memset(m, 0, 16 * sizeof(*m));
	if (sched_getaffinity(0, sizeof(set), &set) != 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		for (i = 0; i < (n > 0 ? n : 1) && i < 1024; i++)
			m[i / 64] |= 1ull << (i % 64);
		return;
	}
	for (i = 0; i < 1024 && i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &set))
			m[i / 64] |= 1ull << (i % 64);
}

/* ------------------------------------------------------------ failures */

static void send_notice(int fd, const struct dpg_fail *f)
{
	struct cpu_notice nt = { .magic = CPU_NOTICE_MAGIC, .why = f->why,
				 .culprit = f->culprit, .reporter = f->reporter };

	if (fd >= 0)	/* best effort: a dead peer just doesn't get it */
		(void)!send(fd, &nt, sizeof(nt), MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* Record the (first) failure, tell every neighbour, return its status. */
static int fail_set(struct cpu *p, const struct dpg_fail *f, struct dpg_err *err)
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
		if (p->next.kind == LINK_TCP)
			send_notice(p->next.cfd, f);
		if (p->prev.kind == LINK_TCP)
			send_notice(p->prev.fd, f);
		dpg_shm_fail_publish(p->shm, f);
	}
	if (err != NULL)
		memcpy(err->msg, p->fail_msg, sizeof(err->msg));
	return p->fail_rc;
}

/* A failure whose message is already in err (shm.c, own timeout, abort). */
static int fail_from(struct cpu *p, int rc, const struct dpg_fail *f, struct dpg_err *err)
{
	if (p->fail_rc == 0) {
		p->fail_rc = rc;
		memcpy(p->fail_msg, err->msg, sizeof(p->fail_msg));
	}
	if (!p->fail_sent && f != NULL) {
		p->fail_sent = true;
		if (p->next.kind == LINK_TCP)
			send_notice(p->next.cfd, f);
		if (p->prev.kind == LINK_TCP)
			send_notice(p->prev.fd, f);
		dpg_shm_fail_publish(p->shm, f);
	}
	memcpy(err->msg, p->fail_msg, sizeof(err->msg));
	return p->fail_rc;
}

/* An error reported by shm.c: its failure word says who and why. */
static int fail_shm(struct cpu *p, int rc, struct dpg_err *err)
{
	struct dpg_fail f;

	if (dpg_shm_fail_get(p->shm, &f))
		return fail_from(p, rc, &f, err);
	return fail_from(p, rc, NULL, err);
}

static int fail_self(struct cpu *p, int why, int culprit, int rc, struct dpg_err *err)
{
	struct dpg_fail f = { .why = why, .culprit = culprit, .reporter = p->rank };

	return fail_from(p, rc, &f, err);
}

/* Read whatever is pending on a notice channel: 1 with *f filled for a
 * notice, else 0.  EOF or an error there only marks the channel closed: a
 * neighbour that finished the collective may leave at once, and is a
 * failure only if we still need its data or must still send to it (found
 * by the data path: EOF on receive, EPIPE on send). */
static int notice_read(struct cpu_link *l, int fd, struct dpg_fail *f)
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
static int notice_poll(struct cpu *p, struct dpg_fail *f)
{
	while (p->prev.kind == LINK_TCP && notice_read(&p->prev, p->prev.cfd, f) > 0) {
		if (f->why != DPG_FAIL_WAITING)
			return 1;
		if (f->reporter == p->prev.peer)
			p->prev_waiting = true;
	}
	while (p->next.kind == LINK_TCP && notice_read(&p->next, p->next.fd, f) > 0)
		if (f->why != DPG_FAIL_WAITING)
			return 1;
	if (p->shm != NULL && dpg_shm_fail_get(p->shm, f))
		return 1;
	return 0;
}

/* Sleep up to 20 ms or until a notice channel stirs (not those to `skip`,
 * a neighbour known to be gone; -1: none). */
static void notice_nap(struct cpu *p, int skip)
{
	struct pollfd pf[2];
	int np = 0;

	if (p->prev.kind == LINK_TCP && p->prev.peer != skip && !p->prev.nclosed) {
		pf[np].fd = p->prev.cfd;
		pf[np++].events = POLLIN;
	}
	if (p->next.kind == LINK_TCP && p->next.peer != skip && !p->next.nclosed) {
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
static int fail_closed(struct cpu *p, int peer, int64_t deadline, struct dpg_err *err)
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

enum { JOB_ALLREDUCE, JOB_RS, JOB_AG, JOB_BCAST };

struct job {
	int kind;
	const char *send;
	char *recv;
	size_t count;		/* allreduce: total; RS: recvcount; AG: sendcount */
	size_t es;
	dpg_dtype_t dt;
	dpg_op_t op;
	int T_out, T_in;
	int dep;		/* out step t needs in step t - dep */
	bool out0_free;		/* out step 0 needs nothing */
	size_t base, rem;	/* allreduce block split */
	char *rs_final;		/* RS: where the reduced block goes */
};

static int mod(int a, int n)
{
	a %= n;
	return a < 0 ? a + n : a;
}

static void ar_block(const struct job *j, int b, size_t *off, size_t *len)
{
	size_t ub = (size_t)b;

	*off = (ub * j->base + (ub < j->rem ? ub : j->rem)) * j->es;
	*len = (j->base + (ub < j->rem ? 1 : 0)) * j->es;
}

/* Where out step t reads from, and its length in bytes. */
static void out_step(const struct cpu *p, const struct job *j, int t, const char **src,
		     size_t *len)
{
	int n = p->n, pos = p->pos;
	size_t off;

	switch (j->kind) {
	case JOB_ALLREDUCE:
		if (t < n - 1) {
			ar_block(j, mod(pos - t - 1, n), &off, len);
			*src = (t == 0 ? j->send : j->recv) + off;
		} else {
			ar_block(j, mod(pos - (t - (n - 1)), n), &off, len);
			*src = j->recv + off;
		}
		return;
	case JOB_RS: {
		int b = p->ring[mod(pos - t - 1, n)];

		*len = j->count * j->es;
		*src = t == 0 ? j->send + (size_t)b * *len
			: p->scratch + (size_t)((t - 1) % 2) * *len;
		return;
	}
	case JOB_AG: {
		int b = p->ring[mod(pos - t, n)];

		*len = j->count * j->es;
		*src = j->recv + (size_t)b * *len;
		return;
	}
	default:
		*len = j->count * j->es;
		*src = j->recv;
		return;
	}
}

/* Where in step t goes: dst, and for reduce steps own (our input to combine
 * with) and whether it is the last combine (avg divides there). */
static void in_step(const struct cpu *p, const struct job *j, int t, char **dst,
		    const char **own, size_t *len, bool *final)
{
	int n = p->n, pos = p->pos;
	size_t off;

	*own = NULL;
	*final = false;
	switch (j->kind) {
	case JOB_ALLREDUCE:
		if (t < n - 1) {
			ar_block(j, mod(pos - t - 2, n), &off, len);
			*dst = j->recv + off;
			*own = j->send + off;
			*final = t == n - 2;
		} else {
			ar_block(j, mod(pos - (t - (n - 1)) - 1, n), &off, len);
			*dst = j->recv + off;
		}
		return;
	case JOB_RS: {
		int b = p->ring[mod(pos - t - 2, n)];

		*len = j->count * j->es;
		*own = j->send + (size_t)b * *len;
		*final = t == n - 2;
		*dst = *final ? j->rs_final : p->scratch + (size_t)(t % 2) * *len;
		return;
	}
	case JOB_AG: {
		int b = p->ring[mod(pos - t - 1, n)];

		*len = j->count * j->es;
		*dst = j->recv + (size_t)b * *len;
		return;
	}
	default:
		*len = j->count * j->es;
		*dst = j->recv;
		return;
	}
}

/* ------------------------------------------------------------ the engine */

struct eng {
	int ot, it;		/* current out / in step */
	size_t ooff, ioff;	/* bytes done in them */
	size_t staged;		/* TCP: received, not yet combined */
	/* cached current steps */
	const char *osrc;
	size_t olen;
	char *idst;
	const char *iown;
	size_t ilen;
	bool ifinal;
};

static void eng_load_out(const struct cpu *p, const struct job *j, struct eng *e)
{
	if (e->ot < j->T_out)
		out_step(p, j, e->ot, &e->osrc, &e->olen);
}

static void eng_load_in(const struct cpu *p, const struct job *j, struct eng *e)
{
	if (e->it < j->T_in)
		in_step(p, j, e->it, &e->idst, &e->iown, &e->ilen, &e->ifinal);
}

/* Bytes of the current out step that may be sent. */
static size_t out_limit(const struct job *j, const struct eng *e)
{
	int need;

	if (e->ot == 0 && j->out0_free)
		return e->olen;
	need = e->ot - j->dep;
	if (e->it > need)
		return e->olen;
	if (e->it == need)
		return e->ioff;
	return 0;
}

static void combine(const struct cpu *p, const struct job *j, char *dst, const char *own,
		    const void *in, size_t bytes, bool final)
{
	dpg_reduce2(dst, own, in, bytes / j->es, j->dt, j->op, final ? p->n : 0);
}

/* One attempt to move out-stream bytes: >0 progress, 0 none, <0 error. */
static int eng_send(struct cpu *p, const struct job *j, struct eng *e, int64_t deadline,
		    struct dpg_err *err)
{
	size_t lim = out_limit(j, e), len;

	if (lim <= e->ooff)
		return 0;
	len = lim - e->ooff;
	if (len > p->chunk)
		len = p->chunk;
	if (p->next.kind == LINK_SHM) {
		size_t w = dpg_shm_pipe_write(p->shm, e->osrc + e->ooff, len, j->es);

		e->ooff += w;
		return w > 0;
	} else {
		ssize_t w = send(p->next.fd, e->osrc + e->ooff, len, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (w > 0) {
			e->ooff += (size_t)w;
			return 1;
		}
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			return 0;
		if (w < 0 && (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN))
			return fail_closed(p, p->next.peer, deadline, err);
		dpg_errf(err, "send to peer rank %d (%s): %s", p->next.peer,
			 host_of(p, p->next.peer), strerror(errno));
		return fail_self(p, DPG_FAIL_CLOSED, p->next.peer, -DPG_ERR_SYSTEM, err);
	}
}

/* One attempt to take in-stream bytes: >0 progress, 0 none, <0 error. */
static int eng_recv(struct cpu *p, const struct job *j, struct eng *e, int64_t deadline,
		    struct dpg_err *err)
{
	size_t left = e->ilen - e->ioff;

	if (p->prev.kind == LINK_SHM) {
		size_t avail;
		const void *src = dpg_shm_pipe_peek(p->shm, &avail);

		if (avail > left)
			avail = left;
		if (e->iown != NULL)
			avail -= avail % j->es;
		if (avail == 0)
			return 0;
		if (e->iown != NULL)
			combine(p, j, e->idst + e->ioff, e->iown + e->ioff, src, avail, e->ifinal);
		else
			memcpy(e->idst + e->ioff, src, avail);
		dpg_shm_pipe_consume(p->shm, avail);
		e->ioff += avail;
		return 1;
	} else {
		ssize_t r;
		size_t want;

		if (left == e->staged)
			return 0;	/* cannot happen: whole elements are combined at once */
		if (e->iown != NULL) {
			want = left - e->staged;
			if (want > CPU_STAGE_BYTES - e->staged)
				want = CPU_STAGE_BYTES - e->staged;
			r = recv(p->prev.fd, p->stage + e->staged, want, MSG_DONTWAIT);
		} else {
			want = left < p->chunk ? left : p->chunk;
			r = recv(p->prev.fd, e->idst + e->ioff, want, MSG_DONTWAIT);
		}
		if (r > 0) {
			if (e->iown != NULL) {
				size_t whole;

				e->staged += (size_t)r;
				whole = e->staged - e->staged % j->es;
				if (whole > 0) {
					combine(p, j, e->idst + e->ioff, e->iown + e->ioff,
						p->stage, whole, e->ifinal);
					e->ioff += whole;
					e->staged -= whole;
					if (e->staged > 0)
						memmove(p->stage, p->stage + whole, e->staged);
				}
			} else {
				e->ioff += (size_t)r;
			}
			return 1;
		}
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			return 0;
		if (r == 0 || errno == ECONNRESET)
			return fail_closed(p, p->prev.peer, deadline, err);
		dpg_errf(err, "receive from peer rank %d (%s): %s", p->prev.peer,
			 host_of(p, p->prev.peer), strerror(errno));
		return fail_self(p, DPG_FAIL_CLOSED, p->prev.peer, -DPG_ERR_SYSTEM, err);
	}
}

static int timeout_fail(struct cpu *p, int waiting_for, struct dpg_err *err)
{
	dpg_errf(err, "timed out after %.3g s waiting for peer rank %d (%s)", p->timeout_s,
		 waiting_for, host_of(p, waiting_for));
	return fail_self(p, DPG_FAIL_TIMEOUT, waiting_for, -DPG_ERR_TIMEOUT, err);
}

static int abort_fail(struct cpu *p, struct dpg_err *err);

/* Our deadline passed while we wait for input from prev over TCP.  On a
 * ring every rank behind a stalled one waits for its own predecessor, so
 * "prev" is the culprit only if prev is not waiting itself: tell next that
 * we are waiting (a WAITING notice), then wait CPU_GRACE_MS for a verdict or
 * for prev's own WAITING notice; if prev waits too, wait longer for the
 * verdict that then comes down the ring from the rank right behind the
 * culprit.  Without one, blame prev as before. */
static int timeout_verdict(struct cpu *p, int waiting_for, struct dpg_err *err)
{
	struct dpg_fail w = { .why = DPG_FAIL_WAITING, .culprit = p->prev.peer,
			      .reporter = p->rank };
	int64_t t0 = dpg_now_ms();
	struct dpg_fail f;

	if (p->n < 3 || p->prev.kind != LINK_TCP || waiting_for != p->prev.peer)
		return timeout_fail(p, waiting_for, err);
	if (p->next.kind == LINK_TCP)
		send_notice(p->next.cfd, &w);
	for (;;) {
		if (notice_poll(p, &f) > 0)
			return fail_set(p, &f, err);
		if (is_aborted(p))
			return abort_fail(p, err);
		if (dpg_now_ms() - t0 >= (p->prev_waiting ? (int64_t)p->n * CPU_GRACE_MS :
					  CPU_GRACE_MS))
			break;
		notice_nap(p, -1);
	}
	return timeout_fail(p, waiting_for, err);
}

static int abort_fail(struct cpu *p, struct dpg_err *err)
{
	dpg_errf(err, "aborted");
	return fail_self(p, DPG_FAIL_ABORTED, p->rank, -DPG_ERR_ABORTED, err);
}

/* Check notices, abort, deadline, the local peers we need; 0 = go on. */
static int eng_health(struct cpu *p, int64_t deadline, bool want_in, bool want_out,
		      int waiting_for, struct dpg_err *err)
{
	struct dpg_fail f;
	int rc;

	if (is_aborted(p))
		return abort_fail(p, err);
	if (notice_poll(p, &f) > 0)
		return fail_set(p, &f, err);
	if (p->shm != NULL) {
		rc = dpg_shm_check(p->shm, want_in && p->prev.kind == LINK_SHM,
				   want_out && p->next.kind == LINK_SHM, err);
		if (rc != 0)
			return fail_shm(p, rc, err);
	}
	if (dpg_now_ms() >= deadline)
		return want_in ? timeout_verdict(p, waiting_for, err) :
				 timeout_fail(p, waiting_for, err);
	return 0;
}

/* Nothing moved: sleep until a link can move, a notice, abort, deadline. */
static int eng_wait(struct cpu *p, const struct job *j, struct eng *e, int64_t deadline,
		    int64_t *backoff_us, struct dpg_err *err)
{
	bool want_in = e->it < j->T_in;
	bool want_out = e->ot < j->T_out && out_limit(j, e) > e->ooff;
	bool tcp_in = want_in && p->prev.kind == LINK_TCP;
	bool tcp_out = want_out && p->next.kind == LINK_TCP;
	bool shm_in = want_in && p->prev.kind == LINK_SHM;
	bool shm_out = want_out && p->next.kind == LINK_SHM;
	int waiting_for = want_in ? p->prev.peer : p->next.peer;
	struct pollfd pf[5];
	int np = 0, rc, timeout_ms;

	rc = eng_health(p, deadline, want_in, want_out, waiting_for, err);
	if (rc != 0)
		return rc;
	if (!tcp_in && !tcp_out) {
		/* only shared memory to wait for (or nothing: a zero-length tail) */
		struct dpg_shm_wait w = { .deadline_ms = deadline, .abort = p->uabort,
					  .abort2 = (const volatile int *)&p->aborted,
					  .timeout_s = p->timeout_s };
		bool tcp_any = p->prev.kind == LINK_TCP || p->next.kind == LINK_TCP;

		if (p->shm == NULL) {	/* not reached: nothing to wait for */
			usleep(1000);
			return 0;
		}
		rc = dpg_shm_pipe_wait(p->shm, shm_in, shm_out, &w, tcp_any ? 2000 : 0, err);
		return rc != 0 ? fail_shm(p, rc, err) : 0;
	}
	if (!shm_in && !shm_out && *backoff_us == 0) {
		/* retry a little before blocking: a blocking wakeup costs tens of
		 * microseconds (yielding between retries when oversubscribed) */
		*backoff_us = 1;
		return 0;
	}
	if (tcp_in) {
		pf[np].fd = p->prev.fd;
		pf[np++].events = POLLIN;
	}
	if (p->next.kind == LINK_TCP && (tcp_out || !p->next.nclosed)) {
		pf[np].fd = p->next.fd;
		pf[np++].events = (short)((p->next.nclosed ? 0 : POLLIN) | (tcp_out ? POLLOUT : 0));
	}
	if (p->prev.kind == LINK_TCP && !p->prev.nclosed) {
		pf[np].fd = p->prev.cfd;
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

static int run_job(struct cpu *p, const struct job *j, struct dpg_err *err)
{
	struct eng e;
	int64_t deadline = dpg_now_ms() + (int64_t)(p->timeout_s * 1000.0);
	int64_t backoff = 0, spin_t0 = 0;
	unsigned iter = 0;
	int rc;

	memset(&e, 0, sizeof(e));
	p->prev_waiting = false;
	if (p->shm != NULL)
		dpg_shm_pipe_begin(p->shm);
	eng_load_out(p, j, &e);
	eng_load_in(p, j, &e);
	for (;;) {
		bool progress = false;

		/* retire finished steps (zero-length ones included) */
		while (e.ot < j->T_out && e.ooff == e.olen) {
			e.ot++;
			e.ooff = 0;
			eng_load_out(p, j, &e);
		}
		while (e.it < j->T_in && e.ioff == e.ilen) {
			e.it++;
			e.ioff = 0;
			eng_load_in(p, j, &e);
		}
		if (e.ot >= j->T_out && e.it >= j->T_in)
			return 0;
		if (e.ot < j->T_out) {
			rc = eng_send(p, j, &e, deadline, err);
			if (rc < 0)
				return rc;
			progress |= rc > 0;
		}
		if (e.it < j->T_in) {
			rc = eng_recv(p, j, &e, deadline, err);
			if (rc < 0)
				return rc;
			progress |= rc > 0;
		}
		if (progress) {
			backoff = 0;
			if ((++iter & 255) == 0 && is_aborted(p))
				return abort_fail(p, err);
			continue;
		}
		if (backoff == 1) {
			/* retrying the sockets before a blocking poll */
			if (spin_t0 == 0)
				spin_t0 = now_ns();
			if (now_ns() - spin_t0 < (p->tcp_spin ? CPU_TCP_SPIN_NS : CPU_TCP_YIELD_NS)) {
				if (!p->tcp_spin)
					sched_yield();
				continue;
			}
			spin_t0 = 0;
			backoff = 2;
		}
		rc = eng_wait(p, j, &e, deadline, &backoff, err);
		if (rc < 0)
			return rc;
	}
}

/* ------------------------------------------------------------ the ops */

static int check_args(struct cpu *p, const void *a, const void *b, size_t count,
		      dpg_dtype_t dt, dpg_op_t op, bool has_op, struct dpg_err *err)
{
	if (dpg_dtype_size(dt) == 0) {
		dpg_errf(err, "unknown dtype %d", (int)dt);
		return -DPG_ERR_INVALID;
	}
	if (has_op && (op < DPG_SUM || op > DPG_MAX)) {
		dpg_errf(err, "unknown op %d", (int)op);
		return -DPG_ERR_INVALID;
	}
	if (count > 0 && (a == NULL || b == NULL)) {
		dpg_errf(err, "NULL buffer");
		return -DPG_ERR_INVALID;
	}
	if (count > SIZE_MAX / 8 / (size_t)p->n) {
		dpg_errf(err, "count %zu too large", count);
		return -DPG_ERR_INVALID;
	}
	if (p->fail_rc != 0) {
		memcpy(err->msg, p->fail_msg, sizeof(err->msg));
		return p->fail_rc;
	}
	if (is_aborted(p))
		return abort_fail(p, err);
	return 0;
}

static void shm_wait_init(const struct cpu *p, struct dpg_shm_wait *w)
{
	w->deadline_ms = dpg_now_ms() + (int64_t)(p->timeout_s * 1000.0);
	w->abort = p->uabort;
	w->abort2 = (const volatile int *)&p->aborted;
	w->timeout_s = p->timeout_s;
}

static int cpu_allreduce(struct dpg_comm *c, const void *send, void *recv, size_t count,
			 dpg_dtype_t dt, dpg_op_t op, void *stream, struct dpg_err *err)
{
	struct cpu *p = c->impl;
	size_t es = dpg_dtype_size(dt);
	struct job j;
	int rc;

	(void)stream;
	rc = check_args(p, send, recv, count, dt, op, true, err);
	if (rc != 0 || count == 0)
		return rc;
	if (p->n == 1) {		/* avg over one rank is the identity */
		if (send != recv)
			memmove(recv, send, count * es);
		return 0;
	}
	if (p->direct) {
		struct dpg_shm_wait w;

		shm_wait_init(p, &w);
		rc = dpg_shm_allreduce(p->shm, send, recv, count, dt, op, &w, err);
		return rc != 0 ? fail_shm(p, rc, err) : 0;
	}
	memset(&j, 0, sizeof(j));
	j.kind = JOB_ALLREDUCE;
	j.send = send;
	j.recv = recv;
	j.count = count;
	j.es = es;
	j.dt = dt;
	j.op = op;
	j.T_out = j.T_in = 2 * (p->n - 1);
	j.dep = 1;
	j.out0_free = true;
	j.base = count / (size_t)p->n;
	j.rem = count % (size_t)p->n;
	return run_job(p, &j, err);
}

static int cpu_reduce_scatter(struct dpg_comm *c, const void *send, void *recv,
			      size_t recvcount, dpg_dtype_t dt, dpg_op_t op, void *stream,
			      struct dpg_err *err)
{
	struct cpu *p = c->impl;
	size_t es = dpg_dtype_size(dt);
	struct job j;
	bool alias;
	int rc;

	(void)stream;
	rc = check_args(p, send, recv, recvcount, dt, op, true, err);
	if (rc != 0 || recvcount == 0)
		return rc;
	if (p->n == 1) {
		if (send != recv)
			memmove(recv, send, recvcount * es);
		return 0;
	}
	if (p->direct) {
		struct dpg_shm_wait w;

		shm_wait_init(p, &w);
		rc = dpg_shm_reduce_scatter(p->shm, send, recv, recvcount, dt, op, &w, err);
		return rc != 0 ? fail_shm(p, rc, err) : 0;
	}
	{
		/* recv inside send but not at our own block (e.g. recv == send):
		 * the ring still sends from send while the result arrives, so
		 * the result goes to scratch and is copied at the end */
		const char *sb = send, *rb = recv;
		size_t blk = recvcount * es, total = blk * (size_t)p->n;
		size_t need;

		alias = rb + blk > sb && rb < sb + total && rb != sb + (size_t)p->rank * blk;
		need = ((p->n > 2 ? 2 : 0) + (alias ? 1 : 0)) * blk;
		if (p->scratch_cap < need) {
			char *nb = realloc(p->scratch, need);

			if (nb == NULL) {
				dpg_errf(err, "out of memory (%zu bytes of scratch)", need);
				return -DPG_ERR_NOMEM;
			}
			p->scratch = nb;
			p->scratch_cap = need;
		}
	}
	memset(&j, 0, sizeof(j));
	j.kind = JOB_RS;
	j.send = send;
	j.recv = recv;
	j.rs_final = alias ? p->scratch + (p->n > 2 ? 2 : 0) * recvcount * es : recv;
	j.count = recvcount;
	j.es = es;
	j.dt = dt;
	j.op = op;
	j.T_out = j.T_in = p->n - 1;
	j.dep = 1;
	j.out0_free = true;
	rc = run_job(p, &j, err);
	if (rc == 0 && alias)
		memcpy(recv, j.rs_final, recvcount * es);
	return rc;
}

static int cpu_all_gather(struct dpg_comm *c, const void *send, void *recv, size_t sendcount,
			  dpg_dtype_t dt, void *stream, struct dpg_err *err)
{
	struct cpu *p = c->impl;
	size_t es = dpg_dtype_size(dt), bytes = sendcount * es;
	char *mine = (char *)recv + (size_t)p->rank * bytes;
	struct job j;
	int rc;

	(void)stream;
	rc = check_args(p, send, recv, sendcount, dt, DPG_SUM, false, err);
	if (rc != 0 || sendcount == 0)
		return rc;
	if (p->direct) {
		struct dpg_shm_wait w;

		shm_wait_init(p, &w);
		rc = dpg_shm_all_gather(p->shm, send, recv, sendcount, dt, &w, err);
		return rc != 0 ? fail_shm(p, rc, err) : 0;
	}
	if ((const char *)send != mine)
		memmove(mine, send, bytes);
	if (p->n == 1)
		return 0;
	memset(&j, 0, sizeof(j));
	j.kind = JOB_AG;
	j.recv = recv;
	j.count = sendcount;
	j.es = es;
	j.dt = dt;
	j.T_out = j.T_in = p->n - 1;
	j.dep = 1;
	j.out0_free = true;
	return run_job(p, &j, err);
}

static int cpu_broadcast(struct dpg_comm *c, void *buf, size_t count, dpg_dtype_t dt,
			 int root, void *stream, struct dpg_err *err)
{
	struct cpu *p = c->impl;
	struct job j;
	int rc, rpos, d;

	(void)stream;
	rc = check_args(p, buf, buf, count, dt, DPG_SUM, false, err);
	if (rc != 0)
		return rc;
	if (root < 0 || root >= p->n) {
		dpg_errf(err, "broadcast root %d out of range (size %d)", root, p->n);
		return -DPG_ERR_INVALID;
	}
	if (count == 0 || p->n == 1)
		return 0;
	if (p->direct) {
		struct dpg_shm_wait w;

		shm_wait_init(p, &w);
		rc = dpg_shm_broadcast(p->shm, buf, count, dt, root, &w, err);
		return rc != 0 ? fail_shm(p, rc, err) : 0;
	}
	for (rpos = 0; p->ring[rpos] != root; rpos++)
		;
	d = mod(p->pos - rpos, p->n);	/* hops from the root */
	memset(&j, 0, sizeof(j));
	j.kind = JOB_BCAST;
	j.recv = buf;
	j.count = count;
	j.es = dpg_dtype_size(dt);
	j.dt = dt;
	j.T_out = d < p->n - 1 ? 1 : 0;
	j.T_in = d > 0 ? 1 : 0;
	j.dep = 0;
	j.out0_free = d == 0;
	return run_job(p, &j, err);
}

static int cpu_barrier(struct dpg_comm *c, struct dpg_err *err)
{
	struct cpu *p = c->impl;
	struct job j;
	int rc;

	rc = check_args(p, p, p, 0, DPG_I32, DPG_SUM, true, err);
	if (rc != 0 || p->n == 1)
		return rc;
	if (p->direct) {
		struct dpg_shm_wait w;

		shm_wait_init(p, &w);
		rc = dpg_shm_barrier(p->shm, &w, err);
		return rc != 0 ? fail_shm(p, rc, err) : 0;
	}
	/* an allreduce of one int per rank: every step carries data */
	memset(p->barbuf, 0, (size_t)p->n * sizeof(*p->barbuf));
	memset(&j, 0, sizeof(j));
	j.kind = JOB_ALLREDUCE;
	j.send = (const char *)p->barbuf;
	j.recv = (char *)p->barbuf;
	j.count = (size_t)p->n;
	j.es = sizeof(int32_t);
	j.dt = DPG_I32;
	j.op = DPG_SUM;
	j.T_out = j.T_in = 2 * (p->n - 1);
	j.dep = 1;
	j.out0_free = true;
	j.base = 1;
	j.rem = 0;
	return run_job(p, &j, err);
}

static void cpu_abort(struct dpg_comm *c)
{
	struct cpu *p = c->impl;
	uint64_t one = 1;

	if (p == NULL)
		return;
	atomic_store(&p->aborted, 1);
	if (p->efd >= 0)
		(void)!write(p->efd, &one, sizeof(one));
	dpg_shm_kick(p->shm);
}

static void close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

static void cpu_free(struct cpu *p)
{
	int r;

	if (p == NULL)
		return;
	close_fd(&p->next.fd);
	close_fd(&p->next.cfd);
	close_fd(&p->prev.fd);
	close_fd(&p->prev.cfd);
	close_fd(&p->efd);
	dpg_shm_close(p->shm);
	if (p->hosts != NULL)
		for (r = 0; r < p->n; r++)
			free(p->hosts[r]);
	free(p->hosts);
	free(p->ring);
	free(p->stage);
	free(p->scratch);
	free(p->barbuf);
	free(p);
}

static void cpu_destroy(struct dpg_comm *c)
{
	cpu_free(c->impl);
	c->impl = NULL;
}

static const struct dpg_comm_ops cpu_ops = {
	.name = "cpu",
	.allreduce = cpu_allreduce,
	.reduce_scatter = cpu_reduce_scatter,
	.all_gather = cpu_all_gather,
	.broadcast = cpu_broadcast,
	.barrier = cpu_barrier,
	.abort = cpu_abort,
	.destroy = cpu_destroy,
};

/* ------------------------------------------------------------ init */

static uint64_t pidns_inode(void)
{
	struct stat st;

	return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

static int set_sock(int fd)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
		return -1;
	return dpg_net_set_nonblock(fd, true);
}

/* Connect our two channels to the next rank. */
static int connect_next(struct cpu *p, const struct cpu_wire *w, int64_t deadline,
			struct dpg_err *err)
{
	int ch;

	for (ch = 0; ch < 2; ch++) {
		struct cpu_hello h = { .magic = CPU_HELLO_MAGIC, .chan = (uint32_t)ch,
				       .from = p->rank, .token = w->token };
		int fd = -1, rc;

		rc = dpg_net_connect(w->host, (uint16_t)w->port, deadline, p->uabort, &fd, err);
		if (rc == 0)
			rc = dpg_net_write_full(fd, &h, sizeof(h), deadline, p->uabort, err);
		if (rc != 0) {
			if (fd >= 0)
				close(fd);
			dpg_err_prefix(err, ch == 0 ? "connecting to the next rank"
				       : "connecting the notice channel");
			return net_rc(rc);
		}
		if (ch == CH_DATA)
			p->next.fd = fd;
		else
			p->next.cfd = fd;
	}
	return 0;
}

/* Accept the previous rank's two channels (strangers are dropped). */
static int accept_prev(struct cpu *p, int lfd, uint64_t token, int64_t deadline,
		       struct dpg_err *err)
{
	while (p->prev.fd < 0 || p->prev.cfd < 0) {
		struct pollfd pf = { .fd = lfd, .events = POLLIN };
		struct cpu_hello h;
		int64_t left = deadline - dpg_now_ms();
		int fd, rc;

		if (p->uabort != NULL && *p->uabort) {
			dpg_errf(err, "aborted");
			return -DPG_ERR_ABORTED;
		}
		if (left <= 0) {
			dpg_errf(err, "timed out waiting for peer rank %d (%s) to connect",
				 p->prev.peer, host_of(p, p->prev.peer));
			return -DPG_ERR_TIMEOUT;
		}
		if (poll(&pf, 1, left > 100 ? 100 : (int)left) <= 0)
			continue;
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		rc = dpg_net_read_full(fd, &h, sizeof(h),
				       dpg_now_ms() + 5000 < deadline ? dpg_now_ms() + 5000 : deadline,
				       p->uabort, NULL);
		if (rc != 0 || h.magic != CPU_HELLO_MAGIC || h.token != token ||
		    h.from != p->prev.peer || h.chan > CH_NOTICE ||
		    (h.chan == CH_DATA ? p->prev.fd : p->prev.cfd) >= 0) {
			close(fd);
			continue;
		}
		if (h.chan == CH_DATA)
			p->prev.fd = fd;
		else
			p->prev.cfd = fd;
	}
	return 0;
}

int dpg_cpu_comm_init(struct dpg_comm *c, const struct dpg_cpu_opts *o, struct dpg_err *err)
{
	struct cpu *p;
	struct cpu_wire mine, *all = NULL;
	int n = c->size, r, rc, lfd = -1, nlocal = 0, lrank = -1, i;
	int *lranks = NULL, *node_id = NULL;
	pid_t *lpids = NULL;
	uint16_t port = 0;
	int64_t deadline;
	char key[DPG_STORE_KEY_MAX];
	bool pid_ok = true, oversub = false;

	if (n < 1 || c->rank < 0 || c->rank >= n || o == NULL || o->host == NULL ||
	    o->node == NULL || (n > 1 && o->store == NULL)) {
		dpg_errf(err, "cpu backend: bad arguments (rank %d, size %d)", c->rank, n);
		return -DPG_ERR_INVALID;
	}
	if (strlen(o->host) >= CPU_HOST_MAX || strlen(o->node) >= CPU_HOST_MAX) {
		dpg_errf(err, "cpu backend: host or node name longer than %d bytes",
			 CPU_HOST_MAX - 1);
		return -DPG_ERR_INVALID;
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		goto nomem;
	p->c = c;
	p->n = n;
	p->rank = c->rank;
	p->next.fd = p->next.cfd = p->prev.fd = p->prev.cfd = -1;
	p->next.peer = p->prev.peer = -1;
	p->efd = -1;
	p->uabort = o->abort;
	p->timeout_s = o->timeout_s > 0 ? o->timeout_s : CPU_DEFAULT_TIMEOUT_S;
	p->chunk = o->tcp_chunk_bytes > 0 ? o->tcp_chunk_bytes : CPU_DEFAULT_CHUNK;
	p->hosts = calloc((size_t)n, sizeof(*p->hosts));
	p->ring = calloc((size_t)n, sizeof(*p->ring));
	p->barbuf = calloc((size_t)n, sizeof(*p->barbuf));
	if (p->hosts == NULL || p->ring == NULL || p->barbuf == NULL)
		goto nomem;
	p->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (p->efd < 0) {
		dpg_errf(err, "eventfd: %s", strerror(errno));
		rc = -DPG_ERR_SYSTEM;
		goto fail;
	}
	if (n == 1) {
		p->hosts[0] = strdup(o->host);
		if (p->hosts[0] == NULL)
			goto nomem;
		c->impl = p;
		c->ops = &cpu_ops;
		return 0;
	}
	deadline = dpg_now_ms() + (int64_t)(p->timeout_s * 1000.0);

	/* publish our address, read everyone's */
	rc = dpg_net_listen(NULL, 0, 16, &lfd, &port, err);
	if (rc != 0) {
		rc = -DPG_ERR_SYSTEM;
		goto fail;
	}
	memset(&mine, 0, sizeof(mine));
	memcpy(mine.magic, CPU_WIRE_MAGIC, sizeof(mine.magic));
	mine.port = port;
	mine.pid = (int32_t)getpid();
	if (getrandom(&mine.token, sizeof(mine.token), 0) != (ssize_t)sizeof(mine.token))
		mine.token = (uint64_t)now_ns() * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
	mine.pidns = pidns_inode();
	cpu_mask(mine.cpus);
	if (gethostname(mine.uts, sizeof(mine.uts)) != 0)
		mine.uts[0] = '\0';
	mine.uts[sizeof(mine.uts) - 1] = '\0';
	snprintf(mine.host, sizeof(mine.host), "%s", o->host);
	snprintf(mine.node, sizeof(mine.node), "%s", o->node);
	snprintf(key, sizeof(key), "%s/cpu/%d", c->name, c->rank);
	rc = dpg_store_set(o->store, key, &mine, sizeof(mine), deadline, err);
	if (rc != 0) {
		rc = net_rc(rc);
		dpg_err_prefix(err, "cpu backend: publishing the address");
		goto fail;
	}
	all = calloc((size_t)n, sizeof(*all));
	node_id = calloc((size_t)n, sizeof(*node_id));
	lranks = calloc((size_t)n, sizeof(*lranks));
	lpids = calloc((size_t)n, sizeof(*lpids));
	if (all == NULL || node_id == NULL || lranks == NULL || lpids == NULL)
		goto nomem;
	for (r = 0; r < n; r++) {
		void *val = NULL;
		size_t len = 0;

		if (r == c->rank) {
			all[r] = mine;
			continue;
		}
		snprintf(key, sizeof(key), "%s/cpu/%d", c->name, r);
		rc = dpg_store_get(o->store, key, &val, &len, deadline, err);
		if (rc != 0) {
			char pfx[64];

			rc = net_rc(rc);
			snprintf(pfx, sizeof(pfx), "cpu backend: address of rank %d", r);
			dpg_err_prefix(err, pfx);
			goto fail;
		}
		if (len != sizeof(all[r]) ||
		    memcmp(val, CPU_WIRE_MAGIC, sizeof(mine.magic)) != 0) {
			free(val);
			dpg_errf(err, "cpu backend: rank %d published a bad address record "
				 "(another libdpg version?)", r);
			rc = -DPG_ERR_PEER;
			goto fail;
		}
		memcpy(&all[r], val, sizeof(all[r]));
		free(val);
		all[r].host[CPU_HOST_MAX - 1] = '\0';
		all[r].uts[sizeof(all[r].uts) - 1] = '\0';
		all[r].node[CPU_HOST_MAX - 1] = '\0';
	}
	for (r = 0; r < n; r++) {
		p->hosts[r] = strdup(all[r].host);
		if (p->hosts[r] == NULL)
			goto nomem;
	}

	/* ranks on this physical machine vs the CPUs they may use: waits must
	 * not spin when they outnumber the CPUs (e.g. 4 ranks on 2 cores) */
	{
		uint64_t u[16] = { 0 };
		int k, here = 0, cpus = 0;

		for (r = 0; r < n; r++)
			if (strcmp(all[r].uts, mine.uts) == 0) {
				here++;
				for (k = 0; k < 16; k++)
					u[k] |= all[r].cpus[k];
			}
		for (k = 0; k < 16; k++)
			cpus += __builtin_popcountll(u[k]);
		oversub = here > cpus;
		p->tcp_spin = !oversub;
	}

	/* nodes in order of their lowest rank; the ring visits node by node */
	for (r = 0; r < n; r++) {
		node_id[r] = r;
		for (i = 0; i < r; i++)
			if (strcmp(all[i].node, all[r].node) == 0) {
				node_id[r] = node_id[i];
				break;
			}
	}
	{
		int k = 0, nd;

		for (nd = 0; nd < n; nd++)
			for (r = 0; r < n; r++)
				if (node_id[r] == nd)
					p->ring[k++] = r;
	}
	for (i = 0; i < n; i++)
		if (p->ring[i] == c->rank)
			p->pos = i;
	p->next.peer = p->ring[(p->pos + 1) % n];
	p->prev.peer = p->ring[(p->pos + n - 1) % n];
	for (r = 0; r < n; r++)
		if (node_id[r] == node_id[c->rank]) {
			if (r == c->rank)
				lrank = nlocal;
			lranks[nlocal] = r;
			lpids[nlocal] = all[r].pid;
			if (all[r].pidns != mine.pidns || mine.pidns == 0)
				pid_ok = false;
			nlocal++;
		}
	p->direct = nlocal == n && !(o->flags & DPG_CPU_RING);
	p->next.kind = node_id[p->next.peer] == node_id[c->rank] ? LINK_SHM : LINK_TCP;
	p->prev.kind = node_id[p->prev.peer] == node_id[c->rank] ? LINK_SHM : LINK_TCP;

	/* the node segment */
	if (nlocal >= 2) {
		struct dpg_shm_cfg sc;

		memset(&sc, 0, sizeof(sc));
		sc.mode = p->direct ? DPG_SHM_DIRECT : DPG_SHM_PIPES;
		sc.nlocal = nlocal;
		sc.lrank = lrank;
		sc.ranks = lranks;
		sc.pids = lpids;
		sc.pid_ok = pid_ok;
		sc.hosts = (const char *const *)p->hosts;
		sc.self = c->rank;
		sc.slot_bytes = o->shm_slot_bytes;
		sc.oversub = oversub ? 1 : 0;
		sc.pipe_to = sc.pipe_from = -1;
		for (i = 0; i < nlocal; i++) {
			if (!p->direct && lranks[i] == p->next.peer && p->next.kind == LINK_SHM)
				sc.pipe_to = i;
			if (!p->direct && lranks[i] == p->prev.peer && p->prev.kind == LINK_SHM)
				sc.pipe_from = i;
		}
		sc.store = o->store;
		snprintf(key, sizeof(key), "%s/cpu/shm/%d", c->name, lranks[0]);
		sc.key = key;
		sc.deadline_ms = deadline;
		sc.abort = o->abort;
		rc = dpg_shm_open(&p->shm, &sc, err);
		if (rc != 0) {
			dpg_err_prefix(err, "cpu backend");
			goto fail;
		}
	}
	if (p->direct) {
		p->next.kind = p->prev.kind = LINK_NONE;
	} else {
		/* the TCP hops: connect forward, then accept from behind (the
		 * listen backlog holds early connections, so no deadlock) */
		if (p->next.kind == LINK_TCP) {
			rc = connect_next(p, &all[p->next.peer], deadline, err);
			if (rc != 0)
				goto fail;
		}
		if (p->prev.kind == LINK_TCP) {
			rc = accept_prev(p, lfd, mine.token, deadline, err);
			if (rc != 0)
				goto fail;
		}
		if ((p->next.kind == LINK_TCP && (set_sock(p->next.fd) != 0 ||
						  set_sock(p->next.cfd) != 0)) ||
		    (p->prev.kind == LINK_TCP && (set_sock(p->prev.fd) != 0 ||
						  set_sock(p->prev.cfd) != 0))) {
			dpg_errf(err, "cpu backend: socket options: %s", strerror(errno));
			rc = -DPG_ERR_SYSTEM;
			goto fail;
		}
		if (p->prev.kind == LINK_TCP) {
			p->stage = malloc(CPU_STAGE_BYTES);
			if (p->stage == NULL)
				goto nomem;
		}
	}
	close(lfd);
	lfd = -1;
	/* everyone is connected and attached: the segment name can go */
	snprintf(key, sizeof(key), "%s/cpu/ready", c->name);
	rc = dpg_store_barrier(o->store, key, n, deadline, err);
	if (rc != 0) {
		rc = net_rc(rc);
		dpg_err_prefix(err, "cpu backend: waiting for the other ranks");
		goto fail;
	}
	dpg_shm_unlink(p->shm);
	free(all);
	free(node_id);
	free(lranks);
	free(lpids);
	c->impl = p;
	c->ops = &cpu_ops;
	return 0;
nomem:
	dpg_errf(err, "cpu backend: out of memory");
	rc = -DPG_ERR_NOMEM;
fail:
	if (lfd >= 0)
		close(lfd);
	free(all);
	free(node_id);
	free(lranks);
	free(lpids);
	cpu_free(p);
	return rc;
}
