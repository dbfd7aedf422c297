/* SPDX-License-Identifier: BSD-3-Clause */
/* test_init.c - multi-process tests of libdpg's public API (dpg_init /
 * dpg_finalize, the collectives, split and mesh: lib/runtime/init.c, coll.c,
 * comm.c and mesh.c) on the CPU backend: every test forks N ranks that join
 * through the environment (RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1, a free
 * MASTER_PORT, DPG_SECRET) exactly as tasks of a job would. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dpg.h"

#define SECRET_A "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define SECRET_B "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
#define MAX_RANKS 8


/* ------------------------------------------------ helpers run in children */

#include "../ranks.h"

/* ------------------------------------------------ init / finalize */

static void body_init_finalize(int rank, const struct job *j)
{
	dpg_ctx_t *ctx = NULL;
	dpg_comm_t *w;

	CHK_OK(ctx, dpg_init(NULL, &ctx));
	CHK(dpg_rank(ctx) == rank, "rank %d", dpg_rank(ctx));
	CHK(dpg_world_size(ctx) == j->n, "world %d", dpg_world_size(ctx));
	/* every rank runs on this host: local = global */
	CHK(dpg_local_rank(ctx) == rank, "local rank %d", dpg_local_rank(ctx));
	CHK(dpg_local_world_size(ctx) == j->n, "local world %d",
	    dpg_local_world_size(ctx));
	CHK(dpg_backend(ctx) == DPG_BACKEND_CPU, "backend %d", dpg_backend(ctx));
	w = dpg_world(ctx);
	CHK(w != NULL, "no world");
	CHK(dpg_comm_rank(w) == rank && dpg_comm_size(w) == j->n, "world comm");
	CHK(strcmp(dpg_last_error(ctx), "") == 0, "error '%s'", dpg_last_error(ctx));
	CHK_OK(ctx, dpg_barrier(w));
	CHK_OK(ctx, dpg_barrier(w));
	CHK_OK(ctx, dpg_finalize(ctx));
}

static void test_init_finalize_1_2_3_5(void **state)
{
	static const int sizes[] = { 1, 2, 3, 5 };

	(void)state;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct job j = { .n = sizes[i], .body = body_init_finalize };
		double t0 = now_s();

		expect_all_ok(&j);
		printf("# init+2 barriers+finalize, %d ranks: %.3f s\n", sizes[i],
		       now_s() - t0);
	}
}

static void body_single(int rank, const struct job *j)
{
	dpg_ctx_t *ctx = NULL;
	dpg_comm_t *w, *sub = NULL;
	dpg_mesh_t *mesh = NULL;
	float x[3] = { 1, 2, 3 }, y[3];
	void *out = NULL;
	size_t *offs = NULL, *lens = NULL;
	int one = 1;

	(void)rank;
	(void)j;
	clean_env();		/* nothing distributed at all */
	setenv("CUDA_VISIBLE_DEVICES", "", 1);
	CHK_OK(ctx, dpg_init(NULL, &ctx));
	CHK(dpg_rank(ctx) == 0 && dpg_world_size(ctx) == 1, "not single");
	CHK(dpg_local_rank(ctx) == 0 && dpg_local_world_size(ctx) == 1, "local");
	CHK(dpg_backend(ctx) == DPG_BACKEND_CPU, "backend");
	w = dpg_world(ctx);
	CHK_OK(ctx, dpg_allreduce(w, x, y, 3, DPG_F32, DPG_AVG, NULL));
	CHK(y[0] == 1 && y[1] == 2 && y[2] == 3, "allreduce");
	CHK_OK(ctx, dpg_allreduce(w, x, x, 3, DPG_F32, DPG_SUM, NULL));
	CHK_OK(ctx, dpg_broadcast(w, x, 3, DPG_F32, 0, NULL));
	CHK_OK(ctx, dpg_all_gather(w, x, y, 3, DPG_F32, NULL));
	CHK_OK(ctx, dpg_reduce_scatter(w, x, y, 3, DPG_F32, DPG_MAX, NULL));
	CHK_OK(ctx, dpg_barrier(w));
	CHK_OK(ctx, dpg_all_gather_bytes(w, "hello", 5, &out, &offs, &lens));
	CHK(lens[0] == 5 && offs[0] == 0 && memcmp(out, "hello", 5) == 0, "bytes");
	free(out);
	free(offs);
	free(lens);
	CHK_OK(ctx, dpg_comm_split(w, 0, 0, &sub));
	CHK(sub != NULL && dpg_comm_size(sub) == 1, "split");
	CHK_OK(ctx, dpg_allreduce(sub, &one, &one, 1, DPG_I32, DPG_SUM, NULL));
	CHK(one == 1, "sub allreduce");
	CHK_OK(ctx, dpg_comm_destroy(sub));
	CHK_OK(ctx, dpg_comm_split(w, -1, 0, &sub));
	CHK(sub == NULL, "color -1 gave a comm");
	CHK_OK(ctx, dpg_mesh_create(ctx, 1, &one, &mesh));
	CHK(dpg_mesh_coord(mesh, 0) == 0 && dpg_comm_size(dpg_mesh_comm(mesh, 0)) == 1,
	    "mesh");
	CHK_OK(ctx, dpg_mesh_destroy(mesh));
	CHK_OK(ctx, dpg_finalize(ctx));
}

static void test_single_process_no_environment(void **state)
{
	struct job j = { .n = 1, .body = body_single };

	(void)state;
	expect_all_ok(&j);
}

/* Init after finalize: a test harness or a restart joins a new world in the
 * same process, on the same MASTER_ADDR/PORT, right after dpg_finalize. */
#define REINIT_ROUNDS 10

static void body_reinit(int rank, const struct job *j)
{
	for (int round = 0; round < REINIT_ROUNDS; round++) {
		dpg_ctx_t *ctx = NULL;
		double t0 = now_s(), dt;
		int32_t v = rank + round, want = 0;

		for (int r = 0; r < j->n; r++)
			want += r + round;
		CHK_OK(ctx, dpg_init(NULL, &ctx));
		CHK_OK(ctx, dpg_allreduce(dpg_world(ctx), &v, &v, 1, DPG_I32,
					  DPG_SUM, NULL));
		CHK(v == want, "round %d: sum %d, want %d", round, v, want);
		CHK_OK(ctx, dpg_finalize(ctx));
		dt = now_s() - t0;
		CHK(dt < 5.0, "round %d took %.2f s", round, dt);
	}
}

