/*
 * ruleset.c - the rules in force as the engine holds them (ruleset.h):
 * each limit's identity, which names its counters and says across a
 * reload which counters carry over, and the plan a decision reads.
 */
#include "engine/ruleset.h"

#include <stdlib.h>
#include <string.h>

#include "core/context.h"
#include "engine/tenants.h"
#include "rules/loader.h"
#include "weir/cms.h"

static ident identity(const char *domain, const unsigned char *path, size_t path_len,
                      const weir_rule_limit *l, size_t index)
{
    XXH3_state_t s;
    XXH3_128bits_reset(&s);
    XXH3_128bits_update(&s, domain, strlen(domain) + 1);
    XXH3_128bits_update(&s, path, path_len);
    uint64_t fields[7] = {index,       l->algorithm,           l->requests_per_unit,
                          l->burst,    (uint64_t)l->window_us, l->sub_windows,
                          l->unlimited};
    XXH3_128bits_update(&s, fields, sizeof(fields));
    if (l->warmup_us) {
        /* another state shape: a counter of its own; limits without a
         * warm-up keep the identity they always had */
        uint64_t warm[2] = {(uint64_t)l->warmup_us, l->cold_factor};
        XXH3_128bits_update(&s, warm, sizeof(warm));
    }
    if (l->name)
        XXH3_128bits_update(&s, l->name, strlen(l->name) + 1);
    XXH128_hash_t h = XXH3_128bits_digest(&s);
    return (ident){h.low64, h.high64};
}

/* Path bytes for the deepest tree the loader accepts. */
#define PATH_CAP (WEIR_RULES_MAX_DEPTH * (10u + 2u * WEIR_RULES_MAX_STRING_BYTES) + 128u)

static void put_len(unsigned char *p, uint32_t v)
{
    memcpy(p, &v, sizeof(v));
}

typedef struct plan_build {
    plans *pl;
    size_t cap;
    const unsigned char *secret;
    unsigned char *path;
    weir_ctx *ctx;
    weir_status err; /* a sketch that could not be made */
} plan_build;

/* Walk a node: append it to the path and plan its limits. `fixed`: every
 * level above it is an exact value. */
static void collect(plan_build *b, const char *domain, const weir_rule *r, size_t len, bool fixed)
{
    const char *k = r->key, *v = r->value;
    size_t kl = strlen(k), vl = v ? strlen(v) : 0;
    size_t need = 4 + kl + 1 + 4 + vl + 1;
    if (len + need > PATH_CAP)
        return; /* deeper than the loader allows */
    unsigned char *p = b->path + len;
    put_len(p, (uint32_t)kl);
    memcpy(p + 4, k, kl);
    p[4 + kl] = v ? 1 : 0;
    put_len(p + 5 + kl, (uint32_t)vl);
    if (v)
        memcpy(p + 9 + kl, v, vl);
    p[9 + kl + vl] = (r->flags & WEIR_RULE_SHARE_THRESHOLD) ? 1 : 0;
    size_t n = len + need;
    fixed = fixed && v && !r->wildcard;
    plans *pl = b->pl;
    pl->first[r->seq] = pl->n;
    for (size_t i = 0; i < r->n_limits && pl->n < b->cap; i++) {
        const weir_rule_limit *l = r->limits[i];
        limit_plan *lp = &pl->limits[pl->n++];
        lp->id = identity(domain, b->path, n, l, i);
        lp->fixed = fixed;
        /* a fixed counter's bytes are its identity alone (counter_bytes);
         * a mask is the digest of 17 bytes, so it is no fixed digest */
        unsigned char mask[sizeof(lp->id) + 1];
        memcpy(mask, &lp->id, sizeof(lp->id));
        mask[sizeof(lp->id)] = 'V';
        counter_digest(mask, fixed ? sizeof(lp->id) : sizeof(mask), b->secret, lp->digest);
        pl->replaces |= l->n_replaces > 0;
        lp->cms = NULL;
        if (l->sketch_bytes && !l->unlimited && b->err == WEIR_OK) {
            weir_cms_options o = {.size = sizeof(o),
                                  .limit = l->requests_per_unit,
                                  .window_us = l->window_us,
                                  .memory_bytes = l->sketch_bytes};
            b->err = weir_cms_new(b->ctx, &o, &lp->cms);
        }
        lp->adaptive = NULL;
        if (l->adaptive && !l->unlimited && b->err == WEIR_OK) {
            /* the jitter's seed differs between instances (each has its
             * own secret), so that they do not probe together */
            uint64_t seed =
                XXH3_64bits_withSecret(&lp->id, sizeof(lp->id), b->secret, SECRET_BYTES);
            b->err = weir__adaptive_add(b->ctx, &pl->adaptive, l, lp->id.lo ? lp->id.lo : 1, seed,
                                        &lp->adaptive);
        }
    }
    for (size_t i = 0; i < r->n_children; i++)
        collect(b, domain, r->children[i], n, fixed);
}

static void plans_free(weir_ctx *ctx, plans *pl)
{
    for (size_t i = 0; pl->limits && i < pl->n; i++)
        weir_cms_free(pl->limits[i].cms);
    weir__adaptive_table_free(ctx, &pl->adaptive);
    weir__free(ctx, pl->first);
    weir__free(ctx, pl->limits);
    memset(pl, 0, sizeof(*pl));
}

