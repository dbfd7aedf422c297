/* SPDX-License-Identifier: BSD-3-Clause */
/* train.c - the ./train of `srun --dpg-gpus-per-task=1 ./train`: the MLP of mlp.h trained with libdpg's
 * sharded data parallelism (ZeRO 1-3), gradient accumulation, a warm-up + cosine schedule, checkpoints. */

/*
 * Where the model runs: the runtime is joined on DPG_BACKEND's backend
 * (auto: NCCL when the task has a GPU).  On NCCL, the sharded step's
 * parameters and gradients are device memory, and the forward and backward
 * run there too, through train's device module mlp-cuda.so (mlp_dev.h:
 * cuBLAS for the matrix products, mlp_math.h's functions as kernels); the
 * samples are generated on the host and copied.  On the CPU backend the
 * model is mlp.h's plain C.  With auto and no module beside train (built
 * without nvcc or cuBLAS) train asks for the CPU backend, as does
 * --deterministic (CPU only); DPG_BACKEND=nccl without the module fails.
 *
 * Data: step s (0-based) trains on the global batch dpg_shard_batch(shuffle
 * seed, --samples, G, s, rank, world): G / world indices per rank, taken in
 * micro-batches of B, k = G / (B x world) micro-steps per optimizer step.
 * The dataset (mlp.h) is a pure function of (--seed, index), the shuffle
 * and the initial parameters are seeded from --seed too, and nothing else
 * is random: the state of every RNG after step s is a function of (--seed,
 * s).  A checkpoint therefore stores, next to the sharded model and
 * optimizer state, only (step, data seed, next step) plus the global batch
 * and dataset size that the data order depends on; --resume continues the
 * same loss curve at any world size.
 *
 * Straggler report: DPG_REPORT=N in the environment makes rank 0 print, every
 * N steps, the rank the others waited for (dpg_step_mark marks each step).
 *
 * Save, then requeue: every step the ranks ask dpg_stop_requested; under
 * --dpg-requeue=GRACE (DPG_REQUEUE in the environment) Slurm's warning
 * signal or a preemption's SIGTERM makes every rank save the same step
 * (with --ckpt-dir) and exit 75; run again with --resume it goes on from
 * there (etc/sbatch/c-libdpg-requeue.sbatch does both).
 *
 * Exit status: 0 done, 1 runtime error (the message names the rank), 2 bad
 * command line or a configuration the runtime refuses, 75
 * (DPG_EXIT_REQUEUE) stopped on request after saving: requeue the job.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <dpg_zero.h>

#include "mlp.h"
#include "mlp_dev.h"

#define EXIT_USAGE 2

/* ------------------------------------------------------------ the run's options */

struct cfg {
	long steps, global_batch, micro_batch;
	int stage;
	dpg_optimizer_t optimizer;
	float lr, clip;
	long warmup;
	uint64_t seed;
	long samples;
	const char *ckpt_dir;
	long save_every;
	int resume;
	long log_every;
	dpg_dtype_t param_dtype;
	int shard_size;
	int deterministic;
	const char *print_params;
	long stop_after;	/* 0: run to --steps */
	int seed_given;
};

/* The command line (at the end of this file, after the training story):
 * 0 run, 1 --help shown, -1 error shown. */
static int parse_args(int argc, char **argv, struct cfg *c);

/* ------------------------------------------------------------ the trainer */

struct trainer {
	struct cfg cfg;
	dpg_ctx_t *ctx;
	dpg_zero_t *z;
	int rank, world, k;
	mlp_shape_t shape;
	mlp_data_t data;
	mlp_work_t work;
	int id[MLP_NTENSORS];
	float *scratch[MLP_NTENSORS];	/* bf16 -> f32 views of the parameters */
	long *idx;			/* this rank's G / world indices of a step */
	FILE *params_out;		/* rank 0: --print-params, opened at start */
	uint64_t shuffle_seed, init_seed;
	long first_step;		/* 0, or the step a checkpoint resumes at */
	int broken;			/* failed amid collective work: leave the job */
	/* the GPU path (NCCL backend): the module's table and its model */
	const struct mlp_dev_ops *dev_ops;	/* NULL: the host computes */
	struct mlp_dev *dev;			/* made at the first forward */
	char dev_path[4096];			/* the module found, "" none */
};

