/* SPDX-License-Identifier: BSD-3-Clause */
/* topo.c - read the node facts the planner needs out of hwloc (an XML file,
 * an XML buffer, or this machine) into the plain structs of topo.h, plus the
 * bus-id and PCI-nearness helpers that go with them and the forked check of
 * an admin's XML file (cpusets are in cpuset.c).
 *
 * hwloc is only used inside the loaders: the topology is destroyed before
 * they return.  No global state; every allocation is bounded by topo.h's
 * limits; every hwloc and malloc failure is reported through dpg_err. */
#include "topo.h"
#include "fdio.h"
#include "parse.h"	/* dpg_parse_ulong, dpg_hex_digit */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hwloc.h>

/* ================================================================ bus ids */


/* 1..maxd hex digits at *pp, value in *v; advances *pp. */
static int parse_hex(const char **pp, unsigned maxd, uint32_t *v)
{
	const char *p = *pp;
	uint32_t x = 0;
	unsigned n = 0;

	while (dpg_hex_digit(*p) >= 0) {
		if (++n > maxd)
			return -1;
		x = (x << 4) | (uint32_t)dpg_hex_digit(*p);
		p++;
	}
	if (n == 0)
		return -1;
	*pp = p;
	*v = x;
	return 0;
}

int dpg_busid_parse(const char *s, uint32_t *domain, uint8_t *bus,
		    uint8_t *dev, uint8_t *func, struct dpg_err *err)
{
	char q[64];
	const char *p = s;
	uint32_t a, b, c, d = 0, f;
	bool have_domain = false;

	if (s == NULL)
		return dpg_errf(err, "PCI bus id: no input");
	if (parse_hex(&p, 8, &a) != 0 || *p != ':')
		goto bad;
	p++;
	if (parse_hex(&p, 2, &b) != 0)
		goto bad;
	if (*p == ':') {	/* domain:bus:dev.func */
		p++;
		have_domain = true;
		if (parse_hex(&p, 2, &c) != 0)
			goto bad;
	} else {
		c = b;
		b = a;
	}
	if (*p != '.')
		goto bad;
	p++;
	if (parse_hex(&p, 1, &f) != 0 || *p != '\0')
		goto bad;
	if (have_domain)
		d = a;
	if (b > 0xff || c > 0x1f || f > 7)
		goto bad;
	*domain = d;
	*bus = (uint8_t)b;
	*dev = (uint8_t)c;
	*func = (uint8_t)f;
	return 0;
bad:
	return dpg_errf(err, "\"%s\" is not a PCI bus id (expected dddd:bb:dd.f)",
			dpg_err_quote(s, q, sizeof(q)));
}

int dpg_topo_find_gpu(const struct dpg_topo *t, const char *s,
		      struct dpg_err *err)
{
	char q[64];
	uint32_t dom;
	uint8_t bus, dev, fn;
	uint32_t i;

	if (dpg_busid_parse(s, &dom, &bus, &dev, &fn, err) != 0)
		return -1;
	for (i = 0; i < t->ngpus; i++) {
		const struct dpg_pci_loc *l = &t->gpus[i].pci;

		if (l->domain == dom && l->bus == bus && l->dev == dev &&
		    l->func == fn)
			return (int)i;
	}
	dpg_errf(err, "no GPU at PCI %s on this node",
		 dpg_err_quote(s, q, sizeof(q)));
	return -1;
}

/* ================================================================ nearness */

enum dpg_near dpg_pci_near(const struct dpg_pci_loc *a,
			   const struct dpg_pci_loc *b, unsigned *hops)
{
	uint32_t n = 0, lim;

	if (hops != NULL)
		*hops = 0;
	if (a->domain == b->domain && a->bus == b->bus && a->dev == b->dev &&
	    a->func == b->func && a->depth == b->depth &&
	    (a->depth == 0 || a->path[a->depth - 1] == b->path[b->depth - 1]))
		return DPG_NEAR_SAME;
	lim = a->depth < b->depth ? a->depth : b->depth;
	while (n < lim && a->path[n] == b->path[n])
		n++;
	if (n > 0) {
		/* path[n-1] is the nearest common bridge */
		if (hops != NULL)
			*hops = (a->depth - n) + (b->depth - n) + 2;
		if (a->host_mask & (UINT32_C(1) << (n - 1)))
			return DPG_NEAR_HOSTBRIDGE;
		return DPG_NEAR_SWITCH;
	}
	if (a->numa >= 0 && a->numa == b->numa)
		return DPG_NEAR_NUMA;
	if (a->package >= 0 && a->package == b->package)
		return DPG_NEAR_PACKAGE;
	return DPG_NEAR_MACHINE;
}

const char *dpg_near_name(enum dpg_near n)
{
	switch (n) {
	case DPG_NEAR_SAME: return "same-device";
	case DPG_NEAR_SWITCH: return "switch";
	case DPG_NEAR_HOSTBRIDGE: return "hostbridge";
	case DPG_NEAR_NUMA: return "numa";
	case DPG_NEAR_PACKAGE: return "package";
	case DPG_NEAR_MACHINE: return "machine";
	}
	return "?";
}

const char *dpg_nic_kind_name(enum dpg_nic_kind k)
{
	switch (k) {
	case DPG_NIC_OPENFABRICS: return "openfabrics";
	case DPG_NIC_SLINGSHOT: return "slingshot";
	case DPG_NIC_ETHERNET: return "ethernet";
	}
	return "?";
}

