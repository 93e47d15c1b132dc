/*
 * deferred_store.c - the test store that completes later (deferred_store.h).
 *
 * A batch is held as a `held` record until it completes: on a session, in
 * the session's list until the session's timer fires (or, for a batch that
 * times out, on a timer of its own); outside a session, in the store's list
 * (under a lock: tests submit from several threads) until a drain. The
 * memory store it wraps decides a batch when it completes, not when it
 * came, as a networked store's answer reflects the state when it arrives.
 */
#include "deferred_store.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/context.h"
#include "store/store.h"

typedef struct held held;
struct held {
    held *next;
    weir_op *ops;
    size_t n;
    int64_t now_us;
    unsigned flags;
    weir_store_cb cb;
    void *arg;
    weir_status verdict; /* WEIR_OK: decide it; else complete with this */
    void *timer;         /* its own timer (a batch that times out) */
    struct dsession *session;
};

typedef struct dstore {
    weir_store base;
    weir__store_ops ops; /* deferred_ops, with the capabilities asked for */
    weir_store *inner;
    weir_deferred_options o;
    _Atomic unsigned long batches; /* counted for fail_every / timeout_every */
    _Atomic unsigned long submits; /* counted for refuse_every */
    _Atomic size_t pending;
    pthread_mutex_t lock;
    held *queue; /* outside any session, newest first */
} dstore;

typedef struct dsession {
    weir_store_session base;
    weir_loop_adapter loop;
    held *queue;  /* newest first */
    held *timing; /* batches on timers of their own */
    void *timer;  /* armed while queue is not empty */
} dsession;

static dstore *of(weir_store *s)
{
    return (dstore *)s;
}

/* Completes one held batch and frees its record. */
static void complete(dstore *ds, held *h, weir_status closing)
{
    weir_status st = closing ? closing : h->verdict;
    if (st == WEIR_OK) {
        st = weir_memstore_run(ds->inner, h->ops, h->n, h->now_us, h->flags);
    } else if (!closing && ds->o.fail_ops && st != WEIR_ETIMEDOUT) {
        /* each op fails on its own, the batch completes (a cluster with a
         * node down) */
        for (size_t i = 0; i < h->n; i++)
            h->ops[i].status = st;
        st = WEIR_OK;
    }
    atomic_fetch_sub(&ds->pending, 1);
    weir_store_cb cb = h->cb;
    void *arg = h->arg;
    weir_op *ops = h->ops;
    size_t n = h->n;
    weir__free(ds->base.ctx, h);
    cb(arg, ops, n, st);
}

/* Completes a list (newest first) in the store's order (in the order they
 * came when there is no memory to reorder them). */
static size_t complete_list(dstore *ds, held *list, weir_status closing)
{
    held *oldest = NULL;
    size_t n = 0;
    while (list) { /* reversed in place: oldest first */
        held *next = list->next;
        list->next = oldest;
        oldest = list;
        list = next;
        n++;
    }
    held **v = ds->o.order == WEIR_DEFERRED_FIFO || n < 2 ? NULL : malloc(n * sizeof(*v));
    if (!v) {
        while (oldest) {
            held *next = oldest->next;
            complete(ds, oldest, closing);
            oldest = next;
        }
        return n;
    }
    size_t i = 0;
    for (held *h = oldest; h; h = h->next)
        v[i++] = h;
    for (size_t k = 0; k < n; k++) {
        size_t at = ds->o.order == WEIR_DEFERRED_REVERSE ? n - 1 - k
                    : k < n / 2                          ? 2 * k + 1
                                                         : 2 * (k - n / 2);
        complete(ds, v[at], closing);
    }
    free(v);
    return n;
}

/* Takes a new batch: refused (an error returned), or a held record with
 * its verdict. */
static weir_status take(dstore *ds, weir_op *ops, size_t n, int64_t now_us, unsigned flags,
                        weir_store_cb cb, void *arg, held **out)
{
    unsigned long s = atomic_fetch_add(&ds->submits, 1) + 1;
    if (ds->o.refuse_every && s % ds->o.refuse_every == 0)
        return ds->o.fail_status;
    held *h = weir__calloc(ds->base.ctx, 1, sizeof(*h));
    if (!h)
        return WEIR_ENOMEM;
    unsigned long b = atomic_fetch_add(&ds->batches, 1) + 1;
    h->ops = ops;
    h->n = n;
    h->now_us = now_us;
    h->flags = flags;
    h->cb = cb;
    h->arg = arg;
    if (ds->o.fail_every && b % ds->o.fail_every == 0)
        h->verdict = ds->o.fail_status;
    else if (ds->o.timeout_every && b % ds->o.timeout_every == 0)
        h->verdict = WEIR_ETIMEDOUT;
    atomic_fetch_add(&ds->pending, 1);
    *out = h;
    return WEIR_OK;
}

