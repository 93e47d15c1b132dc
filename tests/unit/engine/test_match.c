/*
 * test_match.c - descriptor matching: a table of requests against rule
 * sets covering every rule of ENVOY_COMPAT.md's "Matching" (precedence,
 * first pattern in file order, `*` anywhere, depth, no backtracking,
 * whitelists, unknown domains, upstream's README examples), the glob
 * matcher, argument checks, counter keys (sharing, collisions, stability
 * across reloads), out-of-memory while building, a property test against a
 * slow reference walk of the rule tree, and a million lookups that must
 * allocate nothing.
 *
 * Everything runs on a counting allocator; each test gives back all it
 * took.
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "engine/match.h"
#include "fake.h"
#include "rules_support.h"
#include "weir/rules.h"
#include "weir/weir.h"

static counting_alloc ca;
static weir_ctx *ctx;

static int setup(void **state)
{
    (void)state;
    return counting_ctx_new(&ca, &ctx) == WEIR_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    weir_ctx_free(ctx);
    return ca.live_blocks == 0 ? 0 : -1;
}

static weir__match_index *index_of(const weir_rules *r)
{
    weir__match_index *idx = NULL;
    assert_int_equal(weir__match_index_new(ctx, r, &idx), WEIR_OK);
    assert_non_null(idx);
    return idx;
}

/* ------------------------------------------------------------ rule sets */

#define LIM(n) "    rate_limit: {unit: second, requests_per_unit: " #n "}\n"
#define LIM2(n) "        rate_limit: {unit: second, requests_per_unit: " #n "}\n"
#define LIM3(n) "            rate_limit: {unit: second, requests_per_unit: " #n "}\n"

enum { SET_PREC, SET_DEEP, SET_MONGO, SET_MESSAGING, SET_EDGE, SET_RL, N_SETS };

static const char *const set_yaml[N_SETS] = {
    [SET_PREC] = "domain: prec\n"
                 "descriptors:\n"
                 "  - {key: k, value: v1}\n"                            /* 0 */
                 "  - key: k\n"                                         /* 1 */
                 "    value: 'v*'\n" LIM(2) "  - key: k\n"              /* 2: the default */
    LIM(3) "  - key: k\n"                                               /* 3: a later pattern */
           "    value: '*1'\n" LIM(4) "  - {key: w, value: 'a*'}\n"     /* 4 */
                                      "  - {key: w, value: 'ab*'}\n"    /* 5 */
                                      "  - {key: w, value: '*'}\n"      /* 6 */
                                      "  - {key: g, value: 'a*b*c'}\n"  /* 7 */
                                      "  - {key: g, value: '*x**y*'}\n" /* 8 */
                                      "  - {key: s, value: '*.example.com'}\n" /* 9 */
                                      "  - {key: m, value: 'foo*bar'}\n"       /* 10 */
                                      "  - {key: e, value: 'pre*'}\n"          /* 11 */
                                      "  - {key: z}\n"                         /* 12 */
                                      "  - {key: a_b, value: c}\n"             /* 13 */
                                      "  - {key: a, value: b_c}\n"             /* 14 */
                                      "  - {key: a.b, value: c}\n"             /* 15 */
                                      "  - {key: a, value: b.c}\n",            /* 16 */
    [SET_DEEP] = "domain: deep\n"
                 "descriptors:\n"
                 "  - key: a\n" /* 0 */
                 "    value: x\n"
                 "    descriptors:\n"
                 "      - key: b\n"                          /* 0.0 */
                 "        value: y\n" LIM2(1) "  - key: a\n" /* 1: default */
                                              "    descriptors:\n"
                                              "      - key: b\n" /* 1.0 */
    LIM2(2) "      - key: c\n"                                   /* 1.1: whitelist */
            "  - key: p\n"                                       /* 2: limits and children */
    LIM(3) "    descriptors:\n"
           "      - key: q\n" /* 2.0 */
           "        value: 'r*'\n"
           "        share_threshold: true\n"
           "        descriptors:\n"
           "          - key: t\n" /* 2.0.0 */
    LIM3(4) "  - {key: white, value: me}\n",
    [SET_MONGO] = "domain: mongo_cps\n"
                  "descriptors:\n"
                  "  - key: database\n"
                  "    value: users\n"
                  "    rate_limit:\n"
                  "      unit: second\n"
                  "      requests_per_unit: 500\n"
                  "  - key: database\n"
                  "    value: default\n"
                  "    rate_limit:\n"
                  "      unit: second\n"
                  "      requests_per_unit: 500\n",
    [SET_MESSAGING] = "domain: messaging\n"
                      "descriptors:\n"
                      "  - key: message_type\n"
                      "    value: marketing\n"
                      "    descriptors:\n"
                      "      - key: to_number\n"
                      "        rate_limit:\n"
                      "          unit: day\n"
                      "          requests_per_unit: 5\n"
                      "  - key: to_number\n"
                      "    rate_limit:\n"
                      "      unit: day\n"
                      "      requests_per_unit: 100\n",
    [SET_EDGE] = "domain: edge_proxy_per_ip\n"
                 "descriptors:\n"
                 "  - key: remote_address\n"
                 "    rate_limit: {name: per_ip, unit: second, requests_per_unit: 10}\n"
                 "  - key: remote_address\n"
                 "    value: 50.0.0.5\n"
                 "    rate_limit: {unlimited: true}\n"
                 "  - key: path\n"
                 "    value: /foo/*\n"
                 "    share_threshold: true\n"
                 "    rate_limit: {unit: minute, requests_per_unit: 20, name: foo_paths}\n"
                 "  - key: path\n"
                 "    value: /bar/*\n"
                 "    rate_limit: {unit: minute, requests_per_unit: 20}\n",
    [SET_RL] = "domain: rl\n"
               "descriptors:\n"
               "  - key: source_cluster\n"
               "    value: proxy\n"
               "    descriptors:\n"
               "      - key: destination_cluster\n"
               "        value: bar\n"
               "        rate_limit: {unit: minute, requests_per_unit: 1}\n"
               "      - key: destination_cluster\n"
               "        value: mock\n"
               "        rate_limit: {unit: minute, requests_per_unit: 2}\n"
               "      - key: destination_cluster\n"
               "        rate_limit: {unit: minute, requests_per_unit: 3}\n",
};

static weir_rules *set_rules[N_SETS];
static weir__match_index *set_idx[N_SETS];

static void sets_load(void)
{
    for (int i = 0; i < N_SETS; i++) {
        set_rules[i] = test_rules_parse(ctx, set_yaml[i]);
        set_idx[i] = index_of(set_rules[i]);
    }
}

static void sets_free(void)
{
    for (int i = 0; i < N_SETS; i++) {
        weir__match_index_free(set_idx[i]);
        weir_rules_free(set_rules[i]);
        set_idx[i] = NULL;
        set_rules[i] = NULL;
    }
}

/* The node at a path of child indices such as "2.0.0". */
static const weir_rule *node_at(const weir_rules *r, const char *path, size_t *depth)
{
    const weir_rules_domain *d = weir_rules_domain_at(r, 0);
    const weir_rule *n = NULL;
    *depth = 0;
    for (const char *p = path; *p;) {
        char *end;
        size_t i = (size_t)strtoul(p, &end, 10);
        n = n ? weir_rule_child(n, i) : weir_rules_domain_rule(d, i);
        assert_non_null(n);
        (*depth)++;
        p = *end == '.' ? end + 1 : end;
    }
    return n;
}

/* ------------------------------------------------------------ the table */

typedef struct kv {
    const char *k, *v;
} kv;

typedef struct row {
    int set;
    const char *domain;
    kv e[5]; /* up to the first NULL key */
    bool found;
    const char *path;  /* the matched node; NULL: no match */
    const char *kinds; /* per level: E exact, W pattern, D default */
    const char *vik;   /* per level: 1 when the request value counts apart */
} row;

#define NOPE true, NULL, NULL, NULL
#define HIT(path, kinds, vik) true, path, kinds, vik

