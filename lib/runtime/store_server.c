/* SPDX-License-Identifier: BSD-3-Clause */
/* store_server.c - the rendezvous store's server: one epoll thread accepting,
 * authenticating, reading and writing every client connection.
 *
 * store_wire.h has the protocol, store_ops.c the request handlers (a table
 * indexed by op code, and the GET/WAIT requests parked on unset keys),
 * store_table.c the keys.  Each connection reads whole messages into its
 * buffer and hands each to its handler, which queues replies (values by
 * reference) that are flushed once per loop turn.  Unauthenticated
 * connections sit on a timer list ordered by accept time, capped per source
 * address and in all: past a cap, or out of descriptors, the OLDEST of them
 * gives way (a new connection may be a rank; an idle one is a stranger or a
 * rank that will retry), and they get a short deadline.  stop() in a forked
 * child does nothing: the server thread, epoll set and eventfd belong to the
 * parent. */
#include "digest.h"	/* dpg_digest_thread_stop */
#include "store.h"
#include "thread.h"
#include "store_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "net.h"
#include "digest.h"

#define OUT_SOFT ((size_t)1 << 20)	/* stop reading a peer that does not read */
#define AUTH_TIMEOUT_DEFAULT_MS 2000
#define UNAUTH_MAX 1024			/* unauthenticated connections in all, */
#define UNAUTH_MIN 16			/* ... at most half the descriptors, at least this */
#define UNAUTH_SRC_SHARE 4		/* one source address: 1/4 of that */
#define LOG_PER_SEC 20

/* ------------------------------------------------------------ server data */

/* Queued output: inline bytes, or a reference to a value. */
struct oseg {
	struct oseg *next;
	struct blob *ref;
	uint32_t off, len, cap;
	uint8_t data[];
};

#define OSEG_CAP 2048
#define REF_MIN 1024			/* values at least this long go by reference */

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

/* ------------------------------------------------------------ output */

static void flush_schedule(struct dpg_store_server *s, struct conn *c)
{
	if (!c->in_flush && !c->closed) {
		c->in_flush = true;
		c->fnext = s->flush;
		s->flush = c;
	}
}

static void out_append(struct conn *c, struct oseg *g)
{
	if (c->otail != NULL)
		c->otail->next = g;
	else
		c->ohead = g;
	c->otail = g;
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
		out_append(c, g);
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
		return -DPG_ERR_NOMEM;
	g->next = NULL;
	g->ref = b;
	b->refs++;
	g->off = 0;
	g->len = g->cap = b->len;
	out_append(c, g);
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
	p = out_inline(c, DPG_WIRE_HDR + plen + (byref ? 0 : vlen));
	if (p == NULL)
		goto oom;
	dpg_wire_hdr_put(p, op, st, id, (uint32_t)(plen + vlen));
	if (plen > 0)
		memcpy(p + DPG_WIRE_HDR, pre, plen);
	if (vlen > 0 && !byref)
		memcpy(p + DPG_WIRE_HDR + plen, val->data, vlen);
	if (byref && out_ref(c, val) != 0)
		goto oom;
	flush_schedule(s, c);
	return;
oom:
	slog(s, "dropped", c->peer, "out of memory queueing a reply");
	c->dead = true;
	flush_schedule(s, c);
}

