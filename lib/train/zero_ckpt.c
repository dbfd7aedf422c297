/* SPDX-License-Identifier: BSD-3-Clause */
/* zero_ckpt.c - dpg_zero_save and dpg_zero_load: the sharded model's state
 * to and from ckpt.c's files, every rank agreeing on the outcome. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "dpg_zero.h"
#include "runtime.h"
#include "zero_impl.h"

/* Agree on success: every rank passes its own result (0 or -DPG_ERR_*, its
 * message in e), all get the worst. */
static int agree(struct dpg_zero *z, int mine, const char *op, struct dpg_err *e)
{
	struct dpg_err ae = { { 0 } };
	int32_t v = -mine;
	int rc;

	if (dpg_world_size(z->ctx) == 1)
		return mine;
	rc = dpg_zsmall_allreduce(z, dpg_world(z->ctx), &v, DPG_I32, DPG_MAX, &ae);
	if (rc != 0)
		return dpg_errs(e, (dpg_status_t)-rc, "%s: agreeing on the outcome: %s %s", op,
				dpg_ctx_who(z->ctx), ae.msg);
	if (v != DPG_OK && mine == 0)
		return dpg_errs(e, (dpg_status_t)v, "%s: another rank failed (%s); see its log",
				op, dpg_strerror((dpg_status_t)v));
	return mine;
}

/* ckpt.c failed with its message in e: st, named by op. */
static int ckpt_fail(dpg_status_t st, const char *op, struct dpg_err *e)
{
	dpg_err_prefix(e, op);
	return -(int)st;
}

/* Copy this rank's state arrays to host memory (GPU) or alias them. */
static int host_state(struct dpg_zero *z, float **h, bool *owned, int dir, struct dpg_err *e)
{
	size_t bytes = z->L.shard_numel * sizeof(float);
	int k, rc;

	*owned = z->mem.on_gpu;
	for (k = 0; k < z->nstate; k++) {
		if (!z->mem.on_gpu) {
			h[k] = z->state[k];
			continue;
		}
		h[k] = malloc(bytes ? bytes : 1);
		if (!h[k])
			return dpg_errs(e, DPG_ERR_NOMEM, "zero_save: out of memory");
		if (dir == 1 && (rc = dpg_zcopy(z, h[k], z->state[k], bytes, 1, e)) != 0)
			return rc;
	}
	return 0;
}

static void free_host_state(struct dpg_zero *z, float **h, bool owned)
{
	int k;

	for (k = 0; owned && k < z->nstate; k++)
		free(h[k]);
}

/* A writer's part of the save: its shard of the state, on disk. */
static int save_shard(struct dpg_zero *z, const char *dir, struct dpg_err *e)
{
	float *h[DPG_CKPT_MAX_STATE] = { NULL };
	bool owned = false;
	int rc;

	if (dpg_ckpt_prepare(dir, z->step, e) != 0)
		return ckpt_fail(DPG_ERR_SYSTEM, "zero_save", e);
	rc = host_state(z, h, &owned, 1, e);
	if (rc == 0 && dpg_ckpt_write_shard(dir, z->step, &z->L, z->r, z->nstate, h, e) != 0)
		rc = ckpt_fail(DPG_ERR_SYSTEM, "zero_save", e);
	free_host_state(z, h, owned);
	return rc;
}

int dpg_zsave_check(struct dpg_zero *z, const char *dir, const void *extra,
		    size_t extra_len, const char *op, struct dpg_err *e)
{
	int rc;

	if ((rc = dpg_zneed_committed(z, op, e)) != 0)
		return rc;
	if (!dir || !*dir || (extra_len > 0 && !extra))
		return dpg_errf(e, "%s: no directory, or extra bytes without a buffer", op);
	if (z->micro != 0)
		return dpg_errf(e, "%s: in the middle of an accumulation (%ld of %d micro-steps "
				"done): save after dpg_zero_step updated the parameters", op,
				z->micro, z->o.accum_steps);
	return 0;
}

int dpg_zsave_commit(struct dpg_zero *z, const char *dir, long step, const void *extra,
		     size_t extra_len, int mine, const char *op, struct dpg_err *e)
{
	int rc;

	if ((rc = agree(z, mine, op, e)) != 0)
		return rc;
	/* every shard is on disk: what a killed writer left behind can go */
	if (dpg_rank(z->ctx) == 0)
		dpg_ckpt_clean_tmp(dir, step);
	if (dpg_rank(z->ctx) == 0 && dpg_ckpt_commit(dir, step, &z->L, (int)z->o.optimizer,
						    z->nstate, extra, extra_len, e) != 0)
		rc = ckpt_fail(DPG_ERR_SYSTEM, op, e);
	return agree(z, rc, op, e);
}

