/*
 * span.c - a batch on a Redis Cluster, from its submission until every op
 * is decided: its ops split into parts, one per node (cluster.c routes
 * them), their answers gathered, and check-all-then-charge-all kept
 * across the nodes.
 *
 * Within one node a part is one atomic batch of the script, as on a
 * single Redis. Across nodes, an atomic batch is decided in two phases
 * folded into the calls the batch makes anyway: each node checks its ops
 * and, if they all admit, charges them (a reservation); when every node
 * has answered, the batch is admitted if every op was, else each node that
 * charged gets its charges back (a refund: a REFUND op per TAKE, or the
 * RELEASE of a concurrency lease) in one more call, sent at once while the
 * batch completes. So a batch costs one round trip per node, in parallel,
 * and a denied batch that some node had charged one more, which the
 * caller does not wait for.
 *
 * What this guarantees, and what it does not (docs/OPERATIONS.md): a
 * denied batch leaves no charge behind once its refunds are made; between
 * the reservation and the refund (a round trip) another request may see
 * the reserved capacity as taken, and be denied where a single Redis
 * would have admitted it. A refund that fails (the node went down in
 * between) leaves its charge, counted in refund_errors. A node that fails
 * its part leaves the others' charges: its ops follow their failure mode.
 */
#include <string.h>

#include "core/context.h"
#include "store/redis/cluster/cluster.h"

/* Redirections a batch follows, at most, before its ops fail. */
#define MAX_HOPS 3u

static cspan *span_get(csession *cs)
{
    cspan *sp = cs->spare_spans;
    if (sp) {
        cs->spare_spans = sp->next;
        return sp;
    }
    return weir__malloc(cs->rs->base.ctx, sizeof(cspan));
}

static void span_put(csession *cs, cspan *sp)
{
    if (sp->charged != sp->inl_charged)
        weir__free(cs->rs->base.ctx, sp->charged);
    sp->next = cs->spare_spans;
    cs->spare_spans = sp;
}

static cpart *part_get(csession *cs, cspan *sp, size_t n)
{
    cpart *p = cs->spare_parts;
    if (p)
        cs->spare_parts = p->next;
    else if (!(p = weir__malloc(cs->rs->base.ctx, sizeof(cpart))))
        return NULL;
    p->sp = sp;
    p->n = 0;
    p->cap = n;
    p->ops = p->inl;
    p->idx = p->inl_idx;
    if (n > 4) {
        p->ops = weir__malloc(cs->rs->base.ctx, n * (sizeof(weir_op) + sizeof(uint32_t)));
        if (!p->ops) {
            p->next = cs->spare_parts;
            cs->spare_parts = p;
            return NULL;
        }
        p->idx = (uint32_t *)(p->ops + n);
    }
    return p;
}

static void part_put(csession *cs, cpart *p)
{
    if (p->ops != p->inl && p->ops != p->sp->b.ops)
        weir__free(cs->rs->base.ctx, p->ops);
    p->next = cs->spare_parts;
    cs->spare_parts = p;
}

/* The span's op of a part's op i. */
static weir_op *span_op(const cpart *p, size_t i)
{
    return p->idx ? &p->sp->b.ops[p->idx[i]] : &p->sp->b.ops[i];
}

static void refund(csession *cs, cspan *sp);

static void span_finish(csession *cs, cspan *sp)
{
    if (sp->multi && (sp->b.flags & WEIR_BATCH_ATOMIC)) {
        bool denied = false;
        for (size_t i = 0; i < sp->b.n && !denied; i++)
            denied = sp->b.ops[i].status == WEIR_OK && sp->b.ops[i].kind == WEIR_OP_TAKE &&
                     !sp->b.ops[i].result.allowed;
        if (denied)
            refund(cs, sp);
    }
    weir__batch_req b = sp->b;
    span_put(cs, sp);
    weir__batch_req_done(b, WEIR_OK);
}

static void part_end(csession *cs, cpart *p)
{
    cspan *sp = p->sp;
    part_put(cs, p);
    if (--sp->pending == 0 && !sp->submitting)
        span_finish(cs, sp);
}

void weir__cluster_part_fail(csession *cs, cpart *p, weir_status st)
{
    for (size_t i = 0; i < p->n; i++)
        span_op(p, i)->status = st;
    if (p->sp->first_error == WEIR_OK)
        p->sp->first_error = st;
    part_end(cs, p);
}

