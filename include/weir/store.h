/*
 * weir/store.h - where rate limit state lives.
 *
 * A store takes a batch of operations and completes it asynchronously: the
 * interface is the same for the in-process memory store (which completes
 * inline, before weir_store_submit() returns) and for networked stores
 * (which complete later, from their event loop). Callers are written
 * against the asynchronous contract and lose nothing when it is inline.
 *
 * A store decides with the same pure step functions as weir/algo.h, so a
 * key gives the same verdicts whichever store holds it. Backend failures are
 * errors (a status); whether they fail open or closed is the caller's
 * policy, never the store's.
 */
#ifndef WEIR_STORE_H
#define WEIR_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "weir/algo.h"
#include "weir/context.h"
#include "weir/export.h"
#include "weir/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weir_store weir_store;

/** Longest key a store accepts, in bytes. */
#define WEIR_MAX_KEY_BYTES 4096u
/** Most operations in one batch. */
#define WEIR_MAX_BATCH 4096u

typedef enum weir_op_kind {
    /** Decide and, if admitted, charge `hits` (an acquire for the
     *  concurrency limiter). */
    WEIR_OP_TAKE = 0,
    /** Decide without charging (weir_check()); never creates a key. */
    WEIR_OP_CHECK = 1,
    /** Give back concurrency lease `lease`. */
    WEIR_OP_RELEASE = 2,
    /** Forget the key's state: the key is fresh again. `limit` must still
     *  be a valid limit (its fields are not used); result.allowed says
     *  whether the store held a state. Not in an atomic batch. */
    WEIR_OP_RESET = 3,
    /** Since 0.2: give back `hits` that a TAKE under the same limit charged
     *  (weir_refund()). Never creates a key: on a key the store does not
     *  hold (or holds under another limit) it changes nothing, with
     *  result.allowed false. WEIR_EALGO for a concurrency limit. Not in an
     *  atomic batch. */
    WEIR_OP_REFUND = 4,
    /** Since 0.2: charge `hits` whatever the verdict, as far as the key can
     *  hold them (weir_charge()). Creates the key like a TAKE. WEIR_EALGO
     *  for a concurrency limit. Not in an atomic batch. */
    WEIR_OP_CHARGE = 5
} weir_op_kind;

/** One operation of a batch. Inputs are borrowed until completion. */
typedef struct weir_op {
    /* inputs */
    const void *key;
    size_t key_len; /* 1 .. WEIR_MAX_KEY_BYTES */
    const weir_limit *limit;
    uint64_t hits;
    uint64_t lease; /* WEIR_OP_RELEASE only */
    weir_op_kind kind;
    unsigned flags; /* WEIR_OP_* */
    /* outputs, valid when the batch completes */
    weir_status status; /* per operation: WEIR_OK, or why this one failed */
    weir_result result; /* valid when status == WEIR_OK */
    /** Since 0.2, an input: for a TAKE, the op is admitted only if at least
     *  `reserve` units remain free after it (weir_step_reserve()); it still
     *  charges `hits` only. 0 = as before. Ignored by the other kinds. */
    uint64_t reserve;
} weir_op;

/** Op flag: a store must not answer this op from a local cache of
 *  denials (the Redis store's over-limit cache): every one goes to the
 *  shared store. */
#define WEIR_OP_NO_LOCAL_CACHE 1u

/** Op flags (Since 0.2): a TAKE a shared store may decide from capacity
 *  this instance reserved ahead (a rule's `sync: local`), reserving again
 *  and giving back what it did not use every WEIR_OP_SYNC_MS(flags)
 *  milliseconds (1 .. 60000). A store without such a layer (the memory
 *  store) ignores them. The engine sets them. */
#define WEIR_OP_SYNC_LOCAL 2u
#define WEIR_OP_SYNC_FLAGS(ms) (WEIR_OP_SYNC_LOCAL | ((unsigned)(ms) << 8))
#define WEIR_OP_SYNC_MS(flags) ((unsigned)(flags) >> 8)

/** Batch flag: decide every TAKE first and charge them only if all are
 *  admitted, atomically (check all, then charge all). When one is denied,
 *  none is charged: the denying ops report their denial, the others their
 *  state as it stays (as a look with no hits would). */
#define WEIR_BATCH_ATOMIC 1u

