/* SPDX-License-Identifier: BSD-3-Clause */
/* shm_direct.c - direct-mode collectives: the whole communicator on one node
 * runs through the segment's slot sets (see shm.h).
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
 * all_gather is 1-3 and 6 (a rank's own block goes straight from send to
 * recv); broadcast is the root's copy-in and everyone's copy-out.  These
 * two run in stages of a quarter of the call (16 KiB at least, a slot at
 * most) so that the copies in and out overlap within a call, each at an
 * offset in the slot that moves on each time the sets come round: a rank
 * then never overwrites lines its peers still cache (on a 2-vCPU AMD EPYC
 * VM each such line cost an invalidation: 6-8 GB/s against 33 GB/s).
 * Copies into the user's buffer use non-temporal stores from 8 MiB up (no
 * read-for-ownership; the buffer would not stay cached anyway).
 * Streaming: while lines are slow to pass between the local CPUs (a VM
 * whose host placed its vCPUs apart: 1.4-2.3 GB/s through a slot, against
 * 8-33 GB/s otherwise), the copies into the slots of calls from 64 KiB use
 * non-temporal stores, so that readers fetch the data from memory instead
 * of another CPU's cache (8-23 GB/s then); the allreduce reduces its
 * slice into recv and streams it into its slot.  The writer alone decides,
 * from every rank's estimate of the handoff latency, which each rank
 * samples in the waits of large calls: the time from a peer's publish
 * (stamped beside its counter) to seeing it, when the wait had begun before
 * it and spun; an estimate not renewed for SHM_HANDOFF_AGE_MS lapses.
 * A slow handoff does not always mean apart (an Intel Xeon's two vCPUs on
 * one L3 pass a line in 210-240 ns, and streaming cost 5-20% there), so
 * while it is slow the writer times its large calls each way (xcost.h)
 * and keeps the cheaper, copying one call the other way now and then.
 * Where the ranks outnumber the CPUs nothing is sampled (the waits yield):
 * there a broadcast's root streams every large call (bcast_xfer).
 * What a reader reads does not depend on the choice.
 * The stage counters are monotonic over the communicator's life, so every
 * rank derives the same stage numbers without extra synchronization.
 * Stamps: a collective's first stage g0 also carries each rank's stamp in a
 * cell beside its slot (written once the set is free, read after the rank's
 * in of g0), compared by every rank before it reads any slot of g0; the
 * broadcast therefore waits for every rank's in of g0, and the barrier is a
 * stage without data.  A collective that completed still fails when the
 * failure word is set at its end, so a late peer of an aborted rank fails too.
 */
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
#include "cma.h"
#include "handoff.h"
#include "net.h"
#include "reduce.h"
#include "store.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#define SHM_HAVE_NT 1
#endif

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

/* ------------------------------------------------ streaming and handoffs */

/* The ops whose large calls' costs are kept apart (xcost.h). */
enum { X_ALLREDUCE, X_REDUCE_SCATTER, X_ALL_GATHER, X_BROADCAST };

/* Whether a rank's handoff estimate says lines are slow to pass. */
static bool handoffs_slow(const struct dpg_shm *s, int64_t now)
{
	int q;

	for (q = 0; q < s->n; q++) {
		const struct shm_ctl *c = &s->ctl[q];

		if (atomic_load_explicit(&c->handoff_ns, memory_order_relaxed) >=
		    SHM_SLOW_HANDOFF_NS &&
		    now - atomic_load_explicit(&c->handoff_at, memory_order_relaxed) <=
		    (int64_t)SHM_HANDOFF_AGE_MS * 1000000)
			return true;
	}
	return false;
}

/* How long between two calls copied the other way: SHM_EXPLORE_MS, or
 * SHM_EXPLORE_CALLS times the last large call up to SHM_EXPLORE_MAX_MS
 * (the handoff estimate, renewed only by unstreamed calls, must not lapse
 * while streaming), so that long calls are not explored one in three. */
static int64_t explore_gap(const struct dpg_shm *s)
{
	int64_t gap = (int64_t)SHM_EXPLORE_CALLS * s->call_ns;

	if (gap < (int64_t)SHM_EXPLORE_MS * 1000000)
		gap = (int64_t)SHM_EXPLORE_MS * 1000000;
	if (gap > (int64_t)SHM_EXPLORE_MAX_MS * 1000000)
		gap = (int64_t)SHM_EXPLORE_MAX_MS * 1000000;
	return gap;
}

/* Whether this call's copies into the slots stream (see the top): not
 * while the handoffs are fast; while they are slow, the way this op's
 * calls of this size cost less (streamed until both ways have fresh
 * samples), and the other way one large call every explore_gap(), so
 * that both stay sampled (an unstreamed call samples the handoffs too). */
