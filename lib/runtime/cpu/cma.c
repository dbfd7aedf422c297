/* SPDX-License-Identifier: BSD-3-Clause */
/* cma.c - process_vm_readv until every byte is in, and the one-word check
 * a communicator runs before it relies on it (see cma.h). */
#include "cma.h"

#include <errno.h>
#include <sys/uio.h>

int dpg_cma_read(pid_t pid, void *dst, uint64_t raddr, size_t len)
{
	char *d = dst;

	while (len > 0) {
		struct iovec l = { d, len }, r = { (void *)(uintptr_t)raddr, len };
		ssize_t got = process_vm_readv(pid, &l, 1, &r, 1, 0);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return -errno;
		if (got == 0)
			return -EIO;
		d += got;
		raddr += (uint64_t)got;
		len -= (size_t)got;
	}
	return 0;
}

int dpg_cma_check(pid_t pid, uint64_t raddr, uint64_t want)
{
	uint64_t v = ~want;
	int rc = dpg_cma_read(pid, &v, raddr, sizeof(v));

	if (rc != 0)
		return rc;
	return v == want ? 0 : -EIO;
}
