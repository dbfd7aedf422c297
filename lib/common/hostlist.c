/* SPDX-License-Identifier: BSD-3-Clause */
/* hostlist.c - Slurm hostlist expressions: grammar, host count, n-th host, expansion.
 * Owns the parsing rules and Slurm's host order; keeps no state between calls. */
#include "hostlist.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Grammar (what Slurm 22.05's hostlist_create() accepts, made strict):
 *
 *   expr    := item { ',' item }
 *   item    := literal | { literal } bracket { [ literal ] bracket }
 *   literal := 1*( ALPHA | DIGIT | '-' | '.' | '_' )
 *   bracket := '[' range { ',' range } ']'
 *   range   := number [ '-' number ]        low <= high
 *
 * Semantics, checked against libslurm 22.05 (slurm_hostlist_create/shift):
 *  - a number is zero-padded to the number of digits its range's LOW end is
 *    written with: n[08-10] -> n08 n09 n10, n[8-10] -> n8 n9 n10,
 *    n[1-010] -> n1 .. n10, n[01-5] -> n01 .. n05;
 *  - several bracket groups form a cartesian product in Slurm's peculiar
 *    order: the LAST group varies fastest, then the first, the second, ...,
 *    and the next-to-last varies slowest.  a[1-2]b[3-4]c[5-6] gives
 *    a1b3c5 a1b3c6 a2b3c5 a2b3c6 a1b4c5 a1b4c6 a2b4c5 a2b4c6;
 *  - duplicates are kept, in order (a,a,b -> a a b; n[1,1] -> n1 n1);
 *  - text after the last ']' is refused, as Slurm refuses it (x[1-2]y).
 *
 * Deliberately stricter than Slurm, because the lists we parse come from
 * Slurm's own environment variables, which never contain these, and a value
 * that does is damaged rather than something to guess about:
 *  - empty items (leading, trailing or doubled ',') are errors; Slurm skips
 *    them.  An empty or NULL expression is an error too (Slurm: empty list);
 *  - whitespace is an error; Slurm treats it as a separator like ',';
 *  - host names are limited to letters, digits, '-', '.', '_' and to
 *    DPG_HOSTNAME_MAX bytes; numbers to 18 digits of value (HL_NUM_MAX);
 *  - a single range may name any number of hosts (Slurm caps a range at
 *    65536); count/nth work arithmetically, expand is bounded by max_hosts.
 */

#define HL_NUM_MAX UINT64_C(999999999999999999)	/* 10^18 - 1 */
#define HL_QUOTE_MAX 80		/* bytes of the expression quoted in errors */
#define HL_NEAR_MAX 24		/* bytes quoted around an error's position */

struct hl_ctx {
	const char *expr;
	struct dpg_err *err;	/* NULL: re-parsing validated text */
};

struct hl_range {
	uint64_t lo, hi;
	size_t width;		/* digits in lo as written: the padding */
};

struct hl_bracket {
	uint64_t count;		/* hosts the group stands for */
	uint64_t lensum;	/* sum of the printed numbers' lengths */
	size_t maxlen;		/* longest printed number */
	const char *close;	/* its ']' */
};

struct hl_item {
	const char *start, *end;	/* end: the ',' or NUL after it */
	const char *last_open;		/* '[' of the last group, or NULL */
	size_t nbrackets;
	uint64_t count;			/* hosts it names (>= 1) */
	uint64_t bytes;			/* sum of strlen + 1 over its hosts */
};

struct hl_summary {
	uint64_t hosts;
	uint64_t bytes;
	size_t max_brackets;
};

struct hl_out {			/* bounded writer for one host name */
	char *buf;
	size_t cap, len;	/* len may exceed cap: then nothing past cap */
};

struct hl_cursor {		/* one bracket group while expanding */
	const char *lit;	/* literal text before the group */
	size_t litlen;
	const char *open;
	const char *after;	/* ',' or ']' that ends the current range */
	struct hl_range r;
	uint64_t val;
};