static void test_init_after_finalize(void **state)
{
	(void)state;
	for (int n = 2; n <= 3; n++) {
		struct job j = { .n = n, .body = body_reinit, .timeout_s = 20,
				 .limit_s = 60 };
		double t0 = now_s();

		expect_all_ok(&j);
		printf("# %d rounds of init/allreduce/finalize, %d ranks: %.3f s\n",
		       REINIT_ROUNDS, n, now_s() - t0);
	}
}

/* ------------------------------------------------ environment errors */

struct bad_env {
	const char *vars[10];	/* name, value pairs, NULL-terminated */
	dpg_status_t want;
	const char *needles[3];
};

static const struct bad_env bad_envs[] = {
	{ { "RANK", "4", "WORLD_SIZE", "4", NULL }, DPG_ERR_ENV,
	  { "RANK=4", "WORLD_SIZE=4", NULL } },
	{ { "RANK", NULL }, DPG_ERR_ENV, { "WORLD_SIZE", NULL } },
	{ { "RANK", "1", "SLURM_PROCID", "2", "SLURM_STEP_NUM_TASKS", "2",
	    "SLURM_STEP_ID", "0", NULL }, DPG_ERR_ENV,
	  { "RANK=1", "SLURM_PROCID=2", NULL } },
	{ { "SLURM_PROCID", "1", "SLURM_STEP_NUM_TASKS", "8", "SLURM_STEP_ID",
	    "0", NULL }, DPG_ERR_ENV, { "WORLD_SIZE=2", "SLURM_STEP_NUM_TASKS=8" } },
	{ { "LOCAL_RANK", "3", "LOCAL_WORLD_SIZE", "2", NULL }, DPG_ERR_ENV,
	  { "LOCAL_RANK=3", "LOCAL_WORLD_SIZE=2", NULL } },
	{ { "RANK", "one", NULL }, DPG_ERR_ENV, { "RANK='one'", NULL } },
	{ { "DPG_TIMEOUT", "soon", NULL }, DPG_ERR_ENV, { "DPG_TIMEOUT", NULL } },
	{ { "DPG_BACKEND", "mpi", NULL }, DPG_ERR_ENV, { "DPG_BACKEND", NULL } },
	{ { "DPG_SECRET", "", NULL }, DPG_ERR_AUTH,
	  { "DPG_SECRET", "head -c32 /dev/urandom", NULL } },
	{ { "DPG_BACKEND", "nccl", "CUDA_VISIBLE_DEVICES", "", "RANK", "0",
	    "WORLD_SIZE", "1", NULL },
	  DPG_ERR_UNSUPPORTED, { "NCCL", NULL } },
};

static void body_bad_env(int rank, const struct job *j)
{
	const struct bad_env *b = j->arg;
	dpg_ctx_t *ctx = NULL;
	dpg_status_t st;
	const char *msg;

	(void)rank;
	/* a two-rank job (rank 1 of 2) with one thing wrong */
	setenv("RANK", "1", 1);
	setenv("WORLD_SIZE", "2", 1);
	setenv("DPG_TIMEOUT", "2", 1);
	for (int i = 0; b->vars[i] != NULL; i += 2) {
		if (b->vars[i + 1] == NULL)
			unsetenv(b->vars[i]);
		else
			setenv(b->vars[i], b->vars[i + 1], 1);
		if (b->vars[i + 1] == NULL)
			break;
	}
	st = dpg_init(NULL, &ctx);
	msg = dpg_last_error(ctx);
	printf("# %s -> %s: %s\n", b->vars[0], dpg_strerror(st), msg);
	CHK(st == b->want, "got %s, want %s (%s)", dpg_strerror(st),
	    dpg_strerror(b->want), msg);
	for (int i = 0; i < 3 && b->needles[i] != NULL; i++)
		CHK(strstr(msg, b->needles[i]) != NULL, "'%s' not in '%s'",
		    b->needles[i], msg);
	CHK(strchr(msg, '\n') == NULL, "multi-line message");
	CHK(dpg_finalize(ctx) == DPG_OK, "finalize after a failed init");
}

static void test_inconsistent_env(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bad_envs) / sizeof(bad_envs[0]); i++) {
		struct job j = { .n = 1, .body = body_bad_env,
				 .arg = (void *)&bad_envs[i], .timeout_s = 2,
				 .limit_s = 20 };

		expect_all_ok(&j);
	}
}

/* ------------------------------------------------ secrets */

static void env_wrong_secret(int rank, const struct job *j)
{
	(void)j;
	if (rank == 2)
		setenv("DPG_SECRET", SECRET_B, 1);
}

static void body_wrong_secret(int rank, const struct job *j)
{
	dpg_ctx_t *ctx = NULL;
	double t0 = now_s();
	dpg_status_t st = dpg_init(NULL, &ctx);
	double dt = now_s() - t0;

	(void)j;
	printf("# rank %d: %s after %.2f s: %s\n", rank, dpg_strerror(st), dt,
	       dpg_last_error(ctx));
	if (rank == 2) {
		CHK(st == DPG_ERR_AUTH, "got %s: %s", dpg_strerror(st),
		    dpg_last_error(ctx));
		CHK(strstr(dpg_last_error(ctx), "secret") != NULL, "%s",
		    dpg_last_error(ctx));
		CHK(dt < 10, "AUTH took %.1f s", dt);
	} else {
		CHK(st == DPG_ERR_TIMEOUT || st == DPG_ERR_PEER, "got %s: %s",
		    dpg_strerror(st), dpg_last_error(ctx));
		/* rank 0 saw who is missing, and told rank 1 */
		CHK(strstr(dpg_last_error(ctx), "rank 2") != NULL, "%s",
		    dpg_last_error(ctx));
	}
	dpg_finalize(ctx);
}

static void test_wrong_secret(void **state)
{
	struct job j = { .n = 3, .env = env_wrong_secret, .body = body_wrong_secret,
			 .timeout_s = 3, .limit_s = 30 };

	(void)state;
	expect_all_ok(&j);
}

/* two processes claim rank 1 */
static void env_dup_rank(int rank, const struct job *j)
{
	(void)j;
	if (rank == 2)
		setenv("RANK", "1", 1);
}

