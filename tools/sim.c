/*
 * sim.c - the core of `weir sim`: replays a trace through every algorithm
 * with the same limit (the command line is in sim_cli.c).
 *
 * Each key has one state per algorithm, all decided on every request, and
 * each verdict is compared with the exact sliding log's on that request.
 * The peak per window is computed from the admitted times themselves, not
 * from any algorithm's bookkeeping. Invariant: the output depends only on
 * the arguments (and the trace file): no clock, no unseeded randomness, no
 * floating point.
 */
#include "sim.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__extension__ typedef unsigned __int128 u128;

#define US_PER_S 1000000
#define MILLI 1000u

static int64_t sat_add(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

/* ------------------------------------------------------------------------ */
/* Durations                                                                */

typedef struct unit_row {
    const char *name;
    int64_t us;
} unit_row;

/* Largest first: weir_sim_format_duration() picks the first that fits. */
static const unit_row unit_rows[] = {
    {"d", 86400 * (int64_t)US_PER_S},
    {"h", 3600 * (int64_t)US_PER_S},
    {"m", 60 * (int64_t)US_PER_S},
    {"s", US_PER_S},
    {"ms", 1000},
    {"us", 1},
};
#define N_UNITS (sizeof(unit_rows) / sizeof(unit_rows[0]))

/* "1500" thousandths -> "1.5"; at most three decimals, trailing zeros cut. */
void weir_sim_format_milli(uint64_t milli, const char *suffix, char *buf, size_t len)
{
    uint64_t whole = milli / MILLI, frac = milli % MILLI;
    if (frac == 0) {
        snprintf(buf, len, "%llu%s", (unsigned long long)whole, suffix);
        return;
    }
    int digits = 3;
    while (frac % 10 == 0) {
        frac /= 10;
        digits--;
    }
    snprintf(buf, len, "%llu.%0*llu%s", (unsigned long long)whole, digits, (unsigned long long)frac,
             suffix);
}

void weir_sim_format_duration(int64_t us, char *buf, size_t len)
{
    if (us <= 0) {
        snprintf(buf, len, "0s");
        return;
    }
    for (size_t i = 0; i < N_UNITS; i++) {
        u128 scaled = (u128)us * MILLI;
        uint64_t unit = (uint64_t)unit_rows[i].us;
        if ((uint64_t)us >= unit && scaled % unit == 0) {
            weir_sim_format_milli((uint64_t)(scaled / unit), unit_rows[i].name, buf, len);
            return;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* The simulation                                                           */

/* A growable FIFO of (time, value): admitted times in the last window, or
 * pending lease releases. Capacity is a power of two. */
typedef struct pair {
    int64_t t;
    uint64_t v;
} pair;

typedef struct fifo {
    pair *a;
    size_t cap, head, n;
} fifo;

static weir_status fifo_push(fifo *f, pair x)
{
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 8;
        pair *a = malloc(cap * sizeof(pair));
        if (!a)
            return WEIR_ENOMEM;
        for (size_t i = 0; i < f->n; i++)
            a[i] = f->a[(f->head + i) & (f->cap - 1)];
        free(f->a);
        f->a = a;
        f->cap = cap;
        f->head = 0;
    }
    f->a[(f->head + f->n) & (f->cap - 1)] = x;
    f->n++;
    return WEIR_OK;
}

static const pair *fifo_front(const fifo *f)
{
    return f->n ? &f->a[f->head] : NULL;
}

static void fifo_pop(fifo *f)
{
    f->head = (f->head + 1) & (f->cap - 1);
    f->n--;
}

typedef struct key_algo {
    fifo window;        /* admitted (time, units) within the last window */
    uint64_t in_window; /* sum of the units in `window` */
} key_algo;

typedef struct key_sim {
    unsigned char *states; /* every algorithm's state; NULL until first seen */
    fifo releases;         /* concurrency: (release time, lease id) */
    key_algo a[WEIR_ALGORITHM_COUNT];
} key_sim;

typedef struct sim {
    weir_limit lim[WEIR_ALGORITHM_COUNT];
    size_t off[WEIR_ALGORITHM_COUNT]; /* of each state in key_sim.states */
    size_t state_bytes;               /* per key, all algorithms */
    int64_t window_us;
    int64_t hold_us;
    key_sim *keys;
    uint32_t n_keys;
} sim;

#define IDX(algo) ((size_t)(algo)-1)

static weir_status compile_all(const weir_sim_config *cfg, sim *s, weir_algorithm *refused)
{
    size_t off = 0;
    for (size_t i = 0; i < WEIR_ALGORITHM_COUNT; i++) {
        weir_limit_spec spec = {
            .algorithm = (weir_algorithm)(i + 1),
            .limit = cfg->limit,
            .window_us = cfg->window_us,
            .burst = cfg->bucket_burst,
        };
        if (spec.algorithm == WEIR_ALGO_TOKEN_BUCKET) {
            spec.warmup_us = cfg->warmup_us;
            spec.cold_factor = cfg->cold_factor;
        }
        weir_status st = weir_limit_compile(&spec, &s->lim[i]);
        if (st != WEIR_OK) {
            *refused = spec.algorithm;
            return st;
        }
        s->off[i] = off;
        /* states must be 8-byte aligned */
        off += (weir_state_size(&s->lim[i]) + 7) & ~(size_t)7;
    }
    s->state_bytes = off;
    return WEIR_OK;
}

uint64_t weir_sim_state_bytes(const weir_sim_config *cfg)
{
    sim s;
    weir_algorithm refused;
    if (!cfg || compile_all(cfg, &s, &refused) != WEIR_OK)
        return 0;
    return s.state_bytes;
}

/* Record an admission at @at and raise @max to the units admitted in
 * (at - window, at]. Times arrive in order, so the window's oldest entries
 * are at the front. */
static weir_status window_add(key_algo *ka, int64_t at, uint64_t units, int64_t window_us,
                              uint64_t *max)
{
    const pair *front;
    while ((front = fifo_front(&ka->window)) && front->t <= at - window_us) {
        ka->in_window -= front->v;
        fifo_pop(&ka->window);
    }
    weir_status st = fifo_push(&ka->window, (pair){at, units});
    if (st != WEIR_OK)
        return st;
    ka->in_window += units;
    if (ka->in_window > *max)
        *max = ka->in_window;
    return WEIR_OK;
}

/* Give back the concurrency leases whose hold ended by @now_us, each at the
 * time it ended. A lease held past the window has already timed out. */
static weir_status release_due(sim *s, key_sim *k, void *state, int64_t now_us)
{
    const weir_limit *lim = &s->lim[IDX(WEIR_ALGO_CONCURRENCY)];
    const pair *front;
    while ((front = fifo_front(&k->releases)) && front->t <= now_us) {
        weir_result r;
        weir_status st = weir_release(lim, state, front->t, front->v, &r);
        if (st != WEIR_OK && st != WEIR_ENOLEASE)
            return st;
        fifo_pop(&k->releases);
    }
    return WEIR_OK;
}

/* Decide @e with every algorithm; with @d, record the decisions there. */
static weir_status step_event(sim *s, const weir_trace_event *e, weir_sim_report *rep,
                              weir_sim_decision *d)
{
    key_sim *k = &s->keys[e->key];
    if (!k->states) {
        k->states = calloc(1, s->state_bytes);
        if (!k->states)
            return WEIR_ENOMEM;
    }
    bool allowed[WEIR_ALGORITHM_COUNT];
    for (size_t i = 0; i < WEIR_ALGORITHM_COUNT; i++) {
        weir_algorithm algo = (weir_algorithm)(i + 1);
        void *state = k->states + s->off[i];
        weir_status st = WEIR_OK;
        if (algo == WEIR_ALGO_CONCURRENCY)
            st = release_due(s, k, state, e->time_us);
        weir_result r;
        if (st == WEIR_OK)
            st = weir_step(&s->lim[i], state, e->time_us, e->cost, &r);
        if (st != WEIR_OK)
            return st;
        allowed[i] = r.allowed;
        weir_sim_row *row = &rep->rows[i];
        if (!r.allowed) {
            row->denied++;
            continue;
        }
        row->admitted++;
        if (d)
            d->admitted |= 1u << i;
        int64_t at = e->time_us;
        if (algo == WEIR_ALGO_LEAKY_SHAPER) {
            /* the shaper's requests reach the backend when they proceed */
            at = sat_add(at, r.delay_us);
            if (r.delay_us > row->max_delay_us)
                row->max_delay_us = r.delay_us;
            if (d)
                d->delay_us = r.delay_us;
        }
        st = window_add(&k->a[i], at, e->cost, s->window_us, &row->max_in_window);
        if (st == WEIR_OK && algo == WEIR_ALGO_CONCURRENCY)
            st = fifo_push(&k->releases, (pair){sat_add(e->time_us, s->hold_us), r.lease});
        if (st != WEIR_OK)
            return st;
    }
    bool ref = allowed[IDX(WEIR_ALGO_SLIDING_LOG)];
    for (size_t i = 0; i < WEIR_ALGORITHM_COUNT; i++) {
        if (allowed[i] && !ref)
            rep->rows[i].over++;
        else if (!allowed[i] && ref)
            rep->rows[i].under++;
    }
    return WEIR_OK;
}

static bool trace_ok(const weir_trace *t)
{
    if (t->n_events && !t->events)
        return false;
    for (size_t i = 0; i < t->n_events; i++) {
        const weir_trace_event *e = &t->events[i];
        if (e->key >= t->n_keys || e->cost == 0 || e->time_us < 0 ||
            (i > 0 && e->time_us < t->events[i - 1].time_us))
            return false;
    }
    return true;
}

static void free_keys(key_sim *keys, uint32_t n)
{
    if (!keys)
        return;
    for (uint32_t i = 0; i < n; i++) {
        free(keys[i].states);
        free(keys[i].releases.a);
        for (size_t j = 0; j < WEIR_ALGORITHM_COUNT; j++)
            free(keys[i].a[j].window.a);
    }
    free(keys);
}

void weir_sim_watch_free(weir_sim_watch *w)
{
    if (!w)
        return;
    free(w->decisions);
    w->decisions = NULL;
    w->n = 0;
}

/* Room for every request of the watched key, each with its time and cost
 * filled in. */
static weir_status watch_start(const weir_trace *trace, weir_sim_watch *w)
{
    w->decisions = NULL;
    w->n = 0;
    if (w->key >= trace->n_keys)
        return WEIR_EINVAL;
    size_t n = 0;
    for (size_t i = 0; i < trace->n_events; i++)
        n += trace->events[i].key == w->key;
    if (n == 0)
        return WEIR_OK;
    w->decisions = calloc(n, sizeof(weir_sim_decision));
    if (!w->decisions)
        return WEIR_ENOMEM;
    for (size_t i = 0; i < trace->n_events; i++)
        if (trace->events[i].key == w->key)
            w->decisions[w->n++] = (weir_sim_decision){.time_us = trace->events[i].time_us,
                                                       .cost = trace->events[i].cost};
    return WEIR_OK;
}

weir_status weir_sim_run(const weir_sim_config *cfg, const weir_trace *trace, weir_sim_report *out)
{
    return weir_sim_run_watched(cfg, trace, out, NULL);
}

weir_status weir_sim_run_watched(const weir_sim_config *cfg, const weir_trace *trace,
                                 weir_sim_report *out, weir_sim_watch *watch)
{
    if (watch) {
        watch->decisions = NULL;
        watch->n = 0;
    }
    if (!cfg || !trace || !out)
        return WEIR_EINVAL;
    memset(out, 0, sizeof(*out));
    if (cfg->limit < 1 || cfg->limit > WEIR_SIM_MAX_LIMIT || cfg->hold_us <= 0 || !trace_ok(trace))
        return WEIR_EINVAL;

    sim s;
    memset(&s, 0, sizeof(s));
    weir_status st = compile_all(cfg, &s, &out->refused);
    if (st != WEIR_OK)
        return st;
    out->refused = (weir_algorithm)0;
    if ((u128)trace->n_keys * s.state_bytes > WEIR_SIM_MAX_STATE_BYTES)
        return WEIR_ETOOBIG;
    s.window_us = cfg->window_us;
    s.hold_us = cfg->hold_us;
    s.n_keys = trace->n_keys;
    if (watch && (st = watch_start(trace, watch)) != WEIR_OK)
        return st;
    if (s.n_keys) {
        s.keys = calloc(s.n_keys, sizeof(key_sim));
        if (!s.keys) {
            weir_sim_watch_free(watch);
            return WEIR_ENOMEM;
        }
    }

    weir_sim_report rep;
    memset(&rep, 0, sizeof(rep));
    size_t watched = 0;
    for (size_t i = 0; i < trace->n_events && st == WEIR_OK; i++) {
        const weir_trace_event *e = &trace->events[i];
        weir_sim_decision *d = watch && e->key == watch->key ? &watch->decisions[watched++] : NULL;
        st = step_event(&s, e, &rep, d);
    }
    free_keys(s.keys, s.n_keys);
    if (st != WEIR_OK) {
        weir_sim_watch_free(watch);
        return st;
    }

    rep.requests = trace->n_events;
    rep.keys = trace->n_keys;
    for (size_t i = 0; i < WEIR_ALGORITHM_COUNT; i++) {
        rep.rows[i].algorithm = (weir_algorithm)(i + 1);
        rep.rows[i].burst = s.lim[i].burst;
    }
    *out = rep;
    return WEIR_OK;
}
