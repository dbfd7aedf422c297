/* SPDX-License-Identifier: BSD-3-Clause */
/* test_optim.c - lib/train/optim.{h,c} (AdamW, SGD, sumsq, bf16) and lib/train/schedule.c
 * against independent double-precision references and hand-computed values. */

/* The element functions as the GPU computes them (nvcc --fmad=false): no
 * FMA contraction here either, whatever -march the build uses (optim.c
 * does the same for its loops). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpg_zero.h"
#include "optim.h"

/* ---------------------------------------------------------------- helpers */

/* A deterministic generator for test data (xorshift64*). */
static uint64_t rnd_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dull;
}

/* uniform in [lo, hi) */
static float rnd_float(uint64_t *s, float lo, float hi)
{
	double u = (double)(rnd_next(s) >> 11) / 9007199254740992.0;

	return (float)(lo + (hi - lo) * u);
}

static float *falloc(size_t n)
{
	float *p = calloc(n ? n : 1, sizeof(float));

	assert_non_null(p);
	return p;
}

static double *dalloc(size_t n)
{
	double *p = calloc(n ? n : 1, sizeof(double));

	assert_non_null(p);
	return p;
}

static uint32_t fbits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static float bitsf(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static void assert_close(double got, double want, double tol)
{
	if (!(fabs(got - want) <= tol))
		fail_msg("got %.10g, want %.10g (|diff| %.3g > %.3g)", got, want,
			 fabs(got - want), tol);
}

static struct dpg_adamw_hp adamw_hp(int t, float lr, float wd, float gscale)
{
	struct dpg_adamw_hp h = { .lr = lr, .beta1 = 0.9f, .beta2 = 0.999f,
				  .eps = 1e-8f, .weight_decay = wd, .gscale = gscale };

	dpg_adamw_hp_at(&h, t);
	return h;
}

/* --------------------------------------------------------------- AdamW */

/* The reference, in double and in PyTorch's form (decay as a factor, the
 * bias corrections folded into the step size and the denominator). */
static void ref_adamw(double *p, double *m, double *v, const float *g, size_t n,
		      const struct dpg_adamw_hp *h, int t)
{
	double b1 = h->beta1, b2 = h->beta2, lr = h->lr;
	double step_size = lr / (1.0 - pow(b1, t)), bc2_sqrt = sqrt(1.0 - pow(b2, t));

	for (size_t i = 0; i < n; i++) {
		double gi = (double)g[i] * h->gscale;

		p[i] *= 1.0 - lr * h->weight_decay;
		m[i] = b1 * m[i] + (1.0 - b1) * gi;
		v[i] = b2 * v[i] + (1.0 - b2) * gi * gi;
		p[i] -= step_size * m[i] / (sqrt(v[i]) / bc2_sqrt + h->eps);
	}
}

static void check_adamw_vs_ref(float lr, float wd, float gscale)
{
	enum { N = 1000, STEPS = 12 };
	float *p = falloc(N), *m = falloc(N), *v = falloc(N), *g = falloc(N);
	double *rp = dalloc(N), *rm = dalloc(N), *rv = dalloc(N), *p0 = dalloc(N);
	uint64_t s = 0x1234567;
	double moved = 0;

	for (size_t i = 0; i < N; i++) {
		p[i] = rnd_float(&s, -2.0f, 2.0f);
		rp[i] = p0[i] = p[i];
	}
	for (int t = 1; t <= STEPS; t++) {
		struct dpg_adamw_hp h = adamw_hp(t, lr, wd, gscale);

		for (size_t i = 0; i < N; i++)
			g[i] = rnd_float(&s, -3.0f, 3.0f) + (float)(i % 7) * 0.1f;
		dpg_adamw_update(p, m, v, g, N, &h);
		ref_adamw(rp, rm, rv, g, N, &h, t);
	}
	for (size_t i = 0; i < N; i++) {
		/* a few float roundings (each <= 6e-8 relative) per step; the
		 * worst seen are 4.6e-7, 2.2e-7 and 2.9e-7 (m is a sum of terms
		 * of both signs: its error scales with the gradient, not m) */
		assert_close(p[i], rp[i], 2e-6 * (1.0 + fabs(rp[i])));
		assert_close(m[i], rm[i], 1e-6 * gscale);
		assert_close(v[i], rv[i], 1e-6 * fabs(rv[i]));
		moved += fabs(p[i] - p0[i]);
	}
	/* the parameters moved by far more than the tolerance (about lr per
	 * step), so the comparison is not vacuous */
	assert_true(moved / N > 2.0 * lr);
	free(p), free(m), free(v), free(g), free(rp), free(rm), free(rv), free(p0);
}

static void test_adamw_reference(void **state)
{
	(void)state;
	check_adamw_vs_ref(1e-2f, 0.0f, 1.0f);
	check_adamw_vs_ref(1e-2f, 0.1f, 0.25f);	/* decay, scaled gradients */
	check_adamw_vs_ref(3e-4f, 0.01f, 1.0f / 12.0f);
}

/* The parameters really move, by about lr, in the direction of -sign(g). */
static void test_adamw_moves(void **state)
{
	struct dpg_adamw_hp h = adamw_hp(1, 1e-2f, 0.0f, 1.0f);
	float p[2] = { 1.0f, 1.0f }, m[2] = { 0 }, v[2] = { 0 }, g[2] = { 5.0f, -0.5f };

	(void)state;
	dpg_adamw_update(p, m, v, g, 2, &h);
	assert_close(p[0], 1.0 - 1e-2, 1e-6);	/* first Adam step: lr * sign(g) */
	assert_close(p[1], 1.0 + 1e-2, 1e-6);
}

/* One step by hand: p = 1, g = 2, gscale 0.5 (g' = 1), t = 1, lr 0.01,
 * wd 0.1, so m = 1 - b1 (float), v = 1 - b2 (float), which equal the bias
 * corrections exactly: m/bc1 = sqrt(v)/sqrt(bc2) = 1 in exact arithmetic,
 * and p = (1 - 0.01 * 0.1) - 0.01 / (1 + 1e-8) = 0.989. */
static void test_adamw_hand(void **state)
{
	struct dpg_adamw_hp h = { .lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f,
				  .eps = 1e-8f, .weight_decay = 0.1f, .gscale = 0.5f };
	float p = 1.0f, m = 0.0f, v = 0.0f;
	volatile float num, den, step, pd;

	(void)state;
	dpg_adamw_hp_at(&h, 1);
	/* the step's scalars: lr sqrt(bc2) / bc1 and eps sqrt(bc2) */
	assert_close(h.alpha, 0.01 * sqrt(1.0 - (double)0.999f) / (1.0 - (double)0.9f), 1e-9);
	assert_close(h.eps_hat, 1e-8 * sqrt(1.0 - (double)0.999f), 1e-15);
	dpg_adamw_elem(&p, &m, &v, 2.0f, &h);
	assert_true(m == 1.0f - 0.9f);
	assert_true(v == 1.0f - 0.999f);
	assert_close(p, 0.989, 1e-7);
	/* exactly optim.h's float sequence, one rounding each */
	num = h.alpha * m;
	den = sqrtf(v) + h.eps_hat;
	step = num / den;
	pd = 1.0f - 0.01f * 0.1f;
	assert_true(p == pd - step);

	/* second step, g = 2 again: m = (1 - b1) (1 + b1) (about 0.19),
	 * v = (1 - b2) (1 + b2) (about 0.002) with the float b1, b2; t = 2 */
	double b1 = 0.9f, b2 = 0.999f;

	dpg_adamw_hp_at(&h, 2);
	dpg_adamw_elem(&p, &m, &v, 2.0f, &h);
	assert_close(m, (1.0 - b1) * (1.0 + b1), 3e-8);
	assert_close(v, (1.0 - b2) * (1.0 + b2), 3e-10);
	/* m/bc1 = 1, sqrt(v/bc2) = 1: p = 0.989 * 0.999 - 0.01 */
	assert_close(p, 0.989 * 0.999 - 0.01, 2e-7);
}

/* ----------------------------------------------------------------- SGD */

static void ref_sgd(double *p, double *buf, const float *g, size_t n,
		    const struct dpg_sgd_hp *h, int first)
{
	for (size_t i = 0; i < n; i++) {
		double d = (double)g[i] * h->gscale + (double)h->weight_decay * p[i];

		buf[i] = first ? d : (double)h->momentum * buf[i] + d;
		p[i] -= (double)h->lr * buf[i];
	}
}

static void check_sgd_vs_ref(float lr, float momentum, float wd, float gscale)
{
	enum { N = 777, STEPS = 10 };
	struct dpg_sgd_hp h = { .lr = lr, .momentum = momentum, .weight_decay = wd,
				.gscale = gscale };
	float *p = falloc(N), *buf = falloc(N), *g = falloc(N);
	double *rp = dalloc(N), *rb = dalloc(N);
	uint64_t s = 0xabcdef;

	for (size_t i = 0; i < N; i++) {
		p[i] = rnd_float(&s, -1.0f, 1.0f);
		rp[i] = p[i];
	}
	for (int t = 0; t < STEPS; t++) {
		for (size_t i = 0; i < N; i++)
			g[i] = rnd_float(&s, -2.0f, 2.0f);
		dpg_sgd_update(p, buf, g, N, &h);
		ref_sgd(rp, rb, g, N, &h, t == 0);
	}
	for (size_t i = 0; i < N; i++) {
		assert_close(p[i], rp[i], 2e-6 * (1.0 + fabs(rp[i])));
		assert_close(buf[i], rb[i], 2e-6 * (1.0 + fabs(rb[i])));
	}
	free(p), free(buf), free(g), free(rp), free(rb);
}

static void test_sgd_reference(void **state)
{
	(void)state;
	check_sgd_vs_ref(0.1f, 0.9f, 0.0f, 1.0f);
	check_sgd_vs_ref(0.05f, 0.9f, 1e-2f, 0.125f);
	check_sgd_vs_ref(0.1f, 0.0f, 1e-3f, 0.5f);	/* plain SGD */
}

/* By hand: p = 2, g = 4, gscale 0.5, wd 0.1, momentum 0.9, lr 0.1:
 * g' = 2 + 0.2 = 2.2 = buf, p = 2 - 0.22 = 1.78; then g' = 2 + 0.178,
 * buf = 0.9 * 2.2 + 2.178 = 4.158, p = 1.78 - 0.4158 = 1.3642. */
static void test_sgd_hand(void **state)
{
	struct dpg_sgd_hp h = { .lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.1f,
				.gscale = 0.5f };
	float p = 2.0f, buf = 0.0f;

	(void)state;
	dpg_sgd_elem(&p, &buf, 4.0f, &h);
	assert_close(buf, 2.2, 3e-7);
	assert_close(p, 1.78, 3e-7);
	dpg_sgd_elem(&p, &buf, 4.0f, &h);
	assert_close(buf, 4.158, 1e-6);
	assert_close(p, 1.3642, 3e-7);
}

/* ------------------------------------------------ host loop == element */

/* values of every kind the loops meet: signs, zeros, subnormals, large */
static float edge_value(uint64_t *s, size_t i)
{
	switch (i % 11) {
	case 0:
		return 0.0f;
	case 1:
		return -0.0f;
	case 2:
		return bitsf(0x00000123u + (uint32_t)(i & 0xff));	/* subnormal */
	case 3:
		return 1e30f;
	case 4:
		return -1e-30f;
	default:
		return rnd_float(s, -10.0f, 10.0f);
	}
}

static void check_bits_equal(const float *a, const float *b, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++)
		if (fbits(a[i]) != fbits(b[i]))
			fail_msg("%s[%zu]: loop %a, element %a", what, i, (double)a[i],
				 (double)b[i]);
}

