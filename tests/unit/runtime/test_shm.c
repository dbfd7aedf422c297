/* SPDX-License-Identifier: BSD-3-Clause */
/* test_shm.c - unit tests for lib/runtime/cpu/shm.c used directly (not
 * through the CPU backend, which test_cpu_backend.c covers): bad arguments, the
 * segment's name and its removal once all have attached, a peer's bad or missing
 * segment, mismatched settings, the pipes, the failure word, dpg_fail_format
 * and a dead or absent local rank noticed in bounded time; a corrupt failure
 * word, a full /dev/shm (a 1 MiB tmpfs in a private mount namespace) and
 * SIGTERM right after attaching (issue 17, item 8); the name a creator
 * killed before its peer attached left, removed by the next creator; the
 * streamed copies into the slots and the handoff estimate that chooses
 * them, and the single-copy reads of large all_gathers and broadcasts
 * (issue 16).
 *
 * Rank processes are forked per test and meet through a real rendezvous
 * store, served by a forked process.  Children report through their exit
 * status (and stderr); they never use cmocka. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

#include "cma.h"
#include "handoff.h"
#include "xcost.h"
#include "net.h"
#include "shm.h"
#include "store.h"
#include "storeproc.h"

#define MAXR 3

static pid_t g_store_pid;
static uint8_t g_secret[32];
static uint16_t g_port;
static int g_seq;		/* makes the store keys of every test distinct */
static int g_rank = -1;

static const char *const HOSTS[MAXR] = { "h0", "h1", "h2" };
static const int RANKS[MAXR] = { 0, 1, 2 };

#define CHK(cond, ...)								\
	do {									\
		if (!(cond)) {							\
			fprintf(stderr, "rank %d: line %d: ", g_rank, __LINE__); \
			fprintf(stderr, __VA_ARGS__);				\
			fputc('\n', stderr);					\
			return 1;						\
		}								\
	} while (0)

/* ------------------------------------------------------------ the store */

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

/* ------------------------------------------------------------ ranks */

/* What one rank of a test knows. */
struct rk {
	int rank, n, seq;
	struct dpg_store *st;
	pid_t pids[MAXR];
	struct dpg_shm_cfg cfg;
	char key[64];
};

static char *rkey(const struct rk *r, const char *what, int who, char *buf, size_t len)
{
	snprintf(buf, len, "t%d/%s/%d", r->seq, what, who);
	return buf;
}

/* Connect to the store, learn the other ranks' pids, fill a direct-mode
 * configuration with small slots. */
static int rk_start(struct rk *r, int rank, int n)
{
	struct dpg_err err = { "" };
	char k[64], v[16];
	int q;

	g_rank = rank;
	r->rank = rank;
	r->n = n;
	CHK(dpg_store_connect("127.0.0.1", g_port, g_secret, sizeof(g_secret),
			      dpg_now_ms() + 5000, NULL, &r->st, &err) == 0,
	    "store connect: %s", err.msg);
	snprintf(v, sizeof(v), "%d", (int)getpid());
	CHK(dpg_store_set(r->st, rkey(r, "pid", rank, k, sizeof(k)), v, strlen(v) + 1,
			  dpg_now_ms() + 5000, &err) == 0, "set pid: %s", err.msg);
	for (q = 0; q < n; q++) {
		void *val = NULL;
		size_t len = 0;

		CHK(dpg_store_get(r->st, rkey(r, "pid", q, k, sizeof(k)), &val, &len,
				  dpg_now_ms() + 5000, &err) == 0, "get pid: %s", err.msg);
		r->pids[q] = (pid_t)atoi(val);
		free(val);
	}
	snprintf(r->key, sizeof(r->key), "t%d/seg", r->seq);
	memset(&r->cfg, 0, sizeof(r->cfg));
	r->cfg.mode = DPG_SHM_DIRECT;
	r->cfg.nlocal = n;
	r->cfg.lrank = rank;
	r->cfg.ranks = RANKS;
	r->cfg.pids = r->pids;
	r->cfg.pid_ok = true;
	r->cfg.hosts = HOSTS;
	r->cfg.self = rank;
	r->cfg.oversub = 1;		/* never spin: the test machine is small */
	r->cfg.slot_bytes = 8192;
	r->cfg.pipe_to = -1;
	r->cfg.pipe_from = -1;
	r->cfg.store = r->st;
	r->cfg.key = r->key;
	r->cfg.deadline_ms = dpg_now_ms() + 5000;
	return 0;
}

static struct dpg_shm_wait wait_for(int64_t ms, const volatile int *abort)
{
	struct dpg_shm_wait w = { .deadline_ms = dpg_now_ms() + ms, .abort = abort,
				  .timeout_s = (double)ms / 1000.0 };

	return w;
}

/* Signal / wait for a named event through the store. */
static int post(struct rk *r, const char *what)
{
	struct dpg_err err = { "" };
	char k[64];

	CHK(dpg_store_set(r->st, rkey(r, what, 0, k, sizeof(k)), "1", 2,
			  dpg_now_ms() + 5000, &err) == 0, "post %s: %s", what, err.msg);
	return 0;
}

static int await(struct rk *r, const char *what)
{
	struct dpg_err err = { "" };
	void *val = NULL;
	size_t len;
	char k[64];

	CHK(dpg_store_get(r->st, rkey(r, what, 0, k, sizeof(k)), &val, &len,
			  dpg_now_ms() + 8000, &err) == 0, "await %s: %s", what, err.msg);
	free(val);
	return 0;
}

/* A rank that crashes must die of it (cmocka's handlers would go on
 * running the remaining tests inside the forked rank). */
static void child_signals(void)
{
	static const int sigs[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT };

	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], SIG_DFL);
}

/* Run fn in n forked ranks; every rank must exit 0 within limit_s. */
static void run_ranks(int n, int (*fn)(struct rk *r), double limit_s)
{
	pid_t pids[MAXR];
	int seq = ++g_seq, left = n, bad = 0;
	int64_t t0 = dpg_now_ms();

	fflush(NULL);
	for (int q = 0; q < n; q++) {
		pids[q] = fork();
		assert_true(pids[q] >= 0);
		if (pids[q] == 0) {
			struct rk r = { .seq = seq };
			int st;

			prctl(PR_SET_PDEATHSIG, SIGKILL);
			child_signals();
			st = rk_start(&r, q, n);
			if (st == 0)
				st = fn(&r);
			dpg_store_close(r.st);
			fflush(NULL);
#ifdef __SANITIZE_ADDRESS__
			if (st == 0 && __lsan_do_recoverable_leak_check() != 0)
				st = 7;
#endif
			_exit(st);
		}
	}
	while (left > 0) {
		int st;
		pid_t w = waitpid(-1, &st, WNOHANG);

		if (w > 0) {
			for (int q = 0; q < n; q++)
				if (pids[q] == w) {
					left--;
					if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
						fprintf(stderr, "rank %d: status 0x%x\n", q, st);
						bad++;
					}
				}
			continue;
		}
		if (dpg_now_ms() - t0 > (int64_t)(limit_s * 1000)) {
			for (int q = 0; q < n; q++)
				kill(pids[q], SIGKILL);
			while (waitpid(-1, &st, 0) > 0)
				;
			fail_msg("ranks still running after %.0f s: killed", limit_s);
		}
		usleep(5000);
	}
	if (bad > 0)
		fail_msg("%d rank(s) failed", bad);
}

static bool dev_shm_has(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), "/dev/shm%s", name);
	return access(path, F_OK) == 0;
}

/* ------------------------------------------------------------ tests */

/* Bad local rank / size: refused before anything is created. */
static void test_open_bad_args(void **state)
{
	static const struct { int nlocal, lrank; } bad[] = {
		{ 1, 0 }, { 0, 0 }, { -1, 0 }, { 2, -1 }, { 2, 2 }, { 3, 7 },
	};
	struct dpg_shm *s = (struct dpg_shm *)&s;
	struct dpg_err err;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct dpg_shm_cfg cfg = { .mode = DPG_SHM_DIRECT, .nlocal = bad[i].nlocal,
					   .lrank = bad[i].lrank, .oversub = 1 };
		char want[64];

		err.msg[0] = '\0';
		assert_int_equal(dpg_shm_open(&s, &cfg, &err), -DPG_ERR_INVALID);
		assert_null(s);
		snprintf(want, sizeof(want), "shm: bad local rank %d of %d", bad[i].lrank,
			 bad[i].nlocal);
		assert_string_equal(err.msg, want);
	}
	/* NULL handles are accepted by the cleanup and query functions */
	dpg_shm_unlink(NULL);
	dpg_shm_close(NULL);
	dpg_shm_kick(NULL);
	dpg_shm_fail_publish(NULL, &(struct dpg_fail){ DPG_FAIL_EXITED, 0, 0 });
	assert_false(dpg_shm_fail_get(NULL, &(struct dpg_fail){ 0, 0, 0 }));
	assert_false(dpg_shm_oversubscribed(NULL));
	assert_int_equal(dpg_shm_check(NULL, true, true, &err), 0);
}

