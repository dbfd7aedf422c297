/* SPDX-License-Identifier: BSD-3-Clause */
/* ckpt.h - sharded checkpoint files: atomic per-rank shard files with
 * global offsets and SHA-256, metadata, the "latest" pointer, resharding. */
#ifndef DPG_LIB_CKPT_H
#define DPG_LIB_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "zlayout.h"

#define DPG_CKPT_MAX_STATE 3	/* master, and up to two optimizer moments */

/* On disk, in directory DIR:
 *   DIR/latest                  "step-00000042\n" (written last, atomically)
 *   DIR/step-00000042/meta      the model (parameter names, sizes, units),
 *                               the shard group size it was saved with, the
 *                               step, the optimizer kind and state count,
 *                               the caller's extra bytes, a SHA-256
 *   DIR/step-00000042/shard-00003  rank 3's shard: for every unit, the
 *                               unit-flat range it holds and nstate arrays
 *                               of fp32 (little-endian), a SHA-256
 * Every file is written as .NAME.tmp.PID.RAND (mode 0600), fsync'd,
 * renamed, and the directory fsync'd; directories are made 0700.  A crash
 * before "latest" is renamed leaves the previous checkpoint in force.
 * Nothing is opened through a symbolic link (DIR itself excepted). */

struct dpg_ckpt_meta {
	struct dpg_zlayout layout;	/* as saved (nranks = the old group) */
	long step;
	uint32_t version;		/* format version (ckhash.h: its digest) */
	int optimizer;			/* dpg_optimizer_t value */
	int nstate;
	void *extra;			/* malloc'd (NULL when extra_len == 0) */
	size_t extra_len;
	char stepdir[4096];		/* DIR/step-XXXXXXXX */
};

/* Name of the step directory of `step` under dir ("DIR/step-%08ld"). */
int dpg_ckpt_stepdir(const char *dir, long step, char *buf, size_t len,
		     struct dpg_err *err);

/* Create dir and its step directory (mkdir -p semantics, 0700; every rank
 * may call it).  Refuses (-DPG_ERR_INVALID, naming the directory, its owner
 * uid and mode) a DIR or step directory owned by another user or writable
 * by group or others, and a step directory that is a symbolic link. */
int dpg_ckpt_prepare(const char *dir, long step, struct dpg_err *err);

/* Write rank's shard: state[k] (k < nstate) each L->shard_numel fp32
 * elements laid out as L says (unit u's piece at u->shard_off).  Only the
 * real elements are stored (dpg_zlayout_shard_range). */
int dpg_ckpt_write_shard(const char *dir, long step, const struct dpg_zlayout *L,
			 int rank, int nstate, float *const *state,
			 struct dpg_err *err);

/* Rank 0, after every shard is on disk: write the metadata, then point
 * DIR/latest at this step. */
int dpg_ckpt_commit(const char *dir, long step, const struct dpg_zlayout *L,
		    int optimizer, int nstate, const void *extra, size_t extra_len,
		    struct dpg_err *err);

/* Remove the temporary files a killed writer left in DIR and in its step
 * directory: dpg's exact names only (dpg_fio_is_tmp_name), never a user's
 * file (best effort; call when no save of DIR is in flight). */
void dpg_ckpt_clean_tmp(const char *dir, long step);

/* Read DIR/latest and its metadata (checksum verified).  Refuses a DIR or
 * step directory writable by group or others (anyone could have swapped a
 * file in) and symbolic links.  Free with dpg_ckpt_meta_free (also after a
 * failure). */
int dpg_ckpt_read_meta(const char *dir, struct dpg_ckpt_meta *meta,
		       struct dpg_err *err);
void dpg_ckpt_meta_free(struct dpg_ckpt_meta *meta);

/* Fill rank's shard state[k] (k < nstate, each L->shard_numel elements,
 * padding set to 0) of the layout L (any nranks) from the checkpoint of
 * meta, reading the old shard files that overlap (each verified in full
 * against its SHA-256).  Refuses a different model (names, sizes, units)
 * or a different state count with a clear error. */
int dpg_ckpt_read_shard(const struct dpg_ckpt_meta *meta, const struct dpg_zlayout *L,
			int rank, int nstate, float **state, struct dpg_err *err);

#endif
