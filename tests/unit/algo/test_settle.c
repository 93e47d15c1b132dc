/*
 * test_settle.c - the TAKE that keeps a reserve (weir_step_reserve()), on
 * every algorithm: its contract checked on random traces (an admission is
 * weir_step()'s and leaves the reserve free, a denial is the check of
 * hits + reserve and changes nothing, the retry promise holds, a smaller
 * reserve admits whatever a larger one does), and hand-derived cases.
 * Each trace prints its seed; replay a failure with WEIR_TEST_SEED=<seed>.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "algo_support.h"
#include "fake.h"
#include "weir/weir.h"

#define S ((int64_t)1000000)
#define TRACE_OPS 4000

static const weir_algorithm all_algorithms[] = {
#define ALGO_ROW_(e, num, name, var) WEIR_ALGO_##e,
    WEIR_ALGORITHM_MAP(ALGO_ROW_)
#undef ALGO_ROW_
};
#define N_ALGORITHMS (sizeof(all_algorithms) / sizeof(all_algorithms[0]))

/* A small random limit of @a: small enough that traces fill it. */
static weir_limit random_limit(test_rng *rng, weir_algorithm a)
{
    static const uint64_t limits[] = {0, 1, 1, 2, 3, 5, 7, 10, 60, 100};
    static const int64_t windows[] = {1, 7, 1000, 999, S, 7 * S, 60 * S, 3600 * S, 100};
    for (;;) {
        weir_limit_spec sp = {.algorithm = a};
        sp.limit = limits[rng_below(rng, sizeof(limits) / sizeof(limits[0]))];
        sp.window_us = windows[rng_below(rng, sizeof(windows) / sizeof(windows[0]))];
        if (rng_below(rng, 3) == 0)
            sp.burst = 1 + rng_below(rng, 2 * sp.limit + 3);
        if (a == WEIR_ALGO_SLIDING_COUNTER)
            sp.sub_windows = (uint32_t)(1 + rng_below(rng, 4));
        weir_limit lim;
        if (weir_limit_compile(&sp, &lim) == WEIR_OK)
            return lim;
    }
}

/* The most one request can ever be admitted for. */
static uint64_t most(const weir_limit *lim)
{
    return lim->burst ? lim->burst : lim->limit;
}

static uint64_t random_cost(test_rng *rng, const weir_limit *lim)
{
    uint64_t top = most(lim) + 2;
    switch (rng_below(rng, 10)) {
    case 0:
        return 0;
    case 1:
        return rng_below(rng, 4) == 0 ? UINT64_MAX : top;
    case 2:
    case 3:
        return 1 + rng_below(rng, top);
    default:
        return 1;
    }
}

static int64_t random_step(test_rng *rng, const weir_limit *lim)
{
    int64_t w = lim->window_us, per = w / (int64_t)(lim->limit ? lim->limit : 1);
    switch (rng_below(rng, 8)) {
    case 0:
        return 0;
    case 1:
        return -(int64_t)rng_below(rng, (uint64_t)w + 1); /* a clock going back */
    case 2:
        return (int64_t)rng_below(rng, 3 * (uint64_t)w + 1);
    default:
        return (int64_t)rng_below(rng, (uint64_t)per + 2);
    }
}

static bool same(const weir_result *a, const weir_result *b)
{
    return a->allowed == b->allowed && a->limit == b->limit && a->remaining == b->remaining &&
           a->reset_after_us == b->reset_after_us && a->retry_after_us == b->retry_after_us &&
           a->delay_us == b->delay_us && a->lease == b->lease;
}

static void print_result(const char *who, const weir_result *r)
{
    print_message("  %-8s allowed %d limit %llu remaining %llu reset %lld retry %lld delay %lld "
                  "lease %llu\n",
                  who, (int)r->allowed, (unsigned long long)r->limit,
                  (unsigned long long)r->remaining, (long long)r->reset_after_us,
                  (long long)r->retry_after_us, (long long)r->delay_us,
                  (unsigned long long)r->lease);
}

typedef struct trace {
    const char *name;
    uint64_t seed;
    size_t step;
    weir_limit lim;
    int64_t now;
    uint64_t hits, reserve;
} trace;

static void fail_trace(const trace *t, const char *what, const weir_result *got,
                       const weir_result *want)
{
    print_message("%s: %s (seed %llu, step %zu): %s limit %llu window %lld burst %llu k %u, "
                  "now %lld hits %llu reserve %llu\n",
                  t->name, what, (unsigned long long)t->seed, t->step,
                  weir_algorithm_name(t->lim.algorithm), (unsigned long long)t->lim.limit,
                  (long long)t->lim.window_us, (unsigned long long)t->lim.burst, t->lim.sub_windows,
                  (long long)t->now, (unsigned long long)t->hits, (unsigned long long)t->reserve);
    if (got)
        print_result("got", got);
    if (want)
        print_result("want", want);
    fail_msg("%s (seed %llu)", what, (unsigned long long)t->seed);
}

