/*
 * weir/adaptive.h - a concurrency limit found from observed latency
 * instead of a guessed number: three controllers after Netflix's
 * concurrency-limits and Envoy's adaptive_concurrency filter.
 *
 * A controller is fed one sample per completed request (its round-trip
 * time, how many were in flight when it started, whether it was dropped)
 * and publishes a limit: the most requests that should be in flight. It
 * aggregates the samples over a window (at least `window_samples` samples
 * and `window_us` microseconds), then moves the limit once:
 *
 *   AIMD      a drop (or a sample slower than `aimd_timeout_us`) in the
 *             window multiplies the limit by `aimd_backoff`; otherwise a
 *             window that used at least half the limit adds
 *             `aimd_increase`.
 *   VEGAS     estimates the queue as limit x (1 - rtt_noload / rtt): at
 *             most log10(limit) queued adds beta; below alpha adds
 *             log10(limit); above beta subtracts log10(limit); a drop
 *             subtracts log10(limit) (every step at least 1). alpha and
 *             beta are `vegas_alpha` / `vegas_beta` x log10(limit).
 *   GRADIENT  gradient = clamp(tolerance x rtt_noload / rtt, 0.5, 2.0);
 *             the limit moves towards limit x gradient + headroom, the
 *             headroom being `gradient_queue` or, when that is 0,
 *             sqrt(limit x gradient).
 *
 * `rtt` is the mean RTT of the window's samples that were not dropped.
 * VEGAS and GRADIENT need the no-load RTT: every `probe_interval_us`
 * (plus up to `probe_jitter_pct` percent of it, at random from `seed`;
 * and before anything else) the published limit is pinned at
 * `min_limit` until `probe_samples` samples of requests that started with
 * at most `min_limit` in flight have come; their mean RTT is the new
 * no-load RTT, and the limit returns to its value before the probe
 * (Envoy's minimum-RTT recalculation). A probe also starts at the sample
 * after a window whose mean RTT was under 3/4 of the no-load RTT (the
 * backend got faster), or over 3/2 of it with the limit fallen to half
 * its highest since the last probe ended, or to min_limit (it may have got
 * slower: only a probe tells that from a queue). A window whose largest
 * in-flight count is under half the limit never raises it (the demand,
 * not the backend, held it back). Every new limit is smoothed,
 * limit = (1 - smoothing) x limit + smoothing x new, and clamped to
 * [min_limit, max_limit]; the published limit is that rounded to the
 * nearest integer.
 *
 * Determinism: the same options and samples, in the same order, give the
 * same limits (from many threads, the order is the one their calls take
 * the lock in). The controllers compute in IEEE-754 double precision (no
 * floating point reaches an admission decision: the limit published is an
 * integer), so results are identical on every platform that rounds doubles
 * the standard way (not under -ffast-math).
 *
 * Time: every call takes `now_us` from the caller; a time before the
 * latest seen is read as the latest (a clock that runs backwards changes
 * nothing), a negative one as 0.
 *
 * Thread safety: weir_adaptive_limit() is one atomic load, safe from any
 * number of threads at once. weir_adaptive_sample(),
 * weir_adaptive_history() and weir_adaptive_stats_get() may also run
 * from many threads at once: they take a short internal lock (a sample is
 * a few additions, and once a window a few dozen floating-point
 * operations). weir_adaptive_free() must not race any other call.
 *
 * Memory: one allocation at weir_adaptive_new(), none after.
 */
