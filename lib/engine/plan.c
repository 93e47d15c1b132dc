/*
 * plan.c - a decision's planning: each descriptor matched against the
 * rules (and, carrying a tenant's key, against its tier and overrides),
 * each limit it reaches listed with its counter's name, its effective
 * numbers (a request's own override, a calendar period) and its op
 * (decision.h). decide.c then sends the ops and answers.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core/context.h"
#include "core/snapshot.h"
#include "engine/engine_internal.h"
#include "engine/keys.h"
#include "engine/match.h"
#include "engine/ruleset.h"
#include "engine/tenants.h"
#include "rules/loader.h"
#include "store/store.h"
#include "weir/cms.h"
#include "weir/engine.h"

#include "engine/decision.h"

static int64_t unit_us(weir_rule_unit u)
{
    switch (u) {
    case WEIR_UNIT_SECOND:
        return US_PER_S;
    case WEIR_UNIT_MINUTE:
        return 60 * US_PER_S;
    case WEIR_UNIT_HOUR:
        return 3600 * US_PER_S;
    case WEIR_UNIT_DAY:
        return 86400 * US_PER_S;
    case WEIR_UNIT_WEEK:
        return 7 * 86400 * US_PER_S;
    case WEIR_UNIT_MONTH:
        return 30 * 86400 * US_PER_S;
    case WEIR_UNIT_YEAR:
        return 365 * 86400 * US_PER_S;
    default:
        return 0;
    }
}

static weir_status check_descriptor(weir_engine_reader *rd, const weir_descriptor *d, size_t i)
{
    long at = (long)i;
    if (!d->entries || d->n_entries == 0)
        return weir__refuse(rd, WEIR_REFUSAL_NO_ENTRIES, at);
    if (d->n_entries > WEIR_ENGINE_MAX_ENTRIES)
        return weir__refuse(rd, WEIR_REFUSAL_TOO_MANY_ENTRIES, at);
    for (size_t k = 0; k < d->n_entries; k++) {
        const weir_entry *en = &d->entries[k];
        if ((!en->key && en->key_len) || (!en->value && en->value_len))
            return weir__refuse(rd, WEIR_REFUSAL_MISSING_BYTES, at);
    }
    if (d->limit && rd->engine->refuse_overrides)
        return weir__refuse(rd, WEIR_REFUSAL_OVERRIDE_REFUSED, at);
    if (d->limit && unit_us(d->limit->unit) == 0)
        return weir__refuse(rd, WEIR_REFUSAL_UNKNOWN_UNIT, at);
    return WEIR_OK;
}

static bool same_spec(const weir_limit_spec *a, const weir_limit_spec *b)
{
    return a->algorithm == b->algorithm && a->limit == b->limit && a->window_us == b->window_us &&
           a->burst == b->burst && a->sub_windows == b->sub_windows &&
           a->warmup_us == b->warmup_us && a->cold_factor == b->cold_factor;
}

/* weir_limit_compile() through the reader's slots: a proxy sends the same
 * few overrides again and again, and compiling one takes several 64-bit
 * divisions (a gcd and three reciprocals), about 250 instructions. */
static weir_status compile_override(weir_engine_reader *rd, const weir_limit_spec *spec,
                                    weir_limit *out)
{
    uint64_t h = (spec->limit * 0x9e3779b97f4a7c15ull) ^
                 ((uint64_t)spec->window_us * 0xbf58476d1ce4e5b9ull) ^ (uint64_t)spec->algorithm;
    override_slot *slot = &rd->overrides[(h >> 32) & (OVERRIDE_SLOTS - 1u)];
    if (slot->used && same_spec(&slot->spec, spec)) {
        *out = slot->compiled;
        return WEIR_OK;
    }
    weir_status st = weir_limit_compile(spec, out);
    if (st == WEIR_OK) {
        slot->used = true;
        slot->spec = *spec;
        slot->compiled = *out;
    }
    return st;
}

/* The effective limit: as configured, or the request's override with the
 * configured algorithm. */