static int fail(struct trainer *t, dpg_status_t st)
{
	const char *msg = t->ctx && dpg_last_error(t->ctx)[0] ? dpg_last_error(t->ctx)
							       : dpg_strerror(st);

	t->broken = 1;
	/* libdpg's messages already begin with "rank R (node)": say it once */
	if (strncmp(msg, "rank ", 5) == 0)
		fprintf(stderr, "train: %s\n", msg);
	else
		fprintf(stderr, "train: rank %d: %s\n", t->rank, msg);
	return 1;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Host memory for the model's activations, views and indices. */
static int alloc_host(struct trainer *t)
{
	size_t per_rank = (size_t)(t->cfg.global_batch / t->world);

	if (mlp_work_init(&t->work, &t->shape, (int)t->cfg.micro_batch) != 0)
		return -1;
	t->idx = malloc(per_rank * sizeof(long));
	if (t->idx == NULL)
		return -1;
	for (int i = 0; i < MLP_NTENSORS; i++) {
		t->scratch[i] = malloc(mlp_numel(&t->shape, i) * sizeof(float));
		if (t->scratch[i] == NULL)
			return -1;
	}
	return 0;
}

/* Everything random derives from --seed: the dataset, the shuffle of each
 * step, the initial parameters.  0, or -1 when out of memory. */
static int use_seed(struct trainer *t, uint64_t seed)
{
	t->cfg.seed = seed;
	t->shuffle_seed = dpg_seed(seed, 0, 1);
	t->init_seed = dpg_seed(seed, 0, 2);
	mlp_data_free(&t->data);
	return mlp_data_init(&t->data, &t->shape, seed);
}

static void free_host(struct trainer *t)
{
	for (int i = 0; i < MLP_NTENSORS; i++)
		free(t->scratch[i]);
	free(t->idx);
	mlp_work_free(&t->work);
	mlp_data_free(&t->data);
}

static dpg_status_t create_model(struct trainer *t)
{
	dpg_zero_opts_t o;
	dpg_status_t st;

	dpg_zero_opts_default(&o);
	o.stage = t->cfg.stage;
	o.optimizer = t->cfg.optimizer;
	o.clip_norm = t->cfg.clip;
	o.param_dtype = t->cfg.param_dtype;
	o.accum_steps = t->k;
	o.shard_size = t->cfg.shard_size;
	o.deterministic = t->cfg.deterministic;
	if ((st = dpg_zero_create(t->ctx, &o, &t->z)) != DPG_OK)
		return st;
	for (int i = 0; i < MLP_NTENSORS; i++) {
		st = dpg_zero_add_param(t->z, mlp_tensor_name(i), mlp_numel(&t->shape, i),
					mlp_unit_of(i), &t->id[i]);
		if (st != DPG_OK)
			return st;
	}
	return dpg_zero_commit(t->z);
}

/* The seeded initial parameters, the same on every rank. */
static dpg_status_t init_params(struct trainer *t)
{
	for (int i = 0; i < MLP_NTENSORS; i++) {
		dpg_status_t st;

		mlp_init_tensor(&t->shape, t->init_seed, i, t->scratch[i]);
		if ((st = dpg_zero_set_param(t->z, t->id[i], t->scratch[i])) != DPG_OK)
			return st;
	}
	return DPG_OK;
}

/* Tensor i's working parameters as fp32 (converted into scratch for bf16);
 * NULL when its unit is not gathered. */
static const float *param_f32(struct trainer *t, int i)
{
	void *p = dpg_zero_param(t->z, t->id[i]);
	size_t n = mlp_numel(&t->shape, i);

	if (p == NULL || t->cfg.param_dtype == DPG_F32)
		return p;
	for (size_t j = 0; j < n; j++)
		t->scratch[i][j] = mlp_bf16_to_f32(((const uint16_t *)p)[j]);
	return t->scratch[i];
}

static int missing_param(struct trainer *t, int i)
{
	t->broken = 1;
	fprintf(stderr, "train: rank %d: parameters of %s are not available (unit %d not "
		"gathered): a bug in the gather/release order\n", t->rank, mlp_tensor_name(i),
		mlp_unit_of(i));
	return 1;
}

/* ------------------------------------------------------------ the GPU path */

static int dev_fail(struct trainer *t, const char *what)
{
	t->broken = 1;
	fprintf(stderr, "train: rank %d: %s on the GPU: %s\n", t->rank, what,
		t->dev_ops->error(t->dev));
	return 1;
}

/* The device model, made at its first use on the device of p (device
 * memory of the sharded step: on NCCL, dpg_zero_param's pointers are). */
static int dev_ready(struct trainer *t, const void *p)
{
	char msg[256];

	if (t->dev != NULL)
		return 0;
	if (t->dev_ops->create(&t->shape, (int)t->cfg.micro_batch, p, &t->dev, msg,
			       sizeof(msg)) != 0) {
		t->broken = 1;
		fprintf(stderr, "train: rank %d: the model on the GPU: %s\n", t->rank, msg);
		return 1;
	}
	return 0;
}

/* Unit u forward on the GPU; unit 0 first copies the micro-batch over. */
static int dev_forward_unit(struct trainer *t, int u)
{
	const void *W = dpg_zero_param(t->z, t->id[2 * u]);
	const void *b = dpg_zero_param(t->z, t->id[2 * u + 1]);

	if (W == NULL)
		return missing_param(t, 2 * u);
	if (b == NULL)
		return missing_param(t, 2 * u + 1);
	if (dev_ready(t, W) != 0)
		return 1;
	if (u == 0 && t->dev_ops->load(t->dev, t->work.x, t->work.y, t->work.n) != 0)
		return dev_fail(t, "the micro-batch's copy");
	if (t->dev_ops->forward_unit(t->dev, u, W, b, t->cfg.param_dtype == DPG_BF16) != 0)
		return dev_fail(t, "forward");
	return 0;
}

/* ------------------------------------------------------------ one micro-step */

/* Unit u forward, on the GPU or the host. */
static int forward_unit(struct trainer *t, int u)
{
	const float *W, *b;

	if (t->dev_ops != NULL)
		return dev_forward_unit(t, u);
	if ((W = param_f32(t, 2 * u)) == NULL)
		return missing_param(t, 2 * u);
	if ((b = param_f32(t, 2 * u + 1)) == NULL)
		return missing_param(t, 2 * u + 1);
	mlp_forward_unit(&t->work, u, W, b);
	return 0;
}

/* Forward through every unit; the last one stays gathered for backward. */
static int forward(struct trainer *t)
{
	dpg_status_t st;

	for (int u = 0; u < MLP_NUNITS; u++) {
		if ((st = dpg_zero_gather(t->z, u, u + 1 < MLP_NUNITS ? u + 1 : -1)) != DPG_OK)
			return fail(t, st);
		if (forward_unit(t, u) != 0)
			return 1;
		if (u + 1 < MLP_NUNITS && (st = dpg_zero_release(t->z, u)) != DPG_OK)
			return fail(t, st);
	}
	return 0;
}

/* The micro-batch's summed per-sample loss into *sum, and dL/dz. */
static int loss(struct trainer *t, double *sum)
{
	if (t->dev_ops != NULL)
		return t->dev_ops->loss(t->dev, 1.0f, sum) != 0 ? dev_fail(t, "loss") : 0;
	(void)mlp_loss(&t->work, 1.0f);
	*sum = t->work.loss_sum;
	return 0;
}

/* Unit u backward into gW and gb (the runtime's gradients), GPU or host. */
static int backward_unit(struct trainer *t, int u, float *gW, float *gb)
{
	const void *W;

	if (t->dev_ops != NULL) {
		if ((W = dpg_zero_param(t->z, t->id[2 * u])) == NULL)
			return missing_param(t, 2 * u);
		if (t->dev_ops->backward_unit(t->dev, u, W, t->cfg.param_dtype == DPG_BF16, gW,
					      gb) != 0)
			return dev_fail(t, "backward");
		return 0;
	}
	if ((W = param_f32(t, 2 * u)) == NULL)
		return missing_param(t, 2 * u);
	mlp_backward_unit(&t->work, u, W, gW, gb);
	return 0;
}

/* Backward in reverse unit order, adding into the runtime's gradients. */
static int backward(struct trainer *t)
{
	dpg_status_t st;

	for (int u = MLP_NUNITS - 1; u >= 0; u--) {
		float *gW, *gb;

		if ((st = dpg_zero_gather(t->z, u, u - 1)) != DPG_OK)
			return fail(t, st);
		gW = dpg_zero_grad(t->z, t->id[2 * u]);
		gb = dpg_zero_grad(t->z, t->id[2 * u + 1]);
		if (gW == NULL || gb == NULL) {
			t->broken = 1;
			fprintf(stderr, "train: rank %d: no gradient buffer for unit %d: %s\n",
				t->rank, u, dpg_last_error(t->ctx)[0] ? dpg_last_error(t->ctx) :
				"out of memory");
			return 1;
		}
		if (backward_unit(t, u, gW, gb) != 0)
			return 1;
		if ((st = dpg_zero_grads_ready(t->z, u)) != DPG_OK ||
		    (st = dpg_zero_release(t->z, u)) != DPG_OK)
			return fail(t, st);
	}
	return 0;
}

/* One optimizer step (0-based index s): k micro-steps, then the update.
 * *loss_sum gets this rank's summed per-sample loss. */
static int train_step(struct trainer *t, long s, double *loss_sum, dpg_step_stats_t *stats)
{
	const struct cfg *c = &t->cfg;
	float lr = dpg_lr_warmup_cosine(s, c->warmup, c->steps, c->lr, c->lr * 0.1f);
	dpg_status_t st;

	st = dpg_shard_batch(t->shuffle_seed, c->samples, c->global_batch, s, t->rank,
			     t->world, t->idx);
	if (st != DPG_OK)
		return fail(t, st);
	*loss_sum = 0.0;
	for (int m = 0; m < t->k; m++) {
		double sum = 0.0;

		mlp_load_batch(&t->data, &t->work, t->idx + (size_t)m * c->micro_batch,
			       (int)c->micro_batch);
		if (forward(t) != 0 || loss(t, &sum) != 0)
			return 1;
		*loss_sum += sum;
		if (backward(t) != 0)
			return 1;
		if ((st = dpg_zero_step(t->z, lr, stats)) != DPG_OK)
			return fail(t, st);
	}
	if (!stats->stepped) {
		t->broken = 1;
		fprintf(stderr, "train: rank %d: step %ld: the runtime did not step after %d "
			"micro-steps (accum_steps mismatch)\n", t->rank, s + 1, t->k);
		return 1;
	}
	return 0;
}

/* ------------------------------------------------------------ checkpoints */

/* The extra bytes of a checkpoint: magic, then little-endian u64 fields. */
#define EXTRA_MAGIC "dpgtrn01"
enum { X_STEP, X_DATA_SEED, X_NEXT_STEP, X_GLOBAL_BATCH, X_SAMPLES, X_NFIELDS };
#define EXTRA_LEN (8 + 8 * X_NFIELDS)

static void put_u64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static int save(struct trainer *t, long done)
{
	unsigned char x[EXTRA_LEN];
	double t0 = now_s();
	dpg_status_t st;

	memcpy(x, EXTRA_MAGIC, 8);
	put_u64(x + 8 + 8 * X_STEP, (uint64_t)done);
	put_u64(x + 8 + 8 * X_DATA_SEED, t->cfg.seed);
	put_u64(x + 8 + 8 * X_NEXT_STEP, (uint64_t)done);
	put_u64(x + 8 + 8 * X_GLOBAL_BATCH, (uint64_t)t->cfg.global_batch);
	put_u64(x + 8 + 8 * X_SAMPLES, (uint64_t)t->cfg.samples);
	if ((st = dpg_zero_save(t->z, t->cfg.ckpt_dir, x, sizeof(x))) != DPG_OK)
		return fail(t, st);
	if (t->rank == 0)
		printf("saved step %ld to %s in %.3f s\n", done, t->cfg.ckpt_dir,
		       now_s() - t0);
	return 0;
}

/* The data order depends on the seed, the global batch and the dataset
 * size: a resumed run must use the checkpoint's (2 on a mismatch). */
static int check_extra(struct trainer *t, const unsigned char *x, size_t len)
{
	const struct cfg *c = &t->cfg;
	uint64_t seed, gb, ns, next;

	if (len != EXTRA_LEN || memcmp(x, EXTRA_MAGIC, 8) != 0) {
		fprintf(stderr, "train: rank %d: --resume: %s was not written by train (its extra "
			"data is not train's): use another --ckpt-dir\n", t->rank, c->ckpt_dir);
		return EXIT_USAGE;
	}
	seed = get_u64(x + 8 + 8 * X_DATA_SEED);
	gb = get_u64(x + 8 + 8 * X_GLOBAL_BATCH);
	ns = get_u64(x + 8 + 8 * X_SAMPLES);
	next = get_u64(x + 8 + 8 * X_NEXT_STEP);
	if (c->seed_given && seed != c->seed) {
		fprintf(stderr, "train: rank %d: --resume: %s was written with --seed %" PRIu64
			", this run has %" PRIu64 ": use the same seed (or omit --seed)\n", t->rank,
			c->ckpt_dir, seed, c->seed);
		return EXIT_USAGE;
	}
	if (gb != (uint64_t)c->global_batch || ns != (uint64_t)c->samples) {
		fprintf(stderr, "train: rank %d: --resume: %s was written with --global-batch %"
			PRIu64 " --samples %" PRIu64 ", this run has %ld and %ld: use the same "
			"values\n", t->rank, c->ckpt_dir, gb, ns, c->global_batch, c->samples);
		return EXIT_USAGE;
	}
	if (next > (uint64_t)c->steps) {
		fprintf(stderr, "train: rank %d: --resume: %s is at step %" PRIu64 ", beyond "
			"--steps %ld: ask for more steps\n", t->rank, c->ckpt_dir, next, c->steps);
		return EXIT_USAGE;
	}
	t->first_step = (long)next;
	if (use_seed(t, seed) != 0) {
		fprintf(stderr, "train: rank %d: out of memory for the dataset\n", t->rank);
		return 1;
	}
	return 0;
}

static int resume(struct trainer *t)
{
	unsigned char x[EXTRA_LEN + 64];
	size_t len = 0;
	dpg_status_t st;
	int rc;

	if ((st = dpg_zero_load(t->z, t->cfg.ckpt_dir, x, sizeof(x), &len)) != DPG_OK)
		return fail(t, st);
	if ((rc = check_extra(t, x, len)) != 0)
		return rc;
	if (t->rank == 0)
		printf("resumed from %s at step %ld (world %d)\n", t->cfg.ckpt_dir, t->first_step,
		       t->world);
	return 0;
}

/* ------------------------------------------------------------ output */

/* Rank 0 opens --print-params before training, so that a bad path fails
 * at once; every rank learns the outcome (collective): 0 or EXIT_USAGE. */
static int open_params_out(struct trainer *t)
{
	int32_t bad = 0;
	dpg_status_t st;

	if (t->rank == 0 && (t->params_out = fopen(t->cfg.print_params, "wb")) == NULL) {
		fprintf(stderr, "train: rank 0: --print-params %s: %s: choose a writable path\n",
			t->cfg.print_params, strerror(errno));
		bad = 1;
	}
	st = dpg_all_reduce(dpg_world(t->ctx), &bad, &bad, 1, DPG_I32, DPG_MAX, NULL);
	if (st != DPG_OK)
		return fail(t, st);
	return bad ? EXIT_USAGE : 0;
}

/* Tensor i's working parameters as fp32 in host memory into *out (on the
 * GPU: copied into scratch): 0, or 1 after a message. */
static int param_host(struct trainer *t, int i, const float **out)
{
	void *p = dpg_zero_param(t->z, t->id[i]);
	size_t n = mlp_numel(&t->shape, i), ps = t->cfg.param_dtype == DPG_BF16 ? 2 : 4;
	uint16_t *raw;

	if (t->dev_ops == NULL)
		return (*out = param_f32(t, i)) == NULL ? missing_param(t, i) : 0;
	if (p == NULL)
		return missing_param(t, i);
	if (dev_ready(t, p) != 0)
		return 1;
	*out = t->scratch[i];
	raw = ps == 4 ? (uint16_t *)(void *)t->scratch[i] : malloc(n * ps);
	if (raw == NULL) {
		fprintf(stderr, "train: rank %d: out of memory for --print-params\n", t->rank);
		return 1;
	}
	if (t->dev_ops->to_host(t->dev, raw, p, n * ps) != 0) {
		if (ps == 2)
			free(raw);
		return dev_fail(t, "--print-params");
	}
	if (ps == 2) {
		for (size_t j = 0; j < n; j++)
			t->scratch[i][j] = mlp_bf16_to_f32(raw[j]);
		free(raw);
	}
	return 0;
}

/* Rank 0 writes the working parameters as raw float32 and closes the file;
 * every rank takes part in the stage-3 gathers. */
static int print_params(struct trainer *t)
{
	FILE *f = t->params_out;
	int bad = 0;
	dpg_status_t st;

	for (int u = 0; u < MLP_NUNITS; u++) {
		if ((st = dpg_zero_gather(t->z, u, -1)) != DPG_OK)
			return fail(t, st);
		for (int i = 2 * u; i < 2 * u + 2 && f; i++) {
			const float *p;
			size_t n = mlp_numel(&t->shape, i);

			if (param_host(t, i, &p) != 0)
				return 1;
			if (fwrite(p, sizeof(float), n, f) != n)
				bad = 1;
		}
		if ((st = dpg_zero_release(t->z, u)) != DPG_OK)
			return fail(t, st);
	}
	t->params_out = NULL;
	if (f && fclose(f) != 0)
		bad = 1;
	if (bad)
		fprintf(stderr, "train: rank 0: --print-params %s: write failed: check the disk\n",
			t->cfg.print_params);
	return bad;
}

static const char *stage_name(int stage)
{
	static const char *const n[] = { "?", "1", "2", "3" };
	return stage >= 1 && stage <= 3 ? n[stage] : n[0];
}

/* ------------------------------------------------------------ the loop */

struct progress {
	double t0, t_log;	/* start, last log line */
	long n_log;		/* steps since the last log line */
	long trained;		/* steps of this run */
	double last_loss;
};

/* The global mean loss of the step: sum over ranks / G (collective). */
static int global_loss(struct trainer *t, double local_sum, double *out)
{
	dpg_status_t st;
	double s = local_sum;

	if ((st = dpg_all_reduce(dpg_world(t->ctx), &s, &s, 1, DPG_F64, DPG_SUM, NULL)) != DPG_OK)
		return fail(t, st);
	*out = s / (double)t->cfg.global_batch;
	return 0;
}

static void log_step(struct trainer *t, struct progress *p, long done, double loss,
		     const dpg_step_stats_t *stats)
{
	const struct cfg *c = &t->cfg;
	double now = now_s(), dt = now - p->t_log;
	float lr = dpg_lr_warmup_cosine(done - 1, c->warmup, c->steps, c->lr, c->lr * 0.1f);

	if (t->rank == 0) {
		printf("step %ld/%ld loss %.6f lr %.1e grad_norm %.3f samples/s %.0f\n", done,
		       c->steps, loss, (double)lr, stats->grad_norm,
		       dt > 0 ? (double)p->n_log * (double)c->global_batch / dt : 0.0);
		fflush(stdout);
	}
	p->t_log = now;
	p->n_log = 0;
}

/* Save, then requeue (libdpg(3), "Requeue"): every step all ranks ask
 * together whether a signal (Slurm's warning before the time limit, or
 * preemption) arrived; if so they save this step and leave with
 * DPG_EXIT_REQUEUE, which the batch script turns into a requeue; the next
 * run's --resume goes on from this step.  0 = go on. */
static int stop_here(struct trainer *t, long done)
{
	const struct cfg *c = &t->cfg;
	dpg_status_t st;
	int stop = 0;

	if ((st = dpg_stop_requested(t->ctx, &stop)) != DPG_OK)
		return fail(t, st);
	if (!stop)
		return 0;
	if (c->ckpt_dir == NULL) {
		if (t->rank == 0)
			fprintf(stderr, "train: stop requested at step %ld without "
				"--ckpt-dir: nothing saved, the requeued job starts "
				"over\n", done);
	} else if (!(c->save_every > 0 && done % c->save_every == 0) &&
		   save(t, done) != 0) {
		return 1;
	}
	if (t->rank == 0) {
		printf("stopped at step %ld: exit %d (requeue me)\n", done,
		       DPG_EXIT_REQUEUE);
		fflush(stdout);
	}
	return DPG_EXIT_REQUEUE;
}

static int run(struct trainer *t)
{
	const struct cfg *c = &t->cfg;
	long end = c->stop_after > 0 ? c->stop_after : c->steps;
	struct progress p = { now_s(), 0, 0, 0, NAN };
	int rc;

	p.t_log = p.t0;
	for (long s = t->first_step; s < end; s++) {
		dpg_step_stats_t stats;
		dpg_status_t st;
		double local = 0.0, loss = 0.0;
		long done = s + 1;
		int last = done == end;

		if (train_step(t, s, &local, &stats) != 0)
			return 1;
		/* the end of a step: with DPG_REPORT=N, rank 0 prints every N
		 * steps the rank the others waited for (libdpg(3), "Straggler
		 * report") */
		if ((st = dpg_step_mark(t->ctx)) != DPG_OK)
			return fail(t, st);
		p.n_log++;
		p.trained++;
		if (done % c->log_every == 0 || last || done == 1) {	/* the starting loss too */
			if (global_loss(t, local, &loss) != 0)
				return 1;
			log_step(t, &p, done, loss, &stats);
			p.last_loss = loss;
		}
		if (c->save_every > 0 && done % c->save_every == 0 && save(t, done) != 0)
			return 1;
		if (!last && (rc = stop_here(t, done)) != 0)
			return rc;
	}
	if (c->print_params && print_params(t) != 0)
		return 1;
	if (t->rank == 0) {
		double dt = now_s() - p.t0;
		printf("done: steps %ld final_loss %.6f samples/s %.0f world %d stage %s\n", end,
		       p.last_loss, dt > 0 ? (double)p.trained * (double)c->global_batch / dt : 0.0,
		       t->world, stage_name(c->stage));
	}
	return 0;
}

/* The backend to ask dpg_init for: the environment's (DPG_BACKEND; auto
 * takes NCCL when the task has a GPU), but the CPU's for --deterministic
 * (CPU only) and, unless DPG_BACKEND=nccl, when there is no device module
 * to follow the model onto the GPU.  t->dev_path gets the module's path. */
static dpg_backend_t want_backend(struct trainer *t)
{
	const char *env = getenv("DPG_BACKEND");

	if (t->cfg.deterministic)
		return DPG_BACKEND_CPU;
	if (mlp_dev_find(t->dev_path, sizeof(t->dev_path)) == NULL) {
		t->dev_path[0] = '\0';
		if (env == NULL || strcasecmp(env, "nccl") != 0)
			return DPG_BACKEND_CPU;
	}
	return DPG_BACKEND_AUTO;
}

/* On the NCCL backend the model follows onto the GPU: load the device
 * module.  0, or 1 after a message. */
static int use_gpu(struct trainer *t)
{
	char msg[512];

	if (dpg_backend(t->ctx) != DPG_BACKEND_NCCL)
		return 0;
	if (t->dev_path[0] == '\0') {
		fprintf(stderr, "train: rank %d: the NCCL backend keeps the parameters on the GPU "
			"but %s is not beside train (built without nvcc or cuBLAS?) nor named by "
			"DPG_MLP_CUDA_MODULE: set DPG_BACKEND=cpu to train on the host\n", t->rank,
			MLP_DEV_FILE);
		return 1;
	}
	if ((t->dev_ops = mlp_dev_load(t->dev_path, msg, sizeof(msg))) == NULL) {
		fprintf(stderr, "train: rank %d: %s: set DPG_BACKEND=cpu to train on the host\n",
			t->rank, msg);
		return 1;
	}
	if (t->rank == 0)
		printf("forward and backward on the GPU (%s, %s)\n", t->dev_path,
		       t->dev_ops->built_with);
	return 0;
}

/* Join, build the model, set or load its parameters: 0, or an exit code. */
static int setup(struct trainer *t)
{
	dpg_init_opts_t opts;
	dpg_status_t st;
	int rc;

	dpg_init_opts_default(&opts);
	opts.backend = want_backend(t);
	if ((st = dpg_init(&opts, &t->ctx)) != DPG_OK)
		return fail(t, st);
	t->rank = dpg_rank(t->ctx);
	t->world = dpg_world_size(t->ctx);
	if (use_gpu(t) != 0) {
		t->broken = 1;
		return 1;
	}
	if ((st = dpg_accum_steps(t->ctx, t->cfg.global_batch, t->cfg.micro_batch, t->world,
				  &t->k)) != DPG_OK) {
		(void)fail(t, st);
		return EXIT_USAGE;
	}
	if (alloc_host(t) != 0 || use_seed(t, t->cfg.seed) != 0) {
		fprintf(stderr, "train: rank %d: out of memory for the model's host buffers "
			"(--micro-batch %ld): use a smaller micro batch\n", t->rank,
			t->cfg.micro_batch);
		return 1;
	}
	if ((st = create_model(t)) != DPG_OK) {
		(void)fail(t, st);
		return st == DPG_ERR_INVALID ? EXIT_USAGE : 1;	/* e.g. --shard-size */
	}
	if (t->cfg.print_params && (rc = open_params_out(t)) != 0)
		return rc;
	if (t->cfg.resume)
		return resume(t);
	if ((st = init_params(t)) != DPG_OK)
		return fail(t, st);
	return 0;
}

int main(int argc, char **argv)
{
	struct trainer t;
	int rc;

	memset(&t, 0, sizeof(t));
	rc = parse_args(argc, argv, &t.cfg);
	if (rc != 0)
		return rc > 0 ? 0 : EXIT_USAGE;
	t.shape = mlp_default_shape();
	rc = setup(&t);
	if (rc == 0)
		rc = run(&t);
	/* A failure amid collective work ends the job: dpg_abort makes
	 * dpg_finalize skip its goodbye barrier, which would wait DPG_TIMEOUT
	 * for a dead peer or for ranks still blocked in a collective with this
	 * one.  Errors every rank agrees on, and a local one after the last
	 * collective (--print-params), leave together through the barrier. */
	if (t.broken && t.ctx && t.world > 1)
		dpg_abort(t.ctx);
	if (t.dev)
		t.dev_ops->destroy(t.dev);
	if (t.z)
		dpg_zero_destroy(t.z);
	free_host(&t);
	if (t.params_out)
		fclose(t.params_out);	/* an error before the end: leave it partial */
	if (dpg_finalize(t.ctx) != DPG_OK && rc == 0) {
		fprintf(stderr, "train: rank %d: dpg_finalize failed\n", t.rank);
		rc = 1;
	}
	return rc;
}

/* ------------------------------------------------------------ the command line */

static void cfg_default(struct cfg *c)
{
	memset(c, 0, sizeof(*c));
	c->steps = 100;
	c->global_batch = 64;
	c->micro_batch = 8;
	c->stage = 1;
	c->optimizer = DPG_OPT_ADAMW;
	c->lr = 3e-3f;
	c->warmup = 10;
	c->clip = 0.0f;
	c->seed = 1;
	c->samples = 8192;
	c->log_every = 10;
	c->param_dtype = DPG_F32;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: train [options]   (joins the job from its environment: srun, torchrun names, or alone)\n"
		"  Where it computes: on the backend of DPG_BACKEND (default auto: NCCL when the task\n"
		"  has a GPU).  On NCCL the parameters, gradients and optimizer state live on the\n"
		"  GPU, NCCL reduces them, and forward and backward run there too (cuBLAS and\n"
		"  kernels of train's module " MLP_DEV_FILE ", found beside train or at\n"
		"  $DPG_MLP_CUDA_MODULE); the samples are generated on the host and copied.\n"
		"  Without a GPU, with DPG_BACKEND=cpu, with --deterministic, or (auto) without\n"
		"  the module: all on the CPU.\n"
		"  --steps N            optimizer steps (default 100)\n"
		"  --global-batch G     samples per optimizer step over all ranks (default 64)\n"
		"  --micro-batch B      samples per forward/backward (default 8); G must be a\n"
		"                       multiple of B x world: k = G / (B x world) accumulation steps\n"
		"  --stage 1|2|3        ZeRO stage (default 1)\n"
		"  --optimizer adamw|sgd  (default adamw; sgd uses momentum 0.9)\n"
		"  --lr X               peak learning rate (default 3e-3); cosine decay to lr/10\n"
		"  --warmup N           linear warm-up steps (default 10)\n"
		"  --clip X             clip the global gradient norm to X (default 0 = off)\n"
		"  --seed N             data, shuffle and initialization seed (default 1)\n"
		"  --samples N          dataset size (default 8192)\n"
		"  --ckpt-dir DIR       checkpoint directory\n"
		"  --save-every N       save a checkpoint every N steps (needs --ckpt-dir; 0 = never)\n"
		"  --resume             continue from DIR/latest of --ckpt-dir\n"
		"  --log-every N        rank 0 logs every N steps (default 10)\n"
		"  --param-dtype f32|bf16  working parameters (default f32; master copy is fp32)\n"
		"  --shard-size N       ranks per shard group (default 0 = the world; a divisor\n"
		"                       of the world = hybrid sharding)\n"
		"  --deterministic      bitwise-identical results at any world size for the same\n"
		"                       --micro-batch (fixed-point gradient sums; runs on the CPU)\n"
		"  --print-params FILE  rank 0 writes the final parameters as raw float32 (host byte\n"
		"                       order, tensors l1.weight l1.bias l2.weight l2.bias l3.weight l3.bias)\n"
		"  --stop-after N       stop after step N as if interrupted (the schedule still spans --steps)\n"
		"  --help               this text\n");
}

