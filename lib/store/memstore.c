/*
 * memstore.c - the in-process store: a sharded hash table of fixed-size
 * entries, each holding one key's algorithm state.
 *
 * Layout. A key hashes (XXH3 with a random per-store secret, so nobody can
 * aim keys at one chain) to a shard, chosen by the top bits, and to a chain
 * in that shard, chosen by the low 32 bits. A shard is a bucket array of
 * 32-bit entry indices and an array of 48-byte entries allocated in chunks,
 * with a free list; keys up to 16 bytes and the 16-byte states of the
 * fixed-size algorithms live inside the entry, longer keys and larger states
 * out of line.
 *
 * Expiry. Every decision tells how long until the key is back at rest (a
 * fresh state would decide the same); the entry keeps that time in seconds,
 * rounded up. An entry at rest is removed by the incremental sweep that runs
 * before each insert, by weir_memstore_sweep(), and under the memory cap.
 *
 * The cap. Each shard may hold max_bytes / shards. Before an insert that
 * would cross it, the shard first removes every key at rest (a full sweep,
 * done at most once per second of clock time because the shard remembers a
 * lower bound on the earliest rest time), and only if none is at rest evicts
 * active keys, sampled, preferring keys under their limit to keys over it.
 *
 * Invariants (per shard, under its lock): every live entry is on exactly
 * one chain, the one of its hash; free entries have algo == 0 and are on
 * the free list; count = live entries; bytes = everything allocated for the
 * shard; next_rest_s <= the rest time of every live entry; the shard's time
 * never goes backwards (last_now_us).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "algo/algo.h"
#include "core/context.h"
#include "store/spinlock.h"
#include "store/store.h"

#define CHUNK_SHIFT 8u
#define CHUNK_ENTRIES (1u << CHUNK_SHIFT)
#define INLINE_KEY 16u
#define SECRET_BYTES 192u
/* What the allocator spends beyond the bytes asked for (glibc: 8-16). */
#define ALLOC_OVERHEAD 16u
#define MIN_BUCKETS 16u
#define EVICT_SAMPLE 8u
#define EVICT_SCAN 4096u
#define MAX_ATOMIC_OPS 64u
#define DEFAULT_SHARDS 64u
#define MAX_SHARDS 1024u
#define DEFAULT_SWEEP 4u
#define NO_REST UINT32_MAX
#define US_PER_S 1000000

enum { F_OVER = 1, F_BLOB = 2, F_HEAPKEY = 4 };

typedef struct entry {
    uint32_t hash;   /* low 32 bits of the key's hash */
    uint32_t next;   /* chain or free-list link: index + 1, 0 ends */
    uint32_t rest_s; /* second (rounded up) when the key is back at rest */
    uint16_t klen;
    uint8_t algo; /* the state's algorithm; 0 marks a free entry */
    uint8_t flags;
    union {
        int64_t align;
        unsigned char b[WEIR_STATE_FIXED_BYTES];
        struct {
            void *ptr;
            uint32_t bytes;
        } blob;
    } st;
    union {
        char inl[INLINE_KEY];
        char *ptr;
    } key;
} entry;

_Static_assert(sizeof(entry) == 48, "an entry is 48 bytes");

typedef struct shard {
    _Alignas(64) weir__spinlock lock;
    uint32_t *buckets; /* written under the lock, read relaxed for prefetch */
    uint32_t mask;
    uint32_t count;
    entry **chunks;
    uint32_t nchunks;
    uint32_t chunks_cap;
    uint32_t used; /* entries ever handed out (high-water index) */
    uint32_t free_head;
    uint32_t cursor;
    uint32_t next_rest_s;
    int64_t last_now_us;
    uint64_t bytes;
    uint64_t evictions;
    uint64_t expirations;
} shard;

typedef struct memstore {
    struct weir_store base;
    uint32_t nshards;
    uint32_t shard_bits;
    uint32_t sweep_step;
    uint64_t max_bytes;
    uint64_t shard_cap;
    _Atomic uint32_t sweep_shard;
    void *shards_raw;
    shard *shards;
    unsigned char secret[SECRET_BYTES];
} memstore;