static void check_adamw_bits(size_t n, uint64_t seed)
{
	float *p = falloc(n), *m = falloc(n), *v = falloc(n), *g = falloc(n);
	float *p2 = falloc(n), *m2 = falloc(n), *v2 = falloc(n);
	uint64_t s = seed;

	for (size_t i = 0; i < n; i++) {
		p[i] = p2[i] = edge_value(&s, i);
		m[i] = m2[i] = rnd_float(&s, -1.0f, 1.0f);
		v[i] = v2[i] = i % 5 == 0 ? 0.0f : rnd_float(&s, 0.0f, 4.0f);
		g[i] = edge_value(&s, i + 3);
	}
	for (int t = 1; t <= 3; t++) {
		struct dpg_adamw_hp h = adamw_hp(t, 1e-3f, 0.05f, 0.3f);

		dpg_adamw_update(p, m, v, g, n, &h);
		for (size_t i = 0; i < n; i++)
			dpg_adamw_elem(&p2[i], &m2[i], &v2[i], g[i], &h);
	}
	check_bits_equal(p, p2, n, "p");
	check_bits_equal(m, m2, n, "m");
	check_bits_equal(v, v2, n, "v");
	free(p), free(m), free(v), free(g), free(p2), free(m2), free(v2);
}

static void check_sgd_bits(size_t n, uint64_t seed)
{
	struct dpg_sgd_hp h = { .lr = 0.03f, .momentum = 0.9f, .weight_decay = 1e-4f,
				.gscale = 0.7f };
	float *p = falloc(n), *b = falloc(n), *g = falloc(n);
	float *p2 = falloc(n), *b2 = falloc(n);
	uint64_t s = seed;

	for (size_t i = 0; i < n; i++) {
		p[i] = p2[i] = edge_value(&s, i);
		g[i] = edge_value(&s, i + 5);
	}
	for (int t = 0; t < 3; t++) {
		dpg_sgd_update(p, b, g, n, &h);
		for (size_t i = 0; i < n; i++)
			dpg_sgd_elem(&p2[i], &b2[i], g[i], &h);
	}
	check_bits_equal(p, p2, n, "p");
	check_bits_equal(b, b2, n, "buf");
	free(p), free(b), free(g), free(p2), free(b2);
}

