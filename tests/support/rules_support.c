/*
 * rules_support.c - shared helpers for tests that need rules.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "rules_support.h"

#define SHOWN_ERRORS 8u

weir_rules *test_rules_parse(weir_ctx *ctx, const char *yaml)
{
    weir_rules_error errs[SHOWN_ERRORS];
    size_t n = 0;
    weir_rules *r = NULL;
    weir_status st =
        weir_rules_parse(ctx, "test.yaml", yaml, strlen(yaml), NULL, &r, errs, SHOWN_ERRORS, &n);
    for (size_t i = 0; i < n && i < SHOWN_ERRORS; i++)
        printf("  %s:%u:%u: %s\n", errs[i].file, errs[i].line, errs[i].column, errs[i].message);
    assert_int_equal(st, WEIR_OK);
    assert_non_null(r);
    return r;
}
