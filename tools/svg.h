/*
 * svg.h - what weir's SVG plots (`weir sim --svg`, `weir sim --adaptive
 * --svg`) share: text escaped for XML, numbers as the plots print them,
 * the time axis' unit and step, and polylines without redundant points.
 * Coordinates are integers in tenths of a pixel, so a plot is the same
 * bytes everywhere.
 */
#ifndef WEIR_TOOLS_SVG_H
#define WEIR_TOOLS_SVG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/** @len bytes of @s as XML text, fit for an element and for an attribute
 *  in double quotes: markup characters as entities, a control character
 *  or a byte that is not valid UTF-8 as U+FFFD. */
void weir_svg_text_n(FILE *f, const char *s, size_t len);
/** The same for a string (NULL: nothing). */
void weir_svg_text(FILE *f, const char *s);

/** @v with thousands separated: "12,345". */
void weir_svg_count(uint64_t v, char *buf, size_t len);

/** Tenths of a pixel as "123.4", into @buf, which it returns. */
const char *weir_svg_px(char buf[24], int64_t tenths);

/** 1, 2, 5, 10, 20, 50, ... : the one after @m. */
uint64_t weir_svg_next_nice(uint64_t m);

/** The white background, the title (bold, 13px) at x = @left, y = 18,
 *  and the subtitle's lines ('\n' between them; NULL: none) under it in
 *  grey, @line_h apart from y = 36. */
void weir_svg_heading(FILE *f, int left, int line_h, const char *title, const char *subtitle);

/** A time axis: its unit (the largest the span covers twice) and the
 *  step between ticks, 1, 2, 5, ... units, at most max_ticks of them. */
typedef struct weir_svg_time_axis {
    int64_t unit;
    const char *unit_name;
    int64_t step;
} weir_svg_time_axis;

void weir_svg_time_scale(int64_t span, int max_ticks, weir_svg_time_axis *out);

/** A polyline's points, written to @f as they come, leaving out a point
 *  that repeats the last, or lies on its horizontal or vertical line. */
typedef struct weir_svg_line {
    FILE *f;
    size_t written;
    bool pending; /* a point not written yet: the next may make it redundant */
    int64_t x, y;
    int64_t wx, wy; /* the last point written */
} weir_svg_line;

void weir_svg_line_point(weir_svg_line *o, int64_t x, int64_t y);
/** Write the last point. */
void weir_svg_line_flush(weir_svg_line *o);

#endif /* WEIR_TOOLS_SVG_H */
