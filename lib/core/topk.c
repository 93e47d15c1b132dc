/*
 * topk.c - Space-Saving in fixed memory (weir/topk.h).
 *
 * One allocation holds the counters (dense: slots 0 .. used-1), a
 * min-heap of their slots by count, an open-addressing index from a key
 * to its slot (linear probing, at most half full, seeded so that keys
 * cannot be chosen to collide), and the key bytes, max_key_bytes a slot.
 *
 * Invariants, for the stream of total weight N the sketch summarises:
 *   (1) a counted key's true count is within [count - error, count];
 *   (2) a key not counted has at most `floor`;
 *   (3) the counts add up to at most N;
 *   (4) every count is at least floor, and every error at most floor;
 *   (5) floor is 0 while some counter is free.
 * (3) and (4) give floor <= N / capacity once all are in use. An add
 * keeps them as Space-Saving always has (the smallest count, which is the
 * floor's new value, goes to the new key as its error). A merge keeps
 * them too: any capacity + 1 keys' merged counts add up to at most
 * (N1 + floor1) + (N2 + floor2) <= N (capacity + 1) / capacity, so the
 * largest count left out, the new floor, is at most N / capacity.
 */
#include "weir/topk.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/context.h"

#define HASHED 0x01u /* the key is a prefix and a digest */
#define MARKED 0x02u /* merge: met in the other sketch */

typedef struct slot {
    uint64_t count, error, hash;
    uint32_t heap; /* position in the heap */
    uint16_t len;
    uint8_t flags;
} slot;

struct weir_topk {
    const weir_ctx *ctx;
    uint32_t capacity, key_bytes, used, mask;
    uint64_t seed, total, floor;
    size_t bytes;
    slot *s;
    uint32_t *heap;  /* slots, smallest count first */
    uint32_t *index; /* mask + 1 entries: a slot + 1, or 0 */
    unsigned char *keys;
};

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    uint64_t r;
    return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

static size_t round_up(size_t n)
{
    return (n + 15u) & ~(size_t)15u;
}

weir_status weir_topk_new(const weir_ctx *ctx, const weir_topk_options *opts, weir_topk **out)
{
    if (!ctx || !out || (opts && opts->size < sizeof(*opts)))
        return WEIR_EINVAL;
    uint32_t cap = opts && opts->capacity ? opts->capacity : WEIR_TOPK_DEFAULT_CAPACITY;
    uint32_t kb = opts && opts->max_key_bytes ? opts->max_key_bytes : WEIR_TOPK_DEFAULT_KEY_BYTES;
    if (cap > WEIR_TOPK_MAX_CAPACITY || kb < WEIR_TOPK_MIN_KEY_BYTES ||
        kb > WEIR_TOPK_MAX_KEY_BYTES)
        return WEIR_EINVAL;
    size_t index = 2;
    while (index < 2 * (size_t)cap)
        index *= 2;
    size_t at_s = round_up(sizeof(weir_topk));
    size_t at_heap = at_s + round_up(cap * sizeof(slot));
    size_t at_index = at_heap + round_up(cap * sizeof(uint32_t));
    size_t at_keys = at_index + round_up(index * sizeof(uint32_t));
    size_t bytes = at_keys + (size_t)cap * kb;
    unsigned char *block = weir__calloc(ctx, 1, bytes);
    if (!block)
        return WEIR_ENOMEM;
    weir_topk *t = (weir_topk *)(void *)block;
    weir_status st = weir__random(&t->seed, sizeof(t->seed));
    if (st != WEIR_OK) {
        weir__free(ctx, block);
        return st;
    }
    t->ctx = ctx;
    t->capacity = cap;
    t->key_bytes = kb;
    t->mask = (uint32_t)(index - 1);
    t->bytes = bytes;
    t->s = (slot *)(void *)(block + at_s);
    t->heap = (uint32_t *)(void *)(block + at_heap);
    t->index = (uint32_t *)(void *)(block + at_index);
    t->keys = block + at_keys;
    *out = t;
    return WEIR_OK;
}

void weir_topk_free(weir_topk *t)
{
    if (t)
        weir__free(t->ctx, t);
}

void weir_topk_clear(weir_topk *t)
{
    memset(t->index, 0, ((size_t)t->mask + 1) * sizeof(*t->index));
    t->used = 0;
    t->total = 0;
    t->floor = 0;
}

static unsigned char *key_of(const weir_topk *t, uint32_t i)
{
    return t->keys + (size_t)i * t->key_bytes;
}

/* ------------------------------------------------------------ the heap */

static void heap_put(weir_topk *t, uint32_t pos, uint32_t i)
{
    t->heap[pos] = i;
    t->s[i].heap = pos;
}

static void sift_up(weir_topk *t, uint32_t pos)
{
    uint32_t i = t->heap[pos];
    while (pos > 0) {
        uint32_t parent = (pos - 1) / 2;
        if (t->s[t->heap[parent]].count <= t->s[i].count)
            break;
        heap_put(t, pos, t->heap[parent]);
        pos = parent;
    }
    heap_put(t, pos, i);
}

