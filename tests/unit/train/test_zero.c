/* SPDX-License-Identifier: BSD-3-Clause */
/* test_zero.c - the sharded data-parallel step (dpg_zero_*: lib/train/zero*.c) on the CPU
 * backend: equivalence across world sizes and stages, determinism, memory
 * per rank (the ZeRO formula), accumulation, hybrid sharding, checkpoints
 * resharded on load, and the errors.  Ranks are forked processes that join
 * through the environment; rank 0 writes the final parameters to a file
 * that the parent compares. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dpg_zero.h"
#include "zero_impl.h"

#define SECRET_A "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define MAX_RANKS 8

#include "../ranks.h"

/* ------------------------------------------------ the model under test */

#define NP 6
static const size_t P_NUMEL[NP] = { 37, 5, 130, 1, 64, 19 };
static const int P_UNIT[NP] = { 0, 0, 1, 1, 2, 2 };
#define NUNITS 3
#define TOTAL_NUMEL (37 + 5 + 130 + 1 + 64 + 19)

struct zcfg {
	int stage;
	dpg_optimizer_t opt;
	int shard_size;
	int accum;
	long gbatch;		/* samples per optimizer step */
	int first_step, steps;	/* train steps [first_step, first_step + steps) */
	float clip;
	dpg_dtype_t pdt, rdt;
	char out[256];		/* rank 0 writes the final parameters here */
	char ckdir[256];
	int save_after;		/* save when this many steps are done (0: never) */
	bool load;		/* resume from ckdir first */
	int deterministic;
	const char *prefetch;	/* the ranks' DPG_ZERO_PREFETCH (NULL: unset) */
};

static double target(long s, int id, size_t i)
{
	return cos(0.013 * (double)s + 0.17 * (double)i + id);
}

static float weight(long s)
{
	return 1.0f + (float)(s % 3);
}

static float read_param(const void *p, dpg_dtype_t dt, size_t i)
{
	if (dt == DPG_F32)
		return ((const float *)p)[i];
	{
		uint32_t b = (uint32_t)((const uint16_t *)p)[i] << 16;
		float f;

		memcpy(&f, &b, sizeof(f));
		return f;
	}
}

static void init_values(int id, float *v)
{
	for (size_t i = 0; i < P_NUMEL[id]; i++)
		v[i] = 0.1f * sinf(0.7f * (float)i + (float)id);
}

static dpg_zero_t *make_model(dpg_ctx_t *ctx, const struct zcfg *c)
{
	dpg_zero_opts_t o;
	dpg_zero_t *z = NULL;
	float v[256];

	dpg_zero_opts_default(&o);
	o.stage = c->stage;
	o.optimizer = c->opt;
	o.shard_size = c->shard_size;
	o.accum_steps = c->accum;
	o.clip_norm = c->clip;
	o.param_dtype = c->pdt;
	o.reduce_dtype = c->rdt;
	o.weight_decay = 0.01f;
	o.deterministic = c->deterministic;
	CHK_OK(ctx, dpg_zero_create(ctx, &o, &z));
	for (int id = 0; id < NP; id++) {
		char name[16];
		int got = -1;

		snprintf(name, sizeof(name), "p%d", id);
		CHK_OK(ctx, dpg_zero_add_param(z, name, P_NUMEL[id], P_UNIT[id], &got));
		CHK(got == id, "id %d for param %d", got, id);
	}
	CHK_OK(ctx, dpg_zero_commit(z));
	for (int id = 0; id < NP; id++) {
		init_values(id, v);
		CHK_OK(ctx, dpg_zero_set_param(z, id, v));
	}
	return z;
}

/* One micro-step's gradients: this rank's micro-batch of the global batch
 * of `step`, backward over the units in reverse order (stage 3 gathers
 * each unit, prefetching the one before it). */
static void micro_step(dpg_ctx_t *ctx, dpg_zero_t *z, const struct zcfg *c, int world,
		       int rank, long step, int m)
{
	long per_rank = c->gbatch / world, B = per_rank / c->accum;
	long s0 = step * c->gbatch + rank * per_rank + m * B;

	for (int u = NUNITS - 1; u >= 0; u--) {
		CHK_OK(ctx, dpg_zero_gather(z, u, u > 0 ? u - 1 : -1));
		for (int id = 0; id < NP; id++) {
			const void *p;
			float *g;

			if (P_UNIT[id] != u)
				continue;
			p = dpg_zero_param(z, id);
			g = dpg_zero_grad(z, id);
			CHK(p != NULL && g != NULL, "param/grad %d of unit %d", id, u);
			for (size_t i = 0; i < P_NUMEL[id]; i++) {
				double acc = 0;
				float pi = read_param(p, c->pdt, i);

				for (long s = s0; s < s0 + B; s++)
					acc += weight(s) * (pi - target(s, id, i));
				g[i] += (float)(acc / (double)B);
			}
		}
		CHK_OK(ctx, dpg_zero_release(z, u));
		CHK_OK(ctx, dpg_zero_grads_ready(z, u));
	}
}

/* Every rank takes part (stage 3 gathers); rank 0 writes the file. */
static void dump_params(dpg_ctx_t *ctx, dpg_zero_t *z, const struct zcfg *c, int rank)
{
	FILE *f = NULL;

	if (rank == 0) {
		f = fopen(c->out, "wb");
		CHK(f != NULL, "cannot write %s", c->out);
	}
	for (int u = 0; u < NUNITS; u++) {
		CHK_OK(ctx, dpg_zero_gather(z, u, -1));
		for (int id = 0; id < NP; id++) {
			const void *p;

			if (P_UNIT[id] != u)
				continue;
			p = dpg_zero_param(z, id);
			CHK(p != NULL, "param %d", id);
			for (size_t i = 0; f && i < P_NUMEL[id]; i++) {
				float x = read_param(p, c->pdt, i);

				CHK(fwrite(&x, sizeof(x), 1, f) == 1, "write");
			}
		}
		CHK_OK(ctx, dpg_zero_release(z, u));
	}
	if (f)
		CHK(fclose(f) == 0, "close %s", c->out);
}

