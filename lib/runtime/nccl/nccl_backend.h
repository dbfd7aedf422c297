/* SPDX-License-Identifier: BSD-3-Clause */
/* nccl_backend.h - the NCCL backend of dpg_comm: a thin mapping onto a
 * nonblocking NCCL communicator whose every wait is bounded by a deadline
 * and an abort flag.  Built into the GPU module dpg-cuda.so (lib/cuda) only
 * when configure finds NCCL; libdpg reaches it through the module's table
 * (gpumod.h).  This header needs no CUDA header. */
#ifndef DPG_LIB_NCCL_BACKEND_H
#define DPG_LIB_NCCL_BACKEND_H

#include "backend.h"
#include "err.h"

/* Create c's NCCL communicator (collective over c's ranks) on a->device.
 * The caller set c->rank, c->size, c->name and c->world_ranks.  Rank 0 of
 * c makes the ncclUniqueId and publishes it in a->store under
 * "<a->key_ns>/nccl/<c->name>/id" (a->store_set, a->store_get); the others
 * wait for it (a->store may be
 * NULL when c->size == 1).  Init runs in nonblocking mode and is polled
 * until done, the deadline (now + a->timeout_s) or *a->abort; failures abort the NCCL communicator.  Collectives enqueue on
 * the caller's stream and wait for it with the same bounds.  Returns 0 or
 * -DPG_ERR_BACKEND / -DPG_ERR_TIMEOUT / -DPG_ERR_ABORTED / -DPG_ERR_PEER
 * (store) with the message in err. */
int dpg_nccl_comm_init(struct dpg_comm *c, const struct dpg_backend_args *a,
		       struct dpg_err *err);

/* Split parent (an NCCL communicator) with ncclCommSplit, collective over
 * parent's members: child (rank, size, name, world_ranks set by the
 * caller, as for dpg_nccl_comm_init) gets the part of color ordered by
 * (key, parent rank); child NULL: this rank is in no part.  Only in
 * modules built with NCCL 2.18 or later (gpumod.h: comm_split NULL
 * otherwise).  Returns as dpg_nccl_comm_init. */
int dpg_nccl_comm_split(struct dpg_comm *parent, struct dpg_comm *child,
			int color, int key, const struct dpg_backend_args *a,
			struct dpg_err *err);

/* Number of CUDA devices this process can use (0 on any error). */
int dpg_nccl_device_count(void);

/* The CUDA device of this rank: the device with PCI bus id busid (from
 * DPG_GPUS) when given, else local_rank modulo the device count. */
int dpg_nccl_pick_device(const char *busid, int local_rank, int *device,
			 struct dpg_err *err);

#endif
