/*
 * test_fixed_window.c - exact verdicts of the fixed window counter on
 * hand-built traces. Windows are aligned to multiples of the window length
 * counted from time 0.
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

static weir_limit compile(uint64_t limit, int64_t window_us)
{
    weir_limit_spec spec = {
        .algorithm = WEIR_ALGO_FIXED_WINDOW, .limit = limit, .window_us = window_us};
    weir_limit lim;
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_OK);
    assert_int_equal(weir_state_size(&lim), WEIR_STATE_FIXED_BYTES);
    return lim;
}

static void counts_per_aligned_window(void **unused)
{
    (void)unused;
    weir_limit lim = compile(3, S);
    uint64_t st[2] = {0, 0};
    weir_result r = algo_step(&lim, st, 0, 1);
    EXPECT(r, true, 2, 0, S);
    assert_int_equal(r.limit, 3);
    EXPECT(algo_step(&lim, st, 400000, 1), true, 1, 0, 600000);
    EXPECT(algo_step(&lim, st, S - 1, 1), true, 0, 0, 1);
    EXPECT(algo_step(&lim, st, S - 1, 1), false, 0, 1, 1);
    /* a new window at 1 s */
    EXPECT(algo_step(&lim, st, S, 1), true, 2, 0, S);
    EXPECT(algo_check(&lim, st, 1500000, 0), true, 2, 0, 500000);
    EXPECT(algo_step(&lim, st, 1500000, 2), true, 0, 0, 500000);
    EXPECT(algo_step(&lim, st, 1500000, 1), false, 0, 500000, 500000);
    /* window 2 is skipped entirely; window 3 starts from zero */
    EXPECT(algo_check(&lim, st, 3200000, 0), true, 3, 0, 0);
    EXPECT(algo_step(&lim, st, 3200000, 3), true, 0, 0, 800000);
}

static void limit_one(void **unused)
{
    (void)unused;
    weir_limit lim = compile(1, S);
    uint64_t st[2] = {0, 0};
    EXPECT(algo_step(&lim, st, 0, 1), true, 0, 0, S);
    EXPECT(algo_step(&lim, st, 0, 1), false, 0, S, S);
    EXPECT(algo_step(&lim, st, S - 1, 1), false, 0, 1, 1);
    EXPECT(algo_step(&lim, st, S, 1), true, 0, 0, S);
    EXPECT(algo_step(&lim, st, 2 * S - 1, 0), false, 0, 1, 1);
}

static void costs(void **unused)
{
    (void)unused;
    weir_limit lim = compile(5, S);
    uint64_t st[2] = {0, 0};
    EXPECT(algo_step(&lim, st, 0, 6), false, 5, WEIR_NEVER, 0);
    EXPECT(algo_step(&lim, st, 0, UINT64_MAX), false, 5, WEIR_NEVER, 0);
    assert_int_equal(st[0], 0);
    assert_int_equal(st[1], 0);
    EXPECT(algo_step(&lim, st, 0, 4), true, 1, 0, S);
    /* a cost that fits the limit but not this window: wait for the next */
    EXPECT(algo_step(&lim, st, 250000, 2), false, 1, 750000, 750000);
    EXPECT(algo_step(&lim, st, 250000, 1), true, 0, 0, 750000);
    EXPECT(algo_step(&lim, st, 250000, 5), false, 0, 750000, 750000);
    EXPECT(algo_step(&lim, st, S, 5), true, 0, 0, S);
}

static void peek_changes_nothing(void **unused)
{
    (void)unused;
    weir_limit lim = compile(2, S);
    uint64_t st[2] = {0, 0};
    const uint64_t zero[2] = {0, 0};
    EXPECT(algo_step(&lim, st, 0, 0), true, 2, 0, 0);
    EXPECT(algo_step(&lim, st, 7 * S + 5, 0), true, 2, 0, 0);
    assert_memory_equal(st, zero, sizeof(st));
    EXPECT(algo_step(&lim, st, 7 * S + 5, 2), true, 0, 0, S - 5);
    uint64_t saved[2];
    memcpy(saved, st, sizeof(st));
    EXPECT(algo_step(&lim, st, 7 * S + 10, 0), false, 0, S - 10, S - 10);
    assert_memory_equal(st, saved, sizeof(st));
    EXPECT(algo_step(&lim, st, 8 * S, 0), true, 2, 0, 0);
    assert_memory_equal(st, saved, sizeof(st));
}

