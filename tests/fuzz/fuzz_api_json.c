/*
 * fuzz_api_json.c - fuzzes the API's decoders (/v1/check, batch, proto3
 * JSON, query strings) and, for what decodes, every renderer: any bytes
 * must decode or fail cleanly, never crash, leak or hang.
 *
 * The first byte picks the decoder (or all of them); the rest is the
 * body. A decoded request must keep within the caps; a failure must carry
 * a status and a message. Each decoded request then gets a synthetic
 * decision (codes, counters and limit names derived from its bytes) that
 * is rendered by every renderer: JSON output must parse back, header
 * output must be well-formed lines. A broken invariant aborts.
 *
 * jansson is the oracle for the decoders' own JSON parser (api/json.c, a
 * one-pass strict parser): the body must parse with json.c exactly when
 * json_loadb(JSON_ALLOW_NUL | JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL)
 * accepts it (NUL bytes in strings allowed, any top-level value, numbers
 * of any size), and then to the same values: the same strings byte for
 * byte, numbers equal as doubles, arrays item for item, objects member
 * for member (jansson keeps the last of a repeated key, so only a key's
 * last occurrence is compared). Without JSON_DECODE_ANY's counterpart the
 * body must parse exactly when it does with it and its first byte past
 * whitespace is '[' or '{', and the decoders report "malformed JSON"
 * exactly then. Differences kept on principle, and so not compared:
 *   - nesting: json.c refuses more than WEIR_JSON_MAX_DEPTH (64) levels,
 *     jansson 2048;
 *   - numbers past a double's range (1e400): jansson refuses them
 *     ("real number overflow"), json.c follows RFC 8259's grammar and
 *     leaves the range to the decoder ("must be an integer from ...");
 *   - "\u0000" in an object key: jansson refuses it ("NUL byte in object
 *     key not supported"), RFC 8259 allows it (the decoder then reports an
 *     unknown field);
 *   - a raw NUL byte right after a number, true, false or null ([1<NUL>]):
 *     jansson 2.14 loses it (it pushes back the byte that ended the token,
 *     and a pushed-back NUL reads as nothing) and accepts the document;
 *     RFC 8259 and json.c refuse it ("invalid token").
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const weir_api_limits caps = {16, 16, 8};

static void check(int ok)
{
    if (!ok)
        abort();
}

static weir_api_decoder *decoder;
static weir_buf out;
static weir_json parser;

static void cleanup(void)
{
    weir_api_decoder_free(decoder);
    weir_buf_free(&out);
    weir_json_release(&parser);
}

/* ------------------------------------------------------------ JSON oracle */

/* json.c's value @v is jansson's @o. */
static void same_value(const weir_json_node *v, json_t *o)
{
    switch (v->type) {
    case WEIR_JSON_NULL:
        check(json_is_null(o));
        return;
    case WEIR_JSON_FALSE:
        check(json_is_false(o));
        return;
    case WEIR_JSON_TRUE:
        check(json_is_true(o));
        return;
    case WEIR_JSON_NUMBER:
        check(json_is_real(o) && weir_json_double(v) == json_real_value(o));
        return;
    case WEIR_JSON_STRING:
        check(json_is_string(o) && json_string_length(o) == v->n &&
              memcmp(json_string_value(o), v->s, v->n) == 0);
        return;
    case WEIR_JSON_ARRAY: {
        check(json_is_array(o) && json_array_size(o) == v->n);
        const weir_json_node *item = v + 1;
        for (uint32_t i = 0; i < v->n; i++, item = weir_json_next(item))
            same_value(item, json_array_get(o, i));
        check(item == v + v->span);
        return;
    }
    case WEIR_JSON_OBJECT: {
        check(json_is_object(o));
        size_t distinct = 0;
        const weir_json_node *key = v + 1;
        for (uint32_t i = 0; i < v->n; i++) {
            check(key->type == WEIR_JSON_STRING);
            const weir_json_node *later = weir_json_next(key + 1);
            bool last = true;
            for (uint32_t k = i + 1; k < v->n && last; k++) {
                last = !(later->n == key->n && memcmp(later->s, key->s, key->n) == 0);
                later = weir_json_next(later + 1);
            }
            if (last) {
                distinct++;
                json_t *m = json_object_getn(o, key->s, key->n);
                check(m != NULL);
                same_value(key + 1, m);
            }
            key = weir_json_next(key + 1);
        }
        check(key == v + v->span);
        check(json_object_size(o) == distinct);
        return;
    }
    default:
        check(0);
    }
}

/* json.c against jansson on @p; returns whether the decoders must take
 * @p as JSON (parsed, and an array or object), -1 when not compared. */