static weir_status effective(weir_engine_reader *rd, const weir_rule_limit *l,
                             const weir_limit_override *o, pending *p)
{
    if (!o) {
        p->lim = &l->compiled;
        p->rpu = l->requests_per_unit;
        p->unit = l->unit;
        p->window_us = l->window_us;
        return WEIR_OK;
    }
    weir_limit_spec spec = {.algorithm = l->algorithm,
                            .limit = o->requests_per_unit,
                            .window_us = unit_us(o->unit),
                            .burst = l->burst,
                            .sub_windows = 0,
                            .warmup_us = l->warmup_us,
                            .cold_factor = l->cold_factor};
    if (l->algorithm == WEIR_ALGO_SLIDING_COUNTER && l->sub_windows &&
        spec.window_us % l->sub_windows == 0)
        spec.sub_windows = l->sub_windows;
    weir_status st = compile_override(rd, &spec, &p->eff);
    if (st != WEIR_OK)
        return st == WEIR_EINVAL ? WEIR_ERANGE : st;
    p->lim = &p->eff;
    p->rpu = o->requests_per_unit;
    p->unit = o->unit;
    p->window_us = spec.window_us;
    return WEIR_OK;
}

/* A calendar period [start, end) counted as a fixed window: the store's
 * windows are aligned to multiples of their length from time 0, so the
 * window is end / m for the largest m of the form 2^a 5^b (a, b <= 6,
 * divisors of every whole second in microseconds) that keeps it at least
 * as long as the period: the one window holding the period then ends
 * exactly at its end, and resets, retries and expiries come out right.
 * The counter is named by the period's start too (@period), so each
 * period counts afresh, and the store's algorithms and scripts stay as
 * they are. */
static weir_status calendar_limit(weir_engine_reader *rd, const weir_rule_limit *l, int64_t now_us,
                                  pending *p, int64_t *period)
{
    int64_t start, end;
    if (weir_calendar_period(l->tz, l->calendar, now_us < 0 ? 0 : now_us, &start, &end) !=
            WEIR_OK ||
        end <= start || end % US_PER_S != 0)
        return WEIR_ERANGE;
    int64_t bound = end / (end - start), m = 1;
    for (int64_t two = 1; two <= 64; two *= 2)
        for (int64_t five = 1; five <= 15625; five *= 5)
            if (two * five <= bound && two * five > m)
                m = two * five;
    weir_limit_spec spec = {
        .algorithm = WEIR_ALGO_FIXED_WINDOW, .limit = l->requests_per_unit, .window_us = end / m};
    weir_status st = compile_override(rd, &spec, &p->eff);
    if (st != WEIR_OK)
        return st;
    p->lim = &p->eff;
    p->window_us = end - start;
    *period = start;
    return WEIR_OK;
}

/* The bytes a counter is named by: the limit's identity, then, length-
 * prefixed, the request's value at every level that counts values apart
 * (the identity fixes which levels those are), then the override if the
 * request gave one. The store key is their digest. Returns the length, 0
 * when it does not fit. */
static size_t counter_bytes(const ident *id, const weir__match_result *m, const weir_entry *entries,
                            const pending *override, char *buf, size_t cap)
{
    if (cap < sizeof(*id))
        return 0;
    memcpy(buf, id, sizeof(*id));
    size_t n = sizeof(*id);
    for (size_t lv = 0; lv < m->depth; lv++) {
        if (!m->levels[lv].value_in_key)
            continue;
        size_t vl = entries[lv].value_len;
        if (vl > UINT32_MAX || n + 4 + vl > cap)
            return 0;
        uint32_t v32 = (uint32_t)vl;
        memcpy(buf + n, &v32, 4);
        if (vl)
            memcpy(buf + n + 4, entries[lv].value, vl);
        n += 4 + vl;
    }
    if (override) {
        uint32_t rpu = override->rpu;
        int64_t w = override->window_us;
        if (n + 1 + sizeof(rpu) + sizeof(w) > cap)
            return 0;
        buf[n++] = 'O';
        memcpy(buf + n, &rpu, sizeof(rpu));
        memcpy(buf + n + sizeof(rpu), &w, sizeof(w));
        n += sizeof(rpu) + sizeof(w);
    }
    return n;
}

/* The level of the one request value a counter is named by, or -1 when
 * it is named by none or by several. */