/* An integer in [lo, hi] for flag, or a one-line error and -1. */
static int parse_long(const char *flag, const char *s, long lo, long hi, long *out)
{
	char *end = NULL;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
		fprintf(stderr, "train: %s '%s': expected an integer from %ld to %ld\n", flag, s,
			lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

/* A finite number in [lo, hi] for flag, or a one-line error and -1. */
static int parse_float(const char *flag, const char *s, double lo, double hi, float *out)
{
	char *end = NULL;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v < lo || v > hi) {
		fprintf(stderr, "train: %s '%s': expected a number from %g to %g\n", flag, s, lo,
			hi);
		return -1;
	}
	*out = (float)v;
	return 0;
}

static int parse_seed(const char *s, uint64_t *out)
{
	char *end = NULL;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || s[0] == '+') {
		fprintf(stderr, "train: --seed '%s': expected an integer from 0 to %" PRIu64 "\n",
			s, UINT64_MAX);
		return -1;
	}
	*out = (uint64_t)v;
	return 0;
}

static int parse_word(const char *flag, const char *s, const char *a, const char *b)
{
	if (strcmp(s, a) == 0)
		return 0;
	if (strcmp(s, b) == 0)
		return 1;
	fprintf(stderr, "train: %s '%s': expected %s or %s\n", flag, s, a, b);
	return -1;
}

