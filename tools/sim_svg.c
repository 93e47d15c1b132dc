/*
 * sim_svg.c - the plot of `weir sim --svg`.
 *
 * The SVG is plain text written here with fprintf: no library, since a
 * plot is a few dozen lines of XML. Its look is that of the other plots in
 * docs/ (docs/hybrid_overshoot.svg): sans-serif at 11px, a bold title and
 * grey notes, panels framed in #999 with #eee grid lines, the limit as a
 * dashed #e08000 line, one colour per panel.
 *
 * Every coordinate is an integer number of tenths of a pixel, computed in
 * 128-bit integers, so the same input gives the same bytes everywhere.
 */
#include "sim_svg.h"
#include "sim.h"
#include "svg.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

__extension__ typedef unsigned __int128 u128;

enum {
    SVG_W = 720,
    LEFT = 62,
    RIGHT = 16,
    PLOT_W = SVG_W - LEFT - RIGHT,
    PANEL_H = 80,
    GAP = 34,
    BOTTOM = 44,
    LINE_H = 14,
    DENIED_TICK = 6,
    /* a char of 11px sans-serif is about this wide, for the legend */
    CHAR_W = 6,
    /* the same in tenths of a pixel, rounded up, and in bold */
    CHAR_W10 = 63,
    BOLD_CHAR_W10 = 66,
    MAX_X_TICKS = 12,
    MAX_Y_TICKS = 4,
    /* window boundaries are drawn when there are at most this many */
    MAX_BOUNDARIES = 60,
};

/* Limits and counts above this are refused: the scale's arithmetic has
 * room to spare, and no simulation comes near it. */
#define MAX_VALUE ((uint64_t)1 << 48)

#define LIMIT_COLOR "#e08000"
#define DENIED_COLOR "#d62728"

/* the same palette as the other plots (adaptive_svg.c) */
static const char *const colors[] = {"#1f77b4", "#2ca02c", "#9467bd", "#8c564b",
                                     "#e377c2", "#1a9aa8", "#7f7f7f", "#8a8a14"};
#define N_COLORS (sizeof(colors) / sizeof(colors[0]))

