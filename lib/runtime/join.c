/* SPDX-License-Identifier: BSD-3-Clause */
/* join.c - resolve how this process joins its job from explicit options
 * and the environment.  Pure: every variable is read through the caller's
 * lookup function; nothing is printed, nothing global is touched. */
#include "join.h"

#include "parse.h"	/* dpg_parse_ulong */
#include "port.h"
#include "taskdist.h"

_Static_assert(DPG_CONTRACT_VARS_VERSION == DPG_CONTRACT_VERSION,
	       "contract_vars.h and dpg.h disagree on the contract version");

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_RANKS ((long)INT_MAX - 1)
#define MAX_TPN_NODES 1048576

/* Format the message into err and evaluate to -DPG_ERR_ENV. */
#define ENV_FAIL(...) (dpg_errf(err, __VA_ARGS__), -DPG_ERR_ENV)

/* One integer value and the variable (or option) that supplied it. */
struct fld {
	long v;			/* < 0: not set */
	const char *var;
};

/* What one source says. */
struct src {
	enum dpg_join_src id;
	struct fld rank, size, lrank, lsize, nrank, nnodes, port;
	const char *addr, *addr_var;	/* NULL: none */
	char addr_buf[DPG_ADDR_MAX];
	bool ids;			/* job_id/step_id valid */
	uint32_t job_id, step_id;
};

static const struct fld UNSET = { -1, NULL };

void dpg_init_opts_default(dpg_init_opts_t *opts)
{
	if (opts == NULL)
		return;
	memset(opts, 0, sizeof(*opts));
	opts->rank = opts->world_size = -1;
	opts->local_rank = opts->local_world_size = -1;
	opts->master_addr = NULL;
	opts->master_port = 0;
	opts->secret = NULL;
	opts->timeout_s = 0;
	opts->backend = DPG_BACKEND_AUTO;
	opts->device = -1;
}

const char *dpg_join_src_name(enum dpg_join_src s)
{
	switch (s) {
	case DPG_JOIN_SINGLE: return "single process";
	case DPG_JOIN_OPTS: return "options";
	case DPG_JOIN_DPG: return "DPG_*";
	case DPG_JOIN_TORCHRUN: return "torchrun";
	case DPG_JOIN_SLURM: return "SLURM_*";
	case DPG_JOIN_OMPI: return "Open MPI";
	case DPG_JOIN_PMI: return "PMI";
	}
	return "?";
}

const char *dpg_join_process_getenv(void *ctx, const char *name)
{
	(void)ctx;
	return getenv(name);
}

static void src_init(struct src *s, enum dpg_join_src id)
{
	memset(s, 0, sizeof(*s));
	s->id = id;
	s->rank = s->size = s->lrank = s->lsize = s->nrank = s->nnodes = UNSET;
	s->port = UNSET;
}

static const char *val(dpg_getenv_fn get, void *ctx, const char *name)
{
	const char *v = get(ctx, name);

	return (v == NULL || *v == '\0') ? NULL : v;
}

/* Read name as an integer in [lo, MAX_RANKS] (or [lo, hi]); unset is fine. */
static int rd(dpg_getenv_fn get, void *ctx, const char *name, long lo, long hi,
	      struct fld *f, struct dpg_err *err)
{
	const char *v = val(get, ctx, name);
	unsigned long x;
	char q[64];

	*f = UNSET;
	if (v == NULL)
		return 0;
	if (dpg_parse_ulong(v, (unsigned long)lo, (unsigned long)hi, &x) != 0)
		return dpg_errf(err, "%s='%s' is not an integer in %ld..%ld", name,
				dpg_err_quote(v, q, sizeof(q)), lo, hi);
	f->v = (long)x;
	f->var = name;
	return 0;
}

static int rd_rank(dpg_getenv_fn get, void *ctx, const char *name,
		   struct fld *f, struct dpg_err *err)
{
	return rd(get, ctx, name, 0, MAX_RANKS - 1, f, err);
}

static int rd_size(dpg_getenv_fn get, void *ctx, const char *name,
		   struct fld *f, struct dpg_err *err)
{
	return rd(get, ctx, name, 1, MAX_RANKS, f, err);
}

