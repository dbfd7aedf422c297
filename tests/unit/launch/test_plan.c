/* SPDX-License-Identifier: BSD-3-Clause */
/* test_plan.c - unit tests for lib/launch/topo.c and lib/launch/plan*.c:
 * loading hwloc XML (our hand-written fixtures, and the real machines' files
 * in shared/topologies when present), GPU/NIC recognition, PCI nearness, and
 * the binding plans: disjoint local cpusets, close GPU groups, NIC choice,
 * allocation subsets, sharing, CPU-only tasks, errors and determinism.
 *
 * Fixtures: DPG_SRCDIR/tests/fixtures/topo (DPG_SRCDIR from the build, "."
 * by default).  Real topologies: $DPG_SHARED_TOPOLOGIES, else
 * DPG_SRCDIR/../shared/topologies; those tests skip when it is absent. */
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

#include "plan.h"
#include "topo.h"

#ifndef DPG_SRCDIR
#define DPG_SRCDIR "."
#endif

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ================================================================ helpers */

static void fixture_path(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/tests/fixtures/topo/%s", DPG_SRCDIR, name);
}

static void shared_path(const char *name, char *buf, size_t len)
{
	const char *d = getenv("DPG_SHARED_TOPOLOGIES");

	if (d != NULL && d[0] != '\0')
		snprintf(buf, len, "%s/%s", d, name);
	else
		snprintf(buf, len, "%s/../shared/topologies/%s", DPG_SRCDIR, name);
}

static struct dpg_topo *load_path(const char *path)
{
	struct dpg_topo *t = NULL;
	struct dpg_err e = { "" };

	if (dpg_topo_load_xml(path, &t, &e) != 0)
		fail_msg("loading %s: %s", path, e.msg);
	assert_non_null(t);
	return t;
}

/* A fixture's bytes, NUL-terminated (*n: without the NUL); free() them. */
static char *read_fixture(const char *name, size_t *n)
{
	char p[1024];
	FILE *f;
	char *buf;
	long len;

	fixture_path(name, p, sizeof(p));
	f = fopen(p, "r");
	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	len = ftell(f);
	assert_true(len > 0);
	rewind(f);
	buf = malloc((size_t)len + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
	buf[len] = '\0';
	fclose(f);
	*n = (size_t)len;
	return buf;
}

static struct dpg_topo *load_fixture(const char *name)
{
	char p[1024];

	fixture_path(name, p, sizeof(p));
	return load_path(p);
}

/* Loads a real machine's file, or skips the test when shared/ is absent. */
static struct dpg_topo *load_shared(const char *name)
{
	char p[1024];

	shared_path(name, p, sizeof(p));
	if (access(p, R_OK) != 0) {
		print_message("SKIP: shared topology %s absent: skipped (the real servers'\n"
			      "hwloc XML live in ../shared/topologies beside the checkout)\n", p);
		skip();
	}
	return load_path(p);
}

static struct dpg_plan *plan_ok(const struct dpg_topo *t, uint32_t ntasks,
				uint32_t G, const char *gpus, const char *cpus,
				bool share)
{
	struct dpg_plan_req r;
	struct dpg_plan *p = NULL;
	struct dpg_err e = { "" };

	memset(&r, 0, sizeof(r));
	r.ntasks = ntasks;
	r.gpus_per_task = G;
	r.gpus = gpus;
	r.cpus = cpus;
	r.policy.allow_gpu_sharing = share;
	if (dpg_plan_make(t, &r, &p, &e) != 0)
		fail_msg("%s: %u x %u (gpus %s, cpus %s): %s", t->source, ntasks, G,
			 gpus ? gpus : "all", cpus ? cpus : "all", e.msg);
	assert_non_null(p);
	return p;
}

static void plan_fails(const struct dpg_topo *t, uint32_t ntasks, uint32_t G,
		       const char *gpus, const char *cpus, const char *needle)
{
	struct dpg_plan_req r;
	struct dpg_plan *p = (struct dpg_plan *)&r;	/* must become NULL */
	struct dpg_err e = { "" };

	memset(&r, 0, sizeof(r));
	r.ntasks = ntasks;
	r.gpus_per_task = G;
	r.gpus = gpus;
	r.cpus = cpus;
	if (dpg_plan_make(t, &r, &p, &e) == 0)
		fail_msg("%s: %u x %u should fail with \"%s\"", t->source, ntasks, G, needle);
	assert_null(p);
	if (strstr(e.msg, needle) == NULL)
		fail_msg("error \"%s\" lacks \"%s\"", e.msg, needle);
}

static char *plan_json(const struct dpg_plan *p)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct dpg_err e = { "" };

	assert_non_null(f);
	if (dpg_plan_write_json(p, f, &e) != 0)
		fail_msg("json: %s", e.msg);
	fclose(f);
	return buf;
}

static struct dpg_cpuset cs(const char *list)
{
	struct dpg_cpuset s;
	struct dpg_err e = { "" };

	if (dpg_cpuset_parse(list, &s, &e) != 0)
		fail_msg("%s", e.msg);
	return s;
}

static const struct dpg_numa *numa_by_os(const struct dpg_topo *t, int os)
{
	uint32_t i;

	for (i = 0; i < t->nnuma; i++)
		if ((int)t->numa[i].os_index == os)
			return &t->numa[i];
	return NULL;
}

