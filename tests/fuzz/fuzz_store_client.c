/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_store_client.c - libFuzzer harness for the store's CLIENT
 * (store_client.c): a fake server answers dpg_store_connect and one request.
 *
 * One loopback listener for the whole process; per input a server thread
 * accepts (every connection, the client may retry) and plays the script:
 *   byte 0 (mode)  bit 0  VALID handshake: HELLO, read the client's AUTH,
 *                         answer the correct server MAC (store_wire.h's
 *                         dpg_wire_auth_mac, the harness's secret); the rest
 *                         is reply records, else the rest is raw bytes
 *                  bit 1  keep the connection open after the script (the
 *                         client must give up at its deadline), else SHUT_WR
 *                  bits 2-4  the request: GET SET ADD CAS WAIT BARRIER (% 6)
 *                  bit 5  corrupt the server's MAC (valid mode)
 *                  bit 6  CAS with cur == NULL
 *   byte 1         barrier n (1 + byte % 4)
 *   records {sel u8, misc u8, len u8, body[len]}: a header with the right
 *   magic/version/len, op = sel < 0x10 ? ops[sel % 7] | 0x80 : sel, flags =
 *   misc & 3, id = misc >> 2 (the first request's id is 1); sel 0xff: the
 *   rest is raw bytes.
 * Checks: no crash/leak (ASan); a call returns within its deadline plus
 * slack; failure is a known -DPG_ERR_* with a non-empty terminated message;
 * raw mode never authenticates; success's outputs are consistent, and for a
 * single request the first record with id 1 decides the outcome exactly
 * (with SHUT_WR: the result must be what that record says).
 *
 * Deadlines: raw mode and keep-open mode 200 ms (only the weak checks);
 * valid + SHUT_WR 10 s, where the script always ends the wait, so nothing
 * depends on the machine's load.  Every socket call of the harness retries
 * on EINTR (libFuzzer's -timeout SIGALRM). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net.h"
#include "store.h"
#include "store_wire.h"

#define SHORT_MS 200
#define LONG_MS 10000
#define SLACK_MS 5000		/* a loaded machine is no failure */

static const uint8_t secret[32] = {
	0x10, 0x21, 0x32, 0x43, 0x54, 0x65, 0x76, 0x87,
	0x98, 0xa9, 0xba, 0xcb, 0xdc, 0xed, 0xfe, 0x0f,
	0x1f, 0x2e, 0x3d, 0x4c, 0x5b, 0x6a, 0x79, 0x88,
	0x97, 0xa6, 0xb5, 0xc4, 0xd3, 0xe2, 0xf1, 0x00,
};
static const uint8_t ops[7] = {
	DPG_OP_GET, DPG_OP_SET, DPG_OP_ADD, DPG_OP_CAS, DPG_OP_WAIT, DPG_OP_DEL,
	DPG_OP_AUTH
};
static const uint8_t req_op[6] = {
	DPG_OP_GET, DPG_OP_SET, DPG_OP_ADD, DPG_OP_CAS, DPG_OP_WAIT, DPG_OP_ADD
};
static int lfd = -1;
static uint16_t port;

struct script {
	uint8_t mode;
	const uint8_t *rest;
	size_t rlen;
	uint8_t *out;		/* the bytes sent after the handshake */
	size_t olen;
	int stop;
};

static void die(const char *what)
{
	fprintf(stderr, "fuzz_store_client: %s\n", what);
	abort();
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int wait_in(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int r;

	while ((r = poll(&p, 1, ms)) < 0 && errno == EINTR)
		;
	return r;
}

/* Read exactly n bytes unless the peer closes or stop rises. */
static int read_full(int fd, uint8_t *p, size_t n, const int *stop)
{
	while (n > 0) {
		ssize_t r;

		if (__atomic_load_n(stop, __ATOMIC_ACQUIRE))
			return -1;
		if (wait_in(fd, 10) <= 0)
			continue;
		r = recv(fd, p, n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Build the post-handshake bytes of valid mode from the records. */
static void build_records(struct script *sc)
{
	const uint8_t *d = sc->rest;
	size_t i = 0, n = sc->rlen, o = 0;

	sc->out = malloc(n / 3 * DPG_WIRE_HDR + n + 1);
	if (sc->out == NULL)
		die("out of memory");
	while (i + 3 <= n && d[i] != 0xff) {
		uint8_t sel = d[i], misc = d[i + 1];
		size_t len = d[i + 2];

		i += 3;
		if (len > n - i)
			len = n - i;
		dpg_wire_hdr_put(sc->out + o, sel < 0x10 ? ops[sel % 7] | DPG_OP_REPLY : sel,
				 misc & 3, misc >> 2, (uint32_t)len);
		memcpy(sc->out + o + DPG_WIRE_HDR, d + i, len);
		o += DPG_WIRE_HDR + len;
		i += len;
	}
	if (i < n && d[i] == 0xff) {
		memcpy(sc->out + o, d + i + 1, n - i - 1);
		o += n - i - 1;
	}
	sc->olen = o;
}

/* The server's side of the handshake; 0 when the client's AUTH came. */
static int handshake(int fd, struct script *sc)
{
	uint8_t hello[DPG_WIRE_HDR + DPG_WIRE_NONCE], auth[DPG_WIRE_HDR + 64];
	uint8_t reply[DPG_WIRE_HDR + DPG_WIRE_MAC];
	struct dpg_wire_key key;
	size_t i;

	for (i = 0; i < DPG_WIRE_NONCE; i++)
		hello[DPG_WIRE_HDR + i] = (uint8_t)(i * 13 + 5);
	dpg_wire_hdr_put(hello, DPG_OP_HELLO, 0, 0, DPG_WIRE_NONCE);
	if (write_all(fd, hello, sizeof(hello)) != 0 ||
	    read_full(fd, auth, sizeof(auth), &sc->stop) != 0)
		return -1;
	memcpy(key.k, secret, sizeof(secret));
	key.len = sizeof(secret);
	dpg_wire_hdr_put(reply, DPG_OP_AUTH | DPG_OP_REPLY, 0, 0, DPG_WIRE_MAC);
	if (dpg_wire_auth_mac(&key, DPG_WIRE_LABEL_SERVER, hello + DPG_WIRE_HDR,
			      auth + DPG_WIRE_HDR, reply + DPG_WIRE_HDR) != 0)
		die("libcrypto failed computing the HMAC");
	if (sc->mode & 32)
		reply[DPG_WIRE_HDR + 7] ^= 1;
	return write_all(fd, reply, sizeof(reply));
}

static void serve(int fd, struct script *sc)
{
	uint8_t buf[4096];

	if (sc->mode & 1) {
		if (handshake(fd, sc) != 0)
			return;
		(void)write_all(fd, sc->out, sc->olen);
	} else {
		(void)write_all(fd, sc->rest, sc->rlen);
	}
	if (!(sc->mode & 2))
		shutdown(fd, SHUT_WR);
	/* read until the client closes: never reset what it has not read */
	while (!__atomic_load_n(&sc->stop, __ATOMIC_ACQUIRE)) {
		ssize_t r;

		if (wait_in(fd, 10) <= 0)
			continue;
		r = recv(fd, buf, sizeof(buf), 0);
		if (r == 0 || (r < 0 && errno != EINTR))
			return;
	}
}

static void *server(void *arg)
{
	struct script *sc = arg;

	while (!__atomic_load_n(&sc->stop, __ATOMIC_ACQUIRE)) {
		int fd;

		if (wait_in(lfd, 10) <= 0)
			continue;
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;	/* EINTR, EAGAIN: poll again */
		serve(fd, sc);
		close(fd);
	}
	return NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct sockaddr_in a;
	socklen_t sl = sizeof(a);

	(void)argc;
	(void)argv;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    listen(lfd, 64) != 0 || getsockname(lfd, (struct sockaddr *)&a, &sl) != 0)
		die("cannot listen on 127.0.0.1");
	port = ntohs(a.sin_port);
	return 0;
}

/* ------------------------------------------------------------ the oracle */

/* What the first record with id 1 says (valid mode, before any raw tail). */
struct expect {
	int found;
	uint8_t op;
	uint16_t flags;
	const uint8_t *body;
	size_t len;
};

static void expect_of(const struct script *sc, struct expect *e)
{
	size_t i = 0;

	memset(e, 0, sizeof(*e));
	while (i < sc->olen && sc->olen - i >= DPG_WIRE_HDR) {
		struct dpg_wire_hdr h;

		dpg_wire_hdr_get(sc->out + i, &h);
		if (h.magic != DPG_WIRE_MAGIC || h.len > sc->olen - i - DPG_WIRE_HDR)
			return;		/* the raw tail: no exact verdict */
		if (h.id == 1) {
			e->found = 1;
			e->op = h.op;
			e->flags = h.flags;
			e->body = sc->out + i + DPG_WIRE_HDR;
			e->len = h.len;
			return;
		}
		i += DPG_WIRE_HDR + h.len;
	}
}

/* The rc that record demands for request op (0: success). */
static int expected_rc(const struct expect *e, uint8_t op)
{
	if (e->op != (op | DPG_OP_REPLY))
		return -DPG_ERR_PEER;
	if (e->flags == DPG_WIRE_ERROR)
		return -DPG_ERR_INVALID;
	if (e->flags != DPG_WIRE_OK)
		return -DPG_ERR_PEER;
	if ((op == DPG_OP_ADD && e->len != 8) || (op == DPG_OP_CAS && e->len < 1))
		return -DPG_ERR_PEER;
	return 0;
}

static void check_err(int rc, const struct dpg_err *err)
{
	if (rc != -DPG_ERR_TIMEOUT && rc != -DPG_ERR_PEER && rc != -DPG_ERR_AUTH &&
	    rc != -DPG_ERR_SYSTEM && rc != -DPG_ERR_NOMEM && rc != -DPG_ERR_INVALID) {
		fprintf(stderr, "fuzz_store_client: unexpected rc %d\n", rc);
		abort();
	}
	if (memchr(err->msg, '\0', sizeof(err->msg)) == NULL || err->msg[0] == '\0')
		die("a failure without a terminated, non-empty message");
}

struct result {
	void *val;
	size_t len;
	int64_t add;
	int add_set;
};

/* Success must match the deciding record exactly. */
static void check_success(uint8_t op, const struct expect *e, const struct result *r,
			  int cas_cur)
{
	if (op == DPG_OP_GET && (r->val == NULL || r->len != e->len ||
				 memcmp(r->val, e->body, e->len) != 0 ||
				 ((char *)r->val)[r->len] != '\0'))
		die("GET succeeded with a value unlike the reply's");
	if (op == DPG_OP_ADD && (!r->add_set || (uint64_t)r->add !=
				 ((uint64_t)e->body[0] | (uint64_t)e->body[1] << 8 |
				  (uint64_t)e->body[2] << 16 | (uint64_t)e->body[3] << 24 |
				  (uint64_t)e->body[4] << 32 | (uint64_t)e->body[5] << 40 |
				  (uint64_t)e->body[6] << 48 | (uint64_t)e->body[7] << 56)))
		die("ADD succeeded with a result unlike the reply's");
	if (op == DPG_OP_CAS && cas_cur && e->body[0] &&
	    (r->val == NULL || r->len != e->len - 1 ||
	     memcmp(r->val, e->body + 1, r->len) != 0 || ((char *)r->val)[r->len] != '\0'))
		die("CAS succeeded with a current value unlike the reply's");
	if (op == DPG_OP_CAS && cas_cur && !e->body[0] && (r->val != NULL || r->len != 0))
		die("CAS of a missing key gave a current value");
}

/* ------------------------------------------------------------ one input */

static int request(struct dpg_store *s, int which, int n, int cas_cur, int64_t dl,
		   struct result *r, struct dpg_err *err)
{
	static const char *const keys[2] = { "k", "k2" };

	switch (which) {
	case 0:
		return dpg_store_get(s, "k", &r->val, &r->len, dl, err);
	case 1:
		return dpg_store_set(s, "k", "v", 1, dl, err);
	case 2:
		r->add = INT64_MIN + 12345;	/* a sentinel the reply must replace */
		r->add_set = 1;
		return dpg_store_add(s, "k", 1, &r->add, dl, err);
	case 3:
		r->len = 777;
		return dpg_store_cas(s, "k", "a", 1, "b", 1, cas_cur ? &r->val : NULL,
				     cas_cur ? &r->len : NULL, dl, err);
	case 4:
		return dpg_store_wait(s, keys, 2, dl, err);
	default:
		return dpg_store_barrier(s, "b", n, dl, err);
	}
}

static void verdict(const struct script *sc, int which, int rc, const struct result *r,
		    int cas_cur)
{
	struct expect e;
	uint8_t op = req_op[which];

	if (!(sc->mode & 1) || (sc->mode & 32) || which == 5)
		return;
	expect_of(sc, &e);
	if (!e.found) {
		if (rc == 0)
			die("a request succeeded without a reply carrying its id");
		return;
	}
	if (rc == 0 && expected_rc(&e, op) != 0)
		die("a request succeeded on a reply that should fail it");
	if (rc == 0)
		check_success(op, &e, r, cas_cur);
	else if (!(sc->mode & 2) && rc != expected_rc(&e, op)) {
		fprintf(stderr, "fuzz_store_client: rc %d, the reply demands %d\n", rc,
			expected_rc(&e, op));
		abort();
	}
}

static void run_client(struct script *sc, int which, int n)
{
	int64_t span = (sc->mode & 3) == 1 ? LONG_MS : SHORT_MS;
	int64_t t0 = dpg_now_ms(), dl = t0 + span;
	int cas_cur = !(sc->mode & 64);
	struct dpg_store *s = NULL;
	struct result r = { 0 };
	struct dpg_err err;
	int rc;

	memset(&err, 'x', sizeof(err));
	rc = dpg_store_connect("127.0.0.1", port, secret, sizeof(secret), dl, NULL, &s, &err);
	if (rc == 0 && (!(sc->mode & 1) || (sc->mode & 32)))
		die("connected to a server that cannot know the secret");
	if (rc == 0) {
		memset(&err, 'x', sizeof(err));
		rc = request(s, which, n, cas_cur, dl, &r, &err);
		verdict(sc, which, rc, &r, cas_cur);
		dpg_store_close(s);
	}
#ifdef FUZZ_DEBUG
	fprintf(stderr, "which %d rc %d: %s\n", which, rc, rc ? err.msg : "ok");
#endif
	if (rc != 0)
		check_err(rc, &err);
	/* the barrier's timeout report takes one more look (up to 1 s) */
	if (dpg_now_ms() - t0 > span + (which == 5 ? 1000 : 0) + SLACK_MS)
		die("the client overran its deadline");
	free(r.val);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct script sc = { 0 };
	pthread_t t;
	int which, n;

	if (size < 2)
		return 0;
	sc.mode = data[0];
	which = (sc.mode >> 2 & 7) % 6;
	n = 1 + data[1] % 4;
	sc.rest = data + 2;
	sc.rlen = size - 2;
	if (sc.mode & 1)
		build_records(&sc);
	if (pthread_create(&t, NULL, server, &sc) != 0)
		die("pthread_create failed");
	run_client(&sc, which, n);
	__atomic_store_n(&sc.stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	free(sc.out);
	return 0;
}
