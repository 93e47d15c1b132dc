/*
 * test_keyed.c - counters the caller names (weir_engine_decide_key()):
 * take, look, check and reset; a counter's state kept across limits of
 * one algorithm; names apart from the rules' counters; refusals; the
 * failure modes when the store fails; a reader freed with an op in
 * flight; the leases of concurrency limits given back
 * (weir_engine_release()).
 *
 * Every test runs twice: on the memory store, which completes inline, and
 * on the deferred test store (stable keys, as a store shared between
 * processes), which completes when the test drains it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "deferred_store.h"
#include "rules_support.h"
#include "weir/weir.h"

#define S 1000000LL

typedef struct world {
    weir_ctx *ctx;
    weir_store *store;
    weir_store *fallback;
    weir_engine *engine;
    weir_engine_reader *reader;
} world;

static bool deferred;
static weir_deferred_options deferred_opts = {.shared_keys = true};

static int use_memory(void **unused)
{
    (void)unused;
    deferred = false;
    return 0;
}

static int use_deferred(void **unused)
{
    (void)unused;
    deferred = true;
    return 0;
}

static void open_world(world *w, const weir_deferred_options *o, uint32_t instances)
{
    assert_int_equal(weir_ctx_new(NULL, &w->ctx), WEIR_OK);
    assert_int_equal(weir_memstore_new(w->ctx, NULL, &w->store), WEIR_OK);
    w->fallback = NULL;
    if (o) {
        weir_store *mem = w->store;
        assert_int_equal(weir_deferred_store_new(w->ctx, mem, o, &w->store), WEIR_OK);
        assert_int_equal(weir_memstore_new(w->ctx, NULL, &w->fallback), WEIR_OK);
    }
    weir_engine_options eo = {
        .size = sizeof(eo), .store = w->store, .fallback = w->fallback, .instances = instances};
    const char *rules = "domain: api\n"
                        "descriptors:\n"
                        "  - key: user\n"
                        "    rate_limit: {unit: hour, requests_per_unit: 2}\n";
    assert_int_equal(weir_engine_new(w->ctx, &eo, test_rules_parse(w->ctx, rules), &w->engine),
                     WEIR_OK);
    assert_int_equal(weir_engine_reader_new(w->engine, &w->reader), WEIR_OK);
}

static void close_world(world *w)
{
    if (deferred)
        assert_int_equal(weir_deferred_store_pending(w->store), 0);
    weir_engine_reader_free(w->reader);
    weir_engine_free(w->engine);
    weir_store_free(w->store);
    weir_store_free(w->fallback);
    weir_ctx_free(w->ctx);
}

typedef struct got {
    int calls;
    weir_key_outcome out;
} got;

static void on_done(void *arg, const weir_key_outcome *out)
{
    got *g = arg;
    g->calls++;
    g->out = *out;
}

/* GCRA: @burst at once, @rate per second. */
static weir_limit gcra(uint64_t burst, uint64_t rate)
{
    weir_limit_spec spec = {
        .algorithm = WEIR_ALGO_GCRA, .limit = rate, .window_us = S, .burst = burst};
    weir_limit l;
    assert_int_equal(weir_limit_compile(&spec, &l), WEIR_OK);
    return l;
}

static weir_key_outcome run(world *w, const char *name, weir_op_kind kind, const weir_limit *lim,
                            uint64_t hits, weir_failure_mode fm, int64_t now)
{
    weir_key_op op = {name, strlen(name), kind, lim, hits, fm};
    got g = {0};
    assert_int_equal(weir_engine_decide_key(w->reader, &op, now, on_done, &g), WEIR_OK);
    if (deferred) {
        assert_int_equal(g.calls, 0);
        while (weir_deferred_store_drain(w->store) > 0)
            ;
    }
    assert_int_equal(g.calls, 1);
    return g.out;
}

static weir_key_outcome take(world *w, const char *name, const weir_limit *lim, uint64_t hits,
                             int64_t now)
{
    return run(w, name, WEIR_OP_TAKE, lim, hits, WEIR_FAILURE_ALLOW, now);
}

static void open_default(world *w)
{
    weir_deferred_options o = deferred_opts;
    open_world(w, deferred ? &o : NULL, 1);
}

