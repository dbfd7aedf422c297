/* SPDX-License-Identifier: BSD-3-Clause */
/* requeue.c - the value of --dpg-requeue=GRACE and requeue=GRACE, and its
 * search on a command line (the plugin must know it before sbatch/srun read
 * SBATCH_SIGNAL/SLURM_SIGNAL, which is before any option callback runs). */
#include "requeue.h"

#include <stdio.h>
#include <string.h>

#include "parse.h"

#define OPT "--dpg-requeue"

int dpg_requeue_parse(const char *what, const char *s, int *out,
		      struct dpg_err *err)
{
	unsigned long v;
	char q[160];

	if (s == NULL || dpg_parse_ulong(s, 0, DPG_REQUEUE_MAX, &v) != 0)
		return dpg_errf(err, "invalid %s '%s': expected GRACE, the seconds "
				"between Slurm's warning signal and the time limit, "
				"0-%d (0 = off; Slurm's --signal limit), e.g. "
				"%s=120", what,
				dpg_err_quote(s ? s : "", q, sizeof(q)),
				DPG_REQUEUE_MAX, what);
	*out = (int)v;
	return 0;
}

int dpg_requeue_from_cmdline(const char *buf, size_t len, int *out,
			     struct dpg_err *err)
{
	const char *end = buf + len, *p = buf;
	int found = 0;

	while (p < end) {
		size_t n = strnlen(p, (size_t)(end - p));
		const char *val = NULL, *next = p + n + 1;

		if (n == 2 && strncmp(p, "--", 2) == 0)
			break;
		if (strncmp(p, OPT "=", sizeof(OPT)) == 0)
			val = p + sizeof(OPT);
		else if (n == sizeof(OPT) - 1 && strncmp(p, OPT, n) == 0)
			val = next < end ? next : "";
		if (val != NULL) {
			if (dpg_requeue_parse(OPT, val, out, err) != 0)
				return -1;
			found = 1;
		}
		p = next;
	}
	return found;
}

int dpg_requeue_signal(int grace, char *buf, size_t len)
{
	int n = snprintf(buf, len, DPG_REQUEUE_SIGNAL "@%d", grace);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}
