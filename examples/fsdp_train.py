# SPDX-License-Identifier: BSD-3-Clause
"""fsdp_train.py - a tiny sharded-data-parallel training run on the variables
dpg exports (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT).

    srun -N2 --ntasks-per-node=2 --dpg-gpus-per-task=0 python3 fsdp_train.py

With a GPU per task (--dpg-gpus-per-task=1) it trains on cuda:LOCAL_RANK with
NCCL; without one on the CPU with gloo.  It wraps the model in PyTorch's
FullyShardedDataParallel.  Where FSDP cannot be used -- PyTorch 1.13 as
packaged by Debian 12 cannot even import torch.distributed.fsdp under
Python 3.11 (a dataclass error), and FSDP before 2.1 needs CUDA -- it says so
on rank 0 and falls back to DDP with ZeroRedundancyOptimizer (ZeRO stage 1:
optimizer state sharded across ranks), which exercises the same rendezvous.
Set DPG_FSDP=require to fail instead of falling back.
"""
import os
import sys

import torch
import torch.distributed as dist


def try_fsdp(module, device):
    """Return (wrapped module, None) or (None, reason)."""
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    except Exception as e:  # noqa: BLE001 - any import failure means "no FSDP"
        return None, f"cannot import torch.distributed.fsdp ({type(e).__name__}: {e})"
    try:
        kw = {"device_id": device} if device.type == "cuda" else {}
        return FSDP(module.to(device), **kw), None
    except Exception as e:  # noqa: BLE001
        return None, f"FSDP refused the model ({type(e).__name__}: {e})"


def main():
    use_cuda = torch.cuda.is_available() and os.environ.get("CUDA_VISIBLE_DEVICES", "") != ""
    if use_cuda:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if use_cuda else "gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same initial weights everywhere
    net = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))

    model, why = try_fsdp(net, device)
    if model is not None:
        mode = "fsdp"
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
    else:
        if os.environ.get("DPG_FSDP") == "require":
            print(f"rank {rank}: FSDP unavailable: {why}", file=sys.stderr, flush=True)
            dist.destroy_process_group()
            raise SystemExit(1)
        from torch.distributed.optim import ZeroRedundancyOptimizer
        from torch.nn.parallel import DistributedDataParallel as DDP
        mode = "ddp+zero1"
        model = DDP(net.to(device), device_ids=[device.index] if use_cuda else None)
        opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.SGD, lr=0.05)
        if rank == 0:
            print(f"FSDP unavailable: {why}; falling back to DDP + ZeroRedundancyOptimizer",
                  flush=True)
    if rank == 0:
        print(f"mode {mode} on {device}, world size {world}", flush=True)

    gen = torch.Generator().manual_seed(1234 + rank)  # each rank its own data
    w_true = torch.arange(16, dtype=torch.float32) / 16
    for step in range(1, 41):
        x = torch.randn(32, 16, generator=gen)
        y = x @ w_true + 0.5
        loss = torch.nn.functional.mse_loss(model(x.to(device)).squeeze(1), y.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        total = loss.detach().clone()
        dist.all_reduce(total)
        if rank == 0 and step % 10 == 0:
            print(f"step {step:3d}  mean loss {total.item() / world:.4f}", flush=True)

    # every rank must hold identical full weights
    if mode == "fsdp":
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        with FSDP.summon_full_params(model):
            flat = torch.cat([p.detach().reshape(-1).clone() for p in model.parameters()])
    else:
        flat = torch.cat([p.detach().reshape(-1).clone() for p in model.module.parameters()])
    ref = flat.clone()
    dist.broadcast(ref, 0)
    same = torch.equal(flat, ref)
    print(f"rank {rank}/{world} local_rank {os.environ.get('LOCAL_RANK', '?')} on "
          f"{os.environ.get('SLURMD_NODENAME', '?')}: mode {mode}: weights in sync: {same}",
          flush=True)
    dist.destroy_process_group()
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
