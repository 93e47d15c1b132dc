/*
 * test_engine.c - decisions end to end on the memory store: multi-limit
 * charging (check all, then charge all), hits at both levels, shadow mode,
 * replaces, unlimited, overrides, unknown domains, request errors, and
 * reloads that keep the counters of unchanged limits.
 *
 * Every test runs twice: on the memory store, which completes inline, and
 * on the deferred test store, which holds every batch until the test
 * drains it (in reverse order), as a networked store completes later.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "deferred_store.h"
#include "engine_world.h"
#include "rules_support.h"
#include "weir/weir.h"

#define S 1000000LL

static const char *two_limits = "domain: api\n"
                                "descriptors:\n"
                                "  - key: user\n"
                                "    rate_limit: {unit: minute, requests_per_unit: 10}\n"
                                "  - key: path\n"
                                "    value: /pay\n"
                                "    rate_limit: {unit: minute, requests_per_unit: 2}\n";

/* A request denied by its per-endpoint limit leaves its per-user budget
 * untouched: check all, then charge all. */
static void denied_request_spends_nothing(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, two_limits);
    weir_entry user[] = {E("user", "alice")}, path[] = {E("path", "/pay")};
    weir_descriptor d[2] = {{user, 1, false, 0, NULL}, {path, 1, false, 0, NULL}};
    weir_descriptor_status st[2];
    assert_int_equal(decide(&w, "api", d, 2, 0, 0, st), WEIR_CODE_OK);
    assert_int_equal(decide(&w, "api", d, 2, 0, 0, st), WEIR_CODE_OK);
    assert_int_equal(st[0].remaining, 8);
    assert_int_equal(st[1].remaining, 0);
    assert_string_equal(st[1].limit->domain, "api");
    assert_string_equal(st[1].limit->path, "path_/pay");
    assert_string_equal(st[0].limit->path, "user");
    for (int i = 0; i < 5; i++) {
        assert_int_equal(decide(&w, "api", d, 2, 0, 0, st), WEIR_CODE_OVER_LIMIT);
        assert_int_equal(st[1].code, WEIR_CODE_OVER_LIMIT);
        assert_int_equal(st[0].code, WEIR_CODE_OK);
    }
    /* alice alone: her budget is still 8 */
    assert_int_equal(decide(&w, "api", d, 1, 0, 0, st), WEIR_CODE_OK);
    assert_int_equal(st[0].remaining, 7);
    assert_non_null(st[0].limit);
    assert_int_equal(st[0].requests_per_unit, 10);
    assert_int_equal(st[0].unit, WEIR_UNIT_MINUTE);
    close_world(&w);
}

static void hits_at_both_levels(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, two_limits);
    weir_entry user[] = {E("user", "bob")};
    weir_descriptor_status st[1];
    weir_descriptor d = {user, 1, false, 0, NULL};
    decide(&w, "api", &d, 1, 3, 0, st); /* request hits 3 */
    assert_int_equal(st[0].remaining, 7);
    decide(&w, "api", &d, 1, 0, 0, st); /* request hits 0 means 1 */
    assert_int_equal(st[0].remaining, 6);
    d.has_hits = true;
    d.hits = 0; /* descriptor hits 0: peek */
    decide(&w, "api", &d, 1, 5, 0, st);
    assert_int_equal(st[0].remaining, 6);
    d.hits = 2; /* the descriptor's hits win over the request's */
    decide(&w, "api", &d, 1, 5, 0, st);
    assert_int_equal(st[0].remaining, 4);
    close_world(&w);
}

/* Every limit of a descriptor is reported as an outcome, in rule order,
 * the reported (most restrictive) one among them. */
static void outcomes_of_every_limit(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, "domain: api\n"
                   "descriptors:\n"
                   "  - key: user\n"
                   "    rate_limits:\n"
                   "      - {unit: second, requests_per_unit: 2, name: per_second}\n"
                   "      - {unit: day, requests_per_unit: 100, name: per_day}\n");
    weir_entry user[] = {E("user", "alice")};
    weir_descriptor d = {user, 1, false, 0, NULL};
    weir_request req = {"api", 3, &d, 1, 0, 0};
    weir_descriptor_status st[1];
    outcome o = {0};
    for (int i = 0; i < 3; i++) {
        memset(&o, 0, sizeof(o));
        assert_int_equal(weir_engine_decide(w.reader, &req, 0, st, on_decided, &o), WEIR_OK);
        settle(&w);
    }
    assert_int_equal(o.overall, WEIR_CODE_OVER_LIMIT);
    assert_int_equal(o.n_first, 2);
    assert_string_equal(o.first[0].limit->name, "per_second");
    assert_true(o.first[0].denied);
    assert_int_equal(o.first[0].requests_per_unit, 2);
    assert_string_equal(o.first[1].limit->name, "per_day");
    assert_false(o.first[1].denied);
    assert_int_equal(o.first[1].remaining, 98); /* as it stays: nothing was charged */
    assert_int_equal(o.first[1].window_us, 86400000000);
    /* the denied third request charged nothing: a peek still sees 98 */
    d.has_hits = true;
    d.hits = 0;
    memset(&o, 0, sizeof(o));
    assert_int_equal(weir_engine_decide(w.reader, &req, 0, st, on_decided, &o), WEIR_OK);
    settle(&w);
    assert_int_equal(o.n_first, 2);
    assert_int_equal(o.first[1].remaining, 98);
    close_world(&w);
}

static void unmatched_unknown_and_errors(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, two_limits);
    weir_entry other[] = {E("path", "/other")};
    weir_descriptor d = {other, 1, false, 0, NULL};
    weir_descriptor_status st[1];
    assert_int_equal(decide(&w, "api", &d, 1, 0, 0, st), WEIR_CODE_OK);
    assert_null(st[0].limit);
    assert_false(st[0].domain_not_found);
    assert_int_equal(decide(&w, "nope", &d, 1, 0, 0, st), WEIR_CODE_OK);
    assert_null(st[0].limit);
    assert_true(st[0].domain_not_found);

    outcome o = {0};
    weir_request empty_domain = {"", 0, &d, 1, 0, 0};
    assert_int_equal(weir_engine_decide(w.reader, &empty_domain, 0, st, on_decided, &o),
                     WEIR_EINVAL);
    weir_request no_desc = {"api", 3, &d, 0, 0, 0};
    assert_int_equal(weir_engine_decide(w.reader, &no_desc, 0, st, on_decided, &o), WEIR_EINVAL);
    weir_limit_override bad = {5, WEIR_UNIT_NONE};
    weir_descriptor over = {other, 1, false, 0, &bad};
    weir_request bad_override = {"api", 3, &over, 1, 0, 0};
    assert_int_equal(weir_engine_decide(w.reader, &bad_override, 0, st, on_decided, &o),
                     WEIR_EINVAL);
    assert_int_equal(o.calls, 0); /* refused decisions never call back */
    close_world(&w);
}

