/* SPDX-License-Identifier: BSD-3-Clause */
/* test_topo_pack.c - unit tests for lib/launch/topo_pack.c and the isolated
 * load's hand-over: a topology packed and unpacked is the same, the forked
 * child's result equals a load in this process, and bytes that do not hold
 * together (short, counts, indices, names) are refused. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo.h"

#define FIX(name) DPG_SRCDIR "/tests/fixtures/topo/" name

static const char *const fixtures[] = {
	FIX("synthetic-2s-4gpu-2sw.xml"), FIX("amd-1s-nps2-4gpu-slingshot.xml"),
	FIX("nogpu-ethernet.xml"), FIX("reserved-cores-numa-gaps.xml"),
};

static struct dpg_topo *load(const char *path)
{
	struct dpg_topo *t = NULL;
	struct dpg_err err;

	if (dpg_topo_load_xml(path, &t, &err) != 0)
		fail_msg("%s: %s", path, err.msg);
	return t;
}

static void pack(const struct dpg_topo *t, uint8_t **b, size_t *len)
{
	struct dpg_err err;

	if (dpg_topo_pack(t, b, len, &err) != 0)
		fail_msg("pack: %s", err.msg);
	assert_true(*len <= DPG_TOPO_PACK_MAX);
}

/* Packed, unpacked and packed again: the same bytes, arrays included. */
static void test_round_trip(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(fixtures) / sizeof(fixtures[0]); i++) {
		struct dpg_topo *t = load(fixtures[i]), *u = NULL;
		uint8_t *a, *b;
		size_t alen, blen;
		struct dpg_err err;

		pack(t, &a, &alen);
		assert_int_equal(dpg_topo_unpack(a, alen, &u, &err), 0);
		pack(u, &b, &blen);
		assert_int_equal(alen, blen);
		assert_memory_equal(a, b, alen);
		assert_int_equal(u->ncores, t->ncores);
		assert_int_equal(u->npus, t->npus);
		assert_true(u->npus == 0 || memcmp(u->pus, t->pus, t->npus * sizeof(*t->pus)) == 0);
		assert_string_equal(u->source, t->source);
		assert_int_equal(u->ngpus, t->ngpus);
		free(a);
		free(b);
		dpg_topo_free(t);
		dpg_topo_free(u);
	}
}

/* The isolated load (the child parses, hands over) gives what a load in
 * this process gives, for every fixture. */
static void test_isolated_equals_direct(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(fixtures) / sizeof(fixtures[0]); i++) {
		struct dpg_topo *t = load(fixtures[i]), *u = NULL;
		uint8_t *a, *b;
		size_t alen, blen;
		struct dpg_err err;

		if (dpg_topo_load_xml_isolated(fixtures[i], 10000, &u, &err) != 0)
			fail_msg("%s: %s", fixtures[i], err.msg);
		pack(t, &a, &alen);
		pack(u, &b, &blen);
		assert_int_equal(alen, blen);
		assert_memory_equal(a, b, alen);
		free(a);
		free(b);
		dpg_topo_free(t);
		dpg_topo_free(u);
	}
}

/* This machine discovered live, exported, and loaded back the way a cache
 * hit is (the child, hwloc's built-in XML parser, no libxml2): the same
 * topology but for its source. */
static void test_here_equals_live(void **state)
{
	struct dpg_topo *t = NULL, *u = NULL;
	struct dpg_err err;
	char *xml = NULL;
	size_t xlen = 0, alen, blen;
	uint8_t *a, *b;

	(void)state;
	if (dpg_topo_load_live_xml(&t, &xml, &xlen, &err) != 0)
		fail_msg("live: %s", err.msg);
	if (dpg_topo_load_here_isolated(xml, xlen, "cache:test", 10000, &u, &err) != 0)
		fail_msg("here: %s", err.msg);
	assert_string_equal(u->source, "cache:test");
	memcpy(u->source, t->source, sizeof(u->source));	/* padding too */
	pack(t, &a, &alen);
	pack(u, &b, &blen);
	assert_int_equal(alen, blen);
	assert_memory_equal(a, b, alen);
	free(a);
	free(b);
	free(xml);
	dpg_topo_free(t);
	dpg_topo_free(u);
}

/* Load a fixture, pack it, let f spoil the bytes: unpack must refuse. */
static void refused(void (*f)(uint8_t *b, size_t *len), const char *want)
{
	struct dpg_topo *t = load(FIX("synthetic-2s-4gpu-2sw.xml")), *u = NULL;
	struct dpg_err err;
	uint8_t *b;
	size_t len;

	pack(t, &b, &len);
	f(b, &len);
	assert_int_equal(dpg_topo_unpack(b, len, &u, &err), -DPG_ERR_INVALID);
	assert_null(u);
	if (strstr(err.msg, want) == NULL)
		fail_msg("expected '%s' in '%s'", want, err.msg);
	free(b);
	dpg_topo_free(t);
}

static struct dpg_topo *hdr(uint8_t *b)
{
	return (struct dpg_topo *)(void *)b;
}

static void cut_header(uint8_t *b, size_t *len) { (void)b; *len = sizeof(struct dpg_topo) - 1; }
static void cut_tail(uint8_t *b, size_t *len) { (void)b; *len -= 1; }
static void more_pus(uint8_t *b, size_t *len) { (void)len; hdr(b)->npus += 1; }
static void huge_cores(uint8_t *b, size_t *len) { (void)len; hdr(b)->ncores = 0x7fffffffu; }
static void many_gpus(uint8_t *b, size_t *len) { (void)len; hdr(b)->ngpus = DPG_TOPO_MAX_GPUS + 1; }
static void rdma_past_nics(uint8_t *b, size_t *len) { (void)len; hdr(b)->nrdma = hdr(b)->nnics + 1; }
static void gpu_numa_out(uint8_t *b, size_t *len) { (void)len; hdr(b)->gpus[0].pci.numa = (int)hdr(b)->nnuma; }
static void busid_unterminated(uint8_t *b, size_t *len)
{
	(void)len;
	memset(hdr(b)->gpus[0].pci.busid, 'a', sizeof(hdr(b)->gpus[0].pci.busid));
}
static void source_unterminated(uint8_t *b, size_t *len)
{
	(void)len;
	memset(hdr(b)->source, 'x', sizeof(hdr(b)->source));
}

/* A core whose PUs run past pus[]: the first core record sits right after
 * the struct, the packages and the NUMA nodes. */
static void core_past_pus(uint8_t *b, size_t *len)
{
	struct dpg_topo *t = hdr(b);
	struct dpg_core c;
	size_t o = sizeof(*t) + t->npackages * sizeof(struct dpg_package) +
		   t->nnuma * sizeof(struct dpg_numa);

	(void)len;
	memcpy(&c, b + o, sizeof(c));
	c.pu_first = t->npus;
	c.npus = 1;
	memcpy(b + o, &c, sizeof(c));
}

static void test_refused(void **state)
{
	(void)state;
	refused(cut_header, "fewer than");
	refused(cut_tail, "do not match");
	refused(more_pus, "do not match");
	refused(huge_cores, "do not match");
	refused(many_gpus, "out of range");
	refused(rdma_past_nics, "out of range");
	refused(gpu_numa_out, "out of range");
	refused(busid_unterminated, "out of range");
	refused(source_unterminated, "do not match");
	refused(core_past_pus, "out of range");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_isolated_equals_direct),
		cmocka_unit_test(test_here_equals_live),
		cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
