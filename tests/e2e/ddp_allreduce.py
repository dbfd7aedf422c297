# SPDX-License-Identifier: BSD-3-Clause
"""Real client check: torch.distributed (gloo, init_method='env://') all_reduce
under srun, relying ONLY on the variables dpg's SPANK plugin exports (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT; LOCAL_RANK/LOCAL_WORLD_SIZE/NODE_RANK
are cross-checked; the binding variables GLOO_SOCKET_IFNAME, which gloo then
uses, NCCL_SOCKET_IFNAME, OMP_NUM_THREADS and DPG_CPUS are printed).  Run it with `srun --export=NONE ... /usr/bin/python3
ddp_allreduce.py`: then nothing but Slurm's and dpg's variables reach it.
Each rank prints one line ending in OK or FAIL; exit 0 only if OK.
"""
import datetime
import os
import sys
import time

t0 = time.time()
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

env = os.environ
rank = int(env["RANK"])
world = int(env["WORLD_SIZE"])
dist.init_process_group("gloo", init_method="env://",
                        timeout=datetime.timedelta(seconds=60))
ok = dist.get_rank() == rank and dist.get_world_size() == world
x = torch.tensor([float(rank + 1)])
dist.all_reduce(x, op=dist.ReduceOp.SUM)
expect = world * (world + 1) / 2
ok = ok and x.item() == expect
# every rank learns every rank's (node, local rank): the plugin's
# LOCAL_RANK / LOCAL_WORLD_SIZE / NODE_RANK must agree with the real layout
me = torch.tensor([int(env["NODE_RANK"]), int(env["LOCAL_RANK"]),
                   int(env["LOCAL_WORLD_SIZE"])], dtype=torch.int64)
allv = [torch.zeros(3, dtype=torch.int64) for _ in range(world)]
dist.all_gather(allv, me)
per_node = {}
for v in allv:
    per_node.setdefault(int(v[0]), []).append(int(v[1]))
layout_ok = all(sorted(l) == list(range(len(l))) for l in per_node.values()) and \
    all(int(v[2]) == len(per_node[int(v[0])]) for v in allv)
ok = ok and layout_ok
print(f"rank={rank}/{world} local={env.get('LOCAL_RANK')}/{env.get('LOCAL_WORLD_SIZE')} "
      f"node={env.get('NODE_RANK')} host={env.get('SLURMD_NODENAME')} "
      f"master={env['MASTER_ADDR']}:{env['MASTER_PORT']} "
      f"allreduce={x.item()} expect={expect} layout={'ok' if layout_ok else 'BAD'} "
      f"gloo_if={env.get('GLOO_SOCKET_IFNAME', '-')} nccl_if={env.get('NCCL_SOCKET_IFNAME', '-')} "
      f"omp={env.get('OMP_NUM_THREADS', '-')} cpus={env.get('DPG_CPUS', '-')} "
      f"affinity={','.join(map(str, sorted(os.sched_getaffinity(0))))} "
      f"{'OK' if ok else 'FAIL'} t={time.time() - t0:.2f}s", flush=True)
dist.barrier()
dist.destroy_process_group()
sys.exit(0 if ok else 1)
