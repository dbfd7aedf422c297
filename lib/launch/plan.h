/* SPDX-License-Identifier: BSD-3-Clause */
/* plan.h - the binding planner: which GPUs, NICs and CPUs each local task of
 * a step gets on one node, from the facts of topo.h.
 *
 * dpg_plan_make() is pure and deterministic: it reads only its arguments
 * (no hwloc, no environment, no clock), orders everything by numeric keys,
 * and so gives byte-identical plans for identical inputs on every node and
 * every run. */
#ifndef DPG_LIB_PLAN_H
#define DPG_LIB_PLAN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "err.h"
#include "topo.h"

#define DPG_PLAN_MAX_TASKS 4096

enum dpg_bind {
	DPG_BIND_CLOSEST = 0,	/* GPU-local, disjoint cpusets */
	DPG_BIND_NONE = 1,	/* every task gets all usable CPUs (GPUs and
				 * NICs are still chosen as for closest) */
};

struct dpg_plan_policy {
	enum dpg_bind bind;
	bool allow_gpu_sharing;	/* tasks x G > GPUs: share round-robin
				 * instead of failing */
};

struct dpg_plan_req {
	uint32_t ntasks;	/* local tasks of the step on this node, >= 1 */
	uint32_t gpus_per_task;	/* G; 0 = CPU-only tasks */
	/* GPUs Slurm gave the step here: physical indices and ranges and/or
	 * PCI bus ids, comma-separated ("4-7", "0,2", "0000:07:00.0,...");
	 * NULL = every GPU of the node, "" = none. */
	const char *gpus;
	/* CPUs Slurm gave the step here as a CPU list ("0-11,48-59");
	 * NULL = every allowed CPU.  Always intersected with topo->allowed. */
	const char *cpus;
	struct dpg_plan_policy policy;
};

struct dpg_plan_task {
	uint32_t local_rank;
	uint32_t ngpus;
	uint16_t gpu[DPG_TOPO_MAX_GPUS];	/* physical indices, ascending */
	uint32_t nnics;				/* nic[0] is the primary NIC */
	uint16_t nic[DPG_TOPO_MAX_NICS];	/* indices in plan->nics[] */
	int numa;		/* OS index of the NUMA node holding all of cpus, else -1 */
	struct dpg_cpuset cpuset;
	/* ready-made strings (heap, freed by dpg_plan_free) */
	char *cpus;		/* "0-11,48-59" */
	char *visible;		/* physical indices: "2" / "2,3" / "" */
	char *gpus;		/* bus ids: "0000:07:00.0,0000:0a:00.0" / "" */
	char *nics;		/* names: "mlx5_0,mlx5_1" / "" */
	char *netdevs;		/* their network interfaces, where known: "ib0" / "" */
};

struct dpg_plan {
	uint32_t ntasks;
	uint32_t gpus_per_task;
	struct dpg_plan_policy policy;
	bool gpus_shared;		/* some GPU serves more than one task */
	struct dpg_cpuset usable;	/* allocated CPUs within the allowed ones */
	/* copies of the node's devices, so a plan outlives its topology */
	uint32_t ngpus;
	struct dpg_gpu gpus[DPG_TOPO_MAX_GPUS];
	uint32_t nnics;
	struct dpg_nic nics[DPG_TOPO_MAX_NICS];
	struct dpg_plan_task *tasks;	/* ntasks rows, by local rank */
};

/* Build the plan.  On failure returns -1, *out = NULL and a one-line reason
 * in err (e.g. "4 tasks x 2 GPUs = 8 GPUs requested but this node has 4
 * GPUs (0000:07:00.0,...)"). */
int dpg_plan_make(const struct dpg_topo *topo, const struct dpg_plan_req *req,
		  struct dpg_plan **out, struct dpg_err *err);

void dpg_plan_free(struct dpg_plan *plan);

/* One line for --dpg-verbose, e.g.
 * "task 0: gpus 0000:10:1c.0 (0) nics rdmap16s27 cpus 0-5,48-53 numa 0".
 * Always NUL-terminates; cut with "..." when len is too small.  Returns the
 * length written, or -1 on bad arguments. */
int dpg_plan_format_task(const struct dpg_plan *plan, uint32_t i, char *buf,
			 size_t len);

/* The whole plan as JSON (one task per line).  Fails on a write error. */
int dpg_plan_write_json(const struct dpg_plan *plan, FILE *f,
			struct dpg_err *err);

#endif
