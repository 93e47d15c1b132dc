/*
 * test_gcra.c - exact verdicts of GCRA on hand-built traces.
 *
 * The emission interval is T = ceil(window / limit) in nanoseconds; with
 * limit 10 per second T is 100 ms, so the numbers below can be checked by
 * hand. Durations in results are whole microseconds, rounded up.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "algo_support.h"
#include "weir/weir.h"

#define S ((int64_t)1000000) /* one second in microseconds */
#define DAY (86400 * S)
#define YEAR (365 * DAY)

static weir_limit compile(uint64_t limit, int64_t window_us, uint64_t burst)
{
    weir_limit_spec spec = {
        .algorithm = WEIR_ALGO_GCRA, .limit = limit, .window_us = window_us, .burst = burst};
    weir_limit lim;
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_OK);
    assert_int_equal(weir_state_size(&lim), WEIR_STATE_FIXED_BYTES);
    return lim;
}

static void default_burst_spaces_requests(void **unused)
{
    (void)unused;
    weir_limit lim = compile(10, S, 0); /* T = 100 ms, burst 1 */
    assert_int_equal(lim.burst, 1);
    uint64_t st[2] = {0, 0};
    weir_result r = algo_step(&lim, st, 0, 1);
    EXPECT(r, true, 0, 0, 100000);
    assert_int_equal(r.limit, 1);
    EXPECT(algo_step(&lim, st, 0, 1), false, 0, 100000, 100000);
    EXPECT(algo_step(&lim, st, 99999, 1), false, 0, 1, 1);
    EXPECT(algo_step(&lim, st, 100000, 1), true, 0, 0, 100000);
    EXPECT(algo_check(&lim, st, 150000, 0), false, 0, 50000, 50000);
    EXPECT(algo_check(&lim, st, 200000, 0), true, 1, 0, 0);
    EXPECT(algo_check(&lim, st, 5 * S, 1), true, 0, 0, 100000);
}

static void burst_then_spacing(void **unused)
{
    (void)unused;
    weir_limit lim = compile(10, S, 5);
    uint64_t st[2] = {0, 0};
    for (int i = 0; i < 5; i++) {
        weir_result r = algo_step(&lim, st, 0, 1);
        EXPECT(r, true, 4 - i, 0, 100000 * (i + 1));
        assert_int_equal(r.limit, 5);
    }
    EXPECT(algo_step(&lim, st, 0, 1), false, 0, 100000, 500000);
    EXPECT(algo_step(&lim, st, 0, 6), false, 0, WEIR_NEVER, 500000);
    /* 250 ms later the backlog is 250 ms: two more fit, a third does not */
    EXPECT(algo_step(&lim, st, 250000, 2), true, 0, 0, 450000);
    EXPECT(algo_step(&lim, st, 250000, 1), false, 0, 50000, 450000);
    /* back at rest at 700 ms */
    EXPECT(algo_check(&lim, st, 699999, 0), true, 4, 0, 1);
    EXPECT(algo_step(&lim, st, 750000, 3), true, 2, 0, 300000);
}

static void limit_one(void **unused)
{
    (void)unused;
    weir_limit lim = compile(1, S, 0);
    uint64_t st[2] = {0, 0};
    EXPECT(algo_step(&lim, st, 0, 1), true, 0, 0, S);
    EXPECT(algo_step(&lim, st, 500000, 1), false, 0, 500000, 500000);
    EXPECT(algo_step(&lim, st, S - 1, 1), false, 0, 1, 1);
    EXPECT(algo_step(&lim, st, S, 1), true, 0, 0, S);
    EXPECT(algo_step(&lim, st, 3 * S, 1), true, 0, 0, S);
}

static void cost_above_burst_is_never(void **unused)
{
    (void)unused;
    weir_limit lim = compile(5, S, 0); /* burst 1: a cost of 2 never fits */
    uint64_t st[2] = {0, 0};
    EXPECT(algo_step(&lim, st, 0, 2), false, 1, WEIR_NEVER, 0);
    EXPECT(algo_step(&lim, st, 0, UINT64_MAX), false, 1, WEIR_NEVER, 0);
    assert_int_equal(st[0], 0);
    assert_int_equal(st[1], 0);

    lim = compile(5, S, 5);
    EXPECT(algo_step(&lim, st, 0, 6), false, 5, WEIR_NEVER, 0);
    EXPECT(algo_step(&lim, st, 0, 5), true, 0, 0, S);
    EXPECT(algo_step(&lim, st, 0, 6), false, 0, WEIR_NEVER, S);
    /* 5 units need the whole bucket: 1 s */
    EXPECT(algo_step(&lim, st, 0, 5), false, 0, S, S);
}

