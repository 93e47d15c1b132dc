/*
 * cms.c - the count-min limiter (weir/cms.h): a fixed window per key,
 * counted in a sketch of depth x width counters shared by all keys.
 *
 * A counter is one 64-bit atomic: the window it counts (the low 32 bits
 * of the window's index, its "tag") above the count. A request of a key
 * hashes once (XXH3-128, seeded) to one counter a row and to one lock.
 * It reads the key's estimate, the smallest count of its counters
 * tagged with the current window (a counter of another window reads 0).
 * If that denies, it is done: counts only grow within a window, so any
 * later reading would deny too. Otherwise, under the lock, it reads the
 * estimate again and, if that admits, raises each counter to at least
 * estimate + hits (the conservative update), tagging it with the window.
 *
 * Invariant: for a key k, a window w and a row r, if k was admitted hits
 * in w, then k's counter of row r is tagged w and holds at least them,
 * or it is tagged with a later window and no request of k is admitted in
 * w any more. Counters only grow within a window and a tag never goes
 * back (a counter is written by compare-and-swap, and only over a count
 * of the same window or of one judged older, see below), so other keys
 * never lower k's counters; the admissions of k are decided one at a time
 * (its lock), each reading an estimate that holds every hit admitted
 * before it and raising every row past it. So no estimate under-counts.
 *
 * The latest window a request was counted in is kept (`latest`); a
 * request is decided in max(its own window, latest), and publishes its
 * window there before it writes a counter. A tag other than the window's
 * is older unless latest has moved past the window: a counter is loaded
 * with acquire order, so one tagged by a later window shows the later
 * latest too. A request that finds latest past its window while reading
 * starts again in the later window; one that finds it past its window
 * while raising leaves a counter it cannot judge as it is (its window is
 * over, and the next request of the key, after the lock, sees latest).
 * Tags are 32 bits: a counter untouched for a multiple of 2^32 windows
 * reads as the current window's, an over-count, never an under-count.
 */
#include "weir/cms.h"

#include <stdatomic.h>
#include <string.h>
#include <xxhash.h>

#include "core/context.h"
#include "core/spinlock.h"

#define LINE 64u
#define COUNT_MASK 0xffffffffu

__extension__ typedef unsigned __int128 u128;

/* A lock alone on its cache line, so that two keys' locks do not share one. */
typedef struct lock_line {
    weir__spinlock lock;
    char pad[LINE - sizeof(weir__spinlock)];
} lock_line;

struct weir_cms {
    const weir_ctx *ctx;
    uint64_t limit, seed;
    int64_t window_us;
    uint32_t width, depth;
    size_t bytes;
    lock_line *locks;
    _Atomic uint64_t *counters; /* row r is counters[r * width ..] */
    /* written once a window, read by every request: a line of its own */
    char before_[LINE];
    _Atomic int64_t latest;
    char after_[LINE - sizeof(int64_t)];
};

/* A key's place in the sketch. */
typedef struct slots {
    uint32_t lock;
    uint32_t at[WEIR_CMS_MAX_DEPTH]; /* the counter's index, row by row */
} slots;

static size_t round_line(size_t n)
{
    return (n + LINE - 1) & ~(size_t)(LINE - 1);
}

static size_t fixed_bytes(void)
{
    return round_line(sizeof(weir_cms)) + (size_t)WEIR_CMS_LOCKS * sizeof(lock_line);
}

/* The sketch's shape from @o: WEIR_OK and *width, *depth, or the error. */
static weir_status shape(const weir_cms_options *o, uint32_t *width, uint32_t *depth)
{
    uint32_t d = o->depth ? o->depth : WEIR_CMS_DEFAULT_DEPTH;
    if (d > WEIR_CMS_MAX_DEPTH)
        return WEIR_ERANGE;
    if (o->width) {
        if (o->width > WEIR_CMS_MAX_WIDTH)
            return WEIR_ERANGE;
        if ((size_t)o->width * d * WEIR_CMS_COUNTER_BYTES > WEIR_CMS_MAX_BYTES - fixed_bytes())
            return WEIR_ERANGE;
        *width = o->width;
    } else {
        size_t budget = o->memory_bytes ? o->memory_bytes : WEIR_CMS_DEFAULT_BYTES;
        if (budget > WEIR_CMS_MAX_BYTES ||
            budget < fixed_bytes() + (size_t)d * WEIR_CMS_COUNTER_BYTES)
            return WEIR_ERANGE;
        size_t w = (budget - fixed_bytes()) / ((size_t)d * WEIR_CMS_COUNTER_BYTES);
        *width = w > WEIR_CMS_MAX_WIDTH ? WEIR_CMS_MAX_WIDTH : (uint32_t)w;
    }
    *depth = d;
    return WEIR_OK;
}

