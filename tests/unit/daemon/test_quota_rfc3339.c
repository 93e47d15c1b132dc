/*
 * test_quota_rfc3339.c - RFC 3339 timestamps of the quota admin API
 * (daemon/quota/rfc3339.c): known instants, offsets and fractions, dates
 * that do not exist, the range's edges, and every day from 1970 to 9999
 * against a calendar counted day by day.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "quota/rfc3339.h"

static bool parse(const char *s, int64_t *us)
{
    return quota_time_parse(s, strlen(s), us);
}

static void known_instants(void **unused)
{
    (void)unused;
    static const struct {
        const char *text;
        int64_t us;
    } cases[] = {
        {"1970-01-01T00:00:00Z", 0},
        {"1970-01-01T00:00:00.000001Z", 1},
        {"1970-01-01t00:00:00z", 0},
        {"2025-02-01T00:00:00Z", INT64_C(1738368000000000)},
        {"2025-02-01T05:30:00+05:30", INT64_C(1738368000000000)},
        {"2025-01-31T19:00:00-05:00", INT64_C(1738368000000000)},
        {"2025-02-01T00:00:00-00:00", INT64_C(1738368000000000)},
        {"2025-02-01T00:00:00.123456Z", INT64_C(1738368000123456)},
        {"2025-02-01T00:00:00.5Z", INT64_C(1738368000500000)},
        {"2025-02-01T00:00:00.05Z", INT64_C(1738368000050000)},
        {"2025-02-01T00:00:00.000000Z", INT64_C(1738368000000000)},
        {"2025-02-01T00:00:00.999999+23:59", INT64_C(1738368000999999) - INT64_C(86340000000)},
        {"2024-02-29T12:00:00Z", INT64_C(1709208000000000)},
        {"2000-02-29T00:00:00Z", INT64_C(951782400000000)},
        {"2038-01-19T03:14:08Z", INT64_C(2147483648000000)},
        {"9999-12-31T23:59:59.999999Z", INT64_C(253402300799999999)},
        {"1970-01-01T05:30:00+05:30", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t us = -7;
        if (!parse(cases[i].text, &us) || us != cases[i].us)
            print_error("%s: got %lld\n", cases[i].text, (long long)us);
        assert_true(us == cases[i].us);
    }
}

static void refused(void **unused)
{
    (void)unused;
    static const char *const bad[] = {
        "",
        "2025-02-01",
        "2025-02-01T00:00:00",  /* no zone designator */
        "2025-02-01T00:00Z",    /* no seconds */
        "2025-02-01 00:00:00Z", /* RFC 3339 allows it in a note; the API does not */
        "2026-02-29T00:00:00Z", /* not a leap year */
        "2100-02-29T00:00:00Z", /* nor a century */
        "2025-04-31T00:00:00Z",
        "2025-02-30T00:00:00Z",
        "2025-00-10T00:00:00Z",
        "2025-13-10T00:00:00Z",
        "2025-01-00T00:00:00Z",
        "2025-01-32T00:00:00Z",
        "2025-02-01T24:00:00Z", /* hour 24 */
        "2025-02-01T23:60:00Z",
        "2016-12-31T23:59:60Z",         /* a leap second: no Unix time */
        "2025-02-01T00:00:00.Z",        /* a point without digits */
        "2025-02-01T00:00:00.1234567Z", /* finer than a microsecond */
        "2025-02-01T00:00:00.123456789Z",
        "2025-02-01T00:00:00+5:30",
        "2025-02-01T00:00:00+05",
        "2025-02-01T00:00:00+0530",
        "2025-02-01T00:00:00+24:00",
        "2025-02-01T00:00:00+05:60",
        "2025-02-01T00:00:00ZZ",
        "2025-02-01T00:00:00Z ",
        " 2025-02-01T00:00:00Z",
        "2025-02-01T00:00:00UTC",
        "+2025-02-01T00:00:00Z",
        "25-02-01T00:00:00Z",
        "2025-2-01T00:00:00Z",
        "2025-02-01T0:00:00Z",
        "2025/02/01T00:00:00Z",
        "20250201T000000Z",
        "1969-12-31T23:59:59Z",      /* before the epoch */
        "1970-01-01T00:00:00+00:01", /* the same, by its offset */
        "0000-01-01T00:00:00Z",
        "9999-12-31T23:59:59-00:01", /* year 10000 in UTC */
        "2025-02-01T00:00:00.-1Z",
        "2025-02-01T00:00:00,5Z",
        "\xd9\xa2\xd9\xa0\xd9\xa2\xd9\xa5-02-01T00:00:00Z", /* Arabic-Indic digits */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int64_t us = -7;
        if (parse(bad[i], &us))
            print_error("accepted %s as %lld\n", bad[i], (long long)us);
        assert_true(us == -7);
    }
    /* the length given is the end: no NUL needed, none read past */
    int64_t us;
    assert_true(quota_time_parse("2025-02-01T00:00:00Zjunk", 20, &us));
    assert_false(quota_time_parse("2025-02-01T00:00:00Z", 19, &us));
    assert_false(quota_time_parse("2025-02-01T00:00:00.1", 21, &us));
    assert_false(quota_time_parse("2025-02-01T00:00:00+05:3", 24, &us));
}

