/*
 * test_memstore.c - the memory store: same verdicts as the pure step
 * functions, keys, expiry and sweeping, the memory cap and its eviction
 * order, atomic batches, concurrency leases, the asynchronous interface.
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

#define S 1000000LL

typedef struct fixture {
    weir_ctx *ctx;
    weir_store *st;
} fixture;

static weir_store *open_store(fixture *f, uint64_t max_bytes, uint32_t shards)
{
    assert_int_equal(weir_ctx_new(NULL, &f->ctx), WEIR_OK);
    weir_memstore_options o = {
        .size = sizeof(o), .max_bytes = max_bytes, .shards = shards, .seed = 42};
    assert_int_equal(weir_memstore_new(f->ctx, &o, &f->st), WEIR_OK);
    return f->st;
}

static void close_store(fixture *f)
{
    weir_store_free(f->st);
    weir_ctx_free(f->ctx);
}

static weir_limit compile(weir_algorithm a, uint64_t limit, int64_t window_us)
{
    weir_limit_spec spec = {.algorithm = a, .limit = limit, .window_us = window_us};
    weir_limit lim;
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_OK);
    return lim;
}

static weir_store_stats stats(weir_store *st)
{
    weir_store_stats s;
    assert_int_equal(weir_store_stats_get(st, &s), WEIR_OK);
    return s;
}

static weir_result take(weir_store *st, const char *key, const weir_limit *lim, int64_t now,
                        uint64_t hits)
{
    weir_result r;
    assert_int_equal(weir_memstore_take(st, key, strlen(key), lim, now, hits, &r), WEIR_OK);
    return r;
}

/* A key in the store decides exactly like weir_step() on a private state. */
static void same_verdicts_as_step(void **unused)
{
    (void)unused;
    fixture f;
    weir_store *st = open_store(&f, 0, 4);
    test_rng rng = {test_seed("same_verdicts_as_step")};
    int64_t now = 0; /* one clock for the whole store: it never goes back */
    for (int a = 1; a <= WEIR_ALGORITHM_COUNT; a++) {
        weir_limit lim = compile((weir_algorithm)a, 1 + rng_below(&rng, 20), S);
        void *state = calloc(1, weir_state_size(&lim));
        char key[32];
        snprintf(key, sizeof(key), "algo-%d-a-long-key-past-inline", a);
        for (int i = 0; i < 20000; i++) {
            now += (int64_t)rng_below(&rng, 40000);
            uint64_t hits = rng_below(&rng, 4);
            weir_result want, got;
            assert_int_equal(weir_step(&lim, state, now, hits, &want), WEIR_OK);
            assert_int_equal(weir_memstore_take(st, key, strlen(key), &lim, now, hits, &got),
                             WEIR_OK);
            assert_int_equal(got.allowed, want.allowed);
            assert_int_equal(got.remaining, want.remaining);
            assert_int_equal(got.retry_after_us, want.retry_after_us);
            if (lim.algorithm != WEIR_ALGO_CONCURRENCY) /* lease ids differ by design */
                assert_int_equal(got.reset_after_us, want.reset_after_us);
        }
        free(state);
    }
    close_store(&f);
}

/* A TAKE with a reserve decides like weir_step_reserve() on a private
 * state, whether the key is new (run_locked()) or held (the fast path). */
static void takes_keep_their_reserve(void **unused)
{
    (void)unused;
    fixture f;
    weir_store *st = open_store(&f, 0, 4);
    test_rng rng = {test_seed("takes_keep_their_reserve")};
    int64_t now = 0;
    for (int a = 1; a <= WEIR_ALGORITHM_COUNT; a++) {
        weir_limit lim = compile((weir_algorithm)a, 1 + rng_below(&rng, 12), S);
        void *state = calloc(1, weir_state_size(&lim));
        char key[32];
        snprintf(key, sizeof(key), "reserve-%d", a);
        for (int i = 0; i < 5000; i++) {
            now += (int64_t)rng_below(&rng, 40000);
            uint64_t hits = rng_below(&rng, 4), reserve = rng_below(&rng, 3) * rng_below(&rng, 8);
            weir_result want;
            assert_int_equal(weir_step_reserve(&lim, state, now, hits, reserve, &want), WEIR_OK);
            weir_op op = {.key = key,
                          .key_len = strlen(key),
                          .limit = &lim,
                          .hits = hits,
                          .reserve = reserve,
                          .kind = WEIR_OP_TAKE};
            assert_int_equal(weir_memstore_run(st, &op, 1, now, 0), WEIR_OK);
            assert_int_equal(op.status, WEIR_OK);
            assert_int_equal(op.result.allowed, want.allowed);
            assert_int_equal(op.result.remaining, want.remaining);
            assert_int_equal(op.result.retry_after_us, want.retry_after_us);
            if (lim.algorithm != WEIR_ALGO_CONCURRENCY) /* lease ids differ by design */
                assert_int_equal(op.result.reset_after_us, want.reset_after_us);
        }
        free(state);
    }
    /* a TAKE denied by its reserve creates no key */
    weir_limit ten = compile(WEIR_ALGO_FIXED_WINDOW, 10, 60 * S);
    weir_op op = {.key = "fresh", .key_len = 5, .limit = &ten, .hits = 1, .reserve = 10};
    uint64_t keys = stats(st).keys;
    assert_int_equal(weir_memstore_run(st, &op, 1, now, 0), WEIR_OK);
    assert_false(op.result.allowed);
    assert_int_equal(op.result.retry_after_us, WEIR_NEVER);
    assert_int_equal(stats(st).keys, keys);
    close_store(&f);
}

/* In an atomic batch a TAKE's reserve is counted after the same key's
 * earlier TAKEs and its own hits; a denial by a reserve charges nothing. */
