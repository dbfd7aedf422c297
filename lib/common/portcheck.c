/* SPDX-License-Identifier: BSD-3-Clause */
/* portcheck.c - is MASTER_PORT free: a bind with the listener's options
 * (SO_REUSEADDR), closed at once.  Pure libc, no threads: safe in slurmstepd. */
#include "portcheck.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int dpg_port_check_free(uint16_t port, struct dpg_err *err)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd, e, one = 1, rc = 0;

	a.sin_addr.s_addr = htonl(INADDR_ANY);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "port check: socket: %s",
				strerror(errno));
	/* as dpg_net_listen: TIME_WAIT left by the previous step is no obstacle */
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
		e = errno;
		(void)close(fd);
		return dpg_errs(err, DPG_ERR_SYSTEM, "port check: SO_REUSEADDR: %s",
				strerror(e));
	}
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		e = errno;
		rc = e == EADDRINUSE ?
			dpg_errs(err, DPG_ERR_ENV, "port %u is already in use (a process "
				 "listens on it)", (unsigned)port) :
			dpg_errs(err, DPG_ERR_SYSTEM, "port check: bind to port %u: %s",
				 (unsigned)port, strerror(e));
	}
	(void)close(fd);	/* never listened: nothing to lose */
	return rc;
}
