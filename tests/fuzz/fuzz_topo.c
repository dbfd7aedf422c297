/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_topo.c - libFuzzer harness for lib/topo.c + lib/plan.c: load the
 * input as an hwloc XML topology (dpg_topo_load_xml_buffer), then plan a few
 * task/GPU shapes on it (dpg_plan_make, format, JSON) and free everything.
 * Seed corpus: the XML files of tests/fixtures/topo.
 *
 * hwloc 2.9.0 itself crashes (NULL dereference in hwloc_bitmap_compare_first
 * under hwloc_topology_load) on some malformed XML, reproducible with hwloc
 * alone (tests/fuzz/crashes/topo-hwloc-upstream-segv.xml).  So that the
 * fuzzer keeps looking at dpg's code, each input is first loaded by plain
 * hwloc in a forked child with default signal dispositions; inputs that kill
 * the child are skipped.  DPG_FUZZ_TOPO_NO_PRECHECK=1 turns that off.
 *
 * hwloc (2.9.0) and libxml2 (2.9.14, loaded by hwloc's xml_libxml plugin)
 * leak on some malformed XML (an unknown element; a bogus encoding= name),
 * again with hwloc alone; tests/fuzz/lsan.supp suppresses leaks from those two
 * libraries.  libxml2 and the plugin are pinned here (RTLD_NODELETE) so that
 * their frames still have a module name when LeakSanitizer reports at exit. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlfcn.h>
#include <hwloc.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plan.h"
#include "topo.h"

static FILE *devnull;
static int precheck = 1;

/* The kernel's sigaction, to reset a signal behind the sanitizers' backs. */
struct ksigaction {
	void (*handler)(int);
	unsigned long flags;
	void (*restorer)(void);
	uint64_t mask;
};

/* 0 if plain hwloc survives loading buf, -1 if it crashes (or fails oddly). */
static int hwloc_survives(const char *buf, size_t len)
{
	pid_t pid;
	int st;
	char *copy;

	pid = fork();
	if (pid < 0)
		return 0;
	if (pid == 0) {
		static const int sigs[] = { SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL };
		struct ksigaction dfl;
		hwloc_topology_t h;

		memset(&dfl, 0, sizeof(dfl));
		dfl.handler = SIG_DFL;
		for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
			syscall(SYS_rt_sigaction, sigs[i], &dfl, NULL, 8);
		copy = malloc(len + 1);
		if (copy == NULL)
			_exit(0);
		memcpy(copy, buf, len);
		copy[len] = '\0';
		if (hwloc_topology_init(&h) != 0)
			_exit(0);
		if (hwloc_topology_set_xmlbuffer(h, copy, (int)len + 1) == 0)
			(void)hwloc_topology_load(h);
		hwloc_topology_destroy(h);
		_exit(0);
	}
	while (waitpid(pid, &st, 0) < 0)
		;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

struct shape {
	uint32_t ntasks, gpus_per_task;
	const char *gpus, *cpus;
	enum dpg_bind bind;
	bool share;
};

static const struct shape shapes[] = {
	{ 1, 0, NULL, NULL, DPG_BIND_CLOSEST, false },
	{ 0, 1, NULL, NULL, DPG_BIND_CLOSEST, false },	/* ntasks = ngpus */
	{ 2, 2, NULL, NULL, DPG_BIND_CLOSEST, true },
	{ 3, 1, "0,1", "0-3,8", DPG_BIND_NONE, true },
	{ 8, 1, "", NULL, DPG_BIND_CLOSEST, false },
	{ 5, 1, NULL, "1-2", DPG_BIND_CLOSEST, true },
};

static void check_plan(const struct dpg_topo *t, const struct dpg_plan *p,
		       uint32_t ntasks)
{
	char line[4096];

	if (p->ntasks != ntasks || p->tasks == NULL)
		abort();
	if (p->ngpus > DPG_TOPO_MAX_GPUS || p->nnics > DPG_TOPO_MAX_NICS)
		abort();
	for (uint32_t i = 0; i < p->ntasks; i++) {
		const struct dpg_plan_task *k = &p->tasks[i];

		if (k->cpus == NULL || k->visible == NULL || k->gpus == NULL ||
		    k->nics == NULL || k->netdevs == NULL)
			abort();
		if (k->ngpus > DPG_TOPO_MAX_GPUS || k->nnics > DPG_TOPO_MAX_NICS)
			abort();
		for (uint32_t g = 0; g < k->ngpus; g++)
			if (k->gpu[g] >= t->ngpus) {
				fprintf(stderr, "task %u gpu %u >= %u GPUs\n", i,
					k->gpu[g], t->ngpus);
				abort();
			}
		for (uint32_t n = 0; n < k->nnics; n++)
			if (k->nic[n] >= p->nnics) {
				fprintf(stderr, "task %u nic %u >= %u NICs\n", i,
					k->nic[n], p->nnics);
				abort();
			}
		(void)dpg_plan_format_task(p, i, line, sizeof(line));
		(void)dpg_plan_format_task(p, i, line, 8);
	}
	if (devnull != NULL) {
		struct dpg_err err;
		(void)dpg_plan_write_json(p, devnull, &err);
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	devnull = fopen("/dev/null", "w");
	(void)dlopen("libxml2.so.2", RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE);
	(void)dlopen("hwloc_xml_libxml.so", RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE);
	(void)dlopen("/usr/lib/x86_64-linux-gnu/hwloc/hwloc_xml_libxml.so",
		     RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE);
	if (getenv("DPG_FUZZ_TOPO_NO_PRECHECK") != NULL)
		precheck = 0;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dpg_topo *t = NULL;
	struct dpg_err err;

	if (size == 0 || size > (1u << 20))
		return 0;
	if (precheck && hwloc_survives((const char *)data, size) != 0)
		return 0;
	memset(&err, 0, sizeof(err));
	if (dpg_topo_load_xml_buffer((const char *)data, size, &t, &err) != 0)
		return 0;
	if (t == NULL)
		abort();
	if (t->ngpus > DPG_TOPO_MAX_GPUS || t->nnics > DPG_TOPO_MAX_NICS ||
	    t->nrdma > t->nnics)
		abort();
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		struct dpg_plan_req req;
		struct dpg_plan *p = NULL;

		memset(&req, 0, sizeof(req));
		req.ntasks = shapes[s].ntasks ? shapes[s].ntasks :
			(t->ngpus ? t->ngpus : 1);
		req.gpus_per_task = shapes[s].gpus_per_task;
		req.gpus = shapes[s].gpus;
		req.cpus = shapes[s].cpus;
		req.policy.bind = shapes[s].bind;
		req.policy.allow_gpu_sharing = shapes[s].share;
		memset(&err, 0, sizeof(err));
		if (dpg_plan_make(t, &req, &p, &err) == 0) {
			check_plan(t, p, req.ntasks);
			dpg_plan_free(p);
		} else if (p != NULL) {
			fprintf(stderr, "dpg_plan_make failed but set *out\n");
			abort();
		}
	}
	{
		char busid[DPG_BUSID_LEN + 8];
		for (uint32_t g = 0; g < t->ngpus; g++) {
			snprintf(busid, sizeof(busid), "%s", t->gpus[g].pci.busid);
			if (dpg_topo_find_gpu(t, busid, &err) != (int)g) {
				fprintf(stderr, "find_gpu(%s) != %u\n", busid, g);
				abort();
			}
		}
	}
	dpg_topo_free(t);
	return 0;
}
