/* SPDX-License-Identifier: BSD-3-Clause */
/* checkp2p.c - dpg-check's point-to-point test plan: who takes part over the
 * CPU backend and over NCCL, the message to the tasks, the NET/NCCL cells. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkp2p.h"

#define PENDING "pending"
#define READY "ready"

bool dpg_check_gpu_planned(const char *gpus, const char *per_task)
{
	char *end;
	long n;

	if (gpus != NULL)
		return gpus[0] != '\0';
	if (per_task == NULL || per_task[0] == '\0')
		return false;
	n = strtol(per_task, &end, 10);
	return *end == '\0' && n > 0;
}

void dpg_check_nccl_ready(const struct dpg_check_gpu *g, struct dpg_check_cell *c)
{
	if (!g->planned)
		dpg_check_set(c, DPG_CHECK_NA, "no GPU planned", "%s", "");
	else if (g->module_err != NULL)
		dpg_check_set(c, DPG_CHECK_NA, "no GPU module", "not measured: %s",
			      g->module_err);
	else if (g->devices <= 0)
		dpg_check_set(c, DPG_CHECK_NA, "no CUDA device", "not measured: the GPU "
			      "module loaded but CUDA shows this task no device (see the "
			      "GPUS column, nvidia-smi, CUDA_VISIBLE_DEVICES)");
	else if (!g->allocator)
		dpg_check_set(c, DPG_CHECK_NA, "no allocator", "not measured: the GPU "
			      "module was built without nvcc, so it has no device-memory "
			      "calls for the test's buffers (build dpg with nvcc on the PATH)");
	else if (g->device < 0)
		dpg_check_set(c, DPG_CHECK_NA, "no device", "not measured: %s",
			      g->pick_err != NULL ? g->pick_err : "no device for the task");
	else
		dpg_check_set(c, DPG_CHECK_OK, READY, "%s", "");
}

static bool nccl_ready(const struct dpg_check_row *r)
{
	const struct dpg_check_cell *c = &r->cell[DPG_CHECK_NCCL];

	return r->tasks > 0 && c->state == DPG_CHECK_OK && strcmp(c->value, READY) == 0;
}

void dpg_check_p2p_plan(const struct dpg_check_row *rows, int nodes, int me,
			uint16_t port, struct dpg_check_p2p *p)
{
	p->port = port;
	p->ncpu = 0;
	p->nnccl = 0;
	if (port == 0 || nodes < 2)
		return;
	p->cpu[p->ncpu++] = me;
	for (int i = 0; i < nodes; i++)
		if (i != me && dpg_check_row_fit(&rows[i]))
			p->cpu[p->ncpu++] = i;
	if (!nccl_ready(&rows[me]))
		return;
	for (int k = 0; k < p->ncpu; k++)
		if (nccl_ready(&rows[p->cpu[k]]))
			p->nccl[p->nnccl++] = p->cpu[k];
	if (p->nnccl < 2)
		p->nnccl = 0;
}

int dpg_check_p2p_index(const int *list, int n, int node)
{
	for (int k = 0; k < n; k++)
		if (list[k] == node)
			return k;
	return -1;
}

static void mark_net(struct dpg_check_row *rows, int nodes, int me,
		     const struct dpg_check_p2p *p)
{
	int n = p->ncpu > 1 ? p->ncpu : 0;

	for (int i = 0; i < nodes; i++)
		dpg_check_set(&rows[i].cell[DPG_CHECK_NET], DPG_CHECK_NA,
			      dpg_check_p2p_index(p->cpu, n, i) >= 0 ? PENDING : "skipped",
			      "%s", "");
	dpg_check_set(&rows[me].cell[DPG_CHECK_NET], DPG_CHECK_NA, "rank 0", "%s", "");
}

/* Node i's NCCL cell when it is not in the NCCL test. */
static void nccl_left_out(struct dpg_check_row *rows, int i, int me,
			  const struct dpg_check_p2p *p)
{
	struct dpg_check_cell *c = &rows[i].cell[DPG_CHECK_NCCL];
	const struct dpg_check_cell *z = &rows[me].cell[DPG_CHECK_NCCL];
	bool in_cpu = p->ncpu > 1 && dpg_check_p2p_index(p->cpu, p->ncpu, i) >= 0;

	if (c->state == DPG_CHECK_NA && c->value[0] != '\0')
		return;		/* its own reason */
	if (nccl_ready(&rows[i]) && in_cpu)
		dpg_check_set(c, DPG_CHECK_NA, "not run", "not measured: rank 0's node "
			      "%s cannot run NCCL (%s%s%s)", rows[me].node, z->value,
			      z->detail[0] != '\0' ? ": " : "", z->detail);
	else
		dpg_check_set(c, DPG_CHECK_NA, "skipped", "%s", "");
}

