/* SPDX-License-Identifier: BSD-3-Clause */
/* optim_bench.c - host optimizer-step throughput (lib/train/optim.c: AdamW,
 * SGD, sumsq, bf16) side by side with STREAM-like kernels on the same buffers. */

/* One thread (a CPU rank runs its update on one core).  Every kernel runs
 * REPS times, interleaved (adamw, copy, triad, ... then again); the table
 * gives the median and the best pass in GB/s (1e9 B/s) of memory traffic
 * counted as STREAM does (bytes read + bytes written, no write-allocate):
 *   adamw  reads p m v g, writes p m v       28 B/element
 *   same   the same access pattern with trivial arithmetic
 *          (p += s*g; m += s*g; v += s*g*g): the bandwidth bound of adamw
 *   sgd    reads p buf g, writes p buf       20 B/element
 *   same-sgd  sgd's pattern, trivial arithmetic (p += s*g; buf += s*g)
 *   adamw [V], sgd [V]: each compiled variant V of the loops
 *          (dpg_optim_variants), the ones this CPU lacks skipped
 *   copy   p = m (8 B), triad p = m + s*g (12 B): STREAM's kernels
 *   sumsq  reads g (4 B), against read (a float sum of g, 4 B)
 *   to_bf16 / from_bf16 4 + 2 B
 * and the ratios adamw/same, sgd/same-sgd (the goal: >= 0.9), adamw/triad,
 * adamw/copy and sumsq/read.  The reference kernels are built like
 * optim.c's loops: the same flags, cloned for x86-64-v4 / x86-64-v3 /
 * default and picked at run time (a portable build, no -march).
 *
 * Usage: optim_bench [-n ELEMENTS] [-r REPS] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "optim.h"

enum {
	K_ADAMW, K_SAME, K_SGD, K_SAME_SGD, K_COPY, K_TRIAD, K_SUMSQ, K_READ, K_TOBF16,
	K_FROMBF16, NFIXED,
	MAXVAR = 8,		/* then adamw [V], sgd [V] for each variant V */
	NKMAX = NFIXED + 2 * MAXVAR,
};

static const char *const NAME[NFIXED] = {
	"adamw", "same-pattern add", "sgd", "same-pattern sgd", "copy", "triad", "sumsq",
	"read", "to_bf16", "from_bf16",
};
static const double BYTES[NFIXED] = { 28, 28, 20, 20, 8, 12, 4, 4, 6, 6 };

/* the reference kernels: cloned like optim.c's loops (a portable build) */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define BENCH_CLONES \
	__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define BENCH_CLONES
#endif

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
BENCH_CLONES __attribute__((noinline, optimize("no-tree-loop-distribute-patterns")))
static void k_copy(float *restrict a, const float *restrict b,
					     size_t n)
{
	for (size_t i = 0; i < n; i++)
		a[i] = b[i];
}

BENCH_CLONES __attribute__((noinline)) static void k_triad(float *restrict a, const float *restrict b,
					      const float *restrict c, float s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		a[i] = b[i] + s * c[i];
}

BENCH_CLONES __attribute__((noinline)) static void k_same(float *restrict p, float *restrict m,
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

BENCH_CLONES __attribute__((noinline)) static void k_same_sgd(float *restrict p,
							  float *restrict b,
							  const float *restrict g,
							  float s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float sg = s * g[i];

		p[i] += sg;
		b[i] += sg;
	}
}

BENCH_CLONES __attribute__((noinline)) static float k_read(const float *restrict x, size_t n)
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

/* the kernels of one run: the fixed ones, then each variant's two loops */
struct kernels {
	const struct dpg_optim_variant *var;
	size_t nvar;		/* <= MAXVAR */
	int nk;			/* NFIXED + 2 * nvar */
	char name[NKMAX][64];
	double bytes[NKMAX];
	int skip[NKMAX];	/* a variant this CPU lacks */
};

static void kernels_init(struct kernels *ks)
{
	ks->var = dpg_optim_variants(&ks->nvar);
	if (ks->nvar > MAXVAR)
		ks->nvar = MAXVAR;
	ks->nk = NFIXED + 2 * (int)ks->nvar;
	for (int k = 0; k < ks->nk; k++) {
		const struct dpg_optim_variant *v = &ks->var[(k - NFIXED) / 2];
		int sgd = (k - NFIXED) % 2;

		ks->skip[k] = k >= NFIXED && !v->supported();
		if (k < NFIXED) {
			snprintf(ks->name[k], sizeof(ks->name[k]), "%s", NAME[k]);
			ks->bytes[k] = BYTES[k];
		} else {
			snprintf(ks->name[k], sizeof(ks->name[k]), "%s [%s]",
				 sgd ? "sgd" : "adamw", v->name);
			ks->bytes[k] = sgd ? BYTES[K_SGD] : BYTES[K_ADAMW];
		}
	}
}

