/* SPDX-License-Identifier: BSD-3-Clause */
/* port.c - MASTER_PORT without communication: every task of a step maps
 * (job id, step id) into the admin's port range with the same formula.
 *
 * Formula: R = hi - lo + 1, S = stride(R), port = lo + (job + step * S) mod R.
 * - consecutive job ids get consecutive ports, so any R jobs in a row (the
 *   jobs that can plausibly share a node at one time) never collide on
 *   their first step;
 * - S is the integer nearest R / phi that is coprime with R, so the steps of
 *   one job never collide with each other (s * S mod R differs for s < R)
 *   and step s of one job lands far from the first steps of jobs with
 *   nearby ids (Fibonacci hashing spreads multiples of S evenly).
 */
#include "port.h"
#include "parse.h"	/* dpg_parse_ulong, dpg_hex_digit */

#include <stdio.h>
#include <string.h>

static uint32_t gcd_u32(uint32_t a, uint32_t b)
{
	while (b != 0) {
		uint32_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

uint32_t dpg_port_stride(uint32_t range_size)
{
	/* R / phi = R * 0.6180339887... computed in integers */
	uint64_t s;

	if (range_size <= 2)
		return 1;
	s = ((uint64_t)range_size * 618034u + 500000u) / 1000000u;
	if (s == 0)
		s = 1;
	for (uint32_t d = 0; d < range_size; d++) {
		/* search outwards from R/phi for the nearest coprime stride */
		uint64_t up = s + d, down = s >= d ? s - d : 0;

		if (up < range_size && gcd_u32((uint32_t)up, range_size) == 1)
			return (uint32_t)up;
		if (down > 0 && gcd_u32((uint32_t)down, range_size) == 1)
			return (uint32_t)down;
	}
	return 1;
}

uint16_t dpg_port_for_step(uint32_t job_id, uint32_t step_id,
			   struct dpg_port_range r)
{
	uint32_t size = (uint32_t)r.hi - r.lo + 1;
	uint64_t slot;

	if (r.hi < r.lo)
		return r.lo;
	slot = ((uint64_t)job_id % size +
		(uint64_t)(step_id % size) * dpg_port_stride(size)) % size;
	return (uint16_t)(r.lo + slot);
}

int dpg_port_parse_named(const char *s, const char *what, const char *why,
			 uint16_t *port, struct dpg_err *err)
{
	unsigned long v;
	char q[64];

	if (dpg_parse_ulong(s, 1024, 65535, &v) != 0)
		return dpg_errf(err, "invalid %s '%s': expected an integer 1024-65535%s",
				what, dpg_err_quote(s, q, sizeof(q)), why);
	*port = (uint16_t)v;
	return 0;
}

int dpg_port_parse(const char *s, uint16_t *port, struct dpg_err *err)
{
	return dpg_port_parse_named(s, "port", "", port, err);
}

int dpg_port_range_parse(const char *s, struct dpg_port_range *r,
			 struct dpg_err *err)
{
	char lo_s[8], hi_s[8];
	const char *dash;
	unsigned long lo, hi;
	size_t n;
	char q[64];

	if (s == NULL || (dash = strchr(s, '-')) == NULL)
		goto bad;
	n = (size_t)(dash - s);
	if (n == 0 || n >= sizeof(lo_s) || strlen(dash + 1) >= sizeof(hi_s))
		goto bad;
	memcpy(lo_s, s, n);
	lo_s[n] = '\0';
	snprintf(hi_s, sizeof(hi_s), "%s", dash + 1);
	if (dpg_parse_ulong(lo_s, 1024, 65535, &lo) != 0 ||
	    dpg_parse_ulong(hi_s, 1024, 65535, &hi) != 0 || lo > hi)
		goto bad;
	r->lo = (uint16_t)lo;
	r->hi = (uint16_t)hi;
	return 0;
bad:
	return dpg_errf(err, "invalid port range '%s': expected LO-HI with "
			"1024 <= LO <= HI <= 65535", dpg_err_quote(s, q, sizeof(q)));
}

int dpg_port_from_resv(const char *s, uint16_t *port, struct dpg_err *err)
{
	char first[8], q[64];
	size_t n = 0;

	if (s == NULL)
		return dpg_errf(err, "SLURM_STEP_RESV_PORTS is not set");
	while (s[n] >= '0' && s[n] <= '9' && n < sizeof(first) - 1) {
		first[n] = s[n];
		n++;
	}
	first[n] = '\0';
	if (n == 0 || (s[n] != '\0' && s[n] != '-' && s[n] != ',') ||
	    dpg_port_parse(first, port, NULL) != 0)
		return dpg_errf(err, "invalid SLURM_STEP_RESV_PORTS='%s': expected "
				"a list of ports 1024-65535 such as 12000-12003",
				dpg_err_quote(s, q, sizeof(q)));
	return 0;
}
