#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# demo.sh - dpg in one screen: build, start a local 3-node Slurm minicluster
# with the plugin, run the C training example (examples/train.c, ZeRO stage 3)
# and a PyTorch DDP job across it with `srun --dpg-gpus-per-task=0` (no GPU
# here; on GPU nodes the same command takes --dpg-gpus-per-task=1), stop the
# cluster.  Every command it shows after "$" runs as shown from the checkout's
# root once you have sourced the cluster's env.sh (scripts/cluster.sh start).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
export DPG_LAB=${DPG_LAB:-/tmp/dpg-demo}

step() { printf '\n== %s\n' "$*"; }
show() { printf '$ %s\n' "$*"; eval "$@"; }   # what is printed is what runs

step "1/4 install what is missing (Debian packages) and build dpg quietly"
scripts/deps.sh | tail -n 1
[ -n "${DPG_DEMO_PY:-}" ] || DPG_DEMO_PY=$(scripts/pyenv.sh --print 2>/dev/null || echo /usr/bin/python3)
trap 'step "4/4 stop the cluster"; scripts/cluster.sh stop' EXIT
scripts/cluster.sh start
. "$DPG_LAB/env.sh"
echo "nodes: $(sinfo -h -o '%N (%D, %T)')"

step "2/4 a C program on libdpg: 6 ranks on 3 nodes, ZeRO-3; --dpg-verbose prints each task's contract"
show srun -N3 --ntasks-per-node=2 --dpg-gpus-per-task=0 --dpg-verbose \
	build/demo/examples/train --stage 3 --steps 100 --global-batch 96 --log-every 20

step "3/4 PyTorch DDP (gloo) on the same variables: no MASTER_ADDR, MASTER_PORT or RANK written anywhere"
show srun -N3 --ntasks-per-node=2 --dpg-gpus-per-task=0 --dpg-verbose \
	"$DPG_DEMO_PY" examples/torch_ddp.py

cat <<'TXT'

shown: srun --dpg-gpus-per-task gave every task of both steps its rank, world size,
master address and a per-step port (the "dpg: rank=..." lines), the C job trained
with sharded optimizer state (loss per 20 steps) and the PyTorch job kept its
replicas in sync.  Try it yourself: scripts/cluster.sh start (README, "Try it yourself").
TXT
