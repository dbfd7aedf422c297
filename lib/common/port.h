/* SPDX-License-Identifier: BSD-3-Clause */
/* port.h - the MASTER_PORT every task of a step derives on its own from the
 * job and step ids, inside an admin-chosen range (formula in port.c). */
#ifndef DPG_LIB_PORT_H
#define DPG_LIB_PORT_H

#include <stdint.h>

#include "err.h"

/* Default range: below Linux's default ephemeral range (32768-60999) and
 * above the well-known/registered ports most daemons use. */
#define DPG_PORT_DEFAULT_LO 20000
#define DPG_PORT_DEFAULT_HI 32767

struct dpg_port_range {
	uint16_t lo, hi;	/* inclusive */
};

/* Parse "LO-HI" (1024 <= LO <= HI <= 65535). */
int dpg_port_range_parse(const char *s, struct dpg_port_range *r,
			 struct dpg_err *err);

/* Parse a single port "P" (1024..65535): the one port grammar of dpg. */
int dpg_port_parse(const char *s, uint16_t *port, struct dpg_err *err);

/* The same, the message naming the value and why it matters
 * ("invalid WHAT 'x': expected an integer 1024-65535WHY"). */
int dpg_port_parse_named(const char *s, const char *what, const char *why,
			 uint16_t *port, struct dpg_err *err);

/* The step's port: lo + (job_id + step_id * stride(R)) mod R, R = hi-lo+1. */
uint16_t dpg_port_for_step(uint32_t job_id, uint32_t step_id,
			   struct dpg_port_range r);

/* The stride used above (exposed for tests and documentation). */
uint32_t dpg_port_stride(uint32_t range_size);

/* First port of a SLURM_STEP_RESV_PORTS value ("12000-12003" or
 * "12000,12005"). */
int dpg_port_from_resv(const char *s, uint16_t *port, struct dpg_err *err);

#endif
