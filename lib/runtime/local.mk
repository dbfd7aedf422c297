# lib/runtime/local.mk - libdpg's communication layer: context and init, the
# rendezvous store, TCP, the CPU backend (cpu/) and the NCCL backend (nccl/).
noinst_LTLIBRARIES += libdpgrt.la
libdpgrt_la_SOURCES = \
	lib/runtime/version.c lib/runtime/comm.h \
	lib/runtime/net.c lib/runtime/net.h \
	lib/runtime/sha256.c lib/runtime/sha256.h \
	lib/runtime/store.c lib/runtime/store.h \
	lib/runtime/joinenv.c lib/runtime/joinenv.h \
	lib/runtime/runtime.c lib/runtime/runtime.h \
	lib/runtime/mesh.c \
	lib/runtime/cpu/reduce.c lib/runtime/cpu/reduce.h \
	lib/runtime/cpu/shm.c lib/runtime/cpu/shm.h \
	lib/runtime/cpu/clock.h \
	lib/runtime/cpu/ring.c lib/runtime/cpu/ring.h \
	lib/runtime/cpu/cpu_backend.c lib/runtime/cpu/cpu_backend.h
libdpgrt_la_CFLAGS = $(AM_CFLAGS) -O3 -fvect-cost-model=dynamic
libdpgrt_la_CPPFLAGS = $(RT_CPPFLAGS)
libdpgrt_la_LIBADD = -lpthread -lrt -lm
EXTRA_DIST += lib/runtime/nccl/nccl_backend.c lib/runtime/nccl/nccl_backend.h
if HAVE_NCCL
libdpgrt_la_SOURCES += lib/runtime/nccl/nccl_backend.c lib/runtime/nccl/nccl_backend.h
libdpgrt_la_CPPFLAGS += -DDPG_HAVE_NCCL=1 $(CUDA_CPPFLAGS) $(NCCL_CPPFLAGS)
libdpgrt_la_LIBADD += $(CUDA_LDFLAGS) $(NCCL_LDFLAGS) -lnccl -lcudart
endif
