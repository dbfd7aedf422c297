/* SPDX-License-Identifier: BSD-3-Clause */
/* conf.c - strict parsing of the plugin's plugstack.conf arguments
 * (port_range=, default_gpus_per_task=, master_addr=, bind=, ...). */
#include "conf.h"
#include "hostlist.h"
#include "opts.h"
#include "topocache.h"
#include "requeue.h"

#include <stdio.h>
#include <string.h>

#define CONF_KEYS "port_range, default_gpus_per_task, master_addr, resv_ports, " \
	"bind, gpu_visibility, gpu_sharing, topology_xml, topology_cache, kill_on_fail, requeue"

void dpg_conf_init(struct dpg_conf *c)
{
	memset(c, 0, sizeof(*c));
	c->ports.lo = DPG_PORT_DEFAULT_LO;
	c->ports.hi = DPG_PORT_DEFAULT_HI;
	c->default_gpus_per_task = -1;
	snprintf(c->addr_format, sizeof(c->addr_format), "%%n");
	c->use_resv_ports = true;
	c->bind = DPG_BIND_CLOSEST;
	c->visibility = DPG_VIS_ORDERED;
	c->gpu_sharing = false;
	c->topology_xml[0] = '\0';
	c->kill_on_fail = true;
	snprintf(c->topology_cache, sizeof(c->topology_cache), "%s", DPG_TOPO_CACHE_DEFAULT);
}