static void body_dup_rank(int rank, const struct job *j)
{
	dpg_ctx_t *ctx = NULL;
	dpg_status_t st = dpg_init(NULL, &ctx);

	(void)j;
	printf("# process %d: %s: %s\n", rank, dpg_strerror(st), dpg_last_error(ctx));
	CHK(st != DPG_OK, "init succeeded with a duplicated rank");
	CHK(st == DPG_ERR_ENV || st == DPG_ERR_TIMEOUT, "%s: %s",
	    dpg_strerror(st), dpg_last_error(ctx));
	if (st == DPG_ERR_ENV)
		CHK(strstr(dpg_last_error(ctx), "rank 1 is already taken") != NULL,
		    "%s", dpg_last_error(ctx));
	dpg_finalize(ctx);
}

static void test_duplicate_rank(void **state)
{
	struct job j = { .n = 3, .env = env_dup_rank, .body = body_dup_rank,
			 .timeout_s = 3, .limit_s = 30 };

	(void)state;
	expect_all_ok(&j);
}

static void env_world_mismatch(int rank, const struct job *j)
{
	(void)j;
	if (rank == 1)
		setenv("WORLD_SIZE", "3", 1);
}

static void body_world_mismatch(int rank, const struct job *j)
{
	dpg_ctx_t *ctx = NULL;
	dpg_status_t st = dpg_init(NULL, &ctx);

	(void)j;
	printf("# rank %d: %s: %s\n", rank, dpg_strerror(st), dpg_last_error(ctx));
	CHK(st == DPG_ERR_ENV, "%s: %s", dpg_strerror(st), dpg_last_error(ctx));
	CHK(strstr(dpg_last_error(ctx), "world size 3") != NULL, "%s",
	    dpg_last_error(ctx));
	dpg_finalize(ctx);
}

static void test_world_size_mismatch(void **state)
{
	struct job j = { .n = 2, .env = env_world_mismatch,
			 .body = body_world_mismatch, .timeout_s = 5, .limit_s = 30 };

	(void)state;
	expect_all_ok(&j);
}

/* The other direction: rank 0 claims the larger world.  Every rank must say
 * so at once (not wait DPG_TIMEOUT for a rank that does not exist). */
static void env_world_mismatch0(int rank, const struct job *j)
{
	(void)j;
	if (rank == 0)
		setenv("WORLD_SIZE", "3", 1);
}

static void body_world_mismatch0(int rank, const struct job *j)
{
	dpg_ctx_t *ctx = NULL;
	double t0 = now_s(), dt;
	dpg_status_t st = dpg_init(NULL, &ctx);

	(void)j;
	dt = now_s() - t0;
	printf("# rank %d: %s after %.3f s: %s\n", rank, dpg_strerror(st), dt,
	       dpg_last_error(ctx));
	CHK(st == DPG_ERR_ENV, "%s: %s", dpg_strerror(st), dpg_last_error(ctx));
	CHK(strstr(dpg_last_error(ctx), "world size 2") != NULL &&
	    strstr(dpg_last_error(ctx), "has 3") != NULL, "%s",
	    dpg_last_error(ctx));
	CHK(dt < 3.0, "took %.2f s (DPG_TIMEOUT %g)", dt, j->timeout_s);
	dpg_finalize(ctx);
}

static void test_world_size_mismatch_rank0_larger(void **state)
{
	struct job j = { .n = 2, .env = env_world_mismatch0,
			 .body = body_world_mismatch0, .timeout_s = 10,
			 .limit_s = 40 };

	(void)state;
	expect_all_ok(&j);
}

/* ------------------------------------------------ the last error */

#define CHK_CLEAR(ctx, what)                                                \
	CHK(strcmp(dpg_last_error(ctx), "") == 0, "after a successful %s: '%s'", \
	    what, dpg_last_error(ctx))

/* A failure on ctx, so that a stale message would show. */
static void fail_once(dpg_ctx_t *ctx)
{
	float x = 1;

	CHK(dpg_allreduce(dpg_world(ctx), &x, &x, 1, (dpg_dtype_t)42, DPG_SUM,
			  NULL) == DPG_ERR_INVALID, "dtype 42 accepted");
	CHK(strstr(dpg_last_error(ctx), "dtype 42") != NULL, "%s",
	    dpg_last_error(ctx));
}

static void body_last_error(int rank, const struct job *j)
{
	dpg_ctx_t *ctx = NULL;
	dpg_comm_t *w, *sub = NULL;
	dpg_mesh_t *mesh = NULL;
	float x = 1;
	int n = j->n;

	(void)rank;
	CHK_OK(ctx, dpg_init(NULL, &ctx));
	w = dpg_world(ctx);
	CHK_CLEAR(ctx, "dpg_init");
	/* every successful call on ctx clears the last error */
	fail_once(ctx);
	CHK_OK(ctx, dpg_barrier(w));
	CHK_CLEAR(ctx, "barrier");
	fail_once(ctx);
	CHK_OK(ctx, dpg_comm_split(w, 0, 0, &sub));
	CHK_CLEAR(ctx, "comm_split");
	fail_once(ctx);
	CHK_OK(ctx, dpg_comm_destroy(sub));
	CHK_CLEAR(ctx, "comm_destroy");
	fail_once(ctx);
	CHK_OK(ctx, dpg_mesh_create(ctx, 1, &n, &mesh));
	CHK_CLEAR(ctx, "mesh_create");
	fail_once(ctx);
	CHK_OK(ctx, dpg_mesh_destroy(mesh));
	CHK_CLEAR(ctx, "mesh_destroy");
	/* a call given no handle reaches no context: it records nothing in
	 * ctx, and dpg_last_error(NULL) says what happened */
	fail_once(ctx);
	CHK(dpg_allreduce(NULL, &x, &x, 1, DPG_F32, DPG_SUM, NULL) ==
	    DPG_ERR_INVALID, "NULL comm");
	CHK(strstr(dpg_last_error(NULL), "no context") != NULL &&
	    strstr(dpg_last_error(NULL), "NULL") != NULL, "%s",
	    dpg_last_error(NULL));
	CHK(strstr(dpg_last_error(ctx), "dtype 42") != NULL, "%s",
	    dpg_last_error(ctx));
	CHK_OK(ctx, dpg_finalize(ctx));
}

static void test_last_error(void **state)
{
	struct job j = { .n = 2, .body = body_last_error };

	(void)state;
	expect_all_ok(&j);
}

/* dpg_finalize(&ctx) leaves ctx NULL: every later call through it is
 * DPG_ERR_INVALID (or -1 / NULL for the accessors), never a use after free;
 * a second finalize is harmless. */
