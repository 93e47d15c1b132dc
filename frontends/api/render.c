/*
 * render.c - decisions rendered as JSON bodies: weir's /v1/check answer,
 * upstream's proto3 JSON RateLimitResponse, application/problem+json for a
 * 429 and for errors, and the HTTP reason phrases they name.
 *
 * Everything is written straight into a weir_buf, without building a
 * tree; numbers are integers only (durations rounded up to the unit).
 */
#include <string.h>

#include "api.h"
#include "jsonw.h"

static const char *code_name(weir_code code)
{
    switch (code) {
    case WEIR_CODE_OK:
        return "OK";
    case WEIR_CODE_OVER_LIMIT:
        return "OVER_LIMIT";
    }
    return NULL;
}

/* ------------------------------------------------------------ /v1/check */

static void render_status(weir_buf *b, const weir_descriptor_status *s)
{
    obj o = obj_open(b);
    const char *code = code_name(s->code);
    obj_key(&o, "code");
    put_cstr(b, code ? code : "UNKNOWN");
    if (s->unlimited) {
        obj_key(&o, "unlimited");
        put_bool(b, true);
    } else if (s->limit) {
        const weir_rule_limit *l = s->limit;
        obj_key(&o, "limit");
        obj lo = obj_open(b);
        obj_key(&lo, "name");
        put_cstr(b, l->name);
        obj_key(&lo, "domain");
        put_cstr(b, l->domain);
        obj_key(&lo, "path");
        put_cstr(b, l->path);
        obj_key(&lo, "requests_per_unit");
        weir_buf_put_u64(b, s->requests_per_unit);
        const char *unit = weir_rule_unit_name(s->unit);
        if (unit) {
            obj_key(&lo, "unit");
            put_cstr(b, unit);
        }
        obj_key(&lo, "window_ms");
        weir_buf_put_u64(b, weir_api_ceil_div(s->window_us, 1000));
        obj_key(&lo, "algorithm");
        put_cstr(b, weir_algorithm_name(l->algorithm));
        obj_close(&lo);
        obj_key(&o, "remaining");
        weir_buf_put_u64(b, s->remaining);
        obj_key(&o, "reset_after_ms");
        weir_buf_put_u64(b, weir_api_ceil_div(s->reset_after_us, 1000));
        obj_key(&o, "retry_after_ms");
        if (s->retry_after_us == WEIR_NEVER)
            weir_buf_puts(b, "-1");
        else
            weir_buf_put_u64(b, weir_api_ceil_div(s->retry_after_us, 1000));
    }
    if (s->delay_us > 0) {
        obj_key(&o, "delay_ms");
        weir_buf_put_u64(b, weir_api_ceil_div(s->delay_us, 1000));
    }
    if (s->shadow) {
        obj_key(&o, "shadow");
        put_bool(b, true);
        obj_key(&o, "would_deny");
        put_bool(b, s->would_deny);
    }
    if (s->failure_mode) {
        obj_key(&o, "failure_mode");
        put_bool(b, true);
    }
    if (s->local) {
        obj_key(&o, "local");
        put_bool(b, true);
    }
    if (s->shed) {
        obj_key(&o, "shed");
        put_bool(b, true);
    }
    obj_close(&o);
}

void weir_api_render_decision(weir_buf *out, const weir_api_decision *dec)
{
    weir_api_render_decision_explained(out, dec, NULL, NULL);
}

void weir_api_render_decision_explained(weir_buf *out, const weir_api_decision *dec,
                                        const weir_request *req, const weir_match_trace *traces)
{
    const char *code = code_name(dec->overall);
    obj o = obj_open(out);
    obj_key(&o, "allowed");
    put_bool(out, dec->overall == WEIR_CODE_OK);
    obj_key(&o, "code");
    put_cstr(out, code ? code : "UNKNOWN");
    obj_key(&o, "statuses");
    weir_buf_putc(out, '[');
    for (size_t i = 0; i < dec->n; i++) {
        if (i)
            weir_buf_putc(out, ',');
        render_status(out, &dec->statuses[i]);
    }
    weir_buf_putc(out, ']');
    if (req && traces) {
        obj_key(&o, "explain");
        weir_api_render_explain(out, req, dec, traces);
    }
    obj_close(&o);
}

/* ------------------------------------------------------------ POST /json */

/* RateLimitResponse.RateLimit.Unit names; NULL for UNKNOWN (a zero value,
 * which proto3 JSON leaves out). */
static const char *envoy_unit(weir_rule_unit unit)
{
    switch (unit) {
    case WEIR_UNIT_NONE:
        return NULL;
    case WEIR_UNIT_SECOND:
        return "SECOND";
    case WEIR_UNIT_MINUTE:
        return "MINUTE";
    case WEIR_UNIT_HOUR:
        return "HOUR";
    case WEIR_UNIT_DAY:
        return "DAY";
    case WEIR_UNIT_MONTH:
        return "MONTH";
    case WEIR_UNIT_YEAR:
        return "YEAR";
    case WEIR_UNIT_WEEK:
        return "WEEK";
    }
    return NULL;
}

/* A google.protobuf.Duration in proto3 JSON: seconds with 0, 3, 6 or 9
 * fractional digits, then "s" (microseconds need at most 6). */
static void put_duration(weir_buf *b, int64_t us)
{
    if (us < 0)
        us = 0;
    weir_buf_putc(b, '"');
    weir_buf_put_u64(b, (uint64_t)(us / 1000000));
    int64_t frac = us % 1000000;
    if (frac) {
        char digits[7];
        int n = frac % 1000 ? 6 : 3;
        int64_t v = n == 6 ? frac : frac / 1000;
        for (int i = n - 1; i >= 0; i--) {
            digits[i] = (char)('0' + v % 10);
            v /= 10;
        }
        weir_buf_putc(b, '.');
        weir_buf_put(b, digits, (size_t)n);
    }
    weir_buf_puts(b, "s\"");
}

