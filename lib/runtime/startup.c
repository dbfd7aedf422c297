/* SPDX-License-Identifier: BSD-3-Clause */
/* startup.c - the startup phases' clock and their one-line report
 * (startup.h). */
#include "startup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "contract_vars.h"

int dpg_startup_parse_plan(const char *v, double *ms, char *how, size_t how_len)
{
	char *end;
	size_t n;

	if (v == NULL || how_len == 0)
		return -1;
	*ms = strtod(v, &end);
	if (end == v || *end != ' ' || !(*ms >= 0 && *ms < 1e9))
		return -1;
	end++;
	n = strspn(end, "abcdefghijklmnopqrstuvwxyz");
	if (n == 0 || end[n] != '\0' || n >= how_len)
		return -1;
	memcpy(how, end, n + 1);
	return 0;
}

void dpg_startup_begin(struct dpg_startup *s, const char *(*get)(const char *))
{
	const char *v = get(DPG_VAR_VERBOSE);

	memset(s, 0, sizeof(*s));
	s->t0_ns = dpg_now_ns();
	s->verbose = v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
	s->plan_ms = -1;
	if (dpg_startup_parse_plan(get(DPG_VAR_STARTUP_PLAN), &s->plan_ms, s->plan_how,
				   sizeof(s->plan_how)) != 0)
		s->plan_ms = -1;
}

int dpg_startup_format(const struct dpg_startup *s, int rank, const char *node,
		       const char *backend, char *buf, size_t len)
{
	char plan[48];
	int n;

	if (s->plan_ms >= 0)
		snprintf(plan, sizeof(plan), "%.1f ms (%s)", s->plan_ms, s->plan_how);
	else
		snprintf(plan, sizeof(plan), "-");
	n = snprintf(buf, len, "dpg: startup rank %d (%s): plan %s, rendezvous %.1f ms, "
		     "backend %.1f ms (%s), first collective %.1f ms (%s)", rank, node, plan,
		     dpg_startup_ms(s->t0_ns, s->joined_ns),
		     dpg_startup_ms(s->joined_ns, s->backend_ns), backend, s->first_ms,
		     s->first_kind[0] ? s->first_kind : "?");
	return n > 0 && (size_t)n < len ? 0 : -1;
}
