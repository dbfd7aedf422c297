/* SPDX-License-Identifier: BSD-3-Clause */
/* live.c - the liveness watch's decisions, without a clock, a store or a
 * thread of their own (see live.h): when a heartbeat counts as stopped,
 * whom a rank watches, the peer timeout, the death record and its line. */
#include "live.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

bool dpg_live_observe(struct dpg_live_peer *p, int64_t beat, int64_t now_ms,
		      int64_t dead_ms)
{
	if (beat >= DPG_LIVE_LEFT)
		return false;
	if (!p->seen || beat != p->beat) {
		p->seen = true;
		p->beat = beat;
		p->since_ms = now_ms;
		return false;
	}
	return now_ms - p->since_ms >= dead_ms;
}

int dpg_live_target(int rank, int n)
{
	if (n < 2 || rank < 0 || rank >= n)
		return -1;
	return (rank + 1) % n;
}

int dpg_live_dead_ms(const char *v, int64_t *out, struct dpg_err *e)
{
	char *end = NULL;
	double s;

	if (v == NULL || *v == '\0') {
		*out = DPG_LIVE_DEAD_MS;
		return 0;
	}
	errno = 0;
	s = strtod(v, &end);
	if (errno == 0 && end != v && *end == '\0' && s == 0.0) {
		*out = 0;
		return 0;
	}
	if (errno != 0 || end == v || *end != '\0' || !isfinite(s) ||
	    s * 1000.0 < DPG_LIVE_DEAD_MIN_MS || s > 86400.0)
		return dpg_errf(e, "DPG_PEER_TIMEOUT='%s' is not a number of seconds "
				"from %.0f to 86400 (or 0: no liveness watch)", v,
				DPG_LIVE_DEAD_MIN_MS / 1000.0);
	*out = (int64_t)(s * 1000.0 + 0.5);
	return 0;
}

int dpg_live_record(char *buf, size_t len, int rank, int64_t silent_ms,
		    int watcher)
{
	return snprintf(buf, len, "%d %" PRId64 " %d", rank, silent_ms, watcher);
}

bool dpg_live_parse(const char *s, int n, int *rank, int64_t *silent_ms,
		    int *watcher)
{
	int used = 0;

	if (sscanf(s, "%d %" SCNd64 " %d%n", rank, silent_ms, watcher, &used) != 3 ||
	    s[used] != '\0')
		return false;
	return *rank >= 0 && *rank < n && *watcher >= 0 && *watcher < n &&
	       *silent_ms >= 0;
}

void dpg_live_message(char *buf, size_t len, int rank, const char *node,
		      int64_t silent_ms, int watcher)
{
	snprintf(buf, len, "rank %d%s%s%s died or stopped: no heartbeat for "
		 "%.1f s (seen by rank %d; DPG_PEER_TIMEOUT); every communicator "
		 "was aborted", rank, node != NULL && *node ? " (" : "",
		 node != NULL ? node : "", node != NULL && *node ? ")" : "",
		 (double)silent_ms / 1000.0, watcher);
}

void dpg_live_store_message(char *buf, size_t len, const char *node0,
			    const char *how)
{
	snprintf(buf, len, "rank 0%s%s%s died or stopped: this rank's store "
		 "connection %s (rank 0 holds the store); every communicator was "
		 "aborted", node0 != NULL && *node0 ? " (" : "",
		 node0 != NULL ? node0 : "", node0 != NULL && *node0 ? ")" : "",
		 how);
}
