/* SPDX-License-Identifier: BSD-3-Clause */
/* probe.c - dpg-check's local probes over /proc, /sys and /dev/shm under a
 * root directory; each fills one cell of the task's row. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/statvfs.h>
#include <unistd.h>

#include "cpuset.h"
#include "probe.h"

#define MIB (1024u * 1024u)

uint64_t dpg_check_nofile_need(int world, bool rank0)
{
	uint64_t w = world > 0 ? (uint64_t)world : 1;
	uint64_t n = DPG_CHECK_FD_BASE + DPG_CHECK_FD_COMMS * DPG_CHECK_FD_PER_COMM + 2;

	return rank0 ? n + 3 + 2 * w : n;
}

uint64_t dpg_check_shm_need(int local)
{
	uint64_t l = local > 0 ? (uint64_t)local : 1;
	uint64_t stage = 4 * l * MIB;

	if (stage > 64u * MIB)
		stage = 64u * MIB;
	return stage + MIB;
}

/* Read <root><path> (at most len-1 bytes, NUL-terminated); 0 or -errno. */
static int read_file(const char *root, const char *path, char *buf, size_t len)
{
	char full[4096];
	FILE *f;
	size_t n;

	snprintf(full, sizeof(full), "%s%s", root, path);
	f = fopen(full, "re");
	if (f == NULL)
		return -errno;
	n = fread(buf, 1, len - 1, f);
	buf[n] = '\0';
	fclose(f);
	return 0;
}

void dpg_probe_nofile(const char *root, int world, bool rank0, struct dpg_check_cell *c)
{
	char buf[8192], *p;
	uint64_t need = dpg_check_nofile_need(world, rank0);
	unsigned long long soft;

	if (read_file(root, "/proc/self/limits", buf, sizeof(buf)) != 0 ||
	    (p = strstr(buf, "Max open files")) == NULL) {
		dpg_check_set(c, DPG_CHECK_FAIL, "unreadable", "cannot read 'Max open files' "
			      "in %s/proc/self/limits: is /proc mounted?", root);
		return;
	}
	p += strlen("Max open files");
	if (strncmp(p + strspn(p, " "), "unlimited", 9) == 0) {
		dpg_check_set(c, DPG_CHECK_OK, "unlimited", "%s", "");
		return;
	}
	soft = strtoull(p, NULL, 10);
	char v[DPG_CHECK_SHORT_MAX];

	snprintf(v, sizeof(v), "%llu/%" PRIu64, soft, need);
	if (soft >= need)
		dpg_check_set(c, DPG_CHECK_OK, v, "%s", "");
	else
		dpg_check_set(c, DPG_CHECK_FAIL, v, "open-files limit %llu is below the "
			      "%" PRIu64 " a world of %d needs%s: raise it (ulimit -n %" PRIu64
			      " in the job, LimitNOFILE= for slurmd with "
			      "PropagateResourceLimits=NONE, or limits.conf)", soft, need,
			      world, rank0 ? " at rank 0 (its store serves every rank)" : "",
			      need);
}

void dpg_probe_somaxconn(const char *root, int world, struct dpg_check_cell *c)
{
	char buf[64], v[DPG_CHECK_SHORT_MAX];
	unsigned long long have, need = 2ull * (unsigned long long)(world > 0 ? world : 1);

	if (read_file(root, "/proc/sys/net/core/somaxconn", buf, sizeof(buf)) != 0) {
		dpg_check_set(c, DPG_CHECK_FAIL, "unreadable", "cannot read %s/proc/sys/"
			      "net/core/somaxconn", root);
		return;
	}
	have = strtoull(buf, NULL, 10);
	snprintf(v, sizeof(v), "%llu/%llu", have, need);
	if (have >= need)
		dpg_check_set(c, DPG_CHECK_OK, v, "%s", "");
	else
		dpg_check_set(c, DPG_CHECK_FAIL, v, "net.core.somaxconn=%llu: rank 0's "
			      "store listener queues at most that many of the %llu connections "
			      "a world of %d opens at once (the rest retry, slowing the start): "
			      "sysctl -w net.core.somaxconn=%llu", have, need, world, need);
}

void dpg_probe_shm(const char *root, int local, struct dpg_check_cell *c)
{
	char path[4096], v[DPG_CHECK_SHORT_MAX];
	struct statvfs st;
	uint64_t need = dpg_check_shm_need(local), have;

	snprintf(path, sizeof(path), "%s/dev/shm", root);
	if (statvfs(path, &st) != 0) {
		dpg_check_set(c, DPG_CHECK_FAIL, "missing", "statvfs %s: %s: mount a "
			      "tmpfs there (mount -t tmpfs tmpfs /dev/shm)", path, strerror(errno));
		return;
	}
	have = (uint64_t)st.f_bavail * st.f_frsize;
	snprintf(v, sizeof(v), "%" PRIu64 "M/%" PRIu64 "M", have / MIB, need / MIB);
	if (have >= need)
		dpg_check_set(c, DPG_CHECK_OK, v, "%s", "");
	else
		dpg_check_set(c, DPG_CHECK_FAIL, v, "/dev/shm has %" PRIu64 " KiB free, the "
			      "node segment of %d tasks needs %" PRIu64 " KiB: remove stale "
			      "files there or enlarge it (mount -o remount,size=%" PRIu64
			      "M /dev/shm)", have / 1024, local, need / 1024, need / MIB * 2);
}

static int allowed_cpus(const char *root, struct dpg_cpuset *out)
{
	char buf[16384], *p, *e;

	if (read_file(root, "/proc/self/status", buf, sizeof(buf)) != 0 ||
	    (p = strstr(buf, "Cpus_allowed_list:")) == NULL)
		return -1;
	p += strlen("Cpus_allowed_list:");
	e = strchr(p, '\n');
	if (e != NULL)
		*e = '\0';
	return dpg_cpuset_parse(p, out, NULL);
}

void dpg_probe_cpus(const char *root, const char *planned, struct dpg_check_cell *c)
{
	struct dpg_cpuset want, have;
	char hs[DPG_CPUSET_STR_MAX];

	if (allowed_cpus(root, &have) != 0 || dpg_cpuset_format(&have, hs, sizeof(hs), NULL) != 0) {
		dpg_check_set(c, DPG_CHECK_FAIL, "unreadable", "cannot read Cpus_allowed_list "
			      "in %s/proc/self/status", root);
		return;
	}
	if (planned == NULL || planned[0] == '\0') {
		dpg_check_set(c, DPG_CHECK_NA, "unbound", "%s", "");
		return;
	}
	if (dpg_cpuset_parse(planned, &want, NULL) != 0) {
		dpg_check_set(c, DPG_CHECK_FAIL, "bad plan", "DPG_CPUS='%.64s' is not a CPU "
			      "list: the plugin and this libdpg differ in version?", planned);
		return;
	}
	if (dpg_cpuset_equal(&want, &have))
		dpg_check_set(c, DPG_CHECK_OK, hs, "%s", "");
	else
		dpg_check_set(c, DPG_CHECK_FAIL, hs, "the plan bound this task to CPUs %.64s "
			      "but it may run on %.64s: something rebound it after the plugin "
			      "(a task/affinity or cgroup setting, a wrapper, --cpu-bind); "
			      "let dpg bind (--dpg-bind) or drop the other binding", planned, hs);
}