/* The messages and codes of every failure kind. */
static void test_fail_format(void **state)
{
	static const char *const hosts[] = { "n0", "n1", "n2" };
	static const struct {
		struct dpg_fail f;
		int self, code;
		const char *msg;
	} t[] = {
		{ { DPG_FAIL_EXITED, 2, 2 }, 0, -DPG_ERR_PEER, "peer rank 2 (n2) exited" },
		{ { DPG_FAIL_EXITED, 2, 1 }, 0, -DPG_ERR_PEER,
		  "peer rank 2 (n2) exited (reported by rank 1)" },
		{ { DPG_FAIL_EXITED, 2, 1 }, 1, -DPG_ERR_PEER, "peer rank 2 (n2) exited" },
		{ { DPG_FAIL_CLOSED, 1, -1 }, 0, -DPG_ERR_PEER,
		  "peer rank 1 (n1) closed the connection" },
		{ { DPG_FAIL_ABORTED, 0, 0 }, 1, -DPG_ERR_PEER, "peer rank 0 (n0) aborted" },
		{ { DPG_FAIL_TIMEOUT, 1, 0 }, 2, -DPG_ERR_TIMEOUT,
		  "timed out waiting for peer rank 1 (n1) (reported by rank 0)" },
		{ { DPG_FAIL_TIMEOUT, -1, 2 }, 0, -DPG_ERR_TIMEOUT,
		  "timed out waiting for the peers (reported by rank 2)" },
		{ { DPG_FAIL_PROTO, 1, 1 }, 0, -DPG_ERR_PEER,
		  "peer rank 1 (n1) broke the protocol" },
	};
	struct dpg_err err;

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		err.msg[0] = '\0';
		assert_int_equal(dpg_fail_format(&t[i].f, t[i].self, hosts, &err), t[i].code);
		assert_string_equal(err.msg, t[i].msg);
	}
	assert_int_equal(dpg_fail_format(&t[0].f, 0, NULL, &err), -DPG_ERR_PEER);
	assert_string_equal(err.msg, "peer rank 2 (?) exited");
	assert_int_equal(dpg_fail_format(&t[0].f, 0, hosts, NULL), -DPG_ERR_PEER);
}

/* Which failures may be used (their indices are then safe for an array of
 * nranks); the messages of the two protocol errors. */
static void test_fail_valid(void **state)
{
	static const char *const hosts[] = { "n0", "n1" };
	static const struct { struct dpg_fail f; bool ok; } t[] = {
		{ { DPG_FAIL_EXITED, 1, 0 }, true }, { { DPG_FAIL_TIMEOUT, -1, 1 }, true },
		{ { DPG_FAIL_CLOSED, 1, -1 }, true }, { { DPG_FAIL_WAITING, 0, 1 }, true },
		{ { DPG_FAIL_BADWORD, -1, 1 }, true }, { { DPG_FAIL_BADNOTICE, 1, -1 }, true },
		{ { DPG_FAIL_BADNOTICE, -1, 0 }, false }, { { DPG_FAIL_NONE, 0, 0 }, false },
		{ { 99, 0, 0 }, false }, { { -3, 0, 0 }, false },
		{ { DPG_FAIL_EXITED, 2, 0 }, false }, { { DPG_FAIL_EXITED, -2, 0 }, false },
		{ { DPG_FAIL_EXITED, 0, 2 }, false }, { { DPG_FAIL_EXITED, 0, -2 }, false },
		{ { DPG_FAIL_EXITED, 0x7fffffff, 0 }, false },
		{ { DPG_FAIL_EXITED, 0, (int)0x80000000u }, false },
	};
	struct dpg_err err;

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		assert_int_equal(dpg_fail_valid(&t[i].f, 2), t[i].ok);
	assert_int_equal(dpg_fail_format(&(struct dpg_fail){ DPG_FAIL_BADWORD, -1, 1 }, 0,
					 hosts, &err), -DPG_ERR_PEER);
	assert_string_equal(err.msg, "protocol error: the node's shared segment holds an "
			    "invalid failure word (corrupt, or written by another process) "
			    "(reported by rank 1)");
	assert_int_equal(dpg_fail_format(&(struct dpg_fail){ DPG_FAIL_BADNOTICE, 1, -1 }, 0,
					 hosts, &err), -DPG_ERR_PEER);
	assert_string_equal(err.msg, "protocol error: peer rank 1 (n1) sent an invalid "
			    "failure notice");
}

/* The segment is /dev/shm/dpg.<creator pid>.<hex>, published under the key;
 * it works after dpg_shm_unlink removed the name; close cleans up. */
static int lifecycle_rank(struct rk *r)
{
	struct dpg_err err = { "" };
	struct dpg_shm_wait w = wait_for(5000, NULL);
	struct dpg_shm *s = NULL;
	void *val = NULL;
	size_t len = 0;
	char prefix[32];
	float x[37], y[37];
	int rc;

	rc = dpg_shm_open(&s, &r->cfg, &err);
	CHK(rc == 0 && s != NULL, "open: %d %s", rc, err.msg);
	CHK(dpg_store_get(r->st, r->key, &val, &len, dpg_now_ms() + 1000, &err) == 0,
	    "get name: %s", err.msg);
	snprintf(prefix, sizeof(prefix), "/dpg.%d.", (int)r->pids[0]);
	CHK(len == strlen(val) + 1 && strncmp(val, prefix, strlen(prefix)) == 0 &&
	    strlen(val) == strlen(prefix) + 8, "segment name '%s'", (char *)val);
	CHK(dpg_shm_oversubscribed(s), "oversub = 1 not kept");
	CHK(dpg_shm_barrier(s, &w, &err) == 0, "barrier: %s", err.msg);
	/* every local rank has attached: the last one removed the name */
	CHK(!dev_shm_has(val), "%s still in /dev/shm once all attached", (char *)val);
	dpg_shm_unlink(s);		/* every rank: only the creator's counts */
	dpg_shm_unlink(s);		/* twice: harmless */
	CHK(dpg_shm_barrier(s, &w, &err) == 0, "barrier: %s", err.msg);
	CHK(!dev_shm_has(val), "%s still in /dev/shm after unlink", (char *)val);
	/* the mapping still works */
	for (int i = 0; i < 37; i++)
		x[i] = (float)(i * (r->rank + 1));
	CHK(dpg_shm_allreduce(s, x, y, 37, DPG_F32, DPG_SUM, &w, &err) == 0,
	    "allreduce: %s", err.msg);
	for (int i = 0; i < 37; i++)
		CHK(y[i] == (float)(i * r->n * (r->n + 1) / 2), "y[%d] = %g", i, y[i]);
	for (int i = 0; i < 37; i++)
		x[i] = r->rank == 1 ? (float)i + 0.5f : -1.0f;
	CHK(dpg_shm_broadcast(s, x, 37, DPG_F32, 1, &w, &err) == 0, "bcast: %s", err.msg);
	for (int i = 0; i < 37; i++)
		CHK(x[i] == (float)i + 0.5f, "bcast x[%d] = %g", i, x[i]);
	{
		float g[3 * MAXR], v = (float)(10 * r->rank);
		float in[3] = { v, v + 1, v + 2 };

		CHK(dpg_shm_all_gather(s, in, g, 3, DPG_F32, &w, &err) == 0,
		    "all_gather: %s", err.msg);
		for (int q = 0; q < r->n; q++)
			for (int k = 0; k < 3; k++)
				CHK(g[q * 3 + k] == (float)(10 * q + k), "gather [%d]", q * 3 + k);
	}
	CHK(dpg_shm_check(s, false, false, &err) == 0, "check: %s", err.msg);
	CHK(dpg_shm_barrier(s, &w, &err) == 0, "barrier: %s", err.msg);
	dpg_shm_close(s);
	free(val);
	return 0;
}

static void test_segment_lifecycle(void **state)
{
	(void)state;
	run_ranks(2, lifecycle_rank, 10);
	run_ranks(3, lifecycle_rank, 10);
}

/* The copy collectives in stages under a slot (what a rank per CPU gets:
 * oversub = 0), default slots: sizes from under one 16 KiB stage to several
 * full slots, odd counts, every root, in place and not, back to back so
 * that the stages' offsets in the slots come round; every element checked
 * (the value encodes rank, call and index). */
static float split_val(int q, int call, size_t i)
{
	return (float)((q + 1) * 1000003 + call * 7919 + (int)(i % 100003));
}

/* cma: the configuration's (-1: through the slots); *chose (when not
 * NULL): what the handle chose for single copy after the calls. */