static void test_loop_bit_identical(void **state)
{
	static const size_t sizes[] = { 0, 1, 3, 4, 255, 256, 257, 1031, 4096 + 7 };

	(void)state;
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		check_adamw_bits(sizes[k], 0x9e37 + k);
		check_sgd_bits(sizes[k], 0x7f4a + k);
	}
}

/* Misaligned views of the buffers (the loops must not assume alignment). */
static void test_loop_misaligned(void **state)
{
	enum { N = 600 };
	float *buf = falloc(4 * (N + 1)), *ref = falloc(4 * (N + 1));
	float *p = buf + 1, *m = p + N, *v = m + N, *g = v + N;
	float *rp = ref + 1, *rm = rp + N, *rv = rm + N;
	struct dpg_adamw_hp h = adamw_hp(4, 1e-3f, 0.01f, 1.0f);
	uint64_t s = 99;

	(void)state;
	for (size_t i = 0; i < N; i++) {
		rp[i] = p[i] = rnd_float(&s, -1.0f, 1.0f);
		rv[i] = v[i] = rnd_float(&s, 0.0f, 1.0f);
		g[i] = rnd_float(&s, -1.0f, 1.0f);
	}
	dpg_adamw_update(p, m, v, g, N, &h);
	for (size_t i = 0; i < N; i++)
		dpg_adamw_elem(&rp[i], &rm[i], &rv[i], g[i], &h);
	check_bits_equal(p, rp, N, "p");
	check_bits_equal(m, rm, N, "m");
	check_bits_equal(v, rv, N, "v");
	free(buf), free(ref);
}

