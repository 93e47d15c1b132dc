/*
 * test_sliding_log.c - exact verdicts of the sliding window log on
 * hand-built traces. An entry admitted at time s counts against every
 * request in [s, s + window).
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
#define DAY (86400 * S)
#define YEAR (365 * DAY)

static weir_limit compile(uint64_t limit, int64_t window_us)
{
    weir_limit_spec spec = {
        .algorithm = WEIR_ALGO_SLIDING_LOG, .limit = limit, .window_us = window_us};
    weir_limit lim;
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_OK);
    assert_int_equal(weir_state_size(&lim), 8 + 8 * limit);
    return lim;
}

static void exact_window(void **unused)
{
    (void)unused;
    weir_limit lim = compile(3, S);
    void *st = algo_fresh(&lim);
    weir_result r = algo_step(&lim, st, 0, 1);
    EXPECT(r, true, 2, 0, S);
    assert_int_equal(r.limit, 3);
    EXPECT(algo_step(&lim, st, 100000, 1), true, 1, 0, S);
    EXPECT(algo_step(&lim, st, 200000, 1), true, 0, 0, S);
    /* the oldest entry (0) leaves at 1 s */
    EXPECT(algo_step(&lim, st, 300000, 1), false, 0, 700000, 900000);
    EXPECT(algo_step(&lim, st, S - 1, 1), false, 0, 1, 200001);
    EXPECT(algo_step(&lim, st, S, 1), true, 0, 0, S);
    /* at 1.1 s the entry of 100 ms has left too */
    EXPECT(algo_check(&lim, st, 1100000, 0), true, 1, 0, 900000);
    EXPECT(algo_step(&lim, st, 1100000, 2), false, 1, 100000, 900000);
    EXPECT(algo_step(&lim, st, 1200000, 2), true, 0, 0, S);
    free(st);
}

static void limit_one(void **unused)
{
    (void)unused;
    weir_limit lim = compile(1, S);
    void *st = algo_fresh(&lim);
    EXPECT(algo_step(&lim, st, 0, 1), true, 0, 0, S);
    EXPECT(algo_step(&lim, st, 0, 1), false, 0, S, S);
    EXPECT(algo_step(&lim, st, S - 1, 1), false, 0, 1, 1);
    EXPECT(algo_step(&lim, st, S, 1), true, 0, 0, S);
    EXPECT(algo_step(&lim, st, S + S / 2, 1), false, 0, S / 2, S / 2);
    free(st);
}

static void costs(void **unused)
{
    (void)unused;
    weir_limit lim = compile(4, S);
    void *st = algo_fresh(&lim);
    EXPECT(algo_step(&lim, st, 0, 5), false, 4, WEIR_NEVER, 0);
    EXPECT(algo_step(&lim, st, 0, UINT64_MAX), false, 4, WEIR_NEVER, 0);
    EXPECT(algo_step(&lim, st, 0, 2), true, 2, 0, S);
    EXPECT(algo_step(&lim, st, 300000, 2), true, 0, 0, S);
    /* a cost of 3 needs the 3rd oldest entry (300 ms) gone: at 1.3 s */
    EXPECT(algo_step(&lim, st, 500000, 3), false, 0, 800000, 800000);
    EXPECT(algo_check(&lim, st, S, 3), false, 2, 300000, 300000);
    EXPECT(algo_check(&lim, st, S, 2), true, 0, 0, S);
    EXPECT(algo_step(&lim, st, 1299999, 3), false, 2, 1, 1);
    EXPECT(algo_step(&lim, st, 1300000, 3), true, 1, 0, S);
    EXPECT(algo_step(&lim, st, 1300000, 5), false, 1, WEIR_NEVER, S);
    free(st);
}

static void peek_changes_nothing(void **unused)
{
    (void)unused;
    weir_limit lim = compile(2, S);
    void *st = algo_fresh(&lim);
    void *zero = algo_fresh(&lim);
    EXPECT(algo_step(&lim, st, 0, 0), true, 2, 0, 0);
    EXPECT(algo_step(&lim, st, 5 * S, 0), true, 2, 0, 0);
    assert_memory_equal(st, zero, weir_state_size(&lim));
    EXPECT(algo_step(&lim, st, 5 * S, 2), true, 0, 0, S);
    EXPECT(algo_check(&lim, st, 5 * S + 10, 0), false, 0, S - 10, S - 10);
    EXPECT(algo_check(&lim, st, 6 * S, 0), true, 2, 0, 0);
    free(zero);
    free(st);
}

