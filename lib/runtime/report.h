/* SPDX-License-Identifier: BSD-3-Clause */
/* report.h - the straggler report's setup (report.c): DPG_REPORT. */
#ifndef DPG_LIB_REPORT_H
#define DPG_LIB_REPORT_H

#include "err.h"

struct dpg_ctx;

#define DPG_REPORT_VAR "DPG_REPORT"

/* Read DPG_REPORT (unset or "" = off, else a number of steps) into ctx's
 * tracker.  Returns 0 or -DPG_ERR_ENV (malformed) with e set. */
int dpg_report_env(struct dpg_ctx *ctx, struct dpg_err *e);

#endif
