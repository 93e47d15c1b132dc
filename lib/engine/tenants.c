/*
 * tenants.c - the tenant table (weir/tenants.h, tenants.h): records in an
 * open-addressed hash of their keys, each record one block with its key
 * and its overrides, compiled as they are added, and the resolution of a tenant descriptor's limits
 * across the override, tier and rule-file layers.
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

/* @size bytes aligned to @align (a power of 2, at most 64), in the
 * table's chunks, where they stay until the table is freed. */
static void *bump(weir_tenants *t, size_t size, size_t align)
{
    size_t pad = (size_t)(-(uintptr_t)t->chunk_at & (align - 1));
    if (!t->chunk_at || pad + size > t->chunk_left) {
        size_t room = size + 64 > CHUNK_BYTES ? size + 64 : CHUNK_BYTES;
        tenant_chunk *c = weir__malloc(t->ctx, sizeof(*c) + room);
        if (!c)
            return NULL;
        c->next = t->chunks;
        t->chunks = c;
        t->chunk_at = c->bytes;
        t->chunk_left = room;
        pad = (size_t)(-(uintptr_t)t->chunk_at & (align - 1));
    }
    char *p = t->chunk_at + pad;
    t->chunk_at += pad + size;
    t->chunk_left -= pad + size;
    return p;
}

/* @len bytes of @s and a NUL at @p; returns the byte after the NUL. */
static char *put_str(char *p, const char *s, size_t len)
{
    if (len)
        memcpy(p, s, len);
    p[len] = '\0';
    return p + len + 1;
}

static uint64_t key_hash(const char *key, size_t len)
{
    return XXH3_64bits(key, len);
}

/* The slot of key @key (@len bytes, hash @h), or the empty slot where it
 * goes. The record is read only when the hashes agree. */
static tenant_slot *slot_of(const weir_tenants *t, const char *key, size_t len, uint64_t h)
{
    size_t i = (size_t)h & t->mask;
    for (;;) {
        tenant_slot *s = &t->slots[i];
        if (!s->rec)
            return s;
        if (s->hash == h && s->rec->key_len == len && memcmp(s->rec->key, key, len) == 0)
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
    tenant_slot *slots = weir__calloc(t->ctx, ncap, sizeof(*slots));
    if (!slots)
        return false;
    tenant_slot *old = t->slots;
    t->slots = slots;
    t->mask = ncap - 1;
    for (size_t i = 0; i < cap; i++)
        if (old[i].rec)
            *slot_of(t, old[i].rec->key, old[i].rec->key_len, old[i].hash) = old[i];
    weir__free(t->ctx, old);
    return true;
}

/* The window a limit is known by within its scope: the same number for
 * two limits that replace each other. */
static int64_t window_id(const weir_rule_limit *l)
{
    return l->calendar != WEIR_CALENDAR_NONE ? -(int64_t)l->calendar : l->window_us;
}

static int64_t over_window_id(const tenant_limit *l)
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
    tenant_limit *l = out;
    l->requests_per_unit = in->requests_per_unit;
    weir_rule_unit unit = in->unit;
    if (in->calendar != WEIR_CALENDAR_NONE) {
        /* a calendar period is a fixed window whose bounds the engine
         * finds at each decision (weir__calendar_limit()) */
        static const weir_rule_unit cal_unit[] = {WEIR_UNIT_NONE, WEIR_UNIT_DAY, WEIR_UNIT_MONTH,
                                                  WEIR_UNIT_YEAR};
        if ((unsigned)in->calendar >= sizeof(cal_unit) / sizeof(cal_unit[0]) ||
            (in->algorithm && in->algorithm != WEIR_ALGO_FIXED_WINDOW))
            return WEIR_EINVAL;
        l->calendar = (uint8_t)in->calendar;
        unit = cal_unit[in->calendar];
    }
    l->window_us = unit_window_us(unit);
    if (l->window_us == 0)
        return WEIR_EINVAL;
    l->unit = (uint8_t)unit;
    l->algorithm =
        (uint8_t)(in->calendar != WEIR_CALENDAR_NONE ? WEIR_ALGO_FIXED_WINDOW : in->algorithm);
    weir_limit_spec spec = {.algorithm = l->algorithm ? (weir_algorithm)l->algorithm
                                                      : WEIR_ALGO_FIXED_WINDOW,
                            .limit = l->requests_per_unit,
                            .window_us = l->window_us};
    weir_status st = weir_limit_compile(&spec, &l->compiled);
    return st == WEIR_EINVAL ? WEIR_ERANGE : st;
}

