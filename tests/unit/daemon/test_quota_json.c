/*
 * test_quota_json.c - the PUT body of the quota admin API
 * (daemon/quota/json.c): the seed's example and every rule of json.h,
 * each refusal with its exact status and field; numbers too large,
 * negative, fractional or in exponent form; caps at their edges and a
 * megabyte past them; NUL bytes; the caller's hooks; a record that
 * renders (quota_json_tenant()) and reads back the same through jansson.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "quota/json.h"

static weir_json parser;
static quota_tenant t;
static quota_json_error err;
static int tier_calls, zone_calls;

/* Every tier but "platinum" exists. */
static bool tier_known(void *arg, const char *tier)
{
    (void)arg;
    tier_calls++;
    return strcmp(tier, "platinum") != 0;
}

static bool zone_known(void *arg, const char *name)
{
    (void)arg;
    zone_calls++;
    static const char *const zones[] = {"UTC", "America/New_York", "Asia/Kolkata", "Etc/GMT+5"};
    for (size_t i = 0; i < sizeof(zones) / sizeof(zones[0]); i++) {
        if (strcmp(name, zones[i]) == 0)
            return true;
    }
    return false;
}

static const quota_json_checks checks = {tier_known, zone_known, NULL};

static bool parse_n(const char *body, size_t len)
{
    memcpy(t.key, "abc123", 7);
    t.key_len = 6;
    return quota_json_parse_put(&parser, body, len, &checks, &t, &err);
}

static bool parse(const char *body)
{
    return parse_n(body, strlen(body));
}

/* @body (@len bytes) is refused with @status naming @field; the record is
 * left empty but for its key. */
static void refused_n(const char *body, size_t len, int status, const char *field)
{
    bool ok = parse_n(body, len);
    if (ok || err.status != status || strcmp(err.field, field) != 0)
        print_error("body %.200s: ok=%d status %d field '%s' (%s); want %d '%s'\n", body, ok,
                    err.status, err.field, err.detail, status, field);
    assert_false(ok);
    assert_int_equal(err.status, status);
    assert_string_equal(err.field, field);
    assert_true(err.detail[0] != '\0');
    assert_string_equal(t.key, "abc123");
    assert_int_equal(t.key_len, 6);
    assert_string_equal(t.tier, "");
    assert_int_equal(t.n_overrides, 0);
    assert_true(t.effective_at_us == QUOTA_TIME_NONE && t.expires_at_us == QUOTA_TIME_NONE);
}

static void refused(const char *body, int status, const char *field)
{
    refused_n(body, strlen(body), status, field);
}

/* The same, with @detail as the message. */
static void refused_with(const char *body, int status, const char *field, const char *detail)
{
    refused(body, status, field);
    assert_string_equal(err.detail, detail);
}

/* A body of tier "free" with the one override @o (an object's inside). */
static char *with_override(const char *o)
{
    static char body[4096];
    snprintf(body, sizeof(body), "{\"tier\":\"free\",\"overrides\":[{%s}]}", o);
    return body;
}

