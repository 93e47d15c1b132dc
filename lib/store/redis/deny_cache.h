/*
 * deny_cache.h - the Redis store's local over-limit cache: a key Redis
 * denied until T is denied here until T, with no round trip (Cloudflare's
 * mitigation flag; envoyproxy/ratelimit's local cache).
 *
 * It is exact, not an estimate: only cost-1 denials are kept (a TAKE of 1
 * hit, or a look), and only for algorithms whose retry_after is exact (not
 * the concurrency limiter, whose leases may be released early). Until T
 * no cost-1 request can be admitted anywhere, so no state changes, and the
 * answer Redis would give is the one kept: denied, nothing remaining, the
 * same reset time, retry_after shrinking to T. A batch is answered here
 * only when every op of it is such a denial. A REFUND that gave capacity
 * back through this cache's session drops the key's denial (one sent by
 * another instance is not seen here: the denial then holds until T).
 *
 * One per session (per worker thread): no lock. Fixed memory: a table of
 * slots indexed by a keyed hash of the key; a new denial takes its slot.
 */
#ifndef WEIR_STORE_REDIS_DENY_CACHE_H
#define WEIR_STORE_REDIS_DENY_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weir/context.h"
#include "weir/store.h"

typedef struct deny_cache deny_cache;

/* A cache of @slots entries (rounded up to a power of two; 0: none, and
 * every call below does nothing). */
weir_status weir__deny_cache_new(weir_ctx *ctx, size_t slots, deny_cache **out);
void weir__deny_cache_free(weir_ctx *ctx, deny_cache *c);

/* Whether every op of the batch is a cost-1 TAKE or look of a key denied
 * until after @now_mono: then each op's status and result are filled
 * (times relative to @now_mono) and true is returned. */
bool weir__deny_cache_answer(deny_cache *c, weir_op *ops, size_t n, int64_t now_mono);

/* Remember the cost-1 denials of a batch Redis decided; @asked_mono is
 * when the batch was submitted (before Redis decided: so a denial never
 * outlives Redis's). */
void weir__deny_cache_note(deny_cache *c, const weir_op *ops, size_t n, int64_t asked_mono);

#endif /* WEIR_STORE_REDIS_DENY_CACHE_H */
