/*
 * test_adaptive_limits.c - `adaptive:` concurrency limits in the engine:
 * an acquire is admitted up to the controller's limit and reported
 * against it, a release feeds the controller (dropped work, a lease past
 * its timeout, a second release learnt from once), a reload keeps the
 * controller of an unchanged limit and starts a new one for changed
 * options, and weir_engine_adaptive_list() shows them. On the memory
 * store and the deferred test store.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "engine_world.h"

#define S 1000000LL

/* AIMD closing a window at every sample: a drop halves the limit, a
 * sample with at least half the limit in flight adds one. */
#define RULES(initial)                                                               \
    "domain: svc\n"                                                                  \
    "descriptors:\n"                                                                 \
    "  - key: backend\n"                                                             \
    "    rate_limit:\n"                                                              \
    "      unit: minute\n"                                                           \
    "      requests_per_unit: 20\n"                                                  \
    "      algorithm: concurrency\n"                                                 \
    "      name: pool\n"                                                             \
    "      adaptive: {controller: aimd, initial: " initial ", min: 1, window: 1us, " \
    "window_samples: 1, backoff: 0.5}\n"

typedef struct held {
    int calls;
    weir_code overall;
    uint32_t reported; /* the status's requests_per_unit */
    uint64_t remaining;
    weir_lease lease;
    unsigned char key[WEIR_MAX_KEY_BYTES];
} held;

static void on_acquired(void *arg, weir_code overall, weir_descriptor_status *st, size_t n)
{
    held *h = arg;
    h->calls++;
    h->overall = overall;
    assert_int_equal(n, 1);
    assert_int_equal(st[0].n_outcomes, 1);
    h->reported = st[0].requests_per_unit;
    h->remaining = st[0].remaining;
    const weir_limit_outcome *o = &st[0].outcomes[0];
    assert_int_equal(o->requests_per_unit, 20); /* the counter's most */
    assert_true(o->adaptive != 0);
    assert_int_equal(o->adaptive_limit, h->reported);
    memcpy(h->key, o->key, o->key_len);
    h->lease = (weir_lease){.key = h->key,
                            .key_len = o->key_len,
                            .lease = o->lease,
                            .limit = o->requests_per_unit,
                            .window_us = o->window_us,
                            .adaptive = o->adaptive,
                            .in_flight = (uint32_t)(o->requests_per_unit - o->remaining)};
}

static held acquire(world *w, int64_t now)
{
    weir_entry e[] = {E("backend", "db")};
    weir_descriptor d = {e, 1, false, 0, NULL};
    weir_request req = {
        .domain = "svc", .domain_len = 3, .descriptors = &d, .n_descriptors = 1, .hits = 1};
    weir_descriptor_status st[1];
    held h = {0};
    assert_int_equal(weir_engine_decide(w->reader, &req, now, st, on_acquired, &h), WEIR_OK);
    settle(w);
    assert_int_equal(h.calls, 1);
    h.lease.acquired_us = now;
    return h;
}

typedef struct released {
    int calls;
    weir_status status;
} released;

static void on_released(void *arg, const weir_key_outcome *o)
{
    released *r = arg;
    r->calls++;
    r->status = o->status;
}

static weir_status release(world *w, held *h, bool dropped, int64_t now)
{
    h->lease.key = h->key; /* @h is a copy of what acquire() held */
    h->lease.dropped = dropped;
    released r = {0};
    assert_int_equal(weir_engine_release(w->reader, &h->lease, now, on_released, &r), WEIR_OK);
    settle(w);
    assert_int_equal(r.calls, 1);
    return r.status;
}

/* The one adaptive limit in force: its controller's stats. */
static const weir_adaptive *controller(world *w, weir_adaptive_stats *st)
{
    weir_rules_hold *hold;
    assert_non_null(weir_engine_rules_hold(w->engine, &hold));
    weir_engine_adaptive a[2];
    assert_int_equal(weir_engine_adaptive_list(hold, a, 2), 1);
    assert_string_equal(a[0].limit->name, "pool");
    assert_non_null(a[0].limit->adaptive);
    weir_adaptive_stats_get(a[0].controller, st);
    weir_engine_rules_unhold(hold);
    return a[0].controller;
}

static uint32_t limit_now(world *w)
{
    weir_adaptive_stats st;
    controller(w, &st);
    return st.limit;
}

static void admits_up_to_the_controllers_limit(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, RULES("4"));
    held h[5];
    for (int i = 0; i < 4; i++) {
        h[i] = acquire(&w, 0);
        assert_int_equal(h[i].overall, WEIR_CODE_OK);
        assert_int_equal(h[i].reported, 4);
        assert_int_equal(h[i].remaining, (uint64_t)(3 - i));
        assert_int_equal(h[i].lease.in_flight, (uint32_t)(i + 1));
    }
    h[4] = acquire(&w, 0);
    assert_int_equal(h[4].overall, WEIR_CODE_OVER_LIMIT);
    assert_int_equal(h[4].remaining, 0);
    /* a drop halves it: 2, with 3 still held */
    assert_int_equal(release(&w, &h[0], true, S), WEIR_OK);
    assert_int_equal(limit_now(&w), 2);
    assert_int_equal(acquire(&w, S).overall, WEIR_CODE_OVER_LIMIT);
    /* good samples with at least half the limit in flight: +1 each */
    assert_int_equal(release(&w, &h[1], false, 2 * S), WEIR_OK);
    assert_int_equal(limit_now(&w), 3);
    /* given back again: no second sample */
    assert_int_equal(release(&w, &h[1], false, 2 * S), WEIR_ENOLEASE);
    weir_adaptive_stats st;
    controller(&w, &st);
    assert_int_equal(st.samples, 2);
    assert_int_equal(st.dropped, 1);
    assert_int_equal(st.limit, 3);
    /* two held, limit 3: one more */
    assert_int_equal(acquire(&w, 3 * S).overall, WEIR_CODE_OK);
    assert_int_equal(acquire(&w, 3 * S).overall, WEIR_CODE_OVER_LIMIT);
    close_world(&w);
}

