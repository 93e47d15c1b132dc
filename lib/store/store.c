/*
 * store.c - the public store functions: argument checks, then dispatch to
 * the store's own table; the plain session of a store that needs no loop.
 */
#include "store/store.h"
#include "core/context.h"

weir_status weir__store_check_batch(const weir_op *ops, size_t n, unsigned flags)
{
    if (!ops || n == 0 || n > WEIR_MAX_BATCH ||
        (flags & ~(WEIR_BATCH_ATOMIC | WEIR_BATCH_DIGESTS)) != 0)
        return WEIR_EINVAL;
    return WEIR_OK;
}

weir_status weir_store_submit(weir_store *store, weir_op *ops, size_t n, int64_t now_us,
                              unsigned flags, weir_store_cb cb, void *arg)
{
    if (!store || !cb)
        return WEIR_EINVAL;
    weir_status st = weir__store_check_batch(ops, n, flags);
    if (st != WEIR_OK)
        return st;
    return store->ops->submit(store, ops, n, now_us, flags, cb, arg);
}

unsigned weir_store_caps(const weir_store *store)
{
    return store ? store->ops->caps : 0u;
}

/* The oldest adapter layout this version understands: size, data and the
 * two timer hooks. */
#define LOOP_ADAPTER_V1_SIZE (offsetof(weir_loop_adapter, timer_stop) + sizeof(void (*)(void)))

weir_status weir_store_session_new(weir_store *store, const weir_loop_adapter *loop,
                                   weir_store_session **out)
{
    if (!store || !out ||
        (loop && (loop->size < LOOP_ADAPTER_V1_SIZE || !loop->timer_start || !loop->timer_stop)))
        return WEIR_EINVAL;
    if (store->ops->session_new)
        return store->ops->session_new(store, loop, out);
    if (!weir__store_is_inline(store))
        return WEIR_EINVAL; /* a store that completes later has sessions of its own */
    weir_store_session *ss = weir__calloc(store->ctx, 1, sizeof(*ss));
    if (!ss)
        return WEIR_ENOMEM;
    ss->store = store;
    *out = ss;
    return WEIR_OK;
}

weir_status weir_store_session_submit(weir_store_session *session, weir_op *ops, size_t n,
                                      int64_t now_us, unsigned flags, weir_store_cb cb, void *arg)
{
    if (!session || !cb)
        return WEIR_EINVAL;
    weir_status st = weir__store_check_batch(ops, n, flags);
    if (st != WEIR_OK)
        return st;
    weir_store *store = session->store;
    if (store->ops->session_submit)
        return store->ops->session_submit(session, ops, n, now_us, flags, cb, arg);
    return store->ops->submit(store, ops, n, now_us, flags, cb, arg);
}

void weir_store_session_free(weir_store_session *session)
{
    if (!session)
        return;
    weir_store *store = session->store;
    if (store->ops->session_free)
        store->ops->session_free(session);
    else
        weir__free(store->ctx, session);
}

void weir_store_maintain(weir_store *store, int64_t now_us)
{
    if (store && store->ops->maintain)
        store->ops->maintain(store, now_us);
}

weir_status weir_store_check_limit(const weir_store *store, const weir_limit *lim)
{
    if (!store || !lim)
        return WEIR_EINVAL;
    return store->ops->check_limit ? store->ops->check_limit(lim) : WEIR_OK;
}

weir_status weir_store_stats_get(weir_store *store, weir_store_stats *out)
{
    if (!store || !out)
        return WEIR_EINVAL;
    if (!store->ops->stats)
        return WEIR_EALGO; /* the keys live elsewhere (Redis) */
    store->ops->stats(store, out);
    return WEIR_OK;
}

void weir_store_free(weir_store *store)
{
    if (store)
        store->ops->destroy(store);
}
