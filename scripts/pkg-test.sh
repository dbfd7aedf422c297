#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# pkg-test.sh - the packaging stage of CI: build dpg's .deb packages from a clean
# copy of the tree, unpack them into a scratch root (the system is not touched),
# and smoke-test the installed files: dpg-plan, the plugin's exports and library
# dependencies, pkg-config, and examples/allreduce_demo.c and examples/train.c
# built out of tree.
# Usage: scripts/pkg-test.sh        (root for the apt-get step; Debian 12)
# Env: DPG_SKIP_DEPS=1      do not apt-get install the build dependencies
#      DPG_PKG_NOCHECK=1    skip the unit tests inside the package build
#      DPG_PKG_LINTIAN=1    also run lintian (must be installed); E: tags fail
#      DPG_PKG_OUT=DIR      copy the built .debs there
#      DPG_PKG_KEEP=1       keep the scratch directory (printed at the end)
#      DPG_PKG_CUDA=1       also build libdpg0-cuda, the GPU module (build profile
#                           pkg.dpg.cuda; CUDA_HOME, default /usr/local/cuda, with
#                           NCCL); the build-dependency check is skipped (-d)
#                           since NVIDIA's toolkit is often not installed as .debs
# By default the packages are built without CUDA (what CI builds): libdpg0 is
# the same either way and never depends on CUDA or NCCL.
# shellcheck disable=SC2317,SC2016,SC2001  # check runs functions and eval strings
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)
pass=0 fail=0