static int parse_bool(const char *v, bool *out)
{
	static const char *yes[] = { "yes", "true", "1", "on" };
	static const char *no[] = { "no", "false", "0", "off" };

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcmp(v, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcmp(v, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return -1;
}

/* A rule is accepted if it has exactly one %n and its literal text is made
 * of host-name characters, so the result is always a host name. */
static int check_addr_format(const char *f, struct dpg_err *err)
{
	int nodes = 0;
	char q[160];

	if (strlen(f) >= DPG_ADDR_FORMAT_MAX)
		return dpg_errf(err, "invalid master_addr='%s': longer than %d characters",
				dpg_err_quote(f, q, sizeof(q)), DPG_ADDR_FORMAT_MAX - 1);
	for (const char *p = f; *p != '\0'; p++) {
		if (*p == '%') {
			if (p[1] != 'n')
				goto bad;
			nodes++;
			p++;
		} else if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			     (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' ||
			     *p == '_')) {
			goto bad;
		}
	}
	if (nodes != 1)
		goto bad;
	return 0;
bad:
	return dpg_errf(err, "invalid master_addr='%s': expected a rule with exactly "
			"one %%n (the node name) and host-name characters, "
			"e.g. master_addr=%%n-ib or master_addr=%%n.fabric.example",
			dpg_err_quote(f, q, sizeof(q)));
}

int dpg_conf_parse_arg(struct dpg_conf *c, const char *arg, struct dpg_err *err)
{
	const char *eq = arg ? strchr(arg, '=') : NULL;
	char key[32], q[160];
	const char *val;
	size_t klen;

	if (eq == NULL)
		return dpg_errf(err, "invalid plugstack.conf argument '%s': expected "
				"key=value with key one of: " CONF_KEYS,
				dpg_err_quote(arg, q, sizeof(q)));
	klen = (size_t)(eq - arg);
	if (klen == 0 || klen >= sizeof(key))
		return dpg_errf(err, "unknown plugstack.conf argument '%s': known "
				"keys are " CONF_KEYS, dpg_err_quote(arg, q, sizeof(q)));
	memcpy(key, arg, klen);
	key[klen] = '\0';
	val = eq + 1;

	if (strcmp(key, "port_range") == 0) {
		struct dpg_port_range r;
		struct dpg_err e;

		if (dpg_port_range_parse(val, &r, &e) != 0)
			return dpg_errf(err, "invalid port_range='%s': expected LO-HI "
					"with 1024 <= LO <= HI <= 65535, e.g. "
					"port_range=20000-32767",
					dpg_err_quote(val, q, sizeof(q)));
		c->ports = r;
		return 0;
	}
	if (strcmp(key, "default_gpus_per_task") == 0) {
		unsigned long v;

		if (strcmp(val, "none") == 0) {
			c->default_gpus_per_task = -1;
			return 0;
		}
		if (dpg_parse_ulong(val, 0, DPG_GPUS_PER_TASK_MAX, &v) != 0)
			return dpg_errf(err, "invalid default_gpus_per_task='%s': "
					"expected none or an integer 0-%d",
					dpg_err_quote(val, q, sizeof(q)),
					DPG_GPUS_PER_TASK_MAX);
		c->default_gpus_per_task = (int)v;
		return 0;
	}
	if (strcmp(key, "master_addr") == 0) {
		if (check_addr_format(val, err) != 0)
			return -1;
		snprintf(c->addr_format, sizeof(c->addr_format), "%s", val);
		return 0;
	}
	if (strcmp(key, "resv_ports") == 0) {
		if (parse_bool(val, &c->use_resv_ports) != 0)
			return dpg_errf(err, "invalid resv_ports='%s': expected yes or no",
					dpg_err_quote(val, q, sizeof(q)));
		return 0;
	}
	if (strcmp(key, "bind") == 0)
		return dpg_bind_parse(val, &c->bind, err) == 0 ? 0 :
			dpg_errf(err, "invalid bind='%s': expected closest or none",
				 dpg_err_quote(val, q, sizeof(q)));
	if (strcmp(key, "gpu_visibility") == 0)
		return dpg_gpu_visibility_parse(val, &c->visibility, err) == 0 ? 0 :
			dpg_errf(err, "invalid gpu_visibility='%s': expected isolate "
				 "or ordered", dpg_err_quote(val, q, sizeof(q)));
	if (strcmp(key, "gpu_sharing") == 0) {
		if (parse_bool(val, &c->gpu_sharing) != 0)
			return dpg_errf(err, "invalid gpu_sharing='%s': expected yes or no",
					dpg_err_quote(val, q, sizeof(q)));
		return 0;
	}
	if (strcmp(key, "topology_xml") == 0) {
		if (val[0] != '/' || strlen(val) >= sizeof(c->topology_xml))
			return dpg_errf(err, "invalid topology_xml='%s': expected an "
					"absolute path shorter than %zu bytes",
					dpg_err_quote(val, q, sizeof(q)),
					sizeof(c->topology_xml));
		snprintf(c->topology_xml, sizeof(c->topology_xml), "%s", val);
		return 0;
	}
	if (strcmp(key, "kill_on_fail") == 0) {
		if (parse_bool(val, &c->kill_on_fail) != 0)
			return dpg_errf(err, "invalid kill_on_fail='%s': expected yes or "
					"no", dpg_err_quote(val, q, sizeof(q)));
		return 0;
	}
	if (strcmp(key, "topology_cache") == 0) {
		bool on;

		if (parse_bool(val, &on) == 0 && !on) {
			c->topology_cache[0] = '\0';
			return 0;
		}
		if (val[0] != '/' || strlen(val) >= sizeof(c->topology_cache) ||
		    strstr(val, "/../") != NULL || strstr(val, "/./") != NULL)
			return dpg_errf(err, "invalid topology_cache='%s': expected no or "
					"an absolute directory path (no . or ..) shorter "
					"than %zu bytes", dpg_err_quote(val, q, sizeof(q)),
					sizeof(c->topology_cache));
		snprintf(c->topology_cache, sizeof(c->topology_cache), "%s", val);
		return 0;
	}
	if (strcmp(key, "requeue") == 0)
		return dpg_requeue_parse("requeue", val, &c->requeue, err);
	return dpg_errf(err, "unknown plugstack.conf argument '%s': known keys "
			"are " CONF_KEYS, dpg_err_quote(key, q, sizeof(q)));
}

int dpg_conf_parse(struct dpg_conf *c, int ac, char **av, struct dpg_err *err)
{
	dpg_conf_init(c);
	for (int i = 0; i < ac; i++)
		if (dpg_conf_parse_arg(c, av[i], err) != 0)
			return -1;
	return 0;
}

int dpg_conf_master_addr(const struct dpg_conf *c, const char *node,
			 char *buf, size_t len, struct dpg_err *err)
{
	size_t o = 0;

	if (len == 0)
		return dpg_errf(err, "no room for MASTER_ADDR");
	for (const char *p = c->addr_format; *p != '\0'; p++) {
		const char *piece = p;
		size_t n = 1;

		if (p[0] == '%' && p[1] == 'n') {
			piece = node;
			n = strlen(node);
			p++;
		}
		if (o + n >= len)
			return dpg_errf(err, "MASTER_ADDR for node '%.64s' under "
					"master_addr=%s is longer than %zu bytes",
					node, c->addr_format, len - 1);
		memcpy(buf + o, piece, n);
		o += n;
	}
	buf[o] = '\0';
	return 0;
}
