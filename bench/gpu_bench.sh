#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# gpu_bench.sh - the GPU benchmarks in one run (`make bench-gpu`), results in
# bench/results/gpu.md (and the collectives' CSV in bench/results/gpu_nccl.csv):
#   1. bench/nccl_bench: dpg_allreduce / dpg_reduce_scatter / dpg_all_gather
#      through libdpg (NCCL backend) vs NCCL called directly on the same
#      buffers, 4 KiB..1 GiB, one rank per GPU (one GPU: world 1, where the
#      single-rank path and the per-call overheads are what is measured);
#   2. bench/optim_gpu_bench: the AdamW and SGD shard update kernels in GB/s
#      vs cudaMemcpy device to device of the same bytes, and dpg_zero_step
#      at world 1 on NCCL, stages 1 and 3;
#   3. bench/train_gpu_bench.sh: examples/train samples/s on GPU vs CPU.
# The whole run takes a few minutes with the defaults (one H100: ~2).
#
# Usage: bench/gpu_bench.sh [--smoke] [BUILD_DIR] [OUT.md]
#   BUILD_DIR: a build tree configured with CUDA and NCCL after `make all
#   bench-gpu-programs` (default $BUILD, else build/werror or build/dev);
#   OUT.md: default bench/results/gpu.md (--smoke: none, small sizes).
# Environment: RANKS (default: the GPUs, at most 8), MAX_BYTES=1G ITERS=20,
#   NUMEL=67108864 REPS=20; DPG_CUDA_MODULE (default BUILD/.libs/dpg-cuda.so)
# Exit status: 0 ran, 1 a bench failed, 77 no GPU ("SKIPPED: no GPU (...)").
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bench_top=$(cd "$here/.." && pwd)
bench_name=gpu_bench.sh
. "$here/lib.sh"
SMOKE=${SMOKE:-0}
if [ "${1:-}" = --smoke ]; then SMOKE=1; shift; fi
[ -z "${1:-}" ] || BUILD=$1

if ! command -v nvidia-smi >/dev/null 2>&1; then
	echo "SKIPPED: no GPU (nvidia-smi not found)"
	exit 77
fi
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
if [ "${ngpu:-0}" -lt 1 ]; then
	echo "SKIPPED: no GPU (nvidia-smi -L lists no device)"
	exit 77
fi
if [ "$SMOKE" = 1 ]; then
	MAX_BYTES=${MAX_BYTES:-1M}; ITERS=${ITERS:-5}; NUMEL=${NUMEL:-1048576}; REPS=${REPS:-5}
	out=${2:-}
else
	out=${2:-$bench_top/bench/results/gpu.md}
fi
MAX_BYTES=${MAX_BYTES:-1G}
ITERS=${ITERS:-20}
NUMEL=${NUMEL:-67108864}
REPS=${REPS:-20}
RANKS=${RANKS:-$ngpu}
[ "$RANKS" -gt 8 ] && RANKS=8
bench_build
if [ ! -x "$BUILD/bench/nccl_bench" ]; then
	echo "SKIPPED: $BUILD/bench/nccl_bench not built (configure found no CUDA or NCCL;" \
		"else 'make -C $BUILD bench-gpu-programs')"
	exit 77
fi
[ -n "${DPG_CUDA_MODULE:-}" ] || DPG_CUDA_MODULE=$BUILD/.libs/dpg-cuda.so
export DPG_CUDA_MODULE
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
csv=$tmp/gpu_nccl.csv
failed=0

{
	echo "# GPU benchmarks: collectives, optimizer update, train"
	echo
	bench_host
	echo "GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)" \
		"($ngpu visible; nvidia-smi --query-gpu=name,memory.total,driver_version)"
	echo
	echo "\`bench/gpu_bench.sh\` (\`make bench-gpu\`), $RANKS rank(s) for the collectives."
	echo
	echo "## 1. Collectives: libdpg (NCCL backend) vs NCCL directly, same buffers and stream"
	echo
} > "$tmp/out.md"

# the collectives: RANKS ranks, one GPU each
tmpc=$tmp/coll
mkdir -p "$tmpc"
if (tmp=$tmpc; BENCH_BACKEND=nccl bench_run_world "$RANKS" "$BUILD/bench/nccl_bench" 4096 \
	"$MAX_BYTES" "$ITERS" "$csv") >> "$tmp/out.md"; then :; else
	{ echo "FAIL: nccl_bench (rank 0's output:)"; cat "$tmpc/out.0" 2>/dev/null; } |
		tee -a "$tmp/out.md"
	failed=1
fi

echo >> "$tmp/out.md"
echo "## 2. Optimizer update on the GPU" >> "$tmp/out.md"
echo >> "$tmp/out.md"
if [ -x "$BUILD/bench/optim_gpu_bench" ]; then
	if ! "$BUILD/bench/optim_gpu_bench" "$NUMEL" "$REPS" >> "$tmp/out.md" 2>"$tmp/optim.err"; then
		{ echo "FAIL: optim_gpu_bench:"; cat "$tmp/optim.err"; } | tee -a "$tmp/out.md"
		failed=1
	fi
else
	bench_skip "optim_gpu_bench" "not built (configure found no nvcc)" >> "$tmp/out.md"
fi

echo >> "$tmp/out.md"
echo "## 3. examples/train on the GPU vs the CPU" >> "$tmp/out.md"
echo >> "$tmp/out.md"
smoke=""
[ "$SMOKE" = 1 ] && smoke=--smoke
rc=0
SMOKE=$SMOKE sh "$here/train_gpu_bench.sh" $smoke "$BUILD" >> "$tmp/out.md" 2>"$tmp/train.err" || rc=$?
case $rc in
0) ;;
77) ;;
*) { echo "FAIL: train_gpu_bench.sh:"; cat "$tmp/train.err"; } | tee -a "$tmp/out.md"; failed=1 ;;
esac

if [ -n "$out" ]; then
	cp "$tmp/out.md" "$out"
	[ -f "$csv" ] && cp "$csv" "$(dirname "$out")/gpu_nccl.csv"
	echo "# wrote $out"
fi
cat "$tmp/out.md"
exit $failed