static void render_envoy_status(weir_buf *b, const weir_descriptor_status *s)
{
    obj o = obj_open(b);
    const char *code = code_name(s->code);
    if (code) {
        obj_key(&o, "code");
        put_cstr(b, code);
    }
    if (s->unlimited) {
        obj_key(&o, "limitRemaining");
        weir_buf_put_u64(b, UINT32_MAX);
    } else if (s->limit) {
        obj_key(&o, "currentLimit");
        obj lo = obj_open(b);
        if (s->requests_per_unit) {
            obj_key(&lo, "requestsPerUnit");
            weir_buf_put_u64(b, s->requests_per_unit);
        }
        const char *unit = envoy_unit(s->unit);
        if (unit) {
            obj_key(&lo, "unit");
            put_cstr(b, unit);
        }
        if (s->limit->name && s->limit->name[0]) {
            obj_key(&lo, "name");
            put_cstr(b, s->limit->name);
        }
        obj_close(&lo);
        if (s->remaining) {
            obj_key(&o, "limitRemaining");
            weir_buf_put_u64(b, s->remaining > UINT32_MAX ? UINT32_MAX : s->remaining);
        }
        obj_key(&o, "durationUntilReset");
        put_duration(b, s->reset_after_us);
    }
    obj_close(&o);
}

void weir_api_render_envoy_json(weir_buf *out, const weir_api_decision *dec)
{
    obj o = obj_open(out);
    const char *code = code_name(dec->overall);
    if (code) {
        obj_key(&o, "overallCode");
        put_cstr(out, code);
    }
    if (dec->n) {
        obj_key(&o, "statuses");
        weir_buf_putc(out, '[');
        for (size_t i = 0; i < dec->n; i++) {
            if (i)
                weir_buf_putc(out, ',');
            render_envoy_status(out, &dec->statuses[i]);
        }
        weir_buf_putc(out, ']');
    }
    obj_close(&o);
}

/* ------------------------------------------------------------ problem+json */

static obj problem_open(weir_buf *b, int status)
{
    obj o = obj_open(b);
    obj_key(&o, "type");
    put_cstr(b, "about:blank");
    obj_key(&o, "title");
    put_cstr(b, weir_api_reason(status));
    obj_key(&o, "status");
    weir_buf_put_i64(b, status);
    return o;
}

/* The inside of a JSON string naming a limit: its name, else
 * "<domain>.<path>". */
static void put_limit_name(weir_buf *b, const weir_rule_limit *l)
{
    if (l->name && l->name[0]) {
        weir_buf_put_json_str(b, l->name, strlen(l->name));
        return;
    }
    const char *domain = l->domain ? l->domain : "";
    const char *path = l->path ? l->path : "";
    weir_buf_put_json_str(b, domain, strlen(domain));
    weir_buf_putc(b, '.');
    weir_buf_put_json_str(b, path, strlen(path));
}

void weir_api_render_problem(weir_buf *out, const weir_api_decision *dec, int64_t retry_after_s)
{
    const weir_descriptor_status *s = weir_api_most_restrictive(dec);
    obj o = problem_open(out, 429);
    obj_key(&o, "detail");
    if (!s) {
        put_cstr(out, "rate limit exceeded");
    } else {
        uint64_t window_s = weir_api_ceil_div(s->window_us, 1000000);
        if (window_s == 0)
            window_s = 1;
        weir_buf_puts(out, "\"rate limit exceeded: ");
        put_limit_name(out, s->limit);
        weir_buf_puts(out, " allows ");
        weir_buf_put_u64(out, s->requests_per_unit);
        weir_buf_puts(out, " per ");
        const char *unit = weir_rule_unit_name(s->unit);
        if (unit) {
            weir_buf_puts(out, unit);
        } else if (window_s == 1) {
            weir_buf_puts(out, "second");
        } else {
            weir_buf_put_u64(out, window_s);
            weir_buf_puts(out, " seconds");
        }
        weir_buf_putc(out, '"');
        obj_key(&o, "rule");
        obj ro = obj_open(out);
        obj_key(&ro, "name");
        put_cstr(out, s->limit->name);
        obj_key(&ro, "domain");
        put_cstr(out, s->limit->domain);
        obj_key(&ro, "path");
        put_cstr(out, s->limit->path);
        obj_close(&ro);
        obj_key(&o, "limit");
        weir_buf_put_u64(out, s->requests_per_unit);
        obj_key(&o, "window_seconds");
        weir_buf_put_u64(out, window_s);
    }
    obj_key(&o, "retry_after");
    if (retry_after_s < 0)
        weir_buf_puts(out, "null");
    else
        weir_buf_put_i64(out, retry_after_s);
    obj_close(&o);
}

void weir_api_render_error(weir_buf *out, int status, const char *detail)
{
    weir_api_render_error_at(out, status, detail, NULL);
}

void weir_api_render_error_at(weir_buf *out, int status, const char *detail, const char *field)
{
    obj o = problem_open(out, status);
    if (detail) {
        obj_key(&o, "detail");
        put_cstr(out, detail);
    }
    if (field) {
        obj_key(&o, "field");
        put_cstr(out, field);
    }
    obj_close(&o);
}

const char *weir_api_reason(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 204:
        return "No Content";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 406:
        return "Not Acceptable";
    case 408:
        return "Request Timeout";
    case 411:
        return "Length Required";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 415:
        return "Unsupported Media Type";
    case 417:
        return "Expectation Failed";
    case 422:
        return "Unprocessable Content";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Unknown";
    }
}
