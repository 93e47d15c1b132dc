/*
 * conn.h - what every client connection of a worker has, whatever its
 * protocol: the socket and the one timer, a place in the worker's list of
 * open connections, its share of the server's connection count and
 * metrics, the count of its calls in flight, and the end of its life
 * (half-close, read and drop what the client still sends for a moment,
 * close). A protocol's connection starts with a conn, so a pointer to it
 * is a pointer to its conn, and the handles' data pointers serve both.
 *
 * Lifetime: a closed connection is freed once its handles have closed and
 * its last call in flight has completed (conn_call_end()); a call whose
 * connection closed completes into nothing.
 */
#ifndef WEIR_DAEMON_CONN_H
#define WEIR_DAEMON_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "common/addr.h"
#include "worker.h"

typedef struct conn conn;

/** Frees what the protocol added and the connection itself; called once,
 *  when the connection is closed, its handles are and no call is left. */
typedef void (*conn_free_fn)(conn *c);

struct conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    worker *w;
    listener *l; /* its protocol is l->proto */
    conn *prev, *next;
    conn_free_fn free_fn;
    uv_shutdown_t sreq;
    uint64_t linger_ms;
    unsigned calls;  /* decisions in flight for it */
    conn *kick_next; /* on the worker's list of connections to kick */
    bool kicked;
    bool lingering; /* half-closed, reading what is left */
    bool closed;
    int open_handles;
};

/**
 * conn_accept() - accept the connection waiting on @l into a zeroed block
 * of @size bytes that starts with a conn, put it on the worker's list and
 * count it. At --max-connections, the worker's connection idle longest
 * (between requests, the least lately active) is closed to make room, as
 * nginx reuses keep-alive connections (counted in
 * weir_connections_evicted_total). Returns NULL when it was not taken: no
 * memory (the connection is accepted and closed at once, so the listener
 * goes on), accept failed, over --max-connections with no idle connection
 * on this worker, or the server is closing (closed at once and counted as
 * rejected). Otherwise the caller sets up its protocol and
 * starts reading; on failure it calls conn_close(), which calls @free_fn
 * in time.
 */
conn *conn_accept(listener *l, size_t size, conn_free_fn free_fn);

/** @c received bytes: it goes to the front of the worker's list, which
 *  keeps the connections active least lately at its end. */
void conn_touch(conn *c);

/** Close at once: off the worker's list, uncounted, both handles closed
 *  (free_fn runs when they are and no call is left). A no-op when already
 *  closed. */
void conn_close(conn *c);

/** Everything is sent: half-close, read and drop what the client still
 *  sends until it closes or @linger_ms pass, then close. The timer and
 *  reading are the conn's from then on. */
void conn_finish(conn *c, uint64_t linger_ms);

/** The client's address (all zero when it cannot be had): asked of the
 *  socket when needed, not at every accept. */
weir_addr conn_peer(const conn *c);

/** How long a connection ended by the service reads and drops what its
 *  client still sends (conn_finish()). */
#define CONN_LINGER_MS 2000u

/** The service is closing and @c is between requests. A request that
 *  already reached its socket is read and answered as usual (false: the
 *  caller lets it be read); otherwise @c is half-closed and lingers
 *  (true), never closed with bytes unread, which would reset the
 *  connection and lose the answers in flight. */
bool conn_end_idle(conn *c);

/** A call for @c is in flight: @c stays in memory until conn_call_end(). */
void conn_call_begin(conn *c);
/** That call completed; frees a closed connection it was the last of. */
void conn_call_end(conn *c);

/** Answers of @c became ready outside its own callbacks: its protocol's
 *  kick() runs once this loop iteration has done its I/O, once however
 *  many answers came, so they leave in one write. */
void conn_kick(conn *c);
/** uv_check_cb of the worker's `kicks` handle: runs the kicks asked for. */
void conn_run_kicks(uv_check_t *h);

/** uv_alloc_cb for reads: the worker's read buffer. */
void conn_alloc_rbuf(uv_handle_t *h, size_t hint, uv_buf_t *buf);

#endif /* WEIR_DAEMON_CONN_H */
