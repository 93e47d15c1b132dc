/*
 * rfc3339.c - RFC 3339 date-times to and from Unix microseconds.
 *
 * Civil dates are converted with integer arithmetic over 400-year eras of
 * the proleptic Gregorian calendar (146,097 days each), not timegm() or
 * mktime(): those read the process's time zone and locale state (mktime
 * even normalises Feb 30 into March 2 instead of refusing it), timegm is
 * not in C11 or POSIX, and a time_t round trip says nothing about the
 * ranges we check here field by field.
 */
#include <stdio.h>

#include "rfc3339.h"

#define US_PER_S INT64_C(1000000)
#define S_PER_DAY INT64_C(86400)

/* Days from 1970-01-01 to @y-@m-@d (@m 1..12, @d 1..31; negative before
 * 1970). March-based years put the leap day last, so a day of the year
 * is a plain formula of the month. */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);                       /* 0 .. 399 */
    unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1; /* 0 .. 365 */
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;           /* 0 .. 146096 */
    return era * 146097 + (int64_t)doe - 719468;
}

/* The inverse of days_from_civil(). */
static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

static unsigned days_in_month(unsigned y, unsigned m)
{
    static const unsigned char days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : days[m - 1];
}

/* Exactly @width decimal digits at @s. */
static bool fixed(const char *s, size_t width, unsigned *v)
{
    unsigned x = 0;
    for (size_t i = 0; i < width; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        x = x * 10 + (unsigned)(s[i] - '0');
    }
    *v = x;
    return true;
}

/* "-HH:MM" / "+HH:MM" / "Z" at s[0 .. n): the offset east of UTC in
 * seconds. */
static bool zone(const char *s, size_t n, int64_t *east_s)
{
    if (n == 1 && (s[0] == 'Z' || s[0] == 'z')) {
        *east_s = 0;
        return true;
    }
    unsigned h, m;
    if (n != 6 || (s[0] != '+' && s[0] != '-') || !fixed(s + 1, 2, &h) || s[3] != ':' ||
        !fixed(s + 4, 2, &m) || h > 23 || m > 59)
        return false;
    *east_s = (int64_t)(h * 3600 + m * 60) * (s[0] == '-' ? -1 : 1);
    return true;
}

bool quota_time_parse(const char *s, size_t n, int64_t *us)
{
    /* YYYY-MM-DDTHH:MM:SS, 19 bytes, then the fraction and the zone */
    unsigned y, mo, d, h, mi, sec;
    if (n < 20 || !fixed(s, 4, &y) || s[4] != '-' || !fixed(s + 5, 2, &mo) || s[7] != '-' ||
        !fixed(s + 8, 2, &d) || (s[10] != 'T' && s[10] != 't') || !fixed(s + 11, 2, &h) ||
        s[13] != ':' || !fixed(s + 14, 2, &mi) || s[16] != ':' || !fixed(s + 17, 2, &sec))
        return false;
    if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 ||
        sec > 59)
        return false;
    size_t i = 19;
    int64_t frac_us = 0;
    if (s[i] == '.') {
        size_t first = ++i;
        int64_t scale = US_PER_S;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            if (i - first == 6)
                return false; /* finer than a microsecond */
            scale /= 10;
            frac_us += (s[i] - '0') * scale;
            i++;
        }
        if (i == first)
            return false;
    }
    int64_t east_s;
    if (!zone(s + i, n - i, &east_s))
        return false;
    int64_t t = days_from_civil(y, mo, d) * S_PER_DAY + h * 3600 + mi * 60 + sec - east_s;
    if (t < 0 || t >= days_from_civil(10000, 1, 1) * S_PER_DAY)
        return false;
    *us = t * US_PER_S + frac_us;
    return true;
}

/* @a / @b rounded down, and what remains (0 .. @b - 1), without the
 * overflow of a - q * b at INT64_MIN. */
static int64_t floor_divmod(int64_t a, int64_t b, int64_t *rem)
{
    int64_t q = a / b, r = a % b;
    if (r < 0) {
        r += b;
        q--;
    }
    *rem = r;
    return q;
}

size_t quota_time_format(int64_t us, char out[QUOTA_TIME_TEXT_MAX])
{
    int64_t frac_us, sod;
    int64_t days = floor_divmod(floor_divmod(us, US_PER_S, &frac_us), S_PER_DAY, &sod);
    int64_t y;
    unsigned m, d;
    civil_from_days(days, &y, &m, &d);
    int n = snprintf(out, QUOTA_TIME_TEXT_MAX, "%s%04lld-%02u-%02uT%02u:%02u:%02u",
                     y < 0 ? "-" : "", (long long)(y < 0 ? -y : y), m, d, (unsigned)(sod / 3600),
                     (unsigned)(sod / 60 % 60), (unsigned)(sod % 60));
    if (frac_us)
        n += snprintf(out + n, QUOTA_TIME_TEXT_MAX - (size_t)n, ".%06u", (unsigned)frac_us);
    n += snprintf(out + n, QUOTA_TIME_TEXT_MAX - (size_t)n, "Z");
    return (size_t)n;
}
