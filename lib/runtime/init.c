/* SPDX-License-Identifier: BSD-3-Clause */
/* init.c - joining and leaving the job: dpg_init (join.c, the rendezvous
 * store, the greeting of every rank, the backend choice, the world),
 * dpg_finalize and dpg_abort. */
#include "comm.h"
#include "clock.h"
#include "ctx.h"
#include "net.h"	/* dpg_now_ms */
#include "netif.h"	/* dpg_route_addr */
#include "report.h"
#include "stop.h"
#include "store.h"
#include "store_relay.h"
#include "store_wire.h"	/* DPG_WIRE_MAGIC: is it a dpg store? */
#include "xchg.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define KEY_MAX DPG_STORE_KEY_MAX
/* How long rank 0 keeps the store up for ranks leaving dpg_finalize. */
#define FINALIZE_LINGER_MS 10000

/* strlcpy: copy what fits, always terminate. */
static void copy_str(char *dst, size_t len, const char *src)
{
	size_t n = strnlen(src, len - 1);

	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* ------------------------------------------------------------ addresses */

/* The local IPv4 address that routes to host (numeric), via a connected UDP
 * socket (no packet is sent). */
static bool is_loopback(const char *addr)
{
	return strncmp(addr, "127.", 4) == 0;
}

/* Rank 0 must run on the host MASTER_ADDR names: try to bind there. */
static int check_master_local(struct dpg_ctx *ctx, struct dpg_err *e)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL, *a;
	char first[INET_ADDRSTRLEN] = "?";
	int g = getaddrinfo(ctx->j.master_addr, NULL, &hints, &res);

	if (g != 0)
		return dpg_errs(e, DPG_ERR_ENV, "cannot resolve MASTER_ADDR=%s: %s",
				ctx->j.master_addr, gai_strerror(g));
	for (a = res; a != NULL; a = a->ai_next) {
		struct sockaddr_in sa = *(struct sockaddr_in *)a->ai_addr;
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int ok;

		if (a == res)
			inet_ntop(AF_INET, &sa.sin_addr, first, sizeof(first));
		sa.sin_port = 0;
		ok = fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
		if (fd >= 0)
			close(fd);
		if (ok) {
			freeaddrinfo(res);
			return 0;
		}
	}
	freeaddrinfo(res);
	return dpg_errs(e, DPG_ERR_ENV, "MASTER_ADDR=%s (%s) is not an address of "
			"this host (%s), but this process is rank 0: MASTER_ADDR "
			"must name the host that runs rank 0", ctx->j.master_addr,
			first, ctx->node);
}

/* ------------------------------------------------------------ backend choice */

/* This rank's NCCL capability, for the greeting and the backend choice:
 * 0: the CUDA module cannot be loaded (ctx->gpu_why says why), 1: loaded
 * but no usable GPU (or none wanted), 2: usable.  The module is loaded only
 * when NCCL may be chosen and the task may have a GPU. */
static int nccl_cap(struct dpg_ctx *ctx)
{
	struct dpg_err e = { { 0 } };

	ctx->gpu_why[0] = '\0';
	if (ctx->j.backend == DPG_BACKEND_CPU || ctx->j.gpu_hint == 0)
		return ctx->gpu_cap = 1;
	if (dpg_gpumod_open(&ctx->gpu, &e) != 0) {
		copy_str(ctx->gpu_why, sizeof(ctx->gpu_why), e.msg);
		return ctx->gpu_cap = 0;
	}
	return ctx->gpu_cap = ctx->gpu.t->device_count() > 0 ? 2 : 1;
}

/* Why rank r cannot use NCCL (its capability cap < 2). */
static const char *cap_why(const struct dpg_ctx *ctx, int r, int cap)
{
	if (cap == 0 && r == ctx->j.rank && ctx->gpu_why[0] != '\0')
		return ctx->gpu_why;
	return cap == 0 ? "its libdpg cannot load the CUDA module dpg-cuda.so "
			  "(that rank's own error says why)" :
	       cap == 1 ? "it has no usable GPU" : "ok";
}

/* Does the task have a GPU?  Slurm or the user said so (DPG_GPUS,
 * CUDA_VISIBLE_DEVICES), or, when nothing said, the NVIDIA driver's device
 * is there. */
static bool task_has_gpu(const struct dpg_ctx *ctx)
{
	return ctx->j.gpu_hint > 0 ||
	       (ctx->j.gpu_hint < 0 && access("/dev/nvidiactl", F_OK) == 0);
}

/* Auto mode fell back to the CPU backend on a rank with a GPU because the
 * module did not load: one notice line, on each node's first rank. */
static void notice_cpu_fallback(const struct dpg_ctx *ctx)
{
	if (ctx->j.backend != DPG_BACKEND_AUTO || ctx->backend != DPG_BACKEND_CPU ||
	    ctx->gpu_cap != 0 || ctx->j.local_rank > 0 || !task_has_gpu(ctx))
		return;
	fprintf(stderr, "dpg: %s: notice: using the CPU backend: %s\n", ctx->who,
		ctx->gpu_why);
}

