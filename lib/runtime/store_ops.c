/* SPDX-License-Identifier: BSD-3-Clause */
/* store_ops.c - the store server's request handlers: one function per op
 * (SET, GET, ADD, CAS, WAIT, DEL, CANCEL) in a table indexed by op code, and
 * the GET/WAIT requests parked on keys not set yet. */
#include "store.h"
#include "store_relay.h"	/* DPG_RELAY_KEY_PREFIX */
#include "store_server.h"
#include "le.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ parked requests */

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
	size_t cost;			/* counted in conn and server parked_bytes */
	struct wlink links[];
};

static void wreq_free(struct dpg_store_server *s, struct wreq *r)
{
	uint32_t i;

	for (i = 0; i < r->nlinks; i++) {
		struct entry *e = r->links[i].e;

		if (e != NULL) {
			dl_del(&r->links[i].node);
			r->links[i].e = NULL;
			dpg_kv_gc(&s->t, e);
		}
	}
	dl_del(&r->node);
	r->c->nparked--;
	r->c->parked_bytes -= r->cost;
	s->nparked--;
	s->parked_bytes -= r->cost;
	free(r);
}

void dpg_srv_unpark_all(struct dpg_store_server *s, struct conn *c)
{
	while (!dl_empty(&c->parked))
		wreq_free(s, container_of(c->parked.next, struct wreq, node));
}

/* The text of a DPG_WIRE_LOST answer. */
static void answer_lost(struct dpg_store_server *s, struct conn *c, uint8_t op, uint32_t id)
{
	dpg_srv_reply(s, c, op, DPG_WIRE_LOST, id, s->lost, strlen(s->lost), NULL);
}

void dpg_srv_fail_parked(struct dpg_store_server *s)
{
	for (struct dl *it = s->conns.next; it != &s->conns; it = it->next) {
		struct conn *c = container_of(it, struct conn, all);

		while (!dl_empty(&c->parked)) {
			struct wreq *r = container_of(c->parked.next, struct wreq, node);

			answer_lost(s, c, r->op, r->id);
			wreq_free(s, r);
		}
	}
}

/* ------------------------------------------------------------ requests */

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

	return p ? dpg_le_get32(p) : 0;
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

/* One authenticated request being handled. */
struct req {
	struct dpg_store_server *s;
	struct conn *c;
	uint8_t op;
	uint32_t id;
	struct cur k;			/* the body */
};

/* What a handler made of its request (all but DONE drop the connection). */
enum verdict { DONE, MALFORMED, OVERPARKED };

static void answer(const struct req *q, const void *pre, size_t plen, struct blob *val)
{
	dpg_srv_reply(q->s, q->c, q->op, DPG_WIRE_OK, q->id, pre, plen, val);
}

