/*
 * adaptive_svg.c - the plot of `weir sim --adaptive --svg`, in the look of
 * the other plots (sim_svg.c): sans-serif at 11px, panels framed in #999
 * with #eee grid lines, the knee as a dashed #e08000 line, one colour per
 * controller; the latency in light grey against its own scale on the
 * right. Every coordinate is an integer number of tenths of a pixel.
 */
#include "adaptive_svg.h"
#include "svg.h"

#include <string.h>

__extension__ typedef unsigned __int128 u128;

enum {
    SVG_W = 720,
    LEFT = 62,
    RIGHT = 56,
    PLOT_W = SVG_W - LEFT - RIGHT,
    PANEL_H = 120,
    GAP = 34,
    BOTTOM = 44,
    LINE_H = 14,
    MAX_X_TICKS = 12,
    MAX_Y_TICKS = 5,
};

#define KNEE_COLOR "#e08000"
#define LATENCY_COLOR "#bbbbbb"

static const char *const colors[] = {"#1f77b4", "#2ca02c", "#9467bd", "#8c564b"};
#define N_COLORS (sizeof(colors) / sizeof(colors[0]))

typedef struct geom {
    int64_t t1;    /* the time axis' end (it starts at 0) */
    uint64_t ymax; /* the limit at a panel's top */
    uint64_t ystep;
    int64_t lat_max_us; /* the latency at a panel's top */
    int top;
    weir_svg_time_axis ax;
} geom;

static int64_t x10(const geom *g, int64_t t)
{
    t = t < 0 ? 0 : t > g->t1 ? g->t1 : t;
    return LEFT * 10 + (int64_t)(((u128)t * (PLOT_W * 10) * 2 + (u128)g->t1) / (2 * (u128)g->t1));
}

static int64_t y10(int panel_top, uint64_t v, uint64_t max)
{
    v = v > max ? max : v;
    u128 h = ((u128)v * (PANEL_H * 10) * 2 + max) / (2 * (u128)max);
    return (int64_t)(panel_top + PANEL_H) * 10 - (int64_t)h;
}

/* The scales: the limit's from 0 to a tenth over the highest limit or
 * knee in steps of 1, 2, 5, ...; the latency's to the next 1, 2, 5 x 10^n
 * microseconds over the highest. */
static void scales(const weir_adaptive_svg_plot *p, geom *g)
{
    uint64_t top = 1;
    int64_t lat = 1;
    for (size_t k = 0; k < p->n_series; k++)
        for (size_t i = 0; i < p->series[k].n_points; i++) {
            const weir_adaptive_sim_point *pt = &p->series[k].points[i];
            top = pt->limit > top ? pt->limit : top;
            top = pt->knee > top ? pt->knee : top;
            lat = pt->rtt_us > lat ? pt->rtt_us : lat;
            g->t1 = pt->t_us > g->t1 ? pt->t_us : g->t1;
        }
    top += (top + 9) / 10;
    uint64_t m = 1;
    while ((top + m - 1) / m > MAX_Y_TICKS)
        m = weir_svg_next_nice(m);
    g->ystep = m;
    g->ymax = (top + m - 1) / m * m;
    uint64_t l = 1;
    while (l < (uint64_t)lat)
        l = weir_svg_next_nice(l);
    g->lat_max_us = (int64_t)l;
    if (g->t1 < 1)
        g->t1 = 1;
    weir_svg_time_scale(g->t1, MAX_X_TICKS, &g->ax);
}

