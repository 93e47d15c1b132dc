/*
 * sim.c - `weir sim`: replays a traffic pattern or a CSV trace through
 * every algorithm with the same limit and prints one row per algorithm.
 *
 * Each key has one state per algorithm, all decided on every request, and
 * each verdict is compared with the exact sliding log's on that request.
 * The peak per window is computed from the admitted times themselves, not
 * from any algorithm's bookkeeping. Invariant: the output depends only on
 * the arguments (and the trace file): no clock, no unseeded randomness, no
 * floating point.
 */
#include "sim.h"
#include "number.h"
#include "readfile.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "pattern.h"

__extension__ typedef unsigned __int128 u128;

#define US_PER_S 1000000
#define MILLI 1000u
/* --rate: at most one request per microsecond, in thousandths per second */
#define MAX_RATE_MILLI ((uint64_t)US_PER_S * MILLI)
#define MAX_KEYS WEIR_TRACE_MAX_KEYS

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
static void format_milli(uint64_t milli, const char *suffix, char *buf, size_t len)
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
            format_milli((uint64_t)(scaled / unit), unit_rows[i].name, buf, len);
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

static weir_status step_event(sim *s, const weir_trace_event *e, weir_sim_report *rep)
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
        int64_t at = e->time_us;
        if (algo == WEIR_ALGO_LEAKY_SHAPER) {
            /* the shaper's requests reach the backend when they proceed */
            at = sat_add(at, r.delay_us);
            if (r.delay_us > row->max_delay_us)
                row->max_delay_us = r.delay_us;
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

weir_status weir_sim_run(const weir_sim_config *cfg, const weir_trace *trace, weir_sim_report *out)
{
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
    if (s.n_keys) {
        s.keys = calloc(s.n_keys, sizeof(key_sim));
        if (!s.keys)
            return WEIR_ENOMEM;
    }

    weir_sim_report rep;
    memset(&rep, 0, sizeof(rep));
    for (size_t i = 0; i < trace->n_events && st == WEIR_OK; i++)
        st = step_event(&s, &trace->events[i], &rep);
    free_keys(s.keys, s.n_keys);
    if (st != WEIR_OK)
        return st;

    rep.requests = trace->n_events;
    rep.keys = trace->n_keys;
    for (size_t i = 0; i < WEIR_ALGORITHM_COUNT; i++) {
        rep.rows[i].algorithm = (weir_algorithm)(i + 1);
        rep.rows[i].burst = s.lim[i].burst;
    }
    *out = rep;
    return WEIR_OK;
}

/* ------------------------------------------------------------------------ */
/* The command line                                                         */

enum {
    P_STEADY = 1u << WEIR_PATTERN_STEADY,
    P_BURSTY = 1u << WEIR_PATTERN_BURSTY,
    P_BOUNDARY = 1u << WEIR_PATTERN_BOUNDARY,
    P_RANDOM = 1u << WEIR_PATTERN_RANDOM,
    P_TRACE = 1u << WEIR_PATTERN_COUNT,
    P_GENERATED = P_STEADY | P_BURSTY | P_BOUNDARY | P_RANDOM,
    P_ALL = P_GENERATED | P_TRACE
};

typedef enum opt_id {
    O_LIMIT,
    O_WINDOW,
    O_BUCKET_BURST,
    O_HOLD,
    O_RATE,
    O_DURATION,
    O_BURST,
    O_SPACING,
    O_GAP,
    O_KEYS,
    O_SEED,
    O_TRACE,
    O_COUNT
} opt_id;

/* The options and the traffic each one applies to. */
static const struct option_row {
    const char *name;
    unsigned applies;
} options[O_COUNT] = {
    [O_LIMIT] = {"limit", P_ALL},
    [O_WINDOW] = {"window", P_ALL},
    [O_BUCKET_BURST] = {"bucket-burst", P_ALL},
    [O_HOLD] = {"hold", P_ALL},
    [O_RATE] = {"rate", P_STEADY | P_RANDOM},
    [O_DURATION] = {"duration", P_GENERATED},
    [O_BURST] = {"burst", P_BURSTY | P_BOUNDARY},
    [O_SPACING] = {"spacing", P_BURSTY},
    [O_GAP] = {"gap", P_BURSTY},
    [O_KEYS] = {"keys", P_GENERATED},
    [O_SEED] = {"seed", P_GENERATED},
    [O_TRACE] = {"trace", P_TRACE},
};

static const char help_text[] =
    "usage: weir sim [PATTERN] [OPTIONS]\n"
    "       weir sim --trace FILE [OPTIONS]\n"
    "\n"
    "Replays traffic through every algorithm with the same limit and prints one\n"
    "row per algorithm: requests admitted and denied, the most admitted in any\n"
    "window of the limit's length (exact, for the busiest key), and how often it\n"
    "decided unlike sliding_window_log, the exact sliding window, on the same\n"
    "request. The output depends only on the arguments.\n"
    "\n"
    "patterns (default: bursty):\n"
    "  steady     requests evenly spaced at --rate\n"
    "  bursty     bursts of --burst requests --spacing apart, --gap between bursts\n"
    "  boundary   --burst requests in the last tenth of a window and as many in\n"
    "             the first tenth of the next, at every other window boundary:\n"
    "             the fixed-window exploit\n"
    "  random     requests at uniformly random times, --rate on average (seeded)\n"
    "\n"
    "the limit (the same for every algorithm):\n"
    "  --limit N            requests per window, 1..65536 (default 10)\n"
    "  --window DURATION    the window (default 1s)\n"
    "  --bucket-burst N     the burst of token_bucket, gcra and the leaky buckets\n"
    "                       (default: each one's own: the limit for token_bucket\n"
    "                       and the shaper's queue, 1 for gcra and leaky_bucket)\n"
    "  --hold DURATION      concurrency is not a rate limit: here each admitted\n"
    "                       request holds its lease this long, then releases it\n"
    "                       (default: window / 10; a lease times out after a\n"
    "                       window)\n"
    "\n"
    "the traffic (per key):\n"
    "  --rate R             steady, random: requests per second, decimals allowed\n"
    "                       (default: 1.5 x the limit per window)\n"
    "  --duration DURATION  how long the traffic lasts (default: 10 windows)\n"
    "  --burst N            bursty: requests per burst (default: 2 x the limit);\n"
    "                       boundary: requests on each side of a boundary\n"
    "                       (default: the limit)\n"
    "  --spacing DURATION   bursty: between two requests of a burst\n"
    "                       (default: window / 100)\n"
    "  --gap DURATION       bursty: from a burst's last request to the next burst\n"
    "                       (default: the window)\n"
    "  --keys K             keys, each sending its own copy of the traffic; the\n"
    "                       steady and bursty copies are shifted by a random\n"
    "                       offset (default 1)\n"
    "  --seed S             seed of the random times and offsets (default 1)\n"
    "  --trace FILE         replay a CSV trace instead: lines time_us,key[,cost]\n"
    "                       sorted by time; blank lines, '#' comments and a\n"
    "                       header line time_us,key,cost are allowed\n"
    "\n"
    "DURATION is weir's one duration grammar: <number><unit> parts with units us,\n"
    "ms, s, m, h, d or w, e.g. 500ms, 30s, 1.5s, 5m, 1h30m; a bare number is seconds.\n"
    "\n"
    "examples:\n"
    "  weir sim                                    bursts at 10 per second\n"
    "  weir sim boundary --limit 100 --window 1m   the fixed-window exploit\n"
    "  weir sim steady --rate 12 --keys 50\n"
    "  weir sim --trace requests.csv --limit 5 --window 1s\n"
    "\n"
    "exit status: 0 done, 1 a bad trace file or a failure, 2 bad arguments.\n";

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("weir sim: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\nrun 'weir sim --help' for the options\n", stderr);
    va_end(ap);
    return 2;
}

