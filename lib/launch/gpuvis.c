/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuvis.c - translation between dpg's physical GPU indices and the index
 * space a task's CUDA/ROCm runtime uses after Slurm's gres and cgroups. */
#include "gpuvis.h"
#include "parse.h"	/* dpg_parse_ulong */

#include <stdbool.h>

#include <stdio.h>
#include <string.h>

static bool contains(const int *v, size_t n, int x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

int dpg_gpu_ns_from_slurm(const char *step_gpus, const char *slurm_visible,
			  struct dpg_gpu_ns *ns, struct dpg_err *err)
{
	int step[DPG_GPUVIS_MAX], vis[DPG_GPUVIS_MAX];
	size_t nstep = 0, nvis = 0;
	bool global = true, local = true;

	memset(ns, 0, sizeof(*ns));
	if (slurm_visible == NULL)
		return 0;	/* the task sees every GPU by physical index */
	if (strncmp(slurm_visible, "GPU-", 4) == 0 || strncmp(slurm_visible, "MIG-", 4) == 0)
		return 1;	/* UUIDs: dpg cannot map them without NVML */
	if (*slurm_visible == '\0')
		return dpg_errf(err, "Slurm set an empty device list: the task may "
				"use no GPU");
	if (dpg_int_list_parse(slurm_visible, vis, DPG_GPUVIS_MAX, &nvis, err) != 0)
		return -1;
	if (step_gpus == NULL || *step_gpus == '\0')
		return 0;	/* no allocation record: trust physical indices */
	if (dpg_int_list_parse(step_gpus, step, DPG_GPUVIS_MAX, &nstep, err) != 0)
		return dpg_err_prefix(err, "SLURM_STEP_GPUS");
	for (size_t i = 0; i < nvis; i++) {
		global = global && contains(step, nstep, vis[i]);
		local = local && vis[i] >= 0 && (size_t)vis[i] < nstep;
	}
	if (global)
		return 0;
	if (!local)
		return dpg_errf(err, "CUDA_VISIBLE_DEVICES='%.80s' matches neither the "
				"step's GPUs (SLURM_STEP_GPUS=%.80s) nor their renumbered "
				"indices", slurm_visible, step_gpus);
	/* renumbered: local index j is the j-th allocated GPU in PCI order */
	for (size_t i = 1; i < nstep; i++)
		for (size_t j = i; j > 0 && step[j - 1] > step[j]; j--) {
			int t = step[j];

			step[j] = step[j - 1];
			step[j - 1] = t;
		}
	ns->n = nstep;
	memcpy(ns->phys, step, nstep * sizeof(step[0]));
	return 0;
}

int dpg_gpu_ns_index(const struct dpg_gpu_ns *ns, int p)
{
	if (ns->n == 0)
		return p;
	for (size_t i = 0; i < ns->n; i++)
		if (ns->phys[i] == p)
			return (int)i;
	return -1;
}

static int append(char *buf, size_t len, size_t *o, int idx)
{
	int n = snprintf(buf + *o, len - *o, "%s%d", *o ? "," : "", idx);

	if (n < 0 || (size_t)n >= len - *o)
		return -1;
	*o += (size_t)n;
	return 0;
}

int dpg_gpu_visible(const struct dpg_gpu_ns *ns, enum dpg_gpu_visibility mode,
		    const int *own, size_t g, const int *order, size_t norder,
		    char *buf, size_t len, struct dpg_err *err)
{
	const int *list = mode == DPG_VIS_ORDERED ? order : own;
	size_t n = mode == DPG_VIS_ORDERED ? norder : g, o = 0;

	if (len == 0)
		return dpg_errf(err, "no room for the device list");
	buf[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		int idx = dpg_gpu_ns_index(ns, list[i]);

		if (idx < 0)
			return dpg_errf(err, "GPU %d is not among the GPUs Slurm gave "
					"this step", list[i]);
		if (append(buf, len, &o, idx) != 0)
			return dpg_errf(err, "device list longer than %zu bytes", len - 1);
	}
	return 0;
}


int dpg_gpu_local_ids(enum dpg_gpu_visibility mode, const int *own, size_t g,
		      const int *order, size_t norder, char *buf, size_t len,
		      struct dpg_err *err)
{
	size_t o = 0;

	if (len == 0)
		return dpg_errf(err, "no room for the local device ids");
	buf[0] = '\0';
	for (size_t k = 0; k < g; k++) {
		size_t pos = k;

		if (mode == DPG_VIS_ORDERED) {
			for (pos = 0; pos < norder && order[pos] != own[k]; pos++)
				;
			if (pos == norder)
				return dpg_errf(err, "GPU %d is not among the step's GPUs "
						"on this node", own[k]);
		}
		if (append(buf, len, &o, (int)pos) != 0)
			return dpg_errf(err, "device id list longer than %zu bytes", len - 1);
	}
	return 0;
}
