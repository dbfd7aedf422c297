/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_store.c - libFuzzer harness for the server side of the store's wire
 * protocol (lib/runtime/store_wire.h).  One server runs for the whole process
 * (127.0.0.1, port 0, a fixed secret).  Per input: connect, read the HELLO,
 * then by the first byte
 *   bit 0  complete a valid AUTH handshake first (HMAC as in store_wire.c)
 *   bit 1  "framed": the rest is records {op u8, len u8, body[len]} sent with
 *          valid headers (magic, version 1, flags 0, id = record number),
 *          so the fuzzer reaches the request handlers, not only the framing;
 *          otherwise the rest is written raw
 *   bit 2  half-close (shutdown SHUT_WR) after writing instead of a plain close
 *   bits 3-4  (framed only) n = 0..3 more authenticated connections B1..Bn
 *          open at once: a record whose op has bit 7 set goes to
 *          B(1 + (op >> 5 & 3) % n) as op & 0x1f; op 0xff closes the first
 *          connection A there and then (its parked GET/WAITs die while the
 *          others may still SET their keys)
 * read back whatever comes within a short quiet time, close.  ASan catches any
 * memory error in the server thread.  After every input a fresh authenticated
 * client must still SET and GET a key (the server is alive and serving).
 *
 * Deterministic on a loaded machine: no step that must succeed has a clock
 * on it, and none fails on EINTR (libFuzzer's -timeout SIGALRM interrupts
 * blocking calls every second; an interrupted connect() was the old flaky
 * "second connection failed").  The server's pre-auth deadline is an hour (every connection is
 * closed by the harness, so none piles up), the HELLO and AUTH replies are
 * awaited without a timeout (a server that never answers is a hang, which
 * libFuzzer's -timeout reports with stacks), and the liveness check retries
 * for a minute.  Only the draining of replies nobody checks is timed (what
 * it misses changes coverage, never the verdict). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net.h"
#include "digest.h"
#include "store.h"

#define MAGIC 0x53475044u
#define HDR_LEN 16
#define NONCE_LEN 32
#define OP_AUTH 2
#define LABEL_CLIENT "dpg-store-v1 client"
#define NCONN 4				/* A + up to 3 more */
#define FOREVER (-1)			/* read_full: no timeout */

static const uint8_t secret[32] = {
	0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
	0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff,
	0x0f, 0x1e, 0x2d, 0x3c, 0x4b, 0x5a, 0x69, 0x78,
	0x87, 0x96, 0xa5, 0xb4, 0xc3, 0xd2, 0xe1, 0xf0,
};
static struct dpg_store_server *server;
static uint16_t port;
static unsigned long iteration;

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static void hdr(uint8_t *p, uint8_t op, uint32_t id, uint32_t len)
{
	put32(p, MAGIC);
	p[4] = 1;
	p[5] = op;
	p[6] = p[7] = 0;
	put32(p + 8, id);
	put32(p + 12, len);
}

/* Read exactly n bytes (within timeout_ms, or FOREVER); 0 or -1 (errno
 * ETIMEDOUT, or 0 at EOF). */
static int read_full(int fd, uint8_t *buf, size_t n, int timeout_ms)
{
	int64_t end = dpg_now_ms() + timeout_ms;
	size_t got = 0;

	while (got < n) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int64_t left = timeout_ms == FOREVER ? -1 : end - dpg_now_ms();
		ssize_t r;
		int pr;

		if (timeout_ms != FOREVER && left <= 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		pr = poll(&p, 1, left > INT32_MAX ? INT32_MAX : (int)left);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0) {
			if (pr == 0)
				errno = ETIMEDOUT;
			return -1;
		}
		r = read(fd, buf + got, n - got);
		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			if (r == 0)
				errno = 0;
			return -1;
		}
		got += (size_t)r;
	}
	return 0;
}