static const row rows[] = {
    /* exact beats pattern beats default; first pattern in file order */
    {SET_PREC, "prec", {{"k", "v1"}}, HIT("0", "E", "0")},
    {SET_PREC, "prec", {{"k", "v2"}}, HIT("1", "W", "1")},
    {SET_PREC, "prec", {{"k", "v"}}, HIT("1", "W", "1")},
    {SET_PREC, "prec", {{"k", "v11"}}, HIT("1", "W", "1")}, /* v* and *1: the first */
    {SET_PREC, "prec", {{"k", "x1"}}, HIT("3", "W", "1")},
    {SET_PREC, "prec", {{"k", "zz"}}, HIT("2", "D", "1")},
    {SET_PREC, "prec", {{"k", ""}}, HIT("2", "D", "1")},
    {SET_PREC, "prec", {{"k", "V1"}}, HIT("3", "W", "1")}, /* case matters: not v1, v* */
    {SET_PREC, "prec", {{"k", "V2"}}, HIT("2", "D", "1")},
    {SET_PREC, "prec", {{"K", "v1"}}, NOPE},
    {SET_PREC, "prec", {{"w", "abc"}}, HIT("4", "W", "1")}, /* a* before ab* */
    {SET_PREC, "prec", {{"w", "a"}}, HIT("4", "W", "1")},
    {SET_PREC, "prec", {{"w", "b"}}, HIT("6", "W", "1")},
    {SET_PREC, "prec", {{"w", ""}}, HIT("6", "W", "1")}, /* '*' matches empty */
    /* several stars */
    {SET_PREC, "prec", {{"g", "abc"}}, HIT("7", "W", "1")},
    {SET_PREC, "prec", {{"g", "aXbYc"}}, HIT("7", "W", "1")},
    {SET_PREC, "prec", {{"g", "abbcc"}}, HIT("7", "W", "1")},
    {SET_PREC, "prec", {{"g", "axyc"}}, HIT("8", "W", "1")},
    {SET_PREC, "prec", {{"g", "xy"}}, HIT("8", "W", "1")},
    {SET_PREC, "prec", {{"g", "ac"}}, NOPE},
    {SET_PREC, "prec", {{"g", "yx"}}, NOPE},
    {SET_PREC, "prec", {{"g", ""}}, NOPE},
    /* star at the start, middle, end */
    {SET_PREC, "prec", {{"s", "www.example.com"}}, HIT("9", "W", "1")},
    {SET_PREC, "prec", {{"s", ".example.com"}}, HIT("9", "W", "1")},
    {SET_PREC, "prec", {{"s", "example.com"}}, NOPE},
    {SET_PREC, "prec", {{"s", "a.example.com.evil"}}, NOPE},
    {SET_PREC, "prec", {{"m", "foobar"}}, HIT("10", "W", "1")},
    {SET_PREC, "prec", {{"m", "foo/x/bar"}}, HIT("10", "W", "1")},
    {SET_PREC, "prec", {{"m", "foobarbar"}}, HIT("10", "W", "1")},
    {SET_PREC, "prec", {{"m", "fooba"}}, NOPE},
    {SET_PREC, "prec", {{"m", "foobar1"}}, NOPE},
    {SET_PREC, "prec", {{"m", "fobar"}}, NOPE},
    {SET_PREC, "prec", {{"e", "pre"}}, HIT("11", "W", "1")},
    {SET_PREC, "prec", {{"e", "prefix"}}, HIT("11", "W", "1")},
    {SET_PREC, "prec", {{"e", "pr"}}, NOPE},
    {SET_PREC, "prec", {{"e", "*"}}, NOPE},
    {SET_PREC, "prec", {{"z", "anything"}}, HIT("12", "D", "1")},
    {SET_PREC, "prec", {{"z", "*"}}, HIT("12", "D", "1")},
    {SET_PREC, "prec", {{"q", "v1"}}, NOPE},
    /* '_' and '.' are ordinary bytes */
    {SET_PREC, "prec", {{"a_b", "c"}}, HIT("13", "E", "0")},
    {SET_PREC, "prec", {{"a", "b_c"}}, HIT("14", "E", "0")},
    {SET_PREC, "prec", {{"a.b", "c"}}, HIT("15", "E", "0")},
    {SET_PREC, "prec", {{"a", "b.c"}}, HIT("16", "E", "0")},
    {SET_PREC, "prec", {{"a", "b"}}, NOPE},
    {SET_PREC, "prec", {{"a_b_c", ""}}, NOPE},
    /* depth must agree; no backtracking */
    {SET_DEEP, "deep", {{"a", "x"}, {"b", "y"}}, HIT("0.0", "EE", "00")},
    {SET_DEEP, "deep", {{"a", "x"}, {"b", "z"}}, NOPE},   /* a's default would match */
    {SET_DEEP, "deep", {{"a", "x"}, {"c", "z"}}, NOPE},   /* ditto, whitelist */
    {SET_DEEP, "deep", {{"a", "x"}}, HIT("0", "E", "0")}, /* intermediate: no limits */
    {SET_DEEP, "deep", {{"a", "w"}, {"b", "z"}}, HIT("1.0", "DD", "11")},
    {SET_DEEP, "deep", {{"a", "w"}, {"c", "z"}}, HIT("1.1", "DD", "11")},
    {SET_DEEP, "deep", {{"a", "x"}, {"b", "y"}, {"c", "d"}}, NOPE}, /* deeper than the rules */
    {SET_DEEP, "deep", {{"a", "w"}, {"b", "z"}, {"b", "z"}}, NOPE},
    {SET_DEEP, "deep", {{"b", "y"}}, NOPE},
    {SET_DEEP, "deep", {{"b", "y"}, {"a", "x"}}, NOPE}, /* order matters */
    {SET_DEEP, "deep", {{"p", "1"}}, HIT("2", "D", "1")},
    {SET_DEEP, "deep", {{"p", "1"}, {"q", "rr"}}, HIT("2.0", "DW", "10")},
    {SET_DEEP, "deep", {{"p", "1"}, {"q", "rr"}, {"t", "1"}}, HIT("2.0.0", "DWD", "101")},
    {SET_DEEP, "deep", {{"p", "1"}, {"q", "s"}, {"t", "1"}}, NOPE},
    {SET_DEEP, "deep", {{"p", "1"}, {"q", "r"}, {"t", "1"}, {"u", "1"}}, NOPE},
    {SET_DEEP, "deep", {{"white", "me"}}, HIT("3", "E", "0")},
    {SET_DEEP, "deep", {{"white", "you"}}, NOPE},
    /* unknown and length-mismatched domains */
    {SET_DEEP, "nope", {{"a", "x"}}, false, NULL, NULL, NULL},
    {SET_DEEP, "", {{"a", "x"}}, false, NULL, NULL, NULL},
    {SET_DEEP, "Deep", {{"a", "x"}}, false, NULL, NULL, NULL},
    {SET_DEEP, "deep ", {{"a", "x"}}, false, NULL, NULL, NULL},
    {SET_DEEP, "prec", {{"k", "v1"}}, false, NULL, NULL, NULL}, /* another index's */
    /* upstream README: mongo_cps */
    {SET_MONGO, "mongo_cps", {{"database", "users"}}, HIT("0", "E", "0")},
    {SET_MONGO, "mongo_cps", {{"database", "default"}}, HIT("1", "E", "0")},
    {SET_MONGO, "mongo_cps", {{"database", "orders"}}, NOPE}, /* "default" is a value */
    {SET_MONGO, "mongo_cps", {{"database", "users"}, {"x", "y"}}, NOPE},
    /* upstream README: messaging */
    {SET_MESSAGING,
     "messaging",
     {{"message_type", "marketing"}, {"to_number", "2061234567"}},
     HIT("0.0", "ED", "01")},
    {SET_MESSAGING, "messaging", {{"to_number", "2061234567"}}, HIT("1", "D", "1")},
    {SET_MESSAGING, "messaging", {{"message_type", "marketing"}}, HIT("0", "E", "0")},
    {SET_MESSAGING, "messaging", {{"message_type", "transactional"}, {"to_number", "1"}}, NOPE},
    {SET_MESSAGING, "messaging", {{"to_number", "1"}, {"message_type", "marketing"}}, NOPE},
    /* upstream README: per-IP limit, a whitelisted IP, shared path pattern */
    {SET_EDGE, "edge_proxy_per_ip", {{"remote_address", "10.0.0.1"}}, HIT("0", "D", "1")},
    {SET_EDGE, "edge_proxy_per_ip", {{"remote_address", "50.0.0.5"}}, HIT("1", "E", "0")},
    {SET_EDGE, "edge_proxy_per_ip", {{"remote_address", "50.0.0.50"}}, HIT("0", "D", "1")},
    {SET_EDGE, "edge_proxy_per_ip", {{"path", "/foo/a"}}, HIT("2", "W", "0")},
    {SET_EDGE, "edge_proxy_per_ip", {{"path", "/bar/a"}}, HIT("3", "W", "1")},
    {SET_EDGE, "edge_proxy_per_ip", {{"path", "/baz"}}, NOPE},
    /* upstream README: source/destination cluster */
    {SET_RL,
     "rl",
     {{"source_cluster", "proxy"}, {"destination_cluster", "bar"}},
     HIT("0.0", "EE", "00")},
    {SET_RL,
     "rl",
     {{"source_cluster", "proxy"}, {"destination_cluster", "mock"}},
     HIT("0.1", "EE", "00")},
    {SET_RL,
     "rl",
     {{"source_cluster", "proxy"}, {"destination_cluster", "fake"}},
     HIT("0.2", "ED", "01")},
    {SET_RL, "rl", {{"source_cluster", "other"}, {"destination_cluster", "bar"}}, NOPE},
    {SET_RL, "rl", {{"destination_cluster", "bar"}}, NOPE},
};

