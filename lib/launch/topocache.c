/* SPDX-License-Identifier: BSD-3-Clause */
/* topocache.c - the node's topology cache file: a safe walk to its root-owned
 * directory, reading it back, replacing it atomically, and the load that ties
 * them to live discovery (topocache.h says the rules). */
#include "topocache.h"
#include "fdio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define OPEN_DIR_CLOEXEC (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)

/* ------------------------------------------------------------ directory */

/* st is a safe directory: owner root (or owner), not writable by group or
 * others, unless an ancestor (!last) with the sticky bit. */
static int check_dir(const struct stat *st, const char *path, uid_t owner, bool last,
		     struct dpg_err *err)
{
	char q[200];

	if (!S_ISDIR(st->st_mode))
		return dpg_errf(err, "topology cache: \"%s\" is not a directory",
				dpg_err_quote(path, q, sizeof(q)));
	if (st->st_uid != 0 && st->st_uid != owner)
		return dpg_errf(err, "topology cache: \"%s\" is owned by uid %u, not root: "
				"not used", dpg_err_quote(path, q, sizeof(q)),
				(unsigned)st->st_uid);
	if ((st->st_mode & (S_IWGRP | S_IWOTH)) != 0 && (last || !(st->st_mode & S_ISVTX)))
		return dpg_errf(err, "topology cache: \"%s\" is writable by group or others "
				"(mode %04o): not used", dpg_err_quote(path, q, sizeof(q)),
				(unsigned)(st->st_mode & 07777));
	return 0;
}

/* Open (or create) one component below fd; *nfd is the new descriptor. */
static int open_component(int fd, const char *name, const char *path, bool create,
			  bool last, int *nfd, struct dpg_err *err)
{
	char q[200];

	*nfd = openat(fd, name, OPEN_DIR_CLOEXEC);
	if (*nfd < 0 && errno == ENOENT && create) {
		if (mkdirat(fd, name, last ? 0700 : 0755) != 0 && errno != EEXIST)
			return dpg_errs(err, DPG_ERR_SYSTEM, "topology cache: cannot create "
					"\"%s\": %s", dpg_err_quote(path, q, sizeof(q)),
					strerror(errno));
		*nfd = openat(fd, name, OPEN_DIR_CLOEXEC);
	}
	if (*nfd >= 0)
		return 0;
	if (errno == ENOENT)
		return dpg_errs(err, DPG_ERR_ENV, "topology cache: no directory \"%s\"",
				dpg_err_quote(path, q, sizeof(q)));
	if (errno == ELOOP || errno == ENOTDIR)
		return dpg_errf(err, "topology cache: \"%s\" is a symbolic link or not a "
				"directory: not used", dpg_err_quote(path, q, sizeof(q)));
	return dpg_errs(err, DPG_ERR_SYSTEM, "topology cache: cannot open \"%s\": %s",
			dpg_err_quote(path, q, sizeof(q)), strerror(errno));
}

int dpg_topo_cache_dir_open(const char *dir, uid_t owner, bool create, int *fd,
			    struct dpg_err *err)
{
	char path[DPG_TOPO_PATH_MAX], sofar[DPG_TOPO_PATH_MAX] = "";
	char *save = NULL, *name;
	struct stat st;
	int cur, rc = 0;

	*fd = -1;
	if (dir == NULL || dir[0] != '/' || strlen(dir) >= sizeof(path))
		return dpg_errf(err, "topology cache: \"%.200s\" is not an absolute path "
				"shorter than %zu bytes", dir ? dir : "", sizeof(path));
	snprintf(path, sizeof(path), "%s", dir);
	cur = open("/", OPEN_DIR_CLOEXEC);
	if (cur < 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "topology cache: cannot open /: %s",
				strerror(errno));
	name = strtok_r(path, "/", &save);
	if (fstat(cur, &st) != 0 || check_dir(&st, "/", owner, name == NULL, err) != 0)
		rc = -DPG_ERR_INVALID;
	while (rc == 0 && name != NULL) {
		char *next = strtok_r(NULL, "/", &save);
		int nfd;

		if (strcmp(name, "..") == 0 || strcmp(name, ".") == 0) {
			rc = dpg_errf(err, "topology cache: \"%.200s\" has a . or .. component",
				      dir);
			break;
		}
		snprintf(sofar + strlen(sofar), sizeof(sofar) - strlen(sofar), "/%s", name);
		rc = open_component(cur, name, sofar, create, next == NULL, &nfd, err);
		if (rc != 0)
			break;
		close(cur);
		cur = nfd;
		if (fstat(cur, &st) != 0 || check_dir(&st, sofar, owner, next == NULL, err) != 0)
			rc = -DPG_ERR_INVALID;
		name = next;
	}
	if (rc != 0) {
		close(cur);
		return rc;
	}
	*fd = cur;
	return 0;
}

