/*
 * test_warmup.c - the token bucket's warm-up: against a slow reference
 * model on long random traces, the curve a cold key ramps along under
 * load, a key gone cold again after an idle, and the compile rules.
 *
 * The model is written from docs/ALGORITHMS.md ("Warm-up") in another
 * form than lib/algo/bucket.c: it counts the tokens held (not the missing
 * ones) in 128-bit units of 1/window of a request, rounds a cost up to the
 * bucket's exact grain (gcd(limit, window) of those units), and finds the
 * retry and reset times by bisection over its own verdicts at later times.
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

__extension__ typedef unsigned __int128 u128;

#define S ((int64_t)1000000)
#define OPS 150000

/* ------------------------------------------------------------- model */

typedef struct model {
    u128 L, W, B, grain, full;
    u128 warm, cf;
    u128 tokens; /* times W, at `last` */
    int64_t last, heat;
} model;

static u128 gcd128(u128 a, u128 b)
{
    while (b) {
        u128 t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static u128 ceil128(u128 a, u128 b)
{
    return (a + b - 1) / b;
}

static int64_t clamp64(u128 v)
{
    return v > (u128)INT64_MAX ? INT64_MAX : (int64_t)v;
}

static void model_init(model *m, const weir_limit_spec *spec)
{
    memset(m, 0, sizeof(*m));
    m->L = spec->limit;
    m->W = (u128)spec->window_us;
    m->B = spec->burst ? spec->burst : spec->limit;
    m->grain = gcd128(m->L, m->W);
    m->full = m->B * m->W;
    m->tokens = m->full;
    m->warm = (u128)spec->warmup_us;
    m->cf = spec->cold_factor ? spec->cold_factor : 3;
}

/* The key as it would be at t >= last with no other traffic. */
static void model_at(const model *m, int64_t t, u128 *tokens, int64_t *heat)
{
    u128 e = (u128)(t - m->last);
    u128 busy = ceil128(m->full - m->tokens, m->L);
    if (busy > e)
        busy = e;
    u128 h = (u128)m->heat + busy;
    if (h > m->warm)
        h = m->warm;
    u128 idle = e - busy;
    *heat = idle >= h ? 0 : (int64_t)(h - idle);
    u128 tk = m->tokens + e * m->L;
    *tokens = tk > m->full ? m->full : tk;
}

static u128 model_cost(const model *m, u128 hits, int64_t heat)
{
    u128 c = ceil128(hits * m->W * m->cf * m->warm, m->warm + (m->cf - 1) * (u128)heat);
    c = ceil128(c, m->grain) * m->grain;
    return c > m->full ? m->full : c;
}

static bool model_fits(const model *m, int64_t t, uint64_t hits)
{
    u128 tokens;
    int64_t heat;
    model_at(m, t, &tokens, &heat);
    return hits <= m->B && model_cost(m, hits, heat) <= tokens;
}

static bool model_fresh(const model *m, int64_t t)
{
    u128 tokens;
    int64_t heat;
    model_at(m, t, &tokens, &heat);
    return tokens == m->full && heat == 0;
}

/* The least d in (0, hi] for which ok(d) holds, ok being monotonic and
 * true at hi. */
typedef bool (*pred_fn)(const model *m, int64_t t, uint64_t hits);

static int64_t bisect(const model *m, int64_t t, uint64_t hits, pred_fn ok, u128 hi)
{
    u128 lo = 0;
    while (hi - lo > 1) {
        u128 mid = lo + (hi - lo) / 2;
        if (ok(m, t + (int64_t)mid, hits))
            hi = mid;
        else
            lo = mid;
    }
    return clamp64(hi);
}

static bool fresh_pred(const model *m, int64_t t, uint64_t hits)
{
    (void)hits;
    return model_fresh(m, t);
}

static void model_decide(model *m, int64_t now, uint64_t hits, bool commit, weir_result *out)
{
    memset(out, 0, sizeof(*out));
    out->limit = (uint64_t)m->B;
    int64_t t = now < 0 ? 0 : now;
    if (t < m->last)
        t = m->last;
    u128 tokens;
    int64_t heat;
    model_at(m, t, &tokens, &heat);
    uint64_t need = hits ? hits : 1;
    out->allowed = model_fits(m, t, need);
    /* far in the future the waits no longer fit int64: not compared */
    bool far = t > INT64_MAX / 4;
    if (!out->allowed) {
        out->retry_after_us =
            need > m->B ? WEIR_NEVER
                        : (far ? 0 : bisect(m, t, need, model_fits, ceil128(m->full, m->L) + 1));
    } else if (hits > 0) {
        tokens -= model_cost(m, hits, heat);
        if (commit) {
            m->tokens = tokens;
            m->last = t;
            m->heat = heat;
        }
    }
    model m2 = *m;
    m2.tokens = tokens;
    m2.last = t;
    m2.heat = heat;
    out->remaining = (uint64_t)(tokens / model_cost(m, 1, heat));
    if (!model_fresh(&m2, t) && !far)
        out->reset_after_us =
            bisect(&m2, t, 0, fresh_pred, ceil128(m->full, m->L) + m->warm + 1) + (t - now);
    if (out->retry_after_us > 0)
        out->retry_after_us += t - now;
}

/* ------------------------------------------------------------- traces */

static void pick_spec(test_rng *rng, weir_limit_spec *spec)
{
    static const int64_t windows[] = {1, 3, 1000, S, 60 * S, 3600 * S, 86400 * S};
    static const int64_t warmups[] = {1, 7, 1000, S, 30 * S, 3600 * S, WEIR_MAX_WARMUP_US};
    static const uint32_t cfs[] = {0, 1, 2, 3, 7, WEIR_MAX_COLD_FACTOR};
    memset(spec, 0, sizeof(*spec));
    spec->algorithm = WEIR_ALGO_TOKEN_BUCKET;
    uint64_t r = rng_below(rng, 10);
    spec->limit = r < 6 ? 1 + rng_below(rng, 10) : r < 9 ? 1 + rng_below(rng, 5000) : 1u << 20;
    spec->window_us = rng_below(rng, 5) ? windows[rng_below(rng, 7)]
                                        : 1 + (int64_t)rng_below(rng, 100 * (uint64_t)S);
    if (rng_below(rng, 2))
        spec->burst = 1 + rng_below(rng, 3 * spec->limit);
    spec->warmup_us = rng_below(rng, 5) ? warmups[rng_below(rng, 7)]
                                        : 1 + (int64_t)rng_below(rng, 600 * (uint64_t)S);
    spec->cold_factor = cfs[rng_below(rng, 6)];
}

static int64_t next_time(test_rng *rng, int64_t now, const weir_limit_spec *spec)
{
    int64_t spacing = spec->window_us / (int64_t)spec->limit;
    spacing = spacing > 0 ? spacing : 1;
    uint64_t r = rng_below(rng, 100);
    if (r < 20)
        return now;
    if (r < 60)
        return now + (int64_t)rng_below(rng, 4 * (uint64_t)spacing);
    if (r < 70)
        return now + (int64_t)rng_below(rng, (uint64_t)spec->window_us + 1);
    if (r < 78)
        return now + (int64_t)rng_below(rng, 2 * (uint64_t)spec->warmup_us + 1);
    if (r < 90)
        return now - (int64_t)rng_below(rng, 2 * (uint64_t)spacing + 1);
    if (r < 92)
        return -(int64_t)rng_below(rng, 1000);
    return now + 1;
}

static void expect_same(uint64_t seed, int op, const char *what, const weir_result *got,
                        const weir_result *want, bool far)
{
    bool same = got->allowed == want->allowed && got->limit == want->limit &&
                got->remaining == want->remaining &&
                (far || (got->retry_after_us == want->retry_after_us &&
                         got->reset_after_us == want->reset_after_us));
    if (same)
        return;
    print_error("%s differs (seed %llu, op %d)\n  got  allowed=%d rem=%llu retry=%lld "
                "reset=%lld\n  want allowed=%d rem=%llu retry=%lld reset=%lld\n",
                what, (unsigned long long)seed, op, got->allowed,
                (unsigned long long)got->remaining, (long long)got->retry_after_us,
                (long long)got->reset_after_us, want->allowed, (unsigned long long)want->remaining,
                (long long)want->retry_after_us, (long long)want->reset_after_us);
    fail();
}

static void warmup_matches_model(void **unused)
{
    (void)unused;
    uint64_t seed = test_seed("warmup");
    test_rng rng = {seed};
    int done = 0;
    while (done < OPS) {
        weir_limit_spec spec;
        pick_spec(&rng, &spec);
        weir_limit lim;
        if (weir_limit_compile(&spec, &lim) != WEIR_OK)
            continue; /* the bucket's own 63-bit bound (test_property.c) */
        assert_int_equal(weir_state_size(&lim), WEIR_STATE_WARMUP_BYTES);
        model m;
        model_init(&m, &spec);
        void *st = algo_fresh(&lim);
        unsigned char before[WEIR_STATE_WARMUP_BYTES];
        int64_t now = rng_below(&rng, 2) ? 0 : (int64_t)rng_below(&rng, 1u << 30);
        for (int op = 0; op < 400; op++, done++) {
            now = next_time(&rng, now, &spec);
            uint64_t hits = rng_below(&rng, 8) ? 1 : rng_below(&rng, (uint64_t)m.B + 2);
            weir_result got, want;
            bool far = now > INT64_MAX / 4;
            memcpy(before, st, sizeof(before));
            got = algo_check(&lim, st, now, hits);
            model_decide(&m, now, hits, false, &want);
            expect_same(seed, op, "weir_check()", &got, &want, far);
            if (!got.allowed && got.retry_after_us != WEIR_NEVER && !far) {
                /* waiting exactly retry_after is enough, a microsecond less not */
                assert_true(algo_check(&lim, st, now + got.retry_after_us, hits).allowed);
                assert_false(algo_check(&lim, st, now + got.retry_after_us - 1, hits).allowed);
            }
            got = algo_step(&lim, st, now, hits);
            model_decide(&m, now, hits, true, &want);
            expect_same(seed, op, "weir_step()", &got, &want, far);
            if (!got.allowed || hits == 0)
                assert_memory_equal(before, st, sizeof(before));
        }
        free(st);
    }
}

/* ------------------------------------------------------------- the curve */

/* Admissions per second of a key offered a request every millisecond. */
static void saturate(const weir_limit *lim, void *st, int64_t from, int seconds, int *per_second)
{
    for (int s = 0; s < seconds; s++) {
        per_second[s] = 0;
        for (int64_t t = from + s * S; t < from + (s + 1) * S; t += 1000)
            per_second[s] += algo_step(lim, st, t, 1).allowed;
    }
}

static weir_limit warm_limit(uint64_t limit, uint64_t burst, int64_t warmup_us, uint32_t cf)
{
    weir_limit_spec spec = {.algorithm = WEIR_ALGO_TOKEN_BUCKET,
                            .limit = limit,
                            .window_us = S,
                            .burst = burst,
                            .warmup_us = warmup_us,
                            .cold_factor = cf};
    weir_limit lim;
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_OK);
    return lim;
}

/* 100/s, burst 100, warm-up 10 s, cold factor 3, under a load of 1000/s.
 * At heat h (seconds busy) the key admits 100 * (10 + 2h) / 30 a second,
 * so the first second takes the cold burst (100 / 3) plus the integral of
 * that rate over [0, 1] (36.7): about 70 (a warm key takes 200). Second s
 * takes about 100 * (10 + 2s + 1) / 30, and from the 11th on 100. */
static void cold_start_ramps_to_the_limit(void **unused)
{
    (void)unused;
    weir_limit lim = warm_limit(100, 100, 10 * S, 3);
    void *st = algo_fresh(&lim);
    int n[13];
    saturate(&lim, st, 0, 13, n);
    for (int s = 0; s < 13; s++)
        print_message("second %2d: %d admitted\n", s + 1, n[s]);
    assert_in_range(n[0], 65, 75);
    for (int s = 1; s < 10; s++) {
        double want = 100.0 * (10 + 2 * s + 1) / 30;
        assert_in_range(n[s], (int)want - 2, (int)want + 2);
        if (s > 1) /* past the burst it only rises */
            assert_true(n[s] > n[s - 1]);
    }
    for (int s = 10; s < 13; s++)
        assert_in_range(n[s], 99, 101);
    free(st);

    /* the same key without a warm-up: the burst and the limit at once */
    weir_limit_spec plain = {.algorithm = WEIR_ALGO_TOKEN_BUCKET, .limit = 100, .window_us = S};
    assert_int_equal(weir_limit_compile(&plain, &lim), WEIR_OK);
    st = algo_fresh(&lim);
    saturate(&lim, st, 0, 2, n);
    assert_in_range(n[0], 199, 200);
    assert_in_range(n[1], 99, 101);
    free(st);
}

/* A warm key left idle cools a microsecond per microsecond once its
 * bucket is full: idle for the warm-up it is a fresh key again (and
 * reset_after says when); idle for half, it starts half warm. */
static void idle_key_is_cold_again(void **unused)
{
    (void)unused;
    weir_limit lim = warm_limit(100, 100, 10 * S, 3);
    void *st = algo_fresh(&lim);
    int n[13], fresh[2], half[2];
    saturate(&lim, st, 0, 13, n);
    weir_result r = algo_check(&lim, st, 13 * S, 0);
    /* the bucket refills in a second, and the key was warm: 10 s more */
    assert_in_range(r.reset_after_us, 10 * S, 11 * S + 1);
    int64_t cold_at = 13 * S + r.reset_after_us;

    void *other = algo_fresh(&lim);
    saturate(&lim, other, 0, 2, fresh);
    void *copy = algo_fresh(&lim);
    memcpy(copy, st, WEIR_STATE_WARMUP_BYTES);
    saturate(&lim, copy, 13 * S + 6 * S, 2, half); /* 1 s to fill, 5 s cooling */
    saturate(&lim, st, cold_at, 2, n);
    assert_int_equal(n[0], fresh[0]);
    assert_int_equal(n[1], fresh[1]);
    assert_true(half[0] > fresh[0] + 20); /* heat 5 s: about 135 + 100 * 21 / 30 */
    free(other);
    free(copy);
    free(st);
}

/* Cold factor 1 and a full heat are the plain token bucket. */
static void warm_key_is_a_token_bucket(void **unused)
{
    (void)unused;
    weir_limit warm = warm_limit(7, 3, 5 * S, 1);
    weir_limit_spec spec = {
        .algorithm = WEIR_ALGO_TOKEN_BUCKET, .limit = 7, .window_us = S, .burst = 3};
    weir_limit plain;
    assert_int_equal(weir_limit_compile(&spec, &plain), WEIR_OK);
    void *a = algo_fresh(&warm), *b = algo_fresh(&plain);
    test_rng rng = {test_seed("warm_key_is_a_token_bucket")};
    int64_t now = 0;
    for (int i = 0; i < 5000; i++) {
        now += (int64_t)rng_below(&rng, 300000);
        uint64_t hits = rng_below(&rng, 5);
        weir_result x = algo_step(&warm, a, now, hits), y = algo_step(&plain, b, now, hits);
        assert_int_equal(x.allowed, y.allowed);
        assert_int_equal(x.remaining, y.remaining);
        assert_int_equal(x.retry_after_us, y.retry_after_us);
    }
    free(a);
    free(b);
}

/* A cost the cold key cannot hold is charged the whole bucket, so it is
 * admitted from rest and never refused for good. */
static void cold_cost_is_capped_at_the_bucket(void **unused)
{
    (void)unused;
    weir_limit lim = warm_limit(10, 10, 60 * S, 100);
    void *st = algo_fresh(&lim);
    weir_result r = algo_step(&lim, st, 0, 10);
    assert_true(r.allowed);
    assert_int_equal(r.remaining, 0);
    r = algo_step(&lim, st, 0, 1);
    assert_false(r.allowed);
    assert_true(r.retry_after_us > 0 && r.retry_after_us <= S);
    free(st);
}

static void compile_rules(void **unused)
{
    (void)unused;
    weir_limit lim;
    weir_limit_spec spec = {
        .algorithm = WEIR_ALGO_TOKEN_BUCKET, .limit = 10, .window_us = S, .warmup_us = 30 * S};
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_OK);
    assert_int_equal(lim.cold_factor, WEIR_DEFAULT_COLD_FACTOR);
    assert_int_equal(weir_state_size(&lim), WEIR_STATE_WARMUP_BYTES);
    spec.cold_factor = WEIR_MAX_COLD_FACTOR;
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_OK);
    spec.cold_factor = WEIR_MAX_COLD_FACTOR + 1;
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_ERANGE);
    spec.cold_factor = 3;
    spec.warmup_us = WEIR_MAX_WARMUP_US + 1;
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_ERANGE);
    spec.warmup_us = -1;
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_EINVAL);
    spec.warmup_us = 0; /* a cold factor alone */
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_EINVAL);
    spec.cold_factor = 0;
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_OK);
    assert_int_equal(weir_state_size(&lim), WEIR_STATE_FIXED_BYTES);
    spec.warmup_us = S;
    for (int a = 2; a <= WEIR_ALGORITHM_COUNT; a++) {
        spec.algorithm = (weir_algorithm)a;
        assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_EINVAL);
    }
}

