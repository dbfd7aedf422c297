/* SPDX-License-Identifier: BSD-3-Clause */
/* coll_victim.c - e2e helper for tests/e2e/run.sh: a rank killed in the middle
 * of an allreduce; the others must fail fast and name it.
 *
 *   srun -N3 --ntasks-per-node=2 --dpg-gpus-per-task=0 -K0 \
 *       env DPG_E2E_VICTIM=3 DPG_E2E_DEATH=/shared/death DPG_TIMEOUT=20 coll_victim
 *
 * Every rank joins the job (dpg_init, CPU backend) and runs DPG_E2E_ITERS
 * (default 50) allreduces of DPG_E2E_COUNT floats (default 1M = 4 MiB), each
 * checked (sum of rank+1 + iteration).  The rank DPG_E2E_VICTIM (default: no
 * victim) starts a thread right before its allreduce #DPG_E2E_KILL_AT
 * (default 3) that waits DPG_E2E_KILL_DELAY_US (default 2000 us) while the
 * main thread is inside the allreduce, writes the CLOCK_REALTIME of its death
 * to DPG_E2E_DEATH (if set; on a file system every node sees) and raises
 * SIGKILL.  With DPG_E2E_HOLD_S=S (default 0) the other ranks spend S
 * seconds computing (sleeping) right before allreduce #DPG_E2E_KILL_AT,
 * printing "E2E-HOLD rank R for S s" before and "E2E-HELD rank R" after:
 * the victim dies while no survivor is inside a collective (fast fail:
 * only srun can end them before they wake).
 *
 * A straggler: the rank DPG_E2E_SLOW_RANK (default: none) computes (sleeps)
 * DPG_E2E_SLOW_US microseconds (default 0) more than the others right
 * before each allreduce.  Every rank marks each iteration as a step
 * (dpg_step_mark), so with DPG_REPORT=N rank 0 prints the straggler line
 * every N iterations (stderr).
 *
 * Output (stdout, one line each, parsed by run.sh):
 *   E2E-OK rank R host H iters N avg_ms X            all iterations passed
 *   E2E-FAIL rank R host H iter I status S call_s C at T: LAST_ERROR
 *       (S = dpg_strerror, C = seconds spent in the failing call, T =
 *       CLOCK_REALTIME when it returned, LAST_ERROR = dpg_last_error)
 *   E2E-EXIT rank R at T                             after dpg_finalize
 *   E2E-VICTIM rank R iter I dies at T               (the victim, just before)
 * Exit status: 0 all passed, 3 a collective failed, 4 wrong result,
 * 2 dpg_init failed (its error line: E2E-INIT-FAIL status S: LAST_ERROR). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <dpg.h>

static double now_real(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double now_mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static long env_long(const char *name, long def)
{
	const char *v = getenv(name);
	char *end;
	long x;

	if (v == NULL || *v == '\0')
		return def;
	x = strtol(v, &end, 10);
	if (*end != '\0') {
		fprintf(stderr, "coll_victim: %s='%s' is not a number\n", name, v);
		exit(2);
	}
	return x;
}

struct victim {
	int rank, iter;
	long delay_us;
	const char *death_file;
};

static void *killer(void *arg)
{
	struct victim *v = arg;
	double t;
	FILE *f;

	if (v->delay_us > 0)
		usleep((useconds_t)v->delay_us);
	t = now_real();
	if (v->death_file != NULL && (f = fopen(v->death_file, "w")) != NULL) {
		fprintf(f, "%.6f\n", t);
		fclose(f);
	}
	printf("E2E-VICTIM rank %d iter %d dies at %.6f\n", v->rank, v->iter, t);
	fflush(stdout);
	raise(SIGKILL);
	return NULL;
}

int main(void)
{
	long count = env_long("DPG_E2E_COUNT", 1L << 20);
	long iters = env_long("DPG_E2E_ITERS", 50);
	long victim = env_long("DPG_E2E_VICTIM", -1);
	long kill_at = env_long("DPG_E2E_KILL_AT", 3);
	long hold_s = env_long("DPG_E2E_HOLD_S", 0);
	long slow_rank = env_long("DPG_E2E_SLOW_RANK", -1);
	long slow_us = env_long("DPG_E2E_SLOW_US", 0);
	struct victim v = { .delay_us = env_long("DPG_E2E_KILL_DELAY_US", 2000),
			    .death_file = getenv("DPG_E2E_DEATH") };
	dpg_init_opts_t opts;
	dpg_ctx_t *ctx = NULL;
	dpg_status_t st;
	char host[64] = "?";
	double sum_ms = 0;
	float *buf;
	int rank, n;

	setvbuf(stdout, NULL, _IOLBF, 0);
	gethostname(host, sizeof(host));
	host[sizeof(host) - 1] = '\0';
	if (count < 1)
		count = 1;
	buf = malloc((size_t)count * sizeof(float));
	if (buf == NULL) {
		fprintf(stderr, "coll_victim: out of memory\n");
		return 2;
	}
	dpg_init_opts_default(&opts);
	opts.backend = DPG_BACKEND_CPU;
	st = dpg_init(&opts, &ctx);
	if (st != DPG_OK) {
		printf("E2E-INIT-FAIL host %s status %s: %s\n", host, dpg_strerror(st),
		       ctx != NULL ? dpg_last_error(ctx) : "(no context)");
		dpg_finalize(ctx);
		return 2;
	}
	rank = dpg_rank(ctx);
	n = dpg_world_size(ctx);
	for (long i = 0; i < iters; i++) {
		double t0, t1;
		float want = (float)n * (n + 1) / 2 + (float)n * (float)i;

		for (long k = 0; k < count; k++)
			buf[k] = (float)(rank + 1) + (float)i;
		if (rank == victim && i == kill_at) {
			pthread_t th;

			v.rank = rank;
			v.iter = (int)i;
			if (pthread_create(&th, NULL, killer, &v) != 0) {
				fprintf(stderr, "coll_victim: pthread_create failed\n");
				raise(SIGKILL);
			}
		}
		if (victim >= 0 && rank != victim && i == kill_at && hold_s > 0) {
			printf("E2E-HOLD rank %d for %ld s\n", rank, hold_s);
			sleep((unsigned)hold_s);
			printf("E2E-HELD rank %d\n", rank);
		}
		if (rank == slow_rank && slow_us > 0)
			usleep((useconds_t)slow_us);
		t0 = now_mono();
		st = dpg_allreduce(dpg_world(ctx), buf, buf, (size_t)count, DPG_F32,
				   DPG_SUM, NULL);
		t1 = now_mono();
		if (st == DPG_OK)
			st = dpg_step_mark(ctx);
		if (st != DPG_OK) {
			printf("E2E-FAIL rank %d host %s iter %ld status %s call_s %.3f at %.6f: %s\n",
			       rank, host, i, dpg_strerror(st), t1 - t0, now_real(),
			       dpg_last_error(ctx));
			dpg_finalize(ctx);
			printf("E2E-EXIT rank %d at %.6f\n", rank, now_real());
			return 3;
		}
		sum_ms += (t1 - t0) * 1e3;
		if (buf[0] != want || buf[count - 1] != want || buf[count / 2] != want) {
			printf("E2E-WRONG rank %d host %s iter %ld: got %g %g %g, want %g\n",
			       rank, host, i, buf[0], buf[count / 2], buf[count - 1], want);
			dpg_finalize(ctx);
			return 4;
		}
	}
	printf("E2E-OK rank %d host %s iters %ld avg_ms %.2f\n", rank, host, iters,
	       iters > 0 ? sum_ms / iters : 0.0);
	st = dpg_finalize(ctx);
	printf("E2E-EXIT rank %d at %.6f\n", rank, now_real());
	return st == DPG_OK ? 0 : 3;
}
