/*
 * session.h - a Redis store session's state (conn.c drives its batches
 * and calls, link.c its connection) and the small parts both use:
 * batch and call pools, completion, the breaker's count, timers.
 */
#ifndef WEIR_STORE_REDIS_SESSION_H
#define WEIR_STORE_REDIS_SESSION_H

#include <hiredis/async.h>
#include <string.h>

#include "core/context.h"
#include "store/redis/codec.h"
#include "store/redis/deny_cache.h"
#include "store/redis/loop_io.h"
#include "store/redis/reader.h"
#include "store/redis/redis_internal.h"

typedef struct rbatch {
    struct rbatch *next;
    weir__redis_batch b;
    weir_store_cb cb;
    void *arg;
    int64_t asked; /* submitted, monotonic */
    int64_t deadline;
    weir_status status; /* on the ready list: what it completes with */
    bool probe;         /* the breaker's half-open probe */
    bool solo;          /* sent in a call of its own, its keys declared */
    bool asking;        /* a solo batch sent after ASKING (a slot migrating) */
} rbatch;

typedef struct rcall {
    struct rcall *next;
    struct rsession *ss;
    rbatch *batches;
    int64_t sent_at;
    int64_t deadline; /* the earliest of its batches' */
    bool abandoned;   /* completed already; its answer is dropped */
} rcall;

typedef enum { S_DOWN, S_CONNECTING, S_UP } conn_state;

typedef struct rsession {
    weir_store_session base;
    redis_store *rs;
    weir_loop_adapter loop;
    /* where it connects (the store's address, or a cluster node's), and
     * the breaker of that server */
    const char *host;
    int port;
    breaker *br;
    /* a cluster node: calls in format 3 (codec.h), and an error that says
     * a key is elsewhere (MOVED, ASK, a non-local key, ...) hands each
     * batch of the call to the cluster layer, its rbatch already freed */
    bool keys_in_args;
    void (*redirect)(void *owner, const char *err, size_t len, void *arg);
    /* a cluster node: its connection is up (the slot map can be asked) */
    void (*up)(void *owner, struct rsession *ss);
    void *owner;
    /* a master found through Sentinel: commands of the owner's sent after
     * AUTH and SELECT, before the script (its ROLE check); until the
     * sentinels name the master, host is NULL and it stays down; up()
     * tells the owner the connection is up, as for a cluster node */
    void (*setup)(struct rsession *ss);
    redisAsyncContext *ac;
    weir__redis_io io; /* ac on the loop's fd watch */
    conn_state state;
    bool fcall; /* the script is a function library: FCALL, else EVALSHA */
    char sha[41];
    /* batches waiting for the next call, oldest first */
    rbatch *q_head, *q_tail;
    /* batches answered on the next iteration without a call: failed (the
     * breaker open, no connection) or denied by the over-limit cache */
    rbatch *ready_head, *ready_tail;
    deny_cache *cache;
    weir__redis_reader_caps caps; /* the connection's reader's */
    /* calls in flight, in the order sent */
    rcall *f_head, *f_tail;
    void *flush_timer, *deadline_timer, *retry_timer, *connect_timer;
    int64_t deadline_at;
    int64_t backoff_us;
    uint64_t jitter; /* xorshift state */
    bool freeing;
    bool counted_up; /* counted in rs->connections */
    rbatch *spare_batches;
    rcall *spare_calls;
    /* link.c tells conn.c that the connection is up (set by conn.c) */
    void (*link_up)(struct rsession *ss);
    /* the argument vector of a call, reused */
    const char **argv;
    size_t *argvlen;
    char *numbuf;
    size_t argv_cap, numbuf_cap;
} rsession;

/* ------------------------------------------------------------ small parts
 * (inline: they are used by both halves, and a helper of libweir's own
 * must not take a name an embedder's program may use) */

static inline rbatch *batch_get(rsession *ss)
{
    rbatch *b = ss->spare_batches;
    if (b) {
        ss->spare_batches = b->next;
        return b;
    }
    return weir__malloc(ss->rs->base.ctx, sizeof(rbatch));
}

