/* SPDX-License-Identifier: BSD-3-Clause */
/* probe.h - dpg-check's local probes: what a task sees of its node, read
 * from /proc and /sys under a root directory (tests feed a fake tree). */
#ifndef DPG_LIB_PROBE_H
#define DPG_LIB_PROBE_H

#include <stdbool.h>
#include <stdint.h>

#include "checkrow.h"

/* root: "" for the real system, else a directory holding proc/, sys/ and
 * dev/shm the way / does.  Each probe fills one cell: OK with a short value,
 * FAIL with what is wrong and how to fix it, or N/A (nothing asked). */

/* Open files one process of a world of `world` ranks needs (the formula is
 * in doc/dpg-check.1): DPG_CHECK_FD_BASE for the program itself, per
 * communicator (DPG_CHECK_FD_COMMS of them) a TCP listener, two channels to
 * each ring neighbour and a shared-memory segment, two store connections
 * (client + hang-report responder); rank 0 adds the store's listener, epoll
 * and spare descriptors and two connections per rank. */
#define DPG_CHECK_FD_BASE 64
#define DPG_CHECK_FD_COMMS 4
#define DPG_CHECK_FD_PER_COMM 6
uint64_t dpg_check_nofile_need(int world, bool rank0);

/* Bytes of /dev/shm one node's segment needs with `local` tasks: the
 * largest the CPU backend makes (4 sets x local x 1 MiB slots, the size it
 * takes when the node is oversubscribed; 8 sets of 256 KiB otherwise; at
 * most 64 MiB) and a MiB for its header and pipes. */
uint64_t dpg_check_shm_need(int local);

/* "Max open files" of <root>/proc/self/limits (soft limit) vs the need. */
void dpg_probe_nofile(const char *root, int world, bool rank0,
		      struct dpg_check_cell *c);
/* <root>/proc/sys/net/core/somaxconn vs 2 x world (every rank's two store
 * connections arriving at once at rank 0's listener). */
void dpg_probe_somaxconn(const char *root, int world, struct dpg_check_cell *c);
/* Free space of <root>/dev/shm vs dpg_check_shm_need(local). */
void dpg_probe_shm(const char *root, int local, struct dpg_check_cell *c);
/* DPG_CPUS (the plan; NULL or "": not bound) vs Cpus_allowed_list of
 * <root>/proc/self/status. */
void dpg_probe_cpus(const char *root, const char *planned, struct dpg_check_cell *c);
/* DPG_GPUS (comma-separated PCI bus ids) vs <root>/sys/bus/pci/devices and
 * the visible devices (CUDA_VISIBLE_DEVICES value, may be NULL). */
void dpg_probe_gpus(const char *root, const char *planned, const char *visible,
		    struct dpg_check_cell *c);
/* DPG_NICS ("mlx5_0,mlx5_1", "mlx5_0:1", or "eth0" where the plan found no
 * RDMA NIC): an RDMA device's <root>/sys/class/infiniband/<dev>/ports/<port
 * (1)>/{state,phys_state} must be ACTIVE and LinkUp, a network interface's
 * <root>/sys/class/net/<dev>/operstate up (or unknown). */
void dpg_probe_nics(const char *root, const char *planned, struct dpg_check_cell *c);
/* The interface towards MASTER_ADDR: <root>/sys/class/net/<ifname>/operstate
 * must be up (or unknown: loopback, some virtual links).  Appends to value. */
void dpg_probe_ifup(const char *root, const char *ifname, struct dpg_check_cell *c);

#endif
