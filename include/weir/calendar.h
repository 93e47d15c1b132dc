/*
 * weir/calendar.h - time zones and calendar periods: the day, month or year
 * that holds an instant, in a named IANA time zone, as a pair of UTC
 * instants. Since 0.2.
 *
 * A billing quota that resets at local midnight, on the first of the month
 * or on January 1st needs the exact instants its period starts and ends,
 * across month lengths, leap years and daylight saving time changes. A
 * weir_tz holds one zone, read from the system's time zone database (TZif
 * files, RFC 8536); weir_calendar_period() gives the period holding an
 * instant.
 *
 * Conventions shared by every function in this header:
 *   - civil time is the proleptic Gregorian calendar; an instant is Unix
 *     time (seconds or microseconds since 1970-01-01T00:00:00Z, leap
 *     seconds not counted, as in POSIX);
 *   - a NULL weir_tz is UTC;
 *   - a period's start is the first instant at which the zone's local time
 *     reaches the start of the period (its local midnight of the day, of
 *     the 1st of the month, or of January 1st). So a local midnight that
 *     does not exist (a change of the offset that jumps over 00:00) starts
 *     the period at the first instant after the jump, and a midnight that
 *     happens twice (the offset turned back over 00:00) starts it at the
 *     first one. A period ends where the next one starts, so periods tile
 *     the time line without gaps or overlaps; a day the zone skips
 *     entirely (Pacific/Apia's 2011-12-30) has no period at all;
 *   - arithmetic is integer only; the library never reads or changes the
 *     process's TZ variable and calls no C library time zone function.
 *
 * Thread safety: a weir_tz is immutable once made; any number of threads
 * may read it at once without locking. weir_calendar_period(),
 * weir_tz_offset() and the name functions are pure (no allocation, no
 * I/O, no lock).
 */
#ifndef WEIR_CALENDAR_H
#define WEIR_CALENDAR_H

#include <stddef.h>
#include <stdint.h>

#include "weir/context.h"
#include "weir/export.h"
#include "weir/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The kinds of calendar period. */
typedef enum weir_calendar {
    WEIR_CALENDAR_NONE = 0,
    WEIR_CALENDAR_DAY = 1,   /* local midnight to local midnight */
    WEIR_CALENDAR_MONTH = 2, /* the 1st at 00:00 local to the next 1st */
    WEIR_CALENDAR_YEAR = 3   /* January 1st 00:00 local to the next */
} weir_calendar;

/** One time zone: its offsets from UTC over time. Immutable once made; any
 *  number of threads may read it. */
typedef struct weir_tz weir_tz;

/* Caps. */
#define WEIR_TZ_MAX_NAME_BYTES 64u            /* a zone's name */
#define WEIR_TZ_MAX_FILE_BYTES (256u * 1024u) /* one TZif file or buffer */

/**
 * weir_tz_load() - load a time zone by its IANA name.
 *
 * @ctx:  allocator for the zone; must outlive it.
 * @name: NUL-terminated. "UTC", "Etc/UTC" and "" (empty) are UTC and read
 *        no file. Any other name is 1 .. WEIR_TZ_MAX_NAME_BYTES bytes of
 *        [A-Za-z0-9_+-] in components separated by single '/', with no
 *        leading or trailing '/' (so no "." or ".." component and no
 *        absolute path), e.g. "America/New_York"; the zone is read from
 *        the file $TZDIR/NAME when the environment variable TZDIR is set
 *        and not empty, else /usr/share/zoneinfo/NAME.
 * @out:  written only on success; free with weir_tz_free().
 *
 * The file is a TZif file of version 1 to 4 (RFC 8536): its 64-bit data
 * when it has them, and its footer's POSIX TZ string for the instants
 * after its last transition. Leap-second records are read and ignored
 * (civil time counts no leap seconds).
 *
 * Returns WEIR_OK; WEIR_EINVAL for a NULL pointer or a name outside the
 * grammar above; WEIR_EIO when the file is missing, is not a regular file
 * or cannot be read (or $TZDIR/NAME is longer than 4096 bytes); WEIR_EPARSE
 * for a file that is not a well-formed TZif file, is larger than
 * WEIR_TZ_MAX_FILE_BYTES or exceeds one of the caps of weir_tz_parse();
 * WEIR_ENOMEM. Thread-safe, but it reads TZDIR with getenv(): do not
 * change the environment in another thread meanwhile.
 */
WEIR_API weir_status weir_tz_load(weir_ctx *ctx, const char *name, weir_tz **out);

