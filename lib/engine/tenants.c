/*
 * tenants.c - the tenant table (weir/tenants.h, tenants.h): records in an
 * open-addressed hash of their keys, their overrides compiled as they are
 * added, and the resolution of a tenant descriptor's limits across the
 * override, tier and rule-file layers.
 */
#include "engine/tenants.h"

#include <stdlib.h>
#include <string.h>

#include "core/context.h"
#include "rules/loader.h"

#define US_PER_S 1000000LL
#define CHUNK_BYTES 65536u

/* A zone loaded for the table's calendar overrides, once per name. */
typedef struct tenant_zone {
    const char *name;
    weir_tz *tz;
    struct tenant_zone *next;
} tenant_zone;

typedef struct tenant_chunk {
    struct tenant_chunk *next;
    char bytes[];
} tenant_chunk;

/* ------------------------------------------------------------ building */

weir_status weir_tenants_new(weir_ctx *ctx, weir_tenants **out)
{
    if (!ctx || !out)
        return WEIR_EINVAL;
    weir_tenants *t = weir__calloc(ctx, 1, sizeof(*t));
    if (!t)
        return WEIR_ENOMEM;
    t->ctx = ctx;
    atomic_init(&t->refs, 1);
    *out = t;
    return WEIR_OK;
}

static void tenants_destroy(weir_tenants *t)
{
    for (struct tenant_zone *z = t->zones, *next; z; z = next) {
        next = z->next;
        weir_tz_free(z->tz);
        weir__free(t->ctx, z);
    }
    for (tenant_chunk *c = t->chunks, *next; c; c = next) {
        next = c->next;
        weir__free(t->ctx, c);
    }
    weir__free(t->ctx, t->recs);
    weir__free(t->ctx, t->limits);
    weir__free(t->ctx, t->slots);
    weir__free(t->ctx, t);
}

void weir_tenants_free(weir_tenants *t)
{
    if (t)
        weir__tenants_release(t);
}

void weir__tenants_hold(weir_tenants *t)
{
    if (t)
        atomic_fetch_add(&t->refs, 1);
}

void weir__tenants_release(weir_tenants *t)
{
    if (t && atomic_fetch_sub(&t->refs, 1) == 1)
        tenants_destroy(t);
}

size_t weir_tenants_count(const weir_tenants *t)
{
    return t ? t->n_recs : 0;
}

/* @len bytes of @s and a NUL, in the table's chunks. */
static const char *keep(weir_tenants *t, const char *s, size_t len)
{
    if (len + 1 > t->chunk_left) {
        size_t size = len + 1 > CHUNK_BYTES ? len + 1 : CHUNK_BYTES;
        tenant_chunk *c = weir__malloc(t->ctx, sizeof(*c) + size);
        if (!c)
            return NULL;
        c->next = t->chunks;
        t->chunks = c;
        t->chunk_at = c->bytes;
        t->chunk_left = size;
    }
    char *p = t->chunk_at;
    if (len)
        memcpy(p, s, len);
    p[len] = '\0';
    t->chunk_at += len + 1;
    t->chunk_left -= len + 1;
    return p;
}

static uint64_t key_hash(const char *key, size_t len)
{
    return XXH3_64bits(key, len);
}

static uint32_t *slot_of(const weir_tenants *t, const char *key, size_t len, uint64_t h)
{
    size_t i = (size_t)h & t->mask;
    for (;;) {
        uint32_t *s = &t->slots[i];
        if (*s == 0)
            return s;
        const tenant_rec *r = &t->recs[*s - 1];
        if (r->hash == h && r->key_len == len && memcmp(r->key, key, len) == 0)
            return s;
        i = (i + 1) & t->mask;
    }
}

/* Room for one more record in the hash (kept at most half full). */
static bool grow_slots(weir_tenants *t)
{
    size_t cap = t->slots ? t->mask + 1 : 0;
    if ((t->n_recs + 1) * 2 <= cap)
        return true;
    size_t ncap = cap ? cap * 2 : 64;
    uint32_t *slots = weir__calloc(t->ctx, ncap, sizeof(*slots));
    if (!slots)
        return false;
    weir__free(t->ctx, t->slots);
    t->slots = slots;
    t->mask = ncap - 1;
    for (size_t i = 0; i < t->n_recs; i++) {
        const tenant_rec *r = &t->recs[i];
        *slot_of(t, r->key, r->key_len, r->hash) = (uint32_t)i + 1;
    }
    return true;
}

