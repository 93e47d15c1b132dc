/*
 * test_loader.c - the rule-file loader: upstream's README examples and
 * schema, weir's extensions, every error with its message, line and column,
 * the caps at their edges, directory loading (dot-files, Kubernetes
 * ConfigMap symlinks, merging), out-of-memory at every allocation, and the
 * time to load 10,000 rules.
 *
 * Every load runs on a counting allocator, and each test checks that all it
 * allocated was given back.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fake.h"
#include "weir/rules.h"
#include "weir/weir.h"

#define S INT64_C(1000000)
#define DAY (86400 * S)
#define MAX_ERRS 16

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

static weir_rules_error errs[MAX_ERRS];
static size_t n_errs;

static void print_errors(void)
{
    for (size_t i = 0; i < n_errs && i < MAX_ERRS; i++)
        printf("  %s:%u:%u: %s\n", errs[i].file, errs[i].line, errs[i].column, errs[i].message);
}

static weir_status parse_opts(const char *yaml, size_t len, const weir_rules_options *o,
                              weir_rules **out)
{
    memset(errs, 0, sizeof(errs));
    n_errs = 0;
    return weir_rules_parse(ctx, "test.yaml", yaml, len, o, out, errs, MAX_ERRS, &n_errs);
}

static weir_rules *load_ok_opts(const char *yaml, const weir_rules_options *o)
{
    weir_rules *r = NULL;
    weir_status st = parse_opts(yaml, strlen(yaml), o, &r);
    if (st != WEIR_OK)
        print_errors();
    assert_int_equal(st, WEIR_OK);
    assert_int_equal(n_errs, 0);
    assert_non_null(r);
    return r;
}

static weir_rules *load_ok(const char *yaml)
{
    return load_ok_opts(yaml, NULL);
}

/* The first error must be at line:col and contain msg. */
static void expect_error_len(const char *yaml, size_t len, uint32_t line, uint32_t col,
                             const char *msg)
{
    int64_t before = ca.live_blocks;
    weir_rules *r = (weir_rules *)&r; /* must stay untouched */
    weir_rules *sentinel = r;
    weir_status st = parse_opts(yaml, len, NULL, &r);
    if (st != WEIR_EPARSE || n_errs == 0 || !strstr(errs[0].message, msg) || errs[0].line != line ||
        errs[0].column != col) {
        printf("expected %u:%u: %s\n", line, col, msg);
        print_errors();
    }
    assert_int_equal(st, WEIR_EPARSE);
    assert_ptr_equal(r, sentinel);
    assert_true(n_errs >= 1);
    assert_string_equal(errs[0].file, "test.yaml");
    assert_non_null(strstr(errs[0].message, msg));
    assert_int_equal(errs[0].line, line);
    assert_int_equal(errs[0].column, col);
    assert_int_equal(ca.live_blocks, before);
}

static void expect_error(const char *yaml, uint32_t line, uint32_t col, const char *msg)
{
    expect_error_len(yaml, strlen(yaml), line, col, msg);
}

/* ------------------------------------------------------------------ text
 * A growable buffer for generated documents. */

typedef struct text {
    char *p;
    size_t len, cap;
} text;

static void addf(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void addf(text *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int w = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        assert_true(w >= 0);
        if (t->p && (size_t)w < t->cap - t->len) {
            t->len += (size_t)w;
            return;
        }
        t->cap = (t->cap + (size_t)w + 1) * 2;
        t->p = realloc(t->p, t->cap);
        assert_non_null(t->p);
    }
}

/* ------------------------------------------------------------ the error table */

typedef struct err_case {
    const char *name;
    const char *yaml;
    uint32_t line, col;
    const char *msg;
} err_case;

#define RL(body) "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n" body
/*                                                       line 4 ^, body from line 5 */

