/* SPDX-License-Identifier: BSD-3-Clause */
/* test_live.c - unit tests for the liveness watch: live.c's decisions on a
 * fake clock, and watch.c's threads on a real store with real processes
 * that die (SIGKILL), stop (SIGSTOP) or leave (dpg_watch_stop). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "live.h"
#include "net.h"
#include "store.h"

static const uint8_t SECRET[16] = "0123456789abcdef";

/* ------------------------------------------------------------ decisions */

static void test_observe(void **state)
{
	struct dpg_live_peer p = { 0 };

	(void)state;
	/* first reading starts the clock, whatever the value */
	assert_false(dpg_live_observe(&p, 0, 1000, 500));
	assert_false(dpg_live_observe(&p, 0, 1499, 500));
	assert_true(dpg_live_observe(&p, 0, 1500, 500));
	/* a beat restarts it */
	assert_false(dpg_live_observe(&p, 1, 1600, 500));
	assert_false(dpg_live_observe(&p, 1, 2000, 500));
	assert_true(dpg_live_observe(&p, 1, 2100, 500));
	/* a rank that left is never dead */
	assert_false(dpg_live_observe(&p, DPG_LIVE_LEFT + 7, 9000, 500));
	assert_false(dpg_live_observe(&p, DPG_LIVE_LEFT + 7, 99000, 500));
}

static void test_target(void **state)
{
	(void)state;
	assert_int_equal(dpg_live_target(0, 4), 1);
	assert_int_equal(dpg_live_target(3, 4), 0);
	assert_int_equal(dpg_live_target(1, 2), 0);
	assert_int_equal(dpg_live_target(0, 1), -1);
	assert_int_equal(dpg_live_target(4, 4), -1);
	assert_int_equal(dpg_live_target(-1, 4), -1);
}

static void test_dead_ms(void **state)
{
	struct dpg_err e = { { 0 } };
	int64_t ms = -1;

	(void)state;
	assert_int_equal(dpg_live_dead_ms(NULL, &ms, &e), 0);
	assert_int_equal(ms, DPG_LIVE_DEAD_MS);
	assert_int_equal(dpg_live_dead_ms("", &ms, &e), 0);
	assert_int_equal(ms, DPG_LIVE_DEAD_MS);
	assert_int_equal(dpg_live_dead_ms("2.5", &ms, &e), 0);
	assert_int_equal(ms, 2500);
	assert_int_equal(dpg_live_dead_ms("0", &ms, &e), 0);
	assert_int_equal(ms, 0);
	assert_int_equal(dpg_live_dead_ms("0.2", &ms, &e), -DPG_ERR_INVALID);
	assert_non_null(strstr(e.msg, "DPG_PEER_TIMEOUT='0.2'"));
	assert_int_equal(dpg_live_dead_ms("5s", &ms, &e), -DPG_ERR_INVALID);
	assert_int_equal(dpg_live_dead_ms("-3", &ms, &e), -DPG_ERR_INVALID);
	assert_int_equal(dpg_live_dead_ms("1e9", &ms, &e), -DPG_ERR_INVALID);
}

static void test_record(void **state)
{
	char buf[64], msg[DPG_LIVE_MSG_MAX];
	int64_t silent = 0;
	int r = -1, by = -1;

	(void)state;
	dpg_live_record(buf, sizeof(buf), 3, 5250, 2);
	assert_string_equal(buf, "3 5250 2");
	assert_true(dpg_live_parse(buf, 4, &r, &silent, &by));
	assert_int_equal(r, 3);
	assert_int_equal(silent, 5250);
	assert_int_equal(by, 2);
	assert_false(dpg_live_parse(buf, 3, &r, &silent, &by));	/* rank 3 of 3 */
	assert_false(dpg_live_parse("3 5250", 4, &r, &silent, &by));
	assert_false(dpg_live_parse("3 5250 2 x", 4, &r, &silent, &by));
	assert_false(dpg_live_parse("", 4, &r, &silent, &by));
	dpg_live_message(msg, sizeof(msg), 3, "n2", 5250, 2);
	assert_string_equal(msg, "rank 3 (n2) died or stopped: no heartbeat for 5.2 s "
			    "(seen by rank 2; DPG_PEER_TIMEOUT); every communicator "
			    "was aborted");
	dpg_live_message(msg, sizeof(msg), 1, NULL, 1000, 0);
	assert_non_null(strstr(msg, "rank 1 died or stopped"));
	dpg_live_store_message(msg, sizeof(msg), "n0", "was closed");
	assert_string_equal(msg, "rank 0 (n0) died or stopped: this rank's store "
			    "connection was closed (rank 0 holds the store); every "
			    "communicator was aborted");
}

/* ------------------------------------------------------------ watchers */

#define NS "dpg/t.0"
#define BEAT_MS 50
#define DEAD_MS 600

static const char *const NODES[] = { "n0", "n1", "n2", "n3" };

struct seen {
	int rank;
	char msg[DPG_LIVE_MSG_MAX];
	int64_t at_ms;
};

static void on_dead(void *arg, int rank, const char *msg)
{
	struct seen *s = arg;

	snprintf(s->msg, sizeof(s->msg), "%s", msg);
	s->at_ms = dpg_now_ms();
	__atomic_store_n(&s->rank, rank, __ATOMIC_RELEASE);
}

static int watch_on(struct dpg_watch *w, uint16_t port, int rank, int n,
		    struct seen *s)
{
	struct dpg_err e = { { 0 } };

