/* SPDX-License-Identifier: BSD-3-Clause */
/* test_digest.c - unit tests for lib/runtime/digest.c (libcrypto behind it): the
 * FIPS 180-2 SHA-256 vectors, incremental updates split at every offset, the
 * RFC 4231 HMAC-SHA256 vectors (one-shot and incremental), failure reporting
 * and dpg_ct_equal. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "digest.h"
#include "err.h"

/* Decode a hex string (even length, lower case) into out; returns bytes. */
static size_t unhex(const char *h, uint8_t *out, size_t cap)
{
	size_t n = strlen(h) / 2;

	assert_true(strlen(h) % 2 == 0 && n <= cap);
	for (size_t i = 0; i < n; i++) {
		unsigned v;

		assert_int_equal(sscanf(h + 2 * i, "%2x", &v), 1);
		out[i] = (uint8_t)v;
	}
	return n;
}

static void assert_digest(const uint8_t *got, const char *hex)
{
	uint8_t want[DPG_SHA256_LEN];

	assert_int_equal(unhex(hex, want, sizeof(want)), DPG_SHA256_LEN);
	assert_memory_equal(got, want, DPG_SHA256_LEN);
}

#define ABC_DIGEST "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
#define MSG448 "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
#define MSG448_DIGEST "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
#define MILLION_A_DIGEST "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
#define EMPTY_DIGEST "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static void test_fips_vectors(void **state)
{
	uint8_t d[DPG_SHA256_LEN];

	(void)state;
	assert_int_equal(dpg_sha256("abc", 3, d), 0);
	assert_digest(d, ABC_DIGEST);
	assert_int_equal(dpg_sha256(MSG448, strlen(MSG448), d), 0);
	assert_digest(d, MSG448_DIGEST);
	assert_int_equal(dpg_sha256("", 0, d), 0);
	assert_digest(d, EMPTY_DIGEST);
}

/* One million 'a': once in one buffer, once in 1000-byte updates. */
static void test_million_a(void **state)
{
	char *m = malloc(1000000);
	struct dpg_sha256 c;
	uint8_t d[DPG_SHA256_LEN];

	(void)state;
	assert_non_null(m);
	memset(m, 'a', 1000000);
	assert_int_equal(dpg_sha256(m, 1000000, d), 0);
	assert_digest(d, MILLION_A_DIGEST);
	dpg_sha256_init(&c);
	for (int i = 0; i < 1000; i++)
		dpg_sha256_update(&c, m + i * 1000, 1000);
	assert_int_equal(dpg_sha256_final(&c, d), 0);
	assert_digest(d, MILLION_A_DIGEST);
	free(m);
}

/* Every split of a 200-byte message into two updates (and into three, and
 * byte by byte) hashes like the whole; zero-length updates change nothing. */
static void test_incremental_splits(void **state)
{
	uint8_t m[200], whole[DPG_SHA256_LEN], d[DPG_SHA256_LEN];
	struct dpg_sha256 c;

	(void)state;
	for (size_t i = 0; i < sizeof(m); i++)
		m[i] = (uint8_t)(i * 131 + 7);
	assert_int_equal(dpg_sha256(m, sizeof(m), whole), 0);
	for (size_t k = 0; k <= sizeof(m); k++) {
		dpg_sha256_init(&c);
		dpg_sha256_update(&c, m, k);
		dpg_sha256_update(&c, m + k, 0);
		dpg_sha256_update(&c, m + k, sizeof(m) - k);
		assert_int_equal(dpg_sha256_final(&c, d), 0);
		if (memcmp(d, whole, sizeof(d)) != 0)
			fail_msg("split at %zu differs", k);
		for (size_t j = k; j <= sizeof(m); j += 13) {
			dpg_sha256_init(&c);
			dpg_sha256_update(&c, m, k);
			dpg_sha256_update(&c, m + k, j - k);
			dpg_sha256_update(&c, m + j, sizeof(m) - j);
			assert_int_equal(dpg_sha256_final(&c, d), 0);
			if (memcmp(d, whole, sizeof(d)) != 0)
				fail_msg("split at %zu and %zu differs", k, j);
		}
	}
	dpg_sha256_init(&c);
	for (size_t i = 0; i < sizeof(m); i++)
		dpg_sha256_update(&c, m + i, 1);
	assert_int_equal(dpg_sha256_final(&c, d), 0);
	assert_memory_equal(d, whole, sizeof(d));
}

/* Lengths around the padding boundaries (55, 56, 63, 64, 119, 120 bytes)
 * agree between one-shot and a 1-byte-at-a-time hash, and differ from each
 * other. */
static void test_padding_boundaries(void **state)
{
	static const size_t lens[] = { 0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 128 };
	uint8_t m[128], d[DPG_SHA256_LEN], e[DPG_SHA256_LEN], prev[DPG_SHA256_LEN];
	struct dpg_sha256 c;

	(void)state;
	memset(m, 'q', sizeof(m));
	memset(prev, 0, sizeof(prev));
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		assert_int_equal(dpg_sha256(m, lens[i], d), 0);
		dpg_sha256_init(&c);
		for (size_t k = 0; k < lens[i]; k++)
			dpg_sha256_update(&c, m + k, 1);
		assert_int_equal(dpg_sha256_final(&c, e), 0);
		assert_memory_equal(d, e, sizeof(d));
		assert_memory_not_equal(d, prev, sizeof(d));
		memcpy(prev, d, sizeof(d));
	}
}

/* RFC 4231 test cases 1-4, 6 and 7 (case 5 is a truncated MAC). */
struct hmac_case {
	const char *key_hex;
	size_t key_rep;		/* key: key_hex repeated key_rep times */
	const char *data;	/* text, or NULL: data_hex x data_rep */
	const char *data_hex;
	size_t data_rep;
	const char *mac;
};

