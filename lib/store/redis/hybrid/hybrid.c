/*
 * hybrid.c - `sync: local` on the Redis store: a TAKE flagged
 * WEIR_OP_SYNC_LOCAL is decided from capacity this session reserved ahead
 * in Redis, in memory, without a round trip; every sync interval the
 * session reserves again what the key asked for in the last interval and
 * gives back what it did not use.
 *
 * Every session wraps the store's own session (one server's, conn.c, or
 * a cluster's, cluster/cluster.c): a batch with no flagged op goes
 * straight through, as it was.
 *
 * The reservation is a TAKE of the key's demand under the key's own limit
 * and algorithm, in Redis; a local admission spends it. So what all
 * instances admit is what Redis granted them: nothing is admitted that
 * Redis did not count, and a reservation is spent within one interval of
 * being made (at the next sync what is left goes back, by the script's
 * REFUND) — the only inexactness is that a window's capacity reserved
 * just before the window ends may be spent just after, at most one
 * interval of the key's traffic. A key whose reservation is spent, or
 * that Redis would not reserve for (too little left), is decided by Redis
 * as under `sync: global`: near its limit a key is exact, and slow.
 *
 * While Redis is away, a flagged op is decided here, on a memory store the
 * store's sessions share, at 1/instances of its limit; what that admitted is
 * charged to Redis at the first sync that gets through (the
 * reconciliation), and what Redis can no longer take is the measured
 * overshoot (weir_redis_hybrid_stats.overshoot).
 */
#include <string.h>

#include <xxhash.h>

#include "algo/algo.h"
#include "core/context.h"
#include "store/redis/codec.h"
#include "store/redis/hybrid/hybrid.h"

/* Keys a session follows at most; past it a flagged op is decided by
 * Redis as under sync: global. */
#define MAX_KEYS 65536u
#define BUCKETS 4096u

typedef struct hentry {
    struct hentry *next;                /* in its bucket */
    struct hentry *all_prev, *all_next; /* every entry, for the syncs */
    uint64_t hash;
    weir_limit lim;
    int64_t interval_us;
    int64_t next_sync;  /* monotonic */
    uint64_t allowance; /* reserved in Redis, not spent */
    uint64_t demand;    /* hits asked since the last sync */
    uint64_t unbacked;  /* admitted while Redis was away, not charged there yet */
    weir_result last;   /* Redis's answer to the last reservation */
    int64_t last_at;
    uint64_t retry_want; /* a reservation Redis refused: what it had left, asked next */
    unsigned in_flight;  /* sync ops on their way */
    bool saturated; /* Redis refused the last reservation: what it does not cover is denied here */
    bool away;      /* the last sync did not reach Redis: decided at the share */
    bool dead;      /* out of the table; freed when in_flight is 0 */
    size_t key_len;
    char key[];
} hentry;

/* One batch with flagged ops, until the store answers. */
typedef struct hbatch {
    struct hbatch *next; /* the ready list */
    hsession *hs;
    weir__batch_req b;
    /* per op: hits spent from a reservation (0: sent to Redis), and the
     * entry; then the forwarded ops' copy and their places */
    uint64_t *spent;
    hentry **entry;
    weir_op *fwd;
    uint32_t *fwd_idx;
    size_t n_fwd;
} hbatch;

/* One sync call: its ops and, per op, the entry and what it asked. */
typedef struct hsync {
    hsession *hs;
    size_t n;
    weir_op *ops;
    hentry **entry;
    uint64_t *amount;
    unsigned char *what; /* SYNC_RESERVE, SYNC_REST (what Redis said it had
                            left), SYNC_RETURN, SYNC_RECONCILE */
} hsync;

enum { SYNC_RESERVE, SYNC_REST, SYNC_RETURN, SYNC_RECONCILE };

struct hsession {
    weir_store_session base;
    redis_store *rs;
    weir_loop_adapter loop;
    weir_store_session *inner;
    hentry *buckets[BUCKETS];
    hentry *all; /* every entry: what a sync looks through */
    size_t n_keys;
    void *sync_timer, *ready_timer;
    int64_t sync_at;
    hbatch *ready; /* answered without a call, on the next iteration */
    uint32_t share_ppm;
    bool freeing;
};