/* weir_engine_options.refuse_overrides: a request that gives its own
 * limit is refused, with or without a rule for it; the others decide. */
static void overrides_refused(void **unused)
{
    (void)unused;
    world w;
    assert_int_equal(weir_ctx_new(NULL, &w.ctx), WEIR_OK);
    assert_int_equal(weir_memstore_new(w.ctx, NULL, &w.store), WEIR_OK);
    weir_engine_options eo = {.size = sizeof(eo), .store = w.store, .refuse_overrides = true};
    assert_int_equal(weir_engine_new(w.ctx, &eo, test_rules_parse(w.ctx, two_limits), &w.engine),
                     WEIR_OK);
    assert_int_equal(weir_engine_reader_new(w.engine, &w.reader), WEIR_OK);
    weir_entry path[] = {E("path", "/login")}, other[] = {E("path", "/other")};
    weir_limit_override mine = {1000, WEIR_UNIT_SECOND};
    weir_descriptor ds[2] = {{path, 1, false, 0, NULL}, {other, 1, false, 0, &mine}};
    weir_descriptor_status st[2];
    outcome o = {0};
    weir_request req = {"api", 3, ds, 2, 0, 0};
    assert_int_equal(weir_engine_decide(w.reader, &req, 0, st, on_decided, &o), WEIR_EINVAL);
    weir_refusal why = weir_engine_refusal(w.reader);
    assert_int_equal(why.code, WEIR_REFUSAL_OVERRIDE_REFUSED);
    char text[160];
    weir_refusal_text(why, text, sizeof(text));
    assert_string_equal(text, "descriptors[1].limit: this service does not take limits from "
                              "requests");
    ds[0].limit = &mine; /* on a descriptor a rule matches, too */
    ds[1].limit = NULL;
    assert_int_equal(weir_engine_decide(w.reader, &req, 0, st, on_decided, &o), WEIR_EINVAL);
    assert_int_equal(weir_engine_refusal(w.reader).descriptor, 0);
    assert_int_equal(o.calls, 0);
    ds[0].limit = NULL;
    assert_int_equal(weir_engine_decide(w.reader, &req, 0, st, on_decided, &o), WEIR_OK);
    assert_int_equal(o.calls, 1);
    weir_engine_reader_free(w.reader);
    weir_engine_free(w.engine);
    weir_store_free(w.store);
    weir_ctx_free(w.ctx);
}

/* A descriptor that matches no rule but gives a limit of its own is
 * limited by it, as upstream does (the domain must exist): a fixed window,
 * reported as the domain's "override" limit, a counter per descriptor
 * (entries and override), never in shadow mode. */
static void override_without_a_rule(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, two_limits);
    weir_limit_override two = {2, WEIR_UNIT_MINUTE}, three = {3, WEIR_UNIT_MINUTE};
    weir_entry a[] = {E("path", "/other")}, b[] = {E("path", "/else")};
    weir_entry ab[] = {E("path", "/other"), E("method", "GET")};
    weir_descriptor da = {a, 1, false, 0, &two}, db = {b, 1, false, 0, &two},
                    dab = {ab, 2, false, 0, &two}, da3 = {a, 1, false, 0, &three};
    weir_descriptor_status st[1];
    for (uint64_t i = 0; i < 2; i++) {
        assert_int_equal(decide(&w, "api", &da, 1, 0, 0, st), WEIR_CODE_OK);
        assert_non_null(st[0].limit);
        assert_string_equal(st[0].limit->path, "override");
        assert_string_equal(st[0].limit->domain, "api");
        assert_int_equal(st[0].requests_per_unit, 2);
        assert_int_equal(st[0].unit, WEIR_UNIT_MINUTE);
        assert_int_equal(st[0].remaining, 1 - i);
        assert_false(st[0].shadow);
    }
    assert_int_equal(decide(&w, "api", &da, 1, 0, 0, st), WEIR_CODE_OVER_LIMIT);
    /* other entries, more entries, another override: counters of their own */
    assert_int_equal(decide(&w, "api", &db, 1, 0, 0, st), WEIR_CODE_OK);
    assert_int_equal(decide(&w, "api", &dab, 1, 0, 0, st), WEIR_CODE_OK);
    assert_int_equal(decide(&w, "api", &da3, 1, 0, 0, st), WEIR_CODE_OK);
    assert_int_equal(st[0].remaining, 2);
    /* no override: no limit, as before */
    weir_descriptor plain = {a, 1, false, 0, NULL};
    assert_int_equal(decide(&w, "api", &plain, 1, 0, 0, st), WEIR_CODE_OK);
    assert_null(st[0].limit);
    /* an unknown domain stays unlimited, override or not */
    assert_int_equal(decide(&w, "nope", &da, 1, 0, 0, st), WEIR_CODE_OK);
    assert_true(st[0].domain_not_found);
    assert_null(st[0].limit);
    close_world(&w);
}

/* Descriptors are checked as they are planned: a bad one after good ones
 * still refuses the whole request and charges nothing, in a known domain
 * or not. */
