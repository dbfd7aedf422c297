/* SPDX-License-Identifier: BSD-3-Clause */
/* test_net.c - unit tests for lib/runtime/net.c: listen / connect / whole
 * buffer round trips over loopback, deadlines that expire on time, a closed
 * peer, the abort flag, connect retries and dpg_net_peer_name. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net.h"
#include "../testenv.h"

/* A connected pair over loopback: *srv is the accepted end. */
static void tcp_pair(int *cli, int *srv, uint16_t *port)
{
	struct dpg_err err = { "" };
	int lfd = -1;
	uint16_t p = 0;

	if (dpg_net_listen("127.0.0.1", 0, 4, &lfd, &p, &err) != 0)
		fail_msg("listen: %s", err.msg);
	assert_true(p != 0);
	if (dpg_net_connect("127.0.0.1", p, dpg_now_ms() + 5000, NULL, cli, &err) != 0)
		fail_msg("connect: %s", err.msg);
	*srv = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	assert_true(*srv >= 0);
	close(lfd);
	if (port != NULL)
		*port = p;
}

static void fill(uint8_t *b, size_t n, unsigned salt)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)((i * 2654435761u) >> 13 ^ salt);
}

static void test_now_ms(void **state)
{
	int64_t a = dpg_now_ms(), b;

	(void)state;
	usleep(20000);
	b = dpg_now_ms();
	assert_true(a > 0);
	assert_true(b - a >= 19 && b - a < 2000);
}

/* 4 MiB each way (more than the socket buffers hold): a child echoes what
 * it reads in 64 KiB pieces. */
static void test_round_trip(void **state)
{
	const size_t n = 4u << 20;
	uint8_t *out = malloc(n), *in = malloc(n);
	struct dpg_err err = { "" };
	int cli, srv, status;
	pid_t pid;

	(void)state;
	assert_non_null(out);
	assert_non_null(in);
	fill(out, n, 0x5a);
	tcp_pair(&cli, &srv, NULL);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int64_t dl = dpg_now_ms() + 20000;
		int rc = 0;

		close(cli);
		for (size_t o = 0; o < n && rc == 0; o += 65536) {
			rc = dpg_net_read_full(srv, in + o, 65536, dl, NULL, &err);
			if (rc == 0)
				rc = dpg_net_write_full(srv, in + o, 65536, dl, NULL, &err);
		}
		if (rc != 0)
			fprintf(stderr, "echo: %d %s\n", rc, err.msg);
		_exit(rc == 0 ? 0 : 1);
	}
	close(srv);
	{
		/* 128 KiB at a time, read back before the next: what is in
		 * flight always fits in the two ends' socket buffers */
		const size_t step = 128u << 10;
		int64_t dl = dpg_now_ms() + 20000;

		for (size_t o = 0; o < n; o += step) {
			assert_int_equal(dpg_net_write_full(cli, out + o, step, dl, NULL, &err), 0);
			assert_int_equal(dpg_net_read_full(cli, in + o, step, dl, NULL, &err), 0);
		}
	}
	assert_memory_equal(in, out, n);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* zero-length transfers are no-ops */
	assert_int_equal(dpg_net_write_full(cli, out, 0, dpg_now_ms(), NULL, &err), 0);
	assert_int_equal(dpg_net_read_full(cli, in, 0, dpg_now_ms(), NULL, &err), 0);
	close(cli);
	free(out);
	free(in);
}

/* The same on non-blocking sockets. */
static void test_nonblocking(void **state)
{
	struct dpg_err err = { "" };
	char buf[16];
	int cli, srv;

	(void)state;
	tcp_pair(&cli, &srv, NULL);
	assert_int_equal(dpg_net_set_nonblock(cli, true), 0);
	assert_true(fcntl(cli, F_GETFL) & O_NONBLOCK);
	assert_int_equal(dpg_net_set_nonblock(srv, true), 0);
	assert_int_equal(dpg_net_write_full(cli, "hello, world", 13, dpg_now_ms() + 2000,
					    NULL, &err), 0);
	assert_int_equal(dpg_net_read_full(srv, buf, 13, dpg_now_ms() + 2000, NULL, &err), 0);
	assert_string_equal(buf, "hello, world");
	assert_int_equal(dpg_net_set_nonblock(cli, false), 0);
	assert_false(fcntl(cli, F_GETFL) & O_NONBLOCK);
	assert_int_equal(dpg_net_set_nonblock(-1, true), -DPG_ERR_SYSTEM);
	close(cli);
	close(srv);
}