static void a_lease_past_its_timeout_is_a_drop(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, RULES("4"));
    held h = acquire(&w, 0);
    /* the minute passed: the lease is gone, and the controller learns
     * the work took too long */
    assert_int_equal(release(&w, &h, false, 61 * S), WEIR_ENOLEASE);
    weir_adaptive_stats st;
    controller(&w, &st);
    assert_int_equal(st.samples, 1);
    assert_int_equal(st.dropped, 1);
    assert_int_equal(st.limit, 2);
    close_world(&w);
}

static void a_reload_keeps_what_was_learnt(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, RULES("4"));
    held h = acquire(&w, 0);
    assert_int_equal(release(&w, &h, true, S), WEIR_OK);
    weir_adaptive_stats st;
    const weir_adaptive *before = controller(&w, &st);
    assert_int_equal(st.limit, 2);
    /* another descriptor: the limit keeps its identity and its options */
    static const char more[] = RULES("4") "  - key: other\n"
                                          "    rate_limit: {unit: second, requests_per_unit: 1}\n";
    weir_rules *rules;
    assert_int_equal(
        weir_rules_parse(w.ctx, "r.yaml", more, strlen(more), NULL, &rules, NULL, 0, NULL),
        WEIR_OK);
    assert_int_equal(weir_engine_reload(w.engine, rules), WEIR_OK);
    assert_ptr_equal(controller(&w, &st), before);
    assert_int_equal(st.limit, 2);
    /* a lease of the old rules is learnt from by the same controller */
    held again = acquire(&w, 2 * S);
    assert_int_equal(again.overall, WEIR_CODE_OK);
    assert_int_equal(again.reported, 2);
    /* new options: a new controller at the new initial limit */
    assert_int_equal(weir_rules_parse(w.ctx, "r.yaml", RULES("6"), strlen(RULES("6")), NULL, &rules,
                                      NULL, 0, NULL),
                     WEIR_OK);
    assert_int_equal(weir_engine_reload(w.engine, rules), WEIR_OK);
    assert_true(controller(&w, &st) != before);
    assert_int_equal(st.limit, 6);
    assert_int_equal(st.samples, 0);
    assert_int_equal(release(&w, &again, false, 3 * S), WEIR_OK);
    controller(&w, &st);
    assert_int_equal(st.samples, 1);
    /* no adaptive limit left: a release of its lease still gives it back */
    held last = acquire(&w, 4 * S);
    assert_int_equal(
        weir_rules_parse(w.ctx, "r.yaml", "domain: svc\n", 12, NULL, &rules, NULL, 0, NULL),
        WEIR_OK);
    assert_int_equal(weir_engine_reload(w.engine, rules), WEIR_OK);
    assert_int_equal(release(&w, &last, false, 5 * S), WEIR_OK);
    weir_rules_hold *hold;
    weir_engine_rules_hold(w.engine, &hold);
    assert_int_equal(weir_engine_adaptive_list(hold, NULL, 0), 0);
    weir_engine_rules_unhold(hold);
    close_world(&w);
}

/* A priority's share of an adaptive limit is of its controller's limit. */
static void shares_of_the_limit_in_force(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, "domain: svc\n"
                   "descriptors:\n"
                   "  - key: backend\n"
                   "    rate_limit:\n"
                   "      unit: minute\n"
                   "      requests_per_unit: 20\n"
                   "      algorithm: concurrency\n"
                   "      name: pool\n"
                   "      adaptive: {controller: aimd, initial: 4, min: 1}\n"
                   "      shed: {sheddable: 50%}\n");
    weir_entry e[] = {E("backend", "db")};
    weir_descriptor d = {e, 1, false, 0, NULL};
    weir_descriptor_status st[1];
    int admitted[2] = {0, 0}, shed = 0;
    /* sheddable (rank 3) first: 4 - 2 kept free; then critical up to 4 */
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < 4; i++) {
            weir_request req = {.domain = "svc",
                                .domain_len = 3,
                                .descriptors = &d,
                                .n_descriptors = 1,
                                .hits = 1,
                                .priority = round == 0 ? 3u : 1u};
            outcome o = {0};
            assert_int_equal(weir_engine_decide(w.reader, &req, 0, st, on_decided, &o), WEIR_OK);
            settle(&w);
            assert_int_equal(o.calls, 1);
            admitted[round] += o.overall == WEIR_CODE_OK;
            shed += o.overall != WEIR_CODE_OK && st[0].shed;
        }
    assert_int_equal(admitted[0], 2);
    assert_int_equal(shed, 2);
    assert_int_equal(admitted[1], 2);
    close_world(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(admits_up_to_the_controllers_limit),
        cmocka_unit_test(a_lease_past_its_timeout_is_a_drop),
        cmocka_unit_test(a_reload_keeps_what_was_learnt),
        cmocka_unit_test(shares_of_the_limit_in_force),
    };
    int failed = cmocka_run_group_tests_name("memory store", tests, world_use_memory, NULL);
    world_deferred_opts.shared_keys = true;
    failed +=
        cmocka_run_group_tests_name("deferred store, stable keys", tests, world_use_deferred, NULL);
    return failed;
}
