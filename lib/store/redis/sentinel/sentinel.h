/*
 * sentinel.h - the Redis store on a master watched by Redis Sentinel: the
 * store's part (the sentinels, the master last named, counters), a
 * session that finds and follows the master (sentinel.c), the start-up
 * check's question to the sentinels (ping.c), and the parsers of what
 * sentinels and the master answer (replies.c, no I/O).
 */
#ifndef WEIR_STORE_REDIS_SENTINEL_H
#define WEIR_STORE_REDIS_SENTINEL_H

#include <pthread.h>

#include "store/redis/session.h"

struct redisReply;

/* The store's sentinel part (redis_store.sentinel), shared by its
 * sessions. */
typedef struct rsentinel {
    weir__redis_seed seeds[WEIR_REDIS_MAX_SEEDS];
    size_t n_seeds;
    pthread_mutex_t lock; /* master */
    char master[WEIR_REDIS_ADDR_BYTES];
    /* counters (weir_redis_sentinel_stats), relaxed */
    _Atomic uint64_t failovers, errors, not_master;
} rsentinel;

/* sentinel.c */
weir_status weir__rsentinel_new(redis_store *rs);
void weir__rsentinel_free(redis_store *rs);
extern const redis_session_entries weir__sentinel_sessions;
void weir__rsentinel_stats(redis_store *rs, weir_redis_sentinel_stats *out);

/* ping.c: ask the sentinels in turn, synchronously, where the master is.
 * WEIR_OK with @out set and a message saying who named it; WEIR_EINVAL
 * when no sentinel named it and one said it does not know the name or
 * refused the question; WEIR_EUNAVAIL when none could be asked. */
weir_status weir__sentinel_find(redis_store *rs, weir__redis_seed *out, char *msg, size_t cap);

/* replies.c. Each takes what hiredis parsed from a sentinel or a master,
 * trusting none of it: hosts are at most WEIR_REDIS_MAX_FIELD printable
 * bytes without spaces, ports 1 to 65535 in decimal. */

/* The longest +switch-master message read: a name, two hosts, two ports
 * and four spaces. */
#define WEIR__SENTINEL_MAX_MESSAGE (3 * WEIR_REDIS_MAX_FIELD + 16)

/* A reply to SENTINEL get-master-addr-by-name: [host, port]. 1 with @out
 * set; 0 when the sentinel does not know the name (a nil); -1 for
 * anything else (an error: the text in @err, @cap bytes). */
int weir__sentinel_addr_parse(const struct redisReply *r, weir__redis_seed *out, char *err,
                              size_t cap);

/* A message of the +switch-master channel, "<name> <old-host> <old-port>
 * <new-host> <new-port>" (@len bytes): true, with the new address in
 * @out, when it is well formed and about the master @name. */
bool weir__sentinel_switch_parse(const char *msg, size_t len, const char *name,
                                 weir__redis_seed *out);

/* A reply on the subscription: ["message", "+switch-master", payload].
 * 1 with @out set when it moves the master @name; 0 for what is not such
 * a message (the subscription's confirmation, another master's switch);
 * -1 when it is malformed. */
int weir__sentinel_switch_reply(const struct redisReply *r, const char *name,
                                weir__redis_seed *out);

/* A reply to ROLE: 1 when its first element is "master", 0 when it names
 * another role (copied into @role, @cap bytes), -1 when it is no such
 * reply (an error, a refused command). */
int weir__sentinel_role_parse(const struct redisReply *r, char *role, size_t cap);

/* "host:port" into @out (WEIR_REDIS_ADDR_BYTES), the host bracketed when
 * it holds a ':' (IPv6). */
void weir__sentinel_addr_format(const weir__redis_seed *a, char *out, size_t cap);

#endif /* WEIR_STORE_REDIS_SENTINEL_H */
