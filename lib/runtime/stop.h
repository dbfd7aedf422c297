/* SPDX-License-Identifier: BSD-3-Clause */
/* stop.h - the requeue protocol's stop flag (stop.c): DPG_REQUEUE installs
 * the signal handlers, dpg_stop_requested asks every rank. */
#ifndef DPG_LIB_STOP_H
#define DPG_LIB_STOP_H

#include "err.h"

struct dpg_ctx;

#define DPG_REQUEUE_VAR "DPG_REQUEUE"	/* GRACE seconds; set by the plugin */
#define DPG_END_TIME_VAR "DPG_END_TIME"	/* job end, Unix seconds (optional) */

/* Read DPG_REQUEUE (unset, "" or "0" = off, else GRACE seconds) and
 * DPG_END_TIME; when on, install the SIGUSR1 and SIGTERM handlers (they set
 * a flag, nothing more).  Returns 0 or -DPG_ERR_ENV / -DPG_ERR_SYSTEM. */
int dpg_stop_env(struct dpg_ctx *ctx, struct dpg_err *e);

/* The signal seen by this process since the handlers went in, or 0. */
int dpg_stop_signal(void);

/* Test hook: what the handler does on signal sig. */
void dpg_stop_raise_local(int sig);

#endif
