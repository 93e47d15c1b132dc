/*
 * conn.c - a Redis store session: one hiredis connection on one event
 * loop, driven through the loop adapter's fd and timer hooks.
 *
 * A batch submitted waits in the session's queue until the loop's next
 * iteration (or the batch window), when every batch queued leaves in one
 * script call: one round trip, and one command for Redis to run, however
 * many decisions and keys it carries. Calls in flight are kept in the
 * order they were sent, which is the order hiredis answers them in.
 *
 * Every batch has a deadline (its submission plus the timeout). One timer,
 * armed for the earliest deadline, fails what has passed it with
 * WEIR_ETIMEDOUT: a queued batch is dropped; a call in flight is
 * abandoned, its answer thrown away when it comes. A connection whose
 * oldest call has had no answer for a stall period (Redis paused, a
 * network gone quiet) is dropped and made again, with backoff.
 *
 * Invariants: a batch's callback runs exactly once, from the loop, never
 * from inside redis_session_submit(); ss->ac is NULL whenever hiredis may
 * be freeing the connection, so nothing is sent on one that is going.
 */
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <string.h>

#include "core/context.h"
#include "store/redis/codec.h"
#include "store/redis/deny_cache.h"
#include "store/redis/redis_internal.h"

/* Ops in one script call at most: a bigger queue leaves in several calls
 * (a batch is never split). */
#define CALL_MAX_OPS 512u
/* Reconnect backoff: from the first to the last, doubling, with +-25%
 * jitter so that many workers (and instances) do not reconnect at once. */
#define BACKOFF_MIN_US 50000
#define BACKOFF_MAX_US 2000000
/* A connection whose oldest call has waited this long is dropped. */
#define STALL_MIN_US 200000

typedef struct rbatch {
    struct rbatch *next;
    weir__redis_batch b;
    weir_store_cb cb;
    void *arg;
    int64_t asked; /* submitted, monotonic */
    int64_t deadline;
    weir_status status; /* on the ready list: what it completes with */
    bool probe;         /* the breaker's half-open probe */
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
    redisAsyncContext *ac;
    void *watch;
    unsigned watch_events;
    conn_state state;
    bool fcall; /* the script is a function library: FCALL, else EVALSHA */
    char sha[41];
    /* batches waiting for the next call, oldest first */
    rbatch *q_head, *q_tail;
    /* batches answered on the next iteration without a call: failed (the
     * breaker open, no connection) or denied by the over-limit cache */
    rbatch *ready_head, *ready_tail;
    deny_cache *cache;
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
    /* the argument vector of a call, reused */
    const char **argv;
    size_t *argvlen;
    char *numbuf;
    size_t argv_cap, numbuf_cap;
} rsession;

static void connect_now(rsession *ss);
static void flush(rsession *ss);
static void arm_deadline(rsession *ss);

/* ------------------------------------------------------------ small parts */

static rbatch *batch_get(rsession *ss)
{
    rbatch *b = ss->spare_batches;
    if (b) {
        ss->spare_batches = b->next;
        return b;
    }
    return weir__malloc(ss->rs->base.ctx, sizeof(rbatch));
}

static void batch_put(rsession *ss, rbatch *b)
{
    b->next = ss->spare_batches;
    ss->spare_batches = b;
}

static rcall *call_get(rsession *ss)
{
    rcall *c = ss->spare_calls;
    if (c) {
        ss->spare_calls = c->next;
        return c;
    }
    return weir__malloc(ss->rs->base.ctx, sizeof(rcall));
}

static void call_put(rsession *ss, rcall *c)
{
    c->next = ss->spare_calls;
    ss->spare_calls = c;
}

/* Complete a list of batches with @status (WEIR_OK: their ops hold the
 * results). The list is detached first: a callback may submit again. */
static void complete(rsession *ss, rbatch *list, weir_status status)
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

static size_t list_len(const rbatch *b)
{
    size_t n = 0;
    for (; b; b = b->next)
        n++;
    return n;
}

/* A failure of Redis (not of the request): the breaker counts it. */
static void note_failure(rsession *ss, bool probe)
{
    if (breaker_failure(&ss->rs->br, redis_mono_us(), probe))
        weir__log(ss->rs->base.ctx, WEIR_LOG_WARN,
                  "event=redis_breaker state=open cooldown_ms=%lld; decisions follow their "
                  "failure_mode until a probe gets through",
                  (long long)(ss->rs->o.breaker_cooldown_us / 1000));
}

