/* SPDX-License-Identifier: BSD-3-Clause */
/* store_relay.c - a node leader's relay to rank 0's store: local ranks speak
 * the unchanged store protocol to it on an abstract Unix socket, it forwards
 * their requests over one authenticated upstream connection.
 *
 * One epoll thread.  Local clients are challenged with the job secret like
 * the store challenges its clients (a local stranger cannot read keys).  Each
 * request goes upstream under a fresh id; a pending entry maps the reply
 * back to (local connection, its id).  A CANCEL is forwarded with the id
 * remapped, so every call keeps its own deadline end to end; a local
 * connection that ends has what it left parked cancelled upstream, which is
 * what the store does itself when a direct client ends.  A local client's
 * JOIN (its world rank) is answered here, never forwarded: the relay keeps
 * the set of ranks it carries and registers it again upstream (one SET at a
 * time, coalesced), so that the store can name them if the leader dies.
 * When upstream ends
 * (rank 0's store stopped, or died), every local connection is closed, so a
 * local rank sees what it would see with its own connection.  stop() in a
 * forked child does nothing (the thread is the parent's). */
#include "store_relay.h"
#include "thread.h"
#include "store_table.h"	/* struct dl */
#include "store_wire.h"
#include "le.h"
#include "net.h"
#include "digest.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define RELAY_AUTH_MS 2000		/* a local client must authenticate in this */
#define RELAY_UNAUTH_MAX 256		/* local connections not authenticated yet */
#define REPLY_BODY_MAX (DPG_STORE_VALUE_MAX + 64)
#define RELAY_RANKS_MAX 4096		/* ranks named in the registration */
#define RELAY_NODE_MAX 128

struct buf {
	uint8_t *p;
	size_t off, len, cap;		/* bytes p[off..len) are live */
};

enum { LC_AUTH, LC_READY, LC_REFUSING };

struct lconn {
	int fd;
	uint8_t state;
	bool closed;
	uint32_t events;
	struct dl node;			/* relay->conns */
	struct lconn *gnext;		/* relay->graveyard */
	int64_t auth_deadline;
	int rank;			/* JOINed as this world rank, -1 before */
	uint8_t nonce[DPG_WIRE_NONCE];
	struct buf in, out;
};

/* A request forwarded upstream, waiting for its reply. */
struct pend {
	struct dl node;			/* relay->pend */
	uint32_t upid, id;
	struct lconn *c;
};

struct dpg_store_relay {
	pthread_t th;
	bool started;
	pid_t pid;
	int lfd, upfd, epfd, wakefd;
	uint32_t upevents;
	bool up_dead;
	struct dpg_wire_key key;
	struct buf upin, upout;
	struct dl conns, pend;
	struct lconn *graveyard;
	uint32_t next_upid;
	size_t nunauth;
	_Atomic size_t nclients, npending;
	_Atomic int up;
	char name[DPG_RELAY_NAME_MAX];
	/* who leads, and the ranks that JOINed (sorted, distinct) */
	int lead_rank, local_ranks;
	char node[RELAY_NODE_MAX];
	int *ranks;
	size_t nranks, rcap;
	bool label_dirty;		/* ranks changed since the last registration */
	uint32_t label_upid;		/* the registration in flight (0: none) */
};

static char tag_listen, tag_wake, tag_up;

/* ------------------------------------------------------------ buffers */

static bool buf_room(struct buf *b, size_t n)
{
	uint8_t *np;
	size_t cap;

	if (b->off > 0 && b->off == b->len)
		b->off = b->len = 0;
	if (b->cap - b->len >= n)
		return true;
	if (b->off > 0) {
		memmove(b->p, b->p + b->off, b->len - b->off);
		b->len -= b->off;
		b->off = 0;
		if (b->cap - b->len >= n)
			return true;
	}
	cap = b->cap ? b->cap : 4096;
	while (cap - b->len < n)
		cap *= 2;
	np = realloc(b->p, cap);
	if (np == NULL)
		return false;
	b->p = np;
	b->cap = cap;
	return true;
}

