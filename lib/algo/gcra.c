/*
 * gcra.c - the generic cell rate algorithm: one timestamp per key.
 *
 * The state is the theoretical arrival time (TAT) of the next request, in
 * nanoseconds: the time at which the key would be back at rest. Each
 * admitted request of cost h pushes it h emission intervals T = window /
 * limit into the future; a request is admitted while TAT - now stays within
 * burst * T. Keeping TAT in nanoseconds makes T exact to 1 ns for any rate a
 * uint32 limit can express; T is rounded up, so rounding never admits more
 * than the limit. Invariant: TAT >= 0; a TAT in the past is a key at rest.
 */
#include <string.h>

#include "algo/algo.h"
#include "algo/arith.h"

#define NS_PER_US 1000

typedef struct gcra_state {
    int64_t tat_ns;
    int64_t reserved;
} gcra_state;

weir_status weir__gcra_compile(weir_limit *l)
{
    /* window_us <= WEIR_MAX_WINDOW_US, so window_ns fits in 63 bits */
    int64_t window_ns = l->window_us * NS_PER_US;
    l->unit = ceil_div(window_ns, (int64_t)l->limit);
    /* The decision never adds the capacity to anything that can overflow,
     * so any capacity that fits 63 bits is usable. */
    if (l->unit > INT64_MAX / (int64_t)l->burst)
        return WEIR_ERANGE;
    l->capacity = l->unit * (int64_t)l->burst;
    l->rate = 0;
    return WEIR_OK;
}

weir_status weir__gcra_decide(const weir_limit *lim, const void *in, void *out, int64_t now_us,
                              uint64_t hits, weir_result *res)
{
    gcra_state s;
    memcpy(&s, in, sizeof(s));
    if (s.tat_ns < 0)
        return WEIR_EINVAL;

    int64_t t = sat_mul(now_us, NS_PER_US);
    /* A clock that went backwards sees a TAT further away: never more quota. */
    int64_t tat = max64(s.tat_ns, t);
    int64_t need = sat_mul_u(hits ? hits : 1, lim->unit);
    /* A TAT past INT64_MAX ns cannot be stored (times that late saturate):
     * such a request can never be charged, rather than charged for less. */
    bool never = hits > lim->burst || tat > INT64_MAX - need;

    memset(res, 0, sizeof(*res));
    res->limit = lim->burst;
    int64_t backlog = tat - t; /* >= 0 */
    res->allowed = !never && need <= lim->capacity - backlog;

    if (res->allowed && hits > 0) {
        backlog += need;
        if (out) {
            gcra_state n = {tat + need, 0};
            memcpy(out, &n, sizeof(n));
        }
    } else if (!res->allowed) {
        res->retry_after_us =
            never ? WEIR_NEVER : ceil_div(backlog - (lim->capacity - need), NS_PER_US);
    }
    res->remaining = backlog >= lim->capacity
                         ? 0
                         : (uint64_t)floor_recip(lim->capacity - backlog, lim->unit, lim->inv_unit);
    res->reset_after_us = ceil_div(backlog, NS_PER_US);
    return WEIR_OK;
}

/* A refund moves the TAT back by hits emission intervals, not before now,
 * when the key is not at rest; a charge moves it forward, at most to now +
 * the tolerance (a TAT already past it, a clock that went back, stays). */
static weir_status settle(const weir_limit *lim, void *state, int64_t now_us, uint64_t hits,
                          bool charge, bool *changed)
{
    gcra_state s;
    memcpy(&s, state, sizeof(s));
    if (s.tat_ns < 0)
        return WEIR_EINVAL;
    int64_t t = sat_mul(now_us, NS_PER_US);
    int64_t tat = max64(s.tat_ns, t), backlog = tat - t;
    if (hits == 0 || (charge ? backlog >= lim->capacity : backlog == 0))
        return WEIR_OK;
    int64_t need = sat_mul_u(hits, lim->unit);
    gcra_state n = {charge ? sat_add(tat, min64(need, lim->capacity - backlog))
                           : max64(sat_sub(tat, need), t),
                    0};
    memcpy(state, &n, sizeof(n));
    *changed = true;
    return WEIR_OK;
}

weir_status weir__gcra_refund(const weir_limit *lim, void *state, int64_t now_us, uint64_t hits,
                              bool *changed)
{
    return settle(lim, state, now_us, hits, false, changed);
}

weir_status weir__gcra_charge(const weir_limit *lim, void *state, int64_t now_us, uint64_t hits,
                              bool *changed)
{
    return settle(lim, state, now_us, hits, true, changed);
}

weir_status weir__gcra_describe(const weir_limit *lim, const void *in, int64_t now_us,
                                weir_state_view *v)
{
    gcra_state s;
    memcpy(&s, in, sizeof(s));
    if (s.tat_ns < 0)
        return WEIR_EINVAL;
    int64_t t = sat_mul(now_us, NS_PER_US);
    int64_t backlog = max64(s.tat_ns, t) - t;
    weir__view_number(v, "tat_ns", s.tat_ns);
    weir__view_number(v, "interval_ns", lim->unit);
    weir__view_number(v, "burst", (int64_t)lim->burst);
    weir__view_number(v, "tolerance_ns", lim->capacity);
    weir__view_number(v, "backlog_ns", backlog);
    weir__view_number(v, "remaining",
                      backlog >= lim->capacity
                          ? 0
                          : floor_recip(lim->capacity - backlog, lim->unit, lim->inv_unit));
    weir__view_number(v, "rest_in_us", ceil_div(backlog, NS_PER_US));
    return WEIR_OK;
}
