/* SPDX-License-Identifier: BSD-3-Clause */
/* test_conf.c - unit tests for lib/launch/conf.c: defaults, every plugstack.conf
 * key with good and bad values, dpg_conf_parse and the master_addr= rule. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "hostlist.h"
#include "opts.h"

/* Assert that haystack contains needle, printing both when it does not. */
#define assert_contains(haystack, needle)                                   \
	do {                                                                \
		const char *h_ = (haystack), *n_ = (needle);                \
		if (strstr(h_, n_) == NULL)                                 \
			fail_msg("expected '%s' in '%s'", n_, h_);          \
	} while (0)

/* A configuration with every field set away from the defaults, so that a
 * failed parse can be checked to leave the struct untouched. */
static void conf_nondefault(struct dpg_conf *c)
{
	dpg_conf_init(c);
	c->ports.lo = 40000;
	c->ports.hi = 40099;
	c->default_gpus_per_task = 3;
	snprintf(c->addr_format, sizeof(c->addr_format), "%s", "%n-keep");
	c->use_resv_ports = false;
}

static void assert_conf_equal(const struct dpg_conf *a, const struct dpg_conf *b)
{
	assert_int_equal(a->ports.lo, b->ports.lo);
	assert_int_equal(a->ports.hi, b->ports.hi);
	assert_int_equal(a->default_gpus_per_task, b->default_gpus_per_task);
	assert_string_equal(a->addr_format, b->addr_format);
	assert_int_equal(a->use_resv_ports, b->use_resv_ports);
	assert_int_equal(a->requeue, b->requeue);
}

/* arg must be rejected, leave the conf as it was, and produce a message
 * that contains every one of the NULL-terminated needles. */
static void expect_reject(const char *arg, ...)
{
	struct dpg_conf c, before;
	struct dpg_err err;
	va_list ap;
	const char *needle;

	conf_nondefault(&c);
	before = c;
	memset(err.msg, 0, sizeof(err.msg));
	if (dpg_conf_parse_arg(&c, arg, &err) != -1)
		fail_msg("'%s' was accepted", arg ? arg : "(null)");
	assert_conf_equal(&c, &before);
	assert_true(strlen(err.msg) > 0);
	assert_null(strchr(err.msg, '\n'));
	va_start(ap, arg);
	while ((needle = va_arg(ap, const char *)) != NULL)
		assert_contains(err.msg, needle);
	va_end(ap);
	/* a NULL error record is allowed */
	assert_int_equal(dpg_conf_parse_arg(&c, arg, NULL), -1);
	assert_conf_equal(&c, &before);
}

static void expect_accept(struct dpg_conf *c, const char *arg)
{
	struct dpg_err err;

	memset(err.msg, 0, sizeof(err.msg));
	if (dpg_conf_parse_arg(c, arg, &err) != 0)
		fail_msg("'%s' was rejected: %s", arg, err.msg);
}

/* ------------------------------------------------------------ defaults */

static void test_defaults(void **state)
{
	struct dpg_conf c;
	char buf[DPG_ADDR_MAX];
	struct dpg_err err;

	(void)state;
	memset(&c, 0xa5, sizeof(c));
	dpg_conf_init(&c);
	assert_int_equal(c.ports.lo, DPG_PORT_DEFAULT_LO);
	assert_int_equal(c.ports.hi, DPG_PORT_DEFAULT_HI);
	assert_int_equal(c.ports.lo, 20000);
	assert_int_equal(c.ports.hi, 32767);
	assert_int_equal(c.default_gpus_per_task, -1);
	assert_string_equal(c.addr_format, "%n");
	assert_true(c.use_resv_ports);
	/* the default rule is the node name itself */
	assert_int_equal(dpg_conf_master_addr(&c, "gpu-007", buf, sizeof(buf), &err), 0);
	assert_string_equal(buf, "gpu-007");
}

/* ------------------------------------------------------------ generic */