static int choose_backend(struct dpg_ctx *ctx, int ncap_min, int min_rank,
			  struct dpg_err *e)
{
	switch (ctx->j.backend) {
	case DPG_BACKEND_CPU:
		ctx->backend = DPG_BACKEND_CPU;
		return 0;
	case DPG_BACKEND_NCCL:
		if (ncap_min < 2)
			return dpg_errs(e, DPG_ERR_UNSUPPORTED, "the NCCL backend was "
					"asked for (DPG_BACKEND or opts.backend) but "
					"rank %d (%s) cannot use it: %s", min_rank,
					dpg_ctx_rank_host(ctx, min_rank),
					cap_why(ctx, min_rank, ncap_min));
		ctx->backend = DPG_BACKEND_NCCL;
		return 0;
	case DPG_BACKEND_AUTO:
		ctx->backend = ncap_min >= 2 ? DPG_BACKEND_NCCL : DPG_BACKEND_CPU;
		return 0;
	}
	return dpg_errf(e, "unknown backend %d", (int)ctx->j.backend);
}

static int pick_device(struct dpg_ctx *ctx, struct dpg_err *e)
{
	ctx->device = ctx->j.device;
	if (ctx->backend != DPG_BACKEND_NCCL || ctx->device >= 0)
		return 0;
	if (ctx->gpu.t->pick_device(ctx->j.gpu_busid[0] ? ctx->j.gpu_busid : NULL,
				    ctx->j.local_rank < 0 ? 0 : ctx->j.local_rank,
				    &ctx->device, e) != 0)
		return -DPG_ERR_BACKEND;
	return 0;
}

/* The backend, its device and the world communicator. */
static int start_world(struct dpg_ctx *ctx, int cap_min, int cap_rank,
		       struct dpg_err *e)
{
	int rc = choose_backend(ctx, cap_min, cap_rank, e);

	if (rc == 0)
		notice_cpu_fallback(ctx);
	if (rc == 0)
		rc = pick_device(ctx, e);
	if (rc == 0)
		rc = dpg_comm_make_world(ctx, e);
	return rc;
}

/* ------------------------------------------------------------ the store */

/* MASTER_ADDR must resolve: DPG_ERR_ENV with one wording on every rank (a
 * transient DNS failure is retried until the deadline). */
static int resolve_master(struct dpg_ctx *ctx, struct dpg_err *e)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;
	int64_t deadline = dpg_now_ms() + ctx->timeout_ms;
	int g;

	while ((g = getaddrinfo(ctx->j.master_addr, NULL, &hints, &res)) == EAI_AGAIN &&
	       dpg_now_ms() < deadline && !dpg_ctx_aborted(ctx))
		usleep(100000);
	if (g != 0)
		return dpg_errs(e, DPG_ERR_ENV, "cannot resolve MASTER_ADDR=%s: %s",
				ctx->j.master_addr, gai_strerror(g));
	freeaddrinfo(res);
	return 0;
}

/* Another process listens on MASTER_PORT (tried the way the store binds). */
static bool port_held(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	bool held;

	if (fd < 0)
		return false;
	held = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
	       bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 &&
	       errno == EADDRINUSE;
	close(fd);
	return held;
}

/* After the store refused us: did a dpg store answer at all?  A dpg store
 * greets every connection with a challenge of its own header; anything else
 * in the first bytes is another service. */
static bool foreign_service(struct dpg_ctx *ctx)
{
	uint8_t b[DPG_WIRE_HDR];
	struct dpg_wire_hdr h;
	int64_t deadline = dpg_now_ms() + 2000;
	int fd = -1;
	bool foreign;

	if (dpg_net_connect(ctx->j.master_addr, ctx->j.master_port, deadline,
			    &ctx->abort_flag, &fd, NULL) != 0)
		return false;
	foreign = dpg_net_read_full(fd, b, sizeof(b), deadline, &ctx->abort_flag,
				    NULL) == 0;
	if (foreign) {
		dpg_wire_hdr_get(b, &h);
		foreign = h.magic != DPG_WIRE_MAGIC;
	}
	close(fd);
	return foreign;
}

/* Rank 0 serves the store on MASTER_PORT. */
static int serve_store(struct dpg_ctx *ctx, const uint8_t *secret, size_t slen,
		       struct dpg_err *e)
{
	int rc = check_master_local(ctx, e);

	if (rc != 0)
		return rc;
	rc = dpg_store_server_start(NULL, ctx->j.master_port, secret, slen,
				    &ctx->srv, e);
	if (rc == 0)
		return 0;
	dpg_err_prefix(e, "rank 0 cannot serve the rendezvous store (MASTER_PORT "
		       "taken by another job, or by a process of this one that "
		       "also claims rank 0?)");
	return port_held(ctx->j.master_port) ? -DPG_ERR_ENV : -DPG_ERR_SYSTEM;
}

