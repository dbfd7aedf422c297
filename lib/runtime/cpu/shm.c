/* shm.c - the node segment of the CPU backend and the collectives that run
 * entirely inside one node (see shm.h for the layout and the protocol).
 *
 * Direct-mode allreduce, per stage of S bytes of the buffer (stage g uses
 * slot set g % K, so K stages can be in flight):
 *   1. wait until every rank has finished stage g - K (the set is free);
 *   2. copy my stage chunk, except my own slice, into my slot; publish in;
 *   3. wait for every rank's in;
 *   4. reduce my slice straight out of the others' slots (my own part is
 *      read from my send buffer) into my slot; publish red;
 *   5. wait for every rank's red;
 *   6. copy every slice out of its owner's slot into recv; publish out.
 * Each rank runs one stage ahead: stage g+1's copy-in (1-2) is done between
 * 4 and 5 of stage g, while the others still reduce.  Small buffers (<= 16
 * KiB) take one step fewer: every rank reduces the whole buffer from all
 * slots itself (same order everywhere, so identical results).
 * reduce_scatter is steps 1-4 with the result written straight to recv;
 * all_gather is 1-3 and 6; broadcast is the root's copy-in and everyone's
 * copy-out.  Copies into the user's buffer use non-temporal stores from 8
 * MiB up (no read-for-ownership; the buffer would not stay cached anyway).
 * The stage counters are monotonic over the communicator's life, so every
 * rank derives the same stage numbers without extra synchronization.
 * Stamps: a collective's first stage g0 also carries each rank's stamp in a
 * cell beside its slot (written once the set is free, read after the rank's
 * in of g0), compared by every rank before it reads any slot of g0; the
 * broadcast therefore waits for every rank's in of g0, and the barrier is a
 * stage without data.  A collective that completed still fails when the
 * failure word is set at its end, so a late peer of an aborted rank fails too.
 */
#include "shm.h"

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

#if defined(__x86_64__)
#include <emmintrin.h>
#define SHM_HAVE_NT 1
#endif

#define SHM_MAGIC 0x3130736d68736770ull	/* "pgshsm01" */
#define SHM_VERSION 1
#define SHM_CL 64

#define SHM_DEFAULT_SLOT (256u << 10)
#define SHM_DEFAULT_SLOT_OVERSUB (1u << 20)
#define SHM_DEFAULT_SETS 4
#define SHM_DEFAULT_PIPE (1u << 20)
#define SHM_MAX_SEGMENT (64u << 20)
/* Direct allreduce: up to this many bytes, every rank reduces everything. */
#define SHM_SMALL_BYTES (16u << 10)
/* Copies into the user's buffer bypass the cache (non-temporal stores)
 * when the collective writes at least this much: the buffer would not stay
 * in cache anyway, and the stores then need no read-for-ownership. */
#define SHM_NT_BYTES (8u << 20)

/* Waits: spin this long (when not oversubscribed), yield this many times,
 * then sleep in futex slices of at most SLICE_MS. */
#define SHM_SPIN_NS 30000
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
	_Alignas(SHM_CL) _Atomic uint32_t bell;	/* futex word, bumped by wakers */
	_Atomic uint32_t nwait;			/* owner: sleeping on bell */
	_Alignas(SHM_CL) _Atomic uint64_t head;	/* pipe into owner: writer's end */
	_Alignas(SHM_CL) _Atomic uint64_t tail;	/* pipe into owner: owner's end */
};

struct dpg_shm {
	enum dpg_shm_mode mode;
	int n, me, self;
	int nranks;			/* bound of the failure word's ranks */
	int *ranks;
	const char *const *hosts;
	char name[96];
	bool creator, created, unlinked;
	void *base;
	size_t size;
	struct shm_hdr *hdr;
	struct shm_ctl *ctl;
	char *data;
	int *pidfds;			/* -1: not watched */
	pid_t *pids;
	bool pid_ok, oversub;
	int64_t last_health_ms;
	/* direct */
	size_t S;			/* slot bytes */
	int K;
	uint64_t g;			/* next stage */
	char *stamps;			/* K x n stamp cells of SHM_CL bytes */
	const void **srcs;		/* n source pointers, reused */
	/* pipes */
	size_t P;
	int pipe_to, pipe_from;
	uint64_t wpos, rpos;
};

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
static void publish(struct dpg_shm *s, _Atomic uint64_t *ctr, uint64_t v)
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

enum { W_IN, W_RED, W_OUT, W_BAR, W_ONE_IN, W_PIPE };

struct wcond {
	int kind;
	uint64_t v;
	int q;			/* W_ONE_IN */
	bool rd, wr;		/* W_PIPE */
};

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

