/*
 * main.c - the in-process A/B comparison's driver (see ab.sh): both builds
 * of the library decide blocks of the same requests, alternating, A then B
 * and B then A, so that whatever disturbs the machine falls on both alike.
 * Prints each side's median and 10th percentile ns per request over the
 * blocks, and B/A: the median and quartiles of the per-pair ratios and the
 * ratio of the total times.
 *
 *   ab [BLOCKS] [REQUESTS_PER_BLOCK]     (default 200 blocks of 20,000)
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int ab_setup_A(void);
int ab_setup_B(void);
void ab_run_A(uint32_t from, uint32_t n);
void ab_run_B(uint32_t from, uint32_t n);

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Seconds that side (0: A, 1: B) takes for n requests from `from`. */
static double timed(int side, uint32_t from, uint32_t n)
{
    double t0 = now_s();
    if (side)
        ab_run_B(from, n);
    else
        ab_run_A(from, n);
    return now_s() - t0;
}

int main(int argc, char **argv)
{
    int blocks = argc > 1 ? atoi(argv[1]) : 200;
    long per = argc > 2 ? atol(argv[2]) : 20000;
    if (blocks < 4 || per < 1 || per > 1000000) {
        fprintf(stderr, "usage: ab [BLOCKS >= 4] [REQUESTS_PER_BLOCK 1..1000000]\n");
        return 2;
    }
    uint32_t n = (uint32_t)per;
    if (ab_setup_A() != 0 || ab_setup_B() != 0) {
        fprintf(stderr, "ab: set-up failed\n");
        return 1;
    }
    double *a = malloc((size_t)blocks * sizeof(*a)), *b = malloc((size_t)blocks * sizeof(*b)),
           *r = malloc((size_t)blocks * sizeof(*r));
    if (!a || !b || !r)
        return 1;
    double ta = 0, tb = 0;
    for (int i = 0; i < blocks; i++) {
        uint32_t from = (uint32_t)i * n;
        int first = i & 1; /* A first in even blocks, B first in odd ones */
        double t_first = timed(first, from, n), t_second = timed(!first, from, n);
        double da = first ? t_second : t_first, db = first ? t_first : t_second;
        a[i] = da * 1e9 / n;
        b[i] = db * 1e9 / n;
        r[i] = db / da;
        ta += da;
        tb += db;
    }
    qsort(a, (size_t)blocks, sizeof(*a), cmp_double);
    qsort(b, (size_t)blocks, sizeof(*b), cmp_double);
    qsort(r, (size_t)blocks, sizeof(*r), cmp_double);
    printf("A %.1f ns (p10 %.1f)  B %.1f ns (p10 %.1f)  B/A %.3f [quartiles %.3f %.3f], "
           "totals %.3f  (%d blocks of %u requests)\n",
           a[blocks / 2], a[blocks / 10], b[blocks / 2], b[blocks / 10], r[blocks / 2],
           r[blocks / 4], r[3 * blocks / 4], tb / ta, blocks, n);
    free(a);
    free(b);
    free(r);
    return 0;
}