/* ------------------------------------------- every compiled variant */

/* One variant's AdamW and SGD, three steps on edge inputs, into out[0..5]
 * (p m v of AdamW, p buf of SGD; each n floats). */
static void run_variant(const struct dpg_optim_variant *var, size_t n, float *out[5])
{
	struct dpg_sgd_hp sh = { .lr = 0.03f, .momentum = 0.9f, .weight_decay = 1e-4f,
				 .gscale = 0.7f };
	float *g = falloc(n), *gs = falloc(n);
	uint64_t s = 0xabcdef;

	for (size_t i = 0; i < n; i++) {
		out[0][i] = out[3][i] = edge_value(&s, i);
		out[1][i] = rnd_float(&s, -1.0f, 1.0f);
		out[2][i] = i % 5 == 0 ? 0.0f : rnd_float(&s, 0.0f, 4.0f);
		out[4][i] = 0.0f;
		g[i] = edge_value(&s, i + 3);
		gs[i] = edge_value(&s, i + 5);
	}
	for (int t = 1; t <= 3; t++) {
		struct dpg_adamw_hp h = adamw_hp(t, 1e-3f, 0.05f, 0.3f);

		var->adamw(out[0], out[1], out[2], g, n, &h);
		var->sgd(out[3], out[4], gs, n, &sh);
	}
	free(g), free(gs);
}

/* Each variant this CPU runs gives the default variant's bits (the
 * deterministic mode's bit-identity whatever the CPU), and the default
 * is one of them. */
