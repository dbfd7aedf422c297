/* SPDX-License-Identifier: BSD-3-Clause */
/* module.c - the entry point of dpg-cuda.so, libdpg's GPU module: the
 * table of the NCCL backend and the sharded step's kernels (gpumod.h). */
#include "gpumod.h"
#include "nccl_backend.h"
#ifdef DPG_HAVE_CUDA_ZERO
#include "zero_cuda.h"
#endif

/* nccl.h declares some functions without prototypes ("f()") */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cuda_runtime_api.h>
#include <nccl.h>
#pragma GCC diagnostic pop

#define STR_(x) #x
#define STR(x) STR_(x)

#ifdef DPG_HAVE_CUDA_ZERO
static const struct dpg_gpumod_kernels kernels = {
	.errstr = dpg_cuda_errstr,
	.set_device = dpg_cuda_set_device,
	.alloc = dpg_cuda_alloc,
	.free = dpg_cuda_free,
	.memset0 = dpg_cuda_memset0,
	.h2d = dpg_cuda_h2d,
	.d2h = dpg_cuda_d2h,
	.d2d = dpg_cuda_d2d,
	.sync = dpg_cuda_sync,
	.adamw = dpg_cuda_adamw,
	.sgd = dpg_cuda_sgd,
	.sumsq = dpg_cuda_sumsq,
	.scale = dpg_cuda_scale,
	.f32_to_bf16 = dpg_cuda_f32_to_bf16,
	.bf16_to_f32 = dpg_cuda_bf16_to_f32,
};
#define KERNELS (&kernels)
#else
#define KERNELS NULL
#endif

static const struct dpg_gpumod table = {
	.abi = DPG_GPUMOD_ABI,
	.size = sizeof(struct dpg_gpumod),
	.built_with = "CUDA " STR(CUDART_VERSION) ", NCCL " STR(NCCL_MAJOR) "."
		      STR(NCCL_MINOR) "." STR(NCCL_PATCH),
	.device_count = dpg_nccl_device_count,
	.pick_device = dpg_nccl_pick_device,
	.comm_init = dpg_nccl_comm_init,
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
	.comm_split = dpg_nccl_comm_split,
#endif
	.k = KERNELS,
};

/* The one symbol dpg-cuda.so exports (lib/cuda/dpg-cuda.map). */
const struct dpg_gpumod *dpg_gpumod_v3(void);

const struct dpg_gpumod *dpg_gpumod_v3(void)
{
	return &table;
}
