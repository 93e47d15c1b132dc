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

#include "algo_support.h"
#include "weir/weir.h"

#define S 1000000 /* one second in microseconds */

static weir_limit compile(weir_algorithm a, uint64_t limit, int64_t window_us, uint64_t burst)
{
    weir_limit_spec spec = {.algorithm = a, .limit = limit, .window_us = window_us, .burst = burst};
    weir_limit lim;
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_OK);
    return lim;
}

static void token_bucket_burst_then_refill(void **unused)
{
    (void)unused;
    weir_limit lim = compile(WEIR_ALGO_TOKEN_BUCKET, 10, S, 0); /* 10/s, burst 10 */
    uint64_t st[2] = {0, 0};
    for (int i = 0; i < 10; i++) {
        weir_result r = algo_step(&lim, st, 0, 1);
        assert_true(r.allowed);
        assert_int_equal(r.remaining, 9 - i);
        assert_int_equal(r.limit, 10);
    }
    weir_result r = algo_step(&lim, st, 0, 1);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_us, 100000); /* one token per 100 ms */
    assert_int_equal(r.reset_after_us, S);
    r = algo_step(&lim, st, 99999, 1);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_us, 1);
    r = algo_step(&lim, st, 100000, 1);
    assert_true(r.allowed);
    assert_int_equal(r.remaining, 0);
}

static void token_bucket_cost_and_never(void **unused)
{
    (void)unused;
    weir_limit lim = compile(WEIR_ALGO_TOKEN_BUCKET, 5, S, 0);
    uint64_t st[2] = {0, 0};
    weir_result r = algo_step(&lim, st, 0, 6);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_us, WEIR_NEVER);
    r = algo_step(&lim, st, 0, 5);
    assert_true(r.allowed);
    assert_int_equal(r.remaining, 0);
    r = algo_step(&lim, st, 0, 0); /* peek: would 1 fit? */
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_us, 200000);
    r = algo_step(&lim, st, 200000, 0);
    assert_true(r.allowed);
    assert_int_equal(r.remaining, 1);
}

static void token_bucket_clock_backwards(void **unused)
{
    (void)unused;
    weir_limit lim = compile(WEIR_ALGO_TOKEN_BUCKET, 1, S, 0);
    uint64_t st[2] = {0, 0};
    assert_true(algo_step(&lim, st, 10 * S, 1).allowed);
    weir_result r = algo_step(&lim, st, 5 * S, 1); /* back 5 s: no refill */
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_us, 6 * S); /* relative to the caller's clock */
    assert_true(algo_step(&lim, st, 11 * S, 1).allowed);
}

static void leaky_policer_is_nginx_strict(void **unused)
{
    (void)unused;
    /* NGINX rate=10r/s, burst=0: one request per 100 ms */
    weir_limit lim = compile(WEIR_ALGO_LEAKY_BUCKET, 10, S, 0);
    uint64_t st[2] = {0, 0};
    assert_true(algo_step(&lim, st, 0, 1).allowed);
    weir_result r = algo_step(&lim, st, 50000, 1);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_us, 50000);
    assert_true(algo_step(&lim, st, 100000, 1).allowed);
}

static void shaper_delays_then_rejects(void **unused)
{
    (void)unused;
    /* 1 r/s, queue of 3: 0 s, 1 s, 2 s of delay, then rejected */
    weir_limit lim = compile(WEIR_ALGO_LEAKY_SHAPER, 1, S, 3);
    uint64_t st[2] = {0, 0};
    for (int i = 0; i < 3; i++) {
        weir_result r = algo_step(&lim, st, 0, 1);
        assert_true(r.allowed);
        assert_int_equal(r.delay_us, (int64_t)i * S);
    }
    weir_result r = algo_step(&lim, st, 0, 1);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_us, S);
}