static int split_run(struct rk *r, int oversub, int cma, int *chose)
{
	/* 2047 / 2049 floats: either side of single copy's least block */
	static const size_t counts[] = { 3, 2047, 2049, 4095, 4097, 65537, 300001, 1 << 20 };
	struct dpg_err err = { "" };
	struct dpg_shm_wait w = wait_for(20000, NULL);
	struct dpg_shm *s = NULL;
	size_t big = (size_t)r->n << 20, i, k;
	float *a = malloc(big * sizeof(float)), *b = malloc(big * sizeof(float));
	int call = 0, q, rc = 0;

	CHK(a != NULL && b != NULL, "out of memory");
	r->cfg.oversub = oversub;
	r->cfg.slot_bytes = 0;
	r->cfg.cma = cma;
	CHK(dpg_shm_open(&s, &r->cfg, &err) == 0, "open: %s", err.msg);
	for (int round = 0; round < 3 && rc == 0; round++)
		for (k = 0; k < sizeof(counts) / sizeof(counts[0]) && rc == 0; k++) {
			size_t c = counts[k];
			bool inplace = (k + (size_t)round) % 2 == 0;
			float *send = inplace ? b + (size_t)r->rank * c : a;

			call++;
			for (i = 0; i < c; i++)
				send[i] = split_val(r->rank, call, i);
			CHK(dpg_shm_all_gather(s, send, b, c, DPG_F32, &w, &err) == 0,
			    "all_gather %zu: %s", c, err.msg);
			for (q = 0; q < r->n; q++)
				for (i = 0; i < c; i++)
					CHK(b[(size_t)q * c + i] == split_val(q, call, i),
					    "all_gather %zu%s: block %d [%zu]", c,
					    inplace ? " in place" : "", q, i);
			for (int root = 0; root < r->n; root++) {
				call++;
				for (i = 0; i < c; i++)
					a[i] = r->rank == root ? split_val(root, call, i) : -1.0f;
				CHK(dpg_shm_broadcast(s, a, c, DPG_F32, root, &w, &err) == 0,
				    "broadcast %zu: %s", c, err.msg);
				for (i = 0; i < c; i++)
					CHK(a[i] == split_val(root, call, i), "broadcast %zu root %d "
					    "[%zu] = %g", c, root, i, a[i]);
			}
		}
	if (chose != NULL)
		*chose = dpg_shm_single_copy(s);
	dpg_shm_close(s);
	free(a);
	free(b);
	return rc;
}

static int split_rank(struct rk *r)
{
	return split_run(r, 0, -1, NULL);
}

/* The same where the ranks outnumber the CPUs: slot-sized stages, and a
 * broadcast root that streams every call from 64 KiB (shm_direct.c). */
static int split_oversub_rank(struct rk *r)
{
	return split_run(r, 1, -1, NULL);
}

static void test_split_copies(void **state)
{
	(void)state;
	run_ranks(2, split_rank, 60);
	run_ranks(3, split_rank, 60);
	run_ranks(3, split_oversub_rank, 60);
}

/* Streamed copies into the slots (forced on: what a host whose CPUs pass
 * lines slowly gets from 64 KiB up): the copy collectives as above, then
 * allreduce (which then reduces into recv and streams its slice into the
 * slot) and reduce_scatter, in place and not, sums checked exactly. */
static float ar_val(int q, int call, size_t i)
{
	return (float)((q + 1) * (int)((i + (size_t)call) % 1009));
}

static int stream_reduce_rank(struct rk *r)
{
	static const size_t counts[] = { 4097, 65537, 300001, 1 << 20 };
	struct dpg_err err = { "" };
	struct dpg_shm_wait w = wait_for(20000, NULL);
	struct dpg_shm *s = NULL;
	size_t big = (size_t)r->n << 20, i, k;
	float *a = malloc(big * sizeof(float)), *b = malloc(big * sizeof(float));
	float tri = (float)(r->n * (r->n + 1) / 2);
	int call = 0, q, rc = 0;

	CHK(a != NULL && b != NULL, "out of memory");
	CHK(dpg_shm_open(&s, &r->cfg, &err) == 0, "open: %s", err.msg);
	for (k = 0; k < sizeof(counts) / sizeof(counts[0]) && rc == 0; k++) {
		size_t c = counts[k];

		for (int inplace = 0; inplace < 2; inplace++) {
			float *out = inplace ? a : b;

			call++;
			for (i = 0; i < c; i++)
				a[i] = ar_val(r->rank, call, i);
			CHK(dpg_shm_allreduce(s, a, out, c, DPG_F32, DPG_SUM, &w, &err) == 0,
			    "allreduce %zu: %s", c, err.msg);
			for (i = 0; i < c; i++)
				CHK(out[i] == tri * ar_val(0, call, i), "allreduce %zu%s [%zu] = %g",
				    c, inplace ? " in place" : "", i, out[i]);
			call++;
			for (q = 0; q < r->n; q++)
				for (i = 0; i < c; i++)
					a[(size_t)q * c + i] = ar_val(r->rank, call, (size_t)q * c + i);
			out = inplace ? a + (size_t)r->rank * c : b;
			CHK(dpg_shm_reduce_scatter(s, a, out, c, DPG_F32, DPG_SUM, &w, &err) == 0,
			    "reduce_scatter %zu: %s", c, err.msg);
			for (i = 0; i < c; i++)
				CHK(out[i] == tri * ar_val(0, call, (size_t)r->rank * c + i),
				    "reduce_scatter %zu%s [%zu] = %g", c, inplace ? " in place" : "",
				    i, out[i]);
		}
	}
	dpg_shm_close(s);
	free(a);
	free(b);
	return rc;
}

static int stream_rank(struct rk *r)
{
	r->cfg.stream = 1;
	if (split_rank(r) != 0)
		return 1;
	snprintf(r->key, sizeof(r->key), "t%d/seg2", r->seq);	/* a new segment */
	r->cfg.key = r->key;
	return stream_reduce_rank(r);
}

static void test_stream_copies(void **state)
{
	(void)state;
	run_ranks(2, stream_rank, 90);
	run_ranks(3, stream_rank, 90);
}

/* The cost of each way of copying into the slots (xcost.h), which decides
 * while the handoffs are slow: no verdict until both ways have a sample
 * younger than DPG_XCOST_AGE_MS; then the way whose cheapest recent sample
 * (per KiB) is lower; a late peer (one dear sample) does not flip it; ops
 * and sizes (powers of 4 from 64 KiB) are kept apart. */
static void test_xcost_pick(void **state)
{
	struct dpg_xcost *x = calloc(1, sizeof(*x));
	const int64_t ms = 1000000, t = 5000 * ms;
	const size_t mib = 1u << 20;
	int i;

	(void)state;
	assert_non_null(x);
	assert_int_equal(dpg_xcost_pick(x, 0, 16 * mib, t), -1);
	dpg_xcost_note(x, 0, 16 * mib, true, 4 * ms, t);	/* streamed only */
	assert_int_equal(dpg_xcost_pick(x, 0, 16 * mib, t), -1);
	dpg_xcost_note(x, 0, 16 * mib, false, 3 * ms, t);	/* plain cheaper */
	assert_int_equal(dpg_xcost_pick(x, 0, 16 * mib, t), 0);
	/* the same size bucket ([16, 64) MiB), per KiB: 20 MiB in 3 ms is
	 * cheaper than 16 MiB in 3 ms */
	dpg_xcost_note(x, 0, 20 * mib, true, 3 * ms, t);
	assert_int_equal(dpg_xcost_pick(x, 0, 16 * mib, t), 1);
	/* a late peer makes a plain call dear: the cheapest sample counts */
	dpg_xcost_note(x, 0, 16 * mib, false, 100 * ms, t + ms);
	assert_int_equal(dpg_xcost_pick(x, 0, 16 * mib, t + ms), 1);
	for (i = 0; i < 2; i++)
		dpg_xcost_note(x, 0, 16 * mib, false, 2 * ms, t + 2 * ms);
	assert_int_equal(dpg_xcost_pick(x, 0, 16 * mib, t + 2 * ms), 0);
	/* other ops, other sizes: nothing known yet */
	assert_int_equal(dpg_xcost_pick(x, 1, 16 * mib, t), -1);
	assert_int_equal(dpg_xcost_pick(x, 0, 4 * mib, t), -1);
	assert_int_equal(dpg_xcost_pick(x, 0, 63 * mib, t + 2 * ms), 0);
	assert_int_equal(dpg_xcost_pick(x, 0, 64 * mib, t + 2 * ms), -1);
	/* only the last DPG_XCOST_SAMPLES of a way count: 4 dear plain calls
	 * push the cheap ones out */
	for (i = 0; i < DPG_XCOST_SAMPLES; i++)
		dpg_xcost_note(x, 0, 16 * mib, false, 9 * ms, t + 3 * ms);
	assert_int_equal(dpg_xcost_pick(x, 0, 16 * mib, t + 3 * ms), 1);
	/* samples age out: a way not sampled for DPG_XCOST_AGE_MS is unknown */
	assert_int_equal(dpg_xcost_pick(x, 0, 16 * mib,
					t + ((int64_t)DPG_XCOST_AGE_MS + 1) * ms), -1);
	/* sizes below the first bucket share it; huge ones share the last;
	 * a bad op is never known */
	dpg_xcost_note(x, 2, 1000, false, ms, t);
	dpg_xcost_note(x, 2, 100 << 10, true, 2 * ms, t);
	assert_int_equal(dpg_xcost_pick(x, 2, 64 << 10, t), 1);
	dpg_xcost_note(x, 3, (size_t)1 << 40, true, 1000 * ms, t);
	dpg_xcost_note(x, 3, (size_t)1 << 34, false, 1000 * ms, t);
	assert_int_equal(dpg_xcost_pick(x, 3, (size_t)1 << 36, t), 1);
	dpg_xcost_note(x, DPG_XCOST_OPS, 16 * mib, true, ms, t);
	assert_int_equal(dpg_xcost_pick(x, DPG_XCOST_OPS, 16 * mib, t), -1);
	assert_int_equal(dpg_xcost_pick(x, -1, 16 * mib, t), -1);
	free(x);
}