static int single_value_level(const weir__match_result *m)
{
    int level = -1;
    for (size_t lv = 0; lv < m->depth; lv++) {
        if (!m->levels[lv].value_in_key)
            continue;
        if (level >= 0)
            return -1;
        level = (int)lv;
    }
    return level;
}

/* The digest of a counter named by one request value and no override:
 * the value's own digest, hashed where the request holds it, xored with
 * the limit's mask (limit_plan). The mask is a digest of the identity
 * under the secret, so two limits' counters of one value differ by a
 * word nobody outside the process knows, and two values of one limit
 * share a counter only if their digests do. The other forms of a store
 * key are digests of bytes (counter_bytes()); one of them naming the
 * same counter as this form is a 128-bit coincidence under the secret.
 * (The key used to be XXH3 of the identity and the value's digest: a
 * second XXH3 a counter, about 60 instructions.) False for a value longer
 * than counter_bytes() takes. */
static bool value_digest(const limit_plan *lp, const weir_entry *en, const unsigned char *secret,
                         unsigned char out[DIGEST_BYTES])
{
    if (en->value_len > WEIR_MAX_KEY_BYTES - sizeof(lp->id) - 4)
        return false;
    XXH128_hash_t v = XXH3_128bits_withSecret(en->value, en->value_len, secret, SECRET_BYTES);
    uint64_t m[2];
    memcpy(m, lp->digest, sizeof(m));
    put_digest(out, v.low64 ^ m[0], v.high64 ^ m[1]);
    return true;
}

/* Limit i's op goes to ops[slot]; field by field, since the outputs are
 * the store's to write. */
void weir__place_op(decision *dc, size_t i, size_t slot)
{
    pending *p = &dc->p[i];
    weir_op *op = &dc->ops[slot];
    p->op = slot;
    if (dc->engine->shared_keys) {
        op->key = dc->kbuf + dc->koff[i];
        op->key_len = dc->klen[i];
    } else {
        op->key = dc->keys[i];
        op->key_len = DIGEST_BYTES;
    }
    op->limit = p->lim;
    op->hits = p->hits;
    op->lease = 0;
    op->reserve = p->reserve;
    op->kind = p->kind;
    op->flags = p->limit->no_local_cache ? WEIR_OP_NO_LOCAL_CACHE : 0u;
    if (p->limit->sync_interval_us && dc->engine->shared_keys)
        op->flags |= WEIR_OP_SYNC_FLAGS(p->limit->sync_interval_us / 1000);
}

/* Keeps limit i's stable key (@len bytes of @key); false when out of
 * memory. Its op's pointer is set once every key is in (the buffer may
 * move while they come). */
static bool keep_key(decision *dc, size_t i, const char *key, size_t len)
{
    if (dc->kused + len > dc->kcap) {
        size_t cap = dc->kcap ? dc->kcap * 2 : 1024;
        while (cap < dc->kused + len)
            cap *= 2;
        char *p = weir__malloc(dc->engine->ctx, cap);
        if (!p)
            return false;
        if (dc->kused)
            memcpy(p, dc->kbuf, dc->kused);
        weir__free(dc->engine->ctx, dc->kbuf);
        dc->kbuf = p;
        dc->kcap = cap;
    }
    memcpy(dc->kbuf + dc->kused, key, len);
    dc->koff[i] = (uint32_t)dc->kused;
    dc->klen[i] = (uint32_t)len;
    dc->kused += len;
    return true;
}

/* The units the `shed:` share of limit @l keeps free from a request of
 * priority rank @prio (weir_request.priority): ceil(share x @rpu). */
static uint64_t shed_share(const weir_rule_limit *l, uint32_t rpu, unsigned prio)
{
    if (prio == 0 || prio > WEIR_RULES_MAX_PRIORITIES || !l->shed_bp[prio - 1])
        return 0;
    return ((uint64_t)rpu * l->shed_bp[prio - 1] + 9999u) / 10000u;
}

/* What the planning of one descriptor's limits shares. */
typedef struct plan_ctx {
    size_t d;
    const weir_descriptor *desc;
    const weir__match_result *m;
    int value_level; /* single_value_level(), or -1 */
    bool shadow, quota;
    bool tenant_override; /* the limits are a tenant's overrides */
    const char *tier;     /* a tenant's descriptor: its tier, or NULL */
    uint64_t hits;
    weir_op_kind kind;
} plan_ctx;

