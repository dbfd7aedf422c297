# SPDX-License-Identifier: BSD-3-Clause
# lib.sh - what the bench scripts share: the build tree holding the bench
# programs, the host header line, the skip line.  Sourced (POSIX sh); set
# bench_name and bench_top first.
#
# The programs are built by the build system (bench/local.mk), never here:
#   make -C BUILD bench-programs        (also part of `make extra-programs`)
# BUILD (environment) names the build tree; default: the first of
# build/werror and build/dev under the source tree that is configured.

# bench_build: set BUILD to an absolute, configured build tree, or fail.
bench_build() {
	if [ -z "${BUILD:-}" ]; then
		for d in "$bench_top/build/werror" "$bench_top/build/dev"; do
			if [ -f "$d/Makefile" ]; then BUILD=$d; break; fi
		done
	fi
	if [ -z "${BUILD:-}" ] || [ ! -f "$BUILD/Makefile" ]; then
		echo "$bench_name: no configured build tree (BUILD=${BUILD:-unset}; tried" \
			"build/werror and build/dev): configure one, then" \
			"'make -C DIR bench-programs'" >&2
		exit 2
	fi
	BUILD=$(cd "$BUILD" && pwd)
}

# bench_need VAR NAME: VAR = the path of the built BUILD/bench/NAME, or fail
# naming the make command that builds it.
bench_need() {
	if [ ! -x "$BUILD/bench/$2" ]; then
		echo "$bench_name: $BUILD/bench/$2 is not built: run" \
			"'make -C $BUILD bench-programs' (or extra-programs)" >&2
		exit 2
	fi
	eval "$1=\$BUILD/bench/\$2"
}

# bench_host: the line naming the machine and the date, first in every result
bench_host() {
	model=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
	[ -n "$model" ] || model=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo | head -1)
	# a hypervisor's model name can be as bare as "AMD EPYC": the family and
	# model numbers tell the generations apart (x86 /proc/cpuinfo only)
	fam=$(sed -n 's/^cpu family[[:space:]]*: *//p' /proc/cpuinfo 2>/dev/null | head -1)
	num=$(sed -n 's/^model[[:space:]]*: *//p' /proc/cpuinfo 2>/dev/null | head -1)
	[ -n "$fam" ] && [ -n "$num" ] && model="${model:-unknown} (family $fam model $num)"
	echo "host: CPU ${model:-unknown}, $(nproc) CPUs, $(date -u +%FT%TZ), kernel $(uname -r)"
}

# bench_skip WHAT WHY: a peer or a case that did not run, said on stdout
bench_skip() {
	echo "skip: $1: $2"
}

# bench_run_world W CMD...: W ranks of CMD on loopback (the backend of
# $BENCH_BACKEND, default cpu; on nccl rank r is on GPU r, LOCAL_RANK), a fixed
# test secret, DPG_TIMEOUT=${BENCH_TIMEOUT:-120}), each on the next port from
# $bench_port; rank 0's output on stdout, every rank's stderr on failure.
# Needs $tmp (a scratch directory).
bench_port=$((29000 + $$ % 2000))
bench_run_world() {
	w=$1; shift
	bench_port=$((bench_port + 1))
	pids=""
	r=0
	while [ $r -lt "$w" ]; do
		RANK=$r WORLD_SIZE=$w LOCAL_RANK=$r LOCAL_WORLD_SIZE=$w MASTER_ADDR=127.0.0.1 \
		MASTER_PORT=$bench_port DPG_SECRET=$(printf '%064d' 42) DPG_BACKEND=${BENCH_BACKEND:-cpu} \
		DPG_TIMEOUT=${BENCH_TIMEOUT:-120} OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} \
		"$@" > "$tmp/out.$r" 2> "$tmp/err.$r" &
		pids="$pids $!"
		r=$((r + 1))
	done
	rc=0
	for p in $pids; do wait "$p" || rc=1; done
	[ $rc = 0 ] || { cat "$tmp"/err.* >&2; return 1; }
	cat "$tmp/out.0"
}
