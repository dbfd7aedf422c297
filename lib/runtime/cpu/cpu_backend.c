/* SPDX-License-Identifier: BSD-3-Clause */
/* cpu_backend.c - the CPU backend's setup and ops: rendezvous through the
 * store, the ring order, the node segment, the TCP hops, and the dpg_comm_ops
 * that describe each collective to shm.c (direct) or ring.c (the ring).
 *
 * Init is a ladder of phases (dpg_cpu_comm_init, then rendezvous): publish
 * our address and read everyone's, count the machine's CPUs, order the ring
 * node by node, open the node segment, connect the TCP hops, and wait until
 * every rank is ready.  Each phase records its own failure in err.
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
#include <unistd.h>

#include "clock.h"
#include "hello.h"
#include "hops.h"
#include "net.h"
#include "reduce.h"
#include "ring.h"
#include "shm.h"
#include "store.h"

#define CPU_DEFAULT_TIMEOUT_S 300.0
#define CPU_DEFAULT_CHUNK (1u << 20)
/* An allreduce of at most this many bytes per rank over the ring gathers
 * every rank's whole buffer (n - 1 hops) and reduces locally, instead of the
 * reduce-scatter + all-gather ring (2(n - 1) dependent hops): a hop's latency
 * (~4 us one way on loopback TCP) outweighs moving n times the bytes there.
 * With 16 ranks or fewer: 2(n-1)(L + c/nB) > (n-1)(L + c/B) while c < ~LB. */
#define CPU_SMALL_AR_BYTES (16u << 10)
#define CPU_SMALL_AR_RANKS 16
/* All-gathers with blocks up to this many bytes run two-way (ag_steps);
 * with an even number of ranks, up to NE_AG_BYTES by neighbour exchange
 * (n/2 steps instead of the ring's n - 1).  4 ranks on 2 vCPUs (Xeon model
 * 167, 2026-12-06), 5 interleaved rounds, medians, us, ring / exchange /
 * Open MPI: 64 KiB 29.1 / 25.4 / 43.8, 256 KiB 87 / 60 / 131, 1 MiB 602 /
 * 388 / 372, 4 MiB 2502 / 2274 / 2246, 16 MiB 9581 / 10308 / 12297, 64 MiB
 * 45.5 / 47.4 / 58.9 ms (in all): above blocks of 1 MiB the ring's longer
 * pipeline wins. */
#define CPU_TWO_WAY_AG_BYTES (16u << 10)
#define CPU_NE_AG_BYTES (1u << 20)
/* A reduce-scatter of at most this many bytes in all (every block), where
 * every hop is TCP, gathers every input and reduces our block (reduce_gathered):
 * n times the bytes in n/2 messages against the ring's n - 1 hops.  4 ranks
 * on 2 vCPUs, 10 interleaved rounds, medians: 4 / 8 / 16 KiB 46.1 / 50.0 /
 * 54.1 us against 52.0 / 53.2 / 55.8 by the ring (Open MPI 51.1 / 47.7 /
 * 52.4); at 16 KiB another 10 rounds gave 57.9 against 55.2, with slower
 * outliers (the bytes), so 16 KiB stays on the ring. */
#define CPU_SMALL_RS_BYTES (8u << 10)
/* With 4 ranks it runs by exchange instead (reduce_exchanged), up to this
 * size: 4 blocks a rank instead of 3 whole inputs, in the same 2 messages,
 * and 2 messages instead of the ring's 3 hops from 8 KiB on.  4 ranks on 2
 * vCPUs (Xeon), 8 interleaved rounds, medians, us, before / after / Open
 * MPI: 4 KiB 44.6 / 38.4 / 48.1, 16 KiB 54.8 / 40.7 / 54.1, 64 KiB 82.9 /
 * 76.6 / 121.2 (each message whole: ring.c's j->whole); at 256 KiB and 1
 * MiB the exchange took 223 / 981 against the ring's 186 / 801 (6 rounds):
 * a whole message cannot be forwarded piece by piece. */
#define CPU_XCHG_RS_BYTES (64u << 10)
/* Broadcasts of at least this many bytes run in lockstep on TCP hops
 * (ring.c: the sender waits until its reader has entered the call); from
 * DPG_CPU_LOCKSTEP_LOCAL_BYTES where both ranks share a machine (see
 * lockstep_from). */
#define CPU_LOCKSTEP_BYTES (1u << 20)

/* ------------------------------------------------------------ the ops */

static int check_args(struct dpg_cpu *p, const void *a, const void *b, size_t count,
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
	if (dpg_cpu_aborted(p))
		return dpg_ring_fail_abort(p, err);
	return 0;
}

static void shm_wait_init(const struct dpg_cpu *p, struct dpg_shm_wait *w,
			  const struct dpg_stamp *st)
{
	w->start_ns = dpg_now_ns();	/* dpg_now_ms's clock */
	w->deadline_ms = w->start_ns / 1000000 + (int64_t)(p->timeout_s * 1000.0);
	w->abort = p->uabort;
	w->abort2 = (const volatile int *)&p->aborted;
	w->timeout_s = p->timeout_s;
	w->stamp = st;
}

/* What this call is, as the peers check it: the communicator's sequence
 * number (coll.c counts every call, failed argument checks included). */
static void stamp_call(const struct dpg_cpu *p, struct dpg_stamp *st, int kind, size_t count,
		       dpg_dtype_t dt, dpg_op_t op, int root)
{
	dpg_stamp_make(st, p->c->seq, kind, count, dt, op, root);
}

/* Room for the n - 2 partial blocks (ablk elements) of a reduction over
 * 3+ ranks that keeps them apart: one whose partials need a wider type
 * (reduce.h; j->aes set) or a reduce_scatter (rs). */
static int acc_reserve(struct dpg_cpu *p, struct dpg_ring_job *j, size_t ablk, bool rs,
		       struct dpg_err *err)
{
	size_t aes = p->n >= 3 ? dpg_reduce_acc_size(j->dt, j->op) : 0, need;

