/* SPDX-License-Identifier: BSD-3-Clause */
/* killfail.h - fast fail: whether srun ends the whole step as soon as one
 * task exits abnormally, decided before srun reads its own options. */
#ifndef DPG_LIB_KILLFAIL_H
#define DPG_LIB_KILLFAIL_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

/* srun reads this before its command line (Slurm 22.05: _opt_env, then
 * getopt): what the plugin sets in slurm_spank_init becomes srun's
 * --kill-on-bad-exit unless the command line says -K / -K0. */
#define DPG_KILL_BAD_EXIT_VAR "SLURM_KILL_BAD_EXIT"
/* the environment forms of the user's options (sbatch passes its --dpg-*
 * options to the job's sruns this way) */
#define DPG_KILL_ON_FAIL_ENV "SLURM_SPANK__SLURM_SPANK_OPTION_dpg_dpg_kill_on_fail"
#define DPG_GPUS_PER_TASK_ENV "SLURM_SPANK__SLURM_SPANK_OPTION_dpg_dpg_gpus_per_task"

/* --dpg-kill-on-fail / kill_on_fail=: "yes" or "no" (what, e.g.
 * "--dpg-kill-on-fail", names the value in the message). */
int dpg_kill_on_fail_parse(const char *s, const char *what, bool *out,
			   struct dpg_err *err);

/* The value of the long option --NAME in a command line (argv[0] is the
 * program): "--NAME=V" or "--NAME V"; the last one wins; NULL if absent.
 * Only exact spellings are seen (getopt's abbreviations are not). */
const char *dpg_argv_option(int argc, char *const argv[], const char *name);

/* Split a /proc/PID/cmdline image (NUL-terminated words, len bytes; buf
 * has room for one more byte) into argv, which has room for max + 1
 * pointers (the words, then NULL).  Fails if there are more than max. */
int dpg_cmdline_split(char *buf, size_t len, char **argv, int max, int *argc,
		      struct dpg_err *err);

/* Read /proc/self/cmdline (or any such file) into buf and split it. */
int dpg_cmdline_read(const char *path, char *buf, size_t size, char **argv,
		     int max, int *argc, struct dpg_err *err);

/* What srun needs to know, as far as the plugin can see it. */
struct dpg_killfail_in {
	bool conf;		/* plugstack.conf kill_on_fail= (default yes) */
	const char *opt;	/* the user's --dpg-kill-on-fail value, or NULL */
	bool dpg_step;		/* the step gets the contract (dpg is active) */
	bool user_set;		/* SLURM_KILL_BAD_EXIT is already in srun's env */
};

enum dpg_killfail {
	DPG_KF_OFF,		/* leave srun alone: no fast fail from dpg */
	DPG_KF_SET,		/* set SLURM_KILL_BAD_EXIT=1 */
	DPG_KF_USER,		/* the user's own SLURM_KILL_BAD_EXIT decides */
};

/* The decision; fails only on a malformed opt. */
int dpg_killfail_decide(const struct dpg_killfail_in *in, enum dpg_killfail *out,
			struct dpg_err *err);

/* After srun parsed its options: the decision taken early (from the raw
 * command line) should equal the one the parsed options ask for (not so
 * with an abbreviated option).  Fails when they differ, the message saying
 * what srun will do and the remedy (nothing can change srun's decision
 * now, and an "optional" plugin cannot stop srun in init_post_opt). */
int dpg_killfail_check(enum dpg_killfail early, enum dpg_killfail late,
		       struct dpg_err *err);

#endif
