/* SPDX-License-Identifier: BSD-3-Clause */
/* test_dpg_plan.c - tests of tools/dpg_plan.c, the dpg-plan command: runs
 * the built dpg-plan (DPG_PLAN_PATH) in a child process and checks its
 * output, exit status and messages for each mode. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "contract.h"
#include "port.h"

#ifndef DPG_PLAN_PATH
#error "DPG_PLAN_PATH (the built dpg-plan) must be defined"
#endif

#define assert_contains(haystack, needle)                                   \
	do {                                                                \
		const char *h_ = (haystack), *n_ = (needle);                \
		if (strstr(h_, n_) == NULL)                                 \
			fail_msg("expected '%s' in '%s'", n_, h_);          \
	} while (0)

struct result {
	int status;	/* exit status, or 128 + signal */
	char *out, *err;
};

/* Output buffers not yet freed when an assertion ends a test early; the
 * teardown frees them so that a failing test reports no leaks.  (The
 * buffers are tracked, not the struct result, which lives on the stack of a
 * test function that may be gone by then.) */
#define LIVE_MAX 16
static char *live[LIVE_MAX];

static void live_forget(const char *p)
{
	for (size_t i = 0; p != NULL && i < LIVE_MAX; i++)
		if (live[i] == p)
			live[i] = NULL;
}

static void live_add(char *p)
{
	for (size_t i = 0; i < LIVE_MAX; i++)
		if (live[i] == NULL) {
			live[i] = p;
			return;
		}
	fail_msg("more than %d output buffers alive", LIVE_MAX);
}

static void result_free(struct result *r)
{
	live_forget(r->out);
	live_forget(r->err);
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
}

static void result_track(struct result *r)
{
	live_add(r->out);
	live_add(r->err);
}

static char temp_path[64];

static int teardown(void **state)
{
	(void)state;
	if (temp_path[0] != '\0')
		(void)unlink(temp_path);	/* left by a failed test, if any */
	temp_path[0] = '\0';
	for (size_t i = 0; i < LIVE_MAX; i++) {
		free(live[i]);
		live[i] = NULL;
	}
	return 0;
}

/* Read a whole file descriptor (from offset 0) into a NUL-terminated string. */
static char *slurp(int fd)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);
	ssize_t n;

	assert_non_null(buf);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	while ((n = read(fd, buf + len, cap - len - 1)) != 0) {
		if (n < 0) {
			assert_int_equal(errno, EINTR);
			continue;
		}
		len += (size_t)n;
		if (cap - len < 2) {
			cap *= 2;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
	}
	buf[len] = '\0';
	return buf;
}

static int temp_fd(void)
{
	char path[] = "/tmp/dpg-test-cli-XXXXXX";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(unlink(path), 0);
	return fd;
}

/* Pass-through variables the child may need (sanitizer settings, a
 * libtool wrapper's search path); nothing SLURM_* or MASTER_* leaks in. */
static const char *const keep_env[] = {
	"PATH", "LD_LIBRARY_PATH", "ASAN_OPTIONS", "UBSAN_OPTIONS",
	"LSAN_OPTIONS", "TMPDIR",
};
#define KEEP_ENV_N (sizeof(keep_env) / sizeof(keep_env[0]))

/* Run dpg-plan with args (NULL-terminated) and extra "NAME=VALUE" entries
 * (NULL-terminated, may be NULL) as its whole environment. */