/* A fresh state for decisions on keys that do not exist: zero is fresh for
 * every algorithm, and no algorithm reads more than this of a fresh state
 * (the largest is the 1024-sub-window counter). */
static const union {
    int64_t align;
    unsigned char b[8 + 4 * (WEIR_MAX_SUB_WINDOWS + 1) + 8];
} zero_state;

/* ------------------------------------------------------------------ helpers */

static entry *entry_at(const shard *sh, uint32_t idx)
{
    return &sh->chunks[idx >> CHUNK_SHIFT][idx & (CHUNK_ENTRIES - 1)];
}

static const char *entry_key(const entry *e)
{
    return (e->flags & F_HEAPKEY) ? e->key.ptr : e->key.inl;
}

static void *entry_state(entry *e)
{
    return (e->flags & F_BLOB) ? e->st.blob.ptr : e->st.b;
}

static uint64_t heap_cost(size_t bytes)
{
    return ((bytes + 15u) & ~(uint64_t)15u) + ALLOC_OVERHEAD;
}

static bool needs_blob(const weir_limit *lim)
{
    return lim->state_bytes > WEIR_STATE_FIXED_BYTES;
}

static uint64_t extra_bytes(size_t klen, const weir_limit *lim)
{
    uint64_t b = 0;
    if (klen > INLINE_KEY)
        b += heap_cost(klen);
    if (needs_blob(lim))
        b += heap_cost(lim->state_bytes);
    return b;
}

static uint32_t seconds_floor(int64_t us)
{
    if (us <= 0)
        return 0;
    int64_t s = us / US_PER_S;
    return s >= (int64_t)NO_REST ? NO_REST - 1 : (uint32_t)s;
}

static uint32_t seconds_ceil(int64_t us)
{
    if (us <= 0)
        return 0;
    int64_t s = us / US_PER_S + (us % US_PER_S != 0);
    return s >= (int64_t)NO_REST ? NO_REST - 1 : (uint32_t)s;
}

static uint64_t hash_key(const memstore *ms, const void *key, size_t len)
{
    return XXH3_64bits_withSecret(key, len, ms->secret, SECRET_BYTES);
}

static shard *shard_of(memstore *ms, uint64_t h)
{
    return ms->shard_bits ? &ms->shards[h >> (64u - ms->shard_bits)] : &ms->shards[0];
}

static bool is_mem(const weir_store *s)
{
    return s && s->kind == WEIR__STORE_MEMORY;
}

static uint32_t find(const shard *sh, uint32_t h32, const void *key, size_t len, uint32_t *prev)
{
    uint32_t p = 0;
    for (uint32_t i = sh->buckets[h32 & sh->mask]; i; i = entry_at(sh, i - 1)->next) {
        const entry *e = entry_at(sh, i - 1);
        if (e->hash == h32 && e->klen == len && memcmp(entry_key(e), key, len) == 0) {
            if (prev)
                *prev = p;
            return i;
        }
        p = i;
    }
    return 0;
}

/* ------------------------------------------------------------------ removal */

static void unlink_entry(shard *sh, uint32_t ref)
{
    entry *e = entry_at(sh, ref - 1);
    uint32_t *link = &sh->buckets[e->hash & sh->mask];
    while (*link != ref)
        link = &entry_at(sh, *link - 1)->next;
    *link = e->next;
}

static void free_state(memstore *ms, shard *sh, entry *e)
{
    if (e->flags & F_BLOB) {
        weir__free(ms->base.ctx, e->st.blob.ptr);
        sh->bytes -= heap_cost(e->st.blob.bytes);
        e->flags &= (uint8_t)~F_BLOB;
    }
}

static void remove_entry(memstore *ms, shard *sh, uint32_t ref)
{
    entry *e = entry_at(sh, ref - 1);
    unlink_entry(sh, ref);
    free_state(ms, sh, e);
    if (e->flags & F_HEAPKEY) {
        weir__free(ms->base.ctx, e->key.ptr);
        sh->bytes -= heap_cost(e->klen);
    }
    memset(e, 0, sizeof(*e));
    e->next = sh->free_head;
    sh->free_head = ref;
    sh->count--;
}

static bool live_at_rest(const entry *e, uint32_t now_s)
{
    return e->algo != 0 && e->rest_s <= now_s;
}