static void bad_descriptor_after_good_ones_charges_nothing(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, two_limits);
    weir_entry user[] = {E("user", "alice")};
    weir_entry no_value[] = {{"path", 4, NULL, 3}}, no_key[] = {{NULL, 2, "/pay", 4}};
    weir_limit_override bad_unit = {5, WEIR_UNIT_NONE};
    weir_descriptor bad[4] = {{no_value, 1, false, 0, NULL},
                              {no_key, 1, false, 0, NULL},
                              {user, 0, false, 0, NULL},
                              {user, 1, false, 0, &bad_unit}};
    weir_descriptor_status st[2];
    outcome o = {0};
    for (int b = 0; b < 4; b++) {
        weir_descriptor d[2] = {{user, 1, false, 0, NULL}, bad[b]};
        weir_request known = {"api", 3, d, 2, 0, 0}, unknown = {"nope", 4, d, 2, 0, 0};
        assert_int_equal(weir_engine_decide(w.reader, &known, 0, st, on_decided, &o), WEIR_EINVAL);
        assert_int_equal(weir_engine_decide(w.reader, &unknown, 0, st, on_decided, &o),
                         WEIR_EINVAL);
    }
    assert_int_equal(o.calls, 0);
    /* alice's counter was never charged: her first request leaves 9 */
    weir_descriptor alone = {user, 1, false, 0, NULL};
    assert_int_equal(decide(&w, "api", &alone, 1, 0, 0, st), WEIR_CODE_OK);
    assert_int_equal(st[0].remaining, 9);
    close_world(&w);
}

static void shadow_replaces_unlimited_override(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, "domain: d\n"
                   "descriptors:\n"
                   "  - key: shadowed\n"
                   "    shadow_mode: true\n"
                   "    rate_limit: {unit: hour, requests_per_unit: 1}\n"
                   "  - key: free\n"
                   "    rate_limit: {unlimited: true}\n"
                   "  - key: general\n"
                   "    rate_limit: {unit: hour, requests_per_unit: 1, name: general}\n"
                   "  - key: special\n"
                   "    rate_limit:\n"
                   "      unit: hour\n"
                   "      requests_per_unit: 100\n"
                   "      replaces: [{name: general}]\n");
    weir_descriptor_status st[2];
    weir_entry sh[] = {E("shadowed", "x")};
    weir_descriptor d = {sh, 1, false, 0, NULL};
    decide(&w, "d", &d, 1, 0, 0, st);
    assert_int_equal(decide(&w, "d", &d, 1, 0, 0, st), WEIR_CODE_OK);
    assert_true(st[0].shadow);
    assert_true(st[0].would_deny);
    assert_int_equal(st[0].code, WEIR_CODE_OK);

    weir_entry fr[] = {E("free", "x")};
    d.entries = fr;
    assert_int_equal(decide(&w, "d", &d, 1, 0, 0, st), WEIR_CODE_OK);
    assert_true(st[0].unlimited);
    assert_int_equal(st[0].remaining, WEIR_ENGINE_UNLIMITED_REMAINING);
    assert_null(st[0].limit);

    /* `special` replaces `general` when both match one request */
    weir_entry g[] = {E("general", "x")}, sp[] = {E("special", "x")};
    weir_descriptor both[2] = {{g, 1, false, 0, NULL}, {sp, 1, false, 0, NULL}};
    for (int i = 0; i < 3; i++)
        assert_int_equal(decide(&w, "d", both, 2, 0, 0, st), WEIR_CODE_OK);
    assert_null(st[0].limit);
    assert_int_equal(st[1].remaining, 97);
    /* alone, general still has its own budget of 1 */
    assert_int_equal(decide(&w, "d", both, 1, 0, 0, st), WEIR_CODE_OK);
    assert_int_equal(decide(&w, "d", both, 1, 0, 0, st), WEIR_CODE_OVER_LIMIT);

    /* an override replaces the configured limit, with a counter of its own */
    weir_limit_override five = {5, WEIR_UNIT_SECOND};
    weir_descriptor ov = {g, 1, false, 0, &five};
    assert_int_equal(decide(&w, "d", &ov, 1, 0, 0, st), WEIR_CODE_OK);
    assert_int_equal(st[0].requests_per_unit, 5);
    assert_int_equal(st[0].unit, WEIR_UNIT_SECOND);
    assert_int_equal(st[0].remaining, 4);
    close_world(&w);
}

/* A reader keeps overrides compiled: the same override on limits of two
 * algorithms is compiled for each, and more overrides in turn than a
 * reader keeps each decide with their own limit and counter. */
static void overrides_kept_compiled_stay_exact(void **unused)
{
    (void)unused;
    world w;
    open_world(&w,
               "domain: d\n"
               "descriptors:\n"
               "  - key: tb\n"
               "    rate_limit: {unit: hour, requests_per_unit: 1000, algorithm: token_bucket}\n"
               "  - key: gc\n"
               "    rate_limit: {unit: hour, requests_per_unit: 1000, algorithm: gcra}\n");
    weir_descriptor_status st[1];
    weir_entry tb[] = {E("tb", "x")}, gc[] = {E("gc", "x")};
    weir_limit_override ten = {10, WEIR_UNIT_MINUTE};
    weir_descriptor dtb = {tb, 1, false, 0, &ten}, dgc = {gc, 1, false, 0, &ten};
    /* the token bucket's burst is the limit, GCRA's one request */
    assert_int_equal(decide(&w, "d", &dtb, 1, 0, 0, st), WEIR_CODE_OK);
    assert_int_equal(st[0].remaining, 9);
    assert_int_equal(decide(&w, "d", &dgc, 1, 0, 0, st), WEIR_CODE_OK);
    assert_int_equal(st[0].remaining, 0);
    assert_int_equal(decide(&w, "d", &dgc, 1, 0, 0, st), WEIR_CODE_OVER_LIMIT);
    assert_int_equal(decide(&w, "d", &dtb, 1, 0, 0, st), WEIR_CODE_OK);
    assert_int_equal(st[0].remaining, 8);

    weir_limit_override ov[24];
    for (uint32_t i = 0; i < 24; i++)
        ov[i] = (weir_limit_override){20 + i, i % 2 ? WEIR_UNIT_HOUR : WEIR_UNIT_DAY};
    for (uint32_t round = 0; round < 3; round++) {
        for (uint32_t i = 0; i < 24; i++) {
            weir_descriptor d = {tb, 1, false, 0, &ov[i]};
            assert_int_equal(decide(&w, "d", &d, 1, 0, 0, st), WEIR_CODE_OK);
            assert_int_equal(st[0].requests_per_unit, 20 + i);
            assert_int_equal(st[0].unit, ov[i].unit);
            assert_int_equal(st[0].remaining, 20 + i - 1 - round);
        }
    }
    close_world(&w);
}

/* A limit under exact values only has one counter for every request (its
 * digest is computed once, when the rules are loaded); an override still
 * gets a counter of its own, and a level that counts values apart still
 * counts them apart. */
