/* SPDX-License-Identifier: BSD-3-Clause */
/* net.c - blocking TCP made safe: every wait is a poll() bounded by an
 * absolute deadline, and an abort flag can end it early. */
#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Longest single poll() so that the abort flag is noticed promptly. */
#define POLL_SLICE_MS 100

/* The abort flag may be raised by another thread at any time. */
static bool aborted(const volatile int *flag)
{
	return flag != NULL && __atomic_load_n((const int *)flag, __ATOMIC_ACQUIRE) != 0;
}

/* How long one poll() may sleep: the whole wait, unless an abort flag must
 * be watched (then in slices). */
static int poll_slice(int64_t left, const volatile int *flag)
{
	int64_t cap = flag != NULL ? POLL_SLICE_MS : 1000000;

	return left > cap ? (int)cap : (int)left;
}

int64_t dpg_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int dpg_net_set_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -DPG_ERR_SYSTEM;
	fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
	return fcntl(fd, F_SETFL, fl) == 0 ? 0 : -DPG_ERR_SYSTEM;
}

void dpg_net_peer_name(int fd, char *buf, size_t len)
{
	struct sockaddr_in a;
	socklen_t sl = sizeof(a);
	char ip[INET_ADDRSTRLEN];

	if (getpeername(fd, (struct sockaddr *)&a, &sl) != 0 || a.sin_family != AF_INET ||
	    inet_ntop(AF_INET, &a.sin_addr, ip, sizeof(ip)) == NULL) {
		snprintf(buf, len, "?");
		return;
	}
	snprintf(buf, len, "%s:%u", ip, (unsigned)ntohs(a.sin_port));
}

int dpg_net_listen(const char *addr, uint16_t port, int backlog, int *fd,
		   uint16_t *bound, struct dpg_err *err)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	socklen_t sl = sizeof(a);
	int one = 1, s;

	if (addr == NULL)
		a.sin_addr.s_addr = htonl(INADDR_ANY);
	else if (inet_pton(AF_INET, addr, &a.sin_addr) != 1)
		return dpg_errf(err, "cannot listen on '%s': not an IPv4 address", addr);
	s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "socket: %s", strerror(errno));
	if (setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(s, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    listen(s, backlog) != 0 ||
	    getsockname(s, (struct sockaddr *)&a, &sl) != 0) {
		int e = errno;

		close(s);
		return dpg_errs(err, DPG_ERR_SYSTEM, "cannot listen on port %u: %s%s",
				(unsigned)port, strerror(e), e == EADDRINUSE ?
				" (another process holds it: pick another MASTER_PORT)" : "");
	}
	*fd = s;
	if (bound != NULL)
		*bound = ntohs(a.sin_port);
	return 0;
}

static bool retryable(int e)
{
	return e == ECONNREFUSED || e == ECONNRESET || e == ETIMEDOUT ||
	       e == EHOSTUNREACH || e == ENETUNREACH || e == EAGAIN || e == EINTR ||
	       e == ECONNABORTED;
}

/* One attempt: non-blocking connect bounded by the deadline; false with
 * *e = the errno on failure. */
static bool connect_once(const struct sockaddr *sa, socklen_t sl, int64_t deadline,
			int *fd, int *e)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	struct pollfd p;
	socklen_t el = sizeof(*e);
	int one = 1;

	*e = 0;
	if (s < 0) {
		*e = errno;
		return false;
	}
	if (connect(s, sa, sl) != 0 && errno != EINPROGRESS) {
		*e = errno;
		goto fail;
	}
	p.fd = s;
	p.events = POLLOUT;
	for (;;) {
		int64_t left = deadline - dpg_now_ms();
		int r;

		if (left <= 0) {
			*e = ETIMEDOUT;
			goto fail;
		}
		r = poll(&p, 1, poll_slice(left, NULL));
		if (r > 0)
			break;
		if (r < 0 && errno != EINTR) {
			*e = errno;
			goto fail;
		}
	}
	if (getsockopt(s, SOL_SOCKET, SO_ERROR, e, &el) != 0 || *e != 0)
		goto fail;
	if (dpg_net_set_nonblock(s, false) != 0 ||
	    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
		*e = errno;
		goto fail;
	}
	*fd = s;
	return true;