static void sift_down(weir_topk *t, uint32_t pos)
{
    uint32_t i = t->heap[pos];
    uint64_t c = t->s[i].count;
    for (;;) {
        uint32_t child = 2 * pos + 1;
        if (child >= t->used)
            break;
        if (child + 1 < t->used && t->s[t->heap[child + 1]].count < t->s[t->heap[child]].count)
            child++;
        if (t->s[t->heap[child]].count >= c)
            break;
        heap_put(t, pos, t->heap[child]);
        pos = child;
    }
    heap_put(t, pos, i);
}

/* ----------------------------------------------------------- the index */

static uint64_t hash_of(const weir_topk *t, const void *key, size_t len, unsigned hashed)
{
    return XXH3_64bits_withSeed(key, len, t->seed) ^ hashed;
}

/* The slot of a key in its stored form, or UINT32_MAX. */
static uint32_t find(const weir_topk *t, uint64_t h, const void *key, size_t len, unsigned hashed)
{
    for (uint32_t j = (uint32_t)h & t->mask;; j = (j + 1) & t->mask) {
        uint32_t v = t->index[j];
        if (!v)
            return UINT32_MAX;
        const slot *e = &t->s[v - 1];
        if (e->hash == h && e->len == len && (e->flags & HASHED) == hashed &&
            memcmp(key_of(t, v - 1), key, len) == 0)
            return v - 1;
    }
}

static void index_insert(weir_topk *t, uint32_t i)
{
    uint32_t j = (uint32_t)t->s[i].hash & t->mask;
    while (t->index[j])
        j = (j + 1) & t->mask;
    t->index[j] = i + 1;
}

/* Removes slot @i from the index, shifting back the entries after it
 * that would no longer be found. */
static void index_remove(weir_topk *t, uint32_t i)
{
    uint32_t j = (uint32_t)t->s[i].hash & t->mask;
    while (t->index[j] != i + 1)
        j = (j + 1) & t->mask;
    for (uint32_t k = (j + 1) & t->mask; t->index[k]; k = (k + 1) & t->mask) {
        uint32_t home = (uint32_t)t->s[t->index[k] - 1].hash & t->mask;
        /* the entry at k may move to j when its home is not in (j, k] */
        if (((k - home) & t->mask) >= ((k - j) & t->mask)) {
            t->index[j] = t->index[k];
            j = k;
        }
    }
    t->index[j] = 0;
}

/* Slot @i takes a key (its stored form) with @count and @error. */
static void fill(weir_topk *t, uint32_t i, uint64_t h, const void *key, size_t len, unsigned hashed,
                 uint64_t count, uint64_t error)
{
    slot *e = &t->s[i];
    e->count = count;
    e->error = error;
    e->hash = h;
    e->len = (uint16_t)len;
    e->flags = (uint8_t)hashed;
    if (len)
        memcpy(key_of(t, i), key, len);
    index_insert(t, i);
}

/* A new key with @count and @error: a free slot, else the smallest
 * count's, which then bounds every key not counted. */
static void take(weir_topk *t, uint64_t h, const void *key, size_t len, unsigned hashed,
                 uint64_t count, uint64_t error)
{
    if (t->used < t->capacity) {
        uint32_t i = t->used++;
        fill(t, i, h, key, len, hashed, count, error);
        heap_put(t, i, i);
        sift_up(t, i);
        return;
    }
    uint32_t i = t->heap[0];
    index_remove(t, i);
    fill(t, i, h, key, len, hashed, count, error);
    sift_down(t, 0);
}

/* ----------------------------------------------------------- the verbs */

/* The stored form of a key longer than the cap: its beginning and the
 * digest of the whole, into @buf (t->key_bytes). */
static void shorten(const weir_topk *t, const void *key, size_t len, unsigned char *buf)
{
    size_t prefix = t->key_bytes - WEIR_TOPK_DIGEST_BYTES;
    memcpy(buf, key, prefix);
    XXH128_canonical_t d;
    XXH128_canonicalFromHash(&d, XXH3_128bits(key, len));
    memcpy(buf + prefix, d.digest, WEIR_TOPK_DIGEST_BYTES);
}

void weir_topk_add(weir_topk *t, const void *key, size_t len, uint64_t weight)
{
    if (weight == 0)
        return;
    if (!len)
        key = ""; /* memcmp() and XXH3 take no NULL */
    unsigned char buf[WEIR_TOPK_MAX_KEY_BYTES];
    unsigned hashed = 0;
    if (len > t->key_bytes) {
        shorten(t, key, len, buf);
        key = buf;
        len = t->key_bytes;
        hashed = HASHED;
    }
    t->total = sat_add(t->total, weight);
    uint64_t h = hash_of(t, key, len, hashed);
    uint32_t i = find(t, h, key, len, hashed);
    if (i != UINT32_MAX) {
        t->s[i].count = sat_add(t->s[i].count, weight);
        sift_down(t, t->s[i].heap);
        return;
    }
    if (t->used == t->capacity) /* by (4), the smallest count is >= floor */
        t->floor = t->s[t->heap[0]].count;
    take(t, h, key, len, hashed, sat_add(t->floor, weight), t->floor);
}

