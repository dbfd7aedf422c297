/* SPDX-License-Identifier: BSD-3-Clause */
/* ckhash.c - the checkpoint digest by format version: SHA-256 through
 * digest.h (OpenSSL) for version 1, XXH3-128 from libxxhash for version 2. */
#include "ckhash.h"

#include <string.h>
#include <xxhash.h>

size_t dpg_ckhash_len(uint32_t version)
{
	switch (version) {
	case 1:
		return DPG_SHA256_LEN;
	case 2:
		return sizeof(XXH128_canonical_t);
	default:
		return 0;
	}
}

const char *dpg_ckhash_name(uint32_t version)
{
	return version == 1 ? "SHA-256" : version == 2 ? "XXH3-128" : "unknown digest";
}

int dpg_ckhash_init(struct dpg_ckhash *h, uint32_t version, struct dpg_err *err)
{
	memset(h, 0, sizeof(*h));
	h->version = version;
	switch (version) {
	case 1:
		dpg_sha256_init(&h->sha);
		return 0;
	case 2:
		h->xxh = XXH3_createState();
		if (h->xxh == NULL)
			return dpg_errs(err, DPG_ERR_NOMEM, "out of memory for an XXH3 state");
		if (XXH3_128bits_reset(h->xxh) != XXH_OK) {
			dpg_ckhash_drop(h);
			return dpg_errs(err, DPG_ERR_SYSTEM, "libxxhash: XXH3_128bits_reset failed");
		}
		return 0;
	default:
		return dpg_errf(err, "checkpoint format version %u has no digest this build knows",
				version);
	}
}

void dpg_ckhash_update(struct dpg_ckhash *h, const void *data, size_t len)
{
	if (h->version == 1)
		dpg_sha256_update(&h->sha, data, len);
	else if (h->xxh != NULL)
		(void)XXH3_128bits_update(h->xxh, data, len);
}

int dpg_ckhash_final(struct dpg_ckhash *h, uint8_t out[DPG_CKHASH_MAX], struct dpg_err *err)
{
	XXH128_canonical_t c;

	if (h->version == 1) {
		if (dpg_sha256_final(&h->sha, out) != 0)
			return dpg_errs(err, DPG_ERR_SYSTEM, "libcrypto failed computing a SHA-256");
		return 0;
	}
	if (h->version != 2 || h->xxh == NULL)
		return dpg_errf(err, "checkpoint digest used before init");
	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(h->xxh));
	memcpy(out, c.digest, sizeof(c.digest));
	return 0;
}

void dpg_ckhash_drop(struct dpg_ckhash *h)
{
	if (h->version == 1)
		dpg_sha256_drop(&h->sha);
	if (h->xxh != NULL)
		(void)XXH3_freeState(h->xxh);
	h->xxh = NULL;
}

int dpg_ckhash_once(uint32_t version, const void *data, size_t len,
		    uint8_t out[DPG_CKHASH_MAX], struct dpg_err *err)
{
	struct dpg_ckhash h;
	int rc;

	if ((rc = dpg_ckhash_init(&h, version, err)) != 0)
		return rc;
	dpg_ckhash_update(&h, data, len);
	rc = dpg_ckhash_final(&h, out, err);
	dpg_ckhash_drop(&h);
	return rc;
}
