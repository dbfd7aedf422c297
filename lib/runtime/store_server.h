/* SPDX-License-Identifier: BSD-3-Clause */
/* store_server.h - the store server's state and connections, shared by its
 * event loop (store_server.c) and its request handlers (store_ops.c). */
#ifndef DPG_LIB_STORE_SERVER_H
#define DPG_LIB_STORE_SERVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "store_relay.h"	/* DPG_RELAY_LABEL_MAX */
#include "store_table.h"
#include "store_wire.h"

struct oseg;				/* queued output (store_server.c) */

#define DPG_SRV_LOST_MAX 384		/* the line naming a lost node leader */

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
	uint32_t addr;			/* IPv4 source, network order (0: unknown) */
	uint8_t nonce[DPG_WIRE_NONCE];
	uint8_t *rbuf;
	size_t rlen, rcap;
	struct oseg *ohead, *otail;
	size_t obytes;
	struct dl parked;		/* store_ops.c's struct wreq.node */
	uint32_t nparked;
	size_t parked_bytes;		/* the cost of what is parked (store_ops.c) */
	char peer[32];
	char label[DPG_RELAY_LABEL_MAX];	/* a relay's registration (DPG_RELAY_KEY_PREFIX) */
};

struct dpg_store_server {
	pthread_t th;
	bool started;
	pid_t pid;			/* of the process that started it */
	int lfd, epfd, wakefd, sparefd;
	uint16_t port;
	int64_t auth_timeout_ms;
	size_t unauth_max, unauth_per_src;	/* caps on unauthenticated connections */
	struct dpg_wire_key key;
	struct dpg_kv t;
	struct dl conns, unauth;
	/* written by the server thread only; atomic for dpg_store_server_stats */
	_Atomic size_t nunauth;		/* on unauth */
	_Atomic size_t nparked, parked_bytes;	/* over every connection */
	struct conn *flush;
	struct conn *graveyard;		/* closed, to free after the batch */
	bool stopping;			/* server_free: connections end by our hand */
	/* the first relay lost while serving ("" = none): from then on every
	 * GET/WAIT that would park is answered DPG_WIRE_LOST with this text */
	char lost[DPG_SRV_LOST_MAX];
	/* log rate limiting */
	int64_t log_sec;
	unsigned log_lines;
	unsigned long log_dropped;
};

/* store_server.c: queue a reply (op | DPG_OP_REPLY, status st): header, then
 * pre (inline), then val (by reference or copy); val may be NULL. */
void dpg_srv_reply(struct dpg_store_server *s, struct conn *c, uint8_t op, uint16_t st,
		   uint32_t id, const void *pre, size_t plen, struct blob *val);

/* store_ops.c: handle one authenticated request; -DPG_ERR_PEER for a protocol
 * violation (why says which: the caller logs it and drops the connection). */
int dpg_srv_handle(struct dpg_store_server *s, struct conn *c,
		   const struct dpg_wire_hdr *h, const uint8_t *body, struct dpg_err *why);
/* store_ops.c: forget every request c has parked (c is closing). */
void dpg_srv_unpark_all(struct dpg_store_server *s, struct conn *c);
/* store_ops.c: answer every request parked on any connection with
 * DPG_WIRE_LOST and s->lost (a node leader's relay was lost). */
void dpg_srv_fail_parked(struct dpg_store_server *s);

#endif
