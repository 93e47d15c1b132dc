/*
 * test_fleet_shed.c - a limit's `shed:` shares: the loader reads them
 * (priority names, percentages, what they cannot go with) and the engine
 * keeps each priority's share of the limit free: a fixed window and a
 * concurrency limit, a denial by a share told from the limit's own, and a
 * reload that changes only the shares keeping the counters. On the memory
 * store and on the deferred store.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "engine_world.h"
#include "rules_support.h"
#include "weir/weir.h"

static weir_ctx *ctx; /* the loading tests' */

/* ranks of the default priorities */
enum { CRITICAL = 1, NORMAL = 2, SHEDDABLE = 3, TEST = 4 };

#define LIMIT(algo, rpu, shed)           \
    "domain: api\n"                      \
    "descriptors:\n"                     \
    "  - key: user\n"                    \
    "    rate_limit:\n"                  \
    "      unit: hour\n"                 \
    "      requests_per_unit: " rpu "\n" \
    "      algorithm: " algo "\n"        \
    "      shed: " shed "\n"

static const weir_rule_limit *first_limit(const weir_rules *r)
{
    const weir_rule *rule = weir_rules_domain_rule(weir_rules_domain_at(r, 0), 0);
    return weir_rule_limit_at(rule, 0);
}

/* ------------------------------------------------------------ loading */

static void shares_are_read_by_rank(void **unused)
{
    (void)unused;
    assert_int_equal(weir_ctx_new(NULL, &ctx), WEIR_OK);
    weir_rules *r = test_rules_parse(
        ctx, LIMIT("token_bucket", "1000", "{normal: 10%, sheddable: 30%, test: 12.5%}"));
    const weir_rule_limit *l = first_limit(r);
    assert_int_equal(l->shed_bp[0], 0);
    assert_int_equal(l->shed_bp[1], 1000);
    assert_int_equal(l->shed_bp[2], 3000);
    assert_int_equal(l->shed_bp[3], 1250);
    weir_rules_free(r);
    r = test_rules_parse(ctx, LIMIT("fixed_window", "10",
                                    "{critical: 0%, test: 100%, "
                                    "sheddable: 0.05%}"));
    l = first_limit(r);
    assert_int_equal(l->shed_bp[0], 0);
    assert_int_equal(l->shed_bp[2], 5);
    assert_int_equal(l->shed_bp[3], 10000);
    weir_rules_free(r);
    weir_ctx_free(ctx);
}

static void bad_shares_are_refused(void **unused)
{
    (void)unused;
    test_rules_expect_error(LIMIT("fixed_window", "10", "{urgent: 10%}"),
                            "shed: unknown priority 'urgent' (the priorities are: critical, "
                            "normal, sheddable, test)");
    static const char *const bad[] = {"'30'", "130%", "100.01%", "3.333%", "abc",  "'-1%'",
                                      "'%'",  "5.%",  "1e2%",    "30 %",   "0x1%", "''"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char yaml[512];
        snprintf(yaml, sizeof(yaml), LIMIT("fixed_window", "10", "{sheddable: %s}"), bad[i]);
        test_rules_expect_error(yaml, "shed: 'sheddable' share");
    }
    test_rules_expect_error(LIMIT("fixed_window", "10", "{test: 1%, test: 2%}"),
                            "shed: duplicate priority 'test'");
    test_rules_expect_error(LIMIT("fixed_window", "10", "[sheddable]"), "shed");
    test_rules_expect_error(LIMIT("fixed_window", "10", "{sheddable: [1]}"), "shed");
    /* a sketch keeps no reserve; an unlimited limit has nothing to share */
    test_rules_expect_error("domain: api\n"
                            "descriptors:\n"
                            "  - key: user\n"
                            "    rate_limit: {unit: hour, requests_per_unit: 10, sketch: 1MiB,\n"
                            "                 shed: {sheddable: 10%}}\n",
                            "'shed' does not apply to a 'sketch' limit");
    test_rules_expect_error("domain: api\n"
                            "descriptors:\n"
                            "  - key: user\n"
                            "    rate_limit: {unlimited: true, shed: {sheddable: 10%}}\n",
                            "'shed' has no effect when unlimited");
}

static weir_status parse_with(const char *const *names, size_t n, const char *yaml,
                              weir_rules **out, weir_rules_error *err)
{
    weir_rules_options o = {.size = sizeof(o), .priorities = names, .n_priorities = n};
    size_t n_err = 0;
    return weir_rules_parse(ctx, "t.yaml", yaml, strlen(yaml), &o, out, err, 1, &n_err);
}

