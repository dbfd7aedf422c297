/* SPDX-License-Identifier: BSD-3-Clause */
/* topocache_load.c - the node's topology through its cache: load the saved
 * XML on a hit, else discover the node live and save what hwloc found. */
#include "topocache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One load's work state. */
struct cached {
	const struct dpg_topo_cache_cfg *c;
	char *key;
	size_t keylen;
	int dirfd;
	char *note;
	size_t note_len;
};

/* Keep the first thing worth a log line. */
static void note(struct cached *w, const char *what, const struct dpg_err *e)
{
	if (w->note_len == 0 || w->note[0] != '\0')
		return;
	snprintf(w->note, w->note_len, "%s%s%s", what, e != NULL ? ": " : "",
		 e != NULL ? e->msg : "");
}

/* The saved XML, through the forked parse check; 1 on a hit. */
static int try_hit(struct cached *w, struct dpg_topo **out)
{
	struct dpg_err e;
	char *xml = NULL, src[DPG_TOPO_PATH_MAX + 32];
	size_t len = 0;
	int rc;

	rc = dpg_topo_cache_read(w->dirfd, w->c->owner, w->key, w->keylen, &xml, &len, &e);
	if (rc == 1) {
		snprintf(src, sizeof(src), "cache:%s/%s", w->c->dir, DPG_TOPO_CACHE_FILE);
		if (dpg_topo_load_here_isolated(xml, len, src, w->c->timeout_ms, out, &e) == 0) {
			free(xml);
			return 1;
		}
		free(xml);
		note(w, w->c->may_write ? "topology cache corrupt, discarded and rebuilt" :
		     "topology cache corrupt, not used", &e);
	} else if (rc < 0) {
		note(w, w->c->may_write ? "topology cache discarded and rebuilt" :
		     "topology cache not used", &e);
	}
	if (rc != 0 && w->c->may_write && dpg_topo_cache_discard(w->dirfd, &e) != 0)
		note(w, "topology cache", &e);
	return 0;
}

/* Live discovery, saved when allowed. */
static int discover(struct cached *w, struct dpg_topo **out, struct dpg_err *err)
{
	bool save = w->dirfd >= 0 && w->key != NULL && w->c->may_write;
	char *xml = NULL;
	size_t len = 0;
	struct dpg_err e;

	if (dpg_topo_load_live_xml(out, save ? &xml : NULL, &len, err) != 0)
		return -1;
	if (save && dpg_topo_cache_write(w->dirfd, w->key, w->keylen, xml, len, &e) != 0)
		note(w, "topology cache not saved", &e);
	free(xml);
	return 0;
}

/* The key and the directory; on failure the load goes on live, uncached. */
static void open_cache(struct cached *w)
{
	struct dpg_err e;
	int rc;

	if (dpg_topo_cache_key(w->c->root, &w->key, &w->keylen, &e) != 0) {
		note(w, "topology cache not used", &e);
		return;
	}
	rc = dpg_topo_cache_dir_open(w->c->dir, w->c->owner, w->c->may_write, &w->dirfd, &e);
	if (rc != 0 && rc != -DPG_ERR_ENV)	/* absent and read-only: silent */
		note(w, "topology cache not used", &e);
}

int dpg_topo_load_cached(const struct dpg_topo_cache_cfg *c, struct dpg_topo **out,
			 bool *hit, char *note_buf, size_t note_len, struct dpg_err *err)
{
	struct cached w = { .c = c, .dirfd = -1, .note = note_buf, .note_len = note_len };
	int rc = 0;

	if (out == NULL || hit == NULL || c == NULL)
		return dpg_errf(err, "dpg_topo_load_cached: no output");
	*out = NULL;
	*hit = false;
	if (note_len > 0)
		note_buf[0] = '\0';
	if (c->dir != NULL && c->dir[0] != '\0')
		open_cache(&w);
	if (w.dirfd >= 0)
		*hit = try_hit(&w, out) == 1;
	if (!*hit)
		rc = discover(&w, out, err);
	if (w.dirfd >= 0)
		close(w.dirfd);
	free(w.key);
	return rc;
}
