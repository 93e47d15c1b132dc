/*
 * pattern.h - the synthetic traffic of `weir sim`: steady, bursty,
 * boundary and random requests, generated into a weir_trace.
 *
 * A pattern is a pure function of its parameters and its seed: the same
 * pattern always gives the same requests, all of cost 1, sorted by time.
 * With several keys every key sends its own copy of the pattern; the copies
 * of keys 1.. are shifted by a seeded random offset below one window (except
 * for `boundary`, whose point is its alignment with the windows, and
 * `random`, whose keys draw their own times).
 */
#ifndef WEIR_TOOLS_PATTERN_H
#define WEIR_TOOLS_PATTERN_H

#include <stdint.h>

#include "trace.h"
#include "weir/status.h"

typedef enum weir_pattern_kind {
    WEIR_PATTERN_STEADY = 0,
    WEIR_PATTERN_BURSTY = 1,
    WEIR_PATTERN_BOUNDARY = 2,
    WEIR_PATTERN_RANDOM = 3
} weir_pattern_kind;

#define WEIR_PATTERN_COUNT 4

/** Parameters; which ones a pattern reads is said beside each. */
typedef struct weir_pattern {
    weir_pattern_kind kind;
    /** All: the limit's window (boundary alignment, key offsets). */
    int64_t window_us;
    /** All: requests start in [0, duration); boundary: windows covered. */
    int64_t duration_us;
    /** steady, random: rate_num requests every rate_per_us microseconds,
     *  per key (a rational, so "1.5 per window" is exact). */
    uint64_t rate_num;
    int64_t rate_per_us;
    /** bursty: requests per burst; boundary: requests on each side of a
     *  boundary. */
    uint64_t burst;
    /** bursty: time between two requests of a burst (0 = same instant). */
    int64_t spacing_us;
    /** bursty: time from a burst's last request to the next burst (> 0). */
    int64_t gap_us;
    /** All: keys, each with its own copy of the traffic (>= 1). */
    uint32_t keys;
    /** bursty, steady: the key offsets; random: the times. */
    uint64_t seed;
} weir_pattern;

/** The pattern's name ("steady", ...), or NULL. */
const char *weir_pattern_name(weir_pattern_kind kind);

/** Look up a pattern by name. WEIR_OK or WEIR_EINVAL. */
weir_status weir_pattern_parse(const char *name, weir_pattern_kind *out);

/**
 * weir_pattern_count() - how many requests @p makes over all its keys.
 * Computed without generating them, so a caller can refuse a pattern that
 * is too large first. Saturates at UINT64_MAX. Returns WEIR_OK, or
 * WEIR_EINVAL for parameters out of range (window, duration, spacing or
 * gap negative or too long, a zero rate, burst or key count, gap 0).
 */
weir_status weir_pattern_count(const weir_pattern *p, uint64_t *out);

/**
 * weir_pattern_generate() - the requests of @p into @out, an empty trace.
 * Returns WEIR_OK; WEIR_EINVAL as weir_pattern_count(); WEIR_ERANGE when it
 * makes more than WEIR_TRACE_MAX_LINES requests or has more than
 * WEIR_TRACE_MAX_KEYS keys; WEIR_ENOMEM. On failure @out is empty.
 */
weir_status weir_pattern_generate(const weir_pattern *p, weir_trace *out);

#endif /* WEIR_TOOLS_PATTERN_H */
