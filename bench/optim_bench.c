/* SPDX-License-Identifier: BSD-3-Clause */
/* optim_bench.c - host optimizer-step throughput (lib/optim.c: AdamW, SGD,
 * sumsq, bf16) side by side with STREAM-like kernels on the same buffers. */

/* One thread (a CPU rank runs its update on one core).  Every kernel runs
 * REPS times, interleaved (adamw, copy, triad, ... then again); the table
 * gives the median and the best pass in GB/s (1e9 B/s) of memory traffic
 * counted as STREAM does (bytes read + bytes written, no write-allocate):
 *   adamw  reads p m v g, writes p m v       28 B/element
 *   same   the same access pattern with trivial arithmetic
 *          (p += s*g; m += s*g; v += s*g*g): the bandwidth bound of adamw
 *   sgd    reads p buf g, writes p buf       20 B/element
 *   copy   p = m (8 B), triad p = m + s*g (12 B): STREAM's kernels
 *   sumsq  reads g (4 B), against read (a float sum of g, 4 B)
 *   to_bf16 / from_bf16 4 + 2 B
 * and the ratios adamw/triad, adamw/copy, adamw/same and sumsq/read.
 *
 * Usage: optim_bench [-n ELEMENTS] [-r REPS] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "optim.h"

enum { K_ADAMW, K_SAME, K_SGD, K_COPY, K_TRIAD, K_SUMSQ, K_READ, K_TOBF16, K_FROMBF16, NK };

static const char *const NAME[NK] = {
	"adamw", "same-pattern add", "sgd", "copy", "triad", "sumsq", "read", "to_bf16",
	"from_bf16",
};
static const double BYTES[NK] = { 28, 28, 20, 8, 12, 4, 4, 6, 6 };

struct bufs {
	float *p, *m, *v, *g;
	uint16_t *h;
	size_t n;
};

static volatile double sink;	/* keeps the reductions' results alive */

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* a loop, as in STREAM (GCC would make it a memcpy call otherwise) */
__attribute__((noinline, optimize("no-tree-loop-distribute-patterns")))
static void k_copy(float *restrict a, const float *restrict b,
					     size_t n)
{
	for (size_t i = 0; i < n; i++)
		a[i] = b[i];
}

__attribute__((noinline)) static void k_triad(float *restrict a, const float *restrict b,
					      const float *restrict c, float s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		a[i] = b[i] + s * c[i];
}

__attribute__((noinline)) static void k_same(float *restrict p, float *restrict m,
					     float *restrict v, const float *restrict g,
					     float s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float sg = s * g[i];

		p[i] += sg;
		m[i] += sg;
		v[i] += sg * g[i];
	}
}

__attribute__((noinline)) static float k_read(const float *restrict x, size_t n)
{
	float acc[16] = { 0 }, s = 0.0f;
	size_t i = 0;

	for (; i + 16 <= n; i += 16)
		for (int k = 0; k < 16; k++)
			acc[k] += x[i + k];
	for (; i < n; i++)
		s += x[i];
	for (int k = 0; k < 16; k++)
		s += acc[k];
	return s;
}