/* Examine up to `steps` entries from the cursor; remove those at rest. */
static size_t sweep_steps(memstore *ms, shard *sh, uint32_t now_s, uint32_t steps)
{
    size_t removed = 0;
    if (sh->used == 0)
        return 0;
    for (uint32_t k = 0; k < steps; k++) {
        if (sh->cursor >= sh->used)
            sh->cursor = 0;
        uint32_t ref = ++sh->cursor;
        if (live_at_rest(entry_at(sh, ref - 1), now_s)) {
            remove_entry(ms, sh, ref);
            sh->expirations++;
            removed++;
        }
    }
    return removed;
}

/* Remove every key at rest and make next_rest_s exact. */
static size_t sweep_all(memstore *ms, shard *sh, uint32_t now_s)
{
    size_t removed = 0;
    uint32_t next = NO_REST;
    for (uint32_t ref = 1; ref <= sh->used; ref++) {
        entry *e = entry_at(sh, ref - 1);
        if (e->algo == 0)
            continue;
        if (e->rest_s <= now_s) {
            remove_entry(ms, sh, ref);
            sh->expirations++;
            removed++;
        } else if (e->rest_s < next) {
            next = e->rest_s;
        }
    }
    sh->next_rest_s = next;
    return removed;
}

/* Evict one active key: of a sample, the one under its limit that comes to
 * rest first. Entries are sampled in slot order from the cursor, so a run of
 * over-limit keys would fill a sample: the scan goes on past EVICT_SAMPLE
 * (up to EVICT_SCAN) until it has seen a key under its limit, and takes an
 * over-limit key only when none turns up. */
static void evict_one(memstore *ms, shard *sh)
{
    uint32_t best = 0, seen = 0;
    const entry *b = NULL;
    for (uint32_t k = 0; k < sh->used && k < EVICT_SCAN; k++) {
        if (seen >= EVICT_SAMPLE && b && !(b->flags & F_OVER))
            break;
        if (sh->cursor >= sh->used)
            sh->cursor = 0;
        uint32_t ref = ++sh->cursor;
        const entry *e = entry_at(sh, ref - 1);
        if (e->algo == 0)
            continue;
        seen++;
        bool better = !b || ((e->flags & F_OVER) < (b->flags & F_OVER)) ||
                      ((e->flags & F_OVER) == (b->flags & F_OVER) && e->rest_s < b->rest_s);
        if (better) {
            best = ref;
            b = e;
        }
    }
    if (best) {
        remove_entry(ms, sh, best);
        sh->evictions++;
    }
}

/* ------------------------------------------------------------------ growth */

/* Bytes the next insert allocates for its slot: nothing while a slot is
 * free, else a new chunk (and a larger chunk table when that is full). */
static uint64_t slot_cost(const shard *sh)
{
    if (sh->free_head || sh->used < sh->nchunks * CHUNK_ENTRIES)
        return 0;
    uint64_t table = 0;
    if (sh->nchunks == sh->chunks_cap)
        table = (sh->chunks_cap ? sh->chunks_cap : 4) * sizeof(entry *);
    return CHUNK_ENTRIES * sizeof(entry) + ALLOC_OVERHEAD + table;
}

/* Free memory until an insert needing `extra` bytes fits under the cap. */
static weir_status make_room(memstore *ms, shard *sh, uint32_t now_s, uint64_t extra)
{
    if (!ms->shard_cap)
        return WEIR_OK;
    for (;;) {
        if (sh->bytes + extra + slot_cost(sh) <= ms->shard_cap)
            return WEIR_OK;
        if (sh->count == 0)
            return WEIR_ETOOBIG;
        if (now_s >= sh->next_rest_s && sweep_all(ms, sh, now_s) > 0)
            continue;
        evict_one(ms, sh);
    }
}

