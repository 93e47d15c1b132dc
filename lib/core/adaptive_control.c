/*
 * adaptive_control.c - the options of weir/adaptive.h with their defaults
 * and ranges, and the three controllers: where one closed window moves
 * the estimate. Pure functions of their arguments (no state, no clock),
 * in double precision; the frame (adaptive.c) smooths and clamps.
 */
#include <math.h>

#include "core/adaptive.h"

/* Envoy's gradient clamp. */
#define GRADIENT_MIN 0.5
#define GRADIENT_MAX 2.0
#define VEGAS_MAX_FACTOR 1000.0

/* @v is in [lo, hi] (false for NaN). */
static bool in(double v, double lo, double hi)
{
    return v >= lo && v <= hi;
}

static bool us_ok(int64_t v)
{
    return v >= 1 && v <= WEIR_ADAPTIVE_MAX_US;
}

weir_status weir__adaptive_resolve(const weir_adaptive_options *o, weir__adaptive_params *p)
{
    if (!o || o->size < sizeof(*o))
        return WEIR_EINVAL;
    if (o->kind != WEIR_ADAPTIVE_AIMD && o->kind != WEIR_ADAPTIVE_VEGAS &&
        o->kind != WEIR_ADAPTIVE_GRADIENT)
        return WEIR_EINVAL;
    weir__adaptive_params r = {
        .kind = o->kind,
        .min = o->min_limit ? o->min_limit : WEIR_ADAPTIVE_DEFAULT_MIN,
        .max = o->max_limit ? o->max_limit : WEIR_ADAPTIVE_DEFAULT_MAX,
        .smoothing = o->smoothing != 0.0                 ? o->smoothing
                     : o->kind == WEIR_ADAPTIVE_GRADIENT ? WEIR_ADAPTIVE_DEFAULT_SMOOTHING_GRADIENT
                                                         : 1.0,
        .window_samples =
            o->window_samples ? o->window_samples : WEIR_ADAPTIVE_DEFAULT_WINDOW_SAMPLES,
        .window_us = o->window_us ? o->window_us : WEIR_ADAPTIVE_DEFAULT_WINDOW_US,
        .probe_interval_us =
            o->probe_interval_us ? o->probe_interval_us : WEIR_ADAPTIVE_DEFAULT_PROBE_INTERVAL_US,
        .probe_samples = o->probe_samples ? o->probe_samples : WEIR_ADAPTIVE_DEFAULT_PROBE_SAMPLES,
        .history = o->history ? o->history : WEIR_ADAPTIVE_DEFAULT_HISTORY,
        .aimd_increase = o->aimd_increase ? o->aimd_increase : WEIR_ADAPTIVE_DEFAULT_AIMD_INCREASE,
        .aimd_backoff =
            o->aimd_backoff != 0.0 ? o->aimd_backoff : WEIR_ADAPTIVE_DEFAULT_AIMD_BACKOFF,
        .aimd_timeout_us =
            o->aimd_timeout_us ? o->aimd_timeout_us : WEIR_ADAPTIVE_DEFAULT_AIMD_TIMEOUT_US,
        .vegas_alpha = o->vegas_alpha != 0.0 ? o->vegas_alpha : WEIR_ADAPTIVE_DEFAULT_VEGAS_ALPHA,
        .vegas_beta = o->vegas_beta != 0.0 ? o->vegas_beta : WEIR_ADAPTIVE_DEFAULT_VEGAS_BETA,
        .gradient_tolerance = o->gradient_tolerance != 0.0
                                  ? o->gradient_tolerance
                                  : WEIR_ADAPTIVE_DEFAULT_GRADIENT_TOLERANCE,
        .gradient_queue = o->gradient_queue,
        .probe_jitter_pct = o->probe_jitter_pct < 0    ? 0
                            : o->probe_jitter_pct == 0 ? WEIR_ADAPTIVE_DEFAULT_PROBE_JITTER_PCT
                                                       : (uint32_t)o->probe_jitter_pct,
        .seed = o->seed,
    };
    if (r.min < 1 || r.max > WEIR_ADAPTIVE_MAX_LIMIT || r.min > r.max)
        return WEIR_ERANGE;
    uint32_t init = o->initial_limit ? o->initial_limit : WEIR_ADAPTIVE_DEFAULT_INITIAL;
    if (!o->initial_limit)
        init = init < r.min ? r.min : init > r.max ? r.max : init;
    if (init < r.min || init > r.max)
        return WEIR_ERANGE;
    r.initial = init;
    if (!(r.smoothing > 0.0 && r.smoothing <= 1.0) ||
        r.window_samples > WEIR_ADAPTIVE_MAX_WINDOW_SAMPLES || !us_ok(r.window_us) ||
        !us_ok(r.probe_interval_us) || r.probe_samples > WEIR_ADAPTIVE_MAX_PROBE_SAMPLES ||
        r.history > WEIR_ADAPTIVE_MAX_HISTORY || r.aimd_increase > WEIR_ADAPTIVE_MAX_LIMIT ||
        !(r.aimd_backoff > 0.0 && r.aimd_backoff < 1.0) || !us_ok(r.aimd_timeout_us) ||
        !(r.vegas_alpha > 0.0) || !in(r.vegas_beta, r.vegas_alpha, VEGAS_MAX_FACTOR) ||
        !in(r.gradient_tolerance, 1.0, WEIR_ADAPTIVE_MAX_GRADIENT_TOLERANCE) ||
        r.gradient_queue > WEIR_ADAPTIVE_MAX_LIMIT || r.probe_jitter_pct > 100)
        return WEIR_ERANGE;
    *p = r;
    return WEIR_OK;
}

