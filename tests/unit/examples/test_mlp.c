/* SPDX-License-Identifier: BSD-3-Clause */
/* test_mlp.c - tests of examples/mlp.h, the model of examples/train: forward against a naive
 * reference, finite-difference gradients of every tensor, accumulation, dataset and init determinism, SGD learns. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp.h"

/* ------------------------------------------------ a model with its buffers */

struct model {
	mlp_shape_t s;
	float *p[MLP_NTENSORS];
	float *g[MLP_NTENSORS];
};

static void model_init(struct model *m, const mlp_shape_t *s, uint64_t seed)
{
	m->s = *s;
	for (int t = 0; t < MLP_NTENSORS; t++) {
		size_t n = mlp_numel(s, t);
		m->p[t] = malloc(n * sizeof(float));
		m->g[t] = calloc(n, sizeof(float));
		assert_non_null(m->p[t]);
		assert_non_null(m->g[t]);
		mlp_init_tensor(s, seed, t, m->p[t]);
	}
}

static void model_zero_grad(struct model *m)
{
	for (int t = 0; t < MLP_NTENSORS; t++)
		memset(m->g[t], 0, mlp_numel(&m->s, t) * sizeof(float));
}

static void model_free(struct model *m)
{
	for (int t = 0; t < MLP_NTENSORS; t++) {
		free(m->p[t]);
		free(m->g[t]);
	}
}

static float model_fb(struct model *m, mlp_work_t *w)
{
	return mlp_forward_backward(w, (const float *const *)m->p, m->g);
}

static float model_loss(struct model *m, mlp_work_t *w)
{
	return mlp_forward_loss(w, (const float *const *)m->p);
}

/* Non-zero biases, so that a bias mistake in forward shows. */
static void model_perturb_biases(struct model *m, uint64_t seed)
{
	for (int t = 1; t < MLP_NTENSORS; t += 2)
		for (size_t i = 0; i < mlp_numel(&m->s, t); i++)
			m->p[t][i] = (float)(0.3 * mlp_normal(seed, 0xb1a5, (uint64_t)t, i));
}

static void load_range(const mlp_data_t *d, mlp_work_t *w, long first, int n)
{
	long idx[512];

	assert_true(n <= 512);
	for (int i = 0; i < n; i++)
		idx[i] = first + i;
	mlp_load_batch(d, w, idx, n);
}

/* ------------------------------------------------ shapes */

static void test_shapes(void **state)
{
	(void)state;
	mlp_shape_t s = mlp_default_shape();

	assert_int_equal(mlp_numel(&s, 0), 64 * 32);
	assert_int_equal(mlp_numel(&s, 1), 64);
	assert_int_equal(mlp_numel(&s, 2), 64 * 64);
	assert_int_equal(mlp_numel(&s, 3), 64);
	assert_int_equal(mlp_numel(&s, 4), 10 * 64);
	assert_int_equal(mlp_numel(&s, 5), 10);
	assert_int_equal(mlp_total_numel(&s), 2048 + 64 + 4096 + 64 + 640 + 10);
	for (int t = 0; t < MLP_NTENSORS; t++) {
		assert_int_equal(mlp_unit_of(t), t / 2);
		assert_true(strlen(mlp_tensor_name(t)) > 0 && strlen(mlp_tensor_name(t)) < 64);
	}
	assert_string_not_equal(mlp_tensor_name(0), mlp_tensor_name(2));
}

/* ------------------------------------------------ forward vs a naive reference */

/* The model written out plainly in double from the definition. */
static double reference_loss(const struct model *m, const mlp_work_t *w)
{
	const mlp_shape_t *s = &m->s;
	double total = 0.0;

	for (int i = 0; i < w->n; i++) {
		double h1[256], h2[256], z[64], mx = -INFINITY, se = 0.0;
		const float *x = w->x + (size_t)i * s->d;

		for (int o = 0; o < s->h; o++) {
			double a = m->p[1][o];
			for (int k = 0; k < s->d; k++)
				a += (double)m->p[0][o * s->d + k] * x[k];
			h1[o] = tanh(a);
		}
		for (int o = 0; o < s->h; o++) {
			double a = m->p[3][o];
			for (int k = 0; k < s->h; k++)
				a += (double)m->p[2][o * s->h + k] * h1[k];
			h2[o] = tanh(a);
		}
		for (int o = 0; o < s->c; o++) {
			double a = m->p[5][o];
			for (int k = 0; k < s->h; k++)
				a += (double)m->p[4][o * s->h + k] * h2[k];
			z[o] = a;
			mx = a > mx ? a : mx;
		}
		for (int o = 0; o < s->c; o++)
			se += exp(z[o] - mx);
		total += mx + log(se) - z[w->y[i]];
	}
	return total / w->n;
}