static void atomic_takes_keep_their_reserve(void **unused)
{
    (void)unused;
    fixture f;
    weir_store *st = open_store(&f, 0, 0);
    weir_limit ten = compile(WEIR_ALGO_FIXED_WINDOW, 10, 60 * S);
    weir_limit other = compile(WEIR_ALGO_TOKEN_BUCKET, 5, 60 * S);
    weir_op ops[3] = {
        {.key = "k", .key_len = 1, .limit = &ten, .hits = 3},
        {.key = "k", .key_len = 1, .limit = &ten, .hits = 3, .reserve = 4},
        {.key = "o", .key_len = 1, .limit = &other, .hits = 1, .reserve = 4},
    };
    /* 3 + 3 + 4 fit in 10, 1 + 4 in 5: all charged */
    assert_int_equal(weir_memstore_run(st, ops, 3, 0, WEIR_BATCH_ATOMIC), WEIR_OK);
    assert_true(ops[0].result.allowed && ops[1].result.allowed && ops[2].result.allowed);
    assert_int_equal(ops[1].result.remaining, 4);
    assert_int_equal(ops[2].result.remaining, 4);
    /* 1 + 1 + 3 do not fit in the 4 left: nothing is charged */
    ops[0].hits = 1;
    ops[1].hits = 1;
    ops[1].reserve = 3;
    ops[2].reserve = 0;
    assert_int_equal(weir_memstore_run(st, ops, 3, 30 * S, WEIR_BATCH_ATOMIC), WEIR_OK);
    assert_true(ops[0].result.allowed);
    assert_int_equal(ops[0].result.remaining, 4); /* a look: as it stays */
    assert_false(ops[1].result.allowed);
    assert_int_equal(ops[1].result.retry_after_us, 30 * S);
    assert_true(ops[2].result.allowed);
    assert_int_equal(take(st, "k", &ten, 30 * S, 0).remaining, 4);
    assert_int_equal(take(st, "o", &other, 0, 0).remaining, 4);
    /* 1 + 1 + 2 do */
    ops[1].reserve = 2;
    assert_int_equal(weir_memstore_run(st, ops, 3, 30 * S, WEIR_BATCH_ATOMIC), WEIR_OK);
    assert_true(ops[0].result.allowed && ops[1].result.allowed && ops[2].result.allowed);
    assert_int_equal(take(st, "k", &ten, 30 * S, 0).remaining, 2);
    close_store(&f);
}

static weir_op settle_op(weir_store *st, const char *key, const weir_limit *lim, weir_op_kind kind,
                         int64_t now, uint64_t hits)
{
    weir_op op = {.key = key, .key_len = strlen(key), .limit = lim, .hits = hits, .kind = kind};
    assert_int_equal(weir_memstore_run(st, &op, 1, now, 0), WEIR_OK);
    return op;
}

/* REFUND never creates a key and gives back only under the limit that
 * charged; CHARGE creates the key like a TAKE and it expires at rest;
 * neither goes in an atomic batch nor applies to a concurrency limit. */
static void refund_and_charge_through_the_store(void **unused)
{
    (void)unused;
    fixture f;
    weir_store *st = open_store(&f, 0, 0);
    weir_limit ten = compile(WEIR_ALGO_FIXED_WINDOW, 10, 60 * S);
    weir_op op = settle_op(st, "k", &ten, WEIR_OP_REFUND, 0, 3);
    assert_int_equal(op.status, WEIR_OK);
    assert_false(op.result.allowed);
    assert_int_equal(op.result.remaining, 10);
    assert_int_equal(stats(st).keys, 0);
    /* a charge of 0 makes no key either */
    op = settle_op(st, "k", &ten, WEIR_OP_CHARGE, 0, 0);
    assert_true(op.result.allowed);
    assert_int_equal(stats(st).keys, 0);
    op = settle_op(st, "k", &ten, WEIR_OP_CHARGE, 0, 25);
    assert_int_equal(op.status, WEIR_OK);
    assert_true(op.result.allowed);
    assert_int_equal(op.result.remaining, 0);
    assert_int_equal(op.result.reset_after_us, 60 * S);
    assert_int_equal(stats(st).keys, 1);
    assert_false(take(st, "k", &ten, 0, 1).allowed);
    op = settle_op(st, "k", &ten, WEIR_OP_REFUND, S, 4);
    assert_true(op.result.allowed);
    assert_int_equal(op.result.remaining, 4);
    assert_int_equal(take(st, "k", &ten, S, 0).remaining, 4);
    /* under another limit there is nothing to give back, and the state
     * stays */
    weir_limit other = compile(WEIR_ALGO_TOKEN_BUCKET, 10, 60 * S);
    op = settle_op(st, "k", &other, WEIR_OP_REFUND, S, 4);
    assert_false(op.result.allowed);
    assert_int_equal(take(st, "k", &ten, S, 0).remaining, 4);
    /* the key goes once at rest */
    assert_int_equal(weir_memstore_sweep(st, 61 * S, 1000), 1);
    assert_int_equal(stats(st).keys, 0);
    /* a concurrency limit: leases go back by RELEASE */
    weir_limit conc = compile(WEIR_ALGO_CONCURRENCY, 2, S);
    assert_true(take(st, "c", &conc, 0, 1).allowed);
    assert_int_equal(settle_op(st, "c", &conc, WEIR_OP_REFUND, 0, 1).status, WEIR_EALGO);
    assert_int_equal(settle_op(st, "c", &conc, WEIR_OP_CHARGE, 0, 1).status, WEIR_EALGO);
    assert_int_equal(settle_op(st, "none", &conc, WEIR_OP_REFUND, 0, 1).status, WEIR_EALGO);
    assert_int_equal(take(st, "c", &conc, 0, 0).remaining, 1);
    /* not in an atomic batch */
    weir_op ops[2] = {
        {.key = "a", .key_len = 1, .limit = &ten, .hits = 1},
        {.key = "b", .key_len = 1, .limit = &ten, .hits = 1, .kind = WEIR_OP_REFUND},
    };
    assert_int_equal(weir_memstore_run(st, ops, 2, 0, WEIR_BATCH_ATOMIC), WEIR_EINVAL);
    ops[1].kind = WEIR_OP_CHARGE;
    assert_int_equal(weir_memstore_run(st, ops, 2, 0, WEIR_BATCH_ATOMIC), WEIR_EINVAL);
    /* an unknown kind is refused */
    ops[1].kind = (weir_op_kind)6;
    assert_int_equal(weir_memstore_run(st, &ops[1], 1, 0, 0), WEIR_OK);
    assert_int_equal(ops[1].status, WEIR_EINVAL);
    close_store(&f);
}