static const err_case err_cases[] = {
    {"unknown_top_key", "domain: d\nfoo: 1\n", 2, 1, "unknown key 'foo'"},
    {"unknown_descriptor_key", "domain: d\ndescriptors:\n  - key: k\n    vaule: v\n", 4, 5,
     "unknown key 'vaule'"},
    {"unknown_rate_limit_key", RL("      unit: second\n      request_per_unit: 5\n"), 6, 7,
     "unknown key 'request_per_unit'"},
    {"unknown_replaces_key", RL("      unit: second\n      replaces:\n        - nmae: x\n"), 7, 11,
     "unknown key 'nmae'"},
    {"empty_domain", "domain: \"\"\ndescriptors: []\n", 1, 9,
     "config file cannot have empty domain"},
    {"null_domain", "domain:\ndescriptors: []\n", 1, 8, "config file cannot have empty domain"},
    {"missing_domain", "descriptors: []\n", 1, 1, "config file cannot have empty domain"},
    {"empty_file", "", 1, 1, "config file cannot have empty domain"},
    {"comments_only", "# nothing here\n", 1, 1, "config file cannot have empty domain"},
    {"empty_key", "domain: d\ndescriptors:\n  - key: ''\n", 3, 10, "descriptor has empty key"},
    {"missing_key", "domain: d\ndescriptors:\n  - value: v\n    shadow_mode: true\n", 3, 5,
     "descriptor has empty key"},
    {"duplicate_composite_key",
     "domain: test-domain\n"
     "descriptors:\n"
     "  - key: key1\n"
     "    value: value1\n"
     "    descriptors:\n"
     "      - key: key2\n"
     "        rate_limit: {unit: second, requests_per_unit: 1}\n"
     "      - key: key2\n"
     "        rate_limit: {unit: minute, requests_per_unit: 1}\n",
     8, 9, "duplicate descriptor composite key 'test-domain.key1_value1.key2'"},
    {"duplicate_top_level",
     "domain: d\ndescriptors:\n  - key: a\n    value: b\n  - key: a\n"
     "    value: b\n",
     5, 5, "duplicate descriptor composite key 'd.a_b'"},
    {"unit_when_unlimited", RL("      unlimited: true\n      unit: second\n"), 6, 13,
     "should not specify rate limit unit when unlimited"},
    {"invalid_unit", RL("      unit: secnd\n      requests_per_unit: 5\n"), 5, 13,
     "invalid rate limit unit 'secnd'"},
    {"missing_unit", RL("      requests_per_unit: 5\n"), 5, 7, "invalid rate limit unit ''"},
    {"empty_replaces_entry",
     RL("      unit: second\n      name: a\n      replaces:\n        - name: \"\"\n"), 8, 11,
     "should not have an empty replaces entry"},
    {"replaces_missing_name", RL("      unit: second\n      replaces:\n        - {}\n"), 7, 11,
     "should not have an empty replaces entry"},
    {"replaces_own_name",
     RL("      unit: second\n      replaces:\n        - name: self\n      name: self\n"), 7, 11,
     "replaces should not contain name of same descriptor"},
    {"share_threshold_no_wildcard",
     "domain: d\ndescriptors:\n  - key: k\n    value: exact\n    share_threshold: true\n", 5, 22,
     "share_threshold can only be used with wildcard values"},
    {"negative_rpu", RL("      unit: second\n      requests_per_unit: -1\n"), 6, 26,
     "'requests_per_unit' must not be negative"},
    {"fractional_rpu", RL("      unit: second\n      requests_per_unit: 5.5\n"), 6, 26,
     "'requests_per_unit' must be a whole number"},
    {"rpu_too_large", RL("      unit: second\n      requests_per_unit: 4294967296\n"), 6, 26,
     "'requests_per_unit' is too large: '4294967296' (at most 4294967295)"},
    {"rpu_not_scalar", RL("      unit: second\n      requests_per_unit: [1]\n"), 6, 26,
     "'requests_per_unit' must be a scalar"},
    {"unknown_algorithm", RL("      unit: second\n      algorithm: token-bucket\n"), 6, 18,
     "unknown algorithm 'token-bucket' (expected one of: token_bucket, gcra"},
    {"bad_duration", RL("      window: 30x\n"), 5, 15, "window '30x' is not a duration"},
    {"zero_duration", RL("      window: 0s\n"), 5, 15, "window '0s' must be positive"},
    {"huge_duration", RL("      window: 40000d\n"), 5, 15, "is too long (at most 100 years)"},
    {"overflowing_duration", RL("      window: 99999999999999999999us\n"), 5, 15, "is too long"},
    {"window_and_unit", RL("      unit: second\n      window: 30s\n"), 6, 15,
     "specify either 'unit' or 'window', not both"},
    {"window_when_unlimited", RL("      unlimited: true\n      window: 30s\n"), 6, 15,
     "should not specify rate limit window when unlimited"},
    {"algorithm_when_unlimited", RL("      unlimited: yes\n      algorithm: gcra\n"), 6, 18,
     "'algorithm' has no effect when unlimited"},
    {"burst_not_integer", RL("      unit: second\n      algorithm: gcra\n      burst: lots\n"), 7,
     14, "'burst' must be a whole number"},
    {"burst_on_fixed_window", RL("      unit: second\n      burst: 5\n"), 6, 14,
     "'burst' does not apply to fixed_window"},
    {"warmup_on_gcra", RL("      unit: second\n      algorithm: gcra\n      warmup: 30s\n"), 7, 15,
     "'warmup' only applies to token_bucket, not gcra"},
    {"warmup_on_default", RL("      unit: second\n      warmup: 30s\n"), 6, 15,
     "'warmup' only applies to token_bucket, not fixed_window"},
    {"warmup_zero", RL("      unit: second\n      algorithm: token_bucket\n      warmup: 0s\n"), 7,
     15, "warmup '0s' must be positive"},
    {"warmup_too_long",
     RL("      unit: second\n      algorithm: token_bucket\n      warmup: 25h\n"), 7, 15,
     "warmup '25h' must be at most 1 day"},
    {"warmup_when_unlimited", RL("      unlimited: true\n      warmup: 30s\n"), 6, 15,
     "'warmup' has no effect when unlimited"},
    {"cold_factor_alone",
     RL("      unit: second\n      algorithm: token_bucket\n      cold_factor: 3\n"), 7, 20,
     "'cold_factor' needs 'warmup'"},
    {"cold_factor_zero",
     RL("      unit: second\n      algorithm: token_bucket\n      warmup: 1m\n      cold_factor: "
        "0\n"),
     8, 20, "cold_factor must be from 1 to 100"},
    {"cold_factor_too_large",
     RL("      unit: second\n      algorithm: token_bucket\n      warmup: 1m\n      cold_factor: "
        "101\n"),
     8, 20, "'cold_factor' is too large: '101' (at most 100)"},
    {"adaptive_unknown_controller",
     RL("      unit: minute\n      requests_per_unit: 20\n      algorithm: concurrency\n      "
        "adaptive: {controller: pid}\n"),
     8, 30, "unknown adaptive controller 'pid' (expected aimd, vegas or gradient)"},
    {"adaptive_without_controller",
     RL("      unit: minute\n      requests_per_unit: 20\n      algorithm: concurrency\n      "
        "adaptive: {min: 2}\n"),
     8, 17, "adaptive needs a 'controller' (aimd, vegas or gradient)"},
    {"adaptive_not_a_mapping",
     RL("      unit: minute\n      requests_per_unit: 20\n      algorithm: concurrency\n      "
        "adaptive: gradient\n"),
     8, 17, "'adaptive' must be a mapping"},
    {"adaptive_on_a_bucket",
     RL("      unit: second\n      algorithm: token_bucket\n      adaptive: {controller: aimd}\n"),
     7, 17, "'adaptive' only applies to concurrency, not token_bucket"},
    {"adaptive_field_of_another",
     RL("      unit: minute\n      requests_per_unit: 20\n      algorithm: concurrency\n      "
        "adaptive: {controller: aimd, tolerance: 1.5}\n"),
     8, 47, "adaptive 'tolerance' does not apply to the aimd controller"},
    {"adaptive_min_above_max",
     RL("      unit: minute\n      requests_per_unit: 20\n      algorithm: concurrency\n      "
        "adaptive: {controller: vegas, min: 30}\n"),
     8, 17, "adaptive min 30 is above requests_per_unit 20"},
    {"adaptive_initial_out_of_range",
     RL("      unit: minute\n      requests_per_unit: 20\n      algorithm: concurrency\n      "
        "adaptive: {controller: vegas, initial: 1, min: 2}\n"),
     8, 17, "adaptive initial 1 must be from min 2 to requests_per_unit 20"},
    {"adaptive_bad_smoothing",
     RL("      unit: minute\n      requests_per_unit: 20\n      algorithm: concurrency\n      "
        "adaptive: {controller: gradient, smoothing: 1.5}\n"),
     8, 51, "adaptive smoothing '1.5' must be a number above 0 and at most 1"},
    {"adaptive_junk_decimal",
     RL("      unit: minute\n      requests_per_unit: 20\n      algorithm: concurrency\n      "
        "adaptive: {controller: gradient, tolerance: 1e3}\n"),
     8, 51, "adaptive tolerance '1e3' must be a number from 1 and at most 10"},
    {"adaptive_bad_window",
     RL("      unit: minute\n      requests_per_unit: 20\n      algorithm: concurrency\n      "
        "adaptive: {controller: gradient, window: 2h}\n"),
     8, 48, "adaptive window '2h' must be from 1us to 1h"},
    {"adaptive_bad_jitter",
     RL("      unit: minute\n      requests_per_unit: 20\n      algorithm: concurrency\n      "
        "adaptive: {controller: gradient, probe_jitter: 2.5%}\n"),
     8, 54, "adaptive probe_jitter '2.5%' must be a whole percentage from 0% to 100%"},
    {"adaptive_vegas_beta",
     RL("      unit: minute\n      requests_per_unit: 20\n      algorithm: concurrency\n      "
        "adaptive: {controller: vegas, alpha: 5, beta: 4}\n"),
     8, 53, "adaptive beta must be at least alpha"},
    {"adaptive_limit_too_large",
     RL("      unit: minute\n      requests_per_unit: 70000\n      algorithm: concurrency\n      "
        "adaptive: {controller: aimd}\n"),
     8, 17, "an adaptive limit's requests_per_unit (its most) must be from 1 to 65536"},
    {"sub_windows_on_bucket",
     RL("      unit: second\n      algorithm: token_bucket\n      sub_windows: 4\n"), 7, 20,
     "'sub_windows' only applies to sliding_window_counter"},
    {"compile_range",
     RL("      unit: second\n      requests_per_unit: 70000\n      algorithm: "
        "sliding_window_log\n"),
     5, 7, "limit not accepted: value out of the supported range (sliding_window_log"},
    {"compile_sub_windows",
     RL("      window: 1s\n      requests_per_unit: 10\n      algorithm: "
        "sliding_window_counter\n      sub_windows: 7\n"),
     5, 7, "limit not accepted: invalid argument"},
    {"bad_failure_mode", RL("      unit: second\n      failure_mode: open\n"), 6, 21,
     "invalid failure_mode 'open' (expected allow, deny or local)"},
    {"bad_count_rejected", RL("      unit: second\n      count_rejected: maybe\n"), 6, 23,
     "'count_rejected' must be true or false: 'maybe'"},
    {"bad_flag", "domain: d\ndescriptors:\n  - key: k\n    shadow_mode: 2\n", 4, 18,
     "'shadow_mode' must be true or false"},
    {"rate_limit_and_rate_limits",
     "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second}\n"
     "    rate_limits: []\n",
     5, 5, "use either 'rate_limit' or 'rate_limits', not both"},
    {"rate_limits_not_list",
     "domain: d\ndescriptors:\n  - key: k\n    rate_limits: {unit: second}\n", 4, 18,
     "'rate_limits' must be a list"},
    {"rate_limit_not_mapping", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: 5/s\n", 4, 17,
     "'rate_limit' must be a mapping"},
    {"alias", "domain: &d x\ndescriptors:\n  - key: *d\n", 3, 10, "YAML aliases are not supported"},
    {"alias_key", "domain: x\ndescriptors:\n  - &k key: a\n    *k : b\n", 4, 5,
     "YAML aliases are not supported"},
    {"two_documents", "domain: a\n---\ndomain: b\n", 2, 1,
     "a rule file must hold one YAML document"},
    {"syntax_error", "domain: d\n  x: 1\n", 2, 4,
     "YAML syntax error: mapping values are not allowed in this context"},
    {"syntax_error_quote", "domain: \"abc\n", 2, 1,
     "YAML syntax error: while scanning a quoted scalar found unexpected end of stream"},
    {"syntax_error_tab", "domain: d\ndescriptors:\n\t- key: k\n", 3, 1, "YAML syntax error"},
    {"invalid_utf8", "domain: d\ndescriptors:\n  - key: ab\xff\n", 3, 12,
     "YAML syntax error: invalid leading UTF-8 octet (byte 255 at offset 34)"},
    {"descriptors_not_list", "domain: d\ndescriptors: 5\n", 2, 14, "'descriptors' must be a list"},
    {"descriptor_not_mapping", "domain: d\ndescriptors:\n  - hello\n", 3, 5,
     "'a descriptor' must be a mapping"},
    {"top_not_mapping", "- domain\n", 1, 1,
     "a rule file must be a mapping with 'domain' and 'descriptors'"},
    {"duplicate_mapping_key", "domain: a\ndomain: b\n", 2, 1, "duplicate key 'domain'"},
    {"key_not_string", "domain: d\ndescriptors:\n  - key: [a]\n", 3, 10, "'key' must be a string"},
    {"nul_in_key", "domain: d\ndescriptors:\n  - key: \"a\\0b\"\n", 3, 10,
     "'key' must not contain a NUL character"},
    {"metadata_not_mapping", "domain: d\ndescriptors:\n  - key: k\n    metadata: 5\n", 4, 15,
     "'metadata' must be a mapping"},
};

