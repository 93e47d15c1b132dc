/*
 * weir/adapters/libuv.h - a weir_loop_adapter for a libuv loop, header-only
 * so that libweir itself never links libuv: include it where the loop is
 * (the daemon, an embedder's server) and make a session with
 *
 *     weir_loop_adapter a = weir_libuv_adapter(loop);
 *     weir_store_session_new(store, &a, &session);
 *
 * Every hook runs on the loop's thread, as weir_loop_adapter requires. A
 * timer or an fd watch (a uv_poll_t) is a small allocation of its own,
 * freed once it has fired or been stopped (after libuv has closed its
 * handle); the loop must run until those close callbacks have, as for any
 * libuv handle.
 */
#ifndef WEIR_ADAPTERS_LIBUV_H
#define WEIR_ADAPTERS_LIBUV_H

#include <stdlib.h>
#include <uv.h>

#include "weir/store.h"

typedef struct weir_libuv_timer {
    uv_timer_t handle;
    void (*cb)(void *arg);
    void *arg;
} weir_libuv_timer;

static inline void weir_libuv_handle_closed(uv_handle_t *h)
{
    free(h->data);
}

static inline void weir_libuv_timer_fired(uv_timer_t *h)
{
    weir_libuv_timer *t = (weir_libuv_timer *)h->data;
    uv_close((uv_handle_t *)&t->handle, weir_libuv_handle_closed);
    t->cb(t->arg);
}

static inline void *weir_libuv_timer_start(void *data, int64_t after_us, void (*cb)(void *arg),
                                           void *arg)
{
    weir_libuv_timer *t = (weir_libuv_timer *)malloc(sizeof(*t));
    if (!t)
        return NULL;
    t->cb = cb;
    t->arg = arg;
    uv_timer_init((uv_loop_t *)data, &t->handle);
    t->handle.data = t;
    /* libuv counts milliseconds: round up, so a timer never fires early */
    uint64_t ms = after_us <= 0 ? 0 : (uint64_t)(after_us + 999) / 1000;
    uv_timer_start(&t->handle, weir_libuv_timer_fired, ms, 0);
    return t;
}

static inline void weir_libuv_timer_stop(void *data, void *timer)
{
    (void)data;
    weir_libuv_timer *t = (weir_libuv_timer *)timer;
    uv_timer_stop(&t->handle);
    uv_close((uv_handle_t *)&t->handle, weir_libuv_handle_closed);
}

typedef struct weir_libuv_watch {
    uv_poll_t handle;
    void (*cb)(void *arg, unsigned ready);
    void *arg;
} weir_libuv_watch;

static inline void weir_libuv_watch_ready(uv_poll_t *h, int status, int events)
{
    weir_libuv_watch *w = (weir_libuv_watch *)h->data;
    unsigned ready = 0;
    /* an error on the fd: let the store read or write it and see for itself */
    if (status < 0)
        ready = WEIR_IO_READ | WEIR_IO_WRITE;
    if (events & UV_READABLE)
        ready |= WEIR_IO_READ;
    if (events & UV_WRITABLE)
        ready |= WEIR_IO_WRITE;
    w->cb(w->arg, ready);
}

static inline void weir_libuv_io_update(void *data, void *watch, unsigned events)
{
    (void)data;
    weir_libuv_watch *w = (weir_libuv_watch *)watch;
    int uv_events =
        ((events & WEIR_IO_READ) ? UV_READABLE : 0) | ((events & WEIR_IO_WRITE) ? UV_WRITABLE : 0);
    if (uv_events)
        uv_poll_start(&w->handle, uv_events, weir_libuv_watch_ready);
    else
        uv_poll_stop(&w->handle);
}

static inline void *weir_libuv_io_start(void *data, int fd, unsigned events,
                                        void (*cb)(void *arg, unsigned ready), void *arg)
{
    weir_libuv_watch *w = (weir_libuv_watch *)malloc(sizeof(*w));
    if (!w)
        return NULL;
    if (uv_poll_init((uv_loop_t *)data, &w->handle, fd) != 0) {
        free(w);
        return NULL;
    }
    w->cb = cb;
    w->arg = arg;
    w->handle.data = w;
    weir_libuv_io_update(data, w, events);
    return w;
}

static inline void weir_libuv_io_stop(void *data, void *watch)
{
    (void)data;
    weir_libuv_watch *w = (weir_libuv_watch *)watch;
    uv_poll_stop(&w->handle);
    uv_close((uv_handle_t *)&w->handle, weir_libuv_handle_closed);
}

/* Both handle structs start with their libuv handle. */
static inline void weir_libuv_unref(void *data, void *handle)
{
    (void)data;
    uv_unref((uv_handle_t *)handle);
}

/** The adapter for @loop (borrowed: it must outlive every session made
 *  with the adapter). */
static inline weir_loop_adapter weir_libuv_adapter(uv_loop_t *loop)
{
    weir_loop_adapter a;
    a.size = sizeof(a);
    a.data = loop;
    a.timer_start = weir_libuv_timer_start;
    a.timer_stop = weir_libuv_timer_stop;
    a.io_start = weir_libuv_io_start;
    a.io_update = weir_libuv_io_update;
    a.io_stop = weir_libuv_io_stop;
    a.unref = weir_libuv_unref;
    return a;
}

#endif /* WEIR_ADAPTERS_LIBUV_H */