const char *dpg_gpu_vendor_name(enum dpg_gpu_vendor v)
{
	switch (v) {
	case DPG_GPU_NVIDIA: return "nvidia";
	case DPG_GPU_AMD: return "amd";
	}
	return "?";
}

/* ================================================================ loading */

#define PCI_VENDOR_NVIDIA 0x10de
#define PCI_VENDOR_AMD 0x1002
#define PCI_VENDOR_HPE_CRAY 0x17db	/* Slingshot (Cassini) NICs */
#define PCI_CLASS_ETHERNET 0x0200
#define XML_BUFFER_MAX (256u * 1024u * 1024u)

/* Work state of one extraction (no globals). */
struct load_ctx {
	hwloc_topology_t h;
	struct dpg_topo *t;
	struct dpg_err *err;
	int16_t pu_numa[DPG_CPU_MAX];	/* PU os index -> numa[] index or -1 */
	int16_t pu_pkg[DPG_CPU_MAX];	/* PU os index -> packages[] index or -1 */
};

void dpg_topo_free(struct dpg_topo *t)
{
	if (t == NULL)
		return;
	free(t->packages);
	free(t->numa);
	free(t->cores);
	free(t->pus);
	free(t);
}

/* Copy an hwloc bitmap of PU os indices; fails on an index >= DPG_CPU_MAX
 * (or an infinite set). */
static int copy_cpuset(struct load_ctx *cx, hwloc_const_cpuset_t src,
		       struct dpg_cpuset *dst, const char *what)
{
	int i;

	dpg_cpuset_zero(dst);
	if (src == NULL)
		return 0;
	for (i = hwloc_bitmap_first(src); i >= 0; i = hwloc_bitmap_next(src, i)) {
		if (i >= DPG_CPU_MAX)
			return dpg_errf(cx->err, "%s has CPU %d: dpg supports CPU numbers below %d",
					what, i, DPG_CPU_MAX);
		dpg_cpuset_set(dst, (unsigned)i);
	}
	return 0;
}

static int load_packages(struct load_ctx *cx)
{
	struct dpg_topo *t = cx->t;
	int n = hwloc_get_nbobjs_by_type(cx->h, HWLOC_OBJ_PACKAGE);
	int i;

	if (n < 0)
		n = 0;
	if (n > DPG_TOPO_MAX_PACKAGES)
		return dpg_errf(cx->err, "topology has %d packages: dpg supports at most %d",
				n, DPG_TOPO_MAX_PACKAGES);
	if (n == 0)
		return 0;
	t->packages = calloc((size_t)n, sizeof(*t->packages));
	if (t->packages == NULL)
		return dpg_errf(cx->err, "out of memory (%d packages)", n);
	for (i = 0; i < n; i++) {
		hwloc_obj_t o = hwloc_get_obj_by_type(cx->h, HWLOC_OBJ_PACKAGE, (unsigned)i);

		if (o == NULL)
			return dpg_errf(cx->err, "hwloc lost package %d", i);
		t->packages[i].os_index = o->os_index;
		if (copy_cpuset(cx, o->cpuset, &t->packages[i].cpus, "a package") != 0)
			return -1;
	}
	t->npackages = (uint32_t)n;
	return 0;
}

static int load_numa(struct load_ctx *cx)
{
	struct dpg_topo *t = cx->t;
	int n = hwloc_get_nbobjs_by_type(cx->h, HWLOC_OBJ_NUMANODE);
	int i;

	if (n < 0)
		n = 0;
	if (n > DPG_TOPO_MAX_NUMA)
		return dpg_errf(cx->err, "topology has %d NUMA nodes: dpg supports at most %d",
				n, DPG_TOPO_MAX_NUMA);
	if (n == 0)
		return 0;
	t->numa = calloc((size_t)n, sizeof(*t->numa));
	if (t->numa == NULL)
		return dpg_errf(cx->err, "out of memory (%d NUMA nodes)", n);
	for (i = 0; i < n; i++) {
		hwloc_obj_t o = hwloc_get_obj_by_type(cx->h, HWLOC_OBJ_NUMANODE, (unsigned)i);

		if (o == NULL)
			return dpg_errf(cx->err, "hwloc lost NUMA node %d", i);
		t->numa[i].os_index = o->os_index;
		t->numa[i].package = -1;
		if (copy_cpuset(cx, o->cpuset, &t->numa[i].cpus, "a NUMA node") != 0)
			return -1;
	}
	t->nnuma = (uint32_t)n;
	return 0;
}

/* The unique value of map[] over the PUs of s, or -1 when they disagree,
 * one is -1, or s is empty. */
static int unique_over(const int16_t *map, const struct dpg_cpuset *s)
{
	int c, v = -2;

	for (c = dpg_cpuset_next(s, 0); c >= 0; c = dpg_cpuset_next(s, (unsigned)c + 1)) {
		if (v == -2)
			v = map[c];
		else if (v != map[c])
			return -1;
		if (v < 0)
			return -1;
	}
	return v < 0 ? -1 : v;
}

