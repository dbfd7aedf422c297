/* SPDX-License-Identifier: BSD-3-Clause */
/* plan.c - the binding planner: GPUs, NICs and a cpuset for every local task
 * of a step, from the plain facts of topo.h (its text and JSON: plan_fmt.c).
 *
 * 1. GPUs.  The allocated GPUs form a tree keyed by package, NUMA node and
 *    their PCI bridges (top down).  k groups of G GPUs are taken from a node
 *    of the tree by handing its children whole groups, evenly by GPU count
 *    (so tasks spread over packages and NUMA nodes), and by pooling the
 *    leftovers of siblings only when whole groups do not suffice (so a group
 *    stays below one switch / host bridge / NUMA node when it can).  Groups
 *    are ranked by their lowest physical index.  With GPUs to spare, those
 *    without usable CPUs in their NUMA node (or package) are left out first.
 * 2. CPUs.  A task's home is the locality shared by its GPUs (a NUMA node,
 *    else a package, else the machine; the machine for G = 0).  The usable
 *    cores (allocated and allowed) form a tree machine > package > cell,
 *    a cell being the cores of one package in one NUMA node.  Going down,
 *    a child with more tasks than cores sheds its highest ranks to the
 *    parent; tasks waiting at a level either share the cores of the children
 *    nobody else uses (when fewer tasks than such children) or each go to
 *    the child that leaves them the most cores.  A cell splits its cores
 *    into contiguous, even blocks.  Whole cores are the unit unless there
 *    are more tasks than cores (then PUs); only more tasks than PUs makes
 *    tasks overlap.
 * 3. NICs.  For each GPU of a task the nearest NIC (PCI switch > host bridge
 *    > NUMA > package > machine, then fewer PCI hops), ties going to the
 *    least used NIC, then the lowest index; RDMA NICs only, unless the node
 *    has none.  CPU-only tasks take the nearest NIC to their cpuset.  Choices
 *    whose best NIC is nearest are made first, so the ties of farther ones
 *    fall on the NICs left least used.  nic[0] is the first GPU's NIC.
 *
 * Everything is ordered by numeric keys and ranks: no pointer values, no
 * hash order, no global state. */
#include "plan.h"
#include "parse.h"	/* dpg_ilist_parse */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAXG DPG_TOPO_MAX_GPUS

/* ================================================================ context */

struct unit {
	uint32_t core;		/* index in topo->cores[] */
	int pu;			/* a single PU (PU mode), or -1: the whole core */
};

struct cell {
	int tpkg;		/* index in cx->pkgs[] */
	int topo_pkg, topo_numa;
	uint32_t first, n;	/* its units: cell_units[first .. first+n-1] */
};

struct tpkg {
	int topo_pkg;
	uint32_t cap;		/* units */
	uint32_t first_cell, ncells;
};

enum { HOME_ROOT = 0, HOME_PKG = 1, HOME_CELL = 2, HOME_DONE = 3 };

struct tstate {
	int level;		/* HOME_* */
	int pkg;		/* index in cx->pkgs[] (HOME_PKG, HOME_CELL) */
	int cell;		/* index in cx->cells[] (HOME_CELL) */
};

struct ctx {
	const struct dpg_topo *t;
	const struct dpg_plan_req *req;
	struct dpg_plan *p;
	struct dpg_err *err;

	/* GPUs */
	uint32_t nalloc;
	uint16_t alloc[MAXG];		/* allocated GPUs, ascending */
	bool used[MAXG];
	uint32_t ngroups;
	uint32_t group_start[MAXG + 1];
	uint16_t group_gpus[MAXG];

	/* CPUs */
	struct dpg_cpuset usable;
	uint32_t nunits;
	struct unit *units;		/* in core order */
	uint32_t *cell_units;		/* unit indices grouped by cell */
	uint32_t ncells;
	struct cell *cells;
	uint32_t npkgs;
	struct tpkg *pkgs;
	struct tstate *ts;		/* per task */
	char *strbuf;			/* DPG_CPUSET_STR_MAX scratch */
};

static void ctx_free(struct ctx *cx)
{
	free(cx->units);
	free(cx->cell_units);
	free(cx->cells);
	free(cx->pkgs);
	free(cx->ts);
	free(cx->strbuf);
	free(cx);
}

void dpg_plan_free(struct dpg_plan *plan)
{
	uint32_t i;

	if (plan == NULL)
		return;
	if (plan->tasks != NULL) {
		for (i = 0; i < plan->ntasks; i++) {
			struct dpg_plan_task *r = &plan->tasks[i];

			free(r->cpus);
			free(r->visible);
			free(r->gpus);
			free(r->nics);
			free(r->netdevs);
		}
	}
	free(plan->tasks);
	free(plan);
}

/* ================================================================ inputs */

/* Comma-separated bus ids and/or decimal indices / ranges -> cx->alloc[]. */
struct gpu_list {
	struct ctx *cx;
	const char *s;
	bool mark[MAXG];
};

