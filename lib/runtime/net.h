/* SPDX-License-Identifier: BSD-3-Clause */
/* net.h - TCP with deadlines: listen, connect with retry and backoff, and
 * whole-buffer reads and writes that end by a deadline instead of hanging. */
#ifndef DPG_LIB_NET_H
#define DPG_LIB_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* Return codes besides 0 (err.h's convention): -DPG_ERR_SYSTEM,
 * -DPG_ERR_TIMEOUT (the deadline passed), -DPG_ERR_PEER (the peer closed or
 * reset the connection), -DPG_ERR_ABORTED (the abort flag was raised). */

/* Monotonic milliseconds; deadlines are absolute values of this clock. */
int64_t dpg_now_ms(void);

/* Listen on addr (NULL = all IPv4 addresses) and port (0 = any free one);
 * *bound gets the port.  SO_REUSEADDR, close-on-exec. */
int dpg_net_listen(const char *addr, uint16_t port, int backlog, int *fd,
		   uint16_t *bound, struct dpg_err *err);

/* Connect to host:port, retrying refused/reset/unreachable with exponential
 * backoff and jitter until the deadline.  TCP_NODELAY, close-on-exec,
 * blocking.  abort (may be NULL) is polled between attempts. */
int dpg_net_connect(const char *host, uint16_t port, int64_t deadline_ms,
		    const volatile int *abort, int *fd, struct dpg_err *err);

/* Write / read exactly len bytes, or fail by the deadline.  Works on
 * blocking and non-blocking sockets; never raises SIGPIPE. */
int dpg_net_write_full(int fd, const void *buf, size_t len, int64_t deadline_ms,
		       const volatile int *abort, struct dpg_err *err);
int dpg_net_read_full(int fd, void *buf, size_t len, int64_t deadline_ms,
		      const volatile int *abort, struct dpg_err *err);

/* O_NONBLOCK on or off: 0 or -DPG_ERR_SYSTEM (errno says why). */
int dpg_net_set_nonblock(int fd, bool on);

/* "host:port" of the peer of fd, for messages ("?" on failure). */
void dpg_net_peer_name(int fd, char *buf, size_t len);

#endif