	j->aes = aes;
	j->ablk = ablk;
	if (p->n < 3 || (aes == 0 && !rs))
		return 0;
	if (aes == 0)
		aes = j->es;
	if (ablk > SIZE_MAX / aes / (size_t)(p->n - 2)) {
		dpg_errf(err, "count %zu too large", ablk);
		return -DPG_ERR_INVALID;
	}
	need = ablk * aes * (size_t)(p->n - 2);
	if (p->acc_cap < need) {
		char *nb = realloc(p->acc, need);

		if (nb == NULL)
			return dpg_errs(err, DPG_ERR_NOMEM, "out of memory (%zu bytes of "
					"partial sums)", need);
		p->acc = nb;
		p->acc_cap = need;
	}
	return 0;
}

static int scratch_reserve(struct dpg_cpu *p, size_t need, struct dpg_err *err)
{
	char *nb;

	if (p->scratch_cap >= need)
		return 0;
	nb = realloc(p->scratch, need);
	if (nb == NULL)
		return dpg_errs(err, DPG_ERR_NOMEM, "out of memory (%zu bytes of scratch)", need);
	p->scratch = nb;
	p->scratch_cap = need;
	return 0;
}

/* Every hop of the ring runs over TCP and there are 3 ranks or more: a
 * broadcast also goes backward from its root (ring.c's two-way jobs), so
 * that it travels at most half way round; so does a small all-gather
 * (below). */
static bool two_way(const struct dpg_cpu *p)
{
	return p->n >= 3 && p->tcp_only;
}

/* An all-gather's steps (the gathered allreduce's too): n - 1 forward; or,
 * two-way with blocks of at most CPU_TWO_WAY_AG_BYTES, n/2 forward and the
 * rest backward, so that the last block arrives after n/2 dependent hops
 * instead of n - 1; with an even n by neighbour exchange (ring.c; blocks
 * up to CPU_NE_AG_BYTES), which sends n/2 messages instead of n - 1 over
 * the same two lanes: 4 ranks on 2
 * vCPUs, 10 interleaved rounds, medians, us: all_gather 4 / 16 KiB 43.0 /
 * 46.5 and 43.3 / 45.9 against 54.2 / 50.3 and 48.1 / 50.4 two-way (Open
 * MPI 50.3 / 51.8 and 52.8 / 51.7), allreduce 4 KiB 48.4 and 49.7 against
 * 57.1 and 51.3.  Before it, two-way against one-way: 4 ranks on 2 vCPUs, 6
 * alternating runs, us: all_gather of 4 / 16 / 64 KiB 46-47 / 48-52 / 61-64
 * against 45-55 / 49-72 / 62-81 one-way, allreduce of 4 KiB 50-52 against
 * 50-63; 256 KiB 114-147 against 120-127 and 1 MiB 363-423 against 326-477
 * (so larger blocks stay one-way); 3 and 5 ranks within the noise. */
static void ag_steps(const struct dpg_cpu *p, struct dpg_ring_job *j)
{
	size_t blk = j->count * j->es;

	j->T_out = j->T_in = p->n - 1;
	j->dep = 1;
	j->out0_free = true;
	if (!two_way(p) || blk > (p->n % 2 == 0 ? CPU_NE_AG_BYTES : CPU_TWO_WAY_AG_BYTES))
		return;
	if (p->n % 2 == 0) {
		/* a neighbour exchange (ring.c): n/2 steps, the even ones on
		 * the lane our own block starts on */
		int s = p->n / 2, first = (s + 1) / 2, second = s / 2;
		bool even = p->pos % 2 == 0;

		j->ne = true;
		/* small blocks one segment a message: 4 ranks on 2 vCPUs, 8
		 * interleaved rounds, us: all_gather 4 / 16 KiB 43.0 / 44.7
		 * -> 38.1 / 39.1 (Open MPI 47.8 / 53.9), allreduce 4 KiB 41.0
		 * -> 39.6; larger ones forwarded piece by piece */
		j->whole = blk <= CPU_TWO_WAY_AG_BYTES;
		j->T_out = j->B_in = even ? first : second;
		j->T_in = j->B_out = even ? second : first;
		return;
	}
	j->T_out = j->T_in = p->n / 2;
	j->B_out = j->B_in = p->n - 1 - p->n / 2;
}

/* A small collective over the ring: gather every rank's whole input (count
 * elements) into scratch in rank order (ag_steps), then reduce out elements
 * from element off of the n inputs locally, left to right in rank order and
 * rounded once (reduce.h), so every rank computes the same bits: the small
 * allreduce (off 0, out = count) and, where every hop is TCP, the small
 * reduce-scatter (our block: CPU_SMALL_RS_BYTES).  j arrives with its stamp
 * set (the caller's call, which the peers check). */
static int reduce_gathered(struct dpg_cpu *p, struct dpg_ring_job *j, const void *send,
			   void *recv, size_t count, size_t off, size_t out, dpg_dtype_t dt,
			   dpg_op_t op, struct dpg_err *err)
{
	size_t es = dpg_dtype_size(dt), bytes = count * es;
	const void *src[CPU_SMALL_AR_RANKS];
	int q, rc;

	rc = scratch_reserve(p, bytes * (size_t)p->n, err);
	if (rc != 0)
		return rc;
	memcpy(p->scratch + (size_t)p->rank * bytes, send, bytes);
	j->kind = DPG_JOB_AG;
	j->recv = p->scratch;
	j->count = count;
	j->es = es;
	j->dt = dt;
	ag_steps(p, j);
	rc = dpg_ring_run(p, j, err);
	if (rc != 0)
		return rc;
	for (q = 0; q < p->n; q++)
		src[q] = p->scratch + (size_t)q * bytes + off * es;
	dpg_reduce_n(recv, src, p->n, out, dt, op, p->n);
	return 0;
}

