/*
 * main.c - weir-bench-cms: the count-min limiter (weir/cms.h) against
 * exact counts, on key sets far larger than its memory.
 *
 *   distinct  every one of N keys once, in a random order: all of the
 *             stream is in its tail, the sketch's hardest case
 *   zipf      N requests drawn from a Zipf(1.1) law over the same N keys
 *
 * Keys are IPv4 addresses (4 bytes, 10.0.0.0 upwards: a per-IP limit at
 * the edge), one window, cost 1. For each trace:
 *
 *   1. with no limit to speak of (WEIR_CMS_MAX_LIMIT) every request is
 *      admitted and counted exactly beside the sketch (an array by key);
 *      then every key's estimate is read: keys under-counted (must be 0),
 *      the over-count's mean, p99 and maximum, and the bound e N / w;
 *   2. at limits 10, 100 and 1000, a fresh limiter (same seed) decides
 *      the trace while the exact count of admitted hits is kept: keys
 *      admitted past the limit (must be 0), and the share of keys with at
 *      least one request wrongly denied (the exact count had room).
 *
 * Then the time: each trace decided at limit 100 by one thread, and by
 * -t threads splitting it between them (wall clock over all the takes,
 * the median of 3 passes, each on a fresh limiter).
 *
 *   weir-bench-cms [-n KEYS] [-m BYTES] [-d DEPTH] [-s SEED] [-t THREADS]
 *
 * Defaults: 10,000,000 keys, 4,000,000 bytes, depth 4, seed 1, 2 threads.
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../timing.h"
#include "weir/weir.h"

#define MAX_THREADS 16
#define PASSES 3
#define HIST 65536u /* over-counts counted one by one below this */

typedef struct config {
    uint32_t keys;
    size_t bytes;
    uint32_t depth;
    uint64_t seed;
    uint32_t threads;
} config;

static weir_ctx *ctx;

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double unit(uint64_t *s)
{
    return (double)(splitmix(s) >> 11) * 0x1p-53;
}

/* Key @id: the address 10.0.0.0 + id, network order. */
static void key_of(uint32_t id, unsigned char k[4])
{
    uint32_t a = 0x0a000000u + id;
    k[0] = (unsigned char)(a >> 24);
    k[1] = (unsigned char)(a >> 16);
    k[2] = (unsigned char)(a >> 8);
    k[3] = (unsigned char)a;
}

static weir_cms *make(const config *cf, uint64_t limit)
{
    weir_cms_options o = {.size = sizeof(o),
                          .limit = limit,
                          .window_us = 60 * 1000000ll,
                          .depth = cf->depth,
                          .memory_bytes = cf->bytes,
                          .seed = cf->seed};
    weir_cms *c = NULL;
    weir_status st = weir_cms_new(ctx, &o, &c);
    if (st != WEIR_OK) {
        fprintf(stderr, "weir_cms_new: %s\n", weir_strerror(st));
        exit(1);
    }
    return c;
}

/* ------------------------------------------------------------ traces */

static uint32_t *distinct_trace(const config *cf)
{
    uint32_t *t = malloc((size_t)cf->keys * sizeof(*t));
    if (!t)
        exit(1);
    for (uint32_t i = 0; i < cf->keys; i++)
        t[i] = i;
    uint64_t s = cf->seed;
    for (uint32_t i = cf->keys - 1; i > 0; i--) {
        uint32_t j = (uint32_t)(splitmix(&s) % (i + 1u));
        uint32_t x = t[i];
        t[i] = t[j];
        t[j] = x;
    }
    return t;
}

/* Ranks by a Zipf(1.1) law (the inverse of its CDF), then each rank
 * mapped to a key at random, so that heavy keys are not neighbours. */
static uint32_t *zipf_trace(const config *cf)
{
    uint32_t n = cf->keys;
    double *cdf = malloc((size_t)n * sizeof(*cdf));
    uint32_t *t = malloc((size_t)n * sizeof(*t));
    uint32_t *perm = distinct_trace(cf);
    if (!cdf || !t)
        exit(1);
    double sum = 0;
    for (uint32_t i = 0; i < n; i++)
        cdf[i] = sum += 1.0 / pow(i + 1.0, 1.1);
    uint64_t s = cf->seed ^ 0x5a5a5a5aull;
    for (uint32_t k = 0; k < n; k++) {
        double u = unit(&s) * sum;
        uint32_t lo = 0, hi = n - 1;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (cdf[mid] < u)
                lo = mid + 1;
            else
                hi = mid;
        }
        t[k] = perm[lo];
    }
    free(cdf);
    free(perm);
    return t;
}

