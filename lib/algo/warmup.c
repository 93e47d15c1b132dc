/*
 * warmup.c - the token bucket's warm-up: a cold key admits at limit /
 * cold_factor and its rate rises to the limit as it is kept busy.
 *
 * The state is the bucket's (bucket.c: level, last charge) and a third
 * number, the key's heat, 0 (cold) .. W = warmup_us (warm). The key warms
 * by one microsecond for each microsecond its bucket holds water (it is
 * in use) and cools by one for each microsecond the bucket is full of
 * tokens (at rest), bucket time first: after `elapsed` microseconds,
 * heat = max(0, min(W, heat + busy) - idle) with busy = min(elapsed, drain
 * time of the level) and idle the rest. A request of cost h costs
 * ceil(h * unit * cf * W / (W + (cf - 1) * heat)) units, at most the
 * capacity: cf times the usual cost when cold, the usual when warm, so the
 * rate a busy key admits rises linearly from limit / cf to limit over W.
 * Zero state: an empty bucket, cold. Invariant: 0 <= heat <= W and the
 * bucket's own.
 */
#include <string.h>

#include "algo/bucket.h"

typedef struct warm_state {
    int64_t level;
    int64_t last_us;
    int64_t heat_us;
} warm_state;

static bool read_state(const weir_limit *lim, const void *in, warm_state *s)
{
    memcpy(s, in, sizeof(*s));
    return s->level >= 0 && s->level <= lim->capacity && s->last_us >= 0 && s->heat_us >= 0 &&
           s->heat_us <= lim->warmup_us;
}

/* The heat @elapsed microseconds after a charge that left @level: the
 * bucket holds water first, then rests. */
static int64_t heat_after(const weir_limit *lim, int64_t heat, int64_t level, int64_t elapsed)
{
    int64_t busy = min64(elapsed, weir__drain_time(lim, level));
    heat = min64(lim->warmup_us, sat_add(heat, busy));
    return max64(0, heat - (elapsed - busy));
}

int64_t weir__warmup_cost(const weir_limit *lim, uint64_t hits, int64_t heat)
{
    int64_t need = sat_mul_u(hits, lim->unit);
    uint64_t cold = (uint64_t)lim->cold_factor * (uint64_t)lim->warmup_us;
    uint64_t d = (uint64_t)lim->warmup_us + (uint64_t)(lim->cold_factor - 1u) * (uint64_t)heat;
    weir__u128 c = ((weir__u128)(uint64_t)need * cold + d - 1u) / d;
    return c >= (weir__u128)(uint64_t)lim->capacity ? lim->capacity : (int64_t)c;
}

/* g(d): the wait a request of @hits needs at the cost it would have @d
 * microseconds from now, the bucket at @level (> 0) and the key at @heat
 * now (0 when that cost already fits). The wait ends before the bucket is
 * empty, so the key warms all along it. */
static int64_t wait_at(const weir_limit *lim, int64_t level, int64_t heat, uint64_t hits, int64_t d)
{
    int64_t cost = weir__warmup_cost(lim, hits, min64(lim->warmup_us, sat_add(heat, d)));
    int64_t over = level - (lim->capacity - cost);
    return over > 0 ? weir__drain_time(lim, over) : 0;
}

/* Microseconds until a denied request of @hits (<= burst) fits: the least
 * d with g(d) <= d. As the key warms the cost falls, so g falls as d
 * grows: g(0) (the wait at today's cost) is enough, and no d below g(hi)
 * is for an hi that is; a few rounds of that narrow the bracket to a
 * microsecond or so, which bisection closes. */
static int64_t wait_for(const weir_limit *lim, int64_t level, int64_t heat, uint64_t hits)
{
    int64_t hi = wait_at(lim, level, heat, hits, 0);
    int64_t lo = max64(0, wait_at(lim, level, heat, hits, hi) - 1); /* fits at hi, not at lo */
    for (int round = 0; round < 3 && hi - lo > 1; round++) {
        hi = min64(hi, max64(lo + 1, wait_at(lim, level, heat, hits, lo + 1)));
        lo = max64(lo, wait_at(lim, level, heat, hits, hi) - 1);
    }
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (wait_at(lim, level, heat, hits, mid) <= mid)
            hi = mid;
        else
            lo = mid;
    }
    return hi;
}

/* Microseconds until a key at @level and @heat is back at rest: its
 * bucket drained, then cold. */
static int64_t rest_time(const weir_limit *lim, int64_t level, int64_t heat)
{
    int64_t drain = level ? weir__drain_time(lim, level) : 0;
    return sat_add(drain, min64(lim->warmup_us, sat_add(heat, drain)));
}

weir_status weir__warmup_decide(const weir_limit *lim, const void *in, void *out, int64_t now_us,
                                uint64_t hits, weir_result *res)
{
    warm_state s;
    if (!read_state(lim, in, &s))
        return WEIR_EINVAL;
    /* a clock that went backwards drains nothing, and warms nothing */
    int64_t t = max64(now_us, s.last_us);
    int64_t level = weir__level_after(lim, s.level, t - s.last_us);
    int64_t heat = heat_after(lim, s.heat_us, s.level, t - s.last_us);

    memset(res, 0, sizeof(*res));
    res->limit = lim->burst;
    uint64_t one = hits ? hits : 1;
    bool never = hits > lim->burst;
    int64_t need = never ? 0 : weir__warmup_cost(lim, one, heat);
    res->allowed = !never && need <= lim->capacity - level;
    int64_t after = level;
    if (res->allowed && hits > 0) {
        after = level + need;
        if (out) {
            warm_state n = {after, t, heat};
            memcpy(out, &n, sizeof(n));
        }
    } else if (!res->allowed) {
        res->retry_after_us =
            never ? WEIR_NEVER : sat_add(wait_for(lim, level, heat, one), t - now_us);
    }
    /* with no time passing the heat holds, and so does the cost of one */
    res->remaining = (uint64_t)((lim->capacity - after) / weir__warmup_cost(lim, 1, heat));
    int64_t rest = rest_time(lim, after, heat);
    res->reset_after_us = rest ? sat_add(rest, t - now_us) : 0;
    return WEIR_OK;
}

bool weir__warmup_heat(const weir_limit *lim, const void *in, int64_t now_us, int64_t *heat)
{
    warm_state s;
    if (!read_state(lim, in, &s))
        return false;
    int64_t t = max64(now_us, s.last_us);
    *heat = heat_after(lim, s.heat_us, s.level, t - s.last_us);
    return true;
}
