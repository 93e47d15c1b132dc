/*
 * yaml_walk.c - the walk over libyaml's event stream (yaml_walk.h). It
 * pulls events and never builds a YAML tree; aliases are refused wherever
 * a value is read and never expanded.
 */
#include "rules/yaml_walk.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static pos pos_of(yaml_mark_t m)
{
    pos p = {(uint64_t)m.line + 1, (uint64_t)m.column + 1};
    return p;
}

pos weir__yp_here(const yp *p)
{
    return pos_of(p->ev.start_mark);
}

bool weir__yp_next(yp *p)
{
    if (p->dead || p->ld->nomem)
        return false;
    if (p->have_ev) {
        yaml_event_delete(&p->ev);
        p->have_ev = false;
    }
    if (!yaml_parser_parse(&p->parser, &p->ev)) {
        p->dead = true;
        if (p->parser.error == YAML_MEMORY_ERROR) {
            p->ld->nomem = true;
            return false;
        }
        if (p->parser.error == YAML_READER_ERROR) {
            /* libyaml gives encoding errors a byte offset, not a mark */
            pos at = {1, 1};
            size_t off = p->parser.problem_offset < p->len ? p->parser.problem_offset : p->len;
            for (size_t i = 0; i < off; i++) {
                if (p->data[i] == '\n') {
                    at.line++;
                    at.col = 1;
                } else {
                    at.col++;
                }
            }
            ERR(p, at, "YAML syntax error: %s (byte %d at offset %zu)",
                p->parser.problem ? p->parser.problem : "bad encoding", p->parser.problem_value,
                p->parser.problem_offset);
            return false;
        }
        pos at = pos_of(p->parser.problem_mark);
        const char *problem = p->parser.problem ? p->parser.problem : "unknown error";
        if (p->parser.context)
            ERR(p, at, "YAML syntax error: %s %s", p->parser.context, problem);
        else
            ERR(p, at, "YAML syntax error: %s", problem);
        return false;
    }
    p->have_ev = true;
    return true;
}

/* Consume the node whose first event is current. Aliases inside are
 * passed over, never resolved. */
bool weir__yp_skip(yp *p)
{
    if (p->ev.type != YAML_SEQUENCE_START_EVENT && p->ev.type != YAML_MAPPING_START_EVENT)
        return true;
    size_t depth = 1;
    while (depth) {
        if (!weir__yp_next(p))
            return false;
        if (p->ev.type == YAML_SEQUENCE_START_EVENT || p->ev.type == YAML_MAPPING_START_EVENT)
            depth++;
        else if (p->ev.type == YAML_SEQUENCE_END_EVENT || p->ev.type == YAML_MAPPING_END_EVENT)
            depth--;
    }
    return true;
}

bool weir__yp_is_null(const yp *p)
{
    if (p->ev.type != YAML_SCALAR_EVENT || p->ev.data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    const char *s = (const char *)p->ev.data.scalar.value;
    return p->ev.data.scalar.length == 0 || strcmp(s, "~") == 0 || strcasecmp(s, "null") == 0;
}

/* Report a node of the wrong kind and consume it. */
bool weir__yp_wrong_kind(yp *p, const char *field, const char *kind)
{
    if (p->ev.type == YAML_ALIAS_EVENT)
        ERR(p, weir__yp_here(p), "YAML aliases are not supported");
    else
        ERR(p, weir__yp_here(p), "'%s' must be %s", field, kind);
    return weir__yp_skip(p);
}

/* The current scalar as an arena string of at most max bytes, or NULL
 * for another kind of node, an embedded NUL or a long string (reported),
 * or when out of memory. */
const char *weir__yp_string(yp *p, const char *field, size_t max)
{
    if (p->ev.type != YAML_SCALAR_EVENT) {
        weir__yp_wrong_kind(p, field, "a string");
        return NULL;
    }
    const char *s = (const char *)p->ev.data.scalar.value;
    size_t len = p->ev.data.scalar.length;
    if (memchr(s, '\0', len)) {
        ERR(p, weir__yp_here(p), "'%s' must not contain a NUL character", field);
        return NULL;
    }
    if (len > max) {
        ERR(p, weir__yp_here(p), "'%s' is longer than %zu bytes", field, max);
        return NULL;
    }
    return weir__rules_strndup(p->ld, s, len);
}

/* The current scalar as a C string for a conversion (NULL when it is not
 * a scalar, reported). Points into the event: valid until next(). */
const char *weir__yp_scalar(yp *p, const char *field)
{
    if (p->ev.type != YAML_SCALAR_EVENT) {
        weir__yp_wrong_kind(p, field, "a scalar");
        return NULL;
    }
    const char *s = (const char *)p->ev.data.scalar.value;
    if (memchr(s, '\0', p->ev.data.scalar.length)) {
        ERR(p, weir__yp_here(p), "'%s' must not contain a NUL character", field);
        return NULL;
    }
    return s;
}

bool weir__yp_bool(yp *p, const char *field, bool *out)
{
    const char *s = weir__yp_scalar(p, field);
    if (!s)
        return false;
    const char *why = weir__rules_parse_bool(s, out);
    if (why) {
        ERR(p, weir__yp_here(p), "'%s' %s: '%.64s'", field, why, s);
        return false;
    }
    return true;
}

bool weir__yp_u64(yp *p, const char *field, uint64_t max, uint64_t *out)
{
    const char *s = weir__yp_scalar(p, field);
    if (!s)
        return false;
    const char *why = weir__rules_parse_u64(s, max, out);
    if (why && strcmp(why, "is too large") == 0) {
        ERR(p, weir__yp_here(p), "'%s' is too large: '%.64s' (at most %llu)", field, s,
            (unsigned long long)max);
        return false;
    }
    if (why) {
        ERR(p, weir__yp_here(p), "'%s' %s: '%.64s'", field, why, s);
        return false;
    }
    return true;
}

/* ---- mapping keys */

/* Reads a mapping's key and leaves its value as the current event.
 * Returns the key's index in names, -1 at the end of the mapping, -2 when
 * the key was reported and its value skipped, -3 when the parser died. */
int weir__yp_key(yp *p, const char *const *names, size_t n_names, uint64_t *seen, pos *key_at)
{
    for (;;) {
        if (!weir__yp_next(p))
            return -3;
        if (p->ev.type == YAML_MAPPING_END_EVENT)
            return -1;
        *key_at = weir__yp_here(p);
        int idx = -2;
        if (p->ev.type != YAML_SCALAR_EVENT) {
            ERR(p, *key_at,
                p->ev.type == YAML_ALIAS_EVENT ? "YAML aliases are not supported"
                                               : "mapping keys must be strings");
            if (!weir__yp_skip(p))
                return -3;
        } else {
            const char *k = (const char *)p->ev.data.scalar.value;
            size_t len = p->ev.data.scalar.length;
            for (size_t i = 0; i < n_names; i++) {
                if (strlen(names[i]) == len && memcmp(names[i], k, len) == 0) {
                    idx = (int)i;
                    break;
                }
            }
            if (idx < 0)
                ERR(p, *key_at, "unknown key '%.*s'", len > 100 ? 100 : (int)len, k);
            else if (*seen & (UINT64_C(1) << idx))
                ERR(p, *key_at, "duplicate key '%s'", names[idx]);
            if (idx >= 0 && (*seen & (UINT64_C(1) << idx)))
                idx = -2;
            else if (idx >= 0)
                *seen |= UINT64_C(1) << idx;
        }
        if (!weir__yp_next(p))
            return -3;
        if (idx >= 0)
            return idx;
        if (!weir__yp_skip(p))
            return -3;
    }
}