/* Wait until c holds.  max_us > 0: give up (return 0) after that long. */
static int shm_wait(struct dpg_shm *s, const struct wcond *c, const struct dpg_shm_wait *w,
		    int64_t max_us, struct dpg_err *err)
{
	struct shm_ctl *me = &s->ctl[s->me];
	int lag = -1, rc, i;
	int64_t t0, limit = max_us > 0 ? max_us * 1000 : INT64_MAX;

	if (cond_ok(s, c, &lag))
		return 0;
	t0 = dpg_now_ns();
	if (!s->oversub) {
		int64_t spin = SHM_SPIN_NS < limit ? SHM_SPIN_NS : limit;

		for (i = 1;; i++) {
			cpu_relax();
			if (cond_ok(s, c, &lag))
				return 0;
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
			return 0;
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
			return 0;
	}
}

static int wait_all(struct dpg_shm *s, int kind, uint64_t v, const struct dpg_shm_wait *w,
		    struct dpg_err *err)
{
	struct wcond c = { .kind = kind, .v = v };

	return shm_wait(s, &c, w, 0, err);
}

/* ------------------------------------------------------------ segment */

static size_t round_up(size_t x, size_t a)
{
	return (x + a - 1) / a * a;
}

static int pidfd_open_(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0);
#else
	(void)pid;
	errno = ENOSYS;
	return -1;
#endif
}

static int ncpus(void)
{
	cpu_set_t set;
	int n;

	if (sched_getaffinity(0, sizeof(set), &set) == 0) {
		n = CPU_COUNT(&set);
		if (n > 0)
			return n;
	}
	n = (int)sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? n : 1;
}

static size_t seg_layout(const struct dpg_shm *s, size_t *ctl_off, size_t *data_off)
{
	size_t data;

	*ctl_off = round_up(sizeof(struct shm_hdr), 4096);
	*data_off = round_up(*ctl_off + (size_t)s->n * sizeof(struct shm_ctl), 4096);
	if (s->mode == DPG_SHM_DIRECT)
		data = (size_t)s->K * (size_t)s->n * (s->S + SHM_CL);	/* + stamps */
	else
		data = (size_t)s->n * s->P;
	return *data_off + round_up(data, 4096);
}

/* Free a segment handle in any state dpg_shm_open leaves it in. */
static void shm_free(struct dpg_shm *s)
{
	int q;

	if (s == NULL)
		return;
	dpg_shm_unlink(s);
	if (s->base != NULL)
		munmap(s->base, s->size);
	if (s->pidfds != NULL)
		for (q = 0; q < s->n; q++)
			if (s->pidfds[q] >= 0)
				close(s->pidfds[q]);
	free(s->ranks);
	free(s->pids);
	free(s->pidfds);
	free(s->srcs);
	free(s);
}

/* The handle from cfg: local ranks, pids, and the segment's geometry
 * (slot sets K of S bytes, pipes of P bytes), nothing mapped yet. */
static int shm_new(const struct dpg_shm_cfg *cfg, struct dpg_shm **out, struct dpg_err *err)
{
	struct dpg_shm *s = calloc(1, sizeof(*s));
	int q;

	*out = s;
	if (s == NULL)
		return dpg_errs(err, DPG_ERR_NOMEM, "out of memory");
	s->mode = cfg->mode;
	s->n = cfg->nlocal;
	s->me = cfg->lrank;
	s->self = cfg->self;
	s->hosts = cfg->hosts;
	s->nranks = cfg->nranks > 0 ? cfg->nranks
		  : cfg->mode == DPG_SHM_DIRECT ? cfg->nlocal : INT_MAX;
	s->creator = cfg->lrank == 0;
	s->pid_ok = cfg->pid_ok;
	s->oversub = cfg->oversub >= 0 ? cfg->oversub != 0 : s->n > ncpus();
	s->ranks = calloc((size_t)s->n, sizeof(*s->ranks));
	s->pids = calloc((size_t)s->n, sizeof(*s->pids));
	s->pidfds = calloc((size_t)s->n, sizeof(*s->pidfds));
	s->srcs = calloc((size_t)s->n, sizeof(*s->srcs));
	if (s->ranks == NULL || s->pids == NULL || s->pidfds == NULL || s->srcs == NULL) {
		free(s->pidfds);	/* not yet -1: shm_free must not close them */
		s->pidfds = NULL;
		return dpg_errs(err, DPG_ERR_NOMEM, "out of memory");
	}
	for (q = 0; q < s->n; q++) {
		s->ranks[q] = cfg->ranks[q];
		s->pids[q] = cfg->pids[q];
		s->pidfds[q] = -1;
	}
	/* the stages run one ahead of each other: at least 3 sets */
	s->K = cfg->nsets >= 3 ? cfg->nsets : SHM_DEFAULT_SETS;
	s->S = cfg->slot_bytes > 0 ? cfg->slot_bytes
		: s->oversub ? SHM_DEFAULT_SLOT_OVERSUB : SHM_DEFAULT_SLOT;
	s->S = round_up(s->S, 4096);
	while (s->S > 64u << 10 && (size_t)s->K * (size_t)s->n * s->S > SHM_MAX_SEGMENT)
		s->S /= 2;
	s->P = round_up(cfg->pipe_bytes > 0 ? cfg->pipe_bytes : SHM_DEFAULT_PIPE, 4096);
	s->pipe_to = cfg->pipe_to;
	s->pipe_from = cfg->pipe_from;
	return 0;
}

