/*
 * test_api_decode.c - the API decoders: /v1/check, batch, proto3 JSON and
 * query strings decoded into weir_request, and every error they report
 * (message and HTTP status), caps, hits rules and NUL bytes included.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cmocka.h>

#include "api/api.h"

static const weir_api_limits caps = {64, 64, 8};
static const weir_api_limits small_caps = {2, 3, 2};

/* Asserts that n bytes at p are exactly the NUL-terminated want. */
static void assert_bytes(const char *p, size_t n, const char *want)
{
    size_t wn = strlen(want);
    if (n != wn || memcmp(p, want, n) != 0) {
        fprintf(stderr, "got  '%.*s' (%zu bytes)\nwant '%s' (%zu bytes)\n", (int)n, p, n, want, wn);
        fail();
    }
}

static void assert_entry(const weir_entry *e, const char *key, const char *value)
{
    assert_bytes(e->key, e->key_len, key);
    assert_bytes(e->value, e->value_len, value);
}

typedef bool (*decode_fn)(weir_api_decoder *, const char *, size_t, weir_api_error *);

/* Decodes @body with @fn and asserts the failure it reports. */
static void expect_error(weir_api_decoder *d, decode_fn fn, const char *body, int status,
                         const char *message)
{
    weir_api_error err = {0, ""};
    bool ok = fn(d, body, strlen(body), &err);
    if (ok || err.status != status || strcmp(err.message, message) != 0) {
        fprintf(stderr, "body %s\n got %d %d '%s'\nwant %d '%s'\n", body, ok, err.status,
                err.message, status, message);
        fail();
    }
    assert_int_equal(weir_api_count(d), 0);
    assert_null(weir_api_request(d, 0));
}

static const weir_request *decode_ok(weir_api_decoder *d, decode_fn fn, const char *body)
{
    weir_api_error err = {0, ""};
    if (!fn(d, body, strlen(body), &err)) {
        fprintf(stderr, "body %s\nfailed: %d %s\n", body, err.status, err.message);
        fail();
    }
    assert_true(weir_api_count(d) >= 1);
    return weir_api_request(d, 0);
}

static void check_round_trip(void **unused)
{
    (void)unused;
    weir_api_decoder *d = weir_api_decoder_new(&caps);
    assert_non_null(d);
    const char *body = "{\"domain\":\"api\",\"descriptors\":["
                       "{\"entries\":[{\"key\":\"user\",\"value\":\"alice\"},"
                       "{\"key\":\"path\",\"value\":\"/v1/x\"}],\"hits\":3,"
                       "\"limit\":{\"requests_per_unit\":10,\"unit\":\"SECOND\"}},"
                       "{\"entries\":[{\"key\":\"ip\",\"value\":\"10.0.0.1\"}]}],"
                       "\"hits\":2}";
    const weir_request *r = decode_ok(d, weir_api_decode_check, body);
    assert_int_equal(weir_api_count(d), 1);
    assert_null(weir_api_request(d, 1));
    assert_bytes(r->domain, r->domain_len, "api");
    assert_int_equal(r->hits, 2);
    assert_int_equal(r->n_descriptors, 2);
    const weir_descriptor *d0 = &r->descriptors[0], *d1 = &r->descriptors[1];
    assert_int_equal(d0->n_entries, 2);
    assert_entry(&d0->entries[0], "user", "alice");
    assert_entry(&d0->entries[1], "path", "/v1/x");
    assert_true(d0->has_hits);
    assert_int_equal(d0->hits, 3);
    assert_non_null(d0->limit);
    assert_int_equal(d0->limit->requests_per_unit, 10);
    assert_int_equal(d0->limit->unit, WEIR_UNIT_SECOND);
    assert_int_equal(d1->n_entries, 1);
    assert_entry(&d1->entries[0], "ip", "10.0.0.1");
    assert_false(d1->has_hits);
    assert_int_equal(d1->hits, 0);
    assert_null(d1->limit);
    weir_api_decoder_free(d);
}

static void check_defaults(void **unused)
{
    (void)unused;
    weir_api_decoder *d = weir_api_decoder_new(NULL);
    assert_non_null(d);
    const weir_request *r = decode_ok(d, weir_api_decode_check, "{}");
    assert_int_equal(r->domain_len, 0);
    assert_non_null(r->domain);
    assert_int_equal(r->n_descriptors, 0);
    assert_int_equal(r->hits, 0);
    r = decode_ok(d, weir_api_decode_check, "{\"domain\":null,\"descriptors\":null,\"hits\":null}");
    assert_int_equal(r->domain_len, 0);
    assert_int_equal(r->n_descriptors, 0);
    r = decode_ok(d, weir_api_decode_check,
                  " {\"domain\":\"\",\"descriptors\":[{\"entries\":[]}]}\n");
    assert_int_equal(r->n_descriptors, 1);
    assert_int_equal(r->descriptors[0].n_entries, 0);
    /* null hits and limit are absent */
    r = decode_ok(d, weir_api_decode_check,
                  "{\"descriptors\":[{\"entries\":null,\"hits\":null,\"limit\":null}]}");
    assert_false(r->descriptors[0].has_hits);
    assert_null(r->descriptors[0].limit);
    weir_api_decoder_free(d);
}

static void check_nul_bytes(void **unused)
{
    (void)unused;
    weir_api_decoder *d = weir_api_decoder_new(&caps);
    const char body[] = "{\"domain\":\"a\\u0000b\",\"descriptors\":[{\"entries\":"
                        "[{\"key\":\"k\\u0000\",\"value\":\"\\u0000\"}]}]}";
    const weir_request *r = decode_ok(d, weir_api_decode_check, body);
    assert_int_equal(r->domain_len, 3);
    assert_memory_equal(r->domain, "a\0b", 3);
    const weir_entry *e = &r->descriptors[0].entries[0];
    assert_int_equal(e->key_len, 2);
    assert_memory_equal(e->key, "k\0", 2);
    assert_int_equal(e->value_len, 1);
    assert_int_equal(e->value[0], '\0');
    /* a raw NUL byte in the body is malformed JSON, and the length counts */
    weir_api_error err;
    const char raw[] = "{\"domain\":\"a\0\"}";
    assert_false(weir_api_decode_check(d, raw, sizeof(raw) - 1, &err));
    assert_int_equal(err.status, 400);
    assert_true(strncmp(err.message, "malformed JSON at line 1, column ", 33) == 0);
    weir_api_decoder_free(d);
}