/* One pass of kernel k; returns its seconds. */
static double run(const struct kernels *ks, int k, struct bufs *b)
{
	struct dpg_adamw_hp ah = { .lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.999f,
				   .eps = 1e-8f, .weight_decay = 0.01f, .gscale = 1.0f };
	struct dpg_sgd_hp sh = { .lr = 1e-4f, .momentum = 0.9f, .weight_decay = 1e-4f,
				 .gscale = 1.0f };
	double t;

	dpg_adamw_hp_at(&ah, 1);
	t = now();

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
	case K_SAME_SGD:
		k_same_sgd(b->p, b->m, b->g, 1e-6f, b->n);
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
	default:
		if ((k - NFIXED) % 2)
			ks->var[(k - NFIXED) / 2].sgd(b->p, b->m, b->g, b->n, &sh);
		else
			ks->var[(k - NFIXED) / 2].adamw(b->p, b->m, b->v, b->g, b->n, &ah);
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

static void report(const struct kernels *ks, double sec[NKMAX][64], int reps, size_t n)
{
	double med[NKMAX], best[NKMAX];

	for (int k = 0; k < ks->nk; k++) {
		if (ks->skip[k])
			continue;
		qsort(sec[k], (size_t)reps, sizeof(double), cmp_double);
		med[k] = ks->bytes[k] * (double)n / sec[k][reps / 2] / 1e9;
		best[k] = ks->bytes[k] * (double)n / sec[k][0] / 1e9;
	}
	printf("| kernel | B/elem | median GB/s | best GB/s | median ms |\n");
	printf("|---|---:|---:|---:|---:|\n");
	for (int k = 0; k < ks->nk; k++)
		if (!ks->skip[k])
			printf("| %s | %.0f | %.2f | %.2f | %.1f |\n", ks->name[k],
			       ks->bytes[k], med[k], best[k], sec[k][reps / 2] * 1e3);
	for (int k = 0; k < ks->nk; k++)
		if (ks->skip[k])
			printf("\nskip: %s: this CPU lacks its instruction set\n", ks->name[k]);
	printf("\n| ratio (median) | value |\n|---|---:|\n");
	printf("| adamw / same-pattern add | %.2f |\n", med[K_ADAMW] / med[K_SAME]);
	printf("| sgd / same-pattern sgd | %.2f |\n", med[K_SGD] / med[K_SAME_SGD]);
	for (int k = NFIXED; k < ks->nk; k++)
		if (!ks->skip[k])
			printf("| %s / same-pattern %s | %.2f |\n", ks->name[k],
			       (k - NFIXED) % 2 ? "sgd" : "add",
			       med[k] / med[(k - NFIXED) % 2 ? K_SAME_SGD : K_SAME]);
	printf("| adamw / triad | %.2f |\n", med[K_ADAMW] / med[K_TRIAD]);
	printf("| adamw / copy | %.2f |\n", med[K_ADAMW] / med[K_COPY]);
	printf("| sumsq / read | %.2f |\n", med[K_SUMSQ] / med[K_READ]);
}

int main(int argc, char **argv)
{
	size_t n = (size_t)64 << 20;
	int reps = 7, opt;
	static double sec[NKMAX][64];
	struct kernels ks;
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
	kernels_init(&ks);
	printf("elements %zu (%.0f MiB per fp32 buffer), %d passes per kernel, "
	       "1 thread, adamw/sgd loops: %s variant\n\n", n, (double)n * 4 / 1048576.0,
	       reps, dpg_optim_variant_name());
	for (int k = 0; k < ks.nk; k++)
		if (!ks.skip[k])
			(void)run(&ks, k, &b);	/* warm-up */
	for (int r = 0; r < reps; r++)
		for (int k = 0; k < ks.nk; k++)
			if (!ks.skip[k])
				sec[k][r] = run(&ks, k, &b);
	report(&ks, sec, reps, n);
	free_bufs(&b);
	return 0;
}
