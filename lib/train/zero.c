/* SPDX-License-Identifier: BSD-3-Clause */
/* zero.c - the sharded data-parallel model (ZeRO stages 1-3): parameter
 * registration, gradient reduction, the optimizer step, gathers (state:
 * zero_impl.h, buffers: zero_mem.c, checkpoints: zero_ckpt.c). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt.h"
#include "thread.h"
#include "detsum.h"
#include "dpg_zero.h"
#include "optim.h"
#include "dtype.h"
#include "runtime.h"
#include "gpumod.h"	/* the CUDA module's kernels */
#include "zero_mem.h"
#include "zero_impl.h"
#include "zlayout.h"

/* ------------------------------------------------------------ errors
 * Internal functions return 0 or a negated dpg_status_t with "OP: message"
 * in the caller's struct dpg_err (err.h); each public call maps that once,
 * at its edge. */

dpg_status_t dpg_zedge(struct dpg_zero *z, int rc, const struct dpg_err *e)
{
	dpg_status_t st = (dpg_status_t)-rc;

	if (rc == 0) {
		dpg_ctx_clear_err(z->ctx);	/* a success clears the last error */
		return DPG_OK;
	}
	dpg_ctx_seterr(z->ctx, "%s %s", dpg_ctx_who(z->ctx),
		       e->msg[0] ? e->msg : dpg_strerror(st));
	return st;
}

/* The one boundary with the public collectives, which return a positive
 * status and leave "WHO WHAT: message" in the context: st as -st, with
 * "WHAT: message" in e (the edge puts the WHO back). */
static int coll(struct dpg_zero *z, dpg_status_t st, struct dpg_err *e)
{
	const char *m, *who;
	size_t n;

	if (st == DPG_OK)
		return 0;
	m = dpg_last_error(z->ctx);
	who = dpg_ctx_who(z->ctx);
	n = strlen(who);
	if (strncmp(m, who, n) == 0 && m[n] == ' ')
		m += n + 1;
	return dpg_errs(e, st, "%s", m);
}

/* ------------------------------------------------------------ memory
 * (zero_mem.c writes its message into e; op names the operation) */

static int zm(int rc, const char *op, struct dpg_err *e)
{
	if (rc != 0)
		dpg_err_prefix(e, op);
	return rc;
}

static int zalloc(struct dpg_zero *z, void **p, size_t bytes, size_t *acct, const char *op,
		  struct dpg_err *e)
{
	return zm(dpg_zmem_alloc(&z->mem, p, bytes, acct, e), op, e);
}

static void zfree(struct dpg_zero *z, void **p, size_t bytes, size_t *acct)
{
	dpg_zmem_free(&z->mem, p, bytes, acct);
}

/* host <-> buffer copies (dir 0: into the buffer, 1: out of it) */
int dpg_zcopy(struct dpg_zero *z, void *dst, const void *src, size_t bytes, int dir,
	      struct dpg_err *e)
{
	return zm(dpg_zmem_copy(&z->mem, dst, src, bytes, dir, e), "copy", e);
}

/* An allreduce of a few host values: through device memory on the GPU
 * (NCCL reduces device buffers only). */
int dpg_zsmall_allreduce(struct dpg_zero *z, dpg_comm_t *comm, void *host, dpg_dtype_t dt,
			 dpg_op_t op, struct dpg_err *e)
{
	int rc;

	if (!z->mem.on_gpu)
		return coll(z, dpg_allreduce(comm, host, host, 1, dt, op, NULL), e);
	if (!z->dscratch && (rc = zalloc(z, &z->dscratch, 8, NULL, "allreduce", e)) != 0)
		return rc;
	if ((rc = dpg_zcopy(z, z->dscratch, host, dpg_dtype_size(dt), 0, e)) != 0 ||
	    (rc = coll(z, dpg_allreduce(comm, z->dscratch, z->dscratch, 1, dt, op, NULL),
		       e)) != 0)
		return rc;
	return dpg_zcopy(z, host, z->dscratch, dpg_dtype_size(dt), 1, e);
}

/* ------------------------------------------------------------ options */

void dpg_zero_opts_default(dpg_zero_opts_t *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof(*o));
	o->stage = 1;
	o->optimizer = DPG_OPT_ADAMW;
	o->beta1 = 0.9f;
	o->beta2 = 0.999f;
	o->eps = 1e-8f;
	o->momentum = 0.9f;
	o->weight_decay = 0.0f;
	o->clip_norm = 0.0f;
	o->param_dtype = DPG_F32;
	o->reduce_dtype = DPG_F32;
	o->accum_steps = 1;
	o->shard_size = 0;
}

static int check_opts(const dpg_zero_opts_t *o, int world, struct dpg_err *e)
{
	if (o->stage < 1 || o->stage > 3)
		return dpg_errf(e, "zero_create: stage %d: expected 1, 2 or 3", o->stage);
	if (o->optimizer != DPG_OPT_ADAMW && o->optimizer != DPG_OPT_SGD)
		return dpg_errf(e, "zero_create: unknown optimizer %d", (int)o->optimizer);
	if (o->param_dtype != DPG_F32 && o->param_dtype != DPG_BF16)
		return dpg_errf(e, "zero_create: param_dtype must be DPG_F32 or DPG_BF16");
	if (o->reduce_dtype != DPG_F32 && o->reduce_dtype != DPG_BF16)
		return dpg_errf(e, "zero_create: reduce_dtype must be DPG_F32 or DPG_BF16");
	if (o->accum_steps < 1)
		return dpg_errf(e, "zero_create: accum_steps %d: must be >= 1",
				o->accum_steps);
	if (!(o->beta1 >= 0 && o->beta1 < 1) || !(o->beta2 >= 0 && o->beta2 < 1) ||
	    !(o->eps > 0) || !(o->momentum >= 0 && o->momentum < 1) ||
	    !(o->weight_decay >= 0) || isnan(o->clip_norm))
		return dpg_errf(e, "zero_create: optimizer hyper-parameters out of range "
				"(need 0 <= beta1, beta2, momentum < 1, eps > 0, weight_decay >= 0)");
	if (o->deterministic && o->reduce_dtype != DPG_F32)
		return dpg_errf(e, "zero_create: deterministic mode sums in fixed point: "
				"reduce_dtype must be DPG_F32");
	if (o->shard_size < 0 || o->shard_size > world ||
	    (o->shard_size > 0 && world % o->shard_size != 0))
		return dpg_errf(e, "zero_create: shard_size %d must divide the world size %d "
				"(0 = the world)", o->shard_size, world);
	return 0;
}

/* ------------------------------------------------------------ prefetcher */

