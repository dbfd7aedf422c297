/* SPDX-License-Identifier: BSD-3-Clause */
/* hang.c - the hang report: the responder thread that answers for this rank,
 * the asker that collects every rank's answer after a timeout, and the one
 * line that sums them up (see hang.h). */
#include "hang.h"
#include "thread.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "ctx.h"
#include "net.h"	/* dpg_now_ms */
#include "store.h"

#define HANG_PARK_MS (24LL * 3600 * 1000)	/* a responder's GET, renewed */
#define HANG_ANSWER_MAX 256
#define HANG_LATE_MS 50
#define HANG_LATE_TOTAL_MS 1000

/* ------------------------------------------------------------ the answer */

/* The record this rank answers with: the main thread's while it is inside a
 * collective, else the library thread's (zero.c's prefetch gathers) when
 * that one is inside one or entered last. */
static void current(struct dpg_ctx *ctx, struct dpg_track_view *v)
{
	struct dpg_track_view b;

	dpg_track_read(&ctx->track, v);
	dpg_track_read(&ctx->bg, &b);
	if (b.state == DPG_TRACK_NONE || v->state == DPG_TRACK_IN)
		return;
	if (b.state == DPG_TRACK_IN || v->state == DPG_TRACK_NONE || b.enter_ns > v->enter_ns)
		*v = b;
}

/* "<state> <ago_ms> <dur_ms> <seq> <count> <kind> <busid|-> <comm>" on this
 * rank's own clock: durations only, so that nodes' clocks never meet. */
static int answer_text(struct dpg_ctx *ctx, char *buf, size_t len)
{
	struct dpg_track_view v;
	int64_t now = dpg_now_ns(), dur = 0;

	current(ctx, &v);
	if (v.state == DPG_TRACK_DONE || v.state == DPG_TRACK_FAILED)
		dur = v.end_ns - v.enter_ns;
	else if (v.state == DPG_TRACK_IN)
		dur = now - v.enter_ns;
	return snprintf(buf, len, "%d %" PRId64 " %" PRId64 " %" PRIu64 " %" PRIu64
			" %s %s %s", (int)v.state,
			v.state == DPG_TRACK_NONE ? 0 : (now - v.enter_ns) / 1000000,
			dur / 1000000, v.seq, v.count, v.kind,
			ctx->j.gpu_busid[0] != '\0' ? ctx->j.gpu_busid : "-",
			v.comm[0] != '\0' ? v.comm : "-");
}

static bool answer_parse(const char *s, struct dpg_hang_ans *a)
{
	static const char *const kinds[] = { "allreduce", "reduce_scatter", "all_gather",
					     "broadcast", "barrier" };
	char kind[32], busid[32], comm[sizeof(a->v.comm)];
	int st;

	memset(a, 0, sizeof(*a));
	if (sscanf(s, "%d %" SCNd64 " %" SCNd64 " %" SCNu64 " %" SCNu64 " %31s %31s %63s",
		   &st, &a->ago_ms, &a->dur_ms, &a->v.seq, &a->v.count, kind, busid,
		   comm) != 8 || st < DPG_TRACK_NONE || st > DPG_TRACK_FAILED)
		return false;
	a->v.state = (enum dpg_track_state)st;
	a->v.kind = "?";
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strcmp(kind, kinds[i]) == 0)
			a->v.kind = kinds[i];
	if (strcmp(busid, "-") != 0)
		snprintf(a->busid, sizeof(a->busid), "%s", busid);
	snprintf(a->v.comm, sizeof(a->v.comm), "%s", strcmp(comm, "-") ? comm : "");
	a->ok = true;
	return true;
}

/* ------------------------------------------------------------ the responder */

static void respond(struct dpg_ctx *ctx, uint64_t k)
{
	struct dpg_err e = { { 0 } };
	char key[DPG_STORE_KEY_MAX + 1], val[HANG_ANSWER_MAX];
	int n = answer_text(ctx, val, sizeof(val));

	snprintf(key, sizeof(key), "%s/hang/%" PRIu64 "/%d", ctx->ns, k, ctx->j.rank);
	(void)dpg_store_set(ctx->hang.store, key, val, (size_t)n,
			    dpg_now_ms() + DPG_HANG_WAIT_MS, &e);
	atomic_store(&ctx->hang.last_ms, dpg_now_ms());
}

/* Park on request k; answer it; go on with k + 1 until stopped or the store
 * is gone. */
static void *hang_main(void *arg)
{
	struct dpg_ctx *ctx = arg;
	char key[DPG_STORE_KEY_MAX + 1];
	uint64_t k = 1;

	while (!ctx->hang.stop) {
		struct dpg_err e = { { 0 } };
		void *v = NULL;
		size_t len = 0;
		int rc;

		snprintf(key, sizeof(key), "%s/hang/req/%" PRIu64, ctx->ns, k);
		rc = dpg_store_get(ctx->hang.store, key, &v, &len,
				   dpg_now_ms() + HANG_PARK_MS, &e);
		free(v);
		if (rc == 0)
			respond(ctx, k++);
		else if (rc != -DPG_ERR_TIMEOUT)
			break;
	}
	return NULL;
}

int dpg_hang_start(struct dpg_ctx *ctx, struct dpg_store *store, struct dpg_err *e)
{
	int rc;

	ctx->hang.store = store;
	ctx->hang.stop = 0;
	rc = dpg_thread_start(&ctx->hang.thread, hang_main, ctx);
	if (rc != 0)
		return dpg_errs(e, DPG_ERR_SYSTEM, "cannot start the hang responder "
				"thread: %s", strerror(rc));
	ctx->hang.running = true;
	return 0;
}