/* PU -> package and PU -> nearest NUMA node maps; then cores and PUs. */
static int load_cpus(struct load_ctx *cx)
{
	struct dpg_topo *t = cx->t;
	int npu = hwloc_get_nbobjs_by_type(cx->h, HWLOC_OBJ_PU);
	hwloc_obj_t prev_core = NULL;
	unsigned weight[DPG_TOPO_MAX_NUMA];
	uint32_t i;
	int k;

	for (k = 0; k < DPG_CPU_MAX; k++) {
		cx->pu_numa[k] = -1;
		cx->pu_pkg[k] = -1;
	}
	for (i = 0; i < t->npackages; i++) {
		const struct dpg_cpuset *s = &t->packages[i].cpus;

		for (k = dpg_cpuset_next(s, 0); k >= 0; k = dpg_cpuset_next(s, (unsigned)k + 1))
			if (cx->pu_pkg[k] < 0)
				cx->pu_pkg[k] = (int16_t)i;
	}
	/* a PU's NUMA node: the smallest (then first) one holding it, so a
	 * machine-wide memory-only node never hides the local one */
	for (i = 0; i < t->nnuma; i++)
		weight[i] = dpg_cpuset_count(&t->numa[i].cpus);
	for (i = 0; i < t->nnuma; i++) {
		const struct dpg_cpuset *s = &t->numa[i].cpus;

		for (k = dpg_cpuset_next(s, 0); k >= 0; k = dpg_cpuset_next(s, (unsigned)k + 1))
			if (cx->pu_numa[k] < 0 || weight[cx->pu_numa[k]] > weight[i])
				cx->pu_numa[k] = (int16_t)i;
	}
	for (i = 0; i < t->nnuma; i++)
		t->numa[i].package = unique_over(cx->pu_pkg, &t->numa[i].cpus);

	if (npu <= 0)
		return dpg_errf(cx->err, "topology has no PU (processing unit)");
	if (npu > DPG_CPU_MAX)
		return dpg_errf(cx->err, "topology has %d PUs: dpg supports at most %d",
				npu, DPG_CPU_MAX);
	t->pus = calloc((size_t)npu, sizeof(*t->pus));
	t->cores = calloc((size_t)npu, sizeof(*t->cores));
	if (t->pus == NULL || t->cores == NULL)
		return dpg_errf(cx->err, "out of memory (%d PUs)", npu);
	for (k = 0; k < npu; k++) {
		hwloc_obj_t pu = hwloc_get_obj_by_type(cx->h, HWLOC_OBJ_PU, (unsigned)k);
		hwloc_obj_t core;
		unsigned os;

		if (pu == NULL)
			return dpg_errf(cx->err, "hwloc lost PU %d", k);
		os = pu->os_index;
		if (os >= DPG_CPU_MAX)
			return dpg_errf(cx->err, "topology has CPU %u: dpg supports CPU numbers below %d",
					os, DPG_CPU_MAX);
		if (dpg_cpuset_isset(&t->complete, os))
			return dpg_errf(cx->err, "topology lists CPU %u twice", os);
		dpg_cpuset_set(&t->complete, os);
		core = hwloc_get_ancestor_obj_by_type(cx->h, HWLOC_OBJ_CORE, pu);
		if (core == NULL || core != prev_core || t->ncores == 0) {
			struct dpg_core *c = &t->cores[t->ncores++];

			c->pu_first = t->npus;
			c->npus = 0;
			c->package = cx->pu_pkg[os];
			c->numa = cx->pu_numa[os];
		}
		prev_core = core;
		t->cores[t->ncores - 1].npus++;
		t->pus[t->npus++] = os;
	}
	return 0;
}

/* Bridges above a PCI device, and the PUs near it. */
static void fill_pci_loc(struct load_ctx *cx, hwloc_obj_t pci,
			 struct dpg_pci_loc *l)
{
	const struct hwloc_pcidev_attr_s *a = &pci->attr->pcidev;
	hwloc_obj_t p, local;
	uint32_t depth = 0, i;
	struct dpg_cpuset near;

	memset(l, 0, sizeof(*l));
	l->domain = a->domain;
	l->bus = a->bus;
	l->dev = a->dev;
	l->func = a->func;
	l->vendor_id = a->vendor_id;
	l->device_id = a->device_id;
	l->class_id = a->class_id;
	snprintf(l->busid, sizeof(l->busid), "%04x:%02x:%02x.%01x",
		 (unsigned)a->domain, (unsigned)a->bus, (unsigned)a->dev,
		 (unsigned)a->func);
	/* walk ->parent ourselves (hwloc's common-ancestor helper is not safe
	 * on I/O objects); count first, then store the top levels */
	for (p = pci->parent; p != NULL && hwloc_obj_type_is_io(p->type); p = p->parent)
		depth++;
	l->depth = depth < DPG_TOPO_PCI_DEPTH ? depth : DPG_TOPO_PCI_DEPTH;
	i = depth;
	for (p = pci->parent; p != NULL && hwloc_obj_type_is_io(p->type); p = p->parent) {
		i--;
		if (i < DPG_TOPO_PCI_DEPTH) {
			l->path[i] = p->gp_index;
			if (p->type == HWLOC_OBJ_BRIDGE &&
			    p->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST)
				l->host_mask |= UINT32_C(1) << i;
		}
	}
	local = hwloc_get_non_io_ancestor_obj(cx->h, pci);
	l->numa = -1;
	l->package = -1;
	if (local != NULL && copy_cpuset(cx, local->cpuset, &near, "a device locality") == 0) {
		l->numa = unique_over(cx->pu_numa, &near);
		l->package = unique_over(cx->pu_pkg, &near);
	}
}