static void test_forward_matches_reference(void **state)
{
	(void)state;
	mlp_shape_t s = mlp_default_shape();
	struct model m;
	mlp_data_t d;
	mlp_work_t w;

	model_init(&m, &s, 11);
	model_perturb_biases(&m, 12);
	assert_int_equal(mlp_data_init(&d, &s, 5), 0);
	assert_int_equal(mlp_work_init(&w, &s, 16), 0);
	load_range(&d, &w, 100, 16);
	float loss = model_loss(&m, &w);
	double ref = reference_loss(&m, &w);
	assert_true(fabs(loss - ref) <= 1e-5 * fabs(ref));
	assert_true(fabs(w.loss_sum / 16 - ref) <= 1e-5 * fabs(ref));
	/* an untrained model of 10 classes: near ln 10 */
	assert_true(loss > 1.5f && loss < 3.5f);
	mlp_work_free(&w);
	mlp_data_free(&d);
	model_free(&m);
}

/* ------------------------------------------------ finite differences */

struct fd_result {
	int checked, significant, bad;
	double worst_rel;
};

/* Compare analytic gradient an[] of tensor t with central differences of
 * the loss at n_elems elements (the largest |an| and hash-chosen others).
 * fp32 model, double loss: eps 1e-2 on tanh keeps truncation ~1e-4
 * relative; rounding noise of the loss is ~1e-7 absolute, so /2e-2 gives
 * ~1e-5: tolerance 1e-2 relative + 2e-5 absolute. */
static struct fd_result fd_check(struct model *m, mlp_work_t *w, int t, const float *an,
				 int n_elems, int verbose)
{
	const double tol_rel = 1e-2, tol_abs = 2e-5;
	size_t n = mlp_numel(&m->s, t), imax = 0;
	struct fd_result r = { 0, 0, 0, 0.0 };

	for (size_t i = 1; i < n; i++)
		if (fabsf(an[i]) > fabsf(an[imax]))
			imax = i;
	for (int e = 0; e < n_elems; e++) {
		size_t i = e == 0 ? imax : (size_t)(mlp_hash4(77, (uint64_t)t, (uint64_t)e, 0) % n);
		float orig = m->p[t][i];
		float up = orig + 1e-2f, dn = orig - 1e-2f;

		m->p[t][i] = up;
		(void)model_loss(m, w);
		double sum_up = w->loss_sum;
		m->p[t][i] = dn;
		(void)model_loss(m, w);
		double sum_dn = w->loss_sum;
		m->p[t][i] = orig;
		double fd = (sum_up - sum_dn) / w->n / ((double)up - (double)dn);
		double diff = fabs(fd - an[i]);
		double scale = fmax(fabs(fd), fabs(an[i]));
		r.checked++;
		if (scale > 20 * tol_abs)
			r.significant++;
		if (diff > tol_rel * scale + tol_abs) {
			r.bad++;
			if (verbose && r.bad <= 3)
				print_message("  %s[%zu]: analytic %.6g, finite difference %.6g\n",
					      mlp_tensor_name(t), i, an[i], fd);
		}
		if (scale > 20 * tol_abs && diff / scale > r.worst_rel)
			r.worst_rel = diff / scale;
	}
	return r;
}

static void test_gradients_finite_differences(void **state)
{
	(void)state;
	mlp_shape_t s = mlp_default_shape();
	struct model m;
	mlp_data_t d;
	mlp_work_t w;

	model_init(&m, &s, 21);
	model_perturb_biases(&m, 22);
	assert_int_equal(mlp_data_init(&d, &s, 9), 0);
	assert_int_equal(mlp_work_init(&w, &s, 8), 0);
	load_range(&d, &w, 0, 8);
	model_zero_grad(&m);
	(void)model_fb(&m, &w);
	for (int t = 0; t < MLP_NTENSORS; t++) {
		int want = (int)(mlp_numel(&s, t) < 24 ? mlp_numel(&s, t) : 24);
		struct fd_result r = fd_check(&m, &w, t, m.g[t], want, 1);
		print_message("%s: %d checked, %d significant, worst relative error %.2e\n",
			      mlp_tensor_name(t), r.checked, r.significant, r.worst_rel);
		assert_int_equal(r.bad, 0);
		/* the check must not be vacuous: most elements carry signal */
		assert_true(r.significant >= r.checked / 2);
	}
	mlp_work_free(&w);
	mlp_data_free(&d);
	model_free(&m);
}