static void body_train(int rank, const struct job *j)
{
	const struct zcfg *c = j->arg;
	dpg_ctx_t *ctx = NULL;
	dpg_zero_t *z;
	long step = c->first_step;
	const float lr = c->opt == DPG_OPT_ADAMW ? 0.05f : 0.1f;

	if (c->prefetch != NULL)	/* run_job cleared the DPG_* variables */
		setenv("DPG_ZERO_PREFETCH", c->prefetch, 1);
	CHK_OK(ctx, dpg_init(NULL, &ctx));
	z = make_model(ctx, c);
	if (c->load) {
		long next = -1;
		size_t len = 0;

		CHK_OK(ctx, dpg_zero_load(z, c->ckdir, &next, sizeof(next), &len));
		CHK(len == sizeof(next) && next == c->first_step, "resumed at %ld (len %zu), "
		    "expected %d", next, len, c->first_step);
	}
	for (; step < c->first_step + c->steps; step++) {
		dpg_step_stats_t st;

		for (int m = 0; m < c->accum; m++) {
			micro_step(ctx, z, c, j->n, rank, step, m);
			CHK_OK(ctx, dpg_zero_step(z, lr, &st));
			CHK(st.stepped == (m == c->accum - 1), "stepped %d at micro %d", st.stepped, m);
		}
		CHK(st.step == step + 1, "step count %ld, expected %ld", st.step, step + 1);
		CHK(st.grad_norm > 0 && isfinite(st.grad_norm), "grad norm %g", st.grad_norm);
		CHK(c->clip <= 0 || st.grad_norm * st.clip_scale <= c->clip * 1.0001,
		    "clipped norm %g > %g", st.grad_norm * st.clip_scale, (double)c->clip);
		if (c->save_after > 0 && step + 1 == c->save_after) {
			long next = step + 1;

			CHK_OK(ctx, dpg_zero_save(z, c->ckdir, &next, sizeof(next)));
		}
	}
	dump_params(ctx, z, c, rank);
	CHK_OK(ctx, dpg_zero_destroy(z));
	CHK_OK(ctx, dpg_finalize(ctx));
}

/* ------------------------------------------------ parent side */

static char g_tmp[128];

static int setup_tmp(void **state)
{
	(void)state;
	snprintf(g_tmp, sizeof(g_tmp), "%s/dpg-zero-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	return mkdtemp(g_tmp) ? 0 : -1;
}

static int teardown_tmp(void **state)
{
	char cmd[256];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_tmp);
	return system(cmd) == 0 ? 0 : -1;
}

static struct zcfg base_cfg(int stage, const char *tag)
{
	struct zcfg c;

	memset(&c, 0, sizeof(c));
	c.stage = stage;
	c.opt = DPG_OPT_ADAMW;
	c.accum = 1;
	c.gbatch = 24;	/* divides over 1, 2, 3 and 4 ranks (and 2 micro-steps) */
	c.steps = 5;
	c.pdt = DPG_F32;
	c.rdt = DPG_F32;
	snprintf(c.out, sizeof(c.out), "%s/%s.bin", g_tmp, tag);
	return c;
}

static void train(struct zcfg *c, int world)
{
	struct job j = { .n = world, .body = body_train, .arg = c, .timeout_s = 30 };

	expect_all_ok(&j);
}

static void load_file(const char *path, float *v)
{
	FILE *f = fopen(path, "rb");

	assert_non_null(f);
	assert_int_equal(fread(v, sizeof(float), TOTAL_NUMEL, f), TOTAL_NUMEL);
	fclose(f);
}

/* max |a-b| / max(1, |a|) over the model */
static double max_rel_diff(const char *a, const char *b)
{
	static float x[TOTAL_NUMEL], y[TOTAL_NUMEL];
	double m = 0;

	load_file(a, x);
	load_file(b, y);
	for (int i = 0; i < TOTAL_NUMEL; i++) {
		double d = fabs((double)x[i] - y[i]) / fmax(1.0, fabs((double)x[i]));

		if (!(d <= m))
			m = isnan(d) ? INFINITY : d;
	}
	return m;
}

static bool same_bytes(const char *a, const char *b)
{
	static float x[TOTAL_NUMEL], y[TOTAL_NUMEL];

	load_file(a, x);
	load_file(b, y);
	return memcmp(x, y, sizeof(x)) == 0;
}

/* the single-process reference of a configuration */
static struct zcfg reference(const struct zcfg *c, const char *tag)
{
	struct zcfg r = *c;

	r.stage = 1;
	r.shard_size = 0;
	r.accum = 1;
	r.save_after = 0;
	r.load = false;
	snprintf(r.out, sizeof(r.out), "%s/%s.bin", g_tmp, tag);
	train(&r, 1);
	return r;
}

/* ------------------------------------------------ tests */

static void expect_close(const struct zcfg *ref, const struct zcfg *c, double tol,
			 const char *what)
{
	double d = max_rel_diff(ref->out, c->out);

	if (!(d <= tol))
		fail_msg("%s: max relative difference %g > %g", what, d, tol);
	/* the run moved the parameters (a test that cannot fail is no test) */
	{
		static float x[TOTAL_NUMEL];
		float v[256];
		double moved = 0;
		int k = 0;

		load_file(c->out, x);
		for (int id = 0; id < NP; id++) {
			init_values(id, v);
			for (size_t i = 0; i < P_NUMEL[id]; i++, k++)
				moved = fmax(moved, fabs((double)x[k] - v[i]));
		}
		if (!(moved > 1e-3))
			fail_msg("%s: parameters did not move (max change %g)", what, moved);
	}
}

static void equivalence_worlds(int stage, dpg_optimizer_t opt, int wmin, int wmax,
			       const char *prefetch)
{
	struct zcfg c = base_cfg(stage, "ref");
	struct zcfg ref;

	c.opt = opt;
	ref = reference(&c, "ref");
	for (int w = wmin; w <= wmax; w++) {
		char tag[32];

		snprintf(tag, sizeof(tag), "s%d-w%d", stage, w);
		c = base_cfg(stage, tag);
		c.opt = opt;
		c.prefetch = prefetch;
		train(&c, w);
		expect_close(&ref, &c, 2e-5, tag);
	}
}

static void test_equivalence(int stage, dpg_optimizer_t opt)
{
	equivalence_worlds(stage, opt, 1, 4, NULL);
}

static void test_stage1_adamw(void **state) { (void)state; test_equivalence(1, DPG_OPT_ADAMW); }
static void test_stage2_adamw(void **state) { (void)state; test_equivalence(2, DPG_OPT_ADAMW); }
static void test_stage3_adamw(void **state) { (void)state; test_equivalence(3, DPG_OPT_ADAMW); }
static void test_stage2_sgd(void **state) { (void)state; test_equivalence(2, DPG_OPT_SGD); }

