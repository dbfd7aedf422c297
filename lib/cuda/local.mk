# SPDX-License-Identifier: BSD-3-Clause
# lib/cuda/local.mk - dpg-cuda.so, libdpg's GPU module: the NCCL backend
# (lib/runtime/nccl) and the sharded step's kernels (lib/train/zero_cuda.cu)
# behind one versioned entry point (lib/runtime/gpumod.h).  Built only when
# configure finds CUDA and NCCL; installed in $(pkglibdir) and loaded by
# libdpg with dlopen when a task asks for NCCL (lib/runtime/gpumod.c), so
# that one libdpg.so loads on every node, GPU or not.
CUDA_MODULE_SRC = lib/runtime/nccl/nccl_backend.c lib/runtime/nccl/nccl_backend.h \
	lib/cuda/module.c
EXTRA_DIST += $(CUDA_MODULE_SRC) lib/cuda/dpg-cuda.map
if HAVE_NCCL
# everything of the module but its export list: tests/gpu/test_zero_gpu
# links it to call the kernels (dpg_cuda_*) directly
noinst_LTLIBRARIES += libdpgcuda.la
libdpgcuda_la_SOURCES = $(CUDA_MODULE_SRC)
libdpgcuda_la_CPPFLAGS = $(RT_CPPFLAGS) -I$(top_srcdir)/lib/train \
	$(CUDA_CPPFLAGS) $(NCCL_CPPFLAGS)
libdpgcuda_la_LIBADD = $(CUDA_LDFLAGS) $(NCCL_LDFLAGS) -lnccl -lcudart
if HAVE_NVCC
libdpgcuda_la_CPPFLAGS += -DDPG_HAVE_CUDA_ZERO=1
libdpgcuda_la_LIBADD += lib/train/zero_cuda.lo -lstdc++
EXTRA_libdpgcuda_la_DEPENDENCIES = lib/train/zero_cuda.lo
endif

pkglib_LTLIBRARIES = dpg-cuda.la
dpg_cuda_la_SOURCES =
nodist_EXTRA_dpg_cuda_la_SOURCES = dummy.c
dpg_cuda_la_LIBADD = libdpgcuda.la libdpgcommon.la
dpg_cuda_la_LDFLAGS = -module -avoid-version -shared \
	-Wl,--version-script=$(top_srcdir)/lib/cuda/dpg-cuda.map -Wl,-z,now -Wl,-z,relro
EXTRA_dpg_cuda_la_DEPENDENCIES = lib/cuda/dpg-cuda.map
# libtool's .la is of no use to dlopen: install only dpg-cuda.so
install-exec-hook:
	rm -f $(DESTDIR)$(pkglibdir)/dpg-cuda.la
UNINSTALL_EXTRA += $(DESTDIR)$(pkglibdir)/dpg-cuda.so
endif
