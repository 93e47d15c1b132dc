/*
 * test_property.c - every algorithm against a slow, obviously correct
 * reference model on long random traces, and the contract every algorithm
 * shares: weir_check() never writes, the retry_after promise, compile
 * errors, names, garbage states and extreme inputs.
 *
 * The models are written from the semantics in weir/algo.h and the
 * formulas in the algorithms' header comments, in a different form from
 * lib/algo: the buckets count tokens (not missing ones) in 128-bit units of
 * 1/window, GCRA is the continuous-state leaky bucket of ITU-T I.371, the
 * fixed window keeps a map of window -> count, the sliding log keeps every
 * admitted timestamp, the sliding counter evaluates the estimate formula
 * and searches the retry time by bisection, the concurrency limiter keeps a
 * plain list of leases. Each trace prints its seed; replay a failure with
 * WEIR_TEST_SEED=<seed>.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fake.h"
#include "weir/weir.h"

__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

#define S ((int64_t)1000000) /* one second in microseconds */
#define YEAR (365 * 86400 * S)
#define OPS_PER_ALGORITHM 120000

static int64_t max_i64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static int64_t clamp0(int64_t now)
{
    return now < 0 ? 0 : now;
}

static int64_t ceil_u(u128 a, u128 b)
{
    return (int64_t)((a + b - 1) / b);
}

/* ------------------------------------------------------------------ models */

typedef struct model_ops {
    void *(*init)(const weir_limit_spec *spec);
    /* the verdict of a step at `now`; with `commit` the model takes it */
    void (*decide)(void *m, int64_t now, uint64_t hits, bool commit, weir_result *out);
    void (*fini)(void *m);
    /* concurrency only */
    weir_status (*release)(void *m, int64_t now, uint64_t id, weir_result *out);
    uint64_t (*pick_lease)(void *m, test_rng *rng);
} model_ops;

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    assert_non_null(p);
    return p;
}

static void *xrealloc(void *p, size_t size)
{
    void *q = realloc(p, size);
    assert_non_null(q);
    return q;
}

/* Buckets: the tokens held, times the window, so that L tokens per window
 * refill as exactly L units per microsecond. Full is burst * window. */
typedef struct bucket_model {
    bool shaper;
    u128 L, W, B;
    u128 tokens; /* at time `last` */
    int64_t last;
} bucket_model;

static void *bucket_init(const weir_limit_spec *spec)
{
    bucket_model *m = xcalloc(1, sizeof(*m));
    bool burst_is_limit =
        spec->algorithm == WEIR_ALGO_TOKEN_BUCKET || spec->algorithm == WEIR_ALGO_LEAKY_SHAPER;
    m->shaper = spec->algorithm == WEIR_ALGO_LEAKY_SHAPER;
    m->L = spec->limit;
    m->W = (u128)spec->window_us;
    m->B = spec->burst ? spec->burst : burst_is_limit ? spec->limit : 1;
    m->tokens = m->B * m->W;
    return m;
}

static void bucket_decide(void *mv, int64_t now, uint64_t hits, bool commit, weir_result *out)
{
    bucket_model *m = mv;
    memset(out, 0, sizeof(*out));
    out->limit = (uint64_t)m->B;
    /* a clock behind the last charge is taken as that time */
    int64_t t = max_i64(clamp0(now), m->last);
    u128 full = m->B * m->W;
    u128 avail = m->tokens + (u128)(t - m->last) * m->L;
    if (avail > full)
        avail = full;
    uint64_t need = hits ? hits : 1;
    out->allowed = need <= m->B && (u128)need * m->W <= avail;
    u128 after = avail;
    if (out->allowed && hits > 0) {
        after = avail - (u128)hits * m->W;
        /* the shaper's request waits for the tokens missing before it */
        if (m->shaper && avail < full)
            out->delay_us = ceil_u(full - avail, m->L) + (t - now);
        if (commit) {
            m->tokens = after;
            m->last = t;
        }
    } else if (!out->allowed) {
        out->retry_after_us =
            need > m->B ? WEIR_NEVER : ceil_u((u128)need * m->W - avail, m->L) + (t - now);
    }
    out->remaining = (uint64_t)(after / m->W);
    out->reset_after_us = after < full ? ceil_u(full - after, m->L) + (t - now) : 0;
}

/* GCRA as the continuous-state leaky bucket: content X (ns) drains one ns
 * per ns since the last conforming time; a request of cost h conforms when
 * X + h*T <= burst*T. */
typedef struct gcra_model {
    i128 T, B, X, lct;
} gcra_model;

static void *gcra_init(const weir_limit_spec *spec)
{
    gcra_model *m = xcalloc(1, sizeof(*m));
    i128 window_ns = (i128)spec->window_us * 1000;
    m->T = (window_ns + (i128)spec->limit - 1) / (i128)spec->limit;
    m->B = spec->burst ? spec->burst : 1;
    return m;
}

static void gcra_decide(void *mv, int64_t now, uint64_t hits, bool commit, weir_result *out)
{
    gcra_model *m = mv;
    memset(out, 0, sizeof(*out));
    out->limit = (uint64_t)m->B;
    int64_t c0 = clamp0(now);
    i128 t = (i128)c0 * 1000;
    i128 x = m->X - (t - m->lct); /* more content when the clock went back */
    if (x < 0)
        x = 0;
    i128 need = hits ? hits : 1;
    /* the time the key is at rest again must stay representable */
    bool never = need > m->B || t + x + need * m->T > INT64_MAX;
    out->allowed = !never && x + need * m->T <= m->B * m->T;
    i128 after = x;
    if (out->allowed && hits > 0) {
        after = x + (i128)hits * m->T;
        if (commit) {
            m->X = after;
            m->lct = t;
        }
    } else if (!out->allowed) {
        out->retry_after_us =
            never ? WEIR_NEVER : ceil_u((u128)(x + need * m->T - m->B * m->T), 1000) + (c0 - now);
    }
    out->remaining = after < m->B * m->T ? (uint64_t)((m->B * m->T - after) / m->T) : 0;
    out->reset_after_us = after > 0 ? ceil_u((u128)after, 1000) + (c0 - now) : 0;
}

/* Fixed window: a map window -> count. The window a request counts in is
 * its own, or the newest one charged if that is later. */
typedef struct fixed_model {
    uint64_t L;
    int64_t W;
    int64_t cur;
    int64_t *win;
    uint64_t *count;
    size_t n, cap;
} fixed_model;

static void *fixed_init(const weir_limit_spec *spec)
{
    fixed_model *m = xcalloc(1, sizeof(*m));
    m->L = spec->limit;
    m->W = spec->window_us;
    return m;
}

static uint64_t fixed_lookup(const fixed_model *m, int64_t w)
{
    for (size_t i = m->n; i-- > 0;) {
        if (m->win[i] == w)
            return m->count[i];
        if (m->win[i] < w)
            break;
    }
    return 0;
}

static void fixed_add(fixed_model *m, int64_t w, uint64_t hits)
{
    if (m->n > 0 && m->win[m->n - 1] == w) {
        m->count[m->n - 1] += hits;
        return;
    }
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 64;
        m->win = xrealloc(m->win, m->cap * sizeof(*m->win));
        m->count = xrealloc(m->count, m->cap * sizeof(*m->count));
    }
    m->win[m->n] = w;
    m->count[m->n] = hits;
    m->n++;
}

