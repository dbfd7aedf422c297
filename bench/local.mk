# SPDX-License-Identifier: BSD-3-Clause
# bench/local.mk - the benchmark programs, built by the build system against the
# library (`make extra-programs`, or `make bench-programs` for these alone); the
# bench/*.sh scripts run them from a build tree, and `make check-bench` runs
# every script in smoke mode and checks that its tables parse.
BENCH_PROGS = bench/coll_bench bench/store_bench bench/store_sim bench/optim_bench \
	bench/zero_bench bench/ckpt_bench bench/stop_bench
EXTRA_PROGRAMS += bench/coll_bench bench/store_bench bench/store_sim bench/optim_bench \
	bench/zero_bench bench/ckpt_bench bench/stop_bench
CLEANFILES += $(BENCH_PROGS)
# the CPU collectives and the store: internal (runtime wing)
bench_coll_bench_SOURCES = bench/coll_bench.c
bench_coll_bench_CPPFLAGS = $(RT_CPPFLAGS)
bench_coll_bench_LDADD = libdpgrt.la libdpgcommon.la -lm -lpthread
bench_store_bench_SOURCES = bench/store_bench.c
bench_store_bench_CPPFLAGS = $(RT_CPPFLAGS)
bench_store_bench_LDADD = libdpgrt.la libdpgcommon.la -lpthread
# the store at scale: simulated ranks on the wire protocol (store_wire.h)
bench_store_sim_SOURCES = bench/store_sim.c
bench_store_sim_CPPFLAGS = $(RT_CPPFLAGS)
bench_store_sim_LDADD = libdpgrt.la libdpgcommon.la -lpthread
# the optimizer loops (internal, train wing); its reference kernels are built
# with the train wing's flags, so that both sides are compiled alike
bench_optim_bench_SOURCES = bench/optim_bench.c
bench_optim_bench_CPPFLAGS = $(TRAIN_CPPFLAGS)
bench_optim_bench_CFLAGS = $(libdpgtrain_la_CFLAGS)
bench_optim_bench_LDADD = libdpgtrain.la libdpgrt.la libdpgcommon.la -lm
# the sharded step through the public API only
bench_zero_bench_SOURCES = bench/zero_bench.c
bench_zero_bench_LDADD = libdpg.la -lm
# checkpoints (dpg_zero_save/_load/_save_async) against raw write+fsync/read
bench_ckpt_bench_SOURCES = bench/ckpt_bench.c
bench_ckpt_bench_LDADD = libdpg.la

# the Open MPI peer of coll_bench: built with the MPI wrapper compiler, only
# where configure found one (MPICC)
if HAVE_MPICC
BENCH_PROGS += bench/coll_mpi
bench/coll_mpi$(EXEEXT): $(srcdir)/bench/coll_mpi.c
	@$(MKDIR_P) bench
	$(AM_V_CCLD)$(MPICC) -std=gnu11 $(CFLAGS) -o $@ $(srcdir)/bench/coll_mpi.c -lm
endif
EXTRA_BUILT += $(BENCH_PROGS)

# the GPU benchmarks (bench/gpu_bench.sh, `make bench-gpu`): built where
# configure found CUDA and NCCL (nvcc too for optim_gpu_bench, which links
# the module's kernels); they print "SKIPPED: no GPU (...)" and exit 77 on
# a machine without one.  nccl_bench links NCCL and cudart itself, to call
# NCCL directly next to libdpg (libdpg.so itself links neither).
BENCH_GPU_PROGS =
if HAVE_NCCL
BENCH_GPU_PROGS += bench/nccl_bench
EXTRA_PROGRAMS += bench/nccl_bench
bench_nccl_bench_SOURCES = bench/nccl_bench.c
bench_nccl_bench_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS) $(NCCL_CPPFLAGS)
bench_nccl_bench_LDADD = libdpg.la $(CUDA_LDFLAGS) $(NCCL_LDFLAGS) -lnccl -lcudart -lm
if HAVE_NVCC
BENCH_GPU_PROGS += bench/optim_gpu_bench
EXTRA_PROGRAMS += bench/optim_gpu_bench
bench_optim_gpu_bench_SOURCES = bench/optim_gpu_bench.c
bench_optim_gpu_bench_CPPFLAGS = $(ALL_CPPFLAGS) $(CUDA_CPPFLAGS)
bench_optim_gpu_bench_LDADD = libdpgtrain.la libdpgrt.la libdpgcuda.la libdpgcommon.la \
	$(CUDA_LDFLAGS) -lcudart -lm -lpthread
endif
EXTRA_BUILT += $(BENCH_GPU_PROGS)
endif
CLEANFILES += $(BENCH_GPU_PROGS)

.PHONY: bench-programs check-bench bench-gpu-programs bench-gpu
bench-programs: $(BENCH_PROGS)
bench-gpu-programs: $(BENCH_GPU_PROGS)
# the GPU benchmarks on this host's GPUs, results in bench/results/gpu.md
# (skipped, with the reason, where there is no GPU or no CUDA/NCCL build)
bench-gpu: all bench-gpu-programs
	@BUILD=$(abs_builddir) DPG_CUDA_MODULE=$(abs_builddir)/.libs/dpg-cuda.so \
	  $(top_srcdir)/bench/gpu_bench.sh; \
	rc=$$?; test $$rc -eq 0 || test $$rc -eq 77
# each bench script in smoke mode (tiny sizes, a few iterations, peers only
# where installed), its tables checked by bench/check_bench.sh
check-bench: all bench-programs bench-gpu-programs
	BUILD=$(abs_builddir) MPICC="$(MPICC)" $(top_srcdir)/bench/check_bench.sh
# dpg_stop_requested (the requeue protocol's per-step question), public API only
bench_stop_bench_SOURCES = bench/stop_bench.c
bench_stop_bench_LDADD = libdpg.la