static bool list_has_probe(const rbatch *b)
{
    for (; b; b = b->next)
        if (b->probe)
            return true;
    return false;
}

/* ------------------------------------------------------------ timers */

static void *timer(rsession *ss, int64_t after_us, void (*cb)(void *), void *arg)
{
    return ss->loop.timer_start(ss->loop.data, after_us < 0 ? 0 : after_us, cb, arg);
}

/* A timer that does not keep the loop running: waiting to reconnect, or
 * for a connection, is no work the loop owes anyone. */
static void *background_timer(rsession *ss, int64_t after_us, void (*cb)(void *), void *arg)
{
    void *t = timer(ss, after_us, cb, arg);
    if (t)
        ss->loop.unref(ss->loop.data, t);
    return t;
}

static void timer_cancel(rsession *ss, void **t)
{
    if (*t) {
        ss->loop.timer_stop(ss->loop.data, *t);
        *t = NULL;
    }
}

/* Complete the ready list, each batch with its own status. */
static void complete_ready(rsession *ss)
{
    rbatch *list = ss->ready_head;
    ss->ready_head = ss->ready_tail = NULL;
    while (list) {
        rbatch *b = list;
        list = b->next;
        b->next = NULL;
        complete(ss, b, b->status);
    }
}

static void on_flush_timer(void *arg)
{
    rsession *ss = arg;
    ss->flush_timer = NULL;
    flush(ss);
    complete_ready(ss);
}

static void arm_flush(rsession *ss, int64_t after_us)
{
    if (!ss->flush_timer)
        ss->flush_timer = timer(ss, after_us, on_flush_timer, ss);
}

static int64_t backoff_next(rsession *ss)
{
    int64_t b = ss->backoff_us ? ss->backoff_us : BACKOFF_MIN_US;
    ss->backoff_us = b * 2 > BACKOFF_MAX_US ? BACKOFF_MAX_US : b * 2;
    ss->jitter ^= ss->jitter << 13;
    ss->jitter ^= ss->jitter >> 7;
    ss->jitter ^= ss->jitter << 17;
    /* b * [0.75, 1.25) */
    return b - b / 4 + (int64_t)(ss->jitter % (uint64_t)(b / 2 + 1));
}

static void on_retry_timer(void *arg)
{
    rsession *ss = arg;
    ss->retry_timer = NULL;
    connect_now(ss);
}

/* ------------------------------------------------------------ the connection */

/* Drop the connection (if any) and try again after a backoff. Calls in
 * flight complete with WEIR_EUNAVAIL (from hiredis freeing them). */
static void drop(rsession *ss, bool error)
{
    redisAsyncContext *ac = ss->ac;
    timer_cancel(ss, &ss->connect_timer);
    if (ss->counted_up) {
        atomic_fetch_sub_explicit(&ss->rs->connections, 1, memory_order_relaxed);
        ss->counted_up = false;
    }
    if (error)
        redis_count(&ss->rs->connect_errors, 1);
    ss->state = S_DOWN;
    if (ac) {
        ss->ac = NULL;
        redisAsyncFree(ac); /* runs every pending callback with no reply */
    }
    /* what was waiting for the connection fails now, not at its deadline */
    if (ss->q_head) {
        rbatch *q = ss->q_head;
        ss->q_head = ss->q_tail = NULL;
        bool probe = list_has_probe(q);
        redis_count(&ss->rs->errors, list_len(q));
        if (!ss->freeing)
            note_failure(ss, probe);
        complete(ss, q, ss->freeing ? WEIR_ECLOSED : WEIR_EUNAVAIL);
    }
    if (!ss->freeing && !ss->retry_timer)
        ss->retry_timer = background_timer(ss, backoff_next(ss), on_retry_timer, ss);
}

static void on_connect_timer(void *arg)
{
    rsession *ss = arg;
    ss->connect_timer = NULL;
    weir__log(ss->rs->base.ctx, WEIR_LOG_WARN,
              "event=redis_connect_timeout timeout_ms=%lld; retrying",
              (long long)(ss->rs->o.connect_timeout_us / 1000));
    drop(ss, true);
}

