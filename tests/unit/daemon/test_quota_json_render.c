/*
 * test_quota_json_render.c - the quota admin API's JSON out
 * (daemon/quota/json_render.c): exact bytes of a tenant, a page of
 * tenants, a page of the audit log and a problem; keys holding quotes,
 * control bytes, NUL, unicode and bytes that are not UTF-8; stored audit
 * records that are not JSON; every output checked with jansson.
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

static weir_buf b;

static int setup(void **state)
{
    (void)state;
    weir_buf_init(&b, (size_t)1 << 22);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    weir_buf_free(&b);
    return 0;
}

/* The buffer holds exactly @want (and valid JSON); it is then cleared. */
static void expect(const char *want)
{
    assert_true(weir_buf_ok(&b));
    if (b.len != strlen(want) || memcmp(b.p, want, b.len) != 0)
        print_error("got  %.*s\nwant %s\n", (int)b.len, b.p, want);
    assert_int_equal(b.len, strlen(want));
    assert_memory_equal(b.p, want, b.len);
    weir_buf_clear(&b);
}

/* The buffer as a jansson document (NUL bytes allowed in strings). */
static json_t *load(void)
{
    assert_true(weir_buf_ok(&b));
    json_error_t je;
    json_t *doc = json_loadb(b.p, b.len, JSON_ALLOW_NUL, &je);
    if (!doc)
        print_error("%s at %d: %.*s\n", je.text, je.position, (int)b.len, b.p);
    assert_non_null(doc);
    weir_buf_clear(&b);
    return doc;
}

static quota_tenant *tenant(const char *key, size_t key_len)
{
    static quota_tenant t;
    memset(&t, 0, sizeof(t));
    memcpy(t.key, key, key_len);
    t.key_len = key_len;
    strcpy(t.tier, "enterprise");
    t.effective_at_us = INT64_C(1738368000000000);
    t.expires_at_us = QUOTA_TIME_NONE;
    t.created_at_us = INT64_C(1736937000000000);
    t.updated_at_us = INT64_C(1736937000250000);
    t.version = 3;
    return &t;
}

static void one_tenant(void **unused)
{
    (void)unused;
    quota_tenant *t = tenant("abc123", 6);
    t->n_overrides = 3;
    strcpy(t->overrides[0].descriptor, "endpoint:POST /api/v1/orders");
    t->overrides[0].requests_per_unit = 500;
    t->overrides[0].unit = WEIR_UNIT_MINUTE;
    strcpy(t->overrides[1].descriptor, "default");
    t->overrides[1].requests_per_unit = 1000000;
    t->overrides[1].calendar = WEIR_CALENDAR_MONTH;
    strcpy(t->overrides[1].time_zone, "America/New_York");
    strcpy(t->overrides[2].descriptor, "default");
    t->overrides[2].requests_per_unit = 4294967295u;
    t->overrides[2].unit = WEIR_UNIT_SECOND;
    t->overrides[2].algorithm = WEIR_ALGO_TOKEN_BUCKET;
    quota_json_render_tenant(&b, t, "{\"requests_per_unit\":5000,\"unit\":\"minute\"}");
    expect("{\"api_key\":\"abc123\",\"tier\":\"enterprise\",\"quotas\":{\"default\":"
           "{\"requests_per_unit\":5000,\"unit\":\"minute\"},\"overrides\":["
           "{\"descriptor\":\"endpoint:POST /api/v1/orders\",\"requests_per_unit\":500,"
           "\"unit\":\"minute\"},"
           "{\"descriptor\":\"default\",\"requests_per_unit\":1000000,\"calendar\":\"month\","
           "\"time_zone\":\"America/New_York\"},"
           "{\"descriptor\":\"default\",\"requests_per_unit\":4294967295,\"unit\":\"second\","
           "\"algorithm\":\"token_bucket\"}]},"
           "\"effective_at\":\"2025-02-01T00:00:00Z\",\"expires_at\":null,"
           "\"created_at\":\"2025-01-15T10:30:00Z\",\"updated_at\":\"2025-01-15T10:30:00.250000Z\","
           "\"version\":3}");
    /* a calendar in UTC (no zone), no default, no times */
    t = tenant("k", 1);
    t->n_overrides = 1;
    strcpy(t->overrides[0].descriptor, "default");
    t->overrides[0].calendar = WEIR_CALENDAR_DAY;
    t->overrides[0].algorithm = WEIR_ALGO_FIXED_WINDOW;
    t->effective_at_us = t->created_at_us = t->updated_at_us = QUOTA_TIME_NONE;
    t->version = 1;
    quota_json_render_tenant(&b, t, NULL);
    expect("{\"api_key\":\"k\",\"tier\":\"enterprise\",\"quotas\":{\"default\":null,"
           "\"overrides\":[{\"descriptor\":\"default\",\"requests_per_unit\":0,"
           "\"calendar\":\"day\",\"algorithm\":\"fixed_window\"}]},"
           "\"effective_at\":null,\"expires_at\":null,\"created_at\":null,\"updated_at\":null,"
           "\"version\":1}");
    quota_json_render_tenant(&b, t, "");
    assert_non_null(strstr(b.p, "\"default\":null"));
    weir_buf_clear(&b);
}

