/* SPDX-License-Identifier: BSD-3-Clause */
/* zero_cuda.cu - the sharded step's GPU side (zero_cuda.h): device memory
 * wrappers, and lib/optim.h's arithmetic, sumsq, scale and bf16 as kernels. */

/* Built with nvcc --fmad=false (Makefile.am): the kernels call the same
 * element functions as optim.c's loops and give the same bits.  Every
 * function returns 0 or the cudaError_t.  A runtime call that fails here
 * also clears the runtime's last-error slot (the error is reported once, by
 * the return value, and does not show up again in the launch check of a
 * later call).  Kernel launches are checked with cudaGetLastError(). */
#include <cuda_runtime.h>

#include <stddef.h>
#include <stdint.h>

#include "optim.h"
#include "dtype.h"
#include "zero_cuda.h"

namespace {

constexpr unsigned kThreads = 256;	/* threads per block, every kernel */
constexpr unsigned kMaxBlocks = 8192;	/* grid-stride loops cover the rest */
/* sumsq's grid is fixed, so that its summation order depends on n only */
constexpr unsigned kSumsqBlocks = 1024;

cudaStream_t as_stream(void *stream)
{
	return static_cast<cudaStream_t>(stream);
}

/* rc as the int the API returns; a failure is taken off the last-error
 * slot (it is reported now). */
int ret(cudaError_t rc)
{
	if (rc != cudaSuccess)
		(void)cudaGetLastError();
	return static_cast<int>(rc);
}

/* After a launch: its configuration error, if any. */
int launched(void)
{
	return static_cast<int>(cudaGetLastError());
}

unsigned grid_for(size_t n)
{
	size_t blocks = (n + kThreads - 1) / kThreads;

	return blocks > kMaxBlocks ? kMaxBlocks : static_cast<unsigned>(blocks);
}

__device__ __forceinline__ size_t first_index(void)
{
	return static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ size_t grid_stride(void)
{
	return static_cast<size_t>(gridDim.x) * blockDim.x;
}

__global__ void __launch_bounds__(kThreads)
adamw_kernel(float *p, float *m, float *v, const float *g, size_t n,
	     const dpg_adamw_hp h)
{
	for (size_t i = first_index(); i < n; i += grid_stride())
		dpg_adamw_elem(&p[i], &m[i], &v[i], g[i], &h);
}

/* The same on 16-byte aligned arrays, four elements a thread at a time
 * (one 16-byte load and store per array: 4x the bytes in flight per thread,
 * which the update needs to approach a copy's bandwidth); each element still
 * goes through dpg_adamw_elem, so the bits are the same.  n4 = n / 4; the
 * caller does the tail with adamw_kernel. */
__global__ void __launch_bounds__(kThreads)
adamw_kernel4(float4 *p, float4 *m, float4 *v, const float4 *g, size_t n4,
	      const dpg_adamw_hp h)
{
	for (size_t i = first_index(); i < n4; i += grid_stride()) {
		float4 pp = p[i], mm = m[i], vv = v[i];
		const float4 gg = g[i];

		dpg_adamw_elem(&pp.x, &mm.x, &vv.x, gg.x, &h);
		dpg_adamw_elem(&pp.y, &mm.y, &vv.y, gg.y, &h);
		dpg_adamw_elem(&pp.z, &mm.z, &vv.z, gg.z, &h);
		dpg_adamw_elem(&pp.w, &mm.w, &vv.w, gg.w, &h);
		p[i] = pp;
		m[i] = mm;
		v[i] = vv;
	}
}

bool aligned16(const void *a, const void *b, const void *c, const void *d)
{
	return ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) |
		 reinterpret_cast<uintptr_t>(c) | reinterpret_cast<uintptr_t>(d)) & 15u) == 0;
}

__global__ void __launch_bounds__(kThreads)
sgd_kernel(float *p, float *buf, const float *g, size_t n, const dpg_sgd_hp h)
{
	for (size_t i = first_index(); i < n; i += grid_stride())
		dpg_sgd_elem(&p[i], &buf[i], g[i], &h);
}

__global__ void __launch_bounds__(kThreads)
scale_kernel(float *x, size_t n, float s)
{
	for (size_t i = first_index(); i < n; i += grid_stride())
		x[i] = x[i] * s;
}

__global__ void __launch_bounds__(kThreads)
to_bf16_kernel(const float *in, uint16_t *out, size_t n)
{
	for (size_t i = first_index(); i < n; i += grid_stride())
		out[i] = dpg_f32_to_bf16(in[i]);
}