/* hiredis's event hooks, onto the adapter's fd watch */
static void watch_set(rsession *ss, unsigned events)
{
    if (events == ss->watch_events || !ss->watch)
        return;
    ss->watch_events = events;
    ss->loop.io_update(ss->loop.data, ss->watch, events);
}

static void ev_add_read(void *p)
{
    rsession *ss = p;
    watch_set(ss, ss->watch_events | WEIR_IO_READ);
}

static void ev_del_read(void *p)
{
    rsession *ss = p;
    watch_set(ss, ss->watch_events & ~WEIR_IO_READ);
}

static void ev_add_write(void *p)
{
    rsession *ss = p;
    watch_set(ss, ss->watch_events | WEIR_IO_WRITE);
}

static void ev_del_write(void *p)
{
    rsession *ss = p;
    watch_set(ss, ss->watch_events & ~WEIR_IO_WRITE);
}

static void ev_cleanup(void *p)
{
    rsession *ss = p;
    if (ss->watch) {
        ss->loop.io_stop(ss->loop.data, ss->watch);
        ss->watch = NULL;
        ss->watch_events = 0;
    }
}

static void on_io(void *arg, unsigned ready)
{
    rsession *ss = arg;
    redisAsyncContext *ac = ss->ac;
    if (ac && (ready & WEIR_IO_READ))
        redisAsyncHandleRead(ac);
    /* reading may have dropped the connection */
    if (ss->ac && ss->ac == ac && (ready & WEIR_IO_WRITE))
        redisAsyncHandleWrite(ac);
}

static void on_connected(const redisAsyncContext *ac, int status)
{
    rsession *ss = ac->data;
    if (status == REDIS_OK || ss->ac != ac)
        return;
    /* hiredis frees the context after this returns */
    weir__log(ss->rs->base.ctx, WEIR_LOG_WARN, "event=redis_connect_failed error=\"%s\"",
              ac->errstr);
    ss->ac = NULL;
    drop(ss, true);
}

static void on_disconnected(const redisAsyncContext *ac, int status)
{
    rsession *ss = ac->data;
    if (ss->ac != ac)
        return; /* dropped by us: drop() did the rest */
    weir__log(ss->rs->base.ctx, WEIR_LOG_WARN, "event=redis_disconnected error=\"%s\"",
              status == REDIS_OK ? "closed" : ac->errstr);
    ss->ac = NULL;
    drop(ss, true);
}

static void on_setup_reply(redisAsyncContext *ac, void *r, void *privdata);

/* What a set-up reply answers: AUTH or SELECT, or loading the script. */
static char SETUP_AUTH, SETUP_FUNCTION, SETUP_SCRIPT;

static void send_load(rsession *ss, bool function)
{
    redis_setup_cmd load;
    redis_load_cmd(ss->rs, function, &load);
    redisAsyncCommandArgv(ss->ac, on_setup_reply, function ? &SETUP_FUNCTION : &SETUP_SCRIPT,
                          load.argc, load.argv, load.argvlen);
}

/* The replies to the set-up commands: AUTH, SELECT, then FUNCTION LOAD
 * (or, where refused, SCRIPT LOAD), whose answer brings the connection
 * up. */
static void on_setup_reply(redisAsyncContext *ac, void *r, void *privdata)
{
    rsession *ss = ac->data;
    redisReply *reply = r;
    if (!reply || ss->ac != ac)
        return; /* the connection is going; drop() handles it */
    if (reply->type == REDIS_REPLY_ERROR && privdata == &SETUP_FUNCTION) {
        send_load(ss, false); /* no functions here (Redis 6, an ACL): a script */
        return;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        weir__log(ss->rs->base.ctx, WEIR_LOG_ERROR,
                  "event=redis_setup_refused error=\"%.200s\"; check the credentials and the "
                  "database",
                  reply->str);
        drop(ss, true);
        return;
    }
    if (privdata == &SETUP_AUTH)
        return;
    ss->fcall = privdata == &SETUP_FUNCTION;
    if (!ss->fcall) {
        if (reply->type != REDIS_REPLY_STRING || reply->len != 40) {
            weir__log(ss->rs->base.ctx, WEIR_LOG_ERROR, "event=redis_script_load_failed");
            drop(ss, true);
            return;
        }
        memcpy(ss->sha, reply->str, 40);
        ss->sha[40] = '\0';
    }
    ss->state = S_UP;
    ss->backoff_us = 0;
    timer_cancel(ss, &ss->connect_timer);
    ss->counted_up = true;
    redis_count(&ss->rs->connections, 1);
    redis_count(&ss->rs->connects, 1);
    weir__log(ss->rs->base.ctx, WEIR_LOG_INFO, "event=redis_connected calls=%s",
              ss->fcall ? "FCALL" : "EVALSHA");
    if (ss->q_head)
        arm_flush(ss, 0);
}

