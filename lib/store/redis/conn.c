/*
 * conn.c - a Redis store session: its batches and calls, on the
 * connection link.c keeps on the session's loop.
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
 * Invariant: a batch's callback runs exactly once, from the loop, never
 * from inside weir__redis_session_submit().
 */
#include <hiredis/hiredis.h>
#include <string.h>

#include "core/context.h"
#include "store/redis/session.h"

/* Ops in one script call at most: a bigger queue leaves in several calls
 * (a batch is never split). */
#define CALL_MAX_OPS 512u
/* A connection whose oldest call has waited this long is dropped. */
#define STALL_MIN_US 200000
/* Loop timers count whole milliseconds (libuv's do) and a loop wakes a
 * little late: deadlines are checked this much early, so a batch is given
 * up between timeout - 1 ms and the timeout, never later than asked. */
#define DEADLINE_SLACK_US 1000

static void flush(rsession *ss);
static void arm_deadline(rsession *ss);

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

/* The connection is up: what waited for it leaves. */
static void on_link_up(rsession *ss)
{
    if (ss->q_head)
        arm_flush(ss, 0);
    if (ss->up)
        ss->up(ss->owner, ss);
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
    /* a solo batch declares its keys (one slot: Redis redirects the call
     * as a whole); a node's other calls carry theirs as arguments */
    bool solo = c->batches->solo;
    bool args = ss->keys_in_args && !solo;
    if (ss->fcall)
        argc = weir__redis_encode("FCALL", 5, WEIR__REDIS_FUNCTION, strlen(WEIR__REDIS_FUNCTION),
                                  stack, nb, args, ss->argv, ss->argvlen, ss->numbuf);
    else if (eval)
        argc = weir__redis_encode("EVAL", 4, weir__redis_script, weir__redis_script_len, stack, nb,
                                  args, ss->argv, ss->argvlen, ss->numbuf);
    else
        argc = weir__redis_encode("EVALSHA", 7, ss->sha, 40, stack, nb, args, ss->argv, ss->argvlen,
                                  ss->numbuf);
    if (solo && c->batches->asking && redisAsyncCommand(ss->ac, NULL, NULL, "ASKING") != REDIS_OK)
        return false;
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
    while (!first->solo && last->next && !last->next->solo && nb < 64 &&
           ops + last->next->b.n <= CALL_MAX_OPS) {
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
            c->sent_at = weir__redis_mono_us();
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
    if (reply && reply->type == REDIS_REPLY_ERROR && ss->redirect &&
        weir__redis_elsewhere(reply->str, reply->len)) {
        /* the cluster layer sends each batch where it belongs */
        call_put(ss, c);
        while (list) {
            rbatch *b = list;
            list = b->next;
            void *arg = b->arg;
            batch_put(ss, b);
            ss->redirect(ss->owner, reply->str, reply->len, arg);
        }
        return;
    }
    if (reply && script_gone(reply) && ss->ac) {
        /* load it again (a function library before the call, in order on
         * the connection; a script by sending the call with its source)
         * and send the call again: no decision fails */
        redis_count(&ss->rs->script_reloads, 1);
        weir__log(ss->rs->base.ctx, WEIR_LOG_INFO, "event=redis_script_reload");
        if (ss->fcall) {
            redis_setup_cmd load;
            weir__redis_load_cmd(ss->rs, true, &load);
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
        weir__breaker_success(ss->br, probe);
        for (rbatch *b = list; b; b = b->next)
            weir__deny_cache_note(ss->cache, b->b.ops, b->b.n, b->asked);
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
    ss->deadline_timer =
        timer(ss, at - DEADLINE_SLACK_US - weir__redis_mono_us(), on_deadline_timer, ss);
}

static void on_deadline_timer(void *arg)
{
    rsession *ss = arg;
    ss->deadline_timer = NULL;
    int64_t now = weir__redis_mono_us() + DEADLINE_SLACK_US;
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
        weir__redis_link_drop(ss, true);
    }
    complete(ss, late, WEIR_ETIMEDOUT);
    arm_deadline(ss);
}

/* ------------------------------------------------------------ the session */

rsession *weir__redis_session_make(redis_store *rs, const weir_loop_adapter *loop, const char *host,
                                   int port, breaker *br)
{
    weir_store *s = &rs->base;
    rsession *ss = weir__calloc(s->ctx, 1, sizeof(*ss));
    if (!ss)
        return NULL;
    ss->base.store = s;
    ss->rs = rs;
    ss->loop = *loop;
    ss->host = host;
    ss->port = port;
    ss->br = br;
    ss->jitter = (uint64_t)(uintptr_t)ss ^ (uint64_t)weir__redis_mono_us() ^ 0x9e3779b97f4a7c15ull;
    if (ss->jitter == 0)
        ss->jitter = 1;
    if (weir__deny_cache_new(s->ctx, rs->o.deny_cache_slots, &ss->cache) != WEIR_OK) {
        weir__free(s->ctx, ss);
        return NULL;
    }
    ss->link_up = on_link_up;
    weir__redis_link_connect(ss);
    return ss;
}

weir_status weir__redis_session_new(weir_store *s, const weir_loop_adapter *loop,
                                    weir_store_session **out)
{
    if (!weir_loop_has_io(loop))
        return WEIR_EINVAL;
    redis_store *rs = (redis_store *)s;
    rsession *ss = weir__redis_session_make(rs, loop, rs->o.host, rs->o.port, &rs->br);
    if (!ss)
        return WEIR_ENOMEM;
    *out = &ss->base;
    return WEIR_OK;
}

bool weir__redis_session_idle(const rsession *ss)
{
    return !ss->q_head && !ss->f_head && !ss->ready_head;
}

weir_status weir__redis_session_submit(weir_store_session *base, weir_op *ops, size_t n,
                                       int64_t now_us, unsigned flags, weir_store_cb cb, void *arg)
{
    return weir__redis_submit((rsession *)base, ops, n, now_us, flags, cb, arg, false, false);
}

weir_status weir__redis_submit(rsession *ss, weir_op *ops, size_t n, int64_t now_us, unsigned flags,
                               weir_store_cb cb, void *arg, bool solo, bool asking)
{
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
    int64_t mono = weir__redis_mono_us();
    b->next = NULL;
    b->b = (weir__redis_batch){ops, n, batch_now, flags};
    b->cb = cb;
    b->arg = arg;
    b->asked = mono;
    b->deadline = mono + rs->o.timeout_us;
    b->probe = false;
    bool cached = weir__deny_cache_answer(ss->cache, ops, n, mono);
    b->solo = solo;
    b->asking = asking;
    bool allowed = cached || weir__breaker_allow(ss->br, mono, &b->probe);
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

void weir__redis_session_free(weir_store_session *base)
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
    weir__redis_link_drop(ss, false);
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
    weir__deny_cache_free(ctx, ss->cache);
    weir__free(ctx, ss);
}
