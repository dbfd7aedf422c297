/* SPDX-License-Identifier: BSD-3-Clause */
/* ckpt.c - sharded checkpoints on disk: the versioned, checksummed meta and
 * shard-RRRRR formats, the latest pointer, resharding reads (files: fileio.c). */
#include "ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "fileio.h"
#include "le.h"
#include "ckhash.h"
#include "digest.h"

/*
 * Formats, version 2 (written) and 1 (read).  Integers little-endian,
 * floats IEEE-754 binary32 little-endian; every file but latest ends with
 * the digest of all the bytes before it: version 2 XXH3-128 (16 bytes,
 * canonical big-endian), version 1 SHA-256 (32 bytes); that is the only
 * difference.  A shard's version is its meta's.
 *
 * meta   "DPGCMETA"  u32 version  u32 nranks  i64 step  u32 optimizer
 *        u32 nstate  u32 nparams  u32 nunits                       (40 bytes)
 *        nparams x { char name[64], NUL-padded;  u64 numel;  u32 unit }
 *        u64 extra_len;  extra_len bytes
 *        digest[16]
 * shard  "DPGCSHRD"  u32 version  u32 rank  u32 nranks  i64 step
 *        u32 nstate  u32 nunits                                    (36 bytes)
 *        nunits x { u64 lo;  u64 hi }   unit-flat range of the real elements
 *        for k < nstate, for u < nunits: hi - lo floats
 *        digest[16]
 * latest "step-%08ld\n"
 *
 * Every count read from disk is bounded before it sizes anything: a meta
 * file is read whole only below CK_META_MAX; a shard file's size must be
 * the one its (verified) meta implies, and it is streamed through a fixed
 * buffer.
 */

#define CK_VERSION DPG_CKHASH_V_WRITE
#define CK_MAGIC_META "DPGCMETA"
#define CK_MAGIC_SHARD "DPGCSHRD"
#define CK_MAGIC_LEN 8
#define CK_DIGEST_MIN 16		/* the shortest digest (version 2) */
#define CK_DIGEST_MAX DPG_CKHASH_MAX
#define CK_PATH_MAX DPG_FIO_PATH_MAX
#define CK_MAX_RANKS (1 << 20)
#define CK_MAX_PARAMS (1 << 20)
#define CK_MAX_EXTRA ((size_t)64 << 20)
#define CK_META_HDR 40
#define CK_PARAM_REC (DPG_ZNAME_MAX + 12)
#define CK_META_MIN (CK_META_HDR + CK_PARAM_REC + 8 + CK_DIGEST_MIN)
#define CK_META_MAX \
	(CK_META_HDR + (size_t)CK_PARAM_REC * CK_MAX_PARAMS + 8 + CK_MAX_EXTRA + CK_DIGEST_MAX)
#define CK_SHARD_HDR 36
#define CK_RANGE_REC 16
#define CK_LATEST_MAX 64
/* The reader's buffer: its first fill is CK_IOBUF bytes (splitting floats
 * at the edge, fileio.h), the next ones CK_RBUF (not a multiple of 4
 * either).  The file is opened POSIX_FADV_SEQUENTIAL (the kernel's own
 * read-ahead, doubled); explicit WILLNEED hints for the next 16 MiB after
 * every read made two ranks' cold loads 0.46-0.54x of a raw read, against
 * 0.71-0.77x without (ckpt_bench, world 2, 2026-11-27). */
#define CK_IOBUF DPG_FIO_BUF
#define CK_RBUF ((size_t)(4 << 20) + 2)
/* The most one direct read (rf_direct) takes at once. */
#define CK_DIRECT_MAX ((size_t)16 << 20)
/* A run of floats at least this long is read straight into its array (a
 * little-endian host, rf_direct); shorter ones go through the buffer. */
#define CK_DIRECT_MIN ((size_t)1 << 20)

/* ---------------------------------------------------------------- names, dirs */

int dpg_ckpt_stepdir(const char *dir, long step, char *buf, size_t len,
		     struct dpg_err *err)
{
	int n;

	if (!dir || !*dir)
		return dpg_errf(err, "checkpoint: no directory given");
	if (step < 0)
		return dpg_errf(err, "checkpoint %s: step %ld is negative", dir, step);
	n = snprintf(buf, len, "%s/step-%08ld", dir, step);
	if (n < 0 || (size_t)n >= len)
		return dpg_errf(err, "checkpoint %s: the step directory name is longer "
				"than %zu bytes; use a shorter directory", dir,
				len ? len - 1 : 0);
	return 0;
}

int dpg_ckpt_prepare(const char *dir, long step, struct dpg_err *err)
{
	int rc;
	char sd[CK_PATH_MAX];

	if ((rc = dpg_ckpt_stepdir(dir, step, sd, sizeof(sd), err)) != 0)
		return rc;
	if ((rc = dpg_fio_mkdir_p(dir, err)) != 0 ||
	    (rc = dpg_fio_dir_check(dir, 0, 1, err)) != 0 ||
	    (rc = dpg_fio_mkdir(sd, err)) != 0)
		return rc;
	return dpg_fio_dir_check(sd, 1, 1, err);
}

/* A directory to read from: one that does not exist is left to the open
 * that follows (it names the missing file). */
static int read_dir_check(const char *dir, int nofollow, struct dpg_err *err)
{
	struct stat st;

	if (lstat(dir, &st) != 0 && errno == ENOENT)
		return 0;
	return dpg_fio_dir_check(dir, nofollow, 0, err);
}

/* open()'s failure on path: a planted symbolic link gets its own words. */
static int open_fail(const char *path, int e, struct dpg_err *err)
{
	if (e == ELOOP)
		return dpg_errf(err, "%s is a symbolic link: refused (checkpoint files are "
				"never followed through links; remove it)", path);
	return dpg_errs(err, DPG_ERR_SYSTEM, "%s: cannot open: %s", path, strerror(e));
}

/* Open path for reading (never through a link) and fstat it: 0 with *fd
 * open, or the error (nothing left open). */
