/* SPDX-License-Identifier: BSD-3-Clause */
/* fdio.c - whole writes to a descriptor (fdio.h), the one loop for every
 * writer of lib/launch. */
#include "fdio.h"

#include <errno.h>
#include <stdint.h>
#include <unistd.h>

int dpg_write_full(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = EIO;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}
