/*
 * adaptive_svg.h - `weir sim --adaptive --svg`: runs of the simulated
 * backend (adaptive_sim.h) as a static SVG plot, one panel per
 * controller: over time, its limit, the knee (the servers serving), and
 * the mean latency on a scale of its own (right).
 *
 * What the SVG holds besides the drawing, for scripts and tests:
 *   <svg data-t1-us>: the time at the axis' end;
 *   <g data-controller>: one per panel;
 *   <polyline class="limit" data-t data-n>: the limit data-n[i] at time
 *     data-t[i] microseconds (every point of the run);
 *   <polyline class="knee">, <polyline class="latency">.
 * The output is a pure function of the input.
 */
#ifndef WEIR_TOOLS_ADAPTIVE_SVG_H
#define WEIR_TOOLS_ADAPTIVE_SVG_H

#include <stddef.h>
#include <stdio.h>

#include "adaptive_sim.h"
#include "weir/status.h"

#define WEIR_ADAPTIVE_SVG_MAX_SERIES 8

typedef struct weir_adaptive_svg_series {
    /** The heading and a grey note on its right (NULL: none); any bytes. */
    const char *name;
    const char *note;
    /** The run's points, in time order, 1 .. WEIR_ADAPTIVE_SIM_MAX_POINTS. */
    const weir_adaptive_sim_point *points;
    size_t n_points;
} weir_adaptive_svg_series;

typedef struct weir_adaptive_svg_plot {
    /** The first line (bold), and grey lines under it separated by '\n'. */
    const char *title;
    const char *subtitle;
    const weir_adaptive_svg_series *series;
    size_t n_series; /* 1 .. WEIR_ADAPTIVE_SVG_MAX_SERIES */
} weir_adaptive_svg_plot;

/**
 * weir_adaptive_svg_write() - draw @p to @f (the caller checks @f for
 * write errors). Returns WEIR_OK; WEIR_EINVAL for a bad @p.
 */
weir_status weir_adaptive_svg_write(FILE *f, const weir_adaptive_svg_plot *p);

#endif /* WEIR_TOOLS_ADAPTIVE_SVG_H */
