/* SPDX-License-Identifier: BSD-3-Clause */
/* coll_bench.c - bus bandwidth of libdpg's CPU collectives (allreduce,
 * reduce_scatter, all_gather, broadcast), measured like bench/coll_mpi.c
 * measures MPI so that the two print comparable lines.
 *
 * It starts its own ranks: the parent runs a rendezvous store and forks N
 * rank processes, which build a communicator with the CPU backend:
 *   -m shm    every rank on one "node": the shared-memory algorithms
 *   -m tcp    every rank its own "node": the TCP ring over loopback
 *   -m ring   one node, but the ring engine over shared-memory pipes
 *   -m limit  no collective: each rank meets the others once (it bumps its
 *             own cache line in a shared page and waits until every rank's
 *             line has caught up: the least cross-CPU exchange a call
 *             needs) and does, on its own memory, the least copying the op
 *             needs on one node (all_gather and broadcast: one memcpy of
 *             the whole output, the root copies nothing; reduce_scatter: a
 *             combine of n blocks into one; allreduce: that, then a memcpy
 *             of the other n-1 blocks), every rank at once like the
 *             collectives: the physical bound of a one-node collective on
 *             this machine, timed and reported the same way
 *   -m tcplimit  no collective: the parent connects a ring of loopback TCP
 *             sockets (rank i to i+1) before it forks, and per call each
 *             rank sends to next and takes from prev the bytes the op's
 *             ring moves per rank (allreduce 2(n-1)/n of the buffer,
 *             reduce_scatter and all_gather (n-1)/n, broadcast the buffer
 *             along the chain from rank 0), nonblocking, both ways at once
 *             and independent of each other (no forwarding, no math, no
 *             headers; all_gather also copies the rank's own block into
 *             the output, as every all_gather out of place must),
 *             over sockets with dpg's send buffer within one host,
 *             waiting the -Y way (spin: busy-polling, with sched_yield
 *             between tries where ranks outnumber the CPUs;
 *             block: poll(2) until a stream can move): the bytes a ring
 *             must move over TCP, moved with nothing else, for a reference
 *             beside the collectives (the better of the two waits is the
 *             nearer to the limit; neither is one for latency-bound sizes,
 *             where a collective moving the same bytes can match it);
 *             with -F a ring's order too: a rank sends only what it could
 *             forward (its own block, then one for each block in; for
 *             broadcast, what has come in), the most a ring of TCP hops
 *             can do here; timed and reported the same way
 *   -m cmalimit  no collective, all_gather and broadcast only: the ranks
 *             meet, then each takes what it lacks straight out of the
 *             other ranks' private buffers with process_vm_readv, the one
 *             kernel copy between two processes' private memory (all_gather:
 *             the other n-1 blocks, starting with the next rank's, and a
 *             memcpy of its own block; broadcast: the whole buffer from the
 *             root), and they meet again, since an owner may not return
 *             while others still read its buffer: the least a one-node
 *             all_gather or broadcast of buffers that are not shared can
 *             do without a second copy (for a broadcast not a bound: the
 *             root, idle here, could take part of the copying)
 *   -m xferlimit  no collective, allreduce only, buffers of at most
 *             XFER_MAXB: each rank copies its input into the next of
 *             XFER_SLOTS slots of its own in a mapping shared by the
 *             ranks, meets the others, and reduces the whole buffer out of
 *             every rank's slot (the same slot number); what a one-node
 *             allreduce must do whose data has to cross between the CPUs:
 *             the reference for small calls (dpg's shared-memory allreduce
 *             up to 16 KiB has this shape plus its stamps and checks;
 *             above that it reduce-scatters and moves less per rank).  The
 *             slots rotate, so a rank rarely writes lines a peer still
 *             caches, and the meeting keeps every rank within one call of
 *             the others, so a slot is never rewritten while it is read
 * Ranks are pinned to CPU (rank % ncpus) when there are no more ranks than
 * CPUs (Open MPI binds to cores in that case too; -P turns pinning off).
 *
 * Method (nccl-tests conventions, GB/s = 1e9 B/s):
 *   allreduce       bytes = buffer size   busbw = algbw * 2(n-1)/n
 *   reduce_scatter  bytes = send size     busbw = algbw * (n-1)/n
 *   all_gather      bytes = recv size     busbw = algbw * (n-1)/n
 *   broadcast       bytes = buffer size   busbw = algbw
 * Per size: warm-up calls, a calibration that picks a batch of `iters`
 * calls lasting about -t ms (at most 2000), then -r batches, each started by
 * a barrier; a batch's time per call is the maximum over the ranks; the
 * median / min / max over batches are reported.  float32 (-d bf16: bfloat16)
 * sum, out of place; results are checked once per size.
 *
 * Late peer (-W MS): after the sizes, each op once more at MINBYTES, 3 times,
 * with one rank sleeping MS ms before it calls (the last; for broadcast the
 * root, which the others wait for); the others measure the wall and CPU
 * time (getrusage, user + system) of that call: what a rank burns while it
 * waits.  Median over the 3, max over the waiting ranks.
 *
 * Usage: coll_bench -n RANKS [-m shm|tcp|ring|limit|tcplimit|cmalimit|xferlimit] [-b MINBYTES] [-e MAXBYTES]
 *          [-f FACTOR] [-r REPS] [-t TARGET_MS] [-w WARMUP] [-c OPS] [-l LABEL]
 *          [-s SLOT_BYTES] [-C TCP_CHUNK] [-L LOCKSTEP_BYTES] [-S auto|on|off]
 *          [-O auto|off] [-Y spin|block] [-d f32|bf16]
 *          [-W MS] [-F] [-P] [-T]
 *   -S: stream the shm copies into the slots always / never (default auto:
 *   while cache lines are slow to pass between the CPUs, see shm_direct.c)
 *   -O off: shm all_gathers and broadcasts through the slots only (default
 *   auto: large ones read the owners' buffers in place where they can)
 *   -L: broadcasts of at least this many bytes run in lockstep on TCP hops
 *   (ring.c; default 0: the library's threshold; a huge value: never)
 *   -Y: how -m tcplimit waits (default spin); -F: in a ring's order
 *   -T: keep the record of each call as the public API does (track.h: the
 *   clock reads and the seqlock of coll.c's coll_run), to measure its cost
 *   OPS: comma list of allreduce,reduce_scatter,allgather,bcast
 * Output: a human table, plus one machine-readable line per size:
 *   CSV,label,op,n,bytes,iters,t_med_us,t_min_us,t_max_us,algbw,busbw,busbw_lo,busbw_hi,ok
 * and with -W one per op:
 *   WAIT,label,op,n,bytes,sleep_ms,wall_ms,cpu_ms
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "cma.h"
#include "cpu_backend.h"
#include "net.h"
#include "reduce.h"
#include "store.h"
#include "track.h"

enum { OP_ALLREDUCE, OP_REDUCE_SCATTER, OP_ALLGATHER, OP_BCAST, OP_N };
static const char *const op_names[OP_N] = { "allreduce", "reduce_scatter", "allgather",
					    "bcast" };

struct opts {
	int n;
	const char *mode;
	size_t minb, maxb;
	int factor, reps, warm;
	double target_ms;
	bool on[OP_N];
	const char *label;
	size_t slot;
	size_t chunk;		/* -C: TCP send/recv piece (0: default) */
	size_t lockstep;	/* -L: TCP broadcast lockstep from (0: default) */
	unsigned stream;	/* -S on|off: DPG_CPU_STREAM / _NO_STREAM (auto: 0) */
	unsigned cma;		/* -O off: DPG_CPU_NO_CMA (auto: 0) */
	bool pin;
	int wait_ms;		/* -W: the late peer's delay (0: off) */
	dpg_dtype_t dt;
	uint16_t port;
	uint8_t secret[32];
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void die(int rank, const char *what, const struct dpg_err *err)
{
	fprintf(stderr, "coll_bench rank %d: %s: %s\n", rank, what, err ? err->msg : "");
	_exit(1);
}

