/*
 * main.c - the in-process A/B comparison's driver (see ab.sh): both builds
 * of the library decide blocks of the same requests, alternating, A then B
 * and B then A, so that whatever disturbs the machine falls on both alike.
 * Prints each side's median and 10th percentile ns per request over the
 * blocks, and B/A: the median and quartiles of the per-pair ratios and the
 * ratio of the total times.
 *
 * With a third argument, 2, each side decides each block on one thread and
 * then on two at once (each thread its own part of the stream), and what is
 * compared is the scaling, 2T/1T: each side's median and quartiles over
 * the blocks, and the median of the per-block B/A of it.
 *
 * The build set up first can be a few percent faster or slower for where
 * its memory lies (seen: 4% with the store's single call alone); with a
 * fourth argument, 1, B is set up first. ab.sh alternates.
 *
 *   ab [BLOCKS] [REQUESTS_PER_BLOCK] [1|2] [0|1]   (default 200 blocks of 20,000)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../timing.h"

int ab_setup_A(void);
int ab_setup_B(void);
void ab_run_A(uint32_t from, uint32_t n);
void ab_run_B(uint32_t from, uint32_t n);

/* Seconds that side (0: A, 1: B) takes for n requests from `from`. */
static double timed(int side, uint32_t from, uint32_t n)
{
    double t0 = bench_now_s();
    if (side)
        ab_run_B(from, n);
    else
        ab_run_A(from, n);
    return bench_now_s() - t0;
}

/* The second thread's part of the stream starts this far on. */
#define OTHER_PART 2000000u

typedef struct part {
    int side;
    uint32_t from, n;
} part;

static void *run_part(void *arg)
{
    const part *p = arg;
    if (p->side)
        ab_run_B(p->from, p->n);
    else
        ab_run_A(p->from, p->n);
    return NULL;
}

/* 2T/1T of one side on one block: n requests on one thread, then n on
 * each of two threads at once; < 0 if the thread cannot start. */
static double scaling(int side, uint32_t from, uint32_t n)
{
    double t1 = timed(side, from, n);
    part other = {side, from + OTHER_PART, n};
    pthread_t th;
    double t0 = bench_now_s();
    if (pthread_create(&th, NULL, run_part, &other) != 0)
        return -1;
    if (side)
        ab_run_B(from, n);
    else
        ab_run_A(from, n);
    pthread_join(th, NULL);
    return 2 * t1 / (bench_now_s() - t0);
}

static int compare_scaling(int blocks, uint32_t n)
{
    double *a = malloc((size_t)blocks * sizeof(*a)), *b = malloc((size_t)blocks * sizeof(*b)),
           *r = malloc((size_t)blocks * sizeof(*r));
    if (!a || !b || !r)
        return 1;
    for (int i = 0; i < blocks; i++) {
        uint32_t from = (uint32_t)i * n;
        int first = i & 1;
        double s_first = scaling(first, from, n), s_second = scaling(!first, from, n);
        if (s_first < 0 || s_second < 0) {
            fprintf(stderr, "ab: cannot start a thread\n");
            return 1;
        }
        a[i] = first ? s_second : s_first;
        b[i] = first ? s_first : s_second;
        r[i] = b[i] / a[i];
    }
    bench_sort(a, (size_t)blocks);
    bench_sort(b, (size_t)blocks);
    bench_sort(r, (size_t)blocks);
    printf("2T/1T: A %.3f [quartiles %.3f %.3f]  B %.3f [quartiles %.3f %.3f]  B/A %.3f  "
           "(%d blocks of %u requests a thread)\n",
           a[blocks / 2], a[blocks / 4], a[3 * blocks / 4], b[blocks / 2], b[blocks / 4],
           b[3 * blocks / 4], r[blocks / 2], blocks, n);
    free(a);
    free(b);
    free(r);
    return 0;
}

int main(int argc, char **argv)
{
    int blocks = argc > 1 ? atoi(argv[1]) : 200;
    long per = argc > 2 ? atol(argv[2]) : 20000;
    int threads = argc > 3 ? atoi(argv[3]) : 1;
    int b_first = argc > 4 ? atoi(argv[4]) : 0;
    if (blocks < 4 || per < 1 || per > 1000000 || (threads != 1 && threads != 2) ||
        (b_first != 0 && b_first != 1)) {
        fprintf(stderr, "usage: ab [BLOCKS >= 4] [REQUESTS_PER_BLOCK 1..1000000] [1|2] [0|1]\n");
        return 2;
    }
    uint32_t n = (uint32_t)per;
    int failed =
        b_first ? ab_setup_B() != 0 || ab_setup_A() != 0 : ab_setup_A() != 0 || ab_setup_B() != 0;
    if (failed) {
        fprintf(stderr, "ab: set-up failed\n");
        return 1;
    }
    if (threads == 2)
        return compare_scaling(blocks, n);
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
    bench_sort(a, (size_t)blocks);
    bench_sort(b, (size_t)blocks);
    bench_sort(r, (size_t)blocks);
    printf("A %.1f ns (p10 %.1f)  B %.1f ns (p10 %.1f)  B/A %.3f [quartiles %.3f %.3f], "
           "totals %.3f  (%d blocks of %u requests)\n",
           a[blocks / 2], a[blocks / 10], b[blocks / 2], b[blocks / 10], r[blocks / 2],
           r[blocks / 4], r[3 * blocks / 4], tb / ta, blocks, n);
    free(a);
    free(b);
    free(r);
    return 0;
}