static void run_err_case(void **state)
{
    const err_case *c = *state;
    expect_error(c->yaml, c->line, c->col, c->msg);
}

/* -------------------------------------------------------- upstream examples */

static const weir_rule_limit *only_limit(const weir_rule *n)
{
    assert_int_equal(weir_rule_limit_count(n), 1);
    return weir_rule_limit_at(n, 0);
}

static void upstream_mongo_cps(void **unused)
{
    (void)unused;
    weir_rules *r = load_ok("domain: mongo_cps\n"
                            "descriptors:\n"
                            "  - key: database\n"
                            "    value: users\n"
                            "    rate_limit:\n"
                            "      unit: second\n"
                            "      requests_per_unit: 500\n"
                            "\n"
                            "  - key: database\n"
                            "    value: default\n"
                            "    rate_limit:\n"
                            "      unit: second\n"
                            "      requests_per_unit: 500\n");
    assert_int_equal(weir_rules_domain_count(r), 1);
    assert_int_equal(weir_rules_rule_count(r), 2);
    assert_int_equal(weir_rules_limit_count(r), 2);
    const weir_rules_domain *d = weir_rules_find_domain(r, "mongo_cps");
    assert_ptr_equal(d, weir_rules_domain_at(r, 0));
    assert_null(weir_rules_find_domain(r, "other"));
    assert_string_equal(weir_rules_domain_name(d), "mongo_cps");
    assert_int_equal(weir_rules_domain_rule_count(d), 2);
    const weir_rule *users = weir_rules_domain_rule(d, 0);
    assert_string_equal(weir_rule_key(users), "database");
    assert_string_equal(weir_rule_value(users), "users");
    assert_false(weir_rule_is_wildcard(users));
    assert_int_equal(weir_rule_child_count(users), 0);
    const weir_rule_limit *l = only_limit(users);
    assert_null(l->name);
    assert_false(l->unlimited);
    assert_int_equal(l->requests_per_unit, 500);
    assert_int_equal(l->unit, WEIR_UNIT_SECOND);
    assert_int_equal(l->window_us, S);
    assert_int_equal(l->algorithm, WEIR_ALGO_FIXED_WINDOW);
    assert_int_equal(l->failure_mode, WEIR_FAILURE_ALLOW);
    assert_false(l->count_rejected);
    assert_int_equal(l->compiled.algorithm, WEIR_ALGO_FIXED_WINDOW);
    assert_int_equal(l->compiled.limit, 500);
    assert_int_equal(l->compiled.window_us, S);
    assert_int_equal(l->line, 6);
    assert_int_equal(l->column, 7);
    const char *file;
    uint32_t line, col;
    weir_rule_location(weir_rules_domain_rule(d, 1), &file, &line, &col);
    assert_string_equal(file, "test.yaml");
    assert_int_equal(line, 9);
    assert_int_equal(col, 5);
    assert_string_equal(weir_rule_value(weir_rules_domain_rule(d, 1)), "default");
    assert_null(weir_rules_domain_rule(d, 2));
    weir_rules_free(r);
}

static void upstream_messaging(void **unused)
{
    (void)unused;
    weir_rules *r = load_ok("---\n"
                            "domain: messaging\n"
                            "descriptors:\n"
                            "  # Only allow 5 marketing messages a day\n"
                            "  - key: message_type\n"
                            "    value: marketing\n"
                            "    descriptors:\n"
                            "      - key: to_number\n"
                            "        rate_limit:\n"
                            "          unit: day\n"
                            "          requests_per_unit: 5\n"
                            "\n"
                            "  # Only allow 100 messages a day to any unique phone number\n"
                            "  - key: to_number\n"
                            "    rate_limit:\n"
                            "      unit: day\n"
                            "      requests_per_unit: 100\n");
    const weir_rules_domain *d = weir_rules_find_domain(r, "messaging");
    assert_non_null(d);
    const weir_rule *mt = weir_rules_domain_rule(d, 0);
    assert_string_equal(weir_rule_key(mt), "message_type");
    assert_int_equal(weir_rule_limit_count(mt), 0);
    assert_int_equal(weir_rule_child_count(mt), 1);
    const weir_rule *to = weir_rule_child(mt, 0);
    assert_string_equal(weir_rule_key(to), "to_number");
    assert_null(weir_rule_value(to));
    assert_int_equal(only_limit(to)->requests_per_unit, 5);
    assert_int_equal(only_limit(to)->window_us, DAY);
    assert_null(weir_rule_child(mt, 1));
    assert_int_equal(only_limit(weir_rules_domain_rule(d, 1))->requests_per_unit, 100);
    assert_int_equal(weir_rules_rule_count(r), 3);
    weir_rules_free(r);
}