/* The properties every plan must have, whatever the machine. */
static void check_invariants(const struct dpg_topo *t, const struct dpg_plan *p,
			     const char *gpus, const char *cpus, bool share)
{
	struct dpg_cpuset usable, seen;
	bool gpu_alloc[DPG_TOPO_MAX_GPUS], gpu_seen[DPG_TOPO_MAX_GPUS];
	uint32_t i, j, k, nalloc = 0;
	unsigned npu;
	char buf[DPG_CPUSET_STR_MAX];
	bool disjoint, whole;

	/* usable = allocated within allowed */
	if (cpus != NULL)
		usable = cs(cpus);
	else
		dpg_cpuset_fill(&usable);
	dpg_cpuset_and(&usable, &usable, &t->allowed);
	assert_true(dpg_cpuset_equal(&usable, &p->usable));
	npu = dpg_cpuset_count(&usable);
	disjoint = p->ntasks <= npu && p->policy.bind == DPG_BIND_CLOSEST;
	{
		uint32_t ncores = 0;

		for (k = 0; k < t->ncores; k++)
			for (j = 0; j < t->cores[k].npus; j++)
				if (dpg_cpuset_isset(&usable, t->pus[t->cores[k].pu_first + j])) {
					ncores++;
					break;
				}
		whole = p->ntasks <= ncores && p->policy.bind == DPG_BIND_CLOSEST;
	}
	memset(gpu_alloc, 0, sizeof(gpu_alloc));
	memset(gpu_seen, 0, sizeof(gpu_seen));
	if (gpus == NULL) {
		for (i = 0; i < t->ngpus; i++)
			gpu_alloc[i] = true;
	} else if (gpus[0] != '\0') {
		/* tests pass ranges of indices or bus ids */
		struct dpg_err e = { "" };
		char tmp[256], *save = NULL, *tok;

		snprintf(tmp, sizeof(tmp), "%s", gpus);
		for (tok = strtok_r(tmp, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			if (strchr(tok, ':')) {
				int g = dpg_topo_find_gpu(t, tok, &e);

				assert_true(g >= 0);
				gpu_alloc[g] = true;
			} else {
				unsigned lo, hi;

				if (sscanf(tok, "%u-%u", &lo, &hi) != 2)
					hi = lo = (unsigned)atoi(tok);
				for (; lo <= hi; lo++)
					gpu_alloc[lo] = true;
			}
		}
	}
	for (i = 0; i < t->ngpus; i++)
		nalloc += gpu_alloc[i];

	dpg_cpuset_zero(&seen);
	for (i = 0; i < p->ntasks; i++) {
		const struct dpg_plan_task *r = &p->tasks[i];
		struct dpg_cpuset back;
		struct dpg_err e = { "" };

		assert_int_equal(r->local_rank, i);
		/* cpus: never empty, usable, disjoint, string matches */
		assert_false(dpg_cpuset_empty(&r->cpuset));
		assert_true(dpg_cpuset_subset(&r->cpuset, &usable));
		if (disjoint) {
			if (dpg_cpuset_intersects(&r->cpuset, &seen))
				fail_msg("%s: task %u cpus %s overlap another task's",
					 t->source, i, r->cpus);
			dpg_cpuset_or(&seen, &seen, &r->cpuset);
		}
		assert_int_equal(dpg_cpuset_format(&r->cpuset, buf, sizeof(buf), &e), 0);
		assert_string_equal(buf, r->cpus);
		back = cs(r->cpus);
		assert_true(dpg_cpuset_equal(&back, &r->cpuset));
		/* whole cores: a core is the task's entirely or not at all */
		if (whole) {
			for (k = 0; k < t->ncores; k++) {
				unsigned in = 0, all = 0;

				for (j = 0; j < t->cores[k].npus; j++) {
					unsigned pu = t->pus[t->cores[k].pu_first + j];

					if (!dpg_cpuset_isset(&usable, pu))
						continue;
					all++;
					in += dpg_cpuset_isset(&r->cpuset, pu);
				}
				if (in != 0 && in != all)
					fail_msg("%s: task %u has part of core %u (%s)", t->source,
						 i, k, r->cpus);
			}
		}
		/* numa: holds all the task's CPUs */
		if (r->numa >= 0) {
			const struct dpg_numa *n = numa_by_os(t, r->numa);

			assert_non_null(n);
			assert_true(dpg_cpuset_subset(&r->cpuset, &n->cpus));
		}
		/* gpus: G of them, allocated, distinct, ascending, strings match */
		assert_int_equal(r->ngpus, p->gpus_per_task);
		{
			char vis[512] = "", ids[2048] = "";
			size_t vo = 0, io = 0;

			for (j = 0; j < r->ngpus; j++) {
				assert_true(r->gpu[j] < t->ngpus);
				assert_true(gpu_alloc[r->gpu[j]]);
				if (j > 0)
					assert_true(r->gpu[j] > r->gpu[j - 1]);
				if (!share || nalloc >= (size_t)p->ntasks * p->gpus_per_task) {
					if (gpu_seen[r->gpu[j]])
						fail_msg("%s: GPU %u given twice", t->source, r->gpu[j]);
					gpu_seen[r->gpu[j]] = true;
				}
				vo += (size_t)snprintf(vis + vo, sizeof(vis) - vo, "%s%u",
						       j ? "," : "", r->gpu[j]);
				io += (size_t)snprintf(ids + io, sizeof(ids) - io, "%s%s",
						       j ? "," : "", t->gpus[r->gpu[j]].pci.busid);
			}
			assert_string_equal(vis, r->visible);
			assert_string_equal(ids, r->gpus);
		}
		/* nics: RDMA only when the node has any; one at least if any NIC */
		if (t->nnics > 0)
			assert_true(r->nnics >= 1);
		else
			assert_int_equal(r->nnics, 0);
		for (j = 0; j < r->nnics; j++) {
			assert_true(r->nic[j] < t->nnics);
			if (t->nrdma > 0)
				assert_true(dpg_nic_is_rdma(&t->nics[r->nic[j]]));
		}
		if (r->nnics > 0)
			assert_non_null(strstr(r->nics, t->nics[r->nic[0]].name));
	}
	assert_int_equal(p->gpus_shared, nalloc < (size_t)p->ntasks * p->gpus_per_task);
}

/* Plan twice (and from a second load of the same file): identical JSON. */
static void check_deterministic(const struct dpg_topo *t, const char *path,
				uint32_t ntasks, uint32_t G, const char *gpus,
				const char *cpus, bool share)
{
	struct dpg_plan *a = plan_ok(t, ntasks, G, gpus, cpus, share);
	struct dpg_plan *b = plan_ok(t, ntasks, G, gpus, cpus, share);
	char *ja = plan_json(a), *jb = plan_json(b);

	assert_string_equal(ja, jb);
	if (path != NULL) {
		struct dpg_topo *t2 = load_path(path);
		struct dpg_plan *c = plan_ok(t2, ntasks, G, gpus, cpus, share);
		char *jc = plan_json(c);

		assert_string_equal(ja, jc);
		free(jc);
		dpg_plan_free(c);
		dpg_topo_free(t2);
	}
	free(ja);
	free(jb);
	dpg_plan_free(a);
	dpg_plan_free(b);
}

/* ================================================================ cpusets */

static void test_cpuset_parse_format(void **state)
{
	static const struct {
		const char *in, *out;
		unsigned count;
	} ok[] = {
		{ "0-11,48-59", "0-11,48-59", 24 },
		{ "3", "3", 1 },
		{ "", "", 0 },
		{ " 1 , 2,3-4 ", "1-4", 4 },
		{ "5,0-2,2-3", "0-3,5", 5 },
		{ "8191", "8191", 1 },
		{ "63-65,127", "63-65,127", 4 },
	};
	static const char *const bad[] = {
		"1-", "a", "5-3", "8192", "0,,1", "1,", "-1", "0x3", "1 2",
	};
	char buf[DPG_CPUSET_STR_MAX], small[4];
	size_t i;

	(void)state;
	for (i = 0; i < NELEM(ok); i++) {
		struct dpg_cpuset s = cs(ok[i].in);

		assert_int_equal(dpg_cpuset_count(&s), ok[i].count);
		assert_int_equal(dpg_cpuset_format(&s, buf, sizeof(buf), NULL), 0);
		assert_string_equal(buf, ok[i].out);
	}
	for (i = 0; i < NELEM(bad); i++) {
		struct dpg_cpuset s;
		struct dpg_err e = { "" };

		if (dpg_cpuset_parse(bad[i], &s, &e) == 0)
			fail_msg("\"%s\" parsed", bad[i]);
		assert_non_null(strstr(e.msg, "cpu list"));
	}
	{
		struct dpg_cpuset s = cs("0-11,48-59");
		struct dpg_err e = { "" };

		assert_int_equal(dpg_cpuset_format(&s, small, sizeof(small), &e), -1);
		assert_non_null(strstr(e.msg, "does not fit"));
		dpg_cpuset_fill(&s);
		assert_int_equal(dpg_cpuset_format(&s, buf, sizeof(buf), NULL), 0);
		assert_string_equal(buf, "0-8191");
		assert_int_equal(dpg_cpuset_next(&s, 8191), 8191);
		assert_int_equal(dpg_cpuset_next(&s, 8192), -1);
	}
	/* the worst case fits in DPG_CPUSET_STR_MAX */
	{
		struct dpg_cpuset s;
		unsigned c;

		dpg_cpuset_zero(&s);
		for (c = 0; c < DPG_CPU_MAX; c += 2)
			dpg_cpuset_set(&s, c);
		assert_int_equal(dpg_cpuset_format(&s, buf, sizeof(buf), NULL), 0);
	}
}

static void test_busid_parse(void **state)
{
	static const struct {
		const char *s;
		uint32_t dom;
		unsigned bus, dev, fn;
	} ok[] = {
		{ "0000:07:00.0", 0, 7, 0, 0 },
		{ "00000000:07:00.0", 0, 7, 0, 0 },
		{ "07:1f.7", 0, 7, 0x1f, 7 },
		{ "0035:01:00.0", 0x35, 1, 0, 0 },
		{ "1000a:C4:00.1", 0x1000a, 0xc4, 0, 1 },
	};
	static const char *const bad[] = {
		"", "07", "0000:07:00", "0000:07:00.8", "0000:07:20.0",
		"000000000:07:00.0", "0000:107:00.0", "0000:07:00.0x", "zz:00.0",
	};
	size_t i;

	(void)state;
	for (i = 0; i < NELEM(ok); i++) {
		uint32_t d;
		uint8_t b, v, f;
		struct dpg_err e = { "" };

		if (dpg_busid_parse(ok[i].s, &d, &b, &v, &f, &e) != 0)
			fail_msg("%s: %s", ok[i].s, e.msg);
		assert_int_equal(d, ok[i].dom);
		assert_int_equal(b, ok[i].bus);
		assert_int_equal(v, ok[i].dev);
		assert_int_equal(f, ok[i].fn);
	}
	for (i = 0; i < NELEM(bad); i++) {
		uint32_t d;
		uint8_t b, v, f;
		struct dpg_err e = { "" };

		if (dpg_busid_parse(bad[i], &d, &b, &v, &f, &e) == 0)
			fail_msg("\"%s\" parsed", bad[i]);
		assert_non_null(strstr(e.msg, "not a PCI bus id"));
	}
}

/* ================================================================ loading */

static void test_load_errors(void **state)
{
	struct dpg_topo *t = (struct dpg_topo *)state;	/* must become NULL */
	struct dpg_err e = { "" };
	char path[] = "/tmp/dpg-test-topo-XXXXXX";
	static const char junk[] = "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n<object type=";
	static const char v3[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<!DOCTYPE topology SYSTEM \"hwloc3.dtd\">\n<topology version=\"3.0\">\n"
		"<object type=\"Machine\" os_index=\"0\" cpuset=\"0x1\"/>\n</topology>\n";
	int fd;

	assert_int_equal(dpg_topo_load_xml("/nonexistent/dpg/topo.xml", &t, &e), -1);
	assert_null(t);
	assert_non_null(strstr(e.msg, "cannot open topology XML \"/nonexistent/dpg/topo.xml\""));
	assert_non_null(strstr(e.msg, "No such file"));

	assert_int_equal(dpg_topo_load_xml("", &t, &e), -1);
	assert_non_null(strstr(e.msg, "no file name"));

	/* malformed file */
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, junk, sizeof(junk) - 1), (ssize_t)(sizeof(junk) - 1));
	close(fd);
	assert_int_equal(dpg_topo_load_xml(path, &t, &e), -1);
	assert_null(t);
	assert_non_null(strstr(e.msg, "malformed"));
	assert_non_null(strstr(e.msg, path));
	/* empty file */
	fd = open(path, O_WRONLY | O_TRUNC);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(dpg_topo_load_xml(path, &t, &e), -1);
	assert_non_null(strstr(e.msg, "empty"));
	/* a directory */
	assert_int_equal(dpg_topo_load_xml("/", &t, &e), -1);
	unlink(path);

	/* buffers: malformed, XML v3 (hwloc 2.x refuses it: say so), empty */
	assert_int_equal(dpg_topo_load_xml_buffer(junk, sizeof(junk) - 1, &t, &e), -1);
	assert_null(t);
	assert_non_null(strstr(e.msg, "malformed"));
	assert_int_equal(dpg_topo_load_xml_buffer(v3, sizeof(v3) - 1, &t, &e), -1);
	assert_non_null(strstr(e.msg, "XML v3"));
	assert_int_equal(dpg_topo_load_xml_buffer("", 0, &t, &e), -1);
	assert_non_null(strstr(e.msg, "empty"));
	assert_int_equal(dpg_topo_load_xml_buffer(NULL, 10, &t, &e), -1);
}

