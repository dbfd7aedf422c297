/* SPDX-License-Identifier: BSD-3-Clause */
/* hello.h - the CPU backend's rendezvous on the wire: the address record a
 * rank publishes in the store, and the hello that opens every TCP hop. */
#ifndef DPG_LIB_CPU_HELLO_H
#define DPG_LIB_CPU_HELLO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define DPG_CPU_WIRE_MAGIC "dpgcpu1"
#define DPG_CPU_HOST_MAX 256

/* What a rank publishes in the store under "<comm name>/cpu/<rank>". */
struct dpg_cpu_wire {
	char magic[8];
	uint32_t port;		/* our data port (the hops connect to it) */
	int32_t pid;
	uint64_t token;		/* peers must present it when they connect */
	uint64_t pidns;		/* inode of /proc/self/ns/pid */
	uint64_t cpus[16];	/* affinity mask (CPUs 0..1023) */
	char uts[64];		/* gethostname: the physical machine */
	char host[DPG_CPU_HOST_MAX];
	char node[DPG_CPU_HOST_MAX];
};

/* A TCP hop opens with a handshake that no stranger can pass.  The rank
 * that accepts sends a challenge (magic + a fresh nonce); the rank that
 * connects answers with a hello: magic, channel, its rank, the rank it
 * connects to, and an HMAC-SHA256 over all of it, the communicator's name,
 * the acceptor's published token and the nonce, keyed by the job secret; the
 * acceptor checks it and sends the ack.  Integers are little-endian. */
#define DPG_CPU_CHALLENGE_MAGIC "dpgchal1"
#define DPG_CPU_HELLO_MAGIC "dpghelo1"
#define DPG_CPU_ACK_MAGIC "dpgcpuok"
#define DPG_CPU_NONCE_LEN 16
#define DPG_CPU_MAC_LEN 32
#define DPG_CPU_CHALLENGE_LEN (8 + DPG_CPU_NONCE_LEN)
#define DPG_CPU_HELLO_LEN (8 + 4 + 4 + 4 + DPG_CPU_MAC_LEN)	/* magic chan from to mac */
#define DPG_CPU_ACK_LEN 8
#define DPG_CPU_KEY_MAX 64

/* What every hello of one communicator is keyed and bound to. */
struct dpg_cpu_hello_key {
	uint8_t key[DPG_CPU_KEY_MAX];	/* the job secret's bytes */
	size_t len;			/* 0: no secret (the token alone binds) */
	const char *comm;		/* the communicator's name */
};

/* The key from the job secret in hex (NULL or "": none, for callers without
 * a job secret: the hello is then bound by the acceptor's token alone, which
 * only the store's members can read).  -DPG_ERR_AUTH on a malformed secret. */
int dpg_cpu_hello_key(struct dpg_cpu_hello_key *k, const char *secret_hex, const char *comm,
		      struct dpg_err *err);
void dpg_cpu_hello_key_wipe(struct dpg_cpu_hello_key *k);

/* The challenge with a fresh nonce: 0, or -1 (getrandom failed). */
int dpg_cpu_challenge_make(uint8_t ch[DPG_CPU_CHALLENGE_LEN]);

/* Our hello on channel chan from rank `from` to rank `to` (whose published
 * token is to_token), answering challenge ch: false when ch is no challenge. */
bool dpg_cpu_hello_make(const struct dpg_cpu_hello_key *k, const uint8_t *ch, unsigned chan,
			int from, int to, uint64_t to_token, uint8_t h[DPG_CPU_HELLO_LEN]);

/* Check hello h sent to us (rank me, token my_token) after challenge ch:
 * true with *chan and *from filled when magic and MAC are right. */
bool dpg_cpu_hello_check(const struct dpg_cpu_hello_key *k, const uint8_t *ch, int me,
			 uint64_t my_token, const uint8_t *h, unsigned *chan, int *from);

#endif