/* A PCI address as the kernel names one: device 00-1f, function 0-7.
 * hwloc's XML takes any byte there; a file with more is malformed, and
 * every bus id we print from it must parse back (dpg_busid_parse: the
 * plugin matches GPUs by it). */
static int check_pci_loc(struct load_ctx *cx, const struct dpg_pci_loc *l, const char *what)
{
	if (l->dev <= 0x1f && l->func <= 7)
		return 0;
	return dpg_errf(cx->err, "topology lists %s at PCI %s, which is no PCI address "
			"(device 00-1f, function 0-7): malformed; regenerate it with "
			"lstopo --of xml", what, l->busid);
}

static hwloc_obj_t pci_of(hwloc_obj_t o)
{
	for (o = o->parent; o != NULL; o = o->parent) {
		if (o->type == HWLOC_OBJ_PCI_DEVICE)
			return o;
		if (!hwloc_obj_type_is_io(o->type))
			return NULL;
	}
	return NULL;
}

static void copy_name(char *dst, const char *src)
{
	snprintf(dst, DPG_NAME_LEN, "%s", src != NULL ? src : "");
}

/* First OS device of the given type directly below pci (NULL if none). */
static hwloc_obj_t child_osdev(hwloc_obj_t pci, hwloc_obj_osdev_type_t type)
{
	hwloc_obj_t c;

	for (c = pci->io_first_child; c != NULL; c = c->next_sibling)
		if (c->type == HWLOC_OBJ_OS_DEVICE && c->attr->osdev.type == type &&
		    c->name != NULL)
			return c;
	return NULL;
}

static bool is_gpu(const struct hwloc_pcidev_attr_s *a, enum dpg_gpu_vendor *v)
{
	if (a->vendor_id == PCI_VENDOR_NVIDIA &&
	    (a->class_id == 0x0300 || a->class_id == 0x0302)) {
		*v = DPG_GPU_NVIDIA;
		return true;
	}
	if (a->vendor_id == PCI_VENDOR_AMD &&
	    (a->class_id == 0x0300 || a->class_id == 0x0380 || a->class_id == 0x1200)) {
		*v = DPG_GPU_AMD;
		return true;
	}
	return false;
}

static const char *gpu_osdev_name(hwloc_obj_t pci)
{
	static const char *const pref[] = { "nvml", "rsmi", "cuda" };
	size_t i;
	hwloc_obj_t c;

	for (i = 0; i < sizeof(pref) / sizeof(pref[0]); i++)
		for (c = pci->io_first_child; c != NULL; c = c->next_sibling)
			if (c->type == HWLOC_OBJ_OS_DEVICE && c->name != NULL &&
			    strncmp(c->name, pref[i], strlen(pref[i])) == 0)
				return c->name;
	return "";
}

static int load_gpus(struct load_ctx *cx)
{
	struct dpg_topo *t = cx->t;
	hwloc_obj_t o = NULL;

	while ((o = hwloc_get_next_pcidev(cx->h, o)) != NULL) {
		enum dpg_gpu_vendor v;
		struct dpg_gpu *g;

		if (!is_gpu(&o->attr->pcidev, &v))
			continue;
		if (t->ngpus >= DPG_TOPO_MAX_GPUS)
			return dpg_errf(cx->err, "topology has more than %d GPUs",
					DPG_TOPO_MAX_GPUS);
		g = &t->gpus[t->ngpus];
		fill_pci_loc(cx, o, &g->pci);
		if (check_pci_loc(cx, &g->pci, "a GPU") != 0)
			return -1;
		/* one PCI address, one GPU: a bus id must name a single GPU */
		if (dpg_topo_find_gpu(t, g->pci.busid, NULL) >= 0)
			return dpg_errf(cx->err, "topology lists two GPUs at PCI %s: "
					"malformed; regenerate it with lstopo --of xml",
					g->pci.busid);
		t->ngpus++;
		g->vendor = v;
		copy_name(g->osdev, gpu_osdev_name(o));
	}
	return 0;
}

static bool nic_on_pci(const struct dpg_topo *t, const struct dpg_pci_loc *l)
{
	uint32_t i;

	for (i = 0; i < t->nnics; i++) {
		const struct dpg_pci_loc *m = &t->nics[i].pci;

		if (m->domain == l->domain && m->bus == l->bus && m->dev == l->dev &&
		    m->func == l->func)
			return true;
	}
	return false;
}

static int add_nic(struct load_ctx *cx, hwloc_obj_t pci, enum dpg_nic_kind kind,
		   const char *name, const char *netdev)
{
	struct dpg_topo *t = cx->t;
	struct dpg_nic *n;

	if (t->nnics >= DPG_TOPO_MAX_NICS) {
		if (kind == DPG_NIC_ETHERNET)
			return 1;	/* fallback NICs beyond the limit are dropped */
		return dpg_errf(cx->err, "topology has more than %d RDMA NICs",
				DPG_TOPO_MAX_NICS);
	}
	n = &t->nics[t->nnics];
	fill_pci_loc(cx, pci, &n->pci);
	if (check_pci_loc(cx, &n->pci, "a NIC") != 0)
		return -1;
	n->kind = kind;
	copy_name(n->name, name);
	copy_name(n->netdev, netdev);
	t->nnics++;
	return 0;
}