/* A source that gives a rank must give the size too, and vice versa. */
static int need_pair(const struct fld *a, const char *aname, const struct fld *b,
		     const char *bname, struct dpg_err *err)
{
	if (a->v >= 0 && b->v < 0)
		return dpg_errf(err, "incomplete environment: %s=%ld is set but %s "
				"is not (set both, or neither)", a->var, a->v, bname);
	if (b->v >= 0 && a->v < 0)
		return dpg_errf(err, "incomplete environment: %s=%ld is set but %s "
				"is not (set both, or neither)", b->var, b->v, aname);
	return 0;
}

static int rd_addr(dpg_getenv_fn get, void *ctx, const char *name,
		   struct src *s, struct dpg_err *err)
{
	const char *v = val(get, ctx, name);

	if (v == NULL)
		return 0;
	if (strlen(v) >= DPG_ADDR_MAX)
		return dpg_errf(err, "%s is longer than %d bytes", name,
				DPG_ADDR_MAX - 1);
	s->addr = v;
	s->addr_var = name;
	return 0;
}

static int read_dpg(dpg_getenv_fn get, void *ctx, struct src *s,
		    struct dpg_err *err)
{
	struct fld contract, job, step;

	src_init(s, DPG_JOIN_DPG);
	if (rd(get, ctx, DPG_VAR_CONTRACT, 1, 1000000, &contract, err) != 0 ||
	    rd_rank(get, ctx, DPG_VAR_RANK, &s->rank, err) != 0 ||
	    rd_size(get, ctx, DPG_VAR_WORLD_SIZE, &s->size, err) != 0 ||
	    rd_rank(get, ctx, DPG_VAR_LOCAL_RANK, &s->lrank, err) != 0 ||
	    rd_size(get, ctx, DPG_VAR_LOCAL_WORLD_SIZE, &s->lsize, err) != 0 ||
	    rd_rank(get, ctx, DPG_VAR_NODE_RANK, &s->nrank, err) != 0 ||
	    rd_size(get, ctx, DPG_VAR_NUM_NODES, &s->nnodes, err) != 0 ||
	    rd(get, ctx, DPG_VAR_MASTER_PORT, 1, 65535, &s->port, err) != 0 ||
	    rd(get, ctx, DPG_VAR_JOB_ID, 0, 0xffffffffL, &job, err) != 0 ||
	    rd(get, ctx, DPG_VAR_STEP_ID, 0, 0xffffffffL, &step, err) != 0 ||
	    rd_addr(get, ctx, DPG_VAR_MASTER_ADDR, s, err) != 0)
		return -1;
	if (need_pair(&s->rank, DPG_VAR_RANK, &s->size, DPG_VAR_WORLD_SIZE, err) != 0)
		return -1;
	if (job.v >= 0 && step.v >= 0) {
		s->ids = true;
		s->job_id = (uint32_t)job.v;
		s->step_id = (uint32_t)step.v;
	}
	return 0;
}

static int read_torch(dpg_getenv_fn get, void *ctx, struct src *s,
		      struct dpg_err *err)
{
	src_init(s, DPG_JOIN_TORCHRUN);
	if (rd_rank(get, ctx, DPG_TORCH_RANK, &s->rank, err) != 0 ||
	    rd_size(get, ctx, DPG_TORCH_WORLD_SIZE, &s->size, err) != 0 ||
	    rd_rank(get, ctx, DPG_TORCH_LOCAL_RANK, &s->lrank, err) != 0 ||
	    rd_size(get, ctx, DPG_TORCH_LOCAL_WORLD_SIZE, &s->lsize, err) != 0 ||
	    rd_rank(get, ctx, DPG_TORCH_NODE_RANK, &s->nrank, err) != 0 ||
	    rd_size(get, ctx, DPG_TORCH_GROUP_WORLD_SIZE, &s->nnodes, err) != 0 ||
	    rd(get, ctx, DPG_TORCH_MASTER_PORT, 1, 65535, &s->port, err) != 0 ||
	    rd_addr(get, ctx, DPG_TORCH_MASTER_ADDR, s, err) != 0)
		return -1;
	if (s->nrank.v < 0 && rd_rank(get, ctx, DPG_TORCH_GROUP_RANK, &s->nrank, err) != 0)
		return -1;
	return need_pair(&s->rank, DPG_TORCH_RANK, &s->size, DPG_TORCH_WORLD_SIZE, err);
}