/* A wait spins for the call's work since it began or last waited (a peer
 * doing the same copy is about that far behind), within the floor and cap;
 * an unknown start spins the floor. */
static void test_spin_budget(void **state)
{
	int64_t t0 = 5000000000;

	(void)state;
	assert_int_equal(dpg_shm_spin_ns(0, t0), DPG_SHM_SPIN_MIN_NS);
	assert_int_equal(dpg_shm_spin_ns(t0, t0), DPG_SHM_SPIN_MIN_NS);
	assert_int_equal(dpg_shm_spin_ns(t0 + 1000, t0), DPG_SHM_SPIN_MIN_NS);	/* clock skew */
	assert_int_equal(dpg_shm_spin_ns(t0 - 2000, t0), DPG_SHM_SPIN_MIN_NS);
	assert_int_equal(dpg_shm_spin_ns(t0 - 250000, t0), 250000);
	assert_int_equal(dpg_shm_spin_ns(t0 - DPG_SHM_SPIN_MAX_NS + 1, t0),
			 DPG_SHM_SPIN_MAX_NS - 1);
	assert_int_equal(dpg_shm_spin_ns(1, t0), DPG_SHM_SPIN_MAX_NS);	/* long ago */
	assert_true(DPG_SHM_SPIN_MIN_NS < DPG_SHM_SPIN_MAX_NS);
}

/* The handoff estimate: the median (lower middle) of the last 8 samples,
 * missing ones counting as 0, clamped; one outlier moves it by one rank at
 * most, and it crosses SHM's threshold only once 5 of 8 samples are slow
 * (the first samples alone never: one slow first sample once made a whole
 * run stream). */
static void test_handoff_median(void **state)
{
	struct dpg_handoff h;
	int i;

	(void)state;
	memset(&h, 0, sizeof(h));
	assert_int_equal(dpg_handoff_ns(&h), 0);
	dpg_handoff_note(&h, 240);
	assert_int_equal(dpg_handoff_ns(&h), 0);	/* 1 of 8 */
	for (i = 0; i < 3; i++)
		dpg_handoff_note(&h, 90);
	assert_int_equal(dpg_handoff_ns(&h), 0);	/* 4 of 8 */
	dpg_handoff_note(&h, 70);
	assert_int_equal(dpg_handoff_ns(&h), 70);	/* 5: 0 0 0 70 90 90 90 240 */
	dpg_handoff_note(&h, 5000000);		/* a preempted publisher */
	assert_int_equal(h.ns[5], DPG_HANDOFF_MAX_NS);
	assert_int_equal(dpg_handoff_ns(&h), 90);
	dpg_handoff_note(&h, -3);		/* clocks a hair apart */
	assert_int_equal(h.ns[6], 0);
	assert_int_equal(dpg_handoff_ns(&h), 90);	/* 0 0 70 90 90 90 240 max */
	for (i = 0; i < 8; i++)
		dpg_handoff_note(&h, 100);
	assert_int_equal(dpg_handoff_ns(&h), 100);
	for (i = 0; i < 4; i++)
		dpg_handoff_note(&h, 500);
	assert_int_equal(dpg_handoff_ns(&h), 100);	/* 4 of 8 slow: still fast */
	dpg_handoff_note(&h, 500);
	assert_int_equal(dpg_handoff_ns(&h), 500);	/* 5 of 8 */
	for (i = 0; i < 5; i++)
		dpg_handoff_note(&h, 80);
	assert_int_equal(dpg_handoff_ns(&h), 80);	/* the oldest dropped */
}

/* In the default (automatic) mode, the waits of large calls sample the
 * handoffs: within a few hundred 1 MiB broadcasts every receiver has an
 * estimate (5 samples: waits that began before the root's publish and
 * ended within their spin); the data is right whatever it chooses. */
static int sample_rank(struct rk *r)
{
	struct dpg_err err = { "" };
	struct dpg_shm_wait w = wait_for(20000, NULL);
	struct dpg_shm *s = NULL;
	size_t c = 1 << 18, i;
	float *a = malloc(c * sizeof(float)), flag[1];
	int call, root = 0;

	CHK(a != NULL, "out of memory");
	r->cfg.oversub = 0;
	r->cfg.cma = -1;	/* through the slots, where the waits sample */
	CHK(dpg_shm_open(&s, &r->cfg, &err) == 0, "open: %s", err.msg);
	CHK(dpg_shm_handoff_ns(s) == 0, "an estimate before any call");
	for (call = 1; call <= 2000; call++) {
		for (i = 0; i < c; i++)
			a[i] = r->rank == root ? (float)(i % 4099 + (size_t)call) : -1.0f;
		CHK(dpg_shm_broadcast(s, a, c, DPG_F32, root, &w, &err) == 0, "bcast: %s",
		    err.msg);
		for (i = 0; i < c; i++)
			CHK(a[i] == (float)(i % 4099 + (size_t)call), "bcast %d [%zu]", call, i);
		if (call % 10 != 0)
			continue;
		/* done when every receiver has a sample */
		flag[0] = r->rank != root && dpg_shm_handoff_ns(s) == 0 ? 1.0f : 0.0f;
		CHK(dpg_shm_allreduce(s, flag, flag, 1, DPG_F32, DPG_SUM, &w, &err) == 0,
		    "allreduce: %s", err.msg);
		if (flag[0] == 0.0f)
			break;
	}
	CHK(r->rank == root || dpg_shm_handoff_ns(s) > 0,
	    "no handoff estimate after %d broadcasts of 1 MiB", call);
	dpg_shm_close(s);
	free(a);
	return 0;
}

static void test_handoff_sampled(void **state)
{
	(void)state;
	run_ranks(2, sample_rank, 120);
}

/* Single copy (cma.c, shm_direct.c): with a CPU per rank, all_gathers with
 * blocks of 8 KiB and broadcasts of 8 KiB, up to 16 MiB in all, read the
 * owners' buffers in place where
 * every rank can read every other.  The copy collectives of
 * test_split_copies, every element checked, at 2 and 3 ranks; whether
 * single copy was chosen must agree with whether this rank can read its
 * peers' memory at all (tried here on a word each peer names through the
 * store); a send buffer that overlaps the other ranks' blocks; a peer whose
 * pid one rank cannot read makes every rank keep the slots; a root whose
 * buffer cannot be read fails the call on every rank, named. */
#define CMA_WORD 0x5eedf00d00000000ull

static int cma_peers_readable(struct rk *r)
{
	static uint64_t word;
	struct dpg_err err = { "" };
	char k[64], v[32];
	int q, ok = 1;

	word = CMA_WORD | (uint64_t)r->rank;
	snprintf(v, sizeof(v), "%llu", (unsigned long long)(uintptr_t)&word);
	CHK(dpg_store_set(r->st, rkey(r, "word", r->rank, k, sizeof(k)), v, strlen(v) + 1,
			  dpg_now_ms() + 5000, &err) == 0, "set word: %s", err.msg);
	for (q = 0; q < r->n; q++) {
		void *val = NULL;
		size_t len = 0;

		if (q == r->rank)
			continue;
		CHK(dpg_store_get(r->st, rkey(r, "word", q, k, sizeof(k)), &val, &len,
				  dpg_now_ms() + 5000, &err) == 0, "get word: %s", err.msg);
		if (dpg_cma_check(r->pids[q], strtoull(val, NULL, 10), CMA_WORD | (uint64_t)q) != 0)
			ok = 0;
		free(val);
	}
	return ok ? 2 : 1;	/* 0 is CHK's failure */
}

static int single_copy_rank(struct rk *r)
{
	int can = cma_peers_readable(r), chose = 0;

	CHK(can > 0, "store");
	if (split_run(r, 0, 0, &chose) != 0)
		return 1;
	CHK(chose == (can == 2 ? 1 : -1), "single copy %d, peers %sreadable", chose,
	    can == 2 ? "" : "not ");
	if (r->rank == 0)
		printf("single copy %s here (%d ranks)\n", can == 2 ? "used" : "not possible",
		       r->n);
	return 0;
}

/* All ranks gather from send buffers that start one element past their
 * own block (the last rank's one before it): each overlaps a neighbour's
 * block, which the others write; then a broadcast. */
