/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_contract.c - libFuzzer harness for lib/contract.c: a task's
 * environment is built from the input, one "NAME=VALUE" per line, and looked
 * up through a table-backed getenv (as in tests/unit/launch/test_contract.c).
 * Two kinds of special lines steer the rest:
 *   "@key=value"   a plugstack.conf argument (dpg_conf_parse_arg, errors ignored)
 *   "!gpus=N" / "!port=P" / "!verbose" / "!bind=X" / "!vis=X"  the request
 * then dpg_step_from_env, dpg_task_from_env, dpg_contract_build and
 * dpg_contract_describe run in that order, as far as each succeeds. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bindenv.h"
#include "conf.h"
#include "contract.h"
#include "gpuvis.h"
#include "opts.h"
#include "plan.h"
#include "port.h"

#define ENV_TABLE_MAX 48

struct env_table {
	size_t n;
	char name[ENV_TABLE_MAX][48];
	const char *value[ENV_TABLE_MAX];	/* point into the input copy */
};

static const char *table_getenv(void *ctx, const char *name)
{
	struct env_table *t = ctx;

	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->name[i], name) == 0)
			return t->value[i];
	return NULL;
}

static void env_set(struct env_table *t, const char *name, const char *value)
{
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->name[i], name) == 0) {
			t->value[i] = value;
			return;
		}
	if (t->n >= ENV_TABLE_MAX || strlen(name) >= sizeof(t->name[0]))
		return;
	snprintf(t->name[t->n], sizeof(t->name[0]), "%s", name);
	t->value[t->n] = value;
	t->n++;
}

static void request_line(struct dpg_request *req, char *line)
{
	struct dpg_err err;
	char *eq = strchr(line, '=');
	const char *val = eq ? eq + 1 : "";

	if (eq)
		*eq = '\0';
	if (strcmp(line, "gpus") == 0)
		(void)dpg_opt_gpus_per_task(val, &req->gpus_per_task, &err);
	else if (strcmp(line, "port") == 0)
		(void)dpg_opt_port(val, &req->port, &err);
	else if (strcmp(line, "verbose") == 0)
		req->verbose = true;
	else if (strcmp(line, "bind") == 0) {
		enum dpg_bind b;
		if (dpg_bind_parse(val, &b, &err) == 0)
			req->bind = (int)b;
	} else if (strcmp(line, "vis") == 0) {
		enum dpg_gpu_visibility v;
		if (dpg_gpu_visibility_parse(val, &v, &err) == 0)
			req->visibility = (int)v;
	}
}

static void check_str(const char *s, size_t cap, const char *what)
{
	if (memchr(s, '\0', cap) == NULL) {
		fprintf(stderr, "%s not terminated\n", what);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct env_table env;
	static struct dpg_conf conf;
	static struct dpg_request req;
	static struct dpg_step step;
	static struct dpg_task task;
	static struct dpg_env out;
	static char desc[4096];
	struct dpg_err err;
	char *text = malloc(size + 1);
	char *line, *next;

	if (text == NULL)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';

	memset(&env, 0, sizeof(env));
	dpg_conf_init(&conf);
	dpg_request_init(&req);
	for (line = text; line != NULL; line = next) {
		next = strchr(line, '\n');
		if (next != NULL)
			*next++ = '\0';
		if (line[0] == '@') {
			(void)dpg_conf_parse_arg(&conf, line + 1, &err);
		} else if (line[0] == '!') {
			request_line(&req, line + 1);
		} else {
			char *eq = strchr(line, '=');
			if (eq == NULL || eq == line)
				continue;
			*eq = '\0';
			env_set(&env, line, eq + 1);
		}
	}

	memset(&step, 0, sizeof(step));
	memset(&task, 0, sizeof(task));
	memset(&out, 0, sizeof(out));
	memset(&err, 0, sizeof(err));
	if (dpg_step_from_env(table_getenv, &env, &conf, &req, &step, &err) != 0)
		goto done;
	check_str(step.nodelist, sizeof(step.nodelist), "step.nodelist");
	check_str(step.master_node, sizeof(step.master_node), "step.master_node");
	check_str(step.master_addr, sizeof(step.master_addr), "step.master_addr");
	if (step.num_nodes == 0 || step.world_size == 0 ||
	    step.num_nodes > step.world_size) {
		fprintf(stderr, "accepted step with %u tasks on %u nodes\n",
			step.world_size, step.num_nodes);
		abort();
	}
	memset(&err, 0, sizeof(err));
	if (dpg_task_from_env(table_getenv, &env, &step, &task, &err) != 0)
		goto done;
	check_str(task.node, sizeof(task.node), "task.node");
	if (task.rank >= step.world_size || task.node_rank >= step.num_nodes ||
	    task.local_rank >= task.local_world_size) {
		fprintf(stderr, "accepted task rank %u/%u local %u/%u node %u/%u\n",
			task.rank, step.world_size, task.local_rank,
			task.local_world_size, task.node_rank, step.num_nodes);
		abort();
	}
	memset(&err, 0, sizeof(err));
	if (dpg_contract_build(&step, &task, &req, table_getenv, &env, &out, &err) != 0)
		goto done;
	if (out.n > DPG_ENV_MAX)
		abort();
	for (size_t i = 0; i < out.n; i++) {
		check_str(out.v[i].name, sizeof(out.v[i].name), "env name");
		check_str(out.v[i].value, sizeof(out.v[i].value), "env value");
	}
	check_str(out.notice, sizeof(out.notice), "notice");
	(void)dpg_env_get(&out, "RANK");
	(void)dpg_contract_describe(&step, &task, &req, desc, sizeof(desc));
	check_str(desc, sizeof(desc), "describe");
	(void)dpg_contract_describe(&step, &task, &req, desc, 16);
done:
	check_str(err.msg, sizeof(err.msg), "err.msg");
	free(text);
	return 0;
}