/* Slurm's variables describe this process only inside a real step (not the
 * batch script, the extern or an interactive step). */
static int read_slurm(dpg_getenv_fn get, void *ctx, struct src *s,
		      struct dpg_err *err)
{
	struct fld procid, job, step, ntasks;
	const char *stepv = val(get, ctx, "SLURM_STEP_ID"), *tpn, *nodelist;
	const char *stepname = "SLURM_STEP_ID";
	uint32_t *counts;
	size_t cap, n = 0;
	char host[DPG_HOSTNAME_MAX + 1];

	src_init(s, DPG_JOIN_SLURM);
	if (stepv == NULL) {
		stepv = val(get, ctx, "SLURM_STEPID");
		stepname = "SLURM_STEPID";
	}
	if (rd(get, ctx, stepname, 0, 0xffffffffL, &step, err) != 0 ||
	    rd(get, ctx, "SLURM_JOB_ID", 0, 0xffffffffL, &job, err) != 0)
		return -1;
	if (job.v < 0 && rd(get, ctx, "SLURM_JOBID", 0, 0xffffffffL, &job, err) != 0)
		return -1;
	if (step.v >= 0 && dpg_is_special_step((uint32_t)step.v))
		return 0;	/* batch script, extern or interactive step */
	if (rd_rank(get, ctx, "SLURM_PROCID", &procid, err) != 0 ||
	    rd_size(get, ctx, "SLURM_STEP_NUM_TASKS", &s->size, err) != 0)
		return -1;
	if (s->size.v < 0 && step.v >= 0) {
		/* older Slurm: only the job-wide count, valid inside a step */
		if (rd_size(get, ctx, "SLURM_NTASKS", &ntasks, err) != 0)
			return -1;
		s->size = ntasks;
	}
	if (procid.v < 0 || s->size.v < 0) {
		s->size = UNSET;	/* not a task of a step: no source */
		return 0;
	}
	s->rank = procid;
	if (rd_rank(get, ctx, "SLURM_LOCALID", &s->lrank, err) != 0 ||
	    rd_rank(get, ctx, "SLURM_NODEID", &s->nrank, err) != 0 ||
	    rd_size(get, ctx, "SLURM_STEP_NUM_NODES", &s->nnodes, err) != 0)
		return -1;
	if (job.v >= 0 && step.v >= 0) {
		s->ids = true;
		s->job_id = (uint32_t)job.v;
		s->step_id = (uint32_t)step.v;
		s->port.v = dpg_port_for_step(s->job_id, s->step_id,
			(struct dpg_port_range){ DPG_PORT_DEFAULT_LO,
						 DPG_PORT_DEFAULT_HI });
		s->port.var = "SLURM_JOB_ID/SLURM_STEP_ID";
	}
	tpn = val(get, ctx, "SLURM_STEP_TASKS_PER_NODE");
	if (tpn != NULL && s->nrank.v >= 0) {
		cap = s->nnodes.v > 0 ? (size_t)s->nnodes.v : MAX_TPN_NODES;
		if (cap > MAX_TPN_NODES)
			cap = MAX_TPN_NODES;
		counts = calloc(cap, sizeof(*counts));
		if (counts == NULL)
			return dpg_errf(err, "out of memory reading "
					"SLURM_STEP_TASKS_PER_NODE");
		if (dpg_tpn_parse(tpn, counts, cap, &n, err) != 0) {
			free(counts);
			return dpg_err_prefix(err, "SLURM_STEP_TASKS_PER_NODE");
		}
		if ((size_t)s->nrank.v >= n) {
			free(counts);
			return dpg_errf(err, "inconsistent environment: SLURM_NODEID=%ld "
					"but SLURM_STEP_TASKS_PER_NODE='%.64s' describes %zu "
					"nodes", s->nrank.v, tpn, n);
		}
		s->lsize.v = counts[s->nrank.v];
		s->lsize.var = "SLURM_STEP_TASKS_PER_NODE";
		free(counts);
	}
	nodelist = val(get, ctx, "SLURM_STEP_NODELIST");
	if (nodelist != NULL) {
		if (dpg_hostlist_nth(nodelist, 0, host, sizeof(host), err) != 0)
			return dpg_err_prefix(err, "SLURM_STEP_NODELIST");
		snprintf(s->addr_buf, sizeof(s->addr_buf), "%s", host);
		s->addr = s->addr_buf;
		s->addr_var = "SLURM_STEP_NODELIST";
	}
	return 0;
}