/* One item of the allocated-GPU list: an index, a range, or a bus id. */
static int gpu_list_add(void *arg, const struct dpg_ilist_item *it)
{
	struct gpu_list *l = arg;
	const struct dpg_topo *t = l->cx->t;
	char q[96], q2[80], tok[64];

	if (it->word != NULL) {
		int g;

		if (it->len >= sizeof(tok))
			return dpg_errf(l->cx->err, "allocated GPUs \"%s\": overlong item",
					dpg_err_quote(l->s, q, sizeof(q)));
		memcpy(tok, it->word, it->len);
		tok[it->len] = '\0';
		if (strchr(tok, ':') == NULL)
			return dpg_errf(l->cx->err, "allocated GPUs \"%s\": \"%s\" is neither a GPU index, a range nor a PCI bus id",
					dpg_err_quote(l->s, q, sizeof(q)), dpg_err_quote(tok, q2, sizeof(q2)));
		if ((g = dpg_topo_find_gpu(t, tok, l->cx->err)) < 0)
			return -1;
		l->mark[g] = true;
		return 0;
	}
	if (it->hi >= t->ngpus && t->ngpus == 0)
		return dpg_errf(l->cx->err, "allocated GPU %lu does not exist: this node has no GPU",
				it->hi);
	if (it->hi >= t->ngpus)
		return dpg_errf(l->cx->err, "allocated GPU %lu does not exist: this node has %u GPUs (0-%u)",
				it->hi, t->ngpus, t->ngpus - 1);
	for (unsigned long k = it->lo; k <= it->hi; k++)
		l->mark[k] = true;
	return 0;
}

static int parse_gpu_list(struct ctx *cx, const char *s)
{
	const struct dpg_topo *t = cx->t;
	struct gpu_list list = { .cx = cx, .s = s }, *l = &list;
	enum dpg_ilist_status st = DPG_ILIST_OK;
	char q[96];
	uint32_t i;

	if (s == NULL)
		for (i = 0; i < t->ngpus; i++)
			l->mark[i] = true;
	else
		st = dpg_ilist_parse(s, DPG_ILIST_BLANKS | DPG_ILIST_EMPTY_OK | DPG_ILIST_WORDS,
				     UINT32_MAX, gpu_list_add, l, NULL);
	if (st == DPG_ILIST_TRAILING)
		dpg_errf(cx->err, "allocated GPUs \"%s\": trailing comma",
			 dpg_err_quote(s, q, sizeof(q)));
	else if (st != DPG_ILIST_OK && st != DPG_ILIST_STOPPED)
		dpg_errf(cx->err, "allocated GPUs \"%s\": empty item",
			 dpg_err_quote(s, q, sizeof(q)));
	cx->nalloc = 0;
	for (i = 0; st == DPG_ILIST_OK && i < t->ngpus; i++)
		if (l->mark[i])
			cx->alloc[cx->nalloc++] = (uint16_t)i;
	return st == DPG_ILIST_OK ? 0 : -1;
}

/* "0000:07:00.0,0000:0a:00.0" of the allocated GPUs, cut to fit. */
static void alloc_list(const struct ctx *cx, char *buf, size_t len)
{
	size_t o = 0;
	uint32_t i;

	buf[0] = '\0';
	for (i = 0; i < cx->nalloc; i++) {
		const char *id = cx->t->gpus[cx->alloc[i]].pci.busid;
		size_t n = strlen(id) + (i ? 1 : 0);

		if (o + n + 4 >= len) {
			snprintf(buf + o, len - o, "%s...", i ? "," : "");
			return;
		}
		snprintf(buf + o, len - o, "%s%s", i ? "," : "", id);
		o += n;
	}
}

/* ================================================================ GPUs */

struct gkey {
	int kind;		/* 0: package/NUMA, 1: PCI bridge, 2: the GPU itself */
	uint64_t v;
};

static struct gkey gpu_key(const struct dpg_gpu *g, unsigned level)
{
	struct gkey k;

	if (level == 0) {
		k.kind = 0;
		k.v = (uint64_t)(int64_t)g->pci.package;
	} else if (level == 1) {
		k.kind = 0;
		k.v = (uint64_t)(int64_t)g->pci.numa;
	} else if (level - 2 < g->pci.depth) {
		k.kind = 1;
		k.v = g->pci.path[level - 2];
	} else {
		k.kind = 2;
		k.v = g->index;
	}
	return k;
}

static void add_group(struct ctx *cx, const uint16_t *g, uint32_t n)
{
	uint32_t s = cx->group_start[cx->ngroups], i, j;

	for (i = 0; i < n; i++) {
		uint16_t v = g[i];

		/* insertion sort: groups hold ascending indices */
		for (j = s + i; j > s && cx->group_gpus[j - 1] > v; j--)
			cx->group_gpus[j] = cx->group_gpus[j - 1];
		cx->group_gpus[j] = v;
		cx->used[v] = true;
	}
	cx->ngroups++;
	cx->group_start[cx->ngroups] = s + n;
}

/* Take k groups of G GPUs from the n GPUs g[] (ascending physical indices,
 * same tree keys above level).  Requires n >= k * G, k >= 1. */
