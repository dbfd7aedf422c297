# SPDX-License-Identifier: BSD-3-Clause
"""zero_torch.py - the peer of zero_bench.c: PyTorch's own ZeRO-1 on the CPU
(gloo): gradients all-reduced (what DDP does), then ZeroRedundancyOptimizer
(AdamW) updates this rank's shard and broadcasts the parameters.  Same model
shape as zero_bench.c (UNITS units of a big matrix + a small vector).

Run as the tasks of a job (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT):
  python3 zero_torch.py NUMEL UNITS STEPS
Rank 0 prints: world W numel N step_ms MEDIAN min_ms MIN
"""
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer


def main():
    numel, units, steps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    params = []
    for _ in range(units):
        per = numel // units
        small = per // 64 + 1
        params.append(torch.nn.Parameter(torch.zeros(per - small)))
        params.append(torch.nn.Parameter(torch.zeros(small)))
    if world > 1:
        opt = ZeroRedundancyOptimizer(params, optimizer_class=torch.optim.AdamW, lr=1e-3,
                                      weight_decay=0.0)
    else:
        opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.0)

    def step():
        for p in params:
            p.grad = torch.full_like(p, 1e-4)
        if world > 1:
            # DDP's reduction: one flat bucket, averaged
            flat = torch.cat([p.grad.view(-1) for p in params])
            dist.all_reduce(flat)
            flat /= world
            off = 0
            for p in params:
                n = p.numel()
                p.grad.view(-1).copy_(flat[off:off + n])
                off += n
        opt.step()

    step()
    times = []
    for _ in range(steps):
        dist.barrier()
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    if dist.get_rank() == 0:
        print("world %d numel %d step_ms %.2f min_ms %.2f" % (world, numel, times[len(times) // 2],
                                                             times[0]), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
