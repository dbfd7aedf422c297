/* SPDX-License-Identifier: BSD-3-Clause */
/* faults.c - fault injection for libdpg (issue 7): kill, stop and attack a
 * running job on this machine and measure how its surviving ranks find out.
 *
 *   faults [--list] [--md FILE] [--logdir DIR] [--timeout S] [CASE...]
 *
 * Every case forks its ranks exactly as tests/unit/runtime/test_init.c does
 * (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, a
 * free MASTER_PORT, DPG_SECRET, DPG_TIMEOUT, DPG_BACKEND=cpu; SLURMD_NODENAME
 * gives each rank a "node": one name for all = shared memory, one per rank =
 * TCP ring over loopback), injects its fault from this (parent) process and
 * checks what every survivor's call returned.  The ranks write what they do
 * (phase, iteration, CLOCK_MONOTONIC stamps, status, dpg_last_error) into a
 * shared anonymous mapping, so the parent can time a kill to land inside a
 * call and measure fault -> error return per rank without parsing output.
 *
 * Output: one line per case on stdout,
 *   ok    <case>  detect <min>-<max> ms  outcome: <short>
 *   FAIL  <case>  detect ... outcome: ...  why: <reasons>
 *   SKIP  <case>  ...                            (a feature not built yet)
 * and, with --md, one markdown table row per case appended to FILE.  Each
 * rank's stdout/stderr goes to DIR/<case>/r<slot>.log (kept for failures).
 * Exit status: 0 all ran cases ok or skipped, 1 any failed, 2 usage.
 *
 * A case never hangs: its ranks carry PR_SET_PDEATHSIG(SIGKILL) and a
 * watchdog kills whatever is left at the case's limit (and fails the case).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dpg_zero.h"
#include "../unit/testenv.h"
#include "digest.h"

/* The ZeRO API lands in lib/zero.c; until libdpg exports it these stay NULL
 * and the checkpoint case reports SKIP instead of failing to link. */
#define WEAK(f) extern __typeof__(f) f __attribute__((weak))
WEAK(dpg_zero_opts_default);
WEAK(dpg_zero_create);
WEAK(dpg_zero_destroy);
WEAK(dpg_zero_add_param);
WEAK(dpg_zero_commit);
WEAK(dpg_zero_set_param);
WEAK(dpg_zero_param);
WEAK(dpg_zero_grad);
WEAK(dpg_zero_step);
WEAK(dpg_zero_save);
WEAK(dpg_zero_load);

#define SECRET_A "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define SECRET_B "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
#define NREC 12			/* rank processes per case */
#define ERRLEN 600

extern char **environ;

/* ================================================================ time */

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
	struct timespec ts;

	if (s <= 0)
		return;
	ts.tv_sec = (time_t)s;
	ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* ================================================================ shared state */

enum phase {
	P_NONE = 0, P_INIT, P_READY, P_OP, P_BETWEEN, P_HELD, P_FAILED, P_FINAL,
	P_DONE
};

static const char *const phase_names[] = {
	"not started", "in dpg_init", "initialized", "in a call", "between calls",
	"held", "failed", "in dpg_finalize", "done"
};

enum where { WH_NONE = 0, WH_INIT, WH_OP, WH_FINAL };

/* What one rank process reports (written by it, read by the parent). */
struct rec {
	pid_t pid;
	int rank;
	int phase;
	int iter;		/* index of the current / last call */
	double t_start, t_init, t_enter, t_ret, t_fin;
	double op_ms_sum;	/* successful calls: total and count */
	int op_n;
	int init_st;		/* what dpg_init returned */
	int st;			/* status of the first failing call, else DPG_OK */
	int where;		/* enum where of that failure */
	int fail_iter;
	int fin_st;
	int wrong;		/* a collective returned a wrong result */
	int unsupported;	/* the checkpoint API is not there */
	int save_ok[8];		/* ckpt: save s returned DPG_OK */
	uint64_t save_hash[8];	/* ckpt: parameters at save s */
	uint64_t hash;		/* ckpt load: parameters after the load */
	char extra[64];		/* ckpt load: the extra bytes */
	char err[ERRLEN];
	char note[200];
};

struct shared {
	int stop;		/* parent -> service ranks: leave the loop */
	struct rec r[NREC];
};

static struct shared *sh;

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)

/* ================================================================ rank side */

enum work {
	W_ALLREDUCE,	/* iters allreduces of count floats, each checked */
	W_BARRIER,	/* iters barriers */
	W_INIT,		/* dpg_init, one barrier, finalize */
	W_SERVICE,	/* small allreduces until sh->stop (agreed by allreduce) */
	W_CKPT_SAVE,	/* ZeRO model: save, (step, save) x3 */
	W_CKPT_LOAD,	/* ZeRO model: load and hash */
};

struct wcfg {
	enum work kind;
	size_t count;		/* floats per allreduce */
	int iters;
	float offset;		/* added to every value (tells jobs apart) */
	int hold_rank;		/* this rank stops before call #hold_iter ... */
	int hold_iter;		/* (== iters: before dpg_finalize) and waits */
	double pace_s;		/* sleep between calls */
	const char *ckpt_dir;
	size_t ckpt_numel;	/* model size (floats) */
	int ckpt_saves;
	int start_together;	/* wait until slots 0..N-1 are all initialized */
};

struct rspec {
	int rank, world;
	uint16_t port;
	const char *secret;	/* NULL: no DPG_SECRET */
	const char *node;	/* SLURMD_NODENAME, NULL: none */
	int lrank, lsize;	/* < 0: not set */
	double timeout_s;
	const char *env[6];	/* extra "NAME=VALUE" */
	struct wcfg w;
};


static void setenv_long(const char *name, long v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%ld", v);
	setenv(name, buf, 1);
}

static void rank_env(const struct rspec *rs)
{
	char t[32];

	clean_env();
	setenv_long("RANK", rs->rank);
	setenv_long("WORLD_SIZE", rs->world);
	if (rs->lrank >= 0) {
		setenv_long("LOCAL_RANK", rs->lrank);
		setenv_long("LOCAL_WORLD_SIZE", rs->lsize);
	}
	setenv("MASTER_ADDR", "127.0.0.1", 1);
	setenv_long("MASTER_PORT", rs->port);
	if (rs->secret != NULL)
		setenv("DPG_SECRET", rs->secret, 1);
	setenv("DPG_BACKEND", "cpu", 1);
	snprintf(t, sizeof(t), "%g", rs->timeout_s);
	setenv("DPG_TIMEOUT", t, 1);
	if (rs->node != NULL)
		setenv("SLURMD_NODENAME", rs->node, 1);
	for (int i = 0; i < 6 && rs->env[i] != NULL; i++)
		putenv((char *)rs->env[i]);
}

static void copy_err(struct rec *r, dpg_ctx_t *ctx)
{
	snprintf(r->err, sizeof(r->err), "%s", ctx != NULL ? dpg_last_error(ctx) : "(no context)");
}

/* A call failed: remember the first failure. */
static void record_fail(struct rec *r, dpg_ctx_t *ctx, dpg_status_t st, int where,
			int iter)
{
	r->t_ret = mono();
	if (r->st == DPG_OK) {
		r->st = st;
		r->where = where;
		r->fail_iter = iter;
		copy_err(r, ctx);
	}
	STORE(r->phase, P_FAILED);
}

static void hold(struct rec *r)
{
	STORE(r->phase, P_HELD);
	for (;;)
		pause();	/* until the parent kills us */
}

static void finalize(struct rec *r, dpg_ctx_t *ctx)
{
	double t;

	STORE(r->phase, P_FINAL);
	t = mono();
	r->fin_st = dpg_finalize(ctx);
	r->t_fin = mono();
	(void)t;
	STORE(r->phase, P_DONE);
}

static bool check_values(const float *b, size_t n, float want)
{
	for (size_t k = 0; k < n; k++)
		if (b[k] != want)
			return false;
	return true;
}

static double rs_timeout = 10;	/* this rank's DPG_TIMEOUT */

static void work_collectives(const struct wcfg *w, struct rec *r, dpg_ctx_t *ctx)
{
	dpg_comm_t *world = dpg_world(ctx);
	int rank = dpg_rank(ctx), n = dpg_world_size(ctx);
	size_t count = w->kind == W_SERVICE ? 4096 : w->count;
	float *buf = NULL;
	double t_end = mono() + 120;	/* service: never loop forever */

	if (w->kind != W_BARRIER && (buf = malloc((count ? count : 1) * sizeof(float))) == NULL) {
		snprintf(r->note, sizeof(r->note), "out of memory");
		return;
	}
	/* concurrent jobs: nobody starts its loop before every job is up */
	for (double until = mono() + 3 * rs_timeout; w->start_together > 0 && mono() < until;) {
		bool all = true;

		for (int s = 0; s < w->start_together; s++)
			if (LOAD(sh->r[s].phase) < P_READY)
				all = false;
		if (all)
			break;
		usleep(1000);
	}
	for (int i = 0; w->kind == W_SERVICE || i < w->iters; i++) {
		float want = (float)n * (float)(n + 1) / 2 + (float)n * ((float)i + w->offset);
		dpg_status_t st;
		double t0;

		if (rank == w->hold_rank && i == w->hold_iter)
			hold(r);
		if (buf != NULL)
			for (size_t k = 0; k < count; k++)
				buf[k] = (float)(rank + 1) + (float)i + w->offset;
		r->iter = i;
		r->t_enter = t0 = mono();
		STORE(r->phase, P_OP);
		if (w->kind == W_BARRIER)
			st = dpg_barrier(world);
		else
			st = dpg_allreduce(world, buf, buf, count, DPG_F32, DPG_SUM, NULL);
		if (st != DPG_OK) {
			record_fail(r, ctx, st, WH_OP, i);
			break;
		}
		r->t_ret = mono();
		r->op_ms_sum += (r->t_ret - t0) * 1e3;
		r->op_n++;
		if (buf != NULL && !check_values(buf, count, want))
			r->wrong++;
		STORE(r->phase, P_BETWEEN);
		if (w->kind == W_SERVICE) {
			int32_t stop = LOAD(sh->stop) || mono() > t_end;

			st = dpg_allreduce(world, &stop, &stop, 1, DPG_I32, DPG_MAX, NULL);
			if (st != DPG_OK) {
				record_fail(r, ctx, st, WH_OP, i);
				break;
			}
			if (stop)
				break;
		}
		if (w->pace_s > 0)
			sleep_s(w->pace_s);
	}
	free(buf);
	if (rank == w->hold_rank && w->hold_iter == w->iters && r->st == DPG_OK)
		hold(r);
}

/* ---------------------------------------------------------------- ZeRO */

#define CKPT_UNITS 4

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		uint64_t v;

		memcpy(&v, b + i, 8);
		h = (h ^ v) * 0x100000001b3ull;
		h ^= h >> 29;
	}
	for (; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static float init_value(size_t i, int id)
{
	return (float)((i * 2654435761u + (size_t)id * 97u) % 1000u) * 1e-3f - 0.5f;
}

/* The model: CKPT_UNITS parameters of numel/CKPT_UNITS floats, one per unit. */
static dpg_status_t ckpt_model(const struct wcfg *w, dpg_ctx_t *ctx, dpg_zero_t **out,
			       int *ids, size_t *per)
{
	dpg_zero_opts_t o;
	dpg_status_t st;
	float *v;

	*per = w->ckpt_numel / CKPT_UNITS;
	dpg_zero_opts_default(&o);
	o.stage = 1;
	o.optimizer = DPG_OPT_ADAMW;
	st = dpg_zero_create(ctx, &o, out);
	if (st != DPG_OK)
		return st;
	for (int u = 0; u < CKPT_UNITS; u++) {
		char name[32];

		snprintf(name, sizeof(name), "layer%d.weight", u);
		st = dpg_zero_add_param(*out, name, *per, u, &ids[u]);
		if (st != DPG_OK)
			return st;
	}
	st = dpg_zero_commit(*out);
	if (st != DPG_OK)
		return st;
	v = malloc(*per * sizeof(float));
	if (v == NULL)
		return DPG_ERR_NOMEM;
	for (int u = 0; u < CKPT_UNITS && st == DPG_OK; u++) {
		for (size_t i = 0; i < *per; i++)
			v[i] = init_value(i, u);
		st = dpg_zero_set_param(*out, ids[u], v);
	}
	free(v);
	return st;
}

static uint64_t ckpt_hash(dpg_zero_t *z, const int *ids, size_t per)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (int u = 0; u < CKPT_UNITS; u++) {
		const void *p = dpg_zero_param(z, ids[u]);

		if (p == NULL)
			return 0;
		h = hash_bytes(h, p, per * sizeof(float));
	}
	return h;
}

static dpg_status_t ckpt_train_step(dpg_zero_t *z, const int *ids, size_t per, int rank,
				    int step)
{
	for (int u = 0; u < CKPT_UNITS; u++) {
		float *g = dpg_zero_grad(z, ids[u]);

		if (g == NULL)
			return DPG_ERR_NOMEM;
		for (size_t i = 0; i < per; i++)
			g[i] += init_value(i + (size_t)step, u + rank) * 1e-2f;
	}
	return dpg_zero_step(z, 1e-3f, NULL);
}

