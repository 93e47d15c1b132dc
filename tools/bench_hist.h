/*
 * bench_hist.h - a latency histogram for the load generators: log-linear
 * buckets (64 per power of two, exact below 128), so a percentile read
 * from it is within 0.8% of the true value; the minimum and maximum are
 * kept exactly. Fixed size, no allocation; histograms of several threads
 * merge by adding their buckets.
 *
 * Threads: a histogram belongs to one thread until it is merged.
 */
#ifndef WEIR_TOOLS_BENCH_HIST_H
#define WEIR_TOOLS_BENCH_HIST_H

#include <stdbool.h>
#include <stdint.h>

/** Buckets per power of two: 2^WEIR_HIST_SUB_BITS. */
#define WEIR_HIST_SUB_BITS 6u
#define WEIR_HIST_SUB (1u << WEIR_HIST_SUB_BITS)
/** Values 0 .. 2^64 - 1: the first 2 * SUB values exactly, then SUB
 *  buckets for each power of two from 2^(SUB_BITS + 1) up. */
#define WEIR_HIST_BUCKETS ((64u - WEIR_HIST_SUB_BITS + 1u) * WEIR_HIST_SUB)

typedef struct weir_hist {
    uint64_t count;
    uint64_t min; /* UINT64_MAX while empty */
    uint64_t max;
    uint64_t buckets[WEIR_HIST_BUCKETS];
} weir_hist;

void weir_hist_init(weir_hist *h);
void weir_hist_record(weir_hist *h, uint64_t value);
/** Add the counts of @from to @into. */
void weir_hist_merge(weir_hist *into, const weir_hist *from);

/**
 * weir_hist_percentile() - the value below or at which @per_million
 * millionths of the recorded values lie (500000: the median, 999000:
 * p99.9), read from the middle of its bucket and kept within [min, max]:
 * within 0.8% of the exact percentile. 0 and 1000000 are the exact
 * minimum and maximum. 0 when the histogram is empty.
 */
uint64_t weir_hist_percentile(const weir_hist *h, uint32_t per_million);

/** The bucket of @value and the smallest value of bucket @index (for
 *  tests). */
uint32_t weir_hist_index(uint64_t value);
uint64_t weir_hist_bucket_low(uint32_t index);
/** How many values bucket @index holds (1 below 128, then powers of two). */
uint64_t weir_hist_bucket_width(uint32_t index);

#endif /* WEIR_TOOLS_BENCH_HIST_H */
