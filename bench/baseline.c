/*
 * baseline.c - the floor: what one rate limit decision costs on this
 * machine with nothing but a hash and a memory access.
 *
 * A token bucket (BENCH_LIMIT per BENCH_WINDOW_US, burst = limit, the same
 * exact integer refill as lib/algo/bucket.c) in a bare open-addressing
 * table: 32-byte slots holding the key inline, linear probing, load <= 0.75,
 * no locks, no expiry, no result struct. It hashes with XXH3 and a secret,
 * as the memory store does, so the difference between the two is the
 * store's own work. "hash only" times hashing the stream's keys alone;
 * "batch" decides BENCH_BASELINE_BATCH keys at a time after hashing them
 * and prefetching their slots, the floor for weir_memstore_run().
 *
 * Two variants of the single loop test why the store's misses overlap less
 * than the table's: "locked" takes one of 64 cache-line-padded spinlocks
 * around each decision (the store's shard lock), and "padded" also runs
 * BENCH_BASELINE_PAD instructions per decision that depend neither on the
 * table nor on one another across decisions (a short multiply chain per
 * decision). If the time of a decision at 1M keys is the miss that cannot
 * overlap the next one once the reorder window is full, "padded" costs far
 * more at 1M keys than with the table in cache.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "bench.h"

#define REPS_MAX 64u
#define LOCKS 64u

/* One lock per 64-byte line, as the store's shards have. */
typedef struct padded_lock {
    _Alignas(64) atomic_uint held;
} padded_lock;

static padded_lock locks[LOCKS];

static void lock(padded_lock *l)
{
    while (atomic_exchange_explicit(&l->held, 1u, memory_order_acquire))
        while (atomic_load_explicit(&l->held, memory_order_relaxed))
            ;
}

static void unlock(padded_lock *l)
{
    atomic_store_explicit(&l->held, 0u, memory_order_release);
}

/* BENCH_BASELINE_PAD instructions (4 per step) seeded by i alone. */
static uint64_t pad(uint64_t i)
{
    uint64_t v = i;
    for (unsigned k = 0; k < BENCH_BASELINE_PAD / 4; k++)
        v = v * 0x9e3779b97f4a7c15ull + (v >> 7);
    return v;
}

typedef struct slot {
    char key[BENCH_KEY_BYTES]; /* a bench_key; length byte 0 = empty */
    int64_t level;             /* missing tokens, in 1/unit of a request */
    int64_t last_us;
} slot;

typedef struct table {
    slot *s;
    uint64_t mask;
    unsigned char secret[XXH3_SECRET_SIZE_MIN];
} table;

/* The bucket in the units of lib/algo/bucket.c: gcd(limit, window) = g,
 * unit = window / g per request, rate = limit / g per microsecond. */
typedef struct bucket {
    int64_t unit;
    int64_t rate;
    int64_t capacity;
} bucket;

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static bucket bucket_of(int64_t limit, int64_t window_us)
{
    int64_t g = gcd64(limit, window_us);
    bucket b = {window_us / g, limit / g, 0};
    b.capacity = b.unit * limit;
    return b;
}

static uint64_t key_hash(const table *t, const bench_key *k)
{
    return XXH3_64bits_withSecret(k->b, bench_key_len(k), t->secret, sizeof(t->secret));
}

/* The key's slot, claimed for it if absent (the table never fills: it has
 * at least 4/3 slots per key). */
static slot *lookup_hashed(table *t, const bench_key *k, uint64_t h)
{
    for (uint64_t i = h & t->mask;; i = (i + 1) & t->mask) {
        slot *s = &t->s[i];
        if (s->key[BENCH_KEY_BYTES - 1] == 0) {
            memcpy(s->key, k->b, BENCH_KEY_BYTES);
            return s;
        }
        if (memcmp(s->key, k->b, BENCH_KEY_BYTES) == 0)
            return s;
    }
}

static slot *lookup(table *t, const bench_key *k)
{
    return lookup_hashed(t, k, key_hash(t, k));
}

static bool take(const bucket *b, slot *s, int64_t now_us)
{
    int64_t t = now_us > s->last_us ? now_us : s->last_us;
    int64_t drained = (t - s->last_us) * b->rate;
    int64_t level = s->level > drained ? s->level - drained : 0;
    if (level + b->unit > b->capacity)
        return false;
    s->level = level + b->unit;
    s->last_us = t;
    return true;
}

