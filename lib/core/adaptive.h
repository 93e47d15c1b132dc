/*
 * adaptive.h - what the adaptive controllers (adaptive_control.c) share
 * with the controller's frame (adaptive.c): the resolved options and one
 * closed window. The frame owns the lock, the windows, the probes, the
 * smoothing, the clamp and the history; a controller only says where a
 * window's samples move the estimate.
 */
#ifndef WEIR_CORE_ADAPTIVE_H
#define WEIR_CORE_ADAPTIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "weir/adaptive.h"

/* The options with every default filled in. */
typedef struct weir__adaptive_params {
    weir_adaptive_kind kind;
    uint32_t initial, min, max;
    double smoothing;
    uint32_t window_samples;
    int64_t window_us;
    int64_t probe_interval_us;
    uint32_t probe_samples;
    uint32_t probe_jitter_pct; /* 0: none */
    uint64_t seed;
    uint32_t history;
    uint32_t aimd_increase;
    double aimd_backoff;
    int64_t aimd_timeout_us;
    double vegas_alpha, vegas_beta;
    double gradient_tolerance;
    uint32_t gradient_queue;
} weir__adaptive_params;

/* A closed window. */
typedef struct weir__adaptive_window {
    uint32_t samples;
    uint32_t dropped;
    /* the mean RTT of the samples not dropped; 0 when all were */
    double rtt_us;
    /* the most in flight when one of its requests started */
    uint32_t inflight;
} weir__adaptive_window;

/* Fill @p from @o (NULL fields and zeros take the defaults). Returns
 * WEIR_OK, WEIR_EINVAL or WEIR_ERANGE as weir_adaptive_new() documents. */
weir_status weir__adaptive_resolve(const weir_adaptive_options *o, weir__adaptive_params *p);

/* Whether the kind measures a no-load RTT by probing. */
bool weir__adaptive_probes(weir_adaptive_kind kind);

/* Where @w moves the estimate @est (not smoothed, not clamped), given the
 * no-load RTT @rtt_noload_us (0: unknown). Returns @est for no move. */
double weir__adaptive_next(const weir__adaptive_params *p, double est,
                           const weir__adaptive_window *w, double rtt_noload_us);

#endif /* WEIR_CORE_ADAPTIVE_H */
