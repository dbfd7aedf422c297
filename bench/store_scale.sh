#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# store_scale.sh - job-start rendezvous at scale: the dpg store server with
# simulated ranks (bench/store_sim.c: event-driven clients on the real wire
# protocol, its HMAC handshake included), flat and one connection per node,
# beside PyTorch's TCPStore (bench/tcpstore_clients.py) where it can run.
#
#   bench/store_scale.sh                 # N = 4096 16384 131072, 8 ranks a node
#   NS="4096" bench/store_scale.sh
#   bench/store_scale.sh --smoke         # (or SMOKE=1) N = 256 1024, seconds
#
# For each N: store_sim -r 1 (flat: every rank connects to the store, as
# dpg does with DPG_STORE_RELAY=0 or one rank per node), store_sim -r 8 (one
# connection per node of 8 ranks carrying its ranks' requests: what rank 0
# sees with dpg's node relays, the default; the local hop is not simulated,
# and the simulated node sends one ADD of 8 where the relay forwards each
# rank's ADD), and TCPStore with PYTHON's torch (one thread per
# client, 2 connections each in 1.13) when its server's descriptors fit
# under the open-files limit.  Each simulated node has its own loopback source
# address (127.1.0.1 + node).  RLIMIT_NOFILE is raised to the hard limit;
# somaxconn (the listen backlog's cap: connections the kernel holds before
# the store accepts them; past it SYNs are dropped and retried after 1 s) is
# reported.  Columns: ranks, layout, dpg s, TCPStore s, TCPStore/dpg,
# connections, descriptors and RSS at the store (peak VmHWM, MiB), and the
# store's CPU seconds (rank 0's share of the work; the simulated ranks' share
# competes for the same cores here and runs on their own nodes on a cluster),
# the SYNs the kernel dropped on the full listen backlog (TcpExt
# ListenOverflows, machine-wide) and, after the rendezvous, the seconds one
# client takes to GET all N addresses in turn (what dpg_init's rank 0 does to
# gather the greetings, xchg.c).
#
# Knobs: NS, PER_NODE (8), DPG_TIMEOUT (60 s), TCPSTORE_TIMEOUT (20 s),
# PYTHON (/usr/bin/python3: Debian's torch 1.13), TS_PROCS (8), BUILD.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
bench_top=$TOP
bench_name=store_scale.sh
. "$HERE/lib.sh"
SMOKE=${SMOKE:-0}
if [ "${1:-}" = --smoke ]; then SMOKE=1; shift; fi
if [ "$SMOKE" = 1 ]; then NS=${NS:-256 1024}; DPG_TIMEOUT=${DPG_TIMEOUT:-20}; TS_PROCS=${TS_PROCS:-2}; fi
NS=${NS:-4096 16384 131072}
PER_NODE=${PER_NODE:-8}
DPG_TIMEOUT=${DPG_TIMEOUT:-60}
TCPSTORE_TIMEOUT=${TCPSTORE_TIMEOUT:-20}
TS_PROCS=${TS_PROCS:-8}
PYTHON=${PYTHON:-/usr/bin/python3}
bench_build
bench_need STORE_SIM store_sim