static void answer_err(const struct req *q, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void answer_err(const struct req *q, const char *fmt, ...)
{
	char msg[DPG_STORE_ERRMSG_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(msg))
		n = sizeof(msg) - 1;
	dpg_srv_reply(q->s, q->c, q->op, DPG_WIRE_ERROR, q->id, msg, (size_t)n, NULL);
}

/* Answer a parked request whose keys are all set. */
static void wreq_answer(struct dpg_store_server *s, struct wreq *r, struct entry *last)
{
	if (r->op == DPG_OP_GET)
		dpg_srv_reply(s, r->c, DPG_OP_GET, DPG_WIRE_OK, r->id, NULL, 0, last->val);
	else
		dpg_srv_reply(s, r->c, DPG_OP_WAIT, DPG_WIRE_OK, r->id, NULL, 0, NULL);
	wreq_free(s, r);
}

/* Store val under e (taking our reference) and wake its waiters. */
static void entry_set(struct dpg_store_server *s, struct entry *e, struct blob *val)
{
	dpg_kv_set(&s->t, e, val);
	while (!dl_empty(&e->waiters)) {
		struct wlink *l = container_of(e->waiters.next, struct wlink, node);
		struct wreq *r = l->req;

		dl_del(&l->node);
		l->e = NULL;
		if (--r->missing == 0)
			wreq_answer(s, r, e);
	}
}

/* Set key to data, or answer an error; returns the entry or NULL. */
static struct entry *store_put(const struct req *q, const uint8_t *k, size_t klen,
			       const void *data, size_t n)
{
	struct dpg_kv *t = &q->s->t;
	struct entry *e = dpg_kv_get_or_add(t, k, klen);
	struct blob *b;
	char qk[128];

	if (e == NULL) {
		answer_err(q, "the store is full (%u keys): cannot add key '%s'",
			   DPG_STORE_MAX_KEYS, qkey(k, klen, qk, sizeof(qk)));
		return NULL;
	}
	if (!dpg_kv_fits(t, e, n)) {
		dpg_kv_gc(t, e);
		answer_err(q, "the store is full (%zu MiB of values): cannot set key '%s'",
			   DPG_STORE_MAX_VALUE_BYTES >> 20, qkey(k, klen, qk, sizeof(qk)));
		return NULL;
	}
	b = dpg_blob_new(data, n);
	if (b == NULL) {
		dpg_kv_gc(t, e);
		answer_err(q, "the store is out of memory");
		return NULL;
	}
	entry_set(q->s, e, b);
	return e;
}

/* What parking costs the server: the request, and per missing key a link and
 * (at most) a new table entry holding the key; every key's length is counted,
 * an upper bound (missing keys are not told apart from set ones here). */
static size_t park_cost(const size_t *klens, uint32_t n, uint32_t missing)
{
	size_t cost = sizeof(struct wreq) +
		      (size_t)missing * (sizeof(struct wlink) + sizeof(struct entry) + 1);
	uint32_t i;

	for (i = 0; i < n; i++)
		cost += klens[i];
	return cost;
}

/* Within the parking bounds (store.h)?  If not, answer why. */
static bool park_fits(const struct req *q, size_t cost)
{
	if (q->c->parked_bytes + cost > DPG_STORE_PARKED_CONN_BYTES) {
		answer_err(q, "too many waits parked on this connection: %zu bytes of "
			   "pending GET/WAIT requests and keys, %zu more asked (limit %zu "
			   "MiB per connection); wait for fewer keys at once",
			   q->c->parked_bytes, cost, DPG_STORE_PARKED_CONN_BYTES >> 20);
		return false;
	}
	if (q->s->parked_bytes + cost > DPG_STORE_PARKED_BYTES) {
		answer_err(q, "too many waits parked in all: %zu bytes of pending GET/WAIT "
			   "requests and keys over every connection, %zu more asked (limit "
			   "%zu MiB in all)", (size_t)q->s->parked_bytes, cost,
			   DPG_STORE_PARKED_BYTES >> 20);
		return false;
	}
	return true;
}

/* Park the request for the keys listed (those already set are skipped). */
static enum verdict park(const struct req *q, const uint8_t *const *keys,
			 const size_t *klens, uint32_t n, uint32_t missing)
{
	struct conn *c = q->c;
	size_t cost = park_cost(klens, n, missing);
	struct wreq *r;
	uint32_t i;

	if (q->s->lost[0] != '\0') {	/* what it waits for may never come */
		answer_lost(q->s, c, q->op, q->id);
		return DONE;
	}
	if (c->nparked >= DPG_STORE_MAX_PARKED)
		return OVERPARKED;
	if (!park_fits(q, cost))
		return DONE;
	r = calloc(1, sizeof(*r) + missing * sizeof(r->links[0]));
	if (r == NULL) {
		answer_err(q, "the store is out of memory");
		return DONE;
	}
	r->c = c;
	r->id = q->id;
	r->op = q->op;
	r->cost = cost;
	dl_add_tail(&c->parked, &r->node);
	c->nparked++;
	c->parked_bytes += cost;
	q->s->nparked++;
	q->s->parked_bytes += cost;
	for (i = 0; i < n; i++) {
		struct entry *e = dpg_kv_get_or_add(&q->s->t, keys[i], klens[i]);
		struct wlink *l;
		char qk[128];

		if (e != NULL && e->val != NULL)
			continue;
		if (e == NULL) {
			wreq_free(q->s, r);
			answer_err(q, "the store is full (%u keys): cannot wait for key '%s'",
				   DPG_STORE_MAX_KEYS, qkey(keys[i], klens[i], qk, sizeof(qk)));
			return DONE;
		}
		l = &r->links[r->nlinks++];
		l->e = e;
		l->req = r;
		dl_add_tail(&e->waiters, &l->node);
		r->missing++;
	}
	return DONE;
}

/* ------------------------------------------------------------ operations */

/* A node leader's relay registers what it carries: named when it is lost. */
static void relay_label(struct conn *c, const uint8_t *v, size_t n)
{
	size_t i;

	if (n >= sizeof(c->label))
		n = sizeof(c->label) - 1;
	for (i = 0; i < n; i++)
		c->label[i] = v[i] >= 0x20 && v[i] < 0x7f ? (char)v[i] : '?';
	c->label[n] = '\0';
}

static enum verdict op_set(struct req *q)
{
	size_t klen = 0;
	const uint8_t *key = cur_key(&q->k, &klen);

	if (q->k.bad || q->k.n > DPG_STORE_VALUE_MAX)
		return MALFORMED;
	if (klen > sizeof(DPG_RELAY_KEY_PREFIX) - 1 &&
	    memcmp(key, DPG_RELAY_KEY_PREFIX, sizeof(DPG_RELAY_KEY_PREFIX) - 1) == 0)
		relay_label(q->c, q->k.p, q->k.n);
	if (store_put(q, key, klen, q->k.p, q->k.n) != NULL)
		answer(q, NULL, 0, NULL);
	return DONE;
}

static enum verdict op_get(struct req *q)
{
	size_t klen = 0;
	const uint8_t *key = cur_key(&q->k, &klen);
	struct entry *e;

	if (q->k.bad || q->k.n != 0)
		return MALFORMED;
	e = dpg_kv_find(&q->s->t, key, klen);
	if (e != NULL && e->val != NULL) {
		answer(q, NULL, 0, e->val);
		return DONE;
	}
	return park(q, &key, &klen, 1, 1);
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

static enum verdict op_add(struct req *q)
{
	size_t klen = 0;
	const uint8_t *key = cur_key(&q->k, &klen), *p = cur_take(&q->k, 8);
	int64_t delta, cur = 0, res;
	struct entry *e;
	uint8_t out[8];
	char txt[24], qk[128];
	int n;

	if (q->k.bad || q->k.n != 0)
		return MALFORMED;
	delta = (int64_t)dpg_le_get64(p);
	e = dpg_kv_find(&q->s->t, key, klen);
	if (e != NULL && e->val != NULL && !parse_i64(e->val->data, e->val->len, &cur)) {
		answer_err(q, "ADD: the value of key '%s' is not a decimal integer",
			   qkey(key, klen, qk, sizeof(qk)));
		return DONE;
	}
	if (__builtin_add_overflow(cur, delta, &res)) {
		answer_err(q, "ADD: key '%s' would overflow int64",
			   qkey(key, klen, qk, sizeof(qk)));
		return DONE;
	}
	n = snprintf(txt, sizeof(txt), "%" PRId64, res);
	if (store_put(q, key, klen, txt, (size_t)n) != NULL) {
		dpg_le_put64(out, (uint64_t)res);
		answer(q, out, 8, NULL);
	}
	return DONE;
}

static enum verdict op_cas(struct req *q)
{
	size_t klen = 0;
	const uint8_t *key = cur_key(&q->k, &klen), *exp;
	uint32_t elen = cur_u32(&q->k);
	struct entry *e;
	uint8_t exists;

	if (q->k.bad || elen > DPG_STORE_VALUE_MAX || q->k.n - elen > DPG_STORE_VALUE_MAX)
		return MALFORMED;
	exp = cur_take(&q->k, elen);
	if (q->k.bad)
		return MALFORMED;
	e = dpg_kv_find(&q->s->t, key, klen);
	if (e != NULL && e->val != NULL ?
	    e->val->len == elen && memcmp(e->val->data, exp, elen) == 0 :
	    elen == 0) {
		e = store_put(q, key, klen, q->k.p, q->k.n);
		if (e == NULL)
			return DONE;
	}
	exists = e != NULL && e->val != NULL;
	answer(q, &exists, 1, exists ? e->val : NULL);
	return DONE;
}

/* Read WAIT's n keys into keys/klens and count those not set yet. */
static enum verdict wait_keys(struct req *q, uint32_t n, const uint8_t **keys,
			      size_t *klens, uint32_t *missing)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		struct entry *e;

		keys[i] = cur_key(&q->k, &klens[i]);
		if (q->k.bad)
			return MALFORMED;
		e = dpg_kv_find(&q->s->t, keys[i], klens[i]);
		if (e == NULL || e->val == NULL)
			(*missing)++;
	}
	return q->k.n != 0 ? MALFORMED : DONE;
}