void dpg_srv_reply(struct dpg_store_server *s, struct conn *c, uint8_t op, uint16_t st,
		   uint32_t id, const void *pre, size_t plen, struct blob *val)
{
	queue_msg(s, c, op | DPG_OP_REPLY, st, id, pre, plen, val);
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

/* A node leader's relay ended while the store serves: the ranks it carried
 * can no longer reach the store, so every wait parked now or later would
 * wait for them until its deadline: it is answered with the leader's name
 * and its ranks at once instead. */
static void relay_lost(struct dpg_store_server *s, struct conn *c)
{
	slog(s, "lost", c->peer, "%s: its connection to the store ended (the node "
	     "leader exited?); waits are answered with its loss from now on", c->label);
	if (s->lost[0] == '\0')
		snprintf(s->lost, sizeof(s->lost), "%s, is gone: its connection to rank "
			 "0's store ended (the leader exited or its node failed)", c->label);
	dpg_srv_fail_parked(s);
}

static void conn_close(struct dpg_store_server *s, struct conn *c)
{
	struct oseg *g, *next;

	dpg_srv_unpark_all(s, c);
	if (c->label[0] != '\0' && !s->stopping)
		relay_lost(s, c);
	for (g = c->ohead; g != NULL; g = next) {
		next = g->next;
		dpg_blob_unref(g->ref);
		free(g);
	}
	if (c->in_flush) {
		struct conn **pp = &s->flush;

		while (*pp != c)
			pp = &(*pp)->fnext;
		*pp = c->fnext;
	}
	dl_del(&c->all);
	if (c->state != CS_READY) {
		dl_del(&c->unauth);
		s->nunauth--;
	}
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

/* Drop the n bytes sendmsg took from the head of the output queue. */
static void out_consume(struct conn *c, size_t n)
{
	c->obytes -= n;
	while (n > 0) {
		struct oseg *g = c->ohead;
		size_t left = g->len - g->off;

		if (n < left) {
			g->off += (uint32_t)n;
			break;
		}
		n -= left;
		c->ohead = g->next;
		if (c->ohead == NULL)
			c->otail = NULL;
		dpg_blob_unref(g->ref);
		free(g);
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
		out_consume(c, (size_t)n);
	}
	if (c->dead || (c->state == CS_REFUSING && c->ohead == NULL)) {
		conn_close(s, c);
		return false;
	}
	conn_update_events(s, c);
	return true;
}

/* Close the oldest unauthenticated connection c to make room; why says which
 * limit was reached. */
static void unauth_evict(struct dpg_store_server *s, struct conn *c, const char *why)
{
	slog(s, "refused", c->peer, "evicted before authenticating (%s): the oldest "
	     "unauthenticated connection gives way to a new one", why);
	conn_close(s, c);
}

/* Room for one more unauthenticated connection from addr: past the
 * per-source cap the oldest from that source goes, past the overall cap the
 * oldest of all. */
static void unauth_make_room(struct dpg_store_server *s, uint32_t addr)
{
	struct conn *first = NULL;
	size_t same = 0;
	struct dl *it;

	for (it = s->unauth.next; it != &s->unauth; it = it->next) {
		struct conn *c = container_of(it, struct conn, unauth);

		if (c->addr == addr && same++ == 0)
			first = c;
	}
	if (first != NULL && same >= s->unauth_per_src)
		unauth_evict(s, first, "too many from one address");
	else if (s->nunauth >= s->unauth_max)
		unauth_evict(s, container_of(s->unauth.next, struct conn, unauth),
			     "too many in all");
}

/* Out of descriptors: free the spare one to accept and shed the peer, else it
 * would stay in the backlog, waking us forever. */
static void accept_shed(struct dpg_store_server *s)
{
	int fd;

	close(s->sparefd);
	fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd >= 0) {
		char p[32];

		dpg_net_peer_name(fd, p, sizeof(p));
		slog(s, "refused", p, "out of file descriptors (raise the open-files limit)");
		close(fd);
	}
	s->sparefd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/* Take on an accepted socket: challenge it and start its auth timer. */
static void conn_new(struct dpg_store_server *s, int fd, const struct sockaddr_in *sa)
{
	struct epoll_event ev = { .events = EPOLLIN };
	char ip[INET_ADDRSTRLEN];
	int one = 1;
	struct conn *c = calloc(1, sizeof(*c));

	if (c == NULL || dpg_wire_random(c->nonce, DPG_WIRE_NONCE, NULL) != 0) {
		slog(s, "refused", "?", "out of memory or randomness");
		free(c);
		close(fd);
		return;
	}
	c->fd = fd;
	c->state = CS_AUTH;
	c->addr = sa->sin_family == AF_INET ? sa->sin_addr.s_addr : 0;
	dl_init(&c->parked);
	if (sa->sin_family == AF_INET &&
	    inet_ntop(AF_INET, &sa->sin_addr, ip, sizeof(ip)) != NULL)
		snprintf(c->peer, sizeof(c->peer), "%s:%u", ip, (unsigned)ntohs(sa->sin_port));
	else
		snprintf(c->peer, sizeof(c->peer), "?");
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	ev.data.ptr = c;
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
		slog(s, "refused", c->peer, "epoll_ctl: %s", strerror(errno));
		close(fd);
		free(c);
		return;
	}
	c->events = EPOLLIN;
	unauth_make_room(s, c->addr);
	dl_add_tail(&s->conns, &c->all);
	c->auth_deadline = dpg_now_ms() + s->auth_timeout_ms;
	dl_add_tail(&s->unauth, &c->unauth);
	s->nunauth++;
	queue_msg(s, c, DPG_OP_HELLO, DPG_WIRE_OK, 0, c->nonce, DPG_WIRE_NONCE, NULL);
}

static void do_accept(struct dpg_store_server *s)
{
	int i;

	for (i = 0; i < 512; i++) {
		struct sockaddr_in sa;
		socklen_t sl = sizeof(sa);
		int fd = accept4(s->lfd, (struct sockaddr *)&sa, &sl,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd >= 0) {
			conn_new(s, fd, &sa);
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if ((errno == EMFILE || errno == ENFILE) && !dl_empty(&s->unauth)) {
			unauth_evict(s, container_of(s->unauth.next, struct conn, unauth),
				     "out of file descriptors");
			continue;
		}
		if ((errno == EMFILE || errno == ENFILE) && s->sparefd >= 0) {
			accept_shed(s);
			continue;
		}
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			slog(s, "refused", "?", "accept: %s", strerror(errno));
		return;
	}
}

static void handle_auth(struct dpg_store_server *s, struct conn *c,
			const struct dpg_wire_hdr *h, const uint8_t *body)
{
	uint8_t want[DPG_WIRE_MAC], proof[DPG_WIRE_MAC];

	if (dpg_wire_auth_mac(&s->key, DPG_WIRE_LABEL_CLIENT, c->nonce, body, want) != 0 ||
	    dpg_wire_auth_mac(&s->key, DPG_WIRE_LABEL_SERVER, c->nonce, body, proof) != 0) {
		slog(s, "refused", c->peer, "libcrypto failed computing the HMAC");
		c->dead = true;
		flush_schedule(s, c);
		return;
	}
	if (!dpg_ct_equal(want, body + DPG_WIRE_NONCE, DPG_WIRE_MAC)) {
		static const char msg[] = "job secret mismatch";

		slog(s, "refused", c->peer, "wrong job secret (HMAC mismatch)");
		c->state = CS_REFUSING;	/* stays on the unauth timer until flushed */
		dpg_srv_reply(s, c, DPG_OP_AUTH, DPG_WIRE_REFUSED, h->id, msg, sizeof(msg) - 1, NULL);
		return;
	}
	c->state = CS_READY;
	dl_del(&c->unauth);
	s->nunauth--;
	dpg_srv_reply(s, c, DPG_OP_AUTH, DPG_WIRE_OK, h->id, proof, DPG_WIRE_MAC, NULL);
}

/* ------------------------------------------------------------ reading */

/* Validate a header; NULL if fine, else why not. */
static const char *hdr_check(const struct conn *c, const struct dpg_wire_hdr *h,
			     char *why, size_t wlen)
{
	const char *name = dpg_wire_op_name(h->op);
	uint32_t max;

	if (h->magic != DPG_WIRE_MAGIC)
		snprintf(why, wlen, "bad magic 0x%08" PRIx32 " (not a dpg store client)",
			 h->magic);
	else if (h->version != DPG_WIRE_VERSION)
		snprintf(why, wlen, "protocol version %u, this server speaks %d",
			 h->version, DPG_WIRE_VERSION);
	else if (c->state == CS_AUTH && h->op != DPG_OP_AUTH)
		snprintf(why, wlen, "sent %s (op %u) before authenticating", name, h->op);
	else if (c->state == CS_READY && h->op == DPG_OP_AUTH)
		snprintf(why, wlen, "AUTH sent twice");
	else if ((max = dpg_wire_body_max(h->op)) == 0)
		snprintf(why, wlen, "unknown op %u", h->op);
	else if (h->flags != 0)
		snprintf(why, wlen, "nonzero flags 0x%04x", h->flags);
	else if (h->len > max || (h->op == DPG_OP_AUTH && h->len != max))
		snprintf(why, wlen, "%s body of %" PRIu32 " bytes (limit %" PRIu32 ")",
			 name, h->len, max);
	else
		return NULL;
	return why;
}

/* How a connection's end is logged: before authentication it is refused. */
static const char *verb_of(const struct conn *c)
{
	return c->state == CS_READY ? "dropped" : "refused";
}

/* How much room to read into: the current message if its header is in, else
 * a chunk (but never past the auth message before authentication). */
static size_t read_want(const struct conn *c)
{
	struct dpg_wire_hdr h;
	size_t want = 4096;

	if (c->state == CS_AUTH)
		return DPG_WIRE_HDR + DPG_WIRE_NONCE + DPG_WIRE_MAC;
	if (c->rlen >= DPG_WIRE_HDR) {	/* validated when it came in */
		dpg_wire_hdr_get(c->rbuf, &h);
		if (DPG_WIRE_HDR + (size_t)h.len > want)
			want = DPG_WIRE_HDR + (size_t)h.len;
	}
	return want;
}

static bool read_room(struct dpg_store_server *s, struct conn *c, size_t want)
{
	uint8_t *nb;

	if (want <= c->rcap)
		return true;
	nb = realloc(c->rbuf, want);
	if (nb == NULL) {
		slog(s, verb_of(c), c->peer, "out of memory for a %zu-byte message", want);
		return false;
	}
	c->rbuf = nb;
	c->rcap = want;
	return true;
}

/* Drop the off bytes handled from the read buffer (and a big idle buffer). */
static void read_consume(struct conn *c, size_t off)
{
	if (off > 0) {
		memmove(c->rbuf, c->rbuf + off, c->rlen - off);
		c->rlen -= off;
	}
	if (c->rlen == 0 && c->rcap > 65536) {
		free(c->rbuf);
		c->rbuf = NULL;
		c->rcap = 0;
	}
}

/* Act on every complete message in the buffer; false: close the connection. */
static bool read_dispatch(struct dpg_store_server *s, struct conn *c)
{
	size_t off = 0;
	struct dpg_err e;
	char why[160];

	while (c->rlen - off >= DPG_WIRE_HDR && c->state != CS_REFUSING) {
		const uint8_t *m = c->rbuf + off;
		struct dpg_wire_hdr h;

		dpg_wire_hdr_get(m, &h);
		if (hdr_check(c, &h, why, sizeof(why)) != NULL) {
			slog(s, verb_of(c), c->peer, "%s", why);
			return false;
		}
		if (c->rlen - off < DPG_WIRE_HDR + (size_t)h.len)
			break;
		if (c->state == CS_AUTH) {
			handle_auth(s, c, &h, m + DPG_WIRE_HDR);
		} else if (dpg_srv_handle(s, c, &h, m + DPG_WIRE_HDR, &e) != 0) {
			slog(s, verb_of(c), c->peer, "%s", e.msg);
			return false;
		}
		off += DPG_WIRE_HDR + h.len;
	}
	read_consume(c, off);
	return true;
}

static void log_hangup(struct dpg_store_server *s, const struct conn *c)
{
	if (c->state == CS_AUTH)
		slog(s, verb_of(c), c->peer, "closed the connection without authenticating");
	else if (c->rlen > 0)
		slog(s, verb_of(c), c->peer, "closed the connection in the middle of a "
		     "message");
}

/* Read what is there and act on every complete message; false if closed. */
static bool conn_read(struct dpg_store_server *s, struct conn *c)
{
	int rounds;

	for (rounds = 0; rounds < 8 && c->state != CS_REFUSING && !c->dead; rounds++) {
		size_t want = read_want(c);
		ssize_t n;

		if (!read_room(s, c, want))
			goto close;
		if (c->state == CS_AUTH && c->rlen >= want)
			break;
		n = recv(c->fd, c->rbuf + c->rlen,
			 (c->state == CS_AUTH ? want : c->rcap) - c->rlen, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0) {
			log_hangup(s, c);
			goto close;
		}
		c->rlen += (size_t)n;
		if (!read_dispatch(s, c))
			goto close;
		if (c->obytes > OUT_SOFT)
			break;		/* the peer is not reading: stop reading it */
	}
	conn_update_events(s, c);
	return true;
close:
	conn_close(s, c);
	return false;
}

/* ------------------------------------------------------------ event loop */

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

/* epoll_wait's timeout: until the oldest unauthenticated peer expires. */
static int loop_timeout(const struct dpg_store_server *s)
{
	const struct conn *c;
	int64_t left;

	if (dl_empty(&s->unauth))
		return -1;
	c = container_of(s->unauth.next, struct conn, unauth);
	left = c->auth_deadline - dpg_now_ms();
	return left < 0 ? 0 : left > 60000 ? 60000 : (int)left + 1;
}

/* Act on one epoll event; false when the stop eventfd fired. */
static bool loop_event(struct dpg_store_server *s, const struct epoll_event *ev)
{
	void *p = ev->data.ptr;
	struct conn *c = p;

	if (p == &tag_wake)
		return false;
	if (p == &tag_listen) {
		do_accept(s);
	} else if (c->closed) {
		return true;
	} else if (ev->events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		if (c->events & EPOLLIN) {
			if (conn_read(s, c) && (ev->events & EPOLLOUT))
				flush_schedule(s, c);
		} else if (ev->events & (EPOLLHUP | EPOLLERR)) {
			conn_close(s, c);
		} else {
			flush_schedule(s, c);
		}
	} else if (ev->events & EPOLLOUT) {
		flush_schedule(s, c);
	}
	return true;
}

static void loop_flush(struct dpg_store_server *s)
{
	while (s->flush != NULL) {
		struct conn *c = s->flush;

		s->flush = c->fnext;
		c->in_flush = false;
		conn_flush(s, c);
	}
}

static void *server_main(void *arg)
{
	struct dpg_store_server *s = arg;
	struct epoll_event evs[256];
	bool run = true;

	while (run) {
		int n = epoll_wait(s->epfd, evs, 256, loop_timeout(s)), i;

		if (n < 0 && errno != EINTR) {
			fprintf(stderr, "dpg store: epoll_wait: %s; the store stops\n",
				strerror(errno));
			break;
		}
		for (i = 0; i < n; i++)
			if (!loop_event(s, &evs[i]))
				run = false;
		loop_flush(s);
		expire_unauth(s, dpg_now_ms());
		bury(s);
	}
	dpg_digest_thread_stop();
	return NULL;
}

/* ------------------------------------------------------------ server API */

static void server_free(struct dpg_store_server *s)
{
	s->stopping = true;
	while (!dl_empty(&s->conns))
		conn_close(s, container_of(s->conns.next, struct conn, all));
	bury(s);
	dpg_kv_free(&s->t);
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
	explicit_bzero(&s->key, sizeof(s->key));
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

/* Raise the soft open-files limit to the hard one (a rank 0 with many ranks
 * and strangers at its door needs descriptors); logs when it cannot.  Returns
 * the soft limit in force. */
static rlim_t raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
		fprintf(stderr, "dpg store: getrlimit(RLIMIT_NOFILE): %s\n", strerror(errno));
		return 1024;
	}
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < rl.rlim_max) {
		rlim_t was = rl.rlim_cur;

		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
			fprintf(stderr, "dpg store: cannot raise the open-files limit from "
				"%llu to %llu: %s; the store serves with %llu\n",
				(unsigned long long)was, (unsigned long long)rl.rlim_max,
				strerror(errno), (unsigned long long)was);
			return was;
		}
	}
	return rl.rlim_cur;
}

