/*
 * rfc3339.h - the timestamps of the quota admin API: RFC 3339 date-times
 * read into and written from Unix microseconds (UTC).
 */
#ifndef WEIR_DAEMON_QUOTA_RFC3339_H
#define WEIR_DAEMON_QUOTA_RFC3339_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Bytes quota_time_format() may write, its NUL included. */
#define QUOTA_TIME_TEXT_MAX 40u

/**
 * quota_time_parse() - the @n bytes at @s (not NUL-terminated) as an RFC
 * 3339 date-time, "YYYY-MM-DDTHH:MM:SS[.f]Z" or with an offset "+HH:MM" /
 * "-HH:MM" for Z ("-00:00" is Z), into *@us (Unix microseconds, UTC).
 * 'T' and 'Z' may be lower case (RFC 3339, 5.6). The fraction has 1 to 6
 * digits: a seventh would be lost in microseconds, so it is refused rather
 * than rounded. Refused too: a date that does not exist (2026-02-29,
 * 04-31), hour 24, second 60 (a leap second has no Unix time), a missing
 * zone designator, and an instant outside 1970-01-01T00:00:00Z ..
 * 9999-12-31T23:59:59.999999Z (after the offset is applied), so what is
 * accepted always formats back as four-digit years. *@us is written only
 * on success.
 */
bool quota_time_parse(const char *s, size_t n, int64_t *us);

/**
 * quota_time_format() - @us (Unix microseconds) as "YYYY-MM-DDTHH:MM:SSZ",
 * with ".ffffff" before the Z only when the microseconds are not zero,
 * NUL-terminated in @out; returns its length. Any int64_t is written
 * (proleptic Gregorian; before year 0 the year has a '-' sign, past 9999
 * more digits), though only 1970 .. 9999 parses back.
 */
size_t quota_time_format(int64_t us, char out[QUOTA_TIME_TEXT_MAX]);

#endif /* WEIR_DAEMON_QUOTA_RFC3339_H */
