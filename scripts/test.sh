#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test.sh - the whole dpg test suite on a fresh Debian 12 machine (what CI runs):
# deps, the PyPI client environment (scripts/pyenv.sh), -Werror build + unit
# tests, every bench script in smoke mode (make check-bench), packages (built
# without their unit tests, which the unit stage ran), ASan+UBSan unit tests,
# libFuzzer (60 s per harness), valgrind, fault injection (tests/faults), man
# pages, e2e through a real Slurm minicluster (loopback and network-namespace
# modes), sbatch templates, distcheck.
# Usage: scripts/test.sh            Env: DPG_SKIP_DEPS=1, DPG_STAGES="werror asan ...",
#   DPG_PKG_NOCHECK=0 (unit tests in the package build too), DPG_VALGRIND_JOBS=N
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
logs=$top/build/logs
mkdir -p "$logs"
stages=${DPG_STAGES:-"deps pyenv bootstrap werror unit bench pkg asan fuzz valgrind faults man e2e e2e-netns templates distcheck"}
declare -A result seconds
failed=0

werror_flags="-O2 -g -Wall -Wextra -Werror"
san_flags="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"

run_stage() {
	local name=$1; shift
	local t0=$SECONDS
	printf '== %-10s ' "$name"
	if "$@" >"$logs/$name.log" 2>&1; then
		result[$name]=ok
	else
		result[$name]=FAIL; failed=1
	fi
	seconds[$name]=$((SECONDS - t0))
	echo "${result[$name]} (${seconds[$name]}s, log: build/logs/$name.log)"
	if [ "${result[$name]}" = FAIL ]; then tail -n 40 "$logs/$name.log" | sed 's/^/   | /'; fi
}

st_deps() { [ "${DPG_SKIP_DEPS:-0}" = 1 ] || scripts/deps.sh; }
st_pyenv() { scripts/pyenv.sh >"$logs/pyenv.path" && cat "$logs/pyenv.path"; }
st_bootstrap() { autoreconf -fi; }
st_werror() (
	mkdir -p build/werror && cd build/werror &&
	../../configure CFLAGS="$werror_flags" && make -j2 && make -j2 extra-programs
)
st_unit() { make -C build/werror -j2 check || { find build/werror/tests/unit -name '*.log' -exec cat {} +; return 1; }; }
st_bench() { make -C build/werror check-bench; }
st_asan() (
	mkdir -p build/asan && cd build/asan &&
	../../configure --without-slurm --without-cuda CFLAGS="$san_flags" LDFLAGS="-fsanitize=address,undefined" &&
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 make -j2 check ||
	{ find tests/unit -name '*.log' -exec cat {} +; exit 1; }
)
# memcheck on every unit test binary.  memcheck runs a process's threads
# on one CPU, so the tests that run in one process go DPG_VALGRIND_JOBS
# (default 2) at a time; those whose ranks are processes that wait for each
# other under deadlines (vg_alone: 424 of the 569 s of a serial run on 2
# vCPUs) run one at a time after them (beside another test, test_shm's ranks
# missed the store's 2 s authentication deadline).  Each test's findings go
# to the log in the list's order.
vg_alone="test_cpu_backend test_init test_report test_shm"
vg_file() { echo "$2/$(echo "$1" | tr / _)"; }	# vg_file TEST DIR: DIR/N
vg_one() { # vg_one TEST DIR: DIR/N.verdict and DIR/N.err (memcheck's stderr)
	local f
	f=$(vg_file "$1" "$2")
	if build/werror/libtool --mode=execute valgrind -q --error-exitcode=99 \
		--suppressions=tests/unit/valgrind.supp --leak-check=full \
		--errors-for-leak-kinds=definite,indirect "$1" >/dev/null 2>"$f.err"; then
		echo "valgrind clean: $1" >"$f.verdict"
	else
		echo "valgrind FAILED: $1 (exit $?)" >"$f.verdict"
	fi
}
st_valgrind() {
	local t s list=() alone=() running=0 rc=0 f
	local dir=$logs/valgrind.d jobs=${DPG_VALGRIND_JOBS:-2}
	rm -rf "$dir" && mkdir -p "$dir" || return 1
	mapfile -t list < <(find build/werror/tests/unit -name 'test_*' -type f -perm -u+x \
		! -name '*.*' ! -path '*/.libs/*' | sort)
	[ ${#list[@]} -gt 0 ] || { echo "valgrind: no unit test binaries found"; return 1; }
	for t in "${list[@]}"; do
		for s in $vg_alone; do [ "${t##*/}" = "$s" ] && { alone+=("$t"); continue 2; }; done
		if [ $running -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
		vg_one "$t" "$dir" &
		running=$((running + 1))
	done
	wait
	for t in "${alone[@]}"; do vg_one "$t" "$dir"; done
	for t in "${list[@]}"; do
		f=$(vg_file "$t" "$dir")
		cat "$f.err" 2>/dev/null
		if [ -s "$f.verdict" ]; then cat "$f.verdict"; else echo "valgrind FAILED: $t (no verdict)"; fi
		grep -q '^valgrind clean' "$f.verdict" 2>/dev/null || rc=1
	done
	echo "valgrind: ${#list[@]} test binaries (${#alone[@]} alone, the rest $jobs at a time)"
	return $rc
}
# the packages are built without their unit tests (DEB_BUILD_OPTIONS=nocheck):
# the unit stage ran the same tests on the same tree (in the package build,
# serially, they took ~160 of its ~190 s); DPG_PKG_NOCHECK=0 runs them there too
st_pkg() { DPG_PKG_NOCHECK=${DPG_PKG_NOCHECK:-1} scripts/pkg-test.sh; }
st_fuzz() { tests/fuzz/run.sh "${DPG_FUZZ_SECONDS:-60}"; }
st_man() { make -C build/werror check-man; }
st_faults() { make -C build/werror check-faults && cat build/werror/faults.md; }
# the client cases run the environment's python (skipped, and counted, without it)
pyenv() { DPG_PYENV=$(cat "$logs/pyenv.path" 2>/dev/null || scripts/pyenv.sh --print 2>/dev/null) "$@"; }
st_templates() { pyenv make -C build/werror check-templates; }
st_e2e() { pyenv make -C build/werror check-e2e; }
st_e2e_netns() { pyenv make -C build/werror check-e2e-netns; }
# (-j2 reaches the tarball's own build and unit tests: 103 s instead of 193)
st_distcheck() { make -C build/werror -j2 distcheck; }

for s in $stages; do
	case $s in
	deps) run_stage deps st_deps ;;
	pyenv) run_stage pyenv st_pyenv ;;
	bootstrap) run_stage bootstrap st_bootstrap ;;
	werror) run_stage werror st_werror ;;
	unit) run_stage unit st_unit ;;
	bench) run_stage bench st_bench ;;
	asan) run_stage asan st_asan ;;
	valgrind) run_stage valgrind st_valgrind ;;
	pkg) run_stage pkg st_pkg ;;
	fuzz) run_stage fuzz st_fuzz ;;
	man) run_stage man st_man ;;
	faults) run_stage faults st_faults ;;
	templates) run_stage templates st_templates ;;
	e2e) run_stage e2e st_e2e ;;
	e2e-netns) run_stage e2e-netns st_e2e_netns ;;
	distcheck) run_stage distcheck st_distcheck ;;
	*) echo "unknown stage $s" >&2; exit 2 ;;
	esac
	# later stages need the build: stop early if it broke
	case $s in deps|bootstrap|werror) [ "${result[$s]}" = ok ] || break ;; esac