static dpg_dtype_t g_dt = DPG_F32;	/* the element type of this run */
static char *g_limit;			/* -m limit: the "peers' data" (maxb) */
static _Atomic uint64_t *g_meet;	/* -m limit: a cache line per rank, shared */
static uint64_t g_meets;		/* -m limit: meetings so far */
static _Atomic uint64_t *g_peer;	/* -m cmalimit: per rank its pid, its g_limit */
#define XFER_SLOTS 8
#define XFER_MAXB ((size_t)1 << 20)
static char *g_xfer;			/* -m xferlimit: XFER_SLOTS slots of maxb per
					 * rank, shared by the forks */
static uint64_t g_xfers;		/* -m xferlimit: calls so far */
static size_t g_xfer_maxb;		/* -m xferlimit: a slot's bytes */
/* Set by the parent once every rank is forked: a rank connects to the
 * store only then.  The store's thread runs in the parent, and a fork taken
 * while it held a lock (OpenSSL's, stdio's) left a child blocked for good
 * in its own handshake (seen once in 4-rank runs: "did not authenticate"). */
static _Atomic uint32_t *g_go;
static bool g_yield;			/* -m limit: ranks outnumber the CPUs */
static int g_links[64][2];		/* -m tcplimit: link i's ends (i -> i+1) */
static int g_tx = -1, g_rx = -1;	/* -m tcplimit: this rank's ends */
static size_t g_txchunk = 1u << 20;	/* -m tcplimit: largest send / recv */
static bool g_block;			/* -m tcplimit -Y block */
static bool g_forward;			/* -m tcplimit -F */
static bool g_track;			/* -T */
static struct dpg_track g_trk;

/* Element i of a buffer of g_dt, as float (the values used are exact). */
static float getv(const void *b, size_t i)
{
	return g_dt == DPG_BF16 ? dpg_bf16_to_f32(((const uint16_t *)b)[i]) : ((const float *)b)[i];
}

static void setv(void *b, size_t i, float v)
{
	if (g_dt == DPG_BF16)
		((uint16_t *)b)[i] = dpg_f32_to_bf16(v);
	else
		((float *)b)[i] = v;
}

