/* comm.h - the internal shape of a communicator: a backend's operations
 * behind one struct, plus what error messages need (ranks, hosts, seq). */
#ifndef DPG_LIB_COMM_H
#define DPG_LIB_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dpg.h"
#include "dtype.h"	/* dpg_dtype_size */
#include "err.h"

#define DPG_HOST_MAX 64

struct dpg_comm;

struct dpg_comm_ops {
	const char *name;	/* "cpu", "nccl" */
	int (*allreduce)(struct dpg_comm *c, const void *send, void *recv,
			 size_t count, dpg_dtype_t dt, dpg_op_t op, void *stream,
			 struct dpg_err *err);
	int (*reduce_scatter)(struct dpg_comm *c, const void *send, void *recv,
			      size_t recvcount, dpg_dtype_t dt, dpg_op_t op,
			      void *stream, struct dpg_err *err);
	int (*all_gather)(struct dpg_comm *c, const void *send, void *recv,
			  size_t sendcount, dpg_dtype_t dt, void *stream,
			  struct dpg_err *err);
	int (*broadcast)(struct dpg_comm *c, void *buf, size_t count,
			 dpg_dtype_t dt, int root, void *stream, struct dpg_err *err);
	int (*barrier)(struct dpg_comm *c, struct dpg_err *err);
	/* Make every blocked or later call fail with DPG_ERR_ABORTED. */
	void (*abort)(struct dpg_comm *c);
	void (*destroy)(struct dpg_comm *c);
};

/* Backend return codes besides 0: a dpg_status_t, negated (e.g.
 * -DPG_ERR_PEER), with the message in err naming the peer. */

struct dpg_comm {
	const struct dpg_comm_ops *ops;
	void *impl;			/* backend state */
	struct dpg_ctx *ctx;		/* owner, for errors and the store */
	int rank, size;
	int *world_ranks;		/* comm rank -> world rank (size entries) */
	uint64_t seq;			/* collectives issued so far */
	char name[64];			/* unique in the job, e.g. "w" / "w.s3.c1" */
};

#endif
