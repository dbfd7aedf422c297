/* SPDX-License-Identifier: BSD-3-Clause */
/* hops.c - the CPU backend's TCP hops, connected by one non-blocking poll
 * loop: our two channels to the next rank and the previous rank's to us.
 *
 * Outgoing (struct out): connect -> read the challenge -> send the hello ->
 * read the ack; a refusal, a close or a bad challenge starts over after a
 * backoff.  Incoming (struct in): accept -> send a challenge -> read the
 * hello by a short per-connection deadline -> check it -> ack.  Up to
 * PEND_MAX handshakes run at once (the oldest is dropped for a newer one),
 * so strangers at our port cost one failed handshake each and never hold
 * up a real peer.
 */
#include "hops.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net.h"

#define PEND_MAX 64		/* handshakes served at once on our port */
#define HELLO_MS 1000		/* one handshake's deadline */
#define SLICE_MS 100		/* longest poll: the abort flag is noticed */
#define BACKOFF_MAX_MS 250

enum { OUT_IDLE, OUT_CONNECTING, OUT_CHALLENGE, OUT_ACK, OUT_DONE };

struct out {
	int fd, st;
	size_t got;
	uint8_t buf[DPG_CPU_CHALLENGE_LEN];
	int64_t retry_at, backoff;
	int last_errno;			/* why the last attempt failed */
	bool refused;			/* the peer closed after our hello */
};

struct in {
	int fd;
	int64_t deadline;
	size_t got;
	uint8_t ch[DPG_CPU_CHALLENGE_LEN];
	uint8_t buf[DPG_CPU_HELLO_LEN];
};

struct loop {
	struct dpg_cpu *p;
	const struct dpg_cpu_hops *h;
	struct sockaddr_in to;		/* the next rank's data port */
	struct out out[2];		/* channel -> our connection */
	struct in in[PEND_MAX];		/* in arrival order */
	int nin;
	int strangers;			/* handshakes that failed on our port */
};

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* ------------------------------------------------------------ outgoing */

static void out_retry(struct out *o, int e, int64_t now)
{
	close_fd(&o->fd);
	o->st = OUT_IDLE;
	o->last_errno = e;
	o->retry_at = now + o->backoff;
	o->backoff = o->backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : o->backoff * 2;
}

static void out_start(struct loop *l, struct out *o, int64_t now)
{
	o->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (o->fd < 0) {
		out_retry(o, errno, now);
		return;
	}
	o->got = 0;
	if (connect(o->fd, (const struct sockaddr *)&l->to, sizeof(l->to)) == 0)
		o->st = OUT_CHALLENGE;
	else if (errno == EINPROGRESS)
		o->st = OUT_CONNECTING;
	else
		out_retry(o, errno, now);
}

/* Read toward want bytes into buf: 1 complete, 0 more to come, -1 closed or
 * failed (errno: 0 for EOF). */
static int read_some(int fd, uint8_t *buf, size_t *got, size_t want)
{
	ssize_t r = read(fd, buf + *got, want - *got);

	if (r > 0) {
		*got += (size_t)r;
		return *got == want ? 1 : 0;
	}
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (r == 0)
		errno = 0;
	return -1;
}

static bool write_all(int fd, const void *buf, size_t len)
{
	return send(fd, buf, len, MSG_NOSIGNAL) == (ssize_t)len;
}

/* The challenge is in: send our hello for channel ch. */
static void out_hello(struct loop *l, struct out *o, unsigned ch, int64_t now)
{
	const struct dpg_cpu *p = l->p;
	uint8_t h[DPG_CPU_HELLO_LEN];

	if (!dpg_cpu_hello_make(l->h->key, o->buf, ch, p->rank, p->next.peer,
				l->h->next->token, h)) {
		out_retry(o, EPROTO, now);
		return;
	}
	if (!write_all(o->fd, h, sizeof(h))) {
		out_retry(o, errno, now);
		return;
	}
	o->st = OUT_ACK;
	o->got = 0;
}

