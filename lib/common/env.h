/* SPDX-License-Identifier: BSD-3-Clause */
/* env.h - a task's environment as dpg sees it: a lookup function to read
 * it and a fixed table of the variables dpg exports. */
#ifndef DPG_LIB_ENV_H
#define DPG_LIB_ENV_H

#include <stddef.h>

#include "err.h"

#define DPG_ENV_MAX 64
#define DPG_ENV_NAME_MAX 40
#define DPG_ENV_VALUE_MAX 1024

/* How a lookup function returns a variable of the task's environment
 * (NULL = unset).  The plugin wraps spank_getenv, dpg-plan a table. */
typedef const char *(*dpg_getenv_fn)(void *ctx, const char *name);

struct dpg_env_var {
	char name[DPG_ENV_NAME_MAX];
	char value[DPG_ENV_VALUE_MAX];
};

struct dpg_env {
	size_t n;
	struct dpg_env_var v[DPG_ENV_MAX];
	char notice[DPG_ERR_MSG_MAX];	/* non-empty: tell the user once */
};

/* Append name=printf(fmt, ...) to out; -1 if the table or value is full. */
int dpg_env_add(struct dpg_env *out, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Value of name in env, or NULL. */
const char *dpg_env_get(const struct dpg_env *env, const char *name);

#endif