static void cost_above_one(void **unused)
{
    (void)unused;
    weir_limit lim = compile(4, S, 4); /* T = 250 ms */
    uint64_t st[2] = {0, 0};
    EXPECT(algo_step(&lim, st, 0, 3), true, 1, 0, 750000);
    EXPECT(algo_step(&lim, st, 0, 2), false, 1, 250000, 750000);
    EXPECT(algo_step(&lim, st, 250000, 2), true, 0, 0, 1000000);
    EXPECT(algo_step(&lim, st, 250000, 4), false, 0, S, S);
}

static void peek_changes_nothing(void **unused)
{
    (void)unused;
    weir_limit lim = compile(2, S, 2); /* T = 500 ms */
    uint64_t st[2] = {0, 0};
    const uint64_t zero[2] = {0, 0};
    EXPECT(algo_step(&lim, st, 0, 0), true, 2, 0, 0);
    assert_memory_equal(st, zero, sizeof(st));
    EXPECT(algo_step(&lim, st, 0, 1), true, 1, 0, 500000);
    uint64_t saved[2];
    memcpy(saved, st, sizeof(st));
    EXPECT(algo_step(&lim, st, 0, 0), true, 1, 0, 500000);
    assert_memory_equal(st, saved, sizeof(st));
    EXPECT(algo_step(&lim, st, 0, 1), true, 0, 0, S);
    memcpy(saved, st, sizeof(st));
    EXPECT(algo_step(&lim, st, 0, 0), false, 0, 500000, S);
    EXPECT(algo_step(&lim, st, 400000, 0), false, 0, 100000, 600000);
    assert_memory_equal(st, saved, sizeof(st));
    EXPECT(algo_step(&lim, st, 500000, 0), true, 1, 0, 500000);
}

static void now_zero_and_fresh_state(void **unused)
{
    (void)unused;
    weir_limit lim = compile(3, 3, 0); /* T = 1 us */
    uint64_t st[2] = {0, 0};
    EXPECT(algo_step(&lim, st, 0, 1), true, 0, 0, 1);
    EXPECT(algo_step(&lim, st, 0, 1), false, 0, 1, 1);
    EXPECT(algo_step(&lim, st, 1, 1), true, 0, 0, 1);
    EXPECT(algo_step(&lim, st, 2, 1), true, 0, 0, 1);
}

static void sub_microsecond_interval(void **unused)
{
    (void)unused;
    /* 3 per microsecond: T = 334 ns (rounded up, never more than the rate) */
    weir_limit lim = compile(3, 1, 3);
    assert_int_equal(lim.unit, 334);
    uint64_t st[2] = {0, 0};
    EXPECT(algo_step(&lim, st, 0, 3), true, 0, 0, 2);
    EXPECT(algo_step(&lim, st, 0, 1), false, 0, 1, 2);
    EXPECT(algo_step(&lim, st, 1, 1), true, 1, 0, 1);
    EXPECT(algo_step(&lim, st, 1, 1), true, 0, 0, 1);
    EXPECT(algo_step(&lim, st, 1, 1), false, 0, 1, 1);
}

static void huge_periods(void **unused)
{
    (void)unused;
    /* one request per 100 years, the longest window there is */
    weir_limit lim = compile(1, WEIR_MAX_WINDOW_US, 0);
    uint64_t st[2] = {0, 0};
    EXPECT(algo_step(&lim, st, 0, 1), true, 0, 0, WEIR_MAX_WINDOW_US);
    EXPECT(algo_step(&lim, st, 1, 1), false, 0, WEIR_MAX_WINDOW_US - 1, WEIR_MAX_WINDOW_US - 1);
    EXPECT(algo_step(&lim, st, WEIR_MAX_WINDOW_US - 1, 1), false, 0, 1, 1);
    EXPECT(algo_step(&lim, st, WEIR_MAX_WINDOW_US, 1), true, 0, 0, WEIR_MAX_WINDOW_US);

    /* burst 2 of those still fits 63 bits of nanoseconds; 3 does not */
    lim = compile(1, WEIR_MAX_WINDOW_US, 2);
    memset(st, 0, sizeof(st));
    EXPECT(algo_step(&lim, st, 0, 2), true, 0, 0, 2 * WEIR_MAX_WINDOW_US);
    weir_limit_spec spec = {
        .algorithm = WEIR_ALGO_GCRA, .limit = 1, .window_us = WEIR_MAX_WINDOW_US, .burst = 3};
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_ERANGE);

    /* the highest rate over the longest window: T = 734757633 ns */
    lim = compile(WEIR_MAX_LIMIT, WEIR_MAX_WINDOW_US, 0);
    assert_int_equal(lim.unit, 734757633);
    memset(st, 0, sizeof(st));
    EXPECT(algo_step(&lim, st, 0, 1), true, 0, 0, 734758);
    EXPECT(algo_step(&lim, st, 734757, 1), false, 0, 1, 1);
    EXPECT(algo_step(&lim, st, 734758, 1), true, 0, 0, 734758);

    /* 365 per year: one a day */
    lim = compile(365, YEAR, 0);
    memset(st, 0, sizeof(st));
    EXPECT(algo_step(&lim, st, 10 * YEAR, 1), true, 0, 0, DAY);
    EXPECT(algo_step(&lim, st, 10 * YEAR + DAY - 1, 1), false, 0, 1, 1);
    EXPECT(algo_step(&lim, st, 10 * YEAR + DAY, 1), true, 0, 0, DAY);
}

