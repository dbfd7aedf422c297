#!/bin/sh
# tests/gpu/run.sh - the NCCL backend's collective tests on this host's GPUs
# (make check-gpu).  Exits 77, automake's "skipped", where there is no GPU or
# libdpg was built without NCCL.
#   usage: tests/gpu/run.sh [PATH/TO/test_nccl_coll] [RANKS]
bin=${1:-./tests/gpu/test_nccl_coll}

if ! command -v nvidia-smi >/dev/null 2>&1; then
	echo "SKIPPED: no NVIDIA GPU (nvidia-smi not found)"
	exit 77
fi
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "${ngpu:-0}" -lt 1 ]; then
	echo "SKIPPED: no NVIDIA GPU (nvidia-smi lists no device)"
	exit 77
fi
if [ ! -x "$bin" ]; then
	echo "SKIPPED: $bin not built (configure found no NCCL; see its summary)"
	exit 77
fi
ranks=${2:-$ngpu}
[ "$ranks" -gt 8 ] && ranks=8
echo "GPUs: $ngpu; running $ranks rank(s), one GPU each"
[ "$ranks" -eq 1 ] && echo "note: NCCL allows one rank per GPU, so one GPU tests 1 rank"
exec "$bin" "$ranks"
