/*
 * sliding_counter.c - the sliding window counter: a window of k sub-windows
 * plus the one sliding out of it, weighted by how much of it is still
 * inside the window.
 *
 * With sub-window length s = window / k and the current sub-window j (time
 * t = j*s + e), the estimate of the requests in (t - window, t] is
 *     c[j-k+1] + ... + c[j]  +  c[j-k] * (s - e) / s.
 * k = 1 is the classic two-window counter (Cloudflare's). The comparison is
 * done as estimate * s <= limit * s in 128-bit integers, so it is exact.
 *
 * The state is the index of the newest sub-window and a ring of k + 1
 * counters. Counters of sub-windows that have passed out of reach are
 * zeroed when time advances (after more than a whole window, all of them).
 * A time before the state's sub-window (the clock went backwards) is taken
 * as the start of that sub-window, where the estimate is highest.
 * Invariant: every counter <= limit.
 */
#include <string.h>

#include "algo/algo.h"
#include "algo/arith.h"

typedef struct counter_state {
    int64_t cur;
    uint32_t c[];
} counter_state;

typedef struct view {
    const weir_limit *lim;
    int64_t s;   /* sub-window length */
    uint32_t k;  /* sub-windows per window */
    uint32_t n;  /* ring size, k + 1 */
    int64_t cur; /* newest sub-window in the state */
    const uint32_t *c;
    uint64_t inv_s; /* recip(s) */
} view;

/* The ring index of sub-window i: a mask for the usual power-of-two ring
 * (k = 1 gives 2 counters), a division otherwise. */
static inline uint64_t ring_index(const view *v, int64_t i)
{
    return (v->n & (v->n - 1)) == 0 ? (uint64_t)i & (v->n - 1) : (uint64_t)i % v->n;
}

/* ceil(old * (s - e) / s): the part of the sliding-out sub-window still
 * inside the window, rounded up. */
static inline uint64_t weighted_old(const view *v, uint64_t old, int64_t e)
{
    uint64_t prod;
    if (!__builtin_mul_overflow(old, (uint64_t)(v->s - e), &prod) && prod <= (uint64_t)INT64_MAX)
        return (uint64_t)ceil_recip((int64_t)prod, v->s, v->inv_s);
    return (uint64_t)(((weir__u128)old * (uint64_t)(v->s - e) + (uint64_t)v->s - 1) /
                      (uint64_t)v->s);
}

/* Count of sub-window i as seen at a time whose sub-window is >= cur. */
static inline uint64_t count_at(const view *v, int64_t i)
{
    if (i > v->cur || i < 0 || i <= v->cur - (int64_t)v->n)
        return 0;
    return v->c[ring_index(v, i)];
}

/* Full sub-windows of the window ending in sub-window j, and the old one. */
static inline void sums(const view *v, int64_t j, uint64_t *full, uint64_t *old)
{
    uint64_t f = 0;
    for (int64_t i = j - (int64_t)v->k + 1; i <= j; i++)
        f += count_at(v, i);
    *full = f;
    *old = count_at(v, j - (int64_t)v->k);
}

/* Is full + add + old * (s - e) / s <= limit ? */
static inline bool fits(const view *v, uint64_t full, uint64_t old, int64_t e, uint64_t add)
{
    weir__u128 lhs =
        (weir__u128)(full + add) * (uint64_t)v->s + (weir__u128)old * (uint64_t)(v->s - e);
    return lhs <= (weir__u128)v->lim->limit * (uint64_t)v->s;
}

/* Earliest offset from sub-window j start, >= e0, where `need` fits; -1 if
 * not within sub-window j. */
static inline int64_t fit_offset(const view *v, uint64_t full, uint64_t old, int64_t e0,
                                 uint64_t need)
{
    if (full + need > v->lim->limit)
        return -1;
    if (old == 0)
        return e0;
    /* old * (s - e) <= (limit - full - need) * s  <=>  e >= s - floor(...) */
    weir__u128 room = (weir__u128)(v->lim->limit - full - need) * (uint64_t)v->s / old;
    int64_t e = room >= (weir__u128)v->s ? 0 : v->s - (int64_t)room;
    e = max64(e, e0);
    return e < v->s ? e : -1;
}

/* Checks the state of @v and finds the sub-window @j holding @now_us and
 * the offset @e into it, as every reading of the state does. Sub-window
 * indices stop a few windows short of INT64_MAX so index arithmetic never
 * overflows; a later time is read as the last one (a stalled clock, which
 * never grants more quota), and a time before the state's sub-window (the
 * clock went backwards) as that sub-window's start. False: a corrupt state. */
static inline __attribute__((always_inline)) bool locate(const view *v, int64_t *now_us, int64_t *j,
                                                         int64_t *e)
{
    int64_t last_j = floor_recip(INT64_MAX, v->s, v->inv_s) - (int64_t)v->n - 1;
    if (v->cur < 0 || v->cur > last_j)
        return false;
    for (uint32_t i = 0; i < v->n; i++)
        if (v->c[i] > v->lim->limit)
            return false;
    *now_us = min64(*now_us, last_j * v->s);
    *j = floor_recip(*now_us, v->s, v->inv_s);
    *e = *now_us - *j * v->s;
    if (*j < v->cur) {
        *j = v->cur;
        *e = 0;
    }
    return true;
}

/* The decision for k sub-windows. Inlined into each caller below, so that
 * with k a constant (the two-window counter, k = 1) the compiler drops
 * the loops over sub-windows and the ring's modulo. */
