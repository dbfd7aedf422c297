# SPDX-License-Identifier: BSD-3-Clause
# tests/unit/local.mk - the cmocka unit tests, one program per module in the
# folder of its wing (tests/unit/<wing>/test_<module>.c), the golden plans
# (tests/plan) and the layering check.  Each program's source is its default
# one (<program>.c); it needs its own CPPFLAGS (every wing's headers and
# cmocka's) and LDADD (its wing's libraries), since automake knows no
# per-folder variables.
EXTRA_DIST += tests/unit/check_layering.sh tests/unit/check_cloexec.sh \
	tests/unit/check_man_synopsis.sh tests/unit/check_needed.sh
UNIT_CPPFLAGS = $(ALL_CPPFLAGS) $(CMOCKA_CFLAGS)
LAUNCH_TEST_LDADD = libdpglaunch.la libdpgcommon.la $(CMOCKA_LIBS)
RT_TEST_LDADD = libdpgtrain.la libdpgrt.la libdpgcommon.la $(CMOCKA_LIBS) -lm -lpthread

# ---------------------------------------------------------------- common
UNIT_COMMON = tests/unit/common/test_env tests/unit/common/test_hostlist \
	tests/unit/common/test_parse tests/unit/common/test_port \
	tests/unit/common/test_port_collisions tests/unit/common/test_portcheck \
	tests/unit/common/test_taskdist
tests_unit_common_test_env_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_common_test_env_LDADD = $(LAUNCH_TEST_LDADD)
# with libslurm, also a differential test against libslurm's own hostlist
if HAVE_LIBSLURM
tests_unit_common_test_hostlist_CPPFLAGS = $(UNIT_CPPFLAGS) $(SLURM_CPPFLAGS) -DDPG_TEST_LIBSLURM=1
tests_unit_common_test_hostlist_LDADD = $(LAUNCH_TEST_LDADD) -lslurm
else
tests_unit_common_test_hostlist_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_common_test_hostlist_LDADD = $(LAUNCH_TEST_LDADD)
endif
tests_unit_common_test_parse_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_common_test_parse_LDADD = $(LAUNCH_TEST_LDADD)
tests_unit_common_test_port_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_common_test_port_LDADD = $(LAUNCH_TEST_LDADD)
tests_unit_common_test_port_collisions_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_common_test_port_collisions_LDADD = $(LAUNCH_TEST_LDADD)
tests_unit_common_test_portcheck_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_common_test_portcheck_LDADD = $(LAUNCH_TEST_LDADD)
tests_unit_common_test_taskdist_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_common_test_taskdist_LDADD = $(LAUNCH_TEST_LDADD)

# ---------------------------------------------------------------- launch
# (DPG_SRCDIR: where the topology fixtures are)
UNIT_LAUNCH = tests/unit/launch/test_bindenv tests/unit/launch/test_conf \
	tests/unit/launch/test_contract tests/unit/launch/test_gpuvis \
	tests/unit/launch/test_killfail tests/unit/launch/test_opts \
	tests/unit/launch/test_plan tests/unit/launch/test_topocache \
	tests/unit/launch/test_probe tests/unit/launch/test_checkrow \
	tests/unit/launch/test_checkp2p tests/unit/launch/test_topo_pack
