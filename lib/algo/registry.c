/*
 * registry.c - the algorithm table: names, defaults, state sizes, and the
 * dispatch from weir_step()/weir_check()/weir_release() to each algorithm.
 *
 * Invariant: every compiled limit passed on to an algorithm has limit >= 1
 * (a ban is answered here), a window within the caps, its defaults applied
 * and its derived constants filled.
 */
#include <string.h>
#include <strings.h>

#include "algo/algo.h"
#include "algo/arith.h"

typedef weir_status (*describe_fn)(const weir_limit *lim, const void *in, int64_t now_us,
                                   weir_state_view *v);

typedef struct algo_row {
    const char *name;
    weir__decide_fn decide;
    describe_fn describe;
    weir__settle_fn refund; /* NULL: WEIR_EALGO */
    weir__settle_fn charge; /* NULL: a step of what the state can admit */
} algo_row;

static const algo_row rows[WEIR_ALGORITHM_COUNT + 1] = {
    [WEIR_ALGO_TOKEN_BUCKET] = {"token_bucket", weir__bucket_decide, weir__bucket_describe,
                                weir__bucket_refund, weir__bucket_charge},
    [WEIR_ALGO_GCRA] = {"gcra", weir__gcra_decide, weir__gcra_describe, weir__gcra_refund,
                        weir__gcra_charge},
    [WEIR_ALGO_LEAKY_BUCKET] = {"leaky_bucket", weir__bucket_decide, weir__bucket_describe,
                                weir__bucket_refund, weir__bucket_charge},
    [WEIR_ALGO_LEAKY_SHAPER] = {"leaky_bucket_shaper", weir__bucket_decide, weir__bucket_describe,
                                weir__bucket_refund, weir__bucket_charge},
    [WEIR_ALGO_FIXED_WINDOW] = {"fixed_window", weir__fixed_decide, weir__fixed_describe,
                                weir__fixed_refund, NULL},
    [WEIR_ALGO_SLIDING_LOG] = {"sliding_window_log", weir__log_decide, weir__log_describe,
                               weir__log_refund, NULL},
    [WEIR_ALGO_SLIDING_COUNTER] = {"sliding_window_counter", weir__counter_decide,
                                   weir__counter_describe, weir__counter_refund, NULL},
    [WEIR_ALGO_CONCURRENCY] = {"concurrency", weir__conc_decide, weir__conc_describe, NULL, NULL},
};

static const algo_row *row_of(weir_algorithm algo)
{
    if ((int)algo < 1 || (int)algo > WEIR_ALGORITHM_COUNT)
        return NULL;
    return &rows[algo];
}

const char *weir_algorithm_name(weir_algorithm algo)
{
    const algo_row *r = row_of(algo);
    return r ? r->name : NULL;
}

weir_status weir_algorithm_parse(const char *name, weir_algorithm *out)
{
    if (!name || !out)
        return WEIR_EINVAL;
    for (int i = 1; i <= WEIR_ALGORITHM_COUNT; i++) {
        if (strcasecmp(name, rows[i].name) == 0) {
            *out = (weir_algorithm)i;
            return WEIR_OK;
        }
    }
    return WEIR_EINVAL;
}

static uint64_t default_burst(weir_algorithm algo, uint64_t limit)
{
    switch (algo) {
    case WEIR_ALGO_TOKEN_BUCKET:
    case WEIR_ALGO_LEAKY_SHAPER:
        return limit;
    case WEIR_ALGO_GCRA:
    case WEIR_ALGO_LEAKY_BUCKET:
        return limit ? 1 : 0;
    default:
        /* the window algorithms and the concurrency limiter have no burst
         * of their own: at most `limit` at once */
        return limit;
    }
}

static size_t state_bytes(const weir_limit *lim)
{
    switch (lim->algorithm) {
    case WEIR_ALGO_SLIDING_LOG:
        return 8 + 8 * (size_t)lim->limit;
    case WEIR_ALGO_SLIDING_COUNTER:
        if (lim->sub_windows <= 1)
            return WEIR_STATE_FIXED_BYTES;
        return 8 + 4 * ((size_t)lim->sub_windows + 1);
    case WEIR_ALGO_CONCURRENCY:
        return 16 + 24 * (size_t)lim->limit;
    case WEIR_ALGO_TOKEN_BUCKET:
        return lim->warmup_us ? WEIR_STATE_WARMUP_BYTES : WEIR_STATE_FIXED_BYTES;
    default:
        return WEIR_STATE_FIXED_BYTES;
    }
}

