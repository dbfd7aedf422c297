/* SPDX-License-Identifier: BSD-3-Clause */
/* test_mlp_gpu.c - examples/train's device model (examples/mlp_cuda.cu) against the host loops (mlp.h):
 *
 *  1. kernels, on the same inputs as the host functions of mlp_math.h: the
 *     tanh derivative, the bias gradient (column sums) and the bf16
 *     conversion bit for bit (no libm, same double operations, --fmad=false);
 *     bias + activation and the loss within 1 float ulp (the identity
 *     activation bit for bit), the per-sample loss within 1e-14 relative:
 *     CUDA's tanh, exp and log are within 1-2 double ulps of glibc's, which
 *     rounding to float hides except near a tie.
 *  2. the module's forward, loss and backward (cuBLAS fp32 products) against
 *     mlp_forward_backward (double sums) on a micro-batch of the dataset:
 *     loss within 1e-5 relative, each gradient tensor within 1e-4 of its
 *     largest magnitude.  A sum of k <= 64 fp32 products is off by at most
 *     k x 2^-24 ~ 4e-6 of the sum of magnitudes; three layers and the
 *     softmax carry that to ~1e-5 of the largest gradient, 1e-4 leaves room.
 *
 *   test_mlp_gpu          exit 0 passed, 1 a check failed, 77 no GPU (skip) */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cuda_runtime.h>
#pragma GCC diagnostic pop

#include "mlp.h"
#include "mlp_cuda.h"

static int g_failed;

#define CHK(cond, ...)                                                              \
	do {                                                                        \
		if (!(cond)) {                                                      \
			fprintf(stderr, "line %d: check '%s' failed: ", __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                               \
			fprintf(stderr, "\n");                                      \
			g_failed++;                                                 \
		}                                                                   \
	} while (0)

#define CU(call)                                                                    \
	do {                                                                        \
		cudaError_t e_ = (cudaError_t)(call);                               \
		if (e_ != cudaSuccess) {                                            \
			fprintf(stderr, "line %d: %s: %s\n", __LINE__, #call,       \
				cudaGetErrorString(e_));                            \
			exit(1);                                                    \
		}                                                                   \
	} while (0)

/* Distance in units in the last place between two finite floats. */
static long ulps(float a, float b)
{
	int32_t ia, ib;

	memcpy(&ia, &a, 4);
	memcpy(&ib, &b, 4);
	if (ia < 0)
		ia = INT32_MIN - ia;
	if (ib < 0)
		ib = INT32_MIN - ib;
	return labs((long)ia - (long)ib);
}

static float rnd(uint64_t i, double scale)
{
	return (float)(scale * (2.0 * mlp_unit_uniform(mlp_hash4(7, 0x7e57, i, 0)) - 1.0));
}

static void *dev_copy(const void *host, size_t bytes)
{
	void *d;

	CU(cudaMalloc(&d, bytes));
	CU(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice));
	return d;
}