static int load_nics(struct load_ctx *cx)
{
	struct dpg_topo *t = cx->t;
	hwloc_obj_t o = NULL;

	/* 1. RDMA verbs devices (mlx5_*, hfi1_*, EFA rdmap*) on a PCI function;
	 *    soft devices (rxe, siw) have no PCI parent and are skipped */
	while ((o = hwloc_get_next_osdev(cx->h, o)) != NULL) {
		hwloc_obj_t pci, net;

		if (o->attr->osdev.type != HWLOC_OBJ_OSDEV_OPENFABRICS || o->name == NULL)
			continue;
		pci = pci_of(o);
		if (pci == NULL)
			continue;
		net = child_osdev(pci, HWLOC_OBJ_OSDEV_NETWORK);
		if (add_nic(cx, pci, DPG_NIC_OPENFABRICS, o->name,
			    net != NULL ? net->name : "") != 0)
			return -1;
	}
	/* 2. HPE Slingshot (Cassini): a network-class PCI function of vendor
	 *    0x17db; it has no verbs device, its name is its interface (hsiN) */
	o = NULL;
	while ((o = hwloc_get_next_pcidev(cx->h, o)) != NULL) {
		const struct hwloc_pcidev_attr_s *a = &o->attr->pcidev;
		struct dpg_pci_loc l;
		hwloc_obj_t net;

		if (a->vendor_id != PCI_VENDOR_HPE_CRAY || (a->class_id >> 8) != 0x02)
			continue;
		fill_pci_loc(cx, o, &l);
		if (nic_on_pci(t, &l))
			continue;
		net = child_osdev(o, HWLOC_OBJ_OSDEV_NETWORK);
		if (add_nic(cx, o, DPG_NIC_SLINGSHOT, net != NULL ? net->name : l.busid,
			    net != NULL ? net->name : "") != 0)
			return -1;
	}
	t->nrdma = t->nnics;
	/* 3. plain Ethernet interfaces (fallback only): network OS devices on an
	 *    Ethernet-class PCI function that holds no RDMA NIC */
	o = NULL;
	while ((o = hwloc_get_next_osdev(cx->h, o)) != NULL) {
		hwloc_obj_t pci;
		struct dpg_pci_loc l;
		int rc;

		if (o->attr->osdev.type != HWLOC_OBJ_OSDEV_NETWORK || o->name == NULL)
			continue;
		pci = pci_of(o);
		if (pci == NULL || pci->attr->pcidev.class_id != PCI_CLASS_ETHERNET)
			continue;
		fill_pci_loc(cx, pci, &l);
		if (nic_on_pci(t, &l))
			continue;
		rc = add_nic(cx, pci, DPG_NIC_ETHERNET, o->name, o->name);
		if (rc < 0)
			return -1;
		if (rc > 0)
			break;
	}
	return 0;
}

static int cmp_loc(const struct dpg_pci_loc *a, const struct dpg_pci_loc *b)
{
	if (a->domain != b->domain)
		return a->domain < b->domain ? -1 : 1;
	if (a->bus != b->bus)
		return a->bus < b->bus ? -1 : 1;
	if (a->dev != b->dev)
		return a->dev < b->dev ? -1 : 1;
	if (a->func != b->func)
		return a->func < b->func ? -1 : 1;
	return 0;
}

static int cmp_gpu(const void *x, const void *y)
{
	const struct dpg_gpu *a = x, *b = y;

	return cmp_loc(&a->pci, &b->pci);
}

static int cmp_nic(const void *x, const void *y)
{
	const struct dpg_nic *a = x, *b = y;
	int c = cmp_loc(&a->pci, &b->pci);

	if (c != 0)
		return c;
	return strcmp(a->name, b->name);
}

static void finish(struct dpg_topo *t)
{
	unsigned per_vendor[3] = { 0, 0, 0 };
	uint32_t i;

	qsort(t->gpus, t->ngpus, sizeof(t->gpus[0]), cmp_gpu);
	for (i = 0; i < t->ngpus; i++) {
		t->gpus[i].index = i;
		t->gpus[i].vendor_index = per_vendor[t->gpus[i].vendor % 3]++;
	}
	qsort(t->nics, t->nrdma, sizeof(t->nics[0]), cmp_nic);
	qsort(t->nics + t->nrdma, t->nnics - t->nrdma, sizeof(t->nics[0]), cmp_nic);
	for (i = 0; i < t->nnics; i++)
		t->nics[i].index = i;
}

static int extract(hwloc_topology_t h, const char *source, struct dpg_topo **out,
		   struct dpg_err *err)
{
	struct load_ctx *cx;
	struct dpg_topo *t;
	hwloc_const_cpuset_t allowed;
	int rc = -1;

	cx = calloc(1, sizeof(*cx));
	t = calloc(1, sizeof(*t));
	if (cx == NULL || t == NULL) {
		free(cx);
		free(t);
		return dpg_errf(err, "out of memory loading the topology");
	}
	cx->h = h;
	cx->t = t;
	cx->err = err;
	snprintf(t->source, sizeof(t->source), "%s", source);
	if (load_packages(cx) != 0 || load_numa(cx) != 0 || load_cpus(cx) != 0)
		goto out;
	allowed = hwloc_topology_get_allowed_cpuset(h);
	if (copy_cpuset(cx, allowed, &t->allowed, "the allowed cpuset") != 0)
		goto out;
	dpg_cpuset_and(&t->allowed, &t->allowed, &t->complete);
	if (load_gpus(cx) != 0 || load_nics(cx) != 0)
		goto out;
	finish(t);
	*out = t;
	t = NULL;
	rc = 0;
out:
	dpg_topo_free(t);
	free(cx);
	return rc;
}

