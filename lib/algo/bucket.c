/*
 * bucket.c - the token bucket, the leaky bucket policer and the leaky
 * bucket shaper: one bucket, three policies.
 *
 * The state is the bucket's level (how full it is) and the time it was last
 * drained. A token bucket's missing tokens and a leaky bucket's water are the
 * same number, so the three share this code and differ only in defaults and
 * in what an admission returns (the shaper returns a delay).
 *
 * Exactness: the level is kept in units of 1/unit of a request, where
 * unit = window / gcd(limit, window) and the bucket drains rate =
 * limit / gcd(limit, window) units per microsecond. Both are integers, so
 * refill is exact with no rounding drift. Invariant: 0 <= level <= capacity
 * = burst * unit.
 *
 * Warm-up (token bucket only): the state keeps a third number, the key's
 * heat, 0 (cold) .. warmup_us (warm). The key warms by one microsecond for
 * each microsecond its bucket holds water (it is in use) and cools by one
 * for each microsecond the bucket is full of tokens (at rest), bucket time
 * first: after `elapsed` microseconds, heat = max(0, min(W, heat + busy) -
 * idle) with busy = min(elapsed, drain time of the level). A request of
 * cost h costs ceil(h * unit * cf * W / (W + (cf - 1) * heat)) units, at
 * most the capacity: cf times the usual cost when cold, the usual when
 * warm, so the rate a busy key admits rises linearly from limit / cf to
 * limit over W. Zero state: an empty bucket, cold.
 */
#include <string.h>

#include "algo/algo.h"
#include "algo/arith.h"

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

weir_status weir__bucket_compile(weir_limit *l)
{
    int64_t lim = (int64_t)l->limit;
    int64_t g = gcd64(lim, l->window_us);
    l->unit = l->window_us / g;
    l->rate = lim / g;
    /* The decision never adds a cost to the level before comparing it with
     * the capacity, so any capacity that fits 63 bits is usable. */
    if (l->unit > INT64_MAX / (int64_t)l->burst)
        return WEIR_ERANGE;
    l->capacity = l->unit * (int64_t)l->burst;
    return WEIR_OK;
}

/* Microseconds to drain `units` (>= 0). A limit that divides its window
 * drains one unit per microsecond; skip the multiplication then. */
static int64_t drain_time(const weir_limit *lim, int64_t units)
{
    return lim->rate == 1 ? units : ceil_recip(units, lim->rate, lim->inv_rate);
}

/* The state: the bucket, and a warm-up's heat (the third number is read
 * and written only when the limit has a warm-up). */
typedef struct warm_state {
    int64_t level;
    int64_t last_us;
    int64_t heat_us;
} warm_state;

static size_t state_size(const weir_limit *lim)
{
    return lim->warmup_us ? WEIR_STATE_WARMUP_BYTES : WEIR_STATE_FIXED_BYTES;
}

static bool state_ok(const weir_limit *lim, const warm_state *s)
{
    return s->level >= 0 && s->level <= lim->capacity && s->last_us >= 0 && s->heat_us >= 0 &&
           s->heat_us <= lim->warmup_us;
}

/* The heat @elapsed microseconds after a charge that left @level: the
 * bucket holds water first, then rests. */
static int64_t heat_after(const weir_limit *lim, int64_t heat, int64_t level, int64_t elapsed)
{
    int64_t busy = min64(elapsed, drain_time(lim, level));
    heat = min64(lim->warmup_us, sat_add(heat, busy));
    return max64(0, heat - (elapsed - busy));
}

/* Units a request of @hits costs at @heat (see the header comment). */
static int64_t cost_at(const weir_limit *lim, uint64_t hits, int64_t heat)
{
    int64_t need = sat_mul_u(hits, lim->unit);
    if (!lim->warmup_us)
        return need;
    uint64_t cold = (uint64_t)lim->cold_factor * (uint64_t)lim->warmup_us;
    uint64_t d = (uint64_t)lim->warmup_us + (uint64_t)(lim->cold_factor - 1u) * (uint64_t)heat;
    weir__u128 c = ((weir__u128)(uint64_t)need * cold + d - 1u) / d;
    return c >= (weir__u128)(uint64_t)lim->capacity ? lim->capacity : (int64_t)c;
}

/* Whether a request of @hits fits @d microseconds from now, the bucket at
 * @level (> 0) and the key at @heat now. The wait ends before the bucket
 * is empty, so the key warms all along it. */
static bool fits_after(const weir_limit *lim, int64_t level, int64_t heat, uint64_t hits, int64_t d)
{
    int64_t over = level - (lim->capacity - cost_at(lim, hits, min64(lim->warmup_us, heat + d)));
    return over <= 0 || drain_time(lim, over) <= d;
}

/* Microseconds until a denied request of @hits (<= burst) fits: the level
 * drains and, as the key warms on the way, the cost falls; both move one
 * way, so the least wait is found by bisection up to the time the key is
 * warm, after which the cost holds. */
static int64_t wait_for(const weir_limit *lim, int64_t level, int64_t heat, uint64_t hits)
{
    int64_t warm_in = lim->warmup_us - heat;
    if (!lim->warmup_us || !fits_after(lim, level, heat, hits, warm_in))
        return drain_time(lim, level - (lim->capacity - cost_at(lim, hits, lim->warmup_us)));
    int64_t lo = 0, hi = warm_in; /* fits at hi, not at lo */
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (fits_after(lim, level, heat, hits, mid))
            hi = mid;
        else
            lo = mid;
    }
    return hi;
}

