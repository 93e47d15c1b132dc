/*
 * worker.h - one worker thread: its libuv loop, its listeners (one per
 * protocol, sharing the server's ports through SO_REUSEPORT), its store
 * session and engine reader, and its open connections. Nothing here is
 * shared with other workers except through the server.
 */
#ifndef WEIR_DAEMON_WORKER_H
#define WEIR_DAEMON_WORKER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "common/buf.h"
#include "proto.h"
#include "server.h"
#include "shed.h"

struct conn;

/** A worker's listener for one protocol. */
typedef struct listener {
    uv_tcp_t tcp;
    struct worker *w;
    const proto *proto;
    unsigned index; /* in the worker's listeners[] */
    void *state;    /* proto->worker_new()'s */
    bool open;
} listener;

typedef struct worker {
    server *srv;
    unsigned id;
    pthread_t thread;
    uv_loop_t loop;
    uv_async_t wake;      /* server state changed (drain, stop) */
    uv_timer_t tick;      /* once a second: Date, store maintenance (worker 0) */
    uv_check_t kicks;     /* after each poll: connections with answers to send */
    struct conn *kicked;  /* those connections (conn_kick()) */
    uv_timer_t deadlines; /* the first deadline of the calls in flight */
    uv_timer_t lag_timer; /* every SHED_TICK_MS: the loop's lag (shed.h) */
    shed_monitor lag;
    struct call *waiting_head, *waiting_tail; /* calls in flight, by deadline */
    void *call_blocks[16];                    /* freed calls' memory, for the next ones */
    unsigned n_call_blocks;
    listener listeners[SERVER_MAX_LISTENERS];
    unsigned n_listeners;
    weir_store_session *session; /* the store on this loop */
    weir_engine_reader *reader;  /* decides through the session */
    metrics_shard *metrics;
    weir_buf body;        /* scratch for one answer rendered at once */
    weir_headers headers; /* scratch: response header fields */
    char *rbuf;           /* reads land here; a connection keeps what it
                             cannot handle yet in memory of its own */
    size_t rbuf_cap;
    /* every open connection, the one active most lately first (for
     * draining, and for the idle one closed at --max-connections) */
    struct conn *conns, *conns_tail;
    bool stopping;         /* closing everything */
    char date[40];         /* "Date: ...\r\n", refreshed by tick */
    uint64_t rng;          /* Retry-After jitter */
    uv_tcp_t sink;         /* accepts a connection there is no memory for */
    bool sink_busy;        /* closing: a second refusal waits for it */
    unsigned sink_waiting; /* bit i: listeners[i] has a refusal waiting */
    uint64_t conn_allocs;
    /* decisions a failure mode made: one log line a second, with how
     * many went unlogged since the last */
    uint64_t failure_logged_ms;
    uint64_t failure_unlogged;
    /* debug lines of decisions: those written in the second that started
     * at debug_second_ms, and those left out */
    uint64_t debug_second_ms;
    unsigned debug_lines;
    uint64_t debug_unlogged;
} worker;

/** Start the worker's thread and loop on the server's listening sockets.
 *  Returns 0 or a libuv error. */
int worker_start(worker *w);

/** Free what worker_start() made, after the thread ended. */
void worker_cleanup(worker *w);

/** Ask the worker's loop to look at the server's drain/close/stop flags.
 *  Thread-safe. */
void worker_wake(worker *w);

/** 0 .. --retry-jitter seconds, at random. */
int64_t worker_jitter(worker *w);

#endif /* WEIR_DAEMON_WORKER_H */