/* A small reduce-scatter of 4 ranks where every hop is TCP, in two steps
 * of one message a rank (the neighbour exchange's, ring.c's DPG_JOB_XCHG)
 * that carry only the blocks each rank reduces: it sends its neighbour on
 * the lane its own block starts on (forward at an even position, d = 1;
 * backward at an odd one, d = -1) its inputs for the rank 2d away and for
 * that neighbour, farthest first; on the other lane its input for the
 * neighbour -d, then the front of what comes in from +d on that lane (the
 * input of +d for -d; the block behind it is ours).  Each rank takes 4
 * blocks where the gathered way takes 3 whole inputs (12 blocks), and
 * reduces its own block's 4 inputs left to right in rank order, rounded
 * once, as reduce_gathered does: the same bits.  Scratch, in blocks:
 * A (0-1) the first lane's message, B (2-4) our block for -d then what +d
 * sends (the second lane's message is B's first two blocks), C (5-6) what
 * -d sends on the first lane (its input for us, then -2d's), our own input
 * (7). */
static int reduce_exchanged(struct dpg_cpu *p, struct dpg_ring_job *j, const void *send,
			    void *recv, size_t count, dpg_dtype_t dt, dpg_op_t op,
			    struct dpg_err *err)
{
	size_t es = dpg_dtype_size(dt), blk = count * es;
	const char *in = send;
	const void *src[4];
	int d = p->pos % 2 == 0 ? 1 : -1, rc;
	char *A, *B, *C;
	struct dpg_ring_lane first, second;

#define XBLK(k) (in + (size_t)p->ring[dpg_ring_mod(p->pos + (k), 4)] * blk)
	rc = scratch_reserve(p, 8 * blk, err);
	if (rc != 0)
		return rc;
	A = p->scratch;
	B = A + 2 * blk;
	C = B + 3 * blk;
	memcpy(A, XBLK(2 * d), blk);
	memcpy(A + blk, XBLK(d), blk);
	memcpy(B, XBLK(-d), blk);
	memcpy(C + 2 * blk, XBLK(0), blk);
#undef XBLK
	first = (struct dpg_ring_lane){ .src = A, .out_len = 2 * blk, .dst = C,
					.in_len = 2 * blk };
	second = (struct dpg_ring_lane){ .src = B, .out_len = 2 * blk, .own = blk,
					 .dst = B + blk, .in_len = 2 * blk };
	j->kind = DPG_JOB_XCHG;
	j->count = count;
	j->es = es;
	j->dt = dt;
	j->ne = true;
	j->whole = true;
	j->T_out = j->T_in = j->B_out = j->B_in = 1;
	j->x[0] = d == 1 ? first : second;
	j->x[1] = d == 1 ? second : first;
	rc = dpg_ring_run(p, j, err);
	if (rc != 0)
		return rc;
	src[p->rank] = C + 2 * blk;
	src[p->ring[dpg_ring_mod(p->pos + d, 4)]] = B + 2 * blk;
	src[p->ring[dpg_ring_mod(p->pos - d, 4)]] = C;
	src[p->ring[dpg_ring_mod(p->pos + 2, 4)]] = C + blk;
	dpg_reduce_n(recv, src, 4, count, dt, op, 4);
	return 0;
}

/* A reduce-scatter around the ring (n - 1 steps) into recv, our block
 * (recvcount elements; with j->base set, dpg_ring_block's); j arrives with its
 * stamp set (the caller's call). */
static int rs_ring(struct dpg_cpu *p, struct dpg_ring_job *j, const void *send, void *recv,
		   size_t recvcount, dpg_dtype_t dt, dpg_op_t op, struct dpg_err *err)
{
	size_t es = dpg_dtype_size(dt), off, blk, total;
	const char *sb = send, *rb = recv;
	bool alias;
	int rc;

	j->count = recvcount;
	j->es = es;
	dpg_ring_block(j, p->rank, &off, &blk);
	total = j->base == 0 ? blk * (size_t)p->n : (j->base * (size_t)p->n + j->rem) * es;
	/* recv inside send but not at our own block (e.g. recv == send): the
	 * ring still sends from send while the result arrives, so the result
	 * goes to scratch and is copied at the end */
	alias = rb + blk > sb && rb < sb + total && rb != sb + off;

	rc = scratch_reserve(p, alias ? blk : 0, err);
	if (rc != 0)
		return rc;
	j->kind = DPG_JOB_RS;
	j->send = send;
	j->recv = recv;
	j->rs_final = alias ? p->scratch : recv;
	j->count = recvcount;
	j->es = es;
	j->dt = dt;
	j->op = op;
	j->T_out = j->T_in = p->n - 1;
	j->dep = 1;
	j->out0_free = true;
	rc = acc_reserve(p, j, j->base == 0 ? recvcount : j->base + (j->rem > 0), true, err);
	if (rc == 0)
		rc = dpg_ring_run(p, j, err);
	if (rc == 0 && alias)
		memcpy(recv, j->rs_final, blk);
	return rc;
}

/* An all-gather of count elements a rank (with j->base set, dpg_ring_block's
 * blocks, count the largest) in place in recv (our block there already);
 * j arrives with its stamp set. */
static int ag_ring(struct dpg_cpu *p, struct dpg_ring_job *j, void *recv, size_t count,
		   dpg_dtype_t dt, struct dpg_err *err)
{
	j->kind = DPG_JOB_AG;
	j->recv = recv;
	j->count = count;
	j->es = dpg_dtype_size(dt);
	j->dt = dt;
	ag_steps(p, j);
	return dpg_ring_run(p, j, err);
}

/* An allreduce over TCP hops with an even number of ranks and blocks the
 * neighbour exchange takes (CPU_NE_AG_BYTES): the ring's reduce-scatter
 * into our block of recv, then the exchange's all-gather (n/2 steps where
 * the ring's all-gather half takes n - 1), both under the call's stamp;
 * blocks as the one ring's (the first count % n one element longer), so
 * that any count of at least n elements a rank takes it.
 * 4 ranks on 2 vCPUs (Xeon model 167, 2026-12-06), 12 interleaved rounds,
 * medians, us, one ring / split / Open MPI: 1 MiB 1361 / 1081 / 1166, 4
 * MiB 6373 / 6106 / 5708; 256 KiB 197-199 / 180-181 (Open MPI 299-358);
 * 16 MiB 22.4-24.6 / 23.6-24.4 ms, so larger calls keep the one ring. */
