/* SPDX-License-Identifier: BSD-3-Clause */
/* contract_vars.h - the facts the plugin (writer) and libdpg (reader) of the
 * rank contract share: variable names, the secret's format, sizes, the
 * contract version and Slurm's special steps. */
#ifndef DPG_LIB_CONTRACT_VARS_H
#define DPG_LIB_CONTRACT_VARS_H

#include <stdbool.h>
#include <stdint.h>

/* The version of the DPG_* variable set the plugin writes (DPG_CONTRACT=);
 * include/dpg.h publishes the same number as DPG_CONTRACT_VERSION and the
 * runtime checks at compile time that the two agree. */
#define DPG_CONTRACT_VARS_VERSION 1

#define DPG_ADDR_MAX 320		/* longest MASTER_ADDR produced */

/* ------------------------------------------------------------- variables
 * Every variable of the contract, named once: the plugin's writers
 * (contract.c, bindenv.c, dpg_spank.c) and the runtime's reader (join.c)
 * use these and never spell a name themselves.  doc/spank-dpg.8 documents
 * them for users. */

/* dpg's own set (DPG_CONTRACT = DPG_CONTRACT_VARS_VERSION) */
#define DPG_VAR_CONTRACT "DPG_CONTRACT"
#define DPG_VAR_RANK "DPG_RANK"
#define DPG_VAR_WORLD_SIZE "DPG_WORLD_SIZE"
#define DPG_VAR_LOCAL_RANK "DPG_LOCAL_RANK"
#define DPG_VAR_LOCAL_WORLD_SIZE "DPG_LOCAL_WORLD_SIZE"
#define DPG_VAR_NODE_RANK "DPG_NODE_RANK"
#define DPG_VAR_NUM_NODES "DPG_NUM_NODES"
#define DPG_VAR_MASTER_ADDR "DPG_MASTER_ADDR"
#define DPG_VAR_MASTER_PORT "DPG_MASTER_PORT"
#define DPG_VAR_JOB_ID "DPG_JOB_ID"
#define DPG_VAR_STEP_ID "DPG_STEP_ID"
#define DPG_VAR_GPUS_PER_TASK "DPG_GPUS_PER_TASK"
#define DPG_VAR_GPUS "DPG_GPUS"
#define DPG_VAR_NICS "DPG_NICS"
#define DPG_VAR_CPUS "DPG_CPUS"
#define DPG_VAR_NUMA "DPG_NUMA"
#define DPG_VAR_GPU_VISIBILITY "DPG_GPU_VISIBILITY"
#define DPG_VAR_OWNED "DPG_OWNED"
#define DPG_VAR_SECRET "DPG_SECRET"
/* --dpg-verbose: libdpg prints its startup line (startup.h) ... */
#define DPG_VAR_VERBOSE "DPG_VERBOSE"
/* ... with the plugin's planning time on this node: "MS HOW" (HOW: live,
 * cached or xml, where its topology came from), e.g. "2.134 cached" */
#define DPG_VAR_STARTUP_PLAN "DPG_STARTUP_PLAN"
/* the secret's name between srun and slurmstepd (srun --export=NONE still
 * carries SLURM_* variables; task_init renames it to DPG_VAR_SECRET) */
#define DPG_VAR_SECRET_TRANSIT "SLURM_DPG_SECRET"

/* torchrun's names, as dpg writes them (and the runtime reads them) */
#define DPG_TORCH_RANK "RANK"
#define DPG_TORCH_LOCAL_RANK "LOCAL_RANK"
#define DPG_TORCH_WORLD_SIZE "WORLD_SIZE"
#define DPG_TORCH_LOCAL_WORLD_SIZE "LOCAL_WORLD_SIZE"
#define DPG_TORCH_NODE_RANK "NODE_RANK"
#define DPG_TORCH_GROUP_RANK "GROUP_RANK"
#define DPG_TORCH_GROUP_WORLD_SIZE "GROUP_WORLD_SIZE"
#define DPG_TORCH_ROLE_RANK "ROLE_RANK"
#define DPG_TORCH_ROLE_WORLD_SIZE "ROLE_WORLD_SIZE"
#define DPG_TORCH_ROLE_NAME "ROLE_NAME"
#define DPG_TORCH_MASTER_ADDR "MASTER_ADDR"
#define DPG_TORCH_MASTER_PORT "MASTER_PORT"

/* JAX's names (jax.distributed.initialize() with no arguments): the
 * coordinator at MASTER_ADDR:MASTER_PORT instead of JAX's own port formula,
 * and, with GPUs, the task's devices among those it can see */
#define DPG_JAX_COORDINATOR_ADDRESS "JAX_COORDINATOR_ADDRESS"
#define DPG_JAX_LOCAL_DEVICE_IDS "JAX_LOCAL_DEVICE_IDS"

/* torchelastic's per-launch variables: they describe the torchrun agent that
 * started a process, never a dpg task, so the plugin removes inherited ones
 * (a stale TORCHELASTIC_RUN_ID makes frameworks believe torchrun started the
 * task; TORCHELASTIC_USE_AGENT_STORE=True makes every rank a client of a
 * store nobody serves) */
#define DPG_TORCHELASTIC_STALE                                               \
	"TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RUN_ID",               \
	"TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",           \
	"TORCHELASTIC_ERROR_FILE"

/* ------------------------------------------------------------- job secret
 * The plugin generates DPG_SECRET_BYTES random bytes as DPG_SECRET_HEX_LEN
 * lower-case hex digits; the runtime accepts any even number of hex digits
 * from DPG_SECRET_HEX_MIN to DPG_SECRET_HEX_MAX (a user's own secret); the
 * store decodes them into at most DPG_SECRET_HEX_MAX / 2 key bytes. */
#define DPG_SECRET_BYTES 32
#define DPG_SECRET_HEX_LEN (2 * DPG_SECRET_BYTES)
#define DPG_SECRET_HEX_MIN 32
#define DPG_SECRET_HEX_MAX 128

/* Slurm's special step ids (slurm.h); repeated here so lib/ needs no Slurm. */
#define DPG_STEP_PENDING 0xfffffffdu
#define DPG_STEP_EXTERN 0xfffffffcu
#define DPG_STEP_BATCH 0xfffffffbu
#define DPG_STEP_INTERACTIVE 0xfffffffau

/* True if the environment describes one of Slurm's special steps (batch,
 * extern, interactive) or no step at all: dpg exports nothing there. */
static inline bool dpg_is_special_step(uint32_t step_id)
{
	return step_id == DPG_STEP_PENDING || step_id == DPG_STEP_EXTERN ||
	       step_id == DPG_STEP_BATCH || step_id == DPG_STEP_INTERACTIVE;
}

#endif
