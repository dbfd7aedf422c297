#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# check_needed.sh - one libdpg for every node: libdpg.so has no NEEDED entry
# on CUDA, NCCL or cuBLAS (they are the GPU module dpg-cuda.so's, which
# libdpg loads with dlopen), and the module, where built, exports its one
# entry point and needs CUDA and NCCL itself.  One line per failure (make
# check).  Environment: DPG_BUILDDIR (where .libs/ is, default .).
set -u
b=${DPG_BUILDDIR:-.}
fail=0
bad() { echo "FAIL: $*"; fail=1; }

command -v readelf >/dev/null 2>&1 && command -v nm >/dev/null 2>&1 ||
	{ echo "SKIP: readelf or nm not found (binutils)"; exit 77; }
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }

lib=$b/.libs/libdpg.so
[ -e "$lib" ] || { bad "$lib not found (set DPG_BUILDDIR)"; exit 1; }
n=0
for d in $(needed "$lib"); do
	n=$((n + 1))
	case $d in
	libcuda.*|libcudart*|libnccl*|libcublas*|libnvrtc*|libstdc++*)
		bad "libdpg.so has NEEDED $d: CUDA and NCCL belong to dpg-cuda.so, loaded with dlopen" ;;
	esac
done

mod=$b/.libs/dpg-cuda.so
if [ -e "$mod" ]; then
	needed "$mod" | grep -q '^libnccl' || bad "dpg-cuda.so does not link NCCL"
	exports=$(nm -D --defined-only "$mod" | awk '{print $NF}' | sed 's/@.*//' | sort -u)
	[ "$exports" = dpg_gpumod_v3 ] ||
		bad "dpg-cuda.so exports $(echo $exports | tr '\n' ' '), not just dpg_gpumod_v3"
	what="; dpg-cuda.so: $(needed "$mod" | tr '\n' ' ')"
else
	what="; no dpg-cuda.so (configured without CUDA/NCCL)"
fi
[ $fail = 0 ] && echo "ok: libdpg.so has $n NEEDED entries, none CUDA/NCCL$what"
exit $fail