static void upstream_wildcard_unlimited_replaces_shadow(void **unused)
{
    (void)unused;
    weir_rules *r = load_ok("domain: edge_proxy_per_ip\n"
                            "descriptors:\n"
                            "  - key: remote_address\n"
                            "    rate_limit:\n"
                            "      name: per_ip\n"
                            "      unit: second\n"
                            "      requests_per_unit: 10\n"
                            "  - key: remote_address\n"
                            "    value: 50.0.0.5\n"
                            "    rate_limit:\n"
                            "      unlimited: true\n"
                            "  - key: path\n"
                            "    value: /foo/*\n"
                            "    share_threshold: true\n"
                            "    rate_limit:\n"
                            "      unit: MINUTE\n"
                            "      requests_per_unit: 20\n"
                            "      name: foo_paths\n"
                            "      replaces:\n"
                            "        - name: per_ip\n"
                            "        - name: other\n"
                            "  - key: client_id\n"
                            "    value: legacy\n"
                            "    shadow_mode: true\n"
                            "    quota_mode: True\n"
                            "    detailed_metric: yes\n"
                            "    value_to_metric: on\n"
                            "    metadata:\n"
                            "      owner: team-a\n"
                            "      tags: [x, y]\n"
                            "    rate_limit:\n"
                            "      unit: hour\n"
                            "      requests_per_unit: 0\n");
    const weir_rules_domain *d = weir_rules_domain_at(r, 0);
    const weir_rule *n = weir_rules_domain_rule(d, 1);
    const weir_rule_limit *l = only_limit(n);
    assert_true(l->unlimited);
    assert_int_equal(l->unit, WEIR_UNIT_NONE);
    assert_int_equal(l->window_us, 0);
    assert_int_equal(l->compiled.window_us, 0);
    n = weir_rules_domain_rule(d, 2);
    assert_true(weir_rule_is_wildcard(n));
    assert_int_equal(weir_rule_flags(n), WEIR_RULE_SHARE_THRESHOLD);
    l = only_limit(n);
    assert_string_equal(l->name, "foo_paths");
    assert_int_equal(l->unit, WEIR_UNIT_MINUTE);
    assert_int_equal(l->n_replaces, 2);
    assert_string_equal(l->replaces[0], "per_ip");
    assert_string_equal(l->replaces[1], "other");
    n = weir_rules_domain_rule(d, 3);
    assert_int_equal(weir_rule_flags(n), WEIR_RULE_SHADOW_MODE | WEIR_RULE_QUOTA_MODE |
                                             WEIR_RULE_DETAILED_METRIC | WEIR_RULE_VALUE_TO_METRIC);
    assert_true(weir_rule_has_metadata(n));
    assert_false(weir_rule_has_metadata(weir_rules_domain_rule(d, 0)));
    l = only_limit(n);
    assert_int_equal(l->requests_per_unit, 0); /* a ban */
    assert_int_equal(l->compiled.limit, 0);
    weir_rules_free(r);
}

static void units_case_insensitive(void **unused)
{
    (void)unused;
    static const struct {
        const char *unit;
        weir_rule_unit u;
        int64_t us;
    } want[] = {{"Second", WEIR_UNIT_SECOND, S},    {"MINUTE", WEIR_UNIT_MINUTE, 60 * S},
                {"hour", WEIR_UNIT_HOUR, 3600 * S}, {"Day", WEIR_UNIT_DAY, DAY},
                {"week", WEIR_UNIT_WEEK, 7 * DAY},  {"month", WEIR_UNIT_MONTH, 30 * DAY},
                {"YEAR", WEIR_UNIT_YEAR, 365 * DAY}};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        char yaml[200];
        snprintf(yaml, sizeof(yaml),
                 "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: %s, "
                 "requests_per_unit: 4294967295}\n",
                 want[i].unit);
        weir_rules *r = load_ok(yaml);
        const weir_rule_limit *l =
            only_limit(weir_rules_domain_rule(weir_rules_domain_at(r, 0), 0));
        assert_int_equal(l->unit, want[i].u);
        assert_int_equal(l->window_us, want[i].us);
        assert_int_equal(l->requests_per_unit, UINT32_MAX);
        assert_string_equal(weir_rule_unit_name(want[i].u),
                            want[i].unit[0] == 'S' ? "second" : weir_rule_unit_name(l->unit));
        weir_rules_free(r);
    }
    assert_null(weir_rule_unit_name(WEIR_UNIT_NONE));
}

/* ------------------------------------------------------------ extensions */

static void warmup_fields(void **unused)
{
    (void)unused;
    weir_rules *r =
        load_ok("domain: api\n"
                "descriptors:\n"
                "  - key: user\n"
                "    rate_limits:\n"
                "      - {unit: second, requests_per_unit: 100, algorithm: token_bucket,"
                " warmup: 30s}\n"
                "      - {unit: minute, requests_per_unit: 60, algorithm: token_bucket,"
                " warmup: 2m, cold_factor: 5}\n");
    const weir_rule *n = weir_rules_domain_rule(weir_rules_domain_at(r, 0), 0);
    const weir_rule_limit *a = weir_rule_limit_at(n, 0), *b = weir_rule_limit_at(n, 1);
    assert_int_equal(a->warmup_us, 30 * S);
    assert_int_equal(a->cold_factor, 0);
    assert_int_equal(a->compiled.warmup_us, 30 * S);
    assert_int_equal(a->compiled.cold_factor, WEIR_DEFAULT_COLD_FACTOR);
    assert_int_equal(b->compiled.warmup_us, 120 * S);
    assert_int_equal(b->compiled.cold_factor, 5);
    weir_rules_free(r);
}

static void extensions(void **unused)
{
    (void)unused;
    weir_rules *r = load_ok("domain: api\n"
                            "descriptors:\n"
                            "  - key: user\n"
                            "    rate_limits:\n"
                            "      - unit: second\n"
                            "        requests_per_unit: 10\n"
                            "        algorithm: token_bucket\n"
                            "        burst: 20\n"
                            "      - {unit: day, requests_per_unit: 1000, name: daily,"
                            " failure_mode: deny, count_rejected: true}\n"
                            "  - key: ip\n"
                            "    rate_limit:\n"
                            "      window: 1m\n"
                            "      requests_per_unit: 600\n"
                            "      algorithm: Sliding_Window_Counter\n"
                            "      sub_windows: 6\n"
                            "  - key: path\n"
                            "    rate_limit: {window: 1h30m, requests_per_unit: 5, algorithm: "
                            "gcra, failure_mode: ALLOW}\n"
                            "  - key: empty\n"
                            "    rate_limits: []\n");
    const weir_rules_domain *d = weir_rules_domain_at(r, 0);
    const weir_rule *n = weir_rules_domain_rule(d, 0);
    assert_int_equal(weir_rule_limit_count(n), 2);
    const weir_rule_limit *a = weir_rule_limit_at(n, 0), *b = weir_rule_limit_at(n, 1);
    assert_null(weir_rule_limit_at(n, 2));
    assert_int_equal(a->algorithm, WEIR_ALGO_TOKEN_BUCKET);
    assert_int_equal(a->burst, 20);
    assert_int_equal(a->compiled.burst, 20);
    assert_int_equal(a->line, 5);
    assert_int_equal(a->column, 9);
    assert_string_equal(b->name, "daily");
    assert_int_equal(b->window_us, DAY);
    assert_int_equal(b->failure_mode, WEIR_FAILURE_DENY);
    assert_true(b->count_rejected);
    assert_int_equal(b->algorithm, WEIR_ALGO_FIXED_WINDOW);
    const weir_rule_limit *c = only_limit(weir_rules_domain_rule(d, 1));
    assert_int_equal(c->unit, WEIR_UNIT_NONE);
    assert_int_equal(c->window_us, 60 * S);
    assert_int_equal(c->algorithm, WEIR_ALGO_SLIDING_COUNTER);
    assert_int_equal(c->compiled.sub_windows, 6);
    const weir_rule_limit *p = only_limit(weir_rules_domain_rule(d, 2));
    assert_int_equal(p->window_us, 5400 * S);
    assert_int_equal(p->algorithm, WEIR_ALGO_GCRA);
    assert_int_equal(weir_rule_limit_count(weir_rules_domain_rule(d, 3)), 0);
    assert_int_equal(weir_rules_limit_count(r), 4);
    weir_rules_free(r);
}

