/* SPDX-License-Identifier: BSD-3-Clause */
/* bindenv.c - turns one task's row of the node plan into environment
 * variables, translating GPU indices into the space the task's runtime sees. */
#include "bindenv.h"
#include "contract_vars.h"	/* variable names */

#include <stdio.h>
#include <string.h>

/* Set by the user, not inherited from an outer dpg step (which lists the
 * variables it set in DPG_OWNED). */
static bool user_set(dpg_getenv_fn get, void *ctx, const char *name)
{
	const char *v = get != NULL ? get(ctx, name) : NULL;
	const char *owned = get != NULL ? get(ctx, DPG_VAR_OWNED) : NULL;
	size_t n = strlen(name);

	if (v == NULL || *v == '\0')
		return false;
	for (const char *p = owned; p != NULL && *p != '\0';) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);

		if (len == n && strncmp(p, name, n) == 0)
			return false;
		p = e ? e + 1 : NULL;
	}
	return true;
}

/* Record in DPG_OWNED which non-DPG variables this step set. */
static int add_owned(struct dpg_env *out, size_t from)
{
	static const char *const names[] = {
		"UCX_NET_DEVICES", "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME",
		"GLOO_SOCKET_IFNAME", "OMP_NUM_THREADS",
	};
	char list[256] = "";
	size_t o = 0;

	for (size_t i = from; i < out->n; i++)
		for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
			int w;

			if (strcmp(out->v[i].name, names[k]) != 0)
				continue;
			w = snprintf(list + o, sizeof(list) - o, "%s%s", o ? "," : "", names[k]);
			if (w < 0 || (size_t)w >= sizeof(list) - o)
				return -1;
			o += (size_t)w;
		}
	return dpg_env_add(out, DPG_VAR_OWNED, "%s", list);
}

/* Index of GPU phys among GPUs of its vendor: what CUDA or ROCm numbers it. */
static int vendor_index(const struct dpg_plan *p, unsigned phys)
{
	for (uint32_t i = 0; i < p->ngpus; i++)
		if (p->gpus[i].index == phys)
			return (int)p->gpus[i].vendor_index;
	return -1;
}

static enum dpg_gpu_vendor task_vendor(const struct dpg_plan *p,
				       const struct dpg_plan_task *t)
{
	for (uint32_t i = 0; i < p->ngpus; i++)
		if (t->ngpus > 0 && p->gpus[i].index == t->gpu[0])
			return p->gpus[i].vendor;
	return DPG_GPU_NVIDIA;
}

/* The GPUs of the node's tasks in local-rank order, each once. */
static size_t step_order(const struct dpg_plan *p, enum dpg_gpu_vendor v,
			 int *order, size_t cap)
{
	size_t n = 0;

	for (uint32_t t = 0; t < p->ntasks; t++)
		for (uint32_t k = 0; k < p->tasks[t].ngpus; k++) {
			int vi = vendor_index(p, p->tasks[t].gpu[k]);
			bool seen = false;

			for (size_t j = 0; j < n; j++)
				seen = seen || order[j] == vi;
			if (!seen && vi >= 0 && n < cap &&
			    task_vendor(p, &p->tasks[t]) == v)
				order[n++] = vi;
		}
	return n;
}

static int gpu_vars(const struct dpg_plan *p, const struct dpg_plan_task *t,
		    const struct dpg_bind_req *req, dpg_getenv_fn get, void *ctx,
		    struct dpg_env *out, struct dpg_err *err)
{
	enum dpg_gpu_vendor v = task_vendor(p, t);
	const char *var = v == DPG_GPU_AMD ? "ROCR_VISIBLE_DEVICES" : "CUDA_VISIBLE_DEVICES";
	int own[DPG_TOPO_MAX_GPUS], order[DPG_TOPO_MAX_GPUS];
	struct dpg_gpu_ns ns;
	char vis[DPG_ENV_VALUE_MAX], ids[DPG_ENV_VALUE_MAX];
	size_t norder;
	enum dpg_gpu_visibility mode = p->gpus_shared ? DPG_VIS_ISOLATE : req->visibility;
	const char *sg = req->step_gpus, *sv = req->step_visible;
	int rc;

	if (sg == NULL && get != NULL)
		sg = get(ctx, "SLURM_STEP_GPUS");
	if (sv == NULL && get != NULL)
		sv = get(ctx, var);
	for (uint32_t k = 0; k < t->ngpus; k++)
		own[k] = vendor_index(p, t->gpu[k]);
	norder = step_order(p, v, order, DPG_TOPO_MAX_GPUS);
	rc = dpg_gpu_ns_from_slurm(sg, sv, &ns, err);
	if (rc < 0 || (rc == 0 && dpg_gpu_visible(&ns, mode, own, t->ngpus, order,
						  norder, vis, sizeof(vis), err) != 0))
		return dpg_err_prefix(err, var);
	if (rc == 0 && dpg_gpu_local_ids(mode, own, t->ngpus, order, norder, ids,
					 sizeof(ids), err) != 0)
		return dpg_err_prefix(err, DPG_JAX_LOCAL_DEVICE_IDS);
	if ((rc == 0 && dpg_env_add(out, var, "%s", vis) != 0) ||
	    (rc == 0 && dpg_env_add(out, DPG_JAX_LOCAL_DEVICE_IDS, "%s", ids) != 0) ||
	    (v == DPG_GPU_NVIDIA && dpg_env_add(out, "CUDA_DEVICE_ORDER", "PCI_BUS_ID") != 0) ||
	    dpg_env_add(out, DPG_VAR_GPU_VISIBILITY, "%s",
		mode == DPG_VIS_ORDERED ? "ordered" : "isolate") != 0 ||
	    dpg_env_add(out, DPG_VAR_GPUS, "%s", t->gpus) != 0)
		return dpg_errf(err, "internal: environment table overflow");
	return 0;
}