static int read_ompi(dpg_getenv_fn get, void *ctx, struct src *s,
		     struct dpg_err *err)
{
	src_init(s, DPG_JOIN_OMPI);
	if (rd_rank(get, ctx, "OMPI_COMM_WORLD_RANK", &s->rank, err) != 0 ||
	    rd_size(get, ctx, "OMPI_COMM_WORLD_SIZE", &s->size, err) != 0 ||
	    rd_rank(get, ctx, "OMPI_COMM_WORLD_LOCAL_RANK", &s->lrank, err) != 0 ||
	    rd_size(get, ctx, "OMPI_COMM_WORLD_LOCAL_SIZE", &s->lsize, err) != 0)
		return -1;
	return need_pair(&s->rank, "OMPI_COMM_WORLD_RANK", &s->size,
			 "OMPI_COMM_WORLD_SIZE", err);
}

static int read_pmi(dpg_getenv_fn get, void *ctx, struct src *s,
		    struct dpg_err *err)
{
	src_init(s, DPG_JOIN_PMI);
	if (rd_rank(get, ctx, "PMI_RANK", &s->rank, err) != 0 ||
	    rd_size(get, ctx, "PMI_SIZE", &s->size, err) != 0 ||
	    rd_rank(get, ctx, "MPI_LOCALRANKID", &s->lrank, err) != 0 ||
	    rd_size(get, ctx, "MPI_LOCALNRANKS", &s->lsize, err) != 0)
		return -1;
	return need_pair(&s->rank, "PMI_RANK", &s->size, "PMI_SIZE", err);
}

/* First source to set a field wins; a later one must agree. */
static int take(struct fld *dst, const struct fld *s, struct dpg_err *err)
{
	if (s->v < 0)
		return 0;
	if (dst->v < 0) {
		*dst = *s;
		return 0;
	}
	if (dst->v != s->v)
		return dpg_errf(err, "inconsistent environment: %s=%ld but %s=%ld "
				"(a value inherited from another launch? unset the "
				"stale one, or launch with srun --dpg-gpus-per-task=N)",
				dst->var, dst->v, s->var, s->v);
	return 0;
}

static bool has_world(const struct src *s)
{
	return s->size.v >= 0;
}

static int parse_secret(const char *hex, const char *from, char *out,
			size_t cap, struct dpg_err *err)
{
	size_t n = strlen(hex);

	if (n < DPG_SECRET_HEX_MIN || n > DPG_SECRET_HEX_MAX || n % 2 != 0)
		return dpg_errf(err, "%s has %zu characters: it must be an even "
				"number of hex digits, %d to %d (e.g. export "
				"DPG_SECRET=$(head -c32 /dev/urandom | od -An -tx1 | "
				"tr -d ' \\n'))", from, n, DPG_SECRET_HEX_MIN,
				DPG_SECRET_HEX_MAX);
	for (size_t i = 0; i < n; i++) {
		char c = hex[i];

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
		      (c >= 'A' && c <= 'F')))
			return dpg_errf(err, "%s is not hexadecimal (character %zu); "
					"generate one with: head -c32 /dev/urandom | "
					"od -An -tx1 | tr -d ' \\n'", from, i + 1);
	}
	if (n >= cap)
		return dpg_errf(err, "%s is too long", from);
	memcpy(out, hex, n + 1);
	return 0;
}

static int parse_timeout(dpg_getenv_fn get, void *ctx, double *out,
			 struct dpg_err *err)
{
	const char *v = val(get, ctx, "DPG_TIMEOUT");
	char *end = NULL, q[64];
	double t;

	*out = DPG_JOIN_DEFAULT_TIMEOUT_S;
	if (v == NULL)
		return 0;
	t = strtod(v, &end);
	if (end == v || *end != '\0' || !isfinite(t) || t <= 0 || t > 1e7 ||
	    v[0] == '-' || v[0] == '+' || v[0] == ' ')
		return dpg_errf(err, "DPG_TIMEOUT='%s' is not a number of seconds "
				"(> 0, e.g. 300 or 2.5)", dpg_err_quote(v, q, sizeof(q)));
	*out = t;
	return 0;
}

