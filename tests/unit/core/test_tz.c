/*
 * test_tz.c - time zones and calendar periods (weir/calendar.h): periods
 * pinned in real zones of the system's tzdata (every expected instant
 * checked with zdump or GNU date, the command beside it), the rules for a
 * midnight that does not exist or happens twice, the footer's rules far in
 * the future, offsets cross-checked against the C library's, zone names,
 * and malformed TZif files.
 *
 * The C library's TZ variable is set here only, single-threaded, as the
 * oracle of the cross-checks; weir itself never reads it.
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

#include "weir/weir.h"

#define US 1000000LL
#define H 3600LL
#define DAY 86400LL
#define NY_FILE "/usr/share/zoneinfo/America/New_York"

static weir_ctx *ctx;

static int setup(void **unused)
{
    (void)unused;
    unsetenv("TZDIR");
    return weir_ctx_new(NULL, &ctx) == WEIR_OK ? 0 : -1;
}

static int teardown(void **unused)
{
    (void)unused;
    weir_ctx_free(ctx);
    return 0;
}

static bool have_tzdata(void)
{
    if (access(NY_FILE, R_OK) == 0)
        return true;
    print_message("skipped: " NY_FILE " is missing (the tzdata package is not installed)\n");
    return false;
}

static weir_tz *load(const char *name)
{
    weir_tz *tz = NULL;
    weir_status st = weir_tz_load(ctx, name, &tz);
    if (st != WEIR_OK)
        fail_msg("weir_tz_load(%s): %s", name, weir_strerror(st));
    return tz;
}

/* The period of @cal holding @now_us must be [start_s, end_s). */
static void period_is(const weir_tz *tz, weir_calendar cal, int64_t now_us, int64_t start_s,
                      int64_t end_s)
{
    int64_t s = -1, e = -1;
    weir_status st = weir_calendar_period(tz, cal, now_us, &s, &e);
    if (st != WEIR_OK || s != start_s * US || e != end_s * US)
        fail_msg("%s %s at %lld us: %s [%lld, %lld), want [%lld, %lld)", weir_tz_name(tz),
                 weir_calendar_name(cal), (long long)now_us, weir_status_name(st),
                 (long long)(s / US), (long long)(e / US), (long long)start_s, (long long)end_s);
}

/* [start_s, end_s) is a period: at its first microsecond, in its middle and
 * at its last; the microsecond before belongs to the period before. */
static void check_period(const weir_tz *tz, weir_calendar cal, int64_t start_s, int64_t end_s)
{
    period_is(tz, cal, start_s * US, start_s, end_s);
    period_is(tz, cal, (start_s + (end_s - start_s) / 2) * US, start_s, end_s);
    period_is(tz, cal, end_s * US - 1, start_s, end_s);
    int64_t s, e;
    assert_int_equal(weir_calendar_period(tz, cal, start_s * US - 1, &s, &e), WEIR_OK);
    assert_int_equal(e, start_s * US);
    assert_int_equal(weir_calendar_period(tz, cal, end_s * US, &s, &e), WEIR_OK);
    assert_int_equal(s, end_s * US);
}

typedef struct pinned {
    const char *zone;
    weir_calendar cal;
    int64_t start, end; /* Unix seconds */
} pinned;

/* Each row: TZ=ZONE date -d 'START' +%s and the same for END (the local
 * start of the period and of the next), unless it says otherwise. */
