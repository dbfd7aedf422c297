/* SPDX-License-Identifier: BSD-3-Clause */
/* mesh.c - a device mesh of 1..3 dimensions over the world, one
 * communicator per dimension, built with dpg_comm_split.  Dimensions are
 * given outermost first; the innermost one runs over consecutive ranks. */
#include "comm.h"

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

/* The shape against the world: 0, or -DPG_ERR_INVALID with the reason. */
static int mesh_check(int ndims, const int *sizes, int ws, struct dpg_err *e)
{
	int64_t prod = 1;
	char shape[64];
	size_t o = 0;

	for (int d = 0; d < ndims; d++) {
		if (sizes[d] < 1)
			return dpg_errf(e, "invalid argument: dimension %d has size %d",
					d, sizes[d]);
		prod *= sizes[d];
		if (prod > ws)
			break;
	}
	if (prod == ws)
		return 0;
	shape[0] = '\0';
	for (int d = 0; d < ndims && o + 12 < sizeof(shape); d++) {
		int k = snprintf(shape + o, sizeof(shape) - o, "%s%d", d ? "x" : "",
				 sizes[d]);

		if (k > 0)
			o += (size_t)k;
	}
	return dpg_errf(e, "invalid argument: mesh %s has %s%lld ranks, not the "
			"world size %d", shape, prod > ws ? "more than " : "",
			(long long)(prod > ws ? ws : prod), ws);
}

/* The group along d: ranks that differ only in coordinate d; its lowest
 * rank names it, the coordinate orders it. */
static dpg_status_t mesh_split(struct dpg_mesh *m, dpg_comm_t *world)
{
	int stride[MESH_MAX_DIMS], rank = dpg_comm_rank(world), nd = m->ndims;
	dpg_status_t st;

	stride[nd - 1] = 1;
	for (int d = nd - 2; d >= 0; d--)
		stride[d] = stride[d + 1] * m->sizes[d + 1];
	for (int d = 0; d < nd; d++)
		m->coord[d] = (rank / stride[d]) % m->sizes[d];
	for (int d = 0; d < nd; d++) {
		int color = rank - m->coord[d] * stride[d];

		st = dpg_comm_split_owned(world, color, m->coord[d], DPG_OWNER_MESH,
					  &m->comms[d]);
		if (st != DPG_OK) {
			for (int k = 0; k < d; k++)
				dpg_comm_destroy_owned(m->comms[k]);
			return st;
		}
	}
	return DPG_OK;
}

dpg_status_t dpg_mesh_create(dpg_ctx_t *ctx, int ndims, const int *sizes,
			     dpg_mesh_t **out)
{
	struct dpg_err e = { { 0 } };
	dpg_comm_t *world;
	struct dpg_mesh *m;
	dpg_status_t st;

	if (out != NULL)
		*out = NULL;
	if (ctx == NULL)
		return DPG_ERR_INVALID;
	dpg_ctx_clear_err(ctx);
	world = dpg_world(ctx);
	if (world == NULL)
		return dpg_ctx_fail(ctx, dpg_errf(&e, "the context has no world "
						  "communicator (dpg_init failed?)"),
				    "mesh_create", &e);
	if (out == NULL || sizes == NULL || ndims < 1 || ndims > MESH_MAX_DIMS)
		return dpg_ctx_fail(ctx, dpg_errf(&e, "invalid argument: need 1..%d "
						  "dimensions, their sizes and an "
						  "output pointer (got ndims=%d)",
						  MESH_MAX_DIMS, ndims),
				    "mesh_create", &e);
	if (mesh_check(ndims, sizes, dpg_comm_size(world), &e) != 0)
		return dpg_ctx_fail(ctx, -DPG_ERR_INVALID, "mesh_create", &e);
	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return dpg_ctx_fail(ctx, -DPG_ERR_NOMEM, "mesh_create", NULL);
	m->ctx = ctx;
	m->ndims = ndims;
	for (int d = 0; d < ndims; d++)
		m->sizes[d] = sizes[d];
	st = mesh_split(m, world);
	if (st == DPG_OK && dpg_comm_track_mesh(ctx, m, 1) != 0) {
		for (int d = 0; d < ndims; d++)
			dpg_comm_destroy_owned(m->comms[d]);
		st = dpg_ctx_fail(ctx, -DPG_ERR_NOMEM, "mesh_create", NULL);
	}
	if (st != DPG_OK) {
		free(m);
		return st;
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
	dpg_ctx_clear_err(mesh->ctx);
	dpg_comm_track_mesh(mesh->ctx, mesh, 0);
	for (int d = mesh->ndims - 1; d >= 0; d--)
		dpg_comm_destroy_owned(mesh->comms[d]);
	free(mesh);
	return DPG_OK;
}
