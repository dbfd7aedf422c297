/* SPDX-License-Identifier: BSD-3-Clause */
/* contract.h - the rank contract: from a task's SLURM_* environment to the
 * variables dpg exports (RANK, WORLD_SIZE, MASTER_ADDR, DPG_*, ...). */
#ifndef DPG_LIB_CONTRACT_H
#define DPG_LIB_CONTRACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conf.h"
#include "err.h"
#include "hostlist.h"
#include "opts.h"

#include "contract_vars.h"	/* variable names, DPG_ADDR_MAX, special steps */
#include "env.h"	/* struct dpg_env, dpg_getenv_fn */

enum dpg_src {
	DPG_SRC_FORMULA = 0,	/* port: job/step formula */
	DPG_SRC_RESV,		/* port: SLURM_STEP_RESV_PORTS */
	DPG_SRC_OPTION,		/* port: --dpg-port */
	DPG_SRC_USER,		/* kept what the user had set */
	DPG_SRC_NODELIST,	/* address: host of rank 0 */
};

/* Facts that are the same for every task of a step. */
struct dpg_step {
	uint32_t job_id, step_id;
	uint32_t world_size, num_nodes;
	char nodelist[DPG_ENV_VALUE_MAX];
	char master_node[DPG_HOSTNAME_MAX + 1];	/* node running rank 0 */
	char master_addr[DPG_ADDR_MAX];		/* after the master_addr rule */
	uint16_t master_port;
	enum dpg_src addr_src, port_src;
};

/* Facts about one task. */
struct dpg_task {
	uint32_t rank, local_rank, local_world_size, node_rank;
	char node[DPG_HOSTNAME_MAX + 1];
};

/* Read the step facts from the environment and apply conf and request
 * (port range, address rule, --dpg-port, user-set MASTER_ADDR/PORT). */
int dpg_step_from_env(dpg_getenv_fn get, void *ctx, const struct dpg_conf *conf,
		      const struct dpg_request *req, struct dpg_step *step,
		      struct dpg_err *err);

/* Read this task's facts and check them against the step. */
int dpg_task_from_env(dpg_getenv_fn get, void *ctx, const struct dpg_step *step,
		      struct dpg_task *task, struct dpg_err *err);

/* The variables to export into the task, in a fixed order. */
int dpg_contract_build(const struct dpg_step *step, const struct dpg_task *task,
		       const struct dpg_request *req, dpg_getenv_fn get, void *ctx,
		       struct dpg_env *out, struct dpg_err *err);

/* The one-line --dpg-verbose description of what the task got. */
int dpg_contract_describe(const struct dpg_step *step, const struct dpg_task *task,
			  const struct dpg_request *req, char *buf, size_t len);

const char *dpg_src_name(enum dpg_src s);

#endif