static const pinned pinned_periods[] = {
    /* 2026-03-08, 23 h: TZ=America/New_York date -d '2026-03-08 00:00' +%s
     * -> 1772946000 (05:00Z); '2026-03-09 00:00' -> 1773028800 (04:00Z) */
    {"America/New_York", WEIR_CALENDAR_DAY, 1772946000, 1773028800},
    /* 2026-11-01, 25 h: 1793505600 (04:00Z) .. 1793595600 (2026-11-02T05:00Z) */
    {"America/New_York", WEIR_CALENDAR_DAY, 1793505600, 1793595600},
    /* March 2026: '2026-03-01' -> 1772341200, '2026-04-01' -> 1775016000 */
    {"America/New_York", WEIR_CALENDAR_MONTH, 1772341200, 1775016000},
    /* November 2026: '2026-11-01' -> 1793505600, '2026-12-01' -> 1796101200 */
    {"America/New_York", WEIR_CALENDAR_MONTH, 1793505600, 1796101200},
    /* February 2024, 29 days: '2024-02-01' -> 1706763600, '2024-03-01' -> 1709269200 */
    {"America/New_York", WEIR_CALENDAR_MONTH, 1706763600, 1709269200},
    /* February 2026, 28 days: 1769922000 .. 1772341200 */
    {"America/New_York", WEIR_CALENDAR_MONTH, 1769922000, 1772341200},
    /* date -u -d '2024-02-01' +%s -> 1706745600; '2024-03-01' -> 1709251200 */
    {"UTC", WEIR_CALENDAR_MONTH, 1706745600, 1709251200},
    /* date -u -d '2026-02-01' +%s -> 1769904000; '2026-03-01' -> 1772323200 */
    {"UTC", WEIR_CALENDAR_MONTH, 1769904000, 1772323200},
    /* date -u -d '2024-01-01' +%s -> 1704067200; '2025-01-01' -> 1735689600 (366 days) */
    {"Etc/UTC", WEIR_CALENDAR_YEAR, 1704067200, 1735689600},
    /* year 2026: '2026-01-01' -> 1767243600, '2027-01-01' -> 1798779600 */
    {"America/New_York", WEIR_CALENDAR_YEAR, 1767243600, 1798779600},
    /* far future, from the footer EST5EDT,M3.2.0,M11.1.0 (the file's table
     * ends in 2037): '2100-03-14' -> 4108683600, '2100-03-15' -> 4108766400 */
    {"America/New_York", WEIR_CALENDAR_DAY, 4108683600, 4108766400},
    /* '2100-11-07' -> 4129243200, '2100-11-08' -> 4129333200 */
    {"America/New_York", WEIR_CALENDAR_DAY, 4129243200, 4129333200},
    /* '2400-03-12' -> 13575618000, '2400-03-13' -> 13575700800 */
    {"America/New_York", WEIR_CALENDAR_DAY, 13575618000, 13575700800},
    /* '2400-11-05' -> 13596177600, '2400-11-06' -> 13596267600 */
    {"America/New_York", WEIR_CALENDAR_DAY, 13596177600, 13596267600},
    /* before 1970: '1960-04-24' -> -305751600, '1960-04-25' -> -305668800 (23 h) */
    {"America/New_York", WEIR_CALENDAR_DAY, -305751600, -305668800},
    /* local mean time until 1883-11-18 12:03:58: '1883-11-18' -> -2717694238
     * (04:56:02Z), '1883-11-19' -> -2717607600 */
    {"America/New_York", WEIR_CALENDAR_DAY, -2717694238, -2717607600},
    /* '1969-12-31' -> -68400, '1970-01-01' -> 18000 */
    {"America/New_York", WEIR_CALENDAR_DAY, -68400, 18000},
    /* TZ=Europe/London: '2026-03-29' -> 1774742400, '2026-03-30' -> 1774825200 (23 h) */
    {"Europe/London", WEIR_CALENDAR_DAY, 1774742400, 1774825200},
    /* '2026-10-25' -> 1792882800 (24th 23:00Z), '2026-10-26' -> 1792972800 (25 h) */
    {"Europe/London", WEIR_CALENDAR_DAY, 1792882800, 1792972800},
    /* 30-minute DST: TZ=Australia/Lord_Howe '2026-10-04' -> 1791034200,
     * '2026-10-05' -> 1791118800 (23.5 h) */
    {"Australia/Lord_Howe", WEIR_CALENDAR_DAY, 1791034200, 1791118800},
    /* '2026-04-05' -> 1775307600, '2026-04-06' -> 1775395800 (24.5 h) */
    {"Australia/Lord_Howe", WEIR_CALENDAR_DAY, 1775307600, 1775395800},
    /* +05:30: TZ=Asia/Kolkata '2026-06-15' -> 1781461800, '2026-06-16' -> 1781548200 */
    {"Asia/Kolkata", WEIR_CALENDAR_DAY, 1781461800, 1781548200},
    /* +12:45 -> +13:45: TZ=Pacific/Chatham '2026-09-27' -> 1790421300,
     * '2026-09-28' -> 1790504100 (23 h) */
    {"Pacific/Chatham", WEIR_CALENDAR_DAY, 1790421300, 1790504100},
    /* '2026-04-05' -> 1775297700, '2026-04-06' -> 1775387700 (25 h) */
    {"Pacific/Chatham", WEIR_CALENDAR_DAY, 1775297700, 1775387700},
    /* +14: TZ=Pacific/Kiritimati '2026-01-01' -> 1767175200, '2026-01-02' -> 1767261600 */
    {"Pacific/Kiritimati", WEIR_CALENDAR_DAY, 1767175200, 1767261600},
    /* Apia skipped 2011-12-30 (zdump -v -c 2011,2012 Pacific/Apia: Thu Dec 29
     * 23:59:59 -10 is followed by Sat Dec 31 00:00:00 +14 at 10:00Z): the
     * 29th: TZ=Pacific/Apia '2011-12-29' -> 1325152800, '2011-12-31' -> 1325239200 */
    {"Pacific/Apia", WEIR_CALENDAR_DAY, 1325152800, 1325239200},
    /* the 31st: 1325239200 .. '2012-01-01' -> 1325325600 */
    {"Pacific/Apia", WEIR_CALENDAR_DAY, 1325239200, 1325325600},
    /* December 2011, 30 days: '2011-12-01' -> 1322733600 .. 1325325600 */
    {"Pacific/Apia", WEIR_CALENDAR_MONTH, 1322733600, 1325325600},
    /* 2011, 364 days: '2011-01-01' -> 1293876000 .. 1325325600 */
    {"Pacific/Apia", WEIR_CALENDAR_YEAR, 1293876000, 1325325600},
};

static void pinned_zones(void **unused)
{
    (void)unused;
    if (!have_tzdata())
        skip();
    for (size_t i = 0; i < sizeof(pinned_periods) / sizeof(pinned_periods[0]); i++) {
        const pinned *p = &pinned_periods[i];
        weir_tz *tz = load(p->zone);
        assert_string_equal(weir_tz_name(tz), p->zone);
        check_period(tz, p->cal, p->start, p->end);
        weir_tz_free(tz);
    }
}

/* Midnights that do not exist or happen twice (zdump -v -c 2025,2027 ZONE,
 * and for 2012 zdump -v -c 2012,2013 America/Havana). */
static void midnight_gaps_and_repeats(void **unused)
{
    (void)unused;
    if (!have_tzdata())
        skip();
    weir_tz *havana = load("America/Havana");
    /* Sun Mar 8 2026 05:00:00 UT = Sun 01:00:00 CDT, after Sat 23:59:59 CST:
     * 00:00 of the 8th does not exist, the 8th starts at the jump
     * (date -u -d '2026-03-08T05:00Z' +%s -> 1772946000), the 7th ends
     * there ('2026-03-07T05:00Z' -> 1772859600) and the 8th ends at 00:00
     * CDT of the 9th ('2026-03-09T04:00Z' -> 1773028800) */
    check_period(havana, WEIR_CALENDAR_DAY, 1772859600, 1772946000);
    check_period(havana, WEIR_CALENDAR_DAY, 1772946000, 1773028800);
    /* Sun Nov 1 2026 05:00:00 UT = Sun 00:00:00 CST, after 00:59:59 CDT:
     * 00:00 of the 1st happens at 04:00Z and again at 05:00Z; the 1st
     * starts at the first ('2026-11-01T04:00Z' -> 1793505600) and lasts 25 h
     * ('2026-11-02T05:00Z' -> 1793595600) */
    check_period(havana, WEIR_CALENDAR_DAY, 1793419200, 1793505600);
    check_period(havana, WEIR_CALENDAR_DAY, 1793505600, 1793595600);
    period_is(havana, WEIR_CALENDAR_DAY, (1793505600 + H + 1800) * US, 1793505600, 1793595600);
    /* the month of November starts at the first midnight too */
    int64_t s, e;
    assert_int_equal(weir_calendar_period(havana, WEIR_CALENDAR_MONTH, 1793505600 * US, &s, &e),
                     WEIR_OK);
    assert_int_equal(s, 1793505600 * US);
    /* Sun Apr 1 2012 05:00:00 UT = 01:00 CDT, after Sat Mar 31 23:59:59 CST:
     * '2012-03-31T05:00Z' -> 1333170000, '2012-04-01T05:00Z' -> 1333256400,
     * '2012-04-02T04:00Z' -> 1333339200 */
    check_period(havana, WEIR_CALENDAR_DAY, 1333170000, 1333256400);
    check_period(havana, WEIR_CALENDAR_DAY, 1333256400, 1333339200);
    /* and April 2012 starts at the jump as well */
    check_period(havana, WEIR_CALENDAR_MONTH, 1333256400,
                 1335844800 /* TZ=America/Havana date -d '2012-05-01' +%s */);
    weir_tz_free(havana);

    weir_tz *beirut = load("Asia/Beirut");
    /* Sat Mar 28 2026 22:00:00 UT = Sun Mar 29 01:00:00 EEST, after Sat
     * 23:59:59 EET: '2026-03-27T22:00Z' -> 1774648800, '2026-03-28T22:00Z'
     * -> 1774735200, '2026-03-29T21:00Z' -> 1774818000 */
    check_period(beirut, WEIR_CALENDAR_DAY, 1774648800, 1774735200);
    check_period(beirut, WEIR_CALENDAR_DAY, 1774735200, 1774818000);
    weir_tz_free(beirut);

    weir_tz *santiago = load("America/Santiago");
    /* Sun Sep 6 2026 04:00:00 UT = 01:00:00 -03, after Sat 23:59:59 -04
     * (footer <-04>4<-03>,M9.1.6/24,M4.1.6/24): '2026-09-05T04:00Z' ->
     * 1788580800, '2026-09-06T04:00Z' -> 1788667200, '2026-09-07T03:00Z' ->
     * 1788750000 */
    check_period(santiago, WEIR_CALENDAR_DAY, 1788580800, 1788667200);
    check_period(santiago, WEIR_CALENDAR_DAY, 1788667200, 1788750000);
    /* Sun Apr 5 2026 03:00:00 UT = Sat Apr 4 23:00:00 -04 after 23:59:59
     * -03: Saturday has 25 h, '2026-04-04T03:00Z' -> 1775271600,
     * '2026-04-05T04:00Z' -> 1775361600 */
    check_period(santiago, WEIR_CALENDAR_DAY, 1775271600, 1775361600);
    weir_tz_free(santiago);
}

