/* SPDX-License-Identifier: BSD-3-Clause */
/* test_probe.c - unit tests for lib/launch/probe.c and probe_dev.c: each
 * probe against a fake /proc, /sys and /dev/shm tree built in a temporary
 * directory, and the open-files and /dev/shm formulas. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "probe.h"

static char root[256];

/* mkdir -p the directory of root/rel, then write text there. */
static void put(const char *rel, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (char *p = path + strlen(root) + 1; *p != '\0'; p++)
		if (*p == '/') {
			*p = '\0';
			if (mkdir(path, 0700) != 0 && errno != EEXIST)
				fail_msg("mkdir %s: %s", path, strerror(errno));
			*p = '/';
		}
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int setup(void **state)
{
	(void)state;
	snprintf(root, sizeof(root), "/tmp/dpg-test-probe.XXXXXX");
	assert_non_null(mkdtemp(root));
	return 0;
}

static int teardown(void **state)
{
	char cmd[300];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd) == 0 ? 0 : -1;
}

static void assert_cell(const struct dpg_check_cell *c, enum dpg_check_state st,
			const char *value, const char *detail_part)
{
	if (c->state != st || strcmp(c->value, value) != 0 ||
	    (detail_part != NULL && strstr(c->detail, detail_part) == NULL))
		fail_msg("cell: state %d value '%s' detail '%s'; want %d '%s' ~'%s'",
			 (int)c->state, c->value, c->detail, (int)st, value,
			 detail_part ? detail_part : "");
}

#define LIMITS_HEAD "Limit                     Soft Limit           Hard Limit           Units\n" \
	"Max cpu time              unlimited            unlimited            seconds\n"

static void test_nofile_formula(void **state)
{
	(void)state;
	/* 64 + 4 communicators x 6 + 2 store connections; rank 0 + 3 + 2W */
	assert_int_equal(dpg_check_nofile_need(8, false), 90);
	assert_int_equal(dpg_check_nofile_need(8, true), 90 + 3 + 16);
	assert_int_equal(dpg_check_nofile_need(4096, true), 90 + 3 + 8192);
}

static void test_nofile(void **state)
{
	struct dpg_check_cell c;

	(void)state;
	put("proc/self/limits", LIMITS_HEAD
	    "Max open files            64                   64                   files\n");
	dpg_probe_nofile(root, 4, false, &c);
	assert_cell(&c, DPG_CHECK_FAIL, "64/90", "ulimit -n 90");
	dpg_probe_nofile(root, 4, true, &c);
	assert_cell(&c, DPG_CHECK_FAIL, "64/101", "at rank 0");
	put("proc/self/limits", LIMITS_HEAD
	    "Max open files            1024                 4096                 files\n");
	dpg_probe_nofile(root, 4, true, &c);
	assert_cell(&c, DPG_CHECK_OK, "1024/101", NULL);
	/* 1024 no longer covers rank 0 of 512 ranks: 93 + 1024 */
	dpg_probe_nofile(root, 512, true, &c);
	assert_cell(&c, DPG_CHECK_FAIL, "1024/1117", "a world of 512");
	put("proc/self/limits", LIMITS_HEAD
	    "Max open files            unlimited            unlimited            files\n");
	dpg_probe_nofile(root, 512, true, &c);
	assert_cell(&c, DPG_CHECK_OK, "unlimited", NULL);
	unlink(strcat(strcpy((char[512]){ 0 }, root), "/proc/self/limits"));
	dpg_probe_nofile(root, 2, false, &c);
	assert_cell(&c, DPG_CHECK_FAIL, "unreadable", "proc/self/limits");
}

static void test_somaxconn(void **state)
{
	struct dpg_check_cell c;

	(void)state;
	put("proc/sys/net/core/somaxconn", "128\n");
	dpg_probe_somaxconn(root, 64, &c);
	assert_cell(&c, DPG_CHECK_OK, "128/128", NULL);
	dpg_probe_somaxconn(root, 65, &c);
	assert_cell(&c, DPG_CHECK_FAIL, "128/130", "sysctl -w net.core.somaxconn=130");
}

static void test_shm(void **state)
{
	struct dpg_check_cell c;

	(void)state;
	assert_int_equal(dpg_check_shm_need(2), (8 + 1) << 20);
	assert_int_equal(dpg_check_shm_need(32), (64 + 1) << 20);
	put("dev/shm/x", "");
	{
		/* the fake dev/shm is a directory of the test's filesystem: its
		 * free space decides, as statvfs tells it */
		char path[300], want[64];
		struct statvfs sv;
		unsigned long long mib;

		snprintf(path, sizeof(path), "%s/dev/shm", root);
		assert_int_equal(statvfs(path, &sv), 0);
		mib = (unsigned long long)sv.f_bavail * sv.f_frsize >> 20;
		snprintf(want, sizeof(want), "%lluM/5M", mib);
		dpg_probe_shm(root, 1, &c);
		assert_cell(&c, mib >= 5 ? DPG_CHECK_OK : DPG_CHECK_FAIL, want, NULL);
	}
	/* (the failing side, a real small tmpfs: tests/e2e/check.sh) */
	{
		char other[300];

		snprintf(other, sizeof(other), "%s/nonexistent", root);
		dpg_probe_shm(other, 1, &c);
		assert_cell(&c, DPG_CHECK_FAIL, "missing", "mount -t tmpfs");
	}
}