static bool buf_put(struct buf *b, const void *p, size_t n)
{
	if (!buf_room(b, n))
		return false;
	memcpy(b->p + b->len, p, n);
	b->len += n;
	return true;
}

/* A message with its header's id replaced. */
static bool buf_put_msg(struct buf *b, const uint8_t *m, size_t n, uint32_t id)
{
	if (!buf_put(b, m, n))
		return false;
	dpg_le_put32(b->p + b->len - n + 8, id);
	return true;
}

static void buf_free(struct buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* Send what fd takes now: 0, or -1 when the peer is gone. */
static int buf_flush(int fd, struct buf *b)
{
	while (b->off < b->len) {
		ssize_t n = send(fd, b->p + b->off, b->len - b->off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
		b->off += (size_t)n;
	}
	b->off = b->len = 0;
	return 0;
}

/* Read what fd holds: 1 got some or nothing yet, 0 closed, -1 error. */
static int buf_fill(int fd, struct buf *b, size_t want)
{
	for (int i = 0; i < 8; i++) {
		ssize_t n;

		if (!buf_room(b, want))
			return -1;
		n = recv(fd, b->p + b->len, b->cap - b->len, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? 1 : -1;
		if (n == 0)
			return 0;
		b->len += (size_t)n;
		if (b->len < b->cap)
			break;
	}
	return 1;
}

/* ------------------------------------------------------------ ranks */

char *dpg_rank_ranges(const int *r, size_t n, char *buf, size_t len)
{
	static const char cut[] = ", ...";
	size_t o = 0, i = 0;

	if (len == 0)
		return buf;
	buf[0] = '\0';
	while (i < n) {
		size_t j = i;
		char piece[32];
		int k;

		while (j + 1 < n && r[j + 1] == r[j] + 1)
			j++;
		k = j == i ? snprintf(piece, sizeof(piece), "%s%d", o ? ", " : "", r[i]) :
		    snprintf(piece, sizeof(piece), "%s%d-%d", o ? ", " : "", r[i], r[j]);
		/* room for this piece, and for the cut mark if more follow */
		if (k < 0 || o + (size_t)k + (j + 1 < n ? sizeof(cut) - 1 : 0) >= len) {
			if (o + sizeof(cut) - 1 < len)
				memcpy(buf + o, cut, sizeof(cut));
			return buf;
		}
		memcpy(buf + o, piece, (size_t)k + 1);
		o += (size_t)k;
		i = j + 1;
	}
	return buf;
}

/* Add rank to the sorted set; true if it is new. */
static bool ranks_add(struct dpg_store_relay *r, int rank)
{
	size_t lo = 0, hi = r->nranks;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (r->ranks[mid] == rank)
			return false;
		if (r->ranks[mid] < rank)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (r->nranks == r->rcap) {
		size_t cap = r->rcap ? r->rcap * 2 : 16;
		int *np;

		if (r->rcap >= RELAY_RANKS_MAX || (np = realloc(r->ranks, cap * sizeof(*np))) == NULL)
			return false;
		r->ranks = np;
		r->rcap = cap;
	}
	memmove(r->ranks + lo + 1, r->ranks + lo, (r->nranks - lo) * sizeof(*r->ranks));
	r->ranks[lo] = rank;
	r->nranks++;
	return true;
}

/* What the relay registers upstream: the leader and the ranks it carries. */
static void make_label(const struct dpg_store_relay *r, char *buf, size_t len)
{
	char list[160];
	int n = snprintf(buf, len, "node leader rank %d on %s", r->lead_rank, r->node);

	if (n < 0 || (size_t)n >= len)
		return;
	if (r->nranks == 0) {
		snprintf(buf + n, len - (size_t)n, ", carrying its %d local ranks (none "
			 "joined yet)", r->local_ranks);
		return;
	}
	n += snprintf(buf + n, len - (size_t)n, ", carrying rank%s %s", r->nranks > 1 ? "s" : "",
		      dpg_rank_ranges(r->ranks, r->nranks, list, sizeof(list)));
	if ((size_t)n < len && (int)r->nranks < r->local_ranks)
		snprintf(buf + n, len - (size_t)n, " (%d of its %d local ranks not "
			 "joined yet)", r->local_ranks - (int)r->nranks, r->local_ranks);
}

/* ------------------------------------------------------------ epoll */

static void watch(struct dpg_store_relay *r, int fd, void *tag, uint32_t *have,
		  uint32_t want)
{
	struct epoll_event ev = { .events = want, .data.ptr = tag };

	if (want != *have && epoll_ctl(r->epfd, EPOLL_CTL_MOD, fd, &ev) == 0)
		*have = want;
}

/* ------------------------------------------------------------ pending */

static struct pend *pend_find(struct dpg_store_relay *r, const struct lconn *c,
			      uint32_t upid, uint32_t id)
{
	for (struct dl *it = r->pend.next; it != &r->pend; it = it->next) {
		struct pend *p = container_of(it, struct pend, node);

		if (c == NULL ? p->upid == upid : (p->c == c && p->id == id))
			return p;
	}
	return NULL;
}

static void pend_free(struct dpg_store_relay *r, struct pend *p)
{
	dl_del(&p->node);
	free(p);
	r->npending--;
}

static uint32_t new_upid(struct dpg_store_relay *r)
{
	if (++r->next_upid == 0)
		r->next_upid = 1;
	return r->next_upid;
}

/* Ask the store to forget the request it knows as upid. */
static void cancel_up(struct dpg_store_relay *r, uint32_t upid)
{
	uint8_t m[DPG_WIRE_HDR + 4];

	dpg_wire_hdr_put(m, DPG_OP_CANCEL, 0, new_upid(r), 4);
	dpg_le_put32(m + DPG_WIRE_HDR, upid);
	if (!buf_put(&r->upout, m, sizeof(m)))
		r->up_dead = true;
}

/* ------------------------------------------------------------ local clients */

static void lconn_close(struct dpg_store_relay *r, struct lconn *c)
{
	struct dl *it, *next;

	if (c->closed)
		return;
	for (it = r->pend.next; it != &r->pend; it = next) {
		struct pend *p = container_of(it, struct pend, node);

		next = it->next;
		if (p->c == c) {
			if (!r->up_dead)
				cancel_up(r, p->upid);
			pend_free(r, p);
		}
	}
	if (c->state != LC_READY)
		r->nunauth--;
	dl_del(&c->node);
	epoll_ctl(r->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	buf_free(&c->in);
	buf_free(&c->out);
	c->closed = true;
	c->gnext = r->graveyard;
	r->graveyard = c;
	r->nclients--;
}

static void lconn_accept(struct dpg_store_relay *r)
{
	for (int i = 0; i < 64; i++) {
		struct epoll_event ev = { .events = EPOLLIN };
		uint8_t hello[DPG_WIRE_HDR + DPG_WIRE_NONCE];
		int fd = accept4(r->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct lconn *c;

		if (fd < 0 && (errno == EINTR || errno == ECONNABORTED))
			continue;
		if (fd < 0)
			return;
		c = calloc(1, sizeof(*c));
		if (c == NULL || r->nunauth >= RELAY_UNAUTH_MAX ||
		    dpg_wire_random(c->nonce, DPG_WIRE_NONCE, NULL) != 0) {
			free(c);
			close(fd);
			continue;
		}
		c->fd = fd;
		c->rank = -1;
		c->state = LC_AUTH;
		c->auth_deadline = dpg_now_ms() + RELAY_AUTH_MS;
		ev.data.ptr = c;
		dpg_wire_hdr_put(hello, DPG_OP_HELLO, DPG_WIRE_OK, 0, DPG_WIRE_NONCE);
		memcpy(hello + DPG_WIRE_HDR, c->nonce, DPG_WIRE_NONCE);
		if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, fd, &ev) != 0 ||
		    !buf_put(&c->out, hello, sizeof(hello))) {
			close(fd);
			buf_free(&c->out);
			free(c);
			continue;
		}
		c->events = EPOLLIN;
		dl_add_tail(&r->conns, &c->node);
		r->nunauth++;
		r->nclients++;
	}
}

/* The client's AUTH: check its MAC, answer our proof (or refuse). */
static bool lconn_auth(struct dpg_store_relay *r, struct lconn *c,
		       const struct dpg_wire_hdr *h, const uint8_t *body)
{
	uint8_t want[DPG_WIRE_MAC], reply[DPG_WIRE_HDR + DPG_WIRE_MAC];

	if (h->op != DPG_OP_AUTH || h->len != DPG_WIRE_NONCE + DPG_WIRE_MAC)
		return false;
	if (dpg_wire_auth_mac(&r->key, DPG_WIRE_LABEL_CLIENT, c->nonce, body, want) != 0 ||
	    dpg_wire_auth_mac(&r->key, DPG_WIRE_LABEL_SERVER, c->nonce, body,
			      reply + DPG_WIRE_HDR) != 0)
		return false;
	if (!dpg_ct_equal(want, body + DPG_WIRE_NONCE, DPG_WIRE_MAC)) {
		static const char msg[] = "job secret mismatch";
		uint8_t no[DPG_WIRE_HDR + sizeof(msg) - 1];

		dpg_wire_hdr_put(no, DPG_OP_AUTH | DPG_OP_REPLY, DPG_WIRE_REFUSED, h->id,
				 sizeof(msg) - 1);
		memcpy(no + DPG_WIRE_HDR, msg, sizeof(msg) - 1);
		c->state = LC_REFUSING;
		return buf_put(&c->out, no, sizeof(no));
	}
	dpg_wire_hdr_put(reply, DPG_OP_AUTH | DPG_OP_REPLY, DPG_WIRE_OK, h->id, DPG_WIRE_MAC);
	c->state = LC_READY;
	r->nunauth--;
	return buf_put(&c->out, reply, sizeof(reply));
}

/* A header a local client may send now. */
static bool req_ok(const struct lconn *c, const struct dpg_wire_hdr *h)
{
	uint32_t max = dpg_wire_body_max(h->op);

	if (h->magic != DPG_WIRE_MAGIC || h->version != DPG_WIRE_VERSION ||
	    h->flags != 0 || max == 0 || h->len > max)
		return false;
	return c->state == LC_AUTH ? h->op == DPG_OP_AUTH : h->op != DPG_OP_AUTH;
}

/* Forward one request upstream under a fresh id (a CANCEL: the id of what
 * it cancels remapped, or nothing if that is answered already). */
static bool forward(struct dpg_store_relay *r, struct lconn *c,
		    const struct dpg_wire_hdr *h, const uint8_t *m)
{
	struct pend *p;

	if (h->op == DPG_OP_CANCEL) {
		if (h->len != 4)
			return false;
		p = pend_find(r, c, 0, dpg_le_get32(m + DPG_WIRE_HDR));
		if (p != NULL) {
			cancel_up(r, p->upid);
			pend_free(r, p);
		}
		return true;
	}
	p = malloc(sizeof(*p));
	if (p == NULL)
		return false;
	p->upid = new_upid(r);
	p->id = h->id;
	p->c = c;
	dl_add_tail(&r->pend, &p->node);
	r->npending++;
	if (!buf_put_msg(&r->upout, m, DPG_WIRE_HDR + h->len, p->upid))
		r->up_dead = true;
	return true;
}

/* A local client says which world rank it is: answer who leads, and mark
 * the registration for renewal if the rank is new here. */
static bool join(struct dpg_store_relay *r, struct lconn *c, const struct dpg_wire_hdr *h,
		 const uint8_t *body)
{
	uint8_t m[DPG_WIRE_HDR + 160];
	uint32_t v;
	int n;

	if (h->len != 4 || (v = dpg_le_get32(body)) > INT32_MAX ||
	    (c->rank >= 0 && c->rank != (int)v))
		return false;
	c->rank = (int)v;
	if (ranks_add(r, c->rank))
		r->label_dirty = true;
	n = snprintf((char *)m + DPG_WIRE_HDR, sizeof(m) - DPG_WIRE_HDR,
		     "rank %d, local rank 0 on %s", r->lead_rank, r->node);
	if (n < 0 || (size_t)n >= sizeof(m) - DPG_WIRE_HDR)
		n = (int)(sizeof(m) - DPG_WIRE_HDR - 1);
	dpg_wire_hdr_put(m, DPG_OP_JOIN | DPG_OP_REPLY, DPG_WIRE_OK, h->id, (uint32_t)n);
	return buf_put(&c->out, m, DPG_WIRE_HDR + (size_t)n);
}

/* Send the registration again if the ranks changed and none is in flight. */
static void label_renew(struct dpg_store_relay *r)
{
	char key[sizeof(DPG_RELAY_KEY_PREFIX) + DPG_RELAY_NAME_MAX], label[DPG_RELAY_LABEL_MAX];
	uint8_t m[DPG_WIRE_HDR + 4 + sizeof(key) + sizeof(label)];
	size_t kl, ll;

	if (!r->label_dirty || r->label_upid != 0 || r->up_dead)
		return;
	kl = (size_t)snprintf(key, sizeof(key), "%s%s", DPG_RELAY_KEY_PREFIX, r->name);
	make_label(r, label, sizeof(label));
	ll = strlen(label);
	r->label_upid = new_upid(r);
	dpg_wire_hdr_put(m, DPG_OP_SET, 0, r->label_upid, (uint32_t)(4 + kl + ll));
	dpg_le_put32(m + DPG_WIRE_HDR, (uint32_t)kl);
	memcpy(m + DPG_WIRE_HDR + 4, key, kl);
	memcpy(m + DPG_WIRE_HDR + 4 + kl, label, ll);
	if (!buf_put(&r->upout, m, DPG_WIRE_HDR + 4 + kl + ll))
		r->up_dead = true;
	r->label_dirty = false;
}

/* Act on every complete message from c; false: close it. */
static bool lconn_dispatch(struct dpg_store_relay *r, struct lconn *c)
{
	struct buf *b = &c->in;

	while (b->len - b->off >= DPG_WIRE_HDR && c->state != LC_REFUSING) {
		const uint8_t *m = b->p + b->off;
		struct dpg_wire_hdr h;
		bool ok;

		dpg_wire_hdr_get(m, &h);
		if (!req_ok(c, &h))
			return false;
		if (b->len - b->off < DPG_WIRE_HDR + (size_t)h.len)
			break;
		ok = c->state == LC_AUTH ? lconn_auth(r, c, &h, m + DPG_WIRE_HDR) :
		     h.op == DPG_OP_JOIN ? join(r, c, &h, m + DPG_WIRE_HDR) :
		     forward(r, c, &h, m);
		if (!ok)
			return false;
		b->off += DPG_WIRE_HDR + h.len;
	}
	return true;
}

static void lconn_read(struct dpg_store_relay *r, struct lconn *c)
{
	size_t want = c->state == LC_AUTH ? DPG_WIRE_HDR + DPG_WIRE_NONCE + DPG_WIRE_MAC :
		      4096;

	if (c->in.len - c->in.off >= DPG_WIRE_HDR) {
		struct dpg_wire_hdr h;

		dpg_wire_hdr_get(c->in.p + c->in.off, &h);
		if (h.len <= dpg_wire_body_max(h.op))
			want = DPG_WIRE_HDR + (size_t)h.len;
	}
	if (c->state == LC_REFUSING || buf_fill(c->fd, &c->in, want) <= 0 ||
	    !lconn_dispatch(r, c))
		lconn_close(r, c);
}

/* ------------------------------------------------------------ upstream */

/* Route every complete reply from upstream to the local client that asked. */
static void up_dispatch(struct dpg_store_relay *r)
{
	struct buf *b = &r->upin;

	while (b->len - b->off >= DPG_WIRE_HDR) {
		const uint8_t *m = b->p + b->off;
		struct dpg_wire_hdr h;
		struct pend *p;

		dpg_wire_hdr_get(m, &h);
		if (h.magic != DPG_WIRE_MAGIC || h.version != DPG_WIRE_VERSION ||
		    h.len > REPLY_BODY_MAX || !(h.op & DPG_OP_REPLY)) {
			r->up_dead = true;
			return;
		}
		if (b->len - b->off < DPG_WIRE_HDR + (size_t)h.len)
			return;
		p = h.id == r->label_upid ? NULL : pend_find(r, NULL, h.id, 0);
		if (h.id == r->label_upid)
			r->label_upid = 0;	/* our registration's answer */
		if (p != NULL) {	/* else: cancelled, or its client left */
			if (!buf_put_msg(&p->c->out, m, DPG_WIRE_HDR + h.len, p->id))
				lconn_close(r, p->c);
			else
				pend_free(r, p);
		}
		b->off += DPG_WIRE_HDR + h.len;
	}
}

static void up_read(struct dpg_store_relay *r)
{
	size_t want = 4096;

	if (r->upin.len - r->upin.off >= DPG_WIRE_HDR) {
		struct dpg_wire_hdr h;

		dpg_wire_hdr_get(r->upin.p + r->upin.off, &h);
		if (h.len <= REPLY_BODY_MAX)
			want = DPG_WIRE_HDR + (size_t)h.len;
	}
	if (buf_fill(r->upfd, &r->upin, want) <= 0)
		r->up_dead = true;
	else
		up_dispatch(r);
}

/* Upstream is gone: so is every local connection, and the listener. */
static void up_lost(struct dpg_store_relay *r)
{
	if (r->upfd < 0)
		return;
	while (!dl_empty(&r->conns))
		lconn_close(r, container_of(r->conns.next, struct lconn, node));
	while (!dl_empty(&r->pend))
		pend_free(r, container_of(r->pend.next, struct pend, node));
	epoll_ctl(r->epfd, EPOLL_CTL_DEL, r->upfd, NULL);
	close(r->upfd);
	r->upfd = -1;
	if (r->lfd >= 0) {
		epoll_ctl(r->epfd, EPOLL_CTL_DEL, r->lfd, NULL);
		close(r->lfd);
		r->lfd = -1;
	}
	r->up = 0;
}

/* ------------------------------------------------------------ loop */

static void flush_all(struct dpg_store_relay *r)
{
	struct dl *it, *next;

	label_renew(r);
	if (!r->up_dead && buf_flush(r->upfd, &r->upout) != 0)
		r->up_dead = true;
	if (r->up_dead) {
		up_lost(r);
		return;
	}
	watch(r, r->upfd, &tag_up, &r->upevents,
	      EPOLLIN | (r->upout.len > r->upout.off ? EPOLLOUT : 0));
	for (it = r->conns.next; it != &r->conns; it = next) {
		struct lconn *c = container_of(it, struct lconn, node);

		next = it->next;
		if (buf_flush(c->fd, &c->out) != 0 ||
		    (c->state == LC_REFUSING && c->out.len == c->out.off))
			lconn_close(r, c);
		else
			watch(r, c->fd, c, &c->events,
			      (c->state == LC_REFUSING ? 0 : EPOLLIN) |
			      (c->out.len > c->out.off ? EPOLLOUT : 0));
	}
}

static void expire_auth(struct dpg_store_relay *r)
{
	int64_t now = dpg_now_ms();
	struct dl *it, *next;

	for (it = r->conns.next; it != &r->conns; it = next) {
		struct lconn *c = container_of(it, struct lconn, node);

		next = it->next;
		if (c->state != LC_READY && c->auth_deadline <= now)
			lconn_close(r, c);
	}
}

static void bury(struct dpg_store_relay *r)
{
	while (r->graveyard != NULL) {
		struct lconn *c = r->graveyard;

		r->graveyard = c->gnext;
		free(c);
	}
}

static bool loop_event(struct dpg_store_relay *r, const struct epoll_event *ev)
{
	void *p = ev->data.ptr;

	if (p == &tag_wake)
		return false;
	if (p == &tag_listen && r->lfd >= 0)
		lconn_accept(r);
	else if (p == &tag_up && r->upfd >= 0 && (ev->events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		up_read(r);
	else if (p != &tag_listen && p != &tag_up && !((struct lconn *)p)->closed &&
		 (ev->events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		lconn_read(r, p);
	return true;
}

static void *relay_main(void *arg)
{
	struct dpg_store_relay *r = arg;
	struct epoll_event evs[64];
	bool run = true;

	while (run) {
		int n = epoll_wait(r->epfd, evs, 64, r->nunauth > 0 ? 250 : -1);

		if (n < 0 && errno != EINTR)
			break;
		for (int i = 0; i < n; i++)
			if (!loop_event(r, &evs[i]))
				run = false;
		if (r->upfd >= 0)
			flush_all(r);
		expire_auth(r);
		bury(r);
	}
	dpg_digest_thread_stop();
	return NULL;
}

/* ------------------------------------------------------------ API */

void dpg_store_relay_name(const char *ns, const char *node, const char *host,
			  uint16_t port, char out[DPG_RELAY_NAME_MAX])
{
	uint64_t h = 0xcbf29ce484222325ull;	/* FNV-1a over what every local rank knows */
	const char *parts[3] = { ns, node, host };

	for (int i = 0; i < 3; i++) {
		for (const char *p = parts[i] != NULL ? parts[i] : ""; *p; p++)
			h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
		h = (h ^ 0xff) * 0x100000001b3ull;
	}
	snprintf(out, DPG_RELAY_NAME_MAX, "dpg-store-relay.%u.%016llx", (unsigned)port,
		 (unsigned long long)h);
}

static void relay_free(struct dpg_store_relay *r)
{
	if (r->upfd >= 0)
		up_lost(r);
	while (!dl_empty(&r->pend))
		pend_free(r, container_of(r->pend.next, struct pend, node));
	bury(r);
	buf_free(&r->upin);
	buf_free(&r->upout);
	if (r->lfd >= 0)
		close(r->lfd);
	if (r->epfd >= 0)
		close(r->epfd);
	if (r->wakefd >= 0)
		close(r->wakefd);
	explicit_bzero(&r->key, sizeof(r->key));
	free(r->ranks);
	free(r);
}

/* Listen on the abstract socket name. */
static int relay_listen(struct dpg_store_relay *r, const char *name, struct dpg_err *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n = strlen(name);
	socklen_t sl = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);

	r->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (r->lfd < 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "store relay: socket(AF_UNIX): %s",
				strerror(errno));
	memcpy(sa.sun_path + 1, name, n);
	if (bind(r->lfd, (struct sockaddr *)&sa, sl) != 0)
		return dpg_errs(err, errno == EADDRINUSE ? DPG_ERR_ENV : DPG_ERR_SYSTEM,
				"store relay: cannot listen on '@%s': %s%s", name,
				strerror(errno), errno == EADDRINUSE ? " (a second local "
				"rank 0 of this job on this node?)" : "");
	if (listen(r->lfd, 256) != 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "store relay: listen: %s",
				strerror(errno));
	return 0;
}

/* The one upstream connection, registered under DPG_RELAY_KEY_PREFIX name. */
static int relay_upstream(struct dpg_store_relay *r, const char *host, uint16_t port,
			  const uint8_t *secret, size_t slen, int64_t deadline,
			  const volatile int *abort, struct dpg_err *err)
{
	char key[sizeof(DPG_RELAY_KEY_PREFIX) + DPG_RELAY_NAME_MAX], label[DPG_RELAY_LABEL_MAX];
	struct dpg_store *s = NULL;
	int rc = dpg_store_connect(host, port, secret, slen, deadline, abort, &s, err);

	snprintf(key, sizeof(key), "%s%s", DPG_RELAY_KEY_PREFIX, r->name);
	make_label(r, label, sizeof(label));
	if (rc == 0)
		rc = dpg_store_set(s, key, label, strlen(label), deadline, err);
	if (rc != 0) {
		dpg_store_close(s);
		return rc;
	}
	r->upfd = dpg_store_take_fd(s);
	if (dpg_net_set_nonblock(r->upfd, true) != 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "store relay: fcntl: %s", strerror(errno));
	r->up = 1;
	return 0;
}

static int relay_loop_setup(struct dpg_store_relay *r, struct dpg_err *err)
{
	struct epoll_event l = { .events = EPOLLIN, .data.ptr = &tag_listen };
	struct epoll_event w = { .events = EPOLLIN, .data.ptr = &tag_wake };
	struct epoll_event u = { .events = EPOLLIN, .data.ptr = &tag_up };

	r->epfd = epoll_create1(EPOLL_CLOEXEC);
	r->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (r->epfd < 0 || r->wakefd < 0 ||
	    epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->lfd, &l) != 0 ||
	    epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->wakefd, &w) != 0 ||
	    epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->upfd, &u) != 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "store relay: epoll: %s", strerror(errno));
	r->upevents = EPOLLIN;
	return 0;
}

int dpg_store_relay_start(const char *name, const char *host, uint16_t port,
			  const uint8_t *secret, size_t secret_len,
			  const struct dpg_relay_leader *who, int64_t deadline_ms,
			  const volatile int *abort, struct dpg_store_relay **out,
			  struct dpg_err *err)
{
	struct dpg_store_relay *r;
	int rc = dpg_wire_check_secret(secret, secret_len, err);

	if (rc != 0)
		return rc;
	if (name == NULL || name[0] == '\0' || strlen(name) >= DPG_RELAY_NAME_MAX)
		return dpg_errf(err, "store relay: bad socket name");
	if (who == NULL || who->rank < 0 || who->local_ranks < 1)
		return dpg_errf(err, "store relay: no leader rank or local rank count");
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return dpg_errs(err, DPG_ERR_NOMEM, "store relay: out of memory");
	r->lfd = r->upfd = r->epfd = r->wakefd = -1;
	dl_init(&r->conns);
	dl_init(&r->pend);
	memcpy(r->key.k, secret, secret_len);
	r->key.len = secret_len;
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->lead_rank = who->rank;
	r->local_ranks = who->local_ranks;
	snprintf(r->node, sizeof(r->node), "%s", who->node != NULL && who->node[0] != '\0' ?
		 who->node : "?");
	rc = relay_listen(r, name, err);
	if (rc == 0)
		rc = relay_upstream(r, host, port, secret, secret_len, deadline_ms, abort, err);
	if (rc == 0)
		rc = relay_loop_setup(r, err);
	if (rc == 0 && (rc = dpg_thread_start(&r->th, relay_main, r)) != 0)
		rc = dpg_errs(err, DPG_ERR_SYSTEM, "store relay: cannot start its thread: %s",
			      strerror(rc));
	if (rc != 0) {
		relay_free(r);
		return rc;
	}
	r->started = true;
	r->pid = getpid();
	*out = r;
	return 0;
}

void dpg_store_relay_stats(const struct dpg_store_relay *r,
			   struct dpg_store_relay_stats *st)
{
	st->clients = r->nclients;
	st->pending = r->npending;
	st->upstream_up = r->up;
}

void dpg_store_relay_stop(struct dpg_store_relay *r)
{
	uint64_t one = 1;

	if (r == NULL || (r->started && getpid() != r->pid))
		return;
	if (r->started) {
		while (write(r->wakefd, &one, sizeof(one)) < 0 && errno == EINTR)
			;
		pthread_join(r->th, NULL);
	}
	relay_free(r);
}