static size_t row_entries(const row *r, weir__entry *e)
{
    size_t n = 0;
    while (n < 5 && r->e[n].k) {
        e[n] = (weir__entry){r->e[n].k, strlen(r->e[n].k), r->e[n].v, strlen(r->e[n].v)};
        n++;
    }
    return n;
}

static void table(void **unused)
{
    (void)unused;
    sets_load();
    size_t n_rows = sizeof(rows) / sizeof(rows[0]);
    assert_true(n_rows >= 40);
    for (size_t i = 0; i < n_rows; i++) {
        const row *r = &rows[i];
        weir__entry e[5];
        size_t n = row_entries(r, e);
        weir__match_result m;
        memset(&m, 0xa5, sizeof(m));
        weir_status st = weir__match(set_idx[r->set], r->domain, strlen(r->domain), e, n, &m);
        assert_int_equal(st, WEIR_OK);
        bool domain_found = r->found || r->path;
        if (m.domain_found != domain_found || (m.rule != NULL) != (r->path != NULL))
            printf("row %zu: domain %d rule %p\n", i, m.domain_found, (const void *)m.rule);
        assert_int_equal(m.domain_found, domain_found);
        if (!domain_found) {
            assert_null(m.domain);
            assert_null(m.rule);
            assert_int_equal(m.depth, 0);
            continue;
        }
        assert_ptr_equal(m.domain, weir_rules_domain_at(set_rules[r->set], 0));
        if (!r->path) {
            assert_null(m.rule);
            assert_true(m.depth < n);
            char key[256];
            assert_int_equal(weir__counter_key(&m, e, 0, key, sizeof(key)), 0);
            continue;
        }
        size_t depth;
        const weir_rule *want = node_at(set_rules[r->set], r->path, &depth);
        if (m.rule != want)
            printf("row %zu: another node matched\n", i);
        assert_int_equal(depth, n);
        assert_int_equal(m.depth, n);
        assert_ptr_equal(m.rule, want);
        for (size_t l = 0; l < n; l++) {
            const weir__match_level *lv = &m.levels[l];
            weir__match_kind k = r->kinds[l] == 'E'   ? WEIR__MATCH_EXACT
                                 : r->kinds[l] == 'W' ? WEIR__MATCH_WILDCARD
                                                      : WEIR__MATCH_DEFAULT;
            if (lv->kind != k || lv->value_in_key != (r->vik[l] == '1'))
                printf("row %zu level %zu: kind %d vik %d\n", i, l, lv->kind, lv->value_in_key);
            assert_int_equal(lv->kind, k);
            assert_int_equal(lv->value_in_key, r->vik[l] == '1');
            assert_string_equal(weir_rule_key(lv->rule), r->e[l].k);
        }
        /* each level's node is the parent of the next */
        for (size_t l = 1; l < n; l++) {
            bool is_child = false;
            for (size_t c = 0; c < weir_rule_child_count(m.levels[l - 1].rule); c++)
                is_child |= weir_rule_child(m.levels[l - 1].rule, c) == m.levels[l].rule;
            assert_true(is_child);
        }
        assert_ptr_equal(m.levels[n - 1].rule, m.rule);
    }
    printf("%zu table rows\n", n_rows);
    sets_free();
}

/* A whitelist node is matched and has neither limits nor children. */
static void whitelist_and_intermediate(void **unused)
{
    (void)unused;
    sets_load();
    weir__match_result m;
    weir__entry e[2] = {{"a", 1, "w", 1}, {"c", 1, "1.2.3.4", 7}};
    assert_int_equal(weir__match(set_idx[SET_DEEP], "deep", 4, e, 2, &m), WEIR_OK);
    assert_non_null(m.rule);
    assert_int_equal(weir_rule_limit_count(m.rule), 0);
    assert_int_equal(weir_rule_child_count(m.rule), 0);
    char key[512];
    assert_int_equal(weir__counter_key(&m, e, 0, key, sizeof(key)), 0); /* no limit 0 */
    /* the intermediate node a=x is matched but has no limit */
    e[0] = (weir__entry){"a", 1, "x", 1};
    assert_int_equal(weir__match(set_idx[SET_DEEP], "deep", 4, e, 1, &m), WEIR_OK);
    assert_non_null(m.rule);
    assert_int_equal(weir_rule_limit_count(m.rule), 0);
    assert_int_equal(weir_rule_child_count(m.rule), 1);
    /* p has limits and children: a one-entry request gets p's limit */
    e[0] = (weir__entry){"p", 1, "v", 1};
    assert_int_equal(weir__match(set_idx[SET_DEEP], "deep", 4, e, 1, &m), WEIR_OK);
    assert_int_equal(weir_rule_limit_at(m.rule, 0)->requests_per_unit, 3);
    sets_free();
}

/* Bytes are bytes: NUL inside keys, values and domains. */
static void lengths_not_terminators(void **unused)
{
    (void)unused;
    sets_load();
    weir__match_result m;
    const weir__match_index *ix = set_idx[SET_PREC];
    weir__entry e = {"k", 1, "v1", 2};
    assert_int_equal(weir__match(ix, "prec\0x", 6, &e, 1, &m), WEIR_OK);
    assert_false(m.domain_found);
    assert_int_equal(weir__match(ix, "prec", 3, &e, 1, &m), WEIR_OK);
    assert_false(m.domain_found);
    assert_int_equal(weir__match(ix, "precx", 4, &e, 1, &m), WEIR_OK);
    assert_true(m.domain_found);
    assert_int_equal(m.levels[0].kind, WEIR__MATCH_EXACT);
    e = (weir__entry){"k\0", 2, "v1", 2};
    assert_int_equal(weir__match(ix, "prec", 4, &e, 1, &m), WEIR_OK);
    assert_null(m.rule);
    e = (weir__entry){"k", 1, "v1\0", 3}; /* not the exact v1: the pattern v* */
    assert_int_equal(weir__match(ix, "prec", 4, &e, 1, &m), WEIR_OK);
    assert_int_equal(m.levels[0].kind, WEIR__MATCH_WILDCARD);
    e = (weir__entry){"k", 1, "\0v2", 3};
    assert_int_equal(weir__match(ix, "prec", 4, &e, 1, &m), WEIR_OK);
    assert_int_equal(m.levels[0].kind, WEIR__MATCH_DEFAULT);
    e = (weir__entry){"k", 1, "x\0001", 3}; /* ends in '1': *1 */
    assert_int_equal(weir__match(ix, "prec", 4, &e, 1, &m), WEIR_OK);
    assert_int_equal(m.levels[0].kind, WEIR__MATCH_WILDCARD);
    assert_string_equal(weir_rule_value(m.rule), "*1");
    e = (weir__entry){"k", 1, NULL, 0}; /* an empty value may be NULL */
    assert_int_equal(weir__match(ix, "prec", 4, &e, 1, &m), WEIR_OK);
    assert_int_equal(m.levels[0].kind, WEIR__MATCH_DEFAULT);
    sets_free();
}

