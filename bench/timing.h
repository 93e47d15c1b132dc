/*
 * timing.h - the clock and the sorting every bench program uses: header
 * only, so that the programs built outside CMake (bench/ab) share it too.
 * clock_gettime() needs _GNU_SOURCE defined first, as every bench file does.
 */
#ifndef WEIR_BENCH_TIMING_H
#define WEIR_BENCH_TIMING_H

#include <stddef.h>
#include <stdlib.h>
#include <time.h>

/* Monotonic seconds. */
static inline double bench_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* v[0..n) in ascending order. */
static inline void bench_sort(double *v, size_t n)
{
    qsort(v, n, sizeof(*v), bench_cmp_double);
}

/* The upper median of v[0..n), n > 0; v is sorted on return. */
static inline double bench_median(double *v, size_t n)
{
    bench_sort(v, n);
    return v[n / 2];
}

#endif /* WEIR_BENCH_TIMING_H */
