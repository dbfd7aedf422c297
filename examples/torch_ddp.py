# SPDX-License-Identifier: BSD-3-Clause
"""torch_ddp.py - a tiny PyTorch DDP training run that reads nothing but the
variables dpg exports (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...).

    srun -N3 --ntasks-per-node=2 --dpg-gpus-per-task=0 python3 torch_ddp.py
"""
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def leave(code=0):
    """Exit without interpreter finalization.  After destroy_process_group,
    torch 2.x can still abort a rank while the interpreter tears down
    ("terminate called without an active exception": gloo work objects
    destroyed during finalization, pytorch/pytorch#190489 and #179291); it
    happened in 1 of 3 runs under load here.  Everything is printed and the
    group destroyed by then, so skipping finalization loses nothing."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main():
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(1234 + rank)  # each rank its own data
    w_true = torch.arange(16, dtype=torch.float32) / 16
    for step in range(1, 41):
        x = torch.randn(32, 16, generator=gen)
        y = x @ w_true + 0.5
        loss = torch.nn.functional.mse_loss(model(x).squeeze(1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total = loss.detach().clone()
        dist.all_reduce(total)
        if rank == 0 and step % 10 == 0:
            print(f"step {step:3d}  mean loss {total.item() / world:.4f}", flush=True)
    # every rank must hold identical weights after DDP
    w = model.module.weight.detach().clone()
    ref = w.clone()
    dist.broadcast(ref, 0)
    same = torch.equal(w, ref)
    print(f"rank {rank}/{world} local_rank {os.environ['LOCAL_RANK']} on "
          f"{os.environ.get('SLURMD_NODENAME', '?')}: weights in sync: {same}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    leave(0 if same else 1)


if __name__ == "__main__":
    main()