static void ring_wraps(void **unused)
{
    (void)unused;
    /* one request every 4 us against 3 per 10 us: every one fits, and the
     * ring of 3 entries wraps many times */
    weir_limit lim = compile(3, 10);
    void *st = algo_fresh(&lim);
    for (int64_t t = 0; t < 4000; t += 4) {
        uint64_t rem = t == 0 ? 2 : t == 4 ? 1 : 0;
        EXPECT(algo_step(&lim, st, t, 1), true, rem, 0, 10);
        if (t >= 8)
            EXPECT(algo_step(&lim, st, t, 1), false, 0, 2, 10);
    }
    free(st);
}

static void huge_windows(void **unused)
{
    (void)unused;
    weir_limit lim = compile(2, WEIR_MAX_WINDOW_US);
    void *st = algo_fresh(&lim);
    EXPECT(algo_step(&lim, st, 0, 1), true, 1, 0, WEIR_MAX_WINDOW_US);
    EXPECT(algo_step(&lim, st, 5, 1), true, 0, 0, WEIR_MAX_WINDOW_US);
    EXPECT(algo_step(&lim, st, WEIR_MAX_WINDOW_US - 1, 1), false, 0, 1, 6);
    EXPECT(algo_step(&lim, st, WEIR_MAX_WINDOW_US, 1), true, 0, 0, WEIR_MAX_WINDOW_US);
    EXPECT(algo_step(&lim, st, WEIR_MAX_WINDOW_US + 4, 1), false, 0, 1, WEIR_MAX_WINDOW_US - 4);
    free(st);

    lim = compile(3, YEAR);
    st = algo_fresh(&lim);
    EXPECT(algo_step(&lim, st, 10 * YEAR, 3), true, 0, 0, YEAR);
    EXPECT(algo_step(&lim, st, 10 * YEAR + YEAR / 2, 1), false, 0, YEAR / 2, YEAR / 2);
    EXPECT(algo_step(&lim, st, 11 * YEAR, 1), true, 2, 0, YEAR);
    free(st);
}

static void arbitrary_windows(void **unused)
{
    (void)unused;
    weir_limit lim = compile(2, 30 * S);
    void *st = algo_fresh(&lim);
    EXPECT(algo_step(&lim, st, 10 * S, 1), true, 1, 0, 30 * S);
    EXPECT(algo_step(&lim, st, 25 * S, 1), true, 0, 0, 30 * S);
    EXPECT(algo_step(&lim, st, 30 * S, 1), false, 0, 10 * S, 25 * S);
    EXPECT(algo_step(&lim, st, 40 * S, 1), true, 0, 0, 30 * S);
    EXPECT(algo_step(&lim, st, 50 * S, 1), false, 0, 5 * S, 20 * S);
    free(st);

    lim = compile(1, 300 * S);
    st = algo_fresh(&lim);
    EXPECT(algo_step(&lim, st, 299 * S, 1), true, 0, 0, 300 * S);
    EXPECT(algo_step(&lim, st, 300 * S, 1), false, 0, 299 * S, 299 * S);
    EXPECT(algo_step(&lim, st, 599 * S, 1), true, 0, 0, 300 * S);
    free(st);
}

static void stalled_clock(void **unused)
{
    (void)unused;
    weir_limit lim = compile(3, S);
    void *st = algo_fresh(&lim);
    for (int i = 0; i < 3; i++)
        assert_true(algo_step(&lim, st, 5 * S, 1).allowed);
    for (int i = 0; i < 1000; i++)
        EXPECT(algo_step(&lim, st, 5 * S, 1), false, 0, S, S);
    EXPECT(algo_step(&lim, st, 6 * S, 3), true, 0, 0, S);
    free(st);
}

static void clock_backwards(void **unused)
{
    (void)unused;
    weir_limit lim = compile(2, S);
    void *st = algo_fresh(&lim);
    EXPECT(algo_step(&lim, st, 10 * S, 1), true, 1, 0, S);
    /* 5 s is taken as 10 s, the latest time seen: recorded there */
    EXPECT(algo_step(&lim, st, 5 * S, 1), true, 0, 0, 6 * S);
    EXPECT(algo_step(&lim, st, 5 * S, 1), false, 0, 6 * S, 6 * S);
    EXPECT(algo_step(&lim, st, 0, 1), false, 0, 11 * S, 11 * S);
    EXPECT(algo_step(&lim, st, 11 * S - 1, 1), false, 0, 1, 1);
    EXPECT(algo_step(&lim, st, 11 * S, 1), true, 1, 0, S);
    free(st);
}

static void negative_time_is_time_zero(void **unused)
{
    (void)unused;
    weir_limit lim = compile(1, 1000);
    void *st = algo_fresh(&lim);
    EXPECT(algo_step(&lim, st, -500, 1), true, 0, 0, 1500);
    EXPECT(algo_step(&lim, st, -500, 1), false, 0, 1500, 1500);
    EXPECT(algo_check(&lim, st, 999, 1), false, 0, 1, 1);
    EXPECT(algo_check(&lim, st, 1000, 1), true, 0, 0, 1000);
    free(st);
}