static void test_cpus(void **state)
{
	struct dpg_check_cell c;

	(void)state;
	put("proc/self/status", "Name:\tx\nCpus_allowed:\tf\nCpus_allowed_list:\t0-3\n"
	    "Mems_allowed_list:\t0\n");
	dpg_probe_cpus(root, "0-3", &c);
	assert_cell(&c, DPG_CHECK_OK, "0-3", NULL);
	dpg_probe_cpus(root, "0,1,2,3", &c);
	assert_cell(&c, DPG_CHECK_OK, "0-3", NULL);
	dpg_probe_cpus(root, "0-1", &c);
	assert_cell(&c, DPG_CHECK_FAIL, "0-3", "bound this task to CPUs 0-1 but it may run on 0-3");
	dpg_probe_cpus(root, "", &c);
	assert_cell(&c, DPG_CHECK_NA, "unbound", NULL);
	dpg_probe_cpus(root, "x", &c);
	assert_cell(&c, DPG_CHECK_FAIL, "bad plan", "DPG_CPUS='x'");
}

static void test_gpus(void **state)
{
	struct dpg_check_cell c;

	(void)state;
	dpg_probe_gpus(root, NULL, NULL, &c);
	assert_cell(&c, DPG_CHECK_NA, "none", NULL);
	put("sys/bus/pci/devices/0000:43:00.0/vendor", "0x10de\n");
	put("sys/bus/pci/devices/0000:44:00.0/vendor", "0x10de\n");
	dpg_probe_gpus(root, "0000:43:00.0,0000:44:00.0", "0,1", &c);
	assert_cell(&c, DPG_CHECK_OK, "2/2 seen", NULL);
	dpg_probe_gpus(root, "0000:43:00.0,0000:44:00.0", "0", &c);
	assert_cell(&c, DPG_CHECK_FAIL, "1/2 seen", "CUDA_VISIBLE_DEVICES=0 shows 1");
	dpg_probe_gpus(root, "0000:43:00.0", NULL, &c);
	assert_cell(&c, DPG_CHECK_FAIL, "0/1 seen", "(unset)");
	dpg_probe_gpus(root, "0000:c1:00.0", "0", &c);
	assert_cell(&c, DPG_CHECK_FAIL, "absent", "GPU 0000:c1:00.0");
}

static void test_nics(void **state)
{
	struct dpg_check_cell c;

	(void)state;
	dpg_probe_nics(root, "", &c);
	assert_cell(&c, DPG_CHECK_NA, "none", NULL);
	put("sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n");
	put("sys/class/infiniband/mlx5_0/ports/1/phys_state", "5: LinkUp\n");
	put("sys/class/infiniband/mlx5_1/ports/1/state", "1: DOWN\n");
	put("sys/class/infiniband/mlx5_1/ports/1/phys_state", "3: Disabled\n");
	dpg_probe_nics(root, "mlx5_0:1", &c);
	assert_cell(&c, DPG_CHECK_OK, "1 up", NULL);
	dpg_probe_nics(root, "mlx5_0", &c);
	assert_cell(&c, DPG_CHECK_OK, "1 up", NULL);
	/* no RDMA NIC in the plan: the interface it chose */
	put("sys/class/net/eth0/operstate", "up\n");
	put("sys/class/net/eth1/operstate", "down\n");
	dpg_probe_nics(root, "eth0", &c);
	assert_cell(&c, DPG_CHECK_OK, "1 up", NULL);
	dpg_probe_nics(root, "eth0,eth1", &c);
	assert_cell(&c, DPG_CHECK_FAIL, "down", "NIC eth1 is down: bring it up");
	dpg_probe_nics(root, "mlx5_0:1,mlx5_1:1", &c);
	assert_cell(&c, DPG_CHECK_FAIL, "down", "NIC mlx5_1:1: port state '1: DOWN'");
	dpg_probe_nics(root, "mlx5_9:1", &c);
	assert_cell(&c, DPG_CHECK_FAIL, "absent", "NIC mlx5_9:1");
}

static void test_ifup(void **state)
{
	struct dpg_check_cell c;

	(void)state;
	put("sys/class/net/eth0/operstate", "up\n");
	put("sys/class/net/lo/operstate", "unknown\n");
	put("sys/class/net/ib0/operstate", "down\n");
	dpg_probe_ifup(root, "eth0", &c);
	assert_cell(&c, DPG_CHECK_OK, "eth0", NULL);
	dpg_probe_ifup(root, "lo", &c);
	assert_cell(&c, DPG_CHECK_OK, "lo", NULL);
	dpg_probe_ifup(root, "ib0", &c);
	assert_cell(&c, DPG_CHECK_FAIL, "if down", "ip link set ib0 up");
	dpg_probe_ifup(root, "eth9", &c);
	assert_cell(&c, DPG_CHECK_FAIL, "no iface", "eth9");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nofile_formula),
		cmocka_unit_test_setup_teardown(test_nofile, setup, teardown),
		cmocka_unit_test_setup_teardown(test_somaxconn, setup, teardown),
		cmocka_unit_test_setup_teardown(test_shm, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cpus, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gpus, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nics, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ifup, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
