/* SPDX-License-Identifier: BSD-3-Clause */
/* ckpt_bench.c - dpg_zero_save/_load against the raw write+fsync and read of
 * the same bytes on the same file system, interleaved, per rank of a world. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dpg_zero.h"

#define CHUNK ((size_t)8 << 20)	/* what dd bs=8M would write at once */

struct bench {
	dpg_ctx_t *ctx;
	dpg_zero_t *z;
	const char *dir;
	size_t bytes;		/* this rank's share: master + moments */
	int drop;		/* drop the page cache before every read */
	int dropped;		/* it worked (root) */
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU seconds of this process (all its threads) so far: what an op costs
 * apart from waiting for the device, whatever else the machine runs. */
static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
	       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int fail(struct bench *b, const char *what, dpg_status_t st)
{
	fprintf(stderr, "ckpt_bench: rank %d: %s: %s: %s\n", dpg_rank(b->ctx), what,
		dpg_strerror(st), dpg_last_error(b->ctx));
	return -1;
}

/* Rank 0 empties the page cache (root only) so that reads come from disk. */
static int drop_caches(struct bench *b)
{
	int fd, ok = 0;

	if (!b->drop)
		return 0;
	if (dpg_rank(b->ctx) == 0) {
		sync();
		fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
		ok = fd >= 0 && write(fd, "3\n", 2) == 2;
		if (fd >= 0)
			close(fd);
		b->dropped = ok;
	}
	return dpg_barrier(dpg_world(b->ctx)) == DPG_OK ? 0 : -1;
}

static void raw_name(struct bench *b, char *buf, size_t len)
{
	snprintf(buf, len, "%s/raw-%05d", b->dir, dpg_rank(b->ctx));
}

/* dd if=buf of=raw-R bs=8M conv=fsync, into a new file every time (as the
 * save's temporary file is). */
static int raw_write(struct bench *b, const unsigned char *buf)
{
	char path[4200];
	size_t off = 0;
	int fd;

	raw_name(b, path, sizeof(path));
	(void)unlink(path);
	fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	while (off < b->bytes) {
		size_t n = b->bytes - off < CHUNK ? b->bytes - off : CHUNK;
		ssize_t w = write(fd, buf + off, n);

		if (w <= 0) {
			close(fd);
			return -1;
		}
		off += (size_t)w;
	}
	if (fsync(fd) != 0) {
		close(fd);
		return -1;
	}
	return close(fd);
}

/* dd if=raw-R of=/dev/null bs=8M */
static int raw_read(struct bench *b, unsigned char *buf)
{
	char path[4200];
	size_t off = 0;
	int fd;

	raw_name(b, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	while (off < b->bytes) {
		size_t n = b->bytes - off < CHUNK ? b->bytes - off : CHUNK;
		ssize_t r = read(fd, buf, n);

		if (r <= 0) {
			close(fd);
			return -1;
		}
		off += (size_t)r;
	}
	close(fd);
	return 0;
}

enum op { RAW_WRITE, SAVE, RAW_READ, LOAD, ASYNC_BLOCK, ASYNC_TOTAL, NOPS };
static const char *const op_name[NOPS] = {
	"raw_write", "save", "raw_read", "load", "async_block", "async_total"
};

/* One timed operation between barriers: seconds on this rank. */
static int timed(struct bench *b, enum op op, unsigned char *buf, double *t, double *t2,
		 double *cpu)
{
	dpg_status_t st = DPG_OK;
	double t0, c0;
	long pos = 42;

	if ((op == RAW_READ || op == LOAD) && drop_caches(b) != 0)
		return -1;
	if (dpg_barrier(dpg_world(b->ctx)) != DPG_OK)
		return fail(b, "barrier", DPG_ERR_SYSTEM);
	t0 = now_s();
	c0 = cpu_s();
	switch (op) {
	case RAW_WRITE:
		if (raw_write(b, buf) != 0)
			return fprintf(stderr, "ckpt_bench: raw write: %s\n", strerror(errno)), -1;
		break;
	case RAW_READ:
		if (raw_read(b, buf) != 0)
			return fprintf(stderr, "ckpt_bench: raw read: %s\n", strerror(errno)), -1;
		break;
	case SAVE:
		st = dpg_zero_save(b->z, b->dir, &pos, sizeof(pos));
		break;
	case LOAD:
		st = dpg_zero_load(b->z, b->dir, &pos, sizeof(pos), NULL);
		break;
	case ASYNC_BLOCK:
		if ((st = dpg_zero_save_async(b->z, b->dir, &pos, sizeof(pos))) != DPG_OK)
			break;
		*t = now_s() - t0;
		st = dpg_zero_save_wait(b->z);
		break;
	default:
		break;
	}
	if (st != DPG_OK)
		return fail(b, op_name[op], st);
	*cpu = cpu_s() - c0;
	if (dpg_barrier(dpg_world(b->ctx)) != DPG_OK)
		return fail(b, "barrier", DPG_ERR_SYSTEM);
	if (op == ASYNC_BLOCK)
		*t2 = now_s() - t0;
	else
		*t = now_s() - t0;
	return 0;
}

static int setup(struct bench *b, size_t numel, int nunits)
{
	dpg_zero_opts_t o;
	dpg_zero_mem_t mem;
	dpg_status_t st;
	float *v;
	int u, id;

	dpg_zero_opts_default(&o);
	if ((st = dpg_zero_create(b->ctx, &o, &b->z)) != DPG_OK)
		return fail(b, "dpg_zero_create", st);
	for (u = 0; u < nunits; u++) {
		char name[32];

		snprintf(name, sizeof(name), "u%d.w", u);
		if ((st = dpg_zero_add_param(b->z, name, numel / (size_t)nunits, u, &id)) != DPG_OK)
			return fail(b, "dpg_zero_add_param", st);
	}
	if ((st = dpg_zero_commit(b->z)) != DPG_OK)
		return fail(b, "dpg_zero_commit", st);
	v = malloc(numel / (size_t)nunits * sizeof(float));
	if (!v)
		return -1;
	for (size_t i = 0; i < numel / (size_t)nunits; i++)
		v[i] = (float)((i * 2654435761u) % 1000003) * 1e-6f;
	for (u = 0; u < nunits; u++)
		if ((st = dpg_zero_set_param(b->z, u, v)) != DPG_OK)
			break;
	free(v);
	if (st != DPG_OK)
		return fail(b, "dpg_zero_set_param", st);
	if ((st = dpg_zero_memory(b->z, &mem)) != DPG_OK)
		return fail(b, "dpg_zero_memory", st);
	b->bytes = mem.optim_bytes;
	return 0;
}

/* reps rounds of every op, interleaved; the median of each on rank 0. */
static int run(struct bench *b, int reps, size_t numel)
{
	double *t[NOPS], *c[NOPS];
	unsigned char *buf = malloc(b->bytes);
	int r, k, rc = 0, w = dpg_world_size(b->ctx);
	double gb;

	for (k = 0; k < NOPS; k++) {
		t[k] = calloc((size_t)reps, sizeof(double));
		c[k] = calloc((size_t)reps, sizeof(double));
		if (!t[k] || !c[k])
			return -1;
	}
	if (!buf)
		return -1;
	for (size_t i = 0; i < b->bytes; i++)
		buf[i] = (unsigned char)(i * 131u >> 3);
	for (r = 0; r < reps && rc == 0; r++) {
		if (timed(b, RAW_WRITE, buf, &t[RAW_WRITE][r], NULL, &c[RAW_WRITE][r]) != 0 ||
		    timed(b, SAVE, buf, &t[SAVE][r], NULL, &c[SAVE][r]) != 0 ||
		    timed(b, RAW_READ, buf, &t[RAW_READ][r], NULL, &c[RAW_READ][r]) != 0 ||
		    timed(b, LOAD, buf, &t[LOAD][r], NULL, &c[LOAD][r]) != 0 ||
		    timed(b, ASYNC_BLOCK, buf, &t[ASYNC_BLOCK][r], &t[ASYNC_TOTAL][r],
			  &c[ASYNC_BLOCK][r]) != 0)
			rc = -1;
	}
	for (k = 0; k < NOPS && rc == 0; k++) {
		qsort(t[k], (size_t)reps, sizeof(double), cmp_d);
		qsort(c[k], (size_t)reps, sizeof(double), cmp_d);
	}
	gb = (double)b->bytes * w / 1e9;
	if (rc == 0 && dpg_rank(b->ctx) == 0)
		printf("world %d numel %zu GB %.3f reps %d cold_reads %s raw_write_GBps %.3f "
		       "save_GBps %.3f save_ratio %.2f raw_read_GBps %.3f load_GBps %.3f "
		       "load_ratio %.2f save_s %.3f async_block_s %.3f async_total_s %.3f "
		       "cpu_s raw_write %.3f save %.3f raw_read %.3f load %.3f async %.3f\n",
		       w, numel, gb, reps, b->dropped ? "yes" : "no",
		       gb / t[RAW_WRITE][reps / 2], gb / t[SAVE][reps / 2],
		       t[RAW_WRITE][reps / 2] / t[SAVE][reps / 2], gb / t[RAW_READ][reps / 2],
		       gb / t[LOAD][reps / 2], t[RAW_READ][reps / 2] / t[LOAD][reps / 2],
		       t[SAVE][reps / 2], t[ASYNC_BLOCK][reps / 2], t[ASYNC_TOTAL][reps / 2],
		       c[RAW_WRITE][reps / 2], c[SAVE][reps / 2], c[RAW_READ][reps / 2],
		       c[LOAD][reps / 2], c[ASYNC_BLOCK][reps / 2]);
	for (k = 0; k < NOPS; k++) {
		free(t[k]);
		free(c[k]);
	}
	free(buf);
	return rc;
}

int main(int argc, char **argv)
{
	struct bench b = { 0 };
	size_t numel = (size_t)64 << 20;
	int reps = 3, nunits = 8, i, rc = 1;
	char path[4200];
	dpg_status_t st;

	b.dir = "/tmp/dpg-ckpt-bench";
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--smoke")) {
			numel = (size_t)1 << 20;
			reps = 1;
		} else if (!strcmp(argv[i], "--numel") && i + 1 < argc) {
			numel = strtoull(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
			reps = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--dir") && i + 1 < argc) {
			b.dir = argv[++i];
		} else if (!strcmp(argv[i], "--drop-caches")) {
			b.drop = 1;
		} else {
			fprintf(stderr, "usage: ckpt_bench [--smoke] [--numel N] [--reps R] "
				"[--dir DIR] [--drop-caches]\n");
			return 2;
		}
	}
	if (numel < (size_t)nunits || reps < 1)
		return 2;
	if ((st = dpg_init(NULL, &b.ctx)) != DPG_OK) {
		fprintf(stderr, "ckpt_bench: dpg_init: %s\n", dpg_last_error(b.ctx));
		dpg_finalize(b.ctx);
		return 1;
	}
	if (mkdir(b.dir, 0700) != 0 && errno != EEXIST) {
		fprintf(stderr, "ckpt_bench: mkdir %s: %s\n", b.dir, strerror(errno));
		dpg_finalize(b.ctx);
		return 1;
	}
	if (setup(&b, numel, nunits) == 0 && run(&b, reps, numel) == 0)
		rc = 0;
	raw_name(&b, path, sizeof(path));
	(void)unlink(path);
	dpg_zero_destroy(b.z);
	dpg_finalize(b.ctx);
	return rc;
}
