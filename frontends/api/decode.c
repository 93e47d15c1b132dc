/*
 * decode.c - the API's JSON decoders: /v1/check and batch bodies and
 * upstream's proto3 JSON (POST /json), turned into engine requests.
 *
 * JSON is parsed by jansson; the parsed tree is kept until the next decode
 * so entry strings point straight into it. Arrays of descriptors and
 * entries are pools owned by the decoder: a first walk over the tree
 * counts what the request needs (bounded by the caps), the pools grow once
 * to that size, then a second walk checks types and fills them, so no
 * pointer handed out ever moves.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode_internal.h"

/* ------------------------------------------------------------ errors */

/* The place being decoded, e.g. "requests[2].descriptors[0].limit". */
typedef struct path {
    char s[128];
    size_t len;
} path;

static size_t path_add(path *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends to the path and returns its old length, for path_cut(). */
static size_t path_add(path *p, const char *fmt, ...)
{
    size_t old = p->len;
    if (p->len < sizeof(p->s) - 1) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(p->s + p->len, sizeof(p->s) - p->len, fmt, ap);
        va_end(ap);
        if (n > 0)
            p->len += (size_t)n;
        if (p->len > sizeof(p->s) - 1)
            p->len = sizeof(p->s) - 1;
    }
    return old;
}

static size_t path_field(path *p, const char *name)
{
    return path_add(p, p->len ? ".%s" : "%s", name);
}

static void path_cut(path *p, size_t len)
{
    p->len = len;
    p->s[len] = '\0';
}

static bool set_error(weir_api_error *err, int status, const path *p, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* weir_api_dec_error() at the place @p (NULL: the top level). */
static bool set_error(weir_api_error *err, int status, const path *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    weir_api_dec_verror(err, status, p ? p->s : NULL, fmt, ap);
    va_end(ap);
    return false;
}

/* ------------------------------------------------------------ JSON walking */

typedef struct dctx {
    weir_api_decoder *d;
    weir_api_error *err;
    bool envoy; /* proto3 JSON: camelCase names, quoted integers, enum numbers */
    path p;
} dctx;

/* One known field of an object: its name and, in proto3 JSON, its
 * lowerCamelCase spelling (NULL when the same). */
typedef struct field {
    const char *name;
    const char *camel;
} field;

/*
 * Sorts the members of @obj into @out (one slot per field, NULL when absent
 * or null): an unknown field or one given twice (under both spellings) is
 * an error. @obj must be a JSON object.
 */
static bool get_fields(dctx *c, json_t *obj, const field *fields, size_t n, json_t **out)
{
    bool seen[8] = {false};
    for (size_t i = 0; i < n; i++)
        out[i] = NULL;
    const char *key;
    size_t key_len;
    json_t *v;
    json_object_keylen_foreach(obj, key, key_len, v)
    {
        size_t i = 0;
        while (i < n && !weir_api_dec_key_is(key, key_len, fields[i].name) &&
               !(c->envoy && weir_api_dec_key_is(key, key_len, fields[i].camel)))
            i++;
        char q[WEIR_API_QUOTE_MAX + 4];
        if (i == n)
            return set_error(c->err, 400, &c->p, "unknown field '%s'",
                             weir_api_dec_quote(q, key, key_len));
        if (seen[i])
            return set_error(c->err, 400, &c->p, "duplicate field '%s'",
                             weir_api_dec_quote(q, key, key_len));
        seen[i] = true;
        out[i] = json_is_null(v) ? NULL : v;
    }
    return true;
}

/* A string value; its bytes stay in the tree. */
static bool get_string(dctx *c, json_t *v, const char *name, const char **s, size_t *n)
{
    if (!json_is_string(v)) {
        size_t at = path_field(&c->p, name);
        set_error(c->err, 400, &c->p, "must be a string");
        path_cut(&c->p, at);
        return false;
    }
    *s = json_string_value(v);
    *n = json_string_length(v);
    return true;
}

/* A non-negative integer up to @max: a JSON integer, an integral real, or
 * (proto3 JSON) a decimal string. */
static bool get_uint(dctx *c, json_t *v, const char *name, uint64_t max, uint64_t *out)
{
    bool ok = false;
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        ok = i >= 0 && (uint64_t)i <= max;
        *out = (uint64_t)i;
    } else if (json_is_real(v)) {
        double x = json_real_value(v);
        if (x >= 0.0 && x < 18446744073709551616.0) {
            uint64_t u = (uint64_t)x;
            ok = (double)u == x && u <= max;
            *out = u;
        }
    } else if (c->envoy && json_is_string(v)) {
        ok = weir_api_dec_decimal(json_string_value(v), json_string_length(v), max, out);
    }
    if (ok)
        return true;
    size_t at = path_field(&c->p, name);
    set_error(c->err, 400, &c->p, "must be an integer from 0 to %llu", (unsigned long long)max);
    path_cut(&c->p, at);
    return false;
}

