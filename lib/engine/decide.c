/*
 * decide.c - decisions: match every descriptor, check every limit, charge
 * only if every enforcing limit admits, and report per descriptor.
 *
 * A decision takes a reference on the rules in force inside a snapshot
 * read, so a reload never waits for decisions and a decision in flight
 * (the store may complete later) keeps its rules alive until it completes.
 *
 * Charging: the limits of non-shadow, non-quota descriptors go to the store
 * as one atomic batch (all admitted or none charged); shadow and quota-mode
 * limits go as an independent batch, each charged when it admits. The
 * decision completes when both batches have.
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
#include "weir/engine.h"

_Static_assert(sizeof(weir_entry) == sizeof(weir__entry), "weir_entry mirrors weir__entry");
_Static_assert(offsetof(weir_entry, value_len) == offsetof(weir__entry, value_len),
               "weir_entry mirrors weir__entry");
_Static_assert(WEIR_ENGINE_MAX_DESCRIPTORS <= 64, "quota_desc has a bit per descriptor");
_Static_assert(WEIR_ENGINE_MAX_ENTRIES <= WEIR__MATCH_MAX_ENTRIES,
               "every descriptor check_descriptor() accepts can be matched");

#define US_PER_S 1000000LL

/* One limit of the request to decide. */
typedef struct pending {
    uint32_t desc;
    bool enforcing; /* in the atomic batch */
    bool shadow;
    bool quota;
    bool dropped; /* replaced by another matched limit */
    bool local;   /* decided on the fallback store (failure_mode local) */
    bool tenant_override;
    const char *tier; /* the tenant's tier (plan_ctx.tier) */
    const weir_rule_limit *limit;
    const weir_limit *lim; /* &limit->compiled, or &eff for an override */
    weir_limit eff;
    uint64_t hits;
    weir_op_kind kind;
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
    weir_limit_outcome outcomes[WEIR_ENGINE_MAX_LIMITS];
    weir_op ops[WEIR_ENGINE_MAX_LIMITS];
    /* charges of count_rejected limits after a denial (not reported) */
    weir_op extra[WEIR_ENGINE_MAX_LIMITS];
    int64_t now_us;
    size_t n_enforcing; /* ops[0, n_enforcing) atomic, the rest independent */
    size_t n_ops;
    bool owned; /* reader->own, holding no reference on rs */
    _Atomic int outstanding;
    uint64_t quota_desc; /* bit d: descriptor d is in quota mode */
    unsigned char keys[WEIR_ENGINE_MAX_LIMITS][DIGEST_BYTES];
    /* The limits of descriptors that name no rule and give one of their
     * own (plan_orphan()), by descriptor; made on first use and kept with
     * the decision's memory. */
    weir_rule_limit *orphans;
    /* The limits tenant overrides put in force, by pending index; made on
     * first use and kept with the decision's memory. */
    weir_rule_limit *tlimits;
    limit_plan *tplans;
    /* A store shared between processes: stable keys, limit i's at
     * kbuf + koff[i], kept with the decision's memory for the next one. */
    char *kbuf;
    size_t kcap, kused;
    uint32_t koff[WEIR_ENGINE_MAX_LIMITS];
    uint32_t klen[WEIR_ENGINE_MAX_LIMITS];
};

/* A decision's memory, and its key buffer's, when it is not kept. */
void weir__decision_destroy(weir_ctx *ctx, decision *dc)
{
    if (!dc)
        return;
    weir__free(ctx, dc->kbuf);
    weir__free(ctx, dc->orphans);
    weir__free(ctx, dc->tlimits);
    weir__free(ctx, dc->tplans);
    weir__free(ctx, dc);
}

/* A decision's memory, fresh: nothing kept with it yet. */
static decision *decision_alloc(weir_ctx *ctx)
{
    decision *dc = weir__malloc(ctx, sizeof(*dc));
    if (dc) {
        dc->kbuf = NULL;
        dc->kcap = 0;
        dc->orphans = NULL;
        dc->tlimits = NULL;
        dc->tplans = NULL;
    }
    return dc;
}

/* ------------------------------------------------------------------ decisions */

weir_refusal weir_engine_refusal(const weir_engine_reader *reader)
{
    weir_refusal none = {WEIR_REFUSAL_NONE, -1};
    return reader ? reader->refusal : none;
}

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

