/*
 * test_stat_key.c - upstream's stat key of a decided descriptor
 * (daemon/stat_key.c): levels from the rule, dots kept in their level,
 * detailed_metric, value_to_metric on exact, default and pattern levels,
 * share_threshold, a request's own limit, the overflow of a key too long;
 * and the sanitiser, against what Go's regexp makes of upstream's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "rules_support.h"
#include "stat_key.h"

static const char *rules_yaml = "domain: d\n"
                                "descriptors:\n"
                                "  - key: ip\n"
                                "    value: 10.0.0.1\n"
                                "    descriptors:\n"
                                "      - key: user\n"
                                "        rate_limit: {unit: hour, requests_per_unit: 1}\n"
                                "  - key: client\n"
                                "    detailed_metric: true\n"
                                "    rate_limit: {unit: hour, requests_per_unit: 1}\n"
                                "  - key: tenant\n"
                                "    value_to_metric: true\n"
                                "    descriptors:\n"
                                "      - key: path\n"
                                "        value: /api/*\n"
                                "        value_to_metric: true\n"
                                "        rate_limit: {unit: hour, requests_per_unit: 1}\n"
                                "      - key: exact\n"
                                "        value: x\n"
                                "        value_to_metric: true\n"
                                "        rate_limit: {unit: hour, requests_per_unit: 1}\n"
                                "  - key: plain\n"
                                "    value: p*\n"
                                "    rate_limit: {unit: hour, requests_per_unit: 1}\n"
                                "  - key: shared\n"
                                "    value: s*\n"
                                "    share_threshold: true\n"
                                "    value_to_metric: true\n"
                                "    descriptors:\n"
                                "      - key: who\n"
                                "        detailed_metric: true\n"
                                "        rate_limit: {unit: hour, requests_per_unit: 1}\n";

typedef struct fixture {
    weir_ctx *ctx;
    weir_rules *rules;
} fixture;

static int setup(void **state)
{
    static fixture f;
    assert_int_equal(weir_ctx_new(NULL, &f.ctx), WEIR_OK);
    f.rules = test_rules_parse(f.ctx, rules_yaml);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    weir_rules_free(f->rules);
    weir_ctx_free(f->ctx);
    return 0;
}

/* The first limit found by walking @keys/@values (NULL value: the
 * default) down the tree of domain "d". */
static const weir_rule_limit *limit_at(fixture *f, const char *const *path, size_t n)
{
    const weir_rules_domain *d = weir_rules_find_domain(f->rules, "d");
    assert_non_null(d);
    const weir_rule *r = NULL;
    for (size_t level = 0; level < n; level++) {
        size_t count = level ? weir_rule_child_count(r) : weir_rules_domain_rule_count(d);
        const weir_rule *next = NULL;
        for (size_t i = 0; i < count && !next; i++) {
            const weir_rule *c = level ? weir_rule_child(r, i) : weir_rules_domain_rule(d, i);
            if (strcmp(weir_rule_key(c), path[level]) == 0)
                next = c;
        }
        assert_non_null(next);
        r = next;
    }
    const weir_rule_limit *l = weir_rule_limit_at(r, 0);
    assert_non_null(l);
    assert_int_equal(l->n_levels, n);
    return l;
}

/* The key's text with its NULs as '|', for comparing. */
static const char *shown(const stat_key *k)
{
    static char out[STAT_KEY_MAX_BYTES + 1];
    for (size_t i = 0; i < k->len; i++)
        out[i] = k->text[i] ? k->text[i] : '|';
    out[k->len] = '\0';
    return out;
}

/* The key of a request of the entries @kv (key, value, ...; @n pairs). */
static const char *key_of(const weir_rule_limit *l, const char *const *kv, size_t n,
                          const weir_limit_override *own, bool *from_request)
{
    weir_entry e[8];
    for (size_t i = 0; i < n; i++)
        e[i] = (weir_entry){kv[2 * i], strlen(kv[2 * i]), kv[2 * i + 1], strlen(kv[2 * i + 1])};
    weir_descriptor d = {e, n, false, 0, own};
    static stat_key k;
    stat_key_build(&k, l, &d);
    if (from_request)
        *from_request = k.from_request;
    return shown(&k);
}

