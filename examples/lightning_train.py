# SPDX-License-Identifier: BSD-3-Clause
"""lightning_train.py - a tiny PyTorch Lightning (2.x) DDP run on the variables
dpg exports.

    srun -N2 --ntasks-per-node=2 --dpg-gpus-per-task=0 python3 lightning_train.py

A plain Trainer: under srun Lightning picks its SLURMEnvironment, which takes
ranks from SLURM_PROCID/SLURM_LOCALID/SLURM_NODEID (dpg's RANK/LOCAL_RANK/
NODE_RANK are the same numbers) and uses MASTER_ADDR and MASTER_PORT when
they are set -- dpg sets both, so Lightning's own rule (port 15000 + the job
id's last 4 digits, which collides between jobs and steps) never applies.
Every rank prints the environment Lightning chose and the address it used.
SLURMEnvironment also installs a SIGUSR1 requeue handler (auto_requeue); a
program that follows dpg's save-and-requeue protocol turns it off with
`plugins=[SLURMEnvironment(auto_requeue=False)]`.
The Trainer's devices and num_nodes come from LOCAL_WORLD_SIZE and
GROUP_WORLD_SIZE, so the sbatch/srun geometry is the only place to set them.
Needs `pip install lightning` with a matching PyTorch (scripts/pyenv.sh);
Debian 12 packages neither.
"""
import os
import sys

import torch

try:
    import lightning.pytorch as pl
except ImportError:
    try:
        import pytorch_lightning as pl
    except ImportError:
        sys.exit("lightning_train.py: PyTorch Lightning is not installed "
                 "(pip install lightning)")


class Tiny(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(16, 1)
        self.w_true = torch.arange(16, dtype=torch.float32) / 16

    def training_step(self, batch, _):
        (x,) = batch
        y = x @ self.w_true.to(x.device) + 0.5
        loss = torch.nn.functional.mse_loss(self.net(x).squeeze(1), y)
        self.log("loss", loss, sync_dist=True, prog_bar=False)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


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
    env = os.environ
    devices = int(env.get("LOCAL_WORLD_SIZE", "1"))
    nodes = int(env.get("GROUP_WORLD_SIZE", "1"))
    gpu = env.get("CUDA_VISIBLE_DEVICES", "") != "" and torch.cuda.is_available()
    torch.manual_seed(0)
    model = Tiny()
    gen = torch.Generator().manual_seed(1234 + int(env.get("RANK", "0")))
    data = torch.utils.data.TensorDataset(torch.randn(32 * 40, 16, generator=gen))
    loader = torch.utils.data.DataLoader(data, batch_size=32)
    trainer = pl.Trainer(accelerator="gpu" if gpu else "cpu", devices=devices, num_nodes=nodes,
                         strategy="ddp", max_epochs=1,
                         enable_checkpointing=False, logger=False, enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(model, loader)
    # every rank must hold identical weights after DDP
    w = model.net.weight.detach().clone()
    ref = w.clone()
    torch.distributed.broadcast(ref, 0)
    same = torch.equal(w, ref)
    cenv = trainer.strategy.cluster_environment
    print(f"rank {trainer.global_rank}/{trainer.world_size}: {type(cenv).__name__} "
          f"master {cenv.main_address}:{cenv.main_port} "
          f"(dpg {env.get('DPG_MASTER_ADDR')}:{env.get('DPG_MASTER_PORT')})", flush=True)
    print(f"rank {trainer.global_rank}/{trainer.world_size} on "
          f"{env.get('SLURMD_NODENAME', '?')}: loss {float(trainer.callback_metrics['loss']):.4f}: "
          f"weights in sync: {same}", flush=True)
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
    leave(0 if same else 1)


if __name__ == "__main__":
    main()