tests_unit_launch_test_topo_pack_CPPFLAGS = $(UNIT_CPPFLAGS) -DDPG_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_launch_test_topo_pack_LDADD = $(LAUNCH_TEST_LDADD)
tests_unit_launch_test_probe_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_launch_test_probe_LDADD = $(LAUNCH_TEST_LDADD)
tests_unit_launch_test_checkrow_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_launch_test_checkrow_LDADD = $(LAUNCH_TEST_LDADD)
tests_unit_launch_test_checkp2p_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_launch_test_checkp2p_LDADD = $(LAUNCH_TEST_LDADD)
tests_unit_launch_test_bindenv_CPPFLAGS = $(UNIT_CPPFLAGS) -DDPG_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_launch_test_bindenv_LDADD = $(LAUNCH_TEST_LDADD)
tests_unit_launch_test_topocache_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_launch_test_topocache_LDADD = $(LAUNCH_TEST_LDADD)
tests_unit_launch_test_conf_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_launch_test_conf_LDADD = $(LAUNCH_TEST_LDADD)
tests_unit_launch_test_contract_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_launch_test_contract_LDADD = $(LAUNCH_TEST_LDADD)
tests_unit_launch_test_gpuvis_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_launch_test_gpuvis_LDADD = $(LAUNCH_TEST_LDADD)
tests_unit_launch_test_killfail_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_launch_test_killfail_LDADD = $(LAUNCH_TEST_LDADD)
tests_unit_launch_test_opts_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_launch_test_opts_LDADD = $(LAUNCH_TEST_LDADD)
tests_unit_launch_test_plan_CPPFLAGS = $(UNIT_CPPFLAGS) -DDPG_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_launch_test_plan_LDADD = $(LAUNCH_TEST_LDADD)

# ---------------------------------------------------------------- tools
# (runs the built dpg-plan)
UNIT_TOOLS = tests/unit/tools/test_dpg_plan
tests_unit_tools_test_dpg_plan_CPPFLAGS = $(UNIT_CPPFLAGS) -DDPG_PLAN_PATH='"$(abs_builddir)/dpg-plan"'
tests_unit_tools_test_dpg_plan_LDADD = $(LAUNCH_TEST_LDADD)
EXTRA_tests_unit_tools_test_dpg_plan_DEPENDENCIES = dpg-plan

# ---------------------------------------------------------------- runtime
# (join reads the launch side's contract too; init forks ranks: ranks.h)
UNIT_RUNTIME = tests/unit/runtime/test_cpu_backend tests/unit/runtime/test_init \
	tests/unit/runtime/test_gpumod \
	tests/unit/runtime/test_join tests/unit/runtime/test_net \
	tests/unit/runtime/test_reduce tests/unit/runtime/test_digest \
	tests/unit/runtime/test_shm tests/unit/runtime/test_store \
	tests/unit/runtime/test_store_relay \
	tests/unit/runtime/test_report tests/unit/runtime/test_startup \
	tests/unit/runtime/test_stop tests/unit/runtime/test_live
tests_unit_runtime_test_cpu_backend_SOURCES = tests/unit/runtime/test_cpu_backend.c tests/unit/runtime/storeproc.h
tests_unit_runtime_test_cpu_backend_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_runtime_test_cpu_backend_LDADD = $(RT_TEST_LDADD)
tests_unit_runtime_test_init_SOURCES = tests/unit/runtime/test_init.c tests/unit/ranks.h tests/unit/testenv.h
tests_unit_runtime_test_init_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_runtime_test_init_LDADD = $(RT_TEST_LDADD)
# test_gpumod: the module loader against fake modules built here by plain
# rules (a libtool module would get an rpath: the point of nolib.so is a
# library the loader cannot find) and the real dpg-cuda.so when configured
GPUMOD_FAKE = tests/unit/runtime/gpumod-fake
GPUMOD_FAKES = $(GPUMOD_FAKE)/absent/libdpgtest-absent.so $(GPUMOD_FAKE)/nolib.so \
	$(GPUMOD_FAKE)/badabi.so $(GPUMOD_FAKE)/notmod.so
GPUMOD_FAKE_CC = $(CC) -std=gnu11 -shared -fPIC -I$(top_srcdir)/include \
	-I$(top_srcdir)/lib/common -I$(top_srcdir)/lib/runtime
