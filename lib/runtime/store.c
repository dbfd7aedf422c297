/* store.c - the rendezvous store: one epoll thread serving every client over
 * a versioned little-endian protocol, HMAC challenge-response, blocking clients.
 *
 * Wire format (all integers little-endian, whatever the host):
 *   header, 16 bytes: magic u32 = 0x53475044 ("DPGS" on the wire), version u8
 *   = 1, op u8, flags u16, id u32, body length u32.  In a request flags must
 *   be 0; a reply has op = request op | 0x80, the request's id, and its status
 *   in flags (0 ok, 1 error with a text body, 2 authentication refused).
 *   A key or a length-prefixed field is u32 length + bytes; a "rest" field
 *   runs to the end of the body; bodies must be consumed exactly.
 *     HELLO  s->c  nonce[32]                    (sent on accept, id 0)
 *     AUTH   c->s  client nonce[32] mac[32]     reply: server mac[32]
 *     SET    key, value(rest)                   reply: empty
 *     GET    key                                reply: value   (parks until set)
 *     ADD    key, delta i64                     reply: new value i64
 *     CAS    key, expected(u32 len + bytes), desired(rest)
 *                                               reply: exists u8, value(rest)
 *     WAIT   count u32, count x key             reply: empty   (parks)
 *     DEL    key                                reply: existed u8
 *     CANCEL id u32 (a timed-out request)       no reply
 *   ADD keeps its integer as decimal ASCII text ("-12"), so GET of a counter
 *   returns readable text and CAS can compare it; ADD on a value that is not
 *   such a number answers an error.
 *
 * Authentication: the raw secret never crosses the wire.  On accept the server
 * sends nonce Ns; the client answers Nc and HMAC-SHA256(secret, "dpg-store-v1
 * client" || Ns || Nc); the server checks it in constant time and answers
 * HMAC-SHA256(secret, "dpg-store-v1 server" || Ns || Nc), which the client
 * checks too, so neither side trusts a peer that does not know the secret.
 * Until then a connection may send only those 80 bytes, within
 * DPG_STORE_AUTH_TIMEOUT_MS (default 10 s) of its accept.
 *
 * Limits (checked on the header, before any allocation): key 1..512 bytes,
 * value <= 8 MiB, WAIT <= 4096 keys, 1M keys (pending GET/WAIT keys count),
 * 1 GiB of values in all, 1024 parked requests per connection.  A peer that
 * breaks the protocol is closed and logged on stderr ("dpg store: refused" /
 * "dpg store: dropped", at most 20 lines a second); breaking a limit that is
 * not a protocol error (store full, ADD on text) is an error reply instead.
 *
 * Barrier(name, n): c = ADD(name/count, 1) counts arrivals forever; arrival c
 * belongs to generation g = (c - 1) / n.  The n-th arrival of a generation
 * (c % n == 0) sets name/done/<g> and deletes name/done/<g-1> (everyone has
 * left that one, since they all arrived at g); the others WAIT for
 * name/done/<g>.  So the barrier is reusable with the same n participants.
 *
 * A client handle serves one thread at a time (a timed-out request is
 * cancelled and its late reply skipped by id, so the handle stays usable).
 * Clients wait in poll() until their deadline, in 100 ms slices only when
 * they have an abort flag to watch.  stop() in a forked child does nothing:
 * the server thread, epoll set and eventfd belong to the parent. */
#include "parse.h"	/* dpg_parse_ulong, dpg_hex_digit */
#include "store.h"
#include "dpg.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "net.h"
#include "sha256.h"

/* ------------------------------------------------------------ protocol */

#define WIRE_MAGIC 0x53475044u
#define WIRE_VERSION 1
#define HDR_LEN 16
#define NONCE_LEN 32
#define MAC_LEN DPG_SHA256_LEN

enum {
	OP_HELLO = 1, OP_AUTH, OP_SET, OP_GET, OP_ADD, OP_CAS, OP_WAIT, OP_DEL,
	OP_CANCEL, OP_MAX = OP_CANCEL
};
#define OP_REPLY 0x80

enum { ST_OK = 0, ST_ERROR = 1, ST_REFUSED = 2 };

#define LABEL_CLIENT "dpg-store-v1 client"
#define LABEL_SERVER "dpg-store-v1 server"

#define SECRET_MIN 16
#define WAIT_MAX_KEYS 4096
#define MAX_KEYS (1u << 20)
#define MAX_VALUE_BYTES ((size_t)1 << 30)
#define MAX_PARKED 1024
#define ERRMSG_MAX 1024			/* body of an error reply */
#define OUT_SOFT ((size_t)1 << 20)	/* stop reading a peer that does not read */
#define AUTH_TIMEOUT_DEFAULT_MS 10000
#define LOG_PER_SEC 20

struct hdr {
	uint32_t magic;
	uint8_t version, op;
	uint16_t flags;
	uint32_t id, len;
};

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)v);
	put16(p + 2, (uint16_t)(v >> 16));
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)get16(p) | (uint32_t)get16(p + 2) << 16;
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static void hdr_put(uint8_t *p, uint8_t op, uint16_t flags, uint32_t id, uint32_t len)
{
	put32(p, WIRE_MAGIC);
	p[4] = WIRE_VERSION;
	p[5] = op;
	put16(p + 6, flags);
	put32(p + 8, id);
	put32(p + 12, len);
}

static void hdr_get(const uint8_t *p, struct hdr *h)
{
	h->magic = get32(p);
	h->version = p[4];
	h->op = p[5];
	h->flags = get16(p + 6);
	h->id = get32(p + 8);
	h->len = get32(p + 12);
}

/* Largest body a request of this op may have (0: op not valid as a request). */
static uint32_t op_body_max(uint8_t op)
{
	switch (op) {
	case OP_AUTH:
		return NONCE_LEN + MAC_LEN;
	case OP_SET:
		return 4 + DPG_STORE_KEY_MAX + DPG_STORE_VALUE_MAX;
	case OP_GET:
	case OP_DEL:
		return 4 + DPG_STORE_KEY_MAX;
	case OP_ADD:
		return 4 + DPG_STORE_KEY_MAX + 8;
	case OP_CAS:
		return 8 + DPG_STORE_KEY_MAX + 2 * DPG_STORE_VALUE_MAX;
	case OP_WAIT:
		return 4 + WAIT_MAX_KEYS * (4 + DPG_STORE_KEY_MAX);
	case OP_CANCEL:
		return 4;
	default:
		return 0;
	}
}

static const char *op_name(uint8_t op)
{
	static const char *const names[] = {
		"?", "HELLO", "AUTH", "SET", "GET", "ADD", "CAS", "WAIT", "DEL", "CANCEL"
	};

	return op <= OP_MAX ? names[op] : "?";
}

