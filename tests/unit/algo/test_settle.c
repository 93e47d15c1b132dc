/*
 * test_settle.c - the TAKE that keeps a reserve (weir_step_reserve()),
 * weir_refund() and weir_charge(), on every algorithm: their contracts
 * checked on random traces (clocks that stall and go back, costs past
 * what a key holds) and hand-derived cases.
 *
 * A reserve: an admission is weir_step()'s and leaves the reserve free, a
 * denial is the check of hits + reserve and changes nothing, the retry
 * promise holds, a smaller reserve admits whatever a larger one does.
 * A refund after a TAKE of the same hits at the same time leaves a state
 * that decides as before the TAKE; a refund never makes the key live
 * longer and changes nothing when it finds nothing. A charge is a TAKE
 * when the TAKE would be admitted, never leaves more remaining than a
 * TAKE, and fills the key when it is more than the key can hold.
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

/* Whether two states decide alike at @now: the same checks of several
 * costs. */
static bool decide_alike(const weir_limit *lim, const void *a, const void *b, int64_t now,
                         uint64_t hits, weir_result *ra, weir_result *rb)
{
    const uint64_t costs[] = {0, 1, 2, hits, most(lim), most(lim) + 1};
    for (size_t i = 0; i < sizeof(costs) / sizeof(costs[0]); i++) {
        assert_int_equal(weir_check(lim, a, now, costs[i], ra), WEIR_OK);
        assert_int_equal(weir_check(lim, b, now, costs[i], rb), WEIR_OK);
        if (!same(ra, rb))
            return false;
    }
    return true;
}

/* One REFUND and one CHARGE checked against their contracts on copies
 * of @state. */
static void settle_once(trace *t, const void *state, void *a, void *b)
{
    const weir_limit *lim = &t->lim;
    size_t n = weir_state_size(lim);
    int64_t now = t->now;
    uint64_t hits = t->hits;
    weir_result r, look, ra, rb, took;

    if (lim->algorithm == WEIR_ALGO_CONCURRENCY) {
        memcpy(a, state, n);
        assert_int_equal(weir_refund(lim, a, now, hits, &r), WEIR_EALGO);
        assert_int_equal(weir_charge(lim, a, now, hits, &r), WEIR_EALGO);
        if (memcmp(a, state, n) != 0)
            fail_trace(t, "a refused op changed the state", NULL, NULL);
        return;
    }

    /* a refund: reports the state after it, never lives longer */
    memcpy(a, state, n);
    assert_int_equal(weir_check(lim, state, now, 0, &look), WEIR_OK);
    assert_int_equal(weir_refund(lim, a, now, hits, &r), WEIR_OK);
    weir_result after;
    assert_int_equal(weir_check(lim, a, now, 0, &after), WEIR_OK);
    if (r.limit != after.limit || r.remaining != after.remaining ||
        r.reset_after_us != after.reset_after_us || r.retry_after_us || r.delay_us || r.lease)
        fail_trace(t, "a refund does not report the state after it", &r, &after);
    if (r.reset_after_us > look.reset_after_us)
        fail_trace(t, "a refund made the key live longer", &r, &look);
    if (r.remaining < look.remaining)
        fail_trace(t, "a refund took capacity away", &r, &look);
    if (!r.allowed && memcmp(a, state, n) != 0)
        fail_trace(t, "a refund that gave nothing back changed the state", &r, NULL);
    if (hits == 0 && r.allowed)
        fail_trace(t, "a refund of 0 gave something back", &r, NULL);

    /* a refund after a TAKE of the same hits at the same time: as before */
    memcpy(a, state, n);
    assert_int_equal(weir_step(lim, a, now, hits, &took), WEIR_OK);
    if (took.allowed && hits > 0) {
        assert_int_equal(weir_refund(lim, a, now, hits, &r), WEIR_OK);
        if (!r.allowed)
            fail_trace(t, "a refund after an admitted TAKE gave nothing back", &r, &took);
        if (!decide_alike(lim, a, state, now, hits, &ra, &rb))
            fail_trace(t, "a refund after a TAKE does not decide as before it", &ra, &rb);
    }

    /* a charge: the TAKE's when admitted, never more remaining than it */
    memcpy(b, state, n);
    assert_int_equal(weir_charge(lim, b, now, hits, &r), WEIR_OK);
    if (!r.allowed || r.retry_after_us || r.delay_us || r.lease)
        fail_trace(t, "a charge is not reported admitted", &r, NULL);
    assert_int_equal(weir_check(lim, b, now, 0, &after), WEIR_OK);
    if (r.remaining != after.remaining || r.reset_after_us != after.reset_after_us)
        fail_trace(t, "a charge does not report the state after it", &r, &after);
    if (r.remaining > took.remaining)
        fail_trace(t, "a charge left more remaining than a TAKE", &r, &took);
    memcpy(a, state, n);
    assert_int_equal(weir_step(lim, a, now, hits, &took), WEIR_OK);
    if (took.allowed && hits > 0 && !decide_alike(lim, a, b, now, hits, &ra, &rb))
        fail_trace(t, "an admissible charge does not decide as its TAKE", &ra, &rb);
    if (hits == 0 && memcmp(b, state, n) != 0)
        fail_trace(t, "a charge of 0 changed the state", NULL, NULL);
    if (hits > most(lim) && r.remaining != 0)
        fail_trace(t, "a charge past what the key holds left some", &r, NULL);
}