static void offsets(void **unused)
{
    (void)unused;
    assert_int_equal(weir_tz_offset(NULL, 1772946000), 0);
    if (!have_tzdata())
        skip();
    static const struct {
        const char *zone;
        int64_t at;
        int32_t off;
    } cases[] = {
        /* zdump -v -c 2026,2027 America/New_York: Sun Mar 8 06:59:59 2026 UT
         * = 01:59:59 EST; 07:00:00 UT = 03:00:00 EDT */
        {"America/New_York", 1772953199, -5 * 3600},
        {"America/New_York", 1772953200, -4 * 3600},
        /* TZ=America/New_York date -d @13596177599 -> Sat Nov 4 23:59:59 EDT 2400 */
        {"America/New_York", 13596177599, -4 * 3600},
        {"Asia/Kolkata", 1781461800, 5 * 3600 + 1800},
        {"Pacific/Chatham", 1790421300, 12 * 3600 + 2700},
        {"Pacific/Chatham", 1790504100, 13 * 3600 + 2700},
        {"Pacific/Kiritimati", 1767175200, 14 * 3600},
        /* zdump: Fri Dec 30 10:00:00 2011 UT = Sat Dec 31 00:00:00 2011 +14 */
        {"Pacific/Apia", 1325239199, -10 * 3600},
        {"Pacific/Apia", 1325239200, 14 * 3600},
        /* before the first transition: local mean time, -4:56:02 */
        {"America/New_York", INT64_MIN, -(4 * 3600 + 56 * 60 + 2)},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        weir_tz *tz = load(cases[i].zone);
        if (weir_tz_offset(tz, cases[i].at) != cases[i].off)
            fail_msg("%s at %lld: %d, want %d", cases[i].zone, (long long)cases[i].at,
                     weir_tz_offset(tz, cases[i].at), cases[i].off);
        weir_tz_free(tz);
    }
    /* past the bounds: the offset at +-2^56 s */
    weir_tz *tz = load("America/New_York");
    assert_int_equal(weir_tz_offset(tz, INT64_MAX), weir_tz_offset(tz, (int64_t)1 << 56));
    assert_int_equal(weir_tz_offset(tz, -((int64_t)1 << 57)), weir_tz_offset(tz, INT64_MIN));
    weir_tz_free(tz);
}

/* --------------------------------------------------------------- glibc */

static int32_t libc_offset(int64_t t)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (!localtime_r(&tt, &tm))
        fail_msg("localtime_r(%lld)", (long long)t);
    return (int32_t)tm.tm_gmtoff;
}

static void set_libc_tz(const char *value)
{
    setenv("TZ", value, 1);
    tzset();
}

/* weir_tz_offset() against the C library's over [from, to): sampled every
 * @step seconds, and on both sides of every change weir finds between
 * samples. Returns the changes seen. */
static size_t compare_offsets(const weir_tz *tz, const char *what, int64_t from, int64_t to,
                              int64_t step)
{
    size_t changes = 0;
    int64_t prev = from;
    int32_t prev_off = weir_tz_offset(tz, from);
    for (int64_t t = from; t < to; t += step) {
        int32_t off = weir_tz_offset(tz, t), libc = libc_offset(t);
        if (off != libc)
            fail_msg("%s at %lld: weir %d, libc %d", what, (long long)t, off, libc);
        if (off != prev_off) {
            /* the change: the first instant in (prev, t] with the new offset */
            int64_t lo = prev, hi = t;
            while (hi - lo > 1) {
                int64_t mid = lo + (hi - lo) / 2;
                if (weir_tz_offset(tz, mid) == prev_off)
                    lo = mid;
                else
                    hi = mid;
            }
            for (int64_t c = hi - 1; c <= hi; c++)
                if (weir_tz_offset(tz, c) != libc_offset(c))
                    fail_msg("%s at change %lld: weir %d, libc %d", what, (long long)c,
                             weir_tz_offset(tz, c), libc_offset(c));
            changes++;
        }
        prev = t;
        prev_off = off;
    }
    return changes;
}