static void work_ckpt(const struct wcfg *w, struct rec *r, dpg_ctx_t *ctx)
{
	dpg_zero_t *z = NULL;
	int ids[CKPT_UNITS], rank = dpg_rank(ctx);
	size_t per;
	dpg_status_t st;

	r->iter = -1;
	st = ckpt_model(w, ctx, &z, ids, &per);
	if (st != DPG_OK) {
		if (st == DPG_ERR_UNSUPPORTED)
			r->unsupported = 1;
		snprintf(r->note, sizeof(r->note), "model setup: %s", dpg_strerror(st));
		record_fail(r, ctx, st, WH_INIT, -1);
		goto out;
	}
	if (w->kind == W_CKPT_LOAD) {
		char extra[64] = "";
		size_t elen = 0;

		r->iter = 0;
		r->t_enter = mono();
		STORE(r->phase, P_OP);
		st = dpg_zero_load(z, w->ckpt_dir, extra, sizeof(extra) - 1, &elen);
		if (st != DPG_OK) {
			record_fail(r, ctx, st, WH_OP, 0);
			goto out;
		}
		r->t_ret = mono();
		extra[elen < sizeof(extra) ? elen : sizeof(extra) - 1] = '\0';
		snprintf(r->extra, sizeof(r->extra), "%s", extra);
		r->hash = ckpt_hash(z, ids, per);
		STORE(r->phase, P_BETWEEN);
		goto out;
	}
	for (int s = 0; s < w->ckpt_saves && s < 8; s++) {
		char extra[64];
		double t0;

		st = ckpt_train_step(z, ids, per, rank, s);
		if (st != DPG_OK) {
			snprintf(r->note, sizeof(r->note), "step before save %d", s);
			record_fail(r, ctx, st, WH_OP, s);
			break;
		}
		snprintf(extra, sizeof(extra), "ckpt-%d step %d", s, s + 1);
		r->iter = s;
		r->t_enter = t0 = mono();
		STORE(r->phase, P_OP);
		st = dpg_zero_save(z, w->ckpt_dir, extra, strlen(extra) + 1);
		if (st != DPG_OK) {
			if (st == DPG_ERR_UNSUPPORTED)
				r->unsupported = 1;
			record_fail(r, ctx, st, WH_OP, s);
			break;
		}
		r->t_ret = mono();
		r->op_ms_sum += (r->t_ret - t0) * 1e3;
		r->op_n++;
		r->save_ok[s] = 1;
		r->save_hash[s] = ckpt_hash(z, ids, per);
		STORE(r->phase, P_BETWEEN);
	}
out:
	if (z != NULL)
		dpg_zero_destroy(z);
}

static void worker(const struct rspec *rs, struct rec *r)
{
	dpg_ctx_t *ctx = NULL;
	dpg_status_t st;

	r->pid = getpid();
	r->rank = rs->rank;
	rs_timeout = rs->timeout_s;
	r->t_start = mono();
	STORE(r->phase, P_INIT);
	st = dpg_init(NULL, &ctx);
	r->t_init = mono();
	r->init_st = st;
	if (st != DPG_OK) {
		record_fail(r, ctx, st, WH_INIT, -1);
		r->t_ret = r->t_init;
		finalize(r, ctx);
		return;
	}
	STORE(r->phase, P_READY);
	switch (rs->w.kind) {
	case W_ALLREDUCE:
	case W_BARRIER:
	case W_SERVICE:
		work_collectives(&rs->w, r, ctx);
		break;
	case W_INIT:
		r->iter = 0;
		r->t_enter = mono();
		STORE(r->phase, P_OP);
		st = dpg_barrier(dpg_world(ctx));
		if (st != DPG_OK)
			record_fail(r, ctx, st, WH_OP, 0);
		break;
	case W_CKPT_SAVE:
	case W_CKPT_LOAD:
		work_ckpt(&rs->w, r, ctx);
		break;
	}
	finalize(r, ctx);
}

/* ================================================================ parent: cases */

enum { RES_OK = 0, RES_FAIL, RES_SKIP };

struct fcase {
	const char *name;
	const char *what;		/* one line for --list */
	void (*fn)(struct fcase *);
	/* run state */
	char dir[1024];			/* logs of this case */
	int nslots;
	pid_t pid[NREC];
	int wstatus[NREC];
	bool exited[NREC];
	struct rspec spec[NREC];
	double t0, deadline;
	struct timespec wall0;		/* CLOCK_REALTIME at the start */
	/* result */
	int res;
	double dmin, dmax;
	int nd;
	char outcome[700];
	char why[1500];
	char sample[ERRLEN];
};

static const char *sig_verb(int sig)
{
	return sig == SIGKILL ? "SIGKILLed" : sig == SIGSTOP ? "SIGSTOPped" :
	       "left hanging (alive)";
}

static double g_timeout = 10;		/* DPG_TIMEOUT of the ranks */
static bool g_dry;			/* FAULTS_DRY=1: inject nothing (self-check:
					 * the kill / stop cases must then FAIL) */
static const char *g_logdir = "faults-logs";
static pid_t g_parent;

static void fail(struct fcase *fc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct fcase *fc, const char *fmt, ...)
{
	size_t o = strlen(fc->why);
	va_list ap;

	fc->res = RES_FAIL;
	if (o > 0 && o + 2 < sizeof(fc->why)) {
		memcpy(fc->why + o, "; ", 3);
		o += 2;
	}
	va_start(ap, fmt);
	if (o < sizeof(fc->why))
		vsnprintf(fc->why + o, sizeof(fc->why) - o, fmt, ap);
	va_end(ap);
}

static void outcome(struct fcase *fc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void outcome(struct fcase *fc, const char *fmt, ...)
{
	size_t o = strlen(fc->outcome);
	va_list ap;

	if (o > 0 && o + 2 < sizeof(fc->outcome)) {
		memcpy(fc->outcome + o, "; ", 3);
		o += 2;
	}
	va_start(ap, fmt);
	if (o < sizeof(fc->outcome))
		vsnprintf(fc->outcome + o, sizeof(fc->outcome) - o, fmt, ap);
	va_end(ap);
}

static void detect(struct fcase *fc, double ms)
{
	if (fc->nd == 0 || ms < fc->dmin)
		fc->dmin = ms;
	if (fc->nd == 0 || ms > fc->dmax)
		fc->dmax = ms;
	fc->nd++;
}

static int spawn(struct fcase *fc, const struct rspec *rs)
{
	int slot = fc->nslots;
	char path[PATH_MAX + 16];
	pid_t pid;

	if (slot >= NREC) {
		fprintf(stderr, "faults: too many ranks in %s\n", fc->name);
		exit(2);
	}
	memset(&sh->r[slot], 0, sizeof(sh->r[slot]));
	sh->r[slot].rank = rs->rank;
	fc->spec[slot] = *rs;
	snprintf(path, sizeof(path), "%s/r%d.log", fc->dir, slot);
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		perror("faults: fork");
		exit(2);
	}
	if (pid == 0) {
		int fd;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != g_parent)
			_exit(2);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		setvbuf(stdout, NULL, _IOLBF, 0);
		rank_env(rs);
		worker(rs, &sh->r[slot]);
		fflush(NULL);
		exit(0);	/* not _exit: LeakSanitizer checks at exit */
	}
	fc->pid[slot] = pid;
	fc->exited[slot] = false;
	fc->nslots++;
	return slot;
}

static void reap(struct fcase *fc)
{
	for (int s = 0; s < fc->nslots; s++) {
		int status;

		if (fc->exited[s])
			continue;
		if (waitpid(fc->pid[s], &status, WNOHANG) == fc->pid[s]) {
			fc->exited[s] = true;
			fc->wstatus[s] = status;
		}
	}
}

/* Wait until every listed slot has exited, or until the absolute time t. */
static bool wait_exit(struct fcase *fc, const int *slots, int n, double t)
{
	for (;;) {
		bool all = true;

		reap(fc);
		for (int i = 0; i < n; i++)
			if (!fc->exited[slots[i]])
				all = false;
		if (all)
			return true;
		if (mono() > t || mono() > fc->deadline)
			return false;
		usleep(2000);
	}
}

static void kill_slot(struct fcase *fc, int s)
{
	if (!fc->exited[s]) {
		kill(fc->pid[s], SIGKILL);
		kill(fc->pid[s], SIGCONT);
		if (waitpid(fc->pid[s], &fc->wstatus[s], 0) == fc->pid[s])
			fc->exited[s] = true;
	}
}

/* The watchdog's end: kill what is left (a case failure if it was expected
 * to be gone by now). */
static void kill_rest(struct fcase *fc, bool expected_gone)
{
	reap(fc);
	for (int s = 0; s < fc->nslots; s++)
		if (!fc->exited[s]) {
			if (expected_gone)
				fail(fc, "rank %d (slot %d) still running (%s) at the case's "
				     "limit: killed", sh->r[s].rank, s,
				     phase_names[LOAD(sh->r[s].phase)]);
			kill_slot(fc, s);
		}
}

/* Shorten an error message for the table. */
static void set_sample(struct fcase *fc, const char *msg)
{
	size_t n = strnlen(msg, sizeof(fc->sample) - 1);

	if (fc->sample[0] == '\0') {
		memcpy(fc->sample, msg, n);
		fc->sample[n] = '\0';
	}
}

/* "rank V" named in msg after its "rank R (host) " prefix. */
static bool names_rank(const char *msg, int v)
{
	const char *p = strstr(msg, ") ");
	char pat[32];
	size_t pl;

	p = p != NULL ? p + 2 : msg;
	pl = (size_t)snprintf(pat, sizeof(pat), "rank %d", v);
	for (const char *q = strstr(p, pat); q != NULL; q = strstr(q + 1, pat))
		if (q[pl] < '0' || q[pl] > '9')
			return true;
	return false;
}

static bool starts_with_rank(const char *msg, int r)
{
	char pre[32];

	snprintf(pre, sizeof(pre), "rank %d ", r);
	return strncmp(msg, pre, strlen(pre)) == 0;
}

struct expect {
	unsigned st_mask;		/* allowed statuses: 1u << status */
	double max_s;			/* fault -> return, at most */
	const char *op;			/* must appear in the message (NULL: any) */
	int name_rank;			/* must name "rank V" (-1: no check) ... */
	const char *alt;		/* ... or this text instead (NULL: none) */
	bool deadline_from_start;	/* max_s counts from the rank's start */
};

#define M(st) (1u << (st))

static const char *stname(int st)
{
	switch (st) {
	case DPG_OK: return "DPG_OK";
	case DPG_ERR_INVALID: return "DPG_ERR_INVALID";
	case DPG_ERR_ENV: return "DPG_ERR_ENV";
	case DPG_ERR_TIMEOUT: return "DPG_ERR_TIMEOUT";
	case DPG_ERR_PEER: return "DPG_ERR_PEER";
	case DPG_ERR_AUTH: return "DPG_ERR_AUTH";
	case DPG_ERR_SYSTEM: return "DPG_ERR_SYSTEM";
	case DPG_ERR_NOMEM: return "DPG_ERR_NOMEM";
	case DPG_ERR_UNSUPPORTED: return "DPG_ERR_UNSUPPORTED";
	case DPG_ERR_BACKEND: return "DPG_ERR_BACKEND";
	case DPG_ERR_ABORTED: return "DPG_ERR_ABORTED";
	default: return "?";
	}
}

/* Check one survivor of a fault at t_fault; returns its detection time (s)
 * or -1. */
static double check_survivor(struct fcase *fc, int s, double t_fault, const struct expect *e)
{
	struct rec *r = &sh->r[s];
	int rank = fc->spec[s].rank;
	double d, bound;

	if (LOAD(r->phase) < P_FAILED || (r->st == DPG_OK && r->where == WH_NONE)) {
		if (LOAD(r->phase) == P_DONE || LOAD(r->phase) == P_FINAL)
			fail(fc, "rank %d returned DPG_OK from every call after the fault",
			     rank);
		else
			fail(fc, "rank %d never returned (still %s)", rank,
			     phase_names[LOAD(r->phase)]);
		return -1;
	}
	d = r->t_ret - t_fault;
	bound = e->deadline_from_start ? r->t_start + e->max_s - t_fault : e->max_s;
	if (!(e->st_mask & M(r->st)))
		fail(fc, "rank %d: %s, want another status: %s", rank, stname(r->st), r->err);
	if (d > bound + 1e-3 && e->deadline_from_start)
		fail(fc, "rank %d returned %.0f ms after its start, past its deadline "
		     "(DPG_TIMEOUT %.0f s, %.0f ms allowed)", rank,
		     (r->t_ret - r->t_start) * 1e3, g_timeout, e->max_s * 1e3);
	else if (d > bound + 1e-3)
		fail(fc, "rank %d returned %.0f ms after the fault, past its bound of %.0f ms",
		     rank, d * 1e3, bound * 1e3);
	if (!starts_with_rank(r->err, rank))
		fail(fc, "rank %d: the message does not start with 'rank %d (host)': %s",
		     rank, rank, r->err);
	if (e->op != NULL && strstr(r->err, e->op) == NULL)
		fail(fc, "rank %d: the message does not name the operation '%s': %s", rank,
		     e->op, r->err);
	if (e->name_rank >= 0 && !names_rank(r->err, e->name_rank) &&
	    (e->alt == NULL || strstr(r->err, e->alt) == NULL))
		fail(fc, "rank %d: the message names neither rank %d%s%s: %s", rank,
		     e->name_rank, e->alt ? " nor " : "", e->alt ? e->alt : "", r->err);
	if (strchr(r->err, '\n') != NULL)
		fail(fc, "rank %d: multi-line message", rank);
	set_sample(fc, r->err);
	detect(fc, d * 1e3);
	return d;
}

/* After the survivors returned: finalize must return too, and the process
 * must exit 0.  Returns the longest dpg_finalize in ms. */