static void the_priorities_are_the_options(void **unused)
{
    (void)unused;
    static const char *const gold[] = {"gold", "silver", "bronze"};
    assert_int_equal(weir_ctx_new(NULL, &ctx), WEIR_OK);
    weir_rules *r = NULL;
    weir_rules_error err;
    assert_int_equal(parse_with(gold, 3, LIMIT("fixed_window", "10", "{bronze: 20%}"), &r, &err),
                     WEIR_OK);
    assert_int_equal(first_limit(r)->shed_bp[2], 2000);
    assert_int_equal(first_limit(r)->shed_bp[1], 0);
    weir_rules_free(r);
    r = NULL;
    assert_int_equal(parse_with(gold, 3, LIMIT("fixed_window", "10", "{sheddable: 20%}"), &r, &err),
                     WEIR_EPARSE);
    assert_non_null(strstr(err.message, "the priorities are: gold, silver, bronze"));
    assert_int_equal(err.line, 8);
    /* lists that are not one */
    static const char *const twice[] = {"a", "a"}, *const upper[] = {"Gold"}, *const empty[] = {""},
                             *const none[] = {NULL};
    static const char *const nine[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i"};
    const char *yaml = "domain: api\n";
    assert_int_equal(parse_with(twice, 2, yaml, &r, &err), WEIR_EINVAL);
    assert_int_equal(parse_with(upper, 1, yaml, &r, &err), WEIR_EINVAL);
    assert_int_equal(parse_with(empty, 1, yaml, &r, &err), WEIR_EINVAL);
    assert_int_equal(parse_with(none, 1, yaml, &r, &err), WEIR_EINVAL);
    assert_int_equal(parse_with(nine, 9, yaml, &r, &err), WEIR_EINVAL);
    assert_int_equal(parse_with(NULL, 2, yaml, &r, &err), WEIR_EINVAL);
    assert_int_equal(parse_with(gold, 0, yaml, &r, &err), WEIR_EINVAL);
    weir_ctx_free(ctx);
}

/* ------------------------------------------------------------ deciding */

typedef struct verdict {
    weir_code overall;
    bool shed;         /* the descriptor's */
    bool outcome_shed; /* its first limit's */
    uint64_t lease;
    size_t n_outcomes;
    bool denied[2], shed_by[2]; /* its first two limits' */
} verdict;

static void on_verdict(void *arg, weir_code overall, weir_descriptor_status *st, size_t n)
{
    verdict *v = arg;
    assert_int_equal(n, 1);
    assert_true(st[0].n_outcomes >= 1 && st[0].n_outcomes <= 2);
    v->overall = overall;
    v->shed = st[0].shed;
    v->outcome_shed = st[0].outcomes[0].shed;
    v->lease = st[0].outcomes[0].lease;
    v->n_outcomes = st[0].n_outcomes;
    for (size_t i = 0; i < st[0].n_outcomes; i++) {
        v->denied[i] = st[0].outcomes[i].denied;
        v->shed_by[i] = st[0].outcomes[i].shed;
        /* a share's denial is a denial */
        assert_true(!v->shed_by[i] || v->denied[i]);
    }
    assert_true(!st[0].shed || st[0].code == WEIR_CODE_OVER_LIMIT);
}

/* One request of user alice at priority rank @prio. */
static verdict ask(world *w, unsigned prio, int64_t now)
{
    weir_entry e[] = {E("user", "alice")};
    weir_descriptor d = {e, 1, false, 0, NULL};
    weir_request req = {"api", 3, &d, 1, 1, prio};
    weir_descriptor_status st[1];
    verdict v;
    memset(&v, 0, sizeof(v));
    assert_int_equal(weir_engine_decide(w->reader, &req, now, st, on_verdict, &v), WEIR_OK);
    settle(w);
    assert_int_not_equal(v.overall, 0);
    return v;
}

/* Requests of @prio admitted in a row (at most @cap), and the verdict of
 * the first one denied. */
static int admitted(world *w, unsigned prio, int cap, verdict *denied)
{
    int n = 0;
    for (; n < cap; n++) {
        verdict v = ask(w, prio, 1000);
        if (v.overall != WEIR_CODE_OK) {
            *denied = v;
            return n;
        }
        assert_false(v.shed || v.outcome_shed);
    }
    return n;
}

static void a_window_keeps_its_share(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, LIMIT("fixed_window", "100", "{sheddable: 30%}"));
    verdict v;
    assert_int_equal(admitted(&w, SHEDDABLE, 200, &v), 70);
    assert_int_equal(v.overall, WEIR_CODE_OVER_LIMIT);
    assert_true(v.shed && v.outcome_shed);
    /* no share for normal, critical or a request of no priority */
    assert_int_equal(admitted(&w, NORMAL, 10, &v), 10);
    assert_int_equal(admitted(&w, 0, 10, &v), 10);
    assert_int_equal(admitted(&w, CRITICAL, 200, &v), 10);
    assert_int_equal(v.overall, WEIR_CODE_OVER_LIMIT);
    assert_false(v.shed || v.outcome_shed);
    /* the limit itself denies sheddable now */
    v = ask(&w, SHEDDABLE, 1000);
    assert_int_equal(v.overall, WEIR_CODE_OVER_LIMIT);
    assert_false(v.shed || v.outcome_shed);
    close_world(&w);
}