/* The first failure of the prefetch, for pf_failed's message. */
static void pf_note(struct dpg_zero *z, int u, int rc, uint64_t seq, const struct dpg_err *pe)
{
	struct prefetch *pf = &z->pf;

	if (rc == 0 || pf->st != DPG_OK)
		return;
	pf->st = rc < 0 ? (dpg_status_t)-rc : DPG_ERR_BACKEND;
	snprintf(pf->msg, sizeof(pf->msg), "gather of unit %d (prefetch, all_gather #%" PRIu64
		 " on %.60s): %.380s", u, seq, dpg_rt_comm_name(pf->comm),
		 pe->msg[0] ? pe->msg : dpg_strerror(pf->st));
}

static void *pf_main(void *arg)
{
	struct dpg_zero *z = arg;
	struct prefetch *pf = &z->pf;

	for (;;) {
		struct dpg_err e = { { 0 } };
		const struct dpg_zunit *U;
		uint64_t seq = 0;
		int u, rc;

		pthread_mutex_lock(&pf->mu);
		while (pf->qh == pf->qt && !pf->stop)
			pthread_cond_wait(&pf->cv, &pf->mu);
		if (pf->qh == pf->qt && pf->stop) {
			pthread_mutex_unlock(&pf->mu);
			return NULL;
		}
		u = pf->q[pf->qh];
		pf->qh = (pf->qh + 1) % pf->qcap;
		pthread_mutex_unlock(&pf->mu);

		U = &z->L.u[u];
		/* the context's last error belongs to the main thread: the
		 * runtime's thread-side all_gather keeps the message here */
		rc = pf->st != DPG_OK ? -(int)pf->st :
		     dpg_rt_all_gather(pf->comm, (char *)z->param_shard + U->shard_off * z->ps,
				       z->u[u].full, U->shard, z->o.param_dtype, &seq, &e);

		pthread_mutex_lock(&pf->mu);
		pf_note(z, u, rc, seq, &e);
		z->u[u].gstate = rc == 0 ? UG_READY : UG_FAILED;
		pthread_cond_broadcast(&pf->cv);
		pthread_mutex_unlock(&pf->mu);
	}
}

/* Whether each of `local` ranks on this machine has a CPU to spare for a
 * prefetch thread, given the `aff` CPUs this process may run on and the
 * machine's `online` CPUs.  Where aff x local exceeds the machine, the ranks
 * share one set (unbound) and each owns aff / local of it; otherwise each
 * has its own (bound by the plugin).  A thread needs 2 CPUs per rank: with
 * one, it gathers on the CPU the caller computes on, and the two hand the
 * CPU back and forth (2 ranks on 2 vCPUs: stage 3 / stage 1 median 1.16x
 * with the thread, 1.07x without, 13 interleaved rounds, 2026-11-27; 4
 * ranks on 2 cores: 1.25x with it, 1.12x without). */
bool dpg_zspare_cpu(long aff, long online, long local)
{
	if (aff <= 0 || local <= 0)
		return false;
	if (online > 0 && aff * local > online)
		aff /= local;
	return aff >= 2;
}

static bool spare_cpu(const struct dpg_zero *z)
{
	cpu_set_t set;
	long n = 0;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		n = CPU_COUNT(&set);
	if (n <= 0)
		n = sysconf(_SC_NPROCESSORS_ONLN);
	return dpg_zspare_cpu(n, sysconf(_SC_NPROCESSORS_ONLN), dpg_local_world_size(z->ctx));
}

/* DPG_ZERO_PREFETCH: 1 (a prefetch thread), 0 (gathers on the caller's
 * thread) or auto / unset (a thread where every rank has a CPU to spare
 * for it) into *on. */
static int want_prefetch(const struct dpg_zero *z, bool *on, struct dpg_err *e)
{
	const char *v = getenv("DPG_ZERO_PREFETCH");

	if (v == NULL || *v == '\0' || strcmp(v, "auto") == 0)
		*on = spare_cpu(z);
	else if (strcmp(v, "1") == 0 || strcmp(v, "0") == 0)
		*on = v[0] == '1';
	else
		return dpg_errf(e, "zero_commit: DPG_ZERO_PREFETCH='%.40s': expected 1, 0 or auto",
				v);
	return 0;
}

static int pf_start(struct dpg_zero *z, struct dpg_err *e)
{
	struct prefetch *pf = &z->pf;
	int rc;

	pf->qcap = z->L.nunits + 1;
	pf->q = calloc((size_t)pf->qcap, sizeof(*pf->q));
	if (!pf->q)
		return dpg_errs(e, DPG_ERR_NOMEM, "zero_commit: out of memory");
	rc = coll(z, dpg_comm_split(z->shard, 0, dpg_comm_rank(z->shard), &pf->comm), e);
	if (rc != 0)
		return rc;
	if (pthread_mutex_init(&pf->mu, NULL) != 0)
		return dpg_errs(e, DPG_ERR_SYSTEM, "zero_commit: pthread_mutex_init failed");
	if (pthread_cond_init(&pf->cv, NULL) != 0) {
		pthread_mutex_destroy(&pf->mu);
		return dpg_errs(e, DPG_ERR_SYSTEM, "zero_commit: pthread_cond_init failed");
	}
	if (dpg_thread_start(&pf->th, pf_main, z) != 0) {
		pthread_cond_destroy(&pf->cv);
		pthread_mutex_destroy(&pf->mu);
		return dpg_errs(e, DPG_ERR_SYSTEM, "zero_commit: cannot start the prefetch thread");
	}
	pf->running = true;
	return 0;
}

/* On NCCL: the prefetch on a device stream unless DPG_ZERO_PREFETCH=0 (no
 * thread, so no oversubscription rule), on a duplicate of the shard group;
 * off, without error, where the backend cannot start a gather. */
static int pf_start_dev(struct dpg_zero *z, struct dpg_err *e)
{
	const char *v = getenv("DPG_ZERO_PREFETCH");
	struct prefetch *pf = &z->pf;
	int rc;

	if (v != NULL && *v != '\0' && strcmp(v, "auto") != 0 && strcmp(v, "1") != 0 &&
	    strcmp(v, "0") != 0)
		return dpg_errf(e, "zero_commit: DPG_ZERO_PREFETCH='%.40s': expected 1, 0 or auto",
				v);
	if (v != NULL && strcmp(v, "0") == 0)
		return 0;
	rc = coll(z, dpg_comm_split(z->shard, 0, dpg_comm_rank(z->shard), &pf->comm), e);
	if (rc != 0)
		return rc;
	pf->dev = dpg_rt_can_start(pf->comm);
	if (!pf->dev) {
		dpg_comm_destroy(pf->comm);
		pf->comm = NULL;
	}
	return 0;
}

