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
 * = burst * unit. A token bucket with a warm-up is decided by warmup.c.
 */
#include <string.h>

#include "algo/bucket.h"

typedef struct bucket_state {
    int64_t level;
    int64_t last_us;
} bucket_state;

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

weir_status weir__bucket_decide(const weir_limit *lim, const void *in, void *out, int64_t now_us,
                                uint64_t hits, weir_result *res)
{
    if (lim->warmup_us)
        return weir__warmup_decide(lim, in, out, now_us, hits, res);
    bucket_state s;
    memcpy(&s, in, sizeof(s));
    if (s.level < 0 || s.level > lim->capacity || s.last_us < 0)
        return WEIR_EINVAL;

    /* A clock that went backwards drains nothing. */
    int64_t t = max64(now_us, s.last_us);
    int64_t level = weir__level_after(lim, s.level, t - s.last_us);

    memset(res, 0, sizeof(*res));
    res->limit = lim->burst;
    int64_t need = sat_mul_u(hits ? hits : 1, lim->unit);
    bool never = hits > lim->burst;
    res->allowed = !never && need <= lim->capacity - level;

    int64_t after = level;
    if (res->allowed) {
        /* The water ahead drains from t on, which is t - now_us away on the
         * caller's clock when it went backwards. */
        if (lim->algorithm == WEIR_ALGO_LEAKY_SHAPER && hits > 0 && level > 0)
            res->delay_us = sat_add(weir__drain_time(lim, level), t - now_us);
        if (hits > 0) {
            after = level + need;
            if (out) {
                bucket_state n = {after, t};
                memcpy(out, &n, sizeof(n));
            }
        }
    } else {
        res->retry_after_us =
            never ? WEIR_NEVER
                  : sat_add(weir__drain_time(lim, level - (lim->capacity - need)), t - now_us);
    }
    res->remaining = (uint64_t)floor_recip(lim->capacity - after, lim->unit, lim->inv_unit);
    res->reset_after_us = after ? sat_add(weir__drain_time(lim, after), t - now_us) : 0;
    return WEIR_OK;
}

/* The level at the later of @now_us and the state's last drain, @t. */
static int64_t level_at(const weir_limit *lim, const bucket_state *s, int64_t now_us, int64_t *t)
{
    *t = max64(now_us, s->last_us);
    int64_t drained;
    if (__builtin_mul_overflow(*t - s->last_us, lim->rate, &drained) || drained >= s->level)
        return 0;
    return s->level - drained;
}

/* A refund takes the stored level down by hits requests, not below empty,
 * when the bucket still holds something, and keeps the drain time (so the
 * key is at rest no later than before); a charge takes the level up by
 * hits requests, at most to the capacity. */
static weir_status settle(const weir_limit *lim, void *state, int64_t now_us, uint64_t hits,
                          bool charge, bool *changed)
{
    bucket_state s;
    memcpy(&s, state, sizeof(s));
    if (s.level < 0 || s.level > lim->capacity || s.last_us < 0)
        return WEIR_EINVAL;
    int64_t t, level = level_at(lim, &s, now_us, &t);
    if (hits == 0 || (!charge && level == 0))
        return WEIR_OK;
    int64_t need = sat_mul_u(hits, lim->unit);
    bucket_state n = {level + min64(need, lim->capacity - level), t};
    if (!charge)
        n = (bucket_state){need >= s.level ? 0 : s.level - need, s.last_us};
    memcpy(state, &n, sizeof(n));
    *changed = true;
    return WEIR_OK;
}

weir_status weir__bucket_refund(const weir_limit *lim, void *state, int64_t now_us, uint64_t hits,
                                bool *changed)
{
    return settle(lim, state, now_us, hits, false, changed);
}

weir_status weir__bucket_charge(const weir_limit *lim, void *state, int64_t now_us, uint64_t hits,
                                bool *changed)
{
    return settle(lim, state, now_us, hits, true, changed);
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
    bucket_state s;
    memcpy(&s, in, sizeof(s)); /* a warm-up's state starts alike */
    int64_t heat = 0;
    if (s.level < 0 || s.level > lim->capacity || s.last_us < 0 ||
        (lim->warmup_us && !weir__warmup_heat(lim, in, now_us, &heat)))
        return WEIR_EINVAL;
    /* the level weir__bucket_decide() would start from at now_us */
    int64_t t = max64(now_us, s.last_us);
    int64_t level = weir__level_after(lim, s.level, t - s.last_us);
    int64_t rest = level ? sat_add(weir__drain_time(lim, level), t - now_us) : 0;

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
    int64_t one = lim->warmup_us ? weir__warmup_cost(lim, 1, heat) : lim->unit;
    weir__view_number(v, "remaining", (lim->capacity - level) / one);
    weir__view_number(v, "level_units", s.level);
    weir__view_number(v, "unit", lim->unit);
    weir__view_number(v, "last_us", s.last_us);
    if (lim->warmup_us)
        weir__view_number(v, "heat_us", heat);
    return WEIR_OK;
}