static void run_plan(struct result *r, const char *const *args,
		     const char *const *extra_env)
{
	const char *argv[64];
	char *envp[64];
	char *owned[KEEP_ENV_N];
	size_t na = 0, ne = 0, no = 0;
	int out_fd = temp_fd(), err_fd = temp_fd();
	pid_t pid;
	int st;

	argv[na++] = DPG_PLAN_PATH;
	for (; args != NULL && *args != NULL; args++) {
		assert_true(na < 63);
		argv[na++] = *args;
	}
	argv[na] = NULL;
	for (size_t i = 0; i < KEEP_ENV_N; i++) {
		const char *v = getenv(keep_env[i]);
		size_t len;

		if (v == NULL)
			continue;
		len = strlen(keep_env[i]) + strlen(v) + 2;
		owned[no] = malloc(len);
		assert_non_null(owned[no]);
		snprintf(owned[no], len, "%s=%s", keep_env[i], v);
		envp[ne++] = owned[no++];
	}
	for (; extra_env != NULL && *extra_env != NULL; extra_env++) {
		assert_true(ne < 63);
		envp[ne++] = (char *)(uintptr_t)*extra_env;
	}
	envp[ne] = NULL;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDONLY);

		if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(out_fd, 1) < 0 ||
		    dup2(err_fd, 2) < 0)
			_exit(126);
		execve(DPG_PLAN_PATH, (char *const *)(uintptr_t)argv, envp);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		assert_int_equal(errno, EINTR);
	for (size_t i = 0; i < no; i++)
		free(owned[i]);
	if (WIFEXITED(st))
		r->status = WEXITSTATUS(st);
	else
		r->status = 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	r->out = slurp(out_fd);
	r->err = slurp(err_fd);
	result_track(r);
	close(out_fd);
	close(err_fd);
	if (r->status == 127 || r->status == 126)
		fail_msg("could not execute %s", DPG_PLAN_PATH);
}

#define ARGS(...) ((const char *const[]){ __VA_ARGS__, NULL })

static void expect_success(const struct result *r)
{
	if (r->status != 0)
		fail_msg("dpg-plan exited %d; stderr: %s", r->status, r->err);
	assert_string_equal(r->err, "");
}

/* Failure: non-zero status (not a crash), nothing on stdout, exactly one
 * line on stderr, starting with "dpg-plan: ". */
static void expect_one_line_failure(const struct result *r)
{
	const char *nl;

	if (r->status == 0)
		fail_msg("dpg-plan succeeded; stdout: %s", r->out);
	assert_true(r->status < 128);
	assert_string_equal(r->out, "");
	if (strncmp(r->err, "dpg-plan: ", 10) != 0)
		fail_msg("stderr does not start with 'dpg-plan: ': %s", r->err);
	nl = strchr(r->err, '\n');
	if (nl == NULL || nl[1] != '\0')
		fail_msg("stderr is not exactly one line: '%s'", r->err);
}

static size_t count_of(const char *s, const char *needle)
{
	size_t n = 0, len = strlen(needle);

	for (const char *p = strstr(s, needle); p != NULL; p = strstr(p + len, needle))
		n++;
	return n;
}

/* ------------------------------------------------------ table parsing */

struct row {
	unsigned rank, node_rank, local_rank, lws, port;
	char node[64], addr[64];
};

/* Parse the text table: header comment, column header, then rows. */
static size_t parse_table(const char *out, struct row *rows, size_t cap,
			  char *header, size_t hlen)
{
	const char *line = out;
	size_t n = 0, lineno = 0;

	while (*line != '\0') {
		const char *end = strchr(line, '\n');
		char buf[512];
		size_t len;

		assert_non_null(end);
		len = (size_t)(end - line);
		assert_true(len < sizeof(buf));
		memcpy(buf, line, len);
		buf[len] = '\0';
		if (lineno == 0) {
			assert_true(buf[0] == '#');
			snprintf(header, hlen, "%s", buf);
		} else if (lineno == 1) {
			assert_true(strncmp(buf, "RANK ", 5) == 0);
			assert_contains(buf, "LOCAL_WORLD_SIZE");
			assert_contains(buf, "MASTER_PORT");
		} else {
			struct row *w = &rows[n];
			char extra[8];

			assert_true(n < cap);
			if (sscanf(buf, "%u %63s %u %u %u %63s %u %7s", &w->rank,
				   w->node, &w->node_rank, &w->local_rank, &w->lws,
				   w->addr, &w->port, extra) != 7)
				fail_msg("cannot parse row '%s'", buf);
			n++;
		}
		lineno++;
		line = end + 1;
	}
	return n;
}