static double check_exit(struct fcase *fc, const int *slots, int n, double limit_s)
{
	double worst = 0;

	for (int i = 0; i < n; i++) {
		int s = slots[i];
		struct rec *r = &sh->r[s];

		if (!fc->exited[s]) {
			fail(fc, "rank %d did not exit (%s)", fc->spec[s].rank,
			     phase_names[LOAD(r->phase)]);
			continue;
		}
		if (LOAD(r->phase) != P_DONE)
			fail(fc, "rank %d ended %s without finishing dpg_finalize",
			     fc->spec[s].rank, phase_names[LOAD(r->phase)]);
		else if (r->t_fin - r->t_ret > worst)
			worst = r->t_fin - r->t_ret;
		if (!WIFEXITED(fc->wstatus[s]) || WEXITSTATUS(fc->wstatus[s]) != 0)
			fail(fc, "rank %d exited with %s %d (see %s/r%d.log)", fc->spec[s].rank,
			     WIFEXITED(fc->wstatus[s]) ? "status" : "signal",
			     WIFEXITED(fc->wstatus[s]) ? WEXITSTATUS(fc->wstatus[s]) :
			     WTERMSIG(fc->wstatus[s]), fc->dir, s);
	}
	if (worst > limit_s)
		fail(fc, "dpg_finalize took %.0f ms after the failure", worst * 1e3);
	return worst * 1e3;
}

/* The fault itself (nothing at all under FAULTS_DRY). */
static void inject(pid_t pid, int sig)
{
	if (!g_dry)
		kill(pid, sig);
}

/* ---------------------------------------------------------------- job layouts */

enum topo { T_SHM, T_TCP, T_MIXED };

static const char *topo_name(enum topo t)
{
	return t == T_SHM ? "shared memory" : t == T_TCP ? "TCP ring" :
	       "2 nodes x 2 (pipes + TCP)";
}

/* Spawn an n-rank job; slots[] gets the slot of each rank. */
static void spawn_job(struct fcase *fc, int n, enum topo t, uint16_t port,
		      const char *secret, const struct wcfg *w, const char *const *env0,
		      int *slots)
{
	static char nodes[NREC][24];

	for (int r = 0; r < n; r++) {
		struct rspec rs = { .rank = r, .world = n, .port = port, .secret = secret,
				    .timeout_s = g_timeout, .w = *w };

		switch (t) {
		case T_SHM:
			rs.node = "fnode";
			rs.lrank = r;
			rs.lsize = n;
			break;
		case T_TCP:
			snprintf(nodes[r], sizeof(nodes[r]), "fnode%d", r);
			rs.node = nodes[r];
			rs.lrank = 0;
			rs.lsize = 1;
			break;
		case T_MIXED:
			snprintf(nodes[r], sizeof(nodes[r]), "fnode%d", r / 2);
			rs.node = nodes[r];
			rs.lrank = r % 2;
			rs.lsize = 2;
			break;
		}
		if (r == 0 && env0 != NULL)
			for (int i = 0; i < 6 && env0[i] != NULL; i++)
				rs.env[i] = env0[i];
		slots[r] = spawn(fc, &rs);
	}
}

static bool all_phase_at_least(const int *slots, int n, int phase)
{
	for (int i = 0; i < n; i++)
		if (LOAD(sh->r[slots[i]].phase) < phase)
			return false;
	return true;
}

static bool any_failed(struct fcase *fc, const int *slots, int n)
{
	reap(fc);
	for (int i = 0; i < n; i++)
		if (fc->exited[slots[i]] || LOAD(sh->r[slots[i]].phase) == P_FAILED)
			return true;
	return false;
}

/* Wait until the victim is inside call #>= min_iter and every other rank is
 * in the same call, then `frac` of an average call later (a large allreduce
 * is then truly mid-transfer) send sig to the victim, provided it is still
 * in that call.  Returns the time of the signal, or < 0. */
static double inject_mid_call(struct fcase *fc, const int *slots, int n, int vslot,
			      int min_iter, double frac, int sig, const char *call,
			      int *in_call, double *into_ms)
{
	double until = mono() + 4 * g_timeout;

	while (mono() < until) {
		struct rec *v = &sh->r[vslot];
		int it, ph = LOAD(v->phase);
		double enter = 0, avg, target;
		bool same = true;

		if (any_failed(fc, slots, n)) {
			fail(fc, "a rank failed or exited before the fault was injected");
			return -1;
		}
		if (ph != P_OP || v->iter < min_iter) {
			usleep(100);
			continue;
		}
		it = v->iter;
		for (int i = 0; i < n; i++) {
			struct rec *r = &sh->r[slots[i]];

			if (LOAD(r->phase) != P_OP || r->iter != it)
				same = false;
			else if (r->t_enter > enter)
				enter = r->t_enter;
		}
		if (!same) {
			usleep(50);
			continue;
		}
		avg = v->op_n > 0 ? v->op_ms_sum / v->op_n : 1.0;
		target = enter + fmax(0.5e-3, avg * 1e-3 * frac);
		while (mono() < target)
			;
		same = true;
		for (int i = 0; i < n; i++)
			if (LOAD(sh->r[slots[i]].phase) != P_OP || sh->r[slots[i]].iter != it)
				same = false;
		if (!same)
			continue;	/* someone finished meanwhile: the next one */
		{
			double t = mono();

			inject(fc->pid[vslot], sig);
			*into_ms = (t - v->t_enter) * 1e3;
			*in_call = 0;
			for (int i = 0; i < n; i++)
				if (slots[i] != vslot && LOAD(sh->r[slots[i]].phase) == P_OP &&
				    sh->r[slots[i]].iter == it)
					(*in_call)++;
			outcome(fc, "rank %d %s %.1f ms into %s #%d (avg %.1f ms per call), "
				"%d/%d others inside it", fc->spec[vslot].rank,
				sig_verb(sig), *into_ms, call, it,
				avg, *in_call, n - 1);
			return t;
		}
	}
	fail(fc, "the ranks never reached %s #%d together", call, min_iter);
	return -1;
}

static int others(const int *slots, int n, int vslot, int *out)
{
	int k = 0;

	for (int i = 0; i < n; i++)
		if (slots[i] != vslot)
			out[k++] = slots[i];
	return k;
}

/* Statuses of a survivor list as "3x DPG_ERR_PEER". */
static void status_summary(struct fcase *fc, const int *slots, int n, char *buf, size_t len)
{
	int cnt[16] = { 0 };
	size_t o = 0;

	(void)fc;
	for (int i = 0; i < n; i++) {
		int st = sh->r[slots[i]].st;

		if (st >= 0 && st < 16)
			cnt[st]++;
	}
	buf[0] = '\0';
	for (int st = 0; st < 16; st++)
		if (cnt[st] && o < len)
			o += (size_t)snprintf(buf + o, len - o, "%s%dx %s", o ? ", " : "",
					      cnt[st], stname(st));
}

/* ---------------------------------------------------------------- kill / stop mid-call */

/* Barrier: the victim holds before barrier #3 while the others wait in it for
 * at least 100 ms; then sig. */
static double inject_held(struct fcase *fc, const int *slots, int n, int vslot, int iter,
			  int sig, const char *call)
{
	int surv[NREC], ns = others(slots, n, vslot, surv);
	double until = mono() + 3 * g_timeout;

	while (mono() < until) {
		bool ready = LOAD(sh->r[vslot].phase) == P_HELD;
		double latest = 0;

		if (any_failed(fc, slots, n)) {
			fail(fc, "a rank failed or exited before the fault was injected");
			return -1;
		}
		for (int i = 0; i < ns; i++) {
			struct rec *r = &sh->r[surv[i]];

			if (LOAD(r->phase) != P_OP || r->iter != iter)
				ready = false;
			else if (r->t_enter > latest)
				latest = r->t_enter;
		}
		if (ready && mono() - latest > 0.1) {
			double t = mono();

			inject(fc->pid[vslot], sig);
			outcome(fc, "rank %d (never arrived) %s while %d others waited in %s #%d "
				"for %.0f+ ms", fc->spec[vslot].rank, sig_verb(sig), ns, call, iter,
				(t - latest) * 1e3);
			return t;
		}
		usleep(500);
	}
	fail(fc, "the others never all waited in %s #%d", call, iter);
	return -1;
}

static void kill_mid_call(struct fcase *fc, enum topo t, int n, int victim, enum work kind,
			  int sig)
{
	struct wcfg w = { .kind = kind, .iters = 100000, .hold_rank = -1,
			  .count = (size_t)8 << 20 };	/* 32 MiB per allreduce */
	int slots[NREC], surv[NREC], ns, in_call = 0, vslot, same = 0, named = 0;
	uint16_t port = free_port();
	double t_fault, into = 0, fin, fast = 0;
	const char *call = kind == W_BARRIER ? "barrier" : "allreduce";
	struct expect e = { .st_mask = M(DPG_ERR_PEER), .max_s = g_timeout - 0.5,
			    .op = call, .name_rank = victim };
	char sum[160];

	if (sig != SIGKILL) {
		/* a live peer that stops reading (or never comes): only the
		 * deadline can tell */
		e.st_mask = M(DPG_ERR_TIMEOUT);
		e.max_s = g_timeout + 1.0;
	}
	if (kind == W_BARRIER) {
		w.hold_rank = victim;
		w.hold_iter = 3;
	}
	spawn_job(fc, n, t, port, SECRET_A, &w, NULL, slots);
	vslot = slots[victim];
	ns = others(slots, n, vslot, surv);
	if (kind == W_BARRIER)
		t_fault = inject_held(fc, slots, n, vslot, 3, sig, call);
	else
		t_fault = inject_mid_call(fc, slots, n, vslot, 3, 0.3, sig, call, &in_call, &into);
	if (t_fault < 0)
		return;
	wait_exit(fc, surv, ns, t_fault + e.max_s + g_timeout + 5);
	kill_slot(fc, vslot);
	kill_rest(fc, true);
	for (int i = 0; i < ns; i++) {
		struct rec *r = &sh->r[surv[i]];
		double d = check_survivor(fc, surv[i], t_fault, &e);

		if (d >= 0 && sig != SIGKILL) {
			/* it waited for the deadline: not before it (the peer lives) */
			double waited = r->t_ret - r->t_enter;

			if (waited < g_timeout - 0.5)
				fail(fc, "rank %d gave up on a stopped (live) peer after "
				     "%.2f s, before its %.0f s deadline", r->rank, waited,
				     g_timeout);
		}
		if (d >= 0 && d > fast)
			fast = d;
		if (kind != W_BARRIER && r->fail_iter == sh->r[vslot].iter)
			same++;
		if (d >= 0 && names_rank(r->err, victim))
			named++;
	}
	fin = check_exit(fc, surv, ns, g_timeout);
	status_summary(fc, surv, ns, sum, sizeof(sum));
	outcome(fc, "%s: %d survivors -> %s%s, %d/%d naming the %s rank %d; dpg_finalize "
		"<= %.0f ms", topo_name(t), ns, sum,
		kind != W_BARRIER && same == ns ? " in that same call" : "", named, ns,
		sig == SIGKILL ? "dead" : sig == SIGSTOP ? "stopped" : "absent", victim, fin);
	if (sig != SIGKILL)
		outcome(fc, "then SIGKILLed");
	if (sig == SIGKILL && (!WIFSIGNALED(fc->wstatus[vslot]) ||
			       WTERMSIG(fc->wstatus[vslot]) != SIGKILL))
		fail(fc, "the victim did not die of SIGKILL");
}

static void c_kill_allreduce_shm(struct fcase *fc)
{
	kill_mid_call(fc, T_SHM, 4, 2, W_ALLREDUCE, SIGKILL);
}

static void c_kill_allreduce_tcp(struct fcase *fc)
{
	kill_mid_call(fc, T_TCP, 4, 2, W_ALLREDUCE, SIGKILL);
}

static void c_kill_allreduce_mixed(struct fcase *fc)
{
	kill_mid_call(fc, T_MIXED, 4, 2, W_ALLREDUCE, SIGKILL);
}

static void c_kill_barrier_shm(struct fcase *fc)
{
	kill_mid_call(fc, T_SHM, 4, 1, W_BARRIER, SIGKILL);
}

static void c_kill_barrier_tcp(struct fcase *fc)
{
	kill_mid_call(fc, T_TCP, 4, 1, W_BARRIER, SIGKILL);
}

static void c_kill_store_training_shm(struct fcase *fc)
{
	kill_mid_call(fc, T_SHM, 3, 0, W_ALLREDUCE, SIGKILL);
}

static void c_kill_store_training_tcp(struct fcase *fc)
{
	kill_mid_call(fc, T_TCP, 3, 0, W_ALLREDUCE, SIGKILL);
}

static void c_stall_barrier_shm(struct fcase *fc)
{
	kill_mid_call(fc, T_SHM, 4, 1, W_BARRIER, 0);
}

static void c_stall_barrier_tcp(struct fcase *fc)
{
	kill_mid_call(fc, T_TCP, 4, 1, W_BARRIER, 0);
}

static void c_stop_peer_shm(struct fcase *fc)
{
	kill_mid_call(fc, T_SHM, 3, 1, W_ALLREDUCE, SIGSTOP);
}

static void c_stop_peer_tcp(struct fcase *fc)
{
	kill_mid_call(fc, T_TCP, 3, 1, W_ALLREDUCE, SIGSTOP);
}

/* ---------------------------------------------------------------- store host dies */

/* Rank 0 (the store) is killed while rank 1 waits in dpg_init for rank 2,
 * which starts only after the kill. */