/* Microseconds until a key at @level and @heat is back at rest: its
 * bucket drained, then (with a warm-up) cold. */
static int64_t rest_time(const weir_limit *lim, int64_t level, int64_t heat)
{
    int64_t drain = level ? drain_time(lim, level) : 0;
    if (!lim->warmup_us)
        return drain;
    return sat_add(drain, min64(lim->warmup_us, sat_add(heat, drain)));
}

weir_status weir__bucket_decide(const weir_limit *lim, const void *in, void *out, int64_t now_us,
                                uint64_t hits, weir_result *res)
{
    warm_state s = {0, 0, 0};
    memcpy(&s, in, state_size(lim));
    if (!state_ok(lim, &s))
        return WEIR_EINVAL;

    /* A clock that went backwards drains nothing. */
    int64_t t = max64(now_us, s.last_us);
    int64_t elapsed = t - s.last_us;
    int64_t level = s.level;
    int64_t drained;
    /* a multiplication, not a division: this is the hot path */
    if (__builtin_mul_overflow(elapsed, lim->rate, &drained) || drained >= level)
        level = 0;
    else
        level -= drained;
    int64_t heat = lim->warmup_us ? heat_after(lim, s.heat_us, s.level, elapsed) : 0;

    memset(res, 0, sizeof(*res));
    res->limit = lim->burst;
    int64_t need = cost_at(lim, hits ? hits : 1, heat);
    bool never = hits > lim->burst;
    res->allowed = !never && need <= lim->capacity - level;

    int64_t after = level;
    if (res->allowed) {
        /* The water ahead drains from t on, which is t - now_us away on the
         * caller's clock when it went backwards. */
        if (lim->algorithm == WEIR_ALGO_LEAKY_SHAPER && hits > 0 && level > 0)
            res->delay_us = sat_add(drain_time(lim, level), t - now_us);
        if (hits > 0) {
            after = level + need;
            if (out) {
                warm_state n = {after, t, heat};
                memcpy(out, &n, state_size(lim));
            }
        }
    } else {
        res->retry_after_us =
            never ? WEIR_NEVER : sat_add(wait_for(lim, level, heat, hits ? hits : 1), t - now_us);
    }
    /* with no time passing the heat holds, and so does the cost of one */
    int64_t one = lim->warmup_us ? cost_at(lim, 1, heat) : lim->unit;
    res->remaining =
        (uint64_t)(one == lim->unit ? floor_recip(lim->capacity - after, lim->unit, lim->inv_unit)
                                    : (lim->capacity - after) / one);
    int64_t rest = rest_time(lim, after, heat);
    res->reset_after_us = rest ? sat_add(rest, t - now_us) : 0;
    return WEIR_OK;
}

/* @units of 1/unit of a request, in thousandths of a request (floor). */
static int64_t milli_of(const weir_limit *lim, int64_t units)
{
    weir__u128 m = (weir__u128)(uint64_t)units * 1000u / (uint64_t)lim->unit;
    return m > (weir__u128)INT64_MAX ? INT64_MAX : (int64_t)m;
}

weir_status weir__bucket_describe(const weir_limit *lim, const void *in, int64_t now_us,
                                  weir_state_view *v)
{
    warm_state s = {0, 0, 0};
    memcpy(&s, in, state_size(lim));
    if (!state_ok(lim, &s))
        return WEIR_EINVAL;
    /* the level weir__bucket_decide() would start from at now_us */
    int64_t t = max64(now_us, s.last_us);
    int64_t drained, level = s.level;
    if (__builtin_mul_overflow(t - s.last_us, lim->rate, &drained) || drained >= level)
        level = 0;
    else
        level -= drained;
    int64_t rest = level ? sat_add(drain_time(lim, level), t - now_us) : 0;

    switch (lim->algorithm) {
    case WEIR_ALGO_TOKEN_BUCKET:
        weir__view_number(v, "tokens_milli", milli_of(lim, lim->capacity - level));
        weir__view_number(v, "burst", (int64_t)lim->burst);
        weir__view_number(v, "full_in_us", rest);
        break;
    case WEIR_ALGO_LEAKY_SHAPER:
        weir__view_number(v, "queue_milli", milli_of(lim, level));
        weir__view_number(v, "queue", (int64_t)lim->burst);
        weir__view_number(v, "wait_us", rest);
        break;
    default:
        weir__view_number(v, "level_milli", milli_of(lim, level));
        weir__view_number(v, "burst", (int64_t)lim->burst);
        weir__view_number(v, "empty_in_us", rest);
        break;
    }
    int64_t heat = lim->warmup_us ? heat_after(lim, s.heat_us, s.level, t - s.last_us) : 0;
    weir__view_number(v, "remaining", (lim->capacity - level) / cost_at(lim, 1, heat));
    weir__view_number(v, "level_units", s.level);
    weir__view_number(v, "unit", lim->unit);
    weir__view_number(v, "last_us", s.last_us);
    if (lim->warmup_us)
        weir__view_number(v, "heat_us", heat);
    return WEIR_OK;
}
