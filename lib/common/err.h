/* SPDX-License-Identifier: BSD-3-Clause */
/* err.h - the one error convention of lib/: 0 or a negated dpg_status_t, with
 * the one-line message recorded once, where the failure happens. */
#ifndef DPG_LIB_ERR_H
#define DPG_LIB_ERR_H

#include <stddef.h>

#include "dpg.h"	/* dpg_status_t */

/* Every lib/ function that can fail returns 0 on success or a negated
 * dpg_status_t (-DPG_ERR_TIMEOUT, -DPG_ERR_PEER, ...) and writes one line
 * into the caller's struct dpg_err (a NULL pointer means "caller does not
 * want the text").  Callers pass a failure up unchanged (`if (rc != 0)
 * return rc;`), adding context with dpg_err_prefix at most; the public API
 * turns it into a dpg_status_t once, at the edge.  The launch side (parsers,
 * planner, contract) only ever fails with bad input: dpg_errf, whose -1 is
 * -DPG_ERR_INVALID. */
_Static_assert(DPG_ERR_INVALID == 1, "dpg_errf's -1 must be -DPG_ERR_INVALID");

#define DPG_ERR_MSG_MAX 512

struct dpg_err {
	char msg[DPG_ERR_MSG_MAX];
};

/* Format a one-line message into err (if non-NULL); always returns -1
 * (-DPG_ERR_INVALID) so that callers can write `return dpg_errf(err, ...)`. */
int dpg_errf(struct dpg_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The same with the status named: returns -(int)st, e.g.
 * `return dpg_errs(err, DPG_ERR_TIMEOUT, "...")`. */
int dpg_errs(struct dpg_err *err, dpg_status_t st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Prepend "what: " to the message already in err (if non-NULL); returns -1. */
int dpg_err_prefix(struct dpg_err *err, const char *what);

/* Copy at most n bytes of s into an escaped, printable form suitable for an
 * error message (non-printable bytes as \xNN, truncated with "..."). */
const char *dpg_err_quote(const char *s, char *buf, size_t len);

#endif
