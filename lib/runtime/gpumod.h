/* SPDX-License-Identifier: BSD-3-Clause */
/* gpumod.h - the interface between libdpg and its loadable GPU module
 * dpg-cuda.so (lib/cuda): one versioned entry point returning a table. */
#ifndef DPG_LIB_GPUMOD_H
#define DPG_LIB_GPUMOD_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "err.h"

/* Raise DPG_GPUMOD_ABI whenever this table, struct dpg_comm, struct
 * dpg_comm_ops, struct dpg_backend_args or struct dpg_err changes: the
 * module and libdpg come from one dpg build and must agree on all of them.
 * The entry point's name carries the version too, so that a module of
 * another ABI fails at dlsym already when its name changed. */
#define DPG_GPUMOD_ABI 3
#define DPG_GPUMOD_ENTRY "dpg_gpumod_v3"
#define DPG_GPUMOD_FILE "dpg-cuda.so"
/* the packages that ship it, for messages */
#define DPG_GPUMOD_INSTALL "apt-get install libdpg0-cuda or dnf install " \
	"dpg-cuda, with the CUDA and NCCL runtimes (libcudart, libnccl)"

struct dpg_adamw_hp;
struct dpg_sgd_hp;

/* The sharded step's device memory and kernels (lib/train/zero_cuda.h).
 * Each returns 0 or a cudaError_t value that errstr names; stream is a
 * cudaStream_t (NULL: the default stream). */
struct dpg_gpumod_kernels {
	const char *(*errstr)(int rc);
	int (*set_device)(int device);
	int (*alloc)(void **p, size_t bytes);
	int (*free)(void *p);
	int (*memset0)(void *p, size_t bytes, void *stream);
	int (*h2d)(void *dst, const void *src, size_t bytes, void *stream);
	int (*d2h)(void *dst, const void *src, size_t bytes, void *stream);
	int (*d2d)(void *dst, const void *src, size_t bytes, void *stream);
	int (*sync)(void *stream);
	int (*adamw)(float *p, float *m, float *v, const float *g, size_t n,
		     const struct dpg_adamw_hp *h, void *stream);
	int (*sgd)(float *p, float *buf, const float *g, size_t n,
		   const struct dpg_sgd_hp *h, void *stream);
	int (*sumsq)(const float *x, size_t n, double *out, void *stream);
	int (*scale)(float *x, size_t n, float s, void *stream);
	int (*f32_to_bf16)(const float *in, uint16_t *out, size_t n, void *stream);
	int (*bf16_to_f32)(const uint16_t *in, float *out, size_t n, void *stream);
};

/* What the module's entry point returns (static, never freed). */
struct dpg_gpumod {
	uint32_t abi;			/* DPG_GPUMOD_ABI of the module's build */
	uint32_t size;			/* sizeof(struct dpg_gpumod) there */
	const char *built_with;		/* e.g. "CUDA 13000, NCCL 2.27.3" */
	/* the NCCL backend (lib/runtime/nccl/nccl_backend.h) */
	int (*device_count)(void);
	int (*pick_device)(const char *busid, int local_rank, int *device,
			   struct dpg_err *err);
	int (*comm_init)(struct dpg_comm *c, const struct dpg_backend_args *a,
			 struct dpg_err *err);
	/* ncclCommSplit (nccl_backend.h); NULL when built with NCCL < 2.18:
	 * dpg_comm_split then starts each part through the store */
	int (*comm_split)(struct dpg_comm *parent, struct dpg_comm *child,
			  int color, int key, const struct dpg_backend_args *a,
			  struct dpg_err *err);
	/* NULL when the module was built without nvcc */
	const struct dpg_gpumod_kernels *k;
};

typedef const struct dpg_gpumod *dpg_gpumod_entry_fn(void);

/* A loaded module (all zero: none). */
struct dpg_gpumod_lib {
	void *handle;
	const struct dpg_gpumod *t;
};

/* The module's path: $DPG_CUDA_MODULE when set and not empty, else the
 * compiled-in default ($(pkglibdir)/dpg-cuda.so). */
const char *dpg_gpumod_path(void);

/* Load the module at dpg_gpumod_path() (RTLD_NOW | RTLD_LOCAL) and check
 * its entry point and ABI.  Returns 0, or -DPG_ERR_UNSUPPORTED with one
 * line in err naming the path, what failed (dlerror's text) and the
 * packages to install. */
int dpg_gpumod_open(struct dpg_gpumod_lib *lib, struct dpg_err *err);

/* Drop lib's reference (the module stays mapped: see gpumod.c). */
void dpg_gpumod_close(struct dpg_gpumod_lib *lib);

#endif
