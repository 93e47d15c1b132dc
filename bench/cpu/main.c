/*
 * weir-bench-cpu: how fast this core is right now, in two numbers, to put
 * beside a benchmark run on a shared machine.
 *
 *   chain  one dependent chain of multiply-adds: each step waits for the
 *          one before, so it measures the clock frequency only;
 *   wide   eight independent chains of shift, xor and add: about 27
 *          micro-ops an iteration with no long dependency, so it measures
 *          how many instructions the core issues a cycle.
 *
 * A guest cannot see which other threads share its physical core. When
 * another one does, `wide` slows far more than `chain`: their ratio tells
 * a core of one's own (low) from a shared one (high). Each number is the
 * median of PASSES passes (5 unless given; the upper median of an even
 * count, as every bench takes it).
 *
 *   weir-bench-cpu [PASSES]
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../timing.h"

#define STEPS 50000000L
#define MAX_PASSES 99

static volatile uint64_t sink; /* the chains' results: kept, so the loops are */

/* ns per step of one dependent chain */
static double chain(void)
{
    uint64_t x = 1;
    double t0 = bench_now_s();
    for (long i = 0; i < STEPS; i++) {
        x = x * 0x9e3779b97f4a7c15ull + 1;
        __asm__("" : "+r"(x)); /* kept a chain: no closed form */
    }
    double dt = bench_now_s() - t0;
    sink ^= x;
    return dt / (double)STEPS * 1e9;
}

/* ns per iteration of eight independent chains */
static double wide(void)
{
    uint64_t r0 = 1, r1 = 2, r2 = 3, r3 = 4, r4 = 5, r5 = 6, r6 = 7, r7 = 8;
    double t0 = bench_now_s();
    for (long i = 0; i < STEPS; i++) {
        uint64_t k = (uint64_t)i;
        r0 += (r0 >> 3) ^ k;
        r1 += (r1 >> 3) ^ k;
        r2 += (r2 >> 3) ^ k;
        r3 += (r3 >> 3) ^ k;
        r4 += (r4 >> 3) ^ k;
        r5 += (r5 >> 3) ^ k;
        r6 += (r6 >> 3) ^ k;
        r7 += (r7 >> 3) ^ k;
        /* in registers, not vectorised */
        __asm__(""
                : "+r"(r0), "+r"(r1), "+r"(r2), "+r"(r3), "+r"(r4), "+r"(r5), "+r"(r6), "+r"(r7));
    }
    double dt = bench_now_s() - t0;
    sink ^= r0 ^ r1 ^ r2 ^ r3 ^ r4 ^ r5 ^ r6 ^ r7;
    return dt / (double)STEPS * 1e9;
}

int main(int argc, char **argv)
{
    int passes = 5;
    if (argc > 2 || (argc == 2 && ((passes = atoi(argv[1])) < 1 || passes > MAX_PASSES))) {
        fprintf(stderr, "usage: weir-bench-cpu [PASSES 1..%d]\n", MAX_PASSES);
        return 2;
    }
    double c[MAX_PASSES], w[MAX_PASSES];
    for (int i = 0; i < passes; i++) {
        c[i] = chain();
        w[i] = wide();
    }
    double mc = bench_median(c, (size_t)passes), mw = bench_median(w, (size_t)passes);
    printf("cpu       chain %.3f ns/step, wide %.3f ns/iteration, wide/chain %.2f (median of %d)\n",
           mc, mw, mw / mc, passes);
    return 0;
}