static void fixed_decide(void *mv, int64_t now, uint64_t hits, bool commit, weir_result *out)
{
    fixed_model *m = mv;
    memset(out, 0, sizeof(*out));
    out->limit = m->L;
    int64_t w = clamp0(now) / m->W;
    if (w < m->cur)
        w = m->cur;
    uint64_t count = fixed_lookup(m, w);
    uint64_t need = hits ? hits : 1;
    i128 end = (i128)(w + 1) * m->W;
    if (end > INT64_MAX)
        end = INT64_MAX;
    out->allowed = need <= m->L && count + need <= m->L;
    uint64_t after = count;
    if (out->allowed && hits > 0) {
        after += hits;
        if (commit) {
            fixed_add(m, w, hits);
            m->cur = w;
        }
    } else if (!out->allowed) {
        out->retry_after_us = need > m->L ? WEIR_NEVER : (int64_t)end - now;
    }
    out->remaining = m->L - after;
    out->reset_after_us = after ? (int64_t)end - now : 0;
}

static void fixed_fini(void *mv)
{
    fixed_model *m = mv;
    free(m->win);
    free(m->count);
    free(m);
}

/* Sliding log: every admitted timestamp (with its units), oldest first.
 * An entry at s counts against every request in [s, s + window). */
typedef struct log_entry {
    int64_t t;
    uint64_t units;
} log_entry;

typedef struct log_model {
    uint64_t L;
    int64_t W;
    log_entry *e;
    size_t head, n, cap; /* e[head..n) may still count */
} log_model;

static void *log_init(const weir_limit_spec *spec)
{
    log_model *m = xcalloc(1, sizeof(*m));
    m->L = spec->limit;
    m->W = spec->window_us;
    return m;
}

static void log_decide(void *mv, int64_t now, uint64_t hits, bool commit, weir_result *out)
{
    log_model *m = mv;
    memset(out, 0, sizeof(*out));
    out->limit = m->L;
    /* a clock behind the newest entry is taken as that time */
    int64_t t = clamp0(now);
    if (m->n > 0)
        t = max_i64(t, m->e[m->n - 1].t);
    uint64_t live = 0;
    size_t first = m->n;
    while (first > m->head && m->e[first - 1].t > t - m->W) {
        first--;
        live += m->e[first].units;
    }
    uint64_t need = hits ? hits : 1;
    out->allowed = need <= m->L && live + need <= m->L;
    uint64_t after = live;
    int64_t newest = m->n > 0 ? m->e[m->n - 1].t : 0;
    if (out->allowed && hits > 0) {
        after += hits;
        newest = t;
        if (commit) {
            if (m->n == m->cap) {
                /* drop entries that can never count again */
                while (m->head + 1 < m->n && m->e[m->head].t <= m->e[m->n - 1].t - m->W)
                    m->head++;
                if (m->n > 0)
                    memmove(m->e, m->e + m->head, (m->n - m->head) * sizeof(*m->e));
                m->n -= m->head;
                m->head = 0;
                if (m->n + 1 > m->cap / 2) {
                    m->cap = m->cap ? 2 * m->cap : 64;
                    m->e = xrealloc(m->e, m->cap * sizeof(*m->e));
                }
            }
            m->e[m->n++] = (log_entry){t, hits};
        }
    } else if (!out->allowed) {
        if (need > m->L) {
            out->retry_after_us = WEIR_NEVER;
        } else {
            /* the request fits once enough of the oldest units have left */
            uint64_t must_leave = live + need - m->L, left = 0;
            for (size_t i = first; i < m->n; i++) {
                left += m->e[i].units;
                if (left >= must_leave) {
                    out->retry_after_us = m->e[i].t + m->W - now;
                    break;
                }
            }
        }
    }
    out->remaining = m->L - after;
    out->reset_after_us = after > 0 ? newest + m->W - now : 0;
}

static void log_fini(void *mv)
{
    log_model *m = mv;
    free(m->e);
    free(m);
}

/* Sliding counter: counts per sub-window in a sorted map, the estimate
 * evaluated by its formula, the retry time found by bisection. */
typedef struct counter_model {
    uint64_t L;
    int64_t s;
    int64_t k;
    int64_t cur;
    int64_t *idx;
    uint64_t *count;
    size_t n, cap;
} counter_model;

static void *counter_init(const weir_limit_spec *spec)
{
    counter_model *m = xcalloc(1, sizeof(*m));
    m->L = spec->limit;
    m->k = spec->sub_windows > 1 ? spec->sub_windows : 1;
    m->s = spec->window_us / m->k;
    return m;
}

static uint64_t counter_at(const counter_model *m, int64_t i)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->idx[mid] < i)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < m->n && m->idx[lo] == i ? m->count[lo] : 0;
}

static void counter_add(counter_model *m, int64_t j, uint64_t hits)
{
    if (m->n > 0 && m->idx[m->n - 1] == j) {
        m->count[m->n - 1] += hits;
        return;
    }
    if (m->n == m->cap) {
        /* sub-windows before cur - k are never read again */
        size_t drop = 0;
        while (drop < m->n && m->idx[drop] < m->cur - m->k - 1)
            drop++;
        if (drop > 0) {
            memmove(m->idx, m->idx + drop, (m->n - drop) * sizeof(*m->idx));
            memmove(m->count, m->count + drop, (m->n - drop) * sizeof(*m->count));
            m->n -= drop;
        }
        if (m->n + 1 > m->cap / 2) {
            m->cap = m->cap ? 2 * m->cap : 64;
            m->idx = xrealloc(m->idx, m->cap * sizeof(*m->idx));
            m->count = xrealloc(m->count, m->cap * sizeof(*m->count));
        }
    }
    m->idx[m->n] = j;
    m->count[m->n] = hits;
    m->n++;
}

/* full: the k sub-windows ending with j; old: the one before them */
static void counter_sums(const counter_model *m, int64_t j, uint64_t *full, uint64_t *old)
{
    *full = 0;
    for (int64_t i = j - m->k + 1; i <= j; i++)
        *full += counter_at(m, i);
    *old = counter_at(m, j - m->k);
}

/* full + add + old * (s - e) / s <= L, exactly */
static bool counter_fits(const counter_model *m, uint64_t full, uint64_t old, int64_t e,
                         uint64_t add)
{
    return (u128)(full + add) * (u128)m->s + (u128)old * (u128)(m->s - e) <=
           (u128)m->L * (u128)m->s;
}