	*w = (struct dpg_watch){ .ns = NS, .rank = rank, .n = n, .dead_ms = DEAD_MS,
		.beat_ms = BEAT_MS, .nodes = NODES, .on_dead = on_dead, .arg = s };
	s->rank = -1;
	if (dpg_store_connect("127.0.0.1", port, SECRET, sizeof(SECRET),
			      dpg_now_ms() + 5000, &w->stop, &w->store, &e) != 0)
		return -1;
	return dpg_watch_start(w, &e);
}

/* A child process that watches as rank until killed (or for 60 s). */
static pid_t child_watch(uint16_t port, int rank, int n)
{
	pid_t pid = fork();

	if (pid == 0) {
		struct dpg_watch w;
		struct seen s;

		if (watch_on(&w, port, rank, n, &s) != 0)
			_exit(2);
		sleep(60);
		_exit(0);
	}
	return pid;
}

static int wait_seen(struct seen *s, int64_t ms)
{
	int64_t end = dpg_now_ms() + ms;

	while (__atomic_load_n(&s->rank, __ATOMIC_ACQUIRE) < 0 && dpg_now_ms() < end)
		nanosleep(&(struct timespec){ .tv_nsec = 10000000 }, NULL);
	return __atomic_load_n(&s->rank, __ATOMIC_ACQUIRE);
}

static struct dpg_store_server *server(uint16_t *port)
{
	struct dpg_store_server *srv = NULL;
	struct dpg_err e = { { 0 } };

	assert_int_equal(dpg_store_server_start("127.0.0.1", 0, SECRET, sizeof(SECRET),
						&srv, &e), 0);
	*port = dpg_store_server_port(srv);
	return srv;
}

/* Ranks 0 and 2 here, rank 1 (watched by 0) a process: kill -9 it (or stop
 * it): both survivors report rank 1 within the peer timeout and a few
 * rounds, naming it and its watcher. */
static void killed_or_stopped(int sig)
{
	struct dpg_watch w0, w2;
	struct seen s0, s2;
	uint16_t port = 0;
	struct dpg_store_server *srv = server(&port);
	pid_t kid = child_watch(port, 1, 3);
	int64_t t0;

	assert_true(kid > 0);
	assert_int_equal(watch_on(&w0, port, 0, 3, &s0), 0);
	assert_int_equal(watch_on(&w2, port, 2, 3, &s2), 0);
	/* all alive: nobody is found dead for three peer timeouts */
	assert_int_equal(wait_seen(&s0, 3 * DEAD_MS), -1);
	assert_int_equal(s2.rank, -1);
	t0 = dpg_now_ms();
	kill(kid, sig);
	assert_int_equal(wait_seen(&s0, 5000), 1);
	assert_int_equal(wait_seen(&s2, 5000), 1);
	assert_true(s0.at_ms - t0 < DEAD_MS + 10 * BEAT_MS + 500);
	assert_true(s2.at_ms - t0 < DEAD_MS + 10 * BEAT_MS + 500);
	assert_non_null(strstr(s0.msg, "rank 1 (n1) died or stopped"));
	assert_non_null(strstr(s2.msg, "rank 1 (n1) died or stopped"));
	assert_non_null(strstr(s2.msg, "seen by rank 0"));
	dpg_watch_stop(&w0);
	dpg_watch_stop(&w2);
	kill(kid, SIGKILL);
	if (sig == SIGSTOP)
		kill(kid, SIGCONT);
	waitpid(kid, NULL, 0);
	dpg_store_server_stop(srv);
}

static void test_killed(void **state)
{
	(void)state;
	killed_or_stopped(SIGKILL);
}

static void test_stopped(void **state)
{
	(void)state;
	killed_or_stopped(SIGSTOP);
}

/* A rank that leaves (dpg_watch_stop) is not dead for its watcher. */
static void test_left(void **state)
{
	struct dpg_watch w0, w1;
	struct seen s0, s1;
	uint16_t port = 0;
	struct dpg_store_server *srv = server(&port);

	(void)state;
	assert_int_equal(watch_on(&w0, port, 0, 2, &s0), 0);
	assert_int_equal(watch_on(&w1, port, 1, 2, &s1), 0);
	nanosleep(&(struct timespec){ .tv_nsec = 200000000 }, NULL);
	dpg_watch_stop(&w1);
	assert_int_equal(wait_seen(&s0, 3 * DEAD_MS), -1);
	dpg_watch_stop(&w0);
	assert_int_equal(s1.rank, -1);
	dpg_store_server_stop(srv);
}

/* The store (rank 0's process) goes away: the watcher names rank 0 at once. */
static void test_store_lost(void **state)
{
	struct dpg_watch w1;
	struct seen s1;
	uint16_t port = 0;
	struct dpg_store_server *srv = server(&port);
	int64_t t0;

	(void)state;
	assert_int_equal(watch_on(&w1, port, 1, 2, &s1), 0);
	nanosleep(&(struct timespec){ .tv_nsec = 100000000 }, NULL);
	t0 = dpg_now_ms();
	dpg_store_server_stop(srv);
	assert_int_equal(wait_seen(&s1, 5000), 0);
	assert_true(dpg_now_ms() - t0 < DEAD_MS + 500);
	assert_non_null(strstr(s1.msg, "rank 0 (n0) died or stopped: this rank's "
			       "store connection"));
	dpg_watch_stop(&w1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_observe),
		cmocka_unit_test(test_target),
		cmocka_unit_test(test_dead_ms),
		cmocka_unit_test(test_record),
		cmocka_unit_test(test_killed),
		cmocka_unit_test(test_stopped),
		cmocka_unit_test(test_left),
		cmocka_unit_test(test_store_lost),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
