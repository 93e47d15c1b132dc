/*
 * test_sliding_counter.c - exact verdicts of the sliding window counter on
 * hand-built traces, for the classic two-window counter (k = 1) and the
 * k-sub-window counter.
 *
 * With sub-window s = window / k, current sub-window j and offset e in it,
 * the estimate is c[j-k+1] + ... + c[j] + c[j-k] * (s - e) / s; a request
 * of cost h is admitted while the estimate plus h stays within the limit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "algo_support.h"
#include "weir/weir.h"

#define S ((int64_t)1000000) /* one second in microseconds */

static weir_limit compile(uint64_t limit, int64_t window_us, uint32_t k)
{
    weir_limit_spec spec = {.algorithm = WEIR_ALGO_SLIDING_COUNTER,
                            .limit = limit,
                            .window_us = window_us,
                            .sub_windows = k};
    weir_limit lim;
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_OK);
    assert_int_equal(lim.sub_windows, k ? k : 1);
    assert_int_equal(weir_state_size(&lim), k <= 1 ? WEIR_STATE_FIXED_BYTES : 8 + 4 * (k + 1));
    return lim;
}

static void two_window_counter(void **unused)
{
    (void)unused;
    weir_limit lim = compile(10, S, 0);
    void *st = algo_fresh(&lim);
    weir_result r = algo_step(&lim, st, 0, 10);
    EXPECT(r, true, 0, 0, 2 * S);
    assert_int_equal(r.limit, 10);
    EXPECT(algo_step(&lim, st, 500000, 1), false, 0, 600000, 1500000);
    /* at 1 s the previous window still weighs fully; 10 * 0.9 + 1 fits at 1.1 s */
    EXPECT(algo_check(&lim, st, S, 0), false, 0, 100000, S);
    EXPECT(algo_step(&lim, st, 1100000, 1), true, 0, 0, 1900000);
    EXPECT(algo_check(&lim, st, 1500000, 0), true, 4, 0, 1500000);
    EXPECT(algo_step(&lim, st, 1500000, 4), true, 0, 0, 1500000);
    /* 5 + 1 + 10 * (1 - e) <= 10 from e = 0.6 s */
    EXPECT(algo_step(&lim, st, 1500000, 1), false, 0, 100000, 1500000);
    EXPECT(algo_check(&lim, st, 2 * S, 0), true, 5, 0, S);
    EXPECT(algo_check(&lim, st, 3 * S, 0), true, 10, 0, 0);
    free(st);
}

static void previous_window_zeroed_after_a_gap(void **unused)
{
    (void)unused;
    weir_limit lim = compile(10, S, 1);
    void *st = algo_fresh(&lim);
    EXPECT(algo_step(&lim, st, 500000, 6), true, 4, 0, 1500000);
    EXPECT(algo_check(&lim, st, S, 0), true, 4, 0, S);
    /* two windows on, the count of window 0 is gone, although window 2
     * reuses its slot */
    EXPECT(algo_check(&lim, st, 2 * S, 0), true, 10, 0, 0);
    EXPECT(algo_step(&lim, st, 2 * S, 10), true, 0, 0, 2 * S);
    EXPECT(algo_check(&lim, st, 2500000, 0), false, 0, 600000, 1500000);
    EXPECT(algo_check(&lim, st, 3500000, 0), true, 5, 0, 500000);
    /* a long silence: everything is forgotten */
    EXPECT(algo_step(&lim, st, 1000 * S + 1, 10), true, 0, 0, 2 * S - 1);
    EXPECT(algo_check(&lim, st, 1000 * S + 2, 1), false, 0, S - 2 + 100000, 2 * S - 2);
    free(st);
}