/* Nothing arrives: the read ends with the timeout code at the deadline. */
static void test_read_deadline(void **state)
{
	struct dpg_err err = { "" };
	char buf[8];
	int cli, srv;
	int64_t t0, dt;
	volatile int never = 0;

	(void)state;
	tcp_pair(&cli, &srv, NULL);
	t0 = dpg_now_ms();
	assert_int_equal(dpg_net_read_full(srv, buf, sizeof(buf), t0 + 100, NULL, &err),
			 -DPG_ERR_TIMEOUT);
	dt = dpg_now_ms() - t0;
	assert_true(dt >= 99 && dt < 2000);
	assert_string_equal(err.msg, "receive timed out");
	/* part of the message arrived: still a timeout */
	assert_int_equal(send(cli, "abc", 3, 0), 3);
	t0 = dpg_now_ms();
	assert_int_equal(dpg_net_read_full(srv, buf, sizeof(buf), t0 + 100, &never, &err),
			 -DPG_ERR_TIMEOUT);
	dt = dpg_now_ms() - t0;
	assert_true(dt >= 99 && dt < 2000);
	/* a deadline already past, no data: immediate timeout */
	t0 = dpg_now_ms();
	assert_int_equal(dpg_net_read_full(srv, buf, 1, t0 - 1000, NULL, &err),
			 -DPG_ERR_TIMEOUT);
	assert_true(dpg_now_ms() - t0 < 1000);
	close(cli);
	close(srv);
}

/* Nobody reads: a large write ends with the timeout code at the deadline. */
static void test_write_deadline(void **state)
{
	const size_t n = 64u << 20;
	char *big = calloc(1, n);
	struct dpg_err err = { "" };
	int cli, srv;
	int64_t t0, dt;

	(void)state;
	assert_non_null(big);
	tcp_pair(&cli, &srv, NULL);
	t0 = dpg_now_ms();
	assert_int_equal(dpg_net_write_full(cli, big, n, t0 + 200, NULL, &err),
			 -DPG_ERR_TIMEOUT);
	dt = dpg_now_ms() - t0;
	assert_true(dt >= 199 && dt < 5000);
	assert_string_equal(err.msg, "send timed out");
	close(cli);
	close(srv);
	free(big);
}

/* The peer closes: reads fail with the peer code, even mid-message; writes
 * too (and never raise SIGPIPE). */
static void test_peer_closed(void **state)
{
	struct dpg_err err = { "" };
	char buf[64] = "";
	int cli, srv, rc = 0;
	int64_t t0, dl;

	(void)state;
	tcp_pair(&cli, &srv, NULL);
	assert_int_equal(send(cli, "xyz", 3, 0), 3);
	close(cli);
	t0 = dpg_now_ms();
	assert_int_equal(dpg_net_read_full(srv, buf, 10, t0 + 5000, NULL, &err),
			 -DPG_ERR_PEER);
	assert_true(dpg_now_ms() - t0 < 2000);
	assert_memory_equal(buf, "xyz", 3);		/* what did arrive is there */
	assert_string_equal(err.msg, "peer closed the connection");
	err.msg[0] = '\0';
	dl = dpg_now_ms() + 5000;
	/* the first sends may still be accepted locally: keep writing */
	for (int i = 0; i < 1000 && rc == 0; i++)
		rc = dpg_net_write_full(srv, buf, sizeof(buf), dl, NULL, &err);
	assert_int_equal(rc, -DPG_ERR_PEER);
	assert_string_equal(err.msg, "peer closed the connection");
	close(srv);
}