/* The caps on unauthenticated connections: at most half the descriptors
 * (the rest is for ranks), UNAUTH_MIN..UNAUTH_MAX; a quarter per address. */
static void unauth_caps(struct dpg_store_server *s, rlim_t nofile)
{
	size_t max = UNAUTH_MAX;

	if (nofile != RLIM_INFINITY && nofile / 2 < max)
		max = nofile / 2 < UNAUTH_MIN ? UNAUTH_MIN : (size_t)(nofile / 2);
	s->unauth_max = max;
	s->unauth_per_src = max / UNAUTH_SRC_SHARE > 0 ? max / UNAUTH_SRC_SHARE : 1;
}

/* The server's state, keyed with the secret, with an empty table. */
static int server_new(const uint8_t *secret, size_t secret_len,
		      struct dpg_store_server **out, struct dpg_err *err)
{
	struct dpg_store_server *s = calloc(1, sizeof(*s));
	int rc;

	if (s == NULL)
		return dpg_errs(err, DPG_ERR_NOMEM, "store: out of memory");
	s->lfd = s->epfd = s->wakefd = -1;
	dl_init(&s->conns);
	dl_init(&s->unauth);
	s->auth_timeout_ms = auth_timeout_from_env();
	unauth_caps(s, raise_nofile());
	memcpy(s->key.k, secret, secret_len);
	s->key.len = secret_len;
	s->sparefd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	rc = dpg_kv_init(&s->t, err);
	if (rc != 0) {
		server_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

static int epoll_watch(struct dpg_store_server *s, int fd, void *tag, struct dpg_err *err)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = tag };

	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) != 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "store: epoll_ctl: %s", strerror(errno));
	return 0;
}