static void huge_windows(void **unused)
{
    (void)unused;
    weir_limit lim = compile(2, WEIR_MAX_WINDOW_US);
    uint64_t st[2] = {0, 0};
    EXPECT(algo_step(&lim, st, 0, 1), true, 1, 0, WEIR_MAX_WINDOW_US);
    EXPECT(algo_step(&lim, st, WEIR_MAX_WINDOW_US - 1, 1), true, 0, 0, 1);
    EXPECT(algo_step(&lim, st, WEIR_MAX_WINDOW_US - 1, 1), false, 0, 1, 1);
    EXPECT(algo_step(&lim, st, WEIR_MAX_WINDOW_US, 2), true, 0, 0, WEIR_MAX_WINDOW_US);
    EXPECT(algo_step(&lim, st, WEIR_MAX_WINDOW_US, 1), false, 0, WEIR_MAX_WINDOW_US,
           WEIR_MAX_WINDOW_US);

    /* a yearly quota checked a year and a half in */
    lim = compile(1000, YEAR);
    memset(st, 0, sizeof(st));
    EXPECT(algo_step(&lim, st, YEAR + YEAR / 2, 1000), true, 0, 0, YEAR / 2);
    EXPECT(algo_step(&lim, st, 2 * YEAR - 1, 1), false, 0, 1, 1);
    EXPECT(algo_step(&lim, st, 2 * YEAR, 1), true, 999, 0, YEAR);

    /* the largest limit */
    lim = compile(WEIR_MAX_LIMIT, S);
    memset(st, 0, sizeof(st));
    EXPECT(algo_step(&lim, st, 0, WEIR_MAX_LIMIT), true, 0, 0, S);
    EXPECT(algo_step(&lim, st, 0, 1), false, 0, S, S);
    EXPECT(algo_step(&lim, st, 0, (uint64_t)WEIR_MAX_LIMIT + 1), false, 0, WEIR_NEVER, S);
}

static void arbitrary_windows(void **unused)
{
    (void)unused;
    weir_limit lim = compile(2, 30 * S);
    uint64_t st[2] = {0, 0};
    /* 45 s is in the window [30 s, 60 s) */
    EXPECT(algo_step(&lim, st, 45 * S, 1), true, 1, 0, 15 * S);
    EXPECT(algo_step(&lim, st, 60 * S - 1, 1), true, 0, 0, 1);
    EXPECT(algo_step(&lim, st, 60 * S - 1, 1), false, 0, 1, 1);
    EXPECT(algo_step(&lim, st, 60 * S, 1), true, 1, 0, 30 * S);

    lim = compile(1, 300 * S);
    memset(st, 0, sizeof(st));
    EXPECT(algo_step(&lim, st, 299 * S, 1), true, 0, 0, S);
    EXPECT(algo_step(&lim, st, 299 * S, 1), false, 0, S, S);
    EXPECT(algo_step(&lim, st, 300 * S, 1), true, 0, 0, 300 * S);
    EXPECT(algo_step(&lim, st, 400 * S, 1), false, 0, 200 * S, 200 * S);

    /* Unix time in microseconds: minutes aligned to UTC */
    lim = compile(10, 60 * S);
    memset(st, 0, sizeof(st));
    EXPECT(algo_step(&lim, st, 1700000000123456, 1), true, 9, 0, 39876544);
}

static void stalled_clock(void **unused)
{
    (void)unused;
    weir_limit lim = compile(2, S);
    uint64_t st[2] = {0, 0};
    assert_true(algo_step(&lim, st, 5 * S + 1, 1).allowed);
    assert_true(algo_step(&lim, st, 5 * S + 1, 1).allowed);
    for (int i = 0; i < 1000; i++)
        EXPECT(algo_step(&lim, st, 5 * S + 1, 1), false, 0, S - 1, S - 1);
}

