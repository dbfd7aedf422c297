# SPDX-License-Identifier: BSD-3-Clause
# lib/launch/local.mk - what the plugin (inside slurmstepd) and dpg-plan link:
# conf, option values, the contract, topology (hwloc), the planner, bindings.
# Never threads, sockets or NCCL; never the runtime.
noinst_LTLIBRARIES += libdpglaunch.la
libdpglaunch_la_SOURCES = \
	lib/launch/conf.c lib/launch/conf.h \
	lib/launch/killfail.c lib/launch/killfail.h \
	lib/launch/opts.c lib/launch/opts.h \
	lib/launch/requeue.c lib/launch/requeue.h \
	lib/launch/contract.c lib/launch/contract.h \
	lib/launch/cpuset.c lib/launch/cpuset.h \
	lib/launch/topo.c lib/launch/topo.h lib/launch/topo_pack.c \
	lib/launch/topocache.c lib/launch/topocache.h lib/launch/topocache_key.c \
	lib/launch/topocache_load.c \
	lib/launch/plan.c lib/launch/plan.h lib/launch/plan_fmt.c \
	lib/launch/gpuvis.c lib/launch/gpuvis.h \
	lib/launch/bindenv.c lib/launch/bindenv.h \
	lib/launch/checkrow.c lib/launch/checkrow.h lib/launch/checkrow_fmt.c \
	lib/launch/checkp2p.c lib/launch/checkp2p.h \
	lib/launch/probe.c lib/launch/probe_dev.c lib/launch/probe.h
libdpglaunch_la_CPPFLAGS = $(LAUNCH_CPPFLAGS) $(HWLOC_CFLAGS)
libdpglaunch_la_LIBADD = $(HWLOC_LIBS)
