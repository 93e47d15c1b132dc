/*
 * test_api_render.c - the API renderers: exact bytes of weir's decision
 * JSON, upstream's proto3 JSON, the rate limit header fields, problem+json
 * bodies and reason phrases, for statuses built by hand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/api.h"

/* The header fields of @dec as the HTTP lines they make. */
static void render_lines(weir_buf *b, const weir_api_decision *dec,
                         const weir_api_header_opts *opts, int64_t now_us, int64_t jitter_s)
{
    weir_headers h;
    weir_headers_init(&h, 1 << 16);
    weir_api_render_headers(&h, dec, opts, now_us, jitter_s);
    assert_true(weir_headers_ok(&h));
    weir_headers_put_lines(&h, b);
    weir_headers_free(&h);
}

static const weir_rule_limit per_user = {
    .name = "per_user",
    .requests_per_unit = 10,
    .unit = WEIR_UNIT_MINUTE,
    .window_us = 60000000,
    .algorithm = WEIR_ALGO_TOKEN_BUCKET,
    .domain = "api",
    .path = "user",
};

static const weir_rule_limit per_ip = {
    .name = NULL,
    .requests_per_unit = 5,
    .unit = WEIR_UNIT_NONE,
    .window_us = 30000000,
    .algorithm = WEIR_ALGO_GCRA,
    .domain = "api",
    .path = "ip_address",
};

/* An allowed status of per_user: 9 left, reset in 46.9995 s. */
static weir_descriptor_status ok_status(void)
{
    return (weir_descriptor_status){
        .code = WEIR_CODE_OK,
        .limit = &per_user,
        .requests_per_unit = 10,
        .unit = WEIR_UNIT_MINUTE,
        .window_us = 60000000,
        .remaining = 9,
        .reset_after_us = 46999500,
    };
}

/* A denied status of per_ip: retry in 5.5 s, reset in 29 s. */
static weir_descriptor_status over_status(void)
{
    return (weir_descriptor_status){
        .code = WEIR_CODE_OVER_LIMIT,
        .limit = &per_ip,
        .requests_per_unit = 5,
        .unit = WEIR_UNIT_NONE,
        .window_us = 30000000,
        .remaining = 0,
        .reset_after_us = 29000000,
        .retry_after_us = 5500000,
    };
}

static weir_descriptor_status unmatched_status(void)
{
    return (weir_descriptor_status){.code = WEIR_CODE_OK};
}

static weir_descriptor_status unlimited_status(void)
{
    return (weir_descriptor_status){
        .code = WEIR_CODE_OK, .unlimited = true, .remaining = WEIR_ENGINE_UNLIMITED_REMAINING};
}

/* Asserts the buffer holds exactly @want, then empties it. */
static void expect_buf(weir_buf *b, const char *want)
{
    assert_true(weir_buf_ok(b));
    if (b->len != strlen(want) || memcmp(b->p, want, b->len) != 0) {
        fprintf(stderr, "got  %.*s\nwant %s\n", (int)b->len, b->p ? b->p : "", want);
        fail();
    }
    weir_buf_clear(b);
}