static struct dpg_port_range range_of(uint16_t lo, uint16_t hi)
{
	struct dpg_port_range r = { lo, hi };

	return r;
}

/* ---------------------------------------------------------------- tests */

static void test_expand(void **state)
{
	struct result r;

	(void)state;
	run_plan(&r, ARGS("--expand", "n[1-3],gpu-[01-02]"), NULL);
	expect_success(&r);
	assert_string_equal(r.out, "n1\nn2\nn3\ngpu-01\ngpu-02\n");
	result_free(&r);

	run_plan(&r, ARGS("--expand", "login1"), NULL);
	expect_success(&r);
	assert_string_equal(r.out, "login1\n");
	result_free(&r);
}

static void test_table(void **state)
{
	struct result r;
	struct row rows[16];
	char header[512], want[512];
	unsigned port = dpg_port_for_step(42, 1, range_of(DPG_PORT_DEFAULT_LO,
							  DPG_PORT_DEFAULT_HI));
	size_t n;

	(void)state;
	run_plan(&r, ARGS("--nodelist", "n[1-3]", "--ntasks", "6", "--job-id", "42",
			  "--step-id", "1"), NULL);
	expect_success(&r);
	n = parse_table(r.out, rows, 16, header, sizeof(header));
	assert_int_equal(n, 6);
	snprintf(want, sizeof(want), "# job 42 step 1: 6 tasks on 3 nodes (n[1-3]); "
		 "MASTER_ADDR=n1 MASTER_PORT=%u (formula)", port);
	assert_string_equal(header, want);
	for (unsigned i = 0; i < 6; i++) {
		char node[8];

		snprintf(node, sizeof(node), "n%u", i / 2 + 1);
		assert_int_equal(rows[i].rank, i);
		assert_string_equal(rows[i].node, node);
		assert_int_equal(rows[i].node_rank, i / 2);
		assert_int_equal(rows[i].local_rank, i % 2);
		assert_int_equal(rows[i].lws, 2);
		assert_string_equal(rows[i].addr, "n1");
		assert_int_equal(rows[i].port, port);
	}
	result_free(&r);
}