/** Batch flag: every key is exactly WEIR_DIGEST_BYTES of a keyed hash
 *  (such as XXH3-128 under a secret of the caller's): uniformly random to
 *  anyone without the secret. The memory store uses those bytes as the
 *  key's digest instead of hashing the key again, which saves a hash per
 *  op; keys that are not such digests would load its table unevenly. A key
 *  of another length is WEIR_EINVAL for its op. The engine sets it. */
#define WEIR_BATCH_DIGESTS 2u

/** Length of a key under WEIR_BATCH_DIGESTS. */
#define WEIR_DIGEST_BYTES 16u

/**
 * Completion callback: called exactly once per accepted batch, with the
 * batch's ops (their outputs filled) and the batch status (WEIR_OK, or an
 * error that applies to the whole batch such as WEIR_EUNAVAIL). Never
 * called when weir_store_submit() returned an error.
 */
typedef void (*weir_store_cb)(void *arg, weir_op *ops, size_t n, weir_status status);

/**
 * weir_store_submit() - run a batch of operations.
 *
 * @ops:    n ops; the array and what it points to stay borrowed until the
 *          callback runs.
 * @now_us: one time for the whole batch (a networked store may substitute
 *          its own shared clock).
 * @flags:  0, or WEIR_BATCH_ATOMIC and/or WEIR_BATCH_DIGESTS.
 * @cb:     completion callback (required).
 *
 * Returns WEIR_OK when the batch was accepted (the callback will run; for
 * an inline store it has already run); WEIR_EINVAL for NULL pointers, n == 0
 * or n > WEIR_MAX_BATCH, or unknown flags. Thread-safety is the store's:
 * the memory store is fully thread-safe. A store that completes only on an
 * event loop takes its batches through weir_store_session_submit().
 *
 * An atomic batch on the memory store holds at most 64 ops (WEIR_EINVAL
 * past that). An op that is not valid (an empty or too long key, no
 * limit, a RELEASE, RESET, REFUND or CHARGE inside an atomic batch) fails
 * the whole atomic batch with WEIR_EINVAL, and only itself in an
 * independent batch.
 */
WEIR_API weir_status weir_store_submit(weir_store *store, weir_op *ops, size_t n, int64_t now_us,
                                       unsigned flags, weir_store_cb cb, void *arg);

/* ------------------------------------------------------------------------ */
/* Capabilities, sessions and maintenance                                   */

/** Capability: every batch completes before the submitting call returns
 *  (its callback has run by then), on the submitting thread. */
#define WEIR_STORE_INLINE 0x1u
/** Capability: the store is shared between processes, so a counter must
 *  have the same key bytes in every process and after a restart (the
 *  engine then sends stable keys, never digests under a secret of its
 *  own). */
#define WEIR_STORE_SHARED_KEYS 0x2u
/** Capability: WEIR_BATCH_ATOMIC holds only when every key of the batch
 *  routes to the same slot; a batch over several slots is checked and
 *  charged slot by slot. No store of this library sets it: the Redis
 *  Cluster store keeps atomic batches whole across its nodes. */
#define WEIR_STORE_ATOMIC_SLOT 0x4u

/** The store's WEIR_STORE_* bits; 0 for NULL. Never changes for a store.
 *  Thread-safe. */
WEIR_API unsigned weir_store_caps(const weir_store *store);

/**
 * An event loop as a store sees it: a store that completes later runs its
 * completions (and its network I/O) on the loop a session was made for,
 * through these hooks, so libweir needs no event library.
 * weir/adapters/libuv.h fills one from a uv_loop_t.
 *
 * Every hook is called only on the loop's own thread.
 */
typedef struct weir_loop_adapter {
    /** sizeof(weir_loop_adapter): hooks are appended as stores need them. */
    size_t size;
    /** Passed to every hook. */
    void *data;
    /** Run @cb(@arg) once on the loop, @after_us microseconds from now (0:
     *  on the loop's next iteration, never from inside this call). Returns
     *  a handle for timer_stop(), or NULL when out of memory. The handle is
     *  the adapter's to free once @cb has run or the timer was stopped. */
    void *(*timer_start)(void *data, int64_t after_us, void (*cb)(void *arg), void *arg);
    /** Cancel a timer whose callback has not run yet: it never will. */
    void (*timer_stop)(void *data, void *timer);

    /* Since 0.2: file descriptors, for stores that talk over a socket (the
     * Redis store needs them; the memory store does not). */

    /** Watch @fd for the events WEIR_IO_READ | WEIR_IO_WRITE in @events
     *  (0: none for now) and call @cb(@arg, ready events) on the loop while
     *  any is ready. Returns a handle for io_update() and io_stop(), or
     *  NULL when out of memory. */
    void *(*io_start)(void *data, int fd, unsigned events, void (*cb)(void *arg, unsigned ready),
                      void *arg);
    /** Change the events a watch waits for (0: none, the watch stays). */
    void (*io_update)(void *data, void *watch, unsigned events);
    /** End a watch, before @fd is closed: @cb is never called again. The
     *  handle is the adapter's to free. */
    void (*io_stop)(void *data, void *watch);
    /** Let a watch or a timer run in the background: it no longer keeps
     *  the loop running on its own (libuv's uv_unref()), so a loop whose
     *  other work is done can end while a store keeps an idle connection
     *  or waits to reconnect. */
    void (*unref)(void *data, void *handle);
} weir_loop_adapter;

