/*
 * test_boundary.c - the boundary burst: the most units each algorithm
 * admits in any window of length W (limit L per window W).
 *
 *   fixed window           2L (L just before a boundary, L just after)
 *   sliding window log     L
 *   GCRA, burst B          B + L - 1 (L with the default burst of 1)
 *   token bucket, burst B  B + L - 1 (2L - 1 with the default burst L)
 *   leaky bucket policer   L (burst 1)
 *   sliding counter        2L - 1 (any k)
 *
 * The sliding counter's bound: take a window [a, a + W) that starts at
 * offset x of sub-window i and ends inside sub-window i + k. Its last
 * admission, at offset e < x of sub-window i + k, needed
 *     full + c[i] * (s - e) / s <= L,
 * where full counts everything admitted in sub-windows i+1 .. i+k by then,
 * which includes the window's part after sub-window i. The window's part in
 * sub-window i is at most c[i], so the window holds at most
 *     L + c[i] * (1 - (s - e) / s) <= L + L * (s - 2) / s < 2L.
 * It is reached (2L - 1) when L units arrive in the last microsecond of a
 * sub-window and the next window is filled greedily, with s >= 2L.
 *
 * Each bound is checked over every admitted timestamp of long traces, both
 * random and greedy (every microsecond, as much as is admitted).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fake.h"
#include "weir/weir.h"

#define S ((int64_t)1000000) /* one second in microseconds */

typedef struct admission {
    int64_t t;
    uint64_t units;
} admission;

typedef struct trace {
    admission *a;
    size_t n, cap;
} trace;

static void record(trace *tr, int64_t t, uint64_t units)
{
    if (tr->n == tr->cap) {
        tr->cap = tr->cap ? 2 * tr->cap : 1024;
        tr->a = realloc(tr->a, tr->cap * sizeof(*tr->a));
        assert_non_null(tr->a);
    }
    tr->a[tr->n++] = (admission){t, units};
}

/* The most units admitted in any window [x, x + W). Times are
 * non-decreasing, and a busiest window can always start at an admission. */
static uint64_t busiest_window(const trace *tr, int64_t window)
{
    uint64_t best = 0, sum = 0;
    size_t j = 0;
    for (size_t i = 0; i < tr->n; i++) {
        while (j < tr->n && tr->a[j].t - tr->a[i].t < window)
            sum += tr->a[j++].units;
        if (sum > best)
            best = sum;
        sum -= tr->a[i].units;
    }
    return best;
}

typedef struct setup {
    weir_limit lim;
    void *state;
} setup;

static setup make(weir_algorithm algo, uint64_t limit, int64_t window, uint64_t burst, uint32_t k)
{
    weir_limit_spec spec = {
        .algorithm = algo, .limit = limit, .window_us = window, .burst = burst, .sub_windows = k};
    setup su;
    assert_int_equal(weir_limit_compile(&spec, &su.lim), WEIR_OK);
    su.state = calloc(1, weir_state_size(&su.lim));
    assert_non_null(su.state);
    return su;
}

static bool admit(setup *su, int64_t now, uint64_t hits, trace *tr)
{
    weir_result r;
    assert_int_equal(weir_step(&su->lim, su->state, now, hits, &r), WEIR_OK);
    if (r.allowed && hits > 0)
        record(tr, now, hits);
    return r.allowed;
}

/* Every microsecond of [from, to): admit cost-1 requests until denied. */
static void greedy(setup *su, int64_t from, int64_t to, trace *tr)
{
    for (int64_t t = from; t < to; t++)
        while (admit(su, t, 1, tr))
            ;
}

/* A random trace with a non-decreasing clock, busier than the limit: gaps
 * of zero, near the request spacing, across (sub-)window boundaries. */