static void check_type_errors(void **unused)
{
    (void)unused;
    weir_api_decoder *d = weir_api_decoder_new(&caps);
    static const struct {
        const char *body, *message;
    } cases[] = {
        {"[]", "body must be an object"},
        {"{\"domain\":1}", "domain: must be a string"},
        {"{\"domain\":[\"x\"]}", "domain: must be a string"},
        {"{\"descriptors\":{}}", "descriptors: must be an array"},
        {"{\"descriptors\":[1]}", "descriptors[0]: must be an object"},
        {"{\"descriptors\":[{\"entries\":{}}]}", "descriptors[0].entries: must be an array"},
        {"{\"descriptors\":[{\"entries\":[{\"key\":\"a\",\"value\":\"b\"},{\"key\":\"a\","
         "\"value\":2}]}]}",
         "descriptors[0].entries[1].value: must be a string"},
        {"{\"descriptors\":[{\"entries\":[]},{\"entries\":[{\"key\":true,\"value\":\"b\"}]}]}",
         "descriptors[1].entries[0].key: must be a string"},
        {"{\"descriptors\":[{\"entries\":[\"a\"]}]}",
         "descriptors[0].entries[0]: must be an object"},
        {"{\"descriptors\":[{\"entries\":[{\"key\":\"a\"}]}]}",
         "descriptors[0].entries[0]: missing field 'value'"},
        {"{\"descriptors\":[{\"entries\":[{\"value\":\"a\"}]}]}",
         "descriptors[0].entries[0]: missing field 'key'"},
        {"{\"descriptors\":[{\"entries\":[{\"key\":\"a\",\"value\":\"b\",\"x\":1}]}]}",
         "descriptors[0].entries[0]: unknown field 'x'"},
        {"{\"domaine\":\"x\"}", "unknown field 'domaine'"},
        {"{\"domain\":\"x\",\"hits_addend\":1}", "unknown field 'hits_addend'"},
        {"{\"descriptors\":[{\"entries\":[],\"hitsAddend\":1}]}",
         "descriptors[0]: unknown field 'hitsAddend'"},
        {"{\"a\\u0001'\\u00e9\":1}", "unknown field 'a?\?\?\?'"},
        {"{\"0123456789012345678901234567890123456789\":1}",
         "unknown field '01234567890123456789012345678901...'"},
        {"{\"descriptors\":[{\"limit\":[]}]}", "descriptors[0].limit: must be an object"},
        {"{\"descriptors\":[{\"limit\":{\"requests_per_unit\":1,\"unit\":\"fortnight\"}}]}",
         "descriptors[0].limit.unit: unknown unit 'fortnight'"},
        {"{\"descriptors\":[{\"limit\":{\"requests_per_unit\":1,\"unit\":\"unknown\"}}]}",
         "descriptors[0].limit.unit: unknown unit 'unknown'"},
        {"{\"descriptors\":[{\"limit\":{\"requests_per_unit\":1,\"unit\":2}}]}",
         "descriptors[0].limit.unit: must be a string"},
        {"{\"descriptors\":[{\"limit\":{\"unit\":\"second\"}}]}",
         "descriptors[0].limit: missing field 'requests_per_unit'"},
        {"{\"descriptors\":[{\"limit\":{\"requests_per_unit\":1}}]}",
         "descriptors[0].limit: missing field 'unit'"},
        {"{\"descriptors\":[{\"limit\":{\"requestsPerUnit\":1,\"unit\":\"second\"}}]}",
         "descriptors[0].limit: unknown field 'requestsPerUnit'"},
        {"{\"descriptors\":[{\"limit\":{\"requests_per_unit\":4294967296,\"unit\":\"day\"}}]}",
         "descriptors[0].limit.requests_per_unit: must be an integer from 0 to 4294967295"},
        {"{\"descriptors\":[{\"limit\":{\"requests_per_unit\":\"5\",\"unit\":\"day\"}}]}",
         "descriptors[0].limit.requests_per_unit: must be an integer from 0 to 4294967295"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_error(d, weir_api_decode_check, cases[i].body, 400, cases[i].message);
    weir_api_decoder_free(d);
}

static void check_malformed(void **unused)
{
    (void)unused;
    weir_api_decoder *d = weir_api_decoder_new(&caps);
    expect_error(d, weir_api_decode_check, "{\"domain\":", 400,
                 "malformed JSON at line 1, column 10: unexpected token near end of file");
    expect_error(d, weir_api_decode_check, "{} x", 400,
                 "malformed JSON at line 1, column 4: end of file expected near 'x'");
    expect_error(d, weir_api_decode_check, "", 400,
                 "malformed JSON at line 1, column 0: '[' or '{' expected near end of file");
    expect_error(d, weir_api_decode_check, "{\n\"domain\": tru}", 400,
                 "malformed JSON at line 2, column 13: invalid token near 'tru'");
    expect_error(d, weir_api_decode_check, "\"x\"", 400,
                 "malformed JSON at line 1, column 3: '[' or '{' expected near '\"x\"'");
    /* NULL body with length 0 */
    weir_api_error err;
    assert_false(weir_api_decode_check(d, NULL, 0, &err));
    assert_int_equal(err.status, 400);
    weir_api_decoder_free(d);
}

/* RFC 8259 exactly: what a tokenizer lets through is refused, at the
 * line and column (characters) of the offending text. */
static void check_strict_json(void **unused)
{
    (void)unused;
    weir_api_decoder *d = weir_api_decoder_new(&caps);
    static const struct {
        const char *body, *message;
    } cases[] = {
        /* structure */
        {"{\"domain\" \"x\"}", "line 1, column 13: ':' expected near '\"x\"'"},
        {"{\"domain\"}", "line 1, column 10: ':' expected near '}'"},
        {"{\"domain\"::\"x\"}", "line 1, column 11: unexpected token near ':'"},
        {"{\"hits\":1 \"domain\":\"x\"}", "line 1, column 18: '}' expected near '\"domain\"'"},
        {"{\"hits\":1,}", "line 1, column 11: string or '}' expected near '}'"},
        {"{,}", "line 1, column 2: string or '}' expected near ','"},
        {"{1:2}", "line 1, column 4: string or '}' expected near '1:2'"},
        {"{\"descriptors\":[{} {}]}", "line 1, column 20: ']' expected near '{'"},
        {"{\"descriptors\":[{},]}", "line 1, column 20: unexpected token near ']'"},
        {"{\"descriptors\":[,{}]}", "line 1, column 17: unexpected token near ','"},
        {"{\"descriptors\":[{}}", "line 1, column 19: ']' expected near '}'"},
        {"{\"hits\":1]", "line 1, column 10: '}' expected near ']'"},
        {"{} {}", "line 1, column 4: end of file expected near '{'"},
        {"{}}", "line 1, column 3: end of file expected near '}'"},
        {"{", "line 1, column 1: string or '}' expected near end of file"},
        {"{\"domain\"", "line 1, column 9: ':' expected near end of file"},
        {"{\"domain\":\"a\"", "line 1, column 13: '}' expected near end of file"},
        {"{\"domain\":\"a\",", "line 1, column 14: string or '}' expected near end of file"},
        {"  \n ", "line 2, column 1: '[' or '{' expected near end of file"},
        {"true", "line 1, column 4: '[' or '{' expected near 'true'"},
        {"\xef\xbb\xbf{}", "line 1, column 2: '[' or '{' expected near '?\?\?{'"},
        /* numbers and literals */
        {"{\"hits\":01}", "line 1, column 10: invalid token near '01'"},
        {"{\"hits\":1.}", "line 1, column 10: invalid token near '1.'"},
        {"{\"hits\":.5}", "line 1, column 10: invalid token near '.5'"},
        {"{\"hits\":-}", "line 1, column 9: invalid token near '-'"},
        {"{\"hits\":+1}", "line 1, column 10: invalid token near '+1'"},
        {"{\"hits\":1e}", "line 1, column 10: invalid token near '1e'"},
        {"{\"hits\":1e+}", "line 1, column 11: invalid token near '1e+'"},
        {"{\"hits\":1.5e3.1}", "line 1, column 15: invalid token near '1.5e3.1'"},
        {"{\"hits\":0x10}", "line 1, column 12: invalid token near '0x10'"},
        {"{\"hits\":1:2}", "line 1, column 11: invalid token near '1:2'"},
        {"{\"hits\":True}", "line 1, column 12: invalid token near 'True'"},
        {"{\"hits\":nulll}", "line 1, column 13: invalid token near 'nulll'"},
        {"{\"hits\":NaN}", "line 1, column 11: invalid token near 'NaN'"},
        /* strings */
        {"{\"domain\":\"\\q\"}", "line 1, column 13: invalid escape near '\"\\q'"},
        {"{\"domain\":\"\\u12G4\"}", "line 1, column 17: invalid escape near '\"\\u12G4'"},
        {"{\"domain\":\"\\ud800\"}",
         "line 1, column 17: invalid Unicode '\\uD800' near '\"\\ud800'"},
        {"{\"domain\":\"\\udc00\\ud800\"}",
         "line 1, column 17: invalid Unicode '\\uDC00' near '\"\\udc00'"},
        {"{\"domain\":\"\\ud800\\u0041\"}",
         "line 1, column 17: invalid Unicode '\\uD800' near '\"\\ud800'"},
        {"{\"domain\":\"a\tb\"}", "line 1, column 12: control character 0x9 near '\"a'"},
        {"{\"domain\":\"a\nb\"}", "line 1, column 12: unexpected newline near '\"a'"},
        {"{\"domain\":\"\xc3\xa9\xff\"}",
         "line 1, column 13: invalid UTF-8 byte 0xff near '\"?\?\?'"},
        {"{\"domain\":\"\xed\xa0\x80\"}", "line 1, column 12: invalid UTF-8 byte 0xed near '\"?'"},
        {"{\"domain\":\"\xc0\xaf\"}", "line 1, column 12: invalid UTF-8 byte 0xc0 near '\"?'"},
        {"{\"domain\":\"\xf4\x90\x80\x80\"}",
         "line 1, column 12: invalid UTF-8 byte 0xf4 near '\"?'"},
        {"{\"domain\":\"abc", "line 1, column 14: premature end of input near '\"abc'"},
        {"{\"domain\":\"abc\\", "line 1, column 15: premature end of input near '\"abc\\'"},
        {"{\"x\xff\":1}", "line 1, column 4: invalid UTF-8 byte 0xff near '\"x?'"},
        /* columns count characters, lines start again after a newline */
        {"{\"domain\":\"\xc3\xa9\xc3\xa9\", x}",
         "line 1, column 17: string or '}' expected near 'x'"},
        {"{\n  \"domain\": \"a\",\n  \"hits\": 01\n}",
         "line 3, column 12: invalid token near '01'"},
        {"\n\n  {\"x\" : 1 , }", "line 3, column 14: string or '}' expected near '}'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char want[192];
        snprintf(want, sizeof(want), "malformed JSON at %s", cases[i].message);
        expect_error(d, weir_api_decode_check, cases[i].body, 400, want);
    }
    /* raw NUL bytes: after a value, inside a number, inside a string */
    static const struct {
        const char body[16];
        size_t len;
        const char *message;
    } nul[] = {
        {"{}\0", 3, "malformed JSON at line 1, column 3: end of file expected near '?'"},
        {"{\"hits\":1\0}", 11, "malformed JSON at line 1, column 10: invalid token near '1?'"},
        {"{\"a\0\":1}", 9, "malformed JSON at line 1, column 3: control character 0x0 near '\"a'"},
    };
    for (size_t i = 0; i < sizeof(nul) / sizeof(nul[0]); i++) {
        weir_api_error err;
        assert_false(weir_api_decode_check(d, nul[i].body, nul[i].len, &err));
        assert_int_equal(err.status, 400);
        assert_string_equal(err.message, nul[i].message);
    }
    /* nesting: 64 levels decode, 65 do not */
    char deep[256] = "{\"x\":";
    for (int i = 0; i < 62; i++)
        strcat(deep, "[");
    strcat(deep, "{}");
    for (int i = 0; i < 62; i++)
        strcat(deep, "]");
    strcat(deep, "}");
    expect_error(d, weir_api_decode_check, deep, 400, "unknown field 'x'");
    memmove(deep + 6, deep + 5, strlen(deep + 5) + 1);
    deep[5] = '[';
    expect_error(d, weir_api_decode_check, deep, 400,
                 "malformed JSON at line 1, column 69: nesting deeper than 64 levels near '{'");
    /* bodies that open more values than any valid one of their length
     * holds: the error is still where it is */
    static char big[4001];
    memset(big, '[', 4000);
    expect_error(d, weir_api_decode_check, big, 400,
                 "malformed JSON at line 1, column 65: nesting deeper than 64 levels near '['");
    for (size_t i = 0; i < 4000; i += 2)
        memcpy(big + i, i ? " 1" : "[1", 2);
    expect_error(d, weir_api_decode_check, big, 400,
                 "malformed JSON at line 1, column 4: ']' expected near '1'");
    weir_api_decoder_free(d);
}

/* Escapes are decoded (in keys too), UTF-8 passes through, and decoded
 * strings do not depend on the body, which the caller may reuse. */
static void check_strings(void **unused)
{
    (void)unused;
    weir_api_decoder *d = weir_api_decoder_new(&caps);
    char body[] =
        "{\"\\u0064omain\":\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u00e9\\u20AC\\ud83d\\ude00\","
        "\"descriptors\":[{\"entries\":[{\"key\":\"k\xc3\xa9\",\"value\":\"\\u0041\\u0000\"},"
        "{\"key\":\"\\\\\",\"value\":\"\xf0\x9f\x98\x80\"}]}]}";
    weir_api_error err;
    assert_true(weir_api_decode_check(d, body, strlen(body), &err));
    memset(body, 'x', sizeof(body)); /* the request no longer needs it */
    const weir_request *r = weir_api_request(d, 0);
    assert_int_equal(r->domain_len, 21);
    assert_memory_equal(r->domain, "a\"b\\c/d\b\f\n\r\t\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 21);
    const weir_entry *e = r->descriptors[0].entries;
    assert_bytes(e[0].key, e[0].key_len, "k\xc3\xa9");
    assert_int_equal(e[0].value_len, 2);
    assert_memory_equal(e[0].value, "A\0", 2);
    assert_entry(&e[1], "\\", "\xf0\x9f\x98\x80");
    weir_api_decoder_free(d);
}

/* Numbers of any size are JSON; their range is the field's business. */
static void check_big_numbers(void **unused)
{
    (void)unused;
    weir_api_decoder *d = weir_api_decoder_new(&caps);
    static const char *const bad[] = {
        "{\"hits\":123456789012345678901234567890}",
        "{\"hits\":-123456789012345678901234567890}",
        "{\"hits\":18446744073709551616}",
        "{\"hits\":1e400}",
        "{\"hits\":-1e400}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        expect_error(d, weir_api_decode_check, bad[i], 400,
                     "hits: must be an integer from 0 to 9007199254740992");
    const weir_request *r = decode_ok(d, weir_api_decode_check, "{\"hits\":1e-400}");
    assert_int_equal(r->hits, 0);
    r = decode_ok(d, weir_api_decode_check, "{\"hits\":90071992547409.92e2}");
    assert_int_equal(r->hits, 9007199254740992ull);
    /* proto3's uint64 as a JSON number, past int64 */
    r = decode_ok(d, weir_api_decode_envoy_json,
                  "{\"descriptors\":[{\"hitsAddend\":18446744073709551615}]}");
    assert_int_equal(r->descriptors[0].hits, UINT64_MAX);
    expect_error(d, weir_api_decode_envoy_json,
                 "{\"descriptors\":[{\"hitsAddend\":18446744073709551616}]}", 400,
                 "descriptors[0].hits_addend: must be an integer from 0 to 18446744073709551615");
    r = decode_ok(d, weir_api_decode_envoy_json, "{\"descriptors\":[{\"limit\":{\"unit\":-0}}]}");
    assert_int_equal(r->descriptors[0].limit->unit, WEIR_UNIT_NONE);
    static const struct {
        const char *unit, *message;
    } units[] = {
        {"9223372036854775807", "unknown unit '9223372036854775807'"},
        {"-9223372036854775808", "unknown unit '-9223372036854775808'"},
        {"9223372036854775808", "unknown unit '9223372036854775808'"},
        {"-99999999999999999999", "unknown unit '-99999999999999999999'"},
        {"1e0", "must be a string or an integer"},
    };
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        char body[128], want[128];
        snprintf(body, sizeof(body), "{\"descriptors\":[{\"limit\":{\"unit\":%s}}]}",
                 units[i].unit);
        snprintf(want, sizeof(want), "descriptors[0].limit.unit: %s", units[i].message);
        expect_error(d, weir_api_decode_envoy_json, body, 400, want);
    }
    weir_api_decoder_free(d);
}

/* A member given twice is refused, under one spelling or both (a
 * last-wins reading would let a proxy and weir disagree on a body). */
static void check_repeated_members(void **unused)
{
    (void)unused;
    weir_api_decoder *d = weir_api_decoder_new(&caps);
    expect_error(d, weir_api_decode_check,
                 "{\"domain\":\"a\",\"descriptors\":[{}],\"domain\":\"b\"}", 400,
                 "duplicate field 'domain'");
    expect_error(d, weir_api_decode_check, "{\"domain\":\"a\",\"domain\":null}", 400,
                 "duplicate field 'domain'");
    expect_error(d, weir_api_decode_check,
                 "{\"domain\":\"a\",\"descriptors\":[{\"entries\":[{\"key\":\"k\",\"value\":"
                 "\"1\",\"value\":\"2\"}]}]}",
                 400, "descriptors[0].entries[0]: duplicate field 'value'");
    expect_error(d, weir_api_decode_envoy_json, "{\"hitsAddend\":1,\"hitsAddend\":2}", 400,
                 "duplicate field 'hitsAddend'");
    expect_error(d, weir_api_decode_envoy_json,
                 "{\"hits_addend\":1,\"hitsAddend\":2,\"hits_addend\":3}", 400,
                 "duplicate field 'hitsAddend'");
    /* the same key in two objects is no repeat */
    const weir_request *r = decode_ok(
        d, weir_api_decode_check,
        "{\"domain\":\"a\",\"descriptors\":[{\"entries\":[{\"key\":\"x\",\"value\":\"1\"},"
        "{\"key\":\"y\",\"value\":\"2\"}]}]}");
    assert_int_equal(r->descriptors[0].n_entries, 2);
    assert_entry(&r->descriptors[0].entries[1], "y", "2");
    weir_api_decoder_free(d);
}

static void check_hits(void **unused)
{
    (void)unused;
    weir_api_decoder *d = weir_api_decoder_new(&caps);
    const weir_request *r = decode_ok(d, weir_api_decode_check, "{\"hits\":9007199254740992}");
    assert_int_equal(r->hits, 9007199254740992ull);
    r = decode_ok(d, weir_api_decode_check, "{\"hits\":0}");
    assert_int_equal(r->hits, 0);
    r = decode_ok(d, weir_api_decode_check, "{\"hits\":2.0}");
    assert_int_equal(r->hits, 2);
    r = decode_ok(d, weir_api_decode_check, "{\"hits\":1e3}");
    assert_int_equal(r->hits, 1000);
    r = decode_ok(d, weir_api_decode_check, "{\"hits\":-0}");
    assert_int_equal(r->hits, 0);
    r = decode_ok(d, weir_api_decode_check,
                  "{\"descriptors\":[{\"entries\":[],\"hits\":0},{\"entries\":[]},"
                  "{\"hits\":7}]}");
    assert_true(r->descriptors[0].has_hits);
    assert_int_equal(r->descriptors[0].hits, 0);
    assert_false(r->descriptors[1].has_hits);
    assert_true(r->descriptors[2].has_hits);
    assert_int_equal(r->descriptors[2].hits, 7);
    static const char *const bad[] = {
        "{\"hits\":-1}",    "{\"hits\":1.5}",   "{\"hits\":\"1\"}",
        "{\"hits\":true}",  "{\"hits\":[1]}",   "{\"hits\":9007199254740993}",
        "{\"hits\":1e300}", "{\"hits\":-1e-9}", "{\"hits\":9223372036854775807}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        expect_error(d, weir_api_decode_check, bad[i], 400,
                     "hits: must be an integer from 0 to 9007199254740992");
    expect_error(d, weir_api_decode_check, "{\"descriptors\":[{\"hits\":-3}]}", 400,
                 "descriptors[0].hits: must be an integer from 0 to 9007199254740992");
    weir_api_decoder_free(d);
}

static void check_units(void **unused)
{
    (void)unused;
    weir_api_decoder *d = weir_api_decoder_new(&caps);
    static const struct {
        const char *name;
        weir_rule_unit unit;
    } units[] = {
        {"second", WEIR_UNIT_SECOND}, {"MINUTE", WEIR_UNIT_MINUTE}, {"Hour", WEIR_UNIT_HOUR},
        {"dAy", WEIR_UNIT_DAY},       {"week", WEIR_UNIT_WEEK},     {"MONTH", WEIR_UNIT_MONTH},
        {"year", WEIR_UNIT_YEAR},
    };
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        char body[160];
        snprintf(body, sizeof(body),
                 "{\"descriptors\":[{\"limit\":{\"requests_per_unit\":0,\"unit\":\"%s\"}}]}",
                 units[i].name);
        const weir_request *r = decode_ok(d, weir_api_decode_check, body);
        assert_int_equal(r->descriptors[0].limit->unit, units[i].unit);
        assert_int_equal(r->descriptors[0].limit->requests_per_unit, 0);
    }
    weir_api_decoder_free(d);
}

static void check_caps(void **unused)
{
    (void)unused;
    weir_api_decoder *d = weir_api_decoder_new(&small_caps);
    expect_error(d, weir_api_decode_check,
                 "{\"descriptors\":[{\"entries\":[]},{\"entries\":[]},{\"entries\":[]}]}", 413,
                 "too many descriptors (3 > 2)");
    expect_error(d, weir_api_decode_check,
                 "{\"descriptors\":[{\"entries\":[{\"key\":\"a\",\"value\":\"b\"},"
                 "{\"key\":\"a\",\"value\":\"b\"},{\"key\":\"a\",\"value\":\"b\"},"
                 "{\"key\":\"a\",\"value\":\"b\"}]}]}",
                 413, "descriptors[0]: too many entries (4 > 3)");
    /* at the caps exactly */
    const weir_request *r =
        decode_ok(d, weir_api_decode_check,
                  "{\"descriptors\":[{\"entries\":[{\"key\":\"a\",\"value\":\"1\"},"
                  "{\"key\":\"b\",\"value\":\"2\"},{\"key\":\"c\",\"value\":\"3\"}]},"
                  "{\"entries\":[{\"key\":\"d\",\"value\":\"4\"}]}]}");
    assert_int_equal(r->n_descriptors, 2);
    assert_entry(&r->descriptors[0].entries[2], "c", "3");
    assert_entry(&r->descriptors[1].entries[0], "d", "4");
    expect_error(d, weir_api_decode_batch, "{\"requests\":[{},{},{}]}", 413,
                 "too many requests (3 > 2)");
    expect_error(d, weir_api_decode_batch, "{\"requests\":[{},{\"descriptors\":[{},{},{}]}]}", 413,
                 "requests[1]: too many descriptors (3 > 2)");
    expect_error(d, weir_api_decode_envoy_json, "{\"descriptors\":[{},{},{}]}", 413,
                 "too many descriptors (3 > 2)");
    /* a cap above the engine's is lowered to it */
    weir_api_limits big = {1000, 1000, 1};
    weir_api_decoder *d2 = weir_api_decoder_new(&big);
    char body[4096] = "{\"descriptors\":[";
    for (int i = 0; i < 65; i++)
        strcat(body, i ? ",{}" : "{}");
    strcat(body, "]}");
    expect_error(d2, weir_api_decode_check, body, 413, "too many descriptors (65 > 64)");
    weir_api_decoder_free(d2);
    weir_api_decoder_free(d);
}

static void envoy_names(void **unused)
{
    (void)unused;
    weir_api_decoder *d = weir_api_decoder_new(&caps);
    const char *snake = "{\"domain\":\"envoy\",\"descriptors\":[{\"entries\":[{\"key\":\"k\","
                        "\"value\":\"v\"}],\"limit\":{\"requests_per_unit\":5,\"unit\":"
                        "\"MINUTE\"},\"hits_addend\":0}],\"hits_addend\":4}";
    const char *camel = "{\"domain\":\"envoy\",\"descriptors\":[{\"entries\":[{\"key\":\"k\","
                        "\"value\":\"v\"}],\"limit\":{\"requestsPerUnit\":\"5\",\"unit\":2},"
                        "\"hitsAddend\":\"0\"}],\"hitsAddend\":\"4\"}";
    const char *bodies[] = {snake, camel};
    for (size_t i = 0; i < 2; i++) {
        const weir_request *r = decode_ok(d, weir_api_decode_envoy_json, bodies[i]);
        assert_bytes(r->domain, r->domain_len, "envoy");
        assert_int_equal(r->hits, 4);
        assert_int_equal(r->n_descriptors, 1);
        const weir_descriptor *desc = &r->descriptors[0];
        assert_int_equal(desc->n_entries, 1);
        assert_entry(&desc->entries[0], "k", "v");
        assert_true(desc->has_hits);
        assert_int_equal(desc->hits, 0);
        assert_int_equal(desc->limit->requests_per_unit, 5);
        assert_int_equal(desc->limit->unit, WEIR_UNIT_MINUTE);
    }
    /* defaults: missing key/value are empty, missing hitsAddend and limit absent */
    const weir_request *r = decode_ok(d, weir_api_decode_envoy_json,
                                      "{\"descriptors\":[{\"entries\":[{}]},{\"limit\":{}}]}");
    assert_int_equal(r->domain_len, 0);
    assert_int_equal(r->hits, 0);
    assert_entry(&r->descriptors[0].entries[0], "", "");
    assert_false(r->descriptors[0].has_hits);
    assert_null(r->descriptors[0].limit);
    assert_int_equal(r->descriptors[1].limit->requests_per_unit, 0);
    assert_int_equal(r->descriptors[1].limit->unit, WEIR_UNIT_NONE);
    /* null is absent, also for the UInt64Value wrapper */
    r = decode_ok(d, weir_api_decode_envoy_json,
                  "{\"domain\":null,\"descriptors\":[{\"hitsAddend\":null,\"limit\":null,"
                  "\"entries\":[{\"key\":null,\"value\":\"x\"}]}],\"hitsAddend\":null}");
    assert_false(r->descriptors[0].has_hits);
    assert_null(r->descriptors[0].limit);
    assert_entry(&r->descriptors[0].entries[0], "", "x");
    /* the full uint64 range for the descriptor's hits, uint32 for the request's */
    r = decode_ok(d, weir_api_decode_envoy_json,
                  "{\"descriptors\":[{\"hitsAddend\":\"18446744073709551615\"},"
                  "{\"hits_addend\":9223372036854775807}],\"hitsAddend\":4294967295}");
    assert_int_equal(r->descriptors[0].hits, UINT64_MAX);
    assert_int_equal(r->descriptors[1].hits, INT64_MAX);
    assert_int_equal(r->hits, UINT32_MAX);
    /* enum numbers 0..6 and names in any case; UNKNOWN reaches the engine as NONE */
    static const struct {
        const char *unit;
        weir_rule_unit want;
    } units[] = {
        {"0", WEIR_UNIT_NONE},           {"1", WEIR_UNIT_SECOND},      {"6", WEIR_UNIT_YEAR},
        {"\"UNKNOWN\"", WEIR_UNIT_NONE}, {"\"hour\"", WEIR_UNIT_HOUR}, {"\"WEEK\"", WEIR_UNIT_WEEK},
        {"\"Month\"", WEIR_UNIT_MONTH},
    };
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        char body[128];
        snprintf(body, sizeof(body), "{\"descriptors\":[{\"limit\":{\"unit\":%s}}]}",
                 units[i].unit);
        r = decode_ok(d, weir_api_decode_envoy_json, body);
        assert_int_equal(r->descriptors[0].limit->unit, units[i].want);
    }
    weir_api_decoder_free(d);
}

static void envoy_errors(void **unused)
{
    (void)unused;
    weir_api_decoder *d = weir_api_decoder_new(&caps);
    static const struct {
        const char *body, *message;
    } cases[] = {
        {"{\"hits_addend\":1,\"hitsAddend\":1}", "duplicate field 'hitsAddend'"},
        {"{\"descriptors\":[{\"limit\":{\"requestsPerUnit\":1,\"requests_per_unit\":1}}]}",
         "descriptors[0].limit: duplicate field 'requests_per_unit'"},
        {"{\"domain\":\"x\",\"hits\":1}", "unknown field 'hits'"},
        {"{\"descriptors\":[{\"hits\":1}]}", "descriptors[0]: unknown field 'hits'"},
        {"{\"Domain\":\"x\"}", "unknown field 'Domain'"},
        {"{\"hitsAddend\":4294967296}", "hits_addend: must be an integer from 0 to 4294967295"},
        {"{\"hitsAddend\":\"-1\"}", "hits_addend: must be an integer from 0 to 4294967295"},
        {"{\"hitsAddend\":\"\"}", "hits_addend: must be an integer from 0 to 4294967295"},
        {"{\"hitsAddend\":\" 1\"}", "hits_addend: must be an integer from 0 to 4294967295"},
        {"{\"hitsAddend\":0.5}", "hits_addend: must be an integer from 0 to 4294967295"},
        {"{\"descriptors\":[{\"hitsAddend\":\"18446744073709551616\"}]}",
         "descriptors[0].hits_addend: must be an integer from 0 to 18446744073709551615"},
        {"{\"descriptors\":[{\"hitsAddend\":{}}]}",
         "descriptors[0].hits_addend: must be an integer from 0 to 18446744073709551615"},
        {"{\"descriptors\":[{\"limit\":{\"unit\":7}}]}",
         "descriptors[0].limit.unit: unknown unit '7'"},
        {"{\"descriptors\":[{\"limit\":{\"unit\":-1}}]}",
         "descriptors[0].limit.unit: unknown unit '-1'"},
        {"{\"descriptors\":[{\"limit\":{\"unit\":\"x\"}}]}",
         "descriptors[0].limit.unit: unknown unit 'x'"},
        {"{\"descriptors\":[{\"limit\":{\"unit\":1.5}}]}",
         "descriptors[0].limit.unit: must be a string or an integer"},
        {"{\"descriptors\":[{\"limit\":{\"requestsPerUnit\":\"4294967296\"}}]}",
         "descriptors[0].limit.requests_per_unit: must be an integer from 0 to 4294967295"},
        {"{\"descriptors\":[{\"entries\":[{\"key\":1}]}]}",
         "descriptors[0].entries[0].key: must be a string"},
        {"{\"descriptors\":\"x\"}", "descriptors: must be an array"},
        {"[1]", "body must be an object"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_error(d, weir_api_decode_envoy_json, cases[i].body, 400, cases[i].message);
    weir_api_decoder_free(d);
}

static void batch(void **unused)
{
    (void)unused;
    weir_api_decoder *d = weir_api_decoder_new(&caps);
    const char *body = "{\"requests\":[{\"domain\":\"a\",\"descriptors\":[{\"entries\":"
                       "[{\"key\":\"k\",\"value\":\"1\"}]}]},{\"domain\":\"b\",\"descriptors\":"
                       "[{\"entries\":[{\"key\":\"x\",\"value\":\"2\"},{\"key\":\"y\",\"value\":"
                       "\"3\"}],\"hits\":0},{\"entries\":[]}],\"hits\":5}]}";
    weir_api_error err;
    assert_true(weir_api_decode_batch(d, body, strlen(body), &err));
    assert_int_equal(weir_api_count(d), 2);
    const weir_request *a = weir_api_request(d, 0), *b = weir_api_request(d, 1);
    assert_null(weir_api_request(d, 2));
    assert_bytes(a->domain, a->domain_len, "a");
    assert_int_equal(a->n_descriptors, 1);
    assert_entry(&a->descriptors[0].entries[0], "k", "1");
    assert_bytes(b->domain, b->domain_len, "b");
    assert_int_equal(b->hits, 5);
    assert_int_equal(b->n_descriptors, 2);
    assert_entry(&b->descriptors[0].entries[0], "x", "2");
    assert_entry(&b->descriptors[0].entries[1], "y", "3");
    assert_true(b->descriptors[0].has_hits);
    assert_int_equal(b->descriptors[1].n_entries, 0);
    /* an empty batch, and one without requests, decode to nothing */
    assert_true(weir_api_decode_batch(d, "{\"requests\":[]}", 15, &err));
    assert_int_equal(weir_api_count(d), 0);
    assert_true(weir_api_decode_batch(d, "{}", 2, &err));
    assert_int_equal(weir_api_count(d), 0);
    static const struct {
        const char *body, *message;
    } cases[] = {
        {"{\"requests\":[{},{},{},{\"domain\":1}]}", "requests[3].domain: must be a string"},
        {"{\"requests\":[1]}", "requests[0]: must be an object"},
        {"{\"requests\":{}}", "requests: must be an array"},
        {"{\"request\":[]}", "unknown field 'request'"},
        {"{\"requests\":[{\"domainx\":1}]}", "requests[0]: unknown field 'domainx'"},
        {"{\"requests\":[{\"descriptors\":[{\"entries\":[{\"key\":\"a\",\"value\":[]}]}]}]}",
         "requests[0].descriptors[0].entries[0].value: must be a string"},
        {"{\"requests\":[{\"hits\":-1}]}",
         "requests[0].hits: must be an integer from 0 to 9007199254740992"},
        {"[]", "body must be an object"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_error(d, weir_api_decode_batch, cases[i].body, 400, cases[i].message);
    expect_error(d, weir_api_decode_batch, "{\"requests\":[}", 400,
                 "malformed JSON at line 1, column 14: unexpected token near '}'");
    weir_api_decoder_free(d);
}

/* ------------------------------------------------------------ query */

typedef struct fake_headers {
    const char *names[4];
    const char *values[4];
    size_t lens[4];
} fake_headers;

static const char *get_header(void *arg, const char *name, size_t *len)
{
    fake_headers *h = arg;
    for (size_t i = 0; i < 4 && h->names[i]; i++) {
        if (strcasecmp(h->names[i], name) == 0) {
            *len = h->lens[i];
            return h->values[i];
        }
    }
    return NULL;
}

static bool query(weir_api_decoder *d, const char *q, weir_api_error *err)
{
    return weir_api_decode_query(d, q, strlen(q), NULL, 0, NULL, NULL, err);
}

static void expect_query_error(weir_api_decoder *d, const char *q, int status, const char *message)
{
    weir_api_error err = {0, ""};
    bool ok = query(d, q, &err);
    if (ok || err.status != status || strcmp(err.message, message) != 0) {
        fprintf(stderr, "query %s\n got %d %d '%s'\nwant %d '%s'\n", q, ok, err.status, err.message,
                status, message);
        fail();
    }
    assert_int_equal(weir_api_count(d), 0);
}

static void query_basic(void **unused)
{
    (void)unused;
    weir_api_decoder *d = weir_api_decoder_new(&caps);
    weir_api_error err;
    assert_true(query(d, "user=alice&domain=api&path=%2Fv1%2fx&q=a+b%2B&hits=5", &err));
    assert_int_equal(weir_api_count(d), 1);
    const weir_request *r = weir_api_request(d, 0);
    assert_bytes(r->domain, r->domain_len, "api");
    assert_int_equal(r->hits, 5);
    assert_int_equal(r->n_descriptors, 1);
    const weir_descriptor *desc = &r->descriptors[0];
    assert_false(desc->has_hits);
    assert_null(desc->limit);
    assert_int_equal(desc->n_entries, 3);
    assert_entry(&desc->entries[0], "user", "alice");
    assert_entry(&desc->entries[1], "path", "/v1/x");
    assert_entry(&desc->entries[2], "q", "a b+");
    /* empty pairs are skipped; empty values and encoded names are fine */
    assert_true(query(d, "&&domain=d&&k=&%6B2=v%3D1&", &err));
    r = weir_api_request(d, 0);
    assert_bytes(r->domain, r->domain_len, "d");
    assert_int_equal(r->hits, 0);
    assert_int_equal(r->descriptors[0].n_entries, 2);
    assert_entry(&r->descriptors[0].entries[0], "k", "");
    assert_entry(&r->descriptors[0].entries[1], "k2", "v=1");
    /* an empty domain: one descriptor without entries (the engine refuses
     * the domain first) */
    assert_true(query(d, "domain=", &err));
    r = weir_api_request(d, 0);
    assert_int_equal(r->domain_len, 0);
    assert_int_equal(r->n_descriptors, 1);
    assert_int_equal(r->descriptors[0].n_entries, 0);
    /* a parameter spelled with escapes is still the domain */
    assert_true(query(d, "%64omain=x%00y&k=v", &err));
    r = weir_api_request(d, 0);
    assert_int_equal(r->domain_len, 3);
    assert_memory_equal(r->domain, "x\0y", 3);
    /* a NULL query is an empty one */
    assert_false(weir_api_decode_query(d, NULL, 0, NULL, 0, NULL, NULL, &err));
    assert_string_equal(err.message, "missing query parameter 'domain'");
    weir_api_decoder_free(d);
}

static void query_errors(void **unused)
{
    (void)unused;
    weir_api_decoder *d = weir_api_decoder_new(&caps);
    expect_query_error(d, "", 400, "missing query parameter 'domain'");
    expect_query_error(d, "user=a&&", 400, "missing query parameter 'domain'");
    expect_query_error(d, "domain=a&k=%4", 400, "bad percent-escape in query");
    expect_query_error(d, "domain=a&k=%", 400, "bad percent-escape in query");
    expect_query_error(d, "domain=a&k=%zz", 400, "bad percent-escape in query");
    expect_query_error(d, "domain=a&%g1=v", 400, "bad percent-escape in query");
    expect_query_error(d, "domain=a&user", 400, "query parameter 'user' has no value");
    expect_query_error(d, "domain&x=1", 400, "query parameter 'domain' has no value");
    expect_query_error(d, "domain=a&us%01er", 400, "query parameter 'us?er' has no value");
    expect_query_error(d, "domain=a&domain=b", 400, "duplicate query parameter 'domain'");
    expect_query_error(d, "domain=a&hits=1&hits=2", 400, "duplicate query parameter 'hits'");
    expect_query_error(d, "domain=a&hits=1", 400,
                       "no descriptor entries: add them as query parameters "
                       "(/v1/check?domain=a&remote_address=192.0.2.1), or start weir serve with "
                       "--check-header HEADER=KEY");
    static const char *const bad_hits[] = {
        "domain=a&k=v&hits=", "domain=a&k=v&hits=-1", "domain=a&k=v&hits=1.0",
        "domain=a&k=v&hits=9007199254740993", "domain=a&k=v&hits=+1"};
    for (size_t i = 0; i < sizeof(bad_hits) / sizeof(bad_hits[0]); i++)
        expect_query_error(d, bad_hits[i], 400,
                           "query parameter 'hits': must be an integer from 0 to "
                           "9007199254740992");
    weir_api_error err;
    assert_true(query(d, "domain=a&k=v&hits=9007199254740992", &err));
    assert_int_equal(weir_api_request(d, 0)->hits, 9007199254740992ull);
    weir_api_decoder_free(d);
}

static void query_headers(void **unused)
{
    (void)unused;
    weir_api_decoder *d = weir_api_decoder_new(&small_caps);
    static const weir_api_header_entry headers[] = {
        {"X-Real-IP", "remote_address"},
        {"X-Missing", "missing"},
        {"X-Tenant", "tenant"},
    };
    fake_headers h = {
        .names = {"x-real-ip", "X-TENANT"},
        .values = {"10.0.0.1", "t\0x"},
        .lens = {8, 3},
    };
    weir_api_error err;
    const char *q = "domain=api&path=/x";
    assert_true(weir_api_decode_query(d, q, strlen(q), headers, 3, get_header, &h, &err));
    const weir_request *r = weir_api_request(d, 0);
    const weir_descriptor *desc = &r->descriptors[0];
    assert_int_equal(desc->n_entries, 3);
    assert_entry(&desc->entries[0], "path", "/x");
    assert_entry(&desc->entries[1], "remote_address", "10.0.0.1");
    assert_int_equal(desc->entries[2].value_len, 3);
    assert_memory_equal(desc->entries[2].value, "t\0x", 3);
    assert_bytes(desc->entries[2].key, desc->entries[2].key_len, "tenant");
    /* only headers */
    assert_true(weir_api_decode_query(d, "domain=api", 10, headers, 3, get_header, &h, &err));
    assert_int_equal(weir_api_request(d, 0)->descriptors[0].n_entries, 2);
    /* entries and headers together over the cap (3) */
    q = "domain=api&a=1&b=2";
    assert_false(weir_api_decode_query(d, q, strlen(q), headers, 3, get_header, &h, &err));
    assert_int_equal(err.status, 413);
    assert_string_equal(err.message, "too many entries (4 > 3)");
    assert_int_equal(weir_api_count(d), 0);
    q = "domain=api&a=1&b=2&c=3&d=4&e=5";
    assert_false(weir_api_decode_query(d, q, strlen(q), NULL, 0, NULL, NULL, &err));
    assert_int_equal(err.status, 413);
    assert_string_equal(err.message, "too many entries (5 > 3)");
    /* headers configured but no lookup: left out */
    q = "domain=api&a=1";
    assert_true(weir_api_decode_query(d, q, strlen(q), headers, 3, NULL, NULL, &err));
    assert_int_equal(weir_api_request(d, 0)->descriptors[0].n_entries, 1);
    weir_api_decoder_free(d);
}

/* The decoder's memory is reused across decodes of every kind, failures
 * forget what was decoded, and nothing leaks (ASan checks). */
static void reuse(void **unused)
{
    (void)unused;
    weir_api_decoder *d = weir_api_decoder_new(&caps);
    weir_api_error err;
    char body[8192];
    size_t n = (size_t)snprintf(body, sizeof(body), "{\"domain\":\"big\",\"descriptors\":[");
    for (int i = 0; i < 40; i++)
        n += (size_t)snprintf(body + n, sizeof(body) - n,
                              "%s{\"entries\":[{\"key\":\"k%d\",\"value\":\"v\"},"
                              "{\"key\":\"x\",\"value\":\"y\"}]}",
                              i ? "," : "", i);
    snprintf(body + n, sizeof(body) - n, "]}");
    for (int round = 0; round < 3; round++) {
        const weir_request *r = decode_ok(d, weir_api_decode_check, body);
        assert_int_equal(r->n_descriptors, 40);
        assert_entry(&r->descriptors[39].entries[0], "k39", "v");
        assert_entry(&r->descriptors[39].entries[1], "x", "y");
        assert_true(query(d, "domain=q&a=b", &err));
        assert_entry(&weir_api_request(d, 0)->descriptors[0].entries[0], "a", "b");
        expect_error(d, weir_api_decode_envoy_json, "{\"x\":1}", 400, "unknown field 'x'");
        r = decode_ok(d, weir_api_decode_envoy_json, "{\"domain\":\"e\"}");
        assert_bytes(r->domain, r->domain_len, "e");
    }
    weir_api_decoder_free(d);
    weir_api_decoder_free(NULL);
    assert_int_equal(weir_api_count(NULL), 0);
    assert_null(weir_api_request(NULL, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(check_round_trip),
        cmocka_unit_test(check_defaults),
        cmocka_unit_test(check_nul_bytes),
        cmocka_unit_test(check_type_errors),
        cmocka_unit_test(check_malformed),
        cmocka_unit_test(check_strict_json),
        cmocka_unit_test(check_strings),
        cmocka_unit_test(check_big_numbers),
        cmocka_unit_test(check_repeated_members),
        cmocka_unit_test(check_hits),
        cmocka_unit_test(check_units),
        cmocka_unit_test(check_caps),
        cmocka_unit_test(envoy_names),
        cmocka_unit_test(envoy_errors),
        cmocka_unit_test(batch),
        cmocka_unit_test(query_basic),
        cmocka_unit_test(query_errors),
        cmocka_unit_test(query_headers),
        cmocka_unit_test(reuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