static int open_stat(const char *path, int *fd, struct stat *st, struct dpg_err *err)
{
	int e;

	*fd = dpg_fio_open_read(path);
	if (*fd < 0)
		return open_fail(path, errno, err);
	if (fstat(*fd, st) != 0) {
		e = errno;
		dpg_fio_close_read(*fd);
		*fd = -1;
		return dpg_errs(err, DPG_ERR_SYSTEM, "%s: fstat failed: %s",
				path, strerror(e));
	}
	return 0;
}

/* ---------------------------------------------------------------- writing */

static int check_layout_args(const struct dpg_zlayout *L, int nstate, const char *what,
			     struct dpg_err *err)
{
	if (!L || L->nranks <= 0 || L->nunits <= 0 || !L->u || !L->p)
		return dpg_errf(err, "%s: the layout is not built", what);
	if (L->nranks > CK_MAX_RANKS)
		return dpg_errf(err, "%s: a shard group of %d ranks; checkpoints hold at "
				"most %d", what, L->nranks, CK_MAX_RANKS);
	if (nstate < 1 || nstate > DPG_CKPT_MAX_STATE)
		return dpg_errf(err, "%s: %d state arrays; 1 to %d are possible", what,
				nstate, DPG_CKPT_MAX_STATE);
	return 0;
}

static int check_state_args(const struct dpg_zlayout *L, int rank, int nstate,
			    float *const *state, const char *what, struct dpg_err *err)
{
	int rc;
	int k;

	if ((rc = check_layout_args(L, nstate, what, err)) != 0)
		return rc;
	if (rank < 0 || rank >= L->nranks)
		return dpg_errf(err, "%s: rank %d outside the shard group of %d", what, rank,
				L->nranks);
	if (!state)
		return dpg_errf(err, "%s: no state arrays given", what);
	for (k = 0; k < nstate; k++)
		if (!state[k])
			return dpg_errf(err, "%s: state array %d is NULL", what, k);
	return 0;
}

static int shard_write_body(struct dpg_wfile *w, long step, const struct dpg_zlayout *L,
			    int rank, int nstate, float *const *state,
			    struct dpg_err *err)
{
	int rc;
	unsigned char h[CK_SHARD_HDR], rec[CK_RANGE_REC];
	size_t lo, hi;
	int u, k;

	memcpy(h, CK_MAGIC_SHARD, CK_MAGIC_LEN);
	dpg_le_put32(h + 8, CK_VERSION);
	dpg_le_put32(h + 12, (uint32_t)rank);
	dpg_le_put32(h + 16, (uint32_t)L->nranks);
	dpg_le_put64(h + 20, (uint64_t)step);
	dpg_le_put32(h + 28, (uint32_t)nstate);
	dpg_le_put32(h + 32, (uint32_t)L->nunits);
	if ((rc = dpg_wf_put(w, h, sizeof(h), err)) != 0)
		return rc;
	for (u = 0; u < L->nunits; u++) {
		dpg_zlayout_shard_range(L, u, rank, &lo, &hi);
		dpg_le_put64(rec, lo);
		dpg_le_put64(rec + 8, hi);
		if ((rc = dpg_wf_put(w, rec, sizeof(rec), err)) != 0)
			return rc;
	}
	for (k = 0; k < nstate; k++) {
		for (u = 0; u < L->nunits; u++) {
			const struct dpg_zunit *U = &L->u[u];

			const float *src;

			dpg_zlayout_shard_range(L, u, rank, &lo, &hi);
			if (hi <= lo)
				continue;	/* only padding here */
			src = state[k] + U->shard_off + (lo - (size_t)rank * U->shard);
			if ((rc = dpg_wf_floats(w, src, hi - lo, err)) != 0)
				return rc;
		}
	}
	return 0;
}

int dpg_ckpt_write_shard(const char *dir, long step, const struct dpg_zlayout *L,
			 int rank, int nstate, float *const *state,
			 struct dpg_err *err)
{
	int rc;
	char sd[CK_PATH_MAX], name[32];
	struct dpg_wfile w;

	if ((rc = check_state_args(L, rank, nstate, state, "checkpoint shard", err)) != 0)
		return rc;
	if ((rc = dpg_ckpt_stepdir(dir, step, sd, sizeof(sd), err)) != 0)
		return rc;
	snprintf(name, sizeof(name), "shard-%05d", rank);
	if ((rc = dpg_wf_open(&w, sd, name, err)) != 0)
		return rc;
	if ((rc = shard_write_body(&w, step, L, rank, nstate, state, err)) != 0 ||
	    (rc = dpg_wf_finish(&w, 1, err)) != 0) {
		dpg_wf_abort(&w);
		return rc;
	}
	return 0;
}

static int meta_write_body(struct dpg_wfile *w, long step, const struct dpg_zlayout *L,
			   int optimizer, int nstate, const void *extra,
			   size_t extra_len, struct dpg_err *err)
{
	int rc;
	unsigned char h[CK_META_HDR], rec[CK_PARAM_REC], x[8];
	int i;

	memcpy(h, CK_MAGIC_META, CK_MAGIC_LEN);
	dpg_le_put32(h + 8, CK_VERSION);
	dpg_le_put32(h + 12, (uint32_t)L->nranks);
	dpg_le_put64(h + 16, (uint64_t)step);
	dpg_le_put32(h + 24, (uint32_t)optimizer);
	dpg_le_put32(h + 28, (uint32_t)nstate);
	dpg_le_put32(h + 32, (uint32_t)L->nparams);
	dpg_le_put32(h + 36, (uint32_t)L->nunits);
	if ((rc = dpg_wf_put(w, h, sizeof(h), err)) != 0)
		return rc;
	for (i = 0; i < L->nparams; i++) {
		const struct dpg_zparam *p = &L->p[i];

		memset(rec, 0, sizeof(rec));
		memcpy(rec, p->name, strnlen(p->name, DPG_ZNAME_MAX - 1));
		dpg_le_put64(rec + DPG_ZNAME_MAX, p->numel);
		dpg_le_put32(rec + DPG_ZNAME_MAX + 8, (uint32_t)p->unit);
		if ((rc = dpg_wf_put(w, rec, sizeof(rec), err)) != 0)
			return rc;
	}
	dpg_le_put64(x, extra_len);
	if ((rc = dpg_wf_put(w, x, sizeof(x), err)) != 0)
		return rc;
	return extra_len ? dpg_wf_put(w, extra, extra_len, err) : 0;
}

