/* sha256.c - SHA-256 after FIPS 180-4 section 6.2 and HMAC after RFC 2104,
 * small and portable (byte-wise big-endian loads, no tables beyond K). */
#include "sha256.h"

#include <string.h>

/* FIPS 180-4 4.2.2: the first 32 bits of the fractional parts of the cube
 * roots of the first 64 primes. */
static const uint32_t K[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
	0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
	0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
	0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
	0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
	0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
	0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
	0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static inline uint32_t ror(uint32_t x, unsigned n)
{
	return (x >> n) | (x << (32 - n));
}

static inline uint32_t load_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void store_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static void compress(uint32_t h[8], const uint8_t *block)
{
	uint32_t w[64], a, b, c, d, e, f, g, k;
	int t;

	for (t = 0; t < 16; t++)
		w[t] = load_be32(block + 4 * t);
	for (t = 16; t < 64; t++) {
		uint32_t s0 = ror(w[t - 15], 7) ^ ror(w[t - 15], 18) ^ (w[t - 15] >> 3);
		uint32_t s1 = ror(w[t - 2], 17) ^ ror(w[t - 2], 19) ^ (w[t - 2] >> 10);

		w[t] = w[t - 16] + s0 + w[t - 7] + s1;
	}
	a = h[0]; b = h[1]; c = h[2]; d = h[3];
	e = h[4]; f = h[5]; g = h[6]; k = h[7];
	for (t = 0; t < 64; t++) {
		uint32_t S1 = ror(e, 6) ^ ror(e, 11) ^ ror(e, 25);
		uint32_t ch = (e & f) ^ (~e & g);
		uint32_t t1 = k + S1 + ch + K[t] + w[t];
		uint32_t S0 = ror(a, 2) ^ ror(a, 13) ^ ror(a, 22);
		uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
		uint32_t t2 = S0 + maj;

		k = g; g = f; f = e; e = d + t1;
		d = c; c = b; b = a; a = t1 + t2;
	}
	h[0] += a; h[1] += b; h[2] += c; h[3] += d;
	h[4] += e; h[5] += f; h[6] += g; h[7] += k;
}

void dpg_sha256_init(struct dpg_sha256 *c)
{
	/* FIPS 180-4 5.3.3: fractional parts of the square roots of the first
	 * eight primes. */
	static const uint32_t iv[8] = {
		0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
		0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
	};

	memcpy(c->h, iv, sizeof(iv));
	c->total = 0;
	c->used = 0;
}

void dpg_sha256_update(struct dpg_sha256 *c, const void *data, size_t len)
{
	const uint8_t *p = data;

	c->total += len;
	if (c->used > 0) {
		size_t take = DPG_SHA256_BLOCK - c->used;

		if (take > len)
			take = len;
		memcpy(c->buf + c->used, p, take);
		c->used += take;
		p += take;
		len -= take;
		if (c->used < DPG_SHA256_BLOCK)
			return;
		compress(c->h, c->buf);
		c->used = 0;
	}
	for (; len >= DPG_SHA256_BLOCK; p += DPG_SHA256_BLOCK, len -= DPG_SHA256_BLOCK)
		compress(c->h, p);
	if (len > 0) {
		memcpy(c->buf, p, len);
		c->used = len;
	}
}

void dpg_sha256_final(struct dpg_sha256 *c, uint8_t out[DPG_SHA256_LEN])
{
	uint64_t bits = c->total * 8;
	int i;

	/* pad: 0x80, zeros up to 56 mod 64, then the bit length big-endian */
	c->buf[c->used++] = 0x80;
	if (c->used > 56) {
		memset(c->buf + c->used, 0, DPG_SHA256_BLOCK - c->used);
		compress(c->h, c->buf);
		c->used = 0;
	}
	memset(c->buf + c->used, 0, 56 - c->used);
	store_be32(c->buf + 56, (uint32_t)(bits >> 32));
	store_be32(c->buf + 60, (uint32_t)bits);
	compress(c->h, c->buf);
	for (i = 0; i < 8; i++)
		store_be32(out + 4 * i, c->h[i]);
	explicit_bzero(c, sizeof(*c));
}

void dpg_sha256(const void *data, size_t len, uint8_t out[DPG_SHA256_LEN])
{
	struct dpg_sha256 c;

	dpg_sha256_init(&c);
	dpg_sha256_update(&c, data, len);
	dpg_sha256_final(&c, out);
}

void dpg_hmac_sha256_init(struct dpg_hmac_sha256 *c, const void *key, size_t klen)
{
	uint8_t k[DPG_SHA256_BLOCK], pad[DPG_SHA256_BLOCK];
	size_t i;

	/* RFC 2104: keys longer than a block are hashed first, then zero-padded */
	memset(k, 0, sizeof(k));
	if (klen > DPG_SHA256_BLOCK)
		dpg_sha256(key, klen, k);
	else if (klen > 0)
		memcpy(k, key, klen);
	for (i = 0; i < sizeof(pad); i++)
		pad[i] = k[i] ^ 0x36;
	dpg_sha256_init(&c->inner);
	dpg_sha256_update(&c->inner, pad, sizeof(pad));
	for (i = 0; i < sizeof(pad); i++)
		pad[i] = k[i] ^ 0x5c;
	dpg_sha256_init(&c->outer);
	dpg_sha256_update(&c->outer, pad, sizeof(pad));
	explicit_bzero(k, sizeof(k));
	explicit_bzero(pad, sizeof(pad));
}

void dpg_hmac_sha256_update(struct dpg_hmac_sha256 *c, const void *data, size_t len)
{
	dpg_sha256_update(&c->inner, data, len);
}

void dpg_hmac_sha256_final(struct dpg_hmac_sha256 *c, uint8_t out[DPG_SHA256_LEN])
{
	uint8_t ih[DPG_SHA256_LEN];

	dpg_sha256_final(&c->inner, ih);
	dpg_sha256_update(&c->outer, ih, sizeof(ih));
	dpg_sha256_final(&c->outer, out);
	explicit_bzero(ih, sizeof(ih));
}

void dpg_hmac_sha256(const void *key, size_t klen, const void *msg, size_t mlen,
		     uint8_t out[DPG_SHA256_LEN])
{
	struct dpg_hmac_sha256 c;

	dpg_hmac_sha256_init(&c, key, klen);
	dpg_hmac_sha256_update(&c, msg, mlen);
	dpg_hmac_sha256_final(&c, out);
}

int dpg_ct_equal(const void *a, const void *b, size_t n)
{
	const volatile uint8_t *x = a, *y = b;
	uint8_t d = 0;
	size_t i;

	for (i = 0; i < n; i++)
		d |= x[i] ^ y[i];
	/* 1 when d == 0, without a data-dependent branch */
	return (int)(1 & (((unsigned)d - 1) >> 8));
}
