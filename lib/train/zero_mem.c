/* SPDX-License-Identifier: BSD-3-Clause */
/* zero_mem.c - the sharded model's buffers: the same operations on host and
 * device memory (zero_cuda.cu on the GPU), and the stage-3 gather buffer pool. */
#include "zero_mem.h"

#include <stdlib.h>
#include <string.h>

#include "dpg.h"
#include "dtype.h"
#include "optim.h"
#include "zero_cuda.h"

int dpg_zmem_gpu(const struct dpg_zmem *m)
{
#ifdef DPG_HAVE_CUDA_ZERO
	if (!m->on_gpu)
		return 0;
	if (m->device >= 0)
		(void)dpg_cuda_set_device(m->device);
	return 1;
#else
	(void)m;
	return 0;
#endif
}

int dpg_zmem_cuda_err(struct dpg_err *err, int rc)
{
#ifdef DPG_HAVE_CUDA_ZERO
	return dpg_errs(err, DPG_ERR_BACKEND, "CUDA: %s", dpg_cuda_errstr(rc));
#else
	return dpg_errs(err, DPG_ERR_BACKEND, "CUDA error %d", rc);
#endif
}

static int oom(struct dpg_err *err, size_t bytes)
{
	return dpg_errs(err, DPG_ERR_NOMEM, "out of memory (%zu bytes)", bytes);
}

int dpg_zmem_alloc(const struct dpg_zmem *m, void **p, size_t bytes, size_t *acct,
		   struct dpg_err *err)
{
	*p = NULL;
	if (bytes == 0)
		return 0;
#ifdef DPG_HAVE_CUDA_ZERO
	if (dpg_zmem_gpu(m)) {
		int rc = dpg_cuda_alloc(p, bytes);

		if (rc != 0)
			return dpg_zmem_cuda_err(err, rc);
		if (acct)
			*acct += bytes;
		return 0;
	}
#else
	(void)m;
#endif
	*p = calloc(1, bytes);
	if (!*p)
		return oom(err, bytes);
	if (acct)
		*acct += bytes;
	return 0;
}

int dpg_zmem_alloc_raw(const struct dpg_zmem *m, void **p, size_t bytes, size_t *acct,
		       struct dpg_err *err)
{
	if (m->on_gpu)
		return dpg_zmem_alloc(m, p, bytes, acct, err);
	*p = NULL;
	if (bytes == 0)
		return 0;
	*p = malloc(bytes);
	if (!*p)
		return oom(err, bytes);
	if (acct)
		*acct += bytes;
	return 0;
}

void dpg_zmem_free(const struct dpg_zmem *m, void **p, size_t bytes, size_t *acct)
{
	if (!*p)
		return;
#ifdef DPG_HAVE_CUDA_ZERO
	if (dpg_zmem_gpu(m))
		(void)dpg_cuda_free(*p);
	else
#else
	(void)m;
#endif
		free(*p);
	*p = NULL;
	if (acct)
		*acct -= bytes;
}

/* Every gather buffer holds the largest unit, so that any unit fits; page
 * faults on fresh memory would otherwise cost more than the gather. */
int dpg_zmem_gbuf_get(struct dpg_zmem *m, void **p, size_t *acct, struct dpg_err *err)
{
	if (m->nspare > 0) {
		*p = m->spare[--m->nspare];
		m->spare_bytes -= m->gbuf_bytes;
		*acct += m->gbuf_bytes;
		return 0;
	}
	return dpg_zmem_alloc_raw(m, p, m->gbuf_bytes, acct, err);
}

/* Kept: up to two (the current unit and the prefetched one). */
void dpg_zmem_gbuf_put(struct dpg_zmem *m, void **p, size_t *acct)
{
	if (!*p)
		return;
	*acct -= m->gbuf_bytes;
	if (m->nspare < 2) {
		m->spare[m->nspare++] = *p;
		m->spare_bytes += m->gbuf_bytes;
		*p = NULL;
		return;
	}
	dpg_zmem_free(m, p, 0, NULL);
}

