/* SPDX-License-Identifier: BSD-3-Clause */
/* parse.h - strict parsers of small values (decimal ranges, hex digits,
 * index lists) shared by the plugin, the tools and the runtime. */
#ifndef DPG_LIB_PARSE_H
#define DPG_LIB_PARSE_H

#include <stddef.h>

#include "err.h"

/* Strict decimal parse of s into [lo, hi]; no sign, no spaces, no junk. */
int dpg_parse_ulong(const char *s, unsigned long lo, unsigned long hi,
		    unsigned long *out);

/* Value of one hexadecimal digit, or -1. */
int dpg_hex_digit(char c);

/* ------------------------------------------------------------ index lists
 * The one grammar of the "0,2-3" lists dpg reads (CPU lists, device lists,
 * Slurm's allocated GPUs): items separated by single commas, each a decimal
 * index "N" or an ascending range "N-M".  Options pick the variations:
 * blanks around items (Linux CPU lists), an empty list, and words (an item
 * that is not a number is handed to the caller, e.g. a PCI bus id).  Each
 * caller keeps its own bounds and its own error wording. */

enum dpg_ilist_status {
	DPG_ILIST_OK = 0,
	DPG_ILIST_EMPTY,	/* NULL or nothing but blanks (without EMPTY_OK) */
	DPG_ILIST_NUMBER,	/* expected an index at *where (also an empty item) */
	DPG_ILIST_TOO_LARGE,	/* an index above max */
	DPG_ILIST_DESCENDING,	/* "M-N" with M > N */
	DPG_ILIST_JUNK,		/* unexpected character after an item at *where */
	DPG_ILIST_TRAILING,	/* the list ends with a comma */
	DPG_ILIST_STOPPED,	/* the caller's callback refused an item */
};

#define DPG_ILIST_BLANKS 1u	/* spaces and tabs around items */
#define DPG_ILIST_EMPTY_OK 2u	/* "" (or only blanks) is the empty list */
#define DPG_ILIST_WORDS 4u	/* an item that is not a valid range goes to the
				   callback as a word (the caller judges it) */

/* One item: the range lo..hi (lo == hi for one index), or a word (word !=
 * NULL, len bytes, not NUL-terminated; only with DPG_ILIST_WORDS). */
struct dpg_ilist_item {
	unsigned long lo, hi;
	const char *word;
	size_t len;
};

/* Walk s, calling fn(ctx, item) for each item in order; fn returns nonzero
 * to stop (DPG_ILIST_STOPPED, fn records its own error).  Indices above max
 * fail.  On failure *where (optional) is the byte offset of the problem. */
enum dpg_ilist_status dpg_ilist_parse(const char *s, unsigned flags,
				      unsigned long max,
				      int (*fn)(void *ctx, const struct dpg_ilist_item *it),
				      void *ctx, size_t *where);

/* Parse a comma list of small non-negative integers ("0,2,3" or "0-3"). */
int dpg_int_list_parse(const char *s, int *out, size_t cap, size_t *n,
		       struct dpg_err *err);

#endif
