/*
 * redis.c - the Redis store: its options, its table of operations, the
 * start-up check (weir_redis_ping()) and its counters. The sessions, where
 * the work happens, are in conn.c; the script and its wire format in
 * codec.c and script.lua.
 */
#define _POSIX_C_SOURCE 200809L

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/context.h"
#include "store/redis/cluster/cluster.h"
#include "store/redis/codec.h"
#include "store/redis/hybrid/hybrid.h"
#include "store/redis/reader.h"
#include "store/redis/redis_internal.h"
#include "store/redis/sentinel/sentinel.h"

#define DEFAULT_TIMEOUT_US 5000
#define DEFAULT_CONNECT_TIMEOUT_US 1000000
#define DEFAULT_BREAKER_FAILURES 5
#define DEFAULT_BREAKER_WINDOW_US 1000000
#define DEFAULT_BREAKER_COOLDOWN_US 1000000
#define MAX_DB 1000000
#define OUTAGE_BYTES (16u << 20)

int64_t weir__redis_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void weir_redis_options_init(weir_redis_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
    o->port = 6379;
    o->timeout_us = DEFAULT_TIMEOUT_US;
    o->connect_timeout_us = DEFAULT_CONNECT_TIMEOUT_US;
    o->redis_clock = true;
    o->breaker_failures = DEFAULT_BREAKER_FAILURES;
    o->breaker_window_us = DEFAULT_BREAKER_WINDOW_US;
    o->breaker_cooldown_us = DEFAULT_BREAKER_COOLDOWN_US;
    o->deny_cache_slots = 4096;
}

const char *weir_redis_breaker_name(weir_redis_breaker b)
{
    switch (b) {
    case WEIR_REDIS_CLOSED:
        return "closed";
    case WEIR_REDIS_OPEN:
        return "open";
    case WEIR_REDIS_HALF_OPEN:
        return "half_open";
    }
    return "unknown";
}

int weir__redis_setup_cmds(const redis_store *rs, redis_setup_cmd out[2], char *dbbuf, size_t dbcap)
{
    int n = 0;
    const weir_redis_options *o = &rs->o;
    if (o->password) {
        redis_setup_cmd *c = &out[n++];
        c->argc = 0;
        c->argv[c->argc] = "AUTH";
        c->argvlen[c->argc++] = 4;
        if (o->user) {
            c->argv[c->argc] = o->user;
            c->argvlen[c->argc++] = strlen(o->user);
        }
        c->argv[c->argc] = o->password;
        c->argvlen[c->argc++] = strlen(o->password);
    }
    if (o->db != 0) {
        redis_setup_cmd *c = &out[n++];
        int len = snprintf(dbbuf, dbcap, "%d", o->db);
        c->argc = 2;
        c->argv[0] = "SELECT";
        c->argvlen[0] = 6;
        c->argv[1] = dbbuf;
        c->argvlen[1] = (size_t)len;
    }
    return n;
}

void weir__redis_load_cmd(const redis_store *rs, bool function, redis_setup_cmd *out)
{
    if (function) {
        *out = (redis_setup_cmd){
            4, {"FUNCTION", "LOAD", "REPLACE", rs->library}, {8, 4, 7, rs->library_len}};
    } else {
        *out = (redis_setup_cmd){
            3, {"SCRIPT", "LOAD", weir__redis_script, NULL}, {6, 4, weir__redis_script_len, 0}};
    }
}

/* ------------------------------------------------------------ the table */

static weir_status r_submit(weir_store *s, weir_op *ops, size_t n, int64_t now_us, unsigned flags,
                            weir_store_cb cb, void *arg)
{
    /* a store that completes on a loop: batches go through a session */
    (void)s, (void)ops, (void)n, (void)now_us, (void)flags, (void)cb, (void)arg;
    return WEIR_EINVAL;
}

