/* SPDX-License-Identifier: BSD-3-Clause */
/* fdio.h - whole writes to a descriptor, past short writes and EINTR
 * (the topology child's verdict, the topology cache file). */
#ifndef DPG_LIB_FDIO_H
#define DPG_LIB_FDIO_H

#include <stddef.h>

/* Write all len bytes of buf to fd.  Returns 0, or -1 with errno set (a
 * write that wrote nothing counts as failed, errno EIO if it did not say). */
int dpg_write_full(int fd, const void *buf, size_t len);

#endif
