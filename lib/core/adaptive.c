/*
 * adaptive.c - the frame of an adaptive concurrency controller
 * (weir/adaptive.h): samples into windows, no-load RTT probes, smoothing,
 * the clamp, the published limit and the history of its changes.
 *
 * Invariants: `published` (an atomic, read without the lock) is always in
 * [min, max]; it is min while a probe runs and round(estimate) otherwise;
 * the estimate is always in [min, max]; every change of `published` is
 * one entry of the history ring, made under the lock. Everything else is
 * read and written under the lock only.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "core/adaptive.h"
#include "core/context.h"

/* A probe that has taken this many times its samples without enough
 * unloaded ones (the caller is not enforcing the limit) ends anyway. */
#define PROBE_PATIENCE 10u
/* The no-load RTT is stale, and a probe starts at the next sample, after
 * a window whose mean RTT is under STALE_FASTER of it (the backend got
 * faster: no noise in a window's mean goes that far), or over STALE_SLOWER
 * of it while the estimate has fallen to half its highest since the last
 * probe ended, or to min_limit. A queue and a slower backend look the same
 * from here (both raise the RTT at the same in-flight count), so only a
 * probe tells them apart: one each time the limit halves. */
#define STALE_FASTER 0.75
#define STALE_SLOWER 1.5
/* A window also ends at this many samples, so its sums cannot overflow
 * (2^24 x WEIR_ADAPTIVE_MAX_US < 2^64) however long window_us is. */
#define WINDOW_CAP (1u << 24)

struct weir_adaptive {
    const weir_ctx *ctx;
    _Atomic uint32_t published;
    pthread_mutex_t lock;
    weir__adaptive_params p;
    double estimate;
    int64_t last_us; /* the latest time seen */

    /* the open window; it started when the one before ended (the first at
     * 0, the first after a probe at the probe's end) */
    bool win_open;
    int64_t win_start_us;
    uint32_t win_samples, win_dropped, win_rtt_n, win_inflight;
    uint64_t win_rtt_sum_us;

    /* the no-load RTT and its probes */
    bool probing;
    int64_t next_probe_us; /* -1: none planned */
    uint32_t probe_n;      /* unloaded samples in this probe */
    uint64_t probe_seen;   /* every sample in this probe */
    uint64_t probe_sum_us;
    int64_t probe_min_us;
    double rtt_noload_us;
    double peak_estimate; /* the highest since the last probe ended */
    uint64_t probes;      /* probes ended, for the jitter */

    /* the last closed window, and counters */
    double rtt_short_us;
    uint32_t last_inflight;
    uint64_t samples, dropped, windows, changes;

    /* the ring of the last p.history changes; the newest at
     * (changes - 1) % p.history */
    weir_adaptive_change ring[];
};

static uint64_t sat_inc(uint64_t v)
{
    return v == UINT64_MAX ? v : v + 1;
}

static uint32_t rounded(double est)
{
    return (uint32_t)(est + 0.5);
}

/* Publish @limit, recording the change (if it is one). */
static void publish(weir_adaptive *a, int64_t now_us, uint32_t limit, weir_adaptive_cause cause)
{
    if (limit == atomic_load_explicit(&a->published, memory_order_relaxed))
        return;
    atomic_store_explicit(&a->published, limit, memory_order_relaxed);
    a->ring[a->changes % a->p.history] = (weir_adaptive_change){now_us, limit, cause};
    a->changes++; /* 2^64 changes: never wraps in practice */
}

weir_status weir_adaptive_new(const weir_ctx *ctx, const weir_adaptive_options *opts,
                              weir_adaptive **out)
{
    if (!ctx || !opts || !out)
        return WEIR_EINVAL;
    weir__adaptive_params p;
    weir_status st = weir__adaptive_resolve(opts, &p);
    if (st != WEIR_OK)
        return st;
    weir_adaptive *a =
        weir__calloc(ctx, 1, sizeof(*a) + (size_t)p.history * sizeof(weir_adaptive_change));
    if (!a)
        return WEIR_ENOMEM;
    if (pthread_mutex_init(&a->lock, NULL) != 0) {
        weir__free(ctx, a);
        return WEIR_ENOMEM;
    }
    a->ctx = ctx;
    a->p = p;
    a->estimate = p.initial;
    atomic_init(&a->published, p.initial);
    /* a controller that needs the no-load RTT measures it first */
    a->next_probe_us = weir__adaptive_probes(p.kind) ? 0 : -1;
    *out = a;
    return WEIR_OK;
}

void weir_adaptive_free(weir_adaptive *a)
{
    if (!a)
        return;
    pthread_mutex_destroy(&a->lock);
    weir__free(a->ctx, a);
}

