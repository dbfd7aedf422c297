/* SPDX-License-Identifier: BSD-3-Clause */
/* zlayout.h - the flat, padded layout of a sharded model (ZeRO): which
 * parameter lives where in each unit, and which slice each rank owns. */
#ifndef DPG_LIB_ZLAYOUT_H
#define DPG_LIB_ZLAYOUT_H

#include <stddef.h>

#include "err.h"

#define DPG_ZNAME_MAX 64	/* parameter names, NUL included */
#define DPG_ZALIGN 16		/* shard sizes are multiples of this many elements */

struct dpg_zparam {
	char name[DPG_ZNAME_MAX];
	size_t numel;
	int unit;
	size_t unit_off;	/* element offset inside its unit's flat buffer */
};

/* Unit u's flat buffer holds its parameters back to back (numel elements),
 * then zeros up to padded = nranks * shard elements; rank r owns
 * [r * shard, (r + 1) * shard) of it, stored in the rank's shard buffer at
 * shard_off. */
struct dpg_zunit {
	size_t numel, padded, shard;
	size_t shard_off;	/* offset in a rank's concatenated shard buffer */
	size_t flat_off;	/* offset in the concatenation of full units */
	int first_param, nparams;
};

struct dpg_zlayout {
	int nparams, nunits, nranks;
	struct dpg_zparam *p;	/* owned */
	struct dpg_zunit *u;	/* owned */
	size_t numel;		/* real elements (sum of numel) */
	size_t padded_numel;	/* sum of padded: the full flat size */
	size_t shard_numel;	/* sum of shard: one rank's shard buffer */
	size_t max_unit_padded;
};

/* Build the layout of nparams parameters over nranks ranks.  Parameters
 * come in unit order: unit ids start at 0 and go up by 0 or 1 from one
 * parameter to the next.  Returns 0, or -1 with err (bad unit order, empty
 * name, name too long, zero numel, overflow, no memory).  Free with
 * dpg_zlayout_free (also after a failure). */
int dpg_zlayout_build(struct dpg_zlayout *L, int nparams, const char *const *names,
		      const size_t *numel, const int *unit, int nranks,
		      struct dpg_err *err);
void dpg_zlayout_free(struct dpg_zlayout *L);

/* Do a and b describe the same model (names, sizes, units)? 1 yes; 0 no,
 * with err saying the first difference. */
int dpg_zlayout_same_model(const struct dpg_zlayout *a, const struct dpg_zlayout *b,
			   struct dpg_err *err);

/* The intersection of rank r's shard of unit u with the real (unpadded)
 * elements: [*lo, *hi) in unit-flat coordinates (lo == hi: only padding). */
void dpg_zlayout_shard_range(const struct dpg_zlayout *L, int u, int r, size_t *lo,
			     size_t *hi);

#endif
