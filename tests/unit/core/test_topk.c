/*
 * test_topk.c - the Space-Saving sketch (weir/topk.h) against exact
 * counts: exact while the keys fit, every count within its error and the
 * error within N / capacity on random streams, merges (chains of them
 * too), long keys, and the target: the true top 10 of a Zipf(1.1) trace
 * over 1M keys, at most 1 wrong, in at most 1 MB.
 *
 * The Zipf trace is the target's 10M requests (about 10 s under ASan);
 * WEIR_TOPK_ZIPF_REQUESTS and WEIR_TOPK_ZIPF_COUNTERS change its length
 * and the sketch's counters (docs/BENCHMARKS.md).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "fake.h"
#include "weir/weir.h"

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

static weir_topk *sketch(uint32_t capacity, uint32_t key_bytes)
{
    weir_topk_options o = {sizeof(o), capacity, key_bytes};
    weir_topk *t = NULL;
    assert_int_equal(weir_topk_new(ctx, &o, &t), WEIR_OK);
    return t;
}

/* Key i as text ("k17"); *len its length. */
static const char *key_text(uint32_t i, char *buf, size_t *len)
{
    *len = (size_t)snprintf(buf, 16, "k%u", i);
    return buf;
}

/* The id of a key made by key_text(). */
static uint32_t key_id(const weir_topk_entry *e)
{
    char buf[16];
    assert_true(e->key_len < sizeof(buf) && !e->hashed);
    memcpy(buf, e->key, e->key_len);
    buf[e->key_len] = '\0';
    return (uint32_t)strtoul(buf + 1, NULL, 10);
}

static void add_id(weir_topk *t, uint32_t id, uint64_t w)
{
    char buf[16];
    size_t len;
    const char *k = key_text(id, buf, &len);
    weir_topk_add(t, k, len, w);
}

/* Every guarantee of weir/topk.h, for a sketch of the stream whose exact
 * counts are @exact[0 .. n_keys). */
static void check_bounds(const weir_topk *t, const uint64_t *exact, uint32_t n_keys)
{
    weir_topk_stats st;
    weir_topk_stats_get(t, &st);
    uint64_t total = 0;
    for (uint32_t i = 0; i < n_keys; i++)
        total += exact[i];
    assert_int_equal(st.total, total);
    assert_true(st.floor <= st.total / st.capacity);
    weir_topk_entry *all = calloc(st.capacity, sizeof(*all));
    assert_non_null(all);
    size_t n = weir_topk_top(t, all, st.capacity);
    assert_int_equal(n, st.used);
    bool *listed = calloc(n_keys, sizeof(*listed));
    assert_non_null(listed);
    for (size_t j = 0; j < n; j++) {
        uint32_t id = key_id(&all[j]);
        assert_true(id < n_keys);
        listed[id] = true;
        if (!(all[j].count - all[j].error <= exact[id] && exact[id] <= all[j].count))
            fail_msg("k%u: true %llu outside [%llu - %llu, %llu]", id,
                     (unsigned long long)exact[id], (unsigned long long)all[j].count,
                     (unsigned long long)all[j].error, (unsigned long long)all[j].count);
        assert_true(all[j].error <= st.floor);
        if (j)
            assert_true(all[j - 1].count >= all[j].count);
    }
    for (uint32_t i = 0; i < n_keys; i++)
        if (!listed[i] && exact[i] > st.floor)
            fail_msg("k%u: %llu, not counted, over the floor %llu", i, (unsigned long long)exact[i],
                     (unsigned long long)st.floor);
    free(listed);
    free(all);
}

static void exact_while_keys_fit(void **unused)
{
    (void)unused;
    weir_topk *t = sketch(64, 0);
    uint64_t exact[64] = {0};
    for (uint32_t round = 0; round < 50; round++)
        for (uint32_t i = 0; i < 64; i++)
            if (i % (round % 7 + 1) == 0) {
                add_id(t, i, i + 1);
                exact[i] += i + 1;
            }
    weir_topk_entry out[64];
    size_t n = weir_topk_top(t, out, 64);
    assert_int_equal(n, 64);
    for (size_t j = 0; j < n; j++) {
        assert_int_equal(out[j].error, 0);
        assert_int_equal(out[j].count, exact[key_id(&out[j])]);
    }
    weir_topk_stats st;
    weir_topk_stats_get(t, &st);
    assert_int_equal(st.floor, 0);
    assert_int_equal(st.used, 64);
    check_bounds(t, exact, 64);
    /* fewer asked, fewer listed; the largest first */
    uint64_t most = 0;
    for (uint32_t i = 0; i < 64; i++)
        most = exact[i] > most ? exact[i] : most;
    assert_int_equal(weir_topk_top(t, out, 3), 3);
    assert_int_equal(out[0].count, most);
    assert_int_equal(weir_topk_top(t, out, 0), 0);
    /* weight 0 is nothing */
    add_id(t, 1000, 0);
    weir_topk_stats_get(t, &st);
    assert_int_equal(st.used, 64);
    weir_topk_free(t);
}

