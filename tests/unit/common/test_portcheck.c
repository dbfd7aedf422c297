/* SPDX-License-Identifier: BSD-3-Clause */
/* test_portcheck.c - unit tests for lib/common/portcheck.c: a port left in
 * TIME_WAIT by the previous step is free, a listening port is busy. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "portcheck.h"

/* A listener on 127.0.0.1:port (0: any), bound like the store's. */
static int listener(uint16_t *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(*port) };
	socklen_t sl = sizeof(a);
	int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_ANY);
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, 4), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &sl), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

static int connect_to(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

static void test_listening_port_busy(void **st)
{
	struct dpg_err e = { "" };
	uint16_t port = 0;
	int lfd;

	(void)st;
	lfd = listener(&port);
	assert_int_equal(dpg_port_check_free(port, &e), -DPG_ERR_ENV);
	assert_non_null(strstr(e.msg, "already in use"));
	close(lfd);
	assert_int_equal(dpg_port_check_free(port, &e), 0);
}

/* The previous step's store: a client served and closed from the server
 * side first, so the server's end sits in TIME_WAIT on the port. */
static void test_time_wait_port_free(void **st)
{
	struct dpg_err e = { "" };
	uint16_t port = 0;
	int lfd, c, s;
	char b;

	(void)st;
	lfd = listener(&port);
	c = connect_to(port);
	s = accept(lfd, NULL, NULL);
	assert_true(s >= 0);
	close(lfd);
	close(s);			/* active close: the server side */
	assert_int_equal(read(c, &b, 1), 0);	/* its FIN arrived */
	close(c);
	usleep(20000);			/* the last ACK: TIME_WAIT */
	if (dpg_port_check_free(port, &e) != 0)
		fail_msg("port %u in TIME_WAIT reported busy: %s", (unsigned)port, e.msg);
}

static void test_descriptor_closed(void **st)
{
	struct dpg_err e = { "" };
	int before, after;

	(void)st;
	before = dup(0);
	close(before);
	assert_int_equal(dpg_port_check_free(0, &e), 0);
	after = dup(0);
	close(after);
	assert_int_equal(before, after);	/* nothing leaked */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_listening_port_busy),
		cmocka_unit_test(test_time_wait_port_free),
		cmocka_unit_test(test_descriptor_closed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
