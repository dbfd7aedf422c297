/* SPDX-License-Identifier: BSD-3-Clause */
/* topocache_key.c - the key of the node's topology cache: what must not have
 * changed for a saved topology to still describe this node (boot, hwloc,
 * online CPUs, the PCI functions and their ids), as plain text. */
#include "topocache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hwloc.h>

#define KEY_LINE_MAX 320

/* A growing text buffer (the key). */
struct text {
	char *s;
	size_t len, cap;
};

static int text_add(struct text *t, const char *line, struct dpg_err *err)
{
	size_t n = strlen(line);

	if (t->len + n + 1 > t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 4096;
		char *s;

		while (cap < t->len + n + 1)
			cap *= 2;
		s = realloc(t->s, cap);
		if (s == NULL)
			return dpg_errf(err, "out of memory (topology cache key)");
		t->s = s;
		t->cap = cap;
	}
	memcpy(t->s + t->len, line, n + 1);
	t->len += n;
	return 0;
}

/* The first line of root/rel, without its newline ("" when absent or empty). */
static void read_line(const char *root, const char *rel, char *buf, size_t len)
{
	char path[512];
	FILE *f;

	buf[0] = '\0';
	snprintf(path, sizeof(path), "%s%s", root, rel);
	f = fopen(path, "re");
	if (f == NULL)
		return;
	if (fgets(buf, (int)len, f) == NULL)
		buf[0] = '\0';
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The PCI function names of root/sys/bus/pci/devices, sorted (*names,
 * *n; the caller frees each and the array). */
static int pci_names(const char *root, char ***names, size_t *n, struct dpg_err *err)
{
	char path[512];
	struct dirent *d;
	size_t cap = 0;
	DIR *dir;
	int fd;

	*names = NULL;
	*n = 0;
	snprintf(path, sizeof(path), "%s/sys/bus/pci/devices", root);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	dir = fd >= 0 ? fdopendir(fd) : NULL;
	if (dir == NULL) {
		int e = errno;

		if (fd >= 0)
			close(fd);
		return e == ENOENT ? 0 : dpg_errf(err, "cannot list %s: %s", path, strerror(e));
	}
	while ((d = readdir(dir)) != NULL) {
		if (d->d_name[0] == '.')
			continue;
		if (*n == cap) {
			char **v = realloc(*names, (cap ? cap * 2 : 64) * sizeof(*v));

			if (v == NULL)
				goto oom;
			*names = v;
			cap = cap ? cap * 2 : 64;
		}
		if (((*names)[*n] = strdup(d->d_name)) == NULL)
			goto oom;
		(*n)++;
	}
	closedir(dir);
	qsort(*names, *n, sizeof(**names), cmp_str);
	return 0;
oom:
	closedir(dir);
	return dpg_errf(err, "out of memory listing %s", path);
}

static int add_pci(struct text *t, const char *root, struct dpg_err *err)
{
	char **names;
	size_t n, i;
	int rc = pci_names(root, &names, &n, err);

	for (i = 0; rc == 0 && i < n; i++) {
		char rel[400], v[32], d[32], c[32], line[KEY_LINE_MAX];

		snprintf(rel, sizeof(rel), "/sys/bus/pci/devices/%.200s/vendor", names[i]);
		read_line(root, rel, v, sizeof(v));
		snprintf(rel, sizeof(rel), "/sys/bus/pci/devices/%.200s/device", names[i]);
		read_line(root, rel, d, sizeof(d));
		snprintf(rel, sizeof(rel), "/sys/bus/pci/devices/%.200s/class", names[i]);
		read_line(root, rel, c, sizeof(c));
		snprintf(line, sizeof(line), "pci %.200s %s %s %s\n", names[i], v, d, c);
		rc = text_add(t, line, err);
	}
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

int dpg_topo_cache_key(const char *root, char **key, size_t *len, struct dpg_err *err)
{
	struct text t = { 0 };
	char boot[128], cpus[KEY_LINE_MAX - 16], line[KEY_LINE_MAX];

	*key = NULL;
	*len = 0;
	if (root == NULL)
		root = "";
	read_line(root, "/proc/sys/kernel/random/boot_id", boot, sizeof(boot));
	if (boot[0] == '\0')
		return dpg_errf(err, "no boot id in %s/proc/sys/kernel/random/boot_id: "
				"the topology cache cannot tell one boot from the next", root);
	read_line(root, "/sys/devices/system/cpu/online", cpus, sizeof(cpus));
	snprintf(line, sizeof(line), "dpg-topology-cache 1\nboot %s\nhwloc %#x %#x\n",
		 boot, (unsigned)HWLOC_API_VERSION, hwloc_get_api_version());
	if (text_add(&t, line, err) != 0)
		goto fail;
	snprintf(line, sizeof(line), "cpus %s\n", cpus);
	if (text_add(&t, line, err) != 0 || add_pci(&t, root, err) != 0 ||
	    text_add(&t, "end\n", err) != 0)
		goto fail;
	*key = t.s;
	*len = t.len;
	return 0;
fail:
	free(t.s);
	return -1;
}
