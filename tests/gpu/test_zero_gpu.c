/* SPDX-License-Identifier: BSD-3-Clause */
/* test_zero_gpu.c - the sharded step (dpg_zero_*) on the GPU:
 *
 *  1. kernels: on device 0, dpg_cuda_adamw / dpg_cuda_sgd give the same
 *     bits as the host loops dpg_adamw_update / dpg_sgd_update (lib/optim.h)
 *     over several steps with changing hyper-parameters, on random data with
 *     zeros, subnormals, tiny, large and negative values, odd lengths and
 *     misaligned starts; dpg_cuda_sumsq agrees with dpg_sumsq_f32 (relative
 *     1e-12: both fixed orders, not the same one) and is deterministic; the
 *     bf16 kernels give the bits of dpg_f32_to_bf16_n / dpg_bf16_to_f32_n.
 *  2. the sharded step on the NCCL backend: N ranks as processes on this
 *     host, one GPU each (more ranks than GPUs share them, each posing as a
 *     host of its own: share_gpus), stages 1-3 with AdamW and SGD (and
 *     bf16 working parameters and reduction once): K steps of a synthetic model whose gradients are
 *     computed on the host from the gathered parameters, against a
 *     single-process reference on the CPU backend (the tolerances of
 *     tests/unit/train/test_zero.c), the parameters moved; a checkpoint saved
 *     after 3 steps loads into a fresh model with the same bits, and the
 *     resumed run ends where the uninterrupted one did.
 *  3. checkpoints across backends: the NCCL job's checkpoints load on the
 *     CPU backend (same world) with the bits the NCCL ranks had at the save;
 *     the CPU ranks save them again and a second NCCL job loads those, again
 *     bit for bit: GPU -> CPU -> GPU.
 *
 *   test_zero_gpu [N]        N defaults to the number of visible GPUs (max 8)
 *   test_zero_gpu --cpu N    part 2 only, its ranks on the CPU backend (no
 *                            GPU needed): a check of the test itself
 *
 * Exit status: 0 all passed, 1 a check failed, 77 no GPU or no CUDA/NCCL in
 * libdpg (skip). */
#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cuda_runtime.h>
#pragma GCC diagnostic pop

#include "sharegpu.h"
#include "dpg_zero.h"
#include "../unit/testenv.h"
#include "optim.h"	/* the host loops: dpg_adamw_update, ... */
#include "zero_cuda.h"	/* the kernels: dpg_cuda_adamw, ... */

#define SECRET "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"

static int g_ngpu = 1;	/* the GPUs CUDA sees */
#define MAX_RANKS 8
#define LIMIT_S 120.0		/* the parent kills a phase's processes after this */
#define TIMEOUT_S "60"		/* DPG_TIMEOUT of the ranks */

extern char **environ;

static const char *g_who = "parent";	/* "kernels", "reference", "rank 3" */
static char g_whobuf[32];
static int g_failed;
static bool g_gpu;	/* this process's buffers are device memory */
/* which job the ranks run: the sharded step, or a hop of part 3 */
enum { PHASE_STEP, PHASE_TO_CPU, PHASE_BACK, PHASE_NOPF };
static int g_phase = PHASE_STEP;