static void to_host(void *host, const void *dev, size_t bytes)
{
	CU(cudaDeviceSynchronize());
	CU(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
}

enum { N = 37, NO = 64, C = 10 };

static void test_bias_act(void)
{
	static float pre[N * NO], b[NO], host[N * NO], got[N * NO];

	for (int act = 0; act <= 1; act++) {
		long worst = 0;

		for (int i = 0; i < N * NO; i++)
			pre[i] = rnd((uint64_t)i, 4.0);
		for (int o = 0; o < NO; o++)
			b[o] = rnd(100000u + (uint64_t)o, 1.0);
		for (int i = 0; i < N * NO; i++)
			host[i] = mlp_act((double)b[i % NO] + (double)pre[i], act);
		float *dp = dev_copy(pre, sizeof(pre)), *db = dev_copy(b, sizeof(b));
		CU(mlp_cuda_bias_act(dp, db, N, NO, act));
		to_host(got, dp, sizeof(got));
		for (int i = 0; i < N * NO; i++)
			worst = ulps(host[i], got[i]) > worst ? ulps(host[i], got[i]) : worst;
		CHK(worst <= act, "bias_act (act %d): %ld ulps", act, worst);
		printf("bias_act act=%d: worst %ld ulp\n", act, worst);
		cudaFree(dp);
		cudaFree(db);
	}
}

static void test_xent(void)
{
	static float z[N * C], g_host[N * C], g_got[N * C];
	static double l_host[N], l_got[N];
	static int y[N];
	long worst = 0;
	double worst_rel = 0.0;

	for (int i = 0; i < N * C; i++)
		z[i] = rnd(200000u + (uint64_t)i, 6.0);
	for (int i = 0; i < N; i++) {
		y[i] = i % C;
		l_host[i] = mlp_xent(z + i * C, C, y[i], 1.0 / N, g_host + i * C);
	}
	float *dz = dev_copy(z, sizeof(z)), *dg;
	int *dy = dev_copy(y, sizeof(y));
	double *dl;
	CU(cudaMalloc((void **)&dg, sizeof(g_got)));
	CU(cudaMalloc((void **)&dl, sizeof(l_got)));
	CU(mlp_cuda_xent(dz, dy, N, C, 1.0 / N, dg, dl));
	to_host(g_got, dg, sizeof(g_got));
	to_host(l_got, dl, sizeof(l_got));
	for (int i = 0; i < N * C; i++)
		worst = ulps(g_host[i], g_got[i]) > worst ? ulps(g_host[i], g_got[i]) : worst;
	for (int i = 0; i < N; i++) {
		double r = fabs(l_host[i] - l_got[i]) / fabs(l_host[i]);
		worst_rel = r > worst_rel ? r : worst_rel;
	}
	CHK(worst <= 1, "xent gradient: %ld ulps", worst);
	CHK(worst_rel <= 1e-14, "xent loss: relative %g", worst_rel);
	printf("xent: gradient worst %ld ulp, loss worst relative %.2g\n", worst, worst_rel);
	cudaFree(dz);
	cudaFree(dy);
	cudaFree(dg);
	cudaFree(dl);
}

/* The column sums, the tanh derivative and bf16: bit for bit. */
static void test_exact(void)
{
	static float g[N * NO], gb_host[NO], gb_got[NO], a[N * NO], gin_host[N * NO],
		gin_got[N * NO], f_host[N * NO], f_got[N * NO];
	static uint16_t h[N * NO];

	for (int i = 0; i < N * NO; i++) {
		g[i] = rnd(300000u + (uint64_t)i, 0.1);
		a[i] = rnd(400000u + (uint64_t)i, 1.0);
		h[i] = (uint16_t)mlp_hash4(9, 1, (uint64_t)i, 2);
		gin_host[i] = mlp_dtanh((double)g[i], a[i]);
		f_host[i] = mlp_bf16_to_f32(h[i]);
	}
	for (int o = 0; o < NO; o++) {
		gb_host[o] = rnd(500000u + (uint64_t)o, 1.0);
		gb_got[o] = gb_host[o];
		gb_host[o] += (float)mlp_col_sum(g, N, NO, o);
	}
	float *dg = dev_copy(g, sizeof(g)), *da = dev_copy(a, sizeof(a));
	float *dgb = dev_copy(gb_got, sizeof(gb_got)), *dgin, *df;
	uint16_t *dh = dev_copy(h, sizeof(h));
	CU(cudaMalloc((void **)&dgin, sizeof(gin_got)));
	CU(cudaMalloc((void **)&df, sizeof(f_got)));
	CU(mlp_cuda_col_sum_add(dg, N, NO, dgb));
	CU(mlp_cuda_dtanh(dg, da, (size_t)N * NO, dgin));
	CU(mlp_cuda_bf16_to_f32(dh, df, (size_t)N * NO));
	to_host(gb_got, dgb, sizeof(gb_got));
	to_host(gin_got, dgin, sizeof(gin_got));
	to_host(f_got, df, sizeof(f_got));
	CHK(memcmp(gb_host, gb_got, sizeof(gb_got)) == 0, "column sums differ from the host's");
	CHK(memcmp(gin_host, gin_got, sizeof(gin_got)) == 0, "tanh derivative differs");
	CHK(memcmp(f_host, f_got, sizeof(f_got)) == 0, "bf16 conversion differs");
	printf("col_sum, dtanh, bf16: compared bit for bit\n");
	cudaFree(dg); cudaFree(da); cudaFree(dgb); cudaFree(dgin); cudaFree(df); cudaFree(dh);
}

/* Largest |x| of a tensor and largest |x - y|. */
static void max_diff(const float *x, const float *y, size_t n, double *mag, double *diff)
{
	*mag = *diff = 0.0;
	for (size_t i = 0; i < n; i++) {
		*mag = fabs(x[i]) > *mag ? fabs(x[i]) : *mag;
		*diff = fabs((double)x[i] - y[i]) > *diff ? fabs((double)x[i] - y[i]) : *diff;
	}
}

struct both {
	mlp_shape_t s;
	float *p[MLP_NTENSORS], *g[MLP_NTENSORS];	/* host */
	float *dp[MLP_NTENSORS], *dg[MLP_NTENSORS];	/* device */
};

static void both_init(struct both *m)
{
	m->s = mlp_default_shape();
	for (int t = 0; t < MLP_NTENSORS; t++) {
		size_t bytes = mlp_numel(&m->s, t) * sizeof(float);

		m->p[t] = malloc(bytes);
		m->g[t] = calloc(1, bytes);
		if (m->p[t] == NULL || m->g[t] == NULL)
			exit(1);
		mlp_init_tensor(&m->s, 11, t, m->p[t]);
		for (size_t i = 0; t % 2 && i < mlp_numel(&m->s, t); i++)
			m->p[t][i] = rnd(600000u + i, 0.2);	/* biases not zero */
		m->dp[t] = dev_copy(m->p[t], bytes);
		m->dg[t] = dev_copy(m->g[t], bytes);
	}
}

static void test_model(void)
{
	const struct mlp_dev_ops *ops = mlp_dev_v1();
	struct both m;
	mlp_data_t data;
	mlp_work_t w;
	struct mlp_dev *dev = NULL;
	long idx[N];
	char msg[256];
	double dsum = 0.0;

	both_init(&m);
	if (mlp_data_init(&data, &m.s, 5) != 0 || mlp_work_init(&w, &m.s, N) != 0)
		exit(1);
	for (int i = 0; i < N; i++)
		idx[i] = 3 * i + 1;
	mlp_load_batch(&data, &w, idx, N);
	float host_loss = mlp_forward_backward(&w, (const float *const *)m.p, m.g);

	CHK(ops->abi == MLP_DEV_ABI, "module ABI %u", (unsigned)ops->abi);
	if (ops->create(&m.s, N, m.dp[0], &dev, msg, sizeof(msg)) != 0) {
		fprintf(stderr, "create: %s\n", msg);
		exit(1);
	}
	int rc = ops->load(dev, w.x, w.y, N);
	for (int u = 0; rc == 0 && u < MLP_NUNITS; u++)
		rc = ops->forward_unit(dev, u, m.dp[2 * u], m.dp[2 * u + 1], 0);
	rc = rc ? rc : ops->loss(dev, 1.0f, &dsum);
	for (int u = MLP_NUNITS - 1; rc == 0 && u >= 0; u--)
		rc = ops->backward_unit(dev, u, m.dp[2 * u], 0, m.dg[2 * u], m.dg[2 * u + 1]);
	CHK(rc == 0, "device model: %s", ops->error(dev));
	double rel = fabs(dsum / N - host_loss) / fabs(host_loss);
	CHK(rel <= 1e-5, "loss %.9g on the GPU, %.9g on the host", dsum / N, (double)host_loss);
	printf("model: loss %.9f (GPU) vs %.9f (host), relative %.2g\n", dsum / N,
	       (double)host_loss, rel);
	for (int t = 0; t < MLP_NTENSORS; t++) {
		size_t n = mlp_numel(&m.s, t);
		float *got = malloc(n * sizeof(float));
		double mag, diff;

		if (got == NULL)
			exit(1);
		to_host(got, m.dg[t], n * sizeof(float));
		max_diff(m.g[t], got, n, &mag, &diff);
		CHK(diff <= 1e-4 * mag, "gradient of %s: off by %g, largest %g", mlp_tensor_name(t),
		    diff, mag);
		printf("model: gradient of %-9s off by %.3g of its largest %.3g\n",
		       mlp_tensor_name(t), diff / mag, mag);
		free(got);
	}
	ops->destroy(dev);
	mlp_work_free(&w);
	mlp_data_free(&data);
}

int main(void)
{
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
		printf("SKIPPED: no usable GPU (cudaGetDeviceCount: %d)\n", n);
		return 77;
	}
	CU(cudaSetDevice(0));
	test_bias_act();
	test_xent();
	test_exact();
	test_model();
	if (g_failed)
		fprintf(stderr, "test_mlp_gpu: %d check(s) failed\n", g_failed);
	else
		printf("test_mlp_gpu: all passed\n");
	return g_failed ? 1 : 0;
}