/* this_system: an XML of this very machine (the node's cache), whose
 * allowed cpuset must come from this process, not from the saved file. */
static int setup_flags(hwloc_topology_t *h, bool this_system, struct dpg_err *err)
{
	unsigned long flags = HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED;

	if (this_system)
		flags |= HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM |
			 HWLOC_TOPOLOGY_FLAG_THISSYSTEM_ALLOWED_RESOURCES;
	if (hwloc_topology_init(h) != 0)
		return dpg_errf(err, "hwloc_topology_init failed: %s", strerror(errno));
	/* see every PU (reserved ones too: intersected with allowed later) and
	 * keep the I/O objects, which XML loading drops by default */
	if (hwloc_topology_set_flags(*h, flags) != 0 ||
	    hwloc_topology_set_io_types_filter(*h, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) != 0 ||
	    /* every PCI function: our class checks decide, not hwloc's list */
	    hwloc_topology_set_type_filter(*h, HWLOC_OBJ_PCI_DEVICE,
					   HWLOC_TYPE_FILTER_KEEP_ALL) != 0) {
		int e = errno;

		hwloc_topology_destroy(*h);
		return dpg_errf(err, "hwloc configuration failed: %s", strerror(e));
	}
	return 0;
}

static int setup(hwloc_topology_t *h, struct dpg_err *err)
{
	return setup_flags(h, false, err);
}

/* Why a load failed: hwloc 2.x cannot read the XML v3 that hwloc 3 writes. */
static const char *xml_hint(const char *head, size_t len)
{
	size_t i;
	static const char v3[] = "version=\"3.";

	for (i = 0; i + sizeof(v3) - 1 <= len; i++)
		if (memcmp(head + i, v3, sizeof(v3) - 1) == 0)
			return " (XML v3 from hwloc >= 3: export it with hwloc 2.x, e.g. lstopo --export-xml-flags v2 or from hwloc 2)";
	return "";
}

int dpg_topo_load_xml(const char *path, struct dpg_topo **out,
		      struct dpg_err *err)
{
	char q[200], head[4096];
	hwloc_topology_t h;
	size_t n;
	FILE *f;
	int rc;

	if (out == NULL)
		return dpg_errf(err, "dpg_topo_load_xml: no output");
	*out = NULL;
	if (path == NULL || path[0] == '\0')
		return dpg_errf(err, "topology XML: no file name");
	f = fopen(path, "re");
	if (f == NULL)
		return dpg_errf(err, "cannot open topology XML \"%s\": %s",
				dpg_err_quote(path, q, sizeof(q)), strerror(errno));
	n = fread(head, 1, sizeof(head), f);
	fclose(f);
	if (n == 0)
		return dpg_errf(err, "topology XML \"%s\" is empty or unreadable",
				dpg_err_quote(path, q, sizeof(q)));
	if (setup(&h, err) != 0)
		return -1;
	if (hwloc_topology_set_xml(h, path) != 0) {
		int e = errno;

		hwloc_topology_destroy(h);
		return dpg_errf(err, "hwloc cannot use topology XML \"%s\": malformed "
				"or unsupported (%s)%s", dpg_err_quote(path, q, sizeof(q)),
				strerror(e), xml_hint(head, n));
	}
	if (hwloc_topology_load(h) != 0) {
		hwloc_topology_destroy(h);
		return dpg_errf(err, "hwloc cannot load topology XML \"%s\": malformed or unsupported%s",
				dpg_err_quote(path, q, sizeof(q)), xml_hint(head, n));
	}
	{
		char src[sizeof(((struct dpg_topo *)0)->source)];

		snprintf(src, sizeof(src), "xml:%s", path);
		rc = extract(h, src, out, err);
	}
	hwloc_topology_destroy(h);
	return rc;
}

static int load_buffer(const char *buf, size_t len, bool this_system,
		       const char *source, struct dpg_topo **out, struct dpg_err *err)
{
	hwloc_topology_t h;
	char *copy;
	int rc;

	if (out == NULL)
		return dpg_errf(err, "dpg_topo_load_xml_buffer: no output");
	*out = NULL;
	if (buf == NULL || len == 0)
		return dpg_errf(err, "topology XML buffer is empty");
	if (len > XML_BUFFER_MAX)
		return dpg_errf(err, "topology XML buffer of %zu bytes exceeds %u",
				len, XML_BUFFER_MAX);
	/* hwloc wants the terminating NUL counted in the size */
	copy = malloc(len + 1);
	if (copy == NULL)
		return dpg_errf(err, "out of memory (%zu-byte XML buffer)", len);
	memcpy(copy, buf, len);
	copy[len] = '\0';
	if (setup_flags(&h, this_system, err) != 0) {
		free(copy);
		return -1;
	}
	if (hwloc_topology_set_xmlbuffer(h, copy, (int)len + 1) != 0 ||
	    hwloc_topology_load(h) != 0) {
		hwloc_topology_destroy(h);
		rc = dpg_errf(err, "hwloc cannot load the topology XML buffer: malformed or unsupported%s",
			      xml_hint(copy, len < 4096 ? len : 4096));
		free(copy);
		return rc;
	}
	rc = extract(h, source, out, err);
	hwloc_topology_destroy(h);
	free(copy);
	return rc;
}

