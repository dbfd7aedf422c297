/* SPDX-License-Identifier: BSD-3-Clause */
/* dpg_check.h - dpg-check's parts: the step as the task sees it, the local
 * row, and the network phases (rows to rank 0, the point-to-point test). */
#ifndef DPG_TOOLS_DPG_CHECK_H
#define DPG_TOOLS_DPG_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "checkrow.h"
#include "err.h"

#define CHECK_MAX_NODES 4096

/* What the task reads from its environment (the plugin's contract). */
struct check_step {
	int rank, world, local_rank, local_world, node_rank, nodes;
	char *master_addr;		/* (owned: strdup) */
	uint16_t master_port;
	char *secret;
	double timeout_s;
	int64_t t0_ms, deadline_ms;	/* dpg_now_ms clock: start, DPG_TIMEOUT */
	char node[DPG_CHECK_NODE_MAX];
	char *nodelist;			/* SLURM_STEP_NODELIST */
	uint32_t *tasks_per_node;	/* [nodes], from SLURM_STEP_TASKS_PER_NODE */
	bool json;
};

/* Fill the cells this task can fill alone (all but net). */
void check_local_row(const struct check_step *s, const char *root,
		     struct dpg_check_row *row);

/* Rank 0: gather every task's row into rows[nodes] (by node), naming the
 * tasks that did not report by DPG_TIMEOUT, then run the point-to-point
 * test with every other node; other ranks: send the row, then take part
 * in the test.  0, or -status with the reason in err (this rank could not
 * take part at all). */
int check_gather(const struct check_step *s, const struct dpg_check_row *mine,
		 struct dpg_check_row *rows, struct dpg_err *err);

/* The point-to-point test over libdpg's CPU backend (public API): go is
 * rank 0's "<port> <node> <node> ..." (port 0: no test); the first task of
 * each listed node joins a world of those tasks on a fresh store at port,
 * rank 0 measures with each in turn and fills rows[i].cell[DPG_CHECK_NET]. */
int check_p2p(const struct check_step *s, const char *go,
	      struct dpg_check_row *rows, struct dpg_err *err);

#endif
