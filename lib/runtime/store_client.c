/* SPDX-License-Identifier: BSD-3-Clause */
/* store_client.c - the rendezvous store's blocking client: connect and
 * authenticate, one request at a time with deadlines, the job secret's parser.
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
 * they have an abort flag to watch.
 *
 * Return codes: 0, or -DPG_ERR_TIMEOUT, -DPG_ERR_ABORTED, -DPG_ERR_PEER (the
 * store closed the connection or broke the protocol), -DPG_ERR_AUTH (a secret
 * mismatch either way, or not a dpg store), -DPG_ERR_SYSTEM, -DPG_ERR_NOMEM;
 * -DPG_ERR_INVALID (dpg_errf's -1) for a bad argument and for a request the
 * store answered with an error (ADD on text, store full); -DPG_ERR_PEER too
 * for a wait the store answered "lost" (a node leader died), the connection
 * still usable. */
#include "parse.h"	/* dpg_hex_digit */
#include "store.h"
#include "store_relay.h"
#include "store_wire.h"
#include "le.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "net.h"
#include "digest.h"

struct dpg_store {
	int fd;
	bool broken;			/* the stream is out of step: unusable */
	bool garbled;			/* what the peer sent is not our protocol */
	uint32_t next_id;
	const volatile int *abort;
	struct dpg_wire_key key;
	uint8_t *rbuf;
	size_t rlen, rcap, rdone;	/* rdone: bytes of the last message handed out */
	char where[300];		/* "host:port" */
	const char *relay;		/* the relay's socket name (points at relay_buf), or NULL */
	char relay_buf[DPG_RELAY_NAME_MAX];
	int rank;			/* JOINs the relay as this world rank */
	char leader[160];		/* the node leader (the relay's JOIN answer) */
};

struct msg {
	struct dpg_wire_hdr h;
	const uint8_t *body;
};

#define CLIENT_BODY_MAX (DPG_STORE_VALUE_MAX + 64)

/* The abort flag may be raised by a signal handler or another thread. */
static bool raised(const volatile int *flag)
{
	return flag != NULL && __atomic_load_n(flag, __ATOMIC_RELAXED) != 0;
}

/* Prepend what to the message in err; returns rc. */
static int prefixed(struct dpg_err *err, const char *what, int rc)
{
	dpg_err_prefix(err, what);
	return rc;
}

/* ------------------------------------------------------------ receiving */

/* Look for the message wanted among the bytes received (older ids are stale
 * replies to requests we gave up on: skipped).  1: found, 0: *need bytes
 * are needed in all. */
static int recv_buffered(struct dpg_store *s, bool any_id, uint32_t id, struct msg *m,
			 size_t *need, struct dpg_err *err)
{
	*need = DPG_WIRE_HDR;
	while (s->rlen >= DPG_WIRE_HDR) {
		dpg_wire_hdr_get(s->rbuf, &m->h);
		if (m->h.magic != DPG_WIRE_MAGIC || m->h.version != DPG_WIRE_VERSION ||
		    m->h.len > CLIENT_BODY_MAX) {
			s->broken = s->garbled = true;
			return dpg_errs(err, DPG_ERR_PEER, "not a dpg store message");
		}
		*need = DPG_WIRE_HDR + m->h.len;
		if (s->rlen < *need)
			return 0;
		if (any_id || m->h.id == id) {
			m->body = s->rbuf + DPG_WIRE_HDR;
			s->rdone = *need;
			return 1;
		}
		memmove(s->rbuf, s->rbuf + *need, s->rlen - *need);	/* stale */
		s->rlen -= *need;
		*need = DPG_WIRE_HDR;
	}
	return 0;
}

/* Take what the socket holds now into the buffer (room for need bytes at
 * least).  1: got some, 0: nothing there yet. */
