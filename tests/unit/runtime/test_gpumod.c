/* SPDX-License-Identifier: BSD-3-Clause */
/* test_gpumod.c - loading the GPU module dpg-cuda.so (lib/runtime/gpumod.c)
 * and what dpg_init makes of it, on any machine: the module absent, present
 * but needing a library that is not there, of another ABI, not a module at
 * all (fakes built by tests/unit/local.mk; the loader keeps what it
 * loaded mapped, so each fake is its own library), and the real one where configure
 * built it (CUDA and NCCL present, a GPU or not). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dpg.h"
#include "gpumod.h"
#include "../testenv.h"

#define FAKES DPG_TEST_FAKE_DIR
#define ABSENT_PATH FAKES "/no-such-dir/dpg-cuda.so"

/* ------------------------------------------------ helpers */

/* The message of a failed dpg_gpumod_open on path. */
static const char *open_fails(const char *path, struct dpg_err *e)
{
	struct dpg_gpumod_lib lib;

	setenv("DPG_CUDA_MODULE", path, 1);
	memset(e, 0, sizeof(*e));
	assert_int_equal(dpg_gpumod_open(&lib, e), -DPG_ERR_UNSUPPORTED);
	assert_null(lib.handle);
	assert_null(lib.t);
	printf("# %s\n", e->msg);
	assert_null(strchr(e->msg, '\n'));
	assert_non_null(strstr(e->msg, path));
	assert_non_null(strstr(e->msg, "apt-get install libdpg0-cuda"));
	assert_non_null(strstr(e->msg, "dnf install dpg-cuda"));
	return e->msg;
}

/* A one-rank job with backend (DPG_BACKEND) and CUDA_VISIBLE_DEVICES=cvd. */
static void one_rank(const char *backend, const char *cvd)
{
	clean_env();
	setenv("RANK", "0", 1);
	setenv("WORLD_SIZE", "1", 1);
	setenv("DPG_TIMEOUT", "5", 1);
	setenv("DPG_BACKEND", backend, 1);
	if (cvd != NULL)
		setenv("CUDA_VISIBLE_DEVICES", cvd, 1);
	else
		unsetenv("CUDA_VISIBLE_DEVICES");
}

/* dpg_init with stderr captured into err_out (what it printed). */
static dpg_status_t init_capture(dpg_ctx_t **ctx, char *err_out, size_t len)
{
	char path[] = "/tmp/dpg-test-gpumod-XXXXXX";
	int fd = mkstemp(path), saved = dup(2);
	dpg_status_t st;
	ssize_t n;

	assert_true(fd >= 0 && saved >= 0);
	unlink(path);
	fflush(stderr);
	assert_int_equal(dup2(fd, 2), 2);
	st = dpg_init(NULL, ctx);
	fflush(stderr);
	assert_int_equal(dup2(saved, 2), 2);
	close(saved);
	n = pread(fd, err_out, len - 1, 0);
	err_out[n > 0 ? n : 0] = '\0';
	close(fd);
	printf("# dpg_init -> %s: '%s'; stderr: '%s'\n", dpg_strerror(st),
	       dpg_last_error(*ctx), err_out);
	return st;
}

static int lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* ------------------------------------------------ the loader */

static void test_path_default_and_env(void **state)
{
	(void)state;
	unsetenv("DPG_CUDA_MODULE");
	assert_string_equal(dpg_gpumod_path(), DPG_TEST_DEFAULT_MODULE);
	setenv("DPG_CUDA_MODULE", "", 1);	/* empty: the default */
	assert_string_equal(dpg_gpumod_path(), DPG_TEST_DEFAULT_MODULE);
	setenv("DPG_CUDA_MODULE", "/x/y.so", 1);
	assert_string_equal(dpg_gpumod_path(), "/x/y.so");
	unsetenv("DPG_CUDA_MODULE");
}

static void test_open_absent(void **state)
{
	struct dpg_err e;

	(void)state;
	assert_non_null(strstr(open_fails(ABSENT_PATH, &e), "No such file"));
}

static void test_open_missing_library(void **state)
{
	struct dpg_err e;

	(void)state;
	/* dlerror names the library the module needs, not the module */
	assert_non_null(strstr(open_fails(FAKES "/nolib.so", &e),
			       "libdpgtest-absent.so.0"));
}

static void test_open_wrong_abi(void **state)
{
	struct dpg_err e;
	const char *m;

	(void)state;
	m = open_fails(FAKES "/badabi.so", &e);
	assert_non_null(strstr(m, "ABI 999"));
	assert_non_null(strstr(m, "another dpg version"));
}

static void test_open_not_a_module(void **state)
{
	struct dpg_err e;

	(void)state;
	assert_non_null(strstr(open_fails(FAKES "/notmod.so", &e), DPG_GPUMOD_ENTRY));
}

/* ------------------------------------------------ dpg_init without a module */

static void test_init_nccl_without_module(void **state)
{
	char out[2048];
	dpg_ctx_t *ctx = NULL;
	const char *msg;

	(void)state;
	one_rank("nccl", "0");
	setenv("DPG_CUDA_MODULE", ABSENT_PATH, 1);
	assert_int_equal(init_capture(&ctx, out, sizeof(out)), DPG_ERR_UNSUPPORTED);
	msg = dpg_last_error(ctx);
	assert_null(strchr(msg, '\n'));
	assert_non_null(strstr(msg, "NCCL backend was asked for"));
	assert_non_null(strstr(msg, ABSENT_PATH));
	assert_non_null(strstr(msg, "No such file"));
	assert_non_null(strstr(msg, "apt-get install libdpg0-cuda"));
	assert_non_null(strstr(msg, "NCCL runtimes"));
	assert_int_equal(dpg_finalize(ctx), DPG_OK);
}