static int parse_backend(dpg_getenv_fn get, void *ctx, dpg_backend_t *out,
			 struct dpg_err *err)
{
	const char *v = val(get, ctx, "DPG_BACKEND");
	char q[64];

	*out = DPG_BACKEND_AUTO;
	if (v == NULL || strcasecmp(v, "auto") == 0)
		return 0;
	if (strcasecmp(v, "cpu") == 0)
		*out = DPG_BACKEND_CPU;
	else if (strcasecmp(v, "nccl") == 0)
		*out = DPG_BACKEND_NCCL;
	else
		return dpg_errf(err, "DPG_BACKEND='%s' is not one of auto, cpu, nccl",
				dpg_err_quote(v, q, sizeof(q)));
	return 0;
}

static int gpu_hint(dpg_getenv_fn get, void *ctx, struct dpg_join *j,
		    struct dpg_err *err)
{
	const char *gpus = val(get, ctx, DPG_VAR_GPUS);
	const char *cvd = get(ctx, "CUDA_VISIBLE_DEVICES");
	struct fld per_task;
	size_t n;

	j->gpu_hint = -1;
	j->gpu_busid[0] = '\0';
	if (rd(get, ctx, DPG_VAR_GPUS_PER_TASK, 0, 1024, &per_task, err) != 0)
		return -1;
	if (gpus != NULL) {
		n = strcspn(gpus, ",");
		if (n >= sizeof(j->gpu_busid))
			return dpg_errf(err, "DPG_GPUS='%.64s' does not start with a "
					"PCI bus id", gpus);
		memcpy(j->gpu_busid, gpus, n);
		j->gpu_busid[n] = '\0';
		j->gpu_hint = n > 0 ? 1 : 0;
		return 0;
	}
	if (per_task.v == 0) {
		j->gpu_hint = 0;	/* the user asked dpg for no GPU */
		return 0;
	}
	if (cvd != NULL) {
		j->gpu_hint = (*cvd == '\0' || strcmp(cvd, "-1") == 0 ||
			       strcmp(cvd, "NoDevFiles") == 0) ? 0 : 1;
	}
	return 0;
}

/* Explicit options: checked, then laid over what the environment says. */
static int read_opts(const dpg_init_opts_t *o, struct src *s, struct dpg_err *err)
{
	src_init(s, DPG_JOIN_OPTS);
	if (o == NULL)
		return 0;
	if (o->rank < -1 || o->world_size < -1 || o->local_rank < -1 ||
	    o->local_world_size < -1)
		return dpg_errf(err, "invalid options: rank %d, world_size %d, "
				"local_rank %d, local_world_size %d (-1 = from the "
				"environment)", o->rank, o->world_size, o->local_rank,
				o->local_world_size);
	if (o->world_size > 0) {
		if (o->rank < 0)
			return dpg_errf(err, "invalid options: world_size=%d given "
					"without rank", o->world_size);
		s->size = (struct fld){ o->world_size, "opts.world_size" };
		s->rank = (struct fld){ o->rank, "opts.rank" };
	} else if (o->rank > 0) {
		return dpg_errf(err, "invalid options: rank=%d given without "
				"world_size", o->rank);
	}
	/* rank 0 with world_size 0 is a zero-initialised struct: "unset" */
	if (o->local_world_size > 0) {
		if (o->local_rank < 0)
			return dpg_errf(err, "invalid options: local_world_size=%d "
					"given without local_rank", o->local_world_size);
		s->lsize = (struct fld){ o->local_world_size, "opts.local_world_size" };
		s->lrank = (struct fld){ o->local_rank, "opts.local_rank" };
	} else if (o->local_rank > 0) {
		s->lrank = (struct fld){ o->local_rank, "opts.local_rank" };
	}
	if (o->master_port < -1 || o->master_port > 65535)
		return dpg_errf(err, "invalid options: master_port=%d is not a port",
				o->master_port);
	if (o->master_port > 0)
		s->port = (struct fld){ o->master_port, "opts.master_port" };
	if (o->master_addr != NULL && *o->master_addr != '\0') {
		if (strlen(o->master_addr) >= DPG_ADDR_MAX)
			return dpg_errf(err, "invalid options: master_addr is longer "
					"than %d bytes", DPG_ADDR_MAX - 1);
		s->addr = o->master_addr;
		s->addr_var = "opts.master_addr";
	}
	if (isnan(o->timeout_s) || isinf(o->timeout_s))
		return dpg_errf(err, "invalid options: timeout_s is not finite");
	if ((int)o->backend < (int)DPG_BACKEND_AUTO ||
	    (int)o->backend > (int)DPG_BACKEND_NCCL)
		return dpg_errf(err, "invalid options: backend=%d", (int)o->backend);
	if (o->device < -1)
		return dpg_errf(err, "invalid options: device=%d", o->device);
	return 0;
}

