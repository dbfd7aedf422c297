/* SPDX-License-Identifier: BSD-3-Clause */
/* hello.c - the authenticated hello of the CPU backend's TCP hops: the key
 * from the job secret, the challenge, and the HMAC that binds a hello to it. */
#include "hello.h"

#include <string.h>
#include <sys/random.h>

#include "le.h"
#include "digest.h"
#include "store.h"

#define HELLO_LABEL "dpg cpu hello v1"	/* domain separation from the store's MACs */

int dpg_cpu_hello_key(struct dpg_cpu_hello_key *k, const char *secret_hex, const char *comm,
		      struct dpg_err *err)
{
	memset(k, 0, sizeof(*k));
	k->comm = comm;
	if (secret_hex == NULL || *secret_hex == '\0')
		return 0;
	if (dpg_secret_parse(secret_hex, k->key, sizeof(k->key), &k->len, err) != 0) {
		dpg_cpu_hello_key_wipe(k);
		dpg_err_prefix(err, "cpu backend");
		return -DPG_ERR_AUTH;
	}
	return 0;
}

void dpg_cpu_hello_key_wipe(struct dpg_cpu_hello_key *k)
{
	explicit_bzero(k->key, sizeof(k->key));
	k->len = 0;
}

int dpg_cpu_challenge_make(uint8_t ch[DPG_CPU_CHALLENGE_LEN])
{
	memcpy(ch, DPG_CPU_CHALLENGE_MAGIC, 8);
	return getrandom(ch + 8, DPG_CPU_NONCE_LEN, GRND_NONBLOCK) == DPG_CPU_NONCE_LEN ? 0 : -1;
}

/* MAC = HMAC(secret, label | comm | 0 | hello header | to's token | nonce).
 * False when libcrypto failed (the hello is then neither sent nor accepted). */
static bool hello_mac(const struct dpg_cpu_hello_key *k, const uint8_t *ch, const uint8_t *h,
		      uint64_t to_token, uint8_t mac[DPG_CPU_MAC_LEN])
{
	struct dpg_hmac_sha256 c;
	uint8_t tok[8];

	dpg_le_put64(tok, to_token);
	dpg_hmac_sha256_init(&c, k->key, k->len);
	dpg_hmac_sha256_update(&c, HELLO_LABEL, sizeof(HELLO_LABEL));
	dpg_hmac_sha256_update(&c, k->comm, strlen(k->comm) + 1);
	dpg_hmac_sha256_update(&c, h, DPG_CPU_HELLO_LEN - DPG_CPU_MAC_LEN);
	dpg_hmac_sha256_update(&c, tok, sizeof(tok));
	dpg_hmac_sha256_update(&c, ch + 8, DPG_CPU_NONCE_LEN);
	return dpg_hmac_sha256_final(&c, mac) == 0;
}

bool dpg_cpu_hello_make(const struct dpg_cpu_hello_key *k, const uint8_t *ch, unsigned chan,
			int from, int to, uint64_t to_token, uint8_t h[DPG_CPU_HELLO_LEN])
{
	if (memcmp(ch, DPG_CPU_CHALLENGE_MAGIC, 8) != 0)
		return false;
	memcpy(h, DPG_CPU_HELLO_MAGIC, 8);
	dpg_le_put32(h + 8, chan);
	dpg_le_put32(h + 12, (uint32_t)from);
	dpg_le_put32(h + 16, (uint32_t)to);
	return hello_mac(k, ch, h, to_token, h + 20);
}

bool dpg_cpu_hello_check(const struct dpg_cpu_hello_key *k, const uint8_t *ch, int me,
			 uint64_t my_token, const uint8_t *h, unsigned *chan, int *from)
{
	uint8_t mac[DPG_CPU_MAC_LEN];
	bool ok;

	if (memcmp(h, DPG_CPU_HELLO_MAGIC, 8) != 0 || (int32_t)dpg_le_get32(h + 16) != me)
		return false;
	ok = hello_mac(k, ch, h, my_token, mac) &&
	     dpg_ct_equal(mac, h + 20, DPG_CPU_MAC_LEN) == 1;
	explicit_bzero(mac, sizeof(mac));
	if (!ok)
		return false;
	*chan = dpg_le_get32(h + 8);
	*from = (int32_t)dpg_le_get32(h + 12);
	return true;
}