weir_status weir_limit_compile(const weir_limit_spec *spec, weir_limit *out)
{
    if (!spec || !out || !row_of(spec->algorithm))
        return WEIR_EINVAL;
    if (spec->window_us <= 0)
        return WEIR_EINVAL;
    if (spec->window_us > WEIR_MAX_WINDOW_US || spec->limit > WEIR_MAX_LIMIT ||
        spec->burst > WEIR_MAX_LIMIT)
        return WEIR_ERANGE;
    /* a warm-up is the token bucket's alone, and a cold factor needs one */
    if (spec->warmup_us < 0 || (spec->cold_factor && !spec->warmup_us) ||
        (spec->warmup_us && spec->algorithm != WEIR_ALGO_TOKEN_BUCKET))
        return WEIR_EINVAL;
    if (spec->warmup_us > WEIR_MAX_WARMUP_US || spec->cold_factor > WEIR_MAX_COLD_FACTOR)
        return WEIR_ERANGE;

    weir_limit l;
    memset(&l, 0, sizeof(l));
    l.algorithm = spec->algorithm;
    l.limit = spec->limit;
    l.window_us = spec->window_us;
    l.burst = spec->burst ? spec->burst : default_burst(spec->algorithm, spec->limit);
    if (spec->limit == 0)
        l.burst = 0;
    l.warmup_us = spec->warmup_us;
    if (l.warmup_us)
        l.cold_factor = spec->cold_factor ? spec->cold_factor : WEIR_DEFAULT_COLD_FACTOR;

    switch (spec->algorithm) {
    case WEIR_ALGO_TOKEN_BUCKET:
    case WEIR_ALGO_LEAKY_BUCKET:
    case WEIR_ALGO_LEAKY_SHAPER:
        if (l.limit) {
            weir_status st = weir__bucket_compile(&l);
            if (st != WEIR_OK)
                return st;
        }
        break;
    case WEIR_ALGO_GCRA:
        if (l.limit) {
            weir_status st = weir__gcra_compile(&l);
            if (st != WEIR_OK)
                return st;
        }
        break;
    case WEIR_ALGO_SLIDING_LOG:
        if (l.limit > WEIR_MAX_LOG_ENTRIES)
            return WEIR_ERANGE;
        l.burst = l.limit;
        break;
    case WEIR_ALGO_CONCURRENCY:
        if (l.limit > WEIR_MAX_LEASES)
            return WEIR_ERANGE;
        l.burst = l.limit;
        break;
    case WEIR_ALGO_SLIDING_COUNTER:
        l.sub_windows = spec->sub_windows ? spec->sub_windows : 1;
        if (l.sub_windows > WEIR_MAX_SUB_WINDOWS)
            return WEIR_ERANGE;
        if (spec->window_us % l.sub_windows != 0)
            return WEIR_EINVAL;
        l.burst = l.limit;
        break;
    case WEIR_ALGO_FIXED_WINDOW:
        l.burst = l.limit;
        break;
    }
    l.span_us = l.sub_windows > 1 ? l.window_us / l.sub_windows : l.window_us;
    l.inv_unit = l.unit > 0 ? recip((uint64_t)l.unit) : 0;
    l.inv_rate = l.rate > 0 ? recip((uint64_t)l.rate) : 0;
    l.inv_span = recip((uint64_t)l.span_us);
    l.state_bytes = (uint32_t)state_bytes(&l);
    *out = l;
    return WEIR_OK;
}

size_t weir_state_size(const weir_limit *lim)
{
    return lim ? lim->state_bytes : 0;
}

void weir__ban_result(const weir_limit *lim, weir_result *res)
{
    (void)lim;
    memset(res, 0, sizeof(*res));
    res->allowed = false;
    res->retry_after_us = WEIR_NEVER;
}

static bool aligned8(const void *p)
{
    return ((uintptr_t)p & 7u) == 0;
}

/* Times before 0 are decided as time 0 (a clock behind the origin, like one
 * that went backwards). The durations an algorithm reports are counted from
 * 0 then; add the caller's distance to 0 so they stay promises on the
 * caller's clock. */
