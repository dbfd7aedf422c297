/* SPDX-License-Identifier: BSD-3-Clause */
/* opts.h - the user's per-step request (--dpg-* options) and the parsing of
 * each option's value, shared by the plugin's callbacks and dpg-plan. */
#ifndef DPG_LIB_OPTS_H
#define DPG_LIB_OPTS_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "gpuvis.h"	/* enum dpg_gpu_visibility */
#include "parse.h"	/* dpg_parse_ulong (users of opts.h read values) */
#include "plan.h"	/* enum dpg_bind */

#define DPG_GPUS_PER_TASK_MAX 64

struct dpg_request {
	int gpus_per_task;	/* -1 = option not given */
	uint16_t port;		/* 0 = not given (--dpg-port) */
	bool verbose;		/* --dpg-verbose */
	int bind;		/* --dpg-bind: enum dpg_bind, -1 = not given */
	int visibility;		/* --dpg-gpu-visibility: enum dpg_gpu_visibility, -1 */
	int requeue;		/* --dpg-requeue=GRACE seconds, -1 = not given */
};

void dpg_request_init(struct dpg_request *r);

/* --dpg-gpus-per-task=N: 0..DPG_GPUS_PER_TASK_MAX. */
int dpg_opt_gpus_per_task(const char *s, int *out, struct dpg_err *err);

/* --dpg-port=P: 1024..65535 (dpg_port_parse, the message naming the option). */
int dpg_opt_port(const char *s, uint16_t *out, struct dpg_err *err);

/* --dpg-bind / bind=: "closest" or "none". */
int dpg_bind_parse(const char *s, enum dpg_bind *out, struct dpg_err *err);

/* --dpg-gpu-visibility / gpu_visibility=: "isolate" or "ordered". */
int dpg_gpu_visibility_parse(const char *s, enum dpg_gpu_visibility *out,
			     struct dpg_err *err);

#endif
