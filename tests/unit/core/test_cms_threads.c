/*
 * test_cms_threads.c - the count-min limiter (weir/cms.h) from many
 * threads at once: one key hammered by all of them is admitted exactly
 * its limit; keys shared and keys of one thread's own, in a sketch small
 * enough that they collide, are never admitted past their limit and
 * never under-counted; and windows rotating under the threads (a shared
 * clock each request moves on) keep every key within its limit in every
 * window. Run under ThreadSanitizer too (the _threads suffix).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fake.h"
#include "weir/cms.h"

#define THREADS 4
#define KEYS 512u
#define WINDOWS 64u
#define WINDOW_US 1000

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

static weir_cms *limiter(uint64_t limit, uint32_t width, uint32_t depth)
{
    weir_cms_options o = {.size = sizeof(o),
                          .limit = limit,
                          .window_us = WINDOW_US,
                          .width = width,
                          .depth = depth,
                          .seed = 7};
    weir_cms *c = NULL;
    assert_int_equal(weir_cms_new(ctx, &o, &c), WEIR_OK);
    return c;
}

static size_t key_of(uint32_t id, char *buf)
{
    return (size_t)snprintf(buf, 16, "k%u", id);
}

typedef struct run {
    weir_cms *c;
    uint64_t limit;
    uint32_t requests; /* a thread */
    bool same_key;     /* every request on key 0 */
    bool moving;       /* each request moves the shared clock on */
    uint64_t seed;
    _Atomic int64_t clock_us;
    /* hits admitted, by key and window */
    _Atomic uint64_t admitted[KEYS][WINDOWS];
    _Atomic uint64_t errors;
} run;

typedef struct worker {
    run *r;
    uint32_t id;
} worker;

static void *hammer(void *arg)
{
    worker *wk = arg;
    run *r = wk->r;
    test_rng g = {r->seed + wk->id};
    for (uint32_t i = 0; i < r->requests; i++) {
        /* half the keys are shared by all threads, half are each thread's */
        uint32_t id = 0;
        if (!r->same_key) {
            id = (uint32_t)rng_below(&g, KEYS / 2);
            if (rng_below(&g, 2))
                id = KEYS / 2 + (id % (KEYS / 2 / THREADS)) * THREADS + wk->id;
        }
        int64_t now = r->moving ? atomic_fetch_add(&r->clock_us, 3) : 0;
        uint64_t hits = r->same_key ? 1 : 1 + rng_below(&g, 2);
        char key[16];
        size_t len = key_of(id, key);
        weir_result res;
        if (weir_cms_take(r->c, key, len, now, hits, &res) != WEIR_OK) {
            atomic_fetch_add(&r->errors, 1);
            continue;
        }
        if (!res.allowed)
            continue;
        /* the window it was counted in ends at now + reset_after_us */
        int64_t w = (now + res.reset_after_us) / WINDOW_US - 1;
        if (w < 0 || w >= (int64_t)WINDOWS || res.reset_after_us <= 0) {
            atomic_fetch_add(&r->errors, 1);
            continue;
        }
        atomic_fetch_add(&r->admitted[id][w], hits);
    }
    return NULL;
}

static void run_threads(run *r)
{
    pthread_t t[THREADS];
    worker wk[THREADS];
    for (uint32_t i = 0; i < THREADS; i++) {
        wk[i] = (worker){r, i};
        assert_int_equal(pthread_create(&t[i], NULL, hammer, &wk[i]), 0);
    }
    for (uint32_t i = 0; i < THREADS; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    assert_int_equal(atomic_load(&r->errors), 0);
}

static run *new_run(weir_cms *c, uint64_t limit, uint32_t requests, bool same_key, bool moving)
{
    run *r = calloc(1, sizeof(*r));
    assert_non_null(r);
    r->c = c;
    r->limit = limit;
    r->requests = requests;
    r->same_key = same_key;
    r->moving = moving;
    r->seed = test_seed("cms_threads");
    return r;
}

/* Every key within its limit in every window. */
static uint64_t check_limits(run *r)
{
    uint64_t total = 0;
    for (uint32_t k = 0; k < KEYS; k++)
        for (uint32_t w = 0; w < WINDOWS; w++) {
            uint64_t a = atomic_load(&r->admitted[k][w]);
            assert_true(a <= r->limit);
            total += a;
        }
    return total;
}

/* Alone in the sketch, one key is counted exactly: limit admitted. */
static void same_key(void **unused)
{
    (void)unused;
    weir_cms *c = limiter(5000, 4096, 4);
    run *r = new_run(c, 5000, 10000, true, false);
    run_threads(r);
    assert_int_equal(atomic_load(&r->admitted[0][0]), 5000);
    uint64_t e = 0;
    assert_int_equal(weir_cms_estimate(c, "k0", 2, 0, &e), WEIR_OK);
    assert_int_equal(e, 5000);
    free(r);
    weir_cms_free(c);
}

/* Many keys in 2 x 64 counters: never past the limit, never under-counted. */
static void many_keys(void **unused)
{
    (void)unused;
    weir_cms *c = limiter(30, 64, 2);
    run *r = new_run(c, 30, 20000, false, false);
    run_threads(r);
    assert_true(check_limits(r) > 0);
    for (uint32_t k = 0; k < KEYS; k++) {
        char key[16];
        size_t len = key_of(k, key);
        uint64_t e = 0;
        assert_int_equal(weir_cms_estimate(c, key, len, 0, &e), WEIR_OK);
        assert_true(e >= atomic_load(&r->admitted[k][0]));
    }
    free(r);
    weir_cms_free(c);
}

/* The clock moves 3 us a request, windows of 1 ms: about 50 windows open
 * while the threads run, each with the same guarantee. */
static void windows_rotating(void **unused)
{
    (void)unused;
    for (int shape = 0; shape < 2; shape++) {
        weir_cms *c = shape ? limiter(4, 128, 3) : limiter(40, 1024, 4);
        uint64_t limit = shape ? 4 : 40;
        run *r = new_run(c, limit, 4000, shape == 0, true);
        run_threads(r);
        assert_true(check_limits(r) > 0);
        weir_cms_stats st;
        weir_cms_stats_get(c, &st);
        assert_int_equal(st.window, (atomic_load(&r->clock_us) - 3) / WINDOW_US);
        if (shape == 0) /* one key: full in every window but the last */
            for (int64_t w = 0; w < st.window; w++)
                assert_int_equal(atomic_load(&r->admitted[0][w]), limit);
        free(r);
        weir_cms_free(c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_key),
        cmocka_unit_test(many_keys),
        cmocka_unit_test(windows_rotating),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