static enum verdict op_wait(struct req *q)
{
	uint32_t n = cur_u32(&q->k), missing = 0;
	const uint8_t **keys;
	size_t *klens;
	enum verdict v;

	if (q->k.bad || n == 0 || n > DPG_STORE_WAIT_MAX_KEYS)
		return MALFORMED;
	keys = malloc(n * sizeof(*keys));
	klens = malloc(n * sizeof(*klens));
	if (keys == NULL || klens == NULL) {
		free(keys);
		free(klens);
		answer_err(q, "the store is out of memory");
		return DONE;
	}
	v = wait_keys(q, n, keys, klens, &missing);
	if (v == DONE && missing == 0)
		answer(q, NULL, 0, NULL);
	else if (v == DONE)
		v = park(q, keys, klens, n, missing);
	free(keys);
	free(klens);
	return v;
}

static enum verdict op_del(struct req *q)
{
	size_t klen = 0;
	const uint8_t *key = cur_key(&q->k, &klen);
	struct entry *e;
	uint8_t existed = 0;

	if (q->k.bad || q->k.n != 0)
		return MALFORMED;
	e = dpg_kv_find(&q->s->t, key, klen);
	if (e != NULL && e->val != NULL) {
		existed = 1;
		dpg_kv_unset(&q->s->t, e);
	}
	answer(q, &existed, 1, NULL);
	return DONE;
}