static void start_probe(weir_adaptive *a, int64_t now_us)
{
    a->probing = true;
    a->next_probe_us = -1;
    a->probe_n = 0;
    a->probe_seen = 0;
    a->probe_sum_us = 0;
    a->probe_min_us = INT64_MAX;
    a->win_open = false;
    publish(a, now_us, a->p.min, WEIR_ADAPTIVE_PROBE_START);
}

/* The random part of the next probe interval: 0 .. jitter% of it, from
 * the seed and the number of probes so far (splitmix64). */
static int64_t jitter(weir_adaptive *a)
{
    int64_t span = a->p.probe_interval_us / 100 * a->p.probe_jitter_pct +
                   a->p.probe_interval_us % 100 * a->p.probe_jitter_pct / 100;
    uint64_t z = a->p.seed + ++a->probes * 0x9e3779b97f4a7c15u;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    z ^= z >> 31;
    return span > 0 ? (int64_t)(z % ((uint64_t)span + 1)) : 0;
}

/* A sample during a probe: one of a request that started with at most
 * min_limit in flight saw no queue of this controller's making. */
static void probe_sample(weir_adaptive *a, int64_t now_us, int64_t rtt_us, uint32_t inflight)
{
    a->probe_seen++;
    if (rtt_us < a->probe_min_us)
        a->probe_min_us = rtt_us;
    if (inflight <= a->p.min) {
        a->probe_n++;
        a->probe_sum_us += (uint64_t)rtt_us; /* <= 1e5 x 3.6e9: no overflow */
    }
    bool done = a->probe_n >= a->p.probe_samples;
    if (!done && a->probe_seen < (uint64_t)a->p.probe_samples * PROBE_PATIENCE)
        return;
    a->rtt_noload_us = a->probe_n ? (double)a->probe_sum_us / a->probe_n : (double)a->probe_min_us;
    a->probing = false;
    a->peak_estimate = a->estimate;
    a->win_start_us = now_us;
    int64_t wait_us = a->p.probe_interval_us + jitter(a);
    if (__builtin_add_overflow(now_us, wait_us, &a->next_probe_us))
        a->next_probe_us = INT64_MAX;
    publish(a, now_us, rounded(a->estimate), WEIR_ADAPTIVE_PROBE_END);
}

static bool stale(const weir_adaptive *a, const weir__adaptive_window *w)
{
    if (!weir__adaptive_probes(a->p.kind) || w->rtt_us <= 0.0 || a->rtt_noload_us <= 0.0)
        return false;
    if (w->rtt_us < STALE_FASTER * a->rtt_noload_us)
        return true;
    return w->rtt_us > STALE_SLOWER * a->rtt_noload_us &&
           (a->estimate < a->p.min + 0.5 || a->estimate <= a->peak_estimate / 2);
}

static void close_window(weir_adaptive *a, int64_t now_us)
{
    weir__adaptive_window w = {
        .samples = a->win_samples,
        .dropped = a->win_dropped,
        .rtt_us = a->win_rtt_n ? (double)a->win_rtt_sum_us / a->win_rtt_n : 0.0,
        .inflight = a->win_inflight,
    };
    a->win_open = false;
    a->win_start_us = now_us;
    a->windows = sat_inc(a->windows);
    a->last_inflight = w.inflight;
    if (w.rtt_us > 0.0) {
        a->rtt_short_us = w.rtt_us;
        /* AIMD has no probe: its no-load RTT (for the stats) is the least
         * window mean. A probing controller keeps its probe's: the least
         * of many noisy means lies below the true one, and an estimate
         * biased low reads as a queue that is not there. */
        if (!weir__adaptive_probes(a->p.kind) &&
            (a->rtt_noload_us == 0.0 || w.rtt_us < a->rtt_noload_us))
            a->rtt_noload_us = w.rtt_us;
    }
    double est = a->estimate;
    double next = weir__adaptive_next(&a->p, est, &w, a->rtt_noload_us);
    /* a window that used under half the limit says nothing of how much
     * more the backend would take */
    uint32_t limit = atomic_load_explicit(&a->published, memory_order_relaxed);
    if (next > est && (uint64_t)w.inflight * 2 < limit)
        next = est;
    next = (1.0 - a->p.smoothing) * est + a->p.smoothing * next;
    next = next < a->p.min ? a->p.min : next > a->p.max ? a->p.max : next;
    a->estimate = next;
    if (next > a->peak_estimate)
        a->peak_estimate = next;
    publish(a, now_us, rounded(next), WEIR_ADAPTIVE_WINDOW);
    if (stale(a, &w))
        a->next_probe_us = now_us;
}