static void test_variants_bit_identical(void **state)
{
	static const char *const what[5] = { "adamw p", "adamw m", "adamw v", "sgd p", "sgd buf" };
	enum { N = 4096 + 77 };
	const struct dpg_optim_variant *var;
	float *want[5], *got[5];
	size_t nvar, ran = 0;
	int k;

	(void)state;
	var = dpg_optim_variants(&nvar);
	assert_true(nvar >= 1);
	assert_string_equal(var[nvar - 1].name, "default");
	assert_true(var[nvar - 1].supported());
	for (k = 0; k < 5; k++)
		want[k] = falloc(N), got[k] = falloc(N);
	run_variant(&var[nvar - 1], N, want);
	for (size_t v = 0; v + 1 < nvar; v++) {
		if (!var[v].supported()) {
			print_message("skip: variant %s: this CPU lacks its instruction set\n",
				      var[v].name);
			continue;
		}
		run_variant(&var[v], N, got);
		for (k = 0; k < 5; k++) {
			char label[64];

			snprintf(label, sizeof(label), "%s %s", var[v].name, what[k]);
			check_bits_equal(got[k], want[k], N, label);
		}
		print_message("variant %s: bit-identical to default\n", var[v].name);
		ran++;
	}
	print_message("%zu of %zu non-default variants checked; dispatched: %s\n", ran,
		      nvar - 1, dpg_optim_variant_name());
	for (k = 0; k < 5; k++)
		free(want[k]), free(got[k]);
}

/* The dispatched loops are the variant their name says, and that variant
 * is the best one this CPU runs. */
static void test_variant_dispatched(void **state)
{
	const struct dpg_optim_variant *var;
	size_t nvar, best = 0;

	(void)state;
	var = dpg_optim_variants(&nvar);
	while (!var[best].supported())
		best++;
	assert_string_equal(dpg_optim_variant_name(), var[best].name);
}

/* --------------------------------------------------------------- sumsq */

/* The documented order: lane i % DPG_SUMSQ_LANES, then pairwise. */
static double ref_sumsq_order(const float *x, size_t n)
{
	double acc[DPG_SUMSQ_LANES] = { 0 };

	for (size_t i = 0; i < n; i++)
		acc[i % DPG_SUMSQ_LANES] += (double)x[i] * (double)x[i];
	for (int w = DPG_SUMSQ_LANES / 2; w > 0; w /= 2)
		for (int k = 0; k < w; k++)
			acc[k] += acc[k + w];
	return acc[0];
}

static void test_sumsq_exact(void **state)
{
	enum { N = 1000 };
	float *x = falloc(N);

	(void)state;
	assert_true(dpg_sumsq_f32(x, 0) == 0.0);
	assert_true(dpg_sumsq_f32(NULL, 0) == 0.0);
	for (size_t i = 0; i < N; i++)
		x[i] = (float)(i + 1);
	/* sum k^2 = n (n + 1) (2n + 1) / 6, exact in double */
	assert_true(dpg_sumsq_f32(x, N) == 333833500.0);
	assert_true(dpg_sumsq_f32(x, 7) == 140.0);
	for (size_t i = 0; i < N; i++)
		x[i] = i % 2 ? -0.5f : 3.0f;	/* 500 * 9 + 500 * 0.25 */
	assert_true(dpg_sumsq_f32(x, N) == 4625.0);
	/* a float sum would lose the small terms; double keeps them */
	x[0] = 4096.0f;
	for (size_t i = 1; i < N; i++)
		x[i] = 1.0f / 64.0f;
	assert_true(dpg_sumsq_f32(x, N) == 16777216.0 + 999.0 / 4096.0);
	/* a square beyond float range is still exact */
	x[0] = 1e30f;
	assert_true(dpg_sumsq_f32(x, 1) == (double)1e30f * (double)1e30f);
	free(x);
}

static void test_sumsq_order(void **state)
{
	enum { N = 100003 };
	float *x = falloc(N + 1), *y = falloc(N + 1);
	uint64_t s = 4242;

	(void)state;
	for (size_t i = 0; i < N; i++)
		x[i] = rnd_float(&s, -100.0f, 100.0f) * (float)(1 + i % 1000);
	memcpy(y + 1, x, N * sizeof(float));	/* another alignment */
	for (size_t n = 0; n < 40; n++)
		assert_true(dpg_sumsq_f32(x, n) == ref_sumsq_order(x, n));
	double a = dpg_sumsq_f32(x, N);

	assert_true(a == ref_sumsq_order(x, N));
	assert_true(dpg_sumsq_f32(x, N) == a);
	assert_true(dpg_sumsq_f32(y + 1, N) == a);
	free(x), free(y);
}

/* ---------------------------------------------------------------- bf16 */

