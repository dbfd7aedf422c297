/* sha256.h - SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), written for the
 * store's challenge-response authentication; plus a constant-time compare. */
#ifndef DPG_LIB_SHA256_H
#define DPG_LIB_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define DPG_SHA256_LEN 32	/* bytes in a digest */
#define DPG_SHA256_BLOCK 64	/* bytes in a compression block */

struct dpg_sha256 {
	uint32_t h[8];
	uint64_t total;			/* bytes hashed so far */
	uint8_t buf[DPG_SHA256_BLOCK];
	size_t used;			/* bytes pending in buf */
};

void dpg_sha256_init(struct dpg_sha256 *c);
void dpg_sha256_update(struct dpg_sha256 *c, const void *data, size_t len);
/* Write the digest and wipe the context. */
void dpg_sha256_final(struct dpg_sha256 *c, uint8_t out[DPG_SHA256_LEN]);
void dpg_sha256(const void *data, size_t len, uint8_t out[DPG_SHA256_LEN]);

/* Incremental HMAC-SHA256: init with the key, feed the message in parts. */
struct dpg_hmac_sha256 {
	struct dpg_sha256 inner, outer;
};

void dpg_hmac_sha256_init(struct dpg_hmac_sha256 *c, const void *key, size_t klen);
void dpg_hmac_sha256_update(struct dpg_hmac_sha256 *c, const void *data, size_t len);
/* Write the MAC and wipe the context (key material included). */
void dpg_hmac_sha256_final(struct dpg_hmac_sha256 *c, uint8_t out[DPG_SHA256_LEN]);
void dpg_hmac_sha256(const void *key, size_t klen, const void *msg, size_t mlen,
		     uint8_t out[DPG_SHA256_LEN]);

/* 1 if the n bytes at a and b are equal, else 0; the time taken depends on
 * n only, never on where the buffers differ. */
int dpg_ct_equal(const void *a, const void *b, size_t n);

#endif
