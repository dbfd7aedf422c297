#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# store_bench.sh - job-start rendezvous through the dpg store vs PyTorch's
# TCPStore (Debian python3-torch 1.13), same machine, same run, same shape.
#
#   bench/store_bench.sh                 # N = 1024 4096 16384
#   NS="1024 4096" bench/store_bench.sh
#   bench/store_bench.sh --smoke         # (or SMOKE=1) N = 64 256, 2 processes
#
# For each N: bench/store_bench.c (dpg server thread + PROCS client processes
# of N/PROCS threads) and bench/tcpstore_clients.py (TCPStore server + PROCS
# forked client processes of N/PROCS threads).  Each client: connect, set
# addr/<i>, add 1 to "arrived" (the N-th sets "go"), wait "go", get addr/<i+1>.
# Clients connect to 127.0.0.1..127.0.0.ADDRS so that 16k+ loopback
# connections do not run out of ephemeral ports.  The open-files limit is
# raised to the hard limit.  TCPStore runs under bench/no_rdns.sh: its
# reverse DNS lookups of 127.0.0.1-8 (one per connect and accept) are
# answered from a private /etc/hosts, not a resolver that may drop some (a
# 5 s stall each); TS_HOSTS=0 turns that off.  Prints a table: N, dpg s,
# TCPStore s, ratio.
#
# Knobs: NS, PROCS (8), ADDRS (8), DPG_TIMEOUT (60 s), TCPSTORE_TIMEOUT (20 s;
# a failing TCPStore run is cut at 2x that + 20 s), PYTHON (/usr/bin/python3),
# KEEP_LOGS=1 (keep the per-run logs, path printed), BUILD (the build tree
# with bench/store_bench: `make -C DIR bench-programs`; default build/werror
# or build/dev, bench/lib.sh).  Without torch the peer is skipped, said in a
# "skip: peer ..." line.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
bench_top=$TOP
bench_name=store_bench.sh
. "$HERE/lib.sh"
SMOKE=${SMOKE:-0}
if [ "${1:-}" = --smoke ]; then SMOKE=1; shift; fi
if [ "$SMOKE" = 1 ]; then NS=${NS:-64 256}; PROCS=${PROCS:-2}; ADDRS=${ADDRS:-2}; fi
NS=${NS:-1024 4096 16384}
PROCS=${PROCS:-8}
ADDRS=${ADDRS:-8}
DPG_TIMEOUT=${DPG_TIMEOUT:-60}
TCPSTORE_TIMEOUT=${TCPSTORE_TIMEOUT:-20}
PYTHON=${PYTHON:-/usr/bin/python3}
TS_HOSTS=${TS_HOSTS:-1}
bench_build
bench_need STORE_BENCH store_bench

WORK=$(mktemp -d "${TMPDIR:-/tmp}/store-bench.XXXXXX")
cleanup() {
	if [ "${KEEP_LOGS:-0}" = 1 ]; then echo "logs: $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

ulimit -n "$(ulimit -Hn)" 2>/dev/null
ulimit -c 0

TS_WRAP=()
[ "$TS_HOSTS" = 1 ] && "$HERE/no_rdns.sh" --check && TS_WRAP=("$HERE/no_rdns.sh")
HAVE_TORCH=1
TORCH_VERSION=$("$PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null) || HAVE_TORCH=0

bench_host
[ $HAVE_TORCH = 1 ] || bench_skip "peer PyTorch TCPStore" "not installed ($PYTHON -c 'import torch' failed; apt-get install python3-torch)"
echo "# store rendezvous: $(nproc) cores, open files $(ulimit -n) (hard $(ulimit -Hn)), \
somaxconn $(cat /proc/sys/net/core/somaxconn 2>/dev/null || echo ?), \
ports $(tr '\t' '-' < /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo ?), \
torch ${TORCH_VERSION:-absent} (reverse lookups $([ ${#TS_WRAP[@]} -gt 0 ] && echo 'from a private /etc/hosts' || echo 'through the resolver')), \
$PROCS client processes, $ADDRS loopback addresses"

# how_ended RC LIMIT_S -> words for a run's exit status under timeout(1)
how_ended() {
	case $1 in
	124) echo "killed after $2 s" ;;
	1[3-9][0-9]|2[0-5][0-9]) echo "died of signal $(($1 - 128))$([ "$1" = 134 ] && echo ' (SIGABRT)')" ;;
	*) echo "exit status $1" ;;
	esac
}

# field NAME LINE -> value of NAME=... in a result line
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }

declare -a ROWS NOTES
for n in $NS; do
	# ---- dpg
	line=$(timeout $((DPG_TIMEOUT * 2 + 30)) "$STORE_BENCH" -n "$n" -p "$PROCS" \
		-a "$ADDRS" -t "$DPG_TIMEOUT" 2>"$WORK/dpg.$n.err")
	rc=$?
	echo "${line:-dpg clients=$n: no result (rc $rc)}"
	dpg_s=$(field rendezvous_s "$line")
	if [ $rc -ne 0 ] || [ -z "$dpg_s" ]; then
		NOTES+=("N=$n dpg failed ($(how_ended $rc $((DPG_TIMEOUT * 2 + 30)))): ${line#*error: } $(head -c 300 "$WORK/dpg.$n.err")")
		dpg_col="FAIL"
	else
		dpg_col=$dpg_s
	fi
	# ---- TCPStore
	if [ $HAVE_TORCH = 0 ]; then
		ts_col="n/a"
	else
		line=$(timeout $((TCPSTORE_TIMEOUT * 2 + 20)) "${TS_WRAP[@]}" "$PYTHON" \
			"$TOP/bench/tcpstore_clients.py" -n "$n" -p "$PROCS" -a "$ADDRS" \
			-t "$TCPSTORE_TIMEOUT" 2>"$WORK/ts.$n.err")
		rc=$?
		echo "${line:-tcpstore clients=$n: no result ($(how_ended $rc $((TCPSTORE_TIMEOUT * 2 + 20))))}"
		ts_s=$(field rendezvous_s "$line")
		ok=$(field ok "$line")
		if [ $rc -ne 0 ] || [ -z "$ts_s" ]; then
			ts_col="FAIL(${ok:-0}/$n)"
			# the first line of each distinct kind of complaint TCPStore printed
			why=$(grep -E "errno|Error|error|what\(\)|timed out" "$WORK/ts.$n.err" |
				sed -E 's/^[EWI][0-9]{8} [0-9:.]+ +[0-9]+ //; s/[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+, [0-9]+/ADDR/' |
				sort | uniq -c | sort -rn | head -3 | sed 's/^ */  /')
			NOTES+=("N=$n TCPStore failed ($(how_ended $rc $((TCPSTORE_TIMEOUT * 2 + 20)))): ${line#*error: }"$'\n'"$why")
		else
			ts_col=$ts_s
		fi
	fi
	if [[ $dpg_col =~ ^[0-9.]+$ && $ts_col =~ ^[0-9.]+$ ]]; then
		ratio=$(awk -v a="$ts_col" -v b="$dpg_col" 'BEGIN { printf "%.1fx", a / b }')
	else
		ratio="-"
	fi
	ROWS+=("$(printf '%8s | %10s | %14s | %8s' "$n" "$dpg_col" "$ts_col" "$ratio")")
done

echo
printf '%8s | %10s | %14s | %8s\n' "N" "dpg (s)" "TCPStore (s)" "TCP/dpg"
printf '%s\n' "---------+------------+----------------+---------"
printf '%s\n' "${ROWS[@]}"
for note in "${NOTES[@]+"${NOTES[@]}"}"; do
	printf '\n%s\n' "$note"
done
