/*
 * api.h - weir's HTTP/JSON API without the HTTP: request bodies and query
 * strings decoded into engine requests, and decisions rendered as JSON
 * bodies, upstream's proto3 JSON, rate limit header fields and
 * problem+json. No I/O; the daemon's router calls these.
 *
 * Formats (docs/API.md has them in full):
 *   POST /v1/check        {"domain":D,"descriptors":[{"entries":[{"key":K,
 *                          "value":V},...],"hits":N,"limit":{
 *                          "requests_per_unit":N,"unit":"SECOND"}},...],
 *                          "hits":N}
 *   POST /v1/check/batch  {"requests":[<a /v1/check body>,...]}
 *   POST /json            proto3 JSON of envoy RateLimitRequest (field
 *                          names in lowerCamelCase or as in the .proto,
 *                          integers as numbers or strings, enums by name
 *                          or number)
 *   GET  /v1/check?domain=D&k1=v1&k2=v2[&hits=N]  one descriptor whose
 *                          entries are the query's pairs in order, then
 *                          the configured request headers.
 *
 * Decoding rules: unknown fields are refused in every format (and a field
 * given under both its proto and camelCase names in /json); null is the
 * same as absent; in weir's formats an entry needs key and value, a limit
 * requests_per_unit and unit (a name, any case: second .. year, week),
 * and hits are integers 0 .. 2^53; in /json missing fields take proto3's
 * defaults, the request's hits_addend is a uint32 and a descriptor's a
 * uint64 (numbers or decimal strings), and unit is a RateLimitUnit name or
 * number 0..6 (UNKNOWN / 0 reaches the engine, which refuses it). Integral
 * reals (2.0, 1e3) count as integers. GET's hits is the request's hits.
 *
 * Threads: a decoder belongs to one thread.
 */
#ifndef WEIR_FRONTENDS_API_API_H
#define WEIR_FRONTENDS_API_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "weir/engine.h"

typedef struct weir_api_limits {
    /** Most descriptors per request (at most WEIR_ENGINE_MAX_DESCRIPTORS). */
    size_t max_descriptors;
    /** Most entries per descriptor (at most WEIR_ENGINE_MAX_ENTRIES). */
    size_t max_entries;
    /** Most requests in one batch. */
    size_t max_batch;
} weir_api_limits;

/** A request header that becomes a descriptor entry on GET /v1/check:
 *  the value of header @header, under descriptor key @key. */
typedef struct weir_api_header_entry {
    const char *header;
    const char *key;
} weir_api_header_entry;

/** A decoding failure: the HTTP status to answer (400 for malformed or
 *  mistyped input, 413 for a batch or request over the caps) and a
 *  message naming the place, e.g. "descriptors[0].entries[1].value: must
 *  be a string" or "malformed JSON at line 1, column 12: ...". */
typedef struct weir_api_error {
    int status;
    char message[192];
} weir_api_error;

typedef struct weir_api_decoder weir_api_decoder;

/** A decoder with caps @limits; NULL when out of memory. */
weir_api_decoder *weir_api_decoder_new(const weir_api_limits *limits);
void weir_api_decoder_free(weir_api_decoder *d);

/*
 * Each decode replaces what the decoder held. On success (true) the
 * decoded requests are weir_api_request(d, 0 .. weir_api_count(d) - 1),
 * valid until the next decode or weir_api_decoder_free(); their strings
 * are not NUL-terminated. On failure (false) *err is filled and the count
 * is 0. Requests are only checked for shape and caps here: an empty domain
 * or descriptor list decodes fine and the engine refuses it.
 */
bool weir_api_decode_check(weir_api_decoder *d, const char *body, size_t len, weir_api_error *err);
bool weir_api_decode_batch(weir_api_decoder *d, const char *body, size_t len, weir_api_error *err);
bool weir_api_decode_envoy_json(weir_api_decoder *d, const char *body, size_t len,
                                weir_api_error *err);
/** @query without the '?' (percent-escapes and '+' decoded); @headers
 *  (@n_headers) are the configured header entries and @get_header finds a
 *  request header's value by name (NULL when absent; the entry is then
 *  left out). "domain" and "hits" are parameters, not entries; no domain
 *  is an error ("missing query parameter 'domain'"). */
