/*
 * test_sim.c - the simulator core, its traffic patterns and its command
 * line: exact results on hand-built traces, properties on seeded random
 * ones (the seed is printed), and the exit codes of `weir sim` (and the
 * files of its --svg).
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli.h"
#include "fake.h"
#include "pattern.h"
#include "sim.h"
#include "trace.h"

#define S 1000000 /* one second in microseconds */

static const weir_sim_row *row_of(const weir_sim_report *rep, weir_algorithm a)
{
    return &rep->rows[a - 1];
}

static weir_sim_report run(const weir_sim_config *cfg, const weir_trace *t)
{
    weir_sim_report rep;
    assert_int_equal(weir_sim_run(cfg, t, &rep), WEIR_OK);
    return rep;
}

static void push(weir_trace *t, int64_t time_us, uint32_t key, uint64_t cost)
{
    assert_int_equal(weir_trace_push(t, time_us, key, cost), WEIR_OK);
}

/* ------------------------------------------------------------------------ */
/* Durations                                                                */

static void formats_durations(void **unused)
{
    (void)unused;
    static const struct {
        int64_t us;
        const char *text;
    } cases[] = {
        {0, "0s"},
        {1, "1us"},
        {999, "999us"},
        {1000, "1ms"},
        {100000, "100ms"},
        {S, "1s"},
        {1500000, "1.5s"},
        {90 * (int64_t)S, "1.5m"},
        {3600 * (int64_t)S, "1h"},
        {1234567, "1234.567ms"},
        {1000001, "1000.001ms"},
        {WEIR_MAX_WINDOW_US, "36525d"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[32];
        weir_sim_format_duration(cases[i].us, buf, sizeof(buf));
        assert_string_equal(buf, cases[i].text);
    }
}

/* ------------------------------------------------------------------------ */
/* The core on hand-built traces                                            */

static void exact_results_on_a_small_trace(void **unused)
{
    (void)unused;
    /* 2 per 1000 us; leases held 100 us */
    weir_sim_config cfg = {.limit = 2, .window_us = 1000, .hold_us = 100};
    weir_trace t;
    weir_trace_init(&t);
    const int64_t times[] = {0, 0, 0, 500, 1000, 1000};
    for (size_t i = 0; i < 6; i++)
        push(&t, times[i], 0, 1);
    weir_sim_report rep = run(&cfg, &t);
    assert_int_equal(rep.requests, 6);
    assert_int_equal(rep.keys, 1);
    for (size_t i = 0; i < WEIR_ALGORITHM_COUNT; i++) {
        assert_int_equal(rep.rows[i].algorithm, i + 1);
        assert_int_equal(rep.rows[i].admitted + rep.rows[i].denied, 6);
    }

    /* the log: A A D D A A */
    const weir_sim_row *log = row_of(&rep, WEIR_ALGO_SLIDING_LOG);
    assert_int_equal(log->admitted, 4);
    assert_int_equal(log->max_in_window, 2);
    assert_int_equal(log->over + log->under, 0);

    /* windows aligned to 0 give the same verdicts here */
    const weir_sim_row *fixed = row_of(&rep, WEIR_ALGO_FIXED_WINDOW);
    assert_int_equal(fixed->admitted, 4);
    assert_int_equal(fixed->over + fixed->under, 0);

    /* token bucket, burst 2: A A D, a token back by 500 (A), another by
     * 1000 (A), then empty (D) */
    const weir_sim_row *tb = row_of(&rep, WEIR_ALGO_TOKEN_BUCKET);
    assert_int_equal(tb->admitted, 4);
    assert_int_equal(tb->burst, 2);
    assert_int_equal(tb->over, 1);
    assert_int_equal(tb->under, 1);
    assert_int_equal(tb->max_in_window, 3); /* 0, 0 and 500 */

    /* GCRA, burst 1: one per 500 us: A D D A A D */
    const weir_sim_row *gcra = row_of(&rep, WEIR_ALGO_GCRA);
    assert_int_equal(gcra->admitted, 3);
    assert_int_equal(gcra->over, 1);
    assert_int_equal(gcra->under, 2);
    assert_int_equal(gcra->max_in_window, 2);

    /* concurrency, 2 leases held 100 us: only the third request finds
     * both held */
    const weir_sim_row *conc = row_of(&rep, WEIR_ALGO_CONCURRENCY);
    assert_int_equal(conc->admitted, 5);
    assert_int_equal(conc->over, 1);
    assert_int_equal(conc->under, 0);
    assert_int_equal(conc->max_in_window, 3);

    assert_int_equal(row_of(&rep, WEIR_ALGO_LEAKY_SHAPER)->max_delay_us, 500);
    assert_int_equal(tb->max_delay_us, 0);
    weir_trace_free(&t);
}

static void shaper_reports_its_delay_and_counts_when_requests_proceed(void **unused)
{
    (void)unused;
    weir_sim_config cfg = {.limit = 10, .window_us = S, .hold_us = 1};
    weir_trace t;
    weir_trace_init(&t);
    for (int i = 0; i < 10; i++)
        push(&t, 0, 0, 1);
    weir_sim_report rep = run(&cfg, &t);
    const weir_sim_row *shaper = row_of(&rep, WEIR_ALGO_LEAKY_SHAPER);
    assert_int_equal(shaper->admitted, 10);
    assert_int_equal(shaper->max_delay_us, 900000);
    assert_int_equal(shaper->max_in_window, 10);
    weir_trace_free(&t);
}

/* --warmup reaches the token bucket alone: 10 at once from a cold key of
 * 30 per second (a third of its burst), the others as without it. */
static void warmup_slows_the_cold_token_bucket(void **unused)
{
    (void)unused;
    weir_sim_config cfg = {
        .limit = 30, .window_us = S, .hold_us = 1, .warmup_us = 10 * S, .cold_factor = 3};
    weir_trace t;
    weir_trace_init(&t);
    for (int i = 0; i < 40; i++)
        push(&t, 0, 0, 1);
    weir_sim_report rep = run(&cfg, &t);
    assert_int_equal(row_of(&rep, WEIR_ALGO_TOKEN_BUCKET)->admitted, 10);
    assert_int_equal(row_of(&rep, WEIR_ALGO_FIXED_WINDOW)->admitted, 30);
    weir_trace_free(&t);
}

static void a_cost_past_the_limit_is_denied_everywhere(void **unused)
{
    (void)unused;
    weir_sim_config cfg = {.limit = 3, .window_us = 1000, .hold_us = 10};
    weir_trace t;
    weir_trace_init(&t);
    push(&t, 0, 0, 4);
    push(&t, 1, 0, 3);
    weir_sim_report rep = run(&cfg, &t);
    for (size_t i = 0; i < WEIR_ALGORITHM_COUNT; i++) {
        /* gcra and the leaky bucket keep a burst of 1: cost 3 never fits */
        uint64_t want = (i + 1 == WEIR_ALGO_GCRA || i + 1 == WEIR_ALGO_LEAKY_BUCKET) ? 0 : 1;
        assert_int_equal(rep.rows[i].admitted, want);
        if (want)
            assert_int_equal(rep.rows[i].max_in_window, 3);
    }
    weir_trace_free(&t);
}

static void keys_are_independent(void **unused)
{
    (void)unused;
    weir_sim_config cfg = {.limit = 4, .window_us = 1000, .hold_us = 50};
    weir_pattern p = {.kind = WEIR_PATTERN_BOUNDARY,
                      .window_us = 1000,
                      .duration_us = 6000,
                      .burst = 4,
                      .keys = 1};
    weir_trace one, three;
    weir_trace_init(&one);
    weir_trace_init(&three);
    assert_int_equal(weir_pattern_generate(&p, &one), WEIR_OK);
    p.keys = 3;
    assert_int_equal(weir_pattern_generate(&p, &three), WEIR_OK);
    weir_sim_report a = run(&cfg, &one), b = run(&cfg, &three);
    assert_int_equal(b.keys, 3);
    assert_int_equal(b.requests, 3 * a.requests);
    for (size_t i = 0; i < WEIR_ALGORITHM_COUNT; i++) {
        assert_int_equal(b.rows[i].admitted, 3 * a.rows[i].admitted);
        assert_int_equal(b.rows[i].over, 3 * a.rows[i].over);
        assert_int_equal(b.rows[i].under, 3 * a.rows[i].under);
        assert_int_equal(b.rows[i].max_in_window, a.rows[i].max_in_window);
    }
    weir_trace_free(&one);
    weir_trace_free(&three);
}

static void boundary_shows_the_fixed_window_exploit(void **unused)
{
    (void)unused;
    weir_sim_config cfg = {.limit = 10, .window_us = S, .hold_us = S / 10};
    weir_pattern p = {.kind = WEIR_PATTERN_BOUNDARY,
                      .window_us = S,
                      .duration_us = 10 * (int64_t)S,
                      .burst = 10,
                      .keys = 1};
    weir_trace t;
    weir_trace_init(&t);
    assert_int_equal(weir_pattern_generate(&p, &t), WEIR_OK);
    weir_sim_report rep = run(&cfg, &t);
    assert_int_equal(rep.requests, 100); /* 5 attacks of 10 + 10 */
    const weir_sim_row *fixed = row_of(&rep, WEIR_ALGO_FIXED_WINDOW);
    assert_int_equal(fixed->admitted, 100);
    assert_int_equal(fixed->max_in_window, 20);
    assert_int_equal(fixed->over, 50);
    const weir_sim_row *log = row_of(&rep, WEIR_ALGO_SLIDING_LOG);
    assert_int_equal(log->admitted, 50);
    assert_int_equal(log->max_in_window, 10);
    weir_trace_free(&t);
}

static void under_the_limit_everything_is_admitted(void **unused)
{
    (void)unused;
    /* 5/s against 10/s: evenly spaced, so even the strict ones admit all */
    weir_sim_config cfg = {.limit = 10, .window_us = S, .hold_us = S / 10};
    weir_pattern p = {.kind = WEIR_PATTERN_STEADY,
                      .window_us = S,
                      .duration_us = 10 * (int64_t)S,
                      .rate_num = 5,
                      .rate_per_us = S,
                      .keys = 2,
                      .seed = 7};
    weir_trace t;
    weir_trace_init(&t);
    assert_int_equal(weir_pattern_generate(&p, &t), WEIR_OK);
    weir_sim_report rep = run(&cfg, &t);
    assert_int_equal(rep.requests, 100);
    for (size_t i = 0; i < WEIR_ALGORITHM_COUNT; i++) {
        assert_int_equal(rep.rows[i].denied, 0);
        assert_int_equal(rep.rows[i].over + rep.rows[i].under, 0);
        assert_int_equal(rep.rows[i].max_in_window, 5);
    }
    weir_trace_free(&t);
}

/* ------------------------------------------------------------------------ */
/* Properties on random traces                                              */

static void random_trace(weir_trace *t, test_rng *rng, uint64_t max_cost, int64_t window_us)
{
    weir_trace_init(t);
    int64_t now = (int64_t)rng_below(rng, 1000);
    uint32_t keys = 1 + (uint32_t)rng_below(rng, 4);
    size_t n = 200 + (size_t)rng_below(rng, 800);
    for (size_t i = 0; i < n; i++) {
        /* mostly close together, sometimes a long quiet spell */
        now += rng_below(rng, 8) == 0 ? (int64_t)rng_below(rng, (uint64_t)window_us * 2)
                                      : (int64_t)rng_below(rng, (uint64_t)window_us / 8 + 1);
        push(t, now, (uint32_t)rng_below(rng, keys), 1 + rng_below(rng, max_cost));
    }
}

static void properties_hold_on_random_traces(void **unused)
{
    (void)unused;
    test_rng rng = {test_seed("properties_hold_on_random_traces")};
    for (int round = 0; round < 60; round++) {
        uint64_t limit = 1 + rng_below(&rng, 12);
        /* a window that is a multiple of the limit keeps the emission
         * interval whole, so the strict algorithms are exact too */
        int64_t window_us = (int64_t)limit * (int64_t)(1 + rng_below(&rng, 2000));
        weir_sim_config cfg = {.limit = limit, .window_us = window_us, .hold_us = window_us};
        weir_trace t;
        random_trace(&t, &rng, 1, window_us);
        weir_sim_report rep = run(&cfg, &t);
        for (size_t i = 0; i < WEIR_ALGORITHM_COUNT; i++)
            assert_int_equal(rep.rows[i].admitted + rep.rows[i].denied, t.n_events);
        const weir_sim_row *log = row_of(&rep, WEIR_ALGO_SLIDING_LOG);
        assert_int_equal(log->over + log->under, 0);
        assert_true(log->max_in_window <= limit);
        /* a lease held exactly one window is a sliding window */
        const weir_sim_row *conc = row_of(&rep, WEIR_ALGO_CONCURRENCY);
        assert_int_equal(conc->over + conc->under, 0);
        assert_int_equal(conc->max_in_window, log->max_in_window);
        assert_true(row_of(&rep, WEIR_ALGO_GCRA)->max_in_window <= limit);
        assert_true(row_of(&rep, WEIR_ALGO_LEAKY_BUCKET)->max_in_window <= limit);
        assert_true(row_of(&rep, WEIR_ALGO_LEAKY_SHAPER)->max_in_window <= limit);
        assert_true(row_of(&rep, WEIR_ALGO_FIXED_WINDOW)->max_in_window <= 2 * limit);
        assert_true(row_of(&rep, WEIR_ALGO_TOKEN_BUCKET)->max_in_window <= 2 * limit);
        assert_true(row_of(&rep, WEIR_ALGO_SLIDING_COUNTER)->max_in_window <= 2 * limit);
        weir_trace_free(&t);

        /* with costs, the log and a one-window lease still agree exactly */
        random_trace(&t, &rng, limit + 1, window_us);
        rep = run(&cfg, &t);
        log = row_of(&rep, WEIR_ALGO_SLIDING_LOG);
        conc = row_of(&rep, WEIR_ALGO_CONCURRENCY);
        assert_true(log->max_in_window <= limit);
        assert_int_equal(conc->over + conc->under, 0);
        assert_int_equal(conc->admitted, log->admitted);
        weir_trace_free(&t);
    }
}

/* Field by field: a struct's padding is not part of its value. */
static bool same_report(const weir_sim_report *a, const weir_sim_report *b)
{
    if (a->requests != b->requests || a->keys != b->keys || a->refused != b->refused)
        return false;
    for (size_t i = 0; i < WEIR_ALGORITHM_COUNT; i++) {
        const weir_sim_row *x = &a->rows[i], *y = &b->rows[i];
        if (x->algorithm != y->algorithm || x->burst != y->burst || x->admitted != y->admitted ||
            x->denied != y->denied || x->max_in_window != y->max_in_window || x->over != y->over ||
            x->under != y->under || x->max_delay_us != y->max_delay_us)
            return false;
    }
    return true;
}

static void the_same_seed_gives_the_same_report(void **unused)
{
    (void)unused;
    weir_sim_config cfg = {.limit = 10, .window_us = S, .hold_us = S / 10};
    weir_pattern p = {.kind = WEIR_PATTERN_RANDOM,
                      .window_us = S,
                      .duration_us = 20 * (int64_t)S,
                      .rate_num = 15,
                      .rate_per_us = S,
                      .keys = 3,
                      .seed = 42};
    weir_sim_report r[3];
    for (int i = 0; i < 3; i++) {
        weir_trace t;
        weir_trace_init(&t);
        p.seed = i < 2 ? 42 : 43;
        assert_int_equal(weir_pattern_generate(&p, &t), WEIR_OK);
        r[i] = run(&cfg, &t);
        weir_trace_free(&t);
    }
    assert_true(same_report(&r[0], &r[1]));
    assert_false(same_report(&r[0], &r[2]));
}

static void refuses_bad_input(void **unused)
{
    (void)unused;
    weir_sim_config cfg = {.limit = 10, .window_us = S, .hold_us = 1};
    weir_sim_report rep;
    weir_trace t;
    weir_trace_init(&t);
    push(&t, 5, 0, 1);
    assert_int_equal(weir_sim_run(NULL, &t, &rep), WEIR_EINVAL);
    assert_int_equal(weir_sim_run(&cfg, NULL, &rep), WEIR_EINVAL);
    assert_int_equal(weir_sim_run(&cfg, &t, NULL), WEIR_EINVAL);
    cfg.hold_us = 0;
    assert_int_equal(weir_sim_run(&cfg, &t, &rep), WEIR_EINVAL);
    cfg.hold_us = 1;
    cfg.limit = 0;
    assert_int_equal(weir_sim_run(&cfg, &t, &rep), WEIR_EINVAL);
    cfg.limit = WEIR_SIM_MAX_LIMIT + 1;
    assert_int_equal(weir_sim_run(&cfg, &t, &rep), WEIR_EINVAL);
    cfg.limit = 10;
    push(&t, 4, 0, 1); /* out of order */
    assert_int_equal(weir_sim_run(&cfg, &t, &rep), WEIR_EINVAL);
    weir_trace_free(&t);

    /* an empty trace is a report of zeros */
    assert_int_equal(weir_sim_run(&cfg, &t, &rep), WEIR_OK);
    assert_int_equal(rep.requests, 0);

    /* a limit an algorithm refuses names it */
    cfg.window_us = WEIR_MAX_WINDOW_US;
    cfg.limit = 7;
    cfg.bucket_burst = WEIR_MAX_LIMIT;
    assert_int_equal(weir_sim_run(&cfg, &t, &rep), WEIR_ERANGE);
    assert_int_equal(rep.refused, WEIR_ALGO_TOKEN_BUCKET);
    assert_int_equal(weir_sim_state_bytes(&cfg), 0);
}

/* The state cap at its edge: the largest limit, then just enough keys. */
static void cap_state_bytes(void **unused)
{
    (void)unused;
    weir_sim_config cfg = {.limit = WEIR_SIM_MAX_LIMIT, .window_us = S, .hold_us = 1};
    uint64_t per_key = weir_sim_state_bytes(&cfg);
    assert_true(per_key > 0);
    uint32_t fit = (uint32_t)(WEIR_SIM_MAX_STATE_BYTES / per_key);
    weir_trace t;
    weir_trace_init(&t);
    push(&t, 0, fit - 1, 1); /* n_keys = fit: allowed (states are lazy) */
    weir_sim_report rep;
    assert_int_equal(weir_sim_run(&cfg, &t, &rep), WEIR_OK);
    assert_int_equal(rep.keys, fit);
    push(&t, 1, fit, 1);
    assert_int_equal(weir_sim_run(&cfg, &t, &rep), WEIR_ETOOBIG);
    weir_trace_free(&t);
}

/* ------------------------------------------------------------------------ */
/* Patterns                                                                 */

static void expect_times(const weir_trace *t, const int64_t *want, size_t n)
{
    assert_int_equal(t->n_events, n);
    for (size_t i = 0; i < n; i++) {
        if (t->events[i].time_us != want[i])
            fail_msg("request %zu at %lld, want %lld", i, (long long)t->events[i].time_us,
                     (long long)want[i]);
        assert_int_equal(t->events[i].cost, 1);
    }
}

static void generate(const weir_pattern *p, weir_trace *t)
{
    uint64_t n = 0;
    assert_int_equal(weir_pattern_count(p, &n), WEIR_OK);
    weir_trace_init(t);
    assert_int_equal(weir_pattern_generate(p, t), WEIR_OK);
    assert_int_equal(t->n_events, n);
    for (size_t i = 1; i < t->n_events; i++)
        assert_true(t->events[i - 1].time_us <= t->events[i].time_us);
}

static void patterns_make_the_documented_times(void **unused)
{
    (void)unused;
    weir_trace t;
    /* steady, 3 per 2000 us: exact thirds, no drift */
    weir_pattern steady = {.kind = WEIR_PATTERN_STEADY,
                           .window_us = 1000,
                           .duration_us = 4000,
                           .rate_num = 3,
                           .rate_per_us = 2000,
                           .keys = 1};
    generate(&steady, &t);
    expect_times(&t, (const int64_t[]){0, 666, 1333, 2000, 2666, 3333}, 6);
    weir_trace_free(&t);

    weir_pattern bursty = {.kind = WEIR_PATTERN_BURSTY,
                           .window_us = 1000,
                           .duration_us = 300,
                           .burst = 3,
                           .spacing_us = 10,
                           .gap_us = 100,
                           .keys = 1};
    generate(&bursty, &t);
    expect_times(&t, (const int64_t[]){0, 10, 20, 120, 130, 140, 240, 250, 260}, 9);
    weir_trace_free(&t);

    weir_pattern boundary = {.kind = WEIR_PATTERN_BOUNDARY,
                             .window_us = 1000,
                             .duration_us = 4000,
                             .burst = 5,
                             .keys = 1};
    generate(&boundary, &t);
    expect_times(&t, (const int64_t[]){900,  920,  940,  960,  980,  1000, 1020, 1040, 1060, 1080,
                                       2900, 2920, 2940, 2960, 2980, 3000, 3020, 3040, 3060, 3080},
                 20);
    weir_trace_free(&t);

    /* a window too short to spread the requests: all at one instant */
    boundary.window_us = 10;
    boundary.duration_us = 11;
    generate(&boundary, &t);
    expect_times(&t, (const int64_t[]){9, 9, 9, 9, 9, 10, 10, 10, 10, 10}, 10);
    weir_trace_free(&t);

    weir_pattern random = {.kind = WEIR_PATTERN_RANDOM,
                           .window_us = 1000,
                           .duration_us = 5000,
                           .rate_num = 1,
                           .rate_per_us = 10,
                           .keys = 2,
                           .seed = 9};
    generate(&random, &t);
    assert_int_equal(t.n_events, 1000);
    assert_int_equal(t.n_keys, 2);
    for (size_t i = 0; i < t.n_events; i++)
        assert_true(t.events[i].time_us < 5000);
    weir_trace_free(&t);
}

static void keys_after_the_first_are_shifted_within_a_window(void **unused)
{
    (void)unused;
    weir_trace t;
    weir_pattern p = {.kind = WEIR_PATTERN_STEADY,
                      .window_us = 1000,
                      .duration_us = 10000,
                      .rate_num = 1,
                      .rate_per_us = 1000,
                      .keys = 4,
                      .seed = 3};
    generate(&p, &t);
    assert_int_equal(t.n_events, 40);
    int64_t first[4] = {-1, -1, -1, -1};
    for (size_t i = 0; i < t.n_events; i++)
        if (first[t.events[i].key] < 0)
            first[t.events[i].key] = t.events[i].time_us;
    assert_int_equal(first[0], 0);
    for (int k = 1; k < 4; k++)
        assert_true(first[k] >= 0 && first[k] < 1000);
    weir_trace_free(&t);
}

static void pattern_parameters_are_checked(void **unused)
{
    (void)unused;
    weir_pattern_kind k;
    assert_int_equal(weir_pattern_parse("boundary", &k), WEIR_OK);
    assert_int_equal(k, WEIR_PATTERN_BOUNDARY);
    assert_int_equal(weir_pattern_parse("Boundary", &k), WEIR_EINVAL);
    assert_string_equal(weir_pattern_name(WEIR_PATTERN_RANDOM), "random");
    assert_null(weir_pattern_name((weir_pattern_kind)WEIR_PATTERN_COUNT));

    weir_pattern p = {.kind = WEIR_PATTERN_BURSTY,
                      .window_us = 1000,
                      .duration_us = 1000,
                      .burst = 1,
                      .spacing_us = 0,
                      .gap_us = 0,
                      .keys = 1};
    uint64_t n;
    assert_int_equal(weir_pattern_count(&p, &n), WEIR_EINVAL); /* gap 0 */
    p.gap_us = 1;
    assert_int_equal(weir_pattern_count(&p, &n), WEIR_OK);
    assert_int_equal(n, 1000);
    p.keys = 0;
    assert_int_equal(weir_pattern_count(&p, &n), WEIR_EINVAL);
    p.keys = 1;
    p.burst = 2;
    p.spacing_us = WEIR_MAX_WINDOW_US + 1;
    assert_int_equal(weir_pattern_count(&p, &n), WEIR_EINVAL);

    /* one request past the cap is refused before anything is made */
    weir_pattern s = {.kind = WEIR_PATTERN_STEADY,
                      .window_us = 1000,
                      .duration_us = WEIR_SIM_MAX_REQUESTS,
                      .rate_num = 1,
                      .rate_per_us = 1,
                      .keys = 1};
    assert_int_equal(weir_pattern_count(&s, &n), WEIR_OK);
    assert_int_equal(n, WEIR_SIM_MAX_REQUESTS);
    s.duration_us++;
    weir_trace t;
    weir_trace_init(&t);
    assert_int_equal(weir_pattern_generate(&s, &t), WEIR_ERANGE);
    assert_null(t.events);
}

/* ------------------------------------------------------------------------ */
/* The command line                                                         */

static int cli(const char *const *args)
{
    char *argv[32];
    int argc = 0;
    argv[argc++] = (char *)"sim";
    for (; *args; args++)
        argv[argc++] = (char *)*args;
    argv[argc] = NULL;
    fflush(stdout);
    return weir_cli_sim(argc, argv);
}

/* Run with @fd (1 or 2) captured into @buf. */
static int cli_capture(int fd, const char *const *args, char *buf, size_t len)
{
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    fflush(fd == 1 ? stdout : stderr);
    int saved = dup(fd);
    dup2(fileno(tmp), fd);
    int rc = cli(args);
    fflush(fd == 1 ? stdout : stderr);
    dup2(saved, fd);
    close(saved);
    rewind(tmp);
    size_t got = fread(buf, 1, len - 1, tmp);
    buf[got] = '\0';
    fclose(tmp);
    return rc;
}

static int cli_stderr(const char *const *args, char *buf, size_t len)
{
    return cli_capture(2, args, buf, len);
}

static char *write_temp(const char *text)
{
    char *path = strdup("/tmp/weir-test-sim-XXXXXX");
    assert_non_null(path);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t n = strlen(text);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    close(fd);
    return path;
}

static void command_line_exit_codes(void **unused)
{
    (void)unused;
    char err[512];
    assert_int_equal(cli((const char *[]){NULL}), 0);
    assert_int_equal(cli((const char *[]){"--help", NULL}), 0);
    assert_int_equal(cli((const char *[]){"boundary", "--limit=3", "--window", "500ms", NULL}), 0);

    assert_int_equal(cli_stderr((const char *[]){"--limit", "0", NULL}, err, sizeof(err)), 2);
    assert_non_null(strstr(err, "--limit wants an integer 1 .. 65536, not '0'"));
    assert_int_equal(cli_stderr((const char *[]){"--window", "5x", NULL}, err, sizeof(err)), 2);
    assert_non_null(strstr(err, "--window wants a duration"));
    assert_int_equal(cli_stderr((const char *[]){"steady", "--gap", "1s", NULL}, err, sizeof(err)),
                     2);
    assert_non_null(strstr(err, "--gap does not apply to steady"));
    assert_int_equal(cli_stderr((const char *[]){"sideways", NULL}, err, sizeof(err)), 2);
    assert_int_equal(cli_stderr((const char *[]){"--keys", NULL}, err, sizeof(err)), 2);
    assert_non_null(strstr(err, "--keys needs a value"));
    assert_int_equal(
        cli_stderr((const char *[]){"steady", "--rate", "1000000", NULL}, err, sizeof(err)), 2);
    assert_non_null(strstr(err, "over the cap of 1000000"));
    assert_int_equal(cli((const char *[]){"steady", "--warmup", "2s", "--cold-factor", "4", NULL}),
                     0);
    assert_int_equal(cli_stderr((const char *[]){"--cold-factor", "2", NULL}, err, sizeof(err)), 2);
    assert_non_null(strstr(err, "--cold-factor needs --warmup"));
    assert_int_equal(cli_stderr((const char *[]){"--warmup", "2d", NULL}, err, sizeof(err)), 2);
    assert_non_null(strstr(err, "token_bucket refuses a limit of 10 per 1s with this --warmup"));

    char *good = write_temp("time_us,key,cost\n0,a\n10,b,2\n20,a\n");
    assert_int_equal(cli((const char *[]){"--trace", good, "--limit", "2", NULL}), 0);
    assert_int_equal(
        cli_stderr((const char *[]){"--trace", good, "--rate", "3", NULL}, err, sizeof(err)), 2);
    unlink(good);
    free(good);

    char *bad = write_temp("# sorted?\n10,a\n5,a\n");
    assert_int_equal(cli_stderr((const char *[]){"--trace", bad, NULL}, err, sizeof(err)), 1);
    char want[128];
    snprintf(want, sizeof(want), "%s:3: time 5 is before", bad);
    if (!strstr(err, want))
        fail_msg("stderr '%s' lacks '%s'", err, want);
    unlink(bad);
    free(bad);

    char *empty = write_temp("# nothing\n");
    assert_int_equal(cli_stderr((const char *[]){"--trace", empty, NULL}, err, sizeof(err)), 1);
    assert_non_null(strstr(err, "no requests"));
    unlink(empty);
    free(empty);

    assert_int_equal(
        cli_stderr((const char *[]){"--trace", "/nonexistent/x.csv", NULL}, err, sizeof(err)), 1);
}

static size_t entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static void the_svg_option_writes_a_file_or_fails_cleanly(void **unused)
{
    (void)unused;
    char dir[] = "/tmp/weir-test-sim-svg-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128], sub[128];
    snprintf(path, sizeof(path), "%s/out.svg", dir);
    snprintf(sub, sizeof(sub), "%s/sub", dir);

    static char out[1 << 16], err[1024];
    assert_int_equal(
        cli_capture(1, (const char *[]){"boundary", "--svg", path, NULL}, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "fixed_window")); /* the table still */
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_true(sb.st_size > 1000);
    assert_int_equal(entries(dir), 1); /* no temporary file left */

    /* to stdout: the SVG alone, the same bytes as the file */
    assert_int_equal(
        cli_capture(1, (const char *[]){"boundary", "--svg", "-", NULL}, out, sizeof(out)), 0);
    assert_int_equal(strncmp(out, "<svg ", 5), 0);
    assert_null(strstr(out, "wrong%"));
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char file[1 << 16];
    size_t got = fread(file, 1, sizeof(file) - 1, f);
    file[got] = '\0';
    fclose(f);
    assert_string_equal(out, file);

    /* a directory in the way: the message, status 1, nothing left */
    assert_int_equal(mkdir(sub, 0755), 0);
    assert_int_equal(
        cli_capture(2, (const char *[]){"boundary", "--svg", sub, NULL}, err, sizeof(err)), 1);
    assert_non_null(strstr(err, "cannot write"));
    assert_non_null(strstr(err, sub));
    assert_int_equal(entries(dir), 2);
    assert_int_equal(rmdir(sub), 0);

    assert_int_equal(
        cli_capture(2, (const char *[]){"--svg", "/nonexistent/dir/x.svg", NULL}, err, sizeof(err)),
        1);
    assert_non_null(strstr(err, "weir sim: cannot write /nonexistent/dir/x.svg: "));
    assert_int_equal(cli_capture(2, (const char *[]){"--svg", "", NULL}, err, sizeof(err)), 2);
    assert_non_null(strstr(err, "--svg wants a file name"));
    assert_int_equal(cli_capture(2, (const char *[]){"--svg", NULL}, err, sizeof(err)), 2);

    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(formats_durations),
        cmocka_unit_test(exact_results_on_a_small_trace),
        cmocka_unit_test(shaper_reports_its_delay_and_counts_when_requests_proceed),
        cmocka_unit_test(warmup_slows_the_cold_token_bucket),
        cmocka_unit_test(a_cost_past_the_limit_is_denied_everywhere),
        cmocka_unit_test(keys_are_independent),
        cmocka_unit_test(boundary_shows_the_fixed_window_exploit),
        cmocka_unit_test(under_the_limit_everything_is_admitted),
        cmocka_unit_test(properties_hold_on_random_traces),
        cmocka_unit_test(the_same_seed_gives_the_same_report),
        cmocka_unit_test(refuses_bad_input),
        cmocka_unit_test(cap_state_bytes),
        cmocka_unit_test(patterns_make_the_documented_times),
        cmocka_unit_test(keys_after_the_first_are_shifted_within_a_window),
        cmocka_unit_test(pattern_parameters_are_checked),
        cmocka_unit_test(command_line_exit_codes),
        cmocka_unit_test(the_svg_option_writes_a_file_or_fails_cleanly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
