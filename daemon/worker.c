/*
 * worker.c - one worker thread: its own libuv loop, its own listening
 * sockets (the kernel spreads connections over the workers' sockets with
 * SO_REUSEPORT), its engine reader and its scratch buffers. Nothing here
 * is shared between workers except the server's engine, store, metrics
 * and flags.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conn.h"
#include "http.h"
#include "log.h"

static void set_date(worker *w)
{
    static const char *const days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                         "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    snprintf(w->date, sizeof(w->date), "Date: %s, %02d %s %04d %02d:%02d:%02d GMT\r\n",
             days[tm.tm_wday % 7], tm.tm_mday, months[tm.tm_mon % 12], tm.tm_year + 1900,
             tm.tm_hour, tm.tm_min, tm.tm_sec);
}

enum { SINK_HTTP = 1, SINK_GRPC = 2 };

void *worker_conn_alloc(worker *w, size_t size)
{
    unsigned every = w->srv->fail_conn_alloc;
    if (every && ++w->conn_allocs % every == 0)
        return NULL;
    return calloc(1, size);
}

static void on_sink_closed(uv_handle_t *h)
{
    worker *w = h->data;
    w->sink_busy = false;
    unsigned waiting = w->sink_waiting;
    w->sink_waiting = 0;
    /* one at a time: a second refusal finds the sink busy and waits again */
    if ((waiting & SINK_HTTP) && w->http_open)
        worker_refuse(w, (uv_stream_t *)&w->http);
    if ((waiting & SINK_GRPC) && w->grpc_open)
        worker_refuse(w, (uv_stream_t *)&w->grpc);
}

/* libuv stops watching a listener whose connection was not accepted until
 * it is, so a connection left waiting for memory would stop the listener
 * for good: it is accepted into the worker's own handle, which needs no
 * allocation, and closed at once. The client sees its connection closed. */
void worker_refuse(worker *w, uv_stream_t *listener)
{
    bool grpc = listener == (uv_stream_t *)&w->grpc;
    if (w->sink_busy) {
        w->sink_waiting |= grpc ? SINK_GRPC : SINK_HTTP;
        return;
    }
    uv_tcp_init(&w->loop, &w->sink);
    w->sink.data = w;
    w->sink_busy = true;
    if (uv_accept(listener, (uv_stream_t *)&w->sink) == 0) {
        metrics_connection_rejected(w->metrics, grpc ? PROTO_GRPC : PROTO_HTTP);
        dlog(WEIR_LOG_WARN, "connection_refused", "reason", "out of memory", "proto",
             grpc ? "grpc" : "http", NULL);
    }
    uv_close((uv_handle_t *)&w->sink, on_sink_closed);
}

static void on_connection(uv_stream_t *s, int status)
{
    worker *w = s->data;
    if (status < 0) {
        dlog(WEIR_LOG_WARN, "accept_failed", "error", uv_strerror(status), NULL);
        return;
    }
    if (s == (uv_stream_t *)&w->grpc)
        grpc_conn_accept(w);
    else
        http_conn_accept(w);
}

static void close_listener(worker *w)
{
    if (w->http_open) {
        w->http_open = false;
        uv_close((uv_handle_t *)&w->http, NULL);
    }
    if (w->grpc_open) {
        w->grpc_open = false;
        uv_close((uv_handle_t *)&w->grpc, NULL);
    }
}

/* Looks at the server's flags: closing shuts the listeners, lets idle
 * HTTP connections go and sends gRPC connections their GOAWAY; stopping
 * closes every connection. Once closing and no connection is left, the
 * loop's own handles close and uv_run returns. */
