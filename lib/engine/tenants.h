/*
 * tenants.h - the tenant table as the engine holds it (private to
 * lib/engine): records found by key in one hash probe, each with its
 * overrides compiled, and what resolves a descriptor's limits across the
 * three layers (override, tier, rule file; weir/tenants.h).
 *
 * Invariant: a table is immutable once sealed (weir__tenants_seal()), so
 * any number of threads read it without locking; it is refcounted, and a
 * ruleset in force holds a reference. Records never move once added (a
 * key added again gets a new record; the old one stays unreferenced).
 */
#ifndef WEIR_ENGINE_TENANTS_H
#define WEIR_ENGINE_TENANTS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/match.h"
#include "engine/ruleset.h"
#include "weir/tenants.h"

/* One override as a decision reads it: the fields put_pick() and
 * override_limit() read first, then its plan, then the compiled limit. */
typedef struct tenant_limit {
    bool is_default;   /* scope "default" */
    uint8_t calendar;  /* weir_calendar */
    uint8_t unit;      /* weir_rule_unit */
    uint8_t algorithm; /* as given; 0 = the replaced limit's */
    uint32_t requests_per_unit;
    int64_t window_us;
    uint32_t skey_len, svalue_len; /* a "key:value" scope: scope[0, skey_len), then ':' */
    const char *scope;             /* "default" or "key:value", NUL-terminated */
    limit_plan plan;               /* its counter's identity and digest (seal) */
    weir_limit compiled;           /* under algorithm, or fixed_window */
    const char *time_zone;         /* a calendar period's zone, or NULL (UTC) */
    weir_tz *tz;
} tenant_limit;

/* A tenant's record: one block holding the record, its key and tier's
 * name, its limits and their scopes, so that a decision reads adjacent
 * cache lines rather than four arrays (about half the memory, too). */
typedef struct tenant_rec {
    const char *key;            /* right after the record */
    const char *tier;           /* NULL: the domain's default */
    const tenant_limit *limits; /* n of them */
    int64_t effective_at_us, expires_at_us;
    uint32_t key_len, n;
} tenant_rec;

/* A hash slot: a record's key hash and the record (NULL: empty). */
typedef struct tenant_slot {
    uint64_t hash;
    const tenant_rec *rec;
} tenant_slot;

struct weir_tenants {
    weir_ctx *ctx;
    _Atomic int refs;
    bool sealed;
    size_t n_recs;
    tenant_slot *slots; /* a power of 2, at most half full */
    size_t mask;
    struct tenant_chunk *chunks; /* the records and strings */
    struct tenant_zone *zones;   /* the calendar overrides' zones */
    size_t chunk_left;
    char *chunk_at;
};

/* Derive every override's counter digest under the engine's @secret; the
 * table is immutable from now on. */
void weir__tenants_seal(weir_tenants *t, const unsigned char *secret);
/* Take and drop a reference (the last drop frees). NULL is a no-op. */
void weir__tenants_hold(weir_tenants *t);
void weir__tenants_release(weir_tenants *t);

/* The record of key @key (@len bytes), or NULL. */
const tenant_rec *weir__tenants_find(const weir_tenants *t, const char *key, size_t len);

/* ---- resolution */

/* Where a descriptor's limit comes from. */
typedef enum tenant_layer { LAYER_FILE = 0, LAYER_TIER = 1, LAYER_OVERRIDE = 2 } tenant_layer;

/* One limit a tenant descriptor is decided by. */
typedef struct tenant_pick {
    tenant_layer layer;
    const weir_rule_limit *limit; /* the file's, the tier's, or NULL (override) */
    const limit_plan *lp;         /* its plan (NULL for an override) */
    const tenant_limit *over;     /* the override, or NULL */
    const weir_rule_limit *under; /* what an override replaced, or NULL */
} tenant_pick;

/* The index of the descriptor's tenant entry (the first whose key is
 * @tkey), or -1. */
int weir__tenant_entry(const weir__entry *entries, size_t n, const char *tkey);

/**
 * weir__tenant_resolve() - the limits of a descriptor whose entry @t is
 * its tenant's key, in domain @dom: the rule file's (@file_rule, matched
 * by the whole descriptor; may be NULL), replaced window by window by the
 * tier's (matched by entries @t .. @n into @tier_m), replaced by the
 * tenant's overrides in force at @now_us. @tier_rule receives the tier
 * node matched, or NULL; @tier_name the tenant's tier (its record's, else
 * the default tier), or NULL when it has none. Returns how many picks were written to @out (at
 * most @cap; more are dropped).
 */
size_t weir__tenant_resolve(const ruleset *rs, const weir_rules_domain *dom,
                            const weir_rule *file_rule, const weir__entry *entries, size_t n,
                            size_t t, int64_t now_us, weir__match_result *tier_m,
                            const weir_rule **tier_rule, const char **tier_name, tenant_pick *out,
                            size_t cap);

#endif /* WEIR_ENGINE_TENANTS_H */