static void empty_and_cleared(void **unused)
{
    (void)unused;
    weir_topk *t = sketch(8, 0);
    weir_topk_entry out[4];
    assert_int_equal(weir_topk_top(t, out, 4), 0);
    weir_topk_add(t, NULL, 0, 5); /* the empty key */
    weir_topk_add(t, "", 0, 2);
    assert_int_equal(weir_topk_top(t, out, 4), 1);
    assert_int_equal(out[0].key_len, 0);
    assert_int_equal(out[0].count, 7);
    for (uint32_t i = 0; i < 100; i++)
        add_id(t, i, 1);
    weir_topk_clear(t);
    weir_topk_stats st;
    weir_topk_stats_get(t, &st);
    assert_int_equal(st.used + st.total + st.floor, 0);
    assert_int_equal(weir_topk_top(t, out, 4), 0);
    add_id(t, 3, 2);
    assert_int_equal(weir_topk_top(t, out, 4), 1);
    assert_int_equal(out[0].count, 2);
    assert_int_equal(out[0].error, 0);
    weir_topk_free(t);
    weir_topk_free(NULL);
    /* one counter: each new key takes it, the old count its error */
    t = sketch(1, 0);
    add_id(t, 1, 3);
    add_id(t, 2, 1);
    assert_int_equal(weir_topk_top(t, out, 4), 1);
    assert_int_equal(key_id(&out[0]), 2);
    assert_int_equal(out[0].count, 4);
    assert_int_equal(out[0].error, 3);
    weir_topk_stats_get(t, &st);
    assert_int_equal(st.floor, 3);
    weir_topk_free(t);
}

static void options_checked(void **unused)
{
    (void)unused;
    weir_topk *t = NULL;
    weir_topk_options o = {sizeof(o), 0, 0};
    assert_int_equal(weir_topk_new(NULL, &o, &t), WEIR_EINVAL);
    assert_int_equal(weir_topk_new(ctx, &o, NULL), WEIR_EINVAL);
    o.size = 4;
    assert_int_equal(weir_topk_new(ctx, &o, &t), WEIR_EINVAL);
    o = (weir_topk_options){sizeof(o), WEIR_TOPK_MAX_CAPACITY + 1, 0};
    assert_int_equal(weir_topk_new(ctx, &o, &t), WEIR_EINVAL);
    o = (weir_topk_options){sizeof(o), 0, WEIR_TOPK_MIN_KEY_BYTES - 1};
    assert_int_equal(weir_topk_new(ctx, &o, &t), WEIR_EINVAL);
    o = (weir_topk_options){sizeof(o), 0, WEIR_TOPK_MAX_KEY_BYTES + 1};
    assert_int_equal(weir_topk_new(ctx, &o, &t), WEIR_EINVAL);
    assert_null(t);
    /* the defaults, and every byte from the context's allocator, reported */
    counting_alloc ca;
    weir_ctx *counted;
    assert_int_equal(counting_ctx_new(&ca, &counted), WEIR_OK);
    int64_t before = ca.live_bytes;
    assert_int_equal(weir_topk_new(counted, NULL, &t), WEIR_OK);
    weir_topk_stats st;
    weir_topk_stats_get(t, &st);
    assert_int_equal(st.capacity, WEIR_TOPK_DEFAULT_CAPACITY);
    assert_int_equal(st.max_key_bytes, WEIR_TOPK_DEFAULT_KEY_BYTES);
    assert_int_equal((int64_t)st.bytes, ca.live_bytes - before);
    assert_true(st.bytes <= 1024 * 1024);
    for (uint32_t i = 0; i < 20000; i++) /* no allocation after creation */
        add_id(t, i % 7000, 1);
    assert_int_equal((int64_t)st.bytes, ca.live_bytes - before);
    weir_topk_free(t);
    assert_int_equal(ca.live_bytes, before);
    ca.fail_after = 1;
    t = NULL;
    assert_int_equal(weir_topk_new(counted, NULL, &t), WEIR_ENOMEM);
    assert_null(t);
    weir_ctx_free(counted);
}

