/* SPDX-License-Identifier: BSD-3-Clause */
/* sharegpu.h - the GPU tests' ranks on fewer GPUs than ranks: each rank
 * poses as a host of its own, so that NCCL lets two share a GPU. */
#ifndef DPG_TESTS_GPU_SHAREGPU_H
#define DPG_TESTS_GPU_SHAREGPU_H

#include <stdio.h>
#include <stdlib.h>

/* More ranks than GPUs (a one-GPU machine): the ranks share the GPUs, and
 * each poses as a host of its own (NCCL_HOSTID), since NCCL refuses two ranks
 * on one GPU of one host; they then talk over NCCL's socket transport on
 * loopback.  The multi-rank paths (dead peers, splits, sharding) run so on
 * one GPU; their speed does not mean anything.  ngpu: the GPUs CUDA sees. */
static inline void share_gpus(int rank, int n, int ngpu)
{
	char id[32];

	if (n <= ngpu)
		return;
	snprintf(id, sizeof(id), "dpg-test-rank%d", rank);
	setenv("NCCL_HOSTID", id, 1);
	setenv("NCCL_SOCKET_IFNAME", "lo", 0);
	setenv("NCCL_IB_DISABLE", "1", 0);
}

#endif