/* The plugin's loader parses the admin's XML in a child first: a file that
 * crashes hwloc (an upstream bug found by tests/fuzz) is a clear error here,
 * not a dead process; a good file loads the same as without isolation. */
static void test_load_isolated(void **state)
{
	struct dpg_topo *t = NULL;
	struct dpg_err e = { "" };
	char path[512];

	(void)state;
	snprintf(path, sizeof(path), "%s/tests/fuzz/crashes/topo-hwloc-upstream-segv.xml",
		 DPG_SRCDIR);
	assert_int_equal(dpg_topo_load_xml_isolated(path, 10000, &t, &e), -1);
	assert_null(t);
	assert_non_null(strstr(e.msg, "crashed hwloc's parser (signal"));
	assert_non_null(strstr(e.msg, "topo-hwloc-upstream-segv.xml"));
	assert_int_equal(dpg_topo_load_xml_isolated("/nonexistent/t.xml", 10000, &t, &e), -1);
	assert_non_null(strstr(e.msg, "cannot open topology XML"));
	fixture_path("synthetic-2s-4gpu-2sw.xml", path, sizeof(path));
	assert_int_equal(dpg_topo_load_xml_isolated(path, 10000, &t, &e), 0);
	assert_non_null(t);
	assert_int_equal(t->ngpus, 4);
	dpg_topo_free(t);
}

static void test_load_buffer(void **state)
{
	size_t n;
	char *buf = read_fixture("synthetic-2s-4gpu-2sw.xml", &n);
	struct dpg_topo *t = NULL;
	struct dpg_err e = { "" };

	(void)state;
	if (dpg_topo_load_xml_buffer(buf, n, &t, &e) != 0)
		fail_msg("%s", e.msg);
	assert_int_equal(t->ngpus, 4);
	assert_int_equal(t->nnics, 4);
	assert_string_equal(t->source, "xml-buffer");
	dpg_topo_free(t);
	free(buf);
}

/* A bus id that is no PCI address (function 8, device 0x20: hwloc's XML
 * takes any byte) is a malformed file, for a GPU and for a NIC alike; the
 * GPU case was found by tests/fuzz (fuzz_topo: the bus id we printed did
 * not parse back). */
static void test_load_bad_pci(void **state)
{
	static const struct {
		const char *from, *to, *what;
	} cases[] = {
		{ "\"0035:01:00.0\"", "\"0035:01:00.8\"", "a GPU at PCI 0035:01:00.8" },
		{ "\"0000:05:00.0\"", "\"0000:05:20.0\"", "a NIC at PCI 0000:05:20.0" },
	};
	size_t n, k;
	char *buf = read_fixture("reserved-cores-numa-gaps.xml", &n), *at;

	(void)state;
	for (k = 0; k < NELEM(cases); k++) {
		struct dpg_topo *t = NULL;
		struct dpg_err e = { "" };

		/* the fixture as it is loads; the same with one bad address does not */
		assert_int_equal(dpg_topo_load_xml_buffer(buf, n, &t, &e), 0);
		dpg_topo_free(t);
		t = NULL;
		at = strstr(buf, cases[k].from);
		assert_non_null(at);
		memcpy(at, cases[k].to, strlen(cases[k].to));
		assert_int_equal(dpg_topo_load_xml_buffer(buf, n, &t, &e), -1);
		assert_null(t);
		if (strstr(e.msg, cases[k].what) == NULL || strstr(e.msg, "no PCI address") == NULL)
			fail_msg("case %zu: %s", k, e.msg);
		memcpy(at, cases[k].from, strlen(cases[k].from));
	}
	free(buf);
}

static void test_load_live(void **state)
{
	struct dpg_topo *t = NULL;
	struct dpg_err e = { "" };
	uint32_t i;

	(void)state;
	if (dpg_topo_load_live(&t, &e) != 0)
		fail_msg("live: %s", e.msg);
	assert_string_equal(t->source, "live");
	assert_true(t->npus >= 1 && t->ncores >= 1);
	assert_false(dpg_cpuset_empty(&t->allowed));
	assert_true(dpg_cpuset_subset(&t->allowed, &t->complete));
	for (i = 1; i < t->ngpus; i++)
		assert_true(strcmp(t->gpus[i - 1].pci.busid, t->gpus[i].pci.busid) < 0);
	/* a plan for one CPU-only task always works */
	{
		struct dpg_plan *p = plan_ok(t, 1, 0, NULL, NULL, false);

		check_invariants(t, p, NULL, NULL, false);
		dpg_plan_free(p);
	}
	dpg_topo_free(t);
}

/* ================================================================ fixtures */

#define SYN "synthetic-2s-4gpu-2sw.xml"

static void test_syn_facts(void **state)
{
	struct dpg_topo *t = load_fixture(SYN);
	static const char *const ids[] = {
		"0000:03:00.0", "0000:04:00.0", "0000:83:00.0", "0000:84:00.0",
	};
	unsigned hops;
	uint32_t i;

	(void)state;
	assert_int_equal(t->npackages, 2);
	assert_int_equal(t->nnuma, 2);
	assert_int_equal(t->ncores, 8);
	assert_int_equal(t->npus, 16);
	/* 4 GPUs: the NVSwitch (NVIDIA, class 0680) is none */
	assert_int_equal(t->ngpus, 4);
	for (i = 0; i < 4; i++) {
		assert_string_equal(t->gpus[i].pci.busid, ids[i]);
		assert_int_equal(t->gpus[i].index, i);
		assert_int_equal(t->gpus[i].vendor, DPG_GPU_NVIDIA);
		assert_int_equal(t->gpus[i].pci.numa, i < 2 ? 0 : 1);
		assert_int_equal(t->gpus[i].pci.package, i < 2 ? 0 : 1);
	}
	/* RDMA first, Ethernet last; netdev of each port */
	assert_int_equal(t->nnics, 4);
	assert_int_equal(t->nrdma, 3);
	assert_string_equal(t->nics[0].name, "mlx5_0");
	assert_string_equal(t->nics[0].netdev, "ib0");
	assert_string_equal(t->nics[1].name, "mlx5_1");
	assert_string_equal(t->nics[2].name, "mlx5_2");
	assert_string_equal(t->nics[2].netdev, "ib2");
	assert_string_equal(t->nics[2].pci.busid, "0000:85:00.1");
	assert_int_equal(t->nics[0].kind, DPG_NIC_OPENFABRICS);
	assert_string_equal(t->nics[3].name, "eno1");
	assert_int_equal(t->nics[3].kind, DPG_NIC_ETHERNET);
	/* nearness by the PCI tree */
	assert_int_equal(dpg_pci_near(&t->gpus[0].pci, &t->nics[0].pci, &hops), DPG_NEAR_SWITCH);
	assert_int_equal(hops, 4);
	assert_int_equal(dpg_pci_near(&t->gpus[0].pci, &t->gpus[1].pci, NULL), DPG_NEAR_SWITCH);
	assert_int_equal(dpg_pci_near(&t->gpus[0].pci, &t->nics[3].pci, NULL), DPG_NEAR_HOSTBRIDGE);
	assert_int_equal(dpg_pci_near(&t->gpus[0].pci, &t->nics[1].pci, &hops), DPG_NEAR_MACHINE);
	assert_int_equal(hops, 0);
	assert_int_equal(dpg_pci_near(&t->gpus[2].pci, &t->nics[1].pci, NULL), DPG_NEAR_SWITCH);
	assert_int_equal(dpg_pci_near(&t->gpus[2].pci, &t->nics[2].pci, NULL), DPG_NEAR_SWITCH);
	assert_int_equal(dpg_pci_near(&t->gpus[2].pci, &t->gpus[2].pci, NULL), DPG_NEAR_SAME);
	assert_string_equal(dpg_near_name(DPG_NEAR_SWITCH), "switch");
	/* lookup by bus id, NVML's long domain too */
	assert_int_equal(dpg_topo_find_gpu(t, "00000000:83:00.0", NULL), 2);
	{
		struct dpg_err e = { "" };

		assert_int_equal(dpg_topo_find_gpu(t, "0000:85:00.0", &e), -1);
		assert_non_null(strstr(e.msg, "no GPU at PCI 0000:85:00.0"));
	}
	dpg_topo_free(t);
}