static bool split_allreduce(const struct dpg_cpu *p, size_t count, size_t es)
{
	size_t n = (size_t)p->n;

	return two_way(p) && n % 2 == 0 && count >= n &&
	       (count / n + (count % n > 0)) * es <= CPU_NE_AG_BYTES;
}

static int allreduce_split(struct dpg_cpu *p, struct dpg_ring_job *j, const void *send,
			   void *recv, size_t count, dpg_dtype_t dt, dpg_op_t op,
			   struct dpg_err *err)
{
	size_t base = count / (size_t)p->n, rem = count % (size_t)p->n, off, len;
	struct dpg_stamp st = j->stamp;
	int rc;

	j->base = base;
	j->rem = rem;
	j->es = dpg_dtype_size(dt);
	dpg_ring_block(j, p->rank, &off, &len);
	rc = rs_ring(p, j, send, (char *)recv + off, len / dpg_dtype_size(dt), dt, op, err);
	if (rc != 0)
		return rc;
	memset(j, 0, sizeof(*j));
	j->stamp = st;
	j->base = base;
	j->rem = rem;
	return ag_ring(p, j, recv, base + (rem > 0), dt, err);
}

static int cpu_allreduce(struct dpg_comm *c, const void *send, void *recv, size_t count,
			 dpg_dtype_t dt, dpg_op_t op, void *stream, struct dpg_err *err)
{
	struct dpg_cpu *p = c->impl;
	size_t es = dpg_dtype_size(dt);
	struct dpg_ring_job j;
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
	memset(&j, 0, sizeof(j));
	stamp_call(p, &j.stamp, DPG_STAMP_ALLREDUCE, count, dt, op, -1);
	if (p->direct) {
		struct dpg_shm_wait w;

		shm_wait_init(p, &w, &j.stamp);
		rc = dpg_shm_allreduce(p->shm, send, recv, count, dt, op, &w, err);
		return rc != 0 ? dpg_ring_fail_shm(p, rc, err) : 0;
	}
	if (count * es <= CPU_SMALL_AR_BYTES && p->n <= CPU_SMALL_AR_RANKS)
		return reduce_gathered(p, &j, send, recv, count, 0, count, dt, op, err);
	if (split_allreduce(p, count, es))
		return allreduce_split(p, &j, send, recv, count, dt, op, err);
	j.kind = DPG_JOB_ALLREDUCE;
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
	rc = acc_reserve(p, &j, j.base + (j.rem > 0), false, err);
	return rc != 0 ? rc : dpg_ring_run(p, &j, err);
}

static int cpu_reduce_scatter(struct dpg_comm *c, const void *send, void *recv,
			      size_t recvcount, dpg_dtype_t dt, dpg_op_t op, void *stream,
			      struct dpg_err *err)
{
	struct dpg_cpu *p = c->impl;
	size_t es = dpg_dtype_size(dt);
	struct dpg_ring_job j;
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
	memset(&j, 0, sizeof(j));
	stamp_call(p, &j.stamp, DPG_STAMP_REDUCE_SCATTER, recvcount, dt, op, -1);
	if (p->direct) {
		struct dpg_shm_wait w;

		shm_wait_init(p, &w, &j.stamp);
		rc = dpg_shm_reduce_scatter(p->shm, send, recv, recvcount, dt, op, &w, err);
		return rc != 0 ? dpg_ring_fail_shm(p, rc, err) : 0;
	}
	if (two_way(p) && p->n == 4 && recvcount * es * 4 <= CPU_XCHG_RS_BYTES)
		return reduce_exchanged(p, &j, send, recv, recvcount, dt, op, err);
	if (two_way(p) && recvcount * es * (size_t)p->n <= CPU_SMALL_RS_BYTES &&
	    p->n <= CPU_SMALL_AR_RANKS)
		return reduce_gathered(p, &j, send, recv, recvcount * (size_t)p->n,
				       (size_t)p->rank * recvcount, recvcount, dt, op, err);
	return rs_ring(p, &j, send, recv, recvcount, dt, op, err);
}

static int cpu_all_gather(struct dpg_comm *c, const void *send, void *recv, size_t sendcount,
			  dpg_dtype_t dt, void *stream, struct dpg_err *err)
{
	struct dpg_cpu *p = c->impl;
	size_t es = dpg_dtype_size(dt), bytes = sendcount * es;
	char *mine = (char *)recv + (size_t)p->rank * bytes;
	struct dpg_ring_job j;
	int rc;

	(void)stream;
	rc = check_args(p, send, recv, sendcount, dt, DPG_SUM, false, err);
	if (rc != 0 || sendcount == 0)
		return rc;
	memset(&j, 0, sizeof(j));
	stamp_call(p, &j.stamp, DPG_STAMP_ALL_GATHER, sendcount, dt, DPG_SUM, -1);
	if (p->direct) {
		struct dpg_shm_wait w;

		shm_wait_init(p, &w, &j.stamp);
		rc = dpg_shm_all_gather(p->shm, send, recv, sendcount, dt, &w, err);
		return rc != 0 ? dpg_ring_fail_shm(p, rc, err) : 0;
	}
	if ((const char *)send != mine)
		memmove(mine, send, bytes);
	if (p->n == 1)
		return 0;
	return ag_ring(p, &j, recv, sendcount, dt, err);
}