/* Word a failure to reach the store (every rank alike). */
static int connect_failed(struct dpg_ctx *ctx, int rc, struct dpg_err *e)
{
	if (rc == -DPG_ERR_AUTH && foreign_service(ctx))
		return dpg_errs(e, DPG_ERR_ENV, "MASTER_ADDR:MASTER_PORT %s:%u is not "
				"a dpg store (another service answered): is "
				"MASTER_PORT right?", ctx->j.master_addr,
				(unsigned)ctx->j.master_port);
	if (rc == -DPG_ERR_AUTH)
		dpg_err_prefix(e, "the store of rank 0 refused this rank's job "
			       "secret (DPG_SECRET differs between ranks, or "
			       "MASTER_ADDR:MASTER_PORT is another job's store)");
	else if (rc == -DPG_ERR_TIMEOUT)
		dpg_err_prefix(e, "rank 0's store did not answer (is rank 0 "
			       "running, and MASTER_ADDR/MASTER_PORT right?)");
	return rc;
}

/* Reach the store: through this node's relay when there is one, else
 * straight to MASTER_ADDR:MASTER_PORT. */
static int store_open(struct dpg_ctx *ctx, const uint8_t *secret, size_t slen,
		      int64_t deadline, const volatile int *abort, struct dpg_store **s,
		      struct dpg_err *e)
{
	char where[DPG_ADDR_MAX + 8];

	if (ctx->relay_name[0] == '\0')
		return dpg_store_connect(ctx->j.master_addr, ctx->j.master_port, secret,
					 slen, deadline, abort, s, e);
	snprintf(where, sizeof(where), "%s:%u", ctx->j.master_addr,
		 (unsigned)ctx->j.master_port);
	return dpg_store_connect_relay(ctx->relay_name, where, ctx->j.rank, secret, slen,
				       deadline, abort, s, e);
}

/* The hang report's responder (hang.h), on a store connection of its own. */
static int start_responder(struct dpg_ctx *ctx, const uint8_t *secret, size_t slen,
			   int64_t deadline, struct dpg_err *e)
{
	struct dpg_store *s = NULL;
	int rc = store_open(ctx, secret, slen, deadline, &ctx->hang.stop, &s, e);

	return rc != 0 ? rc : dpg_hang_start(ctx, s, e);
}

/* A node leader's relay (store_relay.h): on (unless DPG_STORE_RELAY=0) when
 * the environment says this node runs more than one rank of the job. */
static bool relay_wanted(const struct dpg_ctx *ctx)
{
	const char *v = getenv("DPG_STORE_RELAY");

	return !(v != NULL && strcmp(v, "0") == 0) && ctx->j.local_rank >= 0 &&
	       ctx->j.local_world_size > 1 && ctx->j.local_rank < ctx->j.local_world_size;
}

/* The leader (local rank 0) starts its node's relay; the others find it. */
static int relay_setup(struct dpg_ctx *ctx, const uint8_t *secret, size_t slen,
		       int64_t deadline, struct dpg_err *e)
{
	struct dpg_relay_leader who = { ctx->j.rank, ctx->node, ctx->j.local_world_size };
	int rc;

	if (!relay_wanted(ctx))
		return 0;
	dpg_store_relay_name(ctx->j.ns, ctx->node, ctx->j.master_addr,
			     ctx->j.master_port, ctx->relay_name);
	if (ctx->j.local_rank != 0)
		return 0;
	rc = dpg_store_relay_start(ctx->relay_name, ctx->j.master_addr,
				   ctx->j.master_port, secret, slen, &who, deadline,
				   &ctx->abort_flag, &ctx->relay, e);
	if (rc != 0)
		ctx->relay_name[0] = '\0';
	return rc;
}

static int connect_store(struct dpg_ctx *ctx, struct dpg_err *e)
{
	uint8_t secret[DPG_STORE_SECRET_MAX];
	size_t slen = 0;
	int64_t deadline = dpg_now_ms() + ctx->timeout_ms;
	int rc;

	if (dpg_secret_parse(ctx->j.secret, secret, sizeof(secret), &slen, e) != 0)
		return -DPG_ERR_AUTH;
	rc = resolve_master(ctx, e);
	if (rc == 0 && ctx->j.rank == 0)
		rc = serve_store(ctx, secret, slen, e);
	if (rc == 0)
		rc = relay_setup(ctx, secret, slen, deadline, e);
	if (rc == 0)
		rc = store_open(ctx, secret, slen, deadline, &ctx->halt_flag, &ctx->store, e);
	if (rc == 0)
		rc = start_responder(ctx, secret, slen, deadline, e);
	explicit_bzero(secret, sizeof(secret));
	return rc == 0 ? 0 : connect_failed(ctx, rc, e);
}

/* The liveness watch found rank r dead: remember the line, then abort
 * every communicator (the NCCL waits end at once and abort their NCCL
 * communicator; comm.c words the failures with the line). */
static void peer_dead(void *arg, int r, const char *msg)
{
	struct dpg_ctx *ctx = arg;

	copy_str(ctx->dead_msg, sizeof(ctx->dead_msg), msg);
	__atomic_store_n(&ctx->dead_rank, r, __ATOMIC_RELEASE);
	__atomic_store_n(&ctx->halt_flag, 1, __ATOMIC_SEQ_CST);	/* store waits */
	dpg_comm_abort_all(ctx);
}

/* On NCCL with more than one rank, the liveness watch (live.h) on a store
 * connection of its own; DPG_PEER_TIMEOUT=0 turns it off. */