/* ------------------------------------------------------------ step 1 */

static void over_counts(const config *cf, const char *name, const uint32_t *trace)
{
    weir_cms *c = make(cf, WEIR_CMS_MAX_LIMIT);
    uint32_t *exact = calloc(cf->keys, sizeof(*exact));
    uint64_t *hist = calloc(HIST + 1, sizeof(*hist));
    if (!exact || !hist)
        exit(1);
    for (uint32_t k = 0; k < cf->keys; k++) {
        unsigned char key[4];
        key_of(trace[k], key);
        weir_result r;
        if (weir_cms_take(c, key, 4, 0, 1, &r) != WEIR_OK || !r.allowed)
            exit(2);
    }
    for (uint32_t k = 0; k < cf->keys; k++)
        exact[trace[k]]++;

    uint64_t keys = 0, under = 0, max = 0;
    double sum = 0;
    for (uint32_t id = 0; id < cf->keys; id++) {
        if (!exact[id])
            continue;
        unsigned char key[4];
        key_of(id, key);
        uint64_t e = 0;
        weir_cms_estimate(c, key, 4, 0, &e);
        keys++;
        if (e < exact[id]) {
            under++;
            continue;
        }
        uint64_t over = e - exact[id];
        sum += (double)over;
        max = over > max ? over : max;
        hist[over < HIST ? over : HIST]++;
    }
    uint64_t p99 = 0, seen = 0;
    while (p99 < HIST && (seen += hist[p99]) < keys - keys / 100)
        p99++;
    weir_cms_stats st;
    weir_cms_stats_get(c, &st);
    printf("| %s | %u | %llu | %zu | %u x %u | %llu | %.2f | %llu | %llu | %.0f |\n", name,
           cf->keys, (unsigned long long)keys, st.bytes, st.depth, st.width,
           (unsigned long long)under, sum / (double)keys, (unsigned long long)p99,
           (unsigned long long)max, exp(1.0) * cf->keys / st.width);
    free(exact);
    free(hist);
    weir_cms_free(c);
}

/* ------------------------------------------------------------ step 2 */

static void false_denials(const config *cf, const char *name, const uint32_t *trace, uint64_t limit)
{
    weir_cms *c = make(cf, limit);
    uint32_t *admitted = calloc(cf->keys, sizeof(*admitted));
    unsigned char *wronged = calloc(cf->keys, 1);
    unsigned char *seen = calloc(cf->keys, 1);
    if (!admitted || !wronged || !seen)
        exit(1);
    uint64_t past = 0, denied = 0, wrong = 0, keys = 0, keys_wronged = 0;
    for (uint32_t k = 0; k < cf->keys; k++) {
        uint32_t id = trace[k];
        unsigned char key[4];
        key_of(id, key);
        weir_result r;
        if (weir_cms_take(c, key, 4, 0, 1, &r) != WEIR_OK)
            exit(2);
        seen[id] = 1;
        if (r.allowed) {
            past += ++admitted[id] > limit;
        } else {
            denied++;
            if (admitted[id] + 1 <= limit) {
                wrong++;
                wronged[id] = 1;
            }
        }
    }
    for (uint32_t id = 0; id < cf->keys; id++) {
        keys += seen[id];
        keys_wronged += wronged[id];
    }
    printf("| %s | %llu | %llu | %llu | %.3f%% | %.3f%% |\n", name, (unsigned long long)limit,
           (unsigned long long)past, (unsigned long long)denied,
           100.0 * (double)keys_wronged / (double)keys, 100.0 * (double)wrong / cf->keys);
    free(admitted);
    free(wronged);
    free(seen);
    weir_cms_free(c);
}

/* ------------------------------------------------------------ threads */

typedef struct part {
    weir_cms *c;
    const uint32_t *trace;
    uint32_t from, to;
} part;