static void decision(void **unused)
{
    (void)unused;
    weir_buf b;
    weir_buf_init(&b, 1 << 20);
    weir_descriptor_status st[4] = {ok_status(), over_status(), unmatched_status(),
                                    unlimited_status()};
    weir_api_decision dec = {WEIR_CODE_OVER_LIMIT, st, 4};
    weir_api_render_decision(&b, &dec);
    expect_buf(&b, "{\"allowed\":false,\"code\":\"OVER_LIMIT\",\"statuses\":["
                   "{\"code\":\"OK\",\"limit\":{\"name\":\"per_user\",\"domain\":\"api\","
                   "\"path\":\"user\",\"requests_per_unit\":10,\"unit\":\"minute\","
                   "\"window_ms\":60000,\"algorithm\":\"token_bucket\"},\"remaining\":9,"
                   "\"reset_after_ms\":47000,\"retry_after_ms\":0},"
                   "{\"code\":\"OVER_LIMIT\",\"limit\":{\"name\":null,\"domain\":\"api\","
                   "\"path\":\"ip_address\",\"requests_per_unit\":5,\"window_ms\":30000,"
                   "\"algorithm\":\"gcra\"},\"remaining\":0,\"reset_after_ms\":29000,"
                   "\"retry_after_ms\":5500},"
                   "{\"code\":\"OK\"},{\"code\":\"OK\",\"unlimited\":true}]}");

    /* the override's values, never-admitted, delay, shadow and failure mode */
    weir_descriptor_status s = ok_status();
    s.requests_per_unit = 3;
    s.unit = WEIR_UNIT_WEEK;
    s.window_us = 1500;
    s.reset_after_us = 1;
    s.remaining = 0;
    s.delay_us = 250001;
    s.shadow = true;
    s.would_deny = true;
    s.failure_mode = true;
    weir_descriptor_status never = over_status();
    never.retry_after_us = WEIR_NEVER;
    never.limit = &(weir_rule_limit){.name = "q\"\\\n", .algorithm = WEIR_ALGO_SLIDING_LOG};
    weir_descriptor_status two[2] = {s, never};
    dec = (weir_api_decision){WEIR_CODE_OVER_LIMIT, two, 2};
    weir_api_render_decision(&b, &dec);
    expect_buf(&b, "{\"allowed\":false,\"code\":\"OVER_LIMIT\",\"statuses\":["
                   "{\"code\":\"OK\",\"limit\":{\"name\":\"per_user\",\"domain\":\"api\","
                   "\"path\":\"user\",\"requests_per_unit\":3,\"unit\":\"week\","
                   "\"window_ms\":2,\"algorithm\":\"token_bucket\"},\"remaining\":0,"
                   "\"reset_after_ms\":1,\"retry_after_ms\":0,\"delay_ms\":251,"
                   "\"shadow\":true,\"would_deny\":true,\"failure_mode\":true},"
                   "{\"code\":\"OVER_LIMIT\",\"limit\":{\"name\":\"q\\\"\\\\\\n\","
                   "\"domain\":null,\"path\":null,\"requests_per_unit\":5,\"window_ms\":30000,"
                   "\"algorithm\":\"sliding_window_log\"},\"remaining\":0,"
                   "\"reset_after_ms\":29000,\"retry_after_ms\":-1}]}");

    /* a shadow status that would not deny, and an empty decision */
    s = ok_status();
    s.shadow = true;
    dec = (weir_api_decision){WEIR_CODE_OK, &s, 1};
    weir_api_render_decision(&b, &dec);
    expect_buf(&b, "{\"allowed\":true,\"code\":\"OK\",\"statuses\":[{\"code\":\"OK\",\"limit\":"
                   "{\"name\":\"per_user\",\"domain\":\"api\",\"path\":\"user\","
                   "\"requests_per_unit\":10,\"unit\":\"minute\",\"window_ms\":60000,"
                   "\"algorithm\":\"token_bucket\"},\"remaining\":9,\"reset_after_ms\":47000,"
                   "\"retry_after_ms\":0,\"shadow\":true,\"would_deny\":false}]}");
    dec = (weir_api_decision){WEIR_CODE_OK, NULL, 0};
    weir_api_render_decision(&b, &dec);
    expect_buf(&b, "{\"allowed\":true,\"code\":\"OK\",\"statuses\":[]}");
    weir_buf_free(&b);
}

static void envoy_json(void **unused)
{
    (void)unused;
    weir_buf b;
    weir_buf_init(&b, 1 << 20);
    weir_descriptor_status st[4] = {ok_status(), over_status(), unmatched_status(),
                                    unlimited_status()};
    weir_api_decision dec = {WEIR_CODE_OVER_LIMIT, st, 4};
    weir_api_render_envoy_json(&b, &dec);
    expect_buf(&b, "{\"overallCode\":\"OVER_LIMIT\",\"statuses\":["
                   "{\"code\":\"OK\",\"currentLimit\":{\"requestsPerUnit\":10,\"unit\":"
                   "\"MINUTE\",\"name\":\"per_user\"},\"limitRemaining\":9,"
                   "\"durationUntilReset\":\"46.999500s\"},"
                   "{\"code\":\"OVER_LIMIT\",\"currentLimit\":{\"requestsPerUnit\":5},"
                   "\"durationUntilReset\":\"29s\"},"
                   "{\"code\":\"OK\"},{\"code\":\"OK\",\"limitRemaining\":4294967295}]}");

    /* zero values left out, uint32 clamp, WEEK, an all-default limit */
    weir_descriptor_status a = ok_status(), c = ok_status();
    a.remaining = (uint64_t)1 << 40;
    a.unit = WEIR_UNIT_WEEK;
    a.reset_after_us = 0;
    c.requests_per_unit = 0;
    c.unit = WEIR_UNIT_NONE;
    c.limit = &per_ip;
    c.remaining = 0;
    c.reset_after_us = -5;
    weir_descriptor_status two[2] = {a, c};
    dec = (weir_api_decision){WEIR_CODE_OK, two, 2};
    weir_api_render_envoy_json(&b, &dec);
    expect_buf(&b, "{\"overallCode\":\"OK\",\"statuses\":["
                   "{\"code\":\"OK\",\"currentLimit\":{\"requestsPerUnit\":10,\"unit\":\"WEEK\","
                   "\"name\":\"per_user\"},\"limitRemaining\":4294967295,"
                   "\"durationUntilReset\":\"0s\"},"
                   "{\"code\":\"OK\",\"currentLimit\":{},\"durationUntilReset\":\"0s\"}]}");

    dec = (weir_api_decision){WEIR_CODE_OK, NULL, 0};
    weir_api_render_envoy_json(&b, &dec);
    expect_buf(&b, "{\"overallCode\":\"OK\"}");
    weir_buf_free(&b);
}

