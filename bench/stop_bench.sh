#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# stop_bench.sh - the per-step cost of the requeue protocol's question:
# dpg_stop_requested next to dpg_barrier and a 4-byte dpg_all_reduce, over
# shared memory (one node) and TCP (every rank its own SLURMD_NODENAME), and
# the PyTorch peer doing the same check (an all_reduce(MAX) of a one-element
# int tensor on gloo) side by side.  Microseconds per call, rank 0's mean.
#
# Usage: bench/stop_bench.sh [BUILD_DIR]   (ITERS=2000 WORLDS="2 4" PY=python)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bench_top=$(cd "$here/.." && pwd)
bench_name=stop_bench.sh
. "$here/lib.sh"
[ -z "${1:-}" ] || BUILD=$1
ITERS=${ITERS:-2000}
WORLDS=${WORLDS:-"2 4"}
PY=${PY:-/usr/bin/python3}
bench_build
bench_need stop_bench stop_bench
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cat > "$tmp/peer.py" <<'PYEOF'
import os, sys, time, datetime
import torch, torch.distributed as dist
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
n = int(sys.argv[1]); flag = torch.zeros(1, dtype=torch.int32)
for _ in range(n // 10 + 1):
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
dist.barrier(); t0 = time.perf_counter()
for _ in range(n):
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
us = (time.perf_counter() - t0) * 1e6 / n
if dist.get_rank() == 0:
    print("torch gloo all_reduce(MAX) 1 x int32 %.2f" % us)
dist.destroy_process_group()
PYEOF
cat > "$tmp/tcp.sh" <<'SHEOF'
#!/bin/sh
SLURMD_NODENAME=fake$RANK exec "$@"
SHEOF
chmod +x "$tmp/tcp.sh"

bench_host
echo "stop_bench: $ITERS calls each, after a warm-up, best of 3 interleaved rounds (dpg; torch: one round); us per call (rank 0)"
echo
echo "| world | path | call | us/call |"
echo "|---|---|---|---|"
for w in $WORLDS; do
	for path in shm tcp; do
		wrap=""
		[ $path = tcp ] && wrap=$tmp/tcp.sh
		bench_run_world "$w" $wrap "$stop_bench" "$ITERS" | while read -r line; do
			echo "| $w | $path | ${line% *} | ${line##* } |"
		done
	done
	if "$PY" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null; then
		bench_run_world "$w" "$PY" "$tmp/peer.py" "$ITERS" | while read -r line; do
			echo "| $w | tcp (gloo, loopback) | ${line% *} | ${line##* } |"
		done
	else
		bench_skip "peer torch" "$PY has no torch with gloo"
	fi
done