static void r_destroy(weir_store *s)
{
    redis_store *rs = (redis_store *)s;
    weir_ctx *ctx = s->ctx;
    weir__rcluster_free(rs);
    weir__rsentinel_free(rs);
    if (rs->outage)
        weir_store_free(rs->outage);
    weir__free(ctx, rs->strings);
    weir__free(ctx, rs->library);
    weir__free(ctx, rs);
}

/* A session: the hybrid layer (sync: local) around one server's session
 * or a cluster's (rs->inner). */
static const weir__store_ops redis_ops = {
    .caps = WEIR_STORE_SHARED_KEYS,
    .submit = r_submit,
    .session_new = weir__hybrid_session_new,
    .session_submit = weir__hybrid_submit,
    .session_free = weir__hybrid_session_free,
    .destroy = r_destroy,
    .check_limit = weir__redis_limit_fits,
};

static const redis_session_entries single_sessions = {
    weir__redis_session_new, weir__redis_session_submit, weir__redis_session_free};

static bool is_redis(const weir_store *s)
{
    return s && s->ops == &redis_ops;
}

#define OPTIONS_V1_SIZE (offsetof(weir_redis_options, deny_cache_slots) + sizeof(uint32_t))

static bool field_ok(const char *s)
{
    return !s || strlen(s) <= WEIR_REDIS_MAX_FIELD;
}

/* Copies the option strings into one allocation that @rs owns. */
static bool copy_strings(redis_store *rs, const weir_redis_options *o)
{
    const char *src[] = {o->host,        o->unix_path,        o->user, o->password, o->seeds,
                         o->master_name, o->sentinel_password};
    const char **dst[] = {
        &rs->o.host,        &rs->o.unix_path,        &rs->o.user, &rs->o.password, &rs->o.seeds,
        &rs->o.master_name, &rs->o.sentinel_password};
    size_t n = sizeof(src) / sizeof(src[0]);
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += src[i] ? strlen(src[i]) + 1 : 0;
    rs->strings = weir__malloc(rs->base.ctx, total ? total : 1);
    if (!rs->strings)
        return false;
    char *p = rs->strings;
    for (size_t i = 0; i < n; i++) {
        *dst[i] = NULL;
        if (!src[i])
            continue;
        size_t len = strlen(src[i]) + 1;
        memcpy(p, src[i], len);
        *dst[i] = p;
        p += len;
    }
    return true;
}

