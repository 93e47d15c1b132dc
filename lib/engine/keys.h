/*
 * keys.h - counter keys for stores shared between processes: the same
 * counter has the same bytes in every process and after a restart
 * (docs/ARCHITECTURE.md, "Counter keys", gives the format operators see).
 */
#ifndef WEIR_ENGINE_KEYS_H
#define WEIR_ENGINE_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/match.h"
#include "weir/engine.h"

/** Longest stable key: long values are hashed, and a key that would still
 *  be longer has its values hashed as a whole. */
#define WEIR__STABLE_KEY_MAX 512u

/* What names one counter: the limit's identity (a 128-bit digest of the
 * domain, the rule path and the limit's fields, the same in every process
 * on a little-endian host), the request values of the levels that count
 * values apart, and the request's override of the limit. */
typedef struct weir__counter_name {
    const char *domain;
    size_t domain_len;
    uint64_t id_lo, id_hi;
    const weir__match_result *m;
    const weir_entry *entries;
    bool override;
    uint32_t rpu;
    int64_t window_us;
} weir__counter_name;

/**
 * weir__stable_key() - the stable key of @n into @out (at least
 * WEIR__STABLE_KEY_MAX bytes). Returns its length, never 0, at most
 * WEIR__STABLE_KEY_MAX. Thread-safe.
 */
size_t weir__stable_key(const weir__counter_name *n, char *out);

#endif /* WEIR_ENGINE_KEYS_H */
