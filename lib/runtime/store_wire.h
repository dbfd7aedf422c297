/* SPDX-License-Identifier: BSD-3-Clause */
/* store_wire.h - what both ends of the rendezvous store share: the wire
 * format, op codes, limits and the HMAC challenge (internal to store_*.c).
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
 *     JOIN   rank u32 (to a node's relay only:  reply: the leader, as text
 *            the world rank of a local client)  ("rank L, local rank 0 on NODE")
 *   ADD keeps its integer as decimal ASCII text ("-12"), so GET of a counter
 *   returns readable text and CAS can compare it; ADD on a value that is not
 *   such a number answers an error.
 *   Status 3 (lost) answers a GET or WAIT that would park once a node
 *   leader's relay lost its connection while the store serves: its text names
 *   the leader and the ranks it carried, whose keys can no longer come.
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
 * not a protocol error (store full, ADD on text) is an error reply instead. */
#ifndef DPG_LIB_STORE_WIRE_H
#define DPG_LIB_STORE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "digest.h"
#include "store.h"	/* DPG_STORE_SECRET_MAX */

#define DPG_WIRE_MAGIC 0x53475044u
#define DPG_WIRE_VERSION 1
#define DPG_WIRE_HDR 16			/* bytes in a header */
#define DPG_WIRE_NONCE 32		/* bytes in a nonce */
#define DPG_WIRE_MAC DPG_SHA256_LEN	/* bytes in a MAC */

enum dpg_wire_op {
	DPG_OP_HELLO = 1, DPG_OP_AUTH, DPG_OP_SET, DPG_OP_GET, DPG_OP_ADD, DPG_OP_CAS,
	DPG_OP_WAIT, DPG_OP_DEL, DPG_OP_CANCEL, DPG_OP_JOIN, DPG_OP_MAX = DPG_OP_JOIN
};
#define DPG_OP_REPLY 0x80		/* or'ed into the op of a reply */

/* A reply's status, in its flags. */
enum { DPG_WIRE_OK = 0, DPG_WIRE_ERROR = 1, DPG_WIRE_REFUSED = 2, DPG_WIRE_LOST = 3 };

#define DPG_WIRE_LABEL_CLIENT "dpg-store-v1 client"
#define DPG_WIRE_LABEL_SERVER "dpg-store-v1 server"

/* Limits (the key and value limits are store.h's DPG_STORE_KEY_MAX and
 * DPG_STORE_VALUE_MAX). */
#define DPG_STORE_SECRET_MIN (DPG_SECRET_HEX_MIN / 2)	/* bytes of secret */
#define DPG_STORE_WAIT_MAX_KEYS 4096		/* keys in one WAIT */
#define DPG_STORE_MAX_KEYS (1u << 20)		/* keys in the table */
#define DPG_STORE_MAX_VALUE_BYTES ((size_t)1 << 30)	/* all values together */
#define DPG_STORE_MAX_PARKED 1024		/* parked requests per connection */
#define DPG_STORE_ERRMSG_MAX 1024		/* body of an error reply */

struct dpg_wire_hdr {
	uint32_t magic;
	uint8_t version, op;
	uint16_t flags;
	uint32_t id, len;
};

/* Encode / decode a DPG_WIRE_HDR-byte header. */
void dpg_wire_hdr_put(uint8_t *p, uint8_t op, uint16_t flags, uint32_t id,
		      uint32_t len);
void dpg_wire_hdr_get(const uint8_t *p, struct dpg_wire_hdr *h);

/* Largest body a request of this op may have (0: op not valid as a request). */
uint32_t dpg_wire_body_max(uint8_t op);

/* "SET", "GET", ... for messages ("?" for an unknown op). */
const char *dpg_wire_op_name(uint8_t op);

/* Fill buf with n random bytes (getrandom, else /dev/urandom). */
int dpg_wire_random(void *buf, size_t n, struct dpg_err *err);

/* The job secret, kept to key each handshake's MAC. */
struct dpg_wire_key {
	uint8_t k[DPG_STORE_SECRET_MAX];
	size_t len;
};

/* HMAC(secret, label || ns || nc); 0, or -DPG_ERR_SYSTEM (libcrypto failed). */
int dpg_wire_auth_mac(const struct dpg_wire_key *key, const char *label,
		      const uint8_t *ns, const uint8_t *nc, uint8_t out[DPG_WIRE_MAC]);

/* A usable job secret: DPG_STORE_SECRET_MIN..DPG_STORE_SECRET_MAX bytes. */
int dpg_wire_check_secret(const uint8_t *secret, size_t len, struct dpg_err *err);

#endif
