/* SPDX-License-Identifier: BSD-3-Clause */
/* store_sim.c - a job-start rendezvous at scale through the real dpg store
 * server, its ranks simulated by event-driven clients speaking the wire protocol.
 *
 *   store_sim [-c] [-n RANKS] [-r RANKS_PER_CONN] [-N RANKS_PER_NODE] [-p PROCS]
 *             [-a ADDRS] [-t TIMEOUT_S]
 *
 * The server (dpg_store_server_start, lib/runtime) runs in this process and
 * does nothing else; PROCS forked client processes each run one epoll loop
 * over their share of the connections.  Every connection does what
 * dpg_store_connect does (nonblocking connect to 127.0.0.(1 + k % ADDRS) from
 * its node's own source address 127.1.0.1 + rank / RANKS_PER_NODE (default 8),
 * the HELLO challenge, the HMAC-SHA256 AUTH answer, the server's proof
 * checked; closed before the handshake ends: retry after 10 ms doubling to
 * 1 s, like the library), then the job-start shape of store_bench.c for each
 * rank it carries: SET addr/<i>, ADD "arrived" (the N-th arrival SETs "go"),
 * WAIT "go", GET addr/<i+1> checked.
 *
 * -r 1 (default) is dpg's flat store: one connection per rank.  -r R is the
 * node-leader layout seen from rank 0: one connection per node of R ranks,
 * carrying its ranks' R SETs and R GETs pipelined and one ADD of R (the local
 * channel between a node's ranks and their leader is not simulated).
 *
 * The clock starts when the client processes are released (forked, their
 * tables allocated, before any connect) and stops when the last rank has its
 * neighbour's address.  Then, every connection still open, it counts at the
 * store: connections, descriptors, RSS (VmRSS and the peak VmHWM).  One line:
 *   sim ranks=N per_conn=R conns=C procs=P rendezvous_s=S ok=K fail=F
 *       store_fds=D store_rss_mb=M store_hwm_mb=H store_cpu_s=U retries=T
 *       listen_overflows=O collect_s=G [error: first error]
 * collect_s (with -c, else 0): after the rendezvous, one more client GETs
 * addr/0 .. addr/N-1 in turn, as member 0 of dpg_xchg_run (xchg.c) gathers
 * the greetings in dpg_init: a cost that grows with the ranks, not nodes.
 * store_cpu_s: the CPU time of the store (this process) during the run: on a
 * cluster the ranks' own share of the work runs elsewhere, here it competes.
 * retries: handshakes the store cut (it evicts the oldest unauthenticated
 * connection past 1,024); listen_overflows: SYNs the kernel dropped on a full
 * backlog (somaxconn), retried by the client's kernel 1 s later.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "digest.h"
#include "le.h"
#include "net.h"
#include "store.h"
#include "store_wire.h"

/* A simulated connection's phases. */
enum { SC_IDLE, SC_CONNECTING, SC_HELLO, SC_AUTH, SC_ARRIVE, SC_WAIT,
       SC_GET, SC_DONE, SC_FAILED };

struct sc {
	int fd;
	uint8_t st;
	uint16_t pending;		/* replies still due in this phase */
	int first, nr;			/* the ranks it carries */
	int64_t retry_at, backoff;	/* SC_IDLE: when to connect again */
	uint8_t nc[DPG_WIRE_NONCE];	/* our nonce; the server's proof to expect */
	uint8_t want[DPG_WIRE_MAC];
	uint8_t *rbuf, *obuf;
	uint32_t rlen, olen, ooff;
};

struct sim {
	int n, nr, per_node, addrs, epfd;
	uint16_t port;
	struct dpg_wire_key key;
	struct sc *c;
	int count, left;		/* connections here, not yet done or failed */
	int ok, fail;			/* ranks */
	unsigned long retries;
	int nidle;			/* connections waiting to retry */
	int64_t next_retry;		/* the earliest of their times */
	char msg[200];
};

/* What a client process reports. */
struct result {
	int ok, fail;
	unsigned long retries;
	int64_t done_us;		/* CLOCK_MONOTONIC of its last completion */
	char msg[200];
};

