/* SPDX-License-Identifier: BSD-3-Clause */
/* store_wire.c - the rendezvous store's wire codec and HMAC challenge, shared
 * by the server (store_server.c) and the client (store_client.c). */
#include "store_wire.h"
#include "le.h"
#include "store.h"	/* DPG_STORE_KEY_MAX, DPG_STORE_VALUE_MAX, DPG_STORE_SECRET_MAX */

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

void dpg_wire_hdr_put(uint8_t *p, uint8_t op, uint16_t flags, uint32_t id,
		      uint32_t len)
{
	dpg_le_put32(p, DPG_WIRE_MAGIC);
	p[4] = DPG_WIRE_VERSION;
	p[5] = op;
	dpg_le_put16(p + 6, flags);
	dpg_le_put32(p + 8, id);
	dpg_le_put32(p + 12, len);
}

void dpg_wire_hdr_get(const uint8_t *p, struct dpg_wire_hdr *h)
{
	h->magic = dpg_le_get32(p);
	h->version = p[4];
	h->op = p[5];
	h->flags = dpg_le_get16(p + 6);
	h->id = dpg_le_get32(p + 8);
	h->len = dpg_le_get32(p + 12);
}

uint32_t dpg_wire_body_max(uint8_t op)
{
	switch (op) {
	case DPG_OP_AUTH:
		return DPG_WIRE_NONCE + DPG_WIRE_MAC;
	case DPG_OP_SET:
		return 4 + DPG_STORE_KEY_MAX + DPG_STORE_VALUE_MAX;
	case DPG_OP_GET:
	case DPG_OP_DEL:
		return 4 + DPG_STORE_KEY_MAX;
	case DPG_OP_ADD:
		return 4 + DPG_STORE_KEY_MAX + 8;
	case DPG_OP_CAS:
		return 8 + DPG_STORE_KEY_MAX + 2 * DPG_STORE_VALUE_MAX;
	case DPG_OP_WAIT:
		return 4 + DPG_STORE_WAIT_MAX_KEYS * (4 + DPG_STORE_KEY_MAX);
	case DPG_OP_CANCEL:
	case DPG_OP_JOIN:
		return 4;
	default:
		return 0;
	}
}

const char *dpg_wire_op_name(uint8_t op)
{
	static const char *const names[] = {
		"?", "HELLO", "AUTH", "SET", "GET", "ADD", "CAS", "WAIT", "DEL", "CANCEL",
		"JOIN"
	};

	return op <= DPG_OP_MAX ? names[op] : "?";
}

/* The fallback when getrandom is not there (old kernel, seccomp). */
static int urandom(uint8_t *p, size_t n, struct dpg_err *err)
{
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	ssize_t got;
	int e;

	if (fd < 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "no randomness: /dev/urandom: %s",
				strerror(errno));
	got = read(fd, p, n);
	e = errno;
	close(fd);
	if (got != (ssize_t)n)
		return dpg_errs(err, DPG_ERR_SYSTEM, "no randomness: /dev/urandom: %s",
				got < 0 ? strerror(e) : "short read");
	return 0;
}

int dpg_wire_random(void *buf, size_t n, struct dpg_err *err)
{
	uint8_t *p = buf;

	while (n > 0) {
		ssize_t r = getrandom(p, n, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return urandom(p, n, err);
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

int dpg_wire_auth_mac(const struct dpg_wire_key *key, const char *label,
		      const uint8_t *ns, const uint8_t *nc, uint8_t out[DPG_WIRE_MAC])
{
	struct dpg_hmac_sha256 c;

	dpg_hmac_sha256_init(&c, key->k, key->len);
	dpg_hmac_sha256_update(&c, label, strlen(label));
	dpg_hmac_sha256_update(&c, ns, DPG_WIRE_NONCE);
	dpg_hmac_sha256_update(&c, nc, DPG_WIRE_NONCE);
	return dpg_hmac_sha256_final(&c, out);
}

int dpg_wire_check_secret(const uint8_t *secret, size_t len, struct dpg_err *err)
{
	if (secret == NULL || len < DPG_STORE_SECRET_MIN || len > DPG_STORE_SECRET_MAX)
		return dpg_errf(err, "store: the job secret must be %d..%d bytes, not %zu",
				DPG_STORE_SECRET_MIN, DPG_STORE_SECRET_MAX,
				secret == NULL ? 0 : len);
	return 0;
}
