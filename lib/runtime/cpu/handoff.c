/* SPDX-License-Identifier: BSD-3-Clause */
/* handoff.c - the running median of cache-line handoff latencies between
 * local ranks (see handoff.h). */
#include "handoff.h"

void dpg_handoff_note(struct dpg_handoff *h, int64_t ns)
{
	if (ns < 0)
		ns = 0;
	if (ns > DPG_HANDOFF_MAX_NS)
		ns = DPG_HANDOFF_MAX_NS;
	h->ns[h->n % DPG_HANDOFF_SAMPLES] = (int32_t)ns;
	h->n++;
}

int32_t dpg_handoff_ns(const struct dpg_handoff *h)
{
	int32_t v[DPG_HANDOFF_SAMPLES];
	unsigned i, j;

	for (i = 0; i < DPG_HANDOFF_SAMPLES; i++) {	/* insertion sort of 8 */
		int32_t x = i < h->n ? h->ns[i] : 0;

		for (j = i; j > 0 && v[j - 1] > x; j--)
			v[j] = v[j - 1];
		v[j] = x;
	}
	return v[(DPG_HANDOFF_SAMPLES - 1) / 2];
}
