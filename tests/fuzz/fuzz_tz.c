/*
 * fuzz_tz.c - fuzzes weir_tz_parse() and the calendar periods of what it
 * accepts. An input that starts with "TZif" is a TZif file; any other is
 * a footer's POSIX TZ string, set in a file with no transitions (so the
 * rule decides every instant).
 *
 * Checks: only OK or EPARSE (nothing written on a refusal); for an
 * accepted zone, at instants taken from the input and at fixed ones, the
 * offset is within -24:59:59 .. +25:59:59; each period holds its instant
 * (start <= now < end), is longer than 0 and no longer than its calendar
 * allows (a day 24 h, a month 31 days, a year 366 days, each plus the
 * widest swing of the offset, 50:59:58: local time may turn back that far
 * inside a period); the period at `end` starts at `end` and the one just
 * before `start` ends at `start`; a period's bounds are whole seconds.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "weir/weir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define US 1000000LL
#define OFFSET_MIN (-89999)
#define OFFSET_MAX 93599
#define SWING ((int64_t)(OFFSET_MAX - OFFSET_MIN))
#define FIRST_S (-62135596800LL) /* 0001-01-01T00:00:00Z */
#define END_S 253402300800LL     /* 10000-01-01T00:00:00Z */

static void check(int ok)
{
    if (!ok)
        abort();
}

static weir_ctx *ctx;

/* A version 2 file with no transitions, one type and @rule as footer. */
static size_t rule_file(uint8_t *out, const uint8_t *rule, size_t n)
{
    static const uint8_t header[] = {'T', 'Z', 'i', 'f', '2', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                     0,   0,   0,   0,   0,   0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                     0,   0,   0,   0,   0,   0, 0, 0, 0, 1, 0, 0, 0, 1};
    size_t len = 0;
    for (int i = 0; i < 2; i++) {
        memcpy(out + len, header, sizeof(header));
        len += sizeof(header);
        memset(out + len, 0, 7); /* a type of offset 0, abbreviation "" */
        len += 7;
    }
    out[len++] = '\n';
    memcpy(out + len, rule, n);
    len += n;
    out[len++] = '\n';
    return len;
}

static int64_t max_len_s(weir_calendar cal)
{
    int64_t days = cal == WEIR_CALENDAR_DAY ? 1 : cal == WEIR_CALENDAR_MONTH ? 31 : 366;
    return days * 86400 + SWING;
}

static void check_period(const weir_tz *tz, weir_calendar cal, int64_t now)
{
    int64_t s = 0, e = 0;
    weir_status st = weir_calendar_period(tz, cal, now, &s, &e);
    if (now < FIRST_S * US || now >= END_S * US) {
        check(st == WEIR_ERANGE);
        return;
    }
    check(st == WEIR_OK);
    check(s <= now && now < e);
    check(s % US == 0 && e % US == 0);
    check(e - s <= max_len_s(cal) * US);
    int64_t s2, e2;
    if (e < END_S * US) {
        check(weir_calendar_period(tz, cal, e, &s2, &e2) == WEIR_OK);
        check(s2 == e && e2 > e);
    }
    if (s > FIRST_S * US) {
        check(weir_calendar_period(tz, cal, s - 1, &s2, &e2) == WEIR_OK);
        check(e2 == s && s2 < s);
    }
}

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > WEIR_TZ_MAX_FILE_BYTES + 1)
        return 0;
    if (!ctx && weir_ctx_new(NULL, &ctx) != WEIR_OK)
        abort();
    const uint8_t *bytes = data;
    size_t len = size;
    if (size < 4 || memcmp(data, "TZif", 4) != 0) {
        static uint8_t file[1024 + 128];
        if (size > 1024)
            return 0;
        len = rule_file(file, data, size);
        bytes = file;
    }
    weir_tz *const untouched = (weir_tz *)(void *)&ctx;
    weir_tz *tz = untouched; /* left alone on a refusal */
    weir_status st = weir_tz_parse(ctx, "fuzz", bytes, len, &tz);
    check(st == WEIR_OK || st == WEIR_EPARSE);
    if (st != WEIR_OK) {
        check(tz == untouched);
        return 0;
    }
    check(strcmp(weir_tz_name(tz), "fuzz") == 0);

    /* instants: fixed ones, and some from a hash of the input */
    int64_t at[12] = {
        0, -1, 1772946000 * US, 4102444800 * US, FIRST_S * US, END_S * US - 1, -2208988800 * US};
    uint64_t h = 0x9e3779b97f4a7c15ULL;
    for (size_t i = 0; i < size; i++)
        h = (h ^ data[i]) * 0x100000001b3ULL;
    for (size_t i = 7; i < 12; i++) {
        h = mix(h + i);
        /* mostly within years 1 .. 9999, some anywhere */
        at[i] =
            i == 11 ? (int64_t)h : FIRST_S * US + (int64_t)(h % (uint64_t)((END_S - FIRST_S) * US));
    }
    for (size_t i = 0; i < 12; i++) {
        int32_t off = weir_tz_offset(tz, at[i] / US);
        check(off >= OFFSET_MIN && off <= OFFSET_MAX);
        for (weir_calendar cal = WEIR_CALENDAR_DAY; cal <= WEIR_CALENDAR_YEAR; cal++)
            check_period(tz, cal, at[i]);
    }
    weir_tz_free(tz);
    return 0;
}
