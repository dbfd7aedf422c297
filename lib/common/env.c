/* SPDX-License-Identifier: BSD-3-Clause */
/* env.c - the table of variables dpg exports into a task, built by the
 * contract and the binding code and read back by tests and dpg-plan. */
#include "env.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int dpg_env_add(struct dpg_env *out, const char *name, const char *fmt, ...)
{
	struct dpg_env_var *v;
	va_list ap;
	int n;

	if (out->n >= DPG_ENV_MAX || strlen(name) >= sizeof(v->name))
		return -1;
	v = &out->v[out->n];
	snprintf(v->name, sizeof(v->name), "%s", name);
	va_start(ap, fmt);
	n = vsnprintf(v->value, sizeof(v->value), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(v->value))
		return -1;
	out->n++;
	return 0;
}

const char *dpg_env_get(const struct dpg_env *env, const char *name)
{
	for (size_t i = 0; i < env->n; i++)
		if (strcmp(env->v[i].name, name) == 0)
			return env->v[i].value;
	return NULL;
}
