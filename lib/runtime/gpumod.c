/* SPDX-License-Identifier: BSD-3-Clause */
/* gpumod.c - loading the GPU module dpg-cuda.so: the NCCL backend and the
 * sharded step's kernels, behind one versioned table (gpumod.h).
 *
 * Why a dpg-owned module rather than dlopen of libnccl and libcudart: one
 * libdpg.so (and one libdpg0 package) must load on every node, with or
 * without a GPU, so libdpg.so has no NEEDED entry on CUDA or NCCL.  Loading
 * those libraries ourselves would mean re-declaring every CUDA and NCCL
 * function and type we use, resolving each by name and following their ABI
 * from release to release by hand, and would leave the nvcc-built kernels
 * nowhere to live.  The module instead is compiled against the real headers
 * and linked against the real libraries by the toolchain, like any CUDA
 * program; libdpg sees one entry point (DPG_GPUMOD_ENTRY) and a table whose
 * ABI number it checks.  A missing module, a missing CUDA or NCCL runtime
 * under it, or a module of another dpg build all end in one dlopen/dlsym
 * failure whose text we pass on with the package to install. */
#include "gpumod.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef DPG_CUDA_MODULE_DEFAULT
#define DPG_CUDA_MODULE_DEFAULT "/usr/local/lib/dpg/" DPG_GPUMOD_FILE
#endif

const char *dpg_gpumod_path(void)
{
	const char *p = getenv("DPG_CUDA_MODULE");

	return p != NULL && *p != '\0' ? p : DPG_CUDA_MODULE_DEFAULT;
}

static int load_failed(const char *path, const char *why, struct dpg_err *err)
{
	return dpg_errs(err, DPG_ERR_UNSUPPORTED, "cannot load the GPU module %s: "
			"%s (%s; DPG_CUDA_MODULE sets its path)", path, why,
			DPG_GPUMOD_INSTALL);
}

static int check_table(const char *path, const struct dpg_gpumod *t,
		       struct dpg_err *err)
{
	char why[160];

	if (t == NULL)
		return load_failed(path, DPG_GPUMOD_ENTRY "() returned no table",
				   err);
	if (t->abi != DPG_GPUMOD_ABI || t->size < sizeof(*t)) {
		snprintf(why, sizeof(why), "it has module ABI %u (table of %u "
			 "bytes) but this libdpg %s needs ABI %u: the module "
			 "comes from another dpg version", (unsigned)t->abi,
			 (unsigned)t->size, dpg_version(), (unsigned)DPG_GPUMOD_ABI);
		return load_failed(path, why, err);
	}
	if (t->device_count == NULL || t->pick_device == NULL || t->comm_init == NULL)
		return load_failed(path, "its table lacks the NCCL backend", err);
	return 0;
}

int dpg_gpumod_open(struct dpg_gpumod_lib *lib, struct dpg_err *err)
{
	const char *path = dpg_gpumod_path();
	dpg_gpumod_entry_fn *entry;
	const char *why;
	void *h;
	int rc;

	lib->handle = NULL;
	lib->t = NULL;
	/* RTLD_NODELETE: the CUDA runtime and NCCL keep threads and atexit
	 * handlers of their own, which must not outlive their code */
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (h == NULL) {
		why = dlerror();
		return load_failed(path, why != NULL ? why : "dlopen failed", err);
	}
	(void)dlerror();
	*(void **)&entry = dlsym(h, DPG_GPUMOD_ENTRY);
	if (entry == NULL) {
		why = dlerror();
		rc = load_failed(path, why != NULL ? why : "no " DPG_GPUMOD_ENTRY
				 " (not a dpg module?)", err);
		dlclose(h);
		return rc;
	}
	lib->t = entry();
	if ((rc = check_table(path, lib->t, err)) != 0) {
		lib->t = NULL;
		dlclose(h);
		return rc;
	}
	lib->handle = h;
	return 0;
}

void dpg_gpumod_close(struct dpg_gpumod_lib *lib)
{
	if (lib->handle != NULL)
		dlclose(lib->handle);
	lib->handle = NULL;
	lib->t = NULL;
}
