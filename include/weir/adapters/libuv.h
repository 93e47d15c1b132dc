/*
 * weir/adapters/libuv.h - a weir_loop_adapter for a libuv loop, header-only
 * so that libweir itself never links libuv: include it where the loop is
 * (the daemon, an embedder's server) and make a session with
 *
 *     weir_loop_adapter a = weir_libuv_adapter(loop);
 *     weir_store_session_new(store, &a, &session);
 *
 * Every hook runs on the loop's thread, as weir_loop_adapter requires. A
 * timer is a small allocation of its own, freed once it has fired or been
 * stopped (after libuv has closed its handle); the loop must run until
 * those close callbacks have, as for any libuv handle.
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

static inline void weir_libuv_timer_closed(uv_handle_t *h)
{
    free(h->data);
}

static inline void weir_libuv_timer_fired(uv_timer_t *h)
{
    weir_libuv_timer *t = (weir_libuv_timer *)h->data;
    uv_close((uv_handle_t *)&t->handle, weir_libuv_timer_closed);
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
    uv_close((uv_handle_t *)&t->handle, weir_libuv_timer_closed);
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
    return a;
}

#endif /* WEIR_ADAPTERS_LIBUV_H */