static void fixed_and_per_value_counters(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, "domain: d\n"
                   "descriptors:\n"
                   "  - key: plan\n"
                   "    value: pro\n"
                   "    rate_limit: {unit: hour, requests_per_unit: 2}\n"
                   "  - key: a\n"
                   "    value: x\n"
                   "    descriptors:\n"
                   "      - key: b\n"
                   "        value: y\n"
                   "        rate_limit: {unit: hour, requests_per_unit: 1}\n"
                   "      - key: b\n"
                   "        rate_limit: {unit: hour, requests_per_unit: 1}\n"
                   "  - key: u\n"
                   "    rate_limit: {unit: hour, requests_per_unit: 1}\n"
                   "  - key: v\n"
                   "    rate_limit: {unit: hour, requests_per_unit: 1}\n");
    weir_descriptor_status st[1];
    weir_entry pro[] = {E("plan", "pro")};
    weir_descriptor d = {pro, 1, false, 0, NULL};
    assert_int_equal(decide(&w, "d", &d, 1, 0, 0, st), WEIR_CODE_OK);
    assert_int_equal(decide(&w, "d", &d, 1, 0, 0, st), WEIR_CODE_OK);
    assert_int_equal(decide(&w, "d", &d, 1, 0, 0, st), WEIR_CODE_OVER_LIMIT);
    weir_limit_override five = {5, WEIR_UNIT_HOUR};
    weir_descriptor ov = {pro, 1, false, 0, &five};
    assert_int_equal(decide(&w, "d", &ov, 1, 0, 0, st), WEIR_CODE_OK);
    assert_int_equal(st[0].remaining, 4);
    assert_int_equal(decide(&w, "d", &d, 1, 0, 0, st), WEIR_CODE_OVER_LIMIT);

    /* two exact levels: one counter; a default level: one per value */
    weir_entry xy[] = {E("a", "x"), E("b", "y")};
    weir_descriptor dxy = {xy, 2, false, 0, NULL};
    assert_int_equal(decide(&w, "d", &dxy, 1, 0, 0, st), WEIR_CODE_OK);
    assert_int_equal(decide(&w, "d", &dxy, 1, 0, 0, st), WEIR_CODE_OVER_LIMIT);
    weir_entry x1[] = {E("a", "x"), E("b", "1")}, x2[] = {E("a", "x"), E("b", "2")};
    weir_descriptor dx1 = {x1, 2, false, 0, NULL}, dx2 = {x2, 2, false, 0, NULL};
    assert_int_equal(decide(&w, "d", &dx1, 1, 0, 0, st), WEIR_CODE_OK);
    assert_int_equal(decide(&w, "d", &dx1, 1, 0, 0, st), WEIR_CODE_OVER_LIMIT);
    assert_int_equal(decide(&w, "d", &dx2, 1, 0, 0, st), WEIR_CODE_OK);
    assert_int_equal(decide(&w, "d", &dx2, 1, 0, 0, st), WEIR_CODE_OVER_LIMIT);

    /* one value under two limits: two counters (each limit's mask) */
    weir_entry u1[] = {E("u", "1")}, v1[] = {E("v", "1")};
    weir_descriptor du1 = {u1, 1, false, 0, NULL}, dv1 = {v1, 1, false, 0, NULL};
    assert_int_equal(decide(&w, "d", &du1, 1, 0, 0, st), WEIR_CODE_OK);
    assert_int_equal(decide(&w, "d", &du1, 1, 0, 0, st), WEIR_CODE_OVER_LIMIT);
    assert_int_equal(decide(&w, "d", &dv1, 1, 0, 0, st), WEIR_CODE_OK);
    assert_int_equal(decide(&w, "d", &dv1, 1, 0, 0, st), WEIR_CODE_OVER_LIMIT);
    close_world(&w);
}

/* Shadow and quota-mode limits go in a batch of their own, after the
 * enforcing ones, whatever the order of the descriptors: each reports on
 * its own descriptor, and a request is over its quota only when every
 * quota-mode descriptor is. */
static void quota_and_shadow_beside_enforcing(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, "domain: d\n"
                   "descriptors:\n"
                   "  - key: user\n"
                   "    rate_limit: {unit: hour, requests_per_unit: 1}\n"
                   "  - key: s\n"
                   "    shadow_mode: true\n"
                   "    rate_limit: {unit: hour, requests_per_unit: 1}\n"
                   "  - key: q\n"
                   "    quota_mode: true\n"
                   "    rate_limit: {unit: hour, requests_per_unit: 1}\n"
                   "  - key: q2\n"
                   "    quota_mode: true\n"
                   "    rate_limit: {unit: hour, requests_per_unit: 5}\n");
    weir_descriptor_status st[3];
    weir_entry s[] = {E("s", "x")}, q[] = {E("q", "x")}, q2[] = {E("q2", "x")};
    weir_entry u[] = {E("user", "u")}, v[] = {E("user", "v")};
    weir_descriptor first[3] = {
        {s, 1, false, 0, NULL}, {q, 1, false, 0, NULL}, {u, 1, false, 0, NULL}};
    assert_int_equal(decide(&w, "d", first, 3, 0, 0, st), WEIR_CODE_OK);
    assert_true(st[0].shadow);
    assert_false(st[0].would_deny);
    assert_int_equal(st[1].remaining, 0);
    assert_int_equal(st[2].remaining, 0);
    assert_string_equal(st[2].limit->path, "user");

    /* shadow would deny, the only quota descriptor is over: the request is */
    weir_descriptor second[3] = {
        {s, 1, false, 0, NULL}, {q, 1, false, 0, NULL}, {v, 1, false, 0, NULL}};
    assert_int_equal(decide(&w, "d", second, 3, 0, 0, st), WEIR_CODE_OVER_LIMIT);
    assert_true(st[0].would_deny);
    assert_int_equal(st[0].code, WEIR_CODE_OK);
    assert_int_equal(st[1].code, WEIR_CODE_OVER_LIMIT);
    assert_int_equal(st[2].code, WEIR_CODE_OK);
    /* v's enforcing limit was charged */
    assert_int_equal(decide(&w, "d", &second[2], 1, 0, 0, st), WEIR_CODE_OVER_LIMIT);

    /* a shadow limit that would deny, before two enforcing ones that admit:
     * it is not in their atomic batch, so both are charged */
    weir_entry a[] = {E("user", "a")}, b[] = {E("user", "b")};
    weir_descriptor third[3] = {
        {s, 1, false, 0, NULL}, {a, 1, false, 0, NULL}, {b, 1, false, 0, NULL}};
    assert_int_equal(decide(&w, "d", third, 3, 0, 0, st), WEIR_CODE_OK);
    assert_true(st[0].would_deny);
    assert_int_equal(decide(&w, "d", &third[1], 1, 0, 0, st), WEIR_CODE_OVER_LIMIT);
    assert_int_equal(decide(&w, "d", &third[2], 1, 0, 0, st), WEIR_CODE_OVER_LIMIT);

    /* q over, q2 not: not every quota descriptor is over */
    weir_descriptor both[2] = {{q, 1, false, 0, NULL}, {q2, 1, false, 0, NULL}};
    assert_int_equal(decide(&w, "d", both, 2, 0, 0, st), WEIR_CODE_OK);
    assert_int_equal(st[0].code, WEIR_CODE_OK);
    assert_int_equal(st[1].code, WEIR_CODE_OK);
    assert_int_equal(st[1].remaining, 4);
    close_world(&w);
}

