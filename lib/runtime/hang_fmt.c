/* SPDX-License-Identifier: BSD-3-Clause */
/* hang_fmt.c - the hang report's one line from every rank's answer: the
 * ranks waiting in one call grouped ("ranks 0-2,4-5"), then each other rank
 * by name (see hang.h). */
#include "hang.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A bounded line: appends stop at the end, which then reads "...". */
struct line {
	char *p;
	size_t len, used;
	bool full;
};

__attribute__((format(printf, 2, 3)))
static void add(struct line *l, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (l->full)
		return;
	va_start(ap, fmt);
	n = vsnprintf(l->p + l->used, l->len - l->used, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= l->len - l->used) {
		l->full = true;
		if (l->len >= 4)
			memcpy(l->p + l->len - 4, "...", 4);
		return;
	}
	l->used += (size_t)n;
}

void dpg_hang_ranges(const bool *pick, int n, char *out, size_t len)
{
	struct line l = { out, len, 0, false };
	bool first = true;

	out[0] = '\0';
	for (int r = 0; r < n; r++) {
		int e = r;

		if (!pick[r])
			continue;
		while (e + 1 < n && pick[e + 1])
			e++;
		if (e == r)
			add(&l, "%s%d", first ? "" : ",", r);
		else
			add(&l, "%s%d-%d", first ? "" : ",", r, e);
		first = false;
		r = e;
	}
}

static bool waiting(const struct dpg_hang_ans *a)
{
	return a->ok && (a->v.state == DPG_TRACK_IN || a->v.state == DPG_TRACK_FAILED);
}

static bool same_call(const struct dpg_hang_ans *a, const struct dpg_hang_ans *b)
{
	return a->v.seq == b->v.seq && strcmp(a->v.kind, b->v.kind) == 0 &&
	       strcmp(a->v.comm, b->v.comm) == 0;
}

/* "allreduce #812 on w: ranks 0-2,4-5 waiting since 40.1 s" for the call
 * of rank r and every rank waiting in the same one (marked in done). */
static void add_group(struct line *l, const struct dpg_hang_ans *a, int n, int r,
		      bool *done)
{
	bool *pick = calloc((size_t)n, sizeof(*pick));
	char ranks[512];
	int64_t since = 0;
	int cnt = 0;

	if (pick == NULL)
		return;
	for (int s = r; s < n; s++)
		if (waiting(&a[s]) && same_call(&a[r], &a[s])) {
			pick[s] = done[s] = true;
			since = a[s].ago_ms > since ? a[s].ago_ms : since;
			cnt++;
		}
	dpg_hang_ranges(pick, n, ranks, sizeof(ranks));
	free(pick);
	add(l, "%s #%" PRIu64 " on %s: rank%s %s waiting since %.1f s", a[r].v.kind,
	    a[r].v.seq, a[r].v.comm, cnt > 1 ? "s" : "", ranks, (double)since / 1000.0);
}

/* "rank 3 (n2, GPU 0000:43:00.0) last entered allreduce #811, 41.0 s ago" */
static void add_rank(struct line *l, const struct dpg_hang_ans *a, int r,
		     const char *node, double wait_s)
{
	if (!a->ok) {
		add(l, "rank %d (%s): no answer in %.1f s (stopped, or gone)", r, node, wait_s);
		return;
	}
	add(l, "rank %d (%s%s%s)", r, node, a->busid[0] ? ", GPU " : "", a->busid);
	if (a->v.state == DPG_TRACK_NONE)
		add(l, " has entered no collective yet");
	else
		add(l, " last entered %s #%" PRIu64 "%s%s, %.1f s ago", a->v.kind, a->v.seq,
		    a->v.comm[0] ? " on " : "", a->v.comm, (double)a->ago_ms / 1000.0);
}

void dpg_hang_format(const struct dpg_hang_ans *a, int n, const char *const *nodes,
		     double wait_s, char *out, size_t len)
{
	struct line l = { out, len, 0, false };
	bool *done = calloc((size_t)n, sizeof(*done));
	const char *sep = "";

	out[0] = '\0';
	if (done == NULL || len < 8) {
		free(done);
		return;
	}
	for (int r = 0; r < n; r++)
		if (waiting(&a[r]) && !done[r]) {
			add(&l, "%s", sep);
			add_group(&l, a, n, r, done);
			sep = "; ";
		}
	for (int r = 0; r < n; r++)
		if (!done[r]) {
			add(&l, "%s", sep);
			add_rank(&l, &a[r], r, nodes[r], wait_s);
			sep = "; ";
		}
	free(done);
}
