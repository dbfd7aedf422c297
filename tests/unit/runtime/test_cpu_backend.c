/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cpu_backend.c - unit tests for the CPU collectives, lib/runtime/cpu/:
 * reduce.{h,c} (the f16/bf16 conversions and the combine kernels), shm.c,
 * ring.c and cpu_backend.c.  The collective tests fork N rank processes that
 * meet through a real rendezvous store (lib/runtime/store_*.c, served by this
 * process) and
 * check every collective x dtype x op against a sequential reference, over
 * shared memory, TCP and mixtures of both; others kill a rank mid-call or
 * let a rank never call and check that the survivors fail promptly with
 * the right status and message.
 *
 * Children report through their exit status (and stderr); they never use
 * cmocka.  Every child is in one process group, killed by the parent on
 * failure or on the watchdog, and gets SIGKILL if the parent dies. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

#include "backend.h"
#include "cpu_backend.h"
#include "hello.h"
#include "net.h"
#include "reduce.h"
#include "ring.h"
#include "store.h"
#include "storeproc.h"

/* ------------------------------------------------------------ the store */

/* The store server runs in its own process (forked here, killed at the
 * end), so that this process stays single-threaded: the rank processes it
 * forks then inherit no phantom threads (which would confuse LeakSanitizer)
 * and a store crash cannot take the test runner down. */
static pid_t g_store_pid;
static uint8_t g_secret[32];
static uint16_t g_port;
static int g_name_seq;
/* tcp_lockstep_bytes of the ranks forked next (0: the library's default,
 * 16 MiB at 2 ranks of one machine; the tests force LOCK_BYTES where they
 * need it) */
static size_t g_lockstep;
#define LOCK_BYTES 4096

static int group_setup(void **state)
{
	(void)state;
	g_store_pid = storeproc_start(g_secret, sizeof(g_secret), &g_port);
	return g_store_pid > 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	storeproc_stop(g_store_pid);
	return 0;
}

/* ------------------------------------------------------------ children */

#define CHK(cond, ...)								\
	do {									\
		if (!(cond)) {							\
			fprintf(stderr, "rank %d: %s:%d: ", g_rank, __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);				\
			fputc('\n', stderr);					\
			return 1;						\
		}								\
	} while (0)

static int g_rank = -1;

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Node layouts. */
enum { L_SHM, L_TCP, L_HALF, L_INTERLEAVE, L_RING_SHM };

static const char *layout_name(int l)
{
	static const char *const names[] = { "shm", "tcp", "half", "interleave", "ring-shm" };

	return names[l];
}

static void node_of(int layout, int rank, int n, char *buf, size_t len)
{
	switch (layout) {
	case L_TCP:
		snprintf(buf, len, "n%d", rank);
		break;
	case L_HALF:
		snprintf(buf, len, "%s", rank < n / 2 ? "a" : "b");
		break;
	case L_INTERLEAVE:
		snprintf(buf, len, "%s", rank % 2 ? "b" : "a");
		break;
	default:
		snprintf(buf, len, "a");
		break;
	}
}

struct rank_env {
	struct dpg_store *st;
	struct dpg_comm c;
	int world[16];
};

static int rank_start(struct rank_env *re, int rank, int n, const char *name, int layout,
		      double timeout_s, const volatile int *abort_flag)
{
	struct dpg_err err = { "" };
	char node[32];
	struct dpg_backend_args o;
	int r, rc;

	g_rank = rank;
	rc = dpg_store_connect("127.0.0.1", g_port, g_secret, sizeof(g_secret),
			       dpg_now_ms() + 20000, NULL, &re->st, &err);
	CHK(rc == 0, "store connect: %s", err.msg);
	memset(&re->c, 0, sizeof(re->c));
	re->c.rank = rank;
	re->c.size = n;
	for (r = 0; r < n; r++)
		re->world[r] = r;
	re->c.world_ranks = re->world;
	snprintf(re->c.name, sizeof(re->c.name), "%s", name);
	node_of(layout, rank, n, node, sizeof(node));
	memset(&o, 0, sizeof(o));
	o.store = re->st;
	o.host = "127.0.0.1";
	o.node = node;
	o.timeout_s = timeout_s;
	o.abort = abort_flag;
	o.flags = layout == L_RING_SHM ? DPG_CPU_RING : 0;
	o.tcp_lockstep_bytes = g_lockstep;
	rc = dpg_cpu_comm_init(&re->c, &o, &err);
	CHK(rc == 0, "init (%s, n=%d): %d %s", layout_name(layout), n, rc, err.msg);
	CHK(re->c.ops != NULL && re->c.impl != NULL, "init left no ops");
	return 0;
}

static void rank_stop(struct rank_env *re)
{
	if (re->c.ops != NULL)
		re->c.ops->destroy(&re->c);
	dpg_store_close(re->st);
}

/* Run fn(rank, arg) in n processes; returns how many failed (or -1 on a
 * watchdog kill).  Process group + PDEATHSIG: nothing outlives the test. */
static int run_ranks(int n, int (*fn)(int rank, void *arg), void *arg, double watchdog_s)
{
	pid_t pids[16], pgid = 0;
	int r, bad = 0, left = n;
	double t0 = mono_s();
	pid_t parent = getpid();

	fflush(stdout);
	fflush(stderr);
	for (r = 0; r < n; r++) {
		pid_t pid = fork();
		int st;

		if (pid < 0) {
			if (pgid > 0)
				kill(-pgid, SIGKILL);
			return -1;
		}
		if (pid == 0) {
			setpgid(0, pgid);
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent)
				_exit(99);
			st = fn(r, arg);
#ifdef __SANITIZE_ADDRESS__
			/* children leave by _exit: run the leak check here */
			if (st == 0 && __lsan_do_recoverable_leak_check() != 0)
				st = 7;
#endif
			_exit(st);
		}
		if (pgid == 0)
			pgid = pid;
		setpgid(pid, pgid);
		pids[r] = pid;
	}
	while (left > 0) {
		int st;
		pid_t w = waitpid(-pgid, &st, WNOHANG);

		if (w > 0) {
			left--;
			for (r = 0; r < n; r++)
				if (pids[r] == w)
					break;
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
				fprintf(stderr, "rank %d: %s %d\n", r,
					WIFEXITED(st) ? "exit status" : "signal",
					WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
				bad++;
			}
			continue;
		}
		if (w < 0 && errno != EINTR)
			break;
		if (mono_s() - t0 > watchdog_s) {
			fprintf(stderr, "watchdog: killing the ranks after %.0f s\n", watchdog_s);
			kill(-pgid, SIGKILL);
			while (waitpid(-pgid, &st, 0) > 0)
				;
			return -1;
		}
		usleep(2000);
	}
	return bad;
}

/* ------------------------------------------------------------ values */

static const dpg_dtype_t DTYPES[] = { DPG_F32, DPG_F64, DPG_F16, DPG_BF16, DPG_I32, DPG_I64 };
static const dpg_op_t OPS[] = { DPG_SUM, DPG_AVG, DPG_MIN, DPG_MAX };
static const char *const DTN[] = { "f32", "f64", "f16", "bf16", "i32", "i64" };
static const char *const OPN[] = { "sum", "avg", "min", "max" };

/* The value of element i of rank r's input: small integers (exact in every
 * dtype, sums too) or, with frac, integers plus sixteenths. */
static double inval(int r, size_t i, int salt, bool frac)
{
	double v = (double)((int)(((size_t)r * 7 + i * 13 + (size_t)salt * 5 + 3) % 17) - 8);

	if (frac)
		v += (double)((r * 3 + (int)(i % 101) * 5 + salt) % 11) / 16.0 + 1.0 / 64.0;
	return v;
}

static void put(dpg_dtype_t dt, void *buf, size_t i, double v)
{
	switch (dt) {
	case DPG_F32:
		((float *)buf)[i] = (float)v;
		break;
	case DPG_F64:
		((double *)buf)[i] = v;
		break;
	case DPG_F16:
		((uint16_t *)buf)[i] = dpg_f32_to_f16((float)v);
		break;
	case DPG_BF16:
		((uint16_t *)buf)[i] = dpg_f32_to_bf16((float)v);
		break;
	case DPG_I32:
		((int32_t *)buf)[i] = (int32_t)v;
		break;
	case DPG_I64:
		((int64_t *)buf)[i] = (int64_t)v;
		break;
	}
}

static double get(dpg_dtype_t dt, const void *buf, size_t i)
{
	switch (dt) {
	case DPG_F32:
		return ((const float *)buf)[i];
	case DPG_F64:
		return ((const double *)buf)[i];
	case DPG_F16:
		return dpg_f16_to_f32(((const uint16_t *)buf)[i]);
	case DPG_BF16:
		return dpg_bf16_to_f32(((const uint16_t *)buf)[i]);
	case DPG_I32:
		return ((const int32_t *)buf)[i];
	default:
		return (double)((const int64_t *)buf)[i];
	}
}

static bool is_float(dpg_dtype_t dt)
{
	return dt == DPG_F32 || dt == DPG_F64 || dt == DPG_F16 || dt == DPG_BF16;
}

/* Unit roundoff of the dtype's storage. */
static double unit_roundoff(dpg_dtype_t dt)
{
	switch (dt) {
	case DPG_F32:
		return ldexp(1, -24);
	case DPG_F64:
		return ldexp(1, -53);
	case DPG_F16:
		return ldexp(1, -11);
	case DPG_BF16:
		return ldexp(1, -8);
	default:
		return 0;
	}
}

/* The input value as stored in dt (what the ranks actually contribute). */
static double stored(dpg_dtype_t dt, double v)
{
	unsigned char b[8];

	put(dt, b, 0, v);
	return get(dt, b, 0);
}

/* Expected element i of the reduction of the n ranks' inputs, and the
 * tolerance (0 = exact).  Integer-valued inputs: every dtype is exact and
 * avg divides once in the accumulation type (f32 for f16/bf16). */
static double expect(dpg_dtype_t dt, dpg_op_t op, int n, size_t i, int salt, bool frac,
		     double *tol)
{
	double acc = 0, mag = 0;
	int64_t iacc = 0;
	int r;

	*tol = 0;
	for (r = 0; r < n; r++) {
		double v = stored(dt, inval(r, i, salt, frac));

		if (op == DPG_MIN)
			acc = r == 0 || v < acc ? v : acc;
		else if (op == DPG_MAX)
			acc = r == 0 || v > acc ? v : acc;
		else {
			acc += v;
			iacc += (int64_t)v;
		}
		mag += fabs(v);
	}
	if (op == DPG_MIN || op == DPG_MAX)
		return acc;
	if (!is_float(dt))
		return op == DPG_AVG ? (double)(iacc / n) : (double)iacc;
	if (frac) {
		/* documented bound: at most n roundings of partial sums */
		*tol = (double)(n + 1) * unit_roundoff(dt) * mag + 1e-30;
		if (op == DPG_AVG) {
			acc /= n;
			*tol = *tol / n + unit_roundoff(dt) * fabs(acc);
		}
		return acc;
	}
	if (op == DPG_AVG) {
		if (dt == DPG_F64)
			return acc / n;
		return stored(dt, (double)((float)acc / (float)n));
	}
	return acc;
}

static bool close_enough(double got, double want, double tol)
{
	if (isnan(want))
		return isnan(got);
	return tol == 0 ? got == want : fabs(got - want) <= tol;
}

/* ------------------------------------------------------------ collectives */

struct coll_arg {
	int n;
	int layout;
	char name[48];
	size_t big;		/* the large count */
};

static char *xmalloc(size_t n)
{
	char *p = calloc(1, n ? n : 1);

	if (p == NULL)
		_exit(3);
	return p;
}