static weir_ctx *ctx_of(hsession *hs)
{
    return hs->rs->base.ctx;
}

/* ------------------------------------------------------------ the table */

static hentry *entry_get(hsession *hs, const weir_op *op, bool make)
{
    uint64_t h = XXH3_64bits(op->key, op->key_len);
    for (hentry *e = hs->buckets[h % BUCKETS]; e; e = e->next)
        if (e->hash == h && e->key_len == op->key_len && memcmp(e->key, op->key, e->key_len) == 0)
            return e;
    if (!make || hs->n_keys >= MAX_KEYS)
        return NULL;
    hentry *e = weir__calloc(ctx_of(hs), 1, sizeof(*e) + op->key_len);
    if (!e)
        return NULL;
    e->hash = h;
    e->lim = *op->limit;
    e->interval_us = (int64_t)WEIR_OP_SYNC_MS(op->flags) * 1000;
    if (e->interval_us < 1000)
        e->interval_us = 1000;
    e->next_sync = weir__redis_mono_us(); /* a first reservation at once */
    e->key_len = op->key_len;
    memcpy(e->key, op->key, op->key_len);
    e->next = hs->buckets[h % BUCKETS];
    hs->buckets[h % BUCKETS] = e;
    e->all_next = hs->all;
    if (hs->all)
        hs->all->all_prev = e;
    hs->all = e;
    hs->n_keys++;
    weir__hybrid_arm(hs, e->next_sync);
    return e;
}

static void entry_drop(hsession *hs, hentry *e)
{
    hentry **pp = &hs->buckets[e->hash % BUCKETS];
    while (*pp != e)
        pp = &(*pp)->next;
    *pp = e->next;
    if (e->all_prev)
        e->all_prev->all_next = e->all_next;
    else
        hs->all = e->all_next;
    if (e->all_next)
        e->all_next->all_prev = e->all_prev;
    hs->n_keys--;
    e->dead = true;
    if (e->in_flight == 0)
        weir__free(ctx_of(hs), e);
}

/* ------------------------------------------------------------ decisions */

/* A TAKE that keeps a reserve free is Redis's to decide: the capacity
 * reserved here says nothing of what is left there. */
static bool flagged(const weir_op *op)
{
    return (op->flags & WEIR_OP_SYNC_LOCAL) && op->kind == WEIR_OP_TAKE && op->hits > 0 &&
           op->reserve == 0;
}

/* A local decision's result: Redis's last view, plus what is still
 * reserved here. A denial may be retried at the next sync (or when
 * Redis's own answer said, if later). */
static void local_result(const hentry *e, int64_t mono, bool allowed, weir_result *r)
{
    int64_t age = mono - e->last_at;
    *r = e->last;
    r->allowed = allowed;
    r->remaining = e->last.remaining + e->allowance;
    if (r->remaining > r->limit)
        r->remaining = r->limit;
    r->reset_after_us = e->last.reset_after_us > age ? e->last.reset_after_us - age : 0;
    r->retry_after_us = 0;
    if (!allowed) {
        int64_t sync = e->next_sync > mono ? e->next_sync - mono : 1;
        int64_t redis = e->last.retry_after_us > age ? e->last.retry_after_us - age : 0;
        r->retry_after_us = e->last.retry_after_us < 0 ? -1 : redis > sync ? redis : sync;
    }
    r->delay_us = 0;
    r->lease = 0;
}

static void hbatch_free(hsession *hs, hbatch *hb)
{
    weir__free(ctx_of(hs), hb);
}

static void complete(hbatch *hb, weir_status st)
{
    weir__batch_req b = hb->b;
    hbatch_free(hb->hs, hb);
    weir__batch_req_done(b, st);
}

static void on_ready(void *arg)
{
    hsession *hs = arg;
    hs->ready_timer = NULL;
    hbatch *list = hs->ready;
    hs->ready = NULL;
    while (list) {
        hbatch *hb = list;
        list = hb->next;
        complete(hb, WEIR_OK);
    }
}

