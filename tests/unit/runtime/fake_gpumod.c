/* SPDX-License-Identifier: BSD-3-Clause */
/* fake_gpumod.c - stand-ins for dpg-cuda.so in test_gpumod, built by plain
 * rules in tests/unit/local.mk: FAKE_ABSENT_LIB makes a library without
 * an entry point (installed where the loader cannot find it at run time,
 * and as notmod.so);
 * FAKE_NEEDS_ABSENT a module that needs it; FAKE_ABI a module of that ABI. */
#include "gpumod.h"

#ifdef FAKE_ABSENT_LIB
int dpgtest_absent_fn(void);

int dpgtest_absent_fn(void)
{
	return 42;
}
#else
#ifdef FAKE_NEEDS_ABSENT
int dpgtest_absent_fn(void);
#endif

static int no_devices(void)
{
#ifdef FAKE_NEEDS_ABSENT
	return dpgtest_absent_fn() - 42;
#else
	return 0;
#endif
}

static const struct dpg_gpumod table = {
	.abi = FAKE_ABI,
	.size = sizeof(struct dpg_gpumod),
	.built_with = "nothing (test_gpumod's fake)",
	.device_count = no_devices,
};

const struct dpg_gpumod *dpg_gpumod_v3(void);

const struct dpg_gpumod *dpg_gpumod_v3(void)
{
	return &table;
}
#endif