static void connect_now(rsession *ss)
{
    const weir_redis_options *o = &ss->rs->o;
    redisAsyncContext *ac =
        o->unix_path ? redisAsyncConnectUnix(o->unix_path) : redisAsyncConnect(o->host, o->port);
    if (!ac || ac->err) {
        weir__log(ss->rs->base.ctx, WEIR_LOG_WARN, "event=redis_connect_failed error=\"%s\"",
                  ac ? ac->errstr : "out of memory");
        if (ac)
            redisAsyncFree(ac);
        drop(ss, true);
        return;
    }
    ss->watch = ss->loop.io_start(ss->loop.data, ac->c.fd, 0, on_io, ss);
    if (!ss->watch) {
        redisAsyncFree(ac);
        drop(ss, true);
        return;
    }
    /* an idle connection keeps nothing running; a call in flight does, by
     * its deadline timer */
    ss->loop.unref(ss->loop.data, ss->watch);
    ss->watch_events = 0;
    ac->data = ss;
    ac->ev.data = ss;
    ac->ev.addRead = ev_add_read;
    ac->ev.delRead = ev_del_read;
    ac->ev.addWrite = ev_add_write;
    ac->ev.delWrite = ev_del_write;
    ac->ev.cleanup = ev_cleanup;
    redisAsyncSetConnectCallback(ac, on_connected);
    redisAsyncSetDisconnectCallback(ac, on_disconnected);
    ss->ac = ac;
    ss->state = S_CONNECTING;
    /* queued on the socket until it connects, answered in order */
    redis_setup_cmd setup[2];
    char dbbuf[16];
    int n = redis_setup_cmds(ss->rs, setup, dbbuf, sizeof(dbbuf));
    for (int i = 0; i < n; i++)
        redisAsyncCommandArgv(ac, on_setup_reply, &SETUP_AUTH, setup[i].argc, setup[i].argv,
                              setup[i].argvlen);
    send_load(ss, true);
    ss->connect_timer = background_timer(ss, o->connect_timeout_us, on_connect_timer, ss);
}

/* ------------------------------------------------------------ calls */

static bool argv_reserve(rsession *ss, size_t nb, size_t nops)
{
    size_t argc = weir__redis_argc(nb, nops);
    size_t numbytes = weir__redis_numbuf_size(nb, nops);
    weir_ctx *ctx = ss->rs->base.ctx;
    if (argc > ss->argv_cap) {
        const char **argv = weir__realloc(ctx, ss->argv, argc * sizeof(*argv));
        if (!argv)
            return false;
        ss->argv = argv;
        size_t *lens = weir__realloc(ctx, ss->argvlen, argc * sizeof(*lens));
        if (!lens)
            return false;
        ss->argvlen = lens;
        ss->argv_cap = argc;
    }
    if (numbytes > ss->numbuf_cap) {
        char *nb_ = weir__realloc(ctx, ss->numbuf, numbytes);
        if (!nb_)
            return false;
        ss->numbuf = nb_;
        ss->numbuf_cap = numbytes;
    }
    return true;
}

static void on_call_reply(redisAsyncContext *ac, void *r, void *privdata);

/* Send @c (its batches set) as FCALL, or EVALSHA, or EVAL with the
 * source (@eval, after NOSCRIPT). */
