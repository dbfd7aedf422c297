/* comm.h - the internal shape of a communicator: a backend's operations
 * behind one struct, plus what error messages need (ranks, hosts, seq). */
#ifndef DPG_LIB_COMM_H
#define DPG_LIB_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "dpg.h"
#include "dtype.h"	/* dpg_dtype_size */
#include "err.h"

#define DPG_HOST_MAX 64

struct dpg_comm {
	const struct dpg_comm_ops *ops;
	void *impl;			/* backend state */
	struct dpg_ctx *ctx;		/* owner, for errors (never a backend's) */
	int rank, size;
	int *world_ranks;		/* comm rank -> world rank (size entries) */
	uint64_t seq;			/* collectives issued so far */
	char name[64];			/* unique in the job, e.g. "w" / "w.s3.c1" */
};

#endif
