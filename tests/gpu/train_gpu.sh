#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# tests/gpu/train_gpu.sh - examples/train on the GPU against the CPU (make check-gpu): first
# test_mlp_gpu (the device model's kernels against the host loops), then, for a few stages and
# optimizers, the same run (seed, world size, batches) on DPG_BACKEND=cpu and =nccl; the GPU run
# must say it computed on the GPU and its loss curve (every step) must follow the CPU's within
#   |loss_gpu - loss_cpu| <= ATOL + RTOL x |loss_cpu|,   RTOL 1e-3, ATOL 1e-5.
# Why that bound: the runs differ only in how the matrix products are summed (fp32 in cuBLAS
# against double on the host) and in libm's last bits; the rest (data, shuffle, initial values,
# the optimizer's elementwise math, the loss of a step) is the same code.  Emulated on the CPU
# (train with mlp.h's products summed in float, 200-1000 steps of AdamW and SGD, stages 1 and 3,
# micro-batches 2-64) the curves stayed within 1e-5 relative in fp32 and 1.5e-4 with bf16
# working parameters (bf16 rounding amplifies a last-bit difference); 1e-3 leaves a margin of
# ~7x there, ATOL covers the printed precision (6 decimals).  The comparison is loss_cmp
# (losscurve.c, unit-tested on the CPU by tests/unit/examples/test_losscurve).
#   usage: tests/gpu/train_gpu.sh [BUILD_DIR] [RANKS]
# Exits 0 passed, 1 failed, 77 skipped (no GPU, or train's GPU module not built).
build=${1:-.}
RTOL=1e-3
ATOL=1e-5
train=$build/examples/train
cmp=$build/tests/gpu/loss_cmp
mlp=$build/tests/gpu/test_mlp_gpu

if ! command -v nvidia-smi >/dev/null 2>&1; then
	echo "SKIPPED: train on the GPU: no NVIDIA GPU (nvidia-smi not found)"
	exit 77
fi
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "${ngpu:-0}" -lt 1 ]; then
	echo "SKIPPED: train on the GPU: nvidia-smi lists no device"
	exit 77
fi
if [ ! -f "$build/examples/.libs/mlp-cuda.so" ] || [ ! -x "$cmp" ] || [ ! -x "$mlp" ]; then
	echo "SKIPPED: train on the GPU: mlp-cuda.so, loss_cmp or test_mlp_gpu not built" \
		"(configure found no nvcc, cuBLAS or NCCL; see its summary)"
	exit 77
fi
ranks=${2:-$ngpu}
[ "$ranks" -gt 4 ] && ranks=4
work=$(mktemp -d "${TMPDIR:-/tmp}/dpg-train-gpu.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT

echo "== $mlp"
"$mlp" || { echo "FAIL: test_mlp_gpu"; exit 1; }

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' \
		2>/dev/null || echo $((20000 + $$ % 20000))
}

# run_world BACKEND OUT ARGS...: RANKS processes of train, one GPU each on nccl;
# rank 0's stdout in OUT, everyone's stderr in OUT.err.  0 when all exit 0.
run_world() {
	backend=$1 out=$2
	shift 2
	port=$(free_port)
	pids=
	r=0
	while [ "$r" -lt "$ranks" ]; do
		o=/dev/null
		[ "$r" -eq 0 ] && o=$out
		RANK=$r LOCAL_RANK=$r WORLD_SIZE=$ranks LOCAL_WORLD_SIZE=$ranks \
		MASTER_ADDR=127.0.0.1 MASTER_PORT=$port DPG_TIMEOUT=120 \
		DPG_SECRET=5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8 \
		DPG_BACKEND=$backend "$train" "$@" >"$o" 2>>"$out.err" &
		pids="$pids $!"
		r=$((r + 1))
	done
	ok=0
	for p in $pids; do wait "$p" || ok=1; done
	return $ok
}

failed=0
n=0
for cfg in "--stage 1" "--stage 3" "--stage 2 --optimizer sgd --clip 1" \
	   "--stage 3 --param-dtype bf16"; do
	n=$((n + 1))
	# shellcheck disable=SC2086
	set -- --steps 60 --log-every 1 --seed 3 --global-batch 64 --micro-batch 8 $cfg
	echo "== train $* on $ranks rank(s): cpu vs nccl"
	if ! run_world cpu "$work/cpu$n" "$@" || ! run_world nccl "$work/gpu$n" "$@"; then
		echo "FAIL: a run failed:"
		cat "$work/cpu$n.err" "$work/gpu$n.err"
		failed=$((failed + 1))
		continue
	fi
	if ! grep -q '^forward and backward on the GPU' "$work/gpu$n"; then
		echo "FAIL: the nccl run did not compute on the GPU"
		failed=$((failed + 1))
		continue
	fi
	"$cmp" "$work/cpu$n" "$work/gpu$n" "$RTOL" "$ATOL" || failed=$((failed + 1))
done
[ "$failed" -gt 0 ] && { echo "FAIL: $failed of $n train comparisons"; exit 1; }
echo "train on the GPU: $n configurations agree with the CPU (rtol $RTOL, atol $ATOL)"
exit 0