static weir_status grow_chunks(memstore *ms, shard *sh)
{
    if (sh->nchunks == sh->chunks_cap) {
        uint32_t cap = sh->chunks_cap ? sh->chunks_cap * 2 : 4;
        entry **c = weir__realloc(ms->base.ctx, sh->chunks, cap * sizeof(*c));
        if (!c)
            return WEIR_ENOMEM;
        sh->bytes += (uint64_t)(cap - sh->chunks_cap) * sizeof(*c);
        sh->chunks = c;
        sh->chunks_cap = cap;
    }
    entry *chunk = weir__calloc(ms->base.ctx, CHUNK_ENTRIES, sizeof(entry));
    if (!chunk)
        return WEIR_ENOMEM;
    sh->chunks[sh->nchunks++] = chunk;
    sh->bytes += CHUNK_ENTRIES * sizeof(entry) + ALLOC_OVERHEAD;
    return WEIR_OK;
}

/* Double the bucket array when chains average more than one entry, unless
 * that would cross the cap (chains then just grow a little longer). */
static void maybe_grow_buckets(memstore *ms, shard *sh)
{
    uint64_t nb = (uint64_t)sh->mask + 1;
    if (sh->count <= nb || nb >= (1u << 31))
        return;
    uint64_t add = nb * sizeof(uint32_t);
    if (ms->shard_cap && sh->bytes + add > ms->shard_cap)
        return;
    uint32_t *nbk = weir__calloc(ms->base.ctx, nb * 2, sizeof(uint32_t));
    if (!nbk)
        return; /* keep the old array: correct, only slower */
    uint32_t mask = (uint32_t)(nb * 2 - 1);
    for (uint32_t ref = 1; ref <= sh->used; ref++) {
        entry *e = entry_at(sh, ref - 1);
        if (e->algo == 0)
            continue;
        e->next = nbk[e->hash & mask];
        nbk[e->hash & mask] = ref;
    }
    weir__free(ms->base.ctx, sh->buckets);
    __atomic_store_n(&sh->buckets, nbk, __ATOMIC_RELAXED);
    __atomic_store_n(&sh->mask, mask, __ATOMIC_RELAXED);
    sh->bytes += add;
}

/* Create the entry for a key; its state is fresh (zero). */
static weir_status insert(memstore *ms, shard *sh, uint32_t h32, const void *key, size_t len,
                          const weir_limit *lim, int64_t now_us, uint32_t *ref_out)
{
    uint32_t now_s = seconds_floor(now_us);
    sweep_steps(ms, sh, now_s, ms->sweep_step);
    weir_status st = make_room(ms, sh, now_s, extra_bytes(len, lim));
    if (st != WEIR_OK)
        return st;

    char *heap_key = NULL;
    void *blob = NULL;
    if (len > INLINE_KEY && !(heap_key = weir__malloc(ms->base.ctx, len)))
        return WEIR_ENOMEM;
    if (needs_blob(lim) && !(blob = weir__calloc(ms->base.ctx, 1, lim->state_bytes))) {
        weir__free(ms->base.ctx, heap_key);
        return WEIR_ENOMEM;
    }
    uint32_t ref;
    if (sh->free_head) {
        ref = sh->free_head;
        sh->free_head = entry_at(sh, ref - 1)->next;
    } else {
        if (sh->used == sh->nchunks * CHUNK_ENTRIES && (st = grow_chunks(ms, sh)) != WEIR_OK) {
            weir__free(ms->base.ctx, heap_key);
            weir__free(ms->base.ctx, blob);
            return st;
        }
        ref = ++sh->used;
    }

    entry *e = entry_at(sh, ref - 1);
    memset(e, 0, sizeof(*e));
    e->hash = h32;
    e->klen = (uint16_t)len;
    e->algo = (uint8_t)lim->algorithm;
    e->rest_s = NO_REST;
    if (heap_key) {
        memcpy(heap_key, key, len);
        e->key.ptr = heap_key;
        e->flags |= F_HEAPKEY;
        sh->bytes += heap_cost(len);
    } else {
        memcpy(e->key.inl, key, len);
    }
    if (blob) {
        e->st.blob.ptr = blob;
        e->st.blob.bytes = lim->state_bytes;
        e->flags |= F_BLOB;
        sh->bytes += heap_cost(lim->state_bytes);
        if (lim->algorithm == WEIR_ALGO_CONCURRENCY) {
            /* Lease ids must not repeat when a key is removed and made
             * again: start from the time, 64 ids per microsecond. */
            uint64_t base = (uint64_t)now_us * 64u;
            memcpy(blob, &base, sizeof(base));
        }
    }
    uint32_t *head = &sh->buckets[h32 & sh->mask];
    e->next = *head;
    *head = ref;
    sh->count++;
    maybe_grow_buckets(ms, sh);
    *ref_out = ref;
    return WEIR_OK;
}

