# SPDX-License-Identifier: BSD-3-Clause
"""torch_requeue.py - save, then requeue, in PyTorch: DDP on gloo that stops
all ranks at the same step when Slurm warns (--dpg-requeue=GRACE: SIGUSR1)
or preempts (SIGTERM), saves with torch.distributed.checkpoint and exits 75
(DPG_EXIT_REQUEUE), which etc/sbatch/torch-requeue.sbatch turns into a
requeue; the next run's --resume goes on from the saved step.  Each rank
logs why it stops on stderr: "rank R: got User defined signal 1: stopping at
step N" (the signal it got), or "rank R: told by another rank: ...".

    PYTHON=/path/to/venv/bin/python sbatch -N3 --ntasks-per-node=2 \\
        --dpg-gpus-per-task=0 etc/sbatch/torch-requeue.sbatch --steps 2000

With Lightning, keep its own handler out of the way:
Trainer(plugins=[SLURMEnvironment(auto_requeue=False)]).

Checkpoint layout (the one examples/train writes, with DCP files inside):
CKPT/step-NNNNNNNN/ holds one complete save; CKPT/latest names it
("step-NNNNNNNN").  A save goes to CKPT/step-NNNNNNNN.tmp, is renamed once
every rank has written (a barrier), and only then does rank 0 replace
latest (a temporary file, fsync, os.replace).  A save killed midway leaves a
.tmp directory that nothing reads; --resume loads what latest names.  The
--keep newest step directories stay (default 2), older ones are removed.
"""
import argparse
import hashlib
import os
import re
import shutil
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
    stop_flag.fill_(signum)  # (non-zero: which signal, for the log)


def stop_requested():
    """All ranks answer alike: the MAX of every rank's flag, once per step."""
    flag = stop_flag.clone()
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def step_name(step):
    return f"step-{step:08d}"


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_latest(ckpt):
    """The directory CKPT/latest names, checked: a complete save."""
    path = os.path.join(ckpt, "latest")
    try:
        with open(path) as f:
            name = f.read().strip()
    except OSError as e:
        sys.exit(f"torch_requeue.py: --resume: cannot read {path}: "
                 f"{e.strerror}; start without --resume")
    d = os.path.join(ckpt, name)
    if not re.fullmatch(r"step-[0-9]{8}", name) or not os.path.isfile(
            os.path.join(d, ".metadata")):
        sys.exit(f"torch_requeue.py: {path} names '{name}', not a complete "
                 f"step-NNNNNNNN save in {ckpt}; point it at one or start "
                 f"without --resume")
    return d


def save(ckpt, step, state, rank, keep):
    """All ranks: DCP into step-N.tmp, barrier, rename; rank 0 flips latest."""
    final = os.path.join(ckpt, step_name(step))
    tmp = final + ".tmp"
    if rank == 0:  # (a save killed earlier may have left either behind)
        os.makedirs(ckpt, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
    dist.barrier()
    dcp.save(state, checkpoint_id=tmp)
    dist.barrier()  # every rank's files are written (and fsynced) here
    if rank == 0:
        if os.path.exists(final):  # (saved before, but latest never named it)
            shutil.rmtree(final)
        os.rename(tmp, final)
        fsync_dir(ckpt)
        latest = os.path.join(ckpt, "latest")
        with open(latest + ".tmp", "w") as f:
            f.write(step_name(step) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(latest + ".tmp", latest)
        fsync_dir(ckpt)
        # prune: the keep - 1 newest older saves stay; unfinished .tmp ones
        # and saves past this step (latest never named them) go
        names = os.listdir(ckpt)
        older = sorted(e for e in names if re.fullmatch(r"step-[0-9]{8}", e)
                       and e < step_name(step))
        gone = older[:max(0, len(older) - (keep - 1))] + [
            e for e in names if re.fullmatch(r"step-[0-9]{8}(\.tmp)?", e)
            and e > step_name(step)] + [
            e for e in names if re.fullmatch(r"step-[0-9]{8}\.tmp", e)]
        for e in set(gone):
            shutil.rmtree(os.path.join(ckpt, e), ignore_errors=True)
        print(f"saved step {step} in {final}", flush=True)
    dist.barrier()  # no rank exits before latest names the save


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--ckpt-dir", default=None)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--keep", type=int, default=2,
                    help="step directories kept (the newest; at least 1)")
    a = ap.parse_args()
    if a.keep < 1:
        ap.error(f"--keep {a.keep}: keep at least 1 step directory")
    if a.resume and not a.ckpt_dir:
        ap.error("--resume needs --ckpt-dir DIR (it reads DIR/latest)")
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
        d = read_latest(a.ckpt_dir)
        dcp.load(state, checkpoint_id=d)
        set_state_dict(model, opt, model_state_dict=state["model"],
                       optim_state_dict=state["opt"])
        first = int(state["step"].item())
        if rank == 0:
            print(f"resumed from {d} at step {first}", flush=True)
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
            got = int(stop_flag.item())  # (0: only another rank was warned)
            why = (f"got {signal.strsignal(got)}" if got
                   else "told by another rank")
            print(f"rank {rank}: {why}: stopping at step {step + 1}",
                  file=sys.stderr, flush=True)
            if a.ckpt_dir:
                msd, osd = get_state_dict(model, opt)
                state = {"model": msd, "opt": osd, "step": torch.tensor([float(step + 1)])}
                save(a.ckpt_dir, step + 1, state, rank, a.keep)
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