/* Verbs NICs that UCX and NCCL's IB transport drive.  AWS EFA (PCI vendor
 * 0x1d0f) is an OpenFabrics device too, but NCCL reaches it through the
 * aws-ofi-nccl plugin and UCX does not use it: naming it would only hurt. */
static bool verbs_nic(const struct dpg_nic *n)
{
	return n->kind == DPG_NIC_OPENFABRICS && n->pci.vendor_id != 0x1d0f;
}

/* NCCL wants the same HCA list in every rank of a node: all RDMA NICs the
 * node's tasks use, exact names, in plan order. */
static int nccl_hca(const struct dpg_plan *p, char *buf, size_t len)
{
	bool used[DPG_TOPO_MAX_NICS] = { false };
	size_t o = 0;

	for (uint32_t t = 0; t < p->ntasks; t++)
		for (uint32_t k = 0; k < p->tasks[t].nnics; k++)
			used[p->tasks[t].nic[k]] = true;
	buf[0] = '\0';
	for (uint32_t i = 0; i < p->nnics; i++) {
		int n;

		if (!used[i] || !verbs_nic(&p->nics[i]))
			continue;
		n = snprintf(buf + o, len - o, "%s%s", o == 0 ? "=" : ",", p->nics[i].name);
		if (n < 0 || (size_t)n >= len - o)
			return -1;
		o += (size_t)n;
	}
	return 0;
}

static int nic_vars(const struct dpg_plan *p, const struct dpg_plan_task *t,
		    const struct dpg_bind_req *req, dpg_getenv_fn get, void *ctx,
		    struct dpg_env *out)
{
	char hca[DPG_ENV_VALUE_MAX];
	const struct dpg_nic *nic = t->nnics > 0 ? &p->nics[t->nic[0]] : NULL;

	if (dpg_env_add(out, DPG_VAR_NICS, "%s", t->nics) != 0)
		return -1;
	if (nic != NULL && verbs_nic(nic) &&
	    !user_set(get, ctx, "UCX_NET_DEVICES") &&
	    dpg_env_add(out, "UCX_NET_DEVICES", "%s:1", nic->name) != 0)
		return -1;
	if (nccl_hca(p, hca, sizeof(hca)) != 0)
		return -1;
	if (hca[0] != '\0' && !user_set(get, ctx, "NCCL_IB_HCA") &&
	    dpg_env_add(out, "NCCL_IB_HCA", "%s", hca) != 0)
		return -1;
	if (req->socket_ifname != NULL && *req->socket_ifname != '\0') {
		if (!user_set(get, ctx, "NCCL_SOCKET_IFNAME") &&
		    dpg_env_add(out, "NCCL_SOCKET_IFNAME", "=%s", req->socket_ifname) != 0)
			return -1;
		if (!user_set(get, ctx, "GLOO_SOCKET_IFNAME") &&
		    dpg_env_add(out, "GLOO_SOCKET_IFNAME", "%s", req->socket_ifname) != 0)
			return -1;
	}
	return 0;
}

int dpg_bind_env(const struct dpg_plan *plan, uint32_t local_rank,
		 const struct dpg_bind_req *req, dpg_getenv_fn get, void *ctx,
		 struct dpg_env *out, struct dpg_err *err)
{
	const struct dpg_plan_task *t;
	unsigned ncpus;
	size_t first = out->n;

	if (plan == NULL || local_rank >= plan->ntasks)
		return dpg_errf(err, "local task %u is not in the node's plan (%u tasks)",
				local_rank, plan ? plan->ntasks : 0);
	t = &plan->tasks[local_rank];
	if (t->ngpus > 0 && gpu_vars(plan, t, req, get, ctx, out, err) != 0)
		return -1;
	if (nic_vars(plan, t, req, get, ctx, out) != 0)
		return dpg_errf(err, "internal: environment table overflow");
	ncpus = dpg_cpuset_count(&t->cpuset);
	if (dpg_env_add(out, DPG_VAR_CPUS, "%s", t->cpus) != 0 ||
	    dpg_env_add(out, DPG_VAR_NUMA, "%d", t->numa) != 0 ||
	    (plan->policy.bind == DPG_BIND_CLOSEST && ncpus > 0 &&
	     !user_set(get, ctx, "OMP_NUM_THREADS") &&
	     dpg_env_add(out, "OMP_NUM_THREADS", "%u", ncpus) != 0) ||
	    add_owned(out, first) != 0)
		return dpg_errf(err, "internal: environment table overflow");
	return 0;
}
