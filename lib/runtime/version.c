/* SPDX-License-Identifier: BSD-3-Clause */
/* version.c - libdpg's version string.
 * The runtime (dpg_init, collectives) builds on this in later releases. */
#include "dpg.h"

#define DPG_STR2(x) #x
#define DPG_STR(x) DPG_STR2(x)

const char *dpg_version(void)
{
	return DPG_STR(DPG_VERSION_MAJOR) "." DPG_STR(DPG_VERSION_MINOR) "."
	       DPG_STR(DPG_VERSION_PATCH);
}