static void take_look_and_reset(void **unused)
{
    (void)unused;
    world w;
    open_default(&w);
    weir_limit l = gcra(3, 1);
    for (uint64_t i = 0; i < 3; i++) {
        weir_key_outcome o = take(&w, "user123", &l, 1, 0);
        assert_int_equal(o.status, WEIR_OK);
        assert_true(o.result.allowed);
        assert_int_equal(o.result.remaining, 2 - i);
        assert_int_equal(o.result.reset_after_us, (int64_t)(i + 1) * S);
        assert_false(o.failure_mode);
    }
    weir_key_outcome o = take(&w, "user123", &l, 1, 0);
    assert_false(o.result.allowed);
    assert_int_equal(o.result.retry_after_us, S);
    /* 0 hits looks, and changes nothing */
    o = take(&w, "user123", &l, 0, S / 2);
    assert_false(o.result.allowed);
    assert_int_equal(o.result.reset_after_us, 3 * S - S / 2);
    /* a check says what a take would: admitted, leaving none */
    o = run(&w, "user123", WEIR_OP_CHECK, &l, 1, WEIR_FAILURE_ALLOW, S);
    assert_true(o.result.allowed);
    assert_int_equal(o.result.remaining, 0);
    o = take(&w, "user123", &l, 1, S);
    assert_true(o.result.allowed);
    assert_int_equal(o.result.remaining, 0);
    /* a look at a name never used creates nothing: a reset finds nothing */
    o = take(&w, "nobody", &l, 0, S);
    assert_true(o.result.allowed);
    assert_int_equal(o.result.remaining, 3);
    o = run(&w, "nobody", WEIR_OP_RESET, NULL, 0, WEIR_FAILURE_ALLOW, S);
    assert_int_equal(o.status, WEIR_OK);
    assert_false(o.result.allowed);
    /* a reset forgets the counter: a full burst again */
    o = run(&w, "user123", WEIR_OP_RESET, NULL, 0, WEIR_FAILURE_ALLOW, S);
    assert_int_equal(o.status, WEIR_OK);
    assert_true(o.result.allowed);
    o = take(&w, "user123", &l, 1, S);
    assert_true(o.result.allowed);
    assert_int_equal(o.result.remaining, 2);
    close_world(&w);
}

/* One GCRA counter, two rates: the time it keeps carries over, as a
 * redis-cell key does when its caller changes the limit. */
static void state_kept_across_limits(void **unused)
{
    (void)unused;
    world w;
    open_default(&w);
    weir_limit slow = gcra(2, 1), fast = gcra(10, 10);
    assert_true(take(&w, "k", &slow, 2, 0).result.allowed); /* 2 s of backlog */
    weir_key_outcome o = take(&w, "k", &fast, 1, 0);
    /* 10 at 100 ms each hold 1 s; 2 s are held already */
    assert_false(o.result.allowed);
    assert_int_equal(o.result.reset_after_us, 2 * S);
    assert_int_equal(o.result.retry_after_us, S + S / 10);
    close_world(&w);
}

/* A name the caller gives never meets a counter of the rules, even one
 * spelt like the rules' stable keys: spending one leaves the other. */
static void on_rule(void *arg, weir_code overall, weir_descriptor_status *st, size_t n)
{
    (void)st, (void)n;
    *(weir_code *)arg = overall;
}

static weir_code rule_decide(world *w, int64_t now)
{
    weir_entry e = {"user", 4, "hal", 3};
    weir_descriptor d = {&e, 1, false, 0, NULL};
    weir_request req = {"api", 3, &d, 1, 1, 0};
    weir_descriptor_status st[1];
    weir_code code = 0;
    assert_int_equal(weir_engine_decide(w->reader, &req, now, st, on_rule, &code), WEIR_OK);
    if (deferred)
        while (weir_deferred_store_drain(w->store) > 0)
            ;
    return code;
}

static void names_apart_from_rules(void **unused)
{
    (void)unused;
    world w;
    open_default(&w);
    weir_limit l = gcra(1, 1);
    const char *names[] = {"api", "hal", "user", "weir:2:api", "2:api"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        assert_true(take(&w, names[i], &l, 1, 0).result.allowed);
        assert_false(take(&w, names[i], &l, 1, 0).result.allowed);
    }
    /* the rule's counter (2 an hour) is whole */
    assert_int_equal(rule_decide(&w, 0), WEIR_CODE_OK);
    assert_int_equal(rule_decide(&w, 0), WEIR_CODE_OK);
    assert_int_equal(rule_decide(&w, 0), WEIR_CODE_OVER_LIMIT);
    close_world(&w);
}