/* Counters of unchanged limits survive a reload; changed ones start fresh. */
static void reload_keeps_unchanged_counters(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, two_limits);
    weir_entry user[] = {E("user", "carol")}, path[] = {E("path", "/pay")};
    weir_descriptor d[2] = {{user, 1, false, 0, NULL}, {path, 1, false, 0, NULL}};
    weir_descriptor_status st[2];
    decide(&w, "api", d, 2, 0, 0, st);
    decide(&w, "api", d, 2, 0, 0, st);
    assert_int_equal(st[0].remaining, 8);
    assert_int_equal(st[1].remaining, 0);
    /* same user limit, a changed /pay limit */
    const char *changed = "domain: api\n"
                          "descriptors:\n"
                          "  - key: user\n"
                          "    rate_limit: {unit: minute, requests_per_unit: 10}\n"
                          "  - key: path\n"
                          "    value: /pay\n"
                          "    rate_limit: {unit: minute, requests_per_unit: 3}\n";
    assert_int_equal(weir_engine_reload(w.engine, test_rules_parse(w.ctx, changed)), WEIR_OK);
    assert_int_equal(decide(&w, "api", d, 2, 0, 0, st), WEIR_CODE_OK);
    assert_int_equal(st[0].remaining, 7); /* kept: 10 - 3 */
    assert_int_equal(st[1].remaining, 2); /* fresh: 3 - 1 */
    assert_int_equal(weir_engine_reload(w.engine, NULL), WEIR_EINVAL);
    close_world(&w);
}

/* A callback that reloads the rules and decides again on the same reader:
 * the inner decision uses the rules of the outer one (still in force for
 * it), the outer statuses stay readable, and the next decision sees the
 * new rules. ASan checks that nothing is read after it is freed. */
typedef struct nested {
    world *w;
    const char *reloaded;
    weir_code inner;
    uint64_t inner_remaining;
    uint32_t outer_rpu_after;
} nested;

static void on_outer(void *arg, weir_code overall, weir_descriptor_status *st, size_t n)
{
    (void)overall;
    (void)n;
    nested *x = arg;
    assert_int_equal(weir_engine_reload(x->w->engine, test_rules_parse(x->w->ctx, x->reloaded)),
                     WEIR_OK);
    weir_entry user[] = {E("user", "erin")};
    weir_descriptor d[1] = {{user, 1, false, 0, NULL}};
    weir_descriptor_status inner[1];
    x->inner = decide(x->w, "api", d, 1, 0, 0, inner);
    x->inner_remaining = inner[0].remaining;
    x->outer_rpu_after = st[0].limit->requests_per_unit;
}

static void decide_inside_a_callback(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, two_limits);
    nested x = {&w,
                "domain: api\n"
                "descriptors:\n"
                "  - key: user\n"
                "    rate_limit: {unit: minute, requests_per_unit: 4}\n",
                0, 0, 0};
    weir_entry user[] = {E("user", "dave")};
    weir_descriptor d[1] = {{user, 1, false, 0, NULL}};
    weir_descriptor_status st[1];
    weir_request req = {"api", 3, d, 1, 0, 0};
    assert_int_equal(weir_engine_decide(w.reader, &req, 0, st, on_outer, &x), WEIR_OK);
    settle(&w);
    assert_int_equal(x.inner, WEIR_CODE_OK);
    /* inline, the callback runs inside the outer decision, whose rules
     * (10 per minute) are in force for it; from the loop, the callback
     * comes after the reload and the inner decision has the new rules */
    assert_int_equal(x.inner_remaining, world_deferred ? 3 : 9);
    assert_int_equal(x.outer_rpu_after, 10);
    /* afterwards the new rules are in force: a changed limit starts fresh */
    assert_int_equal(decide(&w, "api", d, 1, 0, 0, st), WEIR_CODE_OK);
    assert_int_equal(st[0].requests_per_unit, 4);
    assert_int_equal(st[0].remaining, 3);
    close_world(&w);
}

/* A bad file is rejected whole and the rules in force stay, counters too. */
static void bad_file_keeps_rules_in_force(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, two_limits);
    weir_entry user[] = {E("user", "erin")};
    weir_descriptor d = {user, 1, false, 0, NULL};
    weir_descriptor_status st[1];
    decide(&w, "api", &d, 1, 0, 0, st);
    assert_int_equal(st[0].remaining, 9);

    char path[] = "/tmp/weir-engine-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *bad = "domain: api\n"
                      "descriptors:\n"
                      "  - key: user\n"
                      "    rate_limit: {unit: lightyear, requests_per_unit: 1}\n";
    assert_int_equal(write(fd, bad, strlen(bad)), (ssize_t)strlen(bad));
    close(fd);
    weir_rules_error err[4];
    size_t n = 0;
    assert_int_equal(weir_engine_reload_path(w.engine, path, NULL, err, 4, &n), WEIR_EPARSE);
    assert_int_equal(n, 1);
    assert_int_equal(err[0].line, 4);
    assert_non_null(strstr(err[0].message, "invalid rate limit unit 'lightyear'"));
    /* still the old rules, and the old counter */
    decide(&w, "api", &d, 1, 0, 0, st);
    assert_int_equal(st[0].remaining, 8);
    assert_int_equal(st[0].requests_per_unit, 10);

    /* a good file goes into force */
    const char *good = "domain: api\n"
                       "descriptors:\n"
                       "  - key: user\n"
                       "    rate_limit: {unit: minute, requests_per_unit: 10}\n";
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(good, f);
    fclose(f);
    assert_int_equal(weir_engine_reload_path(w.engine, path, NULL, err, 4, &n), WEIR_OK);
    decide(&w, "api", &d, 1, 0, 0, st);
    assert_int_equal(st[0].remaining, 7); /* the same limit: counter kept */
    unlink(path);
    close_world(&w);
}

