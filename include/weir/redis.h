/*
 * weir/redis.h - the Redis store: counters in one Redis server shared by
 * any number of processes, every algorithm of weir/algo.h run by one Lua
 * script, so a key gives the same verdicts as in the memory store.
 *
 * The store completes later: each event loop has a session of its own
 * (weir_store_session_new() with a weir_loop_adapter that has the fd
 * hooks), holding one connection, so deciding takes no lock. The batches a
 * loop submits in one iteration leave as one script call (one round trip
 * for all of them, whatever their number of keys). A call that gets no
 * answer within the timeout completes with WEIR_ETIMEDOUT; failures and
 * timeouts open a circuit breaker shared by every session, under which
 * batches fail at once with WEIR_EUNAVAIL until a probe gets through. What
 * a failed decision becomes (allowed, denied, decided locally) is the
 * caller's policy (the engine's failure_mode), never the store's.
 *
 * Limits whose exact arithmetic does not fit the script's numbers (doubles,
 * exact below 2^53) are refused: weir_store_check_limit() says which.
 */
#ifndef WEIR_REDIS_H
#define WEIR_REDIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weir/context.h"
#include "weir/export.h"
#include "weir/status.h"
#include "weir/store.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Longest host name, unix socket path, user name or password. */
#define WEIR_REDIS_MAX_FIELD 255u

/** How a Redis store finds its servers. */
typedef enum weir_redis_topology {
    /** One server: host and port, or unix_path. */
    WEIR_REDIS_SINGLE = 0,
    /** A Redis Cluster: seeds names some of its nodes; the slot map read
     *  from them says which master holds which key (since 0.2). */
    WEIR_REDIS_CLUSTER = 1,
    /** A master watched by Redis Sentinel: seeds names the sentinels,
     *  master_name the master they watch (since 0.2). Each session asks
     *  a sentinel where the master is, connects there only once ROLE
     *  says "master", and follows the sentinels' +switch-master (and a
     *  poll every second) to the new master after a failover; until a
     *  master is known and up, batches fail at once with WEIR_EUNAVAIL,
     *  as with a single server down. */
    WEIR_REDIS_SENTINEL = 2,
} weir_redis_topology;

/** Most seeds (cluster nodes or sentinels) a store is given. */
#define WEIR_REDIS_MAX_SEEDS 16u

typedef struct weir_redis_options {
    /** sizeof(weir_redis_options). */
    size_t size;
    /** Where Redis listens: a host name or address and a port, or (when
     *  unix_path is set) a unix socket. Strings are copied. */
    const char *host;
    int port;
    const char *unix_path;
    /** AUTH: a password alone, or an ACL user and its password. NULL: none. */
    const char *user;
    const char *password;
    /** SELECT: the database number, 0 .. 1000000 (default 0). */
    int db;
    /** A script call unanswered this long completes with WEIR_ETIMEDOUT;
     *  0 = 5 ms. */
    int64_t timeout_us;
    /** A connection not up this long is given up and retried; 0 = 1 s. */
    int64_t connect_timeout_us;
    /** Hold batches this long to send more of them in one call; 0 = send
     *  on the loop's next iteration. At most the timeout. */
    int64_t batch_window_us;
    /** true: the script reads Redis's clock (TIME), so instances with
     *  skewed clocks agree; false: each batch is decided at the time it
     *  was submitted with (tests, a single instance). */
    bool redis_clock;
    /** The breaker opens after this many failures or timeouts within
     *  breaker_window_us (0 = 5 within 1 s), and lets one call through as
     *  a probe after breaker_cooldown_us (0 = 1 s). */
    uint32_t breaker_failures;
    int64_t breaker_window_us;
    int64_t breaker_cooldown_us;
    /** The local over-limit cache, per session: a key Redis denied a
     *  cost-1 request until T is denied without a round trip until T
     *  (exact: nothing can change it before T). Slots (a power of two);
     *  0 = off. weir_redis_options_init() sets 4096. */
    uint32_t deny_cache_slots;
    /* Since 0.2. */
    /** Single (the default), cluster or sentinel. */
    weir_redis_topology topology;
    /** Cluster and sentinel: "host:port,host:port,..." (IPv6 addresses
     *  in brackets), 1 to WEIR_REDIS_MAX_SEEDS of them. host and port
     *  are then the first seed's. */
    const char *seeds;
    /** Sentinel: the name of the master the sentinels watch. */
    const char *master_name;
    /** How many instances share the store (0 = 1): while Redis is away,
     *  a `sync: local` op (WEIR_OP_SYNC_LOCAL) is decided here at
     *  1/instances of its limit. */
    uint32_t instances;
    /** Sentinel: AUTH sent to the sentinels (their `requirepass`); NULL:
     *  they need none. user and password are the master's. */
    const char *sentinel_password;
} weir_redis_options;

