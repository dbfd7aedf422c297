/* SPDX-License-Identifier: BSD-3-Clause */
/* zlayout.c - lays out a sharded model's parameters in padded per-unit
 * flat buffers and answers which rank owns which elements. */
#include "zlayout.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void dpg_zlayout_free(struct dpg_zlayout *L)
{
	if (!L)
		return;
	free(L->p);
	free(L->u);
	memset(L, 0, sizeof(*L));
}

static int add_ovf(size_t a, size_t b, size_t *out)
{
	if (a > SIZE_MAX - b)
		return 1;
	*out = a + b;
	return 0;
}

static int check_params(int nparams, const char *const *names, const size_t *numel,
			const int *unit, struct dpg_err *err)
{
	int i;

	if (nparams <= 0)
		return dpg_errf(err, "no parameters registered");
	if (unit[0] != 0)
		return dpg_errf(err, "parameter '%s': the first unit must be 0, not %d",
				names[0] ? names[0] : "?", unit[0]);
	for (i = 0; i < nparams; i++) {
		const char *n = names[i];

		if (!n || !*n)
			return dpg_errf(err, "parameter %d: empty name", i);
		if (strlen(n) >= DPG_ZNAME_MAX)
			return dpg_errf(err, "parameter %d: name longer than %d bytes", i,
					DPG_ZNAME_MAX - 1);
		if (numel[i] == 0)
			return dpg_errf(err, "parameter '%s': zero elements", n);
		if (i > 0 && unit[i] != unit[i - 1] && unit[i] != unit[i - 1] + 1)
			return dpg_errf(err, "parameter '%s': unit %d after unit %d "
					"(units must be registered in order 0, 1, 2, ...)",
					n, unit[i], unit[i - 1]);
	}
	return 0;
}

int dpg_zlayout_build(struct dpg_zlayout *L, int nparams, const char *const *names,
		      const size_t *numel, const int *unit, int nranks,
		      struct dpg_err *err)
{
	size_t quantum, shard_off = 0, flat_off = 0, total = 0;
	int i, nunits;

	memset(L, 0, sizeof(*L));
	if (nranks <= 0)
		return dpg_errf(err, "shard group of %d ranks", nranks);
	if (!names || !numel || !unit)
		return dpg_errf(err, "no parameters registered");
	if (check_params(nparams, names, numel, unit, err) != 0)
		return -1;
	nunits = unit[nparams - 1] + 1;
	L->p = calloc((size_t)nparams, sizeof(*L->p));
	L->u = calloc((size_t)nunits, sizeof(*L->u));
	if (!L->p || !L->u) {
		dpg_zlayout_free(L);
		return dpg_errf(err, "out of memory for the layout of %d parameters", nparams);
	}
	L->nparams = nparams;
	L->nunits = nunits;
	L->nranks = nranks;
	quantum = (size_t)nranks * DPG_ZALIGN;
	for (i = 0; i < nparams; i++) {
		struct dpg_zparam *p = &L->p[i];
		struct dpg_zunit *u = &L->u[unit[i]];

		memcpy(p->name, names[i], strlen(names[i]) + 1);
		p->numel = numel[i];
		p->unit = unit[i];
		if (u->nparams == 0)
			u->first_param = i;
		u->nparams++;
		p->unit_off = u->numel;
		if (add_ovf(u->numel, numel[i], &u->numel) || add_ovf(total, numel[i], &total)) {
			dpg_zlayout_free(L);
			return dpg_errf(err, "parameter '%s': model size overflows", names[i]);
		}
	}
	for (i = 0; i < nunits; i++) {
		struct dpg_zunit *u = &L->u[i];
		size_t chunks = u->numel / quantum + (u->numel % quantum != 0);

		if (chunks > SIZE_MAX / quantum) {
			dpg_zlayout_free(L);
			return dpg_errf(err, "unit %d: size overflows", i);
		}
		u->padded = chunks * quantum;
		u->shard = u->padded / (size_t)nranks;
		u->shard_off = shard_off;
		u->flat_off = flat_off;
		shard_off += u->shard;
		flat_off += u->padded;
		if (u->padded > L->max_unit_padded)
			L->max_unit_padded = u->padded;
	}
	L->numel = total;
	L->padded_numel = flat_off;
	L->shard_numel = shard_off;
	return 0;
}

int dpg_zlayout_same_model(const struct dpg_zlayout *a, const struct dpg_zlayout *b,
			   struct dpg_err *err)
{
	int i;

	if (a->nparams != b->nparams) {
		dpg_errf(err, "%d parameters, expected %d", a->nparams, b->nparams);
		return 0;
	}
	for (i = 0; i < a->nparams; i++) {
		const struct dpg_zparam *x = &a->p[i], *y = &b->p[i];

		if (strcmp(x->name, y->name) != 0) {
			dpg_errf(err, "parameter %d is '%s', expected '%s'", i, x->name, y->name);
			return 0;
		}
		if (x->numel != y->numel || x->unit != y->unit) {
			dpg_errf(err, "parameter '%s' has %zu elements in unit %d, expected %zu in unit %d",
				 x->name, x->numel, x->unit, y->numel, y->unit);
			return 0;
		}
	}
	return 1;
}

void dpg_zlayout_shard_range(const struct dpg_zlayout *L, int u, int r, size_t *lo,
			     size_t *hi)
{
	const struct dpg_zunit *U = &L->u[u];
	size_t a = (size_t)r * U->shard, b = a + U->shard;

	if (a > U->numel)
		a = U->numel;
	if (b > U->numel)
		b = U->numel;
	*lo = a;
	*hi = b;
}