static bool reserve(weir_ctx *ctx, void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return true;
    size_t ncap = *cap ? *cap * 2 : 64;
    while (ncap < need)
        ncap *= 2;
    void *np = weir__malloc(ctx, ncap * size);
    if (!np)
        return false;
    if (*cap)
        memcpy(np, *p, *cap * size);
    weir__free(ctx, *p);
    *p = np;
    *cap = ncap;
    return true;
}

/* The window a limit is known by within its scope: the same number for
 * two limits that replace each other. */
static int64_t window_id(const weir_rule_limit *l)
{
    return l->calendar != WEIR_CALENDAR_NONE ? -(int64_t)l->calendar : l->window_us;
}

static int64_t unit_window_us(weir_rule_unit u)
{
    static const int64_t s[] = {0, 1, 60, 3600, 86400, 30 * 86400, 365 * 86400, 7 * 86400};
    return (unsigned)u < sizeof(s) / sizeof(s[0]) ? s[u] * US_PER_S : 0;
}

/* Checks and compiles @in into @out (strings not yet kept). */
static weir_status compile_limit(const weir_tenant_limit *in, tenant_limit *out)
{
    memset(out, 0, sizeof(*out));
    if (!in->scope || in->scope_len == 0 || in->scope_len > WEIR_TENANT_MAX_SCOPE_BYTES ||
        memchr(in->scope, '\0', in->scope_len))
        return WEIR_EINVAL;
    if (in->scope_len == 7 && memcmp(in->scope, "default", 7) == 0) {
        out->is_default = true;
    } else {
        const char *colon = memchr(in->scope, ':', in->scope_len);
        if (!colon || colon == in->scope || colon + 1 == in->scope + in->scope_len)
            return WEIR_EINVAL;
    }
    if (in->algorithm &&
        (weir_algorithm_name(in->algorithm) == NULL || in->algorithm == WEIR_ALGO_CONCURRENCY ||
         in->algorithm == WEIR_ALGO_LEAKY_SHAPER))
        return WEIR_EINVAL;
    weir_rule_limit *l = &out->rl;
    l->requests_per_unit = in->requests_per_unit;
    l->failure_mode = WEIR_FAILURE_ALLOW;
    l->file = "";
    l->calendar = in->calendar;
    if (in->calendar != WEIR_CALENDAR_NONE) {
        /* a calendar period is a fixed window whose bounds the engine
         * finds at each decision (weir__calendar_limit()) */
        static const weir_rule_unit cal_unit[] = {WEIR_UNIT_NONE, WEIR_UNIT_DAY, WEIR_UNIT_MONTH,
                                                  WEIR_UNIT_YEAR};
        if ((unsigned)in->calendar >= sizeof(cal_unit) / sizeof(cal_unit[0]) ||
            (in->algorithm && in->algorithm != WEIR_ALGO_FIXED_WINDOW))
            return WEIR_EINVAL;
        l->unit = cal_unit[in->calendar];
    } else {
        l->unit = in->unit;
    }
    l->window_us = unit_window_us(l->unit);
    if (l->window_us == 0)
        return WEIR_EINVAL;
    out->algorithm = in->calendar != WEIR_CALENDAR_NONE ? WEIR_ALGO_FIXED_WINDOW : in->algorithm;
    l->algorithm = out->algorithm ? out->algorithm : WEIR_ALGO_FIXED_WINDOW;
    weir_limit_spec spec = {
        .algorithm = l->algorithm, .limit = l->requests_per_unit, .window_us = l->window_us};
    weir_status st = weir_limit_compile(&spec, &l->compiled);
    return st == WEIR_EINVAL ? WEIR_ERANGE : st;
}

