/* SPDX-License-Identifier: BSD-3-Clause */
/* fileio.h - durable files: whole reads and writes, directory syncs, mkdir -p,
 * and an atomic, hashed writer (the checkpoint's file layer). */
#ifndef DPG_LIB_FILEIO_H
#define DPG_LIB_FILEIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ckhash.h"
#include "err.h"

#define DPG_FIO_PATH_MAX 4096
/* The writer's buffer; deliberately not a multiple of 4 so that buffer edges
 * split floats and the carry-over path runs in every multi-buffer read. */
#define DPG_FIO_BUF (64 * 1024 + 2)
/* Runs of at least this many bytes of floats bypass that buffer on a
 * little-endian host: hashed and written straight from the caller's array. */
#define DPG_FIO_DIRECT ((size_t)1 << 20)
/* Write-back window: every DPG_FIO_WB bytes written, their write-back to the
 * device starts (sync_file_range) and the window before last is waited for
 * and dropped from the page cache, so that the device writes while the next
 * window is hashed, and a save does not fill memory with dirty pages. */
#define DPG_FIO_WB ((size_t)8 << 20)

/* Arrays of IEEE-754 binary32, little-endian (4 * n bytes at p). */
void dpg_fio_encode_floats(uint8_t *p, const float *src, size_t n);
void dpg_fio_decode_floats(float *dst, const uint8_t *p, size_t n);

/* Raw descriptors: 0, or -DPG_ERR_SYSTEM with errno set (no message).
 * dpg_fio_pread_full reads n bytes at off (off < 0: at the file position),
 * fewer only at end of file (*got says how many). */
int dpg_fio_write_full(int fd, const void *buf, size_t n);
int dpg_fio_pread_full(int fd, void *buf, size_t n, off_t off, size_t *got);
int dpg_fio_read_full(int fd, void *buf, size_t n, size_t *got);
/* open(O_RDONLY | O_NONBLOCK | O_NOFOLLOW), retried on EINTR: a descriptor
 * or -1 (errno; ELOOP: a symbolic link);
 * dpg_fio_close_read closes it (nothing can be lost at close). */
int dpg_fio_open_read(const char *path);
void dpg_fio_close_read(int fd);

/* The functions below return 0 or -DPG_ERR_SYSTEM (a system call failed),
 * -DPG_ERR_NOMEM, or -DPG_ERR_INVALID (a path too long, a file where a
 * directory should be), with the message in err. */

/* dir is a directory that no other user can change: not writable by group
 * or others, owned by us (mine), not a symbolic link (nofollow); otherwise
 * -DPG_ERR_INVALID naming dir, its owner uid and mode. */
int dpg_fio_dir_check(const char *dir, int nofollow, int mine, struct dpg_err *err);

/* A temporary name of the atomic writer: ".NAME.tmp.PID.RAND" (RAND: 16
 * lowercase hex digits) or the older "NAME.tmp.PID", NAME one of meta,
 * latest, shard-NNNNN; nothing else (a user's thesis.tmp.tex is not ours). */
#define DPG_FIO_TMP_FMT "%s.tmp.%ld.%016llx"
int dpg_fio_is_tmp_name(const char *name);

/* "a/b" into buf. */
int dpg_fio_path_join(char *buf, size_t len, const char *a, const char *b,
		      struct dpg_err *err);
/* Make dir's entries durable (a file system that cannot sync a directory
 * is not an error). */
int dpg_fio_fsync_dir(const char *dir, struct dpg_err *err);
/* mkdir path 0700 (its parent exists; one that exists is fine), syncing the
 * parent when it was created; path is restored before returning. */
int dpg_fio_mkdir(char *path, struct dpg_err *err);
/* mkdir -p dir, every new level made durable. */
int dpg_fio_mkdir_p(const char *dir, struct dpg_err *err);

/* The atomic writer: DIR/NAME is written as DIR/.NAME.tmp.PID.RAND (mode
 * 0600, O_EXCL | O_NOFOLLOW) through a buffer that hashes what passes, then
 * fsync'd, renamed over NAME and the directory synced.  After a failure of any call but dpg_wf_open, the
 * caller calls dpg_wf_abort (which removes the temporary file). */
struct dpg_wfile {
	const char *dir;		/* NAME's directory (synced after rename) */
	char path[DPG_FIO_PATH_MAX];	/* NAME */
	char tmp[DPG_FIO_PATH_MAX];	/* DIR/.NAME.tmp.PID.RAND */
	int fd;
	int created;			/* tmp exists and is ours to remove */
	struct dpg_ckhash hash;		/* DPG_CKHASH_V_WRITE's digest */
	unsigned char *buf;		/* DPG_FIO_BUF bytes, owned */
	size_t len;
	unsigned long long off;		/* bytes written to fd so far */
	unsigned long long kicked;	/* write-back started below this */
	unsigned long long waited;	/* written back (and dropped) below this */
};

int dpg_wf_open(struct dpg_wfile *w, const char *dir, const char *name,
		struct dpg_err *err);
/* Append n bytes (hashed). */
int dpg_wf_put(struct dpg_wfile *w, const void *data, size_t n, struct dpg_err *err);
/* Append n floats as little-endian binary32 (hashed); a long run on a
 * little-endian host goes from src to the file without a copy. */
int dpg_wf_floats(struct dpg_wfile *w, const float *src, size_t n, struct dpg_err *err);
/* Append the digest (with_digest), flush, fsync, close, rename, sync the dir. */
int dpg_wf_finish(struct dpg_wfile *w, int with_digest, struct dpg_err *err);
void dpg_wf_abort(struct dpg_wfile *w);

#endif
