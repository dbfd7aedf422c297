/* SPDX-License-Identifier: BSD-3-Clause */
/* test_ckpt.c - unit tests for lib/train/ckpt.c: save at 1-4 ranks and load at 1-5
 * (resharding), round trips, corruption, hostile files, other models, bad
 * latest pointers, a crash between the shards and the commit, and a shared
 * directory: only dpg's own temporary names are removed, files 0600 and
 * directories 0700, foreign or group/other-writable directories and
 * symbolic links refused.
 *
 * One process plays every rank.  Each test works in its own mkdtemp
 * directory under $TMPDIR (or /tmp), removed by the teardown. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"
#include "ckhash.h"
#include "digest.h"

#define MAXP 8
#define PATHLEN 1024

/* Offsets in the version-1 formats (see lib/train/ckpt.c). */
#define META_NRANKS 12
#define META_STEP 16
#define META_NSTATE 28
#define META_NPARAMS 32
#define META_NUNITS 36
#define META_PARAMS 40
#define META_REC 76
#define SHARD_NRANKS 16
#define SHARD_NUNITS 32
#define SHARD_RANGES 36

struct model {
	int n;
	const char *names[MAXP];
	size_t numel[MAXP];
	int unit[MAXP];
};

/* Odd sizes over three units. */
static const struct model base = {
	5, { "embed", "w1", "b1", "w2", "head" }, { 1, 7, 100, 1000, 33 }, { 0, 0, 1, 1, 2 }
};

struct fixture {
	char dir[PATHLEN];
};

struct state {
	int nstate;
	float *a[DPG_CKPT_MAX_STATE];
};

/* ================================================================ helpers */

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int setup(void **st)
{
	struct fixture *f = calloc(1, sizeof(*f));
	const char *tmp = getenv("TMPDIR");

	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "%s/dpg-ckpt-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	*st = f;
	return 0;
}

static int teardown(void **st)
{
	struct fixture *f = *st;
	int rc = nftw(f->dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);

	free(f);
	return rc == 0 ? 0 : -1;
}

static void sub(char *buf, const char *dir, const char *name)
{
	int n = snprintf(buf, PATHLEN, "%s/%s", dir, name);

	assert_true(n > 0 && n < PATHLEN);
}

static void assert_has(const char *msg, const char *want)
{
	if (!strstr(msg, want))
		fail_msg("expected \"%s\" in the error \"%s\"", want, msg);
}

/* Unique, exact in fp32, never 0: state k, unit u, unit-flat position i.
 * Past 100000 positions (test_direct_reads' long runs) exact and never 0,
 * and different from the neighbours', but not unique. */
static float value(int k, int u, size_t i, int salt)
{
	assert_true(u < 4);
	if (i >= 100000)
		return (float)(1 + (i * 2654435761u + (size_t)u * 97 + (size_t)k * 13 +
				    (size_t)salt * 7) % 16777213);
	return (float)(1 + i + 100000 * (size_t)u + 1000000 * (size_t)k +
		       4000000 * (size_t)salt);
}

static void build(struct dpg_zlayout *L, const struct model *m, int nranks)
{
	struct dpg_err e = { "" };

	if (dpg_zlayout_build(L, m->n, m->names, m->numel, m->unit, nranks, &e) != 0)
		fail_msg("layout: %s", e.msg);
}

static void state_alloc(struct state *s, const struct dpg_zlayout *L, int nstate)
{
	int k;

	memset(s, 0, sizeof(*s));
	s->nstate = nstate;
	for (k = 0; k < nstate; k++) {
		s->a[k] = malloc(L->shard_numel * sizeof(float) + 1);
		assert_non_null(s->a[k]);
	}
}

static void state_free(struct state *s)
{
	int k;

	for (k = 0; k < DPG_CKPT_MAX_STATE; k++)
		free(s->a[k]);
	memset(s, 0, sizeof(*s));
}

/* Rank's shard as the model holds it; padding gets garbage (never saved). */
static void fill(const struct dpg_zlayout *L, int rank, struct state *s, int salt)
{
	int k, u;
	size_t j;

	for (k = 0; k < s->nstate; k++)
		for (u = 0; u < L->nunits; u++) {
			const struct dpg_zunit *U = &L->u[u];

			for (j = 0; j < U->shard; j++) {
				size_t pos = (size_t)rank * U->shard + j;

				s->a[k][U->shard_off + j] =
					pos < U->numel ? value(k, u, pos, salt) : -7.0f;
			}
		}
}

/* Garbage everywhere: read_shard must overwrite all of it. */
static void scribble(const struct dpg_zlayout *L, struct state *s)
{
	int k;
	size_t j;

	for (k = 0; k < s->nstate; k++)
		for (j = 0; j < L->shard_numel; j++)
			s->a[k][j] = 12345.5f;
}

static void check(const struct dpg_zlayout *L, int rank, const struct state *s, int salt)
{
	int k, u;
	size_t j;

	for (k = 0; k < s->nstate; k++)
		for (u = 0; u < L->nunits; u++) {
			const struct dpg_zunit *U = &L->u[u];

			for (j = 0; j < U->shard; j++) {
				size_t pos = (size_t)rank * U->shard + j;
				float want = pos < U->numel ? value(k, u, pos, salt) : 0.0f;
				float got = s->a[k][U->shard_off + j];

				if (got != want)
					fail_msg("rank %d/%d state %d unit %d position %zu: "
						 "%g, expected %g", rank, L->nranks, k, u, pos,
						 (double)got, (double)want);
			}
		}
}

static void check_zero(const struct dpg_zlayout *L, const struct state *s)
{
	int k;
	size_t j;

	for (k = 0; k < s->nstate; k++)
		for (j = 0; j < L->shard_numel; j++)
			if (s->a[k][j] != 0.0f)
				fail_msg("state %d element %zu is %g after a failed read", k, j,
					 (double)s->a[k][j]);
}

