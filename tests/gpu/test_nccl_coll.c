/* SPDX-License-Identifier: BSD-3-Clause */
/* test_nccl_coll.c - collective correctness on the NCCL backend, through
 * the public API: N ranks as processes on this host, one GPU each (NCCL
 * allows one rank per device, so one GPU means N = 1).
 *
 *   test_nccl_coll [N]     N defaults to the number of visible GPUs (max 8);
 *                          more ranks than GPUs share them (share_gpus)
 *
 * Exit status: 0 all passed, 1 a check failed, 77 no GPU (skip). */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cuda_runtime.h>
#pragma GCC diagnostic pop

#include "sharegpu.h"
#include "dpg.h"
#include "dtype.h"	/* f16 / bf16 conversions */
#include "../unit/testenv.h"

#define SECRET "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

static int g_ngpu = 1;	/* the GPUs CUDA sees */
#define MAX_RANKS 8

static int g_rank, g_n, g_failed;

#define CHK(cond, ...)                                                      \
	do {                                                                \
		if (!(cond)) {                                              \
			fprintf(stderr, "rank %d: line %d: '%s' failed: ",  \
				g_rank, __LINE__, #cond);                   \
			fprintf(stderr, __VA_ARGS__);                       \
			fprintf(stderr, "\n");                              \
			g_failed++;                                         \
		}                                                           \
	} while (0)

#define OK(ctx, expr)                                                       \
	do {                                                                \
		dpg_status_t st_ = (expr);                                  \
		if (st_ != DPG_OK) {                                        \
			fprintf(stderr, "rank %d: line %d: %s -> %s: %s\n", \
				g_rank, __LINE__, #expr, dpg_strerror(st_), \
				dpg_last_error(ctx));                       \
			_exit(1);                                           \
		}                                                           \
	} while (0)

#define CU(expr)                                                            \
	do {                                                                \
		cudaError_t e_ = (expr);                                    \
		if (e_ != cudaSuccess) {                                    \
			fprintf(stderr, "rank %d: line %d: %s: %s\n", g_rank, \
				__LINE__, #expr, cudaGetErrorString(e_));   \
			_exit(1);                                           \
		}                                                           \
	} while (0)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Copy n host elements of size es to a fresh device buffer. */
static void *to_dev(const void *h, size_t bytes)
{
	void *d = NULL;

	CU(cudaMalloc(&d, bytes > 0 ? bytes : 1));
	if (bytes > 0 && h != NULL)
		CU(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
	else if (bytes > 0)	/* an output buffer: zeroed, so stale bytes fail */
		CU(cudaMemset(d, 0, bytes));
	return d;
}

static void from_dev(void *h, const void *d, size_t bytes)
{
	if (bytes > 0)
		CU(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
}

/* ------------------------------------------------------------ the checks */

static void check_allreduce(dpg_ctx_t *ctx, dpg_comm_t *w, cudaStream_t s)
{
	int n = g_n, r = g_rank;
	float f[5], fo[5];
	double d[3];
	int32_t i[2];
	int64_t l[2];
	uint16_t h[2], b[2];
	void *df, *dd, *di, *dl, *dh, *db, *dout;
	double sum1 = n * (n + 1) / 2.0;

	for (int k = 0; k < 5; k++)
		f[k] = (float)((r + 1) * (k + 1));
	df = to_dev(f, sizeof(f));
	dout = to_dev(NULL, sizeof(f));
	OK(ctx, dpg_allreduce(w, df, dout, 5, DPG_F32, DPG_SUM, s));
	from_dev(fo, dout, sizeof(fo));
	for (int k = 0; k < 5; k++)
		CHK(fo[k] == (float)(sum1 * (k + 1)), "f32 sum[%d] = %g", k, fo[k]);
	OK(ctx, dpg_allreduce(w, df, df, 5, DPG_F32, DPG_AVG, s));	/* in place */
	from_dev(fo, df, sizeof(fo));
	for (int k = 0; k < 5; k++)
		CHK(fabsf(fo[k] - (float)(sum1 / n * (k + 1))) < 1e-5f, "f32 avg[%d] = %g",
		    k, fo[k]);
	OK(ctx, dpg_allreduce(w, dout, df, 5, DPG_F32, DPG_MAX, NULL));	/* default stream */
	from_dev(fo, df, sizeof(fo));
	CHK(fo[0] == (float)sum1, "f32 max %g", fo[0]);

	d[0] = r;
	d[1] = -r;
	d[2] = 0.5;
	dd = to_dev(d, sizeof(d));
	OK(ctx, dpg_allreduce(w, dd, dd, 3, DPG_F64, DPG_MIN, s));
	from_dev(d, dd, sizeof(d));
	CHK(d[0] == 0 && d[1] == -(n - 1) && d[2] == 0.5, "f64 min %g %g %g", d[0],
	    d[1], d[2]);

	i[0] = r == 0 ? -7 : 0;
	i[1] = 3;
	di = to_dev(i, sizeof(i));
	OK(ctx, dpg_allreduce(w, di, di, 2, DPG_I32, DPG_AVG, s));
	from_dev(i, di, sizeof(i));
	CHK(i[0] == -7 / n && i[1] == 3, "i32 avg %d %d (want %d 3)", i[0], i[1],
	    -7 / n);

	l[0] = (int64_t)1 << 40;
	l[1] = r;
	dl = to_dev(l, sizeof(l));
	OK(ctx, dpg_allreduce(w, dl, dl, 2, DPG_I64, DPG_SUM, s));
	from_dev(l, dl, sizeof(l));
	CHK(l[0] == ((int64_t)n << 40) && l[1] == (int64_t)(n * (n - 1) / 2),
	    "i64 sum");

	h[0] = dpg_f32_to_f16(1.5f);
	h[1] = dpg_f32_to_f16((float)r);
	b[0] = dpg_f32_to_bf16(2.0f);
	b[1] = dpg_f32_to_bf16((float)r);
	dh = to_dev(h, sizeof(h));
	db = to_dev(b, sizeof(b));
	OK(ctx, dpg_allreduce(w, dh, dh, 2, DPG_F16, DPG_SUM, s));
	OK(ctx, dpg_allreduce(w, db, db, 2, DPG_BF16, DPG_MAX, s));
	from_dev(h, dh, sizeof(h));
	from_dev(b, db, sizeof(b));
	CHK(dpg_f16_to_f32(h[0]) == 1.5f * (float)n, "f16 sum %g",
	    dpg_f16_to_f32(h[0]));
	CHK(dpg_f16_to_f32(h[1]) == (float)(n * (n - 1) / 2), "f16 sum %g",
	    dpg_f16_to_f32(h[1]));
	CHK(dpg_bf16_to_f32(b[0]) == 2.0f && dpg_bf16_to_f32(b[1]) == (float)(n - 1),
	    "bf16 max %g %g", dpg_bf16_to_f32(b[0]), dpg_bf16_to_f32(b[1]));
	cudaFree(df);
	cudaFree(dout);
	cudaFree(dd);
	cudaFree(di);
	cudaFree(dl);
	cudaFree(dh);
	cudaFree(db);
}

static void check_rs_ag_bcast(dpg_ctx_t *ctx, dpg_comm_t *w, cudaStream_t s)
{
	int n = g_n, r = g_rank;
	int32_t in[MAX_RANKS * 3], out[MAX_RANKS * 3];
	void *din, *dout;

	/* reduce_scatter: block k of rank r holds k*10 + r; rank k gets
	 * sum_r (k*10 + r) for each of its 3 elements */
	for (int k = 0; k < n; k++)
		for (int e = 0; e < 3; e++)
			in[k * 3 + e] = k * 10 + r + e;
	din = to_dev(in, sizeof(int32_t) * 3 * (size_t)n);
	dout = to_dev(NULL, sizeof(int32_t) * 3 * (size_t)n);
	OK(ctx, dpg_reduce_scatter(w, din, dout, 3, DPG_I32, DPG_SUM, s));
	from_dev(out, dout, sizeof(int32_t) * 3);
	for (int e = 0; e < 3; e++)
		CHK(out[e] == n * (r * 10 + e) + n * (n - 1) / 2, "rs[%d] = %d", e,
		    out[e]);
	/* dpg's in place: send == recv, result at the start */
	OK(ctx, dpg_reduce_scatter(w, din, din, 3, DPG_I32, DPG_SUM, s));
	from_dev(out, din, sizeof(int32_t) * 3);
	for (int e = 0; e < 3; e++)
		CHK(out[e] == n * (r * 10 + e) + n * (n - 1) / 2, "rs in place[%d] = %d",
		    e, out[e]);

	/* all_gather of 3 elements per rank, out of place and in place */
	for (int e = 0; e < 3; e++)
		in[e] = 100 * r + e;
	CU(cudaMemcpy(din, in, sizeof(int32_t) * 3, cudaMemcpyHostToDevice));
	OK(ctx, dpg_all_gather(w, din, dout, 3, DPG_I32, s));
	from_dev(out, dout, sizeof(int32_t) * 3 * (size_t)n);
	for (int k = 0; k < n; k++)
		for (int e = 0; e < 3; e++)
			CHK(out[k * 3 + e] == 100 * k + e, "ag[%d][%d] = %d", k, e,
			    out[k * 3 + e]);
	OK(ctx, dpg_all_gather(w, din, din, 3, DPG_I32, s));
	from_dev(out, din, sizeof(int32_t) * 3 * (size_t)n);
	for (int k = 0; k < n; k++)
		for (int e = 0; e < 3; e++)
			CHK(out[k * 3 + e] == 100 * k + e, "ag in place[%d][%d] = %d", k,
			    e, out[k * 3 + e]);

	/* broadcast from the last rank */
	for (int e = 0; e < 3; e++)
		in[e] = r == n - 1 ? 7 + e : -1;
	CU(cudaMemcpy(din, in, sizeof(int32_t) * 3, cudaMemcpyHostToDevice));
	OK(ctx, dpg_broadcast(w, din, 3, DPG_I32, n - 1, s));
	from_dev(out, din, sizeof(int32_t) * 3);
	CHK(out[0] == 7 && out[1] == 8 && out[2] == 9, "bcast %d %d %d", out[0],
	    out[1], out[2]);
	OK(ctx, dpg_barrier(w));
	cudaFree(din);
	cudaFree(dout);
}

static void check_bytes_split_mesh(dpg_ctx_t *ctx, dpg_comm_t *w)
{
	int n = g_n, r = g_rank;
	char json[64];
	void *out = NULL;
	size_t *offs = NULL, *lens = NULL;
	dpg_comm_t *par = NULL;
	int32_t v = r, *dv;

	/* host bytes on an NCCL communicator (through the store) */
	snprintf(json, sizeof(json), "{\"rank\":%d}", r);
	OK(ctx, dpg_all_gather_bytes(w, json, r == 0 ? 0 : strlen(json), &out, &offs,
				     &lens));
	CHK(lens[0] == 0, "rank 0 sent nothing");
	for (int k = 1; k < n; k++) {
		char want[64];

		snprintf(want, sizeof(want), "{\"rank\":%d}", k);
		CHK(lens[k] == strlen(want) && memcmp((char *)out + offs[k], want,
						      lens[k]) == 0, "bytes of %d", k);
	}
	free(out);
	free(offs);
	free(lens);

	OK(ctx, dpg_comm_split(w, r % 2, r, &par));
	dv = to_dev(&v, sizeof(v));
	OK(ctx, dpg_allreduce(par, dv, dv, 1, DPG_I32, DPG_SUM, NULL));
	from_dev(&v, dv, sizeof(v));
	{
		int want = 0;

		for (int k = r % 2; k < n; k += 2)
			want += k;
		CHK(v == want, "parity group sum %d want %d", v, want);
	}
	OK(ctx, dpg_comm_destroy(par));
	/* the last rank in no part (ncclCommSplit's NCCL_SPLIT_NOCOLOR) */
	par = NULL;
	OK(ctx, dpg_comm_split(w, r == n - 1 ? -1 : 0, -r, &par));
	CHK((par == NULL) == (r == n - 1), "part of rank %d", r);
	if (par != NULL) {
		v = 1;
		CU(cudaMemcpy(dv, &v, sizeof(v), cudaMemcpyHostToDevice));
		OK(ctx, dpg_allreduce(par, dv, dv, 1, DPG_I32, DPG_SUM, NULL));
		from_dev(&v, dv, sizeof(v));
		CHK(v == n - 1, "part sum %d want %d", v, n - 1);
		/* key -r: the order is reversed */
		CHK(dpg_comm_rank(par) == n - 2 - r, "part rank %d", dpg_comm_rank(par));
		OK(ctx, dpg_comm_destroy(par));
	}
	if (n == 4) {
		int sizes[2] = { 2, 2 };
		dpg_mesh_t *mesh = NULL;

		OK(ctx, dpg_mesh_create(ctx, 2, sizes, &mesh));
		v = r;
		CU(cudaMemcpy(dv, &v, sizeof(v), cudaMemcpyHostToDevice));
		OK(ctx, dpg_allreduce(dpg_mesh_comm(mesh, 1), dv, dv, 1, DPG_I32,
				      DPG_SUM, NULL));
		from_dev(&v, dv, sizeof(v));
		CHK(v == (r / 2) * 4 + 1, "mesh inner sum %d", v);
		OK(ctx, dpg_mesh_destroy(mesh));
	}
	cudaFree(dv);
}

static void bandwidth(dpg_ctx_t *ctx, dpg_comm_t *w, cudaStream_t s)
{
	size_t count = (size_t)64 << 20;	/* 256 MiB of f32 */
	void *d;
	double t0, dt;
	int reps = 5;

	if (g_n < 2)
		return;
	CU(cudaMalloc(&d, count * sizeof(float)));
	CU(cudaMemset(d, 0, count * sizeof(float)));
	OK(ctx, dpg_allreduce(w, d, d, count, DPG_F32, DPG_SUM, s));
	t0 = now_s();
	for (int i = 0; i < reps; i++)
		OK(ctx, dpg_allreduce(w, d, d, count, DPG_F32, DPG_SUM, s));
	dt = (now_s() - t0) / reps;
	if (g_rank == 0)
		printf("allreduce 256 MiB f32 on %d GPUs: %.2f ms, algbw %.1f GB/s, "
		       "busbw %.1f GB/s\n", g_n, dt * 1e3,
		       (double)count * 4 / dt / 1e9,
		       (double)count * 4 / dt / 1e9 * 2 * (g_n - 1) / g_n);
	cudaFree(d);
}

struct aborter {
	dpg_ctx_t *ctx;
};

static void *abort_later(void *arg)
{
	usleep(500000);
	dpg_abort(((struct aborter *)arg)->ctx);
	return NULL;
}

/* a host function that holds its stream for 3 s */
static void CUDART_CB hold_stream(void *arg)
{
	(void)arg;
	sleep(3);
}

/* One GPU: the allreduce waits behind a stream held for 3 s by a host
 * function; a thread calls dpg_abort after 0.5 s and the call returns
 * DPG_ERR_ABORTED, and so does the next one.  Measured on an H100: it returns
 * when the hold ends (3.0 s), because ncclCommAbort waits for the work queued
 * ahead of NCCL's kernel; a kernel of NCCL's own that waits for a dead peer
 * is what ncclCommAbort stops at once, which takes two GPUs (the death
 * case).  So the bound here is the hold plus a second, not 0.5 s. */
static void check_abort_one(dpg_ctx_t *ctx, dpg_comm_t *w, cudaStream_t s)
{
	struct aborter a = { ctx };
	pthread_t th;
	void *d;
	double t0, dt;
	dpg_status_t st;

	CU(cudaMalloc(&d, 1024));
	CU(cudaLaunchHostFunc(s, hold_stream, NULL));
	pthread_create(&th, NULL, abort_later, &a);
	t0 = now_s();
	st = dpg_allreduce(w, d, d, 256, DPG_F32, DPG_SUM, s);
	dt = now_s() - t0;
	pthread_join(th, NULL);
	printf("rank 0: allreduce behind a held stream: %s after %.2f s: %s\n",
	       dpg_strerror(st), dt, dpg_last_error(ctx));
	CHK(st == DPG_ERR_ABORTED, "got %s", dpg_strerror(st));
	CHK(dt > 0.3 && dt < 4.0, "abort took %.2f s (the stream was held 3 s)", dt);
	st = dpg_allreduce(w, d, d, 256, DPG_F32, DPG_SUM, s);
	CHK(st == DPG_ERR_ABORTED, "a call after dpg_abort: %s", dpg_strerror(st));
	cudaStreamSynchronize(s);
	cudaFree(d);
}

/* rank 0 blocks in an allreduce the others skip; a thread aborts it */
static void check_abort(dpg_ctx_t *ctx, dpg_comm_t *w, cudaStream_t s)
{
	struct aborter a = { ctx };
	pthread_t th;
	void *d;
	double t0, dt;
	dpg_status_t st;

	if (g_n < 2) {
		check_abort_one(ctx, w, s);
		return;
	}
	OK(ctx, dpg_barrier(w));
	if (g_rank != 0) {
		/* skip it; rank 0's communicator is gone afterwards, so leave
		 * without the collective goodbye of ncclCommFinalize */
		sleep(3);
		dpg_abort(ctx);
		return;
	}
	CU(cudaMalloc(&d, 1024));
	pthread_create(&th, NULL, abort_later, &a);
	t0 = now_s();
	st = dpg_allreduce(w, d, d, 256, DPG_F32, DPG_SUM, s);
	dt = now_s() - t0;
	pthread_join(th, NULL);
	printf("rank 0: blocked NCCL allreduce: %s after %.2f s: %s\n",
	       dpg_strerror(st), dt, dpg_last_error(ctx));
	CHK(st == DPG_ERR_ABORTED, "got %s", dpg_strerror(st));
	CHK(dt < 5, "abort took %.1f s", dt);
	cudaFree(d);
}

/* The liveness watch (DPG_PEER_TIMEOUT=2): the last rank dies without a
 * word (_exit) while the others wait in an allreduce with DPG_TIMEOUT=120;
 * each survivor fails with DPG_ERR_PEER naming it within seconds, and
 * dpg_finalize returns at once. */
static void check_death(dpg_ctx_t *ctx, dpg_comm_t *w, cudaStream_t s)
{
	char want[32];
	double t0, dt;
	dpg_status_t st;
	void *d;

	OK(ctx, dpg_barrier(w));
	if (g_rank == g_n - 1)
		_exit(0);
	CU(cudaMalloc(&d, 1024));
	t0 = now_s();
	st = dpg_allreduce(w, d, d, 256, DPG_F32, DPG_SUM, s);
	dt = now_s() - t0;
	snprintf(want, sizeof(want), "rank %d ", g_n - 1);
	printf("rank %d: allreduce with a dead peer: %s after %.2f s: %s\n", g_rank,
	       dpg_strerror(st), dt, dpg_last_error(ctx));
	CHK(st == DPG_ERR_PEER, "got %s", dpg_strerror(st));
	CHK(strstr(dpg_last_error(ctx), want) != NULL, "'%s' not named", want);
	CHK(dt < 10, "noticed after %.1f s", dt);
	cudaFree(d);
	t0 = now_s();
	st = dpg_finalize(ctx);
	dt = now_s() - t0;
	printf("rank %d: dpg_finalize after the death: %s after %.2f s\n", g_rank,
	       dpg_strerror(st), dt);
	CHK(dt < 5, "dpg_finalize took %.1f s", dt);
	fflush(stdout);
	_exit(g_failed ? 1 : 0);
}

static void rank_main(int rank, int n, uint16_t port, bool death)
{
	dpg_ctx_t *ctx = NULL;
	dpg_comm_t *w;
	cudaStream_t s;
	char buf[32];

	g_rank = rank;
	g_n = n;
	snprintf(buf, sizeof(buf), "%d", rank);
	setenv("RANK", buf, 1);
	setenv("LOCAL_RANK", buf, 1);
	snprintf(buf, sizeof(buf), "%d", n);
	setenv("WORLD_SIZE", buf, 1);
	setenv("LOCAL_WORLD_SIZE", buf, 1);
	setenv("MASTER_ADDR", "127.0.0.1", 1);
	snprintf(buf, sizeof(buf), "%u", (unsigned)port);
	setenv("MASTER_PORT", buf, 1);
	setenv("DPG_SECRET", SECRET, 1);
	setenv("DPG_BACKEND", "nccl", 1);
	if (getenv("DPG_TIMEOUT") == NULL || death)
		setenv("DPG_TIMEOUT", "120", 1);
	if (death)
		setenv("DPG_PEER_TIMEOUT", "2", 1);
	share_gpus(rank, n, g_ngpu);

	OK(ctx, dpg_init(NULL, &ctx));
	CHK(dpg_backend(ctx) == DPG_BACKEND_NCCL, "backend %d", dpg_backend(ctx));
	w = dpg_world(ctx);
	/* the communicator is on device LOCAL_RANK % GPUs (LOCAL_RANK = rank
	 * here): so are the buffers */
	CU(cudaSetDevice(rank % g_ngpu));
	CU(cudaStreamCreate(&s));
	if (death)
		check_death(ctx, w, s);
	check_allreduce(ctx, w, s);
	check_rs_ag_bcast(ctx, w, s);
	check_bytes_split_mesh(ctx, w);
	bandwidth(ctx, w, s);
	check_abort(ctx, w, s);
	cudaStreamDestroy(s);
	dpg_finalize(ctx);
	if (g_failed == 0 && rank == 0)
		printf("rank 0: all NCCL checks passed on %d rank(s)\n", n);
	fflush(stdout);
	_exit(g_failed ? 1 : 0);
}

/* The device count, asked in a child: a parent that touched CUDA must not
 * fork ranks that use it. */
static int gpu_count(void)
{
	pid_t p = fork();
	int status;

	if (p == 0) {
		int n = 0;

		if (cudaGetDeviceCount(&n) != cudaSuccess)
			n = 0;
		_exit(n > 100 ? 100 : n);
	}
	if (p < 0 || waitpid(p, &status, 0) != p || !WIFEXITED(status))
		return 0;
	return WEXITSTATUS(status);
}

int main(int argc, char **argv)
{
	int ngpu = gpu_count(), n = argc > 1 ? atoi(argv[1]) : ngpu;
	bool death = argc > 2 && strcmp(argv[2], "death") == 0;
	pid_t pids[MAX_RANKS];
	uint16_t port = free_port();
	int failed = 0;

	if (ngpu < 1) {
		printf("SKIPPED: no NVIDIA GPU (CUDA sees no device)\n");
		return 77;
	}
	g_ngpu = ngpu;
	if (n > MAX_RANKS)
		n = MAX_RANKS;
	if (n < 1)
		n = 1;
	if (death && n < 2) {
		printf("SKIPPED: the dead-peer check needs 2 ranks\n");
		return 77;
	}
	if (n > ngpu)
		printf("note: %d ranks on %d GPU(s): each rank poses as its own host "
		       "(NCCL_HOSTID), NCCL's socket transport on loopback\n", n, ngpu);
	fflush(stdout);
	for (int r = 0; r < n; r++) {
		pids[r] = fork();
		if (pids[r] == 0)
			rank_main(r, n, port, death);
	}
	for (int r = 0; r < n; r++) {
		int status;

		if (waitpid(pids[r], &status, 0) != pids[r] || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0) {
			fprintf(stderr, "rank %d failed (status %#x)\n", r, status);
			failed++;
		}
	}
	printf("%s: NCCL %s on %d rank(s)\n", failed ? "FAIL" : "PASS",
	       death ? "dead-peer check" : "collectives", n);
	return failed ? 1 : 0;
}
