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
 * L on NODE, carrying local ranks ..."); the store names it in its log when
 * the relay's connection ends while the store still serves. */
#define DPG_RELAY_KEY_PREFIX ".relay/"
#define DPG_RELAY_NAME_MAX 64		/* an abstract socket name, with its NUL */

struct dpg_store_relay;

/* A per-job, per-node abstract Unix socket name for the relay, derived from
 * what every local rank knows alike (namespace, node, the store's address). */
void dpg_store_relay_name(const char *ns, const char *node, const char *host,
			  uint16_t port, char out[DPG_RELAY_NAME_MAX]);

/* Start a relay: connect and authenticate upstream to host:port (retrying
 * until deadline_ms), register `label` under DPG_RELAY_KEY_PREFIX `name`,
 * then serve local clients on the abstract socket `name` from one epoll
 * thread.  Local clients speak the unchanged store protocol and must prove
 * the same secret; their requests go upstream with ids remapped, CANCELs
 * pass through, and a local client's end cancels what it had parked.  When
 * the upstream connection ends, every local connection is closed. */
int dpg_store_relay_start(const char *name, const char *host, uint16_t port,
			  const uint8_t *secret, size_t secret_len, const char *label,
			  int64_t deadline_ms, const volatile int *abort,
			  struct dpg_store_relay **out, struct dpg_err *err);
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
 * yet.  where names the store in messages as dpg_store_connect's host:port
 * would; leader (may be NULL) words the errors when the relay goes away:
 * "the node leader (LEADER) closed the connection". */
int dpg_store_connect_relay(const char *name, const char *where, const char *leader,
			    const uint8_t *secret, size_t secret_len, int64_t deadline_ms,
			    const volatile int *abort, struct dpg_store **out,
			    struct dpg_err *err);

/* Hand over the socket of an authenticated, idle client handle and free the
 * handle (the relay's upstream connection). */
int dpg_store_take_fd(struct dpg_store *s);

#endif