static void counter_decide(void *mv, int64_t now, uint64_t hits, bool commit, weir_result *out)
{
    counter_model *m = mv;
    memset(out, 0, sizeof(*out));
    out->limit = m->L;
    int64_t c0 = clamp0(now);
    int64_t j = c0 / m->s, e = c0 % m->s;
    if (j < m->cur) { /* behind the newest sub-window: at its start */
        j = m->cur;
        e = 0;
    }
    uint64_t full, old;
    counter_sums(m, j, &full, &old);
    uint64_t need = hits ? hits : 1;
    out->allowed = need <= m->L && counter_fits(m, full, old, e, need);
    bool charged = out->allowed && hits > 0;
    bool any = m->n > 0;
    int64_t newest = any ? m->idx[m->n - 1] : 0;
    if (charged) {
        full += hits;
        any = true;
        newest = j;
        if (commit) {
            counter_add(m, j, hits);
            m->cur = j;
        }
    } else if (!out->allowed) {
        if (need > m->L) {
            out->retry_after_us = WEIR_NEVER;
        } else {
            for (int64_t i = j;; i++) {
                uint64_t f, o;
                counter_sums(m, i, &f, &o);
                if (!counter_fits(m, f, o, m->s - 1, need))
                    continue;
                int64_t lo = i == j ? e : 0, hi = m->s - 1;
                while (lo < hi) {
                    int64_t mid = lo + (hi - lo) / 2;
                    if (counter_fits(m, f, o, mid, need))
                        hi = mid;
                    else
                        lo = mid + 1;
                }
                out->retry_after_us = i * m->s + lo - now;
                break;
            }
        }
    }
    i128 room = (i128)m->L * m->s - (i128)full * m->s - (i128)old * (m->s - e);
    out->remaining = room < 0 ? 0 : (uint64_t)(room / m->s);
    if (any) {
        int64_t rest = (newest + m->k + 1) * m->s;
        out->reset_after_us = rest > c0 ? rest - now : 0;
    }
}

static void counter_fini(void *mv)
{
    counter_model *m = mv;
    free(m->idx);
    free(m->count);
    free(m);
}

/* Concurrency: a list of leases. A lease counts until it is released or
 * its expiry passes (an expiry saturated at INT64_MAX never passes). */
typedef struct mlease {
    uint64_t id;
    int64_t expires;
    uint64_t units;
} mlease;

typedef struct conc_model {
    uint64_t L;
    int64_t W;
    uint64_t next_id;
    mlease *l;
    size_t n, cap;
} conc_model;

static void *conc_init(const weir_limit_spec *spec)
{
    conc_model *m = xcalloc(1, sizeof(*m));
    m->L = spec->limit;
    m->W = spec->window_us;
    m->cap = spec->limit + 1;
    m->l = xcalloc(m->cap, sizeof(*m->l));
    return m;
}

static bool lease_expired(const mlease *l, int64_t t)
{
    return l->expires <= t && l->expires < INT64_MAX;
}

static void conc_reap(conc_model *m, int64_t t)
{
    size_t k = 0;
    for (size_t i = 0; i < m->n; i++)
        if (!lease_expired(&m->l[i], t))
            m->l[k++] = m->l[i];
    m->n = k;
}

/* units held at t, and the latest expiry among them (0 when none) */
static uint64_t conc_held(const conc_model *m, int64_t t, int64_t *latest)
{
    uint64_t held = 0;
    *latest = 0;
    for (size_t i = 0; i < m->n; i++) {
        if (!lease_expired(&m->l[i], t)) {
            held += m->l[i].units;
            *latest = max_i64(*latest, m->l[i].expires);
        }
    }
    return held;
}

static void conc_decide(void *mv, int64_t now, uint64_t hits, bool commit, weir_result *out)
{
    conc_model *m = mv;
    memset(out, 0, sizeof(*out));
    out->limit = m->L;
    int64_t c0 = clamp0(now), latest;
    uint64_t held = conc_held(m, c0, &latest);
    uint64_t need = hits ? hits : 1;
    out->allowed = need <= m->L && held + need <= m->L;
    if (out->allowed && hits > 0) {
        /* never expires before a lease still held */
        int64_t exp = c0 > INT64_MAX - m->W ? INT64_MAX : c0 + m->W;
        exp = max_i64(exp, latest);
        out->remaining = m->L - held - hits;
        out->reset_after_us = exp - now;
        if (commit) {
            conc_reap(m, c0);
            m->l[m->n++] = (mlease){++m->next_id, exp, hits};
            out->lease = m->next_id;
        }
        return;
    }
    out->remaining = m->L - held;
    out->reset_after_us = held ? latest - now : 0;
    if (!out->allowed && need > m->L) {
        out->retry_after_us = WEIR_NEVER;
    } else if (!out->allowed) {
        /* the earliest expiry after which enough units are free */
        int64_t best = INT64_MAX;
        for (size_t i = 0; i < m->n; i++) {
            int64_t x = m->l[i].expires;
            if (lease_expired(&m->l[i], c0) || x == INT64_MAX)
                continue;
            int64_t ignored;
            if (conc_held(m, x, &ignored) + need <= m->L && x < best)
                best = x;
        }
        out->retry_after_us = best - now;
    }
}

static weir_status conc_release(void *mv, int64_t now, uint64_t id, weir_result *out)
{
    conc_model *m = mv;
    int64_t c0 = clamp0(now);
    conc_reap(m, c0);
    for (size_t i = 0; i < m->n; i++) {
        if (m->l[i].id != id)
            continue;
        memmove(&m->l[i], &m->l[i + 1], (m->n - i - 1) * sizeof(*m->l));
        m->n--;
        memset(out, 0, sizeof(*out));
        out->allowed = true;
        out->limit = m->L;
        int64_t latest;
        uint64_t held = conc_held(m, c0, &latest);
        out->remaining = m->L - held;
        out->reset_after_us = held ? latest - now : 0;
        return WEIR_OK;
    }
    return WEIR_ENOLEASE;
}

static uint64_t conc_pick_lease(void *mv, test_rng *rng)
{
    conc_model *m = mv;
    uint64_t r = rng_below(rng, 10);
    if (r < 6 && m->n > 0)
        return m->l[rng_below(rng, m->n)].id;
    if (r < 9)
        return rng_below(rng, m->next_id + 2);
    return rng_next(rng);
}

static void conc_fini(void *mv)
{
    conc_model *m = mv;
    free(m->l);
    free(m);
}

static const model_ops bucket_ops = {bucket_init, bucket_decide, free, NULL, NULL};
static const model_ops gcra_ops = {gcra_init, gcra_decide, free, NULL, NULL};
static const model_ops fixed_ops = {fixed_init, fixed_decide, fixed_fini, NULL, NULL};
static const model_ops log_ops = {log_init, log_decide, log_fini, NULL, NULL};
static const model_ops counter_ops = {counter_init, counter_decide, counter_fini, NULL, NULL};
static const model_ops conc_ops = {conc_init, conc_decide, conc_fini, conc_release,
                                   conc_pick_lease};

/* ------------------------------------------------------- random traces */