static int write_meta(const char *sd, long step, const struct dpg_zlayout *L,
		      int optimizer, int nstate, const void *extra, size_t extra_len,
		      struct dpg_err *err)
{
	int rc;
	struct dpg_wfile w;

	if ((rc = dpg_wf_open(&w, sd, "meta", err)) != 0)
		return rc;
	if (meta_write_body(&w, step, L, optimizer, nstate, extra, extra_len, err) != 0 ||
	    dpg_wf_finish(&w, 1, err) != 0) {
		dpg_wf_abort(&w);
		return -1;
	}
	return 0;
}

static int write_latest(const char *dir, long step, struct dpg_err *err)
{
	int rc;
	char text[CK_LATEST_MAX];
	struct dpg_wfile w;
	int n;

	n = snprintf(text, sizeof(text), "step-%08ld\n", step);
	if (n < 0 || (size_t)n >= sizeof(text))
		return dpg_errf(err, "checkpoint %s: step %ld too large", dir, step);
	if ((rc = dpg_wf_open(&w, dir, "latest", err)) != 0)
		return rc;
	if ((rc = dpg_wf_put(&w, text, (size_t)n, err)) != 0 ||
	    (rc = dpg_wf_finish(&w, 0, err)) != 0) {
		dpg_wf_abort(&w);
		return rc;
	}
	return 0;
}

int dpg_ckpt_commit(const char *dir, long step, const struct dpg_zlayout *L,
		    int optimizer, int nstate, const void *extra, size_t extra_len,
		    struct dpg_err *err)
{
	int rc;
	char sd[CK_PATH_MAX];
	static const char what[] = "checkpoint metadata";

	if ((rc = check_layout_args(L, nstate, what, err)) != 0)
		return rc;
	if (L->nparams > CK_MAX_PARAMS)
		return dpg_errf(err, "%s: %d parameters; checkpoints hold at most %d", what,
				L->nparams, CK_MAX_PARAMS);
	if (optimizer < 0)
		return dpg_errf(err, "%s: optimizer %d is negative", what, optimizer);
	if (extra_len > CK_MAX_EXTRA)
		return dpg_errf(err, "%s: %zu extra bytes; at most %zu can be saved", what,
				extra_len, CK_MAX_EXTRA);
	if (extra_len > 0 && !extra)
		return dpg_errf(err, "%s: %zu extra bytes but no buffer", what, extra_len);
	if ((rc = dpg_ckpt_stepdir(dir, step, sd, sizeof(sd), err)) != 0)
		return rc;
	if ((rc = write_meta(sd, step, L, optimizer, nstate, extra, extra_len, err)) != 0)
		return rc;
	return write_latest(dir, step, err);
}

/* ---------------------------------------------------------------- latest, meta */