/* Plans limit @l of the descriptor (@lp its plan): its pending entry, its
 * counter's key, its bucket asked for. Returns WEIR_OK or the refusal. */
static inline __attribute__((always_inline)) weir_status
plan_limit(decision *dc, weir_engine_reader *rd, const weir_request *req, const plan_ctx *pc,
           const weir_rule_limit *l, const limit_plan *lp)
{
    weir_engine *e = dc->engine;
    const weir_descriptor *desc = pc->desc;
    long d = (long)pc->d;
    weir_status st;
    if (dc->n_pending == WEIR_ENGINE_MAX_LIMITS)
        return weir__refuse(rd, WEIR_REFUSAL_TOO_MANY_LIMITS, -1);
    pending *p = &dc->p[dc->n_pending];
    p->desc = (uint32_t)pc->d;
    p->limit = l;
    p->tier = pc->tier;
    p->tenant_override = pc->tenant_override;
    p->shadow = pc->shadow;
    p->quota = pc->quota;
    p->enforcing = !pc->shadow && !pc->quota;
    p->dropped = false;
    p->local = false;
    p->hits = pc->hits;
    p->kind = pc->kind;
    if ((st = effective(rd, l, desc->limit, p)) != WEIR_OK)
        return weir__refuse(
            rd, st == WEIR_ERANGE ? WEIR_REFUSAL_BAD_OVERRIDE : WEIR_REFUSAL_NO_MEMORY, d);
    /* a request's own limit is counted in the store */
    p->cms = desc->limit ? NULL : lp->cms;
    dc->n_sketch += p->cms != NULL;
    /* an adaptive limit admits up to its controller's limit of the
     * moment: the rest of requests_per_unit is kept free; a priority's
     * share is of that limit */
    p->adaptive = desc->limit ? NULL : lp->adaptive;
    p->adaptive_reserve = 0;
    uint32_t capacity = p->rpu;
    if (p->adaptive) {
        p->adaptive_limit = capacity = weir_adaptive_limit(p->adaptive->a);
        if (p->rpu > p->adaptive_limit)
            p->adaptive_reserve = p->rpu - p->adaptive_limit;
    }
    p->share = shed_share(l, capacity, req->priority);
    p->reserve = p->share + p->adaptive_reserve;
    /* a calendar limit counts its period: from @period on */
    bool calendar = l->calendar != WEIR_CALENDAR_NONE && !desc->limit;
    int64_t period = 0;
    if (calendar && (st = calendar_limit(rd, l, dc->now_us, p, &period)) != WEIR_OK)
        return weir__refuse(rd, WEIR_REFUSAL_NO_MEMORY, d);
    unsigned char *key = dc->keys[dc->n_pending];
    if (e->shared_keys) {
        /* the same values are refused as with digests (below), so a
         * request means the same on every store */
        if (counter_bytes(&lp->id, pc->m, desc->entries, desc->limit ? p : NULL, rd->scratch,
                          sizeof(rd->scratch)) == 0)
            return weir__refuse(rd, WEIR_REFUSAL_VALUES_TOO_LONG, d);
        weir__counter_name cn = {req->domain,   req->domain_len,     lp->id.lo, lp->id.hi,   pc->m,
                                 desc->entries, desc->limit != NULL, p->rpu,    p->window_us};
        size_t len = weir__stable_key(&cn, rd->scratch);
        if (calendar)
            len += (size_t)snprintf(rd->scratch + len, sizeof(rd->scratch) - len, ":c%lld",
                                    (long long)(period / US_PER_S));
        if (!keep_key(dc, dc->n_pending, rd->scratch, len))
            return weir__refuse(rd, WEIR_REFUSAL_NO_MEMORY, -1);
    } else if (lp->fixed && !desc->limit) {
        memcpy(key, lp->digest, DIGEST_BYTES);
    } else if (pc->value_level >= 0) {
        if (!value_digest(lp, &desc->entries[pc->value_level], e->secret, key))
            return weir__refuse(rd, WEIR_REFUSAL_VALUES_TOO_LONG, d);
    } else {
        size_t len = counter_bytes(&lp->id, pc->m, desc->entries, desc->limit ? p : NULL,
                                   rd->scratch, sizeof(rd->scratch));
        if (len == 0)
            return weir__refuse(rd, WEIR_REFUSAL_VALUES_TOO_LONG, d);
        counter_digest(rd->scratch, len, e->secret, key);
    }
    if (calendar && !e->shared_keys) {
        /* a counter of its own each period */
        unsigned char kp[DIGEST_BYTES + sizeof(period)];
        memcpy(kp, key, DIGEST_BYTES);
        memcpy(kp + DIGEST_BYTES, &period, sizeof(period));
        counter_digest(kp, sizeof(kp), e->secret, key);
    }
    /* the counter's cache miss overlaps the rest of the planning */
    if (e->prefetch)
        e->prefetch(e->store, key);
    if (!e->shared_keys)
        weir__place_op(dc, dc->n_pending, dc->n_pending);
    dc->n_enforcing += p->enforcing;
    dc->n_pending++;
    return WEIR_OK;
}

