/*
 * decode.c - the API's JSON decoders: /v1/check and batch bodies and
 * upstream's proto3 JSON (POST /json), turned into engine requests.
 *
 * JSON is parsed by json.c into the decoder's node array, which is kept
 * until the next decode so entry strings point straight into the parser's
 * copy of the body. Arrays of descriptors and entries are pools owned by
 * the decoder: a first walk over the nodes counts what the request needs
 * (bounded by the caps), the pools grow once to that size, then a second
 * walk checks types and fills them, so no pointer handed out ever moves.
 *
 * An object given the same member twice keeps the last (as jansson did);
 * a field given under both its proto and camelCase names is an error.
 */
#include <string.h>

#include "decode_internal.h"

/* ------------------------------------------------------------ errors */

/* The place being decoded, e.g. "requests[2].descriptors[0].limit". */
typedef struct path {
    char s[128];
    size_t len;
} path;

/* Appends @n bytes (as many as fit) to the path. Paths are kept for every
 * value decoded, so this is plain copying, no printf. */
static void path_put(path *p, const char *s, size_t n)
{
    size_t room = sizeof(p->s) - 1 - p->len;
    if (n > room)
        n = room;
    memcpy(p->s + p->len, s, n);
    p->len += n;
    p->s[p->len] = '\0';
}

/* Appends ".name" (no dot at the top) and returns the old length, for
 * path_cut(). */
static size_t path_field(path *p, const char *name)
{
    size_t old = p->len;
    if (p->len)
        path_put(p, ".", 1);
    path_put(p, name, strlen(name));
    return old;
}

