/* SPDX-License-Identifier: BSD-3-Clause */
/* cma.h - single copies between our memory and a local peer's (Linux
 * cross-memory attach): what shm_direct.c's large copy collectives use. */
#ifndef DPG_LIB_CPU_CMA_H
#define DPG_LIB_CPU_CMA_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Read len bytes at address raddr of process pid into dst, all of them:
 * 0, or -errno (ESRCH: the process is gone; EPERM: reading it is not
 * allowed here, e.g. Yama's ptrace_scope; EFAULT: a bad address; EIO: it
 * read nothing more part way). */
int dpg_cma_read(pid_t pid, void *dst, uint64_t raddr, size_t len);

/* Write len bytes of src at address raddr of process pid, all of them:
 * 0, or -errno as dpg_cma_read (EFAULT: a bad address on either side). */
int dpg_cma_write(pid_t pid, uint64_t raddr, const void *src, size_t len);

/* Whether process pid's word at raddr reads as want through dpg_cma_read
 * and takes want back through dpg_cma_write (the same value, so nothing
 * changes): 0 yes, or -errno / -EIO for another value (how a communicator
 * decides once whether its ranks can reach each other's memory). */
int dpg_cma_check(pid_t pid, uint64_t raddr, uint64_t want);

#endif