/* Map s->size bytes of fd (and close fd either way). */
static int seg_map(struct dpg_shm *s, int fd, struct dpg_err *err)
{
	void *base = mmap(NULL, s->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
			  fd, 0);
	int rc = 0;

	if (base == MAP_FAILED)
		rc = dpg_errs(err, DPG_ERR_SYSTEM, "mmap of the shared segment (%zu bytes): %s",
			      s->size, strerror(errno));
	else
		s->base = base;
	close(fd);
	return rc;
}

/* Reserve the segment's memory now: tmpfs allocates pages on first touch,
 * and a page it cannot allocate then is a SIGBUS with no message. */
static int seg_reserve(struct dpg_shm *s, int fd, struct dpg_err *err)
{
	struct statvfs vfs;
	int e;

	do
		e = posix_fallocate(fd, 0, (off_t)s->size);
	while (e == EINTR);
	if (e == 0 || e == EOPNOTSUPP || e == ENOSYS)	/* not tmpfs: as before */
		return 0;
	if (e != ENOSPC)
		return dpg_errs(err, DPG_ERR_SYSTEM, "cannot reserve %zu bytes for the shared "
				"segment in /dev/shm: %s", s->size, strerror(e));
	if (statvfs("/dev/shm", &vfs) != 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "/dev/shm is full: the node's shared "
				"segment needs %zu bytes (%.1f MiB)", s->size,
				(double)s->size / 1048576.0);
	return dpg_errs(err, DPG_ERR_SYSTEM, "/dev/shm is full: the node's shared segment "
			"needs %zu bytes (%.1f MiB), %llu bytes free of %llu (enlarge /dev/shm "
			"or use smaller slots)", s->size, (double)s->size / 1048576.0,
			(unsigned long long)vfs.f_bavail * vfs.f_frsize,
			(unsigned long long)vfs.f_blocks * vfs.f_frsize);
}

/* A fresh name, the file created exclusively (0600), sized and reserved. */
static int seg_file(struct dpg_shm *s, int *fdp, struct dpg_err *err)
{
	unsigned rnd = (unsigned)getpid() ^ (unsigned)dpg_now_ns();
	int tries, fd = -1, rc = 0;

	for (tries = 0; tries < 16; tries++) {
		rnd = rnd * 1103515245u + 12345u;
		snprintf(s->name, sizeof(s->name), "/dpg.%d.%08x", (int)getpid(), rnd);
		fd = shm_open(s->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0 || errno != EEXIST)
			break;
	}
	if (fd < 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "shm_open %s: %s", s->name, strerror(errno));
	s->created = true;
	if (ftruncate(fd, (off_t)s->size) != 0)
		rc = dpg_errs(err, DPG_ERR_SYSTEM, "cannot size the shared segment to %zu "
			      "bytes: %s (is /dev/shm large enough?)", s->size, strerror(errno));
	if (rc == 0)
		rc = seg_reserve(s, fd, err);
	if (rc != 0)
		close(fd);
	else
		*fdp = fd;
	return rc;
}

static void seg_header(struct dpg_shm *s, size_t ctl_off, size_t data_off)
{
	s->hdr = s->base;
	s->hdr->size = s->size;
	s->hdr->version = SHM_VERSION;
	s->hdr->mode = (uint32_t)s->mode;
	s->hdr->nlocal = (uint32_t)s->n;
	s->hdr->nsets = (uint32_t)s->K;
	s->hdr->slot_bytes = s->S;
	s->hdr->pipe_bytes = s->P;
	s->hdr->ctl_off = ctl_off;
	s->hdr->data_off = data_off;
	atomic_store(&s->hdr->attached, 1);
	atomic_store_explicit(&s->hdr->magic, SHM_MAGIC, memory_order_release);
}

/* Tell the attachers why there is no segment: "!" and the message under
 * the key, in place of the name (best effort). */
static void seg_publish_error(const struct dpg_shm_cfg *cfg, const struct dpg_err *err)
{
	char val[DPG_ERR_MSG_MAX + 1];

	if (err == NULL)
		return;
	snprintf(val, sizeof(val), "!%s", err->msg);
	(void)dpg_store_set(cfg->store, cfg->key, val, strlen(val) + 1, cfg->deadline_ms, NULL);
}

/* Local index 0: create the segment under a fresh name, reserve and map
 * it, write the header, and publish the name (or the error) under cfg->key. */
static int seg_create(struct dpg_shm *s, const struct dpg_shm_cfg *cfg, size_t ctl_off,
		      size_t data_off, struct dpg_err *err)
{
	int fd = -1, rc;

	rc = seg_file(s, &fd, err);
	if (rc == 0)
		rc = seg_map(s, fd, err);
	if (rc != 0) {
		seg_publish_error(cfg, err);
		return rc;
	}
	seg_header(s, ctl_off, data_off);
	rc = dpg_store_set(cfg->store, cfg->key, s->name, strlen(s->name) + 1,
			   cfg->deadline_ms, err);
	if (rc != 0)
		dpg_err_prefix(err, "publishing the shared segment");
	return rc;
}