static int recv_some(struct dpg_store *s, size_t need, struct dpg_err *err)
{
	if (need < s->rlen + 4096)
		need = s->rlen + 4096;
	if (need > s->rcap) {
		uint8_t *nb = realloc(s->rbuf, need);

		if (nb == NULL)
			return dpg_errs(err, DPG_ERR_NOMEM, "out of memory for a reply");
		s->rbuf = nb;
		s->rcap = need;
	}
	for (;;) {
		ssize_t n = recv(s->fd, s->rbuf + s->rlen, s->rcap - s->rlen, MSG_DONTWAIT);

		if (n > 0) {
			s->rlen += (size_t)n;
			return 1;
		}
		if (n == 0 || errno == ECONNRESET || errno == EPIPE) {
			s->broken = true;
			return dpg_errs(err, DPG_ERR_PEER, "the peer closed the connection");
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return dpg_errs(err, DPG_ERR_SYSTEM, "recv: %s", strerror(errno));
		return 0;
	}
}

/* Sleep until the socket is readable, the deadline passes or abort rises. */
static int recv_wait(struct dpg_store *s, int64_t deadline, struct dpg_err *err)
{
	struct pollfd p = { .fd = s->fd, .events = POLLIN };
	int64_t left;

	if (raised(s->abort))
		return dpg_errs(err, DPG_ERR_ABORTED, "aborted");
	left = deadline - dpg_now_ms();
	if (left <= 0)
		return dpg_errs(err, DPG_ERR_TIMEOUT, "timed out");
	/* slices only when there is a flag to watch: thousands of
	 * idle waiters must not wake ten times a second for nothing */
	if (s->abort != NULL && left > 100)
		left = 100;
	if (poll(&p, 1, left > INT32_MAX ? INT32_MAX : (int)left) < 0 && errno != EINTR)
		return dpg_errs(err, DPG_ERR_SYSTEM, "poll: %s", strerror(errno));
	return 0;
}

/* Receive the next message with id (any id if any_id).  The body stays valid
 * until the next call.  The message in err is bare: callers word it. */
static int recv_msg(struct dpg_store *s, bool any_id, uint32_t id, int64_t deadline,
		    struct msg *m, struct dpg_err *err)
{
	if (s->rdone > 0) {
		memmove(s->rbuf, s->rbuf + s->rdone, s->rlen - s->rdone);
		s->rlen -= s->rdone;
		s->rdone = 0;
	}
	for (;;) {
		size_t need;
		int rc = recv_buffered(s, any_id, id, m, &need, err);

		if (rc != 0)
			return rc > 0 ? 0 : rc;
		rc = recv_some(s, need, err);
		if (rc == 0)
			rc = recv_wait(s, deadline, err);
		if (rc < 0)
			return rc;
	}
}

/* ------------------------------------------------------------ requests */

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

/* Send one request (header + parts); *id gets its id. */
static int send_request(struct dpg_store *s, uint8_t op, const struct iovec *parts,
			int nparts, int64_t deadline, uint32_t *id, struct dpg_err *err)
{
	size_t len = 0, o = DPG_WIRE_HDR;
	uint8_t *buf;
	int i, rc;

	for (i = 0; i < nparts; i++)
		len += parts[i].iov_len;
	buf = malloc(DPG_WIRE_HDR + len);
	if (buf == NULL)
		return dpg_errs(err, DPG_ERR_NOMEM, "out of memory");
	*id = ++s->next_id;
	dpg_wire_hdr_put(buf, op, 0, *id, (uint32_t)len);
	for (i = 0; i < nparts; i++) {
		if (parts[i].iov_len > 0)	/* an empty part may have no base */
			memcpy(buf + o, parts[i].iov_base, parts[i].iov_len);
		o += parts[i].iov_len;
	}
	rc = dpg_net_write_full(s->fd, buf, DPG_WIRE_HDR + len, deadline, s->abort, err);
	free(buf);
	if (rc != 0)
		s->broken = true;	/* part of the request may be out */
	return rc;
}

/* Tell the server to forget a parked request (best effort). */
static void cancel(struct dpg_store *s, uint32_t id)
{
	uint8_t c[DPG_WIRE_HDR + 4];

	dpg_wire_hdr_put(c, DPG_OP_CANCEL, 0, ++s->next_id, 4);
	dpg_le_put32(c + DPG_WIRE_HDR, id);
	if (!s->broken && send(s->fd, c, sizeof(c), MSG_NOSIGNAL | MSG_DONTWAIT) !=
	    (ssize_t)sizeof(c))
		s->broken = true;
}

/* Word a request that got no reply (rc from sending or receiving). */
static int rpc_failed(struct dpg_store *s, int rc, const char *what, int64_t waited,
		      struct dpg_err *err)
{
	switch (rc) {
	case -DPG_ERR_TIMEOUT:
		return dpg_errs(err, DPG_ERR_TIMEOUT, "store: timed out after %.1f s %s "
				"(store at %s)", (double)(waited > 0 ? waited : 0) / 1000.0,
				what, s->where);
	case -DPG_ERR_ABORTED:
		return dpg_errs(err, DPG_ERR_ABORTED, "store: aborted %s", what);
	case -DPG_ERR_PEER:
		if (s->garbled)
			return dpg_errs(err, DPG_ERR_PEER, "store: protocol error from %s %s",
					s->where, what);
		if (s->relay != NULL && s->leader[0] != '\0')
			return dpg_errs(err, DPG_ERR_PEER, "store: the node leader (%s) "
					"closed the connection %s (it exited, or the store "
					"at %s stopped)", s->leader, what, s->where);
		return dpg_errs(err, DPG_ERR_PEER, "store: the store at %s closed the "
				"connection %s (server stopped or crashed?)", s->where, what);
	default:
		dpg_err_prefix(err, what);
		return prefixed(err, "store", rc);
	}
}

/* Check a reply's op and status: an error reply refuses the request. */
static int check_reply(struct dpg_store *s, uint8_t op, const char *what,
		       const struct msg *m, struct dpg_err *err)
{
	if (m->h.op != (op | DPG_OP_REPLY)) {
		s->broken = s->garbled = true;
		return dpg_errs(err, DPG_ERR_PEER, "store: protocol error from %s %s "
				"(reply op %u)", s->where, what, m->h.op);
	}
	if (m->h.flags == DPG_WIRE_ERROR)
		return dpg_errf(err, "store: %s: the store at %s says: %.*s", what,
				s->where, (int)(m->h.len > 300 ? 300 : m->h.len), m->body);
	if (m->h.flags == DPG_WIRE_LOST)
		return dpg_errs(err, DPG_ERR_PEER, "store: %s: %.*s", what,
				(int)(m->h.len > 400 ? 400 : m->h.len), m->body);
	if (m->h.flags != DPG_WIRE_OK) {
		s->broken = s->garbled = true;
		return dpg_errs(err, DPG_ERR_PEER, "store: protocol error from %s %s "
				"(status %u)", s->where, what, m->h.flags);
	}
	return 0;
}

/* One request and its reply.  what: "waiting for key 'x'" for messages. */
static int rpc(struct dpg_store *s, uint8_t op, const struct iovec *parts, int nparts,
	       int64_t deadline, const char *what, struct msg *m, struct dpg_err *err)
{
	int64_t t0 = dpg_now_ms();
	uint32_t id = 0;
	int rc;

	if (s->broken)
		return dpg_errs(err, DPG_ERR_PEER, "store: the connection to %s is unusable "
				"after an interrupted request; reconnect", s->where);
	rc = send_request(s, op, parts, nparts, deadline, &id, err);
	if (rc == -DPG_ERR_NOMEM)
		return prefixed(err, "store", rc);
	if (rc == 0)
		rc = recv_msg(s, false, id, deadline, m, err);
	if (rc == -DPG_ERR_TIMEOUT || rc == -DPG_ERR_ABORTED)
		cancel(s, id);
	if (rc != 0)
		return rpc_failed(s, rc, what, deadline - t0, err);
	return check_reply(s, op, what, m, err);
}

/* A protocol error in a reply's body. */
static int bad_body(struct dpg_store *s, const char *what, struct dpg_err *err)
{
	s->broken = s->garbled = true;
	return dpg_errs(err, DPG_ERR_PEER, "store: protocol error from %s %s", s->where,
			what);
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

/* ------------------------------------------------------------ connecting */

/* Receive the server's challenge nonce; every outcome is worded here.
 * -DPG_ERR_PEER only for a connection closed before the challenge came. */
static int await_challenge(struct dpg_store *s, int64_t deadline,
			   uint8_t ns[DPG_WIRE_NONCE], struct dpg_err *err)
{
	struct msg m;
	int rc = recv_msg(s, true, 0, deadline, &m, err);

	if (rc == 0 && (m.h.op != DPG_OP_HELLO || m.h.len != DPG_WIRE_NONCE ||
			m.h.flags != 0))
		rc = -DPG_ERR_AUTH;
	if (rc == -DPG_ERR_PEER && s->garbled)
		rc = -DPG_ERR_AUTH;
	switch (rc) {
	case 0:
		memcpy(ns, m.body, DPG_WIRE_NONCE);
		return 0;
	case -DPG_ERR_PEER:
		return dpg_errs(err, DPG_ERR_PEER, "store: the store at %s kept closing the "
				"connection before its challenge", s->where);
	case -DPG_ERR_TIMEOUT:
		return dpg_errs(err, DPG_ERR_TIMEOUT, "store: timed out waiting for the "
				"challenge of the store at %s (a busy store, or not a dpg "
				"store?)", s->where);
	case -DPG_ERR_ABORTED:
		return dpg_errs(err, DPG_ERR_ABORTED, "store: aborted connecting to %s",
				s->where);
	case -DPG_ERR_AUTH:
		return dpg_errs(err, DPG_ERR_AUTH, "store: %s does not speak the dpg store "
				"protocol version %d (another service on that port?)",
				s->where, DPG_WIRE_VERSION);
	default: {
		char w[sizeof(s->where) + 32];

		snprintf(w, sizeof(w), "store: receiving from %s", s->where);
		return prefixed(err, w, rc);
	}
	}
}

/* Word a failure to exchange the AUTH messages. */
static int auth_failed(struct dpg_store *s, int rc, struct dpg_err *err)
{
	switch (rc) {
	case -DPG_ERR_TIMEOUT:
		return dpg_errs(err, DPG_ERR_TIMEOUT, "store: timed out authenticating "
				"with the store at %s", s->where);
	case -DPG_ERR_ABORTED:
		return dpg_errs(err, DPG_ERR_ABORTED, "store: aborted connecting to %s",
				s->where);
	case -DPG_ERR_PEER:
		return dpg_errs(err, DPG_ERR_PEER, "store: the store at %s %s during "
				"authentication", s->where, s->garbled ? "sent garbage" :
				"closed the connection");
	default:
		return prefixed(err, "store: authenticating", rc);
	}
}

/* Answer the challenge ns and check the server's own proof. */
static int authenticate(struct dpg_store *s, const uint8_t *ns, int64_t deadline,
			struct dpg_err *err)
{
	uint8_t req[DPG_WIRE_HDR + DPG_WIRE_NONCE + DPG_WIRE_MAC], want[DPG_WIRE_MAC];
	uint8_t *nc = req + DPG_WIRE_HDR;
	struct msg m;
	int rc;

	dpg_wire_hdr_put(req, DPG_OP_AUTH, 0, 0, DPG_WIRE_NONCE + DPG_WIRE_MAC);
	rc = dpg_wire_random(nc, DPG_WIRE_NONCE, err);
	if (rc != 0)
		return prefixed(err, "store: handshake", rc);
	if (dpg_wire_auth_mac(&s->key, DPG_WIRE_LABEL_CLIENT, ns, nc, nc + DPG_WIRE_NONCE) != 0 ||
	    dpg_wire_auth_mac(&s->key, DPG_WIRE_LABEL_SERVER, ns, nc, want) != 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "store: libcrypto failed computing the "
				"handshake's HMAC-SHA256");
	rc = dpg_net_write_full(s->fd, req, sizeof(req), deadline, s->abort, err);
	if (rc == 0)
		rc = recv_msg(s, true, 0, deadline, &m, err);
	if (rc != 0)
		return auth_failed(s, rc, err);
	if (m.h.op == (DPG_OP_AUTH | DPG_OP_REPLY) && m.h.flags == DPG_WIRE_REFUSED)
		return dpg_errs(err, DPG_ERR_AUTH, "store: the store at %s refused our job "
				"secret (DPG_SECRET differs?)", s->where);
	if (m.h.op != (DPG_OP_AUTH | DPG_OP_REPLY) || m.h.flags != DPG_WIRE_OK ||
	    m.h.len != DPG_WIRE_MAC || !dpg_ct_equal(want, m.body, DPG_WIRE_MAC))
		return dpg_errs(err, DPG_ERR_AUTH, "store: the server at %s failed to prove "
				"it knows our job secret (a foreign or stale store on that "
				"port?)", s->where);
	return 0;
}

/* Through a relay: say which world rank we are; its answer names the
 * leader for our messages. */
static int relay_join(struct dpg_store *s, int64_t deadline, struct dpg_err *err)
{
	uint8_t req[DPG_WIRE_HDR + 4];
	struct msg m;
	uint32_t id = ++s->next_id;
	int rc;

	dpg_wire_hdr_put(req, DPG_OP_JOIN, 0, id, 4);
	dpg_le_put32(req + DPG_WIRE_HDR, (uint32_t)s->rank);
	rc = dpg_net_write_full(s->fd, req, sizeof(req), deadline, s->abort, err);
	if (rc == 0)
		rc = recv_msg(s, false, id, deadline, &m, err);
	if (rc != 0)
		return auth_failed(s, rc, err);
	if (m.h.op != (DPG_OP_JOIN | DPG_OP_REPLY) || m.h.flags != DPG_WIRE_OK) {
		s->garbled = true;
		return dpg_errs(err, DPG_ERR_PEER, "store: the node leader's relay '@%s' "
				"did not answer JOIN (another dpg version?)", s->relay);
	}
	snprintf(s->leader, sizeof(s->leader), "%.*s",
		 (int)(m.h.len < sizeof(s->leader) ? m.h.len : sizeof(s->leader) - 1),
		 (const char *)m.body);
	return 0;
}

/* Connect to the relay's abstract socket, retrying while it is not there
 * yet (the leader starts it while its local ranks start too). */
static int relay_connect(struct dpg_store *s, int64_t deadline, struct dpg_err *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n = strlen(s->relay);
	socklen_t sl = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
	int64_t backoff = 5;

	memcpy(sa.sun_path + 1, s->relay, n);	/* abstract: sun_path[0] = 0 */
	for (;;) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), e;

		if (fd < 0)
			return dpg_errs(err, DPG_ERR_SYSTEM, "socket(AF_UNIX): %s",
					strerror(errno));
		if (connect(fd, (struct sockaddr *)&sa, sl) == 0) {
			s->fd = fd;
			return 0;
		}
		e = errno;
		close(fd);
		if (e != ECONNREFUSED && e != ENOENT && e != EAGAIN && e != EINTR)
			return dpg_errs(err, DPG_ERR_SYSTEM, "connecting to the node "
					"leader's relay '@%s': %s", s->relay, strerror(e));
		if (raised(s->abort))
			return -DPG_ERR_ABORTED;
		if (dpg_now_ms() + backoff >= deadline)
			return dpg_errs(err, DPG_ERR_TIMEOUT, "timed out connecting to the "
					"node leader's relay '@%s' (is local rank 0 of this "
					"node running?)", s->relay);
		usleep((useconds_t)backoff * 1000);
		backoff = backoff * 2 > 200 ? 200 : backoff * 2;
	}
}