static int start_watch(struct dpg_ctx *ctx, struct dpg_err *e)
{
	uint8_t secret[DPG_STORE_SECRET_MAX];
	struct dpg_watch *w = &ctx->watch;
	size_t slen = 0;
	int64_t dead_ms = 0;
	int rc;

	if (ctx->backend != DPG_BACKEND_NCCL || ctx->j.world_size < 2)
		return 0;
	if ((rc = dpg_live_dead_ms(getenv("DPG_PEER_TIMEOUT"), &dead_ms, e)) != 0 ||
	    dead_ms == 0)
		return rc;
	ctx->watch_nodes = calloc((size_t)ctx->j.world_size, sizeof(char *));
	if (ctx->watch_nodes == NULL)
		return dpg_errs(e, DPG_ERR_NOMEM, "out of memory for the liveness watch");
	for (int r = 0; r < ctx->j.world_size; r++)
		ctx->watch_nodes[r] = ctx->ranks != NULL ? ctx->ranks[r].node : NULL;
	*w = (struct dpg_watch){ .ns = ctx->ns, .rank = ctx->j.rank,
		.n = ctx->j.world_size, .dead_ms = dead_ms,
		.beat_ms = DPG_LIVE_BEAT_MS, .nodes = ctx->watch_nodes,
		.on_dead = peer_dead, .arg = ctx };
	if (dpg_secret_parse(ctx->j.secret, secret, sizeof(secret), &slen, e) != 0)
		return -DPG_ERR_AUTH;
	rc = dpg_store_connect(ctx->j.master_addr, ctx->j.master_port, secret, slen,
			       dpg_now_ms() + ctx->timeout_ms, &w->stop, &w->store, e);
	explicit_bzero(secret, sizeof(secret));
	return rc != 0 ? rc : dpg_watch_start(w, e);
}

/* Claim the rank in the store: two processes with the same RANK fail here
 * instead of hanging. */
static int claim_rank(struct dpg_ctx *ctx, struct dpg_err *e)
{
	char key[KEY_MAX + 1], me[160];
	struct timespec ts;
	void *cur = NULL;
	size_t clen = 0;
	int rc;

	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(key, sizeof(key), "%s/claim/%d", ctx->ns, ctx->j.rank);
	snprintf(me, sizeof(me), "%s pid %ld (%lx.%lx)", ctx->node, (long)getpid(),
		 (unsigned long)ts.tv_sec, (unsigned long)ts.tv_nsec);
	rc = dpg_store_cas(ctx->store, key, "", 0, me, strlen(me), &cur, &clen,
			   dpg_now_ms() + ctx->timeout_ms, e);
	if (rc != 0)
		return rc;
	if (cur != NULL && (clen != strlen(me) || memcmp(cur, me, clen) != 0))
		rc = dpg_errs(e, DPG_ERR_ENV, "inconsistent environment: rank %d is "
			      "already taken by %.*s (the rank comes from %s: do "
			      "several processes get the same one?)", ctx->j.rank,
			      (int)(clen > 100 ? 100 : clen), (char *)cur,
			      dpg_join_src_name(ctx->j.src));
	free(cur);
	return rc;
}

/* ------------------------------------------------------------ world size */

/* Rank 0 announces its world size (<ns>/size) as soon as it serves the
 * store, so that a disagreement is found at once in both directions.  The
 * greeting (rank 0 checks everyone's) words it, but rank 0 collects the
 * greetings of the ranks it believes in first: when it claims the larger
 * world, the ranks past ours do not exist and it would wait for them until
 * its deadline.  So a rank that sees the larger size at rank 0 stands in
 * for the ranks it does not know with placeholder greetings (set only where
 * none is yet); rank 0 then finds our size in our own greeting and tells
 * every rank.  A rank outside rank 0's world cannot greet: it fails alone. */
#define SIZE_STAND_IN_MAX 4096

static int announce_size(struct dpg_ctx *ctx, struct dpg_err *e)
{
	char key[KEY_MAX + 1], v[160];

	snprintf(key, sizeof(key), "%s/size", ctx->ns);
	snprintf(v, sizeof(v), "%d %s", ctx->j.world_size, ctx->node);
	return dpg_store_set(ctx->store, key, v, strlen(v),
			     dpg_now_ms() + ctx->timeout_ms, e);
}

/* Placeholder greetings of ranks [from, to) where none is yet.  Rank 0,
 * having published its verdict, waits until every greeted rank has read it
 * (xchg.c's <prefix>/ack count): the placeholders we set are acknowledged
 * here at once, as no one stands behind them. */
static int stand_in(struct dpg_ctx *ctx, int from, int to, int64_t deadline,
		    struct dpg_err *e)
{
	char key[KEY_MAX + 1], v[64];
	int rc = 0, mine = 0;

	snprintf(v, sizeof(v), "absent (rank %d has world size %d)", ctx->j.rank,
		 ctx->j.world_size);
	for (int r = from; rc == 0 && r < to; r++) {
		void *cur = NULL;
		size_t clen = 0;

		snprintf(key, sizeof(key), "%s/hello/%d", ctx->ns, r);
		rc = dpg_store_cas(ctx->store, key, "", 0, v, strlen(v), &cur, &clen,
				   deadline, e);
		if (rc == 0 && clen == strlen(v) && memcmp(cur, v, clen) == 0)
			mine++;
		free(cur);
	}
	snprintf(key, sizeof(key), "%s/hello/ack", ctx->ns);
	if (rc == 0 && mine > 0)
		rc = dpg_store_add(ctx->store, key, mine, NULL, deadline, e);
	return rc;
}