static void body_after_finalize(int rank, const struct job *j)
{
	dpg_ctx_t *ctx = NULL;
	dpg_mesh_t *mesh = NULL;
	dpg_comm_t *sub = NULL;
	float x = 1;
	int one = 1;

	(void)rank;
	(void)j;
	CHK_OK(ctx, dpg_init(NULL, &ctx));
	CHK_OK(ctx, dpg_barrier(dpg_world(ctx)));
	CHK_OK(ctx, dpg_finalize(&ctx));
	CHK(ctx == NULL, "dpg_finalize(&ctx) left ctx set");
	CHK(dpg_world(ctx) == NULL && dpg_rank(ctx) == -1 &&
	    dpg_world_size(ctx) == -1, "accessors after finalize");
	CHK(dpg_allreduce(dpg_world(ctx), &x, &x, 1, DPG_F32, DPG_SUM, NULL) ==
	    DPG_ERR_INVALID, "allreduce after finalize");
	CHK(dpg_barrier(dpg_world(ctx)) == DPG_ERR_INVALID, "barrier");
	CHK(dpg_comm_split(dpg_world(ctx), 0, 0, &sub) == DPG_ERR_INVALID &&
	    sub == NULL, "split");
	CHK(dpg_mesh_create(ctx, 1, &one, &mesh) == DPG_ERR_INVALID && mesh == NULL,
	    "mesh");
	CHK(dpg_abort(ctx) == DPG_ERR_INVALID, "abort");
	CHK(strstr(dpg_last_error(ctx), "no context") != NULL, "%s",
	    dpg_last_error(ctx));
	CHK(dpg_finalize(&ctx) == DPG_OK && ctx == NULL, "second finalize");
	CHK(dpg_finalize((dpg_ctx_t **)NULL) == DPG_OK, "finalize(NULL)");
}

static void test_calls_after_finalize(void **state)
{
	struct job j1 = { .n = 1, .body = body_after_finalize };
	struct job j2 = { .n = 2, .body = body_after_finalize };

	(void)state;
	expect_all_ok(&j1);
	expect_all_ok(&j2);
}

/* ------------------------------------------------ one cause, one status */

/* An unresolvable MASTER_ADDR is DPG_ERR_ENV on every rank, with one
 * wording. */
static void env_bad_master(int rank, const struct job *j)
{
	(void)rank;
	(void)j;
	setenv("MASTER_ADDR", "no-such-host.invalid", 1);
}

static void body_same_status_env(int rank, const struct job *j)
{
	dpg_ctx_t *ctx = NULL;
	dpg_status_t st = dpg_init(NULL, &ctx);
	const char *needle = j->arg;

	printf("# rank %d: %s: %s\n", rank, dpg_strerror(st), dpg_last_error(ctx));
	CHK(st == DPG_ERR_ENV, "%s: %s", dpg_strerror(st), dpg_last_error(ctx));
	CHK(strstr(dpg_last_error(ctx), needle) != NULL, "no '%s' in %s", needle,
	    dpg_last_error(ctx));
	dpg_finalize(ctx);
}

static void test_unresolvable_master_same_status(void **state)
{
	struct job j = { .n = 2, .env = env_bad_master,
			 .body = body_same_status_env,
			 .arg = (void *)"cannot resolve MASTER_ADDR=no-such-host.invalid",
			 .timeout_s = 3, .limit_s = 30 };

	(void)state;
	expect_all_ok(&j);
}

/* Another service (one that talks first, like sshd) holds MASTER_PORT:
 * rank 0 cannot serve there, the others reach a stranger; both say it is
 * the environment, the others that it is not a dpg store.  The service is
 * a process of its own (a thread would be forked into the ranks). */
static void foreign_serve(int lfd)
{
	for (;;) {
		int fd = accept(lfd, NULL, NULL);

		if (fd < 0)
			continue;
		send(fd, "SSH-2.0-OpenSSH_9.2p1 Debian\r\n", 31, MSG_NOSIGNAL);
		usleep(50000);
		close(fd);
	}
}

static void body_foreign(int rank, const struct job *j)
{
	dpg_ctx_t *ctx = NULL;
	double t0 = now_s();
	dpg_status_t st = dpg_init(NULL, &ctx);
	const char *needle = rank == 0 ? "MASTER_PORT" :
			     "is not a dpg store (another service answered)";

	(void)j;
	printf("# rank %d: %s after %.3f s: %s\n", rank, dpg_strerror(st),
	       now_s() - t0, dpg_last_error(ctx));
	CHK(st == DPG_ERR_ENV, "%s: %s", dpg_strerror(st), dpg_last_error(ctx));
	CHK(strstr(dpg_last_error(ctx), needle) != NULL, "no '%s' in %s", needle,
	    dpg_last_error(ctx));
	dpg_finalize(ctx);
}

static void test_foreign_service_on_master_port(void **state)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t sl = sizeof(a);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), status;
	struct job j = { .n = 2, .body = body_foreign, .timeout_s = 3,
			 .limit_s = 30 };
	pid_t svc;

	(void)state;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(lfd >= 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(lfd, 16), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &sl), 0);
	j.port = ntohs(a.sin_port);
	svc = fork();
	assert_true(svc >= 0);
	if (svc == 0) {
		alarm(60);
		foreign_serve(lfd);
	}
	expect_all_ok(&j);
	kill(svc, SIGKILL);
	waitpid(svc, &status, 0);
	close(lfd);
}

/* ------------------------------------------------ collectives */

