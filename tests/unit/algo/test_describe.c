/*
 * test_describe.c - weir_state_describe(): each algorithm's state read as
 * named numbers and a table, on hand-built traces, and agreeing with
 * weir_check() on what remains over a seeded random trace.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "algo_support.h"
#include "weir/weir.h"

#define MS ((int64_t)1000)
#define S ((int64_t)1000000)

static weir_limit compile(weir_algorithm algo, uint64_t limit, int64_t window_us, uint64_t burst,
                          uint32_t sub_windows)
{
    weir_limit_spec spec = {.algorithm = algo,
                            .limit = limit,
                            .window_us = window_us,
                            .burst = burst,
                            .sub_windows = sub_windows};
    weir_limit lim;
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_OK);
    return lim;
}

static weir_state_view describe(const weir_limit *lim, const void *state, int64_t now_us)
{
    weir_state_view v;
    memset(&v, 0x5a, sizeof(v));
    assert_int_equal(weir_state_describe(lim, state, now_us, &v), WEIR_OK);
    assert_int_equal(v.algorithm, lim->algorithm);
    assert_true(v.n_numbers <= WEIR_STATE_VIEW_NUMBERS);
    assert_true(v.n_rows <= WEIR_STATE_VIEW_ROWS);
    return v;
}

/* The number called @name; fails when there is none. */
static int64_t num(const weir_state_view *v, const char *name)
{
    for (uint32_t i = 0; i < v->n_numbers; i++)
        if (strcmp(v->numbers[i].name, name) == 0)
            return v->numbers[i].value;
    fail_msg("no number '%s'", name);
    return 0;
}

static void token_bucket(void **unused)
{
    (void)unused;
    weir_limit lim = compile(WEIR_ALGO_TOKEN_BUCKET, 10, S, 0, 0);
    void *st = algo_fresh(&lim);
    weir_state_view v = describe(&lim, st, 0);
    assert_int_equal(num(&v, "tokens_milli"), 10000);
    assert_int_equal(num(&v, "burst"), 10);
    assert_int_equal(num(&v, "full_in_us"), 0);
    assert_null(v.table);
    algo_step(&lim, st, 0, 4);
    v = describe(&lim, st, 0);
    assert_int_equal(num(&v, "tokens_milli"), 6000);
    assert_int_equal(num(&v, "full_in_us"), 400 * MS);
    assert_int_equal(num(&v, "last_us"), 0);
    /* refilled 1.5 tokens 150 ms later, the stored state unchanged */
    v = describe(&lim, st, 150 * MS);
    assert_int_equal(num(&v, "tokens_milli"), 7500);
    assert_int_equal(num(&v, "full_in_us"), 250 * MS);
    assert_int_equal(num(&v, "level_units"), 4 * num(&v, "unit"));
    free(st);
}

static void leaky_buckets(void **unused)
{
    (void)unused;
    weir_limit pol = compile(WEIR_ALGO_LEAKY_BUCKET, 10, S, 5, 0);
    void *st = algo_fresh(&pol);
    algo_step(&pol, st, 0, 3);
    weir_state_view v = describe(&pol, st, 50 * MS);
    assert_int_equal(num(&v, "level_milli"), 2500);
    assert_int_equal(num(&v, "burst"), 5);
    assert_int_equal(num(&v, "empty_in_us"), 250 * MS);
    free(st);

    weir_limit sh = compile(WEIR_ALGO_LEAKY_SHAPER, 10, S, 0, 0);
    st = algo_fresh(&sh);
    weir_result r;
    for (int i = 0; i < 4; i++)
        assert_int_equal(weir_step(&sh, st, 0, 1, &r), WEIR_OK);
    v = describe(&sh, st, 0);
    assert_int_equal(num(&v, "queue_milli"), 4000);
    assert_int_equal(num(&v, "queue"), 10);
    /* the wait of the next request is the delay weir_step() gives it */
    assert_int_equal(num(&v, "wait_us"), 400 * MS);
    assert_int_equal(weir_step(&sh, st, 0, 1, &r), WEIR_OK);
    assert_int_equal(r.delay_us, 400 * MS);
    free(st);
}

static void gcra(void **unused)
{
    (void)unused;
    weir_limit lim = compile(WEIR_ALGO_GCRA, 10, S, 3, 0);
    void *st = algo_fresh(&lim);
    weir_state_view v = describe(&lim, st, 0);
    assert_int_equal(num(&v, "tat_ns"), 0);
    assert_int_equal(num(&v, "interval_ns"), 100 * MS * 1000);
    assert_int_equal(num(&v, "tolerance_ns"), 300 * MS * 1000);
    assert_int_equal(num(&v, "remaining"), 3);
    algo_step(&lim, st, 1 * S, 2);
    v = describe(&lim, st, 1 * S + 50 * MS);
    assert_int_equal(num(&v, "tat_ns"), (1 * S + 200 * MS) * 1000);
    assert_int_equal(num(&v, "backlog_ns"), 150 * MS * 1000);
    assert_int_equal(num(&v, "remaining"), 1);
    assert_int_equal(num(&v, "rest_in_us"), 150 * MS);
    free(st);
}

