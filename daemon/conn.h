/*
 * conn.h - what every client connection of a worker has, whatever its
 * protocol: the socket and the one timer, a place in the worker's list of
 * open connections, its share of the server's connection count and
 * metrics, and the end of its life (half-close, read and drop what the
 * client still sends for a moment, close). An http_conn and a grpc_conn
 * start with a conn, so a pointer to either is a pointer to its conn, and
 * the handles' data pointers serve both.
 */
#ifndef WEIR_DAEMON_CONN_H
#define WEIR_DAEMON_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "server.h"

typedef struct conn conn;

/** Frees what the protocol added and the connection itself; called once,
 *  after both handles have closed. */
typedef void (*conn_free_fn)(conn *c);

struct conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    worker *w;
    conn *prev, *next;
    conn **list; /* the worker's list the connection is on */
    metrics_proto proto;
    conn_free_fn free_fn;
    uv_shutdown_t sreq;
    uint64_t linger_ms;
    bool lingering; /* half-closed, reading what is left */
    bool closed;
    int open_handles;
};

/**
 * conn_accept() - accept the connection waiting on @listener into a zeroed
 * block of @size bytes that starts with a conn, put it on @list and count
 * it. Returns NULL when it was not taken: no memory (refused, see
 * worker_refuse()), accept failed, over --max-connections or the server is
 * closing (closed at once and counted as rejected). Otherwise the caller
 * sets up its protocol and starts reading; on failure it calls
 * conn_close(), which calls @free_fn in time.
 */
conn *conn_accept(worker *w, uv_stream_t *listener, size_t size, metrics_proto proto, conn **list,
                  conn_free_fn free_fn);

/** Close at once: off the worker's list, uncounted, both handles closed
 *  (free_fn runs when they are). A no-op when already closed. */
void conn_close(conn *c);

/** Everything is sent: half-close, read and drop what the client still
 *  sends until it closes or @linger_ms pass, then close. The timer and
 *  reading are the conn's from then on. */
void conn_finish(conn *c, uint64_t linger_ms);

/** uv_alloc_cb for reads: the worker's one read buffer (every byte read is
 *  handled before the next read). */
void conn_alloc_rbuf(uv_handle_t *h, size_t hint, uv_buf_t *buf);

#endif /* WEIR_DAEMON_CONN_H */