static void body_collectives(int rank, const struct job *j)
{
	dpg_ctx_t *ctx = NULL;
	dpg_comm_t *w;
	int n = j->n;
	float f[4], fr[4];
	double d[3];
	int64_t l[2], lr[2];
	int32_t iv[MAX_RANKS * 2], ir[2], ig[MAX_RANKS * 2];
	uint16_t h[2];

	CHK_OK(ctx, dpg_init(NULL, &ctx));
	w = dpg_world(ctx);

	/* the public demo: sum of rank + 1 */
	for (int i = 0; i < 4; i++)
		f[i] = (float)(rank + 1) * (float)(i + 1);
	CHK_OK(ctx, dpg_allreduce(w, f, fr, 4, DPG_F32, DPG_SUM, NULL));
	for (int i = 0; i < 4; i++)
		CHK(fr[i] == (float)(n * (n + 1) / 2 * (i + 1)), "f32 sum [%d] = %g",
		    i, fr[i]);
	/* in place, avg in f64 */
	for (int i = 0; i < 3; i++)
		d[i] = rank * 2.0 + i;
	CHK_OK(ctx, dpg_allreduce(w, d, d, 3, DPG_F64, DPG_AVG, NULL));
	for (int i = 0; i < 3; i++)
		CHK(fabs(d[i] - ((double)(n - 1) + i)) < 1e-12, "f64 avg [%d] = %g",
		    i, d[i]);
	/* min / max on i64 */
	l[0] = 100 - rank;
	l[1] = -1000 + rank;
	CHK_OK(ctx, dpg_allreduce(w, l, lr, 2, DPG_I64, DPG_MIN, NULL));
	CHK(lr[0] == 100 - (n - 1) && lr[1] == -1000, "i64 min");
	CHK_OK(ctx, dpg_allreduce(w, l, lr, 2, DPG_I64, DPG_MAX, NULL));
	CHK(lr[0] == 100 && lr[1] == -1000 + (n - 1), "i64 max");
	/* integer avg truncates toward zero */
	iv[0] = rank == 0 ? -7 : 0;
	CHK_OK(ctx, dpg_allreduce(w, iv, ir, 1, DPG_I32, DPG_AVG, NULL));
	CHK(ir[0] == -7 / n, "i32 avg %d", ir[0]);
	/* bf16 1.0 summed */
	h[0] = h[1] = 0x3f80;
	CHK_OK(ctx, dpg_allreduce(w, h, h, 2, DPG_BF16, DPG_SUM, NULL));
	CHK(h[0] == (uint16_t)(n == 1 ? 0x3f80 : n == 2 ? 0x4000 : n == 3 ? 0x4040 :
			       0x4080), "bf16 sum %#x", h[0]);
	/* reduce_scatter: rank r gets the sum of block r */
	for (int i = 0; i < n * 2; i++)
		iv[i] = i * (rank + 1);
	CHK_OK(ctx, dpg_reduce_scatter(w, iv, ir, 2, DPG_I32, DPG_SUM, NULL));
	for (int k = 0; k < 2; k++)
		CHK(ir[k] == (rank * 2 + k) * n * (n + 1) / 2, "rs[%d] = %d", k, ir[k]);
	/* all_gather */
	ir[0] = rank;
	ir[1] = -rank;
	CHK_OK(ctx, dpg_all_gather(w, ir, ig, 2, DPG_I32, NULL));
	for (int r = 0; r < n; r++)
		CHK(ig[2 * r] == r && ig[2 * r + 1] == -r, "ag[%d]", r);
	/* broadcast from the last rank */
	for (int i = 0; i < 4; i++)
		f[i] = rank == n - 1 ? 42.5f + (float)i : -1;
	CHK_OK(ctx, dpg_broadcast(w, f, 4, DPG_F32, n - 1, NULL));
	for (int i = 0; i < 4; i++)
		CHK(f[i] == 42.5f + (float)i, "bcast[%d] = %g", i, f[i]);
	/* zero elements are fine */
	CHK_OK(ctx, dpg_allreduce(w, NULL, NULL, 0, DPG_F32, DPG_SUM, NULL));
	CHK_OK(ctx, dpg_barrier(w));
	CHK_OK(ctx, dpg_finalize(ctx));
}

static void test_collectives(void **state)
{
	(void)state;
	for (int n = 2; n <= 4; n++) {
		struct job j = { .n = n, .body = body_collectives };

		expect_all_ok(&j);
	}
}

static void body_bad_args(int rank, const struct job *j)
{
	dpg_ctx_t *ctx = NULL;
	dpg_comm_t *w;
	float x = 1;
	int sizes[2] = { 3, 1 };
	dpg_mesh_t *mesh = (dpg_mesh_t *)&x;

	(void)j;
	CHK_OK(ctx, dpg_init(NULL, &ctx));
	w = dpg_world(ctx);
	CHK(dpg_allreduce(NULL, &x, &x, 1, DPG_F32, DPG_SUM, NULL) == DPG_ERR_INVALID,
	    "NULL comm");
	CHK(dpg_allreduce(w, &x, &x, 1, (dpg_dtype_t)42, DPG_SUM, NULL) ==
	    DPG_ERR_INVALID, "dtype");
	CHK(strstr(dpg_last_error(ctx), "allreduce") != NULL &&
	    strstr(dpg_last_error(ctx), "dtype 42") != NULL &&
	    strstr(dpg_last_error(ctx), "rank ") != NULL, "%s", dpg_last_error(ctx));
	CHK(dpg_allreduce(w, &x, &x, 1, DPG_F32, (dpg_op_t)9, NULL) ==
	    DPG_ERR_INVALID, "op");
	CHK(dpg_allreduce(w, NULL, &x, 1, DPG_F32, DPG_SUM, NULL) ==
	    DPG_ERR_INVALID, "NULL send");
	CHK(dpg_broadcast(w, &x, 1, DPG_F32, 2, NULL) == DPG_ERR_INVALID, "root");
	CHK(strstr(dpg_last_error(ctx), "root 2") != NULL, "%s", dpg_last_error(ctx));
	CHK(dpg_reduce_scatter(w, &x, &x, SIZE_MAX / 2, DPG_F32, DPG_SUM, NULL) ==
	    DPG_ERR_INVALID, "overflow");
	CHK(dpg_comm_destroy(w) == DPG_ERR_INVALID, "destroying the world");
	CHK(strstr(dpg_last_error(ctx), "dpg_finalize") != NULL, "%s",
	    dpg_last_error(ctx));
	CHK(dpg_mesh_create(ctx, 2, sizes, &mesh) == DPG_ERR_INVALID, "mesh 3x1");
	CHK(mesh == NULL, "mesh not cleared");
	CHK(strstr(dpg_last_error(ctx), "3x1") != NULL, "%s", dpg_last_error(ctx));
	CHK(dpg_mesh_create(ctx, 4, sizes, &mesh) == DPG_ERR_INVALID, "mesh 4 dims");
	CHK(dpg_mesh_comm(NULL, 0) == NULL && dpg_mesh_coord(NULL, 0) == -1, "NULL mesh");
	/* a failed argument check is not a failed collective: all still work */
	x = (float)rank;
	CHK_OK(ctx, dpg_allreduce(w, &x, &x, 1, DPG_F32, DPG_SUM, NULL));
	CHK(x == 1.0f, "sum %g", x);
	CHK(dpg_rank(NULL) == -1 && dpg_world(NULL) == NULL &&
	    dpg_comm_size(NULL) == -1, "NULL accessors");
	CHK(strlen(dpg_last_error(NULL)) > 0, "NULL ctx error");
	CHK(dpg_init(NULL, NULL) == DPG_ERR_INVALID, "NULL out");
	for (int s = DPG_OK; s <= DPG_ERR_ABORTED; s++)
		CHK(strlen(dpg_strerror((dpg_status_t)s)) > 0, "strerror %d", s);
	CHK_OK(ctx, dpg_finalize(ctx));
	CHK(dpg_finalize(NULL) == DPG_OK, "finalize(NULL)");
}

