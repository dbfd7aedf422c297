/* SPDX-License-Identifier: BSD-3-Clause */
/* xchg.c - the all-exchange over the rendezvous store (see xchg.h): the
 * members publish, member 0 collects, checks and republishes one table. */
#include "xchg.h"

#include "le.h"
#include "net.h"	/* dpg_now_ms */
#include "store.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KEY_MAX DPG_STORE_KEY_MAX

void dpg_xchg_free(struct dpg_xchg *x)
{
	free(x->blob);
	free(x->val);
	free(x->vlen);
	memset(x, 0, sizeof(*x));
}

static int xchg_parse(const uint8_t *b, size_t len, int n, struct dpg_xchg *x,
		      struct dpg_err *e)
{
	size_t o = 1;

	x->val = calloc((size_t)n, sizeof(*x->val));
	x->vlen = calloc((size_t)n, sizeof(*x->vlen));
	x->n = n;
	if (x->val == NULL || x->vlen == NULL)
		return dpg_errs(e, DPG_ERR_NOMEM, "out of memory for an exchange "
				"of %d values", n);
	for (int i = 0; i < n; i++) {
		uint32_t l;

		if (len - o < 4 || (l = dpg_le_get32(b + o), len - o - 4 < l))
			return dpg_errs(e, DPG_ERR_PEER, "malformed exchange table "
					"from the store");
		x->val[i] = b + o + 4;
		x->vlen[i] = l;
		o += 4 + (size_t)l;
	}
	return 0;
}

/* Publish 'E' + status + message for the members waiting on key. */
static void publish_error(const struct dpg_xchg_group *g, const char *key,
			  int rc, const char *msg, int64_t deadline)
{
	size_t n = strlen(msg);
	uint8_t *b = malloc(n + 2);

	if (b == NULL)
		return;
	b[0] = 'E';
	b[1] = (uint8_t)-rc;
	memcpy(b + 2, msg, n);
	(void)dpg_store_set(g->store, key, b, n + 2, deadline, NULL);
	free(b);
}

/* After publishing an error, member 0 waits (briefly) until the members
 * that arrived have read it: the caller may stop the store right after. */
static void wait_acks(const struct dpg_xchg_group *g, int want)
{
	char key[KEY_MAX + 1];
	int64_t deadline = dpg_now_ms() + DPG_XCHG_GRACE_MS, got = 0;

	if (want <= 0)
		return;
	snprintf(key, sizeof(key), "%s/ack", g->prefix);
	while (dpg_store_add(g->store, key, 0, &got, deadline, NULL) == 0 &&
	       got < want && dpg_now_ms() < deadline)
		usleep(2000);
}

/* ------------------------------------------------------------ members */

/* A member other than 0: publish, then read the table (or the error). */
static int member_run(const struct dpg_xchg_group *g, const void *v,
		      size_t vlen, struct dpg_xchg *x, struct dpg_err *e)
{
	char key[KEY_MAX + 1], all[KEY_MAX + 1];
	int64_t deadline = dpg_now_ms() + g->timeout_ms;
	struct dpg_err se = { { 0 } };
	uint8_t *got = NULL;
	size_t glen = 0;
	int rc;

	snprintf(all, sizeof(all), "%s/all", g->prefix);
	snprintf(key, sizeof(key), "%s/%d", g->prefix, g->me);
	rc = dpg_store_set(g->store, key, v, vlen, deadline, &se);
	if (rc == 0)
		rc = dpg_store_get(g->store, all, (void **)&got, &glen,
				   deadline + DPG_XCHG_GRACE_MS, &se);
	if (rc != 0)	/* the store's own connection broke: rank 0 is gone */
		return dpg_errs(e, (dpg_status_t)-rc, "%.400s%s", se.msg,
				rc == -DPG_ERR_PEER && dpg_store_broken(g->store) &&
				!dpg_store_relayed(g->store) ?
				" (rank 0 serves the store: did it exit?)" : "");
	x->blob = got;
	if (glen >= 2 && got[0] == 'E') {
		dpg_status_t st = (dpg_status_t)got[1];

		/* tell member 0 we read it, so it may stop its store */
		snprintf(key, sizeof(key), "%s/ack", g->prefix);
		(void)dpg_store_add(g->store, key, 1, NULL, dpg_now_ms() + 1000,
				    NULL);
		return dpg_errs(e, st == DPG_OK ? DPG_ERR_PEER : st, "%.*s",
				(int)(glen - 2), (char *)got + 2);
	}
	if (glen < 1 || got[0] != 'T')
		return dpg_errs(e, DPG_ERR_PEER, "malformed exchange table under "
				"'%.300s'", all);
	return xchg_parse(got, glen, g->n, x, e);
}

/* ------------------------------------------------------------ member 0 */

/* What member 0 collected: vals[0] is its own value (not owned). */
struct gather {
	void **vals;
	size_t *lens;
	int missing;
	char list[200];		/* world ranks of the missing, "3, 7" */
	size_t lo;
};

static void gather_free(struct gather *G, int n)
{
	if (G->vals != NULL)
		for (int i = 1; i < n; i++)
			free(G->vals[i]);
	free(G->vals);
	free(G->lens);
}