static void *decide_part(void *arg)
{
    part *p = arg;
    for (uint32_t k = p->from; k < p->to; k++) {
        unsigned char key[4];
        key_of(p->trace[k], key);
        weir_result r;
        weir_cms_take(p->c, key, 4, 0, 1, &r);
    }
    return NULL;
}

/* The trace decided by @n threads, each a share of it: seconds. */
static double decide_all(const config *cf, const uint32_t *trace, uint32_t n)
{
    weir_cms *c = make(cf, 100);
    pthread_t t[MAX_THREADS];
    part p[MAX_THREADS];
    double t0 = bench_now_s();
    for (uint32_t i = 0; i < n; i++) {
        p[i] = (part){c, trace, (uint32_t)((uint64_t)cf->keys * i / n),
                      (uint32_t)((uint64_t)cf->keys * (i + 1) / n)};
        pthread_create(&t[i], NULL, decide_part, &p[i]);
    }
    for (uint32_t i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    double secs = bench_now_s() - t0;
    weir_cms_free(c);
    return secs;
}

/* ns per take (wall clock over all takes) and millions a second, the
 * median of PASSES passes, with one thread and with cf->threads. */
static void timing(const config *cf, const char *name, const uint32_t *trace)
{
    uint32_t counts[2] = {1, cf->threads};
    for (int i = 0; i < (cf->threads > 1 ? 2 : 1); i++) {
        double secs[PASSES];
        for (int k = 0; k < PASSES; k++)
            secs[k] = decide_all(cf, trace, counts[i]);
        double med = bench_median(secs, PASSES);
        printf("| %s | %u | %.1f | %.2f |\n", name, counts[i], med * 1e9 / cf->keys,
               cf->keys / med / 1e6);
    }
}

int main(int argc, char **argv)
{
    config cf = {10000000u, 4000000u, 4, 1, 2};
    int opt;
    while ((opt = getopt(argc, argv, "n:m:d:s:t:")) != -1) {
        switch (opt) {
        case 'n':
            cf.keys = (uint32_t)strtoul(optarg, NULL, 10);
            break;
        case 'm':
            cf.bytes = (size_t)strtoull(optarg, NULL, 10);
            break;
        case 'd':
            cf.depth = (uint32_t)strtoul(optarg, NULL, 10);
            break;
        case 's':
            cf.seed = strtoull(optarg, NULL, 10);
            break;
        case 't':
            cf.threads = (uint32_t)strtoul(optarg, NULL, 10);
            break;
        default:
            fprintf(stderr, "usage: %s [-n KEYS] [-m BYTES] [-d DEPTH] [-s SEED] [-t THREADS]\n",
                    argv[0]);
            return 2;
        }
    }
    if (cf.keys < 2 || cf.keys > (1u << 24) || cf.threads < 1 || cf.threads > MAX_THREADS ||
        cf.seed == 0) {
        fprintf(stderr, "keys 2 .. 2^24, threads 1 .. %d, seed not 0\n", MAX_THREADS);
        return 2;
    }
    if (weir_ctx_new(NULL, &ctx) != WEIR_OK)
        return 1;
    uint32_t *traces[2] = {distinct_trace(&cf), zipf_trace(&cf)};
    const char *names[2] = {"distinct", "zipf"};

    printf("over-count (no limit), depth %u, budget %zu bytes:\n\n", cf.depth, cf.bytes);
    printf("| trace | requests | keys | bytes | depth x width | under-counted | over mean | "
           "over p99 | over max | e N / w |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < 2; i++)
        over_counts(&cf, names[i], traces[i]);

    printf("\nwrong denials:\n\n| trace | limit | keys past the limit | denied | "
           "keys wrongly denied | requests wrongly denied |\n|---|---|---|---|---|---|\n");
    const uint64_t limits[] = {10, 100, 1000};
    for (int i = 0; i < 2; i++)
        for (size_t l = 0; l < sizeof(limits) / sizeof(*limits); l++)
            false_denials(&cf, names[i], traces[i], limits[l]);

    printf("\ntime (limit 100, the trace split between the threads, median of %d passes):\n\n"
           "| trace | threads | ns/take | M takes/s |\n|---|---|---|---|\n",
           PASSES);
    for (int i = 0; i < 2; i++)
        timing(&cf, names[i], traces[i]);
    free(traces[0]);
    free(traces[1]);
    weir_ctx_free(ctx);
    return 0;
}