static void c_kill_store_rendezvous(struct fcase *fc)
{
	struct wcfg w = { .kind = W_INIT, .hold_rank = -1 };
	struct rspec rs = { .world = 3, .port = free_port(), .secret = SECRET_A,
			    .node = "fnode", .lsize = 3, .timeout_s = g_timeout, .w = w };
	struct expect e = { .st_mask = M(DPG_ERR_PEER) | M(DPG_ERR_TIMEOUT),
			    .max_s = g_timeout + 0.5, .op = "dpg_init", .name_rank = 0,
			    .alt = "store", .deadline_from_start = true };
	int s0, s1, s2, surv[2];
	double until, t_fault, d1, d2;

	rs.rank = rs.lrank = 0;
	s0 = spawn(fc, &rs);
	rs.rank = rs.lrank = 1;
	s1 = spawn(fc, &rs);
	until = mono() + g_timeout;
	while (mono() < until && !(LOAD(sh->r[s0].phase) == P_INIT &&
				   LOAD(sh->r[s1].phase) == P_INIT &&
				   mono() - sh->r[s1].t_start > 0.5))
		usleep(1000);
	if (LOAD(sh->r[s0].phase) != P_INIT || LOAD(sh->r[s1].phase) != P_INIT) {
		fail(fc, "ranks 0 and 1 did not wait in dpg_init (phases %s, %s)",
		     phase_names[LOAD(sh->r[s0].phase)], phase_names[LOAD(sh->r[s1].phase)]);
		return;
	}
	t_fault = mono();
	inject(fc->pid[s0], SIGKILL);
	rs.rank = rs.lrank = 2;
	s2 = spawn(fc, &rs);
	surv[0] = s1;
	surv[1] = s2;
	wait_exit(fc, surv, 2, t_fault + g_timeout + 8);
	kill_slot(fc, s0);
	kill_rest(fc, true);
	d1 = check_survivor(fc, s1, t_fault, &e);
	d2 = check_survivor(fc, s2, t_fault, &e);
	check_exit(fc, surv, 2, g_timeout);
	outcome(fc, "rank 0 SIGKILLed 0.5 s into rendezvous (3 ranks, rank 2 not yet started)");
	if (d1 >= 0)
		outcome(fc, "waiting rank 1: %s after %.0f ms", stname(sh->r[s1].st), d1 * 1e3);
	if (d2 >= 0)
		outcome(fc, "late rank 2: %s %.0f ms after its start (deadline %.0f s): "
			"\"%.160s\"", stname(sh->r[s2].st),
			(sh->r[s2].t_ret - sh->r[s2].t_start) * 1e3, g_timeout, sh->r[s2].err);
	if (d1 >= 0 && d1 > 2.0)
		outcome(fc, "NOTE: rank 1 did not notice the dropped store connection, it "
			"waited for its deadline");
}

/* Rank 0 dies while the others are leaving (dpg_finalize's goodbye). */
static void c_kill_store_finalize(struct fcase *fc)
{
	struct wcfg w = { .kind = W_ALLREDUCE, .iters = 5, .count = 1 << 16,
			  .hold_rank = 0, .hold_iter = 5 };
	int slots[NREC], surv[NREC], ns, worst_st = DPG_OK;
	double until, t_fault, worst = 0;

	spawn_job(fc, 3, T_SHM, free_port(), SECRET_A, &w, NULL, slots);
	ns = others(slots, 3, slots[0], surv);
	until = mono() + 3 * g_timeout;
	while (mono() < until) {
		bool ready = LOAD(sh->r[slots[0]].phase) == P_HELD;

		for (int i = 0; i < ns; i++)
			if (LOAD(sh->r[surv[i]].phase) != P_FINAL)
				ready = false;
		if (ready)
			break;
		if (any_failed(fc, slots, 3))
			break;
		usleep(1000);
	}
	if (LOAD(sh->r[slots[0]].phase) != P_HELD) {
		fail(fc, "the ranks did not reach dpg_finalize (rank 0 %s)",
		     phase_names[LOAD(sh->r[slots[0]].phase)]);
		return;
	}
	sleep_s(0.2);
	t_fault = mono();
	inject(fc->pid[slots[0]], SIGKILL);
	wait_exit(fc, surv, ns, t_fault + g_timeout + 5);
	kill_slot(fc, slots[0]);
	kill_rest(fc, true);
	for (int i = 0; i < ns; i++) {
		struct rec *r = &sh->r[surv[i]];
		double d = r->t_fin - t_fault;

		if (LOAD(r->phase) != P_DONE) {
			fail(fc, "rank %d: dpg_finalize did not return", r->rank);
			continue;
		}
		if (r->st != DPG_OK || r->wrong)
			fail(fc, "rank %d: a collective failed before the fault: %s", r->rank,
			     r->err);
		if (d > g_timeout + 0.5)
			fail(fc, "rank %d: dpg_finalize returned %.0f ms after the kill, past "
			     "the %.0f s deadline", r->rank, d * 1e3, g_timeout);
		detect(fc, d * 1e3);
		if (d > worst)
			worst = d;
		if (r->fin_st != DPG_OK)
			worst_st = r->fin_st;
	}
	check_exit(fc, surv, ns, g_timeout + 1);
	outcome(fc, "rank 0 SIGKILLed while ranks 1-2 waited in dpg_finalize's goodbye; "
		"their dpg_finalize returned %s within %.0f ms", stname(worst_st),
		worst * 1e3);
	if (worst_st == DPG_OK)
		outcome(fc, "NOTE: finalize reports DPG_OK although rank 0 vanished");
}

/* ================================================================ raw store clients */

#define S_MAGIC 0x53475044u
#define S_HDR 16
#define S_NONCE 32
#define OP_HELLO 1
#define OP_AUTH 2
#define OP_SET 3
#define OP_GET 4
#define OP_WAIT 7
#define OP_REPLY 0x80
#define LABEL_CLIENT "dpg-store-v1 client"
#define LABEL_SERVER "dpg-store-v1 server"
#define AUTH_TIMEOUT_MS 2000
#define AUTH_ENV "DPG_STORE_AUTH_TIMEOUT_MS=2000"