/* A stream of @n adds over @n_keys keys, skewed (a few keys take most)
 * or uniform, weights 1 or up to 10, into @t and @exact. */
static void random_stream(test_rng *r, weir_topk *t, uint64_t *exact, uint32_t n_keys, uint32_t n,
                          bool skewed, bool weighted)
{
    for (uint32_t k = 0; k < n; k++) {
        uint32_t id;
        if (skewed) { /* the smallest of three: favours low ids */
            uint64_t a = rng_below(r, n_keys), b = rng_below(r, n_keys), c = rng_below(r, n_keys);
            uint64_t m = a < b ? a : b;
            id = (uint32_t)(m < c ? m : c);
            if (rng_below(r, 4) == 0)
                id = (uint32_t)rng_below(r, n_keys < 8 ? n_keys : 8);
        } else {
            id = (uint32_t)rng_below(r, n_keys);
        }
        uint64_t w = weighted ? 1 + rng_below(r, 10) : 1;
        add_id(t, id, w);
        exact[id] += w;
    }
}

static void error_bound_on_random_streams(void **unused)
{
    (void)unused;
    test_rng r = {test_seed("error_bound_on_random_streams")};
    for (int round = 0; round < 24; round++) {
        uint32_t cap = (uint32_t)(1 + rng_below(&r, 128));
        uint32_t n_keys = (uint32_t)(1 + rng_below(&r, 3000));
        uint32_t n = (uint32_t)rng_below(&r, 40000);
        uint64_t *exact = calloc(n_keys, sizeof(*exact));
        assert_non_null(exact);
        weir_topk *t = sketch(cap, 0);
        random_stream(&r, t, exact, n_keys, n, round % 2, round % 3 == 0);
        check_bounds(t, exact, n_keys);
        weir_topk_free(t);
        free(exact);
    }
}

static void merges(void **unused)
{
    (void)unused;
    test_rng r = {test_seed("merges")};
    for (int round = 0; round < 16; round++) {
        uint32_t cap = (uint32_t)(1 + rng_below(&r, 100));
        uint32_t n_keys = (uint32_t)(1 + rng_below(&r, 2000));
        uint64_t *exact = calloc(n_keys, sizeof(*exact));
        assert_non_null(exact);
        /* the daemon's query: an empty sketch, then every shard's merged in */
        weir_topk *acc = sketch(cap, 0);
        unsigned parts = 1 + (unsigned)rng_below(&r, 8);
        for (unsigned p = 0; p < parts; p++) {
            weir_topk *t = sketch(cap, 0);
            random_stream(&r, t, exact, n_keys, (uint32_t)rng_below(&r, 20000), (round + p) % 2,
                          p % 2 == 0);
            assert_int_equal(weir_topk_merge(acc, t), WEIR_OK);
            check_bounds(acc, exact, n_keys);
            weir_topk_free(t);
        }
        /* and a sketch merged into one that goes on counting */
        weir_topk *more = sketch(cap, 0);
        uint64_t *mine = calloc(n_keys, sizeof(*mine));
        assert_non_null(mine);
        random_stream(&r, more, mine, n_keys, 5000, true, false);
        assert_int_equal(weir_topk_merge(more, acc), WEIR_OK);
        for (uint32_t i = 0; i < n_keys; i++)
            mine[i] += exact[i];
        random_stream(&r, more, mine, n_keys, 5000, false, true);
        check_bounds(more, mine, n_keys);
        weir_topk_free(more);
        weir_topk_free(acc);
        free(mine);
        free(exact);
    }
}

