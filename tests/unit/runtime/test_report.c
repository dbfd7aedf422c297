/* SPDX-License-Identifier: BSD-3-Clause */
/* test_report.c - the straggler report and the hang report (report.c,
 * hang.c, hang_fmt.c, track.c): forked ranks on shared memory (one node) and
 * on TCP (every rank its own SLURMD_NODENAME), a rank slowed, stopped
 * (SIGSTOP) or asleep outside collectives, and the lines that name it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dpg.h"
#include "hang.h"

#define SECRET_A "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define MAX_RANKS 4

#include "../ranks.h"

#define SLOW 1		/* the straggler, and the stuck rank */
#define STEPS 6

/* ------------------------------------------------ helpers run in children */

/* TCP when j->arg is non-NULL: every rank a node of its own. */
static void env_layout(int rank, const struct job *j)
{
	char node[32];

	if (j->arg != NULL) {
		snprintf(node, sizeof(node), "fake%d", rank);
		setenv("SLURMD_NODENAME", node, 1);
	}
	if (rank == SLOW)
		setenv("DPG_GPUS", "0000:43:00.0", 1);
	setenv("DPG_REPORT", "3", 1);
}

/* The node name rank r goes by in messages. */
static void node_of(bool tcp, int r, char *out, size_t len)
{
	if (tcp) {
		snprintf(out, len, "fake%d", r);
		return;
	}
	gethostname(out, len);
	out[strcspn(out, ".")] = '\0';
}

static void steps(dpg_ctx_t *ctx, int rank, int n)
{
	float x[1024];

	for (int s = 0; s < n; s++) {
		if (rank == SLOW)
			usleep(30000);
		for (int i = 0; i < 1024; i++)
			x[i] = 1;
		CHK_OK(ctx, dpg_all_reduce(dpg_world(ctx), x, x, 1024, DPG_F32, DPG_SUM, NULL));
		CHK_OK(ctx, dpg_step_mark(ctx));
	}
}

/* STEPS steps, with this rank's stderr meanwhile in buf. */
static void capture_stderr(dpg_ctx_t *ctx, int rank, char *buf, size_t len)
{
	char path[] = "/tmp/dpg-report-XXXXXX";
	int fd = mkstemp(path), saved = dup(2);
	ssize_t got;

	CHK(fd >= 0 && saved >= 0, "mkstemp/dup");
	unlink(path);
	fflush(stderr);
	dup2(fd, 2);
	steps(ctx, rank, STEPS);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	got = pread(fd, buf, len - 1, 0);
	close(fd);
	buf[got > 0 ? got : 0] = '\0';
}

static void body_straggler(int rank, const struct job *j)
{
	dpg_ctx_t *ctx = NULL;
	char line[512], want[128], node[64], out[2048];

	CHK_OK(ctx, dpg_init(NULL, &ctx));
	node_of(j->arg != NULL, SLOW, node, sizeof(node));
	snprintf(want, sizeof(want), "slowest rank %d (%s, GPU 0000:43:00.0): the others "
		 "waited", SLOW, node);
	/* DPG_REPORT=3: rank 0 prints after steps 3 and 6 */
	capture_stderr(ctx, rank, out, sizeof(out));
	if (rank == 0) {
		printf("# %s", out);
		CHK(strstr(out, "dpg report: steps 1-3: ") != NULL, "%s", out);
		CHK(strstr(out, "dpg report: steps 4-6: ") != NULL, "%s", out);
		CHK(strstr(out, want) != NULL, "no '%s' in %s", want, out);
	} else {
		CHK(out[0] == '\0', "rank %d printed '%s'", rank, out);
	}
	/* the API call, on every rank: the window since the last report */
	CHK_OK(ctx, dpg_report_every(ctx, 0));
	steps(ctx, rank, 2);
	CHK_OK(ctx, dpg_straggler_report(ctx, line, sizeof(line)));
	CHK(strstr(line, "dpg report: steps 7-8: ") != NULL, "%s", line);
	CHK(strstr(line, want) != NULL, "no '%s' in %s", want, line);
	{
		/* 30 ms of sleep per step: the others waited at least 20 of it */
		const char *w = strstr(line, "waited ");
		double ms = w != NULL ? atof(w + 7) : 0;

		CHK(ms >= 20.0, "waited %.1f ms per step: %s", ms, line);
	}
	CHK_OK(ctx, dpg_finalize(&ctx));
}