static void offsets_match_libc(void **unused)
{
    (void)unused;
    if (!have_tzdata())
        skip();
    static const char *const zones[] = {
        "America/New_York",  "Europe/London",  "Australia/Lord_Howe", "America/Santiago",
        "Asia/Beirut",       "America/Havana", "Pacific/Chatham",     "Europe/Dublin",
        "Africa/Casablanca", "Pacific/Apia",   "Asia/Kolkata",        "America/Sao_Paulo",
    };
    const int64_t y1900 = -2208988800, y2100 = 4102444800;
    for (size_t i = 0; i < sizeof(zones) / sizeof(zones[0]); i++) {
        char value[80];
        snprintf(value, sizeof(value), ":%s", zones[i]);
        set_libc_tz(value);
        weir_tz *tz = load(zones[i]);
        /* 3 h 7 min 1 s: every time of day comes round */
        size_t changes = compare_offsets(tz, zones[i], y1900, y2100, 3 * H + 421);
        weir_tz_free(tz);
        if (changes == 0 && strcmp(zones[i], "Asia/Kolkata") != 0)
            fail_msg("%s: no change of offset seen", zones[i]);
    }
    unsetenv("TZ");
    tzset();
}

/* ------------------------------------------------------ TZif bytes */

typedef struct buf {
    uint8_t b[32768];
    size_t n;
} buf;

static void put(buf *o, const void *p, size_t n)
{
    assert_true(o->n + n <= sizeof(o->b));
    if (n)
        memcpy(o->b + o->n, p, n);
    o->n += n;
}

static void put_be(buf *o, uint64_t v, size_t bytes)
{
    for (size_t i = 0; i < bytes; i++) {
        uint8_t c = (uint8_t)(v >> (8 * (bytes - 1 - i)));
        put(o, &c, 1);
    }
}

static void put_header(buf *o, char version, uint32_t timecnt, uint32_t typecnt, uint32_t charcnt)
{
    put(o, "TZif", 4);
    put(o, &version, 1);
    static const uint8_t unused[15];
    put(o, unused, sizeof(unused));
    put_be(o, 0, 4); /* isutcnt */
    put_be(o, 0, 4); /* isstdcnt */
    put_be(o, 0, 4); /* leapcnt */
    put_be(o, timecnt, 4);
    put_be(o, typecnt, 4);
    put_be(o, charcnt, 4);
}

/* A version 2 file: a minimal 32-bit block, then @n transitions at @at to
 * the types of @idx among @n_types offsets @offs, and the footer @footer
 * (NULL: version 1, the transitions in 32 bits and no footer). */
static void tzif(buf *o, size_t n, const int64_t *at, const uint8_t *idx, size_t n_types,
                 const int32_t *offs, const char *footer)
{
    o->n = 0;
    size_t tb = 8;
    if (footer) {
        put_header(o, '2', 0, 1, 1);
        put_be(o, 0, 6); /* one type: offset 0, abbreviation "" */
        put_be(o, 0, 1);
        put_header(o, '2', (uint32_t)n, (uint32_t)n_types, 4);
    } else {
        put_header(o, 0, (uint32_t)n, (uint32_t)n_types, 4);
        tb = 4;
    }
    for (size_t i = 0; i < n; i++)
        put_be(o, (uint64_t)at[i], tb);
    put(o, idx, n);
    for (size_t i = 0; i < n_types; i++) {
        put_be(o, (uint32_t)offs[i], 4);
        put_be(o, 0, 2); /* not DST, abbreviation at 0 */
    }
    put(o, "ABC", 4);
    if (footer) {
        put(o, "\n", 1);
        put(o, footer, strlen(footer));
        put(o, "\n", 1);
    }
}

static weir_status parse_buf(const buf *o, weir_tz **tz)
{
    *tz = NULL;
    weir_status st = weir_tz_parse(ctx, "test", o->b, o->n, tz);
    if (st != WEIR_OK)
        assert_null(*tz);
    return st;
}

/* Hand-made files, and how they are read. */
static void made_files(void **unused)
{
    (void)unused;
    static const int64_t at[] = {-100000, 0, 1000000};
    static const uint8_t idx[] = {1, 2, 1};
    static const int32_t offs[] = {100, -3600, 5 * 3600 + 1800};
    buf o;
    weir_tz *tz;
    for (int v = 1; v <= 2; v++) {
        tzif(&o, 3, at, idx, 3, offs, v == 1 ? NULL : "");
        assert_int_equal(parse_buf(&o, &tz), WEIR_OK);
        assert_string_equal(weir_tz_name(tz), "test");
        assert_int_equal(weir_tz_offset(tz, INT64_MIN), 100); /* type 0 */
        assert_int_equal(weir_tz_offset(tz, -100001), 100);
        assert_int_equal(weir_tz_offset(tz, -100000), -3600);
        assert_int_equal(weir_tz_offset(tz, -1), -3600);
        assert_int_equal(weir_tz_offset(tz, 0), 19800);
        assert_int_equal(weir_tz_offset(tz, 999999), 19800);
        assert_int_equal(weir_tz_offset(tz, 1000000), -3600);
        assert_int_equal(weir_tz_offset(tz, INT64_MAX), -3600); /* empty footer: the last */
        weir_tz_free(tz);
    }
    /* the footer rules from the last transition on */
    tzif(&o, 3, at, idx, 3, offs, "<-03>3");
    assert_int_equal(parse_buf(&o, &tz), WEIR_OK);
    assert_int_equal(weir_tz_offset(tz, 999999), 19800);
    assert_int_equal(weir_tz_offset(tz, 1000000), -3 * 3600);
    weir_tz_free(tz);
    /* no transitions: the footer rules all time */
    tzif(&o, 0, NULL, NULL, 1, offs, "<+0545>-5:45");
    assert_int_equal(parse_buf(&o, &tz), WEIR_OK);
    assert_int_equal(weir_tz_offset(tz, INT64_MIN), 5 * 3600 + 45 * 60);
    weir_tz_free(tz);
    weir_tz_free(NULL);
    assert_string_equal(weir_tz_name(NULL), "UTC");
}

/* A rule given as a footer (the file has no transitions). */
static weir_tz *rule_zone(const char *rule)
{
    static const int32_t off0[] = {0};
    buf o;
    tzif(&o, 0, NULL, NULL, 1, off0, rule);
    weir_tz *tz;
    weir_status st = parse_buf(&o, &tz);
    if (st != WEIR_OK)
        fail_msg("footer '%s': %s", rule, weir_status_name(st));
    return tz;
}

/* Footer rules against the C library's reading of the same TZ strings,
 * 1970..2100, and the forms the C library does not share. */