static bool send_call(rsession *ss, rcall *c, bool eval)
{
    size_t nb = 0, nops = 0;
    weir__redis_batch stack[64];
    for (rbatch *b = c->batches; b; b = b->next) {
        nb++;
        nops += b->b.n;
    }
    if (!argv_reserve(ss, nb, nops))
        return false;
    /* take_call() made it at most 64 batches */
    size_t i = 0;
    for (rbatch *b = c->batches; b; b = b->next)
        stack[i++] = b->b;
    size_t argc;
    if (ss->fcall)
        argc = weir__redis_encode("FCALL", 5, WEIR__REDIS_FUNCTION, strlen(WEIR__REDIS_FUNCTION),
                                  stack, nb, ss->argv, ss->argvlen, ss->numbuf);
    else if (eval)
        argc = weir__redis_encode("EVAL", 4, weir__redis_script, weir__redis_script_len, stack, nb,
                                  ss->argv, ss->argvlen, ss->numbuf);
    else
        argc = weir__redis_encode("EVALSHA", 7, ss->sha, 40, stack, nb, ss->argv, ss->argvlen,
                                  ss->numbuf);
    if (redisAsyncCommandArgv(ss->ac, on_call_reply, c, (int)argc, ss->argv, ss->argvlen) !=
        REDIS_OK)
        return false;
    c->next = NULL;
    if (ss->f_tail)
        ss->f_tail->next = c;
    else
        ss->f_head = c;
    ss->f_tail = c;
    return true;
}

/* The next call's batches off the queue: whole batches, at most
 * CALL_MAX_OPS ops (a bigger batch alone) and 64 batches. */
static rbatch *take_call(rsession *ss)
{
    rbatch *first = ss->q_head, *last = first;
    size_t ops = first->b.n, nb = 1;
    while (last->next && nb < 64 && ops + last->next->b.n <= CALL_MAX_OPS) {
        last = last->next;
        ops += last->b.n;
        nb++;
    }
    ss->q_head = last->next;
    if (!ss->q_head)
        ss->q_tail = NULL;
    last->next = NULL;
    return first;
}

static void flush(rsession *ss)
{
    while (ss->q_head && ss->state == S_UP && ss->ac) {
        rbatch *list = take_call(ss);
        rcall *c = call_get(ss);
        weir_status st = WEIR_ENOMEM;
        if (c) {
            c->ss = ss;
            c->batches = list;
            c->sent_at = redis_mono_us();
            c->deadline = list->deadline;
            c->abandoned = false;
            if (send_call(ss, c, false))
                continue;
            call_put(ss, c);
            /* out of memory for the arguments, or hiredis is closing the
             * connection (its error comes with the disconnect) */
            st = WEIR_EUNAVAIL;
            note_failure(ss, list_has_probe(list));
        }
        redis_count(&ss->rs->errors, list_len(list));
        complete(ss, list, st);
    }
    arm_deadline(ss);
}

static void unlink_head(rsession *ss, rcall *c)
{
    /* hiredis answers in the order sent */
    if (ss->f_head == c) {
        ss->f_head = c->next;
        if (!ss->f_head)
            ss->f_tail = NULL;
        return;
    }
    for (rcall *p = ss->f_head; p; p = p->next)
        if (p->next == c) {
            p->next = c->next;
            if (ss->f_tail == c)
                ss->f_tail = p;
            return;
        }
}

/* The script is gone: SCRIPT FLUSH, FUNCTION FLUSH or DELETE, or a
 * restart that kept the connection's place. */
static bool script_gone(const redisReply *r)
{
    return r->type == REDIS_REPLY_ERROR && ((r->len >= 8 && memcmp(r->str, "NOSCRIPT", 8) == 0) ||
                                            strstr(r->str, "Function not found") != NULL);
}

