/* SPDX-License-Identifier: BSD-3-Clause */
/* checkrow.h - dpg-check's rows: one task's check results (cells), their
 * wire form through the store, the per-node merge, the table and JSON. */
#ifndef DPG_LIB_CHECKROW_H
#define DPG_LIB_CHECKROW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "err.h"

/* The columns, in table order. */
enum dpg_check_col {
	DPG_CHECK_GPUS = 0,	/* plan's GPUs vs what the task sees */
	DPG_CHECK_NICS,		/* plan's RDMA NICs: port state, link */
	DPG_CHECK_CPUS,		/* DPG_CPUS vs the task's affinity */
	DPG_CHECK_MASTER,	/* route to MASTER_ADDR, its interface, reached */
	DPG_CHECK_PORT,		/* MASTER_PORT free */
	DPG_CHECK_NOFILE,	/* open-files limit vs the world's need */
	DPG_CHECK_SOMAXCONN,	/* net.core.somaxconn vs the world's need */
	DPG_CHECK_SHM,		/* /dev/shm free vs the node segment */
	DPG_CHECK_NET,		/* point-to-point with rank 0: bandwidth, latency */
	DPG_CHECK_NCCL,		/* the same over NCCL, GPU to GPU (or why not) */
	DPG_CHECK_NCOLS
};

enum dpg_check_state { DPG_CHECK_NA = 0, DPG_CHECK_OK, DPG_CHECK_FAIL };

#define DPG_CHECK_SHORT_MAX 40
#define DPG_CHECK_DETAIL_MAX 512
#define DPG_CHECK_NODE_MAX 256

struct dpg_check_cell {
	enum dpg_check_state state;
	char value[DPG_CHECK_SHORT_MAX];	/* what the table shows */
	char detail[DPG_CHECK_DETAIL_MAX];	/* failing: what is wrong, how to fix */
};

/* One task's results, or (after dpg_check_merge) one node's. */
struct dpg_check_row {
	char node[DPG_CHECK_NODE_MAX];
	int rank;			/* the task's rank (a node row: its first) */
	int tasks;			/* tasks merged into this row */
	int expected;			/* tasks the step has on the node */
	char missing[DPG_CHECK_DETAIL_MAX];	/* "" or why tasks did not report */
	struct dpg_check_cell cell[DPG_CHECK_NCOLS];
};

/* Column names: "gpus", "nics", ... (JSON keys, table headers upper-cased). */
const char *dpg_check_col_name(enum dpg_check_col c);

/* Set a cell (printf formats; tabs and newlines become spaces). */
void dpg_check_set(struct dpg_check_cell *c, enum dpg_check_state st,
		   const char *value, const char *detail_fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* The wire form: text lines "node\t<name>\t<rank>" then one
 * "<col>\t<state>\t<value>\t<detail>" per column.  dpg_check_encode fails
 * when buf (len bytes) is too small; dpg_check_decode when the text is not a
 * row (names the line). */
int dpg_check_encode(const struct dpg_check_row *r, char *buf, size_t len,
		     struct dpg_err *err);
int dpg_check_decode(const char *buf, size_t len, struct dpg_check_row *r,
		     struct dpg_err *err);

/* Merge task row t into node row n (n->tasks == 0: n becomes a copy): a
 * cell fails when any task's fails, its text is the first failing task's
 * prefixed with "rank R: ". */
void dpg_check_merge(struct dpg_check_row *n, const struct dpg_check_row *t);

/* A node row is fit when every task reported and no cell failed. */
bool dpg_check_row_fit(const struct dpg_check_row *n);

/* The table (header, one line per node, then one numbered note per
 * failing cell: "[k] n2 shm: ...", and one unnumbered note per N/A cell
 * that says why: "n2 nccl: not measured: ...") and the JSON document. */
void dpg_check_print_table(FILE *f, const struct dpg_check_row *rows, size_t n);
void dpg_check_print_json(FILE *f, const struct dpg_check_row *rows, size_t n);

#endif
