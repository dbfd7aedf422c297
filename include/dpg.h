/* dpg.h - public API of libdpg, the runtime companion of the dpg SPANK plugin.
 * Plain C, every call returns a status; see libdpg(3). */
#ifndef DPG_H
#define DPG_H

#ifdef __cplusplus
extern "C" {
#endif

#define DPG_VERSION_MAJOR 0
#define DPG_VERSION_MINOR 1
#define DPG_VERSION_PATCH 0
#define DPG_VERSION ((DPG_VERSION_MAJOR * 10000) + (DPG_VERSION_MINOR * 100) + \
		     DPG_VERSION_PATCH)

/* Version of the environment contract (DPG_CONTRACT) this header reads. */
#define DPG_CONTRACT_VERSION 1

/* The library's version as "MAJOR.MINOR.PATCH" (static storage; thread-safe). */
const char *dpg_version(void);

#ifdef __cplusplus
}
#endif

#endif
