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

/* Parse a comma list of small non-negative integers ("0,2,3" or "0-3"). */
int dpg_int_list_parse(const char *s, int *out, size_t cap, size_t *n,
		       struct dpg_err *err);

#endif