/* A node answered a part (or failed it). */
static void part_done(void *arg, weir_op *ops, size_t n, weir_status status)
{
    cpart *p = arg;
    cspan *sp = p->sp;
    csession *cs = sp->cs;
    bool charged = status == WEIR_OK;
    for (size_t i = 0; i < n; i++) {
        if (status != WEIR_OK)
            ops[i].status = status;
        charged &=
            ops[i].status == WEIR_OK && (ops[i].kind != WEIR_OP_TAKE || ops[i].result.allowed);
        if (p->idx) {
            weir_op *o = span_op(p, i);
            o->status = ops[i].status;
            o->result = ops[i].result;
        }
    }
    if (status == WEIR_EUNAVAIL || status == WEIR_ETIMEDOUT || status == WEIR_EIO)
        weir__cluster_node_failed(cs);
    /* an atomic part charged its TAKEs only if all of them admitted */
    if (sp->charged && charged)
        for (size_t i = 0; i < n; i++)
            if (ops[i].status == WEIR_OK && ops[i].kind == WEIR_OP_TAKE && ops[i].result.allowed &&
                ops[i].hits > 0)
                sp->charged[p->idx ? p->idx[i] : i] = true;
    part_end(cs, p);
}

weir_status weir__cluster_part_submit(csession *cs, cpart *p, rsession *ss, bool solo, bool asking)
{
    cspan *sp = p->sp;
    unsigned flags = p->n > 1 ? (sp->b.flags & WEIR_BATCH_ATOMIC) : 0;
    (void)cs;
    return weir__redis_submit(ss, p->ops, p->n, sp->b.now_us, flags, part_done, p, solo, asking);
}

/* From now on the span's ops are decided in several batches. */
static bool go_multi(csession *cs, cspan *sp)
{
    if (sp->multi)
        return true;
    sp->multi = true;
    redis_count(&cs->rs->cluster->split, 1);
    if (!(sp->b.flags & WEIR_BATCH_ATOMIC))
        return true;
    sp->charged = sp->b.n <= sizeof(sp->inl_charged)
                      ? sp->inl_charged
                      : weir__malloc(cs->rs->base.ctx, sp->b.n * sizeof(bool));
    if (!sp->charged)
        return false;
    memset(sp->charged, 0, sp->b.n * sizeof(bool));
    return true;
}

typedef struct dest {
    int node;
    bool solo, done;
} dest;

weir_status weir__cluster_split(csession *cs, cpart *p, unsigned hops_left, bool alone, int64_t now)
{
    cspan *sp = p->sp;
    if (!go_multi(cs, sp))
        return WEIR_ENOMEM;
    /* the destinations of p's ops; a solo op is its own part */
    size_t n = p->n;
    dest stack[32], *d = n <= 32 ? stack : weir__malloc(cs->rs->base.ctx, n * sizeof(*d));
    if (!d)
        return WEIR_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        d[i].node = weir__cluster_dest(cs, &p->ops[i], alone, now, &d[i].solo);
        d[i].done = false;
    }
    weir_status first_err = WEIR_OK;
    for (size_t i = 0; i < n; i++) {
        if (d[i].done)
            continue;
        size_t k = 0;
        cpart *q = d[i].node < 0 ? NULL : part_get(cs, sp, d[i].solo ? 1 : n - i);
        for (size_t j = i; j < n && q; j++) {
            if (d[j].done || d[j].node != d[i].node || d[j].solo != d[i].solo ||
                (d[i].solo && j != i))
                continue;
            q->ops[k] = p->ops[j];
            q->idx[k] = p->idx ? p->idx[j] : (uint32_t)j;
            k++;
            d[j].done = true;
        }
        if (!q) {
            /* no node, or no memory: this op fails alone */
            d[i].done = true;
            weir_status st = d[i].node < 0 ? WEIR_EUNAVAIL : WEIR_ENOMEM;
            span_op(p, i)->status = st;
            if (first_err == WEIR_OK)
                first_err = st;
            continue;
        }
        q->n = k;
        q->hops_left = hops_left;
        rsession *ss = weir__cluster_node(cs, d[i].node);
        sp->pending++;
        weir_status st = ss ? weir__cluster_part_submit(cs, q, ss, d[i].solo, false) : WEIR_ENOMEM;
        if (st != WEIR_OK) {
            if (first_err == WEIR_OK)
                first_err = st;
            weir__cluster_part_fail(cs, q, st);
        }
    }
    if (d != stack)
        weir__free(cs->rs->base.ctx, d);
    if (sp->first_error == WEIR_OK)
        sp->first_error = first_err;
    /* p is replaced by its parts */
    part_end(cs, p);
    return WEIR_OK;
}

