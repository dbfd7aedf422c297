# SPDX-License-Identifier: BSD-3-Clause
"""fsdp_train.py - sharded data parallelism with PyTorch 2.x FSDP on the
variables dpg exports (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT).

    srun -N3 --ntasks-per-node=2 --dpg-gpus-per-task=0 python3 fsdp_train.py
    srun ... fsdp_train.py --steps 40 --ckpt DIR --save-at 20     # DCP save
    srun -N2 ... fsdp_train.py --steps 40 --ckpt DIR --resume     # any world size

The model is sharded with the per-parameter `fully_shard` (FSDP2, PyTorch
>= 2.6): it runs on the CPU with gloo as well as on GPUs with NCCL.  Each
step draws one global batch of 48 samples from a per-step seed and every rank
trains on its 48/WORLD_SIZE rows, so the loss curve does not depend on the
world size: a checkpoint saved by 6 ranks with torch.distributed.checkpoint
(DCP) and loaded by 4 continues the same curve.  Without fully_shard (Debian
12's PyTorch 1.13) it exits non-zero and says why; it never falls back.
Rank 0 prints "step N loss L" for every step; every rank prints how many
parameter elements it holds.
"""
import argparse
import gc
import os
import sys

import torch
import torch.distributed as dist

GLOBAL_BATCH = 48


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


def fail(msg):
    print(f"fsdp_train.py: {msg}", file=sys.stderr, flush=True)
    raise SystemExit(1)


def imports():
    """fully_shard and DCP, or a clear exit naming what is missing."""
    try:
        from torch.distributed.fsdp import fully_shard
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    except ImportError as e:
        fail(f"PyTorch {torch.__version__} has no FSDP2 (torch.distributed.fsdp.fully_shard, "
             f"PyTorch >= 2.6 needed): {e}; use the test environment (scripts/pyenv.sh)")
    return fully_shard, dcp, get_state_dict, set_state_dict


def build(fully_shard, device):
    torch.manual_seed(0)  # the same initial weights everywhere
    net = torch.nn.Sequential(torch.nn.Linear(16, 256), torch.nn.ReLU(),
                              torch.nn.Linear(256, 256), torch.nn.ReLU(),
                              torch.nn.Linear(256, 1)).to(device)
    for layer in net:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(net)
    return net


def batch(step, rank, world):
    gen = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(GLOBAL_BATCH, 16, generator=gen)
    y = torch.sin(x @ (torch.arange(16, dtype=torch.float32) / 16)).unsqueeze(1)
    n = GLOBAL_BATCH // world
    return x[rank * n:(rank + 1) * n], y[rank * n:(rank + 1) * n]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--ckpt", help="DCP checkpoint directory")
    ap.add_argument("--save-at", type=int, default=0, help="save after this step")
    ap.add_argument("--resume", action="store_true", help="load --ckpt first")
    args = ap.parse_args()
    fully_shard, dcp, get_state_dict, set_state_dict = imports()

    use_cuda = torch.cuda.is_available() and os.environ.get("CUDA_VISIBLE_DEVICES", "") != ""
    device = torch.device("cuda", torch.cuda.current_device()) if use_cuda else torch.device("cpu")
    dist.init_process_group("nccl" if use_cuda else "gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    if GLOBAL_BATCH % world:
        fail(f"world size {world} does not divide the global batch {GLOBAL_BATCH}")
    net = build(fully_shard, device)
    opt = torch.optim.Adam(net.parameters(), lr=0.002)
    local = sum(p.to_local().numel() for p in net.parameters())
    total = sum(p.numel() for p in net.parameters())
    print(f"rank {rank}/{world}: holds {local} of {total} parameter elements", flush=True)
    if rank == 0:
        print(f"mode fsdp2 (fully_shard) on {device.type}, world size {world}", flush=True)

    start = 0
    if args.resume:
        msd, osd = get_state_dict(net, opt)
        state = {"model": msd, "optim": osd, "step": torch.zeros((), dtype=torch.int64)}
        dcp.load(state, checkpoint_id=args.ckpt)
        set_state_dict(net, opt, model_state_dict=msd, optim_state_dict=osd)
        start = int(state["step"])
        if rank == 0:
            print(f"resumed from {args.ckpt} at step {start} on {world} ranks", flush=True)

    for step in range(start + 1, args.steps + 1):
        x, y = batch(step, rank, world)
        loss = torch.nn.functional.mse_loss(net(x.to(device)), y.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        if rank == 0:
            print(f"step {step} loss {mean.item() / world:.7f}", flush=True)
        if args.ckpt and step == args.save_at:
            msd, osd = get_state_dict(net, opt)
            dcp.save({"model": msd, "optim": osd, "step": torch.tensor(step)},
                     checkpoint_id=args.ckpt)
            if rank == 0:
                print(f"saved step {step} to {args.ckpt} on {world} ranks", flush=True)
    # Drop every tensor FSDP's gloo work may still reference, then tear down
    # together: a gloo work object outliving the process group is destroyed
    # during interpreter finalization, and torch 2.x aborts ("terminate called
    # without an active exception"; pytorch/pytorch#190489, #179291).
    del net, opt
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()
    leave(0)


if __name__ == "__main__":
    main()