EXTRA_DIST += tests/unit/runtime/fake_gpumod.c
CLEANFILES += $(GPUMOD_FAKES)
$(GPUMOD_FAKE)/absent/libdpgtest-absent.so: $(srcdir)/tests/unit/runtime/fake_gpumod.c
	@$(MKDIR_P) $(@D)
	$(AM_V_CC)$(GPUMOD_FAKE_CC) -DFAKE_ABSENT_LIB \
	  -Wl,-soname,libdpgtest-absent.so.0 -o $@ $(srcdir)/tests/unit/runtime/fake_gpumod.c
$(GPUMOD_FAKE)/nolib.so: $(srcdir)/tests/unit/runtime/fake_gpumod.c \
		$(GPUMOD_FAKE)/absent/libdpgtest-absent.so $(top_srcdir)/lib/runtime/gpumod.h
	$(AM_V_CC)$(GPUMOD_FAKE_CC) -DFAKE_ABI=DPG_GPUMOD_ABI -DFAKE_NEEDS_ABSENT -o $@ \
	  $(srcdir)/tests/unit/runtime/fake_gpumod.c -Wl,--no-as-needed \
	  $(GPUMOD_FAKE)/absent/libdpgtest-absent.so
$(GPUMOD_FAKE)/notmod.so: $(srcdir)/tests/unit/runtime/fake_gpumod.c
	@$(MKDIR_P) $(@D)
	$(AM_V_CC)$(GPUMOD_FAKE_CC) -DFAKE_ABSENT_LIB -o $@ $(srcdir)/tests/unit/runtime/fake_gpumod.c
$(GPUMOD_FAKE)/badabi.so: $(srcdir)/tests/unit/runtime/fake_gpumod.c $(top_srcdir)/lib/runtime/gpumod.h
	@$(MKDIR_P) $(@D)
	$(AM_V_CC)$(GPUMOD_FAKE_CC) -DFAKE_ABI=999 -o $@ $(srcdir)/tests/unit/runtime/fake_gpumod.c
tests_unit_runtime_test_gpumod_SOURCES = tests/unit/runtime/test_gpumod.c tests/unit/testenv.h
tests_unit_runtime_test_gpumod_CPPFLAGS = $(UNIT_CPPFLAGS) \
	-DDPG_TEST_FAKE_DIR='"$(abs_builddir)/$(GPUMOD_FAKE)"' \
	-DDPG_TEST_DEFAULT_MODULE='"$(pkglibdir)/dpg-cuda.so"'
if HAVE_NCCL
tests_unit_runtime_test_gpumod_CPPFLAGS += \
	-DDPG_TEST_CUDA_MODULE='"$(abs_builddir)/.libs/dpg-cuda.so"'
endif
tests_unit_runtime_test_gpumod_LDADD = $(RT_TEST_LDADD)
EXTRA_tests_unit_runtime_test_gpumod_DEPENDENCIES = $(GPUMOD_FAKES)
tests_unit_runtime_test_report_SOURCES = tests/unit/runtime/test_report.c tests/unit/ranks.h tests/unit/testenv.h
tests_unit_runtime_test_report_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_runtime_test_report_LDADD = $(RT_TEST_LDADD)
tests_unit_runtime_test_live_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_runtime_test_live_LDADD = $(RT_TEST_LDADD)
tests_unit_runtime_test_startup_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_runtime_test_startup_LDADD = $(RT_TEST_LDADD)
tests_unit_runtime_test_stop_SOURCES = tests/unit/runtime/test_stop.c tests/unit/ranks.h tests/unit/testenv.h
tests_unit_runtime_test_stop_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_runtime_test_stop_LDADD = $(RT_TEST_LDADD)
tests_unit_runtime_test_join_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_runtime_test_join_LDADD = libdpglaunch.la $(RT_TEST_LDADD)
tests_unit_runtime_test_net_SOURCES = tests/unit/runtime/test_net.c tests/unit/testenv.h
tests_unit_runtime_test_net_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_runtime_test_net_LDADD = $(RT_TEST_LDADD)
tests_unit_runtime_test_reduce_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_runtime_test_reduce_LDADD = $(RT_TEST_LDADD)
tests_unit_runtime_test_digest_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_runtime_test_digest_LDADD = $(RT_TEST_LDADD)
tests_unit_runtime_test_shm_SOURCES = tests/unit/runtime/test_shm.c tests/unit/runtime/storeproc.h
tests_unit_runtime_test_shm_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_runtime_test_shm_LDADD = $(RT_TEST_LDADD)
tests_unit_runtime_test_store_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_runtime_test_store_LDADD = $(RT_TEST_LDADD)
tests_unit_runtime_test_store_relay_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_runtime_test_store_relay_LDADD = $(RT_TEST_LDADD)

