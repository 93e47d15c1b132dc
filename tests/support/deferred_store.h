/*
 * deferred_store.h - a store for the tests that completes every batch
 * later: it wraps a memory store (which decides) and holds each batch until
 * its session's loop runs again, or until the test drains it by hand, then
 * completes the held batches in an order the test chose. It can also be
 * told to fail, refuse or time out batches. With it, every path a networked
 * store takes through the engine and the daemon runs without a network.
 *
 * `weir serve --store memory+deferred[:SPEC]` uses it in builds made with
 * -DWEIR_TEST_STORES=ON; never in a release build.
 */
#ifndef WEIR_TEST_DEFERRED_STORE_H
#define WEIR_TEST_DEFERRED_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "weir/store.h"

typedef enum weir_deferred_order {
    WEIR_DEFERRED_FIFO = 0,   /* in the order they came */
    WEIR_DEFERRED_REVERSE,    /* the last first */
    WEIR_DEFERRED_INTERLEAVE, /* the 2nd, 4th, 6th ... first, then the 1st, 3rd ... */
} weir_deferred_order;

typedef struct weir_deferred_options {
    weir_deferred_order order;
    /* A session's held batches complete this long after the first of them
     * came; 0 = on the loop's next iteration. */
    int64_t delay_us;
    /* Every Nth batch (counted over the store, from 1) completes with
     * fail_status instead of being decided; 0 = never. */
    unsigned fail_every;
    weir_status fail_status; /* 0 = WEIR_EUNAVAIL */
    /* A failed batch completes with WEIR_OK and fail_status in each op's
     * status (as a Redis Cluster store's batch whose node is down). */
    bool fail_ops;
    /* Every Nth submit is refused: it returns fail_status at once. */
    unsigned refuse_every;
    /* Every Nth batch completes with WEIR_ETIMEDOUT after timeout_us
     * (0 = 1 s) instead of being decided. */
    unsigned timeout_every;
    int64_t timeout_us;
    /* Declare WEIR_STORE_SHARED_KEYS, as a store shared between processes
     * does: the engine then sends stable keys, not digests. */
    bool shared_keys;
} weir_deferred_options;

/**
 * A deferred store deciding with @inner (taken over: freed with the store,
 * also when this fails). @opts may be NULL for defaults. Its capabilities:
 * none (it completes later), or WEIR_STORE_SHARED_KEYS.
 */
weir_status weir_deferred_store_new(weir_ctx *ctx, weir_store *inner,
                                    const weir_deferred_options *opts, weir_store **out);

/** Batches accepted and not yet completed, over every session and the
 *  store's own queue. Thread-safe. */
size_t weir_deferred_store_pending(weir_store *store);

/** Complete, in the store's order, every batch submitted outside a session
 *  (weir_store_submit()) so far, on the calling thread; batches submitted
 *  by their callbacks wait for the next drain. Returns how many completed. */
size_t weir_deferred_store_drain(weir_store *store);

/**
 * Options from text: comma-separated `order=fifo|reverse|interleave`,
 * `delay_ms=N`, `fail_every=N`, `fail_ops=0|1`, `refuse_every=N`, `timeout_every=N`,
 * `timeout_ms=N`, `shared_keys=0|1`; "" is the defaults. Returns WEIR_OK or WEIR_EINVAL.
 */
weir_status weir_deferred_options_parse(const char *spec, weir_deferred_options *out);

#endif /* WEIR_TEST_DEFERRED_STORE_H */