/* Stage 3 both ways, whatever the default picks on this machine (a CPU to
 * spare per rank or not): gathers on the prefetch thread and on the
 * caller's thread give the same training. */
static void test_stage3_both_gathers(void **state)
{
	(void)state;
	equivalence_worlds(3, DPG_OPT_ADAMW, 2, 3, "1");
	equivalence_worlds(3, DPG_OPT_ADAMW, 2, 3, "0");
}

static void test_bitwise_same_world(void **state)
{
	struct zcfg a = base_cfg(3, "bw-a"), b = base_cfg(3, "bw-b");

	(void)state;
	train(&a, 3);
	train(&b, 3);
	assert_true(same_bytes(a.out, b.out));
	a = base_cfg(1, "bw-c");
	b = base_cfg(1, "bw-d");
	a.clip = b.clip = 0.5f;
	train(&a, 4);
	train(&b, 4);
	assert_true(same_bytes(a.out, b.out));
}

/* accumulation, hybrid sharding and DDP-style replication against the
 * single process; once with SGD and no clipping (sensitive to the scale of
 * the averaged gradient: AdamW and clipping both hide a wrong scale), once
 * with AdamW and active clipping */
static void accum_hybrid(dpg_optimizer_t opt, float clip, const char *tag)
{
	struct zcfg c = base_cfg(2, tag), ref;
	char t[64];

	c.opt = opt;
	c.clip = clip;
	snprintf(t, sizeof(t), "%s-ref", tag);
	ref = reference(&c, t);
	c.accum = 2;
	snprintf(c.out, sizeof(c.out), "%s/%s-acc.bin", g_tmp, tag);
	train(&c, 2);
	expect_close(&ref, &c, 2e-5, "stage 2, 2 ranks x 2 micro-steps");
	c.accum = 3;
	c.stage = 1;
	snprintf(c.out, sizeof(c.out), "%s/%s-acc3.bin", g_tmp, tag);
	train(&c, 1);
	expect_close(&ref, &c, 2e-5, "stage 1, 1 rank x 3 micro-steps");
	c = base_cfg(3, tag);
	c.opt = opt;
	c.clip = clip;
	c.shard_size = 2;
	snprintf(c.out, sizeof(c.out), "%s/%s-hyb.bin", g_tmp, tag);
	train(&c, 4);
	expect_close(&ref, &c, 2e-5, "stage 3, hybrid: 2 groups of 2");
	c = base_cfg(1, tag);
	c.opt = opt;
	c.clip = clip;
	c.shard_size = 1;	/* pure replication: plain DDP */
	snprintf(c.out, sizeof(c.out), "%s/%s-ddp.bin", g_tmp, tag);
	train(&c, 2);
	expect_close(&ref, &c, 2e-5, "stage 1, shard_size 1 (DDP)");
	c = base_cfg(2, tag);	/* the gradients taken in their shards */
	c.opt = opt;
	c.clip = clip;
	c.shard_size = 1;
	c.accum = 2;
	snprintf(c.out, sizeof(c.out), "%s/%s-ddp2.bin", g_tmp, tag);
	train(&c, 2);
	expect_close(&ref, &c, 2e-5, "stage 2, shard_size 1, 2 micro-steps");
}

static void test_accum_hybrid_sgd(void **state)
{
	(void)state;
	accum_hybrid(DPG_OPT_SGD, 0.0f, "ahs");
}

static void test_accum_hybrid_clip(void **state)
{
	(void)state;
	accum_hybrid(DPG_OPT_ADAMW, 0.5f, "ahc");	/* the norm is above 0.5: clipping acts */
}

static void test_bf16(void **state)
{
	struct zcfg c = base_cfg(2, "bf"), ref;

	(void)state;
	ref = reference(&c, "bf-ref");
	c.rdt = DPG_BF16;
	train(&c, 3);
	expect_close(&ref, &c, 2e-2, "bf16 reduction");
	train(&c, 1);		/* the gradient in its shard, rounded alone */
	expect_close(&ref, &c, 2e-2, "bf16 reduction, 1 rank");
	c = base_cfg(3, "bf-p");
	c.pdt = DPG_BF16;
	c.rdt = DPG_BF16;
	train(&c, 2);
	expect_close(&ref, &c, 3e-2, "bf16 working parameters and reduction");
}

static void test_checkpoint_reshard(void **state)
{
	struct zcfg full = base_cfg(2, "ck-full"), a, b;

	(void)state;
	full.steps = 6;
	train(&full, 4);
	/* world 4 saves after 3 steps (and goes on: the same run) */
	a = base_cfg(2, "ck-a");
	a.steps = 6;
	a.save_after = 3;
	snprintf(a.ckdir, sizeof(a.ckdir), "%s/ckpt", g_tmp);
	train(&a, 4);
	assert_true(same_bytes(full.out, a.out));	/* saving changes nothing */
	for (int w = 1; w <= 3; w++) {
		char tag[32];

		snprintf(tag, sizeof(tag), "ck-resume-w%d", w);
		b = base_cfg(w == 3 ? 3 : 1, tag);	/* and another stage */
		b.first_step = 3;
		b.steps = 3;
		b.load = true;
		memcpy(b.ckdir, a.ckdir, sizeof(b.ckdir));
		train(&b, w);
		expect_close(&full, &b, 2e-5, tag);
	}
}

/* The stretch goal: with a fixed micro-batch (2 samples; world x accum =
 * 12), deterministic mode gives the same bits at 1, 2, 3 and 4 ranks, for
 * every stage, with hybrid sharding and with clipping; the default mode
 * does not (its sums follow the ring), which shows the test can tell. */
static void test_deterministic_across_worlds(void **state)
{
	static const struct { int world, stage, shard; } runs[] = {
		{ 2, 1, 0 }, { 3, 2, 0 }, { 4, 3, 0 }, { 4, 2, 2 }, { 3, 3, 1 }, { 1, 3, 0 },
	};
	struct zcfg ref = base_cfg(1, "det-ref"), c;
	bool any_diff = false;

	(void)state;
	ref.deterministic = 1;
	ref.accum = 12;
	ref.clip = 0.5f;
	train(&ref, 1);
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		char tag[32];

		snprintf(tag, sizeof(tag), "det-w%d-s%d-h%d", runs[i].world, runs[i].stage,
			 runs[i].shard);
		c = base_cfg(runs[i].stage, tag);
		c.deterministic = 1;
		c.accum = 12 / runs[i].world;
		c.clip = 0.5f;
		c.shard_size = runs[i].shard;
		train(&c, runs[i].world);
		if (!same_bytes(ref.out, c.out))
			fail_msg("%s: not bitwise identical to 1 rank (max rel diff %g)", tag,
				 max_rel_diff(ref.out, c.out));
		expect_close(&ref, &c, 0, tag);	/* and it trained */
	}
	/* the default mode, same runs: close, but not all bitwise equal */
	ref = base_cfg(1, "nodet-ref");
	ref.accum = 12;
	ref.clip = 0.5f;
	train(&ref, 1);
	for (int w = 2; w <= 4; w++) {
		char tag[32];

		snprintf(tag, sizeof(tag), "nodet-w%d", w);
		c = base_cfg(3, tag);
		c.accum = 12 / w;
		c.clip = 0.5f;
		train(&c, w);
		expect_close(&ref, &c, 2e-5, tag);
		any_diff |= !same_bytes(ref.out, c.out);
	}
	assert_true(any_diff);
}