static int write_all(int fd, const uint8_t *buf, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, buf, n, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		buf += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Drain replies until EOF, or until the server has been quiet for quiet_ms
 * (it parks GET/WAIT, so silence is normal), at most max_ms in all. */
static void drain(int fd, int quiet_ms, int max_ms)
{
	int64_t end = dpg_now_ms() + max_ms;
	uint8_t buf[4096];

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int64_t left = end - dpg_now_ms();

		if (left <= 0)
			return;
		if (poll(&p, 1, left < quiet_ms ? (int)left : quiet_ms) <= 0)
			return;
		if (read(fd, buf, sizeof(buf)) <= 0)
			return;
	}
}

/* A connect() interrupted by a signal (libFuzzer's -timeout SIGALRM ticks
 * every second) goes on in the background: wait for it, no retry, no clock. */
static int connect_finish(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	socklen_t sl = sizeof(int);
	int e = 0, r;

	while ((r = poll(&p, 1, -1)) < 0 && errno == EINTR)
		;
	if (r < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &sl) != 0)
		return -1;
	errno = e;
	return e == 0 ? 0 : -1;
}

static int connect_server(void)
{
	struct sockaddr_in a;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;

	if (fd < 0)
		return -1;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 &&
	    (errno != EINTR || connect_finish(fd) != 0)) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static int authenticate(int fd, const uint8_t *ns)
{
	uint8_t msg[HDR_LEN + 2 * NONCE_LEN], reply[HDR_LEN + DPG_SHA256_LEN];
	struct dpg_hmac_sha256 c;
	uint8_t nc[NONCE_LEN];

	for (size_t i = 0; i < NONCE_LEN; i++)
		nc[i] = (uint8_t)(i * 7 + iteration);
	hdr(msg, OP_AUTH, 1, 2 * NONCE_LEN);
	memcpy(msg + HDR_LEN, nc, NONCE_LEN);
	dpg_hmac_sha256_init(&c, secret, sizeof(secret));
	dpg_hmac_sha256_update(&c, LABEL_CLIENT, strlen(LABEL_CLIENT));
	dpg_hmac_sha256_update(&c, ns, NONCE_LEN);
	dpg_hmac_sha256_update(&c, nc, NONCE_LEN);
	if (dpg_hmac_sha256_final(&c, msg + HDR_LEN + NONCE_LEN) != 0) {
		fprintf(stderr, "fuzz_store: libcrypto failed computing the HMAC\n");
		abort();
	}
	if (write_all(fd, msg, sizeof(msg)) != 0)
		return -1;
	if (read_full(fd, reply, sizeof(reply), FOREVER) != 0)
		return -1;
	if (reply[5] != (OP_AUTH | 0x80) || reply[6] != 0 || reply[7] != 0) {
		fprintf(stderr, "fuzz_store: handshake refused (op %#x status %u)\n",
			reply[5], reply[6]);
		abort();
	}
	return 0;
}

/* Connect, take the HELLO and authenticate, or abort saying which step
 * failed (no step is timed: see the top). */
static int open_authenticated(int which)
{
	uint8_t hello[HDR_LEN + NONCE_LEN];
	int fd = connect_server();
	const char *step = "connect";

	if (fd >= 0) {
		step = "read the HELLO";
		if (read_full(fd, hello, sizeof(hello), FOREVER) == 0) {
			step = "authenticate";
			if (authenticate(fd, hello + HDR_LEN) == 0)
				return fd;
		}
	}
	fprintf(stderr, "fuzz_store: connection %d of this input: %s failed: %s\n", which,
		step, errno != 0 ? strerror(errno) : "the server closed the connection");
	abort();
}

