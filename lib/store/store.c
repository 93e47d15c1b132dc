/*
 * store.c - the public store functions: argument checks, then dispatch to
 * the store's own table.
 */
#include "store/store.h"

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

weir_status weir_store_stats_get(weir_store *store, weir_store_stats *out)
{
    if (!store || !out)
        return WEIR_EINVAL;
    store->ops->stats(store, out);
    return WEIR_OK;
}

void weir_store_free(weir_store *store)
{
    if (store)
        store->ops->destroy(store);
}
