/* SPDX-License-Identifier: BSD-3-Clause */
/* coll_mpi.c - the MPI side of bench/coll_bench.sh: the same four
 * collectives, sizes, method and output lines as bench/coll_bench.c, on
 * MPI_Allreduce / MPI_Reduce_scatter_block / MPI_Allgather / MPI_Bcast
 * (float32 sum, out of place), so that the two can be compared line by line.
 *
 * Build: mpicc -O2 -o coll_mpi bench/coll_mpi.c -lm
 * Run:   mpirun -np 2 ./coll_mpi [-b MINBYTES] [-e MAXBYTES] [-f FACTOR]
 *          [-r REPS] [-t TARGET_MS] [-w WARMUP] [-c OPS] [-l LABEL] [-W MS]
 * -W MS: the late-peer measurement of coll_bench.c (WAIT lines).
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

enum { OP_ALLREDUCE, OP_REDUCE_SCATTER, OP_ALLGATHER, OP_BCAST, OP_N };
static const char *const op_names[OP_N] = { "allreduce", "reduce_scatter", "allgather",
					    "bcast" };

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void run_op(int op, size_t count, int n, float *s, float *r)
{
	switch (op) {
	case OP_ALLREDUCE:
		MPI_Allreduce(s, r, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		break;
	case OP_REDUCE_SCATTER:
		MPI_Reduce_scatter_block(s, r, (int)(count / (size_t)n), MPI_FLOAT, MPI_SUM,
					 MPI_COMM_WORLD);
		break;
	case OP_ALLGATHER:
		MPI_Allgather(s, (int)(count / (size_t)n), MPI_FLOAT, r,
			      (int)(count / (size_t)n), MPI_FLOAT, MPI_COMM_WORLD);
		break;
	default:
		MPI_Bcast(s, (int)count, MPI_FLOAT, 0, MPI_COMM_WORLD);
		break;
	}
}

static void fill(int rank, int n, int op, size_t count, float *s)
{
	size_t i, sc = op == OP_ALLGATHER ? count / (size_t)n : count;

	for (i = 0; i < sc; i++)
		s[i] = (float)((rank + 1) + (int)(i % 7));
	if (op == OP_BCAST && rank != 0)
		for (i = 0; i < count; i++)
			s[i] = -1.0f;
}

static long check(int rank, int n, int op, size_t count, const float *s, const float *r)
{
	float rsum = (float)(n * (n + 1) / 2);
	size_t i, rc = count / (size_t)n;
	long bad = 0;
	int q;

	switch (op) {
	case OP_ALLREDUCE:
		for (i = 0; i < count; i++)
			bad += r[i] != rsum + (float)(n * (int)(i % 7));
		break;
	case OP_REDUCE_SCATTER:
		for (i = 0; i < rc; i++)
			bad += r[i] != rsum + (float)(n * (int)(((size_t)rank * rc + i) % 7));
		break;
	case OP_ALLGATHER:
		for (q = 0; q < n; q++)
			for (i = 0; i < rc; i++)
				bad += r[(size_t)q * rc + i] != (float)((q + 1) + (int)(i % 7));
		break;
	default:
		for (i = 0; i < count; i++)
			bad += s[i] != (float)(1 + (int)(i % 7));
		break;
	}
	return bad;
}

static double batch(int op, size_t count, int n, float *s, float *r, int iters)
{
	double t0, t, tmax;
	int i;

	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	for (i = 0; i < iters; i++)
		run_op(op, count, n, s, r);
	t = (MPI_Wtime() - t0) / iters;
	MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	return tmax;
}

/* CPU seconds (user + system) of this process so far. */
static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* The late peer (coll_bench.c's -W): the last rank (broadcast: the root)
 * calls wait_ms late. */
static void late_peer(int op, size_t count, int n, int rank, int wait_ms, const char *label,
		      float *s, float *r)
{
	double wall[3], cpu[3], w, u, x;
	int k;

	for (k = 0; k < 3; k++) {
		MPI_Barrier(MPI_COMM_WORLD);
		if (rank == (op == OP_BCAST ? 0 : n - 1)) {
			usleep((useconds_t)wait_ms * 1000);
			w = u = 0;
			run_op(op, count, n, s, r);
		} else {
			w = MPI_Wtime();
			u = cpu_s();
			run_op(op, count, n, s, r);
			u = cpu_s() - u;
			w = MPI_Wtime() - w;
		}
		MPI_Allreduce(&w, &x, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
		wall[k] = x;
		MPI_Allreduce(&u, &x, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
		cpu[k] = x;
	}
	qsort(wall, 3, sizeof(double), cmp_double);
	qsort(cpu, 3, sizeof(double), cmp_double);
	if (rank == 0) {
		printf("WAIT,%s,%s,%d,%.0f,%d,%.3f,%.3f\n", label, op_names[op], n,
		       (double)count * sizeof(float), wait_ms, wall[1] * 1e3, cpu[1] * 1e3);
		fflush(stdout);
	}
}

static double bus_factor(int op, int n)
{
	return op == OP_ALLREDUCE ? 2.0 * (n - 1) / n
		: op == OP_BCAST ? 1.0 : (double)(n - 1) / n;
}

int main(int argc, char **argv)
{
	size_t minb = 4096, maxb = 64u << 20, bytes;
	int factor = 4, reps = 7, warm = -1, on[OP_N] = { 1, 1, 1, 1 }, rank, n, i, op;
	int wait_ms = 0, bad = 0;
	double target_ms = 50, *ts;
	const char *label = "ompi";
	float *sbuf = NULL, *rbuf = NULL;
	char lib[MPI_MAX_LIBRARY_VERSION_STRING];
	int len;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	for (i = 1; i + 1 < argc; i += 2) {
		const char *a = argv[i], *v = argv[i + 1];

		if (strcmp(a, "-b") == 0)
			minb = strtoull(v, NULL, 0);
		else if (strcmp(a, "-e") == 0)
			maxb = strtoull(v, NULL, 0);
		else if (strcmp(a, "-f") == 0)
			factor = atoi(v);
		else if (strcmp(a, "-r") == 0)
			reps = atoi(v);
		else if (strcmp(a, "-t") == 0)
			target_ms = atof(v);
		else if (strcmp(a, "-w") == 0)
			warm = atoi(v);
		else if (strcmp(a, "-l") == 0)
			label = v;
		else if (strcmp(a, "-W") == 0)
			wait_ms = atoi(v);
		else if (strcmp(a, "-c") == 0) {
			char *list = strdup(v), *tok, *save = NULL;

			for (op = 0; op < OP_N; op++)
				on[op] = 0;
			for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
				for (op = 0; op < OP_N; op++)
					if (strcmp(tok, op_names[op]) == 0)
						on[op] = 1;
			free(list);
		} else {
			bad = 1;
		}
	}
	if (bad || i < argc || factor < 2 || minb < 4 || maxb < minb || reps < 1 ||
	    target_ms <= 0) {
		/* a factor of 1 would time one size forever */
		if (rank == 0)
			fprintf(stderr, "usage: coll_mpi [-b MINBYTES >= 4] [-e MAXBYTES >= MINBYTES] "
				"[-f FACTOR >= 2] [-r REPS >= 1] [-t TARGET_MS > 0] [-w WARMUP] "
				"[-l LABEL] [-W MS] [-c OPS]\n");
		MPI_Finalize();
		return 2;
	}
	MPI_Get_library_version(lib, &len);
	if (rank == 0) {
		char *nl = strchr(lib, '\n');

		if (nl != NULL)
			*nl = '\0';
		printf("# %s | nranks=%d | reps=%d target_ms=%.0f | GB/s = 1e9 B/s\n", lib, n,
		       reps, target_ms);
		printf("# %-14s %11s %7s %11s %11s %11s %9s %9s %9s %9s\n", "op", "bytes",
		       "iters", "t_med(us)", "t_min(us)", "t_max(us)", "algbw", "busbw",
		       "busbw_lo", "busbw_hi");
	}
	if (posix_memalign((void **)&sbuf, 4096, maxb) != 0 ||
	    posix_memalign((void **)&rbuf, 4096, maxb) != 0)
		MPI_Abort(MPI_COMM_WORLD, 1);
	memset(sbuf, 0, maxb);
	memset(rbuf, 0, maxb);
	ts = calloc((size_t)reps, sizeof(*ts));
	for (op = 0; op < OP_N; op++) {
		if (!on[op])
			continue;
		for (bytes = minb; bytes <= maxb; bytes *= (size_t)factor) {
			size_t count = bytes / sizeof(float);
			double b, t1, tmed, tmin, tmax, bf, alg;
			int nwarm = warm >= 0 ? warm : bytes >= (16u << 20) ? 2 : 10, cal, iters;
			long bad, badsum = 0;

			if (op == OP_REDUCE_SCATTER || op == OP_ALLGATHER)
				count -= count % (size_t)n;	/* equal blocks */
			b = (double)count * sizeof(float);
			fill(rank, n, op, count, sbuf);
			run_op(op, count, n, sbuf, rbuf);
			bad = check(rank, n, op, count, sbuf, rbuf);
			MPI_Allreduce(&bad, &badsum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
			if (badsum && rank == 0)
				fprintf(stderr, "CHECK FAILED %s bytes=%zu bad=%ld\n", op_names[op],
					bytes, badsum);
			for (i = 0; i < nwarm; i++)
				run_op(op, count, n, sbuf, rbuf);
			t1 = batch(op, count, n, sbuf, rbuf, 1);
			cal = (int)ceil(2e-3 / (t1 > 0 ? t1 : 1e-6));
			cal = cal < 1 ? 1 : cal > 100 ? 100 : cal;
			t1 = batch(op, count, n, sbuf, rbuf, cal);
			iters = (int)(target_ms * 1e-3 / (t1 > 0 ? t1 : 1e-6));
			iters = iters < 1 ? 1 : iters > 2000 ? 2000 : iters;
			for (i = 0; i < reps; i++)
				ts[i] = batch(op, count, n, sbuf, rbuf, iters);
			qsort(ts, (size_t)reps, sizeof(*ts), cmp_double);
			tmed = reps % 2 ? ts[reps / 2] : 0.5 * (ts[reps / 2 - 1] + ts[reps / 2]);
			tmin = ts[0];
			tmax = ts[reps - 1];
			bf = bus_factor(op, n);
			alg = b / tmed / 1e9;
			if (rank == 0) {
				printf("  %-14s %11.0f %7d %11.2f %11.2f %11.2f %9.3f %9.3f %9.3f "
				       "%9.3f%s\n", op_names[op], b, iters, tmed * 1e6, tmin * 1e6,
				       tmax * 1e6, alg, alg * bf, b / tmax / 1e9 * bf,
				       b / tmin / 1e9 * bf, badsum ? "  CHECK-FAILED" : "");
				printf("CSV,%s,%s,%d,%.0f,%d,%.3f,%.3f,%.3f,%.4f,%.4f,%.4f,%.4f,%d\n",
				       label, op_names[op], n, b, iters, tmed * 1e6, tmin * 1e6,
				       tmax * 1e6, alg, alg * bf, b / tmax / 1e9 * bf,
				       b / tmin / 1e9 * bf, badsum ? 0 : 1);
				fflush(stdout);
			}
		}
	}
	for (op = 0; op < OP_N && wait_ms > 0; op++)
		if (on[op]) {
			size_t count = minb / sizeof(float);

			if (op == OP_REDUCE_SCATTER || op == OP_ALLGATHER)
				count -= count % (size_t)n;	/* equal blocks */
			fill(rank, n, op, count, sbuf);
			late_peer(op, count, n, rank, wait_ms, label, sbuf, rbuf);
		}
	free(ts);
	free(sbuf);
	free(rbuf);
	MPI_Finalize();
	return 0;
}