static void pf_stop(struct dpg_zero *z)
{
	struct prefetch *pf = &z->pf;

	if (pf->dev) {
		dpg_zdrain(z);	/* no gather may write into freed buffers */
		pf->dev = false;
	}
	if (pf->running) {
		pthread_mutex_lock(&pf->mu);
		pf->stop = true;
		pthread_cond_broadcast(&pf->cv);
		pthread_mutex_unlock(&pf->mu);
		pthread_join(pf->th, NULL);
		pthread_cond_destroy(&pf->cv);
		pthread_mutex_destroy(&pf->mu);
		pf->running = false;
	}
	if (pf->comm)
		dpg_comm_destroy(pf->comm);
	pf->comm = NULL;
	free(pf->q);
	pf->q = NULL;
}

/* ------------------------------------------------------------ create, register */

/* The sharded step's kernels, from the CUDA module the NCCL backend runs on. */
static int gpu_kernels(struct dpg_zero *z, struct dpg_err *e)
{
	const struct dpg_gpumod *g = dpg_ctx_gpumod(z->ctx);

	z->mem.k = g != NULL ? g->k : NULL;
	if (z->mem.k == NULL)
		return dpg_errs(e, DPG_ERR_UNSUPPORTED, "zero_create: the CUDA module "
				"%s was built without nvcc: the sharded step needs its "
				"CUDA kernels on the NCCL backend (rebuild it with nvcc, "
				"or use DPG_BACKEND=cpu)", dpg_gpumod_path());
	return 0;
}

/* The options and the groups of a new model (z->ctx set). */
static int create_setup(struct dpg_zero *z, const dpg_zero_opts_t *opts, struct dpg_err *e)
{
	int world = dpg_world_size(z->ctx), rc;

	if (opts)
		z->o = *opts;
	else
		dpg_zero_opts_default(&z->o);
	if ((rc = check_opts(&z->o, world, e)) != 0)
		return rc;
	z->mem.on_gpu = dpg_backend(z->ctx) == DPG_BACKEND_NCCL;
	z->mem.device = dpg_ctx_device(z->ctx);
	if (z->mem.on_gpu && (rc = gpu_kernels(z, e)) != 0)
		return rc;
	if (z->mem.on_gpu && z->o.deterministic)
		return dpg_errs(e, DPG_ERR_UNSUPPORTED, "zero_create: deterministic mode runs on "
				"the CPU backend only (not yet on NCCL)");
	z->ps = z->o.param_dtype == DPG_BF16 ? 2 : 4;
	z->mem.param_dtype = (int)z->o.param_dtype;
	z->nstate = z->o.optimizer == DPG_OPT_ADAMW ? 3 : 2;
	if (z->o.shard_size == 0 || z->o.shard_size == world) {
		z->shard = dpg_world(z->ctx);
	} else {
		int sizes[2] = { world / z->o.shard_size, z->o.shard_size };

		rc = coll(z, dpg_mesh_create(z->ctx, 2, sizes, &z->mesh), e);
		if (rc != 0)
			return rc;
		z->shard = dpg_mesh_comm(z->mesh, 1);
		z->rep = dpg_mesh_comm(z->mesh, 0);
	}
	z->n = dpg_comm_size(z->shard);
	z->r = dpg_comm_rank(z->shard);
	z->nrep = world / z->n;
	return 0;
}

dpg_status_t dpg_zero_create(dpg_ctx_t *ctx, const dpg_zero_opts_t *opts,
			     dpg_zero_t **out)
{
	struct dpg_err e = { { 0 } };
	struct dpg_zero *z;
	dpg_status_t st;

	if (!out)
		return DPG_ERR_INVALID;
	*out = NULL;
	if (!ctx)
		return DPG_ERR_INVALID;
	z = calloc(1, sizeof(*z));
	if (!z) {
		dpg_ctx_seterr(ctx, "%s zero_create: out of memory", dpg_ctx_who(ctx));
		return DPG_ERR_NOMEM;
	}
	z->ctx = ctx;
	st = dpg_zedge(z, create_setup(z, opts, &e), &e);
	if (st != DPG_OK) {
		free(z);
		return st;
	}
	*out = z;
	return DPG_OK;
}

/* Double the registration arrays; 0 or -1 (nothing lost either way). */
static int grow(struct dpg_zero *z)
{
	int cap = z->cap ? z->cap * 2 : 16;
	void *a, *b, *c;

	if (cap > INT32_MAX / 2)
		return -1;
	a = realloc(z->names, (size_t)cap * sizeof(*z->names));
	if (!a)
		return -1;
	z->names = a;
	b = realloc(z->numel, (size_t)cap * sizeof(*z->numel));
	if (!b)
		return -1;
	z->numel = b;
	c = realloc(z->unit, (size_t)cap * sizeof(*z->unit));
	if (!c)
		return -1;
	z->unit = c;
	z->cap = cap;
	return 0;
}

static int add_param(struct dpg_zero *z, const char *name, size_t numel, int unit, int *id,
		     struct dpg_err *e)
{
	if (z->committed)
		return dpg_errf(e, "zero_add_param: '%s': the model is already committed",
				name ? name : "(null)");
	if (!name || !*name || strlen(name) >= DPG_ZNAME_MAX)
		return dpg_errf(e, "zero_add_param: parameter %d: name must be 1-%d bytes",
				z->nparams, DPG_ZNAME_MAX - 1);
	if (numel == 0)
		return dpg_errf(e, "zero_add_param: '%s': zero elements", name);
	if (unit < 0 || (z->nparams == 0 && unit != 0) ||
	    (z->nparams > 0 && unit != z->unit[z->nparams - 1] &&
	     unit != z->unit[z->nparams - 1] + 1))
		return dpg_errf(e, "zero_add_param: '%s': unit %d out of order (units are "
				"0, 1, 2, ... in registration order)", name, unit);
	if (z->nparams == z->cap && grow(z) != 0)
		return dpg_errs(e, DPG_ERR_NOMEM, "zero_add_param: out of memory");
	snprintf(z->names[z->nparams], DPG_ZNAME_MAX, "%s", name);
	z->numel[z->nparams] = numel;
	z->unit[z->nparams] = unit;
	if (id)
		*id = z->nparams;
	z->nparams++;
	return 0;
}

dpg_status_t dpg_zero_add_param(dpg_zero_t *z, const char *name, size_t numel,
				int unit, int *id)
{
	struct dpg_err e = { { 0 } };

	if (!z)
		return DPG_ERR_INVALID;
	return dpg_zedge(z, add_param(z, name, numel, unit, id, &e), &e);
}