/* Keys with every kind of byte come out as JSON strings of those bytes
 * (a byte that is not UTF-8 as U+FFFD). */
static void keys_escaped(void **unused)
{
    (void)unused;
    static const struct {
        const char *key;
        size_t len;
        const char *json;  /* as written */
        const char *value; /* as jansson reads it back */
        size_t value_len;
    } cases[] = {
        {"a\"b\\c", 5, "\"a\\\"b\\\\c\"", "a\"b\\c", 5},
        {"t\tn\nr\r\x01\x1f", 8, "\"t\\tn\\nr\\r\\u0001\\u001f\"", "t\tn\nr\r\x01\x1f", 8},
        {"nul\0x", 5, "\"nul\\u0000x\"", "nul\0x", 5},
        {"caf\xc3\xa9 \xf0\x9f\x98\x80", 10, "\"caf\xc3\xa9 \xf0\x9f\x98\x80\"",
         "caf\xc3\xa9 \xf0\x9f\x98\x80", 10},
        {"bad\xff\xc3", 5, "\"bad\xef\xbf\xbd\xef\xbf\xbd\"", "bad\xef\xbf\xbd\xef\xbf\xbd", 9},
        {"</script>\x7f", 10, "\"</script>\x7f\"", "</script>\x7f", 10},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        quota_tenant *t = tenant(cases[i].key, cases[i].len);
        quota_json_render_tenant(&b, t, NULL);
        char want[64];
        snprintf(want, sizeof(want), "{\"api_key\":%s,", cases[i].json);
        assert_true(b.len > strlen(want));
        assert_memory_equal(b.p, want, strlen(want));
        json_t *doc = load();
        json_t *key = json_object_get(doc, "api_key");
        assert_int_equal(json_string_length(key), cases[i].value_len);
        assert_memory_equal(json_string_value(key), cases[i].value, cases[i].value_len);
        json_decref(doc);
    }
    /* every byte value, and a key past its cap is cut at the cap */
    quota_tenant *t = tenant("", 0);
    for (size_t i = 0; i < QUOTA_MAX_KEY_BYTES; i++)
        t->key[i] = (char)i;
    t->key_len = QUOTA_MAX_KEY_BYTES + 100;
    char *text = quota_json_tenant(t);
    assert_non_null(text);
    json_error_t je;
    json_t *doc = json_loads(text, JSON_ALLOW_NUL, &je);
    assert_non_null(doc);
    /* 128 ASCII bytes, then 128 U+FFFD of 3 bytes */
    assert_int_equal(json_string_length(json_object_get(doc, "api_key")), 128 + 128 * 3);
    json_decref(doc);
    free(text);
}