static void a_changed_share_keeps_the_counter(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, LIMIT("fixed_window", "100", "{sheddable: 30%}"));
    verdict v;
    assert_int_equal(admitted(&w, SHEDDABLE, 200, &v), 70);
    weir_rules *r = test_rules_parse(w.ctx, LIMIT("fixed_window", "100", "{sheddable: 10%}"));
    assert_int_equal(weir_engine_reload(w.engine, r), WEIR_OK);
    assert_int_equal(admitted(&w, SHEDDABLE, 200, &v), 20);
    assert_true(v.shed);
    /* a share of 100%: the priority is never admitted */
    r = test_rules_parse(w.ctx, LIMIT("fixed_window", "100", "{test: 100%}"));
    assert_int_equal(weir_engine_reload(w.engine, r), WEIR_OK);
    assert_int_equal(admitted(&w, TEST, 200, &v), 0);
    assert_true(v.shed);
    assert_int_equal(admitted(&w, CRITICAL, 200, &v), 10);
    close_world(&w);
}

static void a_concurrency_limit_keeps_slots(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, LIMIT("concurrency", "10", "{sheddable: 50%}"));
    verdict v;
    assert_int_equal(admitted(&w, SHEDDABLE, 100, &v), 5);
    assert_true(v.shed && v.outcome_shed);
    assert_int_equal(v.lease, 0); /* a shed acquire holds nothing */
    assert_int_equal(admitted(&w, CRITICAL, 100, &v), 5);
    assert_int_equal(v.overall, WEIR_CODE_OVER_LIMIT);
    assert_false(v.shed);
    v = ask(&w, SHEDDABLE, 1000);
    assert_int_equal(v.overall, WEIR_CODE_OVER_LIMIT);
    assert_false(v.shed);
    close_world(&w);
}

/* A descriptor denied by a share and by another limit itself is over its
 * limit, not shed: the share's outcome says shed, the limit's does not. */
static void a_limit_itself_outweighs_a_share(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, "domain: api\n"
                   "descriptors:\n"
                   "  - key: user\n"
                   "    rate_limits:\n"
                   "      - {unit: hour, requests_per_unit: 20, shed: {sheddable: 50%}}\n"
                   "      - {unit: hour, requests_per_unit: 10}\n");
    verdict v;
    assert_int_equal(admitted(&w, SHEDDABLE, 100, &v), 10);
    assert_int_equal(v.overall, WEIR_CODE_OVER_LIMIT);
    assert_false(v.shed);
    assert_int_equal(v.n_outcomes, 2);
    assert_true(v.denied[0] && v.shed_by[0]);
    assert_true(v.denied[1] && !v.shed_by[1]);
    close_world(&w);
}

int main(void)
{
    const struct CMUnitTest loading[] = {
        cmocka_unit_test(shares_are_read_by_rank),
        cmocka_unit_test(bad_shares_are_refused),
        cmocka_unit_test(the_priorities_are_the_options),
    };
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_window_keeps_its_share),
        cmocka_unit_test(a_changed_share_keeps_the_counter),
        cmocka_unit_test(a_concurrency_limit_keeps_slots),
        cmocka_unit_test(a_limit_itself_outweighs_a_share),
    };
    int failed = cmocka_run_group_tests_name("loading", loading, NULL, NULL);
    failed += cmocka_run_group_tests_name("memory store", tests, world_use_memory, NULL);
    world_deferred_opts.order = WEIR_DEFERRED_REVERSE;
    failed +=
        cmocka_run_group_tests_name("deferred store, reversed", tests, world_use_deferred, NULL);
    return failed;
}