weir_status weir_cms_new(const weir_ctx *ctx, const weir_cms_options *opts, weir_cms **out)
{
    if (!ctx || !opts || !out || opts->size < sizeof(*opts))
        return WEIR_EINVAL;
    if (opts->window_us <= 0 || (opts->width && opts->memory_bytes))
        return WEIR_EINVAL;
    if (opts->limit > WEIR_CMS_MAX_LIMIT || opts->window_us > WEIR_MAX_WINDOW_US)
        return WEIR_ERANGE;
    uint32_t width, depth;
    weir_status st = shape(opts, &width, &depth);
    if (st != WEIR_OK)
        return st;
    uint64_t seed = opts->seed;
    if (!seed && (st = weir__random(&seed, sizeof(seed))) != WEIR_OK)
        return st;

    size_t at_locks = round_line(sizeof(weir_cms));
    size_t at_counters = fixed_bytes();
    size_t bytes = at_counters + (size_t)width * depth * WEIR_CMS_COUNTER_BYTES;
    /* calloc's zeros are valid counters: a count of 0 in window 0, and
     * unlocked locks */
    unsigned char *block = weir__calloc(ctx, 1, bytes);
    if (!block)
        return WEIR_ENOMEM;
    weir_cms *c = (weir_cms *)(void *)block;
    c->ctx = ctx;
    c->limit = opts->limit;
    c->seed = seed;
    c->window_us = opts->window_us;
    c->width = width;
    c->depth = depth;
    c->bytes = bytes;
    c->locks = (lock_line *)(void *)(block + at_locks);
    c->counters = (_Atomic uint64_t *)(void *)(block + at_counters);
    atomic_init(&c->latest, 0);
    *out = c;
    return WEIR_OK;
}

void weir_cms_free(weir_cms *c)
{
    if (c)
        weir__free(c->ctx, c);
}

/* The key's lock and counters: one 128-bit hash, the rows' indexes
 * derived from its halves (Kirsch and Mitzenmacher) and reduced to the
 * width by a multiplication (any width, no modulo bias to speak of). */
static void place(const weir_cms *c, const void *key, size_t len, slots *s)
{
    XXH128_hash_t h = XXH3_128bits_withSeed(key, len, c->seed);
    uint64_t step = h.high64 | 1u;
    uint64_t x = h.low64;
    for (uint32_t r = 0; r < c->depth; r++, x += step) {
        uint64_t i = (uint64_t)(((u128)x * c->width) >> 64);
        s->at[r] = (uint32_t)i;
        __builtin_prefetch(&c->counters[(size_t)r * c->width + i]);
    }
    s->lock = (uint32_t)(h.high64 >> 40) % WEIR_CMS_LOCKS;
}

static _Atomic uint64_t *counter(const weir_cms *c, const slots *s, uint32_t r)
{
    return &c->counters[(size_t)r * c->width + s->at[r]];
}

static int64_t latest(const weir_cms *c)
{
    return atomic_load_explicit(&c->latest, memory_order_acquire);
}

/* The window of @now_us, or the latest one decided in if that is later. */
static int64_t window_of(const weir_cms *c, int64_t now_us)
{
    int64_t w = now_us / c->window_us;
    int64_t l = latest(c);
    return w > l ? w : l;
}

/* Make @w the latest window, unless a later one is. */
static void publish(weir_cms *c, int64_t w)
{
    int64_t l = atomic_load_explicit(&c->latest, memory_order_relaxed);
    while (l < w && !atomic_compare_exchange_weak_explicit(&c->latest, &l, w, memory_order_acq_rel,
                                                           memory_order_relaxed)) {
    }
}

/* The key's estimate in window *w, moving *w to the latest window when
 * that has passed it (see the file's comment). */
static uint64_t estimate(const weir_cms *c, const slots *s, int64_t *w)
{
    for (;;) {
        uint32_t tag = (uint32_t)*w;
        uint64_t est = COUNT_MASK;
        bool again = false;
        for (uint32_t r = 0; r < c->depth && !again; r++) {
            uint64_t v = atomic_load_explicit(counter(c, s, r), memory_order_acquire);
            if ((uint32_t)(v >> 32) == tag) {
                if ((v & COUNT_MASK) < est)
                    est = v & COUNT_MASK;
                continue;
            }
            int64_t l = latest(c);
            if (l > *w) {
                *w = l;
                again = true;
            } else {
                est = 0; /* an older window's counter */
            }
        }
        if (!again)
            return est;
    }
}