static int save(struct dpg_zero *z, const char *dir, const void *extra, size_t extra_len,
		struct dpg_err *e)
{
	const char *op = "zero_save";
	int rc;

	if ((rc = dpg_zsave_settle(z, e)) != 0 ||
	    (rc = dpg_zsave_check(z, dir, extra, extra_len, op, e)) != 0)
		return rc;
	if (z->rep == NULL || dpg_mesh_coord(z->mesh, 0) == 0)
		rc = save_shard(z, dir, e);
	return dpg_zsave_commit(z, dir, z->step, extra, extra_len, rc, op, e);
}

dpg_status_t dpg_zero_save(dpg_zero_t *z, const char *dir, const void *extra,
			   size_t extra_len)
{
	struct dpg_err e = { { 0 } };

	if (!z)
		return DPG_ERR_INVALID;
	return dpg_zedge(z, save(z, dir, extra, extra_len, &e), &e);
}

static int load_local(struct dpg_zero *z, const char *dir, struct dpg_ckpt_meta *meta,
		      struct dpg_err *e)
{
	const char *op = "zero_load";
	float *h[DPG_CKPT_MAX_STATE] = { NULL };
	bool owned = false;
	int k, rc;

	if (dpg_ckpt_read_meta(dir, meta, e) != 0)
		return ckpt_fail(DPG_ERR_INVALID, op, e);
	if (meta->optimizer != (int)z->o.optimizer)
		return dpg_errf(e, "%s: checkpoint %s was saved with the %s optimizer, this run "
				"uses %s", op, meta->stepdir,
				meta->optimizer == DPG_OPT_ADAMW ? "AdamW" : "SGD",
				z->o.optimizer == DPG_OPT_ADAMW ? "AdamW" : "SGD");
	if ((rc = host_state(z, h, &owned, 0, e)) != 0) {
		free_host_state(z, h, owned);
		return rc;
	}
	if (dpg_ckpt_read_shard(meta, &z->L, z->r, z->nstate, h, e) != 0)
		rc = ckpt_fail(DPG_ERR_INVALID, op, e);
	for (k = 0; owned && rc == 0 && k < z->nstate; k++)
		rc = dpg_zcopy(z, z->state[k], h[k], z->L.shard_numel * sizeof(float), 0, e);
	free_host_state(z, h, owned);
	return rc;
}

/* This rank's part of the load: its shard and the extra bytes (a NULL
 * extra ignores them; *extra_len gets their count in either case). */
static int load_shard(struct dpg_zero *z, const char *dir, void *extra, size_t extra_cap,
		      size_t *extra_len, long *step, struct dpg_err *e)
{
	struct dpg_ckpt_meta meta;
	int rc;

	memset(&meta, 0, sizeof(meta));
	rc = load_local(z, dir, &meta, e);
	if (rc == 0 && extra != NULL && meta.extra_len > extra_cap)
		rc = dpg_errf(e, "zero_load: checkpoint %s holds %zu extra bytes, the buffer has "
			      "room for %zu", meta.stepdir, meta.extra_len, extra_cap);
	if (rc == 0) {
		if (extra != NULL && meta.extra_len > 0)
			memcpy(extra, meta.extra, meta.extra_len);
		if (extra_len)
			*extra_len = meta.extra_len;
		*step = meta.step;
	}
	dpg_ckpt_meta_free(&meta);
	return rc;
}

static int load(struct dpg_zero *z, const char *dir, void *extra, size_t extra_cap,
		size_t *extra_len, struct dpg_err *e)
{
	const char *op = "zero_load";
	long step = 0;
	int rc;

	if ((rc = dpg_zneed_committed(z, op, e)) != 0)
		return rc;
	if (!dir || !*dir)
		return dpg_errf(e, "%s: no directory", op);
	if ((rc = dpg_zsave_settle(z, e)) != 0)
		return rc;
	dpg_zdrain(z);	/* no gather may read the shard being loaded */
	rc = load_shard(z, dir, extra, extra_cap, extra_len, &step, e);
	if ((rc = agree(z, rc, op, e)) != 0)
		return rc;
	z->step = step;
	z->micro = 0;
	if ((rc = dpg_zclear_grads(z, e)) != 0)
		return rc;
	for (int u = 0; u < z->L.nunits; u++)
		dpg_zrelease(z, u);
	return dpg_zpublish(z, e);
}

dpg_status_t dpg_zero_load(dpg_zero_t *z, const char *dir, void *extra,
			   size_t extra_cap, size_t *extra_len)
{
	struct dpg_err e = { { 0 } };

	if (!z)
		return DPG_ERR_INVALID;
	return dpg_zedge(z, load(z, dir, extra, extra_cap, extra_len, &e), &e);
}