/* An integer option in [min, max]; 2 (after the message) when it is not. */
static int int_option(const char *const *val, opt_id id, uint64_t min, uint64_t max, uint64_t *out)
{
    if (!val[id])
        return 0;
    if (!weir_cli_parse_u64(val[id], max, out) || *out < min)
        return usage_error("--%s wants an integer %llu .. %llu, not '%s'", options[id].name,
                           (unsigned long long)min, (unsigned long long)max, val[id]);
    return 0;
}

static int duration_option(const char *const *val, opt_id id, int64_t min, int64_t *out)
{
    if (!val[id])
        return 0;
    int64_t v = 0;
    weir_status st = weir_duration_parse(val[id], &v);
    if (st == WEIR_ERANGE)
        return usage_error("--%s %s is longer than the cap of 100 years", options[id].name,
                           val[id]);
    if (st != WEIR_OK)
        return usage_error("--%s wants a duration such as " WEIR_DURATION_EXAMPLES ", not '%s'",
                           options[id].name, val[id]);
    if (v < min)
        return usage_error("--%s must be at least 1us, not '%s'", options[id].name, val[id]);
    *out = v;
    return 0;
}

/* A rate in requests per second with at most three decimals, as
 * thousandths. */
static int rate_option(const char *const *val, uint64_t *milli)
{
    const char *s = val[O_RATE];
    if (!s)
        return 0;
    const char *dot = strchr(s, '.');
    char whole[32];
    size_t wn = dot ? (size_t)(dot - s) : strlen(s);
    uint64_t w = 0, f = 0;
    bool ok = wn > 0 && wn < sizeof(whole);
    if (ok) {
        memcpy(whole, s, wn);
        whole[wn] = '\0';
        ok = weir_cli_parse_u64(whole, MAX_RATE_MILLI / MILLI, &w);
    }
    if (ok && dot) {
        size_t fn = strlen(dot + 1);
        ok = fn >= 1 && fn <= 3 && weir_cli_parse_u64(dot + 1, 999, &f);
        for (size_t i = fn; ok && i < 3; i++)
            f *= 10;
    }
    uint64_t v = w * MILLI + f;
    if (!ok || v == 0 || v > MAX_RATE_MILLI)
        return usage_error("--rate wants requests per second, 0.001 .. 1000000 with at most "
                           "three decimals, not '%s'",
                           s);
    *milli = v;
    return 0;
}