static void denials_and_peeks_create_no_key(void **unused)
{
    (void)unused;
    fixture f;
    weir_store *st = open_store(&f, 0, 0);
    weir_limit lim = compile(WEIR_ALGO_TOKEN_BUCKET, 5, S);
    weir_result r = take(st, "k", &lim, 0, 0);
    assert_true(r.allowed);
    assert_int_equal(r.remaining, 5);
    r = take(st, "k", &lim, 0, 6); /* can never fit */
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_us, WEIR_NEVER);
    assert_int_equal(stats(st).keys, 0);
    r = take(st, "k", &lim, 0, 2);
    assert_true(r.allowed);
    assert_int_equal(stats(st).keys, 1);
    close_store(&f);
}

static void key_limits(void **unused)
{
    (void)unused;
    fixture f;
    weir_store *st = open_store(&f, 0, 0);
    weir_limit lim = compile(WEIR_ALGO_FIXED_WINDOW, 1, S);
    weir_result r;
    char *big = malloc(WEIR_MAX_KEY_BYTES + 1);
    memset(big, 'x', WEIR_MAX_KEY_BYTES + 1);
    assert_int_equal(weir_memstore_take(st, big, WEIR_MAX_KEY_BYTES, &lim, 0, 1, &r), WEIR_OK);
    assert_true(r.allowed);
    assert_int_equal(weir_memstore_take(st, big, WEIR_MAX_KEY_BYTES, &lim, 0, 1, &r), WEIR_OK);
    assert_false(r.allowed);
    assert_int_equal(weir_memstore_take(st, big, WEIR_MAX_KEY_BYTES + 1, &lim, 0, 1, &r),
                     WEIR_EINVAL);
    assert_int_equal(weir_memstore_take(st, big, 0, &lim, 0, 1, &r), WEIR_EINVAL);
    assert_int_equal(weir_memstore_take(st, NULL, 3, &lim, 0, 1, &r), WEIR_EINVAL);
    assert_int_equal(weir_memstore_take(st, "k", 1, NULL, 0, 1, &r), WEIR_EINVAL);
    /* keys differing only past the inline part, and a 16/17-byte pair */
    assert_true(take(st, "0123456789abcdefA", &lim, 0, 1).allowed);
    assert_true(take(st, "0123456789abcdefB", &lim, 0, 1).allowed);
    assert_true(take(st, "0123456789abcdef", &lim, 0, 1).allowed);
    assert_false(take(st, "0123456789abcdefA", &lim, 0, 1).allowed);
    /* binary keys with NUL bytes are keys like any other */
    assert_int_equal(weir_memstore_take(st, "a\0b", 3, &lim, 0, 1, &r), WEIR_OK);
    assert_true(r.allowed);
    assert_int_equal(weir_memstore_take(st, "a\0c", 3, &lim, 0, 1, &r), WEIR_OK);
    assert_true(r.allowed);
    assert_int_equal(stats(st).keys, 6);
    free(big);
    close_store(&f);
}

static void keys_at_rest_are_swept(void **unused)
{
    (void)unused;
    fixture f;
    weir_store *st = open_store(&f, 0, 4);
    weir_limit lim = compile(WEIR_ALGO_GCRA, 10, S);
    char key[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof(key), "user:%d", i);
        assert_true(take(st, key, &lim, 0, 1).allowed);
    }
    weir_store_stats s = stats(st);
    assert_int_equal(s.keys, 1000);
    uint64_t full_bytes = s.bytes;
    /* at 0.05 s nothing is at rest yet */
    assert_int_equal(weir_memstore_sweep(st, 50000, 100000), 0);
    /* after 2 s every key is back at rest */
    size_t removed = weir_memstore_sweep(st, 2 * S, 100000);
    assert_int_equal(removed, 1000);
    s = stats(st);
    assert_int_equal(s.keys, 0);
    assert_int_equal(s.expirations, 1000);
    assert_int_equal(s.evictions, 0);
    assert_true(s.bytes <= full_bytes);
    /* a removed key comes back fresh */
    weir_result r = take(st, "user:1", &lim, 2 * S, 0);
    assert_int_equal(r.remaining, 1);
    assert_int_equal(weir_memstore_sweep(NULL, 0, 10), 0);
    close_store(&f);
}

/* Without a cap, a key is never evicted: a key whose buckets are full and
 * have no cuckoo path takes a larger table, however small the table and
 * whatever the seed. Many shards keep every table small, where a few keys
 * sharing both buckets are likeliest. */
static void no_cap_never_evicts(void **unused)
{
    (void)unused;
    weir_limit lim = compile(WEIR_ALGO_GCRA, 10, S);
    char key[32];
    for (uint64_t seed = 1; seed <= 8; seed++) {
        weir_ctx *ctx;
        weir_store *st;
        assert_int_equal(weir_ctx_new(NULL, &ctx), WEIR_OK);
        weir_memstore_options o = {.size = sizeof(o), .shards = 1024, .seed = seed};
        assert_int_equal(weir_memstore_new(ctx, &o, &st), WEIR_OK);
        for (int i = 0; i < 30000; i++) {
            snprintf(key, sizeof(key), "k%d", i);
            assert_true(take(st, key, &lim, 0, 1).allowed);
        }
        weir_store_stats s = stats(st);
        if (s.keys != 30000 || s.evictions != 0)
            fail_msg("seed %llu: %llu keys, %llu evictions", (unsigned long long)seed,
                     (unsigned long long)s.keys, (unsigned long long)s.evictions);
        weir_store_free(st);
        weir_ctx_free(ctx);
    }
}

static void inserts_sweep_incrementally(void **unused)
{
    (void)unused;
    fixture f;
    weir_store *st = open_store(&f, 0, 1);
    weir_limit lim = compile(WEIR_ALGO_FIXED_WINDOW, 10, S);
    char key[32];
    for (int i = 0; i < 500; i++) {
        snprintf(key, sizeof(key), "old:%d", i);
        take(st, key, &lim, 0, 1);
    }
    /* new keys, much later: each insert examines a few old entries */
    for (int i = 0; i < 500; i++) {
        snprintf(key, sizeof(key), "new:%d", i);
        take(st, key, &lim, 100 * S, 1);
    }
    weir_store_stats s = stats(st);
    assert_true(s.expirations >= 400);
    assert_true(s.keys <= 600);
    close_store(&f);
}

