/*
 * decision.c - the summaries of a decision every protocol renders
 * (decision.h).
 */
#include "common/decision.h"

#define US_PER_S 1000000

/* Whether retry_after @a is longer than @b (WEIR_NEVER is the longest). */
static bool longer(int64_t a, int64_t b)
{
    if (b == WEIR_NEVER)
        return false;
    return a == WEIR_NEVER || a > b;
}

const weir_descriptor_status *weir_api_most_restrictive(const weir_api_decision *dec)
{
    const weir_descriptor_status *best = NULL;
    for (size_t i = 0; i < dec->n; i++) {
        const weir_descriptor_status *s = &dec->statuses[i];
        if (weir_api_has_limit(s) && s->code == WEIR_CODE_OVER_LIMIT && !s->shadow &&
            (!best || longer(s->retry_after_us, best->retry_after_us)))
            best = s;
    }
    if (best)
        return best;
    for (size_t i = 0; i < dec->n; i++) {
        const weir_descriptor_status *s = &dec->statuses[i];
        if (!weir_api_has_limit(s))
            continue;
        if (!best || s->remaining < best->remaining ||
            (s->remaining == best->remaining && s->reset_after_us > best->reset_after_us))
            best = s;
    }
    return best;
}

int64_t weir_api_retry_after_s(const weir_api_decision *dec)
{
    if (dec->overall != WEIR_CODE_OVER_LIMIT)
        return 0;
    int64_t longest = 0;
    for (size_t i = 0; i < dec->n; i++) {
        const weir_descriptor_status *s = &dec->statuses[i];
        if (s->code != WEIR_CODE_OVER_LIMIT || s->shadow)
            continue;
        if (s->retry_after_us == WEIR_NEVER)
            return -1;
        if (s->retry_after_us > longest)
            longest = s->retry_after_us;
    }
    uint64_t secs = weir_api_ceil_div(longest, US_PER_S);
    return secs < 1 ? 1 : (int64_t)secs;
}
