/*
 * keyed.c - operations on counters the caller names
 * (weir_engine_decide_key()): one op on the engine's store, under a name
 * of its own, with the rules' failure modes when the store fails.
 *
 * On a store that completes inline the op runs at once on the caller's
 * stack and the reader's scratch buffer (no allocation); otherwise it
 * gets a block of its own, which holds the reader until it completes, as
 * a rule decision does.
 */
#include <stdatomic.h>
#include <string.h>

#include "core/context.h"
#include "engine/adaptive_limits.h"
#include "engine/engine_internal.h"
#include "store/store.h"
#include "weir/engine.h"

/* Every counter named by a caller starts so; no counter of the rules does
 * (theirs are "weir:2:" and the rest on a shared store, digests in
 * memory). */
#define PREFIX "weir:k:"
#define PREFIX_LEN (sizeof(PREFIX) - 1)

_Static_assert(PREFIX_LEN + WEIR_ENGINE_MAX_KEY_NAME <= WEIR_MAX_KEY_BYTES,
               "a counter's name and its prefix fit a store key");

typedef struct keyed {
    weir_engine *engine;
    weir_engine_reader *reader; /* held until completion; NULL inline */
    weir_op op;
    weir_limit lim; /* the caller's, copied */
    weir_failure_mode failure_mode;
    int64_t now_us;
    weir_key_cb cb;
    void *arg;
    /* a release of an adaptive limit's lease: its controller (a
     * reference) and the sample it gets once the lease is back */
    adaptive_ctl *ctl;
    weir_lease sample;
    char key[]; /* the prefix and the name */
} keyed;

/* A store that failed a TAKE or CHECK: the failure mode decides, local on
 * the fallback store under the instance's share of the limit. */
static void fail_over(const keyed *k, weir_key_outcome *out)
{
    weir_engine *e = k->engine;
    out->failure_mode = true;
    if (k->failure_mode == WEIR_FAILURE_LOCAL && e->fallback) {
        weir_limit share;
        weir_op op = k->op;
        op.limit = &share;
        if (weir__local_limit(&k->lim, e->local_share_ppm, &share) == WEIR_OK &&
            weir_memstore_run(e->fallback, &op, 1, k->now_us, 0) == WEIR_OK &&
            op.status == WEIR_OK) {
            out->status = WEIR_OK;
            out->result = op.result;
            out->local = true;
            return;
        }
    }
    /* allow, deny, or local with nothing to decide it on: it fails open,
     * as rule limits do */
    out->status = WEIR_OK;
    memset(&out->result, 0, sizeof(out->result));
    out->result.allowed = k->failure_mode != WEIR_FAILURE_DENY;
    out->result.limit = k->lim.burst ? k->lim.burst : k->lim.limit;
}

/* An adaptive limit's lease came back (@st): its controller learns how
 * long it was held. A lease not held was given back already (no second
 * sample), unless it timed out: that is a drop. */
static void feed(keyed *k, weir_status st)
{
    const weir_lease *l = &k->sample;
    bool timed_out = k->now_us - l->acquired_us >= l->window_us;
    if (st == WEIR_OK || (st == WEIR_ENOLEASE && timed_out))
        weir__adaptive_feed(k->ctl, k->now_us, l->acquired_us, l->in_flight, l->dropped,
                            l->window_us);
    weir__adaptive_release(k->ctl);
    k->ctl = NULL;
}

static void deliver(keyed *k, weir_status batch)
{
    weir_key_outcome out = {0};
    weir_status st = batch != WEIR_OK ? batch : k->op.status;
    if (k->ctl)
        feed(k, st);
    if (st == WEIR_OK) {
        out.status = WEIR_OK;
        out.result = k->op.result;
    } else if (k->op.kind == WEIR_OP_RESET || k->op.kind == WEIR_OP_RELEASE) {
        out.status = st;
    } else {
        fail_over(k, &out);
    }
    k->cb(k->arg, &out);
}

static void done_inline(void *arg, weir_op *ops, size_t n, weir_status status)
{
    (void)ops, (void)n;
    deliver(arg, status);
}

static void done_later(void *arg, weir_op *ops, size_t n, weir_status status)
{
    (void)ops, (void)n;
    keyed *k = arg;
    weir_engine_reader *rd = k->reader;
    deliver(k, status);
    weir__free(k->engine->ctx, k);
    weir__reader_unhold(rd);
}

/* Runs one op on the counter named by @pre (@pre_len bytes) and @name:
 * at once on an inline store, else from a block of its own. */