static void random_trace(setup *su, test_rng *rng, int64_t period, int ops, trace *tr)
{
    int64_t window = su->lim.window_us;
    int64_t spacing = window / (int64_t)su->lim.limit / 3;
    uint64_t top = su->lim.burst ? su->lim.burst : 1;
    int64_t now = (int64_t)rng_below(rng, (uint64_t)window);
    for (int i = 0; i < ops; i++) {
        uint64_t r = rng_below(rng, 100);
        if (r < 30)
            ; /* same time */
        else if (r < 65)
            now += (int64_t)rng_below(rng, (uint64_t)spacing + 2);
        else if (r < 80)
            now = (now / period + 1) * period - 1 + (int64_t)rng_below(rng, 3);
        else if (r < 95)
            now += (int64_t)rng_below(rng, (uint64_t)window / 4 + 1);
        else
            now += (int64_t)rng_below(rng, (uint64_t)window * 2 + 1);
        r = rng_below(rng, 10);
        uint64_t hits = r < 6 ? 1 : r < 9 ? 1 + rng_below(rng, top) : top;
        admit(su, now, hits, tr);
    }
}

static void fixed_window_doubles_at_the_boundary(void **unused)
{
    (void)unused;
    const struct {
        uint64_t limit;
        int64_t window;
    } cases[] = {{1, S}, {5, S}, {100, 30 * S}, {7, 300 * S}, {3, 2}, {WEIR_MAX_LIMIT, S}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        uint64_t L = cases[c].limit;
        int64_t W = cases[c].window;
        setup su = make(WEIR_ALGO_FIXED_WINDOW, L, W, 0, 0);
        trace tr = {0};
        /* L in the last microsecond of window 4, L in the first of window 5 */
        assert_true(admit(&su, 5 * W - 1, L, &tr));
        assert_false(admit(&su, 5 * W - 1, 1, &tr));
        assert_true(admit(&su, 5 * W, L, &tr));
        assert_false(admit(&su, 5 * W, 1, &tr));
        assert_int_equal(busiest_window(&tr, W), 2 * L);
        assert_int_equal(busiest_window(&tr, 1), L);
        free(tr.a);
        free(su.state);
    }

    /* and never more than 2L, on random traces */
    uint64_t seed = test_seed("fixed_window_boundary");
    test_rng rng = {seed};
    for (int round = 0; round < 30; round++) {
        uint64_t L = 1 + rng_below(&rng, 20);
        int64_t W = 1 + (int64_t)rng_below(&rng, 100000);
        setup su = make(WEIR_ALGO_FIXED_WINDOW, L, W, 0, 0);
        trace tr = {0};
        random_trace(&su, &rng, W, 3000, &tr);
        assert_true(busiest_window(&tr, W) <= 2 * L);
        free(tr.a);
        free(su.state);
    }
}

static void sliding_log_never_exceeds_the_limit(void **unused)
{
    (void)unused;
    uint64_t seed = test_seed("sliding_log_boundary");
    test_rng rng = {seed};
    uint64_t reached = 0;
    for (int round = 0; round < 40; round++) {
        uint64_t L = 1 + rng_below(&rng, 50);
        int64_t W = rng_below(&rng, 3) == 0 ? 1 + (int64_t)rng_below(&rng, 50)
                                            : 1 + (int64_t)rng_below(&rng, 30 * S);
        setup su = make(WEIR_ALGO_SLIDING_LOG, L, W, 0, 0);
        trace tr = {0};
        random_trace(&su, &rng, W, 5000, &tr);
        uint64_t most = busiest_window(&tr, W);
        assert_true(most <= L);
        reached += most == L;
        free(tr.a);
        free(su.state);
    }
    assert_true(reached > 20); /* the traces do press against the limit */

    /* greedy across boundaries */
    setup su = make(WEIR_ALGO_SLIDING_LOG, 10, 1000, 0, 0);
    trace tr = {0};
    greedy(&su, 999, 10000, &tr);
    assert_int_equal(busiest_window(&tr, 1000), 10);
    free(tr.a);
    free(su.state);
}

