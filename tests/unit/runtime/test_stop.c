/* SPDX-License-Identifier: BSD-3-Clause */
/* test_stop.c - the requeue protocol's stop flag (stop.c): forked ranks on
 * shared memory and on TCP, one of them signalled mid-run (SIGUSR1, then
 * SIGTERM on top), every rank told to stop at the same step. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dpg.h"

#define SECRET_A "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define MAX_RANKS 4

#include "thread.h"	/* dpg_thread_start */
#include "../ranks.h"

#define VICTIM 2
#define SIGNAL_STEP 5
#define STEPS 12

/* j->arg non-NULL: TCP (every rank a node of its own). */
static void env_requeue(int rank, const struct job *j)
{
	char node[32];

	if (j->arg != NULL) {
		snprintf(node, sizeof(node), "fake%d", rank);
		setenv("SLURMD_NODENAME", node, 1);
	}
	setenv("DPG_REQUEUE", "30", 1);
}

/* A signal sent to oneself is handled before kill() returns on Linux, but
 * valgrind delivers it later: wait until it is no longer pending (the
 * handler ran), so that the step it lands in is the one the test means. */
static void wait_delivered(int sig)
{
	for (int i = 0; i < 5000; i++) {
		sigset_t set;

		if (sigpending(&set) != 0 || !sigismember(&set, sig))
			return;
		usleep(1000);
	}
}

/* Steps until told to stop: the victim signals itself (a real kill) before
 * step SIGNAL_STEP's question, and once more after (SIGTERM, as the time
 * limit would); every rank must stop at SIGNAL_STEP and stay stopped. */
static void body_signal(int rank, const struct job *j)
{
	dpg_ctx_t *ctx = NULL;
	int stop = 0, s;

	(void)j;
	CHK_OK(ctx, dpg_init(NULL, &ctx));
	for (s = 0; s < STEPS; s++) {
		if (rank == VICTIM && s == SIGNAL_STEP) {
			CHK(kill(getpid(), SIGUSR1) == 0, "kill");
			wait_delivered(SIGUSR1);
		}
		CHK_OK(ctx, dpg_stop_requested(ctx, &stop));
		if (stop)
			break;
	}
	CHK(s == SIGNAL_STEP, "stopped at step %d, not %d", s, SIGNAL_STEP);
	if (rank == VICTIM)
		CHK(kill(getpid(), SIGTERM) == 0, "kill");	/* twice: harmless */
	CHK_OK(ctx, dpg_stop_requested(ctx, &stop));
	CHK(stop == 1, "the answer did not stay 1");
	CHK_OK(ctx, dpg_finalize(&ctx));
}

static void test_signal_shm(void **state)
{
	struct job j = { .n = 4, .body = body_signal, .env = env_requeue };

	(void)state;
	expect_all_ok(&j);
}

static void test_signal_tcp(void **state)
{
	struct job j = { .n = 3, .body = body_signal, .env = env_requeue,
			 .arg = "tcp" };

	(void)state;
	expect_all_ok(&j);
}

/* As the plugin starts a task: SIGUSR1 blocked; the warning arrives before
 * dpg_init (it stays pending, the process lives), dpg_init lets it through,
 * and the first question already says stop, on every rank. */
static void body_early(int rank, const struct job *j)
{
	dpg_ctx_t *ctx = NULL;
	sigset_t set, now;
	int stop = 0;

	(void)j;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	CHK(sigprocmask(SIG_BLOCK, &set, NULL) == 0, "sigprocmask");
	if (rank == 1)
		CHK(kill(getpid(), SIGUSR1) == 0, "kill");
	CHK_OK(ctx, dpg_init(NULL, &ctx));
	CHK(sigprocmask(SIG_BLOCK, NULL, &now) == 0 && !sigismember(&now, SIGUSR1),
	    "SIGUSR1 still blocked after dpg_init");
	CHK_OK(ctx, dpg_stop_requested(ctx, &stop));
	CHK(stop == 1, "the warning sent before dpg_init was lost");
	CHK_OK(ctx, dpg_finalize(&ctx));
}

static void test_signal_before_init(void **state)
{
	struct job j = { .n = 3, .body = body_early, .env = env_requeue };

	(void)state;
	expect_all_ok(&j);
}