static void test_json(void **state)
{
	struct result r;
	unsigned port = dpg_port_for_step(42, 1, range_of(DPG_PORT_DEFAULT_LO,
							  DPG_PORT_DEFAULT_HI));
	char needle[128];
	int depth = 0, min_depth = 0;
	int in_str = 0;

	(void)state;
	run_plan(&r, ARGS("--nodelist", "n[1-3]", "--ntasks", "6", "--job-id", "42",
			  "--step-id", "1", "--json"), NULL);
	expect_success(&r);
	/* one JSON object on one line */
	assert_true(r.out[0] == '{');
	assert_int_equal(count_of(r.out, "\n"), 1);
	assert_true(strlen(r.out) >= 3);
	assert_string_equal(r.out + strlen(r.out) - 3, "]}\n");
	for (const char *p = r.out; *p != '\0'; p++) {
		if (in_str) {
			if (*p == '\\')
				p++;
			else if (*p == '"')
				in_str = 0;
			continue;
		}
		if (*p == '"')
			in_str = 1;
		else if (*p == '{' || *p == '[')
			depth++;
		else if (*p == '}' || *p == ']')
			depth--;
		if (depth < min_depth)
			min_depth = depth;
	}
	assert_int_equal(in_str, 0);
	assert_int_equal(depth, 0);
	assert_int_equal(min_depth, 0);

	assert_contains(r.out, "\"job_id\":42,");
	assert_contains(r.out, "\"step_id\":1,");
	assert_contains(r.out, "\"world_size\":6,");
	assert_contains(r.out, "\"num_nodes\":3,");
	assert_contains(r.out, "\"nodelist\":\"n[1-3]\"");
	assert_contains(r.out, "\"master_addr\":\"n1\"");
	snprintf(needle, sizeof(needle), "\"master_port\":%u,", port);
	assert_contains(r.out, needle);
	assert_contains(r.out, "\"port_source\":\"formula\"");
	assert_contains(r.out, "\"tasks\":[");

	assert_int_equal(count_of(r.out, "\"rank\":"), 6);
	assert_int_equal(count_of(r.out, "\"env\":{"), 6);
	snprintf(needle, sizeof(needle), "\"MASTER_PORT\":\"%u\"", port);
	assert_int_equal(count_of(r.out, needle), 6);
	snprintf(needle, sizeof(needle), "\"DPG_MASTER_PORT\":\"%u\"", port);
	assert_int_equal(count_of(r.out, needle), 6);
	/* the opening quote keeps DPG_MASTER_ADDR etc. out of these counts */
	assert_int_equal(count_of(r.out, "\"MASTER_ADDR\":\"n1\""), 6);
	assert_int_equal(count_of(r.out, "\"DPG_MASTER_ADDR\":\"n1\""), 6);
	assert_int_equal(count_of(r.out, "\"WORLD_SIZE\":\"6\""), 6);
	assert_int_equal(count_of(r.out, "\"DPG_WORLD_SIZE\":\"6\""), 6);
	assert_int_equal(count_of(r.out, "\"LOCAL_WORLD_SIZE\":\"2\""), 6);
	assert_int_equal(count_of(r.out, "\"GROUP_WORLD_SIZE\":\"3\""), 6);
	assert_int_equal(count_of(r.out, "\"DPG_JOB_ID\":\"42\""), 6);
	assert_int_equal(count_of(r.out, "\"DPG_STEP_ID\":\"1\""), 6);
	assert_int_equal(count_of(r.out, "\"DPG_CONTRACT\":\"1\""), 6);
	assert_int_equal(count_of(r.out, "\"DPG_GPUS_PER_TASK\":\"0\""), 6);
	assert_int_equal(count_of(r.out, "\"ROLE_NAME\":\"default\""), 6);
	assert_int_equal(count_of(r.out, "TORCHELASTIC_USE_AGENT_STORE"), 0);
	for (unsigned i = 0; i < 6; i++) {
		snprintf(needle, sizeof(needle),
			 "{\"rank\":%u,\"node\":\"n%u\",\"node_rank\":%u,"
			 "\"local_rank\":%u,\"local_world_size\":2,\"env\":{"
			 "\"RANK\":\"%u\",\"LOCAL_RANK\":\"%u\",", i, i / 2 + 1,
			 i / 2, i % 2, i, i % 2);
		assert_int_equal(count_of(r.out, needle), 1);
		snprintf(needle, sizeof(needle), "\"DPG_RANK\":\"%u\"", i);
		assert_int_equal(count_of(r.out, needle), 1);
	}
	result_free(&r);
}

static void test_tasks_per_node(void **state)
{
	struct result r;
	struct row rows[16];
	char header[512];
	static const unsigned lws[] = { 3, 3, 3, 2, 2 };
	static const unsigned node_rank[] = { 0, 0, 0, 1, 1 };
	static const unsigned local[] = { 0, 1, 2, 0, 1 };

	(void)state;
	run_plan(&r, ARGS("--nodelist", "n[1-2]", "--tasks-per-node", "3,2"), NULL);
	expect_success(&r);
	assert_int_equal(parse_table(r.out, rows, 16, header, sizeof(header)), 5);
	assert_contains(header, ": 5 tasks on 2 nodes (n[1-2]);");
	for (unsigned i = 0; i < 5; i++) {
		assert_int_equal(rows[i].rank, i);
		assert_int_equal(rows[i].lws, lws[i]);
		assert_int_equal(rows[i].node_rank, node_rank[i]);
		assert_int_equal(rows[i].local_rank, local[i]);
		assert_string_equal(rows[i].node, node_rank[i] ? "n2" : "n1");
	}
	result_free(&r);

	/* the same in JSON */
	run_plan(&r, ARGS("--nodelist", "n[1-2]", "--tasks-per-node", "3,2", "--json"),
		 NULL);
	expect_success(&r);
	assert_int_equal(count_of(r.out, "\"LOCAL_WORLD_SIZE\":\"3\""), 3);
	assert_int_equal(count_of(r.out, "\"LOCAL_WORLD_SIZE\":\"2\""), 2);
	assert_int_equal(count_of(r.out, "\"WORLD_SIZE\":\"5\""), 5);
	result_free(&r);

	/* --ntasks 5 on 2 nodes spreads 3,2 as well */
	run_plan(&r, ARGS("--nodelist", "n[1-2]", "--ntasks", "5"), NULL);
	expect_success(&r);
	assert_int_equal(parse_table(r.out, rows, 16, header, sizeof(header)), 5);
	for (unsigned i = 0; i < 5; i++)
		assert_int_equal(rows[i].lws, lws[i]);
	result_free(&r);
}