static void ban_and_bad_specs(void **unused)
{
    (void)unused;
    weir_limit lim = compile(WEIR_ALGO_TOKEN_BUCKET, 0, S, 0);
    uint64_t st[2] = {0, 0};
    weir_result r = algo_step(&lim, st, 0, 1);
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

/* allowed, remaining, retry_after_us, reset_after_us, delay_us */
#define EXPECT_DELAY(res, ok, rem, retry, reset, delay) \
    do {                                                \
        weir_result r_ = (res);                         \
        assert_int_equal(r_.allowed, (ok));             \
        assert_int_equal(r_.remaining, (rem));          \
        assert_int_equal(r_.retry_after_us, (retry));   \
        assert_int_equal(r_.reset_after_us, (reset));   \
        assert_int_equal(r_.delay_us, (delay));         \
        assert_int_equal(r_.lease, 0);                  \
    } while (0)

static void token_bucket_exact_refill(void **unused)
{
    (void)unused;
    /* 7 per 30 s: a token every 4285714.28... us, kept exact (no drift) */
    weir_limit lim = compile(WEIR_ALGO_TOKEN_BUCKET, 7, 30 * S, 0);
    assert_int_equal(lim.unit, 30 * S);
    assert_int_equal(lim.rate, 7);
    uint64_t st[2] = {0, 0};
    EXPECT_DELAY(algo_step(&lim, st, 0, 7), true, 0, 0, 30 * S, 0);
    EXPECT_DELAY(algo_step(&lim, st, 0, 1), false, 0, 4285715, 30 * S, 0);
    EXPECT_DELAY(algo_step(&lim, st, 4285714, 1), false, 0, 1, 25714286, 0);
    EXPECT_DELAY(algo_step(&lim, st, 4285715, 1), true, 0, 0, 30 * S, 0);
    /* back to full exactly one window after the last charge */
    EXPECT_DELAY(algo_step(&lim, st, 4285715 + 30 * S - 1, 0), true, 6, 0, 1, 0);
    EXPECT_DELAY(algo_step(&lim, st, 4285715 + 30 * S, 7), true, 0, 0, 30 * S, 0);

    /* 100 per 5 min: a token every 3 s */
    lim = compile(WEIR_ALGO_TOKEN_BUCKET, 100, 300 * S, 0);
    memset(st, 0, sizeof(st));
    EXPECT_DELAY(algo_step(&lim, st, 0, 100), true, 0, 0, 300 * S, 0);
    EXPECT_DELAY(algo_step(&lim, st, 0, 1), false, 0, 3 * S, 300 * S, 0);
    EXPECT_DELAY(algo_step(&lim, st, 150 * S, 51), false, 50, 3 * S, 150 * S, 0);
    EXPECT_DELAY(algo_step(&lim, st, 150 * S, 50), true, 0, 0, 300 * S, 0);
}

static void token_bucket_limit_one_and_huge_periods(void **unused)
{
    (void)unused;
    weir_limit lim = compile(WEIR_ALGO_TOKEN_BUCKET, 1, WEIR_MAX_WINDOW_US, 0);
    uint64_t st[2] = {0, 0};
    EXPECT_DELAY(algo_step(&lim, st, 0, 1), true, 0, 0, WEIR_MAX_WINDOW_US, 0);
    EXPECT_DELAY(algo_step(&lim, st, 0, 2), false, 0, WEIR_NEVER, WEIR_MAX_WINDOW_US, 0);
    EXPECT_DELAY(algo_step(&lim, st, WEIR_MAX_WINDOW_US - 1, 1), false, 0, 1, 1, 0);
    EXPECT_DELAY(algo_step(&lim, st, WEIR_MAX_WINDOW_US, 1), true, 0, 0, WEIR_MAX_WINDOW_US, 0);

    /* the largest limit: gcd(2^32 - 1, 10^6) = 5 */
    lim = compile(WEIR_ALGO_TOKEN_BUCKET, WEIR_MAX_LIMIT, S, 0);
    assert_int_equal(lim.unit, 200000);
    assert_int_equal(lim.rate, 858993459);
    memset(st, 0, sizeof(st));
    EXPECT_DELAY(algo_step(&lim, st, 0, WEIR_MAX_LIMIT), true, 0, 0, S, 0);
    EXPECT_DELAY(algo_step(&lim, st, 0, 1), false, 0, 1, S, 0);
    EXPECT_DELAY(algo_step(&lim, st, 1, 4294), true, 0, 0, S, 0);

    /* the burst may not make burst * unit overflow 63 bits */
    weir_limit_spec spec = {.algorithm = WEIR_ALGO_TOKEN_BUCKET,
                            .limit = 1,
                            .window_us = WEIR_MAX_WINDOW_US,
                            .burst = 2922};
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_OK);
    spec.burst = 2923;
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_ERANGE);
}

