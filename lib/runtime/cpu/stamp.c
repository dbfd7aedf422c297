/* SPDX-License-Identifier: BSD-3-Clause */
/* stamp.c - the CPU collectives' stamps: make, compare, and the message that
 * names both sides of a mismatch (see stamp.h). */
#include "stamp.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

void dpg_stamp_make(struct dpg_stamp *s, uint64_t seq, int kind, size_t count,
		    dpg_dtype_t dt, dpg_op_t op, int root)
{
	bool red = kind == DPG_STAMP_ALLREDUCE || kind == DPG_STAMP_REDUCE_SCATTER;

	memset(s, 0, sizeof(*s));
	s->magic = DPG_STAMP_MAGIC;
	s->kind = (uint8_t)kind;
	s->seq = seq;
	s->root = kind == DPG_STAMP_BROADCAST ? root : -1;
	if (kind == DPG_STAMP_BARRIER)
		return;
	s->count = count;
	s->dtype = (uint8_t)dt;
	s->op = red ? (uint8_t)op : 0;
}

bool dpg_stamp_equal(const struct dpg_stamp *a, const struct dpg_stamp *b)
{
	return memcmp(a, b, sizeof(*a)) == 0;
}

static const char *kind_name(int k)
{
	static const char *const n[] = { "?", "allreduce", "reduce_scatter", "all_gather",
					 "broadcast", "barrier" };

	return k >= 1 && k <= DPG_STAMP_BARRIER ? n[k] : "?";
}

static const char *dtype_name(int d)
{
	static const char *const n[] = { "f32", "f64", "f16", "bf16", "i32", "i64" };

	return d >= 0 && d <= DPG_I64 ? n[d] : "?";
}

static const char *op_name(int o)
{
	static const char *const n[] = { "sum", "avg", "min", "max" };

	return o >= 0 && o <= DPG_MAX ? n[o] : "?";
}

void dpg_stamp_describe(const struct dpg_stamp *s, char *buf, size_t len)
{
	int k = s->kind;

	if (k == DPG_STAMP_BARRIER)
		snprintf(buf, len, "barrier #%" PRIu64, s->seq);
	else if (k == DPG_STAMP_BROADCAST)
		snprintf(buf, len, "broadcast #%" PRIu64 " (%" PRIu64 " x %s, root %d)", s->seq,
			 s->count, dtype_name(s->dtype), (int)s->root);
	else if (k == DPG_STAMP_ALL_GATHER)
		snprintf(buf, len, "all_gather #%" PRIu64 " (%" PRIu64 " x %s)", s->seq, s->count,
			 dtype_name(s->dtype));
	else
		snprintf(buf, len, "%s #%" PRIu64 " (%" PRIu64 " x %s, %s)", kind_name(k), s->seq,
			 s->count, dtype_name(s->dtype), op_name(s->op));
}

int dpg_stamp_mismatch(const struct dpg_stamp *mine, int me, const struct dpg_stamp *theirs,
		       int peer, const char *const *hosts, struct dpg_err *err)
{
	char a[96], b[96];

	if (theirs->magic != DPG_STAMP_MAGIC)
		return dpg_errs(err, DPG_ERR_PEER, "peer rank %d (%s) broke the protocol: its data "
				"for this collective does not start with a collective stamp",
				peer, hosts[peer]);
	dpg_stamp_describe(mine, a, sizeof(a));
	dpg_stamp_describe(theirs, b, sizeof(b));
	return dpg_errs(err, DPG_ERR_INVALID, "collective mismatch: rank %d (%s) issued %s, "
			"rank %d (%s) issued %s", me, hosts[me], a, peer,
			hosts[peer], b);
}