/* Streaming ten times more keys than fit keeps the store under its cap. */
static void memory_cap_holds(void **unused)
{
    (void)unused;
    fixture f;
    const uint64_t cap = 1 << 20;
    weir_store *st = open_store(&f, cap, 0);
    weir_limit lim = compile(WEIR_ALGO_TOKEN_BUCKET, 100, 3600 * S);
    char key[48];
    uint64_t fit = 0;
    for (int i = 0; i < 320000; i++) {
        snprintf(key, sizeof(key), i % 2 ? "k:%d" : "a-longer-key-stored-out-of-line:%d", i);
        weir_result r;
        assert_int_equal(weir_memstore_take(st, key, strlen(key), &lim, i, 1, &r), WEIR_OK);
        assert_true(r.allowed);
        if (i % 1000 == 0) {
            weir_store_stats s = stats(st);
            assert_true(s.bytes <= cap);
            if (s.keys > fit)
                fit = s.keys;
        }
    }
    weir_store_stats s = stats(st);
    printf("cap %llu bytes: %llu keys held at most, %llu evictions, %llu bytes now\n",
           (unsigned long long)cap, (unsigned long long)fit, (unsigned long long)s.evictions,
           (unsigned long long)s.bytes);
    assert_true(s.bytes <= cap);
    assert_true(320000 >= 10 * fit); /* it really streamed 10x what fits */
    assert_true(s.evictions >= 320000 - fit);
    assert_int_equal(s.max_bytes, cap);
    close_store(&f);
}

/* The cap is used, not half of it: keys streamed past it leave at least
 * 85% of the cap in use, at most 50 bytes a key (docs/OPERATIONS.md). */
static void memory_cap_is_used(void **unused)
{
    (void)unused;
    fixture f;
    const uint64_t cap = 8u << 20;
    weir_store *st = open_store(&f, cap, 0);
    weir_limit lim = compile(WEIR_ALGO_GCRA, 100, 3600 * S);
    char key[32];
    uint64_t held = 0, bytes = 0;
    for (int i = 0; i < 600000; i++) {
        snprintf(key, sizeof(key), "k:%d", i);
        weir_result r;
        assert_int_equal(weir_memstore_take(st, key, strlen(key), &lim, i, 1, &r), WEIR_OK);
        if (i % 10000 == 0) {
            weir_store_stats s = stats(st);
            assert_true(s.bytes <= cap);
            if (s.keys > held) {
                held = s.keys;
                bytes = s.bytes;
            }
        }
    }
    weir_store_stats s = stats(st);
    printf("cap %llu bytes: %llu keys held at most (%.1f bytes a key), %llu bytes in use now "
           "(%.0f%%)\n",
           (unsigned long long)cap, (unsigned long long)held, (double)bytes / (double)held,
           (unsigned long long)s.bytes, 100.0 * (double)s.bytes / (double)cap);
    assert_true(s.evictions > 0);
    assert_true(s.bytes * 100 >= cap * 85);
    assert_true(held * 50 >= cap * 85 / 100);
    close_store(&f);
}

/* A flood of distinct keys, each taken to its limit at once (over it from
 * their first request, as the clients' over-limit keys are), streamed
 * through a full store: the clients' keys, asked more than once, stay, and
 * none gets a fresh quota while the flood lasts. */
static void key_flood_keeps_keys_in_use(void **unused)
{
    (void)unused;
    fixture f;
    weir_store *st = open_store(&f, 1u << 20, 0);
    const weir_algorithm algos[] = {WEIR_ALGO_FIXED_WINDOW, WEIR_ALGO_GCRA, WEIR_ALGO_TOKEN_BUCKET,
                                    WEIR_ALGO_SLIDING_COUNTER, WEIR_ALGO_SLIDING_LOG};
    enum { VICTIMS = 5, LIMIT = 3 };
    weir_limit lims[VICTIMS];
    char key[48];
    for (int v = 0; v < VICTIMS; v++) {
        weir_limit_spec spec = {
            .algorithm = algos[v], .limit = LIMIT, .window_us = 3600 * S, .burst = LIMIT};
        if (algos[v] != WEIR_ALGO_GCRA && algos[v] != WEIR_ALGO_TOKEN_BUCKET)
            spec.burst = 0;
        assert_int_equal(weir_limit_compile(&spec, &lims[v]), WEIR_OK);
        snprintf(key, sizeof(key), "victim:%d", v);
        for (int i = 0; i < LIMIT; i++)
            assert_true(take(st, key, &lims[v], 0, 1).allowed);
        assert_false(take(st, key, &lims[v], 0, 1).allowed);
    }
    uint64_t flood = 0;
    for (int round = 0; round < 10; round++) {
        /* about three times what the store holds, per round */
        for (int i = 0; i < 100000; i++, flood++) {
            snprintf(key, sizeof(key), "flood:%llu", (unsigned long long)flood);
            weir_result r;
            const weir_limit *l = &lims[flood % VICTIMS];
            assert_int_equal(weir_memstore_take(st, key, strlen(key), l, S + round, LIMIT, &r),
                             WEIR_OK);
        }
        for (int v = 0; v < VICTIMS; v++) {
            snprintf(key, sizeof(key), "victim:%d", v);
            if (take(st, key, &lims[v], 2 * S, 1).allowed)
                fail_msg("round %d: %s (%s) got a fresh quota", round, key,
                         weir_algorithm_name(algos[v]));
        }
    }
    assert_true(stats(st).evictions > flood / 2);
    close_store(&f);
}

