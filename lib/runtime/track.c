/* SPDX-License-Identifier: BSD-3-Clause */
/* track.c - the record of this rank's current or last collective, written
 * twice per collective (entry, exit) and read from the hang responder's
 * thread; see track.h. */
#include "track.h"

#include <sched.h>
#include <string.h>

#include "clock.h"

#define RLX memory_order_relaxed

void dpg_track_init(struct dpg_track *t)
{
	memset(t, 0, sizeof(*t));
	t->window_ns = dpg_now_ns();
}

/* The seqlock's write side: odd while the fields change. */
static uint32_t write_begin(struct dpg_track *t)
{
	uint32_t v = atomic_load_explicit(&t->ver, RLX) + 1;

	atomic_store_explicit(&t->ver, v, RLX);
	atomic_thread_fence(memory_order_release);
	return v;
}

static void write_end(struct dpg_track *t, uint32_t v)
{
	atomic_store_explicit(&t->ver, v + 1, memory_order_release);
}

int64_t dpg_track_enter(struct dpg_track *t, const char *comm, const char *kind,
			uint64_t seq, uint64_t count)
{
	uint64_t w[DPG_TRACK_NAME_WORDS] = { 0 };
	int64_t now = dpg_now_ns();
	size_t n = strnlen(comm, sizeof(w) - 1);
	uint32_t v;

	memcpy(w, comm, n);
	v = write_begin(t);
	for (int i = 0; i < DPG_TRACK_NAME_WORDS; i++)
		atomic_store_explicit(&t->name[i], w[i], RLX);
	atomic_store_explicit(&t->state, DPG_TRACK_IN, RLX);
	atomic_store_explicit(&t->kind, kind, RLX);
	atomic_store_explicit(&t->seq, seq, RLX);
	atomic_store_explicit(&t->count, count, RLX);
	atomic_store_explicit(&t->enter_ns, now, RLX);
	write_end(t, v);
	return now;
}

void dpg_track_leave(struct dpg_track *t, int64_t enter_ns, int rc)
{
	int64_t now = dpg_now_ns();
	uint32_t v = write_begin(t);

	atomic_store_explicit(&t->state, rc == 0 ? DPG_TRACK_DONE : DPG_TRACK_FAILED, RLX);
	atomic_store_explicit(&t->end_ns, now, RLX);
	write_end(t, v);
	t->coll_ns += now - enter_ns;
}

/* One try at a copy: false when a write overlapped it. */
static bool read_once(struct dpg_track *t, struct dpg_track_view *v)
{
	uint32_t a = atomic_load_explicit(&t->ver, memory_order_acquire), b;
	uint64_t w[DPG_TRACK_NAME_WORDS];

	if (a & 1u)
		return false;
	v->state = (enum dpg_track_state)atomic_load_explicit(&t->state, RLX);
	v->kind = atomic_load_explicit(&t->kind, RLX);
	v->seq = atomic_load_explicit(&t->seq, RLX);
	v->count = atomic_load_explicit(&t->count, RLX);
	v->enter_ns = atomic_load_explicit(&t->enter_ns, RLX);
	v->end_ns = atomic_load_explicit(&t->end_ns, RLX);
	for (int i = 0; i < DPG_TRACK_NAME_WORDS; i++)
		w[i] = atomic_load_explicit(&t->name[i], RLX);
	atomic_thread_fence(memory_order_acquire);
	b = atomic_load_explicit(&t->ver, RLX);
	memcpy(v->comm, w, sizeof(v->comm));
	v->comm[sizeof(v->comm) - 1] = '\0';
	return a == b;
}

void dpg_track_read(struct dpg_track *t, struct dpg_track_view *v)
{
	while (!read_once(t, v))
		sched_yield();
	if (v->kind == NULL)
		v->kind = "?";
}