static void merge_refusals(void **unused)
{
    (void)unused;
    weir_topk *a = sketch(16, 0), *b = sketch(32, 0), *c = sketch(16, 64);
    add_id(a, 1, 3);
    add_id(b, 1, 3);
    assert_int_equal(weir_topk_merge(a, a), WEIR_EINVAL);
    assert_int_equal(weir_topk_merge(a, b), WEIR_EINVAL);
    assert_int_equal(weir_topk_merge(a, c), WEIR_EINVAL);
    assert_int_equal(weir_topk_merge(NULL, a), WEIR_EINVAL);
    assert_int_equal(weir_topk_merge(a, NULL), WEIR_EINVAL);
    weir_topk_entry out[2];
    assert_int_equal(weir_topk_top(a, out, 2), 1);
    assert_int_equal(out[0].count, 3);
    weir_topk_free(a);
    weir_topk_free(b);
    weir_topk_free(c);
}

static void long_keys(void **unused)
{
    (void)unused;
    weir_topk *t = sketch(8, 32);
    char a[100], b[100], exact32[32];
    memset(a, 'x', sizeof(a));
    memcpy(b, a, sizeof(b));
    b[99] = 'y'; /* the same first 99 bytes */
    memset(exact32, 'x', sizeof(exact32));
    weir_topk_add(t, a, sizeof(a), 5);
    weir_topk_add(t, b, sizeof(b), 3);
    weir_topk_add(t, a, sizeof(a), 1);
    weir_topk_add(t, exact32, sizeof(exact32), 2); /* at the cap: as given */
    weir_topk_entry out[8];
    assert_int_equal(weir_topk_top(t, out, 8), 3);
    assert_int_equal(out[0].count, 6);
    assert_true(out[0].hashed);
    assert_int_equal(out[0].key_len, 32);
    assert_memory_equal(out[0].key, a, 32 - WEIR_TOPK_DIGEST_BYTES);
    assert_int_equal(out[1].count, 3);
    assert_true(out[1].hashed);
    assert_memory_not_equal(out[0].key, out[1].key, 32);
    assert_int_equal(out[2].count, 2);
    assert_false(out[2].hashed);
    assert_memory_equal(out[2].key, exact32, 32);
    /* a long key merges with itself from another sketch */
    weir_topk *u = sketch(8, 32);
    weir_topk_add(u, b, sizeof(b), 10);
    assert_int_equal(weir_topk_merge(u, t), WEIR_OK);
    assert_int_equal(weir_topk_top(u, out, 8), 3);
    assert_int_equal(out[0].count, 13);
    assert_int_equal(out[0].error, 0);
    /* the longest key there is */
    static char huge[1 << 16];
    memset(huge, 'z', sizeof(huge));
    weir_topk_add(u, huge, sizeof(huge), 100);
    assert_int_equal(weir_topk_top(u, out, 1), 1);
    assert_true(out[0].hashed && out[0].count == 100);
    weir_topk_free(u);
    weir_topk_free(t);
}

static void counts_saturate(void **unused)
{
    (void)unused;
    weir_topk *t = sketch(2, 0), *u = sketch(2, 0);
    add_id(t, 1, UINT64_MAX - 1);
    add_id(t, 1, 5);
    add_id(t, 2, 7);
    add_id(t, 3, UINT64_MAX); /* replaces the 7 */
    add_id(u, 1, UINT64_MAX);
    assert_int_equal(weir_topk_merge(u, t), WEIR_OK);
    weir_topk_entry out[2];
    assert_int_equal(weir_topk_top(u, out, 2), 2);
    assert_true(out[0].count == UINT64_MAX && out[1].count == UINT64_MAX);
    weir_topk_stats st;
    weir_topk_stats_get(u, &st);
    assert_true(st.total == UINT64_MAX);
    weir_topk_free(t);
    weir_topk_free(u);
}

/* ----------------------------------------------------- the Zipf target */

#define ZIPF_KEYS 1000000u
#define ZIPF_S 1.1

/* Rank @rank's key: its bits scrambled, 8 bytes. */
static void zipf_key(uint32_t rank, unsigned char key[8])
{
    uint64_t v = (uint64_t)rank * 0x9e3779b97f4a7c15ull ^ 0x5bd1e9955bd1e995ull;
    memcpy(key, &v, 8);
}

static uint32_t zipf_rank(const weir_topk_entry *e)
{
    uint64_t v;
    assert_int_equal(e->key_len, 8);
    memcpy(&v, e->key, 8);
    v ^= 0x5bd1e9955bd1e995ull;
    /* the inverse of the odd multiplier, mod 2^64 (Newton) */
    uint64_t inv = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 5; i++)
        inv *= 2 - 0x9e3779b97f4a7c15ull * inv;
    return (uint32_t)(v * inv);
}