static weir_status plans_build(weir_ctx *ctx, const weir_rules *rules, const unsigned char *secret,
                               plans *pl)
{
    size_t cap = weir_rules_limit_count(rules);
    memset(pl, 0, sizeof(*pl));
    pl->first = weir__calloc(ctx, rules->next_seq ? rules->next_seq : 1, sizeof(*pl->first));
    pl->limits = weir__calloc(ctx, cap ? cap : 1, sizeof(*pl->limits));
    unsigned char *path = weir__malloc(ctx, PATH_CAP);
    if (!pl->first || !pl->limits || !path) {
        weir__free(ctx, pl->first);
        weir__free(ctx, pl->limits);
        weir__free(ctx, path);
        return WEIR_ENOMEM;
    }
    plan_build b = {pl, cap, secret, path, ctx, WEIR_OK};
    for (size_t d = 0; d < weir_rules_domain_count(rules); d++) {
        const weir_rules_domain *dom = weir_rules_domain_at(rules, d);
        for (size_t i = 0; i < weir_rules_domain_rule_count(dom); i++)
            collect(&b, weir_rules_domain_name(dom), weir_rules_domain_rule(dom, i), 0, true);
        /* a tier's limits are named apart from the file's by a first
         * path element no descriptor level can spell (a zero key length
         * with a value flag of 2) and the tier's name */
        for (size_t i = 0; i < dom->tenants.n_tiers; i++) {
            const char *name = dom->tenants.tiers[i].name;
            size_t nl = strlen(name);
            put_len(path, 0);
            path[4] = 2;
            put_len(path + 5, (uint32_t)nl);
            memcpy(path + 9, name, nl);
            collect(&b, weir_rules_domain_name(dom), dom->tenants.tiers[i].root, 9 + nl, false);
        }
    }
    weir__free(ctx, path);
    weir__adaptive_seal(&pl->adaptive);
    if (b.err != WEIR_OK)
        plans_free(ctx, pl);
    return b.err;
}

static int cmp_ident(const void *a, const void *b)
{
    const ident *x = a, *y = b;
    if (x->hi != y->hi)
        return x->hi < y->hi ? -1 : 1;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

/* The limits' identities, sorted (NULL when out of memory). */
static ident *sorted_ids(weir_ctx *ctx, const plans *pl)
{
    ident *v = weir__malloc(ctx, (pl->n ? pl->n : 1) * sizeof(*v));
    if (!v)
        return NULL;
    for (size_t i = 0; i < pl->n; i++)
        v[i] = pl->limits[i].id;
    qsort(v, pl->n, sizeof(*v), cmp_ident);
    return v;
}

/* ------------------------------------------------------------------ rulesets */

void weir__ruleset_release(ruleset *rs)
{
    if (rs && atomic_fetch_sub(&rs->refs, 1) == 1) {
        if (rs->owner) {
            weir__ruleset_release(rs->owner);
        } else {
            weir__match_index_free(rs->idx);
            plans_free(rs->ctx, &rs->plans);
            weir_rules_free(rs->rules);
        }
        weir__tenants_release(rs->tenants);
        weir__free(rs->ctx, rs);
    }
}

weir_status weir__ruleset_with_tenants(ruleset *base, struct weir_tenants *tenants, ruleset **out)
{
    ruleset *rs = weir__calloc(base->ctx, 1, sizeof(*rs));
    if (!rs)
        return WEIR_ENOMEM;
    ruleset *owner = base->owner ? base->owner : base;
    atomic_fetch_add(&owner->refs, 1);
    weir__tenants_hold(tenants);
    rs->ctx = base->ctx;
    rs->rules = base->rules;
    rs->idx = base->idx;
    rs->plans = base->plans;
    rs->owner = owner;
    rs->tenants = tenants;
    atomic_init(&rs->refs, 1);
    *out = rs;
    return WEIR_OK;
}

void weir__ruleset_snap_destroy(void *ud, void *obj)
{
    (void)ud;
    weir__ruleset_release(obj);
}

weir_status weir__ruleset_new(weir_ctx *ctx, weir_rules *rules, const unsigned char *secret,
                              ruleset **out)
{
    ruleset *rs = weir__calloc(ctx, 1, sizeof(*rs));
    if (!rs)
        return WEIR_ENOMEM;
    weir_status st = weir__match_index_new(ctx, rules, &rs->idx);
    if (st == WEIR_OK && (st = plans_build(ctx, rules, secret, &rs->plans)) != WEIR_OK)
        weir__match_index_free(rs->idx);
    if (st != WEIR_OK) {
        weir__free(ctx, rs);
        return st;
    }
    rs->ctx = ctx;
    rs->rules = rules;
    atomic_init(&rs->refs, 1);
    *out = rs;
    return WEIR_OK;
}

/* Log how many limits keep their counters across a reload. */
void weir__ruleset_report_reload(weir_ctx *ctx, const ruleset *old, const ruleset *next)
{
    ident *a = sorted_ids(ctx, &old->plans), *b = sorted_ids(ctx, &next->plans);
    if (a && b) {
        size_t i = 0, j = 0, kept = 0, na = old->plans.n, nb = next->plans.n;
        while (i < na && j < nb) {
            int c = cmp_ident(&a[i], &b[j]);
            kept += c == 0;
            i += c <= 0;
            j += c >= 0;
        }
        weir__log(ctx, WEIR_LOG_INFO,
                  "event=rules_reloaded limits=%zu kept=%zu new=%zu removed=%zu", nb, kept,
                  nb - kept, na - kept);
    }
    weir__free(ctx, a);
    weir__free(ctx, b);
}