static int fill_random(void *buf, size_t n)
{
	uint8_t *p = buf;

	while (n > 0) {
		ssize_t r = getrandom(p, n, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
			ssize_t got = fd < 0 ? -1 : read(fd, p, n);

			if (fd >= 0)
				close(fd);
			return got == (ssize_t)n ? 0 : -1;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* HMAC(secret, label || ns || nc), from a context already keyed with secret. */
static void auth_mac(const struct dpg_hmac_sha256 *keyed, const char *label,
		     const uint8_t *ns, const uint8_t *nc, uint8_t out[MAC_LEN])
{
	struct dpg_hmac_sha256 c = *keyed;

	dpg_hmac_sha256_update(&c, label, strlen(label));
	dpg_hmac_sha256_update(&c, ns, NONCE_LEN);
	dpg_hmac_sha256_update(&c, nc, NONCE_LEN);
	dpg_hmac_sha256_final(&c, out);
}

static int check_secret(const uint8_t *secret, size_t len, struct dpg_err *err)
{
	if (secret == NULL || len < SECRET_MIN || len > DPG_STORE_SECRET_MAX)
		return dpg_errf(err, "store: the job secret must be %d..%d bytes, not %zu",
				SECRET_MIN, DPG_STORE_SECRET_MAX, secret == NULL ? 0 : len);
	return 0;
}

/* Strict decimal int64 ("-12"; no spaces, no "+", no leading junk). */
static bool parse_i64(const uint8_t *p, size_t n, int64_t *out)
{
	uint64_t v = 0, lim;
	bool neg = false;
	size_t i = 0;

	if (n > 0 && p[0] == '-') {
		neg = true;
		i = 1;
	}
	if (i == n || n > 20)
		return false;
	lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	for (; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		if (v > (lim - (uint64_t)(p[i] - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(p[i] - '0');
	}
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return true;
}

/* ------------------------------------------------------------ server data */

struct dl {
	struct dl *prev, *next;
};

#define container_of(p, T, m) ((T *)(void *)((char *)(p) - offsetof(T, m)))

static void dl_init(struct dl *h)
{
	h->prev = h->next = h;
}

static bool dl_empty(const struct dl *h)
{
	return h->next == h;
}

static void dl_add_tail(struct dl *h, struct dl *n)
{
	n->prev = h->prev;
	n->next = h;
	h->prev->next = n;
	h->prev = n;
}

static void dl_del(struct dl *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = n;
}

/* A value, shared by the table and by replies still queued for sending. */
struct blob {
	uint32_t refs;
	uint32_t len;
	uint8_t data[];
};

struct entry {
	struct entry *hnext;
	uint64_t hash;
	struct blob *val;		/* NULL: a key someone waits for */
	struct dl waiters;		/* struct wlink.node */
	uint32_t klen;
	char key[];			/* NUL-terminated */
};

struct wreq;
struct wlink {
	struct dl node;			/* in entry->waiters */
	struct entry *e;		/* NULL once the key is set */
	struct wreq *req;
};

/* A parked GET or WAIT. */
struct wreq {
	struct dl node;			/* in conn->parked */
	struct conn *c;
	uint32_t id;
	uint8_t op;
	uint32_t missing, nlinks;
	struct wlink links[];
};

/* Queued output: inline bytes, or a reference to a value. */
struct oseg {
	struct oseg *next;
	struct blob *ref;
	uint32_t off, len, cap;
	uint8_t data[];
};

#define OSEG_CAP 2048
#define REF_MIN 1024			/* values at least this long go by reference */

enum { CS_AUTH, CS_READY, CS_REFUSING };

struct conn {
	int fd;
	uint8_t state;
	bool dead;			/* close at the next flush */
	bool closed;			/* closed; freed at the end of the loop turn */
	struct conn *gnext;		/* server->graveyard */
	bool in_flush;
	uint32_t events;		/* epoll mask registered */
	struct dl all;			/* server->conns */
	struct dl unauth;		/* server->unauth while not CS_READY */
	struct conn *fnext;		/* server->flush */
	int64_t auth_deadline;
	uint8_t nonce[NONCE_LEN];
	uint8_t *rbuf;
	size_t rlen, rcap;
	struct oseg *ohead, *otail;
	size_t obytes;
	struct dl parked;		/* struct wreq.node */
	uint32_t nparked;
	char peer[32];
};

struct table {
	struct entry **b;
	size_t nb, n;
	uint64_t seed;
};

struct dpg_store_server {
	pthread_t th;
	bool started;
	pid_t pid;			/* of the process that started it */
	int lfd, epfd, wakefd, sparefd;
	uint16_t port;
	int64_t auth_timeout_ms;
	struct dpg_hmac_sha256 keyed;
	struct table t;
	size_t value_bytes;
	struct dl conns, unauth;
	struct conn *flush;
	struct conn *graveyard;		/* closed, to free after the batch */
	/* log rate limiting */
	int64_t log_sec;
	unsigned log_lines;
	unsigned long log_dropped;
};

static char tag_listen, tag_wake;	/* epoll data for the two non-conn fds */

static void slog(struct dpg_store_server *s, const char *verb, const char *peer,
		 const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void slog(struct dpg_store_server *s, const char *verb, const char *peer,
		 const char *fmt, ...)
{
	int64_t sec = dpg_now_ms() / 1000;
	char msg[512];
	va_list ap;

	if (sec != s->log_sec) {
		if (s->log_dropped > 0)
			fprintf(stderr, "dpg store: %lu more log lines suppressed\n",
				s->log_dropped);
		s->log_sec = sec;
		s->log_lines = 0;
		s->log_dropped = 0;
	}
	if (++s->log_lines > LOG_PER_SEC) {
		s->log_dropped++;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "dpg store: %s %s: %s\n", verb, peer, msg);
}

/* ------------------------------------------------------------ hash table */

static uint64_t key_hash(const struct table *t, const uint8_t *k, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull ^ t->seed;	/* FNV-1a, seeded */
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= k[i];
		h *= 0x100000001b3ull;
	}
	return h ^ (h >> 29);
}

static struct entry *table_find(const struct table *t, const uint8_t *k, size_t n,
				uint64_t h)
{
	struct entry *e;

	if (t->nb == 0)
		return NULL;
	for (e = t->b[h & (t->nb - 1)]; e != NULL; e = e->hnext)
		if (e->hash == h && e->klen == n && memcmp(e->key, k, n) == 0)
			return e;
	return NULL;
}

static int table_grow(struct table *t)
{
	size_t nb = t->nb ? t->nb * 2 : 1024, i;
	struct entry **b = calloc(nb, sizeof(*b));

	if (b == NULL)
		return -1;
	for (i = 0; i < t->nb; i++) {
		struct entry *e = t->b[i], *next;

		for (; e != NULL; e = next) {
			next = e->hnext;
			e->hnext = b[e->hash & (nb - 1)];
			b[e->hash & (nb - 1)] = e;
		}
	}
	free(t->b);
	t->b = b;
	t->nb = nb;
	return 0;
}

/* Find key or add it as a pending (valueless) entry; NULL when full. */
static struct entry *table_get_or_add(struct table *t, const uint8_t *k, size_t n)
{
	uint64_t h = key_hash(t, k, n);
	struct entry *e = table_find(t, k, n, h);

	if (e != NULL)
		return e;
	if (t->n >= MAX_KEYS || (t->n >= t->nb && table_grow(t) != 0))
		return NULL;
	e = malloc(sizeof(*e) + n + 1);
	if (e == NULL)
		return NULL;
	e->hash = h;
	e->val = NULL;
	dl_init(&e->waiters);
	e->klen = (uint32_t)n;
	memcpy(e->key, k, n);
	e->key[n] = '\0';
	e->hnext = t->b[h & (t->nb - 1)];
	t->b[h & (t->nb - 1)] = e;
	t->n++;
	return e;
}

static void blob_unref(struct blob *b)
{
	if (b != NULL && --b->refs == 0)
		free(b);
}

static void table_remove(struct dpg_store_server *s, struct entry *e)
{
	struct table *t = &s->t;
	struct entry **pp = &t->b[e->hash & (t->nb - 1)];

	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	t->n--;
	if (e->val != NULL) {
		s->value_bytes -= e->val->len;
		blob_unref(e->val);
	}
	free(e);
}

/* Drop an entry nobody needs any more (no value, no waiter). */
static void entry_gc(struct dpg_store_server *s, struct entry *e)
{
	if (e->val == NULL && dl_empty(&e->waiters))
		table_remove(s, e);
}

/* ------------------------------------------------------------ output */

static void flush_schedule(struct dpg_store_server *s, struct conn *c)
{
	if (!c->in_flush && !c->closed) {
		c->in_flush = true;
		c->fnext = s->flush;
		s->flush = c;
	}
}

static uint8_t *out_inline(struct conn *c, size_t n)
{
	struct oseg *g = c->otail;
	uint8_t *p;

	if (g == NULL || g->ref != NULL || g->cap - g->len < n) {
		size_t cap = n > OSEG_CAP ? n : OSEG_CAP;

		g = malloc(sizeof(*g) + cap);
		if (g == NULL)
			return NULL;
		g->next = NULL;
		g->ref = NULL;
		g->off = g->len = 0;
		g->cap = (uint32_t)cap;
		if (c->otail != NULL)
			c->otail->next = g;
		else
			c->ohead = g;
		c->otail = g;
	}
	p = g->data + g->len;
	g->len += (uint32_t)n;
	c->obytes += n;
	return p;
}

static int out_ref(struct conn *c, struct blob *b)
{
	struct oseg *g = malloc(sizeof(*g));

	if (g == NULL)
		return -1;
	g->next = NULL;
	g->ref = b;
	b->refs++;
	g->off = 0;
	g->len = g->cap = b->len;
	if (c->otail != NULL)
		c->otail->next = g;
	else
		c->ohead = g;
	c->otail = g;
	c->obytes += b->len;
	return 0;
}

/* Queue a message: header, then pre (inline), then val (by reference or copy). */
static void queue_msg(struct dpg_store_server *s, struct conn *c, uint8_t op,
		      uint16_t st, uint32_t id, const void *pre, size_t plen,
		      struct blob *val)
{
	size_t vlen = val != NULL ? val->len : 0;
	bool byref = vlen >= REF_MIN;
	uint8_t *p;

	if (c->dead || c->closed)
		return;
	p = out_inline(c, HDR_LEN + plen + (byref ? 0 : vlen));
	if (p == NULL)
		goto oom;
	hdr_put(p, op, st, id, (uint32_t)(plen + vlen));
	if (plen > 0)
		memcpy(p + HDR_LEN, pre, plen);
	if (vlen > 0 && !byref)
		memcpy(p + HDR_LEN + plen, val->data, vlen);
	if (byref && out_ref(c, val) != 0)
		goto oom;
	flush_schedule(s, c);
	return;
oom:
	slog(s, "dropped", c->peer, "out of memory queueing a reply");
	c->dead = true;
	flush_schedule(s, c);
}

static void reply(struct dpg_store_server *s, struct conn *c, uint8_t op, uint16_t st,
		  uint32_t id, const void *pre, size_t plen, struct blob *val)
{
	queue_msg(s, c, op | OP_REPLY, st, id, pre, plen, val);
}

static void reply_err(struct dpg_store_server *s, struct conn *c, uint8_t op,
		      uint32_t id, const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void reply_err(struct dpg_store_server *s, struct conn *c, uint8_t op,
		      uint32_t id, const char *fmt, ...)
{
	char msg[ERRMSG_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(msg))
		n = sizeof(msg) - 1;
	reply(s, c, op, ST_ERROR, id, msg, (size_t)n, NULL);
}

/* ------------------------------------------------------------ connections */

static void conn_update_events(struct dpg_store_server *s, struct conn *c)
{
	uint32_t want = 0;

	if (c->state != CS_REFUSING && c->obytes <= OUT_SOFT)
		want |= EPOLLIN;
	if (c->ohead != NULL)
		want |= EPOLLOUT;
	if (want != c->events) {
		struct epoll_event ev = { .events = want, .data.ptr = c };

		if (epoll_ctl(s->epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0)
			c->events = want;
	}
}

static void wreq_free(struct dpg_store_server *s, struct wreq *r)
{
	uint32_t i;

	for (i = 0; i < r->nlinks; i++) {
		struct entry *e = r->links[i].e;

		if (e != NULL) {
			dl_del(&r->links[i].node);
			r->links[i].e = NULL;
			entry_gc(s, e);
		}
	}
	dl_del(&r->node);
	r->c->nparked--;
	free(r);
}

static void conn_close(struct dpg_store_server *s, struct conn *c)
{
	struct oseg *g, *next;

	while (!dl_empty(&c->parked))
		wreq_free(s, container_of(c->parked.next, struct wreq, node));
	for (g = c->ohead; g != NULL; g = next) {
		next = g->next;
		blob_unref(g->ref);
		free(g);
	}
	if (c->in_flush) {
		struct conn **pp = &s->flush;

		while (*pp != c)
			pp = &(*pp)->fnext;
		*pp = c->fnext;
	}
	dl_del(&c->all);
	dl_del(&c->unauth);
	/* explicitly: a forked child may hold a copy of the socket, and epoll
	 * forgets a descriptor only when every copy is closed */
	epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	free(c->rbuf);
	c->rbuf = NULL;
	/* Other events of this epoll_wait batch may still point at c (a
	 * reply to one client can close another): free it after the batch. */
	c->closed = true;
	c->gnext = s->graveyard;
	s->graveyard = c;
}

static void bury(struct dpg_store_server *s)
{
	while (s->graveyard != NULL) {
		struct conn *c = s->graveyard;

		s->graveyard = c->gnext;
		free(c);
	}
}

/* Send what can be sent now; false if the connection was closed. */
static bool conn_flush(struct dpg_store_server *s, struct conn *c)
{
	while (!c->dead && c->ohead != NULL) {
		struct iovec iov[64];
		struct msghdr m = { .msg_iov = iov };
		struct oseg *g;
		ssize_t n;

		for (g = c->ohead; g != NULL && m.msg_iovlen < 64; g = g->next) {
			iov[m.msg_iovlen].iov_base = (g->ref ? g->ref->data : g->data) + g->off;
			iov[m.msg_iovlen].iov_len = g->len - g->off;
			m.msg_iovlen++;
		}
		n = sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n < 0) {
			c->dead = true;		/* peer gone: nothing to log */
			break;
		}
		c->obytes -= (size_t)n;
		while (n > 0) {
			size_t left = c->ohead->len - c->ohead->off;

			g = c->ohead;
			if ((size_t)n < left) {
				g->off += (uint32_t)n;
				break;
			}
			n -= (ssize_t)left;
			c->ohead = g->next;
			if (c->ohead == NULL)
				c->otail = NULL;
			blob_unref(g->ref);
			free(g);
		}
	}
	if (c->dead || (c->state == CS_REFUSING && c->ohead == NULL)) {
		conn_close(s, c);
		return false;
	}
	conn_update_events(s, c);
	return true;
}

static void do_accept(struct dpg_store_server *s)
{
	int i;

	for (i = 0; i < 512; i++) {
		struct sockaddr_in sa;
		socklen_t sl = sizeof(sa);
		struct epoll_event ev;
		struct conn *c;
		char ip[INET_ADDRSTRLEN];
		int one = 1;
		int fd = accept4(s->lfd, (struct sockaddr *)&sa, &sl,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if ((errno == EMFILE || errno == ENFILE) && s->sparefd >= 0) {
				/* free a descriptor to accept and shed the peer,
				 * else it would stay in the backlog, waking us forever */
				close(s->sparefd);
				fd = accept4(s->lfd, (struct sockaddr *)&sa, &sl, SOCK_CLOEXEC);
				if (fd >= 0) {
					char p[32];

					dpg_net_peer_name(fd, p, sizeof(p));
					slog(s, "refused", p, "out of file descriptors "
					     "(raise the open-files limit)");
					close(fd);
				}
				s->sparefd = open("/dev/null", O_RDONLY | O_CLOEXEC);
				continue;
			}
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				slog(s, "refused", "?", "accept: %s", strerror(errno));
			return;
		}
		c = calloc(1, sizeof(*c));
		if (c == NULL || fill_random(c->nonce, NONCE_LEN) != 0) {
			slog(s, "refused", "?", "out of memory or randomness");
			free(c);
			close(fd);
			continue;
		}
		c->fd = fd;
		c->state = CS_AUTH;
		dl_init(&c->parked);
		if (sa.sin_family == AF_INET &&
		    inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof(ip)) != NULL)
			snprintf(c->peer, sizeof(c->peer), "%s:%u", ip,
				 (unsigned)ntohs(sa.sin_port));
		else
			snprintf(c->peer, sizeof(c->peer), "?");
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		ev.events = EPOLLIN;
		ev.data.ptr = c;
		if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
			slog(s, "refused", c->peer, "epoll_ctl: %s", strerror(errno));
			close(fd);
			free(c);
			continue;
		}
		c->events = EPOLLIN;
		dl_add_tail(&s->conns, &c->all);
		c->auth_deadline = dpg_now_ms() + s->auth_timeout_ms;
		dl_add_tail(&s->unauth, &c->unauth);
		queue_msg(s, c, OP_HELLO, ST_OK, 0, c->nonce, NONCE_LEN, NULL);
	}
}

/* ------------------------------------------------------------ operations */

/* Body cursor: every read is bounds-checked; any failure makes it bad. */
struct cur {
	const uint8_t *p;
	size_t n;
	bool bad;
};

static const uint8_t *cur_take(struct cur *k, size_t n)
{
	const uint8_t *p = k->p;

	if (k->bad || k->n < n) {
		k->bad = true;
		return NULL;
	}
	k->p += n;
	k->n -= n;
	return p;
}

static uint32_t cur_u32(struct cur *k)
{
	const uint8_t *p = cur_take(k, 4);

	return p ? get32(p) : 0;
}

/* A key: u32 length (1..KEY_MAX, no NUL bytes) + bytes. */
static const uint8_t *cur_key(struct cur *k, size_t *len)
{
	uint32_t n = cur_u32(k);
	const uint8_t *p;

	if (n == 0 || n > DPG_STORE_KEY_MAX) {
		k->bad = true;
		return NULL;
	}
	p = cur_take(k, n);
	if (p != NULL && memchr(p, '\0', n) != NULL) {
		k->bad = true;
		return NULL;
	}
	*len = n;
	return p;
}

static const char *qkey(const uint8_t *k, size_t n, char *buf, size_t len)
{
	char raw[DPG_STORE_KEY_MAX + 1];

	memcpy(raw, k, n);
	raw[n] = '\0';
	return dpg_err_quote(raw, buf, len);
}

/* Answer a parked request whose keys are all set. */
static void wreq_answer(struct dpg_store_server *s, struct wreq *r, struct entry *last)
{
	if (r->op == OP_GET)
		reply(s, r->c, OP_GET, ST_OK, r->id, NULL, 0, last->val);
	else
		reply(s, r->c, OP_WAIT, ST_OK, r->id, NULL, 0, NULL);
	wreq_free(s, r);
}

/* Store val under e (taking our reference) and wake its waiters. */
static void entry_set(struct dpg_store_server *s, struct entry *e, struct blob *val)
{
	if (e->val != NULL) {
		s->value_bytes -= e->val->len;
		blob_unref(e->val);
	}
	e->val = val;
	s->value_bytes += val->len;
	while (!dl_empty(&e->waiters)) {
		struct wlink *l = container_of(e->waiters.next, struct wlink, node);
		struct wreq *r = l->req;

		dl_del(&l->node);
		l->e = NULL;
		if (--r->missing == 0)
			wreq_answer(s, r, e);
	}
}

static struct blob *blob_new(const void *data, size_t n)
{
	struct blob *b = malloc(sizeof(*b) + n);

	if (b != NULL) {
		b->refs = 1;
		b->len = (uint32_t)n;
		if (n > 0)
			memcpy(b->data, data, n);
	}
	return b;
}

/* Set key to data, or answer an error; returns the entry or NULL. */
static struct entry *store_put(struct dpg_store_server *s, struct conn *c, uint8_t op,
			       uint32_t id, const uint8_t *k, size_t klen,
			       const void *data, size_t n)
{
	struct entry *e = table_get_or_add(&s->t, k, klen);
	size_t old = e != NULL && e->val != NULL ? e->val->len : 0;
	struct blob *b;
	char q[128];

	if (e == NULL) {
		reply_err(s, c, op, id, "the store is full (%u keys): cannot add key '%s'",
			  MAX_KEYS, qkey(k, klen, q, sizeof(q)));
		return NULL;
	}
	if (s->value_bytes - old + n > MAX_VALUE_BYTES) {
		entry_gc(s, e);
		reply_err(s, c, op, id, "the store is full (%zu MiB of values): cannot "
			  "set key '%s'", MAX_VALUE_BYTES >> 20, qkey(k, klen, q, sizeof(q)));
		return NULL;
	}
	b = blob_new(data, n);
	if (b == NULL) {
		entry_gc(s, e);
		reply_err(s, c, op, id, "the store is out of memory");
		return NULL;
	}
	entry_set(s, e, b);
	return e;
}

/* Park request id for the keys listed (those already set are skipped). */
static int park(struct dpg_store_server *s, struct conn *c, uint8_t op, uint32_t id,
		const uint8_t *const *keys, const size_t *klens, uint32_t n, uint32_t missing)
{
	struct wreq *r;
	uint32_t i;

	if (c->nparked >= MAX_PARKED)
		return -1;
	r = calloc(1, sizeof(*r) + missing * sizeof(r->links[0]));
	if (r == NULL) {
		reply_err(s, c, op, id, "the store is out of memory");
		return 0;
	}
	r->c = c;
	r->id = id;
	r->op = op;
	dl_add_tail(&c->parked, &r->node);
	c->nparked++;
	for (i = 0; i < n; i++) {
		struct entry *e = table_get_or_add(&s->t, keys[i], klens[i]);
		struct wlink *l;
		char q[128];

		if (e != NULL && e->val != NULL)
			continue;
		if (e == NULL) {
			wreq_free(s, r);
			reply_err(s, c, op, id, "the store is full (%u keys): cannot wait "
				  "for key '%s'", MAX_KEYS, qkey(keys[i], klens[i], q, sizeof(q)));
			return 0;
		}
		l = &r->links[r->nlinks++];
		l->e = e;
		l->req = r;
		dl_add_tail(&e->waiters, &l->node);
		r->missing++;
	}
	return 0;
}

/* Handle one authenticated request; -1 = protocol violation (why filled). */
static int handle(struct dpg_store_server *s, struct conn *c, const struct hdr *h,
		  const uint8_t *body, char *why, size_t wlen)
{
	struct cur k = { body, h->len, false };
	const uint8_t *key = NULL, *p;
	size_t klen = 0;
	char q[128];

	switch (h->op) {
	case OP_SET:
		key = cur_key(&k, &klen);
		if (k.bad || k.n > DPG_STORE_VALUE_MAX)
			break;
		if (store_put(s, c, OP_SET, h->id, key, klen, k.p, k.n) != NULL)
			reply(s, c, OP_SET, ST_OK, h->id, NULL, 0, NULL);
		return 0;
	case OP_GET: {
		struct entry *e;

		key = cur_key(&k, &klen);
		if (k.bad || k.n != 0)
			break;
		e = table_find(&s->t, key, klen, key_hash(&s->t, key, klen));
		if (e != NULL && e->val != NULL) {
			reply(s, c, OP_GET, ST_OK, h->id, NULL, 0, e->val);
			return 0;
		}
		if (park(s, c, OP_GET, h->id, &key, &klen, 1, 1) != 0)
			goto too_many;
		return 0;
	}
	case OP_ADD: {
		struct entry *e;
		int64_t delta, cur = 0, res;
		uint8_t out[8];
		char txt[24];
		int n;

		key = cur_key(&k, &klen);
		p = cur_take(&k, 8);
		if (k.bad || k.n != 0)
			break;
		delta = (int64_t)get64(p);
		e = table_find(&s->t, key, klen, key_hash(&s->t, key, klen));
		if (e != NULL && e->val != NULL &&
		    !parse_i64(e->val->data, e->val->len, &cur)) {
			reply_err(s, c, OP_ADD, h->id, "ADD: the value of key '%s' is not "
				  "a decimal integer", qkey(key, klen, q, sizeof(q)));
			return 0;
		}
		if (__builtin_add_overflow(cur, delta, &res)) {
			reply_err(s, c, OP_ADD, h->id, "ADD: key '%s' would overflow int64",
				  qkey(key, klen, q, sizeof(q)));
			return 0;
		}
		n = snprintf(txt, sizeof(txt), "%" PRId64, res);
		if (store_put(s, c, OP_ADD, h->id, key, klen, txt, (size_t)n) != NULL) {
			put64(out, (uint64_t)res);
			reply(s, c, OP_ADD, ST_OK, h->id, out, 8, NULL);
		}
		return 0;
	}
	case OP_CAS: {
		struct entry *e;
		const uint8_t *exp;
		uint32_t elen;
		uint8_t exists;

		key = cur_key(&k, &klen);
		elen = cur_u32(&k);
		if (k.bad || elen > DPG_STORE_VALUE_MAX || k.n - elen > DPG_STORE_VALUE_MAX)
			break;
		exp = cur_take(&k, elen);
		if (k.bad)
			break;
		e = table_find(&s->t, key, klen, key_hash(&s->t, key, klen));
		if (e != NULL && e->val != NULL ?
		    e->val->len == elen && memcmp(e->val->data, exp, elen) == 0 :
		    elen == 0) {
			e = store_put(s, c, OP_CAS, h->id, key, klen, k.p, k.n);
			if (e == NULL)
				return 0;
		}
		exists = e != NULL && e->val != NULL;
		reply(s, c, OP_CAS, ST_OK, h->id, &exists, 1, exists ? e->val : NULL);
		return 0;
	}
	case OP_WAIT: {
		uint32_t n = cur_u32(&k), i, missing = 0;
		const uint8_t **keys;
		size_t *klens;
		int rc;

		if (k.bad || n == 0 || n > WAIT_MAX_KEYS)
			break;
		keys = malloc(n * sizeof(*keys));
		klens = malloc(n * sizeof(*klens));
		if (keys == NULL || klens == NULL) {
			free(keys);
			free(klens);
			reply_err(s, c, OP_WAIT, h->id, "the store is out of memory");
			return 0;
		}
		for (i = 0; i < n && !k.bad; i++) {
			struct entry *e;

			keys[i] = cur_key(&k, &klens[i]);
			if (k.bad)
				break;
			e = table_find(&s->t, keys[i], klens[i],
				       key_hash(&s->t, keys[i], klens[i]));
			if (e == NULL || e->val == NULL)
				missing++;
		}
		if (k.bad || k.n != 0) {
			free(keys);
			free(klens);
			break;
		}
		rc = 0;
		if (missing == 0)
			reply(s, c, OP_WAIT, ST_OK, h->id, NULL, 0, NULL);
		else
			rc = park(s, c, OP_WAIT, h->id, keys, klens, n, missing);
		free(keys);
		free(klens);
		if (rc != 0)
			goto too_many;
		return 0;
	}
	case OP_DEL: {
		struct entry *e;
		uint8_t existed = 0;

		key = cur_key(&k, &klen);
		if (k.bad || k.n != 0)
			break;
		e = table_find(&s->t, key, klen, key_hash(&s->t, key, klen));
		if (e != NULL && e->val != NULL) {
			existed = 1;
			s->value_bytes -= e->val->len;
			blob_unref(e->val);
			e->val = NULL;
			entry_gc(s, e);
		}
		reply(s, c, OP_DEL, ST_OK, h->id, &existed, 1, NULL);
		return 0;
	}
	case OP_CANCEL: {
		uint32_t id = cur_u32(&k);
		struct dl *it;

		if (k.bad || k.n != 0)
			break;
		for (it = c->parked.next; it != &c->parked; it = it->next) {
			struct wreq *r = container_of(it, struct wreq, node);

			if (r->id == id) {
				wreq_free(s, r);
				break;
			}
		}
		return 0;
	}
	default:
		snprintf(why, wlen, "unexpected %s message after authentication",
			 op_name(h->op));
		return -1;
	}
	snprintf(why, wlen, "malformed %s body (%" PRIu32 " bytes)", op_name(h->op), h->len);
	return -1;
too_many:
	snprintf(why, wlen, "more than %d requests parked at once", MAX_PARKED);
	return -1;
}

static void handle_auth(struct dpg_store_server *s, struct conn *c, const struct hdr *h,
			const uint8_t *body)
{
	uint8_t want[MAC_LEN];

	auth_mac(&s->keyed, LABEL_CLIENT, c->nonce, body, want);
	if (!dpg_ct_equal(want, body + NONCE_LEN, MAC_LEN)) {
		static const char msg[] = "job secret mismatch";

		slog(s, "refused", c->peer, "wrong job secret (HMAC mismatch)");
		c->state = CS_REFUSING;	/* stays on the unauth timer until flushed */
		reply(s, c, OP_AUTH, ST_REFUSED, h->id, msg, sizeof(msg) - 1, NULL);
		return;
	}
	auth_mac(&s->keyed, LABEL_SERVER, c->nonce, body, want);
	c->state = CS_READY;
	dl_del(&c->unauth);
	reply(s, c, OP_AUTH, ST_OK, h->id, want, MAC_LEN, NULL);
}

/* Validate a header; NULL if fine, else why not. */
static const char *hdr_check(const struct conn *c, const struct hdr *h, char *why,
			     size_t wlen)
{
	uint32_t max;

	if (h->magic != WIRE_MAGIC) {
		snprintf(why, wlen, "bad magic 0x%08" PRIx32 " (not a dpg store client)",
			 h->magic);
		return why;
	}
	if (h->version != WIRE_VERSION) {
		snprintf(why, wlen, "protocol version %u, this server speaks %d",
			 h->version, WIRE_VERSION);
		return why;
	}
	if (c->state == CS_AUTH && h->op != OP_AUTH) {
		snprintf(why, wlen, "sent %s (op %u) before authenticating",
			 op_name(h->op), h->op);
		return why;
	}
	if (c->state == CS_READY && h->op == OP_AUTH) {
		snprintf(why, wlen, "AUTH sent twice");
		return why;
	}
	max = op_body_max(h->op);
	if (max == 0) {
		snprintf(why, wlen, "unknown op %u", h->op);
		return why;
	}
	if (h->flags != 0) {
		snprintf(why, wlen, "nonzero flags 0x%04x", h->flags);
		return why;
	}
	if (h->len > max || (h->op == OP_AUTH && h->len != max)) {
		snprintf(why, wlen, "%s body of %" PRIu32 " bytes (limit %" PRIu32 ")",
			 op_name(h->op), h->len, max);
		return why;
	}
	return NULL;
}

/* Read what is there and act on every complete message; false if closed. */
static bool conn_read(struct dpg_store_server *s, struct conn *c)
{
	const char *verb = c->state == CS_READY ? "dropped" : "refused";
	char why[160];
	int rounds;

	for (rounds = 0; rounds < 8 && c->state != CS_REFUSING && !c->dead; rounds++) {
		size_t want, off = 0;
		ssize_t n;
		struct hdr h;

		/* how much room: the current message if its header is in, else a
		 * chunk (but never past the auth message before authentication) */
		if (c->state == CS_AUTH) {
			want = HDR_LEN + NONCE_LEN + MAC_LEN;
		} else {
			want = 4096;
			if (c->rlen >= HDR_LEN) {	/* validated when it came in */
				hdr_get(c->rbuf, &h);
				if (HDR_LEN + (size_t)h.len > want)
					want = HDR_LEN + (size_t)h.len;
			}
		}
		if (want > c->rcap) {
			uint8_t *nb = realloc(c->rbuf, want);

			if (nb == NULL) {
				slog(s, verb, c->peer, "out of memory for a %zu-byte message",
				     want);
				goto close;
			}
			c->rbuf = nb;
			c->rcap = want;
		}
		if (c->state == CS_AUTH && c->rlen >= want)
			break;
		n = recv(c->fd, c->rbuf + c->rlen,
			 (c->state == CS_AUTH ? want : c->rcap) - c->rlen, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0) {
			if (c->state == CS_AUTH)
				slog(s, verb, c->peer, "closed the connection without "
				     "authenticating");
			else if (c->rlen > 0)
				slog(s, verb, c->peer, "closed the connection in the middle "
				     "of a message");
			goto close;
		}
		c->rlen += (size_t)n;
		while (c->rlen - off >= HDR_LEN && c->state != CS_REFUSING) {
			const uint8_t *m = c->rbuf + off;

			hdr_get(m, &h);
			if (hdr_check(c, &h, why, sizeof(why)) != NULL) {
				slog(s, verb, c->peer, "%s", why);
				goto close;
			}
			if (c->rlen - off < HDR_LEN + (size_t)h.len)
				break;
			if (c->state == CS_AUTH) {
				handle_auth(s, c, &h, m + HDR_LEN);
			} else if (handle(s, c, &h, m + HDR_LEN, why, sizeof(why)) != 0) {
				slog(s, verb, c->peer, "%s", why);
				goto close;
			}
			off += HDR_LEN + h.len;
			verb = c->state == CS_READY ? "dropped" : "refused";
		}
		if (off > 0) {
			memmove(c->rbuf, c->rbuf + off, c->rlen - off);
			c->rlen -= off;
		}
		if (c->rlen == 0 && c->rcap > 65536) {
			free(c->rbuf);
			c->rbuf = NULL;
			c->rcap = 0;
		}
		if (c->obytes > OUT_SOFT)
			break;		/* the peer is not reading: stop reading it */
	}
	conn_update_events(s, c);
	return true;
close:
	conn_close(s, c);
	return false;
}

static void expire_unauth(struct dpg_store_server *s, int64_t now)
{
	while (!dl_empty(&s->unauth)) {
		struct conn *c = container_of(s->unauth.next, struct conn, unauth);

		if (c->auth_deadline > now)
			break;
		if (c->state == CS_AUTH)
			slog(s, "refused", c->peer, "did not authenticate within %" PRId64
			     " ms", s->auth_timeout_ms);
		conn_close(s, c);
	}
}

static void *server_main(void *arg)
{
	struct dpg_store_server *s = arg;
	struct epoll_event evs[256];

	for (;;) {
		int timeout = -1, n, i;
		bool stop = false;

		if (!dl_empty(&s->unauth)) {
			struct conn *c = container_of(s->unauth.next, struct conn, unauth);
			int64_t left = c->auth_deadline - dpg_now_ms();

			timeout = left < 0 ? 0 : left > 60000 ? 60000 : (int)left + 1;
		}
		n = epoll_wait(s->epfd, evs, 256, timeout);
		if (n < 0 && errno != EINTR) {
			fprintf(stderr, "dpg store: epoll_wait: %s; the store stops\n",
				strerror(errno));
			break;
		}
		for (i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;
			struct conn *c = p;

			if (p == &tag_wake) {
				stop = true;
			} else if (p == &tag_listen) {
				do_accept(s);
			} else if (c->closed) {
				continue;
			} else if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
				if (c->events & EPOLLIN) {
					if (conn_read(s, c) && (evs[i].events & EPOLLOUT))
						flush_schedule(s, c);
				} else if (evs[i].events & (EPOLLHUP | EPOLLERR))
					conn_close(s, c);
				else
					flush_schedule(s, c);
			} else if (evs[i].events & EPOLLOUT) {
				flush_schedule(s, c);
			}
		}
		while (s->flush != NULL) {
			struct conn *c = s->flush;

			s->flush = c->fnext;
			c->in_flush = false;
			conn_flush(s, c);
		}
		expire_unauth(s, dpg_now_ms());
		bury(s);
		if (stop)
			break;
	}
	return NULL;
}

/* ------------------------------------------------------------ server API */

static void server_free(struct dpg_store_server *s)
{
	size_t i;

	while (!dl_empty(&s->conns))
		conn_close(s, container_of(s->conns.next, struct conn, all));
	bury(s);
	for (i = 0; i < s->t.nb; i++) {
		struct entry *e = s->t.b[i], *next;

		for (; e != NULL; e = next) {
			next = e->hnext;
			blob_unref(e->val);
			free(e);
		}
	}
	free(s->t.b);
	if (s->lfd >= 0)
		close(s->lfd);
	if (s->epfd >= 0)
		close(s->epfd);
	if (s->wakefd >= 0)
		close(s->wakefd);
	if (s->sparefd >= 0)
		close(s->sparefd);
	if (s->log_dropped > 0)
		fprintf(stderr, "dpg store: %lu more log lines suppressed\n", s->log_dropped);
	explicit_bzero(&s->keyed, sizeof(s->keyed));
	free(s);
}

static int64_t auth_timeout_from_env(void)
{
	const char *v = getenv("DPG_STORE_AUTH_TIMEOUT_MS");
	char *end;
	long long ms;

	if (v == NULL || *v == '\0')
		return AUTH_TIMEOUT_DEFAULT_MS;
	errno = 0;
	ms = strtoll(v, &end, 10);
	if (errno != 0 || *end != '\0' || ms < 1 || ms > 3600000) {
		fprintf(stderr, "dpg store: ignoring DPG_STORE_AUTH_TIMEOUT_MS='%s' "
			"(want 1..3600000); using %d\n", v, AUTH_TIMEOUT_DEFAULT_MS);
		return AUTH_TIMEOUT_DEFAULT_MS;
	}
	return ms;
}

int dpg_store_server_start(const char *addr, uint16_t port,
			   const uint8_t *secret, size_t secret_len,
			   struct dpg_store_server **out, struct dpg_err *err)
{
	struct dpg_store_server *s;
	struct epoll_event ev;
	int rc;

	if (check_secret(secret, secret_len, err) != 0)
		return -1;
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return dpg_errf(err, "store: out of memory");
	s->lfd = s->epfd = s->wakefd = -1;
	dl_init(&s->conns);
	dl_init(&s->unauth);
	s->auth_timeout_ms = auth_timeout_from_env();
	dpg_hmac_sha256_init(&s->keyed, secret, secret_len);
	if (fill_random(&s->t.seed, sizeof(s->t.seed)) != 0 || table_grow(&s->t) != 0) {
		server_free(s);
		return dpg_errf(err, "store: out of memory or randomness");
	}
	s->sparefd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	/* the kernel caps the backlog at net.core.somaxconn */
	if (dpg_net_listen(addr, port, 65535, &s->lfd, &s->port, err) != 0) {
		server_free(s);
		return dpg_err_prefix(err, "store");
	}
	dpg_net_set_nonblock(s->lfd, true);
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	s->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->epfd < 0 || s->wakefd < 0) {
		rc = errno;
		server_free(s);
		return dpg_errf(err, "store: epoll/eventfd: %s", strerror(rc));
	}
	ev.events = EPOLLIN;
	ev.data.ptr = &tag_listen;
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &ev) != 0) {
		rc = errno;
		server_free(s);
		return dpg_errf(err, "store: epoll_ctl: %s", strerror(rc));
	}
	ev.data.ptr = &tag_wake;
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->wakefd, &ev) != 0) {
		rc = errno;
		server_free(s);
		return dpg_errf(err, "store: epoll_ctl: %s", strerror(rc));
	}
	rc = pthread_create(&s->th, NULL, server_main, s);
	if (rc != 0) {
		server_free(s);
		return dpg_errf(err, "store: cannot start the server thread: %s", strerror(rc));
	}
	s->started = true;
	s->pid = getpid();
	*out = s;
	return 0;
}

