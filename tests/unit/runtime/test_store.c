/* SPDX-License-Identifier: BSD-3-Clause */
/* test_store.c - unit tests for the rendezvous store, lib/runtime/store_*.c,
 * and lib/runtime/digest.c: the operations, blocking and deadlines, concurrency, authentication and hostile peers. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net.h"
#include "digest.h"
#include "store.h"

/* The wire protocol, restated here from store_wire.h so that the
 * raw-socket tests check the documented format, not the implementation. */
#define W_MAGIC 0x53475044u
#define W_VERSION 1
#define W_HDR 16
enum { W_HELLO = 1, W_AUTH, W_SET, W_GET, W_ADD, W_CAS, W_WAIT, W_DEL, W_CANCEL };
#define W_REPLY 0x80

static const uint8_t SECRET[32] = {
	0x5e, 0xc2, 0x37, 0x01, 0x99, 0xab, 0x10, 0x42, 0x7f, 0x00, 0x11, 0xee,
	0x3c, 0x8d, 0x2a, 0x64, 0xd1, 0x05, 0x6b, 0x90, 0x21, 0x7a, 0xc8, 0x33,
	0x4e, 0xf2, 0x19, 0x86, 0x0d, 0xb7, 0x58, 0xe4,
};
static const uint8_t OTHER[32] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };

static int64_t in_ms(int64_t ms)
{
	return dpg_now_ms() + ms;
}

/* ------------------------------------------------------------ fixtures */

static const char *cap_end(void);
static int saved_stderr = -1;

/* A test that failed while stderr was captured left it redirected: put it
 * back (echoing what was captured, the failure message included). */
static void cap_restore(void)
{
	if (saved_stderr >= 0)
		cap_end();
}

struct fx {
	struct dpg_store_server *srv;
	uint16_t port;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct dpg_err err;

	cap_restore();
	if (f == NULL || dpg_store_server_start("127.0.0.1", 0, SECRET, sizeof(SECRET),
						&f->srv, &err) != 0) {
		fprintf(stderr, "setup: %s\n", err.msg);
		free(f);
		return -1;
	}
	f->port = dpg_store_server_port(f->srv);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	cap_restore();
	dpg_store_server_stop(f->srv);
	free(f);
	return 0;
}

static struct dpg_store *client(uint16_t port)
{
	struct dpg_store *c = NULL;
	struct dpg_err err;
	int rc = dpg_store_connect("127.0.0.1", port, SECRET, sizeof(SECRET), in_ms(5000),
				   NULL, &c, &err);

	if (rc != 0)
		fprintf(stderr, "connect: %s\n", err.msg);
	assert_int_equal(rc, 0);
	return c;
}

/* The store still answers a fresh, well-behaved client. */
static void assert_serving(uint16_t port)
{
	struct dpg_store *c = client(port);
	struct dpg_err err;
	int64_t v = 0;

	assert_int_equal(dpg_store_add(c, "alive", 1, &v, in_ms(2000), &err), 0);
	assert_true(v >= 1);
	dpg_store_close(c);
}

/* ------------------------------------------------------------ raw peers */

static void p32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static uint32_t g32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static void hdr(uint8_t *p, uint32_t magic, uint8_t ver, uint8_t op, uint32_t id,
		uint32_t len)
{
	p32(p, magic);
	p[4] = ver;
	p[5] = op;
	p[6] = p[7] = 0;
	p32(p + 8, id);
	p32(p + 12, len);
}

static int raw_connect(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

static bool read_n(int fd, void *buf, size_t n, int ms)
{
	uint8_t *p = buf;

	while (n > 0) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		ssize_t r;

		if (poll(&pf, 1, ms) <= 0)
			return false;
		r = recv(fd, p, n, 0);
		if (r <= 0)
			return false;
		p += r;
		n -= (size_t)r;
	}
	return true;
}