done

echo
echo "dpg test summary"
for s in $stages; do
	printf '  %-10s %-5s %ss\n' "$s" "${result[$s]:-skip}" "${seconds[$s]:-0}"
done
grep -h '^# \(TOTAL\|PASS\|FAIL\|ERROR\)' build/werror/test-suite.log 2>/dev/null | sed 's/^/  unit: /' || true
for s in e2e e2e-netns templates faults; do
	[ -f "$logs/$s.log" ] || continue
	printf '  %-10s %s\n' "$s:" "$(grep -hE '(passed|ok), [0-9]+ failed' "$logs/$s.log" | tail -1 |
		sed 's/^faults: //')"
done
# every skip, counted, with its reason: cmocka skip() inside a passing test
# binary, and SKIP lines of the e2e, template and fault suites
skips=$( { find build/werror/tests -name '*.log' -exec grep -H '^\[  SKIPPED \]' {} + 2>/dev/null | grep -v 'listed below' |
	   sed 's|^build/werror/\(.*\)\.log:\[  SKIPPED \] *|unit \1: |'
	   for s in e2e e2e-netns templates faults; do
		[ -f "$logs/$s.log" ] && grep -h '^SKIP ' "$logs/$s.log" | sed "s/^SKIP /$s: /"
	   done; } | sort -u)
nskip=$(printf '%s' "$skips" | grep -c . || true)
echo "  skipped: $nskip"
[ -z "$skips" ] || printf '%s\n' "$skips" | sed 's/^/    /'
reasons=$(find build/werror/tests -name '*.log' -exec grep -h 'absent: skipped\|^SKIP test_' {} + 2>/dev/null | sort | uniq -c | sort -rn | head -5)
[ -z "$reasons" ] || printf '%s\n' "$reasons" | sed 's/^ */    why (unit): /'
[ $failed = 0 ] && echo "ALL PASSED" || echo "SOME STAGES FAILED"
exit $failed