static void pick(struct ctx *cx, const uint16_t *g, uint32_t n, unsigned level,
		 uint32_t k, uint32_t G)
{
	struct gkey ckey[MAXG];
	uint32_t nch = 0, cnt[MAXG], off[MAXG + 1], q[MAXG], a[MAXG];
	uint16_t mem[MAXG], pool[MAXG];
	uint8_t child[MAXG];
	uint32_t i, j, sumq = 0, npool = 0, r;

	if (n == 1 || k * G == 0) {
		if (k == 1 && G == 1)
			add_group(cx, g, 1);
		return;
	}
	for (i = 0; i < n; i++) {
		struct gkey key = gpu_key(&cx->t->gpus[g[i]], level);

		for (j = 0; j < nch; j++)
			if (ckey[j].kind == key.kind && ckey[j].v == key.v)
				break;
		if (j == nch) {
			ckey[nch] = key;
			cnt[nch++] = 0;
		}
		child[i] = (uint8_t)j;
		cnt[j]++;
	}
	if (nch == 1) {		/* one way down: not a decision */
		pick(cx, g, n, level + 1, k, G);
		return;
	}
	off[0] = 0;
	for (j = 0; j < nch; j++)
		off[j + 1] = off[j] + cnt[j];
	for (j = 0; j < nch; j++)
		cnt[j] = 0;
	for (i = 0; i < n; i++)	/* stable: children keep ascending order */
		mem[off[child[i]] + cnt[child[i]]++] = g[i];
	for (j = 0; j < nch; j++) {
		q[j] = cnt[j] / G;
		sumq += q[j];
		a[j] = 0;
	}
	if (sumq >= k) {
		/* whole groups suffice: spread them in proportion to GPU count */
		for (r = 0; r < k; r++) {
			int best = -1;

			for (j = 0; j < nch; j++) {
				if (a[j] >= q[j])
					continue;
				if (best < 0 ||
				    (uint64_t)a[j] * cnt[best] < (uint64_t)a[best] * cnt[j])
					best = (int)j;
			}
			a[best]++;
		}
		for (j = 0; j < nch; j++)
			if (a[j] > 0)
				pick(cx, mem + off[j], cnt[j], level + 1, a[j], G);
		return;
	}
	/* whole groups first, then neighbours' leftovers pooled in tree order */
	for (j = 0; j < nch; j++)
		if (q[j] > 0)
			pick(cx, mem + off[j], cnt[j], level + 1, q[j], G);
	for (i = 0; i < n; i++)
		if (!cx->used[mem[i]])
			pool[npool++] = mem[i];
	for (r = 0; r < k - sumq; r++)
		add_group(cx, pool + r * G, G);
}

static int cmp_group(const void *x, const void *y)
{
	const uint16_t *a = x, *b = y;

	return (int)a[0] - (int)b[0];
}

/* Does GPU g have usable CPUs in its NUMA node (else package)? */
static bool gpu_has_local_cpus(const struct ctx *cx, uint32_t g)
{
	const struct dpg_topo *t = cx->t;
	const struct dpg_pci_loc *l = &t->gpus[g].pci;

	if (l->numa >= 0)
		return dpg_cpuset_intersects(&t->numa[l->numa].cpus, &cx->usable);
	if (l->package >= 0)
		return dpg_cpuset_intersects(&t->packages[l->package].cpus, &cx->usable);
	return true;
}

/* Fill every task's GPUs; sets p->gpus_shared. */
static int assign_gpus(struct ctx *cx)
{
	const struct dpg_plan_req *req = cx->req;
	struct dpg_plan *p = cx->p;
	uint32_t G = req->gpus_per_task, T = req->ntasks, k, i, j;
	uint64_t want = (uint64_t)T * G;
	uint16_t order[MAXG][MAXG];	/* [group][0..G-1], ascending */
	uint16_t near[MAXG];
	uint32_t nnear = 0;

	if (G == 0)
		return 0;
	if (want > cx->nalloc && (!req->policy.allow_gpu_sharing || G > cx->nalloc)) {
		char list[200];

		alloc_list(cx, list, sizeof(list));
		if (req->gpus == NULL)
			return dpg_errf(cx->err, "%u tasks x %u GPUs = %llu GPUs requested but this node has %u%s%s%s",
					T, G, (unsigned long long)want, cx->nalloc,
					cx->nalloc ? " (" : "", list, cx->nalloc ? ")" : "");
		return dpg_errf(cx->err, "%u tasks x %u GPUs = %llu GPUs requested but this node has %u allocated of %u (allocated: %s)",
				T, G, (unsigned long long)want, cx->nalloc,
				cx->t->ngpus, cx->nalloc ? list : "none");
	}
	k = want <= cx->nalloc ? T : cx->nalloc / G;
	p->gpus_shared = want > cx->nalloc;
	cx->ngroups = 0;
	cx->group_start[0] = 0;
	memset(cx->used, 0, sizeof(cx->used));
	/* with GPUs to spare, leave out those with no usable CPU nearby */
	for (i = 0; i < cx->nalloc; i++)
		if (gpu_has_local_cpus(cx, cx->alloc[i]))
			near[nnear++] = cx->alloc[i];
	if (want < cx->nalloc && nnear >= want)
		pick(cx, near, nnear, 0, k, G);
	else
		pick(cx, cx->alloc, cx->nalloc, 0, k, G);
	if (cx->ngroups != k)
		return dpg_errf(cx->err, "internal error: %u GPU groups formed, %u wanted",
				cx->ngroups, k);
	/* rank groups by their lowest physical index */
	for (i = 0; i < k; i++) {
		memset(order[i], 0, sizeof(order[i]));
		for (j = 0; j < G; j++)
			order[i][j] = cx->group_gpus[cx->group_start[i] + j];
	}
	qsort(order, k, sizeof(order[0]), cmp_group);
	for (i = 0; i < T; i++) {
		struct dpg_plan_task *r = &p->tasks[i];

		r->ngpus = G;
		for (j = 0; j < G; j++)
			r->gpu[j] = order[i % k][j];
	}
	return 0;
}

