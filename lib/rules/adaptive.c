/*
 * adaptive.c - a concurrency limit's `adaptive:` mapping: the controller
 * that finds the limit from the latency of the leases given back
 * (weir/adaptive.h), read into the options weir_adaptive_new() takes.
 *
 *   adaptive:
 *     controller: gradient     # aimd, vegas or gradient (required)
 *     min: 5                   # min_limit; the most is requests_per_unit
 *     initial: 20
 *     window: 100ms            # window_us, and window_samples
 *     window_samples: 10
 *     smoothing: 0.2
 *     probe_interval: 60s      # vegas, gradient
 *     probe_samples: 50
 *     probe_jitter: 15%        # 0% for none
 *     tolerance: 1.25          # gradient
 *     queue: 4                 # gradient's headroom (0: sqrt of the limit)
 *     increase: 1              # aimd
 *     backoff: 0.9
 *     timeout: 5s
 *     alpha: 3                 # vegas
 *     beta: 6
 *     history: 64
 *
 * Each field is checked against its range here, so an error names it;
 * what depends on several (min <= initial <= requests_per_unit, a field
 * given to a controller that does not read it) is checked by the limit's
 * reader once the whole limit is known (weir__rules_check_adaptive()).
 */
#include <string.h>

#include "rules/yaml_walk.h"
#include "weir/adaptive.h"

enum a_field {
    A_CONTROLLER,
    A_MIN,
    A_INITIAL,
    A_WINDOW,
    A_WINDOW_SAMPLES,
    A_SMOOTHING,
    A_PROBE_INTERVAL,
    A_PROBE_SAMPLES,
    A_PROBE_JITTER,
    A_TOLERANCE,
    A_QUEUE,
    A_INCREASE,
    A_BACKOFF,
    A_TIMEOUT,
    A_ALPHA,
    A_BETA,
    A_HISTORY,
    A_N
};

static const char *const a_names[A_N] = {
    [A_CONTROLLER] = "controller",
    [A_MIN] = "min",
    [A_INITIAL] = "initial",
    [A_WINDOW] = "window",
    [A_WINDOW_SAMPLES] = "window_samples",
    [A_SMOOTHING] = "smoothing",
    [A_PROBE_INTERVAL] = "probe_interval",
    [A_PROBE_SAMPLES] = "probe_samples",
    [A_PROBE_JITTER] = "probe_jitter",
    [A_TOLERANCE] = "tolerance",
    [A_QUEUE] = "queue",
    [A_INCREASE] = "increase",
    [A_BACKOFF] = "backoff",
    [A_TIMEOUT] = "timeout",
    [A_ALPHA] = "alpha",
    [A_BETA] = "beta",
    [A_HISTORY] = "history",
};

/* Which controllers read a field (bit kind): the rest read by all. */
#define K(kind) (1u << (kind))
static const unsigned a_only[A_N] = {
    [A_PROBE_INTERVAL] = K(WEIR_ADAPTIVE_VEGAS) | K(WEIR_ADAPTIVE_GRADIENT),
    [A_PROBE_SAMPLES] = K(WEIR_ADAPTIVE_VEGAS) | K(WEIR_ADAPTIVE_GRADIENT),
    [A_PROBE_JITTER] = K(WEIR_ADAPTIVE_VEGAS) | K(WEIR_ADAPTIVE_GRADIENT),
    [A_TOLERANCE] = K(WEIR_ADAPTIVE_GRADIENT),
    [A_QUEUE] = K(WEIR_ADAPTIVE_GRADIENT),
    [A_INCREASE] = K(WEIR_ADAPTIVE_AIMD),
    [A_BACKOFF] = K(WEIR_ADAPTIVE_AIMD),
    [A_TIMEOUT] = K(WEIR_ADAPTIVE_AIMD),
    [A_ALPHA] = K(WEIR_ADAPTIVE_VEGAS),
    [A_BETA] = K(WEIR_ADAPTIVE_VEGAS),
};

/* A plain decimal, "12", "0.25" or ".5", with at most 6 digits after the
 * point, into @out; false for anything else. Written out rather than
 * strtod(), which also takes hexadecimal, exponents, "inf" and "nan" and
 * reads the decimal point of the process's locale. */