static int64_t sat_add(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

/* ------------------------------------------------------------------------ */
/* The sliding count                                                        */

weir_status weir_sim_svg_steps(const weir_sim_svg_event *adm, size_t n, int64_t window_us,
                               weir_sim_svg_step **out, size_t *n_out)
{
    if (!out || !n_out)
        return WEIR_EINVAL;
    *out = NULL;
    *n_out = 0;
    if (window_us <= 0 || (n && !adm))
        return WEIR_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (adm[i].t_us < 0 || (i > 0 && adm[i].t_us < adm[i - 1].t_us))
            return WEIR_EINVAL;
    if (n == 0)
        return WEIR_OK;
    if (n > SIZE_MAX / 2 / sizeof(weir_sim_svg_step))
        return WEIR_ENOMEM;
    weir_sim_svg_step *steps = malloc(2 * n * sizeof(weir_sim_svg_step));
    if (!steps)
        return WEIR_ENOMEM;
    /* Merge the admissions (a) with the same requests leaving the window
     * (e): (t - window, t] holds an admission at a while a <= t < a +
     * window. */
    size_t a = 0, e = 0, k = 0;
    uint64_t cur = 0;
    while (e < n) {
        int64_t te = sat_add(adm[e].t_us, window_us);
        int64_t t = a < n && adm[a].t_us < te ? adm[a].t_us : te;
        uint64_t before = cur;
        for (; a < n && adm[a].t_us == t; a++)
            if (__builtin_add_overflow(cur, adm[a].cost, &cur)) {
                free(steps);
                return WEIR_EINVAL;
            }
        for (; e < n && sat_add(adm[e].t_us, window_us) == t; e++)
            cur -= adm[e].cost;
        if (cur != before)
            steps[k++] = (weir_sim_svg_step){t, cur};
    }
    *out = steps;
    *n_out = k;
    return WEIR_OK;
}

/* ------------------------------------------------------------------------ */
/* Scales                                                                   */

typedef struct geom {
    int64_t t0, t1; /* the time axis' ends */
    uint64_t ymax;  /* the value at a panel's top */
    uint64_t ystep; /* between two grid lines */
    int top;        /* the first panel's top */
    int subtitles;  /* lines under the title */
    int64_t x_unit; /* the time axis' unit, microseconds */
    const char *x_unit_name;
    int64_t x_step; /* between two ticks, microseconds */
} geom;

static int64_t x10(const geom *g, int64_t t)
{
    t = t < g->t0 ? g->t0 : t > g->t1 ? g->t1 : t;
    u128 span = (u128)(g->t1 - g->t0);
    u128 v = ((u128)(t - g->t0) * (PLOT_W * 10) * 2 + span) / (2 * span);
    return LEFT * 10 + (int64_t)v;
}

static int64_t y10(const geom *g, int panel_top, uint64_t v)
{
    v = v > g->ymax ? g->ymax : v;
    u128 h = ((u128)v * (PANEL_H * 10) * 2 + g->ymax) / (2 * (u128)g->ymax);
    return (int64_t)(panel_top + PANEL_H) * 10 - (int64_t)h;
}

/* Grid lines at multiples of the limit (times 1, 2, 5, 10, ...), the top a
 * tenth or more above the highest value, so a line at the limit or at a
 * peak is never on the frame. */
static void y_scale(uint64_t limit, uint64_t peak, geom *g)
{
    uint64_t top = peak > limit ? peak : limit;
    top += (top + 9) / 10;
    uint64_t m = 1;
    while ((top + limit * m - 1) / (limit * m) > MAX_Y_TICKS)
        m = weir_svg_next_nice(m);
    g->ystep = limit * m;
    g->ymax = (top + g->ystep - 1) / g->ystep * g->ystep;
}

/* The steps as a line, exact to a pixel column: a column where the count
 * changes more than once is drawn from its least to its most. */
static void draw_steps(FILE *f, const geom *g, int panel_top, const weir_sim_svg_step *st, size_t n)
{
    weir_svg_line o = {.f = f};
    uint64_t cur = 0;
    weir_svg_line_point(&o, x10(g, g->t0), y10(g, panel_top, 0));
    for (size_t i = 0; i < n;) {
        int64_t x = x10(g, st[i].t_us);
        uint64_t lo = cur, hi = cur, last = cur;
        size_t j = i;
        for (; j < n && x10(g, st[j].t_us) / 10 == x / 10; j++) {
            last = st[j].n;
            lo = last < lo ? last : lo;
            hi = last > hi ? last : hi;
        }
        weir_svg_line_point(&o, x, y10(g, panel_top, cur));
        if (j - i > 1) {
            weir_svg_line_point(&o, x, y10(g, panel_top, hi));
            weir_svg_line_point(&o, x, y10(g, panel_top, lo));
        }
        weir_svg_line_point(&o, x, y10(g, panel_top, last));
        cur = last;
        i = j;
    }
    weir_svg_line_point(&o, x10(g, g->t1), y10(g, panel_top, cur));
    weir_svg_line_flush(&o);
}

/* ------------------------------------------------------------------------ */
/* The document                                                             */

typedef struct panel {
    weir_sim_svg_step *steps;
    size_t n_steps;
    uint64_t peak;
    uint64_t admitted; /* units */
} panel;

static void put_legend(FILE *f, const weir_sim_svg_plot *p, const geom *g)
{
    char w[32], lim[32], text[128];
    weir_sim_format_duration(p->window_us, w, sizeof(w));
    weir_svg_count(p->limit, lim, sizeof(lim));
    int y = 56 + LINE_H * (g->subtitles > 1 ? g->subtitles - 1 : 0);
    int x = LEFT;

    snprintf(text, sizeof(text), "admitted in the last %s, at each moment", w);
    fprintf(
        f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\" stroke-width=\"1.5\"/>\n",
        x, y - 4, x + 22, y - 4);
    fprintf(f, "<text x=\"%d\" y=\"%d\">%s</text>\n", x + 27, y, text);
    x += 27 + CHAR_W * (int)strlen(text) + 18;

    snprintf(text, sizeof(text), "the limit: %s per %s", lim, w);
    fprintf(f,
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"" LIMIT_COLOR
            "\" stroke-width=\"1.5\" stroke-dasharray=\"5,3\"/>\n",
            x, y - 4, x + 22, y - 4);
    fprintf(f, "<text x=\"%d\" y=\"%d\">%s</text>\n", x + 27, y, text);
    x += 27 + CHAR_W * (int)strlen(text) + 18;

    fprintf(f,
            "<path d=\"M%d,%dv-%dM%d,%dv-%dM%d,%dv-%d\" stroke=\"" DENIED_COLOR
            "\" stroke-width=\"1\"/>\n",
            x + 4, y, DENIED_TICK, x + 11, y, DENIED_TICK, x + 18, y, DENIED_TICK);
    fprintf(f, "<text x=\"%d\" y=\"%d\">a denied request</text>\n", x + 27, y);
}

static void put_head(FILE *f, const weir_sim_svg_plot *p, const geom *g, int height)
{
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\" "
            "data-limit=\"%llu\" data-window-us=\"%lld\" data-t0-us=\"%lld\" "
            "data-t1-us=\"%lld\">\n",
            SVG_W, height, SVG_W, height, (unsigned long long)p->limit, (long long)p->window_us,
            (long long)g->t0, (long long)g->t1);
    fputs("<title>", f);
    weir_svg_text(f, p->title);
    fputs("</title>\n", f);
    fputs("<desc>One panel per algorithm, all on the same requests. The line: how many it "
          "admitted in the window of the limit's length ending at each moment (a sliding "
          "count, exact). Data: each g has data-algorithm, data-admitted, data-denied and "
          "data-peak (the most admitted in any window); each polyline.admitted has data-t "
          "(microseconds) and data-n: from data-t[i] on, data-n[i] were admitted in the "
          "window ending then (0 before the first); they are left out past 10000 "
          "steps.</desc>\n",
          f);
    weir_svg_heading(f, LEFT, LINE_H, p->title, p->subtitle);
    put_legend(f, p, g);
}