/* count_rejected: a limit that asks for upstream's counting is charged
 * even when another limit rejects the request; others are not. */
static void count_rejected_charges_anyway(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, "domain: api\n"
                   "descriptors:\n"
                   "  - key: user\n"
                   "    rate_limit: {unit: minute, requests_per_unit: 10, count_rejected: true}\n"
                   "  - key: team\n"
                   "    rate_limit: {unit: minute, requests_per_unit: 10}\n"
                   "  - key: path\n"
                   "    rate_limit: {unit: minute, requests_per_unit: 1, count_rejected: true}\n");
    weir_entry user[] = {E("user", "fay")}, team[] = {E("team", "red")}, path[] = {E("path", "/x")};
    weir_descriptor d[3] = {
        {user, 1, false, 0, NULL}, {team, 1, false, 0, NULL}, {path, 1, false, 0, NULL}};
    weir_descriptor_status st[3];
    assert_int_equal(decide(&w, "api", d, 3, 0, 0, st), WEIR_CODE_OK);
    assert_int_equal(decide(&w, "api", d, 3, 0, 0, st), WEIR_CODE_OVER_LIMIT);
    assert_int_equal(decide(&w, "api", d, 3, 0, 0, st), WEIR_CODE_OVER_LIMIT);
    /* user (count_rejected) paid for all three requests, team only for the
     * admitted one, and path stays exactly at its limit */
    weir_descriptor peek[3] = {
        {user, 1, true, 0, NULL}, {team, 1, true, 0, NULL}, {path, 1, true, 0, NULL}};
    decide(&w, "api", peek, 3, 0, 0, st);
    assert_int_equal(st[0].remaining, 7);
    assert_int_equal(st[1].remaining, 9);
    assert_int_equal(st[2].remaining, 0);
    close_world(&w);
}

/* Every refusal says why, in the words every protocol answers with
 * (upstream's where upstream has them), and nothing is charged. */
static void refusals_name_their_reason(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, two_limits);
    char buf[128];
    weir_entry e = {"user", 4, "v", 1}, long_value = {"user", 4, NULL, 5000};
    char big[5000];
    memset(big, 'x', sizeof(big));
    long_value.value = big;
    weir_limit_override none = {5, WEIR_UNIT_NONE}, sec = {5, WEIR_UNIT_SECOND};
    weir_descriptor ok = {&e, 1, false, 0, NULL}, empty = {NULL, 0, false, 0, NULL};
    weir_descriptor bad_unit = {&e, 1, false, 0, &none}, good_unit = {&e, 1, false, 0, &sec};
    weir_descriptor too_long = {&long_value, 1, false, 0, NULL};
    weir_descriptor_status st[2];
    outcome o = {0};
    static const struct {
        const char *domain;
        size_t n;
        int second; /* 0 ok, 1 empty, 2 bad unit, 3 good unit, 4 too long */
        weir_status status;
        const char *text;
    } rows[] = {
        {"", 1, 0, WEIR_EINVAL, "rate limit domain must not be empty"},
        {"api", 0, 0, WEIR_EINVAL, "rate limit descriptor list must not be empty"},
        {"api", 2, 1, WEIR_EINVAL, "descriptors[1] has no entries"},
        {"nope", 2, 1, WEIR_EINVAL, "descriptors[1] has no entries"},
        {"api", 2, 2, WEIR_EINVAL, "descriptors[1].limit.unit must not be UNKNOWN"},
        {"api", 2, 4, WEIR_EINVAL,
         "descriptors[1] has values too long for a counter key (4096 bytes with the rule's path)"},
        {"api", 2, 3, WEIR_OK, "not refused"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        weir_descriptor two[2] = {ok, ok};
        two[1] = rows[i].second == 1   ? empty
                 : rows[i].second == 2 ? bad_unit
                 : rows[i].second == 3 ? good_unit
                 : rows[i].second == 4 ? too_long
                                       : ok;
        weir_request r = {rows[i].domain, strlen(rows[i].domain), two, rows[i].n, 0, 0};
        assert_int_equal(weir_engine_decide(w.reader, &r, 0, st, on_decided, &o), rows[i].status);
        weir_refusal why = weir_engine_refusal(w.reader);
        size_t len = weir_refusal_text(why, buf, sizeof(buf));
        assert_string_equal(buf, rows[i].text);
        assert_int_equal(len, strlen(rows[i].text));
        settle(&w);
    }
    assert_int_equal(o.calls, 1); /* only the accepted one */
    /* a text cut to the buffer still says how long it is */
    weir_refusal r = {WEIR_REFUSAL_NO_ENTRIES, 12};
    assert_int_equal(weir_refusal_text(r, buf, 8), strlen("descriptors[12] has no entries"));
    assert_string_equal(buf, "descrip");
    close_world(&w);
}

/* A store that refuses a batch completes the decision at once, inside
 * weir_engine_decide(), by each limit's failure mode; a decision made from
 * that callback must find the rules (it once read a reader's rules that
 * only an inline store sets). */
typedef struct refused {
    world *w;
    int outer_calls;
    weir_code inner;
    bool inner_failed;
} refused;

static void on_refused_outer(void *arg, weir_code overall, weir_descriptor_status *st, size_t n)
{
    (void)n;
    refused *r = arg;
    r->outer_calls++;
    assert_int_equal(overall, WEIR_CODE_OK); /* failure_mode: allow */
    assert_true(st[0].failure_mode);
    weir_entry user[] = {E("user", "gil")};
    weir_descriptor d[1] = {{user, 1, false, 0, NULL}};
    weir_descriptor_status inner[1];
    r->inner = decide(r->w, "api", d, 1, 0, 0, inner);
    r->inner_failed = inner[0].failure_mode;
}