static void put_head(FILE *f, const weir_adaptive_svg_plot *p, const geom *g, int height,
                     int subtitles)
{
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\" "
            "data-t1-us=\"%lld\">\n",
            SVG_W, height, SVG_W, height, (long long)g->t1);
    fputs("<title>", f);
    weir_svg_text(f, p->title);
    fputs("</title>\n<desc>One panel per adaptive concurrency controller, each driving the "
          "same simulated backend. The coloured line: the controller's limit; dashed: the "
          "knee (the servers serving); grey: the mean latency (right scale). Data: "
          "polyline.limit has data-t (microseconds) and data-n (the limit then).</desc>\n",
          f);
    weir_svg_heading(f, LEFT, LINE_H, p->title, p->subtitle);
    int y = 56 + LINE_H * (subtitles > 1 ? subtitles - 1 : 0);
    fprintf(f,
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\" stroke-width=\"1.5\"/>"
            "<text x=\"%d\" y=\"%d\">the limit</text>\n",
            LEFT, y - 4, LEFT + 22, y - 4, LEFT + 27, y);
    fprintf(f,
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"" KNEE_COLOR
            "\" stroke-width=\"1.5\" stroke-dasharray=\"5,3\"/>"
            "<text x=\"%d\" y=\"%d\">the knee: servers serving</text>\n",
            LEFT + 100, y - 4, LEFT + 122, y - 4, LEFT + 127, y);
    fprintf(f,
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"" LATENCY_COLOR
            "\" stroke-width=\"1.5\"/><text x=\"%d\" y=\"%d\">mean latency (right)</text>\n",
            LEFT + 300, y - 4, LEFT + 322, y - 4, LEFT + 327, y);
}

static void put_grid(FILE *f, const geom *g, int y0)
{
    char a[32], b[24], c[24];
    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#999\"/>\n",
            LEFT, y0, PLOT_W, PANEL_H);
    for (uint64_t v = 0; v <= g->ymax; v += g->ystep) {
        int64_t y = y10(y0, v, g->ymax);
        weir_svg_count(v, a, sizeof(a));
        fprintf(f, "<line x1=\"%d\" y1=\"%s\" x2=\"%d\" y2=\"%s\" stroke=\"#eee\"/>\n", LEFT + 1,
                weir_svg_px(b, y), LEFT + PLOT_W - 1, weir_svg_px(c, y));
        fprintf(f, "<text x=\"%d\" y=\"%s\" text-anchor=\"end\">%s</text>\n", LEFT - 5,
                weir_svg_px(b, y + 40), a);
    }
    /* the latency's scale: 0 and its top, in ms (or us below a ms) */
    bool ms = g->lat_max_us >= 1000;
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" fill=\"#888\">%lld%s</text>"
            "<text x=\"%d\" y=\"%d\" fill=\"#888\">0</text>\n",
            LEFT + PLOT_W + 5, y0 + 8, (long long)(ms ? g->lat_max_us / 1000 : g->lat_max_us),
            ms ? "ms" : "us", LEFT + PLOT_W + 5, y0 + PANEL_H + 4);
}

/* @what of the points as a step line: 0 limit, 1 knee, 2 latency. */
static void put_line(FILE *f, const geom *g, int y0, const weir_adaptive_svg_series *se, int what)
{
    weir_svg_line o = {.f = f};
    uint64_t prev = 0;
    for (size_t i = 0; i < se->n_points; i++) {
        const weir_adaptive_sim_point *pt = &se->points[i];
        uint64_t v = what == 0 ? pt->limit : what == 1 ? pt->knee : (uint64_t)pt->rtt_us;
        uint64_t max = what == 2 ? (uint64_t)g->lat_max_us : g->ymax;
        int64_t x = x10(g, pt->t_us);
        if (i > 0)
            weir_svg_line_point(&o, x, y10(y0, prev, max));
        weir_svg_line_point(&o, x, y10(y0, v, max));
        prev = v;
    }
    weir_svg_line_flush(&o);
}

