/* SPDX-License-Identifier: BSD-3-Clause */
/* test_env.c - unit tests for lib/common/env.c: dpg_env_add / dpg_env_get,
 * formatting, a full table, a name or value too long. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"

static struct dpg_env *env_new(void)
{
	struct dpg_env *e = calloc(1, sizeof(*e));

	assert_non_null(e);
	return e;
}

static void test_add_get(void **state)
{
	struct dpg_env *e = env_new();

	(void)state;
	assert_null(dpg_env_get(e, "A"));
	assert_int_equal(dpg_env_add(e, "A", "%d", 42), 0);
	assert_int_equal(dpg_env_add(e, "B", "%s-%u", "x", 7u), 0);
	assert_int_equal(dpg_env_add(e, "EMPTY", "%s", ""), 0);
	assert_int_equal(e->n, 3);
	assert_string_equal(dpg_env_get(e, "A"), "42");
	assert_string_equal(dpg_env_get(e, "B"), "x-7");
	assert_string_equal(dpg_env_get(e, "EMPTY"), "");
	assert_null(dpg_env_get(e, "C"));
	assert_null(dpg_env_get(e, "a"));	/* case matters */
	assert_null(dpg_env_get(e, "AB"));	/* whole names only */
	assert_null(dpg_env_get(e, ""));
	assert_string_equal(e->v[0].name, "A");
	assert_string_equal(e->v[1].name, "B");
	free(e);
}

/* A name added twice: the first entry is the one read back. */
static void test_duplicate(void **state)
{
	struct dpg_env *e = env_new();

	(void)state;
	assert_int_equal(dpg_env_add(e, "X", "1"), 0);
	assert_int_equal(dpg_env_add(e, "X", "2"), 0);
	assert_int_equal(e->n, 2);
	assert_string_equal(dpg_env_get(e, "X"), "1");
	free(e);
}

static void test_table_full(void **state)
{
	struct dpg_env *e = env_new();
	char name[16];

	(void)state;
	for (int i = 0; i < DPG_ENV_MAX; i++) {
		snprintf(name, sizeof(name), "V%d", i);
		assert_int_equal(dpg_env_add(e, name, "%d", i * 3), 0);
	}
	assert_int_equal(e->n, DPG_ENV_MAX);
	assert_int_equal(dpg_env_add(e, "ONE_MORE", "x"), -1);
	assert_int_equal(e->n, DPG_ENV_MAX);
	assert_null(dpg_env_get(e, "ONE_MORE"));
	snprintf(name, sizeof(name), "V%d", DPG_ENV_MAX - 1);
	assert_int_equal(atoi(dpg_env_get(e, name)), (DPG_ENV_MAX - 1) * 3);
	assert_string_equal(dpg_env_get(e, "V0"), "0");
	free(e);
}

static void test_value_too_long(void **state)
{
	struct dpg_env *e = env_new();
	char *big = malloc(DPG_ENV_VALUE_MAX + 1);

	(void)state;
	assert_non_null(big);
	/* the longest value that fits: DPG_ENV_VALUE_MAX - 1 bytes */
	memset(big, 'v', DPG_ENV_VALUE_MAX - 1);
	big[DPG_ENV_VALUE_MAX - 1] = '\0';
	assert_int_equal(dpg_env_add(e, "LONGEST", "%s", big), 0);
	assert_int_equal(strlen(dpg_env_get(e, "LONGEST")), DPG_ENV_VALUE_MAX - 1);
	/* one more byte: refused, the table unchanged */
	memset(big, 'w', DPG_ENV_VALUE_MAX);
	big[DPG_ENV_VALUE_MAX] = '\0';
	assert_int_equal(dpg_env_add(e, "TOOLONG", "%s", big), -1);
	assert_int_equal(e->n, 1);
	assert_null(dpg_env_get(e, "TOOLONG"));
	/* the next add reuses the slot cleanly */
	assert_int_equal(dpg_env_add(e, "NEXT", "ok"), 0);
	assert_string_equal(dpg_env_get(e, "NEXT"), "ok");
	free(big);
	free(e);
}

static void test_name_too_long(void **state)
{
	struct dpg_env *e = env_new();
	char name[DPG_ENV_NAME_MAX + 1];

	(void)state;
	memset(name, 'N', DPG_ENV_NAME_MAX - 1);
	name[DPG_ENV_NAME_MAX - 1] = '\0';
	assert_int_equal(dpg_env_add(e, name, "fits"), 0);
	assert_string_equal(dpg_env_get(e, name), "fits");
	memset(name, 'M', DPG_ENV_NAME_MAX);
	name[DPG_ENV_NAME_MAX] = '\0';
	assert_int_equal(dpg_env_add(e, name, "no"), -1);
	assert_int_equal(e->n, 1);
	free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_add_get),
		cmocka_unit_test(test_duplicate),
		cmocka_unit_test(test_table_full),
		cmocka_unit_test(test_value_too_long),
		cmocka_unit_test(test_name_too_long),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
