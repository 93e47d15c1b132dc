/*
 * engine.c - decisions: match every descriptor, check every limit, charge
 * only if every enforcing limit admits, and report per descriptor.
 *
 * The rules in force are a refcounted `ruleset` (rules + match index)
 * behind a snapshot: a decision takes a reference inside a snapshot read,
 * so a reload never waits for decisions and a decision in flight (the
 * store may complete later) keeps its rules alive until it completes.
 *
 * Charging: the limits of non-shadow, non-quota descriptors go to the store
 * as one atomic batch (all admitted or none charged); shadow and quota-mode
 * limits go as an independent batch, each charged when it admits. The
 * decision completes when both batches have.
 *
 * Invariant: a ruleset is freed when the snapshot has replaced it and the
 * last decision holding it has completed.
 */
#include <stdatomic.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/context.h"
#include "core/snapshot.h"
#include "engine/match.h"
#include "store/store.h"
#include "weir/engine.h"

_Static_assert(sizeof(weir_entry) == sizeof(weir__entry), "weir_entry mirrors weir__entry");
_Static_assert(offsetof(weir_entry, value_len) == offsetof(weir__entry, value_len),
               "weir_entry mirrors weir__entry");

#define US_PER_S 1000000LL

typedef struct ruleset {
    _Atomic int refs;
    weir_ctx *ctx;
    weir_rules *rules;
    weir__match_index *idx;
} ruleset;

#define SECRET_BYTES 192u
#define DIGEST_BYTES 16u

struct weir_engine {
    weir_ctx *ctx;
    weir_store *store;
    weir__snap *snap;
    /* Store keys are 128-bit digests of the counter keys under this
     * random secret: 16 bytes fit inside a memory-store entry, so a
     * decision costs no key allocation and one cache miss per limit. */
    unsigned char secret[SECRET_BYTES];
};

typedef struct decision decision;

struct weir_engine_reader {
    weir_engine *engine;
    weir__snap_reader *snap;
    /* a finished decision kept for the next one (no malloc per request);
     * exchanged atomically since a store may complete on another thread */
    _Atomic(decision *) spare;
    char scratch[WEIR_MAX_KEY_BYTES];
};

/* One limit of the request to decide. */
typedef struct pending {
    uint32_t desc;
    bool enforcing; /* in the atomic batch */
    bool shadow;
    bool quota;
    bool dropped; /* replaced by another matched limit */
    const weir_rule_limit *limit;
    weir_limit eff;
    uint32_t rpu;
    weir_rule_unit unit;
    int64_t window_us;
    size_t op; /* index in ops[] */
} pending;

struct decision {
    weir_engine *engine;
    weir_engine_reader *reader;
    ruleset *rs;
    weir_descriptor_status *st;
    size_t n;
    weir_decide_cb cb;
    void *arg;
    size_t n_pending;
    pending p[WEIR_ENGINE_MAX_LIMITS];
    weir_op ops[WEIR_ENGINE_MAX_LIMITS];
    size_t n_enforcing; /* ops[0, n_enforcing) atomic, the rest independent */
    size_t n_ops;
    _Atomic int outstanding;
    bool quota_desc[WEIR_ENGINE_MAX_DESCRIPTORS];
    unsigned char keys[WEIR_ENGINE_MAX_LIMITS][DIGEST_BYTES];
};

/* ------------------------------------------------------------------ rulesets */

static void ruleset_release(ruleset *rs)
{
    if (rs && atomic_fetch_sub(&rs->refs, 1) == 1) {
        weir__match_index_free(rs->idx);
        weir_rules_free(rs->rules);
        weir__free(rs->ctx, rs);
    }
}

static void snap_destroy(void *ud, void *obj)
{
    (void)ud;
    ruleset_release(obj);
}