/* ------------------------------------------------------------ the file */

/* The whole regular file fd (at most DPG_TOPO_CACHE_MAX bytes) in *buf. */
static int read_all(int fd, uid_t owner, char **buf, size_t *len, struct dpg_err *err)
{
	struct stat st;
	size_t got = 0;

	if (fstat(fd, &st) != 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "topology cache: fstat: %s", strerror(errno));
	if (!S_ISREG(st.st_mode) || (st.st_uid != 0 && st.st_uid != owner) ||
	    (st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
		return dpg_errf(err, "topology cache file is not a regular file of root's "
				"that only root may write (uid %u, mode %04o)",
				(unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	if (st.st_size <= 0 || (uint64_t)st.st_size > DPG_TOPO_CACHE_MAX)
		return dpg_errf(err, "topology cache file has %lld bytes", (long long)st.st_size);
	*buf = malloc((size_t)st.st_size + 1);
	if (*buf == NULL)
		return dpg_errs(err, DPG_ERR_NOMEM, "out of memory (topology cache)");
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, *buf + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	(*buf)[got] = '\0';
	*len = got;
	return 0;
}

int dpg_topo_cache_read(int dirfd, uid_t owner, const char *key, size_t keylen,
			char **xml, size_t *xml_len, struct dpg_err *err)
{
	char *buf = NULL;
	size_t len = 0;
	int fd, rc;

	*xml = NULL;
	*xml_len = 0;
	fd = openat(dirfd, DPG_TOPO_CACHE_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0)
		return errno == ELOOP ?
			dpg_errf(err, "topology cache file is a symbolic link") :
			dpg_errf(err, "cannot open the topology cache file: %s", strerror(errno));
	rc = read_all(fd, owner, &buf, &len, err);
	close(fd);
	if (rc != 0)
		return -DPG_ERR_INVALID;
	if (len <= keylen || memcmp(buf, key, keylen) != 0) {
		free(buf);
		return dpg_errf(err, "topology cache is stale (another boot, hwloc, CPU or "
				"PCI device list) or truncated");
	}
	memmove(buf, buf + keylen, len - keylen + 1);
	*xml = buf;
	*xml_len = len - keylen;
	return 1;
}

/* A fresh temporary name in the cache directory. */
static int temp_name(char *name, size_t len, struct dpg_err *err)
{
	unsigned char r[8];

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return dpg_errs(err, DPG_ERR_SYSTEM, "topology cache: getrandom: %s",
				strerror(errno));
	snprintf(name, len, ".%s.%02x%02x%02x%02x%02x%02x%02x%02x", DPG_TOPO_CACHE_FILE,
		 r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
	return 0;
}

int dpg_topo_cache_write(int dirfd, const char *key, size_t keylen,
			 const char *xml, size_t xml_len, struct dpg_err *err)
{
	char tmp[64];
	int fd, e;

	if (temp_name(tmp, sizeof(tmp), err) != 0)
		return -DPG_ERR_SYSTEM;
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "topology cache: cannot create %s: %s",
				tmp, strerror(errno));
	if (fchmod(fd, 0644) != 0 || dpg_write_full(fd, key, keylen) != 0 ||
	    dpg_write_full(fd, xml, xml_len) != 0 || fsync(fd) != 0) {
		e = errno;
		close(fd);
		unlinkat(dirfd, tmp, 0);
		return dpg_errs(err, DPG_ERR_SYSTEM, "topology cache: cannot write %s: %s",
				tmp, strerror(e));
	}
	if (close(fd) != 0 || renameat(dirfd, tmp, dirfd, DPG_TOPO_CACHE_FILE) != 0) {
		e = errno;
		unlinkat(dirfd, tmp, 0);
		return dpg_errs(err, DPG_ERR_SYSTEM, "topology cache: cannot save %s: %s",
				DPG_TOPO_CACHE_FILE, strerror(e));
	}
	(void)fsync(dirfd);	/* the rename's durability: best effort */
	return 0;
}

int dpg_topo_cache_discard(int dirfd, struct dpg_err *err)
{
	if (unlinkat(dirfd, DPG_TOPO_CACHE_FILE, 0) != 0 && errno != ENOENT)
		return dpg_errs(err, DPG_ERR_SYSTEM, "topology cache: cannot remove %s: %s",
				DPG_TOPO_CACHE_FILE, strerror(errno));
	return 0;
}