static void bad_arguments(void **unused)
{
    (void)unused;
    sets_load();
    const weir__match_index *ix = set_idx[SET_PREC];
    weir__entry e[WEIR__MATCH_MAX_ENTRIES + 1];
    for (size_t i = 0; i <= WEIR__MATCH_MAX_ENTRIES; i++)
        e[i] = (weir__entry){"z", 1, "v", 1};
    weir__match_result m, sentinel;
    memset(&sentinel, 0x5a, sizeof(sentinel));
    m = sentinel;
    assert_int_equal(weir__match(NULL, "prec", 4, e, 1, &m), WEIR_EINVAL);
    assert_int_equal(weir__match(ix, NULL, 0, e, 1, &m), WEIR_EINVAL);
    assert_int_equal(weir__match(ix, "prec", 4, NULL, 1, &m), WEIR_EINVAL);
    assert_int_equal(weir__match(ix, "prec", 4, e, 1, NULL), WEIR_EINVAL);
    assert_int_equal(weir__match(ix, "prec", 4, e, 0, &m), WEIR_EINVAL);
    assert_int_equal(weir__match(ix, "prec", 4, e, WEIR__MATCH_MAX_ENTRIES + 1, &m), WEIR_EINVAL);
    e[3] = (weir__entry){NULL, 1, "v", 1};
    assert_int_equal(weir__match(ix, "prec", 4, e, 4, &m), WEIR_EINVAL);
    e[3] = (weir__entry){"z", 1, NULL, 2};
    assert_int_equal(weir__match(ix, "prec", 4, e, 4, &m), WEIR_EINVAL);
    assert_memory_equal(&m, &sentinel, sizeof(m)); /* untouched on error */
    e[3] = (weir__entry){"z", 1, "v", 1};
    /* the cap itself is fine: just no match */
    assert_int_equal(weir__match(ix, "prec", 4, e, WEIR__MATCH_MAX_ENTRIES, &m), WEIR_OK);
    assert_true(m.domain_found);
    assert_null(m.rule);
    /* an empty key matches nothing */
    e[0] = (weir__entry){NULL, 0, "v", 1};
    assert_int_equal(weir__match(ix, "prec", 4, e, 1, &m), WEIR_OK);
    assert_null(m.rule);

    weir__match_index *out = (weir__match_index *)&out;
    assert_int_equal(weir__match_index_new(NULL, set_rules[0], &out), WEIR_EINVAL);
    assert_int_equal(weir__match_index_new(ctx, NULL, &out), WEIR_EINVAL);
    assert_int_equal(weir__match_index_new(ctx, set_rules[0], NULL), WEIR_EINVAL);
    assert_ptr_equal(out, (weir__match_index *)&out);
    weir__match_index_free(NULL);
    assert_int_equal(weir__counter_key(NULL, e, 0, NULL, 0), 0);
    sets_free();
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void remove_file(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    remove(path);
}

/* Several domains in one index: each its own tree; a domain without
 * descriptors is found but matches nothing. */
static void several_domains(void **unused)
{
    (void)unused;
    char dir[] = "/tmp/weir_match_XXXXXX";
    assert_non_null(mkdtemp(dir));
    write_file(dir, "a.yaml", "domain: one\ndescriptors:\n  - key: k\n" LIM(1));
    write_file(dir, "b.yaml", "domain: two\ndescriptors:\n  - {key: k, value: v}\n");
    write_file(dir, "c.yaml", "domain: only\n");
    weir_rules *r = NULL;
    weir_status st = weir_rules_load(ctx, dir, NULL, &r, NULL, 0, NULL);
    remove_file(dir, "a.yaml");
    remove_file(dir, "b.yaml");
    remove_file(dir, "c.yaml");
    remove(dir);
    assert_int_equal(st, WEIR_OK);
    weir__match_index *idx = index_of(r);
    weir__entry e = {"k", 1, "v", 1};
    weir__match_result m;
    assert_int_equal(weir__match(idx, "one", 3, &e, 1, &m), WEIR_OK);
    assert_ptr_equal(m.domain, weir_rules_find_domain(r, "one"));
    assert_int_equal(m.levels[0].kind, WEIR__MATCH_DEFAULT);
    assert_int_equal(weir__match(idx, "two", 3, &e, 1, &m), WEIR_OK);
    assert_ptr_equal(m.domain, weir_rules_find_domain(r, "two"));
    assert_int_equal(m.levels[0].kind, WEIR__MATCH_EXACT);
    e.value = "w";
    assert_int_equal(weir__match(idx, "two", 3, &e, 1, &m), WEIR_OK);
    assert_null(m.rule);
    assert_int_equal(weir__match(idx, "only", 4, &e, 1, &m), WEIR_OK);
    assert_true(m.domain_found);
    assert_null(m.rule);
    assert_int_equal(weir__match(idx, "three", 5, &e, 1, &m), WEIR_OK);
    assert_false(m.domain_found);
    weir__match_index_free(idx);
    weir_rules_free(r);
}

/* ------------------------------------------------------------ glob */

static void glob(void **unused)
{
    (void)unused;
    static const struct {
        const char *p, *v;
        bool want;
    } g[] = {
        {"*", "", true},
        {"*", "abc", true},
        {"**", "", true},
        {"a*", "a", true},
        {"a*", "", false},
        {"*a", "ba", true},
        {"*a", "ab", false},
        {"a*b", "ab", true},
        {"a*b", "a", false},
        {"a*b", "b", false},
        {"a*a", "a", false},
        {"a*a", "aa", true},
        {"a*b*c", "abc", true},
        {"a*b*c", "acb", false},
        {"a*b*c", "abcbc", true},
        {"*ab*ab*", "abab", true},
        {"*ab*ab*", "aba", false},
        {"*aab", "aaab", true},
        {"*x*", "yyy", false},
        {"abc", "abc", true},
        {"abc", "abd", false},
        {"", "", true},
        {"", "a", false},
        {"*.*", ".", true},
        {"*_*", "a_b", true},
        {"*_*", "ab", false},
        {"a*bc*bc", "abcbcbc", true},
        {"a*bc*bc", "abcbc", true},
        {"a*bc*bc", "abcb", false},
    };
    for (size_t i = 0; i < sizeof(g) / sizeof(g[0]); i++) {
        bool got = weir__glob_match(g[i].p, strlen(g[i].p), g[i].v, strlen(g[i].v));
        if (got != g[i].want)
            printf("'%s' vs '%s': %d\n", g[i].p, g[i].v, got);
        assert_int_equal(got, g[i].want);
    }
    assert_true(weir__glob_match("a*\0*b", 5, "aX\0Yb", 5));
    assert_false(weir__glob_match("a*\0*b", 5, "aXYb", 4));
    assert_true(weir__glob_match("*", 1, NULL, 0));

    /* the classic blow-up of backtracking matchers stays fast */
    char pat[64], val[20001];
    size_t pl = 0;
    for (int i = 0; i < 20; i++) {
        pat[pl++] = 'a';
        pat[pl++] = '*';
    }
    pat[pl++] = 'b';
    pat[pl++] = '*'; /* 'b' is searched for, not anchored at the end */
    memset(val, 'a', sizeof(val) - 1);
    clock_t t0 = clock();
    for (int i = 0; i < 100; i++)
        assert_false(weir__glob_match(pat, pl, val, sizeof(val) - 1));
    val[sizeof(val) - 2] = 'b';
    assert_true(weir__glob_match(pat, pl, val, sizeof(val) - 1));
    double ms = (double)(clock() - t0) * 1000.0 / CLOCKS_PER_SEC;
    printf("pathological glob x100: %.1f ms\n", ms);
}

/* ------------------------------------------------------------ counter keys */

static size_t key_for(const weir__match_index *idx, const char *domain, const weir__entry *e,
                      size_t n, size_t limit, char *buf, size_t cap)
{
    weir__match_result m;
    assert_int_equal(weir__match(idx, domain, strlen(domain), e, n, &m), WEIR_OK);
    assert_non_null(m.rule);
    size_t len = weir__counter_key(&m, e, limit, buf, cap);
    assert_true(len > 0);
    return len;
}

static bool same(const char *a, size_t al, const char *b, size_t bl)
{
    return al == bl && memcmp(a, b, al) == 0;
}

static void counter_key_sharing(void **unused)
{
    (void)unused;
    sets_load();
    char a[512], b[512];
    const weir__match_index *ix = set_idx[SET_EDGE];
    const char *d = "edge_proxy_per_ip";
    /* share_threshold: every value of the /foo/ pattern shares one counter */
    weir__entry e1 = {"path", 4, "/foo/a", 6}, e2 = {"path", 4, "/foo/bbb", 8};
    size_t al = key_for(ix, d, &e1, 1, 0, a, sizeof(a));
    size_t bl = key_for(ix, d, &e2, 1, 0, b, sizeof(b));
    assert_true(same(a, al, b, bl));
    /* a pattern without it: each value apart */
    e1 = (weir__entry){"path", 4, "/bar/a", 6};
    e2 = (weir__entry){"path", 4, "/bar/b", 6};
    al = key_for(ix, d, &e1, 1, 0, a, sizeof(a));
    bl = key_for(ix, d, &e2, 1, 0, b, sizeof(b));
    assert_false(same(a, al, b, bl));
    /* a default: each value apart */
    e1 = (weir__entry){"remote_address", 14, "10.0.0.1", 8};
    e2 = (weir__entry){"remote_address", 14, "10.0.0.2", 8};
    al = key_for(ix, d, &e1, 1, 0, a, sizeof(a));
    bl = key_for(ix, d, &e2, 1, 0, b, sizeof(b));
    assert_false(same(a, al, b, bl));
    /* same value, same default: same counter */
    e2 = e1;
    bl = key_for(ix, d, &e2, 1, 0, b, sizeof(b));
    assert_true(same(a, al, b, bl));
    /* the key is the exact length; one byte less does not fit */
    weir__match_result m;
    assert_int_equal(weir__match(ix, d, strlen(d), &e1, 1, &m), WEIR_OK);
    assert_int_equal(weir__counter_key(&m, &e1, 0, a, al), al);
    assert_true(same(a, al, b, bl));
    assert_int_equal(weir__counter_key(&m, &e1, 0, a, al - 1), 0);
    assert_int_equal(weir__counter_key(&m, &e1, 0, NULL, 0), 0);
    assert_int_equal(weir__counter_key(&m, &e1, 1, a, sizeof(a)), 0); /* one limit only */
    assert_true(al <= WEIR__COUNTER_KEY_MAX_BYTES);
    sets_free();
}

/* Tricky strings for collision tests: separators, NULs, bytes that look
 * like a length prefix or a kind tag. */
static const struct {
    const char *s;
    size_t len;
} tricky[] = {
    {"", 0},
    {"a", 1},
    {"a_b", 3},
    {"b_c", 3},
    {"_", 1},
    {".", 1},
    {"a.b", 3},
    {"\0", 1},
    {"\0\0", 2},
    {"a\0b", 3},
    {"\0\0\0\1", 4},
    {"\0\0\0\1a", 5},
    {"\0\0\0\0", 4},
    {"E", 1},
    {"D", 1},
    {"W", 1},
    {"y", 1},
    {"\0\0\0\1y", 5},
    {"D\0\0\0\1", 5},
    {"*", 1},
    {"x_y", 3},
    {"\0\0\0\1"
     "D",
     5},
    {"L", 1},
    {"\xff", 1},
};
#define N_TRICKY (sizeof(tricky) / sizeof(tricky[0]))

static void counter_key_collisions(void **unused)
{
    (void)unused;
    weir_rules *r = test_rules_parse(
        ctx,
        "domain: col\n"
        "descriptors:\n"
        "  - key: x\n"
        "    descriptors:\n"
        "      - key: y\n" LIM2(1) "  - key: x_y\n" LIM(
            1) "  - key: a_b\n"
               "    value: c\n" LIM(1) "  - key: a\n"
                                       "    value: b_c\n" LIM(
                                           1) "  - key: a.b\n"
                                              "    value: c\n" LIM(
                                                  1) "  - key: a\n"
                                                     "    value: b.c\n" LIM(1) "  - key: a\n" LIM(
                                                         1) "  - key: a\n"
                                                            "    value: 'b*'\n" LIM(1));
    weir__match_index *idx = index_of(r);
    enum { MAXK = 2 * N_TRICKY * N_TRICKY + 64 };
    char(*keys)[128] = calloc(MAXK, 128);
    size_t *lens = calloc(MAXK, sizeof(size_t));
    assert_non_null(keys);
    assert_non_null(lens);
    size_t nk = 0;
    /* every pair of tricky values on the two-level default path */
    for (size_t i = 0; i < N_TRICKY; i++) {
        for (size_t j = 0; j < N_TRICKY; j++) {
            weir__entry e[2] = {{"x", 1, tricky[i].s, tricky[i].len},
                                {"y", 1, tricky[j].s, tricky[j].len}};
            lens[nk] = key_for(idx, "col", e, 2, 0, keys[nk], 128);
            nk++;
        }
    }
    /* the one-level x_y default and the exact / pattern / default siblings */
    for (size_t i = 0; i < N_TRICKY; i++) {
        weir__entry e = {"x_y", 3, tricky[i].s, tricky[i].len};
        lens[nk] = key_for(idx, "col", &e, 1, 0, keys[nk], 128);
        nk++;
        e = (weir__entry){"a", 1, tricky[i].s, tricky[i].len};
        lens[nk] = key_for(idx, "col", &e, 1, 0, keys[nk], 128);
        nk++;
    }
    static const weir__entry exact[] = {
        {"a_b", 3, "c", 1}, {"a.b", 3, "c", 1}, {"a", 1, "b.c", 3},
        {"a", 1, "bx", 2},  {"a", 1, "b", 1},
    };
    for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++) {
        lens[nk] = key_for(idx, "col", &exact[i], 1, 0, keys[nk], 128);
        nk++;
    }
    /* all distinct requests (the tricky (a, b_c) is the exact sibling,
     * so it is not repeated above): no two keys may be equal */
    size_t dup = 0;
    for (size_t i = 0; i < nk; i++)
        for (size_t j = i + 1; j < nk; j++)
            dup += same(keys[i], lens[i], keys[j], lens[j]);
    assert_int_equal(dup, 0);
    printf("%zu distinct counter keys\n", nk);
    free(keys);
    free(lens);
    weir__match_index_free(idx);
    weir_rules_free(r);
}