/* -m limit, cmalimit: bump our line, wait until every rank's has caught up */
static void meet(const struct dpg_comm *c)
{
	size_t q;

	g_meets++;
	atomic_store(&g_meet[(size_t)c->rank * 8], g_meets);
	for (q = 0; q < (size_t)c->size; q++)
		while (atomic_load(&g_meet[q * 8]) < g_meets)
			if (g_yield)
				sched_yield();
}

/* -m limit: the least a call needs (see the top): one meeting, then the
 * copying on local memory (glibc's memcpy: above the caches an
 * implementation's streaming stores can beat it). */
static void run_limit(const struct dpg_comm *c, int op, size_t count, void *r)
{
	size_t n = (size_t)c->size, es = dpg_dtype_size(g_dt), blk = count / n, q;
	const void *src[64];

	meet(c);
	switch (op) {
	case OP_ALLREDUCE:
	case OP_REDUCE_SCATTER:
		for (q = 0; q < n; q++)
			src[q] = g_limit + q * blk * es;
		dpg_reduce_n(r, src, (int)n, blk, g_dt, DPG_SUM, 0);
		if (op == OP_ALLREDUCE)
			memcpy((char *)r + blk * es, g_limit, (count - blk) * es);
		break;
	case OP_BCAST:
		if (c->rank == 0)
			break;
		/* fall through */
	default:
		memcpy(r, g_limit, count * es);
		break;
	}
}

/* -m xferlimit (see the top): copy in, meet, reduce every rank's slot. */
static void run_xferlimit(const struct dpg_comm *c, size_t count, const void *s, void *r,
			  size_t maxb)
{
	size_t n = (size_t)c->size, es = dpg_dtype_size(g_dt), k = g_xfers++ % XFER_SLOTS, q;
	const void *src[64];

	memcpy(g_xfer + ((size_t)c->rank * XFER_SLOTS + k) * maxb, s, count * es);
	meet(c);
	for (q = 0; q < n; q++)
		src[q] = g_xfer + (q * XFER_SLOTS + k) * maxb;
	dpg_reduce_n(r, src, (int)n, count, g_dt, DPG_SUM, 0);
}

/* -m cmalimit: len bytes of rank q's g_limit into dst, in the kernel. */
static void cma_take(int rank, int q, void *dst, size_t len)
{
	int rc = dpg_cma_read((pid_t)atomic_load(&g_peer[2 * q]), dst,
			      atomic_load(&g_peer[2 * q + 1]), len);

	if (rc != 0) {
		fprintf(stderr, "coll_bench rank %d: cmalimit: process_vm_readv of rank %d: %s "
			"(this kernel or its ptrace policy refuses cross-memory reads)\n", rank, q,
			strerror(-rc));
		_exit(1);
	}
}

/* -m cmalimit: meet, take what we lack from the owners' private buffers
 * (see the top), meet again. */
static void run_cmalimit(const struct dpg_comm *c, int op, size_t count, void *r)
{
	size_t n = (size_t)c->size, bytes = count * dpg_dtype_size(g_dt), blk = bytes / n, k;

	meet(c);
	if (op == OP_ALLGATHER) {
		memcpy((char *)r + (size_t)c->rank * blk, g_limit, blk);
		for (k = 1; k < n; k++) {
			size_t q = ((size_t)c->rank + k) % n;

			cma_take(c->rank, (int)q, (char *)r + q * blk, blk);
		}
	} else if (c->rank != 0) {
		cma_take(c->rank, 0, r, bytes);
	}
	meet(c);
}

/* -m tcplimit: the bytes this rank sends and takes in one call of op on
 * `bytes` (a ring's per-rank traffic; broadcast: a chain from rank 0). */
static void tcp_bytes(int op, int rank, int n, size_t bytes, size_t *out, size_t *in)
{
	size_t blk = bytes / (size_t)n;

	switch (op) {
	case OP_ALLREDUCE:
		*out = *in = 2 * (size_t)(n - 1) * blk;
		break;
	case OP_REDUCE_SCATTER:
	case OP_ALLGATHER:
		*out = *in = (size_t)(n - 1) * blk;
		break;
	default:
		*out = rank < n - 1 ? bytes : 0;
		*in = rank > 0 ? bytes : 0;
		break;
	}
}

/* One nonblocking piece of a tcplimit stream at *done of want bytes, cycling
 * over the buffer buf of len bytes: >0 moved, 0 would block. */