static inline __attribute__((always_inline)) weir_status
counter_decide(const weir_limit *lim, const void *in, void *out, int64_t now_us, uint64_t hits,
               weir_result *res, uint32_t k)
{
    const counter_state *st = in;
    view v = {lim, lim->span_us, k, k + 1, st->cur, st->c, lim->inv_span};
    int64_t j, e;
    if (!locate(&v, &now_us, &j, &e))
        return WEIR_EINVAL;
    uint64_t full, old;
    sums(&v, j, &full, &old);
    uint64_t need = hits ? hits : 1;

    memset(res, 0, sizeof(*res));
    res->limit = lim->limit;
    res->allowed = need <= lim->limit && fits(&v, full, old, e, need);

    if (res->allowed && hits > 0) {
        full += hits;
        if (out) {
            counter_state *o = out;
            /* zero the sub-windows between the state's newest and j */
            int64_t from = max64(v.cur + 1, j - (int64_t)v.n + 1);
            for (int64_t i = from; i <= j; i++)
                o->c[ring_index(&v, i)] = 0;
            o->c[ring_index(&v, j)] += (uint32_t)hits;
            o->cur = j;
        }
    } else if (!res->allowed) {
        if (need > lim->limit) {
            res->retry_after_us = WEIR_NEVER;
        } else {
            /* The estimate only falls as time passes; walk forward one
             * sub-window at a time (after k + 1 of them it is zero), sliding
             * the sums instead of recomputing them. */
            int64_t e0 = e;
            uint64_t f = full, o = old;
            for (int64_t i = j;; i++) {
                int64_t off = fit_offset(&v, f, o, e0, need);
                if (off >= 0) {
                    res->retry_after_us = sat_add(sat_mul(i, v.s), off) - now_us;
                    break;
                }
                e0 = 0;
                f = f - count_at(&v, i - (int64_t)v.k + 1) + count_at(&v, i + 1);
                o = count_at(&v, i + 1 - (int64_t)v.k);
            }
        }
    }

    uint64_t used_old = 0;
    if (old)
        used_old = weighted_old(&v, old, e);
    res->remaining = full + used_old >= lim->limit ? 0 : lim->limit - full - used_old;

    /* Back at rest when the newest non-zero sub-window slides out. */
    int64_t newest = -1;
    if (res->allowed && hits > 0) {
        newest = j;
    } else {
        for (int64_t i = v.cur; i > v.cur - (int64_t)v.n && i >= 0; i--) {
            if (count_at(&v, i)) {
                newest = i;
                break;
            }
        }
    }
    if (newest >= 0) {
        int64_t rest = sat_mul(sat_add(newest, (int64_t)v.k + 1), v.s);
        res->reset_after_us = rest > now_us ? rest - now_us : 0;
    }
    return WEIR_OK;
}

weir_status weir__counter_decide(const weir_limit *lim, const void *in, void *out, int64_t now_us,
                                 uint64_t hits, weir_result *res)
{
    if (lim->sub_windows == 1)
        return counter_decide(lim, in, out, now_us, hits, res, 1);
    return counter_decide(lim, in, out, now_us, hits, res, lim->sub_windows);
}

/* The newest sub-window's count down by hits, when that sub-window still
 * counts (it is one of the window's k or the one sliding out). */
weir_status weir__counter_refund(const weir_limit *lim, void *state, int64_t now_us, uint64_t hits,
                                 bool *changed)
{
    counter_state *st = state;
    uint32_t k = lim->sub_windows;
    view v = {lim, lim->span_us, k, k + 1, st->cur, st->c, lim->inv_span};
    int64_t j, e;
    if (!locate(&v, &now_us, &j, &e))
        return WEIR_EINVAL;
    uint32_t *c = &st->c[ring_index(&v, v.cur)];
    if (hits == 0 || *c == 0 || v.cur < j - (int64_t)k)
        return WEIR_OK;
    *c -= hits < *c ? (uint32_t)hits : *c;
    *changed = true;
    return WEIR_OK;
}

weir_status weir__counter_describe(const weir_limit *lim, const void *in, int64_t now_us,
                                   weir_state_view *out)
{
    const counter_state *st = in;
    uint32_t k = lim->sub_windows;
    view v = {lim, lim->span_us, k, k + 1, st->cur, st->c, lim->inv_span};
    int64_t j, e;
    if (!locate(&v, &now_us, &j, &e))
        return WEIR_EINVAL;
    uint64_t full, old;
    sums(&v, j, &full, &old);
    uint64_t used_old = old ? weighted_old(&v, old, e) : 0;
    weir__u128 est =
        (weir__u128)full * 1000u +
        ((weir__u128)old * (uint64_t)(v.s - e) * 1000u + (uint64_t)v.s - 1) / (uint64_t)v.s;

    weir__view_number(out, "sub_window_us", v.s);
    weir__view_number(out, "sub_windows", k);
    weir__view_number(out, "current", j);
    weir__view_number(out, "elapsed_us", e);
    weir__view_number(out, "full", (int64_t)full);
    weir__view_number(out, "previous", (int64_t)old);
    weir__view_number(out, "estimate_milli",
                      est > (weir__u128)INT64_MAX ? INT64_MAX : (int64_t)est);
    weir__view_number(out, "remaining",
                      full + used_old >= lim->limit ? 0 : (int64_t)(lim->limit - full - used_old));
    /* sub-windows j - k .. j: the previous one and the window's k */
    int64_t first = max64(j - (int64_t)k, 0);
    weir__view_table(out, "sub_windows", (uint64_t)(j - first + 1), "index", "start_us", "count");
    for (int64_t i = first; i <= j; i++)
        if (weir__view_keeps(out, (uint64_t)(i - first)))
            weir__view_row(out, i, sat_mul(i, v.s), (int64_t)count_at(&v, i));
    return WEIR_OK;
}
