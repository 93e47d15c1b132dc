/*
 * weir/topk.h - the heaviest keys of a stream in fixed memory: a
 * Space-Saving sketch (Metwally, Agrawal and El Abbadi, 2005).
 *
 * A sketch keeps `capacity` counters. A key already counted adds to its
 * counter; a new key takes a free counter, or, when all are taken, the
 * smallest one: it inherits that count and records it as its error. So
 * whatever the number of distinct keys, the memory is fixed at creation
 * and every count is known within its error:
 *
 *   - each counted key's true count f satisfies  count - error <= f <= count;
 *   - a key not counted has f <= floor (weir_topk_stats_get());
 *   - error <= floor <= N / capacity, N being the stream's total weight
 *     (the sum of what was added), so any key with f > N / capacity is
 *     always among the counted ones.
 *
 * Sketches of the same capacity and key cap merge (weir_topk_merge()):
 * the result summarises both streams, with the same three guarantees
 * over N = N1 + N2 and the same capacity, however many merges it took.
 *
 * Keys are bytes. A key longer than `max_key_bytes` is kept as its first
 * max_key_bytes - 16 bytes and a 128-bit XXH3 digest of the whole key
 * (`hashed` in its entry), so two long keys stay apart unless their
 * digests collide.
 *
 * No clock, no lock, no allocation after weir_topk_new(): the caller
 * serialises the calls on one sketch (reads may run together).
 */
#ifndef WEIR_TOPK_H
#define WEIR_TOPK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weir/context.h"
#include "weir/export.h"
#include "weir/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Caps and defaults. */
#define WEIR_TOPK_DEFAULT_CAPACITY 4096u
#define WEIR_TOPK_MAX_CAPACITY (1u << 20)
#define WEIR_TOPK_DEFAULT_KEY_BYTES 128u
#define WEIR_TOPK_MIN_KEY_BYTES 32u
#define WEIR_TOPK_MAX_KEY_BYTES 4096u
/** Bytes of the digest that ends a key kept `hashed`. */
#define WEIR_TOPK_DIGEST_BYTES 16u

typedef struct weir_topk weir_topk;

typedef struct weir_topk_options {
    /** sizeof(weir_topk_options), so fields can be appended later. */
    size_t size;
    /** Counters, 1 .. WEIR_TOPK_MAX_CAPACITY; 0 = WEIR_TOPK_DEFAULT_CAPACITY. */
    uint32_t capacity;
    /** Bytes kept of a key, WEIR_TOPK_MIN_KEY_BYTES .. WEIR_TOPK_MAX_KEY_BYTES;
     *  0 = WEIR_TOPK_DEFAULT_KEY_BYTES. */
    uint32_t max_key_bytes;
} weir_topk_options;

/** One counted key, as weir_topk_top() lists it. */
typedef struct weir_topk_entry {
    /** The key's bytes (kept as given, or, when @hashed, its first
     *  key_len - WEIR_TOPK_DIGEST_BYTES bytes and then its digest). Points
     *  into the sketch: valid until the sketch next changes. */
    const void *key;
    size_t key_len;
    bool hashed;
    /** An upper bound of the key's true count ... */
    uint64_t count;
    /** ... and how far above it the count may be: the true count is at
     *  least count - error. */
    uint64_t error;
} weir_topk_entry;

typedef struct weir_topk_stats {
    uint32_t capacity;
    uint32_t max_key_bytes;
    /** Counters in use (at most capacity). */
    size_t used;
    /** Bytes the sketch holds, all of it allocated by weir_topk_new(). */
    size_t bytes;
    /** N: the total weight added (merges included), saturating. */
    uint64_t total;
    /** The most a key not counted can have had (0 until the counters are
     *  all in use): never more than total / capacity. */
    uint64_t floor;
} weir_topk_stats;

/**
 * weir_topk_new() - an empty sketch.
 *
 * @ctx:  its allocator is used once, here, for all the sketch's memory
 *        (and at weir_topk_free()); must outlive the sketch.
 * @opts: may be NULL for the defaults; copied.
 * @out:  written only on success.
 *
 * Returns WEIR_OK; WEIR_EINVAL (NULL @ctx or @out, bad opts->size, a
 * capacity or key cap out of range); WEIR_ENOMEM; WEIR_EIO when the
 * operating system gave no random bytes (the seed of the sketch's
 * index, so that keys cannot be chosen to collide in it).
 */
WEIR_API weir_status weir_topk_new(const weir_ctx *ctx, const weir_topk_options *opts,
                                   weir_topk **out);

/** Free a sketch. NULL is a no-op. */
WEIR_API void weir_topk_free(weir_topk *t);

/**
 * weir_topk_add() - count @weight more of @key (@len bytes; NULL with 0
 * is the empty key). A weight of 0 changes nothing. O(log capacity);
 * never allocates, never fails. Counts saturate at UINT64_MAX.
 */
WEIR_API void weir_topk_add(weir_topk *t, const void *key, size_t len, uint64_t weight);

/** Forget every key: the sketch is as weir_topk_new() made it. O(capacity). */
WEIR_API void weir_topk_clear(weir_topk *t);

/**
 * weir_topk_merge() - make @dst the sketch of its stream followed by
 * @src's (@src is not changed).
 *
 * Each key of either gets the sum of its counts and errors, where a
 * sketch that does not count the key adds its floor to both (the most
 * the key can have had there); the largest are kept, as many as @dst
 * has counters, and the new floor is the larger of the two floors' sum
 * and the largest count left out. The result keeps the guarantees of the header over
 * N = N(dst) + N(src): a key's true count within [count - error, count],
 * error <= floor <= N / capacity. O(capacity log capacity); never
 * allocates.
 *
 * Returns WEIR_OK; WEIR_EINVAL when an argument is NULL, @dst is @src,
 * or their capacities or key caps differ (nothing changed).
 */
WEIR_API weir_status weir_topk_merge(weir_topk *dst, const weir_topk *src);

/**
 * weir_topk_top() - the @n largest counts, largest first (equal counts
 * by smaller error, then by key bytes), into @out. Returns how many were
 * written: min(@n, keys counted). The entries point into @t: valid until
 * @t next changes. O(capacity log n); never allocates.
 */
WEIR_API size_t weir_topk_top(const weir_topk *t, weir_topk_entry *out, size_t n);

/** The sketch's size, use and bounds into @out. */
WEIR_API void weir_topk_stats_get(const weir_topk *t, weir_topk_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* WEIR_TOPK_H */
