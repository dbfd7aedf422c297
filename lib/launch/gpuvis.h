/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuvis.h - the *_VISIBLE_DEVICES string a task needs so that it sees the
 * GPUs dpg chose, whatever numbering Slurm's cgroups and gres already imposed. */
#ifndef DPG_LIB_GPUVIS_H
#define DPG_LIB_GPUVIS_H

#include <stddef.h>

#include "err.h"

#define DPG_GPUVIS_MAX 64

enum dpg_gpu_visibility {
	DPG_VIS_ISOLATE = 0,	/* the task sees only its own GPUs */
	DPG_VIS_ORDERED,	/* the task sees all the step's GPUs on the node,
				 * its own at index LOCAL_RANK * G + k */
};

/* How the indices a task writes in CUDA_VISIBLE_DEVICES map to physical GPUs
 * (positions in PCI bus order among all GPUs of the node). */
struct dpg_gpu_ns {
	size_t n;		/* 0: identity (nothing renumbered) */
	int phys[DPG_GPUVIS_MAX];	/* index i names physical GPU phys[i] */
};

/* Work out the namespace from Slurm's variables as the task received them:
 * step_gpus = SLURM_STEP_GPUS (global, physical indices; NULL if unset),
 * slurm_visible = the CUDA_VISIBLE_DEVICES/ROCR_VISIBLE_DEVICES Slurm set
 * (NULL if unset).  If Slurm's list names the step's GPUs by their global
 * index, nothing was renumbered; if it uses 0..n-1 for n allocated GPUs,
 * device cgroups renumbered them in PCI order.  Returns 1 (not an error)
 * for UUID/MIG forms: the caller then leaves Slurm's value alone. */
int dpg_gpu_ns_from_slurm(const char *step_gpus, const char *slurm_visible,
			  struct dpg_gpu_ns *ns, struct dpg_err *err);

/* Index of physical GPU p in ns, or -1 if the task cannot see it. */
int dpg_gpu_ns_index(const struct dpg_gpu_ns *ns, int p);

/* Build the visible-devices string for one task.
 * own[0..g-1]: the task's physical GPUs; order[0..norder-1]: every GPU of
 * the step on this node in the order tasks own them (task 0's first), used
 * by DPG_VIS_ORDERED. */
int dpg_gpu_visible(const struct dpg_gpu_ns *ns, enum dpg_gpu_visibility mode,
		    const int *own, size_t g, const int *order, size_t norder,
		    char *buf, size_t len, struct dpg_err *err);

/* The positions of the task's own GPUs among those it sees with the string
 * dpg_gpu_visible built ("0,1" when isolated; LOCAL_RANK*G+k when ordered):
 * what frameworks that pick devices by index need (JAX_LOCAL_DEVICE_IDS). */
int dpg_gpu_local_ids(enum dpg_gpu_visibility mode, const int *own, size_t g,
		      const int *order, size_t norder, char *buf, size_t len,
		      struct dpg_err *err);

#endif