static void levels_from_the_rule(void **state)
{
    fixture *f = *state;
    const weir_rule_limit *l = limit_at(f, (const char *[]){"ip", "user"}, 2);
    bool req;
    assert_string_equal(key_of(l, (const char *[]){"ip", "10.0.0.1", "user", "bob"}, 2, NULL, &req),
                        "d|ip_10.0.0.1|user|");
    assert_false(req);
    /* a pattern without value_to_metric keeps its pattern */
    l = limit_at(f, (const char *[]){"plain"}, 1);
    assert_string_equal(key_of(l, (const char *[]){"plain", "pq"}, 1, NULL, &req), "d|plain_p*|");
    assert_false(req);
    /* a request's own limit: its entries, `key` alone for an empty value */
    weir_limit_override own = {5, WEIR_UNIT_MINUTE};
    assert_string_equal(key_of(l, (const char *[]){"plain", "pq", "x", ""}, 2, &own, &req),
                        "d|plain_pq|x|");
    assert_true(req);
}

static void detailed_and_value_to_metric(void **state)
{
    fixture *f = *state;
    bool req;
    const weir_rule_limit *l = limit_at(f, (const char *[]){"client"}, 1);
    assert_string_equal(key_of(l, (const char *[]){"client", "a.b"}, 1, NULL, &req),
                        "d|client_a.b|");
    assert_true(req);
    /* upstream spells an empty value `key_` under detailed_metric */
    assert_string_equal(key_of(l, (const char *[]){"client", ""}, 1, NULL, NULL), "d|client_|");
    /* value_to_metric: a default and a pattern take the request's value */
    l = limit_at(f, (const char *[]){"tenant", "path"}, 2);
    assert_string_equal(
        key_of(l, (const char *[]){"tenant", "acme", "path", "/api/v1.2"}, 2, NULL, &req),
        "d|tenant_acme|path_/api/v1.2|");
    assert_true(req);
    /* ... an exact value is the value already */
    l = limit_at(f, (const char *[]){"tenant", "exact"}, 2);
    assert_string_equal(key_of(l, (const char *[]){"tenant", "t", "exact", "x"}, 2, NULL, NULL),
                        "d|tenant_t|exact_x|");
    /* share_threshold keeps its pattern, under detailed_metric too */
    l = limit_at(f, (const char *[]){"shared", "who"}, 2);
    assert_string_equal(key_of(l, (const char *[]){"shared", "s1", "who", "me"}, 2, NULL, &req),
                        "d|shared_s*|who_me|");
    assert_true(req);
}

static void too_long_is_overflow(void **state)
{
    fixture *f = *state;
    const weir_rule_limit *l = limit_at(f, (const char *[]){"client"}, 1);
    static char value[STAT_KEY_MAX_BYTES];
    memset(value, 'v', sizeof(value) - 1);
    value[sizeof(value) - 1] = '\0';
    bool req = true;
    assert_string_equal(key_of(l, (const char *[]){"client", value}, 1, NULL, &req),
                        "d|_overflow|");
    assert_false(req);
    /* the longest that fits: "d\0client_" + value + "\0", every byte */
    value[STAT_KEY_MAX_BYTES - 10] = '\0';
    const char *k = key_of(l, (const char *[]){"client", value}, 1, NULL, NULL);
    assert_int_equal(strlen(k), STAT_KEY_MAX_BYTES);
    assert_memory_equal(k, "d|client_vvv", 12);
}

static void sanitised_as_upstream(void **unused)
{
    (void)unused;
    /* the results of upstream's SanitizeStatName, as Go computes them */
    static const struct {
        const char *in, *out;
    } rows[] = {
        {"ip_10.0.0.1", "ip_10_0_0_1"},
        {"v1.2", "v1.2"},
        {"a:b|c", "a_b_c"},
        {"1.2.3", "1.2.3"},
        {"1234.5.6.7", "1234_5_6_7"},           /* the match starts at "234" */
        {"1.2.3.4567", "1_2_3_4567"},           /* the last run: 3 digits at most */
        {"1.2.3.4.5.6.7.8", "1_2_3_4.5_6_7_8"}, /* two, left to right */
        {"x1.22.333.4444.5", "x1_22_333_4444.5"},
        {"1..2.3.4", "1..2.3.4"}, /* "2.3.4" is one group short */
        {"tab\there", "tab_here"},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        char buf[64];
        snprintf(buf, sizeof(buf), "%s", rows[i].in);
        stat_sanitize(buf, strlen(buf));
        assert_string_equal(buf, rows[i].out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(levels_from_the_rule),
        cmocka_unit_test(detailed_and_value_to_metric),
        cmocka_unit_test(too_long_is_overflow),
        cmocka_unit_test(sanitised_as_upstream),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