static void on_call_reply(redisAsyncContext *ac, void *r, void *privdata)
{
    (void)ac;
    rcall *c = privdata;
    rsession *ss = c->ss;
    redisReply *reply = r;
    unlink_head(ss, c);
    if (c->abandoned) {
        call_put(ss, c);
        return;
    }
    rbatch *list = c->batches;
    bool probe = list_has_probe(list);
    if (reply && script_gone(reply) && ss->ac) {
        /* load it again (a function library before the call, in order on
         * the connection; a script by sending the call with its source)
         * and send the call again: no decision fails */
        redis_count(&ss->rs->script_reloads, 1);
        weir__log(ss->rs->base.ctx, WEIR_LOG_INFO, "event=redis_script_reload");
        if (ss->fcall) {
            redis_setup_cmd load;
            redis_load_cmd(ss->rs, true, &load);
            redisAsyncCommandArgv(ss->ac, NULL, NULL, load.argc, load.argv, load.argvlen);
        }
        if (send_call(ss, c, true))
            return;
    }
    call_put(ss, c);
    size_t n = list_len(list);
    weir_status st = WEIR_EUNAVAIL;
    if (reply) {
        if (reply->type == REDIS_REPLY_ERROR)
            weir__log(ss->rs->base.ctx, WEIR_LOG_WARN, "event=redis_error error=\"%.200s\"",
                      reply->str);
        weir__redis_batch stack[64];
        size_t i = 0;
        for (rbatch *b = list; b; b = b->next)
            stack[i++] = b->b;
        st =
            reply->type == REDIS_REPLY_ERROR ? WEIR_EIO : weir__redis_decode(reply, stack, i, NULL);
    }
    if (st == WEIR_OK) {
        redis_count(&ss->rs->calls, 1);
        redis_count(&ss->rs->batches, n);
        breaker_success(&ss->rs->br, probe);
        for (rbatch *b = list; b; b = b->next)
            deny_cache_note(ss->cache, b->b.ops, b->b.n, b->asked);
    } else {
        redis_count(&ss->rs->errors, n);
        if (!ss->freeing)
            note_failure(ss, probe);
        if (ss->freeing)
            st = WEIR_ECLOSED;
    }
    complete(ss, list, st);
}

/* ------------------------------------------------------------ deadlines */

static int64_t stall_us(const rsession *ss)
{
    int64_t s = ss->rs->o.timeout_us * 20;
    return s < STALL_MIN_US ? STALL_MIN_US : s;
}

static void on_deadline_timer(void *arg);

/* Arm the timer for the earliest deadline there is: a queued batch's, a
 * live call's, or the stall check of the oldest call. */
static void arm_deadline(rsession *ss)
{
    int64_t at = INT64_MAX;
    if (ss->q_head)
        at = ss->q_head->deadline;
    for (rcall *c = ss->f_head; c; c = c->next)
        if (!c->abandoned && c->deadline < at)
            at = c->deadline;
    if (ss->f_head && ss->f_head->sent_at + stall_us(ss) < at)
        at = ss->f_head->sent_at + stall_us(ss);
    if (at == INT64_MAX || (ss->deadline_timer && ss->deadline_at <= at))
        return;
    timer_cancel(ss, &ss->deadline_timer);
    ss->deadline_at = at;
    ss->deadline_timer = timer(ss, at - redis_mono_us(), on_deadline_timer, ss);
}

static void on_deadline_timer(void *arg)
{
    rsession *ss = arg;
    ss->deadline_timer = NULL;
    int64_t now = redis_mono_us();
    /* queued batches past their deadline (the queue is in deadline order) */
    rbatch *late = NULL, **tail = &late;
    while (ss->q_head && ss->q_head->deadline <= now) {
        rbatch *b = ss->q_head;
        ss->q_head = b->next;
        b->next = NULL;
        *tail = b;
        tail = &b->next;
    }
    if (!ss->q_head)
        ss->q_tail = NULL;
    /* live calls past theirs: abandoned, their batches fail now */
    for (rcall *c = ss->f_head; c; c = c->next) {
        if (c->abandoned || c->deadline > now)
            continue;
        c->abandoned = true;
        *tail = c->batches;
        while (*tail)
            tail = &(*tail)->next;
        c->batches = NULL;
    }
    bool stalled = ss->f_head && ss->f_head->sent_at + stall_us(ss) <= now;
    if (late) {
        redis_count(&ss->rs->timeouts, list_len(late));
        note_failure(ss, list_has_probe(late));
    }
    if (stalled) {
        weir__log(ss->rs->base.ctx, WEIR_LOG_WARN,
                  "event=redis_stalled waited_ms=%lld; reconnecting",
                  (long long)((now - ss->f_head->sent_at) / 1000));
        drop(ss, true);
    }
    complete(ss, late, WEIR_ETIMEDOUT);
    arm_deadline(ss);
}

/* ------------------------------------------------------------ the session */

