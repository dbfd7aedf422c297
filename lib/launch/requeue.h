/* SPDX-License-Identifier: BSD-3-Clause */
/* requeue.h - --dpg-requeue=GRACE / requeue=GRACE (requeue.c): the value,
 * the option found on a command line, and the Slurm --signal it stands for. */
#ifndef DPG_LIB_REQUEUE_H
#define DPG_LIB_REQUEUE_H

#include <stddef.h>

#include "err.h"

/* Slurm's --signal sig_time is 0-65535 (sbatch(1), Slurm 22.05): a larger
 * GRACE would reach sbatch/srun as a --signal it refuses. */
#define DPG_REQUEUE_MAX 65535
#define DPG_REQUEUE_SIGNAL "USR1"	/* Slurm's warning signal */

/* GRACE: seconds, 0 (off) .. DPG_REQUEUE_MAX; what names the source. */
int dpg_requeue_parse(const char *what, const char *s, int *out,
		      struct dpg_err *err);

/* The last --dpg-requeue=G or "--dpg-requeue G" of a NUL-separated command
 * line (/proc/self/cmdline; scanned up to a "--"): 1 found (*out set),
 * 0 absent, -1 malformed (err set). */
int dpg_requeue_from_cmdline(const char *buf, size_t len, int *out,
			     struct dpg_err *err);

/* "USR1@G": the value of SBATCH_SIGNAL / SLURM_SIGNAL for GRACE g. */
int dpg_requeue_signal(int grace, char *buf, size_t len);

#endif