/* The segment's name as local index 0 published it. */
static int seg_lookup(struct dpg_shm *s, const struct dpg_shm_cfg *cfg, struct dpg_err *err)
{
	void *val = NULL;
	size_t len = 0;
	int rc;

	rc = dpg_store_get(cfg->store, cfg->key, &val, &len, cfg->deadline_ms, err);
	if (rc != 0) {
		dpg_err_prefix(err, "looking up the shared segment");
		return rc;
	}
	if (len > 1 && ((char *)val)[0] == '!' && ((char *)val)[len - 1] == '\0') {
		rc = dpg_errs(err, DPG_ERR_SYSTEM, "peer rank %d (%s) could not create the "
			      "node's shared segment: %s", s->ranks[0], s->hosts[s->ranks[0]],
			      (char *)val + 1);
		free(val);
		return rc;
	}
	if (len == 0 || len > sizeof(s->name) || ((char *)val)[len - 1] != '\0') {
		free(val);
		return dpg_errs(err, DPG_ERR_PEER, "bad shared segment name from peer rank %d (%s)",
				s->ranks[0], s->hosts[s->ranks[0]]);
	}
	memcpy(s->name, val, len);
	free(val);
	return 0;
}

/* Count this rank in; the last of the node's ranks removes the name at
 * once (everyone has it mapped), so a kill from here on (SIGTERM from
 * scancel during the rest of the rendezvous) leaves nothing in /dev/shm. */
static void seg_signed_in(struct dpg_shm *s)
{
	if (atomic_fetch_add(&s->hdr->attached, 1) + 1 != (uint32_t)s->n)
		return;
	if (shm_unlink(s->name) == 0 || errno == ENOENT)
		atomic_store(&s->hdr->gone, 1);
}

/* Other local ranks: open and map the segment local index 0 created, and
 * check that it was made for the same settings. */
static int seg_attach(struct dpg_shm *s, const struct dpg_shm_cfg *cfg, struct dpg_err *err)
{
	struct stat st;
	int fd, rc;

	rc = seg_lookup(s, cfg, err);
	if (rc != 0)
		return rc;
	fd = shm_open(s->name, O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return dpg_errs(err, DPG_ERR_SYSTEM,
				"shm_open %s (created by peer rank %d (%s)): %s", s->name,
				s->ranks[0], s->hosts[s->ranks[0]], strerror(errno));
	if (fstat(fd, &st) != 0 || (size_t)st.st_size != s->size) {
		rc = dpg_errs(err, DPG_ERR_PEER, "shared segment %s has %lld bytes, expected %zu "
			      "(peer rank %d (%s) runs another configuration?)", s->name,
			      (long long)st.st_size, s->size, s->ranks[0], s->hosts[s->ranks[0]]);
		close(fd);
		return rc;
	}
	rc = seg_map(s, fd, err);
	if (rc != 0)
		return rc;
	s->hdr = s->base;
	if (atomic_load_explicit(&s->hdr->magic, memory_order_acquire) != SHM_MAGIC ||
	    s->hdr->nlocal != (uint32_t)s->n || s->hdr->mode != (uint32_t)s->mode ||
	    s->hdr->slot_bytes != s->S || s->hdr->pipe_bytes != s->P ||
	    s->hdr->nsets != (uint32_t)s->K)
		return dpg_errs(err, DPG_ERR_PEER,
				"shared segment %s does not match this rank's settings", s->name);
	seg_signed_in(s);
	return 0;
}

/* Mapped: find the control lines and the data, sign in, watch the peers. */
static void seg_start(struct dpg_shm *s, size_t ctl_off, size_t data_off)
{
	int q;

	s->ctl = (struct shm_ctl *)(void *)((char *)s->base + ctl_off);
	s->data = (char *)s->base + data_off;
	if (s->mode == DPG_SHM_DIRECT)
		s->stamps = s->data + (size_t)s->K * (size_t)s->n * s->S;
	s->ctl[s->me].pid = (int32_t)getpid();
	if (s->pid_ok)
		for (q = 0; q < s->n; q++)
			if (q != s->me && s->pids[q] > 0)
				s->pidfds[q] = pidfd_open_(s->pids[q]);
	/* start positions: every counter starts at 0 in a fresh segment */
	s->last_health_ms = dpg_now_ms();
}

int dpg_shm_open(struct dpg_shm **out, const struct dpg_shm_cfg *cfg, struct dpg_err *err)
{
	struct dpg_shm *s;
	size_t ctl_off, data_off;
	int rc;

	*out = NULL;
	if (cfg->nlocal < 2 || cfg->lrank < 0 || cfg->lrank >= cfg->nlocal)
		return dpg_errs(err, DPG_ERR_INVALID, "shm: bad local rank %d of %d",
				cfg->lrank, cfg->nlocal);
	rc = shm_new(cfg, &s, err);
	if (rc == 0) {
		s->size = seg_layout(s, &ctl_off, &data_off);
		rc = s->creator ? seg_create(s, cfg, ctl_off, data_off, err)
				: seg_attach(s, cfg, err);
	}
	if (rc != 0) {
		shm_free(s);
		return rc;
	}
	seg_start(s, ctl_off, data_off);
	*out = s;
	return 0;
}

void dpg_shm_unlink(struct dpg_shm *s)
{
	if (s != NULL && s->created && !s->unlinked) {
		/* the last attacher normally did: then the name may be
		 * someone else's by now */
		if (s->hdr == NULL || atomic_load(&s->hdr->gone) == 0)
			shm_unlink(s->name);
		s->unlinked = true;
	}
}

void dpg_shm_close(struct dpg_shm *s)
{
	shm_free(s);
}

/* ------------------------------------------------------------ direct mode */

/* memcpy, with streaming stores when nt (the caller issues copy_fence()
 * before the collective returns). */
static void copy_out(void *dst, const void *src, size_t n, bool nt)
{
#ifdef SHM_HAVE_NT
	char *d = dst;
	const char *sp = src;

	if (!nt || n < 256) {
		memcpy(dst, src, n);
		return;
	}
	while (((uintptr_t)d & 15) != 0) {
		*d++ = *sp++;
		n--;
	}
	for (; n >= 64; n -= 64, d += 64, sp += 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)(const void *)sp);
		__m128i b = _mm_loadu_si128((const __m128i *)(const void *)(sp + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(const void *)(sp + 32));
		__m128i e = _mm_loadu_si128((const __m128i *)(const void *)(sp + 48));

		_mm_stream_si128((__m128i *)(void *)d, a);
		_mm_stream_si128((__m128i *)(void *)(d + 16), b);
		_mm_stream_si128((__m128i *)(void *)(d + 32), c);
		_mm_stream_si128((__m128i *)(void *)(d + 48), e);
	}
	memcpy(d, sp, n);
#else
	(void)nt;
	memcpy(dst, src, n);
#endif
}