/* ================================================================ CPUs */

static void unit_pus(const struct ctx *cx, const struct unit *u,
		     struct dpg_cpuset *dst)
{
	const struct dpg_core *c = &cx->t->cores[u->core];
	uint32_t i;

	if (u->pu >= 0) {
		dpg_cpuset_set(dst, (unsigned)u->pu);
		return;
	}
	for (i = 0; i < c->npus; i++) {
		unsigned pu = cx->t->pus[c->pu_first + i];

		if (dpg_cpuset_isset(&cx->usable, pu))
			dpg_cpuset_set(dst, pu);
	}
}

/* Units (usable cores, or PUs when tasks outnumber cores) and their tree. */
/* Usable cores and PUs; one unit per core, or per PU when the tasks
 * outnumber the cores. */
static bool count_units(struct ctx *cx)
{
	const struct dpg_topo *t = cx->t;
	uint32_t ncores = 0, npus = 0;

	for (uint32_t c = 0; c < t->ncores; c++) {
		const struct dpg_core *k = &t->cores[c];
		uint32_t n = 0;

		for (uint32_t i = 0; i < k->npus; i++)
			if (dpg_cpuset_isset(&cx->usable, t->pus[k->pu_first + i]))
				n++;
		if (n > 0)
			ncores++;
		npus += n;
	}
	cx->nunits = cx->req->ntasks > ncores ? npus : ncores;
	return cx->req->ntasks > ncores;
}

static void list_units(struct ctx *cx, bool pu_mode)
{
	const struct dpg_topo *t = cx->t;
	uint32_t j = 0;

	for (uint32_t c = 0; c < t->ncores; c++) {
		const struct dpg_core *k = &t->cores[c];
		bool any = false;

		for (uint32_t i = 0; i < k->npus; i++) {
			unsigned pu = t->pus[k->pu_first + i];

			if (!dpg_cpuset_isset(&cx->usable, pu))
				continue;
			if (pu_mode) {
				cx->units[j].core = c;
				cx->units[j++].pu = (int)pu;
			} else if (!any) {
				cx->units[j].core = c;
				cx->units[j++].pu = -1;
			}
			any = true;
		}
	}
}

/* Packages and cells in order of first appearance; cell_of[i] = unit i's. */
static void find_cells(struct ctx *cx, uint32_t *cell_of)
{
	for (uint32_t i = 0; i < cx->nunits; i++) {
		const struct dpg_core *k = &cx->t->cores[cx->units[i].core];
		uint32_t pk, ce;

		for (pk = 0; pk < cx->npkgs; pk++)
			if (cx->pkgs[pk].topo_pkg == k->package)
				break;
		if (pk == cx->npkgs) {
			cx->pkgs[pk].topo_pkg = k->package;
			cx->npkgs++;
		}
		cx->pkgs[pk].cap++;
		for (ce = 0; ce < cx->ncells; ce++)
			if (cx->cells[ce].tpkg == (int)pk && cx->cells[ce].topo_numa == k->numa)
				break;
		if (ce == cx->ncells) {
			cx->cells[ce].tpkg = (int)pk;
			cx->cells[ce].topo_pkg = k->package;
			cx->cells[ce].topo_numa = k->numa;
			cx->ncells++;
		}
		cx->cells[ce].n++;
		cell_of[i] = ce;
	}
}

/* Cells grouped by package (stable); newidx[old cell] = its new index. */
static int sort_cells(struct ctx *cx, uint32_t *newidx)
{
	struct cell *sorted = calloc(cx->ncells, sizeof(*sorted));
	uint32_t o = 0;

	if (sorted == NULL)
		return dpg_errf(cx->err, "out of memory (%u CPU cells)", cx->ncells);
	for (uint32_t pk = 0; pk < cx->npkgs; pk++) {
		cx->pkgs[pk].first_cell = o;
		for (uint32_t ce = 0; ce < cx->ncells; ce++) {
			if (cx->cells[ce].tpkg != (int)pk)
				continue;
			newidx[ce] = o;
			sorted[o++] = cx->cells[ce];
		}
		cx->pkgs[pk].ncells = o - cx->pkgs[pk].first_cell;
	}
	memcpy(cx->cells, sorted, cx->ncells * sizeof(*sorted));
	free(sorted);
	return 0;
}

/* Each cell's unit list, in unit order, after the cells were sorted. */
static int fill_cells(struct ctx *cx, uint32_t *cell_of)
{
	uint32_t *newidx = calloc(cx->ncells, sizeof(*newidx));
	uint32_t o = 0;

	if (newidx == NULL)
		return dpg_errf(cx->err, "out of memory (%u CPU cells)", cx->ncells);
	if (sort_cells(cx, newidx) != 0) {
		free(newidx);
		return -1;
	}
	for (uint32_t ce = 0; ce < cx->ncells; ce++) {
		cx->cells[ce].first = o;
		o += cx->cells[ce].n;
	}
	for (uint32_t i = 0; i < cx->nunits; i++)
		cell_of[i] = newidx[cell_of[i]];
	/* newidx's slots become fill counters */
	memset(newidx, 0, cx->ncells * sizeof(*newidx));
	for (uint32_t i = 0; i < cx->nunits; i++) {
		uint32_t ce = cell_of[i];

		cx->cell_units[cx->cells[ce].first + newidx[ce]++] = i;
	}
	free(newidx);
	return 0;
}

