/*
 * store.h - the private side of weir_store: every store starts with this
 * header, whose table of operations the public functions dispatch through.
 * The engine knows stores only through this table: what one store can do
 * faster (the memory store's prefetch and planned batch) is an optional
 * entry, NULL in every other store, never a test of the store's type.
 */
#ifndef WEIR_STORE_INTERNAL_H
#define WEIR_STORE_INTERNAL_H

#include <stdbool.h>

#include "weir/store.h"

typedef struct weir__store_ops {
    /* WEIR_STORE_* */
    unsigned caps;
    /* A batch outside any session. Required. */
    weir_status (*submit)(weir_store *s, weir_op *ops, size_t n, int64_t now_us, unsigned flags,
                          weir_store_cb cb, void *arg);
    /* Sessions; all three NULL for a store whose session simply forwards to
     * submit (a WEIR_STORE_INLINE store). */
    weir_status (*session_new)(weir_store *s, const weir_loop_adapter *loop,
                               weir_store_session **out);
    weir_status (*session_submit)(weir_store_session *ss, weir_op *ops, size_t n, int64_t now_us,
                                  unsigned flags, weir_store_cb cb, void *arg);
    void (*session_free)(weir_store_session *ss);
    /* Housekeeping; NULL for none. */
    void (*maintain)(weir_store *s, int64_t now_us);
    /* NULL when the keys are held elsewhere (weir_store_stats_get() then
     * says WEIR_EALGO) */
    void (*stats)(weir_store *s, weir_store_stats *out);
    void (*destroy)(weir_store *s);
    /* Whether the store can hold this limit; NULL: every compiled limit. */
    weir_status (*check_limit)(const weir_limit *lim);

    /* Optional fast paths (NULL = absent). */

    /* A hint that an op on this key (WEIR_DIGEST_BYTES, as
     * WEIR_BATCH_DIGESTS takes it) will follow: the store may start fetching
     * what the op will read, so the cache miss overlaps whatever the caller
     * does before the op. Reads without a lock and never writes; safe from
     * any thread. */
    void (*prefetch)(weir_store *s, const void *key);
    /* The engine's atomic batch, decided at once with no callback: ops built
     * by the library (every one valid, keys of WEIR_DIGEST_BYTES already
     * given to prefetch), as WEIR_BATCH_ATOMIC | WEIR_BATCH_DIGESTS. Returns
     * what weir_store_submit() would have returned or passed to its
     * callback. Only in a WEIR_STORE_INLINE store. */
    weir_status (*run_planned)(weir_store *s, weir_op *ops, size_t n, int64_t now_us);
} weir__store_ops;

struct weir_store {
    const weir__store_ops *ops;
    weir_ctx *ctx;
};

/* A batch as it was submitted, kept by a layer that completes it later
 * (the Redis store's cluster and sync: local layers). */
typedef struct weir__batch_req {
    weir_op *ops;
    size_t n;
    int64_t now_us;
    unsigned flags;
    weir_store_cb cb;
    void *arg;
} weir__batch_req;

/* Complete @r with @st (its record may be freed before: a copy is taken). */
static inline void weir__batch_req_done(weir__batch_req r, weir_status st)
{
    r.cb(r.arg, r.ops, r.n, st);
}

/* A session starts with this; a store with its own sessions extends it. */
struct weir_store_session {
    weir_store *store;
};

static inline bool weir__store_is_inline(const weir_store *s)
{
    return (s->ops->caps & WEIR_STORE_INLINE) != 0;
}

/* Internal batch flag: the ops were built by the library itself (every
 * one valid, keys of WEIR_DIGEST_BYTES whose buckets the prefetch entry
 * was already asked to fetch), so the store skips its checks and fetches. */
#define WEIR__BATCH_PLANNED 0x100u

/* Checks shared by every store: what weir_store_submit() promises to refuse. */
weir_status weir__store_check_batch(const weir_op *ops, size_t n, unsigned flags);

#endif /* WEIR_STORE_INTERNAL_H */
