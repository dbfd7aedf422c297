/* err.h - the error record every lib/ function fills in on failure.
 * Callers own the struct; a NULL pointer means "caller does not want the text". */
#ifndef DPG_LIB_ERR_H
#define DPG_LIB_ERR_H

#include <stddef.h>

#define DPG_ERR_MSG_MAX 512

struct dpg_err {
	char msg[DPG_ERR_MSG_MAX];
};

/* Format a one-line message into err (if non-NULL); always returns -1 so
 * that callers can write `return dpg_errf(err, "...")`. */
int dpg_errf(struct dpg_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Prepend "what: " to the message already in err (if non-NULL); returns -1. */
int dpg_err_prefix(struct dpg_err *err, const char *what);

/* Copy at most n bytes of s into an escaped, printable form suitable for an
 * error message (non-printable bytes as \xNN, truncated with "..."). */
const char *dpg_err_quote(const char *s, char *buf, size_t len);

#endif