/* What was asked for, all values checked. */
typedef struct sim_args {
    weir_sim_config cfg;
    const char *trace_path; /* NULL: a pattern */
    weir_pattern pattern;
} sim_args;

/* Parse argv into @a. Returns -1 to go on, else the exit code (help: 0). */
static int parse_args(int argc, char **argv, sim_args *a)
{
    const char *val[O_COUNT] = {NULL};
    const char *pattern_name = NULL;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            fputs(help_text, stdout);
            return 0;
        }
        if (arg[0] != '-' || arg[1] == '\0') {
            if (pattern_name)
                return usage_error("one pattern at a time, not '%s' and '%s'", pattern_name, arg);
            pattern_name = arg;
            continue;
        }
        const char *name = arg + (arg[1] == '-' ? 2 : 1);
        const char *eq = strchr(name, '=');
        size_t n = eq ? (size_t)(eq - name) : strlen(name);
        int id = -1;
        for (int j = 0; j < O_COUNT; j++)
            if (arg[1] == '-' && strlen(options[j].name) == n &&
                strncmp(options[j].name, name, n) == 0)
                id = j;
        if (id < 0)
            return usage_error("unknown option '%s'", arg);
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v)
            return usage_error("--%s needs a value", options[id].name);
        if (val[id])
            return usage_error("--%s given twice", options[id].name);
        val[id] = v;
    }

    unsigned mask = P_TRACE;
    weir_pattern_kind kind = WEIR_PATTERN_BURSTY;
    if (val[O_TRACE]) {
        if (pattern_name)
            return usage_error("give a pattern or --trace, not both");
    } else {
        if (pattern_name && weir_pattern_parse(pattern_name, &kind) != WEIR_OK)
            return usage_error("unknown pattern '%s': steady, bursty, boundary or random",
                               pattern_name);
        mask = 1u << kind;
    }
    for (int j = 0; j < O_COUNT; j++)
        if (val[j] && !(options[j].applies & mask))
            return usage_error("--%s does not apply to %s", options[j].name,
                               val[O_TRACE] ? "--trace" : weir_pattern_name(kind));

    memset(a, 0, sizeof(*a));
    weir_sim_config *c = &a->cfg;
    c->limit = 10;
    c->window_us = US_PER_S;
    int rc = int_option(val, O_LIMIT, 1, WEIR_SIM_MAX_LIMIT, &c->limit);
    if (!rc)
        rc = duration_option(val, O_WINDOW, 1, &c->window_us);
    if (!rc)
        rc = int_option(val, O_BUCKET_BURST, 1, WEIR_MAX_LIMIT, &c->bucket_burst);
    c->hold_us = c->window_us / 10 ? c->window_us / 10 : 1;
    if (!rc)
        rc = duration_option(val, O_HOLD, 1, &c->hold_us);
    a->trace_path = val[O_TRACE];

    weir_pattern *p = &a->pattern;
    p->kind = kind;
    p->window_us = c->window_us;
    p->duration_us =
        c->window_us > WEIR_MAX_WINDOW_US / 10 ? WEIR_MAX_WINDOW_US : 10 * c->window_us;
    /* 1.5 x the limit per window, exactly */
    p->rate_num = 3 * c->limit;
    p->rate_per_us = 2 * c->window_us;
    p->burst = kind == WEIR_PATTERN_BOUNDARY ? c->limit : 2 * c->limit;
    p->spacing_us = c->window_us / 100;
    p->gap_us = c->window_us;
    p->keys = 1;
    p->seed = 1;
    uint64_t milli = 0, keys = 1;
    if (!rc)
        rc = rate_option(val, &milli);
    if (!rc && milli) {
        p->rate_num = milli;
        p->rate_per_us = (int64_t)US_PER_S * MILLI;
    }
    if (!rc)
        rc = duration_option(val, O_DURATION, 1, &p->duration_us);
    if (!rc)
        rc = int_option(val, O_BURST, 1, WEIR_SIM_MAX_REQUESTS, &p->burst);
    if (!rc)
        rc = duration_option(val, O_SPACING, 0, &p->spacing_us);
    if (!rc)
        rc = duration_option(val, O_GAP, 1, &p->gap_us);
    if (!rc)
        rc = int_option(val, O_KEYS, 1, MAX_KEYS, &keys);
    p->keys = (uint32_t)keys;
    if (!rc)
        rc = int_option(val, O_SEED, 0, UINT64_MAX, &p->seed);
    return rc ? rc : -1;
}