/* ------------------------------------------------------------------ decisions */

static bool state_matches(const entry *e, const weir_limit *lim)
{
    if (e->algo != (uint8_t)lim->algorithm)
        return false;
    if (e->flags & F_BLOB)
        return e->st.blob.bytes == lim->state_bytes;
    return !needs_blob(lim);
}

static void note_decision(shard *sh, entry *e, int64_t now_us, const weir_result *res)
{
    e->rest_s = seconds_ceil(now_us + res->reset_after_us);
    if (e->rest_s < sh->next_rest_s)
        sh->next_rest_s = e->rest_s;
    if (!res->allowed || res->remaining == 0)
        e->flags |= F_OVER;
    else
        e->flags &= (uint8_t)~F_OVER;
}

static bool op_valid(const weir_op *op)
{
    return op->key && op->key_len >= 1 && op->key_len <= WEIR_MAX_KEY_BYTES && op->limit &&
           (op->kind == WEIR_OP_TAKE || op->kind == WEIR_OP_CHECK || op->kind == WEIR_OP_RELEASE);
}

/* The shard's clock: never behind what it has already seen. */
static int64_t shard_now(shard *sh, int64_t now_us)
{
    if (now_us < sh->last_now_us)
        return sh->last_now_us;
    sh->last_now_us = now_us;
    return now_us;
}

/* One operation; the shard is locked. */
static void run_locked(memstore *ms, shard *sh, weir_op *op, uint64_t h, int64_t now_us)
{
    const weir_limit *lim = op->limit;
    uint32_t h32 = (uint32_t)h;
    now_us = shard_now(sh, now_us);
    uint32_t ref = find(sh, h32, op->key, op->key_len, NULL);
    if (ref && !state_matches(entry_at(sh, ref - 1), lim)) {
        /* The key's limit changed shape: start it fresh. */
        remove_entry(ms, sh, ref);
        ref = 0;
    }
    weir_result res;
    weir_status st;

    switch (op->kind) {
    case WEIR_OP_CHECK:
        st = weir_check(lim, ref ? entry_state(entry_at(sh, ref - 1)) : zero_state.b, now_us,
                        op->hits, &res);
        break;
    case WEIR_OP_RELEASE:
        if (!ref) {
            st = lim->algorithm == WEIR_ALGO_CONCURRENCY ? WEIR_ENOLEASE : WEIR_EALGO;
            break;
        }
        st = weir_release(lim, entry_state(entry_at(sh, ref - 1)), now_us, op->lease, &res);
        if (st == WEIR_OK)
            note_decision(sh, entry_at(sh, ref - 1), now_us, &res);
        break;
    default:
        if (!ref) {
            /* Decide on a fresh state first: a denial or a peek creates no key. */
            st = weir_check(lim, zero_state.b, now_us, op->hits, &res);
            if (st != WEIR_OK || !res.allowed || op->hits == 0)
                break;
            st = insert(ms, sh, h32, op->key, op->key_len, lim, now_us, &ref);
            if (st != WEIR_OK)
                break;
        }
        entry *e = entry_at(sh, ref - 1);
        st = weir_step(lim, entry_state(e), now_us, op->hits, &res);
        if (st == WEIR_OK)
            note_decision(sh, e, now_us, &res);
        break;
    }
    op->status = st;
    if (st == WEIR_OK)
        op->result = res;
}

static void prefetch_bucket(memstore *ms, uint64_t h)
{
    shard *sh = shard_of(ms, h);
    uint32_t *b = __atomic_load_n(&sh->buckets, __ATOMIC_RELAXED);
    uint32_t mask = __atomic_load_n(&sh->mask, __ATOMIC_RELAXED);
    __builtin_prefetch(&b[(uint32_t)h & mask]);
}

