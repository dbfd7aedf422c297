/* SPDX-License-Identifier: BSD-3-Clause */
/* plan_fmt.c - a plan as text: one task's line (dpg-plan, --dpg-verbose) and
 * the whole plan as JSON (dpg-plan --json, the golden files in tests/plan). */
#include "plan.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int dpg_plan_format_task(const struct dpg_plan *plan, uint32_t i, char *buf,
			 size_t len)
{
	const struct dpg_plan_task *r;
	int n;

	if (plan == NULL || buf == NULL || len == 0 || i >= plan->ntasks)
		return -1;
	r = &plan->tasks[i];
	if (r->ngpus > 0)
		n = snprintf(buf, len, "task %u: gpus %s (visible %s) nics %s cpus %s numa %d",
			     r->local_rank, r->gpus, r->visible,
			     r->nics[0] ? r->nics : "none", r->cpus, r->numa);
	else
		n = snprintf(buf, len, "task %u: gpus none nics %s cpus %s numa %d",
			     r->local_rank, r->nics[0] ? r->nics : "none", r->cpus,
			     r->numa);
	if (n < 0)
		return -1;
	if ((size_t)n >= len) {
		if (len > 4)
			memcpy(buf + len - 4, "...", 4);
		return (int)len - 1;
	}
	return n;
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

int dpg_plan_write_json(const struct dpg_plan *plan, FILE *f,
			struct dpg_err *err)
{
	uint32_t i, j, k;

	if (plan == NULL || f == NULL)
		return dpg_errf(err, "dpg_plan_write_json: nothing to write");
	fprintf(f, "{\n  \"ntasks\": %u,\n  \"gpus_per_task\": %u,\n", plan->ntasks,
		plan->gpus_per_task);
	fprintf(f, "  \"bind\": \"%s\",\n  \"allow_gpu_sharing\": %s,\n  \"gpus_shared\": %s,\n",
		plan->policy.bind == DPG_BIND_NONE ? "none" : "closest",
		plan->policy.allow_gpu_sharing ? "true" : "false",
		plan->gpus_shared ? "true" : "false");
	fputs("  \"node_gpus\": [", f);
	for (i = 0; i < plan->ngpus; i++) {
		const struct dpg_gpu *g = &plan->gpus[i];

		fprintf(f, "%s\n    {\"index\": %u, \"busid\": ", i ? "," : "", g->index);
		json_str(f, g->pci.busid);
		fprintf(f, ", \"vendor\": \"%s\"}", dpg_gpu_vendor_name(g->vendor));
	}
	fputs(plan->ngpus ? "\n  ],\n" : "],\n", f);
	fputs("  \"node_nics\": [", f);
	for (i = 0; i < plan->nnics; i++) {
		const struct dpg_nic *n = &plan->nics[i];

		fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
		json_str(f, n->name);
		fprintf(f, ", \"kind\": \"%s\", \"busid\": ", dpg_nic_kind_name(n->kind));
		json_str(f, n->pci.busid);
		fputs(", \"netdev\": ", f);
		json_str(f, n->netdev);
		fputc('}', f);
	}
	fputs(plan->nnics ? "\n  ],\n" : "],\n", f);
	fputs("  \"tasks\": [", f);
	for (i = 0; i < plan->ntasks; i++) {
		const struct dpg_plan_task *r = &plan->tasks[i];

		fprintf(f, "%s\n    {\"local_rank\": %u, \"gpus\": ", i ? "," : "",
			r->local_rank);
		fputc('[', f);
		for (j = 0; j < r->ngpus; j++) {
			if (j > 0)
				fputc(',', f);
			json_str(f, plan->gpus[r->gpu[j]].pci.busid);
		}
		fputs("], \"visible\": ", f);
		json_str(f, r->visible);
		fputs(", \"nics\": [", f);
		for (j = 0; j < r->nnics; j++) {
			if (j > 0)
				fputc(',', f);
			json_str(f, plan->nics[r->nic[j]].name);
		}
		fputs("], \"netdevs\": [", f);
		for (j = 0, k = 0; j < r->nnics; j++) {
			const char *nd = plan->nics[r->nic[j]].netdev;

			if (nd[0] == '\0')
				continue;
			if (k++ > 0)
				fputc(',', f);
			json_str(f, nd);
		}
		fputc(']', f);
		fputs(", \"cpus\": ", f);
		json_str(f, r->cpus);
		fprintf(f, ", \"numa\": %d}", r->numa);
	}
	fputs("\n  ]\n}\n", f);
	if (fflush(f) != 0 || ferror(f))
		return dpg_errf(err, "writing the plan: %s", strerror(errno));
	return 0;
}
