/* SPDX-License-Identifier: BSD-3-Clause */
/* xcost.c - the cost of large shared-memory calls in each way of copying
 * into the slots, and the cheaper way (see xcost.h). */
#include "xcost.h"

static int bucket(size_t bytes)
{
	size_t lim = DPG_XCOST_MIN_BYTES;
	int b = 0;

	while (b < DPG_XCOST_SIZES - 1 && bytes >= lim * 4) {
		lim *= 4;
		b++;
	}
	return b;
}

static struct dpg_xcost_mode *mode(struct dpg_xcost *x, int op, size_t bytes, bool streamed)
{
	return &x->m[op][bucket(bytes)][streamed ? 1 : 0];
}

void dpg_xcost_note(struct dpg_xcost *x, int op, size_t bytes, bool streamed, int64_t ns,
		    int64_t now)
{
	struct dpg_xcost_mode *m;
	unsigned k;

	if (op < 0 || op >= DPG_XCOST_OPS || bytes == 0)
		return;
	m = mode(x, op, bytes, streamed);
	k = m->n % DPG_XCOST_SAMPLES;
	m->ns_kib[k] = (ns < 0 ? 0 : ns) * 1024 / (int64_t)bytes;
	m->at[k] = now;
	m->n++;
}

/* The cheapest fresh sample of m, -1 without one. */
static int64_t cheapest(const struct dpg_xcost_mode *m, int64_t now)
{
	int64_t best = -1;
	unsigned k;

	for (k = 0; k < DPG_XCOST_SAMPLES && k < m->n; k++) {
		if (now - m->at[k] > (int64_t)DPG_XCOST_AGE_MS * 1000000)
			continue;
		if (best < 0 || m->ns_kib[k] < best)
			best = m->ns_kib[k];
	}
	return best;
}

int dpg_xcost_pick(const struct dpg_xcost *x, int op, size_t bytes, int64_t now)
{
	int64_t plain, streamed;
	int b;

	if (op < 0 || op >= DPG_XCOST_OPS)
		return -1;
	b = bucket(bytes);
	plain = cheapest(&x->m[op][b][0], now);
	streamed = cheapest(&x->m[op][b][1], now);
	if (plain < 0 || streamed < 0)
		return -1;
	return streamed < plain ? 1 : 0;
}
