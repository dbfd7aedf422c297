/* SPDX-License-Identifier: BSD-3-Clause */
/* checkrow.c - dpg-check's rows: cells, their wire form, the per-node merge
 * and the two outputs (a table for people, JSON for scripts). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkrow.h"

static const char *const col_names[DPG_CHECK_NCOLS] = {
	"gpus", "nics", "cpus", "master", "port", "nofile", "somaxconn", "shm", "net",
	"nccl",
};

const char *dpg_check_col_name(enum dpg_check_col c)
{
	return (unsigned)c < DPG_CHECK_NCOLS ? col_names[c] : "?";
}

/* Tabs and newlines would break the wire form and the table. */
static void flatten(char *s)
{
	for (; *s != '\0'; s++)
		if (*s == '\t' || *s == '\n' || *s == '\r')
			*s = ' ';
}

void dpg_check_set(struct dpg_check_cell *c, enum dpg_check_state st,
		   const char *value, const char *detail_fmt, ...)
{
	va_list ap;

	c->state = st;
	snprintf(c->value, sizeof(c->value), "%s", value);
	va_start(ap, detail_fmt);
	vsnprintf(c->detail, sizeof(c->detail), detail_fmt, ap);
	va_end(ap);
	flatten(c->value);
	flatten(c->detail);
}

int dpg_check_encode(const struct dpg_check_row *r, char *buf, size_t len,
		     struct dpg_err *err)
{
	size_t off = 0;
	int n = snprintf(buf, len, "node\t%s\t%d\n", r->node, r->rank);

	if (n < 0 || (size_t)n >= len)
		return dpg_errf(err, "check row of rank %d: buffer of %zu bytes too small",
				r->rank, len);
	off = (size_t)n;
	for (int c = 0; c < DPG_CHECK_NCOLS; c++) {
		const struct dpg_check_cell *x = &r->cell[c];

		n = snprintf(buf + off, len - off, "%s\t%d\t%s\t%s\n", col_names[c],
			     (int)x->state, x->value, x->detail);
		if (n < 0 || (size_t)n >= len - off)
			return dpg_errf(err, "check row of rank %d: buffer of %zu bytes "
					"too small", r->rank, len);
		off += (size_t)n;
	}
	return 0;
}

/* Split line into at most 4 tab-separated fields (in place). */
static int split(char *line, char **f, int max)
{
	int n = 0;

	f[n++] = line;
	for (char *p = line; *p != '\0' && n < max; p++)
		if (*p == '\t') {
			*p = '\0';
			f[n++] = p + 1;
		}
	return n;
}

static int decode_cell(char **f, int nf, struct dpg_check_row *r, int lineno,
		       struct dpg_err *err)
{
	int c;
	long st;
	char *end;

	for (c = 0; c < DPG_CHECK_NCOLS; c++)
		if (strcmp(f[0], col_names[c]) == 0)
			break;
	if (nf != 4 || c == DPG_CHECK_NCOLS)
		return dpg_errf(err, "check row line %d: not '<column>\\t<state>\\t"
				"<value>\\t<detail>'", lineno);
	st = strtol(f[1], &end, 10);
	if (*end != '\0' || st < DPG_CHECK_NA || st > DPG_CHECK_FAIL)
		return dpg_errf(err, "check row line %d: state '%.16s' is not 0, 1 or 2",
				lineno, f[1]);
	r->cell[c].state = (enum dpg_check_state)st;
	snprintf(r->cell[c].value, sizeof(r->cell[c].value), "%s", f[2]);
	snprintf(r->cell[c].detail, sizeof(r->cell[c].detail), "%s", f[3]);
	return 0;
}

static int decode_head(char **f, int nf, struct dpg_check_row *r, struct dpg_err *err)
{
	char *end;
	long rank;

	if (nf != 3 || strcmp(f[0], "node") != 0)
		return dpg_errf(err, "check row line 1: not 'node\\t<name>\\t<rank>'");
	rank = strtol(f[2], &end, 10);
	if (*end != '\0' || rank < 0 || rank > 0x7fffffffL)
		return dpg_errf(err, "check row line 1: rank '%.16s' is not a rank", f[2]);
	snprintf(r->node, sizeof(r->node), "%s", f[1]);
	r->rank = (int)rank;
	r->tasks = 1;
	return 0;
}

int dpg_check_decode(const char *buf, size_t len, struct dpg_check_row *r,
		     struct dpg_err *err)
{
	char *copy = malloc(len + 1), *save = NULL, *line, *f[4];
	int lineno = 0, rc = 0;

	if (copy == NULL)
		return dpg_errs(err, DPG_ERR_NOMEM, "check row: out of memory");
	memcpy(copy, buf, len);
	copy[len] = '\0';
	memset(r, 0, sizeof(*r));
	for (line = strtok_r(copy, "\n", &save); line != NULL && rc == 0;
	     line = strtok_r(NULL, "\n", &save)) {
		int nf = split(line, f, 4);

		lineno++;
		rc = lineno == 1 ? decode_head(f, nf, r, err)
				 : decode_cell(f, nf, r, lineno, err);
	}
	if (rc == 0 && lineno != 1 + DPG_CHECK_NCOLS)
		rc = dpg_errf(err, "check row: %d lines, want %d", lineno,
			      1 + DPG_CHECK_NCOLS);
	free(copy);
	return rc;
}

void dpg_check_merge(struct dpg_check_row *n, const struct dpg_check_row *t)
{
	if (n->tasks == 0) {
		int expected = n->expected;
		char missing[sizeof(n->missing)];

		memcpy(missing, n->missing, sizeof(missing));
		*n = *t;
		n->expected = expected;
		memcpy(n->missing, missing, sizeof(missing));
		n->tasks = 1;
		for (int c = 0; c < DPG_CHECK_NCOLS; c++)
			if (n->cell[c].state == DPG_CHECK_FAIL)
				dpg_check_set(&n->cell[c], DPG_CHECK_FAIL, t->cell[c].value,
					      "rank %d: %s", t->rank, t->cell[c].detail);
		return;
	}
	n->tasks++;
	for (int c = 0; c < DPG_CHECK_NCOLS; c++) {
		const struct dpg_check_cell *x = &t->cell[c];

		if (x->state == DPG_CHECK_FAIL && n->cell[c].state != DPG_CHECK_FAIL)
			dpg_check_set(&n->cell[c], DPG_CHECK_FAIL, x->value,
				      "rank %d: %s", t->rank, x->detail);
		else if (x->state == DPG_CHECK_OK && n->cell[c].state == DPG_CHECK_NA)
			n->cell[c] = *x;
	}
}

bool dpg_check_row_fit(const struct dpg_check_row *n)
{
	if (n->tasks < n->expected || n->missing[0] != '\0')
		return false;
	for (int c = 0; c < DPG_CHECK_NCOLS; c++)
		if (n->cell[c].state == DPG_CHECK_FAIL)
			return false;
	return true;
}