static int cmp_desc(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x < y) - (x > y);
}

static void zipf_target(void **unused)
{
    (void)unused;
    const char *env = getenv("WEIR_TOPK_ZIPF_REQUESTS");
    uint64_t requests = env ? strtoull(env, NULL, 10) : 10000000u;
    /* the trace: ranks 1 .. ZIPF_KEYS, P(rank) ~ rank^-1.1, by the CDF */
    double *cdf = malloc(ZIPF_KEYS * sizeof(*cdf));
    uint32_t *exact = calloc(ZIPF_KEYS + 1, sizeof(*exact));
    assert_true(cdf && exact);
    double sum = 0;
    for (uint32_t i = 0; i < ZIPF_KEYS; i++)
        cdf[i] = sum += 1.0 / pow((double)(i + 1), ZIPF_S);
    for (uint32_t i = 0; i < ZIPF_KEYS; i++)
        cdf[i] /= sum;
    const char *cap_env = getenv("WEIR_TOPK_ZIPF_COUNTERS");
    weir_topk *t = sketch(cap_env ? (uint32_t)strtoul(cap_env, NULL, 10) : 0, 0);
    test_rng r = {20261126};
    uint32_t *trace = malloc(requests * sizeof(*trace));
    assert_non_null(trace);
    for (uint64_t k = 0; k < requests; k++) {
        double u = (double)(rng_next(&r) >> 11) * 0x1p-53;
        uint32_t lo = 0, hi = ZIPF_KEYS - 1;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (cdf[mid] < u)
                lo = mid + 1;
            else
                hi = mid;
        }
        trace[k] = lo + 1;
        exact[lo + 1]++;
    }
    clock_t t0 = clock();
    for (uint64_t k = 0; k < requests; k++) {
        unsigned char key[8];
        zipf_key(trace[k], key);
        weir_topk_add(t, key, sizeof(key), 1);
    }
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    /* the true top 10 (by count; the 10th's count decides ties) */
    uint32_t *sorted = malloc((ZIPF_KEYS + 1) * sizeof(*sorted));
    assert_non_null(sorted);
    memcpy(sorted, exact, (ZIPF_KEYS + 1) * sizeof(*sorted));
    qsort(sorted, ZIPF_KEYS + 1, sizeof(*sorted), cmp_desc);
    uint32_t tenth = sorted[9];
    weir_topk_entry top[10];
    assert_int_equal(weir_topk_top(t, top, 10), 10);
    int wrong = 0;
    uint64_t worst_error = 0;
    for (int j = 0; j < 10; j++) {
        uint32_t rank = zipf_rank(&top[j]);
        assert_true(rank >= 1 && rank <= ZIPF_KEYS);
        wrong += exact[rank] < tenth;
        assert_true(top[j].count - top[j].error <= exact[rank] && exact[rank] <= top[j].count);
        worst_error = top[j].error > worst_error ? top[j].error : worst_error;
    }
    weir_topk_stats st;
    weir_topk_stats_get(t, &st);
    uint64_t heaviest = 0;
    for (int j = 0; j < 10; j++)
        heaviest += sorted[j];
    printf("zipf(%.1f): %llu requests over %u keys (the top 10: %.1f%% of them, the 10th %u), "
           "%u counters: %d of the top 10 wrong, largest error %llu (bound %llu), %zu bytes, "
           "%.2f s of adds\n",
           ZIPF_S, (unsigned long long)requests, ZIPF_KEYS,
           requests ? 100.0 * (double)heaviest / (double)requests : 0.0, tenth, st.capacity, wrong,
           (unsigned long long)worst_error, (unsigned long long)(st.total / st.capacity), st.bytes,
           secs);
    assert_true(wrong <= 1);
    assert_true(st.bytes <= 1024 * 1024);
    assert_true(st.floor <= requests / st.capacity);
    weir_topk_free(t);
    free(trace);
    free(sorted);
    free(exact);
    free(cdf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exact_while_keys_fit),
        cmocka_unit_test(empty_and_cleared),
        cmocka_unit_test(options_checked),
        cmocka_unit_test(error_bound_on_random_streams),
        cmocka_unit_test(merges),
        cmocka_unit_test(merge_refusals),
        cmocka_unit_test(long_keys),
        cmocka_unit_test(counts_saturate),
        cmocka_unit_test(zipf_target),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