/* The zone of a calendar override (NULL for UTC) into @l. */
static weir_status tenants_zone(weir_tenants *t, const char *name, weir_rule_limit *l)
{
    l->tz = NULL;
    l->time_zone = NULL;
    if (!name || !*name || strcmp(name, "UTC") == 0)
        return WEIR_OK;
    for (tenant_zone *z = t->zones; z; z = z->next) {
        if (strcmp(z->name, name) == 0) {
            l->tz = z->tz;
            l->time_zone = z->name;
            return WEIR_OK;
        }
    }
    tenant_zone *z = weir__calloc(t->ctx, 1, sizeof(*z));
    if (!z)
        return WEIR_ENOMEM;
    weir_status st = weir_tz_load(t->ctx, name, &z->tz);
    if (st == WEIR_OK && !(z->name = keep(t, name, strlen(name))))
        st = WEIR_ENOMEM;
    if (st != WEIR_OK) {
        weir_tz_free(z->tz);
        weir__free(t->ctx, z);
        return st;
    }
    z->next = t->zones;
    t->zones = z;
    l->tz = z->tz;
    l->time_zone = z->name;
    return WEIR_OK;
}

/* Whether two limits of one record share a scope and a window. */
static bool same_slot(const tenant_limit *a, const tenant_limit *b, const weir_tenant_limit *ia,
                      const weir_tenant_limit *ib)
{
    return ia->scope_len == ib->scope_len && memcmp(ia->scope, ib->scope, ia->scope_len) == 0 &&
           window_id(&a->rl) == window_id(&b->rl);
}

weir_status weir_tenants_add(weir_tenants *t, const weir_tenant *in)
{
    if (!t || !in || t->sealed || !in->key || in->key_len == 0 ||
        in->key_len > WEIR_TENANT_MAX_KEY_BYTES || in->n_limits > WEIR_TENANT_MAX_LIMITS ||
        (in->n_limits && !in->limits) || in->expires_at_us <= in->effective_at_us ||
        (in->tier && (!*in->tier || strlen(in->tier) > WEIR_RULES_MAX_TIER_NAME_BYTES)))
        return WEIR_EINVAL;
    if (t->n_recs >= WEIR_TENANTS_MAX)
        return WEIR_ERANGE;
    tenant_limit tl[WEIR_TENANT_MAX_LIMITS];
    for (size_t i = 0; i < in->n_limits; i++) {
        weir_status st = compile_limit(&in->limits[i], &tl[i]);
        if (st != WEIR_OK)
            return st;
        for (size_t j = 0; j < i; j++)
            if (same_slot(&tl[j], &tl[i], &in->limits[j], &in->limits[i]))
                return WEIR_EINVAL;
        if (in->limits[i].calendar != WEIR_CALENDAR_NONE) {
            weir_status zs = tenants_zone(t, in->limits[i].time_zone, &tl[i].rl);
            if (zs != WEIR_OK)
                return zs;
        }
    }
    if (!grow_slots(t) ||
        !reserve(t->ctx, (void **)&t->recs, &t->cap_recs, t->n_recs + 1, sizeof(*t->recs)) ||
        !reserve(t->ctx, (void **)&t->limits, &t->cap_limits, t->n_limits + in->n_limits,
                 sizeof(*t->limits)))
        return WEIR_ENOMEM;
    tenant_rec r = {0};
    r.hash = key_hash(in->key, in->key_len);
    r.key_len = (uint32_t)in->key_len;
    r.effective_at_us = in->effective_at_us;
    r.expires_at_us = in->expires_at_us;
    r.first = (uint32_t)t->n_limits;
    r.n = (uint32_t)in->n_limits;
    if (!(r.key = keep(t, in->key, in->key_len)) ||
        (in->tier && !(r.tier = keep(t, in->tier, strlen(in->tier)))))
        return WEIR_ENOMEM;
    for (size_t i = 0; i < in->n_limits; i++) {
        const weir_tenant_limit *il = &in->limits[i];
        tenant_limit *l = &tl[i];
        if (!l->is_default) {
            const char *colon = memchr(il->scope, ':', il->scope_len);
            size_t kl = (size_t)(colon - il->scope);
            if (!(l->skey = keep(t, il->scope, kl)) ||
                !(l->svalue = keep(t, colon + 1, il->scope_len - kl - 1)))
                return WEIR_ENOMEM;
            l->skey_len = (uint32_t)kl;
            l->svalue_len = (uint32_t)(il->scope_len - kl - 1);
        }
        if (!(l->rl.path = keep(t, il->scope, il->scope_len)))
            return WEIR_ENOMEM;
        t->limits[t->n_limits + i] = *l;
    }
    uint32_t *slot = slot_of(t, in->key, in->key_len, r.hash);
    if (*slot) {
        t->recs[*slot - 1] = r; /* the later record replaces the earlier */
    } else {
        t->recs[t->n_recs] = r;
        *slot = (uint32_t)++t->n_recs;
    }
    t->n_limits += in->n_limits;
    return WEIR_OK;
}

