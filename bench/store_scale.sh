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
# rank's ADD), and TCPStore with two torches when its server's descriptors
# fit under the open-files limit: PYTHON's (Debian's 1.13: 2 connections a
# client) and PYTHON2's (the PyPI environment of scripts/pyenv.sh, torch 2.x
# with its libuv server: 1 connection a client); one thread per client.
# TCPStore looks up the peer's name (reverse DNS of the v4-mapped address)
# on every connect and accept; where the resolver drops a query that is a 5 s
# stall (glibc's retry), in its single server thread too, and the run times
# DNS, not the store.  So TCPStore runs under bench/no_rdns.sh (as root: a
# private /etc/hosts naming 127.0.0.1-8 in both forms; TS_HOSTS=0: not).  Each simulated node has its own loopback source
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
# PYTHON (/usr/bin/python3: Debian's torch 1.13), PYTHON2 (scripts/pyenv.sh
# --print; "" = none), TS_PROCS (8), TS_HOSTS (1), BUILD.
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
PYTHON2=${PYTHON2-$("$TOP/scripts/pyenv.sh" --print 2>/dev/null)}
TS_HOSTS=${TS_HOSTS:-1}
bench_build
bench_need STORE_SIM store_sim

WORK=$(mktemp -d "${TMPDIR:-/tmp}/store-scale.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
ulimit -n "$(ulimit -Hn)" 2>/dev/null
ulimit -c 0
NOFILE=$(ulimit -n)

# the two peers: PY[k] python, TV[k] its torch version ("" = absent)
PY=("$PYTHON" "$PYTHON2")
TV=()
for k in 0 1; do
	TV[k]=
	[ -n "${PY[k]}" ] && TV[k]=$("${PY[k]}" -c 'import torch; print(torch.__version__)' 2>/dev/null)
done
# TCPStore's reverse lookups answered from a private /etc/hosts (see above)
TS_WRAP=()
[ "$TS_HOSTS" = 1 ] && "$HERE/no_rdns.sh" --check && TS_WRAP=("$HERE/no_rdns.sh")

bench_host
PYVAR=(PYTHON PYTHON2)
for k in 0 1; do
	if [ -z "${PY[k]}" ]; then
		bench_skip "peer PyTorch TCPStore (${PYVAR[k]})" "no python (scripts/pyenv.sh --print: the PyPI environment is not built)"
	elif [ -z "${TV[k]}" ]; then
		bench_skip "peer PyTorch TCPStore (${PYVAR[k]})" "not installed (${PY[k]} -c 'import torch' failed)"
	fi
done
[ ${#TS_WRAP[@]} -gt 0 ] || bench_skip "TCPStore's private /etc/hosts" \
	"not root or unshare -m failed: its reverse lookups go to the resolver ($(sed -n 's/^nameserver //p' /etc/resolv.conf | head -1))"
SOMAXCONN=$(cat /proc/sys/net/core/somaxconn 2>/dev/null || echo '?')
echo "# store at scale: $(nproc) cores, open files $NOFILE (hard $(ulimit -Hn)), somaxconn $SOMAXCONN" \
	"(the listen backlog), tcp_max_syn_backlog $(cat /proc/sys/net/ipv4/tcp_max_syn_backlog 2>/dev/null || echo '?')," \
	"ports $(tr '\t' '-' < /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo '?')," \
	"TCPStore peers: torch ${TV[0]:-absent} (${PY[0]:-none}), torch ${TV[1]:-absent} (${PY[1]:-none})," \
	"reverse lookups $([ ${#TS_WRAP[@]} -gt 0 ] && echo 'from a private /etc/hosts' || echo 'through the resolver'), $PER_NODE ranks a node"

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }
# cell NAME LINE -> the field, or "-"
cell() { local v; v=$(field "$1" "$2"); echo "${v:--}"; }

declare -a ROWS NOTES
# ratio PEER_S DPG_S -> "12.3x" or "-"
ratio() {
	if [[ $1 =~ ^[0-9.]+$ && $2 =~ ^[0-9.]+$ ]]; then
		awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1fx", a / (b > 0 ? b : 0.001) }'
	else
		echo "-"
	fi
}
# tcpstore K N -> sets ts_col (seconds, or a word) for peer K and may add a note
tcpstore() {
	local k=$1 n=$2 line rc per=1 v=${TV[$1]}
	if [ -z "$v" ]; then ts_col="n/a"; return; fi
	case $v in 1.*) per=2;; esac
	if [ $((per * n + 64)) -gt "$NOFILE" ]; then
		ts_col="n/a"
		NOTES+=("N=$n TCPStore $v not run: its server would need $((per * n)) descriptors ($per connection(s) a client), the open-files limit is $NOFILE; its client harness would need $n threads")
		return
	fi
	line=$(timeout $((TCPSTORE_TIMEOUT * 2 + 20)) "${TS_WRAP[@]}" "${PY[k]}" "$TOP/bench/tcpstore_clients.py" \
		-n "$n" -p "$TS_PROCS" -a 8 -t "$TCPSTORE_TIMEOUT" 2>"$WORK/ts.$k.$n.err")
	rc=$?
	echo "torch $v: ${line:-tcpstore clients=$n: no result (rc $rc)}"
	ts_col=$(field rendezvous_s "$line")
	if [ $rc -ne 0 ] || [ -z "$ts_col" ]; then
		ts_col="FAIL"
		NOTES+=("N=$n TCPStore $v failed (rc $rc): ${line#*error: }")
	fi
}

for n in $NS; do
	tcpstore 0 "$n"
	ts1=$ts_col
	tcpstore 1 "$n"
	ts2=$ts_col
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
		ROWS+=("$(printf '| %7s | %-11s | %7s | %9s | %7s | %9s | %7s | %6s | %6s | %7s | %8s | %8s | %9s |' \
			"$n" "$layout" "$s" "$ts1" "$(ratio "$ts1" "$s")" "$ts2" "$(ratio "$ts2" "$s")" "$(cell conns "$line")" \
			"$(cell store_fds "$line")" "$(cell store_hwm_mb "$line")" \
			"$(cell store_cpu_s "$line")" "$(cell listen_overflows "$line")" \
			"$(cell collect_s "$line")")")
	done
done

echo
printf '| %7s | %-11s | %7s | %9s | %7s | %9s | %7s | %6s | %6s | %7s | %8s | %8s | %9s |\n' ranks layout \
	"dpg s" "TS ${TV[0]%%+*} s" "TS/dpg" "TS ${TV[1]%%+*} s" "TS/dpg" conns fds "RSS MiB" "store CPU s" \
	"SYN drops" "collect s"
echo "|---------|-------------|---------|-----------|---------|-----------|---------|--------|--------|---------|----------|----------|-----------|"
printf '%s\n' "${ROWS[@]}"
for note in "${NOTES[@]+"${NOTES[@]}"}"; do
	printf '\n%s\n' "$note"
done