/* Raise the key's counters to at least @target in window @w. */
static void raise_to(weir_cms *c, const slots *s, int64_t w, uint64_t target)
{
    uint32_t tag = (uint32_t)w;
    for (uint32_t r = 0; r < c->depth; r++) {
        _Atomic uint64_t *p = counter(c, s, r);
        uint64_t v = atomic_load_explicit(p, memory_order_acquire);
        for (;;) {
            uint64_t n;
            if ((uint32_t)(v >> 32) == tag) {
                if ((v & COUNT_MASK) >= target)
                    break;
                n = (v & ~(uint64_t)COUNT_MASK) | target;
            } else if (latest(c) > w) {
                break; /* maybe a later window's: w is over, leave it */
            } else {
                n = (uint64_t)tag << 32 | target;
            }
            if (atomic_compare_exchange_weak_explicit(p, &v, n, memory_order_acq_rel,
                                                      memory_order_acquire))
                break;
        }
    }
}

/* The verdict of a fixed window of c->limit on a count of @est (see
 * weir_cms_take()). */
static void verdict(const weir_cms *c, int64_t w, int64_t now_us, uint64_t est, uint64_t hits,
                    weir_result *res)
{
    int64_t end;
    if (__builtin_add_overflow(w, 1, &end) || __builtin_mul_overflow(end, c->window_us, &end))
        end = INT64_MAX;
    uint64_t count = est < c->limit ? est : c->limit;
    uint64_t need = hits ? hits : 1;
    memset(res, 0, sizeof(*res));
    res->limit = c->limit;
    res->allowed = need <= c->limit - count;
    if (res->allowed)
        count += hits;
    else
        res->retry_after_us = need > c->limit ? WEIR_NEVER : end - now_us;
    res->remaining = c->limit - count;
    res->reset_after_us = count ? end - now_us : 0;
}

static weir_status check_key(const void *c, const void *key, size_t len, const void *res)
{
    if (!c || !res || (!key && len))
        return WEIR_EINVAL;
    return len > WEIR_CMS_MAX_KEY_BYTES ? WEIR_ERANGE : WEIR_OK;
}

/* The verdict on the counters as they are, without the lock. */
static void judge(const weir_cms *c, const slots *s, int64_t now_us, uint64_t hits,
                  weir_result *res)
{
    int64_t w = window_of(c, now_us);
    uint64_t est = estimate(c, s, &w);
    verdict(c, w, now_us, est, hits, res);
}

weir_status weir_cms_check(const weir_cms *c, const void *key, size_t key_len, int64_t now_us,
                           uint64_t hits, weir_result *res)
{
    weir_status st = check_key(c, key, key_len, res);
    if (st != WEIR_OK)
        return st;
    slots s;
    place(c, key, key_len, &s);
    judge(c, &s, now_us < 0 ? 0 : now_us, hits, res);
    return WEIR_OK;
}

weir_status weir_cms_take(weir_cms *c, const void *key, size_t key_len, int64_t now_us,
                          uint64_t hits, weir_result *res)
{
    weir_status st = check_key(c, key, key_len, res);
    if (st != WEIR_OK)
        return st;
    if (now_us < 0)
        now_us = 0;
    slots s;
    place(c, key, key_len, &s);
    /* Counts only grow within a window, so an estimate read without the
     * lock that denies is a denial: a key flooding past its limit (a
     * peek, a cost no window admits, a ban) takes no lock and writes
     * nothing. */
    judge(c, &s, now_us, hits, res);
    if (hits == 0 || !res->allowed)
        return WEIR_OK;
    weir__spinlock *lock = &c->locks[s.lock].lock;
    weir__spin_lock(lock);
    int64_t w = window_of(c, now_us);
    publish(c, w);
    uint64_t est = estimate(c, &s, &w);
    verdict(c, w, now_us, est, hits, res);
    if (res->allowed)
        raise_to(c, &s, w, est + hits);
    weir__spin_unlock(lock);
    return WEIR_OK;
}

weir_status weir_cms_estimate(const weir_cms *c, const void *key, size_t key_len, int64_t now_us,
                              uint64_t *out)
{
    weir_status st = check_key(c, key, key_len, out);
    if (st != WEIR_OK)
        return st;
    slots s;
    place(c, key, key_len, &s);
    int64_t w = window_of(c, now_us < 0 ? 0 : now_us);
    *out = estimate(c, &s, &w);
    return WEIR_OK;
}

void weir_cms_stats_get(const weir_cms *c, weir_cms_stats *out)
{
    if (!c || !out)
        return;
    out->limit = c->limit;
    out->window_us = c->window_us;
    out->width = c->width;
    out->depth = c->depth;
    out->bytes = c->bytes;
    out->window = latest(c);
}
