/* SPDX-License-Identifier: BSD-3-Clause */
/* store_bench.c - time a job-start rendezvous through the dpg store: N clients
 * spread over P processes (threads), the server in this process, on loopback.
 *
 *   store_bench [-n CLIENTS] [-p PROCS] [-a ADDRS] [-t TIMEOUT_S]
 *
 * Each client connects to 127.0.0.(1 + i % ADDRS) (several destination
 * addresses keep 16k+ connections clear of ephemeral-port exhaustion), sets
 * addr/<i>, ADDs 1 to "arrived" (the N-th arrival sets "go"), WAITs for "go",
 * then GETs its neighbour's address: the shape of bench/tcpstore_clients.py.
 * Processes are forked and their threads created before the clock starts;
 * the clock stops when every client is done.  Prints one line:
 *   dpg clients=N procs=P rendezvous_s=S ok=K fail=F [first error]
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net.h"
#include "store.h"

struct result {
	int ok, fail;
	char msg[240];
};

struct gate {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int open;
	uint16_t port;
};

struct worker {
	struct gate *g;
	int i, n, addrs;
	double timeout_s;
	const uint8_t *secret;
	struct dpg_store *st;
	int rc;
	char msg[DPG_ERR_MSG_MAX];
};

static void raise_nofile(void)
{
	struct rlimit r;

	if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
		r.rlim_cur = r.rlim_max;
		setrlimit(RLIMIT_NOFILE, &r);
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct dpg_err err = { "" };
	const char *go[] = { "go" };
	char host[32], key[64], val[64], want[64];
	int64_t deadline, arrived = 0;
	void *v = NULL;
	size_t len = 0;
	uint16_t port;

	pthread_mutex_lock(&w->g->mu);
	while (!w->g->open)
		pthread_cond_wait(&w->g->cv, &w->g->mu);
	port = w->g->port;
	pthread_mutex_unlock(&w->g->mu);

	deadline = dpg_now_ms() + (int64_t)(w->timeout_s * 1000);
	snprintf(host, sizeof(host), "127.0.0.%d", 1 + w->i % w->addrs);
	snprintf(key, sizeof(key), "addr/%d", w->i);
	snprintf(val, sizeof(val), "host%d:1234", w->i);
	w->rc = dpg_store_connect(host, port, w->secret, 32, deadline, NULL, &w->st, &err);
	if (w->rc == 0)
		w->rc = dpg_store_set(w->st, key, val, strlen(val), deadline, &err);
	if (w->rc == 0)
		w->rc = dpg_store_add(w->st, "arrived", 1, &arrived, deadline, &err);
	if (w->rc == 0 && arrived == w->n)
		w->rc = dpg_store_set(w->st, "go", "1", 1, deadline, &err);
	if (w->rc == 0)
		w->rc = dpg_store_wait(w->st, go, 1, deadline, &err);
	snprintf(key, sizeof(key), "addr/%d", (w->i + 1) % w->n);
	snprintf(want, sizeof(want), "host%d:1234", (w->i + 1) % w->n);
	if (w->rc == 0)
		w->rc = dpg_store_get(w->st, key, &v, &len, deadline, &err);
	if (w->rc == 0 && (len != strlen(want) || memcmp(v, want, len) != 0)) {
		w->rc = -1;
		snprintf(err.msg, sizeof(err.msg), "wrong value for %s", key);
	}
	free(v);
	if (w->rc != 0)
		snprintf(w->msg, sizeof(w->msg), "%s", err.msg);
	return NULL;
}

/* One client process: `count` clients from `first`; never returns. */
static void child_main(int first, int count, int n, int addrs, double timeout_s,
		       const uint8_t *secret, int start_fd, int ready_fd, int result_fd)
{
	struct worker *w = calloc((size_t)count, sizeof(*w));
	pthread_t *th = calloc((size_t)count, sizeof(*th));
	struct gate g = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };
	struct result res = { 0, 0, "" };
	pthread_attr_t at;
	uint8_t pb[2];
	int i, made = 0;

	prctl(PR_SET_PDEATHSIG, SIGKILL);	/* die with the parent */
	raise_nofile();
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, 128 * 1024);
	for (i = 0; w != NULL && th != NULL && i < count; i++) {
		w[i] = (struct worker){ .g = &g, .i = first + i, .n = n, .addrs = addrs,
					.timeout_s = timeout_s, .secret = secret };
		if (pthread_create(&th[i], &at, worker_main, &w[i]) != 0)
			break;
		made++;
	}
	if (write(ready_fd, "r", 1) != 1 || read(start_fd, pb, 2) != 2)
		_exit(3);
	pthread_mutex_lock(&g.mu);
	g.port = (uint16_t)(pb[0] | pb[1] << 8);
	g.open = 1;
	pthread_cond_broadcast(&g.cv);
	pthread_mutex_unlock(&g.mu);
	for (i = 0; i < made; i++) {
		pthread_join(th[i], NULL);
		if (w[i].rc == 0) {
			res.ok++;
		} else {
			if (res.fail++ == 0)
				snprintf(res.msg, sizeof(res.msg), "client %d: %s", w[i].i,
					 w[i].msg);
		}
	}
	if (made < count) {
		if (res.fail == 0)
			snprintf(res.msg, sizeof(res.msg), "could create only %d of %d "
				 "threads", made, count);
		res.fail += count - made;
	}
	if (write(result_fd, &res, sizeof(res)) != (ssize_t)sizeof(res))
		_exit(4);
	for (i = 0; i < made; i++)
		dpg_store_close(w[i].st);
	_exit(0);
}

