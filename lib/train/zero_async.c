/* SPDX-License-Identifier: BSD-3-Clause */
/* zero_async.c - dpg_zero_save_async and dpg_zero_save_wait: the shard copied
 * to host memory, written by a background thread, committed on the caller's. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "thread.h"
#include "digest.h"
#include "dpg_zero.h"
#include "runtime.h"
#include "zero_impl.h"

/* A save in flight.  The writer thread reads only the layout (fixed after
 * commit), z->snap and this, and writes only rc and err; the caller's
 * thread looks at them after joining it. */
struct zsave {
	pthread_t th;
	bool thread;		/* a writer thread runs (this rank writes a shard) */
	struct dpg_zero *z;
	char *dir;
	long step;
	void *extra;
	size_t extra_len;
	int rc;			/* this rank's result: 0 or -DPG_ERR_* (err) */
	struct dpg_err err;
};

static void *writer(void *arg)
{
	struct zsave *s = arg;
	struct dpg_zero *z = s->z;

	if (dpg_ckpt_prepare(s->dir, s->step, &s->err) != 0 ||
	    dpg_ckpt_write_shard(s->dir, s->step, &z->L, z->r, z->nstate, z->snap,
				 &s->err) != 0) {
		dpg_err_prefix(&s->err, "zero_save_async");
		s->rc = -DPG_ERR_SYSTEM;
	}
	dpg_digest_thread_stop();
	return NULL;
}

/* The blocking part: this rank's state into host memory (kept for the
 * next save). */
static int snapshot(struct dpg_zero *z, struct dpg_err *e)
{
	size_t bytes = z->L.shard_numel * sizeof(float);
	int k, rc;

	for (k = 0; k < z->nstate; k++) {
		if (!z->snap[k] && !(z->snap[k] = malloc(bytes ? bytes : 1)))
			return dpg_errs(e, DPG_ERR_NOMEM, "zero_save_async: out of memory for "
					"the %zu-byte host copy of the state", bytes);
		if (!z->mem.on_gpu)
			memcpy(z->snap[k], z->state[k], bytes);
		else if ((rc = dpg_zcopy(z, z->snap[k], z->state[k], bytes, 1, e)) != 0)
			return rc;
	}
	return 0;
}

static void zsave_free(struct zsave *s)
{
	if (!s)
		return;
	free(s->dir);
	free(s->extra);
	free(s);
}

/* A local failure after the checks (memory, the copy, the thread) does not
 * return at once: it is this rank's result for the agreement in wait, which
 * every rank reaches. */
static void start(struct dpg_zero *z, struct zsave *s)
{
	int e;

	if (!(z->rep == NULL || dpg_mesh_coord(z->mesh, 0) == 0))
		return;		/* another replica writes this shard */
	if ((s->rc = snapshot(z, &s->err)) != 0)
		return;
	if ((e = dpg_thread_start(&s->th, writer, s)) != 0) {
		s->rc = dpg_errs(&s->err, DPG_ERR_SYSTEM, "zero_save_async: cannot start the "
				 "writer thread: %s", strerror(e));
		return;
	}
	s->thread = true;
}

static int save_async(struct dpg_zero *z, const char *dir, const void *extra,
		      size_t extra_len, struct dpg_err *e)
{
	const char *op = "zero_save_async";
	struct zsave *s;
	int rc;

	if ((rc = dpg_zsave_settle(z, e)) != 0 ||
	    (rc = dpg_zsave_check(z, dir, extra, extra_len, op, e)) != 0)
		return rc;
	s = calloc(1, sizeof(*s));
	if (s) {
		s->z = z;
		s->step = z->step;
		s->extra_len = extra_len;
		s->dir = strdup(dir);
		s->extra = malloc(extra_len ? extra_len : 1);
	}
	if (!s || !s->dir || !s->extra) {
		zsave_free(s);
		return dpg_errs(e, DPG_ERR_NOMEM, "%s: out of memory", op);
	}
	if (extra_len)
		memcpy(s->extra, extra, extra_len);
	start(z, s);
	z->saving = s;
	return 0;
}

int dpg_zsave_settle(struct dpg_zero *z, struct dpg_err *e)
{
	struct zsave *s = z->saving;
	int rc;

	if (!s)
		return 0;
	if (s->thread)
		(void)pthread_join(s->th, NULL);	/* only EDEADLK/EINVAL/ESRCH: not ours */
	z->saving = NULL;
	if (s->rc != 0)
		*e = s->err;
	rc = dpg_zsave_commit(z, s->dir, s->step, s->extra, s->extra_len, s->rc,
			      "zero_save_wait", e);
	zsave_free(s);
	return rc;
}

void dpg_zsave_drop(struct dpg_zero *z)
{
	int k;

	if (z->saving && z->saving->thread)
		(void)pthread_join(z->saving->th, NULL);
	zsave_free(z->saving);
	z->saving = NULL;
	for (k = 0; k < DPG_CKPT_MAX_STATE; k++) {
		free(z->snap[k]);
		z->snap[k] = NULL;
	}
}

dpg_status_t dpg_zero_save_async(dpg_zero_t *z, const char *dir, const void *extra,
				 size_t extra_len)
{
	struct dpg_err e = { { 0 } };

	if (!z)
		return DPG_ERR_INVALID;
	return dpg_zedge(z, save_async(z, dir, extra, extra_len, &e), &e);
}

dpg_status_t dpg_zero_save_wait(dpg_zero_t *z)
{
	struct dpg_err e = { { 0 } };

	if (!z)
		return DPG_ERR_INVALID;
	return dpg_zedge(z, dpg_zsave_settle(z, &e), &e);
}
