/*
 * units.c - the duration and size grammar (weir/units.h). Numbers are read
 * as an exact whole part and a fraction of at most 18 digits, in 128-bit
 * arithmetic, so "1.5s" and "0.001ms" are exact and nothing rounds.
 */
#include <string.h>
#include <strings.h>

#include "weir/algo.h"
#include "weir/units.h"

__extension__ typedef unsigned __int128 u128;

/* Past this the whole part is too big for any unit. */
#define WHOLE_CAP ((u128)UINT64_MAX * 2u)
#define MAX_FRACTION_DIGITS 18u

static bool digit(char c)
{
    return c >= '0' && c <= '9';
}

/* A number at *p: its whole part, fraction and the fraction's scale.
 * False when there is none ("", ".5", "1."). */
typedef struct number {
    u128 whole, frac, scale;
    bool too_big, too_fine;
} number;

static bool read_number(const char **p, number *n)
{
    const char *s = *p;
    *n = (number){0, 0, 1, false, false};
    if (!digit(*s))
        return false;
    for (; digit(*s); s++) {
        if (n->whole > WHOLE_CAP)
            n->too_big = true;
        else
            n->whole = n->whole * 10 + (unsigned)(*s - '0');
    }
    if (*s == '.') {
        s++;
        if (!digit(*s))
            return false;
        for (unsigned nf = 0; digit(*s); s++, nf++) {
            if (nf < MAX_FRACTION_DIGITS) {
                n->frac = n->frac * 10 + (unsigned)(*s - '0');
                n->scale *= 10;
            } else if (*s != '0') {
                n->too_fine = true;
            }
        }
    }
    *p = s;
    return true;
}

/* @n times @unit, exactly: WEIR_EPARSE when the fraction does not come to
 * whole units of the result, WEIR_ERANGE past @max. */
static weir_status scale_by(const number *n, u128 unit, u128 max, u128 *out)
{
    if (n->too_fine || (n->frac * unit) % n->scale != 0)
        return WEIR_EPARSE;
    if (n->too_big || n->whole > max / (unit ? unit : 1))
        return WEIR_ERANGE;
    u128 v = n->whole * unit + n->frac * unit / n->scale;
    if (v > max)
        return WEIR_ERANGE;
    *out = v;
    return WEIR_OK;
}

static const struct {
    const char *name;
    int64_t us;
} duration_units[] = {
    /* longest first where one name begins another ("ms" before "m") */
    {"us", 1},         {"ms", 1000},       {"s", 1000000},      {"m", 60000000},
    {"h", 3600000000}, {"d", 86400000000}, {"w", 604800000000},
};

weir_status weir_duration_parse(const char *s, int64_t *out_us)
{
    if (!s || !out_us)
        return WEIR_EINVAL;
    const char *p = s;
    u128 total = 0;
    bool big = false;
    int parts = 0;
    while (*p) {
        number n;
        if (!read_number(&p, &n))
            return WEIR_EPARSE;
        int64_t unit = 0;
        size_t len = 0;
        for (size_t i = 0; i < sizeof(duration_units) / sizeof(duration_units[0]); i++) {
            size_t l = strlen(duration_units[i].name);
            if (strncmp(p, duration_units[i].name, l) == 0 && !(p[l] >= 'a' && p[l] <= 'z')) {
                unit = duration_units[i].us;
                len = l;
                break;
            }
        }
        if (!unit) {
            /* a bare number is seconds, when it is the whole text */
            if (*p != '\0' || parts > 0)
                return WEIR_EPARSE;
            unit = 1000000;
        }
        p += len;
        parts++;
        u128 v;
        weir_status st = scale_by(&n, (u128)unit, (u128)WEIR_MAX_WINDOW_US, &v);
        if (st == WEIR_EPARSE)
            return st;
        if (st == WEIR_ERANGE || (total += v) > (u128)WEIR_MAX_WINDOW_US)
            big = true;
    }
    if (parts == 0)
        return WEIR_EPARSE;
    if (big)
        return WEIR_ERANGE;
    *out_us = (int64_t)total;
    return WEIR_OK;
}

weir_status weir_size_parse(const char *s, uint64_t *out)
{
    static const struct {
        const char *name;
        uint64_t mult;
    } units[] = {
        {"", 1},
        {"b", 1},
        {"k", 1000},
        {"kb", 1000},
        {"kib", 1024},
        {"m", 1000000},
        {"mb", 1000000},
        {"mib", 1048576},
        {"g", 1000000000},
        {"gb", 1000000000},
        {"gib", 1073741824},
        {"t", 1000000000000},
        {"tb", 1000000000000},
        {"tib", 1099511627776},
    };
    if (!s || !out)
        return WEIR_EINVAL;
    const char *p = s;
    number n;
    if (!read_number(&p, &n))
        return WEIR_EPARSE;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcasecmp(p, units[i].name) != 0)
            continue;
        u128 v;
        weir_status st = scale_by(&n, units[i].mult, UINT64_MAX, &v);
        if (st == WEIR_OK)
            *out = (uint64_t)v;
        return st;
    }
    return WEIR_EPARSE;
}