int main(int argc, char **argv)
{
	int n = 1024, procs = 8, addrs = 8, opt, p, ok = 0, fail = 0;
	int ready[2], results[2], *start;
	double timeout_s = 60;
	uint8_t secret[32];
	struct dpg_store_server *srv;
	struct dpg_err err;
	char first_err[256] = "";
	pid_t *pids;
	int64_t t0, t1;
	char c;

	while ((opt = getopt(argc, argv, "n:p:a:t:")) != -1) {
		switch (opt) {
		case 'n': n = atoi(optarg); break;
		case 'p': procs = atoi(optarg); break;
		case 'a': addrs = atoi(optarg); break;
		case 't': timeout_s = atof(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-n CLIENTS] [-p PROCS] [-a ADDRS] "
				"[-t TIMEOUT_S]\n", argv[0]);
			return 2;
		}
	}
	if (n < 1 || procs < 1 || procs > n || addrs < 1 || addrs > 250) {
		fprintf(stderr, "store_bench: bad arguments\n");
		return 2;
	}
	raise_nofile();
	signal(SIGPIPE, SIG_IGN);
	if (getrandom(secret, sizeof(secret), 0) != (ssize_t)sizeof(secret) ||
	    pipe(ready) != 0 || pipe(results) != 0)
		return 1;
	start = calloc((size_t)procs, sizeof(*start));
	pids = calloc((size_t)procs, sizeof(*pids));
	if (start == NULL || pids == NULL)
		return 1;
	/* fork the clients before the server thread exists */
	for (p = 0; p < procs; p++) {
		int sp[2], first = (int)((int64_t)n * p / procs);
		int count = (int)((int64_t)n * (p + 1) / procs) - first;

		if (pipe(sp) != 0)
			return 1;
		pids[p] = fork();
		if (pids[p] < 0) {
			perror("fork");
			return 1;
		}
		if (pids[p] == 0) {
			close(sp[1]);
			close(ready[0]);
			close(results[0]);
			child_main(first, count, n, addrs, timeout_s, secret, sp[0], ready[1],
				   results[1]);
		}
		close(sp[0]);
		start[p] = sp[1];
	}
	close(ready[1]);
	close(results[1]);
	for (p = 0; p < procs; p++)
		if (read(ready[0], &c, 1) != 1) {
			fprintf(stderr, "store_bench: a client process died\n");
			return 1;
		}
	if (dpg_store_server_start(NULL, 0, secret, sizeof(secret), &srv, &err) != 0) {
		fprintf(stderr, "store_bench: %s\n", err.msg);
		return 1;
	}
	t0 = dpg_now_ms();
	for (p = 0; p < procs; p++) {
		uint16_t port = dpg_store_server_port(srv);
		uint8_t pb[2] = { (uint8_t)port, (uint8_t)(port >> 8) };

		if (write(start[p], pb, 2) != 2)
			return 1;
		close(start[p]);
	}
	for (p = 0; p < procs; p++) {
		struct result r;

		if (read(results[0], &r, sizeof(r)) != (ssize_t)sizeof(r)) {
			fprintf(stderr, "store_bench: a client process died\n");
			fail += 1;
			break;
		}
		ok += r.ok;
		fail += r.fail;
		if (r.fail > 0 && first_err[0] == '\0')
			snprintf(first_err, sizeof(first_err), "%s", r.msg);
	}
	t1 = dpg_now_ms();
	for (p = 0; p < procs; p++)
		waitpid(pids[p], NULL, 0);
	dpg_store_server_stop(srv);
	printf("dpg clients=%d procs=%d rendezvous_s=%.3f ok=%d fail=%d%s%s\n", n, procs,
	       (double)(t1 - t0) / 1000.0, ok, fail, first_err[0] ? " error: " : "",
	       first_err);
	free(start);
	free(pids);
	return fail == 0 ? 0 : 1;
}