static void sub_windows(void **unused)
{
    (void)unused;
    weir_limit lim = compile(8, 4 * S, 4); /* s = 1 s */
    void *st = algo_fresh(&lim);
    EXPECT(algo_step(&lim, st, 500000, 8), true, 0, 0, 4500000);
    /* the whole count is inside the window up to 4 s, then slides out
     * of sub-window 0 linearly during [4 s, 5 s) */
    EXPECT(algo_check(&lim, st, 4 * S - 1, 0), false, 0, 125001, S + 1);
    EXPECT(algo_check(&lim, st, 4 * S, 0), false, 0, 125000, S);
    EXPECT(algo_check(&lim, st, 4125000, 0), true, 1, 0, 875000);
    EXPECT(algo_step(&lim, st, 4500000, 4), true, 0, 0, 4500000);
    EXPECT(algo_check(&lim, st, 5 * S, 0), true, 4, 0, 4 * S);
    EXPECT(algo_check(&lim, st, 8 * S, 0), true, 4, 0, S);
    EXPECT(algo_check(&lim, st, 8500000, 0), true, 6, 0, 500000);
    EXPECT(algo_check(&lim, st, 9 * S, 0), true, 8, 0, 0);
    /* a gap longer than the window forgets every sub-window */
    EXPECT(algo_step(&lim, st, 20 * S, 8), true, 0, 0, 5 * S);
    EXPECT(algo_step(&lim, st, 23 * S, 1), false, 0, S + 125000, 2 * S);
    free(st);
}

static void limit_one(void **unused)
{
    (void)unused;
    weir_limit lim = compile(1, S, 0);
    void *st = algo_fresh(&lim);
    EXPECT(algo_step(&lim, st, 0, 1), true, 0, 0, 2 * S);
    /* any weight of the previous window keeps a limit of 1 full */
    EXPECT(algo_step(&lim, st, S, 1), false, 0, S, S);
    EXPECT(algo_step(&lim, st, 1500000, 1), false, 0, 500000, 500000);
    EXPECT(algo_step(&lim, st, 2 * S - 1, 1), false, 0, 1, 1);
    EXPECT(algo_step(&lim, st, 2 * S, 1), true, 0, 0, 2 * S);
    free(st);
}

static void costs(void **unused)
{
    (void)unused;
    weir_limit lim = compile(5, S, 0);
    void *st = algo_fresh(&lim);
    EXPECT(algo_step(&lim, st, 0, 6), false, 5, WEIR_NEVER, 0);
    EXPECT(algo_step(&lim, st, 0, UINT64_MAX), false, 5, WEIR_NEVER, 0);
    EXPECT(algo_step(&lim, st, 0, 3), true, 2, 0, 2 * S);
    /* 3 + 3 * (1 - e) <= 2 from e = 1/3 s, rounded up to the microsecond */
    EXPECT(algo_step(&lim, st, 0, 3), false, 2, 1333334, 2 * S);
    EXPECT(algo_check(&lim, st, 1333333, 3), false, 2, 1, 666667);
    EXPECT(algo_check(&lim, st, 1333334, 3), true, 0, 0, 1666666);
    EXPECT(algo_check(&lim, st, 1333334, 4), false, 3, 333333, 666666);
    free(st);
}

static void peek_changes_nothing(void **unused)
{
    (void)unused;
    weir_limit lim = compile(2, 2 * S, 2);
    void *st = algo_fresh(&lim);
    void *zero = algo_fresh(&lim);
    EXPECT(algo_step(&lim, st, 0, 0), true, 2, 0, 0);
    EXPECT(algo_step(&lim, st, 5 * S, 0), true, 2, 0, 0);
    assert_memory_equal(st, zero, weir_state_size(&lim));
    EXPECT(algo_step(&lim, st, 5 * S, 2), true, 0, 0, 3 * S);
    EXPECT(algo_check(&lim, st, 5 * S, 0), false, 0, 2 * S + 500000, 3 * S);
    EXPECT(algo_check(&lim, st, 8 * S, 0), true, 2, 0, 0);
    free(zero);
    free(st);
}

static void huge_windows(void **unused)
{
    (void)unused;
    weir_limit lim = compile(3, WEIR_MAX_WINDOW_US, 1);
    void *st = algo_fresh(&lim);
    EXPECT(algo_step(&lim, st, 0, 3), true, 0, 0, 2 * WEIR_MAX_WINDOW_US);
    EXPECT(algo_check(&lim, st, WEIR_MAX_WINDOW_US, 1), false, 0, 1051920000000000,
           WEIR_MAX_WINDOW_US);
    EXPECT(algo_check(&lim, st, WEIR_MAX_WINDOW_US + 1051920000000000, 1), true, 0, 0,
           2 * WEIR_MAX_WINDOW_US - 1051920000000000);
    free(st);

    /* the finest split of the longest window, with the largest limit:
     * s = 3081796875000 us */
    lim = compile(WEIR_MAX_LIMIT, WEIR_MAX_WINDOW_US, WEIR_MAX_SUB_WINDOWS);
    st = algo_fresh(&lim);
    EXPECT(algo_step(&lim, st, 0, WEIR_MAX_LIMIT), true, 0, 0, 3158841796875000);
    EXPECT(algo_check(&lim, st, WEIR_MAX_WINDOW_US, 1), false, 0, 718, 3081796875000);
    EXPECT(algo_check(&lim, st, WEIR_MAX_WINDOW_US + 718, 1), true, 0, 0, 3158841796875000 - 718);
    free(st);
}

