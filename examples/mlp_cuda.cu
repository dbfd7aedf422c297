/* SPDX-License-Identifier: BSD-3-Clause */
/* mlp_cuda.cu - examples/train's device module mlp-cuda.so: the MLP's forward and backward on the GPU,
 * matrix products with cuBLAS (fp32), the rest as kernels over mlp_math.h's functions (mlp_dev.h). */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp_cuda.h"

#define STR_(x) #x
#define STR(x) STR_(x)
#define BLOCK 256

/* ------------------------------------------------------------ kernels */

static unsigned blocks(size_t n)
{
	return (unsigned)((n + BLOCK - 1) / BLOCK);
}

__global__ void k_bias_act(float *out, const float *b, int n, int n_out, int act)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < (size_t)n * n_out)
		out[i] = mlp_act((double)b[i % n_out] + (double)out[i], act);
}

__global__ void k_xent(const float *z, const int *y, int n, int c, double scale, float *g,
		       double *loss)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		loss[i] = mlp_xent(z + (size_t)i * c, c, y[i], scale, g + (size_t)i * c);
}

__global__ void k_col_sum_add(const float *g, int n, int n_out, float *gb)
{
	int o = blockIdx.x * blockDim.x + threadIdx.x;

	if (o < n_out)
		gb[o] += (float)mlp_col_sum(g, n, n_out, o);
}

__global__ void k_dtanh(const float *acc, const float *act, size_t count, float *gin)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < count)
		gin[i] = mlp_dtanh((double)acc[i], act[i]);
}

__global__ void k_bf16(const uint16_t *in, float *out, size_t count)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < count)
		out[i] = mlp_bf16_to_f32(in[i]);
}

extern "C" int mlp_cuda_bias_act(float *out, const float *b, int n, int n_out, int act)
{
	k_bias_act<<<blocks((size_t)n * n_out), BLOCK>>>(out, b, n, n_out, act);
	return (int)cudaGetLastError();
}

extern "C" int mlp_cuda_xent(const float *z, const int *y, int n, int c, double scale, float *g,
			     double *loss)
{
	k_xent<<<blocks((size_t)n), BLOCK>>>(z, y, n, c, scale, g, loss);
	return (int)cudaGetLastError();
}

extern "C" int mlp_cuda_col_sum_add(const float *g, int n, int n_out, float *gb)
{
	k_col_sum_add<<<blocks((size_t)n_out), BLOCK>>>(g, n, n_out, gb);
	return (int)cudaGetLastError();
}

extern "C" int mlp_cuda_dtanh(const float *acc, const float *act, size_t count, float *gin)
{
	k_dtanh<<<blocks(count), BLOCK>>>(acc, act, count, gin);
	return (int)cudaGetLastError();
}

extern "C" int mlp_cuda_bf16_to_f32(const uint16_t *in, float *out, size_t count)
{
	k_bf16<<<blocks(count), BLOCK>>>(in, out, count);
	return (int)cudaGetLastError();
}

/* ------------------------------------------------------------ the device model */

struct mlp_dev {
	mlp_shape_t s;
	int cap, n, device;
	cublasHandle_t blas;
	float *x, *h1, *h2, *z, *g3, *g2, *g1, *tmp;	/* [cap x ...] as mlp_work_t */
	int *y;
	double *loss;		/* [cap] per-sample losses */
	double *loss_host;	/* [cap], host */
	float *w32, *b32;	/* bf16 parameters converted */
	char msg[256];
};

static int dev_fail(struct mlp_dev *d, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(d->msg, sizeof(d->msg), fmt, ap);
	va_end(ap);
	return -1;
}

static int cuda_ok(struct mlp_dev *d, cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 0;
	return dev_fail(d, "GPU %d: %s: %s", d->device, what, cudaGetErrorString(e));
}

static int blas_ok(struct mlp_dev *d, cublasStatus_t st, const char *what)
{
	if (st == CUBLAS_STATUS_SUCCESS)
		return 0;
	return dev_fail(d, "GPU %d: %s: %s", d->device, what, cublasGetStatusString(st));
}

static size_t max_weight(const mlp_shape_t *s)
{
	size_t a = (size_t)s->h * s->d, b = (size_t)s->h * s->h, c = (size_t)s->c * s->h;

	return a > b ? (a > c ? a : c) : (b > c ? b : c);
}