/* ---- memory per rank: the ZeRO formula ---- */

struct memcfg {
	int stage;
	dpg_dtype_t pdt;
	int shard_size;
};

static void body_memory(int rank, const struct job *j)
{
	const struct memcfg *m = j->arg;
	struct zcfg c = base_cfg(m->stage, "mem");
	dpg_ctx_t *ctx = NULL;
	dpg_zero_mem_t mem;
	dpg_zero_t *z;
	size_t P, S, ps = m->pdt == DPG_BF16 ? 2 : 4;
	/* stage 3's working shard: bf16 its own, fp32 the master itself */
	size_t own = 0, u0, u1;
	int n;

	c.pdt = m->pdt;
	c.shard_size = m->shard_size;
	CHK_OK(ctx, dpg_init(NULL, &ctx));
	n = m->shard_size ? m->shard_size : j->n;
	z = make_model(ctx, &c);
	CHK_OK(ctx, dpg_zero_memory(z, &mem));
	P = mem.padded_numel;
	S = mem.shard_numel;
	CHK(P >= TOTAL_NUMEL && P < TOTAL_NUMEL + (size_t)NUNITS * n * 16, "padded %zu", P);
	CHK(S * (size_t)n == P, "shard %zu x %d != padded %zu", S, n, P);
	/* optimizer state: fp32 master + two AdamW moments = 12 bytes / shard element */
	CHK(mem.optim_bytes == 12 * S, "optim %zu, expected 12 x %zu", mem.optim_bytes, S);
	if (m->stage == 1) {
		CHK(mem.param_bytes == ps * P, "param %zu, expected %zu x %zu", mem.param_bytes, ps, P);
		CHK(mem.grad_bytes == 4 * P, "grad %zu, expected 4 x %zu", mem.grad_bytes, P);
	} else if (m->stage == 2) {
		CHK(mem.param_bytes == ps * P, "param %zu", mem.param_bytes);
		CHK(mem.grad_bytes == 4 * S, "grad %zu, expected 4 x %zu", mem.grad_bytes, S);
	} else {
		own = m->pdt == DPG_BF16 ? 2 * S : 0;
		CHK(mem.param_bytes == own, "param %zu, expected %zu", mem.param_bytes, own);
		CHK(mem.grad_bytes == 4 * S, "grad %zu", mem.grad_bytes);
	}
	/* every buffer of a pool holds the largest unit (here unit 1) */
	u0 = (37 + 5 + (size_t)n * 16 - 1) / ((size_t)n * 16) * n * 16;
	u1 = (130 + 1 + (size_t)n * 16 - 1) / ((size_t)n * 16) * n * 16;
	CHK(u1 >= u0, "unit sizes");
	if (m->stage > 1) {
		/* a unit's gradient taken: a buffer of the pool, except where
		 * the shard group is one rank (the unit's shard itself) */
		dpg_zero_mem_t g;
		size_t held = n == 1 ? 0 : 4 * u1;
		int id = 0;

		while (P_UNIT[id] != NUNITS - 1)	/* the unit micro_step takes first */
			id++;
		CHK(dpg_zero_grad(z, id) != NULL, "grad of parameter %d", id);
		CHK_OK(ctx, dpg_zero_memory(z, &g));
		CHK(g.grad_bytes == 4 * S + held, "a gradient taken, %d a shard group: grad %zu, "
		    "expected %zu", n, g.grad_bytes, 4 * S + held);
	}
	/* one step, then the same figures at rest */
	micro_step(ctx, z, &c, j->n, rank, 0, 0);
	CHK_OK(ctx, dpg_zero_step(z, 0.01f, NULL));
	{
		dpg_zero_mem_t after;

		CHK_OK(ctx, dpg_zero_memory(z, &after));
		CHK(after.param_bytes == mem.param_bytes && after.grad_bytes == mem.grad_bytes &&
		    after.optim_bytes == mem.optim_bytes, "memory at rest changed after a step: "
		    "%zu/%zu/%zu -> %zu/%zu/%zu", mem.param_bytes, mem.grad_bytes,
		    mem.optim_bytes, after.param_bytes, after.grad_bytes, after.optim_bytes);
	}
	if (m->stage == 3) {
		/* gather(0, next 1): both units' buffers exist, unit 2's does not */
		dpg_zero_mem_t g;
		size_t kept_grad = n == 1 ? 0 : 4 * u1;

		CHK_OK(ctx, dpg_zero_gather(z, 0, 1));
		CHK(dpg_zero_param(z, 4) == NULL, "unit 2 visible without a gather");
		CHK_OK(ctx, dpg_zero_gather(z, 1, -1));
		CHK(dpg_zero_param(z, 0) && dpg_zero_param(z, 2), "gathered units not visible");
		CHK_OK(ctx, dpg_zero_memory(z, &g));
		CHK(g.param_bytes == own + ps * 2 * u1, "gathered: %zu, expected %zu",
		    g.param_bytes, own + ps * 2 * u1);
		CHK_OK(ctx, dpg_zero_release(z, 0));
		CHK_OK(ctx, dpg_zero_release(z, 1));
		CHK_OK(ctx, dpg_zero_memory(z, &g));
		/* kept: the two gather buffers, and one gradient buffer of the
		 * step before (each unit's gradient took the one reduced before
		 * it: one buffer served every unit; none with one rank a shard
		 * group, where each gradient was taken in its shard) */
		CHK(g.param_bytes == own && g.cached_bytes == 2 * ps * u1 + kept_grad,
		    "released: param %zu cached %zu, expected %zu and %zu", g.param_bytes,
		    g.cached_bytes, own, 2 * ps * u1 + kept_grad);
	}
	/* destroyed with a gradient taken (the unit's shard, or a buffer of
	 * the pool): given back once (ASan and valgrind watch) */
	if (m->stage > 1)
		CHK(dpg_zero_grad(z, 0) != NULL, "grad before destroy: %s", dpg_last_error(ctx));
	CHK_OK(ctx, dpg_zero_destroy(z));
	CHK_OK(ctx, dpg_finalize(ctx));
}