static void test_topology_cache(void **state)
{
	struct dpg_conf c;
	struct dpg_err err;

	(void)state;
	dpg_conf_init(&c);
	assert_string_equal(c.topology_cache, "/var/cache/dpg/topology");
	assert_int_equal(dpg_conf_parse_arg(&c, "topology_cache=/srv/dpg/topo", &err), 0);
	assert_string_equal(c.topology_cache, "/srv/dpg/topo");
	assert_int_equal(dpg_conf_parse_arg(&c, "topology_cache=no", &err), 0);
	assert_string_equal(c.topology_cache, "");
	assert_int_equal(dpg_conf_parse_arg(&c, "topology_cache=rel/dir", &err), -1);
	assert_contains(err.msg, "topology_cache='rel/dir'");
	assert_int_equal(dpg_conf_parse_arg(&c, "topology_cache=/a/../etc", &err), -1);
	assert_int_equal(dpg_conf_parse_arg(&c, "topology_cache=", &err), -1);
}

static void test_unknown_key(void **state)
{
	(void)state;
	expect_reject("bogus=1", "bogus", "port_range", "default_gpus_per_task",
		      "master_addr", "resv_ports", NULL);
	expect_reject("Port_Range=30000-30010", "Port_Range", "port_range", NULL);
	expect_reject("port-range=30000-30010", "port-range", NULL);
	expect_reject(" port_range=30000-30010", "port_range", NULL);
	expect_reject("port_range =30000-30010", "port_range ", NULL);
	expect_reject("=5", "=5", "port_range", NULL);
	expect_reject("=", "port_range", NULL);
	/* a key longer than any known key is still reported by name */
	expect_reject("a_very_long_key_name_that_is_not_known=1",
		      "a_very_long_key_name_that_is_not_known", "port_range", NULL);
}

static void test_no_equals(void **state)
{
	(void)state;
	expect_reject("port_range", "port_range", "key=value", NULL);
	expect_reject("resv_ports", "resv_ports", "key=value", NULL);
	expect_reject("", "key=value", NULL);
	expect_reject("bogus", "bogus", "key=value", "master_addr", NULL);
}

static void test_null_arg(void **state)
{
	struct dpg_conf c;
	struct dpg_err err;

	(void)state;
	dpg_conf_init(&c);
	assert_int_equal(dpg_conf_parse_arg(&c, NULL, &err), -1);
	assert_true(strlen(err.msg) > 0);
}

static void test_empty_values(void **state)
{
	(void)state;
	expect_reject("port_range=", "port_range", "LO-HI", NULL);
	expect_reject("default_gpus_per_task=", "default_gpus_per_task", "none",
		      "0-64", NULL);
	expect_reject("master_addr=", "master_addr", "%n", NULL);
	expect_reject("resv_ports=", "resv_ports", "yes or no", NULL);
}

/* ------------------------------------------------------------ port_range */

static void test_port_range_good(void **state)
{
	static const struct {
		const char *arg;
		uint16_t lo, hi;
	} cases[] = {
		{ "port_range=30000-30010", 30000, 30010 },
		{ "port_range=1024-65535", 1024, 65535 },
		{ "port_range=29500-29500", 29500, 29500 },
		{ "port_range=20000-32767", 20000, 32767 },
		{ "port_range=65535-65535", 65535, 65535 },
	};
	struct dpg_conf c;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		conf_nondefault(&c);
		expect_accept(&c, cases[i].arg);
		assert_int_equal(c.ports.lo, cases[i].lo);
		assert_int_equal(c.ports.hi, cases[i].hi);
		/* nothing else moved */
		assert_int_equal(c.default_gpus_per_task, 3);
		assert_string_equal(c.addr_format, "%n-keep");
		assert_false(c.use_resv_ports);
	}
}

