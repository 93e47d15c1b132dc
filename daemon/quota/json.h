/*
 * json.h - the JSON codec of the quota admin API: the body of
 * PUT /admin/v1/quotas/{key} checked and turned into a quota_tenant, and
 * tenants, pages of them and of the audit log rendered as JSON. Bytes in,
 * a model out; a model in, bytes out: no I/O (the HTTP layer caps the
 * body's size and routes). JSON is read by the API's strict parser
 * (frontends/api/json.h) and written by frontends/common/buf.h.
 *
 * A PUT body:
 *   {"tier": "enterprise",
 *    "overrides": [{"descriptor": "endpoint:POST /api/v1/orders",
 *                   "requests_per_unit": 500, "unit": "minute"},
 *                  {"descriptor": "default", "requests_per_unit": 1000000,
 *                   "calendar": "month", "time_zone": "America/New_York"},
 *                  {"descriptor": "default", "requests_per_unit": 50,
 *                   "unit": "second", "algorithm": "token_bucket"}],
 *    "effective_at": "2025-02-01T00:00:00Z", "expires_at": null}
 *
 * Rules: tier is required: 1 .. QUOTA_MAX_TIER_BYTES of [A-Za-z0-9_.-],
 * known to checks->tier_known. overrides (absent: none) has at most
 * QUOTA_MAX_OVERRIDES items, each with a descriptor ("default", or
 * "key:value" with neither side empty, the key being the text before the
 * first ':'; at most QUOTA_MAX_DESCRIPTOR_BYTES), requests_per_unit (an
 * integer 0 .. 4294967295, written without a fraction or an exponent: 1e3
 * and 5.0 are refused, -0 is 0), and exactly one of unit (second, minute,
 * hour, day, week, month, year) and calendar (day, month, year); time_zone
 * (an IANA name, checked by checks->time_zone_known; absent: UTC) only
 * with calendar; algorithm (a name of weir/algo.h but concurrency, which holds
 * leases, and leaky_bucket_shaper, which queues: a quota is a rate of
 * admitted requests) optional, and with calendar only fixed_window. Two
 * overrides of one descriptor and one window (the same unit, or the same
 * calendar) are refused. effective_at and expires_at are RFC 3339
 * timestamps (rfc3339.h), expires_at after effective_at. Names are exact
 * (lower case). No string may hold a NUL byte (\u0000). null is the same
 * as an absent member.
 *
 * Status codes of a refusal (quota_json_error.status):
 *   400  the body is not of the shape asked for: malformed JSON, not an
 *        object, a member unknown (a typo is never ignored) or given twice,
 *        of the wrong JSON type, or required and missing;
 *   422  well-formed and of the right types, but a value is not
 *        acceptable: out of range, too long, an unknown name, a NUL byte,
 *        a date that does not exist, unit and calendar together, two
 *        overrides of one window, ...;
 *   500  out of memory.
 * The API decoders of frontends/api answer 400 for both kinds; they
 * decode a request for one decision, whereas this body is stored
 * configuration, where "your client sends the wrong shape" and "the value
 * an operator typed is not acceptable" are worth telling apart (RFC 9110,
 * 15.5.21). Every refusal names the JSON path of the field at fault
 * ("overrides[2].unit"; "" for the body as a whole).
 *
 * Threads: the functions keep no state; a parser belongs to one thread.
 */
#ifndef WEIR_DAEMON_QUOTA_JSON_H
#define WEIR_DAEMON_QUOTA_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/json.h"
#include "common/buf.h"
#include "quota.h"

/** Why a body was refused. */
typedef struct quota_json_error {
    int status;       /* 400, 422 or 500 (above) */
    char field[128];  /* the JSON path at fault, "" for the whole body */
    char detail[256]; /* for a person, e.g. "unit must be one of ..." */
} quota_json_error;

/** Checks only the caller can make; NULL (or a NULL hook) accepts. */
typedef struct quota_json_checks {
    /** Whether @tier (NUL-terminated, its syntax checked) is a tier of
     *  the rule files; false refuses with 422 naming "tier". */
    bool (*tier_known)(void *arg, const char *tier);
    /** Whether @name (NUL-terminated, 1 .. QUOTA_MAX_TZ_BYTES bytes:
     *  parts between '/' that start with a letter, then [A-Za-z0-9_.+-];
     *  safe to look up as a path under a zoneinfo directory) is a time
     *  zone; false refuses with 422 naming overrides[i].time_zone. */
    bool (*time_zone_known)(void *arg, const char *name);
    void *arg;
} quota_json_checks;

/**
 * quota_json_parse_put() - checks the PUT body @body (@len bytes) against
 * the rules above and fills @t: tier, overrides, effective_at_us and
 * expires_at_us (QUOTA_TIME_NONE when absent or null); created_at_us and
 * updated_at_us become QUOTA_TIME_NONE and version 0 (the database's).
 * @t->key and @t->key_len are the caller's and left alone. @parser is
 * reused from call to call (its memory grows to the largest body seen).
 * Returns true, or false with *@err filled and @t left as an empty record
 * (no tier, no overrides, no times) but for its key.
 */