/** Defaults for every field but where Redis is. */
WEIR_API void weir_redis_options_init(weir_redis_options *o);

/**
 * weir_redis_url_parse() - fill @o's host, port, unix_path, user,
 * password and db from a URL:
 *
 *   redis://[[user]:password@]host[:port][/db]     (port 6379, db 0)
 *   redis+unix://[[user]:password@]/path/to.sock[?db=N]
 *   redis+cluster://[[user]:password@]host:port[,host:port...]
 *   redis+sentinel://[[user]:password@]master-name@host:port[,host:port...][/db]
 *
 * (cluster: the seed nodes; sentinel: the sentinels, port 26379 by
 * default, and the credentials are the master's.)
 * IPv6 addresses go in brackets. User and password are percent-decoded.
 * `rediss://` is refused (this build's hiredis has no TLS). The strings
 * are written into @buf (@cap bytes), which @o then points into.
 *
 * Returns WEIR_OK, or WEIR_EPARSE with a message in @err (@err_cap
 * bytes; it never contains the password).
 */
WEIR_API weir_status weir_redis_url_parse(const char *url, weir_redis_options *o, char *buf,
                                          size_t cap, char *err, size_t err_cap);

/**
 * weir_redis_store_new() - a Redis store.
 *
 * Nothing is connected yet: each session connects on its own loop. Use
 * weir_redis_ping() to check at start-up that Redis answers and accepts
 * the credentials.
 *
 * Returns WEIR_OK; WEIR_EINVAL (NULL pointers, bad opts->size, no host and
 * no unix_path, a field too long or out of range); WEIR_ENOMEM.
 */
WEIR_API weir_status weir_redis_store_new(weir_ctx *ctx, const weir_redis_options *opts,
                                          weir_store **out);

/**
 * weir_redis_ping() - connect once, synchronously, as a session would
 * (AUTH, SELECT, loading the script), within the connect timeout.
 *
 * On Sentinel, the sentinels are asked in turn where the master is
 * (SENTINEL get-master-addr-by-name), and that master is checked as
 * above.
 *
 * Returns WEIR_OK; WEIR_EUNAVAIL when Redis cannot be reached (the store
 * still works: sessions keep trying), or on Sentinel when no sentinel
 * can; WEIR_EINVAL when Redis refused the credentials, the database or
 * the script, or when the sentinels that answered do not know the master
 * name or refused the question (a configuration error). A message goes
 * to @msg either way.
 */
WEIR_API weir_status weir_redis_ping(weir_store *store, char *msg, size_t cap);

/** Breaker states. */
typedef enum weir_redis_breaker {
    WEIR_REDIS_CLOSED = 0,    /* calls go to Redis */
    WEIR_REDIS_OPEN = 1,      /* calls fail at once */
    WEIR_REDIS_HALF_OPEN = 2, /* one probe call is under way */
} weir_redis_breaker;

/** Counters of a Redis store, summed over its sessions. On a cluster,
 *  `breaker` is the worst (open, then half-open) of the nodes a slot map
 *  names now (not of a master gone and replaced by its replica, nor of a
 *  seed that is down) and `breaker_opened` the sum over every node. */
typedef struct weir_redis_stats {
    weir_redis_breaker breaker;
    uint64_t breaker_opened; /* times the breaker opened */
    uint64_t connections;    /* sessions connected now */
    uint64_t connects;       /* connections made */
    uint64_t connect_errors; /* connections that failed or were lost */
    uint64_t calls;          /* script calls answered */
    uint64_t batches;        /* batches those calls carried */
    uint64_t timeouts;       /* batches timed out */
    uint64_t errors;         /* batches failed by an error or a lost connection */
    uint64_t rejected;       /* batches failed at once under the open breaker */
    uint64_t script_reloads; /* NOSCRIPT answers (a SCRIPT FLUSH or a restart) */
    uint64_t cached;         /* batches denied by the over-limit cache, no call */
} weir_redis_stats;

/** Fill @out. Returns WEIR_OK, or WEIR_EINVAL when @store is not a Redis
 *  store. Thread-safe; each counter is exact, the set a snapshot. */