static void failure_modes_and_local_share(void **unused)
{
    (void)unused;
    const char *yaml = "domain: d\n"
                       "descriptors:\n"
                       "  - key: a\n"
                       "    rate_limit: {unit: second, requests_per_unit: 100, failure_mode: "
                       "local, local_share: 0.25}\n"
                       "  - key: b\n"
                       "    rate_limit: {unit: second, requests_per_unit: 100, local_share: 5%}\n"
                       "  - key: c\n"
                       "    rate_limit: {unit: second, requests_per_unit: 100, failure_mode: "
                       "deny, local_share: 1, over_limit_cache: false}\n";
    weir_rules *r = load_ok(yaml);
    const weir_rules_domain *d = weir_rules_domain_at(r, 0);
    const weir_rule_limit *a = only_limit(weir_rules_domain_rule(d, 0));
    const weir_rule_limit *b = only_limit(weir_rules_domain_rule(d, 1));
    const weir_rule_limit *c = only_limit(weir_rules_domain_rule(d, 2));
    assert_int_equal(a->failure_mode, WEIR_FAILURE_LOCAL);
    assert_int_equal(a->local_share_ppm, 250000);
    assert_int_equal(b->failure_mode, WEIR_FAILURE_ALLOW);
    assert_int_equal(b->local_share_ppm, 50000);
    assert_int_equal(c->failure_mode, WEIR_FAILURE_DENY);
    assert_int_equal(c->local_share_ppm, 1000000);
    assert_true(c->no_local_cache);
    assert_false(a->no_local_cache);
    weir_rules_free(r);
    /* the load's default for limits that name none */
    weir_rules_options o = {sizeof(o), false, 0, 0, 0, WEIR_FAILURE_LOCAL, false, NULL, 0};
    r = load_ok_opts(yaml, &o);
    d = weir_rules_domain_at(r, 0);
    assert_int_equal(only_limit(weir_rules_domain_rule(d, 1))->failure_mode, WEIR_FAILURE_LOCAL);
    assert_int_equal(only_limit(weir_rules_domain_rule(d, 2))->failure_mode, WEIR_FAILURE_DENY);
    weir_rules_free(r);
    static const char *const bad[] = {"0", "1.5", "0.0000001", "-1", "abc", "25", "101%", "0%"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char yaml_text[256];
        snprintf(yaml_text, sizeof(yaml_text),
                 "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
                 "local_share: \"%s\"}\n",
                 bad[i]);
        weir_rules *none = NULL;
        assert_int_not_equal(parse_opts(yaml_text, strlen(yaml_text), NULL, &none), WEIR_OK);
        assert_null(none);
        if (n_errs != 1 || !strstr(errs[0].message, "local_share"))
            fail_msg("local_share %s: %zu errors (%s)", bad[i], n_errs,
                     n_errs ? errs[0].message : "");
    }
}

/* sync: local and its interval; what cannot be synced is refused */
static void sync_local(void **unused)
{
    (void)unused;
    const char *yaml = "domain: d\n"
                       "descriptors:\n"
                       "  - key: a\n"
                       "    rate_limit: {unit: second, requests_per_unit: 100, sync: local}\n"
                       "  - key: b\n"
                       "    rate_limit: {unit: second, requests_per_unit: 100, sync: local, "
                       "sync_interval: 10ms}\n"
                       "  - key: c\n"
                       "    rate_limit: {unit: second, requests_per_unit: 100, sync: global}\n";
    weir_rules *r = load_ok(yaml);
    const weir_rules_domain *d = weir_rules_domain_at(r, 0);
    assert_int_equal(only_limit(weir_rules_domain_rule(d, 0))->sync_interval_us, 100000);
    assert_int_equal(only_limit(weir_rules_domain_rule(d, 1))->sync_interval_us, 10000);
    assert_int_equal(only_limit(weir_rules_domain_rule(d, 2))->sync_interval_us, 0);
    weir_rules_free(r);
    static const struct {
        const char *limit, *says;
    } bad[] = {
        {"unit: second, requests_per_unit: 1, sync: sometimes", "invalid sync"},
        {"unit: second, requests_per_unit: 1, sync_interval: 1s", "needs 'sync: local'"},
        {"unit: second, requests_per_unit: 1, sync: local, sync_interval: 0.5ms", "from 1ms"},
        {"unit: second, requests_per_unit: 1, sync: local, sync_interval: 2m", "from 1ms"},
        {"unit: second, requests_per_unit: 1, sync: local, sync_interval: soon", "sync_interval"},
        {"unit: second, requests_per_unit: 1, algorithm: concurrency, sync: local", "concurrency"},
        {"unlimited: true, sync: local", "no effect when unlimited"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char yaml_text[256];
        snprintf(yaml_text, sizeof(yaml_text),
                 "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {%s}\n", bad[i].limit);
        weir_rules *none = NULL;
        assert_int_not_equal(parse_opts(yaml_text, strlen(yaml_text), NULL, &none), WEIR_OK);
        assert_null(none);
        if (n_errs < 1 || !strstr(errs[0].message, bad[i].says))
            fail_msg("%s: %zu errors (%s)", bad[i].limit, n_errs, n_errs ? errs[0].message : "");
    }
}

static void durations(void **unused)
{
    (void)unused;
    static const struct {
        const char *text;
        int64_t us;
    } want[] = {{"500ms", 500000},
                {"30s", 30 * S},
                {"5m", 300 * S},
                {"1h", 3600 * S},
                {"2d", 2 * DAY},
                {"1w", 7 * DAY},
                {"250us", 250},
                {"1m30s", 90 * S},
                {"36500d", 36500 * DAY},
                /* the one grammar of weir/units.h: fractions, bare seconds */
                {"1.5s", 1500000},
                {"30", 30 * S}};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        char yaml[200];
        snprintf(yaml, sizeof(yaml),
                 "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {window: %s, "
                 "requests_per_unit: 1, algorithm: token_bucket}\n",
                 want[i].text);
        weir_rules *r = load_ok(yaml);
        assert_int_equal(
            only_limit(weir_rules_domain_rule(weir_rules_domain_at(r, 0), 0))->window_us,
            want[i].us);
        weir_rules_free(r);
    }
}

static void default_algorithm_option(void **unused)
{
    (void)unused;
    weir_rules_options o = {.size = sizeof(o), .default_algorithm = WEIR_ALGO_GCRA};
    weir_rules *r = load_ok_opts("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: "
                                 "second, requests_per_unit: 3, burst: 2}\n",
                                 &o);
    const weir_rule_limit *l = only_limit(weir_rules_domain_rule(weir_rules_domain_at(r, 0), 0));
    assert_int_equal(l->algorithm, WEIR_ALGO_GCRA);
    assert_int_equal(l->compiled.burst, 2);
    weir_rules_free(r);

    o.default_algorithm = (weir_algorithm)99;
    assert_int_equal(parse_opts("domain: d\n", 10, &o, &r), WEIR_EINVAL);
    o.size = 4;
    o.default_algorithm = 0;
    assert_int_equal(parse_opts("domain: d\n", 10, &o, &r), WEIR_EINVAL);
}

