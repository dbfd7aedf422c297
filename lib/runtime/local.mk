# SPDX-License-Identifier: BSD-3-Clause
# lib/runtime/local.mk - libdpg's communication layer: context and init, the
# rendezvous store, TCP, the CPU backend (cpu/) and the loader of the GPU
# module (gpumod.c).  The NCCL backend (nccl/) is built into that module
# (lib/cuda/local.mk), never into libdpg: libdpg.so needs no CUDA or NCCL.
noinst_LTLIBRARIES += libdpgrt.la
libdpgrt_la_SOURCES = \
	lib/runtime/version.c lib/runtime/backend.h lib/runtime/comm.h \
	lib/runtime/net.c lib/runtime/net.h \
	lib/runtime/digest.c lib/runtime/digest.h \
	lib/runtime/store.h lib/runtime/store_wire.c lib/runtime/store_wire.h \
	lib/runtime/store_table.c lib/runtime/store_table.h \
	lib/runtime/store_server.c lib/runtime/store_server.h lib/runtime/store_ops.c \
	lib/runtime/store_client.c lib/runtime/store_relay.c lib/runtime/store_relay.h \
	lib/runtime/join.c lib/runtime/join.h \
	lib/runtime/xchg.c lib/runtime/xchg.h \
	lib/runtime/ctx.c lib/runtime/ctx.h lib/runtime/runtime.h \
	lib/runtime/coll.c lib/runtime/track.c lib/runtime/track.h \
	lib/runtime/hang.c lib/runtime/hang_fmt.c lib/runtime/hang.h \
	lib/runtime/live.c lib/runtime/live.h lib/runtime/watch.c \
	lib/runtime/report.c lib/runtime/report.h \
	lib/runtime/stop.c lib/runtime/stop.h \
	lib/runtime/comm.c lib/runtime/mesh.c \
	lib/runtime/init.c lib/runtime/startup.c lib/runtime/startup.h \
	lib/runtime/thread.c lib/runtime/thread.h \
	lib/runtime/gpumod.c lib/runtime/gpumod.h \
	lib/runtime/cpu/reduce.c lib/runtime/cpu/reduce.h \
	lib/runtime/cpu/shm.c lib/runtime/cpu/shm.h lib/runtime/cpu/shm_impl.h \
	lib/runtime/cpu/shm_seg.c lib/runtime/cpu/shm_sweep.c lib/runtime/cpu/shm_direct.c \
	lib/runtime/cpu/clock.h lib/runtime/cpu/handoff.c lib/runtime/cpu/handoff.h \
	lib/runtime/cpu/xcost.c lib/runtime/cpu/xcost.h \
	lib/runtime/cpu/cma.c lib/runtime/cpu/cma.h \
	lib/runtime/cpu/stamp.c lib/runtime/cpu/stamp.h \
	lib/runtime/cpu/ring.c lib/runtime/cpu/ring.h \
	lib/runtime/cpu/hello.c lib/runtime/cpu/hello.h \
	lib/runtime/cpu/hops.c lib/runtime/cpu/hops.h \
	lib/runtime/cpu/cpu_backend.c lib/runtime/cpu/cpu_backend.h
libdpgrt_la_CFLAGS = $(AM_CFLAGS) -O3 -fvect-cost-model=dynamic
libdpgrt_la_CPPFLAGS = $(RT_CPPFLAGS) $(LIBCRYPTO_CFLAGS)
libdpgrt_la_LIBADD = $(LIBCRYPTO_LIBS) -lpthread -lrt -lm
# where dpg_init looks for dpg-cuda.so unless DPG_CUDA_MODULE says otherwise
libdpgrt_la_CPPFLAGS += -DDPG_CUDA_MODULE_DEFAULT='"$(pkglibdir)/dpg-cuda.so"'
libdpgrt_la_LIBADD += $(DL_LIBS)
