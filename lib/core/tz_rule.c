/*
 * tz_rule.c - the POSIX TZ string of a TZif footer (RFC 8536 section 3.3):
 * parsing it, and the offset it gives at an instant.
 *
 *   std offset [dst [offset] [,start[/time],end[/time]]]
 *
 * A name is three or more letters, or <...> around three or more of
 * [A-Za-z0-9+-]. An offset is [+-]hh[:mm[:ss]] with hh 0..24, positive WEST
 * of Greenwich; the daylight saving offset defaults to one hour east of
 * standard time. A date is Jn (1..365, February 29th never counted), n
 * (0..365, counted) or Mm.w.d (day d, 0 = Sunday, of week w, 5 = the last,
 * of month m); a time is [+-]hhh[:mm[:ss]] with hours -167..167 (RFC 8536
 * section 3.3.1), 02:00:00 by default, local time then in force: the start
 * in standard time, the end in daylight saving time. A daylight saving
 * time without its rule is refused (POSIX leaves its dates to the
 * implementation; zic always writes them).
 *
 * Evaluation: each year y has a start s(y) and an end e(y) as UTC
 * instants. s < e (northern) gives daylight saving time on [s, e), s > e
 * (southern) standard time on [e, s); s == e gives none that year, and
 * e - s of a whole year or more is daylight saving time all year (RFC 8536
 * section 3.3.1's "DST all year", e.g. "EST5EDT,0/0,J365/25"). The
 * offset at t is set by the last change at or before t among those of the
 * UTC year of t and its two neighbours, which covers every change that can
 * fall in that year (a change lies within 167 + 25 hours of its own year).
 */
#include <string.h>

#include "core/tz.h"

#define DEFAULT_CHANGE_TIME 7200 /* 02:00:00 */
#define MAX_OFFSET_HOURS 24
#define MAX_CHANGE_HOURS 167

typedef struct cursor {
    const char *p, *end;
} cursor;

static bool at_end(const cursor *c)
{
    return c->p == c->end;
}

static bool next_is(const cursor *c, char ch)
{
    return c->p < c->end && *c->p == ch;
}

static bool eat(cursor *c, char ch)
{
    if (!next_is(c, ch))
        return false;
    c->p++;
    return true;
}

static bool is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

static bool is_alpha(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}

