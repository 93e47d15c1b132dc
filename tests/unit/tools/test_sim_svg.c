/*
 * test_sim_svg.c - the plot of `weir sim --svg`: the sliding count it
 * draws, the document it writes for a small known run (well-formed, one
 * polyline a series, the limit's line where the scale puts the limit, every
 * name escaped, the same bytes twice) and the decisions the simulator
 * records for it. The option itself is tested with the rest of the command
 * line in test_sim.c.
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sim.h"
#include "sim_svg.h"
#include "trace.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------------ */
/* The sliding count                                                        */

static void steps_are_the_exact_sliding_count(void **unused)
{
    (void)unused;
    /* window 10: (t - 10, t] */
    const weir_sim_svg_event adm[] = {{0, 1}, {2, 1}, {2, 1}, {5, 3}, {10, 1}, {12, 1}};
    const weir_sim_svg_step want[] = {
        {0, 1},
        {2, 3},
        {5, 6},
        /* at 10 the request of 0 leaves as one comes: no step */
        {12, 5}, /* +1, and the two of 2 leave */
        {15, 2},
        {20, 1},
        {22, 0},
    };
    weir_sim_svg_step *st = NULL;
    size_t n = 0;
    assert_int_equal(weir_sim_svg_steps(adm, N_OF(adm), 10, &st, &n), WEIR_OK);
    assert_int_equal(n, N_OF(want));
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(st[i].t_us, want[i].t_us);
        assert_int_equal(st[i].n, want[i].n);
    }
    free(st);

    assert_int_equal(weir_sim_svg_steps(NULL, 0, 10, &st, &n), WEIR_OK);
    assert_null(st);
    assert_int_equal(n, 0);

    const weir_sim_svg_event unsorted[] = {{5, 1}, {4, 1}};
    assert_int_equal(weir_sim_svg_steps(unsorted, 2, 10, &st, &n), WEIR_EINVAL);
    const weir_sim_svg_event negative[] = {{-1, 1}};
    assert_int_equal(weir_sim_svg_steps(negative, 1, 10, &st, &n), WEIR_EINVAL);
    assert_int_equal(weir_sim_svg_steps(adm, N_OF(adm), 0, &st, &n), WEIR_EINVAL);
    const weir_sim_svg_event huge[] = {{0, UINT64_MAX}, {1, 1}};
    assert_int_equal(weir_sim_svg_steps(huge, 2, 10, &st, &n), WEIR_EINVAL);
    assert_null(st);
}

/* ------------------------------------------------------------------------ */
/* The document                                                             */

/* not inlined: gcc 12 then takes open_memstream()'s buffer for the local
 * variable that receives its address (a false -Wdangling-pointer) */
__attribute__((noinline)) static char *render(const weir_sim_svg_plot *p)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(weir_sim_svg_write(f, p), WEIR_OK);
    assert_int_equal(fclose(f), 0);
    return buf;
}

