/*
 * conn.c - the life of a worker's client connection, whatever its
 * protocol: accept (with the connection cap and the refusal of a
 * connection there is no memory for), the worker's list, the calls in
 * flight that keep a closed connection's memory, close, and the
 * half-close and linger that let a client read the last answer instead of
 * a reset.
 */
#include "conn.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "log.h"

static void maybe_free(conn *c)
{
    /* a connection on the kick list goes once the kicks have run */
    if (c->closed && c->open_handles == 0 && c->calls == 0 && !c->kicked)
        c->free_fn(c);
}

static void on_handle_closed(uv_handle_t *h)
{
    conn *c = h->data;
    c->open_handles--;
    maybe_free(c);
}

void conn_kick(conn *c)
{
    worker *w = c->w;
    if (c->closed || c->kicked)
        return;
    if (w->stopping) { /* the loop is winding down: no check runs any more */
        c->l->proto->kick(c);
        return;
    }
    c->kicked = true;
    c->kick_next = w->kicked;
    if (!w->kicked)
        uv_check_start(&w->kicks, conn_run_kicks);
    w->kicked = c;
}

void conn_run_kicks(uv_check_t *h)
{
    worker *w = h->data;
    conn *list = w->kicked;
    w->kicked = NULL;
    uv_check_stop(&w->kicks);
    for (conn *c = list, *next; c; c = next) {
        next = c->kick_next;
        c->kicked = false;
        if (!c->closed)
            c->l->proto->kick(c);
        else
            maybe_free(c);
    }
}

void conn_call_begin(conn *c)
{
    c->calls++;
}

void conn_call_end(conn *c)
{
    c->calls--;
    maybe_free(c);
}

/* ------------------------------------------------------------ refusing */

static void refuse(listener *l);

static void on_sink_closed(uv_handle_t *h)
{
    worker *w = h->data;
    w->sink_busy = false;
    unsigned waiting = w->sink_waiting;
    w->sink_waiting = 0;
    /* one at a time: a second refusal finds the sink busy and waits again */
    for (unsigned i = 0; i < w->n_listeners; i++)
        if ((waiting >> i & 1u) && w->listeners[i].open)
            refuse(&w->listeners[i]);
}

/* libuv stops watching a listener whose connection was not accepted until
 * it is, so a connection left waiting for memory would stop the listener
 * for good: it is accepted into the worker's own handle, which needs no
 * allocation, and closed at once. The client sees its connection closed. */
static void refuse(listener *l)
{
    worker *w = l->w;
    if (w->sink_busy) {
        w->sink_waiting |= 1u << l->index;
        return;
    }
    uv_tcp_init(&w->loop, &w->sink);
    w->sink.data = w;
    w->sink_busy = true;
    if (uv_accept((uv_stream_t *)&l->tcp, (uv_stream_t *)&w->sink) == 0) {
        metrics_connection_rejected(w->metrics, l->proto->metric);
        dlog(WEIR_LOG_WARN, "connection_refused", "reason", "out of memory", "proto",
             l->proto->name, NULL);
    }
    uv_close((uv_handle_t *)&w->sink, on_sink_closed);
}

static void *conn_alloc(worker *w, size_t size)
{
    unsigned every = w->srv->fail_conn_alloc;
    if (every && ++w->conn_allocs % every == 0)
        return NULL;
    return calloc(1, size);
}

/* ------------------------------------------------------------ life */

/* Idle connections looked at, from the end of the list, for one to close
 * at --max-connections: the work an accept may do is bounded. */
#define EVICT_SCAN 256u

static void unlink_conn(conn *c)
{
    worker *w = c->w;
    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        w->conns_tail = c->prev;
    c->prev = c->next = NULL;
}

static void push_front(conn *c)
{
    worker *w = c->w;
    c->prev = NULL;
    c->next = w->conns;
    if (w->conns)
        w->conns->prev = c;
    else
        w->conns_tail = c;
    w->conns = c;
}

void conn_touch(conn *c)
{
    if (!c->closed && c->w->conns != c) {
        unlink_conn(c);
        push_front(c);
    }
}

/* The connection of @w idle longest (not @except), or NULL. */
static conn *idle_victim(worker *w, const conn *except)
{
    unsigned seen = 0;
    for (conn *v = w->conns_tail; v && seen < EVICT_SCAN; v = v->prev, seen++) {
        if (v != except && !v->lingering && v->calls == 0 && v->l->proto->idle &&
            v->l->proto->idle(v))
            return v;
    }
    return NULL;
}