/* ------------------------------------------------------------ outside a session */

static weir_status d_submit(weir_store *s, weir_op *ops, size_t n, int64_t now_us, unsigned flags,
                            weir_store_cb cb, void *arg)
{
    dstore *ds = of(s);
    held *h = NULL;
    weir_status st = take(ds, ops, n, now_us, flags, cb, arg, &h);
    if (st != WEIR_OK)
        return st;
    pthread_mutex_lock(&ds->lock);
    h->next = ds->queue;
    ds->queue = h;
    pthread_mutex_unlock(&ds->lock);
    return WEIR_OK;
}

size_t weir_deferred_store_drain(weir_store *store)
{
    dstore *ds = of(store);
    pthread_mutex_lock(&ds->lock);
    held *list = ds->queue;
    ds->queue = NULL;
    pthread_mutex_unlock(&ds->lock);
    return complete_list(ds, list, WEIR_OK);
}

size_t weir_deferred_store_pending(weir_store *store)
{
    return atomic_load(&of(store)->pending);
}

/* ------------------------------------------------------------ sessions */

static void on_session_timer(void *arg)
{
    dsession *ss = arg;
    held *list = ss->queue;
    ss->queue = NULL;
    ss->timer = NULL;
    complete_list(of(ss->base.store), list, WEIR_OK);
}

static void unlink_timing(dsession *ss, held *h)
{
    for (held **p = &ss->timing; *p; p = &(*p)->next)
        if (*p == h) {
            *p = h->next;
            return;
        }
}

static void on_batch_timeout(void *arg)
{
    held *h = arg;
    unlink_timing(h->session, h);
    complete(of(h->session->base.store), h, WEIR_OK);
}

static weir_status d_session_new(weir_store *s, const weir_loop_adapter *loop,
                                 weir_store_session **out)
{
    if (!loop)
        return WEIR_EINVAL;
    dsession *ss = weir__calloc(s->ctx, 1, sizeof(*ss));
    if (!ss)
        return WEIR_ENOMEM;
    ss->base.store = s;
    memcpy(&ss->loop, loop, loop->size < sizeof(ss->loop) ? loop->size : sizeof(ss->loop));
    *out = &ss->base;
    return WEIR_OK;
}

static weir_status d_session_submit(weir_store_session *base, weir_op *ops, size_t n,
                                    int64_t now_us, unsigned flags, weir_store_cb cb, void *arg)
{
    dsession *ss = (dsession *)base;
    dstore *ds = of(base->store);
    held *h = NULL;
    weir_status st = take(ds, ops, n, now_us, flags, cb, arg, &h);
    if (st != WEIR_OK)
        return st;
    h->session = ss;
    if (h->verdict == WEIR_ETIMEDOUT) {
        int64_t after = ds->o.timeout_us ? ds->o.timeout_us : 1000000;
        h->timer = ss->loop.timer_start(ss->loop.data, after, on_batch_timeout, h);
        if (h->timer) {
            h->next = ss->timing;
            ss->timing = h;
            return WEIR_OK;
        }
    } else if (ss->timer || (ss->timer = ss->loop.timer_start(ss->loop.data, ds->o.delay_us,
                                                              on_session_timer, ss))) {
        h->next = ss->queue;
        ss->queue = h;
        return WEIR_OK;
    }
    atomic_fetch_sub(&ds->pending, 1);
    weir__free(ds->base.ctx, h);
    return WEIR_ENOMEM;
}

static void d_session_free(weir_store_session *base)
{
    dsession *ss = (dsession *)base;
    dstore *ds = of(base->store);
    /* callbacks may submit again: loop until nothing is left */
    while (ss->queue || ss->timing) {
        if (ss->timer) {
            ss->loop.timer_stop(ss->loop.data, ss->timer);
            ss->timer = NULL;
        }
        held *list = ss->queue;
        ss->queue = NULL;
        for (held *h = ss->timing; h; h = h->next)
            ss->loop.timer_stop(ss->loop.data, h->timer);
        held *timing = ss->timing;
        ss->timing = NULL;
        complete_list(ds, list, WEIR_ECLOSED);
        complete_list(ds, timing, WEIR_ECLOSED);
    }
    /* no batch is held, so no timer is armed */
    weir__free(ds->base.ctx, ss);
}

