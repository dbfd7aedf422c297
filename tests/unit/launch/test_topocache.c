/* SPDX-License-Identifier: BSD-3-Clause */
/* test_topocache.c - unit tests for lib/launch/topocache*.c: the key, the safe
 * directory walk, the file's round trip, and the cached load against attacks
 * (symlinks, writable or foreign directories, corrupt or stale files,
 * concurrent writers), all in temporary directories. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "topocache.h"

#define assert_contains(haystack, needle)                                   \
	do {                                                                \
		const char *h_ = (haystack), *n_ = (needle);                \
		if (strstr(h_, n_) == NULL)                                 \
			fail_msg("expected '%s' in '%s'", n_, h_);          \
	} while (0)

struct lab {
	char base[128];		/* mkdtemp: 0700, ours, below sticky /tmp */
	char dir[256];		/* base/cache (the cache directory) */
};

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static void rm_rf(const char *path)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	assert_int_equal(system(cmd), 0);
}

static int lab_setup(void **state)
{
	struct lab *l = calloc(1, sizeof(*l));

	snprintf(l->base, sizeof(l->base), "/tmp/dpg-topocache.XXXXXX");
	if (mkdtemp(l->base) == NULL)
		return -1;
	snprintf(l->dir, sizeof(l->dir), "%s/cache", l->base);
	*state = l;
	return 0;
}

static int lab_teardown(void **state)
{
	struct lab *l = *state;

	rm_rf(l->base);
	free(l);
	return 0;
}

static size_t count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0;

	assert_non_null(d);
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			n++;
	closedir(d);
	return n;
}

/* ------------------------------------------------------------ key */

static void fake_root(const struct lab *l, const char *boot)
{
	char p[1024];

	snprintf(p, sizeof(p), "mkdir -p %s/root/proc/sys/kernel/random "
		 "%s/root/sys/devices/system/cpu %s/root/sys/bus/pci/devices/0000:00:02.0 "
		 "%s/root/sys/bus/pci/devices/0000:00:01.0", l->base, l->base, l->base, l->base);
	assert_int_equal(system(p), 0);
	snprintf(p, sizeof(p), "%s/root/proc/sys/kernel/random/boot_id", l->base);
	put(p, boot);
	snprintf(p, sizeof(p), "%s/root/sys/devices/system/cpu/online", l->base);
	put(p, "0-7\n");
	snprintf(p, sizeof(p), "%s/root/sys/bus/pci/devices/0000:00:01.0/vendor", l->base);
	put(p, "0x8086\n");
	snprintf(p, sizeof(p), "%s/root/sys/bus/pci/devices/0000:00:02.0/vendor", l->base);
	put(p, "0x10de\n");
}

static void test_key(void **state)
{
	struct lab *l = *state;
	char root[200], p[400], *k1, *k2, *k3;
	size_t n1, n2, n3;
	struct dpg_err e;

	snprintf(root, sizeof(root), "%s/root", l->base);
	fake_root(l, "aaaa-1111\n");
	assert_int_equal(dpg_topo_cache_key(root, &k1, &n1, &e), 0);
	assert_int_equal(strlen(k1), n1);
	assert_contains(k1, "boot aaaa-1111\n");
	assert_contains(k1, "cpus 0-7\n");
	/* sorted by bus id whatever readdir's order */
	assert_contains(k1, "pci 0000:00:01.0 0x8086");
	assert_true(strstr(k1, "0000:00:01.0") < strstr(k1, "0000:00:02.0"));
	assert_contains(k1, "end\n");
	/* a new PCI device changes the key */
	snprintf(p, sizeof(p), "mkdir %s/sys/bus/pci/devices/0000:81:00.0", root);
	assert_int_equal(system(p), 0);
	assert_int_equal(dpg_topo_cache_key(root, &k2, &n2, &e), 0);
	assert_true(n1 != n2 || memcmp(k1, k2, n1) != 0);
	/* so does a new boot */
	fake_root(l, "bbbb-2222\n");
	assert_int_equal(dpg_topo_cache_key(root, &k3, &n3, &e), 0);
	assert_true(n2 != n3 || memcmp(k2, k3, n2) != 0);
	free(k1);
	free(k2);
	free(k3);
	/* no boot id: no key */
	snprintf(p, sizeof(p), "%s/proc/sys/kernel/random/boot_id", root);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(dpg_topo_cache_key(root, &k1, &n1, &e), -DPG_ERR_INVALID);
	assert_null(k1);
	assert_contains(e.msg, "boot id");
}

