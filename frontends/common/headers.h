/*
 * headers.h - the rate limit header fields of a decision, as a list of
 * names and values: HTTP writes them as "Name: value" lines, gRPC hands
 * them to Envoy as response_headers_to_add, each from the same list. No
 * I/O.
 */
#ifndef WEIR_FRONTENDS_COMMON_HEADERS_H
#define WEIR_FRONTENDS_COMMON_HEADERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/decision.h"

/** Most fields one decision renders. */
#define WEIR_HEADERS_MAX 12u
/** Longest name of an upstream-family field, with its NUL. */
#define WEIR_HEADER_NAME_BYTES 64u

/** Which header families to write. */
typedef struct weir_api_header_opts {
    bool ietf;        /* RateLimit-Policy and RateLimit */
    bool legacy;      /* X-RateLimit-Limit, -Remaining, -Reset */
    bool retry_after; /* Retry-After on a denial */
    bool upstream;    /* envoyproxy/ratelimit's RateLimit-Limit, -Remaining, -Reset */
    /** The upstream family's names (limit, remaining, reset); "" for
     *  upstream's defaults. */
    char upstream_names[3][WEIR_HEADER_NAME_BYTES];
} weir_api_header_opts;

/** Header fields: names and values live in @text, each NUL-terminated. */
typedef struct weir_headers {
    weir_buf text;
    size_t names[WEIR_HEADERS_MAX]; /* offsets into text */
    size_t values[WEIR_HEADERS_MAX];
    size_t n;
} weir_headers;

/** An empty list whose values may take up to @max_bytes. */
void weir_headers_init(weir_headers *h, size_t max_bytes);
void weir_headers_free(weir_headers *h);
void weir_headers_clear(weir_headers *h);
/** False when a value did not fit (the list is then incomplete). */
bool weir_headers_ok(const weir_headers *h);
/** Field @i's name and value (NUL-terminated); i < h->n. */
const char *weir_headers_name(const weir_headers *h, size_t i);
const char *weir_headers_value(const weir_headers *h, size_t i);
/** Append a field (copied); past WEIR_HEADERS_MAX fields the list fails. */
void weir_headers_add(weir_headers *h, const char *name, size_t name_len, const char *value,
                      size_t value_len);

/** Each field as a "Name: value\r\n" line appended to @out. */
void weir_headers_put_lines(const weir_headers *h, weir_buf *out);

/**
 * weir_api_render_headers() - the rate limit header fields of @dec,
 * appended to @out:
 *   RateLimit-Policy: one item per distinct limit that applied,
 *     "<name>";q=<requests_per_unit>;w=<window seconds, rounded up>
 *     (name: the limit's name, else its domain and path);
 *   RateLimit: "<name>";r=<remaining>;t=<seconds to reset, rounded up> of
 *     the most restrictive status (a denying one with the longest
 *     retry_after, else the one with the least remaining);
 *   X-RateLimit-Limit / -Remaining / -Reset (Unix time in seconds, rounded
 *     up; @now_unix_us is the decision's time) of the same status;
 *   with @opts->upstream, envoyproxy/ratelimit's trio (its
 *     LIMIT_RESPONSE_HEADERS_ENABLED): RateLimit-Limit (requests per
 *     unit), RateLimit-Remaining, RateLimit-Reset (seconds to reset,
 *     rounded up) of the same status, under @opts->upstream_names;
 *   Retry-After on a denial: weir_api_retry_after_s() + @jitter_s, left
 *     out when the denial can never be admitted.
 * Nothing when no status has a limit, or @opts is NULL.
 */
void weir_api_render_headers(weir_headers *out, const weir_api_decision *dec,
                             const weir_api_header_opts *opts, int64_t now_unix_us,
                             int64_t jitter_s);

#endif /* WEIR_FRONTENDS_COMMON_HEADERS_H */
