/*
 * test_warnings.c - the warnings of a load that succeeds: rules that are
 * valid but likely not what was meant (an empty rate_limit, a limit with no
 * requests_per_unit, the leaky bucket shaper, no domain at all, with a
 * hint at upstream's RUNTIME_ROOT layout), each with its position, and
 * none for rules that mean what they say.
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
#include <unistd.h>

#include <cmocka.h>

#include "fake.h"
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

static weir_rules *parse(const char *yaml)
{
    weir_rules *r = NULL;
    assert_int_equal(weir_rules_parse(ctx, "w.yaml", yaml, strlen(yaml), NULL, &r, NULL, 0, NULL),
                     WEIR_OK);
    return r;
}

static void warning_is(const weir_rules *r, size_t i, uint32_t line, uint32_t col,
                       const char *starts)
{
    const weir_rules_error *w = weir_rules_warning_at(r, i);
    assert_non_null(w);
    assert_string_equal(w->file, "w.yaml");
    assert_int_equal(w->line, line);
    assert_int_equal(w->column, col);
    if (strncmp(w->message, starts, strlen(starts)) != 0)
        fail_msg("warning %zu is '%s', not '%s...'", i, w->message, starts);
}

static void valid_rules_that_mean_little(void **unused)
{
    (void)unused;
    weir_rules *r = parse("domain: a\n"
                          "descriptors:\n"
                          "  - key: empty\n"
                          "    rate_limit:\n"
                          "  - key: ban\n"
                          "    rate_limit: {unit: second}\n"
                          "  - key: meant\n"
                          "    rate_limit: {unit: second, requests_per_unit: 0}\n"
                          "  - key: shaped\n"
                          "    rate_limit: {unit: second, requests_per_unit: 5, "
                          "algorithm: leaky_bucket_shaper}\n"
                          "  - key: bare\n");
    assert_int_equal(weir_rules_warning_count(r), 3);
    warning_is(r, 0, 4, 5, "empty 'rate_limit': this descriptor limits nothing");
    warning_is(r, 1, 6, 17, "no 'requests_per_unit': the limit is 0, a ban");
    warning_is(r, 2, 10, 17, "leaky_bucket_shaper: the wait it asks for");
    assert_null(weir_rules_warning_at(r, 3));
    weir_rules_free(r);

    r = parse("domain: a\n"
              "descriptors:\n"
              "  - key: k\n"
              "    rate_limit: {unit: minute, requests_per_unit: 5}\n"
              "    descriptors:\n"
              "      - key: unlimited\n"
              "        rate_limit: {unlimited: true}\n");
    assert_int_equal(weir_rules_warning_count(r), 0);
    assert_null(weir_rules_warning_at(r, 0));
    weir_rules_free(r);
    assert_int_equal(weir_rules_warning_count(NULL), 0);
}

/* A temporary directory tree: files named in @files (paths relative to it,
 * directories made as needed) with @text. */
static char *tree(const char *const *files, size_t n, const char *text)
{
    char *root = strdup("/tmp/weir-warn-XXXXXX");
    assert_non_null(mkdtemp(root));
    for (size_t i = 0; i < n; i++) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", root, files[i]);
        for (char *s = path + strlen(root) + 1; (s = strchr(s, '/')) != NULL; s++) {
            *s = '\0';
            mkdir(path, 0700);
            *s = '/';
        }
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
    }
    return root;
}

static void rm_tree(char *root)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
    free(root);
}

static const weir_rules_error *load_one_warning(const char *path, weir_rules **r)
{
    assert_int_equal(weir_rules_load(ctx, path, NULL, r, NULL, 0, NULL), WEIR_OK);
    assert_int_equal(weir_rules_domain_count(*r), 0);
    assert_int_equal(weir_rules_warning_count(*r), 1);
    const weir_rules_error *w = weir_rules_warning_at(*r, 0);
    assert_string_equal(w->file, path);
    assert_int_equal(w->line, 0);
    return w;
}

/* No domain: every request is allowed, and said so; where the files are in
 * config/ below (upstream's RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config), the
 * warning names the directory to give instead. */
static void no_domain_loaded(void **unused)
{
    (void)unused;
    const char *rule = "domain: d\ndescriptors: []\n";
    const char *runtime[] = {"ratelimit/config/a.yaml", ".hidden/config/b.yaml"};
    char *root = tree(runtime, 2, rule);
    weir_rules *r;
    const weir_rules_error *w = load_one_warning(root, &r);
    char want[600];
    snprintf(want, sizeof(want),
             "no domain loaded: every request is allowed; the rule files are in "
             "%s/ratelimit/config (upstream's RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config "
             "layout): use --rules %s/ratelimit/config",
             root, root);
    assert_string_equal(w->message, want);
    weir_rules_free(r);
    /* RUNTIME_ROOT/RUNTIME_SUBDIRECTORY given: its config/ */
    char sub[600];
    snprintf(sub, sizeof(sub), "%s/ratelimit", root);
    w = load_one_warning(sub, &r);
    assert_non_null(strstr(w->message, "use --rules "));
    assert_non_null(strstr(w->message, "/ratelimit/config"));
    weir_rules_free(r);
    /* the right directory: its domain, no warning */
    snprintf(sub, sizeof(sub), "%s/ratelimit/config", root);
    assert_int_equal(weir_rules_load(ctx, sub, NULL, &r, NULL, 0, NULL), WEIR_OK);
    assert_int_equal(weir_rules_domain_count(r), 1);
    assert_int_equal(weir_rules_warning_count(r), 0);
    weir_rules_free(r);
    rm_tree(root);

    /* nothing anywhere: the plain warning */
    const char *none[] = {"notes.txt"};
    root = tree(none, 1, "hello");
    w = load_one_warning(root, &r);
    assert_string_equal(w->message, "no domain loaded: every request is allowed (no *.yaml or "
                                    "*.yml file with a domain here)");
    weir_rules_free(r);
    rm_tree(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(valid_rules_that_mean_little, setup, teardown),
        cmocka_unit_test_setup_teardown(no_domain_loaded, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
