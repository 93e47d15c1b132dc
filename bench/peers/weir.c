/*
 * weir.c - weir-bench-peer: libweir in process, driven the way the peer
 * drivers beside it drive their libraries (xtime_rate.go, flexible.js), so
 * that bench/peers.sh can run them side by side on one workload.
 *
 *   weir-bench-peer KEYS OPS THREADS REPS [ALGORITHM]
 *
 * The workload, the same in every driver: KEYS keys "user:<n>", each with
 * its own limit of 60,000 a minute (ALGORITHM: token_bucket, the default,
 * whose burst is the limit, or fixed_window); every key decided once
 * before timing (the warm-up), then THREADS threads each decide OPS keys
 * of a stream drawn at random (xorshift32 from seed 2463534242 + the
 * thread's index, n = value % KEYS), built before timing. Every decision
 * reads the system clock, as a peer's Allow() or consume() does. The
 * memory store is shared by the threads, as a server's is. No key is ever
 * over its limit: the admitting path is the one measured.
 *
 * Prints one line, the median of REPS timed passes over the streams:
 * decisions per second (all threads), ns per decision (one thread's), the
 * fraction admitted.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../timing.h"
#include "weir/weir.h"

#define MAX_THREADS 64
#define MAX_REPS 101
#define SEED 2463534242u

typedef char key_name[16];

typedef struct stream {
    key_name *names;
    uint8_t *lens;
} stream;

typedef struct worker {
    pthread_t thread;
    weir_store *store;
    const weir_limit *limit;
    pthread_barrier_t *start, *done;
    stream s;
    uint32_t ops;
    int reps;
    double seconds[MAX_REPS];
    uint64_t admitted;
} worker;

static uint32_t xorshift32(uint32_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return *x;
}

static uint8_t key_write(key_name out, uint32_t n)
{
    return (uint8_t)snprintf(out, sizeof(key_name), "user:%u", n);
}

static int64_t clock_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int stream_make(stream *s, uint32_t keys, uint32_t ops, uint32_t seed)
{
    s->names = malloc((size_t)ops * sizeof(*s->names));
    s->lens = malloc(ops);
    if (!s->names || !s->lens)
        return 1;
    for (uint32_t i = 0; i < ops; i++)
        s->lens[i] = key_write(s->names[i], xorshift32(&seed) % keys);
    return 0;
}

static void *work(void *arg)
{
    worker *w = arg;
    for (int r = 0; r < w->reps; r++) {
        pthread_barrier_wait(w->start);
        double t0 = bench_now_s();
        uint64_t admitted = 0;
        for (uint32_t i = 0; i < w->ops; i++) {
            weir_result res;
            if (weir_memstore_take(w->store, w->s.names[i], w->s.lens[i], w->limit, clock_us(), 1,
                                   &res) == WEIR_OK)
                admitted += res.allowed;
        }
        w->seconds[r] = bench_now_s() - t0;
        w->admitted += admitted;
        pthread_barrier_wait(w->done);
    }
    return NULL;
}

static unsigned long arg_num(const char *s, unsigned long lo, unsigned long hi)
{
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (!*s || *end || v < lo || v > hi) {
        fprintf(stderr, "weir-bench-peer: '%s' is not a number in %lu..%lu\n", s, lo, hi);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    if (argc < 5 || argc > 6) {
        fprintf(stderr, "usage: weir-bench-peer KEYS OPS THREADS REPS [ALGORITHM]\n");
        return 2;
    }
    uint32_t keys = (uint32_t)arg_num(argv[1], 1, 100000000);
    uint32_t ops = (uint32_t)arg_num(argv[2], 1, 100000000);
    unsigned threads = (unsigned)arg_num(argv[3], 1, MAX_THREADS);
    int reps = (int)arg_num(argv[4], 1, MAX_REPS);
    weir_limit_spec spec = {.limit = 60000, .window_us = 60 * 1000000LL};
    weir_limit limit;
    weir_ctx *ctx;
    weir_store *store;
    if (weir_algorithm_parse(argc > 5 ? argv[5] : "token_bucket", &spec.algorithm) != WEIR_OK ||
        weir_limit_compile(&spec, &limit) != WEIR_OK || weir_ctx_new(NULL, &ctx) != WEIR_OK ||
        weir_memstore_new(ctx, NULL, &store) != WEIR_OK) {
        fprintf(stderr, "weir-bench-peer: cannot set the store up\n");
        return 1;
    }

    /* The warm-up: every key once, so the timed path is lookup + step. */
    weir_result res;
    for (uint32_t n = 0; n < keys; n++) {
        key_name name;
        uint8_t len = key_write(name, n);
        if (weir_memstore_take(store, name, len, &limit, clock_us(), 1, &res) != WEIR_OK) {
            fprintf(stderr, "weir-bench-peer: the warm-up failed\n");
            return 1;
        }
    }

    static worker ws[MAX_THREADS];
    pthread_barrier_t start, done;
    pthread_barrier_init(&start, NULL, threads + 1);
    pthread_barrier_init(&done, NULL, threads + 1);
    for (unsigned t = 0; t < threads; t++) {
        ws[t] = (worker){.store = store,
                         .limit = &limit,
                         .start = &start,
                         .done = &done,
                         .ops = ops,
                         .reps = reps};
        if (stream_make(&ws[t].s, keys, ops, SEED + t) != 0 ||
            pthread_create(&ws[t].thread, NULL, work, &ws[t]) != 0) {
            fprintf(stderr, "weir-bench-peer: out of memory or threads\n");
            return 1;
        }
    }
    double rate[MAX_REPS], ns[MAX_REPS];
    for (int r = 0; r < reps; r++) {
        pthread_barrier_wait(&start);
        pthread_barrier_wait(&done);
        double slowest = 0, sum = 0;
        for (unsigned t = 0; t < threads; t++) {
            slowest = ws[t].seconds[r] > slowest ? ws[t].seconds[r] : slowest;
            sum += ws[t].seconds[r];
        }
        rate[r] = (double)ops * threads / slowest;
        ns[r] = sum / threads * 1e9 / ops;
    }
    uint64_t admitted = 0;
    for (unsigned t = 0; t < threads; t++) {
        pthread_join(ws[t].thread, NULL);
        admitted += ws[t].admitted;
        free(ws[t].s.names);
        free(ws[t].s.lens);
    }
    printf("%.0f %.1f %.4f\n", bench_median(rate, (size_t)reps), bench_median(ns, (size_t)reps),
           (double)admitted / ((double)ops * threads * reps));
    pthread_barrier_destroy(&start);
    pthread_barrier_destroy(&done);
    weir_store_free(store);
    weir_ctx_free(ctx);
    return 0;
}
