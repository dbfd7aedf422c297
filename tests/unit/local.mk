# tests/unit/local.mk - the cmocka unit tests, one program per module, the
# golden plans (tests/plan) and the layering check.
EXTRA_DIST += tests/unit/check_layering.sh
UNIT_TESTS = \
	tests/unit/test_hostlist \
	tests/unit/test_taskdist \
	tests/unit/test_port \
	tests/unit/test_port_collisions \
	tests/unit/test_conf \
	tests/unit/test_contract \
	tests/unit/test_cli \
	tests/unit/test_plan \
	tests/unit/test_gpuvis \
	tests/unit/test_joinenv \
	tests/unit/test_store \
	tests/unit/test_coll \
	tests/unit/test_runtime \
	tests/unit/test_zlayout \
	tests/unit/test_optim \
	tests/unit/test_ckpt \
	tests/unit/test_mlp \
	tests/unit/test_zero \
	tests/unit/runtime/test_net \
	tests/unit/runtime/test_sha256 \
	tests/unit/runtime/test_reduce \
	tests/unit/runtime/test_shm \
	tests/unit/train/test_detsum \
	tests/unit/launch/test_opts \
	tests/unit/common/test_parse \
	tests/unit/common/test_env

if HAVE_CMOCKA
check_PROGRAMS = $(UNIT_TESTS)
TESTS = $(UNIT_TESTS)
# golden binding plans (tests/plan/run.sh --update regenerates them) and the
# architecture's build checks; both read the source tree through DPG_SRCDIR
TESTS += tests/plan/run.sh tests/unit/check_layering.sh
AM_TESTS_ENVIRONMENT = DPG_PLAN=$(abs_builddir)/dpg-plan \
	DPG_SRCDIR=$(abs_top_srcdir) DPG_BUILDDIR=$(abs_builddir); export DPG_PLAN DPG_SRCDIR DPG_BUILDDIR;
