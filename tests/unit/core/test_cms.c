/*
 * test_cms.c - the count-min limiter (weir/cms.h) against exact counts:
 * options and caps, a lone key admitted exactly up to its limit, peeks,
 * window rotation and a clock going backwards, retry_after, and the
 * central guarantee on a Zipf and a uniform trace over sketches far too
 * small for their keys: no estimate ever below the exact count, no key
 * ever admitted past its limit in a window. The traces' seed is printed
 * (WEIR_TEST_SEED replays one).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fake.h"
#include "weir/cms.h"

#define SECOND 1000000

static weir_ctx *ctx;

static int setup(void **unused)
{
    (void)unused;
    return weir_ctx_new(NULL, &ctx) == WEIR_OK ? 0 : -1;
}

static int teardown(void **unused)
{
    (void)unused;
    weir_ctx_free(ctx);
    return 0;
}

static weir_cms *limiter(uint64_t limit, int64_t window_us, uint32_t width, uint32_t depth)
{
    weir_cms_options o = {.size = sizeof(o),
                          .limit = limit,
                          .window_us = window_us,
                          .width = width,
                          .depth = depth,
                          .seed = 42};
    weir_cms *c = NULL;
    assert_int_equal(weir_cms_new(ctx, &o, &c), WEIR_OK);
    return c;
}

static weir_result take(weir_cms *c, const char *key, int64_t now_us, uint64_t hits)
{
    weir_result r;
    memset(&r, 0xa5, sizeof(r));
    assert_int_equal(weir_cms_take(c, key, strlen(key), now_us, hits, &r), WEIR_OK);
    return r;
}

static uint64_t estimate(const weir_cms *c, const void *key, size_t len, int64_t now_us)
{
    uint64_t e = UINT64_MAX;
    assert_int_equal(weir_cms_estimate(c, key, len, now_us, &e), WEIR_OK);
    return e;
}

/* ------------------------------------------------------------ options */

static weir_status make(weir_cms_options o)
{
    weir_cms *c = NULL;
    weir_status st = weir_cms_new(ctx, &o, &c);
    assert_true(st == WEIR_OK ? c != NULL : c == NULL);
    weir_cms_free(c);
    return st;
}

static void options_validated(void **unused)
{
    (void)unused;
    weir_cms_options o = {.size = sizeof(o), .limit = 10, .window_us = SECOND};
    weir_cms *c = NULL;
    assert_int_equal(weir_cms_new(NULL, &o, &c), WEIR_EINVAL);
    assert_int_equal(weir_cms_new(ctx, NULL, &c), WEIR_EINVAL);
    assert_int_equal(weir_cms_new(ctx, &o, NULL), WEIR_EINVAL);
    assert_null(c);
    weir_cms_free(NULL);

    weir_cms_options b = o;
    b.size = sizeof(o) - 1;
    assert_int_equal(make(b), WEIR_EINVAL);
    b = o, b.window_us = 0;
    assert_int_equal(make(b), WEIR_EINVAL);
    b = o, b.window_us = -SECOND;
    assert_int_equal(make(b), WEIR_EINVAL);
    b = o, b.width = 1024, b.memory_bytes = 1 << 20;
    assert_int_equal(make(b), WEIR_EINVAL);

    /* each cap, at its edge and one past it */
    b = o, b.limit = WEIR_CMS_MAX_LIMIT;
    assert_int_equal(make(b), WEIR_OK);
    b.limit++;
    assert_int_equal(make(b), WEIR_ERANGE);
    b = o, b.window_us = WEIR_MAX_WINDOW_US;
    assert_int_equal(make(b), WEIR_OK);
    b.window_us++;
    assert_int_equal(make(b), WEIR_ERANGE);
    b = o, b.width = 1, b.depth = WEIR_CMS_MAX_DEPTH;
    assert_int_equal(make(b), WEIR_OK);
    b.depth++;
    assert_int_equal(make(b), WEIR_ERANGE);
    b = o, b.width = WEIR_CMS_MAX_WIDTH, b.depth = 1;
    assert_int_equal(make(b), WEIR_ERANGE); /* 2 GiB of counters */
    b.width = WEIR_CMS_MAX_WIDTH + 1;
    assert_int_equal(make(b), WEIR_ERANGE);
    b = o, b.memory_bytes = WEIR_CMS_MAX_BYTES + 1;
    assert_int_equal(make(b), WEIR_ERANGE);
    b = o, b.memory_bytes = 1000;
    assert_int_equal(make(b), WEIR_ERANGE); /* not even the locks fit */
}