/* A descriptor that matches no rule and gives a limit of its own (Envoy's
 * RateLimitDescriptor.limit) is limited by it, as upstream does: a fixed
 * window, failing open, never in shadow mode, reported as the domain's
 * "override" limit. Its counter is named by the domain and every entry,
 * key and value (hashed as one, so any entries fit), and the override. */
static weir_status plan_orphan(decision *dc, weir_engine_reader *rd, const weir_request *req,
                               const weir_rules_domain *dom, plan_ctx *pc)
{
    if (!dc->orphans && !(dc->orphans = weir__calloc(dc->engine->ctx, WEIR_ENGINE_MAX_DESCRIPTORS,
                                                     sizeof(*dc->orphans))))
        return weir__refuse(rd, WEIR_REFUSAL_NO_MEMORY, -1);
    weir_rule_limit *l = &dc->orphans[pc->d];
    memset(l, 0, sizeof(*l));
    l->domain = weir_rules_domain_name(dom);
    l->path = "override";
    l->algorithm = WEIR_ALGO_FIXED_WINDOW; /* upstream's only one */
    l->failure_mode = WEIR_FAILURE_ALLOW;
    l->file = "";
    XXH3_state_t h;
    XXH3_128bits_reset(&h);
    XXH3_128bits_update(&h, "override", 8);
    XXH3_128bits_update(&h, req->domain, req->domain_len);
    for (size_t i = 0; i < pc->desc->n_entries; i++) {
        const weir_entry *en = &pc->desc->entries[i];
        uint64_t len[2] = {en->key_len, en->value_len};
        XXH3_128bits_update(&h, len, sizeof(len));
        XXH3_128bits_update(&h, en->key ? en->key : "", en->key_len);
        XXH3_128bits_update(&h, en->value ? en->value : "", en->value_len);
    }
    XXH128_hash_t id = XXH3_128bits_digest(&h);
    limit_plan lp = {{id.low64, id.high64}, false, {0}, NULL, NULL};
    static const weir__match_result no_levels = {0};
    pc->m = &no_levels;
    pc->value_level = -1;
    pc->shadow = pc->quota = false;
    return plan_limit(dc, rd, req, pc, l, &lp);
}

/* The limit an override puts in force: the one it replaced (its name,
 * path, failure mode, sync), or the override alone, with the override's
 * requests and window; under the replaced limit's algorithm when the
 * override names none. @lp receives its plan. NULL when out of memory or
 * the limit does not compile. */
