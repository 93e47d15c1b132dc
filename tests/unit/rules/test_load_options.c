/*
 * test_load_options.c - load options that change every rule: the global
 * shadow mode (upstream's SHADOW_MODE) puts every descriptor, at every
 * depth, in shadow mode; without it only those that say so are. And
 * the empty rules a service starts with when its own do not load.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "weir/weir.h"

static const char yaml[] = "domain: d\n"
                           "descriptors:\n"
                           "  - key: a\n"
                           "    rate_limit: {unit: minute, requests_per_unit: 1}\n"
                           "    descriptors:\n"
                           "      - key: b\n"
                           "        rate_limit: {unit: minute, requests_per_unit: 1}\n"
                           "  - key: c\n"
                           "    shadow_mode: true\n"
                           "    rate_limit: {unit: minute, requests_per_unit: 1}\n";

static bool shadow(const weir_rule *r)
{
    return (weir_rule_flags(r) & WEIR_RULE_SHADOW_MODE) != 0;
}

static void global_shadow_mode(void **unused)
{
    (void)unused;
    weir_ctx *ctx;
    assert_int_equal(weir_ctx_new(NULL, &ctx), WEIR_OK);
    for (int global = 0; global < 2; global++) {
        weir_rules_options o = {.size = sizeof(o), .shadow_mode = global != 0};
        weir_rules *r;
        assert_int_equal(weir_rules_parse(ctx, "s.yaml", yaml, strlen(yaml), &o, &r, NULL, 0, NULL),
                         WEIR_OK);
        const weir_rules_domain *d = weir_rules_domain_at(r, 0);
        const weir_rule *a = weir_rules_domain_rule(d, 0), *c = weir_rules_domain_rule(d, 1);
        assert_int_equal(shadow(a), global);
        assert_int_equal(shadow(weir_rule_child(a, 0)), global);
        assert_true(shadow(c));
        weir_rules_free(r);
    }
    weir_ctx_free(ctx);
}

/* Rules with no domain, for a service that starts before its rules load. */
static void empty_rules(void **unused)
{
    (void)unused;
    weir_ctx *ctx;
    assert_int_equal(weir_ctx_new(NULL, &ctx), WEIR_OK);
    weir_rules *r;
    assert_int_equal(weir_rules_empty(ctx, &r), WEIR_OK);
    assert_int_equal(weir_rules_domain_count(r), 0);
    assert_int_equal(weir_rules_rule_count(r), 0);
    assert_int_equal(weir_rules_warning_count(r), 0);
    weir_rules_free(r);
    assert_int_equal(weir_rules_empty(NULL, &r), WEIR_EINVAL);
    assert_int_equal(weir_rules_empty(ctx, NULL), WEIR_EINVAL);
    weir_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(global_shadow_mode),
        cmocka_unit_test(empty_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