__global__ void __launch_bounds__(kThreads)
from_bf16_kernel(const uint16_t *in, float *out, size_t n)
{
	for (size_t i = first_index(); i < n; i += grid_stride())
		out[i] = dpg_bf16_to_f32(in[i]);
}

/* Sum sh[0..kThreads) into sh[0], always the same tree. */
__device__ __forceinline__ void block_sum(double *sh)
{
	for (unsigned w = kThreads / 2; w > 0; w >>= 1) {
		if (threadIdx.x < w)
			sh[threadIdx.x] = sh[threadIdx.x] + sh[threadIdx.x + w];
		__syncthreads();
	}
}

/* Launched as <<<kSumsqBlocks, kThreads>>>: thread t of block b adds the
 * squares of elements b*kThreads + t + k*(kSumsqBlocks*kThreads) in index
 * order; the block's partial goes to part[b]. */
__global__ void __launch_bounds__(kThreads)
sumsq_partial_kernel(const float *x, size_t n, double *part)
{
	__shared__ double sh[kThreads];
	double acc = 0.0;

	for (size_t i = first_index(); i < n; i += grid_stride()) {
		double d = x[i];

		acc = acc + d * d;
	}
	sh[threadIdx.x] = acc;
	__syncthreads();
	block_sum(sh);
	if (threadIdx.x == 0)
		part[blockIdx.x] = sh[0];
}

/* Launched as <<<1, kThreads>>>: thread t adds part[t + k*kThreads] in
 * order, then the block tree; the total goes to *out. */
__global__ void __launch_bounds__(kThreads)
sumsq_final_kernel(const double *part, unsigned nparts, double *out)
{
	__shared__ double sh[kThreads];
	double acc = 0.0;

	for (unsigned i = threadIdx.x; i < nparts; i += kThreads)
		acc = acc + part[i];
	sh[threadIdx.x] = acc;
	__syncthreads();
	block_sum(sh);
	if (threadIdx.x == 0)
		*out = sh[0];
}

/* Stream-ordered scratch; where the device has no memory pools, plain
 * cudaMalloc/cudaFree (which synchronize). */
cudaError_t scratch_alloc(void **p, size_t bytes, cudaStream_t s, bool *pooled)
{
	cudaError_t rc = cudaMallocAsync(p, bytes, s);

	*pooled = rc == cudaSuccess;
	if (rc != cudaErrorNotSupported)
		return rc;
	(void)cudaGetLastError();	/* the refusal above, handled here */
	return cudaMalloc(p, bytes);
}

cudaError_t scratch_free(void *p, cudaStream_t s, bool pooled)
{
	return pooled ? cudaFreeAsync(p, s) : cudaFree(p);
}

/* The two sumsq kernels and the copy of the total into *res (enqueued). */
cudaError_t sumsq_enqueue(const float *x, size_t n, double *buf, double *res,
			  cudaStream_t s)
{
	sumsq_partial_kernel<<<kSumsqBlocks, kThreads, 0, s>>>(x, n, buf);
	cudaError_t rc = cudaGetLastError();

	if (rc != cudaSuccess)
		return rc;
	sumsq_final_kernel<<<1, kThreads, 0, s>>>(buf, kSumsqBlocks, buf + kSumsqBlocks);
	rc = cudaGetLastError();
	if (rc != cudaSuccess)
		return rc;
	return cudaMemcpyAsync(res, buf + kSumsqBlocks, sizeof(*res),
			       cudaMemcpyDeviceToHost, s);
}

/* The first error of a and b. */
cudaError_t first_error(cudaError_t a, cudaError_t b)
{
	return a != cudaSuccess ? a : b;
}

/* A copy on stream, then (sync) waiting for the stream. */
int copy_on_stream(void *dst, const void *src, size_t bytes,
		   cudaMemcpyKind kind, void *stream, bool sync)
{
	if (bytes == 0)
		return 0;

	cudaStream_t s = as_stream(stream);
	cudaError_t rc = cudaMemcpyAsync(dst, src, bytes, kind, s);

	if (rc == cudaSuccess && sync)
		rc = cudaStreamSynchronize(s);
	return ret(rc);
}

}  // namespace