ok() { pass=$((pass + 1)); echo "ok   - $*"; }
ko() { fail=$((fail + 1)); echo "FAIL - $*"; }
check() { # check DESCRIPTION COMMAND...
	local what=$1; shift
	if "$@"; then ok "$what"; else ko "$what"; fi
}
finish() {
	echo "pkg-test: $pass passed, $fail failed"
	[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
	exit $?
}

# ------------------------------------------------------------ build deps
deps=(build-essential debhelper dh-autoreconf dpkg-dev autoconf automake libtool
      pkg-config libslurm-dev libhwloc-dev libssl-dev libcmocka-dev binutils)
if [ "${DPG_SKIP_DEPS:-0}" != 1 ]; then
	missing=()
	for p in "${deps[@]}"; do
		grep -q 'install ok installed' <<<"$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" ||
			missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		if [ "$(id -u)" != 0 ]; then
			ko "build deps: missing ${missing[*]} (run as root, or install them)"; finish
		fi
		echo "pkg-test: installing ${missing[*]}"
		export DEBIAN_FRONTEND=noninteractive
		{ apt-get -o DPkg::Lock::Timeout=600 update -qq &&
		  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
			"${missing[@]}"; } >/dev/null ||
			{ ko "apt-get install ${missing[*]}"; finish; }
	fi
fi
command -v dpkg-buildpackage >/dev/null || { ko "dpkg-buildpackage not found"; finish; }

# ------------------------------------------------------------ clean copy
work=$(mktemp -d /tmp/dpg-pkg.XXXXXX)
[ "${DPG_PKG_KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
version=$(cd "$top" && dpkg-parsechangelog -S Version)
upver=${version%-*}
src=$work/dpg-$upver
mkdir -p "$src"
# what git would commit (tracked + untracked-but-not-ignored files, so uncommitted
# work is tested too), without build/, configure, objects or other ignored output
if git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	(cd "$top" && git ls-files -z --cached --others --exclude-standard |
		while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
		tar --null -T - -cf -) | tar -xf - -C "$src"
else
	tar -C "$top" --exclude=./build --exclude=./autom4te.cache --exclude='*.o' \
		--exclude='*.lo' --exclude='*.la' --exclude=.libs --exclude=.deps -cf - . |
		tar -xf - -C "$src"
fi
check "clean copy of the tree has debian/ and configure.ac" \
	test -x "$src/debian/rules" -a -f "$src/configure.ac"

# ------------------------------------------------------------ build the .debs
t0=$SECONDS
opts="${DEB_BUILD_OPTIONS:-} parallel=$jobs"
[ "${DPG_PKG_NOCHECK:-0}" = 1 ] && opts="$opts nocheck"
read -r -a words <<<"$opts"; opts="${words[*]}"	# DEB_BUILD_OPTIONS rejects empty words
cuda=${DPG_PKG_CUDA:-0}
profiles=${DEB_BUILD_PROFILES:-}
bopts=(-us -uc -b)
if [ "$cuda" = 1 ]; then
	profiles="$profiles pkg.dpg.cuda"
	bopts+=(-d)
fi
read -r -a words <<<"$profiles"; profiles="${words[*]}"
if (cd "$src" && DEB_BUILD_OPTIONS="$opts" DEB_BUILD_PROFILES="$profiles" \
	dpkg-buildpackage "${bopts[@]}" >"$work/build.log" 2>&1); then
	ok "DEB_BUILD_OPTIONS='$opts' dpkg-buildpackage ${bopts[*]}${profiles:+ (profiles: $profiles)} ($((SECONDS - t0))s)"
else
	ko "dpkg-buildpackage ${bopts[*]} (log: $work/build.log)"
	tail -n 40 "$work/build.log" | sed 's/^/   | /'
	DPG_PKG_KEEP=1; trap - EXIT; finish
fi
grep -E '^(PASS|FAIL|ERROR|SKIP):|^# (TOTAL|PASS|FAIL)' "$work/build.log" | tail -n 3 | sed 's/^/   | /'

arch=$(dpkg-architecture -qDEB_HOST_ARCH)
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
pkgs=(slurm-spank-dpg libdpg0 libdpg-dev dpg-tools)
[ "$cuda" = 1 ] && pkgs+=(libdpg0-cuda)
root=$work/root
mkdir -p "$root"
for p in "${pkgs[@]}"; do
	deb=$work/${p}_${version}_${arch}.deb
	if [ -f "$deb" ]; then
		check "built and unpacked $p" dpkg -x "$deb" "$root"
	else
		ko "$p: $deb not built"
	fi
done
if [ -n "${DPG_PKG_OUT:-}" ]; then
	mkdir -p "$DPG_PKG_OUT" && cp "$work"/*.deb "$DPG_PKG_OUT"/ && echo "   | .debs copied to $DPG_PKG_OUT"
fi

# ------------------------------------------------------------ contents
libdir=$root/usr/lib/$ma
plugdir=$libdir/slurm-wlm
contents_ok() {
	local f rc=0
	for f in "$plugdir/dpg.so" "$libdir/libdpg.so.0" "$libdir/libdpg.so" \
		"$libdir/pkgconfig/dpg.pc" "$root/usr/include/dpg.h" "$root/usr/include/dpg_zero.h" "$root/usr/bin/dpg-plan" \
		"$root/usr/share/dpg/plugstack.conf.d/dpg.conf"; do
		[ -e "$f" ] || { echo "   | missing ${f#"$root"}"; rc=1; }
	done
	# no libtool archives, no static library, nothing enabled in /etc
	for f in $(find "$root" \( -name '*.la' -o -name '*.a' \) -print) $(find "$root/etc" -type f 2>/dev/null); do
		echo "   | unexpected ${f#"$root"}"; rc=1
	done
	return "$rc"
}
check "packages hold the plugin, library, header, dpg.pc, dpg-plan, snippet (no .la/.a, nothing in /etc)" contents_ok
nman=$(find "$root/usr/share/man" -type f 2>/dev/null | wc -l)
echo "   | man pages packaged: $nman"

slurm_dep_ok() {
	local dep have major
	dep=$(dpkg-deb -f "$work/slurm-spank-dpg_${version}_${arch}.deb" Depends)
	have=$(dpkg-query -W -f='${Version}' libslurm-dev)
	major=$(echo "$have" | sed -E 's/^([0-9]+:)?([0-9]+\.[0-9]+).*/\2/')
	echo "   | Depends: $dep"
	echo "$dep" | grep -q "slurm-wlm-basic-plugins (>= $major~)" &&
		echo "$dep" | grep -q 'slurm-wlm-basic-plugins (<< '
}
check "slurm-spank-dpg depends on the Slurm major it was built for" slurm_dep_ok

# ------------------------------------------------------------ dpg-plan
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
plan=$root/usr/bin/dpg-plan
expand_ok() { [ "$("$plan" --expand 'n[1-3]' | tr '\n' ' ')" = "n1 n2 n3 " ]; }
check "dpg-plan --expand 'n[1-3]' prints n1 n2 n3" expand_ok
json_ok() {
	local out
	out=$(env -i PATH=/usr/bin:/bin "$plan" --nodelist 'gpu[01-02]' --ntasks 4 --job-id 42 --json) || return 1
	if command -v python3 >/dev/null; then
		printf '%s' "$out" | python3 -c 'import json,sys; json.load(sys.stdin)' || return 1
	fi
	printf '%s' "$out" | grep -q 'MASTER_PORT' && printf '%s' "$out" | grep -q 'gpu01'
}
check "dpg-plan --nodelist 'gpu[01-02]' --ntasks 4 --json is valid JSON with the contract" json_ok
check "dpg-plan --plugstack reads the packaged snippet" \
	eval '"$plan" --plugstack "$root/usr/share/dpg/plugstack.conf.d/dpg.conf" --nodelist n1 --ntasks 1 >/dev/null'
snippet_ok() { # the snippet's dpg.so line names where the package put the plugin
	local so
	so=$(awk '$1 ~ /^(optional|required)$/ { print $2; exit }' "$root/usr/share/dpg/plugstack.conf.d/dpg.conf")
	echo "   | snippet loads $so"
	[ -n "$so" ] && [ -f "$root$so" ]
}
check "plugstack snippet points at the packaged dpg.so" snippet_ok

# ------------------------------------------------------------ ELF checks
no_missing_libs() { # ldd FILE: every needed library resolves
	local out
	out=$(ldd "$1" 2>&1) || { echo "$out" | sed 's/^/   | /'; return 1; }
	! echo "$out" | grep -q 'not found' || { echo "$out" | grep 'not found' | sed 's/^/   | /'; return 1; }
}
check "dpg.so exports slurm_spank_init" eval 'grep -qw slurm_spank_init <<<"$(nm -D --defined-only "$plugdir/dpg.so")"'
check "dpg.so exports plugin_name, plugin_type, plugin_version" eval \
	'[ "$(nm -D --defined-only "$plugdir/dpg.so" | grep -cwE "plugin_(name|type|version)")" -eq 3 ]'
check "dpg.so: no missing libraries (ldd)" no_missing_libs "$plugdir/dpg.so"
check "dpg.so links neither libdpg nor libslurm" eval \
	'! grep -qE "NEEDED.*(libdpg|libslurm)" <<<"$(readelf -d "$plugdir/dpg.so")"'
check "dpg-plan: no missing libraries (ldd)" no_missing_libs "$plan"
check "libdpg.so.0: no missing libraries (ldd)" no_missing_libs "$libdir/libdpg.so.0"
no_gpu_needed() { # one libdpg for every node: no CUDA/NCCL in libdpg0
	local dep
	dep=$(dpkg-deb -f "$work/libdpg0_${version}_${arch}.deb" Depends)
	echo "   | libdpg0 Depends: $dep"
	! echo "$dep" | grep -qiE 'cuda|nccl' &&
		! grep -qiE 'NEEDED.*(libcuda|libcudart|libnccl|libcublas)' <<<"$(readelf -d "$libdir/libdpg.so.0")"
}
check "libdpg0 neither depends on nor links CUDA/NCCL" no_gpu_needed
if [ "$cuda" = 1 ]; then
	mod=$libdir/dpg/dpg-cuda.so
	cuda_pkg_ok() {
		local dep
		dep=$(dpkg-deb -f "$work/libdpg0-cuda_${version}_${arch}.deb" Depends)
		echo "   | libdpg0-cuda Depends: $dep"
		[ -f "$mod" ] && echo "$dep" | grep -q 'libnccl2' && echo "$dep" | grep -q 'libdpg0 (=' &&
			[ "$(nm -D --defined-only "$mod" | awk '{print $NF}')" = dpg_gpumod_v3 ]
	}
	check "libdpg0-cuda holds dpg/dpg-cuda.so (exports dpg_gpumod_v3), depends on libdpg0 and libnccl2" cuda_pkg_ok
	check "dpg-cuda.so: no missing libraries (ldd)" no_missing_libs "$mod"
fi
check "libdpg SONAME is libdpg.so.0" eval 'grep -q "SONAME.*\[libdpg.so.0\]" <<<"$(readelf -d "$libdir/libdpg.so.0")"'
check "libdpg exports only dpg_* symbols" eval \
	'! nm -D --defined-only "$libdir/libdpg.so.0" | awk "\$2 ~ /^[TDBRVW]\$/ {print \$3}" | grep -v "^dpg_"'

# ------------------------------------------------------------ pkg-config + demo
pc() { PKG_CONFIG_PATH=$libdir/pkgconfig PKG_CONFIG_LIBDIR=$libdir/pkgconfig \
	PKG_CONFIG_SYSROOT_DIR=$root pkg-config "$@"; }
flags=$(pc --cflags --libs dpg 2>&1)
echo "   | pkg-config --cflags --libs dpg: $flags"
check "pkg-config --modversion dpg = $upver" eval '[ "$(pc --modversion dpg)" = "$upver" ]'
check "pkg-config flags point into the unpacked root" eval \
	'echo "$flags" | grep -q -- "-I$root/usr/include" && echo "$flags" | grep -q -- "-L$libdir"'
demo_src=$root/usr/share/doc/libdpg-dev/examples/allreduce_demo.c
[ -f "$demo_src" ] || demo_src=$src/examples/allreduce_demo.c
mkdir -p "$work/demo" && cp "$demo_src" "$work/demo/"
# shellcheck disable=SC2086
check "allreduce_demo.c compiles out of tree against the packaged header+lib" \
	cc -Wall -Wextra -Werror -o "$work/demo/allreduce_demo" "$work/demo/allreduce_demo.c" $flags
demo_ok() {
	local out
	# (captured first: under pipefail, grep -q quitting early can kill ldd
	# with SIGPIPE and fail the pipeline after a match)
	grep -q "libdpg.so.0 => $libdir/" <<<"$(ldd "$work/demo/allreduce_demo")" || {
		echo "   | libdpg not resolved from the unpacked root"; return 1; }
	# no Slurm or DPG_* environment: a world of one
	out=$(cd "$work/demo" && env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$libdir" \
		timeout 60 ./allreduce_demo 2>&1) || { echo "$out" | sed 's/^/   | /'; return 1; }
	echo "$out" | sed -n 1p | sed 's/^/   | /'
	echo "$out" | grep -q 'sum of rank+1 = 1 (expected 1)'
}
check "allreduce_demo runs single-process: sum = 1 (expected 1)" demo_ok
# the ./train of the README: the sharded step through the packaged library
for f in train.c mlp.h mlp_math.h mlp_dev.h mlp_dev.c; do
	if [ -f "$root/usr/share/doc/libdpg-dev/examples/$f" ]; then
		cp "$root/usr/share/doc/libdpg-dev/examples/$f" "$work/demo/"
	else
		cp "$src/examples/$f" "$work/demo/"
	fi
done
# shellcheck disable=SC2086
check "examples/train.c compiles out of tree against the packaged header+lib" \
	cc -Wall -Wextra -Werror -o "$work/demo/train" "$work/demo/train.c" "$work/demo/mlp_dev.c" \
	$flags -lm -ldl
train_ok() {
	local out
	out=$(cd "$work/demo" && env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$libdir" \
		timeout 120 ./train --steps 20 --stage 3 --log-every 20 2>&1) ||
		{ echo "$out" | sed 's/^/   | /'; return 1; }
	echo "$out" | tail -1 | sed 's/^/   | /'
	echo "$out" | grep -q '^done: steps 20 .* world 1 stage 3$'
}
check "train runs single-process, ZeRO-3, 20 steps" train_ok

# ------------------------------------------------------------ lintian (opt-in)
if [ "${DPG_PKG_LINTIAN:-0}" = 1 ]; then
	lintian "$work"/dpg_"${version}"_"${arch}".changes >"$work/lintian.log" 2>&1
	sed 's/^/   | /' "$work/lintian.log" | head -n 30
	check "lintian: no errors" eval '! grep -q "^E:" "$work/lintian.log"'
fi

[ "${DPG_PKG_KEEP:-0}" = 1 ] && echo "pkg-test: kept $work"
finish