enum {
	O_STEPS = 256, O_GB, O_MB, O_STAGE, O_OPT, O_LR, O_WARMUP, O_CLIP, O_SEED,
	O_SAMPLES, O_CKPT, O_SAVE, O_RESUME, O_LOG, O_DTYPE, O_SHARD, O_PRINT, O_STOP, O_DET,
	O_HELP,
};

static const struct option long_opts[] = {
	{ "steps", required_argument, NULL, O_STEPS },
	{ "global-batch", required_argument, NULL, O_GB },
	{ "micro-batch", required_argument, NULL, O_MB },
	{ "stage", required_argument, NULL, O_STAGE },
	{ "optimizer", required_argument, NULL, O_OPT },
	{ "lr", required_argument, NULL, O_LR },
	{ "warmup", required_argument, NULL, O_WARMUP },
	{ "clip", required_argument, NULL, O_CLIP },
	{ "seed", required_argument, NULL, O_SEED },
	{ "samples", required_argument, NULL, O_SAMPLES },
	{ "ckpt-dir", required_argument, NULL, O_CKPT },
	{ "save-every", required_argument, NULL, O_SAVE },
	{ "resume", no_argument, NULL, O_RESUME },
	{ "log-every", required_argument, NULL, O_LOG },
	{ "param-dtype", required_argument, NULL, O_DTYPE },
	{ "shard-size", required_argument, NULL, O_SHARD },
	{ "print-params", required_argument, NULL, O_PRINT },
	{ "stop-after", required_argument, NULL, O_STOP },
	{ "deterministic", no_argument, NULL, O_DET },
	{ "help", no_argument, NULL, O_HELP },
	{ NULL, 0, NULL, 0 },
};

