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

/* Agree on success: every rank passes its own status, all get the worst
 * (the first rank's message stays in each failing rank's context). */
static dpg_status_t agree(struct dpg_zero *z, dpg_status_t mine, const char *op)
{
	char saved[DPG_ERR_MSG_MAX];
	int32_t v = (int32_t)mine;
	dpg_status_t st;

	if (dpg_world_size(z->ctx) == 1)
		return mine;
	/* the allreduce clears the context's message: keep this rank's */
	snprintf(saved, sizeof(saved), "%s", dpg_last_error(z->ctx));
	st = dpg_zsmall_allreduce(z, dpg_world(z->ctx), &v, DPG_I32, DPG_MAX);
	if (st != DPG_OK) {
		snprintf(saved, sizeof(saved), "%s", dpg_last_error(z->ctx));
		return dpg_zerr(z, st, op, "agreeing on the outcome: %s", saved);
	}
	if (mine != DPG_OK)
		dpg_ctx_seterr(z->ctx, "%s", saved);
	if (v != DPG_OK && mine == DPG_OK)
		return dpg_zerr(z, (dpg_status_t)v, op, "another rank failed (%s); see its log",
			    dpg_strerror((dpg_status_t)v));
	return mine;
}

/* Copy this rank's state arrays to host memory (GPU) or alias them. */
static dpg_status_t host_state(struct dpg_zero *z, float **h, bool *owned, int dir)
{
	size_t bytes = z->L.shard_numel * sizeof(float);
	dpg_status_t st;
	int k;

	*owned = z->mem.on_gpu;
	for (k = 0; k < z->nstate; k++) {
		if (!z->mem.on_gpu) {
			h[k] = z->state[k];
			continue;
		}
		h[k] = malloc(bytes ? bytes : 1);
		if (!h[k])
			return dpg_zerr(z, DPG_ERR_NOMEM, "zero_save", "out of memory");
		if (dir == 1 && (st = dpg_zcopy(z, h[k], z->state[k], bytes, 1)) != DPG_OK)
			return st;
	}
	return DPG_OK;
}

static void free_host_state(struct dpg_zero *z, float **h, bool owned)
{
	int k;

	for (k = 0; owned && k < z->nstate; k++)
		free(h[k]);
}

dpg_status_t dpg_zero_save(dpg_zero_t *z, const char *dir, const void *extra,
			   size_t extra_len)
{
	const char *op = "zero_save";
	float *h[DPG_CKPT_MAX_STATE] = { NULL };
	struct dpg_err e = { { 0 } };
	bool owned = false, writer;
	dpg_status_t st = DPG_OK;

	if (!z)
		return DPG_ERR_INVALID;
	if ((st = dpg_zneed_committed(z, op)) != DPG_OK)
		return st;
	if (!dir || !*dir || (extra_len > 0 && !extra))
		return dpg_zerr(z, DPG_ERR_INVALID, op, "no directory, or extra bytes without a buffer");
	if (z->micro != 0)
		return dpg_zerr(z, DPG_ERR_INVALID, op, "in the middle of an accumulation (%ld of %d "
			    "micro-steps done): save after dpg_zero_step updated the parameters",
			    z->micro, z->o.accum_steps);
	writer = z->rep == NULL || dpg_mesh_coord(z->mesh, 0) == 0;
	if (writer) {
		if (dpg_ckpt_prepare(dir, z->step, &e) != 0)
			st = dpg_zerr(z, DPG_ERR_SYSTEM, op, "%s", e.msg);
		if (st == DPG_OK)
			st = host_state(z, h, &owned, 1);
		if (st == DPG_OK && dpg_ckpt_write_shard(dir, z->step, &z->L, z->r, z->nstate,
							 h, &e) != 0)
			st = dpg_zerr(z, DPG_ERR_SYSTEM, op, "%s", e.msg);
		free_host_state(z, h, owned);
	}
	if ((st = agree(z, st, op)) != DPG_OK)
		return st;
	/* every shard is on disk: what a killed writer left behind can go */
	if (dpg_rank(z->ctx) == 0)
		dpg_ckpt_clean_tmp(dir, z->step);
	if (dpg_rank(z->ctx) == 0 && dpg_ckpt_commit(dir, z->step, &z->L, (int)z->o.optimizer,
						    z->nstate, extra, extra_len, &e) != 0)
		st = dpg_zerr(z, DPG_ERR_SYSTEM, op, "%s", e.msg);
	return agree(z, st, op);
}

static dpg_status_t load_local(struct dpg_zero *z, const char *dir,
			       struct dpg_ckpt_meta *meta)
{
	const char *op = "zero_load";
	float *h[DPG_CKPT_MAX_STATE] = { NULL };
	struct dpg_err e = { { 0 } };
	bool owned = false;
	dpg_status_t st;
	int k;

	if (dpg_ckpt_read_meta(dir, meta, &e) != 0)
		return dpg_zerr(z, DPG_ERR_INVALID, op, "%s", e.msg);
	if (meta->optimizer != (int)z->o.optimizer)
		return dpg_zerr(z, DPG_ERR_INVALID, op, "checkpoint %s was saved with the %s "
			    "optimizer, this run uses %s", meta->stepdir,
			    meta->optimizer == DPG_OPT_ADAMW ? "AdamW" : "SGD",
			    z->o.optimizer == DPG_OPT_ADAMW ? "AdamW" : "SGD");
	if ((st = host_state(z, h, &owned, 0)) != DPG_OK) {
		free_host_state(z, h, owned);
		return st;
	}
	if (dpg_ckpt_read_shard(meta, &z->L, z->r, z->nstate, h, &e) != 0)
		st = dpg_zerr(z, DPG_ERR_INVALID, op, "%s", e.msg);
	for (k = 0; owned && st == DPG_OK && k < z->nstate; k++)
		st = dpg_zcopy(z, z->state[k], h[k], z->L.shard_numel * sizeof(float), 0);
	free_host_state(z, h, owned);
	return st;
}

dpg_status_t dpg_zero_load(dpg_zero_t *z, const char *dir, void *extra,
			   size_t extra_cap, size_t *extra_len)
{
	const char *op = "zero_load";
	struct dpg_ckpt_meta meta;
	dpg_status_t st;
	long step = 0;

	if (!z)
		return DPG_ERR_INVALID;
	if ((st = dpg_zneed_committed(z, op)) != DPG_OK)
		return st;
	if (!dir || !*dir)
		return dpg_zerr(z, DPG_ERR_INVALID, op, "no directory");
	memset(&meta, 0, sizeof(meta));
	st = load_local(z, dir, &meta);
	if (st == DPG_OK && meta.extra_len > 0 && meta.extra_len > extra_cap)
		st = dpg_zerr(z, DPG_ERR_INVALID, op, "checkpoint %s holds %zu extra bytes, the "
			  "buffer has room for %zu", meta.stepdir, meta.extra_len, extra_cap);
	if (st == DPG_OK) {
		if (meta.extra_len > 0)
			memcpy(extra, meta.extra, meta.extra_len);
		if (extra_len)
			*extra_len = meta.extra_len;
		step = meta.step;
	}
	dpg_ckpt_meta_free(&meta);
	if ((st = agree(z, st, op)) != DPG_OK)
		return st;
	z->step = step;
	z->micro = 0;
	if ((st = dpg_zclear_grads(z)) != DPG_OK)
		return st;
	for (int u = 0; u < z->L.nunits; u++)
		if ((st = dpg_zero_release(z, u)) != DPG_OK)
			return st;
	return dpg_zpublish(z);
}