uint16_t dpg_store_server_port(const struct dpg_store_server *s)
{
	return s->port;
}

void dpg_store_server_stop(struct dpg_store_server *s)
{
	uint64_t one = 1;

	if (s == NULL)
		return;
	/* in a forked child the thread does not exist and the epoll set and
	 * eventfd are the parent's: touch nothing (the copy is the child's) */
	if (s->started && getpid() != s->pid)
		return;
	if (s->started) {
		while (write(s->wakefd, &one, sizeof(one)) < 0 && errno == EINTR)
			;
		pthread_join(s->th, NULL);
	}
	server_free(s);
}

/* ------------------------------------------------------------ client */

struct dpg_store {
	int fd;
	bool broken;			/* the stream is out of step: unusable */
	uint32_t next_id;
	const volatile int *abort;
	struct dpg_hmac_sha256 keyed;
	uint8_t *rbuf;
	size_t rlen, rcap, rdone;	/* rdone: bytes of the last message handed out */
	char where[300];		/* "host:port" */
};

struct msg {
	struct hdr h;
	const uint8_t *body;
};

#define CLIENT_BODY_MAX (DPG_STORE_VALUE_MAX + 64)

/* The abort flag may be raised by a signal handler or another thread. */
static bool raised(const volatile int *flag)
{
	return flag != NULL && __atomic_load_n(flag, __ATOMIC_RELAXED) != 0;
}

