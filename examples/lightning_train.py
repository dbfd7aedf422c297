# SPDX-License-Identifier: BSD-3-Clause
"""lightning_train.py - a tiny PyTorch Lightning (2.x) DDP run on the variables
dpg exports.

    srun -N2 --ntasks-per-node=2 --dpg-gpus-per-task=0 python3 lightning_train.py

Lightning is told to use the torchrun names dpg exports for this step (RANK,
LOCAL_RANK, WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT) through its
TorchElasticEnvironment, instead of re-deriving them from SLURM_* (whose
port rule, 15000 + the job id's last 4 digits, collides between jobs).
The Trainer's devices and num_nodes come from LOCAL_WORLD_SIZE and
GROUP_WORLD_SIZE, so the sbatch/srun geometry is the only place to set them.
Needs `pip install lightning` (or pytorch-lightning) with a matching PyTorch;
Debian 12 packages neither.
"""
import os
import sys

import torch

try:
    import lightning.pytorch as pl
    from lightning.pytorch.plugins.environments import TorchElasticEnvironment
except ImportError:
    try:
        import pytorch_lightning as pl
        from pytorch_lightning.plugins.environments import TorchElasticEnvironment
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
                         strategy="ddp", plugins=[TorchElasticEnvironment()], max_epochs=1,
                         enable_checkpointing=False, logger=False, enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(model, loader)
    # every rank must hold identical weights after DDP
    w = model.net.weight.detach().clone()
    ref = w.clone()
    torch.distributed.broadcast(ref, 0)
    same = torch.equal(w, ref)
    print(f"rank {trainer.global_rank}/{trainer.world_size} on "
          f"{env.get('SLURMD_NODENAME', '?')}: loss {float(trainer.callback_metrics['loss']):.4f}: "
          f"weights in sync: {same}", flush=True)
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
