/*
 * test_adaptive.c - the adaptive concurrency controllers (weir/adaptive.h):
 * options and arguments checked; each controller's moves by hand; the
 * min and max; the no-load RTT probe; the history ring; and, against the
 * simulated backend (tools/adaptive_sim.h), that each controller finds
 * the knee, follows it down when half the servers go and back up when
 * they return, and what each does when the servers get twice as slow.
 *
 * The band: K = 50 servers; after 10 s of settling the mean limit stays
 * within [0.7 K, 1.5 K] (the gradient's own equilibrium is about
 * 1.25 K + sqrt(1.25 K), 1.41 K here and 1.47 K at 25 servers; Vegas'
 * K + 3..6 log10(limit); AIMD's under its
 * timeout of 1.5 x the service time); in the slow phase (25 servers) within
 * [0.7, 1.5] x 25 and at most 3/4 of the first phase's mean.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "adaptive_sim.h"
#include "weir/weir.h"

#define S 1000000 /* microseconds in a second */

static weir_ctx *ctx;

static int setup(void **unused)
{
    (void)unused;
    return weir_ctx_new(NULL, &ctx) == WEIR_OK ? 0 : -1;
}

static int teardown(void **unused)
{
    (void)unused;
    weir_ctx_free(ctx);
    return 0;
}

static weir_adaptive *make(const weir_adaptive_options *o)
{
    weir_adaptive *a = NULL;
    assert_int_equal(weir_adaptive_new(ctx, o, &a), WEIR_OK);
    return a;
}

static weir_status try_new(weir_adaptive_options o)
{
    weir_adaptive *a = NULL;
    weir_status st = weir_adaptive_new(ctx, &o, &a);
    weir_adaptive_free(a);
    if (st != WEIR_OK)
        assert_null(a);
    return st;
}

