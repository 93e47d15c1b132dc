/*
 * sentinel.c - the Redis store on a master watched by Redis Sentinel: a
 * session per event loop that asks a sentinel where the master is and
 * sends its batches there, through a Redis store session (conn.c,
 * link.c: batching, deadlines, reconnects, the over-limit cache) under
 * the store's breaker.
 *
 * hiredis 0.14 has no Sentinel support; this is the part of a Sentinel
 * client the store needs:
 *
 * - Finding the master: SENTINEL get-master-addr-by-name on a connection
 *   to one sentinel, asked when it connects and every POLL_US after; a
 *   sentinel that fails, does not answer within the connect timeout,
 *   does not know the name or refuses the question is left for the next
 *   one in the list, after a backoff.
 * - Following it: a second connection to the same sentinel subscribes to
 *   +switch-master (a subscribed connection takes no other command), so
 *   a failover is followed as soon as the sentinels announce it; the poll
 *   covers a message lost while that connection was down.
 * - A new address drops the master's connection and makes one there at
 *   once. That connection comes up only if ROLE says "master" (a
 *   sentinel's view can be behind: a demoted master is asked again, not
 *   written to). Until then batches fail at once with WEIR_EUNAVAIL, as
 *   with a single server down, and the caller's failure mode decides.
 * - The breaker is the store's: a failover opens it as an outage does;
 *   the new master's connection coming up lets a probe through at once.
 *
 * Invariant: a link's ac is NULL whenever hiredis may be freeing it.
 */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>

#include "core/context.h"
#include "store/redis/loop_io.h"
#include "store/redis/sentinel/sentinel.h"

/* The master is asked for again this often. */
#define POLL_US 1000000
/* Moving on to the next sentinel: from the first delay to the last,
 * doubling, +-25% jittered. */
#define RETRY_MIN_US 50000
#define RETRY_MAX_US 2000000

struct snsession;

/* One connection to a sentinel. */
typedef struct slink {
    struct snsession *sn;
    redisAsyncContext *ac;
    weir__redis_io io; /* ac on the loop's fd watch */
    weir__redis_reader_caps caps;
} slink;

typedef struct snsession {
    weir_store_session base;
    redis_store *rs;
    rsentinel *st;
    weir_loop_adapter loop;
    rsession *data;          /* the master's; its host is master.host once named */
    weir__redis_seed master; /* host "" until a sentinel names it */
    slink cmd, sub;          /* questions; the +switch-master subscription */
    size_t at;               /* the sentinel asked: seeds[at % n_seeds] */
    bool asking;             /* a question unanswered */
    bool moved;              /* the master's connection follows a new address */
    bool freeing;
    void *poll_timer, *answer_timer, *retry_timer;
    int64_t retry_us;
    uint64_t jitter;
} snsession;

static void on_retry(void *arg);
static void ask(snsession *sn);

static const weir__redis_seed *sentinel_of(const snsession *sn)
{
    return &sn->st->seeds[sn->at % sn->st->n_seeds];
}

static void *bg_timer(snsession *sn, int64_t after_us, void (*cb)(void *), void *arg)
{
    void *t = sn->loop.timer_start(sn->loop.data, after_us < 0 ? 0 : after_us, cb, arg);
    if (t)
        sn->loop.unref(sn->loop.data, t);
    return t;
}

static void stop_timer(snsession *sn, void **t)
{
    if (*t) {
        sn->loop.timer_stop(sn->loop.data, *t);
        *t = NULL;
    }
}

/* ------------------------------------------------------------ the links */

static void link_close(slink *l)
{
    redisAsyncContext *ac = l->ac;
    if (ac) {
        l->ac = NULL;
        redisAsyncFree(ac); /* pending callbacks run with no reply */
    }
}

/* Leave this sentinel for the next one, after a backoff. */
static void sentinel_failed(snsession *sn)
{
    if (sn->freeing)
        return;
    redis_count(&sn->st->errors, 1);
    link_close(&sn->cmd);
    link_close(&sn->sub);
    sn->asking = false;
    stop_timer(sn, &sn->answer_timer);
    stop_timer(sn, &sn->poll_timer);
    sn->at++;
    int64_t b = sn->retry_us ? sn->retry_us : RETRY_MIN_US;
    sn->retry_us = b * 2 > RETRY_MAX_US ? RETRY_MAX_US : b * 2;
    sn->jitter = sn->jitter * 6364136223846793005ull + 1442695040888963407ull;
    int64_t after = b - b / 4 + (int64_t)((sn->jitter >> 33) % (uint64_t)(b / 2 + 1));
    if (!sn->retry_timer)
        sn->retry_timer = bg_timer(sn, after, on_retry, sn);
}