/** Events of weir_loop_adapter's fd hooks. */
#define WEIR_IO_READ 1u
#define WEIR_IO_WRITE 2u

/** Whether @loop has the fd hooks (a store that needs them refuses a
 *  session on a loop without them with WEIR_EINVAL). */
static inline int weir_loop_has_io(const weir_loop_adapter *loop)
{
    return loop && loop->size >= sizeof(weir_loop_adapter) && loop->io_start && loop->io_update &&
           loop->io_stop && loop->unref;
}

/** A store's presence on one event loop (one per worker thread): what a
 *  networked store keeps per loop (its connection, its queue of batches
 *  in flight) lives here, so the decision path takes no lock. */
typedef struct weir_store_session weir_store_session;

/**
 * weir_store_session_new() - a session of @store on the loop @loop drives.
 *
 * @loop: copied; may be NULL for a store with WEIR_STORE_INLINE, which
 *        needs no loop (its session simply forwards to the store). A store
 *        that completes later refuses NULL with WEIR_EINVAL.
 *
 * Returns WEIR_OK, WEIR_EINVAL (NULL store or out, a bad loop->size),
 * WEIR_ENOMEM. Thread-safe; the session is then used on the loop's
 * thread only.
 */
WEIR_API weir_status weir_store_session_new(weir_store *store, const weir_loop_adapter *loop,
                                            weir_store_session **out);

/**
 * weir_store_session_submit() - weir_store_submit() through a session.
 *
 * The callback runs on the session's loop: inline for a store with
 * WEIR_STORE_INLINE, otherwise later, from the loop (never from inside
 * this call). Same arguments and returns as weir_store_submit(). Call it
 * on the loop's thread only.
 */
WEIR_API weir_status weir_store_session_submit(weir_store_session *session, weir_op *ops, size_t n,
                                               int64_t now_us, unsigned flags, weir_store_cb cb,
                                               void *arg);

/** Free a session. Batches still in flight complete first, with
 *  WEIR_ECLOSED, before this returns. Call it on the loop's thread, while
 *  the loop still runs or before it is closed. NULL is a no-op. */
WEIR_API void weir_store_session_free(weir_store_session *session);

/**
 * weir_store_maintain() - the store's housekeeping: the memory store
 * removes keys back at rest (a bounded number per call, continuing where
 * the last call stopped); a networked store reconnects and moves its
 * circuit breakers on. Call it from one thread, about once a second.
 * NULL is a no-op.
 */
WEIR_API void weir_store_maintain(weir_store *store, int64_t now_us);

/**
 * weir_store_check_limit() - whether @store can decide @lim exactly.
 *
 * Returns WEIR_OK, or WEIR_ERANGE for a limit the store cannot hold (the
 * Redis store's script computes with doubles: a limit whose exact
 * quantities reach 2^53 is refused there, and its ops fail with
 * WEIR_ERANGE). The memory store takes every compiled limit. Load-time
 * checks use it so that such a rule is refused when the rules load, not
 * when traffic comes. Thread-safe.
 */
WEIR_API weir_status weir_store_check_limit(const weir_store *store, const weir_limit *lim);

/** Counters a store keeps. */
typedef struct weir_store_stats {
    uint64_t keys;        /* keys held now */
    uint64_t bytes;       /* bytes held now (tables, entries, keys, states) */
    uint64_t max_bytes;   /* the cap, 0 = none */
    uint64_t evictions;   /* keys removed under the cap while still active */
    uint64_t expirations; /* keys removed because they were back at rest */
} weir_store_stats;