/* Several limits on one node, and limits differing in one field. */
static void counter_key_limits(void **unused)
{
    (void)unused;
    weir_rules *r =
        test_rules_parse(ctx, "domain: lim\n"
                              "descriptors:\n"
                              "  - key: k\n"
                              "    rate_limits:\n"
                              "      - {unit: second, requests_per_unit: 10}\n"
                              "      - {unit: second, requests_per_unit: 10}\n"
                              "      - {unit: second, requests_per_unit: 10, name: n}\n"
                              "      - {unit: minute, requests_per_unit: 10}\n"
                              "      - {unit: second, requests_per_unit: 11}\n"
                              "      - {unit: second, requests_per_unit: 10, algorithm: gcra}\n"
                              "      - {unit: second, requests_per_unit: 10, algorithm: gcra, "
                              "burst: 5}\n"
                              "      - {window: 60s, requests_per_unit: 60, algorithm: "
                              "sliding_window_counter, sub_windows: 6}\n"
                              "      - {window: 60s, requests_per_unit: 60, algorithm: "
                              "sliding_window_counter, sub_windows: 3}\n"
                              "      - {unlimited: true}\n");
    weir__match_index *idx = index_of(r);
    weir__entry e = {"k", 1, "v", 1};
    char keys[10][256];
    size_t lens[10];
    for (size_t i = 0; i < 10; i++)
        lens[i] = key_for(idx, "lim", &e, 1, i, keys[i], sizeof(keys[i]));
    for (size_t i = 0; i < 10; i++)
        for (size_t j = i + 1; j < 10; j++)
            assert_false(same(keys[i], lens[i], keys[j], lens[j]));
    weir__match_index_free(idx);
    weir_rules_free(r);
}

