#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# run.sh - the fault-injection suite of libdpg (tests/faults/README.md).
#
#   tests/faults/run.sh [FAULTS_BINARY] [CASE-GLOB...]
#
# Runs every case of the faults driver (or those matching the globs), each in
# its own driver process under a watchdog, and prints one line per fault:
#   ok    <fault>  detect <min>-<max> ms  outcome: <short>
#   FAIL  <fault>  detect ... outcome: ...  why: ...
#   SKIP  <fault>  ...                         (a feature not built)
# then a summary.  Writes a markdown table to $FAULTS_RESULTS (default
# $PWD/faults.md) and the ranks' logs under $FAULTS_LOGDIR (default
# $PWD/faults-logs).  Exit status: 0 when nothing failed, 1 otherwise.
#
# Environment: FAULTS_BIN (the driver, when not given as $1), FAULTS_TIMEOUT
# (DPG_TIMEOUT of the ranks, default 10 s), FAULTS_CKPT_MB (shard size of the
# checkpoint case, default 64), FAULTS_DRY=1 (inject nothing: the kill/stop
# cases must then FAIL - a check that the suite can fail), FAULTS_KEEP=1
# (keep the checkpoint directory; else it is listed in ckpt.ls and removed).
set -u

bin=${FAULTS_BIN:-}
if [ $# -gt 0 ] && [ -x "$1" ] && [ -f "$1" ]; then
	bin=$1
	shift
fi
if [ -z "$bin" ]; then
	for b in ./tests/faults/faults ./faults; do
		[ -x "$b" ] && [ -f "$b" ] && { bin=$b; break; }
	done
fi
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
	echo "run.sh: no faults driver (give its path, or set FAULTS_BIN; build it with 'make tests/faults/faults')" >&2
	exit 2
fi

results=${FAULTS_RESULTS:-$PWD/faults.md}
logdir=${FAULTS_LOGDIR:-$PWD/faults-logs}
T=${FAULTS_TIMEOUT:-10}
export FAULTS_TIMEOUT="$T"
# a case's own watchdog fires at 6 x T + 30 s; this one is the last resort
limit=$(awk -v t="$T" 'BEGIN { printf "%d", 6 * t + 60 }')
# sanitizer builds: make any report fatal and visible in the rank logs
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"

cases=$("$bin" --list | cut -f1) || { echo "run.sh: $bin --list failed" >&2; exit 2; }
if [ $# -gt 0 ]; then
	sel=
	for c in $cases; do
		for g in "$@"; do
			# shellcheck disable=SC2254
			case $c in $g) sel="$sel $c"; break ;; esac
		done
	done
	cases=$sel
fi
[ -n "$cases" ] || { echo "run.sh: no case matches: $*" >&2; exit 2; }

mkdir -p "$logdir" || exit 2
rm -f "$results"
{
	echo "# libdpg fault injection"
	echo
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -n)," \
		"CPU $(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -1)," \
		"$(nproc 2>/dev/null || echo '?') CPUs," \
		"DPG_TIMEOUT=${T} s, driver $bin${FAULTS_DRY:+, FAULTS_DRY=$FAULTS_DRY}." \
		"detect = CLOCK_MONOTONIC from the fault to each surviving rank's error return" \
		"(store cases: to the server closing the bad connection; intruders: their dpg_init)."
	echo
	echo "| fault | result | detect (ms) | outcome | example error |"
	echo "|---|---|---|---|---|"
} >"$results"

out=$(mktemp "${TMPDIR:-/tmp}/faults.XXXXXX") || exit 2
sum=$(mktemp "${TMPDIR:-/tmp}/faults-sum.XXXXXX") || exit 2
trap 'rm -f "$out" "$sum"' EXIT
t0=$(date +%s)
for c in $cases; do
	timeout -k 5 "$limit" "$bin" --md "$results" --logdir "$logdir" "$c" >"$out" 2>&1
	rc=$?
	if [ $rc = 124 ] || [ $rc = 137 ]; then
		echo "FAIL  $c  detect - ms  outcome: the driver hung; killed by run.sh after ${limit} s" >>"$out"
		echo "| $c | FAIL | - | the driver hung; killed by run.sh after ${limit} s | - |" >>"$results"
	elif [ $rc != 0 ] && ! grep -q "^FAIL " "$out"; then
		echo "FAIL  $c  detect - ms  outcome: the driver exited $rc" >>"$out"
		echo "| $c | FAIL | - | the driver exited $rc | - |" >>"$results"
	fi
	cat "$out"
	cat "$out" >>"$sum"
done
t1=$(date +%s)
nok=$(grep -c '^ok ' "$sum")
nfail=$(grep -c '^FAIL ' "$sum")
nskip=$(grep -c '^SKIP ' "$sum")
echo "faults: $nok ok, $nfail failed, $nskip skipped in $((t1 - t0)) s; table in $results, logs in $logdir"
[ "$nfail" = 0 ]