static void refusals(void **unused)
{
    (void)unused;
    world w;
    open_default(&w);
    weir_limit l = gcra(1, 1);
    got g = {0};
    char long_name[WEIR_ENGINE_MAX_KEY_NAME + 1];
    memset(long_name, 'x', sizeof(long_name));
    weir_key_op ok = {"k", 1, WEIR_OP_TAKE, &l, 1, WEIR_FAILURE_ALLOW};
    weir_key_op bad = ok;
    bad.name_len = 0;
    assert_int_equal(weir_engine_decide_key(w.reader, &bad, 0, on_done, &g), WEIR_EINVAL);
    bad = ok;
    bad.name = long_name;
    bad.name_len = sizeof(long_name);
    assert_int_equal(weir_engine_decide_key(w.reader, &bad, 0, on_done, &g), WEIR_EINVAL);
    bad.name_len = WEIR_ENGINE_MAX_KEY_NAME; /* the longest is taken */
    assert_int_equal(weir_engine_decide_key(w.reader, &bad, 0, on_done, &g), WEIR_OK);
    bad = ok;
    bad.limit = NULL;
    assert_int_equal(weir_engine_decide_key(w.reader, &bad, 0, on_done, &g), WEIR_EINVAL);
    bad = ok;
    bad.kind = WEIR_OP_RELEASE;
    assert_int_equal(weir_engine_decide_key(w.reader, &bad, 0, on_done, &g), WEIR_EINVAL);
    assert_int_equal(weir_engine_decide_key(w.reader, &ok, 0, NULL, &g), WEIR_EINVAL);
    assert_int_equal(weir_engine_decide_key(NULL, &ok, 0, on_done, &g), WEIR_EINVAL);
    if (deferred)
        while (weir_deferred_store_drain(w.store) > 0)
            ;
    assert_int_equal(g.calls, 1); /* only the accepted one */
    close_world(&w);
}

/* Every batch fails: allow admits, deny denies, local decides on the
 * fallback at the instance's share, and a reset reports the failure. */
static void failure_modes(void **unused)
{
    (void)unused;
    if (!deferred)
        skip();
    world w;
    weir_deferred_options o = deferred_opts;
    o.fail_every = 1;
    open_world(&w, &o, 2);
    weir_limit l = gcra(4, 1);
    weir_key_outcome r = run(&w, "k", WEIR_OP_TAKE, &l, 1, WEIR_FAILURE_ALLOW, 0);
    assert_int_equal(r.status, WEIR_OK);
    assert_true(r.failure_mode);
    assert_true(r.result.allowed);
    assert_false(r.local);
    r = run(&w, "k", WEIR_OP_TAKE, &l, 1, WEIR_FAILURE_DENY, 0);
    assert_true(r.failure_mode);
    assert_false(r.result.allowed);
    /* local: 4 / 2 instances = 2 here */
    for (uint64_t i = 0; i < 2; i++) {
        r = run(&w, "k", WEIR_OP_TAKE, &l, 1, WEIR_FAILURE_LOCAL, 0);
        assert_true(r.failure_mode);
        assert_true(r.local);
        assert_true(r.result.allowed);
        assert_int_equal(r.result.remaining, 1 - i);
    }
    r = run(&w, "k", WEIR_OP_TAKE, &l, 1, WEIR_FAILURE_LOCAL, 0);
    assert_true(r.local);
    assert_false(r.result.allowed);
    r = run(&w, "k", WEIR_OP_RESET, NULL, 0, WEIR_FAILURE_ALLOW, 0);
    assert_int_equal(r.status, WEIR_EUNAVAIL);
    close_world(&w);
}

/* A reader freed while its op is in flight: the op still completes, and
 * the reader's memory goes with it (ASan sees no leak and no use after
 * free). */
static void reader_freed_in_flight(void **unused)
{
    (void)unused;
    if (!deferred)
        skip();
    world w;
    open_default(&w);
    weir_limit l = gcra(1, 1);
    weir_key_op op = {"k", 1, WEIR_OP_TAKE, &l, 1, WEIR_FAILURE_ALLOW};
    got g = {0};
    assert_int_equal(weir_engine_decide_key(w.reader, &op, 0, on_done, &g), WEIR_OK);
    weir_engine_reader_free(w.reader);
    w.reader = NULL;
    assert_int_equal(g.calls, 0);
    while (weir_deferred_store_drain(w.store) > 0)
        ;
    assert_int_equal(g.calls, 1);
    assert_true(g.out.result.allowed);
    close_world(&w);
}

/* ------------------------------------------------------------ leases */

typedef struct held {
    int calls;
    weir_code overall;
    uint64_t lease;
    unsigned char key[WEIR_MAX_KEY_BYTES];
    size_t key_len;
} held;

static void on_acquired(void *arg, weir_code overall, weir_descriptor_status *st, size_t n)
{
    held *h = arg;
    h->calls++;
    h->overall = overall;
    assert_int_equal(n, 1);
    assert_int_equal(st[0].n_outcomes, 1);
    const weir_limit_outcome *o = &st[0].outcomes[0];
    h->lease = o->lease;
    assert_non_null(o->key);
    memcpy(h->key, o->key, o->key_len);
    h->key_len = o->key_len;
}