#ifndef WEIR_ADAPTIVE_H
#define WEIR_ADAPTIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weir/context.h"
#include "weir/export.h"
#include "weir/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Caps and defaults (a 0 in the options means the default). */
/** The largest limit: the concurrency limiter's cap, WEIR_MAX_LEASES. */
#define WEIR_ADAPTIVE_MAX_LIMIT 65536u
#define WEIR_ADAPTIVE_DEFAULT_INITIAL 20u        /* Netflix's initialLimit */
#define WEIR_ADAPTIVE_DEFAULT_MIN 3u             /* Envoy's min_concurrency */
#define WEIR_ADAPTIVE_DEFAULT_MAX 1000u          /* Envoy's max_concurrency_limit */
#define WEIR_ADAPTIVE_DEFAULT_WINDOW_SAMPLES 10u /* Netflix's windowSize */
#define WEIR_ADAPTIVE_MAX_WINDOW_SAMPLES 1000000u
#define WEIR_ADAPTIVE_DEFAULT_WINDOW_US 100000 /* 100 ms, as Envoy's examples */
/** The longest window, probe interval, RTT and AIMD timeout: one hour. */
#define WEIR_ADAPTIVE_MAX_US ((int64_t)3600 * 1000000)
#define WEIR_ADAPTIVE_DEFAULT_PROBE_INTERVAL_US ((int64_t)60 * 1000000) /* Envoy's example */
#define WEIR_ADAPTIVE_DEFAULT_PROBE_SAMPLES 50u                         /* Envoy's request_count */
#define WEIR_ADAPTIVE_MAX_PROBE_SAMPLES 100000u
#define WEIR_ADAPTIVE_DEFAULT_PROBE_JITTER_PCT 15 /* Envoy's jitter */
#define WEIR_ADAPTIVE_DEFAULT_HISTORY 64u
#define WEIR_ADAPTIVE_MAX_HISTORY 4096u
#define WEIR_ADAPTIVE_DEFAULT_AIMD_INCREASE 1u
#define WEIR_ADAPTIVE_DEFAULT_AIMD_BACKOFF 0.9                       /* Netflix's backoffRatio */
#define WEIR_ADAPTIVE_DEFAULT_AIMD_TIMEOUT_US ((int64_t)5 * 1000000) /* Netflix */
#define WEIR_ADAPTIVE_DEFAULT_VEGAS_ALPHA 3.0                        /* Netflix: 3 x log10(limit) */
#define WEIR_ADAPTIVE_DEFAULT_VEGAS_BETA 6.0                         /* Netflix: 6 x log10(limit) */
#define WEIR_ADAPTIVE_DEFAULT_GRADIENT_TOLERANCE 1.25                /* Envoy's 25% buffer */
#define WEIR_ADAPTIVE_MAX_GRADIENT_TOLERANCE 10.0
/** Smoothing: Netflix's defaults, 1 (none) for AIMD and Vegas, 0.2 for
 *  the gradient. */
#define WEIR_ADAPTIVE_DEFAULT_SMOOTHING_GRADIENT 0.2

typedef enum weir_adaptive_kind {
    WEIR_ADAPTIVE_AIMD = 1,
    WEIR_ADAPTIVE_VEGAS = 2,
    WEIR_ADAPTIVE_GRADIENT = 3,
} weir_adaptive_kind;

typedef struct weir_adaptive weir_adaptive;

typedef struct weir_adaptive_options {
    /** sizeof(weir_adaptive_options), so fields can be appended later. */
    size_t size;
    /** The controller. Required. */
    weir_adaptive_kind kind;
    /** Limits: 1 <= min_limit <= initial_limit <= max_limit <=
     *  WEIR_ADAPTIVE_MAX_LIMIT (an initial limit of 0 is the default
     *  clamped into [min, max]). */
    uint32_t initial_limit;
    uint32_t min_limit;
    uint32_t max_limit;
    /** In (0, 1]: the weight of a new limit against the old (1 = none). */
    double smoothing;
    /** A window ends once it holds window_samples samples (1 ..
     *  WEIR_ADAPTIVE_MAX_WINDOW_SAMPLES) and window_us (1 ..
     *  WEIR_ADAPTIVE_MAX_US) have passed since the window before ended
     *  (the first since 0, the first after a probe since the probe
     *  ended), or at 2^24 samples whatever its age. */
    uint32_t window_samples;
    int64_t window_us;
    /** VEGAS, GRADIENT: from the end of one no-load RTT probe to the start
     *  of the next (1 .. WEIR_ADAPTIVE_MAX_US), and the samples a probe
     *  averages (1 .. WEIR_ADAPTIVE_MAX_PROBE_SAMPLES). */
    int64_t probe_interval_us;
    uint32_t probe_samples;
    /** Limit changes kept for weir_adaptive_history(), 1 ..
     *  WEIR_ADAPTIVE_MAX_HISTORY. */
    uint32_t history;
    /** AIMD: added per window (1 .. WEIR_ADAPTIVE_MAX_LIMIT); the factor
     *  on a drop, in (0, 1); a sample slower than this counts as a drop
     *  (1 .. WEIR_ADAPTIVE_MAX_US). */
    uint32_t aimd_increase;
    double aimd_backoff;
    int64_t aimd_timeout_us;
    /** VEGAS: alpha and beta as multiples of log10(limit), 0 < alpha <=
     *  beta <= 1000. */
    double vegas_alpha;
    double vegas_beta;
    /** GRADIENT: the RTT tolerated over the no-load RTT, as a factor in
     *  [1, WEIR_ADAPTIVE_MAX_GRADIENT_TOLERANCE]; the headroom added
     *  (0 = sqrt of the limit, as Envoy; else a fixed count, as Netflix's
     *  queueSize, at most WEIR_ADAPTIVE_MAX_LIMIT). */
    double gradient_tolerance;
    uint32_t gradient_queue;
    /** VEGAS, GRADIENT: each probe interval is lengthened by a random part
     *  of up to probe_jitter_pct percent of it, so that instances started
     *  together do not probe together (Envoy's jitter): 0 = the default,
     *  WEIR_ADAPTIVE_DEFAULT_PROBE_JITTER_PCT; negative = none; at most
     *  100. */
    int32_t probe_jitter_pct;
    /** The jitter's seed: the same seed gives the same delays (give each
     *  instance its own). */
    uint64_t seed;
} weir_adaptive_options;

