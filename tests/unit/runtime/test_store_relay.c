/* SPDX-License-Identifier: BSD-3-Clause */
/* test_store_relay.c - unit tests for the node leader's relay,
 * lib/runtime/store_relay.c: local clients through one relay against a real
 * store server (ADD order, wake-ups, deadlines, deaths named, strangers). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net.h"
#include "store.h"
#include "store_relay.h"

static const uint8_t SECRET[32] = {
	0x5e, 0xc2, 0x37, 0x01, 0x99, 0xab, 0x10, 0x42, 0x7f, 0x00, 0x11, 0xee,
	0x3c, 0x8d, 0x2a, 0x64, 0xd1, 0x05, 0x6b, 0x90, 0x21, 0x7a, 0xc8, 0x33,
	0x4e, 0xf2, 0x19, 0x86, 0x0d, 0xb7, 0x58, 0xe4,
};
static const uint8_t OTHER[32] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };

#define NCLIENTS 8
#define NADDS 50
/* the leader of node n1, whose four ranks are 4-7 */
static const struct dpg_relay_leader LEADER = { 4, "n1", 4 };
#define LABEL "node leader rank 4 on n1, carrying ranks 4-7"

static int64_t in_ms(int64_t ms)
{
	return dpg_now_ms() + ms;
}

struct fx {
	struct dpg_store_server *srv;
	struct dpg_store_relay *relay;
	uint16_t port;
	char name[DPG_RELAY_NAME_MAX];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct dpg_err err;
	char ns[32];

	if (f == NULL || dpg_store_server_start("127.0.0.1", 0, SECRET, sizeof(SECRET),
						&f->srv, &err) != 0) {
		fprintf(stderr, "setup: %s\n", err.msg);
		free(f);
		return -1;
	}
	f->port = dpg_store_server_port(f->srv);
	snprintf(ns, sizeof(ns), "test.%d", (int)getpid());
	dpg_store_relay_name(ns, "n1", "127.0.0.1", f->port, f->name);
	*state = f;
	return 0;
}

static int start_relay(struct fx *f)
{
	struct dpg_err err;
	int rc = dpg_store_relay_start(f->name, "127.0.0.1", f->port, SECRET, sizeof(SECRET),
				       &LEADER, in_ms(5000), NULL, &f->relay, &err);

	if (rc != 0)
		fprintf(stderr, "relay: %s\n", err.msg);
	return rc;
}

static int setup_relay(void **state)
{
	int rc = setup(state);

	return rc != 0 ? rc : start_relay(*state);
}

static int teardown(void **state)
{
	struct fx *f = *state;

	dpg_store_server_stop(f->srv);		/* first: a relay lost is logged */
	dpg_store_relay_stop(f->relay);
	free(f);
	return 0;
}

/* A local client of world rank `rank` (4..7). */
static struct dpg_store *local(const struct fx *f, int rank)
{
	struct dpg_store *s = NULL;
	struct dpg_err err;

	if (dpg_store_connect_relay(f->name, "127.0.0.1:store", rank, SECRET,
				    sizeof(SECRET), in_ms(5000), NULL, &s, &err) != 0)
		fail_msg("connect through the relay: %s", err.msg);
	return s;
}

static struct dpg_store *direct(const struct fx *f)
{
	struct dpg_store *s = NULL;
	struct dpg_err err;

	if (dpg_store_connect("127.0.0.1", f->port, SECRET, sizeof(SECRET), in_ms(5000),
			      NULL, &s, &err) != 0)
		fail_msg("connect to the store: %s", err.msg);
	return s;
}

/* Poll the relay's registration at the store until it reads want (3 s);
 * returns whether it did, the last value read in got. */
