/* SPDX-License-Identifier: BSD-3-Clause */
/* storeproc.h - a rendezvous store served by a forked process for the
 * multi-rank unit tests, so that the test runner itself stays single-threaded. */
#ifndef DPG_TEST_STOREPROC_H
#define DPG_TEST_STOREPROC_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store.h"

/* Fill secret with random bytes and start a store process for it on
 * 127.0.0.1; *port gets its port.  Returns the process, or -1. */
static pid_t storeproc_start(uint8_t *secret, size_t len, uint16_t *port)
{
	int fds[2];
	pid_t pid;

	if (getrandom(secret, len, 0) != (ssize_t)len || pipe(fds) != 0)
		return -1;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		struct dpg_store_server *srv;
		struct dpg_err err = { "" };
		uint16_t p = 0;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(fds[0]);
		if (dpg_store_server_start("127.0.0.1", 0, secret, len, &srv, &err) != 0)
			fprintf(stderr, "store: %s\n", err.msg);
		else
			p = dpg_store_server_port(srv);
		if (write(fds[1], &p, sizeof(p)) != (ssize_t)sizeof(p) || p == 0)
			_exit(1);
		for (;;)
			pause();
	}
	close(fds[1]);
	if (read(fds[0], port, sizeof(*port)) != (ssize_t)sizeof(*port) || *port == 0) {
		close(fds[0]);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -1;
	}
	close(fds[0]);
	return pid;
}

static void storeproc_stop(pid_t pid)
{
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
}

#endif