static void override(struct fld *dst, const struct fld *o)
{
	if (o->v >= 0)
		*dst = *o;
}

static int check_below(const struct fld *a, const struct fld *b,
		       const char *what, struct dpg_err *err)
{
	if (a->v >= 0 && b->v >= 0 && a->v >= b->v)
		return dpg_errf(err, "inconsistent environment: %s=%ld is not below "
				"%s=%ld (%s)", a->var, a->v, b->var, b->v, what);
	return 0;
}

/* The sources in precedence order, and what they agree on. */
enum { S_DPG, S_TORCH, S_SLURM, S_OMPI, S_PMI, S_COUNT };

struct merged {
	struct src s[S_COUNT], o;	/* o: the explicit options */
	bool use[S_COUNT];
	struct fld rank, size, lrank, lsize, nrank, nnodes, port;
	const char *addr, *addr_var;
	enum dpg_join_src from;
	int ids_from;			/* source of the job/step ids, -1 */
};

/* Phase 1: every source, each checked on its own. */
static int read_sources(const dpg_init_opts_t *opts, dpg_getenv_fn get,
			void *ctx, struct merged *m, struct dpg_err *err)
{
	if (read_opts(opts, &m->o, err) != 0)
		return -DPG_ERR_INVALID;
	if (read_dpg(get, ctx, &m->s[S_DPG], err) != 0 ||
	    read_torch(get, ctx, &m->s[S_TORCH], err) != 0 ||
	    read_slurm(get, ctx, &m->s[S_SLURM], err) != 0 ||
	    read_ompi(get, ctx, &m->s[S_OMPI], err) != 0 ||
	    read_pmi(get, ctx, &m->s[S_PMI], err) != 0)
		return -DPG_ERR_ENV;
	return 0;
}

/* Phase 2: nested launchers: the innermost one describes this process. */
static void pick_launcher(dpg_getenv_fn get, void *ctx, struct merged *m)
{
	const struct src *mpi, *step;

	for (int i = 0; i < S_COUNT; i++)
		m->use[i] = true;
	if (val(get, ctx, "TORCHELASTIC_RUN_ID") != NULL && has_world(&m->s[S_TORCH])) {
		m->use[S_DPG] = m->use[S_SLURM] = m->use[S_OMPI] = m->use[S_PMI] = false;
		return;
	}
	mpi = has_world(&m->s[S_OMPI]) ? &m->s[S_OMPI] :
	      has_world(&m->s[S_PMI]) ? &m->s[S_PMI] : NULL;
	step = has_world(&m->s[S_DPG]) ? &m->s[S_DPG] :
	       has_world(&m->s[S_SLURM]) ? &m->s[S_SLURM] : NULL;
	if (mpi != NULL && step != NULL && mpi->size.v != step->size.v)
		m->use[S_DPG] = m->use[S_SLURM] = false;
}

/* Phase 3: each value from the first source that has it; later sources
 * that have it too must agree. */