/* durationUntilReset with 0, 3 and 6 fractional digits. */
static void envoy_durations(void **unused)
{
    (void)unused;
    static const struct {
        int64_t us;
        const char *want;
    } cases[] = {
        {1000000, "1s"},       {500000, "0.500s"},  {1000001, "1.000001s"},
        {1, "0.000001s"},      {1010000, "1.010s"}, {3600000000, "3600s"},
        {999999, "0.999999s"}, {-1, "0s"},          {INT64_MAX, "9223372036854.775807s"},
    };
    weir_buf b;
    weir_buf_init(&b, 4096);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        weir_descriptor_status s = over_status();
        s.reset_after_us = cases[i].us;
        weir_api_decision dec = {WEIR_CODE_OVER_LIMIT, &s, 1};
        weir_api_render_envoy_json(&b, &dec);
        char want[256];
        snprintf(want, sizeof(want),
                 "{\"overallCode\":\"OVER_LIMIT\",\"statuses\":[{\"code\":\"OVER_LIMIT\","
                 "\"currentLimit\":{\"requestsPerUnit\":5},\"durationUntilReset\":\"%s\"}]}",
                 cases[i].want);
        expect_buf(&b, want);
    }
    weir_buf_free(&b);
}

static const weir_api_header_opts all = {.ietf = true, .legacy = true, .retry_after = true};

/* A descriptor with two limits lists both policies (its outcomes), each
 * limit once however many descriptors tested it. */
static void headers_every_limit_tested(void **unused)
{
    (void)unused;
    weir_buf b;
    weir_buf_init(&b, 4096);
    weir_limit_outcome both[2] = {
        {.limit = &per_user,
         .requests_per_unit = 10,
         .unit = WEIR_UNIT_MINUTE,
         .window_us = 60000000,
         .remaining = 9,
         .reset_after_us = 46999500},
        {.limit = &per_ip,
         .requests_per_unit = 5,
         .unit = WEIR_UNIT_NONE,
         .window_us = 30000000,
         .remaining = 4,
         .reset_after_us = 29000000},
    };
    weir_descriptor_status st[2] = {ok_status(), ok_status()};
    st[0].outcomes = both;
    st[0].n_outcomes = 2;
    st[1].outcomes = both;
    st[1].n_outcomes = 1;
    weir_api_decision dec = {WEIR_CODE_OK, st, 2};
    weir_api_header_opts ietf = {.ietf = true};
    render_lines(&b, &dec, &ietf, 1700000000000000, 0);
    expect_buf(&b, "RateLimit-Policy: \"per_user\";q=10;w=60, \"api.ip_address\";q=5;w=30\r\n"
                   "RateLimit: \"per_user\";r=9;t=47\r\n");
    weir_buf_free(&b);
}