#define RBUF(nr) (256u + 64u * (unsigned)(nr))
#define OBUF(nr) (128u + 96u * (unsigned)(nr))

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static rlim_t raise_nofile(void)
{
	struct rlimit r;

	if (getrlimit(RLIMIT_NOFILE, &r) != 0)
		return 0;
	if (r.rlim_cur < r.rlim_max) {
		r.rlim_cur = r.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &r) != 0)
			getrlimit(RLIMIT_NOFILE, &r);
	}
	return r.rlim_cur;
}

static void fail_conn(struct sim *m, struct sc *c, const char *why)
{
	if (m->fail == 0)
		snprintf(m->msg, sizeof(m->msg), "ranks %d..%d: %s", c->first,
			 c->first + c->nr - 1, why);
	m->fail += c->nr;
	m->left--;
	c->st = SC_FAILED;
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

/* ------------------------------------------------------------ requests */

static uint8_t *put_key(uint8_t *p, const char *k)
{
	size_t l = strlen(k);

	dpg_le_put32(p, (uint32_t)l);
	memcpy(p + 4, k, l);
	return p + 4 + l;
}

/* Append a request: header, key, then tail (len bytes; may be NULL). */
static void req(struct sc *c, uint8_t op, const char *key, const void *tail, size_t len)
{
	uint8_t *h = c->obuf + c->olen, *p = h + DPG_WIRE_HDR;

	if (op == DPG_OP_WAIT) {
		dpg_le_put32(p, 1);
		p += 4;
	}
	p = put_key(p, key);
	if (len > 0)
		memcpy(p, tail, len);
	p += len;
	dpg_wire_hdr_put(h, op, 0, ++c->pending, (uint32_t)(p - h - DPG_WIRE_HDR));
	c->olen = (uint32_t)(p - c->obuf);
}

static void addr_value(int i, char *v, size_t cap)
{
	snprintf(v, cap, "host%d:1234", i);
}

/* Send what obuf holds; EPOLLOUT only while some of it is left. */
static int flush(struct sim *m, struct sc *c)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };

	while (c->ooff < c->olen) {
		ssize_t w = send(c->fd, c->obuf + c->ooff, c->olen - c->ooff, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			ev.events |= EPOLLOUT;
			break;
		}
		if (w < 0)
			return -1;
		c->ooff += (uint32_t)w;
	}
	if (c->ooff == c->olen)
		c->ooff = c->olen = 0;
	return epoll_ctl(m->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* ------------------------------------------------------------ connecting */

static void conn_start(struct sim *m, struct sc *c)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(m->port) };
	struct sockaddr_in src = { .sin_family = AF_INET };
	struct epoll_event ev = { .events = EPOLLOUT, .data.ptr = c };
	int one = 1, k = c->first / c->nr;

	sa.sin_addr.s_addr = htonl(0x7f000001u + (uint32_t)(k % m->addrs));
	/* each simulated node has its own source address, as on a cluster */
	src.sin_addr.s_addr = htonl(0x7f010001u + (uint32_t)(c->first / m->per_node));
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		fail_conn(m, c, strerror(errno));
		return;
	}
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(c->fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	if (bind(c->fd, (struct sockaddr *)&src, sizeof(src)) != 0) {
		char w[120];

		snprintf(w, sizeof(w), "bind: %s", strerror(errno));
		fail_conn(m, c, w);
		return;
	}
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 && errno != EINPROGRESS) {
		char w[120];

		snprintf(w, sizeof(w), "connect: %s", strerror(errno));
		fail_conn(m, c, w);
		return;
	}
	c->st = SC_CONNECTING;
	c->rlen = c->olen = c->ooff = 0;
	c->pending = 0;
	if (epoll_ctl(m->epfd, EPOLL_CTL_ADD, c->fd, &ev) != 0)
		fail_conn(m, c, "epoll_ctl");
}

/* Closed before the handshake ended: the library's retry, 10 ms doubling to 1 s. */
static void conn_retry(struct sim *m, struct sc *c, int64_t deadline_us)
{
	close(c->fd);
	c->fd = -1;
	m->retries++;
	if (now_us() + c->backoff * 1000 >= deadline_us) {
		fail_conn(m, c, "timed out connecting (the store kept closing)");
		return;
	}
	c->st = SC_IDLE;
	c->retry_at = now_us() + c->backoff * 1000;
	if (m->nidle++ == 0 || c->retry_at < m->next_retry)
		m->next_retry = c->retry_at;
	c->backoff = c->backoff * 2 > 1000 ? 1000 : c->backoff * 2;
}

