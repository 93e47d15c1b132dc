/*
 * sim_svg.h - `weir sim --svg`: one run of the simulator as a static SVG
 * plot, one panel per algorithm: over time, the requests it admitted in the
 * last window (a sliding count, exact), the limit's line, and a tick for
 * every denied request.
 *
 * What the SVG holds besides the drawing, for scripts and tests:
 *   <svg data-limit data-window-us data-t0-us data-t1-us>: the limit, its
 *     window, and the times at the time axis' ends (microseconds);
 *   <g data-algorithm data-admitted data-denied data-peak>: one per panel;
 *     data-peak is the most admitted in any window of the limit's length;
 *   <polyline class="admitted" data-t data-n>: the exact sliding count as
 *     a step function: from time data-t[i] (microseconds) on, data-n[i]
 *     were admitted in the window ending then (0 before the first step).
 *     Left out when a series has more than WEIR_SIM_SVG_MAX_EXACT steps;
 *     the drawn line is exact to a pixel column either way (the least and
 *     the most of each column are drawn).
 *   <line class="limit">: the limit's line, <path class="denied">: ticks.
 *
 * The output is a pure function of the input: integer coordinates in
 * tenths of a pixel, no clock, no locale.
 */
#ifndef WEIR_TOOLS_SIM_SVG_H
#define WEIR_TOOLS_SIM_SVG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "weir/status.h"

/** Most series (panels) in one plot. */
#define WEIR_SIM_SVG_MAX_SERIES 16
/** Most steps of one series written exactly in data-t / data-n. */
#define WEIR_SIM_SVG_MAX_EXACT 10000

/** An admitted request: when it counts against the limit, and its cost. */
typedef struct weir_sim_svg_event {
    int64_t t_us;
    uint64_t cost;
} weir_sim_svg_event;

/** One panel. */
typedef struct weir_sim_svg_series {
    /** The panel's heading (the algorithm's name) and a note shown after
     *  it in parentheses (NULL or "" for none). Any bytes: escaped. */
    const char *name;
    const char *note;
    /** Admitted requests, sorted by time, times >= 0. */
    const weir_sim_svg_event *admitted;
    size_t n_admitted;
    /** When each denied request came, sorted, >= 0. */
    const int64_t *denied_us;
    size_t n_denied;
} weir_sim_svg_series;

typedef struct weir_sim_svg_plot {
    /** The first line (bold), and grey lines under it separated by '\n'
     *  (NULL for none). Any bytes: escaped. */
    const char *title;
    const char *subtitle;
    /** Requests per window, >= 1, and the window, > 0. */
    uint64_t limit;
    int64_t window_us;
    const weir_sim_svg_series *series;
    size_t n_series; /* 1 .. WEIR_SIM_SVG_MAX_SERIES */
} weir_sim_svg_plot;

/** A step of the sliding count: from t_us on, n admitted in the window
 *  (t_us - window, t_us]. */
typedef struct weir_sim_svg_step {
    int64_t t_us;
    uint64_t n;
} weir_sim_svg_step;

/**
 * weir_sim_svg_steps() - the sliding count of @n admitted requests: a step
 * where it changes (an admission, or one leaving a window later; changes
 * at the same time are one step, and a step that changes nothing is left
 * out). *@out (malloc'd, NULL when there are none) and *@n_out.
 * Returns WEIR_OK; WEIR_EINVAL for a window <= 0 or events not sorted by
 * time or before 0; WEIR_ENOMEM.
 */
weir_status weir_sim_svg_steps(const weir_sim_svg_event *adm, size_t n, int64_t window_us,
                               weir_sim_svg_step **out, size_t *n_out);

/**
 * weir_sim_svg_write() - draw @p to @f. The caller checks @f for write
 * errors (ferror, fclose). Returns WEIR_OK; WEIR_EINVAL for a bad @p
 * (see the fields); WEIR_ENOMEM.
 */
weir_status weir_sim_svg_write(FILE *f, const weir_sim_svg_plot *p);

#endif /* WEIR_TOOLS_SIM_SVG_H */