static const struct {
    const char *name;
    weir_rule_unit unit;
} unit_names[] = {
    {"second", WEIR_UNIT_SECOND}, {"minute", WEIR_UNIT_MINUTE}, {"hour", WEIR_UNIT_HOUR},
    {"day", WEIR_UNIT_DAY},       {"week", WEIR_UNIT_WEEK},     {"month", WEIR_UNIT_MONTH},
    {"year", WEIR_UNIT_YEAR},
};

static bool name_is(const char *s, size_t n, const char *name)
{
    if (strlen(name) != n)
        return false;
    for (size_t i = 0; i < n; i++) {
        char a = s[i], b = name[i];
        if (a >= 'A' && a <= 'Z')
            a = (char)(a - 'A' + 'a');
        if (a != b)
            return false;
    }
    return true;
}

/* A limit override's unit: a name (any case); in proto3 JSON also "UNKNOWN"
 * and envoy.type.v3.RateLimitUnit numbers 0..6. UNKNOWN becomes
 * WEIR_UNIT_NONE, which the engine refuses with its own message. */
static bool get_unit(dctx *c, json_t *v, weir_rule_unit *out)
{
    size_t at = path_field(&c->p, "unit");
    char q[WEIR_API_QUOTE_MAX + 4];
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        size_t n = json_string_length(v);
        for (size_t i = 0; i < sizeof(unit_names) / sizeof(unit_names[0]); i++) {
            if (name_is(s, n, unit_names[i].name)) {
                *out = unit_names[i].unit;
                path_cut(&c->p, at);
                return true;
            }
        }
        if (c->envoy && name_is(s, n, "unknown")) {
            *out = WEIR_UNIT_NONE;
            path_cut(&c->p, at);
            return true;
        }
        set_error(c->err, 400, &c->p, "unknown unit '%s'", weir_api_dec_quote(q, s, n));
    } else if (c->envoy && json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (i >= 0 && i <= 6) {
            *out = (weir_rule_unit)i;
            path_cut(&c->p, at);
            return true;
        }
        set_error(c->err, 400, &c->p, "unknown unit '%lld'", (long long)i);
    } else {
        set_error(c->err, 400, &c->p,
                  c->envoy ? "must be a string or an integer" : "must be a string");
    }
    path_cut(&c->p, at);
    return false;
}

/* The items of the array field @name (absent or null: none), at most
 * @max of them (413 beyond; @what names them in the message). */
static bool get_array(dctx *c, json_t *v, const char *name, size_t max, const char *what, size_t *n)
{
    *n = 0;
    if (!v)
        return true;
    if (!json_is_array(v)) {
        size_t at = path_field(&c->p, name);
        set_error(c->err, 400, &c->p, "must be an array");
        path_cut(&c->p, at);
        return false;
    }
    size_t len = json_array_size(v);
    if (len > max)
        return set_error(c->err, 413, &c->p, "too many %s (%zu > %zu)", what, len, max);
    *n = len;
    return true;
}

static bool must_be_object(dctx *c, json_t *v)
{
    if (json_is_object(v))
        return true;
    return set_error(c->err, 400, &c->p, c->p.len ? "must be an object" : "body must be an object");
}

static bool decode_entry(dctx *c, json_t *obj, weir_entry *e)
{
    static const field fields[] = {{"key", NULL}, {"value", NULL}};
    json_t *f[2];
    if (!must_be_object(c, obj) || !get_fields(c, obj, fields, 2, f))
        return false;
    e->key = e->value = "";
    e->key_len = e->value_len = 0;
    for (size_t i = 0; i < 2; i++) {
        if (!f[i] && !c->envoy)
            return set_error(c->err, 400, &c->p, "missing field '%s'", fields[i].name);
    }
    if (f[0] && !get_string(c, f[0], "key", &e->key, &e->key_len))
        return false;
    if (f[1] && !get_string(c, f[1], "value", &e->value, &e->value_len))
        return false;
    return true;
}

