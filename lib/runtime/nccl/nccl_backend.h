/* nccl_backend.h - the NCCL backend of dpg_comm: a thin mapping onto a
 * nonblocking NCCL communicator whose every wait is bounded by a deadline
 * and an abort flag.  Built only when configure finds NCCL (runtime.c calls
 * it under DPG_HAVE_NCCL); this header needs no CUDA header. */
#ifndef DPG_LIB_NCCL_BACKEND_H
#define DPG_LIB_NCCL_BACKEND_H

#include "comm.h"
#include "err.h"

struct dpg_store;

/* Create c's NCCL communicator (collective over c's ranks).  The caller set
 * c->rank, c->size, c->name, c->world_ranks and c->ctx.  Rank 0 of c makes
 * the ncclUniqueId and publishes it in the store under c's name; the others
 * wait for it (store may be NULL when c->size == 1).  Init runs in
 * nonblocking mode and is polled until done, the deadline (now + timeout_s)
 * or *abort; failures abort the NCCL communicator.  Collectives enqueue on
 * the caller's stream and wait for it with the same bounds.  Returns 0 or
 * -DPG_ERR_BACKEND / -DPG_ERR_TIMEOUT / -DPG_ERR_ABORTED / -DPG_ERR_PEER
 * (store) with the message in err. */
int dpg_nccl_comm_init(struct dpg_comm *c, struct dpg_store *store, int device,
		       double timeout_s, const volatile int *abort,
		       struct dpg_err *err);

/* Number of CUDA devices this process can use (0 on any error). */
int dpg_nccl_device_count(void);

/* The CUDA device of this rank: the device with PCI bus id busid (from
 * DPG_GPUS) when given, else local_rank modulo the device count. */
int dpg_nccl_pick_device(const char *busid, int local_rank, int *device,
			 struct dpg_err *err);

#endif
