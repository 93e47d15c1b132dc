/*
 * json.c - strict JSON (RFC 8259) for the API decoders: one pass over the
 * body as the RFC's grammar, writing the nodes of json.h as it goes.
 *
 * Why hand-written rather than a library: the decoders used jansson, which
 * builds a tree with one malloc per value (and a hash table per object) and
 * frees it all again. Profiling `weir serve` showed jansson plus
 * malloc/free at ~25% of the CPU of a POST /v1/check with 3 descriptors;
 * bench/api (weir-bench-api) measured that decode at 6,360 ns with
 * jansson. Debian's tokenizer, jsmn 1.1.0, is not a validator even with
 * JSMN_STRICT (it accepts [1 2], {"a" "b"}, [1,], tru, 01, raw control
 * characters, invalid UTF-8, lone surrogates, and stops silently at a NUL
 * byte), so a grammar walk over the body had to check everything after it;
 * that walk already found every token itself and used jsmn's only to
 * cross-check them, so jsmn was dropped: the same decode costs ~40% fewer
 * instructions without it (docs/BENCHMARKS.md). jansson stays the oracle
 * of the fuzz target (tests/fuzz/fuzz_api_json.c): a body must parse here
 * exactly when jansson accepts it, to the same values.
 *
 * The walk reads values, members and separators as the grammar says;
 * strings are checked in full (escapes, surrogate pairs, control
 * characters and UTF-8 as jansson checks them), numbers against the RFC's
 * grammar, true, false and null exactly; nesting is capped at
 * WEIR_JSON_MAX_DEPTH, and only whitespace may follow the value. Errors
 * carry the offset of the offending text, reported as jansson did (line,
 * column of its last character, "<reason> near '<text>'").
 *
 * Nodes live in one array that grows by doubling, up to what a valid
 * document can need, and is kept for the next document: a decode
 * allocates nothing once it has grown to the largest body seen.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"
#include "json.h"

/* Nodes a parser starts with (a /v1/check body with 3 descriptors takes
 * about 40). */
#define FIRST_CAP 64u

void weir_json_init(weir_json *j)
{
    memset(j, 0, sizeof(*j));
}

void weir_json_release(weir_json *j)
{
    free(j->nodes);
    free(j->scratch);
    weir_json_init(j);
}

/* Room for @cap nodes, keeping those written. */
static bool grow(weir_json *j, size_t cap)
{
    weir_json_node *n = realloc(j->nodes, cap * sizeof(*n));
    if (!n)
        return false;
    j->nodes = n;
    j->cap = cap;
    return true;
}

/* ------------------------------------------------------------ errors */