static void fixed_window(void **unused)
{
    (void)unused;
    weir_limit lim = compile(WEIR_ALGO_FIXED_WINDOW, 5, S, 0, 0);
    void *st = algo_fresh(&lim);
    algo_step(&lim, st, 2 * S + 100 * MS, 3);
    weir_state_view v = describe(&lim, st, 2 * S + 900 * MS);
    assert_int_equal(num(&v, "window"), 2);
    assert_int_equal(num(&v, "count"), 3);
    assert_int_equal(num(&v, "window_start_us"), 2 * S);
    assert_int_equal(num(&v, "window_end_us"), 3 * S);
    assert_int_equal(num(&v, "count_now"), 3);
    assert_int_equal(num(&v, "remaining"), 2);
    /* the next window starts empty; the stored count is the old one's */
    v = describe(&lim, st, 3 * S);
    assert_int_equal(num(&v, "count"), 3);
    assert_int_equal(num(&v, "window_start_us"), 3 * S);
    assert_int_equal(num(&v, "count_now"), 0);
    assert_int_equal(num(&v, "remaining"), 5);
    /* a clock behind the state's window reads that window */
    v = describe(&lim, st, 1 * S);
    assert_int_equal(num(&v, "window_start_us"), 2 * S);
    assert_int_equal(num(&v, "count_now"), 3);
    free(st);
}

static void sliding_log(void **unused)
{
    (void)unused;
    weir_limit lim = compile(WEIR_ALGO_SLIDING_LOG, 40, S, 0, 0);
    void *st = algo_fresh(&lim);
    for (int64_t i = 0; i < 40; i++)
        algo_step(&lim, st, i * 10 * MS, 1);
    weir_state_view v = describe(&lim, st, 1 * S + 55 * MS);
    /* entries at 60 .. 390 ms are inside (55 ms, 1055 ms] */
    assert_int_equal(num(&v, "stored"), 40);
    assert_int_equal(num(&v, "in_window"), 34);
    assert_int_equal(num(&v, "remaining"), 6);
    assert_int_equal(num(&v, "oldest_us"), 60 * MS);
    assert_int_equal(num(&v, "newest_us"), 390 * MS);
    assert_string_equal(v.table, "log");
    assert_int_equal(v.n_columns, 1);
    assert_string_equal(v.columns[0], "t_us");
    assert_int_equal(v.table_rows, 34);
    assert_int_equal(v.n_rows, WEIR_STATE_VIEW_ROWS);
    /* the newest 32, oldest first */
    assert_int_equal(v.rows[0][0], 80 * MS);
    assert_int_equal(v.rows[WEIR_STATE_VIEW_ROWS - 1][0], 390 * MS);
    v = describe(&lim, st, 2 * S);
    assert_int_equal(num(&v, "in_window"), 0);
    assert_int_equal(num(&v, "oldest_us"), -1);
    assert_int_equal(v.n_rows, 0);
    free(st);
}

static void sliding_counter(void **unused)
{
    (void)unused;
    weir_limit lim = compile(WEIR_ALGO_SLIDING_COUNTER, 10, S, 0, 0);
    void *st = algo_fresh(&lim);
    algo_step(&lim, st, 500 * MS, 8);
    algo_step(&lim, st, 1 * S + 100 * MS, 1);
    weir_state_view v = describe(&lim, st, 1 * S + 250 * MS);
    assert_int_equal(num(&v, "sub_window_us"), S);
    assert_int_equal(num(&v, "sub_windows"), 1);
    assert_int_equal(num(&v, "current"), 1);
    assert_int_equal(num(&v, "elapsed_us"), 250 * MS);
    assert_int_equal(num(&v, "full"), 1);
    assert_int_equal(num(&v, "previous"), 8);
    /* 1 + 8 * 0.75 */
    assert_int_equal(num(&v, "estimate_milli"), 7000);
    assert_int_equal(num(&v, "remaining"), 3);
    assert_string_equal(v.table, "sub_windows");
    assert_int_equal(v.n_columns, 3);
    assert_int_equal(v.n_rows, 2);
    assert_int_equal(v.rows[0][0], 0);
    assert_int_equal(v.rows[0][2], 8);
    assert_int_equal(v.rows[1][1], S);
    assert_int_equal(v.rows[1][2], 1);
    free(st);

    /* four sub-windows of 250 ms: k + 1 rows */
    lim = compile(WEIR_ALGO_SLIDING_COUNTER, 10, S, 0, 4);
    st = algo_fresh(&lim);
    algo_step(&lim, st, 100 * MS, 2);
    algo_step(&lim, st, 600 * MS, 3);
    v = describe(&lim, st, 1 * S + 125 * MS);
    assert_int_equal(num(&v, "current"), 4);
    assert_int_equal(num(&v, "full"), 3);
    assert_int_equal(num(&v, "previous"), 2);
    assert_int_equal(num(&v, "estimate_milli"), 4000);
    assert_int_equal(v.table_rows, 5);
    assert_int_equal(v.rows[2][2], 3);
    assert_int_equal(v.rows[4][1], S);
    free(st);
}

