/* mesh.c - a device mesh of 1..3 dimensions over the world, one
 * communicator per dimension, built with dpg_comm_split.  Dimensions are
 * given outermost first; the innermost one runs over consecutive ranks. */
#include "commreg.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define MESH_MAX_DIMS 3

struct dpg_mesh {
	dpg_ctx_t *ctx;
	int ndims;
	int sizes[MESH_MAX_DIMS];
	int coord[MESH_MAX_DIMS];
	dpg_comm_t *comms[MESH_MAX_DIMS];
};

dpg_status_t dpg_mesh_create(dpg_ctx_t *ctx, int ndims, const int *sizes,
			     dpg_mesh_t **out)
{
	dpg_comm_t *world;
	struct dpg_mesh *m;
	int64_t prod = 1;
	int stride[MESH_MAX_DIMS], rank, ws;
	dpg_status_t st;

	if (out != NULL)
		*out = NULL;
	if (ctx == NULL)
		return DPG_ERR_INVALID;
	world = dpg_world(ctx);
	if (world == NULL) {
		dpg_ctx_seterr(ctx, "%s mesh_create: the context has no world "
			       "communicator (dpg_init failed?)", dpg_ctx_who(ctx));
		return DPG_ERR_INVALID;
	}
	rank = dpg_comm_rank(world);
	ws = dpg_comm_size(world);
	if (out == NULL || sizes == NULL || ndims < 1 || ndims > MESH_MAX_DIMS) {
		dpg_ctx_seterr(ctx, "%s mesh_create: invalid argument: need 1..%d "
			       "dimensions, their sizes and an output pointer (got "
			       "ndims=%d)", dpg_ctx_who(ctx), MESH_MAX_DIMS, ndims);
		return DPG_ERR_INVALID;
	}
	for (int d = 0; d < ndims; d++) {
		if (sizes[d] < 1) {
			dpg_ctx_seterr(ctx, "%s mesh_create: invalid argument: "
				       "dimension %d has size %d", dpg_ctx_who(ctx), d,
				       sizes[d]);
			return DPG_ERR_INVALID;
		}
		prod *= sizes[d];
		if (prod > ws)
			break;
	}
	if (prod != ws) {
		char shape[64];
		size_t o = 0;

		for (int d = 0; d < ndims && o + 12 < sizeof(shape); d++) {
			int k = snprintf(shape + o, sizeof(shape) - o, "%s%d",
					 d ? "x" : "", sizes[d]);

			if (k > 0)
				o += (size_t)k;
		}
		dpg_ctx_seterr(ctx, "%s mesh_create: invalid argument: mesh %s has "
			       "%s%lld ranks, not the world size %d", dpg_ctx_who(ctx),
			       shape, prod > ws ? "more than " : "",
			       (long long)(prod > ws ? ws : prod), ws);
		return DPG_ERR_INVALID;
	}
	m = calloc(1, sizeof(*m));
	if (m == NULL) {
		dpg_ctx_seterr(ctx, "%s mesh_create: out of memory", dpg_ctx_who(ctx));
		return DPG_ERR_NOMEM;
	}
	m->ctx = ctx;
	m->ndims = ndims;
	stride[ndims - 1] = 1;
	for (int d = ndims - 2; d >= 0; d--)
		stride[d] = stride[d + 1] * sizes[d + 1];
	for (int d = 0; d < ndims; d++) {
		m->sizes[d] = sizes[d];
		m->coord[d] = (rank / stride[d]) % sizes[d];
	}
	/* the group along d: ranks that differ only in coordinate d; its
	 * lowest rank names it, the coordinate orders it */
	for (int d = 0; d < ndims; d++) {
		int color = rank - m->coord[d] * stride[d];

		st = dpg_comm_split_owned(world, color, m->coord[d], DPG_OWNER_MESH,
					  &m->comms[d]);
		if (st != DPG_OK) {
			for (int k = 0; k < d; k++)
				dpg_comm_destroy_owned(m->comms[k]);
			free(m);
			return st;
		}
	}
	if (dpg_comm_track_mesh(ctx, m, 1) != 0) {
		for (int d = 0; d < ndims; d++)
			dpg_comm_destroy_owned(m->comms[d]);
		free(m);
		dpg_ctx_seterr(ctx, "%s mesh_create: out of memory", dpg_ctx_who(ctx));
		return DPG_ERR_NOMEM;
	}
	*out = m;
	return DPG_OK;
}

dpg_comm_t *dpg_mesh_comm(dpg_mesh_t *mesh, int dim)
{
	if (mesh == NULL || dim < 0 || dim >= mesh->ndims)
		return NULL;
	return mesh->comms[dim];
}

int dpg_mesh_coord(const dpg_mesh_t *mesh, int dim)
{
	if (mesh == NULL || dim < 0 || dim >= mesh->ndims)
		return -1;
	return mesh->coord[dim];
}

dpg_status_t dpg_mesh_destroy(dpg_mesh_t *mesh)
{
	if (mesh == NULL)
		return DPG_OK;
	dpg_comm_track_mesh(mesh->ctx, mesh, 0);
	for (int d = mesh->ndims - 1; d >= 0; d--)
		dpg_comm_destroy_owned(mesh->comms[d]);
	free(mesh);
	return DPG_OK;
}