/* Forget a parked request the client gave up on; no reply. */
static enum verdict op_cancel(struct req *q)
{
	uint32_t id = cur_u32(&q->k);
	struct dl *it;

	if (q->k.bad || q->k.n != 0)
		return MALFORMED;
	for (it = q->c->parked.next; it != &q->c->parked; it = it->next) {
		struct wreq *r = container_of(it, struct wreq, node);

		if (r->id == id) {
			wreq_free(q->s, r);
			break;
		}
	}
	return DONE;
}

/* The handler of each request op after authentication (NULL: not allowed). */
static enum verdict (*const op_table[DPG_OP_MAX + 1])(struct req *q) = {
	[DPG_OP_SET] = op_set,
	[DPG_OP_GET] = op_get,
	[DPG_OP_ADD] = op_add,
	[DPG_OP_CAS] = op_cas,
	[DPG_OP_WAIT] = op_wait,
	[DPG_OP_DEL] = op_del,
	[DPG_OP_CANCEL] = op_cancel,
};

int dpg_srv_handle(struct dpg_store_server *s, struct conn *c,
		   const struct dpg_wire_hdr *h, const uint8_t *body, struct dpg_err *why)
{
	struct req q = { s, c, h->op, h->id, { body, h->len, false } };
	const char *name = dpg_wire_op_name(h->op);

	if (h->op > DPG_OP_MAX || op_table[h->op] == NULL)
		return dpg_errs(why, DPG_ERR_PEER, "unexpected %s message after "
				"authentication", name);
	switch (op_table[h->op](&q)) {
	case DONE:
		return 0;
	case MALFORMED:
		return dpg_errs(why, DPG_ERR_PEER, "malformed %s body (%" PRIu32 " bytes)",
				name, h->len);
	case OVERPARKED:
		return dpg_errs(why, DPG_ERR_PEER, "more than %d requests parked at once",
				DPG_STORE_MAX_PARKED);
	}
	return dpg_errs(why, DPG_ERR_PEER, "unhandled %s", name);
}
