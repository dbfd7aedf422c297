/* runtime.c - libdpg's public API: join the job (joinenv + the rendezvous
 * store), create communicators on the CPU or NCCL backend, and wrap every
 * collective with argument checks, sequence numbers and one-line errors. */
#include "runtime.h"

#include "cpu_backend.h"
#include "join.h"
#include "net.h"
#include "reduce.h"
#include "store.h"
#ifdef DPG_HAVE_NCCL
#include "nccl_backend.h"
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ERR_MAX (DPG_ERR_MSG_MAX + 256)
#define ADDR_STR_MAX 64
#define KEY_MAX DPG_STORE_KEY_MAX
/* Grace given to non-leaders of an exchange beyond the leader's deadline,
 * so that they receive the leader's diagnosis instead of timing out alone. */
#define XCHG_GRACE_MS 5000
/* How long rank 0 keeps the store up for ranks leaving dpg_finalize. */
#define FINALIZE_LINGER_MS 10000

struct rt_comm {
	struct dpg_comm c;
	enum dpg_comm_owner owner;
	dpg_backend_t kind;
	uint64_t nsplit;	/* dpg_comm_split calls on this comm */
	uint64_t nxchg;		/* store exchanges (all_gather_bytes on NCCL) */
	struct rt_comm *next, *prev;
};

struct rank_info {
	char node[DPG_HOST_MAX];
	char addr[ADDR_STR_MAX];
	int cap;		/* NCCL capability, see nccl_cap() */
};

struct dpg_ctx {
	struct dpg_join j;
	char node[DPG_HOST_MAX];
	char who[DPG_HOST_MAX + 32];
	char ns[64];			/* "dpg/<job>.<step>" */
	char addr[ADDR_STR_MAX];	/* where peers reach this rank */
	int64_t timeout_ms;
	dpg_backend_t backend;
	int device;
	struct dpg_store_server *srv;
	struct dpg_store *store;
	volatile int abort_flag;
	bool failed;			/* a collective failed: no goodbye barrier */
	bool ready;			/* dpg_init succeeded */
	pthread_mutex_t lock;		/* the comm list (dpg_abort walks it) */
	struct rt_comm *comms;
	struct rt_comm *world;
	struct rank_info *ranks;	/* world_size entries (NULL: one rank) */
	dpg_mesh_t **meshes;		/* alive meshes, for dpg_finalize */
	size_t nmesh, mesh_cap;
	char err[ERR_MAX];
};

/* strlcpy: copy what fits, always terminate. */
static void copy_str(char *dst, size_t len, const char *src)
{
	size_t n = strnlen(src, len - 1);

	memcpy(dst, src, n);
	dst[n] = '\0';
}

static struct rt_comm *rc_of(dpg_comm_t *c)
{
	return (struct rt_comm *)((char *)c - offsetof(struct rt_comm, c));
}

/* ------------------------------------------------------------ errors */

int dpg_ctx_device(const struct dpg_ctx *ctx)
{
	return ctx ? ctx->device : -1;
}

void dpg_ctx_set_failed(struct dpg_ctx *ctx)
{
	if (ctx)
		ctx->failed = true;
}