static size_t count(const char *s, const char *what)
{
    size_t n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

/* An entity the writer makes; its length, or fails. */
static size_t entity(const char *p)
{
    static const char *const ok[] = {"&lt;", "&gt;", "&amp;", "&quot;", "&#39;", "&#xFFFD;"};
    for (size_t i = 0; i < N_OF(ok); i++)
        if (strncmp(p, ok[i], strlen(ok[i])) == 0)
            return strlen(ok[i]);
    fail_msg("a bare '&' at '%.20s'", p);
    return 1;
}

/* Well-formed enough to be sure: one root, every tag closed in order,
 * attribute values in double quotes, no '<' or '>' out of place, and '&'
 * only in an entity. (The integration test parses the real output with an
 * XML parser.) */
static void check_xml(const char *s)
{
    const char *names[32];
    size_t lens[32];
    int depth = 0, roots = 0;
    for (const char *p = s; *p;) {
        if (*p == '&') {
            p += entity(p);
            continue;
        }
        if (*p == '>')
            fail_msg("a bare '>' at '%.20s'", p);
        if (*p != '<') {
            p++;
            continue;
        }
        const char *end = strchr(p, '>');
        assert_non_null(end);
        size_t quotes = 0;
        for (const char *q = p + 1; q < end; q++) {
            assert_true(*q != '<');
            quotes += *q == '"';
            if (*q == '&')
                q += entity(q) - 1;
        }
        assert_int_equal(quotes % 2, 0);
        bool closing = p[1] == '/', empty = end[-1] == '/';
        const char *name = p + 1 + closing;
        size_t len = strcspn(name, " />");
        assert_true(len > 0);
        if (closing) {
            assert_true(depth > 0);
            depth--;
            if (lens[depth] != len || strncmp(names[depth], name, len) != 0)
                fail_msg("</%.*s> closes <%.*s>", (int)len, name, (int)lens[depth], names[depth]);
        } else if (!empty) {
            roots += depth == 0;
            assert_true(depth < 32);
            names[depth] = name;
            lens[depth++] = len;
        } else {
            roots += depth == 0;
        }
        p = end + 1;
    }
    assert_int_equal(depth, 0);
    assert_int_equal(roots, 1);
}

/* The value of attribute @attr in the first element after @from that has
 * it, into @buf. */
static const char *attr_after(const char *from, const char *attr, char *buf, size_t len)
{
    char key[64];
    snprintf(key, sizeof(key), " %s=\"", attr);
    const char *p = strstr(from, key);
    assert_non_null(p);
    p += strlen(key);
    size_t n = strcspn(p, "\"");
    assert_true(n < len);
    memcpy(buf, p, n);
    buf[n] = '\0';
    return buf;
}

/* A run of 4 per 10us: "burst" admits 8 at once at 5 (and denies 2 at
 * 6), "log" admits 4 at 20 and denies nothing, "quiet" admits nothing. */
static const weir_sim_svg_event burst_adm[] = {{5, 8}};
static const int64_t burst_den[] = {6, 6};
static const weir_sim_svg_event log_adm[] = {{20, 1}, {21, 1}, {22, 2}};

static weir_sim_svg_plot small_plot(weir_sim_svg_series *series)
{
    series[0] = (weir_sim_svg_series){.name = "burst",
                                      .note = "a <note> & \"more\"",
                                      .admitted = burst_adm,
                                      .n_admitted = 1,
                                      .denied_us = burst_den,
                                      .n_denied = 2};
    series[1] = (weir_sim_svg_series){.name = "log", .admitted = log_adm, .n_admitted = 3};
    series[2] = (weir_sim_svg_series){.name = "q<&\">", .note = ""};
    return (weir_sim_svg_plot){
        .title = "weir sim <boundary> & \"friends\"",
        .subtitle = "trace a&b.csv",
        .limit = 4,
        .window_us = 10,
        .series = series,
        .n_series = 3,
    };
}

static void writes_a_well_formed_plot_of_a_small_run(void **unused)
{
    (void)unused;
    weir_sim_svg_series series[3];
    weir_sim_svg_plot p = small_plot(series);
    char *svg = render(&p);
    check_xml(svg);
    assert_int_equal(strncmp(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\"", 39), 0);
    assert_int_equal(count(svg, "<polyline "), 3);
    assert_int_equal(count(svg, "<line class=\"limit\""), 3);
    assert_int_equal(count(svg, "<g data-algorithm="), 3);
    assert_int_equal(count(svg, "<path class=\"denied\""), 1);

    char buf[256];
    assert_string_equal(attr_after(svg, "data-limit", buf, sizeof(buf)), "4");
    assert_string_equal(attr_after(svg, "data-window-us", buf, sizeof(buf)), "10");
    assert_string_equal(attr_after(svg, "data-t0-us", buf, sizeof(buf)), "0");

    /* the peaks and the exact sliding counts */
    const char *g0 = strstr(svg, "<g data-algorithm=\"burst\"");
    const char *g1 = strstr(svg, "<g data-algorithm=\"log\"");
    const char *g2 = strstr(svg, "<g data-algorithm=\"q&lt;&amp;&quot;&gt;\"");
    assert_non_null(g0);
    assert_non_null(g1);
    assert_non_null(g2);
    assert_true(g0 < g1 && g1 < g2);
    assert_string_equal(attr_after(g0, "data-admitted", buf, sizeof(buf)), "8");
    assert_string_equal(attr_after(g0, "data-denied", buf, sizeof(buf)), "2");
    assert_string_equal(attr_after(g0, "data-peak", buf, sizeof(buf)), "8");
    assert_string_equal(attr_after(g0, "data-t", buf, sizeof(buf)), "5 15");
    assert_string_equal(attr_after(g0, "data-n", buf, sizeof(buf)), "8 0");
    assert_string_equal(attr_after(g1, "data-peak", buf, sizeof(buf)), "4");
    assert_string_equal(attr_after(g1, "data-t", buf, sizeof(buf)), "20 21 22 30 31 32");
    assert_string_equal(attr_after(g1, "data-n", buf, sizeof(buf)), "1 2 4 3 2 0");
    assert_string_equal(attr_after(g2, "data-peak", buf, sizeof(buf)), "0");
    assert_string_equal(attr_after(g2, "data-t", buf, sizeof(buf)), "");

    /* The scale: peak 8, a tenth more is 9, grid lines every 4 (the limit)
     * up to 12. The first panel is 80px tall from y = 84, so the limit is
     * at 164 - 80 x 4/12 = 137.3; the second panel starts 114px lower. */
    assert_string_equal(attr_after(g0, "y1", buf, sizeof(buf)), "164.0"); /* grid at 0 */
    const char *lim0 = strstr(g0, "<line class=\"limit\"");
    const char *lim1 = strstr(g1, "<line class=\"limit\"");
    assert_string_equal(attr_after(lim0, "y1", buf, sizeof(buf)), "137.3");
    assert_string_equal(attr_after(lim0, "y2", buf, sizeof(buf)), "137.3");
    assert_string_equal(attr_after(lim1, "y1", buf, sizeof(buf)), "251.3");
    /* a grid line and its label at the limit, and the series at 4 on it */
    assert_non_null(strstr(g0, "y1=\"137.3\" x2=\"703\" y2=\"137.3\" stroke=\"#eee\""));
    assert_non_null(strstr(g0, "text-anchor=\"end\">4</text>"));
    /* the log's line reaches the limit's y and never goes above it */
    const char *pts1 = attr_after(strstr(g1, "<polyline"), "points", buf, sizeof(buf));
    long top = 100000;
    for (const char *c = strchr(pts1, ','); c; c = strchr(c + 1, ',')) {
        long whole = 0, tenth = 0;
        assert_int_equal(sscanf(c + 1, "%ld.%1ld", &whole, &tenth), 2);
        top = whole * 10 + tenth < top ? whole * 10 + tenth : top;
    }
    assert_int_equal(top, 2513);

    /* every name escaped, in the title element and in the drawn text */
    assert_int_equal(count(svg, "weir sim &lt;boundary&gt; &amp; &quot;friends&quot;"), 2);
    assert_int_equal(count(svg, "trace a&amp;b.csv"), 1);
    assert_int_equal(count(svg, ">a &lt;note&gt; &amp; &quot;more&quot;; admitted 8, denied 2<"),
                     1);
    assert_int_equal(count(svg, ">q&lt;&amp;&quot;&gt;: at most 0 in any 10us<"), 1);
    assert_null(strstr(svg, "<boundary>"));
    assert_null(strstr(svg, "<note>"));
    /* the heading says how far over the limit a peak is */
    assert_non_null(strstr(g0, "at most 8 in any 10us, 2x the limit</text>"));
    assert_non_null(strstr(g1, "at most 4 in any 10us</text>"));

    /* the same input, the same bytes */
    char *again = render(&p);
    assert_string_equal(svg, again);
    free(again);
    free(svg);
}

static void escapes_what_is_not_text(void **unused)
{
    (void)unused;
    weir_sim_svg_series series[3];
    weir_sim_svg_plot p = small_plot(series);
    /* a control character, a lone continuation byte, a truncated sequence,
     * an overlong '/', a surrogate; valid UTF-8 is kept */
    p.title = "tab\there \x80 \xe2\x82 \xc0\xaf \xed\xa0\x80 5\xc2\xb5s \xe2\x86\x92 ok";
    p.subtitle = "line one\nline 'two'\n";
    char *svg = render(&p);
    check_xml(svg);
    assert_int_equal(count(svg, "tab&#xFFFD;here &#xFFFD; &#xFFFD;&#xFFFD; &#xFFFD;&#xFFFD; "
                                "&#xFFFD;&#xFFFD;&#xFFFD; 5\xc2\xb5s \xe2\x86\x92 ok"),
                     2);
    assert_int_equal(count(svg, "fill=\"#444\">line one</text>"), 1);
    assert_int_equal(count(svg, "fill=\"#444\">line &#39;two&#39;</text>"), 1);
    /* two lines under the title move the panels down one line */
    char buf[64];
    assert_string_equal(attr_after(strstr(svg, "<g data-algorithm"), "y", buf, sizeof(buf)), "98");
    free(svg);
}

static void long_series_are_drawn_per_pixel_without_exact_data(void **unused)
{
    (void)unused;
    size_t n = WEIR_SIM_SVG_MAX_EXACT; /* 2 steps each */
    weir_sim_svg_event *adm = calloc(n, sizeof(*adm));
    assert_non_null(adm);
    for (size_t i = 0; i < n; i++)
        adm[i] = (weir_sim_svg_event){(int64_t)i * 3, 1};
    weir_sim_svg_series series[1] = {{.name = "many", .admitted = adm, .n_admitted = n}};
    weir_sim_svg_plot p = {
        .title = "t", .limit = 2, .window_us = 5, .series = series, .n_series = 1};
    char *svg = render(&p);
    check_xml(svg);
    assert_null(strstr(svg, "data-t="));
    assert_non_null(strstr(svg, "data-peak=\"2\""));
    /* at most about four points a pixel column of the 642 */
    char *pts = strstr(svg, "points=\"");
    assert_non_null(pts);
    size_t points = 0;
    for (char *c = pts + 8; *c != '"'; c++)
        points += *c == ',';
    assert_true(points <= 4 * 642 + 2);
    free(svg);
    free(adm);
}

static void refuses_a_bad_plot(void **unused)
{
    (void)unused;
    weir_sim_svg_series series[3];
    weir_sim_svg_plot p = small_plot(series);
    FILE *f = fopen("/dev/null", "w");
    assert_non_null(f);
    weir_sim_svg_plot bad = p;
    bad.n_series = 0;
    assert_int_equal(weir_sim_svg_write(f, &bad), WEIR_EINVAL);
    bad = p;
    bad.n_series = WEIR_SIM_SVG_MAX_SERIES + 1;
    assert_int_equal(weir_sim_svg_write(f, &bad), WEIR_EINVAL);
    bad = p;
    bad.limit = 0;
    assert_int_equal(weir_sim_svg_write(f, &bad), WEIR_EINVAL);
    bad = p;
    bad.window_us = 0;
    assert_int_equal(weir_sim_svg_write(f, &bad), WEIR_EINVAL);
    bad = p;
    bad.title = NULL;
    assert_int_equal(weir_sim_svg_write(f, &bad), WEIR_EINVAL);
    const int64_t unsorted[] = {7, 6};
    series[0].denied_us = unsorted;
    assert_int_equal(weir_sim_svg_write(f, &p), WEIR_EINVAL);
    series[0].denied_us = burst_den;
    const weir_sim_svg_event unsorted_adm[] = {{7, 1}, {6, 1}};
    series[1].admitted = unsorted_adm;
    series[1].n_admitted = 2;
    assert_int_equal(weir_sim_svg_write(f, &p), WEIR_EINVAL);
    assert_int_equal(weir_sim_svg_write(NULL, &p), WEIR_EINVAL);
    assert_int_equal(weir_sim_svg_write(f, NULL), WEIR_EINVAL);
    fclose(f);
}

/* ------------------------------------------------------------------------ */
/* The decisions the simulator records                                      */

static void the_simulator_records_one_keys_decisions(void **unused)
{
    (void)unused;
    weir_trace t;
    weir_trace_init(&t);
    /* key 0: 3 requests at once, one later; key 1: one between */
    for (int i = 0; i < 3; i++)
        assert_int_equal(weir_trace_push(&t, 0, 0, 1), WEIR_OK);
    assert_int_equal(weir_trace_push(&t, 5, 1, 1), WEIR_OK);
    assert_int_equal(weir_trace_push(&t, 10, 0, 1), WEIR_OK);
    weir_sim_config cfg = {.limit = 2, .window_us = 1000, .hold_us = 100};
    weir_sim_report rep, plain;
    weir_sim_watch w = {.key = 0};
    assert_int_equal(weir_sim_run_watched(&cfg, &t, &rep, &w), WEIR_OK);
    assert_int_equal(weir_sim_run(&cfg, &t, &plain), WEIR_OK);
    for (size_t i = 0; i < WEIR_ALGORITHM_COUNT; i++) { /* watching changes nothing */
        assert_int_equal(rep.rows[i].admitted, plain.rows[i].admitted);
        assert_int_equal(rep.rows[i].denied, plain.rows[i].denied);
        assert_int_equal(rep.rows[i].max_in_window, plain.rows[i].max_in_window);
    }
    assert_int_equal(w.n, 4);
    assert_int_equal(w.decisions[0].time_us, 0);
    assert_int_equal(w.decisions[3].time_us, 10);
    uint32_t fixed = 1u << (WEIR_ALGO_FIXED_WINDOW - 1);
    uint32_t log = 1u << (WEIR_ALGO_SLIDING_LOG - 1);
    uint32_t shaper = 1u << (WEIR_ALGO_LEAKY_SHAPER - 1);
    static const bool log_admits[] = {true, true, false, false};
    for (size_t i = 0; i < w.n; i++) {
        assert_int_equal((w.decisions[i].admitted & log) != 0, log_admits[i]);
        assert_int_equal((w.decisions[i].admitted & fixed) != 0, log_admits[i]);
        assert_int_equal(w.decisions[i].cost, 1);
    }
    /* the shaper sends the first at once and queues the second: one
     * emission interval (window / limit) later */
    assert_true(w.decisions[0].admitted & shaper);
    assert_int_equal(w.decisions[0].delay_us, 0);
    assert_true(w.decisions[1].admitted & shaper);
    assert_int_equal(w.decisions[1].delay_us, 500);
    weir_sim_watch_free(&w);
    assert_null(w.decisions);

    w.key = 2; /* no such key */
    assert_int_equal(weir_sim_run_watched(&cfg, &t, &rep, &w), WEIR_EINVAL);
    assert_null(w.decisions);
    weir_trace_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(steps_are_the_exact_sliding_count),
        cmocka_unit_test(writes_a_well_formed_plot_of_a_small_run),
        cmocka_unit_test(escapes_what_is_not_text),
        cmocka_unit_test(long_series_are_drawn_per_pixel_without_exact_data),
        cmocka_unit_test(refuses_a_bad_plot),
        cmocka_unit_test(the_simulator_records_one_keys_decisions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
