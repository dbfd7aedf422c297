#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# check_bench.sh - every bench script in smoke mode (tiny sizes, a few
# iterations, peers only where installed), then a check that what it printed
# parses: the host line, and each result table with its columns and numbers.
# The entry is `make check-bench` (a CI stage of scripts/test.sh); seconds long.
#
# Usage: BUILD=DIR bench/check_bench.sh     (DIR: a build tree after
#        `make bench-programs`; default build/werror or build/dev)
# Output: one line per script (ok / FAIL / skip: WHY), its output under
# DIR/bench-smoke/NAME.out; exit 1 if any script failed or printed a table
# that does not parse.
set -u
here=$(cd "$(dirname "$0")" && pwd)
bench_top=$(cd "$here/.." && pwd)
bench_name=check_bench.sh
. "$here/lib.sh"
bench_build
logs=$BUILD/bench-smoke
mkdir -p "$logs"
failed=0

# table FILE HEADER_RE MIN_ROWS COL...: the table whose header line matches
# HEADER_RE has at least MIN_ROWS rows, each with the header's number of
# '|'-separated cells, and in each numbered COL (from 1) a number (its first
# word: "4.99 [4.1-5.2]" passes)
table() {
	f=$1 re=$2 min=$3
	shift 3
	awk -v re="$re" -v min="$min" -v cols="$*" '
	function cells(line, out,   n, i, k) {
		n = split(line, raw, "|"); k = 0
		for (i = 1; i <= n; i++) {
			if ((i == 1 || i == n) && raw[i] ~ /^[ \t]*$/) continue
			gsub(/^[ \t]+|[ \t]+$/, "", raw[i]); out[++k] = raw[i]
		}
		return k
	}
	BEGIN { nc = split(cols, want, " ") }
	state == 0 && $0 ~ re { state = 1; width = cells($0, h); next }
	state == 1 && /^[|:+ -]+$/ && /---/ { next }
	state == 1 && /\|/ {
		if (cells($0, c) != width) { printf "row %d: %d cells, header has %d: %s\n", rows + 1, cells($0, c), width, $0; bad = 1 }
		for (j = 1; j <= nc; j++) {
			split(c[want[j]], w, " ")
			if (w[1] !~ /^-?[0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?x?$/) {
				printf "row %d column \"%s\": \"%s\" is not a number\n", rows + 1, h[want[j]], c[want[j]]; bad = 1
			}
		}
		rows++; next
	}
	state == 1 { state = 2 }
	END {
		if (state == 0) { printf "no table with a header matching /%s/\n", re; exit 1 }
		if (rows < min) { printf "table /%s/: %d rows, want at least %d\n", re, rows, min; exit 1 }
		exit bad
	}' "$f"
}

# has FILE RE WHAT: a line matching RE is there
has() {
	grep -Eq "$2" "$1" || { echo "missing: $3 (/$2/)"; return 1; }
}

host_line='^host: CPU .+, [0-9]+ CPUs, [0-9]{4}-[0-9]{2}-[0-9]{2}T'

check_optim() {
	has "$1" "$host_line" "the host line" &&
	table "$1" '^\| kernel \| B/elem \| median GB/s' 10 2 3 4 5 &&
	has "$1" '^\| adamw \| 28 \|' "the adamw row" &&
	has "$1" '^\| same-pattern sgd \| 20 \|' "the same-pattern sgd row" &&
	has "$1" '^\| adamw \[default\] \|' "the default variant's row" &&
	table "$1" '^\| ratio \(median\) \| value \|' 5 2 &&
	has "$1" '^\| adamw / same-pattern add \| [0-9.]+ \|' "the adamw ratio" &&
	has "$1" '^\| sgd / same-pattern sgd \| [0-9.]+ \|' "the sgd ratio"
}

# column COL (named in the header matching RE) of the rows starting with
# "| ROW |" is a number in each such row, and there is at least one
column_num() {	# file re col row
	awk -v re="$2" -v col="$3" -v row="$4" '
	$0 ~ re { n = split($0, h, "|"); for (i = 1; i <= n; i++) { gsub(/^ +| +$/, "", h[i]); if (h[i] == col) at = i } intable = at > 0; next }
	!/^\|/ { intable = 0 }
	intable && index($0, "| " row " |") == 1 { split($0, c, "|"); gsub(/^ +| +$/, "", c[at])
		if (c[at] !~ /^[0-9]+(\.[0-9]+)?$/) { printf "%s row: column \"%s\" is \"%s\"\n", row, col, c[at]; bad = 1 }
		rows++ }
	END { if (!at) { printf "no column \"%s\" in a table /%s/\n", col, re; exit 1 }
	      if (!rows) { printf "no %s row under /%s/\n", row, re; exit 1 }
	      exit bad }' "$1"
}

check_coll() {
	has "$1" "$host_line" "the host line" &&
	table "$1" '^\| size \| dpg shm n=2 \|' 3 2 &&
	table "$1" '^\| op \| n \| size \| reference busbw \| dpg / ref \|' 6 4 5 &&
	column_num "$1" '^\| op \| n \| size \| reference busbw \| dpg / ref \|' "kernel-copy ref" allgather &&
	table "$1" '^\| op \| n \| size \| cross-CPU ref busbw \| dpg / ref \|' 2 4 5 &&
	table "$1" '^\| op \| transport \| n \| dpg wall / CPU ms \|' 2 3 4 &&
	table "$1" '^\| op \| n \| size \| reference busbw \(wait\) \| ring reference \(wait\) \|' 3 2 4 5 6 7 &&
	has "$1" '^## cells below a peer' "the cells below a peer" &&
	# cells below a peer (the smoke's noise makes some) are re-measured alone
	if has "$1" '^\| peer \| op \| transport \| n \| size \| dpg \| peer \| ratio \|' "" >/dev/null; then
		has "$1" '^re-measured alone \(cells below a peer, [0-9]+ round\(s\) each\): [0-9]+ of [0-9]+ still below, .*; paired by round: [0-9]+ below, worst [0-9.]+x' \
			"the re-measured headline" &&
		table "$1" '^\| peer \| op \| transport \| n \| size \| ratio in the table \|' 1 4 6 7 8 9 10 12
	fi &&
	for peer in "Open MPI" Gloo; do
		if has "$1" "^skip: peer $peer: " "" >/dev/null; then continue; fi
		has "$1" "^worst vs $peer: [0-9.]+x \(" "the worst cell against $peer" || return 1
	done
}

check_store() {
	has "$1" "$host_line" "the host line" &&
	table "$1" '^ *N \| +dpg \(s\) \| +TCPStore \(s\)' 2 1 2 &&
	if has "$1" '^skip: peer PyTorch TCPStore: ' "" >/dev/null; then :; else
		table "$1" '^ *N \| +dpg \(s\) \| +TCPStore \(s\)' 2 1 2 3 4
	fi
}

check_store_scale() {
	has "$1" "$host_line" "the host line" &&
	has "$1" '^# store at scale: .*somaxconn [0-9]+' "the limits line" &&
	table "$1" '^\| +ranks \| layout +\| +dpg s \| +TS ' 4 1 3 8 9 10 11 12 13 &&
	if has "$1" '^skip: peer PyTorch TCPStore \(PYTHON\): ' "" >/dev/null; then :; else
		table "$1" '^\| +ranks \| layout +\| +dpg s \| +TS ' 4 4 5
	fi &&
	if has "$1" '^skip: peer PyTorch TCPStore \(PYTHON2\): ' "" >/dev/null; then :; else
		table "$1" '^\| +ranks \| layout +\| +dpg s \| +TS ' 4 6 7
	fi
}

check_zero() {
	has "$1" "$host_line" "the host line" &&
	table "$1" '^\| world \| stage \| dpg step ms \| stage / stage 1' 6 1 2 3 4 7 8 9 &&
	if has "$1" '^skip: peer PyTorch ZeRO-1: ' "" >/dev/null; then :; else
		has "$1" '^\| 1 \| 1 \| [0-9.]+ \| 1\.00 \| [0-9.]+ \| [0-9.]+ \|' "torch's world-1 figures"
	fi
}

check_ckpt() {
	has "$1" "$host_line" "the host line" &&
	table "$1" '^\| world \| GB \| raw write GB/s \| save GB/s' 2 1 2 3 4 5 6 7 8 9 10 11 &&
	has "$1" '^\| 1 \| [0-9.]+ \|' "the world-1 row" &&
	has "$1" '^\| 2 \| [0-9.]+ \|' "the world-2 row"
}

# the requeue protocol's question per step: dpg_stop_requested, dpg_barrier
# and a 4-byte all-reduce on shm and tcp at world 2, the torch peer if there
check_stop() {
	has "$1" "$host_line" "the host line" &&
	table "$1" '^\| world \| path \| call \| us/call \|' 6 1 4 &&
	has "$1" '^\| 2 \| shm \| dpg_stop_requested \| [0-9.]+ \|' "the shm dpg_stop_requested row" &&
	has "$1" '^\| 2 \| tcp \| dpg_stop_requested \| [0-9.]+ \|' "the tcp dpg_stop_requested row" &&
	if has "$1" '^skip: peer torch: ' "" >/dev/null; then :; else
		has "$1" '^\| 2 \| tcp \(gloo, loopback\) \| torch gloo all_reduce\(MAX\) 1 x int32 \| [0-9.]+ \|' "the torch peer's row"
	fi
}

# the GPU benches (bench/gpu_bench.sh): the collectives' table with a row per
# op, the optimizer kernels against the copy, train's GPU/CPU line
check_gpu() {
	has "$1" "$host_line" "the host line" &&
	has "$1" '^GPU: .+' "the GPU line" &&
	table "$1" '^\| op \| size \| dpg us \| nccl us' 3 3 4 5 6 9 &&
	for op in allreduce reduce_scatter all_gather; do
		has "$1" "^\\| $op \\| " "the $op rows" || return 1
	done &&
	table "$1" '^\| kernel \| B/elem \| elements' 2 2 3 4 5 6 7 &&
	table "$1" '^\| dpg_zero_step' 4 2 3 4 5 &&
	if has "$1" '^SKIPPED: train on the GPU' "" >/dev/null; then :; else
		table "$1" '^\| train arguments \| ranks \| GPU samples/s' 1 2 3 4 5
	fi
}

# smoke NAME SHELL CHECK: run bench/NAME.sh --smoke, then CHECK its output
smoke() {
	name=$1 sh=$2 check=$3 t0=$(date +%s)
	BUILD=$BUILD "$sh" "$here/$name.sh" --smoke >"$logs/$name.out" 2>&1
	rc=$?
	# 77 with a "SKIPPED: WHY" line: the bench cannot run here (no GPU)
	if [ $rc = 77 ] && why=$(sed -n 's/^SKIPPED: //p' "$logs/$name.out" | head -1) &&
	   [ -n "$why" ]; then
		bench_skip "$name.sh" "$why"
		return
	fi
	if [ $rc != 0 ]; then
		echo "FAIL $name.sh --smoke: exit status $rc ($(($(date +%s) - t0)) s):"
		tail -n 20 "$logs/$name.out" | sed 's/^/  | /'
		failed=1
		return
	fi
	if ! why=$($check "$logs/$name.out"); then
		echo "FAIL $name.sh --smoke: its output does not parse:"
		echo "$why" | sed 's/^/  | /'
		failed=1
		return
	fi
	echo "ok   $name.sh --smoke ($(($(date +%s) - t0)) s, output $logs/$name.out)"
	grep '^skip: ' "$logs/$name.out" | sort -u | sed 's/^/     /'
}

bench_host
smoke optim_bench sh check_optim
smoke coll_bench sh check_coll
smoke store_bench bash check_store
smoke store_scale bash check_store_scale
smoke zero_bench sh check_zero
smoke ckpt_bench sh check_ckpt
smoke stop_bench sh check_stop
smoke gpu_bench sh check_gpu
# the launch overhead needs root and a Slurm minicluster (tests/e2e): too long
# for this stage; BENCH_LAUNCH=1 runs it in smoke mode too (its own checks)
if [ "${BENCH_LAUNCH:-0}" = 1 ]; then
	if BUILD=$BUILD bash "$here/launch_overhead.sh" --smoke >"$logs/launch_overhead.out" 2>&1 &&
	   grep -Eq '^ratio plugin/empty: median [0-9.]+' "$logs/launch_overhead.out"; then
		echo "ok   launch_overhead.sh --smoke"
	else
		echo "FAIL launch_overhead.sh --smoke:"; tail -n 20 "$logs/launch_overhead.out" | sed 's/^/  | /'
		failed=1
	fi
else
	bench_skip "launch_overhead.sh" "needs root and a Slurm minicluster (the e2e stage's); BENCH_LAUNCH=1 runs it"
fi
[ $failed = 0 ] && echo "check-bench: all bench scripts ran and their tables parse"
exit $failed