weir_status redis_session_new(weir_store *s, const weir_loop_adapter *loop,
                              weir_store_session **out)
{
    if (!weir_loop_has_io(loop))
        return WEIR_EINVAL;
    redis_store *rs = (redis_store *)s;
    rsession *ss = weir__calloc(s->ctx, 1, sizeof(*ss));
    if (!ss)
        return WEIR_ENOMEM;
    ss->base.store = s;
    ss->rs = rs;
    ss->loop = *loop;
    ss->jitter = (uint64_t)(uintptr_t)ss ^ (uint64_t)redis_mono_us() ^ 0x9e3779b97f4a7c15ull;
    if (ss->jitter == 0)
        ss->jitter = 1;
    weir_status st = deny_cache_new(s->ctx, rs->o.deny_cache_slots, &ss->cache);
    if (st != WEIR_OK) {
        weir__free(s->ctx, ss);
        return st;
    }
    connect_now(ss);
    *out = &ss->base;
    return WEIR_OK;
}

weir_status redis_session_submit(weir_store_session *base, weir_op *ops, size_t n, int64_t now_us,
                                 unsigned flags, weir_store_cb cb, void *arg)
{
    rsession *ss = (rsession *)base;
    redis_store *rs = ss->rs;
    int64_t batch_now = rs->o.redis_clock ? -1 : now_us;
    /* an op the script cannot decide exactly (a limit past its bounds, a
     * time past 2112) fails the batch: the caller's failure mode decides */
    for (size_t i = 0; i < n; i++) {
        weir_status st = weir__redis_op_ok(&ops[i], batch_now < 0 ? 0 : batch_now);
        if (st != WEIR_OK)
            return st;
    }
    rbatch *b = batch_get(ss);
    if (!b)
        return WEIR_ENOMEM;
    int64_t mono = redis_mono_us();
    b->next = NULL;
    b->b = (weir__redis_batch){ops, n, batch_now, flags};
    b->cb = cb;
    b->arg = arg;
    b->asked = mono;
    b->deadline = mono + rs->o.timeout_us;
    b->probe = false;
    bool cached = deny_cache_answer(ss->cache, ops, n, mono);
    bool allowed = cached || breaker_allow(&rs->br, mono, &b->probe);
    if (cached || !allowed || ss->state == S_DOWN) {
        /* answered on the loop's next iteration, without a call */
        if (cached)
            redis_count(&rs->cached, 1);
        else if (allowed)
            note_failure(ss, b->probe);
        if (!cached)
            redis_count(allowed ? &rs->errors : &rs->rejected, 1);
        b->status = cached ? WEIR_OK : WEIR_EUNAVAIL;
        if (ss->ready_tail)
            ss->ready_tail->next = b;
        else
            ss->ready_head = b;
        ss->ready_tail = b;
        arm_flush(ss, 0);
        return WEIR_OK;
    }
    if (ss->q_tail)
        ss->q_tail->next = b;
    else
        ss->q_head = b;
    ss->q_tail = b;
    if (ss->state == S_UP)
        arm_flush(ss, rs->o.batch_window_us);
    arm_deadline(ss);
    return WEIR_OK;
}

void redis_session_free(weir_store_session *base)
{
    rsession *ss = (rsession *)base;
    weir_ctx *ctx = ss->rs->base.ctx;
    ss->freeing = true;
    timer_cancel(ss, &ss->flush_timer);
    timer_cancel(ss, &ss->deadline_timer);
    timer_cancel(ss, &ss->retry_timer);
    for (rbatch *b = ss->ready_head; b; b = b->next)
        if (b->status != WEIR_OK)
            b->status = WEIR_ECLOSED;
    complete_ready(ss);
    /* queued batches and calls in flight complete with WEIR_ECLOSED */
    drop(ss, false);
    for (rcall *c = ss->spare_calls; c;) {
        rcall *next = c->next;
        weir__free(ctx, c);
        c = next;
    }
    for (rbatch *b = ss->spare_batches; b;) {
        rbatch *next = b->next;
        weir__free(ctx, b);
        b = next;
    }
    weir__free(ctx, ss->argv);
    weir__free(ctx, ss->argvlen);
    weir__free(ctx, ss->numbuf);
    deny_cache_free(ctx, ss->cache);
    weir__free(ctx, ss);
}
