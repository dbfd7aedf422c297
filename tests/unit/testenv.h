/* SPDX-License-Identifier: BSD-3-Clause */
/* testenv.h - what every multi-process test of libdpg does to its ranks'
 * environment: drop what a launcher left, set integers, a free port.  No
 * cmocka here. */
#ifndef DPG_TEST_TESTENV_H
#define DPG_TEST_TESTENV_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

extern char **environ;

/* Remove every variable a launcher (srun, torchrun, MPI, an outer dpg job)
 * could have left, so that the ranks join only the job the test describes. */
static inline void clean_env(void)
{
	static const char *const prefixes[] = { "SLURM_", "DPG_", "OMPI_", "PMI_",
						"PMIX_", "TORCHELASTIC_" };
	static const char *const names[] = { "RANK", "WORLD_SIZE", "LOCAL_RANK",
					     "LOCAL_WORLD_SIZE", "NODE_RANK",
					     "GROUP_RANK", "GROUP_WORLD_SIZE",
					     "MASTER_ADDR", "MASTER_PORT",
					     "MPI_LOCALRANKID", "MPI_LOCALNRANKS",
					     "SLURMD_NODENAME" };
	bool again = true;

	while (again) {
		again = false;
		for (char **e = environ; e != NULL && *e != NULL; e++) {
			char name[256];
			size_t n = strcspn(*e, "=");
			bool drop = false;

			if (n >= sizeof(name))
				continue;
			memcpy(name, *e, n);
			name[n] = '\0';
			for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
				if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
					drop = true;
			for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
				if (strcmp(name, names[i]) == 0)
					drop = true;
			if (drop) {
				unsetenv(name);
				again = true;	/* environ changed under us */
				break;
			}
		}
	}
}

static inline void setenv_int(const char *name, long v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%ld", v);
	setenv(name, buf, 1);
}

/* A loopback port that was free a moment ago (0 if none could be had). */
static inline uint16_t free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t sl = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	uint16_t p = 0;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &sl) == 0)
		p = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return p;
}

#endif