# ---------------------------------------------------------------- train
# (zero forks ranks: ranks.h)
UNIT_TRAIN = tests/unit/train/test_ckpt tests/unit/train/test_detsum \
	tests/unit/train/test_optim tests/unit/train/test_zero \
	tests/unit/train/test_zlayout
tests_unit_train_test_ckpt_CPPFLAGS = $(UNIT_CPPFLAGS) $(XXHASH_CFLAGS)
tests_unit_train_test_ckpt_LDADD = $(RT_TEST_LDADD)
tests_unit_train_test_detsum_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_train_test_detsum_LDADD = $(RT_TEST_LDADD)
tests_unit_train_test_optim_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_train_test_optim_LDADD = $(RT_TEST_LDADD)
tests_unit_train_test_zero_SOURCES = tests/unit/train/test_zero.c tests/unit/ranks.h tests/unit/testenv.h
tests_unit_train_test_zero_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_train_test_zero_LDADD = $(RT_TEST_LDADD)
tests_unit_train_test_zlayout_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_train_test_zlayout_LDADD = $(RT_TEST_LDADD)

# ---------------------------------------------------------------- examples
# (the model of examples/train)
UNIT_EXAMPLES = tests/unit/examples/test_mlp
tests_unit_examples_test_mlp_SOURCES = tests/unit/examples/test_mlp.c examples/mlp.h examples/mlp_math.h
tests_unit_examples_test_mlp_CPPFLAGS = $(UNIT_CPPFLAGS) -I$(srcdir)/examples
tests_unit_examples_test_mlp_LDADD = $(RT_TEST_LDADD)
# the loss-curve comparison of train's GPU check (tests/gpu/train_gpu.sh)
UNIT_EXAMPLES += tests/unit/examples/test_losscurve
tests_unit_examples_test_losscurve_SOURCES = tests/unit/examples/test_losscurve.c \
	tests/gpu/losscurve.c tests/gpu/losscurve.h
tests_unit_examples_test_losscurve_CPPFLAGS = $(UNIT_CPPFLAGS) -I$(srcdir)/tests/gpu
tests_unit_examples_test_losscurve_LDADD = $(RT_TEST_LDADD)

UNIT_TESTS = $(UNIT_COMMON) $(UNIT_LAUNCH) $(UNIT_TOOLS) $(UNIT_RUNTIME) \
	$(UNIT_TRAIN) $(UNIT_EXAMPLES)
if HAVE_CMOCKA
check_PROGRAMS = $(UNIT_TESTS)
TESTS = $(UNIT_TESTS)
# golden binding plans (tests/plan/run.sh --update regenerates them) and the
# architecture's build checks; both read the source tree through DPG_SRCDIR
TESTS += tests/plan/run.sh tests/unit/check_layering.sh tests/unit/check_cloexec.sh \
	tests/unit/check_man_synopsis.sh tests/unit/check_needed.sh
AM_TESTS_ENVIRONMENT = DPG_PLAN=$(abs_builddir)/dpg-plan \
	DPG_SRCDIR=$(abs_top_srcdir) DPG_BUILDDIR=$(abs_builddir); export DPG_PLAN DPG_SRCDIR DPG_BUILDDIR;
else
check-local:
	@echo "make check: cmocka not found (install libcmocka-dev and re-run configure)" >&2; exit 1
endif
