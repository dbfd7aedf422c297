/* SPDX-License-Identifier: BSD-3-Clause */
/* dpg_check.h - dpg-check's parts: the step as the task sees it, the local
 * row, and the network phases (rows to rank 0, the point-to-point test). */
#ifndef DPG_TOOLS_DPG_CHECK_H
#define DPG_TOOLS_DPG_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "checkrow.h"
#include "err.h"
#include "gpumod.h"

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

/* A node's first task's GPU for the NCCL test (the others have none). */
struct check_gpu {
	struct dpg_gpumod_lib lib;	/* the GPU module (handle NULL: not loaded) */
	int device;			/* the task's CUDA device; -1: no NCCL test */
};

/* Fill the cells this task can fill alone (all but net; nccl: whether the
 * test can run on g, see check_gpu_probe). */
void check_local_row(const struct check_step *s, const char *root,
		     struct check_gpu *g, struct dpg_check_row *row);

/* The first task of a node: did the plan give it a GPU, does the GPU module
 * load, does CUDA show a device, which is the task's: cell c "ready" (g
 * holds the module and the device) or N/A saying why not.  Other tasks: N/A
 * with no value. */
void check_gpu_probe(const struct check_step *s, struct check_gpu *g,
		     struct dpg_check_cell *c);
/* bytes of zeroed memory on g's device (made current) at *p. */
int check_gpu_alloc(const struct check_gpu *g, void **p, size_t bytes,
		    struct dpg_err *err);
void check_gpu_free(const struct check_gpu *g, void *p);
void check_gpu_close(struct check_gpu *g);

/* Rank 0: gather every task's row into rows[nodes] (by node), naming the
 * tasks that did not report by DPG_TIMEOUT, then run the point-to-point
 * test with every other node; other ranks: send the row, then take part
 * in the test.  0, or -status with the reason in err (this rank could not
 * take part at all). */
int check_gather(const struct check_step *s, const struct check_gpu *g,
		 const struct dpg_check_row *mine, struct dpg_check_row *rows,
		 struct dpg_err *err);

/* The point-to-point test over libdpg's public API: go is rank 0's plan
 * (checkp2p.h; port 0: no test).  The first task of each node of its CPU
 * list joins a world of those tasks on the CPU backend, on a fresh store at
 * port, and rank 0 measures with each in turn (rows[i].cell[DPG_CHECK_NET]);
 * when that went well everywhere, the same over NCCL between the nodes of
 * its NCCL list, on g's device (rows[i].cell[DPG_CHECK_NCCL]). */
int check_p2p(const struct check_step *s, const struct check_gpu *g, const char *go,
	      struct dpg_check_row *rows, struct dpg_err *err);

#endif
