/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_conf.c - libFuzzer harness for lib/conf.c: the input is split into
 * plugstack.conf words on whitespace (like slurmd does), except that the last
 * line, if the input has more than one, is used as the node name for
 * dpg_conf_master_addr.  Each word goes through dpg_conf_parse_arg on its own,
 * then the whole vector through dpg_conf_parse. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"

#define MAX_ARGS 64

static void check_addr(const struct dpg_conf *c, const char *node)
{
	char buf[DPG_ADDR_MAX];
	char small[8];
	struct dpg_err err;

	memset(&err, 0, sizeof(err));
	memset(buf, 0x5a, sizeof(buf));
	if (dpg_conf_master_addr(c, node, buf, sizeof(buf), &err) == 0) {
		if (memchr(buf, '\0', sizeof(buf)) == NULL) {
			fprintf(stderr, "master_addr not terminated\n");
			abort();
		}
	}
	memset(&err, 0, sizeof(err));
	(void)dpg_conf_master_addr(c, node, small, sizeof(small), &err);
	if (memchr(err.msg, '\0', sizeof(err.msg)) == NULL) {
		fprintf(stderr, "error message not terminated\n");
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	char *av[MAX_ARGS];
	int ac = 0;
	const char *node = "node001";
	char *nl, *p;
	struct dpg_conf c;
	struct dpg_err err;

	if (text == NULL)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';

	nl = strrchr(text, '\n');
	if (nl != NULL) {
		*nl = '\0';
		node = nl + 1;
	}
	for (p = text; *p != '\0' && ac < MAX_ARGS;) {
		while (*p == ' ' || *p == '\t' || *p == '\n')
			*p++ = '\0';
		if (*p == '\0')
			break;
		av[ac++] = p;
		while (*p != '\0' && *p != ' ' && *p != '\t' && *p != '\n')
			p++;
	}

	/* one argument at a time onto the defaults */
	dpg_conf_init(&c);
	for (int i = 0; i < ac; i++) {
		memset(&err, 0, sizeof(err));
		(void)dpg_conf_parse_arg(&c, av[i], &err);
		if (memchr(err.msg, '\0', sizeof(err.msg)) == NULL)
			abort();
	}
	check_addr(&c, node);

	/* the whole line */
	memset(&err, 0, sizeof(err));
	if (dpg_conf_parse(&c, ac, av, &err) == 0)
		check_addr(&c, node);
	if (ac > 0 && strlen(node) == 0)
		check_addr(&c, av[0]);
	free(text);
	return 0;
}