static void test_straggler(void **state)
{
	(void)state;
	for (int tcp = 0; tcp <= 1; tcp++) {
		struct job j = { .n = 3, .body = body_straggler, .env = env_layout,
				 .arg = tcp ? (void *)1 : NULL, .timeout_s = 20 };

		printf("# %s\n", tcp ? "TCP" : "shared memory");
		expect_all_ok(&j);
	}
}

/* A DPG_REPORT that is not a number of steps stops dpg_init, named. */
static void env_bad_report(int rank, const struct job *j)
{
	(void)rank;
	(void)j;
	setenv("DPG_REPORT", "ten", 1);
}

static void body_bad_report(int rank, const struct job *j)
{
	dpg_ctx_t *ctx = NULL;
	dpg_status_t st = dpg_init(NULL, &ctx);

	(void)rank;
	(void)j;
	CHK(st == DPG_ERR_ENV, "got %s: %s", dpg_strerror(st), dpg_last_error(ctx));
	CHK(strstr(dpg_last_error(ctx), "DPG_REPORT=ten") != NULL, "%s", dpg_last_error(ctx));
	dpg_finalize(&ctx);
}

static void test_bad_report_env(void **state)
{
	struct job j = { .n = 2, .body = body_bad_report, .env = env_bad_report };

	(void)state;
	expect_all_ok(&j);
}

/* ------------------------------------------------ hangs */

enum stuck { STUCK_STOPPED, STUCK_ASLEEP };

struct hang_case {
	bool tcp;
	enum stuck how;
};

static void env_hang(int rank, const struct job *j)
{
	const struct hang_case *h = j->arg;
	char node[32];

	if (h->tcp) {
		snprintf(node, sizeof(node), "fake%d", rank);
		setenv("SLURMD_NODENAME", node, 1);
	}
	if (rank == SLOW)
		setenv("DPG_GPUS", "0000:43:00.0", 1);
}

/* SIGCONT to this process in s seconds, from a child of its own. */
static void cont_later(int s)
{
	pid_t me = getpid(), p = fork();

	CHK(p >= 0, "fork");
	if (p == 0) {
		sleep((unsigned)s);
		kill(me, SIGCONT);
		_exit(0);
	}
}

static void stuck_rank(dpg_ctx_t *ctx, enum stuck how)
{
	if (how == STUCK_STOPPED) {
		cont_later(6);
		raise(SIGSTOP);
	} else {
		sleep(6);
	}
	dpg_finalize(&ctx);	/* fails: the others gave up */
	while (wait(NULL) > 0)
		;
	_exit(0);
}

static void body_hang(int rank, const struct job *j)
{
	const struct hang_case *h = j->arg;
	dpg_ctx_t *ctx = NULL;
	float x[256] = { 0 };
	char node[64], want[160];
	const char *err;
	dpg_status_t st;

	CHK_OK(ctx, dpg_init(NULL, &ctx));
	CHK_OK(ctx, dpg_barrier(dpg_world(ctx)));				/* #0 */
	CHK_OK(ctx, dpg_all_reduce(dpg_world(ctx), x, x, 256, DPG_F32, DPG_SUM, NULL));	/* #1 */
	CHK_OK(ctx, dpg_all_reduce(dpg_world(ctx), x, x, 256, DPG_F32, DPG_SUM, NULL));	/* #2 */
	if (rank == SLOW)
		stuck_rank(ctx, h->how);
	st = dpg_all_reduce(dpg_world(ctx), x, x, 256, DPG_F32, DPG_SUM, NULL);	/* #3 */
	err = dpg_last_error(ctx);
	printf("# rank %d: %s\n", rank, err);
	CHK(st == DPG_ERR_TIMEOUT, "got %s: %s", dpg_strerror(st), err);
	CHK(strstr(err, "; the ranks: allreduce #3 on w: ranks 0,2 waiting since ") != NULL,
	    "%s", err);
	node_of(h->tcp, SLOW, node, sizeof(node));
	if (h->how == STUCK_STOPPED)
		snprintf(want, sizeof(want), "rank %d (%s): no answer in 0.2 s", SLOW, node);
	else
		snprintf(want, sizeof(want), "rank %d (%s, GPU 0000:43:00.0) last entered "
			 "allreduce #2, ", SLOW, node);
	CHK(strstr(err, want) != NULL, "no '%s' in %s", want, err);
	dpg_finalize(&ctx);
}