/* A failed check: counted, the process goes on (collectives stay in step). */
#define CHK(cond, ...)                                                      \
	do {                                                                \
		if (!(cond)) {                                              \
			fprintf(stderr, "%s: line %d: check '%s' failed: ", \
				g_who, __LINE__, #cond);                    \
			fprintf(stderr, __VA_ARGS__);                       \
			fprintf(stderr, "\n");                              \
			g_failed++;                                         \
		}                                                           \
	} while (0)

/* A failed call or an impossible state: this process ends now. */
#define DIE(...)                                                            \
	do {                                                                \
		fprintf(stderr, "%s: line %d: ", g_who, __LINE__);          \
		fprintf(stderr, __VA_ARGS__);                               \
		fprintf(stderr, "\n");                                      \
		fflush(stderr);                                             \
		_exit(1);                                                   \
	} while (0)

#define OK(ctx, expr)                                                       \
	do {                                                                \
		dpg_status_t st_ = (expr);                                  \
		if (st_ != DPG_OK)                                          \
			DIE("%s -> %s: %s", #expr, dpg_strerror(st_),       \
			    (ctx) ? dpg_last_error(ctx) : "");              \
	} while (0)

#define CU(expr)                                                            \
	do {                                                                \
		cudaError_t e_ = (expr);                                    \
		if (e_ != cudaSuccess)                                      \
			DIE("%s: %s", #expr, cudaGetErrorString(e_));       \
	} while (0)

/* the dpg_cuda_* wrappers return 0 or a cudaError_t */
#define DC(expr)                                                            \
	do {                                                                \
		int rc_ = (expr);                                           \
		if (rc_ != 0)                                               \
			DIE("%s: %s", #expr, dpg_cuda_errstr(rc_));         \
	} while (0)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *xmalloc(size_t bytes)
{
	void *p = malloc(bytes ? bytes : 1);

	if (!p)
		DIE("out of memory (%zu bytes)", bytes);
	return p;
}

static uint32_t f2u(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static float u2f(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/* ================================================= part 1: the kernels */

static uint64_t g_rng = 0x243f6a8885a308d3ull;

static uint64_t rnd64(void)	/* splitmix64 */
{
	uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double urand(void)	/* [0, 1) */
{
	return (double)(rnd64() >> 11) * 0x1p-53;
}

/* A value of a mix that reaches the corners of binary32 arithmetic without
 * producing Inf or NaN in the optimizer: zeros of both signs, subnormals,
 * tiny normals, large values up to 1e15 (squared: 1e30), ordinary ones. */
static float rand_val(bool nonneg)
{
	double r = urand();
	float x;

	if (r < 0.02)
		x = 0.0f;
	else if (r < 0.05)
		x = u2f(1u + (uint32_t)(rnd64() % 0x7fffffu));	/* subnormal */
	else if (r < 0.15)
		x = (float)pow(10.0, -37.0 + 7.0 * urand());	/* tiny */
	else if (r < 0.25)
		x = (float)pow(10.0, 8.0 + 7.0 * urand());	/* large */
	else
		x = (float)(4.0 * urand() - 2.0);
	if (rnd64() & 1)
		x = -x;
	return nonneg ? fabsf(x) : x;
}

static void fill(float *x, size_t n, bool nonneg)
{
	for (size_t i = 0; i < n; i++)
		x[i] = rand_val(nonneg);
}

/* Bits of the GPU's b against the host's a; both NaN counts as equal (no
 * NaN is expected; a payload is not part of the contract).  Prints the
 * first mismatches; returns their count. */
static size_t cmp_bits(const char *what, const float *a, const float *b, size_t n)
{
	static int shown;	/* mismatches printed so far (at most 12 in all) */
	size_t bad = 0;

	for (size_t i = 0; i < n; i++) {
		uint32_t x = f2u(a[i]), y = f2u(b[i]);

		if (x == y || (isnan(a[i]) && isnan(b[i])))
			continue;
		if (bad < 3 && shown++ < 12)
			fprintf(stderr, "%s: %s[%zu]: host %.9g (0x%08x), GPU %.9g (0x%08x)\n",
				g_who, what, i, (double)a[i], x, (double)b[i], y);
		bad++;
	}
	return bad;
}

static size_t count_nonfinite(const float *x, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		k += !isfinite(x[i]);
	return k;
}

static void *dev_alloc(size_t bytes)
{
	void *d = NULL;

	DC(dpg_cuda_alloc(&d, bytes ? bytes : 1));
	if (!d)
		DIE("dpg_cuda_alloc(%zu) gave NULL", bytes);
	return d;
}

static void h2d(void *d, const void *h, size_t bytes)
{
	DC(dpg_cuda_h2d(d, h, bytes, NULL));
}

static void d2h(void *h, const void *d, size_t bytes)
{
	DC(dpg_cuda_d2h(h, d, bytes, NULL));
}

/* The hyper-parameters of AdamW step t (1, 2, ...): everything changes. */
static struct dpg_adamw_hp adamw_hp(int t)
{
	static const float lr[] = { 1e-3f, 0.05f, 0.3f, 1e-4f, 0.01f };
	static const float wd[] = { 0.0f, 0.01f, 0.1f, 0.0f, 0.5f };
	static const float gs[] = { 1.0f, 0.25f, 1.0f / 3.0f, 0.7f, 1.0f / 24.0f };
	float b1 = 0.9f, b2 = t == 4 ? 0.95f : 0.999f;
	struct dpg_adamw_hp h = {
		.lr = lr[(t - 1) % 5], .beta1 = b1, .beta2 = b2, .eps = 1e-8f,
		.weight_decay = wd[(t - 1) % 5],
		.gscale = gs[(t - 1) % 5],
	};

	dpg_adamw_hp_at(&h, t);
	return h;
}

static struct dpg_sgd_hp sgd_hp(int t)
{
	static const float lr[] = { 0.1f, 1e-3f, 0.5f, 0.02f, 1e-5f };
	static const float mo[] = { 0.9f, 0.9f, 0.0f, 0.5f, 0.99f };
	static const float wd[] = { 0.0f, 0.01f, 0.1f, 0.0f, 1e-4f };
	static const float gs[] = { 1.0f, 0.125f, 1.0f / 3.0f, 0.7f, 1.0f / 24.0f };
	struct dpg_sgd_hp h = {
		.lr = lr[(t - 1) % 5], .momentum = mo[(t - 1) % 5],
		.weight_decay = wd[(t - 1) % 5], .gscale = gs[(t - 1) % 5],
	};

	return h;
}

#define KSTEPS 5	/* optimizer steps per kernel case */

/* AdamW and SGD on n elements starting `off` elements into the buffers
 * (off > 0: a misaligned start for the host's vector loops). */
static void kernel_case(size_t n, size_t off)
{
	size_t tot = n + off, bytes = tot * sizeof(float);
	float *p = xmalloc(bytes), *m = xmalloc(bytes), *v = xmalloc(bytes);
	float *g = xmalloc(bytes), *back = xmalloc(bytes);
	float *dp = dev_alloc(bytes), *dm = dev_alloc(bytes), *dv = dev_alloc(bytes);
	float *dg = dev_alloc(bytes);
	size_t bad = 0, nonfin = 0;
	char what[64];

	/* ---- AdamW: p, m (any sign), v >= 0 ---- */
	fill(p, tot, false);
	fill(m, tot, false);
	fill(v, tot, true);
	h2d(dp, p, bytes);
	h2d(dm, m, bytes);
	h2d(dv, v, bytes);
	for (int t = 1; t <= KSTEPS; t++) {
		struct dpg_adamw_hp h = adamw_hp(t);

		fill(g, tot, false);
		h2d(dg, g, bytes);
		dpg_adamw_update(p + off, m + off, v + off, g + off, n, &h);
		DC(dpg_cuda_adamw(dp + off, dm + off, dv + off, dg + off, n, &h, NULL));
		DC(dpg_cuda_sync(NULL));
		snprintf(what, sizeof(what), "adamw n=%zu off=%zu step %d p", n, off, t);
		d2h(back, dp, bytes);
		bad += cmp_bits(what, p, back, tot);
		nonfin += count_nonfinite(p, tot);
		what[strlen(what) - 1] = 'm';
		d2h(back, dm, bytes);
		bad += cmp_bits(what, m, back, tot);
		what[strlen(what) - 1] = 'v';
		d2h(back, dv, bytes);
		bad += cmp_bits(what, v, back, tot);
		nonfin += count_nonfinite(v, tot);
	}
	CHK(bad == 0, "AdamW kernel vs host loop, n=%zu off=%zu: %zu element(s) differ", n, off,
	    bad);
	CHK(nonfin == 0, "AdamW: %zu non-finite value(s) in the host result (test data)", nonfin);

	/* ---- SGD: p and the momentum buffer (any sign) ---- */
	bad = nonfin = 0;
	fill(p, tot, false);
	fill(m, tot, false);
	h2d(dp, p, bytes);
	h2d(dm, m, bytes);
	for (int t = 1; t <= KSTEPS; t++) {
		struct dpg_sgd_hp h = sgd_hp(t);

		fill(g, tot, false);
		h2d(dg, g, bytes);
		dpg_sgd_update(p + off, m + off, g + off, n, &h);
		DC(dpg_cuda_sgd(dp + off, dm + off, dg + off, n, &h, NULL));
		DC(dpg_cuda_sync(NULL));
		snprintf(what, sizeof(what), "sgd n=%zu off=%zu step %d p", n, off, t);
		d2h(back, dp, bytes);
		bad += cmp_bits(what, p, back, tot);
		nonfin += count_nonfinite(p, tot);
		snprintf(what, sizeof(what), "sgd n=%zu off=%zu step %d buf", n, off, t);
		d2h(back, dm, bytes);
		bad += cmp_bits(what, m, back, tot);
	}
	CHK(bad == 0, "SGD kernel vs host loop, n=%zu off=%zu: %zu element(s) differ", n, off, bad);
	CHK(nonfin == 0, "SGD: %zu non-finite value(s) in the host result (test data)", nonfin);

	/* ---- sum of squares of the last gradient and of p ---- */
	for (int k = 0; k < 2; k++) {
		const float *x = k == 0 ? g + off : p + off;
		const float *dx = k == 0 ? dg + off : dp + off;
		double hs = dpg_sumsq_f32(x, n), ds = -1, ds2 = -2, rel;

		DC(dpg_cuda_sumsq(dx, n, &ds, NULL));
		DC(dpg_cuda_sumsq(dx, n, &ds2, NULL));
		rel = fabs(hs - ds) / fmax(fabs(hs), 1e-300);
		printf("%s: sumsq n=%zu off=%zu (%s): host %.17g, GPU %.17g, relative "
		       "difference %.3g\n", g_who, n, off, k == 0 ? "g" : "p", hs, ds, rel);
		CHK(isfinite(hs) && hs > 0, "host sumsq %g", hs);
		CHK(rel <= 1e-12, "sumsq n=%zu: host %.17g GPU %.17g (relative %.3g > 1e-12)", n,
		    hs, ds, rel);
		CHK(memcmp(&ds, &ds2, sizeof(ds)) == 0, "sumsq not deterministic: %.17g then %.17g",
		    ds, ds2);
	}
	free(p);
	free(m);
	free(v);
	free(g);
	free(back);
	DC(dpg_cuda_free(dp));
	DC(dpg_cuda_free(dm));
	DC(dpg_cuda_free(dv));
	DC(dpg_cuda_free(dg));
}

/* bf16: f32 -> bf16 over every upper half-word with lower halves at and
 * around the rounding tie (so every exponent, Inf, NaN, subnormals, ties to
 * even); bf16 -> f32 over all 65536 patterns; the round trip on the GPU. */
static void bf16_case(void)
{
	static const uint32_t lows[] = { 0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff };
	const size_t nl = sizeof(lows) / sizeof(lows[0]), nf = 65536 * nl;
	float *f = xmalloc(nf * sizeof(float)), *fb = xmalloc(65536 * sizeof(float));
	float *fd = xmalloc(65536 * sizeof(float));
	uint16_t *bh = xmalloc(nf * 2), *bd = xmalloc(nf * 2);
	uint16_t *all = xmalloc(65536 * 2), *rt = xmalloc(65536 * 2);
	float *df = dev_alloc(nf * sizeof(float));
	uint16_t *db = dev_alloc(nf * 2);
	size_t bad = 0;

	for (size_t hi = 0; hi < 65536; hi++)
		for (size_t k = 0; k < nl; k++)
			f[hi * nl + k] = u2f((uint32_t)(hi << 16) | lows[k]);
	dpg_f32_to_bf16_n(f, bh, nf);
	h2d(df, f, nf * sizeof(float));
	DC(dpg_cuda_f32_to_bf16(df, db, nf, NULL));
	DC(dpg_cuda_sync(NULL));
	d2h(bd, db, nf * 2);
	for (size_t i = 0; i < nf; i++)
		if (bh[i] != bd[i] && bad++ < 3)
			fprintf(stderr, "%s: f32->bf16 of 0x%08x: host 0x%04x, GPU 0x%04x\n", g_who,
				f2u(f[i]), bh[i], bd[i]);
	CHK(bad == 0, "f32 -> bf16: %zu of %zu values differ", bad, nf);

	/* bf16 -> f32 of all patterns, then back to bf16, on the GPU */
	bad = 0;
	for (size_t i = 0; i < 65536; i++)
		all[i] = (uint16_t)i;
	dpg_bf16_to_f32_n(all, fb, 65536);
	h2d(db, all, 65536 * 2);
	DC(dpg_cuda_bf16_to_f32(db, df, 65536, NULL));
	DC(dpg_cuda_sync(NULL));
	d2h(fd, df, 65536 * sizeof(float));
	for (size_t i = 0; i < 65536; i++)
		if (f2u(fb[i]) != f2u(fd[i]) && bad++ < 3)
			fprintf(stderr, "%s: bf16->f32 of 0x%04zx: host 0x%08x, GPU 0x%08x\n", g_who,
				i, f2u(fb[i]), f2u(fd[i]));
	CHK(bad == 0, "bf16 -> f32: %zu of 65536 patterns differ", bad);
	bad = 0;
	DC(dpg_cuda_f32_to_bf16(df, db, 65536, NULL));
	DC(dpg_cuda_sync(NULL));
	d2h(rt, db, 65536 * 2);
	for (size_t i = 0; i < 65536; i++) {
		bool is_nan = (i & 0x7fff) > 0x7f80;
		/* exact for every number; a NaN stays a NaN (quieted) */
		bool good = is_nan ? (rt[i] & 0x7fff) > 0x7f80 && (rt[i] & 0x8000) == (i & 0x8000) :
			    rt[i] == i;

		if (!good && bad++ < 3)
			fprintf(stderr, "%s: bf16 round trip of 0x%04zx gave 0x%04x\n", g_who, i,
				rt[i]);
	}
	CHK(bad == 0, "bf16 -> f32 -> bf16 on the GPU: %zu of 65536 patterns changed", bad);
	free(f);
	free(fb);
	free(fd);
	free(bh);
	free(bd);
	free(all);
	free(rt);
	DC(dpg_cuda_free(df));
	DC(dpg_cuda_free(db));
}

static void kernels_main(void)
{
	static const struct { size_t n, off; } cases[] = {
		{ 1000003, 0 }, { 1000003, 1 }, { 4099, 3 }, { 257, 1 }, { 1, 0 },
	};
	struct cudaDeviceProp prop;
	double t0 = now_s();

	g_who = "kernels";
	DC(dpg_cuda_set_device(0));
	CU(cudaGetDeviceProperties(&prop, 0));
	printf("kernels: device 0: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
		kernel_case(cases[c].n, cases[c].off);
	bf16_case();
	printf("kernels: %s (%.1f s)\n", g_failed ? "FAILED" : "AdamW, SGD, sumsq, bf16 agree "
	       "with the host", now_s() - t0);
	fflush(stdout);
	fflush(stderr);
	_exit(g_failed ? 1 : 0);
}

/* ================================================= part 2: the sharded step */

/* the model: tests/unit/train/test_zero.c's */
#define NP 6
static const size_t P_NUMEL[NP] = { 37, 5, 130, 1, 64, 19 };
static const int P_UNIT[NP] = { 0, 0, 1, 1, 2, 2 };
#define NUNITS 3
#define TOTAL_NUMEL (37 + 5 + 130 + 1 + 64 + 19)
#define MAX_NUMEL 130

#define GBATCH 840	/* samples per step: divides over 1..8 ranks */
#define KSTEPS_Z 5	/* optimizer steps */
#define SAVE_AT 3	/* checkpoint when this many are done */

struct zcfg {
	const char *tag;
	int stage;
	dpg_optimizer_t opt;
	dpg_dtype_t pdt, rdt;
	double tol;	/* against the fp32 single-process reference */
};

static const struct zcfg CFGS[] = {
	{ "s1-adamw", 1, DPG_OPT_ADAMW, DPG_F32, DPG_F32, 2e-5 },
	{ "s2-adamw", 2, DPG_OPT_ADAMW, DPG_F32, DPG_F32, 2e-5 },
	{ "s3-adamw", 3, DPG_OPT_ADAMW, DPG_F32, DPG_F32, 2e-5 },
	{ "s1-sgd", 1, DPG_OPT_SGD, DPG_F32, DPG_F32, 2e-5 },
	{ "s2-sgd", 2, DPG_OPT_SGD, DPG_F32, DPG_F32, 2e-5 },
	{ "s3-sgd", 3, DPG_OPT_SGD, DPG_F32, DPG_F32, 2e-5 },
	/* the bf16 kernels and NCCL's bf16 reduce-scatter in the step */
	{ "s3-adamw-bf16", 3, DPG_OPT_ADAMW, DPG_BF16, DPG_BF16, 3e-2 },
};
#define NCFGS ((int)(sizeof(CFGS) / sizeof(CFGS[0])))

static char g_tmp[256];

static double target(long s, int id, size_t i)
{
	return cos(0.013 * (double)s + 0.17 * (double)i + id);
}

static float weight(long s)
{
	return 1.0f + (float)(s % 3);
}

static void init_values(int id, float *v)
{
	for (size_t i = 0; i < P_NUMEL[id]; i++)
		v[i] = 0.1f * sinf(0.7f * (float)i + (float)id);
}

static float lr_of(const struct zcfg *c)
{
	return c->opt == DPG_OPT_ADAMW ? 0.05f : 0.1f;
}

/* host <-> the model's buffers (device memory on NCCL) */
static void buf_to_host(void *h, const void *buf, size_t bytes)
{
	if (g_gpu)
		CU(cudaMemcpy(h, buf, bytes, cudaMemcpyDeviceToHost));
	else
		memcpy(h, buf, bytes);
}

static void host_to_buf(void *buf, const void *h, size_t bytes)
{
	if (g_gpu)
		CU(cudaMemcpy(buf, h, bytes, cudaMemcpyHostToDevice));
	else
		memcpy(buf, h, bytes);
}

/* On the GPU, a buffer of the model must be device memory of this rank's
 * device (the current one). */
static void check_buf(const void *p, const char *tag, const char *what, int id)
{
	struct cudaPointerAttributes a;
	int dev = -1;

	if (!g_gpu)
		return;
	CU(cudaGetDevice(&dev));
	CU(cudaPointerGetAttributes(&a, p));
	CHK(a.type == cudaMemoryTypeDevice && a.device == dev, "%s: %s of parameter %d at %p "
	    "is memory of type %d on device %d, expected device memory on device %d", tag, what,
	    id, p, (int)a.type, a.device, dev);
}

/* Parameter id's working values (param_dtype) as fp32 on the host. */
static void param_to_host(dpg_zero_t *z, const struct zcfg *c, int id, float *out)
{
	const void *p = dpg_zero_param(z, id);
	uint16_t raw[MAX_NUMEL];

	if (!p)
		DIE("%s: dpg_zero_param(%d) is NULL", c->tag, id);
	check_buf(p, c->tag, "the working values", id);
	if (c->pdt == DPG_F32) {
		buf_to_host(out, p, P_NUMEL[id] * sizeof(float));
		return;
	}
	buf_to_host(raw, p, P_NUMEL[id] * sizeof(uint16_t));
	for (size_t i = 0; i < P_NUMEL[id]; i++)
		out[i] = u2f((uint32_t)raw[i] << 16);
}

static dpg_zero_t *make_model(dpg_ctx_t *ctx, const struct zcfg *c)
{
	dpg_zero_opts_t o;
	dpg_zero_t *z = NULL;
	dpg_status_t st;
	float v[MAX_NUMEL];

	dpg_zero_opts_default(&o);
	o.stage = c->stage;
	o.optimizer = c->opt;
	o.param_dtype = c->pdt;
	o.reduce_dtype = c->rdt;
	o.weight_decay = 0.01f;
	st = dpg_zero_create(ctx, &o, &z);
	if (st == DPG_ERR_UNSUPPORTED) {
		printf("SKIPPED: %s\n", dpg_last_error(ctx));
		fflush(stdout);
		_exit(77);
	}
	OK(ctx, st);
	for (int id = 0; id < NP; id++) {
		char name[16];
		int got = -1;

		snprintf(name, sizeof(name), "p%d", id);
		OK(ctx, dpg_zero_add_param(z, name, P_NUMEL[id], P_UNIT[id], &got));
		CHK(got == id, "id %d for parameter %d", got, id);
	}
	OK(ctx, dpg_zero_commit(z));
	for (int id = 0; id < NP; id++) {
		init_values(id, v);
		OK(ctx, dpg_zero_set_param(z, id, v));
	}
	return z;
}

/* This rank's gradients of `step` (test_zero.c's micro_step, accumulation
 * 1): its share of the global batch, backward over the units in reverse
 * order, stage 3 gathering each unit (and the one before it).  On the GPU
 * the parameters and gradients are device memory: the gradient is read,
 * added to on the host and written back (the backward pass ADDs). */
static void backward(dpg_ctx_t *ctx, dpg_zero_t *z, const struct zcfg *c, int world,
		     int rank, long step)
{
	long B = GBATCH / world, s0 = step * GBATCH + rank * B;
	float p[MAX_NUMEL], g[MAX_NUMEL];

	for (int u = NUNITS - 1; u >= 0; u--) {
		OK(ctx, dpg_zero_gather(z, u, u > 0 ? u - 1 : -1));
		for (int id = 0; id < NP; id++) {
			float *dg;

			if (P_UNIT[id] != u)
				continue;
			param_to_host(z, c, id, p);
			dg = dpg_zero_grad(z, id);
			if (!dg)
				DIE("%s: dpg_zero_grad(%d) is NULL: %s", c->tag, id,
				    dpg_last_error(ctx));
			check_buf(dg, c->tag, "the gradient", id);
			buf_to_host(g, dg, P_NUMEL[id] * sizeof(float));
			for (size_t i = 0; i < P_NUMEL[id]; i++) {
				double acc = 0;

				for (long s = s0; s < s0 + B; s++)
					acc += weight(s) * (p[i] - target(s, id, i));
				g[i] += (float)(acc / (double)B);
			}
			host_to_buf(dg, g, P_NUMEL[id] * sizeof(float));
		}
		OK(ctx, dpg_zero_release(z, u));
		OK(ctx, dpg_zero_grads_ready(z, u));
	}
}

/* Every rank takes part (stage 3 gathers); every rank gets all values. */
static void gather_all(dpg_ctx_t *ctx, dpg_zero_t *z, const struct zcfg *c, float *out)
{
	size_t k = 0;

	for (int u = 0; u < NUNITS; u++) {
		OK(ctx, dpg_zero_gather(z, u, -1));
		for (int id = 0; id < NP; id++) {
			if (P_UNIT[id] != u)
				continue;
			param_to_host(z, c, id, out + k);
			k += P_NUMEL[id];
		}
		OK(ctx, dpg_zero_release(z, u));
	}
}

static void step_once(dpg_ctx_t *ctx, dpg_zero_t *z, const struct zcfg *c, int world,
		      int rank, long step)
{
	dpg_step_stats_t st;

	backward(ctx, z, c, world, rank, step);
	OK(ctx, dpg_zero_step(z, lr_of(c), &st));
	CHK(st.stepped == 1 && st.step == step + 1, "%s: stepped %d, step %ld after step %ld",
	    c->tag, st.stepped, st.step, step + 1);
	CHK(st.grad_norm > 0 && isfinite(st.grad_norm) && st.clip_scale == 1.0,
	    "%s: grad norm %g, clip scale %g", c->tag, st.grad_norm, st.clip_scale);
}

static void write_file(const char *path, const float *v, size_t n)
{
	FILE *f = fopen(path, "wb");

	if (!f || fwrite(v, sizeof(float), n, f) != n || fclose(f) != 0)
		DIE("cannot write %s: %s", path, strerror(errno));
}

static void tmp_path(char *buf, size_t cap, const char *tag, const char *what)
{
	int len = snprintf(buf, cap, "%s/%s%s", g_tmp, tag, what);

	if (len < 0 || (size_t)len >= cap)
		DIE("path too long");
}

/* max |a-b| / max(1, |a|); NaN counts as Inf */
static double max_rel_diff(const float *a, const float *b, size_t n)
{
	double m = 0;

	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - b[i]) / fmax(1.0, fabs((double)a[i]));

		if (!(d <= m))
			m = isnan(d) ? INFINITY : d;
	}
	return m;
}

/* One configuration: K steps (rank 0 writes the result to <tag><suffix>);
 * with ckpt, a checkpoint after SAVE_AT steps, then a fresh model loads it
 * (the same bits as at the save) and resumes to K steps. */
static void run_cfg(dpg_ctx_t *ctx, const struct zcfg *c, int world, int rank,
		    const char *suffix, bool ckpt)
{
	static float at_save[TOTAL_NUMEL], fin[TOTAL_NUMEL], got[TOTAL_NUMEL];
	char path[512], ckdir[512];
	dpg_zero_t *z = make_model(ctx, c);
	dpg_zero_mem_t mem;

	tmp_path(ckdir, sizeof(ckdir), c->tag, "-ckpt");
	OK(ctx, dpg_zero_memory(z, &mem));
	CHK(mem.shard_numel * (size_t)world == mem.padded_numel && mem.padded_numel >= TOTAL_NUMEL,
	    "%s: shard %zu x %d ranks != padded %zu", c->tag, mem.shard_numel, world,
	    mem.padded_numel);
	for (long step = 0; step < KSTEPS_Z; step++) {
		step_once(ctx, z, c, world, rank, step);
		if (ckpt && step + 1 == SAVE_AT) {
			long next = step + 1;

			OK(ctx, dpg_zero_save(z, ckdir, &next, sizeof(next)));
			gather_all(ctx, z, c, at_save);
			if (rank == 0) {	/* what part 3 must load */
				tmp_path(path, sizeof(path), c->tag, ".atsave");
				write_file(path, at_save, TOTAL_NUMEL);
			}
		}
	}
	gather_all(ctx, z, c, fin);
	if (rank == 0) {
		tmp_path(path, sizeof(path), c->tag, suffix);
		write_file(path, fin, TOTAL_NUMEL);
	}
	OK(ctx, dpg_zero_destroy(z));
	if (!ckpt)
		return;

	/* a fresh model in the same processes resumes from the checkpoint */
	{
		long next = -1;
		size_t len = 0;
		double d;

		z = make_model(ctx, c);
		OK(ctx, dpg_zero_load(z, ckdir, &next, sizeof(next), &len));
		CHK(len == sizeof(next) && next == SAVE_AT, "%s: resumed at %ld (%zu extra bytes), "
		    "expected %d", c->tag, next, len, SAVE_AT);
		gather_all(ctx, z, c, got);
		CHK(memcmp(got, at_save, sizeof(got)) == 0, "%s: the loaded parameters differ from "
		    "those at the save (max relative difference %g)", c->tag,
		    max_rel_diff(at_save, got, TOTAL_NUMEL));
		for (long step = SAVE_AT; step < KSTEPS_Z; step++)
			step_once(ctx, z, c, world, rank, step);
		gather_all(ctx, z, c, got);
		d = max_rel_diff(fin, got, TOTAL_NUMEL);
		/* not required to be bitwise: NCCL's reductions need not be
		 * deterministic run to run (e.g. NVLS); bf16 parameters turn
		 * a last-bit difference of the master into a bf16 step */
		CHK(d <= c->tol, "%s: resumed run ends %g (relative) away from the uninterrupted "
		    "one (tolerance %g)", c->tag, d, c->tol);
		if (rank == 0)
			printf("%s: %s: checkpoint after %d steps loads bit for bit; resumed run "
			       "%s the uninterrupted one (max relative difference %.3g)\n", g_who,
			       c->tag, SAVE_AT, memcmp(got, fin, sizeof(got)) == 0 ? "equals" :
			       "is close to", d);
		OK(ctx, dpg_zero_destroy(z));
	}
}

/* Part 3, one configuration: load the checkpoint in <tag><from> into a
 * fresh model on this job's backend, compare with the bits the first job had
 * at the save (<tag>.atsave), and save it again in <tag><to> (when to is
 * not NULL) for the next hop. */
static void cross_cfg(dpg_ctx_t *ctx, const struct zcfg *c, int rank, const char *from,
		      const char *to)
{
	static float want[TOTAL_NUMEL], got[TOTAL_NUMEL];
	char dir[512], path[512];
	dpg_zero_t *z = make_model(ctx, c);
	long next = -1;
	size_t len = 0;

	tmp_path(dir, sizeof(dir), c->tag, from);
	tmp_path(path, sizeof(path), c->tag, ".atsave");
	OK(ctx, dpg_zero_load(z, dir, &next, sizeof(next), &len));
	CHK(len == sizeof(next) && next == SAVE_AT, "%s: %s: resumed at %ld, expected %d",
	    c->tag, from, next, SAVE_AT);
	gather_all(ctx, z, c, got);
	if (rank == 0) {
		FILE *f = fopen(path, "rb");
		bool ok = f != NULL && fread(want, sizeof(float), TOTAL_NUMEL, f) == TOTAL_NUMEL;

		if (f != NULL)
			fclose(f);
		CHK(ok, "%s: cannot read %s", c->tag, path);
		CHK(!ok || memcmp(got, want, sizeof(got)) == 0, "%s: the checkpoint %s loads "
		    "on %s with other bits than it was saved with (max relative difference %g)",
		    c->tag, from, g_gpu ? "NCCL" : "the CPU", max_rel_diff(want, got, TOTAL_NUMEL));
	}
	if (to != NULL) {
		tmp_path(dir, sizeof(dir), c->tag, to);
		OK(ctx, dpg_zero_save(z, dir, &next, sizeof(next)));
	}
	OK(ctx, dpg_zero_destroy(z));
}

/* ------------------------------------------------- processes */



static void job_env(int rank, int n, uint16_t port, const char *backend)
{
	/* clean_env drops every DPG_ variable: keep the module path that
	 * make check-gpu (tests/gpu/run.sh) points at the build tree's */
	const char *m = getenv("DPG_CUDA_MODULE");
	char module[4096] = "";

	if (m != NULL && strlen(m) < sizeof(module))
		memcpy(module, m, strlen(m) + 1);
	clean_env();
	if (module[0] != '\0')
		setenv("DPG_CUDA_MODULE", module, 1);
	setenv_int("RANK", rank);
	setenv_int("LOCAL_RANK", rank);
	setenv_int("WORLD_SIZE", n);
	setenv_int("LOCAL_WORLD_SIZE", n);
	setenv("MASTER_ADDR", "127.0.0.1", 1);
	setenv_int("MASTER_PORT", port);
	setenv("DPG_SECRET", SECRET, 1);
	setenv("DPG_BACKEND", backend, 1);
	setenv("DPG_TIMEOUT", TIMEOUT_S, 1);
	if (g_phase == PHASE_NOPF)	/* stage 3 gathers when asked, no prefetch */
		setenv("DPG_ZERO_PREFETCH", "0", 1);
	if (strcmp(backend, "nccl") == 0)
		share_gpus(rank, n, g_ngpu);
}

/* A rank of the sharded job: on NCCL (gpu) with device `rank`, or on the
 * CPU backend; reference = the single-process fp32 stage-1 reference. */
static void rank_main(int rank, int n, uint16_t port, bool gpu, bool reference)
{
	dpg_init_opts_t o;
	dpg_ctx_t *ctx = NULL;
	dpg_status_t st;
	double t0 = now_s();

	if (reference) {
		g_who = "reference";
	} else {
		snprintf(g_whobuf, sizeof(g_whobuf), "rank %d", rank);
		g_who = g_whobuf;
	}
	g_gpu = gpu;
	job_env(rank, n, port, gpu ? "nccl" : "cpu");
	dpg_init_opts_default(&o);
	if (gpu) {
		/* the sharded step allocates on the calling thread's current
		 * device: make it this rank's before anything else */
		o.device = rank % g_ngpu;
		CU(cudaSetDevice(rank % g_ngpu));
	}
	st = dpg_init(&o, &ctx);
	if (st == DPG_ERR_UNSUPPORTED && gpu) {
		/* this test is built only with the module, and CUDA sees a
		 * GPU: a module that does not load is a failure, not a skip */
		printf("FAIL: %s: the NCCL backend is unusable with a GPU present: %s\n",
		       g_who, dpg_last_error(ctx));
		fflush(stdout);
		dpg_finalize(ctx);
		_exit(1);
	}
	if (st == DPG_ERR_UNSUPPORTED) {
		printf("SKIPPED: %s: %s\n", g_who, dpg_last_error(ctx));
		fflush(stdout);
		dpg_finalize(ctx);
		_exit(77);
	}
	OK(ctx, st);
	CHK(dpg_world_size(ctx) == n && dpg_rank(ctx) == rank, "joined as rank %d of %d",
	    dpg_rank(ctx), dpg_world_size(ctx));
	CHK(dpg_backend(ctx) == (gpu ? DPG_BACKEND_NCCL : DPG_BACKEND_CPU), "backend %d",
	    (int)dpg_backend(ctx));
	if (gpu) {
		int dev = -1;

		CU(cudaGetDevice(&dev));
		CHK(dev == rank % g_ngpu, "current device %d after dpg_init, expected %d", dev,
		    rank % g_ngpu);
		if (dev != rank % g_ngpu)
			CU(cudaSetDevice(rank % g_ngpu));
	}
	for (int k = 0; k < NCFGS; k++) {
		if (g_phase == PHASE_TO_CPU) {
			cross_cfg(ctx, &CFGS[k], rank, "-ckpt", "-ckpt2");
		} else if (g_phase == PHASE_BACK) {
			cross_cfg(ctx, &CFGS[k], rank, "-ckpt2", NULL);
		} else if (g_phase == PHASE_NOPF) {
			run_cfg(ctx, &CFGS[k], n, rank, ".nopf", false);
		} else if (reference) {
			struct zcfg r = CFGS[k];

			r.stage = 1;
			r.pdt = r.rdt = DPG_F32;
			run_cfg(ctx, &r, 1, 0, ".ref", false);
		} else {
			run_cfg(ctx, &CFGS[k], n, rank, ".out", true);
		}
	}
	OK(ctx, dpg_finalize(ctx));
	if (rank == 0)
		printf("%s: %d configurations on %d rank(s) (%s)%s in %.1f s\n", g_who, NCFGS, n,
		       gpu ? "NCCL" : "CPU", g_phase == PHASE_TO_CPU ? ": the NCCL job's "
		       "checkpoints load bit for bit, saved again" : g_phase == PHASE_BACK ?
		       ": those checkpoints load bit for bit" : "", now_s() - t0);
	fflush(stdout);
	fflush(stderr);
	_exit(g_failed ? 1 : 0);
}

/* Wait for n processes, killing what is left after LIMIT_S.  Returns 0 when
 * all exited 0, 77 when none failed and one skipped, else 1. */
static int wait_all(const pid_t *pids, int n, const char *what)
{
	int codes[MAX_RANKS + 1], left = n, worst = 0;
	double t0 = now_s();

	for (int r = 0; r < n; r++)
		codes[r] = -1;
	while (left > 0) {
		int status;
		pid_t p = waitpid(-1, &status, WNOHANG);

		if (p > 0) {
			for (int r = 0; r < n; r++)
				if (pids[r] == p) {
					codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) :
						   128 + WTERMSIG(status);
					left--;
				}
			continue;
		}
		if (p < 0 && errno != EINTR)
			break;
		if (now_s() - t0 > LIMIT_S) {
			for (int r = 0; r < n; r++)
				if (codes[r] == -1) {
					fprintf(stderr, "%s: process %d hangs: killed after %.0f s\n",
						what, r, LIMIT_S);
					kill(pids[r], SIGKILL);
				}
			for (int r = 0; r < n; r++)
				if (codes[r] == -1 && waitpid(pids[r], &status, 0) == pids[r])
					codes[r] = 128 + SIGKILL;
			break;
		}
		usleep(10000);
	}
	for (int r = 0; r < n; r++) {
		if (codes[r] == 0)
			continue;
		if (codes[r] == 77) {
			if (worst == 0)
				worst = 77;
			continue;
		}
		fprintf(stderr, "%s: process %d of %d failed (exit %d)\n", what, r, n, codes[r]);
		worst = 1;
	}
	return worst;
}

static pid_t spawn(void (*fn)(void))
{
	pid_t p;

	fflush(stdout);
	fflush(stderr);
	p = fork();
	if (p < 0) {
		perror("fork");
		exit(1);
	}
	if (p == 0)
		fn();	/* does not return */
	return p;
}

static void child_gpu_count(void)
{
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess)
		n = 0;
	_exit(n > 100 ? 100 : n);
}

/* The device count, asked in a child: a parent that touched CUDA must not
 * fork processes that use it. */
static int gpu_count(void)
{
	pid_t p = spawn(child_gpu_count);
	int status;

	if (waitpid(p, &status, 0) != p || !WIFEXITED(status))
		return 0;
	return WEXITSTATUS(status);
}

static int g_n;
static uint16_t g_port;

static void child_reference(void)
{
	rank_main(0, 1, g_port, false, true);
}

static int run_ranks(bool gpu)
{
	pid_t pids[MAX_RANKS];

	g_port = free_port();
	fflush(stdout);
	fflush(stderr);
	for (int r = 0; r < g_n; r++) {
		pids[r] = fork();
		if (pids[r] < 0) {
			perror("fork");
			for (int k = 0; k < r; k++)
				kill(pids[k], SIGKILL);
			for (int k = 0; k < r; k++)
				waitpid(pids[k], NULL, 0);
			return 1;
		}
		if (pids[r] == 0)
			rank_main(r, g_n, g_port, gpu, false);
	}
	return wait_all(pids, g_n, gpu ? "NCCL ranks" : "CPU ranks");
}

static bool load_file(const char *path, float *v)
{
	FILE *f = fopen(path, "rb");
	bool ok = f && fread(v, sizeof(float), TOTAL_NUMEL, f) == TOTAL_NUMEL;

	if (f)
		fclose(f);
	if (!ok)
		fprintf(stderr, "parent: cannot read %s\n", path);
	return ok;
}

/* the ranks' results against the references */
static void compare_results(void)
{
	static float ref[TOTAL_NUMEL], out[TOTAL_NUMEL];
	float init[TOTAL_NUMEL];
	size_t k = 0;

	for (int id = 0; id < NP; id++) {
		init_values(id, init + k);
		k += P_NUMEL[id];
	}
	for (int c = 0; c < NCFGS; c++) {
		char a[512], b[512];
		double d, moved;

		tmp_path(a, sizeof(a), CFGS[c].tag, ".ref");
		tmp_path(b, sizeof(b), CFGS[c].tag, ".out");
		if (!load_file(a, ref) || !load_file(b, out)) {
			g_failed++;
			continue;
		}
		d = max_rel_diff(ref, out, TOTAL_NUMEL);
		moved = max_rel_diff(init, out, TOTAL_NUMEL);
		printf("%s: stage %d %s%s on %d rank(s): max relative difference to the "
		       "reference %.3g (tolerance %g), parameters moved up to %.3g\n",
		       CFGS[c].tag, CFGS[c].stage, CFGS[c].opt == DPG_OPT_ADAMW ? "AdamW" : "SGD",
		       CFGS[c].pdt == DPG_BF16 ? " bf16" : "", g_n, d, CFGS[c].tol, moved);
		CHK(d <= CFGS[c].tol, "%s: %g > %g", CFGS[c].tag, d, CFGS[c].tol);
		/* a test that cannot fail is no test */
		CHK(moved > 1e-3, "%s: the parameters did not move (%g)", CFGS[c].tag, moved);
		moved = max_rel_diff(init, ref, TOTAL_NUMEL);
		CHK(moved > 1e-3, "%s: the reference did not move (%g)", CFGS[c].tag, moved);
	}
}

/* The same job with DPG_ZERO_PREFETCH=0: the same parameters (stage 3
 * gathers are copies; the tolerance covers reductions that need not be
 * deterministic run to run on several GPUs). */
static void compare_prefetch(void)
{
	static float a[TOTAL_NUMEL], b[TOTAL_NUMEL];

	for (int c = 0; c < NCFGS; c++) {
		char pa[512], pb[512];
		double d;

		tmp_path(pa, sizeof(pa), CFGS[c].tag, ".out");
		tmp_path(pb, sizeof(pb), CFGS[c].tag, ".nopf");
		if (!load_file(pa, a) || !load_file(pb, b)) {
			g_failed++;
			continue;
		}
		d = max_rel_diff(a, b, TOTAL_NUMEL);
		CHK(d <= CFGS[c].tol, "%s: with DPG_ZERO_PREFETCH=0 the parameters differ by %g "
		    "(tolerance %g)", CFGS[c].tag, d, CFGS[c].tol);
		if (CFGS[c].stage == 3)
			printf("%s: without the prefetch: %s (max relative difference %.3g)\n",
			       CFGS[c].tag, memcmp(a, b, sizeof(a)) == 0 ? "the same bits" :
			       "close", d);
	}
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void usage(void)
{
	fprintf(stderr, "usage: test_zero_gpu [N]   |   test_zero_gpu --cpu N\n");
	exit(2);
}

int main(int argc, char **argv)
{
	bool cpu = false;
	int ngpu = 0, rc_k = 0, rc_r, rc_z;
	const char *tmpdir = getenv("TMPDIR");

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	if (argc > 1 && strcmp(argv[1], "--cpu") == 0) {
		cpu = true;
		if (argc != 3)
			usage();
		g_n = atoi(argv[2]);
		if (g_n < 1 || g_n > MAX_RANKS)
			usage();
	} else if (argc > 2) {
		usage();
	}
	if (!cpu) {
		ngpu = gpu_count();
		if (ngpu < 1) {
			printf("SKIPPED: no NVIDIA GPU (CUDA sees no device)\n");
			return 77;
		}
		g_ngpu = ngpu;
		g_n = argc > 1 ? atoi(argv[1]) : ngpu;
		if (g_n > MAX_RANKS)
			g_n = MAX_RANKS;
		if (g_n < 1)
			g_n = 1;
		if (g_n > ngpu)
			printf("note: %d ranks on %d GPU(s): each rank poses as its own host "
			       "(NCCL_HOSTID), NCCL's socket transport on loopback\n", g_n, ngpu);
	}
	snprintf(g_tmp, sizeof(g_tmp), "%s/dpg-zero-gpu-XXXXXX",
		 tmpdir && *tmpdir && strlen(tmpdir) < 200 ? tmpdir : "/tmp");
	if (!mkdtemp(g_tmp)) {
		perror("mkdtemp");
		return 1;
	}

	/* 1: the kernels, on device 0 */
	if (!cpu) {
		pid_t k = spawn(kernels_main);

		rc_k = wait_all(&k, 1, "kernels");
	}
	/* 2: the single-process reference on the CPU, then the sharded job */
	{
		pid_t r;

		g_port = free_port();
		r = spawn(child_reference);
		rc_r = wait_all(&r, 1, "reference");
	}
	rc_z = rc_r == 0 ? run_ranks(!cpu) : 1;
	if (rc_z == 0 && rc_r == 0)
		compare_results();
	/* 3: its checkpoints on the CPU backend, saved again, back on NCCL */
	if (rc_z == 0) {
		g_phase = PHASE_TO_CPU;
		rc_z = run_ranks(false);
		if (rc_z == 0) {
			g_phase = PHASE_BACK;
			rc_z = run_ranks(!cpu);
		}
		if (rc_z == 0) {
			g_phase = PHASE_NOPF;
			rc_z = run_ranks(!cpu);
		}
		if (rc_z == 77)	/* the first job ran: a later skip is a failure */
			rc_z = 1;
		if (rc_z == 0)
			compare_prefetch();
	}

	if (rc_z == 77 && rc_k == 0 && !g_failed) {
		printf("SKIPPED: the sharded step (libdpg has no NCCL/CUDA kernels)\n");
		nftw(g_tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
		return 77;
	}
	if (rc_k != 0 || rc_r != 0 || rc_z != 0 || g_failed) {
		printf("FAIL: kernels %s, reference %s, sharded step on %d rank(s) %s, "
		       "comparison %d failure(s); files kept in %s\n",
		       cpu ? "not run" : rc_k ? "FAILED" : "ok", rc_r ? "FAILED" : "ok", g_n,
		       rc_z ? "FAILED" : "ok", g_failed, g_tmp);
		return 1;
	}
	nftw(g_tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	printf("PASS: %s%d configurations of the sharded step on %d rank(s) (%s); their "
	       "checkpoints load bit for bit across backends\n",
	       cpu ? "" : "kernels bit-identical to the host; ", NCFGS, g_n,
	       cpu ? "CPU backend" : "NCCL");
	return 0;
}