static uint64_t gcd_u(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* What weir_limit_compile() must answer, from the documented caps: the
 * exact constants (burst * window / gcd for a bucket, burst * ceil(window
 * in ns / limit) for GCRA) must fit 63 bits. */
static weir_status expected_compile(const weir_limit_spec *spec)
{
    if (spec->limit == 0)
        return WEIR_OK;
    u128 L = spec->limit, W = (u128)spec->window_us;
    switch (spec->algorithm) {
    case WEIR_ALGO_TOKEN_BUCKET:
    case WEIR_ALGO_LEAKY_SHAPER:
    case WEIR_ALGO_LEAKY_BUCKET: {
        bool burst_is_limit = spec->algorithm != WEIR_ALGO_LEAKY_BUCKET;
        u128 B = spec->burst ? spec->burst : burst_is_limit ? L : 1;
        u128 unit = W / gcd_u((uint64_t)L, (uint64_t)W);
        return B * unit > INT64_MAX ? WEIR_ERANGE : WEIR_OK;
    }
    case WEIR_ALGO_GCRA: {
        u128 B = spec->burst ? spec->burst : 1;
        u128 T = (W * 1000 + L - 1) / L;
        return B * T > INT64_MAX ? WEIR_ERANGE : WEIR_OK;
    }
    default:
        return WEIR_OK;
    }
}

static int64_t pick_window(test_rng *rng)
{
    static const int64_t windows[] = {1,        2,        3,    7,         10,
                                      100,      999,      1000, S,         30 * S,
                                      300 * S,  3600 * S, YEAR, 10 * YEAR, WEIR_MAX_WINDOW_US,
                                      86400 * S};
    uint64_t r = rng_below(rng, 20);
    if (r < 16)
        return windows[r];
    if (r < 19)
        return 1 + (int64_t)rng_below(rng, 10 * S);
    return 1 + (int64_t)rng_below(rng, WEIR_MAX_WINDOW_US);
}

static uint64_t pick_limit(test_rng *rng, weir_algorithm algo)
{
    uint64_t r = rng_below(rng, 100);
    if (r < 2)
        return 0; /* a ban */
    if (algo == WEIR_ALGO_SLIDING_LOG || algo == WEIR_ALGO_CONCURRENCY) {
        if (r < 70)
            return 1 + rng_below(rng, 8);
        if (r < 95)
            return 1 + rng_below(rng, 64);
        return 1 + rng_below(rng, 300);
    }
    if (r < 50)
        return 1 + rng_below(rng, 10);
    if (r < 75)
        return 1 + rng_below(rng, 1000);
    if (r < 88)
        return 1 + rng_below(rng, 1u << 20);
    if (r < 95)
        return 1 + rng_below(rng, WEIR_MAX_LIMIT);
    return WEIR_MAX_LIMIT;
}

static void random_spec(test_rng *rng, weir_algorithm algo, weir_limit_spec *spec)
{
    memset(spec, 0, sizeof(*spec));
    spec->algorithm = algo;
    spec->limit = pick_limit(rng, algo);
    spec->window_us = pick_window(rng);
    bool bursty = algo == WEIR_ALGO_TOKEN_BUCKET || algo == WEIR_ALGO_LEAKY_BUCKET ||
                  algo == WEIR_ALGO_LEAKY_SHAPER || algo == WEIR_ALGO_GCRA;
    if (bursty && spec->limit && rng_below(rng, 10) < 6) {
        uint64_t top = spec->limit < WEIR_MAX_LIMIT / 3 ? 3 * spec->limit : WEIR_MAX_LIMIT;
        spec->burst = rng_below(rng, 2) ? 1 + rng_below(rng, top) : 1 + rng_below(rng, 5);
    }
    if (algo == WEIR_ALGO_SLIDING_COUNTER) {
        static const uint32_t ks[] = {0, 1, 1, 2, 3, 4, 5, 8, 10, 16};
        uint32_t k = ks[rng_below(rng, sizeof(ks) / sizeof(ks[0]))];
        spec->sub_windows = k;
        if (k > 1) {
            int64_t s = spec->window_us / k;
            spec->window_us = (s > 0 ? s : 1 + (int64_t)rng_below(rng, 1000)) * k;
        }
    }
}

/* The largest cost that can ever be admitted: the burst or the limit. */
static uint64_t top_cost(const weir_limit_spec *spec)
{
    switch (spec->algorithm) {
    case WEIR_ALGO_TOKEN_BUCKET:
    case WEIR_ALGO_LEAKY_SHAPER:
        return spec->burst ? spec->burst : spec->limit;
    case WEIR_ALGO_GCRA:
    case WEIR_ALGO_LEAKY_BUCKET:
        return spec->burst ? spec->burst : 1;
    default:
        return spec->limit;
    }
}

static uint64_t next_hits(test_rng *rng, uint64_t top)
{
    if (top == 0)
        top = 1;
    uint64_t r = rng_below(rng, 100);
    if (r < 12)
        return 0;
    if (r < 55)
        return 1;
    if (r < 70)
        return 1 + rng_below(rng, top < 4 ? top : 4);
    if (r < 82)
        return 1 + rng_below(rng, top);
    if (r < 87)
        return top;
    if (r < 93)
        return top + 1 + rng_below(rng, 3);
    if (r < 96)
        return UINT64_MAX;
    if (r < 98)
        return rng_next(rng);
    return 2;
}

/* Gaps of zero, around the request spacing, across window and sub-window
 * boundaries, long silences, and steps backwards (now and then below 0). */
static int64_t next_time(test_rng *rng, int64_t now, int64_t window, int64_t period, uint64_t limit,
                         int64_t time_cap)
{
    int64_t spacing = window / (int64_t)(limit ? limit : 1);
    if (spacing < 1)
        spacing = 1;
    uint64_t r = rng_below(rng, 100);
    int64_t next;
    if (r < 20)
        next = now;
    else if (r < 45)
        next = now + (int64_t)rng_below(rng, (uint64_t)spacing * 2 + 1);
    else if (r < 57)
        next = now + (int64_t)rng_below(rng, (uint64_t)window + 1);
    else if (r < 67) {
        /* just before, at or just after the next boundary */
        int64_t base = clamp0(now);
        int64_t edge = (base / period + 1) * period;
        next = edge - 1 + (int64_t)rng_below(rng, 3);
    } else if (r < 72)
        next = now + (rng_below(rng, 2) ? 1 : -1);
    else if (r < 77)
        next = now + (int64_t)rng_below(rng, (uint64_t)window * 3 + 1);
    else if (r < 87)
        next = now - (int64_t)rng_below(rng, (uint64_t)spacing * 2 + 1);
    else if (r < 91)
        next = now - (int64_t)rng_below(rng, (uint64_t)window + 1);
    else
        next = now + (int64_t)rng_below(rng, (uint64_t)spacing * 4 + 1);
    if (next > time_cap)
        next = (int64_t)rng_below(rng, (uint64_t)window); /* a jump far back */
    if (next < -1000)
        next = -(int64_t)rng_below(rng, 1000);
    return next;
}

/* ------------------------------------------------------------- driver */

typedef struct trace_ctx {
    const char *name;
    uint64_t seed;
    const weir_limit_spec *spec;
    int round, op;
    int64_t hist_now[8];
    uint64_t hist_hits[8];
    char hist_kind[8];
} trace_ctx;

static void note(trace_ctx *c, char kind, int64_t now, uint64_t hits)
{
    int i = c->op % 8;
    c->hist_kind[i] = kind;
    c->hist_now[i] = now;
    c->hist_hits[i] = hits;
}

static void print_result(const char *label, const weir_result *r)
{
    print_error("  %s allowed=%d limit=%llu remaining=%llu retry=%lld reset=%lld delay=%lld "
                "lease=%llu\n",
                label, r->allowed, (unsigned long long)r->limit, (unsigned long long)r->remaining,
                (long long)r->retry_after_us, (long long)r->reset_after_us, (long long)r->delay_us,
                (unsigned long long)r->lease);
}

static void report(const trace_ctx *c, const char *what)
{
    print_error("%s: %s (seed %llu, round %d, op %d)\n  spec %s limit=%llu window=%lld "
                "burst=%llu sub_windows=%u\n",
                c->name, what, (unsigned long long)c->seed, c->round, c->op,
                weir_algorithm_name(c->spec->algorithm), (unsigned long long)c->spec->limit,
                (long long)c->spec->window_us, (unsigned long long)c->spec->burst,
                c->spec->sub_windows);
    for (int k = 7; k >= 0; k--) {
        int i = ((c->op - k) % 8 + 8) % 8;
        if (c->op - k >= 0)
            print_error("  op %d: %c now=%lld hits/lease=%llu\n", c->op - k, c->hist_kind[i],
                        (long long)c->hist_now[i], (unsigned long long)c->hist_hits[i]);
    }
}

static void expect_same(const trace_ctx *c, const char *what, const weir_result *got,
                        const weir_result *want)
{
    if (got->allowed == want->allowed && got->limit == want->limit &&
        got->remaining == want->remaining && got->retry_after_us == want->retry_after_us &&
        got->reset_after_us == want->reset_after_us && got->delay_us == want->delay_us &&
        got->lease == want->lease)
        return;
    report(c, what);
    print_result("got ", got);
    print_result("want", want);
    fail();
}

static void expect_true(const trace_ctx *c, bool ok, const char *what)
{
    if (ok)
        return;
    report(c, what);
    fail();
}

/* The retry_after promise: waiting exactly retry_after_us is enough and,
 * where the retry time is exact, one microsecond less is not. */
static void check_retry_promise(trace_ctx *c, const weir_limit *lim, const void *state, int64_t now,
                                uint64_t hits, const weir_result *denied, bool exact)
{
    if (denied->allowed || denied->retry_after_us == WEIR_NEVER)
        return;
    expect_true(c, denied->retry_after_us > 0, "a denial with retry_after <= 0");
    if (denied->retry_after_us > INT64_MAX / 4 - now)
        return;
    int64_t at = now + denied->retry_after_us;
    /* GCRA counts in nanoseconds: past INT64_MAX ns its clock saturates */
    if (lim->algorithm == WEIR_ALGO_GCRA && at > INT64_MAX / 1000)
        return;
    weir_result r;
    assert_int_equal(weir_check(lim, state, at, hits, &r), WEIR_OK);
    expect_true(c, r.allowed, "not admitted at now + retry_after");
    if (!exact)
        return;
    assert_int_equal(weir_check(lim, state, at - 1, hits, &r), WEIR_OK);
    expect_true(c, !r.allowed, "already admitted at now + retry_after - 1");
}

static void run_ban(trace_ctx *c, const weir_limit *lim, test_rng *rng)
{
    uint64_t state[2] = {0, 0};
    weir_result want;
    memset(&want, 0, sizeof(want));
    want.retry_after_us = WEIR_NEVER;
    for (c->op = 0; c->op < 50; c->op++) {
        int64_t now = (int64_t)rng_below(rng, 1000000) - 1000;
        uint64_t hits = next_hits(rng, 1);
        note(c, 's', now, hits);
        weir_result r;
        assert_int_equal(weir_step(lim, state, now, hits, &r), WEIR_OK);
        expect_same(c, "ban", &r, &want);
        assert_int_equal(weir_check(lim, state, now, hits, &r), WEIR_OK);
        expect_same(c, "ban (check)", &r, &want);
        if (lim->algorithm == WEIR_ALGO_CONCURRENCY)
            assert_int_equal(weir_release(lim, state, now, 1, &r), WEIR_ENOLEASE);
    }
}

/* Runs random rounds against the model until `total` operations. */
static void run_property(const char *name, weir_algorithm algo, const model_ops *ops, bool exact,
                         int64_t time_cap, int total)
{
    uint64_t seed = test_seed(name);
    test_rng rng = {seed};
    trace_ctx c = {.name = name, .seed = seed};
    int done = 0;
    for (c.round = 0; done < total; c.round++) {
        weir_limit_spec spec;
        random_spec(&rng, algo, &spec);
        c.spec = &spec;
        c.op = 0;
        weir_limit lim;
        weir_status st = weir_limit_compile(&spec, &lim);
        if (st != expected_compile(&spec)) {
            report(&c, "weir_limit_compile()");
            print_error("  got %s, want %s\n", weir_status_name(st),
                        weir_status_name(expected_compile(&spec)));
            fail();
        }
        if (st != WEIR_OK)
            continue;
        if (spec.limit == 0) {
            run_ban(&c, &lim, &rng);
            continue;
        }
        /* keep GCRA's TAT well inside int64 ns for the whole trace */
        if (algo == WEIR_ALGO_GCRA && lim.capacity > INT64_MAX / 2)
            continue;

        size_t size = weir_state_size(&lim);
        void *state = xcalloc(1, size);
        void *before = xcalloc(1, size);
        void *m = ops->init(&spec);
        int64_t period = spec.window_us / (spec.sub_windows > 1 ? spec.sub_windows : 1);
        uint64_t top = top_cost(&spec);
        int64_t now = (int64_t)rng_below(&rng, 3) == 0 ? 0 : (int64_t)rng_below(&rng, 1u << 30);
        int ops_here = 300 + (int)rng_below(&rng, 3000);
        for (c.op = 0; c.op < ops_here; c.op++, done++) {
            now = next_time(&rng, now, spec.window_us, period, spec.limit, time_cap);
            if (ops->release && rng_below(&rng, 4) == 0) {
                uint64_t id = ops->pick_lease(m, &rng);
                note(&c, 'r', now, id);
                weir_result got, want;
                memset(&got, 0, sizeof(got));
                memset(&want, 0, sizeof(want));
                weir_status gs = weir_release(&lim, state, now, id, &got);
                weir_status ws = ops->release(m, now, id, &want);
                if (gs != ws) {
                    report(&c, "weir_release() status");
                    print_error("  got %s, want %s\n", weir_status_name(gs), weir_status_name(ws));
                    fail();
                }
                if (gs == WEIR_OK)
                    expect_same(&c, "weir_release()", &got, &want);
                continue;
            }
            uint64_t hits = next_hits(&rng, top);
            weir_result got, want;

            note(&c, 'c', now, hits);
            memcpy(before, state, size);
            assert_int_equal(weir_check(&lim, state, now, hits, &got), WEIR_OK);
            expect_true(&c, memcmp(before, state, size) == 0, "weir_check() wrote the state");
            ops->decide(m, now, hits, false, &want);
            expect_same(&c, "weir_check()", &got, &want);
            check_retry_promise(&c, &lim, state, now, hits, &got, exact);

            if (rng_below(&rng, 8) == 0)
                continue; /* a check alone */
            note(&c, 's', now, hits);
            assert_int_equal(weir_step(&lim, state, now, hits, &got), WEIR_OK);
            ops->decide(m, now, hits, true, &want);
            expect_same(&c, "weir_step()", &got, &want);
            if (!got.allowed || hits == 0)
                expect_true(&c, memcmp(before, state, size) == 0,
                            "a denial or a peek changed the state");
        }
        ops->fini(m);
        free(before);
        free(state);
    }
}

#define TIME_CAP ((int64_t)9000000000000000) /* ~285 years of microseconds */
#define GCRA_TIME_CAP ((int64_t)4000000000000000)

static void token_bucket_matches_model(void **unused)
{
    (void)unused;
    run_property("token_bucket", WEIR_ALGO_TOKEN_BUCKET, &bucket_ops, true, TIME_CAP,
                 OPS_PER_ALGORITHM);
}

static void leaky_bucket_matches_model(void **unused)
{
    (void)unused;
    run_property("leaky_bucket", WEIR_ALGO_LEAKY_BUCKET, &bucket_ops, true, TIME_CAP,
                 OPS_PER_ALGORITHM);
}

static void leaky_shaper_matches_model(void **unused)
{
    (void)unused;
    run_property("leaky_bucket_shaper", WEIR_ALGO_LEAKY_SHAPER, &bucket_ops, true, TIME_CAP,
                 OPS_PER_ALGORITHM);
}

static void gcra_matches_model(void **unused)
{
    (void)unused;
    run_property("gcra", WEIR_ALGO_GCRA, &gcra_ops, true, GCRA_TIME_CAP, OPS_PER_ALGORITHM);
}

static void fixed_window_matches_model(void **unused)
{
    (void)unused;
    run_property("fixed_window", WEIR_ALGO_FIXED_WINDOW, &fixed_ops, true, TIME_CAP,
                 OPS_PER_ALGORITHM);
}

static void sliding_log_matches_model(void **unused)
{
    (void)unused;
    run_property("sliding_window_log", WEIR_ALGO_SLIDING_LOG, &log_ops, true, TIME_CAP,
                 OPS_PER_ALGORITHM);
}

static void sliding_counter_matches_model(void **unused)
{
    (void)unused;
    run_property("sliding_window_counter", WEIR_ALGO_SLIDING_COUNTER, &counter_ops, true, TIME_CAP,
                 OPS_PER_ALGORITHM);
}

static void concurrency_matches_model(void **unused)
{
    (void)unused;
    /* retry_after is an upper bound here (releases may come earlier) */
    run_property("concurrency", WEIR_ALGO_CONCURRENCY, &conc_ops, false, TIME_CAP,
                 OPS_PER_ALGORITHM);
}

/* ------------------------------------------------- the shared contract */

static const weir_algorithm all_algorithms[] = {
#define ALGO_ROW_(e, num, name, var) WEIR_ALGO_##e,
    WEIR_ALGORITHM_MAP(ALGO_ROW_)
#undef ALGO_ROW_
};

static void names_round_trip(void **unused)
{
    (void)unused;
    static const char *const names[] = {
#define ALGO_NAME_(e, num, name, var) name,
        WEIR_ALGORITHM_MAP(ALGO_NAME_)
#undef ALGO_NAME_
    };
    assert_int_equal(sizeof(all_algorithms) / sizeof(all_algorithms[0]), WEIR_ALGORITHM_COUNT);
    for (int i = 0; i < WEIR_ALGORITHM_COUNT; i++) {
        weir_algorithm a = all_algorithms[i];
        assert_int_equal(a, i + 1);
        const char *name = weir_algorithm_name(a);
        assert_non_null(name);
        assert_string_equal(name, names[i]);
        weir_algorithm back = (weir_algorithm)0;
        assert_int_equal(weir_algorithm_parse(name, &back), WEIR_OK);
        assert_int_equal(back, a);
        /* case-insensitive */
        char upper[64];
        size_t n = strlen(name);
        assert_true(n < sizeof(upper));
        for (size_t k = 0; k <= n; k++)
            upper[k] = (char)(name[k] >= 'a' && name[k] <= 'z' ? name[k] - 'a' + 'A' : name[k]);
        back = (weir_algorithm)0;
        assert_int_equal(weir_algorithm_parse(upper, &back), WEIR_OK);
        assert_int_equal(back, a);
    }
    assert_null(weir_algorithm_name((weir_algorithm)0));
    assert_null(weir_algorithm_name((weir_algorithm)(WEIR_ALGORITHM_COUNT + 1)));
    assert_null(weir_algorithm_name((weir_algorithm)-1));
    weir_algorithm out = WEIR_ALGO_GCRA;
    const char *bad[] = {"",      "token",          "token_bucket ",       " gcra",
                         "gcra2", "sliding_window", "leaky_bucket_shaperx"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(weir_algorithm_parse(bad[i], &out), WEIR_EINVAL);
    assert_int_equal(out, WEIR_ALGO_GCRA); /* untouched on failure */
    assert_int_equal(weir_algorithm_parse(NULL, &out), WEIR_EINVAL);
    assert_int_equal(weir_algorithm_parse("gcra", NULL), WEIR_EINVAL);
}

static void expect_compile(const weir_limit_spec *spec, weir_status want)
{
    weir_limit lim;
    memset(&lim, 0x5a, sizeof(lim));
    weir_limit saved = lim;
    weir_status got = weir_limit_compile(spec, &lim);
    if (got != want) {
        print_error("%s limit=%llu window=%lld burst=%llu sub_windows=%u: got %s, want %s\n",
                    weir_algorithm_name(spec->algorithm), (unsigned long long)spec->limit,
                    (long long)spec->window_us, (unsigned long long)spec->burst, spec->sub_windows,
                    weir_status_name(got), weir_status_name(want));
        fail();
    }
    if (got != WEIR_OK)
        assert_memory_equal(&lim, &saved, sizeof(lim)); /* written only on success */
}

static void compile_errors(void **unused)
{
    (void)unused;
    weir_limit lim;
    weir_limit_spec spec = {.algorithm = WEIR_ALGO_FIXED_WINDOW, .limit = 1, .window_us = S};
    assert_int_equal(weir_limit_compile(NULL, &lim), WEIR_EINVAL);
    assert_int_equal(weir_limit_compile(&spec, NULL), WEIR_EINVAL);
    const int unknown[] = {0, -1, WEIR_ALGORITHM_COUNT + 1, 99, INT32_MIN};
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        spec.algorithm = (weir_algorithm)unknown[i];
        expect_compile(&spec, WEIR_EINVAL);
    }
    for (int i = 0; i < WEIR_ALGORITHM_COUNT; i++) {
        weir_algorithm a = all_algorithms[i];
        weir_limit_spec s = {.algorithm = a, .limit = 1, .window_us = S};
        expect_compile(&s, WEIR_OK);
        s.window_us = 0;
        expect_compile(&s, WEIR_EINVAL);
        s.window_us = -1;
        expect_compile(&s, WEIR_EINVAL);
        s.window_us = INT64_MIN;
        expect_compile(&s, WEIR_EINVAL);
        s.window_us = WEIR_MAX_WINDOW_US + 1;
        expect_compile(&s, WEIR_ERANGE);
        s.window_us = INT64_MAX;
        expect_compile(&s, WEIR_ERANGE);
        s.window_us = WEIR_MAX_WINDOW_US;
        expect_compile(&s, WEIR_OK);
        s.window_us = 1;
        expect_compile(&s, WEIR_OK);
        s.limit = (uint64_t)WEIR_MAX_LIMIT + 1;
        expect_compile(&s, WEIR_ERANGE);
        s.limit = UINT64_MAX;
        expect_compile(&s, WEIR_ERANGE);
        s.limit = 1;
        s.burst = (uint64_t)WEIR_MAX_LIMIT + 1;
        expect_compile(&s, WEIR_ERANGE);
        s.burst = UINT64_MAX;
        expect_compile(&s, WEIR_ERANGE);
        s.burst = 0;
        s.limit = 0; /* a ban compiles for every algorithm */
        expect_compile(&s, WEIR_OK);
        assert_int_equal(weir_limit_compile(&s, &lim), WEIR_OK);
        assert_int_equal(lim.burst, 0);
    }

    /* per-algorithm caps */
    spec = (weir_limit_spec){.algorithm = WEIR_ALGO_SLIDING_LOG, .window_us = S};
    spec.limit = WEIR_MAX_LOG_ENTRIES;
    expect_compile(&spec, WEIR_OK);
    spec.limit = WEIR_MAX_LOG_ENTRIES + 1;
    expect_compile(&spec, WEIR_ERANGE);
    spec = (weir_limit_spec){.algorithm = WEIR_ALGO_CONCURRENCY, .window_us = S};
    spec.limit = WEIR_MAX_LEASES;
    expect_compile(&spec, WEIR_OK);
    spec.limit = WEIR_MAX_LEASES + 1;
    expect_compile(&spec, WEIR_ERANGE);
    spec = (weir_limit_spec){.algorithm = WEIR_ALGO_SLIDING_COUNTER, .limit = 5};
    spec.window_us = WEIR_MAX_SUB_WINDOWS;
    spec.sub_windows = WEIR_MAX_SUB_WINDOWS;
    expect_compile(&spec, WEIR_OK);
    spec.window_us = 2 * (WEIR_MAX_SUB_WINDOWS + 1);
    spec.sub_windows = WEIR_MAX_SUB_WINDOWS + 1;
    expect_compile(&spec, WEIR_ERANGE);
    spec.window_us = 10;
    spec.sub_windows = 3;
    expect_compile(&spec, WEIR_EINVAL);
    spec.sub_windows = 20;
    expect_compile(&spec, WEIR_EINVAL);
    /* burst * window / gcd(limit, window) past 63 bits */
    spec = (weir_limit_spec){.algorithm = WEIR_ALGO_TOKEN_BUCKET,
                             .limit = 1,
                             .window_us = WEIR_MAX_WINDOW_US,
                             .burst = 2922};
    expect_compile(&spec, WEIR_OK);
    spec.burst = 2923;
    expect_compile(&spec, WEIR_ERANGE);
    spec.algorithm = WEIR_ALGO_LEAKY_SHAPER;
    expect_compile(&spec, WEIR_ERANGE);
    spec.algorithm = WEIR_ALGO_LEAKY_BUCKET;
    expect_compile(&spec, WEIR_ERANGE);
    spec.limit = WEIR_MAX_LIMIT; /* default burst = limit: 2^32 * W / 15 */
    spec.burst = 0;
    spec.algorithm = WEIR_ALGO_TOKEN_BUCKET;
    expect_compile(&spec, WEIR_ERANGE);
    /* GCRA: burst * ceil(window_ns / limit) past 63 bits */
    spec = (weir_limit_spec){
        .algorithm = WEIR_ALGO_GCRA, .limit = 1, .window_us = WEIR_MAX_WINDOW_US, .burst = 2};
    expect_compile(&spec, WEIR_OK);
    spec.burst = 3;
    expect_compile(&spec, WEIR_ERANGE);

    /* the defaults */
    const struct {
        weir_algorithm a;
        uint64_t burst;
    } defaults[] = {
        {WEIR_ALGO_TOKEN_BUCKET, 7}, {WEIR_ALGO_LEAKY_SHAPER, 7},    {WEIR_ALGO_GCRA, 1},
        {WEIR_ALGO_LEAKY_BUCKET, 1}, {WEIR_ALGO_FIXED_WINDOW, 7},    {WEIR_ALGO_SLIDING_LOG, 7},
        {WEIR_ALGO_CONCURRENCY, 7},  {WEIR_ALGO_SLIDING_COUNTER, 7},
    };
    for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++) {
        weir_limit_spec s = {.algorithm = defaults[i].a, .limit = 7, .window_us = S};
        assert_int_equal(weir_limit_compile(&s, &lim), WEIR_OK);
        assert_int_equal(lim.burst, defaults[i].burst);
        assert_int_equal(lim.algorithm, defaults[i].a);
        assert_int_equal(lim.limit, 7);
        assert_int_equal(lim.window_us, S);
        assert_int_equal(lim.sub_windows, defaults[i].a == WEIR_ALGO_SLIDING_COUNTER ? 1 : 0);
    }
}