static bool stream_in(struct dpg_shm *s, size_t bytes, int op, int64_t now)
{
	bool want;

	if (s->stream != 0)
		return s->stream > 0;
	if (bytes < SHM_STREAM_BYTES || !handoffs_slow(s, now))
		return false;
	want = dpg_xcost_pick(&s->xcost, op, bytes, now) != 0;
	if (now - s->explored_ns >= explore_gap(s)) {
		s->explored_ns = now;
		return !want;
	}
	return want;
}

/* Publish stage g's in; stamped with the time in a large call whose data
 * did not stream (the only ones sampled).  The fence first drains the
 * stores of the copy (which the publish would wait for anyway), so that
 * the sample is the handoff alone. */
static void publish_in(struct dpg_shm *s, uint64_t g, bool timed)
{
	struct shm_ctl *me = &s->ctl[s->me];

	if (timed) {
		atomic_thread_fence(memory_order_seq_cst);
		atomic_store_explicit(&me->t_in, dpg_now_ns(), memory_order_relaxed);
	}
	shm_publish(s, &me->in, g + 1);
}

/* A wait for peers' in, timed: the latest stamp among them (only peer
 * `one`, when >= 0) is a handoff sample when it falls after the wait began
 * and the wait ended within its spin. */
struct probe {
	bool on;
	int64_t t0;
};

static void probe_begin(const struct dpg_shm *s, struct probe *p, bool timed)
{
	p->on = timed && !s->oversub;
	p->t0 = p->on ? dpg_now_ns() : 0;
}

static void probe_end(struct dpg_shm *s, const struct probe *p, int one, int rc)
{
	int64_t t1, tp = 0, v;
	int q;

	if (!p->on || rc != 0)
		return;
	t1 = dpg_now_ns();
	if (t1 - p->t0 >= SHM_SPIN_NS)
		return;
	for (q = 0; q < s->n; q++) {
		if (q == s->me || (one >= 0 && q != one))
			continue;
		v = atomic_load_explicit(&s->ctl[q].t_in, memory_order_relaxed);
		if (v > tp)
			tp = v;
	}
	if (tp <= p->t0)
		return;
	dpg_handoff_note(&s->handoff, t1 - tp);
	atomic_store_explicit(&s->ctl[s->me].handoff_ns, dpg_handoff_ns(&s->handoff),
			      memory_order_relaxed);
	atomic_store_explicit(&s->ctl[s->me].handoff_at, t1, memory_order_relaxed);
}

int dpg_shm_handoff_ns(const struct dpg_shm *s)
{
	return dpg_handoff_ns(&s->handoff);
}

int dpg_shm_single_copy(const struct dpg_shm *s)
{
	return s->cma;
}

/* Bytes per stage of a copy collective (all_gather, broadcast) that moves
 * `bytes` per rank: a slot, or for a smaller call a quarter of the call (at
 * least SHM_MIN_CHUNK), so that copy-in and copy-out of successive stages
 * overlap on different CPUs within the call; always a slot when the ranks
 * outnumber the CPUs (no CPU to overlap on: each stage would only add a
 * hand-over between ranks that share one).  Every rank derives the same. */
static size_t copy_chunk(const struct dpg_shm *s, size_t bytes)
{
	size_t c = shm_round_up(bytes / SHM_CHUNK_DIV, 4096);

	if (!s->split)
		return s->S;
	if (c < SHM_MIN_CHUNK)
		c = SHM_MIN_CHUNK;
	return c < s->S ? c : s->S;
}

/* Where stage g of a copy collective with stages of `chunk` bytes keeps
 * local rank q's data: in its slot, at an offset that moves on by a chunk
 * each time the sets come round, so that a rank writes lines the peers
 * read K * S bytes ago, out of their caches by then (overwriting lines a
 * peer still caches costs an invalidation each: several times the copy). */
static char *chunk_slot(struct dpg_shm *s, uint64_t g, int q, size_t chunk)
{
	uint64_t turn = g / (uint64_t)s->K;

	return slot(s, g, q) + (size_t)(turn % (uint64_t)(s->S / chunk)) * chunk;
}

/* Stage g may start writing its slot set once every rank is done with
 * stage g - K.  The counters only grow, so the least out seen at the last
 * wait still holds: with K sets it usually answers for the next K - 1
 * stages, and a small call skips reading lines its peers have just written
 * (each a transfer between CPUs before the copy can start). */
static int wait_set_free(struct dpg_shm *s, uint64_t g, const struct dpg_shm_wait *w,
			 struct dpg_err *err)
{
	uint64_t need, v, least = UINT64_MAX;
	int q, rc;