static void arbitrary_windows(void **unused)
{
    (void)unused;
    /* 7 per 30 s: T = 4285714286 ns, 4285715 us once rounded up */
    weir_limit lim = compile(7, 30 * S, 0);
    uint64_t st[2] = {0, 0};
    EXPECT(algo_step(&lim, st, 0, 1), true, 0, 0, 4285715);
    EXPECT(algo_step(&lim, st, 4285714, 1), false, 0, 1, 1);
    EXPECT(algo_step(&lim, st, 4285715, 1), true, 0, 0, 4285715);
    /* admitted at 4285715 us, so the next TAT is 8571429286 ns */
    EXPECT(algo_step(&lim, st, 8571429, 1), false, 0, 1, 1);
    EXPECT(algo_step(&lim, st, 8571430, 1), true, 0, 0, 4285715);
    /* a whole burst at once: 7 T = 30000000002 ns, rounded up once */
    lim = compile(7, 30 * S, 7);
    memset(st, 0, sizeof(st));
    EXPECT(algo_step(&lim, st, 0, 7), true, 0, 0, 30000001);
    EXPECT(algo_step(&lim, st, 30 * S, 7), false, 6, 1, 1);
    EXPECT(algo_step(&lim, st, 30 * S, 6), true, 0, 0, 25714286);

    /* 100 per 5 min with the whole budget as burst: T = 3 s */
    lim = compile(100, 300 * S, 100);
    memset(st, 0, sizeof(st));
    for (int i = 0; i < 100; i++)
        EXPECT(algo_step(&lim, st, 0, 1), true, 99 - i, 0, 3 * S * (i + 1));
    EXPECT(algo_step(&lim, st, 0, 1), false, 0, 3 * S, 300 * S);
    EXPECT(algo_step(&lim, st, 3 * S - 1, 1), false, 0, 1, 300 * S - 3 * S + 1);
    EXPECT(algo_step(&lim, st, 3 * S, 1), true, 0, 0, 300 * S);
}

static void stalled_clock(void **unused)
{
    (void)unused;
    weir_limit lim = compile(3, S, 3); /* T = 333333334 ns */
    uint64_t st[2] = {0, 0};
    for (int i = 0; i < 3; i++)
        assert_true(algo_step(&lim, st, 7 * S, 1).allowed);
    for (int i = 0; i < 1000; i++)
        EXPECT(algo_step(&lim, st, 7 * S, 1), false, 0, 333334, 1000001);
    EXPECT(algo_step(&lim, st, 7 * S + 333334, 1), true, 0, 0, 1000000);
}

static void clock_backwards(void **unused)
{
    (void)unused;
    weir_limit lim = compile(1, S, 0);
    uint64_t st[2] = {0, 0};
    EXPECT(algo_step(&lim, st, 10 * S, 1), true, 0, 0, S);
    /* 5 s earlier the next slot (11 s) is 6 s away on the caller's clock */
    EXPECT(algo_step(&lim, st, 5 * S, 1), false, 0, 6 * S, 6 * S);
    EXPECT(algo_step(&lim, st, 0, 1), false, 0, 11 * S, 11 * S);
    EXPECT(algo_step(&lim, st, 11 * S, 1), true, 0, 0, S);

    /* a burst does not come back when the clock runs backwards */
    lim = compile(1, S, 2);
    memset(st, 0, sizeof(st));
    EXPECT(algo_step(&lim, st, 10 * S, 1), true, 1, 0, S);
    EXPECT(algo_step(&lim, st, 9 * S, 1), false, 0, S, 2 * S);
    EXPECT(algo_step(&lim, st, 10 * S, 1), true, 0, 0, 2 * S);
    EXPECT(algo_step(&lim, st, 5 * S, 0), false, 0, 6 * S, 7 * S);
}