/* ------------------------------------------------------------ replies */

/* The phase after a reply; -1 with *why set on a protocol error. */
static int on_hello(struct sim *m, struct sc *c, const struct dpg_wire_hdr *h,
		    const uint8_t *b, const char **why)
{
	uint8_t *p = c->obuf;

	if (h->op != DPG_OP_HELLO || h->len != DPG_WIRE_NONCE) {
		*why = "no HELLO challenge";
		return -1;
	}
	dpg_wire_hdr_put(p, DPG_OP_AUTH, 0, 0, DPG_WIRE_NONCE + DPG_WIRE_MAC);
	if (dpg_wire_random(c->nc, DPG_WIRE_NONCE, NULL) != 0 ||
	    dpg_wire_auth_mac(&m->key, DPG_WIRE_LABEL_CLIENT, b, c->nc,
			      p + DPG_WIRE_HDR + DPG_WIRE_NONCE) != 0 ||
	    dpg_wire_auth_mac(&m->key, DPG_WIRE_LABEL_SERVER, b, c->nc, c->want) != 0) {
		*why = "HMAC failed";
		return -1;
	}
	memcpy(p + DPG_WIRE_HDR, c->nc, DPG_WIRE_NONCE);
	c->olen = DPG_WIRE_HDR + DPG_WIRE_NONCE + DPG_WIRE_MAC;
	c->st = SC_AUTH;
	return 0;
}

static void send_arrive(struct sc *c)
{
	uint8_t d[8];
	char k[32], v[32];
	int i;

	for (i = c->first; i < c->first + c->nr; i++) {
		snprintf(k, sizeof(k), "addr/%d", i);
		addr_value(i, v, sizeof(v));
		req(c, DPG_OP_SET, k, v, strlen(v));
	}
	dpg_le_put64(d, (uint64_t)c->nr);
	req(c, DPG_OP_ADD, "arrived", d, 8);
	c->st = SC_ARRIVE;
}

static int on_auth(struct sc *c, const struct dpg_wire_hdr *h, const uint8_t *b,
		   const char **why)
{
	if (h->op != (DPG_OP_AUTH | DPG_OP_REPLY) || h->flags != DPG_WIRE_OK ||
	    h->len != DPG_WIRE_MAC || !dpg_ct_equal(b, c->want, DPG_WIRE_MAC)) {
		*why = h->flags == DPG_WIRE_REFUSED ? "the store refused our secret" :
			"the store failed to prove it knows the secret";
		return -1;
	}
	send_arrive(c);
	return 0;
}

static void send_gets(struct sim *m, struct sc *c)
{
	char k[32];
	int i;

	for (i = c->first; i < c->first + c->nr; i++) {
		snprintf(k, sizeof(k), "addr/%d", (i + 1) % m->n);
		req(c, DPG_OP_GET, k, NULL, 0);
	}
	c->st = SC_GET;
}

/* A reply in the request phases (ids count from 1 within a phase). */
static int on_reply(struct sim *m, struct sc *c, const struct dpg_wire_hdr *h,
		    const uint8_t *b, const char **why)
{
	if (h->flags != DPG_WIRE_OK) {
		*why = "the store answered an error";
		return -1;
	}
	if (c->st == SC_ARRIVE && h->op == (DPG_OP_ADD | DPG_OP_REPLY) && h->len == 8 &&
	    (int64_t)dpg_le_get64(b) == m->n) {
		req(c, DPG_OP_SET, "go", "1", 1);	/* one more reply due */
	}
	if (c->st == SC_GET) {
		char want[32];
		int i = c->first + (int)h->id - 1;

		addr_value((i + 1) % m->n, want, sizeof(want));
		if (h->len != strlen(want) || memcmp(b, want, h->len) != 0) {
			*why = "GET returned a wrong address";
			return -1;
		}
	}
	if (--c->pending > 0)
		return 0;
	switch (c->st) {
	case SC_ARRIVE:
		req(c, DPG_OP_WAIT, "go", NULL, 0);
		c->st = SC_WAIT;
		break;
	case SC_WAIT:
		send_gets(m, c);
		break;
	case SC_GET:
		c->st = SC_DONE;
		break;
	}
	return 0;
}

