/*
 * test_memstore_threads.c - several threads hammering the memory store
 * never admit more than the quota: admissions are counted exactly, on one
 * hot key, on many keys, through atomic batches, with a sweeper and a
 * memory cap at work at the same time. Also run under ThreadSanitizer.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fake.h"
#include "weir/weir.h"

#define S 1000000LL
#define THREADS 4
#define KEYS 200

typedef struct shared {
    weir_store *st;
    weir_limit lim;
    int attempts;
    atomic_int admitted[KEYS];
    atomic_int errors;
    atomic_int stop;
    uint64_t seed;
} shared;

static weir_store *open_store(weir_ctx **ctx, uint64_t max_bytes)
{
    assert_int_equal(weir_ctx_new(NULL, ctx), WEIR_OK);
    weir_memstore_options o = {.size = sizeof(o), .max_bytes = max_bytes, .shards = 16};
    weir_store *st;
    assert_int_equal(weir_memstore_new(*ctx, &o, &st), WEIR_OK);
    return st;
}

static weir_limit compile(weir_algorithm a, uint64_t limit)
{
    /* an hour-long window: no refill while the test runs, so the quota is
     * exactly `limit` per key */
    weir_limit_spec spec = {.algorithm = a, .limit = limit, .window_us = 3600 * S};
    weir_limit lim;
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_OK);
    return lim;
}

static void *hammer_one(void *arg)
{
    shared *sh = arg;
    for (int i = 0; i < sh->attempts; i++) {
        weir_result r;
        if (weir_memstore_take(sh->st, "hot", 3, &sh->lim, i, 1, &r) != WEIR_OK)
            atomic_fetch_add(&sh->errors, 1);
        else if (r.allowed)
            atomic_fetch_add(&sh->admitted[0], 1);
    }
    return NULL;
}

static void *hammer_many(void *arg)
{
    shared *sh = arg;
    test_rng rng = {sh->seed ^ (uint64_t)pthread_self()};
    weir_op ops[16];
    char keys[16][16];
    int idx[16];
    for (int i = 0; i < sh->attempts; i += 16) {
        for (int j = 0; j < 16; j++) {
            idx[j] = (int)rng_below(&rng, KEYS);
            snprintf(keys[j], sizeof(keys[j]), "key:%d", idx[j]);
            ops[j] =
                (weir_op){.key = keys[j], .key_len = strlen(keys[j]), .limit = &sh->lim, .hits = 1};
        }
        if (weir_memstore_run(sh->st, ops, 16, i, 0) != WEIR_OK) {
            atomic_fetch_add(&sh->errors, 1);
            continue;
        }
        for (int j = 0; j < 16; j++) {
            if (ops[j].status != WEIR_OK)
                atomic_fetch_add(&sh->errors, 1);
            else if (ops[j].result.allowed)
                atomic_fetch_add(&sh->admitted[idx[j]], 1);
        }
    }
    return NULL;
}

static void run_threads(void *(*fn)(void *), shared *sh)
{
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, fn, sh), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
}

static void one_hot_key(void **unused)
{
    (void)unused;
    for (int a = 1; a <= WEIR_ALGORITHM_COUNT; a++) {
        weir_ctx *ctx;
        shared sh = {
            .st = open_store(&ctx, 0), .lim = compile((weir_algorithm)a, 500), .attempts = 2000};
        if (a == WEIR_ALGO_GCRA || a == WEIR_ALGO_LEAKY_BUCKET) {
            /* their default burst is 1: ask for the whole quota at once */
            weir_limit_spec spec = {
                .algorithm = (weir_algorithm)a, .limit = 500, .window_us = 3600 * S, .burst = 500};
            assert_int_equal(weir_limit_compile(&spec, &sh.lim), WEIR_OK);
        }
        run_threads(hammer_one, &sh);
        assert_int_equal(atomic_load(&sh.errors), 0);
        assert_int_equal(atomic_load(&sh.admitted[0]), 500);
        weir_store_free(sh.st);
        weir_ctx_free(ctx);
    }
}

static void many_keys_batched(void **unused)
{
    (void)unused;
    weir_ctx *ctx;
    shared sh = {.st = open_store(&ctx, 0),
                 .lim = compile(WEIR_ALGO_SLIDING_COUNTER, 50),
                 .attempts = 20000,
                 .seed = test_seed("many_keys_batched")};
    run_threads(hammer_many, &sh);
    assert_int_equal(atomic_load(&sh.errors), 0);
    /* 80,000 attempts over 200 keys: every key is exhausted, none exceeded */
    for (int k = 0; k < KEYS; k++)
        assert_int_equal(atomic_load(&sh.admitted[k]), 50);
    weir_store_free(sh.st);
    weir_ctx_free(ctx);
}

typedef struct pair_shared {
    weir_store *st;
    weir_limit user, route;
    atomic_int both;
    atomic_int errors;
} pair_shared;

/* Every request charges "user" and "route" atomically: the route's limit
 * (30) runs out first, and the user's budget is spent only by admitted
 * requests. */