static void sliding_log_bound_holds_on_a_clock_running_backwards(void **unused)
{
    (void)unused;
    /* a request behind the newest entry is recorded at the newest entry's
     * time: the bound holds on that (effective) clock */
    uint64_t seed = test_seed("sliding_log_backwards");
    test_rng rng = {seed};
    for (int round = 0; round < 20; round++) {
        uint64_t L = 1 + rng_below(&rng, 20);
        int64_t W = 1 + (int64_t)rng_below(&rng, 10000);
        setup su = make(WEIR_ALGO_SLIDING_LOG, L, W, 0, 0);
        trace tr = {0};
        int64_t now = 0, newest = 0;
        for (int i = 0; i < 5000; i++) {
            now += (int64_t)rng_below(&rng, (uint64_t)W / 2 + 1) - (int64_t)W / 5;
            if (now < 0)
                now = 0;
            uint64_t hits = 1 + rng_below(&rng, L);
            weir_result r;
            assert_int_equal(weir_step(&su.lim, su.state, now, hits, &r), WEIR_OK);
            if (r.allowed) {
                newest = now > newest ? now : newest;
                record(&tr, newest, hits);
            }
        }
        assert_true(busiest_window(&tr, W) <= L);
        free(tr.a);
        free(su.state);
    }
}

static void gcra_admits_at_most_burst_plus_limit_minus_one(void **unused)
{
    (void)unused;
    /* default burst 1: never more than L */
    setup su = make(WEIR_ALGO_GCRA, 10, 10000, 0, 0);
    trace tr = {0};
    greedy(&su, 0, 50000, &tr);
    assert_int_equal(busiest_window(&tr, 10000), 10);
    free(tr.a);
    free(su.state);

    /* burst 5: 5 at once, then one every 1 ms: 14 in [0, 10 ms) */
    su = make(WEIR_ALGO_GCRA, 10, 10000, 5, 0);
    tr = (trace){0};
    greedy(&su, 0, 50000, &tr);
    assert_int_equal(busiest_window(&tr, 10000), 5 + 10 - 1);
    free(tr.a);
    free(su.state);

    /* a rate that does not divide the window (T rounded up) */
    su = make(WEIR_ALGO_GCRA, 7, 30, 3, 0);
    tr = (trace){0};
    greedy(&su, 0, 3000, &tr);
    assert_true(busiest_window(&tr, 30) <= 3 + 7 - 1);
    free(tr.a);
    free(su.state);

    /* T = 1.5 ns rounds up to 2 ns; rounded down, 1999 + 1000 + 1000
     * would fit a 3 us window */
    su = make(WEIR_ALGO_GCRA, 1999, 3, 1999, 0);
    tr = (trace){0};
    greedy(&su, 0, 30, &tr);
    assert_true(busiest_window(&tr, 3) <= 1999 + 1999 - 1);
    free(tr.a);
    free(su.state);

    uint64_t seed = test_seed("gcra_boundary");
    test_rng rng = {seed};
    for (int round = 0; round < 60; round++) {
        uint64_t L = 1 + rng_below(&rng, 30);
        uint64_t B = rng_below(&rng, 2) ? 0 : 1 + rng_below(&rng, 2 * L);
        int64_t W = rng_below(&rng, 3) == 0 ? 1 + (int64_t)rng_below(&rng, 100)
                                            : 1 + (int64_t)rng_below(&rng, 30 * S);
        su = make(WEIR_ALGO_GCRA, L, W, B, 0);
        tr = (trace){0};
        random_trace(&su, &rng, W, 4000, &tr);
        assert_true(busiest_window(&tr, W) <= (B ? B : 1) + L - 1);
        free(tr.a);
        free(su.state);
    }
}

static void buckets_admit_at_most_burst_plus_limit_minus_one(void **unused)
{
    (void)unused;
    /* token bucket, burst L: L at once, then L - 1 refilled before W ends */
    setup su = make(WEIR_ALGO_TOKEN_BUCKET, 10, 10000, 0, 0);
    trace tr = {0};
    greedy(&su, 0, 50000, &tr);
    assert_int_equal(busiest_window(&tr, 10000), 2 * 10 - 1);
    free(tr.a);
    free(su.state);

    /* the leaky bucket policer (burst 1): L */
    su = make(WEIR_ALGO_LEAKY_BUCKET, 10, 10000, 0, 0);
    tr = (trace){0};
    greedy(&su, 0, 50000, &tr);
    assert_int_equal(busiest_window(&tr, 10000), 10);
    free(tr.a);
    free(su.state);

    uint64_t seed = test_seed("bucket_boundary");
    test_rng rng = {seed};
    const weir_algorithm algos[] = {WEIR_ALGO_TOKEN_BUCKET, WEIR_ALGO_LEAKY_BUCKET,
                                    WEIR_ALGO_LEAKY_SHAPER};
    for (int round = 0; round < 60; round++) {
        weir_algorithm a = algos[round % 3];
        uint64_t L = 1 + rng_below(&rng, 30);
        uint64_t B = rng_below(&rng, 2) ? 0 : 1 + rng_below(&rng, 2 * L);
        int64_t W = rng_below(&rng, 3) == 0 ? 1 + (int64_t)rng_below(&rng, 100)
                                            : 1 + (int64_t)rng_below(&rng, 30 * S);
        su = make(a, L, W, B, 0);
        tr = (trace){0};
        random_trace(&su, &rng, W, 4000, &tr);
        uint64_t burst = su.lim.burst;
        assert_true(busiest_window(&tr, W) <= burst + L - 1);
        if (a == WEIR_ALGO_TOKEN_BUCKET && B == 0)
            assert_true(busiest_window(&tr, W) <= 2 * L - 1);
        free(tr.a);
        free(su.state);
    }
}