static void on_link_connected(const redisAsyncContext *ac, int status)
{
    slink *l = ac->data;
    if (status == REDIS_OK || l->ac != ac)
        return;
    char where[WEIR_REDIS_ADDR_BYTES];
    weir__sentinel_addr_format(sentinel_of(l->sn), where, sizeof(where));
    weir__log(l->sn->rs->base.ctx, WEIR_LOG_WARN,
              "event=redis_sentinel_connect_failed sentinel=%s error=\"%s\"", where, ac->errstr);
    l->ac = NULL; /* hiredis frees it after this returns */
    sentinel_failed(l->sn);
}

static void on_link_disconnected(const redisAsyncContext *ac, int status)
{
    slink *l = ac->data;
    if (l->ac != ac)
        return; /* closed by us */
    char where[WEIR_REDIS_ADDR_BYTES];
    weir__sentinel_addr_format(sentinel_of(l->sn), where, sizeof(where));
    weir__log(l->sn->rs->base.ctx, WEIR_LOG_WARN,
              "event=redis_sentinel_disconnected sentinel=%s error=\"%s\"", where,
              status == REDIS_OK ? "closed" : ac->errstr);
    l->ac = NULL;
    sentinel_failed(l->sn);
}

static void on_link_auth(redisAsyncContext *ac, void *r, void *privdata)
{
    slink *l = ac->data;
    redisReply *reply = r;
    (void)privdata;
    if (!reply || l->ac != ac || reply->type != REDIS_REPLY_ERROR)
        return;
    char where[WEIR_REDIS_ADDR_BYTES];
    weir__sentinel_addr_format(sentinel_of(l->sn), where, sizeof(where));
    weir__log(l->sn->rs->base.ctx, WEIR_LOG_ERROR,
              "event=redis_sentinel_refused sentinel=%s error=\"%.200s\"; check the "
              "sentinels' password",
              where, reply->str);
    sentinel_failed(l->sn);
}

/* Connect @l to the sentinel in use, AUTH queued if the sentinels want
 * a password. */
static bool link_open(snsession *sn, slink *l)
{
    const weir__redis_seed *s = sentinel_of(sn);
    redisAsyncContext *ac = redisAsyncConnect(s->host, s->port);
    if (!ac || ac->err) {
        if (ac)
            redisAsyncFree(ac);
        return false;
    }
    l->sn = sn;
    if (!weir__redis_io_attach(&l->io, &sn->loop, ac, &l->ac)) {
        redisAsyncFree(ac);
        return false;
    }
    weir__redis_reader_cap(ac->c.reader, &l->caps);
    ac->data = l;
    redisAsyncSetConnectCallback(ac, on_link_connected);
    redisAsyncSetDisconnectCallback(ac, on_link_disconnected);
    l->ac = ac;
    const char *pw = sn->rs->o.sentinel_password;
    if (pw) {
        const char *argv[2] = {"AUTH", pw};
        size_t lens[2] = {4, strlen(pw)};
        redisAsyncCommandArgv(ac, on_link_auth, NULL, 2, argv, lens);
    }
    return true;
}

/* ------------------------------------------------------------ the master */

/* Note the master named, for the counters and the metrics. */
static void note_master(snsession *sn, const weir__redis_seed *m)
{
    char addr[WEIR_REDIS_ADDR_BYTES];
    weir__sentinel_addr_format(m, addr, sizeof(addr));
    rsentinel *st = sn->st;
    pthread_mutex_lock(&st->lock);
    if (strcmp(st->master, addr) != 0) {
        if (st->master[0])
            redis_count(&st->failovers, 1);
        memcpy(st->master, addr, sizeof(addr));
    }
    pthread_mutex_unlock(&st->lock);
}

/* Send the batches to @m from now on. */
static void follow(snsession *sn, const weir__redis_seed *m)
{
    if (sn->master.port == m->port && strcmp(sn->master.host, m->host) == 0)
        return;
    char from[WEIR_REDIS_ADDR_BYTES], to[WEIR_REDIS_ADDR_BYTES];
    weir__sentinel_addr_format(&sn->master, from, sizeof(from));
    weir__sentinel_addr_format(m, to, sizeof(to));
    if (sn->master.host[0])
        weir__log(sn->rs->base.ctx, WEIR_LOG_WARN,
                  "event=redis_sentinel_switch master=%s from=%s to=%s", sn->rs->o.master_name,
                  from, to);
    else
        weir__log(sn->rs->base.ctx, WEIR_LOG_INFO, "event=redis_sentinel_master master=%s addr=%s",
                  sn->rs->o.master_name, to);
    note_master(sn, m);
    rsession *d = sn->data;
    /* what waits on the old address fails now; the new one is tried at
     * once, not after the old one's backoff */
    weir__redis_link_drop(d, false);
    timer_cancel(d, &d->retry_timer);
    d->backoff_us = 0;
    sn->master = *m;
    d->host = sn->master.host;
    d->port = sn->master.port;
    sn->moved = true;
    weir__redis_link_connect(d);
}