/* Receive the next message with id (older ids are stale replies to requests
 * we gave up on: skipped).  The body stays valid until the next call. */
static int recv_msg(struct dpg_store *s, bool any_id, uint32_t id, int64_t deadline,
		    struct msg *m)
{
	if (s->rdone > 0) {
		memmove(s->rbuf, s->rbuf + s->rdone, s->rlen - s->rdone);
		s->rlen -= s->rdone;
		s->rdone = 0;
	}
	for (;;) {
		struct pollfd p = { .fd = s->fd, .events = POLLIN };
		int64_t left;
		ssize_t n;
		size_t need = HDR_LEN;
		int r;

		while (s->rlen >= HDR_LEN) {
			hdr_get(s->rbuf, &m->h);
			if (m->h.magic != WIRE_MAGIC || m->h.version != WIRE_VERSION ||
			    m->h.len > CLIENT_BODY_MAX) {
				s->broken = true;
				return DPG_NET_ERR;
			}
			need = HDR_LEN + m->h.len;
			if (s->rlen < need)
				break;
			if (any_id || m->h.id == id) {
				m->body = s->rbuf + HDR_LEN;
				s->rdone = need;
				return 0;
			}
			memmove(s->rbuf, s->rbuf + need, s->rlen - need);	/* stale */
			s->rlen -= need;
			need = HDR_LEN;
		}
		if (need < s->rlen + 4096)
			need = s->rlen + 4096;
		if (need > s->rcap) {
			uint8_t *nb = realloc(s->rbuf, need);

			if (nb == NULL)
				return DPG_NET_ERR;
			s->rbuf = nb;
			s->rcap = need;
		}
		n = recv(s->fd, s->rbuf + s->rlen, s->rcap - s->rlen, MSG_DONTWAIT);
		if (n > 0) {
			s->rlen += (size_t)n;
			continue;
		}
		if (n == 0 || errno == ECONNRESET || errno == EPIPE) {
			s->broken = true;
			return DPG_NET_CLOSED;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return DPG_NET_ERR;
		if (raised(s->abort))
			return DPG_NET_ABORTED;
		left = deadline - dpg_now_ms();
		if (left <= 0)
			return DPG_NET_TIMEOUT;
		/* slices only when there is a flag to watch: thousands of
		 * idle waiters must not wake ten times a second for nothing */
		if (s->abort != NULL && left > 100)
			left = 100;
		r = poll(&p, 1, left > INT32_MAX ? INT32_MAX : (int)left);
		if (r < 0 && errno != EINTR)
			return DPG_NET_ERR;
	}
}

/* Describe a key list for messages: "key 'a'" / "keys 'a', 'b' (+3 more)". */
static void describe_keys(const char *const *keys, size_t n, char *buf, size_t len)
{
	size_t o, i;
	char q[96];

	o = (size_t)snprintf(buf, len, "%s", n == 1 ? "key " : "keys ");
	for (i = 0; i < n && i < 3 && o < len; i++)
		o += (size_t)snprintf(buf + o, len - o, "%s'%s'", i ? ", " : "",
				      dpg_err_quote(keys[i], q, sizeof(q)));
	if (n > 3 && o < len)
		snprintf(buf + o, len - o, " (+%zu more)", n - 3);
}

/* One request and its reply.  what: "waiting for key 'x'" for messages. */
static int rpc(struct dpg_store *s, uint8_t op, const struct iovec *parts, int nparts,
	       int64_t deadline, const char *what, struct msg *m, struct dpg_err *err)
{
	int64_t t0 = dpg_now_ms();
	size_t len = 0, o = HDR_LEN;
	uint8_t *buf;
	uint32_t id;
	int i, rc;

	if (s->broken)
		return dpg_errf(err, "store: the connection to %s is unusable after an "
				"interrupted request; reconnect", s->where);
	for (i = 0; i < nparts; i++)
		len += parts[i].iov_len;
	buf = malloc(HDR_LEN + len);
	if (buf == NULL)
		return dpg_errf(err, "store: out of memory");
	id = ++s->next_id;
	hdr_put(buf, op, 0, id, (uint32_t)len);
	for (i = 0; i < nparts; i++) {
		memcpy(buf + o, parts[i].iov_base, parts[i].iov_len);
		o += parts[i].iov_len;
	}
	rc = dpg_net_write_full(s->fd, buf, HDR_LEN + len, deadline, s->abort, err);
	free(buf);
	if (rc == 0)
		rc = recv_msg(s, false, id, deadline, m);
	else
		s->broken = true;	/* part of the request may be out */
	if (rc == DPG_NET_TIMEOUT || rc == DPG_NET_ABORTED) {
		/* tell the server to forget a parked request (best effort) */
		uint8_t c[HDR_LEN + 4];

		hdr_put(c, OP_CANCEL, 0, ++s->next_id, 4);
		put32(c + HDR_LEN, id);
		if (!s->broken && send(s->fd, c, sizeof(c), MSG_NOSIGNAL | MSG_DONTWAIT) !=
		    (ssize_t)sizeof(c))
			s->broken = true;
	}
	switch (rc) {
	case 0:
		break;
	case DPG_NET_TIMEOUT:
		dpg_errf(err, "store: timed out after %.1f s %s (store at %s)",
			 (double)(deadline > t0 ? deadline - t0 : 0) / 1000.0, what, s->where);
		return rc;
	case DPG_NET_CLOSED:
		dpg_errf(err, "store: the store at %s closed the connection %s (server "
			 "stopped or crashed?)", s->where, what);
		return rc;
	case DPG_NET_ABORTED:
		dpg_errf(err, "store: aborted %s", what);
		return rc;
	default:
		if (s->broken)
			return dpg_errf(err, "store: protocol error from %s %s", s->where, what);
		return dpg_errf(err, "store: %s: %s", what, strerror(errno));
	}
	if (m->h.op != (op | OP_REPLY)) {
		s->broken = true;
		return dpg_errf(err, "store: protocol error from %s %s (reply op %u)",
				s->where, what, m->h.op);
	}
	if (m->h.flags == ST_ERROR)
		return dpg_errf(err, "store: %s: the store at %s says: %.*s", what,
				s->where, (int)(m->h.len > 300 ? 300 : m->h.len), m->body);
	if (m->h.flags != ST_OK) {
		s->broken = true;
		return dpg_errf(err, "store: protocol error from %s %s (status %u)",
				s->where, what, m->h.flags);
	}
	return 0;
}

static int check_key(const char *key, size_t *len, struct dpg_err *err)
{
	char q[96];

	if (key == NULL || key[0] == '\0')
		return dpg_errf(err, "store: empty key");
	*len = strlen(key);
	if (*len > DPG_STORE_KEY_MAX)
		return dpg_errf(err, "store: key '%s' is %zu bytes long (limit %d)",
				dpg_err_quote(key, q, sizeof(q)), *len, DPG_STORE_KEY_MAX);
	return 0;
}

/* Authenticate a fresh connection; every outcome is worded here.
 * DPG_NET_CLOSED only for a connection closed before the challenge came. */
static int handshake(struct dpg_store *s, int64_t deadline, struct dpg_err *err)
{
	uint8_t req[HDR_LEN + NONCE_LEN + MAC_LEN], ns[NONCE_LEN], want[MAC_LEN];
	struct msg m;
	int rc;

	rc = recv_msg(s, true, 0, deadline, &m);
	if (rc == 0 && (m.h.op != OP_HELLO || m.h.len != NONCE_LEN || m.h.flags != 0))
		rc = DPG_STORE_AUTH;
	if (rc != 0) {
		if (rc == DPG_NET_CLOSED)
			dpg_errf(err, "store: the store at %s kept closing the connection "
				 "before its challenge", s->where);
		else if (rc == DPG_NET_TIMEOUT)
			dpg_errf(err, "store: timed out waiting for the challenge of the "
				 "store at %s (a busy store, or not a dpg store?)", s->where);
		else if (rc == DPG_NET_ABORTED)
			dpg_errf(err, "store: aborted connecting to %s", s->where);
		else if (rc == DPG_STORE_AUTH || s->broken)
			dpg_errf(err, "store: %s does not speak the dpg store protocol "
				 "version %d (another service on that port?)", s->where,
				 WIRE_VERSION);
		else
			dpg_errf(err, "store: receiving from %s: %s", s->where, strerror(errno));
		return rc == DPG_NET_ERR && s->broken ? DPG_STORE_AUTH : rc;
	}
	memcpy(ns, m.body, NONCE_LEN);
	hdr_put(req, OP_AUTH, 0, 0, NONCE_LEN + MAC_LEN);
	if (fill_random(req + HDR_LEN, NONCE_LEN) != 0)
		return dpg_errf(err, "store: no randomness for the handshake");
	auth_mac(&s->keyed, LABEL_CLIENT, ns, req + HDR_LEN, req + HDR_LEN + NONCE_LEN);
	rc = dpg_net_write_full(s->fd, req, sizeof(req), deadline, s->abort, err);
	if (rc == 0)
		rc = recv_msg(s, true, 0, deadline, &m);
	if (rc != 0) {
		if (rc == DPG_NET_TIMEOUT)
			dpg_errf(err, "store: timed out authenticating with the store at %s",
				 s->where);
		else if (rc == DPG_NET_ABORTED)
			dpg_errf(err, "store: aborted connecting to %s", s->where);
		else
			dpg_errf(err, "store: the store at %s %s during authentication",
				 s->where, s->broken && rc != DPG_NET_CLOSED ?
				 "sent garbage" : "closed the connection");
		return rc == DPG_NET_CLOSED ? DPG_NET_ERR : rc;
	}
	if (m.h.op == (OP_AUTH | OP_REPLY) && m.h.flags == ST_REFUSED) {
		dpg_errf(err, "store: the store at %s refused our job secret "
			 "(DPG_SECRET differs?)", s->where);
		return DPG_STORE_AUTH;
	}
	auth_mac(&s->keyed, LABEL_SERVER, ns, req + HDR_LEN, want);
	if (m.h.op != (OP_AUTH | OP_REPLY) || m.h.flags != ST_OK || m.h.len != MAC_LEN ||
	    !dpg_ct_equal(want, m.body, MAC_LEN)) {
		dpg_errf(err, "store: the server at %s failed to prove it knows our job "
			 "secret (a foreign or stale store on that port?)", s->where);
		return DPG_STORE_AUTH;
	}
	return 0;
}

int dpg_store_connect(const char *host, uint16_t port, const uint8_t *secret,
		      size_t secret_len, int64_t deadline_ms,
		      const volatile int *abort, struct dpg_store **out,
		      struct dpg_err *err)
{
	struct dpg_store *s;
	int64_t backoff = 10;
	int rc;

