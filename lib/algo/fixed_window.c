/*
 * fixed_window.c - a counter per window, windows aligned to multiples of the
 * window length from time 0 (the Unix epoch for wall-clock time), the
 * behaviour of envoyproxy/ratelimit.
 *
 * The state is the index of the window the count belongs to and the count.
 * A count from an older window is zero in the current one. A time that maps
 * to an older window than the state's (the clock went backwards) is counted
 * in the state's window: it never opens a fresh one early.
 * Invariant: 0 <= count <= limit.
 */
#include <string.h>

#include "algo/algo.h"
#include "algo/arith.h"

typedef struct fixed_state {
    int64_t window;
    uint64_t count;
} fixed_state;

weir_status weir__fixed_decide(const weir_limit *lim, const void *in, void *out, int64_t now_us,
                               uint64_t hits, weir_result *res)
{
    fixed_state s;
    memcpy(&s, in, sizeof(s));
    if (s.window < 0 || s.count > lim->limit)
        return WEIR_EINVAL;

    int64_t w = floor_recip(now_us, lim->window_us, lim->inv_span);
    uint64_t count = 0;
    if (w <= s.window) {
        w = s.window;
        count = s.count;
    }
    int64_t end = sat_mul(sat_add(w, 1), lim->window_us);
    uint64_t need = hits ? hits : 1;

    memset(res, 0, sizeof(*res));
    res->limit = lim->limit;
    res->allowed = need <= lim->limit - count;
    if (res->allowed && hits > 0) {
        count += hits;
        if (out) {
            fixed_state n = {w, count};
            memcpy(out, &n, sizeof(n));
        }
    } else if (!res->allowed) {
        res->retry_after_us = need > lim->limit ? WEIR_NEVER : end - now_us;
    }
    res->remaining = lim->limit - count;
    res->reset_after_us = count ? end - now_us : 0;
    return WEIR_OK;
}

/* The count of the state's window down by hits; a window over (the time
 * is in a later one) holds nothing to give back. */
weir_status weir__fixed_refund(const weir_limit *lim, void *state, int64_t now_us, uint64_t hits,
                               bool *changed)
{
    fixed_state s;
    memcpy(&s, state, sizeof(s));
    if (s.window < 0 || s.count > lim->limit)
        return WEIR_EINVAL;
    if (floor_recip(now_us, lim->window_us, lim->inv_span) > s.window || s.count == 0 || hits == 0)
        return WEIR_OK;
    s.count -= hits < s.count ? hits : s.count;
    memcpy(state, &s, sizeof(s));
    *changed = true;
    return WEIR_OK;
}

weir_status weir__fixed_describe(const weir_limit *lim, const void *in, int64_t now_us,
                                 weir_state_view *v)
{
    fixed_state s;
    memcpy(&s, in, sizeof(s));
    if (s.window < 0 || s.count > lim->limit)
        return WEIR_EINVAL;
    /* the window weir__fixed_decide() would count now_us in */
    int64_t w = max64(floor_recip(now_us, lim->window_us, lim->inv_span), s.window);
    uint64_t count = w == s.window ? s.count : 0;
    weir__view_number(v, "window", s.window);
    weir__view_number(v, "count", (int64_t)s.count);
    weir__view_number(v, "window_start_us", sat_mul(w, lim->window_us));
    weir__view_number(v, "window_end_us", sat_mul(sat_add(w, 1), lim->window_us));
    weir__view_number(v, "count_now", (int64_t)count);
    weir__view_number(v, "remaining", (int64_t)(lim->limit - count));
    return WEIR_OK;
}
