/*
 * redis_internal.h - the Redis store's parts: the store (redis.c: options,
 * the breaker, counters) and its sessions (conn.c: one connection per
 * event loop, the calls in flight, timeouts, reconnects).
 */
#ifndef WEIR_STORE_REDIS_INTERNAL_H
#define WEIR_STORE_REDIS_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/redis/breaker.h"
#include "store/store.h"
#include "weir/redis.h"

/* A session's entries: one server's (conn.c) or a cluster's
 * (cluster/cluster.c), under the hybrid layer (hybrid/hybrid.c). */
typedef struct redis_session_entries {
    weir_status (*session_new)(weir_store *s, const weir_loop_adapter *loop,
                               weir_store_session **out);
    weir_status (*session_submit)(weir_store_session *ss, weir_op *ops, size_t n, int64_t now_us,
                                  unsigned flags, weir_store_cb cb, void *arg);
    void (*session_free)(weir_store_session *ss);
} redis_session_entries;

typedef struct redis_store {
    weir_store base;
    const redis_session_entries *inner;
    weir_redis_options o; /* strings point into `strings` */
    char *strings;
    /* the script as a Redis 7 function library: its head, then the source */
    char *library;
    size_t library_len;
    breaker br;
    struct rcluster *cluster; /* a Redis Cluster's nodes (cluster/cluster.c) */
    /* the sentinels of a master (sentinel/sentinel.c) */
    struct rsentinel *sentinel;
    /* counters (weir_redis_stats), relaxed: each exact, the set a snapshot */
    _Atomic uint64_t connections, connects, connect_errors, calls, batches, timeouts, errors,
        rejected, script_reloads, cached;
    /* sync: local (hybrid/hybrid.c) */
    _Atomic uint64_t hybrid_local, hybrid_reserved, hybrid_returned, hybrid_outage,
        hybrid_overshoot;
    _Atomic int64_t hybrid_synced_at; /* monotonic: the last sync Redis answered */
    weir_store *outage; /* a memory store: sync: local decisions while Redis is away */
} redis_store;

/* One server of a seed list (url.c). */
typedef struct weir__redis_seed {
    char host[WEIR_REDIS_MAX_FIELD + 1];
    int port;
} weir__redis_seed;

/* Split "host:port,host:port,..." into @out (at most @max): the count, or
 * -1 when the list is empty, too long or has an entry that is not
 * host:port. */
int weir__redis_seed_split(const char *seeds, weir__redis_seed *out, size_t max);

/* Monotonic microseconds: timeouts and the breaker run on real time,
 * whatever clock decisions are made at. */
int64_t weir__redis_mono_us(void);

/* conn.c: the session entries of the store's table. */
weir_status weir__redis_session_new(weir_store *s, const weir_loop_adapter *loop,
                                    weir_store_session **out);
weir_status weir__redis_session_submit(weir_store_session *ss, weir_op *ops, size_t n,
                                       int64_t now_us, unsigned flags, weir_store_cb cb, void *arg);
void weir__redis_session_free(weir_store_session *ss);

/* The commands a new connection sends first, synchronous or not: AUTH and
 * SELECT when configured. Fills up to 2 commands of up to 3 arguments;
 * returns how many. */
typedef struct redis_setup_cmd {
    int argc;
    const char *argv[4];
    size_t argvlen[4];
} redis_setup_cmd;
int weir__redis_setup_cmds(const redis_store *rs, redis_setup_cmd out[2], char *dbbuf,
                           size_t dbcap);

/* Loading the script: as a function library (FUNCTION LOAD REPLACE, Redis
 * 7: set up once, called with FCALL), or, where that is refused (an older
 * Redis, an ACL without FUNCTION), as a script (SCRIPT LOAD, EVALSHA). */
void weir__redis_load_cmd(const redis_store *rs, bool function, redis_setup_cmd *out);

static inline void redis_count(_Atomic uint64_t *c, uint64_t d)
{
    atomic_fetch_add_explicit(c, d, memory_order_relaxed);
}

#endif /* WEIR_STORE_REDIS_INTERNAL_H */