/* The request's own fields. Its descriptors are checked one by one as they
 * are planned (check_descriptor()), so that the first counter's buckets
 * are asked for as early as possible; an error there still fails the
 * whole request before anything is charged. */
/* Records why the reader's decision is refused (descriptor @d, or -1 for
 * the request) and returns the status that goes with it. */
static weir_status refuse(weir_engine_reader *rd, weir_refusal_code code, long d)
{
    rd->refusal.code = code;
    rd->refusal.descriptor = (int32_t)d;
    return code == WEIR_REFUSAL_BAD_OVERRIDE ? WEIR_ERANGE
           : code == WEIR_REFUSAL_NO_MEMORY  ? WEIR_ENOMEM
                                             : WEIR_EINVAL;
}

static weir_status check_request(weir_engine_reader *rd, const weir_request *req)
{
    if (!req->domain || req->domain_len == 0)
        return refuse(rd, WEIR_REFUSAL_EMPTY_DOMAIN, -1);
    if (!req->descriptors || req->n_descriptors == 0)
        return refuse(rd, WEIR_REFUSAL_NO_DESCRIPTORS, -1);
    if (req->n_descriptors > WEIR_ENGINE_MAX_DESCRIPTORS)
        return refuse(rd, WEIR_REFUSAL_TOO_MANY_DESCRIPTORS, -1);
    return WEIR_OK;
}

static weir_status check_descriptor(weir_engine_reader *rd, const weir_descriptor *d, size_t i)
{
    long at = (long)i;
    if (!d->entries || d->n_entries == 0)
        return refuse(rd, WEIR_REFUSAL_NO_ENTRIES, at);
    if (d->n_entries > WEIR_ENGINE_MAX_ENTRIES)
        return refuse(rd, WEIR_REFUSAL_TOO_MANY_ENTRIES, at);
    for (size_t k = 0; k < d->n_entries; k++) {
        const weir_entry *en = &d->entries[k];
        if ((!en->key && en->key_len) || (!en->value && en->value_len))
            return refuse(rd, WEIR_REFUSAL_MISSING_BYTES, at);
    }
    if (d->limit && rd->engine->refuse_overrides)
        return refuse(rd, WEIR_REFUSAL_OVERRIDE_REFUSED, at);
    if (d->limit && unit_us(d->limit->unit) == 0)
        return refuse(rd, WEIR_REFUSAL_UNKNOWN_UNIT, at);
    return WEIR_OK;
}

static bool same_spec(const weir_limit_spec *a, const weir_limit_spec *b)
{
    return a->algorithm == b->algorithm && a->limit == b->limit && a->window_us == b->window_us &&
           a->burst == b->burst && a->sub_windows == b->sub_windows;
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
                            .sub_windows = 0};
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
    if (dc->owned)
        return; /* the snapshot section holds the rules; the memory is the reader's */
    weir__ruleset_release(dc->rs);
    dc->rs = NULL;
    weir_engine_reader *rd = dc->reader;
    weir_ctx *ctx = dc->engine->ctx;
    /* dc is the reader's thread's to reuse from here on */
    decision *prev = atomic_exchange(&rd->spare, dc);
    weir__decision_destroy(ctx, prev);
    weir__reader_unhold(rd); /* the last touch of the reader */
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
    size_t n_outcomes = 0;
    for (size_t i = 0; i < dc->n_pending; i++) {
        const pending *p = &dc->p[i];
        if (p->dropped)
            continue;
        const weir_op *op = &dc->ops[p->op];
        const weir_result *r = &op->result;
        bool failed = op->status != WEIR_OK;
        bool denied = failed ? p->limit->failure_mode == WEIR_FAILURE_DENY : !r->allowed;
        uint64_t rem = failed ? 0 : r->remaining;
        int64_t reset = failed ? 0 : r->reset_after_us;
        weir_descriptor_status *s = &dc->st[p->desc];
        /* pending limits come descriptor by descriptor, so each
         * descriptor's outcomes are one run of the array */
        weir_limit_outcome *o = &dc->outcomes[n_outcomes++];
        o->limit = p->limit;
        o->requests_per_unit = p->rpu;
        o->unit = p->unit;
        o->window_us = p->window_us;
        o->remaining = rem;
        o->reset_after_us = reset;
        o->denied = denied;
        o->shadow = p->shadow;
        o->failure_mode = failed || p->local;
        o->local = p->local;
        o->lease = failed || p->local ? 0 : r->lease; /* a local lease times out */
        o->key = op->key;
        o->key_len = op->key_len;
        o->tier = p->tier;
        o->tenant_override = p->tenant_override;
        if (!s->n_outcomes)
            s->outcomes = o;
        s->n_outcomes++;
        /* the status reports its first limit until a stricter one comes
         * (s->limit is NULL until then; a reported limit denied when it
         * made the code OVER_LIMIT or, in shadow mode, would_deny) */
        if (s->limit &&
            !stricter(denied, rem, s->code == WEIR_CODE_OVER_LIMIT || s->would_deny, s->remaining))
            continue;
        s->limit = p->limit;
        s->requests_per_unit = p->rpu;
        s->unit = p->unit;
        s->window_us = p->window_us;
        s->remaining = rem;
        s->reset_after_us = reset;
        s->retry_after_us = failed ? 0 : r->retry_after_us;
        s->delay_us = failed ? 0 : r->delay_us;
        s->failure_mode = failed || p->local;
        s->local = p->local;
        s->unlimited = false;
        s->shadow = p->shadow;
        s->would_deny = p->shadow && denied;
        s->code = denied && !p->shadow ? WEIR_CODE_OVER_LIMIT : WEIR_CODE_OK;
    }
    /* quota mode: the request is over only if every quota-mode descriptor is */
    bool over = false, any_quota = false, all_quota_over = true;
    for (size_t d = 0; d < dc->n; d++) {
        if (dc->quota_desc >> d & 1u) {
            any_quota = true;
            all_quota_over &= dc->st[d].code == WEIR_CODE_OVER_LIMIT;
        } else if (dc->st[d].code == WEIR_CODE_OVER_LIMIT) {
            over = true;
        }
    }
    if (any_quota && !all_quota_over)
        for (size_t d = 0; d < dc->n; d++)
            if (dc->quota_desc >> d & 1u)
                dc->st[d].code = WEIR_CODE_OK;
    if (any_quota && all_quota_over)
        over = true;
    dc->cb(dc->arg, over ? WEIR_CODE_OVER_LIMIT : WEIR_CODE_OK, dc->st, dc->n);
    decision_free(dc);
}