static uint64_t sat_add_u(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* One TAKE with a reserve on @state, checked against its contract; the
 * state is left as weir_step_reserve() leaves it. */
static void reserve_once(trace *t, void *state, void *scratch)
{
    const weir_limit *lim = &t->lim;
    size_t n = weir_state_size(lim);
    int64_t now = t->now;
    uint64_t hits = t->hits, reserve = t->reserve;
    weir_result got, want;

    memcpy(scratch, state, n);
    assert_int_equal(weir_step_reserve(lim, state, now, hits, reserve, &got), WEIR_OK);
    weir_result look;
    assert_int_equal(weir_check(lim, scratch, now, sat_add_u(hits ? hits : 1, reserve), &look),
                     WEIR_OK);
    if (!look.allowed) {
        /* denied by the reserve: that check's result, nothing changed */
        if (!same(&got, &look))
            fail_trace(t, "a denial is not the check of hits + reserve", &got, &look);
        if (memcmp(state, scratch, n) != 0)
            fail_trace(t, "a denial changed the state", NULL, NULL);
        if (sat_add_u(hits ? hits : 1, reserve) > most(lim) && got.retry_after_us != WEIR_NEVER)
            fail_trace(t, "more than the key can hold is not 'never'", &got, NULL);
        return;
    }
    /* admitted: exactly weir_step() of hits, and the reserve is left */
    assert_int_equal(weir_step(lim, scratch, now, hits, &want), WEIR_OK);
    if (!same(&got, &want))
        fail_trace(t, "an admission is not weir_step()'s", &got, &want);
    if (memcmp(state, scratch, n) != 0)
        fail_trace(t, "an admission left another state than weir_step()", NULL, NULL);
    if (!got.allowed)
        fail_trace(t, "the check admitted, the step denied", &got, NULL);
    if (got.remaining < reserve + (hits ? 0 : 1))
        fail_trace(t, "the reserve is not left free", &got, NULL);
}

/* A smaller reserve admits whatever a larger one admits; the retry time
 * of a denial is a promise (waiting that long, with no other traffic, is
 * enough). */
static void reserve_order(trace *t, const void *state, void *scratch)
{
    const weir_limit *lim = &t->lim;
    size_t n = weir_state_size(lim);
    weir_result big, small;
    memcpy(scratch, state, n);
    assert_int_equal(weir_step_reserve(lim, scratch, t->now, t->hits, t->reserve, &big), WEIR_OK);
    memcpy(scratch, state, n);
    uint64_t less = t->reserve ? rng_below(&(test_rng){t->seed ^ t->step}, t->reserve) : 0;
    assert_int_equal(weir_step_reserve(lim, scratch, t->now, t->hits, less, &small), WEIR_OK);
    if (big.allowed && !small.allowed)
        fail_trace(t, "a smaller reserve is denied where a larger one admits", &small, &big);
    if (!big.allowed && big.retry_after_us > 0 && t->hits > 0) {
        memcpy(scratch, state, n);
        weir_result later;
        int64_t at = t->now + big.retry_after_us;
        assert_int_equal(weir_step_reserve(lim, scratch, at, t->hits, t->reserve, &later), WEIR_OK);
        if (!later.allowed)
            fail_trace(t, "not admitted after its retry time", &later, &big);
    }
}

static void reserve_trace(const char *name, weir_algorithm a)
{
    trace t = {.name = name, .seed = test_seed(name)};
    test_rng rng = {t.seed};
    for (int round = 0; round < 8; round++) {
        t.lim = random_limit(&rng, a);
        void *state = algo_fresh(&t.lim), *scratch = algo_fresh(&t.lim);
        t.now = rng_below(&rng, 2) ? 0 : (int64_t)1700000000 * S;
        for (t.step = 0; t.step < TRACE_OPS / 8; t.step++) {
            t.now += random_step(&rng, &t.lim);
            t.hits = random_cost(&rng, &t.lim);
            t.reserve = rng_below(&rng, 4) == 0 ? 0 : random_cost(&rng, &t.lim);
            if (t.reserve == UINT64_MAX && rng_below(&rng, 2))
                t.reserve = UINT64_MAX - 1;
            reserve_order(&t, state, scratch);
            reserve_once(&t, state, scratch);
            /* plain traffic between, so states fill and drain */
            if (rng_below(&rng, 2)) {
                weir_result r;
                assert_int_equal(weir_step(&t.lim, state, t.now, 1 + rng_below(&rng, 2), &r),
                                 WEIR_OK);
            }
        }
        free(state);
        free(scratch);
    }
}

static void reserve_keeps_its_contract(void **unused)
{
    (void)unused;
    for (size_t i = 0; i < N_ALGORITHMS; i++) {
        char name[64];
        snprintf(name, sizeof(name), "reserve:%s", weir_algorithm_name(all_algorithms[i]));
        reserve_trace(name, all_algorithms[i]);
    }
}

/* Hand-derived: a fixed window of 10 per minute. */
static void reserve_fixed_window(void **unused)
{
    (void)unused;
    weir_limit lim;
    weir_limit_spec sp = {.algorithm = WEIR_ALGO_FIXED_WINDOW, .limit = 10, .window_us = 60 * S};
    assert_int_equal(weir_limit_compile(&sp, &lim), WEIR_OK);
    void *st = algo_fresh(&lim);
    weir_result r;
    /* 3 with 7 kept free: 10 fit, admitted, 7 remain */
    assert_int_equal(weir_step_reserve(&lim, st, 0, 3, 7, &r), WEIR_OK);
    EXPECT(r, true, 7, 0, 60 * S);
    /* 1 more with 7 free: 8 do not fit in 7; wait for the window */
    assert_int_equal(weir_step_reserve(&lim, st, 10 * S, 1, 7, &r), WEIR_OK);
    EXPECT(r, false, 7, 50 * S, 50 * S);
    /* without the reserve it is admitted */
    assert_int_equal(weir_step_reserve(&lim, st, 10 * S, 1, 0, &r), WEIR_OK);
    EXPECT(r, true, 6, 0, 50 * S);
    /* a peek with a reserve: would 1 + 5 fit in 6? yes; nothing charged */
    assert_int_equal(weir_step_reserve(&lim, st, 10 * S, 0, 5, &r), WEIR_OK);
    EXPECT(r, true, 6, 0, 50 * S);
    assert_int_equal(weir_step_reserve(&lim, st, 10 * S, 0, 6, &r), WEIR_OK);
    EXPECT(r, false, 6, 50 * S, 50 * S);
    /* more than the window can ever hold: never */
    assert_int_equal(weir_step_reserve(&lim, st, 10 * S, 1, 10, &r), WEIR_OK);
    EXPECT(r, false, 6, WEIR_NEVER, 50 * S);
    assert_int_equal(weir_step_reserve(&lim, st, 10 * S, 1, UINT64_MAX, &r), WEIR_OK);
    EXPECT(r, false, 6, WEIR_NEVER, 50 * S);
    free(st);
}

/* An adaptive concurrency limit: a limiter of 10 held at 4 is a reserve
 * of 6. */
static void reserve_concurrency(void **unused)
{
    (void)unused;
    weir_limit lim;
    weir_limit_spec sp = {.algorithm = WEIR_ALGO_CONCURRENCY, .limit = 10, .window_us = 30 * S};
    assert_int_equal(weir_limit_compile(&sp, &lim), WEIR_OK);
    void *st = algo_fresh(&lim);
    weir_result r;
    uint64_t leases[4];
    for (int i = 0; i < 4; i++) {
        assert_int_equal(weir_step_reserve(&lim, st, i * S, 1, 6, &r), WEIR_OK);
        assert_true(r.allowed);
        assert_int_equal(r.remaining, 9 - (uint64_t)i);
        leases[i] = r.lease;
    }
    /* the fifth would leave 5 free: denied until the first lease times out */
    assert_int_equal(weir_step_reserve(&lim, st, 5 * S, 1, 6, &r), WEIR_OK);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_us, 25 * S);
    assert_int_equal(r.lease, 0);
    /* a release makes room */
    assert_int_equal(weir_release(&lim, st, 5 * S, leases[2], &r), WEIR_OK);
    assert_int_equal(weir_step_reserve(&lim, st, 5 * S, 1, 6, &r), WEIR_OK);
    assert_true(r.allowed);
    assert_int_not_equal(r.lease, 0);
    free(st);
}