weir_status weir__cluster_span_start(csession *cs, weir_op *ops, size_t n, int64_t now_us,
                                     unsigned flags, weir_store_cb cb, void *arg)
{
    cspan *sp = span_get(cs);
    if (!sp)
        return WEIR_ENOMEM;
    *sp =
        (cspan){.b = {ops, n, now_us, flags, cb, arg}, .pending = 1, .submitting = true, .cs = cs};
    cpart *p = part_get(cs, sp, 0);
    if (!p) {
        span_put(cs, sp);
        return WEIR_ENOMEM;
    }
    /* the span's own ops, in place */
    p->ops = ops;
    p->idx = NULL;
    p->n = n;
    weir_status st = weir__cluster_route(cs, p, MAX_HOPS, false, NULL);
    if (st != WEIR_OK)
        weir__cluster_part_fail(cs, p, st);
    sp->submitting = false;
    if (sp->pending > 0)
        return WEIR_OK;
    /* nothing was sent: the caller hears it from here, not the callback */
    st = sp->first_error != WEIR_OK ? sp->first_error : WEIR_EUNAVAIL;
    span_put(cs, sp);
    return st;
}

/* ------------------------------------------------------------ refunds */

/* A refund sent: its ops, their limits and keys, in one block. */
typedef struct refund_block {
    csession *cs;
    size_t n;
    weir_op *ops;
} refund_block;

static void refund_done(void *arg, weir_op *ops, size_t n, weir_status status)
{
    refund_block *rb = arg;
    rcluster *c = rb->cs->rs->cluster;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += status != WEIR_OK || ops[i].status != WEIR_OK;
    redis_count(&c->refunds, n - bad);
    if (bad) {
        redis_count(&c->refund_errors, bad);
        weir__log(rb->cs->rs->base.ctx, WEIR_LOG_WARN,
                  "event=redis_cluster_refund_failed ops=%zu status=%s", bad,
                  weir_status_name(status != WEIR_OK ? status : WEIR_EIO));
    }
    weir__free(rb->cs->rs->base.ctx, rb);
}

/* The node an op's key lives on now (the map's, or a seed's). */
static int op_node(csession *cs, const weir_op *op, int64_t now)
{
    bool solo;
    return weir__cluster_dest(cs, op, false, now, &solo);
}

/* Give back what the nodes charged for a batch that was denied: one batch
 * per node, of copies (the span's keys and limits go with it). */
static void refund(csession *cs, cspan *sp)
{
    weir_ctx *ctx = cs->rs->base.ctx;
    int64_t now = weir__redis_mono_us();
    /* charged[] is what remains to send */
    for (size_t i = 0; i < sp->b.n; i++) {
        if (!sp->charged[i])
            continue;
        int node = op_node(cs, &sp->b.ops[i], now);
        size_t k = 0, bytes = 0;
        for (size_t j = i; j < sp->b.n; j++)
            if (sp->charged[j] && op_node(cs, &sp->b.ops[j], now) == node) {
                k++;
                bytes += sp->b.ops[j].key_len;
            }
        rsession *ss = node < 0 ? NULL : weir__cluster_node(cs, node);
        refund_block *rb =
            ss ? weir__malloc(ctx, sizeof(*rb) + k * (sizeof(weir_op) + sizeof(weir_limit)) + bytes)
               : NULL;
        weir_op *ops = rb ? (weir_op *)(rb + 1) : NULL;
        weir_limit *lims = rb ? (weir_limit *)(ops + k) : NULL;
        char *keys = rb ? (char *)(lims + k) : NULL;
        size_t m = 0;
        for (size_t j = i; j < sp->b.n; j++) {
            if (!sp->charged[j] || op_node(cs, &sp->b.ops[j], now) != node)
                continue;
            sp->charged[j] = false;
            if (!rb)
                continue;
            const weir_op *o = &sp->b.ops[j];
            lims[m] = *o->limit;
            memcpy(keys, o->key, o->key_len);
            bool lease = o->limit->algorithm == WEIR_ALGO_CONCURRENCY;
            ops[m] = (weir_op){.key = keys,
                               .key_len = o->key_len,
                               .limit = &lims[m],
                               .hits = o->hits,
                               .lease = lease ? o->result.lease : 0,
                               .kind = lease ? WEIR_OP_RELEASE : WEIR_OP_REFUND,
                               .flags = WEIR_OP_NO_LOCAL_CACHE};
            keys += o->key_len;
            m++;
        }
        if (rb) {
            rb->cs = cs;
            rb->n = k;
            rb->ops = ops;
            if (weir__redis_submit(ss, ops, k, sp->b.now_us, 0, refund_done, rb, false, false) ==
                WEIR_OK)
                continue;
            weir__free(ctx, rb);
        }
        redis_count(&cs->rs->cluster->refund_errors, k);
    }
}

void weir__cluster_spans_free(csession *cs)
{
    weir_ctx *ctx = cs->rs->base.ctx;
    while (cs->spare_spans) {
        cspan *sp = cs->spare_spans;
        cs->spare_spans = sp->next;
        weir__free(ctx, sp);
    }
    while (cs->spare_parts) {
        cpart *p = cs->spare_parts;
        cs->spare_parts = p->next;
        weir__free(ctx, p);
    }
}