const tenant_rec *weir__tenants_find(const weir_tenants *t, const char *key, size_t len)
{
    if (!t || !t->slots)
        return NULL;
    uint32_t s = *slot_of(t, key, len, key_hash(key, len));
    return s ? &t->recs[s - 1] : NULL;
}

void weir__tenants_seal(weir_tenants *t, const unsigned char *secret)
{
    for (size_t i = 0; i < t->n_recs; i++) {
        const tenant_rec *r = &t->recs[i];
        for (uint32_t k = 0; k < r->n; k++) {
            tenant_limit *l = &t->limits[r->first + k];
            XXH3_state_t s;
            XXH3_128bits_reset(&s);
            XXH3_128bits_update(&s, "weir-tenant", 12);
            uint32_t len = r->key_len;
            XXH3_128bits_update(&s, &len, sizeof(len));
            XXH3_128bits_update(&s, r->key, r->key_len);
            XXH3_128bits_update(&s, l->rl.path, strlen(l->rl.path) + 1);
            uint64_t fields[4] = {l->rl.requests_per_unit, (uint64_t)l->rl.window_us,
                                  (uint64_t)l->rl.calendar, l->algorithm};
            XXH3_128bits_update(&s, fields, sizeof(fields));
            XXH128_hash_t h = XXH3_128bits_digest(&s);
            l->plan.id = (ident){h.low64, h.high64};
            l->plan.fixed = true;
            counter_digest(&l->plan.id, sizeof(l->plan.id), secret, l->plan.digest);
        }
    }
    t->sealed = true;
}

/* ------------------------------------------------------------ resolution */

int weir__tenant_entry(const weir__entry *entries, size_t n, const char *tkey)
{
    size_t kl = strlen(tkey);
    for (size_t i = 0; i < n; i++)
        if (entries[i].key_len == kl && memcmp(entries[i].key, tkey, kl) == 0)
            return (int)i;
    return -1;
}

/* The child of @node that entry @e matches: its exact value, else the
 * first pattern in file order, else the key's default. */
static const weir_rule *tier_child(const weir_rule *node, const weir__entry *e,
                                   weir__match_kind *kind)
{
    const weir_rule *dflt = NULL, *wild = NULL;
    for (size_t i = 0; i < node->n_children; i++) {
        const weir_rule *c = node->children[i];
        if (strlen(c->key) != e->key_len || memcmp(c->key, e->key, e->key_len) != 0)
            continue;
        if (!c->value) {
            if (!dflt)
                dflt = c;
        } else if (c->wildcard) {
            if (!wild && weir__glob_match(c->value, strlen(c->value), e->value, e->value_len))
                wild = c;
        } else if (strlen(c->value) == e->value_len &&
                   memcmp(c->value, e->value, e->value_len) == 0) {
            *kind = WEIR__MATCH_EXACT;
            return c;
        }
    }
    *kind = wild ? WEIR__MATCH_WILDCARD : WEIR__MATCH_DEFAULT;
    return wild ? wild : dflt;
}