/* The layout of the registered parameters. */
static int commit_layout(struct dpg_zero *z, struct dpg_err *e)
{
	const char **names;
	int i, rc;

	names = calloc((size_t)(z->nparams ? z->nparams : 1), sizeof(*names));
	if (!names)
		return dpg_errs(e, DPG_ERR_NOMEM, "zero_commit: out of memory");
	for (i = 0; i < z->nparams; i++)
		names[i] = z->names[i];
	rc = dpg_zlayout_build(&z->L, z->nparams, names, z->numel, z->unit, z->n, e);
	free(names);
	if (rc != 0) {
		dpg_err_prefix(e, "zero_commit");
		return -DPG_ERR_INVALID;
	}
	return 0;
}

/* Stage 3 with fp32 working parameters: the working shard is the fp32
 * master shard itself (state[0]), not a copy of it: no cast after each
 * update and 4 bytes less per shard element. */
static bool shard_is_master(const struct dpg_zero *z)
{
	return z->o.stage == 3 && z->o.param_dtype == DPG_F32;
}

/* The optimizer state, parameter and gradient buffers of the stage. */
static int commit_buffers(struct dpg_zero *z, struct dpg_err *e)
{
	const char *op = "zero_commit";
	size_t sh = z->L.shard_numel, k;
	int rc;

	z->mem.gather.bytes = z->L.max_unit_padded * z->ps;
	z->mem.grad.bytes = z->L.max_unit_padded * sizeof(float);
	for (k = 0; k < (size_t)z->nstate; k++)
		if ((rc = zalloc(z, (void **)&z->state[k], sh * sizeof(float), &z->optim_bytes,
				 op, e)) != 0)
			return rc;
	if (z->o.stage < 3)
		rc = zalloc(z, &z->param_full, z->L.padded_numel * z->ps, &z->param_bytes, op, e);
	else if (shard_is_master(z))
		z->param_shard = z->state[0];
	else
		rc = zalloc(z, &z->param_shard, sh * z->ps, &z->param_bytes, op, e);
	if (rc != 0)
		return rc;
	if (z->o.stage == 1)
		return zalloc(z, (void **)&z->grad_full, z->L.padded_numel * sizeof(float),
			      &z->grad_bytes, op, e);
	return zalloc(z, (void **)&z->grad_shard, sh * sizeof(float), &z->grad_bytes, op, e);
}

static int commit(struct dpg_zero *z, struct dpg_err *e)
{
	int rc;

	if (z->committed)
		return dpg_errf(e, "zero_commit: already committed");
	if ((rc = commit_layout(z, e)) != 0)
		return rc;
	z->u = calloc((size_t)z->L.nunits, sizeof(*z->u));
	if (!z->u)
		return dpg_errs(e, DPG_ERR_NOMEM, "zero_commit: out of memory");
	if ((rc = commit_buffers(z, e)) != 0)
		return rc;
	if (z->o.stage == 3 && z->mem.on_gpu) {
		if ((rc = pf_start_dev(z, e)) != 0)
			return rc;
	} else if (z->o.stage == 3 && z->n > 1) {
		bool on = false;

		if ((rc = want_prefetch(z, &on, e)) != 0 || (on && (rc = pf_start(z, e)) != 0))
			return rc;
	}
	z->committed = true;
	return 0;
}

dpg_status_t dpg_zero_commit(dpg_zero_t *z)
{
	struct dpg_err e = { { 0 } };

	if (!z)
		return DPG_ERR_INVALID;
	return dpg_zedge(z, commit(z, &e), &e);
}

static void unit_grad_put(struct dpg_zero *z, int u);

dpg_status_t dpg_zero_destroy(dpg_zero_t *z)
{
	int i;

	if (!z)
		return DPG_OK;
	dpg_zsave_drop(z);	/* a save in flight: its writer finishes first */
	pf_stop(z);
	for (i = 0; z->u && i < z->L.nunits; i++) {
		zfree(z, &z->u[i].full, 0, NULL);
		unit_grad_put(z, i);	/* to the pool, drained below */
		zfree(z, (void **)&z->u[i].acc, z->L.u[i].padded * sizeof(int64_t), NULL);
	}
	if (z->param_shard == (void *)z->state[0])
		z->param_shard = NULL;	/* shard_is_master: freed as state[0] */
	for (i = 0; i < DPG_CKPT_MAX_STATE; i++)
		zfree(z, (void **)&z->state[i], 0, NULL);
	zfree(z, &z->param_full, 0, NULL);
	zfree(z, &z->param_shard, 0, NULL);
	zfree(z, (void **)&z->grad_full, 0, NULL);
	zfree(z, (void **)&z->grad_shard, 0, NULL);
	zfree(z, &z->dscratch, 0, NULL);
	dpg_zmem_pool_drain(&z->mem);
	if (z->mesh)
		dpg_mesh_destroy(z->mesh);
	dpg_zlayout_free(&z->L);
	free(z->u);
	free(z->names);
	free(z->numel);
	free(z->unit);
	free(z);
	return DPG_OK;
}

int dpg_zneed_committed(struct dpg_zero *z, const char *op, struct dpg_err *e)
{
	if (!z->committed)
		return dpg_errf(e, "%s: call dpg_zero_commit first", op);
	return 0;
}

static int check_id(struct dpg_zero *z, int id, const char *op, struct dpg_err *e)
{
	int rc = dpg_zneed_committed(z, op, e);

	if (rc == 0 && (id < 0 || id >= z->L.nparams))
		return dpg_errf(e, "%s: no parameter %d (%d registered)", op, id, z->L.nparams);
	return rc;
}

static int check_unit(struct dpg_zero *z, int unit, const char *op, struct dpg_err *e)
{
	int rc = dpg_zneed_committed(z, op, e);

	if (rc == 0 && (unit < 0 || unit >= z->L.nunits))
		return dpg_errf(e, "%s: no unit %d (%d units)", op, unit, z->L.nunits);
	return rc;
}

/* ------------------------------------------------------------ parameters */

/* The working-parameter piece this rank owns of unit u. */
static void *own_piece(struct dpg_zero *z, int u)
{
	const struct dpg_zunit *U = &z->L.u[u];

	if (z->o.stage == 3)
		return (char *)z->param_shard + U->shard_off * z->ps;
	return (char *)z->param_full + (U->flat_off + (size_t)z->r * U->shard) * z->ps;
}

/* Working parameters from the master shard: cast the own pieces (none to
 * cast where the shard is the master), then (stages 1-2) all-gather every
 * unit in the shard group. */