static int check_allreduce(struct dpg_comm *c, dpg_dtype_t dt, dpg_op_t op, size_t count,
			   bool inplace, bool frac, int salt)
{
	size_t es = dpg_dtype_size(dt), i;
	char *send = xmalloc(count * es), *recv = inplace ? send : xmalloc(count * es);
	struct dpg_err err = { "" };
	int rc, n = c->size;

	for (i = 0; i < count; i++)
		put(dt, send, i, inval(c->rank, i, salt, frac));
	if (!inplace)
		memset(recv, 0x5a, count * es);
	rc = c->ops->allreduce(c, send, recv, count, dt, op, NULL, &err);
	CHK(rc == 0, "allreduce %s %s count %zu: %d %s", DTN[dt], OPN[op], count, rc, err.msg);
	for (i = 0; i < count; i++) {
		double tol, want = expect(dt, op, n, i, salt, frac, &tol), got = get(dt, recv, i);

		CHK(close_enough(got, want, tol),
		    "allreduce %s %s count %zu %s%s: [%zu] = %.9g, want %.9g (tol %g)",
		    DTN[dt], OPN[op], count, inplace ? "in place" : "out of place",
		    frac ? " frac" : "", i, got, want, tol);
	}
	if (!inplace)
		free(recv);
	free(send);
	return 0;
}

/* mode 0: out of place; 1: recv == send; 2: recv == send + rank*rc. */
static int check_reduce_scatter(struct dpg_comm *c, dpg_dtype_t dt, dpg_op_t op, size_t rc_,
				int mode, bool frac, int salt)
{
	size_t es = dpg_dtype_size(dt), i, total = rc_ * (size_t)c->size;
	char *send = xmalloc(total * es), *recv;
	struct dpg_err err = { "" };
	int rc, n = c->size;

	for (i = 0; i < total; i++)
		put(dt, send, i, inval(c->rank, i, salt, frac));
	recv = mode == 0 ? xmalloc(rc_ * es) : mode == 1 ? send : send + (size_t)c->rank * rc_ * es;
	rc = c->ops->reduce_scatter(c, send, recv, rc_, dt, op, NULL, &err);
	CHK(rc == 0, "reduce_scatter %s %s rc %zu: %d %s", DTN[dt], OPN[op], rc_, rc, err.msg);
	for (i = 0; i < rc_; i++) {
		size_t gi = (size_t)c->rank * rc_ + i;
		double tol, want = expect(dt, op, n, gi, salt, frac, &tol), got = get(dt, recv, i);

		CHK(close_enough(got, want, tol),
		    "reduce_scatter %s %s rc %zu mode %d: [%zu] = %.9g, want %.9g", DTN[dt],
		    OPN[op], rc_, mode, i, got, want);
	}
	if (mode == 0)
		free(recv);
	free(send);
	return 0;
}

/* mode 0: out of place; 1: send == recv; 2: send == recv + rank*sc. */
static int check_all_gather(struct dpg_comm *c, dpg_dtype_t dt, size_t sc, int mode, int salt)
{
	size_t es = dpg_dtype_size(dt), i, total = sc * (size_t)c->size;
	char *recv = xmalloc(total * es), *send;
	struct dpg_err err = { "" };
	int rc, r;

	memset(recv, 0xa5, total * es);
	send = mode == 0 ? xmalloc(sc * es) : mode == 1 ? recv : recv + (size_t)c->rank * sc * es;
	for (i = 0; i < sc; i++)
		put(dt, send, i, inval(c->rank, i, salt, true));
	rc = c->ops->all_gather(c, send, recv, sc, dt, NULL, &err);
	CHK(rc == 0, "all_gather %s sc %zu: %d %s", DTN[dt], sc, rc, err.msg);
	for (r = 0; r < c->size; r++)
		for (i = 0; i < sc; i++) {
			double got = get(dt, recv, (size_t)r * sc + i);
			double want = stored(dt, inval(r, i, salt, true));

			CHK(got == want, "all_gather %s sc %zu mode %d: block %d [%zu] = %g, want %g",
			    DTN[dt], sc, mode, r, i, got, want);
		}
	if (mode == 0)
		free(send);
	free(recv);
	return 0;
}

static int check_broadcast(struct dpg_comm *c, dpg_dtype_t dt, size_t count, int root, int salt)
{
	size_t es = dpg_dtype_size(dt), i;
	char *buf = xmalloc(count * es);
	struct dpg_err err = { "" };
	int rc;

	for (i = 0; i < count; i++)
		put(dt, buf, i, c->rank == root ? inval(root, i, salt, true) : -99.0);
	rc = c->ops->broadcast(c, buf, count, dt, root, NULL, &err);
	CHK(rc == 0, "broadcast %s count %zu root %d: %d %s", DTN[dt], count, root, rc, err.msg);
	for (i = 0; i < count; i++) {
		double got = get(dt, buf, i), want = stored(dt, inval(root, i, salt, true));

		CHK(got == want, "broadcast %s count %zu root %d: [%zu] = %g, want %g", DTN[dt],
		    count, root, i, got, want);
	}
	free(buf);
	return 0;
}

/* NaN in one rank's input: sum, min and max all give NaN there. */
static int check_nan(struct dpg_comm *c)
{
	struct dpg_err err = { "" };
	float f[7];
	uint16_t h[7];
	size_t i;
	int k;

	for (k = 0; k < 3; k++) {
		dpg_op_t op = k == 0 ? DPG_SUM : k == 1 ? DPG_MIN : DPG_MAX;

		for (i = 0; i < 7; i++) {
			f[i] = (float)i;
			h[i] = dpg_f32_to_f16((float)i);
		}
		if (c->rank == c->size - 1) {
			f[3] = NAN;
			h[3] = 0x7e00;
		}
		CHK(c->ops->allreduce(c, f, f, 7, DPG_F32, op, NULL, &err) == 0, "%s", err.msg);
		CHK(c->ops->allreduce(c, h, h, 7, DPG_F16, op, NULL, &err) == 0, "%s", err.msg);
		CHK(isnan(f[3]) && !isnan(f[2]), "f32 %s does not propagate NaN", OPN[op]);
		CHK(isnan(dpg_f16_to_f32(h[3])) && !isnan(dpg_f16_to_f32(h[4])),
		    "f16 %s does not propagate NaN", OPN[op]);
	}
	return 0;
}

static int coll_child(int rank, void *argp)
{
	const struct coll_arg *a = argp;
	struct rank_env re;
	struct dpg_comm *c = &re.c;
	struct dpg_err err = { "" };
	size_t counts[] = { 0, 1, 7, 1009, 4099 };
	size_t d, o, k;
	int salt = 0, root, mode;

	if (rank_start(&re, rank, a->n, a->name, a->layout, 30.0, NULL) != 0)
		return 1;
	for (d = 0; d < 6; d++)
		for (o = 0; o < 4; o++)
			for (k = 0; k < 5; k++) {
				salt++;
				if (check_allreduce(c, DTYPES[d], OPS[o], counts[k], k % 2 == 0,
						    false, salt) ||
				    check_reduce_scatter(c, DTYPES[d], OPS[o], counts[k] / 2 + k,
							 (int)((k + o) % 3), false, salt))
					return 1;
				if (is_float(DTYPES[d]) && OPS[o] != DPG_MIN && OPS[o] != DPG_MAX &&
				    check_allreduce(c, DTYPES[d], OPS[o], counts[k], k % 2 == 1,
						    true, salt))
					return 1;
			}
	/* the large count: every dtype once, ops and placement rotating */
	for (d = 0; d < 6; d++) {
		salt++;
		if (check_allreduce(c, DTYPES[d], OPS[d % 4], a->big, d % 2 == 0,
				    is_float(DTYPES[d]) && d % 4 < 2, salt) ||
		    check_reduce_scatter(c, DTYPES[d], OPS[(d + 1) % 4],
					 a->big / (size_t)a->n + 1, (int)(d % 3), false, salt))
			return 1;
	}
	for (d = 0; d < 6; d++)
		for (k = 0; k < 5; k++)
			for (mode = 0; mode < 3; mode++)
				if (check_all_gather(c, DTYPES[d], counts[k] + (size_t)mode, mode,
						     ++salt))
					return 1;
	if (check_all_gather(c, DPG_F32, a->big / (size_t)a->n + 3, 2, ++salt))
		return 1;
	for (root = 0; root < a->n; root++)
		for (d = 0; d < 6; d += 2)
			if (check_broadcast(c, DTYPES[(d + (size_t)root) % 6],
					    counts[(size_t)root % 5] + d, root, ++salt))
				return 1;
	if (check_broadcast(c, DPG_BF16, a->big + 1, a->n - 1, ++salt))
		return 1;
	if (check_nan(c))
		return 1;
	for (k = 0; k < 3; k++)
		CHK(c->ops->barrier(c, &err) == 0, "barrier: %s", err.msg);
	rank_stop(&re);
	return 0;
}

static void run_coll(int n, int layout, size_t big)
{
	struct coll_arg a = { .n = n, .layout = layout, .big = big };
	double t0 = mono_s();
	int bad;

	snprintf(a.name, sizeof(a.name), "coll%d.%s.%d", g_name_seq++, layout_name(layout), n);
	bad = run_ranks(n, coll_child, &a, 120);
	fprintf(stderr, "  [coll n=%d %s: %.2f s]\n", n, layout_name(layout), mono_s() - t0);
	assert_int_equal(bad, 0);
}

#define BIG ((1u << 20) + 3)

static void test_coll_n1(void **state)
{
	(void)state;
	run_coll(1, L_SHM, BIG);
}

static void test_coll_n2_shm(void **state)
{
	(void)state;
	run_coll(2, L_SHM, BIG);
}

static void test_coll_n2_tcp(void **state)
{
	(void)state;
	run_coll(2, L_TCP, BIG);
}

static void test_coll_n3_half(void **state)
{
	(void)state;
	run_coll(3, L_HALF, BIG / 2);
}

static void test_coll_n3_ring_shm(void **state)
{
	(void)state;
	run_coll(3, L_RING_SHM, BIG / 4);
}

static void test_coll_n5_shm(void **state)
{
	(void)state;
	run_coll(5, L_SHM, BIG / 4);
}

static void test_coll_n5_interleave(void **state)
{
	(void)state;
	run_coll(5, L_INTERLEAVE, BIG / 8);
}

static void test_coll_n8_half(void **state)
{
	(void)state;
	run_coll(8, L_HALF, BIG / 16);
}

static void test_coll_n8_shm(void **state)
{
	(void)state;
	run_coll(8, L_SHM, BIG / 16);
}

static void test_coll_n8_tcp(void **state)
{
	(void)state;
	run_coll(8, L_TCP, BIG / 32);
}

/* Every rank on its own node, 3 or more: broadcasts run two-way (ring.c:
 * forward and backward from the root), every root, odd and even counts of
 * ranks; small all-gathers two-way with an odd count, by neighbour
 * exchange with an even one, up to blocks of 1 MiB (4: one step each way,
 * 6: two on the lane a rank's own block starts on, one on the other; 8 in
 * test_coll_n8_tcp); with an even count of ranks, allreduces up to blocks
 * of 1 MiB as a reduce-scatter and that exchange, blocks equal or not. */