static int cpu_broadcast(struct dpg_comm *c, void *buf, size_t count, dpg_dtype_t dt,
			 int root, void *stream, struct dpg_err *err)
{
	struct dpg_cpu *p = c->impl;
	struct dpg_ring_job j;
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
	memset(&j, 0, sizeof(j));
	stamp_call(p, &j.stamp, DPG_STAMP_BROADCAST, count, dt, DPG_SUM, root);
	if (p->direct) {
		struct dpg_shm_wait w;

		shm_wait_init(p, &w, &j.stamp);
		rc = dpg_shm_broadcast(p->shm, buf, count, dt, root, &w, err);
		return rc != 0 ? dpg_ring_fail_shm(p, rc, err) : 0;
	}
	for (rpos = 0; p->ring[rpos] != root; rpos++)
		;
	d = dpg_ring_mod(p->pos - rpos, p->n);	/* hops from the root */
	j.kind = DPG_JOB_BCAST;
	j.recv = buf;
	j.count = count;
	j.es = dpg_dtype_size(dt);
	j.dt = dt;
	j.T_out = d < p->n - 1 ? 1 : 0;
	j.T_in = d > 0 ? 1 : 0;
	if (two_way(p)) {
		/* forward to the ranks d = 1 .. F, backward to d = n-1 .. F+1 */
		int F = p->n / 2, e = d == 0 ? 0 : p->n - d;

		j.T_out = d < F ? 1 : 0;
		j.T_in = d > 0 && d <= F ? 1 : 0;
		j.B_out = d == 0 || d > F ? (e < p->n - 1 - F ? 1 : 0) : 0;
		j.B_in = d > F ? 1 : 0;
	}
	j.dep = 0;
	j.out0_free = d == 0;
	j.lock = count * j.es >= p->lockstep;
	if (j.lock) {
		/* forward TCP hops (their backward lane is idle: B_in / B_out
		 * are 0 on both ends of a forward hop) */
		j.tok_in = j.T_out > 0 && j.B_in == 0 && p->next.kind == DPG_LINK_TCP;
		j.tok_out = j.T_in > 0 && j.B_out == 0 && p->prev.kind == DPG_LINK_TCP;
	}
	return dpg_ring_run(p, &j, err);
}

static int cpu_barrier(struct dpg_comm *c, struct dpg_err *err)
{
	struct dpg_cpu *p = c->impl;
	struct dpg_ring_job j;
	int rc;

	rc = check_args(p, p, p, 0, DPG_I32, DPG_SUM, true, err);
	if (rc != 0 || p->n == 1)
		return rc;
	memset(&j, 0, sizeof(j));
	stamp_call(p, &j.stamp, DPG_STAMP_BARRIER, 0, DPG_I32, DPG_SUM, -1);
	if (p->direct) {
		struct dpg_shm_wait w;

		shm_wait_init(p, &w, &j.stamp);
		rc = dpg_shm_barrier(p->shm, &w, err);
		return rc != 0 ? dpg_ring_fail_shm(p, rc, err) : 0;
	}
	/* an allreduce of one int per rank: every step carries data */
	memset(p->barbuf, 0, (size_t)p->n * sizeof(*p->barbuf));
	j.kind = DPG_JOB_ALLREDUCE;
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
	return dpg_ring_run(p, &j, err);
}