	if (check_secret(secret, secret_len, err) != 0)
		return -1;
	if (host == NULL)
		host = "127.0.0.1";
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return dpg_errf(err, "store: out of memory");
	s->abort = abort;
	snprintf(s->where, sizeof(s->where), "%s:%u", host, (unsigned)port);
	dpg_hmac_sha256_init(&s->keyed, secret, secret_len);
	for (;;) {
		rc = dpg_net_connect(host, port, deadline_ms, abort, &s->fd, err);
		if (rc != 0) {
			if (rc == DPG_NET_ABORTED)
				dpg_errf(err, "store: aborted connecting to %s", s->where);
			else
				dpg_err_prefix(err, "store");
			break;
		}
		rc = handshake(s, deadline_ms, err);
		if (rc == 0) {
			*out = s;
			return 0;
		}
		close(s->fd);
		s->fd = -1;
		s->rlen = s->rdone = 0;
		s->broken = false;
		/* a reset before the challenge (backlog overflow, a server still
		 * starting or restarting) is worth another try; the rest is final */
		if (rc != DPG_NET_CLOSED || dpg_now_ms() + backoff >= deadline_ms ||
		    raised(abort))
			break;
		usleep((useconds_t)backoff * 1000);
		backoff = backoff * 2 > 1000 ? 1000 : backoff * 2;
	}
	explicit_bzero(&s->keyed, sizeof(s->keyed));
	free(s->rbuf);
	free(s);
	return rc;
}

void dpg_store_close(struct dpg_store *s)
{
	if (s == NULL)
		return;
	if (s->fd >= 0)
		close(s->fd);
	explicit_bzero(&s->keyed, sizeof(s->keyed));
	free(s->rbuf);
	free(s);
}

int dpg_store_set(struct dpg_store *s, const char *key, const void *val,
		  size_t len, int64_t deadline_ms, struct dpg_err *err)
{
	char what[DPG_STORE_KEY_MAX + 32], q[96];
	uint8_t kl[4];
	struct iovec v[3];
	struct msg m;
	size_t klen;

	if (check_key(key, &klen, err) != 0)
		return -1;
	if (len > DPG_STORE_VALUE_MAX)
		return dpg_errf(err, "store: value for key '%s' is %zu bytes (limit %u)",
				dpg_err_quote(key, q, sizeof(q)), len, DPG_STORE_VALUE_MAX);
	put32(kl, (uint32_t)klen);
	v[0] = (struct iovec){ kl, 4 };
	v[1] = (struct iovec){ (void *)key, klen };
	v[2] = (struct iovec){ (void *)val, len };
	snprintf(what, sizeof(what), "setting key '%s'", dpg_err_quote(key, q, sizeof(q)));
	return rpc(s, OP_SET, v, 3, deadline_ms, what, &m, err);
}

int dpg_store_get(struct dpg_store *s, const char *key, void **val, size_t *len,
		  int64_t deadline_ms, struct dpg_err *err)
{
	char what[128], q[96];
	uint8_t kl[4];
	struct iovec v[2];
	struct msg m;
	size_t klen;
	int rc;

	if (check_key(key, &klen, err) != 0)
		return -1;
	put32(kl, (uint32_t)klen);
	v[0] = (struct iovec){ kl, 4 };
	v[1] = (struct iovec){ (void *)key, klen };
	snprintf(what, sizeof(what), "waiting for key '%s'",
		 dpg_err_quote(key, q, sizeof(q)));
	rc = rpc(s, OP_GET, v, 2, deadline_ms, what, &m, err);
	if (rc != 0)
		return rc;
	*val = malloc(m.h.len + 1);	/* NUL-terminated for convenience */
	if (*val == NULL)
		return dpg_errf(err, "store: out of memory for the value of key '%s'", q);
	memcpy(*val, m.body, m.h.len);
	((char *)*val)[m.h.len] = '\0';
	*len = m.h.len;
	return 0;
}

int dpg_store_add(struct dpg_store *s, const char *key, int64_t delta,
		  int64_t *result, int64_t deadline_ms, struct dpg_err *err)
{
	char what[128], q[96];
	uint8_t kl[4], d[8];
	struct iovec v[3];
	struct msg m;
	size_t klen;
	int rc;

	if (check_key(key, &klen, err) != 0)
		return -1;
	put32(kl, (uint32_t)klen);
	put64(d, (uint64_t)delta);
	v[0] = (struct iovec){ kl, 4 };
	v[1] = (struct iovec){ (void *)key, klen };
	v[2] = (struct iovec){ d, 8 };
	snprintf(what, sizeof(what), "adding to key '%s'", dpg_err_quote(key, q, sizeof(q)));
	rc = rpc(s, OP_ADD, v, 3, deadline_ms, what, &m, err);
	if (rc != 0)
		return rc;
	if (m.h.len != 8) {
		s->broken = true;
		return dpg_errf(err, "store: protocol error from %s %s", s->where, what);
	}
	if (result != NULL)
		*result = (int64_t)get64(m.body);
	return 0;
}

int dpg_store_cas(struct dpg_store *s, const char *key, const void *expected,
		  size_t elen, const void *desired, size_t dlen, void **cur,
		  size_t *curlen, int64_t deadline_ms, struct dpg_err *err)
{
	char what[128], q[96];
	uint8_t kl[4], el[4];
	struct iovec v[5];
	struct msg m;
	size_t klen;
	int rc;

	if (cur != NULL)
		*cur = NULL;
	if (curlen != NULL)
		*curlen = 0;
	if (check_key(key, &klen, err) != 0)
		return -1;
	if (elen > DPG_STORE_VALUE_MAX || dlen > DPG_STORE_VALUE_MAX)
		return dpg_errf(err, "store: CAS value for key '%s' over %u bytes",
				dpg_err_quote(key, q, sizeof(q)), DPG_STORE_VALUE_MAX);
	put32(kl, (uint32_t)klen);
	put32(el, (uint32_t)elen);
	v[0] = (struct iovec){ kl, 4 };
	v[1] = (struct iovec){ (void *)key, klen };
	v[2] = (struct iovec){ el, 4 };
	v[3] = (struct iovec){ (void *)expected, elen };
	v[4] = (struct iovec){ (void *)desired, dlen };
	snprintf(what, sizeof(what), "compare-and-set of key '%s'",
		 dpg_err_quote(key, q, sizeof(q)));
	rc = rpc(s, OP_CAS, v, 5, deadline_ms, what, &m, err);
	if (rc != 0)
		return rc;
	if (m.h.len < 1) {
		s->broken = true;
		return dpg_errf(err, "store: protocol error from %s %s", s->where, what);
	}
	if (m.body[0] && cur != NULL) {
		*cur = malloc(m.h.len);	/* m.h.len - 1 bytes + a NUL */
		if (*cur == NULL)
			return dpg_errf(err, "store: out of memory");
		memcpy(*cur, m.body + 1, m.h.len - 1);
		((char *)*cur)[m.h.len - 1] = '\0';
		if (curlen != NULL)
			*curlen = m.h.len - 1;
	}
	return 0;
}

int dpg_store_wait(struct dpg_store *s, const char *const *keys, size_t nkeys,
		   int64_t deadline_ms, struct dpg_err *err)
{
	char what[400];
	struct iovec *v;
	uint8_t *lens;
	struct msg m;
	size_t i;
	int rc;

	if (nkeys == 0)
		return 0;
	if (nkeys > WAIT_MAX_KEYS)
		return dpg_errf(err, "store: cannot wait for %zu keys at once (limit %d)",
				nkeys, WAIT_MAX_KEYS);
	v = malloc((1 + 2 * nkeys) * sizeof(*v));
	lens = malloc(4 * (nkeys + 1));
	if (v == NULL || lens == NULL) {
		free(v);
		free(lens);
		return dpg_errf(err, "store: out of memory");
	}
	put32(lens, (uint32_t)nkeys);
	v[0] = (struct iovec){ lens, 4 };
	for (i = 0; i < nkeys; i++) {
		size_t klen;

		if (check_key(keys[i], &klen, err) != 0) {
			free(v);
			free(lens);
			return -1;
		}
		put32(lens + 4 * (i + 1), (uint32_t)klen);
		v[1 + 2 * i] = (struct iovec){ lens + 4 * (i + 1), 4 };
		v[2 + 2 * i] = (struct iovec){ (void *)keys[i], klen };
	}
	memcpy(what, "waiting for ", 12);
	describe_keys(keys, nkeys, what + 12, sizeof(what) - 12);
	rc = rpc(s, OP_WAIT, v, (int)(1 + 2 * nkeys), deadline_ms, what, &m, err);
	free(v);
	free(lens);
	return rc;
}

static int store_del(struct dpg_store *s, const char *key, int64_t deadline_ms,
		     struct dpg_err *err)
{
	char what[128], q[96];
	uint8_t kl[4];
	struct iovec v[2];
	struct msg m;
	size_t klen;