static void test_syn_4x1(void **state)
{
	struct dpg_topo *t = load_fixture(SYN);
	struct dpg_plan *p = plan_ok(t, 4, 1, NULL, NULL, false);
	char line[256];

	(void)state;
	/* GPUs, cpus, NICs (the dual-port card: one port per task) and NUMA
	 * nodes: tests/plan/synthetic-2s-4gpu-2sw.4x1.json */
	check_invariants(t, p, NULL, NULL, false);
	assert_string_equal(p->tasks[0].netdevs, "ib0");
	assert_int_equal(dpg_plan_format_task(p, 2, line, sizeof(line)) > 0, 1);
	assert_string_equal(line, "task 2: gpus 0000:83:00.0 (visible 2) nics mlx5_1 cpus 4-5,12-13 numa 1");
	/* cut, never overflowing */
	assert_int_equal(dpg_plan_format_task(p, 2, line, 12), 11);
	assert_string_equal(line, "task 2: ...");
	assert_int_equal(dpg_plan_format_task(p, 4, line, sizeof(line)), -1);
	dpg_plan_free(p);
	dpg_topo_free(t);
}

static void test_syn_close_pairs(void **state)
{
	struct dpg_topo *t = load_fixture(SYN);
	struct dpg_plan *p = plan_ok(t, 2, 2, NULL, NULL, false);

	(void)state;
	check_invariants(t, p, NULL, NULL, false);
	assert_string_equal(p->tasks[0].visible, "0,1");
	assert_string_equal(p->tasks[1].visible, "2,3");
	assert_string_equal(p->tasks[0].cpus, "0-3,8-11");
	assert_string_equal(p->tasks[1].cpus, "4-7,12-15");
	/* one NIC per GPU: both ports of the dual-port card */
	assert_string_equal(p->tasks[0].nics, "mlx5_0");
	assert_string_equal(p->tasks[1].nics, "mlx5_1,mlx5_2");
	assert_string_equal(p->tasks[1].netdevs, "ib1,ib2");
	dpg_plan_free(p);

	/* one task with every GPU: the whole machine, every RDMA NIC */
	p = plan_ok(t, 1, 4, NULL, NULL, false);
	/* the strings: tests/plan/synthetic-2s-4gpu-2sw.1x4.json */
	check_invariants(t, p, NULL, NULL, false);
	dpg_plan_free(p);

	/* 3 GPUs: a pair below one switch plus the nearest other */
	p = plan_ok(t, 1, 3, NULL, NULL, false);
	check_invariants(t, p, NULL, NULL, false);
	assert_string_equal(p->tasks[0].visible, "0,1,2");
	dpg_plan_free(p);
	dpg_topo_free(t);
}

static void test_syn_spread(void **state)
{
	struct dpg_topo *t = load_fixture(SYN);
	struct dpg_plan *p = plan_ok(t, 2, 1, NULL, NULL, false);

	(void)state;
	/* one task per socket, each with its socket's cores: the strings are
	 * tests/plan/synthetic-2s-4gpu-2sw.2x1.json */
	check_invariants(t, p, NULL, NULL, false);
	dpg_plan_free(p);

	/* 3 tasks: 2 on the first socket, 1 on the other */
	p = plan_ok(t, 3, 1, NULL, NULL, false);
	check_invariants(t, p, NULL, NULL, false);
	assert_string_equal(p->tasks[0].visible, "0");
	assert_string_equal(p->tasks[1].visible, "1");
	assert_string_equal(p->tasks[2].visible, "2");
	assert_string_equal(p->tasks[2].cpus, "4-7,12-15");
	dpg_plan_free(p);
	dpg_topo_free(t);
}

static void test_syn_errors(void **state)
{
	struct dpg_topo *t = load_fixture(SYN);

	(void)state;
	plan_fails(t, 3, 2, NULL, NULL,
		   "3 tasks x 2 GPUs = 6 GPUs requested but this node has 4 (0000:03:00.0,0000:04:00.0,0000:83:00.0,0000:84:00.0)");
	plan_fails(t, 2, 2, "0,1", NULL,
		   "2 tasks x 2 GPUs = 4 GPUs requested but this node has 2 allocated of 4 (allocated: 0000:03:00.0,0000:04:00.0)");
	plan_fails(t, 1, 1, "", NULL, "has 0 allocated of 4 (allocated: none)");
	plan_fails(t, 1, 1, "4", NULL, "allocated GPU 4 does not exist: this node has 4 GPUs (0-3)");
	plan_fails(t, 1, 1, "0,", NULL, "trailing comma");
	plan_fails(t, 1, 1, ",0", NULL, "empty item");
	plan_fails(t, 1, 1, "zero", NULL, "\"zero\" is neither a GPU index");
	plan_fails(t, 1, 1, "3-1", NULL, "is neither");
	plan_fails(t, 1, 1, "0000:85:00.0", NULL, "no GPU at PCI 0000:85:00.0");
	plan_fails(t, 1, 1, "0000:85:00", NULL, "not a PCI bus id");
	plan_fails(t, 1, 1, NULL, "0-3,x", "cpu list \"0-3,x\"");
	plan_fails(t, 1, 1, NULL, "16-31", "no usable CPU: allocated CPUs \"16-31\"");
	plan_fails(t, 0, 1, NULL, NULL, "0 local tasks");
	plan_fails(t, DPG_PLAN_MAX_TASKS + 1, 0, NULL, NULL, "local tasks: must be 1-");
	plan_fails(t, 1, DPG_TOPO_MAX_GPUS + 1, NULL, NULL, "GPUs per task: at most");
	/* even sharing cannot give one task more GPUs than there are */
	{
		struct dpg_plan_req r;
		struct dpg_plan *p = NULL;
		struct dpg_err e = { "" };

		memset(&r, 0, sizeof(r));
		r.ntasks = 1;
		r.gpus_per_task = 5;
		r.policy.allow_gpu_sharing = true;
		assert_int_equal(dpg_plan_make(t, &r, &p, &e), -1);
		assert_non_null(strstr(e.msg, "1 tasks x 5 GPUs = 5 GPUs requested"));
		r.policy.bind = (enum dpg_bind)7;
		assert_int_equal(dpg_plan_make(t, &r, &p, &e), -1);
		assert_non_null(strstr(e.msg, "unknown bind policy"));
		assert_int_equal(dpg_plan_make(NULL, &r, &p, &e), -1);
		assert_int_equal(dpg_plan_make(t, NULL, &p, &e), -1);
		assert_int_equal(dpg_plan_make(t, &r, NULL, &e), -1);
	}
	dpg_topo_free(t);
}

static void test_syn_sharing(void **state)
{
	struct dpg_topo *t = load_fixture(SYN);
	struct dpg_plan *p = plan_ok(t, 8, 1, NULL, NULL, true);
	uint32_t i;

	(void)state;
	check_invariants(t, p, NULL, NULL, true);
	assert_true(p->gpus_shared);
	for (i = 0; i < 8; i++) {
		/* round-robin over the GPUs, one core each, near its GPU */
		assert_int_equal(p->tasks[i].gpu[0], i % 4);
		assert_int_equal(dpg_cpuset_count(&p->tasks[i].cpuset), 2);
		assert_int_equal(p->tasks[i].numa, (i % 4) < 2 ? 0 : 1);
	}
	dpg_plan_free(p);

	/* pairs shared: 4 tasks x 2 GPUs over 4 GPUs */
	p = plan_ok(t, 4, 2, NULL, NULL, true);
	check_invariants(t, p, NULL, NULL, true);
	assert_string_equal(p->tasks[0].visible, "0,1");
	assert_string_equal(p->tasks[1].visible, "2,3");
	assert_string_equal(p->tasks[2].visible, "0,1");
	assert_string_equal(p->tasks[3].visible, "2,3");
	dpg_plan_free(p);

	/* sharing allowed but not needed: nothing shared */
	p = plan_ok(t, 4, 1, NULL, NULL, true);
	check_invariants(t, p, NULL, NULL, true);
	assert_false(p->gpus_shared);
	dpg_plan_free(p);
	dpg_topo_free(t);
}

