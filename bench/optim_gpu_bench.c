/* SPDX-License-Identifier: BSD-3-Clause */
/* optim_gpu_bench.c - the sharded step's optimizer update on the GPU: the
 * AdamW and SGD kernels of lib/train/zero_cuda.cu (dpg_cuda_adamw /
 * dpg_cuda_sgd, internal: linked from the module's convenience library as
 * tests/gpu/test_zero_gpu does) in GB/s against cudaMemcpy device to device
 * of the same bytes, interleaved; then the whole dpg_zero_step at world 1
 * on the NCCL backend (public API) with its time per step, at stages 1
 * and 3 (stage 3 has no working copy to cast: its shard is the master).
 *
 *   optim_gpu_bench [NUMEL [REPS]]     (defaults 67108864 = 256 MiB per
 *                                        tensor, 20)
 * Bytes moved per element: AdamW reads p, m, v, g and writes p, m, v: 28;
 * SGD with momentum reads p, b, g and writes p, b: 20.  The copy peer moves
 * the same bytes (reads and writes NUMEL x B/2 each).  Kernel and copy
 * times are CUDA event times of one call, median of REPS after 3 warm-ups;
 * the step is the wall time of dpg_zero_step and a device synchronize after
 * it (its kernels may still run when it returns), median of REPS.
 * Exit status: 0 ran, 1 failed, 77 no GPU (prints "SKIPPED: no GPU (...)"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cuda_runtime.h>
#pragma GCC diagnostic pop

#include "dpg_zero.h"
#include "optim.h"	/* struct dpg_adamw_hp, dpg_sgd_hp */
#include "zero_cuda.h"	/* dpg_cuda_adamw, dpg_cuda_sgd */

#define WARMUP 3

struct gbench {
	size_t n;
	int reps;
	float *p, *m, *v, *g;	/* device, n each */
	void *csrc, *cdst;	/* copy peer: n x 14 bytes each */
	cudaEvent_t e0, e1;
	double *ka, *ks, *ca, *cs;	/* samples: adamw, sgd, copy 28, copy 20 */
};

static void die(const char *what, const char *why)
{
	fprintf(stderr, "optim_gpu_bench: %s: %s\n", what, why);
	exit(1);
}

static void cu(const char *what, cudaError_t e)
{
	if (e != cudaSuccess)
		die(what, cudaGetErrorString(e));
}

static void kc(const char *what, int rc)
{
	if (rc != 0)
		die(what, dpg_cuda_errstr(rc));
}

