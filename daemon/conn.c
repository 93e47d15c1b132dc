/*
 * conn.c - the life of a worker's client connection, shared by HTTP and
 * gRPC: accept (with the connection cap and the refusal of a connection
 * there is no memory for), the worker's list, close, and the half-close
 * and linger that let a client read the last answer instead of a reset.
 */
#include "conn.h"

static void on_handle_closed(uv_handle_t *h)
{
    conn *c = h->data;
    if (--c->open_handles > 0)
        return;
    c->free_fn(c);
}

conn *conn_accept(worker *w, uv_stream_t *listener, size_t size, metrics_proto proto, conn **list,
                  conn_free_fn free_fn)
{
    server *srv = w->srv;
    conn *c = worker_conn_alloc(w, size);
    if (!c) {
        worker_refuse(w, listener);
        return NULL;
    }
    c->w = w;
    c->proto = proto;
    c->list = list;
    c->free_fn = free_fn;
    uv_tcp_init(&w->loop, &c->tcp);
    c->tcp.data = c;
    c->open_handles = 1;
    if (uv_accept(listener, (uv_stream_t *)&c->tcp) < 0) {
        uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
        return NULL;
    }
    uv_timer_init(&w->loop, &c->timer);
    c->timer.data = c;
    c->open_handles = 2;
    /* linked first, so that every later failure can use conn_close() */
    c->next = *list;
    if (*list)
        (*list)->prev = c;
    *list = c;
    metrics_connection(w->metrics, proto, +1);
    int64_t open = atomic_fetch_add(&srv->connections, 1) + 1;
    if ((uint64_t)open > srv->opt.max_connections ||
        atomic_load_explicit(&srv->closing, memory_order_relaxed)) {
        metrics_connection_rejected(w->metrics, proto);
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
    if (c->prev)
        c->prev->next = c->next;
    else
        *c->list = c->next;
    if (c->next)
        c->next->prev = c->prev;
    atomic_fetch_sub(&w->srv->connections, 1);
    metrics_connection(w->metrics, c->proto, -1);
    if (!w->http_conns && !w->grpc_conns && atomic_load(&w->srv->closing))
        worker_wake(w); /* the last one: the worker can finish now */
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