/* "step-" digits, in the canonical form dpg_ckpt_stepdir writes. */
static int parse_step_name(const char *s, size_t len, long *step)
{
	char canon[CK_LATEST_MAX];
	long v = 0;
	size_t i;

	if (len < 6 || len >= sizeof(canon) || memcmp(s, "step-", 5) != 0)
		return -1;
	for (i = 5; i < len; i++) {
		int d = s[i] - '0';

		if (d < 0 || d > 9 || v > (LONG_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	if (snprintf(canon, sizeof(canon), "step-%08ld", v) != (int)len ||
	    memcmp(canon, s, len) != 0)
		return -1;
	*step = v;
	return 0;
}

static int read_latest(const char *dir, long *step, struct dpg_err *err)
{
	char path[CK_PATH_MAX], text[CK_LATEST_MAX + 1], q[96];
	size_t got;
	int fd, rc, e;

	if ((rc = dpg_fio_path_join(path, sizeof(path), dir, "latest", err)) != 0)
		return rc;
	fd = dpg_fio_open_read(path);
	if (fd < 0 && errno == ENOENT)
		return dpg_errf(err, "no checkpoint in %s (%s missing)", dir, path);
	if (fd < 0)
		return open_fail(path, errno, err);
	rc = dpg_fio_read_full(fd, text, CK_LATEST_MAX + 1, &got);
	e = errno;
	dpg_fio_close_read(fd);
	if (rc != 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "%s: read failed: %s",
				path, strerror(e));
	if (got > CK_LATEST_MAX)
		return dpg_errf(err, "%s: longer than %d bytes, not a checkpoint pointer; "
				"fix or remove it", path, CK_LATEST_MAX);
	text[got] = '\0';
	if (got > 0 && text[got - 1] == '\n')
		text[--got] = '\0';
	if (memchr(text, '\0', got) != NULL || parse_step_name(text, got, step) != 0)
		return dpg_errf(err, "%s: '%s' is not a step name like step-00000042; "
				"fix or remove it", path, dpg_err_quote(text, q, sizeof(q)));
	return 0;
}

/* Read the whole meta file (bounded by CK_META_MIN..CK_META_MAX). */
static int slurp_meta(const char *path, unsigned char **data, size_t *size,
		      struct dpg_err *err)
{
	struct stat st;
	size_t got;
	int fd, rc, e;

	*data = NULL;
	if ((rc = open_stat(path, &fd, &st, err)) != 0)
		return rc;
	if (!S_ISREG(st.st_mode) || st.st_size < (off_t)CK_META_MIN ||
	    (unsigned long long)st.st_size > (unsigned long long)CK_META_MAX) {
		dpg_fio_close_read(fd);
		return dpg_errf(err, "%s: %s of %lld bytes, not a checkpoint meta file "
				"(truncated or corrupt); restore it or remove %s",
				path, S_ISREG(st.st_mode) ? "a file" : "a non-regular file",
				(long long)st.st_size, path);
	}
	*size = (size_t)st.st_size;
	*data = malloc(*size);
	if (!*data) {
		dpg_fio_close_read(fd);
		return dpg_errs(err, DPG_ERR_NOMEM, "%s: out of memory for %zu bytes",
				path, *size);
	}
	rc = dpg_fio_read_full(fd, *data, *size, &got);
	e = errno;
	dpg_fio_close_read(fd);
	if (rc == 0 && got == *size)
		return 0;
	free(*data);
	*data = NULL;
	if (rc != 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "%s: read failed: %s",
				path, strerror(e));
	return dpg_errf(err, "%s: changed size while being read", path);
}

struct meta_hdr {
	uint32_t version, nranks, optimizer, nstate, nparams, nunits;
	uint64_t step;
};

static int meta_check_hdr(const char *path, const unsigned char *h, size_t left,
			  long step, struct meta_hdr *m, struct dpg_err *err)
{
	if (memcmp(h, CK_MAGIC_META, CK_MAGIC_LEN) != 0)
		return dpg_errf(err, "%s: not a dpg checkpoint meta file (bad magic)", path);
	m->version = dpg_le_get32(h + 8);
	m->nranks = dpg_le_get32(h + 12);
	m->step = dpg_le_get64(h + 16);
	m->optimizer = dpg_le_get32(h + 24);
	m->nstate = dpg_le_get32(h + 28);
	m->nparams = dpg_le_get32(h + 32);
	m->nunits = dpg_le_get32(h + 36);
	if (dpg_ckhash_len(m->version) == 0)
		return dpg_errf(err, "%s: format version %u; this build reads versions %u to %u",
				path, m->version, DPG_CKHASH_V_MIN, CK_VERSION);
	if (m->nranks < 1 || m->nranks > CK_MAX_RANKS)
		return dpg_errf(err, "%s: saved by %u ranks (1 to %d possible): corrupt",
				path, m->nranks, CK_MAX_RANKS);
	if (m->step != (uint64_t)step)
		return dpg_errf(err, "%s: holds step %lld but latest names step %ld; "
				"the step directory holds another checkpoint", path,
				(long long)m->step, step);
	if (m->optimizer > INT_MAX)
		return dpg_errf(err, "%s: optimizer %u: corrupt", path, m->optimizer);
	if (m->nstate < 1 || m->nstate > DPG_CKPT_MAX_STATE)
		return dpg_errf(err, "%s: %u state arrays (1 to %d possible): corrupt",
				path, m->nstate, DPG_CKPT_MAX_STATE);
	if (m->nparams < 1 || m->nparams > CK_MAX_PARAMS ||
	    (size_t)m->nparams * CK_PARAM_REC + 8 > left)
		return dpg_errf(err, "%s: %u parameters do not fit in the file: corrupt",
				path, m->nparams);
	if (m->nunits < 1 || m->nunits > m->nparams)
		return dpg_errf(err, "%s: %u units for %u parameters: corrupt", path,
				m->nunits, m->nparams);
	return 0;
}

/* The parameter records, in place: names point into data. */
struct meta_params {
	const char **names;
	size_t *numel;
	int *unit;
};

static void meta_params_free(struct meta_params *mp)
{
	free(mp->names);
	free(mp->numel);
	free(mp->unit);
}

static int meta_parse_params(const char *path, const unsigned char *p, uint32_t n,
			     struct meta_params *mp, struct dpg_err *err)
{
	uint32_t i;

	mp->names = calloc(n, sizeof(*mp->names));
	mp->numel = calloc(n, sizeof(*mp->numel));
	mp->unit = calloc(n, sizeof(*mp->unit));
	if (!mp->names || !mp->numel || !mp->unit)
		return dpg_errs(err, DPG_ERR_NOMEM, "%s: out of memory for %u parameters",
				path, n);
	for (i = 0; i < n; i++, p += CK_PARAM_REC) {
		uint64_t numel = dpg_le_get64(p + DPG_ZNAME_MAX);
		uint32_t unit = dpg_le_get32(p + DPG_ZNAME_MAX + 8);

		if (!memchr(p, '\0', DPG_ZNAME_MAX))
			return dpg_errf(err, "%s: parameter %u: name not terminated: corrupt",
					path, i);
		if (numel > SIZE_MAX || unit > INT_MAX)
			return dpg_errf(err, "%s: parameter %u: %llu elements in unit %u: "
					"corrupt", path, i, (unsigned long long)numel, unit);
		mp->names[i] = (const char *)p;
		mp->numel[i] = (size_t)numel;
		mp->unit[i] = (int)unit;
	}
	return 0;
}

static int meta_fill(const char *path, const unsigned char *body, size_t blen,
		     long step, struct dpg_ckpt_meta *meta, struct dpg_err *err)
{
	int rc;
	struct meta_params mp = { NULL, NULL, NULL };
	struct meta_hdr m;
	const unsigned char *p;
	size_t left = blen - CK_META_HDR;
	uint64_t xlen;

	memset(&m, 0, sizeof(m));
	if ((rc = meta_check_hdr(path, body, left, step, &m, err)) != 0)
		return rc;
	p = body + CK_META_HDR;
	if (meta_parse_params(path, p, m.nparams, &mp, err) != 0)
		goto fail;
	p += (size_t)m.nparams * CK_PARAM_REC;
	left -= (size_t)m.nparams * CK_PARAM_REC + 8;
	xlen = dpg_le_get64(p);
	p += 8;
	if (xlen != left) {
		dpg_errf(err, "%s: %llu extra bytes announced, %zu present: corrupt", path,
			 (unsigned long long)xlen, left);
		goto fail;
	}
	if (dpg_zlayout_build(&meta->layout, (int)m.nparams, mp.names, mp.numel, mp.unit,
			      (int)m.nranks, err) != 0) {
		dpg_err_prefix(err, path);
		goto fail;
	}
	meta_params_free(&mp);
	if (meta->layout.nunits != (int)m.nunits)
		return dpg_errf(err, "%s: %u units announced, the parameters use %d: corrupt",
				path, m.nunits, meta->layout.nunits);
	if (left > 0) {
		meta->extra = malloc(left);
		if (!meta->extra)
			return dpg_errs(err, DPG_ERR_NOMEM, "%s: out of memory for %zu extra bytes",
					path, left);
		memcpy(meta->extra, p, left);
		meta->extra_len = left;
	}
	meta->step = step;
	meta->optimizer = (int)m.optimizer;
	meta->nstate = (int)m.nstate;
	return 0;
fail:
	meta_params_free(&mp);
	return -1;
}

/* Does data (size bytes) end with the digest of version v over the rest? */
static int digest_ok(uint32_t v, const unsigned char *data, size_t size)
{
	size_t hl = dpg_ckhash_len(v);
	uint8_t digest[CK_DIGEST_MAX];

	return hl > 0 && size >= hl && dpg_ckhash_once(v, data, size - hl, digest, NULL) == 0 &&
	       dpg_ct_equal(digest, data + size - hl, hl);
}

/* Check the meta file's trailing digest (its version's), then parse it.  A
 * version this build does not know is named only when the file is intact
 * under one of the digests it knows; else the file is corrupt. */
static int meta_verify(const char *path, const char *dir, const unsigned char *data,
		       size_t size, long step, struct dpg_ckpt_meta *meta, struct dpg_err *err)
{
	uint32_t version = dpg_le_get32(data + 8), v;	/* size >= CK_META_MIN */
	int rc;

	if (!digest_ok(version, data, size)) {
		for (v = DPG_CKHASH_V_MIN; v <= CK_VERSION; v++)
			if (v != version && digest_ok(v, data, size))
				return dpg_errf(err, "%s: format version %u; this build reads "
						"versions %u to %u", path, version,
						DPG_CKHASH_V_MIN, CK_VERSION);
		return dpg_errf(err, "%s: %s mismatch, the file is corrupt; restore it or "
				"point %s/latest at an older step", path,
				dpg_ckhash_name(dpg_ckhash_len(version) ? version : CK_VERSION),
				dir);
	}
	if ((rc = meta_fill(path, data, size - dpg_ckhash_len(version), step, meta, err)) != 0)
		return rc;
	meta->version = version;
	return 0;
}

int dpg_ckpt_read_meta(const char *dir, struct dpg_ckpt_meta *meta,
		       struct dpg_err *err)
{
	char path[CK_PATH_MAX];
	unsigned char *data = NULL;
	size_t size = 0;
	long step = 0;
	int rc;

	memset(meta, 0, sizeof(*meta));
	if (!dir || !*dir)
		return dpg_errf(err, "checkpoint: no directory given");
	if ((rc = read_dir_check(dir, 0, err)) != 0 ||
	    (rc = read_latest(dir, &step, err)) != 0)
		return rc;
	if ((rc = dpg_ckpt_stepdir(dir, step, meta->stepdir, sizeof(meta->stepdir), err)) != 0 ||
	    (rc = read_dir_check(meta->stepdir, 1, err)) != 0 ||
	    (rc = dpg_fio_path_join(path, sizeof(path), meta->stepdir, "meta", err)) != 0)
		return rc;
	if ((rc = slurp_meta(path, &data, &size, err)) != 0)
		return rc;
	rc = meta_verify(path, dir, data, size, step, meta, err);
	free(data);
	if (rc != 0)
		dpg_ckpt_meta_free(meta);	/* nothing held after a failure */
	return rc;
}

void dpg_ckpt_meta_free(struct dpg_ckpt_meta *meta)
{
	if (!meta)
		return;
	dpg_zlayout_free(&meta->layout);
	free(meta->extra);
	memset(meta, 0, sizeof(*meta));
}

/* ---------------------------------------------------------------- shard reader */

/* A shard file streamed through a fixed buffer, hashing what is read. */
struct rfile {
	const char *path;
	int fd;
	struct dpg_ckhash hash;		/* the meta's version's digest */
	unsigned char *buf;		/* CK_RBUF bytes, the caller's */
	size_t len, pos, cap;		/* cap: CK_IOBUF, then CK_RBUF */
	off_t off;			/* file offset of the next read */
	unsigned long long body_left;	/* hashed bytes not yet read */
};

/* Make at least need (<= CK_IOBUF) bytes available at buf + pos. */
static int rf_fill(struct rfile *r, size_t need, struct dpg_err *err)
{
	size_t have = r->len - r->pos, want, got;

	if (have >= need)
		return 0;
	memmove(r->buf, r->buf + r->pos, have);
	r->len = have;
	r->pos = 0;
	while (r->len < need) {
		want = r->cap - r->len;
		if (want > r->body_left)
			want = (size_t)r->body_left;
		if (want == 0)
			return dpg_errf(err, "%s: ends before the data its header describes: "
					"corrupt", r->path);
		if (dpg_fio_read_full(r->fd, r->buf + r->len, want, &got) != 0)
			return dpg_errs(err, DPG_ERR_SYSTEM, "%s: read failed: %s",
					r->path, strerror(errno));
		if (got == 0)
			return dpg_errf(err, "%s: shrank while being read", r->path);
		r->off += (off_t)got;
		dpg_ckhash_update(&r->hash, r->buf + r->len, got);
		r->len += got;
		r->body_left -= got;
		r->cap = CK_RBUF;
	}
	return 0;
}

/* Take n bytes into dst (NULL: skip them). */
static int rf_bytes(struct rfile *r, void *dst, size_t n, struct dpg_err *err)
{
	int rc;
	unsigned char *d = dst;

	while (n > 0) {
		size_t m;

		if ((rc = rf_fill(r, 1, err)) != 0)
			return rc;
		m = r->len - r->pos;
		if (m > n)
			m = n;
		if (d) {
			memcpy(d, r->buf + r->pos, m);
			d += m;
		}
		r->pos += m;
		n -= m;
	}
	return 0;
}

/* The float split between the buffer's last bytes (have < 4 of them) and
 * the file: completed by a read of the rest, into *dst. */
static int rf_split_float(struct rfile *r, float *dst, size_t have, struct dpg_err *err)
{
	unsigned char t[4];
	size_t need = 4 - have, got;

	memcpy(t, r->buf + r->pos, have);
	if (dpg_fio_read_full(r->fd, t + have, need, &got) != 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "%s: read failed: %s", r->path,
				strerror(errno));
	if (got != need)
		return dpg_errf(err, "%s: shrank while being read", r->path);
	dpg_ckhash_update(&r->hash, t + have, need);
	r->off += (off_t)need;
	r->body_left -= need;
	r->pos = r->len = 0;
	dpg_fio_decode_floats(dst, t, 1);
	return 0;
}

/* A long run of floats on a little-endian host, once the buffer holds less
 * than one float: read straight into dst (the file's bytes are the floats)
 * and hash there, as the writer hashes and writes straight from its arrays.
 * *took: the floats read, 0 when the run is not for this path. */
static int rf_direct(struct rfile *r, float *dst, size_t n, size_t *took,
		     struct dpg_err *err)
{
	size_t have = r->len - r->pos, want, got;
	int rc;

	*took = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	if (dst == NULL || have >= 4 || n * 4 < CK_DIRECT_MIN || r->body_left < n * 4 - have)
		return 0;	/* buffered floats first; a short file: the buffer says so */
	if (have > 0) {
		if ((rc = rf_split_float(r, dst, have, err)) != 0)
			return rc;
		*took = 1;
		dst++;
		n--;
	}
	want = n * 4 < CK_DIRECT_MAX ? n * 4 : CK_DIRECT_MAX;
	if (want == 0)
		return 0;
	if (dpg_fio_read_full(r->fd, dst, want, &got) != 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "%s: read failed: %s", r->path,
				strerror(errno));
	if (got != want)
		return dpg_errf(err, "%s: shrank while being read", r->path);
	r->off += (off_t)got;
	dpg_ckhash_update(&r->hash, dst, got);
	r->body_left -= got;
	r->pos = r->len = 0;
	r->cap = CK_RBUF;
	*took += got / 4;
#else
	(void)r;
	(void)dst;
	(void)n;
	(void)have;
	(void)want;
	(void)got;
	(void)rc;
	(void)err;
	(void)rf_split_float;
#endif
	return 0;
}

/* Take n floats into dst (NULL: skip them). */
static int rf_floats(struct rfile *r, float *dst, size_t n, struct dpg_err *err)
{
	int rc;

	while (n > 0) {
		size_t m;

		if ((rc = rf_direct(r, dst, n, &m, err)) != 0)
			return rc;
		if (m > 0) {
			dst += m;
			n -= m;
			continue;
		}
		if ((rc = rf_fill(r, 4, err)) != 0)
			return rc;
		m = (r->len - r->pos) / 4;
		if (m > n)
			m = n;
		if (dst) {
			dpg_fio_decode_floats(dst, r->buf + r->pos, m);
			dst += m;
		}
		r->pos += 4 * m;
		n -= m;
	}
	return 0;
}

static int rf_verify(struct rfile *r, struct dpg_err *err)
{
	uint8_t digest[CK_DIGEST_MAX], stored[CK_DIGEST_MAX];
	size_t got, hl = dpg_ckhash_len(r->hash.version);
	int rc;

	if (r->pos != r->len || r->body_left != 0)
		return dpg_errf(err, "%s: longer than its header describes: corrupt",
				r->path);
	if (dpg_fio_read_full(r->fd, stored, hl, &got) != 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "%s: read failed: %s",
				r->path, strerror(errno));
	if (got != hl)
		return dpg_errf(err, "%s: shrank while being read", r->path);
	if ((rc = dpg_ckhash_final(&r->hash, digest, err)) != 0)
		return rc;
	if (!dpg_ct_equal(digest, stored, hl))
		return dpg_errf(err, "%s: %s mismatch, the file is corrupt; restore it "
				"or load an older checkpoint", r->path,
				dpg_ckhash_name(r->hash.version));
	return 0;
}

/* The resharding read of one new rank. */
struct reshard {
	const struct dpg_ckpt_meta *meta;
	const struct dpg_zlayout *S;	/* as saved */
	const struct dpg_zlayout *L;	/* as loaded */
	int rank, nstate;
	float **state;
	unsigned char *buf;		/* CK_RBUF bytes */
};

/* Does the whole file (size bytes) match its trailing digest (the meta's
 * version's)? */
static int whole_file_ok(const struct reshard *rs, int fd, off_t size)
{
	struct dpg_ckhash c;
	uint8_t digest[CK_DIGEST_MAX], stored[CK_DIGEST_MAX];
	size_t hl = dpg_ckhash_len(rs->meta->version), got;
	off_t off = 0, body = size - (off_t)hl;

	if (hl == 0 || size < (off_t)hl || dpg_ckhash_init(&c, rs->meta->version, NULL) != 0)
		return 0;
	while (off < body) {
		size_t want = CK_RBUF;

		if ((off_t)want > body - off)
			want = (size_t)(body - off);
		if (dpg_fio_pread_full(fd, rs->buf, want, off, &got) != 0 || got != want) {
			dpg_ckhash_drop(&c);
			return 0;
		}
		dpg_ckhash_update(&c, rs->buf, got);
		off += (off_t)got;
	}
	got = dpg_ckhash_final(&c, digest, NULL) == 0;
	dpg_ckhash_drop(&c);
	if (!got)
		return 0;
	if (dpg_fio_pread_full(fd, stored, hl, body, &got) != 0 || got != hl)
		return 0;
	return dpg_ct_equal(digest, stored, hl);
}

/* A header or size that is not the one expected: corruption, or an
 * intact file of another checkpoint, step or rank under this name. */
static int shard_refuse(const struct reshard *rs, const char *path, int fd, off_t size,
			const char *why, struct dpg_err *err)
{
	if (whole_file_ok(rs, fd, size))
		return dpg_errf(err, "%s: %s; not the file this checkpoint expects under "
				"this name (restore the right file or load an older "
				"checkpoint)", path, why);
	return dpg_errf(err, "%s: corrupt or truncated (%s; %s mismatch); restore "
			"it or load an older checkpoint", path, why,
			dpg_ckhash_name(rs->meta->version));
}

static int shard_expected_size(const struct reshard *rs, int old,
			       unsigned long long *size)
{
	unsigned long long n = 0, fixed;
	size_t lo, hi;
	int u;

	for (u = 0; u < rs->S->nunits; u++) {
		dpg_zlayout_shard_range(rs->S, u, old, &lo, &hi);
		n += hi - lo;
	}
	fixed = CK_SHARD_HDR + (unsigned long long)CK_RANGE_REC * (unsigned)rs->S->nunits +
		dpg_ckhash_len(rs->meta->version);
	if (n > (ULLONG_MAX - fixed) / (4ull * (unsigned)rs->nstate))
		return -1;
	*size = fixed + n * 4ull * (unsigned)rs->nstate;
	return 0;
}

static int whyf(char *why, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Say why a shard file is refused; returns 1. */
static int whyf(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (vsnprintf(why, len, fmt, ap) < 0 && len > 0)
		why[0] = '\0';
	va_end(ap);
	return 1;
}

/* 0: the header is the expected one; else 1, and why says what differs. */
static int shard_header_why(const struct reshard *rs, int old, const unsigned char *h,
			    char *why, size_t len)
{
	uint32_t v;
	uint64_t step;

	if (memcmp(h, CK_MAGIC_SHARD, CK_MAGIC_LEN) != 0)
		return whyf(why, len, "bad magic, not a dpg checkpoint shard");
	if ((v = dpg_le_get32(h + 8)) != rs->meta->version)
		return whyf(why, len, "format version %u, its meta's is %u", v,
			    rs->meta->version);
	if ((v = dpg_le_get32(h + 12)) != (uint32_t)old)
		return whyf(why, len, "header says rank %u, expected %d", v, old);
	if ((v = dpg_le_get32(h + 16)) != (uint32_t)rs->S->nranks)
		return whyf(why, len, "header says a group of %u ranks, expected %d", v,
				rs->S->nranks);
	if ((step = dpg_le_get64(h + 20)) != (uint64_t)rs->meta->step)
		return whyf(why, len, "header says step %llu, expected %ld",
				(unsigned long long)step, rs->meta->step);
	if ((v = dpg_le_get32(h + 28)) != (uint32_t)rs->nstate)
		return whyf(why, len, "header says %u state arrays, expected %d", v,
				rs->nstate);
	if ((v = dpg_le_get32(h + 32)) != (uint32_t)rs->S->nunits)
		return whyf(why, len, "header says %u units, expected %d", v,
				rs->S->nunits);
	return 0;
}

/* Read the unit ranges; 0 when they are the expected ones, else 1 + why. */
static int shard_ranges(const struct reshard *rs, int old, struct rfile *r, char *why,
			size_t len, struct dpg_err *err)
{
	int rc;
	unsigned char rec[CK_RANGE_REC];
	size_t lo, hi;
	int u;

	for (u = 0; u < rs->S->nunits; u++) {
		if ((rc = rf_bytes(r, rec, sizeof(rec), err)) != 0)
			return rc;
		dpg_zlayout_shard_range(rs->S, u, old, &lo, &hi);
		if (dpg_le_get64(rec) != lo || dpg_le_get64(rec + 8) != hi) {
			return whyf(why, len, "unit %d holds [%llu, %llu), expected [%zu, %zu)",
				    u, (unsigned long long)dpg_le_get64(rec),
				    (unsigned long long)dpg_le_get64(rec + 8), lo, hi);
		}
	}
	return 0;
}

/* Stream the data of old rank's file, copying its overlap with the new
 * rank's real elements into the state arrays. */
static int shard_data(const struct reshard *rs, int old, struct rfile *r,
		      struct dpg_err *err)
{
	int rc;
	size_t olo, ohi, nlo, nhi, a, b;
	int k, u;

	for (k = 0; k < rs->nstate; k++) {
		for (u = 0; u < rs->S->nunits; u++) {
			const struct dpg_zunit *U = &rs->L->u[u];

			dpg_zlayout_shard_range(rs->S, u, old, &olo, &ohi);
			dpg_zlayout_shard_range(rs->L, u, rs->rank, &nlo, &nhi);
			a = olo > nlo ? olo : nlo;
			b = ohi < nhi ? ohi : nhi;
			if (a >= b) {
				if ((rc = rf_floats(r, NULL, ohi - olo, err)) != 0)
					return rc;
				continue;
			}
			if ((rc = rf_floats(r, NULL, a - olo, err)) != 0 ||
			    (rc = rf_floats(r, rs->state[k] + U->shard_off +
				      (a - (size_t)rs->rank * U->shard), b - a, err)) != 0 ||
			    (rc = rf_floats(r, NULL, ohi - b, err)) != 0)
				return rc;
		}
	}
	return rf_verify(r, err);
}

static int shard_stream_hashed(const struct reshard *rs, int old, struct rfile *rf,
				off_t size, struct dpg_err *err);

/* Stream one old shard, its hash context freed on every way out. */
static int shard_stream(const struct reshard *rs, int old, const char *path, int fd,
			off_t size, struct dpg_err *err)
{
	struct rfile r;
	int rc;

	memset(&r, 0, sizeof(r));
	r.path = path;
	r.fd = fd;
	r.buf = rs->buf;
	r.cap = CK_IOBUF;
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	if ((rc = dpg_ckhash_init(&r.hash, rs->meta->version, err)) != 0)
		return rc;
	rc = shard_stream_hashed(rs, old, &r, size, err);
	dpg_ckhash_drop(&r.hash);
	return rc;
}

static int shard_stream_hashed(const struct reshard *rs, int old, struct rfile *r,
				off_t size, struct dpg_err *err)
{
	unsigned char h[CK_SHARD_HDR];
	unsigned long long want;
	char why[256];
	int rc;

	size_t hl = dpg_ckhash_len(r->hash.version);

	if (size < (off_t)(CK_SHARD_HDR + hl)) {
		whyf(why, sizeof(why), "only %lld bytes", (long long)size);
		return shard_refuse(rs, r->path, r->fd, size, why, err);
	}
	r->body_left = (unsigned long long)size - hl;
	if ((rc = rf_bytes(r, h, sizeof(h), err)) != 0)
		return rc;
	rc = shard_header_why(rs, old, h, why, sizeof(why));
	if (rc == 0 && shard_expected_size(rs, old, &want) != 0)
		return dpg_errf(err, "%s: the size of rank %d's shard overflows", r->path, old);
	if (rc == 0 && (unsigned long long)size != want) {
		rc = whyf(why, sizeof(why), "%lld bytes, expected %llu", (long long)size,
			  want);
	}
	if (rc == 0)
		rc = shard_ranges(rs, old, r, why, sizeof(why), err);
	if (rc < 0)
		return -1;
	if (rc > 0)
		return shard_refuse(rs, r->path, r->fd, size, why, err);
	return shard_data(rs, old, r, err);
}

static int load_old_shard(const struct reshard *rs, int old, struct dpg_err *err)
{
	char path[CK_PATH_MAX], name[32];
	struct stat st;
	int fd, rc;

	snprintf(name, sizeof(name), "shard-%05d", old);
	if ((rc = dpg_fio_path_join(path, sizeof(path), rs->meta->stepdir, name, err)) != 0)
		return rc;
	if ((rc = open_stat(path, &fd, &st, err)) != 0)
		return rc;
	if (!S_ISREG(st.st_mode))
		rc = dpg_errf(err, "%s: not a regular file", path);
	else
		rc = shard_stream(rs, old, path, fd, st.st_size, err);
	dpg_fio_close_read(fd);
	return rc;
}

/* Mark the old ranks whose real elements overlap the new rank's. */
static void mark_needed(const struct reshard *rs, unsigned char *needed)
{
	size_t lo, hi, r, last, os;
	int u;

	for (u = 0; u < rs->L->nunits; u++) {
		dpg_zlayout_shard_range(rs->L, u, rs->rank, &lo, &hi);
		os = rs->S->u[u].shard;
		if (lo >= hi || os == 0)
			continue;
		last = (hi - 1) / os;
		for (r = lo / os; r <= last && r < (size_t)rs->S->nranks; r++)
			needed[r] = 1;
	}
}

/* "checkpoint DIR" for messages, DIR taken from meta->stepdir. */
static void ckpt_dir_name(const struct dpg_ckpt_meta *meta, char *buf, size_t len)
{
	const char *slash = strrchr(meta->stepdir, '/');
	int n = slash ? (int)(slash - meta->stepdir) : (int)strlen(meta->stepdir);

	snprintf(buf, len, "checkpoint %.*s", n, meta->stepdir);
}

static int reshard_check(const struct dpg_ckpt_meta *meta, const struct dpg_zlayout *L,
			 int rank, int nstate, float **state, struct dpg_err *err)
{
	int rc;
	char what[DPG_ERR_MSG_MAX], more[DPG_ERR_MSG_MAX + 32];

	ckpt_dir_name(meta, what, sizeof(what));
	if ((rc = check_state_args(L, rank, nstate, state, what, err)) != 0)
		return rc;
	if (meta->layout.nranks < 1 || !meta->layout.u)
		return dpg_errf(err, "%s: its metadata is not loaded", what);
	if (meta->nstate != nstate)
		return dpg_errf(err, "%s holds %d optimizer state arrays per element, this "
				"run has %d (another optimizer?)", what, meta->nstate, nstate);
	if (!dpg_zlayout_same_model(&meta->layout, L, err)) {
		snprintf(more, sizeof(more), "%s holds another model", what);
		return dpg_err_prefix(err, more);
	}
	return 0;
}

static void zero_state(const struct dpg_zlayout *L, int nstate, float **state)
{
	int k;

	for (k = 0; k < nstate; k++)
		memset(state[k], 0, L->shard_numel * sizeof(float));
}

/* Zero what no file fills: each unit's padding past the rank's real
 * elements (the reads overwrite the rest, and a failed read zeroes all). */
static void zero_padding(const struct dpg_zlayout *L, int rank, int nstate, float **state)
{
	size_t lo, hi;
	int k, u;

	for (u = 0; u < L->nunits; u++) {
		const struct dpg_zunit *U = &L->u[u];

		dpg_zlayout_shard_range(L, u, rank, &lo, &hi);
		for (k = 0; k < nstate && hi - lo < U->shard; k++)
			memset(state[k] + U->shard_off + (hi - lo), 0,
			       (U->shard - (hi - lo)) * sizeof(float));
	}
}

int dpg_ckpt_read_shard(const struct dpg_ckpt_meta *meta, const struct dpg_zlayout *L,
			int rank, int nstate, float **state, struct dpg_err *err)
{
	struct reshard rs = { meta, &meta->layout, L, rank, nstate, state, NULL };
	unsigned char *needed;
	int old, rc = 0;

	if ((rc = reshard_check(meta, L, rank, nstate, state, err)) != 0)
		return rc;
	zero_padding(L, rank, nstate, state);
	needed = calloc((size_t)meta->layout.nranks, 1);
	rs.buf = malloc(CK_RBUF);
	if (!needed || !rs.buf) {
		free(needed);
		free(rs.buf);
		return dpg_errs(err, DPG_ERR_NOMEM, "%s: out of memory for the read buffers",
				meta->stepdir);
	}
	mark_needed(&rs, needed);
	for (old = 0; old < meta->layout.nranks && rc == 0; old++)
		if (needed[old])
			rc = load_old_shard(&rs, old, err);
	free(needed);
	free(rs.buf);
	if (rc != 0)
		zero_state(L, nstate, state);	/* nothing unverified stays */
	return rc;
}

/* ------------------------------------------------------------ leftovers */

/* Unlink the atomic writer's leftovers in path (dpg_fio_is_tmp_name: our
 * exact names, nothing else), never through a symbolic link. */
static void clean_tmp_in(const char *path, int nofollow)
{
	struct dirent *de;
	DIR *d;
	int fd;

	do {
		fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC |
			  (nofollow ? O_NOFOLLOW : 0));
	} while (fd < 0 && errno == EINTR);
	if (fd < 0)
		return;
	d = fdopendir(fd);
	if (!d) {
		(void)close(fd);
		return;
	}
	while ((de = readdir(d)) != NULL)
		if (dpg_fio_is_tmp_name(de->d_name))
			(void)unlinkat(fd, de->d_name, 0);
	closedir(d);
}

void dpg_ckpt_clean_tmp(const char *dir, long step)
{
	char sd[CK_PATH_MAX];

	if (!dir || !*dir)
		return;
	clean_tmp_in(dir, 0);
	if (dpg_ckpt_stepdir(dir, step, sd, sizeof(sd), NULL) == 0)
		clean_tmp_in(sd, 1);
}
