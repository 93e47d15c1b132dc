/*
 * calendar.c - civil dates (proleptic Gregorian, in integers) and the
 * calendar periods of weir/calendar.h.
 *
 * A zone's local time is local(t) = t + offset(t). The period that starts
 * at local civil time L starts at the instant
 *
 *     B(L) = the first instant t with local(t) >= L.
 *
 * That one definition gives both rules of the header: when the offset
 * jumps over L (a midnight that does not exist), local time first reaches
 * L at the jump, the first instant after the gap; when the offset turns
 * back over L (a midnight that happens twice), the first time it is
 * reached wins. B never decreases as L grows, so with L_k the local starts
 * of successive periods, the instants B(L_k) cut the time line into
 * periods without gaps or overlaps; the period holding `now` is the one of
 * the last L_k with B(L_k) <= now, and it ends at B(L_k+1). A period two
 * starts fall into (a day the zone skips) is empty and never returned.
 *
 * B(L) is found by walking the offset's constant stretches from L - 26 h
 * (before it, local time is below L whatever the offset): on a stretch
 * [a, b) of offset o, local time reaches L at max(a, L - o) if that is
 * before b. The walk ends by L + 26 h at the latest.
 */
#include <string.h>

#include "core/tz.h"

/* Instants weir_calendar_period() takes: 0001-01-01 .. 9999-12-31 UTC. */
#define FIRST_SECOND (-62135596800LL)
#define END_SECOND 253402300800LL
#define US_PER_S 1000000

int64_t weir__floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

bool weir__leap_year(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* Howard Hinnant's days_from_civil / civil_from_days, in eras of 400 years
 * (146097 days); exact for every year whose day count fits. */
int64_t weir__days_from_civil(int64_t y, int32_t m, int32_t d)
{
    y -= m <= 2;
    int64_t era = weir__floor_div(y, 400);
    int64_t yoe = y - era * 400;                                   /* 0 .. 399 */
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1; /* 0 .. 365 */
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;           /* 0 .. 146096 */
    return era * 146097 + doe - 719468;
}

void weir__civil_from_days(int64_t days, int64_t *y, int32_t *m, int32_t *d)
{
    days += 719468;
    int64_t era = weir__floor_div(days, 146097);
    int64_t doe = days - era * 146097;                                   /* 0 .. 146096 */
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365; /* 0 .. 399 */
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);               /* 0 .. 365 */
    int64_t mp = (5 * doy + 2) / 153;                                    /* 0 .. 11 */
    *d = (int32_t)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int32_t)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

/* B(L) of the header comment, for |L| well inside the int64 range. */
static int64_t first_reaching(const weir_tz *tz, int64_t local)
{
    if (!tz)
        return local;
    int64_t t = local - TZ_OFFSET_SPAN;
    for (;;) {
        int64_t next;
        int32_t off = weir__tz_segment(tz, t, &next);
        int64_t at = local - off;
        if (at < t)
            at = t;
        if (at < next)
            return at;
        t = next;
    }
}

/* The local start (seconds of local civil time since 1970-01-01 00:00) of
 * the period of @cal holding the local time @local, and of the next one. */
static void local_period(weir_calendar cal, int64_t local, int64_t *start, int64_t *next)
{
    int64_t days = weir__floor_div(local, TZ_SECS_PER_DAY);
    int64_t y;
    int32_t m, d;
    weir__civil_from_days(days, &y, &m, &d);
    if (cal == WEIR_CALENDAR_DAY) {
        *start = days * TZ_SECS_PER_DAY;
        *next = *start + TZ_SECS_PER_DAY;
    } else if (cal == WEIR_CALENDAR_MONTH) {
        *start = weir__days_from_civil(y, m, 1) * TZ_SECS_PER_DAY;
        *next =
            weir__days_from_civil(m == 12 ? y + 1 : y, m == 12 ? 1 : m + 1, 1) * TZ_SECS_PER_DAY;
    } else {
        *start = weir__days_from_civil(y, 1, 1) * TZ_SECS_PER_DAY;
        *next = weir__days_from_civil(y + 1, 1, 1) * TZ_SECS_PER_DAY;
    }
}

weir_status weir_calendar_period(const weir_tz *tz, weir_calendar cal, int64_t now_us,
                                 int64_t *start_us, int64_t *end_us)
{
    if (!start_us || !end_us ||
        (cal != WEIR_CALENDAR_DAY && cal != WEIR_CALENDAR_MONTH && cal != WEIR_CALENDAR_YEAR))
        return WEIR_EINVAL;
    int64_t now = weir__floor_div(now_us, US_PER_S);
    if (now < FIRST_SECOND || now >= END_SECOND)
        return WEIR_ERANGE;
    /* local(now) >= L, so B(L) <= now: then move on while the next start
     * has come already (local time turned back over it) */
    int64_t local_start, local_next;
    local_period(cal, now + weir_tz_offset(tz, now), &local_start, &local_next);
    int64_t start = first_reaching(tz, local_start);
    int64_t end = first_reaching(tz, local_next);
    while (end <= now) {
        start = end;
        local_period(cal, local_next, &local_start, &local_next);
        end = first_reaching(tz, local_next);
    }
    *start_us = start * US_PER_S;
    *end_us = end * US_PER_S;
    return WEIR_OK;
}

weir_status weir_calendar_parse(const char *s, size_t n, weir_calendar *out)
{
    if ((!s && n) || !out)
        return WEIR_EINVAL;
    for (weir_calendar c = WEIR_CALENDAR_DAY; c <= WEIR_CALENDAR_YEAR; c++) {
        const char *name = weir_calendar_name(c);
        if (n == strlen(name) && memcmp(s, name, n) == 0) {
            *out = c;
            return WEIR_OK;
        }
    }
    return WEIR_EINVAL;
}

const char *weir_calendar_name(weir_calendar cal)
{
    static const char *const names[] = {"none", "day", "month", "year"};
    return (unsigned)cal < sizeof(names) / sizeof(names[0]) ? names[cal] : NULL;
}