/* Appends ".name[i]" (no dot at the top); returns the old length. */
static size_t path_item(path *p, const char *name, size_t i)
{
    char digits[24];
    size_t k = sizeof(digits);
    digits[--k] = ']';
    do {
        digits[--k] = (char)('0' + i % 10);
        i /= 10;
    } while (i);
    digits[--k] = '[';
    size_t old = path_field(p, name);
    path_put(p, digits + k, sizeof(digits) - k);
    return old;
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

typedef const weir_json_node jnode;

typedef struct dctx {
    weir_api_decoder *d;
    weir_api_error *err;
    bool envoy; /* proto3 JSON: camelCase names, quoted integers, enum numbers */
    path p;
} dctx;

/* A field name and its length. */
typedef struct lit {
    const char *s;
    size_t n;
} lit;

// clang-format off
#define LIT(s) {s, sizeof(s) - 1}
#define NO_LIT {NULL, 0}
// clang-format on

static bool key_is(jnode *key, lit nm)
{
    return nm.s && key->n == nm.n && memcmp(key->s, nm.s, nm.n) == 0;
}

/* One known field of an object: its name and, in proto3 JSON, its
 * lowerCamelCase spelling (NO_LIT when the same). */
typedef struct field {
    lit name;
    lit camel;
} field;

/*
 * Sorts the members of @obj into @out (one slot per field, NULL when absent
 * or null): an unknown field, or one given twice (under one spelling or
 * both), is an error: a last-wins reading lets two parsers of one body
 * disagree on what it asks, as protojson refuses it too. @obj must be a
 * JSON object.
 */
static bool get_fields(dctx *c, jnode *obj, const field *fields, size_t n, jnode **out)
{
    unsigned char seen[8] = {0}; /* the spelling seen: 1 name, 2 camel */
    for (size_t i = 0; i < n; i++)
        out[i] = NULL;
    jnode *key = obj + 1;
    for (uint32_t m = 0; m < obj->n; m++) {
        jnode *v = key + 1;
        size_t i = 0;
        unsigned char spelling = 0;
        for (; i < n; i++) {
            if (key_is(key, fields[i].name)) {
                spelling = 1;
                break;
            }
            if (c->envoy && key_is(key, fields[i].camel)) {
                spelling = 2;
                break;
            }
        }
        char q[WEIR_API_QUOTE_MAX + 4];
        if (i == n)
            return set_error(c->err, 400, &c->p, "unknown field '%s'",
                             weir_api_dec_quote(q, key->s, key->n));
        if (seen[i])
            return set_error(c->err, 400, &c->p, "duplicate field '%s'",
                             weir_api_dec_quote(q, key->s, key->n));
        seen[i] = spelling;
        out[i] = v->type == WEIR_JSON_NULL ? NULL : v;
        key = weir_json_next(v);
    }
    return true;
}

/* The value of the last member @name of @obj (an object), NULL if none:
 * what get_fields() picks for it. */
static jnode *member(jnode *obj, lit nm)
{
    jnode *found = NULL;
    jnode *key = obj + 1;
    for (uint32_t m = 0; m < obj->n; m++) {
        if (key_is(key, nm))
            found = key + 1;
        key = weir_json_next(key + 1);
    }
    return found;
}

/* A string value; its bytes stay in the parser's copy of the body. */
static bool get_string(dctx *c, jnode *v, const char *name, const char **s, size_t *n)
{
    if (v->type != WEIR_JSON_STRING) {
        size_t at = path_field(&c->p, name);
        set_error(c->err, 400, &c->p, "must be a string");
        path_cut(&c->p, at);
        return false;
    }
    if (v->n > WEIR_MAX_KEY_BYTES) {
        /* no counter could be named by it (docs/API.md, "Caps") */
        size_t at = path_field(&c->p, name);
        set_error(c->err, 400, &c->p, "%zu bytes, more than the %u a string may have", (size_t)v->n,
                  WEIR_MAX_KEY_BYTES);
        path_cut(&c->p, at);
        return false;
    }
    *s = v->s;
    *n = v->n;
    return true;
}

/* An integer's magnitude (up to @max) and sign; false past @max. */
static bool int_value(jnode *v, uint64_t max, uint64_t *mag, bool *negative)
{
    *negative = v->s[0] == '-';
    return weir_api_dec_decimal(v->s + *negative, v->n - *negative, max, mag);
}

/* A non-negative integer up to @max: a JSON integer, an integral real, or
 * (proto3 JSON) a decimal string. */
static bool get_uint(dctx *c, jnode *v, const char *name, uint64_t max, uint64_t *out)
{
    bool ok = false;
    if (v->type == WEIR_JSON_NUMBER && v->integer) {
        bool negative;
        ok = int_value(v, max, out, &negative) && (!negative || *out == 0);
    } else if (v->type == WEIR_JSON_NUMBER) {
        double x = weir_json_double(v);
        if (x >= 0.0 && x < 18446744073709551616.0) {
            uint64_t u = (uint64_t)x;
            ok = (double)u == x && u <= max;
            *out = u;
        }
    } else if (c->envoy && v->type == WEIR_JSON_STRING) {
        ok = weir_api_dec_decimal(v->s, v->n, max, out);
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
static bool get_unit(dctx *c, jnode *v, weir_rule_unit *out)
{
    size_t at = path_field(&c->p, "unit");
    char q[WEIR_API_QUOTE_MAX + 4];
    if (v->type == WEIR_JSON_STRING) {
        for (size_t i = 0; i < sizeof(unit_names) / sizeof(unit_names[0]); i++) {
            if (name_is(v->s, v->n, unit_names[i].name)) {
                *out = unit_names[i].unit;
                path_cut(&c->p, at);
                return true;
            }
        }
        if (c->envoy && name_is(v->s, v->n, "unknown")) {
            *out = WEIR_UNIT_NONE;
            path_cut(&c->p, at);
            return true;
        }
        set_error(c->err, 400, &c->p, "unknown unit '%s'", weir_api_dec_quote(q, v->s, v->n));
    } else if (c->envoy && v->type == WEIR_JSON_NUMBER && v->integer) {
        uint64_t mag;
        bool negative;
        if (!int_value(v, (uint64_t)INT64_MAX + 1, &mag, &negative) ||
            (!negative && mag > INT64_MAX)) {
            set_error(c->err, 400, &c->p, "unknown unit '%s'", weir_api_dec_quote(q, v->s, v->n));
        } else if (negative && mag > 0) {
            set_error(c->err, 400, &c->p, "unknown unit '-%llu'", (unsigned long long)mag);
        } else if (mag <= 6) {
            *out = (weir_rule_unit)mag;
            path_cut(&c->p, at);
            return true;
        } else {
            set_error(c->err, 400, &c->p, "unknown unit '%llu'", (unsigned long long)mag);
        }
    } else {
        set_error(c->err, 400, &c->p,
                  c->envoy ? "must be a string or an integer" : "must be a string");
    }
    path_cut(&c->p, at);
    return false;
}

/* The items of the array field @name (absent or null: none), at most
 * @max of them (413 beyond; @what names them in the message). */
static bool get_array(dctx *c, jnode *v, const char *name, size_t max, const char *what, size_t *n)
{
    *n = 0;
    if (!v)
        return true;
    if (v->type != WEIR_JSON_ARRAY) {
        size_t at = path_field(&c->p, name);
        set_error(c->err, 400, &c->p, "must be an array");
        path_cut(&c->p, at);
        return false;
    }
    size_t len = v->n;
    if (len > max)
        return set_error(c->err, 413, &c->p, "too many %s (%zu > %zu)", what, len, max);
    *n = len;
    return true;
}

static bool must_be_object(dctx *c, jnode *v)
{
    if (v->type == WEIR_JSON_OBJECT)
        return true;
    return set_error(c->err, 400, &c->p, c->p.len ? "must be an object" : "body must be an object");
}

static bool decode_entry(dctx *c, jnode *obj, weir_entry *e)
{
    static const field fields[] = {{LIT("key"), NO_LIT}, {LIT("value"), NO_LIT}};
    jnode *f[2];
    if (!must_be_object(c, obj) || !get_fields(c, obj, fields, 2, f))
        return false;
    e->key = e->value = "";
    e->key_len = e->value_len = 0;
    for (size_t i = 0; i < 2; i++) {
        if (!f[i] && !c->envoy)
            return set_error(c->err, 400, &c->p, "missing field '%s'", fields[i].name.s);
    }
    if (f[0] && !get_string(c, f[0], "key", &e->key, &e->key_len))
        return false;
    if (f[1] && !get_string(c, f[1], "value", &e->value, &e->value_len))
        return false;
    return true;
}

static bool decode_override(dctx *c, jnode *obj, weir_limit_override *o)
{
    static const field fields[] = {{LIT("requests_per_unit"), LIT("requestsPerUnit")},
                                   {LIT("unit"), NO_LIT}};
    jnode *f[2];
    if (!must_be_object(c, obj) || !get_fields(c, obj, fields, 2, f))
        return false;
    o->requests_per_unit = 0;
    o->unit = WEIR_UNIT_NONE;
    for (size_t i = 0; i < 2; i++) {
        if (!f[i] && !c->envoy)
            return set_error(c->err, 400, &c->p, "missing field '%s'", fields[i].name.s);
    }
    uint64_t rpu = 0;
    if (f[0] && !get_uint(c, f[0], "requests_per_unit", UINT32_MAX, &rpu))
        return false;
    o->requests_per_unit = (uint32_t)rpu;
    return !f[1] || get_unit(c, f[1], &o->unit);
}

static bool decode_descriptor(dctx *c, jnode *obj, weir_descriptor *desc, weir_limit_override *o)
{
    /* the same slots for both formats: entries, limit, hits */
    static const field weir_fields[] = {
        {LIT("entries"), NO_LIT}, {LIT("limit"), NO_LIT}, {LIT("hits"), NO_LIT}};
    static const field envoy_fields[] = {
        {LIT("entries"), NO_LIT}, {LIT("limit"), NO_LIT}, {LIT("hits_addend"), LIT("hitsAddend")}};
    jnode *f[3];
    if (!must_be_object(c, obj) || !get_fields(c, obj, c->envoy ? envoy_fields : weir_fields, 3, f))
        return false;
    weir_api_decoder *d = c->d;
    memset(desc, 0, sizeof(*desc));
    size_t n;
    if (!get_array(c, f[0], "entries", d->lim.max_entries, "entries", &n))
        return false;
    weir_entry *entries = n ? d->entries + d->n_entries : NULL; /* no NULL + 0 */
    d->n_entries += n;
    jnode *item = f[0] ? f[0] + 1 : NULL;
    for (size_t i = 0; i < n; i++, item = weir_json_next(item)) {
        size_t at = path_item(&c->p, "entries", i);
        if (!decode_entry(c, item, &entries[i]))
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

static bool decode_request(dctx *c, jnode *obj, weir_request *r)
{
    static const field weir_fields[] = {
        {LIT("domain"), NO_LIT}, {LIT("descriptors"), NO_LIT}, {LIT("hits"), NO_LIT}};
    static const field envoy_fields[] = {{LIT("domain"), NO_LIT},
                                         {LIT("descriptors"), NO_LIT},
                                         {LIT("hits_addend"), LIT("hitsAddend")}};
    jnode *f[3];
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
    jnode *item = f[1] ? f[1] + 1 : NULL;
    for (size_t i = 0; i < n; i++, item = weir_json_next(item)) {
        size_t at = path_item(&c->p, "descriptors", i);
        if (!decode_descriptor(c, item, &descs[i], &overrides[i]))
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
static void count_request(const weir_api_limits *lim, jnode *req, size_t *n_descs,
                          size_t *n_entries)
{
    jnode *descs = req->type == WEIR_JSON_OBJECT ? member(req, (lit)LIT("descriptors")) : NULL;
    if (!descs || descs->type != WEIR_JSON_ARRAY)
        return;
    size_t n = descs->n;
    if (n > lim->max_descriptors)
        n = lim->max_descriptors;
    *n_descs += n;
    jnode *desc = descs + 1;
    for (size_t i = 0; i < n; i++, desc = weir_json_next(desc)) {
        jnode *entries = desc->type == WEIR_JSON_OBJECT ? member(desc, (lit)LIT("entries")) : NULL;
        if (!entries || entries->type != WEIR_JSON_ARRAY)
            continue;
        size_t k = entries->n;
        *n_entries += k > lim->max_entries ? lim->max_entries : k;
    }
}

/* Parses @body (the whole body must be one JSON array or object); *root
 * is the top-level value. */
static bool parse(weir_api_decoder *d, const char *body, size_t len, weir_api_error *err,
                  jnode **root)
{
    weir_json_error je;
    weir_json_result r = weir_json_parse(&d->json, body, len, 0, &je);
    if (r == WEIR_JSON_OK) {
        *root = d->json.nodes;
        return true;
    }
    if (r == WEIR_JSON_NOMEM)
        return weir_api_dec_oom(err);
    unsigned line, column;
    weir_json_where(body, je.end, &line, &column);
    if (je.near_len == 0)
        return set_error(err, 400, NULL,
                         "malformed JSON at line %u, column %u: %s near end of file", line, column,
                         je.reason);
    char q[WEIR_API_QUOTE_MAX + 4];
    return set_error(err, 400, NULL, "malformed JSON at line %u, column %u: %s near '%s'", line,
                     column, je.reason, weir_api_dec_quote(q, je.near, je.near_len));
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
    jnode *root = NULL;
    if (!parse(d, body, len, err, &root))
        return false;
    size_t nd = 0, ne = 0;
    count_request(&d->lim, root, &nd, &ne);
    if (!weir_api_dec_reserve(d, nd, ne))
        return finish(d, weir_api_dec_oom(err), 0);
    dctx c = {.d = d, .err = err, .envoy = envoy};
    return finish(d, decode_request(&c, root, &d->reqs[0]), 1);
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
    jnode *root = NULL;
    if (!parse(d, body, len, err, &root))
        return false;
    static const field fields[] = {{LIT("requests"), NO_LIT}};
    jnode *f[1];
    dctx c = {.d = d, .err = err, .envoy = false};
    size_t n;
    if (!must_be_object(&c, root) || !get_fields(&c, root, fields, 1, f) ||
        !get_array(&c, f[0], "requests", d->lim.max_batch, "requests", &n))
        return finish(d, false, 0);
    size_t nd = 0, ne = 0;
    jnode *item = n ? f[0] + 1 : NULL;
    for (size_t i = 0; i < n; i++, item = weir_json_next(item))
        count_request(&d->lim, item, &nd, &ne);
    if (!weir_api_dec_reserve(d, nd, ne))
        return finish(d, weir_api_dec_oom(err), 0);
    item = n ? f[0] + 1 : NULL;
    for (size_t i = 0; i < n; i++, item = weir_json_next(item)) {
        path_cut(&c.p, 0);
        path_item(&c.p, "requests", i);
        if (!decode_request(&c, item, &d->reqs[i]))
            return finish(d, false, 0);
    }
    return finish(d, true, n);
}