static bool decode_override(dctx *c, json_t *obj, weir_limit_override *o)
{
    static const field fields[] = {{"requests_per_unit", "requestsPerUnit"}, {"unit", NULL}};
    json_t *f[2];
    if (!must_be_object(c, obj) || !get_fields(c, obj, fields, 2, f))
        return false;
    o->requests_per_unit = 0;
    o->unit = WEIR_UNIT_NONE;
    for (size_t i = 0; i < 2; i++) {
        if (!f[i] && !c->envoy)
            return set_error(c->err, 400, &c->p, "missing field '%s'", fields[i].name);
    }
    uint64_t rpu = 0;
    if (f[0] && !get_uint(c, f[0], "requests_per_unit", UINT32_MAX, &rpu))
        return false;
    o->requests_per_unit = (uint32_t)rpu;
    return !f[1] || get_unit(c, f[1], &o->unit);
}

static bool decode_descriptor(dctx *c, json_t *obj, weir_descriptor *desc, weir_limit_override *o)
{
    /* the same slots for both formats: entries, limit, hits */
    static const field weir_fields[] = {{"entries", NULL}, {"limit", NULL}, {"hits", NULL}};
    static const field envoy_fields[] = {
        {"entries", NULL}, {"limit", NULL}, {"hits_addend", "hitsAddend"}};
    json_t *f[3];
    if (!must_be_object(c, obj) || !get_fields(c, obj, c->envoy ? envoy_fields : weir_fields, 3, f))
        return false;
    weir_api_decoder *d = c->d;
    memset(desc, 0, sizeof(*desc));
    size_t n;
    if (!get_array(c, f[0], "entries", d->lim.max_entries, "entries", &n))
        return false;
    weir_entry *entries = n ? d->entries + d->n_entries : NULL; /* no NULL + 0 */
    d->n_entries += n;
    for (size_t i = 0; i < n; i++) {
        size_t at = path_add(&c->p, ".entries[%zu]", i);
        if (!decode_entry(c, json_array_get(f[0], i), &entries[i]))
            return false;
        path_cut(&c->p, at);
    }
    desc->entries = entries;
    desc->n_entries = n;
    if (f[1]) {
        size_t at = path_field(&c->p, "limit");
        if (!decode_override(c, f[1], o))
            return false;
        path_cut(&c->p, at);
        desc->limit = o;
    }
    if (f[2]) {
        uint64_t max = c->envoy ? UINT64_MAX : WEIR_API_MAX_EXACT_INT;
        if (!get_uint(c, f[2], c->envoy ? "hits_addend" : "hits", max, &desc->hits))
            return false;
        desc->has_hits = true;
    }
    return true;
}

static bool decode_request(dctx *c, json_t *obj, weir_request *r)
{
    static const field weir_fields[] = {{"domain", NULL}, {"descriptors", NULL}, {"hits", NULL}};
    static const field envoy_fields[] = {
        {"domain", NULL}, {"descriptors", NULL}, {"hits_addend", "hitsAddend"}};
    json_t *f[3];
    if (!must_be_object(c, obj) || !get_fields(c, obj, c->envoy ? envoy_fields : weir_fields, 3, f))
        return false;
    weir_api_decoder *d = c->d;
    memset(r, 0, sizeof(*r));
    r->domain = "";
    if (f[0] && !get_string(c, f[0], "domain", &r->domain, &r->domain_len))
        return false;
    size_t n;
    if (!get_array(c, f[1], "descriptors", d->lim.max_descriptors, "descriptors", &n))
        return false;
    weir_descriptor *descs = n ? d->descs + d->n_descs : NULL;
    weir_limit_override *overrides = n ? d->overrides + d->n_descs : NULL;
    d->n_descs += n;
    for (size_t i = 0; i < n; i++) {
        size_t at = path_add(&c->p, "%sdescriptors[%zu]", c->p.len ? "." : "", i);
        if (!decode_descriptor(c, json_array_get(f[1], i), &descs[i], &overrides[i]))
            return false;
        path_cut(&c->p, at);
    }
    r->descriptors = descs;
    r->n_descriptors = n;
    if (f[2]) {
        uint64_t max = c->envoy ? UINT32_MAX : WEIR_API_MAX_EXACT_INT;
        if (!get_uint(c, f[2], c->envoy ? "hits_addend" : "hits", max, &r->hits))
            return false;
    }
    return true;
}