int dpg_topo_load_xml_buffer(const char *buf, size_t len, struct dpg_topo **out,
			     struct dpg_err *err)
{
	return load_buffer(buf, len, false, "xml-buffer", out, err);
}

#if HWLOC_API_VERSION >= 0x00020100
/* hwloc's XML text of h in a malloc'd copy (*xml, *len without the NUL). */
static int export_xml(hwloc_topology_t h, char **xml, size_t *len, struct dpg_err *err)
{
	char *b = NULL;
	int n = 0;

	if (hwloc_topology_export_xmlbuffer(h, &b, &n, 0) != 0 || b == NULL || n <= 1)
		return dpg_errf(err, "hwloc cannot export the topology as XML: %s",
				strerror(errno));
	*xml = malloc((size_t)n);
	if (*xml != NULL) {
		memcpy(*xml, b, (size_t)n);
		*len = strnlen(b, (size_t)n);
	}
	hwloc_free_xmlbuffer(h, b);
	return *xml != NULL ? 0 : dpg_errf(err, "out of memory (%d-byte topology XML)", n);
}
#endif

int dpg_topo_load_live(struct dpg_topo **out, struct dpg_err *err)
{
	return dpg_topo_load_live_xml(out, NULL, NULL, err);
}

int dpg_topo_load_live_xml(struct dpg_topo **out, char **xml, size_t *xml_len,
			   struct dpg_err *err)
{
#if HWLOC_API_VERSION >= 0x00020100
	/* vendor backends open GPU drivers / runtimes: they may hang or
	 * initialise a GPU context inside slurmstepd; "pci" (libpciaccess)
	 * is not needed on Linux, where the linux component reads PCI from
	 * sysfs, and it leaks memory at every load */
	static const char *const banned[] = {
		"cuda", "nvml", "opencl", "rsmi", "levelzero", "gl", "pci",
	};
	hwloc_topology_t h;
	size_t i;
	int rc;

	if (out == NULL)
		return dpg_errf(err, "dpg_topo_load_live: no output");
	*out = NULL;
	if (xml != NULL)
		*xml = NULL;
	if (setup(&h, err) != 0)
		return -1;
	for (i = 0; i < sizeof(banned) / sizeof(banned[0]); i++) {
		errno = 0;
		if (hwloc_topology_set_components(h, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
						  banned[i]) != 0) {
			int e = errno;

			/* EINVAL: this hwloc has no such component, nothing to stop */
			if (e == EINVAL)
				continue;
			hwloc_topology_destroy(h);
			return dpg_errf(err, "hwloc cannot blacklist its %s component: %s",
					banned[i], strerror(e));
		}
	}
	if (hwloc_topology_load(h) != 0) {
		int e = errno;

		hwloc_topology_destroy(h);
		return dpg_errf(err, "hwloc cannot discover this machine: %s", strerror(e));
	}
	rc = extract(h, "live", out, err);
	if (rc == 0 && xml != NULL && export_xml(h, xml, xml_len, err) != 0) {
		dpg_topo_free(*out);
		*out = NULL;
		rc = -1;
	}
	hwloc_topology_destroy(h);
	return rc;
#else
	(void)out;
	(void)xml;
	(void)xml_len;
	return dpg_errf(err, "live topology needs hwloc >= 2.1 (to keep its GPU backends off); use topology_xml=");
#endif
}

/* ------------------------------------------------------------ isolation */

static long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* What an isolated load reads: a file, or a buffer of this machine's XML. */
struct xml_src {
	const char *path;	/* or NULL: buf, len */
	const char *buf;
	size_t len;
	const char *source;	/* the buffer's dpg_topo.source */
};

static int load_src(const struct xml_src *x, struct dpg_topo **out, struct dpg_err *err)
{
	if (x->path != NULL)
		return dpg_topo_load_xml(x->path, out, err);
	return load_buffer(x->buf, x->len, true, x->source, out, err);
}

/* hwloc plugins an XML load never needs, kept out of the child: hwloc
 * dlopens every plugin at its first topology (gl pulls in X11, opencl its
 * ICD loader), about 5 ms a step.  For the node's cache, hwloc's own export,
 * its built-in parser replaces libxml2 (and ICU) too; an admin's file keeps
 * libxml2.  Set only where the admin did not set the variable. */
static void quiet_plugins(const struct xml_src *x)
{
	static const char io[] = "hwloc_gl,hwloc_opencl,hwloc_pci,hwloc_cuda,hwloc_nvml,"
				 "hwloc_rsmi,hwloc_levelzero";
	char v[sizeof(io) + 32];

	snprintf(v, sizeof(v), "%s%s", io, x->path == NULL ? ",hwloc_xml_libxml" : "");
	setenv("HWLOC_PLUGINS_BLACKLIST", v, 0);	/* hwloc 2.x */
	setenv("HWLOC_PLUGINS_BLOCKLIST", v, 0);	/* its later name */
}

/* The child: parse, send the verdict and leave: '0' + the topology packed
 * (topo_pack.c), or '1' + the message. */