/* Add d to the decision's count of batches under way; returns the new
 * count. A store that completes inline completes every batch on this
 * thread before submitting it returns, so no other thread counts: plain
 * loads and stores do, without a locked instruction. */
static int batch_count(decision *dc, int d)
{
    if (dc->engine->inline_store) {
        int left = atomic_load_explicit(&dc->outstanding, memory_order_relaxed) + d;
        atomic_store_explicit(&dc->outstanding, left, memory_order_relaxed);
        return left;
    }
    return atomic_fetch_add(&dc->outstanding, d) + d;
}

typedef struct local_result {
    weir_status status;
} local_result;

static void local_done(void *arg, weir_op *ops, size_t n, weir_status status)
{
    (void)ops, (void)n;
    ((local_result *)arg)->status = status;
}

/* The ops of a batch the store failed whose limits have failure_mode
 * local: decided again, at once, on the fallback store, each under its
 * limit's local share; an atomic batch's stay one atomic batch there.
 * What cannot be decided locally keeps its failure (and fails open). */
static void decide_locally(decision *dc, weir_op *ops, size_t n, bool atomic)
{
    weir_engine *e = dc->engine;
    if (!e->fallback || ops < dc->ops || ops >= dc->ops + WEIR_ENGINE_MAX_LIMITS)
        return; /* no fallback, or count_rejected's extra charges */
    size_t failed = 0;
    for (size_t i = 0; i < n; i++)
        failed += ops[i].status != WEIR_OK;
    if (failed == 0)
        return;
    weir_op local[WEIR_ENGINE_MAX_LIMITS];
    weir_limit lims[WEIR_ENGINE_MAX_LIMITS];
    pending *owner[WEIR_ENGINE_MAX_LIMITS];
    size_t from[WEIR_ENGINE_MAX_LIMITS];
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (ops[i].status == WEIR_OK)
            continue;
        size_t slot = (size_t)(&ops[i] - dc->ops);
        pending *p = NULL;
        for (size_t k = 0; k < dc->n_pending && !p; k++)
            if (!dc->p[k].dropped && dc->p[k].op == slot)
                p = &dc->p[k];
        if (!p || p->limit->failure_mode != WEIR_FAILURE_LOCAL)
            continue;
        uint32_t ppm = p->limit->local_share_ppm ? p->limit->local_share_ppm : e->local_share_ppm;
        if (weir__local_limit(p->lim, ppm, &lims[m]) != WEIR_OK)
            continue;
        local[m] = ops[i];
        local[m].limit = &lims[m];
        owner[m] = p;
        from[m] = i;
        m++;
    }
    if (m == 0)
        return;
    local_result r = {WEIR_EUNAVAIL};
    if (weir_store_submit(e->fallback, local, m, dc->now_us, atomic ? WEIR_BATCH_ATOMIC : 0,
                          local_done, &r) != WEIR_OK ||
        r.status != WEIR_OK)
        return;
    for (size_t j = 0; j < m; j++) {
        if (local[j].status != WEIR_OK)
            continue;
        weir_op *op = &ops[from[j]];
        op->status = WEIR_OK;
        op->result = local[j].result;
        owner[j]->local = true;
    }
}