static int check_size(struct dpg_ctx *ctx, struct dpg_err *e)
{
	char key[KEY_MAX + 1], node0[DPG_HOST_MAX] = "?";
	int64_t deadline = dpg_now_ms() + ctx->timeout_ms;
	int n0 = 0, n = ctx->j.world_size, rc;
	void *v = NULL;
	size_t len = 0;

	snprintf(key, sizeof(key), "%s/size", ctx->ns);
	rc = dpg_store_get(ctx->store, key, &v, &len, deadline, e);
	if (rc != 0)
		return rc;
	if (sscanf(v, "%d %63s", &n0, node0) < 1 || n0 < 1)
		n0 = n;		/* not ours to judge: the greeting will */
	free(v);
	if (ctx->j.rank >= n0)
		return dpg_errs(e, DPG_ERR_ENV, "inconsistent environment: rank %d "
				"(%s) has world size %d but rank 0 (%s) has %d "
				"(WORLD_SIZE / SLURM_STEP_NUM_TASKS differ between "
				"tasks?)", ctx->j.rank, ctx->node, n, node0, n0);
	if (n0 > n)
		return stand_in(ctx, n, n0 - n > SIZE_STAND_IN_MAX ?
				n + SIZE_STAND_IN_MAX : n0, deadline, e);
	return 0;
}

static int agree_size(struct dpg_ctx *ctx, struct dpg_err *e)
{
	int rc = ctx->j.rank == 0 ? announce_size(ctx, e) : check_size(ctx, e);

	if (rc != 0 && rc != -DPG_ERR_ENV)
		dpg_err_prefix(e, "joining the job (world size)");
	return rc;
}

/* ------------------------------------------------------------ greeting */

struct hello {
	int world_size, backend, cap;
	char version[16];
	char node[DPG_HOST_MAX];
	char addr[DPG_ADDR_STR_MAX];
};

static int hello_parse(const uint8_t *v, size_t len, struct hello *h)
{
	char buf[512];

	if (len >= sizeof(buf))
		return -1;
	memcpy(buf, v, len);
	buf[len] = '\0';
	memset(h, 0, sizeof(*h));
	if (sscanf(buf, "dpg1 %d %d %d %15s %63s %63s", &h->world_size, &h->backend,
		   &h->cap, h->version, h->node, h->addr) != 6)
		return -1;
	return 0;
}

/* Rank i's greeting against rank 0's. */
static int hello_compare(int i, const struct hello *h, const struct hello *h0,
			 struct dpg_err *e)
{
	if (h->world_size != h0->world_size)
		return dpg_errs(e, DPG_ERR_ENV, "inconsistent environment: rank %d "
				"(%s) has world size %d but rank 0 (%s) has %d "
				"(WORLD_SIZE / SLURM_STEP_NUM_TASKS differ between "
				"tasks?)", i, h->node, h->world_size, h0->node,
				h0->world_size);
	if (h->backend != h0->backend)
		return dpg_errs(e, DPG_ERR_ENV, "inconsistent environment: rank %d "
				"(%s) asks for backend %d but rank 0 (%s) for %d "
				"(DPG_BACKEND differs between tasks)", i, h->node,
				h->backend, h0->node, h0->backend);
	if (strcmp(h->version, h0->version) != 0)
		return dpg_errs(e, DPG_ERR_ENV, "rank %d (%s) runs libdpg %s but rank "
				"0 (%s) runs %s", i, h->node, h->version, h0->node,
				h0->version);
	return 0;
}

static int hello_check(void *arg, const struct dpg_xchg *x, struct dpg_err *e)
{
	struct hello h0, h;
	int rc;

	(void)arg;
	if (hello_parse(x->val[0], x->vlen[0], &h0) != 0)
		return dpg_errs(e, DPG_ERR_SYSTEM, "internal: malformed greeting "
				"of rank 0");
	for (int i = 1; i < x->n; i++) {
		if (hello_parse(x->val[i], x->vlen[i], &h) != 0)
			return dpg_errs(e, DPG_ERR_PEER, "rank %d sent a malformed "
					"greeting (a different libdpg?)", i);
		if ((rc = hello_compare(i, &h, &h0, e)) != 0)
			return rc;
	}
	return 0;
}