static const struct hmac_case rfc4231[] = {
	{ "0b", 20, "Hi There", NULL, 0,
	  "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7" },
	{ "4a656665", 1, "what do ya want for nothing?", NULL, 0,
	  "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843" },
	{ "aa", 20, NULL, "dd", 50,
	  "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe" },
	{ "0102030405060708090a0b0c0d0e0f10111213141516171819", 1, NULL, "cd", 50,
	  "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b" },
	{ "aa", 131, "Test Using Larger Than Block-Size Key - Hash Key First",
	  NULL, 0,
	  "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54" },
	{ "aa", 131, "This is a test using a larger than block-size key and a larger "
		     "than block-size data. The key needs to be hashed before being "
		     "used by the HMAC algorithm.", NULL, 0,
	  "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2" },
};

static size_t expand(const char *hex, size_t rep, uint8_t *out, size_t cap)
{
	uint8_t one[64];
	size_t n = unhex(hex, one, sizeof(one));

	assert_true(n * rep <= cap);
	for (size_t i = 0; i < rep; i++)
		memcpy(out + i * n, one, n);
	return n * rep;
}

static void test_hmac_rfc4231(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(rfc4231) / sizeof(rfc4231[0]); i++) {
		const struct hmac_case *t = &rfc4231[i];
		uint8_t key[200], data[200], mac[DPG_SHA256_LEN];
		size_t klen = expand(t->key_hex, t->key_rep, key, sizeof(key)), dlen;
		struct dpg_hmac_sha256 c;

		if (t->data != NULL) {
			dlen = strlen(t->data);
			memcpy(data, t->data, dlen);
		} else {
			dlen = expand(t->data_hex, t->data_rep, data, sizeof(data));
		}
		assert_int_equal(dpg_hmac_sha256(key, klen, data, dlen, mac), 0);
		assert_digest(mac, t->mac);
		/* incremental, split at every offset */
		for (size_t k = 0; k <= dlen; k++) {
			dpg_hmac_sha256_init(&c, key, klen);
			dpg_hmac_sha256_update(&c, data, k);
			dpg_hmac_sha256_update(&c, data + k, dlen - k);
			assert_int_equal(dpg_hmac_sha256_final(&c, mac), 0);
			assert_digest(mac, t->mac);
		}
	}
}

/* RFC 4231 4.6: a MAC truncated to 128 bits (the first half of the full one). */
static void test_hmac_truncated(void **state)
{
	uint8_t key[20], mac[DPG_SHA256_LEN], want[16];

	(void)state;
	memset(key, 0x0c, sizeof(key));
	assert_int_equal(dpg_hmac_sha256(key, sizeof(key), "Test With Truncation", 20, mac), 0);
	assert_int_equal(unhex("a3b6167473100ee06e0c796c2955552b", want, sizeof(want)), 16);
	assert_memory_equal(mac, want, sizeof(want));
}

/* final frees the context (nothing left to wipe or leak: run under valgrind);
 * drop after final and a second final are harmless, and a context used after
 * it was finished or dropped reports the failure instead of a digest. */
static void test_final_frees(void **state)
{
	struct dpg_sha256 c;
	struct dpg_hmac_sha256 h;
	uint8_t d[DPG_SHA256_LEN];

	(void)state;
	dpg_sha256_init(&c);
	dpg_sha256_update(&c, "secret", 6);
	assert_int_equal(dpg_sha256_final(&c, d), 0);
	assert_null(c.ctx);
	dpg_sha256_drop(&c);
	dpg_sha256_update(&c, "more", 4);
	assert_int_equal(dpg_sha256_final(&c, d), -DPG_ERR_SYSTEM);
	dpg_hmac_sha256_init(&h, "key", 3);
	dpg_hmac_sha256_update(&h, "msg", 3);
	assert_int_equal(dpg_hmac_sha256_final(&h, d), 0);
	assert_null(h.ctx);
	assert_int_equal(dpg_hmac_sha256_final(&h, d), -DPG_ERR_SYSTEM);
	/* given up half-way: drop frees it */
	dpg_hmac_sha256_init(&h, "key", 3);
	dpg_hmac_sha256_update(&h, "msg", 3);
	dpg_hmac_sha256_drop(&h);
	dpg_hmac_sha256_drop(&h);
	/* an empty key is a key (RFC 2104 pads it with zeros) */
	assert_int_equal(dpg_hmac_sha256("", 0, "", 0, d), 0);
	assert_digest(d, "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
}

static void test_ct_equal(void **state)
{
	uint8_t a[64], b[64];

	(void)state;
	for (size_t i = 0; i < sizeof(a); i++)
		a[i] = b[i] = (uint8_t)(i ^ 0x5c);
	assert_int_equal(dpg_ct_equal(a, b, sizeof(a)), 1);
	assert_int_equal(dpg_ct_equal(a, b, 0), 1);
	for (size_t i = 0; i < sizeof(a); i++)
		for (int bit = 0; bit < 8; bit++) {
			b[i] ^= (uint8_t)(1u << bit);
			assert_int_equal(dpg_ct_equal(a, b, sizeof(a)), 0);
			assert_int_equal(dpg_ct_equal(a, b, i), 1);	/* before the change */
			b[i] ^= (uint8_t)(1u << bit);
		}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fips_vectors),
		cmocka_unit_test(test_million_a),
		cmocka_unit_test(test_incremental_splits),
		cmocka_unit_test(test_padding_boundaries),
		cmocka_unit_test(test_hmac_rfc4231),
		cmocka_unit_test(test_hmac_truncated),
		cmocka_unit_test(test_final_frees),
		cmocka_unit_test(test_ct_equal),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