/* The zone of a calendar override (NULL for UTC) into @l. */
static weir_status tenants_zone(weir_tenants *t, const char *name, tenant_limit *l)
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
    size_t len = strlen(name);
    char *kept = st == WEIR_OK ? bump(t, len + 1, 1) : NULL;
    if (st == WEIR_OK && !kept)
        st = WEIR_ENOMEM;
    if (kept) {
        put_str(kept, name, len);
        z->name = kept;
    }
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
           over_window_id(a) == over_window_id(b);
}

weir_status weir_tenants_add(weir_tenants *t, const weir_tenant *in)
{
    size_t tier_len = in && in->tier ? strlen(in->tier) : 0;
    if (!t || !in || t->sealed || !in->key || in->key_len == 0 ||
        in->key_len > WEIR_TENANT_MAX_KEY_BYTES || in->n_limits > WEIR_TENANT_MAX_LIMITS ||
        (in->n_limits && !in->limits) || in->expires_at_us <= in->effective_at_us ||
        (in->tier && (tier_len == 0 || tier_len > WEIR_RULES_MAX_TIER_NAME_BYTES)))
        return WEIR_EINVAL;
    if (t->n_recs >= WEIR_TENANTS_MAX)
        return WEIR_ERANGE;
    tenant_limit tl[WEIR_TENANT_MAX_LIMITS];
    size_t strings = in->key_len + (in->tier ? tier_len + 1 : 0), scopes = 0;
    for (size_t i = 0; i < in->n_limits; i++) {
        weir_status st = compile_limit(&in->limits[i], &tl[i]);
        if (st != WEIR_OK)
            return st;
        for (size_t j = 0; j < i; j++)
            if (same_slot(&tl[j], &tl[i], &in->limits[j], &in->limits[i]))
                return WEIR_EINVAL;
        if (in->limits[i].calendar != WEIR_CALENDAR_NONE) {
            weir_status zs = tenants_zone(t, in->limits[i].time_zone, &tl[i]);
            if (zs != WEIR_OK)
                return zs;
        }
        scopes += in->limits[i].scope_len + 1;
    }
    /* the block: the record, the key and the tier's name (read together),
     * the limits, the scopes */
    size_t key_room = (strings + 7u) & ~(size_t)7u;
    size_t size = sizeof(tenant_rec) + key_room + in->n_limits * sizeof(tenant_limit) + scopes;
    char *blk;
    if (!grow_slots(t) || !(blk = bump(t, size, 64)))
        return WEIR_ENOMEM;
    /* bump() aligns the block to 64 bytes, key_room keeps the limits at 8 */
    tenant_rec *r = (tenant_rec *)(void *)blk;
    char *key = blk + sizeof(*r);
    memcpy(key, in->key, in->key_len);
    r->key = key;
    r->key_len = (uint32_t)in->key_len;
    r->tier = in->tier ? key + in->key_len : NULL;
    if (in->tier)
        put_str(key + in->key_len, in->tier, tier_len);
    tenant_limit *lim = (tenant_limit *)(void *)(key + key_room);
    char *str = (char *)(lim + in->n_limits);
    r->limits = lim;
    r->n = (uint32_t)in->n_limits;
    r->effective_at_us = in->effective_at_us;
    r->expires_at_us = in->expires_at_us;
    for (size_t i = 0; i < in->n_limits; i++) {
        const weir_tenant_limit *il = &in->limits[i];
        tl[i].scope = str;
        str = put_str(str, il->scope, il->scope_len);
        if (!tl[i].is_default) {
            const char *colon = memchr(il->scope, ':', il->scope_len);
            tl[i].skey_len = (uint32_t)(colon - il->scope);
            tl[i].svalue_len = (uint32_t)(il->scope_len - tl[i].skey_len - 1);
        }
        lim[i] = tl[i];
    }
    uint64_t h = key_hash(in->key, in->key_len);
    tenant_slot *slot = slot_of(t, in->key, in->key_len, h);
    if (!slot->rec)
        t->n_recs++;
    /* a key added again: the later record replaces the earlier */
    slot->hash = h;
    slot->rec = r;
    return WEIR_OK;
}

