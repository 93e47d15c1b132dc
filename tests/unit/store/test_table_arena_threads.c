/*
 * test_table_arena_threads.c - shards growing on several threads at once
 * take and give back tables of the same sizes: every table a thread holds
 * stays its own (its pattern intact) and the arena ends empty.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fake.h"
#include "store/table_arena.h"

#define THREADS 4
#define ROUNDS 200
#define HELD 3

typedef struct worker {
    weir__arena *arena;
    unsigned char tag;
    int bad;
} worker;

static void *run(void *arg)
{
    worker *w = arg;
    static const size_t sizes[] = {64u << 10, 200u << 10, 512u << 10};
    unsigned char *held[HELD] = {0};
    size_t held_size[HELD] = {0};
    for (int r = 0; r < ROUNDS; r++) {
        int k = r % HELD;
        if (held[k]) {
            size_t n = held_size[k];
            if (held[k][0] != w->tag || held[k][n / 2] != w->tag || held[k][n - 1] != w->tag)
                w->bad++;
            weir__arena_release(w->arena, held[k], n);
        }
        size_t got = sizes[(r / HELD + k) % 3];
        held[k] = weir__arena_alloc(w->arena, &got);
        held_size[k] = got;
        if (!held[k]) {
            w->bad++;
            continue;
        }
        memset(held[k], w->tag, got);
    }
    for (int k = 0; k < HELD; k++)
        if (held[k])
            weir__arena_release(w->arena, held[k], held_size[k]);
    return NULL;
}

static void growing_on_every_thread(void **unused)
{
    (void)unused;
    counting_alloc ca;
    weir_ctx *ctx;
    assert_int_equal(counting_ctx_new(&ca, &ctx), WEIR_OK);
    weir__arena *a = weir__arena_new(ctx);
    assert_non_null(a);
    pthread_t th[THREADS];
    worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){a, (unsigned char)(i + 1), 0};
        assert_int_equal(pthread_create(&th[i], NULL, run, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].bad, 0);
    }
    assert_int_equal(weir__arena_slack(a), 0);
    weir__arena_free(a);
    weir_ctx_free(ctx);
    assert_int_equal(ca.live_blocks, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(growing_on_every_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