/* Listen, and set up the epoll set with the listener and the stop eventfd. */
static int server_listen(struct dpg_store_server *s, const char *addr, uint16_t port,
			 struct dpg_err *err)
{
	int rc;

	/* the kernel caps the backlog at net.core.somaxconn */
	rc = dpg_net_listen(addr, port, 65535, &s->lfd, &s->port, err);
	if (rc != 0) {
		dpg_err_prefix(err, "store");
		return rc;
	}
	if (dpg_net_set_nonblock(s->lfd, true) != 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "store: fcntl: %s", strerror(errno));
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	s->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->epfd < 0 || s->wakefd < 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "store: epoll/eventfd: %s",
				strerror(errno));
	rc = epoll_watch(s, s->lfd, &tag_listen, err);
	if (rc == 0)
		rc = epoll_watch(s, s->wakefd, &tag_wake, err);
	return rc;
}

int dpg_store_server_start(const char *addr, uint16_t port,
			   const uint8_t *secret, size_t secret_len,
			   struct dpg_store_server **out, struct dpg_err *err)
{
	struct dpg_store_server *s = NULL;
	int rc;

	rc = dpg_wire_check_secret(secret, secret_len, err);
	if (rc == 0)
		rc = server_new(secret, secret_len, &s, err);
	if (rc != 0)
		return rc;
	rc = server_listen(s, addr, port, err);
	if (rc != 0) {
		server_free(s);
		return rc;
	}
	rc = dpg_thread_start(&s->th, server_main, s);
	if (rc != 0) {
		server_free(s);
		return dpg_errs(err, DPG_ERR_SYSTEM, "store: cannot start the server "
				"thread: %s", strerror(rc));
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

void dpg_store_server_stats(const struct dpg_store_server *s,
			    struct dpg_store_server_stats *st)
{
	st->unauth = s->nunauth;
	st->parked = s->nparked;
	st->parked_bytes = s->parked_bytes;
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
