/*
 * rls_yaml.c - a RateLimitConfig resource (ratelimit.config.ratelimit.v3)
 * rendered as the rule file upstream's YAML would be, so rules delivered
 * over xDS go through the same loader, checks and error texts as rule
 * files. The conversion follows upstream's (a field left at its proto3
 * default is left out where the file would leave it out); the loader does
 * all the judging.
 *
 * Invariant: nothing reaches protobuf-c's unpacker nested deeper than
 * WEIR_XDS_MAX_NESTING messages (it recurses with no bound of its own), and
 * every string lands in the YAML double-quoted and escaped, so no value
 * can change the document's structure.
 */
#include <protobuf-c/protobuf-c.h>
#include <stdio.h>
#include <string.h>

#include "common/utf8.h"
#include "ratelimit/config/ratelimit/v3/rls_conf.pb-c.h"
#include "xds/discovery.h"

typedef Ratelimit__Config__Ratelimit__V3__RateLimitConfig rl_config;
typedef Ratelimit__Config__Ratelimit__V3__RateLimitDescriptor rl_descriptor;
typedef Ratelimit__Config__Ratelimit__V3__RateLimitPolicy rl_policy;

/* ------------------------------------------------------------ the wire walk */

/* The message kinds the walk looks into: those that nest, and those
 * holding strings that become rules. */
typedef enum kind {
    K_NONE,
    K_CONFIG,
    K_DESCRIPTOR,
    K_POLICY,
    K_REPLACE,
    K_STRUCT,
    K_ENTRY,
    K_VALUE,
    K_LIST
} kind;

/* The kind of field @field of a @k message, K_NONE when the walk need not
 * look into it. */
static kind child_kind(kind k, uint64_t field)
{
    switch (k) {
    case K_CONFIG: /* RateLimitConfig.descriptors */
        return field == 3 ? K_DESCRIPTOR : K_NONE;
    case K_DESCRIPTOR: /* .descriptors, .rate_limit, .metadata */
        return field == 4 ? K_DESCRIPTOR : field == 3 ? K_POLICY : field == 8 ? K_STRUCT : K_NONE;
    case K_POLICY: /* RateLimitPolicy.replaces */
        return field == 5 ? K_REPLACE : K_NONE;
    case K_STRUCT: /* google.protobuf.Struct.fields (map entries) */
        return field == 1 ? K_ENTRY : K_NONE;
    case K_ENTRY: /* the entry's value */
        return field == 2 ? K_VALUE : K_NONE;
    case K_VALUE: /* Value.struct_value, .list_value */
        return field == 5 ? K_STRUCT : field == 6 ? K_LIST : K_NONE;
    case K_LIST: /* ListValue.values */
        return field == 1 ? K_VALUE : K_NONE;
    case K_REPLACE:
    case K_NONE:
        break;
    }
    return K_NONE;
}

/* Whether field @field of a @k message is a string that becomes part of
 * a rule (protobuf-c hands strings out NUL-terminated: a NUL inside one
 * would silently cut it). */
static bool rule_string(kind k, uint64_t field)
{
    switch (k) {
    case K_CONFIG:     /* name, domain */
    case K_DESCRIPTOR: /* key, value */
        return field == 1 || field == 2;
    case K_POLICY: /* name */
        return field == 4;
    case K_REPLACE: /* name */
        return field == 1;
    default:
        return false;
    }
}

static bool varint(const uint8_t **p, size_t *n, uint64_t *v)
{
    uint64_t r = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (!*n)
            return false;
        uint8_t b = **p;
        (*p)++;
        (*n)--;
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = r;
            return true;
        }
    }
    return false;
}

typedef enum walk_result { WALK_OK, WALK_MALFORMED, WALK_TOO_DEEP, WALK_NUL } walk_result;

