#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# tests/gpu/run.sh - the NCCL backend's tests on this host's GPUs (make
# check-gpu): the collectives (test_nccl_coll), then the sharded step and its
# kernels (test_zero_gpu), then dpg-check's NCCL point-to-point test
# (check_p2p.sh).  Exits 77, automake's "skipped", where there is no GPU or
# libdpg was built without NCCL; 1 when any test fails.
#   usage: tests/gpu/run.sh [PATH/TO/test_nccl_coll] [RANKS] [PATH/TO/test_zero_gpu]
# (test_zero_gpu defaults to the one beside test_nccl_coll)
bin=${1:-./tests/gpu/test_nccl_coll}
zbin=${3:-$(dirname "$bin")/test_zero_gpu}

if ! command -v nvidia-smi >/dev/null 2>&1; then
	echo "SKIPPED: no NVIDIA GPU (nvidia-smi not found)"
	exit 77
fi
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "${ngpu:-0}" -lt 1 ]; then
	echo "SKIPPED: no NVIDIA GPU (nvidia-smi lists no device)"
	exit 77
fi
if [ ! -x "$bin" ] && [ ! -x "$zbin" ]; then
	echo "SKIPPED: $bin not built (configure found no NCCL; see its summary)"
	exit 77
fi
# libdpg reaches NCCL through its GPU module: by default the one of the build
# tree these tests come from (make check-gpu sets it too)
if [ -z "${DPG_CUDA_MODULE:-}" ]; then
	mod=$(cd "$(dirname "$bin")/../.." 2>/dev/null && pwd)/.libs/dpg-cuda.so
	[ -f "$mod" ] && DPG_CUDA_MODULE=$mod && export DPG_CUDA_MODULE
fi
echo "GPU module: ${DPG_CUDA_MODULE:-(libdpg's default path)}"
# rank counts: the GPUs (one rank each); on one GPU, 1 and then 2 ranks
# sharing it (the tests give each rank a host of its own, NCCL_HOSTID), so
# that the multi-rank paths (a dead peer, splits, the sharded step) run too
if [ -n "${2:-}" ]; then
	counts=$2
elif [ "$ngpu" -ge 2 ]; then
	counts=$ngpu
else
	counts="1 2"
fi
echo "GPUs: $ngpu; rank counts: $counts"

# run each test that is built; 0 passed, 77 skipped, anything else failed
failed=0
ran=0
for ranks in $counts; do
	[ "$ranks" -gt 8 ] && ranks=8
	[ "$ranks" -gt "$ngpu" ] && echo "note: $ranks ranks share $ngpu GPU(s)"
	for t in "$bin" "$zbin"; do
		if [ ! -x "$t" ]; then
			echo "note: $t not built (configure found no nvcc or no NCCL): not run"
			continue
		fi
		echo "== $t $ranks"
		"$t" "$ranks"
		rc=$?
		case $rc in
		0) ran=$((ran + 1)) ;;
		77) echo "note: $t skipped" ;;
		*) echo "FAIL: $t exited with $rc"; failed=$((failed + 1)) ;;
		esac
	done
	# a rank dies in the middle: the survivors name it within seconds
	if [ -x "$bin" ] && [ "$ranks" -ge 2 ]; then
		echo "== $bin $ranks death"
		"$bin" "$ranks" death
		rc=$?
		case $rc in
		0) ;;
		*) echo "FAIL: $bin death exited with $rc"; failed=$((failed + 1)) ;;
		esac
	fi
done
# dpg-check's point-to-point test over NCCL, two local processes posing as
# two nodes (check_p2p.sh says how, with one GPU too)
ck=$(dirname "$bin")/../../dpg-check
if [ -x "$ck" ]; then
	echo "== $(dirname "$0")/check_p2p.sh $ck"
	if sh "$(dirname "$0")/check_p2p.sh" "$ck"; then
		ran=$((ran + 1))
	else
		echo "FAIL: check_p2p.sh"; failed=$((failed + 1))
	fi
else
	echo "note: $ck not built: dpg-check's NCCL test not run"
fi
[ "$failed" -gt 0 ] && exit 1
[ "$ran" -eq 0 ] && exit 77
exit 0
