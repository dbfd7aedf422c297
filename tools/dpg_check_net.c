/* SPDX-License-Identifier: BSD-3-Clause */
/* dpg_check_net.c - dpg-check's gathering: every task's row to rank 0
 * through a rendezvous store on MASTER_PORT (rank 0 names the tasks that
 * never reported, by node, at DPG_TIMEOUT), then the point-to-point test. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "checkp2p.h"
#include "dpg_check.h"
#include "hostlist.h"
#include "net.h"
#include "store.h"

#define ROW_MAX 8192
#define KEY_GO "dpgcheck/go"
#define KEY_DONE "dpgcheck/done"
/* a key that exists gets answered in far less than this */
#define GRACE_MS 300

static int64_t gather_deadline(const struct check_step *s)
{
	return s->t0_ms + (s->deadline_ms - s->t0_ms) / 2;
}

static int send_row(const struct check_step *s, struct dpg_store *st,
		    const struct dpg_check_row *mine, struct dpg_err *err)
{
	char key[64], buf[ROW_MAX];

	if (dpg_check_encode(mine, buf, sizeof(buf), err) != 0)
		return -DPG_ERR_INVALID;
	snprintf(key, sizeof(key), "dpgcheck/row/%d/%d", s->node_rank, s->local_rank);
	return dpg_store_set(st, key, buf, strlen(buf), s->deadline_ms, err);
}

/* Rank 0: node i's expected rows; the first missing one ends the wait for
 * the others (they get GRACE_MS each: a row already there comes at once). */
static void collect_node(const struct check_step *s, struct dpg_store *st, int i,
			 struct dpg_check_row *n, int64_t *deadline)
{
	for (uint32_t l = 0; l < s->tasks_per_node[i]; l++) {
		struct dpg_err e = { "" };
		struct dpg_check_row t;
		char key[64];
		void *val = NULL;
		size_t len = 0;
		int64_t now = dpg_now_ms();

		snprintf(key, sizeof(key), "dpgcheck/row/%d/%u", i, l);
		if (*deadline < now + GRACE_MS)
			*deadline = now + GRACE_MS;
		if (dpg_store_get(st, key, &val, &len, *deadline, &e) != 0) {
			*deadline = 0;
			continue;
		}
		if (dpg_check_decode(val, len, &t, &e) == 0)
			dpg_check_merge(n, &t);
		else
			snprintf(n->missing, sizeof(n->missing), "local rank %u sent a "
				 "bad row: %s", l, e.msg);
		free(val);
	}
}

static void name_missing(const struct check_step *s, int i, struct dpg_check_row *n)
{
	struct dpg_err e = { "" };

	if (n->node[0] == '\0' &&
	    dpg_hostlist_nth(s->nodelist, (size_t)i, n->node, sizeof(n->node), &e) != 0)
		snprintf(n->node, sizeof(n->node), "node#%d", i);
	if (n->tasks < n->expected && n->missing[0] == '\0')
		snprintf(n->missing, sizeof(n->missing), "%d of %d tasks reported within "
			 "%.0f s (DPG_TIMEOUT/2): the others did not start, hang before "
			 "reaching the network, or cannot reach %.64s:%u; look at that node "
			 "(slurmd log, srun -w %.64s hostname)", n->tasks, n->expected,
			 s->timeout_s / 2, s->master_addr, (unsigned)s->master_port, n->node);
}

/* A port for the test's own world (its store), free now on rank 0's node. */
static uint16_t pick_port(void)
{
	uint16_t port = 0;
	int fd = -1;

	if (dpg_net_listen(NULL, 0, 1, &fd, &port, NULL) != 0)
		return 0;
	close(fd);
	return port;
}

/* The point-to-point test's plan (checkp2p.h): rank 0's node and every
 * node whose tasks all reported with no failing cell (a broken node would
 * fail the test's dpg_init for every node), NCCL among those with a GPU. */
static int plan_test(const struct check_step *s, const struct dpg_check_row *rows,
		     uint16_t port, char *go, size_t len, struct dpg_err *err)
{
	int *cpu = calloc((size_t)s->nodes, sizeof(int));
	int *nccl = calloc((size_t)s->nodes, sizeof(int));
	struct dpg_check_p2p p = { .cpu = cpu, .nccl = nccl };
	int rc;

	if (cpu == NULL || nccl == NULL) {
		free(cpu);
		free(nccl);
		return dpg_errs(err, DPG_ERR_NOMEM, "out of memory");
	}
	dpg_check_p2p_plan(rows, s->nodes, s->node_rank, port, &p);
	rc = dpg_check_p2p_format(&p, go, len, err);
	free(cpu);
	free(nccl);
	return rc;
}