static void test_hang(void **state)
{
	static const struct hang_case cases[] = {
		{ false, STUCK_STOPPED }, { true, STUCK_STOPPED },
		{ false, STUCK_ASLEEP }, { true, STUCK_ASLEEP },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct job j = { .n = 3, .body = body_hang, .env = env_hang,
				 .arg = (void *)&cases[i], .timeout_s = 2, .limit_s = 40 };

		printf("# %s, rank %d %s\n", cases[i].tcp ? "TCP" : "shared memory", SLOW,
		       cases[i].how == STUCK_STOPPED ? "stopped (SIGSTOP)" :
		       "asleep outside collectives");
		expect_all_ok(&j);
	}
}

/* ------------------------------------------------ the line itself */

static void test_ranges(void **state)
{
	bool p[8] = { true, true, true, false, true, true, false, true };
	char out[64];

	(void)state;
	dpg_hang_ranges(p, 8, out, sizeof(out));
	assert_string_equal(out, "0-2,4-5,7");
	memset(p, 0, sizeof(p));
	p[3] = true;
	dpg_hang_ranges(p, 8, out, sizeof(out));
	assert_string_equal(out, "3");
}

static void test_format(void **state)
{
	struct dpg_hang_ans a[6];
	const char *nodes[6] = { "n1", "n1", "n1", "n2", "n2", "n2" };
	char out[512];

	(void)state;
	memset(a, 0, sizeof(a));
	for (int r = 0; r < 6; r++) {
		a[r].ok = true;
		a[r].v.state = DPG_TRACK_IN;
		a[r].v.kind = "allreduce";
		a[r].v.seq = 812;
		snprintf(a[r].v.comm, sizeof(a[r].v.comm), "w");
		a[r].ago_ms = 40000 + 20 * r;
	}
	a[2].v.state = DPG_TRACK_FAILED;
	a[3].v.state = DPG_TRACK_DONE;
	a[3].v.seq = 811;
	a[3].v.comm[0] = '\0';
	a[3].ago_ms = 41000;
	snprintf(a[3].busid, sizeof(a[3].busid), "0000:43:00.0");
	dpg_hang_format(a, 6, nodes, 2.0, out, sizeof(out));
	assert_string_equal(out, "allreduce #812 on w: ranks 0-2,4-5 waiting since 40.1 s; "
			    "rank 3 (n2, GPU 0000:43:00.0) last entered allreduce #811, "
			    "41.0 s ago");
	a[3].ok = false;
	a[5].v.seq = 813;
	a[4].ago_ms = 39000;
	dpg_hang_format(a, 6, nodes, 2.0, out, sizeof(out));
	assert_string_equal(out, "allreduce #812 on w: ranks 0-2,4 waiting since 40.0 s; "
			    "allreduce #813 on w: rank 5 waiting since 40.1 s; "
			    "rank 3 (n2): no answer in 2.0 s (stopped, or gone)");
	/* bounded: a short buffer ends in "..." */
	dpg_hang_format(a, 6, nodes, 2.0, out, 40);
	assert_int_equal(strlen(out), 39);
	assert_string_equal(out + 36, "...");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ranges),
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_straggler),
		cmocka_unit_test(test_bad_report_env),
		cmocka_unit_test(test_hang),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