/* A budget gives the widest sketch that fits it; the defaults are used. */
static void budget_respected(void **unused)
{
    (void)unused;
    size_t budgets[] = {64 * 1024, 1000000, 4u << 20};
    uint32_t depths[] = {1, 3, 4, 7};
    for (size_t i = 0; i < sizeof(budgets) / sizeof(*budgets); i++) {
        for (size_t j = 0; j < sizeof(depths) / sizeof(*depths); j++) {
            weir_cms_options o = {.size = sizeof(o),
                                  .limit = 1,
                                  .window_us = 1,
                                  .depth = depths[j],
                                  .memory_bytes = budgets[i]};
            weir_cms *c = NULL;
            assert_int_equal(weir_cms_new(ctx, &o, &c), WEIR_OK);
            weir_cms_stats st;
            weir_cms_stats_get(c, &st);
            assert_int_equal(st.depth, depths[j]);
            assert_true(st.bytes <= budgets[i]);
            /* one more counter a row would not fit */
            assert_true(st.bytes + (size_t)st.depth * WEIR_CMS_COUNTER_BYTES > budgets[i]);
            weir_cms_free(c);
        }
    }
    weir_cms_options d = {.size = sizeof(d), .limit = 1, .window_us = 1};
    weir_cms *c = NULL;
    assert_int_equal(weir_cms_new(ctx, &d, &c), WEIR_OK);
    weir_cms_stats st;
    weir_cms_stats_get(c, &st);
    assert_int_equal(st.depth, WEIR_CMS_DEFAULT_DEPTH);
    assert_true(st.bytes <= WEIR_CMS_DEFAULT_BYTES && st.width > 1000);
    weir_cms_stats_get(c, NULL);
    weir_cms_stats_get(NULL, &st);
    weir_cms_free(c);

    /* the context's allocator holds exactly `bytes`, and gets it back */
    counting_alloc a;
    weir_ctx *counting = NULL;
    assert_int_equal(counting_ctx_new(&a, &counting), WEIR_OK);
    int64_t before = a.live_bytes;
    assert_int_equal(weir_cms_new(counting, &d, &c), WEIR_OK);
    weir_cms_stats_get(c, &st);
    assert_int_equal(a.live_bytes - before, st.bytes);
    weir_cms_free(c);
    assert_int_equal(a.live_bytes, before);
    /* out of memory: an error, nothing written */
    c = NULL;
    a.fail_after = 1;
    assert_int_equal(weir_cms_new(counting, &d, &c), WEIR_ENOMEM);
    assert_null(c);
    weir_ctx_free(counting);
}

static void keys_checked(void **unused)
{
    (void)unused;
    weir_cms *c = limiter(3, SECOND, 64, 2);
    weir_result r;
    uint64_t e;
    static char big[WEIR_CMS_MAX_KEY_BYTES + 1];
    assert_int_equal(weir_cms_take(NULL, "k", 1, 0, 1, &r), WEIR_EINVAL);
    assert_int_equal(weir_cms_take(c, "k", 1, 0, 1, NULL), WEIR_EINVAL);
    assert_int_equal(weir_cms_take(c, NULL, 1, 0, 1, &r), WEIR_EINVAL);
    assert_int_equal(weir_cms_take(c, big, sizeof(big), 0, 1, &r), WEIR_ERANGE);
    assert_int_equal(weir_cms_estimate(c, big, sizeof(big), 0, &e), WEIR_ERANGE);
    assert_int_equal(weir_cms_estimate(NULL, "k", 1, 0, &e), WEIR_EINVAL);
    assert_int_equal(weir_cms_estimate(c, "k", 1, 0, NULL), WEIR_EINVAL);
    assert_int_equal(weir_cms_estimate(c, NULL, 1, 0, &e), WEIR_EINVAL);
    /* nothing was counted by the refused calls */
    assert_int_equal(estimate(c, "k", 1, 0), 0);
    assert_int_equal(estimate(c, big, sizeof(big) - 1, 0), 0);
    /* the empty key and the longest one are keys like any other */
    assert_int_equal(weir_cms_take(c, NULL, 0, 0, 2, &r), WEIR_OK);
    assert_true(r.allowed);
    assert_int_equal(estimate(c, "", 0, 0), 2);
    assert_int_equal(weir_cms_take(c, big, sizeof(big) - 1, 0, 3, &r), WEIR_OK);
    assert_true(r.allowed);
    assert_true(estimate(c, big, sizeof(big) - 1, 0) >= 3);
    weir_cms_free(c);
}

/* ------------------------------------------------------------ verdicts */