static void shift_durations(weir_result *res, int64_t behind_us)
{
    if (behind_us == 0)
        return;
    if (res->retry_after_us > 0)
        res->retry_after_us = sat_add(res->retry_after_us, behind_us);
    if (res->reset_after_us > 0)
        res->reset_after_us = sat_add(res->reset_after_us, behind_us);
    if (res->delay_us > 0)
        res->delay_us = sat_add(res->delay_us, behind_us);
}

static int64_t behind_zero(int64_t now_us)
{
    return now_us >= 0 ? 0 : sat_sub(0, now_us);
}

static weir_status dispatch(const weir_limit *lim, const void *in, void *out, int64_t now_us,
                            uint64_t hits, weir_result *res)
{
    if (!lim || !in || !res || !aligned8(in))
        return WEIR_EINVAL;
    const algo_row *r = row_of(lim->algorithm);
    if (!r)
        return WEIR_EINVAL;
    if (lim->limit == 0) {
        weir__ban_result(lim, res);
        return WEIR_OK;
    }
    int64_t behind_us = behind_zero(now_us);
    if (now_us < 0)
        now_us = 0;
    weir_result tmp;
    weir_status st = r->decide(lim, in, out, now_us, hits, &tmp);
    if (st == WEIR_OK) {
        shift_durations(&tmp, behind_us);
        *res = tmp;
    }
    return st;
}

weir_status weir__decide(const weir_limit *lim, const void *in, void *out, int64_t now_us,
                         uint64_t hits, weir_result *res)
{
    if (lim->limit == 0) {
        weir__ban_result(lim, res);
        return WEIR_OK;
    }
    return rows[lim->algorithm].decide(lim, in, out, now_us, hits, res);
}

weir_status weir_step(const weir_limit *lim, void *state, int64_t now_us, uint64_t hits,
                      weir_result *res)
{
    return dispatch(lim, state, state, now_us, hits, res);
}

weir_status weir_check(const weir_limit *lim, const void *state, int64_t now_us, uint64_t hits,
                       weir_result *res)
{
    return dispatch(lim, state, NULL, now_us, hits, res);
}

/* The cost a reserve's check decides: a peek's 1, plus the reserve. */
static uint64_t reserve_cost(uint64_t hits, uint64_t reserve)
{
    uint64_t cost;
    if (__builtin_add_overflow(hits ? hits : 1, reserve, &cost))
        cost = UINT64_MAX;
    return cost;
}

weir_status weir__decide_reserve(const weir_limit *lim, const void *in, void *out, int64_t now_us,
                                 uint64_t hits, uint64_t reserve, weir_result *res)
{
    if (reserve > 0) {
        /* check hits + reserve, charge hits: a denial is that check's */
        weir_status st = weir__decide(lim, in, NULL, now_us, reserve_cost(hits, reserve), res);
        if (st != WEIR_OK || !res->allowed)
            return st;
    }
    return weir__decide(lim, in, out, now_us, hits, res);
}

weir_status weir_step_reserve(const weir_limit *lim, void *state, int64_t now_us, uint64_t hits,
                              uint64_t reserve, weir_result *res)
{
    if (reserve > 0) {
        weir_result tmp;
        weir_status st = weir_check(lim, state, now_us, reserve_cost(hits, reserve), &tmp);
        if (st != WEIR_OK)
            return st;
        if (!tmp.allowed) {
            *res = tmp;
            return WEIR_OK;
        }
    }
    return weir_step(lim, state, now_us, hits, res);
}

weir_status weir_release(const weir_limit *lim, void *state, int64_t now_us, uint64_t lease,
                         weir_result *res)
{
    if (!lim || !state || !res || !aligned8(state))
        return WEIR_EINVAL;
    if (lim->algorithm != WEIR_ALGO_CONCURRENCY)
        return WEIR_EALGO;
    if (lim->limit == 0)
        return WEIR_ENOLEASE;
    int64_t behind_us = behind_zero(now_us);
    if (now_us < 0)
        now_us = 0;
    weir_result tmp;
    weir_status st = weir__conc_release(lim, state, now_us, lease, &tmp);
    if (st == WEIR_OK) {
        shift_durations(&tmp, behind_us);
        *res = tmp;
    }
    return st;
}

weir_status weir__settled(const weir_limit *lim, const void *state, int64_t now_us, bool allowed,
                          weir_result *res)
{
    weir_result r;
    memset(&r, 0, sizeof(r));
    if (lim->limit > 0) {
        weir_status st = rows[lim->algorithm].decide(lim, state, NULL, now_us, 0, &r);
        if (st != WEIR_OK)
            return st;
    }
    r.allowed = allowed;
    r.retry_after_us = 0;
    r.delay_us = 0;
    r.lease = 0;
    *res = r;
    return WEIR_OK;
}