static void clock_backwards(void **unused)
{
    (void)unused;
    weir_limit lim = compile(2, S);
    uint64_t st[2] = {0, 0};
    EXPECT(algo_step(&lim, st, 2500000, 1), true, 1, 0, 500000);
    /* 1.2 s maps to window 1, but counts in window 2 (the newest seen) */
    EXPECT(algo_step(&lim, st, 1200000, 1), true, 0, 0, 1800000);
    EXPECT(algo_step(&lim, st, 500000, 1), false, 0, 2500000, 2500000);
    EXPECT(algo_step(&lim, st, 0, 1), false, 0, 3 * S, 3 * S);
    EXPECT(algo_step(&lim, st, 2900000, 1), false, 0, 100000, 100000);
    EXPECT(algo_step(&lim, st, 3 * S, 2), true, 0, 0, S);
    /* going back again after a fresh window does not reopen the old one */
    EXPECT(algo_step(&lim, st, 2999999, 1), false, 0, 1000001, 1000001);
}

static void negative_time_is_time_zero(void **unused)
{
    (void)unused;
    weir_limit lim = compile(1, 1000);
    uint64_t st[2] = {0, 0};
    EXPECT(algo_step(&lim, st, -500, 1), true, 0, 0, 1500);
    EXPECT(algo_step(&lim, st, -500, 1), false, 0, 1500, 1500);
    EXPECT(algo_check(&lim, st, 999, 1), false, 0, 1, 1);
    EXPECT(algo_check(&lim, st, 1000, 1), true, 0, 0, 1000);
}

static void extreme_times(void **unused)
{
    (void)unused;
    weir_limit lim = compile(3, WEIR_MAX_WINDOW_US);
    uint64_t st[2] = {0, 0};
    /* the last window is cut short at INT64_MAX; it still counts */
    int admitted = 0;
    for (int i = 0; i < 10; i++) {
        weir_result r;
        assert_int_equal(weir_step(&lim, st, INT64_MAX - i % 2, 1, &r), WEIR_OK);
        admitted += r.allowed;
        assert_true(r.retry_after_us >= 0);
        assert_true(r.reset_after_us >= 0);
    }
    assert_int_equal(admitted, 3);
    weir_result r = algo_step(&lim, st, 0, 1);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_us, INT64_MAX);
}

static void corrupt_state_is_einval(void **unused)
{
    (void)unused;
    weir_limit lim = compile(3, S);
    int64_t st[2] = {0, 4}; /* {window, count}: count above the limit */
    weir_result r;
    memset(&r, 0x5a, sizeof(r));
    weir_result saved = r;
    assert_int_equal(weir_step(&lim, st, 0, 1, &r), WEIR_EINVAL);
    assert_int_equal(weir_check(&lim, st, 0, 0, &r), WEIR_EINVAL);
    st[0] = -1;
    st[1] = 0;
    assert_int_equal(weir_step(&lim, st, 0, 1, &r), WEIR_EINVAL);
    st[1] = -1;
    assert_int_equal(weir_step(&lim, st, 0, 1, &r), WEIR_EINVAL);
    assert_memory_equal(&r, &saved, sizeof(r));
    /* a window far in the future is valid: the clock went backwards */
    st[0] = INT64_MAX;
    st[1] = 3;
    assert_int_equal(weir_step(&lim, st, 0, 1, &r), WEIR_OK);
    assert_false(r.allowed);
    assert_int_equal(weir_release(&lim, st, 0, 1, &r), WEIR_EALGO);
}

static void ban(void **unused)
{
    (void)unused;
    weir_limit lim = compile(0, S);
    uint64_t st[2] = {0, 0};
    weir_result r = algo_step(&lim, st, 0, 0);
    EXPECT(r, false, 0, WEIR_NEVER, 0);
    assert_int_equal(r.limit, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(counts_per_aligned_window),
        cmocka_unit_test(limit_one),
        cmocka_unit_test(costs),
        cmocka_unit_test(peek_changes_nothing),
        cmocka_unit_test(huge_windows),
        cmocka_unit_test(arbitrary_windows),
        cmocka_unit_test(stalled_clock),
        cmocka_unit_test(clock_backwards),
        cmocka_unit_test(negative_time_is_time_zero),
        cmocka_unit_test(extreme_times),
        cmocka_unit_test(corrupt_state_is_einval),
        cmocka_unit_test(ban),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