static bool label_becomes(const struct fx *f, const char *want, char *got, size_t glen)
{
	char key[sizeof(DPG_RELAY_KEY_PREFIX) + DPG_RELAY_NAME_MAX];
	struct dpg_store *d = direct(f);
	int64_t end = in_ms(3000);
	bool same = false;

	snprintf(key, sizeof(key), "%s%s", DPG_RELAY_KEY_PREFIX, f->name);
	do {
		struct dpg_err err;
		void *v = NULL;
		size_t len = 0;

		got[0] = '\0';
		if (dpg_store_get(d, key, &v, &len, in_ms(1000), &err) == 0)
			snprintf(got, glen, "%.*s", (int)len, (char *)v);
		free(v);
		same = strcmp(got, want) == 0;
		if (!same)
			usleep(5000);
	} while (!same && dpg_now_ms() < end);
	dpg_store_close(d);
	return same;
}

/* Poll cond-like: until the store's parked count is want (2 s). */
static size_t parked_becomes(const struct fx *f, size_t want)
{
	struct dpg_store_server_stats st;
	int64_t end = in_ms(2000);

	do {
		dpg_store_server_stats(f->srv, &st);
		if (st.parked == want)
			break;
		usleep(5000);
	} while (dpg_now_ms() < end);
	return st.parked;
}

/* ------------------------------------------------------------ tests */

static void test_relay_name(void **state)
{
	char a[DPG_RELAY_NAME_MAX], b[DPG_RELAY_NAME_MAX], c[DPG_RELAY_NAME_MAX];

	(void)state;
	dpg_store_relay_name("7.0", "n1", "10.0.0.1", 29500, a);
	dpg_store_relay_name("7.0", "n1", "10.0.0.1", 29500, b);
	dpg_store_relay_name("7.0", "n2", "10.0.0.1", 29500, c);
	assert_string_equal(a, b);
	assert_string_not_equal(a, c);
	dpg_store_relay_name("7.1", "n1", "10.0.0.1", 29500, c);
	assert_string_not_equal(a, c);
	assert_true(strlen(a) < DPG_RELAY_NAME_MAX);
}

struct adder {
	const struct fx *f;
	int idx;
	int64_t got[NADDS];
	int rc;
};

static void *add_main(void *arg)
{
	struct adder *a = arg;
	struct dpg_store *s = local(a->f, 4 + a->idx % 4);
	struct dpg_err err;

	for (int i = 0; i < NADDS && a->rc == 0; i++)
		a->rc = dpg_store_add(s, "ctr", 1, &a->got[i], in_ms(5000), &err);
	dpg_store_close(s);
	return NULL;
}

/* Eight local clients ADD through one relay: every result distinct, 1..400,
 * and each client's own results in increasing order. */
static void test_adds_through_relay(void **state)
{
	struct fx *f = *state;
	struct adder a[NCLIENTS];
	pthread_t th[NCLIENTS];
	bool seen[NCLIENTS * NADDS + 1] = { false };
	struct dpg_store *direct = NULL;
	struct dpg_err err;
	int64_t v = 0;

	for (int i = 0; i < NCLIENTS; i++) {
		a[i] = (struct adder){ .f = f, .idx = i };
		assert_int_equal(pthread_create(&th[i], NULL, add_main, &a[i]), 0);
	}
	for (int i = 0; i < NCLIENTS; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < NCLIENTS; i++) {
		assert_int_equal(a[i].rc, 0);
		for (int k = 0; k < NADDS; k++) {
			assert_in_range(a[i].got[k], 1, NCLIENTS * NADDS);
			assert_false(seen[a[i].got[k]]);
			seen[a[i].got[k]] = true;
			if (k > 0)
				assert_true(a[i].got[k] > a[i].got[k - 1]);
		}
	}
	/* the store itself has the sum, as a direct client sees it */
	assert_int_equal(dpg_store_connect("127.0.0.1", f->port, SECRET, sizeof(SECRET),
					   in_ms(5000), NULL, &direct, &err), 0);
	assert_int_equal(dpg_store_add(direct, "ctr", 0, &v, in_ms(5000), &err), 0);
	assert_int_equal(v, NCLIENTS * NADDS);
	dpg_store_close(direct);
}

struct waiter {
	const struct fx *f;
	int rc;
	void *val;
	size_t len;
	int64_t t;
};