static bool parse_decimal(const char *s, double *out)
{
    uint64_t whole = 0, frac = 0, scale = 1;
    const char *q = s;
    size_t digits = 0;
    for (; *q >= '0' && *q <= '9'; q++, digits++) {
        if (whole > 1000000000u)
            return false;
        whole = whole * 10 + (uint64_t)(*q - '0');
    }
    if (*q == '.') {
        q++;
        for (size_t n = 0; *q >= '0' && *q <= '9'; q++, n++, digits++) {
            if (n == 6)
                return false;
            frac = frac * 10 + (uint64_t)(*q - '0');
            scale *= 10;
        }
    }
    if (*q != '\0' || digits == 0)
        return false;
    *out = (double)whole + (double)frac / (double)scale;
    return true;
}

/* A decimal field in [lo, hi] (lo excluded when @open). */
static void read_decimal(yp *p, const char *field, pos at, double lo, bool open, double hi,
                         double *out)
{
    const char *s = weir__yp_scalar(p, field);
    if (!s)
        return;
    double v;
    if (!parse_decimal(s, &v) || v < lo || (open && v == lo) || v > hi)
        ERR(p, at, "adaptive %s '%.64s' must be a number %s %g and at most %g", field, s,
            open ? "above" : "from", lo, hi);
    else
        *out = v;
}

/* A duration field from 1 us to WEIR_ADAPTIVE_MAX_US. */
static void read_duration(yp *p, const char *field, pos at, int64_t *out)
{
    const char *s = weir__yp_scalar(p, field);
    if (!s)
        return;
    int64_t us;
    const char *why = weir__rules_parse_duration(s, &us);
    if (why)
        ERR(p, at, "adaptive %s '%.64s' %s", field, s, why);
    else if (us < 1 || us > WEIR_ADAPTIVE_MAX_US)
        ERR(p, at, "adaptive %s '%.64s' must be from 1us to 1h", field, s);
    else
        *out = us;
}

/* A count field from @lo to @hi. */
static void read_count(yp *p, const char *field, pos at, uint64_t lo, uint64_t hi, uint32_t *out)
{
    uint64_t v;
    if (!weir__yp_u64(p, field, hi, &v))
        return;
    if (v < lo)
        ERR(p, at, "adaptive %s must be from %llu to %llu", field, (unsigned long long)lo,
            (unsigned long long)hi);
    else
        *out = (uint32_t)v;
}

static void read_field(yp *p, enum a_field k, pos at, weir_adaptive_options *o)
{
    const char *s;
    uint32_t pct;
    switch (k) {
    case A_CONTROLLER:
        if ((s = weir__yp_scalar(p, "controller")) != NULL &&
            weir_adaptive_kind_parse(s, &o->kind) != WEIR_OK)
            ERR(p, at, "unknown adaptive controller '%.64s' (expected aimd, vegas or gradient)", s);
        break;
    case A_MIN:
        read_count(p, "min", at, 1, WEIR_ADAPTIVE_MAX_LIMIT, &o->min_limit);
        break;
    case A_INITIAL:
        read_count(p, "initial", at, 1, WEIR_ADAPTIVE_MAX_LIMIT, &o->initial_limit);
        break;
    case A_WINDOW:
        read_duration(p, "window", at, &o->window_us);
        break;
    case A_WINDOW_SAMPLES:
        read_count(p, "window_samples", at, 1, WEIR_ADAPTIVE_MAX_WINDOW_SAMPLES,
                   &o->window_samples);
        break;
    case A_SMOOTHING:
        read_decimal(p, "smoothing", at, 0.0, true, 1.0, &o->smoothing);
        break;
    case A_PROBE_INTERVAL:
        read_duration(p, "probe_interval", at, &o->probe_interval_us);
        break;
    case A_PROBE_SAMPLES:
        read_count(p, "probe_samples", at, 1, WEIR_ADAPTIVE_MAX_PROBE_SAMPLES, &o->probe_samples);
        break;
    case A_PROBE_JITTER:
        /* a share in millionths, of which only whole percents are kept */
        if ((s = weir__yp_scalar(p, "probe_jitter")) == NULL)
            break;
        if (strcmp(s, "0") == 0 || strcmp(s, "0%") == 0)
            o->probe_jitter_pct = -1; /* none (0 is the default) */
        else if (weir__rules_parse_share(s, &pct) && pct % 10000 == 0)
            o->probe_jitter_pct = (int32_t)(pct / 10000);
        else
            ERR(p, at, "adaptive probe_jitter '%.64s' must be a whole percentage from 0%% to 100%%",
                s);
        break;
    case A_TOLERANCE:
        read_decimal(p, "tolerance", at, 1.0, false, WEIR_ADAPTIVE_MAX_GRADIENT_TOLERANCE,
                     &o->gradient_tolerance);
        break;
    case A_QUEUE: {
        uint64_t v;
        if (weir__yp_u64(p, "queue", WEIR_ADAPTIVE_MAX_LIMIT, &v))
            o->gradient_queue = (uint32_t)v;
        break;
    }
    case A_INCREASE:
        read_count(p, "increase", at, 1, WEIR_ADAPTIVE_MAX_LIMIT, &o->aimd_increase);
        break;
    case A_BACKOFF:
        read_decimal(p, "backoff", at, 0.0, true, 0.99, &o->aimd_backoff);
        break;
    case A_TIMEOUT:
        read_duration(p, "timeout", at, &o->aimd_timeout_us);
        break;
    case A_ALPHA:
        read_decimal(p, "alpha", at, 0.0, true, 1000.0, &o->vegas_alpha);
        break;
    case A_BETA:
        read_decimal(p, "beta", at, 0.0, true, 1000.0, &o->vegas_beta);
        break;
    case A_HISTORY:
        read_count(p, "history", at, 1, WEIR_ADAPTIVE_MAX_HISTORY, &o->history);
        break;
    case A_N:
        break;
    }
}