/* Walks the @k message @p (@n bytes) and the messages nested in it. */
static walk_result walk(const uint8_t *p, size_t n, kind k, unsigned depth)
{
    if (depth > WEIR_XDS_MAX_NESTING)
        return WALK_TOO_DEEP;
    while (n) {
        uint64_t tag, v;
        if (!varint(&p, &n, &tag))
            return WALK_MALFORMED;
        switch (tag & 7u) {
        case 0:
            if (!varint(&p, &n, &v))
                return WALK_MALFORMED;
            break;
        case 1:
        case 5: {
            size_t w = (tag & 7u) == 1 ? 8 : 4;
            if (n < w)
                return WALK_MALFORMED;
            p += w;
            n -= w;
            break;
        }
        case 2: {
            if (!varint(&p, &n, &v) || v > n)
                return WALK_MALFORMED;
            if (rule_string(k, tag >> 3) && memchr(p, 0, (size_t)v))
                return WALK_NUL;
            kind c = child_kind(k, tag >> 3);
            walk_result r = c == K_NONE ? WALK_OK : walk(p, (size_t)v, c, depth + 1);
            if (r != WALK_OK)
                return r;
            p += v;
            n -= (size_t)v;
            break;
        }
        default: /* groups: no field of these messages is one */
            return WALK_MALFORMED;
        }
    }
    return WALK_OK;
}

/* ------------------------------------------------------------ rendering */

static void indent(weir_buf *b, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        weir_buf_putc(b, ' ');
}

/* Whether libyaml reads code point @c as it is inside a double-quoted
 * scalar: printable (its reader refuses the rest) and not a line break
 * (which it would fold) nor a byte order mark. */
static bool yaml_plain_char(uint32_t c)
{
    return (c >= 0xa0 && c <= 0xd7ff && c != 0x2028 && c != 0x2029) ||
           (c >= 0xe000 && c <= 0xfffd && c != 0xfeff) || c >= 0x10000;
}

/* @s as a YAML double-quoted scalar: '"' and '\' escaped, control bytes
 * and the code points libyaml would not read as they are escaped, other
 * UTF-8 as it is. False when @s is not valid UTF-8 (protobuf strings must
 * be; YAML cannot carry the bytes). */
static bool quoted(weir_buf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    weir_buf_putc(b, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        if (*p < 0x80) {
            if (*p == '"' || *p == '\\') {
                weir_buf_putc(b, '\\');
                weir_buf_putc(b, (char)*p);
            } else if (*p < 0x20 || *p == 0x7f) {
                char e[4] = {'\\', 'x', hex[*p >> 4], hex[*p & 15]};
                weir_buf_put(b, e, sizeof(e));
            } else {
                weir_buf_putc(b, (char)*p);
            }
            p++;
            continue;
        }
        uint32_t c;
        size_t n = weir_utf8_next(p, 4, &c);
        if (!n)
            return false;
        if (yaml_plain_char(c)) {
            weir_buf_put(b, p, n);
        } else { /* below U+10000: the others are plain */
            char e[6] = {'\\',       'u', hex[c >> 12], hex[(c >> 8) & 15], hex[(c >> 4) & 15],
                         hex[c & 15]};
            weir_buf_put(b, e, sizeof(e));
        }
        p += n;
    }
    weir_buf_putc(b, '"');
    return true;
}

/* The document being written; @bad_text once a string could not be. */
typedef struct render {
    weir_buf *b;
    bool bad_text;
} render;

static void text(render *r, const char *s)
{
    if (!quoted(r->b, s ? s : ""))
        r->bad_text = true;
}

/* "key: " at @ind spaces. */
static void field(render *r, unsigned ind, const char *key)
{
    indent(r->b, ind);
    weir_buf_puts(r->b, key);
    weir_buf_puts(r->b, ": ");
}

/* "key: "string"" on a line of its own. */
static void text_field(render *r, unsigned ind, const char *key, const char *value)
{
    field(r, ind, key);
    text(r, value);
    weir_buf_putc(r->b, '\n');
}

/* "key: true" on a line of its own when @on. */
static void flag(render *r, unsigned ind, const char *key, protobuf_c_boolean on)
{
    if (!on)
        return;
    field(r, ind, key);
    weir_buf_puts(r->b, "true\n");
}

