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
#include "engine/decision.h"

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

/* The request's own fields. Its descriptors are checked one by one as they
 * are planned (check_descriptor()), so that the first counter's buckets
 * are asked for as early as possible; an error there still fails the
 * whole request before anything is charged. */
static weir_status check_request(weir_engine_reader *rd, const weir_request *req)
{
    if (!req->domain || req->domain_len == 0)
        return weir__refuse(rd, WEIR_REFUSAL_EMPTY_DOMAIN, -1);
    if (!req->descriptors || req->n_descriptors == 0)
        return weir__refuse(rd, WEIR_REFUSAL_NO_DESCRIPTORS, -1);
    if (req->n_descriptors > WEIR_ENGINE_MAX_DESCRIPTORS)
        return weir__refuse(rd, WEIR_REFUSAL_TOO_MANY_DESCRIPTORS, -1);
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

/* Whether limit @p, denied by the store through @op, was denied by its
 * share alone: it would have admitted with the rest of its reserve. A TAKE
 * with a reserve is denied with the check of hits + reserve
 * (weir_step_reserve()), whose remaining is what the key holds free: at
 * least the hits plus the other reserve means the limit itself had room.
 * Exact for every algorithm but a warm-up's token bucket, whose cost is
 * rounded per request: there a share's denial may read as the limit's,
 * never the other way. */
static bool shed_only(const pending *p, const weir_op *op)
{
    if (!p->share || op->kind != WEIR_OP_TAKE)
        return false;
    uint64_t need = (op->hits ? op->hits : 1) + (p->reserve - p->share);
    return op->result.remaining >= need;
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
        o->adaptive = p->adaptive ? p->adaptive->id : 0;
        o->adaptive_limit = p->adaptive ? p->adaptive_limit : 0;
        o->key = op->key;
        o->key_len = op->key_len;
        o->tier = p->tier;
        o->tenant_override = p->tenant_override;
        o->shed = denied && !failed && shed_only(p, op);
        if (!s->n_outcomes)
            s->outcomes = o;
        s->n_outcomes++;
        uint32_t rpu = p->rpu;
        if (p->adaptive) { /* the status is against the limit in force */
            rpu = p->adaptive_limit;
            rem = rem > p->adaptive_reserve ? rem - p->adaptive_reserve : 0;
        }
        /* the status reports its first limit until a stricter one comes
         * (s->limit is NULL until then; a reported limit denied when it
         * made the code OVER_LIMIT or, in shadow mode, would_deny) */
        if (s->limit &&
            !stricter(denied, rem, s->code == WEIR_CODE_OVER_LIMIT || s->would_deny, s->remaining))
            continue;
        s->limit = p->limit;
        s->requests_per_unit = rpu;
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
    /* over only by the request's priority: every limit that denied it did
     * so by its share */
    for (size_t d = 0; d < dc->n; d++) {
        weir_descriptor_status *s = &dc->st[d];
        bool shed = s->code == WEIR_CODE_OVER_LIMIT;
        for (size_t k = 0; shed && k < s->n_outcomes; k++)
            shed = !s->outcomes[k].denied || s->outcomes[k].shadow || s->outcomes[k].shed;
        s->shed = shed;
    }
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
    /* a settlement reports each counter after it, never a denial */
    for (size_t i = 0; dc->settling && i < n; i++)
        if (ops[i].status == WEIR_OK) {
            ops[i].result.allowed = true;
            ops[i].result.retry_after_us = 0;
        }
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
/* ------------------------------------------------------------ settling */

/* weir_engine_settle(): each limit the request's estimate charged is
 * brought to the true cost: a REFUND of estimate - cost, a CHARGE of
 * cost - estimate, or a look when they are equal. A descriptor with hits
 * of its own keeps them; a concurrency limit (its leases go back by
 * release), a token bucket with a warm-up (its cost depends on the heat
 * at the time) and a sketch (it cannot give back) are looked at only. */
static void settle_ops(decision *dc, const weir_request *req)
{
    for (size_t i = 0; i < dc->n_pending; i++) {
        const pending *p = &dc->p[i];
        if (p->dropped)
            continue;
        weir_op *op = &dc->ops[p->op];
        uint64_t est = op->hits;
        bool fixed = req->descriptors[p->desc].has_hits || p->cms ||
                     p->lim->algorithm == WEIR_ALGO_CONCURRENCY || p->lim->warmup_us;
        op->kind = WEIR_OP_CHECK;
        if (fixed || dc->cost == est) {
            op->hits = 0;
        } else {
            op->kind = dc->cost > est ? WEIR_OP_CHARGE : WEIR_OP_REFUND;
            op->hits = dc->cost > est ? dc->cost - est : est - dc->cost;
        }
        if (p->cms) { /* looked at here: it is not the store's */
            op->status = weir_cms_check(p->cms, op->key, op->key_len, dc->now_us, 0, &op->result);
            op->result.allowed = true;
        }
    }
}

/* ------------------------------------------------------------ sketches */

/* Limit @p's op in its sketch: a check (hits 0 or @check) or a charge. */
static void sketch_op(decision *dc, const pending *p, bool check)
{
    weir_op *op = &dc->ops[p->op];
    op->status =
        check || op->kind != WEIR_OP_TAKE
            ? weir_cms_check(p->cms, op->key, op->key_len, dc->now_us, op->hits, &op->result)
            : weir_cms_take(p->cms, op->key, op->key_len, dc->now_us, op->hits, &op->result);
}

/* The limits counted in a sketch (`sketch:`), before the store's batches
 * go: the shadow and quota ones are charged at once, as the store's
 * independent ops are; the enforcing ones are checked first, then
 * charged when every enforcing limit admits: at once when the store
 * holds none, else once its atomic batch admitted (charge_sketches()).
 * A sketch's denial turns the store's atomic TAKEs into CHECKs, so a
 * denied request consumes nothing there. Between a check and its charge
 * another thread may count the key: the charge then denies, the store
 * having charged (a little over-counted, never under). */
static void decide_sketches(decision *dc)
{
    bool denied = false, enforcing = false;
    for (size_t i = 0; i < dc->n_pending; i++) {
        const pending *p = &dc->p[i];
        if (p->dropped || !p->cms)
            continue;
        sketch_op(dc, p, p->enforcing);
        if (p->enforcing) {
            const weir_op *op = &dc->ops[p->op];
            enforcing = true;
            denied |= op->kind == WEIR_OP_TAKE && op->status == WEIR_OK && !op->result.allowed;
        }
    }
    if (denied) {
        for (size_t i = 0; i < dc->n_enforcing; i++)
            if (dc->ops[i].kind == WEIR_OP_TAKE)
                dc->ops[i].kind = WEIR_OP_CHECK;
    } else if (enforcing && dc->n_enforcing == 0) {
        for (size_t i = 0; i < dc->n_pending; i++)
            if (!dc->p[i].dropped && dc->p[i].cms && dc->p[i].enforcing)
                sketch_op(dc, &dc->p[i], false);
    } else {
        dc->sketch_after = enforcing;
    }
}

/* The enforcing sketches' charges once the store's atomic batch (@ops,
 * @n) is decided: made when every TAKE there admitted. */
static void charge_sketches(decision *dc, const weir_op *ops, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (ops[i].kind == WEIR_OP_TAKE && (ops[i].status != WEIR_OK || !ops[i].result.allowed))
            return;
    for (size_t i = 0; i < dc->n_pending; i++)
        if (!dc->p[i].dropped && dc->p[i].cms && dc->p[i].enforcing)
            sketch_op(dc, &dc->p[i], false);
}

static void atomic_done(void *arg, weir_op *ops, size_t n, weir_status status)
{
    decision *dc = arg;
    if (status != WEIR_OK)
        for (size_t i = 0; i < n; i++)
            ops[i].status = status;
    decide_locally(dc, ops, n, true);
    if (dc->sketch_after)
        charge_sketches(dc, ops, n);
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

static weir_status decide_planned(decision *dc, weir_engine_reader *reader, const weir_request *req,
                                  int64_t now_us);

/* A decision (@settling false) or a settlement to @cost. */
static weir_status start(weir_engine_reader *reader, const weir_request *req, int64_t now_us,
                         weir_descriptor_status *statuses, weir_decide_cb cb, void *arg,
                         bool settling, uint64_t cost)
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
            return weir__refuse(reader, WEIR_REFUSAL_NO_MEMORY, -1);
        dc = reader->own;
    } else {
        atomic_fetch_add_explicit(&reader->live, 1, memory_order_relaxed);
        dc = atomic_exchange(&reader->spare, NULL);
        if (!dc && !(dc = decision_alloc(e->ctx))) {
            atomic_fetch_sub(&reader->live, 1);
            return weir__refuse(reader, WEIR_REFUSAL_NO_MEMORY, -1);
        }
    }
    /* only what a decision reads before writing it is reset */
    dc->engine = e;
    dc->reader = reader;
    dc->owned = own;
    dc->n_pending = 0;
    dc->n_enforcing = 0;
    dc->n_sketch = 0;
    dc->sketch_after = false;
    dc->settling = settling;
    dc->cost = cost;
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

weir_status weir_engine_decide(weir_engine_reader *reader, const weir_request *req, int64_t now_us,
                               weir_descriptor_status *statuses, weir_decide_cb cb, void *arg)
{
    return start(reader, req, now_us, statuses, cb, arg, false, 0);
}

weir_status weir_engine_settle(weir_engine_reader *reader, const weir_request *req, uint64_t cost,
                               int64_t now_us, weir_descriptor_status *statuses, weir_decide_cb cb,
                               void *arg)
{
    return start(reader, req, now_us, statuses, cb, arg, true, cost);
}

/* Plan the decision and submit its batches; dc is freed on every path. */
static weir_status decide_planned(decision *dc, weir_engine_reader *reader, const weir_request *req,
                                  int64_t now_us)
{
    weir_status st;
    bool domain_found;
    dc->now_us = now_us; /* tenant records and calendar periods read it */
    st = weir__plan(dc, reader, req, &domain_found);
    if (st != WEIR_OK) {
        decision_free(dc);
        return st;
    }
    if (!domain_found) {
        for (size_t d = 0; d < dc->n; d++) {
            weir__set_unmatched(&dc->st[d]);
            dc->st[d].domain_not_found = true;
        }
        dc->n_pending = 0;
        dc->n_enforcing = 0;
    }
    /* shadow or quota limits; stable keys are placed once all are in;
     * sketches' ops after the store's */
    bool relayout = dc->n_enforcing != dc->n_pending || dc->engine->shared_keys || dc->n_sketch > 0;
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
                if (!dc->p[i].dropped && !dc->p[i].cms && dc->p[i].enforcing == (pass == 0))
                    weir__place_op(dc, i, n++);
            if (pass == 0)
                dc->n_enforcing = n;
        }
        for (size_t i = 0, k = n; i < dc->n_pending; i++)
            if (!dc->p[i].dropped && dc->p[i].cms)
                weir__place_op(dc, i, k++);
    }
    dc->n_ops = n;
    if (dc->settling)
        settle_ops(dc, req);
    else if (dc->n_sketch > 0)
        decide_sketches(dc);

    /* The last batch to complete frees the decision: read what the second
     * submit needs before the first. */
    /* a settlement's ops are independent: each adjusts its own counter */
    size_t n_atomic = dc->settling ? 0 : dc->n_enforcing, n_rest = n - n_atomic;
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