static void quirks(void **unused)
{
    (void)unused;
    /* anchors without aliases are fine, nulls are absent, an explicit
     * document end is fine, flow style works */
    weir_rules *r = load_ok("domain: &dom d\n"
                            "descriptors:\n"
                            "  - key: k\n"
                            "    value: ~\n"
                            "    rate_limit:\n"
                            "    descriptors:\n"
                            "    metadata: null\n"
                            "  - {key: k, value: \"*\", rate_limit: {unit: second}}\n"
                            "...\n");
    const weir_rules_domain *d = weir_rules_domain_at(r, 0);
    const weir_rule *n = weir_rules_domain_rule(d, 0);
    assert_null(weir_rule_value(n));
    assert_int_equal(weir_rule_limit_count(n), 0);
    assert_false(weir_rule_has_metadata(n));
    n = weir_rules_domain_rule(d, 1);
    assert_true(weir_rule_is_wildcard(n));
    /* upstream's default for a missing requests_per_unit: 0, a ban */
    assert_int_equal(only_limit(n)->requests_per_unit, 0);
    weir_rules_free(r);
}

static void duplicate_pattern_values(void **unused)
{
    (void)unused;
    expect_error("domain: d\ndescriptors:\n  - {key: k, value: \"a*\"}\n  - {key: k, value: "
                 "'a*'}\n",
                 4, 5, "duplicate descriptor composite key 'd.k_a*'");
    /* the later one is reported even when the order of siblings differs */
    expect_error("domain: d\ndescriptors:\n  - {key: z}\n  - {key: a}\n  - {key: z}\n", 5, 5,
                 "duplicate descriptor composite key 'd.z'");
}

static void quirks_values(void **unused)
{
    (void)unused;
    weir_rules *r = load_ok("domain: d\n"
                            "descriptors:\n"
                            "  - key: k\n"
                            "    value: \"\"\n"
                            "  - key: a_b\n"
                            "    value: c\n"
                            "  - key: a\n"
                            "    value: b_c\n"
                            "  - key: 123\n"
                            "    value: 4.5\n");
    const weir_rules_domain *d = weir_rules_domain_at(r, 0);
    assert_null(weir_rule_value(weir_rules_domain_rule(d, 0)));
    assert_string_equal(weir_rule_key(weir_rules_domain_rule(d, 3)), "123");
    assert_string_equal(weir_rule_value(weir_rules_domain_rule(d, 3)), "4.5");
    weir_rules_free(r);
}

static void all_errors_collected(void **unused)
{
    (void)unused;
    const char *yaml = "domain: d\n"
                       "descriptors:\n"
                       "  - key: a\n"
                       "    rate_limit: {unit: parsec, requests_per_unit: 1}\n"
                       "  - key: b\n"
                       "    typo: 1\n"
                       "  - key: c\n"
                       "    rate_limit: {unit: second, requests_per_unit: -4}\n"
                       "  - key: a\n";
    weir_rules *r = NULL;
    assert_int_equal(parse_opts(yaml, strlen(yaml), NULL, &r), WEIR_EPARSE);
    assert_int_equal(n_errs, 3);
    assert_int_equal(errs[0].line, 4);
    assert_non_null(strstr(errs[0].message, "invalid rate limit unit 'parsec'"));
    assert_int_equal(errs[1].line, 6);
    assert_int_equal(errs[2].line, 8);
    /* fewer slots than errors: the count is still complete */
    weir_rules_error one[1];
    size_t n = 0;
    assert_int_equal(weir_rules_parse(ctx, NULL, yaml, strlen(yaml), NULL, &r, one, 1, &n),
                     WEIR_EPARSE);
    assert_int_equal(n, 3);
    assert_string_equal(one[0].file, "<memory>");
    assert_int_equal(weir_rules_parse(ctx, NULL, yaml, strlen(yaml), NULL, &r, NULL, 0, NULL),
                     WEIR_EPARSE);
    assert_int_equal(weir_rules_parse(ctx, NULL, yaml, 3, NULL, &r, NULL, 1, NULL), WEIR_EINVAL);
    assert_int_equal(weir_rules_parse(NULL, NULL, yaml, 3, NULL, &r, NULL, 0, NULL), WEIR_EINVAL);
    assert_int_equal(weir_rules_parse(ctx, NULL, NULL, 3, NULL, &r, NULL, 0, NULL), WEIR_EINVAL);
    assert_int_equal(weir_rules_parse(ctx, NULL, yaml, 3, NULL, NULL, NULL, 0, NULL), WEIR_EINVAL);
    weir_rules_free(NULL);
    assert_int_equal(weir_rules_domain_count(NULL), 0);
    assert_null(weir_rule_key(NULL));
}

/* ------------------------------------------------------------------ caps */

static char *nested(unsigned depth)
{
    text t = {0};
    addf(&t, "domain: deep\ndescriptors:\n");
    for (unsigned i = 0; i < depth; i++) {
        addf(&t, "%*s- key: k%u\n", (int)(i * 4), "", i);
        if (i + 1 < depth)
            addf(&t, "%*s  descriptors:\n", (int)(i * 4), "");
    }
    return t.p;
}

static void cap_depth(void **unused)
{
    (void)unused;
    char *ok = nested(WEIR_RULES_MAX_DEPTH);
    weir_rules *r = load_ok(ok);
    const weir_rule *n = weir_rules_domain_rule(weir_rules_domain_at(r, 0), 0);
    unsigned levels = 1;
    while (weir_rule_child_count(n)) {
        n = weir_rule_child(n, 0);
        levels++;
    }
    assert_int_equal(levels, WEIR_RULES_MAX_DEPTH);
    weir_rules_free(r);
    free(ok);
    char *bad = nested(WEIR_RULES_MAX_DEPTH + 1);
    /* the 33rd level's list starts at its first "- key:", on line 3 + 2*32
     * and indented 4*32 */
    expect_error(bad, 3 + 2 * WEIR_RULES_MAX_DEPTH, 4 * WEIR_RULES_MAX_DEPTH + 1,
                 "descriptors nested deeper than 32 levels");
    free(bad);
}

static char *with_key(size_t len)
{
    text t = {0};
    addf(&t, "domain: d\ndescriptors:\n  - key: ");
    for (size_t i = 0; i < len; i++)
        addf(&t, "x");
    addf(&t, "\n");
    return t.p;
}

static void cap_string_length(void **unused)
{
    (void)unused;
    char *ok = with_key(WEIR_RULES_MAX_STRING_BYTES);
    weir_rules *r = load_ok(ok);
    assert_int_equal(strlen(weir_rule_key(weir_rules_domain_rule(weir_rules_domain_at(r, 0), 0))),
                     WEIR_RULES_MAX_STRING_BYTES);
    weir_rules_free(r);
    free(ok);
    char *bad = with_key(WEIR_RULES_MAX_STRING_BYTES + 1);
    expect_error(bad, 3, 10, "'key' is longer than 1024 bytes");
    free(bad);
}

static char *many_limits(unsigned n)
{
    text t = {0};
    addf(&t, "domain: d\ndescriptors:\n  - key: k\n    rate_limits:\n");
    for (unsigned i = 0; i < n; i++)
        addf(&t, "      - {unit: second, requests_per_unit: %u}\n", i);
    return t.p;
}

