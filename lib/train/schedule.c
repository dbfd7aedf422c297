/* SPDX-License-Identifier: BSD-3-Clause */
/* schedule.c - the public training helpers of dpg_zero.h: the warm-up +
 * cosine learning rate, micro-steps per step, per-rank seeds, the batch. */

/* All but dpg_accum_steps are pure functions: they take no context, so a
 * failure cannot leave a message anywhere and the status alone says what
 * went wrong (DPG_ERR_INVALID: an argument out of its documented range;
 * DPG_ERR_NOMEM: the permutation could not be allocated). */
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "dpg_zero.h"
#include "runtime.h"

#define DPG_GOLDEN 0x9e3779b97f4a7c15ull	/* splitmix64's increment */
#define DPG_PI 3.14159265358979323846

/* splitmix64's finalizer: a bijection of 64-bit words, well mixed. */
static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* splitmix64: the next output of the generator whose state is *s. */
static uint64_t splitmix64(uint64_t *s)
{
	*s += DPG_GOLDEN;
	return mix64(*s);
}

/* Convention: warm-up step s (0-based) gets lr_max * (s + 1) / warmup, so
 * the first step already learns (lr_max / warmup) and step warmup - 1 is at
 * lr_max; warmup <= 0 means none.  From step warmup, cosine from lr_max at
 * step warmup to lr_min at step total, lr_min from then on; when total <=
 * warmup the cosine part is empty (warm-up, then lr_min).  A negative step
 * counts as step 0. */
float dpg_lr_warmup_cosine(long step, long warmup, long total, float lr_max,
			   float lr_min)
{
	double hi = lr_max, lo = lr_min;

	if (step < 0)
		step = 0;
	if (warmup > 0 && step < warmup)
		return (float)(hi * (double)(step + 1) / (double)warmup);
	if (warmup < 0)
		warmup = 0;
	if (step >= total)
		return lr_min;
	/* warmup <= step < total */
	double t = (double)(step - warmup) / (double)(total - warmup);

	return (float)(lo + 0.5 * (hi - lo) * (1.0 + cos(DPG_PI * t)));
}

/* The one helper with a context: its message goes there. */
dpg_status_t dpg_accum_steps(dpg_ctx_t *ctx, long global_batch, long micro_batch,
			     int dp_size, int *k)
{
	long per;

	if (!k || global_batch <= 0 || micro_batch <= 0 || dp_size <= 0) {
		if (ctx)
			dpg_ctx_seterr(ctx, "%s accum_steps: global batch %ld, micro batch %ld "
				       "and data-parallel size %d must all be positive",
				       dpg_ctx_who(ctx), global_batch, micro_batch, dp_size);
		return DPG_ERR_INVALID;
	}
	if (micro_batch > global_batch / dp_size || global_batch % dp_size != 0 ||
	    (global_batch / dp_size) % micro_batch != 0) {
		if (ctx)
			dpg_ctx_seterr(ctx, "%s accum_steps: global batch %ld is not a multiple "
				       "of micro batch %ld x data-parallel size %d (= %ld): "
				       "change the global or micro batch", dpg_ctx_who(ctx),
				       global_batch, micro_batch, dp_size,
				       micro_batch * (long)dp_size);
		return DPG_ERR_INVALID;
	}
	per = global_batch / dp_size / micro_batch;
	if (per > INT32_MAX)
		return DPG_ERR_INVALID;
	*k = (int)per;
	return DPG_OK;
}

/* The k-th output (k = rank in the high 32 bits, xor stream) of a
 * splitmix64 generator seeded from base.  For a fixed base the map is
 * injective in (rank, stream) while stream < 2^32 (and in stream alone for
 * any stream), since every step (xor, multiply by an odd constant, add,
 * mix64) is a bijection of the 64-bit key. */
uint64_t dpg_seed(uint64_t base, int rank, uint64_t stream)
{
	uint64_t key = ((uint64_t)(uint32_t)rank << 32) ^ stream;

	return mix64(mix64(base) + (key + 1) * DPG_GOLDEN);
}

/* A uniform integer in [0, bound), bound >= 1, without modulo bias. */
static uint64_t uniform_below(uint64_t *s, uint64_t bound)
{
	uint64_t limit = UINT64_MAX - UINT64_MAX % bound;	/* multiple of bound */
	uint64_t r;

	do
		r = splitmix64(s);
	while (r >= limit);
	return r % bound;
}

static int batch_args_ok(long n_samples, long global_batch, long step,
			 int dp_rank, int dp_size, const long *indices)
{
	return indices && dp_size > 0 && dp_rank >= 0 && dp_rank < dp_size &&
	       global_batch > 0 && global_batch % dp_size == 0 &&
	       global_batch <= n_samples && step >= 0 &&
	       (unsigned long)n_samples <= SIZE_MAX / sizeof(long);
}

/* Fisher-Yates of [0, n_samples) from a generator seeded by (seed, epoch),
 * run only as far as position end (positions < end are final then). */
static long *epoch_permutation(uint64_t seed, long epoch, long n_samples, long end)
{
	long *perm = malloc((size_t)n_samples * sizeof(*perm));
	uint64_t s = mix64(seed) ^ mix64((uint64_t)epoch * DPG_GOLDEN + 0x2545f4914f6cdd1dull);

	if (!perm)
		return NULL;
	for (long i = 0; i < n_samples; i++)
		perm[i] = i;
	for (long i = 0; i < end && i < n_samples - 1; i++) {
		long j = i + (long)uniform_below(&s, (uint64_t)(n_samples - i));
		long t = perm[i];

		perm[i] = perm[j];
		perm[j] = t;
	}
	return perm;
}

dpg_status_t dpg_shard_batch(uint64_t seed, long n_samples, long global_batch,
			     long step, int dp_rank, int dp_size, long *indices)
{
	if (!batch_args_ok(n_samples, global_batch, step, dp_rank, dp_size, indices))
		return DPG_ERR_INVALID;

	long per_rank = global_batch / dp_size;
	long steps_per_epoch = n_samples / global_batch;	/* >= 1 */
	long epoch = step / steps_per_epoch;
	long first = (step % steps_per_epoch) * global_batch + (long)dp_rank * per_rank;
	long *perm = epoch_permutation(seed, epoch, n_samples, first + per_rank);

	if (!perm)
		return DPG_ERR_NOMEM;
	for (long k = 0; k < per_rank; k++)
		indices[k] = perm[first + k];
	free(perm);
	return DPG_OK;
}
