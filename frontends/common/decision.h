/*
 * decision.h - the caps every protocol's decoder puts on a request; a
 * decision as every protocol renders it, and the summaries
 * they all need: the most restrictive status (the one headers and problem
 * bodies describe) and Retry-After's whole seconds. No I/O.
 */
#ifndef WEIR_FRONTENDS_COMMON_DECISION_H
#define WEIR_FRONTENDS_COMMON_DECISION_H

#include <stdbool.h>
#include <stdint.h>

#include "weir/engine.h"

/** The caps every decoder puts on a request. */
typedef struct weir_api_limits {
    /** Most descriptors per request (at most WEIR_ENGINE_MAX_DESCRIPTORS). */
    size_t max_descriptors;
    /** Most entries per descriptor (at most WEIR_ENGINE_MAX_ENTRIES). */
    size_t max_entries;
    /** Most requests in one batch. */
    size_t max_batch;
} weir_api_limits;

/** One decision, as the renderers take it. */
typedef struct weir_api_decision {
    weir_code overall;
    const weir_descriptor_status *statuses;
    size_t n;
} weir_api_decision;

/** The status the headers and the problem body describe: among the
 *  statuses with a limit, the denying one (OVER_LIMIT, not shadow) with
 *  the longest retry_after (WEIR_NEVER longest); when none denies, the one
 *  with the least remaining, ties going to the longest reset_after; the
 *  first of equals. NULL when no status has a limit. */
const weir_descriptor_status *weir_api_most_restrictive(const weir_api_decision *dec);

/** Whole seconds a client should wait before retrying a denied decision
 *  (the longest retry_after of the denying statuses, rounded up, at least
 *  1); -1 when some denial can never be admitted; 0 when allowed. */
int64_t weir_api_retry_after_s(const weir_api_decision *dec);

/** Whether a status speaks for a limit clients are held to: a shadow-mode
 *  limit is being tried out, never enforced, so it is not advertised. */
static inline bool weir_api_has_limit(const weir_descriptor_status *s)
{
    return s->limit && !s->unlimited && !s->shadow;
}

/** ceil(@v / @d) for @d > 0; 0 when @v <= 0: durations in a coarser
 *  unit, never rounded down to 0 while some time is left. */
static inline uint64_t weir_api_ceil_div(int64_t v, int64_t d)
{
    if (v <= 0)
        return 0;
    return (uint64_t)(v / d) + (v % d != 0);
}

#endif /* WEIR_FRONTENDS_COMMON_DECISION_H */