static void token_bucket_peek_and_stall(void **unused)
{
    (void)unused;
    weir_limit lim = compile(WEIR_ALGO_TOKEN_BUCKET, 2, S, 0);
    uint64_t st[2] = {0, 0};
    const uint64_t zero[2] = {0, 0};
    EXPECT_DELAY(algo_step(&lim, st, 0, 0), true, 2, 0, 0, 0);
    EXPECT_DELAY(algo_step(&lim, st, 9 * S, 0), true, 2, 0, 0, 0);
    assert_memory_equal(st, zero, sizeof(st));
    EXPECT_DELAY(algo_step(&lim, st, 5 * S, 2), true, 0, 0, S, 0);
    uint64_t saved[2];
    memcpy(saved, st, sizeof(st));
    for (int i = 0; i < 1000; i++)
        EXPECT_DELAY(algo_step(&lim, st, 5 * S, i % 2), false, 0, 500000, S, 0);
    assert_memory_equal(st, saved, sizeof(st));
    weir_result r;
    assert_int_equal(weir_check(&lim, st, 5 * S + 500000, 1, &r), WEIR_OK);
    EXPECT_DELAY(r, true, 0, 0, S, 0);
    assert_memory_equal(st, saved, sizeof(st));
}

static void leaky_policer_with_burst(void **unused)
{
    (void)unused;
    weir_limit lim = compile(WEIR_ALGO_LEAKY_BUCKET, 10, S, 3);
    uint64_t st[2] = {0, 0};
    EXPECT_DELAY(algo_step(&lim, st, 0, 1), true, 2, 0, 100000, 0);
    EXPECT_DELAY(algo_step(&lim, st, 0, 2), true, 0, 0, 300000, 0);
    EXPECT_DELAY(algo_step(&lim, st, 0, 1), false, 0, 100000, 300000, 0);
    EXPECT_DELAY(algo_step(&lim, st, 0, 4), false, 0, WEIR_NEVER, 300000, 0);
    EXPECT_DELAY(algo_step(&lim, st, 150000, 2), false, 1, 50000, 150000, 0);
    EXPECT_DELAY(algo_step(&lim, st, 200000, 2), true, 0, 0, 300000, 0);
}

static void shaper_costs_and_peeks(void **unused)
{
    (void)unused;
    weir_limit lim = compile(WEIR_ALGO_LEAKY_SHAPER, 1, S, 4);
    uint64_t st[2] = {0, 0};
    EXPECT_DELAY(algo_step(&lim, st, 0, 2), true, 2, 0, 2 * S, 0);
    EXPECT_DELAY(algo_step(&lim, st, 0, 0), true, 2, 0, 2 * S, 0); /* a peek waits for nothing */
    EXPECT_DELAY(algo_step(&lim, st, 0, 1), true, 1, 0, 3 * S, 2 * S);
    EXPECT_DELAY(algo_step(&lim, st, 500000, 1), true, 0, 0, 3500000, 2500000);
    EXPECT_DELAY(algo_step(&lim, st, 500000, 1), false, 0, 500000, 3500000, 0);
    EXPECT_DELAY(algo_step(&lim, st, 500000, 5), false, 0, WEIR_NEVER, 3500000, 0);
}

static void shaper_clock_backwards_keeps_the_spacing(void **unused)
{
    (void)unused;
    /* 1 r/s, queue of 3. A request that arrives "earlier" still proceeds
     * after the ones ahead of it: the delay counts from the caller's now. */
    weir_limit lim = compile(WEIR_ALGO_LEAKY_SHAPER, 1, S, 3);
    uint64_t st[2] = {0, 0};
    EXPECT_DELAY(algo_step(&lim, st, 10 * S, 1), true, 2, 0, S, 0);
    EXPECT_DELAY(algo_step(&lim, st, 5 * S, 1), true, 1, 0, 7 * S, 6 * S);  /* proceeds at 11 s */
    EXPECT_DELAY(algo_step(&lim, st, 7 * S, 1), true, 0, 0, 6 * S, 5 * S);  /* proceeds at 12 s */
    EXPECT_DELAY(algo_step(&lim, st, 5 * S, 1), false, 0, 6 * S, 8 * S, 0); /* room at 11 s */
    EXPECT_DELAY(algo_step(&lim, st, 11 * S, 1), true, 0, 0, 3 * S, 2 * S); /* proceeds at 13 s */
}

