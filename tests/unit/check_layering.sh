#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# check_layering.sh - the architecture, checked on the build (make check):
#   plugin/tools -> launch -> common <- runtime <- train
# (a) libdpg.so needs no hwloc;
# (b) the plugin dpg.so (when built) needs no NCCL, CUDA, libpthread or
#     libcrypto/libssl, imports no thread/socket-server or OpenSSL calls and
#     contains no runtime code (the digests are libdpg's, never slurmstepd's);
# (c) no lib/launch file includes a runtime header and no lib/runtime or
#     lib/train file a launch header; lib/common includes neither; the GPU
#     module (lib/cuda) includes no launch header and no wing one of its
#     own; no lib/ file includes an example's header (examples/*.h).
# One line per failure.  Environment: DPG_BUILDDIR (where .libs/ is,
# default .) and DPG_SRCDIR (the source tree, default: two levels above).
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=${DPG_SRCDIR:-$(cd "$here/../.." && pwd)}
b=${DPG_BUILDDIR:-.}
fail=0
bad() { echo "FAIL: $*"; fail=1; }

command -v readelf >/dev/null 2>&1 && command -v nm >/dev/null 2>&1 ||
	{ echo "SKIP: readelf or nm not found (binutils)"; exit 77; }

# ---------------------------------------------------------------- (a)
lib=$b/.libs/libdpg.so
if [ ! -e "$lib" ]; then
	bad "$lib not found (set DPG_BUILDDIR)"
else
	readelf -d "$lib" | grep NEEDED | grep -qi hwloc &&
		bad "libdpg.so links hwloc (NEEDED $(readelf -d "$lib" | grep -i hwloc | sed 's/.*\[\(.*\)\]/\1/'))"
fi

# ---------------------------------------------------------------- (b)
so=$b/.libs/dpg.so
if [ -e "$so" ]; then
	for n in $(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
		case $n in
		libnccl*|libcudart*|libcuda.*|libpthread*)
			bad "dpg.so (the plugin) links $n: no NCCL, CUDA or threads in slurmstepd" ;;
		libcrypto*|libssl*)
			bad "dpg.so (the plugin) links $n: no OpenSSL in slurmstepd (only libdpg needs it)" ;;
		esac
	done
	for s in $(nm -D --undefined-only "$so" | awk '{print $NF}' | sed 's/@.*//'); do
		case $s in
		pthread_create|epoll_*|listen|accept|accept4)
			bad "dpg.so (the plugin) imports $s: no threads or listening sockets in slurmstepd" ;;
		EVP_*|HMAC*|SHA256*|CRYPTO_*|OPENSSL_*)
			bad "dpg.so (the plugin) imports $s: no OpenSSL in slurmstepd" ;;
		esac
	done
	for s in $(nm "$so" 2>/dev/null | awk '{print $NF}'; nm -D "$so" | awk '{print $NF}'); do
		case $s in
		dpg_store_*|dpg_net_*|dpg_cpu_*|dpg_sha256*|dpg_hmac_*)
			bad "dpg.so (the plugin) contains runtime code: $s" ;;
		esac
	done
fi

# ---------------------------------------------------------------- (c)
headers() { # DIR...: the bare names of the headers under each DIR
	for d in "$@"; do find "$src/$d" -name '*.h' -exec basename {} \; ; done | sort -u
}
includes_of() { # DIR...: "file:name" for each #include "name" under each DIR
	for d in "$@"; do
		find "$src/$d" \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) -exec \
			grep -H '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' {} + |
			sed 's|^'"$src"'/||; s|:[^"]*"\([^"]*\)".*|:\1|'
	done
}
forbid() { # WHAT FROM_DIRS -- HEADER_DIRS
	what=$1; shift
	from=""; while [ "$1" != -- ]; do from="$from $1"; shift; done; shift
	names=$(headers "$@")
	includes_of $from | while IFS=: read -r file name; do
		for h in $names; do
			[ "$name" = "$h" ] && echo "FAIL: $file includes \"$name\" ($what)"
		done
	done
}
out=$( {
	forbid "a runtime header in the launch wing" lib/launch -- lib/runtime lib/train
	forbid "a launch header in the runtime wing" lib/runtime lib/train -- lib/launch
	forbid "a launch header in common" lib/common -- lib/launch
	forbid "a runtime header in common" lib/common -- lib/runtime lib/train
	forbid "a launch header in the GPU module" lib/cuda -- lib/launch
	forbid "a GPU-module header outside the module" lib/common lib/launch lib/runtime \
		lib/train -- lib/cuda
	forbid "an example's header in the library" lib -- examples
} )
[ -n "$out" ] && { echo "$out"; fail=1; }

[ $fail = 0 ] && echo "ok: layering (libdpg without hwloc; plugin without threads, sockets, NCCL, OpenSSL or runtime code; includes one way)"
exit $fail
