/* SPDX-License-Identifier: BSD-3-Clause */
/* nccl_bench.c - one rank of the GPU collectives benchmark: dpg_allreduce,
 * dpg_reduce_scatter and dpg_all_gather through libdpg (NCCL backend)
 * against ncclAllReduce / ncclReduceScatter / ncclAllGather called directly
 * on the same device buffers and the same stream, interleaved.
 *
 * Run as the tasks of a job, one GPU each (RANK, WORLD_SIZE, LOCAL_RANK,
 * MASTER_ADDR, MASTER_PORT, DPG_SECRET, DPG_BACKEND=nccl in the environment;
 * bench/nccl_bench.sh does it), or alone for world 1:
 *   nccl_bench [MIN_BYTES [MAX_BYTES [ITERS [CSV_FILE]]]]
 * (defaults 4096, 1 GiB, 20; sizes double from MIN to MAX).  Each sample is
 * one call that returns when its work on the stream is done: libdpg's call
 * waits for it, the direct NCCL call is followed by cudaStreamSynchronize;
 * before each, both sides meet in a dpg_barrier.  The figure per rank is the
 * median of ITERS samples (after 3 warm-up calls), the reported one the
 * largest over the ranks.  Bus bandwidth as nccl-tests defines it (size =
 * the larger buffer's bytes, n ranks): all-reduce algbw x 2(n-1)/n,
 * reduce-scatter and all-gather algbw x (n-1)/n; at n = 1 it is 0 by that
 * definition, so the table gives algbw and the times too, and ratio =
 * nccl time / dpg time (= dpg busbw / nccl busbw; >= 1: dpg as fast).
 * Rank 0 prints the table (and writes CSV_FILE).
 * Exit status: 0 ran, 1 failed, 77 no GPU (prints "SKIPPED: no GPU (...)"). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* nccl.h and cuda_runtime.h declare some functions without prototypes */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cuda_runtime.h>
#include <nccl.h>
#pragma GCC diagnostic pop

#include "dpg.h"

#define WARMUP 3

enum op { OP_ALLREDUCE, OP_REDUCE_SCATTER, OP_ALL_GATHER, OP_COUNT };
static const char *const op_name[OP_COUNT] = { "allreduce", "reduce_scatter", "all_gather" };

struct bench {
	dpg_ctx_t *ctx;
	dpg_comm_t *world;
	ncclComm_t nccl;
	cudaStream_t stream;
	int rank, n;
	void *send, *recv;	/* device, max_bytes each */
	size_t min_bytes, max_bytes;
	int iters;
	double *samples;	/* iters */
	FILE *csv;
};

static void die(const struct bench *b, const char *what, const char *why)
{
	fprintf(stderr, "nccl_bench: rank %d: %s: %s\n", b ? b->rank : -1, what, why);
	exit(1);
}

static void cu(const struct bench *b, const char *what, cudaError_t e)
{
	if (e != cudaSuccess)
		die(b, what, cudaGetErrorString(e));
}

static void nc(const struct bench *b, const char *what, ncclResult_t r)
{
	if (r != ncclSuccess)
		die(b, what, ncclGetErrorString(r));
}

static void dp(const struct bench *b, const char *what, dpg_status_t st)
{
	if (st != DPG_OK)
		die(b, what, b && b->ctx ? dpg_last_error(b->ctx) : dpg_strerror(st));
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static size_t parse_size(const char *s, size_t dflt)
{
	char *end;
	unsigned long long v;

	if (s == NULL)
		return dflt;
	v = strtoull(s, &end, 10);
	switch (*end) {
	case 'K': case 'k': v <<= 10; end++; break;
	case 'M': case 'm': v <<= 20; end++; break;
	case 'G': case 'g': v <<= 30; end++; break;
	default: break;
	}
	if (*end != '\0' || v == 0) {
		fprintf(stderr, "nccl_bench: bad size '%s' (bytes, optional K/M/G)\n", s);
		exit(2);
	}
	return (size_t)v;
}

/* 77 unless CUDA sees a device: asked before libdpg touches CUDA */
static void need_gpu(void)
{
	int count = 0;
	cudaError_t e = cudaGetDeviceCount(&count);

	if (e != cudaSuccess || count < 1) {
		printf("SKIPPED: no GPU (CUDA: %s)\n",
		       e != cudaSuccess ? cudaGetErrorString(e) : "no device");
		exit(77);
	}
}

/* ---------------------------------------------------------------- setup */

static int local_rank(void)
{
	const char *s = getenv("LOCAL_RANK");

	return s != NULL ? atoi(s) : 0;
}

/* libdpg on NCCL, on device LOCAL_RANK, then a direct NCCL communicator
 * over the same ranks (rank 0's unique id shared through libdpg) */
static void setup_comms(struct bench *b)
{
	dpg_init_opts_t o;
	ncclUniqueId id;
	void *all = NULL;
	size_t *offs = NULL, *lens = NULL;
	int dev = local_rank();

	cu(b, "cudaSetDevice", cudaSetDevice(dev));
	dpg_init_opts_default(&o);
	o.backend = DPG_BACKEND_NCCL;
	o.device = dev;
	dp(b, "dpg_init", dpg_init(&o, &b->ctx));
	b->world = dpg_world(b->ctx);
	b->rank = dpg_rank(b->ctx);
	b->n = dpg_world_size(b->ctx);
	memset(&id, 0, sizeof(id));
	if (b->rank == 0)
		nc(b, "ncclGetUniqueId", ncclGetUniqueId(&id));
	dp(b, "dpg_all_gather_bytes",
	   dpg_all_gather_bytes(b->world, &id, sizeof(id), &all, &offs, &lens));
	if (lens[0] != sizeof(id))
		die(b, "the NCCL unique id", "rank 0 sent a wrong length");
	memcpy(&id, (char *)all + offs[0], sizeof(id));
	free(all);
	free(offs);
	free(lens);
	nc(b, "ncclCommInitRank", ncclCommInitRank(&b->nccl, b->n, id, b->rank));
	cu(b, "cudaStreamCreate", cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking));
}