static void put32le(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static uint32_t get32le(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static void hdr_raw(uint8_t *p, uint32_t magic, uint8_t ver, uint8_t op, uint16_t flags,
		    uint32_t id, uint32_t len)
{
	put32le(p, magic);
	p[4] = ver;
	p[5] = op;
	p[6] = (uint8_t)flags;
	p[7] = (uint8_t)(flags >> 8);
	put32le(p + 8, id);
	put32le(p + 12, len);
}

static void hdr_ok(uint8_t *p, uint8_t op, uint32_t id, uint32_t len)
{
	hdr_raw(p, S_MAGIC, 1, op, 0, id, len);
}

static size_t unhex(const char *hex, uint8_t *out, size_t cap)
{
	size_t n = 0;

	for (; hex[0] && hex[1] && n < cap; hex += 2) {
		unsigned v;

		if (sscanf(hex, "%2x", &v) != 1)
			break;
		out[n++] = (uint8_t)v;
	}
	return n;
}

struct raw {
	int fd;
	uint8_t nonce[S_NONCE];
	double t_open;
};

static int raw_send(int fd, const void *buf, size_t n)
{
	const uint8_t *p = buf;

	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd pf = { .fd = fd, .events = POLLOUT };

			if (poll(&pf, 1, 2000) <= 0)
				return -ETIMEDOUT;
			continue;
		}
		if (w <= 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Read exactly n bytes within tmo seconds; returns what was read (< n on
 * close, timeout or error; *closed tells). */
static size_t raw_read(int fd, void *buf, size_t n, double tmo, bool *closed)
{
	uint8_t *p = buf;
	size_t got = 0;
	double until = mono() + tmo;

	*closed = false;
	while (got < n) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		double left = until - mono();
		ssize_t r;

		if (left <= 0 || poll(&pf, 1, (int)(left * 1e3) + 1) <= 0)
			break;
		r = recv(fd, p + got, n - got, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			*closed = true;
			break;
		}
		got += (size_t)r;
	}
	return got;
}

/* Open a connection and read the server's HELLO (nonce). */
static int raw_open(uint16_t port, struct raw *c, bool hello)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	uint8_t h[S_HDR + S_NONCE];
	int one = 1;
	bool closed;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return -1;
	if (connect(c->fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		close(c->fd);
		c->fd = -1;
		return -1;
	}
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->t_open = mono();
	if (!hello)
		return 0;
	if (raw_read(c->fd, h, sizeof(h), 3.0, &closed) != sizeof(h) ||
	    get32le(h) != S_MAGIC || h[5] != OP_HELLO || get32le(h + 12) != S_NONCE) {
		close(c->fd);
		c->fd = -1;
		return -1;
	}
	memcpy(c->nonce, h + S_HDR, S_NONCE);
	return 0;
}

static void raw_close(struct raw *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

/* An AUTH message for nonce ns, keyed with the hex secret (NULL: zero MAC). */
static void auth_msg(uint8_t out[S_HDR + 64], const char *hex, const uint8_t *ns)
{
	uint8_t key[64], *nc = out + S_HDR, *mac = out + S_HDR + S_NONCE;
	size_t klen = hex != NULL ? unhex(hex, key, sizeof(key)) : 0;
	struct dpg_hmac_sha256 h;

	hdr_ok(out, OP_AUTH, 0, 64);
	if (getrandom(nc, S_NONCE, 0) != S_NONCE)
		memset(nc, 0x5a, S_NONCE);
	if (hex == NULL) {
		memset(mac, 0, 32);
		return;
	}
	dpg_hmac_sha256_init(&h, key, klen);
	dpg_hmac_sha256_update(&h, LABEL_CLIENT, strlen(LABEL_CLIENT));
	dpg_hmac_sha256_update(&h, ns, S_NONCE);
	dpg_hmac_sha256_update(&h, nc, S_NONCE);
	if (dpg_hmac_sha256_final(&h, mac) != 0)
		memset(mac, 0, 32);	/* libcrypto failed: the login fails, visibly */
}

/* Read one reply: header + body (body up to cap).  Returns the op or -1. */
static int raw_reply(struct raw *c, uint16_t *flags, uint8_t *body, size_t cap, uint32_t *len,
		     double tmo)
{
	uint8_t h[S_HDR];
	bool closed;
	uint32_t l;

	if (raw_read(c->fd, h, S_HDR, tmo, &closed) != S_HDR || get32le(h) != S_MAGIC)
		return -1;
	l = get32le(h + 12);
	*flags = (uint16_t)(h[6] | h[7] << 8);
	*len = l;
	if (l > cap || raw_read(c->fd, body, l, tmo, &closed) != l)
		return -1;
	return h[5];
}

/* Connect and authenticate with the hex secret; 0 ok (server proved the
 * secret too), 1 refused, -1 error. */
static int raw_login(uint16_t port, const char *hex, struct raw *c)
{
	uint8_t m[S_HDR + 64], body[256], key[64], want[32];
	struct dpg_hmac_sha256 h;
	uint16_t flags;
	uint32_t len;
	int op;

	if (raw_open(port, c, true) != 0)
		return -1;
	auth_msg(m, hex, c->nonce);
	if (raw_send(c->fd, m, sizeof(m)) != 0)
		return -1;
	op = raw_reply(c, &flags, body, sizeof(body), &len, 3.0);
	if (op != (OP_AUTH | OP_REPLY))
		return -1;
	if (flags == 2)
		return 1;
	dpg_hmac_sha256_init(&h, key, unhex(hex, key, sizeof(key)));
	dpg_hmac_sha256_update(&h, LABEL_SERVER, strlen(LABEL_SERVER));
	dpg_hmac_sha256_update(&h, c->nonce, S_NONCE);
	dpg_hmac_sha256_update(&h, m + S_HDR, S_NONCE);
	if (dpg_hmac_sha256_final(&h, want) != 0)
		return -1;
	return flags == 0 && len == 32 && memcmp(want, body, 32) == 0 ? 0 : -1;
}

static size_t key_body(uint8_t *p, const char *key)
{
	size_t n = strlen(key);

	put32le(p, (uint32_t)n);
	memcpy(p + 4, key, n);
	return 4 + n;
}

/* GET key on an authenticated connection; value into val (NUL-terminated). */
static int raw_get(struct raw *c, const char *key, char *val, size_t cap)
{
	uint8_t m[S_HDR + 600], body[4096];
	size_t bl = key_body(m + S_HDR, key);
	uint16_t flags;
	uint32_t len;

	hdr_ok(m, OP_GET, 7, (uint32_t)bl);
	if (raw_send(c->fd, m, S_HDR + bl) != 0 ||
	    raw_reply(c, &flags, body, sizeof(body) - 1, &len, 3.0) != (OP_GET | OP_REPLY) ||
	    flags != 0)
		return -1;
	if (len >= cap)
		len = (uint32_t)cap - 1;
	memcpy(val, body, len);
	val[len] = '\0';
	return 0;
}

static int raw_set(struct raw *c, const char *key, const char *val)
{
	uint8_t m[S_HDR + 1200], body[256];
	size_t bl = key_body(m + S_HDR, key), vl = strlen(val);
	uint16_t flags;
	uint32_t len;

	memcpy(m + S_HDR + bl, val, vl);
	hdr_ok(m, OP_SET, 8, (uint32_t)(bl + vl));
	if (raw_send(c->fd, m, S_HDR + bl + vl) != 0 ||
	    raw_reply(c, &flags, body, sizeof(body), &len, 3.0) != (OP_SET | OP_REPLY) ||
	    flags != 0)
		return -1;
	return 0;
}

/* Wait until the server closes c (EOF or reset) within tmo; returns the
 * seconds from t0, or -1.  Everything received is counted in *got and the
 * first bytes are kept in keep[keepcap]. */
static double raw_wait_closed(struct raw *c, double t0, double tmo, size_t *got,
			      uint8_t *keep, size_t keepcap)
{
	double until = mono() + tmo;
	uint8_t buf[65536];

	*got = 0;
	for (;;) {
		struct pollfd pf = { .fd = c->fd, .events = POLLIN };
		double left = until - mono();
		ssize_t r;

		if (left <= 0)
			return -1;
		if (poll(&pf, 1, (int)(left * 1e3) + 1) <= 0)
			continue;
		r = recv(c->fd, buf, sizeof(buf), 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return mono() - t0;
		if (keep != NULL && *got < keepcap)
			memcpy(keep + *got, buf,
			       (size_t)r < keepcap - *got ? (size_t)r : keepcap - *got);
		*got += (size_t)r;
	}
}

/* ---------------------------------------------------------------- a job to attack */

/* A 2-rank job of small allreduces until sh->stop; rank 0's store drops
 * unauthenticated connections after AUTH_TIMEOUT_MS. */
static bool service_start(struct fcase *fc, uint16_t port, const char *secret, int *slots)
{
	static const char *const env0[] = { AUTH_ENV, NULL };
	struct wcfg w = { .kind = W_SERVICE, .hold_rank = -1, .pace_s = 0.002 };
	double until = mono() + 2 * g_timeout;

	spawn_job(fc, 2, T_SHM, port, secret, &w, env0, slots);
	while (mono() < until && !any_failed(fc, slots, 2) &&
	       !(all_phase_at_least(slots, 2, P_OP) && sh->r[slots[0]].iter >= 2))
		usleep(1000);
	if (!(all_phase_at_least(slots, 2, P_OP) && sh->r[slots[0]].iter >= 2)) {
		fail(fc, "the job under attack did not start: %s", sh->r[slots[0]].err);
		return false;
	}
	return true;
}

/* Stop the job; both ranks must have completed every call correctly. */
static int service_stop(struct fcase *fc, const int *slots)
{
	STORE(sh->stop, 1);
	wait_exit(fc, slots, 2, mono() + g_timeout + 5);
	kill_rest(fc, true);
	for (int i = 0; i < 2; i++) {
		struct rec *r = &sh->r[slots[i]];

		if (r->st != DPG_OK)
			fail(fc, "job rank %d failed under attack: %s: %s", i, stname(r->st),
			     r->err);
		if (r->wrong)
			fail(fc, "job rank %d: %d wrong allreduce results", i, r->wrong);
		if (LOAD(r->phase) != P_DONE || r->fin_st != DPG_OK)
			fail(fc, "job rank %d did not finish cleanly (%s, finalize %s)", i,
			     phase_names[LOAD(r->phase)], stname(r->fin_st));
	}
	check_exit(fc, slots, 2, g_timeout);
	return sh->r[slots[0]].op_n;
}

/* Lines of rank slot's log containing needle. */
static int log_count(struct fcase *fc, int slot, const char *needle)
{
	char path[PATH_MAX + 16], line[1024];
	FILE *f;
	int n = 0;

	snprintf(path, sizeof(path), "%s/r%d.log", fc->dir, slot);
	f = fopen(path, "r");
	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strstr(line, needle) != NULL)
			n++;
	fclose(f);
	return n;
}

/* The first log line of slot containing needle, as the example error. */
static void log_sample(struct fcase *fc, int slot, const char *needle)
{
	char path[PATH_MAX + 16], line[1024];
	FILE *f;

	snprintf(path, sizeof(path), "%s/r%d.log", fc->dir, slot);
	f = fopen(path, "r");
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strstr(line, needle) != NULL) {
			line[strcspn(line, "\n")] = '\0';
			set_sample(fc, line);
			break;
		}
	fclose(f);
}

static long rss_kb(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/* The control: with the job's secret a client authenticates, the server
 * proves the secret back, and the key is readable: so the refusals below
 * are the server's doing, not a broken test client. */
static bool control_read(struct fcase *fc, uint16_t port, const char *key, char *val, size_t cap)
{
	struct raw c = { .fd = -1 };
	int rc = raw_login(port, SECRET_A, &c);

	if (rc != 0 || raw_get(&c, key, val, cap) != 0) {
		fail(fc, "control client with the job's secret could not %s",
		     rc != 0 ? "authenticate" : "read the key");
		raw_close(&c);
		return false;
	}
	raw_close(&c);
	return true;
}

struct attack {
	const char *name;
	double ms;		/* time to the server closing it */
	bool refused;		/* an AUTH refusal came back */
	size_t extra;		/* bytes beyond the expected */
};

/* The reply bytes of a refused/closed attacker: nothing, or exactly one
 * AUTH refusal.  Anything else (above all a GET reply) is a leak. */
static void judge_reply(struct fcase *fc, struct attack *a, const uint8_t *keep, size_t got)
{
	a->refused = false;
	a->extra = got;
	if (got >= S_HDR && get32le(keep) == S_MAGIC && keep[5] == (OP_AUTH | OP_REPLY) &&
	    keep[6] == 2) {
		size_t one = S_HDR + get32le(keep + 12);

		a->refused = true;
		a->extra = got > one ? got - one : 0;
	}
	if (a->extra > 0) {
		int op = got >= S_HDR && !a->refused ? keep[5] : -1;

		fail(fc, "%s: the server sent %zu unexpected bytes%s", a->name, a->extra,
		     op == (OP_GET | OP_REPLY) ? " (a GET reply: a key was read without "
						 "authentication!)" : "");
	}
}

static void attack_done(struct fcase *fc, struct attack *a, double bound_s)
{
	if (a->ms < 0)
		fail(fc, "%s: the server kept the connection open > %.1f s", a->name, bound_s);
	else
		detect(fc, a->ms);
}

static void attacks_outcome(struct fcase *fc, const struct attack *a, int n)
{
	char buf[600];
	size_t o = 0;

	buf[0] = '\0';
	for (int i = 0; i < n && o < sizeof(buf); i++)
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%s %s%.0f ms", i ? ", " : "",
				      a[i].name, a[i].refused ? "refused+closed " : "closed ",
				      a[i].ms);
	outcome(fc, "%s", buf);
}

/* Send bytes (maybe after logging in) and time the server's close. */
static void attack_send(struct fcase *fc, struct attack *a, uint16_t port, bool login,
			const void *msg, size_t len, bool shut_wr, double bound_s)
{
	struct raw c = { .fd = -1 };
	uint8_t keep[256];
	size_t got = 0;
	double t0;

	if (login ? raw_login(port, SECRET_A, &c) != 0 : raw_open(port, &c, true) != 0) {
		fail(fc, "%s: could not %s", a->name, login ? "log in" : "connect");
		a->ms = 0;
		raw_close(&c);
		return;
	}
	t0 = mono();
	raw_send(c.fd, msg, len);	/* may fail midway: the server closed */
	if (shut_wr)
		shutdown(c.fd, SHUT_WR);
	a->ms = raw_wait_closed(&c, t0, bound_s, &got, keep, sizeof(keep));
	if (a->ms >= 0)
		a->ms *= 1e3;
	judge_reply(fc, a, keep, got);
	attack_done(fc, a, bound_s);
	raw_close(&c);
}

/* ---------------------------------------------------------------- case 6 */

static void c_secret_wrong_missing(struct fcase *fc)
{
	uint16_t port = free_port();
	int slots[2], nat = 0, refused_logs;
	struct attack at[8];
	char val[512], pidpat[32];
	uint8_t m[S_HDR + 64 + S_HDR + 600];
	size_t gl;
	double quick = 1.5, slow = AUTH_TIMEOUT_MS / 1e3 + 1.5;

	if (!service_start(fc, port, SECRET_A, slots))
		return;
	/* control: the secret opens the store and the claim key names rank 0 */
	if (!control_read(fc, port, "dpg/x/claim/0", val, sizeof(val)))
		return;
	snprintf(pidpat, sizeof(pidpat), "pid %d ", (int)fc->pid[slots[0]]);
	if (strstr(val, pidpat) == NULL)
		fail(fc, "control: dpg/x/claim/0 = '%s', want '%s'", val, pidpat);

	/* wrong secret, with a GET pipelined right behind the AUTH */
	{
		struct raw c = { .fd = -1 };
		uint8_t keep[256];
		size_t got = 0;
		double t0;

		at[nat] = (struct attack){ .name = "wrong secret (+GET)" };
		if (raw_open(port, &c, true) == 0) {
			auth_msg(m, SECRET_B, c.nonce);
			gl = key_body(m + S_HDR + 64 + S_HDR, "dpg/x/claim/0");
			hdr_ok(m + S_HDR + 64, OP_GET, 1, (uint32_t)gl);
			t0 = mono();
			raw_send(c.fd, m, S_HDR + 64 + S_HDR + gl);
			at[nat].ms = raw_wait_closed(&c, t0, quick, &got, keep, sizeof(keep));
			at[nat].ms = at[nat].ms < 0 ? -1 : at[nat].ms * 1e3;
			judge_reply(fc, &at[nat], keep, got);
			if (!at[nat].refused)
				fail(fc, "wrong secret: no AUTH refusal came back");
			attack_done(fc, &at[nat], quick);
		} else {
			fail(fc, "wrong secret: could not connect");
		}
		raw_close(&c);
		nat++;
	}
	/* a replayed handshake: a valid AUTH for connection 1's challenge,
	 * sent on connection 2 */
	{
		struct raw c1 = { .fd = -1 }, c2 = { .fd = -1 };
		uint8_t keep[256], rb[64];
		size_t got = 0;
		uint16_t fl;
		uint32_t len;
		double t0;

		at[nat] = (struct attack){ .name = "replayed AUTH" };
		if (raw_open(port, &c1, true) == 0 && raw_open(port, &c2, true) == 0) {
			auth_msg(m, SECRET_A, c1.nonce);
			t0 = mono();
			raw_send(c2.fd, m, S_HDR + 64);
			at[nat].ms = raw_wait_closed(&c2, t0, quick, &got, keep, sizeof(keep));
			at[nat].ms = at[nat].ms < 0 ? -1 : at[nat].ms * 1e3;
			judge_reply(fc, &at[nat], keep, got);
			attack_done(fc, &at[nat], quick);
			/* the same bytes are good on connection 1: the replay
			 * failed only because the challenge differs */
			raw_send(c1.fd, m, S_HDR + 64);
			if (raw_reply(&c1, &fl, rb, sizeof(rb), &len, 3.0) != (OP_AUTH | OP_REPLY) ||
			    fl != 0)
				fail(fc, "replay control: the AUTH was not valid on its own "
				     "connection");
		} else {
			fail(fc, "replay: could not connect");
		}
		raw_close(&c1);
		raw_close(&c2);
		nat++;
	}
	/* an empty secret (all-zero MAC) */
	at[nat] = (struct attack){ .name = "zero MAC" };
	{
		struct raw c = { .fd = -1 };
		uint8_t keep[256];
		size_t got = 0;
		double t0;

		if (raw_open(port, &c, true) == 0) {
			auth_msg(m, NULL, c.nonce);
			t0 = mono();
			raw_send(c.fd, m, S_HDR + 64);
			at[nat].ms = raw_wait_closed(&c, t0, quick, &got, keep, sizeof(keep));
			at[nat].ms = at[nat].ms < 0 ? -1 : at[nat].ms * 1e3;
			judge_reply(fc, &at[nat], keep, got);
			attack_done(fc, &at[nat], quick);
		}
		raw_close(&c);
		nat++;
	}
	/* no secret at all: a GET straight away */
	at[nat] = (struct attack){ .name = "GET without AUTH" };
	gl = key_body(m + S_HDR, "dpg/x/claim/0");
	hdr_ok(m, OP_GET, 1, (uint32_t)gl);
	attack_send(fc, &at[nat++], port, false, m, S_HDR + gl, false, quick);
	/* garbage instead of a handshake */
	at[nat] = (struct attack){ .name = "garbage handshake" };
	if (getrandom(m, S_HDR + 64, 0) != S_HDR + 64)
		memset(m, 0xa5, S_HDR + 64);
	m[0] ^= 0x80;	/* never the magic */
	attack_send(fc, &at[nat++], port, false, m, S_HDR + 64, false, quick);
	/* a client that says nothing */
	at[nat] = (struct attack){ .name = "silent client" };
	attack_send(fc, &at[nat++], port, false, m, 0, false, slow);

	/* the job is unaffected, and the claim still names rank 0 */
	if (control_read(fc, port, "dpg/x/claim/0", val, sizeof(val)) &&
	    strstr(val, pidpat) == NULL)
		fail(fc, "after the attacks dpg/x/claim/0 = '%s'", val);
	gl = (size_t)service_stop(fc, slots);
	refused_logs = log_count(fc, slots[0], "dpg store: refused");
	log_sample(fc, slots[0], "wrong job secret");
	attacks_outcome(fc, at, nat);
	outcome(fc, "0 unauthenticated replies; control client with the secret read "
		"dpg/x/claim/0; job completed %zu allreduces; rank 0 logged %d refusals",
		gl, refused_logs);
	if (refused_logs < nat)
		fail(fc, "rank 0 logged %d 'dpg store: refused' lines for %d bad clients",
		     refused_logs, nat);
}

/* ---------------------------------------------------------------- case 7 */

static void c_store_malformed(struct fcase *fc)
{
	uint16_t port = free_port();
	int slots[2], nat = 0, it0, it1, logs;
	struct attack at[24];
	static uint8_t big[1 << 20];
	uint8_t m[S_HDR + 4096];
	double quick = 1.5, slow = AUTH_TIMEOUT_MS / 1e3 + 1.5;
	long rss0, rss1;
	char val[256];

	if (!service_start(fc, port, SECRET_A, slots))
		return;
	rss0 = rss_kb(fc->pid[slots[0]]);

	/* ---- before authentication */
	at[nat] = (struct attack){ .name = "AUTH len 4 GiB" };
	hdr_ok(m, OP_AUTH, 0, 0xffffffffu);
	attack_send(fc, &at[nat++], port, false, m, S_HDR, false, quick);

	at[nat] = (struct attack){ .name = "version 2" };
	hdr_raw(m, S_MAGIC, 2, OP_AUTH, 0, 0, 64);
	memset(m + S_HDR, 0, 64);
	attack_send(fc, &at[nat++], port, false, m, S_HDR + 64, false, quick);

	at[nat] = (struct attack){ .name = "HTTP request" };
	snprintf((char *)m, sizeof(m), "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
	attack_send(fc, &at[nat++], port, false, m, strlen((char *)m), false, quick);

	at[nat] = (struct attack){ .name = "1 MiB random" };
	if (getrandom(big, sizeof(big), 0) != (ssize_t)sizeof(big))
		memset(big, 0x3c, sizeof(big));
	big[0] ^= 0x80;
	attack_send(fc, &at[nat++], port, false, big, sizeof(big), false, quick);

	at[nat] = (struct attack){ .name = "truncated AUTH+EOF" };
	hdr_ok(m, OP_AUTH, 0, 64);
	attack_send(fc, &at[nat++], port, false, m, S_HDR + 20, true, quick);

	/* ---- after authentication (a broken or hostile job member) */
	at[nat] = (struct attack){ .name = "SET len 4 GiB" };
	hdr_ok(m, OP_SET, 1, 0xfffffff0u);
	attack_send(fc, &at[nat++], port, true, m, S_HDR, false, quick);

	at[nat] = (struct attack){ .name = "SET 8 MiB+1 value" };
	hdr_ok(m, OP_SET, 1, 4 + 512 + (8u << 20) + 1);
	attack_send(fc, &at[nat++], port, true, m, S_HDR, false, quick);

	at[nat] = (struct attack){ .name = "GET key len > body" };
	hdr_ok(m, OP_GET, 1, 8);
	put32le(m + S_HDR, 1000);
	memcpy(m + S_HDR + 4, "abcd", 4);
	attack_send(fc, &at[nat++], port, true, m, S_HDR + 8, false, quick);

	at[nat] = (struct attack){ .name = "unknown op" };
	hdr_ok(m, 0x7e, 1, 0);
	attack_send(fc, &at[nat++], port, true, m, S_HDR, false, quick);

	at[nat] = (struct attack){ .name = "reply op as request" };
	hdr_ok(m, OP_GET | OP_REPLY, 1, 0);
	attack_send(fc, &at[nat++], port, true, m, S_HDR, false, quick);

	at[nat] = (struct attack){ .name = "nonzero flags" };
	hdr_raw(m, S_MAGIC, 1, OP_GET, 1, 1, 5);
	key_body(m + S_HDR, "k");
	attack_send(fc, &at[nat++], port, true, m, S_HDR + 5, false, quick);

	at[nat] = (struct attack){ .name = "bad magic after AUTH" };
	hdr_raw(m, 0xdeadbeefu, 1, OP_GET, 0, 1, 5);
	key_body(m + S_HDR, "k");
	attack_send(fc, &at[nat++], port, true, m, S_HDR + 5, false, quick);

	at[nat] = (struct attack){ .name = "AUTH twice" };
	auth_msg(m, SECRET_A, m);	/* any nonce: the op itself is refused */
	attack_send(fc, &at[nat++], port, true, m, S_HDR + 64, false, quick);

	at[nat] = (struct attack){ .name = "WAIT 5000 keys" };
	hdr_ok(m, OP_WAIT, 1, 4);
	put32le(m + S_HDR, 5000);
	attack_send(fc, &at[nat++], port, true, m, S_HDR + 4, false, quick);

	at[nat] = (struct attack){ .name = "truncated GET+EOF" };
	hdr_ok(m, OP_GET, 1, 100);
	memset(m + S_HDR, 'k', 10);
	attack_send(fc, &at[nat++], port, true, m, S_HDR + 10, true, quick);

	/* ---- slow and many, concurrently: a slowloris AUTH (a byte every
	 * 150 ms), 200 silent connections; meanwhile the job keeps going */
	{
		enum { NFLOOD = 200 };
		static struct raw fl[NFLOOD];
		struct raw slw = { .fd = -1 };
		double tclose[NFLOOD], tslow = -1, t0 = mono(), until, next;
		int open_n = 0, closed_n = 0;
		size_t sent = 0;
		uint8_t am[S_HDR + 64], junk[4096];

		it0 = sh->r[slots[0]].op_n;
		for (int i = 0; i < NFLOOD; i++) {
			tclose[i] = -1;
			fl[i].fd = -1;
			if (raw_open(port, &fl[i], false) == 0)
				open_n++;
		}
		if (raw_open(port, &slw, true) != 0)
			fail(fc, "slowloris: could not connect");
		auth_msg(am, SECRET_A, slw.nonce);
		until = t0 + slow + 1;
		next = mono();
		while (mono() < until && (closed_n < open_n || (slw.fd >= 0 && tslow < 0))) {
			struct pollfd pf[NFLOOD + 1];

			if (slw.fd >= 0 && tslow < 0 && mono() >= next && sent < sizeof(am)) {
				if (send(slw.fd, am + sent, 1, MSG_NOSIGNAL) == 1)
					sent++;
				next += 0.15;
			}
			for (int i = 0; i < NFLOOD; i++) {
				pf[i].fd = tclose[i] < 0 ? fl[i].fd : -1;
				pf[i].events = POLLIN;
			}
			pf[NFLOOD].fd = tslow < 0 ? slw.fd : -1;
			pf[NFLOOD].events = POLLIN;
			if (poll(pf, NFLOOD + 1, 20) <= 0)
				continue;
			for (int i = 0; i <= NFLOOD; i++) {
				ssize_t r;

				if (pf[i].fd < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
					continue;
				r = recv(pf[i].fd, junk, sizeof(junk), MSG_DONTWAIT);
				if (r > 0 || (r < 0 && (errno == EAGAIN || errno == EINTR)))
					continue;	/* the HELLO */
				if (i == NFLOOD) {
					tslow = mono() - slw.t_open;
				} else {
					tclose[i] = mono() - fl[i].t_open;
					closed_n++;
				}
			}
		}
		it1 = sh->r[slots[0]].op_n;
		{
			double worst = 0;

			for (int i = 0; i < NFLOOD; i++)
				if (fl[i].fd >= 0 && tclose[i] > worst)
					worst = tclose[i];
			at[nat] = (struct attack){ .name = "200 silent conns", .ms = worst * 1e3 };
			if (closed_n < open_n)
				fail(fc, "%d of %d silent connections still open after %.1f s",
				     open_n - closed_n, open_n, slow + 1);
			else
				detect(fc, worst * 1e3);
			nat++;
		}
		at[nat] = (struct attack){ .name = "slowloris AUTH",
					   .ms = tslow < 0 ? -1 : tslow * 1e3 };
		if (tslow < 0)
			fail(fc, "slowloris: still open after %.1f s (%zu of 96 bytes sent)",
			     slow + 1, sent);
		else
			detect(fc, tslow * 1e3);
		nat++;
		for (int i = 0; i < NFLOOD; i++)
			raw_close(&fl[i]);
		raw_close(&slw);
		if (it1 <= it0)
			fail(fc, "the job made no progress during the flood");
		outcome(fc, "job ran %d allreduces during the flood", it1 - it0);
	}

	/* the server is still serving: SET and GET back */
	{
		struct raw c = { .fd = -1 };

		if (raw_login(port, SECRET_A, &c) != 0 || raw_set(&c, "faults/probe", "alive") != 0 ||
		    raw_get(&c, "faults/probe", val, sizeof(val)) != 0 || strcmp(val, "alive") != 0)
			fail(fc, "after the attacks the store did not SET/GET for a good client");
		raw_close(&c);
	}
	rss1 = rss_kb(fc->pid[slots[0]]);
	it1 = service_stop(fc, slots);
	logs = log_count(fc, slots[0], "dpg store: refused") +
	       log_count(fc, slots[0], "dpg store: dropped");
	log_sample(fc, slots[0], "SET body of 4294967280");
	attacks_outcome(fc, at, nat);
	outcome(fc, "store alive (SET/GET ok), job completed %d allreduces, rank 0 RSS "
		"%+ld KiB, %d refused/dropped log lines", it1, rss1 - rss0, logs);
	if (rss1 - rss0 > 256 * 1024)
		fail(fc, "rank 0 grew by %ld KiB under the attacks", rss1 - rss0);
}

/* ---------------------------------------------------------------- case 8 */

static void c_two_jobs(struct fcase *fc)
{
	struct wcfg w = { .kind = W_ALLREDUCE, .iters = 60, .count = 1 << 20, .hold_rank = -1,
			  .start_together = 4 };
	int a[4], b[4], all[8];
	double until, s = 0, e = 1e300;

	spawn_job(fc, 2, T_SHM, free_port(), SECRET_A, &w, NULL, a);
	w.offset = 1000;
	spawn_job(fc, 2, T_SHM, free_port(), SECRET_B, &w, NULL, b);
	memcpy(all, a, 2 * sizeof(int));
	memcpy(all + 2, b, 2 * sizeof(int));
	until = mono() + 3 * g_timeout;
	wait_exit(fc, all, 4, until);
	kill_rest(fc, true);
	for (int i = 0; i < 4; i++) {
		struct rec *r = &sh->r[all[i]];

		if (r->st != DPG_OK)
			fail(fc, "job %c rank %d: %s: %s", i < 2 ? 'A' : 'B', r->rank, stname(r->st),
			     r->err);
		if (r->wrong)
			fail(fc, "job %c rank %d: %d wrong results (cross-talk?)", i < 2 ? 'A' : 'B',
			     r->rank, r->wrong);
		if (r->op_n != w.iters)
			fail(fc, "job %c rank %d: %d of %d allreduces", i < 2 ? 'A' : 'B', r->rank,
			     r->op_n, w.iters);
		if (r->t_init > s)
			s = r->t_init;
		if (r->t_ret < e)
			e = r->t_ret;
	}
	check_exit(fc, all, 4, g_timeout);
	outcome(fc, "2 jobs x 2 ranks (own secret and port, one node): A %d/%d and B %d/%d "
		"allreduces of 4 MiB correct (avg %.1f / %.1f ms), both running together "
		"for %.2f s", sh->r[a[0]].op_n, w.iters, sh->r[b[0]].op_n, w.iters,
		sh->r[a[0]].op_n ? sh->r[a[0]].op_ms_sum / sh->r[a[0]].op_n : 0,
		sh->r[b[0]].op_n ? sh->r[b[0]].op_ms_sum / sh->r[b[0]].op_n : 0,
		e > s ? e - s : 0);
	if (e <= s)
		outcome(fc, "NOTE: the jobs did not overlap");
}

/* ---------------------------------------------------------------- case 9 */

static void c_intruder(struct fcase *fc)
{
	uint16_t port = free_port();
	int slots[2], in[3];
	struct wcfg w = { .kind = W_INIT, .hold_rank = -1 };
	struct rspec rs = { .world = 2, .port = port, .node = "intruder", .lrank = 0,
			    .lsize = 1, .timeout_s = g_timeout, .w = w };
	static const struct {
		int rank;
		const char *secret;
		unsigned mask;
		const char *needle;
		const char *label;
	} who[3] = {
		{ 1, SECRET_B, M(DPG_ERR_AUTH), "secret", "rank 1 with job B's secret" },
		{ 1, NULL, M(DPG_ERR_AUTH), "secret", "rank 1 without a secret" },
		{ 0, SECRET_B, M(DPG_ERR_SYSTEM) | M(DPG_ERR_AUTH) | M(DPG_ERR_ENV), "MASTER_PORT",
		  "rank 0 with job B's secret on A's port" },
	};
	char val[512], pidpat[32];
	int jobn;

	if (!service_start(fc, port, SECRET_A, slots))
		return;
	for (int i = 0; i < 3; i++) {
		rs.rank = who[i].rank;
		rs.secret = who[i].secret;
		in[i] = spawn(fc, &rs);
	}
	wait_exit(fc, in, 3, mono() + g_timeout + 5);
	for (int i = 0; i < 3; i++) {
		struct rec *r = &sh->r[in[i]];
		double d = r->t_init - r->t_start;

		if (LOAD(r->phase) < P_FAILED) {
			fail(fc, "intruder %s: dpg_init never returned", who[i].label);
			continue;
		}
		if (r->where != WH_INIT || r->st == DPG_OK) {
			fail(fc, "intruder %s JOINED the job (dpg_init returned %s)", who[i].label,
			     stname(r->init_st));
			continue;
		}
		if (!(who[i].mask & M(r->st)))
			fail(fc, "intruder %s: %s: %s", who[i].label, stname(r->st), r->err);
		if (strstr(r->err, who[i].needle) == NULL)
			fail(fc, "intruder %s: the message does not say '%s': %s", who[i].label,
			     who[i].needle, r->err);
		if (d > 3.0)
			fail(fc, "intruder %s: refused only after %.0f ms", who[i].label, d * 1e3);
		detect(fc, d * 1e3);
		set_sample(fc, r->err);
		outcome(fc, "%s: %s in %.0f ms", who[i].label, stname(r->st), d * 1e3);
	}
	check_exit(fc, in, 3, g_timeout);
	/* the job goes on: 20 more allreduces after the last refusal */
	{
		int it0 = sh->r[slots[0]].op_n;
		double until = mono() + g_timeout;

		while (mono() < until && !any_failed(fc, slots, 2) &&
		       sh->r[slots[0]].op_n < it0 + 20)
			usleep(1000);
	}
	/* rank 1's claim still belongs to the job's own rank 1 */
	snprintf(pidpat, sizeof(pidpat), "pid %d ", (int)fc->pid[slots[1]]);
	if (control_read(fc, port, "dpg/x/claim/1", val, sizeof(val)) &&
	    strstr(val, pidpat) == NULL)
		fail(fc, "dpg/x/claim/1 = '%s', not the job's rank 1 (%s)", val, pidpat);
	jobn = service_stop(fc, slots);
	if (log_count(fc, slots[0], "wrong job secret") < 1)
		fail(fc, "rank 0's store did not log 'wrong job secret'");
	outcome(fc, "job A unaffected (%d allreduces, rank 1's claim intact); its store "
		"logged the refusal", jobn);
}

/* ---------------------------------------------------------------- case 10 */

struct tmpscan {
	char pat[32];		/* ".tmp" or ".tmp.<pid>" */
	char found[PATH_MAX];
	int n;
};

static struct tmpscan g_scan;

static int scan_cb(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)f;
	if (flag == FTW_F && strstr(path + f->base, g_scan.pat) != NULL) {
		if (g_scan.n++ == 0)
			snprintf(g_scan.found, sizeof(g_scan.found), "%s", path);
	}
	return 0;
}

/* Files in dir whose name holds ".tmp" (pid 0) or ".tmp.<pid>". */
static int scan_tmp(const char *dir, pid_t pid)
{
	if (pid > 0)
		snprintf(g_scan.pat, sizeof(g_scan.pat), ".tmp.%d", (int)pid);
	else
		snprintf(g_scan.pat, sizeof(g_scan.pat), ".tmp");
	g_scan.n = 0;
	g_scan.found[0] = '\0';
	nftw(dir, scan_cb, 16, FTW_PHYS);
	return g_scan.n;
}

static int rm_cb(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	remove(path);
	return 0;
}

static FILE *g_ls;

static int ls_cb(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)flag;
	(void)f;
	fprintf(g_ls, "%12lld  %s\n", (long long)st->st_size, path);
	return 0;
}

static void c_kill_ckpt_save(struct fcase *fc)
{
	char dir[PATH_MAX + 8];
	const char *mb = getenv("FAULTS_CKPT_MB");
	size_t shard_mb = mb != NULL && atoi(mb) > 0 ? (size_t)atoi(mb) : 64;
	struct wcfg w = { .kind = W_CKPT_SAVE, .hold_rank = -1, .ckpt_saves = 4,
			  .ckpt_numel = shard_mb * ((size_t)1 << 20) / sizeof(float) * 2 };
	struct expect e = { .st_mask = ~M(DPG_OK), .max_s = g_timeout + 0.5, .op = "save",
			    .name_rank = 1 };
	int slots[2], ld[2], vslot, ok_save = -1, killed_in = -1, left;
	double t_fault = -1, until;
	const char *how = "";

	if (dpg_zero_create == NULL || dpg_zero_save == NULL || dpg_zero_load == NULL ||
	    dpg_zero_opts_default == NULL || dpg_zero_add_param == NULL ||
	    dpg_zero_commit == NULL || dpg_zero_set_param == NULL || dpg_zero_param == NULL ||
	    dpg_zero_grad == NULL || dpg_zero_step == NULL || dpg_zero_destroy == NULL) {
		fc->res = RES_SKIP;
		outcome(fc, "libdpg does not export dpg_zero_* (lib/zero.c not landed yet)");
		return;
	}
	snprintf(dir, sizeof(dir), "%s/ckpt", fc->dir);
	nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	mkdir(dir, 0755);
	w.ckpt_dir = dir;
	spawn_job(fc, 2, T_SHM, free_port(), SECRET_A, &w, NULL, slots);
	vslot = slots[1];
	/* kill rank 1 while it writes save #1 or later: when its own
	 * NAME.tmp.<pid> shows up, else half an average save into it */
	until = mono() + 6 * g_timeout;
	while (mono() < until && t_fault < 0) {
		struct rec *v = &sh->r[vslot];
		int it;

		reap(fc);
		if (fc->exited[slots[0]] || fc->exited[vslot] ||
		    LOAD(sh->r[slots[0]].phase) >= P_FAILED || LOAD(v->phase) >= P_FAILED)
			break;
		if (LOAD(v->phase) != P_OP || v->iter < 1) {
			usleep(500);
			continue;
		}
		it = v->iter;
		while (LOAD(v->phase) == P_OP && v->iter == it && mono() < until) {
			double in = mono() - v->t_enter;
			double avg = v->op_n > 0 ? v->op_ms_sum / v->op_n / 1e3 : 1.0;

			if (scan_tmp(dir, fc->pid[vslot]) > 0 || in > avg / 2) {
				if (LOAD(v->phase) != P_OP || v->iter != it)
					break;
				t_fault = mono();
				inject(fc->pid[vslot], SIGKILL);
				killed_in = it;
				how = g_scan.n > 0 ? g_scan.found + strlen(dir) + 1 : "";
				outcome(fc, "rank 1 SIGKILLed %.0f ms into save #%d (save #0 took "
					"%.0f ms, %zu MiB shard/rank)%s%s", in * 1e3, it, avg * 1e3,
					shard_mb, *how ? " while writing " : "", how);
				break;
			}
			usleep(200);
		}
	}
	if (t_fault < 0) {
		struct rec *r0 = &sh->r[slots[0]], *r1 = &sh->r[vslot];

		if (r0->unsupported || r1->unsupported) {
			fc->res = RES_SKIP;
			outcome(fc, "dpg_zero_* returned DPG_ERR_UNSUPPORTED: %s",
				r0->err[0] ? r0->err : r1->err);
		} else {
			fail(fc, "no save to interrupt (rank 0: %s %s; rank 1: %s %s)",
			     phase_names[LOAD(r0->phase)], r0->err, phase_names[LOAD(r1->phase)],
			     r1->err);
		}
		kill_rest(fc, false);
		if (getenv("FAULTS_KEEP") == NULL)
			nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
		return;
	}
	wait_exit(fc, slots, 1, t_fault + e.max_s + g_timeout + 5);
	kill_slot(fc, vslot);
	kill_rest(fc, true);
	if (check_survivor(fc, slots[0], t_fault, &e) >= 0)
		outcome(fc, "rank 0: %s after %.0f ms", stname(sh->r[slots[0]].st),
			(sh->r[slots[0]].t_ret - t_fault) * 1e3);
	check_exit(fc, slots, 1, g_timeout);
	for (int s = 0; s < 8; s++)
		if (sh->r[slots[0]].save_ok[s])
			ok_save = s;
	if (ok_save < 0) {
		fail(fc, "no save completed before the kill");
		if (getenv("FAULTS_KEEP") == NULL)
			nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
		return;
	}
	left = scan_tmp(dir, 0);

	/* a fresh world loads the directory: the last good save, intact */
	w.kind = W_CKPT_LOAD;
	{
		uint64_t want = sh->r[slots[0]].save_hash[ok_save];
		char xw[64];

		spawn_job(fc, 2, T_SHM, free_port(), SECRET_A, &w, NULL, ld);
		wait_exit(fc, ld, 2, mono() + 4 * g_timeout);
		kill_rest(fc, true);
		snprintf(xw, sizeof(xw), "ckpt-%d step %d", ok_save, ok_save + 1);
		for (int i = 0; i < 2; i++) {
			struct rec *r = &sh->r[ld[i]];

			if (r->st != DPG_OK) {
				fail(fc, "load rank %d: %s: %s", i, stname(r->st), r->err);
				continue;
			}
			if (strcmp(r->extra, xw) != 0)
				fail(fc, "load rank %d: extra '%s', want '%s' (the last save "
				     "that completed)", i, r->extra, xw);
			if (r->hash != want)
				fail(fc, "load rank %d: parameters differ from save #%d", i,
				     ok_save);
		}
		check_exit(fc, ld, 2, g_timeout);
		outcome(fc, "fresh 2-rank world loaded save #%d intact (extra '%s', parameter "
			"hash equal)%s; %d *.tmp* files left", ok_save, sh->r[ld[0]].extra,
			killed_in == ok_save + 1 ? "" : " (NOTE: not the save before the kill)",
			left);
	}
	/* hundreds of MiB: listed in ckpt.ls, kept only with FAULTS_KEEP=1 */
	{
		char ls[sizeof(fc->dir) + 16];

		snprintf(ls, sizeof(ls), "%s/ckpt.ls", fc->dir);
		g_ls = fopen(ls, "w");
		if (g_ls != NULL) {
			nftw(dir, ls_cb, 16, FTW_PHYS);
			fclose(g_ls);
			g_ls = NULL;
		}
	}
	if (getenv("FAULTS_KEEP") == NULL)
		nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* ================================================================ driver */

/* ---------------------------------------------------------------- SIGTERM in rendezvous */

/* Whether /dev/shm holds a dpg segment created by pid. */
static bool seg_of(pid_t pid)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *de;
	bool found = false;

	if (d == NULL)
		return false;
	while (!found && (de = readdir(d)) != NULL) {
		int p;

		found = sscanf(de->d_name, "dpg.%d.", &p) == 1 && p == (int)pid;
	}
	closedir(d);
	return found;
}

/* One try: 0 judged, 1 the stop came too late (retry), -1 failed. */
static int term_try(struct fcase *fc)
{
	struct wcfg w = { .kind = W_INIT, .hold_rank = -1 };
	struct rspec rs = { .world = 3, .port = free_port(), .secret = SECRET_A,
			    .node = "fnode0", .lsize = 2, .timeout_s = g_timeout, .w = w };
	int sl[3], tl[2];
	double until, t_seg;

	rs.rank = rs.lrank = 0;
	sl[0] = spawn(fc, &rs);
	rs.rank = rs.lrank = 1;
	sl[1] = spawn(fc, &rs);
	rs.rank = 2;
	rs.lrank = 0;
	rs.lsize = 1;
	rs.node = "fnode1";
	sl[2] = spawn(fc, &rs);
	until = mono() + g_timeout;
	while (!seg_of(fc->pid[sl[0]]) && mono() < until && !any_failed(fc, sl, 3))
		usleep(200);
	/* the segment exists, so rank 2 has published its address: stopping
	 * it now holds ranks 0 and 1 in the rest of the rendezvous */
	inject(fc->pid[sl[2]], SIGSTOP);
	t_seg = mono();
	if (mono() >= until || any_failed(fc, sl, 3)) {
		fail(fc, "rank 0's segment never appeared in /dev/shm");
		return -1;
	}
	until = mono() + 2;	/* time for rank 1 to attach */
	while (seg_of(fc->pid[sl[0]]) && mono() < until)
		usleep(1000);
	if (LOAD(sh->r[sl[0]].phase) >= P_READY || LOAD(sh->r[sl[1]].phase) >= P_READY) {
		for (int i = 0; i < 3; i++)
			kill_slot(fc, sl[i]);
		return 1;
	}
	/* rank 1 first: rank 0 holds the store, its end would fail rank 1 */
	inject(fc->pid[sl[1]], SIGTERM);
	inject(fc->pid[sl[0]], SIGTERM);
	tl[0] = sl[0];
	tl[1] = sl[1];
	wait_exit(fc, tl, 2, mono() + 3);
	kill_slot(fc, sl[0]);
	kill_slot(fc, sl[1]);
	kill_slot(fc, sl[2]);
	for (int i = 0; i < 2; i++)
		if (!WIFSIGNALED(fc->wstatus[sl[i]]) || WTERMSIG(fc->wstatus[sl[i]]) != SIGTERM)
			fail(fc, "rank %d did not die of SIGTERM (status 0x%x, phase %s: %.200s)",
			     i, fc->wstatus[sl[i]], phase_names[LOAD(sh->r[sl[i]].phase)],
			     sh->r[sl[i]].err);
	if (seg_of(fc->pid[sl[0]]))
		fail(fc, "rank 0's segment is still in /dev/shm after SIGTERM");
	outcome(fc, "3 ranks (2 on fnode0, 1 on fnode1): rank 2 SIGSTOPped once rank 0's "
		"segment appeared, ranks 0-1 SIGTERMed %.0f ms later in dpg_init (phases %s, "
		"%s); their segment %s", (mono() - t_seg) * 1e3,
		phase_names[LOAD(sh->r[sl[0]].phase)], phase_names[LOAD(sh->r[sl[1]].phase)],
		seg_of(fc->pid[sl[0]]) ? "LEFT in /dev/shm" : "gone");
	return 0;
}

/* SIGTERM (scancel's first signal) while a node's ranks are held in the
 * rendezvous after attaching the segment: nothing may stay in /dev/shm. */
static void c_term_rendezvous(struct fcase *fc)
{
	for (int t = 0; t < NREC / 3; t++) {
		int rc = term_try(fc);

		if (rc <= 0)
			return;
	}
	fail(fc, "the ranks always finished the rendezvous before rank 2 was stopped");
}

/* ---------------------------------------------------------------- node leader dies */

/* Until the store holds the greetings of ranks first..last (each raw GET
 * parks up to 3 s); false at the deadline. */
static bool greetings_in(uint16_t port, int first, int last, double until)
{
	struct raw c = { .fd = -1 };
	char key[64], v[512];
	int r = first;

	while (r <= last && mono() < until) {
		if (c.fd < 0 && raw_login(port, SECRET_A, &c) != 0) {
			raw_close(&c);
			sleep_s(0.05);
			continue;
		}
		snprintf(key, sizeof(key), "dpg/x/hello/%d", r);
		if (raw_get(&c, key, v, sizeof(v)) == 0)
			r++;
		else
			raw_close(&c);	/* out of step after a timeout: anew */
	}
	raw_close(&c);
	return r > last;
}

/* 3 nodes x 2 ranks; rank 5 never starts, so ranks 0-4 wait in dpg_init's
 * greeting exchange.  Rank 2, local rank 0 of lnode1 and so the leader whose
 * relay carries ranks 2-3, is SIGKILLed: every survivor fails at once,
 * rank 0 and the other nodes' ranks with the store's line naming the leader
 * and the ranks it carried, rank 3 naming its leader by world rank. */
static void c_kill_leader_rendezvous(struct fcase *fc)
{
	static const char *const node[3] = { "lnode0", "lnode1", "lnode2" };
	static const char carried[] = "node leader rank 2 on lnode1, carrying ranks 2-3, is gone";
	static const char mine[] = "the node leader (rank 2, local rank 0 on lnode1) closed";
	struct wcfg w = { .kind = W_INIT, .hold_rank = -1 };
	struct rspec rs = { .world = 6, .port = free_port(), .secret = SECRET_A, .lsize = 2,
			    .timeout_s = g_timeout, .w = w };
	struct expect e = { .st_mask = M(DPG_ERR_PEER), .max_s = 3.0, .op = "dpg_init",
			    .name_rank = 2 };
	int slots[5], surv[4], ns = 0, worded = 0;
	double t_fault, worst = 0;

	for (int r = 0; r < 5; r++) {
		rs.rank = r;
		rs.lrank = r % 2;
		rs.node = node[r / 2];
		slots[r] = spawn(fc, &rs);
		if (r != 2)
			surv[ns++] = slots[r];
	}
	if (!greetings_in(rs.port, 1, 4, mono() + 2 * g_timeout) ||
	    any_failed(fc, slots, 5)) {
		fail(fc, "ranks 1-4 did not all greet in dpg_init");
		return;
	}
	sleep_s(0.3);	/* the members park on the table, the relay registered 3 */
	t_fault = mono();
	inject(fc->pid[slots[2]], SIGKILL);
	wait_exit(fc, surv, ns, t_fault + g_timeout + 5);
	kill_slot(fc, slots[2]);
	kill_rest(fc, true);
	for (int i = 0; i < ns; i++) {
		struct rec *r = &sh->r[surv[i]];
		const char *want = r->rank == 3 ? mine : carried;
		double d = check_survivor(fc, surv[i], t_fault, &e);

		if (d < 0)
			continue;
		if (strstr(r->err, want) == NULL)
			fail(fc, "rank %d: the message does not say \"%s\": %s", r->rank, want,
			     r->err);
		else
			worded++;
		if (d > worst)
			worst = d;
	}
	if (log_count(fc, slots[0], "dpg store: lost") < 1 ||
	    log_count(fc, slots[0], "node leader rank 2 on lnode1, carrying ranks 2-3") < 1)
		fail(fc, "rank 0's store did not log the lost leader with its ranks");
	check_exit(fc, surv, ns, g_timeout);
	outcome(fc, "3 nodes x 2, rank 5 absent: leader rank 2 SIGKILLed in the greeting "
		"exchange; %d/%d survivors -> DPG_ERR_PEER within %.0f ms naming the leader "
		"(rank 3: its leader by world rank; the others: the ranks it carried)", worded,
		ns, worst * 1e3);
	outcome(fc, "rank 3: \"%.200s\"", sh->r[slots[3]].err);
}

static struct fcase cases[] = {
	{ .name = "kill-allreduce-shm", .what = "SIGKILL rank 2 of 4 mid-allreduce (32 MiB), shared memory",
	  .fn = c_kill_allreduce_shm },
	{ .name = "kill-allreduce-tcp", .what = "SIGKILL rank 2 of 4 mid-allreduce (32 MiB), TCP ring",
	  .fn = c_kill_allreduce_tcp },
	{ .name = "kill-allreduce-mixed", .what = "SIGKILL rank 2 of 4 mid-allreduce, 2 nodes x 2 (pipes+TCP)",
	  .fn = c_kill_allreduce_mixed },
	{ .name = "kill-barrier-shm", .what = "SIGKILL rank 1 of 4 while the others wait in a barrier (shm)",
	  .fn = c_kill_barrier_shm },
	{ .name = "kill-barrier-tcp", .what = "SIGKILL rank 1 of 4 while the others wait in a barrier (TCP)",
	  .fn = c_kill_barrier_tcp },
	{ .name = "kill-store-rendezvous", .what = "SIGKILL rank 0 (store) while rank 1 waits in dpg_init, "
	  "rank 2 starts late",
	  .fn = c_kill_store_rendezvous },
	{ .name = "kill-store-training-shm", .what = "SIGKILL rank 0 (store) mid-allreduce, shared memory",
	  .fn = c_kill_store_training_shm },
	{ .name = "kill-store-training-tcp", .what = "SIGKILL rank 0 (store) mid-allreduce, TCP ring",
	  .fn = c_kill_store_training_tcp },
	{ .name = "kill-leader-rendezvous", .what = "SIGKILL node leader rank 2 (3 nodes x 2) while the "
	  "others wait in dpg_init",
	  .fn = c_kill_leader_rendezvous },
	{ .name = "kill-store-finalize", .what = "SIGKILL rank 0 (store) while the others are in dpg_finalize",
	  .fn = c_kill_store_finalize },
	{ .name = "stop-peer-shm", .what = "SIGSTOP rank 1 of 3 mid-allreduce (a peer that stops reading), "
	  "shared memory",
	  .fn = c_stop_peer_shm },
	{ .name = "stop-peer-tcp", .what = "SIGSTOP rank 1 of 3 mid-allreduce (a peer that stops reading), "
	  "TCP ring",
	  .fn = c_stop_peer_tcp },
	{ .name = "stall-barrier-shm", .what = "rank 1 of 4 alive but never enters barrier #3 "
	  "(hung), shared memory",
	  .fn = c_stall_barrier_shm },
	{ .name = "stall-barrier-tcp", .what = "rank 1 of 4 alive but never enters barrier #3 "
	  "(hung), TCP ring",
	  .fn = c_stall_barrier_tcp },
	{ .name = "secret-wrong-missing", .what = "raw store clients: wrong secret, replayed AUTH, zero MAC, "
	  "no AUTH, garbage, silent",
	  .fn = c_secret_wrong_missing },
	{ .name = "store-malformed", .what = "malformed/oversized frames before and after AUTH, slowloris, "
	  "200-connection flood",
	  .fn = c_store_malformed },
	{ .name = "two-jobs-one-node", .what = "two concurrent 2-rank jobs, own secrets and ports, one node",
	  .fn = c_two_jobs },
	{ .name = "intruder-other-job", .what = "processes of another job (other/no secret) join this job's "
	  "store",
	  .fn = c_intruder },
	{ .name = "term-rendezvous-shm", .what = "SIGTERM the ranks of a node held in the rendezvous "
	  "after attaching their segment",
	  .fn = c_term_rendezvous },
	{ .name = "kill-ckpt-save", .what = "SIGKILL rank 1 of 2 mid dpg_zero_save; a fresh world loads the "
	  "last good checkpoint",
	  .fn = c_kill_ckpt_save },
};

#define NCASES (sizeof(cases) / sizeof(cases[0]))

/* Sanitizer reports in the case's rank logs. */
static void check_logs(struct fcase *fc)
{
	static const char *const bad[] = { "ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
					   "runtime error:", "WARNING: ThreadSanitizer" };

	for (int s = 0; s < fc->nslots; s++)
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			if (log_count(fc, s, bad[i]) > 0)
				fail(fc, "'%s' in %s/r%d.log", bad[i], fc->dir, s);
}

/* Made since the case started (a pid of this case may be the pid of some
 * earlier process that left a segment: pids wrap); 0.1 s of slack for the
 * file system's coarser clock. */
static bool made_since(struct fcase *fc, const char *name)
{
	struct stat st;
	char p[300];

	snprintf(p, sizeof(p), "/dev/shm/%s", name);
	if (stat(p, &st) != 0)
		return false;
	return (double)(st.st_ctim.tv_sec - fc->wall0.tv_sec) +
	       (double)(st.st_ctim.tv_nsec - fc->wall0.tv_nsec) * 1e-9 >= -0.1;
}

/* Shared-memory segments of this case's ranks left in /dev/shm. */
static void check_shm(struct fcase *fc)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *de;

	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		int pid;

		if (sscanf(de->d_name, "dpg.%d.", &pid) != 1 || !made_since(fc, de->d_name))
			continue;
		for (int s = 0; s < fc->nslots; s++)
			if (fc->pid[s] == pid) {
				char p[300];

				fail(fc, "/dev/shm/%s of rank %d left behind", de->d_name,
				     fc->spec[s].rank);
				snprintf(p, sizeof(p), "/dev/shm/%s", de->d_name);
				unlink(p);
			}
	}
	closedir(d);
}