static const weir_rule_limit *override_limit(decision *dc, weir_engine_reader *rd,
                                             const tenant_pick *pk, const weir_rules_domain *dom,
                                             const limit_plan **lp)
{
    weir_ctx *ctx = dc->engine->ctx;
    if (!dc->tlimits &&
        !(dc->tlimits = weir__calloc(ctx, WEIR_ENGINE_MAX_LIMITS, sizeof(*dc->tlimits))))
        return NULL;
    if (!dc->tplans &&
        !(dc->tplans = weir__calloc(ctx, WEIR_ENGINE_MAX_LIMITS, sizeof(*dc->tplans))))
        return NULL;
    const tenant_limit *o = pk->over;
    weir_rule_limit *l = &dc->tlimits[dc->n_pending];
    if (pk->under) {
        *l = *pk->under;
    } else {
        memset(l, 0, sizeof(*l));
        l->failure_mode = WEIR_FAILURE_ALLOW;
        l->file = "";
        l->path = o->scope;
    }
    l->domain = weir_rules_domain_name(dom);
    l->levels = NULL;
    l->n_levels = 0;
    l->requests_per_unit = o->requests_per_unit;
    l->unit = (weir_rule_unit)o->unit;
    l->window_us = o->window_us;
    l->calendar = (weir_calendar)o->calendar;
    l->time_zone = o->time_zone;
    l->tz = o->tz;
    l->burst = 0;
    l->sub_windows = 0;
    l->unlimited = false;
    l->algorithm = o->algorithm ? (weir_algorithm)o->algorithm
                   : pk->under && !pk->under->unlimited &&
                           pk->under->algorithm != WEIR_ALGO_CONCURRENCY &&
                           pk->under->algorithm != WEIR_ALGO_LEAKY_SHAPER
                       ? pk->under->algorithm
                       : WEIR_ALGO_FIXED_WINDOW;
    *lp = &o->plan;
    if (l->algorithm == o->compiled.algorithm) {
        l->compiled = o->compiled;
        return l;
    }
    weir_limit_spec spec = {
        .algorithm = l->algorithm, .limit = l->requests_per_unit, .window_us = l->window_us};
    if (compile_override(rd, &spec, &l->compiled) != WEIR_OK)
        return NULL;
    /* another algorithm's state: a counter of its own */
    limit_plan *np = &dc->tplans[dc->n_pending];
    *np = o->plan;
    np->id.lo ^= (uint64_t)l->algorithm * 0x9e3779b97f4a7c15ull;
    counter_digest(&np->id, sizeof(np->id), dc->engine->secret, np->digest);
    *lp = np;
    return l;
}

/* A descriptor that carries a tenant's key (entry @t): its limits come
 * from the tenant's overrides, its tier and the rule file, scope by scope
 * (weir/tenants.h). */
static weir_status plan_tenant(decision *dc, weir_engine_reader *rd, const weir_request *req,
                               plan_ctx *pc, size_t t)
{
    const weir_descriptor *desc = pc->desc;
    const weir__match_result *m = pc->m;
    tenant_pick picks[WEIR_ENGINE_MAX_LIMITS];
    weir__match_result tm;
    const weir_rule *trule;
    size_t np = weir__tenant_resolve(dc->rs, m->domain, m->rule, (const weir__entry *)desc->entries,
                                     desc->n_entries, t, dc->now_us, &tm, &trule, &pc->tier, picks,
                                     WEIR_ENGINE_MAX_LIMITS);
    const weir_rule *flags_of = m->rule ? m->rule : trule;
    uint32_t flags = flags_of ? flags_of->flags : 0;
    pc->shadow = (flags & WEIR_RULE_SHADOW_MODE) != 0;
    pc->quota = (flags & WEIR_RULE_QUOTA_MODE) != 0;
    dc->quota_desc |= (uint64_t)pc->quota << pc->d;
    /* a tier's counters are named by the entries from the tenant's on */
    weir_descriptor sub = *desc;
    sub.entries = desc->entries + t;
    sub.n_entries = desc->n_entries - t;
    plan_ctx tier_pc = *pc;
    tier_pc.desc = &sub;
    tier_pc.m = &tm;
    tier_pc.value_level = trule ? single_value_level(&tm) : -1;
    static const weir__match_result no_levels = {0};
    plan_ctx over_pc = *pc;
    over_pc.m = &no_levels;
    over_pc.value_level = -1;
    over_pc.tenant_override = true;
    size_t limited = 0;
    for (size_t i = 0; i < np; i++) {
        const tenant_pick *pk = &picks[i];
        weir_status st;
        if (pk->layer == LAYER_OVERRIDE) {
            const limit_plan *lp;
            const weir_rule_limit *l = override_limit(dc, rd, pk, m->domain, &lp);
            if (!l)
                return weir__refuse(rd, WEIR_REFUSAL_NO_MEMORY, -1);
            st = plan_limit(dc, rd, req, &over_pc, l, lp);
        } else if (pk->limit->unlimited) {
            continue;
        } else {
            st =
                plan_limit(dc, rd, req, pk->layer == LAYER_TIER ? &tier_pc : pc, pk->limit, pk->lp);
        }
        if (st != WEIR_OK)
            return st;
        limited++;
    }
    weir__set_unmatched(&dc->st[pc->d]); /* written after the limits' buckets were asked for */
    if (limited == 0 && np > 0) {
        dc->st[pc->d].unlimited = true;
        dc->st[pc->d].remaining = WEIR_ENGINE_UNLIMITED_REMAINING;
    }
    return WEIR_OK;
}