static void at_rest_keys_go_before_over_limit_keys(void **unused)
{
    (void)unused;
    fixture f;
    weir_store *st = open_store(&f, 200 * 1024, 1);
    weir_limit hour = compile(WEIR_ALGO_TOKEN_BUCKET, 1, 3600 * S);
    weir_limit sec = compile(WEIR_ALGO_TOKEN_BUCKET, 5, S);
    weir_limit busy = compile(WEIR_ALGO_TOKEN_BUCKET, 100, 3600 * S); /* active, under limit */
    char key[32];
    for (int i = 0; i < 100; i++) { /* over their limit for an hour */
        snprintf(key, sizeof(key), "over:%d", i);
        assert_true(take(st, key, &hour, 0, 1).allowed);
        assert_false(take(st, key, &hour, 0, 1).allowed);
    }
    for (int i = 0; i < 1000; i++) { /* back at rest after one second */
        snprintf(key, sizeof(key), "rest:%d", i);
        assert_true(take(st, key, &sec, 0, 1).allowed);
    }
    /* stream active keys until the cap forces removals */
    int i = 0;
    for (; stats(st).expirations < 1000; i++) {
        snprintf(key, sizeof(key), "new:%d", i);
        assert_true(take(st, key, &busy, 10 * S, 1).allowed);
        assert_true(i < 100000);
    }
    /* every at-rest key went before any active key did */
    assert_int_equal(stats(st).evictions, 0);
    /* keep streaming: now active keys must go, but not the over-limit ones */
    for (int j = 0; j < 20000; j++) {
        snprintf(key, sizeof(key), "more:%d", j);
        assert_true(take(st, key, &busy, 11 * S, 1).allowed);
    }
    assert_true(stats(st).evictions > 0);
    for (int k = 0; k < 100; k++) {
        snprintf(key, sizeof(key), "over:%d", k);
        weir_result r = take(st, key, &hour, 12 * S, 1);
        assert_false(r.allowed); /* still remembered as over its limit */
    }
    assert_true(stats(st).bytes <= 200 * 1024);
    close_store(&f);
}

static void cap_smaller_than_one_key(void **unused)
{
    (void)unused;
    fixture f;
    weir_store *st = open_store(&f, 100, 1);
    weir_limit lim = compile(WEIR_ALGO_GCRA, 10, S);
    weir_result r;
    assert_int_equal(weir_memstore_take(st, "k", 1, &lim, 0, 1, &r), WEIR_ETOOBIG);
    close_store(&f);
}

/* Check all, then charge all: a denial by one limit spends no other's. */
static void atomic_batch_charges_all_or_nothing(void **unused)
{
    (void)unused;
    fixture f;
    weir_store *st = open_store(&f, 0, 0);
    weir_limit per_user = compile(WEIR_ALGO_SLIDING_COUNTER, 10, 60 * S);
    weir_limit per_endpoint = compile(WEIR_ALGO_FIXED_WINDOW, 2, 60 * S);
    weir_op ops[2] = {
        {.key = "user:1", .key_len = 6, .limit = &per_user, .hits = 1},
        {.key = "endpoint:/x", .key_len = 11, .limit = &per_endpoint, .hits = 1},
    };
    for (int i = 0; i < 2; i++) {
        assert_int_equal(weir_memstore_run(st, ops, 2, 0, WEIR_BATCH_ATOMIC), WEIR_OK);
        assert_true(ops[0].result.allowed && ops[1].result.allowed);
    }
    assert_int_equal(weir_memstore_run(st, ops, 2, 0, WEIR_BATCH_ATOMIC), WEIR_OK);
    assert_int_equal(ops[0].status, WEIR_OK);
    assert_false(ops[1].result.allowed);
    /* the admitting op reports its budget as it stays, not as if charged */
    assert_true(ops[0].result.allowed);
    assert_int_equal(ops[0].result.remaining, 8);
    /* the user's budget is untouched by the denied request */
    weir_result r = take(st, "user:1", &per_user, 0, 0);
    assert_int_equal(r.remaining, 8);
    /* the same key twice in one batch is charged for both */
    weir_limit two = compile(WEIR_ALGO_TOKEN_BUCKET, 2, 60 * S);
    weir_op dup[2] = {
        {.key = "d", .key_len = 1, .limit = &two, .hits = 2},
        {.key = "d", .key_len = 1, .limit = &two, .hits = 1},
    };
    assert_int_equal(weir_memstore_run(st, dup, 2, 0, WEIR_BATCH_ATOMIC), WEIR_OK);
    assert_false(dup[1].result.allowed);
    assert_int_equal(take(st, "d", &two, 0, 0).remaining, 2);
    /* release ops and oversized batches are refused */
    weir_op rel = {.key = "d", .key_len = 1, .limit = &two, .kind = WEIR_OP_RELEASE};
    assert_int_equal(weir_memstore_run(st, &rel, 1, 0, WEIR_BATCH_ATOMIC), WEIR_EINVAL);
    weir_op many[65];
    for (int i = 0; i < 65; i++)
        many[i] = (weir_op){.key = "m", .key_len = 1, .limit = &two, .hits = 0};
    assert_int_equal(weir_memstore_run(st, many, 65, 0, WEIR_BATCH_ATOMIC), WEIR_EINVAL);
    close_store(&f);
}

/* Atomic batches of every size up to 12 on a store of 2 shards, so that
 * ops share shards in every order: the shards are locked once each (a
 * shard locked twice would hang), each op is charged once, a batch with
 * one denial charges nothing, and a key named twice is charged twice. */