static void options_checked(void **unused)
{
    (void)unused;
    weir_adaptive_options o = {sizeof(o), .kind = WEIR_ADAPTIVE_GRADIENT};
    weir_adaptive *a = NULL;
    assert_int_equal(weir_adaptive_new(NULL, &o, &a), WEIR_EINVAL);
    assert_int_equal(weir_adaptive_new(ctx, NULL, &a), WEIR_EINVAL);
    assert_int_equal(weir_adaptive_new(ctx, &o, NULL), WEIR_EINVAL);
    assert_null(a);

    weir_adaptive_options b = o;
    b.size = sizeof(o) - 1;
    assert_int_equal(try_new(b), WEIR_EINVAL);
    b = o, b.kind = 0;
    assert_int_equal(try_new(b), WEIR_EINVAL);
    b = o, b.kind = 4;
    assert_int_equal(try_new(b), WEIR_EINVAL);

    /* every range, at its edge and just past it */
    b = o, b.max_limit = WEIR_ADAPTIVE_MAX_LIMIT, b.initial_limit = WEIR_ADAPTIVE_MAX_LIMIT;
    assert_int_equal(try_new(b), WEIR_OK);
    b = o, b.max_limit = WEIR_ADAPTIVE_MAX_LIMIT + 1;
    assert_int_equal(try_new(b), WEIR_ERANGE);
    b = o, b.min_limit = 10, b.max_limit = 9;
    assert_int_equal(try_new(b), WEIR_ERANGE);
    b = o, b.min_limit = 10, b.initial_limit = 9;
    assert_int_equal(try_new(b), WEIR_ERANGE);
    b = o, b.max_limit = 30, b.initial_limit = 31;
    assert_int_equal(try_new(b), WEIR_ERANGE);
    b = o, b.smoothing = 1.0;
    assert_int_equal(try_new(b), WEIR_OK);
    b = o, b.smoothing = 1.01;
    assert_int_equal(try_new(b), WEIR_ERANGE);
    b = o, b.smoothing = -0.5;
    assert_int_equal(try_new(b), WEIR_ERANGE);
    b = o, b.smoothing = NAN;
    assert_int_equal(try_new(b), WEIR_ERANGE);
    b = o, b.window_us = WEIR_ADAPTIVE_MAX_US;
    assert_int_equal(try_new(b), WEIR_OK);
    b = o, b.window_us = WEIR_ADAPTIVE_MAX_US + 1;
    assert_int_equal(try_new(b), WEIR_ERANGE);
    b = o, b.window_us = -1;
    assert_int_equal(try_new(b), WEIR_ERANGE);
    b = o, b.window_samples = WEIR_ADAPTIVE_MAX_WINDOW_SAMPLES + 1;
    assert_int_equal(try_new(b), WEIR_ERANGE);
    b = o, b.probe_interval_us = -5;
    assert_int_equal(try_new(b), WEIR_ERANGE);
    b = o, b.probe_samples = WEIR_ADAPTIVE_MAX_PROBE_SAMPLES + 1;
    assert_int_equal(try_new(b), WEIR_ERANGE);
    b = o, b.history = WEIR_ADAPTIVE_MAX_HISTORY;
    assert_int_equal(try_new(b), WEIR_OK);
    b = o, b.history = WEIR_ADAPTIVE_MAX_HISTORY + 1;
    assert_int_equal(try_new(b), WEIR_ERANGE);
    b = o, b.aimd_backoff = 1.0;
    assert_int_equal(try_new(b), WEIR_ERANGE);
    b = o, b.aimd_timeout_us = WEIR_ADAPTIVE_MAX_US + 1;
    assert_int_equal(try_new(b), WEIR_ERANGE);
    b = o, b.vegas_alpha = 7.0; /* over the default beta */
    assert_int_equal(try_new(b), WEIR_ERANGE);
    b = o, b.vegas_beta = INFINITY;
    assert_int_equal(try_new(b), WEIR_ERANGE);
    b = o, b.gradient_tolerance = 0.99;
    assert_int_equal(try_new(b), WEIR_ERANGE);
    b = o, b.gradient_tolerance = NAN;
    assert_int_equal(try_new(b), WEIR_ERANGE);
    b = o, b.gradient_queue = WEIR_ADAPTIVE_MAX_LIMIT + 1;
    assert_int_equal(try_new(b), WEIR_ERANGE);
    b = o, b.probe_jitter_pct = 100;
    assert_int_equal(try_new(b), WEIR_OK);
    b = o, b.probe_jitter_pct = 101;
    assert_int_equal(try_new(b), WEIR_ERANGE);
    b = o, b.probe_jitter_pct = INT32_MIN;
    assert_int_equal(try_new(b), WEIR_OK);

    /* the defaults; an initial limit of 0 is the default clamped */
    a = make(&o);
    weir_adaptive_stats st;
    weir_adaptive_stats_get(a, &st);
    assert_int_equal(st.kind, WEIR_ADAPTIVE_GRADIENT);
    assert_int_equal(st.limit, WEIR_ADAPTIVE_DEFAULT_INITIAL);
    assert_int_equal(st.min_limit, WEIR_ADAPTIVE_DEFAULT_MIN);
    assert_int_equal(st.max_limit, WEIR_ADAPTIVE_DEFAULT_MAX);
    assert_int_equal(st.samples, 0);
    assert_int_equal(st.next_probe_us, 0); /* measures the no-load RTT first */
    weir_adaptive_free(a);
    b = o, b.max_limit = 8;
    a = make(&b);
    assert_int_equal(weir_adaptive_limit(a), 8);
    weir_adaptive_free(a);
    weir_adaptive_free(NULL);

    assert_string_equal(weir_adaptive_kind_name(WEIR_ADAPTIVE_VEGAS), "vegas");
    assert_null(weir_adaptive_kind_name(0));
    assert_null(weir_adaptive_kind_name(9));
    weir_adaptive_kind k = 0;
    assert_int_equal(weir_adaptive_kind_parse("aimd", &k), WEIR_OK);
    assert_int_equal(k, WEIR_ADAPTIVE_AIMD);
    assert_int_equal(weir_adaptive_kind_parse("AIMD", &k), WEIR_EINVAL);
    assert_int_equal(weir_adaptive_kind_parse(NULL, &k), WEIR_EINVAL);
    assert_int_equal(weir_adaptive_kind_parse("vegas", NULL), WEIR_EINVAL);
}