static void null_arguments(void **unused)
{
    (void)unused;
    for (int i = 0; i < WEIR_ALGORITHM_COUNT; i++) {
        weir_limit_spec spec = {.algorithm = all_algorithms[i], .limit = 2, .window_us = S};
        weir_limit lim;
        assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_OK);
        uint64_t *st = xcalloc(1, weir_state_size(&lim) + 8);
        weir_result r;
        assert_int_equal(weir_step(NULL, st, 0, 1, &r), WEIR_EINVAL);
        assert_int_equal(weir_step(&lim, NULL, 0, 1, &r), WEIR_EINVAL);
        assert_int_equal(weir_step(&lim, st, 0, 1, NULL), WEIR_EINVAL);
        assert_int_equal(weir_check(NULL, st, 0, 1, &r), WEIR_EINVAL);
        assert_int_equal(weir_check(&lim, NULL, 0, 1, &r), WEIR_EINVAL);
        assert_int_equal(weir_check(&lim, st, 0, 1, NULL), WEIR_EINVAL);
        assert_int_equal(weir_step(&lim, (char *)st + 4, 0, 1, &r), WEIR_EINVAL);
        weir_limit bad = lim;
        bad.algorithm = (weir_algorithm)42;
        assert_int_equal(weir_step(&bad, st, 0, 1, &r), WEIR_EINVAL);
        assert_int_equal(weir_release(&bad, st, 0, 1, &r), WEIR_EALGO);
        free(st);
    }
    assert_int_equal(weir_state_size(NULL), 0);
}