/* Decide @op on the session's memory store at its share (Redis is away):
 * true when that decided it. */
static bool decide_outage(hsession *hs, hentry *e, weir_op *op, int64_t now_us)
{
    weir_store *outage = hs->rs->outage;
    if (!outage)
        return false;
    weir_limit share;
    if (weir__limit_share(op->limit, hs->share_ppm, &share) != WEIR_OK)
        return false;
    weir_op local = *op;
    local.limit = &share;
    if (weir_memstore_run(outage, &local, 1, now_us, 0) != WEIR_OK || local.status != WEIR_OK)
        return false;
    op->status = WEIR_OK;
    op->result = local.result;
    if (local.result.allowed && e)
        e->unbacked += op->hits;
    redis_count(&hs->rs->hybrid_outage, 1);
    return true;
}

/* A batch that went to the store holds its entries (counted in their
 * in_flight) until it comes back: a sync may drop an entry meanwhile. */
static void entries_hold(hbatch *hb)
{
    for (size_t i = 0; i < hb->b.n; i++)
        if (hb->entry[i])
            hb->entry[i]->in_flight++;
}

static void entries_release(hsession *hs, hbatch *hb)
{
    for (size_t i = 0; i < hb->b.n; i++) {
        hentry *e = hb->entry[i];
        if (e && --e->in_flight == 0 && e->dead)
            weir__free(ctx_of(hs), e);
    }
}

/* The store answered the ops a hybrid batch sent it. */
static void fwd_done(void *arg, weir_op *fwd, size_t k, weir_status status)
{
    hbatch *hb = arg;
    hsession *hs = hb->hs;
    bool denied = false;
    for (size_t j = 0; j < k; j++) {
        weir_op *op = &hb->b.ops[hb->fwd_idx[j]];
        if (fwd != hb->b.ops) {
            op->status = fwd[j].status;
            op->result = fwd[j].result;
        }
        if (status != WEIR_OK)
            op->status = status;
        bool away =
            op->status == WEIR_EUNAVAIL || op->status == WEIR_ETIMEDOUT || op->status == WEIR_EIO;
        if (away && flagged(op))
            decide_outage(hs, hb->entry[hb->fwd_idx[j]], op, hb->b.now_us);
        denied |= op->status == WEIR_OK && op->kind == WEIR_OP_TAKE && !op->result.allowed;
    }
    /* an atomic batch denied spends nothing: the reservations go back */
    if (denied && (hb->b.flags & WEIR_BATCH_ATOMIC))
        for (size_t i = 0; i < hb->b.n; i++)
            if (hb->spent[i] && hb->entry[i])
                hb->entry[i]->allowance += hb->spent[i];
    entries_release(hs, hb);
    complete(hb, WEIR_OK);
}