static void out_step(struct loop *l, unsigned ch, short rev, int64_t now)
{
	struct out *o = &l->out[ch];
	int e = 0, rc;
	socklen_t el = sizeof(e);

	if (o->st == OUT_CONNECTING) {
		if (getsockopt(o->fd, SOL_SOCKET, SO_ERROR, &e, &el) != 0)
			e = errno;
		if (e != 0)
			out_retry(o, e, now);
		else
			o->st = OUT_CHALLENGE;
		return;
	}
	if (!(rev & (POLLIN | POLLHUP | POLLERR)))
		return;
	rc = read_some(o->fd, o->buf, &o->got,
		       o->st == OUT_CHALLENGE ? DPG_CPU_CHALLENGE_LEN : DPG_CPU_ACK_LEN);
	if (rc < 0) {
		o->refused = o->st == OUT_ACK;
		out_retry(o, errno != 0 ? errno : ECONNRESET, now);
	} else if (rc > 0 && o->st == OUT_CHALLENGE) {
		out_hello(l, o, ch, now);
	} else if (rc > 0 && memcmp(o->buf, DPG_CPU_ACK_MAGIC, DPG_CPU_ACK_LEN) != 0) {
		out_retry(o, EPROTO, now);
	} else if (rc > 0) {
		o->st = OUT_DONE;
		*(ch == 0 ? &l->p->next.fd : &l->p->next.cfd) = o->fd;
		o->fd = -1;
	}
}

/* ------------------------------------------------------------ incoming */

static void in_drop(struct loop *l, int i, bool stranger)
{
	close_fd(&l->in[i].fd);
	memmove(&l->in[i], &l->in[i + 1], (size_t)(l->nin - i - 1) * sizeof(l->in[0]));
	l->nin--;
	l->strangers += stranger ? 1 : 0;
}

/* A new connection on our port: challenge it. */
static void in_add(struct loop *l, int fd, int64_t now)
{
	struct in *c;

	if (l->nin == PEND_MAX)
		in_drop(l, 0, true);	/* the oldest handshake goes */
	c = &l->in[l->nin];
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->deadline = now + HELLO_MS < l->h->deadline ? now + HELLO_MS : l->h->deadline;
	if (dpg_cpu_challenge_make(c->ch) != 0 || !write_all(fd, c->ch, sizeof(c->ch))) {
		close(fd);
		l->strangers++;
		return;
	}
	l->nin++;
}

static void accept_all(struct loop *l, int64_t now)
{
	for (;;) {
		int fd = accept4(l->h->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd >= 0) {
			in_add(l, fd, now);
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if ((errno == EMFILE || errno == ENFILE) && l->nin > 0) {
			in_drop(l, 0, true);	/* make room, then try again */
			continue;
		}
		return;				/* EAGAIN, or nothing we can do now */
	}
}

/* The whole hello is in: the previous rank's channel, or a stranger. */
static void in_hello(struct loop *l, int i)
{
	struct dpg_cpu *p = l->p;
	struct in *c = &l->in[i];
	unsigned ch = 0;
	int from = -1, *slot;

	if (!dpg_cpu_hello_check(l->h->key, c->ch, p->rank, l->h->my_token, c->buf, &ch,
				 &from) || from != p->prev.peer || ch > 1) {
		in_drop(l, i, true);
		return;
	}
	slot = ch == 0 ? &p->prev.fd : &p->prev.cfd;
	if (*slot >= 0 || !write_all(c->fd, DPG_CPU_ACK_MAGIC, DPG_CPU_ACK_LEN)) {
		in_drop(l, i, false);
		return;
	}
	*slot = c->fd;
	c->fd = -1;
	in_drop(l, i, false);
}

/* Advance handshake i (readable, or its deadline passed). */
static void in_step(struct loop *l, int i, short rev, int64_t now)
{
	struct in *c = &l->in[i];
	int rc = 0;

	if (rev & (POLLIN | POLLHUP | POLLERR))
		rc = read_some(c->fd, c->buf, &c->got, sizeof(c->buf));
	if (rc > 0)
		in_hello(l, i);
	else if (rc < 0 || now >= c->deadline)
		in_drop(l, i, true);
}

/* ------------------------------------------------------------ the loop */

static bool prev_done(const struct loop *l)
{
	return !l->h->want_prev || (l->p->prev.fd >= 0 && l->p->prev.cfd >= 0);
}

static bool next_done(const struct loop *l)
{
	return l->h->next == NULL || (l->out[0].st == OUT_DONE && l->out[1].st == OUT_DONE);
}

static int resolve_next(struct loop *l, struct dpg_err *err)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai = NULL;
	int rc = getaddrinfo(l->h->next->host, NULL, &hints, &ai);

	if (rc != 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "cannot resolve '%s' (peer rank %d): %s",
				l->h->next->host, l->p->next.peer, gai_strerror(rc));
	memcpy(&l->to, ai->ai_addr, sizeof(l->to));
	l->to.sin_port = htons((uint16_t)l->h->next->port);
	freeaddrinfo(ai);
	return 0;
}