/**
 * weir_tz_parse() - make a time zone from the bytes of a TZif file.
 *
 * @ctx:  allocator for the zone; must outlive it.
 * @name: NUL-terminated label returned by weir_tz_name(), at most
 *        WEIR_TZ_MAX_NAME_BYTES bytes; not checked against the grammar of
 *        weir_tz_load(). Copied.
 * @tzif: @len bytes, borrowed for the call only (may be NULL when @len is
 *        0).
 * @out:  written only on success; free with weir_tz_free().
 *
 * The file must be exactly one TZif file: a header and data block (and for
 * version 2 and later the 64-bit header, data block and footer) and
 * nothing after them. Caps: at most 2000 transitions, 256 local time
 * types, 256 bytes of abbreviations, 256 leap-second records and a footer
 * of 256 bytes; offsets from UTC within -24:59:59 .. +25:59:59;
 * transitions strictly increasing. A footer with a daylight saving time
 * must give its rule (",start[/time],end[/time]").
 *
 * Returns WEIR_OK; WEIR_EINVAL for a NULL @ctx, @name or @out, a NULL
 * @tzif with a nonzero @len, or a name too long; WEIR_EPARSE for bytes
 * that are not such a file (truncated, bad magic, counts past the caps,
 * indices out of range, a malformed footer, more than
 * WEIR_TZ_MAX_FILE_BYTES); WEIR_ENOMEM. Thread-safe.
 */
WEIR_API weir_status weir_tz_parse(weir_ctx *ctx, const char *name, const void *tzif, size_t len,
                                   weir_tz **out);

/** Free a zone. NULL is a no-op. */
WEIR_API void weir_tz_free(weir_tz *tz);

/**
 * weir_tz_name() - the zone's name as given to weir_tz_load() or
 * weir_tz_parse() ("UTC" for the empty name, and for a NULL @tz). The
 * string lives as long as @tz.
 */
WEIR_API const char *weir_tz_name(const weir_tz *tz);

/**
 * weir_tz_offset() - the zone's offset from UTC, in seconds east of
 * Greenwich, in force at the instant @utc_s (Unix seconds): local time is
 * @utc_s plus the offset.
 *
 * @tz: NULL is UTC (offset 0).
 *
 * Before the file's first transition the offset is that of its first local
 * time type; from its last transition on (at every instant when it has
 * none), its footer's rule's, or the last transition's when the file has
 * no rule (a version 1 file, an empty footer). Instants more than
 * 2^56 seconds (about 2 billion years) from 1970 take the offset at that
 * bound. Pure; thread-safe.
 */
WEIR_API int32_t weir_tz_offset(const weir_tz *tz, int64_t utc_s);

/**
 * weir_calendar_period() - the calendar period holding an instant.
 *
 * @tz:       the zone whose local time the period follows; NULL is UTC.
 * @cal:      WEIR_CALENDAR_DAY, _MONTH or _YEAR.
 * @now_us:   the instant (Unix microseconds).
 * @start_us: receives the period's first instant (Unix microseconds).
 * @end_us:   receives the first instant after the period, the start of the
 *            next one. Always *start_us <= @now_us < *end_us.
 *
 * The period starts at the first instant at which local time reaches its
 * start (see the header comment): a local midnight that does not exist (a
 * jump of the offset over 00:00, as America/Havana's, Asia/Beirut's or
 * America/Santiago's changes of daylight saving time) starts it at the
 * first instant after the jump; a midnight that happens twice (the offset
 * turned back over midnight, as America/Havana's in November) starts it at
 * the first. A day is thus 23 or 25 hours long across the usual changes
 * of daylight saving time, and a period's start and end are whole seconds.
 *
 * Returns WEIR_OK (both outputs written); WEIR_EINVAL for a NULL output or
 * a @cal that is not one of the three; WEIR_ERANGE for an instant before
 * 0001-01-01T00:00:00Z or from 10000-01-01T00:00:00Z on. Pure: no
 * allocation, no I/O, no lock; thread-safe.
 */
WEIR_API weir_status weir_calendar_period(const weir_tz *tz, weir_calendar cal, int64_t now_us,
                                          int64_t *start_us, int64_t *end_us);

/**
 * weir_calendar_parse() - a period by its name: @s holds @n bytes (no NUL
 * needed), exactly "day", "month" or "year" in lowercase.
 *
 * Returns WEIR_OK and writes @out; WEIR_EINVAL for any other text, a NULL
 * @s with a nonzero @n, or a NULL @out. Thread-safe.
 */
WEIR_API weir_status weir_calendar_parse(const char *s, size_t n, weir_calendar *out);

/** The name of a period: "day", "month", "year", or "none" for
 *  WEIR_CALENDAR_NONE; NULL for any other value. */
WEIR_API const char *weir_calendar_name(weir_calendar cal);

#ifdef __cplusplus
}
#endif

#endif /* WEIR_CALENDAR_H */
