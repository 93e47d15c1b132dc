/*
 * test_hot_values.c - hot values: one value of a descriptor key with a
 * limit of its own, higher or lower, beside a rule with the key alone
 * whose limit every other value gets, each value on its own counter (or,
 * with a `*` pattern and share_threshold, all on one). Upstream's
 * exact-value descriptors, checked for this use on the memory store and
 * on the deferred store.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "engine_world.h"
#include "weir/weir.h"

static const char *hot_rules = "domain: search\n"
                               "descriptors:\n"
                               "  - key: tenant\n"
                               "    value: bigco\n"
                               "    rate_limit: {unit: minute, requests_per_unit: 5}\n"
                               "  - key: tenant\n"
                               "    value: noisy\n"
                               "    rate_limit: {unit: minute, requests_per_unit: 1}\n"
                               "  - key: tenant\n"
                               "    rate_limit: {unit: minute, requests_per_unit: 2}\n";

/* Admissions of @value in a row until the first denial (at most 20). */
static int admitted(world *w, const char *value)
{
    weir_entry e[] = {{"tenant", 6, value, strlen(value)}};
    weir_descriptor d = {e, 1, false, 0, NULL};
    weir_descriptor_status st[1];
    int n = 0;
    while (n < 20 && decide(w, "search", &d, 1, 0, 0, st) == WEIR_CODE_OK) {
        assert_non_null(st[0].limit);
        n++;
    }
    return n;
}

static uint32_t limit_of(world *w, const char *value)
{
    weir_entry e[] = {{"tenant", 6, value, strlen(value)}};
    weir_descriptor d = {e, 1, false, 0, NULL};
    weir_descriptor_status st[1];
    decide(w, "search", &d, 1, 0, 0, st);
    assert_non_null(st[0].limit);
    return st[0].requests_per_unit;
}

/* The hot values get their own limits, higher and lower; every other
 * value gets the default, on a counter of its own, which the hot values'
 * traffic does not touch. */
static void hot_value_beside_the_default(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, hot_rules);
    assert_int_equal(admitted(&w, "bigco"), 5);
    assert_int_equal(admitted(&w, "noisy"), 1);
    assert_int_equal(admitted(&w, "alice"), 2);
    assert_int_equal(admitted(&w, "bob"), 2);
    assert_int_equal(admitted(&w, "carol"), 2);
    /* a value is matched exactly: a prefix or another case is "any other" */
    assert_int_equal(admitted(&w, "bigc"), 2);
    assert_int_equal(admitted(&w, "BIGCO"), 2);
    assert_int_equal(limit_of(&w, "bigco"), 5);
    assert_int_equal(limit_of(&w, "noisy"), 1);
    assert_int_equal(limit_of(&w, "dave"), 2);
    close_world(&w);
}

/* The same with the others on one shared counter: a `*` pattern with
 * share_threshold in place of the key-only rule. */
static void hot_value_beside_a_shared_default(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, "domain: search\n"
                   "descriptors:\n"
                   "  - key: tenant\n"
                   "    value: bigco\n"
                   "    rate_limit: {unit: minute, requests_per_unit: 5}\n"
                   "  - key: tenant\n"
                   "    value: \"*\"\n"
                   "    share_threshold: true\n"
                   "    rate_limit: {unit: minute, requests_per_unit: 3}\n");
    assert_int_equal(admitted(&w, "alice"), 3);
    assert_int_equal(admitted(&w, "bob"), 0);
    assert_int_equal(admitted(&w, "bigco"), 5);
    close_world(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hot_value_beside_the_default),
        cmocka_unit_test(hot_value_beside_a_shared_default),
    };
    int failed = cmocka_run_group_tests_name("memory store", tests, world_use_memory, NULL);
    world_deferred_opts.order = WEIR_DEFERRED_REVERSE;
    failed +=
        cmocka_run_group_tests_name("deferred store, reversed", tests, world_use_deferred, NULL);
    return failed;
}