static void send_all(int fd, const void *buf, size_t n)
{
	assert_int_equal(send(fd, buf, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* Milliseconds until the peer closes fd (EOF or reset), or -1 after ms. */
static int64_t ms_to_eof(int fd, int ms)
{
	int64_t t0 = dpg_now_ms();
	char buf[256];

	for (;;) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		int64_t left = t0 + ms - dpg_now_ms();
		ssize_t r;

		if (left <= 0 || poll(&pf, 1, (int)left) <= 0)
			return -1;
		r = recv(fd, buf, sizeof(buf), 0);
		if (r == 0 || (r < 0 && errno == ECONNRESET))
			return dpg_now_ms() - t0;
	}
}

static void mac(const uint8_t *secret, const char *label, const uint8_t *ns,
		const uint8_t *nc, uint8_t out[32])
{
	struct dpg_hmac_sha256 c;

	dpg_hmac_sha256_init(&c, secret, 32);
	dpg_hmac_sha256_update(&c, label, strlen(label));
	dpg_hmac_sha256_update(&c, ns, 32);
	dpg_hmac_sha256_update(&c, nc, 32);
	assert_int_equal(dpg_hmac_sha256_final(&c, out), 0);
}

/* Authenticate a raw socket by hand; 0 when the server accepted and proved
 * itself.  Async-signal-safe enough for a forked child (no malloc). */
static int raw_auth(int fd, const uint8_t *secret)
{
	uint8_t h[W_HDR + 32], req[W_HDR + 64], rep[W_HDR + 32], want[32];
	int i;

	if (!read_n(fd, h, sizeof(h), 2000) || g32(h) != W_MAGIC || h[4] != W_VERSION ||
	    h[5] != W_HELLO || g32(h + 12) != 32)
		return -1;
	hdr(req, W_MAGIC, W_VERSION, W_AUTH, 0, 64);
	for (i = 0; i < 32; i++)
		req[W_HDR + i] = (uint8_t)(i * 7 + 3);
	mac(secret, "dpg-store-v1 client", h + W_HDR, req + W_HDR, req + W_HDR + 32);
	if (send(fd, req, sizeof(req), MSG_NOSIGNAL) != (ssize_t)sizeof(req) ||
	    !read_n(fd, rep, sizeof(rep), 2000))
		return -1;
	mac(secret, "dpg-store-v1 server", h + W_HDR, req + W_HDR, want);
	if (rep[5] != (W_AUTH | W_REPLY) || rep[6] != 0 || memcmp(want, rep + W_HDR, 32))
		return -1;
	return 0;
}

/* stderr capture, to check what the server logs */
static char cap_path[64];

static void cap_begin(void)
{
	int fd;

	cap_restore();
	snprintf(cap_path, sizeof(cap_path), "/tmp/test_store.%d.log", (int)getpid());
	fd = open(cap_path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	fflush(stderr);
	saved_stderr = dup(2);
	dup2(fd, 2);
	close(fd);
}

/* Restore stderr; returns what was logged (static buffer), echoed. */
static const char *cap_end(void)
{
	static char buf[8192];
	int fd;
	ssize_t n;

	fflush(stderr);
	dup2(saved_stderr, 2);
	close(saved_stderr);
	saved_stderr = -1;
	fd = open(cap_path, O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : 0;
	buf[n > 0 ? n : 0] = '\0';
	if (fd >= 0)
		close(fd);
	unlink(cap_path);
	fputs(buf, stderr);
	return buf;
}

/* ------------------------------------------------------------ sha256 */

static void hex(const uint8_t *b, size_t n, char *out)
{
	size_t i;

	for (i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

static void test_sha256_vectors(void **state)
{
	static const struct { const char *msg; const char *md; } v[] = {
		{ "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
		{ "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
		{ "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
	};
	struct dpg_sha256 c;
	uint8_t md[32];
	char out[65];
	char *a;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		assert_int_equal(dpg_sha256(v[i].msg, strlen(v[i].msg), md), 0);
		hex(md, 32, out);
		assert_string_equal(out, v[i].md);
	}
	/* FIPS 180-2 C.3: one million 'a', fed in uneven pieces */
	a = malloc(1000000);
	assert_non_null(a);
	memset(a, 'a', 1000000);
	dpg_sha256_init(&c);
	for (i = 0; i < 1000000;) {
		size_t n = (i % 7 + 1) * 37;

		if (n > 1000000 - i)
			n = 1000000 - i;
		dpg_sha256_update(&c, a + i, n);
		i += n;
	}
	assert_int_equal(dpg_sha256_final(&c, md), 0);
	free(a);
	hex(md, 32, out);
	assert_string_equal(out, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void test_hmac_rfc4231(void **state)
{
	uint8_t k1[20], k3[20], k4[25], k5[20], k6[131], d3[50], d4[50], m[32];
	char out[65];
	static const char *t7 = "This is a test using a larger than block-size key and "
		"a larger than block-size data. The key needs to be hashed before being "
		"used by the HMAC algorithm.";
	size_t i;

	(void)state;
	memset(k1, 0x0b, sizeof(k1));
	memset(k3, 0xaa, sizeof(k3));
	memset(d3, 0xdd, sizeof(d3));
	for (i = 0; i < sizeof(k4); i++)
		k4[i] = (uint8_t)(i + 1);
	memset(d4, 0xcd, sizeof(d4));
	memset(k5, 0x0c, sizeof(k5));
	memset(k6, 0xaa, sizeof(k6));

	assert_int_equal(dpg_hmac_sha256(k1, sizeof(k1), "Hi There", 8, m), 0);
	hex(m, 32, out);
	assert_string_equal(out, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
	assert_int_equal(dpg_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, m), 0);
	hex(m, 32, out);
	assert_string_equal(out, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
	assert_int_equal(dpg_hmac_sha256(k3, sizeof(k3), d3, sizeof(d3), m), 0);
	hex(m, 32, out);
	assert_string_equal(out, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
	assert_int_equal(dpg_hmac_sha256(k4, sizeof(k4), d4, sizeof(d4), m), 0);
	hex(m, 32, out);
	assert_string_equal(out, "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
	assert_int_equal(dpg_hmac_sha256(k5, sizeof(k5), "Test With Truncation", 20, m), 0);
	hex(m, 16, out);	/* RFC 4231 4.6 truncates to 128 bits */
	assert_string_equal(out, "a3b6167473100ee06e0c796c2955552b");
	assert_int_equal(dpg_hmac_sha256(k6, sizeof(k6), "Test Using Larger Than Block-Size Key - Hash Key First",
			54, m), 0);
	hex(m, 32, out);
	assert_string_equal(out, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
	assert_int_equal(dpg_hmac_sha256(k6, sizeof(k6), t7, strlen(t7), m), 0);
	hex(m, 32, out);
	assert_string_equal(out, "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");

	assert_int_equal(dpg_ct_equal("abcd", "abcd", 4), 1);
	assert_int_equal(dpg_ct_equal("abcd", "abce", 4), 0);
	assert_int_equal(dpg_ct_equal("xbcd", "abcd", 4), 0);
	assert_int_equal(dpg_ct_equal("", "", 0), 1);
}

static void test_secret_parse(void **state)
{
	uint8_t out[64];
	size_t len = 0;
	struct dpg_err err;
	char h[200];

	(void)state;
	assert_int_equal(dpg_secret_parse("00112233445566778899aabbccddeeFF", out,
					  sizeof(out), &len, &err), 0);
	assert_int_equal(len, 16);
	assert_int_equal(out[0], 0x00);
	assert_int_equal(out[5], 0x55);
	assert_int_equal(out[15], 0xff);
	memset(h, 'a', 128);
	h[128] = '\0';
	assert_int_equal(dpg_secret_parse(h, out, sizeof(out), &len, &err), 0);
	assert_int_equal(len, 64);
	h[128] = 'a';
	h[129] = 'a';
	h[130] = '\0';
	assert_int_equal(dpg_secret_parse(h, out, sizeof(out), &len, &err), -1);
	assert_non_null(strstr(err.msg, "130 hex digits"));
	assert_int_equal(dpg_secret_parse("abcd", out, sizeof(out), &len, &err), -1);
	assert_non_null(strstr(err.msg, "4 hex digits (want 32..128)"));
	assert_int_equal(dpg_secret_parse("00112233445566778899aabbccddeeff0", out,
					  sizeof(out), &len, &err), -1);
	assert_non_null(strstr(err.msg, "odd number"));
	assert_int_equal(dpg_secret_parse("00112233445566778899aabbccddeefg", out,
					  sizeof(out), &len, &err), -1);
	assert_non_null(strstr(err.msg, "character 32 is not a hex digit"));
	assert_int_equal(dpg_secret_parse("", out, sizeof(out), &len, &err), -1);
	assert_int_equal(dpg_secret_parse(NULL, out, sizeof(out), &len, &err), -1);
	assert_int_equal(dpg_secret_parse("00112233445566778899aabbccddeeff", out, 8,
					  &len, &err), -1);
}

/* ------------------------------------------------------------ operations */

static void test_set_get(void **state)
{
	struct fx *f = *state;
	struct dpg_store *c = client(f->port);
	struct dpg_err err;
	static const uint8_t bin[5] = { 0, 1, 0, 255, 7 };
	uint8_t *big;
	void *v;
	size_t n, i;

	assert_int_equal(dpg_store_set(c, "addr/0", "host0:1234", 10, in_ms(2000), &err), 0);
	assert_int_equal(dpg_store_get(c, "addr/0", &v, &n, in_ms(2000), &err), 0);
	assert_int_equal(n, 10);
	assert_memory_equal(v, "host0:1234", 10);
	free(v);
	/* overwrite, empty value, binary value */
	assert_int_equal(dpg_store_set(c, "addr/0", "x", 1, in_ms(2000), &err), 0);
	assert_int_equal(dpg_store_get(c, "addr/0", &v, &n, in_ms(2000), &err), 0);
	assert_int_equal(n, 1);
	free(v);
	assert_int_equal(dpg_store_set(c, "empty", "", 0, in_ms(2000), &err), 0);
	assert_int_equal(dpg_store_get(c, "empty", &v, &n, in_ms(2000), &err), 0);
	assert_int_equal(n, 0);
	free(v);
	assert_int_equal(dpg_store_set(c, "bin", bin, sizeof(bin), in_ms(2000), &err), 0);
	assert_int_equal(dpg_store_get(c, "bin", &v, &n, in_ms(2000), &err), 0);
	assert_int_equal(n, sizeof(bin));
	assert_memory_equal(v, bin, sizeof(bin));
	free(v);
	/* a large value (sent by reference on the server side), read twice */
	big = malloc(3u << 20);
	assert_non_null(big);
	for (i = 0; i < (3u << 20); i++)
		big[i] = (uint8_t)(i * 131 >> 3);
	assert_int_equal(dpg_store_set(c, "big", big, 3u << 20, in_ms(5000), &err), 0);
	for (i = 0; i < 2; i++) {
		assert_int_equal(dpg_store_get(c, "big", &v, &n, in_ms(5000), &err), 0);
		assert_int_equal(n, 3u << 20);
		assert_memory_equal(v, big, n);
		free(v);
	}
	free(big);
	/* client-side limits */
	{
		char key[DPG_STORE_KEY_MAX + 2];

		memset(key, 'k', sizeof(key) - 1);
		key[sizeof(key) - 1] = '\0';
		assert_int_equal(dpg_store_set(c, key, "v", 1, in_ms(1000), &err), -1);
		assert_non_null(strstr(err.msg, "513 bytes long"));
		key[DPG_STORE_KEY_MAX] = '\0';	/* exactly the limit: fine */
		assert_int_equal(dpg_store_set(c, key, "v", 1, in_ms(1000), &err), 0);
		assert_int_equal(dpg_store_set(c, "", "v", 1, in_ms(1000), &err), -1);
		assert_int_equal(dpg_store_set(c, "k", "v", DPG_STORE_VALUE_MAX + 1,
					       in_ms(1000), &err), -1);
	}
	dpg_store_close(c);
}

static void test_add(void **state)
{
	struct fx *f = *state;
	struct dpg_store *c = client(f->port);
	struct dpg_err err;
	int64_t r = 0;
	void *v;
	size_t n;

	assert_int_equal(dpg_store_add(c, "ctr", 5, &r, in_ms(2000), &err), 0);
	assert_int_equal(r, 5);
	assert_int_equal(dpg_store_add(c, "ctr", -7, &r, in_ms(2000), &err), 0);
	assert_int_equal(r, -2);
	assert_int_equal(dpg_store_get(c, "ctr", &v, &n, in_ms(2000), &err), 0);
	assert_int_equal(n, 2);
	assert_memory_equal(v, "-2", 2);	/* decimal text */
	free(v);
	assert_int_equal(dpg_store_set(c, "txt", "hello", 5, in_ms(2000), &err), 0);
	assert_int_equal(dpg_store_add(c, "txt", 1, &r, in_ms(2000), &err), -1);
	assert_non_null(strstr(err.msg, "not a decimal integer"));
	assert_int_equal(dpg_store_set(c, "max", "9223372036854775807", 19, in_ms(2000),
				       &err), 0);
	assert_int_equal(dpg_store_add(c, "max", 1, &r, in_ms(2000), &err), -1);
	assert_non_null(strstr(err.msg, "overflow"));
	assert_int_equal(dpg_store_add(c, "max", -1, &r, in_ms(2000), &err), 0);
	assert_int_equal(r, INT64_MAX - 1);
	/* the connection is still in step after error replies */
	assert_int_equal(dpg_store_add(c, "ctr", 2, &r, in_ms(2000), &err), 0);
	assert_int_equal(r, 0);
	dpg_store_close(c);
}

static void test_cas(void **state)
{
	struct fx *f = *state;
	struct dpg_store *c = client(f->port);
	struct dpg_err err;
	void *cur;
	size_t n;

	/* missing + empty expected: set */
	assert_int_equal(dpg_store_cas(c, "leader", "", 0, "r0", 2, &cur, &n, in_ms(2000),
				       &err), 0);
	assert_non_null(cur);
	assert_int_equal(n, 2);
	assert_memory_equal(cur, "r0", 2);
	free(cur);
	/* wrong expectation: unchanged, current value returned */
	assert_int_equal(dpg_store_cas(c, "leader", "", 0, "r1", 2, &cur, &n, in_ms(2000),
				       &err), 0);
	assert_memory_equal(cur, "r0", 2);
	free(cur);
	assert_int_equal(dpg_store_cas(c, "leader", "rX", 2, "r1", 2, &cur, &n, in_ms(2000),
				       &err), 0);
	assert_memory_equal(cur, "r0", 2);
	free(cur);
	/* right expectation: swapped */
	assert_int_equal(dpg_store_cas(c, "leader", "r0", 2, "r1", 2, &cur, &n, in_ms(2000),
				       &err), 0);
	assert_memory_equal(cur, "r1", 2);
	free(cur);
	/* a missing key with a non-empty expectation stays missing */
	assert_int_equal(dpg_store_cas(c, "nokey", "a", 1, "b", 1, &cur, &n, in_ms(2000),
				       &err), 0);
	assert_null(cur);
	assert_int_equal(n, 0);
	dpg_store_close(c);
}

struct setter {
	uint16_t port;
	int delay_ms;
	const char *keys[4];
	int nkeys;
};

static void *setter_main(void *arg)
{
	struct setter *st = arg;
	struct dpg_store *c = client(st->port);
	struct dpg_err err;
	int i;

	usleep((useconds_t)st->delay_ms * 1000);
	for (i = 0; i < st->nkeys; i++) {
		usleep(20000);
		if (dpg_store_set(c, st->keys[i], "v", 1, in_ms(2000), &err) != 0)
			fprintf(stderr, "setter: %s\n", err.msg);
	}
	dpg_store_close(c);
	return NULL;
}

static void test_get_blocks_until_set(void **state)
{
	struct fx *f = *state;
	struct dpg_store *c = client(f->port);
	struct setter st = { f->port, 150, { "late" }, 1 };
	struct dpg_err err;
	pthread_t th;
	int64_t t0;
	void *v;
	size_t n;

	assert_int_equal(pthread_create(&th, NULL, setter_main, &st), 0);
	t0 = dpg_now_ms();
	assert_int_equal(dpg_store_get(c, "late", &v, &n, in_ms(5000), &err), 0);
	assert_true(dpg_now_ms() - t0 >= 120);
	assert_int_equal(n, 1);
	free(v);
	pthread_join(th, NULL);
	dpg_store_close(c);
}

static void test_wait_multi(void **state)
{
	struct fx *f = *state;
	struct dpg_store *c = client(f->port);
	struct setter st = { f->port, 100, { "w1", "w2", "w3" }, 3 };
	const char *keys[] = { "w1", "pre", "w2", "w3", "w1" };
	struct dpg_err err;
	pthread_t th;
	int64_t t0;

	assert_int_equal(dpg_store_set(c, "pre", "1", 1, in_ms(2000), &err), 0);
	assert_int_equal(dpg_store_wait(c, keys + 1, 1, in_ms(2000), &err), 0);
	assert_int_equal(pthread_create(&th, NULL, setter_main, &st), 0);
	t0 = dpg_now_ms();
	assert_int_equal(dpg_store_wait(c, keys, 5, in_ms(5000), &err), 0);
	assert_true(dpg_now_ms() - t0 >= 130);	/* only after the last of the three */
	pthread_join(th, NULL);
	/* a timed-out WAIT names its keys */
	keys[0] = "never1";
	keys[1] = "never2";
	assert_int_equal(dpg_store_wait(c, keys, 2, in_ms(200), &err), -DPG_ERR_TIMEOUT);
	assert_non_null(strstr(err.msg, "waiting for keys 'never1', 'never2'"));
	dpg_store_close(c);
}

#define ADD_THREADS 64
#define ADDS_EACH 100

struct adder {
	uint16_t port;
	int64_t results[ADDS_EACH];
	int fails;
};

static void *adder_main(void *arg)
{
	struct adder *a = arg;
	struct dpg_store *c = NULL;
	struct dpg_err err;
	int i;

	if (dpg_store_connect("127.0.0.1", a->port, SECRET, sizeof(SECRET), in_ms(10000),
			      NULL, &c, &err) != 0) {
		a->fails = ADDS_EACH;
		return NULL;
	}
	for (i = 0; i < ADDS_EACH; i++)
		if (dpg_store_add(c, "total", 1, &a->results[i], in_ms(10000), &err) != 0)
			a->fails++;
	dpg_store_close(c);
	return NULL;
}

static void test_concurrent_adds(void **state)
{
	struct fx *f = *state;
	struct adder *a = calloc(ADD_THREADS, sizeof(*a));
	pthread_t th[ADD_THREADS];
	uint8_t *seen = calloc(ADD_THREADS * ADDS_EACH + 1, 1);
	struct dpg_store *c;
	struct dpg_err err;
	int64_t total = 0;
	int i, j;

	assert_non_null(a);
	assert_non_null(seen);
	for (i = 0; i < ADD_THREADS; i++) {
		a[i].port = f->port;
		assert_int_equal(pthread_create(&th[i], NULL, adder_main, &a[i]), 0);
	}
	for (i = 0; i < ADD_THREADS; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < ADD_THREADS; i++) {
		assert_int_equal(a[i].fails, 0);
		for (j = 0; j < ADDS_EACH; j++) {
			int64_t r = a[i].results[j];

			assert_true(r >= 1 && r <= ADD_THREADS * ADDS_EACH);
			assert_int_equal(seen[r], 0);	/* every result exactly once */
			seen[r] = 1;
		}
	}
	c = client(f->port);
	assert_int_equal(dpg_store_add(c, "total", 0, &total, in_ms(2000), &err), 0);
	assert_int_equal(total, ADD_THREADS * ADDS_EACH);
	dpg_store_close(c);
	free(seen);
	free(a);
}

#define BAR_N 8
#define BAR_ROUNDS 20

struct barrier_arg {
	uint16_t port;
	int *arrived;		/* per round, under mu */
	pthread_mutex_t *mu;
	int early;		/* times we left a round before all arrived */
	int fails;
};

static void *barrier_main(void *arg)
{
	struct barrier_arg *b = arg;
	struct dpg_store *c = client(b->port);
	struct dpg_err err;
	int r;

	for (r = 0; r < BAR_ROUNDS; r++) {
		pthread_mutex_lock(b->mu);
		b->arrived[r]++;
		pthread_mutex_unlock(b->mu);
		if (dpg_store_barrier(c, "bar", BAR_N, in_ms(10000), &err) != 0) {
			fprintf(stderr, "barrier: %s\n", err.msg);
			b->fails++;
		}
		pthread_mutex_lock(b->mu);
		if (b->arrived[r] != BAR_N)
			b->early++;
		pthread_mutex_unlock(b->mu);
	}
	dpg_store_close(c);
	return NULL;
}

static void test_barrier(void **state)
{
	struct fx *f = *state;
	struct barrier_arg b[BAR_N];
	pthread_t th[BAR_N];
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	int arrived[BAR_ROUNDS] = { 0 };
	struct dpg_store *c;
	struct dpg_err err;
	void *cur;
	size_t n;
	int i;

	for (i = 0; i < BAR_N; i++) {
		b[i] = (struct barrier_arg){ f->port, arrived, &mu, 0, 0 };
		assert_int_equal(pthread_create(&th[i], NULL, barrier_main, &b[i]), 0);
	}
	for (i = 0; i < BAR_N; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(b[i].fails, 0);
		assert_int_equal(b[i].early, 0);
	}
	/* old generations are deleted, the last one stays (CAS with a wrong
	 * expectation peeks without blocking) */
	c = client(f->port);
	assert_int_equal(dpg_store_cas(c, "bar/done/0", "?", 1, "x", 1, &cur, &n,
				       in_ms(2000), &err), 0);
	assert_null(cur);
	assert_int_equal(dpg_store_cas(c, "bar/done/19", "?", 1, "x", 1, &cur, &n,
				       in_ms(2000), &err), 0);
	assert_non_null(cur);
	free(cur);
	/* a barrier nobody else joins times out and says how far it got */
	assert_int_equal(dpg_store_barrier(c, "lonely", 3, in_ms(200), &err),
			 -DPG_ERR_TIMEOUT);
	assert_non_null(strstr(err.msg, "barrier 'lonely'"));
	assert_non_null(strstr(err.msg, "1 of 3 arrived"));
	dpg_store_close(c);
}

/* ------------------------------------------------------------ deadlines */

static void test_get_timeout(void **state)
{
	struct fx *f = *state;
	struct dpg_store *c = client(f->port), *d = client(f->port);
	struct dpg_err err;
	int64_t t0, dt;
	void *v;
	size_t n;

	t0 = dpg_now_ms();
	assert_int_equal(dpg_store_get(c, "nope", &v, &n, t0 + 300, &err), -DPG_ERR_TIMEOUT);
	dt = dpg_now_ms() - t0;
	assert_true(dt >= 290 && dt < 1000);
	assert_non_null(strstr(err.msg, "store: timed out after 0.3 s waiting for key 'nope'"));
	/* the key appears later: the stale request must not confuse the next */
	assert_int_equal(dpg_store_set(d, "other", "O", 1, in_ms(2000), &err), 0);
	assert_int_equal(dpg_store_set(d, "nope", "N", 1, in_ms(2000), &err), 0);
	assert_int_equal(dpg_store_get(c, "other", &v, &n, in_ms(2000), &err), 0);
	assert_memory_equal(v, "O", 1);
	free(v);
	assert_int_equal(dpg_store_get(c, "nope", &v, &n, in_ms(2000), &err), 0);
	assert_memory_equal(v, "N", 1);
	free(v);
	/* an already-passed deadline fails at once */
	assert_int_equal(dpg_store_get(c, "nope2", &v, &n, dpg_now_ms() - 1, &err),
			 -DPG_ERR_TIMEOUT);
	dpg_store_close(c);
	dpg_store_close(d);
}

static volatile int abort_flag;

static void *raise_abort(void *arg)
{
	(void)arg;
	usleep(150000);
	__atomic_store_n(&abort_flag, 1, __ATOMIC_RELAXED);
	return NULL;
}

static void test_abort_flag(void **state)
{
	struct fx *f = *state;
	struct dpg_store *c = NULL;
	struct dpg_err err;
	pthread_t th;
	int64_t t0;
	void *v;
	size_t n;

	abort_flag = 0;
	assert_int_equal(dpg_store_connect("127.0.0.1", f->port, SECRET, sizeof(SECRET),
					   in_ms(2000), &abort_flag, &c, &err), 0);
	assert_int_equal(pthread_create(&th, NULL, raise_abort, NULL), 0);
	t0 = dpg_now_ms();
	assert_int_equal(dpg_store_get(c, "never", &v, &n, in_ms(10000), &err),
			 -DPG_ERR_ABORTED);
	assert_true(dpg_now_ms() - t0 < 1500);
	assert_non_null(strstr(err.msg, "aborted waiting for key 'never'"));
	pthread_join(th, NULL);
	dpg_store_close(c);
}

struct late_server {
	uint16_t port;
	struct dpg_store_server *srv;
};

static void *late_server_main(void *arg)
{
	struct late_server *ls = arg;
	struct dpg_err err;

	usleep(300000);
	if (dpg_store_server_start("127.0.0.1", ls->port, SECRET, sizeof(SECRET),
				   &ls->srv, &err) != 0)
		fprintf(stderr, "late server: %s\n", err.msg);
	return NULL;
}

static void test_connect_retries(void **state)
{
	struct late_server ls = { 0, NULL };
	struct dpg_store *c = NULL;
	struct dpg_err err;
	pthread_t th;
	int64_t t0;
	int fd;

	(void)state;
	/* a free port: bind, read it back, close */
	assert_int_equal(dpg_net_listen("127.0.0.1", 0, 1, &fd, &ls.port, &err), 0);
	close(fd);
	t0 = dpg_now_ms();
	assert_int_equal(dpg_store_connect("127.0.0.1", ls.port, SECRET, sizeof(SECRET),
					   t0 + 300, NULL, &c, &err), -DPG_ERR_TIMEOUT);
	assert_true(dpg_now_ms() - t0 < 1000);
	assert_non_null(strstr(err.msg, "store: cannot connect to 127.0.0.1:"));
	/* the server comes up while we retry */
	assert_int_equal(pthread_create(&th, NULL, late_server_main, &ls), 0);
	assert_int_equal(dpg_store_connect("127.0.0.1", ls.port, SECRET, sizeof(SECRET),
					   in_ms(5000), NULL, &c, &err), 0);
	pthread_join(th, NULL);
	assert_non_null(ls.srv);
	assert_int_equal(dpg_store_set(c, "k", "v", 1, in_ms(2000), &err), 0);
	dpg_store_close(c);
	dpg_store_server_stop(ls.srv);
}

struct getter {
	uint16_t port;
	int rc;
	int64_t ms;
	char msg[DPG_ERR_MSG_MAX];
};

static void *getter_main(void *arg)
{
	struct getter *g = arg;
	struct dpg_store *c = client(g->port);
	struct dpg_err err;
	int64_t t0 = dpg_now_ms();
	void *v = NULL;
	size_t n;

	g->rc = dpg_store_get(c, "forever", &v, &n, in_ms(10000), &err);
	g->ms = dpg_now_ms() - t0;
	snprintf(g->msg, sizeof(g->msg), "%s", err.msg);
	free(v);
	dpg_store_close(c);
	return NULL;
}

static void test_server_stop_wakes_clients(void **state)
{
	struct dpg_store_server *srv;
	struct getter g[4];
	pthread_t th[4];
	struct dpg_err err;
	int i;

	(void)state;
	assert_int_equal(dpg_store_server_start("127.0.0.1", 0, SECRET, sizeof(SECRET),
						&srv, &err), 0);
	for (i = 0; i < 4; i++) {
		g[i] = (struct getter){ .port = dpg_store_server_port(srv) };
		assert_int_equal(pthread_create(&th[i], NULL, getter_main, &g[i]), 0);
	}
	usleep(300000);
	dpg_store_server_stop(srv);
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(g[i].rc, -DPG_ERR_PEER);
		assert_true(g[i].ms < 2000);
		assert_non_null(strstr(g[i].msg, "closed the connection waiting for key "
				       "'forever'"));
		assert_non_null(strstr(g[i].msg, "127.0.0.1:"));
	}
}

/* ------------------------------------------------------------ hostile peers */

static void test_wrong_secret(void **state)
{
	struct fx *f = *state;
	struct dpg_store *c = NULL;
	struct dpg_err err;
	const char *log;
	int fd;

	cap_begin();
	assert_int_equal(dpg_store_connect("127.0.0.1", f->port, OTHER, sizeof(OTHER),
					   in_ms(2000), NULL, &c, &err), -DPG_ERR_AUTH);
	assert_null(c);
	/* a raw peer with the wrong secret is closed as well */
	fd = raw_connect(f->port);
	assert_int_equal(raw_auth(fd, OTHER), -1);
	assert_true(ms_to_eof(fd, 2000) >= 0);
	close(fd);
	log = cap_end();
	assert_non_null(strstr(err.msg, "store: the store at 127.0.0.1:"));
	assert_non_null(strstr(err.msg, "refused our job secret (DPG_SECRET differs?)"));
	assert_non_null(strstr(log, "dpg store: refused 127.0.0.1:"));
	assert_non_null(strstr(log, "wrong job secret"));
	/* too short a secret never gets on the wire */
	assert_int_equal(dpg_store_connect("127.0.0.1", f->port, SECRET, 8, in_ms(2000),
					   NULL, &c, &err), -1);
	assert_serving(f->port);
}

static void test_unauthenticated_garbage(void **state)
{
	struct fx *f = *state;
	uint8_t h[W_HDR + 32], m[W_HDR + 8];
	const char *log;
	int fd;

	cap_begin();
	/* garbage instead of AUTH */
	fd = raw_connect(f->port);
	assert_true(read_n(fd, h, sizeof(h), 2000));
	send_all(fd, "GET / HTTP/1.0\r\n\r\n", 18);
	assert_true(ms_to_eof(fd, 2000) >= 0);
	close(fd);
	/* a well-formed request, but before authenticating */
	fd = raw_connect(f->port);
	hdr(m, W_MAGIC, W_VERSION, W_SET, 1, 8);
	p32(m + W_HDR, 1);
	memcpy(m + W_HDR + 4, "kval", 4);
	send_all(fd, m, sizeof(m));
	assert_true(ms_to_eof(fd, 2000) >= 0);
	close(fd);
	/* an AUTH that claims a huge body */
	fd = raw_connect(f->port);
	hdr(m, W_MAGIC, W_VERSION, W_AUTH, 0, 0xffffffffu);
	send_all(fd, m, W_HDR);
	assert_true(ms_to_eof(fd, 2000) >= 0);
	close(fd);
	log = cap_end();
	assert_non_null(strstr(log, "bad magic"));
	assert_non_null(strstr(log, "sent SET (op 3) before authenticating"));
	assert_non_null(strstr(log, "AUTH body of 4294967295 bytes"));
	assert_serving(f->port);
}

static void test_auth_timeout(void **state)
{
	struct dpg_store_server *srv;
	struct dpg_err err;
	const char *log;
	int64_t t, t2;
	int fd, fd2, i;

	(void)state;
	setenv("DPG_STORE_AUTH_TIMEOUT_MS", "300", 1);
	assert_int_equal(dpg_store_server_start("127.0.0.1", 0, SECRET, sizeof(SECRET),
						&srv, &err), 0);
	unsetenv("DPG_STORE_AUTH_TIMEOUT_MS");
	cap_begin();
	fd = raw_connect(dpg_store_server_port(srv));	/* says nothing */
	fd2 = raw_connect(dpg_store_server_port(srv));	/* slowloris: a byte at a time */
	for (i = 0; i < 3; i++) {
		send_all(fd2, "\x44", 1);
		usleep(80000);
	}
	t = ms_to_eof(fd, 3000);
	t2 = ms_to_eof(fd2, 3000);
	close(fd);
	close(fd2);
	log = cap_end();
	assert_true(t >= 0 && t < 1500);
	assert_true(t2 >= 0 && t2 < 1500);
	assert_non_null(strstr(log, "did not authenticate within 300 ms"));
	assert_serving(dpg_store_server_port(srv));
	dpg_store_server_stop(srv);
}

/* Without DPG_STORE_AUTH_TIMEOUT_MS a silent peer is closed after about 2 s
 * (it was 10 s: long enough for strangers to keep ranks out). */
static void test_auth_timeout_default(void **state)
{
	struct fx *f = *state;
	int fd = raw_connect(f->port);
	int64_t t = ms_to_eof(fd, 6000);

	close(fd);
	assert_true(t >= 1500 && t < 4000);
}

static void test_malformed_after_auth(void **state)
{
	struct fx *f = *state;
	uint8_t m[W_HDR + 64];
	const char *log;
	int fd, i;

	cap_begin();
	for (i = 0; i < 7; i++) {
		size_t len = W_HDR;

		fd = raw_connect(f->port);
		assert_int_equal(raw_auth(fd, SECRET), 0);
		switch (i) {
		case 0:		/* bad magic */
			hdr(m, 0xdeadbeef, W_VERSION, W_GET, 1, 0);
			break;
		case 1:		/* bad version */
			hdr(m, W_MAGIC, 9, W_GET, 1, 0);
			break;
		case 2:		/* claims 4 GiB */
			hdr(m, W_MAGIC, W_VERSION, W_SET, 1, 0xffffffffu);
			break;
		case 3:		/* unknown op */
			hdr(m, W_MAGIC, W_VERSION, 77, 1, 0);
			break;
		case 4:		/* a key length running past the body */
			hdr(m, W_MAGIC, W_VERSION, W_GET, 1, 8);
			p32(m + W_HDR, 100);
			memcpy(m + W_HDR + 4, "abcd", 4);
			len += 8;
			break;
		case 5:		/* nonzero flags */
			hdr(m, W_MAGIC, W_VERSION, W_GET, 1, 5);
			m[6] = 1;
			p32(m + W_HDR, 1);
			m[W_HDR + 4] = 'k';
			len += 5;
			break;
		default:	/* WAIT for zero keys */
			hdr(m, W_MAGIC, W_VERSION, W_WAIT, 1, 4);
			p32(m + W_HDR, 0);
			len += 4;
			break;
		}
		send_all(fd, m, len);
		assert_true(ms_to_eof(fd, 2000) >= 0);
		close(fd);
	}
	log = cap_end();
	assert_non_null(strstr(log, "dpg store: dropped 127.0.0.1:"));
	assert_non_null(strstr(log, "bad magic 0xdeadbeef"));
	assert_non_null(strstr(log, "protocol version 9"));
	assert_non_null(strstr(log, "SET body of 4294967295 bytes"));
	assert_non_null(strstr(log, "unknown op 77"));
	assert_non_null(strstr(log, "malformed GET body"));
	assert_non_null(strstr(log, "nonzero flags"));
	assert_non_null(strstr(log, "malformed WAIT body"));
	assert_serving(f->port);
}

/* A child that authenticates, sends half a SET (or a whole GET that parks),
 * then is killed; returns its wait status (no asserts: stderr may be
 * captured).  Exit status 1: the child could not set itself up. */
static int child_dies(uint16_t port, bool park)
{
	pid_t pid = fork();
	int st = -1;

	if (pid < 0)
		return -1;
	if (pid == 0) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
		uint8_t m[W_HDR + 100];
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
		    raw_auth(fd, SECRET) != 0)
			_exit(1);
		memset(m, 'x', sizeof(m));
		if (park) {
			hdr(m, W_MAGIC, W_VERSION, W_GET, 1, 4 + 6);
			p32(m + W_HDR, 6);
			memcpy(m + W_HDR + 4, "orphan", 6);
			if (send(fd, m, W_HDR + 10, MSG_NOSIGNAL) != W_HDR + 10)
				_exit(1);
		} else {
			hdr(m, W_MAGIC, W_VERSION, W_SET, 1, 100);
			p32(m + W_HDR, 3);
			if (send(fd, m, W_HDR + 50, MSG_NOSIGNAL) != W_HDR + 50)
				_exit(1);
		}
		usleep(50000);
		raise(SIGKILL);	/* killed, and out of reach of valgrind's exit checks */
		_exit(2);
	}
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return st;
}

static void test_client_killed_mid_request(void **state)
{
	struct fx *f = *state;
	struct dpg_store *c;
	struct dpg_err err;
	const char *log;
	void *v;
	size_t n;
	int st1, st2;

	cap_begin();
	st1 = child_dies(f->port, false);
	st2 = child_dies(f->port, true);
	usleep(100000);
	log = cap_end();
	assert_true(WIFSIGNALED(st1) && WTERMSIG(st1) == SIGKILL);
	assert_true(WIFSIGNALED(st2) && WTERMSIG(st2) == SIGKILL);
	assert_non_null(strstr(log, "closed the connection in the middle of a message"));
	assert_serving(f->port);
	/* the orphaned waiter is gone: setting its key answers nobody, safely */
	c = client(f->port);
	assert_int_equal(dpg_store_set(c, "orphan", "o", 1, in_ms(2000), &err), 0);
	assert_int_equal(dpg_store_get(c, "orphan", &v, &n, in_ms(2000), &err), 0);
	free(v);
	dpg_store_close(c);
}

/* The host process forks (DataLoader workers...): children hold copies of the
 * server's sockets, and one even calls stop().  The parent's server must not
 * see events for connections it closed, nor be stopped by the child. */
static void test_fork_holds_server_fds(void **state)
{
	struct fx *f = *state;
	uint8_t m[W_HDR];
	pid_t pid;
	int st = -1, fd;

	fd = raw_connect(f->port);
	assert_int_equal(raw_auth(fd, SECRET), 0);
	pid = fork();	/* the child now holds the server's end of fd too */
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fd);
		dpg_store_server_stop(f->srv);	/* a no-op in a child */
		usleep(500000);
		raise(SIGKILL);
		_exit(2);
	}
	cap_begin();
	hdr(m, 0xbadbadu, W_VERSION, W_GET, 1, 0);
	send_all(fd, m, sizeof(m));	/* the server drops us and closes its end */
	usleep(100000);
	/* the file lives on in the child: more bytes must not reach the
	 * server's epoll set (the connection behind it is freed) */
	send(fd, m, sizeof(m), MSG_NOSIGNAL);
	usleep(100000);
	cap_end();
	assert_serving(f->port);
	close(fd);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);	/* stop() did not crash */
	assert_serving(f->port);
}

struct fake {
	int lfd;
	int mode;		/* 0: wrong proof, 1: not a dpg store at all */
};

static void *fake_main(void *arg)
{
	struct fake *fk = arg;
	uint8_t h[W_HDR + 32], req[W_HDR + 64];
	int fd = accept(fk->lfd, NULL, NULL);

	if (fd < 0)
		return NULL;
	if (fk->mode == 1) {
		send(fd, "SSH-2.0-OpenSSH_9.2p1 Debian\r\n\r\n\r\n", 34, MSG_NOSIGNAL);
	} else {
		hdr(h, W_MAGIC, W_VERSION, W_HELLO, 0, 32);
		memset(h + W_HDR, 0x42, 32);
		send(fd, h, sizeof(h), MSG_NOSIGNAL);
		if (read_n(fd, req, sizeof(req), 2000)) {
			hdr(h, W_MAGIC, W_VERSION, W_AUTH | W_REPLY, 0, 32);
			memset(h + W_HDR, 0x17, 32);	/* a proof it cannot make */
			send(fd, h, sizeof(h), MSG_NOSIGNAL);
		}
	}
	usleep(200000);
	close(fd);
	return NULL;
}

static void test_client_refuses_fake_server(void **state)
{
	struct fake fk;
	struct dpg_store *c = NULL;
	struct dpg_err err;
	pthread_t th;
	uint16_t port;

	(void)state;
	for (fk.mode = 0; fk.mode < 2; fk.mode++) {
		assert_int_equal(dpg_net_listen("127.0.0.1", 0, 4, &fk.lfd, &port, &err), 0);
		assert_int_equal(pthread_create(&th, NULL, fake_main, &fk), 0);
		assert_int_equal(dpg_store_connect("127.0.0.1", port, SECRET, sizeof(SECRET),
						   in_ms(2000), NULL, &c, &err),
				 -DPG_ERR_AUTH);
		assert_null(c);
		assert_non_null(strstr(err.msg, fk.mode == 0 ?
				       "failed to prove it knows our job secret" :
				       "does not speak the dpg store protocol"));
		pthread_join(th, NULL);
		close(fk.lfd);
	}
}


/* ------------------------------------------------------------ strangers and hoarders */

/* A store in a child process that has only 256 descriptors (soft = hard, so
 * it cannot raise them) and a 30 s pre-auth deadline: only evicting the
 * oldest unauthenticated connection can let a rank in.  Writes the port to
 * the pipe, serves until the pipe closes. */
static pid_t flood_server(int *ctl, uint16_t *portp)
{
	struct rlimit rl = { 256, 256 };
	int up[2], down[2];
	uint16_t port = 0;
	pid_t pid;

	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct dpg_store_server *srv;
		struct dpg_err err;
		char b;

		close(up[0]);
		close(down[1]);
		setenv("DPG_STORE_AUTH_TIMEOUT_MS", "30000", 1);
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0 ||
		    dpg_store_server_start("127.0.0.1", 0, SECRET, sizeof(SECRET), &srv,
					   &err) != 0)
			_exit(1);
		port = dpg_store_server_port(srv);
		if (write(up[1], &port, sizeof(port)) != sizeof(port))
			_exit(1);
		while (read(down[0], &b, 1) < 0 && errno == EINTR)
			;
		dpg_store_server_stop(srv);
		_exit(0);
	}
	close(up[1]);
	close(down[0]);
	assert_int_equal(read(up[0], &port, sizeof(port)), (ssize_t)sizeof(port));
	close(up[0]);
	*ctl = down[1];
	*portp = port;
	return pid;
}

#define STRANGERS 1100

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define DPG_HAVE_VALGRIND_H 1
#endif
#endif

static bool under_valgrind(void)
{
#ifdef DPG_HAVE_VALGRIND_H
	return RUNNING_ON_VALGRIND != 0;
#else
	return false;
#endif
}

/* Another user holds 1,100 idle connections to the store's port: four real
 * clients still join (and are served) within a few seconds. */
static void test_stranger_flood(void **state)
{
	struct rlimit rl;
	static int fds[STRANGERS];
	int ctl, st, i, n = 0;
	int64_t t0;
	uint16_t port;
	pid_t pid;

	(void)state;
	if (under_valgrind()) {	/* it cannot lower RLIMIT_NOFILE: it keeps its own fds */
		fprintf(stderr, "SKIP test_stranger_flood: under valgrind, which refuses "
			"the low RLIMIT_NOFILE this case needs (run natively and under ASan)\n");
		skip();
	}
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < STRANGERS + 64) {
		fprintf(stderr, "SKIP test_stranger_flood: the hard RLIMIT_NOFILE %llu is below "
			"the %d descriptors this case needs (raise ulimit -Hn)\n",
			(unsigned long long)rl.rlim_max, STRANGERS + 64);
		skip();
	}
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < STRANGERS + 64) {
		rl.rlim_cur = rl.rlim_max;
		assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	}
	pid = flood_server(&ctl, &port);
	for (i = 0; i < STRANGERS; i++) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };

		fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		assert_true(fds[i] >= 0);
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (connect(fds[i], (struct sockaddr *)&a, sizeof(a)) == 0 || errno == EINPROGRESS)
			n++;
	}
	assert_true(n > STRANGERS / 2);
	usleep(200000);		/* let the server take them all on */
	t0 = dpg_now_ms();
	for (i = 0; i < 4; i++) {
		struct dpg_store *c = NULL;
		struct dpg_err err;
		int64_t v = 0;
		int rc = dpg_store_connect("127.0.0.1", port, SECRET, sizeof(SECRET),
					   in_ms(4000), NULL, &c, &err);

		if (rc != 0)
			fail_msg("client %d did not join past %d strangers after %lld ms: %s", i,
				 STRANGERS, (long long)(dpg_now_ms() - t0), err.msg);
		assert_int_equal(dpg_store_add(c, "joined", 1, &v, in_ms(2000), &err), 0);
		assert_int_equal(v, i + 1);
		dpg_store_close(c);
	}
	assert_true(dpg_now_ms() - t0 < 4000);
	for (i = 0; i < STRANGERS; i++)
		close(fds[i]);
	close(ctl);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

#define HOARD_KEYS 4096
#define HOARD_KLEN 512

/* Send WAIT id for HOARD_KEYS distinct keys of HOARD_KLEN bytes, tagged tag. */
static void send_hoard(int fd, uint32_t id, unsigned tag)
{
	size_t len = 4 + (size_t)HOARD_KEYS * (4 + HOARD_KLEN), off = W_HDR + 4;
	uint8_t *m = malloc(W_HDR + len);
	uint32_t k;

	assert_non_null(m);
	hdr(m, W_MAGIC, W_VERSION, W_WAIT, id, (uint32_t)len);
	p32(m + W_HDR, HOARD_KEYS);
	for (k = 0; k < HOARD_KEYS; k++) {
		p32(m + off, HOARD_KLEN);
		memset(m + off + 4, 'k', HOARD_KLEN);
		snprintf((char *)m + off + 4, 32, "hoard-%u-%u-%u", tag, id, k);
		m[off + 4 + strlen((char *)m + off + 4)] = 'k';
		off += 4 + HOARD_KLEN;
	}
	send_all(fd, m, W_HDR + len);
	free(m);
}

/* Send an ADD (id 0xadd) behind the WAITs and read the replies up to its
 * own (a connection's replies come in order): count the WAITs' error replies,
 * keep the last text. */
static int hoard_errors(int fd, char *last, size_t cap)
{
	uint8_t m[W_HDR + 4 + 8 + 8], h[W_HDR];
	int n = 0;

	hdr(m, W_MAGIC, W_VERSION, W_ADD, 0xadd, 4 + 8 + 8);
	p32(m + W_HDR, 8);
	memcpy(m + W_HDR + 4, "sentinel", 8);
	memset(m + W_HDR + 12, 0, 8);
	m[W_HDR + 12] = 1;
	send_all(fd, m, sizeof(m));
	for (;;) {
		char body[1100];
		uint32_t len;

		assert_true(read_n(fd, h, sizeof(h), 5000));
		len = g32(h + 12);
		assert_true(len < sizeof(body));
		assert_true(read_n(fd, body, len, 5000));
		if (h[5] == (W_ADD | W_REPLY) && g32(h + 8) == 0xadd)
			return n;
		body[len] = '\0';
		assert_int_equal(h[5], W_WAIT | W_REPLY);
		assert_int_equal(h[6], 1);		/* an error reply, not a drop */
		snprintf(last, cap, "%s", body);
		n++;
	}
}

/* Authenticated clients parking many waits on huge keys get a clear error
 * past the bounds (per connection, then store-wide) and the server's
 * parked memory stays bounded; all of it is released when they go. */
static void test_parked_bounded(void **state)
{
	struct fx *f = *state;
	struct dpg_store_server_stats st;
	char last[1100] = "";
	int fds[6], i, errs = 0, per_conn = 0, total = 0;
	unsigned j;

	for (i = 0; i < 6; i++) {
		fds[i] = raw_connect(f->port);
		assert_int_equal(raw_auth(fds[i], SECRET), 0);
		for (j = 1; j <= 5; j++)
			send_hoard(fds[i], j, (unsigned)i);
		j = (unsigned)hoard_errors(fds[i], last, sizeof(last));
		if (j > 0 && strstr(last, "on this connection") != NULL)
			per_conn++;
		if (j > 0 && strstr(last, "in all") != NULL)
			total++;
		errs += (int)j;
		dpg_store_server_stats(f->srv, &st);
		assert_true(st.parked_bytes <= DPG_STORE_PARKED_BYTES);
	}
	fprintf(stderr, "parked: %zu requests, %zu bytes; %d errors, last: %s\n", st.parked,
		st.parked_bytes, errs, last);
	assert_true(errs > 0);
	assert_true(per_conn > 0);
	assert_true(total > 0);
	assert_true(st.parked > 0);
	assert_serving(f->port);
	for (i = 0; i < 6; i++)
		close(fds[i]);
	for (i = 0; i < 200; i++) {
		dpg_store_server_stats(f->srv, &st);
		if (st.parked == 0)
			break;
		usleep(10000);
	}
	assert_int_equal(st.parked, 0);
	assert_int_equal(st.parked_bytes, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sha256_vectors),
		cmocka_unit_test(test_hmac_rfc4231),
		cmocka_unit_test(test_secret_parse),
		cmocka_unit_test_setup_teardown(test_set_get, setup, teardown),
		cmocka_unit_test_setup_teardown(test_add, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cas, setup, teardown),
		cmocka_unit_test_setup_teardown(test_get_blocks_until_set, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wait_multi, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_adds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_barrier, setup, teardown),
		cmocka_unit_test_setup_teardown(test_get_timeout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_abort_flag, setup, teardown),
		cmocka_unit_test(test_connect_retries),
		cmocka_unit_test(test_server_stop_wakes_clients),
		cmocka_unit_test_setup_teardown(test_wrong_secret, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unauthenticated_garbage, setup, teardown),
		cmocka_unit_test(test_auth_timeout),
		cmocka_unit_test_setup_teardown(test_auth_timeout_default, setup, teardown),
		cmocka_unit_test_setup_teardown(test_malformed_after_auth, setup, teardown),
		cmocka_unit_test_setup_teardown(test_client_killed_mid_request, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fork_holds_server_fds, setup, teardown),
		cmocka_unit_test(test_client_refuses_fake_server),
		cmocka_unit_test(test_stranger_flood),
		cmocka_unit_test_setup_teardown(test_parked_bounded, setup, teardown),
	};

	int rc;

	signal(SIGPIPE, SIG_IGN);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	cap_restore();
	return rc;
}
