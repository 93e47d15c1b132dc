/*
 * concurrency.c - a concurrency limiter: at most `limit` units in flight.
 *
 * An admitted step is an acquire: it creates a lease of `hits` units that
 * holds until weir_release() or until the lease timeout (the limit's window)
 * passes, so a caller that crashed without releasing cannot leak capacity.
 * Expired leases are reaped at every step.
 *
 * The state is a header and an array of leases kept in order of expiry and,
 * equally, of id: a new lease never expires before an older one (its expiry
 * is clamped up to the newest lease's when the clock went backwards, which
 * only holds capacity slightly longer). Invariant: n <= limit,
 * held = sum of units <= limit, ids strictly increasing.
 */
#include <string.h>

#include "algo/algo.h"
#include "algo/arith.h"

typedef struct lease {
    uint64_t id;
    int64_t expires_us;
    uint64_t units;
} lease;

typedef struct conc_state {
    uint64_t next_id;
    uint32_t n;
    uint32_t held;
    lease l[];
} conc_state;

/* Every lease holds at least one unit, so n <= held: this also keeps an
 * admitted lease inside the array. */
static bool valid(const weir_limit *lim, const conc_state *s)
{
    return s->n <= s->held && s->held <= lim->limit;
}

/* Leases expired at t: a prefix of the array. An expiry that saturated at
 * INT64_MAX is never reached (a clock stalled there must not free them). */
static uint32_t expired(const conc_state *s, int64_t t, uint64_t *units)
{
    uint32_t i = 0;
    uint64_t u = 0;
    while (i < s->n && s->l[i].expires_us <= t && s->l[i].expires_us < INT64_MAX) {
        u += s->l[i].units;
        i++;
    }
    *units = u;
    return i;
}

/* Checks @s and counts the leases expired at @t (@gone of them, the
 * array's first) and the units still held. False: a corrupt state. */
static bool read_state(const weir_limit *lim, const conc_state *s, int64_t t, uint32_t *gone,
                       uint64_t *held)
{
    if (!valid(lim, s))
        return false;
    uint64_t gone_units;
    *gone = expired(s, t, &gone_units);
    if (gone_units > s->held)
        return false;
    *held = s->held - gone_units;
    return true;
}

static void reap(conc_state *s, uint32_t gone, uint64_t units)
{
    if (gone == 0)
        return;
    memmove(&s->l[0], &s->l[gone], (s->n - gone) * sizeof(lease));
    s->n -= gone;
    s->held -= (uint32_t)units;
}

static void fill_status(const weir_limit *lim, const conc_state *s, uint32_t first, uint64_t held,
                        int64_t now_us, weir_result *res)
{
    res->limit = lim->limit;
    res->remaining = held >= lim->limit ? 0 : lim->limit - held;
    if (s->n > first) {
        int64_t last = s->l[s->n - 1].expires_us;
        res->reset_after_us = last > now_us ? last - now_us : 0;
    }
}

weir_status weir__conc_decide(const weir_limit *lim, const void *in, void *out, int64_t now_us,
                              uint64_t hits, weir_result *res)
{
    const conc_state *s = in;
    uint32_t gone;
    uint64_t held;
    if (!read_state(lim, s, now_us, &gone, &held))
        return WEIR_EINVAL;
    uint64_t need = hits ? hits : 1;

    memset(res, 0, sizeof(*res));
    res->allowed = need <= lim->limit - held;
    if (res->allowed && hits > 0 && out) {
        conc_state *o = out;
        reap(o, gone, s->held - held);
        int64_t exp = sat_add(now_us, lim->window_us);
        if (o->n > 0)
            exp = max64(exp, o->l[o->n - 1].expires_us);
        o->next_id++;
        o->l[o->n] = (lease){o->next_id, exp, hits};
        o->n++;
        o->held += (uint32_t)hits;
        res->lease = o->next_id;
        fill_status(lim, o, 0, o->held, now_us, res);
        return WEIR_OK;
    }
    if (res->allowed && hits > 0) {
        /* a check: report the state as if the lease had been taken */
        held += hits;
        fill_status(lim, s, gone, held, now_us, res);
        int64_t exp = sat_add(now_us, lim->window_us);
        res->reset_after_us = max64(res->reset_after_us, exp - now_us);
        return WEIR_OK;
    }
    if (!res->allowed) {
        if (need > lim->limit) {
            res->retry_after_us = WEIR_NEVER;
        } else {
            /* The time the oldest leases free enough units. */
            uint64_t must_free = held + need - lim->limit, freed = 0;
            for (uint32_t i = gone; i < s->n; i++) {
                freed += s->l[i].units;
                if (freed >= must_free) {
                    /* saturating: a corrupt state may hold any expiry */
                    res->retry_after_us = sat_sub(s->l[i].expires_us, now_us);
                    break;
                }
            }
        }
    }
    fill_status(lim, s, gone, held, now_us, res);
    return WEIR_OK;
}

weir_status weir__conc_release(const weir_limit *lim, void *state, int64_t now_us, uint64_t id,
                               weir_result *res)
{
    conc_state *s = state;
    uint32_t gone;
    uint64_t held;
    if (!read_state(lim, s, now_us, &gone, &held))
        return WEIR_EINVAL;
    reap(s, gone, s->held - held);

    /* ids increase along the array: binary search */
    uint32_t lo = 0, hi = s->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (s->l[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo >= s->n || s->l[lo].id != id)
        return WEIR_ENOLEASE;
    if (s->l[lo].units > s->held)
        return WEIR_EINVAL;
    s->held -= (uint32_t)s->l[lo].units;
    memmove(&s->l[lo], &s->l[lo + 1], (s->n - lo - 1) * sizeof(lease));
    s->n--;

    memset(res, 0, sizeof(*res));
    res->allowed = true;
    fill_status(lim, s, 0, s->held, now_us, res);
    return WEIR_OK;
}

weir_status weir__conc_describe(const weir_limit *lim, const void *in, int64_t now_us,
                                weir_state_view *v)
{
    const conc_state *s = in;
    uint32_t gone;
    uint64_t held;
    if (!read_state(lim, s, now_us, &gone, &held))
        return WEIR_EINVAL;
    uint32_t live = s->n - gone;
    int64_t last = live ? s->l[s->n - 1].expires_us : now_us;
    weir__view_number(v, "held", (int64_t)held);
    weir__view_number(v, "leases", live);
    weir__view_number(v, "remaining", held >= lim->limit ? 0 : (int64_t)(lim->limit - held));
    weir__view_number(v, "last_id",
                      s->next_id > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)s->next_id);
    weir__view_number(v, "lease_timeout_us", lim->window_us);
    weir__view_number(v, "rest_in_us", last > now_us ? last - now_us : 0);
    weir__view_table(v, "leases", live, "id", "expires_us", "units");
    for (uint32_t i = 0; i < live; i++)
        if (weir__view_keeps(v, i))
            weir__view_row(v, (int64_t)s->l[gone + i].id, s->l[gone + i].expires_us,
                           (int64_t)s->l[gone + i].units);
    return WEIR_OK;
}