static held acquire(world *w, int64_t now)
{
    weir_entry e = {"conn", 4, "c1", 2};
    weir_descriptor d = {&e, 1, false, 0, NULL};
    weir_request req = {"api", 3, &d, 1, 1, 0};
    weir_descriptor_status st[1];
    held h = {0};
    assert_int_equal(weir_engine_decide(w->reader, &req, now, st, on_acquired, &h), WEIR_OK);
    if (deferred)
        while (weir_deferred_store_drain(w->store) > 0)
            ;
    assert_int_equal(h.calls, 1);
    return h;
}

static weir_status release(world *w, const held *h, uint64_t limit, int64_t now)
{
    weir_lease l = {.key = h->key,
                    .key_len = h->key_len,
                    .lease = h->lease,
                    .limit = limit,
                    .window_us = 60 * S};
    got g = {0};
    assert_int_equal(weir_engine_release(w->reader, &l, now, on_done, &g), WEIR_OK);
    if (deferred)
        while (weir_deferred_store_drain(w->store) > 0)
            ;
    assert_int_equal(g.calls, 1);
    return g.out.status;
}

/* A concurrency limit's acquires report their leases; a lease given back
 * frees its unit at once, once only; one given back under another limit
 * is not held there (and the counter stays); a lease past its timeout is
 * gone. */
static void leases_taken_and_given_back(void **unused)
{
    (void)unused;
    world w;
    assert_int_equal(weir_ctx_new(NULL, &w.ctx), WEIR_OK);
    assert_int_equal(weir_memstore_new(w.ctx, NULL, &w.store), WEIR_OK);
    w.fallback = NULL;
    if (deferred) {
        weir_store *mem = w.store;
        assert_int_equal(weir_deferred_store_new(w.ctx, mem, &deferred_opts, &w.store), WEIR_OK);
    }
    const char *rules = "domain: api\n"
                        "descriptors:\n"
                        "  - key: conn\n"
                        "    rate_limit: {unit: minute, requests_per_unit: 2, "
                        "algorithm: concurrency}\n";
    weir_engine_options eo = {.size = sizeof(eo), .store = w.store, .instances = 1};
    assert_int_equal(weir_engine_new(w.ctx, &eo, test_rules_parse(w.ctx, rules), &w.engine),
                     WEIR_OK);
    assert_int_equal(weir_engine_reader_new(w.engine, &w.reader), WEIR_OK);

    held a = acquire(&w, 0), b = acquire(&w, 0);
    assert_int_equal(a.overall, WEIR_CODE_OK);
    assert_int_equal(b.overall, WEIR_CODE_OK);
    assert_true(a.lease != 0 && b.lease != 0 && a.lease != b.lease);
    assert_int_equal(a.key_len, b.key_len);
    held full = acquire(&w, 0);
    assert_int_equal(full.overall, WEIR_CODE_OVER_LIMIT);
    assert_int_equal(full.lease, 0);
    /* under another limit: not held there, and both units stay taken */
    assert_int_equal(release(&w, &a, 3, S), WEIR_ENOLEASE);
    assert_int_equal(acquire(&w, S).overall, WEIR_CODE_OVER_LIMIT);
    assert_int_equal(release(&w, &a, 2, S), WEIR_OK);
    assert_int_equal(release(&w, &a, 2, S), WEIR_ENOLEASE);
    held c = acquire(&w, S);
    assert_int_equal(c.overall, WEIR_CODE_OK);
    /* the minute passes: b and c time out */
    assert_int_equal(release(&w, &b, 2, 62 * S), WEIR_ENOLEASE);
    assert_int_equal(acquire(&w, 62 * S).overall, WEIR_CODE_OK);
    /* refusals */
    weir_lease bad = {.key = a.key, .lease = a.lease, .limit = 2, .window_us = 60 * S};
    got g = {0};
    assert_int_equal(weir_engine_release(w.reader, &bad, 0, on_done, &g), WEIR_EINVAL);
    bad.key_len = a.key_len;
    bad.limit = 0;
    bad.window_us = 0;
    assert_int_equal(weir_engine_release(w.reader, &bad, 0, on_done, &g), WEIR_EINVAL);
    assert_int_equal(g.calls, 0);
    close_world(&w);
}

#define BOTH(t) cmocka_unit_test(t)

int main(void)
{
    const struct CMUnitTest tests[] = {
        BOTH(take_look_and_reset),
        BOTH(state_kept_across_limits),
        BOTH(names_apart_from_rules),
        BOTH(refusals),
        BOTH(failure_modes),
        BOTH(reader_freed_in_flight),
        BOTH(leases_taken_and_given_back),
    };
    int failed = cmocka_run_group_tests_name("memory", tests, use_memory, NULL);
    failed += cmocka_run_group_tests_name("deferred", tests, use_deferred, NULL);
    return failed;
}