/* Counter keys depend on the rule, not on the load: the same rules loaded
 * twice, or with other rules added around them, give the same bytes. */
static void counter_key_reload(void **unused)
{
    (void)unused;
    const char *v1 =
        "domain: rl\n"
        "descriptors:\n"
        "  - key: ip\n" LIM(5) "  - key: path\n"
                               "    value: '/api/*'\n"
                               "    share_threshold: true\n" LIM(6) "  - key: user\n"
                                                                    "    value: bob\n"
                                                                    "    descriptors:\n"
                                                                    "      - key: op\n" LIM2(7);
    const char *v2 = "domain: rl\n"
                     "descriptors:\n"
                     "  - {key: new, value: one}\n"
                     "  - key: path\n"
                     "    value: '/other/*'\n" LIM(1) "  - key: ip\n" LIM(
                         5) "  - key: path\n"
                            "    value: '/api/*'\n"
                            "    share_threshold: true\n" LIM(6) "  - key: user\n"
                                                                 "    value: alice\n" LIM(
                                                                     2) "  - key: user\n"
                                                                        "    value: bob\n"
                                                                        "    descriptors:\n"
                                                                        "      - key: zz\n"
                                                                        "      - key: op\n" LIM2(7);
    const char *v3 = "domain: rl\n" /* ip's limit changed */
                     "descriptors:\n"
                     "  - key: ip\n" LIM(50);
    weir_rules *r[4] = {test_rules_parse(ctx, v1), test_rules_parse(ctx, v1),
                        test_rules_parse(ctx, v2), test_rules_parse(ctx, v3)};
    weir__match_index *idx[4];
    for (int i = 0; i < 4; i++)
        idx[i] = index_of(r[i]);
    static const weir__entry reqs[][2] = {
        {{"ip", 2, "1.2.3.4", 7}},
        {{"path", 4, "/api/x", 6}},
        {{"user", 4, "bob", 3}, {"op", 2, "read", 4}},
    };
    static const size_t n_reqs[] = {1, 1, 2};
    for (size_t q = 0; q < 3; q++) {
        char k[3][256];
        size_t l[3];
        for (int i = 0; i < 3; i++)
            l[i] = key_for(idx[i], "rl", reqs[q], n_reqs[q], 0, k[i], sizeof(k[i]));
        assert_true(same(k[0], l[0], k[1], l[1]));
        assert_true(same(k[0], l[0], k[2], l[2]));
        if (q == 0) {
            char k3[256];
            size_t l3 = key_for(idx[3], "rl", reqs[q], 1, 0, k3, sizeof(k3));
            assert_false(same(k[0], l[0], k3, l3));
        }
    }
    /* the same shape in another domain is another counter */
    weir_rules *other = test_rules_parse(ctx, "domain: rl2\ndescriptors:\n  - key: ip\n" LIM(5));
    weir__match_index *oidx = index_of(other);
    char k0[256], k1[256];
    size_t l0 = key_for(idx[0], "rl", reqs[0], 1, 0, k0, sizeof(k0));
    size_t l1 = key_for(oidx, "rl2", reqs[0], 1, 0, k1, sizeof(k1));
    assert_false(same(k0, l0, k1, l1));
    weir__match_index_free(oidx);
    weir_rules_free(other);
    for (int i = 0; i < 4; i++) {
        weir__match_index_free(idx[i]);
        weir_rules_free(r[i]);
    }
}

/* ------------------------------------------------------------ out of memory */

static void out_of_memory(void **unused)
{
    (void)unused;
    weir_rules *r = test_rules_parse(ctx, set_yaml[SET_DEEP]);
    int64_t before = ca.live_blocks;
    int fails = 0;
    for (int k = 1; k < 100; k++) {
        weir__match_index *idx = (weir__match_index *)&idx;
        ca.fail_after = k;
        weir_status st = weir__match_index_new(ctx, r, &idx);
        ca.fail_after = 0;
        if (st == WEIR_OK) {
            weir__match_index_free(idx);
            break;
        }
        fails++;
        assert_int_equal(st, WEIR_ENOMEM);
        assert_ptr_equal(idx, (weir__match_index *)&idx);
        assert_int_equal(ca.live_blocks, before);
    }
    assert_true(fails >= 4);
    assert_int_equal(ca.live_blocks, before);
    weir_rules_free(r);
}

/* ------------------------------------------------------------ random rules
 * A generated YAML text, and a slow reference matcher walking the rule
 * tree with the public accessors. */

typedef struct text {
    char *p;
    size_t len, cap;
} text;

static void addf(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void addf(text *t, const char *fmt, ...)
{
    if (!t->p) { /* no pointer arithmetic on a buffer not yet allocated */
        t->cap = 256;
        t->p = malloc(t->cap);
        assert_non_null(t->p);
    }
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        assert_true(n >= 0);
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        t->cap = t->cap * 2 + (size_t)n + 64;
        t->p = realloc(t->p, t->cap);
        assert_non_null(t->p);
    }
}

static const char *const alpha_keys[] = {"k", "a", "a_b", "b"};
static const char *const alpha_values[] = {"x", "y", "xy", "x_y", "yx", "xx"};
static const char *const alpha_patterns[] = {"*", "x*", "*y", "x*y", "*x*", "y**x", "*_*"};

/* Children of one node: unique (key, value) and one default per key. */
static void gen_children(text *t, test_rng *rng, int depth, int indent, size_t *count)
{
    size_t n = 1 + rng_below(rng, 5);
    char used[4][16] = {{0}};
    for (size_t i = 0; i < n; i++) {
        size_t k = rng_below(rng, 4);
        size_t kind = rng_below(rng, 3); /* 0 exact, 1 pattern, 2 default */
        size_t v = kind == 0 ? rng_below(rng, 6) : kind == 1 ? 6 + rng_below(rng, 7) : 15;
        if (used[k][v])
            continue;
        used[k][v] = 1;
        addf(t, "%*s- key: %s\n", indent, "", alpha_keys[k]);
        if (kind == 0)
            addf(t, "%*s  value: '%s'\n", indent, "", alpha_values[v]);
        else if (kind == 1)
            addf(t, "%*s  value: '%s'\n", indent, "", alpha_patterns[v - 6]);
        if (kind == 1 && rng_below(rng, 3) == 0)
            addf(t, "%*s  share_threshold: true\n", indent, "");
        if (rng_below(rng, 3) != 0)
            addf(t, "%*s  rate_limit: {unit: second, requests_per_unit: %zu}\n", indent, "",
                 *count);
        (*count)++;
        if (depth < 3 && rng_below(rng, 2) == 0) {
            addf(t, "%*s  descriptors:\n", indent, "");
            gen_children(t, rng, depth + 1, indent + 4, count);
        }
    }
}

