/*
 * svg.c - what weir's SVG plots share (svg.h): text fit for XML, numbers
 * as the plots print them, the scales' steps, and polylines without
 * redundant points.
 */
#include "svg.h"

#include <stdbool.h>
#include <string.h>

__extension__ typedef unsigned __int128 u128;

#define REPLACEMENT "&#xFFFD;"

/* The length of the UTF-8 sequence at @u if it is valid and an XML 1.0
 * character (not a surrogate, U+FFFE or U+FFFF), else 0. */
static size_t utf8_char(const unsigned char *u, size_t avail)
{
    unsigned c = u[0];
    size_t n;
    uint32_t cp, min;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2, cp = c & 0x1f, min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3, cp = c & 0x0f, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4, cp = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (avail < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((u[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (u[i] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || cp == 0xfffe || cp == 0xffff)
        return 0;
    return n;
}

/* @len bytes of @s as XML text, fit for an element and for an attribute in
 * double quotes: the markup characters as entities, and a control
 * character or a byte that is not valid UTF-8 as U+FFFD, so that any name
 * (a trace file's, a key's) leaves the document well-formed. */
void weir_svg_text_n(FILE *f, const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        unsigned c = u[i];
        size_t n = 1;
        if (c == '<')
            fputs("&lt;", f);
        else if (c == '>')
            fputs("&gt;", f);
        else if (c == '&')
            fputs("&amp;", f);
        else if (c == '"')
            fputs("&quot;", f);
        else if (c == '\'')
            fputs("&#39;", f);
        else if (c < 0x20 || c == 0x7f)
            fputs(REPLACEMENT, f);
        else if (c < 0x80)
            fputc((int)c, f);
        else if ((n = utf8_char(u + i, len - i)) > 0)
            fwrite(u + i, 1, n, f);
        else
            fputs(REPLACEMENT, f);
        i += n ? n : 1;
    }
}

void weir_svg_text(FILE *f, const char *s)
{
    if (s)
        weir_svg_text_n(f, s, strlen(s));
}

/* "12,345" */
void weir_svg_count(uint64_t v, char *buf, size_t len)
{
    char digits[24];
    int n = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)v);
    size_t o = 0;
    for (int i = 0; i < n && o + 2 < len; i++) {
        if (i > 0 && (n - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
}

/* Tenths of a pixel as "123.4". */
const char *weir_svg_px(char buf[24], int64_t tenths)
{
    snprintf(buf, 24, "%s%lld.%lld", tenths < 0 ? "-" : "",
             (long long)(tenths < 0 ? -tenths : tenths) / 10,
             (long long)(tenths < 0 ? -tenths : tenths) % 10);
    return buf;
}

void weir_svg_heading(FILE *f, int left, int line_h, const char *title, const char *subtitle)
{
    fputs("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n", f);
    fprintf(f, "<text x=\"%d\" y=\"18\" font-size=\"13\" font-weight=\"bold\">", left);
    weir_svg_text(f, title);
    fputs("</text>\n", f);
    const char *s = subtitle;
    for (int i = 0; s && *s; i++) {
        const char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) : strlen(s);
        fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"#444\">", left, 36 + line_h * i);
        weir_svg_text_n(f, s, len);
        fputs("</text>\n", f);
        s = nl ? nl + 1 : NULL;
    }
}

/* 1, 2, 5, 10, 20, 50, ... after @m */
uint64_t weir_svg_next_nice(uint64_t m)
{
    uint64_t d = m;
    while (d >= 10)
        d /= 10;
    return d == 2 ? m / 2 * 5 : m * 2;
}

static const struct {
    const char *name;
    int64_t us;
} x_units[] = {
    {"d", 86400000000}, {"h", 3600000000}, {"m", 60000000}, {"s", 1000000}, {"ms", 1000}, {"us", 1},
};

void weir_svg_time_scale(int64_t span, int max_ticks, weir_svg_time_axis *out)
{
    size_t u = 0;
    while (u + 1 < sizeof(x_units) / sizeof(x_units[0]) && span / 2 < x_units[u].us)
        u++;
    out->unit = x_units[u].us;
    out->unit_name = x_units[u].name;
    uint64_t m = 1;
    while ((u128)span / ((u128)m * (uint64_t)out->unit) > (u128)max_ticks)
        m = weir_svg_next_nice(m);
    out->step = (int64_t)m * out->unit;
}

void weir_svg_line_flush(weir_svg_line *o)
{
    if (!o->pending)
        return;
    char bx[24], by[24];
    fprintf(o->f, "%s%s,%s", o->written ? " " : "", weir_svg_px(bx, o->x), weir_svg_px(by, o->y));
    o->written++;
    o->wx = o->x;
    o->wy = o->y;
    o->pending = false;
}

void weir_svg_line_point(weir_svg_line *o, int64_t x, int64_t y)
{
    if (o->pending && o->written) {
        bool same = o->x == x && o->y == y;
        bool flat = o->wy == o->y && o->y == y;
        bool upright = o->wx == o->x && o->x == x &&
                       ((o->wy <= o->y && o->y <= y) || (o->wy >= o->y && o->y >= y));
        if (same || flat || upright) {
            o->x = x;
            o->y = y;
            return;
        }
    }
    weir_svg_line_flush(o);
    o->pending = true;
    o->x = x;
    o->y = y;
}