/* Walks a tier's body with the entries from the tenant's on. */
static const weir_rule *tier_walk(const weir_rule *root, const weir__entry *e, size_t n,
                                  weir__match_result *m)
{
    m->rule = NULL;
    m->depth = 0;
    const weir_rule *cur = root;
    for (size_t i = 0; i < n; i++) {
        weir__match_kind kind = WEIR__MATCH_DEFAULT;
        if (i > 0 && !(cur = tier_child(cur, &e[i], &kind)))
            return NULL;
        bool share = (cur->flags & WEIR_RULE_SHARE_THRESHOLD) != 0;
        m->levels[i] = (weir__match_level){
            .rule = cur,
            .kind = kind,
            .value_in_key = kind == WEIR__MATCH_DEFAULT || (kind == WEIR__MATCH_WILDCARD && !share),
        };
        m->depth = i + 1;
    }
    m->rule = cur;
    return cur;
}

static const weir_rule *find_tier(const weir_rules_domain *dom, const char *name)
{
    const weir_rule *r = name ? weir_rules_domain_find_tier(dom, name) : NULL;
    if (!r && dom->tenants.default_tier)
        r = weir_rules_domain_find_tier(dom, dom->tenants.default_tier);
    return r;
}

/* Whether override @l covers the scope of entries @e (after the tenant's). */
static bool scope_matches(const tenant_limit *l, const weir__entry *e, size_t n)
{
    if (l->is_default)
        return n == 0;
    return n == 1 && e[0].key_len == l->skey_len && memcmp(e[0].key, l->skey, l->skey_len) == 0 &&
           e[0].value_len == l->svalue_len && memcmp(e[0].value, l->svalue, l->svalue_len) == 0;
}

/* Puts @p in @out, replacing a pick of the same window from a lower
 * layer. */
static size_t put_pick(tenant_pick *out, size_t n, size_t cap, tenant_pick p)
{
    const weir_rule_limit *l = p.over ? &p.over->rl : p.limit;
    for (size_t i = 0; i < n; i++) {
        const weir_rule_limit *o = out[i].over ? &out[i].over->rl : out[i].limit;
        if (out[i].layer < p.layer && window_id(o) == window_id(l)) {
            if (p.over)
                p.under = out[i].over ? out[i].under : out[i].limit;
            out[i] = p;
            return n;
        }
    }
    if (n < cap)
        out[n++] = p;
    return n;
}

size_t weir__tenant_resolve(const ruleset *rs, const weir_rules_domain *dom,
                            const weir_rule *file_rule, const weir__entry *entries, size_t n,
                            size_t t, int64_t now_us, weir__match_result *tier_m,
                            const weir_rule **tier_rule, tenant_pick *out, size_t cap)
{
    size_t k = 0;
    if (file_rule) {
        const limit_plan *lp = &rs->plans.limits[rs->plans.first[file_rule->seq]];
        for (size_t i = 0; i < file_rule->n_limits && k < cap; i++)
            out[k++] = (tenant_pick){LAYER_FILE, file_rule->limits[i], &lp[i], NULL, NULL};
    }
    const tenant_rec *rec = weir__tenants_find(rs->tenants, entries[t].value, entries[t].value_len);
    if (rec && (now_us < rec->effective_at_us || now_us >= rec->expires_at_us))
        rec = NULL;
    *tier_rule = NULL;
    const weir_rule *root = find_tier(dom, rec ? rec->tier : NULL);
    if (root && (*tier_rule = tier_walk(root, entries + t, n - t, tier_m)) != NULL) {
        const weir_rule *tr = *tier_rule;
        const limit_plan *lp = &rs->plans.limits[rs->plans.first[tr->seq]];
        for (size_t i = 0; i < tr->n_limits; i++)
            k = put_pick(out, k, cap, (tenant_pick){LAYER_TIER, tr->limits[i], &lp[i], NULL, NULL});
    }
    if (rec) {
        for (uint32_t i = 0; i < rec->n; i++) {
            const tenant_limit *l = &rs->tenants->limits[rec->first + i];
            if (scope_matches(l, entries + t + 1, n - t - 1))
                k = put_pick(out, k, cap, (tenant_pick){LAYER_OVERRIDE, NULL, NULL, l, NULL});
        }
    }
    return k;
}
