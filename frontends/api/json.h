/*
 * json.h - strict JSON (RFC 8259) for the API decoders: a body parsed into
 * a flat array of values in document order, without an allocation per
 * value. json.c says why it is not a tree library.
 *
 * A parsed document is nodes[0 .. n_nodes): nodes[0] is the top-level
 * value, an array's items follow it in order, an object's members follow
 * it as key (a string node), value, key, value, ... Every node knows how
 * many nodes it spans (itself and everything inside), so the value after
 * @v at the same level is v + v->span.
 *
 * The parser works on its own copy of the body, its scratch buffer:
 * strings are given decoded there (escapes resolved in place, UTF-8
 * validated, NUL bytes allowed via \u0000), numbers as their text (checked
 * against the RFC's grammar). Nothing points into the caller's body, and
 * everything stays valid until the next parse or weir_json_release().
 *
 * Private to frontends/api, and used by the quota admin codec
 * (daemon/quota/json.c) too; a parser belongs to one thread.
 */
#ifndef WEIR_FRONTENDS_API_JSON_H
#define WEIR_FRONTENDS_API_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Most nested arrays and objects; deeper documents are malformed. */
#define WEIR_JSON_MAX_DEPTH 64
/** Longest document accepted (node spans and lengths are 32-bit). */
#define WEIR_JSON_MAX_LEN ((size_t)1 << 30)

typedef enum weir_json_type {
    WEIR_JSON_NULL,
    WEIR_JSON_FALSE,
    WEIR_JSON_TRUE,
    WEIR_JSON_NUMBER,
    WEIR_JSON_STRING,
    WEIR_JSON_ARRAY,
    WEIR_JSON_OBJECT,
} weir_json_type;

typedef struct weir_json_node {
    /** STRING: the decoded bytes; NUMBER: its text; otherwise the value's
     *  first byte (all in the parser's copy of the body). */
    const char *s;
    /** STRING, NUMBER: bytes at s; ARRAY: items; OBJECT: members. */
    uint32_t n;
    /** Nodes this value takes, itself included. */
    uint32_t span;
    uint8_t type;    /* weir_json_type */
    uint8_t integer; /* NUMBER: no fraction, no exponent */
} weir_json_node;

/** Where and why a document is malformed. */
typedef struct weir_json_error {
    /** Bytes of the body read up to and including the offending text (the
     *  body's length when it ended too early): weir_json_where() of the
     *  caller's body at @end is the place to report. */
    size_t end;
    /** The offending text, in the parser's copy (len 0: the end of the
     *  body). */
    const char *near;
    size_t near_len;
    char reason[48];
} weir_json_error;

typedef struct weir_json {
    weir_json_node *nodes;
    size_t n_nodes;
    size_t cap;         /* nodes allocated */
    char *scratch;      /* the copy of the body, strings decoded in place */
    size_t scratch_cap; /* grows to the longest body seen, plus one */
} weir_json;

typedef enum weir_json_result {
    WEIR_JSON_OK,
    WEIR_JSON_MALFORMED, /* *err says where and why */
    WEIR_JSON_NOMEM,
} weir_json_result;

/** Flags of weir_json_parse(). */
enum {
    /** Any value at the top level; without it the document must be an
     *  array or an object (jansson's default, and the API's). */
    WEIR_JSON_ANY_TOP = 1u,
};

/** An empty parser (all zero is one too). */
void weir_json_init(weir_json *j);
/** Frees what the parser holds; it is then empty. */
void weir_json_release(weir_json *j);

/**
 * weir_json_parse() - parses the @len bytes at @text (NULL when @len is 0)
 * as exactly one JSON value with only whitespace around it. Steady state
 * allocates nothing: the node array and the scratch buffer grow
 * only when a document needs more than any before it.
 */
weir_json_result weir_json_parse(weir_json *j, const char *text, size_t len, unsigned flags,
                                 weir_json_error *err);

/** Line (from 1) and column (characters, from 1; 0 before the first of a
 *  line) of the last of the first @end bytes of @text, as jansson counts
 *  them: "malformed JSON at line L, column C". */
void weir_json_where(const char *text, size_t end, unsigned *line, unsigned *column);

/** A NUMBER's value as a double (strtod's rounding, so infinite when out
 *  of range). */
double weir_json_double(const weir_json_node *v);

/** The value after @v at the same level. */
static inline const weir_json_node *weir_json_next(const weir_json_node *v)
{
    return v + v->span;
}

#endif /* WEIR_FRONTENDS_API_JSON_H */