static void test_memory_formula(void **state)
{
	(void)state;
	for (int stage = 1; stage <= 3; stage++)
		for (int w = 1; w <= 4; w += 3) {
			struct memcfg m = { stage, stage == 2 ? DPG_BF16 : DPG_F32, 0 };
			struct job j = { .n = w, .body = body_memory, .arg = &m };

			expect_all_ok(&j);
		}
	{
		struct memcfg m = { 3, DPG_F32, 2 };
		struct job j = { .n = 4, .body = body_memory, .arg = &m };

		expect_all_ok(&j);
	}
	{	/* shard groups of one rank: the gradients in their shards */
		struct memcfg m = { 2, DPG_F32, 1 };
		struct job j = { .n = 4, .body = body_memory, .arg = &m };

		expect_all_ok(&j);
	}
	{	/* stage 3 in bf16: a working shard of its own */
		struct memcfg m = { 3, DPG_BF16, 0 };
		struct job j = { .n = 4, .body = body_memory, .arg = &m };

		expect_all_ok(&j);
	}
}

/* A rank dies while stage 3 gathers in the background: the survivors get a
 * clear error naming it, and dpg_finalize does not wait for its goodbye
 * (the prefetch thread's failure marks the context failed). */
static void body_peer_dies(int rank, const struct job *j)
{
	struct zcfg c = base_cfg(3, "die");
	dpg_ctx_t *ctx = NULL;
	dpg_zero_t *z;
	dpg_status_t st = DPG_OK;
	double t0;

	setenv("DPG_ZERO_PREFETCH", "1", 1);	/* the thread, however many CPUs */
	CHK_OK(ctx, dpg_init(NULL, &ctx));
	z = make_model(ctx, &c);
	CHK_OK(ctx, dpg_barrier(dpg_world(ctx)));
	if (rank == j->n - 1)
		_exit(0);	/* gone, without a word */
	t0 = now_s();
	for (int i = 0; i < 50 && st == DPG_OK; i++) {
		st = dpg_zero_gather(z, i % NUNITS, (i + 1) % NUNITS);
		if (st == DPG_OK)
			st = dpg_zero_release(z, i % NUNITS);
	}
	CHK(st == DPG_ERR_PEER, "gather after a peer died: %s (%s)", dpg_strerror(st),
	    dpg_last_error(ctx));
	CHK(strstr(dpg_last_error(ctx), "prefetch") && strstr(dpg_last_error(ctx), "peer rank"),
	    "message: %s", dpg_last_error(ctx));
	dpg_zero_destroy(z);
	dpg_finalize(ctx);
	CHK(now_s() - t0 < 10, "error + finalize took %.1f s (DPG_TIMEOUT %g)", now_s() - t0,
	    j->timeout_s);
}

static void test_peer_dies_stage3(void **state)
{
	struct job j = { .n = 3, .body = body_peer_dies, .timeout_s = 30 };

	(void)state;
	expect_all_ok(&j);
}

/* A rank stops (SIGSTOP) while stage 3 gathers in the background: the
 * survivors' timeout says what every rank was doing, as a public
 * collective's does (the prefetch thread's all_gather, the stopped rank
 * silent). */
static void body_stopped_stage3(int rank, const struct job *j)
{
	struct zcfg c = base_cfg(3, "stop");
	dpg_ctx_t *ctx = NULL;
	dpg_zero_t *z;
	dpg_status_t st = DPG_OK;
	const char *err;

	setenv("DPG_ZERO_PREFETCH", "1", 1);	/* the thread, however many CPUs */
	CHK_OK(ctx, dpg_init(NULL, &ctx));
	z = make_model(ctx, &c);
	CHK_OK(ctx, dpg_barrier(dpg_world(ctx)));
	if (rank == 1) {
		pid_t me = getpid(), p = fork();

		CHK(p >= 0, "fork");
		if (p == 0) {	/* its SIGCONT, after the others gave up */
			sleep(6);
			kill(me, SIGCONT);
			_exit(0);
		}
		raise(SIGSTOP);
		while (wait(NULL) > 0)
			;
		_exit(0);
	}
	for (int i = 0; i < 50 && st == DPG_OK; i++) {
		st = dpg_zero_gather(z, i % NUNITS, (i + 1) % NUNITS);
		if (st == DPG_OK)
			st = dpg_zero_release(z, i % NUNITS);
	}
	err = dpg_last_error(ctx);
	printf("# rank %d: %s\n", rank, err);
	CHK(st == DPG_ERR_TIMEOUT, "gather with a peer stopped: %s (%s)", dpg_strerror(st), err);
	CHK(strstr(err, "prefetch") != NULL, "message: %s", err);
	CHK(strstr(err, "; the ranks: all_gather #0 on ") != NULL, "message: %s", err);
	CHK(strstr(err, ": ranks 0,2 waiting since ") != NULL, "message: %s", err);
	CHK(strstr(err, "; rank 1 (") != NULL && strstr(err, "): no answer in ") != NULL,
	    "message: %s", err);
	/* a second call says it again */
	CHK(dpg_zero_gather(z, 0, -1) == DPG_ERR_TIMEOUT &&
	    strstr(dpg_last_error(ctx), "; the ranks: all_gather #0 on ") != NULL,
	    "again: %s", dpg_last_error(ctx));
	dpg_zero_destroy(z);
	dpg_finalize(ctx);
	(void)j;
}

static void test_stopped_stage3(void **state)
{
	struct job j = { .n = 3, .body = body_stopped_stage3, .timeout_s = 2, .limit_s = 40 };

	(void)state;
	expect_all_ok(&j);
}

/* ---- errors ---- */