struct raiser {
	volatile int *flag;
	int delay_ms;
};

static void *raise_later(void *arg)
{
	struct raiser *r = arg;

	usleep((useconds_t)r->delay_ms * 1000);
	__atomic_store_n((int *)r->flag, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* The abort flag, raised by another thread, ends a read blocked with a
 * far deadline promptly; a flag already up ends it at once. */
static void test_abort_read(void **state)
{
	struct dpg_err err = { "" };
	volatile int flag = 0;
	struct raiser r = { &flag, 150 };
	pthread_t th;
	char buf[8];
	int cli, srv;
	int64_t t0, dt;

	(void)state;
	tcp_pair(&cli, &srv, NULL);
	t0 = dpg_now_ms();
	assert_int_equal(pthread_create(&th, NULL, raise_later, &r), 0);
	assert_int_equal(dpg_net_read_full(srv, buf, sizeof(buf), t0 + 30000, &flag, &err),
			 -DPG_ERR_ABORTED);
	dt = dpg_now_ms() - t0;
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_true(dt >= 140 && dt < 2000);
	t0 = dpg_now_ms();
	assert_int_equal(dpg_net_read_full(srv, buf, sizeof(buf), t0 + 30000, &flag, &err),
			 -DPG_ERR_ABORTED);
	assert_int_equal(dpg_net_write_full(cli, buf, 0, t0 + 30000, &flag, &err), 0);
	assert_true(dpg_now_ms() - t0 < 1000);
	/* a raised flag does not stop data that is already there */
	assert_int_equal(send(cli, "12345678", 8, 0), 8);
	usleep(20000);
	assert_int_equal(dpg_net_read_full(srv, buf, 8, t0 + 30000, &flag, &err), 0);
	assert_memory_equal(buf, "12345678", 8);
	close(cli);
	close(srv);
}

/* Nobody listens: connect retries until about the deadline, then fails with
 * the timeout code and a message naming host:port. */
static void test_connect_refused(void **state)
{
	struct dpg_err err = { "" };
	uint16_t port = free_port();
	char want[96];
	int fd = -1;
	int64_t t0, dt;

	(void)state;
	assert_true(port != 0);
	t0 = dpg_now_ms();
	assert_int_equal(dpg_net_connect("127.0.0.1", port, t0 + 400, NULL, &fd, &err),
			 -DPG_ERR_TIMEOUT);
	dt = dpg_now_ms() - t0;
	assert_int_equal(fd, -1);
	assert_true(dt >= 100 && dt < 2000);	/* it retried, then gave up */
	snprintf(want, sizeof(want), "cannot connect to 127.0.0.1:%u: ", (unsigned)port);
	if (strstr(err.msg, want) == NULL)
		fail_msg("message: %s", err.msg);
	assert_non_null(strstr(err.msg, "deadline"));
}

static void test_connect_abort(void **state)
{
	struct dpg_err err = { "" };
	volatile int flag = 1;
	uint16_t port = free_port();
	int fd = -1;
	int64_t t0 = dpg_now_ms();

	(void)state;
	assert_int_equal(dpg_net_connect("127.0.0.1", port, t0 + 10000, &flag, &fd, &err),
			 -DPG_ERR_ABORTED);
	assert_int_equal(fd, -1);
	assert_true(dpg_now_ms() - t0 < 1000);
}

/* A listener that appears late is reached by the retries. */
static void test_connect_retry_late_listener(void **state)
{
	struct dpg_err err = { "" };
	uint16_t port = free_port();
	int fd = -1, status;
	char c = 0;
	pid_t pid;

	(void)state;
	assert_true(port != 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int lfd, a;

		usleep(300000);
		if (dpg_net_listen("127.0.0.1", port, 4, &lfd, NULL, &err) != 0) {
			fprintf(stderr, "late listener: %s\n", err.msg);
			_exit(1);
		}
		a = accept(lfd, NULL, NULL);
		if (a < 0 || write(a, "!", 1) != 1)
			_exit(1);
		/* stay until the parent has read and closed */
		_exit(dpg_net_read_full(a, &c, 1, dpg_now_ms() + 10000, NULL, &err) ==
		      -DPG_ERR_PEER ? 0 : 1);
	}
	if (dpg_net_connect("127.0.0.1", port, dpg_now_ms() + 10000, NULL, &fd, &err) != 0)
		fail_msg("connect: %s", err.msg);
	assert_int_equal(dpg_net_read_full(fd, &c, 1, dpg_now_ms() + 5000, NULL, &err), 0);
	assert_int_equal(c, '!');
	close(fd);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_listen_errors(void **state)
{
	struct dpg_err err = { "" };
	uint16_t port = 0, p2 = 0;
	int fd = -1, fd2 = -1;

	(void)state;
	assert_int_not_equal(dpg_net_listen("localhost", 0, 4, &fd, NULL, &err), 0);
	assert_non_null(strstr(err.msg, "'localhost': not an IPv4 address"));
	assert_int_equal(fd, -1);
	/* a port held by another listener */
	assert_int_equal(dpg_net_listen("127.0.0.1", 0, 4, &fd, &port, &err), 0);
	err.msg[0] = '\0';
	assert_int_not_equal(dpg_net_listen("127.0.0.1", port, 4, &fd2, &p2, &err), 0);
	assert_int_equal(fd2, -1);
	assert_non_null(strstr(err.msg, "cannot listen on port"));
	assert_non_null(strstr(err.msg, "pick another MASTER_PORT"));
	close(fd);
	/* NULL address: all of them, reachable on loopback */
	assert_int_equal(dpg_net_listen(NULL, 0, 4, &fd, &port, &err), 0);
	assert_int_equal(dpg_net_connect("127.0.0.1", port, dpg_now_ms() + 2000, NULL, &fd2,
					 &err), 0);
	close(fd2);
	close(fd);
}

static void test_peer_name(void **state)
{
	struct sockaddr_in a;
	socklen_t sl = sizeof(a);
	char buf[64], want[64];
	int cli, srv;
	uint16_t port;

	(void)state;
	tcp_pair(&cli, &srv, &port);
	dpg_net_peer_name(cli, buf, sizeof(buf));
	snprintf(want, sizeof(want), "127.0.0.1:%u", (unsigned)port);
	assert_string_equal(buf, want);
	assert_int_equal(getsockname(cli, (struct sockaddr *)&a, &sl), 0);
	dpg_net_peer_name(srv, buf, sizeof(buf));
	snprintf(want, sizeof(want), "127.0.0.1:%u", (unsigned)ntohs(a.sin_port));
	assert_string_equal(buf, want);
	dpg_net_peer_name(srv, buf, 5);			/* truncated, terminated */
	assert_string_equal(buf, "127.");
	dpg_net_peer_name(-1, buf, sizeof(buf));	/* not a socket */
	assert_string_equal(buf, "?");
	close(cli);
	close(srv);
	{
		int u = socket(AF_INET, SOCK_STREAM, 0);	/* not connected */

		assert_true(u >= 0);
		dpg_net_peer_name(u, buf, sizeof(buf));
		assert_string_equal(buf, "?");
		close(u);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_now_ms),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_nonblocking),
		cmocka_unit_test(test_read_deadline),
		cmocka_unit_test(test_write_deadline),
		cmocka_unit_test(test_peer_closed),
		cmocka_unit_test(test_abort_read),
		cmocka_unit_test(test_connect_refused),
		cmocka_unit_test(test_connect_abort),
		cmocka_unit_test(test_connect_retry_late_listener),
		cmocka_unit_test(test_listen_errors),
		cmocka_unit_test(test_peer_name),
	};

	signal(SIGPIPE, SIG_DFL);	/* a SIGPIPE would kill the test: none may come */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
