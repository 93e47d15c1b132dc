/*
 * ruleset.h - the rules in force as the engine holds them (private to
 * lib/engine): the loaded rules, their match index, and a plan per limit
 * (its identity, and what a decision derives from it under the engine's
 * secret), refcounted so a decision in flight keeps them alive.
 */
#ifndef WEIR_ENGINE_RULESET_H
#define WEIR_ENGINE_RULESET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "engine/adaptive_limits.h"
#include "engine/match.h"
#include "weir/engine.h"

#define SECRET_BYTES 192u
#define DIGEST_BYTES 16u

/* A limit's identity: its domain, the path of nodes to it (each node's key,
 * value and whether its values share a counter, length-prefixed), and the
 * limit's own fields. It names the counter, together with the request
 * values of the levels that count each value apart, and it is what a
 * reload compares: equal identities keep their counters. */
typedef struct ident {
    uint64_t lo, hi;
} ident;

/* A digest's two halves written to `out` in native byte order (it never
 * leaves this process). They are kept in general registers: gcc would
 * otherwise spill them and reload them as one vector, a load no store can
 * forward to, which waits until both stores reach the cache (perf: a sixth
 * of the planning's samples sat on that load). */
static inline void put_digest(unsigned char out[DIGEST_BYTES], uint64_t lo, uint64_t hi)
{
    __asm__("" : "+r"(lo), "+r"(hi));
    memcpy(out, &lo, sizeof(lo));
    memcpy(out + sizeof(lo), &hi, sizeof(hi));
}

/* The 128-bit digest of a counter's bytes under the engine's secret: the
 * store key. */
static inline void counter_digest(const void *bytes, size_t len, const unsigned char *secret,
                                  unsigned char out[DIGEST_BYTES])
{
    XXH128_hash_t h = XXH3_128bits_withSecret(bytes, len, secret, SECRET_BYTES);
    put_digest(out, h.low64, h.high64);
}

/* What a decision needs of one limit beyond the rule file: its identity
 * and a 128-bit word derived from it under the secret. When no level of
 * its path counts request values apart (every level an exact value), that
 * word is the counter's digest, the same for every request that gives no
 * override; otherwise it is the mask of value_digest(). */
typedef struct limit_plan {
    ident id;
    bool fixed;
    unsigned char digest[DIGEST_BYTES];
    /* `sketch:`: the limit's count-min limiter (weir/cms.h), made with
     * the ruleset, or NULL: the store counts it */
    struct weir_cms *cms;
    /* `adaptive:`: the limit's controller (adaptive_limits.h), or NULL */
    struct adaptive_ctl *adaptive;
} limit_plan;

/* Every limit's plan, each rule's in one run in rule order; a rule's run
 * starts at first[rule->seq], so a matched rule finds its limits' plans
 * with one index and no search. */
typedef struct plans {
    size_t *first; /* by rule seq */
    limit_plan *limits;
    size_t n;
    bool replaces; /* some limit names others in `replaces` */
    adaptive_table adaptive;
} plans;

typedef struct ruleset {
    _Atomic int refs;
    weir_ctx *ctx;
    weir_rules *rules;
    weir__match_index *idx;
    plans plans;
    /* the tenant table in force (a reference), or NULL */
    struct weir_tenants *tenants;
    /* A ruleset made for a new tenant table shares the rules, index and
     * plans of the one it followed, holding a reference on their owner;
     * NULL: they are this ruleset's own. */
    struct ruleset *owner;
} ruleset;

/* Rules (taken over on success) compiled into a ruleset with one
 * reference, its plans derived under @secret (SECRET_BYTES). */
weir_status weir__ruleset_new(weir_ctx *ctx, weir_rules *rules, const unsigned char *secret,
                              ruleset **out);
/* A ruleset with @base's rules and @tenants (a reference is taken; may be
 * NULL), with one reference. */
weir_status weir__ruleset_with_tenants(ruleset *base, struct weir_tenants *tenants, ruleset **out);
/* Drop a reference; the last frees the ruleset. NULL is a no-op. */
void weir__ruleset_release(ruleset *rs);
/* The snapshot's destructor of a ruleset it replaced. */
void weir__ruleset_snap_destroy(void *ud, void *obj);
/* Log how many limits keep their counters from @old to @next. */
void weir__ruleset_report_reload(weir_ctx *ctx, const ruleset *old, const ruleset *next);

#endif /* WEIR_ENGINE_RULESET_H */