static void test_coll_two_way(void **state)
{
	(void)state;
	run_coll(3, L_TCP, BIG / 8);
	run_coll(4, L_TCP, BIG / 8);
	/* blocks just under CPU_NE_AG_BYTES: the exchange's messages of two
	 * blocks span chunks, forwarded piece by piece; a count that 4 and 6
	 * divide: allreduces as a reduce-scatter and an all-gather */
	run_coll(4, L_TCP, BIG - 67);
	/* counts the ranks do not divide (the first count % n blocks one
	 * element longer), through the same split */
	run_coll(4, L_TCP, BIG - 65);
	run_coll(5, L_TCP, BIG / 16);
	run_coll(6, L_TCP, BIG / 16 - 4);
	run_coll(6, L_TCP, BIG / 16 - 1);
}

/* TCP hops between ranks of one machine keep a fixed send buffer
 * (DPG_CPU_LOCAL_SNDBUF, doubled by the kernel) after a large transfer,
 * where autotuning would have moved it; where wmem_max is below it they
 * autotune (0: skip the check).  Two such ranks lock large broadcasts
 * from DPG_CPU_LOCKSTEP_LOCAL_BYTES, more ranks on these CPUs never. */
static int sndbuf_expected(void)
{
	FILE *f = fopen("/proc/sys/net/core/wmem_max", "r");
	long max = 0;

	if (f != NULL) {
		if (fscanf(f, "%ld", &max) != 1)
			max = 0;
		fclose(f);
	}
	return max >= DPG_CPU_LOCAL_SNDBUF ? 2 * DPG_CPU_LOCAL_SNDBUF : 0;
}

static int sndbuf_of(int fd)
{
	int v = -1;
	socklen_t len = sizeof(v);

	return getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, &len) == 0 ? v : -1;
}

static int sndbuf_child(int rank, void *argp)
{
	const struct coll_arg *a = argp;
	struct rank_env re;
	struct dpg_comm *c = &re.c;
	const struct dpg_cpu *p;
	int fds[4], k, want = sndbuf_expected();
	size_t lock;

	if (rank_start(&re, rank, a->n, a->name, L_TCP, 30.0, NULL) != 0)
		return 1;
	for (k = 0; k < 3; k++)
		if (check_allreduce(c, DPG_F32, DPG_SUM, (size_t)1 << 22, false, false, 500 + k) ||
		    check_broadcast(c, DPG_F32, (size_t)1 << 22, k % a->n, 600 + k))
			return 1;
	p = c->impl;
	CHK(p->next.kind == DPG_LINK_TCP && p->prev.kind == DPG_LINK_TCP, "hops not TCP");
	fds[0] = p->next.fd;
	fds[1] = p->next.cfd;
	fds[2] = p->prev.fd;
	fds[3] = p->prev.cfd;
	for (k = 0; k < 4; k++)
		CHK(sndbuf_of(fds[k]) == want, "socket %d: SO_SNDBUF %d, want %d", k,
		    sndbuf_of(fds[k]), want);
	lock = a->n == 2 && p->tcp_spin ? DPG_CPU_LOCKSTEP_LOCAL_BYTES : SIZE_MAX;
	CHK(p->lockstep == lock, "%d ranks: lockstep from %zu bytes, want %zu", a->n,
	    p->lockstep, lock);
	rank_stop(&re);
	return 0;
}

static void test_local_sndbuf(void **state)
{
	int n;

	(void)state;
	if (sndbuf_expected() == 0) {
		fprintf(stderr, "  [skip: net.core.wmem_max is below %d]\n", DPG_CPU_LOCAL_SNDBUF);
		skip();
	}
	for (n = 2; n <= 4; n += 2) {
		struct coll_arg a = { .n = n, .layout = L_TCP };

		snprintf(a.name, sizeof(a.name), "sndbuf%d.%d", g_name_seq++, n);
		assert_int_equal(run_ranks(n, sndbuf_child, &a, 120), 0);
	}
}

/* ------------------------------------------------------------ copy stages */

/* shm_direct.c runs all_gather and broadcast in stages of a quarter of the
 * call (16 KiB at least, a slot of 256 KiB at most), each at an offset in
 * its slot that moves on every time the slot sets come round.  Sizes
 * straddle the stage boundaries (one stage, just over 16 KiB, a quarter
 * that is no multiple of 4 KiB, several full slots), with 2-, 4- and
 * 8-byte elements, every placement and root, and calls of other kinds in
 * between, many times over so that the offsets wrap. */
struct copy_arg {
	int n;
	char name[48];
};

static int copy_child(int rank, void *argp)
{
	const struct copy_arg *a = argp;
	static const dpg_dtype_t dts[] = { DPG_F32, DPG_F16, DPG_F64 };
	struct rank_env re;
	struct dpg_comm *c = &re.c;
	size_t d, k, t = 16384;
	int salt = 1000, mode, root, round;

	if (rank_start(&re, rank, a->n, a->name, L_SHM, 30.0, NULL) != 0)
		return 1;
	for (round = 0; round < 3; round++)
		for (d = 0; d < 3; d++) {
			size_t es = dpg_dtype_size(dts[d]);
			size_t sizes[] = { t / es - 1, t / es + 1, 3 * t / es + 7,
					   (1u << 20) / es + 13, 100003 };

			for (k = 0; k < 5; k++) {
				for (mode = 0; mode < 3; mode++)
					if (check_all_gather(c, dts[d], sizes[k], mode, ++salt))
						return 1;
				for (root = 0; root < a->n; root++)
					if (check_broadcast(c, dts[d], sizes[k] + (size_t)root,
							    root, ++salt))
						return 1;
				if (check_allreduce(c, dts[d], DPG_SUM, sizes[k], k % 2 == 0, false,
						    ++salt))
					return 1;
			}
		}
	rank_stop(&re);
	return 0;
}

static void run_copy(int n)
{
	struct copy_arg a = { .n = n };
	double t0 = mono_s();
	int bad;

	snprintf(a.name, sizeof(a.name), "copy%d.%d", g_name_seq++, n);
	bad = run_ranks(n, copy_child, &a, 120);
	fprintf(stderr, "  [copy stages n=%d: %.2f s]\n", n, mono_s() - t0);
	assert_int_equal(bad, 0);
}

static void test_copy_stages(void **state)
{
	(void)state;
	run_copy(2);
	run_copy(3);
}

/* ------------------------------------------------------------ failures */

struct fail_arg {
	int n, layout, victim;
	char name[48];
	double *shared;		/* MAP_SHARED: [0] = the victim's exit time */
	atomic_int *done;	/* MAP_SHARED: the other ranks that have their result */
	int mode;		/* 0 kill mid-call, 1 never call (timeout), 2 abort */
	int op;			/* 0 allreduce, 1 all_gather, 2 broadcast,
				 * 3 a small all_gather (two-way over TCP),
				 * 4 a small reduce_scatter (4 ranks over TCP:
				 * an exchange) */
};

/* One call of a->op on buf (count floats; all_gather: count / n each into
 * out, count floats; the small ones 4 KiB in all). */
static int fail_op(struct dpg_comm *c, const struct fail_arg *a, float *buf, float *out,
		   size_t count, struct dpg_err *err)
{
	switch (a->op) {
	case 1:
		return c->ops->all_gather(c, buf, out, count / (size_t)c->size, DPG_F32, NULL, err);
	case 2:
		return c->ops->broadcast(c, buf, count, DPG_F32, 0, NULL, err);
	case 3:
		return c->ops->all_gather(c, buf, out, 1024 / (size_t)c->size, DPG_F32, NULL,
					  err);
	case 4:
		return c->ops->reduce_scatter(c, buf, out, 1024 / (size_t)c->size, DPG_F32,
					      DPG_SUM, NULL, err);
	default:
		return c->ops->allreduce(c, buf, buf, count, DPG_F32, DPG_SUM, NULL, err);
	}
}

static void *killer(void *argp)
{
	struct fail_arg *a = argp;

	usleep(150000);
	a->shared[0] = mono_s();
	_exit(0);
	return NULL;
}

/* A rank that never calls stays alive until every other rank has its
 * result (its exit would be a death, not lateness), 10 s at most. */
static void outlive_others(const struct fail_arg *a)
{
	for (int k = 0; k < 1000 && atomic_load(a->done) < a->n - 1; k++)
		usleep(10000);
}

static void have_result(const struct fail_arg *a)
{
	atomic_fetch_add(a->done, 1);
}

static int fail_child(int rank, void *argp)
{
	struct fail_arg *a = argp;
	struct rank_env re;
	struct dpg_comm *c = &re.c;
	struct dpg_err err = { "" };
	size_t count = 1u << 18, i;
	float *buf, *out;
	int rc = 0, iter;
	double t_err;
	char want[64];

	if (rank_start(&re, rank, a->n, a->name, a->layout, a->mode == 1 ? 1.0 : 20.0, NULL) != 0)
		return 1;
	buf = (float *)(void *)xmalloc(count * sizeof(float));
	out = (float *)(void *)xmalloc(count * sizeof(float));
	for (i = 0; i < count; i++)
		buf[i] = 1.0f;
	if (rank == a->victim) {
		pthread_t t;

		if (a->mode == 1) {
			outlive_others(a);	/* alive, but never calls */
			free(out);
			free(buf);
			rank_stop(&re);
			return 0;
		}
		pthread_create(&t, NULL, killer, a);
		for (;;)	/* dies inside one of these */
			fail_op(c, a, buf, out, count, &err);
	}
	for (iter = 0; iter < 100000; iter++) {
		rc = fail_op(c, a, buf, out, count, &err);
		if (rc != 0)
			break;
	}
	t_err = mono_s();
	if (a->mode == 1) {
		CHK(rc == -DPG_ERR_TIMEOUT, "expected a timeout, got %d: %s", rc, err.msg);
		CHK(strstr(err.msg, "timed out") != NULL, "message: %s", err.msg);
		/* the late rank is blamed, never a rank that did call */
		snprintf(want, sizeof(want), "peer rank %d (", a->victim);
		CHK(strstr(err.msg, want) != NULL, "the timeout blames another rank than the "
		    "late rank %d: %s", a->victim, err.msg);
	} else {
		CHK(rc == -DPG_ERR_PEER, "expected a peer failure, got %d: %s", rc, err.msg);
		snprintf(want, sizeof(want), "peer rank %d (127.0.0.1)", a->victim);
		CHK(strstr(err.msg, want) != NULL, "message does not name %s: %s", want, err.msg);
		CHK(a->shared[0] > 0, "the victim's exit time is missing");
		CHK(t_err - a->shared[0] < 5.0, "took %.2f s to notice the death",
		    t_err - a->shared[0]);
		/* report the detection time to the parent (max over ranks) */
		if (t_err - a->shared[0] > a->shared[1])
			a->shared[1] = t_err - a->shared[0];
	}
	/* sticky: the next call fails the same way at once */
	CHK(c->ops->allreduce(c, buf, buf, 4, DPG_F32, DPG_SUM, NULL, &err) == rc,
	    "the failure is not sticky");
	have_result(a);
	free(out);
	free(buf);
	rank_stop(&re);
	return 0;
}

static void run_fail_op(int n, int layout, int victim, int mode, int op)
{
	struct fail_arg a = { .n = n, .layout = layout, .victim = victim, .mode = mode,
			      .op = op };
	double t0 = mono_s();
	int bad;

	a.shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(a.shared != MAP_FAILED);
	a.done = (atomic_int *)(void *)(a.shared + 2);
	snprintf(a.name, sizeof(a.name), "fail%d.%s.%d", g_name_seq++, layout_name(layout), n);
	bad = run_ranks(n, fail_child, &a, 60);
	if (mode == 0)
		fprintf(stderr, "  [%s %s n=%d victim %d: survivors noticed in <= %.3f s]\n",
			op == 1 || op == 3 ? "all_gather" : op == 2 ? "broadcast"
			: op == 4 ? "reduce_scatter" : "allreduce",
			layout_name(layout), n, victim, a.shared[1]);
	else
		fprintf(stderr, "  [%s n=%d rank %d never calls: %.2f s]\n", layout_name(layout),
			n, victim, mono_s() - t0);
	munmap(a.shared, 4096);
	assert_int_equal(bad, 0);
}

