#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# tests/gpu/check_p2p.sh - dpg-check's point-to-point test without Slurm: two
# local processes pose as the first tasks of two nodes n1 and n2 (the
# plugin's DPG_* contract, set by hand) and run dpg-check --json; rank 0's
# document must show n2's NET (CPU backend) measured and, on a host with an
# NVIDIA GPU, its NCCL cell measured too: each process gets a GPU (the same
# one where there is only one: NCCL_HOSTID then makes NCCL see two hosts,
# over its socket transport on loopback, since NCCL refuses two ranks on one
# GPU of one host).  Without a GPU (or GPU=0) the plan gives no GPU and the
# NCCL cell must say so.  Exits 0 passed, 1 failed.
#   usage: tests/gpu/check_p2p.sh [PATH/TO/dpg-check]   (env: GPU=0|1, DPG_TIMEOUT)
bin=${1:-./dpg-check}
[ -x "$bin" ] || { echo "FAIL: $bin is not an executable dpg-check"; exit 1; }
out=$(mktemp -d "${TMPDIR:-/tmp}/check_p2p.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT

if [ -z "${GPU:-}" ]; then
	GPU=0
	command -v nvidia-smi >/dev/null 2>&1 &&
		[ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')" -ge 1 ] && GPU=1
fi
# the module of the build tree beside dpg-check, as tests/gpu/run.sh does
if [ -z "${DPG_CUDA_MODULE:-}" ] && [ -f "$(dirname "$bin")/.libs/dpg-cuda.so" ]; then
	DPG_CUDA_MODULE=$(cd "$(dirname "$bin")/.libs" && pwd)/dpg-cuda.so
	export DPG_CUDA_MODULE
fi
# each GPU as "<bus id> <uuid>": the bus id as sysfs (and so the plugin's
# DPG_GPUS) writes it, the uuid for CUDA_VISIBLE_DEVICES (as Slurm's gres
# would set it: the task sees its own GPU)
gpus=
ngpu=0
if [ "$GPU" = 1 ]; then
	gpus=$(nvidia-smi --query-gpu=pci.bus_id,uuid --format=csv,noheader |
		sed 's/^0000\(....:\)/\1/; s/, */ /' | awk '{ print tolower($1), $2 }')
	ngpu=$(echo "$gpus" | grep -c .)
	echo "GPUs: $ngpu; GPU module: ${DPG_CUDA_MODULE:-the default path}"
	if [ "$ngpu" -lt 2 ]; then
		echo "one GPU: both ranks on it, NCCL_HOSTID=n1/n2, NCCL's socket transport"
		: "${NCCL_SOCKET_IFNAME:=lo}" "${NCCL_IB_DISABLE:=1}"
		export NCCL_SOCKET_IFNAME NCCL_IB_DISABLE
	fi
fi
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null) ||
	port=$((20000 + $$ % 20000))
secret=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')

for r in 0 1; do
	busid=
	uuid=
	hostid=
	if [ "$GPU" = 1 ]; then
		line=$(echo "$gpus" | sed -n "$((r % ngpu + 1))p")
		busid=${line% *}
		uuid=${line#* }
		[ "$ngpu" -lt 2 ] && hostid=n$((r + 1))
	fi
	env DPG_RANK=$r DPG_WORLD_SIZE=2 DPG_LOCAL_RANK=0 DPG_LOCAL_WORLD_SIZE=1 \
		DPG_NODE_RANK=$r DPG_NUM_NODES=2 DPG_MASTER_ADDR=127.0.0.1 \
		DPG_MASTER_PORT="$port" DPG_SECRET="$secret" DPG_TIMEOUT="${DPG_TIMEOUT:-60}" \
		DPG_GPUS_PER_TASK="$GPU" ${busid:+DPG_GPUS=$busid} \
		${uuid:+CUDA_VISIBLE_DEVICES=$uuid} ${hostid:+NCCL_HOSTID=$hostid} \
		SLURM_STEP_NODELIST='n[1-2]' SLURM_STEP_TASKS_PER_NODE='1(x2)' \
		SLURMD_NODENAME=n$((r + 1)) \
		"$bin" --json >"$out/$r.out" 2>"$out/$r.err" &
	[ "$r" = 0 ] && pid0=$! || pid1=$!
done
wait "$pid0"; rc0=$?
wait "$pid1"; rc1=$?
echo "rank 0 (exit $rc0):"; cat "$out/0.out"
for r in 0 1; do
	[ -s "$out/$r.err" ] && { echo "rank $r stderr:"; cat "$out/$r.err"; }
done
[ "$rc1" = 0 ] || echo "note: rank 1 exited $rc1"

cell() { # NODE COLUMN: that cell of rank 0's document, as '"state":"..","value":".."'
	sed 's/{"node":/\n&/g' "$out/0.out" | grep "^{\"node\":\"$1\"" |
		grep -o "\"$2\":{\"state\":\"[^\"]*\",\"value\":\"[^\"]*\"" | sed "s/^\"$2\"://"
}
fail=0
want() { # NODE COLUMN PATTERN
	got=$(cell "$1" "$2")
	if echo "$got" | grep -q "$3"; then
		echo "ok: $1 $2 $got"
	else
		echo "FAIL: $1 $2: want $3, got '$got'"
		fail=1
	fi
}
want n2 net '"state":"ok","value":"[0-9.]*GB/s [0-9]*us"'
if [ "$GPU" = 1 ]; then
	want n1 nccl '"state":"n/a","value":"rank 0"'
	want n2 nccl '"state":"ok","value":"[0-9.]*GB/s [0-9]*us"'
else
	want n2 nccl '"state":"n/a","value":"no GPU planned"'
fi
[ "$rc0" = 0 ] || { echo "FAIL: dpg-check's rank 0 exited $rc0 (a node not fit)"; fail=1; }
[ "$fail" = 0 ] && echo "PASS: dpg-check's point-to-point test, NCCL $([ "$GPU" = 1 ] && echo measured || echo 'not planned')"
exit "$fail"