static bool fail(weir_json_error *err, const char *s, size_t from, size_t to, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Fills *err for the text s[from .. to) (from == to: the end of the body)
 * and returns false. */
static bool fail(weir_json_error *err, const char *s, size_t from, size_t to, const char *fmt, ...)
{
    err->end = to;
    err->near = s + from;
    err->near_len = to - from;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->reason, sizeof(err->reason), fmt, ap);
    va_end(ap);
    return false;
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static size_t skip_ws(const char *s, size_t len, size_t at)
{
    while (at < len && is_ws(s[at]))
        at++;
    return at;
}

/* Where a primitive starting at @at ends: at
 * whitespace, ',', ']', '}' or the end of the body. */
static size_t primitive_end(const char *s, size_t len, size_t at)
{
    while (at < len && !is_ws(s[at]) && s[at] != ',' && s[at] != ']' && s[at] != '}')
        at++;
    return at;
}

/* The end of the text to quote for an error at @at (< len): a string up
 * to its closing quote, one structural character, or a primitive. */
static size_t near_end(const char *s, size_t len, size_t at)
{
    if (s[at] == '"') {
        size_t i = at + 1;
        while (i < len && s[i] != '"')
            i += s[i] == '\\' ? 2 : 1;
        return i < len ? i + 1 : len;
    }
    if (s[at] == '{' || s[at] == '}' || s[at] == '[' || s[at] == ']' || s[at] == ',' ||
        s[at] == ':')
        return at + 1;
    size_t e = primitive_end(s, len, at);
    return e > at ? e : at + 1;
}

/* @reason about what is at @at, or about the end of the body. */
static bool fail_at(weir_json_error *err, const char *s, size_t len, size_t at, const char *reason)
{
    return fail(err, s, at, at < len ? near_end(s, len, at) : len, "%s", reason);
}

/* ------------------------------------------------------------ strings */

static int hex4(const char *p)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

#define X16(x) x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x

/* The bytes a string takes as they are: printable ASCII but '"' and '\\'
 * (DEL included, as RFC 8259 has it). */
// clang-format off
static const unsigned char plain[256] = {
    X16(0), X16(0),                                 /* 0x00 .. 0x1f */
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x20 .. 0x2f: '"' */
    X16(1), X16(1),                                 /* 0x30 .. 0x4f */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, /* 0x50 .. 0x5f: '\\' */
    X16(1), X16(1),                                 /* 0x60 .. 0x7f */
    X16(0), X16(0), X16(0), X16(0), X16(0), X16(0), X16(0), X16(0), /* 0x80 .. 0xff */
};
// clang-format on

/*
 * Checks the string whose opening quote is at s[at]: *q becomes the index
 * of its closing quote and *escaped whether it has escapes. Refuses raw
 * control characters, unknown escapes, \u without four hex digits,
 * surrogates not in a high-low \u pair, and invalid UTF-8.
 */
static bool check_string(const char *s, size_t len, size_t at, size_t *q, bool *escaped,
                         weir_json_error *err)
{
    bool esc = false;
    size_t i = at + 1;
    for (;;) {
        while (i < len && plain[(unsigned char)s[i]])
            i++;
        if (i >= len)
            return fail(err, s, at, len, "premature end of input");
        unsigned char c = (unsigned char)s[i];
        if (c == '"')
            break;
        if (c < 0x20) /* placed before it, as jansson did (a newline ends the line) */
            return fail(err, s, at, i, c == '\n' ? "unexpected newline" : "control character 0x%x",
                        c);
        if (c >= 0x80) {
            size_t n = weir_utf8_next((const unsigned char *)s + i, len - i, NULL);
            if (n == 0)
                return fail(err, s, at, i + 1, "invalid UTF-8 byte 0x%x", c);
            i += n;
            continue;
        }
        /* a backslash */
        esc = true;
        if (i + 1 >= len)
            return fail(err, s, at, len, "premature end of input");
        switch (s[i + 1]) {
        case '"':
        case '\\':
        case '/':
        case 'b':
        case 'f':
        case 'n':
        case 'r':
        case 't':
            i += 2;
            continue;
        case 'u':
            break;
        default:
            return fail(err, s, at, i + 2, "invalid escape");
        }
        if (i + 6 > len)
            return fail(err, s, at, len, "premature end of input");
        int cp = hex4(s + i + 2);
        if (cp < 0)
            return fail(err, s, at, i + 6, "invalid escape");
        if (cp >= 0xDC00 && cp <= 0xDFFF)
            return fail(err, s, at, i + 6, "invalid Unicode '\\u%04X'", (unsigned)cp);
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            int low = i + 12 <= len && s[i + 6] == '\\' && s[i + 7] == 'u' ? hex4(s + i + 8) : -1;
            if (low < 0xDC00 || low > 0xDFFF)
                return fail(err, s, at, i + 6, "invalid Unicode '\\u%04X'", (unsigned)cp);
            i += 12;
        } else {
            i += 6;
        }
    }
    *q = i;
    *escaped = esc;
    return true;
}

static size_t put_utf8(char *out, unsigned cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes s[from .. to), which check_string() accepted, in place (never
 * longer than the input, and each escape is read before its bytes are
 * written); returns the decoded length. */
static size_t unescape(char *s, size_t from, size_t to)
{
    char *out = s + from;
    size_t k = 0;
    for (size_t i = from; i < to;) {
        if (s[i] != '\\') {
            out[k++] = s[i++];
            continue;
        }
        char e = s[i + 1];
        i += 2;
        switch (e) {
        case 'b':
            out[k++] = '\b';
            break;
        case 'f':
            out[k++] = '\f';
            break;
        case 'n':
            out[k++] = '\n';
            break;
        case 'r':
            out[k++] = '\r';
            break;
        case 't':
            out[k++] = '\t';
            break;
        case 'u': {
            unsigned cp = (unsigned)hex4(s + i);
            i += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned low = (unsigned)hex4(s + i + 2);
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                i += 6;
            }
            k += put_utf8(out + k, cp);
            break;
        }
        default: /* " \ / */
            out[k++] = e;
            break;
        }
    }
    return k;
}

/* ------------------------------------------------------------ primitives */

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* The type of the primitive p[0 .. n), -1 when it is none: true, false,
 * null, or a number: -? (0 | [1-9][0-9]*) (.[0-9]+)? ([eE][+-]?[0-9]+)? */