static void put_panel(FILE *f, const geom *g, size_t k, const weir_adaptive_svg_series *se)
{
    const char *color = colors[k % N_COLORS];
    int y0 = g->top + (int)k * (PANEL_H + GAP);
    fputs("<g data-controller=\"", f);
    weir_svg_text(f, se->name);
    fputs("\">\n", f);
    put_grid(f, g, y0);
    fputs("<polyline class=\"latency\" fill=\"none\" stroke=\"" LATENCY_COLOR
          "\" stroke-width=\"1\" points=\"",
          f);
    put_line(f, g, y0, se, 2);
    fputs("\"/>\n<polyline class=\"knee\" fill=\"none\" stroke=\"" KNEE_COLOR
          "\" stroke-width=\"1.5\" stroke-dasharray=\"5,3\" points=\"",
          f);
    put_line(f, g, y0, se, 1);
    fprintf(f, "\"/>\n<polyline class=\"limit\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"",
            color);
    fputs(" data-t=\"", f);
    for (size_t i = 0; i < se->n_points; i++)
        fprintf(f, "%s%lld", i ? " " : "", (long long)se->points[i].t_us);
    fputs("\" data-n=\"", f);
    for (size_t i = 0; i < se->n_points; i++)
        fprintf(f, "%s%u", i ? " " : "", se->points[i].limit);
    fputs("\" points=\"", f);
    put_line(f, g, y0, se, 0);
    fputs("\"/>\n", f);
    fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"%s\" font-weight=\"bold\">", LEFT, y0 - 5, color);
    weir_svg_text(f, se->name);
    fputs("</text>\n", f);
    if (se->note && *se->note) {
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" fill=\"#444\">", LEFT + PLOT_W,
                y0 - 5);
        weir_svg_text(f, se->note);
        fputs("</text>\n", f);
    }
    fprintf(f,
            "<text transform=\"translate(14,%d) rotate(-90)\" text-anchor=\"middle\" "
            "fill=\"#444\">limit</text>\n</g>\n",
            y0 + PANEL_H / 2);
}

static void put_x_axis(FILE *f, const geom *g, int yb)
{
    char a[24], b[24];
    for (int64_t t = 0; t <= g->t1; t += g->ax.step) {
        int64_t x = x10(g, t);
        fprintf(f, "<line x1=\"%s\" y1=\"%d\" x2=\"%s\" y2=\"%d\" stroke=\"#999\"/>\n",
                weir_svg_px(a, x), yb, weir_svg_px(b, x), yb + 4);
        fprintf(f, "<text x=\"%s\" y=\"%d\" text-anchor=\"middle\">%lld</text>\n",
                weir_svg_px(a, x), yb + 16, (long long)(t / g->ax.unit));
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#444\">time (%s)</text>\n",
            LEFT + PLOT_W / 2, yb + 34, g->ax.unit_name);
}

weir_status weir_adaptive_svg_write(FILE *f, const weir_adaptive_svg_plot *p)
{
    if (!f || !p || !p->title || !p->series || p->n_series < 1 ||
        p->n_series > WEIR_ADAPTIVE_SVG_MAX_SERIES)
        return WEIR_EINVAL;
    for (size_t k = 0; k < p->n_series; k++) {
        const weir_adaptive_svg_series *s = &p->series[k];
        if (!s->name || !s->points || s->n_points < 1 || s->n_points > WEIR_ADAPTIVE_SIM_MAX_POINTS)
            return WEIR_EINVAL;
        for (size_t i = 0; i < s->n_points; i++)
            if (s->points[i].t_us < 0 || s->points[i].rtt_us < 0 ||
                (i > 0 && s->points[i].t_us < s->points[i - 1].t_us))
                return WEIR_EINVAL;
    }
    geom g;
    memset(&g, 0, sizeof(g));
    scales(p, &g);
    int subtitles = 0;
    for (const char *s = p->subtitle; s && *s; subtitles++) {
        const char *nl = strchr(s, '\n');
        s = nl ? nl + 1 : NULL;
    }
    g.top = 84 + LINE_H * (subtitles > 1 ? subtitles - 1 : 0);
    int yb = g.top + (int)p->n_series * (PANEL_H + GAP) - GAP;
    put_head(f, p, &g, yb + BOTTOM, subtitles);
    for (size_t k = 0; k < p->n_series; k++)
        put_panel(f, &g, k, &p->series[k]);
    put_x_axis(f, &g, yb);
    fputs("</svg>\n", f);
    return WEIR_OK;
}