const tenant_rec *weir__tenants_find(const weir_tenants *t, const char *key, size_t len)
{
    if (!t || !t->slots)
        return NULL;
    return slot_of(t, key, len, key_hash(key, len))->rec;
}

void weir__tenants_seal(weir_tenants *t, const unsigned char *secret)
{
    for (size_t i = 0; t->slots && i <= t->mask; i++) {
        const tenant_rec *r = t->slots[i].rec;
        for (uint32_t k = 0; r && k < r->n; k++) {
            tenant_limit *l = (tenant_limit *)&r->limits[k];
            XXH3_state_t s;
            XXH3_128bits_reset(&s);
            XXH3_128bits_update(&s, "weir-tenant", 12);
            uint32_t len = r->key_len;
            XXH3_128bits_update(&s, &len, sizeof(len));
            XXH3_128bits_update(&s, r->key, r->key_len);
            XXH3_128bits_update(&s, l->scope, strlen(l->scope) + 1);
            uint64_t fields[4] = {l->requests_per_unit, (uint64_t)l->window_us,
                                  (uint64_t)l->calendar, l->algorithm};
            XXH3_128bits_update(&s, fields, sizeof(fields));
            XXH128_hash_t h = XXH3_128bits_digest(&s);
            l->plan.id = (ident){h.low64, h.high64};
            l->plan.fixed = true;
            l->plan.cms = NULL;      /* an override counts in the store */
            l->plan.adaptive = NULL; /* and is a fixed number */
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

/* The tier named @name, else the default tier; @found receives its name
 * as the rules hold it (it outlives a tenant table swapped meanwhile). */
static const weir_rule *find_tier(const weir_rules_domain *dom, const char *name,
                                  const char **found)
{
    const char *want[2] = {name, dom->tenants.default_tier};
    for (size_t w = 0; w < 2; w++)
        for (size_t i = 0; want[w] && i < dom->tenants.n_tiers; i++)
            if (strcmp(dom->tenants.tiers[i].name, want[w]) == 0) {
                *found = dom->tenants.tiers[i].name;
                return dom->tenants.tiers[i].root;
            }
    *found = NULL;
    return NULL;
}

/* Whether override @l covers the scope of entries @e (after the tenant's). */
static bool scope_matches(const tenant_limit *l, const weir__entry *e, size_t n)
{
    if (l->is_default)
        return n == 0;
    return n == 1 && e[0].key_len == l->skey_len && e[0].value_len == l->svalue_len &&
           memcmp(e[0].key, l->scope, l->skey_len) == 0 &&
           memcmp(e[0].value, l->scope + l->skey_len + 1, l->svalue_len) == 0;
}

/* Puts @p in @out, replacing a pick of the same window from a lower
 * layer. */
static size_t put_pick(tenant_pick *out, size_t n, size_t cap, tenant_pick p)
{
    int64_t w = p.over ? over_window_id(p.over) : window_id(p.limit);
    for (size_t i = 0; i < n; i++) {
        int64_t o = out[i].over ? over_window_id(out[i].over) : window_id(out[i].limit);
        if (out[i].layer < p.layer && o == w) {
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
                            const weir_rule **tier_rule, const char **tier_name, tenant_pick *out,
                            size_t cap)
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
    const weir_rule *root = find_tier(dom, rec ? rec->tier : NULL, tier_name);
    if (root && (*tier_rule = tier_walk(root, entries + t, n - t, tier_m)) != NULL) {
        const weir_rule *tr = *tier_rule;
        const limit_plan *lp = &rs->plans.limits[rs->plans.first[tr->seq]];
        for (size_t i = 0; i < tr->n_limits; i++)
            k = put_pick(out, k, cap, (tenant_pick){LAYER_TIER, tr->limits[i], &lp[i], NULL, NULL});
    }
    if (rec) {
        for (uint32_t i = 0; i < rec->n; i++) {
            const tenant_limit *l = &rec->limits[i];
            if (scope_matches(l, entries + t + 1, n - t - 1))
                k = put_pick(out, k, cap, (tenant_pick){LAYER_OVERRIDE, NULL, NULL, l, NULL});
        }
    }
    return k;
}
