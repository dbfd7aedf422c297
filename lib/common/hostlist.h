/* SPDX-License-Identifier: BSD-3-Clause */
/* hostlist.h - Slurm hostlist expressions ("gpu[001-004,7],rack[1-2]-n[01-08]").
 * Pure string code with no Slurm dependency; bounded in time and memory. */
#ifndef DPG_LIB_HOSTLIST_H
#define DPG_LIB_HOSTLIST_H

#include <stddef.h>

#include "err.h"

#define DPG_HOSTNAME_MAX 255		/* longest host name accepted */
#define DPG_HOSTLIST_EXPR_MAX 65536	/* longest expression accepted */
#define DPG_HOSTLIST_DEFAULT_MAX 1048576 /* default bound on expanded hosts */

struct dpg_hostlist {
	size_t count;
	char **names;	/* count pointers into one block owned by the list */
};

/* Number of hosts in expr, computed without expanding it.  Fails if the
 * expression is malformed or names more than max_hosts hosts. */
int dpg_hostlist_count(const char *expr, size_t max_hosts, size_t *count,
		       struct dpg_err *err);

/* Write the n-th host (0-based, Slurm's order) of expr into buf[len].
 * Works on huge ranges without expanding them. */
int dpg_hostlist_nth(const char *expr, size_t n, char *buf, size_t len,
		     struct dpg_err *err);

/* Expand expr into out (which the caller frees with dpg_hostlist_free).
 * Fails without allocating if more than max_hosts hosts would result. */
int dpg_hostlist_expand(const char *expr, size_t max_hosts,
			struct dpg_hostlist *out, struct dpg_err *err);
void dpg_hostlist_free(struct dpg_hostlist *hl);

#endif