/* 1 .. @max_digits digits, valued @lo .. @hi. */
static bool number(cursor *c, int max_digits, int32_t lo, int32_t hi, int32_t *out)
{
    int32_t v = 0;
    int n = 0;
    while (c->p < c->end && is_digit(*c->p)) {
        if (++n > max_digits)
            return false;
        v = v * 10 + (*c->p - '0');
        c->p++;
    }
    if (n == 0 || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* A zone abbreviation: <...> quoted or bare letters; three at least. */
static bool abbreviation(cursor *c)
{
    const char *from = c->p;
    if (eat(c, '<')) {
        from = c->p;
        while (c->p < c->end &&
               (is_alpha(*c->p) || is_digit(*c->p) || *c->p == '+' || *c->p == '-'))
            c->p++;
        return c->p - from >= 3 && eat(c, '>');
    }
    while (c->p < c->end && is_alpha(*c->p))
        c->p++;
    return c->p - from >= 3;
}

/* [+-]hh[:mm[:ss]], hh 0..@max_hours: signed seconds. */
static bool clock_time(cursor *c, int32_t max_hours, int32_t *out)
{
    int32_t sign = 1, h, m = 0, s = 0;
    if (eat(c, '-'))
        sign = -1;
    else
        (void)eat(c, '+');
    if (!number(c, 3, 0, max_hours, &h))
        return false;
    if (eat(c, ':')) {
        if (!number(c, 2, 0, 59, &m))
            return false;
        if (eat(c, ':') && !number(c, 2, 0, 59, &s))
            return false;
    }
    *out = sign * (h * 3600 + m * 60 + s);
    return true;
}

/* An offset as written (west positive) -> seconds east. */
static bool offset(cursor *c, int32_t *east)
{
    int32_t west;
    if (!clock_time(c, MAX_OFFSET_HOURS, &west))
        return false;
    *east = -west;
    return true;
}

static bool change_date(cursor *c, tz_date *d)
{
    memset(d, 0, sizeof(*d));
    if (eat(c, 'J')) {
        d->kind = TZ_DATE_JULIAN1;
        if (!number(c, 3, 1, 365, &d->day))
            return false;
    } else if (eat(c, 'M')) {
        d->kind = TZ_DATE_MONTH;
        if (!number(c, 2, 1, 12, &d->month) || !eat(c, '.') || !number(c, 1, 1, 5, &d->week) ||
            !eat(c, '.') || !number(c, 1, 0, 6, &d->day))
            return false;
    } else {
        d->kind = TZ_DATE_JULIAN0;
        if (!number(c, 3, 0, 365, &d->day))
            return false;
    }
    d->time = DEFAULT_CHANGE_TIME;
    return !eat(c, '/') || clock_time(c, MAX_CHANGE_HOURS, &d->time);
}

bool weir__tz_rule_parse(const char *s, size_t n, tz_rule *out)
{
    cursor c = {s, s + n};
    tz_rule r;
    memset(&r, 0, sizeof(r));
    if (!abbreviation(&c) || !offset(&c, &r.std_off))
        return false;
    if (!at_end(&c)) {
        if (!abbreviation(&c))
            return false;
        r.has_dst = true;
        r.dst_off = r.std_off + 3600;
        if (!next_is(&c, ',') && !offset(&c, &r.dst_off))
            return false;
        if (!eat(&c, ',') || !change_date(&c, &r.start) || !eat(&c, ',') ||
            !change_date(&c, &r.end) || !at_end(&c))
            return false;
    }
    *out = r;
    return true;
}

/* The UTC instant of a change in year @y, its time read at offset @off. */
static int64_t change_at(int64_t y, const tz_date *d, int32_t off)
{
    int64_t day;
    if (d->kind == TZ_DATE_MONTH) {
        static const int32_t month_days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
        int64_t first = weir__days_from_civil(y, d->month, 1);
        int32_t len = month_days[d->month - 1] + (d->month == 2 && weir__leap_year(y));
        /* 1970-01-01 was a Thursday (4) */
        int32_t wday = (int32_t)(first + 4 - weir__floor_div(first + 4, 7) * 7);
        int32_t dom = (d->day - wday + 7) % 7 + (d->week - 1) * 7;
        while (dom >= len)
            dom -= 7;
        day = first + dom;
    } else {
        day = weir__days_from_civil(y, 1, 1) + d->day;
        if (d->kind == TZ_DATE_JULIAN1 && !(weir__leap_year(y) && d->day >= 60))
            day--;
    }
    return day * TZ_SECS_PER_DAY + d->time - off;
}

typedef struct change {
    int64_t at;
    bool dst;
} change;

/* The changes of year @y, in order (0 or 2); *all_dst when daylight saving
 * time lasts the whole year. */
static int year_changes(const tz_rule *r, int64_t y, change out[2], bool *all_dst)
{
    int64_t s = change_at(y, &r->start, r->std_off);
    int64_t e = change_at(y, &r->end, r->dst_off);
    int64_t year_secs = (weir__leap_year(y) ? 366 : 365) * (int64_t)TZ_SECS_PER_DAY;
    *all_dst = s < e && e - s >= year_secs;
    if (s == e || *all_dst)
        return 0;
    change a = {s, true}, b = {e, false};
    out[0] = s < e ? a : b;
    out[1] = s < e ? b : a;
    return 2;
}

int32_t weir__tz_rule_segment(const tz_rule *r, int64_t t, int64_t *next)
{
    if (!r->has_dst) {
        *next = INT64_MAX;
        return r->std_off;
    }
    /* (bounds that keep every year's arithmetic far from overflow) */
    if (t > TZ_INSTANT_BOUND) {
        int32_t off = weir__tz_rule_segment(r, TZ_INSTANT_BOUND, next);
        *next = INT64_MAX;
        return off;
    }
    if (t < -TZ_INSTANT_BOUND) {
        int32_t off = weir__tz_rule_segment(r, -TZ_INSTANT_BOUND, next);
        *next = -TZ_INSTANT_BOUND;
        return off;
    }
    int64_t year;
    int32_t month, mday;
    weir__civil_from_days(weir__floor_div(t, TZ_SECS_PER_DAY), &year, &month, &mday);

    change all[6];
    int n = 0;
    bool all_dst_before = false;
    for (int64_t y = year - 1; y <= year + 1; y++) {
        bool all_dst;
        n += year_changes(r, y, all + n, &all_dst);
        if (y == year - 1)
            all_dst_before = all_dst;
    }
    /* insertion sort, stable: ties keep the year's order */
    for (int i = 1; i < n; i++) {
        change v = all[i];
        int j = i;
        for (; j > 0 && all[j - 1].at > v.at; j--)
            all[j] = all[j - 1];
        all[j] = v;
    }
    bool dst = all_dst_before;
    int64_t nx = weir__days_from_civil(year + 1, 1, 1) * TZ_SECS_PER_DAY;
    for (int i = 0; i < n; i++) {
        if (all[i].at > t) {
            if (all[i].at < nx)
                nx = all[i].at;
            break;
        }
        dst = all[i].dst;
    }
    *next = nx;
    return dst ? r->dst_off : r->std_off;
}
