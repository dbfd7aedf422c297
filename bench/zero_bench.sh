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
#   --smoke (or SMOKE=1): 64 Ki parameters in 2 units, 2 steps, worlds 1 2
# Environment: NUMEL=8388608 UNITS=8 STEPS=10 WORLDS="1 2 4" STAGES="1 2 3"
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
	out=${2:-}
else
	out=${2:-$bench_top/bench/results/zero.md}
fi
NUMEL=${NUMEL:-8388608}
UNITS=${UNITS:-8}
STEPS=${STEPS:-10}
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
	echo "$NUMEL fp32 parameters in $UNITS units, AdamW, median of $STEPS steps"
	echo "(a barrier before each).  Memory is per rank, at rest (dpg_zero_memory)."
	echo "torch: gloo all-reduce of the gradients (as DDP) + ZeroRedundancyOptimizer(AdamW)."
	echo
	echo "| world | stage | dpg step ms | torch ZeRO-1 step ms | torch/dpg | param MiB | grad MiB | optim MiB |"
	echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
} > "$tmp/out.md"
for w in $WORLDS; do
	tline=""
	if [ $have_torch = 1 ]; then
		tline=$(bench_run_world "$w" "$PY" "$here/zero_torch.py" "$NUMEL" "$UNITS" "$STEPS") || tline=""
	fi
	tms=$(echo "$tline" | awk '{for (i = 1; i < NF; i++) if ($i == "step_ms") print $(i + 1)}')
	for s in $STAGES; do
		line=$(bench_run_world "$w" "$prog" "$NUMEL" "$UNITS" "$s" "$STEPS")
		echo "$line"
		echo "$line" | awk -v t="${tms:-}" -v s="$s" '{
			for (i = 1; i < NF; i++) v[$i] = $(i + 1)
			peer = (t != "" && s == 1) ? t : "-"
			ratio = (t != "" && s == 1) ? sprintf("%.2f", t / v["step_ms"]) : "-"
			printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", v["world"], s, v["step_ms"],
				peer, ratio, v["param_MiB"], v["grad_MiB"], v["optim_MiB"] }' >> "$tmp/out.md"
	done
done
if [ -n "$out" ]; then
	cp "$tmp/out.md" "$out"
	echo "# wrote $out"
fi
cat "$tmp/out.md"
