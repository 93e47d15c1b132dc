/*
 * match.h - descriptor matching: a loaded rule tree compiled into a match
 * index, the lookup of one request descriptor in it (envoyproxy/ratelimit's
 * rules: exact value, else the first `*` pattern in file order, else the
 * key's default; no backtracking; depths must agree), and the unambiguous
 * counter key of a matched limit.
 *
 * Invariant: an index is immutable once built and a lookup allocates
 * nothing, so any number of threads may match against one index at once.
 * Keys and values are byte strings with explicit lengths everywhere; no
 * byte ('_', '.', NUL) is special, so different (key, value) paths never
 * meet in a hash slot or in a counter key.
 */
#ifndef WEIR_ENGINE_MATCH_H
#define WEIR_ENGINE_MATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/context.h"
#include "weir/engine.h"
#include "weir/rules.h"
#include "weir/status.h"

/** Most entries one request descriptor may carry (more is WEIR_EINVAL). */
#define WEIR__MATCH_MAX_ENTRIES 64u
/** Deepest descriptor tree an index accepts, hence the most levels a match
 *  can have. */
#define WEIR__MATCH_MAX_DEPTH WEIR_RULES_MAX_DEPTH

typedef struct weir__match_index weir__match_index;

/** One entry of a request descriptor. The bytes are borrowed for the call;
 *  they need not be NUL-terminated and may contain any byte. A NULL pointer
 *  is allowed only with a zero length. */
typedef struct weir__entry {
    const char *key;
    size_t key_len;
    const char *value;
    size_t value_len;
} weir__entry;

/** How one level of a request was matched. */
typedef enum weir__match_kind {
    WEIR__MATCH_EXACT = 1,    /* the node's value equals the request's */
    WEIR__MATCH_WILDCARD = 2, /* the node's `*` pattern matched the value */
    WEIR__MATCH_DEFAULT = 3   /* the node has the key and no value */
} weir__match_kind;

/** One matched level. */
typedef struct weir__match_level {
    /** The node matched at this level (never NULL in a recorded level). */
    const weir_rule *rule;
    weir__match_kind kind;
    /** Whether the request's value is part of the counter: true for a
     *  default, and for a pattern without share_threshold (each distinct
     *  value counts apart); false for an exact value (the node's value is
     *  used) and a share_threshold pattern (all values share the pattern's
     *  counter). */
    bool value_in_key;
} weir__match_level;

/** The outcome of weir__match(). */
typedef struct weir__match_result {
    /** Whether the request's domain is configured. */
    bool domain_found;
    /** The configured domain when found, else NULL. */
    const weir_rules_domain *domain;
    /** The node matched by the request's LAST entry when every entry
     *  matched, else NULL. A node with no limits (a whitelist, or an
     *  intermediate node reached by a shorter request) is still reported:
     *  it means "no limit". */
    const weir_rule *rule;
    /** Levels recorded in @levels: the request's entry count on a match;
     *  on a miss, how many entries matched before the walk stopped. */
    size_t depth;
    weir__match_level levels[WEIR__MATCH_MAX_DEPTH];
} weir__match_result;

/**
 * weir__match_index_new() - compile loaded rules into a match index.
 *
 * @ctx:   allocator of the index; must outlive it.
 * @rules: borrowed; must outlive the index (results point into it).
 * @out:   written only on success; free with weir__match_index_free().
 *
 * Every domain and every node of every depth is indexed: domains by name,
 * a node's children by key, then a key's exact children by value, each
 * found by a short scan or one hash lookup, with the key's default and its
 * pattern children in file order. If two siblings had the same exact
 * (key, value) or two defaults the same key (the loader rejects both), the
 * first in file order wins.
 *
 * Returns WEIR_OK; WEIR_EINVAL for a NULL argument; WEIR_ERANGE when the
 * tree is deeper than WEIR__MATCH_MAX_DEPTH or has more than UINT32_MAX/4
 * nodes; WEIR_ENOMEM (nothing is leaked). Thread-safe.
 */
weir_status weir__match_index_new(weir_ctx *ctx, const weir_rules *rules, weir__match_index **out);

/** Free an index. NULL is a no-op. Results of earlier matches stay valid
 *  (they point into the rules, not the index). */
void weir__match_index_free(weir__match_index *idx);