bool quota_json_parse_put(weir_json *parser, const char *body, size_t len,
                          const quota_json_checks *checks, quota_tenant *t, quota_json_error *err);

/** "day", "month", "year"; NULL for WEIR_CALENDAR_NONE or another value. */
const char *quota_calendar_name(weir_calendar c);

/* ------------------------------------------------------------ rendering */

/**
 * quota_json_render_tenant() - appends @t as the answer to a GET or a
 * PUT: {"api_key":K,"tier":T,"quotas":{"default":D,"overrides":[{
 * "descriptor":S,"requests_per_unit":N,"unit":U | "calendar":C[,
 * "time_zone":Z]}[,"algorithm":A]},...]},"effective_at":R|null,
 * "expires_at":R|null,"created_at":R|null,"updated_at":R|null,
 * "version":V}, R being quota_time_format() text. D is
 * @tier_default_json, the tier's own limits as JSON the caller rendered
 * (copied as it is), or null when NULL. Every string is escaped (a byte
 * that is not UTF-8 becomes U+FFFD), so the output is JSON whatever the
 * key holds.
 */
void quota_json_render_tenant(weir_buf *b, const quota_tenant *t, const char *tier_default_json);

/** The same rendering (quotas.default null) as a malloc'd NUL-terminated
 *  string, for the audit log's before and after (a quota_db_render_fn);
 *  NULL when out of memory. The caller frees it. */
char *quota_json_tenant(const quota_tenant *t);

/** A page of GET /admin/v1/quotas: {"quotas":[<tenant>,...],"next":C|null}
 *  with each tenant rendered as by quota_json_tenant(); @next_cursor is
 *  NULL on the last page. */
void quota_json_render_list(weir_buf *b, const quota_tenant *ts, size_t n, const char *next_cursor);

/**
 * quota_json_render_audit() - a page of GET /admin/v1/audit:
 * {"entries":[{"id":I,"at":R,"actor":A,"action":"create"|"update"|
 * "delete","api_key":K,"before":X,"after":X},...],"next":C|null}. An entry's
 * before and after are the stored JSON texts, embedded as JSON values
 * (null when NULL); a text that is not valid JSON (a database edited by
 * hand) is embedded as a JSON string instead, so the page is always JSON.
 */
void quota_json_render_audit(weir_buf *b, const quota_audit *a, size_t n, const char *next_cursor);

/** The application/problem+json body of a refusal: weir_api_render_error()'s
 *  members with @e's status and detail, and "field" when @e->field is not
 *  empty. */
void quota_json_render_problem(weir_buf *b, const quota_json_error *e);

/* ------------------------------------------------------------ cursors */

/** Bytes of the longest key cursor, its NUL included: base64 of
 *  QUOTA_MAX_KEY_BYTES. */
#define QUOTA_JSON_CURSOR_MAX ((QUOTA_MAX_KEY_BYTES + 2) / 3 * 4 + 1)
/** Bytes of the longest audit cursor, its NUL included. */
#define QUOTA_JSON_AUDIT_CURSOR_MAX 24u

/**
 * quota_json_cursor_encode() - the cursor of a page of tenants that
 * continues after key @key (@len bytes, 1 .. QUOTA_MAX_KEY_BYTES): the
 * key in base64url (RFC 4648, 5) without padding, NUL-terminated in @out.
 * Returns false (writing nothing) when @len is out of range or @cap too
 * small (QUOTA_JSON_CURSOR_MAX always suffices).
 */
bool quota_json_cursor_encode(const char *key, size_t len, char *out, size_t cap);

/**
 * quota_json_cursor_decode() - the key of cursor @s (@n bytes), into @key
 * (QUOTA_MAX_KEY_BYTES + 1 bytes, NUL-terminated) and *@len. Only what
 * quota_json_cursor_encode() writes is accepted: the base64url alphabet,
 * no padding, no length that leaves a lone character, zero bits in the
 * last character past the data, 1 .. QUOTA_MAX_KEY_BYTES bytes of key. On
 * false (answer 400) nothing is written.
 */
bool quota_json_cursor_decode(const char *s, size_t n, char *key, size_t *len);

/** The cursor of a page of the audit log that continues below entry @id
 *  (> 0): its decimal text, NUL-terminated in @out; returns its length. */
size_t quota_json_audit_cursor_encode(int64_t id, char out[QUOTA_JSON_AUDIT_CURSOR_MAX]);

/** An audit cursor's id: decimal digits, no sign, no leading zero, 1 ..
 *  INT64_MAX. On false (answer 400) *@id is not written. */
bool quota_json_audit_cursor_decode(const char *s, size_t n, int64_t *id);

#endif /* WEIR_DAEMON_QUOTA_JSON_H */