/* Descriptors and time zones at their caps, with bytes to escape, and
 * fields that lack their NUL (a record read back badly) stay JSON. */
static void fields_at_caps(void **unused)
{
    (void)unused;
    quota_tenant *t = tenant("k", 1);
    t->n_overrides = QUOTA_MAX_OVERRIDES + 5; /* read as the cap */
    for (size_t i = 0; i < QUOTA_MAX_OVERRIDES; i++) {
        quota_override *o = &t->overrides[i];
        memset(o->descriptor, 1, sizeof(o->descriptor)); /* no NUL */
        o->calendar = WEIR_CALENDAR_YEAR;
        memset(o->time_zone, '"', sizeof(o->time_zone));
        o->algorithm = (weir_algorithm)99;
    }
    memset(t->tier, '\\', sizeof(t->tier));
    char *text = quota_json_tenant(t);
    assert_non_null(text);
    json_error_t je;
    json_t *doc = json_loads(text, 0, &je);
    assert_non_null(doc);
    json_t *overrides = json_object_get(json_object_get(doc, "quotas"), "overrides");
    assert_int_equal(json_array_size(overrides), QUOTA_MAX_OVERRIDES);
    json_t *o = json_array_get(overrides, 63);
    assert_int_equal(json_string_length(json_object_get(o, "descriptor")),
                     QUOTA_MAX_DESCRIPTOR_BYTES + 1);
    assert_int_equal(json_string_length(json_object_get(o, "time_zone")), QUOTA_MAX_TZ_BYTES + 1);
    assert_null(json_object_get(o, "algorithm")); /* unknown: left out */
    assert_int_equal(json_string_length(json_object_get(doc, "tier")), QUOTA_MAX_TIER_BYTES + 1);
    json_decref(doc);
    free(text);
    /* an override without a window says so */
    t = tenant("k", 1);
    t->n_overrides = 1;
    strcpy(t->overrides[0].descriptor, "default");
    quota_json_render_tenant(&b, t, NULL);
    assert_non_null(strstr(b.p, "\"requests_per_unit\":0,\"unit\":null}"));
    weir_buf_clear(&b);
}

static void pages_of_tenants(void **unused)
{
    (void)unused;
    quota_json_render_list(&b, NULL, 0, NULL);
    expect("{\"quotas\":[],\"next\":null}");
    static quota_tenant ts[2];
    ts[0] = *tenant("a", 1);
    ts[1] = *tenant("b\"", 2);
    ts[1].version = 7;
    quota_json_render_list(&b, ts, 2, "YiI");
    json_t *doc = load();
    json_t *list = json_object_get(doc, "quotas");
    assert_int_equal(json_array_size(list), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(list, 1), "api_key")),
                        "b\"");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(list, 1), "version")), 7);
    assert_true(json_is_null(
        json_object_get(json_object_get(json_array_get(list, 0), "quotas"), "default")));
    assert_string_equal(json_string_value(json_object_get(doc, "next")), "YiI");
    json_decref(doc);
    /* a tenant of the list is what quota_json_tenant() writes */
    quota_json_render_list(&b, ts, 1, NULL);
    char *one = quota_json_tenant(&ts[0]);
    assert_non_null(one);
    char want[4096];
    snprintf(want, sizeof(want), "{\"quotas\":[%s],\"next\":null}", one);
    expect(want);
    free(one);
}

