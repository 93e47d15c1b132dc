/*
 * test_units.c - weir's one grammar of durations and sizes (weir/units.h):
 * every form it takes, exact fractions, what it refuses, and its caps.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "weir/weir.h"

#define S 1000000LL

static void durations(void **unused)
{
    (void)unused;
    static const struct {
        const char *text;
        int64_t us;
    } ok[] = {
        {"500ms", 500000},
        {"30s", 30 * S},
        {"30", 30 * S}, /* a bare number is seconds */
        {"2.5", 2500000},
        {"5m", 300 * S},
        {"1h", 3600 * S},
        {"2d", 172800 * S},
        {"1w", 604800 * S},
        {"1h30m", 5400 * S},
        {"1m0.5s", 60500000},
        {"1.5s", 1500000},
        {"250us", 250},
        {"0.001ms", 1},
        {"1.000000000000000000000s", S},
        {"0", 0},
        {"0s", 0},
        {"36525d", WEIR_MAX_WINDOW_US},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        int64_t us = -1;
        if (weir_duration_parse(ok[i].text, &us) != WEIR_OK || us != ok[i].us)
            fail_msg("'%s' -> %lld", ok[i].text, (long long)us);
    }
    static const char *const bad[] = {"",           "s",
                                      "1.s",        ".5s",
                                      "-1s",        "1 s",
                                      "1ss",        "5M",
                                      "1.0001us",   "5 ",
                                      "1e3s",       "1h30",
                                      "30 s",       "1mx",
                                      "+5s",        "0x10",
                                      "1.5.5s",     "ms",
                                      "0.0000001s", "1h-5m",
                                      "10µs",       "0.0000000000000000001s"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int64_t us = -1;
        if (weir_duration_parse(bad[i], &us) != WEIR_EPARSE)
            fail_msg("'%s' parsed", bad[i]);
        assert_int_equal(us, -1);
    }
    int64_t us;
    assert_int_equal(weir_duration_parse("36526d", &us), WEIR_ERANGE);
    assert_int_equal(weir_duration_parse("36525d1us", &us), WEIR_ERANGE);
    assert_int_equal(weir_duration_parse("99999999999999999999999999h", &us), WEIR_ERANGE);
    assert_int_equal(weir_duration_parse(NULL, &us), WEIR_EINVAL);
    assert_int_equal(weir_duration_parse("1s", NULL), WEIR_EINVAL);
}

static void sizes(void **unused)
{
    (void)unused;
    static const struct {
        const char *text;
        uint64_t bytes;
    } ok[] = {
        {"0", 0},
        {"4096", 4096},
        {"4096b", 4096},
        {"64k", 64000},
        {"64KB", 64000},
        {"64KiB", 65536},
        {"64kib", 65536},
        {"512MiB", 536870912},
        {"1.5KiB", 1536},
        {"1.5GB", 1500000000},
        {"2g", 2000000000},
        {"1TiB", 1099511627776ull},
        {"18446744073709551615", UINT64_MAX},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        uint64_t b = 1;
        if (weir_size_parse(ok[i].text, &b) != WEIR_OK || b != ok[i].bytes)
            fail_msg("'%s' -> %llu", ok[i].text, (unsigned long long)b);
    }
    static const char *const bad[] = {"",    "KiB",   "-1",    "1.5", "1.1b", "64 KiB",
                                      "64x", "64kbb", "1..5k", ".5k", "1e6",  "0.3KiB"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t b = 7;
        if (weir_size_parse(bad[i], &b) != WEIR_EPARSE)
            fail_msg("'%s' parsed", bad[i]);
        assert_int_equal(b, 7);
    }
    uint64_t b;
    assert_int_equal(weir_size_parse("18446744073709551616", &b), WEIR_ERANGE);
    assert_int_equal(weir_size_parse("17TiB", &b), WEIR_OK);
    assert_int_equal(weir_size_parse("99999999TiB", &b), WEIR_ERANGE);
    assert_int_equal(weir_size_parse(NULL, &b), WEIR_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(durations),
        cmocka_unit_test(sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
