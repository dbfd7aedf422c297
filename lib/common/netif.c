/* SPDX-License-Identifier: BSD-3-Clause */
/* netif.c - the local address and interface that route to a host, found by
 * connect()ing a UDP socket (no packet is sent) and looking the address up
 * in getifaddrs.  Pure libc, no threads: safe in slurmstepd. */
#include "netif.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The local IPv4 address the kernel picks to reach host. */
static int route_local(const char *host, struct sockaddr_in *local,
		       struct dpg_err *err)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_DGRAM };
	struct addrinfo *ai = NULL;
	socklen_t sl = sizeof(*local);
	int fd, rc = 0, gai;

	if (host == NULL || *host == '\0')
		return dpg_errs(err, DPG_ERR_ENV, "no host to route to");
	if ((gai = getaddrinfo(host, "9", &hints, &ai)) != 0 || ai == NULL)
		return dpg_errs(err, DPG_ERR_ENV, "cannot resolve %s: %s", host,
				gai_strerror(gai));
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		rc = dpg_errs(err, DPG_ERR_SYSTEM, "socket: %s", strerror(errno));
	else if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0)
		rc = dpg_errs(err, DPG_ERR_ENV, "no route to %s: %s", host,
			      strerror(errno));
	else if (getsockname(fd, (struct sockaddr *)local, &sl) != 0)
		rc = dpg_errs(err, DPG_ERR_SYSTEM, "getsockname: %s", strerror(errno));
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	return rc;
}

int dpg_route_addr(const char *host, char *out, size_t len, struct dpg_err *err)
{
	struct sockaddr_in local;
	int rc;

	if (len > 0)
		out[0] = '\0';
	if ((rc = route_local(host, &local, err)) != 0)
		return rc;
	if (inet_ntop(AF_INET, &local.sin_addr, out, (socklen_t)len) == NULL) {
		if (len > 0)
			out[0] = '\0';
		return dpg_errs(err, DPG_ERR_SYSTEM, "inet_ntop: %s", strerror(errno));
	}
	return 0;
}

int dpg_route_ifname(const char *host, char *out, size_t len, struct dpg_err *err)
{
	struct sockaddr_in local;
	struct ifaddrs *ifs = NULL;
	int rc;

	if (len > 0)
		out[0] = '\0';
	if ((rc = route_local(host, &local, err)) != 0)
		return rc;
	if (getifaddrs(&ifs) != 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "getifaddrs: %s", strerror(errno));
	rc = 1;
	for (struct ifaddrs *i = ifs; i != NULL; i = i->ifa_next) {
		const struct sockaddr_in *a = (const void *)i->ifa_addr;

		if (a != NULL && a->sin_family == AF_INET &&
		    a->sin_addr.s_addr == local.sin_addr.s_addr &&
		    strlen(i->ifa_name) < len) {
			snprintf(out, len, "%s", i->ifa_name);
			rc = 0;
			break;
		}
	}
	freeifaddrs(ifs);
	if (rc != 0)
		return dpg_errs(err, DPG_ERR_ENV, "the route to %s uses no local "
				"interface", host);
	return 0;
}