static inline void batch_put(rsession *ss, rbatch *b)
{
    b->next = ss->spare_batches;
    ss->spare_batches = b;
}

static inline rcall *call_get(rsession *ss)
{
    rcall *c = ss->spare_calls;
    if (c) {
        ss->spare_calls = c->next;
        return c;
    }
    return weir__malloc(ss->rs->base.ctx, sizeof(rcall));
}

static inline void call_put(rsession *ss, rcall *c)
{
    c->next = ss->spare_calls;
    ss->spare_calls = c;
}

static inline void complete(rsession *ss, rbatch *list, weir_status status)
{
    while (list) {
        rbatch *b = list;
        list = b->next;
        weir_store_cb cb = b->cb;
        void *arg = b->arg;
        weir_op *ops = b->b.ops;
        size_t n = b->b.n;
        batch_put(ss, b);
        cb(arg, ops, n, status);
    }
}

static inline size_t list_len(const rbatch *b)
{
    size_t n = 0;
    for (; b; b = b->next)
        n++;
    return n;
}

static inline void note_failure(rsession *ss, bool probe)
{
    if (weir__breaker_failure(ss->br, weir__redis_mono_us(), probe))
        weir__log(ss->rs->base.ctx, WEIR_LOG_WARN,
                  "event=redis_breaker state=open cooldown_ms=%lld; decisions follow their "
                  "failure_mode until a probe gets through",
                  (long long)(ss->rs->o.breaker_cooldown_us / 1000));
}

static inline bool list_has_probe(const rbatch *b)
{
    for (; b; b = b->next)
        if (b->probe)
            return true;
    return false;
}

/* ------------------------------------------------------------ timers */

static inline void *timer(rsession *ss, int64_t after_us, void (*cb)(void *), void *arg)
{
    return ss->loop.timer_start(ss->loop.data, after_us < 0 ? 0 : after_us, cb, arg);
}

static inline void *background_timer(rsession *ss, int64_t after_us, void (*cb)(void *), void *arg)
{
    void *t = timer(ss, after_us, cb, arg);
    if (t)
        ss->loop.unref(ss->loop.data, t);
    return t;
}

static inline void timer_cancel(rsession *ss, void **t)
{
    if (*t) {
        ss->loop.timer_stop(ss->loop.data, *t);
        *t = NULL;
    }
}

/* conn.c: a session to @host:@port (NULL: the store's unix socket) under
 * @br, for the store's own sessions and a cluster's node sessions. */
rsession *weir__redis_session_make(redis_store *rs, const weir_loop_adapter *loop, const char *host,
                                   int port, breaker *br);

/* conn.c: submit a batch, solo (in a call of its own, its keys declared:
 * one slot) and after ASKING if asked. weir__redis_session_submit() is
 * this with neither. */
weir_status weir__redis_submit(rsession *ss, weir_op *ops, size_t n, int64_t now_us, unsigned flags,
                               weir_store_cb cb, void *arg, bool solo, bool asking);

/* conn.c: nothing queued, in flight or to be answered. */
bool weir__redis_session_idle(const rsession *ss);

/* An error that says a key is served elsewhere, or not now: the cluster
 * layer's to handle (cluster/cluster.c). */
static inline bool weir__redis_elsewhere(const char *err, size_t len)
{
    static const char *const words[] = {"MOVED ", "ASK ", "TRYAGAIN", "CLUSTERDOWN", "READONLY"};
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        size_t n = strlen(words[i]);
        if (len >= n && memcmp(err, words[i], n) == 0)
            return true;
    }
    return strstr(err, "non local key") != NULL;
}

/* link.c: the connection */
/* Connect (AUTH, SELECT, loading the script); link_up() when it is up. */
void weir__redis_link_connect(rsession *ss);
/* Drop the connection (if any): calls in flight complete with
 * WEIR_EUNAVAIL (WEIR_ECLOSED when freeing), queued batches too; then try
 * again after a backoff, unless the session is being freed. */
void weir__redis_link_drop(rsession *ss, bool error);

#endif /* WEIR_STORE_REDIS_SESSION_H */