static void test_distribution_cyclic(void **state)
{
	struct result r;
	struct row rows[16];
	char header[512];

	(void)state;
	run_plan(&r, ARGS("--nodelist", "n[1-3]", "--ntasks", "6", "--distribution",
			  "cyclic"), NULL);
	expect_success(&r);
	assert_int_equal(parse_table(r.out, rows, 16, header, sizeof(header)), 6);
	assert_contains(header, "MASTER_ADDR=n1 ");
	for (unsigned i = 0; i < 6; i++) {
		char node[8];

		snprintf(node, sizeof(node), "n%u", i % 3 + 1);
		assert_int_equal(rows[i].rank, i);
		assert_int_equal(rows[i].node_rank, i % 3);
		assert_int_equal(rows[i].local_rank, i / 3);
		assert_int_equal(rows[i].lws, 2);
		assert_string_equal(rows[i].node, node);
		assert_string_equal(rows[i].addr, "n1");
	}
	result_free(&r);

	/* arbitrary has no rank-0 node to derive MASTER_ADDR from */
	run_plan(&r, ARGS("--nodelist", "n[1-3]", "--ntasks", "6", "--distribution",
			  "arbitrary"), NULL);
	expect_one_line_failure(&r);
	assert_contains(r.err, "arbitrary");
	result_free(&r);
}

static void test_conf_port_range(void **state)
{
	struct result r;
	struct row rows[16];
	char header[512];
	unsigned port = dpg_port_for_step(42, 1, range_of(30000, 30010));

	(void)state;
	run_plan(&r, ARGS("--nodelist", "n[1-3]", "--ntasks", "6", "--job-id", "42",
			  "--step-id", "1", "--conf", "port_range=30000-30010"), NULL);
	expect_success(&r);
	assert_int_equal(parse_table(r.out, rows, 16, header, sizeof(header)), 6);
	assert_in_range(port, 30000, 30010);
	for (unsigned i = 0; i < 6; i++)
		assert_int_equal(rows[i].port, port);
	result_free(&r);

	/* --port wins over the range */
	run_plan(&r, ARGS("--nodelist", "n[1-3]", "--ntasks", "6", "--conf",
			  "port_range=30000-30010", "--port", "29500"), NULL);
	expect_success(&r);
	assert_int_equal(parse_table(r.out, rows, 16, header, sizeof(header)), 6);
	assert_contains(header, "MASTER_PORT=29500 (option)");
	for (unsigned i = 0; i < 6; i++)
		assert_int_equal(rows[i].port, 29500);
	result_free(&r);

	/* other conf keys: master_addr rule, default GPUs per task */
	run_plan(&r, ARGS("--nodelist", "n[1-2]", "--ntasks", "2", "--json", "--conf",
			  "master_addr=%n-ib", "--conf", "default_gpus_per_task=2"), NULL);
	expect_success(&r);
	assert_int_equal(count_of(r.out, "\"MASTER_ADDR\":\"n1-ib\""), 2);
	assert_int_equal(count_of(r.out, "\"DPG_GPUS_PER_TASK\":\"2\""), 2);
	result_free(&r);

	/* --gpus-per-task wins over default_gpus_per_task */
	run_plan(&r, ARGS("--nodelist", "n[1-2]", "--ntasks", "2", "--json", "--conf",
			  "default_gpus_per_task=2", "--gpus-per-task", "1"), NULL);
	expect_success(&r);
	assert_int_equal(count_of(r.out, "\"DPG_GPUS_PER_TASK\":\"1\""), 2);
	result_free(&r);
}

