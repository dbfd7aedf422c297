/* SPDX-License-Identifier: BSD-3-Clause */
/* topo.h - the node facts the binding planner needs (GPUs, NICs, packages,
 * NUMA nodes, cores), read once from hwloc into plain C structs.
 *
 * A struct dpg_topo holds no hwloc type: the hwloc topology is destroyed as
 * soon as the facts are copied out, so plan.c (and its tests) never link
 * against hwloc state.  Everything is bounded by the DPG_TOPO_MAX_* and
 * DPG_CPU_MAX limits below; exceeding one is a clear error.  Two harmless
 * exceptions: a PCI path deeper than DPG_TOPO_PCI_DEPTH keeps its top levels
 * (struct dpg_pci_loc), and plain Ethernet interfaces beyond the room left
 * by the RDMA NICs are left out (they only serve as a fallback). */
#ifndef DPG_LIB_TOPO_H
#define DPG_LIB_TOPO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpuset.h"
#include "err.h"

/* ------------------------------------------------------------- limits */

#define DPG_TOPO_MAX_GPUS 64
#define DPG_TOPO_MAX_NICS 64
#define DPG_TOPO_MAX_NUMA 256
#define DPG_TOPO_MAX_PACKAGES 64
#define DPG_TOPO_PCI_DEPTH 24		/* I/O ancestors kept per device */
#define DPG_BUSID_LEN 20		/* "dddd:bb:dd.f" (domain may be wider) */
#define DPG_NAME_LEN 64			/* OS device names (mlx5_0, ib0, hsi0) */

/* ------------------------------------------------------------- devices */

/* Where a PCI function sits.  path[] lists the ids of its bridges from the
 * top (a host bridge, when hwloc knows it) down to its parent bridge; the ids
 * are only compared for equality.  Deeper trees keep their top
 * DPG_TOPO_PCI_DEPTH levels (nearness then only sees that far). */
struct dpg_pci_loc {
	uint32_t domain;
	uint8_t bus, dev, func;
	uint16_t vendor_id, device_id, class_id;
	char busid[DPG_BUSID_LEN];	/* "0000:07:00.0" */
	uint32_t depth;			/* entries used in path[] */
	uint64_t path[DPG_TOPO_PCI_DEPTH];
	uint32_t host_mask;		/* bit i: path[i] is a host bridge */
	int numa;	/* index in topo->numa[] if all local PUs share one, else -1 */
	int package;	/* index in topo->packages[], same rule */
};

/* How near two PCI devices are, nearest first. */
enum dpg_near {
	DPG_NEAR_SAME = 0,		/* same PCI function */
	DPG_NEAR_SWITCH = 1,		/* below one PCI(e) switch / bridge */
	DPG_NEAR_HOSTBRIDGE = 2,	/* same host bridge (root complex) */
	DPG_NEAR_NUMA = 3,		/* same NUMA node */
	DPG_NEAR_PACKAGE = 4,		/* same package (socket) */
	DPG_NEAR_MACHINE = 5,
};

/* Nearness of a and b by walking their PCI paths (never hwloc's
 * common-ancestor call on I/O objects).  *hops (optional) is the number of
 * PCI links between them through the common bridge (0 when not in one
 * tree); smaller is nearer within one level. */
enum dpg_near dpg_pci_near(const struct dpg_pci_loc *a,
			   const struct dpg_pci_loc *b, unsigned *hops);

const char *dpg_near_name(enum dpg_near n);	/* "switch", "numa", ... */

enum dpg_gpu_vendor {
	DPG_GPU_NVIDIA = 1,	/* PCI vendor 0x10de, class 0x0300/0x0302 */
	DPG_GPU_AMD = 2,	/* PCI vendor 0x1002, class 0x0300/0x0380/0x1200 */
};

struct dpg_gpu {
	struct dpg_pci_loc pci;
	unsigned index;		/* physical index: position in PCI_BUS_ID order */
	unsigned vendor_index;	/* position among GPUs of the same vendor */
	enum dpg_gpu_vendor vendor;
	char osdev[DPG_NAME_LEN];	/* "nvml0", "rsmi3", "cuda0" or "" */
};

enum dpg_nic_kind {
	DPG_NIC_OPENFABRICS = 1,	/* RDMA verbs device: mlx5_*, hfi1_*, rdmap* (EFA) */
	DPG_NIC_SLINGSHOT = 2,		/* HPE Slingshot (Cassini), PCI vendor 0x17db */
	DPG_NIC_ETHERNET = 3,		/* plain network interface: fallback only */
};

struct dpg_nic {
	struct dpg_pci_loc pci;
	unsigned index;			/* position in topo->nics[] */
	enum dpg_nic_kind kind;
	char name[DPG_NAME_LEN];	/* mlx5_0, hsi0, eth0 */
	char netdev[DPG_NAME_LEN];	/* network interface on that PCI function, or "" */
};

static inline bool dpg_nic_is_rdma(const struct dpg_nic *n)
{
	return n->kind == DPG_NIC_OPENFABRICS || n->kind == DPG_NIC_SLINGSHOT;
}

const char *dpg_nic_kind_name(enum dpg_nic_kind k);	/* "openfabrics", ... */
const char *dpg_gpu_vendor_name(enum dpg_gpu_vendor v);	/* "nvidia", "amd" */

/* ------------------------------------------------------------- CPU side */

struct dpg_package {
	unsigned os_index;
	struct dpg_cpuset cpus;
};