void dpg_ctx_seterr(struct dpg_ctx *ctx, const char *fmt, ...)
{
	va_list ap;
	char *nl;

	if (ctx == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(ctx->err, sizeof(ctx->err), fmt, ap);
	va_end(ap);
	while ((nl = strpbrk(ctx->err, "\r\n")) != NULL)
		*nl = ' ';
}

const char *dpg_ctx_who(const struct dpg_ctx *ctx)
{
	return ctx == NULL ? "dpg" : ctx->who;
}

const char *dpg_ctx_key_ns(const struct dpg_ctx *ctx)
{
	return ctx == NULL ? "dpg" : ctx->ns;
}

const char *dpg_ctx_rank_host(const struct dpg_ctx *ctx, int r)
{
	if (ctx == NULL || r < 0 || r >= ctx->j.world_size)
		return "?";
	if (ctx->ranks == NULL)
		return ctx->node;
	return ctx->ranks[r].node;
}

struct dpg_store *dpg_ctx_store(const struct dpg_ctx *ctx)
{
	return ctx == NULL ? NULL : ctx->store;
}

const char *dpg_strerror(dpg_status_t status)
{
	switch (status) {
	case DPG_OK: return "success";
	case DPG_ERR_INVALID: return "invalid argument";
	case DPG_ERR_ENV: return "missing or inconsistent environment";
	case DPG_ERR_TIMEOUT: return "timeout";
	case DPG_ERR_PEER: return "peer failure";
	case DPG_ERR_AUTH: return "authentication failure (job secret)";
	case DPG_ERR_SYSTEM: return "system error";
	case DPG_ERR_NOMEM: return "out of memory";
	case DPG_ERR_UNSUPPORTED: return "not supported by this build or host";
	case DPG_ERR_BACKEND: return "backend (NCCL/CUDA) error";
	case DPG_ERR_ABORTED: return "aborted";
	}
	return "unknown status";
}

const char *dpg_last_error(const dpg_ctx_t *ctx)
{
	if (ctx == NULL)
		return "dpg: no context (dpg_init could not allocate one, or was "
		       "given no output pointer)";
	return ctx->err;
}

dpg_status_t dpg_rt_store_status(int rc)
{
	switch (rc) {
	case 0: return DPG_OK;
	case DPG_NET_TIMEOUT: return DPG_ERR_TIMEOUT;
	case DPG_NET_CLOSED: return DPG_ERR_PEER;
	case DPG_NET_ABORTED: return DPG_ERR_ABORTED;
	case DPG_STORE_AUTH: return DPG_ERR_AUTH;
	default: return DPG_ERR_SYSTEM;
	}
}

/* A backend's return code as a status (0 or a negated dpg_status_t). */
static dpg_status_t backend_status(int rc)
{
	if (rc == 0)
		return DPG_OK;
	if (rc < 0 && -rc > (int)DPG_OK && -rc <= (int)DPG_ERR_ABORTED)
		return (dpg_status_t)-rc;
	return DPG_ERR_SYSTEM;
}

static bool aborted(const struct dpg_ctx *ctx)
{
	return __atomic_load_n(&ctx->abort_flag, __ATOMIC_SEQ_CST) != 0;
}

/* ------------------------------------------------------------ accessors */

int dpg_rank(const dpg_ctx_t *ctx)
{
	return ctx == NULL ? -1 : ctx->j.rank;
}

int dpg_world_size(const dpg_ctx_t *ctx)
{
	return ctx == NULL ? -1 : ctx->j.world_size;
}

int dpg_local_rank(const dpg_ctx_t *ctx)
{
	return ctx == NULL ? -1 : ctx->j.local_rank;
}

int dpg_local_world_size(const dpg_ctx_t *ctx)
{
	return ctx == NULL ? -1 : ctx->j.local_world_size;
}

dpg_backend_t dpg_backend(const dpg_ctx_t *ctx)
{
	return ctx == NULL ? DPG_BACKEND_AUTO : ctx->backend;
}

dpg_comm_t *dpg_world(dpg_ctx_t *ctx)
{
	return (ctx == NULL || ctx->world == NULL) ? NULL : &ctx->world->c;
}

int dpg_comm_rank(const dpg_comm_t *comm)
{
	return comm == NULL ? -1 : comm->rank;
}

int dpg_comm_size(const dpg_comm_t *comm)
{
	return comm == NULL ? -1 : comm->size;
}

/* ------------------------------------------------------------ self backend */

/* A communicator of one rank on host memory: every collective is a copy. */
static int self_allreduce(struct dpg_comm *c, const void *send, void *recv,
			  size_t count, dpg_dtype_t dt, dpg_op_t op, void *stream,
			  struct dpg_err *err)
{
	(void)c; (void)op; (void)stream; (void)err;
	if (send != recv && count > 0)
		memmove(recv, send, count * dpg_dtype_size(dt));
	return 0;
}

static int self_reduce_scatter(struct dpg_comm *c, const void *send, void *recv,
			       size_t recvcount, dpg_dtype_t dt, dpg_op_t op,
			       void *stream, struct dpg_err *err)
{
	return self_allreduce(c, send, recv, recvcount, dt, op, stream, err);
}

static int self_all_gather(struct dpg_comm *c, const void *send, void *recv,
			   size_t sendcount, dpg_dtype_t dt, void *stream,
			   struct dpg_err *err)
{
	return self_allreduce(c, send, recv, sendcount, dt, DPG_SUM, stream, err);
}

static int self_broadcast(struct dpg_comm *c, void *buf, size_t count,
			  dpg_dtype_t dt, int root, void *stream, struct dpg_err *err)
{
	(void)c; (void)buf; (void)count; (void)dt; (void)root; (void)stream;
	(void)err;
	return 0;
}

static int self_barrier(struct dpg_comm *c, struct dpg_err *err)
{
	(void)c; (void)err;
	return 0;
}

static void self_abort(struct dpg_comm *c)
{
	(void)c;
}

static void self_destroy(struct dpg_comm *c)
{
	(void)c;
}

static const struct dpg_comm_ops self_ops = {
	.name = "self",
	.allreduce = self_allreduce,
	.reduce_scatter = self_reduce_scatter,
	.all_gather = self_all_gather,
	.broadcast = self_broadcast,
	.barrier = self_barrier,
	.abort = self_abort,
	.destroy = self_destroy,
};

/* ------------------------------------------------------------ store exchange */

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/* The result of an exchange: member i's value is val[i], vlen[i] bytes. */
struct xchg {
	void *blob;
	const uint8_t **val;
	size_t *vlen;
	int n;
};

static void xchg_free(struct xchg *x)
{
	free(x->blob);
	free(x->val);
	free(x->vlen);
	memset(x, 0, sizeof(*x));
}

/* Leader's check of all values: 0 = fine, else a status with msg set. */
typedef dpg_status_t (*xchg_check_fn)(void *arg, const struct xchg *x,
				      char *msg, size_t len);

static dpg_status_t xchg_parse(const uint8_t *b, size_t len, int n,
			       struct xchg *x, char *msg, size_t mlen)
{
	size_t o = 1;

	x->val = calloc((size_t)n, sizeof(*x->val));
	x->vlen = calloc((size_t)n, sizeof(*x->vlen));
	x->n = n;
	if (x->val == NULL || x->vlen == NULL) {
		snprintf(msg, mlen, "out of memory for an exchange of %d values", n);
		return DPG_ERR_NOMEM;
	}
	for (int i = 0; i < n; i++) {
		uint32_t l;

		if (len - o < 4 || (l = get32(b + o), len - o - 4 < l)) {
			snprintf(msg, mlen, "malformed exchange table from the store");
			return DPG_ERR_PEER;
		}
		x->val[i] = b + o + 4;
		x->vlen[i] = l;
		o += 4 + (size_t)l;
	}
	return DPG_OK;
}

/* Publish 'E' + status + message for the members waiting on key. */
static void xchg_publish_error(struct dpg_ctx *ctx, const char *key,
			       dpg_status_t st, const char *msg, int64_t deadline)
{
	size_t n = strlen(msg);
	uint8_t *b = malloc(n + 2);

	if (b == NULL)
		return;
	b[0] = 'E';
	b[1] = (uint8_t)st;
	memcpy(b + 2, msg, n);
	(void)dpg_store_set(ctx->store, key, b, n + 2, deadline, NULL);
	free(b);
}

/* After publishing an error, member 0 waits (briefly) until the members
 * that arrived have read it: the caller may stop the store right after. */
static void xchg_wait_acks(struct dpg_ctx *ctx, const char *prefix, int want)
{
	char key[KEY_MAX + 1];
	int64_t deadline = dpg_now_ms() + XCHG_GRACE_MS, got = 0;

	if (want <= 0)
		return;
	snprintf(key, sizeof(key), "%s/ack", prefix);
	while (dpg_store_add(ctx->store, key, 0, &got, deadline, NULL) == 0 &&
	       got < want && dpg_now_ms() < deadline)
		usleep(2000);
}

/* Every member of a group (me of n; world_ranks maps members to world ranks
 * for messages) contributes one value; all get all values.  Member i sets
 * <prefix>/<i>; member 0 collects them and republishes them as one value
 * <prefix>/all ('T' + n x (u32 len, bytes)), or 'E' + status + message when
 * a member did not arrive in time or check() refused the values.
 * Returns a status; msg gets the reason (without the rank prefix). */
static dpg_status_t xchg_run(struct dpg_ctx *ctx, const char *prefix, int me,
			     int n, const int *world_ranks, const void *v,
			     size_t vlen, xchg_check_fn check, void *arg,
			     struct xchg *x, char *msg, size_t mlen)
{
	char key[KEY_MAX + 1], all[KEY_MAX + 1];
	int64_t t0 = dpg_now_ms(), deadline = t0 + ctx->timeout_ms;
	struct dpg_err e = { { 0 } };
	dpg_status_t st;
	void *got = NULL;
	size_t glen = 0;
	int rc;

	memset(x, 0, sizeof(*x));
	snprintf(all, sizeof(all), "%s/all", prefix);
	if (me != 0) {
		snprintf(key, sizeof(key), "%s/%d", prefix, me);
		rc = dpg_store_set(ctx->store, key, v, vlen, deadline, &e);
		if (rc == 0)
			rc = dpg_store_get(ctx->store, all, &got, &glen,
					   deadline + XCHG_GRACE_MS, &e);
		if (rc != 0) {
			st = dpg_rt_store_status(rc);
			snprintf(msg, mlen, "%.400s%s", e.msg, st == DPG_ERR_PEER ?
				 " (rank 0 serves the store: did it exit?)" : "");
			return st;
		}
		x->blob = got;
		if (glen >= 2 && ((uint8_t *)got)[0] == 'E') {
			/* tell member 0 we read it, so it may stop its store */
			snprintf(key, sizeof(key), "%s/ack", prefix);
			(void)dpg_store_add(ctx->store, key, 1, NULL,
					    dpg_now_ms() + 1000, NULL);
			st = (dpg_status_t)((uint8_t *)got)[1];
			snprintf(msg, mlen, "%.*s", (int)(glen - 2), (char *)got + 2);
			return st == DPG_OK ? DPG_ERR_PEER : st;
		}
		if (glen < 1 || ((uint8_t *)got)[0] != 'T') {
			snprintf(msg, mlen, "malformed exchange table under '%.300s'", all);
			return DPG_ERR_PEER;
		}
		return xchg_parse(got, glen, n, x, msg, mlen);
	}

	/* member 0: collect, check, publish */
	{
		void **vals = calloc((size_t)n, sizeof(*vals));
		size_t *lens = calloc((size_t)n, sizeof(*lens));
		size_t total = 1;
		uint8_t *b;
		int missing = 0;
		char list[200] = "";
		size_t lo = 0;

		if (vals == NULL || lens == NULL) {
			free(vals);
			free(lens);
			snprintf(msg, mlen, "out of memory for an exchange of %d values", n);
			xchg_publish_error(ctx, all, DPG_ERR_NOMEM, msg, deadline);
			return DPG_ERR_NOMEM;
		}
		vals[0] = (void *)v;
		lens[0] = vlen;
		st = DPG_OK;
		for (int i = 1; i < n; i++) {
			/* after the first miss, only look at who else is missing */
			int64_t dl = missing > 0 ? dpg_now_ms() + 20 : deadline;

			snprintf(key, sizeof(key), "%s/%d", prefix, i);
			rc = dpg_store_get(ctx->store, key, &vals[i], &lens[i], dl, &e);
			if (rc == DPG_NET_TIMEOUT) {
				int wr = world_ranks != NULL ? world_ranks[i] : i;
				int k = snprintf(list + lo, sizeof(list) - lo, "%s%d",
						 missing ? ", " : "", wr);

				if (k > 0 && (size_t)k < sizeof(list) - lo)
					lo += (size_t)k;
				missing++;
				vals[i] = NULL;
				continue;
			}
			if (rc != 0) {
				st = dpg_rt_store_status(rc);
				snprintf(msg, mlen, "%s", e.msg);
				break;
			}
		}
		if (st == DPG_OK && missing > 0) {
			st = DPG_ERR_TIMEOUT;
			snprintf(msg, mlen, "rank%s %s (of %d) did not arrive within "
				 "%.1f s (%d of %d arrived)", missing > 1 ? "s" : "",
				 list, n, (double)(dpg_now_ms() - t0) / 1000.0,
				 n - missing, n);
		}
		if (st == DPG_OK && check != NULL) {
			struct xchg tmp = { NULL, (const uint8_t **)vals, lens, n };

			st = check(arg, &tmp, msg, mlen);
		}
		if (st != DPG_OK) {
			xchg_publish_error(ctx, all, st, msg, deadline + XCHG_GRACE_MS);
			xchg_wait_acks(ctx, prefix, n - 1 - missing);
			for (int i = 1; i < n; i++)
				free(vals[i]);
			free(vals);
			free(lens);
			return st;
		}
		for (int i = 0; i < n; i++)
			total += 4 + lens[i];
		b = malloc(total);
		if (b == NULL) {
			snprintf(msg, mlen, "out of memory (%zu bytes) for an exchange",
				 total);
			st = DPG_ERR_NOMEM;
		} else {
			size_t o = 1;

			b[0] = 'T';
			for (int i = 0; i < n; i++) {
				put32(b + o, (uint32_t)lens[i]);
				if (lens[i] > 0)
					memcpy(b + o + 4, vals[i], lens[i]);
				o += 4 + lens[i];
			}
		}
		for (int i = 1; i < n; i++)
			free(vals[i]);
		free(vals);
		free(lens);
		if (st != DPG_OK) {
			xchg_publish_error(ctx, all, st, msg, deadline);
			return st;
		}
		if (total > DPG_STORE_VALUE_MAX) {
			free(b);
			snprintf(msg, mlen, "the exchanged values total %zu bytes, over "
				 "the store's limit of %u", total,
				 (unsigned)DPG_STORE_VALUE_MAX);
			xchg_publish_error(ctx, all, DPG_ERR_INVALID, msg, deadline);
			return DPG_ERR_INVALID;
		}
		rc = dpg_store_set(ctx->store, all, b, total, deadline, &e);
		if (rc != 0) {
			free(b);
			snprintf(msg, mlen, "%s", e.msg);
			return dpg_rt_store_status(rc);
		}
		x->blob = b;
		return xchg_parse(b, total, n, x, msg, mlen);
	}
}

/* ------------------------------------------------------------ comm list */

static void comm_link(struct dpg_ctx *ctx, struct rt_comm *rc)
{
	pthread_mutex_lock(&ctx->lock);
	rc->prev = NULL;
	rc->next = ctx->comms;
	if (ctx->comms != NULL)
		ctx->comms->prev = rc;
	ctx->comms = rc;
	pthread_mutex_unlock(&ctx->lock);
}

static void comm_unlink(struct dpg_ctx *ctx, struct rt_comm *rc)
{
	pthread_mutex_lock(&ctx->lock);
	if (rc->prev != NULL)
		rc->prev->next = rc->next;
	else if (ctx->comms == rc)
		ctx->comms = rc->next;
	if (rc->next != NULL)
		rc->next->prev = rc->prev;
	rc->next = rc->prev = NULL;
	pthread_mutex_unlock(&ctx->lock);
}

static struct rt_comm *comm_alloc(struct dpg_ctx *ctx, int rank, int size,
				  const char *name, enum dpg_comm_owner owner,
				  dpg_backend_t kind)
{
	struct rt_comm *rc = calloc(1, sizeof(*rc));

	if (rc == NULL)
		return NULL;
	rc->c.world_ranks = calloc((size_t)size, sizeof(int));
	if (rc->c.world_ranks == NULL) {
		free(rc);
		return NULL;
	}
	rc->c.ctx = ctx;
	rc->c.rank = rank;
	rc->c.size = size;
	snprintf(rc->c.name, sizeof(rc->c.name), "%s", name);
	rc->owner = owner;
	rc->kind = kind;
	return rc;
}

static void comm_free(struct rt_comm *rc)
{
	if (rc == NULL)
		return;
	free(rc->c.world_ranks);
	free(rc);
}

/* Start the backend of a filled-in comm (collective over its members). */
static dpg_status_t comm_start(struct dpg_ctx *ctx, struct rt_comm *rc,
			       struct dpg_err *e)
{
	int r;

	if (rc->kind == DPG_BACKEND_NCCL) {
#ifdef DPG_HAVE_NCCL
		r = dpg_nccl_comm_init(&rc->c, ctx->store, ctx->device,
				       (double)ctx->timeout_ms / 1000.0,
				       &ctx->abort_flag, e);
		return backend_status(r);
#else
		dpg_errf(e, "libdpg was built without NCCL");
		return DPG_ERR_UNSUPPORTED;
#endif
	}
	if (rc->c.size == 1) {
		rc->c.ops = &self_ops;
		return DPG_OK;
	}
	{
		struct dpg_cpu_opts o = {
			.store = ctx->store,
			.host = ctx->addr,
			.node = ctx->node,
			.timeout_s = (double)ctx->timeout_ms / 1000.0,
			.abort = &ctx->abort_flag,
		};

		r = dpg_cpu_comm_init(&rc->c, &o, e);
	}
	return backend_status(r);
}

/* ------------------------------------------------------------ addresses */

/* The local IPv4 address that routes to host (numeric), via a connected UDP
 * socket (no packet is sent). */
static int route_to(const char *host, char *buf, size_t len)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_DGRAM };
	struct addrinfo *res = NULL;
	struct sockaddr_in me;
	socklen_t sl = sizeof(me);
	int fd, ok = -1;

	if (getaddrinfo(host, "9", &hints, &res) != 0 || res == NULL)
		return -1;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0 &&
	    getsockname(fd, (struct sockaddr *)&me, &sl) == 0 &&
	    inet_ntop(AF_INET, &me.sin_addr, buf, (socklen_t)len) != NULL)
		ok = 0;
	if (fd >= 0)
		close(fd);
	freeaddrinfo(res);
	return ok;
}

