/* SPDX-License-Identifier: BSD-3-Clause */
/* shm.c - the node segment's failure word, futex bells and waits, and its
 * pipes mode (see shm.h for the protocol, shm_impl.h for the layout). */
#include "shm_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "net.h"
#include "reduce.h"
#include "store.h"

/* ------------------------------------------------------------ failures */

bool dpg_fail_valid(const struct dpg_fail *f, int nranks)
{
	if (f->why < DPG_FAIL_EXITED || f->why > DPG_FAIL_BADNOTICE)
		return false;
	if (f->culprit < -1 || f->culprit >= nranks || f->reporter < -1 ||
	    f->reporter >= nranks)
		return false;
	return f->why != DPG_FAIL_BADNOTICE || f->culprit >= 0;
}

int dpg_fail_format(const struct dpg_fail *f, int self, const char *const *hosts,
		    struct dpg_err *err)
{
	const char *h = f->culprit >= 0 && hosts != NULL ? hosts[f->culprit] : "?";
	char by[64] = "";
	int code = -DPG_ERR_PEER;

	if (f->reporter >= 0 && f->reporter != self && f->reporter != f->culprit)
		snprintf(by, sizeof(by), " (reported by rank %d)", f->reporter);
	switch (f->why) {
	case DPG_FAIL_BADWORD:
		dpg_errf(err, "protocol error: the node's shared segment holds an invalid "
			 "failure word (corrupt, or written by another process)%s", by);
		break;
	case DPG_FAIL_BADNOTICE:
		dpg_errf(err, "protocol error: peer rank %d (%s) sent an invalid failure "
			 "notice%s", f->culprit, h, by);
		break;
	case DPG_FAIL_EXITED:
		dpg_errf(err, "peer rank %d (%s) exited%s", f->culprit, h, by);
		break;
	case DPG_FAIL_CLOSED:
		dpg_errf(err, "peer rank %d (%s) closed the connection%s", f->culprit, h, by);
		break;
	case DPG_FAIL_ABORTED:
		dpg_errf(err, "peer rank %d (%s) aborted%s", f->culprit, h, by);
		break;
	case DPG_FAIL_MISMATCH:
		code = -DPG_ERR_INVALID;
		dpg_errf(err, "collective mismatch: rank %d (%s) issued a different collective "
			 "than rank %d (%s)", f->culprit, h, f->reporter,
			 f->reporter >= 0 && hosts != NULL ? hosts[f->reporter] : "?");
		break;
	case DPG_FAIL_TIMEOUT:
		code = -DPG_ERR_TIMEOUT;
		if (f->culprit >= 0)
			dpg_errf(err, "timed out waiting for peer rank %d (%s)%s",
				 f->culprit, h, by);
		else
			dpg_errf(err, "timed out waiting for the peers%s", by);
		break;
	default:
		dpg_errf(err, "peer rank %d (%s) broke the protocol%s", f->culprit, h, by);
		break;
	}
	return code;
}

static uint64_t fail_pack(const struct dpg_fail *f)
{
	return (1ull << 63) | ((uint64_t)(f->why & 0xff) << 48) |
	       ((uint64_t)((uint32_t)(f->culprit + 1) & 0xffffffu) << 24) |
	       ((uint64_t)(uint32_t)(f->reporter + 1) & 0xffffffu);
}

/* The word as fail_pack wrote it, else (corrupt, or a stranger's write)
 * BADWORD reported by this rank: its indices are never used unchecked. */
static void fail_unpack(const struct dpg_shm *s, uint64_t v, struct dpg_fail *f)
{
	f->why = (int)((v >> 48) & 0xff);
	f->culprit = (int)((v >> 24) & 0xffffffu) - 1;
	f->reporter = (int)(v & 0xffffffu) - 1;
	if ((v >> 56) != 0x80 || f->why == DPG_FAIL_WAITING || !dpg_fail_valid(f, s->nranks)) {
		f->why = DPG_FAIL_BADWORD;
		f->culprit = -1;
		f->reporter = s->self;
	}
}

/* ------------------------------------------------------------ futex */