struct dpg_numa {
	unsigned os_index;		/* may have gaps (0, 8 on POWER9) */
	int package;			/* index in packages[] or -1 */
	struct dpg_cpuset cpus;		/* empty for CPU-less (memory-only) nodes */
};

struct dpg_core {
	int package;		/* index in packages[] or -1 */
	int numa;		/* index in numa[] of its nearest NUMA node, or -1 */
	uint32_t pu_first;	/* its PUs are pus[pu_first .. pu_first+npus-1] */
	uint32_t npus;
};

struct dpg_topo {
	char source[256];		/* "xml:PATH", "xml-buffer", "live" */
	struct dpg_cpuset complete;	/* every PU the topology knows */
	struct dpg_cpuset allowed;	/* PUs this process may use (cgroup, reservations) */

	uint32_t npackages;
	struct dpg_package *packages;	/* in hwloc logical order */
	uint32_t nnuma;
	struct dpg_numa *numa;		/* in hwloc logical order */
	uint32_t ncores;
	struct dpg_core *cores;		/* in hwloc logical order (PU order) */
	uint32_t npus;
	uint32_t *pus;			/* PU OS indices, grouped by core */

	uint32_t ngpus;			/* sorted by (domain, bus, dev, func) */
	struct dpg_gpu gpus[DPG_TOPO_MAX_GPUS];
	uint32_t nnics;			/* RDMA first (bus id order), then Ethernet */
	uint32_t nrdma;			/* nics[0..nrdma-1] are RDMA */
	struct dpg_nic nics[DPG_TOPO_MAX_NICS];
};

/* A topology as bytes and back (topo_pack.c), for the forked child that
 * parsed an XML to hand its result to the parent: the struct, then its
 * arrays.  Only between one binary and its fork.  Unpack checks every count,
 * index and name against the bytes (-DPG_ERR_INVALID when they do not hold
 * together); its result is freed with dpg_topo_free. */
#define DPG_TOPO_PACK_MAX                                                     \
	(sizeof(struct dpg_topo) + DPG_TOPO_MAX_PACKAGES * sizeof(struct dpg_package) + \
	 DPG_TOPO_MAX_NUMA * sizeof(struct dpg_numa) +                          \
	 DPG_CPU_MAX * (sizeof(struct dpg_core) + sizeof(uint32_t)))
int dpg_topo_pack(const struct dpg_topo *t, uint8_t **buf, size_t *len, struct dpg_err *err);
int dpg_topo_unpack(const uint8_t *buf, size_t len, struct dpg_topo **out,
		    struct dpg_err *err);

/* Load from an hwloc XML file (v1 or v2 format; hwloc 2.x refuses v3). */
int dpg_topo_load_xml(const char *path, struct dpg_topo **out,
		      struct dpg_err *err);

/* dpg_topo_load_xml, but the file is parsed in a forked child with a
 * deadline of timeout_ms: hwloc (2.9) can crash or spin on a malformed XML
 * file, and the plugin must never take slurmstepd down.  A child killed by
 * a signal or past the deadline is a clear error; a child that parsed the
 * file hands back the topology (dpg_topo_pack), so hwloc never parses it in
 * this process.  The child keeps the hwloc plugins an XML load does not need
 * unloaded (HWLOC_PLUGINS_BLACKLIST, unless set).  Never blocks longer than
 * timeout_ms. */
int dpg_topo_load_xml_isolated(const char *path, int timeout_ms, struct dpg_topo **out,
			       struct dpg_err *err);

/* The isolated load of dpg_topo_load_xml_isolated, for a buffer holding an
 * XML export of THIS machine (the node's topology cache): the allowed cpuset
 * comes from this process (hwloc's THISSYSTEM flags, in its fork), not from
 * the file; hwloc's built-in XML parser reads it (libxml2 stays unloaded).
 * source names it in messages and in dpg_topo.source. */
int dpg_topo_load_here_isolated(const char *buf, size_t len, const char *source,
				int timeout_ms, struct dpg_topo **out, struct dpg_err *err);

/* Same, from a buffer holding the XML text. */
int dpg_topo_load_xml_buffer(const char *buf, size_t len,
			     struct dpg_topo **out, struct dpg_err *err);

/* Discover this machine.  hwloc's cuda, nvml, opencl, rsmi, levelzero and gl
 * components are blacklisted (they can hang in slurmstepd); GPUs are found by
 * PCI class alone. */
int dpg_topo_load_live(struct dpg_topo **out, struct dpg_err *err);

/* dpg_topo_load_live, and hwloc's XML export of what it found in *xml
 * (malloc'd, NUL-terminated, *xml_len bytes without the NUL; the caller
 * frees it) when xml is not NULL. */
int dpg_topo_load_live_xml(struct dpg_topo **out, char **xml, size_t *xml_len,
			   struct dpg_err *err);

void dpg_topo_free(struct dpg_topo *t);

/* Parse a PCI bus id: "[domain:]bus:dev.func" in hex ("0000:07:00.0",
 * NVML's "00000000:07:00.0", "07:00.0"); case-insensitive. */
int dpg_busid_parse(const char *s, uint32_t *domain, uint8_t *bus,
		    uint8_t *dev, uint8_t *func, struct dpg_err *err);

/* Index of the GPU whose bus id is s, or -1 (err filled). */
int dpg_topo_find_gpu(const struct dpg_topo *t, const char *s,
		      struct dpg_err *err);

#endif