static void settle_trace(const char *name, weir_algorithm algo)
{
    trace t = {.name = name, .seed = test_seed(name)};
    test_rng rng = {t.seed};
    for (int round = 0; round < 8; round++) {
        t.lim = random_limit(&rng, algo);
        void *state = algo_fresh(&t.lim), *a = algo_fresh(&t.lim), *b = algo_fresh(&t.lim);
        t.now = rng_below(&rng, 2) ? 0 : (int64_t)1700000000 * S;
        for (t.step = 0; t.step < TRACE_OPS / 8; t.step++) {
            t.now += random_step(&rng, &t.lim);
            t.hits = random_cost(&rng, &t.lim);
            settle_once(&t, state, a, b);
            /* the trace moves on by one of them, or a TAKE */
            weir_result r;
            uint64_t h = random_cost(&rng, &t.lim);
            switch (rng_below(&rng, 4)) {
            case 0:
                weir_refund(&t.lim, state, t.now, h, &r);
                break;
            case 1:
                weir_charge(&t.lim, state, t.now, h, &r);
                break;
            default:
                assert_int_equal(weir_step(&t.lim, state, t.now, h, &r), WEIR_OK);
                break;
            }
        }
        free(state);
        free(a);
        free(b);
    }
}

static void refund_and_charge_keep_their_contract(void **unused)
{
    (void)unused;
    for (size_t i = 0; i < N_ALGORITHMS; i++) {
        char name[64];
        snprintf(name, sizeof(name), "settle:%s", weir_algorithm_name(all_algorithms[i]));
        settle_trace(name, all_algorithms[i]);
    }
}

/* A zero-filled state holds nothing to give back; a charge on it is a
 * TAKE when the TAKE fits, and fills it when not. */
static void fresh_states(void **unused)
{
    (void)unused;
    test_rng rng = {test_seed("fresh_states")};
    for (size_t i = 0; i < N_ALGORITHMS; i++) {
        if (all_algorithms[i] == WEIR_ALGO_CONCURRENCY)
            continue;
        for (int round = 0; round < 50; round++) {
            weir_limit lim = random_limit(&rng, all_algorithms[i]);
            void *st = algo_fresh(&lim), *zero = algo_fresh(&lim);
            size_t n = weir_state_size(&lim);
            weir_result r;
            int64_t now = (int64_t)rng_below(&rng, 1000) * S - 5;
            assert_int_equal(weir_refund(&lim, st, now, 1 + rng_below(&rng, 5), &r), WEIR_OK);
            assert_false(r.allowed);
            assert_int_equal(r.remaining, lim.limit ? most(&lim) : 0);
            assert_int_equal(r.reset_after_us, 0);
            assert_memory_equal(st, zero, n);
            assert_int_equal(weir_charge(&lim, st, now, UINT64_MAX, &r), WEIR_OK);
            assert_true(r.allowed);
            assert_int_equal(r.remaining, 0);
            /* and it refuses more: the key is full */
            assert_int_equal(weir_check(&lim, st, now, 1, &r), WEIR_OK);
            assert_false(r.allowed);
            free(st);
            free(zero);
        }
    }
}

