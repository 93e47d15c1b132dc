/*
 * sliding_log.c - the exact sliding window: a log of admission times.
 *
 * The state is a ring of at most `limit` timestamps, oldest first, one per
 * unit of cost admitted. An entry at time s counts against every request in
 * [s, s + window); a request is admitted while the entries in the window
 * plus its cost fit in the limit, so no window of that length ever holds
 * more than `limit`. Memory is bounded by the limit (8 bytes per unit).
 * Invariant: head < limit, count <= limit, timestamps non-decreasing from
 * head; the newest timestamp is the latest time the key has seen.
 */
#include <string.h>

#include "algo/algo.h"
#include "algo/arith.h"

typedef struct log_state {
    uint32_t head;
    uint32_t count;
    int64_t ts[];
} log_state;

static uint32_t slot(const weir_limit *lim, uint32_t head, uint64_t i)
{
    return (uint32_t)((head + i) % lim->limit);
}

weir_status weir__log_decide(const weir_limit *lim, const void *in, void *out, int64_t now_us,
                             uint64_t hits, weir_result *res)
{
    const log_state *s = in;
    if (s->head >= lim->limit || s->count > lim->limit)
        return WEIR_EINVAL;

    uint32_t count = s->count;
    uint32_t head = s->head;
    int64_t t = now_us;
    if (count > 0)
        t = max64(t, s->ts[slot(lim, head, count - 1u)]);

    /* Skip entries that have left the window (t - window, t]. */
    uint32_t gone = 0;
    while (gone < count && s->ts[slot(lim, head, gone)] <= t - lim->window_us)
        gone++;
    uint32_t live = count - gone;
    uint64_t need = hits ? hits : 1;

    memset(res, 0, sizeof(*res));
    res->limit = lim->limit;
    res->allowed = need <= lim->limit - live;

    uint64_t after = live;
    if (res->allowed && hits > 0) {
        after = live + hits;
        if (out) {
            log_state *o = out;
            uint32_t h = slot(lim, head, gone);
            for (uint64_t i = 0; i < hits; i++)
                o->ts[slot(lim, h, live + i)] = t;
            o->head = h;
            o->count = (uint32_t)after;
        }
    } else if (!res->allowed) {
        if (need > lim->limit) {
            res->retry_after_us = WEIR_NEVER;
        } else {
            /* The (live + need - limit)-th oldest live entry must leave. */
            uint64_t k = live + need - lim->limit;
            int64_t leaves = sat_add(s->ts[slot(lim, head, gone + k - 1)], lim->window_us);
            res->retry_after_us = sat_sub(leaves, now_us);
        }
    }
    res->remaining = lim->limit - after;
    if (after > 0) {
        int64_t newest = (res->allowed && hits > 0) ? t : s->ts[slot(lim, head, count - 1u)];
        /* saturating: a corrupt state may hold any timestamp */
        res->reset_after_us = sat_sub(sat_add(newest, lim->window_us), now_us);
    }
    return WEIR_OK;
}

/* The newest hits entries go, when the newest is still in the window
 * (else the log holds nothing that counts). */
weir_status weir__log_refund(const weir_limit *lim, void *state, int64_t now_us, uint64_t hits,
                             bool *changed)
{
    log_state *s = state;
    if (s->head >= lim->limit || s->count > lim->limit)
        return WEIR_EINVAL;
    if (hits == 0 || s->count == 0)
        return WEIR_OK;
    int64_t newest = s->ts[slot(lim, s->head, s->count - 1u)];
    if (newest <= max64(now_us, newest) - lim->window_us)
        return WEIR_OK;
    s->count -= hits < s->count ? (uint32_t)hits : s->count;
    *changed = true;
    return WEIR_OK;
}

weir_status weir__log_describe(const weir_limit *lim, const void *in, int64_t now_us,
                               weir_state_view *v)
{
    const log_state *s = in;
    if (s->head >= lim->limit || s->count > lim->limit)
        return WEIR_EINVAL;
    uint32_t count = s->count, head = s->head;
    int64_t t = now_us;
    if (count > 0)
        t = max64(t, s->ts[slot(lim, head, count - 1u)]);
    /* the first entry inside (t - window, t]: the log is in time order */
    uint32_t lo = 0, hi = count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (s->ts[slot(lim, head, mid)] <= t - lim->window_us)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint32_t live = count - lo;
    weir__view_number(v, "stored", count);
    weir__view_number(v, "in_window", live);
    weir__view_number(v, "remaining", (int64_t)(lim->limit - live));
    weir__view_number(v, "oldest_us", live ? s->ts[slot(lim, head, lo)] : -1);
    weir__view_number(v, "newest_us", live ? s->ts[slot(lim, head, count - 1u)] : -1);
    weir__view_number(v, "window_us", lim->window_us);
    weir__view_table(v, "log", live, "t_us", NULL, NULL);
    for (uint32_t i = 0; i < live; i++)
        if (weir__view_keeps(v, i))
            weir__view_row(v, s->ts[slot(lim, head, lo + i)], 0, 0);
    return WEIR_OK;
}