static void audit_page(void **unused)
{
    (void)unused;
    quota_audit a[3];
    memset(a, 0, sizeof(a));
    a[0].id = 9;
    a[0].at_us = INT64_C(1736937000000000);
    strcpy(a[0].actor, "ops-alice");
    a[0].action = QUOTA_ACTION_UPDATE;
    memcpy(a[0].key, "abc123", 6);
    a[0].key_len = 6;
    a[0].before = (char *)"{\"tier\":\"free\"}";
    a[0].after = (char *)" {\"tier\": \"pro\", \"n\": [1, 2.5e3, null]}\n";
    a[1].id = 8;
    a[1].at_us = 0;
    strcpy(a[1].actor, "a\"b");
    a[1].action = QUOTA_ACTION_CREATE;
    memcpy(a[1].key, "k\n", 2);
    a[1].key_len = 2;
    a[1].before = NULL;
    a[1].after = (char *)"{\"tier\":";
    a[2].id = 7;
    a[2].at_us = 1;
    a[2].action = QUOTA_ACTION_DELETE;
    a[2].before = (char *)"not json \"\xff\"";
    a[2].after = NULL;
    quota_json_render_audit(&b, a, 3, "7");
    expect(
        "{\"entries\":["
        "{\"id\":9,\"at\":\"2025-01-15T10:30:00Z\",\"actor\":\"ops-alice\",\"action\":\"update\","
        "\"api_key\":\"abc123\",\"before\":{\"tier\":\"free\"},"
        "\"after\": {\"tier\": \"pro\", \"n\": [1, 2.5e3, null]}\n},"
        "{\"id\":8,\"at\":\"1970-01-01T00:00:00Z\",\"actor\":\"a\\\"b\",\"action\":\"create\","
        "\"api_key\":\"k\\n\",\"before\":null,\"after\":\"{\\\"tier\\\":\"},"
        "{\"id\":7,\"at\":\"1970-01-01T00:00:00.000001Z\",\"actor\":\"\",\"action\":\"delete\","
        "\"api_key\":\"\",\"before\":\"not json \\\"\xef\xbf\xbd\\\"\",\"after\":null}],"
        "\"next\":\"7\"}");
    /* every kind of stored text keeps the page JSON */
    static const char *const stored[] = {
        "",      " ",          "{}",           "[]",   "null",     "1",
        "\"s\"", "{\"a\":1,}", "{\"a\":1} {}", "\xc3", "[[[[[[[[", "\"\\ud800\""};
    for (size_t i = 0; i < sizeof(stored) / sizeof(stored[0]); i++) {
        a[0].before = (char *)stored[i];
        quota_json_render_audit(&b, a, 1, NULL);
        json_t *doc = load();
        json_t *before =
            json_object_get(json_array_get(json_object_get(doc, "entries"), 0), "before");
        assert_non_null(before);
        json_decref(doc);
    }
    quota_json_render_audit(&b, NULL, 0, NULL);
    expect("{\"entries\":[],\"next\":null}");
}

static void problems(void **unused)
{
    (void)unused;
    quota_json_error e = {422, "overrides[2].unit",
                          "unit must be one of second, minute, hour, day, week, month, year"};
    quota_json_render_problem(&b, &e);
    expect("{\"type\":\"about:blank\",\"title\":\"Unprocessable Content\",\"status\":422,"
           "\"detail\":\"unit must be one of second, minute, hour, day, week, month, year\","
           "\"field\":\"overrides[2].unit\"}");
    quota_json_error m = {400, "", "malformed JSON at line 1, column 2: invalid token near 'x'"};
    quota_json_render_problem(&b, &m);
    expect("{\"type\":\"about:blank\",\"title\":\"Bad Request\",\"status\":400,"
           "\"detail\":\"malformed JSON at line 1, column 2: invalid token near 'x'\"}");
    quota_json_error q = {400, "a\"?", "unknown member 'a\"?'"};
    quota_json_render_problem(&b, &q);
    json_t *doc = load();
    assert_string_equal(json_string_value(json_object_get(doc, "field")), "a\"?");
    json_decref(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_tenant),     cmocka_unit_test(keys_escaped),
        cmocka_unit_test(fields_at_caps), cmocka_unit_test(pages_of_tenants),
        cmocka_unit_test(audit_page),     cmocka_unit_test(problems),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
