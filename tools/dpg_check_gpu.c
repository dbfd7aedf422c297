/* SPDX-License-Identifier: BSD-3-Clause */
/* dpg_check_gpu.c - dpg-check's GPU side for the NCCL test: the GPU module
 * loaded as libdpg loads it, the task's device, its device buffers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkp2p.h"
#include "contract_vars.h"
#include "dpg_check.h"

/* Device memory comes from the GPU module dpg-cuda.so, the one libdpg's
 * NCCL backend runs on (gpumod.h's kernels: cudaMalloc and cudaMemset
 * behind its versioned table), so dpg-check has no link-time CUDA
 * dependency, loads on every node, and uses the very CUDA runtime NCCL
 * uses: dlopen of libcudart would find its own copy by another soname and
 * re-declare CUDA's types by hand. */

void check_gpu_probe(const struct check_step *s, struct check_gpu *g,
		     struct dpg_check_cell *c)
{
	const char *gpus = getenv(DPG_VAR_GPUS);
	struct dpg_check_gpu f = { .device = -1 };
	struct dpg_err e = { "" }, pe = { "" };
	char busid[64] = "";

	memset(&g->lib, 0, sizeof(g->lib));
	g->device = -1;
	if (s->local_rank != 0) {	/* the test runs on each node's first task */
		dpg_check_set(c, DPG_CHECK_NA, "", "%s", "");
		return;
	}
	f.planned = dpg_check_gpu_planned(gpus, getenv(DPG_VAR_GPUS_PER_TASK));
	if (f.planned && dpg_gpumod_open(&g->lib, &e) != 0)
		f.module_err = e.msg;
	if (f.planned && f.module_err == NULL) {
		f.devices = g->lib.t->device_count();
		f.allocator = g->lib.t->k != NULL && g->lib.t->k->alloc != NULL;
		if (gpus != NULL)
			snprintf(busid, sizeof(busid), "%.*s", (int)strcspn(gpus, ","), gpus);
		if (f.devices > 0 && f.allocator &&
		    g->lib.t->pick_device(busid[0] ? busid : NULL, 0, &f.device, &pe) != 0)
			f.device = -1;
		f.pick_err = pe.msg;
	}
	dpg_check_nccl_ready(&f, c);
	if (c->state == DPG_CHECK_OK)
		g->device = f.device;
	else
		check_gpu_close(g);
}

int check_gpu_alloc(const struct check_gpu *g, void **p, size_t bytes,
		    struct dpg_err *err)
{
	const struct dpg_gpumod_kernels *k = g->lib.t->k;
	int rc = k->set_device(g->device);

	*p = NULL;
	if (rc == 0)
		rc = k->alloc(p, bytes);
	if (rc == 0)
		rc = k->memset0(*p, bytes, NULL);
	if (rc == 0)
		rc = k->sync(NULL);
	if (rc != 0) {
		if (*p != NULL)
			k->free(*p);
		*p = NULL;
		return dpg_errs(err, DPG_ERR_BACKEND, "%zu bytes on CUDA device %d: %s",
				bytes, g->device, k->errstr(rc));
	}
	return 0;
}

void check_gpu_free(const struct check_gpu *g, void *p)
{
	if (p != NULL && g->lib.t != NULL)
		g->lib.t->k->free(p);
}

void check_gpu_close(struct check_gpu *g)
{
	dpg_gpumod_close(&g->lib);
	g->device = -1;
}