static int build_units(struct ctx *cx)
{
	bool pu_mode = count_units(cx);
	uint32_t *cell_of;
	int rc;

	if (cx->nunits == 0)
		return dpg_errf(cx->err, "no usable CPU on this node");
	cx->units = calloc(cx->nunits, sizeof(*cx->units));
	cx->cell_units = calloc(cx->nunits, sizeof(*cx->cell_units));
	cx->cells = calloc(cx->nunits, sizeof(*cx->cells));
	cx->pkgs = calloc(cx->nunits, sizeof(*cx->pkgs));
	cell_of = calloc(cx->nunits, sizeof(*cell_of));
	if (cx->units == NULL || cx->cell_units == NULL || cx->cells == NULL ||
	    cx->pkgs == NULL || cell_of == NULL) {
		free(cell_of);
		return dpg_errf(cx->err, "out of memory (%u CPU units)", cx->nunits);
	}
	list_units(cx, pu_mode);
	find_cells(cx, cell_of);
	rc = fill_cells(cx, cell_of);
	free(cell_of);
	return rc;
}

/* Where the task's GPUs are, as a node of the CPU tree. */
static void set_home(struct ctx *cx, uint32_t ti)
{
	const struct dpg_plan_task *r = &cx->p->tasks[ti];
	struct tstate *s = &cx->ts[ti];
	int numa = -2, pkg = -2;
	uint32_t i, ce, pk;

	s->level = HOME_ROOT;
	s->pkg = s->cell = -1;
	for (i = 0; i < r->ngpus; i++) {
		const struct dpg_pci_loc *l = &cx->t->gpus[r->gpu[i]].pci;

		numa = (numa == -2 || numa == l->numa) ? l->numa : -1;
		pkg = (pkg == -2 || pkg == l->package) ? l->package : -1;
	}
	if (r->ngpus == 0)
		return;
	if (numa >= 0) {
		int found = -1, nfound = 0;

		for (ce = 0; ce < cx->ncells; ce++) {
			if (cx->cells[ce].topo_numa != numa)
				continue;
			if (pkg >= 0 && cx->cells[ce].topo_pkg != pkg)
				continue;
			found = (int)ce;
			nfound++;
		}
		if (nfound == 1) {
			s->level = HOME_CELL;
			s->cell = found;
			s->pkg = cx->cells[found].tpkg;
			return;
		}
	}
	if (pkg >= 0) {
		for (pk = 0; pk < cx->npkgs; pk++) {
			if (cx->pkgs[pk].topo_pkg == pkg) {
				s->level = HOME_PKG;
				s->pkg = (int)pk;
				return;
			}
		}
	}
}

/* Give tasks tl[0..m-1] (ascending ranks) contiguous even blocks of the
 * units ul[0..n-1]; n >= m. */
static void block_divide(struct ctx *cx, const uint32_t *tl, uint32_t m,
			 const uint32_t *ul, uint32_t n)
{
	uint32_t qn = n / m, rem = n % m, o = 0, i, j;

	for (i = 0; i < m; i++) {
		uint32_t take = qn + (i < rem ? 1 : 0);
		struct dpg_plan_task *r = &cx->p->tasks[tl[i]];

		for (j = 0; j < take; j++)
			unit_pus(cx, &cx->units[ul[o + j]], &r->cpuset);
		o += take;
		cx->ts[tl[i]].level = HOME_DONE;
	}
}

/* Does task ti count against child c (a package at the root level, a cell
 * at the package level)? */
static bool task_in(const struct ctx *cx, uint32_t ti, int at_root, uint32_t c)
{
	const struct tstate *s = &cx->ts[ti];

	if (at_root)
		return (s->level == HOME_PKG || s->level == HOME_CELL) && s->pkg == (int)c;
	return s->level == HOME_CELL && s->cell == (int)c;
}

/* One level of the CPU tree.  Children are packages (at_root) or the cells
 * of package pk.  Tasks waiting at this level have level == wait_level (and
 * pkg == pk below the root). */