static void run_fail(int n, int layout, int victim, int mode)
{
	run_fail_op(n, layout, victim, mode, 0);
}

static void test_kill_tcp(void **state)
{
	(void)state;
	run_fail(3, L_TCP, 1, 0);
	run_fail(4, L_TCP, 0, 0);
	/* two-way broadcasts: the root, a rank it reaches backward */
	run_fail_op(4, L_TCP, 0, 0, 2);
	run_fail_op(4, L_TCP, 3, 0, 2);
	/* a two-way all_gather: a rank dies; a rank never calls (ranks wait
	 * for it backward through others: the late one is still blamed) */
	run_fail_op(4, L_TCP, 2, 0, 3);
	run_fail_op(5, L_TCP, 1, 1, 3);
	/* the same by neighbour exchange (an even count of ranks) */
	run_fail_op(6, L_TCP, 3, 0, 3);
	run_fail_op(4, L_TCP, 1, 1, 3);
	run_fail_op(6, L_TCP, 2, 1, 3);
	/* a 4-rank reduce_scatter by exchange: a rank dies in it, a rank
	 * on the other parity never calls */
	run_fail_op(4, L_TCP, 1, 0, 4);
	run_fail_op(4, L_TCP, 2, 1, 4);
	/* a two-way broadcast whose root never calls */
	run_fail_op(5, L_TCP, 0, 1, 2);
	/* 2-rank broadcasts in lockstep: the reader dies (the root may wait
	 * for its token), the root dies */
	g_lockstep = LOCK_BYTES;
	run_fail_op(2, L_TCP, 1, 0, 2);
	run_fail_op(2, L_TCP, 0, 0, 2);
	g_lockstep = 0;
}

static void test_kill_shm(void **state)
{
	(void)state;
	run_fail(3, L_SHM, 1, 0);
	run_fail(4, L_SHM, 0, 0);
	/* the copy collectives: a reader, the root, a rank of an all_gather */
	run_fail_op(2, L_SHM, 1, 0, 1);
	run_fail_op(3, L_SHM, 0, 0, 2);
	run_fail_op(3, L_SHM, 2, 0, 2);
}

static void test_kill_mixed(void **state)
{
	(void)state;
	run_fail(4, L_HALF, 3, 0);
	run_fail(5, L_INTERLEAVE, 2, 0);
}

static void test_timeout(void **state)
{
	(void)state;
	run_fail(3, L_SHM, 2, 1);
	run_fail(3, L_TCP, 2, 1);
	run_fail(4, L_HALF, 1, 1);
	run_fail(4, L_RING_SHM, 2, 1);
	run_fail(5, L_INTERLEAVE, 3, 1);
	/* a lockstep broadcast (2 ranks): the reader never calls (the root
	 * waits for its token and stamp), the root never calls */
	g_lockstep = LOCK_BYTES;
	run_fail_op(2, L_TCP, 1, 1, 2);
	run_fail_op(2, L_TCP, 0, 1, 2);
	g_lockstep = 0;
}

/* Abort: while rank 0 waits for a peer that never calls, another thread
 * either raises the abort flag (mode 0) or calls ops->abort (mode 1); the
 * blocked call ends with DPG_ERR_ABORTED at once, later calls fail the same
 * way, and the other callers learn that rank 0 aborted. */
static volatile int g_abort_flag;
static struct dpg_comm *g_abort_comm;

static void *raise_abort(void *arg)
{
	usleep(300000);
	if (arg != NULL)
		g_abort_comm->ops->abort(g_abort_comm);
	else
		g_abort_flag = 1;
	return NULL;
}

static int abort_child(int rank, void *argp)
{
	const struct fail_arg *a = argp;
	struct rank_env re;
	struct dpg_err err = { "" };
	float x[64] = { 0 };
	double t0;
	int rc;

	g_abort_flag = 0;
	if (rank_start(&re, rank, a->n, a->name, a->layout, 20.0, &g_abort_flag) != 0)
		return 1;
	if (rank == a->victim) {
		outlive_others(a);	/* never calls */
		rank_stop(&re);
		return 0;
	}
	t0 = mono_s();
	if (rank == 0) {
		pthread_t t;

		g_abort_comm = &re.c;
		pthread_create(&t, NULL, raise_abort, a->mode == 1 ? &re : NULL);
		rc = re.c.ops->allreduce(&re.c, x, x, 64, DPG_F32, DPG_SUM, NULL, &err);
		pthread_join(t, NULL);
		CHK(rc == -DPG_ERR_ABORTED, "expected aborted, got %d: %s", rc, err.msg);
		CHK(mono_s() - t0 < 0.3 + (a->mode == 1 ? 0.5 : 0.7), "abort took %.3f s",
		    mono_s() - t0);
		rc = re.c.ops->barrier(&re.c, &err);
		CHK(rc == -DPG_ERR_ABORTED, "after abort: %d %s", rc, err.msg);
	} else {
		rc = re.c.ops->allreduce(&re.c, x, x, 64, DPG_F32, DPG_SUM, NULL, &err);
		CHK(rc == -DPG_ERR_PEER, "expected a peer failure, got %d: %s", rc, err.msg);
		CHK(strstr(err.msg, "peer rank 0 (127.0.0.1) aborted") != NULL, "message: %s",
		    err.msg);
		CHK(mono_s() - t0 < 5.0, "took %.2f s", mono_s() - t0);
	}
	have_result(a);
	rank_stop(&re);
	return 0;
}

static void test_abort(void **state)
{
	int layouts[] = { L_SHM, L_TCP, L_HALF }, i, mode;
	atomic_int *done = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
				-1, 0);

	(void)state;
	assert_true(done != MAP_FAILED);
	for (mode = 0; mode < 2; mode++)
		for (i = 0; i < 3; i++) {
			struct fail_arg a = { .n = 3, .layout = layouts[i], .victim = 2,
					      .mode = mode, .done = done };

			atomic_store(done, 0);
			snprintf(a.name, sizeof(a.name), "abort%d.%d", g_name_seq++, i);
			assert_int_equal(run_ranks(3, abort_child, &a, 60), 0);
		}
	munmap(done, 4096);
}

/* ------------------------------------------------------------ issue 17 */

/* f16 / bf16 sums are one rounding of the f32 sum on every path.  Inputs
 * whose f32 sums are exact in any order (few significant bits, a narrow
 * exponent range): the result must then be exactly round16(exact sum) on
 * every rank, every layout and every block of the ring, so one node and
 * several give the same bits.  Rank 0 also contributes 256 and the others 1
 * at the first elements: 256 + 1 + 1 = 258 (representable in bf16), which
 * per-hop rounding turns into 256. */
static double exact_val(dpg_dtype_t dt, int r, size_t i, int salt)
{
	uint64_t h = ((uint64_t)r * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)i * 0xbf58476d1ce4e5b9ull) ^
		     ((uint64_t)salt * 0x94d049bb133111ebull);
	int bf = dt == DPG_BF16;
	double m, v;

	h ^= h >> 31;
	h *= 0xd6e9f8cc5b8f7d1dull;
	h ^= h >> 29;
	if (i < 3)
		return r == 0 ? 256.0 : 1.0;
	/* bf16: 8 significant bits, 2^-13 .. 2^6; f16: 11 bits, 2^-14 .. 2^5 */
	m = bf ? (double)(128 + h % 128) : (double)(1024 + h % 1024);
	v = ldexp(m, (int)((h >> 12) % (bf ? 12 : 9)) - (bf ? 13 : 14));
	return (h >> 20) & 1 ? -v : v;
}

static int check_exact16(struct dpg_comm *c, dpg_dtype_t dt, dpg_op_t op, bool rs, size_t cnt,
			 int salt)
{
	int n = c->size, r;
	size_t total = rs ? cnt * (size_t)n : cnt, i;
	uint16_t *send = (uint16_t *)(void *)xmalloc(total * 2);
	uint16_t *recv = (uint16_t *)(void *)xmalloc(total * 2);
	struct dpg_err err = { "" };
	int rc;

	for (i = 0; i < total; i++)
		put(dt, send, i, exact_val(dt, c->rank, i, salt));
	rc = rs ? c->ops->reduce_scatter(c, send, recv, cnt, dt, op, NULL, &err)
		: c->ops->allreduce(c, send, recv, cnt, dt, op, NULL, &err);
	CHK(rc == 0, "%s %s: %d %s", rs ? "reduce_scatter" : "allreduce", DTN[dt], rc, err.msg);
	for (i = 0; i < cnt; i++) {
		size_t gi = rs ? (size_t)c->rank * cnt + i : i;
		double sum = 0;
		float f;
		uint16_t want;

		for (r = 0; r < n; r++)
			sum += stored(dt, exact_val(dt, r, gi, salt));
		f = (float)sum;	/* exact by construction */
		CHK((double)f == sum, "test inputs: inexact f32 sum");
		if (op == DPG_AVG)
			f /= (float)n;
		want = dt == DPG_BF16 ? dpg_f32_to_bf16(f) : dpg_f32_to_f16(f);
		CHK(recv[i] == want, "%s %s %s n=%d [%zu]: got %.9g (0x%04x), want one rounding "
		    "of the f32 sum %.9g (0x%04x)", rs ? "reduce_scatter" : "allreduce", DTN[dt],
		    OPN[op], n, gi, get(dt, recv, i), recv[i], (double)f, want);
	}
	free(send);
	free(recv);
	return 0;
}

static int exact16_child(int rank, void *argp)
{
	const struct coll_arg *a = argp;
	struct rank_env re;
	size_t counts[] = { 3, 7, 1001, 70001 };
	int d, o, k, salt = 0;

	if (rank_start(&re, rank, a->n, a->name, a->layout, 30.0, NULL) != 0)
		return 1;
	for (d = 0; d < 2; d++)
		for (o = 0; o < 2; o++)
			for (k = 0; k < 4; k++) {
				dpg_dtype_t dt = d ? DPG_BF16 : DPG_F16;
				dpg_op_t op = o ? DPG_AVG : DPG_SUM;

				if (check_exact16(&re.c, dt, op, false, counts[k], ++salt) ||
				    check_exact16(&re.c, dt, op, true, counts[k], ++salt))
					return 1;
			}
	rank_stop(&re);
	return 0;
}

static void test_half_one_rounding(void **state)
{
	static const int cases[][2] = { { 3, L_TCP }, { 4, L_TCP }, { 3, L_SHM }, { 4, L_HALF },
					{ 3, L_RING_SHM }, { 5, L_INTERLEAVE }, { 2, L_TCP } };
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct coll_arg a = { .n = cases[i][0], .layout = cases[i][1] };

		snprintf(a.name, sizeof(a.name), "x16.%d.%s.%d", g_name_seq++,
			 layout_name(a.layout), a.n);
		assert_int_equal(run_ranks(a.n, exact16_child, &a, 60), 0);
	}
}

