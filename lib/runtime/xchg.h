/* SPDX-License-Identifier: BSD-3-Clause */
/* xchg.h - the all-exchange over the rendezvous store: every member of a
 * group contributes one value, every member gets all values. */
#ifndef DPG_LIB_XCHG_H
#define DPG_LIB_XCHG_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct dpg_store;

/* Grace given to non-leaders of an exchange beyond the leader's deadline,
 * so that they receive the leader's diagnosis instead of timing out alone. */
#define DPG_XCHG_GRACE_MS 5000

/* One exchange: who takes part and where.  The keys live under prefix
 * (a key namespace unique to this exchange). */
struct dpg_xchg_group {
	struct dpg_store *store;
	const char *prefix;
	int me, n;			/* this member, of n */
	const int *world_ranks;		/* member -> world rank, for messages
					 * (NULL: the identity) */
	int64_t timeout_ms;
};

/* The result of an exchange: member i's value is val[i], vlen[i] bytes. */
struct dpg_xchg {
	void *blob;
	const uint8_t **val;
	size_t *vlen;
	int n;
};

/* Leader's check of all values: 0 = fine, else a negated dpg_status_t with
 * the message in e. */
typedef int (*dpg_xchg_check_fn)(void *arg, const struct dpg_xchg *x,
				 struct dpg_err *e);

/* Member i sets <prefix>/<i>; member 0 collects them and republishes them
 * as one value <prefix>/all ('T' + n x (u32 len, bytes)), or 'E' + status +
 * message when a member did not arrive in time or check() (may be NULL)
 * refused the values.  Returns 0 or a negated dpg_status_t, with the reason
 * in e (without the rank prefix).  x is always set; free it with
 * dpg_xchg_free. */
int dpg_xchg_run(const struct dpg_xchg_group *g, const void *v, size_t vlen,
		 dpg_xchg_check_fn check, void *arg, struct dpg_xchg *x,
		 struct dpg_err *e);

void dpg_xchg_free(struct dpg_xchg *x);

#endif