bool weir__rules_read_adaptive(yp *p, weir_rule_limit *l)
{
    pos start = weir__yp_here(p);
    if (p->ev.type != YAML_MAPPING_START_EVENT)
        return weir__yp_wrong_kind(p, "adaptive", "a mapping");
    weir_adaptive_options *o = weir__rules_alloc(p->ld, sizeof(*o));
    if (!o)
        return weir__yp_skip(p);
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
    uint64_t seen = 0;
    pos at[A_N], key_at;
    int k;
    while ((k = weir__yp_key(p, a_names, A_N, &seen, &key_at)) != -1) {
        if (k == -3)
            return false;
        at[k] = weir__yp_here(p);
        read_field(p, (enum a_field)k, at[k], o);
        if (!weir__yp_skip(p))
            return false;
    }
    if (!(seen & (UINT64_C(1) << A_CONTROLLER))) {
        ERR(p, start, "adaptive needs a 'controller' (aimd, vegas or gradient)");
        return true;
    }
    for (int i = 0; i < A_N; i++) {
        if ((seen & (UINT64_C(1) << i)) && a_only[i] && o->kind && !(a_only[i] & K(o->kind)))
            ERR(p, at[i], "adaptive '%s' does not apply to the %s controller", a_names[i],
                weir_adaptive_kind_name(o->kind));
    }
    if (o->kind == WEIR_ADAPTIVE_VEGAS && (seen & (UINT64_C(1) << A_ALPHA)) &&
        (seen & (UINT64_C(1) << A_BETA)) && o->vegas_alpha > o->vegas_beta)
        ERR(p, at[A_BETA], "adaptive beta must be at least alpha");
    l->adaptive = o;
    return true;
}

void weir__rules_check_adaptive(yp *p, weir_rule_limit *l, pos at)
{
    weir_adaptive_options *o = (weir_adaptive_options *)l->adaptive;
    if (l->unlimited) {
        ERR(p, at, "'adaptive' has no effect when unlimited");
        return;
    }
    if (l->algorithm != WEIR_ALGO_CONCURRENCY) {
        ERR(p, at, "'adaptive' only applies to concurrency, not %s",
            weir_algorithm_name(l->algorithm));
        return;
    }
    if (l->requests_per_unit < 1 || l->requests_per_unit > WEIR_ADAPTIVE_MAX_LIMIT) {
        ERR(p, at, "an adaptive limit's requests_per_unit (its most) must be from 1 to %u",
            WEIR_ADAPTIVE_MAX_LIMIT);
        return;
    }
    o->max_limit = l->requests_per_unit;
    if (o->min_limit > o->max_limit) {
        ERR(p, at, "adaptive min %u is above requests_per_unit %u", o->min_limit, o->max_limit);
        return;
    }
    if (!o->min_limit && o->max_limit < WEIR_ADAPTIVE_DEFAULT_MIN)
        o->min_limit = o->max_limit; /* the default floor, under a small limit */
    uint32_t min = o->min_limit ? o->min_limit : WEIR_ADAPTIVE_DEFAULT_MIN;
    if (o->initial_limit && (o->initial_limit < min || o->initial_limit > o->max_limit))
        ERR(p, at, "adaptive initial %u must be from min %u to requests_per_unit %u",
            o->initial_limit, min, o->max_limit);
}