/* Integer avg divides the sum in a wider type: avg(2e9, 2e9) = 2e9. */
static int int_avg_child(int rank, void *argp)
{
	const struct coll_arg *a = argp;
	struct rank_env re;
	struct dpg_err err = { "" };
	int32_t x32[5], r32[5 * 4];
	int64_t x64[5], r64[5 * 4];
	int i, rc;

	if (rank_start(&re, rank, a->n, a->name, a->layout, 30.0, NULL) != 0)
		return 1;
	for (i = 0; i < 5; i++) {
		x32[i] = i % 2 ? -2000000000 : 2000000000;
		x64[i] = i % 2 ? -9000000000000000000ll : 9000000000000000000ll;
	}
	rc = re.c.ops->allreduce(&re.c, x32, r32, 5, DPG_I32, DPG_AVG, NULL, &err);
	CHK(rc == 0, "i32 avg: %s", err.msg);
	rc = re.c.ops->allreduce(&re.c, x64, r64, 5, DPG_I64, DPG_AVG, NULL, &err);
	CHK(rc == 0, "i64 avg: %s", err.msg);
	for (i = 0; i < 5; i++) {
		CHK(r32[i] == x32[i], "i32 avg n=%d [%d] = %d, want %d", a->n, i, r32[i], x32[i]);
		CHK(r64[i] == x64[i], "i64 avg n=%d [%d] = %lld, want %lld", a->n, i,
		    (long long)r64[i], (long long)x64[i]);
	}
	/* reduce_scatter: the same, rank r's block of 5 */
	{
		int32_t s32[5 * 4];
		int64_t s64[5 * 4];

		for (i = 0; i < 5 * a->n; i++) {
			s32[i] = x32[i % 5];
			s64[i] = x64[i % 5];
		}
		rc = re.c.ops->reduce_scatter(&re.c, s32, r32, 5, DPG_I32, DPG_AVG, NULL, &err);
		CHK(rc == 0, "i32 avg rs: %s", err.msg);
		rc = re.c.ops->reduce_scatter(&re.c, s64, r64, 5, DPG_I64, DPG_AVG, NULL, &err);
		CHK(rc == 0, "i64 avg rs: %s", err.msg);
		for (i = 0; i < 5; i++)
			CHK(r32[i] == x32[i] && r64[i] == x64[i], "rs avg n=%d [%d] = %d / %lld",
			    a->n, i, r32[i], (long long)r64[i]);
	}
	rank_stop(&re);
	return 0;
}

static void test_int_avg_wide(void **state)
{
	static const int cases[][2] = { { 2, L_SHM }, { 2, L_TCP }, { 3, L_TCP }, { 4, L_HALF },
					{ 3, L_SHM } };
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct coll_arg a = { .n = cases[i][0], .layout = cases[i][1] };

		snprintf(a.name, sizeof(a.name), "iavg.%d.%s.%d", g_name_seq++,
			 layout_name(a.layout), a.n);
		assert_int_equal(run_ranks(a.n, int_avg_child, &a, 60), 0);
	}
}

/* Collectives that do not match: every rank gets an error naming both
 * sides within a few seconds (the call timeout is 20 s). */
struct mm_call {
	int kind;		/* 0 allreduce, 1 broadcast, 2 barrier, 3 rs, 4 ag */
	size_t count;
	dpg_dtype_t dt;
	dpg_op_t op;
	int root;
	uint64_t seq;
};

struct mm_case {
	struct mm_call a, b;	/* b: what rank `odd` issues; a: everyone else */
	const char *sa, *sb;	/* both must appear in every detailed message */
};

static const struct mm_case MM_CASES[] = {
	{ { 0, 8, DPG_F32, DPG_SUM, 0, 0 }, { 0, 4, DPG_F32, DPG_SUM, 0, 0 }, "8 x f32", "4 x f32" },
	{ { 0, 8, DPG_F32, DPG_SUM, 0, 0 }, { 0, 8, DPG_I32, DPG_SUM, 0, 0 }, "x f32", "x i32" },
	{ { 0, 8, DPG_F32, DPG_SUM, 0, 0 }, { 0, 8, DPG_F32, DPG_MAX, 0, 0 }, "sum", "max" },
	{ { 1, 8, DPG_F32, DPG_SUM, 0, 0 }, { 1, 8, DPG_F32, DPG_SUM, 1, 0 }, "root 0", "root 1" },
	{ { 0, 8, DPG_F32, DPG_SUM, 0, 0 }, { 1, 4, DPG_F32, DPG_SUM, 0, 0 }, "allreduce",
	  "broadcast" },
	{ { 2, 0, DPG_F32, DPG_SUM, 0, 0 }, { 0, 8, DPG_F32, DPG_SUM, 0, 0 }, "barrier",
	  "allreduce" },
	{ { 3, 8, DPG_F32, DPG_SUM, 0, 0 }, { 4, 8, DPG_F32, DPG_SUM, 0, 0 }, "reduce_scatter",
	  "all_gather" },
	/* a rank whose previous call failed its argument checks (coll.c counts
	 * it): its next call is #1 where the others issue #0 */
	{ { 0, 8, DPG_F32, DPG_SUM, 0, 0 }, { 0, 8, DPG_F32, DPG_SUM, 0, 1 }, "#0", "#1" },
	/* an allreduce that runs as a reduce-scatter and an all-gather (4
	 * ranks over TCP) against the reduce-scatter of its first half */
	{ { 0, 8192, DPG_F32, DPG_SUM, 0, 0 }, { 3, 2048, DPG_F32, DPG_SUM, 0, 0 }, "allreduce",
	  "reduce_scatter" },
};

struct mm_arg {
	int n, layout, odd, which;
	char name[48];
};

static int mm_issue(struct dpg_comm *c, const struct mm_call *k, float *buf, struct dpg_err *err)
{
	c->seq = k->seq;
	switch (k->kind) {
	case 0:
		return c->ops->allreduce(c, buf, buf, k->count, k->dt, k->op, NULL, err);
	case 1:
		return c->ops->broadcast(c, buf, k->count, k->dt, k->root, NULL, err);
	case 2:
		return c->ops->barrier(c, err);
	case 3:
		return c->ops->reduce_scatter(c, buf, buf + 64, k->count, k->dt, k->op, NULL, err);
	default:
		return c->ops->all_gather(c, buf, buf + 64, k->count, k->dt, NULL, err);
	}
}

static int mm_child(int rank, void *argp)
{
	const struct mm_arg *a = argp;
	const struct mm_case *mc = &MM_CASES[a->which];
	const struct mm_call *k;
	struct rank_env re;
	struct dpg_err err = { "" };
	float buf[8192 + 64] = { 0 };
	char other[32];
	double t0;
	int rc;

	if (rank_start(&re, rank, a->n, a->name, a->layout, 20.0, NULL) != 0)
		return 1;
	t0 = mono_s();
	k = rank == a->odd ? &mc->b : &mc->a;
	rc = mm_issue(&re.c, k, buf, &err);
	if (rc == 0 && k->kind == 1 && k->root == rank && a->layout != L_SHM)
		/* a ring broadcast's root takes nothing from the others: it
		 * checks the stamp its ring predecessor sent back at its next
		 * call, which fails instead */
		rc = re.c.ops->allreduce(&re.c, buf, buf, 4, DPG_F32, DPG_SUM, NULL, &err);
	CHK(rc == -DPG_ERR_INVALID, "case %d (%s): expected a mismatch error, got %d after "
	    "%.2f s: %s", a->which, layout_name(a->layout), rc, mono_s() - t0, err.msg);
	CHK(mono_s() - t0 < 5.0, "case %d: the mismatch took %.2f s", a->which, mono_s() - t0);
	/* the odd rank may name either neighbour; the others name the odd one */
	snprintf(other, sizeof(other), "rank %d", rank == a->odd ? (a->odd + 1) % a->n : a->odd);
	if (rank == a->odd && strstr(err.msg, other) == NULL)
		snprintf(other, sizeof(other), "rank %d", (a->odd + a->n - 1) % a->n);
	CHK(strstr(err.msg, "mismatch") != NULL && strstr(err.msg, other) != NULL,
	    "case %d (%s n=%d): message does not name %s: %s", a->which, layout_name(a->layout),
	    a->n, other, err.msg);
	if (a->n == 2)
		CHK(strstr(err.msg, mc->sa) != NULL && strstr(err.msg, mc->sb) != NULL,
		    "case %d (%s): message does not show both sides ('%s', '%s'): %s", a->which,
		    layout_name(a->layout), mc->sa, mc->sb, err.msg);
	/* the communicator stays failed */
	CHK(re.c.ops->allreduce(&re.c, buf, buf, 4, DPG_F32, DPG_SUM, NULL, &err) != 0,
	    "a call after the mismatch succeeded");
	rank_stop(&re);
	return 0;
}

static void run_mismatch(int n, int layout, int odd, int which)
{
	struct mm_arg a = { .n = n, .layout = layout, .odd = odd, .which = which };

	snprintf(a.name, sizeof(a.name), "mm%d.%s.%d", g_name_seq++, layout_name(layout), n);
	assert_int_equal(run_ranks(n, mm_child, &a, 40), 0);
}

static void test_mismatch(void **state)
{
	static const int layouts[] = { L_SHM, L_TCP, L_RING_SHM };
	size_t w;
	int l;

	(void)state;
	for (l = 0; l < 3; l++)
		for (w = 0; w < sizeof(MM_CASES) / sizeof(MM_CASES[0]); w++)
			run_mismatch(2, layouts[l], 1, (int)w);
	/* more ranks: count and kind, the odd one in the middle */
	run_mismatch(3, L_SHM, 1, 0);
	run_mismatch(3, L_TCP, 1, 0);
	run_mismatch(4, L_HALF, 2, 0);
	run_mismatch(3, L_TCP, 1, 7);
	run_mismatch(4, L_TCP, 1, 6);	/* an exchange against a neighbour exchange */
	run_mismatch(4, L_TCP, 2, 6);
	run_mismatch(4, L_TCP, 1, 8);	/* a split allreduce keeps its own stamp */
	run_mismatch(3, L_SHM, 2, 4);
}

/* Ring broadcasts leave their root's check of the stamp from its ring
 * predecessor for later (ring.c): many from one root in a row (more than
 * DPG_RING_DEFER, so that the owed checks are made on the way), from
 * another root, then other calls, all correct (also two-way, where the
 * ranks reached backward owe the check of their idle forward hop); and
 * ranks that disagree on the root in every call fail with a mismatch
 * within 2 * DPG_RING_DEFER calls instead of completing them all (or
 * waiting for the timeout). */
struct defer_arg {
	int n, layout, disagree;
	char name[48];
};

static int defer_child(int rank, void *argp)
{
	const struct defer_arg *a = argp;
	struct rank_env re;
	struct dpg_comm *c = &re.c;
	struct dpg_err err = { "" };
	int i, rc, salt = 5000;

	if (rank_start(&re, rank, a->n, a->name, a->layout, 20.0, NULL) != 0)
		return 1;
	if (a->disagree) {
		float x[8] = { 0 };

		for (i = 0; i < 3 * DPG_RING_DEFER; i++) {
			rc = c->ops->broadcast(c, x, 8, DPG_F32, rank % 2, NULL, &err);
			if (rc != 0)
				break;
		}
		CHK(rc == -DPG_ERR_INVALID && strstr(err.msg, "mismatch") != NULL,
		    "%s n=%d: disagreeing roots: call %d gave %d: %s", layout_name(a->layout),
		    a->n, i, rc, err.msg);
		/* at most two rounds of deferred stamps (a rank may learn of it
		 * one call after the ranks that meet the mismatch) */
		CHK(i <= 2 * DPG_RING_DEFER, "%s: the mismatch took %d calls",
		    layout_name(a->layout), i);
		rank_stop(&re);
		return 0;
	}
	for (i = 0; i < 2 * DPG_RING_DEFER + 3; i++)
		if (check_broadcast(c, DPG_F32, 5 + (size_t)i, 0, ++salt))
			return 1;
	for (i = 0; i < DPG_RING_DEFER + 1; i++)
		if (check_broadcast(c, DPG_BF16, 1000 + (size_t)i, a->n - 1, ++salt))
			return 1;
	if (check_allreduce(c, DPG_F32, DPG_SUM, 77, false, false, ++salt) ||
	    check_broadcast(c, DPG_I32, 9, 0, ++salt) ||
	    check_all_gather(c, DPG_F32, 13, 0, ++salt))
		return 1;
	CHK(c->ops->barrier(c, &err) == 0, "barrier: %s", err.msg);
	rank_stop(&re);
	return 0;
}

