/* opts.c - parsing of the user's --dpg-* option values into a dpg_request.
 * Strict: a value is accepted only if every byte of it is understood. */
#include "opts.h"
#include "port.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void dpg_request_init(struct dpg_request *r)
{
	r->gpus_per_task = -1;
	r->port = 0;
	r->verbose = false;
	r->bind = -1;
	r->visibility = -1;
}

int dpg_parse_ulong(const char *s, unsigned long lo, unsigned long hi,
		    unsigned long *out)
{
	char *end = NULL;
	unsigned long v;

	if (s == NULL || *s < '0' || *s > '9' || strlen(s) > 20)
		return -1;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || end == NULL || *end != '\0' || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

int dpg_opt_gpus_per_task(const char *s, int *out, struct dpg_err *err)
{
	unsigned long v;
	char q[64];

	if (dpg_parse_ulong(s, 0, DPG_GPUS_PER_TASK_MAX, &v) != 0)
		return dpg_errf(err, "invalid --dpg-gpus-per-task value '%s': "
				"expected an integer 0-%d (GPUs per task; 0 = CPU-only)",
				dpg_err_quote(s, q, sizeof(q)), DPG_GPUS_PER_TASK_MAX);
	*out = (int)v;
	return 0;
}

int dpg_opt_port(const char *s, uint16_t *out, struct dpg_err *err)
{
	unsigned long v;
	char q[64];

	if (dpg_parse_ulong(s, 1024, 65535, &v) != 0)
		return dpg_errf(err, "invalid --dpg-port value '%s': expected an "
				"integer 1024-65535 (the MASTER_PORT for this step)",
				dpg_err_quote(s, q, sizeof(q)));
	*out = (uint16_t)v;
	return 0;
}

int dpg_hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}