/* Rank 0 with its store up: rows in, "go" out, then wait (briefly) until
 * every task that came has read it. */
static int rank0_gather(const struct check_step *s, struct dpg_store *st,
			struct dpg_check_row *rows, char *go, size_t golen,
			struct dpg_err *err)
{
	int64_t deadline = gather_deadline(s), done = 0, end;
	int came = 0;

	for (int i = 0; i < s->nodes; i++) {
		rows[i].expected = (int)s->tasks_per_node[i];
		collect_node(s, st, i, &rows[i], &deadline);
		name_missing(s, i, &rows[i]);
		came += rows[i].tasks;
	}
	if (plan_test(s, rows, s->nodes > 1 ? pick_port() : 0, go, golen, err) != 0)
		snprintf(go, golen, "0");	/* no test: the others learn it too */
	if (dpg_store_set(st, KEY_GO, go, strlen(go), s->deadline_ms, err) != 0)
		return -DPG_ERR_PEER;
	end = dpg_now_ms() + 2000;
	while (done < came - 1 && dpg_now_ms() < end &&
	       dpg_store_add(st, KEY_DONE, 0, &done, end, NULL) == 0)
		usleep(10000);
	return 0;
}

static int peer_gather(const struct check_step *s, struct dpg_store *st,
		       char *go, size_t golen, struct dpg_err *err)
{
	void *val = NULL;
	size_t len = 0;
	int64_t done;
	int rc = dpg_store_get(st, KEY_GO, &val, &len, s->deadline_ms, err);

	if (rc != 0)
		return rc;
	snprintf(go, golen, "%.*s", (int)len, (const char *)val);
	free(val);
	return dpg_store_add(st, KEY_DONE, 1, &done, s->deadline_ms, err);
}

/* Rank 0 without a store (MASTER_PORT taken): its own row, the others not
 * checked. */
static void rank0_alone(const struct check_step *s, const struct dpg_check_row *mine,
			struct dpg_check_row *rows, const char *why)
{
	for (int i = 0; i < s->nodes; i++) {
		rows[i].expected = (int)s->tasks_per_node[i];
		if (i == s->node_rank)
			dpg_check_merge(&rows[i], mine);
		name_missing(s, i, &rows[i]);
		if (rows[i].tasks < rows[i].expected)
			snprintf(rows[i].missing, sizeof(rows[i].missing), "not checked: "
				 "rank 0 could not listen on MASTER_PORT %u (%.200s)",
				 (unsigned)s->master_port, why);
	}
}

static int connect_store(const struct check_step *s, const uint8_t *key, size_t klen,
			 struct dpg_store **st, struct dpg_err *err)
{
	int rc = dpg_store_connect(s->master_addr, s->master_port, key, klen,
				   gather_deadline(s), NULL, st, err);

	if (rc != 0)
		dpg_err_prefix(err, "cannot reach rank 0's dpg-check store");
	return rc;
}

int check_gather(const struct check_step *s, const struct check_gpu *g,
		 const struct dpg_check_row *mine, struct dpg_check_row *rows,
		 struct dpg_err *err)
{
	uint8_t key[DPG_STORE_SECRET_MAX];
	size_t klen = 0;
	struct dpg_store_server *srv = NULL;
	struct dpg_store *st = NULL;
	char go[8 * CHECK_MAX_NODES] = "0";
	int rc;

	if (dpg_secret_parse(s->secret, key, sizeof(key), &klen, err) != 0)
		return -DPG_ERR_AUTH;
	if (s->rank == 0 && dpg_store_server_start(NULL, s->master_port, key, klen,
						   &srv, err) != 0) {
		rank0_alone(s, mine, rows, err->msg);
		return 0;
	}
	rc = connect_store(s, key, klen, &st, err);
	if (rc == 0)
		rc = send_row(s, st, mine, err);
	if (rc == 0)
		rc = s->rank == 0 ? rank0_gather(s, st, rows, go, sizeof(go), err)
				  : peer_gather(s, st, go, sizeof(go), err);
	dpg_store_close(st);
	if (srv != NULL)
		dpg_store_server_stop(srv);
	return rc != 0 ? rc : check_p2p(s, g, go, rows, err);
}