static int dev_alloc(struct mlp_dev *d)
{
	size_t cap = (size_t)d->cap, nh = cap * d->s.h, nc = cap * d->s.c;
	struct { void **p; size_t bytes; } a[] = {
		{ (void **)&d->x, cap * d->s.d * sizeof(float) }, { (void **)&d->y, cap * sizeof(int) },
		{ (void **)&d->h1, nh * 4 }, { (void **)&d->h2, nh * 4 }, { (void **)&d->z, nc * 4 },
		{ (void **)&d->g3, nc * 4 }, { (void **)&d->g2, nh * 4 }, { (void **)&d->g1, nh * 4 },
		{ (void **)&d->tmp, nh * 4 }, { (void **)&d->loss, cap * sizeof(double) },
		{ (void **)&d->w32, max_weight(&d->s) * 4 },
		{ (void **)&d->b32, (size_t)(d->s.h > d->s.c ? d->s.h : d->s.c) * 4 },
	};

	for (size_t i = 0; i < sizeof(a) / sizeof(a[0]); i++)
		if (cuda_ok(d, cudaMalloc(a[i].p, a[i].bytes), "cudaMalloc of the activations"))
			return -1;
	if ((d->loss_host = (double *)malloc(cap * sizeof(double))) == NULL)
		return dev_fail(d, "out of host memory for %d losses", d->cap);
	return 0;
}

/* The device of the model's memory, made current. */
static int dev_bind(struct mlp_dev *d, const void *model_ptr)
{
	cudaPointerAttributes pa;

	if (cuda_ok(d, cudaPointerGetAttributes(&pa, model_ptr), "cudaPointerGetAttributes"))
		return -1;
	if (pa.type != cudaMemoryTypeDevice)
		return dev_fail(d, "the model's parameters are not device memory (the sharded "
				"step is not on the NCCL backend)");
	d->device = pa.device;
	return cuda_ok(d, cudaSetDevice(d->device), "cudaSetDevice");
}

static void dev_destroy(struct mlp_dev *d)
{
	if (d == NULL)
		return;
	void *p[] = { d->x, d->y, d->h1, d->h2, d->z, d->g3, d->g2, d->g1, d->tmp, d->loss,
		      d->w32, d->b32 };
	for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++)
		if (p[i] != NULL)
			(void)cudaFree(p[i]);
	if (d->blas != NULL)
		(void)cublasDestroy(d->blas);
	free(d->loss_host);
	free(d);
}