static void *wait_main(void *arg)
{
	struct waiter *w = arg;
	struct dpg_store *s = local(w->f, 5);
	const char *keys[2] = { "a", "b" };
	struct dpg_err err;

	w->rc = dpg_store_wait(s, keys, 2, in_ms(5000), &err);
	if (w->rc == 0)
		w->rc = dpg_store_get(s, "big", &w->val, &w->len, in_ms(5000), &err);
	w->t = dpg_now_ms();
	dpg_store_close(s);
	return NULL;
}

/* A WAIT parked upstream through the relay wakes when a direct client sets
 * the keys; a 1 MiB GET comes back whole. */
static void test_wait_wakes_through_relay(void **state)
{
	struct fx *f = *state;
	struct waiter w[3];
	pthread_t th[3];
	struct dpg_store *direct = NULL;
	struct dpg_err err;
	size_t big = 1 << 20;
	uint8_t *v = malloc(big);
	int64_t t_set;

	assert_non_null(v);
	for (size_t i = 0; i < big; i++)
		v[i] = (uint8_t)(i * 7 + 3);
	for (int i = 0; i < 3; i++) {
		w[i] = (struct waiter){ .f = f };
		assert_int_equal(pthread_create(&th[i], NULL, wait_main, &w[i]), 0);
	}
	assert_int_equal(parked_becomes(f, 3), 3);
	assert_int_equal(dpg_store_connect("127.0.0.1", f->port, SECRET, sizeof(SECRET),
					   in_ms(5000), NULL, &direct, &err), 0);
	assert_int_equal(dpg_store_set(direct, "big", v, big, in_ms(5000), &err), 0);
	assert_int_equal(dpg_store_set(direct, "a", "1", 1, in_ms(5000), &err), 0);
	usleep(50000);
	t_set = dpg_now_ms();
	assert_int_equal(dpg_store_set(direct, "b", "1", 1, in_ms(5000), &err), 0);
	for (int i = 0; i < 3; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(w[i].rc, 0);
		assert_true(w[i].t >= t_set);
		assert_int_equal(w[i].len, big);
		assert_memory_equal(w[i].val, v, big);
		free(w[i].val);
	}
	dpg_store_close(direct);
	free(v);
}

/* A GET through the relay keeps its own deadline; its CANCEL reaches the
 * store (nothing stays parked) and the handle stays usable. */
static void test_deadline_through_relay(void **state)
{
	struct fx *f = *state;
	struct dpg_store *s = local(f, 6);
	struct dpg_store_relay_stats rs;
	struct dpg_err err;
	int64_t t0 = dpg_now_ms();
	void *val = NULL;
	size_t len = 0;

	assert_int_equal(dpg_store_get(s, "never", &val, &len, in_ms(300), &err),
			 -DPG_ERR_TIMEOUT);
	assert_true(dpg_now_ms() - t0 >= 290);
	assert_true(dpg_now_ms() - t0 < 2000);
	assert_non_null(strstr(err.msg, "timed out"));
	assert_non_null(strstr(err.msg, "never"));
	assert_int_equal(parked_becomes(f, 0), 0);
	dpg_store_relay_stats(f->relay, &rs);
	assert_int_equal(rs.pending, 0);
	assert_int_equal(dpg_store_set(s, "k", "v", 1, in_ms(2000), &err), 0);
	assert_int_equal(dpg_store_get(s, "k", &val, &len, in_ms(2000), &err), 0);
	assert_int_equal(len, 1);
	free(val);
	dpg_store_close(s);
}

/* A local client killed with a parked GET: the relay sees it go and the
 * store forgets the request, as it does for a direct client. */
static void test_local_client_killed(void **state)
{
	struct fx *f = *state;
	struct dpg_store_relay_stats rs;
	int64_t end;
	pid_t pid;
	int st;

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct dpg_store *s = NULL;
		struct dpg_err err;
		void *val;
		size_t len;

		if (dpg_store_connect_relay(f->name, "x", 7, SECRET, sizeof(SECRET),
					    in_ms(5000), NULL, &s, &err) != 0)
			_exit(2);
		dpg_store_get(s, "never", &val, &len, in_ms(30000), &err);
		_exit(3);
	}
	assert_int_equal(parked_becomes(f, 1), 1);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(parked_becomes(f, 0), 0);
	end = in_ms(2000);
	do {
		dpg_store_relay_stats(f->relay, &rs);
		if (rs.clients == 0 && rs.pending == 0)
			break;
		usleep(5000);
	} while (dpg_now_ms() < end);
	assert_int_equal(rs.clients, 0);
	assert_int_equal(rs.pending, 0);
	assert_int_equal(rs.upstream_up, 1);
}

