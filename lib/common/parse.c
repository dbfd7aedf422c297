/* SPDX-License-Identifier: BSD-3-Clause */
/* parse.c - strict parsers of the small values every wing reads: decimal
 * integers in a range, hex digits and index lists ("0,2-3"). */
#include "parse.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

int dpg_parse_ulong(const char *s, unsigned long lo, unsigned long hi,
		    unsigned long *out)
{
	char *end = NULL;
	unsigned long v;

	if (s == NULL || *s < '0' || *s > '9' || strlen(s) > 20)
		return -1;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || end == NULL || *end != '\0' || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

int dpg_hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}
/* ---------------------------------------------------------------- index lists */

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Decimal index <= max at *pp; advances *pp past the digits. */
static enum dpg_ilist_status ilist_num(const char **pp, unsigned long max,
				       unsigned long *out)
{
	const char *p = *pp;
	unsigned long v = 0;

	if (!is_digit(*p))
		return DPG_ILIST_NUMBER;
	while (is_digit(*p)) {
		unsigned long d = (unsigned long)(*p - '0');

		if (d > max || v > (max - d) / 10)
			return DPG_ILIST_TOO_LARGE;
		v = v * 10 + d;
		p++;
	}
	*pp = p;
	*out = v;
	return DPG_ILIST_OK;
}

/* "N" or "N-M" at *pp; advances *pp. */
static enum dpg_ilist_status ilist_range(const char **pp, unsigned long max,
					 struct dpg_ilist_item *it)
{
	enum dpg_ilist_status st = ilist_num(pp, max, &it->lo);

	it->hi = it->lo;
	if (st == DPG_ILIST_OK && **pp == '-') {
		(*pp)++;
		st = ilist_num(pp, max, &it->hi);
	}
	if (st == DPG_ILIST_OK && it->hi < it->lo)
		st = DPG_ILIST_DESCENDING;
	return st;
}

/* End of the item at p (the next comma or the end), less trailing blanks. */
static const char *ilist_item_end(const char *p, unsigned flags)
{
	const char *e = p;

	while (*e != '\0' && *e != ',')
		e++;
	while ((flags & DPG_ILIST_BLANKS) && e > p && is_blank(e[-1]))
		e--;
	return e;
}

/* One item at *pp: a range, or (DPG_ILIST_WORDS) a word; advances *pp. */
static enum dpg_ilist_status ilist_item(const char **pp, unsigned flags,
					unsigned long max,
					struct dpg_ilist_item *it)
{
	const char *p = *pp, *e = ilist_item_end(p, flags);
	enum dpg_ilist_status st;

	it->word = NULL;
	it->len = 0;
	st = ilist_range(pp, max, it);
	if ((flags & DPG_ILIST_WORDS) && e > p && (st != DPG_ILIST_OK || *pp != e)) {
		it->word = p;
		it->len = (size_t)(e - p);
		*pp = e;
		return DPG_ILIST_OK;
	}
	return st;
}

static const char *skip_blanks(const char *p, unsigned flags)
{
	while ((flags & DPG_ILIST_BLANKS) && is_blank(*p))
		p++;
	return p;
}

enum dpg_ilist_status dpg_ilist_parse(const char *s, unsigned flags,
				      unsigned long max,
				      int (*fn)(void *ctx, const struct dpg_ilist_item *it),
				      void *ctx, size_t *where)
{
	const char *p = s == NULL ? "" : skip_blanks(s, flags);
	enum dpg_ilist_status st = DPG_ILIST_OK;

	if (*p == '\0') {
		if (where != NULL)
			*where = 0;
		return s != NULL && (flags & DPG_ILIST_EMPTY_OK) ? DPG_ILIST_OK :
								    DPG_ILIST_EMPTY;
	}
	for (;;) {
		struct dpg_ilist_item it;

		p = skip_blanks(p, flags);
		st = ilist_item(&p, flags, max, &it);
		if (st != DPG_ILIST_OK)
			break;
		if (fn != NULL && fn(ctx, &it) != 0) {
			st = DPG_ILIST_STOPPED;
			break;
		}
		p = skip_blanks(p, flags);
		if (*p == '\0')
			break;
		if (*p != ',') {
			st = DPG_ILIST_JUNK;
			break;
		}
		if (*skip_blanks(++p, flags) == '\0') {
			st = DPG_ILIST_TRAILING;
			break;
		}
	}
	if (where != NULL)
		*where = (size_t)(p - s);
	return st;
}

/* ---------------------------------------------------------------- device lists */

struct int_list {
	int *out;
	size_t cap, *n;
	const char *s;
	struct dpg_err *err;
};

static int int_list_add(void *ctx, const struct dpg_ilist_item *it)
{
	struct int_list *l = ctx;
	char q[80];

	for (unsigned long v = it->lo; v <= it->hi; v++) {
		if (*l->n >= l->cap)
			return dpg_errf(l->err, "device list '%s' names more than %zu "
					"devices", dpg_err_quote(l->s, q, sizeof(q)), l->cap);
		l->out[(*l->n)++] = (int)v;
	}
	return 0;
}

int dpg_int_list_parse(const char *s, int *out, size_t cap, size_t *n,
		       struct dpg_err *err)
{
	struct int_list l = { out, cap, n, s, err };
	enum dpg_ilist_status st;
	char q[80];

	*n = 0;
	st = dpg_ilist_parse(s, 0, 4095, int_list_add, &l, NULL);
	if (st == DPG_ILIST_OK)
		return 0;
	*n = 0;
	if (st == DPG_ILIST_EMPTY)
		return dpg_errf(err, "empty device list");
	if (st == DPG_ILIST_STOPPED)
		return -1;
	return dpg_errf(err, "invalid device list '%s': expected indices such as "
			"0,2,3 or 0-3", dpg_err_quote(s, q, sizeof(q)));
}