/* ------------------------------------------------------------ directory */

static void test_dir_create_modes(void **state)
{
	struct lab *l = *state;
	char deep[300];
	struct stat st;
	struct dpg_err e;
	int fd;

	snprintf(deep, sizeof(deep), "%s/a/b", l->dir);
	/* absent and not asked to create: -DPG_ERR_ENV, nothing made */
	assert_int_equal(dpg_topo_cache_dir_open(deep, getuid(), false, &fd, &e), -DPG_ERR_ENV);
	assert_int_equal(stat(l->dir, &st), -1);
	assert_int_equal(dpg_topo_cache_dir_open(deep, getuid(), true, &fd, &e), 0);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(stat(l->dir, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0755);
	assert_int_equal(stat(deep, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	/* again: opens what exists */
	assert_int_equal(dpg_topo_cache_dir_open(deep, getuid(), true, &fd, &e), 0);
	close(fd);
	/* relative or dotted paths are refused */
	assert_int_equal(dpg_topo_cache_dir_open("var/cache", 0, true, &fd, &e), -DPG_ERR_INVALID);
	snprintf(deep, sizeof(deep), "%s/a/../a", l->dir);
	assert_int_equal(dpg_topo_cache_dir_open(deep, getuid(), true, &fd, &e), -DPG_ERR_INVALID);
	assert_int_equal(fd, -1);
}

static void test_dir_symlink(void **state)
{
	struct lab *l = *state;
	char real[300], link[300];
	struct dpg_err e;
	int fd;

	snprintf(real, sizeof(real), "%s/real", l->base);
	snprintf(link, sizeof(link), "%s/link/sub", l->base);
	assert_int_equal(mkdir(real, 0755), 0);
	snprintf(link, sizeof(link), "%s/link", l->base);
	assert_int_equal(symlink(real, link), 0);
	/* the symlink as the directory, and as an ancestor */
	assert_int_equal(dpg_topo_cache_dir_open(link, getuid(), true, &fd, &e), -DPG_ERR_INVALID);
	assert_contains(e.msg, "symbolic link");
	snprintf(link, sizeof(link), "%s/link/sub", l->base);
	assert_int_equal(dpg_topo_cache_dir_open(link, getuid(), true, &fd, &e), -DPG_ERR_INVALID);
	assert_int_equal(count_entries(real), 0);	/* nothing created through it */
}

static void test_dir_writable(void **state)
{
	struct lab *l = *state;
	char sub[300];
	struct dpg_err e;
	int fd;

	assert_int_equal(mkdir(l->dir, 0755), 0);
	assert_int_equal(chmod(l->dir, 0777), 0);
	assert_int_equal(dpg_topo_cache_dir_open(l->dir, getuid(), true, &fd, &e), -DPG_ERR_INVALID);
	assert_contains(e.msg, "writable by group or others");
	/* a world-writable ancestor without the sticky bit is refused too */
	snprintf(sub, sizeof(sub), "%s/sub", l->dir);
	assert_int_equal(dpg_topo_cache_dir_open(sub, getuid(), true, &fd, &e), -DPG_ERR_INVALID);
	/* with the sticky bit (like /tmp) an ancestor is fine, the last one not */
	assert_int_equal(chmod(l->dir, 01777), 0);
	assert_int_equal(dpg_topo_cache_dir_open(sub, getuid(), true, &fd, &e), 0);
	close(fd);
	assert_int_equal(dpg_topo_cache_dir_open(l->dir, getuid(), true, &fd, &e), -DPG_ERR_INVALID);
	/* group-writable is as bad */
	assert_int_equal(chmod(sub, 0770), 0);
	assert_int_equal(dpg_topo_cache_dir_open(sub, getuid(), true, &fd, &e), -DPG_ERR_INVALID);
}

static void test_dir_owner(void **state)
{
	struct lab *l = *state;
	struct dpg_err e;
	int fd;

	if (geteuid() != 0) {
		printf("SKIP test_dir_owner: needs root to give a directory away (chown)\n");
		skip();
	}
	assert_int_equal(mkdir(l->dir, 0755), 0);
	assert_int_equal(chown(l->dir, 65534, 65534), 0);
	assert_int_equal(dpg_topo_cache_dir_open(l->dir, 0, true, &fd, &e), -DPG_ERR_INVALID);
	assert_contains(e.msg, "owned by uid 65534");
}

/* ------------------------------------------------------------ file */

static int open_dir(const struct lab *l)
{
	struct dpg_err e;
	int fd = -1;

	assert_int_equal(dpg_topo_cache_dir_open(l->dir, getuid(), true, &fd, &e), 0);
	return fd;
}

static void test_file_round_trip(void **state)
{
	struct lab *l = *state;
	static const char key[] = "dpg-topology-cache 1\nboot x\nend\n";
	char path[300], *xml;
	size_t len;
	struct stat st;
	struct dpg_err e;
	int fd = open_dir(l);

	assert_int_equal(dpg_topo_cache_read(fd, getuid(), key, strlen(key), &xml, &len, &e), 0);
	assert_int_equal(dpg_topo_cache_write(fd, key, strlen(key), "<xml/>\n", 7, &e), 0);
	assert_int_equal(dpg_topo_cache_read(fd, getuid(), key, strlen(key), &xml, &len, &e), 1);
	assert_int_equal(len, 7);
	assert_string_equal(xml, "<xml/>\n");
	free(xml);
	snprintf(path, sizeof(path), "%s/%s", l->dir, DPG_TOPO_CACHE_FILE);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);
	assert_int_equal(count_entries(l->dir), 1);	/* no temporary left */
	/* another key: stale */
	assert_int_equal(dpg_topo_cache_read(fd, getuid(), "dpg-topology-cache 1\nboot y\nend\n",
					     strlen(key), &xml, &len, &e), -DPG_ERR_INVALID);
	assert_contains(e.msg, "stale");
	/* truncated inside the key */
	assert_int_equal(truncate(path, 10), 0);
	assert_int_equal(dpg_topo_cache_read(fd, getuid(), key, strlen(key), &xml, &len, &e),
			 -DPG_ERR_INVALID);
	/* writable by others */
	assert_int_equal(dpg_topo_cache_write(fd, key, strlen(key), "<xml/>\n", 7, &e), 0);
	assert_int_equal(chmod(path, 0666), 0);
	assert_int_equal(dpg_topo_cache_read(fd, getuid(), key, strlen(key), &xml, &len, &e),
			 -DPG_ERR_INVALID);
	assert_contains(e.msg, "only root may write");
	assert_int_equal(dpg_topo_cache_discard(fd, &e), 0);
	assert_int_equal(count_entries(l->dir), 0);
	assert_int_equal(dpg_topo_cache_discard(fd, &e), 0);	/* none: fine */
	close(fd);
}

static void test_file_symlink(void **state)
{
	struct lab *l = *state;
	static const char key[] = "k\n";
	char path[300], target[300], *xml;
	size_t len;
	struct dpg_err e;
	int fd = open_dir(l);

	snprintf(target, sizeof(target), "%s/elsewhere", l->base);
	put(target, "k\n<xml/>");
	snprintf(path, sizeof(path), "%s/%s", l->dir, DPG_TOPO_CACHE_FILE);
	assert_int_equal(symlink(target, path), 0);
	assert_int_equal(dpg_topo_cache_read(fd, getuid(), key, 2, &xml, &len, &e), -DPG_ERR_INVALID);
	assert_contains(e.msg, "symbolic link");
	/* discarding removes the link, not its target */
	assert_int_equal(dpg_topo_cache_discard(fd, &e), 0);
	assert_int_equal(access(target, F_OK), 0);
	/* a write replaces a link by a file, never writes through it */
	assert_int_equal(symlink(target, path), 0);
	assert_int_equal(dpg_topo_cache_write(fd, key, 2, "<new/>", 6, &e), 0);
	assert_int_equal(dpg_topo_cache_read(fd, getuid(), key, 2, &xml, &len, &e), 1);
	assert_string_equal(xml, "<new/>");
	free(xml);
	{	/* the link's old target is untouched */
		FILE *f = fopen(target, "r");
		char buf[32] = "";

		assert_non_null(f);
		assert_non_null(fgets(buf, sizeof(buf), f));
		fclose(f);
		assert_string_equal(buf, "k\n");
	}
	close(fd);
}

/* ------------------------------------------------------------ cached load */

static struct dpg_topo_cache_cfg cfg(const struct lab *l, bool may_write)
{
	struct dpg_topo_cache_cfg c = {
		.dir = l->dir, .owner = getuid(), .may_write = may_write,
		.root = NULL, .timeout_ms = 10000,
	};
	return c;
}

static void same_topo(const struct dpg_topo *a, const struct dpg_topo *b)
{
	assert_int_equal(a->npus, b->npus);
	assert_int_equal(a->ncores, b->ncores);
	assert_int_equal(a->nnuma, b->nnuma);
	assert_int_equal(a->npackages, b->npackages);
	assert_int_equal(a->ngpus, b->ngpus);
	assert_int_equal(a->nnics, b->nnics);
	assert_memory_equal(&a->complete, &b->complete, sizeof(a->complete));
	assert_memory_equal(&a->allowed, &b->allowed, sizeof(a->allowed));
	assert_memory_equal(a->pus, b->pus, a->npus * sizeof(a->pus[0]));
}

static void test_load_miss_then_hit(void **state)
{
	struct lab *l = *state;
	struct dpg_topo_cache_cfg c = cfg(l, true);
	struct dpg_topo *live, *t1, *t2;
	char note[600];
	bool hit = true;
	struct dpg_err e;

	assert_int_equal(dpg_topo_load_live(&live, &e), 0);
	assert_int_equal(dpg_topo_load_cached(&c, &t1, &hit, note, sizeof(note), &e), 0);
	assert_false(hit);
	assert_string_equal(note, "");
	assert_string_equal(t1->source, "live");
	assert_int_equal(count_entries(l->dir), 1);
	assert_int_equal(dpg_topo_load_cached(&c, &t2, &hit, note, sizeof(note), &e), 0);
	assert_true(hit);
	assert_string_equal(note, "");
	assert_contains(t2->source, "cache:");
	same_topo(live, t1);
	same_topo(live, t2);
	dpg_topo_free(live);
	dpg_topo_free(t1);
	dpg_topo_free(t2);
}

/* Write a cache file of the real key followed by body. */
static void plant(const struct lab *l, const char *key_override, const char *body)
{
	char path[300], *key;
	size_t len;
	struct dpg_err e;
	FILE *f;

	assert_int_equal(dpg_topo_cache_key(NULL, &key, &len, &e), 0);
	assert_int_equal(mkdir(l->dir, 0700), 0);
	snprintf(path, sizeof(path), "%s/%s", l->dir, DPG_TOPO_CACHE_FILE);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(key_override != NULL ? key_override : key, f);
	fputs(body, f);
	assert_int_equal(fclose(f), 0);
	free(key);
}

static void expect_rebuilt(const struct lab *l, const char *why)
{
	struct dpg_topo_cache_cfg c = cfg(l, true);
	struct dpg_topo *t;
	char note[600];
	bool hit = true;
	struct dpg_err e;

	assert_int_equal(dpg_topo_load_cached(&c, &t, &hit, note, sizeof(note), &e), 0);
	assert_false(hit);
	assert_contains(note, why);
	assert_string_equal(t->source, "live");
	dpg_topo_free(t);
	/* rebuilt: the next load is a quiet hit */
	assert_int_equal(dpg_topo_load_cached(&c, &t, &hit, note, sizeof(note), &e), 0);
	assert_true(hit);
	assert_string_equal(note, "");
	dpg_topo_free(t);
}

static void test_load_corrupt(void **state)
{
	plant(*state, NULL, "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n<object type=\"Mach");
	expect_rebuilt(*state, "corrupt");
}

static void test_load_garbage(void **state)
{
	plant(*state, NULL, "\x01\x02 not xml at all \xff");
	expect_rebuilt(*state, "corrupt");
}

static void test_load_stale(void **state)
{
	plant(*state, "dpg-topology-cache 1\nboot another-boot\nend\n", "<topology/>");
	expect_rebuilt(*state, "stale");
}

static void test_load_unsafe_dir(void **state)
{
	struct lab *l = *state;
	struct dpg_topo_cache_cfg c = cfg(l, true);
	struct dpg_topo *t;
	char real[300], note[600];
	bool hit = true;
	struct dpg_err e;

	snprintf(real, sizeof(real), "%s/real", l->base);
	assert_int_equal(mkdir(real, 0700), 0);
	assert_int_equal(symlink(real, l->dir), 0);
	assert_int_equal(dpg_topo_load_cached(&c, &t, &hit, note, sizeof(note), &e), 0);
	assert_false(hit);
	assert_contains(note, "not used");
	assert_string_equal(t->source, "live");
	dpg_topo_free(t);
	assert_int_equal(count_entries(real), 0);
}

static void test_load_read_only(void **state)
{
	struct lab *l = *state;
	struct dpg_topo_cache_cfg c = cfg(l, false);
	struct dpg_topo *t;
	char note[600];
	bool hit = true;
	struct dpg_err e;
	struct stat st;

	assert_int_equal(dpg_topo_load_cached(&c, &t, &hit, note, sizeof(note), &e), 0);
	assert_false(hit);
	assert_string_equal(note, "");
	assert_int_equal(stat(l->dir, &st), -1);	/* nothing created */
	dpg_topo_free(t);
	/* disabled (no directory): live, quietly */
	c.dir = "";
	assert_int_equal(dpg_topo_load_cached(&c, &t, &hit, note, sizeof(note), &e), 0);
	assert_false(hit);
	assert_string_equal(note, "");
	dpg_topo_free(t);
}

static void test_load_concurrent(void **state)
{
	struct lab *l = *state;
	struct dpg_topo_cache_cfg c = cfg(l, true);
	enum { N = 6 };
	pid_t pid[N];
	struct dpg_topo *t;
	char note[600];
	bool hit = false;
	struct dpg_err e;

	for (int i = 0; i < N; i++) {
		pid[i] = fork();
		assert_true(pid[i] >= 0);
		if (pid[i] == 0) {
			int rc = dpg_topo_load_cached(&c, &t, &hit, note, sizeof(note), &e);

			_exit(rc == 0 && note[0] == '\0' ? 0 : 1);
		}
	}
	for (int i = 0; i < N; i++) {
		int st = 0;

		assert_int_equal(waitpid(pid[i], &st, 0), pid[i]);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	assert_int_equal(count_entries(l->dir), 1);	/* one file, no temporaries */
	assert_int_equal(dpg_topo_load_cached(&c, &t, &hit, note, sizeof(note), &e), 0);
	assert_true(hit);
	dpg_topo_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, lab_setup, lab_teardown)
		T(test_key),
		T(test_dir_create_modes),
		T(test_dir_symlink),
		T(test_dir_writable),
		T(test_dir_owner),
		T(test_file_round_trip),
		T(test_file_symlink),
		T(test_load_miss_then_hit),
		T(test_load_corrupt),
		T(test_load_garbage),
		T(test_load_stale),
		T(test_load_unsafe_dir),
		T(test_load_read_only),
		T(test_load_concurrent),
#undef T
	};

	umask(022);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