/* A state the functions never produced: every call returns WEIR_OK or
 * WEIR_EINVAL (plus WEIR_ENOLEASE/WEIR_EALGO for releases), never crashes,
 * never overflows (the sanitizers watch), and leaves res alone on error. */
static int64_t garbage_word(test_rng *rng, int64_t scale)
{
    switch (rng_below(rng, 10)) {
    case 0:
        return 0;
    case 1:
        return -1;
    case 2:
        return INT64_MAX;
    case 3:
        return INT64_MIN;
    case 4:
        return (int64_t)rng_below(rng, 8);
    case 5:
        return (int64_t)rng_below(rng, (uint64_t)scale * 4 + 1);
    case 6:
        return -(int64_t)rng_below(rng, (uint64_t)scale * 4 + 1);
    case 7:
        return INT64_MAX - (int64_t)rng_below(rng, 1000);
    default:
        return (int64_t)rng_next(rng);
    }
}

static void garbage_states(void **unused)
{
    (void)unused;
    uint64_t seed = test_seed("garbage_states");
    test_rng rng = {seed};
    for (int round = 0; round < 3000; round++) {
        weir_limit_spec spec;
        random_spec(&rng, all_algorithms[rng_below(&rng, WEIR_ALGORITHM_COUNT)], &spec);
        if (spec.limit > 64)
            spec.limit = 1 + spec.limit % 64;
        if (spec.algorithm == WEIR_ALGO_SLIDING_COUNTER && spec.sub_windows > 1)
            spec.window_us -= spec.window_us % spec.sub_windows;
        weir_limit lim;
        if (weir_limit_compile(&spec, &lim) != WEIR_OK)
            continue;
        size_t size = weir_state_size(&lim);
        size_t words = (size + 7) / 8;
        int64_t *st = xcalloc(words, 8);
        for (size_t w = 0; w < words; w++)
            st[w] = garbage_word(&rng, spec.window_us);
        /* often make the header plausible so the deeper code runs */
        if (rng_below(&rng, 2)) {
            uint32_t a = (uint32_t)rng_below(&rng, spec.limit + 2);
            uint32_t b = (uint32_t)rng_below(&rng, spec.limit + 2);
            if (spec.algorithm == WEIR_ALGO_SLIDING_LOG) {
                memcpy(&st[0], &a, 4);
                memcpy((char *)st + 4, &b, 4);
            } else if (spec.algorithm == WEIR_ALGO_CONCURRENCY) {
                memcpy((char *)st + 8, &a, 4);
                memcpy((char *)st + 12, &b, 4);
            } else if (spec.algorithm == WEIR_ALGO_SLIDING_COUNTER) {
                st[0] = (int64_t)rng_below(&rng, 100);
                uint32_t *c = (uint32_t *)&st[1];
                for (size_t i = 0; i < (size - 8) / 4; i++)
                    c[i] = (uint32_t)rng_below(&rng, spec.limit + 1);
            } else {
                st[0] = (int64_t)rng_below(&rng, 1000);
                st[1] = (int64_t)rng_below(&rng, 1000);
            }
        }
        for (int k = 0; k < 8; k++) {
            int64_t now = garbage_word(&rng, spec.window_us);
            uint64_t hits = next_hits(&rng, top_cost(&spec));
            weir_result r;
            memset(&r, 0x5a, sizeof(r));
            weir_result saved = r;
            weir_status st1 = weir_check(&lim, st, now, hits, &r);
            assert_true(st1 == WEIR_OK || st1 == WEIR_EINVAL);
            if (st1 != WEIR_OK)
                assert_memory_equal(&r, &saved, sizeof(r));
            weir_status st2 = weir_step(&lim, st, now, hits, &r);
            assert_true(st2 == WEIR_OK || st2 == WEIR_EINVAL);
            if (st1 == WEIR_OK && st2 == WEIR_OK && r.allowed)
                assert_true(r.remaining <= r.limit);
            memset(&r, 0x5a, sizeof(r));
            weir_status st3 = weir_release(&lim, st, now, (uint64_t)garbage_word(&rng, 8), &r);
            if (spec.algorithm == WEIR_ALGO_CONCURRENCY)
                assert_true(st3 == WEIR_OK || st3 == WEIR_EINVAL || st3 == WEIR_ENOLEASE);
            else
                assert_int_equal(st3, WEIR_EALGO);
            if (st3 != WEIR_OK)
                assert_memory_equal(&r, &saved, sizeof(r));
        }
        free(st);
    }
}

