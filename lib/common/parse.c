/* parse.c - strict parsers of the small values every wing reads: decimal
 * integers in a range, hex digits and index lists ("0,2-3"). */
#include "parse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
int dpg_int_list_parse(const char *s, int *out, size_t cap, size_t *n,
		       struct dpg_err *err)
{
	char q[80];
	const char *p = s;

	*n = 0;
	if (s == NULL || *s == '\0')
		return dpg_errf(err, "empty device list");
	while (*p != '\0') {
		char num[8];
		unsigned long lo, hi;
		size_t k = 0;

		for (k = 0; p[k] >= '0' && p[k] <= '9' && k < sizeof(num) - 1; k++)
			num[k] = p[k];
		num[k] = '\0';
		if (k == 0 || dpg_parse_ulong(num, 0, 4095, &lo) != 0)
			goto bad;
		p += k;
		hi = lo;
		if (*p == '-') {
			p++;
			for (k = 0; p[k] >= '0' && p[k] <= '9' && k < sizeof(num) - 1; k++)
				num[k] = p[k];
			num[k] = '\0';
			if (k == 0 || dpg_parse_ulong(num, lo, 4095, &hi) != 0)
				goto bad;
			p += k;
		}
		for (unsigned long v = lo; v <= hi; v++) {
			if (*n >= cap)
				return dpg_errf(err, "device list '%s' names more than %zu "
						"devices", dpg_err_quote(s, q, sizeof(q)), cap);
			out[(*n)++] = (int)v;
		}
		if (*p == ',' && p[1] != '\0')
			p++;
		else if (*p != '\0')
			goto bad;
	}
	return 0;
bad:
	*n = 0;
	return dpg_errf(err, "invalid device list '%s': expected indices such as "
			"0,2,3 or 0-3", dpg_err_quote(s, q, sizeof(q)));
}