/* The master's connection is up (ROLE said master): after a move, the
 * breaker the old master opened lets a probe through now. */
static void on_data_up(void *owner, rsession *ss)
{
    snsession *sn = owner;
    if (sn->moved) {
        sn->moved = false;
        weir__breaker_retry_now(ss->br, weir__redis_mono_us());
    }
}

static void on_role(redisAsyncContext *ac, void *r, void *privdata)
{
    rsession *d = ac->data;
    (void)privdata;
    if (!r || d->ac != ac)
        return; /* the connection is going */
    snsession *sn = d->owner;
    char role[40];
    int k = weir__sentinel_role_parse(r, role, sizeof(role));
    if (k == 1)
        return;
    char addr[WEIR_REDIS_ADDR_BYTES];
    weir__sentinel_addr_format(&sn->master, addr, sizeof(addr));
    if (k < 0) {
        /* ROLE refused (an ACL without it): the sentinels' word is taken */
        const redisReply *reply = r;
        weir__log(sn->rs->base.ctx, WEIR_LOG_WARN,
                  "event=redis_sentinel_role_unknown addr=%s error=\"%.200s\"; trusting the "
                  "sentinels",
                  addr, reply->type == REDIS_REPLY_ERROR ? reply->str : "not a ROLE reply");
        return;
    }
    redis_count(&sn->st->not_master, 1);
    weir__log(sn->rs->base.ctx, WEIR_LOG_WARN,
              "event=redis_sentinel_not_master master=%s addr=%s role=%s; asking the sentinels "
              "again",
              sn->rs->o.master_name, addr, role);
    weir__redis_link_drop(d, true);
    ask(sn);
}

/* The master's set-up commands (link.c): ROLE, before the script, so
 * that the connection comes up only on a master. */
static void data_setup(rsession *d)
{
    redisAsyncCommand(d->ac, on_role, NULL, "ROLE");
}

/* ------------------------------------------------------------ the questions */

static void on_poll(void *arg)
{
    snsession *sn = arg;
    sn->poll_timer = NULL;
    ask(sn);
}

static void on_answer_timeout(void *arg)
{
    snsession *sn = arg;
    sn->answer_timer = NULL;
    char where[WEIR_REDIS_ADDR_BYTES];
    weir__sentinel_addr_format(sentinel_of(sn), where, sizeof(where));
    weir__log(sn->rs->base.ctx, WEIR_LOG_WARN,
              "event=redis_sentinel_timeout sentinel=%s timeout_ms=%lld; trying the next one",
              where, (long long)(sn->rs->o.connect_timeout_us / 1000));
    sentinel_failed(sn);
}

static void on_addr(redisAsyncContext *ac, void *r, void *privdata)
{
    snsession *sn = privdata;
    if (!r || sn->cmd.ac != ac)
        return;
    sn->asking = false;
    stop_timer(sn, &sn->answer_timer);
    weir__redis_seed m;
    char err[240];
    int k = weir__sentinel_addr_parse(r, &m, err, sizeof(err));
    if (k == 1) {
        sn->retry_us = 0;
        follow(sn, &m);
        if (!sn->poll_timer)
            sn->poll_timer = bg_timer(sn, POLL_US, on_poll, sn);
        return;
    }
    char where[WEIR_REDIS_ADDR_BYTES];
    weir__sentinel_addr_format(sentinel_of(sn), where, sizeof(where));
    if (k == 0)
        weir__log(sn->rs->base.ctx, WEIR_LOG_ERROR,
                  "event=redis_sentinel_unknown_master sentinel=%s master=%s; trying the next "
                  "one",
                  where, sn->rs->o.master_name);
    else
        weir__log(sn->rs->base.ctx, WEIR_LOG_WARN,
                  "event=redis_sentinel_refused sentinel=%s error=\"%s\"; trying the next one",
                  where, err);
    sentinel_failed(sn);
}

/* Ask the sentinel in use where the master is (once at a time). */
static void ask(snsession *sn)
{
    if (sn->asking || !sn->cmd.ac || sn->freeing)
        return;
    const char *name = sn->rs->o.master_name;
    const char *argv[3] = {"SENTINEL", "get-master-addr-by-name", name};
    size_t lens[3] = {8, 23, strlen(name)};
    if (redisAsyncCommandArgv(sn->cmd.ac, on_addr, sn, 3, argv, lens) != REDIS_OK)
        return; /* the connection is closing: its disconnect moves on */
    sn->asking = true;
    stop_timer(sn, &sn->poll_timer);
    if (!sn->answer_timer)
        sn->answer_timer = bg_timer(sn, sn->rs->o.connect_timeout_us, on_answer_timeout, sn);
}

