/* SPDX-License-Identifier: BSD-3-Clause */
/* zero_bench.c - one rank of the sharded-step benchmark: a model of N fp32
 * parameters in U units, synthetic gradients, timed dpg_zero_step calls.
 *
 * Run as the tasks of a job (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
 * DPG_SECRET in the environment; bench/zero_bench.sh does it):
 *   zero_bench NUMEL UNITS STAGE STEPS
 * Rank 0 prints one line:
 *   world W stage S numel N step_ms MEDIAN min_ms MIN param_MiB P grad_MiB G optim_MiB O
 * with the per-rank bytes of dpg_zero_memory at rest. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dpg_zero.h"

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int fail(dpg_ctx_t *ctx, const char *what, dpg_status_t st)
{
	fprintf(stderr, "zero_bench: rank %d: %s: %s: %s\n", ctx ? dpg_rank(ctx) : -1, what,
		dpg_strerror(st), ctx ? dpg_last_error(ctx) : "");
	return 1;
}

/* One step: stage 3 gathers each unit (as a forward pass would), every
 * stage writes the gradients, then dpg_zero_step. */
static dpg_status_t one_step(dpg_zero_t *z, int nunits, int per_unit, int stage)
{
	dpg_status_t st;

	for (int u = nunits - 1; u >= 0; u--) {
		if (stage == 3 && (st = dpg_zero_gather(z, u, u > 0 ? u - 1 : -1)) != DPG_OK)
			return st;
		for (int k = 0; k < per_unit; k++) {
			int id = u * per_unit + k;
			float *g = dpg_zero_grad(z, id);
			const float *p = dpg_zero_param(z, id);

			if (!g || !p)
				return DPG_ERR_NOMEM;
			g[0] += 1e-3f * p[0] + 1e-4f;
		}
		if ((st = dpg_zero_release(z, u)) != DPG_OK ||
		    (st = dpg_zero_grads_ready(z, u)) != DPG_OK)
			return st;
	}
	return dpg_zero_step(z, 1e-3f, NULL);
}

int main(int argc, char **argv)
{
	dpg_ctx_t *ctx = NULL;
	dpg_zero_t *z = NULL;
	dpg_zero_opts_t o;
	dpg_zero_mem_t mem;
	dpg_status_t st;
	long numel;
	int nunits, stage, steps, per_unit = 2, rc = 1;
	double *t = NULL;

	if (argc != 5 || (numel = atol(argv[1])) < 64 || (nunits = atoi(argv[2])) < 1 ||
	    (stage = atoi(argv[3])) < 1 || stage > 3 || (steps = atoi(argv[4])) < 1) {
		fprintf(stderr, "usage: zero_bench NUMEL(>=64) UNITS(>=1) STAGE(1-3) STEPS(>=1)\n");
		return 2;
	}
	if ((st = dpg_init(NULL, &ctx)) != DPG_OK) {
		fail(ctx, "dpg_init", st);
		dpg_finalize(ctx);
		return 1;
	}
	dpg_zero_opts_default(&o);
	o.stage = stage;
	if ((st = dpg_zero_create(ctx, &o, &z)) != DPG_OK) {
		fail(ctx, "dpg_zero_create", st);
		goto out;
	}
	/* each unit: a big matrix and a small vector */
	for (int u = 0; u < nunits; u++) {
		size_t per = (size_t)numel / (size_t)nunits, small = per / 64 + 1;
		char name[32];

		snprintf(name, sizeof(name), "u%d.w", u);
		if ((st = dpg_zero_add_param(z, name, per - small, u, NULL)) != DPG_OK)
			goto bad_reg;
		snprintf(name, sizeof(name), "u%d.b", u);
		if ((st = dpg_zero_add_param(z, name, small, u, NULL)) != DPG_OK)
			goto bad_reg;
	}
	if ((st = dpg_zero_commit(z)) != DPG_OK)
		goto bad_reg;
	t = calloc((size_t)steps, sizeof(*t));
	if (!t) {
		fprintf(stderr, "zero_bench: out of memory\n");
		goto out;
	}
	/* one warm-up step, then the timed ones (a barrier before each) */
	if ((st = one_step(z, nunits, per_unit, stage)) != DPG_OK) {
		fail(ctx, "warm-up step", st);
		goto out;
	}
	for (int s = 0; s < steps; s++) {
		double t0;

		if ((st = dpg_barrier(dpg_world(ctx))) != DPG_OK) {
			fail(ctx, "barrier", st);
			goto out;
		}
		t0 = now_ms();
		if ((st = one_step(z, nunits, per_unit, stage)) != DPG_OK) {
			fail(ctx, "step", st);
			goto out;
		}
		t[s] = now_ms() - t0;
	}
	if ((st = dpg_zero_memory(z, &mem)) != DPG_OK) {
		fail(ctx, "dpg_zero_memory", st);
		goto out;
	}
	qsort(t, (size_t)steps, sizeof(*t), cmp_d);
	if (dpg_rank(ctx) == 0)
		printf("world %d stage %d numel %ld step_ms %.2f min_ms %.2f param_MiB %.2f "
		       "grad_MiB %.2f optim_MiB %.2f\n", dpg_world_size(ctx), stage, numel,
		       t[steps / 2], t[0], mem.param_bytes / 1048576.0,
		       mem.grad_bytes / 1048576.0, mem.optim_bytes / 1048576.0);
	rc = 0;
	goto out;
bad_reg:
	fail(ctx, "model", st);
out:
	free(t);
	dpg_zero_destroy(z);
	dpg_finalize(ctx);
	return rc;
}