/* The checker has power: a gradient 5 % off, or one element wrong, fails. */
static void test_finite_differences_catch_errors(void **state)
{
	(void)state;
	mlp_shape_t s = mlp_default_shape();
	struct model m;
	mlp_data_t d;
	mlp_work_t w;

	model_init(&m, &s, 21);
	model_perturb_biases(&m, 22);
	assert_int_equal(mlp_data_init(&d, &s, 9), 0);
	assert_int_equal(mlp_work_init(&w, &s, 8), 0);
	load_range(&d, &w, 0, 8);
	model_zero_grad(&m);
	(void)model_fb(&m, &w);
	for (int t = 0; t < MLP_NTENSORS; t++) {
		size_t n = mlp_numel(&s, t);
		float *bad = malloc(n * sizeof(float));
		assert_non_null(bad);
		for (size_t i = 0; i < n; i++)
			bad[i] = 1.05f * m.g[t][i];
		struct fd_result r = fd_check(&m, &w, t, bad, 8, 0);
		assert_true(r.bad > 0);
		free(bad);
	}
	mlp_work_free(&w);
	mlp_data_free(&d);
	model_free(&m);
}

/* ------------------------------------------------ accumulation */

static void test_backward_adds_into_gradients(void **state)
{
	(void)state;
	mlp_shape_t s = mlp_default_shape();
	struct model m;
	mlp_data_t d;
	mlp_work_t w;
	float *once[MLP_NTENSORS];

	model_init(&m, &s, 31);
	assert_int_equal(mlp_data_init(&d, &s, 3), 0);
	assert_int_equal(mlp_work_init(&w, &s, 8), 0);
	load_range(&d, &w, 40, 8);
	model_zero_grad(&m);
	float l1 = model_fb(&m, &w);
	for (int t = 0; t < MLP_NTENSORS; t++) {
		size_t n = mlp_numel(&s, t);
		once[t] = malloc(n * sizeof(float));
		assert_non_null(once[t]);
		memcpy(once[t], m.g[t], n * sizeof(float));
	}
	/* twice: exactly double (g + g is exact in binary floating point) */
	float l2 = model_fb(&m, &w);
	assert_true(l1 == l2);
	for (int t = 0; t < MLP_NTENSORS; t++)
		for (size_t i = 0; i < mlp_numel(&s, t); i++)
			assert_true(m.g[t][i] == 2.0f * once[t][i]);
	/* existing contents are kept, not overwritten */
	for (int t = 0; t < MLP_NTENSORS; t++)
		for (size_t i = 0; i < mlp_numel(&s, t); i++)
			m.g[t][i] = 0.5f;
	(void)model_fb(&m, &w);
	for (int t = 0; t < MLP_NTENSORS; t++)
		for (size_t i = 0; i < mlp_numel(&s, t); i++)
			assert_true(m.g[t][i] == 0.5f + once[t][i]);
	/* a non-zero gradient somewhere in every tensor */
	for (int t = 0; t < MLP_NTENSORS; t++) {
		double norm = 0.0;
		for (size_t i = 0; i < mlp_numel(&s, t); i++)
			norm += (double)once[t][i] * once[t][i];
		assert_true(norm > 0.0);
		free(once[t]);
	}
	mlp_work_free(&w);
	mlp_data_free(&d);
	model_free(&m);
}

/* Two micro-batches of 4 accumulated with grad_scale 1/2 give the gradient
 * of the mean over the 8 samples (what accumulation over micro-steps must
 * reproduce), and the layer-by-layer API equals mlp_forward_backward. */
