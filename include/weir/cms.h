/*
 * weir/cms.h - a rate limiter for key sets too large to store: the keys'
 * counts kept in a count-min sketch (Cormode and Muthukrishnan, 2005) of
 * fixed size, per limit, instead of a state per key.
 *
 * The limit is a fixed window: at most `limit` hits per key in each window
 * of `window_us`, windows aligned to multiples of window_us counted from
 * time 0 (the Unix epoch gives UTC-aligned windows), as the fixed_window
 * algorithm of weir/algo.h. The sketch is `depth` rows of `width`
 * counters; a key adds to one counter a row (its hash picks which), and
 * its estimate is the smallest of its counters in the current window.
 *
 * The guarantees, for every key and every window:
 *
 *   - the estimate never under-counts: it is at least the hits admitted
 *     for the key in the window (each of its counters holds them, plus
 *     what other keys sharing the counter added), so the limiter NEVER
 *     admits more than `limit` hits of a key in a window, from any number
 *     of threads;
 *   - it over-counts by at most eps * N with probability at least
 *     1 - delta, where N is the hits admitted in the window for all keys,
 *     eps = e / width and delta = e^-depth (e = 2.718...). The update is
 *     conservative (a counter is raised only as far as the key's new
 *     estimate), which keeps the first guarantee and makes the
 *     over-count smaller in practice than the bound; docs/ALGORITHMS.md
 *     gives measured figures. An over-count is a false denial: a key
 *     denied before its true count reached the limit.
 *
 * A denied request counts nothing; `hits == 0` peeks. A time in an older
 * window than the latest the limiter has decided in (a clock that went
 * backwards, or threads whose clocks differ a little) is decided in that
 * latest window: it never reopens a window that has ended. Windows change
 * without a pause: a counter carries the window it counts (32 bits of its
 * index) and a counter of an older window reads as zero and is reset by
 * the next request that raises it; nothing is ever cleared in bulk.
 *
 * Memory is fixed at creation (weir_cms_stats_get()'s `bytes`): the
 * counters (8 bytes each: the count and its window), WEIR_CMS_LOCKS locks
 * (one a cache line) and a header. Keys are hashed (XXH3, seeded), never
 * kept. A seed of 0 asks for a random one, so that keys cannot be chosen
 * to collide.
 *
 * Thread safety: every function may be called from any number of threads
 * at once on the same limiter (but weir_cms_free()). A request that may
 * be admitted takes one of WEIR_CMS_LOCKS spinlocks, chosen by its key's
 * hash, while it reads and raises the key's counters, so that the
 * admissions of one key are decided one after the other; counters are
 * atomics shared by all keys. A denial (and a peek) reads the counters
 * without the lock and writes nothing: a key flooding past its limit
 * costs no lock.
 */
#ifndef WEIR_CMS_H
#define WEIR_CMS_H

#include <stdint.h>

#include "weir/algo.h"
#include "weir/context.h"
#include "weir/export.h"
#include "weir/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Caps and defaults. */
/** Most hits a key may have in a window (a counter holds 32 bits). */
#define WEIR_CMS_MAX_LIMIT ((uint64_t)UINT32_MAX - 1u)
#define WEIR_CMS_DEFAULT_DEPTH 4u
#define WEIR_CMS_MAX_DEPTH 16u
#define WEIR_CMS_MAX_WIDTH (1u << 28)
/** The memory budget used when neither width nor memory_bytes is given. */
#define WEIR_CMS_DEFAULT_BYTES ((size_t)1 << 20)
/** The most memory a limiter may hold (1 GiB). */
#define WEIR_CMS_MAX_BYTES ((size_t)1 << 30)
/** Longest key, in bytes. */
#define WEIR_CMS_MAX_KEY_BYTES 4096u
/** Locks a limiter holds (its requests of one key run one at a time). */
#define WEIR_CMS_LOCKS 256u
/** Bytes of a counter. */
#define WEIR_CMS_COUNTER_BYTES 8u

typedef struct weir_cms weir_cms;

typedef struct weir_cms_options {
    /** sizeof(weir_cms_options), so fields can be appended later. */
    size_t size;
    /** Hits a key may have in a window, 0 .. WEIR_CMS_MAX_LIMIT; 0 bans
     *  (every request denied, retry_after_us = WEIR_NEVER). */
    uint64_t limit;
    /** The window's length, 1 .. WEIR_MAX_WINDOW_US microseconds. */
    int64_t window_us;
    /** Counters a row, 1 .. WEIR_CMS_MAX_WIDTH; 0 = derived from
     *  memory_bytes. Give width or memory_bytes, not both. */
    uint32_t width;
    /** Rows, 1 .. WEIR_CMS_MAX_DEPTH; 0 = WEIR_CMS_DEFAULT_DEPTH. */
    uint32_t depth;
    /** A budget for the whole limiter, counters, locks and header: the
     *  widest sketch of `depth` rows that fits is made. 0 (and no width)
     *  = WEIR_CMS_DEFAULT_BYTES; at most WEIR_CMS_MAX_BYTES. */
    size_t memory_bytes;
    /** The hash seed; 0 = random bytes from the operating system. Give
     *  one to make runs reproducible or instances agree. */
    uint64_t seed;
} weir_cms_options;