static void arbitrary_windows(void **unused)
{
    (void)unused;
    weir_limit lim = compile(6, 30 * S, 3); /* s = 10 s */
    void *st = algo_fresh(&lim);
    EXPECT(algo_step(&lim, st, 5 * S, 6), true, 0, 0, 35 * S);
    EXPECT(algo_check(&lim, st, 25 * S, 1), false, 0, 6666667, 15 * S);
    EXPECT(algo_check(&lim, st, 31666666, 1), false, 0, 1, 8333334);
    EXPECT(algo_check(&lim, st, 31666667, 1), true, 0, 0, 38333333);
    free(st);

    lim = compile(100, 300 * S, 5); /* s = 60 s */
    st = algo_fresh(&lim);
    EXPECT(algo_step(&lim, st, 30 * S, 100), true, 0, 0, 330 * S);
    EXPECT(algo_check(&lim, st, 300 * S, 0), false, 0, 600000, 60 * S);
    EXPECT(algo_check(&lim, st, 330 * S, 0), true, 50, 0, 30 * S);
    free(st);
}

static void stalled_clock(void **unused)
{
    (void)unused;
    weir_limit lim = compile(3, S, 0);
    void *st = algo_fresh(&lim);
    for (int i = 0; i < 3; i++)
        assert_true(algo_step(&lim, st, 5 * S, 1).allowed);
    for (int i = 0; i < 1000; i++)
        EXPECT(algo_step(&lim, st, 5 * S, 1), false, 0, 1333334, 2 * S);
    free(st);
}

static void clock_backwards(void **unused)
{
    (void)unused;
    weir_limit lim = compile(10, S, 0);
    void *st = algo_fresh(&lim);
    EXPECT(algo_step(&lim, st, 1900000, 5), true, 5, 0, 1100000);
    /* 0.2 s is before the state's window: decided at the start of window 1 */
    EXPECT(algo_step(&lim, st, 200000, 5), true, 0, 0, 2800000);
    EXPECT(algo_step(&lim, st, 200000, 1), false, 0, 1900000, 2800000);
    free(st);

    /* within a window, an earlier time weighs the previous window more */
    st = algo_fresh(&lim);
    EXPECT(algo_step(&lim, st, 500000, 4), true, 6, 0, 1500000);
    EXPECT(algo_step(&lim, st, 1500000, 5), true, 3, 0, 1500000);
    EXPECT(algo_check(&lim, st, 1200000, 0), true, 1, 0, 1800000);
    EXPECT(algo_check(&lim, st, 300000, 0), true, 1, 0, 2700000);
    EXPECT(algo_check(&lim, st, 300000, 2), false, 1, 950000, 2700000);
    free(st);
}

static void negative_time_is_time_zero(void **unused)
{
    (void)unused;
    weir_limit lim = compile(1, 1000, 0);
    void *st = algo_fresh(&lim);
    EXPECT(algo_step(&lim, st, -500, 1), true, 0, 0, 2500);
    EXPECT(algo_step(&lim, st, -500, 1), false, 0, 2500, 2500);
    EXPECT(algo_check(&lim, st, 1999, 1), false, 0, 1, 1);
    EXPECT(algo_check(&lim, st, 2000, 1), true, 0, 0, 2000);
    free(st);
}