/* Connect and authenticate once.  *again: the store closed the connection
 * before its challenge (backlog overflow, a server still starting or
 * restarting), which is worth another try; the rest is final. */
static int connect_once(struct dpg_store *s, const char *host, uint16_t port,
			int64_t deadline, bool *again, struct dpg_err *err)
{
	uint8_t ns[DPG_WIRE_NONCE];
	int rc;

	*again = false;
	rc = s->relay != NULL ? relay_connect(s, deadline, err) :
	     dpg_net_connect(host, port, deadline, s->abort, &s->fd, err);
	if (rc == -DPG_ERR_ABORTED)
		return dpg_errs(err, DPG_ERR_ABORTED, "store: aborted connecting to %s",
				s->where);
	if (rc != 0)
		return prefixed(err, "store", rc);
	rc = await_challenge(s, deadline, ns, err);
	*again = rc == -DPG_ERR_PEER;
	if (rc == 0) {
		rc = authenticate(s, ns, deadline, err);
		if (rc == 0 && s->relay != NULL)
			rc = relay_join(s, deadline, err);
		/* closed mid-handshake: a store under a flood of strangers evicts
		 * the oldest unauthenticated connections; try again */
		*again = rc == -DPG_ERR_PEER && !s->garbled;
	}
	return rc;
}

