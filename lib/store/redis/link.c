/*
 * link.c - a Redis store session's connection: hiredis's async context on
 * the loop adapter's fd watch, the set-up commands (AUTH, SELECT, loading
 * the script as a function library or a script), the connect timeout,
 * and reconnecting with backoff and jitter when it fails or is dropped.
 *
 * Invariant: ss->ac is NULL whenever hiredis may be freeing the
 * connection, so nothing is sent on one that is going.
 */
#include <hiredis/hiredis.h>
#include <string.h>

#include "core/context.h"
#include "store/redis/loop_io.h"
#include "store/redis/session.h"

/* Reconnect backoff: from the first to the last, doubling, with +-25%
 * jitter so that many workers (and instances) do not reconnect at once. */
#define BACKOFF_MIN_US 50000
#define BACKOFF_MAX_US 2000000

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
    weir__redis_link_connect(ss);
}

void weir__redis_link_drop(rsession *ss, bool error)
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
    weir__redis_link_drop(ss, true);
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
    weir__redis_link_drop(ss, true);
}

static void on_disconnected(const redisAsyncContext *ac, int status)
{
    rsession *ss = ac->data;
    if (ss->ac != ac)
        return; /* dropped by us: weir__redis_link_drop() did the rest */
    weir__log(ss->rs->base.ctx, WEIR_LOG_WARN, "event=redis_disconnected error=\"%s\"",
              status == REDIS_OK ? "closed" : ac->errstr);
    ss->ac = NULL;
    weir__redis_link_drop(ss, true);
}

static void on_setup_reply(redisAsyncContext *ac, void *r, void *privdata);

/* What a set-up reply answers: AUTH or SELECT, or loading the script. */
static char SETUP_AUTH, SETUP_FUNCTION, SETUP_SCRIPT;

static void send_load(rsession *ss, bool function)
{
    redis_setup_cmd load;
    weir__redis_load_cmd(ss->rs, function, &load);
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
        return; /* the connection is going; weir__redis_link_drop() handles it */
    if (reply->type == REDIS_REPLY_ERROR && privdata == &SETUP_FUNCTION) {
        send_load(ss, false); /* no functions here (Redis 6, an ACL): a script */
        return;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        weir__log(ss->rs->base.ctx, WEIR_LOG_ERROR,
                  "event=redis_setup_refused error=\"%.200s\"; check the credentials and the "
                  "database",
                  reply->str);
        weir__redis_link_drop(ss, true);
        return;
    }
    if (privdata == &SETUP_AUTH)
        return;
    ss->fcall = privdata == &SETUP_FUNCTION;
    if (!ss->fcall) {
        if (reply->type != REDIS_REPLY_STRING || reply->len != 40) {
            weir__log(ss->rs->base.ctx, WEIR_LOG_ERROR, "event=redis_script_load_failed");
            weir__redis_link_drop(ss, true);
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
    ss->link_up(ss);
}

void weir__redis_link_connect(rsession *ss)
{
    const weir_redis_options *o = &ss->rs->o;
    if (!o->unix_path && !ss->host)
        return; /* no address yet: the sentinel layer connects once it has one */
    redisAsyncContext *ac =
        o->unix_path ? redisAsyncConnectUnix(o->unix_path) : redisAsyncConnect(ss->host, ss->port);
    if (!ac || ac->err) {
        weir__log(ss->rs->base.ctx, WEIR_LOG_WARN, "event=redis_connect_failed error=\"%s\"",
                  ac ? ac->errstr : "out of memory");
        if (ac)
            redisAsyncFree(ac);
        weir__redis_link_drop(ss, true);
        return;
    }
    /* an idle connection keeps nothing running; a call in flight does, by
     * its deadline timer */
    if (!weir__redis_io_attach(&ss->io, &ss->loop, ac, &ss->ac)) {
        redisAsyncFree(ac);
        weir__redis_link_drop(ss, true);
        return;
    }
    weir__redis_reader_cap(ac->c.reader, &ss->caps);
    ac->data = ss;
    redisAsyncSetConnectCallback(ac, on_connected);
    redisAsyncSetDisconnectCallback(ac, on_disconnected);
    ss->ac = ac;
    ss->state = S_CONNECTING;
    /* queued on the socket until it connects, answered in order */
    redis_setup_cmd setup[2];
    char dbbuf[16];
    int n = weir__redis_setup_cmds(ss->rs, setup, dbbuf, sizeof(dbbuf));
    for (int i = 0; i < n; i++)
        redisAsyncCommandArgv(ac, on_setup_reply, &SETUP_AUTH, setup[i].argc, setup[i].argv,
                              setup[i].argvlen);
    if (ss->setup)
        ss->setup(ss);
    send_load(ss, true);
    ss->connect_timer = background_timer(ss, o->connect_timeout_us, on_connect_timer, ss);
}