/* ------------------------------------------------------------------------ */
/* Output                                                                   */

/* "12.3%" of @part in @whole, rounded, integer only. */
static void format_percent(uint64_t part, uint64_t whole, char *buf, size_t len)
{
    uint64_t tenths = whole ? (uint64_t)(((u128)part * 1000 + whole / 2) / whole) : 0;
    snprintf(buf, len, "%llu.%llu%%", (unsigned long long)(tenths / 10),
             (unsigned long long)(tenths % 10));
}

static void format_rate(const weir_pattern *p, char *buf, size_t len)
{
    u128 milli = ((u128)p->rate_num * US_PER_S * MILLI + (uint64_t)p->rate_per_us / 2) /
                 (uint64_t)p->rate_per_us;
    format_milli(milli > UINT64_MAX ? UINT64_MAX : (uint64_t)milli, "/s", buf, len);
}

static void describe_pattern(FILE *f, const weir_pattern *p, uint64_t requests)
{
    char d[32], a[32], b[32], r[32];
    weir_sim_format_duration(p->duration_us, d, sizeof(d));
    switch (p->kind) {
    case WEIR_PATTERN_STEADY:
        format_rate(p, r, sizeof(r));
        fprintf(f, "traffic:  steady, requests evenly spaced at %s for %s", r, d);
        break;
    case WEIR_PATTERN_RANDOM:
        format_rate(p, r, sizeof(r));
        fprintf(f, "traffic:  random, %s on average at uniformly random times for %s", r, d);
        break;
    case WEIR_PATTERN_BURSTY:
        weir_sim_format_duration(p->spacing_us, a, sizeof(a));
        weir_sim_format_duration(p->gap_us, b, sizeof(b));
        fprintf(f, "traffic:  bursty, bursts of %llu requests %s apart, %s between bursts, for %s",
                (unsigned long long)p->burst, a, b, d);
        break;
    case WEIR_PATTERN_BOUNDARY:
        weir_sim_format_duration(p->window_us / 10, a, sizeof(a));
        fprintf(f,
                "traffic:  boundary, %llu requests in the last %s before every other window\n"
                "          boundary and %llu in the first %s after it, for %s",
                (unsigned long long)p->burst, a, (unsigned long long)p->burst, a, d);
        break;
    }
    fprintf(f, "\n          %llu request%s", (unsigned long long)requests,
            requests == 1 ? "" : "s");
    if (p->keys == 1)
        fprintf(f, ", 1 key");
    else if (p->kind == WEIR_PATTERN_STEADY || p->kind == WEIR_PATTERN_BURSTY)
        fprintf(f, ", %u keys each shifted by a random offset (seed %llu)", p->keys,
                (unsigned long long)p->seed);
    else
        fprintf(f, ", %u keys", p->keys);
    if (p->kind == WEIR_PATTERN_RANDOM)
        fprintf(f, " (seed %llu)", (unsigned long long)p->seed);
    fputc('\n', f);
}