/* Back to a fresh, unconnected handle. */
static void disconnect(struct dpg_store *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	s->rlen = s->rdone = 0;
	s->broken = s->garbled = false;
}

/* A fresh handle keyed with the secret, named "where" in messages. */
static int handle_new(const uint8_t *secret, size_t secret_len, const volatile int *abort,
		      struct dpg_store **out, struct dpg_err *err)
{
	struct dpg_store *s;
	int rc = dpg_wire_check_secret(secret, secret_len, err);

	if (rc != 0)
		return rc;
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return dpg_errs(err, DPG_ERR_NOMEM, "store: out of memory");
	s->fd = -1;
	s->abort = abort;
	memcpy(s->key.k, secret, secret_len);
	s->key.len = secret_len;
	*out = s;
	return 0;
}

/* Connect and authenticate, retrying a store that closed us early. */
static int connect_retrying(struct dpg_store *s, const char *host, uint16_t port,
			    int64_t deadline_ms, struct dpg_store **out,
			    struct dpg_err *err)
{
	int64_t backoff = 10;
	bool again;
	int rc;

	for (;;) {
		rc = connect_once(s, host, port, deadline_ms, &again, err);
		if (rc == 0) {
			*out = s;
			return 0;
		}
		disconnect(s);
		if (!again || dpg_now_ms() + backoff >= deadline_ms || raised(s->abort))
			break;
		usleep((useconds_t)backoff * 1000);
		backoff = backoff * 2 > 1000 ? 1000 : backoff * 2;
	}
	dpg_store_close(s);
	return rc;
}

