/* zero_mem.c - the sharded model's buffers: the same operations on host and
 * device memory (zero_cuda.cu on the GPU), and the stage-3 gather buffer pool. */
#include "zero_mem.h"

#include <stdlib.h>
#include <string.h>

#include "dpg.h"
#include "dtype.h"
#include "optim.h"
#include "zero_cuda.h"

int zm_gpu(const struct zmem *m)
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

int zm_cuda_err(struct dpg_err *err, int rc)
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

int zm_alloc(const struct zmem *m, void **p, size_t bytes, size_t *acct,
	     struct dpg_err *err)
{
	*p = NULL;
	if (bytes == 0)
		return 0;
#ifdef DPG_HAVE_CUDA_ZERO
	if (zm_gpu(m)) {
		int rc = dpg_cuda_alloc(p, bytes);

		if (rc != 0)
			return zm_cuda_err(err, rc);
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

int zm_alloc_raw(const struct zmem *m, void **p, size_t bytes, size_t *acct,
		 struct dpg_err *err)
{
	if (m->on_gpu)
		return zm_alloc(m, p, bytes, acct, err);
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

void zm_free(const struct zmem *m, void **p, size_t bytes, size_t *acct)
{
	if (!*p)
		return;
#ifdef DPG_HAVE_CUDA_ZERO
	if (zm_gpu(m))
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
int zm_gbuf_get(struct zmem *m, void **p, size_t *acct, struct dpg_err *err)
{
	if (m->nspare > 0) {
		*p = m->spare[--m->nspare];
		m->spare_bytes -= m->gbuf_bytes;
		*acct += m->gbuf_bytes;
		return 0;
	}
	return zm_alloc_raw(m, p, m->gbuf_bytes, acct, err);
}

/* Kept: up to two (the current unit and the prefetched one). */
void zm_gbuf_put(struct zmem *m, void **p, size_t *acct)
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
	zm_free(m, p, 0, NULL);
}

void zm_gbuf_drain(struct zmem *m)
{
	while (m->nspare > 0)
		zm_free(m, &m->spare[--m->nspare], 0, NULL);
}

int zm_zero(const struct zmem *m, void *p, size_t bytes, struct dpg_err *err)
{
	(void)err;
	if (bytes == 0)
		return 0;
#ifdef DPG_HAVE_CUDA_ZERO
	if (zm_gpu(m)) {
		int rc = dpg_cuda_memset0(p, bytes, NULL);

		return rc ? zm_cuda_err(err, rc) : 0;
	}
#else
	(void)m;
#endif
	memset(p, 0, bytes);
	return 0;
}

int zm_copy(const struct zmem *m, void *dst, const void *src, size_t bytes, int dir,
	    struct dpg_err *err)
{
	(void)dir;
	(void)err;
	if (bytes == 0)
		return 0;
#ifdef DPG_HAVE_CUDA_ZERO
	if (zm_gpu(m)) {
		int rc = dir == 0 ? dpg_cuda_h2d(dst, src, bytes, NULL) :
				    dpg_cuda_d2h(dst, src, bytes, NULL);

		return rc ? zm_cuda_err(err, rc) : 0;
	}
#else
	(void)m;
#endif
	memmove(dst, src, bytes);
	return 0;
}

int zm_cast(const struct zmem *m, void *dst, const float *src, size_t n,
	    struct dpg_err *err)
{
	(void)err;
	if (n == 0)
		return 0;
#ifdef DPG_HAVE_CUDA_ZERO
	if (zm_gpu(m)) {
		int rc = m->param_dtype == DPG_BF16 ?
			 dpg_cuda_f32_to_bf16(src, dst, n, NULL) :
			 dpg_cuda_d2d(dst, src, n * sizeof(float), NULL);

		return rc ? zm_cuda_err(err, rc) : 0;
	}
#endif
	if (m->param_dtype == DPG_BF16)
		dpg_f32_to_bf16_n(src, dst, n);
	else
		memmove(dst, src, n * sizeof(float));
	return 0;
}

int zm_to_bf16(const struct zmem *m, const float *in, uint16_t *out, size_t n,
	       struct dpg_err *err)
{
	(void)err;
#ifdef DPG_HAVE_CUDA_ZERO
	if (zm_gpu(m)) {
		int rc = dpg_cuda_f32_to_bf16(in, out, n, NULL);

		return rc ? zm_cuda_err(err, rc) : 0;
	}
#else
	(void)m;
#endif
	dpg_f32_to_bf16_n(in, out, n);
	return 0;
}

int zm_from_bf16(const struct zmem *m, const uint16_t *in, float *out, size_t n,
		 struct dpg_err *err)
{
	(void)err;
#ifdef DPG_HAVE_CUDA_ZERO
	if (zm_gpu(m)) {
		int rc = dpg_cuda_bf16_to_f32(in, out, n, NULL);

		return rc ? zm_cuda_err(err, rc) : 0;
	}
#else
	(void)m;
#endif
	dpg_bf16_to_f32_n(in, out, n);
	return 0;
}

int zm_sumsq(const struct zmem *m, const float *x, size_t n, double *out,
	     struct dpg_err *err)
{
	(void)err;
#ifdef DPG_HAVE_CUDA_ZERO
	if (zm_gpu(m)) {
		int rc = dpg_cuda_sumsq(x, n, out, NULL);

		return rc ? zm_cuda_err(err, rc) : 0;
	}
#else
	(void)m;
#endif
	*out = dpg_sumsq_f32(x, n);
	return 0;
}
