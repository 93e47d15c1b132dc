/*
 * test_tenants.c - tenants end to end: a descriptor holding the tenant
 * key is limited by the tenant's overrides, else its tier, else the rule
 * file, window by window; records in force only between their times; a
 * table swapped while counters stay; the table's refusals.
 *
 * Every test runs on the memory store, and on the deferred test store
 * with stable keys (what a store shared between processes is sent).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "engine_world.h"

#define S 1000000LL

static const char *rules = "domain: api\n"
                           "tenants:\n"
                           "  default_tier: free\n"
                           "  tiers:\n"
                           "    free:\n"
                           "      rate_limit: {unit: minute, requests_per_unit: 3}\n"
                           "    pro:\n"
                           "      rate_limits:\n"
                           "        - {unit: minute, requests_per_unit: 10}\n"
                           "        - {unit: hour, requests_per_unit: 12}\n"
                           "      descriptors:\n"
                           "        - key: endpoint\n"
                           "          value: /orders\n"
                           "          rate_limit: {unit: minute, requests_per_unit: 2}\n"
                           "descriptors:\n"
                           "  - key: api_key\n"
                           "    rate_limit: {unit: minute, requests_per_unit: 5}\n"
                           "    descriptors:\n"
                           "      - key: endpoint\n"
                           "        rate_limit: {unit: minute, requests_per_unit: 7}\n"
                           "  - key: global\n"
                           "    rate_limit: {unit: minute, requests_per_unit: 1000}\n";

static const weir_tenant_limit pro_default_4 = {"default", 7, 4, WEIR_UNIT_MINUTE, 0, NULL, 0};
static const weir_tenant_limit orders_6 = {"endpoint:/orders", 16, 6, WEIR_UNIT_MINUTE, 0, NULL, 0};

/* A table of @n records, in force on @w's engine. */
static void set_table(world *w, const weir_tenant *recs, size_t n)
{
    weir_tenants *t;
    assert_int_equal(weir_tenants_new(w->ctx, &t), WEIR_OK);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(weir_tenants_add(t, &recs[i]), WEIR_OK);
    assert_int_equal(weir_engine_set_tenants(w->engine, t), WEIR_OK);
    assert_int_equal(weir_engine_tenant_count(w->engine), n);
}

static weir_tenant tenant(const char *key, const char *tier, const weir_tenant_limit *l, size_t n)
{
    weir_tenant t = {key, strlen(key), tier, INT64_MIN, INT64_MAX, l, n};
    return t;
}

/* How many of @max requests of descriptor @d (@n entries) are admitted. */
static int admitted(world *w, const weir_entry *e, size_t n, int max, int64_t now)
{
    weir_descriptor d = {e, n, false, 0, NULL};
    weir_descriptor_status st;
    int ok = 0;
    for (int i = 0; i < max; i++)
        ok += decide(w, "api", &d, 1, 0, now, &st) == WEIR_CODE_OK;
    return ok;
}

static void tiers_replace_the_files_limits(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, rules);
    /* no table yet: a key with no record is on the default tier */
    weir_entry a[] = {E("api_key", "a")};
    assert_int_equal(admitted(&w, a, 1, 10, 0), 3);
    weir_tenant recs[] = {tenant("b", "pro", NULL, 0), tenant("c", "gold", NULL, 0)};
    set_table(&w, recs, 2);
    weir_entry b[] = {E("api_key", "b")}, c[] = {E("api_key", "c")};
    assert_int_equal(admitted(&w, b, 1, 20, 0), 10);
    /* a tier no domain knows: the default tier */
    assert_int_equal(admitted(&w, c, 1, 10, 0), 3);
    /* pro's hourly limit stays in force across minutes */
    assert_int_equal(admitted(&w, b, 1, 20, 61 * S), 2);
    /* pro's /orders limit replaces the file's per-endpoint one; another
     * endpoint keeps the file's */
    weir_entry bo[] = {E("api_key", "b"), E("endpoint", "/orders")};
    weir_entry bx[] = {E("api_key", "b"), E("endpoint", "/x")};
    assert_int_equal(admitted(&w, bo, 2, 10, 0), 2);
    assert_int_equal(admitted(&w, bx, 2, 10, 0), 7);
    close_world(&w);
}