static void dp(dpg_ctx_t *ctx, const char *what, dpg_status_t st)
{
	if (st != DPG_OK)
		die(what, ctx != NULL ? dpg_last_error(ctx) : dpg_strerror(st));
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *s, int n)
{
	qsort(s, (size_t)n, sizeof(double), cmp_d);
	return s[n / 2];
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void need_gpu(void)
{
	int count = 0;
	cudaError_t e = cudaGetDeviceCount(&count);

	if (e != cudaSuccess || count < 1) {
		printf("SKIPPED: no GPU (CUDA: %s)\n",
		       e != cudaSuccess ? cudaGetErrorString(e) : "no device");
		exit(77);
	}
}

static void *dalloc(size_t bytes)
{
	void *p = NULL;

	cu("cudaMalloc", cudaMalloc(&p, bytes));
	cu("cudaMemset", cudaMemset(p, 0, bytes));
	return p;
}

static double *halloc(int n)
{
	double *p = calloc((size_t)n, sizeof(double));

	if (p == NULL)
		die("calloc", "out of memory");
	return p;
}

/* ---------------------------------------------------------------- kernels */

static void setup(struct gbench *b)
{
	b->p = dalloc(b->n * sizeof(float));
	b->m = dalloc(b->n * sizeof(float));
	b->v = dalloc(b->n * sizeof(float));
	b->g = dalloc(b->n * sizeof(float));
	b->csrc = dalloc(b->n * 14);
	b->cdst = dalloc(b->n * 14);
	cu("cudaEventCreate", cudaEventCreate(&b->e0));
	cu("cudaEventCreate", cudaEventCreate(&b->e1));
	b->ka = halloc(b->reps);
	b->ks = halloc(b->reps);
	b->ca = halloc(b->reps);
	b->cs = halloc(b->reps);
}

/* kind 0 AdamW, 1 SGD, 2 copy of 28 B/elem, 3 copy of 20 B/elem: ms */
static double one(struct gbench *b, int kind)
{
	struct dpg_adamw_hp ah = { .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
				   .weight_decay = 0.01f, .gscale = 1.0f };
	struct dpg_sgd_hp sh = { 1e-3f, 0.9f, 0.01f, 1.0f };
	float ms = 0;

	dpg_adamw_hp_at(&ah, 1);

	cu("cudaEventRecord", cudaEventRecord(b->e0, NULL));
	if (kind == 0)
		kc("dpg_cuda_adamw", dpg_cuda_adamw(b->p, b->m, b->v, b->g, b->n, &ah, NULL));
	else if (kind == 1)
		kc("dpg_cuda_sgd", dpg_cuda_sgd(b->p, b->m, b->g, b->n, &sh, NULL));
	else
		cu("cudaMemcpyAsync", cudaMemcpyAsync(b->cdst, b->csrc, b->n * (kind == 2 ? 14 : 10),
						      cudaMemcpyDeviceToDevice, NULL));
	cu("cudaEventRecord", cudaEventRecord(b->e1, NULL));
	cu("cudaEventSynchronize", cudaEventSynchronize(b->e1));
	cu("cudaEventElapsedTime", cudaEventElapsedTime(&ms, b->e0, b->e1));
	return ms;
}

static void run_kernels(struct gbench *b)
{
	for (int i = 0; i < WARMUP; i++)
		for (int k = 0; k < 4; k++)
			one(b, k);
	for (int i = 0; i < b->reps; i++) {
		b->ka[i] = one(b, 0);
		b->ca[i] = one(b, 2);
		b->ks[i] = one(b, 1);
		b->cs[i] = one(b, 3);
	}
}

static double gbps(size_t n, int bpe, double ms)
{
	return (double)n * bpe / (ms * 1e6);
}

static void report_kernels(struct gbench *b)
{
	double ka = median(b->ka, b->reps), ks = median(b->ks, b->reps);
	double ca = median(b->ca, b->reps), cs = median(b->cs, b->reps);

	printf("\n| kernel | B/elem | elements | median ms | GB/s | copy GB/s (same bytes) "
	       "| kernel/copy |\n");
	printf("|---|---:|---:|---:|---:|---:|---:|\n");
	printf("| adamw | 28 | %zu | %.3f | %.1f | %.1f | %.3f |\n", b->n, ka,
	       gbps(b->n, 28, ka), gbps(b->n, 28, ca), ca / ka);
	printf("| sgd | 20 | %zu | %.3f | %.1f | %.1f | %.3f |\n", b->n, ks,
	       gbps(b->n, 20, ks), gbps(b->n, 20, cs), cs / ks);
	fflush(stdout);
}

static void free_kernels(struct gbench *b)
{
	cudaFree(b->p);
	cudaFree(b->m);
	cudaFree(b->v);
	cudaFree(b->g);
	cudaFree(b->csrc);
	cudaFree(b->cdst);
	cudaEventDestroy(b->e0);
	cudaEventDestroy(b->e1);
	free(b->ka);
	free(b->ks);
	free(b->ca);
	free(b->cs);
}

/* ---------------------------------------------------------------- the step */

/* one model of n parameters (one unit) with optimizer opt at ZeRO stage
 * stage: median ms of dpg_zero_step over reps, gradients set each step as a
 * backward would */
static double step_ms(dpg_ctx_t *ctx, size_t n, dpg_optimizer_t opt, int stage, int reps)
{
	dpg_zero_opts_t o;
	dpg_zero_t *z = NULL;
	double *s = halloc(reps), ms;
	float *host = calloc(n, sizeof(float));
	int id;

	if (host == NULL)
		die("calloc", "out of memory");
	dpg_zero_opts_default(&o);
	o.optimizer = opt;
	o.stage = stage;
	dp(ctx, "dpg_zero_create", dpg_zero_create(ctx, &o, &z));
	dp(ctx, "dpg_zero_add_param", dpg_zero_add_param(z, "w", n, 0, &id));
	dp(ctx, "dpg_zero_commit", dpg_zero_commit(z));
	dp(ctx, "dpg_zero_set_param", dpg_zero_set_param(z, id, host));
	free(host);
	for (int i = -WARMUP; i < reps; i++) {
		float *g = dpg_zero_grad(z, id);
		double t0;

		if (g == NULL)
			die("dpg_zero_grad", "NULL (allocation failed)");
		cu("cudaMemset", cudaMemset(g, 0, n * sizeof(float)));
		cu("cudaDeviceSynchronize", cudaDeviceSynchronize());
		t0 = now_ms();
		dp(ctx, "dpg_zero_step", dpg_zero_step(z, 1e-3f, NULL));
		/* the update's kernels may still run when the step returns (at
		 * stage 3 nothing after them waits): the step is done when the
		 * device is */
		cu("cudaDeviceSynchronize", cudaDeviceSynchronize());
		if (i >= 0)
			s[i] = now_ms() - t0;
	}
	dp(ctx, "dpg_zero_destroy", dpg_zero_destroy(z));
	ms = median(s, reps);
	free(s);
	return ms;
}

static void run_steps(size_t n, int reps)
{
	static const dpg_optimizer_t opts[2] = { DPG_OPT_ADAMW, DPG_OPT_SGD };
	static const char *const names[2] = { "adamw", "sgd" };
	static const int bpe[2] = { 28, 20 };
	dpg_init_opts_t io;
	dpg_ctx_t *ctx = NULL;

	dpg_init_opts_default(&io);
	io.backend = DPG_BACKEND_NCCL;
	io.device = 0;
	dp(ctx, "dpg_init", dpg_init(&io, &ctx));
	if (dpg_world_size(ctx) != 1)
		die("dpg_init", "run it alone (world 1): the step table is per GPU");
	printf("\n| dpg_zero_step, world 1, NCCL | stage | elements | median ms "
	       "| GB/s at the update's B/elem |\n");
	printf("|---|---:|---:|---:|---:|\n");
	for (int k = 0; k < 2; k++)
		for (int stage = 1; stage <= 3; stage += 2) {
			double ms = step_ms(ctx, n, opts[k], stage, reps);

			printf("| %s | %d | %zu | %.3f | %.1f |\n", names[k], stage, n, ms,
			       gbps(n, bpe[k], ms));
		}
	dp(ctx, "dpg_finalize", dpg_finalize(&ctx));
}

int main(int argc, char **argv)
{
	struct gbench b;
	struct cudaDeviceProp p;

	memset(&b, 0, sizeof(b));
	b.n = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)1 << 26;
	b.reps = argc > 2 ? atoi(argv[2]) : 20;
	if (b.n == 0 || b.reps < 1) {
		fprintf(stderr, "usage: optim_gpu_bench [NUMEL [REPS]]\n");
		return 2;
	}
	need_gpu();
	cu("cudaSetDevice", cudaSetDevice(0));
	cu("cudaGetDeviceProperties", cudaGetDeviceProperties(&p, 0));
	printf("optim_gpu_bench: %s, %zu fp32 elements per tensor, median of %d\n", p.name,
	       b.n, b.reps);
	setup(&b);
	run_kernels(&b);
	report_kernels(&b);
	free_kernels(&b);
	run_steps(b.n, b.reps);
	return 0;
}
