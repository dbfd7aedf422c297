#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# demo.sh - build dpg, start a local 3-node Slurm minicluster with the plugin,
# and run the C training example (examples/train.c, ZeRO stage 3) and a
# PyTorch DDP job across it with `srun --dpg-gpus-per-task=0` (no GPU here;
# on GPU nodes the same command takes --dpg-gpus-per-task=1).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
scripts/deps.sh
[ -x configure ] || autoreconf -fi
mkdir -p build/demo
(cd build/demo && { [ -f Makefile ] || ../../configure -q; } && make -s -j2)
export PLUGIN_SO=$top/build/demo/.libs/dpg.so NODES=3
lab=$(tests/e2e/minicluster.sh)
trap 'tests/e2e/minicluster-stop.sh "$lab" --rm' EXIT
. "$lab/env.sh"
echo
echo "$ srun -N3 --ntasks-per-node=2 --dpg-gpus-per-task=0 ./train --stage 3 --steps 100 --log-every 20"
srun -N3 --ntasks-per-node=2 --dpg-gpus-per-task=0 \
	"$top/build/demo/examples/train" --stage 3 --steps 100 --global-batch 96 --log-every 20
echo
echo "$ srun -N3 --ntasks-per-node=2 --dpg-gpus-per-task=0 --dpg-verbose python3 examples/torch_ddp.py"
srun -N3 --ntasks-per-node=2 --dpg-gpus-per-task=0 --dpg-verbose \
	/usr/bin/python3 "$top/examples/torch_ddp.py"