static void arguments_checked(void **unused)
{
    (void)unused;
    weir_adaptive_options o = {sizeof(o), .kind = WEIR_ADAPTIVE_AIMD};
    weir_adaptive *a = make(&o);
    assert_int_equal(weir_adaptive_sample(NULL, 0, 10, 1, false), WEIR_EINVAL);
    assert_int_equal(weir_adaptive_sample(a, 0, -1, 1, false), WEIR_ERANGE);
    assert_int_equal(weir_adaptive_sample(a, 0, WEIR_ADAPTIVE_MAX_US + 1, 1, false), WEIR_ERANGE);
    assert_int_equal(weir_adaptive_sample(a, 0, WEIR_ADAPTIVE_MAX_US, 1, false), WEIR_OK);
    assert_int_equal(weir_adaptive_sample(a, INT64_MIN, 0, UINT32_MAX, true), WEIR_OK);
    assert_int_equal(weir_adaptive_sample(a, INT64_MAX, 0, 0, false), WEIR_OK);
    weir_adaptive_stats st;
    weir_adaptive_stats_get(a, &st);
    assert_int_equal(st.samples, 3); /* the refused ones are not counted */
    assert_int_equal(st.dropped, 2); /* one dropped, one past the timeout */
    assert_int_equal(weir_adaptive_limit(NULL), 0);
    weir_adaptive_change ch[4];
    assert_int_equal(weir_adaptive_history(NULL, ch, 4), 0);
    assert_int_equal(weir_adaptive_history(a, NULL, 4), 0);
    weir_adaptive_stats_get(NULL, &st);
    weir_adaptive_stats_get(a, NULL);
    weir_adaptive_free(a);
}

/* AIMD one sample a window: +1 while the window used half the limit, x0.9
 * on a drop or past the timeout, never past max or under min. */
static void aimd_by_hand(void **unused)
{
    (void)unused;
    weir_adaptive_options o = {
        sizeof(o),       .kind = WEIR_ADAPTIVE_AIMD, .initial_limit = 10, .min_limit = 5,
        .max_limit = 14, .window_samples = 1,        .window_us = 1,      .aimd_timeout_us = 5000};
    weir_adaptive *a = make(&o);
    int64_t t = 0;
    for (int i = 0; i < 3; i++)
        assert_int_equal(weir_adaptive_sample(a, t += 10, 1000, 10, false), WEIR_OK);
    assert_int_equal(weir_adaptive_limit(a), 13);
    /* under half the limit in flight: the demand held it back, no move */
    weir_adaptive_sample(a, t += 10, 1000, 6, false);
    assert_int_equal(weir_adaptive_limit(a), 13);
    for (int i = 0; i < 5; i++)
        weir_adaptive_sample(a, t += 10, 1000, 13, false);
    assert_int_equal(weir_adaptive_limit(a), 14); /* the max */
    weir_adaptive_sample(a, t += 10, 1000, 14, true);
    assert_int_equal(weir_adaptive_limit(a), 13); /* 14 x 0.9 = 12.6 */
    weir_adaptive_sample(a, t += 10, 5001, 14, false);
    assert_int_equal(weir_adaptive_limit(a), 11); /* 12.6 x 0.9 = 11.34 */
    for (int i = 0; i < 20; i++)
        weir_adaptive_sample(a, t += 10, 0, 14, true);
    assert_int_equal(weir_adaptive_limit(a), 5); /* the min */

    weir_adaptive_stats st;
    weir_adaptive_stats_get(a, &st);
    assert_int_equal(st.samples, 31);
    assert_int_equal(st.dropped, 22);
    assert_int_equal(st.windows, 31);
    assert_int_equal(st.estimate_milli, 5000);
    assert_int_equal(st.rtt_noload_us, 1000); /* AIMD: the least window mean */
    assert_int_equal(st.next_probe_us, -1);
    assert_false(st.probing);

    /* the history: every change, oldest first */
    weir_adaptive_change ch[64];
    size_t n = weir_adaptive_history(a, ch, 64);
    assert_int_equal(n, st.changes);
    const uint32_t want[] = {11, 12, 13, 14, 13, 11, 10, 9, 8, 7, 6, 5};
    assert_int_equal(n, sizeof(want) / sizeof(want[0]));
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(ch[i].limit, want[i]);
        assert_int_equal(ch[i].cause, WEIR_ADAPTIVE_WINDOW);
        assert_true(i == 0 || ch[i].t_us > ch[i - 1].t_us);
    }
    weir_adaptive_free(a);
}