static void futex_wait(_Atomic uint32_t *addr, uint32_t val, int64_t ns)
{
	struct timespec ts = { .tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000 };

	syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT, val, &ts, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *addr)
{
	syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void wake_one(struct dpg_shm *s, int q)
{
	struct shm_ctl *c = &s->ctl[q];

	if (atomic_load_explicit(&c->nwait, memory_order_seq_cst) != 0) {
		atomic_fetch_add_explicit(&c->bell, 1, memory_order_seq_cst);
		futex_wake(&c->bell);
	}
}

static void wake_all(struct dpg_shm *s)
{
	int q;

	for (q = 0; q < s->n; q++)
		if (q != s->me)
			wake_one(s, q);
}

/* Store a progress counter and wake whoever sleeps. */
void shm_publish(struct dpg_shm *s, _Atomic uint64_t *ctr, uint64_t v)
{
	atomic_store_explicit(ctr, v, memory_order_seq_cst);
	wake_all(s);
}

void dpg_shm_kick(struct dpg_shm *s)
{
	struct shm_ctl *c;

	if (s == NULL)
		return;
	c = &s->ctl[s->me];
	atomic_fetch_add_explicit(&c->bell, 1, memory_order_seq_cst);
	futex_wake(&c->bell);
}

void dpg_shm_fail_publish(struct dpg_shm *s, const struct dpg_fail *f)
{
	uint64_t zero = 0;
	int q;

	if (s == NULL)
		return;
	atomic_compare_exchange_strong(&s->hdr->fail, &zero, fail_pack(f));
	for (q = 0; q < s->n; q++) {
		if (q == s->me)
			continue;
		atomic_fetch_add_explicit(&s->ctl[q].bell, 1, memory_order_seq_cst);
		futex_wake(&s->ctl[q].bell);
	}
}

bool dpg_shm_fail_get(struct dpg_shm *s, struct dpg_fail *f)
{
	uint64_t v;

	if (s == NULL)
		return false;
	v = atomic_load_explicit(&s->hdr->fail, memory_order_acquire);
	if (v == 0)
		return false;
	fail_unpack(s, v, f);
	return true;
}

bool dpg_shm_oversubscribed(const struct dpg_shm *s)
{
	return s != NULL && s->oversub;
}

/* ------------------------------------------------------------ waiting */

static bool pipe_readable(struct dpg_shm *s)
{
	return atomic_load_explicit(&s->ctl[s->me].head, memory_order_seq_cst) > s->rpos;
}

/* Bytes of the out-pipe in use.  The reader may have rounded its end up
 * for the next collective before we did (dpg_shm_pipe_begin): then 0. */
static size_t pipe_used(struct dpg_shm *s)
{
	uint64_t tail = atomic_load_explicit(&s->ctl[s->pipe_to].tail, memory_order_seq_cst);

	return tail >= s->wpos ? 0 : (size_t)(s->wpos - tail);
}

static bool pipe_writable(struct dpg_shm *s)
{
	return pipe_used(s) + 8 <= s->P;
}

static bool cond_ok(struct dpg_shm *s, const struct wcond *c, int *lag)
{
	int q;

	switch (c->kind) {
	case W_ONE_IN:
		if (atomic_load_explicit(&s->ctl[c->q].in, memory_order_seq_cst) >= c->v)
			return true;
		*lag = c->q;
		return false;
	case W_PIPE:
		if ((c->rd && pipe_readable(s)) || (c->wr && pipe_writable(s)))
			return true;
		*lag = c->rd ? s->pipe_from : s->pipe_to;
		return false;
	default:
		break;
	}
	for (q = 0; q < s->n; q++) {
		const struct shm_ctl *x = &s->ctl[q];
		uint64_t v;

		if (q == s->me)
			continue;
		switch (c->kind) {
		case W_IN:
			v = atomic_load_explicit(&x->in, memory_order_seq_cst);
			break;
		case W_RED:
			v = atomic_load_explicit(&x->red, memory_order_seq_cst);
			break;
		case W_OUT:
			v = atomic_load_explicit(&x->out, memory_order_seq_cst);
			break;
		default:
			v = atomic_load_explicit(&x->bar, memory_order_seq_cst);
			break;
		}
		if (v < c->v) {
			*lag = q;
			return false;
		}
	}
	return true;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/* Is local peer q gone?  pidfd when we have one, else kill(pid, 0). */
static bool peer_gone(struct dpg_shm *s, int q)
{
	if (!s->pid_ok || s->pids[q] <= 0)
		return false;
	if (s->pidfds[q] >= 0) {
		struct pollfd p = { .fd = s->pidfds[q], .events = POLLIN };

		return poll(&p, 1, 0) > 0;
	}
	return kill(s->pids[q], 0) != 0 && errno == ESRCH;
}

static int fail_local(struct dpg_shm *s, int why, int culprit, struct dpg_err *err)
{
	struct dpg_fail f = { .why = why, .culprit = culprit, .reporter = s->self };

	dpg_shm_fail_publish(s, &f);
	return dpg_fail_format(&f, s->self, s->hosts, err);
}

/* Does condition c still need something from local peer q? */
static bool needs(struct dpg_shm *s, const struct wcond *c, int q)
{
	const struct shm_ctl *x = &s->ctl[q];

	switch (c->kind) {
	case W_IN:
		return atomic_load_explicit(&x->in, memory_order_seq_cst) < c->v;
	case W_RED:
		return atomic_load_explicit(&x->red, memory_order_seq_cst) < c->v;
	case W_OUT:
		return atomic_load_explicit(&x->out, memory_order_seq_cst) < c->v;
	case W_BAR:
		return atomic_load_explicit(&x->bar, memory_order_seq_cst) < c->v;
	case W_ONE_IN:
		return q == c->q;
	default:
		return (c->rd && q == s->pipe_from && !pipe_readable(s)) ||
		       (c->wr && q == s->pipe_to && !pipe_writable(s));
	}
}

/* A peer that has exited is a failure only if we still need it (a rank may
 * finish the last collective and exit while others copy out). */
static int check_peers(struct dpg_shm *s, const struct wcond *c, struct dpg_err *err)
{
	int q;

	for (q = 0; q < s->n; q++)
		if (q != s->me && needs(s, c, q) && peer_gone(s, q))
			return fail_local(s, DPG_FAIL_EXITED, s->ranks[q], err);
	return 0;
}

int dpg_shm_check(struct dpg_shm *s, bool want_read, bool want_write, struct dpg_err *err)
{
	struct wcond c = { .kind = W_PIPE, .rd = want_read && s != NULL && s->pipe_from >= 0,
			   .wr = want_write && s != NULL && s->pipe_to >= 0 };
	struct dpg_fail f;
	int64_t now;

	if (s == NULL)
		return 0;
	if (dpg_shm_fail_get(s, &f))
		return dpg_fail_format(&f, s->self, s->hosts, err);
	now = dpg_now_ms();
	if (now - s->last_health_ms < SHM_HEALTH_MS)
		return 0;
	s->last_health_ms = now;
	return check_peers(s, &c, err);
}

/* Everything but the condition: abort, failure word, deadline, peers. */
static int health(struct dpg_shm *s, const struct dpg_shm_wait *w, const struct wcond *c,
		  int lag, struct dpg_err *err)
{
	struct dpg_fail f;
	int64_t now;

	if ((w->abort != NULL && *w->abort) || (w->abort2 != NULL && *w->abort2)) {
		f.why = DPG_FAIL_ABORTED;
		f.culprit = s->self;
		f.reporter = s->self;
		dpg_shm_fail_publish(s, &f);
		dpg_errf(err, "aborted");
		return -DPG_ERR_ABORTED;
	}
	if (dpg_shm_fail_get(s, &f))
		return dpg_fail_format(&f, s->self, s->hosts, err);
	now = dpg_now_ms();
	if (now >= w->deadline_ms) {
		int culprit = lag >= 0 ? s->ranks[lag] : -1;
		int rc;

		/* a dead peer explains the wait better than the clock */
		rc = check_peers(s, c, err);
		if (rc != 0)
			return rc;
		f.why = DPG_FAIL_TIMEOUT;
		f.culprit = culprit;
		f.reporter = s->self;
		dpg_shm_fail_publish(s, &f);
		if (culprit >= 0)
			dpg_errf(err, "timed out after %.3g s waiting for peer rank %d (%s)",
				 w->timeout_s, culprit, s->hosts[culprit]);
		else
			dpg_errf(err, "timed out after %.3g s", w->timeout_s);
		return -DPG_ERR_TIMEOUT;
	}
	if (now - s->last_health_ms >= SHM_HEALTH_MS) {
		s->last_health_ms = now;
		return check_peers(s, c, err);
	}
	return 0;
}

int64_t dpg_shm_spin_ns(int64_t from_ns, int64_t t0)
{
	int64_t work = from_ns > 0 ? t0 - from_ns : 0;

	return work < DPG_SHM_SPIN_MIN_NS ? DPG_SHM_SPIN_MIN_NS
		: work > DPG_SHM_SPIN_MAX_NS ? DPG_SHM_SPIN_MAX_NS : work;
}

/* A wait that did not end at once ends now: the next one's work starts here. */
static int spin_end(struct dpg_shm *s)
{
	s->wait_end_ns = dpg_now_ns();
	return 0;
}

/* Wait until c holds.  max_us > 0: give up (return 0) after that long. */
int shm_wait(struct dpg_shm *s, const struct wcond *c, const struct dpg_shm_wait *w,
	     int64_t max_us, struct dpg_err *err)
{
	struct shm_ctl *me = &s->ctl[s->me];
	int lag = -1, rc, i;
	int64_t t0, limit = max_us > 0 ? max_us * 1000 : INT64_MAX;

	if (cond_ok(s, c, &lag))
		return 0;
	t0 = dpg_now_ns();
	if (!s->oversub) {
		int64_t spin = dpg_shm_spin_ns(w->start_ns > s->wait_end_ns ? w->start_ns
					       : s->wait_end_ns, t0);

		spin = spin < limit ? spin : limit;
		for (i = 1;; i++) {
			cpu_relax();
			if (cond_ok(s, c, &lag))
				return spin_end(s);
			if ((i & 63) == 0) {
				if (atomic_load_explicit(&s->hdr->fail, memory_order_relaxed) != 0)
					break;
				if (dpg_now_ns() - t0 >= spin)
					break;
			}
		}
	}
	for (i = 0;; i++) {
		/* oversubscribed: yield to the ranks that share our CPU for a
		 * while (a futex wakeup costs tens of microseconds here) */
		if (s->oversub ? dpg_now_ns() - t0 >= SHM_YIELD_NS : i >= SHM_YIELDS)
			break;
		if (s->oversub && (i & 15) == 15 &&
		    atomic_load_explicit(&s->hdr->fail, memory_order_relaxed) != 0)
			break;
		sched_yield();
		if (cond_ok(s, c, &lag))
			return spin_end(s);
	}
	for (;;) {
		int64_t now, left;
		uint32_t bell;

		rc = health(s, w, c, lag, err);
		if (rc != 0)
			return rc;
		now = dpg_now_ns();
		if (now - t0 >= limit)
			return 0;
		left = (w->deadline_ms - dpg_now_ms()) * 1000000 + 1000000;
		if (left > (int64_t)SHM_SLICE_MS * 1000000)
			left = (int64_t)SHM_SLICE_MS * 1000000;
		if (left > limit - (now - t0))
			left = limit - (now - t0);
		if (left < 1000)
			left = 1000;
		atomic_fetch_add_explicit(&me->nwait, 1, memory_order_seq_cst);
		bell = atomic_load_explicit(&me->bell, memory_order_seq_cst);
		if (!cond_ok(s, c, &lag))
			futex_wait(&me->bell, bell, left);
		atomic_fetch_sub_explicit(&me->nwait, 1, memory_order_seq_cst);
		if (cond_ok(s, c, &lag))
			return spin_end(s);
	}
}

int shm_wait_all(struct dpg_shm *s, int kind, uint64_t v, const struct dpg_shm_wait *w,
		 struct dpg_err *err)
{
	struct wcond c = { .kind = kind, .v = v };

	return shm_wait(s, &c, w, 0, err);
}
/* ------------------------------------------------------------ pipes mode */

void dpg_shm_pipe_begin(struct dpg_shm *s)
{
	s->wpos = shm_round_up(s->wpos, 8);
	if (s->pipe_from >= 0) {
		s->rpos = shm_round_up(s->rpos, 8);
		atomic_store_explicit(&s->ctl[s->me].tail, s->rpos, memory_order_seq_cst);
	}
}

size_t dpg_shm_pipe_write(struct dpg_shm *s, const void *buf, size_t len, size_t align)
{
	struct shm_ctl *c = &s->ctl[s->pipe_to];
	size_t off = (size_t)(s->wpos % s->P);
	size_t n = s->P - pipe_used(s);

	if (n > len)
		n = len;
	if (n > s->P - off)
		n = s->P - off;
	n -= n % align;
	if (n == 0)
		return 0;
	memcpy(s->data + (size_t)s->pipe_to * s->P + off, buf, n);
	s->wpos += n;
	atomic_store_explicit(&c->head, s->wpos, memory_order_seq_cst);
	wake_one(s, s->pipe_to);
	return n;
}

const void *dpg_shm_pipe_peek(struct dpg_shm *s, size_t *avail)
{
	uint64_t head = atomic_load_explicit(&s->ctl[s->me].head, memory_order_acquire);
	size_t off = (size_t)(s->rpos % s->P);
	/* the writer may not have rounded its end up yet: nothing to read */
	size_t n = head > s->rpos ? (size_t)(head - s->rpos) : 0;

	if (n > s->P - off)
		n = s->P - off;
	*avail = n;
	return s->data + (size_t)s->me * s->P + off;
}

void dpg_shm_pipe_align(struct dpg_shm *s, bool out, size_t a)
{
	if (out) {
		s->wpos = shm_round_up(s->wpos, a);
	} else if (s->pipe_from >= 0) {
		s->rpos = shm_round_up(s->rpos, a);
		atomic_store_explicit(&s->ctl[s->me].tail, s->rpos, memory_order_seq_cst);
	}
}

void dpg_shm_set_busy(struct dpg_shm *s, bool on)
{
	if (s != NULL)
		atomic_store_explicit(&s->ctl[s->me].busy, on ? 1u : 0u, memory_order_seq_cst);
}

bool dpg_shm_pipe_from_busy(struct dpg_shm *s)
{
	return s != NULL && s->pipe_from >= 0 &&
	       atomic_load_explicit(&s->ctl[s->pipe_from].busy, memory_order_seq_cst) != 0;
}

void dpg_shm_pipe_consume(struct dpg_shm *s, size_t n)
{
	s->rpos += n;
	atomic_store_explicit(&s->ctl[s->me].tail, s->rpos, memory_order_seq_cst);
	wake_one(s, s->pipe_from);
}

bool dpg_shm_pipe_writable(struct dpg_shm *s)
{
	return pipe_writable(s);
}

bool dpg_shm_pipe_readable(struct dpg_shm *s)
{
	return pipe_readable(s);
}

int dpg_shm_pipe_wait(struct dpg_shm *s, bool want_read, bool want_write,
		      const struct dpg_shm_wait *w, int64_t max_us, struct dpg_err *err)
{
	struct wcond c = { .kind = W_PIPE, .rd = want_read && s->pipe_from >= 0,
			   .wr = want_write && s->pipe_to >= 0 };

	if (!c.rd && !c.wr) {
		/* nothing to wait for here: just check health for max_us */
		int rc = health(s, w, &c, -1, err);

		if (rc == 0 && max_us > 0)
			usleep((useconds_t)(max_us < 1000 ? max_us : 1000));
		return rc;
	}
	return shm_wait(s, &c, w, max_us, err);
}