static int divide_level(struct ctx *cx, int at_root, uint32_t pk,
			uint32_t *tl, uint32_t *ul, uint32_t *have, uint32_t *add)
{
	uint32_t T = cx->req->ntasks;
	uint32_t c0 = at_root ? 0 : cx->pkgs[pk].first_cell;
	uint32_t nch = at_root ? cx->npkgs : cx->pkgs[pk].ncells;
	int wait = at_root ? HOME_ROOT : HOME_PKG;
	uint32_t c, i, m, nfree, nu, best_cap = 0;

	/* shed the highest ranks of over-full children */
	for (c = c0; c < c0 + nch; c++) {
		uint32_t cap = at_root ? cx->pkgs[c].cap : cx->cells[c].n, n = 0;

		for (i = 0; i < T; i++)
			if (task_in(cx, i, at_root, c))
				n++;
		for (i = T; i-- > 0 && n > cap;) {
			if (!task_in(cx, i, at_root, c))
				continue;
			cx->ts[i].level = wait;
			cx->ts[i].pkg = at_root ? -1 : (int)pk;
			cx->ts[i].cell = -1;
			n--;
		}
	}
	m = 0;
	for (i = 0; i < T; i++)
		if (cx->ts[i].level == wait && (at_root || cx->ts[i].pkg == (int)pk))
			tl[m++] = i;
	if (m == 0)
		return 0;
	nfree = 0;
	for (c = c0; c < c0 + nch; c++) {
		bool busy = false;

		for (i = 0; i < T && !busy; i++)
			busy = task_in(cx, i, at_root, c);
		if (!busy)
			nfree++;
	}
	if (m < nfree) {
		/* few enough to share the idle children's cores */
		nu = 0;
		for (c = c0; c < c0 + nch; c++) {
			bool busy = false;
			uint32_t ce, ce0, nce;

			for (i = 0; i < T && !busy; i++)
				busy = task_in(cx, i, at_root, c);
			if (busy)
				continue;
			ce0 = at_root ? cx->pkgs[c].first_cell : c;
			nce = at_root ? cx->pkgs[c].ncells : 1;
			for (ce = ce0; ce < ce0 + nce; ce++)
				for (i = 0; i < cx->cells[ce].n; i++)
					ul[nu++] = cx->cell_units[cx->cells[ce].first + i];
		}
		block_divide(cx, tl, m, ul, nu);
		return 0;
	}
	/* one at a time to the child that leaves the newcomer the most units;
	 * then ranks in child order, so a child's tasks have adjacent ranks */
	for (c = 0; c < nch; c++) {
		uint32_t k;

		have[c] = 0;
		add[c] = 0;
		for (k = 0; k < T; k++)
			if (task_in(cx, k, at_root, c0 + c))
				have[c]++;
	}
	for (i = 0; i < m; i++) {
		int best = -1;

		for (c = 0; c < nch; c++) {
			uint32_t cap = at_root ? cx->pkgs[c0 + c].cap : cx->cells[c0 + c].n;
			uint32_t h = have[c] + add[c];

			if (h >= cap)
				continue;
			if (best < 0 || (uint64_t)cap * (have[best] + add[best] + 1) >
					(uint64_t)best_cap * (h + 1)) {
				best = (int)c;
				best_cap = cap;
			}
		}
		if (best < 0)
			return dpg_errf(cx->err, "internal error: no room for task %u", tl[i]);
		add[best]++;
	}
	i = 0;
	for (c = 0; c < nch; c++) {
		for (; add[c] > 0; add[c]--, i++) {
			if (at_root) {
				cx->ts[tl[i]].level = HOME_PKG;
				cx->ts[tl[i]].pkg = (int)(c0 + c);
			} else {
				cx->ts[tl[i]].level = HOME_CELL;
				cx->ts[tl[i]].cell = (int)(c0 + c);
			}
		}
	}
	return 0;
}

static int assign_cpus(struct ctx *cx)
{
	uint32_t T = cx->req->ntasks, i, pk, ce;
	uint32_t *tl, *ul, *have = NULL, *add = NULL;
	int rc = -1;

	if (cx->req->policy.bind == DPG_BIND_NONE) {
		for (i = 0; i < T; i++)
			cx->p->tasks[i].cpuset = cx->usable;
		return 0;
	}
	if (build_units(cx) != 0)
		return -1;
	if (T > cx->nunits) {
		/* more tasks than PUs: overlap is unavoidable, one PU each */
		for (i = 0; i < T; i++)
			unit_pus(cx, &cx->units[i % cx->nunits], &cx->p->tasks[i].cpuset);
		return 0;
	}
	tl = calloc(T, sizeof(*tl));
	ul = calloc(cx->nunits, sizeof(*ul));
	have = calloc(cx->ncells + cx->npkgs, sizeof(*have));
	add = calloc(cx->ncells + cx->npkgs, sizeof(*add));
	if (tl == NULL || ul == NULL || have == NULL || add == NULL) {
		dpg_errf(cx->err, "out of memory (%u tasks)", T);
		goto out;
	}
	for (i = 0; i < T; i++)
		set_home(cx, i);
	if (divide_level(cx, 1, 0, tl, ul, have, add) != 0)
		goto out;
	for (pk = 0; pk < cx->npkgs; pk++)
		if (divide_level(cx, 0, pk, tl, ul, have, add) != 0)
			goto out;
	for (ce = 0; ce < cx->ncells; ce++) {
		uint32_t m = 0;

		for (i = 0; i < T; i++)
			if (cx->ts[i].level == HOME_CELL && cx->ts[i].cell == (int)ce)
				tl[m++] = i;
		if (m > 0)
			block_divide(cx, tl, m, cx->cell_units + cx->cells[ce].first,
				     cx->cells[ce].n);
	}
	for (i = 0; i < T; i++)
		if (dpg_cpuset_empty(&cx->p->tasks[i].cpuset)) {
			dpg_errf(cx->err, "internal error: task %u got no CPU", i);
			goto out;
		}
	rc = 0;
out:
	free(tl);
	free(ul);
	free(have);
	free(add);
	return rc;
}

/* OS index of the NUMA node holding all of s, or -1. */
static int numa_of(const struct dpg_topo *t, const struct dpg_cpuset *s)
{
	uint32_t i;

	for (i = 0; i < t->nnuma; i++)
		if (!dpg_cpuset_empty(&t->numa[i].cpus) &&
		    dpg_cpuset_subset(s, &t->numa[i].cpus))
			return (int)t->numa[i].os_index;
	return -1;
}

/* ================================================================ NICs */

static void add_nic(struct dpg_plan_task *r, uint16_t n)
{
	uint32_t i;

	for (i = 0; i < r->nnics; i++)
		if (r->nic[i] == n)
			return;
	r->nic[r->nnics++] = n;
}

