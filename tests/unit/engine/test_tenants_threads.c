/*
 * test_tenants_threads.c - tenant tables swapped under load: threads
 * decide for one tenant while another thread puts new tables in force
 * hundreds of times, and reloads the rules between. Every table gives the
 * tenant the same override, so its limit admits exactly its quota over the
 * whole run: no decision sees a half-made table or none, and no counter
 * is lost. Also run under ThreadSanitizer.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "rules_support.h"
#include "weir/weir.h"

#define THREADS 2
#define ATTEMPTS 3000
#define SWAPS 300
#define QUOTA 2500

static const char *rules = "domain: api\n"
                           "tenants:\n"
                           "  default_tier: free\n"
                           "  tiers:\n"
                           "    free:\n"
                           "      rate_limit: {unit: hour, requests_per_unit: 10}\n"
                           "descriptors: []\n";

typedef struct shared {
    weir_ctx *ctx;
    weir_engine *engine;
    atomic_int admitted;
    atomic_int errors;
    atomic_int done;
} shared;

static void on_decided(void *arg, weir_code overall, weir_descriptor_status *st, size_t n)
{
    (void)st;
    (void)n;
    *(weir_code *)arg = overall;
}

static void *decider(void *arg)
{
    shared *s = arg;
    weir_engine_reader *rd;
    if (weir_engine_reader_new(s->engine, &rd) != WEIR_OK) {
        atomic_fetch_add(&s->errors, 1);
        return NULL;
    }
    weir_entry e[] = {{"api_key", 7, "big", 3}};
    weir_descriptor d = {e, 1, false, 0, NULL};
    weir_request req = {"api", 3, &d, 1, 0, 0};
    for (int i = 0; i < ATTEMPTS; i++) {
        weir_descriptor_status st;
        weir_code code = WEIR_CODE_OVER_LIMIT;
        if (weir_engine_decide(rd, &req, 1000, &st, on_decided, &code) != WEIR_OK)
            atomic_fetch_add(&s->errors, 1);
        else if (code == WEIR_CODE_OK)
            atomic_fetch_add(&s->admitted, 1);
    }
    weir_engine_reader_free(rd);
    atomic_fetch_add(&s->done, 1);
    return NULL;
}

/* A table where "big" has QUOTA an hour, among @extra other tenants. */
static weir_tenants *table(weir_ctx *ctx, int extra)
{
    weir_tenants *t;
    assert_int_equal(weir_tenants_new(ctx, &t), WEIR_OK);
    weir_tenant_limit l = {"default", 7, QUOTA, WEIR_UNIT_HOUR, WEIR_CALENDAR_NONE, NULL, 0};
    weir_tenant big = {"big", 3, NULL, INT64_MIN, INT64_MAX, &l, 1};
    assert_int_equal(weir_tenants_add(t, &big), WEIR_OK);
    for (int i = 0; i < extra; i++) {
        char key[16];
        int n = snprintf(key, sizeof(key), "t%d", i);
        weir_tenant other = {key, (size_t)n, "free", INT64_MIN, INT64_MAX, NULL, 0};
        assert_int_equal(weir_tenants_add(t, &other), WEIR_OK);
    }
    return t;
}

static void tables_swap_under_load(void **unused)
{
    (void)unused;
    shared s = {0};
    assert_int_equal(weir_ctx_new(NULL, &s.ctx), WEIR_OK);
    weir_store *store;
    assert_int_equal(weir_memstore_new(s.ctx, NULL, &store), WEIR_OK);
    weir_engine_options o = {.size = sizeof(o), .store = store};
    assert_int_equal(weir_engine_new(s.ctx, &o, test_rules_parse(s.ctx, rules), &s.engine),
                     WEIR_OK);
    assert_int_equal(weir_engine_set_tenants(s.engine, table(s.ctx, 0)), WEIR_OK);
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, decider, &s), 0);
    int swaps = 0;
    while (atomic_load(&s.done) < THREADS || swaps < 10) {
        assert_int_equal(weir_engine_set_tenants(s.engine, table(s.ctx, swaps % 50)), WEIR_OK);
        if (++swaps % 25 == 0) {
            weir_rules *r;
            assert_int_equal(
                weir_rules_parse(s.ctx, NULL, rules, strlen(rules), NULL, &r, NULL, 0, NULL),
                WEIR_OK);
            assert_int_equal(weir_engine_reload(s.engine, r), WEIR_OK);
        }
        if (swaps >= SWAPS)
            sched_yield();
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    printf("  %d tables swapped in while %d decisions ran\n", swaps, THREADS * ATTEMPTS);
    assert_int_equal(atomic_load(&s.errors), 0);
    assert_int_equal(atomic_load(&s.admitted), QUOTA);
    weir_engine_free(s.engine);
    weir_store_free(store);
    weir_ctx_free(s.ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tables_swap_under_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