int dpg_store_connect(const char *host, uint16_t port, const uint8_t *secret,
		      size_t secret_len, int64_t deadline_ms,
		      const volatile int *abort, struct dpg_store **out,
		      struct dpg_err *err)
{
	struct dpg_store *s = NULL;
	int rc = handle_new(secret, secret_len, abort, &s, err);

	if (rc != 0)
		return rc;
	if (host == NULL)
		host = "127.0.0.1";
	snprintf(s->where, sizeof(s->where), "%s:%u", host, (unsigned)port);
	return connect_retrying(s, host, port, deadline_ms, out, err);
}

int dpg_store_connect_relay(const char *name, const char *where, int rank,
			    const uint8_t *secret, size_t secret_len, int64_t deadline_ms,
			    const volatile int *abort, struct dpg_store **out,
			    struct dpg_err *err)
{
	struct dpg_store *s = NULL;
	int rc;

	if (name == NULL || name[0] == '\0' || strlen(name) >= DPG_RELAY_NAME_MAX)
		return dpg_errf(err, "store: bad relay socket name");
	if (rank < 0)
		return dpg_errf(err, "store: rank %d: a relay's client needs its world rank",
				rank);
	rc = handle_new(secret, secret_len, abort, &s, err);
	if (rc != 0)
		return rc;
	snprintf(s->relay_buf, sizeof(s->relay_buf), "%s", name);
	s->relay = s->relay_buf;
	snprintf(s->where, sizeof(s->where), "%s", where != NULL ? where : name);
	s->rank = rank;
	return connect_retrying(s, NULL, 0, deadline_ms, out, err);
}