	if (g < (uint64_t)s->K)
		return 0;
	need = g - (uint64_t)s->K + 1;
	if (s->out_floor >= need)
		return 0;
	rc = shm_wait_all(s, W_OUT, need, w, err);
	if (rc != 0)
		return rc;
	for (q = 0; q < s->n; q++) {	/* the lines the wait has just read */
		if (q == s->me)
			continue;
		v = atomic_load_explicit(&s->ctl[q].out, memory_order_seq_cst);
		if (v < least)
			least = v;
	}
	s->out_floor = least < need ? need : least;
	return 0;
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
	int rc = shm_wait_all(s, W_IN, g + 1, w, err);

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
	shm_publish(s, &me->out, g + 1);
}

/* Slice length in elements: ceil(m / n) rounded up to a cache line. */
static size_t slice_len(size_t m, int n, size_t es)
{
	size_t per = (m + (size_t)n - 1) / (size_t)n;
	size_t line = SHM_CL / es;

	return shm_round_up(per, line);
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
	shm_publish(s, &s->ctl[s->me].in, g + 1);
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

/* How a call moves data: streamed into the slots (nt_in); its publishes
 * stamped (timed); its waits for the peers' data sampled (probe); its cost
 * kept (costed: op, bytes, from t0; xfer_done). */
struct xfer {
	bool nt_in, timed, probe, costed;
	int op;
	size_t bytes;
	int64_t t0;
};

static struct xfer xfer_for(struct dpg_shm *s, size_t bytes, int op)
{
	struct xfer x;

	x.probe = bytes >= SHM_STREAM_BYTES;
	x.t0 = x.probe ? dpg_now_ns() : 0;
	x.nt_in = stream_in(s, bytes, op, x.t0);
	x.timed = x.probe && !x.nt_in;
	x.costed = x.probe && s->stream == 0 && !s->oversub;
	x.op = op;
	x.bytes = bytes;
	return x;
}

/* A call that moved its data as x says is done: keep what it cost. */
static void xfer_done(struct dpg_shm *s, const struct xfer *x)
{
	int64_t now;

	if (!x->costed)
		return;
	now = dpg_now_ns();
	s->call_ns = now - x->t0;
	dpg_xcost_note(&s->xcost, x->op, x->bytes, x->nt_in, now - x->t0, now);
}

/* A broadcast's: the same, except that where the ranks outnumber the CPUs
 * (their waits yield, so no handoff is sampled) the root streams every
 * large call.  4 ranks on 2 vCPUs, alternating runs (2026-11-28): while
 * the vCPUs were apart, 64 KiB / 256 KiB / 1 MiB took 11-12 / 32-37 /
 * 124-131 us streamed against 29-39 / 120-124 / 444-453 not (16 / 64 MiB:
 * 6.7 / 27 ms not streamed); while they shared a cache, 64 KiB-1 MiB took
 * the same or less streamed, 4-64 MiB 0.80-0.93x.  All-gathers and
 * reductions are left alone: streamed, they took 0.60-0.91x and 0.4-0.8x
 * while the vCPUs shared a cache. */
static struct xfer bcast_xfer(struct dpg_shm *s, size_t bytes)
{
	struct xfer x = xfer_for(s, bytes, X_BROADCAST);

	if (s->oversub && s->stream == 0 && bytes >= SHM_STREAM_BYTES) {
		x.nt_in = true;
		x.timed = false;
	}
	return x;
}

/* Copy stage g's chunk, all but my own slice, into my slot; publish in. */
static int ar_copy_in(struct dpg_shm *s, uint64_t g, const struct ar_stage *st,
		      const char *send, size_t es, struct xfer x,
		      const struct dpg_shm_wait *w, struct dpg_err *err)
{
	char *mine = slot(s, g, s->me);
	int rc = wait_set_free(s, g, w, err);

	if (rc != 0)
		return rc;
	copy_out(mine, send + st->c0 * es, st->lo * es, x.nt_in);
	copy_out(mine + st->hi * es, send + (st->c0 + st->hi) * es, (st->m - st->hi) * es,
		 x.nt_in);
	copy_fence(x.nt_in);
	publish_in(s, g, x.timed);
	return 0;
}

/* My slice of stage g, reduced out of everyone's slot (my own part from
 * send) into my slot; streaming, into recv first, then streamed into the
 * slot (recv's slice is then final). */
static void ar_reduce(struct dpg_shm *s, uint64_t g, const struct ar_stage *st,
		      const char *send, char *recv, size_t es, dpg_dtype_t dt, dpg_op_t op,
		      struct xfer x)
{
	char *mine = slot(s, g, s->me) + st->lo * es;
	char *dst = x.nt_in ? recv + (st->c0 + st->lo) * es : mine;
	int q;

	if (st->hi <= st->lo)
		return;
	for (q = 0; q < s->n; q++)
		s->srcs[q] = q == s->me ? (const void *)(send + (st->c0 + st->lo) * es)
			: slot(s, g, q) + st->lo * es;
	dpg_reduce_n(dst, s->srcs, s->n, st->hi - st->lo, dt, op, s->n);
	if (x.nt_in) {
		copy_out(mine, dst, (st->hi - st->lo) * es, true);
		copy_fence(true);
	}
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
	struct xfer x;
	struct probe pb;
	uint64_t g0;

	if (count == 0)
		return 0;
	if (count * es <= SHM_SMALL_BYTES && count * es <= s->S)
		return allreduce_small(s, send, recv, count, dt, op, w, err);
	E = s->S / es;
	N = (count + E - 1) / E;
	g0 = s->g;
	s->g += N;
	x = xfer_for(s, count * es, X_ALLREDUCE);
	ar_geom(s, 0, E, count, es, &st);
	rc = stamp_put(s, g0, w, err);
	if (rc == 0)
		rc = ar_copy_in(s, g0, &st, send, es, x, w, err);
	if (rc != 0)
		return rc;
	for (k = 0; k < N; k++) {
		uint64_t g = g0 + k;

		probe_begin(s, &pb, x.probe);
		rc = k == 0 ? wait_stamped(s, g, w, err) : shm_wait_all(s, W_IN, g + 1, w, err);
		probe_end(s, &pb, -1, rc);
		if (rc != 0)
			return rc;
		ar_reduce(s, g, &st, send, recv, es, dt, op, x);
		shm_publish(s, &s->ctl[me].red, g + 1);
		/* while the others reduce: the next stage's copy-in */
		if (k + 1 < N) {
			ar_geom(s, k + 1, E, count, es, &nx);
			rc = ar_copy_in(s, g + 1, &nx, send, es, x, w, err);
			if (rc != 0)
				return rc;
		}
		rc = shm_wait_all(s, W_RED, g + 1, w, err);
		if (rc != 0)
			return rc;
		/* every slice from its owner's slot (streamed: mine is in recv) */
		for (q = 0; q < n; q++) {
			size_t qlo = (size_t)q * st.sl < st.m ? (size_t)q * st.sl : st.m;
			size_t qhi = qlo + st.sl < st.m ? qlo + st.sl : st.m;

			if (qhi > qlo && !(q == me && x.nt_in))
				copy_out(recv + (st.c0 + qlo) * es, slot(s, g, q) + qlo * es,
					 (qhi - qlo) * es, nt);
		}
		shm_publish(s, &s->ctl[me].out, g + 1);
		st = nx;
	}
	copy_fence(nt);
	xfer_done(s, &x);
	return end_check(s, err);
}

/* reduce_scatter stage g covers elements [o, o + m) of every block; my
 * slot holds the other ranks' blocks' pieces at q * E. */
static int rs_copy_in(struct dpg_shm *s, uint64_t g, size_t o, size_t m, size_t E,
		      const char *send, size_t rc_count, size_t es, struct xfer x,
		      const struct dpg_shm_wait *w, struct dpg_err *err)
{
	char *mine = slot(s, g, s->me);
	int q, rc = wait_set_free(s, g, w, err);

	if (rc != 0)
		return rc;
	for (q = 0; q < s->n; q++)
		if (q != s->me)
			copy_out(mine + (size_t)q * E * es,
				 send + ((size_t)q * rc_count + o) * es, m * es, x.nt_in);
	copy_fence(x.nt_in);
	publish_in(s, g, x.timed);
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
	struct xfer x = xfer_for(s, rc_count * es * (size_t)s->n, X_REDUCE_SCATTER);
	struct probe pb;
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
		rc = rs_copy_in(s, g0, 0, rc_count < E ? rc_count : E, E, send, rc_count, es, x,
				w, err);
	if (rc != 0)
		return rc;
	for (k = 0; k < N; k++) {
		uint64_t g = g0 + k;
		size_t o = k * E, m = rc_count - o < E ? rc_count - o : E;

		if (k + 1 < N) {	/* run one stage ahead */
			size_t o2 = o + E, m2 = rc_count - o2 < E ? rc_count - o2 : E;

			rc = rs_copy_in(s, g + 1, o2, m2, E, send, rc_count, es, x, w, err);
			if (rc != 0)
				return rc;
		}
		probe_begin(s, &pb, x.probe);
		rc = k == 0 ? wait_stamped(s, g, w, err) : shm_wait_all(s, W_IN, g + 1, w, err);
		probe_end(s, &pb, -1, rc);
		if (rc != 0)
			return rc;
		for (q = 0; q < n; q++)
			s->srcs[q] = q == me ? (const void *)(send + ((size_t)me * rc_count + o) * es)
				: slot(s, g, q) + (size_t)me * E * es;
		dpg_reduce_n(recv + o * es, s->srcs, n, m, dt, op, n);
		shm_publish(s, &s->ctl[me].out, g + 1);
	}
	xfer_done(s, &x);
	return end_check(s, err);
}

/* ------------------------------------------------------------ single copy
 *
 * Calls of all_gather with blocks of at least SHM_CMA_BLOCK_BYTES and of
 * broadcast of at least SHM_CMA_BCAST_BYTES, up to SHM_CMA_MAX_BYTES in
 * all, where every local rank may read every other's memory (cma.h) and the
 * ranks do not outnumber the CPUs, read each block straight from its
 * owner's buffer into their own: one copy instead of two through the
 * slots.  Such a call is one stage: its in carries the buffer's address
 * (in the stage's cell, beside the stamp), its out tells the owner that
 * the buffer has been read, and an owner returns only once every reader's
 * out is in.  A broadcast's root, which would only wait, writes the last
 * 1/n of the buffer into every reader's meanwhile (process_vm_writev), so
 * that both ends copy (cma_root_part; 2 ranks, 4 interleaved rounds, us:
 * 64 KiB / 1 MiB / 4 MiB / 16 MiB took 3-4 / 69-90 / 445-519 / 1916-2194
 * with the readers reading it all, 2-3 / 24-40 / 202-296 / 987-1341 so,
 * Open MPI 5-6 / 69-102 / 408-497 / 1758-2122; at 64 / 256 MiB, where the
 * slots serve, it took about as long as they did).  Whether the ranks can
 * read each other is checked once, on the communicator's first such call,
 * by all of them together (cma_probe): a
 * kernel without cross-memory attach, Yama's ptrace_scope >= 1 (which dpg
 * does not relax) or separate pid namespaces leave the slots in use.
 * Measured on a 2-vCPU Intel Xeon VM (2026-11-28, 3 interleaved rounds):
 * Open MPI's vader reads this way (single_copy_mechanism cma) and took
 * 0.5-0.8x of dpg's time through the slots from 64 KiB to 16 MiB at 2
 * ranks; reading in place took dpg's all_gathers at 64 KiB / 256 KiB /
 * 1 MiB / 16 MiB from 8.4-9.6 / 30-34 / 124-137 / 2136-2950 us to 3.9-4.9 /
 * 12.7-14.2 / 55-107 / 1665-1884.  Above 16 MiB the slots' streaming
 * stores into the user's buffer win (64 MiB: 10.5-14.4 ms against 14.2-
 * 15.9); with 4 ranks on 2 vCPUs the slots won or tied at every size (an
 * owner waits for its readers, who share its CPUs).
 *   The least sizes were 64 KiB in all until a Xeon VM of another model
 * (family 6 model 167, 2026-12-06) showed the slots' two copies behind
 * Open MPI at 16 and 32 KiB: 2 ranks, 6 interleaved rounds, medians, us,
 * slots / in place from 8 KiB / from 16 KiB / Open MPI: broadcast 8 KiB
 * 1.33 / 1.24 / 1.32 / 1.30, 16 KiB 2.04 / 1.33 / 1.39 / 1.54, 32 KiB
 * 2.94 / 1.53 / 1.58 / 2.34; all_gather (in all) 8 KiB 1.14 / 1.34 / 1.15 /
 * 2.02, 16 KiB 1.75 / 1.46 / 1.46 / 2.17, 32 KiB 2.44 / 2.01 / 2.02 / 2.76.
 * So a broadcast reads in place from 8 KiB, an all_gather from blocks of
 * 8 KiB (a reader's call per block: with 8 ranks that is 64 KiB in all,
 * as before; only 2 ranks could be measured on 2 vCPUs). */

/* A stage's cell of local rank q: the stamp, then the single-copy words. */
struct shm_cell {
	struct dpg_stamp stamp;
	_Atomic uint64_t addr;		/* single copy: the owner's buffer */
	_Atomic uint64_t ok;		/* cma_probe: this rank read every peer */
	uint64_t pad[2];
};
_Static_assert(sizeof(struct shm_cell) == SHM_CL, "stage cell size");

static struct shm_cell *cell(struct dpg_shm *s, uint64_t g, int q)
{
	return (struct shm_cell *)(void *)stamp_cell(s, g, q);
}

/* Can every local rank read every other's memory?  One stage: each puts
 * the address of its own mapping of the segment (whose first word is the
 * magic) in its cell, reads every peer's magic through it (in), says
 * whether it could (red), and all take the answer of all (out).  A rank
 * that is configured not to, has no valid pids or shares its CPUs says no
 * without reading, but takes part: all ranks decide alike. */
static int cma_probe(struct dpg_shm *s, const struct dpg_shm_wait *w, struct dpg_err *err)
{
	uint64_t g = s->g++, ok = s->cma_want && !s->oversub;
	int q, rc;

	if ((rc = wait_set_free(s, g, w, err)) != 0)
		return rc;
	atomic_store_explicit(&cell(s, g, s->me)->addr, (uint64_t)(uintptr_t)s->base,
			      memory_order_relaxed);
	shm_publish(s, &s->ctl[s->me].in, g + 1);
	if ((rc = shm_wait_all(s, W_IN, g + 1, w, err)) != 0)
		return rc;
	for (q = 0; q < s->n && ok; q++)
		if (q != s->me && dpg_cma_check(s->pids[q], atomic_load_explicit(
				&cell(s, g, q)->addr, memory_order_relaxed), SHM_MAGIC) != 0)
			ok = 0;
	atomic_store_explicit(&cell(s, g, s->me)->ok, ok, memory_order_relaxed);
	shm_publish(s, &s->ctl[s->me].red, g + 1);
	if ((rc = shm_wait_all(s, W_RED, g + 1, w, err)) != 0)
		return rc;
	for (q = 0; q < s->n; q++)
		ok &= atomic_load_explicit(&cell(s, g, q)->ok, memory_order_relaxed);
	shm_publish(s, &s->ctl[s->me].out, g + 1);
	s->cma = ok ? 1 : -1;
	return 0;
}

/* Whether a copy collective moving `bytes` per rank, of which each owner
 * holds `part` (an all_gather's block, a broadcast's whole buffer), reads
 * in place (*use); the communicator's first such call runs the probe.
 * Every rank derives the same. */
static int cma_use(struct dpg_shm *s, size_t bytes, size_t part, size_t min_part, bool *use,
		   const struct dpg_shm_wait *w, struct dpg_err *err)
{
	int rc;

	*use = false;
	if (s->cma < 0 || part < min_part || bytes > SHM_CMA_MAX_BYTES)
		return 0;
	if (s->cma == 0 && (rc = cma_probe(s, w, err)) != 0)
		return rc;
	*use = s->cma > 0;
	return 0;
}

/* A single copy to or from local rank q's buffer at address a failed with
 * rc (-errno): publish it for the others, its culprit q, and say which. */
static int cma_peer_fail(struct dpg_shm *s, int q, int rc, bool write, size_t len,
			 uint64_t a, struct dpg_err *err)
{
	struct dpg_fail f = { .why = rc == -ESRCH ? DPG_FAIL_EXITED : DPG_FAIL_PROTO,
			      .culprit = s->ranks[q], .reporter = s->self };

	dpg_shm_fail_publish(s, &f);
	if (rc == -ESRCH)
		return dpg_fail_format(&f, s->self, s->hosts, err);
	return dpg_errs(err, DPG_ERR_PEER, "%s %zu bytes %s peer rank %d's (%s) buffer at %#llx "
			"in place: %s", write ? "writing" : "reading", len, write ? "into" : "of", s->ranks[q],
			s->hosts[s->ranks[q]], (unsigned long long)a, strerror(-rc));
}

/* Read local rank q's buffer of stage g (its cell's address) into dst;
 * a failure is published for the others, its culprit q. */
static int cma_get(struct dpg_shm *s, uint64_t g, int q, void *dst, size_t len,
		   struct dpg_err *err)
{
	uint64_t a = atomic_load_explicit(&cell(s, g, q)->addr, memory_order_relaxed);
	int rc = dpg_cma_read(s->pids[q], dst, a, len);

	return rc == 0 ? 0 : cma_peer_fail(s, q, rc, false, len, a, err);
}

/* Stage g of a single-copy call: put our buffer's address in our cell
 * (the stamp is there already), publish in, wait for every rank's in and
 * compare the stamps. */
static int cma_enter(struct dpg_shm *s, uint64_t g, const void *buf,
		     const struct dpg_shm_wait *w, struct dpg_err *err)
{
	int rc = stamp_put(s, g, w, err);

	if (rc == 0)
		rc = wait_set_free(s, g, w, err);
	if (rc != 0)
		return rc;
	atomic_store_explicit(&cell(s, g, s->me)->addr, (uint64_t)(uintptr_t)buf,
			      memory_order_relaxed);
	shm_publish(s, &s->ctl[s->me].in, g + 1);
	return wait_stamped(s, g, w, err);
}

/* We have read what we needed: say so, and wait until every rank has
 * read ours (our buffer may change once we return). */
static int cma_leave(struct dpg_shm *s, uint64_t g, const struct dpg_shm_wait *w,
		     struct dpg_err *err)
{
	int rc;

	publish_done(s, g);
	if ((rc = shm_wait_all(s, W_OUT, g + 1, w, err)) != 0)
		return rc;
	return end_check(s, err);
}

/* A send buffer that overlaps the other ranks' blocks of recv (not just
 * our own) is read from a private copy: we write those blocks while the
 * peers may still read it.  Out of memory, the peers are told (our abort). */
static int cma_own_copy(struct dpg_shm *s, const char *send, size_t bytes, char **copy,
			struct dpg_err *err)
{
	struct dpg_fail f = { .why = DPG_FAIL_ABORTED, .culprit = s->self, .reporter = s->self };

	*copy = malloc(bytes);
	if (*copy != NULL) {
		memcpy(*copy, send, bytes);
		return 0;
	}
	dpg_shm_fail_publish(s, &f);
	return dpg_errs(err, DPG_ERR_NOMEM, "all_gather: out of memory for a copy of a send "
			"buffer that overlaps the other ranks' blocks (%zu bytes)", bytes);
}

static int cma_all_gather(struct dpg_shm *s, const char *send, char *recv, size_t bytes,
			  bool own_direct, const struct dpg_shm_wait *w, struct dpg_err *err)
{
	uint64_t g = s->g++;
	char *mine = recv + (size_t)s->me * bytes, *copy = NULL;
	int q, rc = own_direct ? 0 : cma_own_copy(s, send, bytes, &copy, err);

	if (rc == 0)
		rc = cma_enter(s, g, copy != NULL ? copy : send, w, err);
	if (rc == 0 && send != mine)
		memcpy(mine, copy != NULL ? copy : send, bytes);
	for (q = 0; q < s->n && rc == 0; q++)
		if (q != s->me)
			rc = cma_get(s, g, q, recv + (size_t)q * bytes, bytes, err);
	if (rc == 0)
		rc = cma_leave(s, g, w, err);
	free(copy);
	return rc;
}

/* Write len bytes of our src into local rank q's buffer of stage g at off.
 * A failure is published: its culprit is q, or we are where our own src
 * cannot be read (then the error is ours: an invalid buffer). */
static int cma_put(struct dpg_shm *s, uint64_t g, int q, size_t off, const void *src,
		   size_t len, struct dpg_err *err)
{
	uint64_t a = atomic_load_explicit(&cell(s, g, q)->addr, memory_order_relaxed) + off;
	struct dpg_fail f = { .why = DPG_FAIL_PROTO, .culprit = s->self, .reporter = s->self };
	int rc = dpg_cma_write(s->pids[q], a, src, len);

	if (rc == 0)
		return 0;
	if (rc != -EFAULT || dpg_cma_write(getpid(), (uint64_t)(uintptr_t)src, src, len) == 0)
		return cma_peer_fail(s, q, rc, true, len, a, err);
	/* ours: src over itself (the same bytes) faults too */
	dpg_shm_fail_publish(s, &f);
	return dpg_errs(err, DPG_ERR_INVALID, "broadcast: the root's buffer at %p cannot be "
			"read (%zu bytes at offset %zu): %s",
			(const void *)((const char *)src - off), len, off, strerror(EFAULT));
}

/* The part of a broadcast that its root writes into every reader while the
 * readers read the rest: the last 1/n, in whole pages (the two copies of a
 * reader's buffer share no cache line); the root copies (n-1)/n of the
 * buffer in all, each reader as much. */
static size_t cma_root_part(const struct dpg_shm *s, size_t bytes)
{
	return bytes / (size_t)s->n & ~(size_t)(SHM_CMA_ALIGN - 1);
}

static int cma_broadcast(struct dpg_shm *s, char *buf, size_t bytes, int root,
			 const struct dpg_shm_wait *w, struct dpg_err *err)
{
	uint64_t g = s->g++;
	size_t part = cma_root_part(s, bytes), head = bytes - part;
	int q, rc = cma_enter(s, g, buf, w, err);

	if (rc == 0 && s->me != root)
		rc = cma_get(s, g, root, buf, head, err);
	for (q = 0; rc == 0 && s->me == root && part > 0 && q < s->n; q++)
		if (q != root)
			rc = cma_put(s, g, q, head, buf + head, part, err);
	if (rc != 0)
		return rc;
	return cma_leave(s, g, w, err);
}

int dpg_shm_all_gather(struct dpg_shm *s, const void *sendv, void *recvv,
		       size_t sc, dpg_dtype_t dt, const struct dpg_shm_wait *w,
		       struct dpg_err *err)
{
	const char *send = sendv;
	size_t es = dpg_dtype_size(dt), C = copy_chunk(s, sc * es), E = C / es, k, N;
	char *recv = recvv, *mine = recv + (size_t)s->me * sc * es;
	int n = s->n, me = s->me, q, rc;
	bool nt = sc * es * (size_t)n >= SHM_NT_BYTES;
	/* our own block: nothing to do in place; straight from send unless send
	 * overlaps the others' blocks (then from our slot, once they are out) */
	bool own_direct = send == mine || send + sc * es <= recv ||
			  send >= recv + (size_t)n * sc * es;
	struct xfer x;
	struct probe pb;
	uint64_t g0;
	bool one;

	if (sc == 0)
		return 0;
	if ((rc = cma_use(s, sc * es * (size_t)n, sc * es, SHM_CMA_BLOCK_BYTES, &one, w, err)) != 0)
		return rc;
	if (one)
		return cma_all_gather(s, send, recv, sc * es, own_direct, w, err);
	/* after the choice: a call read in place takes no streaming turn */
	x = xfer_for(s, sc * es * (size_t)n, X_ALL_GATHER);
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
			copy_out(chunk_slot(s, g0 + k, me, C), send + o * es, m * es, x.nt_in);
			copy_fence(x.nt_in);
			publish_in(s, g0 + k, x.timed);
			/* while the peers copy in */
			if (own_direct && send != mine)
				copy_out(mine + o * es, send + o * es, m * es, nt);
		}
		if (k > 0) {
			uint64_t g = g0 + k - 1;
			size_t o = (k - 1) * E, m = sc - o < E ? sc - o : E;

			probe_begin(s, &pb, x.probe);
			rc = k == 1 ? wait_stamped(s, g, w, err) : shm_wait_all(s, W_IN, g + 1, w, err);
			probe_end(s, &pb, -1, rc);
			if (rc != 0)
				return rc;
			for (q = 0; q < n; q++)
				if (q != me || !own_direct)
					copy_out(recv + ((size_t)q * sc + o) * es,
						 chunk_slot(s, g, q, C), m * es, nt);
			shm_publish(s, &s->ctl[me].out, g + 1);
		}
	}
	copy_fence(nt);
	xfer_done(s, &x);
	return end_check(s, err);
}

