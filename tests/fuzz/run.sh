#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# run.sh [SECONDS] - build every libFuzzer harness of tests/fuzz into a work
# dir and run each for SECONDS (default 60).  Prints, per harness,
#   ok NAME (EXECS execs, cov COV)   or   CRASH NAME ARTIFACT
# then "N ok, M crashed"; exits non-zero on any crash or build failure.
# A crash prints the harness's own message and a symbolized stack (tail of
# its log); its reproducer stays in the work dir (never in the source tree),
# which is then kept and named.  The library is built once, every C file
# under lib/ but the GPU module's, into an instrumented archive they link.
# Needs clang with libFuzzer (Debian: clang libclang-rt-14-dev), hwloc,
# libcrypto (libssl-dev), libxxhash (libxxhash-dev) and llvm-symbolizer for the stacks (Debian 12:
# llvm-14, /usr/bin/llvm-symbolizer-14).
# Environment: CC (default clang), FUZZ_WORKDIR (keep the build/corpora there
# instead of a temp dir that is removed when all is clean), FUZZ_ONLY="hostlist
# store" (subset), FUZZ_PAR (harnesses fuzzed at once; default the CPUs, at
# most 4), ASAN_SYMBOLIZER_PATH (default: the llvm-symbolizer found).
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
san="address,undefined -fno-sanitize-recover=undefined -g -O1 -D_GNU_SOURCE -I$top/include -I$L/common -I$L/launch -I$L/runtime -I$L/runtime/cpu -I$L/train"
cflags="-fsanitize=fuzzer,$san"
libs="$hwloc $crypto $xxhash -lpthread -lrt -lm -ldl"

# The library, every C source under lib/ but the GPU module's (lib/cuda and
# lib/runtime/nccl, built only with nvcc and NCCL), instrumented once into an
# archive; each harness links what it uses.  No list of files to keep in step
# with the tree: a helper that moves is found where it went.
lib_archive() {
	mkdir -p "$work/lib" || return 1
	find "$L/common" "$L/launch" "$L/runtime" "$L/train" -name '*.c' \
		! -path "$L/runtime/nccl/*" | sort >"$work/lib/sources" || return 1
	pids=
	i=0
	while read -r src; do
		obj=$work/lib/$(echo "${src#"$L"/}" | tr / _).o
		# shellcheck disable=SC2086 # word splitting of flags is wanted
		$CC -fsanitize=fuzzer-no-link,$san -c "$src" -o "$obj" >"$obj.log" 2>&1 &
		pids="$pids $!"
		i=$((i + 1))
		if [ $((i % ${FUZZ_JOBS:-4})) = 0 ]; then
			for p in $pids; do wait "$p" || return 1; done
			pids=
		fi
	done <"$work/lib/sources"
	for p in $pids; do wait "$p" || return 1; done
	rm -f "$work/libdpg-fuzz.a"
	ar rcs "$work/libdpg-fuzz.a" "$work"/lib/*.o
}

ok=0
bad=0
if ! lib_archive; then
	echo "CRASH (the library did not build for fuzzing, see below)"
	for log in "$work"/lib/*.o.log; do
		[ -s "$log" ] && { echo "== ${log%.o.log}"; cat "$log"; } >&2
	done
	exit 1
fi
# one harness: build it, fuzz it for $secs; its verdict line into
# $work/verdict_NAME (stdout) and $work/detail_NAME (what goes to stderr)
fuzz_one() {
	name=$1
	bin=$work/fuzz_$name
	out=$work/verdict_$name
	det=$work/detail_$name
	: >"$det"
	# shellcheck disable=SC2046,SC2086 # word splitting of flags and sources is wanted
	if ! $CC $cflags "$here/fuzz_$name.c" "$work/libdpg-fuzz.a" $libs -o "$bin" \
			>"$work/build_$name.log" 2>&1; then
		echo "CRASH $name (build failed, see below)" >"$out"
		cat "$work/build_$name.log" >"$det"
		return
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
		echo "CRASH $name ${art:-"(no artifact, rc $rc)"} (log $log; replay: $bin ${art:-FILE})" >"$out"
		# the harness's own message comes just before the sanitizer's report
		grep -v -e '^dpg store: ' -e '^#[0-9]' "$log" | tail -n 80 >"$det"
		return
	fi
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	cov=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -n 1 | sed 's/.*cov: \([0-9]*\).*/\1/')
	echo "ok $name (${execs:-?} execs, cov ${cov:-?})" >"$out"
}

# FUZZ_PAR harnesses at a time (default: the CPUs, at most 4), each still
# fuzzed for $secs on a CPU of its own (libFuzzer runs one thread); the
# verdicts are printed in the list's order
par=${FUZZ_PAR:-$(nproc 2>/dev/null || echo 1)}
case $par in ''|*[!0-9]*|0) par=1 ;; esac
[ "$par" -gt 4 ] && par=4
names=${FUZZ_ONLY:-hostlist conf contract store store_client topo join ckpt gpulist notice}
pids=
i=0
for name in $names; do
	fuzz_one "$name" &
	pids="$pids $!"
	i=$((i + 1))
	if [ $((i % par)) = 0 ]; then
		for p in $pids; do wait "$p"; done
		pids=
	fi
done
for p in $pids; do wait "$p"; done
for name in $names; do
	if [ ! -s "$work/verdict_$name" ]; then
		echo "CRASH $name (no verdict: the runner itself failed)"
		bad=$((bad + 1))
		continue
	fi
	cat "$work/verdict_$name"
	case $(cat "$work/verdict_$name") in
	ok\ *) ok=$((ok + 1)) ;;
	*)	keep_work=1
		cat "$work/detail_$name" >&2
		bad=$((bad + 1)) ;;
	esac
done
echo "$ok ok, $bad crashed"
[ "$bad" -eq 0 ]