/* Parse what rbuf holds; -1 with *why on a protocol error. */
static int parse(struct sim *m, struct sc *c, const char **why)
{
	uint32_t off = 0;

	while (c->rlen - off >= DPG_WIRE_HDR) {
		struct dpg_wire_hdr h;
		const uint8_t *b = c->rbuf + off + DPG_WIRE_HDR;
		int rc;

		dpg_wire_hdr_get(c->rbuf + off, &h);
		if (h.magic != DPG_WIRE_MAGIC || h.len > RBUF(c->nr) - DPG_WIRE_HDR) {
			*why = "garbled reply";
			return -1;
		}
		if (c->rlen - off < DPG_WIRE_HDR + h.len)
			break;
		if (c->st == SC_HELLO)
			rc = on_hello(m, c, &h, b, why);
		else if (c->st == SC_AUTH)
			rc = on_auth(c, &h, b, why);
		else
			rc = on_reply(m, c, &h, b, why);
		if (rc != 0)
			return rc;
		off += DPG_WIRE_HDR + h.len;
	}
	memmove(c->rbuf, c->rbuf + off, c->rlen - off);
	c->rlen -= off;
	return 0;
}

/* Readable: take what came, act on it, send what that asks. */
static void on_readable(struct sim *m, struct sc *c, int64_t deadline_us)
{
	const char *why = NULL;
	ssize_t r;

	for (;;) {
		r = recv(c->fd, c->rbuf + c->rlen, RBUF(c->nr) - c->rlen, 0);
		if (r < 0 && errno == EINTR)
			continue;
		break;
	}
	if (r < 0 && errno == EAGAIN)
		return;
	if (r <= 0) {
		/* closed during the handshake: shed by a busy store; retry */
		if (c->st == SC_HELLO || c->st == SC_AUTH)
			conn_retry(m, c, deadline_us);
		else
			fail_conn(m, c, r == 0 ? "the store closed the connection" :
				  strerror(errno));
		return;
	}
	c->rlen += (uint32_t)r;
	if (parse(m, c, &why) != 0) {
		fail_conn(m, c, why);
		return;
	}
	if (c->st == SC_DONE) {
		m->ok += c->nr;
		m->left--;
	}
	if (c->olen > c->ooff && flush(m, c) != 0)
		fail_conn(m, c, "send failed");
}

static void on_event(struct sim *m, struct sc *c, uint32_t ev, int64_t deadline_us)
{
	if (c->st == SC_CONNECTING) {
		int e = 0;
		socklen_t l = sizeof(e);

		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &l);
		if (e != 0) {
			epoll_ctl(m->epfd, EPOLL_CTL_DEL, c->fd, NULL);
			conn_retry(m, c, deadline_us);	/* refused: the library retries too */
			return;
		}
		c->st = SC_HELLO;
		if (flush(m, c) != 0)
			fail_conn(m, c, "epoll_ctl");
		return;
	}
	if ((ev & EPOLLOUT) && flush(m, c) != 0) {
		fail_conn(m, c, "send failed");
		return;
	}
	if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP))
		on_readable(m, c, deadline_us);
}

/* Connect the idle connections whose retry time came; note when the next is. */
static void start_due(struct sim *m, int64_t now)
{
	int i;

	m->next_retry = INT64_MAX;
	m->nidle = 0;
	for (i = 0; i < m->count; i++) {
		struct sc *c = &m->c[i];

		if (c->st != SC_IDLE)
			continue;
		if (c->retry_at <= now)
			conn_start(m, c);
		else {
			m->nidle++;
			if (c->retry_at < m->next_retry)
				m->next_retry = c->retry_at;
		}
	}
}

/* The event loop until every connection is done or failed, or the deadline. */
static void run(struct sim *m, int64_t deadline_us)
{
	struct epoll_event evs[512];
	int64_t now = now_us();
	int i;

	start_due(m, now);
	while (m->left > 0 && now < deadline_us) {
		int64_t wait_us = m->nidle > 0 ? m->next_retry - now : 100000;
		int k = epoll_wait(m->epfd, evs, 512,
				   wait_us < 0 ? 0 : wait_us > 100000 ? 100 : (int)(wait_us / 1000) + 1);

		if (k < 0 && errno != EINTR)
			break;
		for (i = 0; i < k; i++)
			on_event(m, evs[i].data.ptr, evs[i].events, deadline_us);
		now = now_us();
		if (m->nidle > 0 && now >= m->next_retry)
			start_due(m, now);
	}
	for (i = 0; i < m->count && m->left > 0; i++)
		if (m->c[i].st != SC_DONE && m->c[i].st != SC_FAILED)
			fail_conn(m, &m->c[i], "timed out");
}