bool weir_api_decode_query(weir_api_decoder *d, const char *query, size_t len,
                           const weir_api_header_entry *headers, size_t n_headers,
                           const char *(*get_header)(void *arg, const char *name, size_t *len),
                           void *arg, weir_api_error *err);

/** Why the engine would refuse @req, in upstream's words where upstream
 *  has them ("rate limit domain must not be empty", "rate limit
 *  descriptor list must not be empty"; "descriptors[N] has no entries",
 *  "descriptors[N].limit.unit must not be UNKNOWN", written into @buf);
 *  NULL when it looks acceptable. Every protocol answers with these. */
const char *weir_api_refusal(const weir_request *req, char *buf, size_t cap);

size_t weir_api_count(const weir_api_decoder *d);
const weir_request *weir_api_request(const weir_api_decoder *d, size_t i);

/* ------------------------------------------------------------ rendering */

/** Which header families to write, and Retry-After's jitter. */
typedef struct weir_api_header_opts {
    bool ietf;        /* RateLimit-Policy and RateLimit */
    bool legacy;      /* X-RateLimit-Limit, -Remaining, -Reset */
    bool retry_after; /* Retry-After on a denial */
} weir_api_header_opts;

/** One decision, as the renderers take it. */
typedef struct weir_api_decision {
    weir_code overall;
    const weir_descriptor_status *statuses;
    size_t n;
} weir_api_decision;

/** The status the headers and the problem body describe: among the
 *  statuses with a limit, the denying one (OVER_LIMIT, not shadow) with
 *  the longest retry_after (WEIR_NEVER longest); when none denies, the one
 *  with the least remaining, ties going to the longest reset_after; the
 *  first of equals. NULL when no status has a limit. */
const weir_descriptor_status *weir_api_most_restrictive(const weir_api_decision *dec);

/** Whole seconds a client should wait before retrying a denied decision
 *  (the longest retry_after of the denying statuses, rounded up, at least
 *  1); -1 when some denial can never be admitted; 0 when allowed. */
int64_t weir_api_retry_after_s(const weir_api_decision *dec);

/**
 * weir_api_render_headers() - the rate limit header fields of @dec, each
 * as "Name: value\r\n":
 *   RateLimit-Policy: one item per distinct limit that applied,
 *     "<name>";q=<requests_per_unit>;w=<window seconds, rounded up>
 *     (name: the limit's name, else its domain and path);
 *   RateLimit: "<name>";r=<remaining>;t=<seconds to reset, rounded up> of
 *     the most restrictive status (a denying one with the longest
 *     retry_after, else the one with the least remaining);
 *   X-RateLimit-Limit / -Remaining / -Reset (Unix time in seconds, rounded
 *     up; @now_unix_us is the decision's time) of the same status;
 *   Retry-After on a denial: weir_api_retry_after_s() + @jitter_s, left
 *     out when the denial can never be admitted.
 * Nothing when no status has a limit.
 */
void weir_api_render_headers(weir_buf *out, const weir_api_decision *dec,
                             const weir_api_header_opts *opts, int64_t now_unix_us,
                             int64_t jitter_s);

/** The JSON decision of POST/GET /v1/check (one object, no newline). */
void weir_api_render_decision(weir_buf *out, const weir_api_decision *dec);
/** The proto3 JSON RateLimitResponse of POST /json, as upstream writes it. */
void weir_api_render_envoy_json(weir_buf *out, const weir_api_decision *dec);
/** The application/problem+json body of a 429: the denying rule (name,
 *  domain, path, limit, window) and retry_after (null when never). */
void weir_api_render_problem(weir_buf *out, const weir_api_decision *dec, int64_t retry_after_s);
/** An application/problem+json error body: {"type":"about:blank",
 *  "title":<reason phrase of @status>,"status":@status,"detail":@detail}. */
void weir_api_render_error(weir_buf *out, int status, const char *detail);

/** The reason phrase of an HTTP status ("Too Many Requests"), "Unknown"
 *  for codes weir does not send. */
const char *weir_api_reason(int status);

#endif /* WEIR_FRONTENDS_API_API_H */
