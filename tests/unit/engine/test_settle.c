/*
 * test_settle.c - weir_engine_settle(): a request decided with an
 * estimate, then brought to its true cost: refunded when it cost less,
 * charged the overrun when it cost more (as far as the limit holds),
 * descriptors with hits of their own, concurrency limits and warm-ups
 * left as they are. On the memory store and the deferred test store.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "engine_world.h"

static const char *rules =
    "domain: llm\n"
    "descriptors:\n"
    "  - key: user\n"
    "    rate_limits:\n"
    "      - {unit: minute, requests_per_unit: 100}\n"
    "      - {unit: minute, requests_per_unit: 1000, algorithm: token_bucket}\n"
    "  - key: conn\n"
    "    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: "
    "concurrency}\n"
    "  - key: warm\n"
    "    rate_limit: {unit: second, requests_per_unit: 100, algorithm: "
    "token_bucket, warmup: 10s}\n";

static weir_code settle_req(world *w, const weir_descriptor *d, size_t n, uint64_t est,
                            uint64_t cost, weir_descriptor_status *st)
{
    weir_request req = {"llm", 3, d, n, est, 0};
    outcome o = {0};
    assert_int_equal(weir_engine_settle(w->reader, &req, cost, 0, st, on_decided, &o), WEIR_OK);
    settle(w);
    assert_int_equal(o.calls, 1);
    return o.overall;
}

/* the fixed window's remaining (the first limit of "user") */
static uint64_t fixed_left(world *w)
{
    weir_entry e[] = {E("user", "ann")};
    weir_descriptor d = {e, 1, true, 0, NULL}; /* hits 0: a look */
    weir_descriptor_status st;
    decide(w, "llm", &d, 1, 0, 0, &st); /* denied when nothing is left */
    return st.remaining;
}

static void refund_and_overrun(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, rules);
    weir_entry e[] = {E("user", "ann")};
    weir_descriptor d = {e, 1, false, 0, NULL};
    weir_descriptor_status st;
    /* an estimate of 10, a true cost of 3: 7 back */
    assert_int_equal(decide(&w, "llm", &d, 1, 10, 0, &st), WEIR_CODE_OK);
    assert_int_equal(fixed_left(&w), 90);
    assert_int_equal(settle_req(&w, &d, 1, 10, 3, &st), WEIR_CODE_OK);
    assert_int_equal(st.code, WEIR_CODE_OK);
    assert_int_equal(fixed_left(&w), 97);
    /* an estimate of 10, a true cost of 40: 30 more */
    assert_int_equal(decide(&w, "llm", &d, 1, 10, 0, &st), WEIR_CODE_OK);
    assert_int_equal(settle_req(&w, &d, 1, 10, 40, &st), WEIR_CODE_OK);
    assert_int_equal(fixed_left(&w), 57);
    /* an overrun past the limit fills it, and the next request waits */
    assert_int_equal(decide(&w, "llm", &d, 1, 5, 0, &st), WEIR_CODE_OK);
    assert_int_equal(settle_req(&w, &d, 1, 5, 5000, &st), WEIR_CODE_OK);
    assert_int_equal(st.remaining, 0);
    assert_int_equal(decide(&w, "llm", &d, 1, 1, 0, &st), WEIR_CODE_OVER_LIMIT);
    /* the true cost equal to the estimate changes nothing */
    assert_int_equal(settle_req(&w, &d, 1, 4, 4, &st), WEIR_CODE_OK);
    assert_int_equal(fixed_left(&w), 0);
    close_world(&w);
}

static void what_stays(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, rules);
    weir_descriptor_status st[3];
    /* a descriptor with hits of its own keeps them */
    weir_entry u[] = {E("user", "bob")};
    weir_descriptor own = {u, 1, true, 10, NULL};
    assert_int_equal(decide(&w, "llm", &own, 1, 0, 0, st), WEIR_CODE_OK);
    assert_int_equal(settle_req(&w, &own, 1, 10, 1, st), WEIR_CODE_OK);
    assert_int_equal(st[0].remaining, 90);
    /* a concurrency limit's lease stays held; a warm-up is not touched */
    weir_entry c[] = {E("conn", "c")}, wm[] = {E("warm", "x")};
    weir_descriptor both[2] = {{c, 1, false, 0, NULL}, {wm, 1, false, 0, NULL}};
    assert_int_equal(decide(&w, "llm", both, 2, 1, 0, st), WEIR_CODE_OK);
    uint64_t warm_left = st[1].remaining;
    assert_int_equal(settle_req(&w, both, 2, 1, 0, st), WEIR_CODE_OK);
    assert_int_equal(st[0].remaining, 4);
    assert_int_equal(st[1].remaining, warm_left);
    close_world(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(refund_and_overrun),
        cmocka_unit_test(what_stays),
    };
    int failed = cmocka_run_group_tests_name("memory store", tests, world_use_memory, NULL);
    world_deferred_opts.shared_keys = true;
    failed +=
        cmocka_run_group_tests_name("deferred store, stable keys", tests, world_use_deferred, NULL);
    return failed;
}