static void test_syn_cpu_only(void **state)
{
	struct dpg_topo *t = load_fixture(SYN);
	struct dpg_plan *p = plan_ok(t, 2, 0, NULL, NULL, false);

	(void)state;
	check_invariants(t, p, NULL, NULL, false);
	assert_string_equal(p->tasks[0].cpus, "0-3,8-11");
	assert_string_equal(p->tasks[1].cpus, "4-7,12-15");
	assert_string_equal(p->tasks[0].visible, "");
	assert_string_equal(p->tasks[0].gpus, "");
	assert_string_equal(p->tasks[0].nics, "mlx5_0");
	assert_string_equal(p->tasks[1].nics, "mlx5_1");
	dpg_plan_free(p);

	p = plan_ok(t, 1, 0, NULL, NULL, false);
	check_invariants(t, p, NULL, NULL, false);
	assert_string_equal(p->tasks[0].cpus, "0-15");
	dpg_plan_free(p);

	/* 4 tasks: 2 per socket, both ports of the dual-port card used */
	p = plan_ok(t, 4, 0, NULL, NULL, false);
	check_invariants(t, p, NULL, NULL, false);
	assert_string_equal(p->tasks[2].cpus, "4-5,12-13");
	assert_string_equal(p->tasks[2].nics, "mlx5_1");
	assert_string_equal(p->tasks[3].nics, "mlx5_2");
	dpg_plan_free(p);
	dpg_topo_free(t);
}

static void test_syn_alloc_subset(void **state)
{
	struct dpg_topo *t = load_fixture(SYN);
	struct dpg_plan *p;

	(void)state;
	/* Slurm gave the GPUs and cores of socket 1 only */
	p = plan_ok(t, 2, 1, "2-3", "4-7,12-15", false);
	check_invariants(t, p, "2-3", "4-7,12-15", false);
	assert_string_equal(p->tasks[0].visible, "2");
	assert_string_equal(p->tasks[1].visible, "3");
	assert_string_equal(p->tasks[0].cpus, "4-5,12-13");
	assert_string_equal(p->tasks[1].cpus, "6-7,14-15");
	assert_string_equal(p->tasks[0].nics, "mlx5_1");
	assert_string_equal(p->tasks[1].nics, "mlx5_2");
	dpg_plan_free(p);

	/* by bus id (NVML's 8-digit domain too), in any order */
	p = plan_ok(t, 2, 1, "0000:84:00.0,00000000:03:00.0", NULL, false);
	check_invariants(t, p, "0000:84:00.0,00000000:03:00.0", NULL, false);
	assert_string_equal(p->tasks[0].visible, "0");
	assert_string_equal(p->tasks[1].visible, "3");
	dpg_plan_free(p);

	/* all GPUs but only socket 0's cores: the GPUs near them */
	p = plan_ok(t, 2, 1, NULL, "0-3,8-11", false);
	check_invariants(t, p, NULL, "0-3,8-11", false);
	assert_string_equal(p->tasks[0].visible, "0");
	assert_string_equal(p->tasks[1].visible, "1");
	dpg_plan_free(p);

	/* GPUs on socket 1, cores on socket 0: still disjoint, in the cores */
	p = plan_ok(t, 2, 1, "2,3", "0-3,8-11", false);
	check_invariants(t, p, "2,3", "0-3,8-11", false);
	assert_string_equal(p->tasks[0].cpus, "0-1,8-9");
	assert_string_equal(p->tasks[1].cpus, "2-3,10-11");
	dpg_plan_free(p);
	dpg_topo_free(t);
}

static void test_syn_borrow(void **state)
{
	struct dpg_topo *t = load_fixture(SYN);
	struct dpg_plan *p;

	(void)state;
	/* socket 0 has one allocated core for its 2 GPU tasks: the second
	 * borrows from socket 1 rather than overlapping */
	p = plan_ok(t, 4, 1, NULL, "0,8,4-7,12-15", false);
	check_invariants(t, p, NULL, "0,8,4-7,12-15", false);
	assert_string_equal(p->tasks[0].cpus, "0,8");
	assert_true(dpg_cpuset_subset(&p->tasks[1].cpuset, &t->packages[1].cpus));
	assert_int_equal(p->tasks[1].numa, 1);
	dpg_plan_free(p);

	/* more tasks than cores: whole threads instead, still disjoint */
	p = plan_ok(t, 8, 0, NULL, "0-3,8-11", false);
	check_invariants(t, p, NULL, "0-3,8-11", false);
	assert_int_equal(dpg_cpuset_count(&p->tasks[7].cpuset), 1);
	dpg_plan_free(p);

	/* more tasks than CPUs: overlap is unavoidable, never empty */
	p = plan_ok(t, 5, 0, NULL, "0-1", false);
	check_invariants(t, p, NULL, "0-1", false);
	assert_string_equal(p->tasks[0].cpus, "0");
	assert_string_equal(p->tasks[1].cpus, "1");
	assert_string_equal(p->tasks[4].cpus, "0");
	dpg_plan_free(p);
	dpg_topo_free(t);
}

static void test_syn_bind_none(void **state)
{
	struct dpg_topo *t = load_fixture(SYN);
	struct dpg_plan_req r;
	struct dpg_plan *p = NULL;
	struct dpg_err e = { "" };
	uint32_t i;

	(void)state;
	memset(&r, 0, sizeof(r));
	r.ntasks = 4;
	r.gpus_per_task = 1;
	r.cpus = "0-5";
	r.policy.bind = DPG_BIND_NONE;
	if (dpg_plan_make(t, &r, &p, &e) != 0)
		fail_msg("%s", e.msg);
	check_invariants(t, p, NULL, "0-5", false);
	for (i = 0; i < 4; i++) {
		assert_string_equal(p->tasks[i].cpus, "0-5");
		assert_int_equal(p->tasks[i].gpu[0], i);
		assert_int_equal(p->tasks[i].numa, -1);
	}
	dpg_plan_free(p);
	dpg_topo_free(t);
}

static void test_syn_json(void **state)
{
	struct dpg_topo *t = load_fixture(SYN);
	struct dpg_plan *p = plan_ok(t, 2, 2, NULL, NULL, false);
	char *j = plan_json(p);
	char path[1024];

	(void)state;
	assert_non_null(strstr(j, "\"ntasks\": 2,"));
	assert_non_null(strstr(j, "\"gpus_per_task\": 2,"));
	assert_non_null(strstr(j, "\"bind\": \"closest\""));
	assert_non_null(strstr(j,
		"{\"local_rank\": 1, \"gpus\": [\"0000:83:00.0\",\"0000:84:00.0\"], \"visible\": \"2,3\", "
		"\"nics\": [\"mlx5_1\",\"mlx5_2\"], \"netdevs\": [\"ib1\",\"ib2\"], \"cpus\": \"4-7,12-15\", \"numa\": 1}"));
	assert_non_null(strstr(j, "{\"name\": \"eno1\", \"kind\": \"ethernet\", \"busid\": \"0000:06:00.0\", \"netdev\": \"eno1\"}"));
	assert_int_equal(j[0], '{');
	assert_int_equal(j[strlen(j) - 2], '}');
	free(j);
	dpg_plan_free(p);
	/* same bytes every time, and after reloading the file */
	fixture_path("synthetic-2s-4gpu-2sw.xml", path, sizeof(path));
	check_deterministic(t, path, 4, 1, NULL, NULL, false);
	check_deterministic(t, path, 3, 0, NULL, "1-6,9-14", false);
	check_deterministic(t, path, 7, 1, "1-3", NULL, true);
	/* the plan outlives its topology */
	p = plan_ok(t, 1, 1, NULL, NULL, false);
	dpg_topo_free(t);
	j = plan_json(p);
	assert_non_null(strstr(j, "\"0000:03:00.0\""));
	free(j);
	dpg_plan_free(p);
}

