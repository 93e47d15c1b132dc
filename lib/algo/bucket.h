/*
 * bucket.h - what the bucket (bucket.c) and its warm-up (warmup.c) share:
 * the level's exact drain, and the warm-up's entry points.
 *
 * Levels are in units of 1/unit of a request; a bucket drains `rate`
 * units per microsecond (weir__bucket_compile()).
 */
#ifndef WEIR_ALGO_BUCKET_H
#define WEIR_ALGO_BUCKET_H

#include "algo/algo.h"
#include "algo/arith.h"

/* Microseconds to drain `units` (>= 0). A limit that divides its window
 * drains one unit per microsecond; skip the multiplication then. */
static inline int64_t weir__drain_time(const weir_limit *lim, int64_t units)
{
    return lim->rate == 1 ? units : ceil_recip(units, lim->rate, lim->inv_rate);
}

/* @level (>= 0) after @elapsed (>= 0) microseconds of draining: a
 * multiplication, not a division (this is the hot path). */
static inline int64_t weir__level_after(const weir_limit *lim, int64_t level, int64_t elapsed)
{
    int64_t drained;
    if (__builtin_mul_overflow(elapsed, lim->rate, &drained) || drained >= level)
        return 0;
    return level - drained;
}

/* The token bucket with a warm-up (lim->warmup_us > 0): weir_step() and
 * weir_check() on its WEIR_STATE_WARMUP_BYTES of state (algo.h's contract
 * for a decide function). */
weir_status weir__warmup_decide(const weir_limit *lim, const void *in, void *out, int64_t now_us,
                                uint64_t hits, weir_result *res);

/* The heat of the state at @in as a decision at @now_us (>= 0) would find
 * it; false for a heat past the warm-up (a state of another limit). */
bool weir__warmup_heat(const weir_limit *lim, const void *in, int64_t now_us, int64_t *heat);

/* Units a request of @hits (<= burst) costs at @heat. */
int64_t weir__warmup_cost(const weir_limit *lim, uint64_t hits, int64_t heat);

#endif /* WEIR_ALGO_BUCKET_H */
