/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_join.c - libFuzzer harness for lib/runtime/join.c: "NAME=VALUE" lines
 * are the variable table dpg_join_resolve reads; a first line "@N,M,..." sets
 * opts (rank, world_size, local_rank, local_world_size, port, timeout). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "join.h"

#define MAX_VARS 128

struct table {
	size_t n;
	char *name[MAX_VARS], *value[MAX_VARS];
};

static const char *table_get(void *ctx, const char *name)
{
	const struct table *t = ctx;
	size_t i;

	for (i = 0; i < t->n; i++)
		if (strcmp(t->name[i], name) == 0)
			return t->value[i];
	return NULL;
}

static void die(const char *what)
{
	fprintf(stderr, "fuzz_join: %s\n", what);
	abort();
}

static void opts_line(char *line, dpg_init_opts_t *o)
{
	long v[6] = { -1, -1, -1, -1, 0, 0 };
	int i = 0;
	char *p = line, *end;

	dpg_init_opts_default(o);
	while (i < 6 && *p) {
		v[i++] = strtol(p, &end, 10);
		p = *end == ',' ? end + 1 : end + (*end != '\0');
	}
	o->rank = (int)v[0];
	o->world_size = (int)v[1];
	o->local_rank = (int)v[2];
	o->local_world_size = (int)v[3];
	o->master_port = (int)v[4];
	o->timeout_s = (double)v[5] / 10.0;
}

static void check(int rc, const struct dpg_join *j, const struct dpg_err *e)
{
	if (memchr(e->msg, '\0', sizeof(e->msg)) == NULL)
		die("error message not terminated");
	if (rc != 0) {
		if (rc != -DPG_ERR_ENV && rc != -DPG_ERR_AUTH && rc != -DPG_ERR_INVALID)
			die("unexpected status");
		if (e->msg[0] == '\0')
			die("failure without a message");
		return;
	}
	if (j->world_size < 1 || j->rank < 0 || j->rank >= j->world_size)
		die("rank outside the world");
	if (j->local_rank >= 0 && j->local_world_size >= 0 &&
	    j->local_rank >= j->local_world_size)
		die("local rank outside the node");
	if (!(j->timeout_s > 0))
		die("timeout not positive");
	if (memchr(j->master_addr, '\0', sizeof(j->master_addr)) == NULL ||
	    memchr(j->ns, '\0', sizeof(j->ns)) == NULL ||
	    memchr(j->secret, '\0', sizeof(j->secret)) == NULL ||
	    memchr(j->node, '\0', sizeof(j->node)) == NULL ||
	    memchr(j->gpu_busid, '\0', sizeof(j->gpu_busid)) == NULL)
		die("a string field not terminated");
	if (j->world_size > 1 && (j->master_addr[0] == '\0' || j->master_port == 0))
		die("a multi-rank world without a store address");
	if (j->world_size > 1 && j->secret[0] == '\0')
		die("a multi-rank world without a secret");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1), *line, *save = NULL;
	struct table t = { 0 };
	dpg_init_opts_t o, *op = NULL;
	struct dpg_join j;
	struct dpg_err e;
	int rc;

	if (text == NULL)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	for (line = strtok_r(text, "\n", &save); line != NULL && t.n < MAX_VARS;
	     line = strtok_r(NULL, "\n", &save)) {
		char *eq = strchr(line, '=');

		if (line[0] == '@' && op == NULL) {
			opts_line(line + 1, &o);
			op = &o;
		} else if (eq != NULL) {
			*eq = '\0';
			t.name[t.n] = line;
			t.value[t.n++] = eq + 1;
		}
	}
	memset(&e, 0, sizeof(e));
	memset(&j, 0x5a, sizeof(j));
	rc = dpg_join_resolve(op, table_get, &t, &j, &e);
	check(rc, &j, &e);
	free(text);
	return 0;
}