static void footer_rules(void **unused)
{
    (void)unused;
    weir_tz *tz;
    static const char *const rules[] = {
        "EST5EDT,M3.2.0,M11.1.0",
        "<-03>3",
        "CET-1CEST,M3.5.0,M10.5.0/3",
        "GMT0BST,M3.5.0/1,M10.5.0",
        "<+1030>-10:30<+11>-11,M10.1.0,M4.1.0",
        "<+1245>-12:45<+1345>,M9.5.0/2:45,M4.1.0/3:45",
        "<-04>4<-03>,M9.1.6/24,M4.1.6/24",
        "CST5CDT,M3.2.0/0,M11.1.0/1",
        "EET-2EEST,M3.5.0/0,M10.5.0/0",
        "IST-1GMT0,M10.5.0,M3.5.0/1",
        "<-02>2<-01>,M3.5.0/-1,M10.5.0/0",
        "AAA3BBB,J60/1:30,J300",
        "AAA-3BBB-4:15:30,59/0,299/+3",
        "AAA3BBB2,M2.5.1/-2,M12.4.6/26",
        "XXX+10YYY+9,M4.1.0/3,M10.5.0/2",
        "EST+5EDT,M3.2.0/2,M11.1.0/2",
    };
    for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
        set_libc_tz(rules[i]);
        tz = rule_zone(rules[i]);
        compare_offsets(tz, rules[i], 0, 4102444800, 5 * H + 17);
        weir_tz_free(tz);
    }
    unsetenv("TZ");
    tzset();

    /* RFC 8536 section 3.3.1: hours of a change -167 .. 167. Change on the
     * Sunday of week 1 of March at 167:00 (Saturday 23:00, 6 days later)
     * and of November at -167:00 (6 days 23 h earlier, Sunday 01:00).
     * 2026-03-01 is a Sunday: date -u -d '2026-03-07T23:00Z' +%s ->
     * 1772924400, plus 5 h; 2026-11-01 is a Sunday: '2026-10-25T01:00Z' ->
     * 1792890000, plus 4 h */
    tz = rule_zone("EST5EDT,M3.1.0/167,M11.1.0/-167");
    assert_int_equal(weir_tz_offset(tz, 1772924400 + 5 * H - 1), -5 * H);
    assert_int_equal(weir_tz_offset(tz, 1772924400 + 5 * H), -4 * H);
    assert_int_equal(weir_tz_offset(tz, 1792890000 + 4 * H - 1), -4 * H);
    assert_int_equal(weir_tz_offset(tz, 1792890000 + 4 * H), -5 * H);
    weir_tz_free(tz);
    /* A change that falls in the next year: daylight saving time of 1977
     * ends on Saturday December 31st at 26:00 (M12.5.6/26), 1978-01-01
     * 02:00 -02, 04:00Z (date -u -d '1978-01-01T04:00Z' +%s -> 252475200),
     * where tzcode's localtime.c puts it too (it lays each year's two
     * changes out from that year's January 1st). glibc and Python's
     * zoneinfo read only the changes of the instant's own year and see
     * standard time from 1978-01-01 00:00 -03 on. */
    tz = rule_zone("AAA3BBB2,M2.5.1/-2,M12.5.6/26");
    assert_int_equal(weir_tz_offset(tz, 252475200 - 4 * H), -2 * H);
    assert_int_equal(weir_tz_offset(tz, 252475200 - 1), -2 * H);
    assert_int_equal(weir_tz_offset(tz, 252475200), -3 * H);
    weir_tz_free(tz);
    /* DST all year (section 3.3.1's example) */
    tz = rule_zone("EST5EDT,0/0,J365/25");
    for (int64_t t = -4 * 365 * DAY; t < 100 * 365 * DAY; t += 7 * H + 13)
        if (weir_tz_offset(tz, t) != -4 * H)
            fail_msg("DST all year: %d at %lld", weir_tz_offset(tz, t), (long long)t);
    weir_tz_free(tz);
    /* start and end on the same instant: no DST */
    tz = rule_zone("EST5EDT4,J100/2,J100/3");
    for (int64_t t = 0; t < 10 * 365 * DAY; t += 5 * H + 1)
        assert_int_equal(weir_tz_offset(tz, t), -5 * H);
    weir_tz_free(tz);
    /* the day periods of a rule zone in the far future: 9999 */
    tz = rule_zone("EST5EDT,M3.2.0,M11.1.0");
    /* TZ=EST5EDT,M3.2.0,M11.1.0 date -d '9999-03-14' +%s -> 253377003600,
     * '9999-03-15' -> 253377086400 (23 h) */
    check_period(tz, WEIR_CALENDAR_DAY, 253377003600, 253377086400);
    /* '9999-12-01' -> 253399640400; the period ends in 10000, past date's
     * range: 10000-01-01T05:00Z is date -u -d '9999-01-01' +%s (253370764800)
     * plus 365 days and 5 h */
    period_is(tz, WEIR_CALENDAR_MONTH, 253402300799 * US, 253399640400,
              253370764800 + 365 * DAY + 5 * H);
    weir_tz_free(tz);
}