static void copy_fence(bool nt)
{
#ifdef SHM_HAVE_NT
	if (nt)
		_mm_sfence();
#else
	(void)nt;
#endif
}

static char *slot(struct dpg_shm *s, uint64_t g, int q)
{
	return s->data + ((size_t)(g % (uint64_t)s->K) * (size_t)s->n + (size_t)q) * s->S;
}

/* Stage g may start writing its slot set once every rank is done with
 * stage g - K. */
static int wait_set_free(struct dpg_shm *s, uint64_t g, const struct dpg_shm_wait *w,
			 struct dpg_err *err)
{
	if (g < (uint64_t)s->K)
		return 0;
	return wait_all(s, W_OUT, g - (uint64_t)s->K + 1, w, err);
}

/* The stamp cell of local rank q for stage g (beside the slots). */
static struct dpg_stamp *stamp_cell(struct dpg_shm *s, uint64_t g, int q)
{
	size_t i = (size_t)(g % (uint64_t)s->K) * (size_t)s->n + (size_t)q;

	return (struct dpg_stamp *)(void *)(s->stamps + i * SHM_CL);
}

/* A collective starts at stage g: once its set is free (every peer is done
 * comparing the stamps of stage g - K), write ours; peers read it after our
 * next publish of in. */
static int stamp_put(struct dpg_shm *s, uint64_t g, const struct dpg_shm_wait *w,
		     struct dpg_err *err)
{
	int rc;

	if (w->stamp == NULL)
		return 0;
	rc = wait_set_free(s, g, w, err);
	if (rc == 0)
		memcpy(stamp_cell(s, g, s->me), w->stamp, sizeof(*w->stamp));
	return rc;
}

/* Compare our stamp with that of every peer that has published stage g's
 * in (its cell stays until we publish our out of stage g): 0, or the
 * mismatch (both sides named, the failure word set for the others). */
static int stamp_cmp(struct dpg_shm *s, uint64_t g, const struct dpg_shm_wait *w,
		     struct dpg_err *err)
{
	struct dpg_stamp st;
	struct dpg_fail f;
	int q, rc;

	for (q = 0; q < s->n; q++) {
		if (q == s->me || atomic_load_explicit(&s->ctl[q].in, memory_order_seq_cst) < g + 1)
			continue;
		memcpy(&st, stamp_cell(s, g, q), sizeof(st));
		if (dpg_stamp_equal(&st, w->stamp))
			continue;
		rc = dpg_stamp_mismatch(w->stamp, s->self, &st, s->ranks[q], s->hosts, err);
		f.why = rc == -DPG_ERR_INVALID ? DPG_FAIL_MISMATCH : DPG_FAIL_PROTO;
		f.culprit = s->ranks[q];
		f.reporter = s->self;
		dpg_shm_fail_publish(s, &f);
		return rc;
	}
	return 0;
}