/* Hand-derived refunds and charges. */
static void settle_by_hand(void **unused)
{
    (void)unused;
    weir_result r;
    /* a fixed window of 10 per minute */
    weir_limit fw;
    weir_limit_spec sp = {.algorithm = WEIR_ALGO_FIXED_WINDOW, .limit = 10, .window_us = 60 * S};
    assert_int_equal(weir_limit_compile(&sp, &fw), WEIR_OK);
    void *st = algo_fresh(&fw);
    EXPECT(algo_step(&fw, st, 0, 8), true, 2, 0, 60 * S);           /* reserved 8 */
    assert_int_equal(weir_refund(&fw, st, 10 * S, 5, &r), WEIR_OK); /* used 3 */
    EXPECT(r, true, 7, 0, 50 * S);
    assert_int_equal(weir_charge(&fw, st, 20 * S, 4, &r), WEIR_OK); /* overran by 4 */
    EXPECT(r, true, 3, 0, 40 * S);
    assert_int_equal(weir_charge(&fw, st, 20 * S, 100, &r), WEIR_OK); /* full: no debt */
    EXPECT(r, true, 0, 0, 40 * S);
    assert_int_equal(weir_refund(&fw, st, 20 * S, 100, &r), WEIR_OK); /* all of it */
    EXPECT(r, true, 10, 0, 0);
    EXPECT(algo_step(&fw, st, 30 * S, 1), true, 9, 0, 30 * S);
    /* the window over: nothing to give back, and no key made to live on */
    assert_int_equal(weir_refund(&fw, st, 60 * S, 1, &r), WEIR_OK);
    EXPECT(r, false, 10, 0, 0);
    /* a clock gone back is counted in the state's window */
    EXPECT(algo_step(&fw, st, 61 * S, 2), true, 8, 0, 59 * S);
    assert_int_equal(weir_refund(&fw, st, 59 * S, 1, &r), WEIR_OK);
    EXPECT(r, true, 9, 0, 61 * S);
    free(st);

    /* GCRA, 10 per second, burst 5: 100 ms intervals, 500 ms tolerance */
    weir_limit g;
    sp = (weir_limit_spec){.algorithm = WEIR_ALGO_GCRA, .limit = 10, .window_us = S, .burst = 5};
    assert_int_equal(weir_limit_compile(&sp, &g), WEIR_OK);
    st = algo_fresh(&g);
    EXPECT(algo_step(&g, st, 0, 3), true, 2, 0, 300000);
    assert_int_equal(weir_refund(&g, st, 0, 1, &r), WEIR_OK);
    EXPECT(r, true, 3, 0, 200000);
    /* back no further than now */
    assert_int_equal(weir_refund(&g, st, 150000, 9, &r), WEIR_OK);
    EXPECT(r, true, 5, 0, 0);
    assert_int_equal(weir_refund(&g, st, 150000, 1, &r), WEIR_OK);
    EXPECT(r, false, 5, 0, 0);
    /* a charge past the burst: the TAT at now + 500 ms */
    assert_int_equal(weir_charge(&g, st, 150000, 7, &r), WEIR_OK);
    EXPECT(r, true, 0, 0, 500000);
    free(st);

    /* a token bucket of 4 per second: a charge fills, a refund empties */
    weir_limit tb;
    sp = (weir_limit_spec){.algorithm = WEIR_ALGO_TOKEN_BUCKET, .limit = 4, .window_us = S};
    assert_int_equal(weir_limit_compile(&sp, &tb), WEIR_OK);
    st = algo_fresh(&tb);
    assert_int_equal(weir_charge(&tb, st, 0, 6, &r), WEIR_OK);
    EXPECT(r, true, 0, 0, S);
    assert_int_equal(weir_refund(&tb, st, 500000, 1, &r), WEIR_OK); /* 2 left, 1 back */
    EXPECT(r, true, 3, 0, 250000);
    free(st);

    /* the sliding log: the newest entries go */
    weir_limit lg;
    sp = (weir_limit_spec){.algorithm = WEIR_ALGO_SLIDING_LOG, .limit = 3, .window_us = 10 * S};
    assert_int_equal(weir_limit_compile(&sp, &lg), WEIR_OK);
    st = algo_fresh(&lg);
    EXPECT(algo_step(&lg, st, 0, 1), true, 2, 0, 10 * S);
    EXPECT(algo_step(&lg, st, 4 * S, 2), true, 0, 0, 10 * S);
    assert_int_equal(weir_refund(&lg, st, 5 * S, 2, &r), WEIR_OK);
    EXPECT(r, true, 2, 0, 5 * S);
    assert_int_equal(weir_charge(&lg, st, 6 * S, 5, &r), WEIR_OK);
    EXPECT(r, true, 0, 0, 10 * S);
    free(st);

    /* concurrency: leases go back by weir_release() */
    weir_limit cc;
    sp = (weir_limit_spec){.algorithm = WEIR_ALGO_CONCURRENCY, .limit = 3, .window_us = S};
    assert_int_equal(weir_limit_compile(&sp, &cc), WEIR_OK);
    st = algo_fresh(&cc);
    assert_int_equal(weir_refund(&cc, st, 0, 1, &r), WEIR_EALGO);
    assert_int_equal(weir_charge(&cc, st, 0, 1, &r), WEIR_EALGO);
    /* a ban holds nothing */
    weir_limit ban;
    sp = (weir_limit_spec){.algorithm = WEIR_ALGO_FIXED_WINDOW, .limit = 0, .window_us = S};
    assert_int_equal(weir_limit_compile(&sp, &ban), WEIR_OK);
    assert_int_equal(weir_charge(&ban, st, 0, 5, &r), WEIR_OK);
    EXPECT(r, true, 0, 0, 0);
    assert_int_equal(weir_refund(&ban, st, 0, 5, &r), WEIR_OK);
    EXPECT(r, false, 0, 0, 0);
    /* arguments */
    assert_int_equal(weir_refund(NULL, st, 0, 1, &r), WEIR_EINVAL);
    assert_int_equal(weir_charge(&fw, NULL, 0, 1, &r), WEIR_EINVAL);
    assert_int_equal(weir_charge(&fw, st, 0, 1, NULL), WEIR_EINVAL);
    free(st);
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
        cmocka_unit_test(refund_and_charge_keep_their_contract),
        cmocka_unit_test(fresh_states),
        cmocka_unit_test(settle_by_hand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