static void overrides_come_first(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, rules);
    weir_tenant_limit both[] = {pro_default_4, orders_6};
    weir_tenant recs[] = {tenant("k", "pro", both, 2)};
    set_table(&w, recs, 1);
    weir_entry k[] = {E("api_key", "k")}, ko[] = {E("api_key", "k"), E("endpoint", "/orders")};
    /* the per-minute override replaces pro's 10; pro's hourly 12 stays */
    assert_int_equal(admitted(&w, k, 1, 10, 0), 4);
    assert_int_equal(admitted(&w, k, 1, 10, 61 * S), 4);
    assert_int_equal(admitted(&w, k, 1, 10, 122 * S), 4);
    assert_int_equal(admitted(&w, k, 1, 10, 183 * S), 0); /* 12 an hour */
    assert_int_equal(admitted(&w, ko, 2, 10, 0), 6);
    /* the most restrictive limit of a request still wins: the tenant's
     * generous endpoint limit with its spent default */
    weir_descriptor two[2] = {{k, 1, false, 0, NULL}, {ko, 2, false, 0, NULL}};
    weir_descriptor_status st[2];
    assert_int_equal(decide(&w, "api", two, 2, 0, 4 * 3600 * S, st), WEIR_CODE_OK);
    assert_int_equal(st[0].remaining, 3);
    close_world(&w);
}

/* The limit outcomes of one decision of @e (@n entries) into @o. */
static void outcomes_of(world *w, const weir_entry *e, size_t n, outcome *o)
{
    weir_descriptor d = {e, n, false, 0, NULL};
    weir_request req = {"api", 3, &d, 1, 0, 0};
    weir_descriptor_status st;
    memset(o, 0, sizeof(*o));
    assert_int_equal(weir_engine_decide(w->reader, &req, 0, &st, on_decided, o), WEIR_OK);
    settle(w);
    assert_int_equal(o->calls, 1);
}

static void outcomes_name_the_tier(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, rules);
    weir_tenant_limit one[] = {pro_default_4};
    weir_tenant recs[] = {tenant("k", "pro", one, 1), tenant("g", "gold", NULL, 0)};
    set_table(&w, recs, 2);
    outcome o;
    /* k: pro's hourly limit and k's own per-minute override */
    weir_entry k[] = {E("api_key", "k")};
    outcomes_of(&w, k, 1, &o);
    assert_int_equal(o.n_first, 2);
    int overrides = 0;
    for (size_t i = 0; i < o.n_first; i++) {
        assert_string_equal(o.first[i].tier, "pro");
        overrides += o.first[i].tenant_override;
    }
    assert_int_equal(overrides, 1);
    /* no record, or a tier no domain knows: the default tier */
    weir_entry a[] = {E("api_key", "a")}, g[] = {E("api_key", "g")};
    outcomes_of(&w, a, 1, &o);
    assert_int_equal(o.n_first, 1);
    assert_string_equal(o.first[0].tier, "free");
    assert_false(o.first[0].tenant_override);
    outcomes_of(&w, g, 1, &o);
    assert_string_equal(o.first[0].tier, "free");
    /* a descriptor without the tenant's key has no tier */
    weir_entry gl[] = {E("global", "x")};
    outcomes_of(&w, gl, 1, &o);
    assert_int_equal(o.n_first, 1);
    assert_null(o.first[0].tier);
    close_world(&w);
}

static void records_have_their_time(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, rules);
    weir_tenant recs[] = {tenant("k", "pro", NULL, 0)};
    recs[0].effective_at_us = 600 * S;
    recs[0].expires_at_us = 1200 * S;
    set_table(&w, recs, 1);
    weir_entry k[] = {E("api_key", "k")};
    assert_int_equal(admitted(&w, k, 1, 20, 0), 3);        /* not yet: free */
    assert_int_equal(admitted(&w, k, 1, 20, 600 * S), 10); /* pro */
    assert_int_equal(admitted(&w, k, 1, 20, 1200 * S), 3); /* expired: free */
    close_world(&w);
}