static void negative_time_is_time_zero(void **unused)
{
    (void)unused;
    weir_limit lim = compile(WEIR_ALGO_LEAKY_SHAPER, 1, S, 2);
    uint64_t st[2] = {0, 0};
    EXPECT_DELAY(algo_step(&lim, st, -500, 1), true, 1, 0, S + 500, 0);
    EXPECT_DELAY(algo_step(&lim, st, -500, 1), true, 0, 0, 2 * S + 500, S + 500);
    EXPECT_DELAY(algo_step(&lim, st, -500, 1), false, 0, S + 500, 2 * S + 500, 0);
    weir_result r;
    assert_int_equal(weir_check(&lim, st, S - 1, 1, &r), WEIR_OK);
    EXPECT_DELAY(r, false, 0, 1, S + 1, 0);
    assert_int_equal(weir_check(&lim, st, S, 1, &r), WEIR_OK);
    EXPECT_DELAY(r, true, 0, 0, 2 * S, S);
}

static void extreme_times(void **unused)
{
    (void)unused;
    const weir_algorithm algos[] = {WEIR_ALGO_TOKEN_BUCKET, WEIR_ALGO_LEAKY_BUCKET,
                                    WEIR_ALGO_LEAKY_SHAPER};
    for (size_t a = 0; a < 3; a++) {
        weir_limit lim = compile(algos[a], 3, S, 0);
        uint64_t st[2] = {0, 0};
        /* a clock stalled at INT64_MAX refills nothing */
        uint64_t admitted = 0;
        for (int i = 0; i < 10; i++) {
            weir_result r = algo_step(&lim, st, INT64_MAX - i % 2, 1);
            admitted += r.allowed;
            assert_true(r.retry_after_us >= 0 && r.reset_after_us >= 0 && r.delay_us >= 0);
        }
        assert_int_equal(admitted, lim.burst);
        /* from there back to 0: every wait saturates */
        weir_result r = algo_step(&lim, st, 0, 1);
        assert_false(r.allowed);
        assert_int_equal(r.retry_after_us, INT64_MAX);
        assert_int_equal(r.reset_after_us, INT64_MAX);
        assert_int_equal(algo_step(&lim, st, INT64_MIN, UINT64_MAX).retry_after_us, WEIR_NEVER);
    }
}

static void corrupt_state_is_einval(void **unused)
{
    (void)unused;
    weir_limit lim = compile(WEIR_ALGO_TOKEN_BUCKET, 10, S, 0); /* capacity 10 * 100000 */
    assert_int_equal(lim.capacity, 1000000);
    const int64_t bad[][2] = {{-1, 0}, {1000001, 0}, {0, -1}, {INT64_MIN, INT64_MIN}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int64_t st[2] = {bad[i][0], bad[i][1]};
        weir_result r;
        memset(&r, 0x5a, sizeof(r));
        weir_result saved = r;
        assert_int_equal(weir_step(&lim, st, 0, 1, &r), WEIR_EINVAL);
        assert_int_equal(weir_check(&lim, st, 0, 0, &r), WEIR_EINVAL);
        assert_memory_equal(&r, &saved, sizeof(r));
        assert_int_equal(st[0], bad[i][0]);
    }
    /* a full bucket charged far in the future is valid */
    int64_t st[2] = {1000000, INT64_MAX};
    weir_result r;
    assert_int_equal(weir_step(&lim, st, 0, 1, &r), WEIR_OK);
    assert_false(r.allowed);
    assert_int_equal(weir_release(&lim, st, 0, 1, &r), WEIR_EALGO);
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
        cmocka_unit_test(token_bucket_exact_refill),
        cmocka_unit_test(token_bucket_limit_one_and_huge_periods),
        cmocka_unit_test(token_bucket_peek_and_stall),
        cmocka_unit_test(leaky_policer_with_burst),
        cmocka_unit_test(shaper_costs_and_peeks),
        cmocka_unit_test(shaper_clock_backwards_keeps_the_spacing),
        cmocka_unit_test(negative_time_is_time_zero),
        cmocka_unit_test(extreme_times),
        cmocka_unit_test(corrupt_state_is_einval),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