	if (check_key(key, &klen, err) != 0)
		return -1;
	put32(kl, (uint32_t)klen);
	v[0] = (struct iovec){ kl, 4 };
	v[1] = (struct iovec){ (void *)key, klen };
	snprintf(what, sizeof(what), "deleting key '%s'", dpg_err_quote(key, q, sizeof(q)));
	return rpc(s, OP_DEL, v, 2, deadline_ms, what, &m, err);
}

int dpg_store_barrier(struct dpg_store *s, const char *name, int n,
		      int64_t deadline_ms, struct dpg_err *err)
{
	char count[DPG_STORE_KEY_MAX + 1], done[DPG_STORE_KEY_MAX + 1], q[96];
	const char *keys[1] = { done };
	int64_t t0 = dpg_now_ms(), arrival, gen, now_in = -1;
	int rc;

	if (name == NULL || n < 1)
		return dpg_errf(err, "store: barrier needs a name and n >= 1");
	if (strlen(name) + 32 > DPG_STORE_KEY_MAX)
		return dpg_errf(err, "store: barrier name '%s' is too long",
				dpg_err_quote(name, q, sizeof(q)));
	snprintf(count, sizeof(count), "%s/count", name);
	rc = dpg_store_add(s, count, 1, &arrival, deadline_ms, err);
	if (rc != 0)
		return rc;
	gen = (arrival - 1) / n;
	snprintf(done, sizeof(done), "%s/done/%" PRId64, name, gen);
	if (arrival % n == 0) {
		rc = dpg_store_set(s, done, "1", 1, deadline_ms, err);
		if (rc == 0 && gen > 0) {
			snprintf(done, sizeof(done), "%s/done/%" PRId64, name, gen - 1);
			rc = store_del(s, done, deadline_ms, err);
		}
		return rc;
	}
	rc = dpg_store_wait(s, keys, 1, deadline_ms, err);
	if (rc != DPG_NET_TIMEOUT)
		return rc;
	/* say how far the barrier got: one quick look at the counter */
	if (dpg_store_add(s, count, 0, &now_in, dpg_now_ms() + 1000, NULL) == 0) {
		now_in -= gen * n;
		if (now_in > n)
			now_in = n;
	}
	if (now_in >= 0)
		dpg_errf(err, "store: timed out after %.1f s in barrier '%s' (generation "
			 "%" PRId64 ": %" PRId64 " of %d arrived; store at %s)",
			 (double)(deadline_ms - t0) / 1000.0, dpg_err_quote(name, q, sizeof(q)),
			 gen, now_in, n, s->where);
	else
		dpg_errf(err, "store: timed out after %.1f s in barrier '%s' (generation "
			 "%" PRId64 " of %d participants; store at %s)",
			 (double)(deadline_ms - t0) / 1000.0, dpg_err_quote(name, q, sizeof(q)),
			 gen, n, s->where);
	return DPG_NET_TIMEOUT;
}

/* ------------------------------------------------------------ secret */


int dpg_secret_parse(const char *hex, uint8_t *out, size_t cap, size_t *len,
		     struct dpg_err *err)
{
	size_t n, i;