static bool is_loopback(const char *addr)
{
	return strncmp(addr, "127.", 4) == 0;
}

/* Rank 0 must run on the host MASTER_ADDR names: try to bind there. */
static dpg_status_t check_master_local(struct dpg_ctx *ctx, struct dpg_err *e)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL, *a;
	char first[INET_ADDRSTRLEN] = "?";
	int g = getaddrinfo(ctx->j.master_addr, NULL, &hints, &res);

	if (g != 0) {
		dpg_errf(e, "cannot resolve MASTER_ADDR=%s: %s", ctx->j.master_addr,
			 gai_strerror(g));
		return DPG_ERR_ENV;
	}
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
			return DPG_OK;
		}
	}
	freeaddrinfo(res);
	dpg_errf(e, "MASTER_ADDR=%s (%s) is not an address of this host (%s), but "
		 "this process is rank 0: MASTER_ADDR must name the host that runs "
		 "rank 0", ctx->j.master_addr, first, ctx->node);
	return DPG_ERR_ENV;
}

/* ------------------------------------------------------------ init */

/* 0: NCCL not built, 1: built but no GPU, 2: usable. */
static int nccl_cap(const struct dpg_ctx *ctx)
{
#ifdef DPG_HAVE_NCCL
	if (ctx->j.backend == DPG_BACKEND_CPU || ctx->j.gpu_hint == 0)
		return 1;
	return dpg_nccl_device_count() > 0 ? 2 : 1;
#else
	(void)ctx;
	return 0;
#endif
}

