# SPDX-License-Identifier: BSD-3-Clause
"""jax_train.py - a multi-process JAX job on the variables dpg exports.

    srun -N3 --ntasks-per-node=2 --dpg-gpus-per-task=0 python3 jax_train.py

jax.distributed.initialize() takes no arguments: JAX finds the process count
and index in Slurm's variables and its coordinator in JAX_COORDINATOR_ADDRESS,
which dpg sets to MASTER_ADDR:MASTER_PORT (the step's collision-free port, not
JAX's SLURM_JOB_ID % 4096 + 61440); with GPUs, JAX_LOCAL_DEVICE_IDS names the
task's own devices.  It then trains a linear model data-parallel: every
process computes the gradient of its own data, a cross-process sum (jitted
over all processes' devices) averages it, and every process applies it.
Prints one "process i/n" line per process and "jax: ..." on process 0.
"""
import os

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils


def main():
    jax.distributed.initialize()
    n, i = jax.process_count(), jax.process_index()
    coord = jax._src.distributed.global_state.coordinator_address  # what JAX used
    # a cross-process sum: every process contributes i + 1
    total = multihost_utils.process_allgather(jnp.array([i + 1.0])).sum()
    rng = np.random.default_rng(1234 + i)
    w_true = np.arange(8, dtype=np.float32) / 8
    w = jnp.zeros(8)

    def loss(w, x, y):
        return jnp.mean((x @ w - y) ** 2)

    grad = jax.jit(jax.value_and_grad(loss))
    first = last = None
    for step in range(60):
        x = rng.standard_normal((32, 8)).astype(np.float32)
        y = x @ w_true
        lv, g = grad(w, x, y)
        both = multihost_utils.process_allgather(jnp.concatenate([g, lv[None]]))
        mean = both.mean(axis=0)  # every process averages the same numbers
        w = w - 0.1 * mean[:8]
        first = float(mean[8]) if first is None else first
        last = float(mean[8])
    spread = float(np.ptp(np.asarray(multihost_utils.process_allgather(w)), axis=0).max())
    print(f"process {i}/{n} on {os.environ.get('SLURMD_NODENAME', '?')}: coordinator {coord} "
          f"(dpg {os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}) "
          f"sum {float(total):g} loss {first:.4f} -> {last:.6f} "
          f"weights agree: {spread < 1e-6}", flush=True)
    if i == 0:
        print(f"jax {jax.__version__}: {n} processes, {jax.device_count()} devices "
              f"({jax.devices()[0].platform}), coordinator {coord}", flush=True)
    jax.distributed.shutdown()
    if spread >= 1e-6:
        raise SystemExit(f"process {i}: weights differ between processes by {spread:g}")


if __name__ == "__main__":
    main()