conn *conn_accept(listener *l, size_t size, conn_free_fn free_fn)
{
    worker *w = l->w;
    server *srv = w->srv;
    conn *c = conn_alloc(w, size);
    if (!c) {
        refuse(l);
        return NULL;
    }
    c->w = w;
    c->l = l;
    c->free_fn = free_fn;
    uv_tcp_init(&w->loop, &c->tcp);
    c->tcp.data = c;
    c->open_handles = 1;
    if (uv_accept((uv_stream_t *)&l->tcp, (uv_stream_t *)&c->tcp) < 0) {
        c->closed = true;
        uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
        return NULL;
    }
    uv_timer_init(&w->loop, &c->timer);
    c->timer.data = c;
    c->open_handles = 2;
    /* linked first, so that every later failure can use conn_close() */
    push_front(c);
    metrics_connection(w->metrics, l->proto->metric, +1);
    int64_t open = atomic_fetch_add(&srv->connections, 1) + 1;
    int64_t peak = atomic_load_explicit(&srv->connections_peak, memory_order_relaxed);
    while (open > peak && !atomic_compare_exchange_weak(&srv->connections_peak, &peak, open))
        ;
    bool closing = atomic_load_explicit(&srv->closing, memory_order_relaxed);
    if ((uint64_t)open > srv->opt.max_connections && !closing) {
        conn *v = idle_victim(w, c);
        if (v) {
            /* a client in use beats one that only holds a socket */
            metrics_connection_evicted(w->metrics, v->l->proto->metric);
            conn_close(v);
            return c;
        }
    }
    if ((uint64_t)open > srv->opt.max_connections || closing) {
        metrics_connection_rejected(w->metrics, l->proto->metric);
        conn_close(c);
        return NULL;
    }
    return c;
}

void conn_close(conn *c)
{
    if (c->closed)
        return;
    c->closed = true;
    worker *w = c->w;
    unlink_conn(c);
    atomic_fetch_sub(&w->srv->connections, 1);
    metrics_connection(w->metrics, c->l->proto->metric, -1);
    if (!w->conns && atomic_load(&w->srv->closing))
        uv_async_send(&w->wake); /* the last one: the worker can finish now */
    uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
}

void conn_alloc_rbuf(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)hint;
    conn *c = h->data;
    *buf = uv_buf_init(c->w->rbuf, (unsigned)c->w->rbuf_cap);
}

static void on_linger_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    if (nread < 0)
        conn_close(s->data);
}

static void on_linger_over(uv_timer_t *t)
{
    conn_close(t->data);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    conn *c = req->data;
    if (c->closed)
        return;
    if (status < 0) {
        conn_close(c);
        return;
    }
    /* Read and drop whatever the client still sends, until it closes or
     * the linger time is up. */
    uv_read_start((uv_stream_t *)&c->tcp, conn_alloc_rbuf, on_linger_read);
    uv_timer_start(&c->timer, on_linger_over, c->linger_ms, 0);
}

weir_addr conn_peer(const conn *c)
{
    weir_addr a;
    memset(&a, 0, sizeof(a));
    struct sockaddr_storage sa;
    int salen = sizeof(sa);
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&sa, &salen) != 0)
        return a;
    if (sa.ss_family == AF_INET) {
        memcpy(a.b, &((struct sockaddr_in *)&sa)->sin_addr, 4);
    } else if (sa.ss_family == AF_INET6) {
        a.v6 = true;
        memcpy(a.b, &((struct sockaddr_in6 *)&sa)->sin6_addr, 16);
    }
    return a;
}

bool conn_end_idle(conn *c)
{
    uv_os_fd_t fd;
    char byte;
    if (uv_fileno((const uv_handle_t *)&c->tcp, &fd) == 0 &&
        recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0)
        return false;
    conn_finish(c, CONN_LINGER_MS);
    return true;
}

void conn_finish(conn *c, uint64_t linger_ms)
{
    if (c->closed || c->lingering)
        return;
    c->lingering = true;
    uv_read_stop((uv_stream_t *)&c->tcp);
    uv_timer_stop(&c->timer);
    c->linger_ms = linger_ms;
    c->sreq.data = c;
    if (uv_shutdown(&c->sreq, (uv_stream_t *)&c->tcp, on_shutdown) < 0)
        conn_close(c);
}