static void test_bcast_deferred(void **state)
{
	static const int cases[][3] = { { 2, L_TCP, 0 }, { 3, L_RING_SHM, 0 }, { 4, L_HALF, 0 },
					{ 3, L_TCP, 0 }, { 4, L_TCP, 0 }, { 2, L_TCP, 1 },
					{ 2, L_RING_SHM, 1 }, { 3, L_TCP, 1 } };
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct defer_arg a = { .n = cases[i][0], .layout = cases[i][1],
				       .disagree = cases[i][2] };

		snprintf(a.name, sizeof(a.name), "defer%d.%s.%d", g_name_seq++,
			 layout_name(a.layout), a.n);
		assert_int_equal(run_ranks(a.n, defer_child, &a, 60), 0);
	}
}

/* Broadcasts in lockstep (ring.c; from LOCK_BYTES here, where the default
 * is 16 MiB at 2 ranks of one machine): sizes on both sides of the threshold from every
 * root, a run from one root longer than DPG_RING_DEFER mixing deferred and
 * lockstep stamps, other calls between; TCP hops take the token, shared-
 * memory hops only skip the deferral. */

struct lock_arg {
	int n, layout, which;
	char name[48];
};

static int lock_child(int rank, void *argp)
{
	const struct lock_arg *a = argp;
	static const size_t counts[] = { 1023, 1024, 1025, 7, 70001, 100003 };
	struct rank_env re;
	struct dpg_comm *c = &re.c;
	struct dpg_err err = { "" };
	int salt = 7000, root, i;
	size_t k;

	if (rank_start(&re, rank, a->n, a->name, a->layout, 20.0, NULL) != 0)
		return 1;
	for (root = 0; root < a->n; root++)
		for (k = 0; k < 6; k++)
			if (check_broadcast(c, counts[k] > 5000 ? DPG_F16 : DPG_F32,
					    counts[k] + (size_t)root % 2, root, ++salt))
				return 1;
	for (i = 0; i < DPG_RING_DEFER + 3; i++)
		if (check_broadcast(c, DPG_F32, i % 3 == 0 ? 5000 : 9 + (size_t)i, a->n - 1,
				    ++salt))
			return 1;
	if (check_allreduce(c, DPG_F32, DPG_SUM, 5001, false, false, ++salt) ||
	    check_broadcast(c, DPG_F64, 4096, 0, ++salt) ||
	    check_all_gather(c, DPG_F32, 1500, 0, ++salt) ||
	    check_broadcast(c, DPG_I32, 65536, a->n / 2, ++salt))
		return 1;
	CHK(c->ops->barrier(c, &err) == 0, "barrier: %s", err.msg);
	rank_stop(&re);
	return 0;
}

/* Calls that do not match around a lockstep broadcast (2 ranks): rank 1's
 * count differs (the token shows it to the root), rank 1 runs an allreduce
 * or a broadcast below the threshold (it sees the root's stamp, which goes
 * at once), or each rank names itself the root (no stamp is deferred in
 * lockstep, so each sees the other's): every rank gets a mismatch error
 * naming the other within seconds, not the 20 s timeout. */
static const char *const LOCK_MM[] = { "counts", "allreduce", "small", "roots" };

static int lock_mm_issue(struct dpg_comm *c, int which, int rank, float *buf,
			 struct dpg_err *err)
{
	switch (which) {
	case 0:
		return c->ops->broadcast(c, buf, rank == 0 ? 4096 : 2048, DPG_F32, 0, NULL, err);
	case 1:
		return rank == 0 ? c->ops->broadcast(c, buf, 4096, DPG_F32, 0, NULL, err)
				 : c->ops->allreduce(c, buf, buf, 4096, DPG_F32, DPG_SUM, NULL, err);
	case 2:
		return c->ops->broadcast(c, buf, rank == 0 ? 4096 : 8, DPG_F32, 0, NULL, err);
	default:
		return c->ops->broadcast(c, buf, 4096, DPG_F32, rank, NULL, err);
	}
}

static int lock_mm_child(int rank, void *argp)
{
	const struct lock_arg *a = argp;
	struct rank_env re;
	struct dpg_err err = { "" };
	float *buf = (float *)(void *)xmalloc(4096 * sizeof(float));
	char other[32];
	double t0;
	int rc;

	memset(buf, 0, 4096 * sizeof(float));
	if (rank_start(&re, rank, a->n, a->name, a->layout, 20.0, NULL) != 0)
		return 1;
	t0 = mono_s();
	rc = lock_mm_issue(&re.c, a->which, rank, buf, &err);
	snprintf(other, sizeof(other), "rank %d", 1 - rank);
	CHK(rc == -DPG_ERR_INVALID && strstr(err.msg, "mismatch") != NULL &&
	    strstr(err.msg, other) != NULL, "lockstep %s (%s): expected a mismatch naming %s, "
	    "got %d after %.2f s: %s", LOCK_MM[a->which], layout_name(a->layout), other, rc,
	    mono_s() - t0, err.msg);
	CHK(mono_s() - t0 < 5.0, "lockstep %s: the mismatch took %.2f s", LOCK_MM[a->which],
	    mono_s() - t0);
	CHK(strstr(err.msg, "rank 0 (") != NULL && strstr(err.msg, "rank 1 (") != NULL,
	    "lockstep %s: the message does not show both sides: %s", LOCK_MM[a->which],
	    err.msg);
	fprintf(stderr, "  [lockstep %s %s rank %d: %s]\n", LOCK_MM[a->which],
		layout_name(a->layout), rank, err.msg);
	CHK(re.c.ops->broadcast(&re.c, buf, 4096, DPG_F32, 0, NULL, &err) != 0,
	    "a call after the mismatch succeeded");
	free(buf);
	rank_stop(&re);
	return 0;
}

static void run_lock(int n, int layout, int (*fn)(int, void *), int which)
{
	struct lock_arg a = { .n = n, .layout = layout, .which = which };

	snprintf(a.name, sizeof(a.name), "lock%d.%s.%d", g_name_seq++, layout_name(layout), n);
	g_lockstep = LOCK_BYTES;
	assert_int_equal(run_ranks(n, fn, &a, 60), 0);
	g_lockstep = 0;
}

static void test_bcast_lockstep(void **state)
{
	static const int cases[][2] = { { 2, L_TCP }, { 3, L_TCP }, { 4, L_TCP }, { 4, L_HALF },
					{ 5, L_INTERLEAVE }, { 3, L_RING_SHM } };
	size_t i;
	int w;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_lock(cases[i][0], cases[i][1], lock_child, 0);
	for (w = 0; w < 4; w++)
		run_lock(2, L_TCP, lock_mm_child, w);
	run_lock(2, L_RING_SHM, lock_mm_child, 3);
}

/* Abort on shared memory: rank 0 is aborted while it waits for rank 1;
 * rank 1 arrives later and must not complete that allreduce with DPG_OK. */
static int late_abort_child(int rank, void *argp)
{
	const struct fail_arg *a = argp;
	struct rank_env re;
	struct dpg_err err = { "" };
	int rc;

	g_abort_flag = 0;
	if (rank_start(&re, rank, a->n, a->name, a->layout, 20.0, &g_abort_flag) != 0)
		return 1;
	if (rank == 0) {
		pthread_t t;

		g_abort_comm = &re.c;
		pthread_create(&t, NULL, raise_abort, &re);
		float *y = (float *)(void *)xmalloc(100000 * sizeof(float));

		rc = re.c.ops->allreduce(&re.c, y, y, a->mode ? 100000 : 64, DPG_F32, DPG_SUM,
					 NULL, &err);
		free(y);
		pthread_join(t, NULL);
		CHK(rc == -DPG_ERR_ABORTED, "expected aborted, got %d: %s", rc, err.msg);
		usleep(1500000);	/* stay alive while rank 1 runs its call */
	} else {
		size_t cnt = a->mode ? 100000 : 64;
		float *y = (float *)(void *)xmalloc(cnt * sizeof(float));

		usleep(800000);		/* late: after rank 0's abort */
		rc = re.c.ops->allreduce(&re.c, y, y, cnt, DPG_F32, DPG_SUM, NULL, &err);
		free(y);
		CHK(rc == -DPG_ERR_PEER || rc == -DPG_ERR_ABORTED,
		    "the late peer got %d (%s) while rank 0 was aborted", rc, err.msg);
		CHK(strstr(err.msg, "rank 0") != NULL, "message: %s", err.msg);
	}
	rank_stop(&re);
	return 0;
}

static void test_abort_late_peer(void **state)
{
	int mode;

	(void)state;
	for (mode = 0; mode < 2; mode++) {
		struct fail_arg a = { .n = 2, .layout = L_SHM, .victim = -1, .mode = mode };

		snprintf(a.name, sizeof(a.name), "labort%d", g_name_seq++);
		assert_int_equal(run_ranks(2, late_abort_child, &a, 60), 0);
	}
}

/* ------------------------------------------------------------ strangers */

/* The rendezvous against other local users: strangers that connect to a
 * rank's data port (silent, garbage, a forged hello) must not stall or
 * break init, and a rank that hangs in init is the one a timeout names.
 * A forked attacker finds each rank's port in the address record the rank
 * publishes in the store, "<name>/cpu/<rank>". */
#define RDV_SILENT 24		/* silent connections per rank */

struct rdv_arg {
	int n, late, victim;	/* rank started 2 s late; rank that hangs */
	bool stall;		/* late: stopped 2 s after publishing instead */
	char name[48];
	atomic_int *done;	/* MAP_SHARED: ranks through init */
	atomic_int *refused;	/* MAP_SHARED: forged hellos refused */
	pid_t *victim_pid;	/* MAP_SHARED */
};

/* A rank's init without rank_start's checks (the blame test expects it to
 * fail): 0 or the backend's return code, message in err. */
static int rdv_init_rank(struct rank_env *re, int rank, const struct rdv_arg *a,
			 double timeout_s, struct dpg_err *err)
{
	struct dpg_backend_args o;
	char node[32];
	int r, rc;

	g_rank = rank;
	rc = dpg_store_connect("127.0.0.1", g_port, g_secret, sizeof(g_secret),
			       dpg_now_ms() + 20000, NULL, &re->st, err);
	if (rc != 0)
		return rc;
	memset(&re->c, 0, sizeof(re->c));
	re->c.rank = rank;
	re->c.size = a->n;
	for (r = 0; r < a->n; r++)
		re->world[r] = r;
	re->c.world_ranks = re->world;
	snprintf(re->c.name, sizeof(re->c.name), "%s", a->name);
	node_of(L_TCP, rank, a->n, node, sizeof(node));
	memset(&o, 0, sizeof(o));
	o.store = re->st;
	o.host = "127.0.0.1";
	o.node = node;
	o.timeout_s = timeout_s;
	return dpg_cpu_comm_init(&re->c, &o, err);
}