static void atomic_batches_of_every_size(void **unused)
{
    (void)unused;
    fixture f;
    weir_store *st = open_store(&f, 0, 2);
    weir_limit three = compile(WEIR_ALGO_FIXED_WINDOW, 3, 3600 * S);
    char names[13][16];
    weir_op ops[13];
    /* 16 sets of keys per size: their shards come in every order */
    for (size_t n = 1; n <= 12; n++) {
        for (int set = 0; set < 16; set++) {
            for (size_t i = 0; i <= n; i++)
                snprintf(names[i], sizeof(names[i]), "%zu:%d:%zu", n, set, i);
            for (size_t i = 0; i < n; i++)
                ops[i] = (weir_op){
                    .key = names[i], .key_len = strlen(names[i]), .limit = &three, .hits = 1};
            for (int round = 0; round < 3; round++) {
                assert_int_equal(weir_memstore_run(st, ops, n, 0, WEIR_BATCH_ATOMIC), WEIR_OK);
                for (size_t i = 0; i < n; i++) {
                    assert_true(ops[i].result.allowed);
                    assert_int_equal(ops[i].result.remaining, 2 - round);
                }
            }
            /* the first n - 1 keys are spent; the fresh key n is not charged */
            ops[n - 1] =
                (weir_op){.key = names[n], .key_len = strlen(names[n]), .limit = &three, .hits = 1};
            assert_int_equal(weir_memstore_run(st, ops, n, 0, WEIR_BATCH_ATOMIC), WEIR_OK);
            if (n > 1)
                assert_false(ops[0].result.allowed);
            assert_int_equal(take(st, names[n], &three, 0, 0).remaining, n > 1 ? 3 : 2);
        }
    }
    /* a, b, a: a is charged for both */
    weir_op aba[3] = {
        {.key = "a", .key_len = 1, .limit = &three, .hits = 1},
        {.key = "b", .key_len = 1, .limit = &three, .hits = 1},
        {.key = "a", .key_len = 1, .limit = &three, .hits = 1},
    };
    assert_int_equal(weir_memstore_run(st, aba, 3, 0, WEIR_BATCH_ATOMIC), WEIR_OK);
    assert_true(aba[2].result.allowed);
    assert_int_equal(take(st, "a", &three, 0, 0).remaining, 1);
    assert_int_equal(take(st, "b", &three, 0, 0).remaining, 2);
    close_store(&f);
}

static void concurrency_leases_through_the_store(void **unused)
{
    (void)unused;
    fixture f;
    weir_store *st = open_store(&f, 0, 0);
    weir_limit lim = compile(WEIR_ALGO_CONCURRENCY, 2, 30 * S);
    weir_result a = take(st, "conn", &lim, 0, 1);
    weir_result b = take(st, "conn", &lim, 0, 1);
    assert_true(a.allowed && b.allowed);
    assert_true(a.lease != 0 && b.lease != a.lease);
    assert_false(take(st, "conn", &lim, 0, 1).allowed);
    weir_op rel = {
        .key = "conn", .key_len = 4, .limit = &lim, .kind = WEIR_OP_RELEASE, .lease = a.lease};
    assert_int_equal(weir_memstore_run(st, &rel, 1, 1, 0), WEIR_OK);
    assert_int_equal(rel.status, WEIR_OK);
    assert_int_equal(rel.result.remaining, 1);
    assert_int_equal(weir_memstore_run(st, &rel, 1, 1, 0), WEIR_OK);
    assert_int_equal(rel.status, WEIR_ENOLEASE);
    weir_result c = take(st, "conn", &lim, 2, 1);
    assert_true(c.allowed);
    /* after the key is swept and made again, old lease ids stay unknown */
    assert_int_equal(weir_memstore_sweep(st, 100 * S, 1000), 1);
    weir_result d = take(st, "conn", &lim, 100 * S, 1);
    assert_true(d.allowed);
    assert_true(d.lease > c.lease);
    rel.lease = c.lease;
    assert_int_equal(weir_memstore_run(st, &rel, 1, 100 * S, 0), WEIR_OK);
    assert_int_equal(rel.status, WEIR_ENOLEASE);
    /* release on another algorithm's key */
    weir_limit tb = compile(WEIR_ALGO_TOKEN_BUCKET, 2, S);
    weir_op bad = {.key = "tb", .key_len = 2, .limit = &tb, .kind = WEIR_OP_RELEASE, .lease = 1};
    assert_int_equal(weir_memstore_run(st, &bad, 1, 0, 0), WEIR_OK);
    assert_int_equal(bad.status, WEIR_EALGO);
    close_store(&f);
}

static void changed_limit_starts_fresh(void **unused)
{
    (void)unused;
    fixture f;
    weir_store *st = open_store(&f, 0, 0);
    weir_limit fw = compile(WEIR_ALGO_FIXED_WINDOW, 1, S);
    weir_limit log = compile(WEIR_ALGO_SLIDING_LOG, 3, S);
    assert_true(take(st, "k", &fw, 0, 1).allowed);
    assert_false(take(st, "k", &fw, 0, 1).allowed);
    weir_result r = take(st, "k", &log, 0, 1);
    assert_true(r.allowed);
    assert_int_equal(r.remaining, 2);
    assert_int_equal(stats(st).keys, 1);
    close_store(&f);
}

static void store_time_never_goes_back(void **unused)
{
    (void)unused;
    fixture f;
    weir_store *st = open_store(&f, 0, 1);
    weir_limit lim = compile(WEIR_ALGO_FIXED_WINDOW, 1, S);
    assert_true(take(st, "a", &lim, 5 * S, 1).allowed);
    /* an earlier time maps to an earlier window, but the store stays in 5 s */
    assert_false(take(st, "a", &lim, 1 * S, 1).allowed);
    assert_false(take(st, "a", &lim, 5 * S + 1, 1).allowed);
    assert_true(take(st, "a", &lim, 6 * S, 1).allowed);
    close_store(&f);
}

typedef struct cb_log {
    int calls;
    size_t n;
    weir_status status;
} cb_log;

static void on_done(void *arg, weir_op *ops, size_t n, weir_status status)
{
    cb_log *l = arg;
    (void)ops;
    l->calls++;
    l->n = n;
    l->status = status;
}

static void async_interface(void **unused)
{
    (void)unused;
    fixture f;
    weir_store *st = open_store(&f, 0, 0);
    weir_limit lim = compile(WEIR_ALGO_GCRA, 1, S);
    weir_op ops[3] = {
        {.key = "x", .key_len = 1, .limit = &lim, .hits = 1},
        {.key = "x", .key_len = 1, .limit = &lim, .hits = 1},
        {.key = NULL, .key_len = 1, .limit = &lim, .hits = 1},
    };
    cb_log log = {0};
    assert_int_equal(weir_store_submit(st, ops, 3, 0, 0, on_done, &log), WEIR_OK);
    assert_int_equal(log.calls, 1); /* inline store: already done */
    assert_int_equal(log.n, 3);
    assert_int_equal(log.status, WEIR_OK);
    assert_true(ops[0].result.allowed);
    assert_false(ops[1].result.allowed);
    assert_int_equal(ops[2].status, WEIR_EINVAL);
    /* refused batches never call back */
    assert_int_equal(weir_store_submit(st, ops, 0, 0, 0, on_done, &log), WEIR_EINVAL);
    assert_int_equal(weir_store_submit(st, ops, 1, 0, 8, on_done, &log), WEIR_EINVAL);
    assert_int_equal(weir_store_submit(st, ops, 1, 0, 0, NULL, &log), WEIR_EINVAL);
    assert_int_equal(weir_store_submit(NULL, ops, 1, 0, 0, on_done, &log), WEIR_EINVAL);
    assert_int_equal(weir_store_submit(st, ops, WEIR_MAX_BATCH + 1, 0, 0, on_done, &log),
                     WEIR_EINVAL);
    assert_int_equal(log.calls, 1);
    assert_int_equal(weir_store_stats_get(st, NULL), WEIR_EINVAL);
    weir_store_free(NULL);
    close_store(&f);
}

