/*
 * proto.h - a protocol the daemon serves, as one row of a table: how a
 * worker accepts its connections, what it keeps per worker, and how its
 * connections drain and send what became ready. main.c names the rows
 * (one per listener); nothing else in the daemon names a protocol, so a
 * new protocol is a folder under daemon/ and a row.
 */
#ifndef WEIR_DAEMON_PROTO_H
#define WEIR_DAEMON_PROTO_H

#include <stdbool.h>

#include "metrics.h"

struct listener;
struct conn;

typedef struct proto {
    /** Its name in logs and its setting ("http", "grpc", "resp"). */
    const char *name;
    /** The scheme of its URL in logs ("http", "redis"). */
    const char *scheme;
    metrics_proto metric;
    /** State of the protocol on one worker (its decoders, scratch), made
     *  before the worker's loop runs and freed after; NULL when out of
     *  memory. Optional. */
    void *(*worker_new)(struct listener *l);
    void (*worker_free)(void *state);
    /** A connection waits on @l: accept it (conn_accept()). */
    void (*accept)(struct listener *l);
    /** The service is closing: end @c as soon as its answers are out. */
    void (*drain)(struct conn *c);
    /** An answer became ready outside the connection's own callbacks (a
     *  decision that completed later): send it. */
    void (*kick)(struct conn *c);
    /** Whether @c is between requests: nothing begun, nothing to answer
     *  or send; such a connection may be closed to admit a new one at
     *  --max-connections. */
    bool (*idle)(const struct conn *c);
    /** Served by the admin worker alone (one socket), not the deciding
     *  workers. */
    bool admin;
} proto;

#endif /* WEIR_DAEMON_PROTO_H */