/* A client without the job secret is refused by the relay; a garbage
 * speaker is dropped; good clients still get through. */
static void test_stranger_refused(void **state)
{
	struct fx *f = *state;
	struct dpg_store *s = NULL;
	struct dpg_err err;
	int64_t v = 0;

	assert_int_equal(dpg_store_connect_relay(f->name, "127.0.0.1:store", 5, OTHER,
						 sizeof(OTHER), in_ms(2000), NULL, &s, &err),
			 -DPG_ERR_AUTH);
	assert_null(s);
	assert_non_null(strstr(err.msg, "refused our job secret"));
	s = local(f, 5);
	assert_int_equal(dpg_store_add(s, "n", 5, &v, in_ms(2000), &err), 0);
	assert_int_equal(v, 5);
	dpg_store_close(s);
}

/* Read what fd 2 got since the capture started (a temp file). */
static bool file_has(int fd, const char *what)
{
	char buf[8192];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

	if (n <= 0)
		return false;
	buf[n] = '\0';
	return strstr(buf, what) != NULL;
}

struct parked {
	const struct fx *f;
	int rc;
	char msg[512];
	bool broken;
};

/* A direct client (another node's rank) parks a GET nobody will answer. */
static void *parked_main(void *arg)
{
	struct parked *p = arg;
	struct dpg_store *d = direct(p->f);
	struct dpg_err err = { { 0 } };
	void *v = NULL;
	size_t len = 0;

	p->rc = dpg_store_get(d, "from/rank/6", &v, &len, in_ms(20000), &err);
	snprintf(p->msg, sizeof(p->msg), "%s", err.msg);
	p->broken = dpg_store_broken(d);
	free(v);
	dpg_store_close(d);
	return NULL;
}

/* The relay's process dies with its four ranks joined: its local clients
 * hear that the node leader (its world rank named) closed the connection;
 * the store logs the leader with the ranks it carried, and a wait parked by
 * another node's rank, and any wait after it, ends at once with that line,
 * the connection still usable. */
static void test_relay_killed(void **state)
{
	struct fx *f = *state;
	char path[] = "/tmp/dpg-relay-test-XXXXXX", got[DPG_RELAY_LABEL_MAX];
	int cap = mkstemp(path), saved = dup(2);
	struct parked pk = { .f = f };
	struct dpg_store *s[4], *d;
	struct dpg_err err;
	bool named = false;
	void *v = NULL;
	size_t len = 0;
	pthread_t th;
	int64_t end, t0;
	pid_t pid;
	int st;

	assert_true(cap >= 0 && saved >= 0);
	unlink(path);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (start_relay(f) != 0)
			_exit(2);
		pause();
		_exit(3);
	}
	for (int i = 0; i < 4; i++)
		s[i] = local(f, 4 + i);
	assert_int_equal(dpg_store_set(s[0], "k", "v", 1, in_ms(2000), &err), 0);
	assert_true(label_becomes(f, LABEL, got, sizeof(got)));
	assert_int_equal(pthread_create(&th, NULL, parked_main, &pk), 0);
	assert_int_equal(parked_becomes(f, 1), 1);
	dup2(cap, 2);
	t0 = dpg_now_ms();
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	end = in_ms(3000);
	while (!(named = file_has(cap, LABEL)) && dpg_now_ms() < end)
		usleep(10000);
	dup2(saved, 2);
	close(saved);
	assert_true(WIFSIGNALED(st));
	assert_true(named);
	assert_true(file_has(cap, "dpg store: lost"));
	close(cap);
	/* the parked wait of another node's rank: at once, naming leader and ranks */
	pthread_join(th, NULL);
	assert_int_equal(pk.rc, -DPG_ERR_PEER);
	assert_true(dpg_now_ms() - t0 < 3000);
	assert_non_null(strstr(pk.msg, "from/rank/6"));
	assert_non_null(strstr(pk.msg, LABEL ", is gone"));
	assert_false(pk.broken);
	/* a later wait too; what is set is still there, and sets still work */
	d = direct(f);
	assert_int_equal(dpg_store_get(d, "later", &v, &len, in_ms(5000), &err), -DPG_ERR_PEER);
	assert_non_null(strstr(err.msg, LABEL ", is gone"));
	assert_int_equal(dpg_store_get(d, "k", &v, &len, in_ms(2000), &err), 0);
	assert_int_equal(len, 1);
	free(v);
	assert_int_equal(dpg_store_set(d, "k2", "w", 1, in_ms(2000), &err), 0);
	dpg_store_close(d);
	/* the local ranks: their leader, by its world rank */
	for (int i = 0; i < 4; i++) {
		assert_int_equal(dpg_store_set(s[i], "k", "w", 1, in_ms(2000), &err),
				 -DPG_ERR_PEER);
		assert_non_null(strstr(err.msg, "the node leader (rank 4, local rank 0 on "
					"n1) closed the connection"));
		dpg_store_close(s[i]);
	}
}