/* Nearness of NIC n to the CPUs s (CPU-only tasks). */
static enum dpg_near nic_near_cpus(const struct dpg_topo *t,
				   const struct dpg_nic *n,
				   const struct dpg_cpuset *s)
{
	if (n->pci.numa >= 0 && dpg_cpuset_intersects(s, &t->numa[n->pci.numa].cpus))
		return DPG_NEAR_NUMA;
	if (n->pci.package >= 0 &&
	    dpg_cpuset_intersects(s, &t->packages[n->pci.package].cpus))
		return DPG_NEAR_PACKAGE;
	return DPG_NEAR_MACHINE;
}

struct nic_choice {
	uint32_t task, slot;		/* the task's slot-th GPU (0 for CPU-only) */
	unsigned lvl, hops;		/* the best any NIC offers it */
	uint16_t nic;
};

static void nic_dist(const struct ctx *cx, const struct dpg_plan_task *r,
		     uint32_t slot, uint32_t n, unsigned *lvl, unsigned *hops)
{
	const struct dpg_topo *t = cx->t;

	*hops = 0;
	if (r->ngpus > 0)
		*lvl = dpg_pci_near(&t->gpus[r->gpu[slot]].pci, &t->nics[n].pci, hops);
	else
		*lvl = nic_near_cpus(t, &t->nics[n], &r->cpuset);
}

static int cmp_choice(const void *x, const void *y)
{
	const struct nic_choice *a = x, *b = y;

	if (a->lvl != b->lvl)
		return a->lvl < b->lvl ? -1 : 1;
	if (a->hops != b->hops)
		return a->hops < b->hops ? -1 : 1;
	if (a->task != b->task)
		return a->task < b->task ? -1 : 1;
	return a->slot < b->slot ? -1 : a->slot > b->slot;
}

static int cmp_choice_task(const void *x, const void *y)
{
	const struct nic_choice *a = x, *b = y;

	if (a->task != b->task)
		return a->task < b->task ? -1 : 1;
	return a->slot < b->slot ? -1 : a->slot > b->slot;
}

/* Each GPU of each task (or each CPU-only task) takes its nearest NIC; the
 * choices with the nearest options go first so that ties elsewhere fall on
 * the NICs they leave least used. */
static int assign_nics(struct ctx *cx)
{
	const struct dpg_topo *t = cx->t;
	uint32_t lo = 0, hi = t->nrdma, uses[DPG_TOPO_MAX_NICS], i, j, n, nc = 0;
	struct nic_choice *ch;
	size_t total = 0;

	if (t->nrdma == 0) {
		lo = t->nrdma;
		hi = t->nnics;
	}
	if (lo == hi)
		return 0;
	for (i = 0; i < cx->req->ntasks; i++)
		total += cx->p->tasks[i].ngpus > 0 ? cx->p->tasks[i].ngpus : 1;
	ch = calloc(total, sizeof(*ch));
	if (ch == NULL)
		return dpg_errf(cx->err, "out of memory (%zu NIC choices)", total);
	for (i = 0; i < cx->req->ntasks; i++) {
		const struct dpg_plan_task *r = &cx->p->tasks[i];
		uint32_t slots = r->ngpus > 0 ? r->ngpus : 1;

		for (j = 0; j < slots; j++) {
			struct nic_choice *c = &ch[nc++];

			c->task = i;
			c->slot = j;
			for (n = lo; n < hi; n++) {
				unsigned lvl, hops;

				nic_dist(cx, r, j, n, &lvl, &hops);
				if (n == lo || lvl < c->lvl ||
				    (lvl == c->lvl && hops < c->hops)) {
					c->lvl = lvl;
					c->hops = hops;
				}
			}
		}
	}
	qsort(ch, nc, sizeof(*ch), cmp_choice);
	memset(uses, 0, sizeof(uses));
	for (i = 0; i < nc; i++) {
		const struct dpg_plan_task *r = &cx->p->tasks[ch[i].task];
		int best = -1;

		for (n = lo; n < hi; n++) {
			unsigned lvl, hops;

			nic_dist(cx, r, ch[i].slot, n, &lvl, &hops);
			if (lvl != ch[i].lvl || hops != ch[i].hops)
				continue;
			if (best < 0 || uses[n] < uses[best])
				best = (int)n;
		}
		uses[best]++;
		ch[i].nic = (uint16_t)best;
	}
	qsort(ch, nc, sizeof(*ch), cmp_choice_task);
	for (i = 0; i < nc; i++)
		add_nic(&cx->p->tasks[ch[i].task], ch[i].nic);
	free(ch);
	return 0;
}

/* ================================================================ strings */