static const char *unit_name(int unit)
{
    static const char *const names[] = {"UNKNOWN", "second", "minute", "hour",
                                        "day",     "month",  "year",   "week"};
    return unit >= 0 && unit < 8 ? names[unit] : NULL;
}

static void policy(render *r, unsigned ind, const rl_policy *p)
{
    /* unlimited with no unit is upstream's only valid unlimited form; a
     * unit with unlimited is kept so the loader refuses it as upstream */
    if (p->unit != 0 || !p->unlimited) {
        char num[16];
        snprintf(num, sizeof(num), "%d", (int)p->unit);
        const char *u = unit_name((int)p->unit);
        text_field(r, ind, "unit", u ? u : num);
    }
    if (!p->unlimited) {
        field(r, ind, "requests_per_unit");
        weir_buf_put_u64(r->b, p->requests_per_unit);
        weir_buf_putc(r->b, '\n');
    }
    flag(r, ind, "unlimited", p->unlimited);
    if (p->name && p->name[0])
        text_field(r, ind, "name", p->name);
    if (p->n_replaces) {
        field(r, ind, "replaces");
        weir_buf_putc(r->b, '\n');
        for (size_t i = 0; i < p->n_replaces; i++)
            text_field(r, ind + 2, "- name", p->replaces[i]->name);
    }
}

/* A descriptor list at @ind spaces ("- " at @ind, fields at @ind + 2).
 * The depth is bounded by the wire walk. */
static void descriptors(render *r, unsigned ind, rl_descriptor *const *d, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned in = ind + 2;
        text_field(r, ind, "- key", d[i]->key);
        if (d[i]->value && d[i]->value[0])
            text_field(r, in, "value", d[i]->value);
        if (d[i]->rate_limit) {
            field(r, in, "rate_limit");
            weir_buf_putc(r->b, '\n');
            policy(r, in + 2, d[i]->rate_limit);
        }
        flag(r, in, "shadow_mode", d[i]->shadow_mode);
        flag(r, in, "detailed_metric", d[i]->detailed_metric);
        flag(r, in, "quota_mode", d[i]->quota_mode);
        if (d[i]->metadata) {
            field(r, in, "metadata");
            weir_buf_puts(r->b, "{}\n");
        }
        if (d[i]->n_descriptors) {
            field(r, in, "descriptors");
            weir_buf_putc(r->b, '\n');
            descriptors(r, in + 2, d[i]->descriptors, d[i]->n_descriptors);
        }
    }
}

const char *weir_xds_config_yaml(const uint8_t *msg, size_t len, weir_buf *out, char *name,
                                 size_t name_cap)
{
    switch (walk(msg, len, K_CONFIG, 0)) {
    case WALK_MALFORMED:
        return "malformed RateLimitConfig";
    case WALK_TOO_DEEP:
        return "RateLimitConfig nested more than 64 messages deep";
    case WALK_NUL:
        return "a string of the RateLimitConfig holds a NUL byte";
    case WALK_OK:
        break;
    }
    rl_config *c = ratelimit__config__ratelimit__v3__rate_limit_config__unpack(NULL, len, msg);
    if (!c) /* the walk passed: what is left is a bad string or out of memory */
        return "malformed RateLimitConfig";
    snprintf(name, name_cap, "%s", c->name && c->name[0] ? c->name : c->domain ? c->domain : "");
    render r = {out, false};
    text_field(&r, 0, "domain", c->domain);
    if (c->n_descriptors) {
        weir_buf_puts(out, "descriptors:\n");
        descriptors(&r, 2, c->descriptors, c->n_descriptors);
    }
    ratelimit__config__ratelimit__v3__rate_limit_config__free_unpacked(c, NULL);
    if (r.bad_text)
        return "a string of the RateLimitConfig is not UTF-8";
    return weir_buf_ok(out) ? NULL : "out of memory";
}