static void extreme_times(void **unused)
{
    (void)unused;
    weir_limit lim = compile(3, S);
    void *st = algo_fresh(&lim);
    int admitted = 0;
    for (int i = 0; i < 10; i++) {
        weir_result r = algo_step(&lim, st, INT64_MAX - i % 2, 1);
        admitted += r.allowed;
        assert_true(r.retry_after_us >= 0);
    }
    assert_int_equal(admitted, 3);
    weir_result r = algo_step(&lim, st, 0, 1);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_us, INT64_MAX);
    free(st);
}

static void largest_log(void **unused)
{
    (void)unused;
    weir_limit lim = compile(WEIR_MAX_LOG_ENTRIES, S);
    void *st = algo_fresh(&lim);
    EXPECT(algo_step(&lim, st, 0, WEIR_MAX_LOG_ENTRIES - 1), true, 1, 0, S);
    EXPECT(algo_step(&lim, st, 10, 2), false, 1, S - 10, S - 10);
    EXPECT(algo_step(&lim, st, 10, 1), true, 0, 0, S);
    EXPECT(algo_step(&lim, st, S, WEIR_MAX_LOG_ENTRIES), false, WEIR_MAX_LOG_ENTRIES - 1, 10, 10);
    EXPECT(algo_step(&lim, st, S + 10, WEIR_MAX_LOG_ENTRIES), true, 0, 0, S);
    free(st);

    weir_limit_spec spec = {
        .algorithm = WEIR_ALGO_SLIDING_LOG, .limit = WEIR_MAX_LOG_ENTRIES + 1, .window_us = S};
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_ERANGE);
}

static void set_header(void *st, uint32_t head, uint32_t count)
{
    uint32_t h[2] = {head, count};
    memcpy(st, h, sizeof(h));
}

static void corrupt_state(void **unused)
{
    (void)unused;
    weir_limit lim = compile(3, S);
    int64_t *st = algo_fresh(&lim); /* {u32 head, u32 count} then 3 timestamps */
    weir_result r;
    memset(&r, 0x5a, sizeof(r));
    weir_result saved = r;
    set_header(st, 3, 0);
    assert_int_equal(weir_step(&lim, st, 0, 1, &r), WEIR_EINVAL);
    set_header(st, 0, 4);
    assert_int_equal(weir_step(&lim, st, 0, 1, &r), WEIR_EINVAL);
    assert_int_equal(weir_check(&lim, st, 0, 0, &r), WEIR_EINVAL);
    set_header(st, UINT32_MAX, UINT32_MAX);
    assert_int_equal(weir_step(&lim, st, 0, 1, &r), WEIR_EINVAL);
    assert_memory_equal(&r, &saved, sizeof(r));

    /* Timestamps are not validated (that would cost a pass over the log),
     * but out-of-order or negative ones must not crash or overflow. */
    const int64_t odd[][3] = {
        {INT64_MIN, INT64_MIN, INT64_MIN}, {5 * S, INT64_MIN, 3}, {INT64_MAX, 0, INT64_MIN},
        {INT64_MAX, INT64_MAX, INT64_MAX}, {-1, -S, 2 * S},       {3, 2, 1},
    };
    for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
        for (uint32_t count = 0; count <= 3; count++) {
            for (uint32_t head = 0; head < 3; head++) {
                const int64_t nows[] = {0, 4 * S, INT64_MAX};
                for (size_t k = 0; k < 3; k++) {
                    set_header(st, head, count);
                    memcpy(&st[1], odd[i], sizeof(odd[i]));
                    assert_int_equal(weir_check(&lim, st, nows[k], 2, &r), WEIR_OK);
                    assert_int_equal(weir_step(&lim, st, nows[k], 2, &r), WEIR_OK);
                }
            }
        }
    }
    assert_int_equal(weir_release(&lim, st, 0, 1, &r), WEIR_EALGO);
    free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exact_window),
        cmocka_unit_test(limit_one),
        cmocka_unit_test(costs),
        cmocka_unit_test(peek_changes_nothing),
        cmocka_unit_test(ring_wraps),
        cmocka_unit_test(huge_windows),
        cmocka_unit_test(arbitrary_windows),
        cmocka_unit_test(stalled_clock),
        cmocka_unit_test(clock_backwards),
        cmocka_unit_test(negative_time_is_time_zero),
        cmocka_unit_test(extreme_times),
        cmocka_unit_test(largest_log),
        cmocka_unit_test(corrupt_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
