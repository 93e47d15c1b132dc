/*
 * api.h - weir's HTTP/JSON API without the HTTP: request bodies and query
 * strings decoded into engine requests, and decisions rendered as JSON
 * bodies, upstream's proto3 JSON and problem+json (the rate limit header
 * fields are frontends/common's). No I/O; the daemon's router calls these.
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
 * Decoding rules: unknown fields are refused in every format, and so is a
 * field given twice in one object (in /json, under either of its proto
 * and camelCase names); null is the
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

#include "common/buf.h"
#include "common/decision.h"
#include "common/headers.h"
#include "weir/engine.h"

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

size_t weir_api_count(const weir_api_decoder *d);
const weir_request *weir_api_request(const weir_api_decoder *d, size_t i);

/* ------------------------------------------------------------ rendering */

/** The JSON decision of POST/GET /v1/check (one object, no newline). */
void weir_api_render_decision(weir_buf *out, const weir_api_decision *dec);
/** The same with an "explain" member (weir_api_render_explain()) after
 *  the statuses when @req and @traces are given. */
void weir_api_render_decision_explained(weir_buf *out, const weir_api_decision *dec,
                                        const weir_request *req, const weir_match_trace *traces);
/** The proto3 JSON RateLimitResponse of POST /json, as upstream writes it. */
void weir_api_render_envoy_json(weir_buf *out, const weir_api_decision *dec);
/** The application/problem+json body of a 429: the denying rule (name,
 *  domain, path, limit, window) and retry_after (null when never). */
void weir_api_render_problem(weir_buf *out, const weir_api_decision *dec, int64_t retry_after_s);
/** An application/problem+json error body: {"type":"about:blank",
 *  "title":<reason phrase of @status>,"status":@status,"detail":@detail}. */
void weir_api_render_error(weir_buf *out, int status, const char *detail);
/** The same with a "field" member after the detail naming the input at
 *  fault, e.g. "overrides[2].unit" (none when @field is NULL). */
void weir_api_render_error_at(weir_buf *out, int status, const char *detail, const char *field);

/** Percent-decodes s[0..n) to @out (room for @n bytes); '+' is a space
 *  when @plus_is_space (a query), itself otherwise (a path). Returns the
 *  decoded length, or SIZE_MAX on a bad escape. */
size_t weir_api_percent_decode(const char *s, size_t n, char *out, bool plus_is_space);

/* ------------------------------------------------------------ explaining */

/*
 * A decided request explained: per descriptor of @req, the walk @traces
 * (weir_engine_explain(), one per descriptor) and every limit of the rule
 * reached (or, for a descriptor that matched nothing and gave its own
 * limit, that limit) with its verdict in @dec: admitted, denied,
 * unlimited, or replaced (another matched limit's `replaces` names it).
 * @dec may be NULL (no verdicts). docs/API.md has the JSON form.
 */
/** A JSON array, one object per descriptor: walk (per matched entry: key,
 *  value, matched: exact / pattern / default, and the rule with its
 *  file, line and column), miss and reason (why no limit was reached),
 *  override, and limits. */
void weir_api_render_explain(weir_buf *out, const weir_request *req, const weir_api_decision *dec,
                             const weir_match_trace *traces);
/** The same facts for a person, as lines each ending in '\n'. */
void weir_api_explain_text(weir_buf *out, const weir_request *req, const weir_api_decision *dec,
                           const weir_match_trace *traces);
/** The same facts on one line (no newline), for a log. */
void weir_api_explain_line(weir_buf *out, const weir_request *req, const weir_api_decision *dec,
                           const weir_match_trace *traces);

/** The reason phrase of an HTTP status ("Too Many Requests"), "Unknown"
 *  for codes weir does not send. */
const char *weir_api_reason(int status);

#endif /* WEIR_FRONTENDS_API_API_H */
