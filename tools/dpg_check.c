/* SPDX-License-Identifier: BSD-3-Clause */
/* dpg_check.c - dpg-check: run as a step, every task checks what the plan
 * gave it against what it sees; rank 0 prints one row per node. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <unistd.h>

#include "contract_vars.h"
#include "dpg_check.h"
#include "hostlist.h"
#include "net.h"
#include "netif.h"
#include "portcheck.h"
#include "probe.h"
#include "taskdist.h"

#define DEFAULT_TIMEOUT_S 30.0

static int env_int(const char *name, int *out, struct dpg_err *err)
{
	const char *v = getenv(name);
	char *end;
	long x;

	if (v == NULL || v[0] == '\0')
		return dpg_errf(err, "%s is not set: run dpg-check as a step with a "
				"--dpg-* option (srun --dpg-gpus-per-task=N dpg-check)", name);
	x = strtol(v, &end, 10);
	if (*end != '\0' || x < 0 || x > 0x7fffffffL)
		return dpg_errf(err, "%s='%.32s' is not a count", name, v);
	*out = (int)x;
	return 0;
}

static int read_layout(struct check_step *s, struct dpg_err *err)
{
	const char *tpn = getenv("SLURM_STEP_TASKS_PER_NODE");
	size_t n = 0;

	s->nodelist = getenv("SLURM_STEP_NODELIST") ? strdup(getenv("SLURM_STEP_NODELIST")) : NULL;
	if (s->nodelist == NULL || tpn == NULL)
		return dpg_errf(err, "SLURM_STEP_NODELIST or SLURM_STEP_TASKS_PER_NODE "
				"is not set: run dpg-check as an srun step");
	s->tasks_per_node = calloc((size_t)s->nodes, sizeof(uint32_t));
	if (s->tasks_per_node == NULL)
		return dpg_errs(err, DPG_ERR_NOMEM, "out of memory");
	if (dpg_tpn_parse(tpn, s->tasks_per_node, (size_t)s->nodes, &n, err) != 0)
		return dpg_err_prefix(err, "SLURM_STEP_TASKS_PER_NODE");
	if (n != (size_t)s->nodes)
		return dpg_errf(err, "SLURM_STEP_TASKS_PER_NODE='%.64s' has %zu nodes, "
				"DPG_NUM_NODES=%d", tpn, n, s->nodes);
	return 0;
}

static int read_step(struct check_step *s, struct dpg_err *err)
{
	const char *port = getenv(DPG_VAR_MASTER_PORT), *to = getenv("DPG_TIMEOUT");
	const char *nn = getenv("SLURMD_NODENAME");
	int p = 0;

	if (env_int(DPG_VAR_RANK, &s->rank, err) || env_int(DPG_VAR_WORLD_SIZE, &s->world, err) ||
	    env_int(DPG_VAR_LOCAL_RANK, &s->local_rank, err) ||
	    env_int(DPG_VAR_LOCAL_WORLD_SIZE, &s->local_world, err) ||
	    env_int(DPG_VAR_NODE_RANK, &s->node_rank, err) ||
	    env_int(DPG_VAR_NUM_NODES, &s->nodes, err) || env_int(DPG_VAR_MASTER_PORT, &p, err))
		return -DPG_ERR_ENV;
	(void)port;
	if (s->nodes < 1 || s->nodes > CHECK_MAX_NODES || p < 1 || p > 65535)
		return dpg_errs(err, DPG_ERR_ENV, "DPG_NUM_NODES=%d or DPG_MASTER_PORT=%d "
				"out of range", s->nodes, p);
	s->master_port = (uint16_t)p;
	/* owned copies: the point-to-point test scrubs the environment */
	s->master_addr = getenv(DPG_VAR_MASTER_ADDR) ? strdup(getenv(DPG_VAR_MASTER_ADDR)) : NULL;
	s->secret = getenv(DPG_VAR_SECRET) ? strdup(getenv(DPG_VAR_SECRET)) : NULL;
	if (s->master_addr == NULL || s->secret == NULL)
		return dpg_errs(err, DPG_ERR_ENV, "DPG_MASTER_ADDR or DPG_SECRET is not set: "
				"run dpg-check as a step with a --dpg-* option");
	s->timeout_s = to != NULL ? strtod(to, NULL) : DEFAULT_TIMEOUT_S;
	if (!(s->timeout_s > 0))
		s->timeout_s = DEFAULT_TIMEOUT_S;
	s->t0_ms = dpg_now_ms();
	s->deadline_ms = s->t0_ms + (int64_t)(s->timeout_s * 1000.0);
	if (nn != NULL)
		snprintf(s->node, sizeof(s->node), "%s", nn);
	else if (gethostname(s->node, sizeof(s->node)) != 0)
		snprintf(s->node, sizeof(s->node), "?");
	return read_layout(s, err) != 0 ? -DPG_ERR_ENV : 0;
}

/* True when addr (this node's source address towards MASTER_ADDR) is
 * MASTER_ADDR itself: this node holds it, and MASTER_PORT is rank 0's. */
static bool holds_master(const char *master, const char *addr)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;
	char ip[INET_ADDRSTRLEN] = "";
	bool same;

	if (getaddrinfo(master, NULL, &hints, &res) != 0 || res == NULL)
		return false;
	inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, ip, sizeof(ip));
	same = strcmp(ip, addr) == 0;
	freeaddrinfo(res);
	return same;
}

