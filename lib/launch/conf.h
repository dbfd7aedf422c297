/* SPDX-License-Identifier: BSD-3-Clause */
/* conf.h - the site admin's configuration: plugstack.conf arguments
 * ("key=value" words), parsed strictly, with every default in one place. */
#ifndef DPG_LIB_CONF_H
#define DPG_LIB_CONF_H

#include <stdbool.h>
#include <stddef.h>

#include "contract_vars.h"	/* DPG_ADDR_MAX */
#include "err.h"
#include "gpuvis.h"
#include "plan.h"
#include "port.h"

#define DPG_PATH_MAX 256		/* longest topology_xml= path */

#define DPG_ADDR_FORMAT_MAX 128	/* longest master_addr= rule */

struct dpg_conf {
	struct dpg_port_range ports;	/* port_range=LO-HI */
	int default_gpus_per_task;	/* default_gpus_per_task=none|N; -1 = none */
	char addr_format[DPG_ADDR_FORMAT_MAX];	/* master_addr=FMT, %n = node */
	bool use_resv_ports;		/* resv_ports=yes|no */
	enum dpg_bind bind;		/* bind=closest|none */
	enum dpg_gpu_visibility visibility;	/* gpu_visibility=isolate|ordered */
	bool gpu_sharing;		/* gpu_sharing=yes|no */
	char topology_xml[DPG_PATH_MAX];	/* topology_xml=PATH ("" = discover) */
	bool kill_on_fail;		/* kill_on_fail=yes|no (killfail.h) */
	char topology_cache[DPG_PATH_MAX];	/* topology_cache=DIR|no ("" = no) */
	int requeue;			/* requeue=GRACE seconds, 0 = off */
};

/* Fill c with the documented defaults. */
void dpg_conf_init(struct dpg_conf *c);

/* Apply one "key=value" argument.  Unknown keys and malformed values fail
 * with a message naming the argument and the accepted form. */
int dpg_conf_parse_arg(struct dpg_conf *c, const char *arg, struct dpg_err *err);

/* dpg_conf_init + every argument of a plugstack.conf line (ac, av). */
int dpg_conf_parse(struct dpg_conf *c, int ac, char **av, struct dpg_err *err);

/* MASTER_ADDR for a node name under the master_addr= rule. */
int dpg_conf_master_addr(const struct dpg_conf *c, const char *node,
			 char *buf, size_t len, struct dpg_err *err);

#endif
