/* SPDX-License-Identifier: BSD-3-Clause */
/* checkp2p.h - dpg-check's point-to-point test plan: which nodes take part
 * over which transport (CPU backend, NCCL), its message, the NET/NCCL cells. */
#ifndef DPG_LIB_CHECKP2P_H
#define DPG_LIB_CHECKP2P_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "checkrow.h"

/* The test: rank 0's node first in each list, then the others in node
 * order.  cpu and nccl point to the caller's arrays of `nodes` ints each.
 * port 0 (or fewer than 2 nodes in a list): that test is not run. */
struct dpg_check_p2p {
	uint16_t port;		/* the test's own store, on rank 0's node */
	int ncpu, nnccl;
	int *cpu, *nccl;	/* node indexes */
};

/* What a node's first task found of its GPU, for the NCCL test. */
struct dpg_check_gpu {
	bool planned;		/* the plan gave the task a GPU */
	const char *module_err;	/* NULL: the GPU module loaded; else why not */
	int devices;		/* CUDA devices the module sees */
	bool allocator;		/* the module has device memory calls (nvcc) */
	int device;		/* the task's device; -1: pick_err says why */
	const char *pick_err;
};

/* Did the plan give the task a GPU?  DPG_GPUS (bus ids) not empty, or, when
 * DPG_GPUS is unset, DPG_GPUS_PER_TASK > 0 (either may be NULL). */
bool dpg_check_gpu_planned(const char *gpus, const char *per_task);

/* The first task's NCCL cell before the test: OK "ready" when the test can
 * run on its GPU, else N/A naming why not (the plan gave no GPU, the module
 * does not load, CUDA sees no device, no allocator, no device for the task). */
void dpg_check_nccl_ready(const struct dpg_check_gpu *g, struct dpg_check_cell *c);

/* Rank 0 (node me): the test of the CPU backend between me and every fit
 * node, and of NCCL between those whose NCCL cell is ready, when me's is. */
void dpg_check_p2p_plan(const struct dpg_check_row *rows, int nodes, int me,
			uint16_t port, struct dpg_check_p2p *p);

/* Rank 0: the NET and NCCL cells of every node before the test: "rank 0"
 * for me, "skipped" for the nodes left out (NCCL: with the reason, kept
 * from the node's cell where it had one), N/A "pending" for the others. */
void dpg_check_p2p_mark(struct dpg_check_row *rows, int nodes, int me,
			const struct dpg_check_p2p *p);

/* The message to every task: "<port> <ncpu> <cpu...> <nnccl> <nccl...>";
 * fails when buf (len bytes) is too small. */
int dpg_check_p2p_format(const struct dpg_check_p2p *p, char *buf, size_t len,
			 struct dpg_err *err);
/* Parse it into p (its arrays hold `nodes` ints): every index below nodes,
 * no more than nodes per list.  "0" alone: no test. */
int dpg_check_p2p_parse(const char *s, int nodes, struct dpg_check_p2p *p,
			struct dpg_err *err);

/* The index of node in list (n entries), -1 when it is not there. */
int dpg_check_p2p_index(const int *list, int n, int node);

/* The result of one pair into cell c: OK "<GB/s>GB/s <us>us", or FAIL with
 * why (the error of the pair) and what to check for that transport. */
void dpg_check_p2p_result(struct dpg_check_cell *c, bool nccl, bool ok, double gbps,
			  double lat_us, const char *why);

/* After a test stopped early: every cell of its list still "pending"
 * becomes FAIL with why (fail), or N/A "not run" with why. */
void dpg_check_p2p_abandon(struct dpg_check_row *rows, const struct dpg_check_p2p *p,
			   bool nccl, bool fail, const char *why);

#endif