int dpg_store_take_fd(struct dpg_store *s)
{
	int fd = s->fd;

	s->fd = -1;
	dpg_store_close(s);
	return fd;
}

bool dpg_store_broken(const struct dpg_store *s)
{
	return s == NULL || s->broken;
}

bool dpg_store_relayed(const struct dpg_store *s)
{
	return s != NULL && s->relay != NULL;
}

void dpg_store_close(struct dpg_store *s)
{
	if (s == NULL)
		return;
	if (s->fd >= 0)
		close(s->fd);
	explicit_bzero(&s->key, sizeof(s->key));
	free(s->rbuf);
	free(s);
}

/* ------------------------------------------------------------ operations */

int dpg_store_set(struct dpg_store *s, const char *key, const void *val,
		  size_t len, int64_t deadline_ms, struct dpg_err *err)
{
	char what[DPG_STORE_KEY_MAX + 32], q[96];
	uint8_t kl[4];
	struct iovec v[3];
	struct msg m;
	size_t klen;

	if (check_key(key, &klen, err) != 0)
		return -DPG_ERR_INVALID;
	if (len > DPG_STORE_VALUE_MAX)
		return dpg_errf(err, "store: value for key '%s' is %zu bytes (limit %u)",
				dpg_err_quote(key, q, sizeof(q)), len, DPG_STORE_VALUE_MAX);
	dpg_le_put32(kl, (uint32_t)klen);
	v[0] = (struct iovec){ kl, 4 };
	v[1] = (struct iovec){ (void *)key, klen };
	v[2] = (struct iovec){ (void *)val, len };
	snprintf(what, sizeof(what), "setting key '%s'", dpg_err_quote(key, q, sizeof(q)));
	return rpc(s, DPG_OP_SET, v, 3, deadline_ms, what, &m, err);
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
		return -DPG_ERR_INVALID;
	dpg_le_put32(kl, (uint32_t)klen);
	v[0] = (struct iovec){ kl, 4 };
	v[1] = (struct iovec){ (void *)key, klen };
	snprintf(what, sizeof(what), "waiting for key '%s'",
		 dpg_err_quote(key, q, sizeof(q)));
	rc = rpc(s, DPG_OP_GET, v, 2, deadline_ms, what, &m, err);
	if (rc != 0)
		return rc;
	*val = malloc(m.h.len + 1);	/* NUL-terminated for convenience */
	if (*val == NULL)
		return dpg_errs(err, DPG_ERR_NOMEM, "store: out of memory for the value "
				"of key '%s'", q);
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
		return -DPG_ERR_INVALID;
	dpg_le_put32(kl, (uint32_t)klen);
	dpg_le_put64(d, (uint64_t)delta);
	v[0] = (struct iovec){ kl, 4 };
	v[1] = (struct iovec){ (void *)key, klen };
	v[2] = (struct iovec){ d, 8 };
	snprintf(what, sizeof(what), "adding to key '%s'", dpg_err_quote(key, q, sizeof(q)));
	rc = rpc(s, DPG_OP_ADD, v, 3, deadline_ms, what, &m, err);
	if (rc != 0)
		return rc;
	if (m.h.len != 8)
		return bad_body(s, what, err);
	if (result != NULL)
		*result = (int64_t)dpg_le_get64(m.body);
	return 0;
}