static void setup_buffers(struct bench *b)
{
	cu(b, "cudaMalloc", cudaMalloc(&b->send, b->max_bytes));
	cu(b, "cudaMalloc", cudaMalloc(&b->recv, b->max_bytes));
	cu(b, "cudaMemset", cudaMemset(b->send, 0, b->max_bytes));
	cu(b, "cudaMemset", cudaMemset(b->recv, 0, b->max_bytes));
	b->samples = calloc((size_t)b->iters, sizeof(double));
	if (b->samples == NULL)
		die(b, "calloc", "out of memory");
}

/* ---------------------------------------------------------------- one call */

/* the element count of op at size bytes (the larger buffer's): the whole
 * buffer for all-reduce, one rank's block for the others */
static size_t count_of(const struct bench *b, enum op op, size_t bytes)
{
	size_t elems = bytes / sizeof(float);

	return op == OP_ALLREDUCE ? elems : elems / (size_t)b->n;
}

static void call_dpg(struct bench *b, enum op op, size_t count)
{
	dpg_status_t st = DPG_OK;

	switch (op) {
	case OP_ALLREDUCE:
		st = dpg_allreduce(b->world, b->send, b->recv, count, DPG_F32, DPG_SUM, b->stream);
		break;
	case OP_REDUCE_SCATTER:
		st = dpg_reduce_scatter(b->world, b->send, b->recv, count, DPG_F32, DPG_SUM,
					b->stream);
		break;
	default:
		st = dpg_all_gather(b->world, b->send, b->recv, count, DPG_F32, b->stream);
		break;
	}
	dp(b, op_name[op], st);
}

static void call_nccl(struct bench *b, enum op op, size_t count)
{
	ncclResult_t r;

	switch (op) {
	case OP_ALLREDUCE:
		r = ncclAllReduce(b->send, b->recv, count, ncclFloat32, ncclSum, b->nccl,
				  b->stream);
		break;
	case OP_REDUCE_SCATTER:
		r = ncclReduceScatter(b->send, b->recv, count, ncclFloat32, ncclSum, b->nccl,
				      b->stream);
		break;
	default:
		r = ncclAllGather(b->send, b->recv, count, ncclFloat32, b->nccl, b->stream);
		break;
	}
	nc(b, op_name[op], r);
	cu(b, "cudaStreamSynchronize", cudaStreamSynchronize(b->stream));
}

/* one timed call (after a barrier) in microseconds */
static double timed(struct bench *b, int use_dpg, enum op op, size_t count)
{
	double t0;

	dp(b, "dpg_barrier", dpg_barrier(b->world));
	t0 = now_us();
	if (use_dpg)
		call_dpg(b, op, count);
	else
		call_nccl(b, op, count);
	return now_us() - t0;
}

/* the largest over the ranks of this rank's value */
static double max_over_ranks(struct bench *b, double v)
{
	void *all = NULL;
	size_t *offs = NULL, *lens = NULL;
	double m = v, x;

	dp(b, "dpg_all_gather_bytes",
	   dpg_all_gather_bytes(b->world, &v, sizeof(v), &all, &offs, &lens));
	for (int r = 0; r < b->n; r++) {
		memcpy(&x, (char *)all + offs[r], sizeof(x));
		if (x > m)
			m = x;
	}
	free(all);
	free(offs);
	free(lens);
	return m;
}

/* medians (max over ranks) of dpg's and NCCL's call at count, interleaved:
 * odd samples run NCCL first */
static void measure(struct bench *b, enum op op, size_t count, double *t_dpg, double *t_nccl)
{
	double *nccl_s = malloc((size_t)b->iters * sizeof(double));

	if (nccl_s == NULL)
		die(b, "malloc", "out of memory");
	for (int i = 0; i < WARMUP; i++) {
		call_dpg(b, op, count);
		call_nccl(b, op, count);
	}
	for (int i = 0; i < b->iters; i++) {
		if (i % 2) {
			nccl_s[i] = timed(b, 0, op, count);
			b->samples[i] = timed(b, 1, op, count);
		} else {
			b->samples[i] = timed(b, 1, op, count);
			nccl_s[i] = timed(b, 0, op, count);
		}
	}
	qsort(b->samples, (size_t)b->iters, sizeof(double), cmp_d);
	qsort(nccl_s, (size_t)b->iters, sizeof(double), cmp_d);
	*t_dpg = max_over_ranks(b, b->samples[b->iters / 2]);
	*t_nccl = max_over_ranks(b, nccl_s[b->iters / 2]);
	free(nccl_s);
}