static int primitive_type(const char *p, size_t n, uint8_t *integer)
{
    if (n == 4 && memcmp(p, "true", 4) == 0)
        return WEIR_JSON_TRUE;
    if (n == 5 && memcmp(p, "false", 5) == 0)
        return WEIR_JSON_FALSE;
    if (n == 4 && memcmp(p, "null", 4) == 0)
        return WEIR_JSON_NULL;
    size_t i = 0;
    if (i < n && p[i] == '-')
        i++;
    if (i < n && p[i] == '0') {
        i++;
    } else if (i < n && p[i] >= '1' && p[i] <= '9') {
        while (i < n && is_digit(p[i]))
            i++;
    } else {
        return -1;
    }
    *integer = 1;
    if (i < n && p[i] == '.') {
        *integer = 0;
        size_t d = ++i;
        while (i < n && is_digit(p[i]))
            i++;
        if (i == d)
            return -1;
    }
    if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        *integer = 0;
        i++;
        if (i < n && (p[i] == '+' || p[i] == '-'))
            i++;
        size_t d = i;
        while (i < n && is_digit(p[i]))
            i++;
        if (i == d)
            return -1;
    }
    return i == n ? WEIR_JSON_NUMBER : -1;
}

double weir_json_double(const weir_json_node *v)
{
    /* the copy of the body ends in a NUL, so the byte after a number's
     * text (whitespace, ',', ']', '}' or that NUL) ends strtod there */
    return strtod(v->s, NULL);
}

/* ------------------------------------------------------------ the walk */

typedef struct walk {
    weir_json *j;
    const char *s;
    size_t len;
    size_t ti;   /* nodes written */
    size_t most; /* nodes a valid document of this length can need */
    weir_json_error *err;
} walk;

/* The next node, or NULL when memory ran out (*r says so). A document
 * past `most` nodes cannot be valid; the walk meets its error before it
 * writes one more node than that, but the cap holds regardless. */
static weir_json_node *new_node(walk *w, weir_json_result *r)
{
    weir_json *j = w->j;
    if (w->ti < j->cap)
        return &j->nodes[w->ti++];
    size_t cap = j->cap * 2 < w->most ? j->cap * 2 : w->most;
    if (cap <= j->cap || !grow(j, cap)) {
        *r = WEIR_JSON_NOMEM;
        return NULL;
    }
    return &j->nodes[w->ti++];
}

/* The string whose opening quote is at @at becomes the next node; *after
 * is past its closing quote. */
static weir_json_result string_node(walk *w, size_t at, size_t *after)
{
    size_t q = 0;
    bool escaped = false;
    if (!check_string(w->s, w->len, at, &q, &escaped, w->err))
        return WEIR_JSON_MALFORMED;
    weir_json_result r = WEIR_JSON_OK;
    weir_json_node *v = new_node(w, &r);
    if (!v)
        return r;
    *v = (weir_json_node){
        .s = w->s + at + 1, .n = (uint32_t)(q - at - 1), .span = 1, .type = WEIR_JSON_STRING};
    if (escaped)
        v->n = (uint32_t)unescape(w->j->scratch, at + 1, q);
    *after = q + 1;
    return WEIR_JSON_OK;
}

/* The primitive at @at becomes the next node; *after is its end. */
static weir_json_result primitive_node(walk *w, size_t at, size_t *after)
{
    size_t e = primitive_end(w->s, w->len, at);
    uint8_t integer = 0;
    int type = primitive_type(w->s + at, e - at, &integer);
    if (type < 0) {
        fail(w->err, w->s, at, e > at ? e : at + 1, "invalid token");
        return WEIR_JSON_MALFORMED;
    }
    weir_json_result r = WEIR_JSON_OK;
    weir_json_node *v = new_node(w, &r);
    if (!v)
        return r;
    *v = (weir_json_node){.s = w->s + at,
                          .n = (uint32_t)(e - at),
                          .span = 1,
                          .type = (uint8_t)type,
                          .integer = integer};
    *after = e;
    return WEIR_JSON_OK;
}

typedef struct frame {
    uint32_t node; /* the array or object */
    uint32_t count;
    bool object;
} frame;

