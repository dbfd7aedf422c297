/* SPDX-License-Identifier: BSD-3-Clause */
/* probe_dev.c - dpg-check's device probes: the plan's GPUs and RDMA NICs
 * and the interface towards MASTER_ADDR, read from /sys under a root. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <unistd.h>

#include "probe.h"

/* Read the first line of <root><path> into buf; 0 or -1. */
static int read_line(const char *root, const char *path, char *buf, size_t len)
{
	char full[4096];
	FILE *f;

	snprintf(full, sizeof(full), "%s%s", root, path);
	f = fopen(full, "re");
	if (f == NULL)
		return -1;
	if (fgets(buf, (int)len, f) == NULL)
		buf[0] = '\0';
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

static size_t count_items(const char *list)
{
	size_t n = 0;
	bool in = false;

	for (const char *p = list; p != NULL && *p != '\0'; p++) {
		if (*p != ',' && !in)
			n++;
		in = *p != ',';
	}
	return n;
}

/* The next comma-separated item of *p into buf; false at the end. */
static bool next_item(const char **p, char *buf, size_t len)
{
	size_t n;

	while (**p == ',')
		(*p)++;
	if (**p == '\0')
		return false;
	n = strcspn(*p, ",");
	snprintf(buf, len, "%.*s", (int)(n < len ? n : len - 1), *p);
	*p += n;
	return true;
}

void dpg_probe_gpus(const char *root, const char *planned, const char *visible,
		    struct dpg_check_cell *c)
{
	char id[64], path[256], v[DPG_CHECK_SHORT_MAX];
	const char *p = planned;
	size_t want = count_items(planned), seen = count_items(visible);

	if (want == 0) {
		dpg_check_set(c, DPG_CHECK_NA, "none", "%s", "");
		return;
	}
	while (next_item(&p, id, sizeof(id))) {
		snprintf(path, sizeof(path), "%s/sys/bus/pci/devices/%s", root, id);
		if (access(path, F_OK) != 0) {
			dpg_check_set(c, DPG_CHECK_FAIL, "absent", "the plan gave GPU %s but "
				      "%s does not exist: the topology the plugin planned with "
				      "(topology_xml=) is not this node's; refresh it "
				      "(lstopo --of xml) or drop topology_xml=", id, path);
			return;
		}
	}
	snprintf(v, sizeof(v), "%zu/%zu seen", seen, want);
	if (visible == NULL || seen < want)
		dpg_check_set(c, DPG_CHECK_FAIL, v, "the plan gave %zu GPU(s) (%.96s) but "
			      "CUDA_VISIBLE_DEVICES=%.32s shows %zu: something reset it after "
			      "the plugin (a wrapper, --export, gres' own binding); keep the "
			      "plugin's value", want, planned, visible ? visible : "(unset)", seen);
	else
		dpg_check_set(c, DPG_CHECK_OK, v, "%s", "");
}

/* A NIC named as a network interface (no RDMA device of that name): true
 * when it is one, *rc 0 when it is up, else -1 with c filled. */
static bool netdev_nic(const char *root, const char *dev, struct dpg_check_cell *c,
		       int *rc)
{
	char path[256], state[64];

	snprintf(path, sizeof(path), "%s/sys/class/infiniband/%s", root, dev);
	if (access(path, F_OK) == 0)
		return false;
	snprintf(path, sizeof(path), "/sys/class/net/%s/operstate", dev);
	if (read_line(root, path, state, sizeof(state)) != 0)
		return false;
	*rc = 0;
	if (strcmp(state, "up") != 0 && strcmp(state, "unknown") != 0) {
		dpg_check_set(c, DPG_CHECK_FAIL, "down", "NIC %s is %s: bring it up (ip "
			      "link set %s up) or check its cable", dev, state, dev);
		*rc = -1;
	}
	return true;
}

/* One "dev:port" (RDMA) or "dev" (RDMA port 1, or a network interface) NIC: 0 when ACTIVE and LinkUp, else fills c. */
static int probe_nic(const char *root, const char *nic, struct dpg_check_cell *c)
{
	char dev[64], path[256], state[64], phys[64];
	const char *colon = strchr(nic, ':');
	const char *port = colon != NULL ? colon + 1 : "1";
	int dl = colon != NULL ? (int)(colon - nic) : (int)strlen(nic), rc = 0;

	snprintf(dev, sizeof(dev), "%.*s", dl, nic);
	if (colon == NULL && netdev_nic(root, dev, c, &rc))
		return rc;
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%s/state", dev, port);
	if (read_line(root, path, state, sizeof(state)) != 0) {
		dpg_check_set(c, DPG_CHECK_FAIL, "absent", "the plan gave NIC %s but %s%s "
			      "cannot be read: is the RDMA driver loaded (ibv_devices)?",
			      nic, root, path);
		return -1;
	}
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%s/phys_state", dev, port);
	if (read_line(root, path, phys, sizeof(phys)) != 0)
		snprintf(phys, sizeof(phys), "?");
	if (strstr(state, "ACTIVE") == NULL || strstr(phys, "LinkUp") == NULL) {
		dpg_check_set(c, DPG_CHECK_FAIL, "down", "NIC %s: port state '%s', physical "
			      "state '%s' (want ACTIVE, LinkUp): check the cable and the "
			      "subnet manager (ibstat %s)", nic, state, phys, dev);
		return -1;
	}
	return 0;
}

void dpg_probe_nics(const char *root, const char *planned, struct dpg_check_cell *c)
{
	char nic[80], v[DPG_CHECK_SHORT_MAX];
	const char *p = planned;
	size_t n = count_items(planned);

	if (n == 0) {
		dpg_check_set(c, DPG_CHECK_NA, "none", "%s", "");
		return;
	}
	while (next_item(&p, nic, sizeof(nic)))
		if (probe_nic(root, nic, c) != 0)
			return;
	snprintf(v, sizeof(v), "%zu up", n);
	dpg_check_set(c, DPG_CHECK_OK, v, "%s", "");
}

void dpg_probe_ifup(const char *root, const char *ifname, struct dpg_check_cell *c)
{
	char path[256], state[64], v[DPG_CHECK_SHORT_MAX];

	snprintf(path, sizeof(path), "/sys/class/net/%s/operstate", ifname);
	if (read_line(root, path, state, sizeof(state)) != 0) {
		dpg_check_set(c, DPG_CHECK_FAIL, "no iface", "route to MASTER_ADDR is via "
			      "%s but %s%s cannot be read", ifname, root, path);
		return;
	}
	if (strcmp(state, "up") != 0 && strcmp(state, "unknown") != 0) {
		dpg_check_set(c, DPG_CHECK_FAIL, "if down", "interface %s towards MASTER_ADDR "
			      "is %s: bring it up (ip link set %s up) or fix the route",
			      ifname, state, ifname);
		return;
	}
	snprintf(v, sizeof(v), "%s", ifname);
	dpg_check_set(c, DPG_CHECK_OK, v, "%s", "");
}
