/* SPDX-License-Identifier: BSD-3-Clause */
/* loss_cmp.c - compare the loss curves of two train outputs (losscurve.h):
 *   loss_cmp REF.out OTHER.out RTOL ATOL   exit 0 agree, 1 differ, 2 usage or unreadable */
#include <stdio.h>
#include <stdlib.h>

#include "losscurve.h"

static int read_file(const char *path, struct loss_curve *c)
{
	FILE *f = fopen(path, "r");
	int rc;

	if (f == NULL) {
		perror(path);
		return -1;
	}
	rc = losscurve_read(f, c);
	fclose(f);
	if (rc != 0)
		fprintf(stderr, "loss_cmp: %s: out of memory\n", path);
	return rc;
}

int main(int argc, char **argv)
{
	struct loss_curve a = { 0 }, b = { 0 };
	char msg[256];
	double worst;
	int rc = 2;

	if (argc != 5) {
		fprintf(stderr, "usage: loss_cmp REF.out OTHER.out RTOL ATOL\n");
		return 2;
	}
	if (read_file(argv[1], &a) == 0 && read_file(argv[2], &b) == 0) {
		rc = losscurve_compare(&a, &b, atof(argv[3]), atof(argv[4]), &worst, msg,
				       sizeof(msg));
		printf("loss_cmp: %s: %s\n", rc == 0 ? "ok" : "FAIL", msg);
	}
	losscurve_free(&a);
	losscurve_free(&b);
	return rc;
}