static void put_panel(FILE *f, const weir_sim_svg_plot *p, const geom *g, size_t k, const panel *pa)
{
    const weir_sim_svg_series *se = &p->series[k];
    const char *color = colors[k % N_COLORS];
    int y0 = g->top + (int)k * (PANEL_H + GAP);
    char a[32], b[32], c[32];

    fputs("<g data-algorithm=\"", f);
    weir_svg_text(f, se->name);
    fprintf(f, "\" data-admitted=\"%llu\" data-denied=\"%llu\" data-peak=\"%llu\">\n",
            (unsigned long long)pa->admitted, (unsigned long long)se->n_denied,
            (unsigned long long)pa->peak);
    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#999\"/>\n",
            LEFT, y0, PLOT_W, PANEL_H);
    for (uint64_t v = 0; v <= g->ymax; v += g->ystep) {
        int64_t y = y10(g, y0, v);
        weir_svg_count(v, a, sizeof(a));
        fprintf(f, "<line x1=\"%d\" y1=\"%s\" x2=\"%d\" y2=\"%s\" stroke=\"#eee\"/>\n", LEFT + 1,
                weir_svg_px(b, y), LEFT + PLOT_W - 1, weir_svg_px(c, y));
        fprintf(f, "<text x=\"%d\" y=\"%s\" text-anchor=\"end\">%s</text>\n", LEFT - 5,
                weir_svg_px(b, y + 40), a);
    }
    if ((g->t1 - g->t0) / p->window_us <= MAX_BOUNDARIES)
        for (int64_t t = g->t0 + p->window_us; t < g->t1; t += p->window_us)
            fprintf(f,
                    "<line x1=\"%s\" y1=\"%d\" x2=\"%s\" y2=\"%d\" stroke=\"#ccc\" "
                    "stroke-dasharray=\"1,3\"/>\n",
                    weir_svg_px(b, x10(g, t)), y0 + 1, weir_svg_px(c, x10(g, t)), y0 + PANEL_H - 1);
    int64_t ly = y10(g, y0, p->limit);
    fprintf(f,
            "<line class=\"limit\" x1=\"%d\" y1=\"%s\" x2=\"%d\" y2=\"%s\" stroke=\"" LIMIT_COLOR
            "\" stroke-width=\"1.5\" stroke-dasharray=\"5,3\"/>\n",
            LEFT, weir_svg_px(b, ly), LEFT + PLOT_W, weir_svg_px(c, ly));

    fprintf(f, "<polyline class=\"admitted\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"",
            color);
    if (pa->n_steps <= WEIR_SIM_SVG_MAX_EXACT) {
        fputs(" data-t=\"", f);
        for (size_t i = 0; i < pa->n_steps; i++)
            fprintf(f, "%s%lld", i ? " " : "", (long long)pa->steps[i].t_us);
        fputs("\" data-n=\"", f);
        for (size_t i = 0; i < pa->n_steps; i++)
            fprintf(f, "%s%llu", i ? " " : "", (unsigned long long)pa->steps[i].n);
        fputs("\"", f);
    }
    fputs(" points=\"", f);
    draw_steps(f, g, y0, pa->steps, pa->n_steps);
    fputs("\"/>\n", f);

    if (se->n_denied) {
        fprintf(f, "<path class=\"denied\" stroke=\"" DENIED_COLOR "\" stroke-width=\"1\" d=\"");
        int64_t last = -1;
        for (size_t i = 0; i < se->n_denied; i++) {
            int64_t x = x10(g, se->denied_us[i]);
            if (x / 10 == last)
                continue; /* one tick a pixel column */
            last = x / 10;
            fprintf(f, "M%s,%dv-%d", weir_svg_px(b, x), y0 + PANEL_H, DENIED_TICK);
        }
        fputs("\"/>\n", f);
    }

    /* the heading: the name and the peak against the limit; on the right,
     * in grey, the note (when there is room) and what it admitted and
     * denied */
    char peak[96], counts[96];
    weir_sim_format_duration(p->window_us, a, sizeof(a));
    weir_svg_count(pa->peak, b, sizeof(b));
    int n = snprintf(peak, sizeof(peak), ": at most %s in any %s", b, a);
    if (pa->peak > p->limit) {
        uint64_t hundredths = (pa->peak * 100 + p->limit / 2) / p->limit;
        weir_sim_format_milli(hundredths * 10, "x the limit", b, sizeof(b));
        snprintf(peak + n, sizeof(peak) - (size_t)n, ", %s", b);
    }
    weir_svg_count(pa->admitted, b, sizeof(b));
    weir_svg_count(se->n_denied, c, sizeof(c));
    snprintf(counts, sizeof(counts), "admitted %s, denied %s", b, c);
    size_t note = se->note ? strlen(se->note) : 0;
    size_t left = (strlen(se->name) + strlen(peak)) * BOLD_CHAR_W10;
    size_t right = (note + 2 + strlen(counts)) * CHAR_W10;
    if (left + right > (PLOT_W - 12) * 10)
        note = 0; /* it is in the table too */

    fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"%s\" font-weight=\"bold\">", LEFT, y0 - 5, color);
    weir_svg_text(f, se->name);
    fprintf(f, "%s</text>\n", peak);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" fill=\"#444\">", LEFT + PLOT_W, y0 - 5);
    if (note) {
        weir_svg_text(f, se->note);
        fputs("; ", f);
    }
    fprintf(f, "%s</text>\n", counts);
    fprintf(f,
            "<text transform=\"translate(14,%d) rotate(-90)\" text-anchor=\"middle\" "
            "fill=\"#444\">admitted</text>\n",
            y0 + PANEL_H / 2);
    fputs("</g>\n", f);
}