static void batch_matches_single_calls(void **unused)
{
    (void)unused;
    fixture a, b;
    weir_store *s1 = open_store(&a, 0, 0);
    weir_store *s2 = open_store(&b, 0, 0);
    weir_limit lim = compile(WEIR_ALGO_SLIDING_COUNTER, 3, S);
    test_rng rng = {test_seed("batch_matches_single_calls")};
    char keys[64][16];
    weir_op ops[64];
    for (int round = 0; round < 200; round++) {
        size_t n = 1 + rng_below(&rng, 64);
        for (size_t i = 0; i < n; i++) {
            snprintf(keys[i], sizeof(keys[i]), "k%llu", (unsigned long long)rng_below(&rng, 50));
            ops[i] = (weir_op){.key = keys[i],
                               .key_len = strlen(keys[i]),
                               .limit = &lim,
                               .hits = rng_below(&rng, 3)};
        }
        int64_t now = round * 20000;
        assert_int_equal(weir_memstore_run(s1, ops, n, now, 0), WEIR_OK);
        for (size_t i = 0; i < n; i++) {
            weir_result r;
            assert_int_equal(
                weir_memstore_take(s2, keys[i], strlen(keys[i]), &lim, now, ops[i].hits, &r),
                WEIR_OK);
            assert_int_equal(ops[i].status, WEIR_OK);
            assert_int_equal(ops[i].result.allowed, r.allowed);
            assert_int_equal(ops[i].result.remaining, r.remaining);
        }
    }
    close_store(&a);
    close_store(&b);
}

/* Keys given as digests (WEIR_BATCH_DIGESTS) count apart exactly as keys
 * hashed by the store, in independent and atomic batches; a key of the
 * wrong length is refused. */
static void digest_keys(void **unused)
{
    (void)unused;
    fixture f;
    weir_store *st = open_store(&f, 0, 0);
    weir_limit lim = compile(WEIR_ALGO_TOKEN_BUCKET, 2, 60 * S);
    unsigned char keys[40][WEIR_DIGEST_BYTES];
    weir_op ops[40];
    test_rng rng = {test_seed("digest_keys")};
    for (int i = 0; i < 40; i++) {
        /* random bytes, as a keyed hash gives */
        for (size_t b = 0; b < WEIR_DIGEST_BYTES; b++)
            keys[i][b] = (unsigned char)rng_below(&rng, 256);
        ops[i] = (weir_op){.key = keys[i], .key_len = WEIR_DIGEST_BYTES, .limit = &lim, .hits = 1};
    }
    for (int round = 0; round < 3; round++) {
        assert_int_equal(weir_memstore_run(st, ops, 40, 0, WEIR_BATCH_DIGESTS), WEIR_OK);
        for (int i = 0; i < 40; i++) {
            assert_int_equal(ops[i].status, WEIR_OK);
            assert_int_equal(ops[i].result.allowed, round < 2);
            assert_int_equal(ops[i].result.remaining, round < 2 ? 1 - round : 0);
        }
    }
    assert_int_equal(stats(st).keys, 40);
    /* atomic: one exhausted key denies the batch and charges nobody */
    unsigned char fresh[WEIR_DIGEST_BYTES] = {1, 2, 3};
    weir_op pair[2] = {
        {.key = fresh, .key_len = WEIR_DIGEST_BYTES, .limit = &lim, .hits = 1},
        {.key = keys[0], .key_len = WEIR_DIGEST_BYTES, .limit = &lim, .hits = 1},
    };
    assert_int_equal(weir_memstore_run(st, pair, 2, 0, WEIR_BATCH_ATOMIC | WEIR_BATCH_DIGESTS),
                     WEIR_OK);
    assert_true(pair[0].result.allowed);
    assert_false(pair[1].result.allowed);
    assert_int_equal(stats(st).keys, 40);
    /* wrong length: the op fails (independent), the batch fails (atomic) */
    weir_op bad = {.key = "short", .key_len = 5, .limit = &lim, .hits = 1};
    assert_int_equal(weir_memstore_run(st, &bad, 1, 0, WEIR_BATCH_DIGESTS), WEIR_OK);
    assert_int_equal(bad.status, WEIR_EINVAL);
    assert_int_equal(weir_memstore_run(st, &bad, 1, 0, WEIR_BATCH_ATOMIC | WEIR_BATCH_DIGESTS),
                     WEIR_EINVAL);
    assert_int_equal(weir_memstore_run(st, &bad, 1, 0, 4u), WEIR_EINVAL);
    close_store(&f);
}

static void bad_options(void **unused)
{
    (void)unused;
    weir_ctx *ctx;
    assert_int_equal(weir_ctx_new(NULL, &ctx), WEIR_OK);
    weir_store *st = NULL;
    weir_memstore_options o = {.size = sizeof(o), .shards = 3};
    assert_int_equal(weir_memstore_new(ctx, &o, &st), WEIR_EINVAL);
    o.shards = 2048;
    assert_int_equal(weir_memstore_new(ctx, &o, &st), WEIR_EINVAL);
    o = (weir_memstore_options){.size = 4};
    assert_int_equal(weir_memstore_new(ctx, &o, &st), WEIR_EINVAL);
    assert_int_equal(weir_memstore_new(NULL, NULL, &st), WEIR_EINVAL);
    assert_null(st);
    weir_result r;
    weir_limit lim = compile(WEIR_ALGO_GCRA, 1, S);
    assert_int_equal(weir_memstore_take(NULL, "k", 1, &lim, 0, 1, &r), WEIR_EINVAL);
    weir_ctx_free(ctx);
}

