/*
 * test_parse_many.c - several in-memory documents loaded as one config
 * (weir_rules_parse_many(), what rules delivered over xDS go through): in
 * the order given, a duplicate domain refused or merged as the options
 * say, every document's errors reported under its own name, no domain
 * at all a warning, and the argument checks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "weir/weir.h"

static const char a_doc[] = "domain: a\n"
                            "descriptors:\n"
                            "  - key: k\n"
                            "    rate_limit: {unit: minute, requests_per_unit: 1}\n";
static const char b_doc[] = "domain: b\n"
                            "descriptors:\n"
                            "  - key: k\n"
                            "    rate_limit: {unit: hour, requests_per_unit: 2}\n";
static const char a_more[] = "domain: a\n"
                             "descriptors:\n"
                             "  - key: other\n"
                             "    rate_limit: {unit: second, requests_per_unit: 3}\n";
static const char bad_doc[] = "domain: c\n"
                              "descriptors:\n"
                              "  - key: k\n"
                              "    rate_limit: {unit: fortnight, requests_per_unit: 1}\n";

#define DOC(n, t)           \
    {                       \
        n, t, sizeof(t) - 1 \
    }

static void in_order(void **unused)
{
    (void)unused;
    weir_ctx *ctx;
    assert_int_equal(weir_ctx_new(NULL, &ctx), WEIR_OK);
    weir_rules_doc docs[] = {DOC("xds:b", b_doc), DOC("xds:a", a_doc)};
    weir_rules *r;
    size_t n = 99;
    assert_int_equal(weir_rules_parse_many(ctx, docs, 2, NULL, &r, NULL, 0, &n), WEIR_OK);
    assert_int_equal(n, 0);
    assert_int_equal(weir_rules_domain_count(r), 2);
    assert_string_equal(weir_rules_domain_name(weir_rules_domain_at(r, 0)), "b");
    assert_string_equal(weir_rules_domain_name(weir_rules_domain_at(r, 1)), "a");
    const char *file;
    weir_rule_location(weir_rules_domain_rule(weir_rules_find_domain(r, "a"), 0), &file, NULL,
                       NULL);
    assert_string_equal(file, "xds:a");
    assert_int_equal(weir_rules_warning_count(r), 0);
    weir_rules_free(r);
    weir_ctx_free(ctx);
}

static void duplicate_domain(void **unused)
{
    (void)unused;
    weir_ctx *ctx;
    assert_int_equal(weir_ctx_new(NULL, &ctx), WEIR_OK);
    weir_rules_doc docs[] = {DOC("one", a_doc), DOC("two", a_more)};
    weir_rules *r = NULL;
    weir_rules_error errs[4];
    size_t n = 0;
    assert_int_equal(weir_rules_parse_many(ctx, docs, 2, NULL, &r, errs, 4, &n), WEIR_EPARSE);
    assert_null(r);
    assert_int_equal(n, 1);
    assert_string_equal(errs[0].file, "two");
    assert_string_equal(errs[0].message, "duplicate domain 'a' in config file");

    weir_rules_options o = {.size = sizeof(o), .merge_domains = true};
    assert_int_equal(weir_rules_parse_many(ctx, docs, 2, &o, &r, errs, 4, &n), WEIR_OK);
    assert_int_equal(weir_rules_domain_count(r), 1);
    assert_int_equal(weir_rules_domain_rule_count(weir_rules_domain_at(r, 0)), 2);
    weir_rules_free(r);
    weir_ctx_free(ctx);
}

/* Every document is read to its end: the errors of each, under its name. */
static void errors_of_each(void **unused)
{
    (void)unused;
    weir_ctx *ctx;
    assert_int_equal(weir_ctx_new(NULL, &ctx), WEIR_OK);
    weir_rules_doc docs[] = {DOC("first", bad_doc), DOC("second", b_doc), DOC(NULL, bad_doc)};
    weir_rules *r = NULL;
    weir_rules_error errs[4];
    size_t n = 0;
    assert_int_equal(weir_rules_parse_many(ctx, docs, 3, NULL, &r, errs, 4, &n), WEIR_EPARSE);
    assert_null(r);
    assert_int_equal(n, 3); /* the third: its error, then domain c twice */
    assert_string_equal(errs[0].file, "first");
    assert_int_equal(errs[0].line, 4);
    assert_string_equal(errs[0].message, "invalid rate limit unit 'fortnight'");
    assert_string_equal(errs[1].file, "<memory>");
    weir_ctx_free(ctx);
}

static void no_domain(void **unused)
{
    (void)unused;
    weir_ctx *ctx;
    assert_int_equal(weir_ctx_new(NULL, &ctx), WEIR_OK);
    weir_rules *r;
    assert_int_equal(weir_rules_parse_many(ctx, NULL, 0, NULL, &r, NULL, 0, NULL), WEIR_OK);
    assert_int_equal(weir_rules_domain_count(r), 0);
    assert_int_equal(weir_rules_warning_count(r), 1);
    assert_non_null(strstr(weir_rules_warning_at(r, 0)->message, "no domain loaded"));
    weir_rules_free(r);

    weir_rules_doc bad[] = {{"x", NULL, 3}};
    r = NULL;
    assert_int_equal(weir_rules_parse_many(ctx, bad, 1, NULL, &r, NULL, 0, NULL), WEIR_EINVAL);
    assert_int_equal(weir_rules_parse_many(ctx, NULL, 1, NULL, &r, NULL, 0, NULL), WEIR_EINVAL);
    assert_int_equal(
        weir_rules_parse_many(ctx, bad, WEIR_RULES_MAX_FILES + 1u, NULL, &r, NULL, 0, NULL),
        WEIR_EINVAL);
    assert_int_equal(weir_rules_parse_many(NULL, NULL, 0, NULL, &r, NULL, 0, NULL), WEIR_EINVAL);
    assert_null(r);
    weir_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(in_order),
        cmocka_unit_test(duplicate_domain),
        cmocka_unit_test(errors_of_each),
        cmocka_unit_test(no_domain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
