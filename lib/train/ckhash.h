/* SPDX-License-Identifier: BSD-3-Clause */
/* ckhash.h - the checkpoint files' trailing digest, chosen by format version:
 * version 1 SHA-256 (OpenSSL, read only), version 2 XXH3-128 (libxxhash). */
#ifndef DPG_LIB_CKHASH_H
#define DPG_LIB_CKHASH_H

#include <stddef.h>
#include <stdint.h>

#include "digest.h"
#include "err.h"

#define DPG_CKHASH_MAX 32		/* bytes of the longest digest */
#define DPG_CKHASH_V_MIN 1u		/* the oldest format version read */
#define DPG_CKHASH_V_WRITE 2u		/* the version written */

/* One running digest.  An integrity check against torn writes and bit rot
 * (who can write the directory can rewrite the file and its digest either
 * way): XXH3-128 runs at memory speed, where SHA-256 was the save's and the
 * load's wall (1.8 GB/s on one core with SHA instructions). */
struct dpg_ckhash {
	uint32_t version;
	struct dpg_sha256 sha;		/* version 1 */
	void *xxh;			/* version 2: XXH3_state_t, owned */
};

/* Digest bytes of a format version; 0 for a version this build cannot read. */
size_t dpg_ckhash_len(uint32_t version);
/* "SHA-256" or "XXH3-128", for messages. */
const char *dpg_ckhash_name(uint32_t version);
/* Start a digest for version (readable: dpg_ckhash_len(version) > 0). */
int dpg_ckhash_init(struct dpg_ckhash *h, uint32_t version, struct dpg_err *err);
void dpg_ckhash_update(struct dpg_ckhash *h, const void *data, size_t len);
/* Write the digest (dpg_ckhash_len bytes) to out; 0, or a negated status. */
int dpg_ckhash_final(struct dpg_ckhash *h, uint8_t out[DPG_CKHASH_MAX], struct dpg_err *err);
/* Free what init allocated (safe after final, twice, or on a zeroed h). */
void dpg_ckhash_drop(struct dpg_ckhash *h);
/* The digest of one buffer. */
int dpg_ckhash_once(uint32_t version, const void *data, size_t len,
		    uint8_t out[DPG_CKHASH_MAX], struct dpg_err *err);

#endif