/* Arguments: what weir_step() refuses, weir_step_reserve() refuses. */
static void reserve_arguments(void **unused)
{
    (void)unused;
    weir_limit lim;
    weir_limit_spec sp = {.algorithm = WEIR_ALGO_GCRA, .limit = 10, .window_us = S, .burst = 5};
    assert_int_equal(weir_limit_compile(&sp, &lim), WEIR_OK);
    void *st = algo_fresh(&lim);
    weir_result r;
    assert_int_equal(weir_step_reserve(NULL, st, 0, 1, 1, &r), WEIR_EINVAL);
    assert_int_equal(weir_step_reserve(&lim, NULL, 0, 1, 1, &r), WEIR_EINVAL);
    assert_int_equal(weir_step_reserve(&lim, st, 0, 1, 1, NULL), WEIR_EINVAL);
    int64_t bad = -1;
    memcpy(st, &bad, sizeof(bad));
    assert_int_equal(weir_step_reserve(&lim, st, 0, 1, 1, &r), WEIR_EINVAL);
    assert_int_equal(weir_step_reserve(&lim, st, 0, 1, 0, &r), WEIR_EINVAL);
    free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reserve_keeps_its_contract),
        cmocka_unit_test(reserve_fixed_window),
        cmocka_unit_test(reserve_concurrency),
        cmocka_unit_test(reserve_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