static int merge_sources(struct merged *m, struct dpg_err *err)
{
	for (int i = 0; i < S_COUNT; i++) {
		const struct src *s = &m->s[i];

		if (!m->use[i])
			continue;
		if (has_world(s) && m->from == DPG_JOIN_SINGLE)
			m->from = s->id;
		if (take(&m->rank, &s->rank, err) != 0 ||
		    take(&m->size, &s->size, err) != 0 ||
		    take(&m->lrank, &s->lrank, err) != 0 ||
		    take(&m->lsize, &s->lsize, err) != 0 ||
		    take(&m->nrank, &s->nrank, err) != 0 ||
		    take(&m->nnodes, &s->nnodes, err) != 0)
			return -DPG_ERR_ENV;
		if (m->addr == NULL && s->addr != NULL) {
			m->addr = s->addr;
			m->addr_var = s->addr_var;
		}
		if (m->port.v < 0 && s->port.v >= 0)
			m->port = s->port;
		if (m->ids_from < 0 && s->ids)
			m->ids_from = i;
	}
	return 0;
}

/* Phase 4: explicit options beat everything, without cross-checks; no
 * distributed environment at all is a world of one. */
static void apply_opts(struct merged *m)
{
	if (m->o.size.v >= 0)
		m->from = DPG_JOIN_OPTS;
	override(&m->rank, &m->o.rank);
	override(&m->size, &m->o.size);
	override(&m->lrank, &m->o.lrank);
	override(&m->lsize, &m->o.lsize);
	override(&m->port, &m->o.port);
	if (m->o.addr != NULL) {
		m->addr = m->o.addr;
		m->addr_var = m->o.addr_var;
	}
	if (m->size.v < 0) {
		m->rank = (struct fld){ 0, "rank" };
		m->size = (struct fld){ 1, "world size" };
		m->from = DPG_JOIN_SINGLE;
	}
}

/* Phase 5: the ranks and sizes are consistent with each other. */
static int check_world(const struct merged *m, struct dpg_err *err)
{
	if (check_below(&m->rank, &m->size, "ranks count from 0", err) != 0 ||
	    check_below(&m->lrank, &m->lsize, "local ranks count from 0", err) != 0 ||
	    check_below(&m->nrank, &m->nnodes, "node ranks count from 0", err) != 0)
		return -DPG_ERR_ENV;
	if (m->lsize.v > m->size.v)
		return ENV_FAIL("inconsistent environment: %s=%ld is larger than "
				"%s=%ld", m->lsize.var, m->lsize.v, m->size.var, m->size.v);
	if (m->nnodes.v > m->size.v)
		return ENV_FAIL("inconsistent environment: %s=%ld nodes for "
				"%s=%ld ranks", m->nnodes.var, m->nnodes.v, m->size.var,
				m->size.v);
	if (m->lrank.v >= m->size.v)
		return ENV_FAIL("inconsistent environment: %s=%ld is not below "
				"%s=%ld", m->lrank.var, m->lrank.v, m->size.var, m->size.v);
	return 0;
}

/* Phase 6: ranks and sizes into out. */
static void fill_world(const struct merged *m, struct dpg_join *out)
{
	out->rank = (int)m->rank.v;
	out->world_size = (int)m->size.v;
	out->src = m->from;
	out->local_rank = (int)m->lrank.v;
	out->local_world_size = (int)m->lsize.v;
	out->node_rank = (int)m->nrank.v;
	out->num_nodes = (int)m->nnodes.v;
	if (out->world_size == 1) {
		out->local_rank = out->node_rank = 0;
		out->local_world_size = out->num_nodes = 1;
	}
}

/* Phase 7: MASTER_ADDR/PORT (required for a world of more than one) and the
 * store key namespace. */
static int fill_rendezvous(const struct merged *m, struct dpg_join *out,
			   struct dpg_err *err)
{
	if (out->world_size > 1) {
		if (m->addr == NULL)
			return ENV_FAIL("%s=%d but MASTER_ADDR is not set: export "
					"MASTER_ADDR (the host of rank 0) and MASTER_PORT, "
					"or launch with srun", m->size.var, out->world_size);
		if (m->port.v < 0)
			return ENV_FAIL("%s=%d and %s=%s but MASTER_PORT is not "
					"set: export MASTER_PORT (a free TCP port on "
					"the host of rank 0)", m->size.var, out->world_size,
					m->addr_var, m->addr);
		snprintf(out->master_addr, sizeof(out->master_addr), "%s", m->addr);
		out->master_port = (uint16_t)m->port.v;
	} else if (m->addr != NULL) {
		snprintf(out->master_addr, sizeof(out->master_addr), "%s", m->addr);
		out->master_port = m->port.v > 0 ? (uint16_t)m->port.v : 0;
	}
	/* every rank must agree on the namespace: only a step's own ids */
	if (m->ids_from >= 0 && (m->from == DPG_JOIN_DPG || m->from == DPG_JOIN_SLURM)) {
		out->have_ids = true;
		out->job_id = m->s[m->ids_from].job_id;
		out->step_id = m->s[m->ids_from].step_id;
		snprintf(out->ns, sizeof(out->ns), "%u.%u", out->job_id,
			 out->step_id);
	} else {
		snprintf(out->ns, sizeof(out->ns), "x");
	}
	return 0;
}