/* A window ends when it holds its samples and has lasted its time. */
static void windows(void **unused)
{
    (void)unused;
    weir_adaptive_options o = {sizeof(o), .kind = WEIR_ADAPTIVE_AIMD, .initial_limit = 10,
                               .window_samples = 3, .window_us = 1000};
    weir_adaptive *a = make(&o);
    weir_adaptive_sample(a, 0, 100, 10, false);
    weir_adaptive_sample(a, 2000, 100, 10, false);
    assert_int_equal(weir_adaptive_limit(a), 10); /* 2 samples: not yet */
    weir_adaptive_sample(a, 2001, 100, 10, false);
    assert_int_equal(weir_adaptive_limit(a), 11);
    for (int i = 0; i < 5; i++)
        weir_adaptive_sample(a, 2002 + i, 100, 11, false);
    assert_int_equal(weir_adaptive_limit(a), 11); /* 5 samples in 5 us: not yet */
    weir_adaptive_sample(a, 3001, 100, 11, false);
    assert_int_equal(weir_adaptive_limit(a), 12);
    /* a clock going backwards is read as the latest time: still 0 us
     * into the next window */
    weir_adaptive_sample(a, 100, 100, 12, false);
    weir_adaptive_sample(a, 50, 100, 12, false);
    weir_adaptive_sample(a, 3500, 100, 12, false);
    assert_int_equal(weir_adaptive_limit(a), 12);
    weir_adaptive_sample(a, 4001, 100, 12, false);
    assert_int_equal(weir_adaptive_limit(a), 13);
    weir_adaptive_free(a);
}

/* Vegas and the gradient pin the limit at min for a probe first, average
 * the unloaded samples, return, and probe again after the interval. */
static void probes(void **unused)
{
    (void)unused;
    weir_adaptive_options o = {sizeof(o),
                               .kind = WEIR_ADAPTIVE_VEGAS,
                               .initial_limit = 40,
                               .min_limit = 4,
                               .probe_interval_us = 10 * S,
                               .probe_samples = 5,
                               .probe_jitter_pct = -1,
                               .window_samples = 1,
                               .window_us = 1};
    weir_adaptive *a = make(&o);
    int64_t t = 0;
    weir_adaptive_sample(a, t, 90000, 40, false); /* started before the pin */
    assert_int_equal(weir_adaptive_limit(a), 4);
    weir_adaptive_stats st;
    weir_adaptive_stats_get(a, &st);
    assert_true(st.probing);
    assert_int_equal(st.estimate_milli, 40000);
    for (int i = 0; i < 4; i++)
        weir_adaptive_sample(a, t += 100, 1000 + 100 * i, 4, false);
    assert_int_equal(weir_adaptive_limit(a), 4);
    weir_adaptive_sample(a, t += 100, 1000, 3, false);
    assert_int_equal(weir_adaptive_limit(a), 40); /* back */
    weir_adaptive_stats_get(a, &st);
    assert_false(st.probing);
    assert_int_equal(st.rtt_noload_us, 1120); /* (1000+1100+1200+1300+1000) / 5 */
    assert_int_equal(st.next_probe_us, t + 10 * S);

    /* the queue, 40 x (1 - 1120/2240) = 20, is over beta = 6 log10(40):
     * down by log10(40) */
    weir_adaptive_sample(a, t += 100, 2240, 40, false);
    assert_int_equal(weir_adaptive_limit(a), 38);
    /* no queue: up by beta */
    weir_adaptive_sample(a, t += 100, 1120, 40, false);
    assert_int_equal(weir_adaptive_limit(a), 48);
    /* a drop: down by log10 */
    weir_adaptive_sample(a, t += 100, 0, 40, true);
    assert_int_equal(weir_adaptive_limit(a), 46);

    weir_adaptive_sample(a, t + 10 * S, 1000, 40, false);
    assert_int_equal(weir_adaptive_limit(a), 4);
    weir_adaptive_change ch[8];
    size_t n = weir_adaptive_history(a, ch, 8);
    assert_int_equal(n, 6);
    assert_int_equal(ch[0].cause, WEIR_ADAPTIVE_PROBE_START);
    assert_int_equal(ch[0].limit, 4);
    assert_int_equal(ch[1].cause, WEIR_ADAPTIVE_PROBE_END);
    assert_int_equal(ch[1].limit, 40);
    assert_int_equal(ch[2].cause, WEIR_ADAPTIVE_WINDOW);
    assert_int_equal(ch[5].cause, WEIR_ADAPTIVE_PROBE_START);
    weir_adaptive_free(a);

    /* a probe that never sees an unloaded sample ends anyway, with the
     * fastest it saw */
    o.kind = WEIR_ADAPTIVE_GRADIENT;
    a = make(&o);
    for (int i = 0; i < 50; i++)
        weir_adaptive_sample(a, i, 5000 - i, 100, false);
    weir_adaptive_stats_get(a, &st);
    assert_false(st.probing);
    assert_int_equal(st.rtt_noload_us, 4951);
    assert_int_equal(weir_adaptive_limit(a), 40);
    weir_adaptive_free(a);
}

