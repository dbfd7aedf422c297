/* SPDX-License-Identifier: BSD-3-Clause */
/* ranks.h - the multi-process harness of the runtime's unit tests: fork N
 * rank processes that join through the environment, as tasks of a job do.
 * Include after <cmocka.h> and define SECRET_A and MAX_RANKS first. */
#ifndef DPG_TEST_RANKS_H
#define DPG_TEST_RANKS_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dpg.h"
#include "testenv.h"

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif


static int g_rank = -1;

#define CHK(cond, ...)                                                      \
	do {                                                                \
		if (!(cond)) {                                              \
			fprintf(stderr, "rank %d: line %d: check '%s' failed: ", \
				g_rank, __LINE__, #cond);                   \
			fprintf(stderr, __VA_ARGS__);                       \
			fprintf(stderr, "\n");                              \
			_exit(1);                                           \
		}                                                           \
	} while (0)

#define CHK_OK(ctx, expr)                                                   \
	do {                                                                \
		dpg_status_t st_ = (expr);                                  \
		CHK(st_ == DPG_OK, "%s -> %s: %s", #expr, dpg_strerror(st_), \
		    dpg_last_error(ctx));                                   \
	} while (0)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}



/* ------------------------------------------------ the parent's side */

static uint16_t checked_port(void)
{
	uint16_t p = free_port();

	assert_true(p != 0);
	return p;
}

struct job {
	int n;
	uint16_t port;
	double timeout_s;		/* DPG_TIMEOUT of the ranks */
	double limit_s;			/* the parent kills the ranks after this */
	void (*env)(int rank, const struct job *j);	/* extra per-rank env */
	void (*body)(int rank, const struct job *j);
	void *arg;
};

/* The environment of one rank of a plain N-process job. */
static void rank_env(int rank, const struct job *j)
{
	clean_env();
	setenv_int("RANK", rank);
	setenv_int("WORLD_SIZE", j->n);
	setenv("MASTER_ADDR", "127.0.0.1", 1);
	setenv_int("MASTER_PORT", j->port);
	setenv("DPG_SECRET", SECRET_A, 1);
	setenv("DPG_BACKEND", "cpu", 1);
	{
		char t[32];

		snprintf(t, sizeof(t), "%g", j->timeout_s);
		setenv("DPG_TIMEOUT", t, 1);
	}
}

/* Fork j->n ranks, wait for all, return their exit codes in codes[]. */
static void run_job(struct job *j, int *codes)
{
	pid_t pids[MAX_RANKS];
	double t0 = now_s();
	int left = j->n;

	assert_true(j->n >= 1 && j->n <= MAX_RANKS);
	if (j->port == 0)
		j->port = checked_port();
	if (j->timeout_s <= 0)
		j->timeout_s = 20;
	if (j->limit_s <= 0)
		j->limit_s = j->timeout_s + 30;
	fflush(stdout);
	fflush(stderr);
	for (int r = 0; r < j->n; r++) {
		pids[r] = fork();
		assert_true(pids[r] >= 0);
		if (pids[r] == 0) {
			g_rank = r;
			rank_env(r, j);
			if (j->env != NULL)
				j->env(r, j);
			j->body(r, j);
			fflush(stdout);
			fflush(stderr);
#ifdef __SANITIZE_ADDRESS__
			/* ranks leave by _exit: run the leak check here */
			if (__lsan_do_recoverable_leak_check() != 0)
				_exit(7);
#endif
			_exit(0);
		}
		codes[r] = -1;
	}
	while (left > 0) {
		int status;
		pid_t p = waitpid(-1, &status, WNOHANG);

		if (p > 0) {
			for (int r = 0; r < j->n; r++)
				if (pids[r] == p) {
					codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) :
						   128 + WTERMSIG(status);
					left--;
				}
			continue;
		}
		if (now_s() - t0 > j->limit_s) {
			for (int r = 0; r < j->n; r++)
				if (codes[r] == -1) {
					fprintf(stderr, "rank %d hangs: killed after %.0f s\n",
						r, j->limit_s);
					kill(pids[r], SIGKILL);
				}
			while (left > 0 && waitpid(-1, &status, 0) > 0)
				left--;
			fail_msg("ranks did not finish within %.0f s", j->limit_s);
		}
		usleep(10000);
	}
}

static void expect_all_ok(struct job *j)
{
	int codes[MAX_RANKS];

	run_job(j, codes);
	for (int r = 0; r < j->n; r++)
		if (codes[r] != 0)
			fail_msg("rank %d of %d exited with %d", r, j->n, codes[r]);
}

#endif
