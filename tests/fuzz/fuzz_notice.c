/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_notice.c - libFuzzer harness for what a CPU-backend peer can send
 * before it is trusted: failure notices and failure words (lib/runtime/cpu/
 * shm.c's dpg_fail_valid / dpg_fail_format, the check ring.c applies to every
 * notice) and the authenticated ring hello (lib/runtime/cpu/hello.c).
 * Input: byte 0 picks the communicator size (1..64), then a notice (why,
 * culprit, reporter as little-endian int32), a challenge and a hello. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hello.h"
#include "le.h"
#include "shm.h"

#define SECRET "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

static void die(const char *what)
{
	fprintf(stderr, "fuzz_notice: %s\n", what);
	abort();
}

/* A notice is used only once valid, and then names real ranks. */
static void notice(const uint8_t *p, int n)
{
	static const char *hosts[64];
	struct dpg_fail f = {
		.why = (int32_t)dpg_le_get32(p),
		.culprit = (int32_t)dpg_le_get32(p + 4),
		.reporter = (int32_t)dpg_le_get32(p + 8),
	};
	struct dpg_err e = { "" };
	int rc;

	for (int i = 0; i < 64; i++)
		hosts[i] = "host";
	if (!dpg_fail_valid(&f, n))
		return;
	if (f.culprit >= n || f.reporter >= n || f.culprit < -1 || f.reporter < -1)
		die("dpg_fail_valid accepted an out-of-range rank");
	rc = dpg_fail_format(&f, 0, hosts, &e);
	if (rc >= 0)
		die("a failure formatted as success");
	if (memchr(e.msg, '\0', sizeof(e.msg)) == NULL || e.msg[0] == '\0')
		die("failure message empty or not terminated");
}

/* A hello nobody made with the key is refused; one made with it passes. */
static void hello(const uint8_t *ch, const uint8_t *h, uint64_t token)
{
	struct dpg_cpu_hello_key k;
	struct dpg_err e = { "" };
	uint8_t mine[DPG_CPU_HELLO_LEN];
	unsigned chan = 0;
	int from = 0, me = (int)(dpg_le_get32(h + 16) & 7);

	if (dpg_cpu_hello_key(&k, SECRET, "w", &e) != 0)
		die(e.msg);
	/* accepting arbitrary bytes means the fuzzer forged an HMAC-SHA256:
	 * the hello must then be exactly the one the key makes */
	if (dpg_cpu_hello_check(&k, ch, me, token, h, &chan, &from) &&
	    (!dpg_cpu_hello_make(&k, ch, chan, from, me, token, mine) ||
	     memcmp(mine, h, DPG_CPU_HELLO_LEN) != 0))
		die("a forged hello was accepted");
	if (dpg_cpu_hello_make(&k, ch, h[0] & 1, (int)(h[1] & 7), me, token, mine) &&
	    !dpg_cpu_hello_check(&k, ch, me, token, mine, &chan, &from))
		die("a hello made with the key was refused");
	dpg_cpu_hello_key_wipe(&k);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const size_t need = 1 + 12 + DPG_CPU_CHALLENGE_LEN + DPG_CPU_HELLO_LEN + 8;

	if (size < need)
		return 0;
	notice(data + 1, 1 + data[0] % 64);
	hello(data + 13, data + 13 + DPG_CPU_CHALLENGE_LEN,
	      dpg_le_get64(data + 13 + DPG_CPU_CHALLENGE_LEN + DPG_CPU_HELLO_LEN));
	return 0;
}
