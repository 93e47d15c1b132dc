/*
 * test_bucket.c - exact verdicts of the token bucket, the leaky bucket
 * policer and the leaky bucket shaper on hand-built traces.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "weir/weir.h"

#define S 1000000 /* one second in microseconds */

static weir_limit compile(weir_algorithm a, uint64_t limit, int64_t window_us, uint64_t burst)
{
    weir_limit_spec spec = {.algorithm = a, .limit = limit, .window_us = window_us, .burst = burst};
    weir_limit lim;
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_OK);
    return lim;
}

static weir_result step(const weir_limit *lim, void *state, int64_t now, uint64_t hits)
{
    weir_result r;
    assert_int_equal(weir_step(lim, state, now, hits, &r), WEIR_OK);
    return r;
}

static void token_bucket_burst_then_refill(void **unused)
{
    (void)unused;
    weir_limit lim = compile(WEIR_ALGO_TOKEN_BUCKET, 10, S, 0); /* 10/s, burst 10 */
    uint64_t st[2] = {0, 0};
    for (int i = 0; i < 10; i++) {
        weir_result r = step(&lim, st, 0, 1);
        assert_true(r.allowed);
        assert_int_equal(r.remaining, 9 - i);
        assert_int_equal(r.limit, 10);
    }
    weir_result r = step(&lim, st, 0, 1);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_us, 100000); /* one token per 100 ms */
    assert_int_equal(r.reset_after_us, S);
    r = step(&lim, st, 99999, 1);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_us, 1);
    r = step(&lim, st, 100000, 1);
    assert_true(r.allowed);
    assert_int_equal(r.remaining, 0);
}

static void token_bucket_cost_and_never(void **unused)
{
    (void)unused;
    weir_limit lim = compile(WEIR_ALGO_TOKEN_BUCKET, 5, S, 0);
    uint64_t st[2] = {0, 0};
    weir_result r = step(&lim, st, 0, 6);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_us, WEIR_NEVER);
    r = step(&lim, st, 0, 5);
    assert_true(r.allowed);
    assert_int_equal(r.remaining, 0);
    r = step(&lim, st, 0, 0); /* peek: would 1 fit? */
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_us, 200000);
    r = step(&lim, st, 200000, 0);
    assert_true(r.allowed);
    assert_int_equal(r.remaining, 1);
}

static void token_bucket_clock_backwards(void **unused)
{
    (void)unused;
    weir_limit lim = compile(WEIR_ALGO_TOKEN_BUCKET, 1, S, 0);
    uint64_t st[2] = {0, 0};
    assert_true(step(&lim, st, 10 * S, 1).allowed);
    weir_result r = step(&lim, st, 5 * S, 1); /* back 5 s: no refill */
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_us, 6 * S); /* relative to the caller's clock */
    assert_true(step(&lim, st, 11 * S, 1).allowed);
}

static void leaky_policer_is_nginx_strict(void **unused)
{
    (void)unused;
    /* NGINX rate=10r/s, burst=0: one request per 100 ms */
    weir_limit lim = compile(WEIR_ALGO_LEAKY_BUCKET, 10, S, 0);
    uint64_t st[2] = {0, 0};
    assert_true(step(&lim, st, 0, 1).allowed);
    weir_result r = step(&lim, st, 50000, 1);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_us, 50000);
    assert_true(step(&lim, st, 100000, 1).allowed);
}

static void shaper_delays_then_rejects(void **unused)
{
    (void)unused;
    /* 1 r/s, queue of 3: 0 s, 1 s, 2 s of delay, then rejected */
    weir_limit lim = compile(WEIR_ALGO_LEAKY_SHAPER, 1, S, 3);
    uint64_t st[2] = {0, 0};
    for (int i = 0; i < 3; i++) {
        weir_result r = step(&lim, st, 0, 1);
        assert_true(r.allowed);
        assert_int_equal(r.delay_us, (int64_t)i * S);
    }
    weir_result r = step(&lim, st, 0, 1);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_us, S);
}

static void ban_and_bad_specs(void **unused)
{
    (void)unused;
    weir_limit lim = compile(WEIR_ALGO_TOKEN_BUCKET, 0, S, 0);
    uint64_t st[2] = {0, 0};
    weir_result r = step(&lim, st, 0, 1);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_us, WEIR_NEVER);

    weir_limit_spec bad = {.algorithm = WEIR_ALGO_TOKEN_BUCKET, .limit = 1, .window_us = 0};
    assert_int_equal(weir_limit_compile(&bad, &lim), WEIR_EINVAL);
    bad.window_us = WEIR_MAX_WINDOW_US + 1;
    assert_int_equal(weir_limit_compile(&bad, &lim), WEIR_ERANGE);
    bad.window_us = S;
    bad.algorithm = (weir_algorithm)99;
    assert_int_equal(weir_limit_compile(&bad, &lim), WEIR_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(token_bucket_burst_then_refill),
        cmocka_unit_test(token_bucket_cost_and_never),
        cmocka_unit_test(token_bucket_clock_backwards),
        cmocka_unit_test(leaky_policer_is_nginx_strict),
        cmocka_unit_test(shaper_delays_then_rejects),
        cmocka_unit_test(ban_and_bad_specs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