static void a_new_table_keeps_counters(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, rules);
    weir_tenant recs[] = {tenant("k", "pro", NULL, 0)};
    set_table(&w, recs, 1);
    weir_entry k[] = {E("api_key", "k")};
    assert_int_equal(admitted(&w, k, 1, 6, 0), 6);
    weir_tenant more[] = {tenant("k", "pro", NULL, 0), tenant("z", NULL, NULL, 0)};
    set_table(&w, more, 2);
    assert_int_equal(admitted(&w, k, 1, 10, 0), 4);
    /* and a reload keeps the table */
    weir_rules *r;
    assert_int_equal(weir_rules_parse(w.ctx, NULL, rules, strlen(rules), NULL, &r, NULL, 0, NULL),
                     WEIR_OK);
    assert_int_equal(weir_engine_reload(w.engine, r), WEIR_OK);
    assert_int_equal(weir_engine_tenant_count(w.engine), 2);
    assert_int_equal(admitted(&w, k, 1, 10, 0), 0);
    assert_int_equal(weir_engine_set_tenants(w.engine, NULL), WEIR_OK);
    assert_int_equal(weir_engine_tenant_count(w.engine), 0);
    close_world(&w);
}

static void other_descriptors_are_untouched(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, rules);
    weir_entry g[] = {E("global", "x")};
    assert_int_equal(admitted(&w, g, 1, 20, 0), 20);
    /* a request's own override of the limit leaves tenants aside */
    weir_entry k[] = {E("api_key", "q")};
    weir_limit_override o = {2, WEIR_UNIT_MINUTE};
    weir_descriptor d = {k, 1, false, 0, &o};
    weir_descriptor_status st;
    assert_int_equal(decide(&w, "api", &d, 1, 0, 0, &st), WEIR_CODE_OK);
    assert_int_equal(st.remaining, 1);
    close_world(&w);
}

static void the_table_refuses_bad_records(void **unused)
{
    (void)unused;
    weir_ctx *ctx;
    assert_int_equal(weir_ctx_new(NULL, &ctx), WEIR_OK);
    weir_tenants *t;
    assert_int_equal(weir_tenants_new(ctx, &t), WEIR_OK);
    weir_tenant_limit bad[] = {
        {"", 0, 1, WEIR_UNIT_MINUTE, 0, NULL, 0},         /* no scope */
        {"endpoint", 8, 1, WEIR_UNIT_MINUTE, 0, NULL, 0}, /* no ':' */
        {":x", 2, 1, WEIR_UNIT_MINUTE, 0, NULL, 0},       /* no key */
        {"default", 7, 1, WEIR_UNIT_NONE, 0, NULL, 0},    /* no window */
        {"default", 7, 1, WEIR_UNIT_MINUTE, 0, NULL, WEIR_ALGO_CONCURRENCY},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        weir_tenant r = tenant("k", NULL, &bad[i], 1);
        assert_int_equal(weir_tenants_add(t, &r), WEIR_EINVAL);
    }
    weir_tenant_limit twice[] = {pro_default_4, pro_default_4};
    weir_tenant r = tenant("k", NULL, twice, 2);
    assert_int_equal(weir_tenants_add(t, &r), WEIR_EINVAL);
    r = tenant("k", NULL, NULL, 0);
    r.expires_at_us = r.effective_at_us;
    assert_int_equal(weir_tenants_add(t, &r), WEIR_EINVAL);
    r = tenant("", NULL, NULL, 0);
    assert_int_equal(weir_tenants_add(t, &r), WEIR_EINVAL);
    assert_int_equal(weir_tenants_count(t), 0);
    /* a key added again replaces its record */
    r = tenant("k", "pro", NULL, 0);
    assert_int_equal(weir_tenants_add(t, &r), WEIR_OK);
    r = tenant("k", "free", NULL, 0);
    assert_int_equal(weir_tenants_add(t, &r), WEIR_OK);
    assert_int_equal(weir_tenants_count(t), 1);
    weir_tenants_free(t);
    weir_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tiers_replace_the_files_limits),
        cmocka_unit_test(overrides_come_first),
        cmocka_unit_test(outcomes_name_the_tier),
        cmocka_unit_test(records_have_their_time),
        cmocka_unit_test(a_new_table_keeps_counters),
        cmocka_unit_test(other_descriptors_are_untouched),
        cmocka_unit_test(the_table_refuses_bad_records),
    };
    int failed = cmocka_run_group_tests_name("memory store", tests, world_use_memory, NULL);
    world_deferred_opts.shared_keys = true;
    failed +=
        cmocka_run_group_tests_name("deferred store, stable keys", tests, world_use_deferred, NULL);
    return failed;
}