WEIR_API weir_status weir_redis_stats_get(weir_store *store, weir_redis_stats *out);

/** A Redis Cluster store's routing (Since 0.2). */
typedef struct weir_redis_cluster_stats {
    /** sizeof(weir_redis_cluster_stats), set by the caller. */
    size_t size;
    uint64_t nodes;         /* nodes met so far, masters and seeds (each has
                               a breaker) */
    uint64_t refreshes;     /* slot maps read (CLUSTER SLOTS) */
    uint64_t moved;         /* MOVED answers (and calls refused for a key
                               the node does not serve), followed */
    uint64_t asked;         /* ASK answers (a slot migrating), followed */
    uint64_t split;         /* batches decided over several nodes */
    uint64_t refunds;       /* charges given back for batches another node
                               denied */
    uint64_t refund_errors; /* refunds that could not be made */
} weir_redis_cluster_stats;

/** Fill @out (out->size set). Returns WEIR_OK, or WEIR_EINVAL when @store
 *  is not a Redis Cluster store. Thread-safe. */
WEIR_API weir_status weir_redis_cluster_stats_get(weir_store *store, weir_redis_cluster_stats *out);

/** `sync: local` on a Redis store (Since 0.2): decisions made from
 *  capacity reserved ahead, and how the reservations went. */
typedef struct weir_redis_sync_stats {
    /** sizeof(weir_redis_sync_stats), set by the caller. */
    size_t size;
    uint64_t local;     /* decisions made without a call: admitted from a
                           reservation, or denied past it */
    uint64_t reserved;  /* hits reserved in Redis */
    uint64_t returned;  /* hits given back unused */
    uint64_t outage;    /* decided here while Redis was away */
    uint64_t overshoot; /* hits admitted while Redis was away that Redis
                           could not take when it came back */
    /** Microseconds since a sync last reached Redis; -1 before the first. */
    int64_t sync_age_us;
} weir_redis_sync_stats;

/** Fill @out (out->size set). Returns WEIR_OK, or WEIR_EINVAL when @store
 *  is not a Redis store. Thread-safe. */
WEIR_API weir_status weir_redis_sync_stats_get(weir_store *store, weir_redis_sync_stats *out);

/** A cluster node's breaker: "host:port", its state and times opened, and
 *  whether a slot map names it now (false for a master replaced by its
 *  replica, or a seed that is down or a replica). */
typedef struct weir_redis_node {
    char address[WEIR_REDIS_MAX_FIELD + 8];
    weir_redis_breaker breaker;
    uint64_t breaker_opened;
    bool in_map;
} weir_redis_node;

/** The nodes a Redis Cluster store has met (masters now or before), up
 *  to @cap of them into @out; returns how many there are (0 for a store
 *  that is not a cluster's). Thread-safe. Since 0.2. */
WEIR_API size_t weir_redis_nodes_get(weir_store *store, weir_redis_node *out, size_t cap);
/** The master's address as weir_redis_sentinel_stats gives it: "host:port",
 *  an IPv6 host in brackets. */
#define WEIR_REDIS_ADDR_BYTES (WEIR_REDIS_MAX_FIELD + 9u)

/** Counters of a Redis store on Sentinel, summed over its sessions
 *  (since 0.2). */
typedef struct weir_redis_sentinel_stats {
    /** sizeof(weir_redis_sentinel_stats), set by the caller. */
    size_t size;
    uint64_t failovers;       /* times the master named changed to another address */
    uint64_t sentinel_errors; /* sentinel connections that failed, were lost or refused */
    uint64_t not_master;      /* connections to a named master that ROLE said was not one */
    /** The master the sentinels named last, "" until one has been. */
    char master[WEIR_REDIS_ADDR_BYTES];
} weir_redis_sentinel_stats;

/** Fill @out (whose size field is set). Returns WEIR_OK, or WEIR_EINVAL
 *  when @store is not a Redis store on Sentinel or @out->size is too
 *  small. Thread-safe; each counter is exact, the set a snapshot. */
WEIR_API weir_status weir_redis_sentinel_stats_get(weir_store *store,
                                                   weir_redis_sentinel_stats *out);

/** The breaker state's name: "closed", "open", "half_open". */
WEIR_API const char *weir_redis_breaker_name(weir_redis_breaker b);

#ifdef __cplusplus
}
#endif

#endif /* WEIR_REDIS_H */