static void put_x_axis(FILE *f, const weir_sim_svg_plot *p, const geom *g, int yb)
{
    char a[24], b[24], w[32];
    for (int64_t t = 0; t <= g->t1 - g->t0; t += g->x_step) {
        int64_t x = x10(g, g->t0 + t);
        fprintf(f, "<line x1=\"%s\" y1=\"%d\" x2=\"%s\" y2=\"%d\" stroke=\"#999\"/>\n",
                weir_svg_px(a, x), yb, weir_svg_px(b, x), yb + 4);
        fprintf(f, "<text x=\"%s\" y=\"%d\" text-anchor=\"middle\">%lld</text>\n",
                weir_svg_px(a, x), yb + 16, (long long)(t / g->x_unit));
    }
    weir_sim_format_duration(p->window_us, w, sizeof(w));
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#444\">time (%s)",
            LEFT + PLOT_W / 2, yb + 34, g->x_unit_name);
    if (g->t0)
        fprintf(f, " from %lldus", (long long)g->t0);
    if ((g->t1 - g->t0) / p->window_us <= MAX_BOUNDARIES)
        fprintf(f, "; dotted: every %s from 0, where a fixed window starts counting again", w);
    fputs("</text>\n", f);
}

static weir_status check_plot(const weir_sim_svg_plot *p)
{
    if (!p->title || p->limit < 1 || p->limit > MAX_VALUE || p->window_us <= 0 || !p->series ||
        p->n_series < 1 || p->n_series > WEIR_SIM_SVG_MAX_SERIES)
        return WEIR_EINVAL;
    for (size_t k = 0; k < p->n_series; k++) {
        const weir_sim_svg_series *s = &p->series[k];
        if (!s->name || (s->n_denied && !s->denied_us))
            return WEIR_EINVAL;
        for (size_t i = 0; i < s->n_denied; i++)
            if (s->denied_us[i] < 0 || (i > 0 && s->denied_us[i] < s->denied_us[i - 1]))
                return WEIR_EINVAL;
    }
    return WEIR_OK;
}