static weir_status ruleset_new(weir_ctx *ctx, weir_rules *rules, ruleset **out)
{
    ruleset *rs = weir__calloc(ctx, 1, sizeof(*rs));
    if (!rs)
        return WEIR_ENOMEM;
    weir_status st = weir__match_index_new(ctx, rules, &rs->idx);
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

weir_status weir_engine_new(weir_ctx *ctx, const weir_engine_options *opts, weir_rules *rules,
                            weir_engine **out)
{
    if (!ctx || !opts || !rules || !out || opts->size < sizeof(weir_engine_options) || !opts->store)
        return WEIR_EINVAL;
    weir_engine *e = weir__calloc(ctx, 1, sizeof(*e));
    if (!e)
        return WEIR_ENOMEM;
    unsigned char seed[32];
    weir_status st = weir__random(seed, sizeof(seed));
    if (st == WEIR_OK && XXH3_generateSecret(e->secret, SECRET_BYTES, seed, sizeof(seed)) != XXH_OK)
        st = WEIR_EIO;
    if (st != WEIR_OK) {
        weir__free(ctx, e);
        return st;
    }
    ruleset *rs;
    st = ruleset_new(ctx, rules, &rs);
    if (st == WEIR_OK) {
        st = weir__snap_new(ctx, rs, snap_destroy, NULL, &e->snap);
        if (st != WEIR_OK) {
            rs->rules = NULL; /* still the caller's */
            ruleset_release(rs);
        }
    }
    if (st != WEIR_OK) {
        weir__free(ctx, e);
        return st;
    }
    e->ctx = ctx;
    e->store = opts->store;
    *out = e;
    return WEIR_OK;
}

void weir_engine_free(weir_engine *engine)
{
    if (!engine)
        return;
    weir__snap_free(engine->snap);
    weir__free(engine->ctx, engine);
}

/* A limit's identity without request values, for the reload report. */
static uint64_t identity(const char *domain, const char *path, size_t path_len,
                         const weir_rule_limit *l, size_t index)
{
    XXH3_state_t s;
    XXH3_64bits_reset(&s);
    XXH3_64bits_update(&s, domain, strlen(domain) + 1);
    XXH3_64bits_update(&s, path, path_len);
    uint64_t fields[6] = {index,    l->algorithm,           l->requests_per_unit,
                          l->burst, (uint64_t)l->window_us, l->sub_windows};
    XXH3_64bits_update(&s, fields, sizeof(fields));
    XXH3_64bits_update(&s, &l->unlimited, sizeof(l->unlimited));
    if (l->name)
        XXH3_64bits_update(&s, l->name, strlen(l->name) + 1);
    return XXH3_64bits_digest(&s);
}

typedef struct id_list {
    uint64_t *v;
    size_t n, cap;
    bool oom;
} id_list;

static void id_push(weir_ctx *ctx, id_list *l, uint64_t id)
{
    if (l->oom)
        return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        uint64_t *v = weir__realloc(ctx, l->v, cap * sizeof(*v));
        if (!v) {
            l->oom = true;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = id;
}

static void collect(weir_ctx *ctx, id_list *l, const char *domain, const weir_rule *r, char *path,
                    size_t len, size_t cap)
{
    const char *k = weir_rule_key(r), *v = weir_rule_value(r);
    size_t kl = strlen(k) + 1, vl = v ? strlen(v) + 1 : 1;
    if (len + kl + vl > cap)
        return; /* deeper than any real rule file: leave it out of the report */
    memcpy(path + len, k, kl);
    if (v)
        memcpy(path + len + kl, v, vl);
    else
        path[len + kl] = '\x01';
    size_t n = len + kl + vl;
    for (size_t i = 0; i < weir_rule_limit_count(r); i++)
        id_push(ctx, l, identity(domain, path, n, weir_rule_limit_at(r, i), i));
    for (size_t i = 0; i < weir_rule_child_count(r); i++)
        collect(ctx, l, domain, weir_rule_child(r, i), path, n, cap);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static id_list identities(weir_ctx *ctx, const weir_rules *rules)
{
    id_list l = {0};
    char path[8192];
    for (size_t d = 0; d < weir_rules_domain_count(rules); d++) {
        const weir_rules_domain *dom = weir_rules_domain_at(rules, d);
        for (size_t i = 0; i < weir_rules_domain_rule_count(dom); i++)
            collect(ctx, &l, weir_rules_domain_name(dom), weir_rules_domain_rule(dom, i), path, 0,
                    sizeof(path));
    }
    if (l.v)
        qsort(l.v, l.n, sizeof(*l.v), cmp_u64);
    return l;
}

/* Log how many limits keep their counters across a reload. */
static void report_reload(weir_engine *e, const weir_rules *old, const weir_rules *next)
{
    id_list a = identities(e->ctx, old), b = identities(e->ctx, next);
    if (!a.oom && !b.oom) {
        size_t i = 0, j = 0, kept = 0;
        while (i < a.n && j < b.n) {
            if (a.v[i] == b.v[j]) {
                kept++;
                i++;
                j++;
            } else if (a.v[i] < b.v[j]) {
                i++;
            } else {
                j++;
            }
        }
        weir__log(e->ctx, WEIR_LOG_INFO,
                  "event=rules_reloaded limits=%zu kept=%zu new=%zu removed=%zu", b.n, kept,
                  b.n - kept, a.n - kept);
    }
    weir__free(e->ctx, a.v);
    weir__free(e->ctx, b.v);
}

weir_status weir_engine_reload(weir_engine *engine, weir_rules *rules)
{
    if (!engine || !rules)
        return WEIR_EINVAL;
    ruleset *rs;
    weir_status st = ruleset_new(engine->ctx, rules, &rs);
    if (st != WEIR_OK)
        return st;
    /* the swap is serialised; read the old rules for the report first */
    weir__snap_reader *r;
    if (weir__snap_reader_new(engine->snap, &r) == WEIR_OK) {
        const ruleset *old = weir__snap_enter(r);
        report_reload(engine, old->rules, rules);
        weir__snap_exit(r);
        weir__snap_reader_free(r);
    }
    st = weir__snap_swap(engine->snap, rs);
    if (st != WEIR_OK) {
        rs->rules = NULL;
        ruleset_release(rs);
    }
    return st;
}

weir_status weir_engine_reload_path(weir_engine *engine, const char *path,
                                    const weir_rules_options *opts, weir_rules_error *errors,
                                    size_t max_errors, size_t *n_errors)
{
    if (!engine || !path)
        return WEIR_EINVAL;
    weir_rules *rules;
    weir_status st = weir_rules_load(engine->ctx, path, opts, &rules, errors, max_errors, n_errors);
    if (st != WEIR_OK) {
        weir__log(engine->ctx, WEIR_LOG_ERROR,
                  "event=rules_rejected path=%s status=%s; the rules in force stay", path,
                  weir_status_name(st));
        return st;
    }
    st = weir_engine_reload(engine, rules);
    if (st != WEIR_OK)
        weir_rules_free(rules);
    return st;
}

weir_status weir_engine_reader_new(weir_engine *engine, weir_engine_reader **out)
{
    if (!engine || !out)
        return WEIR_EINVAL;
    weir_engine_reader *r = weir__calloc(engine->ctx, 1, sizeof(*r));
    if (!r)
        return WEIR_ENOMEM;
    weir_status st = weir__snap_reader_new(engine->snap, &r->snap);
    if (st != WEIR_OK) {
        weir__free(engine->ctx, r);
        return st;
    }
    r->engine = engine;
    atomic_init(&r->spare, NULL);
    *out = r;
    return WEIR_OK;
}

void weir_engine_reader_free(weir_engine_reader *reader)
{
    if (!reader)
        return;
    weir__snap_reader_free(reader->snap);
    weir__free(reader->engine->ctx, atomic_load(&reader->spare));
    weir__free(reader->engine->ctx, reader);
}

/* ------------------------------------------------------------------ decisions */

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

static weir_status check_request(const weir_request *req)
{
    if (!req->domain || req->domain_len == 0 || !req->descriptors || req->n_descriptors == 0 ||
        req->n_descriptors > WEIR_ENGINE_MAX_DESCRIPTORS)
        return WEIR_EINVAL;
    for (size_t i = 0; i < req->n_descriptors; i++) {
        const weir_descriptor *d = &req->descriptors[i];
        if (!d->entries || d->n_entries == 0 || d->n_entries > WEIR_ENGINE_MAX_ENTRIES)
            return WEIR_EINVAL;
        if (d->limit && unit_us(d->limit->unit) == 0)
            return WEIR_EINVAL;
    }
    return WEIR_OK;
}

/* The effective limit: as configured, or the request's override with the
 * configured algorithm. */
static weir_status effective(const weir_rule_limit *l, const weir_limit_override *o, pending *p)
{
    if (!o) {
        p->eff = l->compiled;
        p->rpu = l->requests_per_unit;
        p->unit = l->unit;
        p->window_us = l->window_us;
        return WEIR_OK;
    }
    weir_limit_spec spec = {.algorithm = l->algorithm,
                            .limit = o->requests_per_unit,
                            .window_us = unit_us(o->unit),
                            .burst = l->burst,
                            .sub_windows = 0};
    if (l->algorithm == WEIR_ALGO_SLIDING_COUNTER && l->sub_windows &&
        spec.window_us % l->sub_windows == 0)
        spec.sub_windows = l->sub_windows;
    weir_status st = weir_limit_compile(&spec, &p->eff);
    if (st != WEIR_OK)
        return st == WEIR_EINVAL ? WEIR_ERANGE : st;
    p->rpu = o->requests_per_unit;
    p->unit = o->unit;
    p->window_us = spec.window_us;
    return WEIR_OK;
}

static bool name_replaced(const decision *dc, const pending *p)
{
    if (!p->limit->name)
        return false;
    for (size_t i = 0; i < dc->n_pending; i++) {
        const weir_rule_limit *o = dc->p[i].limit;
        if (&dc->p[i] == p)
            continue;
        for (size_t k = 0; k < o->n_replaces; k++)
            if (strcmp(o->replaces[k], p->limit->name) == 0)
                return true;
    }
    return false;
}

static void decision_free(decision *dc)
{
    ruleset_release(dc->rs);
    dc->rs = NULL;
    decision *prev = atomic_exchange(&dc->reader->spare, dc);
    weir__free(dc->engine->ctx, prev);
}

/* Whether status a is more restrictive than b (denied first, then less
 * remaining). */
static bool stricter(bool a_denied, uint64_t a_rem, bool b_denied, uint64_t b_rem)
{
    if (a_denied != b_denied)
        return a_denied;
    return a_rem < b_rem;
}

static void finish(decision *dc)
{
    bool chosen[WEIR_ENGINE_MAX_DESCRIPTORS] = {false};
    bool chosen_denied[WEIR_ENGINE_MAX_DESCRIPTORS] = {false};
    for (size_t i = 0; i < dc->n_pending; i++) {
        pending *p = &dc->p[i];
        if (p->dropped)
            continue;
        const weir_op *op = &dc->ops[p->op];
        weir_result r = op->result;
        bool failed = op->status != WEIR_OK;
        bool denied = failed ? p->limit->failure_mode == WEIR_FAILURE_DENY : !r.allowed;
        uint64_t rem = failed ? 0 : r.remaining;
        weir_descriptor_status *s = &dc->st[p->desc];
        if (chosen[p->desc] && !stricter(denied, rem, chosen_denied[p->desc], s->remaining))
            continue;
        chosen[p->desc] = true;
        chosen_denied[p->desc] = denied;
        s->limit = p->limit;
        s->requests_per_unit = p->rpu;
        s->unit = p->unit;
        s->window_us = p->window_us;
        s->remaining = rem;
        s->reset_after_us = failed ? 0 : r.reset_after_us;
        s->retry_after_us = failed ? 0 : r.retry_after_us;
        s->delay_us = failed ? 0 : r.delay_us;
        s->failure_mode = failed;
        s->unlimited = false;
        s->shadow = p->shadow;
        s->would_deny = p->shadow && denied;
        s->code = denied && !p->shadow ? WEIR_CODE_OVER_LIMIT : WEIR_CODE_OK;
    }
    /* quota mode: the request is over only if every quota-mode descriptor is */
    bool over = false, any_quota = false, all_quota_over = true;
    for (size_t d = 0; d < dc->n; d++) {
        if (dc->quota_desc[d]) {
            any_quota = true;
            all_quota_over &= dc->st[d].code == WEIR_CODE_OVER_LIMIT;
        } else if (dc->st[d].code == WEIR_CODE_OVER_LIMIT) {
            over = true;
        }
    }
    if (any_quota && !all_quota_over)
        for (size_t d = 0; d < dc->n; d++)
            if (dc->quota_desc[d])
                dc->st[d].code = WEIR_CODE_OK;
    if (any_quota && all_quota_over)
        over = true;
    dc->cb(dc->arg, over ? WEIR_CODE_OVER_LIMIT : WEIR_CODE_OK, dc->st, dc->n);
    decision_free(dc);
}

static void batch_done(void *arg, weir_op *ops, size_t n, weir_status status)
{
    decision *dc = arg;
    if (status != WEIR_OK)
        for (size_t i = 0; i < n; i++)
            ops[i].status = status;
    if (atomic_fetch_sub(&dc->outstanding, 1) == 1)
        finish(dc);
}

/* Submit one batch; a refused batch completes at once with its error. */
static void submit(decision *dc, weir_op *ops, size_t n, int64_t now_us, unsigned flags)
{
    weir_status st = weir_store_submit(dc->engine->store, ops, n, now_us, flags, batch_done, dc);
    if (st != WEIR_OK)
        batch_done(dc, ops, n, st);
}

static void set_unmatched(weir_descriptor_status *s)
{
    memset(s, 0, sizeof(*s));
    s->code = WEIR_CODE_OK;
}

/* Match every descriptor and list the limits to charge. */
static weir_status plan(decision *dc, weir_engine_reader *rd, const weir_request *req,
                        bool *domain_found)
{
    *domain_found = true;
    for (size_t d = 0; d < req->n_descriptors; d++) {
        const weir_descriptor *desc = &req->descriptors[d];
        set_unmatched(&dc->st[d]);
        weir__match_result m;
        weir_status st = weir__match(dc->rs->idx, req->domain, req->domain_len,
                                     (const weir__entry *)desc->entries, desc->n_entries, &m);
        if (st != WEIR_OK)
            return st;
        if (!m.domain_found) {
            *domain_found = false;
            return WEIR_OK;
        }
        if (!m.rule)
            continue;
        uint32_t flags = weir_rule_flags(m.rule);
        dc->quota_desc[d] = (flags & WEIR_RULE_QUOTA_MODE) != 0;
        size_t nl = weir_rule_limit_count(m.rule), limited = 0;
        for (size_t i = 0; i < nl; i++) {
            const weir_rule_limit *l = weir_rule_limit_at(m.rule, i);
            if (l->unlimited)
                continue;
            if (dc->n_pending == WEIR_ENGINE_MAX_LIMITS)
                return WEIR_EINVAL;
            pending *p = &dc->p[dc->n_pending];
            memset(p, 0, sizeof(*p));
            p->desc = (uint32_t)d;
            p->limit = l;
            p->shadow = (flags & WEIR_RULE_SHADOW_MODE) != 0;
            p->quota = dc->quota_desc[d];
            p->enforcing = !p->shadow && !p->quota;
            if ((st = effective(l, desc->limit, p)) != WEIR_OK)
                return st;
            size_t len = weir__counter_key(&m, (const weir__entry *)desc->entries, i, rd->scratch,
                                           sizeof(rd->scratch) - 16);
            if (len == 0)
                return WEIR_EINVAL; /* a counter key past WEIR_MAX_KEY_BYTES */
            if (desc->limit) {
                /* an override is a different counter: append its identity */
                uint32_t rpu = p->rpu;
                int64_t w = p->window_us;
                rd->scratch[len++] = 'O';
                memcpy(rd->scratch + len, &rpu, sizeof(rpu));
                memcpy(rd->scratch + len + sizeof(rpu), &w, sizeof(w));
                len += sizeof(rpu) + sizeof(w);
            }
            XXH128_hash_t h =
                XXH3_128bits_withSecret(rd->scratch, len, dc->engine->secret, SECRET_BYTES);
            XXH128_canonicalFromHash((XXH128_canonical_t *)dc->keys[dc->n_pending], h);
            dc->ops[dc->n_pending] = (weir_op){.key = dc->keys[dc->n_pending],
                                               .key_len = DIGEST_BYTES,
                                               .limit = &p->eff,
                                               .hits = desc->has_hits ? desc->hits
                                                       : req->hits    ? req->hits
                                                                      : 1};
            dc->ops[dc->n_pending].kind =
                desc->has_hits && desc->hits == 0 ? WEIR_OP_CHECK : WEIR_OP_TAKE;
            dc->n_pending++;
            limited++;
        }
        if (limited == 0 && nl > 0) {
            dc->st[d].unlimited = true;
            dc->st[d].remaining = WEIR_ENGINE_UNLIMITED_REMAINING;
        }
    }
    return WEIR_OK;
}

weir_status weir_engine_decide(weir_engine_reader *reader, const weir_request *req, int64_t now_us,
                               weir_descriptor_status *statuses, weir_decide_cb cb, void *arg)
{
    if (!reader || !req || !statuses || !cb)
        return WEIR_EINVAL;
    weir_status st = check_request(req);
    if (st != WEIR_OK)
        return st;
    weir_engine *e = reader->engine;
    decision *dc = atomic_exchange(&reader->spare, NULL);
    if (!dc && !(dc = weir__malloc(e->ctx, sizeof(*dc))))
        return WEIR_ENOMEM;
    /* only what a decision reads before writing it is reset */
    dc->engine = e;
    dc->reader = reader;
    dc->n_pending = 0;
    memset(dc->quota_desc, 0, sizeof(dc->quota_desc));
    dc->st = statuses;
    dc->n = req->n_descriptors;
    dc->cb = cb;
    dc->arg = arg;
    ruleset *rs = (ruleset *)weir__snap_enter(reader->snap);
    atomic_fetch_add(&rs->refs, 1);
    weir__snap_exit(reader->snap);
    dc->rs = rs;

    bool domain_found;
    st = plan(dc, reader, req, &domain_found);
    if (st != WEIR_OK) {
        decision_free(dc);
        return st;
    }
    if (!domain_found) {
        for (size_t d = 0; d < dc->n; d++)
            set_unmatched(&dc->st[d]);
        dc->n_pending = 0;
    }
    /* replaces: a limit named by another matched limit's `replaces` goes */
    for (size_t i = 0; i < dc->n_pending; i++)
        dc->p[i].dropped = name_replaced(dc, &dc->p[i]);

    /* lay the ops out: enforcing first (one atomic batch), then the rest */
    weir_op staged[WEIR_ENGINE_MAX_LIMITS];
    memcpy(staged, dc->ops, dc->n_pending * sizeof(weir_op));
    size_t n = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < dc->n_pending; i++) {
            pending *p = &dc->p[i];
            if (p->dropped || p->enforcing != (pass == 0))
                continue;
            weir_op op = staged[i];
            p->op = n;
            dc->ops[n++] = op;
        }
        if (pass == 0)
            dc->n_enforcing = n;
    }
    for (size_t i = 0; i < dc->n_pending; i++)
        if (!dc->p[i].dropped)
            dc->ops[dc->p[i].op].limit = &dc->p[i].eff;
    dc->n_ops = n;

    /* The last batch to complete frees the decision: read what the second
     * submit needs before the first. */
    size_t n_atomic = dc->n_enforcing, n_rest = n - dc->n_enforcing;
    int batches = (n_atomic > 0) + (n_rest > 0);
    if (batches == 0) {
        finish(dc);
        return WEIR_OK;
    }
    atomic_init(&dc->outstanding, batches);
    weir_op *rest = dc->ops + n_atomic;
    if (n_atomic > 0)
        submit(dc, dc->ops, n_atomic, now_us, WEIR_BATCH_ATOMIC);
    if (n_rest > 0)
        submit(dc, rest, n_rest, now_us, 0);
    return WEIR_OK;
}