bool weir__adaptive_probes(weir_adaptive_kind kind)
{
    return kind == WEIR_ADAPTIVE_VEGAS || kind == WEIR_ADAPTIVE_GRADIENT;
}

/* TCP's AIMD, as Netflix's AIMDLimit: a drop (a timeout counts as one,
 * see adaptive.c) backs off, else a window that used the limit grows it. */
static double aimd(const weir__adaptive_params *p, double est, const weir__adaptive_window *w)
{
    if (w->dropped)
        return est * p->aimd_backoff;
    return est + p->aimd_increase;
}

/* Netflix's VegasLimit: keep the estimated queue between alpha and beta,
 * all three thresholds growing with log10 of the limit. */
static double vegas(const weir__adaptive_params *p, double est, const weir__adaptive_window *w,
                    double rtt_noload_us)
{
    double lg = log10(est > 1.0 ? est : 1.0);
    double step = lg > 1.0 ? lg : 1.0; /* log10(limit), at least 1 a move */
    if (w->dropped)
        return est - step;
    if (w->rtt_us <= 0.0 || rtt_noload_us <= 0.0)
        return est;
    double queue = ceil(est * (1.0 - rtt_noload_us / w->rtt_us));
    double alpha = p->vegas_alpha * lg, beta = p->vegas_beta * lg;
    if (queue <= lg)
        return est + (beta > 1.0 ? beta : 1.0);
    if (queue < alpha)
        return est + step;
    if (queue > beta)
        return est - step;
    return est;
}

/* Envoy's gradient controller with Netflix gradient2's tolerance: the
 * limit scales with how far the RTT stands above the no-load RTT, plus
 * headroom so a queue can form and show a change. */
static double gradient(const weir__adaptive_params *p, double est, const weir__adaptive_window *w,
                       double rtt_noload_us)
{
    if (w->rtt_us <= 0.0 || rtt_noload_us <= 0.0)
        return est;
    double g = p->gradient_tolerance * rtt_noload_us / w->rtt_us;
    g = g < GRADIENT_MIN ? GRADIENT_MIN : g > GRADIENT_MAX ? GRADIENT_MAX : g;
    double next = est * g;
    return next + (p->gradient_queue ? (double)p->gradient_queue : sqrt(next));
}

double weir__adaptive_next(const weir__adaptive_params *p, double est,
                           const weir__adaptive_window *w, double rtt_noload_us)
{
    switch (p->kind) {
    case WEIR_ADAPTIVE_AIMD:
        return aimd(p, est, w);
    case WEIR_ADAPTIVE_VEGAS:
        return vegas(p, est, w, rtt_noload_us);
    case WEIR_ADAPTIVE_GRADIENT:
        return gradient(p, est, w, rtt_noload_us);
    }
    return est;
}