static void test_bf16_round_trip(void **state)
{
	enum { N = 65536 };
	uint16_t *b = calloc(N, sizeof(*b)), *b2 = calloc(N, sizeof(*b2));
	float *f = falloc(N);

	(void)state;
	assert_non_null(b);
	assert_non_null(b2);
	for (size_t i = 0; i < N; i++)
		b[i] = (uint16_t)i;
	dpg_bf16_to_f32_n(b, f, N);
	dpg_f32_to_bf16_n(f, b2, N);
	for (size_t i = 0; i < N; i++) {
		assert_int_equal(fbits(f[i]), (uint32_t)i << 16);	/* exact */
		if (isnan(f[i]))
			assert_true((b2[i] & 0x7f80) == 0x7f80 && (b2[i] & 0x7f) != 0);
		else
			assert_int_equal(b2[i], b[i]);
	}
	free(b), free(b2), free(f);
}

static void test_bf16_rounding(void **state)
{
	static const struct {
		float in;
		uint16_t out;
	} cases[] = {
		{ 1.0f, 0x3f80 },
		{ 1.0f + 0x1p-8f, 0x3f80 },		/* tie: to even (down) */
		{ 1.0f + 3 * 0x1p-8f, 0x3f82 },		/* tie: to even (up) */
		{ 1.0f + 0x1p-8f + 0x1p-20f, 0x3f81 },	/* above the tie */
		{ 1.0f + 0x1p-8f - 0x1p-20f, 0x3f80 },	/* below the tie */
		{ -1.0f - 3 * 0x1p-8f, 0xbf82 },
		{ -0.0f, 0x8000 },
		{ 0x1p-130f, 0x0008 },			/* subnormal kept */
		{ FLT_MAX, 0x7f80 },			/* overflow to Inf */
		{ -FLT_MAX, 0xff80 },
		{ 0x1.fefffep127f, 0x7f7f },		/* largest finite bf16 */
		{ INFINITY, 0x7f80 },
		{ 3.14159265f, 0x4049 },
	};
	enum { N = sizeof(cases) / sizeof(cases[0]) };
	float in[N + 1];
	uint16_t out[N + 1];

	(void)state;
	for (size_t i = 0; i < N; i++)
		in[i] = cases[i].in;
	in[N] = NAN;
	dpg_f32_to_bf16_n(in, out, N + 1);
	for (size_t i = 0; i < N; i++)
		if (out[i] != cases[i].out)
			fail_msg("bf16(%a) = 0x%04x, want 0x%04x", (double)cases[i].in,
				 out[i], cases[i].out);
	assert_true((out[N] & 0x7f80) == 0x7f80 && (out[N] & 0x7f) != 0);
}

/* ------------------------------------------------------- lr schedule */

static void test_lr_schedule(void **state)
{
	const float hi = 1e-3f, lo = 1e-5f;

	(void)state;
	/* warm-up 10, cosine to step 110 */
	assert_close(dpg_lr_warmup_cosine(0, 10, 110, hi, lo), 1e-4, 1e-10);
	assert_close(dpg_lr_warmup_cosine(4, 10, 110, hi, lo), 5e-4, 1e-10);
	assert_true(dpg_lr_warmup_cosine(9, 10, 110, hi, lo) == hi);
	assert_true(dpg_lr_warmup_cosine(10, 10, 110, hi, lo) == hi);
	assert_close(dpg_lr_warmup_cosine(60, 10, 110, hi, lo), (1e-3 + 1e-5) / 2, 1e-10);
	assert_close(dpg_lr_warmup_cosine(35, 10, 110, hi, lo),
		     1e-5 + 0.5 * (1e-3 - 1e-5) * (1 + cos(M_PI / 4)), 1e-10);
	assert_true(dpg_lr_warmup_cosine(110, 10, 110, hi, lo) == lo);
	assert_true(dpg_lr_warmup_cosine(100000, 10, 110, hi, lo) == lo);
	assert_true(dpg_lr_warmup_cosine(-3, 10, 110, hi, lo) ==
		    dpg_lr_warmup_cosine(0, 10, 110, hi, lo));
	/* non-increasing after the warm-up, strictly increasing during it */
	for (long s = 10; s < 120; s++)
		assert_true(dpg_lr_warmup_cosine(s + 1, 10, 110, hi, lo) <=
			    dpg_lr_warmup_cosine(s, 10, 110, hi, lo));
	for (long s = 0; s < 9; s++)
		assert_true(dpg_lr_warmup_cosine(s + 1, 10, 110, hi, lo) >
			    dpg_lr_warmup_cosine(s, 10, 110, hi, lo));
	/* no warm-up */
	assert_true(dpg_lr_warmup_cosine(0, 0, 100, hi, lo) == hi);
	assert_close(dpg_lr_warmup_cosine(50, 0, 100, hi, lo), (1e-3 + 1e-5) / 2, 1e-10);
	assert_true(dpg_lr_warmup_cosine(100, 0, 100, hi, lo) == lo);
	assert_true(dpg_lr_warmup_cosine(0, -5, 100, hi, lo) == hi);
	/* total <= warmup: warm-up, then lr_min */
	assert_close(dpg_lr_warmup_cosine(3, 10, 5, hi, lo), 4e-4, 1e-10);
	assert_true(dpg_lr_warmup_cosine(10, 10, 5, hi, lo) == lo);
	assert_true(dpg_lr_warmup_cosine(10, 10, 10, hi, lo) == lo);
	assert_true(dpg_lr_warmup_cosine(0, 0, 0, hi, lo) == lo);
}

