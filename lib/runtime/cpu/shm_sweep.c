/* SPDX-License-Identifier: BSD-3-Clause */
/* shm_sweep.c - remove the names of node segments whose creator died before
 * every local rank attached (a SIGKILL in the rendezvous; see shm.h). */
#include "shm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* "dpg.<pid>.<8 hex digits>", as shm_seg.c names a segment. */
static bool seg_name(const char *name)
{
	int pid, end = 0;
	unsigned rnd;

	return sscanf(name, "dpg.%d.%8x%n", &pid, &rnd, &end) == 2 && pid > 0 &&
	       end > 0 && name[end] == '\0' && strlen(strrchr(name, '.')) == 9;
}

static double age_s(const struct stat *st)
{
	struct timespec now;

	if (clock_gettime(CLOCK_REALTIME, &now) != 0)
		return 0;
	return (double)(now.tv_sec - st->st_mtim.tv_sec) +
	       (double)(now.tv_nsec - st->st_mtim.tv_nsec) * 1e-9;
}

/* Stale: a regular file of this user, older than min_age_s, that no open
 * file holds locked (a creator locks it for its life, forks included). */
static bool stale(int dfd, const char *name, double min_age_s)
{
	struct stat st;
	bool ret = false;
	int fd;

	fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return false;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	    age_s(&st) >= min_age_s)
		ret = flock(fd, LOCK_EX | LOCK_NB) == 0;
	close(fd);	/* drops the probe's lock */
	return ret;
}

int dpg_shm_sweep(const char *dir, double min_age_s)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int removed = 0;

	if (d == NULL)
		return 0;
	while ((de = readdir(d)) != NULL)
		if (seg_name(de->d_name) && stale(dirfd(d), de->d_name, min_age_s) &&
		    unlinkat(dirfd(d), de->d_name, 0) == 0)
			removed++;
	closedir(d);
	return removed;
}
