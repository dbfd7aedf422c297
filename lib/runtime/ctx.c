/* SPDX-License-Identifier: BSD-3-Clause */
/* ctx.c - the context's accessors, its last error and the one mapping of
 * internal return codes to the public dpg_status_t. */
#include "ctx.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "net.h"	/* dpg_now_ms */

/* ------------------------------------------------------------ errors */

dpg_status_t dpg_status_of(int rc)
{
	if (rc == 0)
		return DPG_OK;
	if (rc < 0 && -rc > (int)DPG_OK && -rc <= (int)DPG_ERR_ABORTED)
		return (dpg_status_t)-rc;
	return DPG_ERR_SYSTEM;
}

void dpg_ctx_seterr(struct dpg_ctx *ctx, const char *fmt, ...)
{
	va_list ap;
	char *nl;

	if (ctx == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(ctx->err, sizeof(ctx->err), fmt, ap);
	va_end(ap);
	while ((nl = strpbrk(ctx->err, "\r\n")) != NULL)
		*nl = ' ';
}

void dpg_ctx_adderr(struct dpg_ctx *ctx, const char *fmt, ...)
{
	va_list ap;
	size_t used;
	char *nl;

	if (ctx == NULL || (used = strlen(ctx->err)) + 1 >= sizeof(ctx->err))
		return;
	va_start(ap, fmt);
	vsnprintf(ctx->err + used, sizeof(ctx->err) - used, fmt, ap);
	va_end(ap);
	while ((nl = strpbrk(ctx->err, "\r\n")) != NULL)
		*nl = ' ';
}

void dpg_ctx_clear_err(struct dpg_ctx *ctx)
{
	if (ctx != NULL)
		ctx->err[0] = '\0';
}

dpg_status_t dpg_ctx_fail(struct dpg_ctx *ctx, int rc, const char *what,
			  const struct dpg_err *e)
{
	dpg_status_t st = dpg_status_of(rc);
	const char *msg;

	if (st == DPG_OK) {
		dpg_ctx_clear_err(ctx);
		return DPG_OK;
	}
	msg = e != NULL && e->msg[0] != '\0' ? e->msg :
	      st == DPG_ERR_ABORTED ? "aborted (dpg_abort was called)" :
	      dpg_strerror(st);
	if (what == NULL)
		dpg_ctx_seterr(ctx, "%s", msg);
	else
		dpg_ctx_seterr(ctx, "%s %s: %s", dpg_ctx_who(ctx), what, msg);
	return st;
}

const char *dpg_strerror(dpg_status_t status)
{
	switch (status) {
	case DPG_OK: return "success";
	case DPG_ERR_INVALID: return "invalid argument";
	case DPG_ERR_ENV: return "missing or inconsistent environment";
	case DPG_ERR_TIMEOUT: return "timeout";
	case DPG_ERR_PEER: return "peer failure";
	case DPG_ERR_AUTH: return "authentication failure (job secret)";
	case DPG_ERR_SYSTEM: return "system error";
	case DPG_ERR_NOMEM: return "out of memory";
	case DPG_ERR_UNSUPPORTED: return "not supported by this build or host";
	case DPG_ERR_BACKEND: return "backend (NCCL/CUDA) error";
	case DPG_ERR_ABORTED: return "aborted";
	}
	return "unknown status";
}

const char *dpg_last_error(const dpg_ctx_t *ctx)
{
	if (ctx == NULL)
		return "dpg: no context: a call was given a NULL handle (a "
		       "finalized context, a failed dpg_init that could not "
		       "allocate one, or a NULL communicator or mesh) and "
		       "returned DPG_ERR_INVALID";
	return ctx->err;
}

/* ------------------------------------------------------------ state */

int dpg_ctx_dead_peer(const struct dpg_ctx *ctx, const char **msg)
{
	int r = __atomic_load_n(&ctx->dead_rank, __ATOMIC_ACQUIRE);

	if (msg != NULL)
		*msg = r >= 0 ? ctx->dead_msg : NULL;
	return r;
}

int dpg_ctx_await_dead_peer(struct dpg_ctx *ctx, const char **msg)
{
	int64_t until;
	int r = dpg_ctx_dead_peer(ctx, msg);

	if (r >= 0 || !ctx->watch.running)
		return r;
	until = dpg_now_ms() + ctx->watch.dead_ms + 2 * ctx->watch.beat_ms;
	while (r < 0 && dpg_now_ms() < until && !dpg_ctx_aborted(ctx)) {
		struct timespec ts = { 0, 10 * 1000 * 1000 };

		nanosleep(&ts, NULL);
		r = dpg_ctx_dead_peer(ctx, msg);
	}
	return r;
}

bool dpg_ctx_aborted(const struct dpg_ctx *ctx)
{
	return __atomic_load_n(&ctx->abort_flag, __ATOMIC_SEQ_CST) != 0;
}

void dpg_ctx_set_failed(struct dpg_ctx *ctx)
{
	if (ctx)
		ctx->failed = true;
}

const struct dpg_gpumod *dpg_ctx_gpumod(const struct dpg_ctx *ctx)
{
	return ctx != NULL && ctx->backend == DPG_BACKEND_NCCL ? ctx->gpu.t : NULL;
}

int dpg_ctx_device(const struct dpg_ctx *ctx)
{
	return ctx ? ctx->device : -1;
}

const char *dpg_ctx_who(const struct dpg_ctx *ctx)
{
	return ctx == NULL ? "dpg" : ctx->who;
}

const char *dpg_ctx_key_ns(const struct dpg_ctx *ctx)
{
	return ctx == NULL ? "dpg" : ctx->ns;
}

const char *dpg_ctx_rank_host(const struct dpg_ctx *ctx, int r)
{
	if (ctx == NULL || r < 0 || r >= ctx->j.world_size)
		return "?";
	if (ctx->ranks == NULL)
		return ctx->node;
	return ctx->ranks[r].node;
}

struct dpg_store *dpg_ctx_store(const struct dpg_ctx *ctx)
{
	return ctx == NULL ? NULL : ctx->store;
}

/* ------------------------------------------------------------ accessors */

int dpg_rank(const dpg_ctx_t *ctx)
{
	return ctx == NULL ? -1 : ctx->j.rank;
}

int dpg_world_size(const dpg_ctx_t *ctx)
{
	return ctx == NULL ? -1 : ctx->j.world_size;
}

int dpg_local_rank(const dpg_ctx_t *ctx)
{
	return ctx == NULL ? -1 : ctx->j.local_rank;
}

int dpg_local_world_size(const dpg_ctx_t *ctx)
{
	return ctx == NULL ? -1 : ctx->j.local_world_size;
}

dpg_backend_t dpg_backend(const dpg_ctx_t *ctx)
{
	return ctx == NULL ? DPG_BACKEND_AUTO : ctx->backend;
}