/* Wait until every peer has published stage g's in, then compare stamps;
 * a failed wait is explained by a mismatch with a peer that did arrive. */
static int wait_stamped(struct dpg_shm *s, uint64_t g, const struct dpg_shm_wait *w,
			struct dpg_err *err)
{
	int rc = wait_all(s, W_IN, g + 1, w, err);

	if (w->stamp != NULL) {
		struct dpg_err e2 = { "" };
		int rc2 = stamp_cmp(s, g, w, &e2);

		if (rc2 != 0) {
			memcpy(err->msg, e2.msg, sizeof(err->msg));
			return rc2;
		}
	}
	return rc;
}

/* The end of a collective whose data is complete: it still fails when a
 * peer failed meanwhile (e.g. was aborted while we were late), so that no
 * rank reports success while another reports the failure. */
static int end_check(struct dpg_shm *s, struct dpg_err *err)
{
	struct dpg_fail f;

	if (dpg_shm_fail_get(s, &f))
		return dpg_fail_format(&f, s->self, s->hosts, err);
	return 0;
}

static void publish_done(struct dpg_shm *s, uint64_t g)
{
	struct shm_ctl *me = &s->ctl[s->me];

	atomic_store_explicit(&me->in, g + 1, memory_order_relaxed);
	atomic_store_explicit(&me->red, g + 1, memory_order_relaxed);
	publish(s, &me->out, g + 1);
}

/* Slice length in elements: ceil(m / n) rounded up to a cache line. */
static size_t slice_len(size_t m, int n, size_t es)
{
	size_t per = (m + (size_t)n - 1) / (size_t)n;
	size_t line = SHM_CL / es;

	return round_up(per, line);
}

static int allreduce_small(struct dpg_shm *s, const char *send, char *recv, size_t count,
			   dpg_dtype_t dt, dpg_op_t op, const struct dpg_shm_wait *w,
			   struct dpg_err *err)
{
	size_t es = dpg_dtype_size(dt);
	uint64_t g = s->g++;
	int q, rc;

	rc = stamp_put(s, g, w, err);
	if (rc == 0)
		rc = wait_set_free(s, g, w, err);
	if (rc != 0)
		return rc;
	memcpy(slot(s, g, s->me), send, count * es);
	publish(s, &s->ctl[s->me].in, g + 1);
	rc = wait_stamped(s, g, w, err);
	if (rc != 0)
		return rc;
	for (q = 0; q < s->n; q++)
		s->srcs[q] = q == s->me ? (const void *)send : slot(s, g, q);
	dpg_reduce_n(recv, s->srcs, s->n, count, dt, op, s->n);
	publish_done(s, g);
	return end_check(s, err);
}

/* Geometry of direct-allreduce stage k: elements [c0, c0 + m) of the
 * buffer, split in slices of sl elements; mine is [lo, hi). */
struct ar_stage {
	size_t c0, m, sl, lo, hi;
};

static void ar_geom(const struct dpg_shm *s, size_t k, size_t E, size_t count, size_t es,
		    struct ar_stage *st)
{
	st->c0 = k * E;
	st->m = count - st->c0 < E ? count - st->c0 : E;
	st->sl = slice_len(st->m, s->n, es);
	st->lo = (size_t)s->me * st->sl < st->m ? (size_t)s->me * st->sl : st->m;
	st->hi = st->lo + st->sl < st->m ? st->lo + st->sl : st->m;
}

/* Copy stage g's chunk, all but my own slice, into my slot; publish in. */
static int ar_copy_in(struct dpg_shm *s, uint64_t g, const struct ar_stage *st,
		      const char *send, size_t es, const struct dpg_shm_wait *w,
		      struct dpg_err *err)
{
	char *mine = slot(s, g, s->me);
	int rc = wait_set_free(s, g, w, err);

	if (rc != 0)
		return rc;
	memcpy(mine, send + st->c0 * es, st->lo * es);
	memcpy(mine + st->hi * es, send + (st->c0 + st->hi) * es, (st->m - st->hi) * es);
	publish(s, &s->ctl[s->me].in, g + 1);
	return 0;
}

int dpg_shm_allreduce(struct dpg_shm *s, const void *sendv, void *recvv, size_t count,
		      dpg_dtype_t dt, dpg_op_t op, const struct dpg_shm_wait *w,
		      struct dpg_err *err)
{
	const char *send = sendv;
	char *recv = recvv;
	size_t es = dpg_dtype_size(dt), E, k, N;
	int n = s->n, me = s->me, q, rc;
	bool nt = count * es >= SHM_NT_BYTES;
	struct ar_stage st, nx = { 0, 0, 0, 0, 0 };
	uint64_t g0;