/* strdup of a list built by fn into cx->strbuf. */
static int join(struct ctx *cx, char **dst, const struct dpg_plan_task *r,
		int what)
{
	const struct dpg_topo *t = cx->t;
	char *b = cx->strbuf;
	size_t o = 0;
	uint32_t i;

	b[0] = '\0';
	if (what == 0) {
		if (dpg_cpuset_format(&r->cpuset, b, DPG_CPUSET_STR_MAX, cx->err) != 0)
			return -1;
	} else if (what == 1 || what == 2) {
		for (i = 0; i < r->ngpus; i++) {
			int k;

			if (what == 1)
				k = snprintf(b + o, DPG_CPUSET_STR_MAX - o, "%s%u",
					     i ? "," : "", (unsigned)r->gpu[i]);
			else
				k = snprintf(b + o, DPG_CPUSET_STR_MAX - o, "%s%s",
					     i ? "," : "", t->gpus[r->gpu[i]].pci.busid);
			o += (size_t)k;
		}
	} else {
		for (i = 0; i < r->nnics; i++) {
			const struct dpg_nic *n = &t->nics[r->nic[i]];
			const char *s = what == 3 ? n->name : n->netdev;

			if (s[0] == '\0')
				continue;
			o += (size_t)snprintf(b + o, DPG_CPUSET_STR_MAX - o, "%s%s",
					      o ? "," : "", s);
		}
	}
	*dst = strdup(b);
	if (*dst == NULL)
		return dpg_errf(cx->err, "out of memory");
	return 0;
}

/* ================================================================ driver */

int dpg_plan_make(const struct dpg_topo *topo, const struct dpg_plan_req *req,
		  struct dpg_plan **out, struct dpg_err *err)
{
	struct ctx *cx;
	struct dpg_plan *p;
	struct dpg_cpuset alloc;
	uint32_t i;
	int rc = -1;

	if (out == NULL)
		return dpg_errf(err, "dpg_plan_make: no output");
	*out = NULL;
	if (topo == NULL || req == NULL)
		return dpg_errf(err, "dpg_plan_make: no topology or request");
	if (req->ntasks == 0 || req->ntasks > DPG_PLAN_MAX_TASKS)
		return dpg_errf(err, "%u local tasks: must be 1-%d", req->ntasks,
				DPG_PLAN_MAX_TASKS);
	if (req->gpus_per_task > DPG_TOPO_MAX_GPUS)
		return dpg_errf(err, "%u GPUs per task: at most %d", req->gpus_per_task,
				DPG_TOPO_MAX_GPUS);
	if (req->policy.bind != DPG_BIND_CLOSEST && req->policy.bind != DPG_BIND_NONE)
		return dpg_errf(err, "unknown bind policy %d", (int)req->policy.bind);
	if (topo->ngpus > DPG_TOPO_MAX_GPUS || topo->nnics > DPG_TOPO_MAX_NICS ||
	    topo->nrdma > topo->nnics)
		return dpg_errf(err, "inconsistent topology");

	cx = calloc(1, sizeof(*cx));
	p = calloc(1, sizeof(*p));
	if (cx == NULL || p == NULL) {
		free(cx);
		free(p);
		return dpg_errf(err, "out of memory");
	}
	cx->t = topo;
	cx->req = req;
	cx->p = p;
	cx->err = err;
	p->ntasks = req->ntasks;
	p->gpus_per_task = req->gpus_per_task;
	p->policy = req->policy;
	p->ngpus = topo->ngpus;
	memcpy(p->gpus, topo->gpus, sizeof(p->gpus));
	p->nnics = topo->nnics;
	memcpy(p->nics, topo->nics, sizeof(p->nics));
	p->tasks = calloc(req->ntasks, sizeof(*p->tasks));
	cx->ts = calloc(req->ntasks, sizeof(*cx->ts));
	cx->strbuf = malloc(DPG_CPUSET_STR_MAX);
	if (p->tasks == NULL || cx->ts == NULL || cx->strbuf == NULL) {
		dpg_errf(err, "out of memory (%u tasks)", req->ntasks);
		goto out;
	}
	for (i = 0; i < req->ntasks; i++)
		p->tasks[i].local_rank = i;

	/* usable CPUs: allocated within allowed */
	if (req->cpus != NULL) {
		if (dpg_cpuset_parse(req->cpus, &alloc, err) != 0)
			goto out;
	} else {
		dpg_cpuset_fill(&alloc);
	}
	dpg_cpuset_and(&cx->usable, &alloc, &topo->allowed);
	dpg_cpuset_and(&cx->usable, &cx->usable, &topo->complete);
	if (dpg_cpuset_empty(&cx->usable)) {
		char q[96];
		char *a = cx->strbuf;

		if (dpg_cpuset_format(&topo->allowed, a, DPG_CPUSET_STR_MAX, NULL) != 0)
			a[0] = '\0';
		if (strlen(a) > 120)
			strcpy(a + 117, "...");
		dpg_errf(err, "no usable CPU: allocated CPUs \"%s\" are not among the allowed ones (%s)",
			 req->cpus ? dpg_err_quote(req->cpus, q, sizeof(q)) : "all", a);
		goto out;
	}
	p->usable = cx->usable;

	if (parse_gpu_list(cx, req->gpus) != 0 || assign_gpus(cx) != 0 ||
	    assign_cpus(cx) != 0 || assign_nics(cx) != 0)
		goto out;
	for (i = 0; i < req->ntasks; i++) {
		struct dpg_plan_task *r = &p->tasks[i];

		r->numa = numa_of(topo, &r->cpuset);
		if (join(cx, &r->cpus, r, 0) != 0 || join(cx, &r->visible, r, 1) != 0 ||
		    join(cx, &r->gpus, r, 2) != 0 || join(cx, &r->nics, r, 3) != 0 ||
		    join(cx, &r->netdevs, r, 4) != 0)
			goto out;
	}
	*out = p;
	p = NULL;
	rc = 0;
out:
	dpg_plan_free(p);
	ctx_free(cx);
	return rc;
}
