/* SPDX-License-Identifier: BSD-3-Clause */
/* store.h - the rendezvous store: a key-value server run by rank 0 on
 * MASTER_ADDR:MASTER_PORT and its clients, authenticated by the job secret. */
#ifndef DPG_LIB_STORE_H
#define DPG_LIB_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "contract_vars.h"	/* DPG_SECRET_HEX_MIN, DPG_SECRET_HEX_MAX */
#include "err.h"

#define DPG_STORE_KEY_MAX 512			/* bytes in a key */
#define DPG_STORE_VALUE_MAX (8u << 20)		/* bytes in a value */
#define DPG_STORE_SECRET_MAX (DPG_SECRET_HEX_MAX / 2)	/* bytes of decoded secret */
/* What GET/WAIT requests parked on unset keys may hold (the requests and the
 * keys they add), per connection and over the whole store; past either, a
 * request is answered with an error instead of parked. */
#define DPG_STORE_PARKED_CONN_BYTES ((size_t)8 << 20)
#define DPG_STORE_PARKED_BYTES ((size_t)32 << 20)

/* Return codes (err.h's convention): 0, or -DPG_ERR_TIMEOUT, -DPG_ERR_ABORTED,
 * -DPG_ERR_PEER (the peer closed the connection or broke the protocol),
 * -DPG_ERR_AUTH (the server refused our secret, or we its, or it is not a
 * dpg store), -DPG_ERR_SYSTEM, -DPG_ERR_NOMEM, and -DPG_ERR_INVALID (-1) for
 * a bad argument or a request the store refused (ADD on text, store full).
 * The implementation: store_wire.c (what both ends share), store_server.c,
 * store_ops.c and store_table.c (the server), store_client.c (the client). */

struct dpg_store_server;
struct dpg_store;

/* Start the server: listens on addr:port (addr NULL = all), serves every
 * connection that proves knowledge of secret from one epoll thread, and
 * logs refused clients to stderr ("dpg store: refused <peer>: <why>").
 * secret/secret_len: raw bytes (at least 16). */
int dpg_store_server_start(const char *addr, uint16_t port,
			   const uint8_t *secret, size_t secret_len,
			   struct dpg_store_server **out, struct dpg_err *err);
uint16_t dpg_store_server_port(const struct dpg_store_server *s);
void dpg_store_server_stop(struct dpg_store_server *s);

/* What the server holds now (diagnostics and tests; callable from any thread). */
struct dpg_store_server_stats {
	size_t unauth;			/* connections not authenticated (yet) */
	size_t parked;			/* GET/WAIT requests waiting for keys */
	size_t parked_bytes;		/* what they hold: requests + the keys they added */
};
void dpg_store_server_stats(const struct dpg_store_server *s,
			    struct dpg_store_server_stats *st);

/* Connect and authenticate, retrying until deadline_ms (dpg_now_ms clock).
 * abort (may be NULL) ends waits early with -DPG_ERR_ABORTED. */
int dpg_store_connect(const char *host, uint16_t port, const uint8_t *secret,
		      size_t secret_len, int64_t deadline_ms,
		      const volatile int *abort, struct dpg_store **out,
		      struct dpg_err *err);
void dpg_store_close(struct dpg_store *s);
/* The connection is closed or out of step (the store, or the node leader's
 * relay, went away): unusable.  A wait answered "lost" leaves it usable. */
bool dpg_store_broken(const struct dpg_store *s);
/* Connected through a node leader's relay (dpg_store_connect_relay). */
bool dpg_store_relayed(const struct dpg_store *s);

int dpg_store_set(struct dpg_store *s, const char *key, const void *val,
		  size_t len, int64_t deadline_ms, struct dpg_err *err);
/* Wait until key exists, then return a malloc'd copy (caller frees). */
int dpg_store_get(struct dpg_store *s, const char *key, void **val, size_t *len,
		  int64_t deadline_ms, struct dpg_err *err);
/* Atomically add delta to the integer at key (missing = 0); *result = new. */
int dpg_store_add(struct dpg_store *s, const char *key, int64_t delta,
		  int64_t *result, int64_t deadline_ms, struct dpg_err *err);
/* If key holds expected (or is missing and elen == 0), set it to desired.
 * *cur (malloc'd, may be NULL) receives the value after the operation. */
int dpg_store_cas(struct dpg_store *s, const char *key, const void *expected,
		  size_t elen, const void *desired, size_t dlen, void **cur,
		  size_t *curlen, int64_t deadline_ms, struct dpg_err *err);
/* Wait until every key exists. */
int dpg_store_wait(struct dpg_store *s, const char *const *keys, size_t nkeys,
		   int64_t deadline_ms, struct dpg_err *err);
/* All n participants of `name` arrive (add + wait on a generation key). */
int dpg_store_barrier(struct dpg_store *s, const char *name, int n,
		      int64_t deadline_ms, struct dpg_err *err);

/* Decode a hex secret (32..128 hex digits) into raw bytes. */
int dpg_secret_parse(const char *hex, uint8_t *out, size_t cap, size_t *len,
		     struct dpg_err *err);

#endif