static void test_port_range_bad(void **state)
{
	static const char *const bad[] = {
		"port_range=5-1", "port_range=1000-2000", "port_range=1023-2000",
		"port_range=30010-30000", "port_range=30000", "port_range=30000-",
		"port_range=-30000", "port_range=a-b", "port_range=30000-70000",
		"port_range=30000-65536", "port_range= 30000-30010",
		"port_range=30000-30010 ", "port_range=30000--30010",
		"port_range=+30000-30010", "port_range=30000-30010-30020",
		"port_range=0x7530-30010", "port_range=30000:30010",
		"port_range=00000000030000-30010",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_reject(bad[i], "port_range", "LO-HI", "1024", "65535", NULL);
	/* the offending value is quoted back */
	expect_reject("port_range=5-1", "'5-1'", NULL);
	expect_reject("port_range=1000-2000", "'1000-2000'", NULL);
}

/* ------------------------------------------------ default_gpus_per_task */

static void test_gpus_good(void **state)
{
	static const struct {
		const char *arg;
		int want;
	} cases[] = {
		{ "default_gpus_per_task=0", 0 },
		{ "default_gpus_per_task=1", 1 },
		{ "default_gpus_per_task=4", 4 },
		{ "default_gpus_per_task=64", 64 },
		{ "default_gpus_per_task=none", -1 },
	};
	struct dpg_conf c;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		conf_nondefault(&c);
		expect_accept(&c, cases[i].arg);
		assert_int_equal(c.default_gpus_per_task, cases[i].want);
		assert_int_equal(c.ports.lo, 40000);
		assert_string_equal(c.addr_format, "%n-keep");
	}
	/* none after a number goes back to "no default" */
	dpg_conf_init(&c);
	expect_accept(&c, "default_gpus_per_task=8");
	assert_int_equal(c.default_gpus_per_task, 8);
	expect_accept(&c, "default_gpus_per_task=none");
	assert_int_equal(c.default_gpus_per_task, -1);
}