/* Every rank's greeting, checked by rank 0. */
static int greet(struct dpg_ctx *ctx, struct dpg_xchg *x, struct dpg_err *e)
{
	char prefix[KEY_MAX + 1], hello[512];
	struct dpg_xchg_group g = {
		.store = ctx->store, .prefix = prefix, .me = ctx->j.rank,
		.n = ctx->j.world_size, .world_ranks = NULL,
		.timeout_ms = ctx->timeout_ms,
	};
	int rc;

	if (dpg_route_addr(ctx->j.master_addr, ctx->addr, sizeof(ctx->addr), NULL) != 0)
		snprintf(ctx->addr, sizeof(ctx->addr), "127.0.0.1");
	snprintf(hello, sizeof(hello), "dpg1 %d %d %d %s %s %s", ctx->j.world_size,
		 (int)ctx->j.backend, nccl_cap(ctx), dpg_version(), ctx->node,
		 ctx->addr);
	snprintf(prefix, sizeof(prefix), "%s/hello", ctx->ns);
	rc = dpg_xchg_run(&g, hello, strlen(hello), hello_check, NULL, x, e);
	if (rc != 0)
		dpg_err_prefix(e, "joining the job");
	return rc;
}

/* The ranks' records from their greetings; the lowest NCCL capability. */
static int record_ranks(struct dpg_ctx *ctx, const struct dpg_xchg *x,
			int *cap_min, int *cap_rank, struct dpg_err *e)
{
	int n = ctx->j.world_size;
	struct hello h;

	ctx->ranks = calloc((size_t)n, sizeof(*ctx->ranks));
	if (ctx->ranks == NULL)
		return dpg_errs(e, DPG_ERR_NOMEM, "out of memory for %d rank records",
				n);
	for (int r = 0; r < n; r++) {
		if (hello_parse(x->val[r], x->vlen[r], &h) != 0)
			return dpg_errs(e, DPG_ERR_PEER, "malformed greeting of rank %d",
					r);
		copy_str(ctx->ranks[r].node, sizeof(ctx->ranks[r].node), h.node);
		copy_str(ctx->ranks[r].addr, sizeof(ctx->ranks[r].addr), h.addr);
		ctx->ranks[r].cap = h.cap;
		if (h.cap < *cap_min) {
			*cap_min = h.cap;
			*cap_rank = r;
		}
	}
	return 0;
}

/* ------------------------------------------------------------ layout */

/* Fill in what the environment did not say from the ranks' node names.
 * Quadratic in the worst case: only when the environment said nothing. */
static void derive_local(struct dpg_ctx *ctx)
{
	int n = ctx->j.world_size, me = ctx->j.rank, nodes = 0, my_node = -1;
	int lrank = 0, lsize = 0;
	const char *mine = ctx->ranks[me].node;

	for (int r = 0; r < n; r++) {
		bool first = true;

		for (int q = 0; q < r; q++)
			if (strcmp(ctx->ranks[q].node, ctx->ranks[r].node) == 0) {
				first = false;
				break;
			}
		if (first) {
			if (strcmp(ctx->ranks[r].node, mine) == 0)
				my_node = nodes;
			nodes++;
		}
		if (strcmp(ctx->ranks[r].node, mine) == 0) {
			if (r < me)
				lrank++;
			lsize++;
		}
	}
	if (ctx->j.local_rank < 0)
		ctx->j.local_rank = lrank;
	if (ctx->j.local_world_size < 0)
		ctx->j.local_world_size = lsize;
	if (ctx->j.node_rank < 0)
		ctx->j.node_rank = my_node;
	if (ctx->j.num_nodes < 0)
		ctx->j.num_nodes = nodes;
}

/* An address on lo is fine only while every rank shares this node. */
static void fix_loopback(struct dpg_ctx *ctx)
{
	int me = ctx->j.rank;

	if (!is_loopback(ctx->addr))
		return;
	for (int r = 0; r < ctx->j.world_size; r++) {
		char via[DPG_ADDR_STR_MAX];

		if (strcmp(ctx->ranks[r].node, ctx->node) == 0 ||
		    is_loopback(ctx->ranks[r].addr))
			continue;
		if (dpg_route_addr(ctx->ranks[r].addr, via, sizeof(via), NULL) == 0 &&
		    !is_loopback(via)) {
			copy_str(ctx->addr, sizeof(ctx->addr), via);
			copy_str(ctx->ranks[me].addr, sizeof(ctx->ranks[me].addr), via);
		}
		break;
	}
}

static void derive_layout(struct dpg_ctx *ctx)
{
	if (ctx->j.local_rank < 0 || ctx->j.local_world_size < 0 ||
	    ctx->j.node_rank < 0 || ctx->j.num_nodes < 0)
		derive_local(ctx);
	fix_loopback(ctx);
}

/* ------------------------------------------------------------ init */

/* More than one rank: the store, the claim, the greeting, the world. */
static int join_world(struct dpg_ctx *ctx, struct dpg_err *e)
{
	struct dpg_xchg x;
	int rc, cap_min = 3, cap_rank = 0;

	if ((rc = connect_store(ctx, e)) != 0 || (rc = claim_rank(ctx, e)) != 0 ||
	    (rc = agree_size(ctx, e)) != 0)
		return rc;
	rc = greet(ctx, &x, e);
	if (rc == 0)
		rc = record_ranks(ctx, &x, &cap_min, &cap_rank, e);
	dpg_xchg_free(&x);
	if (rc != 0)
		return rc;
	derive_layout(ctx);
	ctx->startup.joined_ns = dpg_now_ns();
	rc = start_world(ctx, cap_min, cap_rank, e);
	ctx->startup.backend_ns = dpg_now_ns();
	return rc == 0 ? start_watch(ctx, e) : rc;
}