static void *hammer_pairs(void *arg)
{
    pair_shared *ps = arg;
    for (int i = 0; i < 5000; i++) {
        weir_op ops[2] = {
            {.key = "user", .key_len = 4, .limit = &ps->user, .hits = 1},
            {.key = "route", .key_len = 5, .limit = &ps->route, .hits = 1},
        };
        if (weir_memstore_run(ps->st, ops, 2, i, WEIR_BATCH_ATOMIC) != WEIR_OK) {
            atomic_fetch_add(&ps->errors, 1);
            continue;
        }
        if (ops[0].result.allowed && ops[1].result.allowed)
            atomic_fetch_add(&ps->both, 1);
    }
    return NULL;
}

static void atomic_pairs(void **unused)
{
    (void)unused;
    weir_ctx *ctx;
    pair_shared ps = {.st = open_store(&ctx, 0),
                      .user = compile(WEIR_ALGO_TOKEN_BUCKET, 100),
                      .route = compile(WEIR_ALGO_FIXED_WINDOW, 30)};
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, hammer_pairs, &ps), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&ps.errors), 0);
    assert_int_equal(atomic_load(&ps.both), 30);
    weir_result r;
    assert_int_equal(weir_memstore_take(ps.st, "user", 4, &ps.user, 10000, 0, &r), WEIR_OK);
    assert_int_equal(r.remaining, 70);
    weir_store_free(ps.st);
    weir_ctx_free(ctx);
}

static void *sweeper(void *arg)
{
    shared *sh = arg;
    while (!atomic_load(&sh->stop))
        weir_memstore_sweep(sh->st, 0, 64);
    return NULL;
}

/* Under a cap small enough to evict, with a sweeper running: no errors,
 * no crash, memory under the cap (TSan checks the locking). */
static void cap_and_sweeper(void **unused)
{
    (void)unused;
    weir_ctx *ctx;
    const uint64_t cap = 256 * 1024;
    shared sh = {.st = open_store(&ctx, cap),
                 .lim = compile(WEIR_ALGO_GCRA, 10),
                 .attempts = 20000,
                 .seed = test_seed("cap_and_sweeper")};
    pthread_t sw;
    assert_int_equal(pthread_create(&sw, NULL, sweeper, &sh), 0);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, hammer_many, &sh), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    atomic_store(&sh.stop, 1);
    pthread_join(sw, NULL);
    assert_int_equal(atomic_load(&sh.errors), 0);
    weir_store_stats s;
    assert_int_equal(weir_store_stats_get(sh.st, &s), WEIR_OK);
    assert_true(s.bytes <= cap);
    weir_store_free(sh.st);
    weir_ctx_free(ctx);
}

/* Threads creating keys at once, each its own: the shards' tables grow
 * through the sizes that share huge pages, concurrently, and every key
 * keeps what it was charged. */
#define GROW_KEYS 20000

typedef struct grower {
    weir_store *st;
    const weir_limit *lim;
    int id;
    int errors;
} grower;

static void *grow_keys(void *arg)
{
    grower *g = arg;
    char key[32];
    for (int i = 0; i < GROW_KEYS; i++) {
        snprintf(key, sizeof(key), "t%d:%d", g->id, i);
        weir_result r;
        if (weir_memstore_take(g->st, key, strlen(key), g->lim, 0, 1 + (uint64_t)(i % 2), &r) !=
                WEIR_OK ||
            !r.allowed)
            g->errors++;
    }
    return NULL;
}

static void tables_grow_on_every_thread(void **unused)
{
    (void)unused;
    weir_ctx *ctx;
    assert_int_equal(weir_ctx_new(NULL, &ctx), WEIR_OK);
    /* 80k keys over 2 shards: tables from 64 KB past 1 MB */
    weir_memstore_options o = {.size = sizeof(o), .shards = 2};
    weir_store *st;
    assert_int_equal(weir_memstore_new(ctx, &o, &st), WEIR_OK);
    weir_limit lim = compile(WEIR_ALGO_TOKEN_BUCKET, 5);
    pthread_t th[THREADS];
    grower g[THREADS];
    for (int t = 0; t < THREADS; t++) {
        g[t] = (grower){st, &lim, t, 0};
        assert_int_equal(pthread_create(&th[t], NULL, grow_keys, &g[t]), 0);
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        assert_int_equal(g[t].errors, 0);
    }
    weir_store_stats stats;
    assert_int_equal(weir_store_stats_get(st, &stats), WEIR_OK);
    assert_int_equal(stats.keys, THREADS * GROW_KEYS);
    char key[32];
    for (int t = 0; t < THREADS; t++)
        for (int i = 0; i < GROW_KEYS; i++) {
            snprintf(key, sizeof(key), "t%d:%d", t, i);
            weir_result r;
            assert_int_equal(weir_memstore_take(st, key, strlen(key), &lim, 0, 0, &r), WEIR_OK);
            assert_int_equal(r.remaining, 4 - (uint64_t)(i % 2));
        }
    weir_store_free(st);
    weir_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_hot_key),
        cmocka_unit_test(many_keys_batched),
        cmocka_unit_test(atomic_pairs),
        cmocka_unit_test(cap_and_sweeper),
        cmocka_unit_test(tables_grow_on_every_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
