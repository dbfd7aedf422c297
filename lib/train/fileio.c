/* SPDX-License-Identifier: BSD-3-Clause */
/* fileio.c - durable files: whole reads and writes, directory syncs, mkdir -p,
 * trusted directories, the atomic writer (.NAME.tmp.PID.RAND, hashed, renamed). */
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "le.h"

/* ---------------------------------------------------------------- floats */

void dpg_fio_encode_floats(uint8_t *p, const float *src, size_t n)
{
	size_t i;
	uint32_t v;

	for (i = 0; i < n; i++) {
		memcpy(&v, &src[i], sizeof(v));
		dpg_le_put32(p + 4 * i, v);
	}
}

void dpg_fio_decode_floats(float *dst, const uint8_t *p, size_t n)
{
	size_t i;
	uint32_t v;

	for (i = 0; i < n; i++) {
		v = dpg_le_get32(p + 4 * i);
		memcpy(&dst[i], &v, sizeof(v));
	}
}

/* ---------------------------------------------------------------- syscalls */

int dpg_fio_write_full(int fd, const void *buf, size_t n)
{
	const unsigned char *p = buf;

	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -DPG_ERR_SYSTEM;
		if (w == 0) {
			errno = EIO;
			return -DPG_ERR_SYSTEM;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Read n bytes at off (off < 0: at the file position), fewer only at end of
 * file (*got says how many). */
int dpg_fio_pread_full(int fd, void *buf, size_t n, off_t off, size_t *got)
{
	unsigned char *p = buf;

	*got = 0;
	while (*got < n) {
		ssize_t r = off < 0 ? read(fd, p + *got, n - *got) :
				      pread(fd, p + *got, n - *got, off + (off_t)*got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -DPG_ERR_SYSTEM;
		if (r == 0)
			break;
		*got += (size_t)r;
	}
	return 0;
}

int dpg_fio_read_full(int fd, void *buf, size_t n, size_t *got)
{
	return dpg_fio_pread_full(fd, buf, n, -1, got);
}

static int fsync_retry(int fd)
{
	while (fsync(fd) != 0) {
		if (errno != EINTR)
			return -1;
	}
	return 0;
}

/* Make dir's entries durable.  EINVAL: the file system cannot sync a
 * directory (nothing more to do there). */
int dpg_fio_fsync_dir(const char *dir, struct dpg_err *err)
{
	int fd, e;

	do {
		fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	} while (fd < 0 && errno == EINTR);
	if (fd < 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "%s: cannot open the directory to sync "
				"it: %s", dir, strerror(errno));
	if (fsync_retry(fd) != 0 && errno != EINVAL) {
		e = errno;
		(void)close(fd);
		return dpg_errs(err, DPG_ERR_SYSTEM, "%s: fsync of the directory failed: %s",
				dir, strerror(e));
	}
	if (close(fd) != 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "%s: close of the directory failed: %s",
				dir, strerror(errno));
	return 0;
}

int dpg_fio_open_read(const char *path)
{
	int fd;

	do {	/* O_NONBLOCK: a FIFO under a checkpoint name must not block us;
		 * O_NOFOLLOW: a symbolic link planted under one is refused */
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
	} while (fd < 0 && errno == EINTR);
	return fd;
}

/* A read-only descriptor: nothing can be lost at close, so its result is
 * of no use. */
void dpg_fio_close_read(int fd)
{
	(void)close(fd);
}

int dpg_fio_path_join(char *buf, size_t len, const char *a, const char *b,
		      struct dpg_err *err)
{
	int n = snprintf(buf, len, "%s/%s", a, b);

	if (n < 0 || (size_t)n >= len)
		return dpg_errf(err, "checkpoint path %s/%s is longer than %zu bytes; "
				"use a shorter directory", a, b, len - 1);
	return 0;
}

/* ---------------------------------------------------------------- atomic writer */

static int wf_create(struct dpg_wfile *w, struct dpg_err *err)
{
	int e;

	do {	/* 0600: nobody else reads the weights; O_EXCL + O_NOFOLLOW: a
		 * name planted in the directory (a symlink too) is refused */
		w->fd = open(w->tmp, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW,
			     0600);
	} while (w->fd < 0 && errno == EINTR);
	if (w->fd < 0) {
		e = errno;
		return dpg_errs(err, DPG_ERR_SYSTEM, "%s: cannot create: %s", w->tmp,
				strerror(e));
	}
	w->created = 1;
	return 0;
}

/* DIR/.NAME.tmp.PID.RAND (RAND: 16 hex digits from getrandom), the exact
 * form dpg_fio_is_tmp_name recognises. */
static int wf_tmpname(struct dpg_wfile *w, const char *dir, const char *name,
		      struct dpg_err *err)
{
	unsigned long long rnd = 0;
	ssize_t r;
	int n;

	do {
		r = getrandom(&rnd, sizeof(rnd), 0);
	} while (r < 0 && errno == EINTR);
	if (r != (ssize_t)sizeof(rnd))
		return dpg_errs(err, DPG_ERR_SYSTEM, "%s/%s: no random bytes for the "
				"temporary name: %s", dir, name,
				r < 0 ? strerror(errno) : "short read");
	n = snprintf(w->tmp, sizeof(w->tmp), "%s/." DPG_FIO_TMP_FMT, dir, name,
		     (long)getpid(), rnd);
	if (n < 0 || (size_t)n >= sizeof(w->tmp))
		return dpg_errf(err, "%s: path too long for its temporary name; "
				"use a shorter directory", w->path);
	return 0;
}

int dpg_wf_open(struct dpg_wfile *w, const char *dir, const char *name,
		struct dpg_err *err)
{
	int rc;

	memset(w, 0, sizeof(*w));
	w->fd = -1;
	w->dir = dir;
	if ((rc = dpg_fio_path_join(w->path, sizeof(w->path), dir, name, err)) != 0)
		return rc;
	if ((rc = wf_tmpname(w, dir, name, err)) != 0)
		return rc;
	w->buf = malloc(DPG_FIO_BUF);
	if (!w->buf)
		return dpg_errs(err, DPG_ERR_NOMEM, "%s: out of memory for the write buffer",
				w->path);
	if ((rc = dpg_ckhash_init(&w->hash, DPG_CKHASH_V_WRITE, err)) != 0) {
		free(w->buf);
		w->buf = NULL;
		return rc;
	}
	if ((rc = wf_create(w, err)) != 0) {
		dpg_ckhash_drop(&w->hash);
		free(w->buf);
		w->buf = NULL;
		return rc;
	}
	return 0;
}

/* After any failure (not after a failed dpg_wf_open): drop the temporary file. */
void dpg_wf_abort(struct dpg_wfile *w)
{
	if (w->fd >= 0)
		(void)close(w->fd);
	w->fd = -1;
	if (w->created)
		(void)unlink(w->tmp);
	w->created = 0;
	free(w->buf);
	w->buf = NULL;
	dpg_ckhash_drop(&w->hash);
}

/* n more bytes are in the file: start their write-back once a window is
 * full, wait for the window before it and drop it from the page cache.
 * Advisory only (fsync at the end is what makes the file durable), so a
 * file system without sync_file_range loses nothing but the overlap. */
static void wf_wrote(struct dpg_wfile *w, size_t n)
{
	unsigned long long prev = w->kicked;

	w->off += n;
	if (w->off - w->kicked < DPG_FIO_WB)
		return;
	(void)sync_file_range(w->fd, (off_t)w->kicked, (off_t)(w->off - w->kicked),
			      SYNC_FILE_RANGE_WRITE);
	w->kicked = w->off;
	if (prev <= w->waited)
		return;		/* keep two windows in flight */
	(void)sync_file_range(w->fd, (off_t)w->waited, (off_t)(prev - w->waited),
			      SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
			      SYNC_FILE_RANGE_WAIT_AFTER);
	(void)posix_fadvise(w->fd, (off_t)w->waited, (off_t)(prev - w->waited),
			    POSIX_FADV_DONTNEED);
	w->waited = prev;
}

static int wf_write(struct dpg_wfile *w, const void *p, size_t n, struct dpg_err *err)
{
	if (dpg_fio_write_full(w->fd, p, n) != 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "%s: write failed: %s",
				w->tmp, strerror(errno));
	wf_wrote(w, n);
	return 0;
}

static int wf_flush(struct dpg_wfile *w, struct dpg_err *err)
{
	int rc;

	if (w->len > 0 && (rc = wf_write(w, w->buf, w->len, err)) != 0)
		return rc;
	w->len = 0;
	return 0;
}

/* Append n bytes, hashed unless raw. */
static int wf_append(struct dpg_wfile *w, const void *data, size_t n, int raw,
		     struct dpg_err *err)
{
	const unsigned char *p = data;
	int rc;

	if (!raw)
		dpg_ckhash_update(&w->hash, p, n);
	while (n > 0) {
		size_t m;

		if (w->len == DPG_FIO_BUF && (rc = wf_flush(w, err)) != 0)
			return rc;
		m = DPG_FIO_BUF - w->len;
		if (m > n)
			m = n;
		memcpy(w->buf + w->len, p, m);
		w->len += m;
		p += m;
		n -= m;
	}
	return 0;
}

int dpg_wf_put(struct dpg_wfile *w, const void *data, size_t n, struct dpg_err *err)
{
	return wf_append(w, data, n, 0, err);
}

/* A little-endian host's floats are their own encoding: hash and write
 * them in place, a write-back window at a time. */
static int wf_floats_direct(struct dpg_wfile *w, const float *src, size_t n,
			    struct dpg_err *err)
{
	const unsigned char *p = (const unsigned char *)src;
	size_t left = n * 4;
	int rc;

	if ((rc = wf_flush(w, err)) != 0)
		return rc;
	while (left > 0) {
		size_t m = left < DPG_FIO_WB ? left : DPG_FIO_WB;

		dpg_ckhash_update(&w->hash, p, m);
		if ((rc = wf_write(w, p, m, err)) != 0)
			return rc;
		p += m;
		left -= m;
	}
	return 0;
}

int dpg_wf_floats(struct dpg_wfile *w, const float *src, size_t n, struct dpg_err *err)
{
	int rc;

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	if (n >= DPG_FIO_DIRECT / 4)
		return wf_floats_direct(w, src, n, err);
#endif
	while (n > 0) {
		size_t m;

		if (DPG_FIO_BUF - w->len < 4 && (rc = wf_flush(w, err)) != 0)
			return rc;
		m = (DPG_FIO_BUF - w->len) / 4;
		if (m > n)
			m = n;
		dpg_fio_encode_floats(w->buf + w->len, src, m);
		dpg_ckhash_update(&w->hash, w->buf + w->len, 4 * m);
		w->len += 4 * m;
		src += m;
		n -= m;
	}
	return 0;
}

/* Append the digest (with_digest), flush, fsync, close, rename over NAME and
 * sync the directory.  On failure the caller calls dpg_wf_abort. */
int dpg_wf_finish(struct dpg_wfile *w, int with_digest, struct dpg_err *err)
{
	uint8_t digest[DPG_CKHASH_MAX];
	int fd, rc;

	if (with_digest) {
		if ((rc = dpg_ckhash_final(&w->hash, digest, err)) != 0)
			return rc;
		if ((rc = wf_append(w, digest, dpg_ckhash_len(w->hash.version), 1, err)) != 0)
			return rc;
	}
	if ((rc = wf_flush(w, err)) != 0)
		return rc;
	if (fsync_retry(w->fd) != 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "%s: fsync failed: %s", w->tmp,
				strerror(errno));
	fd = w->fd;
	w->fd = -1;
	if (close(fd) != 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "%s: close failed: %s", w->tmp,
				strerror(errno));
	if (rename(w->tmp, w->path) != 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "%s: cannot rename to %s: %s", w->tmp,
				w->path, strerror(errno));
	w->created = 0;
	free(w->buf);
	w->buf = NULL;
	dpg_ckhash_drop(&w->hash);
	return dpg_fio_fsync_dir(w->dir, err);
}


static int is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* mkdir path (its parent exists); sync the parent when it was created. */
int dpg_fio_mkdir(char *path, struct dpg_err *err)
{
	char *slash;
	int rc;

	if (mkdir(path, 0700) != 0) {
		int e = errno;

		if (is_dir(path))
			return 0;	/* EEXIST, or EACCES/EROFS on one that exists */
		if (e == EEXIST)
			return dpg_errf(err, "%s exists and is not a directory; "
					"choose another checkpoint directory", path);
		return dpg_errs(err, DPG_ERR_SYSTEM, "%s: cannot create the checkpoint "
				"directory: %s", path, strerror(e));
	}
	slash = strrchr(path, '/');
	if (!slash)
		return dpg_fio_fsync_dir(".", err);
	if (slash == path)
		return dpg_fio_fsync_dir("/", err);
	*slash = '\0';
	rc = dpg_fio_fsync_dir(path, err);
	*slash = '/';
	return rc;
}

int dpg_fio_mkdir_p(const char *dir, struct dpg_err *err)
{
	char buf[DPG_FIO_PATH_MAX];
	size_t n = strlen(dir), i;
	int rc;

	if (n >= sizeof(buf))
		return dpg_errf(err, "checkpoint directory %.64s... is longer than %zu bytes",
				dir, sizeof(buf) - 1);
	memcpy(buf, dir, n + 1);
	while (n > 1 && buf[n - 1] == '/')
		buf[--n] = '\0';
	for (i = 1; i < n; i++) {
		if (buf[i] != '/' || buf[i - 1] == '/')
			continue;
		buf[i] = '\0';
		if ((rc = dpg_fio_mkdir(buf, err)) != 0)
			return rc;
		buf[i] = '/';
	}
	return dpg_fio_mkdir(buf, err);
}


/* ---------------------------------------------------------------- trust */

static int dir_refuse(const char *dir, const struct stat *st, const char *why,
		      struct dpg_err *err)
{
	return dpg_errf(err, "checkpoint directory %s (owner uid %u, mode %04o) %s: "
			"refused, another user could read or replace the checkpoint; "
			"use a directory of your own (chmod go-w, or mkdir a new one)",
			dir, (unsigned)st->st_uid, (unsigned)(st->st_mode & 07777), why);
}

int dpg_fio_dir_check(const char *dir, int nofollow, int mine, struct dpg_err *err)
{
	struct stat st;
	int fd, e;

	do {
		fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0));
	} while (fd < 0 && errno == EINTR);
	if (fd < 0 && (errno == ELOOP || (nofollow && errno == ENOTDIR &&
					 lstat(dir, &st) == 0 && S_ISLNK(st.st_mode))))
		return dpg_errf(err, "checkpoint directory %s is a symbolic link: refused "
				"(remove it)", dir);
	if (fd < 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "checkpoint directory %s: cannot "
				"open: %s", dir, strerror(errno));
	if (fstat(fd, &st) != 0) {
		e = errno;
		(void)close(fd);
		return dpg_errs(err, DPG_ERR_SYSTEM, "checkpoint directory %s: fstat "
				"failed: %s", dir, strerror(e));
	}
	(void)close(fd);	/* read-only: nothing to lose at close */
	if (mine && st.st_uid != geteuid())
		return dir_refuse(dir, &st, "is owned by another user", err);
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return dir_refuse(dir, &st, "is writable by group or others", err);
	return 0;
}

/* n > 0 decimal digits at s, then the end or stop. */
static const char *digits(const char *s, size_t min)
{
	size_t n = 0;

	while (s[n] >= '0' && s[n] <= '9')
		n++;
	return n >= min && n > 0 ? s + n : NULL;
}

/* "meta", "latest" or "shard-" + at least 5 digits, then ".tmp.": the
 * rest of the name, or NULL. */
static const char *tmp_base(const char *s)
{
	static const char *const fixed[] = { "meta", "latest" };
	size_t i;

	for (i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		size_t n = strlen(fixed[i]);

		if (strncmp(s, fixed[i], n) == 0 && strncmp(s + n, ".tmp.", 5) == 0)
			return s + n + 5;
	}
	if (strncmp(s, "shard-", 6) != 0 || !(s = digits(s + 6, 5)))
		return NULL;
	return strncmp(s, ".tmp.", 5) == 0 ? s + 5 : NULL;
}

int dpg_fio_is_tmp_name(const char *name)
{
	const char *p;
	size_t i;

	if (name[0] == '.') {	/* .NAME.tmp.PID.RAND (RAND: 16 hex digits) */
		if (!(p = tmp_base(name + 1)) || !(p = digits(p, 1)) || *p++ != '.')
			return 0;
		for (i = 0; i < 16; i++)
			if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
				return 0;
		return p[16] == '\0';
	}
	/* NAME.tmp.PID, the form of dpg before issue 17 */
	return (p = tmp_base(name)) && (p = digits(p, 1)) && *p == '\0';
}