int dpg_zpublish(struct dpg_zero *z, struct dpg_err *e)
{
	int u, rc;

	for (u = 0; u < z->L.nunits && !shard_is_master(z); u++) {
		const struct dpg_zunit *U = &z->L.u[u];

		rc = zm(dpg_zmem_cast(&z->mem, own_piece(z, u), z->state[0] + U->shard_off,
				      U->shard, e), "cast", e);
		if (rc != 0)
			return rc;
	}
	if (z->o.stage == 3)
		return 0;
	for (u = 0; u < z->L.nunits; u++) {
		const struct dpg_zunit *U = &z->L.u[u];

		rc = coll(z, dpg_all_gather(z->shard, own_piece(z, u),
					    (char *)z->param_full + U->flat_off * z->ps, U->shard,
					    z->o.param_dtype, NULL), e);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* Stages 1-2: parameter P's whole tensor, replicated, into the working
 * parameters (cast to bf16 first where they are bf16). */
static int set_full(struct dpg_zero *z, const struct dpg_zparam *P, const float *values,
		    struct dpg_err *e)
{
	const struct dpg_zunit *U = &z->L.u[P->unit];
	char *full = (char *)z->param_full + (U->flat_off + P->unit_off) * z->ps;
	uint16_t *tmp;
	int rc;

	if (z->o.param_dtype == DPG_F32)
		return dpg_zcopy(z, full, values, P->numel * sizeof(float), 0, e);
	tmp = malloc(P->numel * sizeof(uint16_t));
	if (!tmp)
		return dpg_errs(e, DPG_ERR_NOMEM, "zero_set_param: out of memory");
	dpg_f32_to_bf16_n(values, tmp, P->numel);
	rc = dpg_zcopy(z, full, tmp, P->numel * sizeof(uint16_t), 0, e);
	free(tmp);
	return rc;
}

static int set_param(struct dpg_zero *z, int id, const float *values, struct dpg_err *e)
{
	const struct dpg_zparam *P;
	const struct dpg_zunit *U;
	size_t lo, hi, a, b;
	int rc;

	if ((rc = check_id(z, id, "zero_set_param", e)) != 0)
		return rc;
	if (!values)
		return dpg_errf(e, "zero_set_param: '%s': NULL values", z->L.p[id].name);
	P = &z->L.p[id];
	U = &z->L.u[P->unit];
	lo = (size_t)z->r * U->shard;
	hi = lo + U->shard;
	a = P->unit_off > lo ? P->unit_off : lo;
	b = P->unit_off + P->numel < hi ? P->unit_off + P->numel : hi;
	if (a < b) {
		float *dst = z->state[0] + U->shard_off + (a - lo);

		if ((rc = dpg_zcopy(z, dst, values + (a - P->unit_off), (b - a) * sizeof(float),
				    0, e)) != 0)
			return rc;
		if (z->o.stage == 3 && !shard_is_master(z) &&
		    (rc = zm(dpg_zmem_cast(&z->mem, (char *)z->param_shard +
					   (U->shard_off + a - lo) * z->ps, dst, b - a, e),
			     "cast", e)) != 0)
			return rc;
	}
	return z->o.stage < 3 ? set_full(z, P, values, e) : 0;
}

dpg_status_t dpg_zero_set_param(dpg_zero_t *z, int id, const float *values)
{
	struct dpg_err e = { { 0 } };

	if (!z)
		return DPG_ERR_INVALID;
	return dpg_zedge(z, set_param(z, id, values, &e), &e);
}

void *dpg_zero_param(dpg_zero_t *z, int id)
{
	const struct dpg_zparam *P;

	if (!z || !z->committed || id < 0 || id >= z->L.nparams)
		return NULL;
	P = &z->L.p[id];
	if (z->o.stage < 3)
		return (char *)z->param_full + (z->L.u[P->unit].flat_off + P->unit_off) * z->ps;
	if (z->u[P->unit].gstate != UG_READY)
		return NULL;
	return (char *)z->u[P->unit].full + P->unit_off * z->ps;
}

/* ------------------------------------------------------------ gathers (stage 3) */

static int pf_failed(struct dpg_zero *z, const char *op, struct dpg_err *e)
{
	if (z->pf.st != DPG_ERR_INVALID)
		dpg_ctx_set_failed(z->ctx);
	return dpg_errs(e, z->pf.st, "%s: %s", op, z->pf.msg);
}

/* Unit u's gather on the prefetch communicator's device stream. */
static int start_dev(struct dpg_zero *z, int u, const char *op, struct dpg_err *e)
{
	const struct dpg_zunit *U = &z->L.u[u];
	struct dpg_err pe = { { 0 } };
	uint64_t seq = 0;
	int rc;

	rc = dpg_rt_all_gather_start(z->pf.comm, own_piece(z, u), z->u[u].full, U->shard,
				     z->o.param_dtype, &z->u[u].ticket, &seq, &pe);
	z->u[u].seq = seq;
	if (rc != 0) {
		pf_note(z, u, rc, seq, &pe);
		z->u[u].gstate = UG_FAILED;
		return pf_failed(z, op, e);
	}
	z->u[u].gstate = UG_QUEUED;
	return 0;
}

/* Queue unit u's gather (its buffer allocated here, in the main thread). */
static int enqueue(struct dpg_zero *z, int u, const char *op, struct dpg_err *e)
{
	const struct dpg_zunit *U = &z->L.u[u];
	int rc;

	rc = zm(dpg_zmem_pool_get(&z->mem, &z->mem.gather, 0, &z->u[u].full, &z->param_bytes, e),
		op, e);
	if (rc != 0)
		return rc;
	if (z->pf.dev)
		return start_dev(z, u, op, e);
	if (!z->pf.running) {
		/* synchronous: one rank, or the GPU (see the README) */
		rc = coll(z, dpg_all_gather(z->shard, own_piece(z, u), z->u[u].full, U->shard,
					    z->o.param_dtype, NULL), e);
		z->u[u].gstate = rc == 0 ? UG_READY : UG_FAILED;
		return rc;
	}
	pthread_mutex_lock(&z->pf.mu);
	z->u[u].gstate = UG_QUEUED;
	z->pf.q[z->pf.qt] = u;
	z->pf.qt = (z->pf.qt + 1) % z->pf.qcap;
	pthread_cond_broadcast(&z->pf.cv);
	pthread_mutex_unlock(&z->pf.mu);
	return 0;
}

static int wait_gathered(struct dpg_zero *z, int u)
{
	int s;

	if (z->pf.dev && z->u[u].gstate == UG_QUEUED) {
		struct dpg_err pe = { { 0 } };
		int rc = dpg_rt_wait_ticket(z->pf.comm, z->u[u].ticket, &pe);

		z->u[u].ticket = NULL;
		pf_note(z, u, rc, z->u[u].seq, &pe);
		z->u[u].gstate = rc == 0 ? UG_READY : UG_FAILED;
	}
	if (!z->pf.running)
		return z->u[u].gstate;
	pthread_mutex_lock(&z->pf.mu);
	while (z->u[u].gstate == UG_QUEUED)
		pthread_cond_wait(&z->pf.cv, &z->pf.mu);
	s = z->u[u].gstate;
	pthread_mutex_unlock(&z->pf.mu);
	return s;
}

static int gather(struct dpg_zero *z, int unit, int next, struct dpg_err *e)
{
	const char *op = "zero_gather";
	int rc;

	if ((rc = check_unit(z, unit, op, e)) != 0)
		return rc;
	if (next != -1 && (rc = check_unit(z, next, op, e)) != 0)
		return rc;
	if (z->o.stage < 3)
		return 0;
	if (z->u[unit].gstate == UG_NONE && (rc = enqueue(z, unit, op, e)) != 0)
		return rc;
	/* the next one queued before the wait: the thread goes on to it
	 * without sleeping in between (no wake-up to wait for) */
	if (z->pf.running && next >= 0 && next != unit && z->u[next].gstate == UG_NONE &&
	    (rc = enqueue(z, next, op, e)) != 0)
		return rc;
	if (wait_gathered(z, unit) != UG_READY)
		return z->pf.running || z->pf.dev ? pf_failed(z, op, e) :
		       dpg_errs(e, DPG_ERR_PEER, "%s: unit %d could not be gathered", op, unit);
	if (next >= 0 && next != unit && z->u[next].gstate == UG_NONE)
		return enqueue(z, next, op, e);
	return 0;
}

/* A prefetch gather timed out: the message goes on with what every rank
 * was doing, as the public collectives' does (asked once, on this thread,
 * which owns the context's store connection). */
static void pf_hang_report(struct dpg_zero *z)
{
	struct prefetch *pf = &z->pf;

	if (!pf->asked) {
		pf->asked = true;
		dpg_rt_hang_line(pf->comm, pf->ranks, sizeof(pf->ranks));
	}
	if (pf->ranks[0] != '\0')
		dpg_ctx_adderr(z->ctx, "; the ranks: %s", pf->ranks);
}

dpg_status_t dpg_zero_gather(dpg_zero_t *z, int unit, int next)
{
	struct dpg_err e = { { 0 } };
	dpg_status_t st;

	if (!z)
		return DPG_ERR_INVALID;
	st = dpg_zedge(z, gather(z, unit, next, &e), &e);
	if (st == DPG_ERR_TIMEOUT && (z->pf.running || z->pf.dev) &&
	    z->pf.st == DPG_ERR_TIMEOUT)
		pf_hang_report(z);
	return st;
}

void dpg_zdrain(struct dpg_zero *z)
{
	for (int u = 0; z->u != NULL && u < z->L.nunits; u++)
		if (z->u[u].gstate == UG_QUEUED)
			(void)wait_gathered(z, u);
}

void dpg_zrelease(struct dpg_zero *z, int unit)
{
	if (z->o.stage < 3 || z->u[unit].gstate == UG_NONE)
		return;
	(void)wait_gathered(z, unit);	/* never free under the worker */
	dpg_zmem_pool_put(&z->mem, &z->mem.gather, &z->u[unit].full, &z->param_bytes);
	z->u[unit].gstate = UG_NONE;
}

dpg_status_t dpg_zero_release(dpg_zero_t *z, int unit)
{
	struct dpg_err e = { { 0 } };
	int rc;

	if (!z)
		return DPG_ERR_INVALID;
	if ((rc = check_unit(z, unit, "zero_release", &e)) != 0)
		return dpg_zedge(z, rc, &e);
	dpg_zrelease(z, unit);
	return DPG_OK;
}

/* ------------------------------------------------------------ gradients */

/* Unit u's full gradient (stages 2-3): zeros, in a buffer of the pool (one
 * unit's is taken again by the next once it is reduced).  With a shard
 * group of one rank the unit's shard is the whole unit, so until the unit
 * is reduced its gradient is taken in place there (in_shard): the
 * reduce-scatter then moves nothing, where it copied the unit (stage 2 at
 * one rank took 1.15x stage 1's step, a copy of every gradient a step). */
static int unit_grad_get(struct dpg_zero *z, int u, const char *op, struct dpg_err *e)
{
	const struct dpg_zunit *U = &z->L.u[u];

	if (z->n == 1 && !z->u[u].reduced) {
		z->u[u].grad = z->grad_shard + U->shard_off;
		z->u[u].in_shard = true;
		return zm(dpg_zmem_zero(&z->mem, z->u[u].grad, U->padded * sizeof(float), e),
			  op, e);
	}
	return zm(dpg_zmem_pool_get(&z->mem, &z->mem.grad, U->padded * sizeof(float),
				    (void **)&z->u[u].grad, &z->grad_bytes, e), op, e);
}

static void unit_grad_put(struct dpg_zero *z, int u)
{
	if (z->u[u].in_shard) {		/* not the pool's: it stays the shard */
		z->u[u].grad = NULL;
		z->u[u].in_shard = false;
		return;
	}
	dpg_zmem_pool_put(&z->mem, &z->mem.grad, (void **)&z->u[u].grad, &z->grad_bytes);
}

float *dpg_zero_grad(dpg_zero_t *z, int id)
{
	struct dpg_err e = { { 0 } };
	const struct dpg_zparam *P;
	struct zunit *zu;
	int rc;

	if (!z)
		return NULL;
	if ((rc = check_id(z, id, "zero_grad", &e)) != 0) {
		dpg_zedge(z, rc, &e);
		return NULL;
	}
	P = &z->L.p[id];
	if (z->o.stage == 1)
		return z->grad_full + z->L.u[P->unit].flat_off + P->unit_off;
	zu = &z->u[P->unit];
	if (!zu->grad && (rc = unit_grad_get(z, P->unit, "zero_grad", &e)) != 0) {
		dpg_zedge(z, rc, &e);
		return NULL;
	}
	return zu->grad + P->unit_off;
}

/* Unit u's gradient shard: where the reduction lands and the update reads. */
static float *grad_piece(struct dpg_zero *z, int u)
{
	const struct dpg_zunit *U = &z->L.u[u];

	if (z->o.stage == 1)
		return z->grad_full + U->flat_off + (size_t)z->r * U->shard;
	return z->grad_shard + U->shard_off;
}

static float *unit_full_grad(struct dpg_zero *z, int u)
{
	return z->o.stage == 1 ? z->grad_full + z->L.u[u].flat_off : z->u[u].grad;
}

/* Deterministic mode: move unit u's fp32 gradient of this micro-step into
 * its fixed-point sum (and zero it). */
static int fold_unit(struct dpg_zero *z, int u, struct dpg_err *e)
{
	const struct dpg_zunit *U = &z->L.u[u];
	float *full = unit_full_grad(z, u);
	double bad = 0;
	int rc;

	if (!full)
		return 0;
	if (!z->u[u].acc && (rc = zalloc(z, (void **)&z->u[u].acc, U->padded * sizeof(int64_t),
					 &z->grad_bytes, "zero_step", e)) != 0)
		return rc;
	if (dpg_fix_fold(full, z->u[u].acc, U->padded, &bad) != 0)
		return dpg_errf(e, "zero_step: deterministic mode: gradient value %g of unit %d "
				"is NaN, Inf or beyond the fixed-point range (|sum| < 2^18): clip "
				"or scale the loss, or turn deterministic mode off", bad, u);
	return 0;
}

/* Unit u is reduced: its full gradient (stages 2-3) can go. */
static void reduced(struct dpg_zero *z, int u)
{
	z->u[u].reduced = true;
	if (z->o.stage > 1)
		unit_grad_put(z, u);
}

/* Deterministic mode: sum the fixed-point gradients exactly (integer
 * reduce-scatter), convert this rank's piece back to fp32 and add its exact
 * sum of squares to det_sumsq. */
static int reduce_unit_det(struct dpg_zero *z, int u, struct dpg_err *e)
{
	const char *op = "zero_step";
	const struct dpg_zunit *U = &z->L.u[u];
	int64_t *acc, *mine;
	int rc;

	if ((rc = fold_unit(z, u, e)) != 0)
		return rc;
	if (!z->u[u].acc && (rc = zalloc(z, (void **)&z->u[u].acc, U->padded * sizeof(int64_t),
					 &z->grad_bytes, op, e)) != 0)
		return rc;
	acc = z->u[u].acc;
	mine = acc + (size_t)z->r * U->shard;	/* the NCCL-style in-place block */
	rc = coll(z, dpg_reduce_scatter(z->shard, acc, mine, U->shard, DPG_I64, DPG_SUM, NULL), e);
	if (rc == 0 && z->rep)
		rc = coll(z, dpg_allreduce(z->rep, mine, mine, U->shard, DPG_I64, DPG_SUM, NULL), e);
	if (rc != 0)
		return rc;
	if (dpg_fix_to_f32(mine, grad_piece(z, u), U->shard, &z->det_sumsq) != 0)
		return dpg_errf(e, "%s: deterministic mode: a summed gradient of unit %d is beyond "
				"the fixed-point range (|sum| < 2^18): clip or scale the loss, or "
				"turn deterministic mode off", op, u);
	zfree(z, (void **)&z->u[u].acc, U->padded * sizeof(int64_t), &z->grad_bytes);
	reduced(z, u);
	return 0;
}

/* Sum full (unit u's gradient) in bf16 into piece. */
static int reduce_bf16(struct dpg_zero *z, int u, float *full, float *piece,
		       struct dpg_err *e)
{
	const struct dpg_zunit *U = &z->L.u[u];
	uint16_t *tmp;
	int rc;

	/* a gradient buffer of the pool holds it (2 bytes an element of 4) */
	if ((rc = zm(dpg_zmem_pool_get(&z->mem, &z->mem.grad, 0, (void **)&tmp, NULL, e),
		     "zero_step", e)) != 0)
		return rc;
	rc = zm(dpg_zmem_to_bf16(&z->mem, full, tmp, U->padded, e), "bf16", e);
	if (rc == 0)
		rc = coll(z, dpg_reduce_scatter(z->shard, tmp, tmp, U->shard, DPG_BF16, DPG_SUM,
						NULL), e);
	if (rc == 0 && z->rep)
		rc = coll(z, dpg_allreduce(z->rep, tmp, tmp, U->shard, DPG_BF16, DPG_SUM, NULL), e);
	if (rc == 0)
		rc = zm(dpg_zmem_from_bf16(&z->mem, tmp, piece, U->shard, e), "bf16", e);
	dpg_zmem_pool_put(&z->mem, &z->mem.grad, (void **)&tmp, NULL);
	return rc;
}

/* Sum unit u's gradient over every rank into this rank's piece. */
static int reduce_unit(struct dpg_zero *z, int u, struct dpg_err *e)
{
	const struct dpg_zunit *U = &z->L.u[u];
	float *full = unit_full_grad(z, u), *piece = grad_piece(z, u);
	int rc;

	if (z->o.deterministic)
		return reduce_unit_det(z, u, e);
	if (!full) {	/* no gradient this step: zeros, but take part */
		if (z->o.stage == 1)
			return dpg_errf(e, "zero_step: internal: no gradient buffer");
		if ((rc = unit_grad_get(z, u, "zero_step", e)) != 0)
			return rc;
		full = z->u[u].grad;
	}
	if (z->o.reduce_dtype == DPG_F32) {
		rc = coll(z, dpg_reduce_scatter(z->shard, full, piece, U->shard, DPG_F32, DPG_SUM,
						NULL), e);
		if (rc == 0 && z->rep)
			rc = coll(z, dpg_allreduce(z->rep, piece, piece, U->shard, DPG_F32, DPG_SUM,
						   NULL), e);
	} else {
		rc = reduce_bf16(z, u, full, piece, e);
	}
	if (rc != 0)
		return rc;
	reduced(z, u);
	return 0;
}

dpg_status_t dpg_zero_grads_ready(dpg_zero_t *z, int unit)
{
	struct dpg_err e = { { 0 } };
	int rc;

	if (!z)
		return DPG_ERR_INVALID;
	rc = check_unit(z, unit, "zero_grads_ready", &e);
	if (rc == 0 && z->o.stage > 1 && z->micro == z->o.accum_steps - 1 && !z->u[unit].reduced)
		rc = reduce_unit(z, unit, &e);
	return dpg_zedge(z, rc, &e);
}

/* ------------------------------------------------------------ the step */

/* Deterministic mode: the exact global sum of squares (128-bit limbs summed
 * by an integer allreduce), in value units. */
static int grad_norm_det(struct dpg_zero *z, double *norm2, struct dpg_err *e)
{
	int64_t limbs[4];
	int k, rc;

	dpg_u128_to_limbs(z->det_sumsq, limbs);
	z->det_sumsq = 0;
	for (k = 0; k < 4 && z->n > 1; k++)
		if ((rc = dpg_zsmall_allreduce(z, z->shard, &limbs[k], DPG_I64, DPG_SUM, e)) != 0)
			return rc;
	*norm2 = ldexp((double)dpg_u128_from_limbs(limbs), -2 * DPG_FIX_BITS);
	return 0;
}

static int grad_norm(struct dpg_zero *z, double *norm2, struct dpg_err *e)
{
	double s = 0;
	int u, rc;

	if (z->o.deterministic)
		return grad_norm_det(z, norm2, e);

	for (u = 0; u < z->L.nunits; u++) {
		double x;

		rc = zm(dpg_zmem_sumsq(&z->mem, grad_piece(z, u), z->L.u[u].shard, &x, e),
			"sumsq", e);
		if (rc != 0)
			return rc;
		s += x;
	}
	if (z->n > 1 && (rc = dpg_zsmall_allreduce(z, z->shard, &s, DPG_F64, DPG_SUM, e)) != 0)
		return rc;
	*norm2 = s;
	return 0;
}

static int update(struct dpg_zero *z, float lr, float gscale, struct dpg_err *e)
{
	int u, err = 0;

	for (u = 0; u < z->L.nunits && err == 0; u++) {
		size_t off = z->L.u[u].shard_off, n = z->L.u[u].shard;
		const float *g = grad_piece(z, u);
		float *p = z->state[0] + off, *m = z->state[1] + off;
		int rc = 0;

		if (z->o.optimizer == DPG_OPT_ADAMW) {
			struct dpg_adamw_hp h = {
				.lr = lr, .beta1 = z->o.beta1, .beta2 = z->o.beta2,
				.eps = z->o.eps, .weight_decay = z->o.weight_decay,
				.gscale = gscale,
			};
			float *v = z->state[2] + off;

			dpg_adamw_hp_at(&h, (double)(z->step + 1));

			if (dpg_zmem_gpu(&z->mem))
				rc = z->mem.k->adamw(p, m, v, g, n, &h, NULL);
			else
				dpg_adamw_update(p, m, v, g, n, &h);
		} else {
			struct dpg_sgd_hp h = {
				.lr = lr, .momentum = z->o.momentum,
				.weight_decay = z->o.weight_decay, .gscale = gscale,
			};

			if (dpg_zmem_gpu(&z->mem))
				rc = z->mem.k->sgd(p, m, g, n, &h, NULL);
			else
				dpg_sgd_update(p, m, g, n, &h);
		}
		if (rc != 0)
			err = zm(dpg_zmem_cuda_err(&z->mem, e, rc), "zero_step", e);
	}
	return err;
}

int dpg_zclear_grads(struct dpg_zero *z, struct dpg_err *e)
{
	int u, rc = 0;

	if (z->o.stage == 1)
		rc = zm(dpg_zmem_zero(&z->mem, z->grad_full, z->L.padded_numel * sizeof(float),
				   e), "memset", e);
	z->det_sumsq = 0;
	for (u = 0; u < z->L.nunits; u++) {
		z->u[u].reduced = false;
		zfree(z, (void **)&z->u[u].acc, z->L.u[u].padded * sizeof(int64_t), &z->grad_bytes);
		if (z->o.stage > 1)
			unit_grad_put(z, u);
	}
	return rc;
}

/* A micro-step of an accumulation: no update (deterministic mode folds
 * the gradients into their fixed-point sums). */
static int step_micro(struct dpg_zero *z, dpg_step_stats_t *stats, struct dpg_err *e)
{
	int u, rc;

	for (u = 0; z->o.deterministic && u < z->L.nunits; u++)
		if ((rc = fold_unit(z, u, e)) != 0)
			return rc;
	z->micro++;
	if (stats) {
		stats->step = z->step;
		stats->clip_scale = 1.0;
	}
	return 0;
}

static int step(struct dpg_zero *z, float lr, dpg_step_stats_t *stats, struct dpg_err *e)
{
	double norm2 = 0, norm, clip = 1.0, base;
	int u, rc;

	if ((rc = dpg_zneed_committed(z, "zero_step", e)) != 0)
		return rc;
	if (!isfinite(lr) || lr < 0)
		return dpg_errf(e, "zero_step: learning rate %g: must be finite and >= 0",
				(double)lr);
	if (stats)
		memset(stats, 0, sizeof(*stats));
	if (z->micro < z->o.accum_steps - 1)
		return step_micro(z, stats, e);
	for (u = z->L.nunits - 1; u >= 0; u--)
		if (!z->u[u].reduced && (rc = reduce_unit(z, u, e)) != 0)
			return rc;
	dpg_zdrain(z);	/* a prefetch reads the shard the update writes */
	base = 1.0 / ((double)z->n * z->nrep * z->o.accum_steps);
	if ((rc = grad_norm(z, &norm2, e)) != 0)
		return rc;
	norm = sqrt(norm2) * base;
	if (z->o.clip_norm > 0 && norm > z->o.clip_norm)
		clip = z->o.clip_norm / (norm + 1e-6);
	if (!isfinite(norm))
		return dpg_errf(e, "zero_step: step %ld: the gradient norm is %g (NaN or Inf in "
				"the gradients): parameters left unchanged", z->step + 1, norm);
	if ((rc = update(z, lr, (float)(base * clip), e)) != 0 ||
	    (rc = dpg_zclear_grads(z, e)) != 0)
		return rc;
	z->micro = 0;
	z->step++;
	if ((rc = dpg_zpublish(z, e)) != 0)
		return rc;
	if (stats) {
		stats->stepped = 1;
		stats->step = z->step;
		stats->grad_norm = norm;
		stats->clip_scale = clip;
	}
	return 0;
}

dpg_status_t dpg_zero_step(dpg_zero_t *z, float lr, dpg_step_stats_t *stats)
{
	struct dpg_err e = { { 0 } };

	if (!z)
		return DPG_ERR_INVALID;
	return dpg_zedge(z, step(z, lr, stats, &e), &e);
}

dpg_status_t dpg_zero_memory(const dpg_zero_t *z, dpg_zero_mem_t *mem)
{
	if (!z || !mem)
		return DPG_ERR_INVALID;
	memset(mem, 0, sizeof(*mem));
	mem->param_bytes = z->param_bytes;
	mem->grad_bytes = z->grad_bytes;
	mem->optim_bytes = z->optim_bytes;
	mem->cached_bytes = z->mem.spare_bytes;
	mem->padded_numel = z->L.padded_numel;
	mem->shard_numel = z->L.shard_numel;
	return DPG_OK;
}