static void test_bad_arguments(void **state)
{
	struct job j = { .n = 2, .body = body_bad_args };

	(void)state;
	expect_all_ok(&j);
}

/* ------------------------------------------------ all_gather_bytes */

static void body_gather_bytes(int rank, const struct job *j)
{
	dpg_ctx_t *ctx = NULL;
	dpg_comm_t *w;
	char mine[256], want[256];
	void *out = NULL;
	size_t *offs = NULL, *lens = NULL, len;
	int n = j->n;

	CHK_OK(ctx, dpg_init(NULL, &ctx));
	w = dpg_world(ctx);
	/* rank r sends 5r - 1 bytes (rank 0: none), of a JSON-ish text */
	len = rank == 0 ? 0 : (size_t)(5 * rank - 1);
	for (size_t i = 0; i < len; i++)
		mine[i] = (char)('a' + (rank + (int)i) % 26);
	CHK_OK(ctx, dpg_all_gather_bytes(w, rank == 0 ? NULL : mine, len, &out,
					 &offs, &lens));
	for (int r = 0, o = 0; r < n; r++) {
		size_t l = r == 0 ? 0 : (size_t)(5 * r - 1);

		CHK(lens[r] == l, "len[%d] = %zu", r, lens[r]);
		CHK(offs[r] == (size_t)o, "off[%d] = %zu", r, offs[r]);
		for (size_t i = 0; i < l; i++)
			want[i] = (char)('a' + (r + (int)i) % 26);
		CHK(memcmp((char *)out + offs[r], want, l) == 0, "bytes of %d", r);
		o += (int)l;
	}
	free(out);
	free(offs);
	free(lens);
	/* everyone empty */
	CHK_OK(ctx, dpg_all_gather_bytes(w, NULL, 0, &out, &offs, &lens));
	for (int r = 0; r < n; r++)
		CHK(lens[r] == 0 && offs[r] == 0, "empty %d", r);
	free(out);
	free(offs);
	free(lens);
	/* a JSON string per rank, as the demo does */
	snprintf(mine, sizeof(mine), "{\"rank\": %d, \"pid\": %ld}", rank,
		 (long)getpid());
	CHK_OK(ctx, dpg_all_gather_bytes(w, mine, strlen(mine) + 1, &out, &offs,
					 &lens));
	for (int r = 0; r < n; r++) {
		char pre[32];

		snprintf(pre, sizeof(pre), "{\"rank\": %d,", r);
		CHK(strncmp((char *)out + offs[r], pre, strlen(pre)) == 0, "json %d: %s",
		    r, (char *)out + offs[r]);
	}
	free(out);
	free(offs);
	free(lens);
	CHK(dpg_all_gather_bytes(w, mine, 1, NULL, &offs, &lens) == DPG_ERR_INVALID,
	    "NULL out");
	CHK_OK(ctx, dpg_finalize(ctx));
}

static void test_all_gather_bytes(void **state)
{
	struct job j = { .n = 4, .body = body_gather_bytes };

	(void)state;
	expect_all_ok(&j);
}

/* ------------------------------------------------ split and mesh */

static void body_split(int rank, const struct job *j)
{
	dpg_ctx_t *ctx = NULL;
	dpg_comm_t *w, *par = NULL, *again = NULL, *none = NULL;
	int n = j->n, v, want_size, want_rank = 0, sum = 0;
	int32_t members[MAX_RANKS];

	CHK_OK(ctx, dpg_init(NULL, &ctx));
	w = dpg_world(ctx);
	/* by parity, ordered by descending rank (key = -rank) */
	CHK_OK(ctx, dpg_comm_split(w, rank % 2, -rank, &par));
	CHK(par != NULL, "no comm");
	want_size = (n - rank % 2 + 1) / 2;
	for (int r = rank % 2; r < n; r += 2)
		if (r > rank)
			want_rank++;
	CHK(dpg_comm_size(par) == want_size, "size %d want %d", dpg_comm_size(par),
	    want_size);
	CHK(dpg_comm_rank(par) == want_rank, "rank %d want %d", dpg_comm_rank(par),
	    want_rank);
	v = rank;
	CHK_OK(ctx, dpg_allreduce(par, &v, &v, 1, DPG_I32, DPG_SUM, NULL));
	for (int r = rank % 2; r < n; r += 2)
		sum += r;
	CHK(v == sum, "group sum %d want %d", v, sum);
	/* the members in group order: descending world ranks of my parity */
	v = rank;
	CHK_OK(ctx, dpg_all_gather(par, &v, members, 1, DPG_I32, NULL));
	for (int i = 0; i < want_size; i++)
		CHK(members[i] == (n - 1 - ((n - 1 - rank % 2) % 2)) - 2 * i,
		    "member %d = %d", i, members[i]);
	/* the world still works alongside the group */
	v = 1;
	CHK_OK(ctx, dpg_allreduce(w, &v, &v, 1, DPG_I32, DPG_SUM, NULL));
	CHK(v == n, "world sum %d", v);
	/* rank 0 opts out of a second split; a split of a split */
	CHK_OK(ctx, dpg_comm_split(w, rank == 0 ? -1 : 7, 0, &none));
	CHK((rank == 0) == (none == NULL), "opt-out");
	if (none != NULL) {
		CHK(dpg_comm_size(none) == n - 1 && dpg_comm_rank(none) == rank - 1,
		    "size %d rank %d", dpg_comm_size(none), dpg_comm_rank(none));
		v = rank;
		CHK_OK(ctx, dpg_allreduce(none, &v, &v, 1, DPG_I32, DPG_MAX, NULL));
		CHK(v == n - 1, "max %d", v);
	}
	CHK_OK(ctx, dpg_comm_split(par, 0, 0, &again));
	CHK(dpg_comm_size(again) == want_size, "split of split");
	v = 1;
	CHK_OK(ctx, dpg_allreduce(again, &v, &v, 1, DPG_I32, DPG_SUM, NULL));
	CHK(v == want_size, "split of split sum %d", v);
	CHK_OK(ctx, dpg_comm_destroy(again));
	CHK_OK(ctx, dpg_comm_destroy(none));
	/* par is left for dpg_finalize to free */
	CHK_OK(ctx, dpg_finalize(ctx));
}