/* The root's side of a broadcast: copy every stage in; with stamps, after
 * the first stage wait for every rank to arrive and compare.  Its out is
 * published once at the end (no rank waits for it within the call). */
static int bcast_root(struct dpg_shm *s, const char *buf, size_t count, size_t E, size_t es,
		      uint64_t g0, struct xfer x, const struct dpg_shm_wait *w,
		      struct dpg_err *err)
{
	size_t C = E * es;
	size_t o;
	uint64_t g = g0;
	int rc;

	for (o = 0; o < count; o += E, g++) {
		size_t m = count - o < E ? count - o : E;

		rc = wait_set_free(s, g, w, err);
		if (rc != 0)
			return rc;
		copy_out(chunk_slot(s, g, s->me, C), buf + o * es, m * es, x.nt_in);
		copy_fence(x.nt_in);
		publish_in(s, g, x.timed);
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
	size_t es = dpg_dtype_size(dt), C = copy_chunk(s, count * es), E = C / es, o;
	bool nt = count * es >= SHM_NT_BYTES;
	uint64_t g0, g;
	struct xfer x;
	struct probe pb;
	int rc;
	bool one;

	if (count == 0)
		return 0;
	if ((rc = cma_use(s, count * es, count * es, SHM_CMA_BCAST_BYTES, &one, w, err)) != 0)
		return rc;
	if (one)
		return cma_broadcast(s, buf, count * es, root, w, err);
	g0 = s->g;	/* after the probe's stage */
	x = bcast_xfer(s, count * es);
	x.costed = x.costed && s->me == root;	/* the root's copies alone */
	s->g += (count + E - 1) / E;
	rc = stamp_put(s, g0, w, err);
	if (rc == 0 && s->me == root)
		rc = bcast_root(s, buf, count, E, es, g0, x, w, err);
	if (rc == 0 && s->me != root && w->stamp != NULL) {
		/* announce our stamp; every rank compares with every other */
		shm_publish(s, &s->ctl[s->me].in, g0 + 1);
		rc = wait_stamped(s, g0, w, err);
	}
	for (o = 0, g = g0; rc == 0 && s->me != root && o < count; o += E, g++) {
		size_t m = count - o < E ? count - o : E;
		struct wcond c = { .kind = W_ONE_IN, .v = g + 1, .q = root };

		probe_begin(s, &pb, x.probe);
		rc = shm_wait(s, &c, w, 0, err);
		probe_end(s, &pb, root, rc);
		if (rc == 0) {
			copy_out(buf + o * es, chunk_slot(s, g, root, C), m * es, nt);
			publish_done(s, g);
		}
	}
	if (rc != 0)
		return rc;
	copy_fence(nt);
	xfer_done(s, &x);
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
	shm_publish(s, &s->ctl[s->me].in, g + 1);
	rc = wait_stamped(s, g, w, err);
	if (rc != 0)
		return rc;
	publish_done(s, g);
	return end_check(s, err);
}