/* CAS's reply: exists u8, then the value, copied to *cur if it exists. */
static int cas_result(struct dpg_store *s, const struct msg *m, const char *what,
		      void **cur, size_t *curlen, struct dpg_err *err)
{
	if (m->h.len < 1)
		return bad_body(s, what, err);
	if (m->body[0] && cur != NULL) {
		*cur = malloc(m->h.len);	/* m->h.len - 1 bytes + a NUL */
		if (*cur == NULL)
			return dpg_errs(err, DPG_ERR_NOMEM, "store: out of memory");
		memcpy(*cur, m->body + 1, m->h.len - 1);
		((char *)*cur)[m->h.len - 1] = '\0';
		if (curlen != NULL)
			*curlen = m->h.len - 1;
	}
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
		return -DPG_ERR_INVALID;
	if (elen > DPG_STORE_VALUE_MAX || dlen > DPG_STORE_VALUE_MAX)
		return dpg_errf(err, "store: CAS value for key '%s' over %u bytes",
				dpg_err_quote(key, q, sizeof(q)), DPG_STORE_VALUE_MAX);
	dpg_le_put32(kl, (uint32_t)klen);
	dpg_le_put32(el, (uint32_t)elen);
	v[0] = (struct iovec){ kl, 4 };
	v[1] = (struct iovec){ (void *)key, klen };
	v[2] = (struct iovec){ el, 4 };
	v[3] = (struct iovec){ (void *)expected, elen };
	v[4] = (struct iovec){ (void *)desired, dlen };
	snprintf(what, sizeof(what), "compare-and-set of key '%s'",
		 dpg_err_quote(key, q, sizeof(q)));
	rc = rpc(s, DPG_OP_CAS, v, 5, deadline_ms, what, &m, err);
	if (rc != 0)
		return rc;
	return cas_result(s, &m, what, cur, curlen, err);
}

/* WAIT's body as iovecs: count, then each key's length and bytes (lens holds
 * the encoded numbers). */
