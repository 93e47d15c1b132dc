/*
 * tz.h - a loaded time zone's private layout, the POSIX TZ rule of its
 * footer (tz_rule.c) and the civil-date arithmetic (calendar.c) they share.
 */
#ifndef WEIR_CORE_TZ_H
#define WEIR_CORE_TZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weir/calendar.h"

/* Offsets from UTC a zone may have, in seconds east (RFC 8536 section 3.2:
 * -24:59:59 .. +25:59:59). Every local time is within TZ_OFFSET_SPAN
 * seconds of its UTC instant. */
#define TZ_OFFSET_MIN (-89999)
#define TZ_OFFSET_MAX 93599
#define TZ_OFFSET_SPAN 93600

/* weir_tz_offset() takes the offset at this bound for instants beyond it,
 * so that no year computed from an instant comes near overflow. */
#define TZ_INSTANT_BOUND ((int64_t)1 << 56)

#define TZ_SECS_PER_DAY 86400

/* When a rule's change happens: a day of the year and a time of that day. */
typedef enum tz_date_kind {
    TZ_DATE_JULIAN1 = 1, /* Jn: 1..365, February 29th never counted */
    TZ_DATE_JULIAN0 = 2, /* n: 0..365, February 29th counted */
    TZ_DATE_MONTH = 3    /* Mm.w.d: day d (0 = Sunday) of week w (5 = last) of month m */
} tz_date_kind;

typedef struct tz_date {
    tz_date_kind kind;
    int32_t day;   /* Jn, n: the number; M: d */
    int32_t week;  /* M: 1..5 */
    int32_t month; /* M: 1..12 */
    int32_t time;  /* seconds after the day's local midnight, -167 h .. 167 h */
} tz_date;

/* A footer's POSIX TZ string (RFC 8536 section 3.3), offsets in seconds
 * east of UTC (the string's signs are the other way round). */
typedef struct tz_rule {
    int32_t std_off;
    int32_t dst_off;
    bool has_dst;
    tz_date start, end; /* start in standard time, end in daylight saving time */
} tz_rule;

/* Parse the @n bytes of @s; true and *out written when they are a TZ
 * string with the extensions of RFC 8536 (hours of a change -167 .. 167);
 * a daylight saving time must come with its rule. */
bool weir__tz_rule_parse(const char *s, size_t n, tz_rule *out);

/* The rule's offset at @t (|t| <= TZ_INSTANT_BOUND), and the next instant
 * after @t at which it may change (*next > t; INT64_MAX when never). */
int32_t weir__tz_rule_segment(const tz_rule *r, int64_t t, int64_t *next);

/* One transition of a TZif file: from @at on, the offset is @off. */
typedef struct tz_trans {
    int64_t at;
    int32_t off;
} tz_trans;

struct weir_tz {
    const weir_ctx *ctx;
    char name[WEIR_TZ_MAX_NAME_BYTES + 1];
    int32_t first_off; /* before the first transition */
    bool has_rule;     /* a footer: from the last transition on */
    tz_rule rule;
    uint32_t n_trans;
    tz_trans trans[]; /* strictly increasing */
};

/* The offset in force at @t and the next instant after @t at which it may
 * change (*next > t, INT64_MAX when never); constant on [t, *next). */
int32_t weir__tz_segment(const weir_tz *tz, int64_t t, int64_t *next);

/* Civil dates, proleptic Gregorian: days since 1970-01-01 and back. */
int64_t weir__days_from_civil(int64_t y, int32_t m, int32_t d);
void weir__civil_from_days(int64_t days, int64_t *y, int32_t *m, int32_t *d);
bool weir__leap_year(int64_t y);
int64_t weir__floor_div(int64_t a, int64_t b);

#endif /* WEIR_CORE_TZ_H */