/* Match every descriptor and list the limits to charge. */
weir_status weir__plan(decision *dc, weir_engine_reader *rd, const weir_request *req,
                       bool *domain_found)
{
    *domain_found = true;
    const ruleset *rs = dc->rs;
    const weir__match_domain *dom = weir__match_domain_find(rs->idx, req->domain, req->domain_len);
    if (!dom) {
        *domain_found = false;
        for (size_t d = 0; d < req->n_descriptors; d++) {
            weir_status st = check_descriptor(rd, &req->descriptors[d], d);
            if (st != WEIR_OK)
                return st;
        }
        return WEIR_OK;
    }
    uint64_t req_hits = req->hits ? req->hits : 1;
    for (size_t d = 0; d < req->n_descriptors; d++) {
        const weir_descriptor *desc = &req->descriptors[d];
        weir_status st = check_descriptor(rd, desc, d);
        if (st != WEIR_OK)
            return st;
        weir__match_result m;
        weir__match_walk(rs->idx, dom, (const weir__entry *)desc->entries, desc->n_entries, &m);
        const weir_rule *rule = m.rule;
        uint64_t hits = desc->has_hits ? desc->hits : req_hits;
        weir_op_kind kind = desc->has_hits && desc->hits == 0 ? WEIR_OP_CHECK : WEIR_OP_TAKE;
        /* a request's own override of the limit leaves tenants aside */
        const char *tkey = m.domain->tenants.key;
        int t = tkey && !desc->limit
                    ? weir__tenant_entry((const weir__entry *)desc->entries, desc->n_entries, tkey)
                    : -1;
        if (t >= 0) {
            plan_ctx pc = {.d = d,
                           .desc = desc,
                           .m = &m,
                           .value_level = rule ? single_value_level(&m) : -1,
                           .hits = hits,
                           .kind = kind};
            if ((st = plan_tenant(dc, rd, req, &pc, (size_t)t)) != WEIR_OK)
                return st;
            continue;
        }
        if (!rule) {
            plan_ctx pc = {
                .d = d, .desc = desc, .m = &m, .value_level = -1, .hits = hits, .kind = kind};
            if (desc->limit && (st = plan_orphan(dc, rd, req, m.domain, &pc)) != WEIR_OK)
                return st;
            weir__set_unmatched(&dc->st[d]); /* written after the bucket was asked for */
            continue;
        }
        bool shadow = (rule->flags & WEIR_RULE_SHADOW_MODE) != 0;
        bool quota = (rule->flags & WEIR_RULE_QUOTA_MODE) != 0;
        dc->quota_desc |= (uint64_t)quota << d;
        const limit_plan *lp = &rs->plans.limits[rs->plans.first[rule->seq]];
        int value_level = desc->limit ? -1 : single_value_level(&m);
        size_t limited = 0;
        plan_ctx pc = {.d = d,
                       .desc = desc,
                       .m = &m,
                       .value_level = value_level,
                       .shadow = shadow,
                       .quota = quota,
                       .hits = hits,
                       .kind = kind};
        for (size_t i = 0; i < rule->n_limits; i++) {
            const weir_rule_limit *l = rule->limits[i];
            if (l->unlimited)
                continue;
            if ((st = plan_limit(dc, rd, req, &pc, l, &lp[i])) != WEIR_OK)
                return st;
            limited++;
        }
        /* written after the limits' buckets were asked for */
        weir__set_unmatched(&dc->st[d]);
        if (limited == 0 && rule->n_limits > 0) {
            dc->st[d].unlimited = true;
            dc->st[d].remaining = WEIR_ENGINE_UNLIMITED_REMAINING;
        }
    }
    return WEIR_OK;
}
