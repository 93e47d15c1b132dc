/*
 * test_tenants.c - a domain's tenants section: the tenant key, the
 * default tier, the tiers read as descriptor bodies, and every refusal
 * with its place.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "rules_support.h"

static void reads_the_section(void **unused)
{
    (void)unused;
    weir_ctx *ctx;
    assert_int_equal(weir_ctx_new(NULL, &ctx), WEIR_OK);
    weir_rules *r =
        test_rules_parse(ctx, "domain: api\n"
                              "tenants:\n"
                              "  key: customer\n"
                              "  default_tier: basic\n"
                              "  tiers:\n"
                              "    basic:\n"
                              "      rate_limit: {unit: minute, requests_per_unit: 3}\n"
                              "      descriptors:\n"
                              "        - key: path\n"
                              "          value: /pay\n"
                              "          rate_limit: {unit: second, requests_per_unit: 1}\n"
                              "    gold.v2: {}\n"
                              "descriptors: []\n");
    const weir_rules_domain *d = weir_rules_find_domain(r, "api");
    assert_string_equal(weir_rules_domain_tenant_key(d), "customer");
    assert_string_equal(weir_rules_domain_default_tier(d), "basic");
    assert_int_equal(weir_rules_domain_tier_count(d), 2);
    assert_string_equal(weir_rules_domain_tier_name(d, 1), "gold.v2");
    const weir_rule *basic = weir_rules_domain_find_tier(d, "basic");
    assert_ptr_equal(basic, weir_rules_domain_tier(d, 0));
    assert_string_equal(weir_rule_key(basic), "customer");
    assert_null(weir_rule_value(basic));
    assert_int_equal(weir_rule_limit_count(basic), 1);
    const weir_rule_limit *l = weir_rule_limit_at(basic, 0);
    assert_int_equal(l->line, 7);
    assert_string_equal(l->domain, "api");
    assert_int_equal(weir_rule_child_count(basic), 1);
    assert_string_equal(weir_rule_value(weir_rule_child(basic, 0)), "/pay");
    assert_null(weir_rules_domain_find_tier(d, "none"));
    assert_null(weir_rules_domain_tier(d, 2));
    /* no section: no tenant key */
    weir_rules *plain = test_rules_parse(ctx, "domain: x\ndescriptors: []\n");
    assert_null(weir_rules_domain_tenant_key(weir_rules_find_domain(plain, "x")));
    assert_int_equal(weir_rules_domain_tier_count(weir_rules_find_domain(plain, "x")), 0);
    weir_rules_free(plain);
    weir_rules_free(r);
    weir_ctx_free(ctx);
}

static void refuses_bad_sections(void **unused)
{
    (void)unused;
    static const struct {
        const char *tenants, *why;
    } bad[] = {
        {"  tiers:\n    free:\n      key: x\n", "a tier has no 'key'"},
        {"  tiers:\n    free:\n      value: x\n", "a tier has no 'value'"},
        {"  tiers:\n    \"bad name\": {}\n", "tier name 'bad name' must be"},
        {"  tiers:\n    free: {}\n    free: {}\n", "duplicate tier 'free'"},
        {"  default_tier: gold\n  tiers:\n    free: {}\n", "default_tier 'gold' is not one"},
        {"  key: \"\"\n", "tenants.key must not be empty"},
        {"  tiers: [free]\n", "'tiers' must be a mapping"},
        {"  colour: blue\n", "unknown key 'colour'"},
        {"  tiers:\n    free:\n      rate_limit: {unit: minut, requests_per_unit: 1}\n",
         "invalid rate limit unit 'minut'"},
        {"  tiers:\n    free:\n      descriptors:\n        - key: a\n        - key: a\n",
         "duplicate descriptor composite key 'api.tiers.free.api_key.a'"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char yaml[512];
        snprintf(yaml, sizeof(yaml), "domain: api\ntenants:\n%sdescriptors: []\n", bad[i].tenants);
        test_rules_expect_error(yaml, bad[i].why);
    }
}

/* Files merged into one domain: one tenants section between them. */
static void one_section_a_domain(void **unused)
{
    (void)unused;
    weir_ctx *ctx;
    assert_int_equal(weir_ctx_new(NULL, &ctx), WEIR_OK);
    static const char a[] = "domain: api\ntenants: {tiers: {free: {}}}\ndescriptors: []\n";
    static const char b[] = "domain: api\ntenants: {tiers: {pro: {}}}\ndescriptors: []\n";
    weir_rules_doc docs[] = {{"a.yaml", a, sizeof(a) - 1}, {"b.yaml", b, sizeof(b) - 1}};
    weir_rules_options o = {.size = sizeof(o), .merge_domains = true};
    weir_rules *r = NULL;
    weir_rules_error err;
    size_t n = 0;
    assert_int_equal(weir_rules_parse_many(ctx, docs, 2, &o, &r, &err, 1, &n), WEIR_EPARSE);
    assert_string_equal(err.file, "b.yaml");
    assert_int_equal(err.line, 2);
    assert_non_null(strstr(err.message, "has a tenants section already (a.yaml:2)"));
    weir_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reads_the_section),
        cmocka_unit_test(refuses_bad_sections),
        cmocka_unit_test(one_section_a_domain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
