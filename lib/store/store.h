/*
 * store.h - the private side of weir_store: every store starts with this
 * header, whose table of operations the public functions dispatch through.
 */
#ifndef WEIR_STORE_INTERNAL_H
#define WEIR_STORE_INTERNAL_H

#include <stdbool.h>

#include "weir/store.h"

typedef enum weir__store_kind { WEIR__STORE_MEMORY = 1 } weir__store_kind;

typedef struct weir__store_ops {
    weir_status (*submit)(weir_store *s, weir_op *ops, size_t n, int64_t now_us, unsigned flags,
                          weir_store_cb cb, void *arg);
    void (*stats)(weir_store *s, weir_store_stats *out);
    void (*destroy)(weir_store *s);
} weir__store_ops;

struct weir_store {
    const weir__store_ops *ops;
    weir__store_kind kind;
    weir_ctx *ctx;
};

/* Whether the store completes every batch before weir_store_submit()
 * returns (its callback has run by then): the memory store does. */
static inline bool weir__store_is_inline(const weir_store *s)
{
    return s->kind == WEIR__STORE_MEMORY;
}

/* A hint that an op on this key (WEIR_DIGEST_BYTES, as WEIR_BATCH_DIGESTS
 * takes it) will follow: the memory store starts fetching the key's
 * buckets, so the cache miss overlaps whatever the caller does before the
 * op. Other stores ignore it. Reads the table without a lock and never
 * writes; safe from any thread. */
void weir__store_prefetch(weir_store *s, const void *key);

/* Internal batch flag: the ops were built by the library itself (every
 * one valid, keys of WEIR_DIGEST_BYTES whose buckets weir__store_prefetch()
 * was already asked to fetch), so the store skips its checks and fetches. */
#define WEIR__BATCH_PLANNED 0x100u

/* The engine's atomic batch on the memory store (is_inline): decided as
 * WEIR_BATCH_ATOMIC | WEIR_BATCH_DIGESTS | WEIR__BATCH_PLANNED and complete
 * on return, with no callback; the status is what weir_store_submit()
 * would have returned or passed to its callback. */
weir_status weir__memstore_run_planned(weir_store *s, weir_op *ops, size_t n, int64_t now_us);

/* Checks shared by every store: what weir_store_submit() promises to refuse. */
weir_status weir__store_check_batch(const weir_op *ops, size_t n, unsigned flags);

#endif /* WEIR_STORE_INTERNAL_H */
