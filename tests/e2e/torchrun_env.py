#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""torchrun_env.py - a torchrun-style consumer: it reads GROUP_RANK,
ROLE_RANK, ROLE_WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_WORLD_SIZE and the
TORCHELASTIC_* variables the way torchrun's workers do, joins with env://,
and checks that what it read agrees with what the process group says and
with every other rank (all_gather).  One line per rank: "torchrun-env rank
r/n: ok" or the list of what disagrees; exit 1 on any disagreement.
"""
import os

import torch
import torch.distributed as dist


def main():
    e = os.environ
    dist.init_process_group("gloo", init_method="env://")
    r, n = dist.get_rank(), dist.get_world_size()
    bad = []
    if torch.distributed.is_torchelastic_launched():
        bad.append(f"is_torchelastic_launched() with TORCHELASTIC_RUN_ID={e['TORCHELASTIC_RUN_ID']}")
    for k in ("TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_ERROR_FILE"):
        if k in e:
            bad.append(f"{k}={e[k]} inherited")
    want = {"ROLE_RANK": r, "RANK": r, "ROLE_WORLD_SIZE": n, "WORLD_SIZE": n,
            "GROUP_RANK": int(e["SLURM_NODEID"]), "NODE_RANK": int(e["SLURM_NODEID"]),
            "LOCAL_RANK": int(e["SLURM_LOCALID"])}
    bad += [f"{k}={e.get(k)} want {v}" for k, v in want.items() if e.get(k) != str(v)]
    mine = torch.tensor([int(e["GROUP_RANK"]), int(e["LOCAL_RANK"]),
                         int(e["LOCAL_WORLD_SIZE"]), int(e["GROUP_WORLD_SIZE"])])
    every = [torch.zeros(4, dtype=torch.int64) for _ in range(n)]
    dist.all_gather(every, mine)
    nodes = {int(t[0]) for t in every}
    if nodes != set(range(int(e["GROUP_WORLD_SIZE"]))):
        bad.append(f"GROUP_RANKs {sorted(nodes)} != 0..GROUP_WORLD_SIZE-1 ({e['GROUP_WORLD_SIZE']})")
    mine_node = [t for t in every if int(t[0]) == int(e["GROUP_RANK"])]
    if sorted(int(t[1]) for t in mine_node) != list(range(int(e["LOCAL_WORLD_SIZE"]))):
        bad.append(f"LOCAL_RANKs on my node {sorted(int(t[1]) for t in mine_node)} "
                   f"!= 0..LOCAL_WORLD_SIZE-1 ({e['LOCAL_WORLD_SIZE']})")
    print(f"torchrun-env rank {r}/{n}: " + ("ok" if not bad else "; ".join(bad)), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()