static void batch_done(void *arg, weir_op *ops, size_t n, weir_status status)
{
    decision *dc = arg;
    if (status != WEIR_OK)
        for (size_t i = 0; i < n; i++)
            ops[i].status = status;
    /* the whole batch failed, or some ops did (a Redis Cluster node down) */
    decide_locally(dc, ops, n, false);
    if (batch_count(dc, -1) == 0)
        finish(dc);
}

/* Submit one batch; a refused batch completes at once with its error. */
static void submit(decision *dc, weir_op *ops, size_t n, unsigned flags, weir_store_cb cb)
{
    weir_engine *e = dc->engine;
    if ((flags & WEIR_BATCH_ATOMIC) && e->run_planned) {
        /* an inline store decides at once: the plan built these ops and
         * asked for their buckets already, so it neither checks nor fetches */
        cb(dc, ops, n, e->run_planned(e->store, ops, n, dc->now_us));
        return;
    }
    if (!e->shared_keys)
        flags |= WEIR_BATCH_DIGESTS;
    weir_store_session *ss = dc->reader->session;
    weir_status st = ss ? weir_store_session_submit(ss, ops, n, dc->now_us, flags, cb, dc)
                        : weir_store_submit(e->store, ops, n, dc->now_us, flags, cb, dc);
    if (st != WEIR_OK)
        cb(dc, ops, n, st);
}

/* The atomic batch is done. When it was denied, nothing was charged; limits
 * with count_rejected are charged anyway, as upstream counts every request:
 * a limit that admitted takes the request's hits, one that denied takes
 * what it has left (so it ends exhausted, never past its limit). */
static void atomic_done(void *arg, weir_op *ops, size_t n, weir_status status)
{
    decision *dc = arg;
    if (status != WEIR_OK)
        for (size_t i = 0; i < n; i++)
            ops[i].status = status;
    decide_locally(dc, ops, n, true);
    /* count_rejected charges follow a denial by the store itself */
    bool denied = false;
    for (size_t i = 0; status == WEIR_OK && i < n; i++)
        denied |= ops[i].status == WEIR_OK && ops[i].kind == WEIR_OP_TAKE && !ops[i].result.allowed;
    size_t ne = 0;
    for (size_t i = 0; denied && i < dc->n_pending; i++) {
        const pending *p = &dc->p[i];
        const weir_op *op = &dc->ops[p->op];
        if (p->dropped || !p->enforcing || !p->limit->count_rejected || op->kind != WEIR_OP_TAKE ||
            op->status != WEIR_OK)
            continue;
        uint64_t hits = op->result.allowed                ? op->hits
                        : op->result.remaining < op->hits ? op->result.remaining
                                                          : op->hits;
        if (hits == 0)
            continue;
        dc->extra[ne] = *op;
        dc->extra[ne].hits = hits;
        ne++;
    }
    if (ne > 0) {
        batch_count(dc, 1);
        submit(dc, dc->extra, ne, 0, batch_done);
    }
    batch_done(arg, ops, n, WEIR_OK); /* each op has its status by now */
}

/* Field by field: a whole-struct copy or memset of this size compiles to
 * `rep stos` on x86-64, whose start-up cost was a seventh of the planning's
 * time (perf); these compile to a few moves. A field added to the struct
 * must be added here too (the assertion is a reminder, not a proof: a new
 * bool may fit in padding). */
_Static_assert(sizeof(weir_descriptor_status) == 88 || sizeof(void *) != 8,
               "set_unmatched() sets every field of weir_descriptor_status");
