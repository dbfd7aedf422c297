/* SPDX-License-Identifier: BSD-3-Clause */
/* store_table.c - the store server's key table: FNV-1a with a random seed
 * over power-of-two buckets, values as shared reference-counted blobs. */
#include "store_table.h"
#include "store_wire.h"	/* DPG_STORE_MAX_KEYS, DPG_STORE_MAX_VALUE_BYTES, dpg_wire_random */

#include <stdlib.h>
#include <string.h>

struct blob *dpg_blob_new(const void *data, size_t n)
{
	struct blob *b = malloc(sizeof(*b) + n);

	if (b != NULL) {
		b->refs = 1;
		b->len = (uint32_t)n;
		if (n > 0)
			memcpy(b->data, data, n);
	}
	return b;
}

void dpg_blob_unref(struct blob *b)
{
	if (b != NULL && --b->refs == 0)
		free(b);
}

static uint64_t key_hash(const struct dpg_kv *t, const uint8_t *k, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull ^ t->seed;	/* FNV-1a, seeded */
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= k[i];
		h *= 0x100000001b3ull;
	}
	return h ^ (h >> 29);
}

static struct entry *find_hashed(const struct dpg_kv *t, const uint8_t *k, size_t n,
				 uint64_t h)
{
	struct entry *e;

	if (t->nb == 0)
		return NULL;
	for (e = t->b[h & (t->nb - 1)]; e != NULL; e = e->hnext)
		if (e->hash == h && e->klen == n && memcmp(e->key, k, n) == 0)
			return e;
	return NULL;
}

struct entry *dpg_kv_find(const struct dpg_kv *t, const uint8_t *k, size_t n)
{
	return find_hashed(t, k, n, key_hash(t, k, n));
}

static int grow(struct dpg_kv *t)
{
	size_t nb = t->nb ? t->nb * 2 : 1024, i;
	struct entry **b = calloc(nb, sizeof(*b));

	if (b == NULL)
		return -DPG_ERR_NOMEM;
	for (i = 0; i < t->nb; i++) {
		struct entry *e = t->b[i], *next;

		for (; e != NULL; e = next) {
			next = e->hnext;
			e->hnext = b[e->hash & (nb - 1)];
			b[e->hash & (nb - 1)] = e;
		}
	}
	free(t->b);
	t->b = b;
	t->nb = nb;
	return 0;
}

int dpg_kv_init(struct dpg_kv *t, struct dpg_err *err)
{
	int rc;

	memset(t, 0, sizeof(*t));
	rc = dpg_wire_random(&t->seed, sizeof(t->seed), err);
	if (rc != 0) {
		dpg_err_prefix(err, "store");
		return rc;
	}
	if (grow(t) != 0)
		return dpg_errs(err, DPG_ERR_NOMEM, "store: out of memory");
	return 0;
}

void dpg_kv_free(struct dpg_kv *t)
{
	size_t i;

	for (i = 0; i < t->nb; i++) {
		struct entry *e = t->b[i], *next;

		for (; e != NULL; e = next) {
			next = e->hnext;
			dpg_blob_unref(e->val);
			free(e);
		}
	}
	free(t->b);
	t->b = NULL;
	t->nb = t->n = 0;
}

struct entry *dpg_kv_get_or_add(struct dpg_kv *t, const uint8_t *k, size_t n)
{
	uint64_t h = key_hash(t, k, n);
	struct entry *e = find_hashed(t, k, n, h);

	if (e != NULL)
		return e;
	if (t->n >= DPG_STORE_MAX_KEYS || (t->n >= t->nb && grow(t) != 0))
		return NULL;
	e = malloc(sizeof(*e) + n + 1);
	if (e == NULL)
		return NULL;
	e->hash = h;
	e->val = NULL;
	dl_init(&e->waiters);
	e->klen = (uint32_t)n;
	memcpy(e->key, k, n);
	e->key[n] = '\0';
	e->hnext = t->b[h & (t->nb - 1)];
	t->b[h & (t->nb - 1)] = e;
	t->n++;
	return e;
}

bool dpg_kv_fits(const struct dpg_kv *t, const struct entry *e, size_t n)
{
	size_t old = e->val != NULL ? e->val->len : 0;

	return t->value_bytes - old + n <= DPG_STORE_MAX_VALUE_BYTES;
}

static void drop_value(struct dpg_kv *t, struct entry *e)
{
	if (e->val != NULL) {
		t->value_bytes -= e->val->len;
		dpg_blob_unref(e->val);
		e->val = NULL;
	}
}

void dpg_kv_set(struct dpg_kv *t, struct entry *e, struct blob *val)
{
	drop_value(t, e);
	e->val = val;
	t->value_bytes += val->len;
}

static void remove_entry(struct dpg_kv *t, struct entry *e)
{
	struct entry **pp = &t->b[e->hash & (t->nb - 1)];

	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	t->n--;
	drop_value(t, e);
	free(e);
}

void dpg_kv_gc(struct dpg_kv *t, struct entry *e)
{
	if (e->val == NULL && dl_empty(&e->waiters))
		remove_entry(t, e);
}

void dpg_kv_unset(struct dpg_kv *t, struct entry *e)
{
	drop_value(t, e);
	dpg_kv_gc(t, e);
}