typedef struct weir_cms_stats {
    uint64_t limit;
    int64_t window_us;
    uint32_t width;
    uint32_t depth;
    /** Bytes the limiter holds, all of it allocated by weir_cms_new(). */
    size_t bytes;
    /** The latest window a request was counted in (its index: start = window *
     *  window_us), 0 before the first request. */
    int64_t window;
} weir_cms_stats;

/**
 * weir_cms_new() - a limiter with every key at zero.
 *
 * @ctx:  its allocator is used once, here, for all the limiter's memory
 *        (and at weir_cms_free()); must outlive the limiter.
 * @opts: the limit, window and sketch shape (see weir_cms_options);
 *        copied, not kept.
 * @out:  written only on success.
 *
 * Returns WEIR_OK; WEIR_EINVAL (NULL @ctx, @opts or @out, a bad
 * opts->size, a window <= 0, both width and memory_bytes given);
 * WEIR_ERANGE (a limit, window, width, depth or budget past its cap, a
 * budget too small for one counter a row, or a width x depth past
 * WEIR_CMS_MAX_BYTES); WEIR_ENOMEM; WEIR_EIO when a random seed was asked
 * for and the operating system gave none. Thread-safe.
 */
WEIR_API weir_status weir_cms_new(const weir_ctx *ctx, const weir_cms_options *opts,
                                  weir_cms **out);

/** Free a limiter; no call on it may be running. NULL is a no-op. */
WEIR_API void weir_cms_free(weir_cms *c);

/**
 * weir_cms_take() - decide one request of @key and, if admitted, count it.
 *
 * @key, @key_len: the key's bytes (NULL with 0 is the empty key), at most
 *        WEIR_CMS_MAX_KEY_BYTES; borrowed.
 * @now_us: the request's time (negative is decided as 0).
 * @hits: its cost; 0 peeks: whether a request of cost 1 would be admitted
 *        now, counting nothing.
 * @res:  the verdict, written only on success, as weir_step() fills it
 *        for a fixed window, the key's count being its estimate:
 *        `allowed`; `limit`; `remaining` = limit - the estimate after
 *        this request; `reset_after_us` = the time to the window's end
 *        (0 when the estimate is 0); `retry_after_us` = 0 when admitted,
 *        else the time to the window's end (waiting exactly that long is
 *        enough: a window's counts start at zero, so with no other
 *        traffic the request is then admitted), or WEIR_NEVER when
 *        @hits exceeds the limit. `delay_us` and `lease` are 0.
 *
 * Admitted means: the key's estimate + @hits <= limit. A denied request
 * changes nothing. Never allocates; constant time (depth counters).
 *
 * Returns WEIR_OK (admitted or denied, see res->allowed); WEIR_EINVAL for
 * a NULL @c or @res, or a NULL @key with a length; WEIR_ERANGE for a key
 * longer than WEIR_CMS_MAX_KEY_BYTES. Thread-safe.
 */
WEIR_API weir_status weir_cms_take(weir_cms *c, const void *key, size_t key_len, int64_t now_us,
                                   uint64_t hits, weir_result *res);

/**
 * weir_cms_check() - the verdict weir_cms_take() would give @key for
 * @hits now, counting nothing: to check several limits before charging
 * any (a request is charged only if all admit). Another thread may count
 * in between, so the take that follows can still deny. Arguments,
 * returns and result as weir_cms_take() (with @hits 0 too). Thread-safe.
 */
WEIR_API weir_status weir_cms_check(const weir_cms *c, const void *key, size_t key_len,
                                    int64_t now_us, uint64_t hits, weir_result *res);

/**
 * weir_cms_estimate() - the hits the sketch holds for @key in the window
 * of @now_us (or the latest window decided in, if later), without
 * counting: never less than the hits admitted for it in that window.
 * Arguments and returns as weir_cms_take(); @out written on success.
 * Thread-safe.
 */
WEIR_API weir_status weir_cms_estimate(const weir_cms *c, const void *key, size_t key_len,
                                       int64_t now_us, uint64_t *out);

/** The limiter's limit, shape, memory and window into @out (both must
 *  not be NULL: nothing is written otherwise). Thread-safe. */
WEIR_API void weir_cms_stats_get(const weir_cms *c, weir_cms_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* WEIR_CMS_H */