static void md_cell(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '|')
			fputs("\\|", f);
		else if (*s == '\n')
			fputc(' ', f);
		else
			fputc(*s, f);
	}
}

static void report(struct fcase *fc, const char *md)
{
	static const char *const tag[] = { "ok", "FAIL", "SKIP" };
	char det[64];

	if (fc->nd > 0)
		snprintf(det, sizeof(det), "%.0f-%.0f", fc->dmin, fc->dmax);
	else
		snprintf(det, sizeof(det), "-");
	printf("%-4s  %s  detect %s ms  outcome: %s%s%s\n", tag[fc->res], fc->name, det,
	       fc->outcome, fc->res == RES_FAIL ? "  why: " : "",
	       fc->res == RES_FAIL ? fc->why : "");
	if (fc->res == RES_FAIL)
		printf("      logs: %s/\n", fc->dir);
	fflush(stdout);
	if (md != NULL) {
		FILE *f = fopen(md, "a");

		if (f == NULL) {
			fprintf(stderr, "faults: %s: %s\n", md, strerror(errno));
			return;
		}
		if (ftell(f) == 0)
			fprintf(f, "| fault | result | detect (ms) | outcome | example error |\n"
				"|---|---|---|---|---|\n");
		fprintf(f, "| %s | %s | %s | ", fc->name, tag[fc->res], det);
		md_cell(f, fc->outcome);
		if (fc->res == RES_FAIL) {
			fputs(" **why:** ", f);
			md_cell(f, fc->why);
		}
		fputs(" | ", f);
		md_cell(f, fc->sample[0] ? fc->sample : "-");
		fputs(" |\n", f);
		fclose(f);
	}
}

