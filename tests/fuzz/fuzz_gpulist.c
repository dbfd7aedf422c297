/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_gpulist.c - libFuzzer harness for the GPU and CPU list strings:
 * SLURM_STEP_GPUS / CUDA_VISIBLE_DEVICES (lib/launch/gpuvis.c), Linux CPU
 * lists (lib/launch/cpuset.c, parse and format round trip) and the list
 * parser under both (lib/common/parse.c).  Input lines: 1 SLURM_STEP_GPUS,
 * 2 the visible-devices value, 3 a CPU list, 4 an int list; line 5's first
 * bytes pick the task's GPUs and the mode. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpuset.h"
#include "gpuvis.h"
#include "parse.h"

static struct dpg_cpuset g_a, g_b;	/* 1 KiB each: off the stack */
static char g_fmt[DPG_CPUSET_STR_MAX];

static void die(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz_gpulist: %s: \"%s\"\n", what, detail);
	abort();
}

static void msg_ok(const struct dpg_err *e, const char *in)
{
	if (memchr(e->msg, '\0', sizeof(e->msg)) == NULL)
		die("error message not terminated", in);
}

static void gpus(const char *step, const char *vis, const uint8_t *pick, size_t np)
{
	struct dpg_gpu_ns ns;
	struct dpg_err e = { "" };
	int own[8], order[DPG_GPUVIS_MAX];
	char buf[512];
	size_t g = 0, i;
	int rc;

	rc = dpg_gpu_ns_from_slurm(*step ? step : NULL, *vis ? vis : NULL, &ns, &e);
	msg_ok(&e, vis);
	if (rc != 0)
		return;
	if (ns.n > DPG_GPUVIS_MAX)
		die("namespace larger than DPG_GPUVIS_MAX", vis);
	for (i = 0; i < ns.n; i++)
		if (ns.phys[i] < 0)
			die("negative physical index", vis);
	for (i = 0; i < DPG_GPUVIS_MAX; i++)
		order[i] = (int)i;
	for (i = 1; i < np && g < 8; i++)
		own[g++] = pick[i] % DPG_GPUVIS_MAX;
	for (i = 0; i < 64; i++)
		(void)dpg_gpu_ns_index(&ns, (int)i - 1);
	memset(buf, 0x5a, sizeof(buf));
	rc = dpg_gpu_visible(&ns, np && (pick[0] & 1) ? DPG_VIS_ORDERED : DPG_VIS_ISOLATE,
			     own, g, order, np ? pick[0] % DPG_GPUVIS_MAX : 0, buf,
			     np && (pick[0] & 2) ? 8 : sizeof(buf), &e);
	msg_ok(&e, vis);
	if (rc == 0 && memchr(buf, '\0', sizeof(buf)) == NULL)
		die("visible-devices string not terminated", vis);
}

static void cpus(const char *list)
{
	struct dpg_err e = { "" };

	if (dpg_cpuset_parse(list, &g_a, &e) != 0) {
		msg_ok(&e, list);
		return;
	}
	if (dpg_cpuset_format(&g_a, g_fmt, sizeof(g_fmt), &e) != 0)
		die("a parsed set does not format", list);
	if (dpg_cpuset_parse(g_fmt, &g_b, &e) != 0 || !dpg_cpuset_equal(&g_a, &g_b))
		die("format does not parse back to the same set", list);
}

static int count_item(void *ctx, const struct dpg_ilist_item *it)
{
	if (!it->word && it->lo > it->hi)
		abort();
	++*(size_t *)ctx;
	return 0;
}

static void ints(const char *s)
{
	struct dpg_err e = { "" };
	int out[16];
	size_t n = 99, items = 0, where = 0;
	unsigned f;

	if (dpg_int_list_parse(s, out, 16, &n, &e) == 0 && n > 16)
		die("int list longer than its buffer", s);
	msg_ok(&e, s);
	for (f = 0; f < 8; f++) {
		enum dpg_ilist_status st = dpg_ilist_parse(s, f, 1000000, count_item, &items,
							  &where);

		if (st != DPG_ILIST_OK && where > strlen(s))
			die("error offset beyond the string", s);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1), *line[5] = { "", "", "", "", "" }, *p;
	size_t i;
	int k = 0;

	if (text == NULL)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	for (p = text, line[k++] = p; k < 5 && (p = strchr(p, '\n')) != NULL; line[k++] = ++p)
		*p = '\0';
	if (k == 5 && (p = strchr(line[4], '\n')) != NULL)
		*p = '\0';
	for (i = 0; i < 4; i++)	/* each string on its own too */
		cpus(line[i]);
	gpus(line[0], line[1], (const uint8_t *)line[4], strlen(line[4]));
	ints(line[3]);
	ints(line[1]);
	free(text);
	return 0;
}