/* Every rank of an nranks group writes its shard; rank 0 commits. */
static void save(const char *dir, const struct model *m, int nranks, long step,
		 int nstate, int salt, const void *extra, size_t extra_len)
{
	struct dpg_zlayout L;
	struct dpg_err e = { "" };
	struct state s;
	int r;

	build(&L, m, nranks);
	state_alloc(&s, &L, nstate);
	for (r = 0; r < nranks; r++) {
		if (dpg_ckpt_prepare(dir, step, &e) != 0)
			fail_msg("prepare: %s", e.msg);
		fill(&L, r, &s, salt);
		if (dpg_ckpt_write_shard(dir, step, &L, r, nstate, s.a, &e) != 0)
			fail_msg("write_shard %d: %s", r, e.msg);
	}
	if (dpg_ckpt_commit(dir, step, &L, nstate == 3 ? 0 : 1, nstate, extra, extra_len,
			    &e) != 0)
		fail_msg("commit: %s", e.msg);
	state_free(&s);
	dpg_zlayout_free(&L);
}

static void read_meta_ok(const char *dir, struct dpg_ckpt_meta *meta)
{
	struct dpg_err e = { "" };

	if (dpg_ckpt_read_meta(dir, meta, &e) != 0)
		fail_msg("read_meta %s: %s", dir, e.msg);
}

/* Load every rank of an nranks group and check the values. */
static void load_check(const char *dir, const struct model *m, int nranks, int nstate,
		       long step, int salt)
{
	struct dpg_ckpt_meta meta;
	struct dpg_zlayout L;
	struct dpg_err e = { "" };
	struct state s;
	int r;

	read_meta_ok(dir, &meta);
	assert_int_equal(meta.step, step);
	build(&L, m, nranks);
	state_alloc(&s, &L, nstate);
	for (r = 0; r < nranks; r++) {
		scribble(&L, &s);
		if (dpg_ckpt_read_shard(&meta, &L, r, nstate, s.a, &e) != 0)
			fail_msg("read_shard %d/%d: %s", r, nranks, e.msg);
		check(&L, r, &s, salt);
	}
	state_free(&s);
	dpg_zlayout_free(&L);
	dpg_ckpt_meta_free(&meta);
}

/* Expect read_shard of (nranks, rank) to fail with want in the message, and
 * the state to be all zero afterwards. */
static void load_fails(const char *dir, const struct model *m, int nranks, int rank,
		       int nstate, const char *want, const char *want2)
{
	struct dpg_ckpt_meta meta;
	struct dpg_zlayout L;
	struct dpg_err e = { "" };
	struct state s;

	read_meta_ok(dir, &meta);
	build(&L, m, nranks);
	state_alloc(&s, &L, nstate);
	scribble(&L, &s);
	if (dpg_ckpt_read_shard(&meta, &L, rank, nstate, s.a, &e) == 0)
		fail_msg("read_shard %d/%d of %s succeeded, expected \"%s\"", rank, nranks,
			 dir, want);
	assert_has(e.msg, want);
	if (want2)
		assert_has(e.msg, want2);
	/* a refusal of the model comes before the state is touched; any
	 * other failure leaves it all zero */
	if (!strstr(e.msg, "holds another model") && !strstr(e.msg, "per element"))
		check_zero(&L, &s);
	state_free(&s);
	dpg_zlayout_free(&L);
	dpg_ckpt_meta_free(&meta);
}

static void meta_fails(const char *dir, const char *want)
{
	struct dpg_ckpt_meta meta;
	struct dpg_err e = { "" };

	if (dpg_ckpt_read_meta(dir, &meta, &e) == 0)
		fail_msg("read_meta %s succeeded, expected \"%s\"", dir, want);
	assert_has(e.msg, want);
	assert_null(meta.layout.p);
	assert_null(meta.extra);
	dpg_ckpt_meta_free(&meta);
}