static void test_comm_split_parity(void **state)
{
	(void)state;
	for (int n = 4; n <= 5; n++) {
		struct job j = { .n = n, .body = body_split };

		expect_all_ok(&j);
	}
}

static void body_mesh(int rank, const struct job *j)
{
	dpg_ctx_t *ctx = NULL;
	dpg_mesh_t *mesh = NULL;
	int sizes[2] = { 2, 2 }, v, members[2];
	dpg_comm_t *inner, *outer;

	(void)j;
	CHK_OK(ctx, dpg_init(NULL, &ctx));
	CHK_OK(ctx, dpg_mesh_create(ctx, 2, sizes, &mesh));
	/* rank = 2 * coord0 + coord1 */
	CHK(dpg_mesh_coord(mesh, 0) == rank / 2 && dpg_mesh_coord(mesh, 1) == rank % 2,
	    "coords %d,%d", dpg_mesh_coord(mesh, 0), dpg_mesh_coord(mesh, 1));
	CHK(dpg_mesh_coord(mesh, 2) == -1 && dpg_mesh_comm(mesh, 2) == NULL, "dim 2");
	inner = dpg_mesh_comm(mesh, 1);	/* consecutive ranks: {0,1}, {2,3} */
	outer = dpg_mesh_comm(mesh, 0);	/* {0,2}, {1,3} */
	CHK(dpg_comm_size(inner) == 2 && dpg_comm_rank(inner) == rank % 2, "inner");
	CHK(dpg_comm_size(outer) == 2 && dpg_comm_rank(outer) == rank / 2, "outer");
	v = rank;
	CHK_OK(ctx, dpg_all_gather(inner, &v, members, 1, DPG_I32, NULL));
	CHK(members[0] == rank / 2 * 2 && members[1] == rank / 2 * 2 + 1,
	    "inner members %d %d", members[0], members[1]);
	CHK_OK(ctx, dpg_all_gather(outer, &v, members, 1, DPG_I32, NULL));
	CHK(members[0] == rank % 2 && members[1] == rank % 2 + 2,
	    "outer members %d %d", members[0], members[1]);
	v = rank + 1;
	CHK_OK(ctx, dpg_allreduce(inner, &v, &v, 1, DPG_I32, DPG_SUM, NULL));
	CHK(v == (rank / 2 * 2 + 1) + (rank / 2 * 2 + 2), "inner sum %d", v);
	v = rank + 1;
	CHK_OK(ctx, dpg_allreduce(outer, &v, &v, 1, DPG_I32, DPG_SUM, NULL));
	CHK(v == (rank % 2 + 1) + (rank % 2 + 3), "outer sum %d", v);
	CHK(dpg_comm_destroy(inner) == DPG_ERR_INVALID, "destroyed a mesh comm");
	CHK_OK(ctx, dpg_mesh_destroy(mesh));
	/* 1-D and 3-D meshes of the same world */
	sizes[0] = 4;
	CHK_OK(ctx, dpg_mesh_create(ctx, 1, sizes, &mesh));
	CHK(dpg_comm_size(dpg_mesh_comm(mesh, 0)) == 4, "1-D");
	CHK_OK(ctx, dpg_mesh_destroy(mesh));
	{
		int s3[3] = { 1, 2, 2 };

		CHK_OK(ctx, dpg_mesh_create(ctx, 3, s3, &mesh));
		CHK(dpg_mesh_coord(mesh, 0) == 0 && dpg_mesh_coord(mesh, 2) == rank % 2,
		    "3-D coords");
		CHK(dpg_comm_size(dpg_mesh_comm(mesh, 0)) == 1, "3-D outer");
		/* the mesh is freed by dpg_finalize */
	}
	CHK_OK(ctx, dpg_finalize(ctx));
}

static void test_mesh_2x2(void **state)
{
	struct job j = { .n = 4, .body = body_mesh };

	(void)state;
	expect_all_ok(&j);
}

/* ------------------------------------------------ failures */

static void body_dead_rank(int rank, const struct job *j)
{
	dpg_ctx_t *ctx = NULL;
	dpg_comm_t *w;
	float x[1024];
	double t0, dt;
	dpg_status_t st;

	CHK_OK(ctx, dpg_init(NULL, &ctx));
	w = dpg_world(ctx);
	CHK_OK(ctx, dpg_barrier(w));
	if (rank == j->n - 1)
		_exit(0);	/* dies without a word */
	for (int i = 0; i < 1024; i++)
		x[i] = 1;
	t0 = now_s();
	st = dpg_allreduce(w, x, x, 1024, DPG_F32, DPG_SUM, NULL);
	dt = now_s() - t0;
	printf("# rank %d: allreduce after rank %d died: %s after %.3f s: %s\n",
	       rank, j->n - 1, dpg_strerror(st), dt, dpg_last_error(ctx));
	CHK(st == DPG_ERR_PEER, "got %s: %s", dpg_strerror(st), dpg_last_error(ctx));
	CHK(dt < 5.0, "took %.1f s", dt);
	{
		char who[64], host[256];

		snprintf(who, sizeof(who), "rank %d", j->n - 1);
		CHK(strstr(dpg_last_error(ctx), who) != NULL, "no '%s' in %s", who,
		    dpg_last_error(ctx));
		gethostname(host, sizeof(host));
		host[strcspn(host, ".")] = '\0';
		CHK(strstr(dpg_last_error(ctx), host) != NULL ||
		    strstr(dpg_last_error(ctx), "127.0.0.1") != NULL,
		    "no host in %s", dpg_last_error(ctx));
		CHK(strstr(dpg_last_error(ctx), "allreduce #1 on w") != NULL, "%s",
		    dpg_last_error(ctx));
	}
	dpg_finalize(ctx);
}

static void test_dead_rank(void **state)
{
	(void)state;
	for (int n = 2; n <= 3; n++) {
		/* the deadline is far: the failure must be seen, not timed out */
		struct job j = { .n = n, .body = body_dead_rank, .timeout_s = 60,
				 .limit_s = 40 };

		expect_all_ok(&j);
	}
}

/* A rank dies after the last collective: the others' dpg_finalize says so
 * within seconds (its links), instead of waiting DPG_TIMEOUT for a goodbye. */