static void prefetch_entry(memstore *ms, uint64_t h)
{
    shard *sh = shard_of(ms, h);
    weir__spin_lock(&sh->lock);
    uint32_t ref = sh->buckets[(uint32_t)h & sh->mask];
    if (ref)
        __builtin_prefetch(entry_at(sh, ref - 1));
    weir__spin_unlock(&sh->lock);
}

/* The independent batch: three stages in flight, so the cache misses of
 * later keys overlap the decisions of earlier ones. */
#define PF_AHEAD 8u
#define PF_ENTRY 4u
#define PF_RING 16u /* > PF_AHEAD: a slot is read PF_AHEAD steps after it is written */

static void run_independent(memstore *ms, weir_op *ops, size_t n, int64_t now_us)
{
    uint64_t ring[PF_RING];
    for (size_t i = 0; i < n + PF_AHEAD; i++) {
        if (i < n) {
            if (op_valid(&ops[i])) {
                ring[i % PF_RING] = hash_key(ms, ops[i].key, ops[i].key_len);
                prefetch_bucket(ms, ring[i % PF_RING]);
            } else {
                ops[i].status = WEIR_EINVAL;
            }
        }
        if (i >= PF_ENTRY && i - PF_ENTRY < n && ops[i - PF_ENTRY].status != WEIR_EINVAL && n > 1)
            prefetch_entry(ms, ring[(i - PF_ENTRY) % PF_RING]);
        if (i >= PF_AHEAD) {
            size_t k = i - PF_AHEAD;
            if (ops[k].status == WEIR_EINVAL)
                continue;
            uint64_t h = ring[k % PF_RING];
            shard *sh = shard_of(ms, h);
            weir__spin_lock(&sh->lock);
            run_locked(ms, sh, &ops[k], h, now_us);
            weir__spin_unlock(&sh->lock);
        }
    }
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Check every TAKE, then charge them all only if all are admitted. The
 * shards involved are locked in ascending order, so batches never
 * deadlock, and held for the whole batch, so the two passes see one
 * state. */
static weir_status run_atomic(memstore *ms, weir_op *ops, size_t n, int64_t now_us)
{
    if (n > MAX_ATOMIC_OPS)
        return WEIR_EINVAL;
    uint64_t h[MAX_ATOMIC_OPS];
    uint32_t locks[MAX_ATOMIC_OPS];
    size_t nlocks = 0;
    for (size_t i = 0; i < n; i++) {
        if (!op_valid(&ops[i]) || ops[i].kind == WEIR_OP_RELEASE)
            return WEIR_EINVAL;
        h[i] = hash_key(ms, ops[i].key, ops[i].key_len);
        locks[nlocks++] = (uint32_t)(shard_of(ms, h[i]) - ms->shards);
    }
    qsort(locks, nlocks, sizeof(locks[0]), cmp_u32);
    size_t u = 0;
    for (size_t i = 0; i < nlocks; i++)
        if (i == 0 || locks[i] != locks[u - 1])
            locks[u++] = locks[i];
    nlocks = u;
    for (size_t i = 0; i < nlocks; i++)
        weir__spin_lock(&ms->shards[locks[i]].lock);

    bool denied = false;
    for (size_t i = 0; i < n; i++) {
        weir_op *op = &ops[i];
        shard *sh = shard_of(ms, h[i]);
        int64_t t = now_us < sh->last_now_us ? sh->last_now_us : now_us;
        /* The same key twice in one batch is charged for both. */
        uint64_t hits = op->hits;
        if (op->kind == WEIR_OP_TAKE) {
            for (size_t j = 0; j < i; j++)
                if (ops[j].kind == WEIR_OP_TAKE && h[j] == h[i] && ops[j].key_len == op->key_len &&
                    memcmp(ops[j].key, op->key, op->key_len) == 0)
                    hits += ops[j].hits;
        }
        uint32_t ref = find(sh, (uint32_t)h[i], op->key, op->key_len, NULL);
        const void *state = zero_state.b;
        if (ref && state_matches(entry_at(sh, ref - 1), op->limit))
            state = entry_state(entry_at(sh, ref - 1));
        op->status = weir_check(op->limit, state, t, hits, &op->result);
        if (op->status == WEIR_OK && op->kind == WEIR_OP_TAKE && !op->result.allowed)
            denied = true;
    }
    if (!denied)
        for (size_t i = 0; i < n; i++)
            run_locked(ms, shard_of(ms, h[i]), &ops[i], h[i], now_us);

    for (size_t i = nlocks; i-- > 0;)
        weir__spin_unlock(&ms->shards[locks[i]].lock);
    return WEIR_OK;
}

weir_status weir_memstore_run(weir_store *store, weir_op *ops, size_t n, int64_t now_us,
                              unsigned flags)
{
    if (!is_mem(store))
        return WEIR_EINVAL;
    weir_status st = weir__store_check_batch(ops, n, flags);
    if (st != WEIR_OK)
        return st;
    memstore *ms = (memstore *)store;
    for (size_t i = 0; i < n; i++)
        ops[i].status = WEIR_OK;
    if (flags & WEIR_BATCH_ATOMIC)
        return run_atomic(ms, ops, n, now_us);
    run_independent(ms, ops, n, now_us);
    return WEIR_OK;
}

weir_status weir_memstore_take(weir_store *store, const void *key, size_t key_len,
                               const weir_limit *lim, int64_t now_us, uint64_t hits,
                               weir_result *res)
{
    if (!is_mem(store) || !res)
        return WEIR_EINVAL;
    weir_op op = {.key = key, .key_len = key_len, .limit = lim, .hits = hits};
    if (!op_valid(&op))
        return WEIR_EINVAL;
    memstore *ms = (memstore *)store;
    uint64_t h = hash_key(ms, key, key_len);
    shard *sh = shard_of(ms, h);
    weir__spin_lock(&sh->lock);
    run_locked(ms, sh, &op, h, now_us);
    weir__spin_unlock(&sh->lock);
    if (op.status == WEIR_OK)
        *res = op.result;
    return op.status;
}

size_t weir_memstore_sweep(weir_store *store, int64_t now_us, size_t max_entries)
{
    if (!is_mem(store))
        return 0;
    memstore *ms = (memstore *)store;
    size_t removed = 0, budget = max_entries;
    for (uint32_t k = 0; k < ms->nshards && budget > 0; k++) {
        uint32_t i =
            atomic_fetch_add_explicit(&ms->sweep_shard, 1, memory_order_relaxed) % ms->nshards;
        shard *sh = &ms->shards[i];
        weir__spin_lock(&sh->lock);
        uint32_t steps = sh->used < budget ? sh->used : (uint32_t)budget;
        int64_t t = shard_now(sh, now_us);
        removed += sweep_steps(ms, sh, seconds_floor(t), steps);
        budget -= steps;
        weir__spin_unlock(&sh->lock);
    }
    return removed;
}

/* ------------------------------------------------------------------ the store table */

static weir_status mem_submit(weir_store *s, weir_op *ops, size_t n, int64_t now_us, unsigned flags,
                              weir_store_cb cb, void *arg)
{
    weir_status st = weir_memstore_run(s, ops, n, now_us, flags);
    if (st != WEIR_OK)
        return st;
    cb(arg, ops, n, WEIR_OK);
    return WEIR_OK;
}

/* The store's own allocations: the struct and the aligned shard array. */
static uint64_t fixed_bytes(uint32_t nshards)
{
    return sizeof(memstore) + ALLOC_OVERHEAD + nshards * sizeof(shard) + 64 + ALLOC_OVERHEAD;
}

static void mem_stats(weir_store *s, weir_store_stats *out)
{
    memstore *ms = (memstore *)s;
    memset(out, 0, sizeof(*out));
    out->max_bytes = ms->max_bytes;
    out->bytes = fixed_bytes(ms->nshards);
    for (uint32_t i = 0; i < ms->nshards; i++) {
        shard *sh = &ms->shards[i];
        weir__spin_lock(&sh->lock);
        out->keys += sh->count;
        out->bytes += sh->bytes;
        out->evictions += sh->evictions;
        out->expirations += sh->expirations;
        weir__spin_unlock(&sh->lock);
    }
}

static void shard_destroy(memstore *ms, shard *sh)
{
    for (uint32_t ref = 1; ref <= sh->used; ref++) {
        entry *e = entry_at(sh, ref - 1);
        if (e->algo == 0)
            continue;
        if (e->flags & F_BLOB)
            weir__free(ms->base.ctx, e->st.blob.ptr);
        if (e->flags & F_HEAPKEY)
            weir__free(ms->base.ctx, e->key.ptr);
    }
    for (uint32_t c = 0; c < sh->nchunks; c++)
        weir__free(ms->base.ctx, sh->chunks[c]);
    weir__free(ms->base.ctx, sh->chunks);
    weir__free(ms->base.ctx, sh->buckets);
}

static void mem_destroy(weir_store *s)
{
    memstore *ms = (memstore *)s;
    if (ms->shards)
        for (uint32_t i = 0; i < ms->nshards; i++)
            shard_destroy(ms, &ms->shards[i]);
    weir__free(ms->base.ctx, ms->shards_raw);
    weir__free(ms->base.ctx, ms);
}

static const weir__store_ops mem_ops = {mem_submit, mem_stats, mem_destroy};

#define MEM_OPTIONS_V1_SIZE (offsetof(weir_memstore_options, seed) + sizeof(uint64_t))

weir_status weir_memstore_new(weir_ctx *ctx, const weir_memstore_options *opts, weir_store **out)
{
    if (!ctx || !out)
        return WEIR_EINVAL;
    weir_memstore_options o;
    memset(&o, 0, sizeof(o));
    if (opts) {
        if (opts->size < MEM_OPTIONS_V1_SIZE)
            return WEIR_EINVAL;
        memcpy(&o, opts, opts->size < sizeof(o) ? opts->size : sizeof(o));
    }
    uint32_t n = o.shards ? o.shards : DEFAULT_SHARDS;
    if (n > MAX_SHARDS || (n & (n - 1)) != 0)
        return WEIR_EINVAL;

    memstore *ms = weir__calloc(ctx, 1, sizeof(*ms));
    if (!ms)
        return WEIR_ENOMEM;
    ms->base.ops = &mem_ops;
    ms->base.kind = WEIR__STORE_MEMORY;
    ms->base.ctx = ctx;
    ms->nshards = n;
    ms->shard_bits = (uint32_t)__builtin_ctz(n);
    ms->sweep_step = o.sweep_step ? o.sweep_step : DEFAULT_SWEEP;
    ms->max_bytes = o.max_bytes;
    /* The cap covers everything, the store's own structures included. */
    uint64_t fixed = fixed_bytes(n);
    ms->shard_cap = 0;
    if (o.max_bytes)
        ms->shard_cap =
            o.max_bytes > fixed && (o.max_bytes - fixed) / n > 0 ? (o.max_bytes - fixed) / n : 1;

    unsigned char seed[32];
    weir_status st = WEIR_OK;
    if (o.seed) {
        memset(seed, 0, sizeof(seed));
        memcpy(seed, &o.seed, sizeof(o.seed));
    } else {
        st = weir__random(seed, sizeof(seed));
    }
    if (st == WEIR_OK &&
        XXH3_generateSecret(ms->secret, SECRET_BYTES, seed, sizeof(seed)) != XXH_OK)
        st = WEIR_EIO;
    if (st != WEIR_OK) {
        weir__free(ctx, ms);
        return st;
    }

    ms->shards_raw = weir__calloc(ctx, 1, n * sizeof(shard) + 64);
    if (!ms->shards_raw) {
        weir__free(ctx, ms);
        return WEIR_ENOMEM;
    }
    ms->shards = (shard *)(((uintptr_t)ms->shards_raw + 63u) & ~(uintptr_t)63u);
    for (uint32_t i = 0; i < n; i++) {
        shard *sh = &ms->shards[i];
        sh->buckets = weir__calloc(ctx, MIN_BUCKETS, sizeof(uint32_t));
        if (!sh->buckets) {
            mem_destroy(&ms->base);
            return WEIR_ENOMEM;
        }
        sh->mask = MIN_BUCKETS - 1;
        sh->next_rest_s = NO_REST;
        sh->bytes = MIN_BUCKETS * sizeof(uint32_t) + ALLOC_OVERHEAD;
    }
    *out = &ms->base;
    return WEIR_OK;
}