/* The gradient by hand: limit x clamp(1.25 x noload / rtt) + sqrt. */
static void gradient_by_hand(void **unused)
{
    (void)unused;
    weir_adaptive_options o = {sizeof(o),
                               .kind = WEIR_ADAPTIVE_GRADIENT,
                               .initial_limit = 100,
                               .min_limit = 1,
                               .probe_samples = 1,
                               .window_samples = 1,
                               .window_us = 1,
                               .smoothing = 1.0};
    weir_adaptive *a = make(&o);
    weir_adaptive_sample(a, 0, 1000, 1, false); /* the probe */
    assert_int_equal(weir_adaptive_limit(a), 100);
    weir_adaptive_sample(a, 1, 2500, 100, false); /* 100 x 0.5 + sqrt(50) */
    assert_int_equal(weir_adaptive_limit(a), 57);
    weir_adaptive_free(a);
    o.gradient_queue = 4;
    o.smoothing = 0.5;
    a = make(&o);
    weir_adaptive_sample(a, 0, 1000, 1, false);
    weir_adaptive_sample(a, 1, 1000, 100, false); /* 100 x 1.25 + 4, half of the way */
    assert_int_equal(weir_adaptive_limit(a), 115);
    weir_adaptive_free(a);
}

/* A stale no-load RTT is measured again at once: after a window far under
 * it, or far over it once the limit has halved. */
static void early_probes(void **unused)
{
    (void)unused;
    weir_adaptive_options o = {sizeof(o),
                               .kind = WEIR_ADAPTIVE_GRADIENT,
                               .initial_limit = 100,
                               .min_limit = 2,
                               .probe_samples = 1,
                               .window_samples = 1,
                               .window_us = 1,
                               .smoothing = 1.0,
                               .gradient_queue = 1,
                               .probe_jitter_pct = -1};
    weir_adaptive *a = make(&o);
    weir_adaptive_stats st;
    weir_adaptive_sample(a, 0, 1000, 1, false);  /* the first probe: 1 ms */
    weir_adaptive_sample(a, 1, 800, 100, false); /* 0.8: noise, not stale */
    weir_adaptive_stats_get(a, &st);
    assert_false(st.probing);
    assert_int_equal(st.next_probe_us, 60 * S);
    weir_adaptive_sample(a, 2, 740, 100, false); /* under 3/4: stale */
    weir_adaptive_stats_get(a, &st);
    assert_int_equal(st.next_probe_us, 2);
    uint32_t before = weir_adaptive_limit(a);
    weir_adaptive_sample(a, 3, 700, 1, false); /* starts and ends a probe */
    weir_adaptive_stats_get(a, &st);
    assert_false(st.probing);
    assert_int_equal(st.rtt_noload_us, 700);
    assert_int_equal(weir_adaptive_limit(a), before);

    /* slower: 2 x the no-load RTT halves the limit each window (a gradient
     * of 0.5 plus 1); a probe comes once it is at half its peak */
    int64_t t = 10;
    uint32_t peak = weir_adaptive_limit(a);
    weir_adaptive_sample(a, t++, 1400, peak, false);
    weir_adaptive_stats_get(a, &st);
    assert_int_equal(st.next_probe_us, 3 + 60 * S); /* peak / 2 + 1: not yet */
    weir_adaptive_sample(a, t++, 1400, peak, false);
    weir_adaptive_stats_get(a, &st);
    assert_int_equal(st.next_probe_us, t - 1);
    weir_adaptive_sample(a, t++, 1400, 1, false);
    weir_adaptive_stats_get(a, &st);
    assert_int_equal(st.rtt_noload_us, 1400);
    weir_adaptive_free(a);
}

