/*
 * redis_support.h - a real redis-server for one test: started in a fresh
 * directory of its own, listening on a unix socket there and on a loopback
 * TCP port chosen at run time, with no persistence; stopped and its
 * directory removed at the end. A missing redis-server fails the test.
 */
#ifndef WEIR_TEST_REDIS_SUPPORT_H
#define WEIR_TEST_REDIS_SUPPORT_H

#include <sys/types.h>

#include <hiredis/hiredis.h>

typedef struct redis_server {
    pid_t pid;
    int port;       /* on 127.0.0.1 */
    char dir[64];   /* its directory (mkdtemp) */
    char sock[128]; /* dir/redis.sock */
} redis_server;

/**
 * redis_start() - start redis-server and wait until it answers PING.
 *
 * @extra: NULL, or a NULL-terminated list of further arguments
 *         ("--requirepass", "secret", ...); when they set a password, pass
 *         it as @password so that the PING can authenticate.
 *
 * Fails the running cmocka test (with the reason and the server's log) when
 * redis-server is not installed or does not come up within 10 seconds. A
 * port taken by someone else between choosing and binding it is retried
 * with another.
 */
void redis_start(redis_server *rs, const char *const *extra, const char *password);

/** SIGTERM the server, wait for it, remove its directory. Idempotent. */
void redis_stop(redis_server *rs);

/** A connection over the unix socket (failing the test if none). */
redisContext *redis_connect(const redis_server *rs);

/** A connection over TCP to 127.0.0.1 (failing the test if none). */
redisContext *redis_connect_tcp(const redis_server *rs);

#endif /* WEIR_TEST_REDIS_SUPPORT_H */
