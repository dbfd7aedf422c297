# SPDX-License-Identifier: BSD-3-Clause
"""accelerate_train.py - Hugging Face Accelerate started by srun, no
`accelerate launch`: Accelerator() reads the variables dpg exports (RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) and joins the job.

    srun -N3 --ntasks-per-node=2 --dpg-gpus-per-task=0 python3 accelerate_train.py

Each process trains on its own data; accelerator.backward() averages the
gradients, so after training every process holds the same weights (checked
with a broadcast from process 0).  Prints one "process i/n" line per process.
"""
import os
import sys

import torch
from accelerate import Accelerator


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
    acc = Accelerator(cpu=os.environ.get("CUDA_VISIBLE_DEVICES", "") == "")
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    model, opt = acc.prepare(model, opt)
    gen = torch.Generator().manual_seed(1234 + acc.process_index)  # own data
    w_true = torch.arange(16, dtype=torch.float32) / 16
    first = last = None
    for _ in range(40):
        x = torch.randn(32, 16, generator=gen).to(acc.device)
        y = x @ w_true.to(acc.device) + 0.5
        loss = torch.nn.functional.mse_loss(model(x).squeeze(1), y)
        opt.zero_grad()
        acc.backward(loss)
        opt.step()
        mean = acc.reduce(loss.detach(), reduction="mean").item()
        first = mean if first is None else first
        last = mean
    w = acc.unwrap_model(model).weight.detach().clone()
    ref = w.clone()
    torch.distributed.broadcast(ref, 0)
    same = torch.equal(w, ref)
    print(f"process {acc.process_index}/{acc.num_processes} "
          f"({acc.distributed_type}, {acc.device}) on {os.environ.get('SLURMD_NODENAME', '?')}: "
          f"loss {first:.4f} -> {last:.4f}: weights in sync: {same}", flush=True)
    acc.wait_for_everyone()
    acc.end_training()  # destroys the process group
    leave(0 if same else 1)


if __name__ == "__main__":
    main()
