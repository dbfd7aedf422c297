/* SPDX-License-Identifier: BSD-3-Clause */
/* hops.h - connecting the CPU backend's TCP hops: one poll loop connects our
 * two channels to the next rank while it accepts the previous rank's. */
#ifndef DPG_LIB_CPU_HOPS_H
#define DPG_LIB_CPU_HOPS_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "hello.h"
#include "ring.h"

/* What the loop needs besides p (ranks, peers, hosts, abort flag). */
struct dpg_cpu_hops {
	int lfd;				/* our listen socket */
	const struct dpg_cpu_hello_key *key;
	uint64_t my_token;			/* the token we published */
	const struct dpg_cpu_wire *next;	/* the next rank's record; NULL:
						 * that hop is not TCP */
	bool want_prev;				/* the previous hop is TCP */
	int64_t deadline;			/* dpg_now_ms clock */
};

/* Fill p->next.fd/cfd (when h->next) and p->prev.fd/cfd (when
 * h->want_prev).  Connections to our port are served many at once: each
 * gets a challenge and must answer with a valid hello within a second;
 * anything else is closed after that one failed handshake.  Our own
 * connections are retried (refused, closed before the ack) until the
 * deadline.  A timeout names the rank whose side never came: the previous
 * rank that never connected, the next rank that never answered.  0 or
 * -DPG_ERR_TIMEOUT, -DPG_ERR_ABORTED, -DPG_ERR_SYSTEM with err filled. */
int dpg_cpu_hops_connect(struct dpg_cpu *p, const struct dpg_cpu_hops *h,
			 struct dpg_err *err);

#endif