	if (count == 0)
		return 0;
	if (count * es <= SHM_SMALL_BYTES && count * es <= s->S)
		return allreduce_small(s, send, recv, count, dt, op, w, err);
	E = s->S / es;
	N = (count + E - 1) / E;
	g0 = s->g;
	s->g += N;
	ar_geom(s, 0, E, count, es, &st);
	rc = stamp_put(s, g0, w, err);
	if (rc == 0)
		rc = ar_copy_in(s, g0, &st, send, es, w, err);
	if (rc != 0)
		return rc;
	for (k = 0; k < N; k++) {
		uint64_t g = g0 + k;
		char *mine = slot(s, g, me);

		rc = k == 0 ? wait_stamped(s, g, w, err) : wait_all(s, W_IN, g + 1, w, err);
		if (rc != 0)
			return rc;
		/* my slice, reduced out of everyone's slot, into my slot */
		if (st.hi > st.lo) {
			for (q = 0; q < n; q++)
				s->srcs[q] = q == me ? (const void *)(send + (st.c0 + st.lo) * es)
					: slot(s, g, q) + st.lo * es;
			dpg_reduce_n(mine + st.lo * es, s->srcs, n, st.hi - st.lo, dt, op, n);
		}
		publish(s, &s->ctl[me].red, g + 1);
		/* while the others reduce: the next stage's copy-in */
		if (k + 1 < N) {
			ar_geom(s, k + 1, E, count, es, &nx);
			rc = ar_copy_in(s, g + 1, &nx, send, es, w, err);
			if (rc != 0)
				return rc;
		}
		rc = wait_all(s, W_RED, g + 1, w, err);
		if (rc != 0)
			return rc;
		/* every slice from its owner's slot */
		for (q = 0; q < n; q++) {
			size_t qlo = (size_t)q * st.sl < st.m ? (size_t)q * st.sl : st.m;
			size_t qhi = qlo + st.sl < st.m ? qlo + st.sl : st.m;

			if (qhi > qlo)
				copy_out(recv + (st.c0 + qlo) * es, slot(s, g, q) + qlo * es,
					 (qhi - qlo) * es, nt);
		}
		publish(s, &s->ctl[me].out, g + 1);
		st = nx;
	}
	copy_fence(nt);
	return end_check(s, err);
}

/* reduce_scatter stage g covers elements [o, o + m) of every block; my
 * slot holds the other ranks' blocks' pieces at q * E. */
static int rs_copy_in(struct dpg_shm *s, uint64_t g, size_t o, size_t m, size_t E,
		      const char *send, size_t rc_count, size_t es,
		      const struct dpg_shm_wait *w, struct dpg_err *err)
{
	char *mine = slot(s, g, s->me);
	int q, rc = wait_set_free(s, g, w, err);

	if (rc != 0)
		return rc;
	for (q = 0; q < s->n; q++)
		if (q != s->me)
			memcpy(mine + (size_t)q * E * es, send + ((size_t)q * rc_count + o) * es,
			       m * es);
	publish(s, &s->ctl[s->me].in, g + 1);
	return 0;
}

int dpg_shm_reduce_scatter(struct dpg_shm *s, const void *sendv, void *recvv,
			   size_t rc_count, dpg_dtype_t dt, dpg_op_t op,
			   const struct dpg_shm_wait *w, struct dpg_err *err)
{
	const char *send = sendv;
	char *recv = recvv;
	size_t es = dpg_dtype_size(dt), E, k, N, line = SHM_CL / es;
	int n = s->n, me = s->me, q, rc;
	uint64_t g0;

	if (rc_count == 0)
		return 0;
	E = s->S / es / (size_t)n;
	E = E / line * line;
	if (E == 0)
		E = line;
	N = (rc_count + E - 1) / E;
	g0 = s->g;
	s->g += N;
	rc = stamp_put(s, g0, w, err);
	if (rc == 0)
		rc = rs_copy_in(s, g0, 0, rc_count < E ? rc_count : E, E, send, rc_count, es, w,
				err);
	if (rc != 0)
		return rc;
	for (k = 0; k < N; k++) {
		uint64_t g = g0 + k;
		size_t o = k * E, m = rc_count - o < E ? rc_count - o : E;

		if (k + 1 < N) {	/* run one stage ahead */
			size_t o2 = o + E, m2 = rc_count - o2 < E ? rc_count - o2 : E;

			rc = rs_copy_in(s, g + 1, o2, m2, E, send, rc_count, es, w, err);
			if (rc != 0)
				return rc;
		}
		rc = k == 0 ? wait_stamped(s, g, w, err) : wait_all(s, W_IN, g + 1, w, err);
		if (rc != 0)
			return rc;
		for (q = 0; q < n; q++)
			s->srcs[q] = q == me ? (const void *)(send + ((size_t)me * rc_count + o) * es)
				: slot(s, g, q) + (size_t)me * E * es;
		dpg_reduce_n(recv + o * es, s->srcs, n, m, dt, op, n);
		publish(s, &s->ctl[me].out, g + 1);
	}
	return end_check(s, err);
}

int dpg_shm_all_gather(struct dpg_shm *s, const void *sendv, void *recvv,
		       size_t sc, dpg_dtype_t dt, const struct dpg_shm_wait *w,
		       struct dpg_err *err)
{
	const char *send = sendv;
	char *recv = recvv;
	size_t es = dpg_dtype_size(dt), E = s->S / es, k, N;
	int n = s->n, me = s->me, q, rc;
	bool nt = sc * es * (size_t)n >= SHM_NT_BYTES;
	uint64_t g0;