static void headers_denied(void **unused)
{
    (void)unused;
    weir_buf b;
    weir_buf_init(&b, 4096);
    weir_descriptor_status st[4] = {ok_status(), over_status(), unmatched_status(), ok_status()};
    weir_api_decision dec = {WEIR_CODE_OVER_LIMIT, st, 4};
    const int64_t now = 1700000000250000;
    render_lines(&b, &dec, &all, now, 3);
    expect_buf(&b, "RateLimit-Policy: \"per_user\";q=10;w=60, \"api.ip_address\";q=5;w=30\r\n"
                   "RateLimit: \"api.ip_address\";r=0;t=29\r\n"
                   "X-RateLimit-Limit: 5\r\n"
                   "X-RateLimit-Remaining: 0\r\n"
                   "X-RateLimit-Reset: 1700000030\r\n"
                   "Retry-After: 9\r\n");
    assert_int_equal(weir_api_retry_after_s(&dec), 6);
    assert_ptr_equal(weir_api_most_restrictive(&dec), &st[1]);

    /* each family on its own; no jitter */
    weir_api_header_opts ietf = {.ietf = true}, legacy = {.legacy = true},
                         retry = {.retry_after = true}, upstream = {.upstream = true};
    render_lines(&b, &dec, &ietf, now, 0);
    expect_buf(&b, "RateLimit-Policy: \"per_user\";q=10;w=60, \"api.ip_address\";q=5;w=30\r\n"
                   "RateLimit: \"api.ip_address\";r=0;t=29\r\n");
    render_lines(&b, &dec, &legacy, now, 0);
    expect_buf(&b, "X-RateLimit-Limit: 5\r\nX-RateLimit-Remaining: 0\r\n"
                   "X-RateLimit-Reset: 1700000030\r\n");
    render_lines(&b, &dec, &retry, now, 0);
    expect_buf(&b, "Retry-After: 6\r\n");
    render_lines(&b, &dec, &upstream, now, 0);
    expect_buf(&b, "RateLimit-Limit: 5\r\nRateLimit-Remaining: 0\r\nRateLimit-Reset: 29\r\n");
    strcpy(upstream.upstream_names[2], "X-Reset-In");
    render_lines(&b, &dec, &upstream, now, 0);
    expect_buf(&b, "RateLimit-Limit: 5\r\nRateLimit-Remaining: 0\r\nX-Reset-In: 29\r\n");

    /* the longest retry wins; a never-admitted denial has no Retry-After */
    weir_descriptor_status longer = over_status(), never = over_status();
    longer.limit = &per_user;
    longer.retry_after_us = 7000000;
    never.retry_after_us = WEIR_NEVER;
    never.reset_after_us = 0;
    weir_descriptor_status three[3] = {over_status(), longer, never};
    dec = (weir_api_decision){WEIR_CODE_OVER_LIMIT, three, 2};
    assert_ptr_equal(weir_api_most_restrictive(&dec), &three[1]);
    assert_int_equal(weir_api_retry_after_s(&dec), 7);
    dec.n = 3;
    assert_ptr_equal(weir_api_most_restrictive(&dec), &three[2]);
    assert_int_equal(weir_api_retry_after_s(&dec), -1);
    render_lines(&b, &dec, &all, now, 3);
    expect_buf(&b, "RateLimit-Policy: \"api.ip_address\";q=5;w=30, \"per_user\";q=5;w=30\r\n"
                   "RateLimit: \"api.ip_address\";r=0;t=0\r\n"
                   "X-RateLimit-Limit: 5\r\nX-RateLimit-Remaining: 0\r\n"
                   "X-RateLimit-Reset: 1700000001\r\n");

    /* a denial due in under a second still says 1 */
    weir_descriptor_status soon = over_status();
    soon.retry_after_us = 1;
    dec = (weir_api_decision){WEIR_CODE_OVER_LIMIT, &soon, 1};
    assert_int_equal(weir_api_retry_after_s(&dec), 1);
    render_lines(&b, &dec, &retry, now, -4);
    expect_buf(&b, "Retry-After: 1\r\n");
    weir_buf_free(&b);
}