static void test_micro_batches_and_scale(void **state)
{
	(void)state;
	mlp_shape_t s = mlp_default_shape();
	struct model m;
	mlp_data_t d;
	mlp_work_t w8, w4;
	float *full[MLP_NTENSORS];

	model_init(&m, &s, 41);
	model_perturb_biases(&m, 42);
	assert_int_equal(mlp_data_init(&d, &s, 4), 0);
	assert_int_equal(mlp_work_init(&w8, &s, 8), 0);
	assert_int_equal(mlp_work_init(&w4, &s, 4), 0);
	load_range(&d, &w8, 200, 8);
	model_zero_grad(&m);
	float l8 = model_fb(&m, &w8);
	for (int t = 0; t < MLP_NTENSORS; t++) {
		size_t n = mlp_numel(&s, t);
		full[t] = malloc(n * sizeof(float));
		assert_non_null(full[t]);
		memcpy(full[t], m.g[t], n * sizeof(float));
	}
	model_zero_grad(&m);
	double lsum = 0.0;
	for (int half = 0; half < 2; half++) {
		load_range(&d, &w4, 200 + 4 * half, 4);
		for (int u = 0; u < MLP_NUNITS; u++)
			mlp_forward_unit(&w4, u, m.p[2 * u], m.p[2 * u + 1]);
		lsum += mlp_loss(&w4, 0.5f);
		for (int u = MLP_NUNITS - 1; u >= 0; u--)
			mlp_backward_unit(&w4, u, m.p[2 * u], m.g[2 * u], m.g[2 * u + 1]);
	}
	assert_true(fabs(lsum / 2 - l8) <= 1e-6 * fabs(l8));
	for (int t = 0; t < MLP_NTENSORS; t++) {
		for (size_t i = 0; i < mlp_numel(&s, t); i++)
			assert_true(fabsf(m.g[t][i] - full[t][i]) <= 1e-5f * fabsf(full[t][i]) + 1e-8f);
		free(full[t]);
	}
	mlp_work_free(&w4);
	mlp_work_free(&w8);
	mlp_data_free(&d);
	model_free(&m);
}

/* ------------------------------------------------ dataset and init */

static void test_dataset_deterministic(void **state)
{
	(void)state;
	mlp_shape_t s = mlp_default_shape();
	mlp_data_t a, b, c;
	float xa[64], xb[64];
	int count[10] = { 0 };
	double mean = 0.0, sq = 0.0;
	const int n = 4000;

	assert_int_equal(mlp_data_init(&a, &s, 1234), 0);
	assert_int_equal(mlp_data_init(&b, &s, 1234), 0);
	assert_int_equal(mlp_data_init(&c, &s, 1235), 0);
	/* the same (seed, i) gives the same sample, in any order of access */
	for (long i = 0; i < 50; i++) {
		int ya = mlp_data_sample(&a, i, xa);
		int yb = mlp_data_sample(&b, 49 - i, xb);
		(void)yb;
		yb = mlp_data_sample(&b, i, xb);
		assert_int_equal(ya, yb);
		assert_memory_equal(xa, xb, (size_t)s.d * sizeof(float));
	}
	/* a far index and a batch load agree with single samples */
	int y_far = mlp_data_sample(&a, 123456789L, xa);
	assert_int_equal(mlp_data_sample(&b, 123456789L, xb), y_far);
	assert_memory_equal(xa, xb, (size_t)s.d * sizeof(float));
	/* another seed gives other data */
	int same = 0;
	for (long i = 0; i < 50; i++) {
		mlp_data_sample(&a, i, xa);
		mlp_data_sample(&c, i, xb);
		same += memcmp(xa, xb, (size_t)s.d * sizeof(float)) == 0;
	}
	assert_int_equal(same, 0);
	/* inputs ~ N(0, 1); every class present, none dominant */
	for (long i = 0; i < n; i++) {
		int y = mlp_data_sample(&a, i, xa);
		assert_true(y >= 0 && y < s.c);
		count[y]++;
		for (int j = 0; j < s.d; j++) {
			mean += xa[j];
			sq += (double)xa[j] * xa[j];
		}
	}
	mean /= (double)n * s.d;
	sq /= (double)n * s.d;
	assert_true(fabs(mean) < 0.02);
	assert_true(fabs(sq - 1.0) < 0.03);
	for (int k = 0; k < s.c; k++) {
		assert_true(count[k] > n / 100);
		assert_true(count[k] < n / 3);
	}
	mlp_data_free(&a);
	mlp_data_free(&b);
	mlp_data_free(&c);
}

