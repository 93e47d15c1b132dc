/*
 * test_warmup_limits.c - the engine keeps a rule's warm-up: a cold key
 * takes burst / cold_factor, a request's override keeps the rule's
 * warm-up, and a reload that changes the warm-up starts the counters
 * afresh (a state of another shape) while one that keeps it keeps them.
 * On the memory store and on the deferred store.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "engine_world.h"
#include "rules_support.h"
#include "weir/weir.h"

/* 30 an hour: a token every 2 minutes, none while a test runs. */
#define RULE(warmup)                                                                \
    "domain: warm\n"                                                                \
    "descriptors:\n"                                                                \
    "  - key: user\n"                                                               \
    "    rate_limit: {unit: hour, requests_per_unit: 30, algorithm: token_bucket, " \
    "warmup: " warmup "}\n"

static int admitted(world *w, const weir_limit_override *o)
{
    weir_entry e[] = {E("user", "alice")};
    weir_descriptor d = {e, 1, false, 0, o};
    weir_descriptor_status st[1];
    int n = 0;
    while (n < 100 && decide(w, "warm", &d, 1, 0, 1000, st) == WEIR_CODE_OK)
        n++;
    return n;
}

static void a_cold_key_takes_a_third(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, RULE("1h"));
    assert_int_equal(admitted(&w, NULL), 10);
    close_world(&w);
}

static void an_override_keeps_the_warm_up(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, RULE("1h"));
    weir_limit_override sixty = {60, WEIR_UNIT_HOUR};
    assert_int_equal(admitted(&w, &sixty), 20);
    close_world(&w);
}

static void a_changed_warm_up_is_a_fresh_counter(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, RULE("1h"));
    assert_int_equal(admitted(&w, NULL), 10);
    assert_int_equal(weir_engine_reload(w.engine, test_rules_parse(w.ctx, RULE("1h"))), WEIR_OK);
    assert_int_equal(admitted(&w, NULL), 0); /* the same limit: its counter kept */
    assert_int_equal(weir_engine_reload(w.engine, test_rules_parse(w.ctx, RULE("2h"))), WEIR_OK);
    assert_int_equal(admitted(&w, NULL), 10);
    close_world(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_cold_key_takes_a_third),
        cmocka_unit_test(an_override_keeps_the_warm_up),
        cmocka_unit_test(a_changed_warm_up_is_a_fresh_counter),
    };
    int failed = cmocka_run_group_tests_name("memory store", tests, world_use_memory, NULL);
    world_deferred_opts.order = WEIR_DEFERRED_REVERSE;
    failed +=
        cmocka_run_group_tests_name("deferred store, reversed", tests, world_use_deferred, NULL);
    return failed;
}