static void headers_allowed(void **unused)
{
    (void)unused;
    weir_buf b;
    weir_buf_init(&b, 4096);
    /* least remaining wins, ties to the longest reset; shadow limits are
     * never advertised (they deny nothing) */
    weir_descriptor_status a = ok_status(), c = ok_status(), shadow = over_status();
    a.remaining = 3;
    a.reset_after_us = 10000000;
    c.remaining = 3;
    c.reset_after_us = 20000001;
    c.limit = &(weir_rule_limit){.name = "a\"b\\c\x01\xc3\xa9", .domain = "x", .path = "y"};
    shadow.code = WEIR_CODE_OK;
    shadow.shadow = true;
    shadow.would_deny = true;
    shadow.remaining = 4;
    weir_descriptor_status st[4] = {a, shadow, c, unlimited_status()};
    weir_api_decision dec = {WEIR_CODE_OK, st, 4};
    assert_ptr_equal(weir_api_most_restrictive(&dec), &st[2]);
    assert_int_equal(weir_api_retry_after_s(&dec), 0);
    render_lines(&b, &dec, &all, 0, 3);
    expect_buf(&b,
               "RateLimit-Policy: \"per_user\";q=10;w=60, "
               "\"a\\\"b\\\\c?\?\?\";q=10;w=60\r\n"
               "RateLimit: \"a\\\"b\\\\c?\?\?\";r=3;t=21\r\n"
               "X-RateLimit-Limit: 10\r\nX-RateLimit-Remaining: 3\r\nX-RateLimit-Reset: 21\r\n");

    /* no status with a limit: nothing at all */
    weir_descriptor_status none[2] = {unmatched_status(), unlimited_status()};
    dec = (weir_api_decision){WEIR_CODE_OK, none, 2};
    assert_null(weir_api_most_restrictive(&dec));
    render_lines(&b, &dec, &all, 0, 0);
    expect_buf(&b, "");
    render_lines(&b, &dec, NULL, 0, 0);
    expect_buf(&b, "");

    /* clamps: a zero window is 1 s, huge values saturate */
    weir_descriptor_status big = ok_status();
    big.window_us = 0;
    big.remaining = UINT64_MAX;
    big.reset_after_us = INT64_MAX;
    big.requests_per_unit = UINT32_MAX;
    dec = (weir_api_decision){WEIR_CODE_OK, &big, 1};
    render_lines(&b, &dec, &all, INT64_MAX, 0);
    expect_buf(&b, "RateLimit-Policy: \"per_user\";q=4294967295;w=1\r\n"
                   "RateLimit: \"per_user\";r=999999999999999;t=9223372036855\r\n"
                   "X-RateLimit-Limit: 4294967295\r\nX-RateLimit-Remaining: 999999999999999\r\n"
                   "X-RateLimit-Reset: 9223372036855\r\n");
    /* a time before the epoch and a jitter that would overflow */
    weir_descriptor_status over = over_status();
    over.retry_after_us = INT64_MAX;
    dec = (weir_api_decision){WEIR_CODE_OVER_LIMIT, &over, 1};
    render_lines(&b, &dec, &all, -5000000, INT64_MAX);
    expect_buf(&b, "RateLimit-Policy: \"api.ip_address\";q=5;w=30\r\n"
                   "RateLimit: \"api.ip_address\";r=0;t=29\r\n"
                   "X-RateLimit-Limit: 5\r\nX-RateLimit-Remaining: 0\r\n"
                   "X-RateLimit-Reset: 29\r\n"
                   "Retry-After: 9223372036854775807\r\n");
    weir_buf_free(&b);
}

static void problem(void **unused)
{
    (void)unused;
    weir_buf b;
    weir_buf_init(&b, 4096);
    weir_descriptor_status st[2] = {ok_status(), over_status()};
    weir_api_decision dec = {WEIR_CODE_OVER_LIMIT, st, 2};
    weir_api_render_problem(&b, &dec, weir_api_retry_after_s(&dec));
    expect_buf(&b, "{\"type\":\"about:blank\",\"title\":\"Too Many Requests\",\"status\":429,"
                   "\"detail\":\"rate limit exceeded: api.ip_address allows 5 per 30 seconds\","
                   "\"rule\":{\"name\":null,\"domain\":\"api\",\"path\":\"ip_address\"},"
                   "\"limit\":5,\"window_seconds\":30,\"retry_after\":6}");

    weir_descriptor_status named = ok_status();
    named.code = WEIR_CODE_OVER_LIMIT;
    named.retry_after_us = WEIR_NEVER;
    named.limit = &(weir_rule_limit){.name = "n\"1", .domain = "d", .path = "p"};
    dec = (weir_api_decision){WEIR_CODE_OVER_LIMIT, &named, 1};
    weir_api_render_problem(&b, &dec, weir_api_retry_after_s(&dec));
    expect_buf(&b, "{\"type\":\"about:blank\",\"title\":\"Too Many Requests\",\"status\":429,"
                   "\"detail\":\"rate limit exceeded: n\\\"1 allows 10 per minute\","
                   "\"rule\":{\"name\":\"n\\\"1\",\"domain\":\"d\",\"path\":\"p\"},"
                   "\"limit\":10,\"window_seconds\":60,\"retry_after\":null}");

    /* a one-second window given as a window */
    weir_descriptor_status sec = over_status();
    sec.window_us = 999;
    dec = (weir_api_decision){WEIR_CODE_OVER_LIMIT, &sec, 1};
    weir_api_render_problem(&b, &dec, 0);
    expect_buf(&b, "{\"type\":\"about:blank\",\"title\":\"Too Many Requests\",\"status\":429,"
                   "\"detail\":\"rate limit exceeded: api.ip_address allows 5 per second\","
                   "\"rule\":{\"name\":null,\"domain\":\"api\",\"path\":\"ip_address\"},"
                   "\"limit\":5,\"window_seconds\":1,\"retry_after\":0}");

    /* no limit to name */
    weir_descriptor_status none = unmatched_status();
    dec = (weir_api_decision){WEIR_CODE_OVER_LIMIT, &none, 1};
    weir_api_render_problem(&b, &dec, 2);
    expect_buf(&b, "{\"type\":\"about:blank\",\"title\":\"Too Many Requests\",\"status\":429,"
                   "\"detail\":\"rate limit exceeded\",\"retry_after\":2}");
    weir_buf_free(&b);
}