static void test_init_auto_without_module(void **state)
{
	char out[2048];
	dpg_ctx_t *ctx = NULL;

	(void)state;
	/* a task with a GPU: the CPU backend and one notice naming why */
	one_rank("auto", "0");
	setenv("DPG_CUDA_MODULE", ABSENT_PATH, 1);
	assert_int_equal(init_capture(&ctx, out, sizeof(out)), DPG_OK);
	assert_int_equal(dpg_backend(ctx), DPG_BACKEND_CPU);
	assert_int_equal(lines(out), 1);
	assert_non_null(strstr(out, "notice: using the CPU backend"));
	assert_non_null(strstr(out, ABSENT_PATH));
	assert_non_null(strstr(out, "libdpg0-cuda"));
	assert_int_equal(dpg_finalize(ctx), DPG_OK);

	/* a task without a GPU, or a CPU job: no module looked for, no notice */
	one_rank("auto", "");
	setenv("DPG_CUDA_MODULE", ABSENT_PATH, 1);
	assert_int_equal(init_capture(&ctx, out, sizeof(out)), DPG_OK);
	assert_int_equal(dpg_backend(ctx), DPG_BACKEND_CPU);
	assert_string_equal(out, "");
	assert_int_equal(dpg_finalize(ctx), DPG_OK);
	one_rank("cpu", "0");
	setenv("DPG_CUDA_MODULE", ABSENT_PATH, 1);
	assert_int_equal(init_capture(&ctx, out, sizeof(out)), DPG_OK);
	assert_string_equal(out, "");
	assert_int_equal(dpg_finalize(ctx), DPG_OK);
}

static void test_init_nccl_module_missing_library(void **state)
{
	char out[2048];
	dpg_ctx_t *ctx = NULL;

	(void)state;
	one_rank("nccl", "0");
	setenv("DPG_CUDA_MODULE", FAKES "/nolib.so", 1);
	assert_int_equal(init_capture(&ctx, out, sizeof(out)), DPG_ERR_UNSUPPORTED);
	assert_non_null(strstr(dpg_last_error(ctx), "libdpgtest-absent.so.0"));
	assert_int_equal(dpg_finalize(ctx), DPG_OK);
	one_rank("auto", "0");
	setenv("DPG_CUDA_MODULE", FAKES "/badabi.so", 1);
	assert_int_equal(init_capture(&ctx, out, sizeof(out)), DPG_OK);
	assert_int_equal(dpg_backend(ctx), DPG_BACKEND_CPU);
	assert_int_equal(lines(out), 1);
	assert_non_null(strstr(out, "ABI 999"));
	assert_int_equal(dpg_finalize(ctx), DPG_OK);
}

/* ------------------------------------------------ the real module */

static void test_real_module(void **state)
{
#ifdef DPG_TEST_CUDA_MODULE
	struct dpg_gpumod_lib lib;
	struct dpg_err e = { { 0 } };
	char out[2048];
	dpg_ctx_t *ctx = NULL;
	dpg_status_t st;
	int ndev;

	(void)state;
	setenv("DPG_CUDA_MODULE", DPG_TEST_CUDA_MODULE, 1);
	if (dpg_gpumod_open(&lib, &e) != 0)
		fail_msg("the module built here does not load: %s", e.msg);
	assert_int_equal(lib.t->abi, DPG_GPUMOD_ABI);
	ndev = lib.t->device_count();
	printf("# %s: built with %s, kernels %s, %d CUDA device(s)\n",
	       DPG_TEST_CUDA_MODULE, lib.t->built_with, lib.t->k ? "yes" : "no",
	       ndev);
	dpg_gpumod_close(&lib);

	one_rank("nccl", "0");
	setenv("DPG_CUDA_MODULE", DPG_TEST_CUDA_MODULE, 1);
	st = init_capture(&ctx, out, sizeof(out));
	if (ndev == 0) {
		/* loads, and says "no GPU" cleanly */
		assert_int_equal(st, DPG_ERR_UNSUPPORTED);
		assert_non_null(strstr(dpg_last_error(ctx), "no usable GPU"));
		assert_null(strchr(dpg_last_error(ctx), '\n'));
	} else {
		assert_int_equal(st, DPG_OK);
		assert_int_equal(dpg_backend(ctx), DPG_BACKEND_NCCL);
	}
	assert_int_equal(dpg_finalize(ctx), DPG_OK);

	/* auto: the NCCL backend where there is a GPU, else the CPU one,
	 * silently (the module did load) */
	one_rank("auto", "0");
	setenv("DPG_CUDA_MODULE", DPG_TEST_CUDA_MODULE, 1);
	assert_int_equal(init_capture(&ctx, out, sizeof(out)), DPG_OK);
	assert_int_equal(dpg_backend(ctx),
			 ndev > 0 ? DPG_BACKEND_NCCL : DPG_BACKEND_CPU);
	assert_null(strstr(out, "notice"));
	assert_int_equal(dpg_finalize(ctx), DPG_OK);
#else
	(void)state;
	printf("# SKIP: dpg was configured without CUDA/NCCL: no dpg-cuda.so to load\n");
	skip();
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_path_default_and_env),
		cmocka_unit_test(test_open_absent),
		cmocka_unit_test(test_open_missing_library),
		cmocka_unit_test(test_open_wrong_abi),
		cmocka_unit_test(test_open_not_a_module),
		cmocka_unit_test(test_init_nccl_without_module),
		cmocka_unit_test(test_init_auto_without_module),
		cmocka_unit_test(test_init_nccl_module_missing_library),
		cmocka_unit_test(test_real_module),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