/* ------------------------------------------------------------ processes */

static int sim_init(struct sim *m, int first_conn, int count)
{
	int i;

	m->c = calloc((size_t)count, sizeof(*m->c));
	m->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (m->c == NULL || m->epfd < 0)
		return -1;
	m->count = m->left = count;
	for (i = 0; i < count; i++) {
		struct sc *c = &m->c[i];

		c->fd = -1;
		c->first = (first_conn + i) * m->nr;
		c->nr = m->nr;
		c->backoff = 10;
		c->rbuf = malloc(RBUF(m->nr));
		c->obuf = malloc(OBUF(m->nr));
		if (c->rbuf == NULL || c->obuf == NULL)
			return -1;
	}
	return 0;
}

/* One client process: connections first_conn.. (count); never returns.  It
 * reports when done, then holds its connections open until `hold` closes. */
static void child_main(struct sim *m, int first_conn, int count, double timeout_s,
		       int start_fd, int ready_fd, int result_fd, int hold_fd)
{
	struct result res = { 0 };
	uint8_t pb[2];
	char c;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	raise_nofile();
	if (sim_init(m, first_conn, count) != 0)
		_exit(3);
	if (write(ready_fd, "r", 1) != 1 || read(start_fd, pb, 2) != 2)
		_exit(3);
	m->port = (uint16_t)(pb[0] | pb[1] << 8);
	run(m, now_us() + (int64_t)(timeout_s * 1e6));
	res.ok = m->ok;
	res.fail = m->fail + (count * m->nr - m->ok - m->fail);
	res.retries = m->retries;
	res.done_us = now_us();
	snprintf(res.msg, sizeof(res.msg), "%s", m->msg);
	if (write(result_fd, &res, sizeof(res)) != (ssize_t)sizeof(res))
		_exit(4);
	while (read(hold_fd, &c, 1) > 0)
		;
	_exit(0);
}

/* ------------------------------------------------------------ the store side */

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1;		/* the directory's own */
}

/* VmRSS or VmHWM of this process in MiB (-1: unknown). */
static double vm_mb(const char *field)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[128];
	double kb = -1;
	size_t l = strlen(field);

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, field, l) == 0 && line[l] == ':')
			kb = atof(line + l + 1);
	fclose(f);
	return kb < 0 ? -1 : kb / 1024;
}

/* TcpExt ListenOverflows of /proc/net/netstat: connections the kernel dropped
 * because a listen backlog (capped at net.core.somaxconn) was full; the
 * client's SYN is retried after 1 s, then 3 s (machine-wide; -1: unknown). */
static long listen_overflows(void)
{
	FILE *f = fopen("/proc/net/netstat", "r");
	char names[4096], vals[4096];
	long v = -1;

	if (f == NULL)
		return -1;
	while (fgets(names, sizeof(names), f) != NULL && fgets(vals, sizeof(vals), f) != NULL) {
		char *sn, *sv, *n = strtok_r(names, " \n", &sn), *x = strtok_r(vals, " \n", &sv);

		if (n == NULL || strcmp(n, "TcpExt:") != 0)
			continue;
		while ((n = strtok_r(NULL, " \n", &sn)) != NULL &&
		       (x = strtok_r(NULL, " \n", &sv)) != NULL)
			if (strcmp(n, "ListenOverflows") == 0)
				v = atol(x);
	}
	fclose(f);
	return v;
}

struct run {
	int n, nr, per_node, conns, procs, addrs, collect;
	double timeout_s;
	int ready[2], results[2], hold[2], *start;
	pid_t *pids;
};

