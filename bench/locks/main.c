/*
 * main.c - weir-bench-locks: where a shared table's lock should live for
 * two threads to scale, measured on a bare token-bucket table.
 *
 * One open-addressing table of 32-byte slots (the key inline, linear
 * probing, load <= 0.75, every key inserted before timing) is shared by 1
 * or 2 threads, each deciding on its own uniformly random stream of keys
 * for a fixed time. Two ways to guard a decision:
 *
 *   shard   one of 64 spinlocks, each on its own cache line, chosen by the
 *           key's hash: the memory store's layout (a shard lock)
 *   slot    a spinlock byte inside the key's own slot, so the only line a
 *           decision writes is the one it decides on
 *
 * With random keys over a large table, two threads rarely want the same
 * slot, but the other thread was the last to write a given shard line
 * about half the time: "shard" pays a cross-core transfer per decision
 * that "slot" does not. The figure is decisions/s, the median of REPS
 * runs; 1- and 2-thread runs alternate so both see the same disturbance.
 * The table is read only to find a key (nothing is inserted while timing),
 * so finding the slot before taking its lock is safe here.
 *
 *   weir-bench-locks [KEYS]      (default 1,000,000)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "../timing.h"

#define REPS 5
#define RUN_S 0.6
#define STREAM 4000000u
#define LOCKS 64u
#define KEY_BYTES 14u /* "user:<n>" zero-padded; byte 14 is the slot lock */

typedef struct slot {
    char key[KEY_BYTES];
    _Atomic unsigned char lock;
    unsigned char used;
    int64_t level;   /* missing tokens, in 1/unit of a request */
    int64_t last_us; /* when the bucket last drained */
} slot;

_Static_assert(sizeof(slot) == 32, "a slot is 32 bytes");

typedef struct padded_lock {
    _Alignas(64) atomic_uint held;
} padded_lock;

typedef enum mode { MODE_SHARD, MODE_SLOT, MODE_COUNT } mode;

static const char *const mode_names[MODE_COUNT] = {"shard", "slot"};

static slot *table;
static uint64_t mask;
static padded_lock shard_locks[LOCKS];
static uint64_t secret_seed = 0x9e3779b97f4a7c15ull;

/* A token bucket of 100 per second, burst 100: unit 10,000 per request,
 * drains 1 per microsecond (the arithmetic of lib/algo/bucket.c). */
#define UNIT 10000
#define CAPACITY (100 * UNIT)

static uint64_t rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* "user:<i>", zero-padded to KEY_BYTES (no NUL needed: compared whole);
 * fits for i < 10^9. */
static void key_of(uint64_t i, char out[KEY_BYTES])
{
    char tmp[32];
    int n = snprintf(tmp, sizeof(tmp), "user:%llu", (unsigned long long)i);
    memset(out, 0, KEY_BYTES);
    memcpy(out, tmp, n > 0 && (size_t)n < KEY_BYTES ? (size_t)n : KEY_BYTES);
}

static uint64_t hash_of(const char key[KEY_BYTES])
{
    return XXH3_64bits_withSeed(key, KEY_BYTES, secret_seed);
}

static slot *find(const char key[KEY_BYTES], uint64_t h)
{
    for (uint64_t i = h & mask;; i = (i + 1) & mask) {
        slot *s = &table[i];
        if (!s->used || memcmp(s->key, key, KEY_BYTES) == 0)
            return s;
    }
}

static bool take(slot *s, int64_t now_us)
{
    int64_t t = now_us > s->last_us ? now_us : s->last_us;
    int64_t drained = t - s->last_us;
    int64_t level = s->level > drained ? s->level - drained : 0;
    if (level + UNIT > CAPACITY)
        return false;
    s->level = level + UNIT;
    s->last_us = t;
    return true;
}

static void spin_lock(atomic_uint *l)
{
    while (atomic_exchange_explicit(l, 1u, memory_order_acquire))
        while (atomic_load_explicit(l, memory_order_relaxed))
            ;
}

static void slot_lock(slot *s)
{
    while (atomic_exchange_explicit(&s->lock, 1u, memory_order_acquire))
        while (atomic_load_explicit(&s->lock, memory_order_relaxed))
            ;
}

