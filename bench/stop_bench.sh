#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# stop_bench.sh - the per-step cost of the requeue protocol's question:
# dpg_stop_requested next to dpg_barrier and a 4-byte dpg_all_reduce, over
# shared memory (one node) and TCP (every rank its own SLURMD_NODENAME), and
# the PyTorch peer doing the same check (an all_reduce(MAX) of a one-element
# int tensor on gloo) side by side.  Microseconds per call, rank 0's mean.
#
# Usage: bench/stop_bench.sh [--smoke] [BUILD_DIR]   (BUILD_DIR: or BUILD=)
#   --smoke (or SMOKE=1): 200 calls, world 2 only (bench/check_bench.sh)
# Environment: ITERS=2000 WORLDS="2 4" PY=/usr/bin/python3 (with torch; the
#              peer is skipped without, said in a "skip: peer ..." line)
# Output: the table on stdout (bench/results/stop.md holds a run of it).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bench_top=$(cd "$here/.." && pwd)
bench_name=stop_bench.sh
. "$here/lib.sh"
SMOKE=${SMOKE:-0}
if [ "${1:-}" = --smoke ]; then SMOKE=1; shift; fi
[ -z "${1:-}" ] || BUILD=$1
if [ "$SMOKE" = 1 ]; then
	ITERS=${ITERS:-200}; WORLDS=${WORLDS:-2}
fi
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
# every rank its own node: its own name, and the leader (local rank 0) of it
SLURMD_NODENAME=fake$RANK LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 exec "$@"
SHEOF
chmod +x "$tmp/tcp.sh"

# rows W LABEL CMD...: W ranks of CMD; each "NAME US" line of rank 0 as a
# table row (a failed run stops the script: no table from a partial run)
rows() {
	rw=$1 label=$2
	shift 2
	bench_run_world "$rw" "$@" > "$tmp/rows" || exit 1
	while read -r line; do
		echo "| $rw | $label | ${line% *} | ${line##* } |"
	done < "$tmp/rows"
}

have_torch=0
"$PY" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null && have_torch=1

bench_host
[ $have_torch = 1 ] || bench_skip "peer torch" "$PY has no torch with gloo (apt-get install python3-torch, or PY=)"
echo "stop_bench: $ITERS calls each, after a warm-up, best of 3 interleaved rounds (dpg; torch: one round); us per call (rank 0)"
echo
echo "| world | path | call | us/call |"
echo "|---|---|---|---|"
for w in $WORLDS; do
	rows "$w" shm "$stop_bench" "$ITERS"
	rows "$w" tcp "$tmp/tcp.sh" "$stop_bench" "$ITERS"
	[ $have_torch = 0 ] || rows "$w" "tcp (gloo, loopback)" "$PY" "$tmp/peer.py" "$ITERS"
done