static void test_amd_fixture(void **state)
{
	struct dpg_topo *t = load_fixture("amd-1s-nps2-4gpu-slingshot.xml");
	struct dpg_plan *p;
	static const unsigned classes[] = { 0x0380, 0x1200, 0x0380, 0x0300 };
	uint32_t i;

	(void)state;
	/* 4 AMD GPUs by class; not the HD-audio function nor the ASPEED VGA */
	assert_int_equal(t->ngpus, 4);
	for (i = 0; i < 4; i++) {
		assert_int_equal(t->gpus[i].vendor, DPG_GPU_AMD);
		assert_int_equal(t->gpus[i].pci.class_id, classes[i]);
	}
	assert_string_equal(t->gpus[3].pci.busid, "0000:43:00.0");
	/* Slingshot recognised by PCI vendor; Ethernet only as fallback */
	assert_int_equal(t->nrdma, 2);
	assert_string_equal(t->nics[0].name, "hsi0");
	assert_int_equal(t->nics[0].kind, DPG_NIC_SLINGSHOT);
	assert_string_equal(t->nics[1].name, "hsi1");
	assert_string_equal(t->nics[2].name, "eno1");
	assert_string_equal(dpg_nic_kind_name(t->nics[0].kind), "slingshot");
	assert_string_equal(dpg_gpu_vendor_name(t->gpus[0].vendor), "amd");

	p = plan_ok(t, 4, 1, NULL, NULL, false);
	check_invariants(t, p, NULL, NULL, false);
	assert_string_equal(p->tasks[0].cpus, "0-1");
	assert_string_equal(p->tasks[1].cpus, "2-3");
	assert_string_equal(p->tasks[2].cpus, "4-5");
	assert_string_equal(p->tasks[3].cpus, "6-7");
	assert_string_equal(p->tasks[0].nics, "hsi0");
	assert_string_equal(p->tasks[1].nics, "hsi0");
	assert_string_equal(p->tasks[2].nics, "hsi1");
	assert_string_equal(p->tasks[3].nics, "hsi1");
	assert_string_equal(p->tasks[3].netdevs, "hsi1");
	dpg_plan_free(p);

	/* 2 x 2: each pair within one NUMA node */
	p = plan_ok(t, 2, 2, NULL, NULL, false);
	check_invariants(t, p, NULL, NULL, false);
	assert_string_equal(p->tasks[0].visible, "0,1");
	assert_string_equal(p->tasks[1].visible, "2,3");
	assert_int_equal(p->tasks[0].numa, 0);
	assert_int_equal(p->tasks[1].numa, 1);
	dpg_plan_free(p);
	dpg_topo_free(t);
}

static void test_reserved_fixture(void **state)
{
	struct dpg_topo *t = load_fixture("reserved-cores-numa-gaps.xml");
	struct dpg_cpuset want = cs("2-7,10-15");
	struct dpg_plan *p;

	(void)state;
	assert_true(dpg_cpuset_equal(&t->allowed, &want));
	want = cs("0-15");
	assert_true(dpg_cpuset_equal(&t->complete, &want));
	assert_int_equal(t->numa[1].os_index, 8);
	assert_int_equal(t->ngpus, 2);
	assert_string_equal(t->gpus[1].pci.busid, "0035:01:00.0");
	assert_int_equal(t->nrdma, 1);
	assert_string_equal(t->nics[0].name, "hfi1_0");
	assert_string_equal(t->nics[0].netdev, "ib0");

	/* the reserved cores never appear, even when "allocated" */
	p = plan_ok(t, 2, 1, NULL, "0-15", false);
	check_invariants(t, p, NULL, "0-15", false);
	assert_string_equal(p->tasks[0].cpus, "2-7");
	assert_string_equal(p->tasks[1].cpus, "10-15");
	assert_int_equal(p->tasks[0].numa, 0);
	assert_int_equal(p->tasks[1].numa, 8);
	assert_string_equal(p->tasks[0].nics, "hfi1_0");
	assert_string_equal(p->tasks[1].nics, "hfi1_0");
	dpg_plan_free(p);

	p = plan_ok(t, 6, 0, NULL, NULL, false);
	check_invariants(t, p, NULL, NULL, false);
	dpg_plan_free(p);

	plan_fails(t, 1, 1, NULL, "0-1,8-9", "no usable CPU");
	dpg_topo_free(t);
}

static void test_nogpu_fixture(void **state)
{
	struct dpg_topo *t = load_fixture("nogpu-ethernet.xml");
	struct dpg_plan *p;
	uint32_t i;

	(void)state;
	assert_int_equal(t->ngpus, 0);
	assert_int_equal(t->nrdma, 0);
	assert_int_equal(t->nnics, 3);	/* eth0, eth1, eth2: not the Wi-Fi */
	for (i = 0; i < t->nnics; i++) {
		assert_int_equal(t->nics[i].kind, DPG_NIC_ETHERNET);
		assert_string_not_equal(t->nics[i].name, "wlan0");
	}
	p = plan_ok(t, 2, 0, NULL, NULL, false);
	check_invariants(t, p, NULL, NULL, false);
	assert_string_equal(p->tasks[0].cpus, "0-1,4-5");
	assert_string_equal(p->tasks[1].cpus, "2-3,6-7");
	assert_string_equal(p->tasks[0].nics, "eth0");
	assert_string_equal(p->tasks[1].nics, "eth2");
	assert_int_equal(p->tasks[1].numa, 1);
	dpg_plan_free(p);

	plan_fails(t, 1, 1, NULL, NULL, "1 tasks x 1 GPUs = 1 GPUs requested but this node has 0");
	dpg_topo_free(t);
}

/* ================================================================ real machines */

#define P4D "aws-p4d.24xlarge-8xA100-4xEFA.xml"
#define JWB "jsc-juwels-booster-4xA100-4xHDR200-jwb0004.xml"

static void test_real_p4d(void **state)
{
	struct dpg_topo *t = load_shared(P4D);
	struct dpg_plan *p;
	uint32_t i;

	(void)state;
	/* 8 A100s: the 6 NVSwitch functions are no GPUs */
	assert_int_equal(t->ngpus, 8);
	for (i = 0; i < 8; i++)
		assert_int_equal(t->gpus[i].vendor, DPG_GPU_NVIDIA);
	/* 4 EFA first; the 4 ENA only as fallback */
	assert_int_equal(t->nrdma, 4);
	for (i = 0; i < 4; i++)
		assert_int_equal(strncmp(t->nics[i].name, "rdmap", 5), 0);

	p = plan_ok(t, 8, 1, NULL, NULL, false);
	check_invariants(t, p, NULL, NULL, false);
	for (i = 0; i < 8; i++) {
		const struct dpg_plan_task *r = &p->tasks[i];

		assert_int_equal(r->gpu[0], i);
		assert_int_equal(r->nnics, 1);
		/* each pair of GPUs shares the EFA on its PCIe tree */
		assert_int_equal(r->nic[0], p->tasks[i ^ 1].nic[0]);
		assert_true(dpg_pci_near(&t->gpus[i].pci, &t->nics[r->nic[0]].pci, NULL) <=
			    DPG_NEAR_HOSTBRIDGE);
		assert_int_equal(dpg_cpuset_count(&r->cpuset), 12);
		assert_int_equal(r->numa, i < 4 ? 0 : 1);
	}
	assert_string_equal(p->tasks[0].cpus, "0-5,48-53");
	assert_string_equal(p->tasks[7].cpus, "42-47,90-95");
	assert_string_equal(p->tasks[0].nics, "rdmap16s27");
	assert_string_equal(p->tasks[7].nics, "rdmap160s27");
	dpg_plan_free(p);

	/* 4 x 2: pairs below one host bridge, with their EFA */
	p = plan_ok(t, 4, 2, NULL, NULL, false);
	check_invariants(t, p, NULL, NULL, false);
	for (i = 0; i < 4; i++) {
		assert_int_equal(p->tasks[i].gpu[0], 2 * i);
		assert_int_equal(p->tasks[i].gpu[1], 2 * i + 1);
		assert_int_equal(p->tasks[i].nnics, 1);
	}
	dpg_plan_free(p);

	/* Slurm gave GPUs 4-7 and socket 1's cores only */
	p = plan_ok(t, 4, 1, "4-7", "24-47,72-95", false);
	check_invariants(t, p, "4-7", "24-47,72-95", false);
	for (i = 0; i < 4; i++) {
		assert_int_equal(p->tasks[i].gpu[0], 4 + i);
		assert_int_equal(p->tasks[i].numa, 1);
	}
	assert_string_equal(p->tasks[0].cpus, "24-29,72-77");
	dpg_plan_free(p);

	/* 2 tasks: one per socket */
	p = plan_ok(t, 2, 1, NULL, NULL, false);
	check_invariants(t, p, NULL, NULL, false);
	assert_string_equal(p->tasks[0].visible, "0");
	assert_string_equal(p->tasks[1].visible, "4");
	assert_string_equal(p->tasks[1].cpus, "24-47,72-95");
	dpg_plan_free(p);

	/* CPU-only: sockets and EFAs spread */
	p = plan_ok(t, 4, 0, NULL, NULL, false);
	check_invariants(t, p, NULL, NULL, false);
	assert_string_equal(p->tasks[0].cpus, "0-11,48-59");
	assert_string_equal(p->tasks[0].nics, "rdmap16s27");
	assert_string_equal(p->tasks[1].nics, "rdmap32s27");
	assert_string_equal(p->tasks[2].nics, "rdmap144s27");
	dpg_plan_free(p);

	plan_fails(t, 8, 2, NULL, NULL, "8 tasks x 2 GPUs = 16 GPUs requested but this node has 8 (0000:10:1c.0,");
	plan_fails(t, 4, 2, "4-7", NULL, "but this node has 4 allocated of 8 (allocated: 0000:90:1c.0,0000:90:1d.0,0000:a0:1c.0,0000:a0:1d.0)");
	dpg_topo_free(t);
}