/* The route to MASTER_ADDR, its interface's state, and MASTER_PORT: free on
 * rank 0's node before its store listens; on the others (a later step may
 * put rank 0 there) unless the node holds MASTER_ADDR itself. */
static void check_master(const struct check_step *s, const char *root,
			 struct dpg_check_row *row)
{
	struct dpg_err e = { "" };
	char ifname[64], addr[64];
	struct dpg_check_cell *port = &row->cell[DPG_CHECK_PORT];
	char v[DPG_CHECK_SHORT_MAX];
	bool local;

	if (dpg_route_ifname(s->master_addr, ifname, sizeof(ifname), &e) != 0 ||
	    dpg_route_addr(s->master_addr, addr, sizeof(addr), &e) != 0) {
		dpg_check_set(&row->cell[DPG_CHECK_MASTER], DPG_CHECK_FAIL, "no route",
			      "%s: fix the name service or the routes towards rank 0's node",
			      e.msg);
		return;
	}
	dpg_probe_ifup(root, ifname, &row->cell[DPG_CHECK_MASTER]);
	local = holds_master(s->master_addr, addr);
	snprintf(v, sizeof(v), "%u", (unsigned)s->master_port);
	if (local && s->rank != 0)
		dpg_check_set(port, DPG_CHECK_NA, "rank 0's host", "%s", "");
	else if (dpg_port_check_free(s->master_port, &e) != 0)
		dpg_check_set(port, DPG_CHECK_FAIL, v, "%s%s: find the holder with ss -ltnp "
			      "'sport = :%u' and stop it, or choose another port "
			      "(--dpg-port)", e.msg, s->rank == 0 ? "" :
			      " (a step whose rank 0 is here would fail)",
			      (unsigned)s->master_port);
	else
		dpg_check_set(port, DPG_CHECK_OK, v, "%s", "");
}

void check_local_row(const struct check_step *s, const char *root,
		     struct check_gpu *g, struct dpg_check_row *row)
{
	memset(row, 0, sizeof(*row));
	snprintf(row->node, sizeof(row->node), "%s", s->node);
	row->rank = s->rank;
	row->tasks = 1;
	dpg_probe_gpus(root, getenv(DPG_VAR_GPUS), getenv("CUDA_VISIBLE_DEVICES"),
		       &row->cell[DPG_CHECK_GPUS]);
	dpg_probe_nics(root, getenv(DPG_VAR_NICS), &row->cell[DPG_CHECK_NICS]);
	dpg_probe_cpus(root, getenv(DPG_VAR_CPUS), &row->cell[DPG_CHECK_CPUS]);
	check_master(s, root, row);
	dpg_probe_nofile(root, s->world, s->rank == 0, &row->cell[DPG_CHECK_NOFILE]);
	dpg_probe_somaxconn(root, s->world, &row->cell[DPG_CHECK_SOMAXCONN]);
	dpg_probe_shm(root, s->local_world, &row->cell[DPG_CHECK_SHM]);
	dpg_check_set(&row->cell[DPG_CHECK_NET], DPG_CHECK_NA, "", "%s", "");
	check_gpu_probe(s, g, &row->cell[DPG_CHECK_NCCL]);
}

static void usage(FILE *f)
{
	fputs("usage: srun -N<nodes> --ntasks-per-node=<n> --dpg-gpus-per-task=<g> "
	      "dpg-check [--json]\n"
	      "Checks every node of the step; rank 0 prints one row per node and\n"
	      "the step exits 0 only when every node is fit (man dpg-check).\n", f);
}

static int parse_args(int argc, char **argv, struct check_step *s)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "jh", longopts, NULL)) != -1) {
		if (c == 'j') {
			s->json = true;
		} else if (c == 'h') {
			usage(stdout);
			exit(0);
		} else {
			usage(stderr);
			return -1;
		}
	}
	return optind == argc ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct check_step s = { 0 };
	struct dpg_check_row mine, *rows = NULL;
	struct check_gpu gpu;
	struct dpg_err err = { "" };
	int fit = 1;

	if (parse_args(argc, argv, &s) != 0)
		return 2;
	if (read_step(&s, &err) != 0) {
		fprintf(stderr, "dpg-check: %s\n", err.msg);
		return 2;
	}
	check_local_row(&s, "", &gpu, &mine);
	rows = calloc((size_t)s.nodes, sizeof(*rows));
	if (rows == NULL || check_gather(&s, &gpu, &mine, rows, &err) != 0) {
		fprintf(stderr, "dpg-check: rank %d (%s): %s\n", s.rank, s.node,
			rows == NULL ? "out of memory" : err.msg);
		/* only rank 0's status is the verdict: another task's failure
		 * is named in rank 0's table, and a non-zero exit here would
		 * make srun's kill-on-bad-exit end rank 0 before it prints */
		free(rows);
		check_gpu_close(&gpu);
		return s.rank == 0 ? 1 : 0;
	}
	if (s.rank == 0) {
		for (int i = 0; i < s.nodes; i++)
			fit = fit && dpg_check_row_fit(&rows[i]);
		if (s.json)
			dpg_check_print_json(stdout, rows, (size_t)s.nodes);
		else
			dpg_check_print_table(stdout, rows, (size_t)s.nodes);
	}
	/* another task exits 0 once rank 0 has its row (see above) */
	free(rows);
	check_gpu_close(&gpu);
	free(s.tasks_per_node);
	free(s.master_addr);
	free(s.secret);
	free(s.nodelist);
	return fit ? 0 : 1;
}
