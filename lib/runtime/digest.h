/* SPDX-License-Identifier: BSD-3-Clause */
/* digest.h - SHA-256, HMAC-SHA256 and a constant-time compare for the store's
 * authentication and the checkpoints' checksums; OpenSSL stays behind it. */
#ifndef DPG_LIB_DIGEST_H
#define DPG_LIB_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#define DPG_SHA256_LEN 32	/* bytes in a digest (and in an HMAC-SHA256) */

/* Every function returning int returns 0, or -DPG_ERR_SYSTEM when libcrypto
 * failed (out of memory, or no SHA-256 provider: a broken OpenSSL setup).
 * An incremental context that failed at init or update stays failed and
 * reports it at final; final and drop free it (drop is for a context given
 * up before final; both may be called again, and drop after final). */
struct dpg_sha256 {
	void *ctx;			/* EVP_MD_CTX */
	int bad;
};

void dpg_sha256_init(struct dpg_sha256 *c);
void dpg_sha256_update(struct dpg_sha256 *c, const void *data, size_t len);
int dpg_sha256_final(struct dpg_sha256 *c, uint8_t out[DPG_SHA256_LEN]);
void dpg_sha256_drop(struct dpg_sha256 *c);
int dpg_sha256(const void *data, size_t len, uint8_t out[DPG_SHA256_LEN]);

/* Incremental HMAC-SHA256 (RFC 2104): init with the key, feed the message in
 * parts; the same failure rules. */
struct dpg_hmac_sha256 {
	void *ctx;			/* EVP_MAC_CTX */
	int bad;
};

void dpg_hmac_sha256_init(struct dpg_hmac_sha256 *c, const void *key, size_t klen);
void dpg_hmac_sha256_update(struct dpg_hmac_sha256 *c, const void *data, size_t len);
int dpg_hmac_sha256_final(struct dpg_hmac_sha256 *c, uint8_t out[DPG_SHA256_LEN]);
void dpg_hmac_sha256_drop(struct dpg_hmac_sha256 *c);
int dpg_hmac_sha256(const void *key, size_t klen, const void *msg, size_t mlen,
		    uint8_t out[DPG_SHA256_LEN]);

/* A thread that used these functions is about to end: free libcrypto's
 * per-thread state now (its error queue), not at process exit. */
void dpg_digest_thread_stop(void);

/* 1 if the n bytes at a and b are equal, else 0; the time taken depends on
 * n only, never on where the buffers differ. */
int dpg_ct_equal(const void *a, const void *b, size_t n);

#endif