static void sliding_counter_stays_under_twice_the_limit(void **unused)
{
    (void)unused;
    uint64_t worst = 0, worst_limit = 1;
    double worst_ratio = 0;

    /* The documented worst case: L in the last microsecond of a
     * sub-window, then greedy. With s >= 2L it reaches 2L - 1. */
    const struct {
        uint64_t limit;
        int64_t window;
        uint32_t k;
    } cases[] = {{1, 1000, 1}, {10, 1000, 1}, {10, 100, 1}, {10, 4000, 4},
                 {7, 3000, 3}, {25, 60, 1},   {3, 16, 16},  {50, 100000, 1}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        uint64_t L = cases[c].limit;
        int64_t W = cases[c].window;
        int64_t s = W / cases[c].k;
        setup su = make(WEIR_ALGO_SLIDING_COUNTER, L, W, 0, cases[c].k);
        trace tr = {0};
        assert_true(admit(&su, s - 1, L, &tr));
        greedy(&su, s, 6 * W, &tr);
        uint64_t most = busiest_window(&tr, W);
        assert_true(most <= 2 * L - 1);
        if (s >= 2 * (int64_t)L)
            assert_int_equal(most, 2 * L - 1);
        if (most > worst || (double)most / (double)L > worst_ratio) {
            worst = most;
            worst_limit = L;
            worst_ratio = (double)most / (double)L;
        }
        free(tr.a);
        free(su.state);
    }

    uint64_t seed = test_seed("sliding_counter_boundary");
    test_rng rng = {seed};
    double random_ratio = 0;
    for (int round = 0; round < 80; round++) {
        uint64_t L = 1 + rng_below(&rng, 40);
        static const uint32_t ks[] = {1, 1, 2, 3, 4, 8};
        uint32_t k = ks[rng_below(&rng, 6)];
        int64_t s = rng_below(&rng, 3) == 0 ? 1 + (int64_t)rng_below(&rng, 100)
                                            : 1 + (int64_t)rng_below(&rng, S);
        setup su = make(WEIR_ALGO_SLIDING_COUNTER, L, s * k, 0, k);
        trace tr = {0};
        random_trace(&su, &rng, s, 5000, &tr);
        uint64_t most = busiest_window(&tr, s * k);
        assert_true(most <= 2 * L - 1);
        if ((double)most / (double)L > random_ratio)
            random_ratio = (double)most / (double)L;
        free(tr.a);
        free(su.state);
    }
    printf("sliding counter: worst window %llu for limit %llu (%.2fL); random traces up to "
           "%.2fL; bound 2L - 1\n",
           (unsigned long long)worst, (unsigned long long)worst_limit, worst_ratio, random_ratio);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fixed_window_doubles_at_the_boundary),
        cmocka_unit_test(sliding_log_never_exceeds_the_limit),
        cmocka_unit_test(sliding_log_bound_holds_on_a_clock_running_backwards),
        cmocka_unit_test(gcra_admits_at_most_burst_plus_limit_minus_one),
        cmocka_unit_test(buckets_admit_at_most_burst_plus_limit_minus_one),
        cmocka_unit_test(sliding_counter_stays_under_twice_the_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