static void test_init_deterministic(void **state)
{
	(void)state;
	mlp_shape_t s = mlp_default_shape();

	for (int t = 0; t < MLP_NTENSORS; t++) {
		size_t n = mlp_numel(&s, t);
		float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
		float *c = malloc(n * sizeof(float));
		int rows, cols;
		assert_true(a && b && c);
		mlp_init_tensor(&s, 7, t, a);
		mlp_init_tensor(&s, 7, t, b);
		mlp_init_tensor(&s, 8, t, c);
		assert_memory_equal(a, b, n * sizeof(float));
		mlp_tensor_dims(&s, t, &rows, &cols);
		if (cols == 1) {
			for (size_t i = 0; i < n; i++)
				assert_true(a[i] == 0.0f);
		} else {
			float lim = (float)sqrt(6.0 / (rows + cols));
			double sq = 0.0;
			assert_memory_not_equal(a, c, n * sizeof(float));
			for (size_t i = 0; i < n; i++) {
				assert_true(fabsf(a[i]) <= lim);
				sq += (double)a[i] * a[i];
			}
			/* uniform in +-lim: variance lim^2 / 3 */
			assert_true(fabs(sq / (double)n - lim * lim / 3.0) < 0.15 * lim * lim / 3.0);
		}
		free(a); free(b); free(c);
	}
}

/* ------------------------------------------------ it learns */

static double eval_loss(struct model *m, const mlp_data_t *d, mlp_work_t *w, double *acc)
{
	double sum = 0.0;
	int right = 0, total = 0;

	for (int b = 0; b < 4; b++) {
		load_range(d, w, 1000000 + 256L * b, 256);
		(void)model_loss(m, w);
		sum += w->loss_sum;
		for (int i = 0; i < w->n; i++) {
			const float *z = w->z + (size_t)i * m->s.c;
			int best = 0;
			for (int k = 1; k < m->s.c; k++)
				best = z[k] > z[best] ? k : best;
			right += best == w->y[i];
		}
		total += w->n;
	}
	*acc = (double)right / total;
	return sum / total;
}

static void test_sgd_learns(void **state)
{
	(void)state;
	mlp_shape_t s = mlp_default_shape();
	struct model m;
	mlp_data_t d;
	mlp_work_t w, we;
	const int steps = 400, batch = 32;
	const float lr = 0.2f;
	double acc0, acc1;

	model_init(&m, &s, 51);
	assert_int_equal(mlp_data_init(&d, &s, 52), 0);
	assert_int_equal(mlp_work_init(&w, &s, batch), 0);
	assert_int_equal(mlp_work_init(&we, &s, 256), 0);
	double before = eval_loss(&m, &d, &we, &acc0);
	for (int step = 0; step < steps; step++) {
		long idx[32];
		for (int i = 0; i < batch; i++)	/* a dataset of 8192 samples */
			idx[i] = (long)(mlp_hash4(53, (uint64_t)step, (uint64_t)i, 0) % 8192);
		mlp_load_batch(&d, &w, idx, batch);
		model_zero_grad(&m);
		(void)model_fb(&m, &w);
		for (int t = 0; t < MLP_NTENSORS; t++)
			for (size_t i = 0; i < mlp_numel(&s, t); i++)
				m.p[t][i] -= lr * m.g[t][i];
	}
	double after = eval_loss(&m, &d, &we, &acc1);
	print_message("held-out loss %.4f -> %.4f, accuracy %.3f -> %.3f after %d SGD steps\n",
		      before, after, acc0, acc1, steps);
	assert_true(after < 0.5 * before);
	assert_true(acc1 > 0.6);
	mlp_work_free(&we);
	mlp_work_free(&w);
	mlp_data_free(&d);
	model_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shapes),
		cmocka_unit_test(test_forward_matches_reference),
		cmocka_unit_test(test_gradients_finite_differences),
		cmocka_unit_test(test_finite_differences_catch_errors),
		cmocka_unit_test(test_backward_adds_into_gradients),
		cmocka_unit_test(test_micro_batches_and_scale),
		cmocka_unit_test(test_dataset_deterministic),
		cmocka_unit_test(test_init_deterministic),
		cmocka_unit_test(test_sgd_learns),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