static void precheck_child(const struct xml_src *x, int fd)
{
	struct dpg_err e = { "" };
	struct dpg_topo *t = NULL;
	char msg[1 + sizeof(e.msg)];
	static const int sigs[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT };
	uint8_t *packed = NULL;
	size_t len = 0, i;
	int rc;

	/* inherited handlers (slurmstepd's, a test runner's) must not run
	 * here: a crash is the verdict */
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], SIG_DFL);
	quiet_plugins(x);
	rc = load_src(x, &t, &e);
	if (rc == 0)
		rc = dpg_topo_pack(t, &packed, &len, &e);
	dpg_topo_free(t);
	if (rc == 0) {
		if (dpg_write_full(fd, "0", 1) != 0 || dpg_write_full(fd, packed, len) != 0)
			_exit(3);
		_exit(0);
	}
	msg[0] = '1';
	len = strnlen(e.msg, sizeof(e.msg) - 1);
	memcpy(msg + 1, e.msg, len);
	if (dpg_write_full(fd, msg, len + 1) != 0)
		_exit(3);
	_exit(0);
}

/* Read the child's verdict until EOF or the deadline; returns bytes read. */
static size_t read_verdict(int fd, uint8_t *buf, size_t cap, long deadline, int *timed_out)
{
	size_t got = 0;

	*timed_out = 0;
	while (got < cap) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		long left = deadline - mono_ms();
		ssize_t n;
		int r;

		if (left <= 0) {
			*timed_out = 1;
			break;
		}
		r = poll(&p, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			*timed_out = r == 0;
			break;
		}
		n = read(fd, buf + got, cap - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	return got;
}

/* What the child's verdict says: the topology it parsed, or why not. */
static int take_verdict(const struct xml_src *x, const uint8_t *buf, size_t got, int st,
			struct dpg_topo **out, struct dpg_err *err)
{
	const char *name = x->path != NULL ? x->path : x->source;
	char q[200];

	if (WIFSIGNALED(st))
		return dpg_errf(err, "topology XML \"%s\" crashed hwloc's parser (signal %d, "
				"in a child process): the file is malformed; regenerate it "
				"with lstopo --of xml", dpg_err_quote(name, q, sizeof(q)),
				WTERMSIG(st));
	if (got >= 1 && buf[0] == '1')
		return dpg_errf(err, "%.*s", (int)(got - 1 < DPG_ERR_MSG_MAX - 1 ? got - 1 :
						   DPG_ERR_MSG_MAX - 1), (const char *)buf + 1);
	if (got < 1 || buf[0] != '0' || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return dpg_errf(err, "topology XML \"%s\": the parsing child failed "
				"(exit status %d)", dpg_err_quote(name, q, sizeof(q)),
				WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	if (dpg_topo_unpack(buf + 1, got - 1, out, err) != 0)
		return dpg_err_prefix(err, "topology XML");
	return 0;
}

/* Parse x in a forked child (hwloc may crash or spin on a malformed XML),
 * which hands back what it parsed: this process never runs hwloc on it. */
static int load_isolated(const struct xml_src *x, int timeout_ms, struct dpg_topo **out,
			 struct dpg_err *err)
{
	const char *name = x->path != NULL ? x->path : x->source;
	size_t cap = 1 + (DPG_TOPO_PACK_MAX > DPG_ERR_MSG_MAX ? DPG_TOPO_PACK_MAX : DPG_ERR_MSG_MAX);
	int fds[2], st = 0, timed_out = 0, rc;
	uint8_t *buf;
	char q[200];
	long deadline;
	size_t got = 0;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) != 0)
		return dpg_errf(err, "topology XML: pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0) {
		int e = errno;

		close(fds[0]);
		close(fds[1]);
		return dpg_errf(err, "topology XML: fork: %s", strerror(e));
	}
	if (pid == 0) {
		close(fds[0]);
		precheck_child(x, fds[1]);
	}
	close(fds[1]);
	deadline = mono_ms() + (timeout_ms > 0 ? timeout_ms : 10000);
	buf = malloc(cap);	/* after the fork: the child has no use for it */
	if (buf != NULL)
		got = read_verdict(fds[0], buf, cap, deadline, &timed_out);
	close(fds[0]);
	if (timed_out)
		kill(pid, SIGKILL);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (buf == NULL)
		rc = dpg_errf(err, "topology XML: out of memory");
	else if (timed_out)
		rc = dpg_errf(err, "topology XML \"%s\": hwloc did not finish parsing it "
			      "within %d ms: regenerate it with lstopo --of xml",
			      dpg_err_quote(name, q, sizeof(q)), timeout_ms);
	else
		rc = take_verdict(x, buf, got, st, out, err);
	free(buf);
	return rc;
}

int dpg_topo_load_xml_isolated(const char *path, int timeout_ms, struct dpg_topo **out,
			       struct dpg_err *err)
{
	struct xml_src x = { .path = path };

	if (out == NULL)
		return dpg_errf(err, "dpg_topo_load_xml_isolated: no output");
	*out = NULL;
	if (path == NULL || path[0] == '\0')
		return dpg_errf(err, "topology XML: no file name");
	return load_isolated(&x, timeout_ms, out, err);
}

int dpg_topo_load_here_isolated(const char *buf, size_t len, const char *source,
				int timeout_ms, struct dpg_topo **out, struct dpg_err *err)
{
	struct xml_src x = { .buf = buf, .len = len, .source = source };

	if (out == NULL)
		return dpg_errf(err, "dpg_topo_load_here_isolated: no output");
	*out = NULL;
	if (buf == NULL || len == 0)
		return dpg_errf(err, "topology XML \"%s\" is empty", source);
	return load_isolated(&x, timeout_ms, out, err);
}