void dpg_check_p2p_mark(struct dpg_check_row *rows, int nodes, int me,
			const struct dpg_check_p2p *p)
{
	mark_net(rows, nodes, me, p);
	for (int i = 0; i < nodes; i++) {
		if (i == me && nccl_ready(&rows[i]))
			dpg_check_set(&rows[i].cell[DPG_CHECK_NCCL], DPG_CHECK_NA, "rank 0",
				      "%s", "");
		else if (i != me && dpg_check_p2p_index(p->nccl, p->nnccl, i) >= 0)
			dpg_check_set(&rows[i].cell[DPG_CHECK_NCCL], DPG_CHECK_NA, PENDING,
				      "%s", "");
		else if (i != me)
			nccl_left_out(rows, i, me, p);
	}
}

static int put_list(char *buf, size_t len, size_t *o, const int *list, int n)
{
	int w = snprintf(buf + *o, len - *o, " %d", n);

	for (int k = 0; w >= 0 && (size_t)w < len - *o && k < n; k++) {
		*o += (size_t)w;
		w = snprintf(buf + *o, len - *o, " %d", list[k]);
	}
	if (w < 0 || (size_t)w >= len - *o)
		return -1;
	*o += (size_t)w;
	return 0;
}

int dpg_check_p2p_format(const struct dpg_check_p2p *p, char *buf, size_t len,
			 struct dpg_err *err)
{
	int w = snprintf(buf, len, "%u", (unsigned)p->port);
	size_t o;

	if (w < 0 || (size_t)w >= len)
		return dpg_errf(err, "point-to-point plan: buffer of %zu bytes too small", len);
	o = (size_t)w;
	if (put_list(buf, len, &o, p->cpu, p->ncpu) != 0 ||
	    put_list(buf, len, &o, p->nccl, p->nnccl) != 0)
		return dpg_errf(err, "point-to-point plan: buffer of %zu bytes too small", len);
	return 0;
}

/* One integer in [lo, hi] at *s (after one space); *s moves past it. */
static int get_int(const char **s, long lo, long hi, long *out)
{
	char *end;

	if (**s != ' ')
		return -1;
	errno = 0;
	*out = strtol(*s + 1, &end, 10);
	if (end == *s + 1 || errno != 0 || *out < lo || *out > hi)
		return -1;
	*s = end;
	return 0;
}

static int get_list(const char **s, int nodes, int *list, int *n)
{
	long v;

	if (get_int(s, 0, nodes, &v) != 0)
		return -1;
	*n = (int)v;
	for (int k = 0; k < *n; k++) {
		if (get_int(s, 0, nodes - 1, &v) != 0)
			return -1;
		list[k] = (int)v;
	}
	return 0;
}

int dpg_check_p2p_parse(const char *s, int nodes, struct dpg_check_p2p *p,
			struct dpg_err *err)
{
	const char *q = s;
	char *end;
	unsigned long port;

	p->ncpu = 0;
	p->nnccl = 0;
	errno = 0;
	port = strtoul(s, &end, 10);
	p->port = 0;
	if (end == s || errno != 0 || port > 65535)
		return dpg_errf(err, "point-to-point plan '%.64s': no port", s);
	p->port = (uint16_t)port;
	q = end;
	if (port == 0 && *q == '\0')
		return 0;
	if (get_list(&q, nodes, p->cpu, &p->ncpu) != 0 ||
	    get_list(&q, nodes, p->nccl, &p->nnccl) != 0 || *q != '\0') {
		p->port = 0;
		p->ncpu = 0;
		p->nnccl = 0;
		return dpg_errf(err, "point-to-point plan '%.64s': not '<port> <n> "
				"<node>... <n> <node>...' with nodes below %d", s, nodes);
	}
	return 0;
}

void dpg_check_p2p_result(struct dpg_check_cell *c, bool nccl, bool ok, double gbps,
			  double lat_us, const char *why)
{
	char v[DPG_CHECK_SHORT_MAX];

	if (ok) {
		snprintf(v, sizeof(v), "%.2fGB/s %.0fus", gbps, lat_us);
		dpg_check_set(c, DPG_CHECK_OK, v, "%s", "");
	} else if (nccl) {
		dpg_check_set(c, DPG_CHECK_FAIL, "failed", "%s: NCCL between this node's "
			      "GPU and rank 0's failed; rerun with NCCL_DEBUG=INFO, check the "
			      "NICS column, NCCL_SOCKET_IFNAME and NCCL_IB_HCA", why);
	} else {
		dpg_check_set(c, DPG_CHECK_FAIL, "failed", "%s: check the firewall and "
			      "routes between this node and rank 0's (TCP, any port)", why);
	}
}

void dpg_check_p2p_abandon(struct dpg_check_row *rows, const struct dpg_check_p2p *p,
			   bool nccl, bool fail, const char *why)
{
	const int *list = nccl ? p->nccl : p->cpu;
	int n = nccl ? p->nnccl : p->ncpu;

	for (int k = 0; k < n; k++) {
		struct dpg_check_cell *c = &rows[list[k]].cell[nccl ? DPG_CHECK_NCCL
								    : DPG_CHECK_NET];

		if (c->state != DPG_CHECK_NA || strcmp(c->value, PENDING) != 0)
			continue;
		if (fail)
			dpg_check_p2p_result(c, nccl, false, 0, 0, why);
		else
			dpg_check_set(c, DPG_CHECK_NA, "not run", "not measured: %s", why);
	}
}