/** Why the limit changed. */
typedef enum weir_adaptive_cause {
    WEIR_ADAPTIVE_WINDOW = 1,      /* a window's samples moved it */
    WEIR_ADAPTIVE_PROBE_START = 2, /* pinned at min_limit for a probe */
    WEIR_ADAPTIVE_PROBE_END = 3,   /* the probe ended: back to the estimate */
} weir_adaptive_cause;

/** One change of the published limit. */
typedef struct weir_adaptive_change {
    int64_t t_us;
    uint32_t limit;
    weir_adaptive_cause cause;
} weir_adaptive_change;

typedef struct weir_adaptive_stats {
    weir_adaptive_kind kind;
    /** The published limit, and the controller's estimate in
     *  thousandths (not pinned by a probe). */
    uint32_t limit;
    uint64_t estimate_milli;
    uint32_t min_limit, max_limit;
    /** Samples taken, of them dropped (a timed-out AIMD sample counts
     *  as dropped), windows closed, limit changes (the history keeps the
     *  last `history` of them). All saturate. */
    uint64_t samples;
    uint64_t dropped;
    uint64_t windows;
    uint64_t changes;
    /** The no-load RTT (0 until the first probe ends; AIMD: the least
     *  window mean seen), and the last closed window's mean RTT (0 before
     *  the first) and largest in-flight count. */
    int64_t rtt_noload_us;
    int64_t rtt_short_us;
    uint32_t window_inflight;
    /** A probe is under way; when the next starts (-1 for none planned:
     *  AIMD, or during a probe). */
    bool probing;
    int64_t next_probe_us;
} weir_adaptive_stats;

/**
 * weir_adaptive_new() - a controller.
 *
 * @ctx:  its allocator is used once, here (and at weir_adaptive_free());
 *        must outlive the controller.
 * @opts: required (the kind has no default); copied.
 * @out:  written only on success.
 *
 * Returns WEIR_OK; WEIR_EINVAL (NULL @ctx, @opts or @out, bad opts->size,
 * an unknown kind); WEIR_ERANGE (a field outside its range, as documented
 * on the field; NaN is outside every range); WEIR_ENOMEM.
 */
WEIR_API weir_status weir_adaptive_new(const weir_ctx *ctx, const weir_adaptive_options *opts,
                                       weir_adaptive **out);

/** Free a controller. NULL is a no-op. */
WEIR_API void weir_adaptive_free(weir_adaptive *a);

/**
 * weir_adaptive_sample() - one completed request.
 *
 * @now_us:   when it completed.
 * @rtt_us:   how long it took, 0 .. WEIR_ADAPTIVE_MAX_US (a dropped
 *            request's RTT is not averaged).
 * @inflight: requests in flight when it started, itself included.
 * @dropped:  it failed from overload (rejected, timed out upstream).
 *
 * May close a window and move the limit. Thread-safe (a short lock).
 * Returns WEIR_OK; WEIR_EINVAL for NULL @a; WEIR_ERANGE for an RTT out of
 * range (nothing is counted).
 */
WEIR_API weir_status weir_adaptive_sample(weir_adaptive *a, int64_t now_us, int64_t rtt_us,
                                          uint32_t inflight, bool dropped);

/** The published limit, min_limit .. max_limit: one atomic load, from any
 *  thread. NULL gives 0. */
WEIR_API uint32_t weir_adaptive_limit(const weir_adaptive *a);

/**
 * weir_adaptive_history() - the last changes of the published limit,
 * oldest first: min(@n, kept) of them into @out. Returns how many were
 * written (0 for NULL @a or @out). Thread-safe.
 */
WEIR_API size_t weir_adaptive_history(const weir_adaptive *a, weir_adaptive_change *out, size_t n);

/** The controller's numbers into @out (nothing for a NULL argument).
 *  Thread-safe. */
WEIR_API void weir_adaptive_stats_get(const weir_adaptive *a, weir_adaptive_stats *out);

/** "aimd", "vegas", "gradient"; NULL for another value. */
WEIR_API const char *weir_adaptive_kind_name(weir_adaptive_kind kind);

/** The kind named @name (as weir_adaptive_kind_name() writes it) into
 *  @out. Returns WEIR_OK; WEIR_EINVAL for NULL or an unknown name. */
WEIR_API weir_status weir_adaptive_kind_parse(const char *name, weir_adaptive_kind *out);

#ifdef __cplusplus
}
#endif

#endif /* WEIR_ADAPTIVE_H */
