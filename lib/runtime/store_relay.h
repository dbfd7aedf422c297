/* SPDX-License-Identifier: BSD-3-Clause */
/* store_relay.h - a node leader's relay: the ranks of a node reach rank 0's
 * store through one authenticated upstream connection held by their leader. */
#ifndef DPG_LIB_STORE_RELAY_H
#define DPG_LIB_STORE_RELAY_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "store.h"

/* The store's key where a relay registers what it carries ("node leader rank
 * 4 on n2, carrying ranks 4-7"); the store names it in its log, and in its
 * answer to every wait from then on, when the relay's connection ends while
 * the store still serves. */
#define DPG_RELAY_KEY_PREFIX ".relay/"
#define DPG_RELAY_NAME_MAX 64		/* an abstract socket name, with its NUL */
#define DPG_RELAY_LABEL_MAX 256		/* a registration, with its NUL */

/* Who leads the node: named in the relay's registration and, through the
 * JOIN answer, in its local clients' errors. */
struct dpg_relay_leader {
	int rank;			/* the leader's world rank */
	const char *node;		/* its node's name */
	int local_ranks;		/* how many ranks the node runs */
};

struct dpg_store_relay;

/* A per-job, per-node abstract Unix socket name for the relay, derived from
 * what every local rank knows alike (namespace, node, the store's address). */
void dpg_store_relay_name(const char *ns, const char *node, const char *host,
			  uint16_t port, char out[DPG_RELAY_NAME_MAX]);

/* Start a relay: connect and authenticate upstream to host:port (retrying
 * until deadline_ms), register its label under DPG_RELAY_KEY_PREFIX `name`,
 * then serve local clients on the abstract socket `name` from one epoll
 * thread.  Local clients speak the unchanged store protocol and must prove
 * the same secret; each then JOINs with its world rank (store_wire.h), and
 * the relay registers again, coalesced, as its ranks grow: "node leader rank
 * L on NODE, carrying ranks 4-7" (with "(K of its N local ranks not joined
 * yet)" until all joined).  Their requests go upstream with ids remapped,
 * CANCELs pass through, and a local client's end cancels what it had
 * parked.  When the upstream connection ends, every local connection is
 * closed. */
int dpg_store_relay_start(const char *name, const char *host, uint16_t port,
			  const uint8_t *secret, size_t secret_len,
			  const struct dpg_relay_leader *who, int64_t deadline_ms,
			  const volatile int *abort, struct dpg_store_relay **out,
			  struct dpg_err *err);
void dpg_store_relay_stop(struct dpg_store_relay *r);

/* What the relay holds now (tests, diagnostics; any thread). */
struct dpg_store_relay_stats {
	size_t clients;			/* local connections */
	size_t pending;			/* requests forwarded, not answered yet */
	int upstream_up;		/* 1 while the upstream connection lives */
};
void dpg_store_relay_stats(const struct dpg_store_relay *r,
			   struct dpg_store_relay_stats *st);

/* Client side (store_client.c): connect and authenticate to the relay on the
 * abstract socket `name`, retrying until deadline_ms while it is not there
 * yet, then JOIN as world rank `rank`.  where names the store in messages as
 * dpg_store_connect's host:port would; the relay's JOIN answer words the
 * errors when the relay goes away: "the node leader (rank 4, local rank 0
 * on n2) closed the connection". */
int dpg_store_connect_relay(const char *name, const char *where, int rank,
			    const uint8_t *secret, size_t secret_len, int64_t deadline_ms,
			    const volatile int *abort, struct dpg_store **out,
			    struct dpg_err *err);

/* "4-7", "0, 2, 5-6": the sorted, distinct ranks r[0..n-1] as ranges into
 * buf (cut with ", ..." when it does not fit); returns buf. */
char *dpg_rank_ranges(const int *r, size_t n, char *buf, size_t len);

/* Hand over the socket of an authenticated, idle client handle and free the
 * handle (the relay's upstream connection). */
int dpg_store_take_fd(struct dpg_store *s);

#endif