static void row_note(const weir_sim_config *cfg, const weir_sim_row *row, char *buf, size_t len)
{
    char d[32];
    buf[0] = '\0';
    switch (row->algorithm) {
    case WEIR_ALGO_TOKEN_BUCKET:
    case WEIR_ALGO_GCRA:
    case WEIR_ALGO_LEAKY_BUCKET:
        snprintf(buf, len, "burst %llu", (unsigned long long)row->burst);
        break;
    case WEIR_ALGO_LEAKY_SHAPER:
        weir_sim_format_duration(row->max_delay_us, d, sizeof(d));
        snprintf(buf, len, "queue %llu, max delay %s", (unsigned long long)row->burst, d);
        break;
    case WEIR_ALGO_SLIDING_LOG:
        snprintf(buf, len, "the exact reference");
        break;
    case WEIR_ALGO_CONCURRENCY:
        weir_sim_format_duration(cfg->hold_us, d, sizeof(d));
        snprintf(buf, len, "each lease held %s", d);
        break;
    case WEIR_ALGO_FIXED_WINDOW:
    case WEIR_ALGO_SLIDING_COUNTER:
        break;
    }
}

static void print_report(FILE *f, const weir_sim_config *cfg, const weir_sim_report *rep,
                         bool costs)
{
    char w[32], h[32], col[48], pct[32], note[80];
    weir_sim_format_duration(cfg->window_us, w, sizeof(w));
    weir_sim_format_duration(cfg->hold_us, h, sizeof(h));
    snprintf(col, sizeof(col), "max in %s", w);
    int cw = (int)strlen(col) > 10 ? (int)strlen(col) : 10;

    fprintf(f, "\n%-22s %9s %9s %*s %7s %7s %7s %7s  %s\n", "algorithm", "admitted", "denied", cw,
            col, "wrong", "wrong%", "over", "under", "notes");
    for (size_t i = 0; i < WEIR_ALGORITHM_COUNT; i++) {
        const weir_sim_row *row = &rep->rows[i];
        uint64_t wrong = row->over + row->under;
        format_percent(wrong, rep->requests, pct, sizeof(pct));
        row_note(cfg, row, note, sizeof(note));
        fprintf(f, "%-22s %9llu %9llu %*llu %7llu %7s %7llu %7llu%s%s\n",
                weir_algorithm_name(row->algorithm), (unsigned long long)row->admitted,
                (unsigned long long)row->denied, cw, (unsigned long long)row->max_in_window,
                (unsigned long long)wrong, pct, (unsigned long long)row->over,
                (unsigned long long)row->under, note[0] ? "  " : "", note);
    }
    fprintf(f,
            "\n%s: the most %s in any %s window, exact (busiest key);\n"
            "  the limit is %llu.\n"
            "wrong: decisions unlike sliding_window_log's on the same request;\n"
            "  over = admitted where it denied, under = denied where it admitted.\n"
            "leaky_bucket_shaper admits with a delay; its requests count when they proceed.\n"
            "concurrency is not a rate limit: each admitted request holds one of %llu\n"
            "  lease%s for %s, then releases it.\n",
            col, costs ? "units of cost admitted" : "admitted", w, (unsigned long long)cfg->limit,
            (unsigned long long)cfg->limit, cfg->limit == 1 ? "" : "s", h);
}

/* ------------------------------------------------------------------------ */
/* Running                                                                  */

/* Fill @t from the trace file or the pattern. Returns -1 to go on, else
 * the exit code after the message. */
