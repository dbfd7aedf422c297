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
	unsigned k = h->n < DPG_HANDOFF_SAMPLES ? h->n : DPG_HANDOFF_SAMPLES, i, j;

	if (k == 0)
		return 0;
	for (i = 0; i < k; i++) {	/* insertion sort of at most 8 */
		int32_t x = h->ns[i];

		for (j = i; j > 0 && v[j - 1] > x; j--)
			v[j] = v[j - 1];
		v[j] = x;
	}
	return v[(k - 1) / 2];
}