/** Fill @out with the store's counters. Returns WEIR_OK, WEIR_EINVAL, or
 *  WEIR_EALGO for a store whose keys are held elsewhere (the Redis store:
 *  weir/redis.h has its own counters). Thread-safe; the numbers are a
 *  consistent-enough snapshot, each exact. */
WEIR_API weir_status weir_store_stats_get(weir_store *store, weir_store_stats *out);

/** Free a store and every key in it. Batches in flight complete first
 *  (with WEIR_ECLOSED for a networked store). NULL is a no-op. */
WEIR_API void weir_store_free(weir_store *store);

/* ------------------------------------------------------------------------ */
/* The memory store                                                         */

typedef struct weir_memstore_options {
    /** sizeof(weir_memstore_options). */
    size_t size;
    /** Memory cap in bytes for everything the store holds; 0 = no cap. When
     *  a new key would cross it, keys back at rest are removed first, then
     *  active keys (those under their limit before those over it). */
    uint64_t max_bytes;
    /** Number of shards (locks), a power of two 1 .. 1024; 0 = 64. */
    uint32_t shards;
    /** Entries examined for expiry per new key (incremental sweep);
     *  0 = default 4. */
    uint32_t sweep_step;
    /** Hash secret seed; 0 = random from the operating system. A fixed
     *  seed is for reproducible tests only: it makes hash flooding
     *  possible. */
    uint64_t seed;
} weir_memstore_options;

/**
 * weir_memstore_new() - create a sharded in-process store.
 *
 * @ctx:  its allocator is used for everything; must outlive the store.
 * @opts: may be NULL for defaults. Copied.
 *
 * Memory: a shard's table of 64 KB to 1 MB (a store of roughly 100k to 2M
 * keys with 64 shards) shares chunks of whole, 2 MB-aligned pages with
 * the other shards' tables of its size, advised for transparent huge pages
 * (madvise); a larger table is an allocation of its own that starts on a
 * 2 MB boundary, advised likewise (and, without max_bytes, rounded up to
 * whole 2 MB pages when that adds at most a sixteenth, all of it used as
 * buckets): a lookup then misses the TLB less. Each such allocation is
 * 2 MB longer than what it holds, to align it; that room is handed back
 * to the system (MADV_DONTNEED) unused and not counted, and a table's or
 * chunk's pages are handed back before it is freed. The chunks' empty
 * slots count in the stats' bytes. With max_bytes set, tables below 1 MB
 * are each an allocation of their own, as the cap is kept per shard.
 *
 * Returns WEIR_OK; WEIR_EINVAL (NULL ctx/out, bad opts->size, shards not a
 * power of two or too many); WEIR_ENOMEM; WEIR_EIO when no random seed
 * could be read. Thread-safe.
 */
WEIR_API weir_status weir_memstore_new(weir_ctx *ctx, const weir_memstore_options *opts,
                                       weir_store **out);

/**
 * weir_memstore_run() - the memory store's synchronous batch call.
 *
 * Same semantics as weir_store_submit() without the callback: when it
 * returns WEIR_OK every op's status and result are filled. Keys are hashed
 * and their buckets prefetched ahead of the decisions, so a batch costs less
 * per decision than single calls. Returns WEIR_EINVAL for a store that is
 * not a memory store or bad arguments. Thread-safe.
 */
WEIR_API weir_status weir_memstore_run(weir_store *store, weir_op *ops, size_t n, int64_t now_us,
                                       unsigned flags);

/**
 * weir_memstore_take() - one TAKE on the memory store, synchronously.
 *
 * Returns WEIR_OK with @res filled; WEIR_EINVAL (bad arguments, empty or
 * too long key, not a memory store); WEIR_ENOMEM or WEIR_ETOOBIG when the
 * key cannot be stored. Thread-safe.
 */
WEIR_API weir_status weir_memstore_take(weir_store *store, const void *key, size_t key_len,
                                        const weir_limit *lim, int64_t now_us, uint64_t hits,
                                        weir_result *res);

/**
 * weir_memstore_sweep() - remove up to @max_entries keys that are back at
 * rest at @now_us, continuing where the last sweep stopped. For a timer in a
 * long-running process; decisions also sweep a few entries as they go.
 * Returns the number removed (0 for a NULL or non-memory store).
 */
WEIR_API size_t weir_memstore_sweep(weir_store *store, int64_t now_us, size_t max_entries);

#ifdef __cplusplus
}
#endif

#endif /* WEIR_STORE_H */