extern "C" {

const char *dpg_cuda_errstr(int rc)
{
	return cudaGetErrorString(static_cast<cudaError_t>(rc));
}

int dpg_cuda_set_device(int device)
{
	return ret(cudaSetDevice(device));
}

int dpg_cuda_alloc(void **p, size_t bytes)
{
	if (!p)
		return ret(cudaErrorInvalidValue);
	*p = nullptr;
	if (bytes == 0)
		return 0;

	void *d = nullptr;
	cudaError_t rc = cudaMalloc(&d, bytes);

	if (rc != cudaSuccess)
		return ret(rc);
	/* cudaMemset is asynchronous to the host: wait for it, so that work
	 * on any stream (non-blocking ones included) sees zeros */
	rc = cudaMemset(d, 0, bytes);
	if (rc == cudaSuccess)
		rc = cudaStreamSynchronize(nullptr);
	if (rc != cudaSuccess) {
		(void)cudaFree(d);
		return ret(rc);
	}
	*p = d;
	return 0;
}

int dpg_cuda_free(void *p)
{
	return ret(cudaFree(p));
}

int dpg_cuda_memset0(void *p, size_t bytes, void *stream)
{
	if (bytes == 0)
		return 0;
	return ret(cudaMemsetAsync(p, 0, bytes, as_stream(stream)));
}

int dpg_cuda_h2d(void *dst, const void *src, size_t bytes, void *stream)
{
	return copy_on_stream(dst, src, bytes, cudaMemcpyHostToDevice, stream, true);
}

int dpg_cuda_d2h(void *dst, const void *src, size_t bytes, void *stream)
{
	return copy_on_stream(dst, src, bytes, cudaMemcpyDeviceToHost, stream, true);
}

int dpg_cuda_d2d(void *dst, const void *src, size_t bytes, void *stream)
{
	return copy_on_stream(dst, src, bytes, cudaMemcpyDeviceToDevice, stream, false);
}

int dpg_cuda_sync(void *stream)
{
	return ret(cudaStreamSynchronize(as_stream(stream)));
}

int dpg_cuda_adamw(float *p, float *m, float *v, const float *g, size_t n,
		   const struct dpg_adamw_hp *h, void *stream)
{
	if (!h)
		return ret(cudaErrorInvalidValue);
	if (n == 0)
		return 0;
	if (n >= 4 && aligned16(p, m, v, g)) {
		size_t n4 = n / 4, done = n4 * 4;
		int rc;

		adamw_kernel4<<<grid_for(n4), kThreads, 0, as_stream(stream)>>>(
			reinterpret_cast<float4 *>(p), reinterpret_cast<float4 *>(m),
			reinterpret_cast<float4 *>(v), reinterpret_cast<const float4 *>(g), n4, *h);
		if ((rc = launched()) != 0 || done == n)
			return rc;
		p += done;
		m += done;
		v += done;
		g += done;
		n -= done;
	}
	adamw_kernel<<<grid_for(n), kThreads, 0, as_stream(stream)>>>(p, m, v, g, n, *h);
	return launched();
}

int dpg_cuda_sgd(float *p, float *buf, const float *g, size_t n,
		 const struct dpg_sgd_hp *h, void *stream)
{
	if (!h)
		return ret(cudaErrorInvalidValue);
	if (n == 0)
		return 0;
	sgd_kernel<<<grid_for(n), kThreads, 0, as_stream(stream)>>>(p, buf, g, n, *h);
	return launched();
}

int dpg_cuda_sumsq(const float *x, size_t n, double *out, void *stream)
{
	if (!out)
		return ret(cudaErrorInvalidValue);
	if (n == 0) {
		*out = 0.0;
		return 0;
	}

	cudaStream_t s = as_stream(stream);
	void *scratch = nullptr;
	bool pooled = false;
	double res = 0.0;
	cudaError_t rc = scratch_alloc(&scratch, (kSumsqBlocks + 1) * sizeof(double), s,
				       &pooled);

	if (rc != cudaSuccess)
		return ret(rc);
	rc = sumsq_enqueue(x, n, static_cast<double *>(scratch), &res, s);
	rc = first_error(rc, scratch_free(scratch, s, pooled));
	/* always wait: res is on this stack frame and may be written to */
	rc = first_error(rc, cudaStreamSynchronize(s));
	if (rc == cudaSuccess)
		*out = res;
	return ret(rc);
}

int dpg_cuda_scale(float *x, size_t n, float s, void *stream)
{
	if (n == 0)
		return 0;
	scale_kernel<<<grid_for(n), kThreads, 0, as_stream(stream)>>>(x, n, s);
	return launched();
}

int dpg_cuda_f32_to_bf16(const float *in, uint16_t *out, size_t n, void *stream)
{
	if (n == 0)
		return 0;
	to_bf16_kernel<<<grid_for(n), kThreads, 0, as_stream(stream)>>>(in, out, n);
	return launched();
}

int dpg_cuda_bf16_to_f32(const uint16_t *in, float *out, size_t n, void *stream)
{
	if (n == 0)
		return 0;
	from_bf16_kernel<<<grid_for(n), kThreads, 0, as_stream(stream)>>>(in, out, n);
	return launched();
}

}  /* extern "C" */
