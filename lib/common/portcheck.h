/* SPDX-License-Identifier: BSD-3-Clause */
/* portcheck.h - is a TCP port free for the rendezvous store?  Asked the way
 * the store's own listener binds (SO_REUSEADDR), so TIME_WAIT is free. */
#ifndef DPG_LIB_PORTCHECK_H
#define DPG_LIB_PORTCHECK_H

#include <stdint.h>

#include "err.h"

/* Bind a TCP socket to INADDR_ANY:port exactly as dpg_net_listen will
 * (SO_REUSEADDR, close-on-exec), then close it; nothing listens, no
 * packet is sent.  0: the listener will be able to bind (connections of a
 * previous step left in TIME_WAIT do not count); -DPG_ERR_ENV: a process
 * listens on the port (or holds it bound); -DPG_ERR_SYSTEM: a syscall
 * failed.  The reason goes to err (optional).  No threads, no state: safe
 * in slurmstepd. */
int dpg_port_check_free(uint16_t port, struct dpg_err *err);

#endif
