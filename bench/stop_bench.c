/* SPDX-License-Identifier: BSD-3-Clause */
/* stop_bench.c - what dpg_stop_requested (the once-per-step "stop?" question
 * of the requeue protocol) costs per call, next to dpg_barrier and a 4-byte
 * dpg_all_reduce on the same world.  Run by bench/stop_bench.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "dpg.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

enum what { STOP, BARRIER, ALLREDUCE };

static dpg_status_t once(dpg_ctx_t *ctx, enum what w)
{
	int stop = 0;
	int32_t v = 0;

	switch (w) {
	case STOP:
		return dpg_stop_requested(ctx, &stop);
	case BARRIER:
		return dpg_barrier(dpg_world(ctx));
	default:
		return dpg_all_reduce(dpg_world(ctx), &v, &v, 1, DPG_I32, DPG_MAX, NULL);
	}
}

/* Mean microseconds per call over iters calls (after iters / 10 warm-up). */
static int measure(dpg_ctx_t *ctx, enum what w, int iters, double *us)
{
	double t0;

	for (int i = 0; i < iters / 10 + 1; i++)
		if (once(ctx, w) != DPG_OK)
			return -1;
	if (dpg_barrier(dpg_world(ctx)) != DPG_OK)
		return -1;
	t0 = now_s();
	for (int i = 0; i < iters; i++)
		if (once(ctx, w) != DPG_OK)
			return -1;
	*us = (now_s() - t0) * 1e6 / iters;
	return 0;
}

int main(int argc, char **argv)
{
	static const char *names[] = { "dpg_stop_requested", "dpg_barrier",
				       "dpg_all_reduce 1 x i32 max" };
	int iters = argc > 1 ? atoi(argv[1]) : 2000;
	dpg_ctx_t *ctx = NULL;
	double us[3] = { 1e30, 1e30, 1e30 }, t;

	if (iters < 1 || dpg_init(NULL, &ctx) != DPG_OK) {
		fprintf(stderr, "stop_bench: %s\n", dpg_last_error(ctx));
		dpg_finalize(&ctx);
		return 1;
	}
	/* 3 interleaved rounds, the best of each: the machine may be shared */
	for (int round = 0; round < 3; round++) {
		for (int w = 0; w < 3; w++) {
			if (measure(ctx, (enum what)w, iters, &t) != 0) {
				fprintf(stderr, "stop_bench: %s\n", dpg_last_error(ctx));
				dpg_finalize(&ctx);
				return 1;
			}
			if (t < us[w])
				us[w] = t;
		}
	}
	if (dpg_rank(ctx) == 0)
		for (int w = 0; w < 3; w++)
			printf("%s %.2f\n", names[w], us[w]);
	return dpg_finalize(&ctx) == DPG_OK ? 0 : 1;
}
