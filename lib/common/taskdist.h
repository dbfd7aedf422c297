/* SPDX-License-Identifier: BSD-3-Clause */
/* taskdist.h - Slurm task counts per node ("2(x3),1") and the rank layout
 * they imply (block, cyclic, plane), as used by srun for a step. */
#ifndef DPG_LIB_TASKDIST_H
#define DPG_LIB_TASKDIST_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* Parse a SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE string into
 * counts[0..*nnodes-1].  Fails if more than cap nodes are described, a count
 * is 0 or out of range, or the syntax is wrong. */
int dpg_tpn_parse(const char *s, uint32_t *counts, size_t cap, size_t *nnodes,
		  struct dpg_err *err);

enum dpg_dist {
	DPG_DIST_BLOCK = 0,
	DPG_DIST_CYCLIC,
	DPG_DIST_PLANE,
};

/* Parse an srun --distribution / SLURM_DISTRIBUTION value: only its first
 * (node-level) part matters ("block", "cyclic:cyclic", "plane=4").  Values
 * that do not fix rank 0's node ("arbitrary") are an error. */
int dpg_dist_parse(const char *s, enum dpg_dist *dist, uint32_t *plane,
		   struct dpg_err *err);

/* For a step with counts[i] tasks on node i, fill node_of[r] and local_of[r]
 * for every rank r < sum(counts), as srun distributes them. */
int dpg_layout(const uint32_t *counts, size_t nnodes, enum dpg_dist dist,
	       uint32_t plane, uint32_t *node_of, uint32_t *local_of,
	       size_t ntasks, struct dpg_err *err);

#endif