/* One pass of kernel k; returns its seconds. */
static double run(int k, struct bufs *b)
{
	struct dpg_adamw_hp ah = { .lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.999f,
				   .eps = 1e-8f, .weight_decay = 0.01f,
				   .bc1 = 1.0f - 0.9f, .bc2 = 1.0f - 0.999f, .gscale = 1.0f };
	struct dpg_sgd_hp sh = { .lr = 1e-4f, .momentum = 0.9f, .weight_decay = 1e-4f,
				 .gscale = 1.0f };
	double t = now();

	switch (k) {
	case K_ADAMW:
		dpg_adamw_update(b->p, b->m, b->v, b->g, b->n, &ah);
		break;
	case K_SAME:
		k_same(b->p, b->m, b->v, b->g, 1e-6f, b->n);
		break;
	case K_SGD:
		dpg_sgd_update(b->p, b->m, b->g, b->n, &sh);
		break;
	case K_COPY:
		k_copy(b->p, b->m, b->n);
		break;
	case K_TRIAD:
		k_triad(b->p, b->m, b->g, 1e-3f, b->n);
		break;
	case K_SUMSQ:
		sink = dpg_sumsq_f32(b->g, b->n);
		break;
	case K_READ:
		sink = k_read(b->g, b->n);
		break;
	case K_TOBF16:
		dpg_f32_to_bf16_n(b->p, b->h, b->n);
		break;
	case K_FROMBF16:
		dpg_bf16_to_f32_n(b->h, b->p, b->n);
		break;
	}
	return now() - t;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int alloc_bufs(struct bufs *b, size_t n)
{
	b->n = n;
	b->p = malloc(n * sizeof(float));
	b->m = malloc(n * sizeof(float));
	b->v = malloc(n * sizeof(float));
	b->g = malloc(n * sizeof(float));
	b->h = malloc(n * sizeof(uint16_t));
	if (!b->p || !b->m || !b->v || !b->g || !b->h)
		return -1;
	/* touch every page before timing; g in [-1, 1), v > 0 */
	for (size_t i = 0; i < n; i++) {
		b->g[i] = (float)((i * 2654435761u) % 2000u) * 1e-3f - 1.0f;
		b->p[i] = 0.5f;
		b->m[i] = 0.0f;
		b->v[i] = 1e-4f;
		b->h[i] = 0;
	}
	return 0;
}

static void free_bufs(struct bufs *b)
{
	free(b->p);
	free(b->m);
	free(b->v);
	free(b->g);
	free(b->h);
}

static const char *isa(void)
{
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("x86-64-v4"))
		return "x86-64-v4 clone (AVX-512)";
	if (__builtin_cpu_supports("x86-64-v3"))
		return "x86-64-v3 clone (AVX2)";
#endif
	return "default";
}

static void report(double sec[NK][64], int reps, size_t n)
{
	double med[NK], best[NK];

	for (int k = 0; k < NK; k++) {
		qsort(sec[k], (size_t)reps, sizeof(double), cmp_double);
		med[k] = BYTES[k] * (double)n / sec[k][reps / 2] / 1e9;
		best[k] = BYTES[k] * (double)n / sec[k][0] / 1e9;
	}
	printf("| kernel | B/elem | median GB/s | best GB/s | median ms |\n");
	printf("|---|---:|---:|---:|---:|\n");
	for (int k = 0; k < NK; k++)
		printf("| %s | %.0f | %.2f | %.2f | %.1f |\n", NAME[k], BYTES[k], med[k],
		       best[k], sec[k][reps / 2] * 1e3);
	printf("\n| ratio (median) | value |\n|---|---:|\n");
	printf("| adamw / triad | %.2f |\n", med[K_ADAMW] / med[K_TRIAD]);
	printf("| adamw / copy | %.2f |\n", med[K_ADAMW] / med[K_COPY]);
	printf("| adamw / same-pattern add | %.2f |\n", med[K_ADAMW] / med[K_SAME]);
	printf("| sgd / triad | %.2f |\n", med[K_SGD] / med[K_TRIAD]);
	printf("| sumsq / read | %.2f |\n", med[K_SUMSQ] / med[K_READ]);
}

int main(int argc, char **argv)
{
	size_t n = (size_t)64 << 20;
	int reps = 7, opt;
	static double sec[NK][64];
	struct bufs b;

	while ((opt = getopt(argc, argv, "n:r:")) != -1) {
		switch (opt) {
		case 'n':
			n = strtoull(optarg, NULL, 0);
			break;
		case 'r':
			reps = atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: %s [-n ELEMENTS] [-r REPS (1..64)]\n", argv[0]);
			return 2;
		}
	}
	if (n == 0 || reps < 1 || reps > 64) {
		fprintf(stderr, "optim_bench: need n >= 1 and 1 <= reps <= 64\n");
		return 2;
	}
	memset(&b, 0, sizeof(b));
	if (alloc_bufs(&b, n) != 0) {
		fprintf(stderr, "optim_bench: out of memory for %zu elements\n", n);
		free_bufs(&b);
		return 1;
	}
	printf("elements %zu (%.0f MiB per fp32 buffer), %d passes per kernel, "
	       "1 thread, loops: %s\n\n", n, (double)n * 4 / 1048576.0, reps, isa());
	for (int k = 0; k < NK; k++)
		(void)run(k, &b);	/* warm-up */
	for (int r = 0; r < reps; r++)
		for (int k = 0; k < NK; k++)
			sec[k][r] = run(k, &b);
	report(sec, reps, n);
	free_bufs(&b);
	return 0;
}
