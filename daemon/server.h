/*
 * server.h - the running service: what every worker shares (engine,
 * store, metrics, settings, the drain flag) and one worker's own state
 * (its libuv loop, listeners, engine reader, decoders and connections).
 */
#ifndef WEIR_DAEMON_SERVER_H
#define WEIR_DAEMON_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "api/api.h"
#include "grpc/rls.h"
#include "metrics.h"
#include "options.h"
#include "weir/weir.h"

typedef struct server server;
typedef struct http_conn http_conn;
typedef struct grpc_conn grpc_conn;

typedef struct worker {
    server *srv;
    unsigned id;
    pthread_t thread;
    uv_loop_t loop;
    uv_async_t wake; /* server state changed (drain, stop) */
    uv_tcp_t http;   /* listener */
    bool http_open;
    uv_tcp_t grpc; /* listener */
    bool grpc_open;
    uv_timer_t tick; /* once a second: Date, store maintenance (worker 0) */
    weir_engine_reader *reader;
    metrics_shard *metrics;
    weir_api_decoder *decoder;
    weir_descriptor_status statuses[WEIR_ENGINE_MAX_DESCRIPTORS];
    weir_buf body;    /* scratch: a response body */
    weir_buf headers; /* scratch: extra response headers */
    char *rbuf;       /* reads land here; every byte is handled before
                         the next read, so one buffer serves the loop */
    size_t rbuf_cap;
    struct conn *http_conns; /* every open connection, for draining */
    struct conn *grpc_conns;
    weir_rls_decoder *rls; /* gRPC ShouldRateLimit requests */
    weir_buf grpc_msg;     /* scratch: a gRPC response message */
    bool draining;         /* this loop has seen the drain */
    bool stopping;         /* closing everything */
    char date[40];         /* "Date: ...\r\n", refreshed by tick */
    uint64_t rng;          /* Retry-After jitter */
    uv_tcp_t sink;         /* accepts a connection there is no memory for */
    bool sink_busy;        /* closing: a second refusal waits for it */
    unsigned sink_waiting; /* listeners with a refusal waiting (SINK_*) */
    uint64_t conn_allocs;
} worker;

struct server {
    serve_options opt;
    weir_ctx *ctx;
    weir_store *store;
    weir_engine *engine;
    metrics *metrics;
    unsigned n_workers;
    worker *workers;
    int *http_fds; /* one listening socket per worker (SO_REUSEPORT) */
    char http_url[SERVE_ADDR_BYTES + 16];
    int *grpc_fds; /* the same for gRPC */
    char grpc_url[SERVE_ADDR_BYTES + 16];
    _Atomic bool draining; /* /healthz fails; listeners close after the delay */
    _Atomic bool closing;  /* listeners closed; idle connections go */
    _Atomic bool stopping; /* shutdown timeout passed: close everything */
    _Atomic int64_t connections;
    /* WEIR_TEST_FAIL_CONN_ALLOC=N: every Nth connection's memory is
     * refused, as under memory exhaustion (for the tests; 0 = never) */
    unsigned fail_conn_alloc;
    _Atomic unsigned workers_done;
    pthread_mutex_t rules_lock;
    char *rules_text; /* /v1/rules: the compiled rules, one line per limit */
    size_t rules_text_len;
};

/** The wall clock in microseconds, never running backwards. */
int64_t server_now_us(server *s);

/** A copy of the /v1/rules text into @out. */
void server_rules_text(server *s, weir_buf *out);

/** Load the rule path and put it in force (a bad file keeps the old
 *  rules); logs either way. Returns whether the new rules are in force. */
bool server_reload(server *s, const char *why);

/* worker.c */
int worker_start(worker *w);
/** Free what worker_start() made, after the thread ended. */
void worker_cleanup(worker *w);
/** Ask the worker's loop to look at the server's drain/close/stop flags. */
void worker_wake(worker *w);

/** Memory for a new connection (zeroed), or NULL. */
void *worker_conn_alloc(worker *w, size_t size);
/** A connection is waiting on @listener and there is no memory for it:
 *  accept it and close it at once, so the listener goes on accepting. */
void worker_refuse(worker *w, uv_stream_t *listener);

/* http_conn.c */
/** Accept a connection on @w's HTTP listener. */
void http_conn_accept(worker *w);
/** Drain: close the connection now if it is idle, else after its answer. */
void http_conn_drain(http_conn *c);
/** Close at once. */
void http_conn_close(http_conn *c);

/* grpc_conn.c */
/** Accept a connection on @w's gRPC listener. */
void grpc_conn_accept(worker *w);
/** Drain: GOAWAY, answer the calls in flight, then close. */
void grpc_conn_drain(grpc_conn *c);
/** Close at once. */
void grpc_conn_close(grpc_conn *c);

#endif /* WEIR_DAEMON_SERVER_H */