/* Times at the ends of int64, costs at the ends of uint64: sane answers,
 * no overflow, and a clock stalled at INT64_MAX admits no more than the
 * key's capacity. */
static void extreme_inputs(void **unused)
{
    (void)unused;
    const int64_t nows[] = {0,
                            1,
                            -1,
                            INT64_MIN,
                            INT64_MIN + 1,
                            INT64_MAX,
                            INT64_MAX,
                            INT64_MAX,
                            INT64_MAX - 1,
                            INT64_MAX / 1000,
                            0,
                            INT64_MAX / 1000 + 1};
    const uint64_t limits[] = {1, 3, WEIR_MAX_LIMIT};
    const int64_t windows[] = {1, 1000, WEIR_MAX_WINDOW_US};
    for (int a = 0; a < WEIR_ALGORITHM_COUNT; a++) {
        for (size_t li = 0; li < 3; li++) {
            for (size_t wi = 0; wi < 3; wi++) {
                weir_limit_spec spec = {
                    .algorithm = all_algorithms[a], .limit = limits[li], .window_us = windows[wi]};
                if ((spec.algorithm == WEIR_ALGO_SLIDING_LOG ||
                     spec.algorithm == WEIR_ALGO_CONCURRENCY) &&
                    spec.limit > 64)
                    continue;
                weir_limit lim;
                if (weir_limit_compile(&spec, &lim) != WEIR_OK)
                    continue;
                uint64_t *st = xcalloc(1, weir_state_size(&lim));
                const uint64_t costs[] = {
                    0, 1, lim.burst, lim.burst + 1, UINT64_MAX, UINT64_MAX / 2};
                uint64_t admitted_at_max = 0, limit_seen = 0;
                for (size_t ni = 0; ni < sizeof(nows) / sizeof(nows[0]); ni++) {
                    for (size_t ci = 0; ci < sizeof(costs) / sizeof(costs[0]); ci++) {
                        weir_result r;
                        assert_int_equal(weir_check(&lim, st, nows[ni], costs[ci], &r), WEIR_OK);
                        assert_int_equal(weir_step(&lim, st, nows[ni], costs[ci], &r), WEIR_OK);
                        assert_true(r.retry_after_us >= 0 || r.retry_after_us == WEIR_NEVER);
                        assert_true(r.reset_after_us >= 0);
                        assert_true(r.delay_us >= 0);
                        assert_true(r.remaining <= r.limit);
                        if (r.allowed)
                            assert_int_equal(r.retry_after_us, 0);
                        if (nows[ni] == INT64_MAX && r.allowed)
                            admitted_at_max += costs[ci];
                        limit_seen = r.limit;
                        if (r.lease)
                            assert_int_equal(weir_release(&lim, st,
                                                          nows[ni] == INT64_MAX ? INT64_MAX : 0,
                                                          r.lease, &r),
                                             WEIR_OK);
                    }
                }
                /* stalled at INT64_MAX: never more than the capacity (leases
                 * were released, so the concurrency limiter is exempt) */
                if (spec.algorithm != WEIR_ALGO_CONCURRENCY)
                    assert_true(admitted_at_max <= limit_seen);
                free(st);
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(token_bucket_matches_model),
        cmocka_unit_test(leaky_bucket_matches_model),
        cmocka_unit_test(leaky_shaper_matches_model),
        cmocka_unit_test(gcra_matches_model),
        cmocka_unit_test(fixed_window_matches_model),
        cmocka_unit_test(sliding_log_matches_model),
        cmocka_unit_test(sliding_counter_matches_model),
        cmocka_unit_test(concurrency_matches_model),
        cmocka_unit_test(names_round_trip),
        cmocka_unit_test(compile_errors),
        cmocka_unit_test(null_arguments),
        cmocka_unit_test(garbage_states),
        cmocka_unit_test(extreme_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
