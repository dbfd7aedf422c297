/* SPDX-License-Identifier: BSD-3-Clause */
/* stamp.h - what a CPU collective is, as every rank checks it against its
 * peers' (stamp.c): the communicator's sequence number, kind, count, dtype,
 * op and root, 32 bytes carried in data already exchanged (the first bytes of
 * every ring hop, a cell beside the rank's shared-memory slot). */
#ifndef DPG_LIB_CPU_STAMP_H
#define DPG_LIB_CPU_STAMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dpg.h"
#include "err.h"

#define DPG_STAMP_MAGIC 0x64706773u	/* "dpgs" */

enum dpg_stamp_kind {
	DPG_STAMP_ALLREDUCE = 1,
	DPG_STAMP_REDUCE_SCATTER,
	DPG_STAMP_ALL_GATHER,
	DPG_STAMP_BROADCAST,
	DPG_STAMP_BARRIER,
};

/* One collective as issued by one rank (host byte order: a job runs on one
 * architecture).  Fields that do not apply to the kind are 0 (root: -1). */
struct dpg_stamp {
	uint32_t magic;
	uint8_t kind, dtype, op, pad;
	int32_t root;
	uint32_t pad2;
	uint64_t seq;		/* the communicator's collective number */
	uint64_t count;		/* per rank for reduce_scatter / all_gather */
};
_Static_assert(sizeof(struct dpg_stamp) == 32, "stamp size");

/* Fill s for one call (op only for reductions, root only for broadcast). */
void dpg_stamp_make(struct dpg_stamp *s, uint64_t seq, int kind, size_t count,
		    dpg_dtype_t dt, dpg_op_t op, int root);

/* The two stamps describe the same call. */
bool dpg_stamp_equal(const struct dpg_stamp *a, const struct dpg_stamp *b);

/* "allreduce #3 (8 x f32, sum)", "broadcast #3 (4 x f32, root 0)". */
void dpg_stamp_describe(const struct dpg_stamp *s, char *buf, size_t len);

/* The mismatch between this rank's call and peer's, both sides named:
 * "collective mismatch: rank 0 (n1) issued allreduce #3 (8 x f32, sum),
 * rank 1 (n2) issued broadcast #3 (4 x f32, root 0)".  A stamp
 * without the magic is a protocol error (DPG_ERR_PEER) instead.  Returns
 * -DPG_ERR_INVALID (or -DPG_ERR_PEER) with err filled in. */
int dpg_stamp_mismatch(const struct dpg_stamp *mine, int me, const struct dpg_stamp *theirs,
		       int peer, const char *const *hosts, struct dpg_err *err);

#endif