/* Answer the peers' reports a while longer (see hang.h). */
static void linger(struct dpg_hang *h)
{
	int64_t start = dpg_now_ms();

	for (;;) {
		int64_t now = dpg_now_ms(), last = atomic_load(&h->last_ms);

		if (last < h->asked_ms)
			last = h->asked_ms;
		if (now - last >= DPG_HANG_WAIT_MS || now - start >= 2 * DPG_HANG_WAIT_MS)
			return;
		nanosleep(&(struct timespec){ .tv_nsec = 50000000 }, NULL);
	}
}

void dpg_hang_stop(struct dpg_ctx *ctx)
{
	if (ctx->hang.running && ctx->hang.asked_ms > 0)
		linger(&ctx->hang);
	if (ctx->hang.running) {
		ctx->hang.stop = 1;
		pthread_join(ctx->hang.thread, NULL);
		ctx->hang.running = false;
	}
	dpg_store_close(ctx->hang.store);
	ctx->hang.store = NULL;
}

/* ------------------------------------------------------------ the asker */

/* Read rank r's answer to request k, waiting until deadline. */
static void read_answer(struct dpg_ctx *ctx, int64_t k, int r, struct dpg_hang_ans *a,
			int64_t deadline)
{
	struct dpg_err e = { { 0 } };
	char key[DPG_STORE_KEY_MAX + 1], *v = NULL, txt[HANG_ANSWER_MAX];
	size_t len = 0;

	snprintf(key, sizeof(key), "%s/hang/%" PRId64 "/%d", ctx->ns, k, r);
	if (dpg_store_get(ctx->store, key, (void **)&v, &len, deadline, &e) == 0 &&
	    len < sizeof(txt)) {
		memcpy(txt, v, len);
		txt[len] = '\0';
		answer_parse(txt, &a[r]);
	}
	free(v);
}

/* Post request k (a fresh number) and read every rank's answer until the
 * deadline; those not read by then (one silent rank spends the deadline for
 * the ranks after it) get HANG_LATE_MS each, late_total (at most
 * HANG_LATE_TOTAL_MS) in all.
 * a[r].ok says who answered.  -1 (e set) when the request could not be
 * posted. */
static int ask(struct dpg_ctx *ctx, struct dpg_hang_ans *a, int n, int64_t deadline,
	       int64_t late_total, struct dpg_err *e)
{
	char key[DPG_STORE_KEY_MAX + 1];
	int64_t k = 0, late_end;

	ctx->hang.asked_ms = dpg_now_ms();
	snprintf(key, sizeof(key), "%s/hang/n", ctx->ns);
	if (dpg_store_add(ctx->store, key, 1, &k, deadline, e) != 0)
		return -1;
	snprintf(key, sizeof(key), "%s/hang/req/%" PRId64, ctx->ns, k);
	if (dpg_store_set(ctx->store, key, "1", 1, deadline, e) != 0)
		return -1;
	{
		char mine[HANG_ANSWER_MAX];	/* this rank needs no round trip */

		answer_text(ctx, mine, sizeof(mine));
		answer_parse(mine, &a[ctx->j.rank]);
	}
	for (int r = 0; r < n && dpg_now_ms() < deadline; r++)
		if (!a[r].ok)
			read_answer(ctx, k, r, a, deadline);
	late_end = dpg_now_ms() + (late_total < HANG_LATE_TOTAL_MS ? late_total : HANG_LATE_TOTAL_MS);
	for (int r = 0; r < n; r++) {
		int64_t now = dpg_now_ms();

		if (!a[r].ok && now < late_end)
			read_answer(ctx, k, r, a, now + HANG_LATE_MS);
	}
	return 0;
}

/* The line from the answers: the node names, the call that timed out named
 * once. */
static void summarize(struct dpg_ctx *ctx, const char *comm, struct dpg_hang_ans *a,
		      int n, const char **nodes, int64_t wait, char *out, size_t len)
{
	for (int r = 0; r < n; r++) {
		nodes[r] = ctx->ranks[r].node;
		if (a[r].ok && strcmp(a[r].v.comm, comm) == 0 &&
		    a[r].v.state != DPG_TRACK_IN && a[r].v.state != DPG_TRACK_FAILED)
			a[r].v.comm[0] = '\0';
	}
	dpg_hang_format(a, n, nodes, (double)wait / 1000.0, out, len);
}

int64_t dpg_hang_wait_ms(int64_t timeout_ms)
{
	int64_t w = timeout_ms / 40;

	w = w < DPG_HANG_WAIT_MIN_MS ? DPG_HANG_WAIT_MIN_MS : w;
	w = w > DPG_HANG_WAIT_MS ? DPG_HANG_WAIT_MS : w;
	return w < timeout_ms ? w : timeout_ms;
}

void dpg_hang_report(struct dpg_ctx *ctx, const char *comm, char *out, size_t len)
{
	int n = ctx->j.world_size;
	int64_t wait = dpg_hang_wait_ms(ctx->timeout_ms);
	struct dpg_err e = { { 0 } };
	struct dpg_hang_ans *a;
	const char **nodes;

	out[0] = '\0';
	if (n <= 1 || ctx->store == NULL || ctx->ranks == NULL || !ctx->hang.running)
		return;
	a = calloc((size_t)n, sizeof(*a));
	nodes = calloc((size_t)n, sizeof(*nodes));
	if (a == NULL || nodes == NULL)
		snprintf(out, len, "(no hang report: out of memory)");
	else if (ask(ctx, a, n, dpg_now_ms() + wait, wait / 4, &e) != 0)
		snprintf(out, len, "(no hang report: %s)", e.msg);
	else
		summarize(ctx, comm, a, n, nodes, wait, out, len);
	free(a);
	free(nodes);
}
