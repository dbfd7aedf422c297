/* SPDX-License-Identifier: BSD-3-Clause */
/* topo_pack.c - a topology as bytes, so that the forked child which parsed an
 * XML hands its result to the parent instead of the parent parsing it again. */
#include "topo.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The layout: the struct (its pointers meaningless), then packages[],
 * numa[], cores[] and pus[].  Both ends are the same binary (a fork), so
 * sizes and padding agree; what the bytes say is checked all the same. */

/* The bytes the arrays of t take, or 0 when a count is out of range. */
static size_t arrays_len(const struct dpg_topo *t)
{
	if (t->npackages > DPG_TOPO_MAX_PACKAGES || t->nnuma > DPG_TOPO_MAX_NUMA ||
	    t->ncores > DPG_CPU_MAX || t->npus > DPG_CPU_MAX)
		return 0;
	return t->npackages * sizeof(*t->packages) + t->nnuma * sizeof(*t->numa) +
	       t->ncores * sizeof(*t->cores) + t->npus * sizeof(*t->pus);
}

int dpg_topo_pack(const struct dpg_topo *t, uint8_t **buf, size_t *len, struct dpg_err *err)
{
	size_t alen = arrays_len(t), o = sizeof(*t);
	struct dpg_topo head = *t;
	uint8_t *b;

	if (alen == 0 && (t->npackages | t->nnuma | t->ncores | t->npus) != 0)
		return dpg_errf(err, "topology too large to hand over (%u cores, %u PUs)",
				t->ncores, t->npus);
	b = malloc(sizeof(*t) + alen);
	if (b == NULL)
		return dpg_errf(err, "out of memory packing the topology");
	head.packages = NULL;
	head.numa = NULL;
	head.cores = NULL;
	head.pus = NULL;
	memcpy(b, &head, sizeof(head));
#define PUT(arr, n)						\
	do {							\
		if ((n) > 0)					\
			memcpy(b + o, (arr), (n) * sizeof(*(arr)));	\
		o += (n) * sizeof(*(arr));			\
	} while (0)
	PUT(t->packages, t->npackages);
	PUT(t->numa, t->nnuma);
	PUT(t->cores, t->ncores);
	PUT(t->pus, t->npus);
#undef PUT
	*buf = b;
	*len = o;
	return 0;
}

static bool terminated(const char *s, size_t n)
{
	return memchr(s, '\0', n) != NULL;
}

/* Every string ends inside its field, every count and index is in range. */
static bool devices_ok(const struct dpg_topo *t)
{
	if (t->ngpus > DPG_TOPO_MAX_GPUS || t->nnics > DPG_TOPO_MAX_NICS || t->nrdma > t->nnics)
		return false;
	for (uint32_t i = 0; i < t->ngpus; i++) {
		const struct dpg_gpu *g = &t->gpus[i];

		if (!terminated(g->pci.busid, sizeof(g->pci.busid)) ||
		    !terminated(g->osdev, sizeof(g->osdev)) || g->pci.depth > DPG_TOPO_PCI_DEPTH ||
		    g->pci.numa < -1 || g->pci.numa >= (int)t->nnuma ||
		    g->pci.package < -1 || g->pci.package >= (int)t->npackages)
			return false;
	}
	for (uint32_t i = 0; i < t->nnics; i++) {
		const struct dpg_nic *n = &t->nics[i];

		if (!terminated(n->pci.busid, sizeof(n->pci.busid)) ||
		    !terminated(n->name, sizeof(n->name)) ||
		    !terminated(n->netdev, sizeof(n->netdev)) || n->pci.depth > DPG_TOPO_PCI_DEPTH ||
		    n->pci.numa < -1 || n->pci.numa >= (int)t->nnuma ||
		    n->pci.package < -1 || n->pci.package >= (int)t->npackages)
			return false;
	}
	return true;
}

static bool cpus_ok(const struct dpg_topo *t)
{
	for (uint32_t i = 0; i < t->nnuma; i++)
		if (t->numa[i].package < -1 || t->numa[i].package >= (int)t->npackages)
			return false;
	for (uint32_t i = 0; i < t->ncores; i++) {
		const struct dpg_core *c = &t->cores[i];

		if (c->package < -1 || c->package >= (int)t->npackages || c->numa < -1 ||
		    c->numa >= (int)t->nnuma || c->pu_first > t->npus ||
		    c->npus > t->npus - c->pu_first)
			return false;
	}
	for (uint32_t i = 0; i < t->npus; i++)
		if (t->pus[i] >= DPG_CPU_MAX)
			return false;
	return true;
}

int dpg_topo_unpack(const uint8_t *buf, size_t len, struct dpg_topo **out,
		    struct dpg_err *err)
{
	struct dpg_topo *t;
	size_t alen, o = sizeof(*t);

	*out = NULL;
	if (buf == NULL || len < sizeof(*t))
		return dpg_errf(err, "topology hand-over: %zu bytes, fewer than the %zu of "
				"its header", len, sizeof(*t));
	t = calloc(1, sizeof(*t));
	if (t == NULL)
		return dpg_errf(err, "out of memory unpacking the topology");
	memcpy(t, buf, sizeof(*t));
	t->packages = NULL;
	t->numa = NULL;
	t->cores = NULL;
	t->pus = NULL;
	alen = arrays_len(t);
	if ((alen == 0 && (t->npackages | t->nnuma | t->ncores | t->npus) != 0) ||
	    len - sizeof(*t) != alen || !terminated(t->source, sizeof(t->source))) {
		dpg_topo_free(t);
		return dpg_errf(err, "topology hand-over: %zu bytes do not match the counts "
				"they announce", len);
	}
#define TAKE(arr, n)							\
	do {								\
		if ((n) > 0) {						\
			(arr) = malloc((n) * sizeof(*(arr)));		\
			if ((arr) == NULL)				\
				goto nomem;				\
			memcpy((arr), buf + o, (n) * sizeof(*(arr)));	\
		}							\
		o += (n) * sizeof(*(arr));				\
	} while (0)
	TAKE(t->packages, t->npackages);
	TAKE(t->numa, t->nnuma);
	TAKE(t->cores, t->ncores);
	TAKE(t->pus, t->npus);
#undef TAKE
	if (!devices_ok(t) || !cpus_ok(t)) {
		dpg_topo_free(t);
		return dpg_errf(err, "topology hand-over: a count, an index or a name is "
				"out of range");
	}
	*out = t;
	return 0;
nomem:
	dpg_topo_free(t);
	return dpg_errf(err, "out of memory unpacking the topology");
}