/* The next probe, from a probe's end: the interval plus up to jitter% of
 * it, the same for the same seed, spread over the range across seeds. */
static int64_t next_probe_after_first(int32_t jitter_pct, uint64_t seed)
{
    weir_adaptive_options o = {
        sizeof(o),          .kind = WEIR_ADAPTIVE_VEGAS,    .probe_interval_us = 10 * S,
        .probe_samples = 1, .probe_jitter_pct = jitter_pct, .seed = seed};
    weir_adaptive *a = make(&o);
    weir_adaptive_sample(a, 1000, 500, 1, false);
    weir_adaptive_stats st;
    weir_adaptive_stats_get(a, &st);
    weir_adaptive_free(a);
    return st.next_probe_us - 1000;
}

static void probe_jitter(void **unused)
{
    (void)unused;
    assert_int_equal(next_probe_after_first(-1, 1), 10 * S);
    int64_t lo = INT64_MAX, hi = 0;
    for (uint64_t seed = 0; seed < 200; seed++) {
        int64_t w = next_probe_after_first(0, seed); /* the default 15% */
        assert_in_range(w, 10 * S, 10 * S + 15 * S / 10);
        assert_int_equal(w, next_probe_after_first(0, seed));
        lo = w < lo ? w : lo;
        hi = w > hi ? w : hi;
    }
    /* 200 draws over 1.5 s: the ends are near */
    assert_true(lo < 10 * S + S / 10);
    assert_true(hi > 10 * S + 14 * S / 10);
    assert_in_range(next_probe_after_first(100, 3), 10 * S, 20 * S);
}

static void history_ring(void **unused)
{
    (void)unused;
    weir_adaptive_options o = {sizeof(o),           .kind = WEIR_ADAPTIVE_AIMD,
                               .initial_limit = 10, .window_samples = 1,
                               .window_us = 1,      .history = 4};
    weir_adaptive *a = make(&o);
    for (int i = 1; i <= 10; i++)
        weir_adaptive_sample(a, i, 100, 100, false);
    weir_adaptive_change ch[8];
    assert_int_equal(weir_adaptive_history(a, ch, 8), 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(ch[i].limit, 17 + i);
        assert_int_equal(ch[i].t_us, 7 + i);
    }
    assert_int_equal(weir_adaptive_history(a, ch, 2), 2);
    assert_int_equal(ch[0].limit, 19);
    assert_int_equal(ch[1].limit, 20);
    weir_adaptive_stats st;
    weir_adaptive_stats_get(a, &st);
    assert_int_equal(st.changes, 10);
    weir_adaptive_free(a);
}

/* ------------------------------------------------------------------------ */
/* Against the simulated backend                                            */

#define K 50

static weir_adaptive_sim_config backend(void)
{
    return (weir_adaptive_sim_config){
        .servers = K,
        .service_us = 20000,
        .jitter_pct = 20,
        .queue_cap = K,
        .clients = 4 * K,
        .think_us = 1000,
        .tick_us = 200,
        .duration_us = 60 * S,
        .slow_from_us = 20 * S,
        .slow_until_us = 40 * S,
        .slow_servers = K / 2,
        .record_us = 100000,
        .seed = 7,
    };
}

static weir_adaptive_options controller(weir_adaptive_kind kind)
{
    /* AIMD backs off past its timeout: 1.5 x the service time */
    return (weir_adaptive_options){sizeof(weir_adaptive_options), .kind = kind,
                                   .aimd_timeout_us = 30000};
}

/* Mean limit over [from, until) seconds, in thousandths. */
static uint64_t mean(const weir_adaptive_sim_result *r, int from, int until)
{
    return weir_adaptive_sim_mean_limit(r, (int64_t)from * S, (int64_t)until * S);
}

static void assert_band(uint64_t mean_milli, uint64_t knee, const char *what)
{
    printf("  %s: mean limit %.2f, knee %llu\n", what, (double)mean_milli / 1000,
           (unsigned long long)knee);
    assert_in_range(mean_milli, knee * 700, knee * 1500);
}