/* Bytes that are not a TZif file: refused, never a crash. */
static void malformed_files(void **unused)
{
    (void)unused;
    static const int64_t at[] = {-100000, 0, 1000000};
    static const uint8_t idx[] = {1, 2, 1};
    static const int32_t offs[] = {100, -3600, 19800};
    buf good, o;
    weir_tz *tz;
    tzif(&good, 3, at, idx, 3, offs, "EST5EDT,M3.2.0,M11.1.0");
    assert_int_equal(parse_buf(&good, &tz), WEIR_OK);
    weir_tz_free(tz);

    /* every truncation */
    for (size_t n = 0; n < good.n; n++) {
        o = good;
        o.n = n;
        if (parse_buf(&o, &tz) != WEIR_EPARSE)
            fail_msg("truncated at %zu: parsed", n);
    }
    assert_int_equal(weir_tz_parse(ctx, "x", NULL, 0, &tz), WEIR_EPARSE);
    /* trailing bytes */
    o = good;
    put(&o, "x", 1);
    assert_int_equal(parse_buf(&o, &tz), WEIR_EPARSE);

    /* v1 header: 0; v2 header at 44 + 7 (one type, one char) */
    const size_t h2 = 44 + 7;
    static const struct {
        size_t at;
        uint8_t byte;
        const char *what;
    } patches[] = {
        {0, 'X', "bad magic"},
        {3, 'F', "bad magic"},
        {4, '1', "version 1 written as '1'"},
        {4, '5', "version 5"},
        {h2 + 4, '3', "the two headers' versions differ"},
        {h2 + 32 + 2, 0x08, "2051 transitions"},
        {h2 + 36 + 3, 0, "no types"},
        {h2 + 36 + 2, 1, "257+ types"},
        {h2 + 40 + 3, 0, "no abbreviation bytes"},
        {h2 + 40 + 2, 1, "257+ abbreviation bytes"},
        {h2 + 28 + 2, 2, "512 leap seconds"},
        {h2 + 24 + 3, 2, "isstdcnt neither 0 nor typecnt"},
        {h2 + 20 + 3, 1, "isutcnt neither 0 nor typecnt"},
        {h2 + 44 + 8, 0x80, "transitions not increasing"},
        {h2 + 44 + 24 + 1, 3, "a transition to type 3 of 3"},
        {h2 + 44 + 27 + 0, 0x7f, "an offset of +593 days"},
        {h2 + 44 + 27 + 4, 2, "isdst 2"},
        {h2 + 44 + 27 + 5, 4, "abbreviation index past the bytes"},
        {h2 + 44 + 27 + 18 + 3, 'D', "abbreviation without its NUL"},
        {h2 + 44 + 27 + 18 + 4, 'x', "footer without its first newline"},
    };
    for (size_t i = 0; i < sizeof(patches) / sizeof(patches[0]); i++) {
        o = good;
        o.b[patches[i].at] = patches[i].byte;
        if (parse_buf(&o, &tz) != WEIR_EPARSE)
            fail_msg("%s: parsed", patches[i].what);
    }
    /* a v1 block of a v2 file that says more than the file holds */
    o = good;
    o.b[32] = 0x10;
    assert_int_equal(parse_buf(&o, &tz), WEIR_EPARSE);
    /* the caps on transitions and types, in files otherwise well formed */
    static int64_t many_at[2001];
    static uint8_t many_idx[2001];
    static int32_t many_offs[257];
    for (size_t i = 0; i < 2001; i++)
        many_at[i] = (int64_t)i * 600;
    for (size_t i = 0; i < 257; i++)
        many_offs[i] = (int32_t)i * 60;
    tzif(&o, 2000, many_at, many_idx, 256, many_offs, "<-03>3");
    assert_int_equal(parse_buf(&o, &tz), WEIR_OK);
    weir_tz_free(tz);
    tzif(&o, 2001, many_at, many_idx, 1, many_offs, "<-03>3");
    assert_int_equal(parse_buf(&o, &tz), WEIR_EPARSE);
    tzif(&o, 0, NULL, NULL, 257, many_offs, "<-03>3");
    assert_int_equal(parse_buf(&o, &tz), WEIR_EPARSE);
    /* more than WEIR_TZ_MAX_FILE_BYTES */
    uint8_t *big = calloc(1, WEIR_TZ_MAX_FILE_BYTES + 1);
    assert_non_null(big);
    memcpy(big, good.b, good.n);
    assert_int_equal(weir_tz_parse(ctx, "big", big, WEIR_TZ_MAX_FILE_BYTES + 1, &tz), WEIR_EPARSE);
    free(big);

    /* footers */
    static const char *const bad_footers[] = {
        "EST",
        "EST5EDT",
        "EST5EDT,M3.2.0",
        "EST5EDT,M3.2.0,",
        "EST5EDT,M3.2.0,M11.1.0,",
        "EST5EDT,M3.2.0,M11.1.0x",
        "EST5EDT,M13.2.0,M11.1.0",
        "EST5EDT,M0.2.0,M11.1.0",
        "EST5EDT,M3.6.0,M11.1.0",
        "EST5EDT,M3.0.0,M11.1.0",
        "EST5EDT,M3.2.7,M11.1.0",
        "EST5EDT,M3.2,M11.1.0",
        "EST5EDT,J0,J365",
        "EST5EDT,J366,J1",
        "EST5EDT,366,0",
        "EST5EDT,M3.2.0/168,M11.1.0",
        "EST5EDT,M3.2.0/-168,M11.1.0",
        "EST5EDT,M3.2.0/2:60,M11.1.0",
        "EST5EDT,M3.2.0/,M11.1.0",
        "EST25",
        "EST-25",
        "EST5:60",
        "EST5:00:60",
        "EST5:",
        "EST",
        "ES5",
        "<AB>5",
        "<ABC5",
        "<A_C>5",
        "5",
        "EST5ED,M3.2.0,M11.1.0",
        "EST5EDT25,M3.2.0,M11.1.0",
        ":America/New_York",
        "EST5 ",
        " EST5",
        "EST1234",
        "EST5EDT,M3.2.0,M11.1.0/2x",
        "EST5EDT,M3.2.0/0002,M11.1.0",
        "EST5\nEDT",
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA5",
    };
    static const int32_t off0[] = {0};
    for (size_t i = 0; i < sizeof(bad_footers) / sizeof(bad_footers[0]); i++) {
        tzif(&o, 0, NULL, NULL, 1, off0, bad_footers[i]);
        if (parse_buf(&o, &tz) != WEIR_EPARSE)
            fail_msg("footer '%s': parsed", bad_footers[i]);
    }
    /* the footer's closing newline missing */
    tzif(&o, 0, NULL, NULL, 1, off0, "EST5");
    o.n--;
    assert_int_equal(parse_buf(&o, &tz), WEIR_EPARSE);

    /* arguments */
    assert_int_equal(weir_tz_parse(NULL, "x", good.b, good.n, &tz), WEIR_EINVAL);
    assert_int_equal(weir_tz_parse(ctx, NULL, good.b, good.n, &tz), WEIR_EINVAL);
    assert_int_equal(weir_tz_parse(ctx, "x", good.b, good.n, NULL), WEIR_EINVAL);
    assert_int_equal(weir_tz_parse(ctx, "x", NULL, 5, &tz), WEIR_EINVAL);
    char long_name[WEIR_TZ_MAX_NAME_BYTES + 2];
    memset(long_name, 'a', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    assert_int_equal(weir_tz_parse(ctx, long_name, good.b, good.n, &tz), WEIR_EINVAL);
    long_name[WEIR_TZ_MAX_NAME_BYTES] = '\0';
    assert_int_equal(weir_tz_parse(ctx, long_name, good.b, good.n, &tz), WEIR_OK);
    assert_string_equal(weir_tz_name(tz), long_name);
    weir_tz_free(tz);
}

/* A real file cut short anywhere, or with any one byte of its header
 * counts changed, is refused or read, never a crash. */
static void real_file_mutations(void **unused)
{
    (void)unused;
    if (!have_tzdata())
        skip();
    FILE *f = fopen(NY_FILE, "rb");
    assert_non_null(f);
    static uint8_t bytes[WEIR_TZ_MAX_FILE_BYTES];
    size_t n = fread(bytes, 1, sizeof(bytes), f);
    fclose(f);
    weir_tz *tz;
    assert_int_equal(weir_tz_parse(ctx, "ny", bytes, n, &tz), WEIR_OK);
    weir_tz_free(tz);
    for (size_t len = 0; len < n; len++)
        if (weir_tz_parse(ctx, "ny", bytes, len, &tz) != WEIR_EPARSE)
            fail_msg("New York cut at %zu: parsed", len);
    /* a "right/" zone's leap-second records are read and ignored (its
     * transitions count leap seconds, so they fall 27 s early in civil time) */
    if (access("/usr/share/zoneinfo/right/America/New_York", R_OK) == 0) {
        tz = load("right/America/New_York");
        /* TZ=America/New_York date -d '2026-06-01' +%s -> 1780286400 */
        assert_int_equal(weir_tz_offset(tz, 1780286400), -4 * H);
        weir_tz_free(tz);
    }
    for (size_t i = 0; i < 44; i++) {
        uint8_t keep = bytes[i];
        bytes[i] ^= 0x5a;
        weir_status st = weir_tz_parse(ctx, "ny", bytes, n, &tz);
        assert_true(st == WEIR_EPARSE || st == WEIR_OK);
        if (st == WEIR_OK)
            weir_tz_free(tz);
        bytes[i] = keep;
    }
}

/* --------------------------------------------------------------- names */

static void names(void **unused)
{
    (void)unused;
    weir_tz *tz = NULL;
    static const char *const bad[] = {
        "../etc/passwd", "/etc/passwd",      "a/../b", "a/./b", "America//New_York",
        "America/",      "America/New York", " UTC",   "UTC ",  "Europe\\London",
        "a\nb",          "Amérique",         ".",      "..",    "America/New_York.tzif",
        "~/zone",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (weir_tz_load(ctx, bad[i], &tz) != WEIR_EINVAL)
            fail_msg("'%s' accepted", bad[i]);
        assert_null(tz);
    }
    char name[WEIR_TZ_MAX_NAME_BYTES + 2];
    memset(name, 'A', sizeof(name) - 1);
    name[WEIR_TZ_MAX_NAME_BYTES + 1] = '\0';
    assert_int_equal(weir_tz_load(ctx, name, &tz), WEIR_EINVAL); /* 65 bytes */
    name[WEIR_TZ_MAX_NAME_BYTES] = '\0';
    assert_int_equal(weir_tz_load(ctx, name, &tz), WEIR_EIO); /* 64: no such file */
    assert_int_equal(weir_tz_load(ctx, "No/Such_Zone-9+1", &tz), WEIR_EIO);
    assert_int_equal(weir_tz_load(NULL, "UTC", &tz), WEIR_EINVAL);
    assert_int_equal(weir_tz_load(ctx, NULL, &tz), WEIR_EINVAL);
    assert_int_equal(weir_tz_load(ctx, "UTC", NULL), WEIR_EINVAL);

    /* UTC without a file, whatever TZDIR says */
    setenv("TZDIR", "/nonexistent", 1);
    static const struct {
        const char *name, *shown;
    } utc[] = {{"", "UTC"}, {"UTC", "UTC"}, {"Etc/UTC", "Etc/UTC"}};
    for (size_t i = 0; i < sizeof(utc) / sizeof(utc[0]); i++) {
        assert_int_equal(weir_tz_load(ctx, utc[i].name, &tz), WEIR_OK);
        assert_string_equal(weir_tz_name(tz), utc[i].shown);
        assert_int_equal(weir_tz_offset(tz, 1772946000), 0);
        check_period(tz, WEIR_CALENDAR_DAY, 1772928000, 1772928000 + DAY);
        weir_tz_free(tz);
    }
    unsetenv("TZDIR");
    if (!have_tzdata())
        return;
    /* a directory is not a zone */
    assert_int_equal(weir_tz_load(ctx, "America", &tz), WEIR_EIO);
    /* "UTC" through the file's name is read from the file */
    tz = load("Etc/GMT+5");
    assert_int_equal(weir_tz_offset(tz, 0), -5 * H);
    weir_tz_free(tz);
}

/* TZDIR replaces /usr/share/zoneinfo. */
static void tzdir(void **unused)
{
    (void)unused;
    char dir[] = "/tmp/weir-tzdir-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char sub[64], path[96];
    snprintf(sub, sizeof(sub), "%s/Test", dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    snprintf(path, sizeof(path), "%s/Zone-1", sub);
    static const int32_t off[] = {-7 * 3600};
    buf o;
    tzif(&o, 0, NULL, NULL, 1, off, "<-07>7");
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(o.b, 1, o.n, f), o.n);
    fclose(f);

    setenv("TZDIR", dir, 1);
    weir_tz *tz = load("Test/Zone-1");
    assert_string_equal(weir_tz_name(tz), "Test/Zone-1");
    assert_int_equal(weir_tz_offset(tz, 0), -7 * H);
    /* 2026-03-08: date -u -d '2026-03-08T07:00Z' +%s -> 1772953200 */
    check_period(tz, WEIR_CALENDAR_DAY, 1772953200, 1772953200 + DAY);
    weir_tz_free(tz);
    assert_int_equal(weir_tz_load(ctx, "America/New_York", &tz), WEIR_EIO);
    /* a file that is not TZif */
    f = fopen(path, "wb");
    assert_non_null(f);
    fputs("not a zone\n", f);
    fclose(f);
    assert_int_equal(weir_tz_load(ctx, "Test/Zone-1", &tz), WEIR_EPARSE);
    unsetenv("TZDIR");
    unlink(path);
    rmdir(sub);
    rmdir(dir);
}

/* ----------------------------------------------------- calendar API */

static void calendar_api(void **unused)
{
    (void)unused;
    int64_t s = 7, e = 7;
    /* UTC (NULL) */
    /* date -u -d '2026-11-26' +%s -> 1795651200 */
    check_period(NULL, WEIR_CALENDAR_DAY, 1795651200, 1795651200 + DAY);
    /* date -u -d '1969-12-31' +%s -> -86400: negative instants */
    check_period(NULL, WEIR_CALENDAR_DAY, -DAY, 0);
    /* date -u -d '1900-02-01' +%s -> -2206310400; '1900-03-01' -> -2203891200
     * (1900 is not a leap year) */
    check_period(NULL, WEIR_CALENDAR_MONTH, -2206310400, -2203891200);
    /* date -u -d '2000-02-01' +%s -> 949363200; '2000-03-01' -> 951868800 (29 days) */
    check_period(NULL, WEIR_CALENDAR_MONTH, 949363200, 951868800);
    /* December rolls over: '2026-12-01' -> 1796083200, '2027-01-01' -> 1798761600 */
    check_period(NULL, WEIR_CALENDAR_MONTH, 1796083200, 1798761600);
    /* the first and the last instants taken: date -u -d '0001-01-01' +%s
     * -> -62135596800, '0001-01-02' -> -62135510400 */
    period_is(NULL, WEIR_CALENDAR_DAY, -62135596800 * US, -62135596800, -62135510400);
    period_is(NULL, WEIR_CALENDAR_DAY, -62135510400 * US - 1, -62135596800, -62135510400);
    period_is(NULL, WEIR_CALENDAR_YEAR, 253402300799 * US, 253370764800, 253402300800);

    assert_int_equal(weir_calendar_period(NULL, WEIR_CALENDAR_DAY, -62135596800 * US - 1, &s, &e),
                     WEIR_ERANGE);
    assert_int_equal(weir_calendar_period(NULL, WEIR_CALENDAR_DAY, 253402300800 * US, &s, &e),
                     WEIR_ERANGE);
    assert_int_equal(weir_calendar_period(NULL, WEIR_CALENDAR_DAY, INT64_MIN, &s, &e), WEIR_ERANGE);
    assert_int_equal(weir_calendar_period(NULL, WEIR_CALENDAR_DAY, INT64_MAX, &s, &e), WEIR_ERANGE);
    assert_int_equal(weir_calendar_period(NULL, WEIR_CALENDAR_NONE, 0, &s, &e), WEIR_EINVAL);
    assert_int_equal(weir_calendar_period(NULL, (weir_calendar)4, 0, &s, &e), WEIR_EINVAL);
    assert_int_equal(weir_calendar_period(NULL, WEIR_CALENDAR_DAY, 0, NULL, &e), WEIR_EINVAL);
    assert_int_equal(weir_calendar_period(NULL, WEIR_CALENDAR_DAY, 0, &s, NULL), WEIR_EINVAL);
    assert_int_equal(s, 7);
    assert_int_equal(e, 7);

    weir_calendar cal = WEIR_CALENDAR_NONE;
    assert_int_equal(weir_calendar_parse("day", 3, &cal), WEIR_OK);
    assert_int_equal(cal, WEIR_CALENDAR_DAY);
    assert_int_equal(weir_calendar_parse("monthly", 5, &cal), WEIR_OK);
    assert_int_equal(cal, WEIR_CALENDAR_MONTH);
    assert_int_equal(weir_calendar_parse("year", 4, &cal), WEIR_OK);
    assert_int_equal(cal, WEIR_CALENDAR_YEAR);
    static const char *const bad[] = {"", "Day", "days", "none", "week", "yea", "year "};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cal = WEIR_CALENDAR_NONE;
        assert_int_equal(weir_calendar_parse(bad[i], strlen(bad[i]), &cal), WEIR_EINVAL);
        assert_int_equal(cal, WEIR_CALENDAR_NONE);
    }
    assert_int_equal(weir_calendar_parse("day", 4, &cal), WEIR_EINVAL); /* the NUL counted */
    assert_int_equal(weir_calendar_parse(NULL, 0, &cal), WEIR_EINVAL);
    assert_int_equal(weir_calendar_parse("day", 3, NULL), WEIR_EINVAL);
    assert_string_equal(weir_calendar_name(WEIR_CALENDAR_NONE), "none");
    assert_string_equal(weir_calendar_name(WEIR_CALENDAR_DAY), "day");
    assert_string_equal(weir_calendar_name(WEIR_CALENDAR_MONTH), "month");
    assert_string_equal(weir_calendar_name(WEIR_CALENDAR_YEAR), "year");
    assert_null(weir_calendar_name((weir_calendar)9));
}