static void refused_batch_completes_at_once(void **unused)
{
    (void)unused;
    weir_deferred_options saved = world_deferred_opts;
    world_deferred_opts.refuse_every = 2; /* the outer batch is refused, the inner one is not */
    world_deferred_opts.fail_status = WEIR_EUNAVAIL;
    bool was = world_deferred;
    world_deferred = true;
    world w;
    open_world(&w, two_limits);
    refused r = {&w, 0, 0, true};
    weir_entry user[] = {E("user", "gil")};
    weir_descriptor d[1] = {{user, 1, false, 0, NULL}};
    weir_descriptor_status st[1];
    weir_request req = {"api", 3, d, 1, 0, 0};
    /* the first submit goes through and the second is refused: spend one */
    decide(&w, "api", d, 1, 0, 0, st);
    assert_int_equal(st[0].remaining, 9);
    assert_int_equal(weir_engine_decide(w.reader, &req, 0, st, on_refused_outer, &r), WEIR_OK);
    assert_int_equal(r.outer_calls, 1); /* before weir_engine_decide() returned */
    assert_int_equal(r.inner, WEIR_CODE_OK);
    assert_false(r.inner_failed);
    close_world(&w);
    world_deferred = was;
    world_deferred_opts = saved;
}

/* A batch the store fails (or times out) completes with the error: the
 * limit's failure mode decides, and nothing is charged. */
static void failed_batches_follow_failure_mode(void **unused)
{
    (void)unused;
    weir_deferred_options saved = world_deferred_opts;
    world_deferred_opts.fail_every = 2;
    world_deferred_opts.timeout_every = 3;
    bool was = world_deferred;
    world_deferred = true;
    world w;
    open_world(&w, "domain: api\n"
                   "descriptors:\n"
                   "  - key: user\n"
                   "    rate_limit: {unit: minute, requests_per_unit: 10}\n"
                   "  - key: ip\n"
                   "    rate_limit: {unit: minute, requests_per_unit: 10, failure_mode: deny}\n");
    weir_entry user[] = {E("user", "hal")}, ip[] = {E("ip", "10.0.0.1")};
    weir_descriptor du = {user, 1, false, 0, NULL}, di = {ip, 1, false, 0, NULL};
    weir_descriptor_status st[1];
    assert_int_equal(decide(&w, "api", &du, 1, 0, 0, st), WEIR_CODE_OK); /* batch 1: decided */
    assert_false(st[0].failure_mode);
    assert_int_equal(st[0].remaining, 9);
    assert_int_equal(decide(&w, "api", &du, 1, 0, 0, st), WEIR_CODE_OK); /* 2: failed, allow */
    assert_true(st[0].failure_mode);
    assert_int_equal(decide(&w, "api", &di, 1, 0, 0, st), WEIR_CODE_OVER_LIMIT); /* 3: timed out */
    assert_true(st[0].failure_mode);
    assert_int_equal(decide(&w, "api", &du, 1, 0, 0, st), WEIR_CODE_OK); /* 4: failed */
    assert_int_equal(decide(&w, "api", &du, 1, 0, 0, st), WEIR_CODE_OK); /* 5: decided */
    assert_false(st[0].failure_mode);
    assert_int_equal(st[0].remaining, 8); /* the failed ones charged nothing */
    close_world(&w);
    world_deferred = was;
    world_deferred_opts = saved;
}

/* failure_mode local: while every batch fails, limits with it are decided
 * on the fallback store at their share (1/instances, or local_share), an
 * atomic batch staying atomic there; allow and deny limits keep their
 * modes; without a fallback, local fails open. */
static void local_failure_mode_decides_on_the_fallback(void **unused)
{
    (void)unused;
    static const char *rules = "domain: api\n"
                               "descriptors:\n"
                               "  - key: user\n"
                               "    rate_limit: {unit: hour, requests_per_unit: 10, "
                               "failure_mode: local}\n"
                               "  - key: ip\n"
                               "    rate_limit: {unit: hour, requests_per_unit: 10, "
                               "failure_mode: local, local_share: 0.3}\n"
                               "  - key: app\n"
                               "    rate_limit: {unit: hour, requests_per_unit: 10, "
                               "failure_mode: deny}\n";
    weir_deferred_options saved = world_deferred_opts;
    world_deferred_opts.fail_every = 1;
    bool was = world_deferred;
    world_deferred = true;
    /* the whole batch failed, then each op of it (a cluster's node down) */
    for (int per_op = 0; per_op < 2; per_op++) {
        world_deferred_opts.fail_ops = per_op == 1;
        world w;
        open_world(&w, rules);
        weir_store *fallback;
        assert_int_equal(weir_memstore_new(w.ctx, NULL, &fallback), WEIR_OK);
        weir_engine *e;
        weir_engine_options o = {
            .size = sizeof(o), .store = w.store, .fallback = fallback, .instances = 2};
        assert_int_equal(weir_engine_new(w.ctx, &o, test_rules_parse(w.ctx, rules), &e), WEIR_OK);
        weir_engine_reader_free(w.reader);
        weir_engine_free(w.engine);
        w.engine = e;
        assert_int_equal(weir_engine_reader_new(e, &w.reader), WEIR_OK);

        weir_entry user[] = {E("user", "u")}, ip[] = {E("ip", "1.2.3.4")}, app[] = {E("app", "a")};
        weir_descriptor du = {user, 1, false, 0, NULL}, di = {ip, 1, false, 0, NULL},
                        da = {app, 1, false, 0, NULL};
        weir_descriptor_status st[2];
        /* user: 10 / 2 instances = 5 here */
        for (int i = 0; i < 5; i++) {
            assert_int_equal(decide(&w, "api", &du, 1, 0, 0, st), WEIR_CODE_OK);
            assert_true(st[0].failure_mode);
            assert_true(st[0].local);
            assert_true(st[0].outcomes[0].local);
            assert_int_equal(st[0].remaining, (uint64_t)(4 - i));
        }
        assert_int_equal(decide(&w, "api", &du, 1, 0, 0, st), WEIR_CODE_OVER_LIMIT);
        assert_true(st[0].local);
        /* ip: its own share, 30% of 10 */
        for (int i = 0; i < 3; i++)
            assert_int_equal(decide(&w, "api", &di, 1, 0, 0, st), WEIR_CODE_OK);
        assert_int_equal(decide(&w, "api", &di, 1, 0, 0, st), WEIR_CODE_OVER_LIMIT);
        /* deny stays deny, and is not local */
        assert_int_equal(decide(&w, "api", &da, 1, 0, 0, st), WEIR_CODE_OVER_LIMIT);
        assert_true(st[0].failure_mode);
        assert_false(st[0].local);
        /* atomic: a local denial charges nothing else locally */
        weir_entry user2[] = {E("user", "v")};
        weir_descriptor both[2] = {{user2, 1, false, 0, NULL}, {ip, 1, false, 0, NULL}};
        assert_int_equal(decide(&w, "api", both, 2, 0, 0, st), WEIR_CODE_OVER_LIMIT);
        assert_int_equal(st[0].code, WEIR_CODE_OK);
        assert_int_equal(st[0].remaining, 5); /* looked at, not charged */
        assert_int_equal(st[1].code, WEIR_CODE_OVER_LIMIT);
        weir_engine_reader_free(w.reader);
        weir_engine_free(w.engine);
        weir_store_free(fallback);
        w.reader = NULL;
        w.engine = NULL;
        close_world(&w);
    }
    world_deferred_opts.fail_ops = false;
    world w;
    weir_entry user[] = {E("user", "u")};
    weir_descriptor du = {user, 1, false, 0, NULL};
    weir_descriptor_status st[2];
    weir_engine *e;

    /* no fallback: local fails open */
    open_world(&w, rules);
    assert_int_equal(decide(&w, "api", &du, 1, 0, 0, st), WEIR_CODE_OK);
    assert_true(st[0].failure_mode);
    assert_false(st[0].local);
    close_world(&w);
    /* a fallback must complete inline */
    open_world(&w, rules);
    weir_engine_options bad = {
        .size = sizeof(bad), .store = w.store, .fallback = w.store, .instances = 1};
    weir_rules *kept = test_rules_parse(w.ctx, rules);
    assert_int_equal(weir_engine_new(w.ctx, &bad, kept, &e), WEIR_EINVAL);
    weir_rules_free(kept);
    close_world(&w);
    world_deferred = was;
    world_deferred_opts = saved;
}