static weir_status run(weir_engine_reader *reader, const char *pre, size_t pre_len,
                       const void *name, size_t name_len, const weir_op *proto,
                       const weir_limit *lim, unsigned flags, weir_failure_mode fm, int64_t now_us,
                       weir_key_cb cb, void *arg, adaptive_ctl *ctl, const weir_lease *sample)
{
    weir_engine *e = reader->engine;
    size_t key_len = pre_len + name_len;
    bool later = !e->inline_store;
    keyed own;
    keyed *k = &own;
    char *key = reader->scratch;
    if (later) {
        if (!(k = weir__malloc(e->ctx, sizeof(*k) + key_len))) {
            weir__adaptive_release(ctl);
            return WEIR_ENOMEM;
        }
        key = k->key;
    }
    k->ctl = ctl;
    if (ctl) /* the caller's may be gone by the completion */
        k->sample = *sample;
    memcpy(key, pre, pre_len);
    memcpy(key + pre_len, name, name_len);
    k->engine = e;
    k->reader = later ? reader : NULL;
    k->lim = *lim;
    k->failure_mode = fm;
    k->now_us = now_us;
    k->cb = cb;
    k->arg = arg;
    k->op = *proto;
    k->op.key = key;
    k->op.key_len = key_len;
    k->op.limit = &k->lim;
    if (!later) {
        weir_status st = weir_store_submit(e->store, &k->op, 1, now_us, flags, done_inline, k);
        if (k->ctl) /* refused before the op ran */
            weir__adaptive_release(k->ctl);
        return st;
    }
    atomic_fetch_add_explicit(&reader->live, 1, memory_order_relaxed);
    weir_store_session *ss = reader->session;
    weir_status st = ss ? weir_store_session_submit(ss, &k->op, 1, now_us, flags, done_later, k)
                        : weir_store_submit(e->store, &k->op, 1, now_us, flags, done_later, k);
    if (st != WEIR_OK)
        done_later(k, &k->op, 1, st); /* refused: as a failed op */
    return WEIR_OK;
}

weir_status weir_engine_decide_key(weir_engine_reader *reader, const weir_key_op *op,
                                   int64_t now_us, weir_key_cb cb, void *arg)
{
    if (!reader || !op || !cb || !op->name || op->name_len == 0 ||
        op->name_len > WEIR_ENGINE_MAX_KEY_NAME)
        return WEIR_EINVAL;
    weir_limit reset_lim;
    const weir_limit *lim = op->limit;
    switch (op->kind) {
    case WEIR_OP_TAKE:
    case WEIR_OP_CHECK:
        if (!lim)
            return WEIR_EINVAL;
        break;
    case WEIR_OP_RESET: {
        /* a store takes only ops with a valid limit; a RESET reads none */
        weir_limit_spec spec = {.algorithm = WEIR_ALGO_GCRA, .limit = 1, .window_us = 1};
        if (weir_limit_compile(&spec, &reset_lim) != WEIR_OK)
            return WEIR_EINVAL;
        lim = &reset_lim;
        break;
    }
    default:
        return WEIR_EINVAL;
    }
    weir_status st = weir_store_check_limit(reader->engine->store, lim);
    if (st != WEIR_OK)
        return st;
    weir_op o = {0};
    o.hits = op->hits;
    /* a TAKE of 0 hits is a look, and a look never creates a key */
    o.kind = op->kind == WEIR_OP_TAKE && op->hits == 0 ? WEIR_OP_CHECK : op->kind;
    /* a counter's limit comes with each call, so a denial kept under one
     * limit may not be the answer under the next: no over-limit cache */
    o.flags = WEIR_OP_NO_LOCAL_CACHE;
    return run(reader, PREFIX, PREFIX_LEN, op->name, op->name_len, &o, lim, 0, op->failure_mode,
               now_us, cb, arg, NULL, NULL);
}

/* The controller of adaptive limit @id in the rules in force, with a
 * reference; NULL when they have none (reloaded away, other rules). */
static adaptive_ctl *find_controller(weir_engine_reader *reader, uint64_t id)
{
    if (reader->in_section) /* inside a decision's callback: its rules */
        return weir__adaptive_find(&reader->cur->plans.adaptive, id);
    const ruleset *rs = weir__snap_enter(reader->snap);
    adaptive_ctl *c = weir__adaptive_find(&rs->plans.adaptive, id);
    weir__snap_exit(reader->snap);
    return c;
}

weir_status weir_engine_release(weir_engine_reader *reader, const weir_lease *lease, int64_t now_us,
                                weir_key_cb cb, void *arg)
{
    if (!reader || !lease || !cb || !lease->key || lease->key_len == 0 ||
        lease->key_len > WEIR_MAX_KEY_BYTES)
        return WEIR_EINVAL;
    weir_engine *e = reader->engine;
    /* the memory store's counters are digests under the engine's secret,
     * as the decision named them (WEIR_BATCH_DIGESTS) */
    unsigned flags = e->shared_keys ? 0u : WEIR_BATCH_DIGESTS;
    if (flags && lease->key_len != WEIR_DIGEST_BYTES)
        return WEIR_EINVAL;
    weir_limit_spec spec = {
        .algorithm = WEIR_ALGO_CONCURRENCY, .limit = lease->limit, .window_us = lease->window_us};
    weir_limit lim;
    if (weir_limit_compile(&spec, &lim) != WEIR_OK)
        return WEIR_EINVAL;
    weir_op o = {0};
    o.kind = WEIR_OP_RELEASE;
    o.lease = lease->lease;
    o.flags = WEIR_OP_NO_LOCAL_CACHE;
    adaptive_ctl *ctl = lease->adaptive ? find_controller(reader, lease->adaptive) : NULL;
    return run(reader, "", 0, lease->key, lease->key_len, &o, &lim, flags, WEIR_FAILURE_ALLOW,
               now_us, cb, arg, ctl, ctl ? lease : NULL);
}
