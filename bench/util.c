/*
 * util.c - weir-bench's helpers: request keys and random streams of them,
 * the monotonic clock, the process's resident size, and medians.
 *
 * Streams use a fixed-seed splitmix64, so two runs time the same sequence
 * of keys.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "bench.h"

void bench_key_make(uint64_t n, bench_key *out)
{
    memset(out, 0, sizeof(*out));
    int len = snprintf(out->b, BENCH_KEY_BYTES - 1, "user:%" PRIu64, n);
    out->b[BENCH_KEY_BYTES - 1] = (char)len;
}

uint64_t bench_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

bench_key *bench_stream_new(uint64_t nkeys, size_t n, uint64_t seed)
{
    if (nkeys == 0 || nkeys > BENCH_MAX_KEYS)
        return NULL;
    bench_key *s = malloc(n * sizeof(*s));
    if (!s)
        return NULL;
    uint64_t st = seed;
    for (size_t i = 0; i < n; i++)
        bench_key_make(bench_rand(&st) % nkeys, &s[i]);
    return s;
}

uint64_t bench_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    unsigned long size = 0, resident = 0;
    int got = fscanf(f, "%lu %lu", &size, &resident);
    fclose(f);
    if (got != 2)
        return 0;
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

void bench_trim(void)
{
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

bench_stat bench_stat_of(double *v, size_t n)
{
    bench_stat s = {0, 0, 0, false};
    if (n == 0)
        return s;
    bench_sort(v, n);
    s.min = v[0];
    s.max = v[n - 1];
    s.med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    s.ok = true;
    return s;
}

double bench_spread_pct(const bench_stat *s)
{
    return s->med > 0 ? (s->max - s->min) / s->med * 100.0 : 0.0;
}