/* Alone in its sketch, a key is counted exactly: limit admitted, no more. */
static void lone_key_exact(void **unused)
{
    (void)unused;
    weir_cms *c = limiter(5, 10 * SECOND, 1024, 4);
    int64_t t = 3 * SECOND; /* in the window [0, 10 s) */
    for (uint64_t i = 1; i <= 5; i++) {
        weir_result r = take(c, "ip=203.0.113.9", t, 1);
        assert_true(r.allowed);
        assert_int_equal(r.limit, 5);
        assert_int_equal(r.remaining, 5 - i);
        assert_int_equal(r.reset_after_us, 7 * SECOND);
        assert_int_equal(r.retry_after_us, 0);
        assert_int_equal(r.delay_us, 0);
        assert_int_equal(r.lease, 0);
    }
    weir_result r = take(c, "ip=203.0.113.9", t + 1, 1);
    assert_false(r.allowed);
    assert_int_equal(r.remaining, 0);
    assert_int_equal(r.retry_after_us, 7 * SECOND - 1);
    assert_int_equal(r.reset_after_us, 7 * SECOND - 1);
    assert_int_equal(estimate(c, "ip=203.0.113.9", 14, t), 5);

    /* a cost: admitted while it fits, as a whole or not at all */
    r = take(c, "b", t, 3);
    assert_true(r.allowed);
    assert_int_equal(r.remaining, 2);
    r = take(c, "b", t, 3);
    assert_false(r.allowed);
    assert_int_equal(r.remaining, 2);
    r = take(c, "b", t, 2);
    assert_true(r.allowed);
    assert_int_equal(r.remaining, 0);
    /* more than the limit: never */
    r = take(c, "c", t, 6);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_us, WEIR_NEVER);
    assert_int_equal(r.remaining, 5);
    assert_int_equal(r.reset_after_us, 0);
    assert_int_equal(estimate(c, "c", 1, t), 0);
    r = take(c, "c", t, UINT64_MAX);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_us, WEIR_NEVER);
    weir_cms_free(c);
}

static void ban(void **unused)
{
    (void)unused;
    weir_cms *c = limiter(0, SECOND, 16, 1);
    weir_result r = take(c, "k", 0, 1);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_us, WEIR_NEVER);
    assert_int_equal(r.remaining, 0);
    r = take(c, "k", 0, 0);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_us, WEIR_NEVER);
    weir_cms_free(c);
}

static void peeks(void **unused)
{
    (void)unused;
    weir_cms *c = limiter(2, SECOND, 256, 3);
    for (int i = 0; i < 3; i++) {
        weir_result r = take(c, "k", 100, 0);
        assert_true(r.allowed);
        assert_int_equal(r.remaining, 2);
        assert_int_equal(r.reset_after_us, 0);
    }
    assert_int_equal(estimate(c, "k", 1, 100), 0);
    assert_true(take(c, "k", 100, 2).allowed);
    weir_result r = take(c, "k", 200, 0);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_us, SECOND - 200);
    assert_int_equal(r.reset_after_us, SECOND - 200);
    assert_int_equal(estimate(c, "k", 1, 200), 2);
    /* a check of a cost: the take's verdict, nothing counted */
    for (uint64_t h = 0; h <= 6; h++) {
        weir_cms *d = limiter(5, SECOND, 256, 3);
        assert_true(take(d, "j", 10, 2).allowed);
        weir_result chk, tk;
        assert_int_equal(weir_cms_check(d, "j", 1, 20, h, &chk), WEIR_OK);
        assert_int_equal(estimate(d, "j", 1, 20), 2);
        assert_int_equal(weir_cms_take(d, "j", 1, 20, h, &tk), WEIR_OK);
        assert_int_equal(chk.allowed, h <= 3);
        assert_memory_equal(&chk, &tk, sizeof(chk));
        assert_int_equal(weir_cms_check(NULL, "j", 1, 0, 1, &r), WEIR_EINVAL);
        assert_int_equal(weir_cms_check(d, "j", 1, 0, 1, NULL), WEIR_EINVAL);
        weir_cms_free(d);
    }
    /* a peek never opens a window: the latest stays where requests left it */
    r = take(c, "k", 5 * SECOND, 0);
    assert_true(r.allowed);
    weir_cms_stats st;
    weir_cms_stats_get(c, &st);
    assert_int_equal(st.window, 0);
    assert_int_equal(estimate(c, "k", 1, 0), 2);
    weir_cms_free(c);
}

/* Windows end on multiples of the window; an earlier time is decided in
 * the latest window, which never reopens one that ended. */