/* ---------------------------------------------------------------- seed */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static void test_seed_distinct(void **state)
{
	enum { RANKS = 1024, STREAMS = 4, N = RANKS * STREAMS };
	uint64_t *seeds = calloc(2 * N, sizeof(*seeds));
	double flips = 0;

	(void)state;
	assert_non_null(seeds);
	for (int r = 0; r < RANKS; r++)
		for (int k = 0; k < STREAMS; k++) {
			seeds[r * STREAMS + k] = dpg_seed(42, r, (uint64_t)k);
			seeds[N + r * STREAMS + k] = dpg_seed(43, r, (uint64_t)k);
		}
	assert_true(dpg_seed(42, 5, 2) == seeds[5 * STREAMS + 2]);	/* pure */
	/* well mixed: neighbours differ in about half of their bits */
	for (int i = 0; i + 1 < N; i++)
		flips += __builtin_popcountll(seeds[i] ^ seeds[i + 1]);
	flips /= N - 1;
	assert_true(flips > 30.0 && flips < 34.0);
	/* no collision within a base, nor across the two bases */
	qsort(seeds, 2 * N, sizeof(*seeds), cmp_u64);
	for (int i = 0; i + 1 < 2 * N; i++)
		assert_true(seeds[i] != seeds[i + 1]);
	assert_true(dpg_seed(0, 0, 0) != 0);
	assert_true(dpg_seed(7, -1, 0) != dpg_seed(7, 0, 0));
	free(seeds);
}

/* -------------------------------------------------------- shard_batch */

enum { NS = 1000, GB = 64, DP = 4, PR = GB / DP, SPE = NS / GB };

/* the global batch of step from the dp_size-rank split, in rank order */
static void global_batch(uint64_t seed, long step, int dp_size, long *out)
{
	for (int r = 0; r < dp_size; r++)
		assert_int_equal(dpg_shard_batch(seed, NS, GB, step, r, dp_size,
						 out + (long)r * (GB / dp_size)), DPG_OK);
}

static void test_shard_epoch_cover(void **state)
{
	unsigned char seen[NS] = { 0 };
	long batch[GB];

	(void)state;
	for (long step = 0; step < SPE; step++) {
		global_batch(7, step, DP, batch);
		for (int k = 0; k < GB; k++) {
			assert_true(batch[k] >= 0 && batch[k] < NS);
			assert_int_equal(seen[batch[k]], 0);	/* once per epoch */
			seen[batch[k]] = 1;
		}
	}
	int count = 0;

	for (int i = 0; i < NS; i++)
		count += seen[i];
	assert_int_equal(count, SPE * GB);	/* the tail of 40 is dropped */
}

static void test_shard_ranks_partition(void **state)
{
	long whole[GB], split[GB], again[PR];

	(void)state;
	for (long step = 0; step < 2 * SPE + 3; step += 5) {
		/* the global batch does not depend on how it is split */
		global_batch(11, step, 1, whole);
		for (int dp = 2; dp <= 64; dp *= 2) {
			global_batch(11, step, dp, split);
			assert_memory_equal(whole, split, sizeof(whole));
		}
		/* so the ranks' parts are disjoint and their union is it */
		global_batch(11, step, DP, split);
		for (int a = 0; a < GB; a++)
			for (int b = a + 1; b < GB; b++)
				assert_true(split[a] != split[b]);
		assert_int_equal(dpg_shard_batch(11, NS, GB, step, 2, DP, again), DPG_OK);
		assert_memory_equal(again, split + 2 * PR, sizeof(again));	/* same args */
	}
	/* shuffled: not the identity */
	global_batch(11, 0, 1, whole);
	int ordered = 1;

	for (int k = 0; k < GB; k++)
		ordered &= whole[k] == k;
	assert_false(ordered);
}

