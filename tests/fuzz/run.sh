#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# run.sh [SECONDS] - build every libFuzzer harness of tests/fuzz into a work
# dir and run each for SECONDS (default 60).  Prints, per harness,
#   ok NAME (EXECS execs, cov COV)   or   CRASH NAME ARTIFACT
# then "N ok, M crashed"; exits non-zero on any crash or build failure.
# A crash prints the harness's own message and a symbolized stack (tail of
# its log); its reproducer stays in the work dir (never in the source tree),
# which is then kept and named.
# Needs clang with libFuzzer (Debian: clang libclang-rt-14-dev), hwloc,
# libcrypto (libssl-dev), libxxhash (libxxhash-dev) and llvm-symbolizer for the stacks (Debian 12:
# llvm-14, /usr/bin/llvm-symbolizer-14).
# Environment: CC (default clang), FUZZ_WORKDIR (keep the build/corpora there
# instead of a temp dir that is removed when all is clean), FUZZ_ONLY="hostlist
# store" (subset), ASAN_SYMBOLIZER_PATH (default: the llvm-symbolizer found).
set -u

secs=${1:-60}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
CC=${CC:-clang}

case $secs in
''|*[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;;
esac

keep_work=0
if [ -n "${FUZZ_WORKDIR:-}" ]; then
	work=$FUZZ_WORKDIR
	mkdir -p "$work"
else
	work=$(mktemp -d "${TMPDIR:-/tmp}/dpg-fuzz.XXXXXX") || exit 2
	trap '[ "$keep_work" = 1 ] || rm -rf "$work"' EXIT
	trap 'exit 130' INT TERM
fi

# symbolized stacks: ASan/UBSan call llvm-symbolizer
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ]; then
	for s in llvm-symbolizer llvm-symbolizer-14 llvm-symbolizer-15 llvm-symbolizer-16; do
		if command -v "$s" >/dev/null 2>&1; then
			ASAN_SYMBOLIZER_PATH=$(command -v "$s")
			break
		fi
	done
fi
if [ -n "${ASAN_SYMBOLIZER_PATH:-}" ]; then
	export ASAN_SYMBOLIZER_PATH
else
	echo "warning: no llvm-symbolizer (Debian 12: apt-get install llvm-14): stacks will be raw addresses" >&2
fi

hwloc=$(pkg-config --cflags --libs hwloc 2>/dev/null || echo -lhwloc)
crypto=$(pkg-config --cflags --libs libcrypto 2>/dev/null || echo -lcrypto)
xxhash=$(pkg-config --cflags --libs libxxhash 2>/dev/null || echo -lxxhash)
L=$top/lib
cflags="-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -g -O1 -D_GNU_SOURCE -I$top/include -I$L/common -I$L/launch -I$L/runtime -I$L/runtime/cpu -I$L/train"
C="$L/common/err.c $L/common/parse.c $L/common/env.c $L/common/hostlist.c $L/common/taskdist.c $L/common/port.c $L/common/netif.c $L/common/fdio.c"
R=$L/runtime
STORE="$R/store_wire.c $R/store_table.c $R/store_ops.c $R/store_server.c $R/store_client.c $R/net.c $R/digest.c $R/thread.c"
LAUNCH="$L/launch/conf.c $L/launch/opts.c $L/launch/contract.c $L/launch/topo.c $L/launch/plan.c $L/launch/gpuvis.c $L/launch/bindenv.c $L/launch/cpuset.c $L/launch/plan_fmt.c $L/launch/requeue.c $L/launch/killfail.c $L/launch/topo_pack.c"

srcs() {
	case $1 in
	hostlist) echo "$C" ;;
	conf|contract|topo) echo "$C $LAUNCH $hwloc" ;;
	store) echo "$C $STORE $crypto -lpthread" ;;
	store_client) echo "$C $STORE $crypto -lpthread" ;;
	join) echo "$C $R/join.c -lm" ;;
	ckpt) echo "$C $L/train/ckpt.c $L/train/ckhash.c $L/train/fileio.c $L/train/zlayout.c $R/digest.c $crypto $xxhash" ;;
	gpulist) echo "$C $L/launch/gpuvis.c $L/launch/cpuset.c" ;;
	notice) echo "$C $STORE $R/cpu/shm.c $R/cpu/shm_seg.c $R/cpu/shm_direct.c $R/cpu/handoff.c $R/cpu/reduce.c $R/cpu/stamp.c $R/cpu/hello.c $crypto -lpthread -lrt" ;;
	esac
}

ok=0
bad=0
for name in ${FUZZ_ONLY:-hostlist conf contract store store_client topo join ckpt gpulist notice}; do
	bin=$work/fuzz_$name
	# shellcheck disable=SC2046,SC2086 # word splitting of flags and sources is wanted
	if ! $CC $cflags "$here/fuzz_$name.c" $(srcs "$name") -o "$bin" \
			>"$work/build_$name.log" 2>&1; then
		echo "CRASH $name (build failed, see below)"
		cat "$work/build_$name.log" >&2
		bad=$((bad + 1))
		continue
	fi
	corpus=$work/corpus_$name
	mkdir -p "$corpus"
	cp "$here/corpus/$name"/* "$corpus/" 2>/dev/null
	arts=$work/artifacts_$name
	mkdir -p "$arts"
	log=$work/fuzz_$name.log
	# TMPDIR: files a harness writes (fuzz_ckpt) stay in the work dir too
	TMPDIR=$work \
	ASAN_OPTIONS="symbolize=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
	LSAN_OPTIONS="suppressions=$here/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}" \
	UBSAN_OPTIONS="print_stacktrace=1:symbolize=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
		"$bin" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 \
		-print_final_stats=1 -artifact_prefix="$arts/" "$corpus" \
		>"$log" 2>&1
	rc=$?
	art=$(find "$arts" -type f 2>/dev/null | head -n 1)
	if [ "$rc" -ne 0 ] || [ -n "$art" ]; then
		keep_work=1
		echo "CRASH $name ${art:-"(no artifact, rc $rc)"} (log $log; replay: $bin ${art:-FILE})"
		# the harness's own message comes just before the sanitizer's report
		grep -v -e '^dpg store: ' -e '^#[0-9]' "$log" | tail -n 80 >&2
		bad=$((bad + 1))
		continue
	fi
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	cov=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -n 1 | sed 's/.*cov: \([0-9]*\).*/\1/')
	echo "ok $name (${execs:-?} execs, cov ${cov:-?})"
	ok=$((ok + 1))
done
echo "$ok ok, $bad crashed"
[ "$bad" -eq 0 ]
