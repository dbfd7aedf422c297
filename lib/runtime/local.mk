# SPDX-License-Identifier: BSD-3-Clause
# lib/runtime/local.mk - libdpg's communication layer: context and init, the
# rendezvous store, TCP, the CPU backend (cpu/) and the NCCL backend (nccl/).
noinst_LTLIBRARIES += libdpgrt.la
libdpgrt_la_SOURCES = \
	lib/runtime/version.c lib/runtime/backend.h lib/runtime/comm.h \
	lib/runtime/net.c lib/runtime/net.h \
	lib/runtime/digest.c lib/runtime/digest.h \
	lib/runtime/store.h lib/runtime/store_wire.c lib/runtime/store_wire.h \
	lib/runtime/store_table.c lib/runtime/store_table.h \
	lib/runtime/store_server.c lib/runtime/store_server.h lib/runtime/store_ops.c \
	lib/runtime/store_client.c \
	lib/runtime/join.c lib/runtime/join.h \
	lib/runtime/xchg.c lib/runtime/xchg.h \
	lib/runtime/ctx.c lib/runtime/ctx.h lib/runtime/runtime.h \
	lib/runtime/coll.c lib/runtime/track.c lib/runtime/track.h \
	lib/runtime/hang.c lib/runtime/hang_fmt.c lib/runtime/hang.h \
	lib/runtime/report.c lib/runtime/report.h \
	lib/runtime/comm.c lib/runtime/mesh.c \
	lib/runtime/init.c \
	lib/runtime/cpu/reduce.c lib/runtime/cpu/reduce.h \
	lib/runtime/cpu/shm.c lib/runtime/cpu/shm.h lib/runtime/cpu/shm_impl.h \
	lib/runtime/cpu/shm_seg.c lib/runtime/cpu/shm_direct.c \
	lib/runtime/cpu/clock.h \
	lib/runtime/cpu/stamp.c lib/runtime/cpu/stamp.h \
	lib/runtime/cpu/ring.c lib/runtime/cpu/ring.h \
	lib/runtime/cpu/hello.c lib/runtime/cpu/hello.h \
	lib/runtime/cpu/hops.c lib/runtime/cpu/hops.h \
	lib/runtime/cpu/cpu_backend.c lib/runtime/cpu/cpu_backend.h
libdpgrt_la_CFLAGS = $(AM_CFLAGS) -O3 -fvect-cost-model=dynamic
libdpgrt_la_CPPFLAGS = $(RT_CPPFLAGS) $(LIBCRYPTO_CFLAGS)
libdpgrt_la_LIBADD = $(LIBCRYPTO_LIBS) -lpthread -lrt -lm
EXTRA_DIST += lib/runtime/nccl/nccl_backend.c lib/runtime/nccl/nccl_backend.h
if HAVE_NCCL
libdpgrt_la_SOURCES += lib/runtime/nccl/nccl_backend.c lib/runtime/nccl/nccl_backend.h
libdpgrt_la_CPPFLAGS += -DDPG_HAVE_NCCL=1 $(CUDA_CPPFLAGS) $(NCCL_CPPFLAGS)
libdpgrt_la_LIBADD += $(CUDA_LDFLAGS) $(NCCL_LDFLAGS) -lnccl -lcudart
endif