/* Straightforward glob: recursive, fine for short test strings. */
static bool ref_glob(const char *p, size_t pl, const char *v, size_t vl)
{
    if (pl == 0)
        return vl == 0;
    if (*p == '*')
        return ref_glob(p + 1, pl - 1, v, vl) || (vl > 0 && ref_glob(p, pl, v + 1, vl - 1));
    return vl > 0 && *p == *v && ref_glob(p + 1, pl - 1, v + 1, vl - 1);
}

static bool eq(const char *a, const char *b, size_t bl)
{
    return strlen(a) == bl && memcmp(a, b, bl) == 0;
}

static const weir_rule *ref_match(const weir_rules *r, const char *domain, const weir__entry *e,
                                  size_t n, weir__match_kind *kinds)
{
    const weir_rules_domain *d = weir_rules_find_domain(r, domain);
    if (!d)
        return NULL;
    const weir_rule *cur = NULL;
    for (size_t l = 0; l < n; l++) {
        size_t nc = cur ? weir_rule_child_count(cur) : weir_rules_domain_rule_count(d);
        const weir_rule *found = NULL;
        for (int pass = 0; pass < 3 && !found; pass++) {
            for (size_t i = 0; i < nc && !found; i++) {
                const weir_rule *c = cur ? weir_rule_child(cur, i) : weir_rules_domain_rule(d, i);
                const char *v = weir_rule_value(c);
                if (!eq(weir_rule_key(c), e[l].key, e[l].key_len))
                    continue;
                if (pass == 0 && v && !weir_rule_is_wildcard(c) &&
                    eq(v, e[l].value, e[l].value_len))
                    found = c;
                if (pass == 1 && v && weir_rule_is_wildcard(c) &&
                    ref_glob(v, strlen(v), e[l].value, e[l].value_len))
                    found = c;
                if (pass == 2 && !v)
                    found = c;
                if (found)
                    kinds[l] = pass == 0   ? WEIR__MATCH_EXACT
                               : pass == 1 ? WEIR__MATCH_WILDCARD
                                           : WEIR__MATCH_DEFAULT;
            }
        }
        if (!found)
            return NULL;
        cur = found;
    }
    return cur;
}

static const char *const req_values[] = {"x", "y", "xy", "x_y", "yx", "xx", "", "z", "yxx", "_"};

static void random_request(test_rng *rng, weir__entry *e, size_t *n)
{
    *n = 1 + rng_below(rng, 4);
    for (size_t i = 0; i < *n; i++) {
        const char *k = alpha_keys[rng_below(rng, 4)];
        const char *v = req_values[rng_below(rng, 10)];
        e[i] = (weir__entry){k, strlen(k), v, strlen(v)};
    }
}

/* The index and the reference walk agree on one request of domain "d"
 * (the rules' text is printed when they do not); counts it, and its match. */
static void agree_with_reference(const weir_rules *r, const weir__match_index *idx,
                                 const char *text_of_rules, const weir__entry *e, size_t n,
                                 size_t *hits, size_t *total)
{
    weir__match_kind want_kinds[WEIR__MATCH_MAX_DEPTH];
    const weir_rule *want = ref_match(r, "d", e, n, want_kinds);
    weir__match_result m;
    assert_int_equal(weir__match(idx, "d", 1, e, n, &m), WEIR_OK);
    if (m.rule != want) {
        printf("rules:\n%s\nrequest:", text_of_rules);
        for (size_t i = 0; i < n; i++)
            printf(" (%s, %s)", e[i].key, e[i].value);
        printf("\n");
    }
    assert_ptr_equal(m.rule, want);
    if (want) {
        (*hits)++;
        for (size_t i = 0; i < n; i++)
            assert_int_equal(m.levels[i].kind, want_kinds[i]);
    }
    (*total)++;
}

static void property_vs_reference(void **unused)
{
    (void)unused;
    test_rng rng = {test_seed("match_property")};
    size_t hits = 0, total = 0;
    for (int round = 0; round < 200; round++) {
        text t = {0};
        size_t count = 0;
        addf(&t, "domain: d\ndescriptors:\n");
        gen_children(&t, &rng, 1, 2, &count);
        weir_rules *r = test_rules_parse(ctx, t.p);
        weir__match_index *idx = index_of(r);
        for (int q = 0; q < 500; q++) {
            weir__entry e[4];
            size_t n;
            random_request(&rng, e, &n);
            agree_with_reference(r, idx, t.p, e, n, &hits, &total);
        }
        weir__match_index_free(idx);
        weir_rules_free(r);
        free(t.p);
    }
    printf("%zu of %zu random requests matched\n", hits, total);
    assert_true(hits > total / 20);
}

/* Wide nodes: runs longer than the index scans in order (found through its
 * hash slots instead), the same strings under many owners, and strings of
 * every length around the index's 4-, 8- and 16-byte steps, some equal
 * but for one byte near the end. */
enum { WIDE_KEYS = 24, WIDE_VALUES = 40 };

static void wide_string(char *buf, size_t cap, char tag, size_t i)
{
    switch (i % 6) {
    case 0:
        snprintf(buf, cap, "%c%zu", tag, i); /* 2 or 3 bytes */
        break;
    case 1:
        snprintf(buf, cap, "%c%07zu", tag, i); /* 8 bytes */
        break;
    case 2:
        snprintf(buf, cap, "%c-0123456-%zu", tag, i); /* 11 or 12 */
        break;
    case 3:
        snprintf(buf, cap, "%c-a-long-string-of-bytes-%zua", tag, i); /* 27 or 28 */
        break;
    case 4: /* case 3's string of i - 1 but for the last byte */
        snprintf(buf, cap, "%c-a-long-string-of-bytes-%zub", tag, i - 1);
        break;
    default:
        snprintf(buf, cap, "%c%05zu", tag, i); /* 6 bytes, the first 4 often alike */
    }
}

static const char *const wide_patterns[] = {"*1", "v-0*", "*-a-long*", "v*", "*string*5", "v0*"};

static void gen_wide(text *t, test_rng *rng, int depth, int indent, size_t *count)
{
    size_t n_keys = depth == 1 ? WIDE_KEYS : 2 + rng_below(rng, 12);
    for (size_t k = 0; k < n_keys; k++) {
        char key[64];
        wide_string(key, sizeof(key), 'k', k);
        size_t n_exact = rng_below(rng, 4) == 0 ? 0 : rng_below(rng, 16);
        size_t first = rng_below(rng, WIDE_VALUES);
        bool has_default = rng_below(rng, 3) == 0;
        size_t n_patterns = rng_below(rng, 3) == 0 ? 1 + rng_below(rng, 2) : 0;
        size_t first_pattern = rng_below(rng, 6);
        for (size_t c = 0; c < n_exact + has_default + n_patterns; c++) {
            char value[64];
            addf(t, "%*s- key: %s\n", indent, "", key);
            if (c < n_exact) {
                wide_string(value, sizeof(value), 'v', (first + c) % WIDE_VALUES);
                addf(t, "%*s  value: '%s'\n", indent, "", value);
            } else if (c < n_exact + n_patterns) {
                addf(t, "%*s  value: '%s'\n", indent, "",
                     wide_patterns[(first_pattern + c - n_exact) % 6]);
            }
            addf(t, "%*s  rate_limit: {unit: second, requests_per_unit: %zu}\n", indent, "",
                 ++*count);
            if (depth < 2 && rng_below(rng, 10) == 0) {
                addf(t, "%*s  descriptors:\n", indent, "");
                gen_wide(t, rng, depth + 1, indent + 4, count);
            }
        }
    }
}