/* The registration follows the ranks that joined: none, some (told how
 * many are missing), all; a rank joining twice (its second connection)
 * counts once. */
static void test_relay_registers_ranks(void **state)
{
	struct fx *f = *state;
	char got[DPG_RELAY_LABEL_MAX];
	struct dpg_store *s[5];

	assert_true(label_becomes(f, "node leader rank 4 on n1, carrying its 4 local "
				  "ranks (none joined yet)", got, sizeof(got)));
	s[0] = local(f, 4);
	s[1] = local(f, 6);
	s[2] = local(f, 6);
	if (!label_becomes(f, "node leader rank 4 on n1, carrying ranks 4, 6 (2 of its 4 "
			   "local ranks not joined yet)", got, sizeof(got)))
		fail_msg("registration: '%s'", got);
	s[3] = local(f, 7);
	s[4] = local(f, 5);
	if (!label_becomes(f, LABEL, got, sizeof(got)))
		fail_msg("registration: '%s'", got);
	for (int i = 0; i < 5; i++)
		dpg_store_close(s[i]);
}

static void test_rank_ranges(void **state)
{
	static const int a[] = { 4, 5, 6, 7 }, b[] = { 0, 2, 5, 6, 9 };
	static const int c[] = { 100000, 100002, 100004, 100006, 100008 };
	char buf[64], small[20];

	(void)state;
	assert_string_equal(dpg_rank_ranges(a, 4, buf, sizeof(buf)), "4-7");
	assert_string_equal(dpg_rank_ranges(b, 5, buf, sizeof(buf)), "0, 2, 5-6, 9");
	assert_string_equal(dpg_rank_ranges(a, 1, buf, sizeof(buf)), "4");
	assert_string_equal(dpg_rank_ranges(a, 0, buf, sizeof(buf)), "");
	/* cut where it does not fit, never mid-number */
	assert_string_equal(dpg_rank_ranges(c, 5, small, sizeof(small)), "100000, 100002, ...");
	assert_string_equal(dpg_rank_ranges(c, 2, small, sizeof(small)), "100000, 100002");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_relay_name),
		cmocka_unit_test(test_rank_ranges),
		cmocka_unit_test_setup_teardown(test_relay_registers_ranks, setup_relay,
						teardown),
		cmocka_unit_test_setup_teardown(test_adds_through_relay, setup_relay, teardown),
		cmocka_unit_test_setup_teardown(test_wait_wakes_through_relay, setup_relay,
						teardown),
		cmocka_unit_test_setup_teardown(test_deadline_through_relay, setup_relay,
						teardown),
		cmocka_unit_test_setup_teardown(test_local_client_killed, setup_relay,
						teardown),
		cmocka_unit_test_setup_teardown(test_stranger_refused, setup_relay, teardown),
		cmocka_unit_test_setup_teardown(test_relay_killed, setup, teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