weir_status weir_adaptive_sample(weir_adaptive *a, int64_t now_us, int64_t rtt_us,
                                 uint32_t inflight, bool dropped)
{
    if (!a)
        return WEIR_EINVAL;
    if (rtt_us < 0 || rtt_us > WEIR_ADAPTIVE_MAX_US)
        return WEIR_ERANGE;
    pthread_mutex_lock(&a->lock);
    if (now_us < a->last_us)
        now_us = a->last_us; /* also maps a negative time to 0 */
    a->last_us = now_us;
    if (a->p.kind == WEIR_ADAPTIVE_AIMD && rtt_us > a->p.aimd_timeout_us)
        dropped = true;
    a->samples = sat_inc(a->samples);
    if (dropped)
        a->dropped = sat_inc(a->dropped);

    if (a->next_probe_us >= 0 && now_us >= a->next_probe_us)
        start_probe(a, now_us);
    if (a->probing) {
        if (!dropped)
            probe_sample(a, now_us, rtt_us, inflight);
        pthread_mutex_unlock(&a->lock);
        return WEIR_OK;
    }

    if (!a->win_open) {
        a->win_open = true;
        a->win_samples = a->win_dropped = a->win_rtt_n = a->win_inflight = 0;
        a->win_rtt_sum_us = 0;
    }
    a->win_samples++;
    if (inflight > a->win_inflight)
        a->win_inflight = inflight;
    if (dropped) {
        a->win_dropped++;
    } else {
        a->win_rtt_n++;
        a->win_rtt_sum_us += (uint64_t)rtt_us;
    }
    if ((a->win_samples >= a->p.window_samples && now_us - a->win_start_us >= a->p.window_us) ||
        a->win_samples >= WINDOW_CAP)
        close_window(a, now_us);
    pthread_mutex_unlock(&a->lock);
    return WEIR_OK;
}

uint32_t weir_adaptive_limit(const weir_adaptive *a)
{
    return a ? atomic_load_explicit(&a->published, memory_order_relaxed) : 0;
}

size_t weir_adaptive_history(const weir_adaptive *a, weir_adaptive_change *out, size_t n)
{
    if (!a || !out)
        return 0;
    weir_adaptive *m = (weir_adaptive *)a; /* the lock only */
    pthread_mutex_lock(&m->lock);
    uint64_t kept = a->changes < a->p.history ? a->changes : a->p.history;
    if (n > kept)
        n = (size_t)kept;
    for (size_t i = 0; i < n; i++)
        out[i] = a->ring[(a->changes - n + i) % a->p.history];
    pthread_mutex_unlock(&m->lock);
    return n;
}

void weir_adaptive_stats_get(const weir_adaptive *a, weir_adaptive_stats *out)
{
    if (!a || !out)
        return;
    weir_adaptive *m = (weir_adaptive *)a; /* the lock only */
    pthread_mutex_lock(&m->lock);
    *out = (weir_adaptive_stats){
        .kind = a->p.kind,
        .limit = atomic_load_explicit(&a->published, memory_order_relaxed),
        .estimate_milli = (uint64_t)(a->estimate * 1000.0 + 0.5),
        .min_limit = a->p.min,
        .max_limit = a->p.max,
        .samples = a->samples,
        .dropped = a->dropped,
        .windows = a->windows,
        .changes = a->changes,
        .rtt_noload_us = (int64_t)(a->rtt_noload_us + 0.5),
        .rtt_short_us = (int64_t)(a->rtt_short_us + 0.5),
        .window_inflight = a->last_inflight,
        .probing = a->probing,
        .next_probe_us = a->next_probe_us,
    };
    pthread_mutex_unlock(&m->lock);
}

static const char *const kind_names[] = {
    [WEIR_ADAPTIVE_AIMD] = "aimd",
    [WEIR_ADAPTIVE_VEGAS] = "vegas",
    [WEIR_ADAPTIVE_GRADIENT] = "gradient",
};

const char *weir_adaptive_kind_name(weir_adaptive_kind kind)
{
    if (kind < WEIR_ADAPTIVE_AIMD || kind > WEIR_ADAPTIVE_GRADIENT)
        return NULL;
    return kind_names[kind];
}

weir_status weir_adaptive_kind_parse(const char *name, weir_adaptive_kind *out)
{
    if (!name || !out)
        return WEIR_EINVAL;
    for (int k = WEIR_ADAPTIVE_AIMD; k <= WEIR_ADAPTIVE_GRADIENT; k++)
        if (strcmp(name, kind_names[k]) == 0) {
            *out = (weir_adaptive_kind)k;
            return WEIR_OK;
        }
    return WEIR_EINVAL;
}