/* One option into c: 0, or -1 after a one-line error. */
static int apply_opt(struct cfg *c, int opt, const char *arg)
{
	long v = 0;
	int w;

	switch (opt) {
	case O_STEPS: return parse_long("--steps", arg, 1, 100000000L, &c->steps);
	case O_GB: return parse_long("--global-batch", arg, 1, 1L << 30, &c->global_batch);
	case O_MB: return parse_long("--micro-batch", arg, 1, 1L << 20, &c->micro_batch);
	case O_STAGE:
		if (parse_long("--stage", arg, 1, 3, &v) != 0)
			return -1;
		c->stage = (int)v;
		return 0;
	case O_OPT:
		if ((w = parse_word("--optimizer", arg, "adamw", "sgd")) < 0)
			return -1;
		c->optimizer = w == 0 ? DPG_OPT_ADAMW : DPG_OPT_SGD;
		return 0;
	case O_LR: return parse_float("--lr", arg, 1e-12, 1e3, &c->lr);
	case O_WARMUP: return parse_long("--warmup", arg, 0, 100000000L, &c->warmup);
	case O_CLIP: return parse_float("--clip", arg, 0.0, 1e30, &c->clip);
	case O_SEED:
		c->seed_given = 1;
		return parse_seed(arg, &c->seed);
	case O_SAMPLES: return parse_long("--samples", arg, 1, 1L << 40, &c->samples);
	case O_CKPT:
		if (arg[0] == '\0') {
			fprintf(stderr, "train: --ckpt-dir '': expected a directory name\n");
			return -1;
		}
		c->ckpt_dir = arg;
		return 0;
	case O_SAVE: return parse_long("--save-every", arg, 0, 100000000L, &c->save_every);
	case O_RESUME: c->resume = 1; return 0;
	case O_DET: c->deterministic = 1; return 0;
	case O_LOG: return parse_long("--log-every", arg, 1, 100000000L, &c->log_every);
	case O_DTYPE:
		if ((w = parse_word("--param-dtype", arg, "f32", "bf16")) < 0)
			return -1;
		c->param_dtype = w == 0 ? DPG_F32 : DPG_BF16;
		return 0;
	case O_SHARD:
		if (parse_long("--shard-size", arg, 0, 1L << 20, &v) != 0)
			return -1;
		c->shard_size = (int)v;
		return 0;
	case O_PRINT:
		if (arg[0] == '\0') {
			fprintf(stderr, "train: --print-params '': expected a file name\n");
			return -1;
		}
		c->print_params = arg;
		return 0;
	case O_STOP: return parse_long("--stop-after", arg, 1, 100000000L, &c->stop_after);
	default: return -1;
	}
}

