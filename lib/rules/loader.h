/*
 * loader.h - the rule tree's private layout and the pieces of the loader
 * (scalar conversions, the YAML walk, the tree builder) shared between
 * the files of lib/rules/.
 *
 * Invariant: everything a weir_rules points to lives in its arena, so one
 * arena release frees the whole tree; a tree handed to a caller has every
 * `*s`/`n_*` array built and every check passed.
 */
#ifndef WEIR_RULES_LOADER_H
#define WEIR_RULES_LOADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/context.h"
#include "weir/rules.h"

typedef struct rules_chunk rules_chunk;

struct weir_rule {
    const char *key;
    const char *value; /* NULL: no value */
    const char *file;
    uint32_t line;
    uint32_t column;
    uint32_t flags;
    bool wildcard;
    bool has_metadata;
    uint64_t seq; /* creation order over the whole load, for stable sorts */
    const weir_rule_limit **limits;
    size_t n_limits;
    weir_rule **children;
    size_t n_children;
    weir_rule *next; /* sibling list while building */
};

/* A list of sibling descriptors while they are being read. */
typedef struct rule_list {
    weir_rule *first;
    weir_rule *last;
    size_t n;
} rule_list;

/* One tier of a domain's tenants section: its name and its body, a
 * descriptor node whose key is the domain's tenant key (no value: each
 * tenant counts apart), with the tier's limits and nested descriptors. */
typedef struct rules_tier {
    const char *name;
    weir_rule *root;
} rules_tier;

/* A domain's `tenants:` section as read (key NULL: none). */
typedef struct rules_tenants {
    const char *key;
    const char *default_tier; /* NULL: keys with no record get the file's limits */
    rules_tier *tiers;
    size_t n_tiers;
    const char *file;
    uint32_t line, column;
    uint32_t default_line, default_column;
} rules_tenants;

struct weir_rules_domain {
    const char *name;
    const char *file;
    uint32_t line;
    uint32_t column;
    rule_list building;
    weir_rule **rules;
    size_t n_rules;
    rules_tenants tenants;
    weir_rules_domain *next;
};

typedef struct rules_warning {
    weir_rules_error w;
    struct rules_warning *next;
} rules_warning;

/* A time zone loaded for calendar limits, once per name per load. */
typedef struct rules_zone {
    const char *name;
    weir_tz *tz;
    struct rules_zone *next;
} rules_zone;

struct weir_rules {
    weir_ctx *ctx;
    rules_zone *zones; /* freed with the tree */
    rules_chunk *chunks;
    weir_rules_domain *first_domain;
    weir_rules_domain *last_domain;
    weir_rules_domain **domains;
    size_t n_domains;
    size_t n_rules;
    size_t n_limits;
    uint64_t next_seq;
    /* warnings of the load (weir_rules_warning_at()), in the order found */
    rules_warning *first_warning, *last_warning;
    weir_rules_error **warnings;
    size_t n_warnings;
};

/* The state of one load: where errors go and the caps in force. */
typedef struct rules_loader {
    weir_rules *rules;
    weir_rules_options opts; /* defaults applied */
    weir_rules_error *errors;
    size_t max_errors;
    size_t n_errors;
    bool nomem;
    bool io_error;
    bool rule_cap_hit;
    bool limit_cap_hit;
} rules_loader;

/* ---- tree.c: arena, errors, domains, the final checks */

/* Zeroed memory from the tree's arena, 16-byte aligned; NULL (and
 * ld->nomem set) when out of memory. */
void *weir__rules_alloc(rules_loader *ld, size_t size);
/* A NUL-terminated arena copy of len bytes. */
char *weir__rules_strndup(rules_loader *ld, const char *s, size_t len);
/* Record a problem; line/column 1-based (0 = none). */
void weir__rules_error(rules_loader *ld, const char *file, uint64_t line, uint64_t column,
                       const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Record a warning: valid, but likely not what was meant. */
void weir__rules_warn(rules_loader *ld, const char *file, uint64_t line, uint64_t column,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* A document's domain and descriptors, once read: merged with an existing
 * domain of that name or reported as a duplicate, per the options. */
void weir__rules_add_domain(rules_loader *ld, const char *name, const char *file, uint32_t line,
                            uint32_t column, rule_list *descriptors, const rules_tenants *tenants);
/* Build the lookup arrays and run the checks that need the whole load
 * (duplicate composite keys). */
void weir__rules_finish(rules_loader *ld);
/* Release a tree's arena and the tree. */
void weir__rules_release(weir_rules *rules);

/* The zone named @name (loaded once per load; NULL for UTC) into *tz;
 * NULL, or a static reason it cannot be used. */
const char *weir__rules_zone(rules_loader *ld, const char *name, const struct weir_tz **tz);

/* ---- values.c: scalar conversions. Each returns NULL on success or a
 * static reason on failure. */

const char *weir__rules_parse_u64(const char *s, uint64_t max, uint64_t *out);
const char *weir__rules_parse_bool(const char *s, bool *out);
const char *weir__rules_parse_duration(const char *s, int64_t *out_us);
/* A share: "0.25", "1" or "25%" into millionths (1 .. 1000000); false
 * when it is not one. */
bool weir__rules_parse_share(const char *s, uint32_t *ppm);
/* Case-insensitive unit name; false when unknown. */
bool weir__rules_parse_unit(const char *s, weir_rule_unit *unit, int64_t *window_us);

/* ---- shed.c: the priorities `shed:` names. Puts the default list in
 * @o when it gives none; false when the list it gives is not one
 * (weir_rules_options.priorities). */
bool weir__rules_priorities(weir_rules_options *o);

/* ---- parse.c: one YAML document into the tree. */
void weir__rules_parse_doc(rules_loader *ld, const char *file, const unsigned char *data,
                           size_t len);

#endif /* WEIR_RULES_LOADER_H */