static int oracle(const char *p, size_t n)
{
    weir_json_error je;
    weir_json_result r = weir_json_parse(&parser, p, n, WEIR_JSON_ANY_TOP, &je);
    check(r != WEIR_JSON_NOMEM);
    if (r != WEIR_JSON_OK) {
        check(je.end <= n && je.near_len <= n && je.reason[0] != '\0');
        if (strncmp(je.reason, "nesting deeper", 14) == 0)
            return -1;
    }
    json_error_t e;
    json_t *o = json_loadb(p, n, JSON_ALLOW_NUL | JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL, &e);
    if (!o) {
        enum json_error_code code = json_error_code(&e);
        check(code != json_error_out_of_memory);
        if (code == json_error_numeric_overflow || code == json_error_null_byte_in_key)
            return -1;
        check(r != WEIR_JSON_OK);
    } else if (r != WEIR_JSON_OK) {
        /* only jansson's lost NUL after a primitive */
        check(strcmp(je.reason, "invalid token") == 0 && je.near_len > 1 &&
              memchr(je.near + 1, '\0', je.near_len - 1) != NULL);
        json_decref(o);
        return -1;
    } else {
        check(parser.n_nodes == parser.nodes[0].span && parser.n_nodes <= (n + 1) / 2);
        same_value(&parser.nodes[0], o);
        json_decref(o);
    }
    size_t at = 0;
    while (at < n && (p[at] == ' ' || p[at] == '\t' || p[at] == '\n' || p[at] == '\r'))
        at++;
    bool container = r == WEIR_JSON_OK && at < n && (p[at] == '[' || p[at] == '{');
    weir_json_result top = weir_json_parse(&parser, p, n, 0, &je);
    check(top == (container ? WEIR_JSON_OK : WEIR_JSON_MALFORMED));
    return container;
}

/* A JSON decoder said "malformed JSON" exactly when it had to. */
static void check_malformed(int valid, bool ok, const weir_api_error *err)
{
    if (valid < 0)
        return;
    bool malformed = !ok && strncmp(err->message, "malformed JSON at line ", 23) == 0;
    check(malformed == !valid);
}

/* A request header lookup over the fuzz input: X-Real-IP is its first
 * bytes, X-Absent is never there. */
typedef struct headers {
    const char *p;
    size_t n;
} headers;

static const char *get_header(void *arg, const char *name, size_t *len)
{
    const headers *h = arg;
    if (strcmp(name, "X-Real-IP") != 0)
        return NULL;
    *len = h->n < 8 ? h->n : 8;
    return h->p;
}

/* Valid JSON (integers past int64 included, hence as reals). */
static void check_json(const weir_buf *b)
{
    check(weir_buf_ok(b));
    json_error_t je;
    json_t *v = json_loadb(b->p, b->len, JSON_DECODE_INT_AS_REAL, &je);
    check(v != NULL && json_is_object(v));
    json_decref(v);
}

/* Every line "Name: value\r\n", printable ASCII only. */
static void check_headers(const weir_buf *b)
{
    check(weir_buf_ok(b));
    size_t i = 0;
    while (i < b->len) {
        size_t start = i;
        while (i < b->len && b->p[i] != '\r') {
            unsigned char c = (unsigned char)b->p[i];
            check(c >= 0x20 && c < 0x7f);
            i++;
        }
        check(i + 1 < b->len && b->p[i + 1] == '\n' && i > start);
        check(memchr(b->p + start, ':', i - start) != NULL);
        i += 2;
    }
}

static uint64_t mix(uint64_t h, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211u;
    return h;
}