static void apply_state(worker *w)
{
    server *s = w->srv;
    if (w->stopping)
        return;
    if (atomic_load(&s->closing)) {
        close_listener(w);
        bool stop = atomic_load(&s->stopping);
        for (conn *c = w->http_conns, *next; c; c = next) {
            next = c->next;
            if (stop)
                conn_close(c);
            else
                http_conn_drain((http_conn *)c);
        }
        for (conn *c = w->grpc_conns, *next; c; c = next) {
            next = c->next;
            if (stop)
                conn_close(c);
            else
                grpc_conn_drain((grpc_conn *)c);
        }
        if (!w->http_conns && !w->grpc_conns) {
            w->stopping = true;
            uv_close((uv_handle_t *)&w->tick, NULL);
            uv_close((uv_handle_t *)&w->wake, NULL);
        }
    }
}

static void on_wake(uv_async_t *a)
{
    apply_state(a->data);
}

static void on_tick(uv_timer_t *t)
{
    worker *w = t->data;
    set_date(w);
    if (w->id == 0)
        weir_store_maintain(w->srv->store, server_now_us(w->srv));
    apply_state(w);
}

void worker_wake(worker *w)
{
    uv_async_send(&w->wake);
}

static void *run(void *arg)
{
    worker *w = arg;
    uv_run(&w->loop, UV_RUN_DEFAULT);
    close_listener(w);
    uv_run(&w->loop, UV_RUN_DEFAULT); /* let close callbacks run */
    atomic_fetch_add(&w->srv->workers_done, 1);
    return NULL;
}

int worker_start(worker *w)
{
    server *s = w->srv;
    int rc = uv_loop_init(&w->loop);
    if (rc < 0)
        return rc;
    w->loop.data = w; /* marks the worker as started, for worker_cleanup() */
    w->rng = (uint64_t)uv_hrtime() ^ ((uint64_t)(w->id + 1) * 0x9e3779b97f4a7c15u);
    if (!w->rng)
        w->rng = 1;
    weir_buf_init(&w->body, SIZE_MAX);
    weir_buf_init(&w->headers, 1u << 20);
    weir_buf_init(&w->grpc_msg, SIZE_MAX);
    w->rbuf_cap = 64 * 1024;
    w->rbuf = malloc(w->rbuf_cap);
    weir_api_limits lim = {(size_t)s->opt.max_descriptors, WEIR_ENGINE_MAX_ENTRIES,
                           (size_t)s->opt.max_batch};
    w->decoder = weir_api_decoder_new(&lim);
    w->rls = weir_rls_decoder_new(&lim);
    if (!w->rbuf || !w->decoder || !w->rls ||
        weir_engine_reader_new(s->engine, &w->reader) != WEIR_OK)
        return UV_ENOMEM;
    w->metrics = metrics_shard_at(s->metrics, w->id);
    set_date(w);
    uv_async_init(&w->loop, &w->wake, on_wake);
    w->wake.data = w;
    uv_timer_init(&w->loop, &w->tick);
    w->tick.data = w;
    uv_timer_start(&w->tick, on_tick, 1000, 1000);
    if (s->http_fds) {
        uv_tcp_init(&w->loop, &w->http);
        w->http.data = w;
        w->http_open = true;
        if ((rc = uv_tcp_open(&w->http, s->http_fds[w->id])) < 0 ||
            (rc = uv_listen((uv_stream_t *)&w->http, 1024, on_connection)) < 0)
            return rc;
    }
    if (s->grpc_fds) {
        uv_tcp_init(&w->loop, &w->grpc);
        w->grpc.data = w;
        w->grpc_open = true;
        if ((rc = uv_tcp_open(&w->grpc, s->grpc_fds[w->id])) < 0 ||
            (rc = uv_listen((uv_stream_t *)&w->grpc, 1024, on_connection)) < 0)
            return rc;
    }
    if (pthread_create(&w->thread, NULL, run, w) != 0)
        return UV_EAGAIN;
    return 0;
}

void worker_cleanup(worker *w)
{
    if (w->loop.data != w) /* never started */
        return;
    uv_loop_close(&w->loop);
    weir_engine_reader_free(w->reader);
    weir_api_decoder_free(w->decoder);
    weir_rls_decoder_free(w->rls);
    weir_buf_free(&w->grpc_msg);
    weir_buf_free(&w->body);
    weir_buf_free(&w->headers);
    free(w->rbuf);
}