static void cpu_abort(struct dpg_comm *c)
{
	struct dpg_cpu *p = c->impl;
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

static void cpu_free(struct dpg_cpu *p)
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
	free(p->acc);
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

static uint64_t pidns_inode(void)
{
	struct stat st;

	return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

static int nomem(struct dpg_err *err)
{
	return dpg_errs(err, DPG_ERR_NOMEM, "cpu backend: out of memory");
}

static int check_opts(const struct dpg_comm *c, const struct dpg_backend_args *o,
		      struct dpg_err *err)
{
	int n = c->size;

	if (n < 1 || c->rank < 0 || c->rank >= n || o == NULL || o->host == NULL ||
	    o->node == NULL || (n > 1 && o->store == NULL))
		return dpg_errs(err, DPG_ERR_INVALID,
				"cpu backend: bad arguments (rank %d, size %d)", c->rank, n);
	if (strlen(o->host) >= DPG_CPU_HOST_MAX || strlen(o->node) >= DPG_CPU_HOST_MAX)
		return dpg_errs(err, DPG_ERR_INVALID,
				"cpu backend: host or node name longer than %d bytes",
				DPG_CPU_HOST_MAX - 1);
	return 0;
}

/* The communicator with its options, arrays and abort eventfd, unconnected. */
static int cpu_new(struct dpg_comm *c, const struct dpg_backend_args *o, struct dpg_cpu **out,
		   struct dpg_err *err)
{
	struct dpg_cpu *p = calloc(1, sizeof(*p));
	int n = c->size;

	*out = NULL;
	if (p == NULL)
		return nomem(err);
	p->c = c;
	p->n = n;
	p->rank = c->rank;
	p->next.fd = p->next.cfd = p->prev.fd = p->prev.cfd = -1;
	p->next.peer = p->prev.peer = -1;
	p->efd = -1;
	p->uabort = o->abort;
	p->timeout_s = o->timeout_s > 0 ? o->timeout_s : CPU_DEFAULT_TIMEOUT_S;
	p->chunk = o->tcp_chunk_bytes > 0 ? o->tcp_chunk_bytes : CPU_DEFAULT_CHUNK;
	p->lockstep = o->tcp_lockstep_bytes;	/* 0: count_cpus decides */
	p->hosts = calloc((size_t)n, sizeof(*p->hosts));
	p->ring = calloc((size_t)n, sizeof(*p->ring));
	p->barbuf = calloc((size_t)n, sizeof(*p->barbuf));
	if (p->hosts == NULL || p->ring == NULL || p->barbuf == NULL) {
		cpu_free(p);
		return nomem(err);
	}
	p->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (p->efd < 0) {
		int rc = dpg_errs(err, DPG_ERR_SYSTEM, "eventfd: %s", strerror(errno));

		cpu_free(p);
		return rc;
	}
	*out = p;
	return 0;
}

/* A communicator of one rank: nothing to connect. */
static int solo(struct dpg_cpu *p, const struct dpg_backend_args *o, struct dpg_err *err)
{
	p->hosts[0] = strdup(o->host);
	return p->hosts[0] != NULL ? 0 : nomem(err);
}

/* What the rendezvous works with; freed (rdv_fini) when init ends. */
struct rdv {
	const struct dpg_backend_args *o;
	const char *name;		/* the communicator's store prefix */
	int64_t deadline;
	int lfd;			/* our listen socket, -1 once closed */
	struct dpg_cpu_wire mine;
	struct dpg_cpu_wire *all;		/* comm rank -> its address record */
	int *node_id;			/* comm rank -> lowest rank on its node */
	int nlocal, lrank;		/* ranks on this node; our index among them */
	int *lranks;			/* local index -> comm rank */
	pid_t *lpids;			/* local index -> pid */
	bool pid_ok;			/* those pids are valid here */
	bool oversub;			/* this machine's ranks outnumber its CPUs */
};

static int rdv_init(struct rdv *x, const struct dpg_cpu *p, const struct dpg_backend_args *o,
		    struct dpg_err *err)
{
	size_t n = (size_t)p->n;

	memset(x, 0, sizeof(*x));
	x->o = o;
	x->name = p->c->name;
	x->deadline = dpg_now_ms() + (int64_t)(p->timeout_s * 1000.0);
	x->lfd = -1;
	x->lrank = -1;
	x->pid_ok = true;
	x->all = calloc(n, sizeof(*x->all));
	x->node_id = calloc(n, sizeof(*x->node_id));
	x->lranks = calloc(n, sizeof(*x->lranks));
	x->lpids = calloc(n, sizeof(*x->lpids));
	if (x->all == NULL || x->node_id == NULL || x->lranks == NULL || x->lpids == NULL)
		return nomem(err);
	return 0;
}

static void rdv_fini(struct rdv *x)
{
	if (x->lfd >= 0)
		close(x->lfd);
	x->lfd = -1;
	free(x->all);
	free(x->node_id);
	free(x->lranks);
	free(x->lpids);
}

/* Listen, and publish our address record under "<name>/cpu/<rank>". */
static int publish_address(struct dpg_cpu *p, struct rdv *x, struct dpg_err *err)
{
	struct dpg_cpu_wire *m = &x->mine;
	char key[DPG_STORE_KEY_MAX];
	uint16_t port = 0;
	int rc;

	/* a long backlog: strangers' connections must not crowd out a peer's */
	rc = dpg_net_listen(NULL, 0, SOMAXCONN, &x->lfd, &port, err);
	if (rc != 0)
		return rc;
	memcpy(m->magic, DPG_CPU_WIRE_MAGIC, sizeof(m->magic));
	m->port = port;
	m->pid = (int32_t)getpid();
	if (getrandom(&m->token, sizeof(m->token), 0) != (ssize_t)sizeof(m->token))
		return dpg_errs(err, DPG_ERR_SYSTEM, "cpu backend: getrandom: %s",
				strerror(errno));
	m->pidns = pidns_inode();
	cpu_mask(m->cpus);
	if (gethostname(m->uts, sizeof(m->uts)) != 0)
		m->uts[0] = '\0';
	m->uts[sizeof(m->uts) - 1] = '\0';
	snprintf(m->host, sizeof(m->host), "%s", x->o->host);
	snprintf(m->node, sizeof(m->node), "%s", x->o->node);
	snprintf(key, sizeof(key), "%s/cpu/%d", x->name, p->rank);
	rc = dpg_store_set(x->o->store, key, m, sizeof(*m), x->deadline, err);
	if (rc != 0)
		dpg_err_prefix(err, "cpu backend: publishing the address");
	return rc;
}

/* Rank r's address record into x->all[r]. */
static int read_address(struct rdv *x, int r, struct dpg_err *err)
{
	struct dpg_cpu_wire *w = &x->all[r];
	char key[DPG_STORE_KEY_MAX];
	void *val = NULL;
	size_t len = 0;
	int rc;

	snprintf(key, sizeof(key), "%s/cpu/%d", x->name, r);
	rc = dpg_store_get(x->o->store, key, &val, &len, x->deadline, err);
	if (rc != 0) {
		char pfx[64];

		snprintf(pfx, sizeof(pfx), "cpu backend: address of rank %d", r);
		dpg_err_prefix(err, pfx);
		return rc;
	}
	if (len != sizeof(*w) || memcmp(val, DPG_CPU_WIRE_MAGIC, sizeof(w->magic)) != 0) {
		free(val);
		return dpg_errs(err, DPG_ERR_PEER, "cpu backend: rank %d published a bad "
				"address record (another libdpg version?)", r);
	}
	memcpy(w, val, sizeof(*w));
	free(val);
	w->host[DPG_CPU_HOST_MAX - 1] = '\0';
	w->uts[sizeof(w->uts) - 1] = '\0';
	w->node[DPG_CPU_HOST_MAX - 1] = '\0';
	return 0;
}

/* Everyone's address record, and every rank's host for messages. */
static int read_addresses(struct dpg_cpu *p, struct rdv *x, struct dpg_err *err)
{
	int r, rc;

	for (r = 0; r < p->n; r++) {
		if (r == p->rank) {
			x->all[r] = x->mine;
			continue;
		}
		rc = read_address(x, r, err);
		if (rc != 0)
			return rc;
	}
	for (r = 0; r < p->n; r++) {
		p->hosts[r] = strdup(x->all[r].host);
		if (p->hosts[r] == NULL)
			return nomem(err);
	}
	return 0;
}

/* Whether the ranks on the physical machine `uts` outnumber the CPUs they
 * may use (the same answer on every rank: it reads the exchanged records). */
static bool machine_oversub(const struct dpg_cpu *p, const struct rdv *x, const char *uts)
{
	uint64_t u[16] = { 0 };
	int r, k, here = 0, cpus = 0;

	for (r = 0; r < p->n; r++)
		if (strcmp(x->all[r].uts, uts) == 0) {
			here++;
			for (k = 0; k < 16; k++)
				u[k] |= x->all[r].cpus[k];
		}
	for (k = 0; k < 16; k++)
		cpus += __builtin_popcountll(u[k]);
	return here > cpus;
}

/* Large broadcasts run in lockstep (ring.c) by default only where it was
 * measured to pay: 2 ranks, no machine oversubscribed (2 ranks over TCP on
 * 2 vCPUs, autotuned send buffers, 6 interleaved rounds, medians, us: 1 /
 * 4 / 16 MiB 135 / 624 / 2810 against 167 / 769 / 3162 streaming, Open MPI
 * 130 / 604 / 2888; 64 / 256 KiB 23.5 / 45.8 against 12.3 / 38.2, so
 * smaller ones stream; 4 ranks on 2 vCPUs, two-way, 5 rounds: 1-16 MiB
 * 6-14% slower, so not there).  Two ranks of one machine share a hop with
 * a fixed send buffer (set_sock), which keeps a streaming root from
 * running ahead: there streaming took 0.87-0.91x the lockstep's time at
 * 1-8 MiB and 1.03-1.06x at 16 MiB (AMD EPYC family 26, 8 interleaved
 * rounds, each round's ratio's median), so such pairs lock from 16 MiB.
 * Every rank must decide alike (a sender waits for a token its reader
 * sends), hence the rule reads only the exchanged records: both machines'
 * counts and names. */
static size_t lockstep_from(struct dpg_cpu *p, const struct rdv *x)
{
	if (p->n != 2 || machine_oversub(p, x, x->all[0].uts) ||
	    machine_oversub(p, x, x->all[1].uts))
		return SIZE_MAX;
	return strcmp(x->all[0].uts, x->all[1].uts) == 0 ? DPG_CPU_LOCKSTEP_LOCAL_BYTES
							  : CPU_LOCKSTEP_BYTES;
}

/* Waits must not spin where this machine's ranks outnumber its CPUs (e.g.
 * 4 ranks on 2 cores); the lockstep's threshold (see lockstep_from). */
static void count_cpus(struct dpg_cpu *p, struct rdv *x)
{
	x->oversub = machine_oversub(p, x, x->mine.uts);
	p->tcp_spin = !x->oversub;
	if (p->lockstep == 0)
		p->lockstep = lockstep_from(p, x);
}

/* Nodes in order of their lowest rank; the ring visits node by node. */
static void order_ring(struct dpg_cpu *p, struct rdv *x)
{
	int n = p->n, r, i, k = 0, nd;

	for (r = 0; r < n; r++) {
		x->node_id[r] = r;
		for (i = 0; i < r; i++)
			if (strcmp(x->all[i].node, x->all[r].node) == 0) {
				x->node_id[r] = x->node_id[i];
				break;
			}
	}
	for (nd = 0; nd < n; nd++)
		for (r = 0; r < n; r++)
			if (x->node_id[r] == nd)
				p->ring[k++] = r;
	for (i = 0; i < n; i++)
		if (p->ring[i] == p->rank)
			p->pos = i;
	/* every rank on a node of its own: every hop is TCP (the same answer
	 * on every rank: the two-way jobs need all to agree) */
	p->tcp_only = true;
	for (r = 0; r < n; r++)
		p->tcp_only = p->tcp_only && x->node_id[r] == r;
	p->next.peer = p->ring[(p->pos + 1) % n];
	p->prev.peer = p->ring[(p->pos + n - 1) % n];
	p->next.kind = x->node_id[p->next.peer] == x->node_id[p->rank] ? DPG_LINK_SHM
									: DPG_LINK_TCP;
	p->prev.kind = x->node_id[p->prev.peer] == x->node_id[p->rank] ? DPG_LINK_SHM
									: DPG_LINK_TCP;
}

/* The ranks of our node (and whether their pids mean anything here); all
 * of the communicator on one node runs shm.c's direct algorithms. */
static void find_local(struct dpg_cpu *p, struct rdv *x)
{
	int r;

	for (r = 0; r < p->n; r++)
		if (x->node_id[r] == x->node_id[p->rank]) {
			if (r == p->rank)
				x->lrank = x->nlocal;
			x->lranks[x->nlocal] = r;
			x->lpids[x->nlocal] = x->all[r].pid;
			if (x->all[r].pidns != x->mine.pidns || x->mine.pidns == 0)
				x->pid_ok = false;
			x->nlocal++;
		}
	p->direct = x->nlocal == p->n && !(x->o->flags & DPG_CPU_RING);
}

/* The node segment, when this node has another rank of ours. */
static int open_segment(struct dpg_cpu *p, const struct rdv *x, struct dpg_err *err)
{
	struct dpg_shm_cfg sc;
	char key[DPG_STORE_KEY_MAX];
	int i, rc;

	if (x->nlocal < 2)
		return 0;
	memset(&sc, 0, sizeof(sc));
	sc.mode = p->direct ? DPG_SHM_DIRECT : DPG_SHM_PIPES;
	sc.nlocal = x->nlocal;
	sc.lrank = x->lrank;
	sc.nranks = p->n;	/* bounds the failure word's rank indices */
	sc.ranks = x->lranks;
	sc.pids = x->lpids;
	sc.pid_ok = x->pid_ok;
	sc.hosts = (const char *const *)p->hosts;
	sc.self = p->rank;
	sc.slot_bytes = x->o->shm_slot_bytes;
	sc.oversub = x->oversub ? 1 : 0;
	sc.stream = x->o->flags & DPG_CPU_STREAM ? 1 : x->o->flags & DPG_CPU_NO_STREAM ? -1 : 0;
	sc.cma = x->o->flags & DPG_CPU_NO_CMA ? -1 : 0;
	sc.pipe_to = sc.pipe_from = -1;
	for (i = 0; i < x->nlocal && !p->direct; i++) {
		if (x->lranks[i] == p->next.peer && p->next.kind == DPG_LINK_SHM)
			sc.pipe_to = i;
		if (x->lranks[i] == p->prev.peer && p->prev.kind == DPG_LINK_SHM)
			sc.pipe_from = i;
	}
	sc.store = x->o->store;
	snprintf(key, sizeof(key), "%s/cpu/shm/%d", x->name, x->lranks[0]);
	sc.key = key;
	sc.deadline_ms = x->deadline;
	sc.abort = x->o->abort;
	rc = dpg_shm_open(&p->shm, &sc, err);
	if (rc != 0)
		dpg_err_prefix(err, "cpu backend");
	return rc;
}

/* DPG_CPU_LOCAL_SNDBUF: a hop between two ranks of one machine (the same
 * uts) is a memory copy through the kernel: the receiver copies out what
 * the sender copied in, and the less of it is in flight, the more of it is
 * still in cache when read.  Autotuning grows a loopback socket's send
 * buffer towards wmem_max (4 MiB on Debian), so such hops get a fixed one
 * (the kernel doubles it: 256 KiB in flight).  4 ranks over TCP on 2 vCPUs
 * (Xeon model 167, one run each, us, autotuned / 128 KiB): all_gather 4 MiB
 * 2327 / 1251, allreduce 4 MiB 5361 / 2981, broadcast 4 MiB 2614 / 1802;
 * 2 ranks: allreduce 16 MiB 9411 / 4560, broadcast 64 MiB 17514 / 12130.
 * Other sizes asked, 4 ranks, all_gather / allreduce 4 MiB: 64 KiB 1302 /
 * 3255, 256 KiB 1666 / 3888, 512 KiB 1658 / 4417; 32 KiB made every call
 * 100-600x slower (a sender waiting on acknowledgements), 64 KiB once
 * stalled a 16 MiB broadcast (32.7 ms against 7.5), so where wmem_max
 * would cap the buffer below it the hops autotune.  Hops between machines
 * keep autotuning: a network's bandwidth-delay product needs the room. */
static int set_sock(int fd, bool local)
{
	int one = 1, sndbuf = DPG_CPU_LOCAL_SNDBUF;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
		return -1;
	if (local && setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)) != 0)
		return -1;
	return dpg_net_set_nonblock(fd, true);
}

