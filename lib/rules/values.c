/*
 * values.c - the scalar conversions of rule files: whole numbers, booleans,
 * rate limit units and weir's window durations.
 *
 * Invariant: a conversion writes its output only on success, and every
 * number it produces is within the bound it was given (durations within
 * 1 .. WEIR_MAX_WINDOW_US); overflow is detected, never wrapped.
 */
#include <string.h>
#include <strings.h>

#include "rules/loader.h"
#include "weir/units.h"

#define US_PER_S INT64_C(1000000)
#define US_PER_DAY (86400 * US_PER_S)

const char *weir__rules_parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    /* Decimal digits only: YAML 1.1's octal, hex and sexagesimal forms
     * would turn a typo into a surprising limit. */
    if (s[0] == '-' && s[1] >= '0' && s[1] <= '9')
        return "must not be negative";
    if (s[0] == '\0')
        return "must be a whole number";
    uint64_t v = 0;
    bool big = false;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return "must be a whole number";
        if (__builtin_mul_overflow(v, 10u, &v) ||
            __builtin_add_overflow(v, (uint64_t)(*p - '0'), &v))
            big = true;
    }
    if (big || v > max)
        return "is too large";
    *out = v;
    return NULL;
}

const char *weir__rules_parse_bool(const char *s, bool *out)
{
    /* The YAML 1.1 spellings upstream's Go decoder accepts. */
    static const char *const yes[] = {"true", "yes", "on", "y"};
    static const char *const no[] = {"false", "no", "off", "n"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = true;
            return NULL;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = false;
            return NULL;
        }
    }
    return "must be true or false";
}

typedef struct unit_row {
    const char *name;
    weir_rule_unit unit;
    int64_t us;
} unit_row;

static const unit_row units[] = {
    {"second", WEIR_UNIT_SECOND, US_PER_S},     {"minute", WEIR_UNIT_MINUTE, 60 * US_PER_S},
    {"hour", WEIR_UNIT_HOUR, 3600 * US_PER_S},  {"day", WEIR_UNIT_DAY, US_PER_DAY},
    {"week", WEIR_UNIT_WEEK, 7 * US_PER_DAY},   {"month", WEIR_UNIT_MONTH, 30 * US_PER_DAY},
    {"year", WEIR_UNIT_YEAR, 365 * US_PER_DAY},
};

bool weir__rules_parse_unit(const char *s, weir_rule_unit *unit, int64_t *window_us)
{
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcasecmp(s, units[i].name) == 0) {
            *unit = units[i].unit;
            *window_us = units[i].us;
            return true;
        }
    }
    return false;
}

const char *weir_rule_unit_name(weir_rule_unit unit)
{
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (units[i].unit == unit)
            return units[i].name;
    }
    return NULL;
}

const char *weir__rules_parse_duration(const char *s, int64_t *out_us)
{
    int64_t us;
    switch (weir_duration_parse(s, &us)) {
    case WEIR_OK:
        break;
    case WEIR_ERANGE:
        return "is too long (at most 100 years)";
    default:
        return "is not a duration (e.g. " WEIR_DURATION_EXAMPLES ")";
    }
    if (us <= 0)
        return "must be positive";
    *out_us = us;
    return NULL;
}

bool weir__rules_parse_share(const char *s, uint32_t *ppm)
{
    /* "0.25", "1", "25%": a decimal of at most six places, exact in
     * millionths; no floating point, so "0.1" is exactly 100000 */
    uint64_t whole = 0, frac = 0;
    int places = 0;
    const char *p = s;
    if (*p < '0' || *p > '9')
        return false;
    while (*p >= '0' && *p <= '9' && whole <= 1000)
        whole = whole * 10 + (uint64_t)(*p++ - '0');
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9') {
            if (places == 6)
                return false;
            frac = frac * 10 + (uint64_t)(*p++ - '0');
            places++;
        }
    }
    for (int i = places; i < 6; i++)
        frac *= 10;
    uint64_t v = whole * 1000000 + frac;
    if (*p == '%') {
        p++;
        v /= 100;
    }
    if (*p != '\0' || v == 0 || v > 1000000)
        return false;
    *ppm = (uint32_t)v;
    return true;
}