static void cap_limits_per_rule(void **unused)
{
    (void)unused;
    char *ok = many_limits(WEIR_RULES_MAX_LIMITS_PER_RULE);
    weir_rules *r = load_ok(ok);
    assert_int_equal(weir_rules_limit_count(r), WEIR_RULES_MAX_LIMITS_PER_RULE);
    weir_rules_free(r);
    free(ok);
    char *bad = many_limits(WEIR_RULES_MAX_LIMITS_PER_RULE + 1);
    expect_error(bad, 5 + WEIR_RULES_MAX_LIMITS_PER_RULE, 9,
                 "more than 64 entries in 'rate_limits'");
    free(bad);
}

static char *flat(unsigned n, bool with_limit)
{
    text t = {0};
    addf(&t, "domain: d\ndescriptors:\n");
    for (unsigned i = 0; i < n; i++) {
        if (with_limit)
            addf(&t, "  - {key: k%u, rate_limit: {unit: second, requests_per_unit: %u}}\n", i, i);
        else
            addf(&t, "  - {key: k%u}\n", i);
    }
    return t.p;
}

static void cap_descriptors_and_limits_options(void **unused)
{
    (void)unused;
    weir_rules_options o = {.size = sizeof(o), .max_descriptors = 10, .max_limits = 5};
    char *ten = flat(10, false);
    weir_rules *r = load_ok_opts(ten, &o);
    assert_int_equal(weir_rules_rule_count(r), 10);
    weir_rules_free(r);
    free(ten);
    char *eleven = flat(11, false);
    weir_rules_error e[2];
    size_t n;
    assert_int_equal(weir_rules_parse(ctx, "x", eleven, strlen(eleven), &o, &r, e, 2, &n),
                     WEIR_EPARSE);
    assert_int_equal(n, 1);
    assert_int_equal(e[0].line, 13);
    assert_int_equal(e[0].column, 5);
    assert_non_null(strstr(e[0].message, "more than 10 descriptors in all"));
    free(eleven);
    char *five = flat(5, true);
    r = load_ok_opts(five, &o);
    assert_int_equal(weir_rules_limit_count(r), 5);
    weir_rules_free(r);
    free(five);
    char *six = flat(6, true);
    assert_int_equal(weir_rules_parse(ctx, "x", six, strlen(six), &o, &r, e, 2, &n), WEIR_EPARSE);
    assert_int_equal(n, 1);
    assert_int_equal(e[0].line, 8);
    assert_int_equal(e[0].column, 27);
    assert_non_null(strstr(e[0].message, "more than 5 limits in all"));
    free(six);
}

static void cap_file_size(void **unused)
{
    (void)unused;
    size_t cap = WEIR_RULES_MAX_FILE_BYTES;
    char *buf = malloc(cap + 1);
    assert_non_null(buf);
    const char *head = "domain: big\n#";
    memcpy(buf, head, strlen(head));
    memset(buf + strlen(head), 'x', cap - strlen(head) - 1);
    buf[cap - 1] = '\n';
    buf[cap] = '\n';
    weir_rules *r = NULL;
    weir_status st = parse_opts(buf, cap, NULL, &r);
    if (st != WEIR_OK)
        print_errors();
    assert_int_equal(st, WEIR_OK);
    weir_rules_free(r);
    expect_error_len(buf, cap + 1, 0, 0, "file is larger than 16777216 bytes");
    free(buf);
}

/* -------------------------------------------------------- out of memory */

static void out_of_memory_everywhere(void **unused)
{
    (void)unused;
    const char *yaml = "domain: d\n"
                       "descriptors:\n"
                       "  - key: a\n"
                       "    value: v\n"
                       "    descriptors:\n"
                       "      - key: b\n"
                       "        rate_limits:\n"
                       "          - {unit: second, requests_per_unit: 1, name: x}\n"
                       "          - {window: 5m, requests_per_unit: 9, replaces: [{name: y}]}\n"
                       "  - key: c\n";
    int64_t before = ca.live_blocks;
    bool succeeded = false;
    for (int fail = 1; fail < 200 && !succeeded; fail++) {
        ca.fail_after = fail;
        weir_rules *r = NULL;
        weir_status st = weir_rules_parse(ctx, "m", yaml, strlen(yaml), NULL, &r, NULL, 0, NULL);
        ca.fail_after = 0;
        if (st == WEIR_OK) {
            succeeded = true;
            assert_int_equal(weir_rules_rule_count(r), 3);
            weir_rules_free(r);
        } else {
            assert_int_equal(st, WEIR_ENOMEM);
        }
        assert_int_equal(ca.live_blocks, before);
    }
    assert_true(succeeded);
}

/* ------------------------------------------------------------ directories */

static char tmpdir[256];

static void write_file(const char *rel, const char *content)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", tmpdir, rel);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(content, f);
    fclose(f);
}

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/weir-rules-XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
}

static void remove_tmpdir(void)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    assert_int_equal(system(cmd), 0);
}

static weir_status load_path(const char *path, const weir_rules_options *o, weir_rules **r)
{
    memset(errs, 0, sizeof(errs));
    n_errs = 0;
    return weir_rules_load(ctx, path, o, r, errs, MAX_ERRS, &n_errs);
}

static void directory_configmap_layout(void **unused)
{
    (void)unused;
    make_tmpdir();
    char path[512];
    /* Kubernetes: real files in a timestamped dot-dir, "..data" points at
     * it, and the visible names are symlinks through "..data". */
    snprintf(path, sizeof(path), "%s/..2024_01_01_00_00_00.1", tmpdir);
    assert_int_equal(mkdir(path, 0700), 0);
    write_file("..2024_01_01_00_00_00.1/b.yaml", "domain: beta\ndescriptors:\n  - key: k\n");
    write_file("..2024_01_01_00_00_00.1/a.yml", "domain: alpha\n");
    snprintf(path, sizeof(path), "%s/..data", tmpdir);
    assert_int_equal(symlink("..2024_01_01_00_00_00.1", path), 0);
    snprintf(path, sizeof(path), "%s/b.yaml", tmpdir);
    assert_int_equal(symlink("..data/b.yaml", path), 0);
    snprintf(path, sizeof(path), "%s/a.yml", tmpdir);
    assert_int_equal(symlink("..data/a.yml", path), 0);
    /* ignored: dot-files, swap files, other suffixes, subdirectories */
    write_file(".hidden.yaml", "this: is not loaded\n");
    write_file(".b.yaml.swp", "garbage: [\n");
    write_file("README.md", "not yaml: [\n");
    write_file("notes.yaml.bak", "not loaded\n");
    snprintf(path, sizeof(path), "%s/sub.yaml", tmpdir);
    assert_int_equal(mkdir(path, 0700), 0);

    weir_rules *r = NULL;
    weir_status st = load_path(tmpdir, NULL, &r);
    if (st != WEIR_OK)
        print_errors();
    assert_int_equal(st, WEIR_OK);
    assert_int_equal(weir_rules_domain_count(r), 2);
    /* name order: a.yml, then b.yaml */
    assert_string_equal(weir_rules_domain_name(weir_rules_domain_at(r, 0)), "alpha");
    const weir_rules_domain *b = weir_rules_domain_at(r, 1);
    assert_string_equal(weir_rules_domain_name(b), "beta");
    const char *file;
    weir_rule_location(weir_rules_domain_rule(b, 0), &file, NULL, NULL);
    snprintf(path, sizeof(path), "%s/b.yaml", tmpdir);
    assert_string_equal(file, path);
    weir_rules_free(r);

    /* a single file is loaded whatever its name */
    snprintf(path, sizeof(path), "%s/README.md", tmpdir);
    assert_int_equal(load_path(path, NULL, &r), WEIR_EPARSE);
    assert_string_equal(errs[0].file, path);
    assert_int_equal(errs[0].line, 1);
    assert_int_equal(errs[0].column, 1);
    assert_string_equal(errs[0].message, "unknown key 'not yaml'");
    remove_tmpdir();
}