/* Framed records {op, len, body[len]} with valid headers; see the top. */
static void send_records(int fds[NCONN], int n, const uint8_t *data, size_t size)
{
	uint8_t buf[HDR_LEN + 255];
	size_t i = 0;
	uint32_t id = 2;

	while (i + 2 <= size) {
		uint8_t op = data[i];
		size_t len = data[i + 1];
		int which = 0;

		i += 2;
		if (len > size - i)
			len = size - i;
		if (op == 0xff && n > 0) {
			if (fds[0] >= 0) {
				close(fds[0]);
				fds[0] = -1;
			}
			i += len;
			continue;
		}
		if ((op & 0x80) && n > 0) {
			which = 1 + (op >> 5 & 3) % n;
			op &= 0x1f;
		}
		if (fds[which] < 0) {
			i += len;
			continue;
		}
		hdr(buf, op, id++, (uint32_t)len);
		memcpy(buf + HDR_LEN, data + i, len);
		i += len;
		(void)write_all(fds[which], buf, HDR_LEN + len);
	}
}

/* A real client can still connect, SET and GET. */
static void check_alive(void)
{
	struct dpg_store *s = NULL;
	struct dpg_err err;
	char key[64], val[64];
	void *got = NULL;
	size_t glen = 0;
	int64_t dl = dpg_now_ms() + 60000;	/* generous: a loaded machine is no failure */
	int rc;

	memset(&err, 0, sizeof(err));
	snprintf(key, sizeof(key), "fuzz-alive/%lu", iteration % 64);
	snprintf(val, sizeof(val), "v%lu", iteration);
	rc = dpg_store_connect("127.0.0.1", port, secret, sizeof(secret), dl,
			       NULL, &s, &err);
	if (rc != 0) {
		fprintf(stderr, "fuzz_store: server dead: connect: %s\n", err.msg);
		abort();
	}
	if (dpg_store_set(s, key, val, strlen(val), dl, &err) != 0 ||
	    dpg_store_get(s, key, &got, &glen, dl, &err) != 0) {
		fprintf(stderr, "fuzz_store: server dead: set/get: %s\n", err.msg);
		abort();
	}
	if (glen != strlen(val) || memcmp(got, val, glen) != 0) {
		fprintf(stderr, "fuzz_store: GET returned the wrong value\n");
		abort();
	}
	free(got);
	dpg_store_close(s);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct dpg_err err;

	(void)argc;
	(void)argv;
	/* never let the server's pre-auth deadline fail a slow but honest
	 * handshake: the harness closes every connection it opens */
	setenv("DPG_STORE_AUTH_TIMEOUT_MS", "3600000", 1);
	memset(&err, 0, sizeof(err));
	if (dpg_store_server_start("127.0.0.1", 0, secret, sizeof(secret),
				   &server, &err) != 0) {
		fprintf(stderr, "fuzz_store: server start: %s\n", err.msg);
		abort();
	}
	port = dpg_store_server_port(server);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t hello[HDR_LEN + NONCE_LEN];
	uint8_t mode = size > 0 ? data[0] : 0;
	int fd;

	iteration++;
	if (size > 0) {
		data++;
		size--;
	}
	fd = connect_server();
	if (fd < 0) {
		fprintf(stderr, "fuzz_store: cannot connect: %s\n", strerror(errno));
		abort();
	}
	if (read_full(fd, hello, sizeof(hello), FOREVER) != 0) {
		fprintf(stderr, "fuzz_store: no HELLO from the server: %s\n",
			errno != 0 ? strerror(errno) : "it closed the connection");
		abort();
	}
	if ((mode & 1) && authenticate(fd, hello + HDR_LEN) != 0)
		goto out;

	if (mode & 2) {
		int fds[NCONN] = { fd, -1, -1, -1 }, n = mode >> 3 & 3, i;

		for (i = 1; i <= n; i++)
			fds[i] = open_authenticated(i);
		send_records(fds, n, data, size);
		for (i = 1; i <= n; i++) {
			if (mode & 4)
				shutdown(fds[i], SHUT_WR);
			drain(fds[i], 5, 100);
			close(fds[i]);
		}
		if (fds[0] < 0) {
			check_alive();
			return 0;
		}
	} else {
		(void)write_all(fd, data, size);
	}
	if (mode & 4)
		shutdown(fd, SHUT_WR);
	drain(fd, 5, 100);
out:
	close(fd);
	check_alive();
	return 0;
}