typedef struct worker {
    pthread_t tid;
    mode m;
    const char (*stream)[KEY_BYTES];
    double seconds;
    uint64_t decisions;
    uint64_t admitted;
    pthread_barrier_t *start;
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    pthread_barrier_wait(w->start);
    uint64_t n = 0, ok = 0;
    int64_t now_us = 1;
    double end = bench_now_s() + w->seconds;
    for (;;) {
        /* check the clock every 4096 decisions */
        for (unsigned k = 0; k < 4096; k++, n++) {
            const char *key = w->stream[n % STREAM];
            uint64_t h = hash_of(key);
            slot *s;
            switch (w->m) {
            case MODE_SHARD: {
                atomic_uint *l = &shard_locks[h % LOCKS].held;
                spin_lock(l);
                ok += take(find(key, h), now_us++);
                atomic_store_explicit(l, 0u, memory_order_release);
                break;
            }
            default:
                s = find(key, h);
                slot_lock(s);
                ok += take(s, now_us++);
                atomic_store_explicit(&s->lock, 0u, memory_order_release);
                break;
            }
        }
        if (bench_now_s() >= end)
            break;
    }
    w->decisions = n;
    w->admitted = ok;
    return NULL;
}

/* Decisions per second of @nt threads in mode @m. */
static double run(mode m, unsigned nt, char (*streams[2])[KEY_BYTES])
{
    worker w[2];
    pthread_barrier_t start;
    if (pthread_barrier_init(&start, NULL, nt + 1) != 0) {
        fprintf(stderr, "weir-bench-locks: pthread_barrier_init failed\n");
        exit(1);
    }
    for (unsigned i = 0; i < nt; i++) {
        w[i] = (worker){.m = m,
                        .stream = (const char(*)[KEY_BYTES])streams[i],
                        .seconds = RUN_S,
                        .start = &start};
        if (pthread_create(&w[i].tid, NULL, worker_main, &w[i]) != 0) {
            fprintf(stderr, "weir-bench-locks: pthread_create failed\n");
            exit(1);
        }
    }
    pthread_barrier_wait(&start);
    double t0 = bench_now_s();
    uint64_t total = 0;
    for (unsigned i = 0; i < nt; i++) {
        pthread_join(w[i].tid, NULL);
        total += w[i].decisions;
    }
    double dt = bench_now_s() - t0;
    pthread_barrier_destroy(&start);
    return (double)total / dt;
}

int main(int argc, char **argv)
{
    uint64_t nkeys = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000u;
    if (nkeys == 0 || nkeys > 1000000000u) {
        fprintf(stderr, "usage: weir-bench-locks [KEYS]   (1 to 10^9)\n");
        return 2;
    }
    uint64_t cap = 16;
    while (cap < nkeys + nkeys / 3)
        cap *= 2;
    mask = cap - 1;
    table = calloc(cap, sizeof(*table));
    char(*streams[2])[KEY_BYTES];
    streams[0] = malloc(STREAM * KEY_BYTES);
    streams[1] = malloc(STREAM * KEY_BYTES);
    if (!table || !streams[0] || !streams[1]) {
        fprintf(stderr, "weir-bench-locks: out of memory\n");
        return 1;
    }
    for (uint64_t i = 0; i < nkeys; i++) {
        char key[KEY_BYTES];
        key_of(i, key);
        slot *s = find(key, hash_of(key));
        memcpy(s->key, key, KEY_BYTES);
        s->used = 1;
    }
    uint64_t seed[2] = {1, 2};
    for (unsigned t = 0; t < 2; t++)
        for (uint32_t i = 0; i < STREAM; i++)
            key_of(rng(&seed[t]) % nkeys, streams[t][i]);

    time_t wall = time(NULL);
    char date[64];
    strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&wall));
    printf("weir-bench-locks, %s: %llu keys, %u-byte slots, runs of %.1f s, median of %d\n", date,
           (unsigned long long)nkeys, (unsigned)sizeof(slot), RUN_S, REPS);
    printf("%-8s %14s %14s %8s\n", "lock", "1 thread/s", "2 threads/s", "2T/1T");
    for (int m = 0; m < MODE_COUNT; m++) {
        double one[REPS], two[REPS];
        for (int r = 0; r < REPS; r++) {
            one[r] = run((mode)m, 1, streams);
            two[r] = run((mode)m, 2, streams);
        }
        bench_sort(one, REPS);
        bench_sort(two, REPS);
        printf("%-8s %13.2fM %13.2fM %7.2fx\n", mode_names[m], one[REPS / 2] / 1e6,
               two[REPS / 2] / 1e6, two[REPS / 2] / one[REPS / 2]);
    }
    free(table);
    free(streams[0]);
    free(streams[1]);
    return 0;
}
