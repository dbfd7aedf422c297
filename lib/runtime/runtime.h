/* runtime.h - libdpg's internals shared by runtime.c, mesh.c and the
 * backends: the context, communicator ownership and store helpers. */
#ifndef DPG_LIB_RUNTIME_H
#define DPG_LIB_RUNTIME_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "dpg.h"
#include "err.h"

struct dpg_store;

/* Who frees a communicator. */
enum dpg_comm_owner {
	DPG_OWNER_USER = 0,	/* dpg_comm_split: the caller, dpg_comm_destroy */
	DPG_OWNER_CTX,		/* the world: dpg_finalize */
	DPG_OWNER_MESH,		/* a mesh's groups: dpg_mesh_destroy */
};

/* Set the context's last error (one line; a trailing newline is dropped). */
void dpg_ctx_seterr(struct dpg_ctx *ctx, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* A collective run outside the public calls (zero.c's prefetch thread)
 * failed: dpg_finalize must not wait for the peers' goodbye. */
void dpg_ctx_set_failed(struct dpg_ctx *ctx);

/* The CUDA device of the context's NCCL communicators (-1: none). */
int dpg_ctx_device(const struct dpg_ctx *ctx);

/* "rank R (HOST)", the prefix of every message of ctx. */
const char *dpg_ctx_who(const struct dpg_ctx *ctx);

/* The store key namespace of the job step, e.g. "dpg/123.0" (no slash at
 * the end); "dpg" for a NULL context. */
const char *dpg_ctx_key_ns(const struct dpg_ctx *ctx);

/* Node name of world rank r ("?" when unknown). */
const char *dpg_ctx_rank_host(const struct dpg_ctx *ctx, int r);

/* The context's store client (NULL in a one-process world). */
struct dpg_store *dpg_ctx_store(const struct dpg_ctx *ctx);

/* Meshes still alive at dpg_finalize are destroyed by it: mesh.c registers
 * each mesh (add = 1) and unregisters it (add = 0) on destroy.  Returns
 * DPG_ERR_NOMEM when the registry cannot grow. */
dpg_status_t dpg_ctx_track_mesh(struct dpg_ctx *ctx, dpg_mesh_t *mesh, int add);

/* comm_split with an owner; mesh.c uses DPG_OWNER_MESH. */
dpg_status_t dpg_comm_split_owned(dpg_comm_t *comm, int color, int key,
				  enum dpg_comm_owner owner, dpg_comm_t **out);

/* Destroy a communicator whatever its owner (mesh.c, finalize). */
dpg_status_t dpg_comm_destroy_owned(dpg_comm_t *comm);

/* Map a return code of store.h / net.h to a dpg_status_t. */
dpg_status_t dpg_rt_store_status(int rc);

#endif