	if (hex == NULL || hex[0] == '\0')
		return dpg_errf(err, "job secret: empty (want 32..128 hex digits)");
	n = strlen(hex);
	for (i = 0; i < n; i++)
		if (dpg_hex_digit(hex[i]) < 0)
			return dpg_errf(err, "job secret: character %zu is not a hex digit "
					"(want 32..128 hex digits)", i + 1);
	if (n < 32 || n > 128)
		return dpg_errf(err, "job secret: %zu hex digits (want 32..128)", n);
	if (n % 2 != 0)
		return dpg_errf(err, "job secret: odd number of hex digits (%zu)", n);
	if (n / 2 > cap)
		return dpg_errf(err, "job secret: %zu bytes do not fit in %zu", n / 2, cap);
	for (i = 0; i < n / 2; i++)
		out[i] = (uint8_t)(dpg_hex_digit(hex[2 * i]) << 4 | dpg_hex_digit(hex[2 * i + 1]));
	*len = n / 2;
	return 0;
}

int dpg_store_status(int rc)
{
	switch (rc) {
	case 0:
		return 0;
	case DPG_NET_TIMEOUT:
		return -DPG_ERR_TIMEOUT;
	case DPG_NET_ABORTED:
		return -DPG_ERR_ABORTED;
	case DPG_NET_CLOSED:
		return -DPG_ERR_PEER;
	case DPG_STORE_AUTH:
		return -DPG_ERR_AUTH;
	default:
		return -DPG_ERR_SYSTEM;
	}
}