static void set_unmatched(weir_descriptor_status *s)
{
    s->code = WEIR_CODE_OK;
    s->limit = NULL;
    s->requests_per_unit = 0;
    s->unit = WEIR_UNIT_NONE;
    s->window_us = 0;
    s->remaining = 0;
    s->reset_after_us = 0;
    s->retry_after_us = 0;
    s->delay_us = 0;
    s->shadow = false;
    s->would_deny = false;
    s->failure_mode = false;
    s->local = false;
    s->unlimited = false;
    s->domain_not_found = false;
    s->outcomes = NULL;
    s->n_outcomes = 0;
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
static void place_op(decision *dc, size_t i, size_t slot)
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
    op->reserve = 0;
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
        return refuse(rd, WEIR_REFUSAL_TOO_MANY_LIMITS, -1);
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
        return refuse(rd, st == WEIR_ERANGE ? WEIR_REFUSAL_BAD_OVERRIDE : WEIR_REFUSAL_NO_MEMORY,
                      d);
    /* a calendar limit counts its period: from @period on */
    bool calendar = l->calendar != WEIR_CALENDAR_NONE && !desc->limit;
    int64_t period = 0;
    if (calendar && (st = calendar_limit(rd, l, dc->now_us, p, &period)) != WEIR_OK)
        return refuse(rd, WEIR_REFUSAL_NO_MEMORY, d);
    unsigned char *key = dc->keys[dc->n_pending];
    if (e->shared_keys) {
        /* the same values are refused as with digests (below), so a
         * request means the same on every store */
        if (counter_bytes(&lp->id, pc->m, desc->entries, desc->limit ? p : NULL, rd->scratch,
                          sizeof(rd->scratch)) == 0)
            return refuse(rd, WEIR_REFUSAL_VALUES_TOO_LONG, d);
        weir__counter_name cn = {req->domain,   req->domain_len,     lp->id.lo, lp->id.hi,   pc->m,
                                 desc->entries, desc->limit != NULL, p->rpu,    p->window_us};
        size_t len = weir__stable_key(&cn, rd->scratch);
        if (calendar)
            len += (size_t)snprintf(rd->scratch + len, sizeof(rd->scratch) - len, ":c%lld",
                                    (long long)(period / US_PER_S));
        if (!keep_key(dc, dc->n_pending, rd->scratch, len))
            return refuse(rd, WEIR_REFUSAL_NO_MEMORY, -1);
    } else if (lp->fixed && !desc->limit) {
        memcpy(key, lp->digest, DIGEST_BYTES);
    } else if (pc->value_level >= 0) {
        if (!value_digest(lp, &desc->entries[pc->value_level], e->secret, key))
            return refuse(rd, WEIR_REFUSAL_VALUES_TOO_LONG, d);
    } else {
        size_t len = counter_bytes(&lp->id, pc->m, desc->entries, desc->limit ? p : NULL,
                                   rd->scratch, sizeof(rd->scratch));
        if (len == 0)
            return refuse(rd, WEIR_REFUSAL_VALUES_TOO_LONG, d);
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
        place_op(dc, dc->n_pending, dc->n_pending);
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
        return refuse(rd, WEIR_REFUSAL_NO_MEMORY, -1);
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
    limit_plan lp = {{id.low64, id.high64}, false, {0}};
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
                return refuse(rd, WEIR_REFUSAL_NO_MEMORY, -1);
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
    set_unmatched(&dc->st[pc->d]); /* written after the limits' buckets were asked for */
    if (limited == 0 && np > 0) {
        dc->st[pc->d].unlimited = true;
        dc->st[pc->d].remaining = WEIR_ENGINE_UNLIMITED_REMAINING;
    }
    return WEIR_OK;
}

/* Match every descriptor and list the limits to charge. */
static weir_status plan(decision *dc, weir_engine_reader *rd, const weir_request *req,
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
            set_unmatched(&dc->st[d]); /* written after the bucket was asked for */
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
        set_unmatched(&dc->st[d]);
        if (limited == 0 && rule->n_limits > 0) {
            dc->st[d].unlimited = true;
            dc->st[d].remaining = WEIR_ENGINE_UNLIMITED_REMAINING;
        }
    }
    return WEIR_OK;
}

static weir_status decide_planned(decision *dc, weir_engine_reader *reader, const weir_request *req,
                                  int64_t now_us);