static int fork_clients(struct run *r, struct sim *proto)
{
	int p;

	if (pipe(r->ready) != 0 || pipe(r->results) != 0 || pipe(r->hold) != 0)
		return -1;
	r->start = calloc((size_t)r->procs, sizeof(*r->start));
	r->pids = calloc((size_t)r->procs, sizeof(*r->pids));
	if (r->start == NULL || r->pids == NULL)
		return -1;
	for (p = 0; p < r->procs; p++) {
		int sp[2], first = (int)((int64_t)r->conns * p / r->procs);
		int count = (int)((int64_t)r->conns * (p + 1) / r->procs) - first;

		if (pipe(sp) != 0)
			return -1;
		r->pids[p] = fork();
		if (r->pids[p] < 0)
			return -1;
		if (r->pids[p] == 0) {
			close(sp[1]);
			close(r->ready[0]);
			close(r->results[0]);
			close(r->hold[1]);
			child_main(proto, first, count, r->timeout_s, sp[0], r->ready[1],
				   r->results[1], r->hold[0]);
		}
		close(sp[0]);
		r->start[p] = sp[1];
	}
	close(r->ready[1]);
	close(r->results[1]);
	close(r->hold[0]);
	return 0;
}

/* What dpg_xchg_run's member 0 does (xchg.c collect()): GET every rank's
 * value in turn over its own store connection; seconds, or -1. */
static double collect_s(const struct run *r, uint16_t port, const uint8_t *secret,
			size_t slen, char *msg, size_t cap)
{
	struct dpg_err err = { "" };
	struct dpg_store *st = NULL;
	int64_t t0 = now_us(), deadline = dpg_now_ms() + (int64_t)(r->timeout_s * 1000);
	char key[32];
	int i, rc;

	rc = dpg_store_connect("127.0.0.1", port, secret, slen, deadline, NULL, &st, &err);
	for (i = 0; rc == 0 && i < r->n; i++) {
		void *v = NULL;
		size_t len = 0;

		snprintf(key, sizeof(key), "addr/%d", i);
		rc = dpg_store_get(st, key, &v, &len, deadline, &err);
		free(v);
	}
	dpg_store_close(st);
	if (rc != 0) {
		snprintf(msg, cap, "collect: %s", err.msg);
		return -1;
	}
	return (double)(now_us() - t0) / 1e6;
}

static int usage(const char *argv0)
{
	fprintf(stderr, "usage: %s [-c] [-n RANKS] [-r RANKS_PER_CONN] [-N RANKS_PER_NODE] "
		"[-p PROCS] [-a ADDRS] [-t TIMEOUT_S]\n", argv0);
	return 2;
}

static int parse_args(int argc, char **argv, struct run *r)
{
	int opt;

	*r = (struct run){ .n = 1024, .nr = 1, .per_node = 8, .procs = 0, .addrs = 16,
			   .timeout_s = 60 };
	while ((opt = getopt(argc, argv, "cn:r:N:p:a:t:")) != -1) {
		switch (opt) {
		case 'c': r->collect = 1; break;
		case 'N': r->per_node = atoi(optarg); break;
		case 'n': r->n = atoi(optarg); break;
		case 'r': r->nr = atoi(optarg); break;
		case 'p': r->procs = atoi(optarg); break;
		case 'a': r->addrs = atoi(optarg); break;
		case 't': r->timeout_s = atof(optarg); break;
		default: return usage(argv[0]);
		}
	}
	if (r->per_node < 1 || r->nr > r->per_node || r->per_node % r->nr != 0 ||
	    r->n / r->per_node > (1 << 24) - 2)
		r->n = -1;	/* a connection's ranks on one node; 127.1/16.. as sources */
	if (r->n < 1 || r->nr < 1 || r->nr > 64 || r->n % r->nr != 0 || r->addrs < 1 ||
	    r->addrs > 250 || r->procs < 0) {
		fprintf(stderr, "store_sim: bad arguments (RANKS a multiple of "
			"RANKS_PER_CONN <= 64, ADDRS 1..250)\n");
		return 2;
	}
	r->conns = r->n / r->nr;
	if (r->procs == 0)	/* 2, or enough to keep each under 15,000 descriptors */
		r->procs = r->conns / 15000 + 2;
	if (r->procs > r->conns)
		r->procs = r->conns;
	return 0;
}

