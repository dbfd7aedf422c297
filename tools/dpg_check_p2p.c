/* SPDX-License-Identifier: BSD-3-Clause */
/* dpg_check_p2p.c - dpg-check's point-to-point test: rank 0 and the first
 * task of every other node, one pair at a time, over libdpg's public API,
 * on the CPU backend, then on NCCL where the nodes have a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checkp2p.h"
#include "dpg.h"
#include "dpg_check.h"
#include "net.h"

/* latency: a 4-byte allreduce LAT_ITERS times; bandwidth: a broadcast of
 * bytes, iters times (NCCL's links are faster: a larger one) */
#define LAT_ITERS 50
#define CPU_BW_BYTES (8u << 20)
#define CPU_BW_ITERS 4
#define NCCL_BW_BYTES (64u << 20)
#define NCCL_BW_ITERS 8
#define ONE_BYTES 256

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One test: its transport, its world (list[n], this task at me, -1: not
 * in it), its buffers (host memory, or device memory on g's device). */
struct test {
	bool nccl;
	const struct dpg_check_p2p *p;
	const int *list;
	int n, me;
	void *buf, *one;
	size_t bytes;
	int iters;
};

struct p2p_result {
	double lat_us, gbps;
};

static dpg_status_t measure(dpg_comm_t *pair, const struct test *t, struct p2p_result *r)
{
	size_t count = t->bytes / 4;
	double s;
	dpg_status_t st = dpg_all_reduce(pair, t->one, t->one, 1, DPG_F32, DPG_SUM, NULL);

	s = now_s();
	for (int i = 0; st == DPG_OK && i < LAT_ITERS; i++)
		st = dpg_all_reduce(pair, t->one, t->one, 1, DPG_F32, DPG_SUM, NULL);
	r->lat_us = (now_s() - s) * 1e6 / LAT_ITERS;
	if (st == DPG_OK)
		st = dpg_broadcast(pair, t->buf, count, DPG_F32, 0, NULL);
	s = now_s();
	for (int i = 0; st == DPG_OK && i < t->iters; i++)
		st = dpg_broadcast(pair, t->buf, count, DPG_F32, 0, NULL);
	if (st == DPG_OK)
		st = dpg_all_reduce(pair, t->one, t->one, 1, DPG_F32, DPG_SUM, NULL);
	s = now_s() - s;
	r->gbps = (double)t->bytes * t->iters / (s > 1e-9 ? s : 1e-9) / 1e9;
	return st;
}

/* The pair of the test's rank 0 and its rank j; rank 0 records the result. */
static dpg_status_t one_pair(dpg_ctx_t *ctx, const struct test *t, int j,
			     struct dpg_check_row *rows)
{
	bool in = t->me == 0 || t->me == j;
	dpg_comm_t *pair = NULL;
	struct p2p_result r = { 0, 0 };
	struct dpg_check_cell *c = &rows[t->list[j]].cell[t->nccl ? DPG_CHECK_NCCL
								   : DPG_CHECK_NET];
	dpg_status_t st = dpg_comm_split(dpg_world(ctx), in ? 0 : -1, t->me, &pair);

	if (st != DPG_OK || pair == NULL)
		return st;
	st = measure(pair, t, &r);
	if (t->me == 0)
		dpg_check_p2p_result(c, t->nccl, st == DPG_OK, r.gbps, r.lat_us,
				     dpg_last_error(ctx));
	dpg_comm_destroy(pair);
	return st;
}

/* The test's world is not the step's: drop what dpg_init would read of the
 * step (DPG_*, SLURM_*, torchrun's, Open MPI's and PMI's names) so that only
 * the explicit options count.  SLURMD_NODENAME (the node's name) stays, and
 * so do DPG_CUDA_MODULE (the NCCL test's dpg_init must load the module whose
 * allocator made its buffers), CUDA_VISIBLE_DEVICES and NCCL_*. */
static void scrub_env(void)
{
	static const char *const prefixes[] = { "DPG_", "SLURM_", "OMPI_", "PMI_", "PMIX_" };
	static const char *const names[] = {
		"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK",
		"GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE",
		"MASTER_ADDR", "MASTER_PORT",
	};
	extern char **environ;
	char name[256];

	for (size_t i = 0; environ[i] != NULL;) {
		size_t n = strcspn(environ[i], "=");
		bool drop = false;

		snprintf(name, sizeof(name), "%.*s", (int)n, environ[i]);
		for (size_t k = 0; k < sizeof(prefixes) / sizeof(prefixes[0]); k++)
			drop = drop || strncmp(name, prefixes[k], strlen(prefixes[k])) == 0;
		for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
			drop = drop || strcmp(name, names[k]) == 0;
		drop = drop && strcmp(name, "DPG_CUDA_MODULE") != 0;
		if (drop && n < sizeof(name) && unsetenv(name) == 0)
			continue;	/* environ[i] is the next one now */
		i++;
	}
}

static void init_opts(const struct check_step *s, const struct check_gpu *g,
		      const struct test *t, dpg_init_opts_t *o)
{
	dpg_init_opts_default(o);
	o->rank = t->me;
	o->world_size = t->n;
	o->local_rank = 0;
	o->local_world_size = 1;
	o->master_addr = s->master_addr;
	o->master_port = t->p->port;
	o->secret = s->secret;
	o->timeout_s = (double)(s->deadline_ms - dpg_now_ms()) / 1000.0;
	if (o->timeout_s < 1.0)
		o->timeout_s = 1.0;
	o->backend = t->nccl ? DPG_BACKEND_NCCL : DPG_BACKEND_CPU;
	o->device = t->nccl ? g->device : -1;
}

/* One test's world: every pair, then (CPU) a barrier, so that the NCCL test
 * starts only where every rank got through; *why: the first failure. */
static dpg_status_t run_test(const struct check_step *s, const struct check_gpu *g,
			     const struct test *t, struct dpg_check_row *rows,
			     char *why, size_t whylen)
{
	dpg_ctx_t *ctx = NULL;
	dpg_init_opts_t o;
	dpg_status_t st, fst;

	init_opts(s, g, t, &o);
	st = dpg_init(&o, &ctx);
	for (int j = 1; st == DPG_OK && j < t->n; j++)
		st = one_pair(ctx, t, j, rows);
	if (st == DPG_OK && !t->nccl)
		st = dpg_barrier(dpg_world(ctx));
	if (st != DPG_OK)
		snprintf(why, whylen, "%s", ctx != NULL ? dpg_last_error(ctx)
							 : dpg_strerror(st));
	fst = dpg_finalize(&ctx);
	if (st == DPG_OK && fst != DPG_OK)
		snprintf(why, whylen, "dpg_finalize: %s", dpg_strerror(fst));
	return st != DPG_OK ? st : fst;
}

/* The test's buffers: host memory, or (NCCL) on g's device. */
static int test_buffers(const struct check_gpu *g, struct test *t, struct dpg_err *err)
{
	t->bytes = t->nccl ? NCCL_BW_BYTES : CPU_BW_BYTES;
	t->iters = t->nccl ? NCCL_BW_ITERS : CPU_BW_ITERS;
	t->buf = NULL;
	t->one = NULL;
	if (t->nccl)
		return check_gpu_alloc(g, &t->buf, t->bytes, err) != 0 ||
		       check_gpu_alloc(g, &t->one, ONE_BYTES, err) != 0 ? -DPG_ERR_BACKEND : 0;
	t->buf = calloc(1, t->bytes);
	t->one = calloc(1, ONE_BYTES);
	if (t->buf == NULL || t->one == NULL)
		return dpg_errs(err, DPG_ERR_NOMEM, "out of memory");
	return 0;
}

static void test_free(const struct check_gpu *g, struct test *t)
{
	if (t->nccl) {
		check_gpu_free(g, t->buf);
		check_gpu_free(g, t->one);
	} else {
		free(t->buf);
		free(t->one);
	}
	t->buf = NULL;
	t->one = NULL;
}

/* This task's part in one test (nothing when it is not in it); rank 0
 * fills the cells of the pairs that did not finish. */
static dpg_status_t take_part(const struct check_step *s, const struct check_gpu *g,
			      struct test *t, struct dpg_check_row *rows, char *why,
			      size_t whylen)
{
	struct dpg_err e = { "" };
	dpg_status_t st;

	t->me = s->local_rank == 0 ? dpg_check_p2p_index(t->list, t->n, s->node_rank) : -1;
	if (t->me < 0 || t->n < 2)
		return DPG_OK;
	if (test_buffers(g, t, &e) != 0) {
		snprintf(why, whylen, "rank %d: %s", s->rank, e.msg);
		st = t->nccl ? DPG_ERR_BACKEND : DPG_ERR_NOMEM;
	} else {
		st = run_test(s, g, t, rows, why, whylen);
	}
	test_free(g, t);
	if (st != DPG_OK && s->rank == 0)
		dpg_check_p2p_abandon(rows, t->p, t->nccl, true, why);
	return st;
}

int check_p2p(const struct check_step *s, const struct check_gpu *g, const char *go,
	      struct dpg_check_row *rows, struct dpg_err *err)
{
	int *cpu = calloc((size_t)s->nodes, sizeof(int));
	int *nccl = calloc((size_t)s->nodes, sizeof(int));
	struct dpg_check_p2p p = { .cpu = cpu, .nccl = nccl };
	struct test t = { .p = &p };
	char why[DPG_ERR_MSG_MAX] = "";
	dpg_status_t st = DPG_OK;

	if (cpu == NULL || nccl == NULL || dpg_check_p2p_parse(go, s->nodes, &p, err) != 0) {
		free(cpu);
		free(nccl);
		return cpu == NULL || nccl == NULL ?
		       dpg_errs(err, DPG_ERR_NOMEM, "out of memory") : -DPG_ERR_INVALID;
	}
	if (s->rank == 0)
		dpg_check_p2p_mark(rows, s->nodes, s->node_rank, &p);
	if (p.port != 0 && s->local_rank == 0)
		scrub_env();
	t.list = p.cpu;
	t.n = p.ncpu;
	st = take_part(s, g, &t, rows, why, sizeof(why));
	if (st == DPG_OK) {
		t.nccl = true;
		t.list = p.nccl;
		t.n = p.nnccl;
		st = take_part(s, g, &t, rows, why, sizeof(why));
	} else if (s->rank == 0) {
		dpg_check_p2p_abandon(rows, &p, true, false, "the test over the CPU "
				      "backend failed first");
	}
	if (st != DPG_OK && s->rank != 0)
		dpg_errs(err, st, "point-to-point test%s: %s", t.nccl ? " (NCCL)" : "", why);
	free(cpu);
	free(nccl);
	return st == DPG_OK || s->rank == 0 ? 0 : -(int)st;
}
