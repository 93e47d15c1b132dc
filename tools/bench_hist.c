/*
 * bench_hist.c - the log-linear latency histogram of the load generators.
 *
 * Bucket layout: a value below 2 * SUB is its own bucket. A larger value
 * with its highest bit at position e (e > SUB_BITS) falls in the bucket
 * of its top SUB_BITS + 1 bits: index (e - SUB_BITS + 1) * SUB plus the
 * SUB_BITS bits below the highest, so each power of two [2^e, 2^(e+1))
 * is cut into SUB buckets of 2^(e - SUB_BITS) values. A bucket is then
 * at most 1/SUB of its smallest value wide, and its middle is within
 * 1/(2 * SUB) of anything in it.
 */
#include "bench_hist.h"

#include <string.h>

void weir_hist_init(weir_hist *h)
{
    memset(h, 0, sizeof *h);
    h->min = UINT64_MAX;
}

static unsigned top_bit(uint64_t v)
{
    return 63u - (unsigned)__builtin_clzll(v);
}

uint32_t weir_hist_index(uint64_t value)
{
    if (value < 2u * WEIR_HIST_SUB)
        return (uint32_t)value;
    unsigned e = top_bit(value);
    unsigned shift = e - WEIR_HIST_SUB_BITS;
    uint64_t sub = (value >> shift) - WEIR_HIST_SUB;
    return (uint32_t)((e - WEIR_HIST_SUB_BITS + 1u) * WEIR_HIST_SUB + sub);
}

uint64_t weir_hist_bucket_low(uint32_t index)
{
    if (index < 2u * WEIR_HIST_SUB)
        return index;
    unsigned e = index / WEIR_HIST_SUB + WEIR_HIST_SUB_BITS - 1u;
    uint64_t sub = index % WEIR_HIST_SUB;
    return (WEIR_HIST_SUB + sub) << (e - WEIR_HIST_SUB_BITS);
}

uint64_t weir_hist_bucket_width(uint32_t index)
{
    if (index < 2u * WEIR_HIST_SUB)
        return 1;
    unsigned e = index / WEIR_HIST_SUB + WEIR_HIST_SUB_BITS - 1u;
    return (uint64_t)1 << (e - WEIR_HIST_SUB_BITS);
}

void weir_hist_record(weir_hist *h, uint64_t value)
{
    h->buckets[weir_hist_index(value)]++;
    h->count++;
    if (value < h->min)
        h->min = value;
    if (value > h->max)
        h->max = value;
}

void weir_hist_merge(weir_hist *into, const weir_hist *from)
{
    for (uint32_t i = 0; i < WEIR_HIST_BUCKETS; i++)
        into->buckets[i] += from->buckets[i];
    into->count += from->count;
    if (from->min < into->min)
        into->min = from->min;
    if (from->max > into->max)
        into->max = from->max;
}

uint64_t weir_hist_percentile(const weir_hist *h, uint32_t per_million)
{
    if (h->count == 0)
        return 0;
    if (per_million == 0)
        return h->min;
    if (per_million >= 1000000u)
        return h->max;
    /* the rank of the value: ceil(count * q), at least 1 */
    __extension__ unsigned __int128 scaled = (unsigned __int128)h->count * per_million;
    uint64_t rank = (uint64_t)((scaled + 999999u) / 1000000u);
    if (rank == 0)
        rank = 1;
    uint64_t seen = 0;
    for (uint32_t i = 0; i < WEIR_HIST_BUCKETS; i++) {
        seen += h->buckets[i];
        if (seen < rank)
            continue;
        uint64_t width = weir_hist_bucket_width(i);
        uint64_t mid = weir_hist_bucket_low(i) + (width - 1) / 2;
        if (mid < h->min)
            mid = h->min;
        if (mid > h->max)
            mid = h->max;
        return mid;
    }
    return h->max;
}