static void run_case(struct fcase *fc, const char *md)
{
	fc->nslots = 0;
	fc->res = RES_OK;
	fc->nd = 0;
	fc->outcome[0] = fc->why[0] = fc->sample[0] = '\0';
	snprintf(fc->dir, sizeof(fc->dir), "%s/%s", g_logdir, fc->name);
	mkdir(g_logdir, 0755);
	mkdir(fc->dir, 0755);
	memset(sh, 0, sizeof(*sh));
	fc->t0 = mono();
	clock_gettime(CLOCK_REALTIME, &fc->wall0);
	fc->deadline = fc->t0 + 6 * g_timeout + 30;
	fc->fn(fc);
	kill_rest(fc, false);
	check_logs(fc);
	check_shm(fc);
	report(fc, md);
}

static void usage(void)
{
	fprintf(stderr, "usage: faults [--list] [--md FILE] [--logdir DIR] [--timeout S] "
		"[CASE-GLOB...]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *md = NULL, *v;
	bool list = false, any_fail = false;
	int first = argc, ran = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if ((v = getenv("FAULTS_TIMEOUT")) != NULL && atof(v) > 0)
		g_timeout = atof(v);
	g_dry = (v = getenv("FAULTS_DRY")) != NULL && *v && strcmp(v, "0") != 0;
	if ((v = getenv("FAULTS_LOGDIR")) != NULL && *v)
		g_logdir = v;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--list") == 0) {
			list = true;
		} else if (strcmp(argv[i], "--md") == 0 && i + 1 < argc) {
			md = argv[++i];
		} else if (strcmp(argv[i], "--logdir") == 0 && i + 1 < argc) {
			g_logdir = argv[++i];
		} else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) {
			g_timeout = atof(argv[++i]);
			if (g_timeout < 2)
				usage();
		} else if (argv[i][0] == '-') {
			usage();
		} else {
			first = i;
			break;
		}
	}
	if (list) {
		for (size_t c = 0; c < NCASES; c++)
			printf("%s\t%s\n", cases[c].name, cases[c].what);
		return 0;
	}
	signal(SIGPIPE, SIG_IGN);
	g_parent = getpid();
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		perror("faults: mmap");
		return 2;
	}
	for (size_t c = 0; c < NCASES; c++) {
		bool want = first >= argc;

		for (int i = first; i < argc; i++)
			if (fnmatch(argv[i], cases[c].name, 0) == 0)
				want = true;
		if (!want)
			continue;
		run_case(&cases[c], md);
		ran++;
		if (cases[c].res == RES_FAIL)
			any_fail = true;
	}
	if (ran == 0) {
		fprintf(stderr, "faults: no case matches\n");
		return 2;
	}
	return any_fail ? 1 : 0;
}
