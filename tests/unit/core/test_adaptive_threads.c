/*
 * test_adaptive_threads.c - many threads sample one adaptive controller
 * at once while others read its limit, history and stats: every sample is
 * counted, the limit never leaves [min, max], the history stays in time
 * order. Also run under ThreadSanitizer.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "weir/weir.h"

#define WRITERS 4
#define SAMPLES 20000
#define MIN 2
#define MAX 500

typedef struct shared {
    weir_adaptive *a;
    atomic_int writers_done;
    atomic_int bad; /* a reader saw something out of contract */
    atomic_llong clock_us;
} shared;

static void *writer(void *arg)
{
    shared *s = arg;
    for (int i = 0; i < SAMPLES; i++) {
        int64_t now = atomic_fetch_add(&s->clock_us, 7);
        uint32_t limit = weir_adaptive_limit(s->a);
        /* latency rises past an in-flight count of 40 */
        uint32_t inflight = limit;
        int64_t rtt = 1000 + (inflight > 40 ? 50 * (int64_t)(inflight - 40) : 0) + i % 13;
        if (weir_adaptive_sample(s->a, now, rtt, inflight, i % 997 == 0) != WEIR_OK)
            atomic_fetch_add(&s->bad, 1);
    }
    atomic_fetch_add(&s->writers_done, 1);
    return NULL;
}

static void *reader(void *arg)
{
    shared *s = arg;
    weir_adaptive_change ch[16];
    weir_adaptive_stats st;
    while (atomic_load(&s->writers_done) < WRITERS) {
        uint32_t l = weir_adaptive_limit(s->a);
        if (l < MIN || l > MAX)
            atomic_fetch_add(&s->bad, 1);
        size_t n = weir_adaptive_history(s->a, ch, 16);
        for (size_t i = 1; i < n; i++)
            if (ch[i].t_us < ch[i - 1].t_us || ch[i].limit < MIN || ch[i].limit > MAX)
                atomic_fetch_add(&s->bad, 1);
        weir_adaptive_stats_get(s->a, &st);
        if (st.limit < MIN || st.limit > MAX || st.samples > (uint64_t)WRITERS * SAMPLES)
            atomic_fetch_add(&s->bad, 1);
    }
    return NULL;
}

static void samples_from_many_threads(void **unused)
{
    (void)unused;
    weir_ctx *ctx = NULL;
    assert_int_equal(weir_ctx_new(NULL, &ctx), WEIR_OK);
    for (int kind = WEIR_ADAPTIVE_AIMD; kind <= WEIR_ADAPTIVE_GRADIENT; kind++) {
        weir_adaptive_options o = {sizeof(o),
                                   .kind = (weir_adaptive_kind)kind,
                                   .min_limit = MIN,
                                   .max_limit = MAX,
                                   .window_samples = 20,
                                   .window_us = 500,
                                   .probe_interval_us = 100000,
                                   .probe_samples = 20,
                                   .aimd_timeout_us = 3000,
                                   .history = 16};
        shared s = {.a = NULL};
        assert_int_equal(weir_adaptive_new(ctx, &o, &s.a), WEIR_OK);
        pthread_t w[WRITERS], r[2];
        for (int i = 0; i < WRITERS; i++)
            assert_int_equal(pthread_create(&w[i], NULL, writer, &s), 0);
        for (int i = 0; i < 2; i++)
            assert_int_equal(pthread_create(&r[i], NULL, reader, &s), 0);
        for (int i = 0; i < WRITERS; i++)
            pthread_join(w[i], NULL);
        for (int i = 0; i < 2; i++)
            pthread_join(r[i], NULL);
        weir_adaptive_stats st;
        weir_adaptive_stats_get(s.a, &st);
        assert_int_equal(atomic_load(&s.bad), 0);
        assert_int_equal(st.samples, (uint64_t)WRITERS * SAMPLES);
        assert_true(st.windows > 100);
        assert_true(st.changes > 10);
        weir_adaptive_free(s.a);
    }
    weir_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(samples_from_many_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
