/* SPDX-License-Identifier: BSD-3-Clause */
/* zero_mem.c - the sharded model's buffers: the same operations on host and
 * device memory (zero_cuda.cu's kernels on the GPU, from the CUDA module's
 * table), and the pools of gather and gradient buffers. */
#include "zero_mem.h"

#include <stdlib.h>
#include <string.h>

#include "dpg.h"
#include "dtype.h"
#include "gpumod.h"
#include "optim.h"

int dpg_zmem_gpu(const struct dpg_zmem *m)
{
	if (!m->on_gpu || m->k == NULL)
		return 0;
	if (m->device >= 0)
		(void)m->k->set_device(m->device);
	return 1;
}

int dpg_zmem_cuda_err(const struct dpg_zmem *m, struct dpg_err *err, int rc)
{
	if (m->k == NULL)
		return dpg_errs(err, DPG_ERR_BACKEND, "CUDA error %d", rc);
	return dpg_errs(err, DPG_ERR_BACKEND, "CUDA: %s", m->k->errstr(rc));
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
	if (dpg_zmem_gpu(m)) {
		int rc = m->k->alloc(p, bytes);

		if (rc != 0)
			return dpg_zmem_cuda_err(m, err, rc);
		if (acct)
			*acct += bytes;
		return 0;
	}
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
	if (dpg_zmem_gpu(m))
		(void)m->k->free(*p);
	else
		free(*p);
	*p = NULL;
	if (acct)
		*acct -= bytes;
}

/* Zeros in p's first bytes, visible to work on any stream (on the GPU the
 * memset is waited for, as in dpg_zmem_alloc). */
static int zero_now(const struct dpg_zmem *m, void *p, size_t bytes, struct dpg_err *err)
{
	int rc = dpg_zmem_zero(m, p, bytes, err);

	if (rc == 0 && dpg_zmem_gpu(m) && (rc = m->k->sync(NULL)) != 0)
		return dpg_zmem_cuda_err(m, err, rc);
	return rc;
}

int dpg_zmem_pool_get(struct dpg_zmem *m, struct dpg_zpool *pl, size_t zero, void **p,
		      size_t *acct, struct dpg_err *err)
{
	int rc;

	if (pl->n == 0)
		return zero > 0 ? dpg_zmem_alloc(m, p, pl->bytes, acct, err) :
		       dpg_zmem_alloc_raw(m, p, pl->bytes, acct, err);
	*p = pl->spare[--pl->n];
	m->spare_bytes -= pl->bytes;
	if (zero > 0 && (rc = zero_now(m, *p, zero < pl->bytes ? zero : pl->bytes, err)) != 0) {
		dpg_zmem_free(m, p, 0, NULL);
		return rc;
	}
	if (acct)
		*acct += pl->bytes;
	return 0;
}

/* Kept: up to two (stage 3: the current unit and the prefetched one). */
void dpg_zmem_pool_put(struct dpg_zmem *m, struct dpg_zpool *pl, void **p, size_t *acct)
{
	if (!*p)
		return;
	if (acct)
		*acct -= pl->bytes;
	if (pl->n < 2) {
		pl->spare[pl->n++] = *p;
		m->spare_bytes += pl->bytes;
		*p = NULL;
		return;
	}
	dpg_zmem_free(m, p, 0, NULL);
}

void dpg_zmem_pool_drain(struct dpg_zmem *m)
{
	while (m->gather.n > 0)
		dpg_zmem_free(m, &m->gather.spare[--m->gather.n], 0, NULL);
	while (m->grad.n > 0)
		dpg_zmem_free(m, &m->grad.spare[--m->grad.n], 0, NULL);
	m->spare_bytes = 0;
}

int dpg_zmem_zero(const struct dpg_zmem *m, void *p, size_t bytes, struct dpg_err *err)
{
	if (bytes == 0)
		return 0;
	if (dpg_zmem_gpu(m)) {
		int rc = m->k->memset0(p, bytes, NULL);

		return rc ? dpg_zmem_cuda_err(m, err, rc) : 0;
	}
	memset(p, 0, bytes);
	return 0;
}

int dpg_zmem_copy(const struct dpg_zmem *m, void *dst, const void *src, size_t bytes,
		  int dir, struct dpg_err *err)
{
	if (bytes == 0)
		return 0;
	if (dpg_zmem_gpu(m)) {
		int rc = dir == 0 ? m->k->h2d(dst, src, bytes, NULL) :
				    m->k->d2h(dst, src, bytes, NULL);

		return rc ? dpg_zmem_cuda_err(m, err, rc) : 0;
	}
	memmove(dst, src, bytes);
	return 0;
}

int dpg_zmem_cast(const struct dpg_zmem *m, void *dst, const float *src, size_t n,
		  struct dpg_err *err)
{
	if (n == 0)
		return 0;
	if (dpg_zmem_gpu(m)) {
		int rc = m->param_dtype == DPG_BF16 ?
			 m->k->f32_to_bf16(src, dst, n, NULL) :
			 m->k->d2d(dst, src, n * sizeof(float), NULL);

		return rc ? dpg_zmem_cuda_err(m, err, rc) : 0;
	}
	if (m->param_dtype == DPG_BF16)
		dpg_f32_to_bf16_n(src, dst, n);
	else
		memmove(dst, src, n * sizeof(float));
	return 0;
}

int dpg_zmem_to_bf16(const struct dpg_zmem *m, const float *in, uint16_t *out, size_t n,
		     struct dpg_err *err)
{
	if (dpg_zmem_gpu(m)) {
		int rc = m->k->f32_to_bf16(in, out, n, NULL);

		return rc ? dpg_zmem_cuda_err(m, err, rc) : 0;
	}
	dpg_f32_to_bf16_n(in, out, n);
	return 0;
}

int dpg_zmem_from_bf16(const struct dpg_zmem *m, const uint16_t *in, float *out,
		       size_t n, struct dpg_err *err)
{
	if (dpg_zmem_gpu(m)) {
		int rc = m->k->bf16_to_f32(in, out, n, NULL);

		return rc ? dpg_zmem_cuda_err(m, err, rc) : 0;
	}
	dpg_bf16_to_f32_n(in, out, n);
	return 0;
}

int dpg_zmem_sumsq(const struct dpg_zmem *m, const float *x, size_t n, double *out,
		   struct dpg_err *err)
{
	if (dpg_zmem_gpu(m)) {
		int rc = m->k->sumsq(x, n, out, NULL);

		return rc ? dpg_zmem_cuda_err(m, err, rc) : 0;
	}
	*out = dpg_sumsq_f32(x, n);
	return 0;
}

