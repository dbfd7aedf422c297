/* SPDX-License-Identifier: BSD-3-Clause */
/* mlp_dev.c - examples/train's side of its device module (mlp_dev.h): find mlp-cuda.so, dlopen it,
 * check its table; no CUDA here, so train runs where CUDA is not installed. */
#include "mlp_dev.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* dir of the running program (no trailing slash) into buf: 0, or -1. */
static int exe_dir(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	char *slash;

	if (n <= 0 || (size_t)n >= len - 1)
		return -1;
	buf[n] = '\0';
	if ((slash = strrchr(buf, '/')) == NULL)
		return -1;
	*slash = '\0';
	return 0;
}

const char *mlp_dev_find(char *buf, size_t len)
{
	static const char *const where[] = { "/" MLP_DEV_FILE, "/.libs/" MLP_DEV_FILE };
	const char *env = getenv("DPG_MLP_CUDA_MODULE");
	char dir[PATH_MAX];

	if (env != NULL && *env != '\0') {
		snprintf(buf, len, "%s", env);
		return buf;
	}
	if (exe_dir(dir, sizeof(dir)) != 0)
		return NULL;
	for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++) {
		int n = snprintf(buf, len, "%s%s", dir, where[i]);

		if (n > 0 && (size_t)n < len && access(buf, R_OK) == 0)
			return buf;
	}
	return NULL;
}

static const struct mlp_dev_ops *check(const char *path, const struct mlp_dev_ops *t, char *msg,
				       size_t msg_len)
{
	if (t == NULL) {
		snprintf(msg, msg_len, "%s: " MLP_DEV_ENTRY "() returned no table", path);
		return NULL;
	}
	if (t->abi != MLP_DEV_ABI || t->size < sizeof(*t)) {
		snprintf(msg, msg_len, "%s has ABI %u (table of %u bytes), this train needs %u: "
			 "rebuild them together", path, (unsigned)t->abi, (unsigned)t->size,
			 (unsigned)MLP_DEV_ABI);
		return NULL;
	}
	return t;
}

const struct mlp_dev_ops *mlp_dev_load(const char *path, char *msg, size_t msg_len)
{
	mlp_dev_entry_fn *entry;
	const char *why;
	void *h;

	/* RTLD_NODELETE: libcudart and cuBLAS keep threads and exit handlers */
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (h == NULL) {
		why = dlerror();
		snprintf(msg, msg_len, "cannot load %s: %s", path, why ? why : "dlopen failed");
		return NULL;
	}
	(void)dlerror();
	*(void **)&entry = dlsym(h, MLP_DEV_ENTRY);
	if (entry == NULL) {
		why = dlerror();
		snprintf(msg, msg_len, "%s: %s", path, why ? why : "no " MLP_DEV_ENTRY);
		dlclose(h);
		return NULL;
	}
	return check(path, entry(), msg, msg_len);
}
