/* SPDX-License-Identifier: BSD-3-Clause */
/* bindenv.h - the binding part of the contract: from a node's plan to the
 * variables one task gets (CUDA_VISIBLE_DEVICES, NIC variables, OMP, DPG_*). */
#ifndef DPG_LIB_BINDENV_H
#define DPG_LIB_BINDENV_H

#include <stdint.h>

#include "env.h"	/* struct dpg_env, dpg_getenv_fn */
#include "gpuvis.h"
#include "plan.h"

struct dpg_bind_req {
	enum dpg_gpu_visibility visibility;
	const char *socket_ifname;	/* interface carrying MASTER_ADDR, or NULL */
	/* Slurm's step-level view, read before it binds tasks (user_init):
	 * SLURM_STEP_GPUS and *_VISIBLE_DEVICES; NULL = take the task's. */
	const char *step_gpus;
	const char *step_visible;
};

/* Append task local_rank's binding variables to out.  get/ctx read the task's
 * environment: Slurm's CUDA_VISIBLE_DEVICES/ROCR_VISIBLE_DEVICES and
 * SLURM_STEP_GPUS decide the index space (req->step_* take precedence: a
 * task bound by Slurm only sees its own GPUs there); variables the user set
 * for NICs, sockets and OpenMP are kept (never overwritten).  Device UUIDs
 * set by Slurm are left as they are.  When GPUs are shared between tasks,
 * "ordered" cannot put every task's GPU at LOCAL_RANK: isolate is used. */
int dpg_bind_env(const struct dpg_plan *plan, uint32_t local_rank,
		 const struct dpg_bind_req *req, dpg_getenv_fn get, void *ctx,
		 struct dpg_env *out, struct dpg_err *err);

#endif