static int dev_create(const mlp_shape_t *s, int cap, const void *model_ptr, struct mlp_dev **out,
		      char *msg, size_t msg_len)
{
	struct mlp_dev *d = (struct mlp_dev *)calloc(1, sizeof(*d));
	int rc;

	*out = NULL;
	if (d == NULL) {
		snprintf(msg, msg_len, "out of host memory");
		return -1;
	}
	d->s = *s;
	d->cap = cap > 0 ? cap : 1;
	d->device = -1;
	rc = dev_bind(d, model_ptr);
	if (rc == 0)
		rc = blas_ok(d, cublasCreate(&d->blas), "cublasCreate");
	/* no TF32 or other reduced precision: fp32 products, fp32 sums */
	if (rc == 0)
		rc = blas_ok(d, cublasSetMathMode(d->blas, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
	if (rc == 0)
		rc = dev_alloc(d);
	if (rc != 0) {
		snprintf(msg, msg_len, "%s", d->msg);
		dev_destroy(d);
		return -1;
	}
	*out = d;
	return 0;
}

static const char *dev_error(const struct mlp_dev *d)
{
	return d != NULL ? d->msg : "no device model";
}

static int dev_load(struct mlp_dev *d, const float *x, const int *y, int n)
{
	if (n < 1 || n > d->cap)
		return dev_fail(d, "micro-batch of %d samples, capacity %d", n, d->cap);
	d->n = n;
	if (cuda_ok(d, cudaSetDevice(d->device), "cudaSetDevice") ||
	    cuda_ok(d, cudaMemcpy(d->x, x, (size_t)n * d->s.d * sizeof(float),
				  cudaMemcpyHostToDevice), "copy of the inputs"))
		return -1;
	return cuda_ok(d, cudaMemcpy(d->y, y, (size_t)n * sizeof(int), cudaMemcpyHostToDevice),
		       "copy of the labels");
}

/* The float view of a parameter: p itself, or converted into buf. */
static int as_f32(struct mlp_dev *d, const void *p, int bf16, size_t n, float *buf,
		  const float **out)
{
	*out = (const float *)p;
	if (!bf16)
		return 0;
	*out = buf;
	return cuda_ok(d, (cudaError_t)mlp_cuda_bf16_to_f32((const uint16_t *)p, buf, n),
		       "bf16 conversion kernel");
}

/* What unit u reads and writes. */
struct unit_io {
	const float *in, *act_in;	/* input; tanh output feeding it (u > 0) */
	float *out, *g, *gin;		/* output; its error signal; the input's */
	int k_in, n_out, act;
};

static struct unit_io unit_io(struct mlp_dev *d, int u)
{
	struct unit_io io;

	io.k_in = u == 0 ? d->s.d : d->s.h;
	io.n_out = u < 2 ? d->s.h : d->s.c;
	io.act = u < 2;
	io.in = u == 0 ? d->x : u == 1 ? d->h1 : d->h2;
	io.act_in = io.in;
	io.out = u == 0 ? d->h1 : u == 1 ? d->h2 : d->z;
	io.g = u == 0 ? d->g1 : u == 1 ? d->g2 : d->g3;
	io.gin = u == 0 ? NULL : u == 1 ? d->g1 : d->g2;
	return io;
}

static int dev_forward(struct mlp_dev *d, int u, const void *W, const void *b, int bf16)
{
	struct unit_io io = unit_io(d, u);
	const float one = 1.0f, zero = 0.0f, *w, *bb;

	if (u < 0 || u >= MLP_NUNITS)
		return dev_fail(d, "no unit %d", u);
	if (cuda_ok(d, cudaSetDevice(d->device), "cudaSetDevice") ||
	    as_f32(d, W, bf16, (size_t)io.n_out * io.k_in, d->w32, &w) ||
	    as_f32(d, b, bf16, (size_t)io.n_out, d->b32, &bb))
		return -1;
	/* row-major out[n x n_out] = in[n x k] W^T: column-major out^T = W^T' in^T */
	if (blas_ok(d, cublasSgemm(d->blas, CUBLAS_OP_T, CUBLAS_OP_N, io.n_out, d->n, io.k_in, &one,
				   w, io.k_in, io.in, io.k_in, &zero, io.out, io.n_out),
		    "cublasSgemm (forward)"))
		return -1;
	return cuda_ok(d, (cudaError_t)mlp_cuda_bias_act(io.out, bb, d->n, io.n_out, io.act),
		       "bias and activation kernel");
}

static int dev_loss(struct mlp_dev *d, float grad_scale, double *loss_sum)
{
	double scale = (double)grad_scale / (d->n > 0 ? d->n : 1);
	double sum = 0.0;

	if (cuda_ok(d, cudaSetDevice(d->device), "cudaSetDevice") ||
	    cuda_ok(d, (cudaError_t)mlp_cuda_xent(d->z, d->y, d->n, d->s.c, scale, d->g3, d->loss),
		    "loss kernel") ||
	    cuda_ok(d, cudaMemcpy(d->loss_host, d->loss, (size_t)d->n * sizeof(double),
				  cudaMemcpyDeviceToHost), "copy of the losses"))
		return -1;
	for (int i = 0; i < d->n; i++)	/* mlp_loss's order */
		sum += d->loss_host[i];
	*loss_sum = sum;
	return 0;
}

static int dev_backward(struct mlp_dev *d, int u, const void *W, int bf16, float *gW, float *gb)
{
	struct unit_io io = unit_io(d, u);
	const float one = 1.0f, zero = 0.0f;
	const float *w;

	if (u < 0 || u >= MLP_NUNITS)
		return dev_fail(d, "no unit %d", u);
	if (cuda_ok(d, cudaSetDevice(d->device), "cudaSetDevice"))
		return -1;
	/* gW[n_out x k] += g^T in: column-major gW^T = in^T' g^T'^T */
	if (blas_ok(d, cublasSgemm(d->blas, CUBLAS_OP_N, CUBLAS_OP_T, io.k_in, io.n_out, d->n, &one,
				   io.in, io.k_in, io.g, io.n_out, &one, gW, io.k_in),
		    "cublasSgemm (weight gradient)") ||
	    cuda_ok(d, (cudaError_t)mlp_cuda_col_sum_add(io.g, d->n, io.n_out, gb),
		    "bias gradient kernel"))
		return -1;
	if (u == 0)
		return 0;
	if (as_f32(d, W, bf16, (size_t)io.n_out * io.k_in, d->w32, &w))
		return -1;
	/* tmp[n x k] = g W: column-major tmp^T = W^T' g^T' */
	if (blas_ok(d, cublasSgemm(d->blas, CUBLAS_OP_N, CUBLAS_OP_N, io.k_in, d->n, io.n_out, &one,
				   w, io.k_in, io.g, io.n_out, &zero, d->tmp, io.k_in),
		    "cublasSgemm (backward)"))
		return -1;
	return cuda_ok(d, (cudaError_t)mlp_cuda_dtanh(d->tmp, io.act_in, (size_t)d->n * io.k_in,
						      io.gin), "tanh derivative kernel");
}

static int dev_to_host(struct mlp_dev *d, void *dst, const void *src, size_t bytes)
{
	if (cuda_ok(d, cudaSetDevice(d->device), "cudaSetDevice"))
		return -1;
	return cuda_ok(d, cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost),
		       "copy of a parameter to the host");
}

static const struct mlp_dev_ops table = {
	MLP_DEV_ABI,
	sizeof(struct mlp_dev_ops),
	"CUDA " STR(CUDART_VERSION) ", cuBLAS " STR(CUBLAS_VERSION),
	dev_create,
	dev_destroy,
	dev_error,
	dev_load,
	dev_forward,
	dev_loss,
	dev_backward,
	dev_to_host,
};

extern "C" const struct mlp_dev_ops *mlp_dev_v1(void)
{
	return &table;
}