static void converges(weir_adaptive_kind kind)
{
    weir_adaptive_options o = controller(kind);
    weir_adaptive *a = make(&o);
    weir_adaptive_sim_config c = backend();
    weir_adaptive_sim_result r;
    assert_int_equal(weir_adaptive_sim_run(&c, a, &r), WEIR_OK);
    printf("%s:\n", weir_adaptive_kind_name(kind));
    uint64_t fast = mean(&r, 10, 20), slow = mean(&r, 30, 40), back = mean(&r, 50, 61);
    assert_band(fast, K, "10-20 s, 50 servers");
    assert_band(slow, K / 2, "30-40 s, 25 servers");
    assert_band(back, K, "50-60 s, 50 servers again");
    assert_true(slow * 4 <= fast * 3);
    /* every point within the clamp, the knee as configured */
    for (size_t i = 0; i < r.n_points; i++) {
        assert_in_range(r.points[i].limit, o.min_limit ? o.min_limit : 3, 1000);
        int64_t t = r.points[i].t_us;
        assert_int_equal(r.points[i].knee, t >= 20 * S && t < 40 * S ? K / 2 : K);
    }
    /* it served about what the servers can: 50 / 20 ms for 40 s and 25 /
     * 20 ms for 20 s, 125,000 requests, less the probes and the start */
    assert_in_range(r.completed, 110000, 126000);
    weir_adaptive_sim_result_free(&r);
    weir_adaptive_free(a);
}

static void aimd_converges(void **unused)
{
    (void)unused;
    converges(WEIR_ADAPTIVE_AIMD);
}

static void vegas_converges(void **unused)
{
    (void)unused;
    converges(WEIR_ADAPTIVE_VEGAS);
}

static void gradient_converges(void **unused)
{
    (void)unused;
    converges(WEIR_ADAPTIVE_GRADIENT);
}

/* The same servers, each twice as slow for the middle third: the knee is
 * still K, but the RTT doubles. Vegas and the gradient dip, measure the
 * no-load RTT again and hold the knee; AIMD, whose timeout (30 ms) is now
 * under the service time (40 ms), backs off to its floor until the
 * backend is fast again. */
static void slower_service(weir_adaptive_kind kind)
{
    weir_adaptive_options o = controller(kind);
    weir_adaptive *a = make(&o);
    weir_adaptive_sim_config c = backend();
    c.slow_servers = K;
    c.slow_service_us = 2 * c.service_us;
    weir_adaptive_sim_result r;
    assert_int_equal(weir_adaptive_sim_run(&c, a, &r), WEIR_OK);
    printf("%s, twice the service time from 20 s to 40 s:\n", weir_adaptive_kind_name(kind));
    uint64_t fast = mean(&r, 10, 20), low = UINT64_MAX;
    for (size_t i = 0; i < r.n_points; i++)
        if (r.points[i].t_us >= 20 * S && r.points[i].t_us < 23 * S && r.points[i].limit < low)
            low = r.points[i].limit;
    printf("  least limit 20-23 s: %llu\n", (unsigned long long)low);
    assert_true(low * 1000 * 4 <= fast * 3); /* it dropped */
    if (kind == WEIR_ADAPTIVE_AIMD)
        assert_in_range(mean(&r, 30, 40), 3000, 3500);
    else
        assert_band(mean(&r, 30, 40), K, "30-40 s");
    assert_band(mean(&r, 50, 61), K, "50-60 s, fast again");
    weir_adaptive_sim_result_free(&r);
    weir_adaptive_free(a);
}

static void aimd_slower_service(void **unused)
{
    (void)unused;
    slower_service(WEIR_ADAPTIVE_AIMD);
}

static void vegas_slower_service(void **unused)
{
    (void)unused;
    slower_service(WEIR_ADAPTIVE_VEGAS);
}

static void gradient_slower_service(void **unused)
{
    (void)unused;
    slower_service(WEIR_ADAPTIVE_GRADIENT);
}

/* Open loop: arrivals at twice what the servers can take. */
static void open_loop(void **unused)
{
    (void)unused;
    for (int k = WEIR_ADAPTIVE_AIMD; k <= WEIR_ADAPTIVE_GRADIENT; k++) {
        weir_adaptive_options o = controller((weir_adaptive_kind)k);
        weir_adaptive *a = make(&o);
        weir_adaptive_sim_config c = backend();
        c.clients = 0;
        c.rate_per_s = 2 * K * S / 20000;
        c.duration_us = 20 * S;
        c.slow_from_us = c.slow_until_us = 0;
        weir_adaptive_sim_result r;
        assert_int_equal(weir_adaptive_sim_run(&c, a, &r), WEIR_OK);
        printf("%s, open loop:\n", weir_adaptive_kind_name((weir_adaptive_kind)k));
        assert_band(mean(&r, 10, 21), K, "10-20 s");
        assert_true(r.rejected > r.completed / 2);
        weir_adaptive_sim_result_free(&r);
        weir_adaptive_free(a);
    }
}

