/* SPDX-License-Identifier: BSD-3-Clause */
/* netif.h - which local interface and address route to a host: a one-shot
 * syscall helper shared by the plugin (inside slurmstepd) and the runtime. */
#ifndef DPG_LIB_NETIF_H
#define DPG_LIB_NETIF_H

#include <stddef.h>

#include "err.h"

/* Contract of both functions:
 * - host is a name or a numeric IPv4 address (MASTER_ADDR); it is resolved
 *   with getaddrinfo (AF_INET), so a name may cost one resolver lookup;
 * - the route is asked of the kernel by connect()ing a UDP socket to host
 *   (port 9, discard): no packet is sent, nothing listens, the socket is
 *   closed before returning;
 * - no threads, no signals, no global state, no allocation kept: safe in
 *   slurmstepd and in any thread of the runtime;
 * - on success out holds a NUL-terminated string that fits len; on failure
 *   out is "" and the return is -DPG_ERR_ENV (no such host, no route, or the
 *   address is on no interface) or -DPG_ERR_SYSTEM (a syscall failed), with
 *   the reason in err (optional).  IPv4 only, like MASTER_ADDR today. */

/* The local IPv4 address ("10.0.0.5") the kernel would use to reach host;
 * len >= 16 (INET_ADDRSTRLEN) always suffices. */
int dpg_route_addr(const char *host, char *out, size_t len, struct dpg_err *err);

/* The name of the interface ("ib0", "eth0") holding that address;
 * len >= 16 (IF_NAMESIZE) always suffices. */
int dpg_route_ifname(const char *host, char *out, size_t len, struct dpg_err *err);

#endif