static int wait_body(const char *const *keys, size_t nkeys, struct iovec *v,
		     uint8_t *lens, struct dpg_err *err)
{
	size_t i;

	dpg_le_put32(lens, (uint32_t)nkeys);
	v[0] = (struct iovec){ lens, 4 };
	for (i = 0; i < nkeys; i++) {
		size_t klen;

		if (check_key(keys[i], &klen, err) != 0)
			return -DPG_ERR_INVALID;
		dpg_le_put32(lens + 4 * (i + 1), (uint32_t)klen);
		v[1 + 2 * i] = (struct iovec){ lens + 4 * (i + 1), 4 };
		v[2 + 2 * i] = (struct iovec){ (void *)keys[i], klen };
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
	int rc;

	if (nkeys == 0)
		return 0;
	if (nkeys > DPG_STORE_WAIT_MAX_KEYS)
		return dpg_errf(err, "store: cannot wait for %zu keys at once (limit %d)",
				nkeys, DPG_STORE_WAIT_MAX_KEYS);
	v = malloc((1 + 2 * nkeys) * sizeof(*v));
	lens = malloc(4 * (nkeys + 1));
	rc = v == NULL || lens == NULL ?
	     dpg_errs(err, DPG_ERR_NOMEM, "store: out of memory") :
	     wait_body(keys, nkeys, v, lens, err);
	if (rc == 0) {
		memcpy(what, "waiting for ", 12);
		describe_keys(keys, nkeys, what + 12, sizeof(what) - 12);
		rc = rpc(s, DPG_OP_WAIT, v, (int)(1 + 2 * nkeys), deadline_ms, what, &m, err);
	}
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
		return -DPG_ERR_INVALID;
	dpg_le_put32(kl, (uint32_t)klen);
	v[0] = (struct iovec){ kl, 4 };
	v[1] = (struct iovec){ (void *)key, klen };
	snprintf(what, sizeof(what), "deleting key '%s'", dpg_err_quote(key, q, sizeof(q)));
	return rpc(s, DPG_OP_DEL, v, 2, deadline_ms, what, &m, err);
}

/* Say how far a timed-out barrier got: one quick look at the counter. */
static int barrier_timed_out(struct dpg_store *s, const char *name, const char *count,
			     int n, int64_t gen, int64_t waited, struct dpg_err *err)
{
	int64_t now_in = -1;
	char q[96];

	/* a short look: the caller's deadline has passed already */
	if (dpg_store_add(s, count, 0, &now_in, dpg_now_ms() + 200, NULL) == 0) {
		now_in = now_in >= gen * n ? now_in - gen * n : -1;
		if (now_in > n)
			now_in = n;
	}
	if (now_in >= 0)
		return dpg_errs(err, DPG_ERR_TIMEOUT, "store: timed out after %.1f s in "
				"barrier '%s' (generation %" PRId64 ": %" PRId64 " of %d "
				"arrived; store at %s)", (double)waited / 1000.0,
				dpg_err_quote(name, q, sizeof(q)), gen, now_in, n, s->where);
	return dpg_errs(err, DPG_ERR_TIMEOUT, "store: timed out after %.1f s in barrier "
			"'%s' (generation %" PRId64 " of %d participants; store at %s)",
			(double)waited / 1000.0, dpg_err_quote(name, q, sizeof(q)), gen, n,
			s->where);
}

int dpg_store_barrier(struct dpg_store *s, const char *name, int n,
		      int64_t deadline_ms, struct dpg_err *err)
{
	char count[DPG_STORE_KEY_MAX + 1], done[DPG_STORE_KEY_MAX + 1], q[96];
	const char *keys[1] = { done };
	int64_t t0 = dpg_now_ms(), arrival, gen;
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
	if (arrival < 1)	/* a counter only ever grows from 1: not our store's */
		return dpg_errs(err, DPG_ERR_PEER, "store: barrier '%s': the store "
				"answered arrival %" PRId64 " (at %s)",
				dpg_err_quote(name, q, sizeof(q)), arrival, s->where);
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
	if (rc != -DPG_ERR_TIMEOUT)
		return rc;
	return barrier_timed_out(s, name, count, n, gen, deadline_ms - t0, err);
}

/* ------------------------------------------------------------ secret */

int dpg_secret_parse(const char *hex, uint8_t *out, size_t cap, size_t *len,
		     struct dpg_err *err)
{
	size_t n, i;

	if (hex == NULL || hex[0] == '\0')
		return dpg_errf(err, "job secret: empty (want %d..%d hex digits)",
				DPG_SECRET_HEX_MIN, DPG_SECRET_HEX_MAX);
	n = strlen(hex);
	for (i = 0; i < n; i++)
		if (dpg_hex_digit(hex[i]) < 0)
			return dpg_errf(err, "job secret: character %zu is not a hex digit "
					"(want %d..%d hex digits)", i + 1,
					DPG_SECRET_HEX_MIN, DPG_SECRET_HEX_MAX);
	if (n < DPG_SECRET_HEX_MIN || n > DPG_SECRET_HEX_MAX)
		return dpg_errf(err, "job secret: %zu hex digits (want %d..%d)", n,
				DPG_SECRET_HEX_MIN, DPG_SECRET_HEX_MAX);
	if (n % 2 != 0)
		return dpg_errf(err, "job secret: odd number of hex digits (%zu)", n);
	if (n / 2 > cap)
		return dpg_errf(err, "job secret: %zu bytes do not fit in %zu", n / 2, cap);
	for (i = 0; i < n / 2; i++)
		out[i] = (uint8_t)(dpg_hex_digit(hex[2 * i]) << 4 | dpg_hex_digit(hex[2 * i + 1]));
	*len = n / 2;
	return 0;
}
