/*
 * test_adaptive_svg.c - the plot of `weir sim --adaptive --svg`
 * (tools/adaptive_svg.h): its data attributes give back the limits it
 * was given, names are escaped, the same input gives the same bytes, and
 * a bad plot is refused.
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "adaptive_svg.h"

#define N 40

static weir_adaptive_sim_point pts[N];

static void fill(void)
{
    for (int i = 0; i < N; i++)
        pts[i] = (weir_adaptive_sim_point){.t_us = (int64_t)(i + 1) * 100000,
                                           .limit = (uint32_t)(10 + i % 7),
                                           .knee = i < N / 2 ? 12 : 6,
                                           .rtt_us = 20000 + i * 100,
                                           .completed = 5};
}

/* The SVG of @p, malloc'd (NULL when the write failed), *@st its status. */
static char *draw(const weir_adaptive_svg_plot *p, weir_status *st)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    *st = weir_adaptive_svg_write(f, p);
    fclose(f);
    if (*st != WEIR_OK) {
        free(buf);
        return NULL;
    }
    return buf;
}

static void data_gives_back_the_limits(void **unused)
{
    (void)unused;
    fill();
    weir_adaptive_svg_series s[2] = {{"aimd", "a <note> & more", pts, N},
                                     {"g\"x\x01", NULL, pts, N / 2}};
    weir_adaptive_svg_plot p = {"title & co", "line one\nline two", s, 2};
    weir_status st;
    char *svg = draw(&p, &st);
    assert_int_equal(st, WEIR_OK);
    assert_non_null(strstr(svg, "data-controller=\"aimd\""));
    assert_non_null(strstr(svg, "data-controller=\"g&quot;x&#xFFFD;\""));
    assert_non_null(strstr(svg, "a &lt;note&gt; &amp; more"));
    assert_non_null(strstr(svg, "title &amp; co"));
    assert_null(strstr(svg, "<note>"));
    /* the first panel's data-n: every limit in order */
    const char *n = strstr(svg, "data-n=\"");
    assert_non_null(n);
    n += strlen("data-n=\"");
    for (int i = 0; i < N; i++) {
        char *end;
        unsigned long v = strtoul(n, &end, 10);
        assert_int_equal(v, pts[i].limit);
        n = end;
    }
    assert_int_equal(*n, '"');
    assert_non_null(strstr(svg, "data-t1-us=\"4000000\""));
    assert_non_null(strstr(svg, "class=\"knee\""));
    assert_non_null(strstr(svg, "class=\"latency\""));
    assert_string_equal(svg + strlen(svg) - 7, "</svg>\n");

    char *again = draw(&p, &st);
    assert_string_equal(svg, again);
    free(svg);
    free(again);
}

static void bad_plots_refused(void **unused)
{
    (void)unused;
    fill();
    weir_adaptive_svg_series s = {"aimd", NULL, pts, N};
    weir_adaptive_svg_plot p = {"t", NULL, &s, 1};
    weir_status st;
    assert_int_equal(weir_adaptive_svg_write(NULL, &p), WEIR_EINVAL);
    assert_int_equal(weir_adaptive_svg_write(stdout, NULL), WEIR_EINVAL);
    weir_adaptive_svg_plot b = p;
    b.title = NULL;
    assert_null(draw(&b, &st));
    assert_int_equal(st, WEIR_EINVAL);
    b = p, b.n_series = 0;
    assert_null(draw(&b, &st));
    b = p, b.n_series = WEIR_ADAPTIVE_SVG_MAX_SERIES + 1;
    assert_null(draw(&b, &st));
    weir_adaptive_svg_series t = s;
    t.n_points = 0;
    b = p, b.series = &t;
    assert_null(draw(&b, &st));
    t = s, t.name = NULL;
    assert_null(draw(&b, &st));
    t = s;
    pts[5].t_us = 1; /* out of order */
    assert_null(draw(&b, &st));
    fill();
    pts[3].rtt_us = -1;
    assert_null(draw(&b, &st));
    assert_int_equal(st, WEIR_EINVAL);
    /* one point at time 0, all zeros: drawn */
    weir_adaptive_sim_point z = {0};
    t = (weir_adaptive_svg_series){"z", NULL, &z, 1};
    char *svg = draw(&b, &st);
    assert_int_equal(st, WEIR_OK);
    free(svg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(data_gives_back_the_limits),
        cmocka_unit_test(bad_plots_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