static void on_switch(redisAsyncContext *ac, void *r, void *privdata)
{
    snsession *sn = privdata;
    if (!r || sn->sub.ac != ac)
        return;
    weir__redis_seed m;
    int k = weir__sentinel_switch_reply(r, sn->rs->o.master_name, &m);
    if (k == 1) {
        follow(sn, &m);
    } else if (k < 0) {
        weir__log(sn->rs->base.ctx, WEIR_LOG_WARN,
                  "event=redis_sentinel_bad_message; asking the sentinel instead");
        ask(sn);
    }
}

static void sentinel_connect(snsession *sn)
{
    if (!link_open(sn, &sn->cmd) || !link_open(sn, &sn->sub)) {
        sentinel_failed(sn);
        return;
    }
    const char *argv[2] = {"SUBSCRIBE", "+switch-master"};
    size_t lens[2] = {9, 14};
    redisAsyncCommandArgv(sn->sub.ac, on_switch, sn, 2, argv, lens);
    ask(sn);
}

static void on_retry(void *arg)
{
    snsession *sn = arg;
    sn->retry_timer = NULL;
    sentinel_connect(sn);
}

/* ------------------------------------------------------------ the session */

static weir_status sn_new(weir_store *s, const weir_loop_adapter *loop, weir_store_session **out)
{
    if (!weir_loop_has_io(loop))
        return WEIR_EINVAL;
    redis_store *rs = (redis_store *)s;
    snsession *sn = weir__calloc(s->ctx, 1, sizeof(*sn));
    if (!sn)
        return WEIR_ENOMEM;
    /* no host: the master's session stays down until a sentinel names one */
    sn->data = weir__redis_session_make(rs, loop, NULL, 0, &rs->br);
    if (!sn->data) {
        weir__free(s->ctx, sn);
        return WEIR_ENOMEM;
    }
    sn->data->owner = sn;
    sn->data->setup = data_setup;
    sn->data->up = on_data_up;
    sn->base.store = s;
    sn->rs = rs;
    sn->st = rs->sentinel;
    sn->loop = *loop;
    /* sessions start at different sentinels: the questions spread */
    sn->at = (size_t)((uintptr_t)sn / 64);
    sn->jitter = (uint64_t)(uintptr_t)sn ^ (uint64_t)weir__redis_mono_us();
    sentinel_connect(sn);
    *out = &sn->base;
    return WEIR_OK;
}

static weir_status sn_submit(weir_store_session *base, weir_op *ops, size_t n, int64_t now_us,
                             unsigned flags, weir_store_cb cb, void *arg)
{
    snsession *sn = (snsession *)base;
    return weir__redis_session_submit(&sn->data->base, ops, n, now_us, flags, cb, arg);
}

static void sn_free(weir_store_session *base)
{
    snsession *sn = (snsession *)base;
    weir_ctx *ctx = sn->rs->base.ctx;
    sn->freeing = true;
    stop_timer(sn, &sn->poll_timer);
    stop_timer(sn, &sn->answer_timer);
    stop_timer(sn, &sn->retry_timer);
    link_close(&sn->cmd);
    link_close(&sn->sub);
    /* its batches complete with WEIR_ECLOSED */
    weir__redis_session_free(&sn->data->base);
    weir__free(ctx, sn);
}

const redis_session_entries weir__sentinel_sessions = {sn_new, sn_submit, sn_free};

/* ------------------------------------------------------------ the store's part */

weir_status weir__rsentinel_new(redis_store *rs)
{
    rsentinel *st = weir__calloc(rs->base.ctx, 1, sizeof(*st));
    if (!st)
        return WEIR_ENOMEM;
    int n = weir__redis_seed_split(rs->o.seeds, st->seeds, WEIR_REDIS_MAX_SEEDS);
    if (n < 1 || pthread_mutex_init(&st->lock, NULL) != 0) {
        weir__free(rs->base.ctx, st);
        return WEIR_EINVAL;
    }
    st->n_seeds = (size_t)n;
    rs->sentinel = st;
    return WEIR_OK;
}

void weir__rsentinel_free(redis_store *rs)
{
    rsentinel *st = rs->sentinel;
    if (!st)
        return;
    pthread_mutex_destroy(&st->lock);
    weir__free(rs->base.ctx, st);
    rs->sentinel = NULL;
}

void weir__rsentinel_stats(redis_store *rs, weir_redis_sentinel_stats *out)
{
    rsentinel *st = rs->sentinel;
    out->failovers = atomic_load(&st->failovers);
    out->sentinel_errors = atomic_load(&st->errors);
    out->not_master = atomic_load(&st->not_master);
    pthread_mutex_lock(&st->lock);
    memcpy(out->master, st->master, sizeof(out->master));
    pthread_mutex_unlock(&st->lock);
}