static void test_shard_epochs_differ(void **state)
{
	long e0[GB], e1[GB], e2[GB], s2[GB];

	(void)state;
	global_batch(3, 0, DP, e0);
	global_batch(3, SPE, DP, e1);		/* first batch of epoch 1 */
	global_batch(3, 2 * SPE, DP, e2);
	assert_memory_not_equal(e0, e1, sizeof(e0));
	assert_memory_not_equal(e1, e2, sizeof(e1));
	assert_memory_not_equal(e0, e2, sizeof(e0));
	global_batch(4, 0, DP, s2);		/* another seed */
	assert_memory_not_equal(e0, s2, sizeof(e0));
	/* global_batch == n_samples: one step per epoch, each a permutation */
	long all[NS];
	unsigned char seen[NS] = { 0 };

	assert_int_equal(dpg_shard_batch(3, NS, NS, 5, 0, 1, all), DPG_OK);
	for (int i = 0; i < NS; i++) {
		assert_true(all[i] >= 0 && all[i] < NS && !seen[all[i]]);
		seen[all[i]] = 1;
	}
}

static void test_shard_invalid(void **state)
{
	long idx[NS];

	(void)state;
	assert_int_equal(dpg_shard_batch(1, NS, GB, 0, 0, 0, idx), DPG_ERR_INVALID);
	assert_int_equal(dpg_shard_batch(1, NS, GB, 0, 0, -2, idx), DPG_ERR_INVALID);
	assert_int_equal(dpg_shard_batch(1, NS, GB, 0, -1, DP, idx), DPG_ERR_INVALID);
	assert_int_equal(dpg_shard_batch(1, NS, GB, 0, DP, DP, idx), DPG_ERR_INVALID);
	assert_int_equal(dpg_shard_batch(1, NS, 66, 0, 0, DP, idx), DPG_ERR_INVALID);
	assert_int_equal(dpg_shard_batch(1, NS, NS + 4, 0, 0, DP, idx), DPG_ERR_INVALID);
	assert_int_equal(dpg_shard_batch(1, NS, GB, -1, 0, DP, idx), DPG_ERR_INVALID);
	assert_int_equal(dpg_shard_batch(1, NS, GB, 0, 0, DP, NULL), DPG_ERR_INVALID);
	assert_int_equal(dpg_shard_batch(1, NS, 0, 0, 0, DP, idx), DPG_ERR_INVALID);
	assert_int_equal(dpg_shard_batch(1, 0, GB, 0, 0, DP, idx), DPG_ERR_INVALID);
	assert_int_equal(dpg_shard_batch(1, -5, GB, 0, 0, DP, idx), DPG_ERR_INVALID);
	/* the edges that are valid */
	assert_int_equal(dpg_shard_batch(1, NS, GB, 0, DP - 1, DP, idx), DPG_OK);
	assert_int_equal(dpg_shard_batch(1, GB, GB, 1000000, 0, DP, idx), DPG_OK);
	assert_int_equal(dpg_shard_batch(1, 1, 1, 0, 0, 1, idx), DPG_OK);
	assert_int_equal(idx[0], 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_adamw_reference),
		cmocka_unit_test(test_adamw_moves),
		cmocka_unit_test(test_adamw_hand),
		cmocka_unit_test(test_sgd_reference),
		cmocka_unit_test(test_sgd_hand),
		cmocka_unit_test(test_loop_bit_identical),
		cmocka_unit_test(test_loop_misaligned),
		cmocka_unit_test(test_variants_bit_identical),
		cmocka_unit_test(test_variant_dispatched),
		cmocka_unit_test(test_sumsq_exact),
		cmocka_unit_test(test_sumsq_order),
		cmocka_unit_test(test_bf16_round_trip),
		cmocka_unit_test(test_bf16_rounding),
		cmocka_unit_test(test_lr_schedule),
		cmocka_unit_test(test_seed_distinct),
		cmocka_unit_test(test_shard_epoch_cover),
		cmocka_unit_test(test_shard_ranks_partition),
		cmocka_unit_test(test_shard_epochs_differ),
		cmocka_unit_test(test_shard_invalid),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