weir_status weir__hybrid_submit(weir_store_session *base, weir_op *ops, size_t n, int64_t now_us,
                                unsigned flags, weir_store_cb cb, void *arg)
{
    hsession *hs = (hsession *)base;
    /* the store's entry: an unknown kind is refused here */
    size_t nf = 0;
    for (size_t i = 0; i < n; i++) {
        if ((unsigned)ops[i].kind > (unsigned)WEIR_OP_CHARGE)
            return WEIR_EINVAL;
        nf += flagged(&ops[i]);
    }
    if (nf == 0)
        return hs->rs->inner->session_submit(hs->inner, ops, n, now_us, flags, cb, arg);
    weir_ctx *ctx = ctx_of(hs);
    hbatch *hb = weir__malloc(ctx, sizeof(*hb) + n * (sizeof(uint64_t) + sizeof(hentry *) +
                                                      sizeof(weir_op) + sizeof(uint32_t)));
    if (!hb)
        return WEIR_ENOMEM;
    *hb = (hbatch){.hs = hs, .b = {ops, n, now_us, flags, cb, arg}};
    hb->spent = (uint64_t *)(hb + 1);
    hb->entry = (hentry **)(hb->spent + n);
    hb->fwd = (weir_op *)(hb->entry + n);
    hb->fwd_idx = (uint32_t *)(hb->fwd + n);
    int64_t mono = weir__redis_mono_us();
    bool denied = false;
    for (size_t i = 0; i < n; i++) {
        weir_op *op = &ops[i];
        hentry *e = flagged(op) ? entry_get(hs, op, true) : NULL;
        hb->entry[i] = e;
        hb->spent[i] = 0;
        if (e) {
            /* from the reservation; else, Redis away, at the share; else,
             * Redis having refused more, denied here; else Redis decides
             * (and the key's next reservation grows) */
            e->demand += op->hits;
            bool spend = e->allowance >= op->hits;
            if (spend || (e->saturated && !e->away)) {
                if (spend) {
                    e->allowance -= op->hits;
                    hb->spent[i] = op->hits;
                }
                op->status = WEIR_OK;
                local_result(e, mono, spend, &op->result);
                redis_count(&hs->rs->hybrid_local, 1);
                denied |= !spend;
                continue;
            }
            if (e->away && decide_outage(hs, e, op, now_us)) {
                denied |= !op->result.allowed;
                continue;
            }
        }
        hb->fwd[hb->n_fwd] = *op;
        hb->fwd_idx[hb->n_fwd++] = (uint32_t)i;
    }
    if (denied && (flags & WEIR_BATCH_ATOMIC)) {
        /* denied as a whole: nothing is spent, and Redis only looks */
        for (size_t i = 0; i < n; i++)
            if (hb->spent[i]) {
                hb->entry[i]->allowance += hb->spent[i];
                hb->spent[i] = 0;
            }
        for (size_t j = 0; j < hb->n_fwd; j++)
            if (hb->fwd[j].kind == WEIR_OP_TAKE)
                hb->fwd[j].kind = WEIR_OP_CHECK;
    }
    if (hb->n_fwd == 0) {
        hb->next = hs->ready;
        hs->ready = hb;
        if (!hs->ready_timer)
            hs->ready_timer = hs->loop.timer_start(hs->loop.data, 0, on_ready, hs);
        return WEIR_OK;
    }
    /* every op to Redis: the caller's array as it is */
    weir_op *fwd = hb->n_fwd == n && !denied ? ops : hb->fwd;
    entries_hold(hb);
    weir_status st =
        hs->rs->inner->session_submit(hs->inner, fwd, hb->n_fwd, now_us, flags, fwd_done, hb);
    if (st != WEIR_OK) {
        for (size_t i = 0; i < n; i++)
            if (hb->spent[i])
                hb->entry[i]->allowance += hb->spent[i];
        entries_release(hs, hb);
        hbatch_free(hs, hb);
    }
    return st;
}

/* ------------------------------------------------------------ syncs */

static void on_sync_timer(void *arg);

void weir__hybrid_arm(hsession *hs, int64_t at)
{
    if (hs->freeing || (hs->sync_timer && hs->sync_at <= at))
        return;
    if (hs->sync_timer)
        hs->loop.timer_stop(hs->loop.data, hs->sync_timer);
    hs->sync_at = at;
    int64_t wait = at - weir__redis_mono_us();
    hs->sync_timer = hs->loop.timer_start(hs->loop.data, wait < 0 ? 0 : wait, on_sync_timer, hs);
    if (hs->sync_timer)
        hs->loop.unref(hs->loop.data, hs->sync_timer);
}

