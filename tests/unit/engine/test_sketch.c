/*
 * test_sketch.c - limits counted in a count-min sketch (`sketch:`) in
 * the engine: each key admitted exactly its limit a window, nothing of
 * them in the store, a denial by a sketch charging nothing in the store
 * and a denial by the store charging nothing in the sketch, shadow
 * sketches counted apart, request overrides counted in the store, and
 * what the loader refuses.
 *
 * Every test runs on the memory store, and on the deferred test store
 * with stable keys (a store that completes later).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "engine_world.h"
#include "rules_support.h"

#define S 1000000LL

static const char *rules = "domain: edge\n"
                           "descriptors:\n"
                           "  - key: ip\n"
                           "    rate_limit: {unit: minute, requests_per_unit: 3, sketch: 1MiB}\n"
                           "  - key: route\n"
                           "    rate_limit: {unit: minute, requests_per_unit: 4}\n"
                           "  - key: watch\n"
                           "    shadow_mode: true\n"
                           "    rate_limit: {unit: minute, requests_per_unit: 1, sketch: 64KiB}\n";

static weir_code one(world *w, const char *key, const char *value, int64_t now,
                     weir_descriptor_status *st)
{
    weir_entry e = {key, strlen(key), value, strlen(value)};
    weir_descriptor d = {&e, 1, false, 0, NULL};
    return decide(w, "edge", &d, 1, 0, now, st);
}

static uint64_t store_keys(world *w)
{
    weir_store_stats s;
    if (weir_store_stats_get(w->store, &s) != WEIR_OK)
        return 0; /* the deferred store keeps its own count */
    return s.keys;
}

static void each_key_its_limit(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, rules);
    weir_descriptor_status st;
    char ip[32];
    for (int k = 0; k < 500; k++) {
        snprintf(ip, sizeof(ip), "10.0.%d.%d", k / 256, k % 256);
        for (int i = 0; i < 3; i++) {
            assert_int_equal(one(&w, "ip", ip, 0, &st), WEIR_CODE_OK);
            assert_int_equal(st.remaining, (uint64_t)(2 - i));
        }
        assert_int_equal(one(&w, "ip", ip, 0, &st), WEIR_CODE_OVER_LIMIT);
        assert_int_equal(st.retry_after_us, 60 * S);
    }
    /* the counts live in the sketch: the store holds none of them */
    assert_int_equal(store_keys(&w), 0);
    /* the next window counts afresh */
    assert_int_equal(one(&w, "ip", "10.0.0.1", 60 * S, &st), WEIR_CODE_OK);
    assert_int_equal(st.remaining, 2);
    close_world(&w);
}

static void denials_charge_nothing_elsewhere(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, rules);
    weir_entry ip[] = {E("ip", "192.0.2.7")}, route[] = {E("route", "/a")};
    weir_descriptor both[2] = {{ip, 1, false, 0, NULL}, {route, 1, false, 0, NULL}};
    weir_descriptor_status st[2];
    for (int i = 0; i < 3; i++)
        assert_int_equal(decide(&w, "edge", both, 2, 0, 0, st), WEIR_CODE_OK);
    assert_int_equal(st[1].remaining, 1);
    /* the sketch denies: the route's counter is only looked at */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(decide(&w, "edge", both, 2, 0, 0, st), WEIR_CODE_OVER_LIMIT);
        assert_int_equal(st[0].code, WEIR_CODE_OVER_LIMIT);
    }
    assert_int_equal(one(&w, "route", "/a", 0, st), WEIR_CODE_OK);
    assert_int_equal(st[0].remaining, 0);
    /* the store denies: the sketch of another address counts nothing */
    weir_entry ip2[] = {E("ip", "192.0.2.8")};
    both[0].entries = ip2;
    for (int i = 0; i < 4; i++)
        assert_int_equal(decide(&w, "edge", both, 2, 0, 0, st), WEIR_CODE_OVER_LIMIT);
    for (int i = 0; i < 3; i++)
        assert_int_equal(one(&w, "ip", "192.0.2.8", 0, st), WEIR_CODE_OK);
    assert_int_equal(one(&w, "ip", "192.0.2.8", 0, st), WEIR_CODE_OVER_LIMIT);
    close_world(&w);
}

static void shadow_and_overrides(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, rules);
    weir_descriptor_status st;
    /* shadow: never denies, says when it would */
    assert_int_equal(one(&w, "watch", "x", 0, &st), WEIR_CODE_OK);
    assert_false(st.would_deny);
    assert_int_equal(one(&w, "watch", "x", 0, &st), WEIR_CODE_OK);
    assert_true(st.would_deny);
    /* a request's own limit is counted in the store, not the sketch */
    weir_entry e[] = {E("ip", "203.0.113.1")};
    weir_limit_override o = {10, WEIR_UNIT_MINUTE};
    weir_descriptor d = {e, 1, false, 0, &o};
    for (int i = 0; i < 10; i++)
        assert_int_equal(decide(&w, "edge", &d, 1, 0, 0, &st), WEIR_CODE_OK);
    assert_int_equal(decide(&w, "edge", &d, 1, 0, 0, &st), WEIR_CODE_OVER_LIMIT);
    for (int i = 0; i < 3; i++)
        assert_int_equal(one(&w, "ip", "203.0.113.1", 0, &st), WEIR_CODE_OK);
    close_world(&w);
}

static void loader_refusals(void **unused)
{
    (void)unused;
    static const struct {
        const char *limit, *error;
    } bad[] = {
        {"{unit: minute, requests_per_unit: 3, sketch: 1KiB}", "must be a size from 64KiB"},
        {"{unit: minute, requests_per_unit: 3, sketch: lots}", "must be a size from 64KiB"},
        {"{unit: minute, requests_per_unit: 3, sketch: 2GiB}", "must be a size from 64KiB"},
        {"{unit: minute, requests_per_unit: 3, algorithm: gcra, sketch: 1MiB}",
         "counts a fixed_window only"},
        {"{calendar: day, requests_per_unit: 3, sketch: 1MiB}", "does not apply to a calendar"},
        {"{unit: minute, requests_per_unit: 3, sketch: 1MiB, count_rejected: true}",
         "no 'count_rejected'"},
        {"{unit: minute, requests_per_unit: 3, sketch: 1MiB, sync: local}", "no 'sync'"},
        {"{unlimited: true, sketch: 1MiB}", "has no effect when unlimited"},
        {"{unit: minute, requests_per_unit: 4294967295, sketch: 1MiB}", "at most 4294967294"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char yaml[256];
        snprintf(yaml, sizeof(yaml), "domain: d\ndescriptors:\n  - key: k\n    rate_limit: %s\n",
                 bad[i].limit);
        test_rules_expect_error(yaml, bad[i].error);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(each_key_its_limit),
        cmocka_unit_test(denials_charge_nothing_elsewhere),
        cmocka_unit_test(shadow_and_overrides),
        cmocka_unit_test(loader_refusals),
    };
    int failed = cmocka_run_group_tests_name("memory store", tests, world_use_memory, NULL);
    world_deferred_opts.shared_keys = true;
    failed +=
        cmocka_run_group_tests_name("deferred store, stable keys", tests, world_use_deferred, NULL);
    return failed;
}