static unsigned char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf;
	long n;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n >= 0);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static void spit(const char *path, const void *buf, size_t len)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(buf, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

static void copy_file(const char *src, const char *dst)
{
	size_t len;
	unsigned char *b = slurp(src, &len);

	spit(dst, b, len);
	free(b);
}

static void flip(const char *path, size_t off)
{
	size_t len;
	unsigned char *b = slurp(path, &len);

	assert_true(off < len);
	b[off] ^= 0x20;
	spit(path, b, len);
	free(b);
}

/* Recompute the trailing digest (the version written, XXH3-128): a hostile
 * file, not a corrupt one. */
static void resign(unsigned char *b, size_t len)
{
	size_t hl = dpg_ckhash_len(DPG_CKHASH_V_WRITE);
	uint8_t d[DPG_CKHASH_MAX];

	assert_true(len >= hl);
	assert_int_equal(dpg_ckhash_once(DPG_CKHASH_V_WRITE, b, len - hl, d, NULL), 0);
	memcpy(b + len - hl, d, hl);
}

static void put32(unsigned char *p, uint32_t v)
{
	int i;

	for (i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
	int i;

	for (i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* ================================================================ round trips */

/* Saved at 1-4 ranks, loaded at 1-5, with 1, 2 and 3 state arrays. */
static void test_reshard_matrix(void **st)
{
	struct fixture *f = *st;
	int old, neu, nstate;

	for (nstate = 1; nstate <= DPG_CKPT_MAX_STATE; nstate++)
		for (old = 1; old <= 4; old++) {
			char dir[PATHLEN], name[64], extra[32];
			struct dpg_ckpt_meta meta;
			char want_sd[PATHLEN + 32];

			snprintf(name, sizeof(name), "o%d-s%d", old, nstate);
			sub(dir, f->dir, name);
			snprintf(extra, sizeof(extra), "extra-%d-%d", old, nstate);
			save(dir, &base, old, 100 + old, nstate, 0, extra, strlen(extra));

			read_meta_ok(dir, &meta);
			assert_int_equal(meta.step, 100 + old);
			assert_int_equal(meta.nstate, nstate);
			assert_int_equal(meta.optimizer, nstate == 3 ? 0 : 1);
			assert_int_equal(meta.layout.nranks, old);
			assert_int_equal(meta.layout.nparams, base.n);
			assert_int_equal(meta.layout.nunits, 3);
			assert_int_equal(meta.extra_len, strlen(extra));
			assert_memory_equal(meta.extra, extra, strlen(extra));
			snprintf(want_sd, sizeof(want_sd), "%s/step-%08d", dir, 100 + old);
			assert_string_equal(meta.stepdir, want_sd);
			dpg_ckpt_meta_free(&meta);

			for (neu = 1; neu <= 5; neu++)
				load_check(dir, &base, neu, nstate, 100 + old, 0);
		}
}

/* Shards larger than the I/O buffer, with buffer edges inside floats. */
static void test_reshard_big(void **st)
{
	static const struct model big = {
		4, { "a", "b", "c", "d" }, { 70001, 3, 65537, 9 }, { 0, 0, 1, 2 }
	};
	struct fixture *f = *st;
	char d1[PATHLEN], d2[PATHLEN];
	int neu;

	sub(d1, f->dir, "big3");
	save(d1, &big, 3, 1, 3, 0, NULL, 0);
	for (neu = 1; neu <= 5; neu += 2)
		load_check(d1, &big, neu, 3, 1, 0);
	sub(d2, f->dir, "big1");
	save(d2, &big, 1, 2, 2, 1, NULL, 0);
	load_check(d2, &big, 4, 2, 2, 1);
}

static void test_extra_roundtrip(void **st)
{
	struct fixture *f = *st;
	struct dpg_ckpt_meta meta;
	unsigned char extra[3001];
	size_t i;

	for (i = 0; i < sizeof(extra); i++)
		extra[i] = (unsigned char)(i * 37 + (i >> 8));
	save(f->dir, &base, 2, 3, 2, 0, extra, sizeof(extra));
	read_meta_ok(f->dir, &meta);
	assert_int_equal(meta.extra_len, sizeof(extra));
	assert_memory_equal(meta.extra, extra, sizeof(extra));
	dpg_ckpt_meta_free(&meta);
	assert_null(meta.extra);

	save(f->dir, &base, 2, 4, 2, 0, NULL, 0);
	read_meta_ok(f->dir, &meta);
	assert_int_equal(meta.step, 4);
	assert_int_equal(meta.extra_len, 0);
	assert_null(meta.extra);
	dpg_ckpt_meta_free(&meta);
}

/* The files and only them: no temporary file left, latest in its form. */
static void test_files_on_disk(void **st)
{
	struct fixture *f = *st;
	char path[PATHLEN], sd[PATHLEN];
	struct dpg_err e = { "" };
	unsigned char *b;
	struct dirent *de;
	DIR *d;
	size_t len;
	int n = 0;

	save(f->dir, &base, 3, 7, 3, 0, "x", 1);
	sub(path, f->dir, "latest");
	b = slurp(path, &len);
	assert_int_equal(len, 14);
	assert_memory_equal(b, "step-00000007\n", 14);
	free(b);
	assert_int_equal(dpg_ckpt_stepdir(f->dir, 7, sd, sizeof(sd), &e), 0);
	d = opendir(sd);
	assert_non_null(d);
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		if (strcmp(de->d_name, "meta") != 0 && strcmp(de->d_name, "shard-00000") != 0 &&
		    strcmp(de->d_name, "shard-00001") != 0 &&
		    strcmp(de->d_name, "shard-00002") != 0)
			fail_msg("unexpected file %s in %s", de->d_name, sd);
		n++;
	}
	closedir(d);
	assert_int_equal(n, 4);
	d = opendir(f->dir);
	assert_non_null(d);
	n = 0;
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	assert_int_equal(n, 2);	/* latest, step-00000007 */
}

/* The atomic writer's leftovers (its names, both forms) are cleaned; a
 * second save of the same step overwrites the first. */
static void test_stale_tmp_and_overwrite(void **st)
{
	struct fixture *f = *st;
	char sd[PATHLEN], tmp[PATHLEN + 64], old[PATHLEN + 64];
	struct dpg_err e = { "" };

	assert_int_equal(dpg_ckpt_prepare(f->dir, 5, &e), 0);
	assert_int_equal(dpg_ckpt_stepdir(f->dir, 5, sd, sizeof(sd), &e), 0);
	snprintf(tmp, sizeof(tmp), "%s/.shard-00000.tmp.%ld.0123456789abcdef", sd,
		 (long)getpid());
	spit(tmp, "stale", 5);
	snprintf(old, sizeof(old), "%s/shard-00000.tmp.%ld", sd, (long)getpid());
	spit(old, "stale", 5);
	save(f->dir, &base, 2, 5, 2, 0, NULL, 0);
	dpg_ckpt_clean_tmp(f->dir, 5);
	assert_int_equal(access(tmp, F_OK), -1);
	assert_int_equal(access(old, F_OK), -1);
	load_check(f->dir, &base, 3, 2, 5, 0);
	save(f->dir, &base, 2, 5, 2, 1, NULL, 0);
	load_check(f->dir, &base, 3, 2, 5, 1);
}

/* ================================================================ shared directories */

/* A user's own files that merely contain ".tmp." survive a clean; dpg's
 * exact temporary names (both forms, both directories) do not. */
static void test_user_tmp_files_survive(void **st)
{
	static const char *const users[] = {
		"thesis.tmp.tex", "notes.tmp.1", "meta.tmp.", "meta.tmp.12x",
		".meta.tmp.1.0123", ".meta.tmp.1.0123456789ABCDEF", "shard-1.tmp.5",
		"xlatest.tmp.7", ".latest.tmp.7.0123456789abcdef0",
	};
	static const char *const ours[] = {
		"meta.tmp.123", "latest.tmp.9", "shard-00003.tmp.77",
		".meta.tmp.123.0123456789abcdef", ".shard-1048575.tmp.4.fedcba9876543210",
	};
	struct fixture *f = *st;
	char sd[PATHLEN], path[PATHLEN];
	const char *where[2];
	struct dpg_err e = { "" };
	size_t i;
	int w;

	save(f->dir, &base, 2, 3, 2, 0, NULL, 0);
	assert_int_equal(dpg_ckpt_stepdir(f->dir, 3, sd, sizeof(sd), &e), 0);
	where[0] = f->dir;
	where[1] = sd;
	for (w = 0; w < 2; w++) {
		for (i = 0; i < sizeof(users) / sizeof(users[0]); i++) {
			sub(path, where[w], users[i]);
			spit(path, "mine", 4);
		}
		for (i = 0; i < sizeof(ours) / sizeof(ours[0]); i++) {
			sub(path, where[w], ours[i]);
			spit(path, "half", 4);
		}
	}
	dpg_ckpt_clean_tmp(f->dir, 3);
	for (w = 0; w < 2; w++) {
		for (i = 0; i < sizeof(users) / sizeof(users[0]); i++) {
			sub(path, where[w], users[i]);
			if (access(path, F_OK) != 0)
				fail_msg("the user's %s was removed", path);
		}
		for (i = 0; i < sizeof(ours) / sizeof(ours[0]); i++) {
			sub(path, where[w], ours[i]);
			if (access(path, F_OK) == 0)
				fail_msg("dpg's leftover %s was kept", path);
		}
	}
	load_check(f->dir, &base, 2, 2, 3, 0);
}

static void assert_mode(const char *path, unsigned want)
{
	struct stat sb;

	assert_int_equal(lstat(path, &sb), 0);
	if ((sb.st_mode & 07777) != want)
		fail_msg("%s has mode %04o, expected %04o", path, sb.st_mode & 07777, want);
}

/* With umask 0, what a save creates is still private. */
static void test_private_modes(void **st)
{
	static const char *const files[] = { "meta", "shard-00000", "shard-00001" };
	struct fixture *f = *st;
	char dir[PATHLEN], mid[PATHLEN], sd[PATHLEN], path[PATHLEN];
	struct dpg_err e = { "" };
	mode_t old = umask(0);
	size_t i;

	sub(mid, f->dir, "new");
	sub(dir, mid, "ckpt");
	save(dir, &base, 2, 4, 2, 0, NULL, 0);
	umask(old);
	assert_mode(mid, 0700);
	assert_mode(dir, 0700);
	assert_int_equal(dpg_ckpt_stepdir(dir, 4, sd, sizeof(sd), &e), 0);
	assert_mode(sd, 0700);
	sub(path, dir, "latest");
	assert_mode(path, 0600);
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		sub(path, sd, files[i]);
		assert_mode(path, 0600);
	}
}

static void prepare_fails(const char *dir, long step, const char *want, const char *want2)
{
	struct dpg_err e = { "" };

	if (dpg_ckpt_prepare(dir, step, &e) == 0)
		fail_msg("prepare %s succeeded, expected \"%s\"", dir, want);
	assert_has(e.msg, want);
	if (want2)
		assert_has(e.msg, want2);
}

/* Directories another user could change are refused, for saving and (when
 * writable by others) for loading, with the owner and mode in the message. */
static void test_foreign_dirs(void **st)
{
	struct fixture *f = *st;
	char dir[PATHLEN], sd[PATHLEN];
	struct dpg_err e = { "" };

	sub(dir, f->dir, "shared");
	assert_int_equal(mkdir(dir, 0700), 0);
	assert_int_equal(chmod(dir, 0777), 0);
	prepare_fails(dir, 1, "mode 0777", "writable by group or others");
	assert_int_equal(chmod(dir, 01777), 0);
	prepare_fails(dir, 1, "mode 1777", dir);
	assert_int_equal(chmod(dir, 0770), 0);
	prepare_fails(dir, 1, "mode 0770", NULL);
	assert_int_equal(chmod(dir, 0700), 0);
	save(dir, &base, 2, 1, 2, 0, NULL, 0);
	assert_int_equal(dpg_ckpt_stepdir(dir, 1, sd, sizeof(sd), &e), 0);
	assert_int_equal(chmod(sd, 0777), 0);
	prepare_fails(dir, 1, "step-00000001 (owner uid", "mode 0777");
	meta_fails(dir, "mode 0777");
	assert_int_equal(chmod(sd, 0700), 0);
	assert_int_equal(chmod(dir, 0722), 0);
	meta_fails(dir, "writable by group or others");
	assert_int_equal(chmod(dir, 0700), 0);
	load_check(dir, &base, 2, 2, 1, 0);
	if (geteuid() != 0)
		return;	/* chown needs root */
	assert_int_equal(chown(sd, 65534, 65534), 0);
	prepare_fails(dir, 1, "owner uid 65534", "owned by another user");
	assert_int_equal(chown(sd, 0, 0), 0);
	assert_int_equal(chown(dir, 65534, 65534), 0);
	prepare_fails(dir, 2, "owner uid 65534", "owned by another user");
}

/* A symbolic link planted for a shard, latest or a step directory is
 * refused (open(O_NOFOLLOW)), even when it points at an intact copy. */
static void test_symlinks_refused(void **st)
{
	struct fixture *f = *st;
	char sd[PATHLEN], path[PATHLEN], copy[PATHLEN], other[PATHLEN];
	struct dpg_err e = { "" };

	save(f->dir, &base, 2, 6, 2, 0, NULL, 0);
	assert_int_equal(dpg_ckpt_stepdir(f->dir, 6, sd, sizeof(sd), &e), 0);
	sub(path, sd, "shard-00001");
	sub(copy, f->dir, "elsewhere");
	copy_file(path, copy);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(symlink(copy, path), 0);
	load_fails(f->dir, &base, 2, 1, 2, "shard-00001 is a symbolic link", NULL);
	assert_int_equal(unlink(path), 0);
	copy_file(copy, path);
	load_check(f->dir, &base, 2, 2, 6, 0);

	sub(path, f->dir, "latest");
	sub(copy, f->dir, "latest-copy");
	copy_file(path, copy);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(symlink(copy, path), 0);
	meta_fails(f->dir, "latest is a symbolic link");
	assert_int_equal(unlink(path), 0);
	copy_file(copy, path);

	sub(other, f->dir, "real-step");
	assert_int_equal(rename(sd, other), 0);
	assert_int_equal(symlink(other, sd), 0);
	meta_fails(f->dir, "is a symbolic link");
	prepare_fails(f->dir, 6, "is a symbolic link", NULL);
}

/* ================================================================ corruption */

static void shard_path(const char *dir, long step, int rank, char *buf)
{
	char sd[PATHLEN], name[32];
	struct dpg_err e = { "" };

	assert_int_equal(dpg_ckpt_stepdir(dir, step, sd, sizeof(sd), &e), 0);
	snprintf(name, sizeof(name), "shard-%05d", rank);
	sub(buf, sd, name);
}

static void meta_path(const char *dir, long step, char *buf)
{
	char sd[PATHLEN];
	struct dpg_err e = { "" };

	assert_int_equal(dpg_ckpt_stepdir(dir, step, sd, sizeof(sd), &e), 0);
	sub(buf, sd, "meta");
}

/* Every header byte, every 13th data byte, every digest byte. */
static void test_shard_byte_flips(void **st)
{
	struct fixture *f = *st;
	char path[PATHLEN];
	size_t off, len;
	unsigned char *orig;

	save(f->dir, &base, 2, 1, 3, 0, NULL, 0);
	shard_path(f->dir, 1, 0, path);
	orig = slurp(path, &len);
	for (off = 0; off < len; off += (off < 100 || off + 40 > len) ? 1 : 13) {
		flip(path, off);
		load_fails(f->dir, &base, 1, 0, 3, "shard-00000", NULL);
		spit(path, orig, len);
	}
	free(orig);
	load_check(f->dir, &base, 1, 3, 1, 0);	/* restored: loads again */
}

/* Runs of floats long enough to be read straight into the state arrays
 * (ckpt.c's rf_direct, >= 1 MiB): they round-trip, at the same world size
 * and resharded, and a flipped byte inside one, at its start, in its middle
 * or in its last float, is caught by the digest. */
static void test_direct_reads(void **st)
{
	static const struct model longrun = {
		3, { "w", "b", "v" }, { 700001, 5, 300007 }, { 0, 0, 1 }
	};
	struct fixture *f = *st;
	char path[PATHLEN];
	size_t len, offs[4];
	unsigned char *orig;

	save(f->dir, &longrun, 1, 1, 3, 0, NULL, 0);
	load_check(f->dir, &longrun, 1, 3, 1, 0);
	load_check(f->dir, &longrun, 2, 3, 1, 0);
	shard_path(f->dir, 1, 0, path);
	orig = slurp(path, &len);
	assert_true(len > 8u << 20);	/* 3 states x 1 M floats */
	offs[0] = 200;			/* the first run's start, past the header */
	offs[1] = len / 2;
	offs[2] = len - 64 - 3;		/* the last float, before the digest */
	offs[3] = (size_t)3 << 20;
	for (int i = 0; i < 4; i++) {
		flip(path, offs[i]);
		load_fails(f->dir, &longrun, 1, 0, 3, "shard-00000", "mismatch");
		spit(path, orig, len);
	}
	free(orig);
	load_check(f->dir, &longrun, 1, 3, 1, 0);
}

static void test_shard_truncated(void **st)
{
	struct fixture *f = *st;
	char path[PATHLEN];
	size_t len, i;
	unsigned char *orig;
	const size_t cut[] = { 1, 4, 31, 32, 33, 100 };

	save(f->dir, &base, 2, 1, 2, 0, NULL, 0);
	shard_path(f->dir, 1, 0, path);
	orig = slurp(path, &len);
	for (i = 0; i < sizeof(cut) / sizeof(cut[0]); i++) {
		assert_int_equal(truncate(path, (off_t)(len - cut[i])), 0);
		load_fails(f->dir, &base, 2, 0, 2, "shard-00000", "corrupt or truncated");
		spit(path, orig, len);
	}
	assert_int_equal(truncate(path, 40), 0);
	load_fails(f->dir, &base, 2, 0, 2, "shard-00000", "truncated");
	assert_int_equal(truncate(path, 0), 0);
	load_fails(f->dir, &base, 2, 0, 2, "shard-00000", "only 0 bytes");
	spit(path, orig, len);
	{
		unsigned char *longer = malloc(len + 1);

		assert_non_null(longer);
		memcpy(longer, orig, len);
		longer[len] = 0;
		spit(path, longer, len + 1);
		free(longer);
	}
	load_fails(f->dir, &base, 2, 0, 2, "shard-00000", "bytes, expected");
	assert_int_equal(unlink(path), 0);
	load_fails(f->dir, &base, 2, 0, 2, "shard-00000", "No such file");
	{
		/* rank 1 of 2 needs only old rank 1: still loads */
		struct dpg_ckpt_meta meta;
		struct dpg_zlayout L;
		struct dpg_err e = { "" };
		struct state s;

		read_meta_ok(f->dir, &meta);
		build(&L, &base, 2);
		state_alloc(&s, &L, 2);
		scribble(&L, &s);
		if (dpg_ckpt_read_shard(&meta, &L, 1, 2, s.a, &e) != 0)
			fail_msg("rank 1: %s", e.msg);
		check(&L, 1, &s, 0);
		state_free(&s);
		dpg_zlayout_free(&L);
		dpg_ckpt_meta_free(&meta);
	}
	free(orig);
}

static void test_meta_byte_flips(void **st)
{
	struct fixture *f = *st;
	char path[PATHLEN];
	size_t off, len;
	unsigned char *orig;

	save(f->dir, &base, 3, 2, 3, 0, "abc", 3);
	meta_path(f->dir, 2, path);
	orig = slurp(path, &len);
	for (off = 0; off < len; off++) {
		flip(path, off);
		meta_fails(f->dir, "XXH3-128 mismatch, the file is corrupt");
		spit(path, orig, len);
	}
	load_check(f->dir, &base, 2, 3, 2, 0);
	assert_int_equal(truncate(path, (off_t)len - 1), 0);
	meta_fails(f->dir, "/meta");
	assert_int_equal(truncate(path, 10), 0);
	meta_fails(f->dir, "truncated or corrupt");
	assert_int_equal(unlink(path), 0);
	meta_fails(f->dir, "No such file");
	free(orig);
}

/* Rewrite a written (version 2) file as version 1: the version field set
 * to 1 and the 16-byte XXH3-128 trailer replaced by the SHA-256 of the rest
 * (32 bytes), which is all that version 1 differs in. */
static void to_v1(const char *path)
{
	size_t len, hl = dpg_ckhash_len(DPG_CKHASH_V_WRITE);
	unsigned char *b = slurp(path, &len), *o;

	assert_true(len > hl + 12);
	o = malloc(len - hl + DPG_SHA256_LEN);
	assert_non_null(o);
	memcpy(o, b, len - hl);
	put32(o + 8, 1);
	assert_int_equal(dpg_sha256(o, len - hl, o + len - hl), 0);
	spit(path, o, len - hl + DPG_SHA256_LEN);
	free(o);
	free(b);
}

/* Checkpoints of format version 1 (SHA-256) still load and reshard; a
 * version-1 meta with a version-2 shard is refused, naming both. */
static void test_v1_still_read(void **st)
{
	struct fixture *f = *st;
	char path[PATHLEN];
	int r;

	save(f->dir, &base, 3, 4, 2, 0, "v1", 2);
	meta_path(f->dir, 4, path);
	to_v1(path);
	for (r = 0; r < 3; r++) {
		shard_path(f->dir, 4, r, path);
		to_v1(path);
	}
	for (r = 1; r <= 4; r++)
		load_check(f->dir, &base, r, 2, 4, 0);
	save(f->dir, &base, 3, 5, 2, 0, "v1", 2);
	meta_path(f->dir, 5, path);
	to_v1(path);
	for (r = 0; r < 2; r++) {
		shard_path(f->dir, 5, r, path);
		to_v1(path);
	}
	load_fails(f->dir, &base, 1, 0, 2, "format version 2, its meta's is 1", "shard-00002");
}

/* Checksums recomputed over hostile fields: clear errors, nothing huge. */
static void test_hostile_meta(void **st)
{
	struct fixture *f = *st;
	char path[PATHLEN];
	size_t len, xoff;
	unsigned char *orig, *b;
	int i;

	save(f->dir, &base, 2, 3, 2, 0, "xy", 2);
	meta_path(f->dir, 3, path);
	orig = slurp(path, &len);
	b = malloc(len);
	assert_non_null(b);
	xoff = META_PARAMS + (size_t)base.n * META_REC;
	for (i = 0; i < 14; i++) {
		const char *want = NULL;

		memcpy(b, orig, len);
		switch (i) {
		case 0:
			b[0] = 'X';
			want = "bad magic";
			break;
		case 1:
			put32(b + 8, 3);
			want = "format version 3";
			break;
		case 2:
			put32(b + META_NRANKS, 0);
			want = "saved by 0 ranks";
			break;
		case 3:
			put32(b + META_NRANKS, 0xffffffffu);
			want = "ranks";
			break;
		case 4:
			put64(b + META_STEP, 4);
			want = "holds step 4 but latest names step 3";
			break;
		case 5:
			put32(b + META_NSTATE, 9);
			want = "9 state arrays";
			break;
		case 6:
			put32(b + META_NPARAMS, 0xffffffffu);
			want = "do not fit";
			break;
		case 7:
			put32(b + META_NPARAMS, 6);
			want = "do not fit";
			break;
		case 8:
			put32(b + META_NUNITS, 9);
			want = "9 units for 5 parameters";
			break;
		case 9:
			put32(b + META_NUNITS, 2);
			want = "2 units announced";
			break;
		case 10:
			memset(b + META_PARAMS, 'A', 64);
			want = "not terminated";
			break;
		case 11:
			put32(b + META_PARAMS + 2 * META_REC + 72, 7);
			want = "unit 7 after unit 0";
			break;
		case 12:
			put64(b + META_PARAMS + 64, 0);
			want = "zero elements";
			break;
		case 13:
			put64(b + xoff, 0xffffffffffffull);
			want = "extra bytes announced";
			break;
		}
		resign(b, len);
		spit(path, b, len);
		meta_fails(f->dir, want);
		meta_fails(f->dir, "/meta");
	}
	free(b);
	free(orig);
}

static void test_hostile_shard(void **st)
{
	struct fixture *f = *st;
	char path[PATHLEN];
	size_t len;
	unsigned char *orig, *b;
	int i;

	save(f->dir, &base, 2, 3, 2, 0, NULL, 0);
	shard_path(f->dir, 3, 0, path);
	orig = slurp(path, &len);
	b = malloc(len);
	assert_non_null(b);
	for (i = 0; i < 6; i++) {
		const char *want = NULL;

		memcpy(b, orig, len);
		switch (i) {
		case 0:
			put32(b + SHARD_NUNITS, 0xffffffffu);
			want = "4294967295 units";
			break;
		case 1:
			put32(b + SHARD_NRANKS, 7);
			want = "a group of 7 ranks";
			break;
		case 2:
			put64(b + SHARD_RANGES, 0xffffffffffffull);
			want = "unit 0 holds";
			break;
		case 3:
			put64(b + SHARD_RANGES + 8 + 16, 1ull << 62);
			want = "unit 1 holds";
			break;
		case 4:
			put32(b + 8, 99);
			want = "format version 99";
			break;
		case 5:
			memcpy(b, "DPGCMETA", 8);
			want = "bad magic";
			break;
		}
		resign(b, len);
		spit(path, b, len);
		load_fails(f->dir, &base, 1, 0, 2, want, "not the file this checkpoint expects");
	}
	free(b);
	free(orig);
}

/* ================================================================ wrong files */

static void test_other_model(void **st)
{
	struct fixture *f = *st;
	struct model m;

	save(f->dir, &base, 2, 1, 2, 0, NULL, 0);

	m = base;
	m.names[3] = "w3";
	load_fails(f->dir, &m, 2, 0, 2, "holds another model: parameter 3 is 'w2', "
		   "expected 'w3'", f->dir);
	m = base;
	m.numel[2] = 101;
	load_fails(f->dir, &m, 2, 0, 2, "holds another model",
		   "'b1' has 100 elements in unit 1, expected 101 in unit 1");
	m = base;
	m.unit[2] = 0;
	load_fails(f->dir, &m, 2, 0, 2, "holds another model", "expected 100 in unit 0");
	m = base;
	m.n = 6;
	m.names[5] = "tail";
	m.numel[5] = 4;
	m.unit[5] = 2;
	load_fails(f->dir, &m, 2, 0, 2, "holds another model", "5 parameters, expected 6");
	load_fails(f->dir, &base, 2, 0, 3, "holds 2 optimizer state arrays", "has 3");
	load_check(f->dir, &base, 2, 2, 1, 0);
}

/* A valid shard of another step, rank or group under this name. */
static void test_misplaced_shard(void **st)
{
	struct fixture *f = *st;
	char other[PATHLEN], s1[PATHLEN], s2a[PATHLEN], s2b[PATHLEN], o3[PATHLEN];
	size_t len;
	unsigned char *keep;

	save(f->dir, &base, 2, 1, 2, 0, NULL, 0);
	save(f->dir, &base, 2, 2, 2, 0, NULL, 0);
	sub(other, f->dir, "other");
	save(other, &base, 3, 2, 2, 0, NULL, 0);
	shard_path(f->dir, 1, 0, s1);
	shard_path(f->dir, 2, 0, s2a);
	shard_path(f->dir, 2, 1, s2b);
	shard_path(other, 2, 0, o3);
	keep = slurp(s2a, &len);

	copy_file(s1, s2a);
	load_fails(f->dir, &base, 2, 0, 2, "shard-00000: header says step 1, expected 2",
		   "not the file");
	copy_file(s2b, s2a);
	load_fails(f->dir, &base, 2, 0, 2, "shard-00000: header says rank 1, expected 0",
		   "not the file");
	copy_file(o3, s2a);
	load_fails(f->dir, &base, 2, 0, 2, "header says a group of 3 ranks, expected 2",
		   NULL);
	spit(s2a, keep, len);
	free(keep);
	load_check(f->dir, &base, 2, 2, 2, 0);
}

static void write_latest(const char *dir, const void *text, size_t len)
{
	char path[PATHLEN];

	sub(path, dir, "latest");
	spit(path, text, len);
}

static void test_latest_missing(void **st)
{
	struct fixture *f = *st;
	char want[2 * PATHLEN + 64], nowhere[PATHLEN];

	snprintf(want, sizeof(want), "no checkpoint in %s (%s/latest missing)", f->dir,
		 f->dir);
	meta_fails(f->dir, want);
	sub(nowhere, f->dir, "nowhere");
	meta_fails(nowhere, "no checkpoint in");
}

static void test_latest_garbage(void **st)
{
	static const char *const bad[] = {
		"../x", "step-00000001/../../x", "garbage", "", "\n", "step-", "step-1\n",
		"step-0000000a\n", "step-00000001\n\n", "step-00000001 \n", "/etc/passwd",
		"step-000000001\n", "step--0000001\n", "step-99999999999999999999999\n",
		"\nstep-00000001", "step-00000001\r\n",
	};
	struct fixture *f = *st;
	char longer[100];
	size_t i;

	save(f->dir, &base, 1, 1, 1, 0, NULL, 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		write_latest(f->dir, bad[i], strlen(bad[i]));
		meta_fails(f->dir, "is not a step name");
	}
	write_latest(f->dir, "step-00000001\0/x\n", 17);
	meta_fails(f->dir, "is not a step name");
	memset(longer, '0', sizeof(longer));
	memcpy(longer, "step-", 5);
	write_latest(f->dir, longer, sizeof(longer));
	meta_fails(f->dir, "longer than");
	write_latest(f->dir, "step-00000099\n", 14);
	meta_fails(f->dir, "step-00000099/meta");
	write_latest(f->dir, "step-00000001", 13);	/* no newline: fine */
	load_check(f->dir, &base, 2, 1, 1, 0);
}

/* Step 2's shards written, never committed, temporary files lying around:
 * step 1 stays in force until step 2 commits. */
static void test_crash_before_commit(void **st)
{
	struct fixture *f = *st;
	struct dpg_zlayout L;
	struct dpg_err e = { "" };
	struct state s;
	char sd[PATHLEN], path[PATHLEN];
	int r;

	save(f->dir, &base, 2, 1, 3, 0, "one", 3);
	build(&L, &base, 2);
	state_alloc(&s, &L, 3);
	assert_int_equal(dpg_ckpt_prepare(f->dir, 2, &e), 0);
	for (r = 0; r < 2; r++) {
		fill(&L, r, &s, 1);
		assert_int_equal(dpg_ckpt_write_shard(f->dir, 2, &L, r, 3, s.a, &e), 0);
	}
	assert_int_equal(dpg_ckpt_stepdir(f->dir, 2, sd, sizeof(sd), &e), 0);
	sub(path, sd, "meta.tmp.123");
	spit(path, "half", 4);
	sub(path, sd, "shard-00000.tmp.123");
	spit(path, "half", 4);
	sub(path, f->dir, "latest.tmp.123");
	spit(path, "step-00000002\n", 14);

	load_check(f->dir, &base, 3, 3, 1, 0);
	load_check(f->dir, &base, 1, 3, 1, 0);

	if (dpg_ckpt_commit(f->dir, 2, &L, 0, 3, "two", 3, &e) != 0)
		fail_msg("commit: %s", e.msg);
	load_check(f->dir, &base, 3, 3, 2, 1);
	{
		struct dpg_ckpt_meta meta;

		read_meta_ok(f->dir, &meta);
		assert_int_equal(meta.extra_len, 3);
		assert_memory_equal(meta.extra, "two", 3);
		dpg_ckpt_meta_free(&meta);
	}
	state_free(&s);
	dpg_zlayout_free(&L);
}

/* ================================================================ arguments */

static void test_bad_arguments(void **st)
{
	struct fixture *f = *st;
	struct dpg_zlayout L;
	struct dpg_err e = { "" };
	struct state s;
	char small[16], path[PATHLEN];
	float *nulls[3] = { NULL, NULL, NULL };

	build(&L, &base, 2);
	state_alloc(&s, &L, 3);
	fill(&L, 0, &s, 0);
	assert_int_equal(dpg_ckpt_prepare(f->dir, 1, &e), 0);
	assert_int_equal(dpg_ckpt_prepare(f->dir, 1, &e), 0);	/* again: fine */
	assert_int_equal(dpg_ckpt_write_shard(f->dir, 1, &L, 0, 0, s.a, &e), -1);
	assert_has(e.msg, "0 state arrays");
	assert_int_equal(dpg_ckpt_write_shard(f->dir, 1, &L, 0, 4, s.a, &e), -1);
	assert_has(e.msg, "4 state arrays");
	assert_int_equal(dpg_ckpt_write_shard(f->dir, 1, &L, 2, 3, s.a, &e), -1);
	assert_has(e.msg, "rank 2 outside");
	assert_int_equal(dpg_ckpt_write_shard(f->dir, 1, &L, -1, 3, s.a, &e), -1);
	assert_has(e.msg, "rank -1 outside");
	assert_int_equal(dpg_ckpt_write_shard(f->dir, 1, &L, 0, 2, nulls, &e), -1);
	assert_has(e.msg, "state array 0 is NULL");
	assert_int_equal(dpg_ckpt_write_shard(f->dir, -1, &L, 0, 3, s.a, &e), -1);
	assert_has(e.msg, "negative");
	assert_int_equal(dpg_ckpt_commit(f->dir, 1, &L, 0, 3, NULL, 5, &e), -1);
	assert_has(e.msg, "no buffer");
	assert_int_equal(dpg_ckpt_commit(f->dir, 1, &L, -2, 3, NULL, 0, &e), -1);
	assert_has(e.msg, "optimizer -2");
	assert_int_equal(dpg_ckpt_commit(f->dir, 1, &L, 0, 3, "x", (size_t)1 << 40, &e), -1);
	assert_has(e.msg, "extra bytes");
	assert_int_equal(dpg_ckpt_stepdir(f->dir, 1, small, sizeof(small), &e), -1);
	assert_has(e.msg, "longer than");
	/* a step directory that does not exist */
	assert_int_equal(dpg_ckpt_write_shard(f->dir, 9, &L, 0, 3, s.a, &e), -DPG_ERR_SYSTEM);
	assert_has(e.msg, "step-00000009/.shard-00000.tmp.");
	/* prepare over a plain file */
	sub(path, f->dir, "file");
	spit(path, "x", 1);
	assert_int_equal(dpg_ckpt_prepare(path, 1, &e), -1);
	assert_has(e.msg, "not a directory");
	/* nested, trailing slash */
	sub(path, f->dir, "a/b//c/");
	assert_int_equal(dpg_ckpt_prepare(path, 1, &e), 0);
	assert_int_equal(dpg_ckpt_write_shard(path, 1, &L, 0, 3, s.a, &e), 0);
	state_free(&s);
	dpg_zlayout_free(&L);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_reshard_matrix, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reshard_big, setup, teardown),
		cmocka_unit_test_setup_teardown(test_extra_roundtrip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_files_on_disk, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_tmp_and_overwrite, setup, teardown),
		cmocka_unit_test_setup_teardown(test_user_tmp_files_survive, setup, teardown),
		cmocka_unit_test_setup_teardown(test_private_modes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_foreign_dirs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symlinks_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_shard_byte_flips, setup, teardown),
		cmocka_unit_test_setup_teardown(test_direct_reads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_shard_truncated, setup, teardown),
		cmocka_unit_test_setup_teardown(test_meta_byte_flips, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v1_still_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_meta, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_shard, setup, teardown),
		cmocka_unit_test_setup_teardown(test_other_model, setup, teardown),
		cmocka_unit_test_setup_teardown(test_misplaced_shard, setup, teardown),
		cmocka_unit_test_setup_teardown(test_latest_missing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_latest_garbage, setup, teardown),
		cmocka_unit_test_setup_teardown(test_crash_before_commit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