/* Without DPG_REQUEUE nothing is installed and nothing stops. */
static void body_off(int rank, const struct job *j)
{
	dpg_ctx_t *ctx = NULL;
	struct sigaction sa;
	int stop = 1;

	(void)rank;
	(void)j;
	CHK_OK(ctx, dpg_init(NULL, &ctx));
	CHK(sigaction(SIGUSR1, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL,
	    "SIGUSR1 handler installed without DPG_REQUEUE");
	CHK(sigaction(SIGTERM, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL,
	    "SIGTERM handler installed without DPG_REQUEUE");
	CHK_OK(ctx, dpg_stop_requested(ctx, &stop));
	CHK(stop == 0, "stop without a signal");
	CHK(dpg_stop_requested(ctx, NULL) == DPG_ERR_INVALID, "NULL stop accepted");
	CHK_OK(ctx, dpg_finalize(&ctx));
}

static void test_off_without_env(void **state)
{
	struct job j = { .n = 2, .body = body_off };

	(void)state;
	expect_all_ok(&j);
}

/* DPG_END_TIME: rank 1's end is near (within GRACE), rank 0's far: both stop
 * (the answer is the same everywhere); an end far away stops nobody. */
static void env_end(int rank, const struct job *j)
{
	char v[32];

	snprintf(v, sizeof(v), "%lld", (long long)time(NULL) +
		 (j->arg != NULL ? 3600 : rank == 1 ? 20 : 3600));
	setenv("DPG_END_TIME", v, 1);
	setenv("DPG_REQUEUE", "30", 1);
}

static void body_end(int rank, const struct job *j)
{
	dpg_ctx_t *ctx = NULL;
	int stop = -1;

	(void)rank;
	CHK_OK(ctx, dpg_init(NULL, &ctx));
	CHK_OK(ctx, dpg_stop_requested(ctx, &stop));
	CHK(stop == (j->arg == NULL), "stop %d", stop);
	CHK_OK(ctx, dpg_finalize(&ctx));
}

static void test_end_time(void **state)
{
	struct job near = { .n = 2, .body = body_end, .env = env_end };
	struct job far = { .n = 2, .body = body_end, .env = env_end, .arg = "far" };

	(void)state;
	expect_all_ok(&near);
	expect_all_ok(&far);
}

static void env_bad(int rank, const struct job *j)
{
	(void)rank;
	(void)j;
	setenv("DPG_REQUEUE", "soon", 1);
}

static void body_bad(int rank, const struct job *j)
{
	dpg_ctx_t *ctx = NULL;
	dpg_status_t st = dpg_init(NULL, &ctx);

	(void)rank;
	(void)j;
	CHK(st == DPG_ERR_ENV, "got %s: %s", dpg_strerror(st), dpg_last_error(ctx));
	CHK(strstr(dpg_last_error(ctx), "DPG_REQUEUE=soon") != NULL, "%s",
	    dpg_last_error(ctx));
	dpg_finalize(&ctx);
}

static void test_bad_env(void **state)
{
	struct job j = { .n = 2, .body = body_bad, .env = env_bad };

	(void)state;
	expect_all_ok(&j);
}

/* libdpg's threads (store, responder, watch, prefetch, writer) start with
 * every signal blocked, so that a warning sent to the process lands in the
 * program's thread, at the step it was sent in; the caller's mask stays. */
static void *mask_of_thread(void *arg)
{
	pthread_sigmask(SIG_BLOCK, NULL, (sigset_t *)arg);
	return NULL;
}

static void test_library_threads_block_signals(void **state)
{
	sigset_t in_thread, before, after;
	pthread_t th;

	(void)state;
	sigemptyset(&in_thread);
	assert_int_equal(pthread_sigmask(SIG_BLOCK, NULL, &before), 0);
	assert_false(sigismember(&before, SIGUSR1));
	assert_int_equal(dpg_thread_start(&th, mask_of_thread, &in_thread), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_true(sigismember(&in_thread, SIGUSR1));
	assert_true(sigismember(&in_thread, SIGTERM));
	assert_true(sigismember(&in_thread, SIGINT));
	assert_int_equal(pthread_sigmask(SIG_BLOCK, NULL, &after), 0);
	assert_false(sigismember(&after, SIGUSR1));
	assert_false(sigismember(&after, SIGTERM));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_signal_shm),
		cmocka_unit_test(test_signal_tcp),
		cmocka_unit_test(test_signal_before_init),
		cmocka_unit_test(test_off_without_env),
		cmocka_unit_test(test_end_time),
		cmocka_unit_test(test_bad_env),
		cmocka_unit_test(test_library_threads_block_signals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
