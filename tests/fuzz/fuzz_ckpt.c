/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_ckpt.c - libFuzzer harness for lib/train/ckpt.c's readers: the input
 * becomes a checkpoint file in a private temp dir and is read back.  Byte 0:
 * bits 0-1 pick the file (0 meta, 1 shard-00000 of a valid 2-rank save,
 * 2 latest), bit 2 appends a correct digest (so the parser behind the
 * checksum is reached: that of the version the bytes name, else the version
 * written); the rest is the file. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckhash.h"
#include "ckpt.h"
#include "digest.h"

#define NSTATE 2

static char g_meta_dir[256], g_shard_dir[256];
static struct dpg_zlayout g_L1;		/* the model at 1 rank: the reader */

static void die(const char *what, const char *msg)
{
	fprintf(stderr, "fuzz_ckpt: %s%s%s\n", what, msg ? ": " : "", msg ? msg : "");
	abort();
}

static void build(struct dpg_zlayout *L, int nranks)
{
	static const char *const names[] = { "embed", "w", "head" };
	static const size_t numel[] = { 5, 17, 3 };
	static const int unit[] = { 0, 0, 1 };
	struct dpg_err e = { "" };

	if (dpg_zlayout_build(L, 3, names, numel, unit, nranks, &e) != 0)
		die("layout", e.msg);
}

/* A valid step 1 saved by 2 ranks in dir. */
static void save_valid(const char *dir)
{
	struct dpg_zlayout L;
	struct dpg_err e = { "" };
	float *s[NSTATE];
	int r, k;

	build(&L, 2);
	for (k = 0; k < NSTATE; k++) {
		s[k] = calloc(L.shard_numel, sizeof(float));
		if (!s[k])
			die("out of memory", NULL);
	}
	if (dpg_ckpt_prepare(dir, 1, &e) != 0)
		die("prepare", e.msg);
	for (r = 0; r < 2; r++)
		if (dpg_ckpt_write_shard(dir, 1, &L, r, NSTATE, s, &e) != 0)
			die("write_shard", e.msg);
	if (dpg_ckpt_commit(dir, 1, &L, 0, NSTATE, "x", 1, &e) != 0)
		die("commit", e.msg);
	for (k = 0; k < NSTATE; k++)
		free(s[k]);
	dpg_zlayout_free(&L);
}

static void init_once(void)
{
	const char *tmp = getenv("TMPDIR");

	if (g_meta_dir[0])
		return;
	snprintf(g_meta_dir, sizeof(g_meta_dir), "%s/dpg-fuzz-ckpt-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(g_meta_dir))
		die("mkdtemp", strerror(errno));
	snprintf(g_shard_dir, sizeof(g_shard_dir), "%s/s", g_meta_dir);
	save_valid(g_shard_dir);
	build(&g_L1, 1);
}

static void put(const char *dir, const char *name, const uint8_t *p, size_t n, int sign)
{
	char path[512];
	uint8_t d[DPG_CKHASH_MAX];
	uint32_t v = n >= 12 ? (uint32_t)p[8] | (uint32_t)p[9] << 8 | (uint32_t)p[10] << 16 |
				(uint32_t)p[11] << 24 : DPG_CKHASH_V_WRITE;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || (n && write(fd, p, n) != (ssize_t)n))
		die("write", path);
	if (sign) {
		if (dpg_ckhash_len(v) == 0)
			v = DPG_CKHASH_V_WRITE;
		if (dpg_ckhash_once(v, p, n, d, NULL) != 0)
			die("digest", path);
		if (write(fd, d, dpg_ckhash_len(v)) != (ssize_t)dpg_ckhash_len(v))
			die("write", path);
	}
	close(fd);
}

static void read_meta_case(const uint8_t *p, size_t n, int sign)
{
	struct dpg_ckpt_meta meta;
	struct dpg_err e = { "" };
	static const char latest[] = "step-00000001\n";
	char sd[300];

	snprintf(sd, sizeof(sd), "%s/step-00000001", g_meta_dir);
	if (dpg_ckpt_prepare(g_meta_dir, 1, &e) != 0)
		die("prepare", e.msg);
	put(g_meta_dir, "latest", (const uint8_t *)latest, sizeof(latest) - 1, 0);
	put(sd, "meta", p, n, sign);
	if (dpg_ckpt_read_meta(g_meta_dir, &meta, &e) == 0) {
		if (meta.layout.nranks < 1 || meta.layout.nunits < 1 || meta.nstate < 1 ||
		    meta.nstate > DPG_CKPT_MAX_STATE || (meta.extra_len && !meta.extra))
			die("accepted meta is inconsistent", NULL);
	} else if (e.msg[0] == '\0' || memchr(e.msg, '\0', sizeof(e.msg)) == NULL) {
		die("failure without a terminated message", NULL);
	}
	dpg_ckpt_meta_free(&meta);
}

static void read_shard_case(const uint8_t *p, size_t n, int sign)
{
	struct dpg_ckpt_meta meta;
	struct dpg_err e = { "" };
	char sd[300];
	float *s[NSTATE];
	size_t i;
	int k, rc;

	snprintf(sd, sizeof(sd), "%s/step-00000001", g_shard_dir);
	put(sd, "shard-00000", p, n, sign);
	if (dpg_ckpt_read_meta(g_shard_dir, &meta, &e) != 0)
		die("the valid meta was refused", e.msg);
	for (k = 0; k < NSTATE; k++)
		if (!(s[k] = malloc(g_L1.shard_numel * sizeof(float))))
			die("out of memory", NULL);
	rc = dpg_ckpt_read_shard(&meta, &g_L1, 0, NSTATE, s, &e);
	for (k = 0; rc != 0 && k < NSTATE; k++)
		for (i = 0; i < g_L1.shard_numel; i++)
			if (s[k][i] != 0.0f)
				die("state left non-zero after a failed read", e.msg);
	for (k = 0; k < NSTATE; k++)
		free(s[k]);
	dpg_ckpt_meta_free(&meta);
}

static void read_latest_case(const uint8_t *p, size_t n)
{
	struct dpg_ckpt_meta meta;
	struct dpg_err e = { "" };

	put(g_shard_dir, "latest", p, n, 0);
	(void)dpg_ckpt_read_meta(g_shard_dir, &meta, &e);
	dpg_ckpt_meta_free(&meta);
	put(g_shard_dir, "latest", (const uint8_t *)"step-00000001\n", 14, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	init_once();
	switch (data[0] & 3) {
	case 0:
		read_meta_case(data + 1, size - 1, data[0] & 4);
		break;
	case 1:
		read_shard_case(data + 1, size - 1, data[0] & 4);
		break;
	default:
		read_latest_case(data + 1, size - 1);
		break;
	}
	return 0;
}
