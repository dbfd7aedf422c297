/* opts.h - the user's per-step request (--dpg-* options) and the parsing of
 * each option's value, shared by the plugin's callbacks and dpg-plan. */
#ifndef DPG_LIB_OPTS_H
#define DPG_LIB_OPTS_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"

#define DPG_GPUS_PER_TASK_MAX 64

struct dpg_request {
	int gpus_per_task;	/* -1 = option not given */
	uint16_t port;		/* 0 = not given (--dpg-port) */
	bool verbose;		/* --dpg-verbose */
	int bind;		/* --dpg-bind: enum dpg_bind, -1 = not given */
	int visibility;		/* --dpg-gpu-visibility: enum dpg_gpu_visibility, -1 */
};

void dpg_request_init(struct dpg_request *r);

/* --dpg-gpus-per-task=N: 0..DPG_GPUS_PER_TASK_MAX. */
int dpg_opt_gpus_per_task(const char *s, int *out, struct dpg_err *err);

/* --dpg-port=P: 1024..65535. */
int dpg_opt_port(const char *s, uint16_t *out, struct dpg_err *err);

/* Strict decimal parse of s into [lo, hi]; no sign, no spaces, no junk. */
int dpg_parse_ulong(const char *s, unsigned long lo, unsigned long hi,
		    unsigned long *out);

/* Value of one hexadecimal digit, or -1. */
int dpg_hex_digit(char c);

#endif