static void wide_runs_vs_reference(void **unused)
{
    (void)unused;
    test_rng rng = {test_seed("match_wide")};
    static char keys[WIDE_KEYS + 2][64], values[WIDE_VALUES + 2][64];
    for (size_t i = 0; i < WIDE_KEYS + 2; i++)
        wide_string(keys[i], sizeof(keys[i]), 'k', i); /* the last two are in no rule */
    for (size_t i = 0; i < WIDE_VALUES + 2; i++)
        wide_string(values[i], sizeof(values[i]), 'v', i);
    size_t hits = 0, total = 0;
    for (int round = 0; round < 20; round++) {
        text t = {.p = malloc(4096), .cap = 4096};
        assert_non_null(t.p);
        size_t count = 0;
        addf(&t, "domain: d\ndescriptors:\n");
        gen_wide(&t, &rng, 1, 2, &count);
        weir_rules *r = test_rules_parse(ctx, t.p);
        weir__match_index *idx = index_of(r);
        for (int q = 0; q < 2000; q++) {
            weir__entry e[2];
            size_t n = 1 + rng_below(&rng, 2);
            for (size_t i = 0; i < n; i++) {
                const char *k = keys[rng_below(&rng, WIDE_KEYS + 2)];
                uint64_t v = rng_below(&rng, WIDE_VALUES + 4);
                const char *val = v < WIDE_VALUES + 2 ? values[v] : v == WIDE_VALUES + 2 ? "" : "v";
                e[i] = (weir__entry){k, strlen(k), val, strlen(val)};
            }
            agree_with_reference(r, idx, t.p, e, n, &hits, &total);
        }
        weir__match_index_free(idx);
        weir_rules_free(r);
        free(t.p);
    }
    printf("%zu of %zu wide requests matched\n", hits, total);
    assert_true(hits > total / 10);
}

/* More domains than the index scans in order: each is found by its own
 * name only, whatever its length. */
static void many_domains(void **unused)
{
    (void)unused;
    enum { N = 20 };
    char dir[] = "/tmp/weir_match_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char names[N + 2][64], file[32], yaml[256];
    for (size_t i = 0; i < N + 2; i++)
        wide_string(names[i], sizeof(names[i]), 'd', i); /* the last two are not loaded */
    for (size_t i = 0; i < N; i++) {
        snprintf(file, sizeof(file), "%zu.yaml", i);
        int len = snprintf(yaml, sizeof(yaml),
                           "domain: %s\ndescriptors:\n  - key: k\n"
                           "    rate_limit: {unit: second, requests_per_unit: %zu}\n",
                           names[i], i + 1);
        assert_true(len > 0 && (size_t)len < sizeof(yaml));
        write_file(dir, file, yaml);
    }
    weir_rules *r = NULL;
    weir_status st = weir_rules_load(ctx, dir, NULL, &r, NULL, 0, NULL);
    for (size_t i = 0; i < N; i++) {
        snprintf(file, sizeof(file), "%zu.yaml", i);
        remove_file(dir, file);
    }
    remove(dir);
    assert_int_equal(st, WEIR_OK);
    weir__match_index *idx = index_of(r);
    weir__entry e = {"k", 1, "x", 1};
    for (size_t i = 0; i < N + 2; i++) {
        weir__match_result m;
        assert_int_equal(weir__match(idx, names[i], strlen(names[i]), &e, 1, &m), WEIR_OK);
        assert_int_equal(m.domain_found, i < N);
        if (i < N) {
            assert_ptr_equal(m.domain, weir_rules_find_domain(r, names[i]));
            assert_non_null(m.rule);
            assert_int_equal(weir_rule_limit_at(m.rule, 0)->requests_per_unit, i + 1);
        }
        bool found = weir__match_domain_find(idx, names[i], strlen(names[i])) != NULL;
        assert_int_equal(found, i < N);
    }
    weir__match_index_free(idx);
    weir_rules_free(r);
}

/* ------------------------------------------------------------ scale */

static void million_lookups_allocate_nothing(void **unused)
{
    (void)unused;
    text t = {0};
    addf(&t, "domain: big\ndescriptors:\n");
    size_t n_rules = 0;
    for (int k = 0; k < 100; k++) {
        /* per key: 6 exact values, 2 patterns, a default with a child */
        for (int v = 0; v < 6; v++, n_rules++)
            addf(&t,
                 "  - {key: key%d, value: val%d, rate_limit: {unit: second, "
                 "requests_per_unit: 10}}\n",
                 k, v);
        addf(&t,
             "  - {key: key%d, value: 'pre%d*', rate_limit: {unit: minute, "
             "requests_per_unit: 10}}\n",
             k, k);
        addf(&t,
             "  - {key: key%d, value: '*suf', rate_limit: {unit: minute, "
             "requests_per_unit: 10}}\n",
             k);
        addf(&t,
             "  - key: key%d\n    rate_limit: {unit: hour, requests_per_unit: 10}\n"
             "    descriptors:\n      - {key: sub, rate_limit: {unit: day, "
             "requests_per_unit: 10}}\n",
             k);
        n_rules += 4;
    }
    weir_rules *r = test_rules_parse(ctx, t.p);
    free(t.p);
    assert_int_equal(weir_rules_rule_count(r), 1000);
    assert_int_equal(n_rules, 1000);
    weir__match_index *idx = index_of(r);

    /* requests prepared up front so the loop measures matching alone */
    enum { N_REQ = 4096 };
    static char vbuf[N_REQ][24];
    static char kbuf[N_REQ][16];
    static weir__entry req[N_REQ][2];
    static size_t req_n[N_REQ];
    test_rng rng = {test_seed("match_scale")};
    for (size_t i = 0; i < N_REQ; i++) {
        int k = (int)rng_below(&rng, 110); /* some keys are unknown */
        snprintf(kbuf[i], sizeof(kbuf[i]), "key%d", k);
        switch (rng_below(&rng, 4)) {
        case 0:
            snprintf(vbuf[i], sizeof(vbuf[i]), "val%d", (int)rng_below(&rng, 8));
            break;
        case 1:
            snprintf(vbuf[i], sizeof(vbuf[i]), "pre%dxyz", k);
            break;
        case 2:
            snprintf(vbuf[i], sizeof(vbuf[i]), "abc%dsuf", (int)rng_below(&rng, 1000));
            break;
        default:
            snprintf(vbuf[i], sizeof(vbuf[i]), "%llu", (unsigned long long)rng_next(&rng));
        }
        req[i][0] = (weir__entry){kbuf[i], strlen(kbuf[i]), vbuf[i], strlen(vbuf[i])};
        req[i][1] = (weir__entry){"sub", 3, vbuf[i], strlen(vbuf[i])};
        req_n[i] = 1 + rng_below(&rng, 2);
    }

    int64_t blocks = ca.live_blocks, bytes = ca.live_bytes;
    ca.fail_after = 1; /* any allocation would consume this */
    size_t matched = 0;
    char key[WEIR__COUNTER_KEY_MAX_BYTES];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t i = 0; i < 1000000; i++) {
        size_t q = i & (N_REQ - 1);
        weir__match_result m;
        if (weir__match(idx, "big", 3, req[q], req_n[q], &m) != WEIR_OK)
            fail();
        if (m.rule) {
            matched++;
            if ((i & 15) == 0 && weir__counter_key(&m, req[q], 0, key, sizeof(key)) == 0)
                fail();
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_int_equal(ca.fail_after, 1);
    ca.fail_after = 0;
    assert_int_equal(ca.live_blocks, blocks);
    assert_int_equal(ca.live_bytes, bytes);
    double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
    printf("1M lookups over 1000 rules: %.0f ns/lookup, %zu matched\n", ns / 1e6, matched);
    assert_true(matched > 100000);
    weir__match_index_free(idx);
    weir_rules_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table),
        cmocka_unit_test(whitelist_and_intermediate),
        cmocka_unit_test(lengths_not_terminators),
        cmocka_unit_test(bad_arguments),
        cmocka_unit_test(several_domains),
        cmocka_unit_test(glob),
        cmocka_unit_test(counter_key_sharing),
        cmocka_unit_test(counter_key_collisions),
        cmocka_unit_test(counter_key_limits),
        cmocka_unit_test(counter_key_reload),
        cmocka_unit_test(out_of_memory),
        cmocka_unit_test(property_vs_reference),
        cmocka_unit_test(wide_runs_vs_reference),
        cmocka_unit_test(many_domains),
        cmocka_unit_test(million_lookups_allocate_nothing),
    };
    return cmocka_run_group_tests_name("engine_match", tests, setup, teardown);
}