static void describe_shows_the_heat(void **unused)
{
    (void)unused;
    weir_limit lim = warm_limit(10, 10, 10 * S, 2);
    void *st = algo_fresh(&lim);
    algo_step(&lim, st, 0, 1);
    weir_state_view v;
    assert_int_equal(weir_state_describe(&lim, st, 100000, &v), WEIR_OK);
    int64_t heat = -1;
    for (uint32_t i = 0; i < v.n_numbers; i++)
        if (strcmp(v.numbers[i].name, "heat_us") == 0)
            heat = v.numbers[i].value;
    /* the cold request cost two tokens, 200 ms of water: busy all along */
    assert_int_equal(heat, 100000);
    /* a heat past the warm-up is not a state of this limit */
    int64_t bad[3] = {0, 0, 10 * S + 1};
    weir_result r;
    assert_int_equal(weir_check(&lim, bad, 0, 1, &r), WEIR_EINVAL);
    free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(warmup_matches_model),
        cmocka_unit_test(cold_start_ramps_to_the_limit),
        cmocka_unit_test(idle_key_is_cold_again),
        cmocka_unit_test(warm_key_is_a_token_bucket),
        cmocka_unit_test(cold_cost_is_capped_at_the_bucket),
        cmocka_unit_test(compile_rules),
        cmocka_unit_test(describe_shows_the_heat),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
