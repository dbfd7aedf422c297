/* SPDX-License-Identifier: BSD-3-Clause */
/* cma.c - process_vm_readv / process_vm_writev until every byte has moved,
 * and the one-word check a communicator runs before it relies on them. */
#include "cma.h"

#include <errno.h>
#include <stdbool.h>
#include <sys/uio.h>

/* Move len bytes between our buf and process pid's raddr, either way. */
static int cma_move(pid_t pid, char *buf, uint64_t raddr, size_t len, bool write)
{
	while (len > 0) {
		struct iovec l = { buf, len }, r = { (void *)(uintptr_t)raddr, len };
		ssize_t got = write ? process_vm_writev(pid, &l, 1, &r, 1, 0)
				    : process_vm_readv(pid, &l, 1, &r, 1, 0);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return -errno;
		if (got == 0)
			return -EIO;
		buf += got;
		raddr += (uint64_t)got;
		len -= (size_t)got;
	}
	return 0;
}

int dpg_cma_read(pid_t pid, void *dst, uint64_t raddr, size_t len)
{
	return cma_move(pid, dst, raddr, len, false);
}

int dpg_cma_write(pid_t pid, uint64_t raddr, const void *src, size_t len)
{
	return cma_move(pid, (char *)(uintptr_t)src, raddr, len, true);
}

int dpg_cma_check(pid_t pid, uint64_t raddr, uint64_t want)
{
	uint64_t v = ~want;
	int rc = dpg_cma_read(pid, &v, raddr, sizeof(v));

	if (rc != 0)
		return rc;
	if (v != want)
		return -EIO;
	return dpg_cma_write(pid, raddr, &want, sizeof(want));
}