static void test_conf_bad_key(void **state)
{
	struct result r;

	(void)state;
	run_plan(&r, ARGS("--nodelist", "n[1-3]", "--ntasks", "6", "--conf", "bogus=1"),
		 NULL);
	expect_one_line_failure(&r);
	assert_contains(r.err, "bogus");
	result_free(&r);

	run_plan(&r, ARGS("--nodelist", "n[1-3]", "--ntasks", "6", "--conf",
			  "port_range=5-1"), NULL);
	expect_one_line_failure(&r);
	assert_contains(r.err, "port_range");
	assert_contains(r.err, "LO-HI");
	result_free(&r);
}

static void test_bad_nodelist(void **state)
{
	static const char *const bad[] = { "n[1-", "n[3-1]", "n[1-3]x", "", "n 1" };
	struct result r;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		run_plan(&r, ARGS("--nodelist", bad[i], "--ntasks", "2"), NULL);
		expect_one_line_failure(&r);
		result_free(&r);
	}
	run_plan(&r, ARGS("--expand", "n[1-"), NULL);
	expect_one_line_failure(&r);
	result_free(&r);
}

static void test_bad_arguments(void **state)
{
	struct result r;

	(void)state;
	/* fewer tasks than nodes */
	run_plan(&r, ARGS("--nodelist", "n[1-3]", "--ntasks", "2"), NULL);
	expect_one_line_failure(&r);
	result_free(&r);
	/* a nodelist without a task count */
	run_plan(&r, ARGS("--nodelist", "n[1-3]"), NULL);
	expect_one_line_failure(&r);
	result_free(&r);
	/* tasks per node that do not match the nodes */
	run_plan(&r, ARGS("--nodelist", "n[1-3]", "--tasks-per-node", "2(x2)"), NULL);
	expect_one_line_failure(&r);
	result_free(&r);
	run_plan(&r, ARGS("--nodelist", "n[1-2]", "--ntasks", "2", "--port", "80"), NULL);
	expect_one_line_failure(&r);
	assert_contains(r.err, "'80'");
	result_free(&r);
	run_plan(&r, ARGS("--nodelist", "n[1-2]", "--ntasks", "2", "--gpus-per-task",
			  "65"), NULL);
	expect_one_line_failure(&r);
	result_free(&r);
	run_plan(&r, ARGS("--nodelist", "n[1-2]", "--ntasks", "x"), NULL);
	expect_one_line_failure(&r);
	assert_contains(r.err, "--ntasks");
	result_free(&r);
	/* no step at all: no arguments and no SLURM_* variables */
	run_plan(&r, NULL, NULL);
	expect_one_line_failure(&r);
	result_free(&r);
}

/* Inside srun: the step comes from SLURM_* variables. */
static void test_env_mode(void **state)
{
	static const char *const env[] = {
		"SLURM_STEP_NODELIST=n[1-3]", "SLURM_STEP_NUM_TASKS=6",
		"SLURM_STEP_NUM_NODES=3", "SLURM_STEP_TASKS_PER_NODE=2(x3)",
		"SLURM_JOB_ID=42", "SLURM_STEP_ID=1",
		/* the job's own (larger) allocation must not be used */
		"SLURM_JOB_NODELIST=n[1-8]", "SLURM_NODELIST=n[1-8]",
		"SLURM_NTASKS=16", "SLURM_JOB_NUM_NODES=8", "SLURM_NNODES=8",
		"SLURM_TASKS_PER_NODE=2(x8)",
		NULL,
	};
	struct result want, got;

	(void)state;
	run_plan(&want, ARGS("--nodelist", "n[1-3]", "--ntasks", "6", "--job-id", "42",
			     "--step-id", "1"), NULL);
	expect_success(&want);
	run_plan(&got, NULL, env);
	expect_success(&got);
	assert_string_equal(got.out, want.out);
	result_free(&got);
	result_free(&want);

	run_plan(&want, ARGS("--nodelist", "n[1-3]", "--ntasks", "6", "--job-id", "42",
			     "--step-id", "1", "--json"), NULL);
	expect_success(&want);
	run_plan(&got, ARGS("--json"), env);
	expect_success(&got);
	assert_string_equal(got.out, want.out);
	result_free(&got);
	result_free(&want);
}