weir_status weir_redis_store_new(weir_ctx *ctx, const weir_redis_options *opts, weir_store **out)
{
    if (!ctx || !opts || !out || opts->size < OPTIONS_V1_SIZE)
        return WEIR_EINVAL;
    weir_redis_options o;
    weir_redis_options_init(&o);
    memcpy(&o, opts, opts->size < sizeof(o) ? opts->size : sizeof(o));
    o.size = sizeof(o);
    weir__redis_seed seeds[WEIR_REDIS_MAX_SEEDS];
    if (o.topology == WEIR_REDIS_CLUSTER || o.topology == WEIR_REDIS_SENTINEL) {
        int k = weir__redis_seed_split(o.seeds, seeds, WEIR_REDIS_MAX_SEEDS);
        if (k < 1 || (o.topology == WEIR_REDIS_CLUSTER && o.db != 0) ||
            (o.topology == WEIR_REDIS_SENTINEL && (!o.master_name || !field_ok(o.master_name))))
            return WEIR_EINVAL;
        /* host and port: the first seed's, for messages and the start-up check */
        o.unix_path = NULL;
        o.host = NULL;
        o.port = seeds[0].port;
    } else if (o.topology != WEIR_REDIS_SINGLE) {
        return WEIR_EINVAL;
    }
    if (!field_ok(o.sentinel_password))
        return WEIR_EINVAL;
    if ((!o.host && !o.unix_path && o.topology == WEIR_REDIS_SINGLE) || !field_ok(o.host) ||
        !field_ok(o.unix_path) || !field_ok(o.user) || !field_ok(o.password) ||
        (o.user && !o.password) || (!o.unix_path && (o.port < 1 || o.port > 65535)) || o.db < 0 ||
        o.db > MAX_DB || o.timeout_us < 0 || o.connect_timeout_us < 0 || o.batch_window_us < 0 ||
        o.breaker_window_us < 0 || o.breaker_cooldown_us < 0)
        return WEIR_EINVAL;
    if (o.timeout_us == 0)
        o.timeout_us = DEFAULT_TIMEOUT_US;
    if (o.connect_timeout_us == 0)
        o.connect_timeout_us = DEFAULT_CONNECT_TIMEOUT_US;
    if (o.batch_window_us > o.timeout_us)
        return WEIR_EINVAL;
    if (o.breaker_failures == 0)
        o.breaker_failures = DEFAULT_BREAKER_FAILURES;
    if (o.breaker_window_us == 0)
        o.breaker_window_us = DEFAULT_BREAKER_WINDOW_US;
    if (o.breaker_cooldown_us == 0)
        o.breaker_cooldown_us = DEFAULT_BREAKER_COOLDOWN_US;

    redis_store *rs = weir__calloc(ctx, 1, sizeof(*rs));
    if (!rs)
        return WEIR_ENOMEM;
    rs->base.ops = &redis_ops;
    rs->base.ctx = ctx;
    rs->o = o;
    size_t head = strlen(WEIR__REDIS_LIBRARY_HEAD);
    rs->library_len = head + weir__redis_script_len;
    rs->library = weir__malloc(ctx, rs->library_len + 1);
    if (!rs->library || !copy_strings(rs, &o)) {
        weir__free(ctx, rs->library);
        weir__free(ctx, rs);
        return WEIR_ENOMEM;
    }
    memcpy(rs->library, WEIR__REDIS_LIBRARY_HEAD, head);
    memcpy(rs->library + head, weir__redis_script, weir__redis_script_len + 1);
    weir__breaker_init(&rs->br, o.breaker_failures, o.breaker_window_us, o.breaker_cooldown_us);
    /* sync: local's decisions while Redis is away (a small cap: only
     * the keys decided meanwhile) */
    weir_memstore_options mo = {.size = sizeof(mo), .max_bytes = OUTAGE_BYTES, .shards = 4};
    if (weir_memstore_new(ctx, &mo, &rs->outage) != WEIR_OK) {
        r_destroy(&rs->base);
        return WEIR_ENOMEM;
    }
    rs->inner = &single_sessions;
    if (o.topology == WEIR_REDIS_CLUSTER) {
        rs->inner = &weir__cluster_sessions;
        weir_status st = weir__rcluster_new(rs);
        if (st != WEIR_OK) {
            r_destroy(&rs->base);
            return st;
        }
    }
    if (o.topology == WEIR_REDIS_SENTINEL) {
        rs->inner = &weir__sentinel_sessions;
        weir_status st = weir__rsentinel_new(rs);
        if (st != WEIR_OK) {
            r_destroy(&rs->base);
            return st;
        }
    }
    *out = &rs->base;
    return WEIR_OK;
}

/* ------------------------------------------------------------ start-up check */

/* A reply that is an error: a configuration error, reported as such. */
static weir_status refused(redisReply *r, const char *what, char *msg, size_t cap)
{
    snprintf(msg, cap, "Redis refused %s: %.200s", what, r ? r->str : "no reply");
    freeReplyObject(r);
    return WEIR_EINVAL;
}

/* Connect to one server as a session would (AUTH, SELECT, the script);
 * on a cluster, read its slot map too. */
