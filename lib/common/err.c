/* SPDX-License-Identifier: BSD-3-Clause */
/* err.c - one-line error messages for lib/ functions.
 * No global state: the caller owns the struct dpg_err that receives the text. */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int dpg_errf(struct dpg_err *err, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL)
		return -1;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return -1;
}

int dpg_errs(struct dpg_err *err, dpg_status_t st, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL) {
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return -(int)st;
}

int dpg_err_prefix(struct dpg_err *err, const char *what)
{
	char old[DPG_ERR_MSG_MAX];
	size_t n;

	if (err == NULL)
		return -1;
	memcpy(old, err->msg, sizeof(old));
	old[sizeof(old) - 1] = '\0';
	n = strlen(what);
	if (n + 2 >= sizeof(err->msg))
		return -1;
	memcpy(err->msg, what, n);
	memcpy(err->msg + n, ": ", 2);
	memcpy(err->msg + n + 2, old, sizeof(err->msg) - n - 3);
	err->msg[sizeof(err->msg) - 1] = '\0';
	return -1;
}

const char *dpg_err_quote(const char *s, char *buf, size_t len)
{
	size_t o = 0;

	if (len == 0)
		return "";
	if (s == NULL) {
		snprintf(buf, len, "(null)");
		return buf;
	}
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;
		char tmp[5];
		size_t n;

		if (c >= 0x20 && c < 0x7f) {
			tmp[0] = (char)c;
			tmp[1] = '\0';
		} else {
			snprintf(tmp, sizeof(tmp), "\\x%02x", c);
		}
		n = strlen(tmp);
		if (o + n + 4 >= len) {	/* room for "..." and NUL */
			memcpy(buf + o, "...", 3);
			o += 3;
			break;
		}
		memcpy(buf + o, tmp, n);
		o += n;
	}
	buf[o] = '\0';
	return buf;
}