/* One rank: no store, no greeting. */
static int join_alone(struct dpg_ctx *ctx, struct dpg_err *e)
{
	int rc;

	snprintf(ctx->addr, sizeof(ctx->addr), "127.0.0.1");
	ctx->startup.joined_ns = dpg_now_ns();
	rc = start_world(ctx, nccl_cap(ctx), 0, e);
	ctx->startup.backend_ns = dpg_now_ns();
	return rc;
}

static void set_node_name(struct dpg_ctx *ctx)
{
	char host[256];

	if (ctx->j.node[0] != '\0') {
		copy_str(ctx->node, sizeof(ctx->node), ctx->j.node);
		return;
	}
	if (gethostname(host, sizeof(host)) != 0)
		snprintf(host, sizeof(host), "?");
	host[sizeof(host) - 1] = '\0';
	host[strcspn(host, ". \t")] = '\0';	/* short name */
	copy_str(ctx->node, sizeof(ctx->node), host[0] ? host : "?");
}

static const char *getenv_plain(const char *name)
{
	return getenv(name);
}

static struct dpg_ctx *ctx_new(void)
{
	struct dpg_ctx *ctx = calloc(1, sizeof(*ctx));

	if (ctx == NULL)
		return NULL;
	pthread_mutex_init(&ctx->lock, NULL);
	pthread_mutex_init(&ctx->bg_lock, NULL);
	ctx->device = -1;
	ctx->dead_rank = -1;
	ctx->backend = DPG_BACKEND_CPU;
	snprintf(ctx->who, sizeof(ctx->who), "dpg");
	snprintf(ctx->ns, sizeof(ctx->ns), "dpg");
	dpg_track_init(&ctx->track);
	dpg_track_init(&ctx->bg);
	return ctx;
}

/* Who this process is in the job (join.c), and the names it goes by. */
static int resolve(struct dpg_ctx *ctx, const dpg_init_opts_t *opts,
		   struct dpg_err *e)
{
	int rc = dpg_join_resolve(opts, NULL, NULL, &ctx->j, e);

	set_node_name(ctx);
	if (rc != 0) {
		ctx->j.world_size = 0;
		ctx->j.rank = -1;
		return rc;
	}
	snprintf(ctx->who, sizeof(ctx->who), "rank %d (%s)", ctx->j.rank, ctx->node);
	snprintf(ctx->ns, sizeof(ctx->ns), "dpg/%s", ctx->j.ns);
	ctx->timeout_ms = (int64_t)(ctx->j.timeout_s * 1000.0);
	if (ctx->timeout_ms < 1)
		ctx->timeout_ms = 1;
	return 0;
}

dpg_status_t dpg_init(const dpg_init_opts_t *opts, dpg_ctx_t **out)
{
	struct dpg_ctx *ctx;
	struct dpg_err e = { { 0 } };
	int rc;

	if (out == NULL)
		return DPG_ERR_INVALID;
	*out = ctx = ctx_new();
	if (ctx == NULL)
		return DPG_ERR_NOMEM;
	dpg_startup_begin(&ctx->startup, getenv_plain);
	rc = resolve(ctx, opts, &e);
	if (rc == 0)
		rc = dpg_report_env(ctx, &e);
	if (rc == 0)
		rc = dpg_stop_env(ctx, &e);
	if (rc != 0) {
		dpg_ctx_seterr(ctx, "dpg_init on %s: %s", ctx->node, e.msg);
		return dpg_status_of(rc);
	}
	rc = ctx->j.world_size == 1 ? join_alone(ctx, &e) : join_world(ctx, &e);
	if (rc != 0)
		return dpg_ctx_fail(ctx, rc, "dpg_init", &e);
	ctx->ready = true;
	return DPG_OK;
}

/* ------------------------------------------------------------ finalize, abort */

dpg_status_t dpg_abort(dpg_ctx_t *ctx)
{
	if (ctx == NULL)
		return DPG_ERR_INVALID;
	__atomic_store_n(&ctx->abort_flag, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&ctx->halt_flag, 1, __ATOMIC_SEQ_CST);
	dpg_comm_abort_all(ctx);
	return DPG_OK;
}

/* Ranks leave together, and a new world can be joined the moment any rank
 * is back from dpg_finalize (a restart or a test harness in one process):
 *  1. every rank arrives at the store barrier <ns>/bye;
 *  2. the others count themselves out (<ns>/bye/left); the last one sets
 *     <ns>/bye/gone, which rank 0 waits for: no one needs the store any more,
 *     and dpg_finalize on rank 0 stops it;
 *  3. the others wait until the store has closed their connection (a wait
 *     for a key nobody sets ends with -DPG_ERR_PEER when it goes away).
 * So no rank returns while the old store is still serving: a new dpg_init
 * can never reach the previous world's store and find its own rank claimed
 * there.  Skipped after a failure (a dead peer would never arrive). */
static int goodbye_others(struct dpg_ctx *ctx, int64_t deadline,
			  struct dpg_err *e)
{
	char left[KEY_MAX + 1], gone[KEY_MAX + 1], closed[KEY_MAX + 1];
	int64_t n = 0;
	void *v = NULL;
	size_t len = 0;
	int rc;