static int load_traffic(const sim_args *a, weir_trace *t)
{
    if (!a->trace_path) {
        uint64_t n = 0;
        if (weir_pattern_count(&a->pattern, &n) != WEIR_OK)
            return usage_error("these %s parameters are out of range (a burst may last no "
                               "longer than 100 years)",
                               weir_pattern_name(a->pattern.kind));
        if (n == 0)
            return usage_error("the traffic has no requests: boundary attacks every other "
                               "window boundary, so --duration must be over one window");
        if (n > WEIR_SIM_MAX_REQUESTS)
            return usage_error("the traffic is %llu requests, over the cap of %u: lower "
                               "--rate, --burst, --duration or --keys",
                               (unsigned long long)n, WEIR_SIM_MAX_REQUESTS);
        if (weir_pattern_generate(&a->pattern, t) != WEIR_OK) {
            fprintf(stderr, "weir sim: out of memory\n");
            return 1;
        }
        return -1;
    }
    char *buf = NULL;
    size_t len = 0;
    if (!weir_cli_read_file("weir sim: ", a->trace_path, WEIR_SIM_MAX_TRACE_BYTES, &buf, &len))
        return 1;
    weir_trace_error err;
    weir_status st = weir_trace_parse(t, buf, len, &err);
    free(buf);
    if (st != WEIR_OK) {
        fprintf(stderr, "%s:%llu: %s\n", a->trace_path, (unsigned long long)err.line, err.reason);
        return 1;
    }
    if (t->n_events == 0) {
        fprintf(stderr, "%s: the trace has no requests\n", a->trace_path);
        return 1;
    }
    return -1;
}

int weir_cli_sim(int argc, char **argv)
{
    sim_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    const weir_sim_config *cfg = &a.cfg;
    uint64_t per_key = weir_sim_state_bytes(cfg);
    if (!a.trace_path && (u128)per_key * a.pattern.keys > WEIR_SIM_MAX_STATE_BYTES)
        return usage_error("%u keys x %llu bytes of state is over the cap of %llu MiB: lower "
                           "--keys or --limit",
                           a.pattern.keys, (unsigned long long)per_key,
                           (unsigned long long)(WEIR_SIM_MAX_STATE_BYTES >> 20));

    weir_trace t;
    weir_trace_init(&t);
    rc = load_traffic(&a, &t);
    if (rc >= 0)
        return rc;

    weir_sim_report rep;
    weir_status st = weir_sim_run(cfg, &t, &rep);
    bool costs = false;
    for (size_t i = 0; i < t.n_events && !costs; i++)
        costs = t.events[i].cost != 1;
    uint32_t n_keys = t.n_keys;
    weir_trace_free(&t);
    char w[32];
    weir_sim_format_duration(cfg->window_us, w, sizeof(w));
    if (st != WEIR_OK && rep.refused)
        return usage_error("%s refuses a limit of %llu per %s%s: %s",
                           weir_algorithm_name(rep.refused), (unsigned long long)cfg->limit, w,
                           cfg->bucket_burst ? " with this --bucket-burst" : "", weir_strerror(st));
    if (st == WEIR_ETOOBIG) {
        fprintf(stderr,
                "weir sim: %s: %u keys x %llu bytes of state is over the cap of %llu MiB: "
                "lower --limit\n",
                a.trace_path, n_keys, (unsigned long long)per_key,
                (unsigned long long)(WEIR_SIM_MAX_STATE_BYTES >> 20));
        return 1;
    }
    if (st != WEIR_OK) {
        fprintf(stderr, "weir sim: %s\n", weir_strerror(st));
        return 1;
    }

    printf("weir sim: %llu request%s per %s, the same limit for every algorithm\n",
           (unsigned long long)cfg->limit, cfg->limit == 1 ? "" : "s", w);
    if (a.trace_path)
        printf("traffic:  trace %s\n          %llu request%s, %u key%s\n", a.trace_path,
               (unsigned long long)rep.requests, rep.requests == 1 ? "" : "s", rep.keys,
               rep.keys == 1 ? "" : "s");
    else
        describe_pattern(stdout, &a.pattern, rep.requests);
    print_report(stdout, cfg, &rep, costs);
    return 0;
}