static int overlap_rank(struct rk *r)
{
	struct dpg_err err = { "" };
	struct dpg_shm_wait w = wait_for(20000, NULL);
	struct dpg_shm *s = NULL;
	size_t c = 32768, i;
	float *b = malloc(((size_t)r->n * c + 2) * sizeof(float)), *recv = b + 1, *send;
	int q, call;

	CHK(b != NULL, "out of memory");
	r->cfg.oversub = 0;
	r->cfg.slot_bytes = 0;
	CHK(dpg_shm_open(&s, &r->cfg, &err) == 0, "open: %s", err.msg);
	for (call = 1; call <= 3; call++) {
		send = recv + (size_t)r->rank * c + (r->rank + 1 < r->n ? 1 : -1);
		for (i = 0; i < c; i++)
			send[i] = split_val(r->rank, call, i);
		CHK(dpg_shm_all_gather(s, send, recv, c, DPG_F32, &w, &err) == 0,
		    "all_gather: %s", err.msg);
		for (q = 0; q < r->n; q++)
			for (i = 0; i < c; i++)
				CHK(recv[(size_t)q * c + i] == split_val(q, call, i),
				    "overlapping all_gather %d: block %d [%zu] = %g", call, q, i,
				    recv[(size_t)q * c + i]);
	}
	CHK(dpg_shm_single_copy(s) != 0, "not decided after 3 calls of 128 KiB a rank");
	dpg_shm_close(s);
	free(b);
	return 0;
}

/* Local rank 0 is configured never to read in place (its pids could be
 * invalid there too): rank 1 would, and both must keep the slots (they
 * could not work together otherwise).  Then fresh segments whose first
 * large call, which decides, is a broadcast (its stages follow the
 * decision's: a reader must not take the decision's for the root's data). */
static int one_blind_rank(struct rk *r)
{
	struct dpg_err err = { "" };
	struct dpg_shm_wait w = wait_for(20000, NULL);
	size_t c = 1u << 18, i;
	float *a = malloc(c * sizeof(float));
	int chose = 0, seg;

	CHK(a != NULL, "out of memory");
	if (split_run(r, 0, r->rank == 0 ? -1 : 0, &chose) != 0)
		return 1;
	CHK(chose == -1, "single copy %d with one rank unable to read", chose);
	for (seg = 0; seg < 20; seg++) {
		struct dpg_shm *s = NULL;

		snprintf(r->key, sizeof(r->key), "t%d/seg%d", r->seq, seg + 2);
		r->cfg.key = r->key;
		CHK(dpg_shm_open(&s, &r->cfg, &err) == 0, "open: %s", err.msg);
		for (i = 0; i < c; i++)
			a[i] = r->rank == 0 ? split_val(0, seg, i) : -1.0f;
		CHK(dpg_shm_broadcast(s, a, c, DPG_F32, 0, &w, &err) == 0, "bcast: %s", err.msg);
		for (i = 0; i < c; i++)
			CHK(a[i] == split_val(0, seg, i), "first broadcast, segment %d [%zu] = %g",
			    seg, i, a[i]);
		CHK(dpg_shm_single_copy(s) == -1, "single copy %d", dpg_shm_single_copy(s));
		dpg_shm_close(s);
	}
	free(a);
	return 0;
}

/* The root of a 1 MiB broadcast passes an address nobody can read: every
 * rank fails, the root naming its own buffer (it writes the buffer's last
 * part into the readers' itself), the readers naming the root and what
 * failed, or learning it through the failure word; no hang. */
static int bad_root_rank(struct rk *r)
{
	struct dpg_err err = { "" };
	struct dpg_shm_wait w = wait_for(5000, NULL);
	struct dpg_shm *s = NULL;
	size_t c = 1u << 18;
	float *a = malloc(c * sizeof(float));
	int can = cma_peers_readable(r), rc;
	int64_t t0;

	CHK(a != NULL && can > 0, "setup");
	memset(a, 0, c * sizeof(float));
	r->cfg.oversub = 0;
	r->cfg.slot_bytes = 0;
	CHK(dpg_shm_open(&s, &r->cfg, &err) == 0, "open: %s", err.msg);
	CHK(dpg_shm_broadcast(s, a, c, DPG_F32, 0, &w, &err) == 0, "broadcast: %s", err.msg);
	if (dpg_shm_single_copy(s) != 1) {	/* single_copy_rank checks why */
		dpg_shm_close(s);
		free(a);
		return 0;
	}
	t0 = dpg_now_ms();
	rc = dpg_shm_broadcast(s, r->rank == 0 ? (void *)(uintptr_t)4096 : (void *)a, c,
			       DPG_F32, 0, &w, &err);
	CHK(rc == (r->rank == 0 ? -DPG_ERR_INVALID : -DPG_ERR_PEER),
	    "broadcast from a bad address: %d %s", rc, err.msg);
	CHK(dpg_now_ms() - t0 < 3000, "failed after %lld ms", (long long)(dpg_now_ms() - t0));
	/* a reader names what it could not read, or learns it from the one
	 * that failed first (the failure word) */
	if (r->rank == 0)
		CHK(strstr(err.msg, "the root's buffer at 0x1000 cannot be read (") != NULL,
		    "message: %s", err.msg);
	else
		CHK(strstr(err.msg, "peer rank 0's (h0) buffer at 0x1000 in place: Bad address") ||
		    strstr(err.msg, "peer rank 0 (h0) broke the protocol (reported by rank "),
		    "message: %s", err.msg);
	CHK(post(r, r->rank == 0 ? "failed0" : r->rank == 1 ? "failed1" : "failed2") == 0 &&
	    await(r, "failed0") == 0 && await(r, "failed1") == 0 && await(r, "failed2") == 0,
	    "meet");	/* nobody exits while another may still look at it */
	dpg_shm_close(s);
	free(a);
	return 0;
}

static void test_single_copy(void **state)
{
	(void)state;
	run_ranks(2, single_copy_rank, 60);
	run_ranks(3, single_copy_rank, 60);
	run_ranks(2, overlap_rank, 30);
	run_ranks(3, overlap_rank, 30);
	run_ranks(2, one_blind_rank, 60);
	run_ranks(3, bad_root_rank, 30);
}

/* The creator closes without an explicit unlink: the name goes too. */
static int close_unlinks_rank(struct rk *r)
{
	struct dpg_err err = { "" };
	struct dpg_shm_wait w = wait_for(5000, NULL);
	struct dpg_shm *s = NULL;
	void *val = NULL;
	size_t len;

	CHK(dpg_shm_open(&s, &r->cfg, &err) == 0, "open: %s", err.msg);
	CHK(dpg_shm_barrier(s, &w, &err) == 0, "barrier: %s", err.msg);
	CHK(dpg_store_get(r->st, r->key, &val, &len, dpg_now_ms() + 1000, &err) == 0,
	    "get name: %s", err.msg);
	if (r->rank == 0) {
		dpg_shm_close(s);
		s = NULL;
		CHK(!dev_shm_has(val), "%s left in /dev/shm", (char *)val);
		CHK(post(r, "closed") == 0, "post");
	} else {
		CHK(await(r, "closed") == 0, "await");
		CHK(!dev_shm_has(val), "%s left in /dev/shm", (char *)val);
		dpg_shm_close(s);
	}
	free(val);
	return 0;
}

static void test_close_unlinks(void **state)
{
	(void)state;
	run_ranks(2, close_unlinks_rank, 10);
}

/* A peer's bad segment name, a name that does not exist, and a key that
 * never appears: a non-creator gets the right code and message (and
 * nothing is left behind). */
static int bad_peer_rank(struct rk *r)
{
	struct dpg_err err = { "" };
	struct dpg_shm *s = (struct dpg_shm *)r;
	struct dpg_shm_cfg cfg = r->cfg;
	char key[64];
	int rc;

	cfg.nlocal = 2;		/* this process plays local rank 1 of 2 */
	cfg.lrank = 1;
	cfg.self = 1;
	cfg.pid_ok = false;
	snprintf(key, sizeof(key), "t%d/bad", r->seq);
	cfg.key = key;
	CHK(dpg_store_set(r->st, key, "abc", 3, dpg_now_ms() + 1000, &err) == 0, "set");
	rc = dpg_shm_open(&s, &cfg, &err);
	CHK(rc == -DPG_ERR_PEER && s == NULL, "no NUL: %d", rc);
	CHK(strstr(err.msg, "bad shared segment name from peer rank 0 (h0)") != NULL,
	    "message: %s", err.msg);

	snprintf(key, sizeof(key), "t%d/none", r->seq);
	CHK(dpg_store_set(r->st, key, "/dpg.none.00000000", 19, dpg_now_ms() + 1000,
			  &err) == 0, "set");
	rc = dpg_shm_open(&s, &cfg, &err);
	CHK(rc == -DPG_ERR_SYSTEM && s == NULL, "missing segment: %d %s", rc, err.msg);
	CHK(strstr(err.msg, "shm_open /dpg.none.00000000 (created by peer rank 0 (h0))")
	    != NULL, "message: %s", err.msg);

	snprintf(key, sizeof(key), "t%d/never", r->seq);
	cfg.deadline_ms = dpg_now_ms() + 200;
	rc = dpg_shm_open(&s, &cfg, &err);
	CHK(rc == -DPG_ERR_TIMEOUT && s == NULL, "absent key: %d %s", rc, err.msg);
	CHK(strstr(err.msg, "looking up the shared segment: ") == err.msg &&
	    strstr(err.msg, "timed out") != NULL, "message: %s", err.msg);
	CHK(dpg_now_ms() < cfg.deadline_ms + 2000, "slow timeout");
	return 0;
}