static ssize_t tcp_piece(int rank, bool tx, char *buf, size_t len, size_t *done, size_t want)
{
	size_t at = *done % len, k = want - *done;
	ssize_t m;

	if (k > len - at)
		k = len - at;
	if (k > g_txchunk)
		k = g_txchunk;
	m = tx ? send(g_tx, buf + at, k, MSG_DONTWAIT | MSG_NOSIGNAL)
	       : recv(g_rx, buf + at, k, MSG_DONTWAIT);
	if (m < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return 0;
	if (m <= 0) {
		fprintf(stderr, "coll_bench rank %d: tcplimit %s: %s\n", rank, tx ? "send" : "recv",
			m == 0 ? "the peer closed its end" : strerror(errno));
		_exit(1);
	}
	*done += (size_t)m;
	return m;
}

/* -m tcplimit, ranks outnumbering the CPUs: sleep until a stream can move. */
static void tcp_block(bool tx, bool rx)
{
	struct pollfd pf[2] = { { .fd = tx ? g_tx : -1, .events = POLLOUT },
				{ .fd = rx ? g_rx : -1, .events = POLLIN } };

	if (poll(pf, 2, 1000) < 0 && errno != EINTR) {
		perror("coll_bench: tcplimit poll");
		_exit(1);
	}
}

/* -m tcplimit: one call's bytes out to next and in from prev (see the top). */
static void run_tcplimit(const struct dpg_comm *c, int op, size_t count, void *r)
{
	size_t bytes = count * dpg_dtype_size(g_dt), out, in, o = 0, i = 0;

	/* -F: a ring sends its own block, then forwards (broadcast: only
	 * forwards, the root has nothing to wait for) */
	size_t head = op == OP_BCAST ? 0 : bytes / (size_t)c->size;

	tcp_bytes(op, c->rank, c->size, bytes, &out, &in);
	while (o < out || i < in) {
		size_t can = g_forward && in > 0 && head + i < out ? head + i : out;
		ssize_t moved = 0;

		if (o < can)
			moved += tcp_piece(c->rank, true, g_limit, bytes, &o, can);
		if (i < in)
			moved += tcp_piece(c->rank, false, r, bytes, &i, in);
		if (moved == 0 && g_block)
			tcp_block(o < can, i < in);
		else if (moved == 0 && g_yield)
			sched_yield();
	}
	if (op == OP_ALLGATHER)	/* our own block, out of place */
		memcpy((char *)r + (size_t)c->rank * (bytes / (size_t)c->size), g_limit,
		       bytes / (size_t)c->size);
}

/* One call of op; count = elements of the op's "bytes" (see the header). */
static int run_op_raw(struct dpg_comm *c, int op, size_t count, void *s, void *r,
		  struct dpg_err *err)
{
	size_t n = (size_t)c->size;

	if (g_xfer != NULL) {
		run_xferlimit(c, count, s, r, g_xfer_maxb);
		return 0;
	}
	if (g_limit != NULL) {
		if (g_tx >= 0 || g_rx >= 0)
			run_tcplimit(c, op, count, r);
		else if (g_peer != NULL)
			run_cmalimit(c, op, count, r);
		else
			run_limit(c, op, count, r);
		return 0;
	}
	switch (op) {
	case OP_ALLREDUCE:
		return c->ops->allreduce(c, s, r, count, g_dt, DPG_SUM, NULL, err);
	case OP_REDUCE_SCATTER:
		return c->ops->reduce_scatter(c, s, r, count / n, g_dt, DPG_SUM, NULL, err);
	case OP_ALLGATHER:
		return c->ops->all_gather(c, s, r, count / n, g_dt, NULL, err);
	default:
		return c->ops->broadcast(c, s, count, g_dt, 0, NULL, err);
	}
}

static const char *const track_kinds[OP_N] = { "allreduce", "reduce_scatter",
					       "all_gather", "broadcast" };

/* run_op_raw, with -T inside the record coll.c keeps of every public call. */
static int run_op(struct dpg_comm *c, int op, size_t count, void *s, void *r,
		  struct dpg_err *err)
{
	int64_t t0;
	int rc;

	if (!g_track)
		return run_op_raw(c, op, count, s, r, err);
	t0 = dpg_track_enter(&g_trk, c->name, track_kinds[op], c->seq, count);
	rc = run_op_raw(c, op, count, s, r, err);
	dpg_track_leave(&g_trk, t0, rc);
	return rc;
}

static void fill(const struct dpg_comm *c, int op, size_t count, void *s)
{
	size_t i, sc = op == OP_ALLGATHER ? count / (size_t)c->size : count;

	for (i = 0; i < sc; i++)
		setv(s, i, (float)((c->rank + 1) + (int)(i % 7)));
	if (op == OP_BCAST && c->rank != 0)
		for (i = 0; i < count; i++)
			setv(s, i, -1.0f);
}

static long check(const struct dpg_comm *c, int op, size_t count, const void *s,
		  const void *r)
{
	int n = c->size, q;
	float rsum = (float)(n * (n + 1) / 2);
	size_t i, rc = count / (size_t)n;
	long bad = 0;

	switch (op) {
	case OP_ALLREDUCE:
		for (i = 0; i < count; i++)
			bad += getv(r, i) != rsum + (float)(n * (int)(i % 7));
		break;
	case OP_REDUCE_SCATTER:
		for (i = 0; i < rc; i++)
			bad += getv(r, i) != rsum + (float)(n * (int)(((size_t)c->rank * rc + i) % 7));
		break;
	case OP_ALLGATHER:
		for (q = 0; q < n; q++)
			for (i = 0; i < rc; i++)
				bad += getv(r, (size_t)q * rc + i) != (float)((q + 1) + (int)(i % 7));
		break;
	default:
		for (i = 0; i < count; i++)
			bad += getv(s, i) != (float)(1 + (int)(i % 7));
		break;
	}
	return bad;
}

static double max_over_ranks(struct dpg_comm *c, double v)
{
	struct dpg_err err;
	double x = v;

	if (c->ops->allreduce(c, &x, &x, 1, DPG_F64, DPG_MAX, NULL, &err) != 0)
		die(c->rank, "allreduce(max)", &err);
	return x;
}

/* Time `iters` back-to-back calls; the max over ranks of seconds per call. */
static double batch(struct dpg_comm *c, int op, size_t count, void *s, void *r, int iters)
{
	struct dpg_err err;
	double t0;
	int i;

	if (c->ops->barrier(c, &err) != 0)
		die(c->rank, "barrier", &err);
	t0 = now_s();
	for (i = 0; i < iters; i++)
		if (run_op(c, op, count, s, r, &err) != 0)
			die(c->rank, op_names[op], &err);
	return max_over_ranks(c, (now_s() - t0) / iters);
}

/* CPU seconds (user + system) of this process so far. */
static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* -W: op at `count` with one rank ms late (the last; broadcast: the root,
 * rank 0), 3 times; rank 0 prints the median wall and CPU time of the
 * waiting ranks (max over them). */
static void late_peer(struct dpg_comm *c, const struct opts *o, int op, size_t count,
		      void *s, void *r)
{
	double wall[3], cpu[3], w, u;
	struct dpg_err err;
	int k;

	for (k = 0; k < 3; k++) {
		if (c->ops->barrier(c, &err) != 0)
			die(c->rank, "barrier", &err);
		if (c->rank == (op == OP_BCAST ? 0 : c->size - 1)) {
			usleep((useconds_t)o->wait_ms * 1000);
			w = u = 0;
			if (run_op(c, op, count, s, r, &err) != 0)
				die(c->rank, op_names[op], &err);
		} else {
			w = now_s();
			u = cpu_s();
			if (run_op(c, op, count, s, r, &err) != 0)
				die(c->rank, op_names[op], &err);
			u = cpu_s() - u;
			w = now_s() - w;
		}
		wall[k] = max_over_ranks(c, w);
		cpu[k] = max_over_ranks(c, u);
	}
	qsort(wall, 3, sizeof(double), cmp_double);
	qsort(cpu, 3, sizeof(double), cmp_double);
	if (c->rank == 0) {
		printf("WAIT,%s,%s,%d,%.0f,%d,%.3f,%.3f\n", o->label, op_names[op], c->size,
		       (double)count * (double)dpg_dtype_size(g_dt), o->wait_ms, wall[1] * 1e3,
		       cpu[1] * 1e3);
		fflush(stdout);
	}
}

static double bus_factor(int op, int n)
{
	switch (op) {
	case OP_ALLREDUCE:
		return 2.0 * (n - 1) / n;
	case OP_REDUCE_SCATTER:
	case OP_ALLGATHER:
		return (double)(n - 1) / n;
	default:
		return 1.0;
	}
}

static int rank_main(int rank, const struct opts *o)
{
	struct dpg_err err = { "" };
	struct dpg_store *st = NULL;
	struct dpg_comm c;
	struct dpg_backend_args co;
	int world[64], r, op;
	char node[32];
	void *sbuf = NULL, *rbuf = NULL;
	double *ts;

	g_dt = o->dt;
	for (r = 0; atomic_load(g_go) == 0; r++) {
		if (r >= 30000) {
			fprintf(stderr, "coll_bench rank %d: the parent did not finish forking in 30 s\n",
				rank);
			return 1;
		}
		usleep(1000);
	}
	if (o->pin && o->n <= (int)sysconf(_SC_NPROCESSORS_ONLN)) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(rank % (int)sysconf(_SC_NPROCESSORS_ONLN), &set);
		sched_setaffinity(0, sizeof(set), &set);
	}
	if (dpg_store_connect("127.0.0.1", o->port, o->secret, sizeof(o->secret),
			      dpg_now_ms() + 30000, NULL, &st, &err) != 0)
		die(rank, "store", &err);
	memset(&c, 0, sizeof(c));
	c.rank = rank;
	c.size = o->n;
	for (r = 0; r < o->n; r++)
		world[r] = r;
	c.world_ranks = world;
	snprintf(c.name, sizeof(c.name), "bench");
	if (strcmp(o->mode, "tcp") == 0 || strcmp(o->mode, "tcplimit") == 0)
		snprintf(node, sizeof(node), "node%d", rank);
	else
		snprintf(node, sizeof(node), "node");
	memset(&co, 0, sizeof(co));
	co.store = st;
	co.host = "127.0.0.1";
	co.node = node;
	co.timeout_s = 120;
	co.flags = (strcmp(o->mode, "ring") == 0 ? DPG_CPU_RING : 0) | o->stream | o->cma;
	co.shm_slot_bytes = o->slot;
	co.tcp_chunk_bytes = o->chunk;
	co.tcp_lockstep_bytes = o->lockstep;
	if (dpg_cpu_comm_init(&c, &co, &err) != 0)
		die(rank, "init", &err);
	if (posix_memalign((void **)&sbuf, 4096, o->maxb) != 0 ||
	    posix_memalign((void **)&rbuf, 4096, o->maxb) != 0)
		die(rank, "out of memory", NULL);
	memset(sbuf, 0, o->maxb);
	memset(rbuf, 0, o->maxb);
	if (strcmp(o->mode, "limit") == 0 || strcmp(o->mode, "tcplimit") == 0 ||
	    strcmp(o->mode, "cmalimit") == 0) {
		if (posix_memalign((void **)&g_limit, 4096, o->maxb) != 0)
			die(rank, "out of memory", NULL);
		memset(g_limit, 0, o->maxb);
		g_yield = o->n > (int)sysconf(_SC_NPROCESSORS_ONLN);
	}
	if (g_xfer != NULL)	/* its result is a real sum: checked as the collective's */
		g_yield = o->n > (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (strcmp(o->mode, "cmalimit") == 0) {	/* seen by all at the first meeting */
		g_peer = &g_meet[(size_t)o->n * 8 + 8];
		atomic_store(&g_peer[2 * rank + 1], (uint64_t)(uintptr_t)g_limit);
		atomic_store(&g_peer[2 * rank], (uint64_t)getpid());
	}
	ts = calloc((size_t)o->reps, sizeof(*ts));
	if (ts == NULL)
		die(rank, "out of memory", NULL);
	if (rank == 0) {
		printf("# libdpg cpu backend (%s, reduce kernels: %s) | %s | nranks=%d | reps=%d "
		       "target_ms=%.0f | GB/s = 1e9 B/s\n", o->mode, dpg_reduce_isa(),
		       o->dt == DPG_BF16 ? "bf16" : "f32", o->n, o->reps, o->target_ms);
		printf("# %-14s %11s %7s %11s %11s %11s %9s %9s %9s %9s\n", "op", "bytes",
		       "iters", "t_med(us)", "t_min(us)", "t_max(us)", "algbw", "busbw",
		       "busbw_lo", "busbw_hi");
		fflush(stdout);
	}
	for (op = 0; op < OP_N; op++) {
		size_t bytes;

		if (!o->on[op])
			continue;
		for (bytes = o->minb; bytes <= o->maxb; bytes *= (size_t)o->factor) {
			size_t count = bytes / dpg_dtype_size(g_dt);
			double b, t1, tmed, tmin, tmax, bf, alg;
			int nwarm = o->warm >= 0 ? o->warm : bytes >= (16u << 20) ? 2 : 10;
			int i, cal, iters;
			long bad;

			if (op == OP_REDUCE_SCATTER || op == OP_ALLGATHER)
				count -= count % (size_t)o->n;	/* equal blocks */
			b = (double)count * (double)dpg_dtype_size(g_dt);
			fill(&c, op, count, sbuf);
			if (run_op(&c, op, count, sbuf, rbuf, &err) != 0)
				die(rank, op_names[op], &err);
			bad = g_limit != NULL ? 0
				: (long)max_over_ranks(&c, (double)check(&c, op, count, sbuf, rbuf));
			if (bad && rank == 0)
				fprintf(stderr, "CHECK FAILED %s bytes=%zu bad=%ld\n", op_names[op],
					bytes, bad);
			for (i = 0; i < nwarm; i++)
				if (run_op(&c, op, count, sbuf, rbuf, &err) != 0)
					die(rank, op_names[op], &err);
			/* t is already the max over ranks: every rank picks the same */
			t1 = batch(&c, op, count, sbuf, rbuf, 1);
			cal = (int)ceil(2e-3 / (t1 > 0 ? t1 : 1e-6));
			cal = cal < 1 ? 1 : cal > 100 ? 100 : cal;
			t1 = batch(&c, op, count, sbuf, rbuf, cal);
			iters = (int)(o->target_ms * 1e-3 / (t1 > 0 ? t1 : 1e-6));
			iters = iters < 1 ? 1 : iters > 2000 ? 2000 : iters;
			for (i = 0; i < o->reps; i++)
				ts[i] = batch(&c, op, count, sbuf, rbuf, iters);
			qsort(ts, (size_t)o->reps, sizeof(*ts), cmp_double);
			tmed = o->reps % 2 ? ts[o->reps / 2]
				: 0.5 * (ts[o->reps / 2 - 1] + ts[o->reps / 2]);
			tmin = ts[0];
			tmax = ts[o->reps - 1];
			bf = bus_factor(op, o->n);
			alg = b / tmed / 1e9;
			if (rank == 0) {
				printf("  %-14s %11.0f %7d %11.2f %11.2f %11.2f %9.3f %9.3f %9.3f "
				       "%9.3f%s\n", op_names[op], b, iters, tmed * 1e6, tmin * 1e6,
				       tmax * 1e6, alg, alg * bf, b / tmax / 1e9 * bf,
				       b / tmin / 1e9 * bf, bad ? "  CHECK-FAILED" : "");
				printf("CSV,%s,%s,%d,%.0f,%d,%.3f,%.3f,%.3f,%.4f,%.4f,%.4f,%.4f,%d\n",
				       o->label, op_names[op], o->n, b, iters, tmed * 1e6,
				       tmin * 1e6, tmax * 1e6, alg, alg * bf, b / tmax / 1e9 * bf,
				       b / tmin / 1e9 * bf, bad ? 0 : 1);
				fflush(stdout);
			}
		}
	}
	for (op = 0; op < OP_N && o->wait_ms > 0 && g_limit == NULL; op++)
		if (o->on[op]) {
			size_t count = o->minb / dpg_dtype_size(g_dt);

			if (op == OP_REDUCE_SCATTER || op == OP_ALLGATHER)
				count -= count % (size_t)o->n;	/* equal blocks */
			fill(&c, op, count, sbuf);
			late_peer(&c, o, op, count, sbuf, rbuf);
		}
	c.ops->destroy(&c);
	dpg_store_close(st);
	free(ts);
	free(sbuf);
	free(rbuf);
	free(g_limit);
	return 0;
}

/* -m tcplimit: n loopback TCP connections, link i from rank i (its
 * [0], the connecting end) to rank i+1 (its [1], the accepted end); the
 * sending end with the send buffer dpg's hops within one host take
 * (DPG_CPU_LOCAL_SNDBUF: autotuned, this reference was slower than Open
 * MPI's ring). */
static int tcp_ring(int n)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	int i, one = 1, sndbuf = DPG_CPU_LOCAL_SNDBUF;

	for (i = 0; i < n; i++) {
		int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		a.sin_port = 0;
		al = sizeof(a);
		if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(l, 1) != 0 ||
		    getsockname(l, (struct sockaddr *)&a, &al) != 0 ||
		    (g_links[i][0] = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
		    connect(g_links[i][0], (struct sockaddr *)&a, sizeof(a)) != 0 ||
		    (g_links[i][1] = accept(l, NULL, NULL)) < 0 ||
		    setsockopt(g_links[i][0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0 ||
		    setsockopt(g_links[i][1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0 ||
		    setsockopt(g_links[i][0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)) != 0) {
			perror("coll_bench: tcplimit ring");
			return -1;
		}
		close(l);
	}
	return 0;
}

/* In rank i's fork: keep link i's sending end and link i-1's receiving end. */
static void tcp_keep(int rank, const struct opts *o)
{
	int i, n = o->n;

	if (n < 2 || strcmp(o->mode, "tcplimit") != 0)
		return;
	for (i = 0; i < n; i++) {
		if (i == rank)
			g_tx = g_links[i][0];
		else
			close(g_links[i][0]);
		if (i == (rank + n - 1) % n)
			g_rx = g_links[i][1];
		else
			close(g_links[i][1]);
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: coll_bench -n RANKS [-m shm|tcp|ring|limit|tcplimit|cmalimit|xferlimit] [-b MINBYTES] "
		"[-e MAXBYTES] [-f FACTOR] [-r REPS] [-t TARGET_MS] [-w WARMUP] [-c OPS] "
		"[-l LABEL] [-s SLOT_BYTES] [-C TCP_CHUNK] [-L LOCKSTEP_BYTES] [-S auto|on|off] "
		"[-O auto|off] [-Y spin|block] [-d f32|bf16] [-W MS] [-F] [-P] [-T]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct opts o = { .n = 2, .mode = "shm", .minb = 4096, .maxb = 64u << 20,
			  .factor = 4, .reps = 7, .warm = -1, .target_ms = 50,
			  .on = { true, true, true, true }, .label = NULL, .pin = true,
			  .dt = DPG_F32 };
	struct dpg_store_server *srv;
	struct dpg_err err = { "" };
	char label[64];
	pid_t pids[64];
	int i, op, bad = 0;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "-P") == 0) {
			o.pin = false;
			continue;
		}
		if (strcmp(a, "-F") == 0) {
			g_forward = true;
			continue;
		}
		if (strcmp(a, "-T") == 0) {
			g_track = true;
			dpg_track_init(&g_trk);
			continue;
		}
		if (v == NULL)
			usage();
		i++;
		if (strcmp(a, "-n") == 0)
			o.n = atoi(v);
		else if (strcmp(a, "-m") == 0)
			o.mode = v;
		else if (strcmp(a, "-b") == 0)
			o.minb = strtoull(v, NULL, 0);
		else if (strcmp(a, "-e") == 0)
			o.maxb = strtoull(v, NULL, 0);
		else if (strcmp(a, "-f") == 0)
			o.factor = atoi(v);
		else if (strcmp(a, "-r") == 0)
			o.reps = atoi(v);
		else if (strcmp(a, "-t") == 0)
			o.target_ms = atof(v);
		else if (strcmp(a, "-w") == 0)
			o.warm = atoi(v);
		else if (strcmp(a, "-l") == 0)
			o.label = v;
		else if (strcmp(a, "-W") == 0)
			o.wait_ms = atoi(v);
		else if (strcmp(a, "-s") == 0)
			o.slot = strtoull(v, NULL, 0);
		else if (strcmp(a, "-C") == 0)
			o.chunk = strtoull(v, NULL, 0);
		else if (strcmp(a, "-L") == 0)
			o.lockstep = strtoull(v, NULL, 0);
		else if (strcmp(a, "-S") == 0 && (strcmp(v, "auto") == 0 || strcmp(v, "on") == 0 ||
						   strcmp(v, "off") == 0))
			o.stream = strcmp(v, "on") == 0 ? DPG_CPU_STREAM
				 : strcmp(v, "off") == 0 ? DPG_CPU_NO_STREAM : 0;
		else if (strcmp(a, "-O") == 0 && (strcmp(v, "auto") == 0 || strcmp(v, "off") == 0))
			o.cma = strcmp(v, "off") == 0 ? DPG_CPU_NO_CMA : 0;
		else if (strcmp(a, "-Y") == 0 && (strcmp(v, "spin") == 0 || strcmp(v, "block") == 0))
			g_block = strcmp(v, "block") == 0;
		else if (strcmp(a, "-d") == 0 && (strcmp(v, "f32") == 0 || strcmp(v, "bf16") == 0))
			o.dt = strcmp(v, "bf16") == 0 ? DPG_BF16 : DPG_F32;
		else if (strcmp(a, "-c") == 0) {
			char *list = strdup(v), *tok, *save = NULL;

			for (op = 0; op < OP_N; op++)
				o.on[op] = false;
			for (tok = strtok_r(list, ",", &save); tok != NULL;
			     tok = strtok_r(NULL, ",", &save))
				for (op = 0; op < OP_N; op++)
					if (strcmp(tok, op_names[op]) == 0)
						o.on[op] = true;
			free(list);
		} else
			usage();
	}
	if (o.n < 1 || o.n > 64 || o.reps < 1 || o.factor < 2 || o.minb < 4 ||
	    o.maxb < o.minb || (strcmp(o.mode, "shm") != 0 && strcmp(o.mode, "tcp") != 0 &&
				strcmp(o.mode, "ring") != 0 && strcmp(o.mode, "limit") != 0 &&
				strcmp(o.mode, "tcplimit") != 0 && strcmp(o.mode, "cmalimit") != 0 &&
				strcmp(o.mode, "xferlimit") != 0))
		usage();
	if (strcmp(o.mode, "xferlimit") == 0 &&
	    (o.on[OP_REDUCE_SCATTER] || o.on[OP_ALLGATHER] || o.on[OP_BCAST] || o.maxb > XFER_MAXB)) {
		fprintf(stderr, "coll_bench: -m xferlimit measures allreduce only, of at most "
			"%zu bytes: pass -c allreduce and -e %zu or less\n", XFER_MAXB, XFER_MAXB);
		return 2;
	}
	if (strcmp(o.mode, "cmalimit") == 0 && (o.on[OP_ALLREDUCE] || o.on[OP_REDUCE_SCATTER])) {
		fprintf(stderr, "coll_bench: -m cmalimit measures allgather and bcast only: "
			"pass -c allgather,bcast (or one of them)\n");
		return 2;
	}
	if (strcmp(o.mode, "tcplimit") == 0 && o.n > 1 && tcp_ring(o.n) != 0)
		return 1;
	if (o.chunk > 0)
		g_txchunk = o.chunk;
	if (o.label == NULL) {
		snprintf(label, sizeof(label), "dpg-%s", o.mode);
		o.label = label;
	}
	if (getrandom(o.secret, sizeof(o.secret), 0) != (ssize_t)sizeof(o.secret))
		return 1;
	if (dpg_store_server_start("127.0.0.1", 0, o.secret, sizeof(o.secret), &srv, &err) != 0) {
		fprintf(stderr, "coll_bench: store: %s\n", err.msg);
		return 1;
	}
	o.port = dpg_store_server_port(srv);
	/* -m limit: the ranks' meeting lines, the go word, then (cmalimit)
	 * each rank's pid and buffer; shared by the forks */
	g_meet = mmap(NULL, (size_t)o.n * 80 + 64, PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (g_meet == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	memset((void *)g_meet, 0, (size_t)o.n * 80 + 64);
	if (strcmp(o.mode, "xferlimit") == 0) {
		g_xfer_maxb = (o.maxb + 4095) & ~(size_t)4095;
		g_xfer = mmap(NULL, (size_t)o.n * XFER_SLOTS * g_xfer_maxb,
			      PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (g_xfer == MAP_FAILED) {
			perror("coll_bench: xferlimit mmap");
			return 1;
		}
	}
	g_go = (_Atomic uint32_t *)&g_meet[(size_t)o.n * 8];
	fflush(stdout);
	for (i = 0; i < o.n; i++) {
		pids[i] = fork();
		if (pids[i] < 0) {
			perror("fork");
			return 1;
		}
		if (pids[i] == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			tcp_keep(i, &o);
			_exit(rank_main(i, &o));
		}
	}
	atomic_store(g_go, 1);
	for (i = 0; i < o.n; i++) {
		int st;

		if (waitpid(pids[i], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			if (!bad) {
				int k;

				for (k = 0; k < o.n; k++)	/* one failed: stop the rest */
					if (k != i)
						kill(pids[k], SIGKILL);
			}
			bad = 1;
		}
	}
	dpg_store_server_stop(srv);
	return bad;
}