/* The data port rank r published (0 on failure). */
static uint16_t rdv_port(struct dpg_store *st, const char *name, int r)
{
	struct dpg_err err = { "" };
	char key[DPG_STORE_KEY_MAX];
	void *val = NULL;
	size_t len = 0;
	uint16_t port = 0;

	snprintf(key, sizeof(key), "%s/cpu/%d", name, r);
	if (dpg_store_get(st, key, &val, &len, dpg_now_ms() + 15000, &err) == 0 &&
	    len == sizeof(struct dpg_cpu_wire))
		port = (uint16_t)((const struct dpg_cpu_wire *)val)->port;
	free(val);
	return port;
}

static int rdv_dial(uint16_t port)
{
	struct dpg_err err = { "" };
	int fd = -1;

	return dpg_net_connect("127.0.0.1", port, dpg_now_ms() + 2000, NULL, &fd, &err) == 0
	       ? fd : -1;
}

/* A hello to rank r on channel ch claiming to come from rank `from`, with a
 * made-up MAC: refused means closed without the ack, within 1.5 s. */
static bool rdv_forge(uint16_t port, int r, int from, unsigned ch)
{
	uint8_t c[DPG_CPU_CHALLENGE_LEN], h[DPG_CPU_HELLO_LEN], ack[DPG_CPU_ACK_LEN];
	int fd = rdv_dial(port);
	bool refused;
	double t0;

	if (fd < 0)
		return false;
	/* the rank challenges once it serves its port (after the addresses) */
	if (dpg_net_read_full(fd, c, sizeof(c), dpg_now_ms() + 5000, NULL, NULL) != 0) {
		close(fd);
		return false;
	}
	memset(h, 0, sizeof(h));
	memcpy(h, DPG_CPU_HELLO_MAGIC, 8);
	h[8] = (uint8_t)ch;
	h[12] = (uint8_t)from;
	h[16] = (uint8_t)r;
	if (getrandom(h + 20, DPG_CPU_MAC_LEN, 0) != DPG_CPU_MAC_LEN)
		h[20] = 1;
	t0 = mono_s();
	(void)dpg_net_write_full(fd, h, sizeof(h), dpg_now_ms() + 1000, NULL, NULL);
	refused = dpg_net_read_full(fd, ack, sizeof(ack), dpg_now_ms() + 3000, NULL, NULL) ==
		  -DPG_ERR_PEER && mono_s() - t0 < 1.5;
	close(fd);
	return refused;
}

/* RDV_SILENT silent connections and one of garbage to rank r's port (until
 * a dial fails: the rank is through its hops and closed the port). */
static void rdv_flood(const struct rdv_arg *a, uint16_t port, int *fds)
{
	uint8_t junk[DPG_CPU_HELLO_LEN];
	int k;

	memset(junk, 0x5a, sizeof(junk));
	for (k = 0; k <= RDV_SILENT && atomic_load(a->done) < a->n; k++)
		if ((fds[k] = rdv_dial(port)) < 0)
			break;
	if (fds[RDV_SILENT] >= 0)
		(void)!write(fds[RDV_SILENT], junk, sizeof(junk));
}

/* The attacker: floods every rank's port as soon as it is published.  With
 * a->stall, rank 0 waits for its stopped predecessor (a->late) while serving
 * its port: it gets three forged hellos (the predecessor's data and notice
 * channels, and one claiming rank 1), then the predecessor is resumed 2 s
 * after the attack began.  Holds every connection until the ranks are
 * through init. */
static int rdv_attacker(const struct rdv_arg *a)
{
	static int fds[16][RDV_SILENT + 1];
	struct rank_env re;
	struct dpg_err err = { "" };
	int r, k;
	double t0 = mono_s();

	g_rank = a->n;
	memset(fds, -1, sizeof(fds));
	CHK(dpg_store_connect("127.0.0.1", g_port, g_secret, sizeof(g_secret),
			      dpg_now_ms() + 20000, NULL, &re.st, &err) == 0, "store: %s", err.msg);
	for (r = 0; r < a->n; r++) {
		uint16_t port = rdv_port(re.st, a->name, r);

		CHK(port != 0, "no address record of rank %d", r);
		rdv_flood(a, port, fds[r]);
		for (k = 0; k < 3 && r == 0 && a->stall; k++)
			if (rdv_forge(port, 0, k < 2 ? a->n - 1 : 1, (unsigned)k % 2))
				atomic_fetch_add(a->refused, 1);
	}
	while (a->stall && mono_s() - t0 < 2.0)
		usleep(10000);
	if (a->stall)
		kill(*a->victim_pid, SIGCONT);
	while (atomic_load(a->done) < a->n && mono_s() - t0 < 20.0)
		usleep(10000);
	for (r = 0; r < a->n; r++)
		for (k = 0; k <= RDV_SILENT; k++)
			if (fds[r][k] >= 0)
				close(fds[r][k]);
	dpg_store_close(re.st);
	return 0;
}

/* The victim stops itself once its address is in the store (it started
 * first, so it is still waiting for the others' addresses): a live rank that
 * never connects and never answers. */
static void *rdv_stop_self(void *argp)
{
	const struct rdv_arg *a = argp;
	struct dpg_store *st = NULL;
	struct dpg_err err = { "" };

	if (dpg_store_connect("127.0.0.1", g_port, g_secret, sizeof(g_secret),
			      dpg_now_ms() + 20000, NULL, &st, &err) == 0 &&
	    rdv_port(st, a->name, a->victim) != 0)
		kill(getpid(), SIGSTOP);
	dpg_store_close(st);
	return NULL;
}

static int strangers_child(int rank, void *argp)
{
	const struct rdv_arg *a = argp;
	struct rank_env re;
	struct dpg_err err = { "" };
	float x[64];
	double t0;
	int i, rc;

	pthread_t t;

	if (rank == a->n)
		return rdv_attacker(a);
	if (rank == a->late && a->stall) {
		*a->victim_pid = getpid();
		pthread_create(&t, NULL, rdv_stop_self, argp);
	} else {
		usleep(rank == a->late ? 2000000 : a->stall ? 300000 : 0);
	}
	t0 = mono_s();
	rc = rdv_init_rank(&re, rank, a, 8.0, &err);
	if (rank == a->late && a->stall)
		pthread_join(t, NULL);
	atomic_fetch_add(a->done, 1);
	CHK(rc == 0, "init with strangers at the port: %d %s", rc, err.msg);
	CHK(mono_s() - t0 < 4.0, "init took %.2f s", mono_s() - t0);
	for (i = 0; i < 64; i++)
		x[i] = (float)(rank + i);
	rc = re.c.ops->allreduce(&re.c, x, x, 64, DPG_F32, DPG_SUM, NULL, &err);
	CHK(rc == 0, "allreduce after init: %s", err.msg);
	for (i = 0; i < 64; i++)
		CHK(x[i] == (float)(a->n * i + a->n * (a->n - 1) / 2), "x[%d] = %g", i,
		    (double)x[i]);
	rank_stop(&re);
	return 0;
}

static void *rdv_map(size_t len)
{
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	assert_true(m != MAP_FAILED);
	memset(m, 0, len);
	return m;
}

static void run_strangers(int n, bool stall)
{
	char *sh = rdv_map(4096);
	struct rdv_arg a = { .n = n, .late = n - 1, .victim = stall ? n - 1 : -1, .stall = stall,
			     .done = (atomic_int *)sh, .refused = (atomic_int *)(sh + 64),
			     .victim_pid = (pid_t *)(sh + 128) };
	double t0 = mono_s();
	int bad;

	snprintf(a.name, sizeof(a.name), "strangers%d.%d", g_name_seq++, n);
	bad = run_ranks(n + 1, strangers_child, &a, 60);
	fprintf(stderr, "  [n=%d, %d strangers per port, rank %d %s: %.2f s, %d forged "
		"hellos refused]\n", n, RDV_SILENT + 1, n - 1, stall ? "stopped 2 s after "
		"publishing" : "2 s late", mono_s() - t0, atomic_load(a.refused));
	assert_int_equal(bad, 0);
	assert_int_equal(atomic_load(a.refused), stall ? 3 : 0);
	munmap(sh, 4096);
}

/* 3 and 4 ranks on the TCP ring, the last one started 2 s late (or stopped
 * for 2 s once it published its address), while a stranger holds 25
 * connections to every rank's port and forges hellos to a rank that waits:
 * init succeeds on every rank in < 4 s and every forgery is refused. */
static void test_rdv_strangers(void **state)
{
	(void)state;
	run_strangers(3, false);
	run_strangers(4, false);
	run_strangers(3, true);
	run_strangers(4, true);
}

static int blame_child(int rank, void *argp)
{
	const struct rdv_arg *a = argp;
	struct rank_env re;
	struct dpg_err err = { "" };
	char want[64], other[32];
	int r, rc;

	if (rank == a->victim) {
		pthread_t t;

		*a->victim_pid = getpid();
		pthread_create(&t, NULL, rdv_stop_self, argp);
		(void)rdv_init_rank(&re, rank, a, 3.0, &err);	/* fails once resumed */
		pthread_join(t, NULL);
		if (re.c.ops != NULL)
			re.c.ops->destroy(&re.c);
		dpg_store_close(re.st);
		return 0;
	}
	usleep(300000);
	rc = rdv_init_rank(&re, rank, a, 3.0, &err);
	if (atomic_fetch_add(a->done, 1) == a->n - 2)
		kill(*a->victim_pid, SIGCONT);
	CHK(rc == -DPG_ERR_TIMEOUT, "expected a timeout, got %d: %s", rc, err.msg);
	snprintf(want, sizeof(want), "rank %d (127.0.0.1)", a->victim);
	CHK(strstr(err.msg, want) != NULL, "the timeout does not blame %s: %s", want, err.msg);
	for (r = 0; r < a->n; r++) {
		snprintf(other, sizeof(other), "rank %d (", r);
		CHK(r == a->victim || strstr(err.msg, other) == NULL, "blames rank %d: %s", r,
		    err.msg);
	}
	if (re.c.ops != NULL)
		re.c.ops->destroy(&re.c);
	dpg_store_close(re.st);
	return 0;
}

/* 3 ranks on the TCP ring; rank 1 publishes its address and hangs: both of
 * its neighbours time out naming rank 1, and nobody else. */
static void test_rdv_blame(void **state)
{
	char *sh = rdv_map(4096);
	struct rdv_arg a = { .n = 3, .late = -1, .victim = 1, .done = (atomic_int *)sh,
			     .victim_pid = (pid_t *)(sh + 64) };
	int bad;

	(void)state;
	snprintf(a.name, sizeof(a.name), "blame%d", g_name_seq++);
	bad = run_ranks(3, blame_child, &a, 60);
	munmap(sh, 4096);
	assert_int_equal(bad, 0);
}

/* The hello's MAC: a right hello passes; any changed byte, another key,
 * communicator, token, nonce or addressee fails. */