void dpg_zmem_gbuf_drain(struct dpg_zmem *m)
{
	while (m->nspare > 0)
		dpg_zmem_free(m, &m->spare[--m->nspare], 0, NULL);
}

int dpg_zmem_zero(const struct dpg_zmem *m, void *p, size_t bytes, struct dpg_err *err)
{
	(void)err;
	if (bytes == 0)
		return 0;
#ifdef DPG_HAVE_CUDA_ZERO
	if (dpg_zmem_gpu(m)) {
		int rc = dpg_cuda_memset0(p, bytes, NULL);

		return rc ? dpg_zmem_cuda_err(err, rc) : 0;
	}
#else
	(void)m;
#endif
	memset(p, 0, bytes);
	return 0;
}

int dpg_zmem_copy(const struct dpg_zmem *m, void *dst, const void *src, size_t bytes,
		  int dir, struct dpg_err *err)
{
	(void)dir;
	(void)err;
	if (bytes == 0)
		return 0;
#ifdef DPG_HAVE_CUDA_ZERO
	if (dpg_zmem_gpu(m)) {
		int rc = dir == 0 ? dpg_cuda_h2d(dst, src, bytes, NULL) :
				    dpg_cuda_d2h(dst, src, bytes, NULL);

		return rc ? dpg_zmem_cuda_err(err, rc) : 0;
	}
#else
	(void)m;
#endif
	memmove(dst, src, bytes);
	return 0;
}

int dpg_zmem_cast(const struct dpg_zmem *m, void *dst, const float *src, size_t n,
		  struct dpg_err *err)
{
	(void)err;
	if (n == 0)
		return 0;
#ifdef DPG_HAVE_CUDA_ZERO
	if (dpg_zmem_gpu(m)) {
		int rc = m->param_dtype == DPG_BF16 ?
			 dpg_cuda_f32_to_bf16(src, dst, n, NULL) :
			 dpg_cuda_d2d(dst, src, n * sizeof(float), NULL);

		return rc ? dpg_zmem_cuda_err(err, rc) : 0;
	}
#endif
	if (m->param_dtype == DPG_BF16)
		dpg_f32_to_bf16_n(src, dst, n);
	else
		memmove(dst, src, n * sizeof(float));
	return 0;
}

int dpg_zmem_to_bf16(const struct dpg_zmem *m, const float *in, uint16_t *out, size_t n,
		     struct dpg_err *err)
{
	(void)err;
#ifdef DPG_HAVE_CUDA_ZERO
	if (dpg_zmem_gpu(m)) {
		int rc = dpg_cuda_f32_to_bf16(in, out, n, NULL);

		return rc ? dpg_zmem_cuda_err(err, rc) : 0;
	}
#else
	(void)m;
#endif
	dpg_f32_to_bf16_n(in, out, n);
	return 0;
}

int dpg_zmem_from_bf16(const struct dpg_zmem *m, const uint16_t *in, float *out,
		       size_t n, struct dpg_err *err)
{
	(void)err;
#ifdef DPG_HAVE_CUDA_ZERO
	if (dpg_zmem_gpu(m)) {
		int rc = dpg_cuda_bf16_to_f32(in, out, n, NULL);

		return rc ? dpg_zmem_cuda_err(err, rc) : 0;
	}
#else
	(void)m;
#endif
	dpg_bf16_to_f32_n(in, out, n);
	return 0;
}

int dpg_zmem_sumsq(const struct dpg_zmem *m, const float *x, size_t n, double *out,
		   struct dpg_err *err)
{
	(void)err;
#ifdef DPG_HAVE_CUDA_ZERO
	if (dpg_zmem_gpu(m)) {
		int rc = dpg_cuda_sumsq(x, n, out, NULL);

		return rc ? dpg_zmem_cuda_err(err, rc) : 0;
	}
#else
	(void)m;
#endif
	*out = dpg_sumsq_f32(x, n);
	return 0;
}