static void negative_time_is_time_zero(void **unused)
{
    (void)unused;
    weir_limit lim = compile(1, S, 0);
    uint64_t st[2] = {0, 0};
    /* admitted at time 0; durations are still counted from the caller's now */
    EXPECT(algo_step(&lim, st, -500, 1), true, 0, 0, S + 500);
    EXPECT(algo_step(&lim, st, -500, 1), false, 0, S + 500, S + 500);
    EXPECT(algo_check(&lim, st, S - 1, 1), false, 0, 1, 1);
    EXPECT(algo_check(&lim, st, S, 1), true, 0, 0, S);
    EXPECT(algo_step(&lim, st, INT64_MIN, 1), false, 0, INT64_MAX, INT64_MAX);
}

static void extreme_times(void **unused)
{
    (void)unused;
    weir_limit lim = compile(1, S, 0);
    uint64_t st[2] = {0, 0};
    /* Times past INT64_MAX ns saturate: the clock looks stalled there, so
     * at most one request (the burst) may ever be admitted at them. */
    int admitted = 0;
    for (int i = 0; i < 10; i++) {
        weir_result r = algo_step(&lim, st, INT64_MAX - i % 2, 1);
        admitted += r.allowed;
        assert_true(r.allowed || r.retry_after_us == WEIR_NEVER || r.retry_after_us > 0);
    }
    assert_true(admitted <= 1);

    /* from late in the range back to 0: a huge but exact wait */
    memset(st, 0, sizeof(st));
    assert_true(algo_step(&lim, st, 9000000000000000, 1).allowed);
    EXPECT(algo_step(&lim, st, 0, 1), false, 0, 9000000001000000, 9000000001000000);
    EXPECT(algo_step(&lim, st, 0, UINT64_MAX), false, 0, WEIR_NEVER, 9000000001000000);
}

static void corrupt_state_is_einval(void **unused)
{
    (void)unused;
    weir_limit lim = compile(10, S, 0);
    int64_t st[2] = {-1, 0};
    weir_result r;
    memset(&r, 0x5a, sizeof(r));
    weir_result saved = r;
    assert_int_equal(weir_step(&lim, st, 0, 1, &r), WEIR_EINVAL);
    assert_int_equal(weir_check(&lim, st, 0, 1, &r), WEIR_EINVAL);
    assert_memory_equal(&r, &saved, sizeof(r));
    st[0] = INT64_MIN;
    assert_int_equal(weir_step(&lim, st, 0, 0, &r), WEIR_EINVAL);
    /* a TAT far in the future is valid: the key is just busy */
    st[0] = INT64_MAX;
    assert_int_equal(weir_step(&lim, st, 0, 1, &r), WEIR_OK);
    assert_false(r.allowed);
    assert_true(r.retry_after_us == WEIR_NEVER || r.retry_after_us > 0);
    assert_int_equal(weir_release(&lim, st, 0, 1, &r), WEIR_EALGO);
}

static void compile_caps(void **unused)
{
    (void)unused;
    weir_limit lim;
    weir_limit_spec spec = {.algorithm = WEIR_ALGO_GCRA, .limit = 10, .window_us = S};
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_OK);
    assert_int_equal(lim.unit, 100000000);
    assert_int_equal(lim.capacity, 100000000);
    spec.burst = WEIR_MAX_LIMIT;
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_OK);
    spec.burst = (uint64_t)WEIR_MAX_LIMIT + 1;
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_ERANGE);
    /* burst * T past 63 bits of nanoseconds */
    spec.limit = 1;
    spec.window_us = 10 * YEAR;
    spec.burst = 30;
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_ERANGE);
    spec.burst = 29;
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_OK);
    /* a ban */
    spec.limit = 0;
    spec.burst = 0;
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_OK);
    uint64_t st[2] = {0, 0};
    EXPECT(algo_step(&lim, st, 0, 0), false, 0, WEIR_NEVER, 0);
    assert_int_equal(algo_step(&lim, st, 0, 0).limit, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(default_burst_spaces_requests),
        cmocka_unit_test(burst_then_spacing),
        cmocka_unit_test(limit_one),
        cmocka_unit_test(cost_above_burst_is_never),
        cmocka_unit_test(cost_above_one),
        cmocka_unit_test(peek_changes_nothing),
        cmocka_unit_test(now_zero_and_fresh_state),
        cmocka_unit_test(sub_microsecond_interval),
        cmocka_unit_test(huge_periods),
        cmocka_unit_test(arbitrary_windows),
        cmocka_unit_test(stalled_clock),
        cmocka_unit_test(clock_backwards),
        cmocka_unit_test(negative_time_is_time_zero),
        cmocka_unit_test(extreme_times),
        cmocka_unit_test(corrupt_state_is_einval),
        cmocka_unit_test(compile_caps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
