/* SPDX-License-Identifier: BSD-3-Clause */
/* store_table.h - the store server's key table: a seeded hash table of keys
 * with reference-counted values, and the intrusive list its waiters hang on
 * (internal to store_server.c and store_table.c). */
#ifndef DPG_LIB_STORE_TABLE_H
#define DPG_LIB_STORE_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* An intrusive doubly linked list; a head is a node linked to itself. */
struct dl {
	struct dl *prev, *next;
};

#define container_of(p, T, m) ((T *)(void *)((char *)(p) - offsetof(T, m)))

static inline void dl_init(struct dl *h)
{
	h->prev = h->next = h;
}

static inline bool dl_empty(const struct dl *h)
{
	return h->next == h;
}

static inline void dl_add_tail(struct dl *h, struct dl *n)
{
	n->prev = h->prev;
	n->next = h;
	h->prev->next = n;
	h->prev = n;
}

static inline void dl_del(struct dl *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = n;
}

/* A value, shared by the table and by replies still queued for sending. */
struct blob {
	uint32_t refs;
	uint32_t len;
	uint8_t data[];
};

struct entry {
	struct entry *hnext;
	uint64_t hash;
	struct blob *val;		/* NULL: a key someone waits for */
	struct dl waiters;		/* the server's struct wlink.node */
	uint32_t klen;
	char key[];			/* NUL-terminated */
};

struct dpg_kv {
	struct entry **b;
	size_t nb, n;
	uint64_t seed;
	size_t value_bytes;		/* of all values together */
};

/* A new value holding a copy of data (one reference); NULL when out of memory. */
struct blob *dpg_blob_new(const void *data, size_t n);
void dpg_blob_unref(struct blob *b);	/* NULL is fine */

/* An empty table with a random hash seed / free it, values and all. */
int dpg_kv_init(struct dpg_kv *t, struct dpg_err *err);
void dpg_kv_free(struct dpg_kv *t);

/* The entry of key k (n bytes), or NULL. */
struct entry *dpg_kv_find(const struct dpg_kv *t, const uint8_t *k, size_t n);
/* Find key or add it as a pending (valueless) entry; NULL when full
 * (DPG_STORE_MAX_KEYS) or out of memory. */
struct entry *dpg_kv_get_or_add(struct dpg_kv *t, const uint8_t *k, size_t n);
/* Would replacing e's value by n bytes stay within DPG_STORE_MAX_VALUE_BYTES? */
bool dpg_kv_fits(const struct dpg_kv *t, const struct entry *e, size_t n);
/* Store val under e, taking our reference (the waiters are the caller's). */
void dpg_kv_set(struct dpg_kv *t, struct entry *e, struct blob *val);
/* Drop e's value (if any) and e itself unless someone waits for it. */
void dpg_kv_unset(struct dpg_kv *t, struct entry *e);
/* Drop an entry nobody needs any more (no value, no waiter). */
void dpg_kv_gc(struct dpg_kv *t, struct entry *e);

#endif