static void test_bad_peer_segment(void **state)
{
	(void)state;
	run_ranks(1, bad_peer_rank, 10);
}

/* A second rank attaching with other settings (same size, other layout;
 * other size) is refused; the creator's segment is unaffected. */
static int mismatch_rank(struct rk *r)
{
	struct dpg_err err = { "" };
	struct dpg_shm *s = NULL;
	int rc;

	if (r->rank == 0) {
		r->cfg.nsets = 4;
		CHK(dpg_shm_open(&s, &r->cfg, &err) == 0, "open: %s", err.msg);
		CHK(await(r, "tried") == 0, "await");
		dpg_shm_close(s);
		return 0;
	}
	r->cfg.nsets = 8;		/* 8 sets of 4 KiB: the same bytes */
	r->cfg.slot_bytes = 4096;
	rc = dpg_shm_open(&s, &r->cfg, &err);
	CHK(rc == -DPG_ERR_PEER && s == NULL, "other layout: %d %s", rc, err.msg);
	CHK(strstr(err.msg, "does not match this rank's settings") != NULL, "message: %s",
	    err.msg);
	r->cfg.nsets = 4;
	r->cfg.slot_bytes = 16384;	/* other size */
	rc = dpg_shm_open(&s, &r->cfg, &err);
	CHK(rc == -DPG_ERR_PEER && s == NULL, "other size: %d %s", rc, err.msg);
	CHK(strstr(err.msg, "peer rank 0 (h0) runs another configuration?") != NULL,
	    "message: %s", err.msg);
	r->cfg.slot_bytes = 8192;	/* the creator's settings: accepted */
	rc = dpg_shm_open(&s, &r->cfg, &err);
	CHK(rc == 0, "same settings: %d %s", rc, err.msg);
	dpg_shm_close(s);
	return post(r, "tried");
}

static void test_mismatch(void **state)
{
	(void)state;
	run_ranks(2, mismatch_rank, 10);
}

/* Pipes mode: a 4 KiB pipe from rank 0 to rank 1 carries 1 MiB in order,
 * with both ends waiting on each other. */
static int pipes_rank(struct rk *r)
{
	const size_t total = 1u << 20;
	struct dpg_err err = { "" };
	struct dpg_shm_wait w = wait_for(8000, NULL);
	struct dpg_shm *s = NULL;
	size_t done = 0;

	r->cfg.mode = DPG_SHM_PIPES;
	r->cfg.pipe_bytes = 4096;
	r->cfg.pipe_to = r->rank == 0 ? 1 : -1;
	r->cfg.pipe_from = r->rank == 1 ? 0 : -1;
	CHK(dpg_shm_open(&s, &r->cfg, &err) == 0, "open: %s", err.msg);
	dpg_shm_pipe_begin(s);
	while (done < total) {
		uint8_t buf[3000];
		size_t n = total - done < sizeof(buf) ? total - done : sizeof(buf);

		if (r->rank == 0) {
			size_t k;

			for (size_t i = 0; i < n; i++)
				buf[i] = (uint8_t)((done + i) % 251);
			for (size_t o = 0; o < n; o += k) {
				CHK(dpg_shm_pipe_wait(s, false, true, &w, 0, &err) == 0,
				    "wait to write: %s", err.msg);
				CHK(dpg_shm_pipe_writable(s), "woke, not writable");
				k = dpg_shm_pipe_write(s, buf + o, n - o, 8);
				CHK(k % 8 == 0 && k <= n - o, "wrote %zu", k);
				if (n - o < 8 && k == 0)	/* the tail: byte by byte */
					k = dpg_shm_pipe_write(s, buf + o, n - o, 1);
			}
			done += n;
		} else {
			const uint8_t *p;
			size_t avail;

			CHK(dpg_shm_pipe_wait(s, true, false, &w, 0, &err) == 0,
			    "wait to read: %s", err.msg);
			CHK(dpg_shm_pipe_readable(s), "woke, not readable");
			p = dpg_shm_pipe_peek(s, &avail);
			CHK(avail > 0 && avail <= 4096, "avail %zu", avail);
			for (size_t i = 0; i < avail; i++)
				CHK(p[i] == (uint8_t)((done + i) % 251), "byte %zu", done + i);
			dpg_shm_pipe_consume(s, avail);
			done += avail;
		}
	}
	CHK(done == total, "moved %zu", done);
	/* nothing more to read: a bounded wait returns 0 after max_us */
	if (r->rank == 1) {
		int64_t t0 = dpg_now_ms();

		CHK(!dpg_shm_pipe_readable(s), "extra data");
		CHK(dpg_shm_pipe_wait(s, true, false, &w, 20000, &err) == 0, "%s", err.msg);
		CHK(dpg_now_ms() - t0 < 1000, "bounded wait too long");
		CHK(post(r, "drained") == 0, "post");
	} else {
		CHK(await(r, "drained") == 0, "await");
	}
	dpg_shm_close(s);
	return 0;
}

static void test_pipes(void **state)
{
	(void)state;
	run_ranks(2, pipes_rank, 10);
}

/* The failure word: the first publication wins and reaches every local
 * rank; dpg_shm_check reports it with the culprit and the reporter. */
static int failword_rank(struct rk *r)
{
	struct dpg_err err = { "" };
	struct dpg_shm_wait w = wait_for(5000, NULL);
	struct dpg_shm *s = NULL;
	struct dpg_fail f = { 0, 0, 0 };
	int rc;

	CHK(dpg_shm_open(&s, &r->cfg, &err) == 0, "open: %s", err.msg);
	CHK(!dpg_shm_fail_get(s, &f), "failure word set at start");
	CHK(dpg_shm_barrier(s, &w, &err) == 0, "barrier: %s", err.msg);
	/* every rank out of the barrier before the publication (a rank still
	 * inside could see the failure first) */
	CHK(post(r, r->rank == 0 ? "out0" : r->rank == 1 ? "out1" : "out2") == 0, "post");
	if (r->rank == 2) {
		struct dpg_fail mine = { DPG_FAIL_EXITED, 1, 2 };

		CHK(await(r, "out0") == 0 && await(r, "out1") == 0, "await");
		dpg_shm_fail_publish(s, &mine);
		CHK(post(r, "published") == 0, "post");
	} else {
		CHK(await(r, "published") == 0, "await");
	}
	if (r->rank == 0) {	/* a later publication does not overwrite */
		struct dpg_fail other = { DPG_FAIL_TIMEOUT, 2, 0 };

		dpg_shm_fail_publish(s, &other);
	}
	CHK(dpg_shm_fail_get(s, &f), "failure word not seen");
	CHK(f.why == DPG_FAIL_EXITED && f.culprit == 1 && f.reporter == 2,
	    "got why %d culprit %d reporter %d", f.why, f.culprit, f.reporter);
	rc = dpg_shm_check(s, true, true, &err);
	CHK(rc == -DPG_ERR_PEER, "check: %d", rc);
	CHK(strcmp(err.msg, r->rank == 2 ? "peer rank 1 (h1) exited" :
		   "peer rank 1 (h1) exited (reported by rank 2)") == 0, "message: %s",
	    err.msg);
	/* a wait fails with it too, instead of waiting out its deadline */
	{
		struct dpg_shm_wait w2 = wait_for(5000, NULL);
		int64_t t0 = dpg_now_ms();

		if (r->rank == 0) {
			rc = dpg_shm_barrier(s, &w2, &err);
			CHK(rc == -DPG_ERR_PEER || rc == 0, "barrier after failure: %d", rc);
			CHK(dpg_now_ms() - t0 < 2000, "barrier waited %lld ms",
			    (long long)(dpg_now_ms() - t0));
		}
	}
	CHK(post(r, r->rank == 0 ? "done0" : r->rank == 1 ? "done1" : "done2") == 0, "post");
	CHK(await(r, "done0") == 0 && await(r, "done1") == 0 && await(r, "done2") == 0,
	    "await");
	dpg_shm_close(s);
	return 0;
}

static void test_failure_word(void **state)
{
	(void)state;
	run_ranks(3, failword_rank, 10);
}

/* A local rank exits while another waits for it: the waiter fails with
 * DPG_ERR_PEER naming it, long before its deadline, and publishes it. */