/* ------------------------------------------------------------ helpers */

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	uint64_t r;

	return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
	uint64_t r;

	return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

static bool hl_is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool hl_is_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       hl_is_digit(c) || c == '-' || c == '.' || c == '_';
}

static bool hl_is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' ||
	       c == '\v' || c == '\f';
}

static size_t hl_ndigits(uint64_t v)
{
	size_t n = 1;

	while (v >= 10) {
		v /= 10;
		n++;
	}
	return n;
}

static size_t hl_printed_len(uint64_t v, size_t width)
{
	size_t n = hl_ndigits(v);

	return n > width ? n : width;
}

/* Describe the byte at p for an error message ("'x'" or "byte 0x1b"). */
static const char *hl_char_desc(char c, char *buf, size_t len)
{
	unsigned char u = (unsigned char)c;

	if (u >= 0x21 && u < 0x7f)
		snprintf(buf, len, "'%c'", c);
	else
		snprintf(buf, len, "byte 0x%02x", u);
	return buf;
}

static int hl_fail(const struct hl_ctx *cx, const char *at,
		   const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Error naming the expression, what is wrong, and where (if at != NULL). */
static int hl_fail(const struct hl_ctx *cx, const char *at,
		   const char *fmt, ...)
{
	char what[256], q[HL_QUOTE_MAX], near[HL_NEAR_MAX + 8];
	va_list ap;

	if (cx->err == NULL)
		return -1;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	dpg_err_quote(cx->expr, q, sizeof(q));
	if (at == NULL)
		return dpg_errf(cx->err, "hostlist \"%s\": %s", q, what);
	if (*at == '\0')
		return dpg_errf(cx->err, "hostlist \"%s\": %s at offset %zu "
				"(end of input)", q, what, (size_t)(at - cx->expr));
	dpg_err_quote(at, near, sizeof(near));
	return dpg_errf(cx->err, "hostlist \"%s\": %s at offset %zu (near \"%s\")",
			q, what, (size_t)(at - cx->expr), near);
}

/* ------------------------------------------------------------ brackets */

static int hl_bracket_junk(const struct hl_ctx *cx, const char *p,
			   const char *expected)
{
	char d[16];

	if (*p == '\0')
		return hl_fail(cx, p, "unclosed '[' (expected %s)", expected);
	if (*p == '[')
		return hl_fail(cx, p, "nested '[' (brackets do not nest; expected %s)",
			       expected);
	return hl_fail(cx, p, "unexpected %s in brackets (expected %s)",
		       hl_char_desc(*p, d, sizeof(d)), expected);
}

static int hl_parse_num(const struct hl_ctx *cx, const char *p,
			uint64_t *val, size_t *ndig, const char **end)
{
	const char *q = p;
	uint64_t v = 0;

	if (!hl_is_digit(*q))
		return hl_bracket_junk(cx, q, "a decimal number");
	for (; hl_is_digit(*q); q++) {
		uint64_t d = (uint64_t)(*q - '0');

		if (v > (HL_NUM_MAX - d) / 10)
			return hl_fail(cx, p, "number is larger than %" PRIu64,
				       HL_NUM_MAX);
		v = v * 10 + d;
	}
	*val = v;
	*ndig = (size_t)(q - p);
	*end = q;
	return 0;
}

/* Parse "lo" or "lo-hi" at p; *end gets the ',' or ']' that follows. */
static int hl_parse_range(const struct hl_ctx *cx, const char *p,
			  struct hl_range *r, const char **end)
{
	const char *q;
	size_t nd_hi;

	if (hl_parse_num(cx, p, &r->lo, &r->width, &q) < 0)
		return -1;
	r->hi = r->lo;
	if (*q == '-') {
		if (hl_parse_num(cx, q + 1, &r->hi, &nd_hi, &q) < 0)
			return -1;
		if (r->hi < r->lo)
			return hl_fail(cx, p, "reversed range %" PRIu64 "-%" PRIu64
				       " (expected low <= high)", r->lo, r->hi);
	}
	if (*q != ',' && *q != ']')
		return hl_bracket_junk(cx, q, "',' or ']' after a range");
	*end = q;
	return 0;
}

/* Sum of the printed lengths of lo..hi, split by number of digits. */
static uint64_t hl_range_lensum(const struct hl_range *r)
{
	uint64_t sum = 0, dlo = 0, dhi = 9;
	size_t d;

	for (d = 1; dlo <= r->hi; d++) {
		uint64_t a = r->lo > dlo ? r->lo : dlo;
		uint64_t b = r->hi < dhi ? r->hi : dhi;

		if (a <= b)
			sum = sat_add(sum, sat_mul(b - a + 1,
						   d > r->width ? d : r->width));
		if (dhi > HL_NUM_MAX)
			break;
		dlo = dhi + 1;
		dhi = dhi * 10 + 9;
	}
	return sum;
}

static int hl_scan_bracket(const struct hl_ctx *cx, const char *open,
			   struct hl_bracket *b)
{
	const char *p = open + 1;
	struct hl_range r;

	memset(b, 0, sizeof(*b));
	for (;;) {
		size_t len;

		if (hl_parse_range(cx, p, &r, &p) < 0)
			return -1;
		if (__builtin_add_overflow(b->count, r.hi - r.lo + 1, &b->count))
			return hl_fail(cx, open, "bracket names more than 2^64 hosts");
		b->lensum = sat_add(b->lensum, hl_range_lensum(&r));
		len = hl_printed_len(r.hi, r.width);
		if (len > b->maxlen)
			b->maxlen = len;
		if (*p == ']')
			break;
		p++;
	}
	b->close = p;
	return 0;
}

/* The idx-th number of a validated bracket group. */
static void hl_bracket_pick(const char *open, uint64_t idx, uint64_t *val,
			    size_t *width)
{
	const struct hl_ctx quiet = { open, NULL };
	const char *p = open + 1;
	struct hl_range r = { 0, 0, 1 };

	while (hl_parse_range(&quiet, p, &r, &p) == 0) {
		if (idx <= r.hi - r.lo || *p != ',')
			break;
		idx -= r.hi - r.lo + 1;
		p++;
	}
	*val = r.lo + idx;
	*width = r.width;
}

/* ------------------------------------------------------------ items */

static int hl_bad_char(const struct hl_ctx *cx, const char *p)
{
	char d[16];

	if (*p == ']')
		return hl_fail(cx, p, "unmatched ']'");
	if (hl_is_space(*p))
		return hl_fail(cx, p, "whitespace is not allowed (separate host names with ',')");
	return hl_fail(cx, p, "invalid character %s (host names use letters, "
		       "digits, '-', '.' and '_')", hl_char_desc(*p, d, sizeof(d)));
}

static size_t hl_literal_span(const char *p)
{
	size_t n = 0;

	while (hl_is_name_char(p[n]))
		n++;
	return n;
}

/* Validate one item starting at start, and measure it without expanding. */
static int hl_scan_item(const struct hl_ctx *cx, const char *start,
			struct hl_item *it)
{
	const char *p = start, *suffix = NULL;
	uint64_t prod = 1, lensum = 0;
	size_t namelen = 0;

	memset(it, 0, sizeof(*it));
	it->start = start;
	if (*p == ',' || *p == '\0')
		return hl_fail(cx, p, "empty host name (leading, trailing or doubled ',')");
	while (*p != ',' && *p != '\0') {
		if (*p == '[') {
			struct hl_bracket b;

			if (hl_scan_bracket(cx, p, &b) < 0)
				return -1;
			lensum = sat_add(sat_mul(lensum, b.count),
					 sat_mul(b.lensum, prod));
			if (__builtin_mul_overflow(prod, b.count, &prod))
				return hl_fail(cx, start, "item names more than 2^64 hosts");
			namelen += b.maxlen;
			it->last_open = p;
			it->nbrackets++;
			suffix = NULL;
			p = b.close + 1;
		} else if (hl_is_name_char(*p)) {
			size_t n = hl_literal_span(p);

			lensum = sat_add(lensum, sat_mul(prod, n));
			namelen += n;
			if (it->nbrackets > 0)
				suffix = p;
			p += n;
		} else {
			return hl_bad_char(cx, p);
		}
	}
	if (suffix != NULL)
		return hl_fail(cx, suffix, "text after the last ']' (Slurm "
			       "accepts no suffix after the last bracket group)");
	if (namelen > DPG_HOSTNAME_MAX)
		return hl_fail(cx, start, "host names up to %zu bytes long "
			       "(the limit is %d)", namelen, DPG_HOSTNAME_MAX);
	it->end = p;
	it->count = prod;
	it->bytes = sat_add(lensum, prod);
	return 0;
}

static int hl_check_expr(const struct hl_ctx *cx)
{
	size_t n;

	if (cx->expr == NULL)
		return dpg_errf(cx->err, "hostlist is NULL (expected a Slurm "
				"hostlist such as \"node[01-04]\")");
	n = strnlen(cx->expr, (size_t)DPG_HOSTLIST_EXPR_MAX + 1);
	if (n > DPG_HOSTLIST_EXPR_MAX)
		return hl_fail(cx, NULL, "longer than %d bytes",
			       DPG_HOSTLIST_EXPR_MAX);
	if (n == 0)
		return hl_fail(cx, NULL, "empty (expected at least one host name)");
	return 0;
}

/* Validate the whole expression and total it up. */
static int hl_scan_all(const struct hl_ctx *cx, struct hl_summary *s)
{
	const char *p = cx->expr;
	struct hl_item it;

	memset(s, 0, sizeof(*s));
	if (hl_check_expr(cx) < 0)
		return -1;
	for (;;) {
		if (hl_scan_item(cx, p, &it) < 0)
			return -1;
		if (__builtin_add_overflow(s->hosts, it.count, &s->hosts))
			return hl_fail(cx, NULL, "names more than 2^64 hosts");
		s->bytes = sat_add(s->bytes, it.bytes);
		if (it.nbrackets > s->max_brackets)
			s->max_brackets = it.nbrackets;
		if (*it.end == '\0')
			return 0;
		p = it.end + 1;
	}
}

static int hl_check_max(const struct hl_ctx *cx, const struct hl_summary *s,
			size_t max_hosts)
{
	if (s->hosts > (uint64_t)max_hosts)
		return hl_fail(cx, NULL, "names %" PRIu64 " hosts, more than "
			       "the limit of %zu", s->hosts, max_hosts);
	return 0;
}

/* ------------------------------------------------------------ output */

static void hl_put(struct hl_out *o, const char *s, size_t n)
{
	if (o->len < o->cap) {
		size_t room = o->cap - o->len;

		memcpy(o->buf + o->len, s, n < room ? n : room);
	}
	o->len += n;
}

static void hl_put_num(struct hl_out *o, uint64_t v, size_t width)
{
	char digits[24];
	size_t nd = 0, i;

	do {
		digits[sizeof(digits) - 1 - nd++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	for (i = nd; i < width; i++)
		hl_put(o, "0", 1);
	hl_put(o, digits + sizeof(digits) - nd, nd);
}

/* Terminate the name; -1 if it did not fit (the caller reports that). */
static int hl_finish(struct hl_out *o)
{
	if (o->len >= o->cap) {
		if (o->cap > 0)
			o->buf[o->cap - 1] = '\0';
		return -1;
	}
	o->buf[o->len] = '\0';
	return 0;
}

/* ------------------------------------------------------------ n-th host */

/* Render the idx-th host of a validated item (Slurm's order, see above). */
static void hl_item_nth(const struct hl_item *it, uint64_t idx,
			struct hl_out *o)
{
	const struct hl_ctx quiet = { it->start, NULL };
	uint64_t last_idx = 0, val;
	const char *p = it->start;
	struct hl_bracket b;
	size_t width;

	if (it->last_open != NULL) {
		hl_scan_bracket(&quiet, it->last_open, &b);
		last_idx = idx % b.count;
		idx /= b.count;
	}
	while (p < it->end) {
		if (*p != '[') {
			size_t n = hl_literal_span(p);

			hl_put(o, p, n);
			p += n;
			continue;
		}
		hl_scan_bracket(&quiet, p, &b);
		if (p == it->last_open) {
			hl_bracket_pick(p, last_idx, &val, &width);
		} else {
			hl_bracket_pick(p, idx % b.count, &val, &width);
			idx /= b.count;
		}
		hl_put_num(o, val, width);
		p = b.close + 1;
	}
}

int dpg_hostlist_nth(const char *expr, size_t n, char *buf, size_t len,
		     struct dpg_err *err)
{
	const struct hl_ctx cx = { expr, err };
	struct hl_out o = { buf, len, 0 };
	struct hl_summary s;
	struct hl_item it;
	const char *p = expr;
	uint64_t idx = n;

	if (buf == NULL || len == 0)
		return dpg_errf(err, "hostlist nth: no output buffer given");
	buf[0] = '\0';
	if (hl_scan_all(&cx, &s) < 0)
		return -1;
	if (idx >= s.hosts)
		return hl_fail(&cx, NULL, "host index %zu is out of range "
			       "(the list has %" PRIu64 " hosts)", n, s.hosts);
	for (;;) {
		hl_scan_item(&cx, p, &it);
		if (idx < it.count)
			break;
		idx -= it.count;
		p = it.end + 1;
	}
	hl_item_nth(&it, idx, &o);
	if (hl_finish(&o) < 0) {
		buf[0] = '\0';	/* never hand out a truncated name */
		return hl_fail(&cx, NULL, "host %zu needs %zu bytes plus NUL "
			       "but the buffer has %zu in all", n, o.len, len);
	}
	return 0;
}

int dpg_hostlist_count(const char *expr, size_t max_hosts, size_t *count,
		       struct dpg_err *err)
{
	const struct hl_ctx cx = { expr, err };
	struct hl_summary s;

	if (count == NULL)
		return dpg_errf(err, "hostlist count: no output pointer given");
	*count = 0;
	if (hl_scan_all(&cx, &s) < 0 || hl_check_max(&cx, &s, max_hosts) < 0)
		return -1;
	*count = (size_t)s.hosts;
	return 0;
}

/* ------------------------------------------------------------ expansion */

static void hl_cursor_reset(struct hl_cursor *c)
{
	const struct hl_ctx quiet = { c->open, NULL };

	hl_parse_range(&quiet, c->open + 1, &c->r, &c->after);
	c->val = c->r.lo;
}

/* Advance to the next number; true when the group wrapped to its start. */
static bool hl_cursor_step(struct hl_cursor *c)
{
	const struct hl_ctx quiet = { c->open, NULL };

	if (c->val < c->r.hi) {
		c->val++;
		return false;
	}
	if (*c->after == ',') {
		hl_parse_range(&quiet, c->after + 1, &c->r, &c->after);
		c->val = c->r.lo;
		return false;
	}
	hl_cursor_reset(c);
	return true;
}

/* Odometer in Slurm's order: last group fastest, then first, second, ...
 * Returns false once every combination has been produced. */
static bool hl_cursors_next(struct hl_cursor *cur, size_t k)
{
	size_t j;

	if (k == 0)
		return false;
	if (!hl_cursor_step(&cur[k - 1]))
		return true;
	for (j = 0; j + 1 < k; j++)
		if (!hl_cursor_step(&cur[j]))
			return true;
	return false;
}

/* Point one cursor at each bracket group of a validated item. */
static size_t hl_cursors_init(const struct hl_item *it, struct hl_cursor *cur)
{
	const char *p = it->start, *lit = it->start;
	size_t k = 0;

	while (p < it->end) {
		if (*p != '[') {
			p += hl_literal_span(p);
			continue;
		}
		cur[k].lit = lit;
		cur[k].litlen = (size_t)(p - lit);
		cur[k].open = p;
		hl_cursor_reset(&cur[k]);
		k++;
		p = strchr(p, ']') + 1;
		lit = p;
	}
	return k;
}

static void hl_cursors_render(const struct hl_item *it,
			      const struct hl_cursor *cur, size_t k,
			      struct hl_out *o)
{
	size_t j;

	if (k == 0)
		hl_put(o, it->start, (size_t)(it->end - it->start));
	for (j = 0; j < k; j++) {
		hl_put(o, cur[j].lit, cur[j].litlen);
		hl_put_num(o, cur[j].val, cur[j].r.width);
	}
}

struct hl_fill {
	char **names;
	char *block;
	size_t nhosts, nbytes;	/* capacity */
	size_t ni, off;		/* used */
};

static int hl_expand_item(const struct hl_item *it, struct hl_cursor *cur,
			  struct hl_fill *f)
{
	size_t k = hl_cursors_init(it, cur);

	do {
		struct hl_out o = { f->block + f->off, f->nbytes - f->off, 0 };

		if (f->ni >= f->nhosts)
			return -1;
		hl_cursors_render(it, cur, k, &o);
		if (hl_finish(&o) < 0)
			return -1;
		f->names[f->ni++] = o.buf;
		f->off += o.len + 1;
	} while (hl_cursors_next(cur, k));
	return 0;
}

static int hl_expand_all(const struct hl_ctx *cx, struct hl_cursor *cur,
			 struct hl_fill *f)
{
	const char *p = cx->expr;
	struct hl_item it;

	for (;;) {
		hl_scan_item(cx, p, &it);
		if (hl_expand_item(&it, cur, f) < 0)
			return -1;
		if (*it.end == '\0')
			break;
		p = it.end + 1;
	}
	return (f->ni == f->nhosts && f->off == f->nbytes) ? 0 : -1;
}

int dpg_hostlist_expand(const char *expr, size_t max_hosts,
			struct dpg_hostlist *out, struct dpg_err *err)
{
	const struct hl_ctx cx = { expr, err };
	struct hl_summary s;
	struct hl_fill f;
	struct hl_cursor *cur;
	size_t ptrs, total;
	void *mem;

	if (out == NULL)
		return dpg_errf(err, "hostlist expand: no output list given");
	memset(out, 0, sizeof(*out));
	if (hl_scan_all(&cx, &s) < 0 || hl_check_max(&cx, &s, max_hosts) < 0)
		return -1;
	if (__builtin_mul_overflow((size_t)s.hosts, sizeof(char *), &ptrs) ||
	    s.bytes > SIZE_MAX ||
	    __builtin_add_overflow(ptrs, (size_t)s.bytes, &total))
		return hl_fail(&cx, NULL, "expansion does not fit in memory");
	mem = malloc(total);
	cur = calloc(s.max_brackets > 0 ? s.max_brackets : 1, sizeof(*cur));
	if (mem == NULL || cur == NULL) {
		free(mem);
		free(cur);
		return hl_fail(&cx, NULL, "out of memory expanding %" PRIu64
			       " hosts (%zu bytes)", s.hosts, total);
	}
	f = (struct hl_fill){ mem, (char *)mem + ptrs, (size_t)s.hosts,
			      (size_t)s.bytes, 0, 0 };
	if (hl_expand_all(&cx, cur, &f) < 0) {
		free(mem);
		free(cur);
		return hl_fail(&cx, NULL, "internal error: expansion does "
			       "not match the computed size");
	}
	free(cur);
	out->names = mem;
	out->count = (size_t)s.hosts;
	return 0;
}

void dpg_hostlist_free(struct dpg_hostlist *hl)
{
	if (hl == NULL)
		return;
	free(hl->names);
	memset(hl, 0, sizeof(*hl));
}