/* The kernel grants DPG_CPU_LOCAL_SNDBUF (wmem_max caps SO_SNDBUF; a
 * smaller buffer is worse than autotuning: see set_sock). */
static bool local_sndbuf_ok(void)
{
	FILE *f = fopen("/proc/sys/net/core/wmem_max", "r");
	long max = 0;

	if (f == NULL)
		return false;
	if (fscanf(f, "%ld", &max) != 1)
		max = 0;
	fclose(f);
	return max >= DPG_CPU_LOCAL_SNDBUF;
}

/* Comm rank r runs on our machine (see set_sock). */
static bool same_machine(const struct rdv *x, int r)
{
	return strcmp(x->all[r].uts, x->mine.uts) == 0;
}

/* The TCP hops, authenticated with the job secret: connect forward while
 * accepting from behind (hops.c); then the socket options and the staging
 * buffer for reduce steps. */
static int connect_hops(struct dpg_cpu *p, const struct rdv *x, struct dpg_err *err)
{
	struct dpg_cpu_hello_key key;
	struct dpg_cpu_hops h;
	bool fixed, nl, pl;
	int rc;

	if (p->direct) {
		p->next.kind = p->prev.kind = DPG_LINK_NONE;
		return 0;
	}
	if (p->next.kind != DPG_LINK_TCP && p->prev.kind != DPG_LINK_TCP)
		return 0;
	rc = dpg_cpu_hello_key(&key, x->o->secret, x->name, err);
	if (rc != 0)
		return rc;
	h = (struct dpg_cpu_hops){ .lfd = x->lfd, .key = &key, .my_token = x->mine.token,
		.next = p->next.kind == DPG_LINK_TCP ? &x->all[p->next.peer] : NULL,
		.want_prev = p->prev.kind == DPG_LINK_TCP, .deadline = x->deadline };
	rc = dpg_cpu_hops_connect(p, &h, err);
	dpg_cpu_hello_key_wipe(&key);
	if (rc != 0)
		return rc;
	fixed = local_sndbuf_ok();
	nl = fixed && p->next.kind == DPG_LINK_TCP && same_machine(x, p->next.peer);
	pl = fixed && p->prev.kind == DPG_LINK_TCP && same_machine(x, p->prev.peer);
	if ((p->next.kind == DPG_LINK_TCP && (set_sock(p->next.fd, nl) != 0 ||
					      set_sock(p->next.cfd, nl) != 0)) ||
	    (p->prev.kind == DPG_LINK_TCP && (set_sock(p->prev.fd, pl) != 0 ||
					      set_sock(p->prev.cfd, pl) != 0)))
		return dpg_errs(err, DPG_ERR_SYSTEM, "cpu backend: socket options: %s",
				strerror(errno));
	if (p->prev.kind == DPG_LINK_TCP) {
		p->stage = malloc(DPG_RING_STAGE_BYTES);
		if (p->stage == NULL)
			return nomem(err);
	}
	return 0;
}