static void body_late_death(int rank, const struct job *j)
{
	dpg_ctx_t *ctx = NULL;
	double t0, dt;
	dpg_status_t st;

	CHK_OK(ctx, dpg_init(NULL, &ctx));
	CHK_OK(ctx, dpg_barrier(dpg_world(ctx)));
	if (rank == j->n - 1)
		_exit(0);
	t0 = now_s();
	st = dpg_finalize(ctx);
	dt = now_s() - t0;
	printf("# rank %d: dpg_finalize after rank %d died: %s after %.3f s\n", rank, j->n - 1,
	       dpg_strerror(st), dt);
	CHK(st == DPG_ERR_PEER, "dpg_finalize returned %s", dpg_strerror(st));
	CHK(dt < 5.0, "dpg_finalize took %.1f s (DPG_TIMEOUT %g)", dt, j->timeout_s);
}

static void test_late_death(void **state)
{
	(void)state;
	for (int n = 2; n <= 4; n += 2) {
		struct job j = { .n = n, .body = body_late_death, .timeout_s = 60, .limit_s = 40 };

		expect_all_ok(&j);
	}
}

struct aborter {
	dpg_ctx_t *ctx;
	double delay_s;
};

static void *abort_later(void *arg)
{
	struct aborter *a = arg;

	usleep((useconds_t)(a->delay_s * 1e6));
	dpg_abort(a->ctx);
	return NULL;
}

static void body_abort(int rank, const struct job *j)
{
	dpg_ctx_t *ctx = NULL;
	dpg_comm_t *w;
	pthread_t th;
	struct aborter a;
	float x[4] = { 1, 2, 3, 4 };
	double t0, dt;
	dpg_status_t st;

	(void)j;
	CHK_OK(ctx, dpg_init(NULL, &ctx));
	w = dpg_world(ctx);
	CHK_OK(ctx, dpg_barrier(w));
	if (rank == 1) {
		/* never joins the allreduce: rank 0 blocks until aborted */
		sleep(3);
		dpg_finalize(ctx);
		return;
	}
	a.ctx = ctx;
	a.delay_s = 0.5;
	CHK(pthread_create(&th, NULL, abort_later, &a) == 0, "thread");
	t0 = now_s();
	st = dpg_allreduce(w, x, x, 4, DPG_F32, DPG_SUM, NULL);
	dt = now_s() - t0;
	pthread_join(th, NULL);
	printf("# rank 0: blocked allreduce: %s after %.3f s: %s\n",
	       dpg_strerror(st), dt, dpg_last_error(ctx));
	CHK(st == DPG_ERR_ABORTED, "got %s: %s", dpg_strerror(st),
	    dpg_last_error(ctx));
	CHK(dt >= 0.4 && dt < 3.0, "took %.2f s", dt);
	CHK(strstr(dpg_last_error(ctx), "allreduce") != NULL, "%s",
	    dpg_last_error(ctx));
	/* later calls fail the same way, at once */
	CHK(dpg_barrier(w) == DPG_ERR_ABORTED, "barrier after abort");
	CHK(dpg_abort(ctx) == DPG_OK, "second abort");
	dpg_finalize(ctx);
}

static void test_abort_from_thread(void **state)
{
	struct job j = { .n = 2, .body = body_abort, .timeout_s = 30, .limit_s = 30 };

	(void)state;
	expect_all_ok(&j);
}

/* ------------------------------------------------ a refused call */

/* Rank 1's first allreduce fails its argument checks; then both ranks issue
 * a valid one.  Rank 0's first call must not pair with rank 1's second: both
 * get a mismatch naming both calls' numbers, within seconds. */
static void body_refused_call(int rank, const struct job *j)
{
	dpg_ctx_t *ctx = NULL;
	dpg_comm_t *w;
	float x[4] = { 1, 2, 3, 4 };
	dpg_status_t st;
	double t0;

	(void)j;
	CHK_OK(ctx, dpg_init(NULL, &ctx));
	w = dpg_world(ctx);
	if (rank == 1) {
		st = dpg_allreduce(w, NULL, x, 4, DPG_F32, DPG_SUM, NULL);
		CHK(st == DPG_ERR_INVALID, "NULL send: %s", dpg_strerror(st));
		CHK(strstr(dpg_last_error(ctx), "allreduce #0") != NULL, "%s",
		    dpg_last_error(ctx));
	}
	t0 = now_s();
	st = dpg_allreduce(w, x, x, 4, DPG_F32, DPG_SUM, NULL);
	printf("# rank %d: %s after %.3f s: %s\n", rank, dpg_strerror(st), now_s() - t0,
	       dpg_last_error(ctx));
	CHK(st == DPG_ERR_INVALID, "rank %d: the valid call paired silently: %s (%s)", rank,
	    dpg_strerror(st), dpg_last_error(ctx));
	CHK(now_s() - t0 < 5.0, "took %.2f s", now_s() - t0);
	CHK(strstr(dpg_last_error(ctx), "mismatch") != NULL &&
	    strstr(dpg_last_error(ctx), "allreduce #0 (4 x f32, sum)") != NULL &&
	    strstr(dpg_last_error(ctx), "allreduce #1 (4 x f32, sum)") != NULL &&
	    strstr(dpg_last_error(ctx), rank == 0 ? "rank 1" : "rank 0") != NULL,
	    "message: %s", dpg_last_error(ctx));
	dpg_finalize(ctx);
}

static void test_refused_call_does_not_pair(void **state)
{
	struct job j = { .n = 2, .body = body_refused_call, .timeout_s = 20, .limit_s = 40 };

	(void)state;
	expect_all_ok(&j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_single_process_no_environment),
		cmocka_unit_test(test_init_finalize_1_2_3_5),
		cmocka_unit_test(test_init_after_finalize),
		cmocka_unit_test(test_inconsistent_env),
		cmocka_unit_test(test_wrong_secret),
		cmocka_unit_test(test_duplicate_rank),
		cmocka_unit_test(test_world_size_mismatch),
		cmocka_unit_test(test_world_size_mismatch_rank0_larger),
		cmocka_unit_test(test_unresolvable_master_same_status),
		cmocka_unit_test(test_foreign_service_on_master_port),
		cmocka_unit_test(test_bad_arguments),
		cmocka_unit_test(test_last_error),
		cmocka_unit_test(test_calls_after_finalize),
		cmocka_unit_test(test_collectives),
		cmocka_unit_test(test_all_gather_bytes),
		cmocka_unit_test(test_comm_split_parity),
		cmocka_unit_test(test_mesh_2x2),
		cmocka_unit_test(test_dead_rank),
		cmocka_unit_test(test_late_death),
		cmocka_unit_test(test_abort_from_thread),
		cmocka_unit_test(test_refused_call_does_not_pair),
	};

	setvbuf(stdout, NULL, _IOLBF, 0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
