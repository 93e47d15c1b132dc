/*
 * stat_key.h - envoyproxy/ratelimit's stat key of a decided descriptor
 * (`domain.key_value.key2...`, built level by level as upstream builds
 * it: from the rule's levels, or from the request's values under
 * detailed_metric, value_to_metric or a request's own limit), and
 * upstream's sanitising of stat names.
 *
 * A key is kept raw and split: the domain and each level are separate
 * NUL-terminated strings, so a value holding dots (`10.0.0.1`, `v1.2`)
 * stays in its level; names and labels are sanitised when written out.
 */
#ifndef WEIR_DAEMON_STAT_KEY_H
#define WEIR_DAEMON_STAT_KEY_H

#include <stdbool.h>
#include <stddef.h>

#include "weir/weir.h"

/** Longest stat key kept, NULs included; a longer one (long request
 *  values) is counted under its domain's `_overflow` key. */
#define STAT_KEY_MAX_BYTES 2048u

typedef struct stat_key {
    /** The domain, then each level, each NUL-terminated, @len bytes in
     *  all; NUL bytes of a key or value are written as '_'. */
    char text[STAT_KEY_MAX_BYTES];
    size_t len;
    unsigned n_levels;
    /** Some level holds a request's value (detailed_metric,
     *  value_to_metric, a request's own limit): series made of such keys
     *  have a cap of their own. */
    bool from_request;
} stat_key;

/**
 * stat_key_build() - the stat key of descriptor @d, decided by @limit
 * (a limit of the rule it matched, or the engine's limit for the
 * request's own override).
 *
 * As upstream: a descriptor with its own limit is named by its entries
 * (`key_value`, or `key` for an empty value); a limit whose node has
 * detailed_metric by the request's entries (`key_value` each, or, when a
 * level has share_threshold, that level's pattern); otherwise by the
 * rule's levels (`key_value` or `key`), except that a level with
 * value_to_metric matched by its default or a pattern takes the
 * request's value. The key never exceeds STAT_KEY_MAX_BYTES: a longer
 * one becomes `domain` `_overflow`. Always succeeds.
 */
void stat_key_build(stat_key *k, const weir_rule_limit *limit, const weir_descriptor *d);

/** The key `domain` `_overflow` that series past a cap are counted in. */
void stat_key_overflow(stat_key *k, const char *domain);

/**
 * stat_sanitize() - upstream's SanitizeStatName in place on @s (@n
 * bytes): ':' and '|' become '_', and so do the dots of every IPv4
 * address (four runs of 1 to 3 digits joined by dots, found left to
 * right as Go's regexp finds them); control bytes become '_' too, so a
 * name can neither break a statsd line nor a Prometheus label.
 */
void stat_sanitize(char *s, size_t n);

#endif /* WEIR_DAEMON_STAT_KEY_H */
