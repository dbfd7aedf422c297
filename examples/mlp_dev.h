/* SPDX-License-Identifier: BSD-3-Clause */
/* mlp_dev.h - how examples/train reaches the GPU: the table of its device module mlp-cuda.so
 * (mlp_cuda.cu: cuBLAS and mlp_math.h's kernels), loaded at run time by mlp_dev.c. */
#ifndef DPG_EXAMPLE_MLP_DEV_H
#define DPG_EXAMPLE_MLP_DEV_H

/*
 * Why a module of train's own: train links only libdpg.so, which has no
 * CUDA dependency so that one binary runs on every node; the model is the
 * example's, not the library's, so its kernels do not belong in libdpg's
 * GPU module dpg-cuda.so either (nor would train see dpg-cuda.so's
 * internal table).  mlp-cuda.so links libcudart and libcublas; train
 * dlopens it only after dpg_init chose the NCCL backend, so a CPU run
 * never maps CUDA.  Its buffers meet libdpg's through plain device
 * pointers: dpg_zero_param / dpg_zero_grad of a model on NCCL are device
 * memory, which the kernels read and add into; everything runs on the
 * default stream, which NCCL's collectives of the sharded step also use.
 *
 * Every operation returns 0, or -1 with a one-line message in
 * ops->error(dev).  One struct mlp_dev per process, used from one thread.
 */

#include <stddef.h>
#include <stdint.h>

#include "mlp_math.h"

/* raise with any change to the table or to mlp_shape_t */
#define MLP_DEV_ABI 1
#define MLP_DEV_ENTRY "mlp_dev_v1"
#define MLP_DEV_FILE "mlp-cuda.so"

struct mlp_dev;		/* the device buffers of one micro-batch, a cuBLAS handle */

struct mlp_dev_ops {
	uint32_t abi;		/* MLP_DEV_ABI of the module's build */
	uint32_t size;		/* sizeof(struct mlp_dev_ops) there */
	const char *built_with;	/* e.g. "CUDA 13000, cuBLAS 130000" */
	/* Buffers for micro-batches of up to cap samples, on the device that
	 * holds model_ptr (device memory of the model: a parameter of libdpg's
	 * sharded step).  *out is NULL after a failure, msg has its line. */
	int (*create)(const mlp_shape_t *s, int cap, const void *model_ptr,
		      struct mlp_dev **out, char *msg, size_t msg_len);
	void (*destroy)(struct mlp_dev *dev);
	const char *(*error)(const struct mlp_dev *dev);
	/* the micro-batch: n <= cap samples' inputs [n x d] and labels, host memory */
	int (*load)(struct mlp_dev *dev, const float *x, const int *y, int n);
	/* forward through unit u with its weight W and bias b (device memory,
	 * bf16 values when bf16, else float) */
	int (*forward_unit)(struct mlp_dev *dev, int u, const void *W, const void *b, int bf16);
	/* the loss after the last unit: *loss_sum gets the sum of the
	 * per-sample losses (host, in sample order, as mlp_loss), dL/dz the
	 * gradient of grad_scale x the mean loss */
	int (*loss)(struct mlp_dev *dev, float grad_scale, double *loss_sum);
	/* backward through unit u (after loss and the units above it): ADDS
	 * its gradients into the device buffers gW and gb */
	int (*backward_unit)(struct mlp_dev *dev, int u, const void *W, int bf16, float *gW,
			     float *gb);
	/* copy bytes of device memory src (e.g. a parameter) to host dst */
	int (*to_host)(struct mlp_dev *dev, void *dst, const void *src, size_t bytes);
};

typedef const struct mlp_dev_ops *mlp_dev_entry_fn(void);

/* mlp_dev.c, linked into train (no CUDA): the module's path, or NULL when
 * none is found: $DPG_MLP_CUDA_MODULE when set and not empty, else
 * MLP_DEV_FILE beside the running program or in its .libs/ (the build
 * tree, where libtool puts the module and the real binary).  buf holds it. */
const char *mlp_dev_find(char *buf, size_t len);

/* Load the module at path and check its ABI: the table, or NULL with a
 * line in msg.  The module stays loaded for the life of the process. */
const struct mlp_dev_ops *mlp_dev_load(const char *path, char *msg, size_t msg_len);

#endif