static void rotation(void **unused)
{
    (void)unused;
    weir_cms *c = limiter(3, SECOND, 512, 4);
    for (int64_t w = 0; w < 5; w++) {
        int64_t t = w * SECOND + SECOND / 2;
        for (int i = 0; i < 3; i++)
            assert_true(take(c, "k", t, 1).allowed);
        assert_false(take(c, "k", t + SECOND / 2 - 1, 1).allowed);
        assert_true(take(c, "k2", t, 3).allowed);
        weir_cms_stats st;
        weir_cms_stats_get(c, &st);
        assert_int_equal(st.window, w);
    }
    /* back to window 1's time: still window 4, full */
    weir_result r = take(c, "k", SECOND + 1, 1);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_us, 5 * SECOND - (SECOND + 1));
    assert_int_equal(estimate(c, "k", 1, 0), 3);
    /* negative times are 0, and decided in the latest window too */
    r = take(c, "k", -5, 1);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_us, 5 * SECOND);
    /* a long idle time: counters of long-gone windows read 0 */
    int64_t far = 1000000 * (int64_t)SECOND + 7;
    assert_int_equal(estimate(c, "k", 1, far), 0);
    r = take(c, "k", far, 3);
    assert_true(r.allowed);
    assert_int_equal(r.reset_after_us, SECOND - 7);
    /* the end of time: no overflow, windows still end */
    r = take(c, "k", INT64_MAX, 1);
    assert_true(r.allowed);
    assert_true(r.reset_after_us >= 0);
    r = take(c, "k", INT64_MAX, 3);
    assert_false(r.allowed);
    assert_true(r.retry_after_us >= 0);
    weir_cms_free(c);
}

/* Waiting exactly retry_after_us is enough, one microsecond less is not. */
static void retry_after_enough(void **unused)
{
    (void)unused;
    uint64_t seed = test_seed("retry_after_enough");
    test_rng g = {seed};
    for (int round = 0; round < 200; round++) {
        int64_t window = 1 + (int64_t)rng_below(&g, 10 * SECOND);
        uint64_t limit = 1 + rng_below(&g, 20);
        weir_cms *c = limiter(limit, window, 128, 3);
        int64_t t = (int64_t)rng_below(&g, 1000 * SECOND);
        uint64_t hits = 1 + rng_below(&g, limit);
        weir_result r;
        uint64_t admitted = 0;
        while ((r = take(c, "k", t, hits)).allowed) {
            assert_true(++admitted <= limit);
            t += (int64_t)rng_below(&g, 2);
        }
        assert_true(r.retry_after_us > 0);
        if (r.retry_after_us > 1)
            assert_false(take(c, "k", t + r.retry_after_us - 1, hits).allowed);
        assert_true(take(c, "k", t + r.retry_after_us, hits).allowed);
        weir_cms_free(c);
    }
}

/* ------------------------------------------------------------ against exact counts */

#define TRACE_KEYS 4000u

static size_t key_of(uint32_t id, char *buf)
{
    return (size_t)snprintf(buf, 24, "198.51.%u.%u", id >> 8, id & 255u);
}