int main(int argc, char **argv)
{
	struct run r;
	struct sim proto = { 0 };
	struct dpg_store_server *srv;
	struct dpg_err err = { "" };
	uint8_t secret[32];
	char first_err[256] = "";
	int ok = 0, fail = 0, p, base_fds, store_fds = -1;
	unsigned long retries = 0;
	long ovf0, ovf;
	double coll = 0;
	int64_t t0, t1 = 0;
	double rss = -1, hwm = -1, cpu0, store_cpu;
	struct rusage ru;
	rlim_t nofile;
	char c;

	if (parse_args(argc, argv, &r) != 0)
		return 2;
	nofile = raise_nofile();
	signal(SIGPIPE, SIG_IGN);
	if ((rlim_t)r.conns + 64 > nofile) {
		printf("sim ranks=%d per_conn=%d conns=%d procs=%d rendezvous_s=- ok=0 fail=%d "
		       "error: the store needs %d descriptors, its open-files limit is %llu "
		       "(hard; raising it needs CAP_SYS_RESOURCE)\n", r.n, r.nr, r.conns,
		       r.procs, r.n, r.conns + 64, (unsigned long long)nofile);
		return 1;
	}
	if (dpg_wire_random(secret, sizeof(secret), &err) != 0)
		return 1;
	proto = (struct sim){ .n = r.n, .nr = r.nr, .per_node = r.per_node, .addrs = r.addrs, .key.len = sizeof(secret) };
	memcpy(proto.key.k, secret, sizeof(secret));
	if (fork_clients(&r, &proto) != 0) {
		perror("store_sim: fork");
		return 1;
	}
	for (p = 0; p < r.procs; p++)
		if (read(r.ready[0], &c, 1) != 1) {
			fprintf(stderr, "store_sim: a client process died\n");
			return 1;
		}
	if (dpg_store_server_start(NULL, 0, secret, sizeof(secret), &srv, &err) != 0) {
		fprintf(stderr, "store_sim: %s\n", err.msg);
		return 1;
	}
	base_fds = count_fds() - r.procs;
	ovf0 = listen_overflows();
	getrusage(RUSAGE_SELF, &ru);
	cpu0 = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
		(double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;	/* less the start pipes, closed below */
	t0 = now_us();
	for (p = 0; p < r.procs; p++) {
		uint16_t port = dpg_store_server_port(srv);
		uint8_t pb[2] = { (uint8_t)port, (uint8_t)(port >> 8) };

		if (write(r.start[p], pb, 2) != 2)
			return 1;
		close(r.start[p]);
	}
	for (p = 0; p < r.procs; p++) {
		struct result res;

		if (read(r.results[0], &res, sizeof(res)) != (ssize_t)sizeof(res)) {
			snprintf(first_err, sizeof(first_err), "a client process died");
			fail = r.n - ok;
			break;
		}
		ok += res.ok;
		fail += res.fail;
		retries += res.retries;
		if (res.done_us > t1)
			t1 = res.done_us;
		if (res.fail > 0 && first_err[0] == '\0')
			snprintf(first_err, sizeof(first_err), "%s", res.msg);
	}
	/* every connection still open: what the store holds; the CPU time of
	 * this process is the store thread's (the main thread only waits) */
	getrusage(RUSAGE_SELF, &ru);
	store_cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
		(double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6 - cpu0;
	store_fds = count_fds() - base_fds;
	ovf = listen_overflows();
	ovf = ovf < 0 || ovf0 < 0 ? -1 : ovf - ovf0;
	rss = vm_mb("VmRSS");
	hwm = vm_mb("VmHWM");
	if (r.collect && fail == 0)
		coll = collect_s(&r, dpg_store_server_port(srv), secret, sizeof(secret),
				 first_err, sizeof(first_err));
	close(r.hold[1]);
	for (p = 0; p < r.procs; p++)
		waitpid(r.pids[p], NULL, 0);
	dpg_store_server_stop(srv);
	printf("sim ranks=%d per_conn=%d conns=%d procs=%d rendezvous_s=%.3f ok=%d fail=%d "
	       "store_fds=%d store_rss_mb=%.1f store_hwm_mb=%.1f store_cpu_s=%.3f retries=%lu listen_overflows=%ld collect_s=%.3f%s%s\n",
	       r.n, r.nr, r.conns, r.procs, t1 > t0 ? (double)(t1 - t0) / 1e6 : 0.0, ok, fail,
	       store_fds, rss, hwm, store_cpu, retries, ovf, coll, first_err[0] ? " error: " : "", first_err);
	return fail == 0 && coll >= 0 ? 0 : 1;
}
