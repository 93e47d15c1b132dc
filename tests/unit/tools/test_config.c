/*
 * test_config.c - `weir config check|print`: exit codes for good rules, bad
 * rules, warnings with and without --strict, a missing path and bad
 * arguments.
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

#include "cli.h"

static char *write_temp(const char *text)
{
    char *path = strdup("/tmp/weir-config-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

/* Calls the command with writable copies of its arguments, as main() would. */
static int call(int argc, const char *const *args)
{
    char store[6][256];
    char *argv[6];
    for (int i = 0; i < argc; i++) {
        snprintf(store[i], sizeof(store[i]), "%s", args[i]);
        argv[i] = store[i];
    }
    return weir_cli_config(argc, argv);
}

static int run(const char *verb, const char *path, const char *extra)
{
    const char *args[] = {"config", verb, path, extra};
    return call(extra ? 4 : 3, args);
}

static void good_rules(void **unused)
{
    (void)unused;
    char *p = write_temp("domain: d\n"
                         "descriptors:\n"
                         "  - key: k\n"
                         "    rate_limit: {unit: minute, requests_per_unit: 5}\n");
    assert_int_equal(run("check", p, NULL), 0);
    assert_int_equal(run("print", p, NULL), 0);
    assert_int_equal(run("check", p, "--merge"), 0);
    unlink(p);
    free(p);
}

/* Warnings leave the check passing, unless --strict. */
static void warnings_and_strict(void **unused)
{
    (void)unused;
    char *p = write_temp("domain: d\n"
                         "descriptors:\n"
                         "  - key: k\n"
                         "    rate_limit: {unit: minute}\n");
    assert_int_equal(run("check", p, NULL), 0);
    assert_int_equal(run("check", p, "--strict"), 1);
    assert_int_equal(run("print", p, "--strict"), 1);
    unlink(p);
    free(p);
    char *q = write_temp("domain: d\n"
                         "descriptors:\n"
                         "  - key: k\n"
                         "    rate_limit: {unit: minute, requests_per_unit: 5}\n");
    assert_int_equal(run("check", q, "--strict"), 0);
    unlink(q);
    free(q);
}

static void bad_rules(void **unused)
{
    (void)unused;
    char *p = write_temp("domain: d\n"
                         "descriptors:\n"
                         "  - key: k\n"
                         "    rate_limit: {unit: fortnight, requests_per_unit: 5}\n");
    assert_int_equal(run("check", p, NULL), 1);
    assert_int_equal(run("print", p, NULL), 1);
    unlink(p);
    free(p);
    assert_int_equal(run("check", "/nonexistent/weir/rules.yaml", NULL), 1);
}

/* `shed:` names the priorities --priorities gives (the default's without) */
static void priorities(void **unused)
{
    (void)unused;
    char *p = write_temp("domain: d\n"
                         "descriptors:\n"
                         "  - key: k\n"
                         "    rate_limit: {unit: minute, requests_per_unit: 5, "
                         "shed: {bronze: 20%}}\n");
    const char *gold[] = {"config", "check", "--priorities", "gold,silver,bronze", p};
    assert_int_equal(call(5, gold), 0);
    assert_int_equal(run("check", p, NULL), 1); /* no bronze by default */
    const char *twice[] = {"config", "check", "--priorities", "gold,gold,bronze", p};
    assert_int_equal(call(5, twice), 1);
    const char *nine[] = {"config", "check", "--priorities", "a,b,c,d,e,f,g,h,bronze", p};
    assert_int_equal(call(5, nine), 2);
    unlink(p);
    free(p);
}

static void bad_arguments(void **unused)
{
    (void)unused;
    assert_int_equal(run("frobnicate", "x", NULL), 2);
    assert_int_equal(run("check", "x", "--no-such-flag"), 2);
    const char *algo[] = {"config", "check", "--default-algorithm", "nope", "x"};
    assert_int_equal(call(5, algo), 2);
    const char *only[] = {"config"};
    assert_int_equal(call(1, only), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(good_rules),          cmocka_unit_test(bad_rules),
        cmocka_unit_test(warnings_and_strict), cmocka_unit_test(bad_arguments),
        cmocka_unit_test(priorities),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