static void sync_done(void *arg, weir_op *ops, size_t n, weir_status status)
{
    hsync *sy = arg;
    hsession *hs = sy->hs;
    redis_store *rs = hs->rs;
    int64_t mono = weir__redis_mono_us();
    bool reached = status == WEIR_OK;
    for (size_t i = 0; i < n; i++) {
        hentry *e = sy->entry[i];
        weir_op *op = &ops[i];
        bool ok = status == WEIR_OK && op->status == WEIR_OK;
        reached |= ok;
        e->in_flight--;
        if (!e->dead)
            e->away = status != WEIR_OK || op->status == WEIR_EUNAVAIL ||
                      op->status == WEIR_ETIMEDOUT || op->status == WEIR_EIO;
        if (!e->dead) {
            if ((sy->what[i] == SYNC_RESERVE || sy->what[i] == SYNC_REST) && ok) {
                e->last = op->result;
                e->last_at = mono;
                /* Redis's rest reserved: the key is still at its limit */
                e->saturated = !op->result.allowed || sy->what[i] == SYNC_REST;
                if (op->result.allowed) {
                    e->allowance += sy->amount[i];
                    redis_count(&rs->hybrid_reserved, sy->amount[i]);
                } else if (op->result.remaining > 0 && op->result.remaining < sy->amount[i]) {
                    /* what Redis has left, asked for at once */
                    e->retry_want = op->result.remaining;
                    e->next_sync = mono;
                    weir__hybrid_arm(hs, mono);
                }
                if (e->saturated && e->retry_want == 0) {
                    /* held at its limit: ask again when Redis says some
                     * will be back, but at most an interval and at least a
                     * quarter of one from now (a long interval would
                     * otherwise deny what refills for the whole of it) */
                    int64_t retry = op->result.allowed ? 0 : op->result.retry_after_us;
                    int64_t floor = e->interval_us / 4;
                    int64_t at = mono + (retry < floor ? floor : retry);
                    if (retry >= 0 && at < e->next_sync) {
                        e->next_sync = at;
                        weir__hybrid_arm(hs, at);
                    }
                }
            } else if (sy->what[i] == SYNC_RETURN && !ok) {
                /* not given back: it stays charged in Redis, and spendable here */
                e->allowance += sy->amount[i];
            } else if (sy->what[i] == SYNC_RECONCILE) {
                if (!ok) {
                    e->unbacked += sy->amount[i]; /* next time */
                } else if (!op->result.allowed) {
                    /* Redis has less left than was admitted while it was away:
                     * charge what it has, the rest is overshoot */
                    uint64_t fits = op->result.remaining < sy->amount[i] ? op->result.remaining : 0;
                    redis_count(&rs->hybrid_overshoot, sy->amount[i] - fits);
                    e->unbacked += fits;
                }
            }
        }
        if (e->dead && e->in_flight == 0)
            weir__free(ctx_of(hs), e);
    }
    if (reached)
        atomic_store_explicit(&rs->hybrid_synced_at, weir__redis_mono_us(), memory_order_relaxed);
    weir__free(ctx_of(hs), sy);
}

/* The most one TAKE can reserve under @l: a bucket's or GCRA's burst, a
 * window's limit. */
static uint64_t most_at_once(const weir_limit *l)
{
    switch (l->algorithm) {
    case WEIR_ALGO_FIXED_WINDOW:
    case WEIR_ALGO_SLIDING_LOG:
    case WEIR_ALGO_SLIDING_COUNTER:
        return l->limit;
    default:
        return l->burst;
    }
}