/* Renders a decision shaped like @r through every renderer. */
static void render(const weir_request *r)
{
    static weir_descriptor_status st[WEIR_ENGINE_MAX_DESCRIPTORS];
    static weir_rule_limit limits[3];
    static char name[40];
    size_t nn = r->domain_len < sizeof(name) - 1 ? r->domain_len : sizeof(name) - 1;
    memcpy(name, r->domain, nn);
    name[nn] = '\0';
    limits[0] = (weir_rule_limit){.name = name,
                                  .requests_per_unit = 10,
                                  .unit = WEIR_UNIT_MINUTE,
                                  .window_us = 60000000,
                                  .algorithm = WEIR_ALGO_TOKEN_BUCKET,
                                  .domain = name,
                                  .path = "k"};
    limits[1] = (weir_rule_limit){
        .window_us = 1, .algorithm = (weir_algorithm)99, .domain = name, .path = name};
    limits[2] = (weir_rule_limit){.name = "", .algorithm = WEIR_ALGO_GCRA};
    check(r->n_descriptors <= WEIR_ENGINE_MAX_DESCRIPTORS);
    weir_code overall = WEIR_CODE_OK;
    uint64_t h = mix(1469598103934665603u, r->domain, r->domain_len) ^ r->hits;
    for (size_t i = 0; i < r->n_descriptors; i++) {
        const weir_descriptor *d = &r->descriptors[i];
        for (size_t j = 0; j < d->n_entries; j++) {
            h = mix(h, d->entries[j].key, d->entries[j].key_len);
            h = mix(h, d->entries[j].value, d->entries[j].value_len);
        }
        h = h * 6364136223846793005u + d->hits + 1;
        weir_descriptor_status *s = &st[i];
        memset(s, 0, sizeof(*s));
        s->code = (h >> 3) & 1 ? WEIR_CODE_OVER_LIMIT : WEIR_CODE_OK;
        unsigned kind = (unsigned)(h >> 8) % 5;
        if (kind == 3) {
            s->unlimited = true;
            s->remaining = WEIR_ENGINE_UNLIMITED_REMAINING;
            s->code = WEIR_CODE_OK;
        } else if (kind < 3) {
            s->limit = &limits[kind];
            s->requests_per_unit = d->limit ? d->limit->requests_per_unit : (uint32_t)(h >> 16);
            s->unit = d->limit ? d->limit->unit : (weir_rule_unit)((h >> 24) % 9);
            s->window_us = (int64_t)(h >> 20) - 5;
            s->remaining = d->has_hits ? d->hits : h >> 30;
            s->reset_after_us = (int64_t)(h >> 2) * ((h & 1) ? -1 : 1);
            s->retry_after_us = (h >> 40) % 7 == 0 ? WEIR_NEVER : (int64_t)(h >> 12);
            s->delay_us = (int64_t)(h >> 50) - 100;
            s->shadow = (h >> 45) & 1;
            s->would_deny = (h >> 46) & 1;
            s->failure_mode = (h >> 47) & 1;
        }
        if (s->code == WEIR_CODE_OVER_LIMIT && !s->shadow)
            overall = WEIR_CODE_OVER_LIMIT;
    }
    weir_api_decision dec = {overall, st, r->n_descriptors};

    weir_buf_clear(&out);
    weir_api_render_decision(&out, &dec);
    check_json(&out);
    weir_buf_clear(&out);
    weir_api_render_envoy_json(&out, &dec);
    check_json(&out);
    int64_t retry = weir_api_retry_after_s(&dec);
    check(overall == WEIR_CODE_OK ? retry == 0 : retry == -1 || retry >= 1);
    weir_buf_clear(&out);
    weir_api_render_problem(&out, &dec, retry);
    check_json(&out);
    weir_api_header_opts opts = {
        .ietf = true, .legacy = true, .retry_after = true, .upstream = true};
    weir_headers fields;
    weir_headers_init(&fields, 1 << 20);
    weir_api_render_headers(&fields, &dec, &opts, (int64_t)(h >> 1), (int64_t)(h % 300));
    check(weir_headers_ok(&fields));
    weir_buf_clear(&out);
    weir_headers_put_lines(&fields, &out);
    weir_headers_free(&fields);
    check_headers(&out);
    check((out.len == 0) == (weir_api_most_restrictive(&dec) == NULL));
}

/* Checks what a decode left: requests within the caps on success, a
 * status and message on failure. */
static void after(bool ok, const weir_api_error *err)
{
    if (!ok) {
        check(err->status == 400 || err->status == 413 || err->status == 500);
        check(err->message[0] != '\0');
        check(memchr(err->message, '\0', sizeof(err->message)) != NULL);
        check(weir_api_count(decoder) == 0);
        weir_buf_clear(&out);
        weir_api_render_error(&out, err->status, err->message);
        check_json(&out);
        return;
    }
    size_t n = weir_api_count(decoder);
    check(n <= caps.max_batch);
    check(weir_api_request(decoder, n) == NULL);
    for (size_t i = 0; i < n; i++) {
        const weir_request *r = weir_api_request(decoder, i);
        check(r != NULL && r->domain != NULL);
        check(r->n_descriptors <= caps.max_descriptors);
        for (size_t j = 0; j < r->n_descriptors; j++) {
            const weir_descriptor *d = &r->descriptors[j];
            check(d->n_entries <= caps.max_entries);
            check(d->has_hits || d->hits == 0);
            check(!d->limit || d->limit->unit <= WEIR_UNIT_WEEK);
        }
        render(r);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!decoder) {
        decoder = weir_api_decoder_new(&caps);
        check(decoder != NULL);
        weir_buf_init(&out, 1 << 22);
        atexit(cleanup);
    }
    if (size == 0)
        return 0;
    unsigned mode = data[0] % 5;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    int valid = oracle(body, len);
    weir_api_error err;
    bool ok;
    if (mode == 0 || mode == 4) {
        ok = weir_api_decode_check(decoder, body, len, &err);
        check_malformed(valid, ok, &err);
        after(ok, &err);
    }
    if (mode == 1 || mode == 4) {
        ok = weir_api_decode_batch(decoder, body, len, &err);
        check_malformed(valid, ok, &err);
        after(ok, &err);
    }
    if (mode == 2 || mode == 4) {
        ok = weir_api_decode_envoy_json(decoder, body, len, &err);
        check_malformed(valid, ok, &err);
        after(ok, &err);
    }
    if (mode == 3 || mode == 4) {
        static const weir_api_header_entry hdrs[] = {
            {"X-Real-IP", "remote_address"},
            {"X-Absent", "absent"},
        };
        headers h = {body, len};
        after(weir_api_decode_query(decoder, body, len, hdrs, 2, get_header, &h, &err), &err);
    }
    return 0;
}