/* Inside srun with uneven counts and a user MASTER_PORT. */
static void test_env_mode_uneven_user_port(void **state)
{
	static const char *const env[] = {
		"SLURM_STEP_NODELIST=gpu-[007-008]", "SLURM_STEP_NUM_TASKS=5",
		"SLURM_STEP_NUM_NODES=2", "SLURM_STEP_TASKS_PER_NODE=3,2",
		"SLURM_JOB_ID=7", "SLURM_STEP_ID=0", "MASTER_PORT=29400",
		NULL,
	};
	struct result r;
	struct row rows[16];
	char header[512];

	(void)state;
	run_plan(&r, NULL, env);
	expect_success(&r);
	assert_int_equal(parse_table(r.out, rows, 16, header, sizeof(header)), 5);
	assert_contains(header, "MASTER_ADDR=gpu-007 MASTER_PORT=29400 (user)");
	for (unsigned i = 0; i < 5; i++) {
		assert_int_equal(rows[i].lws, i < 3 ? 3 : 2);
		assert_int_equal(rows[i].port, 29400);
		assert_string_equal(rows[i].addr, "gpu-007");
	}
	result_free(&r);
}

/* Inside sbatch, an explicit --distribution must not be dropped silently:
 * dpg-plan either plans the cyclic layout or refuses the option. */
static void test_env_mode_distribution_option(void **state)
{
	static const char *const env[] = {
		"SLURM_STEP_NODELIST=n[1-3]", "SLURM_STEP_NUM_TASKS=6",
		"SLURM_STEP_NUM_NODES=3", "SLURM_STEP_TASKS_PER_NODE=2(x3)",
		"SLURM_JOB_ID=42", "SLURM_STEP_ID=1",
		NULL,
	};
	struct result r;
	struct row rows[16];
	char header[512];

	(void)state;
	run_plan(&r, ARGS("--distribution", "cyclic"), env);
	if (r.status != 0) {
		expect_one_line_failure(&r);
		assert_contains(r.err, "--distribution");
	} else {
		assert_int_equal(parse_table(r.out, rows, 16, header, sizeof(header)), 6);
		for (unsigned i = 0; i < 6; i++)
			if (rows[i].node_rank != i % 3)
				fail_msg("--distribution cyclic ignored in env mode: rank %u "
					 "on node %u, expected %u", i, rows[i].node_rank, i % 3);
	}
	result_free(&r);

	/* SLURM_DISTRIBUTION from the environment is honoured */
	{
		static const char *const cyc[] = {
			"SLURM_STEP_NODELIST=n[1-3]", "SLURM_STEP_NUM_TASKS=6",
			"SLURM_STEP_NUM_NODES=3", "SLURM_STEP_TASKS_PER_NODE=2(x3)",
			"SLURM_JOB_ID=42", "SLURM_STEP_ID=1",
			"SLURM_DISTRIBUTION=cyclic", NULL,
		};

		run_plan(&r, NULL, cyc);
		expect_success(&r);
		assert_int_equal(parse_table(r.out, rows, 16, header, sizeof(header)), 6);
		for (unsigned i = 0; i < 6; i++)
			assert_int_equal(rows[i].node_rank, i % 3);
		result_free(&r);
	}
}

/* dpg-plan shows what the plugin would do: in a heterogeneous step the
 * plugin refuses, so the plan must fail the same way. */