static void test_gpus_bad(void **state)
{
	static const char *const bad[] = {
		"default_gpus_per_task=65", "default_gpus_per_task=-1",
		"default_gpus_per_task=abc", "default_gpus_per_task=None",
		"default_gpus_per_task=NONE", "default_gpus_per_task= 4",
		"default_gpus_per_task=4 ", "default_gpus_per_task=+4",
		"default_gpus_per_task=0x4", "default_gpus_per_task=4.0",
		"default_gpus_per_task=1000", "default_gpus_per_task=99999999999999999999999",
		"default_gpus_per_task=nonex",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_reject(bad[i], "default_gpus_per_task", "none", "0-64", NULL);
	expect_reject("default_gpus_per_task=65", "'65'", NULL);
	expect_reject("default_gpus_per_task=abc", "'abc'", NULL);
}

/* ---------------------------------------------------------- master_addr */

static void test_master_addr_good(void **state)
{
	static const struct {
		const char *arg, *rule, *node, *want;
	} cases[] = {
		{ "master_addr=%n-ib", "%n-ib", "n1", "n1-ib" },
		{ "master_addr=%n.fabric.example", "%n.fabric.example", "gpu-007",
		  "gpu-007.fabric.example" },
		{ "master_addr=ib-%n", "ib-%n", "n12", "ib-n12" },
		{ "master_addr=%n", "%n", "node_1", "node_1" },
		{ "master_addr=ib-%n.Fabric-2.example", "ib-%n.Fabric-2.example", "a",
		  "ib-a.Fabric-2.example" },
	};
	struct dpg_conf c;
	struct dpg_err err;
	char buf[DPG_ADDR_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		conf_nondefault(&c);
		expect_accept(&c, cases[i].arg);
		assert_string_equal(c.addr_format, cases[i].rule);
		assert_int_equal(c.ports.lo, 40000);
		assert_int_equal(c.default_gpus_per_task, 3);
		memset(buf, 'Z', sizeof(buf));
		assert_int_equal(dpg_conf_master_addr(&c, cases[i].node, buf,
						      sizeof(buf), &err), 0);
		assert_string_equal(buf, cases[i].want);
	}
}

static void test_master_addr_bad(void **state)
{
	static const char *const bad[] = {
		"master_addr=ib",		/* no %n */
		"master_addr=%N-ib",		/* %N is not %n */
		"master_addr=%n-%n",		/* two %n */
		"master_addr=%n%n",
		"master_addr=%x",		/* unknown conversion */
		"master_addr=%n-%x",
		"master_addr=%n-%s",
		"master_addr=%n%",		/* lone % at the end */
		"master_addr=%",
		"master_addr=%n ib",		/* spaces */
		"master_addr= %n",
		"master_addr=%n ",
		"master_addr=%n\tib",
		"master_addr=%n-\xc3\xa9",	/* non-ASCII */
		"master_addr=\xff%n",
		"master_addr=%n/ib",		/* not host-name characters */
		"master_addr=%n:29500",
		"master_addr=%n=ib",
		"master_addr=%n;rm",
		"master_addr=$(%n)",
		"master_addr=%n\n",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_reject(bad[i], "master_addr", "%n", "exactly one", NULL);
	/* the value is quoted back, non-printable bytes escaped */
	expect_reject("master_addr=%x", "'%x'", NULL);
	expect_reject("master_addr=%n-\xc3\xa9", "\\xc3\\xa9", NULL);
	expect_reject("master_addr=%n\n", "\\x0a", NULL);
}

static void test_master_addr_length(void **state)
{
	char arg[64 + DPG_ADDR_FORMAT_MAX * 2];
	char want_len[16];
	struct dpg_conf c;
	size_t base = strlen("master_addr=");

	(void)state;
	/* longest accepted rule: DPG_ADDR_FORMAT_MAX - 1 characters */
	memset(arg, 0, sizeof(arg));
	memcpy(arg, "master_addr=%n.", base + 3);
	memset(arg + base + 3, 'a', DPG_ADDR_FORMAT_MAX - 1 - 3);
	assert_int_equal(strlen(arg), base + DPG_ADDR_FORMAT_MAX - 1);
	dpg_conf_init(&c);
	expect_accept(&c, arg);
	assert_int_equal(strlen(c.addr_format), DPG_ADDR_FORMAT_MAX - 1);
	assert_string_equal(c.addr_format, arg + base);

	/* one more character is too long */
	arg[base + DPG_ADDR_FORMAT_MAX - 1] = 'a';
	snprintf(want_len, sizeof(want_len), "%d", DPG_ADDR_FORMAT_MAX - 1);
	expect_reject(arg, "master_addr", want_len, NULL);

	/* much longer: still a bounded one-line message */
	memset(arg + base + 3, 'b', sizeof(arg) - base - 4);
	arg[sizeof(arg) - 1] = '\0';
	expect_reject(arg, "master_addr", want_len, NULL);
}

/* ----------------------------------------------------------- resv_ports */

static void test_resv_ports(void **state)
{
	static const char *const yes[] = { "yes", "true", "1", "on" };
	static const char *const no[] = { "no", "false", "0", "off" };
	static const char *const bad[] = {
		"resv_ports=maybe", "resv_ports=2", "resv_ports=y", "resv_ports=n",
		"resv_ports=yes ", "resv_ports= no", "resv_ports=yess",
	};
	struct dpg_conf c;
	char arg[64];

	(void)state;
	for (size_t i = 0; i < 4; i++) {
		dpg_conf_init(&c);
		c.use_resv_ports = false;
		snprintf(arg, sizeof(arg), "resv_ports=%s", yes[i]);
		expect_accept(&c, arg);
		assert_true(c.use_resv_ports);
		snprintf(arg, sizeof(arg), "resv_ports=%s", no[i]);
		expect_accept(&c, arg);
		assert_false(c.use_resv_ports);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_reject(bad[i], "resv_ports", "yes or no", NULL);
	expect_reject("resv_ports=maybe", "'maybe'", NULL);
}

static void test_requeue(void **state)
{
	struct dpg_conf c;

	(void)state;
	dpg_conf_init(&c);
	assert_int_equal(c.requeue, 0);
	expect_accept(&c, "requeue=120");
	assert_int_equal(c.requeue, 120);
	expect_accept(&c, "requeue=0");
	assert_int_equal(c.requeue, 0);
	expect_reject("requeue=soon", "requeue 'soon'", "GRACE", NULL);
	expect_accept(&c, "requeue=65535");
	assert_int_equal(c.requeue, 65535);
	/* beyond Slurm's --signal sig_time (0-65535) */
	expect_reject("requeue=65536", "requeue '65536'", "0-65535", NULL);
	expect_reject("requeue=86400", "requeue '86400'", "0-65535", NULL);
}

/* ------------------------------------------------------- dpg_conf_parse */

static void test_parse_argv(void **state)
{
	char *av[] = {
		"port_range=30000-30010", "default_gpus_per_task=2",
		"master_addr=%n-ib", "resv_ports=no",
	};
	struct dpg_conf c;
	struct dpg_err err;
	char buf[DPG_ADDR_MAX];

	(void)state;
	memset(&c, 0x5a, sizeof(c));
	assert_int_equal(dpg_conf_parse(&c, 4, av, &err), 0);
	assert_int_equal(c.ports.lo, 30000);
	assert_int_equal(c.ports.hi, 30010);
	assert_int_equal(c.default_gpus_per_task, 2);
	assert_string_equal(c.addr_format, "%n-ib");
	assert_false(c.use_resv_ports);
	assert_int_equal(dpg_conf_master_addr(&c, "n3", buf, sizeof(buf), &err), 0);
	assert_string_equal(buf, "n3-ib");

	/* a later argument wins */
	{
		char *twice[] = { "port_range=30000-30010", "port_range=31000-31001" };

		assert_int_equal(dpg_conf_parse(&c, 2, twice, &err), 0);
		assert_int_equal(c.ports.lo, 31000);
		assert_int_equal(c.ports.hi, 31001);
	}
}

static void test_parse_empty_argv_gives_defaults(void **state)
{
	struct dpg_conf c, d;
	struct dpg_err err;

	(void)state;
	conf_nondefault(&c);
	assert_int_equal(dpg_conf_parse(&c, 0, NULL, &err), 0);
	dpg_conf_init(&d);
	assert_conf_equal(&c, &d);
}

static void test_parse_argv_bad(void **state)
{
	char *av[] = { "port_range=30000-30010", "bogus=1", "resv_ports=no" };
	char *av2[] = { "master_addr=%n-ib", "default_gpus_per_task=65" };
	struct dpg_conf c;
	struct dpg_err err;

	(void)state;
	memset(err.msg, 0, sizeof(err.msg));
	assert_int_equal(dpg_conf_parse(&c, 3, av, &err), -1);
	assert_contains(err.msg, "bogus");
	assert_contains(err.msg, "port_range");
	memset(err.msg, 0, sizeof(err.msg));
	assert_int_equal(dpg_conf_parse(&c, 2, av2, &err), -1);
	assert_contains(err.msg, "default_gpus_per_task");
	assert_contains(err.msg, "'65'");
	assert_int_equal(dpg_conf_parse(&c, 2, av2, NULL), -1);
}

/* ------------------------------------------------- dpg_conf_master_addr */

static void test_master_addr_apply(void **state)
{
	struct dpg_conf c;
	struct dpg_err err;
	char buf[DPG_ADDR_MAX];
	char node[DPG_HOSTNAME_MAX + 1];
	char want[DPG_ADDR_MAX];

	(void)state;
	dpg_conf_init(&c);
	expect_accept(&c, "master_addr=%n.fabric.example");
	assert_int_equal(dpg_conf_master_addr(&c, "gpu-007", buf, sizeof(buf), &err), 0);
	assert_string_equal(buf, "gpu-007.fabric.example");

	/* the longest host name under a long suffix still fits DPG_ADDR_MAX */
	memset(node, 'h', DPG_HOSTNAME_MAX);
	node[DPG_HOSTNAME_MAX] = '\0';
	snprintf(want, sizeof(want), "%s.fabric.example", node);
	assert_int_equal(dpg_conf_master_addr(&c, node, buf, sizeof(buf), &err), 0);
	assert_string_equal(buf, want);
}

/* Buffers that are too small fail with a message and never write past len:
 * the buffer lives at the very end of a heap block (ASan) and is followed by
 * canary bytes in a second check. */
static void test_master_addr_small_buffer(void **state)
{
	struct dpg_conf c;
	struct dpg_err err;
	const char *want = "gpu-007-ib";
	size_t need = strlen(want) + 1;

	(void)state;
	dpg_conf_init(&c);
	expect_accept(&c, "master_addr=%n-ib");
	for (size_t len = 1; len <= need; len++) {
		char *buf = malloc(len);

		assert_non_null(buf);
		memset(buf, 'Z', len);
		memset(err.msg, 0, sizeof(err.msg));
		if (len < need) {
			assert_int_equal(dpg_conf_master_addr(&c, "gpu-007", buf, len, &err), -1);
			assert_contains(err.msg, "gpu-007");
			assert_contains(err.msg, "master_addr");
			assert_int_equal(dpg_conf_master_addr(&c, "gpu-007", buf, len, NULL), -1);
		} else {
			assert_int_equal(dpg_conf_master_addr(&c, "gpu-007", buf, len, &err), 0);
			assert_string_equal(buf, want);
		}
		free(buf);
	}

	/* canaries after the buffer */
	{
		char big[32];

		memset(big, 'Z', sizeof(big));
		assert_int_equal(dpg_conf_master_addr(&c, "gpu-007", big, 5, &err), -1);
		for (size_t i = 5; i < sizeof(big); i++)
			assert_int_equal(big[i], 'Z');
	}

	/* a zero-length buffer is an error, not a write */
	{
		char z = 'Z';

		assert_int_equal(dpg_conf_master_addr(&c, "gpu-007", &z, 0, &err), -1);
		assert_int_equal(z, 'Z');
	}

	/* a host name so long that the rule's result exceeds DPG_ADDR_MAX */
	{
		char node[DPG_HOSTNAME_MAX + 1];
		char arg[DPG_ADDR_FORMAT_MAX + 16];
		char *buf = malloc(DPG_ADDR_MAX);

		assert_non_null(buf);
		memset(node, 'h', DPG_HOSTNAME_MAX);
		node[DPG_HOSTNAME_MAX] = '\0';
		snprintf(arg, sizeof(arg), "master_addr=%%n.");
		memset(arg + strlen(arg), 'd', 100);
		arg[strlen("master_addr=%n.") + 100] = '\0';
		expect_accept(&c, arg);
		assert_int_equal(dpg_conf_master_addr(&c, node, buf, DPG_ADDR_MAX, &err), -1);
		assert_contains(err.msg, "master_addr");
		free(buf);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_unknown_key),
		cmocka_unit_test(test_no_equals),
		cmocka_unit_test(test_null_arg),
		cmocka_unit_test(test_empty_values),
		cmocka_unit_test(test_topology_cache),
		cmocka_unit_test(test_port_range_good),
		cmocka_unit_test(test_port_range_bad),
		cmocka_unit_test(test_gpus_good),
		cmocka_unit_test(test_gpus_bad),
		cmocka_unit_test(test_master_addr_good),
		cmocka_unit_test(test_master_addr_bad),
		cmocka_unit_test(test_master_addr_length),
		cmocka_unit_test(test_resv_ports),
		cmocka_unit_test(test_requeue),
		cmocka_unit_test(test_parse_argv),
		cmocka_unit_test(test_parse_empty_argv_gives_defaults),
		cmocka_unit_test(test_parse_argv_bad),
		cmocka_unit_test(test_master_addr_apply),
		cmocka_unit_test(test_master_addr_small_buffer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