weir_status weir__refund(const weir_limit *lim, void *state, int64_t now_us, uint64_t hits,
                         weir_result *res)
{
    const algo_row *r = &rows[lim->algorithm];
    if (!r->refund || lim->warmup_us)
        return WEIR_EALGO; /* a warm-up's cost depends on its heat: not undone */
    bool changed = false;
    if (lim->limit > 0) {
        weir_status st = r->refund(lim, state, now_us, hits, &changed);
        if (st != WEIR_OK)
            return st;
    }
    return weir__settled(lim, state, now_us, changed, res);
}

weir_status weir__charge(const weir_limit *lim, void *state, int64_t now_us, uint64_t hits,
                         weir_result *res)
{
    const algo_row *r = &rows[lim->algorithm];
    if (!r->refund || lim->warmup_us)
        return WEIR_EALGO; /* the concurrency limiter (it holds leases), a warm-up */
    if (lim->limit > 0 && r->charge) {
        bool changed = false;
        weir_status st = r->charge(lim, state, now_us, hits, &changed);
        if (st != WEIR_OK)
            return st;
    } else if (lim->limit > 0) {
        /* a window holds at most what a TAKE could still take: that much */
        weir_result peek;
        weir_status st = r->decide(lim, state, NULL, now_us, 0, &peek);
        if (st != WEIR_OK)
            return st;
        uint64_t take = hits < peek.remaining ? hits : peek.remaining;
        if (take > 0 && (st = r->decide(lim, state, state, now_us, take, &peek)) != WEIR_OK)
            return st;
    }
    return weir__settled(lim, state, now_us, true, res);
}

/* weir_refund() and weir_charge(): the arguments checked and the time
 * clamped as weir_step() does. */
static weir_status settle(const weir_limit *lim, void *state, int64_t now_us, uint64_t hits,
                          bool charge, weir_result *res)
{
    if (!lim || !state || !res || !aligned8(state) || !row_of(lim->algorithm))
        return WEIR_EINVAL;
    int64_t behind_us = behind_zero(now_us);
    if (now_us < 0)
        now_us = 0;
    weir_result tmp;
    weir_status st = charge ? weir__charge(lim, state, now_us, hits, &tmp)
                            : weir__refund(lim, state, now_us, hits, &tmp);
    if (st == WEIR_OK) {
        shift_durations(&tmp, behind_us);
        *res = tmp;
    }
    return st;
}

weir_status weir_refund(const weir_limit *lim, void *state, int64_t now_us, uint64_t hits,
                        weir_result *res)
{
    return settle(lim, state, now_us, hits, false, res);
}

weir_status weir_charge(const weir_limit *lim, void *state, int64_t now_us, uint64_t hits,
                        weir_result *res)
{
    return settle(lim, state, now_us, hits, true, res);
}

weir_status weir__limit_share(const weir_limit *lim, uint32_t ppm, weir_limit *out)
{
    weir_limit_spec spec = {lim->algorithm,
                            lim->limit,
                            lim->window_us,
                            lim->burst,
                            lim->sub_windows > 1 ? lim->sub_windows : 0,
                            lim->warmup_us,
                            lim->cold_factor};
    if (spec.limit) {
        spec.limit = spec.limit * ppm / 1000000u;
        spec.limit = spec.limit ? spec.limit : 1;
        spec.burst = spec.burst * ppm / 1000000u;
        spec.burst = spec.burst ? spec.burst : 1;
    }
    return weir_limit_compile(&spec, out);
}

weir_status weir_state_describe(const weir_limit *lim, const void *state, int64_t now_us,
                                weir_state_view *out)
{
    if (!lim || !state || !out || !aligned8(state))
        return WEIR_EINVAL;
    const algo_row *r = row_of(lim->algorithm);
    if (!r)
        return WEIR_EINVAL;
    weir_state_view v;
    memset(&v, 0, sizeof(v));
    v.algorithm = lim->algorithm;
    weir_status st =
        lim->limit == 0 ? WEIR_OK : r->describe(lim, state, now_us < 0 ? 0 : now_us, &v);
    if (st == WEIR_OK)
        *out = v;
    return st;
}