static void formats(void **unused)
{
    (void)unused;
    static const struct {
        int64_t us;
        const char *text;
    } cases[] = {
        {0, "1970-01-01T00:00:00Z"},
        {1, "1970-01-01T00:00:00.000001Z"},
        {-1, "1969-12-31T23:59:59.999999Z"},
        {INT64_C(1738368000500000), "2025-02-01T00:00:00.500000Z"},
        {INT64_C(1709208000000000), "2024-02-29T12:00:00Z"},
        {INT64_C(253402300799999999), "9999-12-31T23:59:59.999999Z"},
        {INT64_C(253402300800000000), "10000-01-01T00:00:00Z"},
        {INT64_C(-62167219200000000), "0000-01-01T00:00:00Z"},
        {INT64_C(-62167219200000001), "-0001-12-31T23:59:59.999999Z"},
        {INT64_MAX, "294247-01-10T04:00:54.775807Z"},
        {INT64_MIN, "-290308-12-21T19:59:05.224192Z"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[QUOTA_TIME_TEXT_MAX];
        size_t n = quota_time_format(cases[i].us, out);
        assert_string_equal(out, cases[i].text);
        assert_int_equal(n, strlen(cases[i].text));
    }
}

/* Every day of 1970 .. 9999 at a time of day that moves, formatted and
 * parsed back, against a calendar that steps one day at a time. */
static void every_day(void **unused)
{
    (void)unused;
    static const unsigned char month_days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    unsigned y = 1970, m = 1, d = 1;
    int64_t day = 0;
    for (; y <= 9999; day++) {
        int64_t sod_us = (day * INT64_C(7919000123)) % INT64_C(86400000000);
        int64_t us = day * INT64_C(86400000000) + sod_us;
        char out[QUOTA_TIME_TEXT_MAX];
        size_t n = quota_time_format(us, out);
        char want[32]; /* room for any unsigned the compiler cannot bound */
        snprintf(want, sizeof(want), "%04u-%02u-%02uT", y, m, d);
        if (memcmp(out, want, 11) != 0)
            print_error("day %lld: %s, want %s\n", (long long)day, out, want);
        assert_memory_equal(out, want, 11);
        int64_t back;
        assert_true(quota_time_parse(out, n, &back));
        assert_true(back == us);
        bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        unsigned last = month_days[m - 1] + (m == 2 && leap);
        if (++d > last) {
            d = 1;
            if (++m > 12) {
                m = 1;
                y++;
            }
        }
    }
    assert_true(day == 2932897); /* days from 1970 to 10000 */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(known_instants),
        cmocka_unit_test(refused),
        cmocka_unit_test(formats),
        cmocka_unit_test(every_day),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