/**
 * weir__match() - match one request descriptor.
 *
 * @idx:        the index.
 * @domain:     the request's domain, @domain_len bytes (not NUL-terminated
 *              necessarily); compared byte for byte. An empty domain is
 *              simply not found.
 * @entries:    the descriptor's @n entries, in request order.
 * @out:        written only on success.
 *
 * Walks the entries level by level from the domain's top level. At each
 * level it takes the child with exactly this key and value; else the first
 * child in file order with this key whose `*` pattern matches the value;
 * else the child with this key and no value. It never backtracks: when a
 * deeper level finds no child there is no match, even if another choice at
 * a shallower level would have led to one.
 *
 * Returns WEIR_OK, with out->domain_found false for an unknown domain and
 * out->rule NULL when nothing matched; WEIR_EINVAL for a NULL @idx,
 * @domain, @entries or @out, an entry with a NULL pointer and a non-zero
 * length, @n == 0 or @n > WEIR__MATCH_MAX_ENTRIES. Allocates nothing.
 * Thread-safe.
 */
weir_status weir__match(const weir__match_index *idx, const char *domain, size_t domain_len,
                        const weir__entry *entries, size_t n, weir__match_result *out);

/** A domain's top level in an index, found once for all the descriptors
 *  of a request: weir__match_domain_find() gives it (NULL for an unknown or
 *  empty domain). Allocates nothing; thread-safe. */
typedef struct weir__match_domain weir__match_domain;

const weir__match_domain *weir__match_domain_find(const weir__match_index *idx, const char *domain,
                                                  size_t domain_len);

/** weir__match() for a caller that has found the domain and checked the
 *  entries itself: @dom not NULL, @n in 1..WEIR__MATCH_MAX_ENTRIES, no
 *  entry with a NULL pointer and a non-zero length. Same rules and result
 *  as weir__match(); checks nothing, allocates nothing; thread-safe. */
void weir__match_walk(const weir__match_index *idx, const weir__match_domain *dom,
                      const weir__entry *entries, size_t n, weir__match_result *out);

/** weir__match_walk() told for a person (weir_engine_explain()): the
 *  same walk, recording how each entry matched and, when no limit was
 *  reached, where the walk stopped and why. @dom may be NULL (an unknown
 *  domain); the other arguments as weir__match_walk(). */
void weir__match_explain(const weir__match_index *idx, const weir__match_domain *dom,
                         const weir__entry *entries, size_t n, weir_match_trace *out);

/**
 * weir__glob_match() - whether @value matches @pattern, where each `*` in
 * the pattern matches any run of bytes (possibly empty) and every other
 * byte matches itself. Iterative; at most O(pattern * value) steps, without
 * any exponential backtracking. Exposed for the tests.
 */
bool weir__glob_match(const char *pattern, size_t pattern_len, const char *value, size_t value_len);

/** Longest counter key weir__counter_key() can produce for strings within
 *  the loader's caps and WEIR__MATCH_MAX_DEPTH levels of request values of
 *  at most WEIR_RULES_MAX_STRING_BYTES each. Callers whose request values
 *  may be longer must size their buffer for them. */
#define WEIR__COUNTER_KEY_MAX_BYTES                   \
    (64u + 5u * (size_t)WEIR_RULES_MAX_STRING_BYTES + \
     (size_t)WEIR__MATCH_MAX_DEPTH * (16u + 3u * (size_t)WEIR_RULES_MAX_STRING_BYTES))

/**
 * weir__counter_key() - the bytes identifying the counter of one limit of
 * a match, readable and stable across processes. The engine names its
 * memory-store counters by a digest of each limit's precomputed identity
 * instead (faster); this form is for stores shared between processes, whose
 * keys must not depend on a per-process secret.
 *
 * @m:           a successful match (m->rule not NULL).
 * @entries:     the request entries @m was matched from (their values are
 *               used for default and pattern levels).
 * @limit_index: which limit of m->rule.
 * @buf, @cap:   the output; @buf may be NULL only when @cap is 0.
 *
 * Every field is length-prefixed (32-bit big-endian) or fixed-width, so
 * the encoding is injective: a format version, the domain, the depth, then
 * per level the node's key, how it matched and its value part (exact: the
 * node's value; default: the request's value; pattern: the pattern and the
 * request's value; share_threshold pattern: the pattern alone), then the
 * limit's identity (index on its node, algorithm, requests_per_unit,
 * window_us, burst, sub_windows, unlimited, name). No pointer or load-order
 * number is used, so a rule unchanged across a reload keeps its counter.
 *
 * Returns the key's length, or 0 when @m has no rule, @limit_index is out
 * of range, an argument is NULL, or the key does not fit in @cap (the
 * buffer's content is then unspecified). Thread-safe.
 */
size_t weir__counter_key(const weir__match_result *m, const weir__entry *entries,
                         size_t limit_index, char *buf, size_t cap);

#endif /* WEIR_ENGINE_MATCH_H */