static const char *cap_why(int cap)
{
	return cap == 0 ? "libdpg was built without NCCL" :
	       cap == 1 ? "it has no usable GPU" : "ok";
}

struct hello {
	int world_size, backend, cap;
	char version[16];
	char node[DPG_HOST_MAX];
	char addr[ADDR_STR_MAX];
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

static dpg_status_t hello_check(void *arg, const struct xchg *x, char *msg,
				size_t len)
{
	struct dpg_ctx *ctx = arg;
	struct hello h0, h;

	if (hello_parse(x->val[0], x->vlen[0], &h0) != 0)
		goto bad0;
	for (int i = 1; i < x->n; i++) {
		if (hello_parse(x->val[i], x->vlen[i], &h) != 0) {
			snprintf(msg, len, "rank %d sent a malformed greeting (a "
				 "different libdpg?)", i);
			return DPG_ERR_PEER;
		}
		if (h.world_size != h0.world_size) {
			snprintf(msg, len, "inconsistent environment: rank %d (%s) has "
				 "world size %d but rank 0 (%s) has %d (WORLD_SIZE / "
				 "SLURM_STEP_NUM_TASKS differ between tasks?)", i, h.node,
				 h.world_size, h0.node, h0.world_size);
			return DPG_ERR_ENV;
		}
		if (h.backend != h0.backend) {
			snprintf(msg, len, "inconsistent environment: rank %d (%s) asks "
				 "for backend %d but rank 0 (%s) for %d (DPG_BACKEND "
				 "differs between tasks)", i, h.node, h.backend, h0.node,
				 h0.backend);
			return DPG_ERR_ENV;
		}
		if (strcmp(h.version, h0.version) != 0) {
			snprintf(msg, len, "rank %d (%s) runs libdpg %s but rank 0 (%s) "
				 "runs %s", i, h.node, h.version, h0.node, h0.version);
			return DPG_ERR_ENV;
		}
	}
	(void)ctx;
	return DPG_OK;
bad0:
	snprintf(msg, len, "internal: malformed greeting of rank 0");
	return DPG_ERR_SYSTEM;
}

/* Fill in what the environment did not say from the ranks' node names. */
static void derive_layout(struct dpg_ctx *ctx)
{
	int n = ctx->j.world_size, me = ctx->j.rank, nodes = 0, my_node = -1;
	int lrank = 0, lsize = 0;
	bool need = ctx->j.local_rank < 0 || ctx->j.local_world_size < 0 ||
		    ctx->j.node_rank < 0 || ctx->j.num_nodes < 0;

	/* quadratic in the worst case: only when the environment said nothing */
	for (int r = 0; need && r < n; r++) {
		bool first = true;

		for (int q = 0; q < r; q++)
			if (strcmp(ctx->ranks[q].node, ctx->ranks[r].node) == 0) {
				first = false;
				break;
			}
		if (first) {
			if (strcmp(ctx->ranks[r].node, ctx->ranks[me].node) == 0)
				my_node = nodes;
			nodes++;
		}
		if (strcmp(ctx->ranks[r].node, ctx->ranks[me].node) == 0) {
			if (r < me)
				lrank++;
			lsize++;
		}
	}
	if (need && ctx->j.local_rank < 0)
		ctx->j.local_rank = lrank;
	if (need && ctx->j.local_world_size < 0)
		ctx->j.local_world_size = lsize;
	if (need && ctx->j.node_rank < 0)
		ctx->j.node_rank = my_node;
	if (need && ctx->j.num_nodes < 0)
		ctx->j.num_nodes = nodes;
	/* an address on lo is fine only while every rank shares this node */
	if (is_loopback(ctx->addr)) {
		for (int r = 0; r < n; r++) {
			char via[ADDR_STR_MAX];

			if (strcmp(ctx->ranks[r].node, ctx->node) == 0 ||
			    is_loopback(ctx->ranks[r].addr))
				continue;
			if (route_to(ctx->ranks[r].addr, via, sizeof(via)) == 0 &&
			    !is_loopback(via)) {
				snprintf(ctx->addr, sizeof(ctx->addr), "%s", via);
				snprintf(ctx->ranks[me].addr, sizeof(ctx->ranks[me].addr),
					 "%s", via);
			}
			break;
		}
	}
}

static dpg_status_t choose_backend(struct dpg_ctx *ctx, int ncap_min,
				   int min_rank, struct dpg_err *e)
{
	switch (ctx->j.backend) {
	case DPG_BACKEND_CPU:
		ctx->backend = DPG_BACKEND_CPU;
		return DPG_OK;
	case DPG_BACKEND_NCCL:
		if (ncap_min < 2) {
			dpg_errf(e, "the NCCL backend was asked for (DPG_BACKEND or "
				 "opts.backend) but rank %d (%s) cannot use it: %s",
				 min_rank, dpg_ctx_rank_host(ctx, min_rank),
				 cap_why(ncap_min));
			return DPG_ERR_UNSUPPORTED;
		}
		ctx->backend = DPG_BACKEND_NCCL;
		return DPG_OK;
	case DPG_BACKEND_AUTO:
		ctx->backend = ncap_min >= 2 ? DPG_BACKEND_NCCL : DPG_BACKEND_CPU;
		return DPG_OK;
	}
	dpg_errf(e, "unknown backend %d", (int)ctx->j.backend);
	return DPG_ERR_INVALID;
}

static dpg_status_t pick_device(struct dpg_ctx *ctx, struct dpg_err *e)
{
	ctx->device = ctx->j.device;
	if (ctx->backend != DPG_BACKEND_NCCL || ctx->device >= 0)
		return DPG_OK;
#ifdef DPG_HAVE_NCCL
	if (dpg_nccl_pick_device(ctx->j.gpu_busid[0] ? ctx->j.gpu_busid : NULL,
				 ctx->j.local_rank < 0 ? 0 : ctx->j.local_rank,
				 &ctx->device, e) != 0)
		return DPG_ERR_BACKEND;
	return DPG_OK;
#else
	(void)e;
	return DPG_ERR_UNSUPPORTED;
#endif
}

static dpg_status_t init_fail(struct dpg_ctx *ctx, dpg_status_t st,
			      const char *msg)
{
	dpg_ctx_seterr(ctx, "%s dpg_init: %s", ctx->who, msg);
	return st;
}

static dpg_status_t make_world(struct dpg_ctx *ctx, struct dpg_err *e)
{
	struct rt_comm *w = comm_alloc(ctx, ctx->j.rank, ctx->j.world_size, "w",
				       DPG_OWNER_CTX, ctx->backend);
	dpg_status_t st;

	if (w == NULL) {
		dpg_errf(e, "out of memory for the world communicator");
		return DPG_ERR_NOMEM;
	}
	for (int r = 0; r < ctx->j.world_size; r++)
		w->c.world_ranks[r] = r;
	st = comm_start(ctx, w, e);
	if (st != DPG_OK) {
		comm_free(w);
		return st;
	}
	ctx->world = w;
	comm_link(ctx, w);
	return DPG_OK;
}

static dpg_status_t connect_store(struct dpg_ctx *ctx, struct dpg_err *e)
{
	uint8_t secret[DPG_STORE_SECRET_MAX];
	size_t slen = 0;
	int64_t deadline = dpg_now_ms() + ctx->timeout_ms;
	dpg_status_t st;
	int rc;

	if (dpg_secret_parse(ctx->j.secret, secret, sizeof(secret), &slen, e) != 0)
		return DPG_ERR_AUTH;
	if (ctx->j.rank == 0) {
		st = check_master_local(ctx, e);
		if (st != DPG_OK)
			return st;
		if (dpg_store_server_start(NULL, ctx->j.master_port, secret, slen,
					   &ctx->srv, e) != 0) {
			dpg_err_prefix(e, "rank 0 cannot serve the rendezvous store "
				       "(MASTER_PORT taken by another job, or by a "
				       "process of this one that also claims rank 0?)");
			explicit_bzero(secret, sizeof(secret));
			return DPG_ERR_SYSTEM;
		}
	}
	rc = dpg_store_connect(ctx->j.master_addr, ctx->j.master_port, secret, slen,
			       deadline, &ctx->abort_flag, &ctx->store, e);
	explicit_bzero(secret, sizeof(secret));
	if (rc != 0) {
		st = dpg_rt_store_status(rc);
		if (st == DPG_ERR_AUTH)
			dpg_err_prefix(e, "the store of rank 0 refused this rank's job "
				       "secret (DPG_SECRET differs between ranks, or "
				       "MASTER_ADDR:MASTER_PORT is another job's store)");
		else if (st == DPG_ERR_TIMEOUT)
			dpg_err_prefix(e, "rank 0's store did not answer (is rank 0 "
				       "running, and MASTER_ADDR/MASTER_PORT right?)");
		return st;
	}
	return DPG_OK;
}

/* Claim the rank in the store: two processes with the same RANK fail here
 * instead of hanging. */
static dpg_status_t claim_rank(struct dpg_ctx *ctx, struct dpg_err *e)
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
		return dpg_rt_store_status(rc);
	if (cur != NULL && (clen != strlen(me) || memcmp(cur, me, clen) != 0)) {
		dpg_errf(e, "inconsistent environment: rank %d is already taken by "
			 "%.*s (the rank comes from %s: do several processes get "
			 "the same one?)", ctx->j.rank,
			 (int)(clen > 100 ? 100 : clen), (char *)cur,
			 dpg_join_src_name(ctx->j.src));
		free(cur);
		return DPG_ERR_ENV;
	}
	free(cur);
	return DPG_OK;
}