static int dead_rank(struct rk *r)
{
	struct dpg_err err = { "" };
	struct dpg_shm_wait w = wait_for(5000, NULL);
	struct dpg_shm *s = NULL;
	struct dpg_fail f;
	int64_t t0;
	int rc;

	CHK(dpg_shm_open(&s, &r->cfg, &err) == 0, "open: %s", err.msg);
	CHK(dpg_shm_barrier(s, &w, &err) == 0, "barrier: %s", err.msg);
	dpg_shm_unlink(s);
	if (r->rank == 1) {
		dpg_store_close(r->st);
		_exit(0);	/* gone, without a word */
	}
	t0 = dpg_now_ms();
	w = wait_for(8000, NULL);
	rc = dpg_shm_barrier(s, &w, &err);
	CHK(rc == -DPG_ERR_PEER, "barrier: %d %s", rc, err.msg);
	CHK(strcmp(err.msg, "peer rank 1 (h1) exited") == 0, "message: %s", err.msg);
	CHK(dpg_now_ms() - t0 < 2000, "noticed after %lld ms", (long long)(dpg_now_ms() - t0));
	CHK(dpg_shm_fail_get(s, &f) && f.why == DPG_FAIL_EXITED && f.culprit == 1 &&
	    f.reporter == 0, "failure word not published");
	dpg_shm_close(s);
	return 0;
}

static void test_dead_rank(void **state)
{
	(void)state;
	run_ranks(2, dead_rank, 10);
}

/* A local rank that is alive but never arrives: the wait ends at its
 * deadline with DPG_ERR_TIMEOUT naming the laggard; an abort flag ends
 * a wait at once. */
static int absent_rank(struct rk *r)
{
	struct dpg_err err = { "" };
	struct dpg_shm_wait w = wait_for(5000, NULL);
	struct dpg_shm *s = NULL;
	volatile int flag = 1;
	int64_t t0, dt;
	int rc;

	CHK(dpg_shm_open(&s, &r->cfg, &err) == 0, "open: %s", err.msg);
	CHK(dpg_shm_barrier(s, &w, &err) == 0, "barrier: %s", err.msg);
	if (r->rank == 1) {
		CHK(await(r, "timedout") == 0, "await");
		dpg_shm_close(s);
		return 0;
	}
	t0 = dpg_now_ms();
	w = wait_for(300, NULL);
	rc = dpg_shm_barrier(s, &w, &err);
	dt = dpg_now_ms() - t0;
	CHK(rc == -DPG_ERR_TIMEOUT, "barrier: %d %s", rc, err.msg);
	CHK(dt >= 290 && dt < 2000, "timed out after %lld ms", (long long)dt);
	CHK(strstr(err.msg, "waiting for peer rank 1 (h1)") != NULL, "message: %s", err.msg);
	t0 = dpg_now_ms();
	w = wait_for(5000, &flag);
	rc = dpg_shm_barrier(s, &w, &err);
	CHK(rc == -DPG_ERR_ABORTED || rc == -DPG_ERR_TIMEOUT, "abort: %d %s", rc, err.msg);
	CHK(dpg_now_ms() - t0 < 1000, "abort took %lld ms", (long long)(dpg_now_ms() - t0));
	CHK(post(r, "timedout") == 0, "post");
	dpg_shm_close(s);
	return 0;
}

static void test_absent_rank(void **state)
{
	(void)state;
	run_ranks(2, absent_rank, 10);
}

/* ------------------------------------------------------------ issue 17/8 */

/* Where shm.c keeps the failure word (static-asserted in shm_impl.h). */
#define FAILWORD_OFF 128

/* Map the segment named under the key by its name, the way any process of
 * the same user can. */
static uint64_t *map_failword(struct rk *r, void **base)
{
	struct dpg_err err = { "" };
	void *val = NULL;
	size_t len = 0;
	int fd;

	*base = MAP_FAILED;
	if (dpg_store_get(r->st, r->key, &val, &len, dpg_now_ms() + 2000, &err) != 0)
		return NULL;
	fd = shm_open(val, O_RDWR, 0600);
	free(val);
	if (fd < 0)
		return NULL;
	*base = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return *base == MAP_FAILED ? NULL : (uint64_t *)(void *)((char *)*base + FAILWORD_OFF);
}

/* A failure word that fail_pack could never write (an index past the
 * communicator, an unknown reason, the marker bit clear): every rank
 * reports a protocol error naming the word, instead of reading out of
 * bounds. */
static const uint64_t BAD_WORDS[] = {
	(1ull << 63) | (1ull << 48) | (0xffffffull << 24) | 1,	/* culprit 16M */
	(1ull << 63) | (1ull << 48) | (4ull << 24) | 1,		/* culprit 3 of 2 */
	(1ull << 63) | (1ull << 48) | (1ull << 24) | 0xffffff,	/* reporter 16M */
	(1ull << 63) | (0x7full << 48) | (1ull << 24) | 1,	/* reason 127 */
	(1ull << 63) | (0x41ull << 56) | (1ull << 24) | 1,	/* stray high bits */
	0x1234,							/* marker clear */
};

static int badword_rank(struct rk *r)
{
	struct dpg_err err = { "" };
	struct dpg_shm_wait w = wait_for(5000, NULL);
	struct dpg_shm *s = NULL;
	uint64_t *word = NULL;
	void *base = MAP_FAILED;
	size_t which = (size_t)r->seq % (sizeof(BAD_WORDS) / sizeof(BAD_WORDS[0]));
	int rc;

	if (r->rank == 1)
		CHK(await(r, "mapped") == 0, "await");
	CHK(dpg_shm_open(&s, &r->cfg, &err) == 0, "open: %s", err.msg);
	if (r->rank == 0) {
		word = map_failword(r, &base);
		CHK(word != NULL, "cannot map the segment by its name");
		CHK(post(r, "mapped") == 0, "post");
	}
	CHK(dpg_shm_barrier(s, &w, &err) == 0, "barrier: %s", err.msg);
	/* both ranks are out of the barrier before the word changes (a rank
	 * still inside it would rightly report the bad word there) */
	if (r->rank == 0) {
		CHK(await(r, "through") == 0, "await");
		__atomic_store_n(word, BAD_WORDS[which], __ATOMIC_SEQ_CST);
		CHK(post(r, "written") == 0, "post");
	} else {
		CHK(post(r, "through") == 0, "post");
		CHK(await(r, "written") == 0, "await");
	}
	rc = dpg_shm_check(s, false, false, &err);
	CHK(rc == -DPG_ERR_PEER, "check: %d %s", rc, err.msg);
	CHK(strstr(err.msg, "failure word") != NULL && strstr(err.msg, "invalid") != NULL,
	    "message: %s", err.msg);
	w = wait_for(5000, NULL);
	rc = dpg_shm_barrier(s, &w, &err);	/* 0 when nobody has to wait */
	CHK(rc == -DPG_ERR_PEER || rc == 0, "barrier: %d %s", rc, err.msg);
	CHK(rc == 0 || strstr(err.msg, "failure word") != NULL, "message: %s", err.msg);
	CHK(post(r, r->rank == 0 ? "bar0" : "bar1") == 0, "post");
	CHK(await(r, r->rank == 0 ? "bar1" : "bar0") == 0, "await");
	if (r->rank == 0) {	/* rank 1 is not coming: the wait reads the word */
		int64_t t0 = dpg_now_ms();

		w = wait_for(5000, NULL);
		rc = dpg_shm_barrier(s, &w, &err);
		CHK(rc == -DPG_ERR_PEER, "barrier 2: %d %s", rc, err.msg);
		CHK(strstr(err.msg, "failure word") != NULL, "message: %s", err.msg);
		CHK(dpg_now_ms() - t0 < 2000, "noticed after %lld ms",
		    (long long)(dpg_now_ms() - t0));
	}
	if (base != MAP_FAILED)
		munmap(base, 4096);
	CHK(post(r, r->rank == 0 ? "done0" : "done1") == 0, "post");
	CHK(await(r, "done0") == 0 && await(r, "done1") == 0, "await");
	dpg_shm_close(s);
	return 0;
}

static void test_bad_failure_word(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(BAD_WORDS) / sizeof(BAD_WORDS[0]); i++) {
		while ((size_t)(g_seq + 1) % (sizeof(BAD_WORDS) / sizeof(BAD_WORDS[0])) != i)
			g_seq++;
		run_ranks(2, badword_rank, 10);
	}
}

/* /dev/shm is a 1 MiB tmpfs and the segment needs 2 MiB: the creator fails
 * with a message naming /dev/shm, the space it needs and the space free;
 * the other rank learns it from the creator (no SIGBUS, no wait for the
 * deadline); nothing is left behind. */
static int full_rank(struct rk *r)
{
	struct dpg_err err = { "" };
	struct dpg_shm_wait w = wait_for(3000, NULL);
	struct dpg_shm *s = NULL;
	static float x[256 << 10], y[256 << 10];
	int64_t t0 = dpg_now_ms();
	int rc;

	r->cfg.slot_bytes = 256u << 10;	/* 4 sets x 2 ranks x 256 KiB */
	r->cfg.nsets = 4;
	rc = dpg_shm_open(&s, &r->cfg, &err);
	if (rc == 0) {		/* the bug: it "works" until a page is touched */
		rc = dpg_shm_allreduce(s, x, y, 256u << 10, DPG_F32, DPG_SUM, &w, &err);
		dpg_shm_close(s);
		CHK(0, "open succeeded on a full /dev/shm (allreduce then: %d %s)", rc, err.msg);
	}
	CHK(rc == -DPG_ERR_SYSTEM, "open: %d %s", rc, err.msg);
	CHK(strstr(err.msg, "/dev/shm") != NULL, "message: %s", err.msg);
	CHK(strstr(err.msg, "needs 2") != NULL && strstr(err.msg, "free") != NULL,
	    "message: %s", err.msg);
	if (r->rank == 1)
		CHK(strstr(err.msg, "peer rank 0 (h0)") != NULL, "message: %s", err.msg);
	CHK(dpg_now_ms() - t0 < 2500, "took %lld ms", (long long)(dpg_now_ms() - t0));
	return 0;
}