/* What each entry due asks at this sync, as ops of one batch. */
static void on_sync_timer(void *arg)
{
    hsession *hs = arg;
    hs->sync_timer = NULL;
    int64_t mono = weir__redis_mono_us();
    int64_t next = INT64_MAX;
    size_t due = 0;
    for (hentry *e = hs->all; e; e = e->all_next)
        if (e->next_sync <= mono)
            due += 2;
    hsync *sy =
        due ? weir__malloc(ctx_of(hs), sizeof(*sy) + due * (sizeof(weir_op) + sizeof(hentry *) +
                                                            sizeof(uint64_t) + 1))
            : NULL;
    if (sy) {
        sy->hs = hs;
        sy->n = 0;
        sy->ops = (weir_op *)(sy + 1);
        sy->entry = (hentry **)(sy->ops + due);
        sy->amount = (uint64_t *)(sy->entry + due);
        sy->what = (unsigned char *)(sy->amount + due);
    }
    for (hentry *e = hs->all, *after; e; e = after) {
        after = e->all_next;
        if (e->next_sync > mono) {
            next = e->next_sync < next ? e->next_sync : next;
            continue;
        }
        /* reserve the last interval's demand and a quarter more (its
         * traffic grows, and the next reservation is on its way while
         * this one is spent), or what Redis said it had left; what is
         * left over goes back */
        bool rest = e->retry_want != 0;
        uint64_t want = rest        ? e->retry_want + e->allowance
                        : e->demand ? e->demand + e->demand / 4 + 1
                                    : 0;
        uint64_t have = e->allowance;
        if (!rest)
            e->demand = 0;
        e->retry_want = 0;
        e->next_sync = mono + e->interval_us;
        if (sy && e->unbacked) {
            sy->ops[sy->n] = (weir_op){.key = e->key,
                                       .key_len = e->key_len,
                                       .limit = &e->lim,
                                       .hits = e->unbacked,
                                       .kind = WEIR_OP_TAKE,
                                       .flags = WEIR_OP_NO_LOCAL_CACHE};
            sy->what[sy->n] = SYNC_RECONCILE;
            sy->amount[sy->n] = e->unbacked;
            sy->entry[sy->n++] = e;
            e->in_flight++;
            e->unbacked = 0;
        } else if (sy && want != have) {
            bool more = want > have;
            uint64_t amount = more ? want - have : have - want;
            if (more && amount > most_at_once(&e->lim))
                amount = most_at_once(&e->lim);
            if (!more)
                e->allowance -= amount;
            sy->ops[sy->n] = (weir_op){.key = e->key,
                                       .key_len = e->key_len,
                                       .limit = &e->lim,
                                       .hits = amount,
                                       .kind = more ? WEIR_OP_TAKE : WEIR_OP_REFUND,
                                       .flags = WEIR_OP_NO_LOCAL_CACHE};
            sy->what[sy->n] = !more ? SYNC_RETURN : rest ? SYNC_REST : SYNC_RESERVE;
            sy->amount[sy->n] = amount;
            sy->entry[sy->n++] = e;
            e->in_flight++;
            if (!more)
                redis_count(&hs->rs->hybrid_returned, amount);
        }
        if (want == 0 && e->allowance == 0 && e->unbacked == 0 && e->in_flight == 0)
            entry_drop(hs, e); /* idle, nothing held */
        else
            next = e->next_sync < next ? e->next_sync : next;
    }
    if (sy && sy->n > 0) {
        if (hs->rs->inner->session_submit(hs->inner, sy->ops, sy->n, weir_ctx_now_us(ctx_of(hs)), 0,
                                          sync_done, sy) != WEIR_OK)
            sync_done(sy, sy->ops, sy->n, WEIR_EUNAVAIL);
    } else {
        weir__free(ctx_of(hs), sy);
    }
    if (next != INT64_MAX)
        weir__hybrid_arm(hs, next);
}

/* ------------------------------------------------------------ the session */

weir_status weir__hybrid_session_new(weir_store *s, const weir_loop_adapter *loop,
                                     weir_store_session **out)
{
    redis_store *rs = (redis_store *)s;
    hsession *hs = weir__calloc(s->ctx, 1, sizeof(*hs));
    if (!hs)
        return WEIR_ENOMEM;
    weir_status st = rs->inner->session_new(s, loop, &hs->inner);
    if (st != WEIR_OK) {
        weir__free(s->ctx, hs);
        return st;
    }
    hs->base.store = s;
    hs->rs = rs;
    hs->loop = *loop;
    hs->share_ppm = 1000000u / (rs->o.instances ? rs->o.instances : 1u);
    if (hs->share_ppm == 0)
        hs->share_ppm = 1;
    *out = &hs->base;
    return WEIR_OK;
}

void weir__hybrid_session_free(weir_store_session *base)
{
    hsession *hs = (hsession *)base;
    hs->freeing = true;
    if (hs->sync_timer)
        hs->loop.timer_stop(hs->loop.data, hs->sync_timer);
    if (hs->ready_timer)
        hs->loop.timer_stop(hs->loop.data, hs->ready_timer);
    on_ready(hs);
    /* the store's session completes what is in flight (syncs included) */
    hs->rs->inner->session_free(hs->inner);
    while (hs->all)
        entry_drop(hs, hs->all);
    weir__free(ctx_of(hs), hs);
}