weir_status weir_engine_decide(weir_engine_reader *reader, const weir_request *req, int64_t now_us,
                               weir_descriptor_status *statuses, weir_decide_cb cb, void *arg)
{
    if (!reader || !req || !statuses || !cb)
        return WEIR_EINVAL;
    reader->refusal.code = WEIR_REFUSAL_NONE;
    reader->refusal.descriptor = -1;
    weir_status st = check_request(reader, req);
    if (st != WEIR_OK)
        return st;
    weir_engine *e = reader->engine;
    /* With an inline store at depth 0 the decision is the reader's own and
     * the rules are read inside the snapshot section (see the reader). */
    bool own = reader->depth == 0 && e->inline_store;
    decision *dc;
    if (own) {
        if (!reader->own && !(reader->own = decision_alloc(e->ctx)))
            return refuse(reader, WEIR_REFUSAL_NO_MEMORY, -1);
        dc = reader->own;
    } else {
        atomic_fetch_add_explicit(&reader->live, 1, memory_order_relaxed);
        dc = atomic_exchange(&reader->spare, NULL);
        if (!dc && !(dc = decision_alloc(e->ctx))) {
            atomic_fetch_sub(&reader->live, 1);
            return refuse(reader, WEIR_REFUSAL_NO_MEMORY, -1);
        }
    }
    /* only what a decision reads before writing it is reset */
    dc->engine = e;
    dc->reader = reader;
    dc->owned = own;
    dc->n_pending = 0;
    dc->n_enforcing = 0;
    dc->quota_desc = 0;
    dc->kused = 0;
    dc->st = statuses;
    dc->n = req->n_descriptors;
    dc->cb = cb;
    dc->arg = arg;
    ruleset *rs;
    if (own) {
        rs = (ruleset *)weir__snap_enter(reader->snap);
        reader->cur = rs;
        reader->in_section = true;
    } else if (reader->in_section) {
        /* decided from inside an own decision's callback: its snapshot
         * section is open, so its rules are alive */
        rs = (ruleset *)reader->cur;
        atomic_fetch_add(&rs->refs, 1);
    } else {
        /* a store that completes later, or a callback run from the loop:
         * no section is open on this reader */
        rs = (ruleset *)weir__snap_enter(reader->snap);
        atomic_fetch_add(&rs->refs, 1);
        weir__snap_exit(reader->snap);
    }
    dc->rs = rs;
    reader->depth++;
    st = decide_planned(dc, reader, req, now_us);
    if (--reader->depth == 0 && own) {
        reader->in_section = false;
        weir__snap_exit(reader->snap);
    }
    return st;
}

/* Plan the decision and submit its batches; dc is freed on every path. */
static weir_status decide_planned(decision *dc, weir_engine_reader *reader, const weir_request *req,
                                  int64_t now_us)
{
    weir_status st;
    bool domain_found;
    dc->now_us = now_us; /* tenant records and calendar periods read it */
    st = plan(dc, reader, req, &domain_found);
    if (st != WEIR_OK) {
        decision_free(dc);
        return st;
    }
    if (!domain_found) {
        for (size_t d = 0; d < dc->n; d++) {
            set_unmatched(&dc->st[d]);
            dc->st[d].domain_not_found = true;
        }
        dc->n_pending = 0;
        dc->n_enforcing = 0;
    }
    /* shadow or quota limits; stable keys are placed once all are in */
    bool relayout = dc->n_enforcing != dc->n_pending || dc->engine->shared_keys;
    /* replaces: a limit named by another matched limit's `replaces` goes */
    for (size_t i = 0; dc->rs->plans.replaces && i < dc->n_pending; i++) {
        dc->p[i].dropped = name_replaced(dc, &dc->p[i]);
        relayout |= dc->p[i].dropped;
    }
    /* The plan placed each limit's op in order, which is the layout when
     * every limit enforces and none was dropped; otherwise: enforcing
     * first (one atomic batch), then the rest. */
    size_t n = dc->n_pending;
    if (relayout) {
        n = 0;
        for (int pass = 0; pass < 2; pass++) {
            for (size_t i = 0; i < dc->n_pending; i++)
                if (!dc->p[i].dropped && dc->p[i].enforcing == (pass == 0))
                    place_op(dc, i, n++);
            if (pass == 0)
                dc->n_enforcing = n;
        }
    }
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
        submit(dc, dc->ops, n_atomic, WEIR_BATCH_ATOMIC, atomic_done);
    if (n_rest > 0)
        submit(dc, rest, n_rest, 0, batch_done);
    return WEIR_OK;
}