static int count_dpg_segments(const char *dir, pid_t pid)
{
	char prefix[32];
	struct dirent *d;
	DIR *dp = opendir(dir);
	int n = 0;

	if (dp == NULL)
		return -1;
	snprintf(prefix, sizeof(prefix), "dpg.%d.", (int)pid);
	while ((d = readdir(dp)) != NULL)
		if (pid == 0 ? strncmp(d->d_name, "dpg.", 4) == 0
			     : strncmp(d->d_name, prefix, strlen(prefix)) == 0)
			n++;
	closedir(dp);
	return n;
}

static int g_skipped;

static void test_dev_shm_full(void **state)
{
	(void)state;
	if (unshare(CLONE_NEWNS) != 0 ||
	    mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) != 0 ||
	    mount("dpgtest", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=1M,mode=1777")
	    != 0) {
		g_skipped++;
		printf("SKIP test_dev_shm_full: cannot mount a small tmpfs on /dev/shm in a "
		       "private mount namespace (%s; needs root)\n", strerror(errno));
		skip();
	}
	run_ranks(2, full_rank, 10);
	assert_int_equal(count_dpg_segments("/dev/shm", 0), 0);
	assert_int_equal(umount2("/dev/shm", MNT_DETACH), 0);
}

/* SIGTERM (what scancel sends first) right after attaching: once every
 * local rank has attached, the name is gone, so a kill leaves nothing in
 * /dev/shm. */
static int term_rank(struct rk *r)
{
	struct dpg_err err = { "" };
	struct dpg_shm *s = NULL;

	CHK(dpg_shm_open(&s, &r->cfg, &err) == 0, "open: %s", err.msg);
	if (r->rank == 0)
		CHK(await(r, "attached") == 0, "await");
	else
		CHK(post(r, "attached") == 0, "post");
	raise(SIGTERM);
	return 1;
}

static void test_sigterm_after_attach(void **state)
{
	pid_t pids[MAXR];
	int seq = ++g_seq, n = 2, left;

	(void)state;
	fflush(NULL);
	for (int q = 0; q < n; q++) {
		pids[q] = fork();
		assert_true(pids[q] >= 0);
		if (pids[q] == 0) {
			struct rk r = { .seq = seq };

			prctl(PR_SET_PDEATHSIG, SIGKILL);
			child_signals();
			_exit(rk_start(&r, q, n) == 0 ? term_rank(&r) : 1);
		}
	}
	for (left = n; left > 0; left--) {
		int st;
		pid_t w = waitpid(-1, &st, 0);

		assert_true(w > 0);
		if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGTERM)
			fail_msg("rank pid %d: status 0x%x, not SIGTERM", (int)w, st);
	}
	left = count_dpg_segments("/dev/shm", pids[0]);
	if (left != 0) {
		char cmd[96];

		snprintf(cmd, sizeof(cmd), "rm -f /dev/shm/dpg.%d.*", (int)pids[0]);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove the leftover segment\n");
		fail_msg("%d segment(s) of the killed ranks left in /dev/shm", left);
	}
}

/* A creator SIGKILLed before its peer attached leaves its name (nothing
 * can run in a killed process); the next creator on the node removes it.
 * Until then the name is left alone while its creator lives (however old)
 * and while it is younger than the sweep's age, and a name that is not a
 * segment's is never touched. */
static int stale_creator(struct rk *r, int wfd)
{
	struct dpg_err err = { "" };
	struct dpg_shm *s = NULL;
	struct dpg_shm_cfg cfg = r->cfg;
	struct dpg_store *st = NULL;
	char key[64];
	void *val = NULL;
	size_t len = 0;

	CHK(dpg_store_connect("127.0.0.1", g_port, g_secret, sizeof(g_secret),
			      dpg_now_ms() + 5000, NULL, &st, &err) == 0, "connect: %s", err.msg);
	snprintf(key, sizeof(key), "t%d/stale", r->seq);
	cfg.store = st;
	cfg.key = key;
	CHK(dpg_shm_open(&s, &cfg, &err) == 0, "open: %s", err.msg);
	CHK(dpg_store_get(st, key, &val, &len, dpg_now_ms() + 1000, &err) == 0, "get: %s", err.msg);
	CHK(write(wfd, val, len) == (ssize_t)len, "pipe");
	for (;;)
		pause();	/* until SIGKILLed: the peer never attaches */
}

static int set_age(const char *name, double age_s)
{
	char path[128];
	struct timespec t[2];

	snprintf(path, sizeof(path), "/dev/shm%s", name);
	clock_gettime(CLOCK_REALTIME, &t[0]);
	t[0].tv_sec -= (time_t)age_s;
	t[1] = t[0];
	return utimensat(AT_FDCWD, path, t, 0);
}

static int stale_rank(struct rk *r)
{
	struct dpg_err err = { "" };
	struct dpg_shm *s = NULL;
	char name[96] = "", other[96], path[128];
	void *val = NULL;
	size_t len = 0;
	int p[2], fd, st;
	pid_t g;

	r->cfg.nlocal = 2;	/* local rank 0 of 2; local rank 1 never comes */
	r->cfg.pid_ok = false;
	CHK(pipe(p) == 0, "pipe");
	fflush(NULL);
	g = fork();
	CHK(g >= 0, "fork");
	if (g == 0) {
		close(p[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		_exit(stale_creator(r, p[1]));
	}
	close(p[1]);
	CHK(read(p[0], name, sizeof(name) - 1) > 1, "the creator wrote no name");
	close(p[0]);
	CHK(dpg_shm_sweep("/dev/shm", 2.0) >= 0 && dev_shm_has(name), "young: %s swept", name);
	CHK(set_age(name, 10) == 0, "utimensat: %s", strerror(errno));
	CHK(dpg_shm_sweep("/dev/shm", 2.0) >= 0 && dev_shm_has(name),
	    "%s swept while its creator lives", name);
	kill(g, SIGKILL);
	CHK(waitpid(g, &st, 0) == g && WIFSIGNALED(st), "creator status 0x%x", st);
	CHK(dev_shm_has(name), "the killed creator's %s is gone already?", name);
	CHK(dpg_shm_sweep("/dev/shm", 3600) >= 0 && dev_shm_has(name),
	    "%s swept though younger than the sweep's age", name);

	snprintf(other, sizeof(other), "/dpg.%d.stale-test", (int)getpid());
	snprintf(path, sizeof(path), "/dev/shm%s", other);
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	CHK(fd >= 0 && close(fd) == 0 && set_age(other, 10) == 0, "%s: %s", path, strerror(errno));

	/* the next creator on the node */
	CHK(dpg_shm_open(&s, &r->cfg, &err) == 0, "open: %s", err.msg);
	CHK(dpg_store_get(r->st, r->key, &val, &len, dpg_now_ms() + 1000, &err) == 0,
	    "get: %s", err.msg);
	CHK(!dev_shm_has(name), "%s left after the next creator", name);
	CHK(dev_shm_has(val), "the new creator's own %s gone", (char *)val);
	CHK(dev_shm_has(other), "%s (not a segment's name) swept", other);
	unlink(path);
	dpg_shm_close(s);
	CHK(!dev_shm_has(val), "%s left after close", (char *)val);
	free(val);
	return 0;
}

static void test_stale_swept(void **state)
{
	(void)state;
	run_ranks(1, stale_rank, 20);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_open_bad_args),
		cmocka_unit_test(test_fail_format),
		cmocka_unit_test(test_fail_valid),
		cmocka_unit_test(test_segment_lifecycle),
		cmocka_unit_test(test_close_unlinks),
		cmocka_unit_test(test_bad_peer_segment),
		cmocka_unit_test(test_mismatch),
		cmocka_unit_test(test_pipes),
		cmocka_unit_test(test_split_copies),
		cmocka_unit_test(test_stream_copies),
		cmocka_unit_test(test_single_copy),
		cmocka_unit_test(test_spin_budget),
		cmocka_unit_test(test_handoff_median),
		cmocka_unit_test(test_xcost_pick),
		cmocka_unit_test(test_handoff_sampled),
		cmocka_unit_test(test_failure_word),
		cmocka_unit_test(test_dead_rank),
		cmocka_unit_test(test_absent_rank),
		cmocka_unit_test(test_bad_failure_word),
		cmocka_unit_test(test_sigterm_after_attach),
		cmocka_unit_test(test_stale_swept),
		cmocka_unit_test(test_dev_shm_full),
	};
	int rc = cmocka_run_group_tests(tests, group_setup, group_teardown);

	if (g_skipped > 0)
		printf("test_shm: %d case(s) skipped (reasons above)\n", g_skipped);
	return rc;
}
