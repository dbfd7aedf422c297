/* SPDX-License-Identifier: BSD-3-Clause */
/* comm.h - a context's communicators (comm.c): create (world, split), start
 * their backend, destroy, abort them all, the meshes still alive, and the edge
 * of every public call on one (its checks and the one place a failure is
 * recorded). */
#ifndef DPG_LIB_COMM_H
#define DPG_LIB_COMM_H

#include <stdbool.h>
#include <stdint.h>

#include "ctx.h"

/* Who frees a communicator. */
enum dpg_comm_owner {
	DPG_OWNER_USER = 0,	/* dpg_comm_split: the caller, dpg_comm_destroy */
	DPG_OWNER_CTX,		/* the world: dpg_finalize */
	DPG_OWNER_MESH,		/* a mesh's groups: dpg_mesh_destroy */
};

/* A communicator as the context keeps it. */
struct rt_comm {
	struct dpg_comm c;
	enum dpg_comm_owner owner;
	dpg_backend_t kind;
	uint64_t nsplit;	/* dpg_comm_split calls on this comm */
	uint64_t nxchg;		/* store exchanges (all_gather_bytes on NCCL) */
	struct rt_comm *next, *prev;
};

static inline struct rt_comm *dpg_rt_comm(dpg_comm_t *c)
{
	return (struct rt_comm *)((char *)c - offsetof(struct rt_comm, c));
}

/* The world communicator of ctx on ctx->backend (collective).  Returns 0
 * or a negated dpg_status_t with the message in e. */
int dpg_comm_make_world(struct dpg_ctx *ctx, struct dpg_err *e);

/* comm_split with an owner; mesh.c uses DPG_OWNER_MESH. */
dpg_status_t dpg_comm_split_owned(dpg_comm_t *comm, int color, int key,
				  enum dpg_comm_owner owner, dpg_comm_t **out);

/* Destroy a communicator whatever its owner (mesh.c, finalize). */
dpg_status_t dpg_comm_destroy_owned(dpg_comm_t *comm);

/* dpg_finalize: destroy every mesh, then every communicator but the world
 * (oldest first). */
void dpg_comm_destroy_all_but_world(struct dpg_ctx *ctx);

/* dpg_abort: abort every communicator's backend. */
void dpg_comm_abort_all(struct dpg_ctx *ctx);

/* Meshes still alive at dpg_finalize are destroyed by it: mesh.c registers
 * each mesh (add = 1) and unregisters it (add = 0) on destroy.  Returns 0
 * or -DPG_ERR_NOMEM when the registry cannot grow. */
int dpg_comm_track_mesh(struct dpg_ctx *ctx, dpg_mesh_t *mesh, int add);

/* comm is a started communicator of a context. */
bool dpg_comm_ok(const dpg_comm_t *c);

/* Opens a public call on c: clears the last error; 0, or -DPG_ERR_ABORTED
 * (message in e) once dpg_abort was called. */
int dpg_comm_enter(dpg_comm_t *c, struct dpg_err *e);

/* The public edge of a call on c: record "<who> <op>[ #seq] on <name>:
 * <msg>" (seq < 0: none) and return rc as a dpg_status_t. */
dpg_status_t dpg_comm_fail(dpg_comm_t *c, int rc, const char *op, int64_t seq,
			   const struct dpg_err *e);

#endif