/* A Zipf(s) draw over [0, n): the inverse of the CDF in @cdf. */
static uint32_t zipf_draw(test_rng *g, const double *cdf, uint32_t n)
{
    double u = (double)(rng_next(g) >> 11) * 0x1p-53;
    uint32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

typedef struct trace_stats {
    uint64_t admitted, denied, false_denials;
    double over_sum;
    uint64_t keys_seen;
} trace_stats;

/* Run @requests requests of cost 1..3 over TRACE_KEYS keys (Zipf(1.1)
 * when @zipf, else uniform) through @c, 8 windows of them, counting
 * exactly beside it: no estimate below the exact count, ever; no key past
 * the limit in a window; a denial only when the estimate says so. */
static trace_stats run_trace(weir_cms *c, uint64_t limit, bool zipf, uint64_t requests,
                             uint64_t seed)
{
    static double cdf[TRACE_KEYS];
    double sum = 0;
    for (uint32_t i = 0; i < TRACE_KEYS; i++)
        cdf[i] = sum += 1.0 / pow(i + 1.0, 1.1);
    for (uint32_t i = 0; i < TRACE_KEYS; i++)
        cdf[i] /= sum;
    static uint64_t exact[TRACE_KEYS];
    memset(exact, 0, sizeof(exact));
    test_rng g = {seed};
    trace_stats ts = {0};
    uint64_t per_window = requests / 8;
    int64_t window = -1;
    for (uint64_t k = 0; k < requests; k++) {
        int64_t t = (int64_t)(k / per_window) * SECOND + (int64_t)(k % per_window);
        if (t / SECOND != window) {
            if (window >= 0) /* the window's end: every key, once more */
                for (uint32_t id = 0; id < TRACE_KEYS; id++) {
                    char key[24];
                    size_t len = key_of(id, key);
                    uint64_t e = estimate(c, key, len, t - 1);
                    assert_true(e >= exact[id]);
                    ts.over_sum += (double)(e - exact[id]);
                    ts.keys_seen += exact[id] > 0;
                }
            memset(exact, 0, sizeof(exact));
            window = t / SECOND;
        }
        uint32_t id = zipf ? zipf_draw(&g, cdf, TRACE_KEYS) : (uint32_t)rng_below(&g, TRACE_KEYS);
        uint64_t hits = 1 + rng_below(&g, 3);
        char key[24];
        size_t len = key_of(id, key);
        uint64_t before = estimate(c, key, len, t);
        assert_true(before >= exact[id]);
        weir_result r;
        assert_int_equal(weir_cms_take(c, key, len, t, hits, &r), WEIR_OK);
        assert_int_equal(r.allowed, before + hits <= limit);
        if (r.allowed) {
            exact[id] += hits;
            ts.admitted++;
            assert_int_equal(r.remaining, limit - (before + hits));
        } else {
            ts.denied++;
            ts.false_denials += exact[id] + hits <= limit;
            assert_int_equal(r.retry_after_us, (window + 1) * SECOND - t);
        }
        assert_true(exact[id] <= limit);
        assert_true(estimate(c, key, len, t) >= exact[id]);
    }
    return ts;
}

static void never_under_counts(void **unused)
{
    (void)unused;
    uint64_t seed = test_seed("never_under_counts");
    /* 4000 keys into 2 x 64 .. 4 x 512 counters: collisions everywhere */
    const uint32_t shapes[][2] = {{64, 2}, {256, 3}, {512, 4}, {97, 1}};
    const uint64_t limits[] = {WEIR_CMS_MAX_LIMIT, 40, 5};
    for (size_t s = 0; s < sizeof(shapes) / sizeof(*shapes); s++)
        for (size_t l = 0; l < sizeof(limits) / sizeof(*limits); l++)
            for (int zipf = 0; zipf < 2; zipf++) {
                weir_cms *c = limiter(limits[l], SECOND, shapes[s][0], shapes[s][1]);
                trace_stats ts = run_trace(c, limits[l], zipf, 40000, seed + s * 8 + l * 2 + zipf);
                assert_true(ts.admitted > 0);
                if (limits[l] == 5)
                    assert_true(ts.denied > 0);
                weir_cms_free(c);
            }
}

/* The over-count is the sketch's bound: with depth rows of width w, at
 * most a share e^-depth of the keys over-counted by more than e N / w. */
static void over_count_bounded(void **unused)
{
    (void)unused;
    uint64_t seed = test_seed("over_count_bounded");
    const uint32_t width = 2048, depth = 4, keys = 20000, requests = 100000;
    weir_cms *c = limiter(WEIR_CMS_MAX_LIMIT, SECOND, width, depth);
    uint32_t *exact = calloc(keys, sizeof(*exact));
    assert_non_null(exact);
    test_rng g = {seed};
    for (uint32_t k = 0; k < requests; k++) {
        uint32_t id = (uint32_t)rng_below(&g, keys);
        char key[24];
        key_of(id, key);
        assert_true(take(c, key, 0, 1).allowed);
        exact[id]++;
    }
    double bound = exp(1.0) * requests / width;
    uint32_t seen = 0, past = 0;
    double over = 0;
    for (uint32_t id = 0; id < keys; id++) {
        if (!exact[id])
            continue;
        char key[24];
        size_t len = key_of(id, key);
        uint64_t e = estimate(c, key, len, 0);
        assert_true(e >= exact[id]);
        seen++;
        past += (double)(e - exact[id]) > bound;
        over += (double)(e - exact[id]);
    }
    printf("over-count: mean %.2f, %u of %u keys past e N / w = %.1f\n", over / seen, past, seen,
           bound);
    assert_true(past <= exp(-(double)depth) * seen);
    /* independent rows: the smallest of 4 counters is well under one
     * row's mean load (N / w); one row alone, or rows that agree, would not be */
    assert_true(over / seen < 0.5 * requests / width);
    free(exact);
    weir_cms_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(options_validated),
        cmocka_unit_test(budget_respected),
        cmocka_unit_test(keys_checked),
        cmocka_unit_test(lone_key_exact),
        cmocka_unit_test(ban),
        cmocka_unit_test(peeks),
        cmocka_unit_test(rotation),
        cmocka_unit_test(retry_after_enough),
        cmocka_unit_test(never_under_counts),
        cmocka_unit_test(over_count_bounded),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