static weir_status ping_one(redis_store *rs, const char *host, int port, char *msg, size_t cap)
{
    const weir_redis_options *o = &rs->o;
    struct timeval tv = {(time_t)(o->connect_timeout_us / 1000000),
                         (suseconds_t)(o->connect_timeout_us % 1000000)};
    redisContext *c = o->unix_path ? redisConnectUnixWithTimeout(o->unix_path, tv)
                                   : redisConnectWithTimeout(host, port, tv);
    if (!c || c->err) {
        const char *why = c ? c->errstr : "out of memory";
        if (o->unix_path)
            snprintf(msg, cap, "cannot reach Redis at %s: %s", o->unix_path, why);
        else
            snprintf(msg, cap, "cannot reach Redis at %s:%d: %s", host, port, why);
        redisFree(c);
        return WEIR_EUNAVAIL;
    }
    redisSetTimeout(c, tv);
    weir__redis_reader_caps caps;
    weir__redis_reader_cap(c->reader, &caps);
    weir_status st = WEIR_OK;
    redis_setup_cmd setup[2];
    char dbbuf[16];
    int n = weir__redis_setup_cmds(rs, setup, dbbuf, sizeof(dbbuf));
    for (int i = 0; i < n && st == WEIR_OK; i++) {
        redisReply *r = redisCommandArgv(c, setup[i].argc, setup[i].argv, setup[i].argvlen);
        if (!r) {
            snprintf(msg, cap, "Redis did not answer: %s", c->errstr);
            st = WEIR_EUNAVAIL;
        } else if (r->type == REDIS_REPLY_ERROR) {
            st = refused(r, i == 0 && o->password ? "the credentials (AUTH)" : "the database", msg,
                         cap);
        } else {
            freeReplyObject(r);
        }
    }
    char what[96] = "";
    if (st == WEIR_OK && o->topology == WEIR_REDIS_CLUSTER) {
        redisReply *r = redisCommand(c, "CLUSTER SLOTS");
        weir__node_addr *nodes = r ? calloc(WEIR__MAX_NODES, sizeof(*nodes)) : NULL;
        weir__slot_map *m = nodes ? malloc(sizeof(*m)) : NULL;
        char err[160];
        int covered = -1;
        if (!r) {
            snprintf(msg, cap, "Redis did not answer: %s", c->errstr);
            st = WEIR_EUNAVAIL;
        } else if (r->type == REDIS_REPLY_ERROR && strstr(r->str, "cluster support disabled")) {
            snprintf(msg, cap,
                     "%s:%d is not a Redis Cluster node (cluster support disabled): use "
                     "redis://",
                     host, port);
            st = WEIR_EINVAL;
        } else if (m && (m->nodes = nodes,
                         covered = weir__slot_map_parse(r, host, m, err, sizeof(err))) < 0) {
            snprintf(msg, cap, "%s:%d: %s", host, port, err);
            st = WEIR_EUNAVAIL;
        } else if (!m) {
            snprintf(msg, cap, "out of memory");
            st = WEIR_ENOMEM;
        } else {
            snprintf(what, sizeof(what), "; the cluster has %zu masters, %d of 16384 slots served",
                     m->n_nodes, covered);
        }
        freeReplyObject(r);
        free(m);
        free(nodes);
    }
    for (int function = 1; st == WEIR_OK && function >= 0; function--) {
        redis_setup_cmd load;
        weir__redis_load_cmd(rs, function, &load);
        redisReply *r = redisCommandArgv(c, load.argc, load.argv, load.argvlen);
        if (!r) {
            snprintf(msg, cap, "Redis did not answer: %s", c->errstr);
            st = WEIR_EUNAVAIL;
        } else if (r->type == REDIS_REPLY_ERROR && function) {
            freeReplyObject(r); /* no functions here: a script, then */
            continue;
        } else if (r->type != REDIS_REPLY_STRING) {
            st = refused(r, "the script (SCRIPT LOAD)", msg, cap);
        } else {
            snprintf(msg, cap, "Redis answers; %s %s loaded%s", function ? "function" : "script",
                     r->str, what);
            freeReplyObject(r);
        }
        break;
    }
    redisFree(c);
    return st;
}

