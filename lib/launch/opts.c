/* SPDX-License-Identifier: BSD-3-Clause */
/* opts.c - parsing of the user's --dpg-* option values into a dpg_request.
 * Strict: a value is accepted only if every byte of it is understood. */
#include "opts.h"
#include "parse.h"	/* dpg_parse_ulong */
#include "port.h"	/* dpg_port_parse_named */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void dpg_request_init(struct dpg_request *r)
{
	r->gpus_per_task = -1;
	r->port = 0;
	r->verbose = false;
	r->bind = -1;
	r->visibility = -1;
	r->requeue = -1;
}

int dpg_opt_gpus_per_task(const char *s, int *out, struct dpg_err *err)
{
	unsigned long v;
	char q[64];

	if (dpg_parse_ulong(s, 0, DPG_GPUS_PER_TASK_MAX, &v) != 0)
		return dpg_errf(err, "invalid --dpg-gpus-per-task value '%s': "
				"expected an integer 0-%d (GPUs per task; 0 = CPU-only)",
				dpg_err_quote(s, q, sizeof(q)), DPG_GPUS_PER_TASK_MAX);
	*out = (int)v;
	return 0;
}

int dpg_opt_port(const char *s, uint16_t *out, struct dpg_err *err)
{
	return dpg_port_parse_named(s, "--dpg-port value",
				    " (the MASTER_PORT for this step)", out, err);
}

int dpg_bind_parse(const char *s, enum dpg_bind *out, struct dpg_err *err)
{
	char q[64];

	if (s != NULL && strcmp(s, "closest") == 0)
		*out = DPG_BIND_CLOSEST;
	else if (s != NULL && strcmp(s, "none") == 0)
		*out = DPG_BIND_NONE;
	else
		return dpg_errf(err, "invalid binding '%s': expected closest or none",
				dpg_err_quote(s, q, sizeof(q)));
	return 0;
}

int dpg_gpu_visibility_parse(const char *s, enum dpg_gpu_visibility *out,
			     struct dpg_err *err)
{
	char q[64];

	if (s != NULL && strcmp(s, "isolate") == 0)
		*out = DPG_VIS_ISOLATE;
	else if (s != NULL && strcmp(s, "ordered") == 0)
		*out = DPG_VIS_ORDERED;
	else
		return dpg_errf(err, "invalid GPU visibility '%s': expected isolate "
				"or ordered", dpg_err_quote(s, q, sizeof(q)));
	return 0;
}