/* The same options and backend give the same run, point for point. */
static void deterministic(void **unused)
{
    (void)unused;
    weir_adaptive_sim_result r[2];
    for (int i = 0; i < 2; i++) {
        weir_adaptive_options o = controller(WEIR_ADAPTIVE_GRADIENT);
        weir_adaptive *a = make(&o);
        weir_adaptive_sim_config c = backend();
        c.duration_us = 15 * S;
        assert_int_equal(weir_adaptive_sim_run(&c, a, &r[i]), WEIR_OK);
        weir_adaptive_free(a);
    }
    assert_int_equal(r[0].n_points, r[1].n_points);
    assert_memory_equal(r[0].points, r[1].points, r[0].n_points * sizeof(r[0].points[0]));
    weir_adaptive_sim_result_free(&r[0]);
    weir_adaptive_sim_result_free(&r[1]);
}

static void backend_checked(void **unused)
{
    (void)unused;
    weir_adaptive_options o = controller(WEIR_ADAPTIVE_AIMD);
    weir_adaptive *a = make(&o);
    weir_adaptive_sim_result r;
    weir_adaptive_sim_config c = backend();
    assert_int_equal(weir_adaptive_sim_run(NULL, a, &r), WEIR_EINVAL);
    assert_int_equal(weir_adaptive_sim_run(&c, NULL, &r), WEIR_EINVAL);
    assert_int_equal(weir_adaptive_sim_run(&c, a, NULL), WEIR_EINVAL);
    weir_adaptive_sim_config b = c;
    b.servers = 0;
    assert_int_equal(weir_adaptive_sim_run(&b, a, &r), WEIR_EINVAL);
    b = c, b.tick_us = 0;
    assert_int_equal(weir_adaptive_sim_run(&b, a, &r), WEIR_EINVAL);
    b = c, b.duration_us = INT64_MAX, b.tick_us = 1;
    assert_int_equal(weir_adaptive_sim_run(&b, a, &r), WEIR_EINVAL);
    b = c, b.slow_servers = K + 1;
    assert_int_equal(weir_adaptive_sim_run(&b, a, &r), WEIR_EINVAL);
    b = c, b.clients = 0, b.rate_per_s = 0;
    assert_int_equal(weir_adaptive_sim_run(&b, a, &r), WEIR_EINVAL);
    b = c, b.jitter_pct = 91;
    assert_int_equal(weir_adaptive_sim_run(&b, a, &r), WEIR_EINVAL);
    /* no queue at all: past K every admitted request is dropped */
    b = c, b.queue_cap = 0, b.duration_us = 5 * S;
    assert_int_equal(weir_adaptive_sim_run(&b, a, &r), WEIR_OK);
    for (size_t i = 0; i < r.n_points; i++)
        assert_true(r.points[i].rtt_us == 0 || r.points[i].rtt_us <= 24000);
    weir_adaptive_sim_result_free(&r);
    weir_adaptive_sim_result_free(NULL);
    weir_adaptive_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(options_checked),
        cmocka_unit_test(arguments_checked),
        cmocka_unit_test(aimd_by_hand),
        cmocka_unit_test(windows),
        cmocka_unit_test(probes),
        cmocka_unit_test(gradient_by_hand),
        cmocka_unit_test(early_probes),
        cmocka_unit_test(probe_jitter),
        cmocka_unit_test(history_ring),
        cmocka_unit_test(aimd_slower_service),
        cmocka_unit_test(vegas_slower_service),
        cmocka_unit_test(gradient_slower_service),
        cmocka_unit_test(aimd_converges),
        cmocka_unit_test(vegas_converges),
        cmocka_unit_test(gradient_converges),
        cmocka_unit_test(open_loop),
        cmocka_unit_test(deterministic),
        cmocka_unit_test(backend_checked),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