static void note_missing(struct gather *G, int wr)
{
	int k = snprintf(G->list + G->lo, sizeof(G->list) - G->lo, "%s%d",
			 G->missing ? ", " : "", wr);

	if (k > 0 && (size_t)k < sizeof(G->list) - G->lo)
		G->lo += (size_t)k;
	G->missing++;
}

/* Read every member's value; the ones missing at the deadline are listed. */
static int collect(const struct dpg_xchg_group *g, struct gather *G,
		   int64_t t0, int64_t deadline, struct dpg_err *e)
{
	char key[KEY_MAX + 1];
	int rc;

	for (int i = 1; i < g->n; i++) {
		/* after the first miss, only look at who else is missing */
		int64_t dl = G->missing > 0 ? dpg_now_ms() + 20 : deadline;

		snprintf(key, sizeof(key), "%s/%d", g->prefix, i);
		rc = dpg_store_get(g->store, key, &G->vals[i], &G->lens[i], dl, e);
		if (rc == -DPG_ERR_TIMEOUT) {
			note_missing(G, g->world_ranks != NULL ? g->world_ranks[i] : i);
			G->vals[i] = NULL;
			continue;
		}
		if (rc != 0)
			return rc;
	}
	if (G->missing > 0)
		return dpg_errs(e, DPG_ERR_TIMEOUT, "rank%s %s (of %d) did not "
				"arrive within %.1f s (%d of %d arrived)",
				G->missing > 1 ? "s" : "", G->list, g->n,
				(double)(dpg_now_ms() - t0) / 1000.0,
				g->n - G->missing, g->n);
	return 0;
}

/* The table: 'T' + n x (u32 len, bytes). */
static int build_table(const struct gather *G, int n, uint8_t **out,
		       size_t *outlen, struct dpg_err *e)
{
	size_t total = 1, o = 1;
	uint8_t *b;

	for (int i = 0; i < n; i++)
		total += 4 + G->lens[i];
	b = malloc(total);
	if (b == NULL)
		return dpg_errs(e, DPG_ERR_NOMEM, "out of memory (%zu bytes) for "
				"an exchange", total);
	b[0] = 'T';
	for (int i = 0; i < n; i++) {
		dpg_le_put32(b + o, (uint32_t)G->lens[i]);
		if (G->lens[i] > 0)
			memcpy(b + o + 4, G->vals[i], G->lens[i]);
		o += 4 + G->lens[i];
	}
	*out = b;
	*outlen = total;
	return 0;
}

/* Member 0: collect, check, publish. */
static int leader_run(const struct dpg_xchg_group *g, const void *v,
		      size_t vlen, dpg_xchg_check_fn check, void *arg,
		      struct dpg_xchg *x, struct dpg_err *e)
{
	char all[KEY_MAX + 1];
	int64_t t0 = dpg_now_ms(), deadline = t0 + g->timeout_ms;
	struct gather G = { 0 };
	uint8_t *b = NULL;
	size_t total = 0;
	bool lost;
	int rc;

	snprintf(all, sizeof(all), "%s/all", g->prefix);
	G.vals = calloc((size_t)g->n, sizeof(*G.vals));
	G.lens = calloc((size_t)g->n, sizeof(*G.lens));
	if (G.vals == NULL || G.lens == NULL) {
		gather_free(&G, 0);
		rc = dpg_errs(e, DPG_ERR_NOMEM, "out of memory for an exchange of "
			      "%d values", g->n);
		publish_error(g, all, rc, e->msg, deadline);
		return rc;
	}
	G.vals[0] = (void *)v;
	G.lens[0] = vlen;
	rc = collect(g, &G, t0, deadline, e);
	/* a node leader lost (the store answered so, its connection fine):
	 * every member's wait is answered alike, and that node's ranks will
	 * never acknowledge */
	lost = rc == -DPG_ERR_PEER && !dpg_store_broken(g->store);
	if (rc == 0 && check != NULL) {
		struct dpg_xchg tmp = { NULL, (const uint8_t **)G.vals, G.lens, g->n };

		rc = check(arg, &tmp, e);
	}
	if (rc != 0) {
		publish_error(g, all, rc, e->msg, deadline + DPG_XCHG_GRACE_MS);
		if (!lost)
			wait_acks(g, g->n - 1 - G.missing);
		gather_free(&G, g->n);
		return rc;
	}
	rc = build_table(&G, g->n, &b, &total, e);
	gather_free(&G, g->n);
	if (rc == 0 && total > DPG_STORE_VALUE_MAX)
		rc = dpg_errs(e, DPG_ERR_INVALID, "the exchanged values total %zu "
			      "bytes, over the store's limit of %u", total,
			      (unsigned)DPG_STORE_VALUE_MAX);
	if (rc != 0) {
		free(b);
		publish_error(g, all, rc, e->msg, deadline);
		return rc;
	}
	rc = dpg_store_set(g->store, all, b, total, deadline, e);
	if (rc != 0) {
		free(b);
		return rc;
	}
	x->blob = b;
	return xchg_parse(b, total, g->n, x, e);
}

int dpg_xchg_run(const struct dpg_xchg_group *g, const void *v, size_t vlen,
		 dpg_xchg_check_fn check, void *arg, struct dpg_xchg *x,
		 struct dpg_err *e)
{
	memset(x, 0, sizeof(*x));
	if (g->me != 0)
		return member_run(g, v, vlen, x, e);
	return leader_run(g, v, vlen, check, arg, x, e);
}