static void errors_and_reasons(void **unused)
{
    (void)unused;
    weir_buf b;
    weir_buf_init(&b, 4096);
    weir_api_render_error(&b, 400, "descriptors[0].entries[1].value: must be a string");
    expect_buf(&b, "{\"type\":\"about:blank\",\"title\":\"Bad Request\",\"status\":400,"
                   "\"detail\":\"descriptors[0].entries[1].value: must be a string\"}");
    weir_api_render_error(&b, 413, "unknown field 'a\"b'\n");
    expect_buf(&b, "{\"type\":\"about:blank\",\"title\":\"Content Too Large\",\"status\":413,"
                   "\"detail\":\"unknown field 'a\\\"b'\\n\"}");
    weir_api_render_error(&b, 999, NULL);
    expect_buf(&b, "{\"type\":\"about:blank\",\"title\":\"Unknown\",\"status\":999}");
    weir_api_render_error_at(&b, 422, "tier must not be empty", "tier");
    expect_buf(&b, "{\"type\":\"about:blank\",\"title\":\"Unprocessable Content\","
                   "\"status\":422,\"detail\":\"tier must not be empty\",\"field\":\"tier\"}");

    static const struct {
        int status;
        const char *reason;
    } reasons[] = {
        {200, "OK"},
        {204, "No Content"},
        {400, "Bad Request"},
        {404, "Not Found"},
        {405, "Method Not Allowed"},
        {408, "Request Timeout"},
        {413, "Content Too Large"},
        {414, "URI Too Long"},
        {422, "Unprocessable Content"},
        {429, "Too Many Requests"},
        {431, "Request Header Fields Too Large"},
        {500, "Internal Server Error"},
        {501, "Not Implemented"},
        {503, "Service Unavailable"},
        {505, "HTTP Version Not Supported"},
        {0, "Unknown"},
        {-1, "Unknown"},
        {299, "Unknown"},
    };
    for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
        assert_string_equal(weir_api_reason(reasons[i].status), reasons[i].reason);
    weir_buf_free(&b);
}

/* A buffer that cannot grow reports failure instead of writing less. (At
 * least 256 bytes: buf.c's first allocation is 256 bytes whatever the cap.) */
static void full_buffer(void **unused)
{
    (void)unused;
    weir_buf b;
    weir_buf_init(&b, 300);
    weir_descriptor_status st[4] = {ok_status(), over_status(), ok_status(), over_status()};
    weir_api_decision dec = {WEIR_CODE_OVER_LIMIT, st, 4};
    weir_api_render_decision(&b, &dec);
    assert_false(weir_buf_ok(&b));
    assert_true(b.len <= 300);
    weir_buf_clear(&b);
    weir_api_render_envoy_json(&b, &dec);
    assert_false(weir_buf_ok(&b));
    weir_buf_clear(&b);
    char name[400];
    memset(name, 'n', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    weir_rule_limit named = per_user;
    named.name = name;
    st[1].limit = &named;
    render_lines(&b, &dec, &all, 0, 0);
    assert_false(weir_buf_ok(&b));
    weir_buf_clear(&b);
    weir_api_render_problem(&b, &dec, 1);
    assert_false(weir_buf_ok(&b));
    weir_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(decision),
        cmocka_unit_test(envoy_json),
        cmocka_unit_test(envoy_durations),
        cmocka_unit_test(headers_denied),
        cmocka_unit_test(headers_allowed),
        cmocka_unit_test(problem),
        cmocka_unit_test(errors_and_reasons),
        cmocka_unit_test(full_buffer),
        cmocka_unit_test(headers_every_limit_tested),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