	if (sc == 0)
		return 0;
	N = (sc + E - 1) / E;
	g0 = s->g;
	s->g += N;
	rc = stamp_put(s, g0, w, err);
	if (rc != 0)
		return rc;
	for (k = 0; k <= N; k++) {
		/* copy-in of stage k runs one ahead of the copy-out of k - 1 */
		if (k < N) {
			size_t o = k * E, m = sc - o < E ? sc - o : E;

			rc = wait_set_free(s, g0 + k, w, err);
			if (rc != 0)
				return rc;
			memcpy(slot(s, g0 + k, me), send + o * es, m * es);
			publish(s, &s->ctl[me].in, g0 + k + 1);
		}
		if (k > 0) {
			uint64_t g = g0 + k - 1;
			size_t o = (k - 1) * E, m = sc - o < E ? sc - o : E;

			rc = k == 1 ? wait_stamped(s, g, w, err) : wait_all(s, W_IN, g + 1, w, err);
			if (rc != 0)
				return rc;
			for (q = 0; q < n; q++)
				copy_out(recv + ((size_t)q * sc + o) * es, slot(s, g, q), m * es, nt);
			publish(s, &s->ctl[me].out, g + 1);
		}
	}
	copy_fence(nt);
	return end_check(s, err);
}

/* The root's side of a broadcast: copy every stage in; with stamps, after
 * the first stage wait for every rank to arrive and compare.  Its out is
 * published once at the end (no rank waits for it within the call). */
static int bcast_root(struct dpg_shm *s, const char *buf, size_t count, size_t E, size_t es,
		      uint64_t g0, const struct dpg_shm_wait *w, struct dpg_err *err)
{
	size_t o;
	uint64_t g = g0;
	int rc;

	for (o = 0; o < count; o += E, g++) {
		size_t m = count - o < E ? count - o : E;

		rc = wait_set_free(s, g, w, err);
		if (rc != 0)
			return rc;
		memcpy(slot(s, g, s->me), buf + o * es, m * es);
		publish(s, &s->ctl[s->me].in, g + 1);
		if (g == g0 && w->stamp != NULL && (rc = wait_stamped(s, g0, w, err)) != 0)
			return rc;
	}
	publish_done(s, g - 1);
	return 0;
}

int dpg_shm_broadcast(struct dpg_shm *s, void *bufv, size_t count, dpg_dtype_t dt,
		      int root, const struct dpg_shm_wait *w, struct dpg_err *err)
{
	char *buf = bufv;
	size_t es = dpg_dtype_size(dt), E = s->S / es, o;
	bool nt = count * es >= SHM_NT_BYTES;
	uint64_t g0 = s->g, g;
	int rc;

	if (count == 0)
		return 0;
	s->g += (count + E - 1) / E;
	rc = stamp_put(s, g0, w, err);
	if (rc == 0 && s->me == root)
		rc = bcast_root(s, buf, count, E, es, g0, w, err);
	if (rc == 0 && s->me != root && w->stamp != NULL) {
		/* announce our stamp; every rank compares with every other */
		publish(s, &s->ctl[s->me].in, g0 + 1);
		rc = wait_stamped(s, g0, w, err);
	}
	for (o = 0, g = g0; rc == 0 && s->me != root && o < count; o += E, g++) {
		size_t m = count - o < E ? count - o : E;
		struct wcond c = { .kind = W_ONE_IN, .v = g + 1, .q = root };

		rc = shm_wait(s, &c, w, 0, err);
		if (rc == 0) {
			copy_out(buf + o * es, slot(s, g, root), m * es, nt);
			publish_done(s, g);
		}
	}
	if (rc != 0)
		return rc;
	copy_fence(nt);
	return end_check(s, err);
}

/* A barrier is a stage without data: everyone's in, then done. */
int dpg_shm_barrier(struct dpg_shm *s, const struct dpg_shm_wait *w, struct dpg_err *err)
{
	uint64_t g = s->g++;
	int rc;

	rc = stamp_put(s, g, w, err);
	if (rc == 0)
		rc = wait_set_free(s, g, w, err);
	if (rc != 0)
		return rc;
	publish(s, &s->ctl[s->me].in, g + 1);
	rc = wait_stamped(s, g, w, err);
	if (rc != 0)
		return rc;
	publish_done(s, g);
	return end_check(s, err);
}

/* ------------------------------------------------------------ pipes mode */

void dpg_shm_pipe_begin(struct dpg_shm *s)
{
	s->wpos = round_up(s->wpos, 8);
	if (s->pipe_from >= 0) {
		s->rpos = round_up(s->rpos, 8);
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
		s->wpos = round_up(s->wpos, a);
	} else if (s->pipe_from >= 0) {
		s->rpos = round_up(s->rpos, a);
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