/* Phase 8: timeout, backend, device and GPU hints, node name. */
static int fill_settings(const dpg_init_opts_t *opts, dpg_getenv_fn get,
			 void *ctx, struct dpg_join *out, struct dpg_err *err)
{
	const char *node;

	if (parse_timeout(get, ctx, &out->timeout_s, err) != 0 ||
	    parse_backend(get, ctx, &out->backend, err) != 0 ||
	    gpu_hint(get, ctx, out, err) != 0)
		return -DPG_ERR_ENV;
	if (opts != NULL && opts->timeout_s > 0)
		out->timeout_s = opts->timeout_s;
	if (opts != NULL && opts->backend != DPG_BACKEND_AUTO)
		out->backend = opts->backend;
	out->device = (opts != NULL && opts->device >= 0) ? opts->device : -1;
	node = val(get, ctx, "SLURMD_NODENAME");
	if (node != NULL && strlen(node) < sizeof(out->node))
		snprintf(out->node, sizeof(out->node), "%s", node);
	return 0;
}

/* Phase 9 (last, so that environment errors are reported first): the job
 * secret, required for a world of more than one. */
static int fill_secret(const dpg_init_opts_t *opts, dpg_getenv_fn get,
		       void *ctx, const struct merged *m, struct dpg_join *out,
		       struct dpg_err *err)
{
	const char *sec;

	if (opts != NULL && opts->secret != NULL && *opts->secret != '\0') {
		if (parse_secret(opts->secret, "opts.secret", out->secret,
				 sizeof(out->secret), err) != 0)
			return -DPG_ERR_AUTH;
	} else if ((sec = val(get, ctx, DPG_VAR_SECRET)) != NULL) {
		if (parse_secret(sec, DPG_VAR_SECRET, out->secret, sizeof(out->secret),
				 err) != 0 && out->world_size > 1)
			return -DPG_ERR_AUTH;
	}
	if (out->world_size > 1 && out->secret[0] == '\0')
		return dpg_errs(err, DPG_ERR_AUTH, "%s=%d (from %s) but no job "
				"secret: launch with the dpg plugin (srun "
				"--dpg-gpus-per-task=N) or export the same DPG_SECRET "
				"in every rank, e.g. export DPG_SECRET=$(head -c32 "
				"/dev/urandom | od -An -tx1 | tr -d ' \\n')",
				m->size.var, out->world_size, dpg_join_src_name(m->from));
	return 0;
}

int dpg_join_resolve(const dpg_init_opts_t *opts, dpg_getenv_fn get, void *ctx,
		     struct dpg_join *out, struct dpg_err *err)
{
	struct merged merged = { .from = DPG_JOIN_SINGLE, .ids_from = -1 }, *m = &merged;
	int rc;

	memset(out, 0, sizeof(*out));
	if (get == NULL)
		get = dpg_join_process_getenv;
	m->rank = m->size = m->lrank = m->lsize = UNSET;
	m->nrank = m->nnodes = m->port = UNSET;
	if ((rc = read_sources(opts, get, ctx, m, err)) == 0) {
		pick_launcher(get, ctx, m);
		rc = merge_sources(m, err);
	}
	if (rc == 0) {
		apply_opts(m);
		rc = check_world(m, err);
	}
	if (rc == 0) {
		fill_world(m, out);
		rc = fill_rendezvous(m, out, err);
	}
	if (rc == 0)
		rc = fill_settings(opts, get, ctx, out, err);
	if (rc == 0)
		rc = fill_secret(opts, get, ctx, m, out, err);
	return rc;
}