/* Two engines, as two processes (each with its own secret), on one store
 * shared between them: stable keys make them count the same counters. */
static void two_instances_share_counters(void **unused)
{
    (void)unused;
    weir_deferred_options saved = world_deferred_opts;
    bool was = world_deferred;
    world_deferred = true;
    world_deferred_opts.shared_keys = true;
    world a;
    open_world(&a, two_limits);
    assert_int_equal(weir_store_caps(a.store), WEIR_STORE_SHARED_KEYS);
    weir_engine *e2;
    weir_engine_reader *r2;
    weir_engine_options o = {.size = sizeof(o), .store = a.store};
    assert_int_equal(weir_engine_new(a.ctx, &o, test_rules_parse(a.ctx, two_limits), &e2), WEIR_OK);
    assert_int_equal(weir_engine_reader_new(e2, &r2), WEIR_OK);
    weir_entry user[] = {E("user", "ivy")}, path[] = {E("path", "/pay")};
    weir_descriptor d[2] = {{user, 1, false, 0, NULL}, {path, 1, false, 0, NULL}};
    weir_descriptor_status st[2];
    assert_int_equal(decide(&a, "api", d, 2, 0, 0, st), WEIR_CODE_OK);
    world b = a;
    b.engine = e2;
    b.reader = r2;
    assert_int_equal(decide(&b, "api", d, 2, 0, 0, st), WEIR_CODE_OK);
    assert_int_equal(st[0].remaining, 8);
    assert_int_equal(st[1].remaining, 0);
    assert_int_equal(decide(&a, "api", d, 2, 0, 0, st), WEIR_CODE_OVER_LIMIT);
    weir_engine_reader_free(r2);
    weir_engine_free(e2);
    close_world(&a);
    world_deferred = was;
    world_deferred_opts = saved;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(denied_request_spends_nothing),
        cmocka_unit_test(local_failure_mode_decides_on_the_fallback),
        cmocka_unit_test(hits_at_both_levels),
        cmocka_unit_test(unmatched_unknown_and_errors),
        cmocka_unit_test(overrides_refused),
        cmocka_unit_test(override_without_a_rule),
        cmocka_unit_test(bad_descriptor_after_good_ones_charges_nothing),
        cmocka_unit_test(outcomes_of_every_limit),
        cmocka_unit_test(shadow_replaces_unlimited_override),
        cmocka_unit_test(overrides_kept_compiled_stay_exact),
        cmocka_unit_test(fixed_and_per_value_counters),
        cmocka_unit_test(quota_and_shadow_beside_enforcing),
        cmocka_unit_test(reload_keeps_unchanged_counters),
        cmocka_unit_test(bad_file_keeps_rules_in_force),
        cmocka_unit_test(count_rejected_charges_anyway),
        cmocka_unit_test(decide_inside_a_callback),
        cmocka_unit_test(refusals_name_their_reason),
    };
    const struct CMUnitTest deferred_only[] = {
        cmocka_unit_test(refused_batch_completes_at_once),
        cmocka_unit_test(failed_batches_follow_failure_mode),
        cmocka_unit_test(two_instances_share_counters),
    };
    int failed = cmocka_run_group_tests_name("memory store", tests, world_use_memory, NULL);
    world_deferred_opts.order = WEIR_DEFERRED_REVERSE;
    failed +=
        cmocka_run_group_tests_name("deferred store, reversed", tests, world_use_deferred, NULL);
    world_deferred_opts.order = WEIR_DEFERRED_INTERLEAVE;
    failed +=
        cmocka_run_group_tests_name("deferred store, interleaved", tests, world_use_deferred, NULL);
    world_deferred_opts.order = WEIR_DEFERRED_FIFO;
    world_deferred_opts.shared_keys = true;
    failed +=
        cmocka_run_group_tests_name("deferred store, stable keys", tests, world_use_deferred, NULL);
    world_deferred_opts.shared_keys = false;
    failed += cmocka_run_group_tests_name("deferred store, failures", deferred_only, NULL, NULL);
    return failed;
}
