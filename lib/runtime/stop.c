/* SPDX-License-Identifier: BSD-3-Clause */
/* stop.c - save-then-requeue: a signal (Slurm's warning before the time
 * limit, or the SIGTERM of preemption) only sets a flag; every step the
 * program asks dpg_stop_requested, one collective answered alike on all. */
#include "stop.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctx.h"
#include "parse.h"
#include "runtime.h"

#include "dpg.h"

/* The one library-wide mutable static, and tolerable only because a signal
 * handler can reach nothing else: the number of the first stop signal this
 * process received (0 = none).  Written by the handler, read by
 * dpg_stop_requested; sig_atomic_t, nothing else happens in the handler. */
static volatile sig_atomic_t stop_sig;

static void on_stop_signal(int sig)
{
	if (stop_sig == 0)
		stop_sig = sig;
}

int dpg_stop_signal(void)
{
	return (int)stop_sig;
}

void dpg_stop_raise_local(int sig)
{
	on_stop_signal(sig);
}

static int install(int sig, struct dpg_err *e)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sa.sa_flags = SA_RESTART;	/* a save in progress goes on */
	sigemptyset(&sa.sa_mask);
	if (sigaction(sig, &sa, NULL) != 0)
		return dpg_errs(e, DPG_ERR_SYSTEM, "%s: sigaction(%s): %s",
				DPG_REQUEUE_VAR, strsignal(sig), strerror(errno));
	return 0;
}

/* The plugin blocks SIGUSR1 in each task before exec, so that a warning
 * during the program's start stays pending instead of killing it: now that
 * the handler is in, let it (and a pending one) through. */
static int unblock_warning(struct dpg_err *e)
{
	sigset_t set;
	int rc;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	rc = pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	if (rc != 0)
		return dpg_errs(e, DPG_ERR_SYSTEM, "%s: pthread_sigmask: %s",
				DPG_REQUEUE_VAR, strerror(rc));
	return 0;
}

static int read_seconds(const char *var, unsigned long max, unsigned long *out,
			struct dpg_err *e)
{
	const char *s = getenv(var);

	*out = 0;
	if (s == NULL || *s == '\0')
		return 0;
	if (dpg_parse_ulong(s, 0, max, out) != 0)
		return dpg_errs(e, DPG_ERR_ENV, "%s=%s: expected a number of "
				"seconds (e.g. %s=120)", var, s, var);
	return 0;
}

int dpg_stop_env(struct dpg_ctx *ctx, struct dpg_err *e)
{
	unsigned long grace, end;

	if (read_seconds(DPG_REQUEUE_VAR, 31ul * 86400, &grace, e) != 0 ||
	    read_seconds(DPG_END_TIME_VAR, 1ul << 40, &end, e) != 0)
		return -DPG_ERR_ENV;
	ctx->stop_grace = (int64_t)grace;
	ctx->stop_at = grace > 0 && end > grace ? (int64_t)(end - grace) : 0;
	if (grace == 0)
		return 0;
	if (install(SIGUSR1, e) != 0 || install(SIGTERM, e) != 0)
		return -DPG_ERR_SYSTEM;
	return unblock_warning(e);
}

/* This rank's answer: 1 on a signal or past DPG_END_TIME - GRACE. */
static int32_t local_stop(const struct dpg_ctx *ctx)
{
	if (stop_sig != 0)
		return 1;
	return ctx->stop_at > 0 && (int64_t)time(NULL) >= ctx->stop_at ? 1 : 0;
}

static void log_first(struct dpg_ctx *ctx, int32_t mine)
{
	int sig = (int)stop_sig;

	if (ctx->stop_seen)
		return;
	ctx->stop_seen = true;
	if (mine && sig != 0)
		fprintf(stderr, "dpg: %s: got %s: stopping at this step (save, "
			"then exit %d to be requeued)\n", ctx->who, strsignal(sig),
			DPG_EXIT_REQUEUE);
	else if (mine)
		fprintf(stderr, "dpg: %s: %s GRACE=%lld s before %s: stopping at "
			"this step (save, then exit %d to be requeued)\n", ctx->who,
			DPG_REQUEUE_VAR, (long long)ctx->stop_grace,
			DPG_END_TIME_VAR, DPG_EXIT_REQUEUE);
	else if (ctx->j.rank == 0)
		fprintf(stderr, "dpg: %s: another rank asked to stop: stopping at "
			"this step\n", ctx->who);
}

static dpg_status_t agree(struct dpg_ctx *ctx, int32_t *v)
{
	void *out = NULL;
	size_t *offs = NULL, *lens = NULL;
	dpg_status_t st;
	int32_t any = 0;

	if (ctx->backend == DPG_BACKEND_CPU)
		return dpg_all_reduce(dpg_world(ctx), v, v, 1, DPG_I32, DPG_MAX, NULL);
	/* NCCL data lives on the GPU: the flag goes through host bytes */
	st = dpg_all_gather_bytes(dpg_world(ctx), v, sizeof(*v), &out, &offs, &lens);
	if (st == DPG_OK) {
		for (int r = 0; r < dpg_world_size(ctx); r++) {
			int32_t x;

			memcpy(&x, (char *)out + offs[r], sizeof(x));
			any |= x;
		}
		*v = any != 0;
	}
	free(out);
	free(offs);
	free(lens);
	return st;
}

dpg_status_t dpg_stop_requested(dpg_ctx_t *ctx, int *stop)
{
	int32_t mine, v;
	dpg_status_t st;

	if (ctx == NULL || stop == NULL) {
		if (ctx != NULL)
			dpg_ctx_seterr(ctx, "%s dpg_stop_requested: stop is NULL",
				       ctx->who);
		return DPG_ERR_INVALID;
	}
	*stop = 0;
	mine = v = local_stop(ctx) || ctx->stop_seen;
	st = dpg_world_size(ctx) > 1 ? agree(ctx, &v) : DPG_OK;
	if (st != DPG_OK)
		return st;
	if (v)
		log_first(ctx, mine);
	*stop = v != 0;
	dpg_ctx_clear_err(ctx);
	return DPG_OK;
}
