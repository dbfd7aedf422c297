#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# zero_bench.sh - the sharded step (dpg_zero_step) on this machine: step time
# and per-rank memory versus world size and ZeRO stage, side by side with
# PyTorch's ZeRO-1 (gloo all-reduce + ZeroRedundancyOptimizer(AdamW)) on the
# same model shape, interleaved in one run; ratio = torch / dpg step time.
#
# Usage: bench/zero_bench.sh [--smoke] [BUILD_DIR] [OUT.md]
#   BUILD_DIR: the build tree with bench/zero_bench (`make -C DIR
#   bench-programs`); default $BUILD, else build/werror or build/dev
#   (bench/lib.sh).  OUT.md: default bench/results/zero.md (--smoke: none)
#   --smoke (or SMOKE=1): 64 Ki parameters in 2 units, 2 steps, worlds 1 2,
#   one round
# Environment: NUMEL=8388608 UNITS=8 STEPS=10 ROUNDS=5 WORLDS="1 2 4" STAGES="1 2 3"
#   (a round runs every world and stage once; single runs on a shared host
#   move by +-20%, so the table gives medians over the rounds)
#              PY=/usr/bin/python3 (with torch; the peer is skipped without,
#              said in a "skip: peer ..." line)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bench_top=$(cd "$here/.." && pwd)
bench_name=zero_bench.sh
. "$here/lib.sh"
SMOKE=${SMOKE:-0}
if [ "${1:-}" = --smoke ]; then SMOKE=1; shift; fi
[ -z "${1:-}" ] || BUILD=$1
if [ "$SMOKE" = 1 ]; then
	NUMEL=${NUMEL:-65536}; UNITS=${UNITS:-2}; STEPS=${STEPS:-2}; WORLDS=${WORLDS:-"1 2"}
	ROUNDS=${ROUNDS:-1}
	out=${2:-}
else
	out=${2:-$bench_top/bench/results/zero.md}
fi
NUMEL=${NUMEL:-8388608}
UNITS=${UNITS:-8}
STEPS=${STEPS:-10}
ROUNDS=${ROUNDS:-5}
WORLDS=${WORLDS:-"1 2 4"}
STAGES=${STAGES:-"1 2 3"}
PY=${PY:-/usr/bin/python3}
bench_build
bench_need prog zero_bench
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

have_torch=0
"$PY" -c 'import torch.distributed.optim' 2>/dev/null && have_torch=1
[ $have_torch = 1 ] || bench_skip "peer PyTorch ZeRO-1" "not installed ($PY -c 'import torch.distributed.optim' failed; apt-get install python3-torch)"


{
	echo "# Sharded step: dpg_zero_step vs PyTorch ZeRO-1, CPU backend"
	echo
	bench_host
	[ $have_torch = 1 ] || { echo; bench_skip "peer PyTorch ZeRO-1" "not installed"; }
	echo
	echo "\`bench/zero_bench.sh\` on $(nproc) cores ($(uname -m)):"
	echo "$NUMEL fp32 parameters in $UNITS units, AdamW; each run times $STEPS steps"
	echo "(a barrier before each) and gives their median; $ROUNDS rounds, each running every"
	echo "world and stage once (the stages in a shuffled order), and the table gives the"
	echo "median over the rounds.  stage / stage 1: the median of the rounds' ratios."
	echo "Memory is per rank, at rest (dpg_zero_memory)."
	echo "torch: gloo all-reduce of the gradients (as DDP) + ZeroRedundancyOptimizer(AdamW)."
	echo
	echo "| world | stage | dpg step ms | stage / stage 1 | torch ZeRO-1 step ms | torch/dpg | param MiB | grad MiB | optim MiB |"
	echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
} > "$tmp/out.md"
# one line per run: round world stage(0 = torch) and the program's fields
round=1
while [ "$round" -le "$ROUNDS" ]; do
	for w in $WORLDS; do
		if [ $have_torch = 1 ] &&
		   tline=$(bench_run_world "$w" "$PY" "$here/zero_torch.py" "$NUMEL" "$UNITS" "$STEPS"); then
			echo "round $round torch $tline"
			echo "$round $w 0 $tline" >> "$tmp/runs"
		fi
		for s in $(printf '%s\n' $STAGES | shuf); do
			line=$(bench_run_world "$w" "$prog" "$NUMEL" "$UNITS" "$s" "$STEPS")
			echo "round $round $line"
			echo "$round $w $s $line" >> "$tmp/runs"
		done
	done
	round=$((round + 1))
done
python3 - "$tmp/runs" "$WORLDS" "$STAGES" >> "$tmp/out.md" <<'PYEOF'
import statistics, sys
runs = {}   # (round, world, stage) -> fields
for line in open(sys.argv[1]):
    f = line.split()
    kv = {f[i]: f[i + 1] for i in range(3, len(f) - 1)}
    runs[(int(f[0]), int(f[1]), int(f[2]))] = kv
rounds = sorted({k[0] for k in runs})
med = lambda v: statistics.median(v) if v else None
for w in map(int, sys.argv[2].split()):
    torch = med([float(runs[(r, w, 0)]["step_ms"]) for r in rounds if (r, w, 0) in runs])
    for s in map(int, sys.argv[3].split()):
        mine = [(r, float(runs[(r, w, s)]["step_ms"])) for r in rounds if (r, w, s) in runs]
        if not mine:
            continue
        ms = med([m for _, m in mine])
        rel = med([m / float(runs[(r, w, 1)]["step_ms"]) for r, m in mine if (r, w, 1) in runs])
        kv = runs[(mine[0][0], w, s)]
        peer = torch if s == 1 else None
        print("| %d | %d | %.2f | %s | %s | %s | %s | %s | %s |" % (
            w, s, ms, "%.2f" % rel if rel is not None else "-",
            "%.2f" % peer if peer else "-", "%.2f" % (peer / ms) if peer else "-",
            kv["param_MiB"], kv["grad_MiB"], kv["optim_MiB"]))
# every round's ratio to stage 1, in run order: the spread behind each median
others = [s for s in map(int, sys.argv[3].split()) if s != 1]
if 1 in map(int, sys.argv[3].split()) and others:
    print()
    print("The rounds' ratios to stage 1, in run order (the table's column is their median):")
    print()
    print("| world | " + " | ".join("stage %d / stage 1" % s for s in others) + " |")
    print("|---:|" + "---|" * len(others))
    for w in map(int, sys.argv[2].split()):
        cols = []
        for s in others:
            cols.append(" ".join("%.2f" % (float(runs[(r, w, s)]["step_ms"]) /
                                           float(runs[(r, w, 1)]["step_ms"]))
                                 for r in rounds if (r, w, s) in runs and (r, w, 1) in runs))
        print("| %d | %s |" % (w, " | ".join(cols)))
PYEOF
if [ -n "$out" ]; then
	cp "$tmp/out.md" "$out"
	echo "# wrote $out"
fi
cat "$tmp/out.md"