weir_status weir_topk_merge(weir_topk *dst, const weir_topk *src)
{
    if (!dst || !src || dst == src || dst->capacity != src->capacity ||
        dst->key_bytes != src->key_bytes)
        return WEIR_EINVAL;
    uint64_t fd = dst->floor, fs = src->floor, dropped = 0;
    /* keys in both: the sums */
    for (uint32_t j = 0; j < src->used; j++) {
        const slot *e = &src->s[j];
        unsigned hashed = e->flags & HASHED;
        const unsigned char *key = key_of(src, j);
        uint32_t i = find(dst, hash_of(dst, key, e->len, hashed), key, e->len, hashed);
        if (i == UINT32_MAX)
            continue;
        dst->s[i].count = sat_add(dst->s[i].count, e->count);
        dst->s[i].error = sat_add(dst->s[i].error, e->error);
        dst->s[i].flags |= MARKED;
    }
    /* keys of dst alone: plus what src may have counted of them */
    for (uint32_t i = 0; i < dst->used; i++) {
        slot *e = &dst->s[i];
        if (e->flags & MARKED) {
            e->flags &= (uint8_t)~MARKED;
            continue;
        }
        e->count = sat_add(e->count, fs);
        e->error = sat_add(e->error, fs);
    }
    for (uint32_t pos = dst->used / 2; pos-- > 0;)
        sift_down(dst, pos);
    /* keys of src alone: plus what dst may have counted of them, each
     * kept if it beats the smallest count. A key of both that was let go
     * meanwhile is not found again and comes back here with less than its
     * sum, which was no more than the smallest count then: it stays out. */
    for (uint32_t j = 0; j < src->used; j++) {
        const slot *e = &src->s[j];
        unsigned hashed = e->flags & HASHED;
        const unsigned char *key = key_of(src, j);
        uint64_t h = hash_of(dst, key, e->len, hashed);
        if (find(dst, h, key, e->len, hashed) != UINT32_MAX)
            continue;
        uint64_t count = sat_add(e->count, fd), error = sat_add(e->error, fd);
        if (dst->used == dst->capacity) {
            uint64_t least = dst->s[dst->heap[0]].count;
            if (count <= least) {
                dropped = count > dropped ? count : dropped;
                continue;
            }
            dropped = least > dropped ? least : dropped;
        }
        take(dst, h, key, e->len, hashed, count, error);
    }
    uint64_t floors = sat_add(fd, fs);
    dst->floor = floors > dropped ? floors : dropped;
    dst->total = sat_add(dst->total, src->total);
    return WEIR_OK;
}

/* Whether @a lists before @b: a larger count, a smaller error, then the
 * key's bytes. */
static bool before(const weir_topk_entry *a, const weir_topk_entry *b)
{
    if (a->count != b->count)
        return a->count > b->count;
    if (a->error != b->error)
        return a->error < b->error;
    size_t n = a->key_len < b->key_len ? a->key_len : b->key_len;
    int c = n ? memcmp(a->key, b->key, n) : 0;
    if (c || a->key_len != b->key_len)
        return c ? c < 0 : a->key_len < b->key_len;
    return !a->hashed && b->hashed;
}

/* @out[0 .. n) as a heap whose root lists last; sifts @pos down. */
static void out_sift(weir_topk_entry *out, size_t n, size_t pos)
{
    weir_topk_entry x = out[pos];
    for (;;) {
        size_t child = 2 * pos + 1;
        if (child >= n)
            break;
        if (child + 1 < n && before(&out[child], &out[child + 1]))
            child++;
        if (!before(&x, &out[child]))
            break;
        out[pos] = out[child];
        pos = child;
    }
    out[pos] = x;
}

size_t weir_topk_top(const weir_topk *t, weir_topk_entry *out, size_t n)
{
    size_t k = 0;
    for (uint32_t i = 0; i < t->used && n; i++) {
        const slot *e = &t->s[i];
        weir_topk_entry x = {key_of(t, i), e->len, (e->flags & HASHED) != 0, e->count, e->error};
        if (k < n) {
            /* sift up: the root is the entry that lists last */
            size_t pos = k++;
            while (pos > 0 && before(&out[(pos - 1) / 2], &x)) {
                out[pos] = out[(pos - 1) / 2];
                pos = (pos - 1) / 2;
            }
            out[pos] = x;
        } else if (before(&x, &out[0])) {
            out[0] = x;
            out_sift(out, k, 0);
        }
    }
    /* heapsort: the last-listing entry goes to the end each time */
    for (size_t m = k; m > 1; m--) {
        weir_topk_entry last = out[0];
        out[0] = out[m - 1];
        out[m - 1] = last;
        out_sift(out, m - 1, 0);
    }
    return k;
}

void weir_topk_stats_get(const weir_topk *t, weir_topk_stats *out)
{
    out->capacity = t->capacity;
    out->max_key_bytes = t->key_bytes;
    out->used = t->used;
    out->bytes = t->bytes;
    out->total = t->total;
    out->floor = t->floor;
}
