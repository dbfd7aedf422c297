/* SPDX-License-Identifier: BSD-3-Clause */
/* allreduce_demo.c - libdpg in 40 lines: srun -n4 --dpg-gpus-per-task=0 ./allreduce_demo
 * build: cc allreduce_demo.c $(pkg-config --cflags --libs dpg) -o allreduce_demo */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <dpg.h>

#define TRY(ctx, call) do { dpg_status_t st_ = (call); if (st_ != DPG_OK) { \
	fprintf(stderr, "allreduce_demo: %s failed (%s): %s\n", #call, \
		dpg_strerror(st_), dpg_last_error(ctx)); dpg_finalize(ctx); return 1; } } while (0)

int main(void)
{
	dpg_init_opts_t opts;
	dpg_ctx_t *ctx = NULL;
	char host[64], json[160];
	void *all = NULL;
	size_t *off = NULL, *len = NULL;

	dpg_init_opts_default(&opts);
	opts.backend = DPG_BACKEND_CPU;		/* host buffers below */
	TRY(ctx, dpg_init(&opts, &ctx));
	int rank = dpg_rank(ctx), n = dpg_world_size(ctx);
	double x = rank + 1;
	TRY(ctx, dpg_all_reduce(dpg_world(ctx), &x, &x, 1, DPG_F64, DPG_SUM, NULL));
	gethostname(host, sizeof(host));
	snprintf(json, sizeof(json), "{\"rank\": %d, \"local_rank\": %d, \"host\": \"%.40s\", "
		 "\"pid\": %ld}", rank, dpg_local_rank(ctx), host, (long)getpid());
	TRY(ctx, dpg_all_gather_bytes(dpg_world(ctx), json, strlen(json), &all, &off, &len));
	if (rank == 0) {
		printf("dpg %s: %d ranks, sum of rank+1 = %g (expected %d)\n", dpg_version(),
		       n, x, n * (n + 1) / 2);
		for (int r = 0; r < n; r++)
			printf("  %.*s\n", (int)len[r], (char *)all + off[r]);
	}
	free(all); free(off); free(len);
	if (dpg_finalize(ctx) != DPG_OK)	/* frees ctx even when it fails */
		fprintf(stderr, "allreduce_demo: rank %d: dpg_finalize failed\n", rank);
	return x == n * (n + 1) / 2.0 ? 0 : 1;
}