static void body_errors(int rank, const struct job *j)
{
	dpg_ctx_t *ctx = NULL;
	dpg_zero_opts_t o;
	dpg_zero_t *z = NULL;
	int k = 0;
	struct zcfg c = base_cfg(1, "err");

	(void)rank;
	CHK_OK(ctx, dpg_init(NULL, &ctx));
	CHK(dpg_accum_steps(ctx, 96, 8, 4, &k) == DPG_OK && k == 3, "k %d", k);
	CHK(dpg_accum_steps(ctx, 100, 8, 4, &k) == DPG_ERR_INVALID, "100/(8x4) accepted");
	CHK(strstr(dpg_last_error(ctx), "100") && strstr(dpg_last_error(ctx), "micro batch 8"),
	    "message: %s", dpg_last_error(ctx));
	dpg_zero_opts_default(&o);
	o.stage = 4;
	CHK(dpg_zero_create(ctx, &o, &z) == DPG_ERR_INVALID && z == NULL, "stage 4");
	CHK(strstr(dpg_last_error(ctx), "stage 4"), "message: %s", dpg_last_error(ctx));
	dpg_zero_opts_default(&o);
	o.deterministic = 1;
	o.reduce_dtype = DPG_BF16;
	CHK(dpg_zero_create(ctx, &o, &z) == DPG_ERR_INVALID, "deterministic + bf16 reduction");
	CHK(strstr(dpg_last_error(ctx), "fixed point"), "message: %s", dpg_last_error(ctx));
	dpg_zero_opts_default(&o);
	o.shard_size = 3;
	CHK(dpg_zero_create(ctx, &o, &z) == DPG_ERR_INVALID, "shard_size 3 of %d", j->n);
	dpg_zero_opts_default(&o);
	CHK_OK(ctx, dpg_zero_create(ctx, &o, &z));
	CHK(dpg_zero_add_param(z, "a", 10, 1, NULL) == DPG_ERR_INVALID, "first unit 1");
	CHK(dpg_zero_add_param(z, "a", 0, 0, NULL) == DPG_ERR_INVALID, "zero numel");
	CHK(dpg_zero_step(z, 0.1f, NULL) == DPG_ERR_INVALID, "step before commit");
	CHK_OK(ctx, dpg_zero_add_param(z, "a", 10, 0, NULL));
	CHK(dpg_zero_add_param(z, "b", 10, 2, NULL) == DPG_ERR_INVALID, "unit 0 -> 2");
	CHK_OK(ctx, dpg_zero_commit(z));
	CHK(dpg_zero_add_param(z, "c", 10, 0, NULL) == DPG_ERR_INVALID, "after commit");
	CHK(dpg_zero_grad(z, 1) == NULL && dpg_zero_param(z, -1) == NULL, "bad ids");
	CHK(dpg_zero_step(z, NAN, NULL) == DPG_ERR_INVALID, "NaN lr");
	snprintf(c.ckdir, sizeof(c.ckdir), "%s/nonexistent-%d", g_tmp, j->n);
	CHK(dpg_zero_load(z, c.ckdir, NULL, 0, NULL) != DPG_OK, "load from nowhere");
	CHK(strstr(dpg_last_error(ctx), "nonexistent"), "message: %s", dpg_last_error(ctx));
	dpg_zero_grad(z, 0)[3] = NAN;
	CHK(dpg_zero_step(z, 0.1f, NULL) == DPG_ERR_INVALID, "NaN gradient accepted");
	CHK(strstr(dpg_last_error(ctx), "NaN"), "message: %s", dpg_last_error(ctx));
	CHK_OK(ctx, dpg_zero_destroy(z));
	/* extra bytes in the checkpoint: a NULL buffer ignores them (and may
	 * still learn their count); a buffer too small is refused */
	{
		struct zcfg a = base_cfg(2, "err-x");
		dpg_zero_t *z2;
		long extra = 42, small = 0;
		size_t len = 0;

		snprintf(a.ckdir, sizeof(a.ckdir), "%s/ckextra-%d", g_tmp, j->n);
		z2 = make_model(ctx, &a);
		CHK_OK(ctx, dpg_zero_save(z2, a.ckdir, &extra, sizeof(extra)));
		CHK_OK(ctx, dpg_zero_load(z2, a.ckdir, NULL, 0, NULL));
		CHK_OK(ctx, dpg_zero_load(z2, a.ckdir, NULL, 0, &len));
		CHK(len == sizeof(extra), "extra_len %zu with a NULL buffer", len);
		CHK(dpg_zero_load(z2, a.ckdir, &small, 4, &len) == DPG_ERR_INVALID,
		    "4-byte buffer took %zu extra bytes", sizeof(extra));
		CHK(strstr(dpg_last_error(ctx), "room for 4"), "message: %s",
		    dpg_last_error(ctx));
		CHK_OK(ctx, dpg_zero_destroy(z2));
	}
	/* a different model refuses the checkpoint of another */
	{
		struct zcfg a = base_cfg(2, "err-a");
		dpg_zero_t *z2;

		snprintf(a.ckdir, sizeof(a.ckdir), "%s/ckerr-%d", g_tmp, j->n);
		z2 = make_model(ctx, &a);
		CHK_OK(ctx, dpg_zero_save(z2, a.ckdir, NULL, 0));
		CHK_OK(ctx, dpg_zero_destroy(z2));
		dpg_zero_opts_default(&o);
		CHK_OK(ctx, dpg_zero_create(ctx, &o, &z));
		CHK_OK(ctx, dpg_zero_add_param(z, "p0", 37, 0, NULL));
		CHK_OK(ctx, dpg_zero_add_param(z, "p1", 6, 0, NULL));
		CHK_OK(ctx, dpg_zero_commit(z));
		CHK(dpg_zero_load(z, a.ckdir, NULL, 0, NULL) == DPG_ERR_INVALID, "other model loaded");
		CHK(strstr(dpg_last_error(ctx), "p1") || strstr(dpg_last_error(ctx), "parameter"),
		    "message: %s", dpg_last_error(ctx));
		CHK_OK(ctx, dpg_zero_destroy(z));
	}
	CHK_OK(ctx, dpg_finalize(ctx));
}

static void test_errors(void **state)
{
	struct job j1 = { .n = 1, .body = body_errors };
	struct job j2 = { .n = 2, .body = body_errors };

	(void)state;
	expect_all_ok(&j1);
	expect_all_ok(&j2);
}

/* ------------------------------------------------ asynchronous save */

static void latest_is(const char *dir, long step)
{
	char path[400], want[32], got[32] = { 0 };
	FILE *f;

	snprintf(path, sizeof(path), "%s/latest", dir);
	f = fopen(path, "r");
	CHK(f != NULL, "cannot open %s", path);
	CHK(fread(got, 1, sizeof(got) - 1, f) > 0, "empty %s", path);
	fclose(f);
	snprintf(want, sizeof(want), "step-%08ld\n", step);
	CHK(strcmp(got, want) == 0, "%s says '%s', expected step %ld", path, got, step);
}