UNIT_LDADD = libdpglaunch.la libdpgcommon.la $(CMOCKA_LIBS)
UNIT_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_hostlist_SOURCES = tests/unit/test_hostlist.c
tests_unit_test_hostlist_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_hostlist_LDADD = $(UNIT_LDADD)
if HAVE_LIBSLURM
tests_unit_test_hostlist_CPPFLAGS = $(ALL_CPPFLAGS) $(SLURM_CPPFLAGS) -DDPG_TEST_LIBSLURM=1
tests_unit_test_hostlist_LDADD += -lslurm
else
tests_unit_test_hostlist_CPPFLAGS = $(ALL_CPPFLAGS)
endif
tests_unit_test_taskdist_SOURCES = tests/unit/test_taskdist.c
tests_unit_test_taskdist_CPPFLAGS = $(ALL_CPPFLAGS)
tests_unit_test_taskdist_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_taskdist_LDADD = $(UNIT_LDADD)
tests_unit_test_port_SOURCES = tests/unit/test_port.c
tests_unit_test_port_CPPFLAGS = $(ALL_CPPFLAGS)
tests_unit_test_port_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_port_LDADD = $(UNIT_LDADD)
tests_unit_test_port_collisions_SOURCES = tests/unit/test_port_collisions.c
tests_unit_test_port_collisions_CPPFLAGS = $(ALL_CPPFLAGS)
tests_unit_test_port_collisions_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_port_collisions_LDADD = $(UNIT_LDADD)
tests_unit_test_conf_SOURCES = tests/unit/test_conf.c
tests_unit_test_conf_CPPFLAGS = $(ALL_CPPFLAGS)
tests_unit_test_conf_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_conf_LDADD = $(UNIT_LDADD)
tests_unit_test_contract_SOURCES = tests/unit/test_contract.c
tests_unit_test_contract_CPPFLAGS = $(ALL_CPPFLAGS)
tests_unit_test_contract_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_contract_LDADD = $(UNIT_LDADD)
tests_unit_test_cli_SOURCES = tests/unit/test_cli.c
tests_unit_test_cli_CPPFLAGS = $(ALL_CPPFLAGS)
tests_unit_test_cli_CFLAGS = $(UNIT_CFLAGS) -DDPG_PLAN_PATH='"$(abs_builddir)/dpg-plan"'
tests_unit_test_cli_LDADD = $(UNIT_LDADD)
tests_unit_test_cli_DEPENDENCIES = dpg-plan libdpglaunch.la
tests_unit_test_plan_SOURCES = tests/unit/test_plan.c
tests_unit_test_plan_CPPFLAGS = $(ALL_CPPFLAGS) -DDPG_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_plan_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_plan_LDADD = $(UNIT_LDADD)
tests_unit_test_gpuvis_SOURCES = tests/unit/test_gpuvis.c
tests_unit_test_gpuvis_CPPFLAGS = $(ALL_CPPFLAGS) -DDPG_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_gpuvis_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_gpuvis_LDADD = $(UNIT_LDADD)
tests_unit_test_joinenv_SOURCES = tests/unit/test_joinenv.c
tests_unit_test_joinenv_CPPFLAGS = $(ALL_CPPFLAGS)
tests_unit_test_joinenv_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_joinenv_LDADD = libdpglaunch.la $(RT_LDADD)
RT_LDADD = libdpgtrain.la libdpgrt.la libdpgcommon.la $(CMOCKA_LIBS) -lm -lpthread
tests_unit_test_store_SOURCES = tests/unit/test_store.c
tests_unit_test_store_CPPFLAGS = $(ALL_CPPFLAGS)
tests_unit_test_store_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_store_LDADD = $(RT_LDADD)
tests_unit_test_coll_SOURCES = tests/unit/test_coll.c
tests_unit_test_coll_CPPFLAGS = $(ALL_CPPFLAGS)
tests_unit_test_coll_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_coll_LDADD = $(RT_LDADD)
tests_unit_test_runtime_SOURCES = tests/unit/test_runtime.c tests/unit/ranks.h tests/unit/testenv.h
tests_unit_test_runtime_CPPFLAGS = $(ALL_CPPFLAGS)
tests_unit_test_runtime_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_runtime_LDADD = $(RT_LDADD)
tests_unit_test_zlayout_SOURCES = tests/unit/test_zlayout.c
tests_unit_test_zlayout_CPPFLAGS = $(ALL_CPPFLAGS)
tests_unit_test_zlayout_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_zlayout_LDADD = $(RT_LDADD)
tests_unit_test_optim_SOURCES = tests/unit/test_optim.c
tests_unit_test_optim_CPPFLAGS = $(ALL_CPPFLAGS)
tests_unit_test_optim_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_optim_LDADD = $(RT_LDADD)
tests_unit_test_ckpt_SOURCES = tests/unit/test_ckpt.c
tests_unit_test_ckpt_CPPFLAGS = $(ALL_CPPFLAGS)
tests_unit_test_ckpt_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_ckpt_LDADD = $(RT_LDADD)
tests_unit_test_mlp_SOURCES = tests/unit/test_mlp.c examples/mlp.h
tests_unit_test_mlp_CPPFLAGS = $(ALL_CPPFLAGS) -I$(srcdir)/examples
tests_unit_test_mlp_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_mlp_LDADD = $(RT_LDADD)
tests_unit_test_zero_SOURCES = tests/unit/test_zero.c tests/unit/ranks.h tests/unit/testenv.h
tests_unit_test_zero_CPPFLAGS = $(ALL_CPPFLAGS)
tests_unit_test_zero_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_zero_LDADD = $(RT_LDADD)
tests_unit_runtime_test_net_SOURCES = tests/unit/runtime/test_net.c tests/unit/testenv.h
tests_unit_runtime_test_net_CPPFLAGS = $(ALL_CPPFLAGS)
tests_unit_runtime_test_net_CFLAGS = $(UNIT_CFLAGS)
tests_unit_runtime_test_net_LDADD = $(RT_LDADD)
tests_unit_runtime_test_sha256_SOURCES = tests/unit/runtime/test_sha256.c
tests_unit_runtime_test_sha256_CPPFLAGS = $(ALL_CPPFLAGS)
tests_unit_runtime_test_sha256_CFLAGS = $(UNIT_CFLAGS)
tests_unit_runtime_test_sha256_LDADD = $(RT_LDADD)
tests_unit_runtime_test_reduce_SOURCES = tests/unit/runtime/test_reduce.c
tests_unit_runtime_test_reduce_CPPFLAGS = $(ALL_CPPFLAGS)
tests_unit_runtime_test_reduce_CFLAGS = $(UNIT_CFLAGS)
tests_unit_runtime_test_reduce_LDADD = $(RT_LDADD)
tests_unit_runtime_test_shm_SOURCES = tests/unit/runtime/test_shm.c
tests_unit_runtime_test_shm_CPPFLAGS = $(ALL_CPPFLAGS)
tests_unit_runtime_test_shm_CFLAGS = $(UNIT_CFLAGS)
tests_unit_runtime_test_shm_LDADD = $(RT_LDADD)
tests_unit_train_test_detsum_SOURCES = tests/unit/train/test_detsum.c
tests_unit_train_test_detsum_CPPFLAGS = $(ALL_CPPFLAGS)
tests_unit_train_test_detsum_CFLAGS = $(UNIT_CFLAGS)
tests_unit_train_test_detsum_LDADD = $(RT_LDADD)
tests_unit_launch_test_opts_SOURCES = tests/unit/launch/test_opts.c
tests_unit_launch_test_opts_CPPFLAGS = $(ALL_CPPFLAGS)
tests_unit_launch_test_opts_CFLAGS = $(UNIT_CFLAGS)
tests_unit_launch_test_opts_LDADD = $(UNIT_LDADD)
tests_unit_common_test_parse_SOURCES = tests/unit/common/test_parse.c
tests_unit_common_test_parse_CPPFLAGS = $(ALL_CPPFLAGS)
tests_unit_common_test_parse_CFLAGS = $(UNIT_CFLAGS)
tests_unit_common_test_parse_LDADD = $(UNIT_LDADD)
tests_unit_common_test_env_SOURCES = tests/unit/common/test_env.c
tests_unit_common_test_env_CPPFLAGS = $(ALL_CPPFLAGS)
tests_unit_common_test_env_CFLAGS = $(UNIT_CFLAGS)
tests_unit_common_test_env_LDADD = $(UNIT_LDADD)
else
check-local:
	@echo "make check: cmocka not found (install libcmocka-dev and re-run configure)" >&2; exit 1
endif

