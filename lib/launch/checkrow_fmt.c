/* SPDX-License-Identifier: BSD-3-Clause */
/* checkrow_fmt.c - dpg-check's outputs: the table (one line per node, then
 * a numbered note per failing cell) and the JSON document. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "checkrow.h"

#define NODE_W 10

static void print_head(FILE *f, size_t *w)
{
	fprintf(f, "%-*s %-5s", NODE_W, "NODE", "TASKS");
	for (int c = 0; c < DPG_CHECK_NCOLS; c++) {
		const char *s = dpg_check_col_name(c);

		fputc(' ', f);
		for (size_t i = 0; i < w[c]; i++)
			fputc(i < strlen(s) ? toupper((unsigned char)s[i]) : ' ', f);
	}
	fputs(" RESULT\n", f);
}

/* The text of a cell in the table: its value, "FAIL[k] value" when failing. */
static void cell_text(const struct dpg_check_cell *x, int note, char *buf, size_t len)
{
	if (x->state == DPG_CHECK_FAIL)
		snprintf(buf, len, "FAIL[%d] %s", note, x->value);
	else if (x->state == DPG_CHECK_NA)
		snprintf(buf, len, "%s", x->value[0] ? x->value : "-");
	else
		snprintf(buf, len, "%s", x->value);
}

static void widths(const struct dpg_check_row *rows, size_t n, size_t *w)
{
	char buf[DPG_CHECK_SHORT_MAX + 32];

	for (int c = 0; c < DPG_CHECK_NCOLS; c++) {
		w[c] = strlen(dpg_check_col_name(c));
		for (size_t i = 0; i < n; i++) {
			cell_text(&rows[i].cell[c], 99, buf, sizeof(buf));
			if (strlen(buf) > w[c])
				w[c] = strlen(buf);
		}
	}
}

static void print_row(FILE *f, const struct dpg_check_row *r, const size_t *w, int *note)
{
	char buf[DPG_CHECK_SHORT_MAX + 32], tasks[24];

	snprintf(tasks, sizeof(tasks), "%d/%d", r->tasks, r->expected);
	fprintf(f, "%-*s %-5s", NODE_W, r->node, tasks);
	for (int c = 0; c < DPG_CHECK_NCOLS; c++) {
		int k = r->cell[c].state == DPG_CHECK_FAIL ? ++*note : 0;

		if (r->tasks == 0)
			snprintf(buf, sizeof(buf), "?");
		else
			cell_text(&r->cell[c], k, buf, sizeof(buf));
		fprintf(f, " %-*s", (int)w[c], buf);
	}
	fprintf(f, " %s\n", dpg_check_row_fit(r) ? "ok" : "FAIL");
}

/* The failing cells' numbered notes, then the unnumbered ones of N/A cells
 * that say why (e.g. why NCCL was not measured). */
static void print_notes(FILE *f, const struct dpg_check_row *rows, size_t n)
{
	int note = 0;

	for (size_t i = 0; i < n; i++) {
		if (rows[i].missing[0] != '\0')
			fprintf(f, "%s: %s\n", rows[i].node, rows[i].missing);
		for (int c = 0; c < DPG_CHECK_NCOLS; c++)
			if (rows[i].cell[c].state == DPG_CHECK_FAIL)
				fprintf(f, "[%d] %s %s: %s\n", ++note, rows[i].node,
					dpg_check_col_name(c), rows[i].cell[c].detail);
	}
	for (size_t i = 0; i < n; i++)
		for (int c = 0; c < DPG_CHECK_NCOLS; c++)
			if (rows[i].tasks > 0 && rows[i].cell[c].state == DPG_CHECK_NA &&
			    rows[i].cell[c].detail[0] != '\0')
				fprintf(f, "%s %s: %s\n", rows[i].node,
					dpg_check_col_name(c), rows[i].cell[c].detail);
}

void dpg_check_print_table(FILE *f, const struct dpg_check_row *rows, size_t n)
{
	size_t w[DPG_CHECK_NCOLS];
	int note = 0, fit = 0;

	widths(rows, n, w);
	print_head(f, w);
	for (size_t i = 0; i < n; i++) {
		print_row(f, &rows[i], w, &note);
		fit += dpg_check_row_fit(&rows[i]);
	}
	print_notes(f, rows, n);
	fprintf(f, "dpg-check: %d of %zu nodes fit\n", fit, n);
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s != '\0'; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

static void json_row(FILE *f, const struct dpg_check_row *r)
{
	static const char *const st[] = { "n/a", "ok", "fail" };

	fputs("{\"node\":", f);
	json_str(f, r->node);
	fprintf(f, ",\"tasks\":%d,\"expected\":%d,\"fit\":%s,\"missing\":", r->tasks,
		r->expected, dpg_check_row_fit(r) ? "true" : "false");
	json_str(f, r->missing);
	fputs(",\"checks\":{", f);
	for (int c = 0; c < DPG_CHECK_NCOLS; c++) {
		const struct dpg_check_cell *x = &r->cell[c];

		fprintf(f, "%s\"%s\":{\"state\":\"%s\",\"value\":", c ? "," : "",
			dpg_check_col_name(c), r->tasks == 0 ? "unknown" : st[x->state]);
		json_str(f, x->value);
		fputs(",\"detail\":", f);
		json_str(f, x->detail);
		fputc('}', f);
	}
	fputs("}}", f);
}

void dpg_check_print_json(FILE *f, const struct dpg_check_row *rows, size_t n)
{
	bool fit = true;

	for (size_t i = 0; i < n; i++)
		fit = fit && dpg_check_row_fit(&rows[i]);
	fprintf(f, "{\"fit\":%s,\"nodes\":[", fit ? "true" : "false");
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			fputc(',', f);
		json_row(f, &rows[i]);
	}
	fputs("]}\n", f);
}