WORK=$(mktemp -d "${TMPDIR:-/tmp}/store-scale.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
ulimit -n "$(ulimit -Hn)" 2>/dev/null
ulimit -c 0
NOFILE=$(ulimit -n)

HAVE_TORCH=1
TORCH_VERSION=$("$PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null) || HAVE_TORCH=0

bench_host
[ $HAVE_TORCH = 1 ] || bench_skip "peer PyTorch TCPStore" "not installed ($PYTHON -c 'import torch' failed)"
SOMAXCONN=$(cat /proc/sys/net/core/somaxconn 2>/dev/null || echo '?')
echo "# store at scale: $(nproc) cores, open files $NOFILE (hard $(ulimit -Hn)), somaxconn $SOMAXCONN" \
	"(the listen backlog), tcp_max_syn_backlog $(cat /proc/sys/net/ipv4/tcp_max_syn_backlog 2>/dev/null || echo '?')," \
	"ports $(tr '\t' '-' < /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo '?')," \
	"torch ${TORCH_VERSION:-absent} ($PYTHON), $PER_NODE ranks a node"

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }
# cell NAME LINE -> the field, or "-"
cell() { local v; v=$(field "$1" "$2"); echo "${v:--}"; }

declare -a ROWS NOTES
# tcpstore N -> sets ts_col (seconds, or a word) and may add a note
tcpstore() {
	local n=$1 line rc
	if [ $HAVE_TORCH = 0 ]; then ts_col="n/a"; return; fi
	if [ $((2 * n + 64)) -gt "$NOFILE" ]; then
		ts_col="n/a"
		NOTES+=("N=$n TCPStore not run: its server would need $((2 * n)) descriptors (2 connections a client in 1.13), the open-files limit is $NOFILE; its client harness would need $n threads")
		return
	fi
	line=$(timeout $((TCPSTORE_TIMEOUT * 2 + 20)) "$PYTHON" "$TOP/bench/tcpstore_clients.py" \
		-n "$n" -p "$TS_PROCS" -a 8 -t "$TCPSTORE_TIMEOUT" 2>"$WORK/ts.$n.err")
	rc=$?
	echo "${line:-tcpstore clients=$n: no result (rc $rc)}"
	ts_col=$(field rendezvous_s "$line")
	if [ $rc -ne 0 ] || [ -z "$ts_col" ]; then
		ts_col="FAIL"
		NOTES+=("N=$n TCPStore failed (rc $rc): ${line#*error: }")
	fi
}

for n in $NS; do
	tcpstore "$n"
	for r in 1 "$PER_NODE"; do
		layout=$([ "$r" = 1 ] && echo flat || echo "1 conn/node")
		line=$(timeout $((DPG_TIMEOUT * 3 + 30)) "$STORE_SIM" -c -n "$n" -r "$r" -N "$PER_NODE" \
			-t "$DPG_TIMEOUT" 2>"$WORK/sim.$n.$r.err")
		rc=$?
		echo "${line:-sim ranks=$n per_conn=$r: no result (rc $rc)}"
		s=$(field rendezvous_s "$line")
		if [ $rc -ne 0 ] || ! [[ $s =~ ^[0-9.]+$ ]]; then
			NOTES+=("N=$n $layout dpg failed (rc $rc): ${line#*error: } $(head -c 300 "$WORK/sim.$n.$r.err")")
			s="FAIL"
		fi
		refused=$(grep -c 'refused' "$WORK/sim.$n.$r.err")
		[ "$refused" = 0 ] || NOTES+=("N=$n $layout: the store evicted or refused connections (retries=$(field retries "$line")): $(grep -m1 refused "$WORK/sim.$n.$r.err" | sed 's/[0-9.]*:[0-9]*:/ADDR:/')")
		if [[ $s =~ ^[0-9.]+$ && $ts_col =~ ^[0-9.]+$ ]]; then
			ratio=$(awk -v a="$ts_col" -v b="$s" 'BEGIN { printf "%.1fx", a / (b > 0 ? b : 0.001) }')
		else
			ratio="-"
		fi
		ROWS+=("$(printf '| %7s | %-11s | %7s | %11s | %12s | %6s | %6s | %7s | %8s | %8s | %9s |' \
			"$n" "$layout" "$s" "$ts_col" "$ratio" "$(cell conns "$line")" \
			"$(cell store_fds "$line")" "$(cell store_hwm_mb "$line")" \
			"$(cell store_cpu_s "$line")" "$(cell listen_overflows "$line")" \
			"$(cell collect_s "$line")")")
	done
done

echo
printf '| %7s | %-11s | %7s | %11s | %12s | %6s | %6s | %7s | %8s | %8s | %9s |\n' ranks layout \
	"dpg s" "TCPStore s" "TCPStore/dpg" conns fds "RSS MiB" "store CPU s" "SYN drops" "collect s"
echo "|---------|-------------|---------|-------------|--------------|--------|--------|---------|----------|----------|-----------|"
printf '%s\n' "${ROWS[@]}"
for note in "${NOTES[@]+"${NOTES[@]}"}"; do
	printf '\n%s\n' "$note"
done