/* Periods tile the time line: in real zones over 1900..2100, each period
 * holds its instant and the next starts where it ends. */
static void periods_tile(void **unused)
{
    (void)unused;
    if (!have_tzdata())
        skip();
    static const char *const zones[] = {"America/Havana", "Pacific/Apia", "Australia/Lord_Howe",
                                        "America/Santiago", "Asia/Beirut"};
    for (size_t i = 0; i < sizeof(zones) / sizeof(zones[0]); i++) {
        weir_tz *tz = load(zones[i]);
        for (weir_calendar cal = WEIR_CALENDAR_DAY; cal <= WEIR_CALENDAR_YEAR; cal++) {
            int64_t s, e, s2, e2;
            int64_t t = -2208988800 * US;
            assert_int_equal(weir_calendar_period(tz, cal, t, &s, &e), WEIR_OK);
            int64_t stop = cal == WEIR_CALENDAR_DAY ? 2100 : 2400;
            stop = (stop - 1970) * 365 * DAY * US;
            while (e < stop) {
                assert_true(s <= t && t < e);
                int64_t len = (e - s) / US;
                if (cal == WEIR_CALENDAR_DAY && (len < 22 * H || len > 26 * H))
                    fail_msg("%s: day [%lld, %lld) of %lld s", zones[i], (long long)(s / US),
                             (long long)(e / US), (long long)len);
                assert_int_equal(weir_calendar_period(tz, cal, e - 1, &s2, &e2), WEIR_OK);
                assert_true(s2 == s && e2 == e);
                assert_int_equal(weir_calendar_period(tz, cal, e, &s2, &e2), WEIR_OK);
                assert_int_equal(s2, e);
                t = e;
                s = s2;
                e = e2;
            }
        }
        weir_tz_free(tz);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pinned_zones),    cmocka_unit_test(midnight_gaps_and_repeats),
        cmocka_unit_test(offsets),         cmocka_unit_test(offsets_match_libc),
        cmocka_unit_test(made_files),      cmocka_unit_test(footer_rules),
        cmocka_unit_test(malformed_files), cmocka_unit_test(real_file_mutations),
        cmocka_unit_test(names),           cmocka_unit_test(tzdir),
        cmocka_unit_test(calendar_api),    cmocka_unit_test(periods_tile),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
