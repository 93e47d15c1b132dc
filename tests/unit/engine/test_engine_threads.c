/*
 * test_engine_threads.c - reloads under load: several threads decide while
 * another swaps the rules hundreds of times. No crash, no torn read (every
 * decision sees one rule set whole), and no lost state: the per-user limit,
 * identical in both rule sets, admits exactly its quota over the whole run.
 * Then the same with decisions that complete later, on another thread (the
 * deferred test store drained by a thread of its own), as a networked
 * store's do. Also run under ThreadSanitizer.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "deferred_store.h"
#include "rules_support.h"
#include "weir/weir.h"

#define THREADS 3
#define ATTEMPTS 3000
#define RELOADS 300
#define QUOTA 2000

/* Both rule sets limit `user` to QUOTA per hour (same identity); they
 * differ in the `path` limit, 7 or 9 per hour. */
static const char *rules_a = "domain: api\n"
                             "descriptors:\n"
                             "  - key: user\n"
                             "    rate_limit: {unit: hour, requests_per_unit: 2000}\n"
                             "  - key: path\n"
                             "    rate_limit: {unit: hour, requests_per_unit: 7}\n";
static const char *rules_b = "domain: api\n"
                             "descriptors:\n"
                             "  - key: user\n"
                             "    rate_limit: {unit: hour, requests_per_unit: 2000}\n"
                             "  - key: path\n"
                             "    rate_limit: {unit: hour, requests_per_unit: 9}\n";

typedef struct shared {
    weir_ctx *ctx;
    weir_engine *engine;
    atomic_int admitted;
    atomic_int torn;
    atomic_int errors;
    atomic_int done;
} shared;

typedef struct seen {
    weir_code overall;
    uint32_t path_rpu;
    int calls;
} seen;

static void on_decided(void *arg, weir_code overall, weir_descriptor_status *st, size_t n)
{
    seen *s = arg;
    (void)n;
    s->overall = overall;
    s->path_rpu = st[1].limit ? st[1].requests_per_unit : 0;
    s->calls++;
}

static void *decider(void *arg)
{
    shared *sh = arg;
    weir_engine_reader *r;
    if (weir_engine_reader_new(sh->engine, &r) != WEIR_OK) {
        atomic_fetch_add(&sh->errors, 1);
        return NULL;
    }
    weir_entry user[] = {{"user", 4, "dana", 4}};
    for (int i = 0; i < ATTEMPTS; i++) {
        char v[16];
        int len = snprintf(v, sizeof(v), "/p%d", i % 500);
        weir_entry path[] = {{"path", 4, v, (size_t)len}};
        weir_descriptor d[2] = {{user, 1, false, 0, NULL}, {path, 1, true, 0, NULL}};
        weir_request req = {"api", 3, d, 2, 1, 0};
        weir_descriptor_status st[2];
        seen s = {0};
        if (weir_engine_decide(r, &req, i, st, on_decided, &s) != WEIR_OK || s.calls != 1) {
            atomic_fetch_add(&sh->errors, 1);
            continue;
        }
        /* the path limit is either rule set's, never a mixture */
        if (s.path_rpu != 7 && s.path_rpu != 9)
            atomic_fetch_add(&sh->torn, 1);
        if (st[0].code == WEIR_CODE_OK)
            atomic_fetch_add(&sh->admitted, 1);
    }
    weir_engine_reader_free(r);
    atomic_fetch_add(&sh->done, 1);
    return NULL;
}

static void reloads_under_load(void **unused)
{
    (void)unused;
    shared sh = {0};
    assert_int_equal(weir_ctx_new(NULL, &sh.ctx), WEIR_OK);
    weir_store *store;
    assert_int_equal(weir_memstore_new(sh.ctx, NULL, &store), WEIR_OK);
    weir_engine_options o = {.size = sizeof(o), .store = store};
    assert_int_equal(weir_engine_new(sh.ctx, &o, test_rules_parse(sh.ctx, rules_a), &sh.engine),
                     WEIR_OK);

    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, decider, &sh), 0);
    /* reload for as long as the deciders run, and at least RELOADS times */
    int reloads = 0;
    for (; reloads < RELOADS || atomic_load(&sh.done) < THREADS; reloads++) {
        weir_rules *next = test_rules_parse(sh.ctx, reloads % 2 ? rules_a : rules_b);
        assert_non_null(next);
        assert_int_equal(weir_engine_reload(sh.engine, next), WEIR_OK);
    }
    printf("%d reloads while %d threads made %d decisions each\n", reloads, THREADS, ATTEMPTS);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);

    assert_int_equal(atomic_load(&sh.errors), 0);
    assert_int_equal(atomic_load(&sh.torn), 0);
    /* 9,000 attempts for one user limited to 2,000: exactly 2,000, however
     * many reloads happened in between */
    assert_int_equal(atomic_load(&sh.admitted), QUOTA);
    weir_engine_free(sh.engine);
    weir_store_free(store);
    weir_ctx_free(sh.ctx);
}