weir_status weir_redis_ping(weir_store *store, char *msg, size_t cap)
{
    if (!is_redis(store) || !msg || cap == 0)
        return WEIR_EINVAL;
    redis_store *rs = (redis_store *)store;
    if (rs->sentinel) {
        /* the master the sentinels name, checked as a single server is */
        weir__redis_seed m;
        weir_status st = weir__sentinel_find(rs, &m, msg, cap);
        size_t len = strlen(msg);
        if (st != WEIR_OK || len + 3 >= cap)
            return st;
        memcpy(msg + len, "; ", 3);
        return ping_one(rs, m.host, m.port, msg + len + 2, cap - len - 2);
    }
    if (!rs->cluster)
        return ping_one(rs, rs->o.host, rs->o.port, msg, cap);
    /* a cluster: the first seed that answers */
    weir_status st = WEIR_EUNAVAIL;
    for (size_t i = 0; i < rs->cluster->n_seeds && st == WEIR_EUNAVAIL; i++)
        st = ping_one(rs, rs->cluster->seeds[i].host, rs->cluster->seeds[i].port, msg, cap);
    return st;
}

/* ------------------------------------------------------------ counters */

weir_status weir_redis_stats_get(weir_store *store, weir_redis_stats *out)
{
    if (!is_redis(store) || !out)
        return WEIR_EINVAL;
    redis_store *rs = (redis_store *)store;
    out->breaker = weir__breaker_state(&rs->br);
    out->breaker_opened = atomic_load(&rs->br.opened);
    if (rs->cluster)
        weir__rcluster_breakers(rs, &out->breaker, &out->breaker_opened);
    out->connections = atomic_load(&rs->connections);
    out->connects = atomic_load(&rs->connects);
    out->connect_errors = atomic_load(&rs->connect_errors);
    out->calls = atomic_load(&rs->calls);
    out->batches = atomic_load(&rs->batches);
    out->timeouts = atomic_load(&rs->timeouts);
    out->errors = atomic_load(&rs->errors);
    out->rejected = atomic_load(&rs->rejected);
    out->script_reloads = atomic_load(&rs->script_reloads);
    out->cached = atomic_load(&rs->cached);
    return WEIR_OK;
}

weir_status weir_redis_cluster_stats_get(weir_store *store, weir_redis_cluster_stats *out)
{
    if (!is_redis(store) || !((redis_store *)store)->cluster || !out || out->size < sizeof(*out))
        return WEIR_EINVAL;
    weir__rcluster_stats((redis_store *)store, out);
    return WEIR_OK;
}

size_t weir_redis_nodes_get(weir_store *store, weir_redis_node *out, size_t cap)
{
    if (!is_redis(store) || !((redis_store *)store)->cluster)
        return 0;
    return weir__rcluster_nodes((redis_store *)store, out, cap);
}

weir_status weir_redis_sync_stats_get(weir_store *store, weir_redis_sync_stats *out)
{
    if (!is_redis(store) || !out || out->size < sizeof(*out))
        return WEIR_EINVAL;
    redis_store *rs = (redis_store *)store;
    out->local = atomic_load(&rs->hybrid_local);
    out->reserved = atomic_load(&rs->hybrid_reserved);
    out->returned = atomic_load(&rs->hybrid_returned);
    out->outage = atomic_load(&rs->hybrid_outage);
    out->overshoot = atomic_load(&rs->hybrid_overshoot);
    int64_t at = atomic_load(&rs->hybrid_synced_at);
    out->sync_age_us = at ? weir__redis_mono_us() - at : -1;
    return WEIR_OK;
}

weir_status weir_redis_sentinel_stats_get(weir_store *store, weir_redis_sentinel_stats *out)
{
    if (!is_redis(store) || !out || out->size < sizeof(*out) || !((redis_store *)store)->sentinel)
        return WEIR_EINVAL;
    weir__rsentinel_stats((redis_store *)store, out);
    return WEIR_OK;
}