fail:
	close(s);
	return false;
}

/* Exponential backoff with jitter, capped at 1 s, never past the deadline:
 * sleep about backoff ms, return the next backoff. */
static int64_t nap(int64_t backoff, int64_t deadline, unsigned *seed)
{
	int64_t ms = backoff + rand_r(seed) % (backoff + 1);
	int64_t left = deadline - dpg_now_ms();

	if (ms > left)
		ms = left > 0 ? left : 0;
	usleep((useconds_t)(ms * 1000));
	return backoff * 2 > 1000 ? 1000 : backoff * 2;
}

int dpg_net_connect(const char *host, uint16_t port, int64_t deadline_ms,
		    const volatile int *abort, int *fd, struct dpg_err *err)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai = NULL;
	char svc[8];
	int64_t backoff = 10;
	int e = 0, rc;
	unsigned seed = (unsigned)getpid() ^ (unsigned)dpg_now_ms();

	snprintf(svc, sizeof(svc), "%u", (unsigned)port);
	for (;;) {
		rc = getaddrinfo(host, svc, &hints, &ai);
		if (rc == 0)
			break;
		if (rc != EAI_AGAIN || dpg_now_ms() >= deadline_ms)
			return dpg_errs(err, DPG_ERR_SYSTEM, "cannot resolve '%s': %s", host,
					gai_strerror(rc));
		usleep(100000);
	}
	for (;;) {
		if (aborted(abort)) {
			freeaddrinfo(ai);
			return dpg_errs(err, DPG_ERR_ABORTED, "aborted connecting to %s:%u",
					host, (unsigned)port);
		}
		if (connect_once(ai->ai_addr, ai->ai_addrlen, deadline_ms, fd, &e)) {
			freeaddrinfo(ai);
			return 0;
		}
		if (!retryable(e) || dpg_now_ms() + backoff >= deadline_ms)
			break;
		backoff = nap(backoff, deadline_ms, &seed);
	}
	freeaddrinfo(ai);
	return dpg_errs(err, retryable(e) ? DPG_ERR_TIMEOUT : DPG_ERR_SYSTEM,
			"cannot connect to %s:%u: %s", host, (unsigned)port,
			e == ETIMEDOUT || retryable(e) ? "nobody answered before the deadline"
			: strerror(e));
}

/* Wait until fd is ready for events, the deadline passes or abort rises.
 * what: "send" or "receive", for the message. */
static int wait_fd(int fd, short events, int64_t deadline, const volatile int *abort,
		   const char *what, struct dpg_err *err)
{
	struct pollfd p = { .fd = fd, .events = events };

	for (;;) {
		int64_t left = deadline - dpg_now_ms();
		int r;

		if (aborted(abort))
			return dpg_errs(err, DPG_ERR_ABORTED, "%s aborted", what);
		if (left <= 0)
			return dpg_errs(err, DPG_ERR_TIMEOUT, "%s timed out", what);
		r = poll(&p, 1, poll_slice(left, abort));
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return dpg_errs(err, DPG_ERR_SYSTEM, "poll: %s", strerror(errno));
	}
}

int dpg_net_write_full(int fd, const void *buf, size_t len, int64_t deadline_ms,
		       const volatile int *abort, struct dpg_err *err)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		int rc;

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
			return dpg_errs(err, DPG_ERR_PEER, "peer closed the connection");
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return dpg_errs(err, DPG_ERR_SYSTEM, "send: %s", strerror(errno));
		rc = wait_fd(fd, POLLOUT, deadline_ms, abort, "send", err);
		if (rc != 0)
			return rc;
	}
	return 0;
}

int dpg_net_read_full(int fd, void *buf, size_t len, int64_t deadline_ms,
		      const volatile int *abort, struct dpg_err *err)
{
	char *p = buf;

	while (len > 0) {
		ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
		int rc;

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return dpg_errs(err, DPG_ERR_PEER, "peer closed the connection");
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return dpg_errs(err, DPG_ERR_SYSTEM, "recv: %s", strerror(errno));
		rc = wait_fd(fd, POLLIN, deadline_ms, abort, "receive", err);
		if (rc != 0)
			return rc;
	}
	return 0;
}