/* Adds what the request @req will take from the pools, within the caps
 * (anything past a cap is refused before it is stored). Types are not
 * checked here. */
static void count_request(const weir_api_limits *lim, json_t *req, size_t *n_descs,
                          size_t *n_entries)
{
    json_t *descs = json_is_object(req) ? json_object_get(req, "descriptors") : NULL;
    if (!json_is_array(descs))
        return;
    size_t n = json_array_size(descs);
    if (n > lim->max_descriptors)
        n = lim->max_descriptors;
    *n_descs += n;
    for (size_t i = 0; i < n; i++) {
        json_t *desc = json_array_get(descs, i);
        json_t *entries = json_is_object(desc) ? json_object_get(desc, "entries") : NULL;
        if (!json_is_array(entries))
            continue;
        size_t k = json_array_size(entries);
        *n_entries += k > lim->max_entries ? lim->max_entries : k;
    }
}

/* Parses @body into d->root (the whole body must be one JSON value). */
static bool parse(weir_api_decoder *d, const char *body, size_t len, weir_api_error *err)
{
    json_error_t je;
    d->root = json_loadb(body ? body : "", body ? len : 0, JSON_ALLOW_NUL, &je);
    if (d->root)
        return true;
    if (json_error_code(&je) == json_error_out_of_memory)
        return weir_api_dec_oom(err);
    return set_error(err, 400, NULL, "malformed JSON at line %d, column %d: %s", je.line, je.column,
                     je.text);
}

/* The end of every decode: on failure nothing is kept. */
static bool finish(weir_api_decoder *d, bool ok, size_t count)
{
    if (!ok) {
        weir_api_dec_reset(d);
        return false;
    }
    d->count = count;
    return true;
}

static bool decode_single(weir_api_decoder *d, const char *body, size_t len, bool envoy,
                          weir_api_error *err)
{
    weir_api_dec_reset(d);
    if (!parse(d, body, len, err))
        return false;
    size_t nd = 0, ne = 0;
    count_request(&d->lim, d->root, &nd, &ne);
    if (!weir_api_dec_reserve(d, nd, ne))
        return finish(d, weir_api_dec_oom(err), 0);
    dctx c = {.d = d, .err = err, .envoy = envoy};
    return finish(d, decode_request(&c, d->root, &d->reqs[0]), 1);
}

bool weir_api_decode_check(weir_api_decoder *d, const char *body, size_t len, weir_api_error *err)
{
    return decode_single(d, body, len, false, err);
}

bool weir_api_decode_envoy_json(weir_api_decoder *d, const char *body, size_t len,
                                weir_api_error *err)
{
    return decode_single(d, body, len, true, err);
}

bool weir_api_decode_batch(weir_api_decoder *d, const char *body, size_t len, weir_api_error *err)
{
    weir_api_dec_reset(d);
    if (!parse(d, body, len, err))
        return false;
    static const field fields[] = {{"requests", NULL}};
    json_t *f[1];
    dctx c = {.d = d, .err = err, .envoy = false};
    size_t n;
    if (!must_be_object(&c, d->root) || !get_fields(&c, d->root, fields, 1, f) ||
        !get_array(&c, f[0], "requests", d->lim.max_batch, "requests", &n))
        return finish(d, false, 0);
    size_t nd = 0, ne = 0;
    for (size_t i = 0; i < n; i++)
        count_request(&d->lim, json_array_get(f[0], i), &nd, &ne);
    if (!weir_api_dec_reserve(d, nd, ne))
        return finish(d, weir_api_dec_oom(err), 0);
    for (size_t i = 0; i < n; i++) {
        path_cut(&c.p, 0);
        path_add(&c.p, "requests[%zu]", i);
        if (!decode_request(&c, json_array_get(f[0], i), &d->reqs[i]))
            return finish(d, false, 0);
    }
    return finish(d, true, n);
}