bool bench_baseline_run(uint64_t nkeys, const bench_key *stream, size_t n, unsigned reps,
                        int64_t now_us, bool hugepages, bench_baseline *out)
{
    if (reps == 0 || reps > REPS_MAX || n == 0)
        return false;
    memset(out, 0, sizeof(*out));
    table t;
    uint64_t cap = 16;
    while (cap < nkeys + nkeys / 3)
        cap *= 2;
    t.mask = cap - 1;
    bench_arena *arena = NULL;
    if (hugepages) {
        arena = bench_arena_new(cap * sizeof(slot) + 4096);
        t.s = arena ? bench_arena_alloc(arena, cap * sizeof(slot)) : NULL;
    } else {
        t.s = calloc(cap, sizeof(slot));
    }
    if (!t.s) {
        bench_arena_free(arena);
        return false;
    }
    out->table_bytes = cap * sizeof(slot);
    for (size_t i = 0; i < sizeof(t.secret); i++)
        t.secret[i] = (unsigned char)(i * 131u + 7u);
    bucket b = bucket_of(BENCH_LIMIT, BENCH_WINDOW_US);

    /* Warm up: every key once, at one instant. */
    for (uint64_t i = 0; i < nkeys; i++) {
        bench_key k;
        bench_key_make(i, &k);
        take(&b, lookup(&t, &k), now_us);
    }
    now_us++;

    double table_ns[REPS_MAX], hash_ns[REPS_MAX], batch_ns[REPS_MAX];
    double locked_ns[REPS_MAX], padded_ns[REPS_MAX];
    uint64_t sink = 0;
    for (unsigned r = 0; r < reps; r++) {
        double t0 = bench_now_s();
        uint64_t allowed = 0;
        for (size_t i = 0; i < n; i++)
            allowed += take(&b, lookup(&t, &stream[i]), now_us++);
        double t1 = bench_now_s();
        table_ns[r] = (t1 - t0) * 1e9 / (double)n;
        out->allowed += allowed;
        out->decisions += n;

        t0 = bench_now_s();
        for (size_t i = 0; i < n; i++) {
            uint64_t h = key_hash(&t, &stream[i]);
            padded_lock *l = &locks[h % LOCKS];
            lock(l);
            sink += take(&b, lookup_hashed(&t, &stream[i], h), now_us++);
            unlock(l);
        }
        t1 = bench_now_s();
        locked_ns[r] = (t1 - t0) * 1e9 / (double)n;

        t0 = bench_now_s();
        for (size_t i = 0; i < n; i++) {
            uint64_t h = key_hash(&t, &stream[i]);
            padded_lock *l = &locks[h % LOCKS];
            lock(l);
            slot *s = lookup_hashed(&t, &stream[i], h);
            sink += take(&b, s, now_us++);
            /* stored so the compiler keeps it; a slot byte nobody reads */
            s->key[BENCH_KEY_BYTES - 2] ^= (char)(pad(i) == 1);
            unlock(l);
        }
        t1 = bench_now_s();
        padded_ns[r] = (t1 - t0) * 1e9 / (double)n;

        t0 = bench_now_s();
        for (size_t i = 0; i < n; i++)
            sink += key_hash(&t, &stream[i]);
        t1 = bench_now_s();
        hash_ns[r] = (t1 - t0) * 1e9 / (double)n;

        /* Batches as weir_memstore_run() gets them: hash all and prefetch
         * their slots, then decide, all at one time per batch. */
        size_t nb = n / BENCH_BASELINE_BATCH;
        t0 = bench_now_s();
        for (size_t i = 0; i < nb; i++) {
            const bench_key *k = &stream[i * BENCH_BASELINE_BATCH];
            uint64_t h[BENCH_BASELINE_BATCH];
            for (unsigned j = 0; j < BENCH_BASELINE_BATCH; j++) {
                h[j] = key_hash(&t, &k[j]);
                __builtin_prefetch(&t.s[h[j] & t.mask]);
            }
            for (unsigned j = 0; j < BENCH_BASELINE_BATCH; j++)
                sink += take(&b, lookup_hashed(&t, &k[j], h[j]), now_us);
            now_us += BENCH_BASELINE_BATCH;
        }
        t1 = bench_now_s();
        batch_ns[r] = (t1 - t0) * 1e9 / (double)(nb * BENCH_BASELINE_BATCH);
    }
    /* Keep the hash loop from being optimised away. */
    volatile uint64_t keep = sink;
    (void)keep;
    out->table_ns = bench_stat_of(table_ns, reps);
    out->hash_ns = bench_stat_of(hash_ns, reps);
    out->batch_ns = bench_stat_of(batch_ns, reps);
    out->locked_ns = bench_stat_of(locked_ns, reps);
    out->padded_ns = bench_stat_of(padded_ns, reps);
    if (arena)
        bench_arena_free(arena);
    else
        free(t.s);
    return true;
}