	snprintf(left, sizeof(left), "%s/bye/left", ctx->ns);
	snprintf(gone, sizeof(gone), "%s/bye/gone", ctx->ns);
	snprintf(closed, sizeof(closed), "%s/bye/closed", ctx->ns);
	rc = dpg_store_add(ctx->store, left, 1, &n, deadline, e);
	if (rc == 0 && n == ctx->j.world_size - 1)
		rc = dpg_store_set(ctx->store, gone, "1", 1, deadline, e);
	if (rc != 0)
		return -DPG_ERR_PEER;
	/* rank 0 now stops its store: wait until it is down (or it lingers
	 * no longer than FINALIZE_LINGER_MS) */
	deadline = dpg_now_ms() + FINALIZE_LINGER_MS;
	rc = dpg_store_get(ctx->store, closed, &v, &len, deadline, NULL);
	free(v);
	return rc == -DPG_ERR_ABORTED ? rc : 0;
}

static int goodbye(struct dpg_ctx *ctx, struct dpg_err *e)
{
	char name[KEY_MAX + 1], gone[KEY_MAX + 1];
	const char *keys[1] = { gone };
	int64_t deadline = dpg_now_ms() + ctx->timeout_ms;
	int rc;

	snprintf(name, sizeof(name), "%s/bye", ctx->ns);
	snprintf(gone, sizeof(gone), "%s/bye/gone", ctx->ns);
	rc = dpg_store_barrier(ctx->store, name, ctx->j.world_size, deadline, e);
	if (rc != 0)
		return rc;
	if (ctx->j.rank != 0)
		return goodbye_others(ctx, deadline, e);
	/* the others have their barrier reply once they count themselves out */
	(void)dpg_store_wait(ctx->store, keys, 1, dpg_now_ms() + FINALIZE_LINGER_MS,
			     NULL);
	return 0;
}

/* On the CPU backend, a barrier of the world before the store's goodbye:
 * its links notice a rank that died after the last collective within a
 * second, where the store barrier would wait for it until the deadline.
 * (NCCL cannot tell a dead peer from a slow one: there the goodbye alone.) */
static int farewell(struct dpg_ctx *ctx, struct dpg_err *e)
{
	dpg_status_t st;

	if (ctx->backend != DPG_BACKEND_CPU || !ctx->ready || ctx->failed ||
	    dpg_ctx_aborted(ctx) || ctx->j.world_size < 2)
		return 0;
	st = dpg_barrier(&ctx->world->c);
	if (st == DPG_OK)
		return 0;
	ctx->failed = true;
	return dpg_errs(e, st, "%s", ctx->err);
}

/* A peer the liveness watch found dead never comes to the goodbye: skip it
 * (at once, not after DPG_TIMEOUT), and say so unless a call said it. */
static bool dead_peer(struct dpg_ctx *ctx, struct dpg_err *e)
{
	const char *msg = NULL;
	bool said = ctx->failed;

	if (dpg_ctx_dead_peer(ctx, &msg) < 0)
		return false;
	ctx->failed = true;
	if (said)
		return false;
	dpg_errs(e, DPG_ERR_PEER, "%s", msg);
	return true;
}

/* Leave the job: the world's farewell, then the store's goodbye. */
static int leave(struct dpg_ctx *ctx, struct dpg_err *e)
{
	int rc = 0;

	if (ctx->world != NULL) {
		rc = farewell(ctx, e);
		dpg_comm_destroy_owned(&ctx->world->c);
		ctx->world = NULL;
	}
	if (rc == 0 && dead_peer(ctx, e))
		return -DPG_ERR_PEER;
	if (rc == 0 && ctx->store != NULL && ctx->ready && !ctx->failed &&
	    !dpg_ctx_aborted(ctx) && ctx->j.world_size > 1)
		rc = goodbye(ctx, e);
	/* a peer found dead during the goodbye ended its waits */
	if (rc != 0 && !dpg_ctx_aborted(ctx) && dead_peer(ctx, e))
		return -DPG_ERR_PEER;
	return rc;
}

/* (the parentheses keep dpg.h's dpg_finalize(&ctx) macro out) */
dpg_status_t (dpg_finalize)(dpg_ctx_t *ctx)
{
	struct dpg_err e = { { 0 } };
	dpg_status_t st;

	if (ctx == NULL)
		return DPG_OK;
	dpg_hang_stop(ctx);
	dpg_comm_destroy_all_but_world(ctx);
	st = dpg_ctx_fail(ctx, leave(ctx, &e), "dpg_finalize", &e);
	dpg_watch_stop(&ctx->watch);
	free(ctx->watch_nodes);
	dpg_store_close(ctx->store);
	dpg_store_server_stop(ctx->srv);	/* before the relay: its end is not a loss */
	dpg_store_relay_stop(ctx->relay);
	free(ctx->ranks);
	dpg_gpumod_close(&ctx->gpu);
	pthread_mutex_destroy(&ctx->lock);
	pthread_mutex_destroy(&ctx->bg_lock);
	explicit_bzero(ctx->j.secret, sizeof(ctx->j.secret));
	free(ctx);
	return st;
}