static dpg_status_t join_world(struct dpg_ctx *ctx, struct dpg_err *e)
{
	char prefix[KEY_MAX + 1], hello[512], msg[DPG_ERR_MSG_MAX];
	struct xchg x;
	struct hello h;
	dpg_status_t st;
	int n = ctx->j.world_size, cap_min = 3, cap_rank = 0;

	st = connect_store(ctx, e);
	if (st != DPG_OK)
		return st;
	st = claim_rank(ctx, e);
	if (st != DPG_OK)
		return st;
	if (route_to(ctx->j.master_addr, ctx->addr, sizeof(ctx->addr)) != 0)
		snprintf(ctx->addr, sizeof(ctx->addr), "127.0.0.1");
	snprintf(hello, sizeof(hello), "dpg1 %d %d %d %s %s %s", n,
		 (int)ctx->j.backend, nccl_cap(ctx), dpg_version(), ctx->node,
		 ctx->addr);
	snprintf(prefix, sizeof(prefix), "%s/hello", ctx->ns);
	st = xchg_run(ctx, prefix, ctx->j.rank, n, NULL, hello, strlen(hello),
		      hello_check, ctx, &x, msg, sizeof(msg));
	if (st != DPG_OK) {
		xchg_free(&x);
		dpg_errf(e, "joining the job: %s", msg);
		return st;
	}
	ctx->ranks = calloc((size_t)n, sizeof(*ctx->ranks));
	if (ctx->ranks == NULL) {
		xchg_free(&x);
		dpg_errf(e, "out of memory for %d rank records", n);
		return DPG_ERR_NOMEM;
	}
	for (int r = 0; r < n; r++) {
		if (hello_parse(x.val[r], x.vlen[r], &h) != 0) {
			xchg_free(&x);
			dpg_errf(e, "malformed greeting of rank %d", r);
			return DPG_ERR_PEER;
		}
		snprintf(ctx->ranks[r].node, sizeof(ctx->ranks[r].node), "%s", h.node);
		snprintf(ctx->ranks[r].addr, sizeof(ctx->ranks[r].addr), "%s", h.addr);
		ctx->ranks[r].cap = h.cap;
		if (h.cap < cap_min) {
			cap_min = h.cap;
			cap_rank = r;
		}
	}
	xchg_free(&x);
	derive_layout(ctx);
	st = choose_backend(ctx, cap_min, cap_rank, e);
	if (st != DPG_OK)
		return st;
	st = pick_device(ctx, e);
	if (st != DPG_OK)
		return st;
	return make_world(ctx, e);
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

dpg_status_t dpg_init(const dpg_init_opts_t *opts, dpg_ctx_t **out)
{
	struct dpg_ctx *ctx;
	struct dpg_err e = { { 0 } };
	dpg_status_t st;
	int rc;

	if (out == NULL)
		return DPG_ERR_INVALID;
	*out = NULL;
	ctx = calloc(1, sizeof(*ctx));
	if (ctx == NULL)
		return DPG_ERR_NOMEM;
	pthread_mutex_init(&ctx->lock, NULL);
	ctx->device = -1;
	ctx->backend = DPG_BACKEND_CPU;
	*out = ctx;
	snprintf(ctx->who, sizeof(ctx->who), "dpg");
	snprintf(ctx->ns, sizeof(ctx->ns), "dpg");

	rc = dpg_join_resolve(opts, NULL, NULL, &ctx->j, &e);
	set_node_name(ctx);
	if (rc != 0) {
		ctx->j.world_size = 0;
		ctx->j.rank = -1;
		dpg_ctx_seterr(ctx, "dpg_init on %s: %s", ctx->node, e.msg);
		return backend_status(rc);
	}
	snprintf(ctx->who, sizeof(ctx->who), "rank %d (%s)", ctx->j.rank, ctx->node);
	snprintf(ctx->ns, sizeof(ctx->ns), "dpg/%s", ctx->j.ns);
	ctx->timeout_ms = (int64_t)(ctx->j.timeout_s * 1000.0);
	if (ctx->timeout_ms < 1)
		ctx->timeout_ms = 1;

	if (ctx->j.world_size == 1) {
		int cap = nccl_cap(ctx);

		snprintf(ctx->addr, sizeof(ctx->addr), "127.0.0.1");
		st = choose_backend(ctx, cap, 0, &e);
		if (st == DPG_OK)
			st = pick_device(ctx, &e);
		if (st == DPG_OK)
			st = make_world(ctx, &e);
	} else {
		st = join_world(ctx, &e);
	}
	if (st != DPG_OK)
		return init_fail(ctx, st, e.msg);
	ctx->ready = true;
	return DPG_OK;
}

/* ------------------------------------------------------------ finalize, abort */

dpg_status_t dpg_ctx_track_mesh(struct dpg_ctx *ctx, dpg_mesh_t *mesh, int add)
{
	if (ctx == NULL || mesh == NULL)
		return DPG_ERR_INVALID;
	if (!add) {
		for (size_t i = 0; i < ctx->nmesh; i++)
			if (ctx->meshes[i] == mesh) {
				ctx->meshes[i] = ctx->meshes[--ctx->nmesh];
				break;
			}
		return DPG_OK;
	}
	if (ctx->nmesh == ctx->mesh_cap) {
		size_t cap = ctx->mesh_cap ? ctx->mesh_cap * 2 : 4;
		dpg_mesh_t **m = realloc(ctx->meshes, cap * sizeof(*m));

		if (m == NULL)
			return DPG_ERR_NOMEM;
		ctx->meshes = m;
		ctx->mesh_cap = cap;
	}
	ctx->meshes[ctx->nmesh++] = mesh;
	return DPG_OK;
}

dpg_status_t dpg_abort(dpg_ctx_t *ctx)
{
	if (ctx == NULL)
		return DPG_ERR_INVALID;
	__atomic_store_n(&ctx->abort_flag, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_lock(&ctx->lock);
	for (struct rt_comm *rc = ctx->comms; rc != NULL; rc = rc->next)
		if (rc->c.ops != NULL && rc->c.ops->abort != NULL)
			rc->c.ops->abort(&rc->c);
	pthread_mutex_unlock(&ctx->lock);
	return DPG_OK;
}

/* Ranks leave together, so that rank 0 keeps serving the store until no one
 * needs it; skipped after a failure (a dead peer would never arrive). */
static dpg_status_t goodbye(struct dpg_ctx *ctx)
{
	char name[KEY_MAX + 1], left[KEY_MAX + 1];
	struct dpg_err e = { { 0 } };
	int64_t deadline = dpg_now_ms() + ctx->timeout_ms, n = 0;
	int rc;

	snprintf(name, sizeof(name), "%s/bye", ctx->ns);
	snprintf(left, sizeof(left), "%s/bye/left", ctx->ns);
	rc = dpg_store_barrier(ctx->store, name, ctx->j.world_size, deadline, &e);
	if (rc != 0) {
		dpg_ctx_seterr(ctx, "%s dpg_finalize: %s", ctx->who, e.msg);
		return dpg_rt_store_status(rc);
	}
	if (ctx->j.rank != 0)
		return dpg_store_add(ctx->store, left, 1, NULL, deadline, &e) == 0 ?
		       DPG_OK : DPG_ERR_PEER;
	deadline = dpg_now_ms() + FINALIZE_LINGER_MS;
	while (dpg_store_add(ctx->store, left, 0, &n, deadline, &e) == 0 &&
	       n < ctx->j.world_size - 1 && dpg_now_ms() < deadline)
		usleep(2000);
	return DPG_OK;
}

/* On the CPU backend, a barrier of the world before the store's goodbye:
 * its links notice a rank that died after the last collective within a
 * second, where the store barrier would wait for it until the deadline.
 * (NCCL cannot tell a dead peer from a slow one: there the goodbye alone.) */
static dpg_status_t farewell(struct dpg_ctx *ctx)
{
	char why[ERR_MAX];
	dpg_status_t st;

	if (ctx->backend != DPG_BACKEND_CPU || !ctx->ready || ctx->failed || aborted(ctx) ||
	    ctx->j.world_size < 2)
		return DPG_OK;
	st = dpg_barrier(&ctx->world->c);
	if (st != DPG_OK) {
		ctx->failed = true;
		snprintf(why, sizeof(why), "%s", ctx->err);
		dpg_ctx_seterr(ctx, "%s dpg_finalize: %s", ctx->who, why);
	}
	return st;
}

dpg_status_t dpg_finalize(dpg_ctx_t *ctx)
{
	dpg_status_t st = DPG_OK;
	struct rt_comm *rc;

	if (ctx == NULL)
		return DPG_OK;
	while (ctx->nmesh > 0)
		dpg_mesh_destroy(ctx->meshes[ctx->nmesh - 1]);
	free(ctx->meshes);
	/* user comms next (oldest first), the world last */
	for (;;) {
		struct rt_comm *victim = NULL;

		pthread_mutex_lock(&ctx->lock);
		for (rc = ctx->comms; rc != NULL; rc = rc->next)
			if (rc != ctx->world)
				victim = rc;	/* the list is newest first */
		pthread_mutex_unlock(&ctx->lock);
		if (victim == NULL)
			break;
		dpg_comm_destroy_owned(&victim->c);
	}
	if (ctx->world != NULL) {
		st = farewell(ctx);
		dpg_comm_destroy_owned(&ctx->world->c);
		ctx->world = NULL;
	}
	if (st == DPG_OK && ctx->store != NULL && ctx->ready && !ctx->failed && !aborted(ctx) &&
	    ctx->j.world_size > 1)
		st = goodbye(ctx);
	dpg_store_close(ctx->store);
	dpg_store_server_stop(ctx->srv);
	free(ctx->ranks);
	pthread_mutex_destroy(&ctx->lock);
	explicit_bzero(ctx->j.secret, sizeof(ctx->j.secret));
	free(ctx);
	return st;
}

/* ------------------------------------------------------------ collectives */

static bool comm_ok(const dpg_comm_t *c)
{
	return c != NULL && c->ctx != NULL && c->ops != NULL;
}

static dpg_status_t invalid(dpg_comm_t *c, const char *op, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static dpg_status_t invalid(dpg_comm_t *c, const char *op, const char *fmt, ...)
{
	char why[300];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	dpg_ctx_seterr(c->ctx, "%s %s on %s: invalid argument: %s",
		       dpg_ctx_who(c->ctx), op, c->name, why);
	return DPG_ERR_INVALID;
}

/* Checks common to every collective; 0 = go on. */
static dpg_status_t precheck(dpg_comm_t *c, const char *op)
{
	c->ctx->err[0] = '\0';
	if (aborted(c->ctx)) {
		dpg_ctx_seterr(c->ctx, "%s %s #%" PRIu64 " on %s: aborted (dpg_abort "
			       "was called)", dpg_ctx_who(c->ctx), op, c->seq, c->name);
		return DPG_ERR_ABORTED;
	}
	return DPG_OK;
}

static dpg_status_t check_dtype_op(dpg_comm_t *c, const char *op,
				   dpg_dtype_t dt, int redop)
{
	if (dpg_dtype_size(dt) == 0)
		return invalid(c, op, "unknown dtype %d", (int)dt);
	if (redop >= 0 && redop > (int)DPG_MAX)
		return invalid(c, op, "unknown reduction op %d", redop);
	return DPG_OK;
}

/* n elements of dt times k fit in size_t. */
static bool fits(size_t n, dpg_dtype_t dt, size_t k)
{
	size_t b = dpg_dtype_size(dt);

	return k == 0 || b == 0 || n <= SIZE_MAX / b / k;
}

static dpg_status_t finish(dpg_comm_t *c, const char *op, uint64_t seq, int r,
			   struct dpg_err *e)
{
	dpg_status_t st = backend_status(r);

	c->seq++;
	if (st == DPG_OK)
		return DPG_OK;
	if (st != DPG_ERR_INVALID)
		c->ctx->failed = true;
	if (e->msg[0] == '\0')
		snprintf(e->msg, sizeof(e->msg), "%s", st == DPG_ERR_ABORTED ?
			 "aborted (dpg_abort was called)" : dpg_strerror(st));
	dpg_ctx_seterr(c->ctx, "%s %s #%" PRIu64 " on %s: %s", dpg_ctx_who(c->ctx),
		       op, seq, c->name, e->msg);
	return st;
}

dpg_status_t dpg_allreduce(dpg_comm_t *comm, const void *send, void *recv,
			   size_t count, dpg_dtype_t dtype, dpg_op_t op,
			   void *stream)
{
	struct dpg_err e = { { 0 } };
	dpg_status_t st;
	uint64_t seq;

	if (!comm_ok(comm))
		return DPG_ERR_INVALID;
	if ((st = precheck(comm, "allreduce")) != DPG_OK ||
	    (st = check_dtype_op(comm, "allreduce", dtype, (int)op)) != DPG_OK)
		return st;
	if ((int)op < 0)
		return invalid(comm, "allreduce", "unknown reduction op %d", (int)op);
	if (count > 0 && (send == NULL || recv == NULL))
		return invalid(comm, "allreduce", "NULL buffer for %zu elements", count);
	if (!fits(count, dtype, 1))
		return invalid(comm, "allreduce", "count %zu overflows", count);
	seq = comm->seq;
	return finish(comm, "allreduce", seq,
		      comm->ops->allreduce(comm, send, recv, count, dtype, op,
					   stream, &e), &e);
}

dpg_status_t dpg_reduce_scatter(dpg_comm_t *comm, const void *send, void *recv,
				size_t recvcount, dpg_dtype_t dtype, dpg_op_t op,
				void *stream)
{
	struct dpg_err e = { { 0 } };
	dpg_status_t st;
	uint64_t seq;

	if (!comm_ok(comm))
		return DPG_ERR_INVALID;
	if ((st = precheck(comm, "reduce_scatter")) != DPG_OK ||
	    (st = check_dtype_op(comm, "reduce_scatter", dtype, (int)op)) != DPG_OK)
		return st;
	if ((int)op < 0)
		return invalid(comm, "reduce_scatter", "unknown reduction op %d",
			       (int)op);
	if (recvcount > 0 && (send == NULL || recv == NULL))
		return invalid(comm, "reduce_scatter", "NULL buffer for %zu elements",
			       recvcount);
	if (!fits(recvcount, dtype, (size_t)comm->size))
		return invalid(comm, "reduce_scatter", "recvcount %zu x %d ranks "
			       "overflows", recvcount, comm->size);
	seq = comm->seq;
	return finish(comm, "reduce_scatter", seq,
		      comm->ops->reduce_scatter(comm, send, recv, recvcount, dtype,
						op, stream, &e), &e);
}

dpg_status_t dpg_all_gather(dpg_comm_t *comm, const void *send, void *recv,
			    size_t sendcount, dpg_dtype_t dtype, void *stream)
{
	struct dpg_err e = { { 0 } };
	dpg_status_t st;
	uint64_t seq;

	if (!comm_ok(comm))
		return DPG_ERR_INVALID;
	if ((st = precheck(comm, "all_gather")) != DPG_OK ||
	    (st = check_dtype_op(comm, "all_gather", dtype, -1)) != DPG_OK)
		return st;
	if (sendcount > 0 && (send == NULL || recv == NULL))
		return invalid(comm, "all_gather", "NULL buffer for %zu elements",
			       sendcount);
	if (!fits(sendcount, dtype, (size_t)comm->size))
		return invalid(comm, "all_gather", "sendcount %zu x %d ranks "
			       "overflows", sendcount, comm->size);
	seq = comm->seq;
	return finish(comm, "all_gather", seq,
		      comm->ops->all_gather(comm, send, recv, sendcount, dtype,
					    stream, &e), &e);
}

dpg_status_t dpg_broadcast(dpg_comm_t *comm, void *buf, size_t count,
			   dpg_dtype_t dtype, int root, void *stream)
{
	struct dpg_err e = { { 0 } };
	dpg_status_t st;
	uint64_t seq;

	if (!comm_ok(comm))
		return DPG_ERR_INVALID;
	if ((st = precheck(comm, "broadcast")) != DPG_OK ||
	    (st = check_dtype_op(comm, "broadcast", dtype, -1)) != DPG_OK)
		return st;
	if (root < 0 || root >= comm->size)
		return invalid(comm, "broadcast", "root %d is not a rank of the %d "
			       "of %s", root, comm->size, comm->name);
	if (count > 0 && buf == NULL)
		return invalid(comm, "broadcast", "NULL buffer for %zu elements", count);
	if (!fits(count, dtype, 1))
		return invalid(comm, "broadcast", "count %zu overflows", count);
	seq = comm->seq;
	return finish(comm, "broadcast", seq,
		      comm->ops->broadcast(comm, buf, count, dtype, root, stream,
					   &e), &e);
}

dpg_status_t dpg_barrier(dpg_comm_t *comm)
{
	struct dpg_err e = { { 0 } };
	dpg_status_t st;
	uint64_t seq;

	if (!comm_ok(comm))
		return DPG_ERR_INVALID;
	if ((st = precheck(comm, "barrier")) != DPG_OK)
		return st;
	seq = comm->seq;
	return finish(comm, "barrier", seq, comm->ops->barrier(comm, &e), &e);
}

/* ------------------------------------------------------------ all_gather_bytes */

static dpg_status_t agb_store(dpg_comm_t *comm, const void *buf, size_t len,
			      struct xchg *x)
{
	struct rt_comm *rc = rc_of(comm);
	struct dpg_ctx *ctx = comm->ctx;
	char prefix[KEY_MAX + 1], msg[DPG_ERR_MSG_MAX];
	dpg_status_t st;

	snprintf(prefix, sizeof(prefix), "%s/c/%s/agb/%" PRIu64, ctx->ns,
		 comm->name, rc->nxchg++);
	if (len > DPG_STORE_VALUE_MAX)
		return invalid(comm, "all_gather_bytes", "%zu bytes: over the %u "
			       "bytes a store exchange carries (NCCL communicators "
			       "gather bytes through the store)", len,
			       (unsigned)DPG_STORE_VALUE_MAX);
	st = xchg_run(ctx, prefix, comm->rank, comm->size, comm->world_ranks, buf,
		      len, NULL, NULL, x, msg, sizeof(msg));
	if (st != DPG_OK) {
		ctx->failed = true;
		dpg_ctx_seterr(ctx, "%s all_gather_bytes on %s: %s", ctx->who,
			       comm->name, msg);
	}
	return st;
}

dpg_status_t dpg_all_gather_bytes(dpg_comm_t *comm, const void *buf, size_t len,
				  void **out, size_t **offsets, size_t **lens)
{
	int n;
	int64_t mine, *all = NULL;
	size_t pad = 0, total = 0;
	uint8_t *sendb = NULL, *recvb = NULL, *res = NULL;
	size_t *offs = NULL, *ls = NULL;
	struct xchg x = { 0 };
	dpg_status_t st;

	if (out != NULL)
		*out = NULL;
	if (offsets != NULL)
		*offsets = NULL;
	if (lens != NULL)
		*lens = NULL;
	if (!comm_ok(comm))
		return DPG_ERR_INVALID;
	if ((st = precheck(comm, "all_gather_bytes")) != DPG_OK)
		return st;
	if (out == NULL || offsets == NULL || lens == NULL)
		return invalid(comm, "all_gather_bytes", "NULL output pointer");
	if (len > 0 && buf == NULL)
		return invalid(comm, "all_gather_bytes", "NULL buffer of %zu bytes", len);
	if (len > (size_t)INT64_MAX / 2)
		return invalid(comm, "all_gather_bytes", "%zu bytes is too large", len);
	n = comm->size;
	offs = calloc((size_t)n, sizeof(*offs));
	ls = calloc((size_t)n, sizeof(*ls));
	all = calloc((size_t)n, sizeof(*all));
	if (offs == NULL || ls == NULL || all == NULL) {
		st = DPG_ERR_NOMEM;
		dpg_ctx_seterr(comm->ctx, "%s all_gather_bytes on %s: out of memory",
			       dpg_ctx_who(comm->ctx), comm->name);
		goto out;
	}

	if (rc_of(comm)->kind == DPG_BACKEND_NCCL && n > 1) {
		/* NCCL buffers live on the GPU: gather host bytes via the store */
		st = agb_store(comm, buf, len, &x);
		if (st != DPG_OK)
			goto out;
		for (int r = 0; r < n; r++)
			total += x.vlen[r];
		res = malloc(total > 0 ? total : 1);
		if (res == NULL) {
			st = DPG_ERR_NOMEM;
			goto out;
		}
		for (int r = 0, o = 0; r < n; r++) {
			offs[r] = (size_t)o;
			ls[r] = x.vlen[r];
			if (x.vlen[r] > 0)
				memcpy(res + o, x.val[r], x.vlen[r]);
			o += (int)x.vlen[r];
		}
		goto done;
	}

	/* sizes, then one padded all_gather of the bytes */
	mine = (int64_t)len;
	st = dpg_all_gather(comm, &mine, all, 1, DPG_I64, NULL);
	if (st != DPG_OK)
		goto out;
	for (int r = 0; r < n; r++) {
		if (all[r] < 0 || (uint64_t)all[r] > (uint64_t)SIZE_MAX / 2 ||
		    total > SIZE_MAX / 2) {
			st = DPG_ERR_PEER;
			dpg_ctx_seterr(comm->ctx, "%s all_gather_bytes on %s: rank %d "
				       "sent an impossible length %" PRId64,
				       dpg_ctx_who(comm->ctx), comm->name,
				       comm->world_ranks[r], all[r]);
			goto out;
		}
		ls[r] = (size_t)all[r];
		offs[r] = total;
		total += ls[r];
		if (ls[r] > pad)
			pad = ls[r];
	}
	pad = (pad + 7) & ~(size_t)7;
	if (pad > 0) {
		if (pad > SIZE_MAX / (size_t)n) {
			st = DPG_ERR_NOMEM;
			goto out;
		}
		sendb = calloc(1, pad);
		recvb = malloc(pad * (size_t)n);
		if (sendb == NULL || recvb == NULL) {
			st = DPG_ERR_NOMEM;
			dpg_ctx_seterr(comm->ctx, "%s all_gather_bytes on %s: out of "
				       "memory for %d x %zu bytes",
				       dpg_ctx_who(comm->ctx), comm->name, n, pad);
			goto out;
		}
		if (len > 0)
			memcpy(sendb, buf, len);
		st = dpg_all_gather(comm, sendb, recvb, pad / 8, DPG_I64, NULL);
		if (st != DPG_OK)
			goto out;
	}
	res = malloc(total > 0 ? total : 1);
	if (res == NULL) {
		st = DPG_ERR_NOMEM;
		goto out;
	}
	for (int r = 0; r < n; r++)
		if (ls[r] > 0)
			memcpy(res + offs[r], recvb + (size_t)r * pad, ls[r]);
done:
	*out = res;
	*offsets = offs;
	*lens = ls;
	res = NULL;
	offs = ls = NULL;
	st = DPG_OK;
out:
	if (st == DPG_ERR_NOMEM && comm->ctx->err[0] == '\0')
		dpg_ctx_seterr(comm->ctx, "%s all_gather_bytes on %s: out of memory",
			       dpg_ctx_who(comm->ctx), comm->name);
	xchg_free(&x);
	free(all);
	free(sendb);
	free(recvb);
	free(res);
	free(offs);
	free(ls);
	return st;
}

/* ------------------------------------------------------------ split, destroy */

struct member {
	int color, key, rank;
};

static int member_cmp(const void *a, const void *b)
{
	const struct member *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return (x->rank > y->rank) - (x->rank < y->rank);
}

/* A child's name: unique in the job because the parent's is and the split
 * counter orders the parent's splits; hashed when it gets long. */
static void child_name(char *buf, size_t len, const char *parent, uint64_t n,
		       int color)
{
	char full[256];
	uint64_t h = 1469598103934665603ULL;

	snprintf(full, sizeof(full), "%s.%" PRIu64 ".%d", parent, n, color);
	if (strlen(full) < len) {
		copy_str(buf, len, full);
		return;
	}
	for (const char *p = full; *p != '\0'; p++)
		h = (h ^ (uint8_t)*p) * 1099511628211ULL;
	snprintf(buf, len, "h%016" PRIx64, h);
}

dpg_status_t dpg_comm_split_owned(dpg_comm_t *comm, int color, int key,
				  enum dpg_comm_owner owner, dpg_comm_t **out)
{
	struct rt_comm *parent, *child = NULL;
	struct dpg_ctx *ctx;
	struct member *m = NULL;
	struct xchg x = { 0 };
	char prefix[KEY_MAX + 1], msg[DPG_ERR_MSG_MAX], name[64];
	uint8_t mine[8];
	struct dpg_err e = { { 0 } };
	dpg_status_t st;
	uint64_t nsplit;
	int nm = 0, me = -1;

	if (out != NULL)
		*out = NULL;
	if (!comm_ok(comm))
		return DPG_ERR_INVALID;
	if ((st = precheck(comm, "comm_split")) != DPG_OK)
		return st;
	if (out == NULL)
		return invalid(comm, "comm_split", "NULL output pointer");
	parent = rc_of(comm);
	ctx = comm->ctx;
	nsplit = parent->nsplit++;

	m = calloc((size_t)comm->size, sizeof(*m));
	if (m == NULL) {
		dpg_ctx_seterr(ctx, "%s comm_split on %s: out of memory", ctx->who,
			       comm->name);
		return DPG_ERR_NOMEM;
	}
	if (comm->size == 1) {
		m[0] = (struct member){ color, key, 0 };
	} else {
		snprintf(prefix, sizeof(prefix), "%s/c/%s/split/%" PRIu64, ctx->ns,
			 comm->name, nsplit);
		put32(mine, (uint32_t)color);
		put32(mine + 4, (uint32_t)key);
		st = xchg_run(ctx, prefix, comm->rank, comm->size, comm->world_ranks,
			      mine, sizeof(mine), NULL, NULL, &x, msg, sizeof(msg));
		if (st != DPG_OK) {
			ctx->failed = true;
			dpg_ctx_seterr(ctx, "%s comm_split #%" PRIu64 " on %s: %s",
				       ctx->who, nsplit, comm->name, msg);
			goto out;
		}
		for (int r = 0; r < comm->size; r++) {
			if (x.vlen[r] != 8) {
				st = DPG_ERR_PEER;
				dpg_ctx_seterr(ctx, "%s comm_split on %s: rank %d sent a "
					       "malformed entry", ctx->who, comm->name,
					       comm->world_ranks[r]);
				goto out;
			}
			m[r] = (struct member){ (int)get32(x.val[r]),
						(int)get32(x.val[r] + 4), r };
		}
	}
	if (color < 0) {
		st = DPG_OK;
		goto out;
	}
	/* members of my color, ordered by (key, parent rank) */
	for (int r = 0; r < comm->size; r++)
		if (m[r].color == color)
			m[nm++] = m[r];
	qsort(m, (size_t)nm, sizeof(*m), member_cmp);
	for (int i = 0; i < nm; i++)
		if (m[i].rank == comm->rank)
			me = i;
	child_name(name, sizeof(name), comm->name, nsplit, color);
	child = comm_alloc(ctx, me, nm, name, owner, parent->kind);
	if (child == NULL) {
		st = DPG_ERR_NOMEM;
		dpg_ctx_seterr(ctx, "%s comm_split on %s: out of memory", ctx->who,
			       comm->name);
		goto out;
	}
	for (int i = 0; i < nm; i++)
		child->c.world_ranks[i] = comm->world_ranks[m[i].rank];
	st = comm_start(ctx, child, &e);
	if (st != DPG_OK) {
		ctx->failed = true;
		dpg_ctx_seterr(ctx, "%s comm_split on %s: creating %s (%d ranks): %s",
			       ctx->who, comm->name, name, nm, e.msg);
		comm_free(child);
		goto out;
	}
	comm_link(ctx, child);
	*out = &child->c;
out:
	xchg_free(&x);
	free(m);
	return st;
}

dpg_status_t dpg_comm_split(dpg_comm_t *comm, int color, int key,
			    dpg_comm_t **out)
{
	return dpg_comm_split_owned(comm, color, key, DPG_OWNER_USER, out);
}

dpg_status_t dpg_comm_destroy_owned(dpg_comm_t *comm)
{
	struct rt_comm *rc;

	if (comm == NULL)
		return DPG_OK;
	rc = rc_of(comm);
	if (comm->ctx != NULL)
		comm_unlink(comm->ctx, rc);
	if (comm->ops != NULL && comm->ops->destroy != NULL)
		comm->ops->destroy(comm);
	comm_free(rc);
	return DPG_OK;
}

dpg_status_t dpg_comm_destroy(dpg_comm_t *comm)
{
	struct rt_comm *rc;

	if (comm == NULL)
		return DPG_OK;
	rc = rc_of(comm);
	if (rc->owner != DPG_OWNER_USER) {
		dpg_ctx_seterr(comm->ctx, "%s comm_destroy: %s belongs to %s; it is "
			       "freed by %s", dpg_ctx_who(comm->ctx), comm->name,
			       rc->owner == DPG_OWNER_CTX ? "the context" : "a mesh",
			       rc->owner == DPG_OWNER_CTX ? "dpg_finalize" :
			       "dpg_mesh_destroy");
		return DPG_ERR_INVALID;
	}
	return dpg_comm_destroy_owned(comm);
}
