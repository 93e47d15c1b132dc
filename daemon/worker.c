/*
 * worker.c - one worker thread: its own libuv loop, its own listening
 * sockets (the kernel spreads connections over the workers' sockets with
 * SO_REUSEPORT), its store session and engine reader, and its scratch
 * buffers. Nothing here is shared between workers except the server's
 * engine, store, metrics and flags, and nothing here names a protocol:
 * each listener's row of the protocol table does what is particular.
 */
#include "worker.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "call.h"
#include "conn.h"
#include "log.h"
#include "weir/adapters/libuv.h"

static void set_date(worker *w)
{
    static const char *const days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                         "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    time_t t = (time_t)(server_now_us(w->srv) / 1000000);
    struct tm tm;
    gmtime_r(&t, &tm);
    snprintf(w->date, sizeof(w->date), "Date: %s, %02d %s %04d %02d:%02d:%02d GMT\r\n",
             days[tm.tm_wday % 7], tm.tm_mday, months[tm.tm_mon % 12], tm.tm_year + 1900,
             tm.tm_hour, tm.tm_min, tm.tm_sec);
}

int64_t worker_jitter(worker *w)
{
    int64_t max = w->srv->opt.retry_jitter_s;
    if (max <= 0)
        return 0;
    /* xorshift64: spreading retries needs no cryptographic randomness */
    w->rng ^= w->rng << 13;
    w->rng ^= w->rng >> 7;
    w->rng ^= w->rng << 17;
    return (int64_t)(w->rng % (uint64_t)(max + 1));
}

static void on_connection(uv_stream_t *s, int status)
{
    listener *l = s->data;
    if (status < 0) {
        dlog(WEIR_LOG_WARN, "accept_failed", "proto", l->proto->name, "error", uv_strerror(status),
             NULL);
        return;
    }
    l->proto->accept(l);
}

static void close_listeners(worker *w)
{
    for (unsigned i = 0; i < w->n_listeners; i++)
        if (w->listeners[i].open) {
            w->listeners[i].open = false;
            uv_close((uv_handle_t *)&w->listeners[i].tcp, NULL);
        }
}

/* Looks at the server's flags: closing shuts the listeners and drains
 * every connection (each protocol its way); stopping closes every
 * connection. Once closing and no connection is left, the loop's own
 * handles close and uv_run returns (after the decisions still in flight,
 * whose timers keep it running, have completed or expired). */
static void apply_state(worker *w)
{
    server *s = w->srv;
    if (w->stopping || !atomic_load(&s->closing))
        return;
    close_listeners(w);
    bool stop = atomic_load(&s->stopping);
    for (conn *c = w->conns, *next; c; c = next) {
        next = c->next;
        if (stop)
            conn_close(c);
        else
            c->l->proto->drain(c);
    }
    if (!w->conns) {
        w->stopping = true;
        uv_close((uv_handle_t *)&w->tick, NULL);
        uv_close((uv_handle_t *)&w->lag_timer, NULL);
        uv_close((uv_handle_t *)&w->wake, NULL);
        if (w->kicked) /* closed connections only: nothing to send */
            conn_run_kicks(&w->kicks);
        uv_close((uv_handle_t *)&w->kicks, NULL);
        /* calls still in flight answer nothing now; they need no timer */
        uv_close((uv_handle_t *)&w->deadlines, NULL);
    }
}

static void on_lag_tick(uv_timer_t *t)
{
    worker *w = t->data;
    shed_tick(&w->lag, uv_now(&w->loop));
}

static void on_wake(uv_async_t *a)
{
    apply_state(a->data);
}

static void on_tick(uv_timer_t *t)
{
    worker *w = t->data;
    set_date(w);
    if (w->id == 0) {
        weir_store_maintain(w->srv->store, server_now_us(w->srv));
        weir_store_maintain(w->srv->fallback, server_now_us(w->srv));
    }
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
    close_listeners(w);
    /* Decisions still in flight complete now, into closed connections:
     * the reader goes with the last of them, the session completes them. */
    weir_engine_reader_free(w->reader);
    w->reader = NULL;
    weir_store_session_free(w->session);
    w->session = NULL;
    uv_run(&w->loop, UV_RUN_DEFAULT); /* let close callbacks run */
    atomic_fetch_add(&w->srv->workers_done, 1);
    return NULL;
}