static void test_hello_mac(void **state)
{
	struct dpg_cpu_hello_key k, k2, k3;
	struct dpg_err err = { "" };
	uint8_t ch[DPG_CPU_CHALLENGE_LEN], ch2[DPG_CPU_CHALLENGE_LEN], h[DPG_CPU_HELLO_LEN];
	unsigned chan = 9;
	int from = -1;
	size_t i;

	(void)state;
	assert_int_equal(dpg_cpu_hello_key(&k, "00112233445566778899aabbccddeeff", "w", &err), 0);
	assert_int_equal(dpg_cpu_hello_key(&k2, "00112233445566778899aabbccddeefe", "w", &err), 0);
	assert_int_equal(dpg_cpu_hello_key(&k3, "00112233445566778899aabbccddeeff", "w.s1", &err), 0);
	assert_int_not_equal(dpg_cpu_hello_key(&k2, "0011zz", "w", &err), 0);
	assert_int_equal(dpg_cpu_hello_key(&k2, "00112233445566778899aabbccddeefe", "w", &err), 0);
	assert_int_equal(dpg_cpu_challenge_make(ch), 0);
	assert_int_equal(dpg_cpu_challenge_make(ch2), 0);
	assert_true(dpg_cpu_hello_make(&k, ch, 1, 3, 4, 77, h));
	assert_true(dpg_cpu_hello_check(&k, ch, 4, 77, h, &chan, &from));
	assert_int_equal(chan, 1);
	assert_int_equal(from, 3);
	assert_false(dpg_cpu_hello_check(&k2, ch, 4, 77, h, &chan, &from));
	assert_false(dpg_cpu_hello_check(&k3, ch, 4, 77, h, &chan, &from));
	assert_false(dpg_cpu_hello_check(&k, ch2, 4, 77, h, &chan, &from));
	assert_false(dpg_cpu_hello_check(&k, ch, 4, 78, h, &chan, &from));
	assert_false(dpg_cpu_hello_check(&k, ch, 5, 77, h, &chan, &from));
	for (i = 0; i < sizeof(h); i++) {
		h[i] ^= 0x10;
		assert_false(dpg_cpu_hello_check(&k, ch, 4, 77, h, &chan, &from));
		h[i] ^= 0x10;
	}
	ch[0] ^= 1;
	assert_false(dpg_cpu_hello_make(&k, ch, 1, 3, 4, 77, h));	/* not a challenge */
	dpg_cpu_hello_key_wipe(&k);
	dpg_cpu_hello_key_wipe(&k2);
	dpg_cpu_hello_key_wipe(&k3);
}

/* ------------------------------------------------------------ in-process */

/* An independent reference: the nearest of two candidate encodings by
 * exact double arithmetic, ties to the even one. */
static double f16_value(uint16_t h)
{
	int e = (h >> 10) & 0x1f, m = h & 0x3ff;
	double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY)
		: ldexp(1024 + m, e - 25);

	return (h & 0x8000) ? -v : v;
}

static uint16_t f16_ref(float f)
{
	double a = fabs((double)f);
	uint16_t sign = signbit(f) ? 0x8000 : 0, lo = 0, hi = 0x7c00, mid;

	if (isnan(f))
		return 0x7e00;
	if (a >= 65520.0)
		return sign | 0x7c00;
	/* largest encoding <= a, by bisection over the ordered magnitudes */
	while (hi - lo > 1) {
		mid = (uint16_t)((lo + hi) / 2);
		if (f16_value(mid) <= a)
			lo = mid;
		else
			hi = mid;
	}
	{
		double dl = a - f16_value(lo), dh = f16_value(hi) - a;

		if (dh < dl || (dh == dl && (hi & 1) == 0))
			lo = hi;
	}
	return sign | lo;
}

static void test_conversions(void **state)
{
	uint32_t h, k;
	uint64_t x = 0x9e3779b97f4a7c15ull;

	(void)state;
	/* f16: every encoding decodes exactly and converts back to itself */
	for (h = 0; h < 0x10000; h++) {
		float f = dpg_f16_to_f32((uint16_t)h);
		double v = f16_value((uint16_t)h);

		if (isnan(v)) {
			assert_true(isnan(f));
			assert_int_equal(dpg_f32_to_f16(f) & 0x7e00, 0x7e00);
			continue;
		}
		assert_true((double)f == v);
		assert_int_equal(signbit(f) != 0, (h & 0x8000) != 0);
		assert_int_equal(dpg_f32_to_f16(f), h);
		/* the exact midpoint to the next encoding, and one f32 ulp around it */
		if ((h & 0x7fff) < 0x7bff) {
			double next = f16_value((uint16_t)(h + 1));
			float midf = (float)((v + next) / 2);

			assert_int_equal(dpg_f32_to_f16(midf), f16_ref(midf));
			assert_int_equal(dpg_f32_to_f16(nextafterf(midf, INFINITY)),
					 f16_ref(nextafterf(midf, INFINITY)));
			assert_int_equal(dpg_f32_to_f16(nextafterf(midf, -INFINITY)),
					 f16_ref(nextafterf(midf, -INFINITY)));
		}
	}
	assert_int_equal(dpg_f32_to_f16(65519.99f), 0x7bff);
	assert_int_equal(dpg_f32_to_f16(65520.0f), 0x7c00);
	assert_int_equal(dpg_f32_to_f16(-1e9f), 0xfc00);
	assert_int_equal(dpg_f32_to_f16(INFINITY), 0x7c00);
	assert_int_equal(dpg_f32_to_f16(ldexpf(1, -25)), 0);		/* tie to even: 0 */
	assert_int_equal(dpg_f32_to_f16(ldexpf(3, -26)), 1);		/* 0.75 ulp */
	/* random f32 bit patterns */
	for (k = 0; k < 300000; k++) {
		float f;
		uint32_t u;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		u = (uint32_t)x;
		if ((k & 1) == 0)	/* concentrate on the f16 range */
			u = (u & 0x80000000u) | (0x33000000u + u % 0x14800000u);
		memcpy(&f, &u, sizeof(f));
		if (isnan(f))
			continue;
		assert_int_equal(dpg_f32_to_f16(f), f16_ref(f));
		/* bf16: nearest, ties to even, by double arithmetic (the top
		 * binade, where rounding up overflows, is checked below) */
		if ((u & 0x7f800000u) < 0x7f000000u) {
			uint32_t t = u & 0xffff0000u;
			float lo, hi;
			double dl, dh;
			uint16_t want = (uint16_t)(u >> 16);

			memcpy(&lo, &t, sizeof(lo));
			t += 0x10000u;
			memcpy(&hi, &t, sizeof(hi));
			dl = fabs((double)f - (double)lo);
			dh = fabs((double)hi - (double)f);
			if (dh < dl || (dh == dl && (want & 1)))
				want++;
			assert_int_equal(dpg_f32_to_bf16(f), want);
		}
	}
	assert_int_equal(dpg_f32_to_bf16(NAN) & 0x7fc0, 0x7fc0);
	assert_int_equal(dpg_f32_to_bf16(-INFINITY), 0xff80);
	assert_int_equal(dpg_f32_to_bf16(3.4028235e38f), 0x7f80);	/* FLT_MAX rounds up */
	assert_int_equal(dpg_f32_to_bf16(-3.3895314e38f), 0xff7f);	/* largest finite */
	assert_int_equal(dpg_f32_to_bf16(ldexpf(1, -133)), 0x0001);	/* subnormal kept */
	assert_true(dpg_bf16_to_f32(0x3f80) == 1.0f);
}

/* Reference for one element of dpg_reduce_n: combine left to right in the
 * accumulation type (f32 for f16/bf16), divide once, round once. */
static double kref(dpg_dtype_t dt, dpg_op_t op, char *const *src, int ns, size_t i)
{
	int q;

	if (dt == DPG_F64) {
		double a = get(dt, src[0], i);

		for (q = 1; q < ns; q++)
			a = dpg_red_f64(a, get(dt, src[q], i), op);
		return op == DPG_AVG ? a / ns : a;
	}
	if (is_float(dt)) {
		float a = (float)get(dt, src[0], i);

		for (q = 1; q < ns; q++)
			a = dpg_red_f32(a, (float)get(dt, src[q], i), op);
		return stored(dt, op == DPG_AVG ? (double)(a / (float)ns) : (double)a);
	} else {
		int64_t a = (int64_t)get(dt, src[0], i);

		for (q = 1; q < ns; q++)
			a = dpg_red_i64(a, (int64_t)get(dt, src[q], i), op);
		return (double)(op == DPG_AVG ? a / ns : a);
	}
}

/* dpg_reduce_n against kref and dpg_red_elem: every dtype, op, length
 * around the tile size, 1..5 sources, in place and not. */
static void test_kernels(void **state)
{
	size_t lens[] = { 1, 5, 255, 256, 257, 1000 }, li, i;
	int d, o, ns, q;
	char *src[5], *dst;

	(void)state;
	for (q = 0; q < 5; q++)
		src[q] = xmalloc(1000 * 8);
	dst = xmalloc(1000 * 8);
	for (d = 0; d < 6; d++)
		for (o = 0; o < 4; o++)
			for (ns = 1; ns <= 5; ns++)
				for (li = 0; li < 6; li++) {
					size_t len = lens[li], es = dpg_dtype_size(DTYPES[d]);
					const void *s[5];
					bool inplace = li % 2 == 1;

					for (q = 0; q < ns; q++) {
						for (i = 0; i < len; i++)
							put(DTYPES[d], src[q], i,
							    inval(q, i, d * 4 + o, true) * 37.0);
						s[q] = src[q];
					}
					if (inplace) {
						memcpy(dst, src[0], len * es);
						s[0] = dst;
					}
					dpg_reduce_n(dst, s, ns, len, DTYPES[d], OPS[o],
						     OPS[o] == DPG_AVG ? ns : 0);
					for (i = 0; i < len; i++) {
						double g = get(DTYPES[d], dst, i);
						double w = kref(DTYPES[d], OPS[o], src, ns, i);

						if (!(g == w)) {
							fprintf(stderr, "%s %s nsrc %d len %zu [%zu]: "
								"%.9g vs %.9g\n", DTN[d], OPN[o], ns,
								len, i, g, w);
							fail();
						}
					}
					if (ns == 2) {	/* the header's element form agrees */
						char e[8];

						for (i = 0; i < len; i++) {
							dpg_red_elem(e, src[0] + i * es, src[1] + i * es, 0,
								     DTYPES[d], OPS[o],
								     OPS[o] == DPG_AVG ? 2 : 0);
							assert_memory_equal(e, dst + i * es, es);
						}
					}
				}
	for (q = 0; q < 5; q++)
		free(src[q]);
	free(dst);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_conversions),
		cmocka_unit_test(test_kernels),
		cmocka_unit_test(test_coll_n1),
		cmocka_unit_test(test_coll_n2_shm),
		cmocka_unit_test(test_coll_n2_tcp),
		cmocka_unit_test(test_coll_n3_half),
		cmocka_unit_test(test_coll_n3_ring_shm),
		cmocka_unit_test(test_coll_n5_shm),
		cmocka_unit_test(test_coll_n5_interleave),
		cmocka_unit_test(test_coll_n8_half),
		cmocka_unit_test(test_coll_n8_shm),
		cmocka_unit_test(test_coll_n8_tcp),
		cmocka_unit_test(test_coll_two_way),
		cmocka_unit_test(test_local_sndbuf),
		cmocka_unit_test(test_copy_stages),
		cmocka_unit_test(test_kill_tcp),
		cmocka_unit_test(test_kill_shm),
		cmocka_unit_test(test_kill_mixed),
		cmocka_unit_test(test_timeout),
		cmocka_unit_test(test_abort),
		cmocka_unit_test(test_half_one_rounding),
		cmocka_unit_test(test_int_avg_wide),
		cmocka_unit_test(test_mismatch),
		cmocka_unit_test(test_bcast_deferred),
		cmocka_unit_test(test_bcast_lockstep),
		cmocka_unit_test(test_abort_late_peer),
		cmocka_unit_test(test_rdv_strangers),
		cmocka_unit_test(test_rdv_blame),
		cmocka_unit_test(test_hello_mac),
	};

	signal(SIGPIPE, SIG_IGN);
	if (getenv("TEST_COLL_FILTER") != NULL)	/* e.g. "test_coll_n3*" */
		cmocka_set_test_filter(getenv("TEST_COLL_FILTER"));
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
