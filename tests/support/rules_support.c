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

void test_rules_expect_error(const char *yaml, const char *want)
{
    weir_ctx *ctx;
    assert_int_equal(weir_ctx_new(NULL, &ctx), WEIR_OK);
    weir_rules_error errs[SHOWN_ERRORS];
    size_t n = 0;
    weir_rules *r = NULL;
    weir_status st =
        weir_rules_parse(ctx, "test.yaml", yaml, strlen(yaml), NULL, &r, errs, SHOWN_ERRORS, &n);
    bool found = false;
    for (size_t i = 0; i < n && i < SHOWN_ERRORS; i++)
        found |= strstr(errs[i].message, want) != NULL;
    if (!found) {
        printf("  wanted '%s' from:\n%s", want, yaml);
        for (size_t i = 0; i < n && i < SHOWN_ERRORS; i++)
            printf("  %s:%u:%u: %s\n", errs[i].file, errs[i].line, errs[i].column, errs[i].message);
    }
    assert_int_equal(st, WEIR_EPARSE);
    assert_null(r);
    assert_true(found);
    weir_ctx_free(ctx);
}