/* Server listener @i on this worker when it is one of its kind: the
 * admin worker (the last, past the deciding ones) serves the admin
 * listener alone, on its one socket. */
static int start_listener(worker *w, unsigned i)
{
    server_listener *sl = &w->srv->listeners[i];
    bool admin = w->id >= w->srv->n_workers;
    if (sl->proto->admin != admin)
        return 0;
    unsigned k = w->n_listeners;
    listener *l = &w->listeners[k];
    l->w = w;
    l->proto = sl->proto;
    l->index = k;
    if (l->proto->worker_new && !(l->state = l->proto->worker_new(l)))
        return UV_ENOMEM;
    uv_tcp_init(&w->loop, &l->tcp);
    l->tcp.data = l;
    l->open = true;
    w->n_listeners = k + 1;
    int rc = uv_tcp_open(&l->tcp, sl->fds[admin ? 0 : w->id]);
    if (rc >= 0)
        rc = uv_listen((uv_stream_t *)&l->tcp, 1024, on_connection);
    return rc;
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
    weir_headers_init(&w->headers, 1u << 20);
    w->rbuf_cap = 64 * 1024;
    w->rbuf = malloc(w->rbuf_cap);
    weir_loop_adapter adapter = weir_libuv_adapter(&w->loop);
    if (!w->rbuf || weir_store_session_new(s->store, &adapter, &w->session) != WEIR_OK ||
        weir_engine_reader_new_session(s->engine, w->session, &w->reader) != WEIR_OK)
        return UV_ENOMEM;
    w->metrics = metrics_shard_at(s->metrics, w->id);
    set_date(w);
    uv_async_init(&w->loop, &w->wake, on_wake);
    w->wake.data = w;
    uv_timer_init(&w->loop, &w->tick);
    w->tick.data = w;
    uv_check_init(&w->loop, &w->kicks);
    w->kicks.data = w;
    uv_timer_init(&w->loop, &w->deadlines);
    w->deadlines.data = w;
    uv_timer_start(&w->tick, on_tick, 1000, 1000);
    uv_timer_init(&w->loop, &w->lag_timer);
    w->lag_timer.data = w;
    /* the lag is measured only where some priority can be shed */
    bool shedding = false;
    for (unsigned i = 0; i < s->opt.shed.n; i++)
        shedding |= s->opt.shed.lag_us[i] > 0;
    if (shedding) {
        w->lag.due_ms = uv_now(&w->loop) + SHED_TICK_MS;
        uv_timer_start(&w->lag_timer, on_lag_tick, SHED_TICK_MS, SHED_TICK_MS);
    }
    for (unsigned i = 0; i < s->n_listeners; i++)
        if ((rc = start_listener(w, i)) < 0)
            return rc;
    if (pthread_create(&w->thread, NULL, run, w) != 0)
        return UV_EAGAIN;
    return 0;
}

void worker_cleanup(worker *w)
{
    if (w->loop.data != w) /* never started */
        return;
    if (!w->thread) {
        /* it failed to start: its loop never ran */
        close_listeners(w);
        weir_engine_reader_free(w->reader);
        weir_store_session_free(w->session);
        uv_run(&w->loop, UV_RUN_NOWAIT);
    }
    uv_loop_close(&w->loop);
    for (unsigned i = 0; i < w->n_listeners; i++)
        if (w->listeners[i].proto->worker_free)
            w->listeners[i].proto->worker_free(w->listeners[i].state);
    weir_buf_free(&w->body);
    weir_headers_free(&w->headers);
    for (unsigned i = 0; i < w->n_call_blocks; i++)
        free(w->call_blocks[i]);
    free(w->rbuf);
}
