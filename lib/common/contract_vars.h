/* contract_vars.h - the facts the plugin (writer) and libdpg (reader) of the
 * rank contract share: sizes, the contract version and Slurm's special steps. */
#ifndef DPG_LIB_CONTRACT_VARS_H
#define DPG_LIB_CONTRACT_VARS_H

#include <stdbool.h>
#include <stdint.h>

/* The version of the DPG_* variable set the plugin writes (DPG_CONTRACT=);
 * include/dpg.h publishes the same number as DPG_CONTRACT_VERSION and the
 * runtime checks at compile time that the two agree. */
#define DPG_CONTRACT_VARS_VERSION 1

#define DPG_ADDR_MAX 320		/* longest MASTER_ADDR produced */

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