static void directory_merge_domains(void **unused)
{
    (void)unused;
    make_tmpdir();
    write_file("1.yaml", "domain: shared\ndescriptors:\n  - key: a\n");
    write_file("2.yaml", "# second half\ndomain: shared\ndescriptors:\n  - key: b\n");
    weir_rules *r = NULL;
    assert_int_equal(load_path(tmpdir, NULL, &r), WEIR_EPARSE);
    assert_int_equal(n_errs, 1);
    char path[512];
    snprintf(path, sizeof(path), "%s/2.yaml", tmpdir);
    assert_string_equal(errs[0].file, path);
    assert_int_equal(errs[0].line, 2);
    assert_int_equal(errs[0].column, 9);
    assert_string_equal(errs[0].message, "duplicate domain 'shared' in config file");

    weir_rules_options o = {.size = sizeof(o), .merge_domains = true};
    assert_int_equal(load_path(tmpdir, &o, &r), WEIR_OK);
    assert_int_equal(weir_rules_domain_count(r), 1);
    const weir_rules_domain *d = weir_rules_domain_at(r, 0);
    assert_int_equal(weir_rules_domain_rule_count(d), 2);
    assert_string_equal(weir_rule_key(weir_rules_domain_rule(d, 0)), "a");
    assert_string_equal(weir_rule_key(weir_rules_domain_rule(d, 1)), "b");
    weir_rules_free(r);

    /* merged domains still refuse duplicate rules across files */
    write_file("3.yaml", "domain: shared\ndescriptors:\n  - key: a\n");
    assert_int_equal(load_path(tmpdir, &o, &r), WEIR_EPARSE);
    snprintf(path, sizeof(path), "%s/3.yaml", tmpdir);
    assert_string_equal(errs[0].file, path);
    assert_int_equal(errs[0].line, 3);
    assert_int_equal(errs[0].column, 5);
    assert_non_null(strstr(errs[0].message, "duplicate descriptor composite key 'shared.a'"));
    remove_tmpdir();
}

static void directory_errors_and_caps(void **unused)
{
    (void)unused;
    weir_rules *r = NULL;
    assert_int_equal(load_path("/nonexistent/weir/rules", NULL, &r), WEIR_EIO);
    assert_int_equal(n_errs, 1);
    assert_int_equal(errs[0].line, 0);
    assert_non_null(strstr(errs[0].message, "cannot open"));
    assert_int_equal(weir_rules_load(ctx, NULL, NULL, &r, NULL, 0, NULL), WEIR_EINVAL);

    make_tmpdir();
    /* every bad file is reported, not just the first */
    write_file("a.yaml", "domain: a\nbogus: 1\n");
    write_file("b.yaml", "domain: b\ndescriptors:\n  - key: \"\"\n");
    char path[512];
    snprintf(path, sizeof(path), "%s/c.yaml", tmpdir);
    assert_int_equal(symlink("missing.yaml", path), 0); /* dangling */
    assert_int_equal(load_path(tmpdir, NULL, &r), WEIR_EIO);
    assert_int_equal(n_errs, 3);
    assert_non_null(strstr(errs[0].message, "unknown key 'bogus'"));
    assert_non_null(strstr(errs[1].message, "descriptor has empty key"));
    assert_non_null(strstr(errs[2].message, "cannot open"));
    remove_tmpdir();

    /* the file-count cap, at its edge */
    make_tmpdir();
    for (unsigned i = 0; i < WEIR_RULES_MAX_FILES; i++) {
        char name[64], body[64];
        snprintf(name, sizeof(name), "f%05u.yaml", i);
        snprintf(body, sizeof(body), "domain: d%u\n", i);
        write_file(name, body);
    }
    assert_int_equal(load_path(tmpdir, NULL, &r), WEIR_OK);
    assert_int_equal(weir_rules_domain_count(r), WEIR_RULES_MAX_FILES);
    weir_rules_free(r);
    write_file("one-too-many.yml", "domain: extra\n");
    assert_int_equal(load_path(tmpdir, NULL, &r), WEIR_EPARSE);
    assert_int_equal(n_errs, 1);
    assert_string_equal(errs[0].file, tmpdir);
    assert_non_null(strstr(errs[0].message, "directory holds more than 4096 rule files"));
    remove_tmpdir();
}

/* ------------------------------------------------------------ scale */

static void ten_thousand_rules(void **unused)
{
    (void)unused;
    text t = {0};
    addf(&t, "domain: scale\ndescriptors:\n");
    for (unsigned i = 0; i < 1000; i++) {
        addf(&t,
             "  - key: tenant\n    value: t%u\n    rate_limit:\n      unit: minute\n"
             "      requests_per_unit: %u\n    descriptors:\n",
             i, 100 + i);
        for (unsigned j = 0; j < 9; j++)
            addf(&t,
                 "      - key: path\n        value: /api/v%u/*\n        rate_limits:\n"
                 "          - {unit: second, requests_per_unit: 10}\n"
                 "          - {window: 30s, requests_per_unit: 200, algorithm: gcra}\n",
                 j);
    }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    weir_rules *r = load_ok(t.p);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
    printf("loaded %zu rules, %zu limits (%zu bytes of YAML) in %.1f ms\n",
           weir_rules_rule_count(r), weir_rules_limit_count(r), t.len, ms);
    assert_int_equal(weir_rules_rule_count(r), 10000);
    assert_int_equal(weir_rules_limit_count(r), 19000);
    weir_rules_free(r);
    free(t.p);
}

int main(void)
{
    static const struct CMUnitTest fixed[] = {
        cmocka_unit_test(upstream_mongo_cps),
        cmocka_unit_test(upstream_messaging),
        cmocka_unit_test(upstream_wildcard_unlimited_replaces_shadow),
        cmocka_unit_test(units_case_insensitive),
        cmocka_unit_test(extensions),
        cmocka_unit_test(warmup_fields),
        cmocka_unit_test(failure_modes_and_local_share),
        cmocka_unit_test(sync_local),
        cmocka_unit_test(durations),
        cmocka_unit_test(default_algorithm_option),
        cmocka_unit_test(quirks),
        cmocka_unit_test(quirks_values),
        cmocka_unit_test(duplicate_pattern_values),
        cmocka_unit_test(all_errors_collected),
        cmocka_unit_test(cap_depth),
        cmocka_unit_test(cap_string_length),
        cmocka_unit_test(cap_limits_per_rule),
        cmocka_unit_test(cap_descriptors_and_limits_options),
        cmocka_unit_test(cap_file_size),
        cmocka_unit_test(out_of_memory_everywhere),
        cmocka_unit_test(directory_configmap_layout),
        cmocka_unit_test(directory_merge_domains),
        cmocka_unit_test(directory_errors_and_caps),
        cmocka_unit_test(ten_thousand_rules),
    };
    enum { N_FIXED = sizeof(fixed) / sizeof(fixed[0]) };
    enum { N_ERR = sizeof(err_cases) / sizeof(err_cases[0]) };
    /* One named test per row of the error table, next to the fixed ones. */
    static struct CMUnitTest tests[N_FIXED + N_ERR];
    memcpy(tests, fixed, sizeof(fixed));
    for (size_t i = 0; i < N_ERR; i++) {
        struct CMUnitTest c = {err_cases[i].name, run_err_case, NULL, NULL,
                               (void *)(uintptr_t)&err_cases[i]};
        tests[N_FIXED + i] = c;
    }
    return _cmocka_run_group_tests("rules_loader", tests, N_FIXED + N_ERR, setup, teardown);
}