static void test_real_juwels_booster(void **state)
{
	struct dpg_topo *t = load_shared(JWB);
	struct dpg_plan *p;
	static const int numa[] = { 3, 1, 7, 5 };
	static const char *const nics[] = { "mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3" };
	static const char *const cpus[] = { "18-23,66-71", "6-11,54-59", "42-47,90-95", "30-35,78-83" };
	uint32_t i;

	(void)state;
	assert_int_equal(t->ngpus, 4);	/* the ASPEED VGA is none */
	assert_int_equal(t->nnuma, 8);
	assert_int_equal(t->nrdma, 4);
	p = plan_ok(t, 4, 1, NULL, NULL, false);
	check_invariants(t, p, NULL, NULL, false);
	for (i = 0; i < 4; i++) {
		const struct dpg_plan_task *r = &p->tasks[i];
		const struct dpg_numa *n = numa_by_os(t, numa[i]);

		assert_int_equal(r->gpu[0], i);
		/* the HDR200 on the GPU's own PCIe switch */
		assert_string_equal(r->nics, nics[i]);
		assert_int_equal(dpg_pci_near(&t->gpus[i].pci, &t->nics[r->nic[0]].pci, NULL),
				 DPG_NEAR_SWITCH);
		/* its IPoIB interface, for NCCL_SOCKET_IFNAME */
		assert_int_equal(t->nics[r->nic[0]].netdev[2], nics[i][5]);
		assert_int_equal(strncmp(r->netdevs, "ib", 2), 0);
		/* the cores of the GPU's NUMA node (NPS4) */
		assert_int_equal(r->numa, numa[i]);
		assert_non_null(n);
		assert_true(dpg_cpuset_subset(&r->cpuset, &n->cpus));
		assert_string_equal(r->cpus, cpus[i]);
	}
	dpg_plan_free(p);

	/* 2 x 2: one package each, both of its HCAs */
	p = plan_ok(t, 2, 2, NULL, NULL, false);
	check_invariants(t, p, NULL, NULL, false);
	assert_string_equal(p->tasks[0].visible, "0,1");
	assert_string_equal(p->tasks[0].cpus, "0-23,48-71");
	assert_string_equal(p->tasks[0].nics, "mlx5_0,mlx5_1");
	dpg_plan_free(p);

	/* CPU-only, a task per NUMA node: each HCA serves two */
	p = plan_ok(t, 8, 0, NULL, NULL, false);
	check_invariants(t, p, NULL, NULL, false);
	{
		unsigned uses[4] = { 0, 0, 0, 0 };

		for (i = 0; i < 8; i++) {
			assert_int_equal(p->tasks[i].numa, (int)i);
			uses[p->tasks[i].nic[0]]++;
		}
		for (i = 0; i < 4; i++)
			assert_int_equal(uses[i], 2);
	}
	dpg_plan_free(p);
	dpg_topo_free(t);
}

static void test_real_tioga(void **state)
{
	struct dpg_topo *t = load_shared("llnl-tioga-ex235a-8xMI250X-4xslingshot.xml");
	struct dpg_plan *p;
	unsigned uses[4] = { 0, 0, 0, 0 };
	uint32_t i;

	(void)state;
	assert_int_equal(t->ngpus, 8);	/* 4 MI250X = 8 GCDs */
	for (i = 0; i < 8; i++) {
		assert_int_equal(t->gpus[i].vendor, DPG_GPU_AMD);
		assert_int_equal(t->gpus[i].pci.class_id, 0x0380);
	}
	assert_string_equal(t->gpus[0].osdev, "rsmi0");
	assert_int_equal(t->nrdma, 4);
	for (i = 0; i < 4; i++) {
		char want[8];

		snprintf(want, sizeof(want), "hsi%u", i);
		assert_string_equal(t->nics[i].name, want);
		assert_int_equal(t->nics[i].kind, DPG_NIC_SLINGSHOT);
		assert_int_equal(t->nics[i].pci.vendor_id, 0x17db);
	}
	p = plan_ok(t, 8, 1, NULL, NULL, false);
	check_invariants(t, p, NULL, NULL, false);
	for (i = 0; i < 8; i++) {
		const struct dpg_plan_task *r = &p->tasks[i];

		/* the Slingshot NIC in the GCD's NUMA node */
		assert_int_equal(t->nics[r->nic[0]].pci.numa, t->gpus[i].pci.numa);
		assert_int_equal(r->numa, (int)t->numa[t->gpus[i].pci.numa].os_index);
		uses[r->nic[0]]++;
	}
	for (i = 0; i < 4; i++)
		assert_int_equal(uses[i], 2);
	dpg_plan_free(p);

	p = plan_ok(t, 4, 2, NULL, NULL, false);
	check_invariants(t, p, NULL, NULL, false);
	for (i = 0; i < 4; i++)
		assert_int_equal(t->gpus[p->tasks[i].gpu[0]].pci.numa,
				 t->gpus[p->tasks[i].gpu[1]].pci.numa);
	dpg_plan_free(p);
	dpg_topo_free(t);
}

static void test_real_tuolumne(void **state)
{
	struct dpg_topo *t = load_shared("llnl-tuolumne-ex255a-4xMI300A-SPX.xml");
	struct dpg_plan *p;
	uint32_t i;

	(void)state;
	assert_int_equal(t->ngpus, 4);
	assert_int_equal(t->gpus[0].pci.class_id, 0x1200);
	assert_int_equal(t->nrdma, 4);
	p = plan_ok(t, 4, 1, NULL, NULL, false);
	check_invariants(t, p, NULL, NULL, false);
	for (i = 0; i < 4; i++) {
		char want[8];

		snprintf(want, sizeof(want), "hsi%u", i);
		assert_int_equal(p->tasks[i].gpu[0], i);
		assert_string_equal(p->tasks[i].nics, want);
		assert_int_equal(p->tasks[i].numa, (int)i);
	}
	dpg_plan_free(p);
	dpg_topo_free(t);
}

static void test_real_g4dn(void **state)
{
	struct dpg_topo *t = load_shared("aws-g4dn.metal-8xT4-1xEFA.xml");
	struct dpg_plan *p;
	uint32_t i;

	(void)state;
	assert_int_equal(t->ngpus, 8);
	assert_int_equal(t->nrdma, 1);
	assert_string_equal(t->gpus[0].osdev, "nvml0");
	p = plan_ok(t, 8, 1, NULL, NULL, false);
	check_invariants(t, p, NULL, NULL, false);
	for (i = 0; i < 8; i++)	/* the one EFA for all, never the ENA */
		assert_string_equal(p->tasks[i].nics, "rdmap197s0");
	dpg_plan_free(p);
	dpg_topo_free(t);
}

static void test_real_pascal(void **state)
{
	struct dpg_topo *t = load_shared("llnl-pascal-2xP100-1xmlx5.xml");
	struct dpg_plan *p;

	(void)state;
	assert_int_equal(t->ngpus, 2);
	assert_int_equal(t->nrdma, 1);
	p = plan_ok(t, 2, 1, NULL, NULL, false);
	check_invariants(t, p, NULL, NULL, false);
	assert_string_equal(p->tasks[0].nics, "mlx5_0");
	assert_string_equal(p->tasks[1].nics, "mlx5_0");
	assert_string_equal(p->tasks[0].cpus, "0-8,36-44");
	assert_string_equal(p->tasks[1].cpus, "9-17,45-53");
	assert_int_equal(dpg_pci_near(&t->gpus[0].pci, &t->nics[0].pci, NULL), DPG_NEAR_SWITCH);
	dpg_plan_free(p);
	dpg_topo_free(t);
}

static void test_real_chimera(void **state)
{
	struct dpg_topo *t = load_shared("workstation-chimera-nvidia+amd-noHSN.hwloc1.xml");
	struct dpg_plan *p;
	uint32_t i;

	(void)state;
	/* hwloc 1.x XML; one NVIDIA and one AMD GPU, both class 0300 */
	assert_int_equal(t->ngpus, 2);
	assert_int_equal(t->gpus[0].vendor, DPG_GPU_NVIDIA);
	assert_int_equal(t->gpus[1].vendor, DPG_GPU_AMD);
	assert_int_equal(t->gpus[1].vendor_index, 0);
	/* NUMA ids 0 and 2 */
	assert_int_equal(t->numa[1].os_index, 2);
	/* no RDMA NIC: Ethernet fallback, never the Wi-Fi */
	assert_int_equal(t->nrdma, 0);
	for (i = 0; i < t->nnics; i++)
		assert_string_not_equal(t->nics[i].name, "wlp5s0");
	p = plan_ok(t, 2, 1, NULL, NULL, false);
	check_invariants(t, p, NULL, NULL, false);
	assert_int_equal(p->tasks[0].numa, 0);
	assert_int_equal(p->tasks[1].numa, 2);
	assert_string_equal(p->tasks[0].nics, "enp4s0");
	assert_int_equal(t->nics[p->tasks[1].nic[0]].kind, DPG_NIC_ETHERNET);
	dpg_plan_free(p);
	dpg_topo_free(t);
}

