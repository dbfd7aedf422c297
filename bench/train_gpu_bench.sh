#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# train_gpu_bench.sh - examples/train's throughput on the GPU against the CPU:
# the same command line (seed, batches, steps, world) once with
# DPG_BACKEND=nccl (model, gradients and optimizer on the GPU, mlp-cuda.so)
# and once with DPG_BACKEND=cpu, each repeated REPS times, interleaved; the
# figure is train's own "done: ... samples/s N" line (rank 0), median of the
# repeats; ratio = GPU / CPU.
#
# Usage: bench/train_gpu_bench.sh [--smoke] [BUILD_DIR]
# Environment: RANKS=1 (processes, one GPU each on nccl; the CPU run uses
#   the same number, one thread each), REPS=3, TRAIN_CONFIGS (below)
# Prints a markdown table; exits 77 with "SKIPPED: ..." where there is no
# GPU or train's GPU module is not built, 1 when a run fails.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bench_top=$(cd "$here/.." && pwd)
bench_name=train_gpu_bench.sh
. "$here/lib.sh"
SMOKE=${SMOKE:-0}
if [ "${1:-}" = --smoke ]; then SMOKE=1; shift; fi
[ -z "${1:-}" ] || BUILD=$1
# TRAIN_CONFIGS: command lines separated by ';' (the model is mlp.h's small
# MLP: the first is launch-bound on a GPU, the second has 1024-sample
# micro-batches)
if [ "$SMOKE" = 1 ]; then
	TRAIN_CONFIGS=${TRAIN_CONFIGS:-"--steps 20 --global-batch 256 --micro-batch 64 --samples 16384 --log-every 1000"}
	REPS=${REPS:-1}
else
	TRAIN_CONFIGS=${TRAIN_CONFIGS:-"--steps 500 --global-batch 256 --micro-batch 64 --samples 16384 --log-every 1000;--steps 100 --global-batch 2048 --micro-batch 1024 --samples 65536 --log-every 1000"}
	REPS=${REPS:-3}
fi
RANKS=${RANKS:-1}

if ! command -v nvidia-smi >/dev/null 2>&1 || [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')" -lt 1 ]; then
	echo "SKIPPED: no GPU (nvidia-smi not found or lists no device)"
	exit 77
fi
bench_build
if [ ! -x "$BUILD/examples/train" ] || [ ! -f "$BUILD/examples/.libs/mlp-cuda.so" ]; then
	echo "SKIPPED: train on the GPU: $BUILD/examples/train or its mlp-cuda.so not built" \
		"(configure found no nvcc, cuBLAS or NCCL; see its summary)"
	exit 77
fi
[ -n "${DPG_CUDA_MODULE:-}" ] || { DPG_CUDA_MODULE=$BUILD/.libs/dpg-cuda.so; export DPG_CUDA_MODULE; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# one BACKEND ARGS: print train's samples/s (rank 0's "done:" line)
one() {
	# shellcheck disable=SC2086
	line=$(BENCH_BACKEND=$1 bench_run_world "$RANKS" "$BUILD/examples/train" $2) || {
		echo "train_gpu_bench.sh: train $2 on $1 failed" >&2; exit 1; }
	if [ "$1" = nccl ] && ! echo "$line" | grep -q '^forward and backward on the GPU'; then
		echo "train_gpu_bench.sh: the nccl run did not compute on the GPU:" >&2
		echo "$line" >&2
		exit 1
	fi
	echo "$line" | awk '/^done:/ { for (i = 1; i < NF; i++) if ($i == "samples/s") print $(i + 1) }'
}

median() {
	tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

echo "examples/train, $RANKS rank(s) (CPU: one thread each), median of $REPS runs per"
echo "backend, interleaved; samples/s from train's \"done:\" line"
echo
echo "| train arguments | ranks | GPU samples/s | CPU samples/s | GPU/CPU |"
echo "|---|---:|---:|---:|---:|"
: > "$tmp/all"
IFS=';'
for args in $TRAIN_CONFIGS; do
	unset IFS
	gpu="" cpu=""
	i=0
	while [ $i -lt "$REPS" ]; do
		gpu="$gpu $(one nccl "$args")"
		cpu="$cpu $(one cpu "$args")"
		i=$((i + 1))
	done
	g=$(echo "$gpu" | median)
	c=$(echo "$cpu" | median)
	echo "$args: GPU$gpu; CPU$cpu" >> "$tmp/all"
	awk -v a="$args" -v g="$g" -v c="$c" -v r="$RANKS" 'BEGIN {
		printf "| %s | %s | %s | %s | %.2f |\n", a, r, g, c, (c > 0 ? g / c : 0) }'
	IFS=';'
done
unset IFS
echo
echo "every run, samples/s:"
sed 's/^/  /' "$tmp/all"
