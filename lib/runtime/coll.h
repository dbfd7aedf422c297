/* coll.h - the public edge of every call on a communicator (coll.c): the
 * checks that open it and the one place its failure is recorded. */
#ifndef DPG_LIB_COLL_H
#define DPG_LIB_COLL_H

#include <stdbool.h>
#include <stdint.h>

#include "comm.h"

/* comm is a started communicator of a context. */
bool dpg_coll_comm_ok(const dpg_comm_t *c);

/* Opens a public call on c: clears the last error; 0, or -DPG_ERR_ABORTED
 * (message in e) once dpg_abort was called. */
int dpg_coll_enter(dpg_comm_t *c, struct dpg_err *e);

/* The public edge of a call on c: record "<who> <op>[ #seq] on <name>:
 * <msg>" (seq < 0: none) and return rc as a dpg_status_t. */
dpg_status_t dpg_comm_fail(dpg_comm_t *c, int rc, const char *op, int64_t seq,
			   const struct dpg_err *e);

#endif