static void test_real_power8(void **state)
{
	struct dpg_topo *t = load_shared("ibm-power8-4xP100-nvlink-noNIC-trimmed.xml");
	struct dpg_plan *p;

	(void)state;
	assert_int_equal(t->ngpus, 4);
	assert_int_equal(t->nnics, 0);
	assert_string_equal(t->gpus[2].pci.busid, "000a:01:00.0");
	p = plan_ok(t, 4, 1, NULL, NULL, false);
	check_invariants(t, p, NULL, NULL, false);
	assert_string_equal(p->tasks[0].nics, "");
	assert_int_equal(p->tasks[2].numa, 1);
	assert_string_equal(p->tasks[3].cpus, "96-97,104-105");
	dpg_plan_free(p);
	dpg_topo_free(t);
}

static void test_real_hwloc1_and_others(void **state)
{
	struct dpg_topo *t;
	struct dpg_plan *p;

	(void)state;
	t = load_shared("meluxina-gpu-4xA100-2xHDR-mel2001.hwloc1.xml");
	assert_int_equal(t->ngpus, 4);
	assert_int_equal(t->nrdma, 2);
	assert_int_equal(t->nnuma, 8);
	p = plan_ok(t, 4, 1, NULL, NULL, false);
	check_invariants(t, p, NULL, NULL, false);
	/* two GPUs per HDR HCA, the ones of its package */
	assert_string_equal(p->tasks[0].nics, "mlx5_0");
	assert_string_equal(p->tasks[1].nics, "mlx5_0");
	assert_string_equal(p->tasks[2].nics, "mlx5_1");
	assert_string_equal(p->tasks[3].nics, "mlx5_1");
	dpg_plan_free(p);
	dpg_topo_free(t);

	t = load_shared("jsc-juwels-cluster-gpu-4xV100-2xEDR-jwc09n003.hwloc1.xml");
	assert_int_equal(t->ngpus, 4);
	assert_int_equal(t->nrdma, 2);
	p = plan_ok(t, 4, 1, NULL, NULL, false);
	check_invariants(t, p, NULL, NULL, false);
	assert_string_equal(p->tasks[1].nics, "mlx5_0");
	assert_string_equal(p->tasks[2].nics, "mlx5_1");
	dpg_plan_free(p);
	dpg_topo_free(t);

	t = load_shared("jsc-jureca-dc-gpu-4xA100-4xHDR-jrc0323.xml");
	assert_int_equal(t->ngpus, 4);
	p = plan_ok(t, 4, 1, NULL, NULL, false);
	check_invariants(t, p, NULL, NULL, false);
	assert_string_equal(p->tasks[0].nics, "mlx5_0");
	assert_int_equal(p->tasks[0].numa, 3);
	dpg_plan_free(p);
	dpg_topo_free(t);
}

/* Every real file and fixture, many shapes: invariants and determinism. */
static void test_sweep(void **state)
{
	static const char *const shared[] = {
		"aws-g4dn.metal-8xT4-1xEFA.xml", P4D,
		"ibm-power8-4xP100-nvlink-noNIC-trimmed.xml",
		"jsc-jureca-dc-gpu-4xA100-4xHDR-jrc0323.xml", JWB,
		"jsc-juwels-cluster-gpu-4xV100-2xEDR-jwc09n003.hwloc1.xml",
		"llnl-pascal-2xP100-1xmlx5.xml",
		"llnl-tioga-ex235a-8xMI250X-4xslingshot.xml",
		"llnl-tuolumne-ex255a-4xMI300A-SPX.xml",
		"meluxina-gpu-4xA100-2xHDR-mel2001.hwloc1.xml",
		"workstation-chimera-nvidia+amd-noHSN.hwloc1.xml",
	};
	static const char *const fixtures[] = {
		SYN, "amd-1s-nps2-4gpu-slingshot.xml", "reserved-cores-numa-gaps.xml",
		"nogpu-ethernet.xml",
	};
	static const struct {
		uint32_t ntasks, G;
		bool share;
		const char *cpus;
	} shapes[] = {
		{ 1, 0, false, NULL }, { 2, 0, false, NULL }, { 3, 0, false, NULL },
		{ 1, 1, false, NULL }, { 2, 1, false, NULL }, { 3, 1, false, NULL },
		{ 4, 1, false, NULL }, { 8, 1, false, NULL }, { 2, 2, false, NULL },
		{ 4, 2, false, NULL }, { 1, 4, false, NULL }, { 3, 2, false, NULL },
		{ 16, 1, true, NULL }, { 5, 2, true, NULL }, { 7, 0, false, "1-9" },
		{ 4, 1, true, "0-3,8-11" }, { 64, 0, false, NULL },
	};
	char path[1024];
	size_t i, k, nfiles = NELEM(shared) + NELEM(fixtures), done = 0;

	(void)state;
	for (i = 0; i < nfiles; i++) {
		struct dpg_topo *t;

		if (i < NELEM(shared)) {
			shared_path(shared[i], path, sizeof(path));
			if (access(path, R_OK) != 0)
				continue;
		} else {
			fixture_path(fixtures[i - NELEM(shared)], path, sizeof(path));
		}
		t = load_path(path);
		for (k = 0; k < NELEM(shapes); k++) {
			struct dpg_plan_req r;
			struct dpg_plan *p = NULL;
			struct dpg_err e = { "" };
			struct dpg_cpuset u;

			memset(&r, 0, sizeof(r));
			r.ntasks = shapes[k].ntasks;
			r.gpus_per_task = shapes[k].G;
			r.cpus = shapes[k].cpus;
			r.policy.allow_gpu_sharing = shapes[k].share;
			if (shapes[k].cpus != NULL) {
				u = cs(shapes[k].cpus);
				dpg_cpuset_and(&u, &u, &t->allowed);
				if (dpg_cpuset_empty(&u))
					continue;
			}
			if (dpg_plan_make(t, &r, &p, &e) != 0) {
				/* only "not enough GPUs" may fail */
				uint64_t want = (uint64_t)r.ntasks * r.gpus_per_task;

				if (strstr(e.msg, "GPUs requested but this node has") == NULL ||
				    (want <= t->ngpus) ||
				    (r.policy.allow_gpu_sharing && r.gpus_per_task <= t->ngpus))
					fail_msg("%s %ux%u: %s", path, r.ntasks, r.gpus_per_task, e.msg);
				continue;
			}
			check_invariants(t, p, NULL, shapes[k].cpus, shapes[k].share);
			dpg_plan_free(p);
			check_deterministic(t, NULL, r.ntasks, r.gpus_per_task, NULL,
					    shapes[k].cpus, shapes[k].share);
			done++;
		}
		dpg_topo_free(t);
	}
	print_message("sweep: %zu plans checked\n", done);
	assert_true(done > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cpuset_parse_format),
		cmocka_unit_test(test_busid_parse),
		cmocka_unit_test(test_load_errors),
		cmocka_unit_test(test_load_isolated),
		cmocka_unit_test(test_load_buffer),
		cmocka_unit_test(test_load_bad_pci),
		cmocka_unit_test(test_load_live),
		cmocka_unit_test(test_syn_facts),
		cmocka_unit_test(test_syn_4x1),
		cmocka_unit_test(test_syn_close_pairs),
		cmocka_unit_test(test_syn_spread),
		cmocka_unit_test(test_syn_errors),
		cmocka_unit_test(test_syn_sharing),
		cmocka_unit_test(test_syn_cpu_only),
		cmocka_unit_test(test_syn_alloc_subset),
		cmocka_unit_test(test_syn_borrow),
		cmocka_unit_test(test_syn_bind_none),
		cmocka_unit_test(test_syn_json),
		cmocka_unit_test(test_amd_fixture),
		cmocka_unit_test(test_reserved_fixture),
		cmocka_unit_test(test_nogpu_fixture),
		cmocka_unit_test(test_real_p4d),
		cmocka_unit_test(test_real_juwels_booster),
		cmocka_unit_test(test_real_tioga),
		cmocka_unit_test(test_real_tuolumne),
		cmocka_unit_test(test_real_g4dn),
		cmocka_unit_test(test_real_pascal),
		cmocka_unit_test(test_real_chimera),
		cmocka_unit_test(test_real_power8),
		cmocka_unit_test(test_real_hwloc1_and_others),
		cmocka_unit_test(test_sweep),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