/* ------------------------------------------------------------ completed elsewhere */

typedef struct late {
    shared *sh;
    atomic_int *completed; /* the decider's count */
    weir_descriptor_status st[2];
} late;

static void on_late(void *arg, weir_code overall, weir_descriptor_status *st, size_t n)
{
    (void)overall;
    (void)n;
    late *l = arg;
    if (st[1].limit && st[1].requests_per_unit != 7 && st[1].requests_per_unit != 9)
        atomic_fetch_add(&l->sh->torn, 1);
    if (st[0].code == WEIR_CODE_OK && !st[0].failure_mode)
        atomic_fetch_add(&l->sh->admitted, 1);
    atomic_fetch_add(l->completed, 1);
    free(l);
}

static void *late_decider(void *arg)
{
    shared *sh = arg;
    weir_engine_reader *r;
    atomic_int completed = 0;
    if (weir_engine_reader_new(sh->engine, &r) != WEIR_OK) {
        atomic_fetch_add(&sh->errors, 1);
        atomic_fetch_add(&sh->done, 1);
        return NULL;
    }
    weir_entry user[] = {{"user", 4, "dana", 4}};
    int started = 0;
    for (int i = 0; i < ATTEMPTS; i++) {
        char v[16];
        int len = snprintf(v, sizeof(v), "/p%d", i % 500);
        weir_entry path[] = {{"path", 4, v, (size_t)len}};
        weir_descriptor d[2] = {{user, 1, false, 0, NULL}, {path, 1, true, 0, NULL}};
        weir_request req = {"api", 3, d, 2, 1, 0};
        late *l = calloc(1, sizeof(*l));
        if (!l) {
            atomic_fetch_add(&sh->errors, 1);
            continue;
        }
        l->sh = sh;
        l->completed = &completed;
        if (weir_engine_decide(r, &req, i, l->st, on_late, l) != WEIR_OK) {
            free(l);
            atomic_fetch_add(&sh->errors, 1);
            continue;
        }
        started++;
    }
    /* freed with decisions still in flight: the last of them frees it */
    weir_engine_reader_free(r);
    while (atomic_load(&completed) < started)
        sched_yield();
    atomic_fetch_add(&sh->done, 1);
    return NULL;
}

typedef struct drainer {
    shared *sh;
    weir_store *store;
} drainer;

static void *drain_thread(void *arg)
{
    drainer *d = arg;
    while (atomic_load(&d->sh->done) < THREADS || weir_deferred_store_pending(d->store) > 0)
        if (weir_deferred_store_drain(d->store) == 0)
            sched_yield();
    return NULL;
}

static void completed_on_another_thread(void **unused)
{
    (void)unused;
    shared sh = {0};
    assert_int_equal(weir_ctx_new(NULL, &sh.ctx), WEIR_OK);
    weir_store *mem, *store;
    assert_int_equal(weir_memstore_new(sh.ctx, NULL, &mem), WEIR_OK);
    weir_deferred_options dopts = {.order = WEIR_DEFERRED_REVERSE};
    assert_int_equal(weir_deferred_store_new(sh.ctx, mem, &dopts, &store), WEIR_OK);
    weir_engine_options o = {.size = sizeof(o), .store = store};
    assert_int_equal(weir_engine_new(sh.ctx, &o, test_rules_parse(sh.ctx, rules_a), &sh.engine),
                     WEIR_OK);
    drainer dr = {&sh, store};
    pthread_t t[THREADS], drain;
    assert_int_equal(pthread_create(&drain, NULL, drain_thread, &dr), 0);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, late_decider, &sh), 0);
    for (int reloads = 0; reloads < RELOADS || atomic_load(&sh.done) < THREADS; reloads++)
        assert_int_equal(weir_engine_reload(
                             sh.engine, test_rules_parse(sh.ctx, reloads % 2 ? rules_a : rules_b)),
                         WEIR_OK);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    pthread_join(drain, NULL);
    assert_int_equal(atomic_load(&sh.errors), 0);
    assert_int_equal(atomic_load(&sh.torn), 0);
    assert_int_equal(atomic_load(&sh.admitted), QUOTA);
    assert_int_equal(weir_deferred_store_pending(store), 0);
    weir_engine_free(sh.engine);
    weir_store_free(store);
    weir_ctx_free(sh.ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reloads_under_load),
        cmocka_unit_test(completed_on_another_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