/* Checks between flags: 0, or -1 after a one-line error. */
static int check_cfg(const struct cfg *c)
{
	if (c->global_batch > c->samples) {
		fprintf(stderr, "train: --global-batch %ld is larger than --samples %ld: use a "
			"global batch of at most the dataset size\n", c->global_batch, c->samples);
		return -1;
	}
	if ((c->save_every > 0 || c->resume) && c->ckpt_dir == NULL) {
		fprintf(stderr, "train: --%s needs --ckpt-dir DIR\n",
			c->resume ? "resume" : "save-every");
		return -1;
	}
	if (c->stop_after > c->steps) {
		fprintf(stderr, "train: --stop-after %ld is beyond --steps %ld: use a step from 1 "
			"to %ld\n", c->stop_after, c->steps, c->steps);
		return -1;
	}
	return 0;
}

/* 0 run, 1 --help shown, -1 error shown. */
static int parse_args(int argc, char **argv, struct cfg *c)
{
	int opt;

	cfg_default(c);
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":", long_opts, NULL)) != -1) {
		if (opt == O_HELP) {
			usage(stdout);
			return 1;
		}
		if (opt == ':') {
			fprintf(stderr, "train: %s needs a value: see train --help\n",
				argv[optind - 1]);
			return -1;
		}
		if (opt == '?') {
			fprintf(stderr, "train: unknown option '%s': see train --help\n",
				argv[optind - 1]);
			return -1;
		}
		if (apply_opt(c, opt, optarg) != 0)
			return -1;
	}
	if (optind < argc) {
		fprintf(stderr, "train: unexpected argument '%s': see train --help\n", argv[optind]);
		return -1;
	}
	return check_cfg(c);
}