/* Reads the body as the grammar, writing each value's node as it starts. */
static weir_json_result walk_doc(walk *w, bool any_top)
{
    const char *s = w->s;
    size_t len = w->len;
    frame stack[WEIR_JSON_MAX_DEPTH];
    size_t depth = 0;
    enum { VALUE, KEY, AFTER } state = VALUE;
    size_t at = skip_ws(s, len, 0);
    if (!any_top && (at == len || (s[at] != '{' && s[at] != '['))) {
        fail_at(w->err, s, len, at, "'[' or '{' expected");
        return WEIR_JSON_MALFORMED;
    }
    weir_json_result r = WEIR_JSON_OK;
    for (;;) {
        switch (state) {
        case VALUE: /* at: past whitespace, a value must start */
            if (at == len || s[at] == ',' || s[at] == ':' || s[at] == ']' || s[at] == '}') {
                fail_at(w->err, s, len, at, "unexpected token");
                return WEIR_JSON_MALFORMED;
            }
            if (s[at] == '{' || s[at] == '[') {
                bool object = s[at] == '{';
                if (depth == WEIR_JSON_MAX_DEPTH) {
                    fail(w->err, s, at, at + 1, "nesting deeper than %d levels",
                         WEIR_JSON_MAX_DEPTH);
                    return WEIR_JSON_MALFORMED;
                }
                weir_json_node *v = new_node(w, &r);
                if (!v)
                    return r;
                *v = (weir_json_node){
                    .s = s + at, .span = 1, .type = object ? WEIR_JSON_OBJECT : WEIR_JSON_ARRAY};
                at = skip_ws(s, len, at + 1);
                if (at < len && s[at] == (object ? '}' : ']')) {
                    at++; /* empty */
                    state = AFTER;
                } else {
                    stack[depth++] = (frame){(uint32_t)(w->ti - 1), 0, object};
                    state = object ? KEY : VALUE;
                }
                continue;
            }
            r = s[at] == '"' ? string_node(w, at, &at) : primitive_node(w, at, &at);
            if (r != WEIR_JSON_OK)
                return r;
            state = AFTER;
            continue;
        case KEY: /* at: past whitespace, a member must start */
            if (at == len || s[at] != '"') {
                fail_at(w->err, s, len, at, "string or '}' expected");
                return WEIR_JSON_MALFORMED;
            }
            r = string_node(w, at, &at);
            if (r != WEIR_JSON_OK)
                return r;
            at = skip_ws(s, len, at);
            if (at == len || s[at] != ':') {
                fail_at(w->err, s, len, at, "':' expected");
                return WEIR_JSON_MALFORMED;
            }
            at = skip_ws(s, len, at + 1);
            state = VALUE;
            continue;
        case AFTER: /* a value ended at at (or a container is empty) */
            at = skip_ws(s, len, at);
            if (depth == 0)
                break;
            frame *f = &stack[depth - 1];
            f->count++;
            if (at < len && s[at] == ',') {
                at = skip_ws(s, len, at + 1);
                state = f->object ? KEY : VALUE;
                continue;
            }
            if (at < len && s[at] == (f->object ? '}' : ']')) {
                weir_json_node *v = &w->j->nodes[f->node];
                v->n = f->count;
                v->span = (uint32_t)(w->ti - f->node);
                depth--;
                at++;
                continue; /* AFTER again: the container is a value */
            }
            fail_at(w->err, s, len, at, f->object ? "'}' expected" : "']' expected");
            return WEIR_JSON_MALFORMED;
        }
        break;
    }
    if (at != len) {
        fail_at(w->err, s, len, at, "end of file expected");
        return WEIR_JSON_MALFORMED;
    }
    return WEIR_JSON_OK;
}

weir_json_result weir_json_parse(weir_json *j, const char *text, size_t len, unsigned flags,
                                 weir_json_error *err)
{
    j->n_nodes = 0;
    if (!text) {
        text = "";
        len = 0;
    }
    if (len > WEIR_JSON_MAX_LEN) {
        fail(err, text, 0, 0, "document too large");
        return WEIR_JSON_MALFORMED;
    }
    if (j->cap == 0 && !grow(j, FIRST_CAP))
        return WEIR_JSON_NOMEM;
    if (j->scratch_cap < len + 1) {
        free(j->scratch);
        j->scratch_cap = 0;
        j->scratch = malloc(len + 1);
        if (!j->scratch)
            return WEIR_JSON_NOMEM;
        j->scratch_cap = len + 1;
    }
    memcpy(j->scratch, text, len);
    j->scratch[len] = '\0';
    text = j->scratch;
    /*
     * Every value but the top-level one owns two bytes: its last (closing
     * bracket or quote, end of a primitive) and the one before it (the
     * ',', ':', '[' or '{' that lets it start), so a valid document has at
     * most (len + 1) / 2 values; a prefix of one also has its open arrays
     * and objects, at most WEIR_JSON_MAX_DEPTH.
     */
    walk w = {.j = j, .s = text, .len = len, .most = len / 2 + WEIR_JSON_MAX_DEPTH + 2, .err = err};
    weir_json_result r = walk_doc(&w, flags & WEIR_JSON_ANY_TOP);
    if (r != WEIR_JSON_OK)
        return r;
    j->n_nodes = w.ti;
    return WEIR_JSON_OK;
}

void weir_json_where(const char *text, size_t end, unsigned *line, unsigned *column)
{
    unsigned l = 1, c = 0;
    for (size_t i = 0; i < end; i++) {
        unsigned char b = (unsigned char)text[i];
        if (b == '\n') {
            l++;
            c = 0;
        } else if ((b & 0xC0) != 0x80) {
            c++;
        }
    }
    *line = l;
    *column = c;
}