/* ---------------------------------------------------------------- report */

static double bus_factor(const struct bench *b, enum op op)
{
	double n = b->n;

	return op == OP_ALLREDUCE ? 2.0 * (n - 1) / n : (n - 1) / n;
}

static void size_label(size_t bytes, char *out, size_t cap)
{
	if (bytes >= (1u << 30) && bytes % (1u << 30) == 0)
		snprintf(out, cap, "%zu GiB", bytes >> 30);
	else if (bytes >= (1u << 20) && bytes % (1u << 20) == 0)
		snprintf(out, cap, "%zu MiB", bytes >> 20);
	else if (bytes >= 1024 && bytes % 1024 == 0)
		snprintf(out, cap, "%zu KiB", bytes >> 10);
	else
		snprintf(out, cap, "%zu B", bytes);
}

static void report(struct bench *b, enum op op, size_t bytes, double td, double tn)
{
	double ad = (double)bytes / td / 1e3, an = (double)bytes / tn / 1e3;	/* GB/s */
	double f = bus_factor(b, op);
	char lab[32];

	if (b->rank != 0)
		return;
	size_label(bytes, lab, sizeof(lab));
	printf("| %s | %s | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f | %.3f |\n", op_name[op], lab,
	       td, tn, ad, an, ad * f, an * f, tn / td);
	fflush(stdout);
	if (b->csv != NULL)
		fprintf(b->csv, "%s,%zu,%d,%.3f,%.3f,%.4f,%.4f,%.4f,%.4f,%.4f\n", op_name[op],
			bytes, b->n, td, tn, ad, an, ad * f, an * f, tn / td);
}

static void header(const struct bench *b)
{
	int dev = 0;
	struct cudaDeviceProp p;

	if (b->rank != 0)
		return;
	cu(b, "cudaGetDevice", cudaGetDevice(&dev));
	cu(b, "cudaGetDeviceProperties", cudaGetDeviceProperties(&p, dev));
	printf("nccl_bench: world %d, one GPU per rank (rank 0: %s), NCCL %d.%d.%d, f32 sum, "
	       "median of %d calls (max over ranks), %zu..%zu bytes\n", b->n, p.name,
	       NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, b->iters, b->min_bytes, b->max_bytes);
	printf("\n| op | size | dpg us | nccl us | dpg algbw GB/s | nccl algbw GB/s "
	       "| dpg busbw GB/s | nccl busbw GB/s | nccl/dpg time |\n");
	printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
	if (b->csv != NULL)
		fprintf(b->csv, "op,bytes,world,dpg_us,nccl_us,dpg_algbw_GBps,nccl_algbw_GBps,"
			"dpg_busbw_GBps,nccl_busbw_GBps,ratio\n");
}

static void run_all(struct bench *b)
{
	header(b);
	for (int op = 0; op < OP_COUNT; op++) {
		for (size_t bytes = b->min_bytes; bytes <= b->max_bytes; bytes *= 2) {
			size_t count = count_of(b, (enum op)op, bytes);
			size_t eff = op == OP_ALLREDUCE ? count * sizeof(float)
							: count * sizeof(float) * (size_t)b->n;
			double td, tn;

			if (count == 0)
				continue;
			measure(b, (enum op)op, count, &td, &tn);
			report(b, (enum op)op, eff, td, tn);
		}
	}
}

int main(int argc, char **argv)
{
	struct bench b;

	memset(&b, 0, sizeof(b));
	b.min_bytes = parse_size(argc > 1 ? argv[1] : NULL, 4096);
	b.max_bytes = parse_size(argc > 2 ? argv[2] : NULL, (size_t)1 << 30);
	b.iters = argc > 3 ? atoi(argv[3]) : 20;
	if (b.iters < 1 || b.min_bytes > b.max_bytes) {
		fprintf(stderr, "usage: nccl_bench [MIN_BYTES [MAX_BYTES [ITERS [CSV_FILE]]]]\n");
		return 2;
	}
	need_gpu();
	setup_comms(&b);
	if (b.rank == 0 && argc > 4 && (b.csv = fopen(argv[4], "w")) == NULL)
		die(&b, argv[4], "cannot open for writing");
	setup_buffers(&b);
	run_all(&b);
	if (b.csv != NULL && fclose(b.csv) != 0)
		die(&b, argv[4], "write failed");
	cudaFree(b.send);
	cudaFree(b.recv);
	free(b.samples);
	nc(&b, "ncclCommDestroy", ncclCommDestroy(b.nccl));
	cudaStreamDestroy(b.stream);
	dp(&b, "dpg_finalize", dpg_finalize(&b.ctx));
	return 0;
}