/* ------------------------------------------------------------ the store */

static void d_maintain(weir_store *s, int64_t now_us)
{
    weir_store_maintain(of(s)->inner, now_us);
}

static void d_stats(weir_store *s, weir_store_stats *out)
{
    weir_store_stats_get(of(s)->inner, out);
}

static void d_destroy(weir_store *s)
{
    dstore *ds = of(s);
    while (ds->queue) {
        held *list = ds->queue;
        ds->queue = NULL;
        complete_list(ds, list, WEIR_ECLOSED);
    }
    weir_store_free(ds->inner);
    pthread_mutex_destroy(&ds->lock);
    weir__free(s->ctx, ds);
}

static const weir__store_ops deferred_ops = {
    .caps = 0,
    .submit = d_submit,
    .session_new = d_session_new,
    .session_submit = d_session_submit,
    .session_free = d_session_free,
    .maintain = d_maintain,
    .stats = d_stats,
    .destroy = d_destroy,
};

weir_status weir_deferred_store_new(weir_ctx *ctx, weir_store *inner,
                                    const weir_deferred_options *opts, weir_store **out)
{
    if (!ctx || !inner || !out) {
        weir_store_free(inner);
        return WEIR_EINVAL;
    }
    dstore *ds = weir__calloc(ctx, 1, sizeof(*ds));
    if (!ds) {
        weir_store_free(inner);
        return WEIR_ENOMEM;
    }
    ds->ops = deferred_ops;
    ds->base.ops = &ds->ops;
    ds->base.ctx = ctx;
    ds->inner = inner;
    if (opts)
        ds->o = *opts;
    if (!ds->o.fail_status)
        ds->o.fail_status = WEIR_EUNAVAIL;
    if (ds->o.shared_keys)
        ds->ops.caps |= WEIR_STORE_SHARED_KEYS;
    pthread_mutex_init(&ds->lock, NULL);
    *out = &ds->base;
    return WEIR_OK;
}

/* ------------------------------------------------------------ options as text */

static bool parse_u64(const char *p, size_t n, uint64_t *out)
{
    if (n == 0 || n > 12)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(p[i] - '0');
    }
    *out = v;
    return true;
}

weir_status weir_deferred_options_parse(const char *spec, weir_deferred_options *out)
{
    weir_deferred_options o;
    memset(&o, 0, sizeof(o));
    const char *p = spec ? spec : "";
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        if (!eq)
            return WEIR_EINVAL;
        size_t kl = (size_t)(eq - p), vl = len - kl - 1;
        const char *v = eq + 1;
        uint64_t num = 0;
#define KEY(k) (kl == sizeof(k) - 1 && memcmp(p, k, kl) == 0)
        if (KEY("order")) {
            if (vl == 4 && memcmp(v, "fifo", 4) == 0)
                o.order = WEIR_DEFERRED_FIFO;
            else if (vl == 7 && memcmp(v, "reverse", 7) == 0)
                o.order = WEIR_DEFERRED_REVERSE;
            else if (vl == 10 && memcmp(v, "interleave", 10) == 0)
                o.order = WEIR_DEFERRED_INTERLEAVE;
            else
                return WEIR_EINVAL;
        } else if (!parse_u64(v, vl, &num) || num > UINT32_MAX) {
            return WEIR_EINVAL;
        } else if (KEY("delay_ms")) {
            o.delay_us = (int64_t)num * 1000;
        } else if (KEY("fail_every")) {
            o.fail_every = (unsigned)num;
        } else if (KEY("fail_ops") && num <= 1) {
            o.fail_ops = num == 1;
        } else if (KEY("refuse_every")) {
            o.refuse_every = (unsigned)num;
        } else if (KEY("timeout_every")) {
            o.timeout_every = (unsigned)num;
        } else if (KEY("timeout_ms")) {
            o.timeout_us = (int64_t)num * 1000;
        } else if (KEY("shared_keys") && num <= 1) {
            o.shared_keys = num == 1;
        } else {
            return WEIR_EINVAL;
        }
#undef KEY
        p += len + (end != NULL);
    }
    *out = o;
    return WEIR_OK;
}