/* The panels' steps and peaks, and the scales they need. */
static weir_status measure(const weir_sim_svg_plot *p, panel *pa, geom *g)
{
    int64_t lo = INT64_MAX, hi = 0;
    uint64_t peak = 0;
    for (size_t k = 0; k < p->n_series; k++) {
        const weir_sim_svg_series *s = &p->series[k];
        weir_status st = weir_sim_svg_steps(s->admitted, s->n_admitted, p->window_us, &pa[k].steps,
                                            &pa[k].n_steps);
        if (st != WEIR_OK)
            return st;
        for (size_t i = 0; i < pa[k].n_steps; i++) {
            pa[k].peak = pa[k].steps[i].n > pa[k].peak ? pa[k].steps[i].n : pa[k].peak;
            hi = pa[k].steps[i].t_us > hi ? pa[k].steps[i].t_us : hi;
        }
        for (size_t i = 0; i < s->n_admitted; i++)
            pa[k].admitted += s->admitted[i].cost;
        if (pa[k].peak > MAX_VALUE)
            return WEIR_EINVAL;
        peak = pa[k].peak > peak ? pa[k].peak : peak;
        if (s->n_admitted && s->admitted[0].t_us < lo)
            lo = s->admitted[0].t_us;
        if (s->n_denied) {
            lo = s->denied_us[0] < lo ? s->denied_us[0] : lo;
            hi = s->denied_us[s->n_denied - 1] > hi ? s->denied_us[s->n_denied - 1] : hi;
        }
    }
    if (lo == INT64_MAX)
        lo = 0;
    g->t0 = lo / p->window_us * p->window_us;
    if (hi < sat_add(g->t0, p->window_us))
        hi = sat_add(g->t0, p->window_us);
    /* a little room on the right, so a last step down is not on the frame */
    g->t1 = sat_add(hi, (hi - g->t0) / 50 > 0 ? (hi - g->t0) / 50 : 1);
    y_scale(p->limit, peak, g);
    weir_svg_time_axis ax;
    weir_svg_time_scale(g->t1 - g->t0, MAX_X_TICKS, &ax);
    g->x_unit = ax.unit;
    g->x_unit_name = ax.unit_name;
    g->x_step = ax.step;
    return WEIR_OK;
}

weir_status weir_sim_svg_write(FILE *f, const weir_sim_svg_plot *p)
{
    if (!f || !p)
        return WEIR_EINVAL;
    weir_status st = check_plot(p);
    if (st != WEIR_OK)
        return st;
    panel pa[WEIR_SIM_SVG_MAX_SERIES];
    memset(pa, 0, sizeof(pa));
    geom g;
    memset(&g, 0, sizeof(g));
    st = measure(p, pa, &g);
    if (st == WEIR_OK) {
        for (const char *s = p->subtitle; s && *s; g.subtitles++) {
            const char *nl = strchr(s, '\n');
            s = nl ? nl + 1 : NULL;
        }
        g.top = 84 + LINE_H * (g.subtitles > 1 ? g.subtitles - 1 : 0);
        int yb = g.top + (int)p->n_series * (PANEL_H + GAP) - GAP;
        put_head(f, p, &g, yb + BOTTOM);
        for (size_t k = 0; k < p->n_series; k++)
            put_panel(f, p, &g, k, &pa[k]);
        put_x_axis(f, p, &g, yb);
        fputs("</svg>\n", f);
    }
    for (size_t k = 0; k < p->n_series; k++)
        free(pa[k].steps);
    return st;
}
