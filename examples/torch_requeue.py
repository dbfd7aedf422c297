# SPDX-License-Identifier: BSD-3-Clause
"""torch_requeue.py - save, then requeue, in PyTorch: DDP on gloo that stops
all ranks at the same step when Slurm warns (--dpg-requeue=GRACE: SIGUSR1)
or preempts (SIGTERM), saves with torch.distributed.checkpoint and exits 75
(DPG_EXIT_REQUEUE), which etc/sbatch/c-libdpg-requeue.sbatch turns into a
requeue; the next run's --resume goes on from the saved step.

    sbatch -N3 --ntasks-per-node=2 --dpg-gpus-per-task=0 \\
        etc/sbatch/c-libdpg-requeue.sbatch python3 torch_requeue.py --steps 2000

With Lightning, keep its own handler out of the way:
Trainer(plugins=[SLURMEnvironment(auto_requeue=False)]).
"""
import argparse
import hashlib
import os
import signal
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.nn.parallel import DistributedDataParallel as DDP

EXIT_REQUEUE = 75
stop_flag = torch.zeros(1, dtype=torch.int32)  # set by the handler, nothing else


def on_signal(signum, frame):
    stop_flag.fill_(1)


def stop_requested():
    """All ranks answer alike: the MAX of every rank's flag, once per step."""
    flag = stop_flag.clone()
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--ckpt-dir", default=None)
    ap.add_argument("--resume", action="store_true")
    a = ap.parse_args()
    if os.environ.get("DPG_REQUEUE", "0") not in ("", "0"):
        signal.signal(signal.SIGUSR1, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
        # the plugin holds SIGUSR1 until here (a warning during start-up waits)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    first = 0
    if a.resume:  # (get_state_dict gives the optimizer's state its shape first)
        msd, osd = get_state_dict(model, opt)
        state = {"model": msd, "opt": osd, "step": torch.zeros(1)}
        dcp.load(state, checkpoint_id=a.ckpt_dir)
        set_state_dict(model, opt, model_state_dict=state["model"],
                       optim_state_dict=state["opt"])
        first = int(state["step"].item())
        if rank == 0:
            print(f"resumed from {a.ckpt_dir} at step {first}", flush=True)
    w_true = torch.arange(16, dtype=torch.float32) / 16
    for step in range(first, a.steps):
        gen = torch.Generator().manual_seed(step * 1000 + rank)  # data: f(step, rank)
        x = torch.randn(32, 16, generator=gen)
        loss = torch.nn.functional.mse_loss(model(x).squeeze(1), x @ w_true + 0.5 + 0.1 * torch.randn(32, generator=gen))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and (step + 1) % 100 == 0:
            print(f"step {step + 1}/{a.steps} loss {loss.item():.6f}", flush=True)
        if step + 1 < a.steps and stop_requested():
            if a.ckpt_dir:
                msd, osd = get_state_dict(model, opt)
                state = {"model": msd, "opt": osd, "step": torch.tensor([float(step + 1)])}
                dcp.save(state, checkpoint_id=a.ckpt_dir)
                if rank == 0:
                    open(os.path.join(a.ckpt_dir, "latest"), "w").write(f"{step + 1}\n")
            if rank == 0:
                print(f"stopped at step {step + 1}: exit {EXIT_REQUEUE} (requeue me)", flush=True)
            dist.barrier()
            dist.destroy_process_group()
            sys.stdout.flush()
            os._exit(EXIT_REQUEUE)  # (torch_ddp.py's leave(): no finalization)
    w = torch.cat([p.detach().flatten() for p in model.parameters()])
    if rank == 0:
        print(f"done: steps {a.steps} params sha256 "
              f"{hashlib.sha256(w.numpy().tobytes()).hexdigest()}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