/* Who never came, by the deadline. */
static int timed_out(const struct loop *l, struct dpg_err *err)
{
	const struct dpg_cpu *p = l->p;
	char nx[160] = "", pv[96] = "";
	const struct out *o = l->out[0].st != OUT_DONE ? &l->out[0] : &l->out[1];

	if (!prev_done(l))
		snprintf(pv, sizeof(pv), "peer rank %d (%s) never connected to us",
			 p->prev.peer, dpg_cpu_host(p, p->prev.peer));
	if (!next_done(l))
		snprintf(nx, sizeof(nx), "peer rank %d (%s) never answered our connection "
			 "to port %u (%s)", p->next.peer, dpg_cpu_host(p, p->next.peer),
			 (unsigned)l->h->next->port, o->refused ? "it refused our hello: "
			 "is DPG_SECRET the same on every rank?" : o->last_errno != 0 ?
			 strerror(o->last_errno) : "no reply");
	return dpg_errs(err, DPG_ERR_TIMEOUT, "cpu backend: timed out connecting the ring: "
			"%s%s%s (%d stranger connection%s refused on our port)", pv,
			pv[0] != '\0' && nx[0] != '\0' ? "; " : "", nx, l->strangers,
			l->strangers == 1 ? "" : "s");
}

/* The poll set: [0] our port, [1..2] our channels, then the handshakes;
 * returns how long poll may sleep. */
static int poll_set(struct loop *l, struct pollfd *pf, int64_t now)
{
	int64_t wake = l->h->deadline < now + SLICE_MS ? l->h->deadline : now + SLICE_MS;
	int i;

	pf[0] = (struct pollfd){ .fd = prev_done(l) ? -1 : l->h->lfd, .events = POLLIN };
	for (i = 0; i < 2; i++) {
		const struct out *o = &l->out[i];

		pf[1 + i] = (struct pollfd){ .fd = -1 };
		if (l->h->next == NULL || o->st == OUT_DONE)
			continue;
		if (o->st == OUT_IDLE && o->retry_at < wake)
			wake = o->retry_at;
		if (o->st != OUT_IDLE)
			pf[1 + i] = (struct pollfd){ .fd = o->fd, .events =
				o->st == OUT_CONNECTING ? POLLOUT : POLLIN };
	}
	for (i = 0; i < l->nin; i++) {
		pf[3 + i] = (struct pollfd){ .fd = l->in[i].fd, .events = POLLIN };
		if (l->in[i].deadline < wake)
			wake = l->in[i].deadline;
	}
	return wake > now ? (int)(wake - now) : 0;
}

/* One round: poll, then advance everything that is ready. */
static void round_once(struct loop *l)
{
	struct pollfd pf[3 + PEND_MAX];
	int64_t now = dpg_now_ms();
	int i, nin = l->nin, ms = poll_set(l, pf, now);

	if (poll(pf, (nfds_t)(3 + nin), ms) < 0 && errno != EINTR)
		usleep(1000);
	now = dpg_now_ms();
	for (i = 0; i < 2 && l->h->next != NULL; i++) {
		if (l->out[i].st == OUT_IDLE && now >= l->out[i].retry_at)
			out_start(l, &l->out[i], now);
		else if (pf[1 + i].fd >= 0 && pf[1 + i].revents != 0)
			out_step(l, (unsigned)i, pf[1 + i].revents, now);
	}
	for (i = nin - 1; i >= 0; i--)	/* backwards: in_drop shifts the rest */
		in_step(l, i, pf[3 + i].revents, now);
	if (pf[0].fd >= 0 && (pf[0].revents & POLLIN))
		accept_all(l, now);
}

static void loop_fini(struct loop *l)
{
	while (l->nin > 0)
		in_drop(l, l->nin - 1, false);
	close_fd(&l->out[0].fd);
	close_fd(&l->out[1].fd);
}

int dpg_cpu_hops_connect(struct dpg_cpu *p, const struct dpg_cpu_hops *h,
			 struct dpg_err *err)
{
	struct loop l = { .p = p, .h = h };
	int rc = 0, i;

	for (i = 0; i < 2; i++)
		l.out[i] = (struct out){ .fd = -1, .st = OUT_IDLE, .backoff = 10 };
	if (h->want_prev && dpg_net_set_nonblock(h->lfd, true) != 0)
		rc = dpg_errs(err, DPG_ERR_SYSTEM, "cpu backend: our port: %s", strerror(errno));
	if (rc == 0 && h->next != NULL)
		rc = resolve_next(&l, err);
	while (rc == 0 && !(prev_done(&l) && next_done(&l))) {
		if (p->uabort != NULL && *p->uabort)
			rc = dpg_errs(err, DPG_ERR_ABORTED, "cpu backend: aborted while "
				      "connecting the ring");
		else if (dpg_now_ms() >= h->deadline)
			rc = timed_out(&l, err);
		else
			round_once(&l);
	}
	loop_fini(&l);
	return rc;
}
