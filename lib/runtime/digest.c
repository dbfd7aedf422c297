/* SPDX-License-Identifier: BSD-3-Clause */
/* digest.c - digest.h over OpenSSL 3's libcrypto: EVP_Digest* for SHA-256,
 * EVP_MAC ("HMAC") for HMAC-SHA256, CRYPTO_memcmp for the compare.
 *
 * Why libcrypto (over libsodium or nettle): it is the library a Debian or RHEL
 * system already has loaded everywhere (ssh, curl, systemd), is maintained
 * with security updates by every distribution, is FIPS-validatable (sites
 * that mandate FIPS get its provider with no code change) and dispatches
 * SHA-256 to the CPU's SHA extensions (SHA-NI, ARMv8 SHA2) at run time.
 * libsodium has no plain streaming SHA-256 in its recommended API and no SHA
 * hardware path; nettle is smaller but has no FIPS story.  Only the
 * non-deprecated OpenSSL 3 API is used (no SHA256_Init, no HMAC_CTX). */
#include "digest.h"

#include <openssl/crypto.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "err.h"

/* ------------------------------------------------------------ SHA-256 */

void dpg_sha256_init(struct dpg_sha256 *c)
{
	EVP_MD_CTX *x = EVP_MD_CTX_new();

	c->ctx = x;
	c->bad = x == NULL || EVP_DigestInit_ex(x, EVP_sha256(), NULL) != 1;
}

void dpg_sha256_update(struct dpg_sha256 *c, const void *data, size_t len)
{
	if (!c->bad && len > 0 && EVP_DigestUpdate(c->ctx, data, len) != 1)
		c->bad = 1;
}

void dpg_sha256_drop(struct dpg_sha256 *c)
{
	EVP_MD_CTX_free(c->ctx);
	c->ctx = NULL;
	c->bad = 1;
}

int dpg_sha256_final(struct dpg_sha256 *c, uint8_t out[DPG_SHA256_LEN])
{
	unsigned int n = 0;
	int ok = !c->bad && EVP_DigestFinal_ex(c->ctx, out, &n) == 1 &&
		 n == DPG_SHA256_LEN;

	dpg_sha256_drop(c);
	return ok ? 0 : -DPG_ERR_SYSTEM;
}

int dpg_sha256(const void *data, size_t len, uint8_t out[DPG_SHA256_LEN])
{
	unsigned int n = 0;

	if (EVP_Digest(data, len, out, &n, EVP_sha256(), NULL) != 1 || n != DPG_SHA256_LEN)
		return -DPG_ERR_SYSTEM;
	return 0;
}

/* ------------------------------------------------------------ HMAC-SHA256 */

void dpg_hmac_sha256_init(struct dpg_hmac_sha256 *c, const void *key, size_t klen)
{
	static const uint8_t nokey;	/* EVP_MAC_init wants a key pointer */
	char digest[] = "SHA256";
	OSSL_PARAM p[] = {
		OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
		OSSL_PARAM_construct_end()
	};
	EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	EVP_MAC_CTX *x = mac != NULL ? EVP_MAC_CTX_new(mac) : NULL;

	EVP_MAC_free(mac);		/* the context holds its own reference */
	c->ctx = x;
	c->bad = x == NULL ||
		 EVP_MAC_init(x, klen > 0 ? key : &nokey, klen, p) != 1;
}

void dpg_hmac_sha256_update(struct dpg_hmac_sha256 *c, const void *data, size_t len)
{
	if (!c->bad && len > 0 && EVP_MAC_update(c->ctx, data, len) != 1)
		c->bad = 1;
}

void dpg_hmac_sha256_drop(struct dpg_hmac_sha256 *c)
{
	EVP_MAC_CTX_free(c->ctx);	/* clears the key material */
	c->ctx = NULL;
	c->bad = 1;
}

int dpg_hmac_sha256_final(struct dpg_hmac_sha256 *c, uint8_t out[DPG_SHA256_LEN])
{
	size_t n = 0;
	int ok = !c->bad && EVP_MAC_final(c->ctx, out, &n, DPG_SHA256_LEN) == 1 &&
		 n == DPG_SHA256_LEN;

	dpg_hmac_sha256_drop(c);
	return ok ? 0 : -DPG_ERR_SYSTEM;
}

int dpg_hmac_sha256(const void *key, size_t klen, const void *msg, size_t mlen,
		    uint8_t out[DPG_SHA256_LEN])
{
	struct dpg_hmac_sha256 c;

	dpg_hmac_sha256_init(&c, key, klen);
	dpg_hmac_sha256_update(&c, msg, mlen);
	return dpg_hmac_sha256_final(&c, out);
}

/* ------------------------------------------------------------ compare */

int dpg_ct_equal(const void *a, const void *b, size_t n)
{
	return CRYPTO_memcmp(a, b, n) == 0;
}

void dpg_digest_thread_stop(void)
{
	OPENSSL_thread_stop();
}
