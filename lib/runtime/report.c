/* SPDX-License-Identifier: BSD-3-Clause */
/* report.c - the straggler report: every rank's time inside collectives over
 * a window (steps marked by dpg_step_mark), gathered on the world, and the
 * line that names the rank the others waited for (dpg.h). */
#include "report.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "comm.h"
#include "ctx.h"
#include "parse.h"

/* One rank's window, as the ranks exchange it (host byte order). */
struct rep_rec {
	int64_t coll_ns, wall_ns, steps, pad;
	char busid[32];
};

int dpg_report_env(struct dpg_ctx *ctx, struct dpg_err *e)
{
	const char *s = getenv(DPG_REPORT_VAR);
	unsigned long n = 0;

	if (s != NULL && *s != '\0' && dpg_parse_ulong(s, 0, 1000000000ul, &n) != 0)
		return dpg_errs(e, DPG_ERR_ENV, "%s=%s: not a number of steps (e.g. "
				"%s=100 reports every 100 steps, 0 = off)", DPG_REPORT_VAR,
				s, DPG_REPORT_VAR);
	ctx->track.report_every = n;
	return 0;
}

/* The rank the others waited for most: the least time inside collectives. */
static int slowest(const struct rep_rec *r, int n)
{
	int s = 0;

	for (int i = 1; i < n; i++)
		if (r[i].coll_ns < r[s].coll_ns)
			s = i;
	return s;
}

static void rep_line(struct dpg_ctx *ctx, const struct rep_rec *r, int n, uint64_t step0,
		     char *out, size_t len)
{
	int s = slowest(r, n);
	double wait = 0, wall = 0, steps = (double)r[0].steps;
	char who[160];

	for (int i = 0; i < n; i++) {
		wall += (double)r[i].wall_ns / n;
		if (i != s)
			wait += (double)(r[i].coll_ns - r[s].coll_ns) / (n - 1);
	}
	snprintf(who, sizeof(who), "rank %d (%s%s%.31s)", s, dpg_ctx_rank_host(ctx, s),
		 r[s].busid[0] ? ", GPU " : "", r[s].busid);
	if (n == 1)
		snprintf(out, len, "dpg report: one rank, nobody waits");
	else if (steps > 0)
		snprintf(out, len, "dpg report: steps %" PRIu64 "-%" PRIu64 ": slowest %s: "
			 "the others waited %.1f ms per step for it, %.0f%% of a %.1f ms "
			 "step", step0 + 1, step0 + (uint64_t)r[0].steps, who,
			 wait / steps / 1e6, wall > 0 ? 100.0 * wait / wall : 0.0,
			 wall / steps / 1e6);
	else
		snprintf(out, len, "dpg report: the last %.2f s: slowest %s: the others "
			 "waited %.1f ms for it, %.0f%% of the time", wall / 1e9, who,
			 wait / 1e6, wall > 0 ? 100.0 * wait / wall : 0.0);
}

/* This rank's window, then a new one (the exchange belongs to neither). */
static void rep_take(struct dpg_track *t, struct rep_rec *mine, const char *busid)
{
	memset(mine, 0, sizeof(*mine));
	mine->coll_ns = t->coll_ns;
	mine->wall_ns = dpg_now_ns() - t->window_ns;
	mine->steps = (int64_t)t->steps;
	snprintf(mine->busid, sizeof(mine->busid), "%s", busid);
}

static void rep_restart(struct dpg_track *t)
{
	t->step0 += t->steps;
	t->steps = 0;
	t->coll_ns = 0;
	t->window_ns = dpg_now_ns();
}

dpg_status_t dpg_straggler_report(dpg_ctx_t *ctx, char *buf, size_t len)
{
	struct rep_rec mine, *all;
	void *out = NULL;
	size_t *offs = NULL, *lens = NULL;
	uint64_t step0;
	dpg_status_t st;
	int n;

	if (ctx == NULL || ctx->world == NULL || (buf == NULL && len > 0)) {
		if (ctx != NULL)
			dpg_ctx_seterr(ctx, "%s straggler_report: invalid argument: %s",
				       ctx->who, ctx->world == NULL ? "the context did "
				       "not join a job" : "NULL buffer");
		return DPG_ERR_INVALID;
	}
	n = ctx->j.world_size;
	step0 = ctx->track.step0;
	rep_take(&ctx->track, &mine, ctx->j.gpu_busid);
	st = dpg_all_gather_bytes(&ctx->world->c, &mine, sizeof(mine), &out, &offs, &lens);
	rep_restart(&ctx->track);
	if (st != DPG_OK)
		return st;
	all = malloc((size_t)n * sizeof(*all));
	for (int r = 0; all != NULL && r < n; r++) {
		memset(&all[r], 0, sizeof(all[r]));
		memcpy(&all[r], (char *)out + offs[r], lens[r] < sizeof(all[r]) ?
		       lens[r] : sizeof(all[r]));
		all[r].busid[sizeof(all[r].busid) - 1] = '\0';
	}
	if (all != NULL)
		rep_line(ctx, all, n, step0, ctx->track.last_report,
			 sizeof(ctx->track.last_report));
	free(all);
	free(out);
	free(offs);
	free(lens);
	if (all == NULL)
		return dpg_ctx_fail(ctx, -DPG_ERR_NOMEM, "straggler_report", NULL);
	if (len > 0)
		snprintf(buf, len, "%s", ctx->track.last_report);
	return DPG_OK;
}

dpg_status_t dpg_report_every(dpg_ctx_t *ctx, unsigned steps)
{
	if (ctx == NULL)
		return DPG_ERR_INVALID;
	dpg_ctx_clear_err(ctx);
	ctx->track.report_every = steps;
	return DPG_OK;
}

dpg_status_t dpg_step_mark(dpg_ctx_t *ctx)
{
	struct dpg_track *t;
	dpg_status_t st;

	if (ctx == NULL)
		return DPG_ERR_INVALID;
	t = &ctx->track;
	t->steps++;
	dpg_ctx_clear_err(ctx);
	if (t->report_every == 0 || (t->step0 + t->steps) % t->report_every != 0)
		return DPG_OK;
	st = dpg_straggler_report(ctx, NULL, 0);
	if (st == DPG_OK && ctx->j.rank == 0)
		fprintf(stderr, "%s\n", t->last_report);
	return st;
}
