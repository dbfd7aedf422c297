/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_hostlist.c - libFuzzer harness for lib/hostlist.c: count, nth and
 * expand on arbitrary bytes, with cross-checks between the three. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hostlist.h"

#define MAX_HOSTS 4096
#define NTH_CHECK 64	/* check nth(i) == names[i] for lists this small */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *expr = malloc(size + 1);
	struct dpg_err err;
	struct dpg_hostlist hl;
	size_t count = 0;
	int rc_count, rc_exp;

	if (expr == NULL)
		return 0;
	memcpy(expr, data, size);
	expr[size] = '\0';

	memset(&err, 0, sizeof(err));
	rc_count = dpg_hostlist_count(expr, MAX_HOSTS, &count, &err);
	memset(&err, 0, sizeof(err));
	memset(&hl, 0, sizeof(hl));
	rc_exp = dpg_hostlist_expand(expr, MAX_HOSTS, &hl, &err);

	if ((rc_count == 0) != (rc_exp == 0)) {
		fprintf(stderr, "count rc %d but expand rc %d\n", rc_count, rc_exp);
		abort();
	}
	if (rc_exp == 0) {
		if (hl.count != count) {
			fprintf(stderr, "count %zu but expand %zu\n", count, hl.count);
			abort();
		}
		for (size_t i = 0; i < hl.count; i++) {
			size_t l = strlen(hl.names[i]);
			if (l == 0 || l > DPG_HOSTNAME_MAX) {
				fprintf(stderr, "bad name length %zu at %zu\n", l, i);
				abort();
			}
		}
		{
			char buf[DPG_HOSTNAME_MAX + 1];
			/* every host of a small list; first, middle, last of a big one */
			size_t probe[3] = { 0, hl.count / 2, hl.count - 1 };
			size_t nprobe = hl.count <= NTH_CHECK ? hl.count : 3;

			for (size_t j = 0; j < nprobe; j++) {
				size_t i = hl.count <= NTH_CHECK ? j : probe[j];

				memset(&err, 0, sizeof(err));
				if (dpg_hostlist_nth(expr, i, buf, sizeof(buf), &err) != 0) {
					fprintf(stderr, "nth(%zu) failed: %s\n", i, err.msg);
					abort();
				}
				if (strcmp(buf, hl.names[i]) != 0) {
					fprintf(stderr, "nth(%zu)='%s' names[%zu]='%s'\n",
						i, buf, i, hl.names[i]);
					abort();
				}
			}
			/* one past the end must fail, and a tiny buffer must not overflow */
			memset(&err, 0, sizeof(err));
			if (dpg_hostlist_nth(expr, hl.count, buf, sizeof(buf), &err) == 0) {
				fprintf(stderr, "nth(%zu) past end succeeded\n", hl.count);
				abort();
			}
			if (hl.count > 0) {
				char small[4];
				memset(&err, 0, sizeof(err));
				(void)dpg_hostlist_nth(expr, 0, small, sizeof(small), &err);
			}
		}
		dpg_hostlist_free(&hl);
	} else {
		/* nth on an invalid / oversized expression must not crash either */
		char buf[DPG_HOSTNAME_MAX + 1];
		memset(&err, 0, sizeof(err));
		(void)dpg_hostlist_nth(expr, (size > 0 ? data[0] : 0), buf, sizeof(buf), &err);
	}
	free(expr);
	return 0;
}