/* Everyone is connected and attached: the segment name can go. */
static int all_ready(struct dpg_cpu *p, struct rdv *x, struct dpg_err *err)
{
	char key[DPG_STORE_KEY_MAX];
	int rc;

	close(x->lfd);
	x->lfd = -1;
	snprintf(key, sizeof(key), "%s/cpu/ready", x->name);
	rc = dpg_store_barrier(x->o->store, key, p->n, x->deadline, err);
	if (rc != 0) {
		dpg_err_prefix(err, "cpu backend: waiting for the other ranks");
		return rc;
	}
	dpg_shm_unlink(p->shm);
	return 0;
}

/* Two or more ranks: meet through the store and connect. */
static int rendezvous(struct dpg_cpu *p, const struct dpg_backend_args *o, struct dpg_err *err)
{
	struct rdv x;
	int rc;

	rc = rdv_init(&x, p, o, err);
	if (rc == 0)
		rc = publish_address(p, &x, err);
	if (rc == 0)
		rc = read_addresses(p, &x, err);
	if (rc == 0) {
		count_cpus(p, &x);
		order_ring(p, &x);
		find_local(p, &x);
		rc = open_segment(p, &x, err);
	}
	if (rc == 0)
		rc = connect_hops(p, &x, err);
	if (rc == 0)
		rc = all_ready(p, &x, err);
	rdv_fini(&x);
	return rc;
}

int dpg_cpu_comm_init(struct dpg_comm *c, const struct dpg_backend_args *o, struct dpg_err *err)
{
	struct dpg_cpu *p;
	int rc;

	rc = check_opts(c, o, err);
	if (rc == 0)
		rc = cpu_new(c, o, &p, err);
	if (rc != 0)
		return rc;
	rc = c->size == 1 ? solo(p, o, err) : rendezvous(p, o, err);
	if (rc != 0) {
		cpu_free(p);
		return rc;
	}
	c->impl = p;
	c->ops = &cpu_ops;
	return 0;
}
