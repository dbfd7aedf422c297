/* SPDX-License-Identifier: BSD-3-Clause */
/* watch.c - the liveness watcher's thread (live.h): beat, read the watched
 * peer's heartbeat and the death record, once per round, on a store
 * connection of its own; the decisions are live.c's. */
#include "live.h"
#include "thread.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net.h"	/* dpg_now_ms */
#include "store.h"

#define KEY_MAX DPG_STORE_KEY_MAX
#define NAP_MS 50

enum round { ROUND_OK, ROUND_DEAD, ROUND_STOP };

static const char *node_of(const struct dpg_watch *w, int r)
{
	return w->nodes != NULL ? w->nodes[r] : NULL;
}

static int64_t op_deadline(const struct dpg_watch *w)
{
	return dpg_now_ms() + w->dead_ms;
}

/* A store call failed: stopped, or the store (rank 0) is gone or silent. */
static enum round store_lost(struct dpg_watch *w, int rc)
{
	char msg[DPG_LIVE_MSG_MAX], how[64];

	if (w->stop || rc == -DPG_ERR_ABORTED)
		return ROUND_STOP;
	if (rc == -DPG_ERR_TIMEOUT)
		snprintf(how, sizeof(how), "did not answer for %.1f s",
			 (double)w->dead_ms / 1000.0);
	else
		snprintf(how, sizeof(how), "was closed");
	dpg_live_store_message(msg, sizeof(msg), node_of(w, 0), how);
	w->dead_rank = 0;
	w->on_dead(w->arg, 0, msg);
	return ROUND_DEAD;
}

/* Report the death record (the first watcher's, so every rank says the
 * same). */
static enum round report(struct dpg_watch *w, const char *rec)
{
	char msg[DPG_LIVE_MSG_MAX];
	int64_t silent = 0;
	int rank = -1, by = -1;

	if (!dpg_live_parse(rec, w->n, &rank, &silent, &by))
		return ROUND_OK;	/* not ours to judge: a later round */
	dpg_live_message(msg, sizeof(msg), rank, node_of(w, rank), silent, by);
	w->dead_rank = rank;
	w->on_dead(w->arg, rank, msg);
	return ROUND_DEAD;
}

/* The watched peer stopped: write the record unless one exists, count it,
 * and report what the store holds. */
static enum round declare(struct dpg_watch *w, int peer, int64_t silent)
{
	char key[KEY_MAX + 1], nkey[KEY_MAX + 1], rec[64];
	struct dpg_err e = { { 0 } };
	void *cur = NULL;
	size_t curlen = 0;
	int64_t n = 0;
	enum round r;
	int rc, len = dpg_live_record(rec, sizeof(rec), peer, silent, w->rank);

	snprintf(key, sizeof(key), "%s/live/dead", w->ns);
	snprintf(nkey, sizeof(nkey), "%s/live/ndead", w->ns);
	rc = dpg_store_cas(w->store, key, NULL, 0, rec, (size_t)len, &cur, &curlen,
			   op_deadline(w), &e);
	if (rc == 0)
		rc = dpg_store_add(w->store, nkey, 1, &n, op_deadline(w), &e);
	if (rc != 0) {
		free(cur);
		return store_lost(w, rc);
	}
	if (cur != NULL && curlen > 0 && curlen < sizeof(rec)) {
		memcpy(rec, cur, curlen);
		rec[curlen] = '\0';
	}
	free(cur);
	r = report(w, rec);
	return r;
}

/* Someone counted a death: read and report the record. */
static enum round check_deaths(struct dpg_watch *w)
{
	char key[KEY_MAX + 1], rec[64];
	struct dpg_err e = { { 0 } };
	void *v = NULL;
	size_t len = 0;
	int64_t n = 0;
	int rc;

	snprintf(key, sizeof(key), "%s/live/ndead", w->ns);
	rc = dpg_store_add(w->store, key, 0, &n, op_deadline(w), &e);
	if (rc != 0)
		return store_lost(w, rc);
	if (n <= 0)
		return ROUND_OK;
	snprintf(key, sizeof(key), "%s/live/dead", w->ns);
	rc = dpg_store_get(w->store, key, &v, &len, op_deadline(w), &e);
	if (rc != 0)
		return store_lost(w, rc);
	snprintf(rec, sizeof(rec), "%.*s", (int)(len < sizeof(rec) ? len : 0),
		 (const char *)v);
	free(v);
	return report(w, rec);
}

/* One round: beat, read the peer, read the death count. */
static enum round round_once(struct dpg_watch *w, struct dpg_live_peer *p,
			     int peer)
{
	char key[KEY_MAX + 1];
	struct dpg_err e = { { 0 } };
	int64_t beat = 0;
	int rc;

	snprintf(key, sizeof(key), "%s/live/%d", w->ns, w->rank);
	rc = dpg_store_add(w->store, key, 1, &beat, op_deadline(w), &e);
	if (rc == 0) {
		snprintf(key, sizeof(key), "%s/live/%d", w->ns, peer);
		rc = dpg_store_add(w->store, key, 0, &beat, op_deadline(w), &e);
	}
	if (rc != 0)
		return store_lost(w, rc);
	if (dpg_live_observe(p, beat, dpg_now_ms(), w->dead_ms))
		return declare(w, peer, dpg_now_ms() - p->since_ms);
	return check_deaths(w);
}

static void nap(struct dpg_watch *w)
{
	for (int64_t left = w->beat_ms; left > 0 && !w->stop; left -= NAP_MS)
		nanosleep(&(struct timespec){ .tv_nsec = (long)(left < NAP_MS ? left :
								 NAP_MS) * 1000000L },
			  NULL);
}

static void *watch_main(void *arg)
{
	struct dpg_watch *w = arg;
	struct dpg_live_peer p = { 0 };
	int peer = dpg_live_target(w->rank, w->n);

	while (!w->stop && round_once(w, &p, peer) == ROUND_OK)
		nap(w);
	return NULL;
}

int dpg_watch_start(struct dpg_watch *w, struct dpg_err *e)
{
	int rc;

	w->dead_rank = -1;
	w->running = false;
	if (dpg_live_target(w->rank, w->n) < 0 || w->dead_ms <= 0 || w->beat_ms <= 0)
		return dpg_errf(e, "liveness watch: rank %d of %d, peer timeout %"
				PRId64 " ms: nothing to watch", w->rank, w->n, w->dead_ms);
	rc = dpg_thread_start(&w->thread, watch_main, w);
	if (rc != 0)
		return dpg_errs(e, DPG_ERR_SYSTEM, "cannot start the liveness "
				"watcher thread: %s", strerror(rc));
	w->running = true;
	return 0;
}

/* Tell the watchers this rank left on purpose (best effort, short). */
static void say_left(struct dpg_watch *w)
{
	char key[KEY_MAX + 1];
	int64_t v = 0;

	snprintf(key, sizeof(key), "%s/live/%d", w->ns, w->rank);
	(void)dpg_store_add(w->store, key, DPG_LIVE_LEFT, &v, dpg_now_ms() + 1000,
			    NULL);
}

void dpg_watch_stop(struct dpg_watch *w)
{
	if (w->running) {
		w->stop = 1;
		pthread_join(w->thread, NULL);
		w->running = false;
	}
	if (w->store != NULL) {
		w->stop = 0;	/* the store's abort flag: let the last word through */
		say_left(w);
		w->stop = 1;
		dpg_store_close(w->store);
		w->store = NULL;
	}
}