static void test_env_mode_het(void **state)
{
	static const char *const env[] = {
		"SLURM_STEP_NODELIST=n[1-3]", "SLURM_STEP_NUM_TASKS=6",
		"SLURM_STEP_NUM_NODES=3", "SLURM_STEP_TASKS_PER_NODE=2(x3)",
		"SLURM_JOB_ID=42", "SLURM_STEP_ID=1", "SLURM_HET_SIZE=2",
		NULL,
	};
	struct result r;

	(void)state;
	run_plan(&r, NULL, env);
	expect_one_line_failure(&r);
	assert_contains(r.err, "heterogeneous");
	result_free(&r);
}

static char *write_temp(const char *text)
{
	char *path = temp_path;
	int fd;
	size_t len = strlen(text);

	snprintf(temp_path, sizeof(temp_path), "/tmp/dpg-test-plugstack-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	assert_int_equal(close(fd), 0);
	return path;
}

static void test_plugstack(void **state)
{
	struct result r;
	struct row rows[16];
	char header[512];
	unsigned port = dpg_port_for_step(42, 1, range_of(30000, 30010));
	char *path = write_temp("# site plugins\n"
				"required /usr/lib/slurm/other.so port_range=1-2\n"
				"optional /x/dpg.so port_range=30000-30010\n");

	(void)state;
	run_plan(&r, ARGS("--nodelist", "n[1-3]", "--ntasks", "6", "--job-id", "42",
			  "--step-id", "1", "--plugstack", path), NULL);
	expect_success(&r);
	assert_int_equal(parse_table(r.out, rows, 16, header, sizeof(header)), 6);
	for (unsigned i = 0; i < 6; i++)
		assert_int_equal(rows[i].port, port);
	result_free(&r);
	assert_int_equal(unlink(path), 0);

	/* a bad argument on the dpg.so line: the file and the key are named */
	path = write_temp("optional /x/dpg.so port_range=30000-30010 bogus=1\n");
	run_plan(&r, ARGS("--nodelist", "n[1-3]", "--ntasks", "6", "--plugstack", path),
		 NULL);
	expect_one_line_failure(&r);
	assert_contains(r.err, path);
	assert_contains(r.err, "bogus");
	result_free(&r);
	assert_int_equal(unlink(path), 0);

	/* no dpg.so line */
	path = write_temp("required /x/other.so\n");
	run_plan(&r, ARGS("--nodelist", "n[1-3]", "--ntasks", "6", "--plugstack", path),
		 NULL);
	expect_one_line_failure(&r);
	assert_contains(r.err, "dpg.so");
	result_free(&r);
	assert_int_equal(unlink(path), 0);

	/* a file that does not exist */
	run_plan(&r, ARGS("--nodelist", "n[1-3]", "--ntasks", "6", "--plugstack",
			  "/nonexistent/dpg-plugstack.conf"), NULL);
	assert_true(r.status != 0 && r.status < 128);
	assert_string_equal(r.out, "");
	assert_contains(r.err, "/nonexistent/dpg-plugstack.conf");
	result_free(&r);
}

static void test_help(void **state)
{
	struct result r;

	(void)state;
	run_plan(&r, ARGS("--help"), NULL);
	expect_success(&r);
	assert_contains(r.out, "usage: dpg-plan");
	result_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_expand, teardown),
		cmocka_unit_test_teardown(test_table, teardown),
		cmocka_unit_test_teardown(test_json, teardown),
		cmocka_unit_test_teardown(test_tasks_per_node, teardown),
		cmocka_unit_test_teardown(test_distribution_cyclic, teardown),
		cmocka_unit_test_teardown(test_conf_port_range, teardown),
		cmocka_unit_test_teardown(test_conf_bad_key, teardown),
		cmocka_unit_test_teardown(test_bad_nodelist, teardown),
		cmocka_unit_test_teardown(test_bad_arguments, teardown),
		cmocka_unit_test_teardown(test_env_mode, teardown),
		cmocka_unit_test_teardown(test_env_mode_uneven_user_port, teardown),
		cmocka_unit_test_teardown(test_env_mode_distribution_option, teardown),
		cmocka_unit_test_teardown(test_env_mode_het, teardown),
		cmocka_unit_test_teardown(test_plugstack, teardown),
		cmocka_unit_test_teardown(test_help, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