static void one_step(dpg_ctx_t *ctx, dpg_zero_t *z, const struct zcfg *c, int world,
		     int rank, long step)
{
	micro_step(ctx, z, c, world, rank, step, 0);
	CHK_OK(ctx, dpg_zero_step(z, 0.05f, NULL));
}

/* Every parameter (stage 1: all of them on every rank). */
static void params_of(dpg_zero_t *z, float *v)
{
	size_t k = 0;

	for (int id = 0; id < NP; id++) {
		const float *p = dpg_zero_param(z, id);

		CHK(p != NULL, "param %d", id);
		memcpy(v + k, p, P_NUMEL[id] * sizeof(float));
		k += P_NUMEL[id];
	}
}

/* The whole file (at most cap bytes): its length, or -1. */
static long slurp(const char *path, unsigned char *buf, size_t cap)
{
	FILE *f = fopen(path, "rb");
	size_t n;

	if (!f)
		return -1;
	n = fread(buf, 1, cap, f);
	fclose(f);
	return n < cap ? (long)n : -1;
}

static void same_ckpt_file(const char *a, const char *b, const char *name)
{
	static unsigned char ba[1 << 16], bb[1 << 16];
	char fa[400], fb[400];
	long na, nb;

	snprintf(fa, sizeof(fa), "%s/step-00000002/%s", a, name);
	snprintf(fb, sizeof(fb), "%s/step-00000002/%s", b, name);
	na = slurp(fa, ba, sizeof(ba));
	nb = slurp(fb, bb, sizeof(bb));
	CHK(na > 100 && na == nb && memcmp(ba, bb, (size_t)na) == 0, "%s (%ld bytes) and %s "
	    "(%ld bytes) differ", fa, na, fb, nb);
}

/* A background write that fails (a file size limit on the last rank): wait
 * reports it on every rank, latest stays. */
static void async_write_error(dpg_ctx_t *ctx, dpg_zero_t *z, const char *dir, int rank,
			      int world)
{
	struct rlimit rl, small;
	dpg_status_t st;
	long x = 9;
	bool limited = rank == world - 1;

	if (limited) {
		CHK(getrlimit(RLIMIT_FSIZE, &rl) == 0, "getrlimit");
		small = rl;
		small.rlim_cur = 256;
		signal(SIGXFSZ, SIG_IGN);
		CHK(setrlimit(RLIMIT_FSIZE, &small) == 0, "setrlimit");
	}
	CHK_OK(ctx, dpg_zero_save_async(z, dir, &x, sizeof(x)));
	st = dpg_zero_save_wait(z);
	if (limited)
		CHK(setrlimit(RLIMIT_FSIZE, &rl) == 0, "setrlimit back");
	CHK(st == DPG_ERR_SYSTEM, "wait after a failed write: %s", dpg_strerror(st));
	CHK(strstr(dpg_last_error(ctx), limited ? "File too large" : "another rank failed"),
	    "message: %s", dpg_last_error(ctx));
	latest_is(dir, 2);
}

static void body_async(int rank, const struct job *j)
{
	struct zcfg c = base_cfg(1, "async");
	dpg_ctx_t *ctx = NULL;
	dpg_zero_t *z;
	char a[300], b[300], d[300], shard[32], dl[320];
	float before[TOTAL_NUMEL], now[TOTAL_NUMEL];
	long x = 7, got = 0, step;

	CHK_OK(ctx, dpg_init(NULL, &ctx));
	snprintf(a, sizeof(a), "%s/async-sync-%d", g_tmp, j->n);
	snprintf(b, sizeof(b), "%s/async-bg-%d", g_tmp, j->n);
	snprintf(d, sizeof(d), "%s/async-destroy-%d", g_tmp, j->n);
	z = make_model(ctx, &c);
	for (step = 0; step < 2; step++)
		one_step(ctx, z, &c, j->n, rank, step);
	params_of(z, before);
	CHK_OK(ctx, dpg_zero_save(z, a, &x, sizeof(x)));
	CHK_OK(ctx, dpg_zero_save_async(z, b, &x, sizeof(x)));
	/* the caller goes on at once: its extra bytes and parameters change
	 * while the shard is written */
	x = 8;
	one_step(ctx, z, &c, j->n, rank, step++);
	params_of(z, now);
	CHK(memcmp(before, now, sizeof(now)) != 0, "the step changed nothing");
	CHK_OK(ctx, dpg_zero_save_wait(z));
	latest_is(b, 2);
	snprintf(shard, sizeof(shard), "shard-%05d", rank);
	same_ckpt_file(a, b, shard);
	if (rank == 0)
		same_ckpt_file(a, b, "meta");
	CHK_OK(ctx, dpg_zero_load(z, b, &got, sizeof(got), NULL));
	params_of(z, now);
	CHK(got == 7 && memcmp(before, now, sizeof(now)) == 0,
	    "loaded extra %ld or parameters differ from those of the call", got);
	one_step(ctx, z, &c, j->n, rank, 2);
	async_write_error(ctx, z, b, rank, j->n);
	/* one at a time: a second save finishes the first */
	CHK_OK(ctx, dpg_zero_save_async(z, b, NULL, 0));
	one_step(ctx, z, &c, j->n, rank, 3);
	CHK_OK(ctx, dpg_zero_save_async(z, b, NULL, 0));
	latest_is(b, 3);
	CHK_OK(ctx, dpg_zero_save_wait(z));
	latest_is(b, 4);
	CHK_OK(ctx, dpg_zero_save_wait(z));	/* none in flight */
	/* destroy waits for the writer, commits nothing */
	CHK_OK(ctx, dpg_zero_save_async(z, d, NULL, 0));
	CHK_OK(ctx, dpg_zero_destroy(z));
	snprintf(dl, sizeof(dl), "%s/latest", d);
	CHK(access(dl, F_OK) != 0 && errno == ENOENT, "%s exists", dl);
	CHK_OK(ctx, dpg_finalize(ctx));
}

static void test_save_async(void **state)
{
	struct job j1 = { .n = 1, .body = body_async };
	struct job j2 = { .n = 2, .body = body_async };

	(void)state;
	expect_all_ok(&j1);
	expect_all_ok(&j2);
}

/* A process killed while its asynchronous save is being written leaves
 * latest at the checkpoint before, which loads. */
