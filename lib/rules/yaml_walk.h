/*
 * yaml_walk.h - the walk over libyaml's event stream that the rule-file
 * readers share (parse.c: limits, descriptors, the document; tenants.c:
 * the tenants section): pulling events, skipping nodes, reading scalars
 * and mapping keys, each problem recorded with its position.
 */
#ifndef WEIR_RULES_YAML_WALK_H
#define WEIR_RULES_YAML_WALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <yaml.h>

#include "rules/loader.h"

typedef struct yp {
    rules_loader *ld;
    const char *file;
    const unsigned char *data; /* the document, for positions of encoding errors */
    size_t len;
    yaml_parser_t parser;
    yaml_event_t ev;
    bool have_ev; /* ev holds an event to delete */
    bool dead;    /* syntax error or out of memory: stop reading */
} yp;

/* A position in the document, 1-based. */
typedef struct pos {
    uint64_t line;
    uint64_t col;
} pos;

#define ERR(p, at, ...) weir__rules_error((p)->ld, (p)->file, (at).line, (at).col, __VA_ARGS__)

/* The position of the current event. */
pos weir__yp_here(const yp *p);
/* The next event; false when the parser died (reported) or memory ran out. */
bool weir__yp_next(yp *p);
/* Consume the node whose first event is current. Aliases inside are
 * passed over, never resolved. */
bool weir__yp_skip(yp *p);
/* Whether the current event is a plain null scalar ("", "~", "null"). */
bool weir__yp_is_null(const yp *p);
/* Report a node of the wrong kind and consume it. */
bool weir__yp_wrong_kind(yp *p, const char *field, const char *kind);
/* The current scalar as an arena string of at most max bytes, or NULL
 * for another kind of node, an embedded NUL or a long string (reported),
 * or when out of memory. */
const char *weir__yp_string(yp *p, const char *field, size_t max);
/* The current scalar as a C string for a conversion (NULL when it is not
 * a scalar, reported). Points into the event: valid until the next one. */
const char *weir__yp_scalar(yp *p, const char *field);
bool weir__yp_bool(yp *p, const char *field, bool *out);
bool weir__yp_u64(yp *p, const char *field, uint64_t max, uint64_t *out);
/* Reads a mapping's key and leaves its value as the current event.
 * Returns the key's index in names, -1 at the end of the mapping, -2 when
 * the key was reported and its value skipped, -3 when the parser died. */
int weir__yp_key(yp *p, const char *const *names, size_t n_names, uint64_t *seen, pos *key_at);

/* ---- the readers of the schema that other readers call */

/* parse.c: one descriptor mapping (a tier's body when @tier), a list of
 * them. False only when the parser died. */
bool weir__rules_read_descriptor(yp *p, unsigned depth, bool tier, weir_rule **out);
bool weir__rules_read_descriptors(yp *p, rule_list *out, unsigned depth);
/* tenants.c: a domain's `tenants:` mapping into @out. False only when the
 * parser died. */
bool weir__rules_read_tenants(yp *p, rules_tenants *out);
/* adaptive.c: a limit's `adaptive:` mapping into l->adaptive (false only
 * when the parser died); then, once the whole limit is read, what it
 * requires of the limit (a concurrency limit, min <= initial <= most). */
bool weir__rules_read_adaptive(yp *p, weir_rule_limit *l);
void weir__rules_check_adaptive(yp *p, weir_rule_limit *l, pos at);
/* shed.c: a limit's `shed:` mapping into l->shed_bp. False only when the
 * parser died. */
bool weir__rules_read_shed(yp *p, weir_rule_limit *l);

#endif /* WEIR_RULES_YAML_WALK_H */