static char *overridef(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* with_override() of printf(@fmt, ...). */
static char *overridef(const char *fmt, ...)
{
    char o[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o, sizeof(o), fmt, ap);
    va_end(ap);
    return with_override(o);
}

static void seed_example(void **unused)
{
    (void)unused;
    assert_true(parse("{\n"
                      "  \"tier\": \"enterprise\",\n"
                      "  \"overrides\": [\n"
                      "    {\n"
                      "      \"descriptor\": \"endpoint:POST /api/v1/orders\",\n"
                      "      \"requests_per_unit\": 500,\n"
                      "      \"unit\": \"minute\"\n"
                      "    }\n"
                      "  ],\n"
                      "  \"effective_at\": \"2025-02-01T00:00:00Z\",\n"
                      "  \"expires_at\": null\n"
                      "}\n"));
    assert_string_equal(t.key, "abc123");
    assert_string_equal(t.tier, "enterprise");
    assert_int_equal(t.n_overrides, 1);
    const quota_override *o = &t.overrides[0];
    assert_string_equal(o->descriptor, "endpoint:POST /api/v1/orders");
    assert_int_equal(o->requests_per_unit, 500);
    assert_int_equal(o->unit, WEIR_UNIT_MINUTE);
    assert_int_equal(o->calendar, WEIR_CALENDAR_NONE);
    assert_string_equal(o->time_zone, "");
    assert_int_equal(o->algorithm, 0);
    assert_true(t.effective_at_us == INT64_C(1738368000000000));
    assert_true(t.expires_at_us == QUOTA_TIME_NONE);
    assert_true(t.created_at_us == QUOTA_TIME_NONE && t.updated_at_us == QUOTA_TIME_NONE);
    assert_int_equal(t.version, 0);
}

static const char full_body[] =
    "{\"tier\":\"enterprise\",\"overrides\":["
    "{\"descriptor\":\"endpoint:POST "
    "/api/v1/orders\",\"requests_per_unit\":500,\"unit\":\"minute\"},"
    "{\"descriptor\":\"default\",\"requests_per_unit\":1000000,\"calendar\":\"month\","
    "\"time_zone\":\"America/New_York\"},"
    "{\"descriptor\":\"default\",\"requests_per_unit\":50,\"unit\":\"second\","
    "\"algorithm\":\"token_bucket\"}],"
    "\"effective_at\":\"2025-02-01T00:00:00Z\",\"expires_at\":\"2026-02-01T05:30:00.5+05:30\"}";

static void full_example(void **unused)
{
    (void)unused;
    tier_calls = zone_calls = 0;
    assert_true(parse(full_body));
    assert_int_equal(tier_calls, 1);
    assert_int_equal(zone_calls, 1);
    assert_int_equal(t.n_overrides, 3);
    assert_int_equal(t.overrides[1].requests_per_unit, 1000000);
    assert_int_equal(t.overrides[1].unit, WEIR_UNIT_NONE);
    assert_int_equal(t.overrides[1].calendar, WEIR_CALENDAR_MONTH);
    assert_string_equal(t.overrides[1].time_zone, "America/New_York");
    assert_int_equal(t.overrides[1].algorithm, 0);
    assert_int_equal(t.overrides[2].unit, WEIR_UNIT_SECOND);
    assert_int_equal(t.overrides[2].algorithm, WEIR_ALGO_TOKEN_BUCKET);
    /* 2026-02-01T00:00:00.5Z */
    assert_true(t.expires_at_us == INT64_C(1769904000500000));
}

static void optional_members(void **unused)
{
    (void)unused;
    assert_true(parse("{\"tier\":\"free\"}"));
    assert_string_equal(t.tier, "free");
    assert_int_equal(t.n_overrides, 0);
    assert_true(t.effective_at_us == QUOTA_TIME_NONE && t.expires_at_us == QUOTA_TIME_NONE);
    /* null is absent */
    assert_true(parse("{\"overrides\":null,\"tier\":\"free\",\"effective_at\":null,"
                      "\"expires_at\":null}"));
    assert_true(parse("{\"tier\":\"free\",\"overrides\":[]}"));
    assert_int_equal(t.n_overrides, 0);
    assert_true(parse(with_override("\"descriptor\":\"default\",\"requests_per_unit\":1,"
                                    "\"unit\":\"hour\",\"calendar\":null,\"time_zone\":null,"
                                    "\"algorithm\":null")));
    assert_int_equal(t.overrides[0].unit, WEIR_UNIT_HOUR);
    /* no hooks: anything well-formed goes */
    assert_true(quota_json_parse_put(&parser, "{\"tier\":\"platinum\"}", 19, NULL, &t, &err));
    static const quota_json_checks none = {NULL, NULL, NULL};
    const char *b = with_override("\"descriptor\":\"default\",\"requests_per_unit\":1,"
                                  "\"calendar\":\"day\",\"time_zone\":\"Mars/Olympus_Mons\"");
    assert_true(quota_json_parse_put(&parser, b, strlen(b), &none, &t, &err));
}

static void malformed(void **unused)
{
    (void)unused;
    refused_with("", 400, "",
                 "malformed JSON at line 1, column 0: unexpected token near end "
                 "of file");
    refused("{", 400, "");
    refused("{\"tier\":\"free\",}", 400, "");
    refused("{\"tier\":\"free\"} x", 400, "");
    refused("{\"tier\":\"fr\xff\"}", 400, ""); /* not UTF-8 */
    refused("{'tier':'free'}", 400, "");
    refused("\xef\xbb\xbf{\"tier\":\"free\"}", 400, ""); /* a byte order mark */
    refused_n("{\"tier\":\"free\"}\0", 16, 400, "");
    refused_with("[]", 400, "", "the body must be a JSON object");
    refused("\"tier\"", 400, "");
    refused("1", 400, "");
    refused("null", 400, "");
    /* a megabyte of whitespace */
    size_t n = (size_t)1 << 20;
    char *ws = malloc(n + 2);
    assert_non_null(ws);
    memset(ws, ' ', n);
    refused_n(ws, n, 400, "");
    assert_non_null(strstr(err.detail, "near end of file"));
    ws[0] = '{';
    ws[n - 1] = '}';
    refused_n(ws, n, 400, "tier"); /* {<spaces>}: a valid, empty object */
    free(ws);
    /* deeper than the parser goes */
    char deep[200];
    memset(deep, '[', sizeof(deep) - 1);
    deep[sizeof(deep) - 1] = '\0';
    refused(deep, 400, "");
}

static void unknown_and_repeated_members(void **unused)
{
    (void)unused;
    refused_with("{\"tier\":\"free\",\"tierr\":1}", 400, "tierr", "unknown member 'tierr'");
    refused_with("{\"tier\":\"free\",\"tier\":\"pro\"}", 400, "tier", "member 'tier' given twice");
    refused("{\"tier\":\"free\",\"effective_at\":null,\"effective_at\":null}", 400, "effective_at");
    refused("{\"tier\":\"free\",\"api_key\":\"abc123\"}", 400, "api_key");
    refused("{\"tier\":\"free\",\"Tier\":\"free\"}", 400, "Tier");
    refused_with("{\"tier\":\"free\",\"\\u0000\":1}", 400, "?", "unknown member '?'");
    refused(with_override("\"descriptor\":\"default\",\"requests_per_unit\":1,\"units\":\"hour\""),
            400, "overrides[0].units");
    refused(with_override("\"descriptor\":\"default\",\"requests_per_unit\":1,\"unit\":\"hour\","
                          "\"unit\":\"hour\""),
            400, "overrides[0].unit");
    /* the second override's typo, after a valid first */
    refused("{\"tier\":\"free\",\"overrides\":[{\"descriptor\":\"default\",\"requests_per_unit\":1,"
            "\"unit\":\"hour\"},{\"descriptor\":\"default\",\"requests_per_unit\":1,"
            "\"unit\":\"day\",\"burst\":5}]}",
            400, "overrides[1].burst");
    /* a long unknown name is cut in the field */
    refused("{\"tier\":\"free\",\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\":1}", 400,
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...");
}

static void tier(void **unused)
{
    (void)unused;
    refused_with("{}", 400, "tier", "tier is required");
    refused("{\"tier\":null}", 400, "tier");
    refused_with("{\"tier\":5}", 400, "tier", "tier must be a string");
    refused("{\"tier\":[\"free\"]}", 400, "tier");
    refused_with("{\"tier\":\"\"}", 422, "tier", "tier must not be empty");
    refused_with("{\"tier\":\"a b\"}", 422, "tier",
                 "tier may hold only letters, digits, '_', '.' and '-'");
    refused("{\"tier\":\"caf\xc3\xa9\"}", 422, "tier");
    refused("{\"tier\":\"a/b\"}", 422, "tier");
    refused_with("{\"tier\":\"fr\\u0000ee\"}", 422, "tier",
                 "tier must not contain a NUL byte (\\u0000)");
    char body[256];
    char name[80];
    memset(name, 'x', sizeof(name));
    name[64] = '\0';
    snprintf(body, sizeof(body), "{\"tier\":\"%s\"}", name);
    assert_true(parse(body));
    assert_int_equal(strlen(t.tier), 64);
    name[64] = 'x';
    name[65] = '\0';
    snprintf(body, sizeof(body), "{\"tier\":\"%s\"}", name);
    refused_with(body, 422, "tier", "tier is 65 bytes long, more than the 64 allowed");
    assert_true(parse("{\"tier\":\"Gold_2.0-eu\"}"));
    tier_calls = 0;
    refused_with("{\"tier\":\"platinum\"}", 422, "tier", "unknown tier 'platinum'");
    assert_int_equal(tier_calls, 1);
    /* the hook sees only well-formed names */
    refused("{\"tier\":\"a b\"}", 422, "tier");
    assert_int_equal(tier_calls, 1);
}

static void overrides_array(void **unused)
{
    (void)unused;
    refused_with("{\"tier\":\"free\",\"overrides\":{}}", 400, "overrides",
                 "overrides must be an array");
    refused("{\"tier\":\"free\",\"overrides\":\"default\"}", 400, "overrides");
    refused_with("{\"tier\":\"free\",\"overrides\":[1]}", 400, "overrides[0]",
                 "an override must be an object");
    refused("{\"tier\":\"free\",\"overrides\":[null]}", 400, "overrides[0]");
    /* 64 overrides, then 65 */
    size_t cap = 80 * 70 + 64;
    char *body = malloc(cap);
    assert_non_null(body);
    for (unsigned n = 64; n <= 65; n++) {
        size_t at = (size_t)snprintf(body, cap, "{\"tier\":\"free\",\"overrides\":[");
        for (unsigned i = 0; i < n; i++)
            at += (size_t)snprintf(body + at, cap - at,
                                   "%s{\"descriptor\":\"k:%u\",\"requests_per_unit\":%u,"
                                   "\"unit\":\"day\"}",
                                   i ? "," : "", i, i);
        snprintf(body + at, cap - at, "]}");
        if (n == 64) {
            assert_true(parse(body));
            assert_int_equal(t.n_overrides, 64);
            assert_string_equal(t.overrides[63].descriptor, "k:63");
            assert_int_equal(t.overrides[63].requests_per_unit, 63);
        } else {
            refused_with(body, 422, "overrides",
                         "65 overrides, more than the 64 a tenant may have");
        }
    }
    free(body);
}

static void descriptor(void **unused)
{
    (void)unused;
    refused_with(with_override("\"requests_per_unit\":1,\"unit\":\"hour\""), 400,
                 "overrides[0].descriptor", "descriptor is required");
    refused(with_override("\"descriptor\":7,\"requests_per_unit\":1,\"unit\":\"hour\""), 400,
            "overrides[0].descriptor");
    static const char *const bad[] = {"", "nocolon", ":value", "Default", "default:"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        refused(
            overridef("\"descriptor\":\"%s\",\"requests_per_unit\":1,\"unit\":\"hour\"", bad[i]),
            422, "overrides[0].descriptor");
    }
    refused_with(with_override("\"descriptor\":\"endpoint:\",\"requests_per_unit\":1,"
                               "\"unit\":\"hour\""),
                 422, "overrides[0].descriptor",
                 "descriptor \"key:value\" needs a value after the ':' (an empty value matches "
                 "nothing a client sends)");
    refused_with(with_override("\"descriptor\":\"k:v\\u0000\",\"requests_per_unit\":1,"
                               "\"unit\":\"hour\""),
                 422, "overrides[0].descriptor",
                 "descriptor must not contain a NUL byte (\\u0000)");
    /* the key is what comes before the first ':' */
    assert_true(parse(with_override("\"descriptor\":\"path:/a:b\",\"requests_per_unit\":1,"
                                    "\"unit\":\"hour\"")));
    assert_string_equal(t.overrides[0].descriptor, "path:/a:b");
    assert_true(parse(with_override("\"descriptor\":\"k:\\u00e9\\\"\\n\",\"requests_per_unit\":1,"
                                    "\"unit\":\"hour\"")));
    assert_string_equal(t.overrides[0].descriptor, "k:\xc3\xa9\"\n");
    /* 512 bytes, 513, and a megabyte */
    size_t n = ((size_t)1 << 20) + 100;
    char *body = malloc(n + 200);
    assert_non_null(body);
    for (size_t len = 512; len <= 513; len++) {
        size_t at = (size_t)sprintf(body, "{\"tier\":\"free\",\"overrides\":[{\"descriptor\":\"k:");
        memset(body + at, 'v', len - 2);
        at += len - 2;
        sprintf(body + at, "\",\"requests_per_unit\":1,\"unit\":\"hour\"}]}");
        if (len == 512) {
            assert_true(parse(body));
            assert_int_equal(strlen(t.overrides[0].descriptor), 512);
        } else {
            refused_with(body, 422, "overrides[0].descriptor",
                         "descriptor is 513 bytes long, more than the 512 allowed");
        }
    }
    size_t at = (size_t)sprintf(body, "{\"tier\":\"free\",\"overrides\":[{\"descriptor\":\"k:");
    memset(body + at, 'v', (size_t)1 << 20);
    at += (size_t)1 << 20;
    sprintf(body + at, "\",\"requests_per_unit\":1,\"unit\":\"hour\"}]}");
    refused(body, 422, "overrides[0].descriptor");
    /* and a megabyte of tier */
    at = (size_t)sprintf(body, "{\"tier\":\"");
    memset(body + at, 't', (size_t)1 << 20);
    sprintf(body + at + ((size_t)1 << 20), "\"}");
    refused(body, 422, "tier");
    free(body);
}

static void requests_per_unit(void **unused)
{
    (void)unused;
    static const char field[] = "overrides[0].requests_per_unit";
    static const char hourly[] =
        "\"descriptor\":\"default\",\"requests_per_unit\":%s,\"unit\":\"hour\"";
    static const char range[] = "requests_per_unit must be an integer from 0 to 4294967295, "
                                "without a fraction or an exponent";
    refused_with(with_override("\"descriptor\":\"default\",\"unit\":\"hour\""), 400, field,
                 "requests_per_unit is required");
    refused_with(with_override("\"descriptor\":\"default\",\"requests_per_unit\":\"500\","
                               "\"unit\":\"hour\""),
                 400, field, "requests_per_unit must be a number");
    refused(with_override("\"descriptor\":\"default\",\"requests_per_unit\":true,"
                          "\"unit\":\"hour\""),
            400, field);
    static const char *const bad[] = {"-1",         "1.5",   "1e3",    "5.0",
                                      "1E2",        "1e400", "-1e400", "99999999999999999999",
                                      "4294967296", "-0.0",  "0e0",    "18446744073709551616"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        refused_with(overridef(hourly, bad[i]), 422, field, range);
    }
    static const struct {
        const char *text;
        uint64_t value;
    } good[] = {{"0", 0}, {"-0", 0}, {"1", 1}, {"4294967295", 4294967295u}};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        assert_true(parse(overridef(hourly, good[i].text)));
        assert_int_equal(t.overrides[0].requests_per_unit, good[i].value);
    }
}

static void unit_and_calendar(void **unused)
{
    (void)unused;
    refused_with(with_override("\"descriptor\":\"default\",\"requests_per_unit\":1"), 400,
                 "overrides[0].unit", "unit (or calendar) is required");
    refused_with(with_override("\"descriptor\":\"default\",\"requests_per_unit\":1,"
                               "\"unit\":\"day\",\"calendar\":\"day\""),
                 422, "overrides[0].calendar",
                 "give unit (a sliding length of time) or calendar (a period of the calendar), "
                 "not both");
    static const char units[] = "unit must be one of second, minute, hour, day, week, month, year";
    refused_with(with_override("\"descriptor\":\"default\",\"requests_per_unit\":1,"
                               "\"unit\":\"minutes\""),
                 422, "overrides[0].unit", units);
    refused_with(with_override("\"descriptor\":\"default\",\"requests_per_unit\":1,"
                               "\"unit\":\"MINUTE\""),
                 422, "overrides[0].unit", units);
    refused(with_override("\"descriptor\":\"default\",\"requests_per_unit\":1,"
                          "\"unit\":\"minute\\u0000\""),
            422, "overrides[0].unit");
    refused(with_override("\"descriptor\":\"default\",\"requests_per_unit\":1,\"unit\":\"\""), 422,
            "overrides[0].unit");
    refused_with(with_override("\"descriptor\":\"default\",\"requests_per_unit\":1,\"unit\":60"),
                 400, "overrides[0].unit", "unit must be a string");
    refused_with(with_override("\"descriptor\":\"default\",\"requests_per_unit\":1,"
                               "\"calendar\":\"week\""),
                 422, "overrides[0].calendar", "calendar must be one of day, month, year");
    refused(with_override("\"descriptor\":\"default\",\"requests_per_unit\":1,\"calendar\":{}"),
            400, "overrides[0].calendar");
    static const char *const unit_names[] = {
        [WEIR_UNIT_SECOND] = "second", [WEIR_UNIT_MINUTE] = "minute", [WEIR_UNIT_HOUR] = "hour",
        [WEIR_UNIT_DAY] = "day",       [WEIR_UNIT_WEEK] = "week",     [WEIR_UNIT_MONTH] = "month",
        [WEIR_UNIT_YEAR] = "year",
    };
    for (size_t i = WEIR_UNIT_SECOND; i < sizeof(unit_names) / sizeof(unit_names[0]); i++) {
        assert_true(parse(overridef("\"descriptor\":\"default\",\"requests_per_unit\":1,"
                                    "\"unit\":\"%s\"",
                                    unit_names[i])));
        assert_int_equal(t.overrides[0].unit, i);
        assert_int_equal(t.overrides[0].calendar, WEIR_CALENDAR_NONE);
    }
    static const struct {
        const char *name;
        weir_calendar calendar;
    } calendars[] = {
        {"day", WEIR_CALENDAR_DAY}, {"month", WEIR_CALENDAR_MONTH}, {"year", WEIR_CALENDAR_YEAR}};
    for (size_t i = 0; i < sizeof(calendars) / sizeof(calendars[0]); i++) {
        assert_true(parse(overridef("\"descriptor\":\"default\",\"requests_per_unit\":1,"
                                    "\"calendar\":\"%s\"",
                                    calendars[i].name)));
        assert_int_equal(t.overrides[0].calendar, calendars[i].calendar);
        assert_int_equal(t.overrides[0].unit, WEIR_UNIT_NONE);
        assert_string_equal(t.overrides[0].time_zone, "");
    }
}

static void time_zone(void **unused)
{
    (void)unused;
    static const char field[] = "overrides[0].time_zone";
    static const char daily_in[] = "\"descriptor\":\"default\",\"requests_per_unit\":1,"
                                   "\"calendar\":\"day\",\"time_zone\":\"%s\"";
    refused_with(with_override("\"descriptor\":\"default\",\"requests_per_unit\":1,"
                               "\"unit\":\"day\",\"time_zone\":\"UTC\""),
                 422, field,
                 "time_zone applies to a calendar period only (a unit is the same length "
                 "everywhere)");
    assert_true(parse(with_override("\"descriptor\":\"default\",\"requests_per_unit\":1,"
                                    "\"calendar\":\"day\",\"time_zone\":\"Etc/GMT+5\"")));
    assert_string_equal(t.overrides[0].time_zone, "Etc/GMT+5");
    zone_calls = 0;
    refused_with(with_override("\"descriptor\":\"default\",\"requests_per_unit\":1,"
                               "\"calendar\":\"day\",\"time_zone\":\"Mars/Olympus_Mons\""),
                 422, field, "unknown time zone 'Mars/Olympus_Mons'");
    assert_int_equal(zone_calls, 1);
    /* not a zone name at all: the hook is not asked */
    static const char *const bad[] = {"../../etc/passwd",
                                      "/etc/localtime",
                                      "America//New_York",
                                      "America/",
                                      "./UTC",
                                      "America/..",
                                      "a b",
                                      "Europe\\\\Paris",
                                      "..",
                                      ".hidden",
                                      "America/1x",
                                      "Etc/+5"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        refused(overridef(daily_in, bad[i]), 422, field);
        assert_non_null(strstr(err.detail, "is not an IANA time zone name"));
    }
    assert_int_equal(zone_calls, 1);
    refused_with(with_override("\"descriptor\":\"default\",\"requests_per_unit\":1,"
                               "\"calendar\":\"day\",\"time_zone\":\"\""),
                 422, field, "time_zone must not be empty (leave it out for the calendar of UTC)");
    refused_with(with_override("\"descriptor\":\"default\",\"requests_per_unit\":1,"
                               "\"calendar\":\"day\",\"time_zone\":\"UTC\\u0000x\""),
                 422, field, "time_zone must not contain a NUL byte (\\u0000)");
    refused(with_override("\"descriptor\":\"default\",\"requests_per_unit\":1,"
                          "\"calendar\":\"day\",\"time_zone\":-5"),
            400, field);
    char long_zone[QUOTA_MAX_TZ_BYTES + 2];
    memset(long_zone, 'A', QUOTA_MAX_TZ_BYTES + 1);
    long_zone[QUOTA_MAX_TZ_BYTES + 1] = '\0';
    refused_with(overridef(daily_in, long_zone), 422, field,
                 "time_zone is 65 bytes long, more than the 64 allowed");
    assert_int_equal(zone_calls, 1);
}

static void algorithm(void **unused)
{
    (void)unused;
    static const char field[] = "overrides[0].algorithm";
    static const struct {
        const char *name;
        weir_algorithm algorithm;
    } good[] = {
        {"token_bucket", WEIR_ALGO_TOKEN_BUCKET},
        {"gcra", WEIR_ALGO_GCRA},
        {"leaky_bucket", WEIR_ALGO_LEAKY_BUCKET},
        {"fixed_window", WEIR_ALGO_FIXED_WINDOW},
        {"sliding_window_log", WEIR_ALGO_SLIDING_LOG},
        {"sliding_window_counter", WEIR_ALGO_SLIDING_COUNTER},
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        assert_true(parse(overridef("\"descriptor\":\"default\",\"requests_per_unit\":1,"
                                    "\"unit\":\"minute\",\"algorithm\":\"%s\"",
                                    good[i].name)));
        assert_int_equal(t.overrides[0].algorithm, good[i].algorithm);
    }
    refused_with(with_override("\"descriptor\":\"default\",\"requests_per_unit\":1,"
                               "\"unit\":\"minute\",\"algorithm\":\"concurrency\""),
                 422, field,
                 "concurrency limits requests in flight (leases), while a quota is a rate of "
                 "requests per unit");
    refused_with(with_override("\"descriptor\":\"default\",\"requests_per_unit\":1,"
                               "\"unit\":\"minute\",\"algorithm\":\"leaky_bucket_shaper\""),
                 422, field,
                 "leaky_bucket_shaper delays requests in a queue, while a quota is a rate that "
                 "admits or refuses them");
    refused_with(with_override("\"descriptor\":\"default\",\"requests_per_unit\":1,"
                               "\"unit\":\"minute\",\"algorithm\":\"Token_Bucket\""),
                 422, field,
                 "algorithm must be one of token_bucket, gcra, leaky_bucket, fixed_window, "
                 "sliding_window_log, sliding_window_counter");
    refused(with_override("\"descriptor\":\"default\",\"requests_per_unit\":1,"
                          "\"unit\":\"minute\",\"algorithm\":1"),
            400, field);
    /* a calendar period: fixed_window or nothing */
    refused_with(with_override("\"descriptor\":\"default\",\"requests_per_unit\":1,"
                               "\"calendar\":\"month\",\"algorithm\":\"token_bucket\""),
                 422, field,
                 "a calendar period is counted by fixed_window only (leave algorithm out)");
    assert_true(parse(with_override("\"descriptor\":\"default\",\"requests_per_unit\":1,"
                                    "\"calendar\":\"month\",\"algorithm\":\"fixed_window\"")));
    assert_int_equal(t.overrides[0].algorithm, WEIR_ALGO_FIXED_WINDOW);
}

static void same_window_twice(void **unused)
{
    (void)unused;
    refused_with("{\"tier\":\"free\",\"overrides\":["
                 "{\"descriptor\":\"default\",\"requests_per_unit\":1,\"unit\":\"minute\"},"
                 "{\"descriptor\":\"default\",\"requests_per_unit\":2,\"unit\":\"minute\","
                 "\"algorithm\":\"gcra\"}]}",
                 422, "overrides[1].descriptor",
                 "overrides[0] already sets the minute limit of this descriptor");
    refused_with("{\"tier\":\"free\",\"overrides\":["
                 "{\"descriptor\":\"k:v\",\"requests_per_unit\":1,\"calendar\":\"month\"},"
                 "{\"descriptor\":\"k:w\",\"requests_per_unit\":1,\"calendar\":\"month\"},"
                 "{\"descriptor\":\"k:v\",\"requests_per_unit\":2,\"calendar\":\"month\","
                 "\"time_zone\":\"Asia/Kolkata\"}]}",
                 422, "overrides[2].descriptor",
                 "overrides[0] already sets the month limit of this descriptor");
    /* other windows, other descriptors: fine */
    assert_true(parse("{\"tier\":\"free\",\"overrides\":["
                      "{\"descriptor\":\"default\",\"requests_per_unit\":1,\"unit\":\"minute\"},"
                      "{\"descriptor\":\"default\",\"requests_per_unit\":1,\"unit\":\"second\"},"
                      "{\"descriptor\":\"default\",\"requests_per_unit\":1,\"unit\":\"day\"},"
                      "{\"descriptor\":\"default\",\"requests_per_unit\":1,\"calendar\":\"day\"},"
                      "{\"descriptor\":\"k:v\",\"requests_per_unit\":1,\"unit\":\"minute\"}]}"));
    assert_int_equal(t.n_overrides, 5);
}

static void times(void **unused)
{
    (void)unused;
    assert_true(parse("{\"tier\":\"free\",\"effective_at\":\"2025-02-01T00:00:00Z\"}"));
    assert_true(t.effective_at_us == INT64_C(1738368000000000));
    assert_true(t.expires_at_us == QUOTA_TIME_NONE);
    assert_true(parse("{\"tier\":\"free\",\"expires_at\":\"2025-02-01T00:00:00.000001Z\"}"));
    assert_true(t.effective_at_us == QUOTA_TIME_NONE);
    assert_true(t.expires_at_us == INT64_C(1738368000000001));
    assert_true(parse("{\"tier\":\"free\",\"effective_at\":\"2025-02-01T00:00:00Z\","
                      "\"expires_at\":\"2025-02-01T00:00:00.000001Z\"}"));
    /* the same instant in two zones */
    refused_with("{\"tier\":\"free\",\"effective_at\":\"2025-02-01T05:30:00+05:30\","
                 "\"expires_at\":\"2025-02-01T00:00:00Z\"}",
                 422, "expires_at", "expires_at must be after effective_at");
    refused("{\"tier\":\"free\",\"effective_at\":\"2026-01-01T00:00:00Z\","
            "\"expires_at\":\"2025-01-01T00:00:00Z\"}",
            422, "expires_at");
    refused_with("{\"tier\":\"free\",\"effective_at\":\"2026-02-29T00:00:00Z\"}", 422,
                 "effective_at",
                 "effective_at must be an RFC 3339 timestamp from 1970 to 9999 such as "
                 "2025-02-01T00:00:00Z or 2025-02-01T05:30:00.25+05:30");
    refused("{\"tier\":\"free\",\"expires_at\":\"2025-02-01\"}", 422, "expires_at");
    refused("{\"tier\":\"free\",\"expires_at\":\"2025-02-01T00:00:00\"}", 422, "expires_at");
    refused("{\"tier\":\"free\",\"expires_at\":\"2025-02-01T00:00:00Z\\u0000\"}", 422,
            "expires_at");
    refused_with("{\"tier\":\"free\",\"expires_at\":1738368000}", 400, "expires_at",
                 "expires_at must be a string or null");
    refused("{\"tier\":\"free\",\"effective_at\":false}", 400, "effective_at");
}

/* What quota_json_tenant() writes reads back, through jansson, as a PUT
 * body that gives the same record. */
static void rendering_reads_back(void **unused)
{
    (void)unused;
    assert_true(parse(full_body));
    quota_tenant first = t;
    first.version = 3;
    first.created_at_us = 1;
    first.updated_at_us = 1700000000123456;
    char *text = quota_json_tenant(&first);
    assert_non_null(text);
    json_error_t je;
    json_t *doc = json_loads(text, 0, &je);
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(doc, "api_key")), "abc123");
    assert_int_equal(json_integer_value(json_object_get(doc, "version")), 3);
    assert_string_equal(json_string_value(json_object_get(doc, "created_at")),
                        "1970-01-01T00:00:00.000001Z");
    json_t *quotas = json_object_get(doc, "quotas");
    assert_true(json_is_null(json_object_get(quotas, "default")));
    json_t *put = json_pack("{s:O,s:O,s:O,s:O}", "tier", json_object_get(doc, "tier"), "overrides",
                            json_object_get(quotas, "overrides"), "effective_at",
                            json_object_get(doc, "effective_at"), "expires_at",
                            json_object_get(doc, "expires_at"));
    assert_non_null(put);
    char *body = json_dumps(put, JSON_COMPACT);
    assert_non_null(body);
    assert_true(parse(body));
    assert_string_equal(t.tier, first.tier);
    assert_int_equal(t.n_overrides, first.n_overrides);
    assert_memory_equal(t.overrides, first.overrides, sizeof(t.overrides[0]) * t.n_overrides);
    assert_true(t.effective_at_us == first.effective_at_us);
    assert_true(t.expires_at_us == first.expires_at_us);
    free(body);
    json_decref(put);
    json_decref(doc);
    free(text);
}

static int teardown(void **state)
{
    (void)state;
    weir_json_release(&parser);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(seed_example),
        cmocka_unit_test(full_example),
        cmocka_unit_test(optional_members),
        cmocka_unit_test(malformed),
        cmocka_unit_test(unknown_and_repeated_members),
        cmocka_unit_test(tier),
        cmocka_unit_test(overrides_array),
        cmocka_unit_test(descriptor),
        cmocka_unit_test(requests_per_unit),
        cmocka_unit_test(unit_and_calendar),
        cmocka_unit_test(time_zone),
        cmocka_unit_test(algorithm),
        cmocka_unit_test(same_window_twice),
        cmocka_unit_test(times),
        cmocka_unit_test(rendering_reads_back),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}
