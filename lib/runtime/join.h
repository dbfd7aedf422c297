/* SPDX-License-Identifier: BSD-3-Clause */
/* join.h - how a process joins a job: rank, sizes, rendezvous address,
 * job secret and runtime settings, resolved from explicit options and the
 * environment (DPG_*, torchrun's names, SLURM_*, Open MPI, PMI).
 * Pure: reads variables only through a lookup function, touches nothing. */
#ifndef DPG_LIB_JOIN_H
#define DPG_LIB_JOIN_H

#include <stdbool.h>
#include <stdint.h>

#include "contract_vars.h"	/* DPG_ADDR_MAX, DPG_SECRET_HEX_*, variable names */
#include "env.h"	/* dpg_getenv_fn */
#include "dpg.h"
#include "err.h"
#include "hostlist.h"	/* DPG_HOSTNAME_MAX */

#define DPG_JOIN_DEFAULT_TIMEOUT_S 300.0
#define DPG_JOIN_BUSID_MAX 32

/* Where the rank and world size came from. */
enum dpg_join_src {
	DPG_JOIN_SINGLE = 0,	/* nothing: a one-process world */
	DPG_JOIN_OPTS,		/* dpg_init_opts_t */
	DPG_JOIN_DPG,		/* DPG_* (the dpg SPANK plugin) */
	DPG_JOIN_TORCHRUN,	/* RANK, WORLD_SIZE, ... */
	DPG_JOIN_SLURM,		/* SLURM_PROCID, SLURM_STEP_NUM_TASKS, ... */
	DPG_JOIN_OMPI,		/* OMPI_COMM_WORLD_* */
	DPG_JOIN_PMI,		/* PMI_RANK, PMI_SIZE */
};

struct dpg_join {
	int rank, world_size;
	/* -1 = unknown: the runtime derives them from the ranks' host names */
	int local_rank, local_world_size;
	int node_rank, num_nodes;
	enum dpg_join_src src;

	char master_addr[DPG_ADDR_MAX];	/* "" only when world_size == 1 */
	uint16_t master_port;		/* 0 only when world_size == 1 */

	/* Store key namespace: "<job>.<step>" when every rank agrees on the
	 * step (DPG_* / SLURM_* sources), else "x". */
	char ns[32];
	bool have_ids;
	uint32_t job_id, step_id;

	char secret[DPG_SECRET_HEX_MAX + 1];	/* hex; "" = none */

	double timeout_s;		/* > 0 */
	dpg_backend_t backend;		/* AUTO, CPU or NCCL */
	int device;			/* CUDA device from opts, -1 = choose */
	/* GPU hint for DPG_BACKEND_AUTO: 1 = the task has a GPU (DPG_GPUS or
	 * CUDA_VISIBLE_DEVICES list one), 0 = it has none (DPG_GPUS_PER_TASK=0,
	 * CUDA_VISIBLE_DEVICES empty/-1/NoDevFiles), -1 = unknown (probe). */
	int gpu_hint;
	char gpu_busid[DPG_JOIN_BUSID_MAX];	/* first of DPG_GPUS, "" = none */
	char node[DPG_HOSTNAME_MAX + 1];	/* SLURMD_NODENAME, "" = none */
};

/* Resolve *out from opts (NULL = all defaults) and the variables returned
 * by get(ctx, name).  Each value comes from the first source that has it:
 * opts > DPG_* > torchrun's names > SLURM_* > Open MPI > PMI; every later
 * source that also has it must agree, else the error names both variables.
 * Two launchers nest legitimately and are recognised: a process spawned by
 * torchrun (TORCHELASTIC_RUN_ID set) takes torchrun's names only, and one
 * started by mpirun/mpiexec inside a Slurm allocation (OMPI/PMI world size
 * differs from the Slurm/dpg step's) takes the MPI launcher's only.
 * Returns 0, or a negated dpg_status_t with the message in err:
 * -DPG_ERR_ENV (missing, malformed or inconsistent), -DPG_ERR_AUTH (no or
 * malformed secret for a multi-process world), -DPG_ERR_INVALID (opts). */
int dpg_join_resolve(const dpg_init_opts_t *opts, dpg_getenv_fn get, void *ctx,
		     struct dpg_join *out, struct dpg_err *err);

const char *dpg_join_src_name(enum dpg_join_src s);

/* The dpg_getenv_fn that reads the process environment (getenv). */
const char *dpg_join_process_getenv(void *ctx, const char *name);

#endif