static void extreme_times(void **unused)
{
    (void)unused;
    const struct {
        int64_t window;
        uint32_t k;
    } cases[] = {{1, 1}, {4, 4}, {S, 1}, {WEIR_MAX_WINDOW_US, WEIR_MAX_SUB_WINDOWS}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        weir_limit lim = compile(3, cases[c].window, cases[c].k);
        void *st = algo_fresh(&lim);
        int admitted = 0;
        for (int i = 0; i < 10; i++) {
            weir_result r = algo_step(&lim, st, INT64_MAX - i % 2, 1);
            admitted += r.allowed;
            assert_true(r.retry_after_us >= 0);
            assert_true(r.reset_after_us >= 0);
        }
        assert_int_equal(admitted, 3);
        weir_result r = algo_step(&lim, st, 0, 1);
        assert_false(r.allowed);
        assert_true(r.retry_after_us > INT64_MAX / 2);
        free(st);
    }
}

static void corrupt_state(void **unused)
{
    (void)unused;
    weir_limit lim = compile(3, 4 * S, 2);
    int64_t *st = algo_fresh(&lim); /* {i64 cur, u32 c[3]} */
    uint32_t *c = (uint32_t *)&st[1];
    weir_result r;
    memset(&r, 0x5a, sizeof(r));
    weir_result saved = r;
    c[2] = 4; /* above the limit */
    assert_int_equal(weir_step(&lim, st, 0, 1, &r), WEIR_EINVAL);
    assert_int_equal(weir_check(&lim, st, 0, 0, &r), WEIR_EINVAL);
    c[2] = 3;
    st[0] = -1;
    assert_int_equal(weir_step(&lim, st, 0, 1, &r), WEIR_EINVAL);
    /* a sub-window index no time can reach */
    st[0] = INT64_MAX;
    assert_int_equal(weir_step(&lim, st, 0, 1, &r), WEIR_EINVAL);
    st[0] = INT64_MAX / (2 * S);
    assert_int_equal(weir_check(&lim, st, INT64_MAX, 1, &r), WEIR_EINVAL);
    assert_memory_equal(&r, &saved, sizeof(r));
    st[0] = 5;
    assert_int_equal(weir_step(&lim, st, 0, 1, &r), WEIR_OK);
    assert_false(r.allowed);
    assert_int_equal(weir_release(&lim, st, 0, 1, &r), WEIR_EALGO);
    free(st);
}

static void compile_errors(void **unused)
{
    (void)unused;
    weir_limit lim;
    memset(&lim, 0x5a, sizeof(lim));
    weir_limit saved = lim;
    weir_limit_spec spec = {.algorithm = WEIR_ALGO_SLIDING_COUNTER,
                            .limit = 10,
                            .window_us = 4 * S + 1,
                            .sub_windows = 4};
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_EINVAL);
    spec.window_us = 1;
    spec.sub_windows = 2;
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_EINVAL);
    spec.window_us = 1025;
    spec.sub_windows = WEIR_MAX_SUB_WINDOWS + 1;
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_ERANGE);
    spec.sub_windows = UINT32_MAX;
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_ERANGE);
    assert_memory_equal(&lim, &saved, sizeof(lim));
    /* 1 us sub-windows */
    spec.window_us = WEIR_MAX_SUB_WINDOWS;
    spec.sub_windows = WEIR_MAX_SUB_WINDOWS;
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_OK);
    assert_int_equal(weir_state_size(&lim), 8 + 4 * (WEIR_MAX_SUB_WINDOWS + 1));
    void *st = algo_fresh(&lim);
    EXPECT(algo_step(&lim, st, 7, 10), true, 0, 0, WEIR_MAX_SUB_WINDOWS + 1);
    EXPECT(algo_step(&lim, st, WEIR_MAX_SUB_WINDOWS + 7, 1), false, 0, 1, 1);
    EXPECT(algo_step(&lim, st, WEIR_MAX_SUB_WINDOWS + 8, 10), true, 0, 0, WEIR_MAX_SUB_WINDOWS + 1);
    free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(two_window_counter),
        cmocka_unit_test(previous_window_zeroed_after_a_gap),
        cmocka_unit_test(sub_windows),
        cmocka_unit_test(limit_one),
        cmocka_unit_test(costs),
        cmocka_unit_test(peek_changes_nothing),
        cmocka_unit_test(huge_windows),
        cmocka_unit_test(arbitrary_windows),
        cmocka_unit_test(stalled_clock),
        cmocka_unit_test(clock_backwards),
        cmocka_unit_test(negative_time_is_time_zero),
        cmocka_unit_test(extreme_times),
        cmocka_unit_test(corrupt_state),
        cmocka_unit_test(compile_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