static void body_async_kill(int rank, const struct job *j)
{
	struct zcfg c = base_cfg(1, "async-kill");
	dpg_ctx_t *ctx = NULL;
	dpg_zero_t *z;
	char dir[300];
	float before[TOTAL_NUMEL], now[TOTAL_NUMEL];
	int status = 0;
	pid_t pid;

	CHK_OK(ctx, dpg_init(NULL, &ctx));
	snprintf(dir, sizeof(dir), "%s/async-kill", g_tmp);
	z = make_model(ctx, &c);
	one_step(ctx, z, &c, j->n, rank, 0);
	CHK_OK(ctx, dpg_zero_save(z, dir, NULL, 0));
	params_of(z, before);
	one_step(ctx, z, &c, j->n, rank, 1);
	pid = fork();
	CHK(pid >= 0, "fork");
	if (pid == 0) {	/* world 1: the save needs no peer */
		if (dpg_zero_save_async(z, dir, NULL, 0) != DPG_OK)
			_exit(3);
		usleep(500);
		raise(SIGKILL);
		_exit(4);
	}
	CHK(waitpid(pid, &status, 0) == pid, "waitpid");
	CHK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child status %#x", status);
	latest_is(dir, 1);
	CHK_OK(ctx, dpg_zero_load(z, dir, NULL, 0, NULL));
	params_of(z, now);
	CHK(memcmp(before, now, sizeof(now)) == 0, "loaded parameters differ");
	CHK_OK(ctx, dpg_zero_destroy(z));
	CHK_OK(ctx, dpg_finalize(ctx));
}

static void test_save_async_killed(void **state)
{
	struct job j1 = { .n = 1, .body = body_async_kill };

	(void)state;
	expect_all_ok(&j1);
}

/* Save, then requeue: the stop signals (DPG_REQUEUE installs their handlers)
 * arriving in a storm, hundreds of them, while dpg_zero_save writes and its
 * collectives wait: the save completes, latest names it, it loads to the
 * same parameters, and every rank is told to stop. */
static void env_requeue(int rank, const struct job *j)
{
	(void)rank;
	(void)j;
	setenv("DPG_REQUEUE", "30", 1);
}

static pid_t storm(void)
{
	pid_t parent = getpid(), pid = fork();

	CHK(pid >= 0, "fork");
	if (pid == 0) {
		for (int i = 0; i < 200000 && getppid() == parent; i++) {
			if (kill(parent, i % 2 ? SIGTERM : SIGUSR1) != 0)
				_exit(0);
			usleep(20);
		}
		_exit(0);
	}
	return pid;
}

static void body_signal_storm(int rank, const struct job *j)
{
	struct zcfg c = base_cfg(1, "storm");
	dpg_ctx_t *ctx = NULL;
	dpg_zero_t *z;
	char dir[300];
	float before[TOTAL_NUMEL], now[TOTAL_NUMEL];
	int stop = 0;
	pid_t pid;

	CHK_OK(ctx, dpg_init(NULL, &ctx));
	snprintf(dir, sizeof(dir), "%s/storm-%d", g_tmp, j->n);
	z = make_model(ctx, &c);
	one_step(ctx, z, &c, j->n, rank, 0);
	params_of(z, before);
	pid = storm();
	for (int i = 0; i < 5; i++)	/* overwrite the same step: more saves under fire */
		CHK_OK(ctx, dpg_zero_save(z, dir, NULL, 0));
	CHK_OK(ctx, dpg_stop_requested(ctx, &stop));
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	CHK(stop == 1, "no stop after the signals");
	latest_is(dir, 1);
	one_step(ctx, z, &c, j->n, rank, 1);
	CHK_OK(ctx, dpg_zero_load(z, dir, NULL, 0, NULL));
	params_of(z, now);
	CHK(memcmp(before, now, sizeof(now)) == 0, "loaded parameters differ");
	CHK_OK(ctx, dpg_zero_destroy(z));
	CHK_OK(ctx, dpg_finalize(ctx));
}

/* The prefetch thread's rule (DPG_ZERO_PREFETCH=auto): a thread only where
 * every rank has a second CPU, shared sets split among the ranks. */
static void test_spare_cpu(void **state)
{
	(void)state;
	assert_false(dpg_zspare_cpu(2, 2, 2));	/* 2 unbound ranks, 2 CPUs */
	assert_false(dpg_zspare_cpu(2, 2, 4));	/* 4 ranks on 2 CPUs */
	assert_true(dpg_zspare_cpu(4, 4, 2));	/* 2 unbound ranks, 4 CPUs */
	assert_false(dpg_zspare_cpu(6, 6, 4));	/* 4 unbound ranks, 6 CPUs */
	assert_true(dpg_zspare_cpu(8, 64, 8));	/* bound: 8 cores each of 64 */
	assert_false(dpg_zspare_cpu(1, 64, 8));	/* bound: one core each */
	assert_true(dpg_zspare_cpu(2, 2, 1));	/* one rank, 2 CPUs */
	assert_false(dpg_zspare_cpu(1, 1, 1));
	assert_true(dpg_zspare_cpu(8, -1, 8));	/* online unknown: own set */
	assert_false(dpg_zspare_cpu(0, 8, 1));
	assert_false(dpg_zspare_cpu(8, 8, 0));
}

static void test_save_signal_storm(void **state)
{
	struct job j2 = { .n = 2, .body = body_signal_storm, .env = env_requeue };
	struct job j3 = { .n = 3, .body = body_signal_storm, .env = env_requeue };

	(void)state;
	expect_all_ok(&j2);
	expect_all_ok(&j3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stage1_adamw),
		cmocka_unit_test(test_stage2_adamw),
		cmocka_unit_test(test_stage3_adamw),
		cmocka_unit_test(test_stage3_both_gathers),
		cmocka_unit_test(test_stage2_sgd),
		cmocka_unit_test(test_bitwise_same_world),
		cmocka_unit_test(test_accum_hybrid_sgd),
		cmocka_unit_test(test_accum_hybrid_clip),
		cmocka_unit_test(test_bf16),
		cmocka_unit_test(test_checkpoint_reshard),
		cmocka_unit_test(test_deterministic_across_worlds),
		cmocka_unit_test(test_memory_formula),
		cmocka_unit_test(test_peer_dies_stage3),
		cmocka_unit_test(test_stopped_stage3),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_save_async),
		cmocka_unit_test(test_save_async_killed),
		cmocka_unit_test(test_save_signal_storm),
		cmocka_unit_test(test_spare_cpu),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, setup_tmp, teardown_tmp);
}