static void concurrency(void **unused)
{
    (void)unused;
    weir_limit lim = compile(WEIR_ALGO_CONCURRENCY, 5, 10 * S, 0, 0);
    void *st = algo_fresh(&lim);
    weir_result a, b;
    assert_int_equal(weir_step(&lim, st, 0, 2, &a), WEIR_OK);
    assert_int_equal(weir_step(&lim, st, 1 * S, 1, &b), WEIR_OK);
    weir_state_view v = describe(&lim, st, 2 * S);
    assert_int_equal(num(&v, "held"), 3);
    assert_int_equal(num(&v, "leases"), 2);
    assert_int_equal(num(&v, "remaining"), 2);
    assert_int_equal(num(&v, "last_id"), (int64_t)b.lease);
    assert_int_equal(num(&v, "lease_timeout_us"), 10 * S);
    assert_int_equal(num(&v, "rest_in_us"), 9 * S);
    assert_string_equal(v.table, "leases");
    assert_int_equal(v.n_rows, 2);
    assert_int_equal(v.rows[0][0], (int64_t)a.lease);
    assert_int_equal(v.rows[0][1], 10 * S);
    assert_int_equal(v.rows[0][2], 2);
    /* the first lease timed out at 10 s */
    v = describe(&lim, st, 10 * S);
    assert_int_equal(num(&v, "held"), 1);
    assert_int_equal(v.n_rows, 1);
    assert_int_equal(weir_release(&lim, st, 3 * S, b.lease, &b), WEIR_OK);
    v = describe(&lim, st, 3 * S);
    assert_int_equal(num(&v, "leases"), 1);
    free(st);
}

static void refusals(void **unused)
{
    (void)unused;
    weir_limit lim = compile(WEIR_ALGO_FIXED_WINDOW, 5, S, 0, 0);
    uint64_t st[2] = {0, 99}; /* a count over the limit */
    weir_state_view v;
    assert_int_equal(weir_state_describe(&lim, st, 0, &v), WEIR_EINVAL);
    assert_int_equal(weir_state_describe(NULL, st, 0, &v), WEIR_EINVAL);
    assert_int_equal(weir_state_describe(&lim, NULL, 0, &v), WEIR_EINVAL);
    assert_int_equal(weir_state_describe(&lim, st, 0, NULL), WEIR_EINVAL);
    assert_int_equal(weir_state_describe(&lim, (char *)st + 4, 0, &v), WEIR_EINVAL);
    /* a ban has nothing to show */
    weir_limit ban = compile(WEIR_ALGO_TOKEN_BUCKET, 0, S, 0, 0);
    st[1] = 0;
    assert_int_equal(weir_state_describe(&ban, st, 0, &v), WEIR_OK);
    assert_int_equal(v.n_numbers, 0);
    assert_null(v.table);
}

/* Over a seeded random trace, every algorithm's "remaining" (and the
 * token bucket's whole tokens) is what weir_check() says remains. */
static void agrees_with_check(void **unused)
{
    (void)unused;
    uint64_t seed = 42;
    for (int algo = 1; algo <= WEIR_ALGORITHM_COUNT; algo++) {
        weir_limit lim = compile((weir_algorithm)algo, 7, S, 0, algo == 7 ? 4 : 0);
        void *st = algo_fresh(&lim);
        int64_t t = 0;
        for (int i = 0; i < 2000; i++) {
            seed = seed * 6364136223846793005u + 1442695040888963407u;
            t += (int64_t)(seed >> 33) % (150 * MS);
            weir_result r;
            assert_int_equal(weir_step(&lim, st, t, 1 + (seed >> 60) % 2, &r), WEIR_OK);
            int64_t later = t + (int64_t)(seed >> 40) % (50 * MS);
            weir_result c = algo_check(&lim, st, later, 0);
            weir_state_view v = describe(&lim, st, later);
            assert_int_equal(num(&v, "remaining"), (int64_t)c.remaining);
            if (algo == WEIR_ALGO_TOKEN_BUCKET)
                assert_int_equal(num(&v, "tokens_milli") / 1000, (int64_t)c.remaining);
        }
        free(st);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(token_bucket),
        cmocka_unit_test(leaky_buckets),
        cmocka_unit_test(gcra),
        cmocka_unit_test(fixed_window),
        cmocka_unit_test(sliding_log),
        cmocka_unit_test(sliding_counter),
        cmocka_unit_test(concurrency),
        cmocka_unit_test(refusals),
        cmocka_unit_test(agrees_with_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
