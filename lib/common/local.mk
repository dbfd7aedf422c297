# SPDX-License-Identifier: BSD-3-Clause
# lib/common/local.mk - pure C shared by every wing: errors, parsing, the
# environment table, contract facts, Slurm's hostlist/task/port grammars, dtypes,
# netif.c's one-shot route lookup (a UDP connect, no threads, no listener) and
# portcheck.c's one-shot bind (is MASTER_PORT free, asked as the listener binds).
noinst_LTLIBRARIES += libdpgcommon.la
libdpgcommon_la_SOURCES = \
	lib/common/err.c lib/common/err.h \
	lib/common/parse.c lib/common/parse.h \
	lib/common/env.c lib/common/env.h \
	lib/common/contract_vars.h \
	lib/common/hostlist.c lib/common/hostlist.h \
	lib/common/taskdist.c lib/common/taskdist.h \
	lib/common/port.c lib/common/port.h \
	lib/common/netif.c lib/common/netif.h \
	lib/common/portcheck.c lib/common/portcheck.h \
	lib/common/fdio.c lib/common/fdio.h \
	lib/common/dtype.h lib/common/le.h
libdpgcommon_la_CPPFLAGS = $(COMMON_CPPFLAGS)