/* Keys "key:0".."key:<n-1>" of a token bucket of 5 an hour: each charged
 * 1 + i % 3 at time 0, or (look) found with what that left. */
static void charge_keys(weir_store *st, const weir_limit *lim, int n, bool look)
{
    char key[32];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "key:%d", i);
        uint64_t hits = look ? 0 : 1 + (uint64_t)(i % 3);
        assert_int_equal(take(st, key, lim, 0, hits).remaining, 4 - (uint64_t)(i % 3));
    }
}

/* A store of these options grows to n keys of charge_keys(): every key
 * keeps its state; the bytes reported are what the allocator holds but
 * for the room some allocations have to align their tables in (between
 * room_lo and room_hi bytes), which is neither used (it is given back to
 * the system) nor counted; and freeing the store gives everything back. */
static void growth_keeps_keys(const weir_memstore_options *o, int n, uint64_t room_lo,
                              uint64_t room_hi)
{
    counting_alloc ca;
    weir_ctx *ctx;
    assert_int_equal(counting_ctx_new(&ca, &ctx), WEIR_OK);
    weir_store *st;
    assert_int_equal(weir_memstore_new(ctx, o, &st), WEIR_OK);
    weir_limit lim = compile(WEIR_ALGO_TOKEN_BUCKET, 5, 3600 * S);
    charge_keys(st, &lim, n, false);
    weir_store_stats s = stats(st);
    assert_int_equal(s.keys, n);
    assert_int_equal(s.evictions, 0);
    assert_true(s.bytes >= (uint64_t)n * 32u);
    assert_true((uint64_t)ca.live_bytes >= s.bytes + room_lo);
    assert_true((uint64_t)ca.live_bytes <= s.bytes + room_hi);
    charge_keys(st, &lim, n, true);
    weir_store_free(st);
    weir_ctx_free(ctx);
    assert_int_equal(ca.live_blocks, 0);
}

/* Tables that grow through the sizes the arena holds (64 KB to 1 MB; 20k
 * keys a shard make tables of about 800 KB): the bytes count its chunks
 * whole, and each chunk's allocation has a 2 MB page of room to align it
 * in. */
static void keys_survive_growth_through_shared_pages(void **unused)
{
    (void)unused;
    weir_memstore_options o = {.size = sizeof(o), .shards = 2, .seed = 7};
    growth_keeps_keys(&o, 40000, 1u << 20, 4u << 20);
}

/* A shard's table past the arena's sizes (here one of about 5 MB) is an
 * allocation of its own, a huge page longer than the table to align it,
 * with or without a cap. */
static void keys_survive_growth_through_large_tables(void **unused)
{
    (void)unused;
    for (int capped = 0; capped < 2; capped++) {
        weir_memstore_options o = {
            .size = sizeof(o), .max_bytes = capped ? 256u << 20 : 0, .shards = 1, .seed = 11};
        growth_keeps_keys(&o, 120000, 1u << 20, 3u << 20);
    }
}

static void out_of_memory_loses_nothing(void **unused)
{
    (void)unused;
    counting_alloc ca;
    counting_alloc_init(&ca);
    weir_ctx_options co = {.size = sizeof(co), .allocator = &ca.a};
    weir_ctx *ctx;
    assert_int_equal(weir_ctx_new(&co, &ctx), WEIR_OK);
    weir_store *st;
    weir_memstore_options o = {.size = sizeof(o), .shards = 1, .seed = 1};
    assert_int_equal(weir_memstore_new(ctx, &o, &st), WEIR_OK);
    weir_limit lim = compile(WEIR_ALGO_SLIDING_LOG, 4, S);
    assert_true(take(st, "kept", &lim, 0, 1).allowed);
    /* every allocation an insert makes fails in turn: an error, never a
     * crash, and the key already held keeps its state */
    for (int fail = 1; fail <= 4; fail++) {
        ca.fail_after = fail;
        weir_result r;
        weir_status s =
            weir_memstore_take(st, "a-key-long-enough-for-the-heap", 30, &lim, 0, 1, &r);
        assert_true(s == WEIR_OK || s == WEIR_ENOMEM);
        ca.fail_after = 0;
    }
    assert_int_equal(take(st, "kept", &lim, 0, 0).remaining, 3);
    weir_store_free(st);
    weir_ctx_free(ctx);
    assert_int_equal(ca.live_blocks, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_verdicts_as_step),
        cmocka_unit_test(takes_keep_their_reserve),
        cmocka_unit_test(atomic_takes_keep_their_reserve),
        cmocka_unit_test(refund_and_charge_through_the_store),
        cmocka_unit_test(denials_and_peeks_create_no_key),
        cmocka_unit_test(key_limits),
        cmocka_unit_test(keys_at_rest_are_swept),
        cmocka_unit_test(no_cap_never_evicts),
        cmocka_unit_test(inserts_sweep_incrementally),
        cmocka_unit_test(memory_cap_holds),
        cmocka_unit_test(memory_cap_is_used),
        cmocka_unit_test(key_flood_keeps_keys_in_use),
        cmocka_unit_test(at_rest_keys_go_before_over_limit_keys),
        cmocka_unit_test(cap_smaller_than_one_key),
        cmocka_unit_test(atomic_batch_charges_all_or_nothing),
        cmocka_unit_test(atomic_batches_of_every_size),
        cmocka_unit_test(concurrency_leases_through_the_store),
        cmocka_unit_test(changed_limit_starts_fresh),
        cmocka_unit_test(store_time_never_goes_back),
        cmocka_unit_test(async_interface),
        cmocka_unit_test(batch_matches_single_calls),
        cmocka_unit_test(digest_keys),
        cmocka_unit_test(bad_options),
        cmocka_unit_test(keys_survive_growth_through_shared_pages),
        cmocka_unit_test(keys_survive_growth_through_large_tables),
        cmocka_unit_test(out_of_memory_loses_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
