/*
 * memstore.c - the in-process store: a sharded hash table of fixed-size
 * entries, each holding one key's algorithm state.
 *
 * Layout. A key is known by its 128-bit digest (XXH3-128 under a random
 * per-store secret, so nobody can aim keys at one bucket or make two keys
 * collide): the low bits choose the shard, the high 64 bits (the tag) the
 * key's two candidate buckets in the shard's cuckoo table, and 86 bits of
 * the digest beyond the shard's are kept in the entry and compared on a
 * lookup. Two keys would share an entry only if those 86 bits agreed: under
 * a secret seed, about one chance in 10^25 per comparison, so the store keeps
 * no key bytes at all and every entry has one size whatever the key's
 * length. A bucket is two 32-byte entries, one cache line aligned to 64;
 * the 16-byte states of the fixed-size algorithms live inside the entry,
 * larger states out of line. A lookup reads at most two buckets whose
 * addresses come straight from the hash, so the two fetches overlap: about
 * one memory latency per decision, where a chained table pays one per
 * link, and two lines in all (buckets of four entries on two lines each
 * made it four lines, and took 1.05-1.37x the time: docs/BENCHMARKS.md). A
 * new key goes to its first bucket when that has room, so most lookups end
 * there. Inserting into two full buckets moves entries along a short
 * random cuckoo path to their other bucket; the table grows by a quarter
 * when it is 90% full, so it stays above 72% full: 36-50 bytes per key.
 *
 * Expiry. Every decision tells how long until the key is back at rest (a
 * fresh state would decide the same); the entry keeps that time in ticks of
 * 2^20 us (about a second, so a shift and not a division), rounded up. An entry at rest is removed
 * by the incremental sweep that runs before each insert, by weir_memstore_sweep(), and under the
 * memory cap.
 *
 * The cap. Each shard may hold (max_bytes - fixed structures) / shards.
 * Before an insert that would cross it, the shard first removes every key
 * at rest (a full sweep, done at most once per second of clock time because
 * the shard remembers a lower bound on the earliest rest tick), and only if
 * none is at rest evicts active keys, preferring keys under their limit to
 * keys over it. At the cap the table does not grow; a key whose two buckets
 * stay full takes the place of the best victim among their four entries.
 *
 * Invariants (per shard, under its lock): every live entry (algo != 0) sits
 * in one of its two buckets; no digest has two live entries; count = live
 * entries; bytes = everything allocated for the shard; next_rest <= the rest
 * tick of every live entry; the shard's time never goes backwards
 * (last_now_us).
 */
#define _GNU_SOURCE
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "algo/algo.h"
#include "algo/arith.h"
#include "core/context.h"
#include "core/spinlock.h"
#include "store/store.h"
#include "store/table_arena.h"

#define SLOTS 2u
#define SECRET_BYTES 192u
/* What the allocator spends beyond the bytes asked for (glibc: 8-16). */
#define ALLOC_OVERHEAD 16u
#define MIN_BUCKETS 4u
#define MAX_BUCKETS (1u << 28)
/* Grow at 90% full (a two-choice table of two-slot buckets fills to about
 * 89.7% before its cuckoo paths grow long), by a quarter: the table stays
 * between 72% and 90% full. */
#define MAX_LOAD_PCT 90u
#define GROW_PCT 125u
/* A table its keys do not fit (a few keys sharing both buckets, likeliest
 * while the table is small) is tried again a quarter larger, up to this
 * many times: a store without a cap never evicts a key for want of a
 * cuckoo path. */
#define GROW_TRIES 8
/* Cuckoo path search: random walks of bounded depth. */
#define WALKS 8u
#define WALK_DEPTH 24u
#define EVICT_SAMPLE 8u
#define EVICT_SCAN 4096u
#define MAX_ATOMIC_OPS 64u
#define DEFAULT_SHARDS 64u
#define MAX_SHARDS 1024u
#define DEFAULT_SWEEP 4u
#define NO_REST UINT32_MAX
/* Rest times are kept in ticks of 2^TICK_SHIFT microseconds. */
#define TICK_SHIFT 20
#define BUCKET_ALIGN 64u

/* The low 10 bits of entry.check: the algorithm (0 marks a free slot), the
 * flags and the count of decisions; the upper 22 bits: more of the key's
 * digest. */
#define ALGO_MASK 0x0Fu
#define F_OVER 0x10u /* over its limit (or at it) at the last decision */
#define F_BLOB 0x20u /* the state lives out of line */
/* Decisions the key has had, saturating at 15: under the cap, a key asked
 * once goes before one in use (a flood of keys minted to be asked once
 * cannot push out the keys of clients that keep asking) */
#define FREQ_ONE 0x40u
#define FREQ_MASK 0x3C0u
#define CHECK_MASK 0xFFFFFC00u

typedef struct entry {
    uint64_t tag;   /* high half of the key's digest: its two buckets */
    uint32_t check; /* 22 more bits of the digest | decisions | flags | algorithm */
    uint32_t rest;  /* tick (rounded up) when the key is back at rest */
    union {
        int64_t align;
        unsigned char b[WEIR_STATE_FIXED_BYTES];
        struct {
            void *ptr;
            uint32_t bytes;
        } blob;
    } st;
} entry;

_Static_assert(sizeof(entry) == 32, "an entry is 32 bytes");

typedef struct bucket {
    _Alignas(BUCKET_ALIGN) entry e[SLOTS];
} bucket;

_Static_assert(sizeof(bucket) == BUCKET_ALIGN, "a bucket is one cache line");

/* What a key is known by: the shard's bits are implicit in the shard. */
typedef struct digest {
    uint64_t tag;
    uint32_t check; /* upper 22 bits only */
    uint32_t shard;
} digest;

/* Two cache lines: every decision writes the second (the lock, the clock)
 * but only reads the first (where the table is) before it takes the lock,
 * and only growth writes that one. On one line, the read would pull the
 * line from the core that last decided in the shard and the lock would
 * then have to take it over: two transfers per decision, not one. */
typedef struct shard {
    _Alignas(64) bucket *table; /* written under the lock, read relaxed for prefetch */
    uint32_t nbuckets;          /* likewise */
    void *table_raw;            /* the allocation; table is its aligned interior */
    _Alignas(64) weir__spinlock lock;
    uint32_t count;
    uint32_t cursor; /* slot index where sweeps and eviction samples resume */
    uint32_t next_rest;
    uint64_t rng;
    int64_t last_now_us;
    uint64_t bytes;
    uint64_t evictions;
    uint64_t expirations;
} shard;

typedef struct memstore {
    struct weir_store base;
    uint32_t nshards;
    uint32_t sweep_step;
    uint64_t max_bytes;
    uint64_t shard_cap;
    _Atomic uint32_t sweep_shard;
    void *shards_raw;
    shard *shards;
    weir__arena *arena; /* mid-sized tables; NULL under a memory cap */
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

static unsigned algo_of(const entry *e)
{
    return e->check & ALGO_MASK;
}

static void *entry_state(entry *e)
{
    return (e->check & F_BLOB) ? e->st.blob.ptr : e->st.b;
}

static uint64_t heap_cost(size_t bytes)
{
    return ((bytes + 15u) & ~(uint64_t)15u) + ALLOC_OVERHEAD;
}

static bool needs_blob(const weir_limit *lim)
{
    return lim->state_bytes > WEIR_STATE_FIXED_BYTES;
}

static uint64_t extra_bytes(const weir_limit *lim)
{
    return needs_blob(lim) ? heap_cost(lim->state_bytes) : 0;
}

/* Ticks rounded down (a time now) and up (a rest time): a key is at rest
 * once its rest tick is <= the current tick, never before its rest time. */
static uint32_t tick_floor(int64_t us)
{
    if (us <= 0)
        return 0;
    uint64_t t = (uint64_t)us >> TICK_SHIFT;
    return t >= NO_REST ? NO_REST - 1 : (uint32_t)t;
}

static uint32_t tick_ceil(int64_t us)
{
    if (us <= 0)
        return 0;
    uint64_t t = ((uint64_t)us + ((1u << TICK_SHIFT) - 1u)) >> TICK_SHIFT;
    return t >= NO_REST ? NO_REST - 1 : (uint32_t)t;
}

static digest digest_of(const memstore *ms, const void *key, size_t len)
{
    XXH128_hash_t h = XXH3_128bits_withSecret(key, len, ms->secret, SECRET_BYTES);
    /* the shard takes the lowest bits, the check bits 40..63: disjoint */
    digest d = {h.high64, (uint32_t)(h.low64 >> 32) & CHECK_MASK,
                (uint32_t)h.low64 & (ms->nshards - 1u)};
    return d;
}

/* A key that is already a keyed digest (WEIR_BATCH_DIGESTS): its bytes
 * are uniformly random, so they are used as they are. */
static digest digest_given(const memstore *ms, const void *key)
{
    uint64_t lo, hi;
    memcpy(&lo, key, sizeof(lo));
    memcpy(&hi, (const char *)key + sizeof(lo), sizeof(hi));
    digest d = {hi, (uint32_t)(lo >> 32) & CHECK_MASK, (uint32_t)lo & (ms->nshards - 1u)};
    return d;
}

static digest op_digest(const memstore *ms, const weir_op *op, unsigned flags)
{
    return (flags & WEIR_BATCH_DIGESTS) ? digest_given(ms, op->key)
                                        : digest_of(ms, op->key, op->key_len);
}

static bool same_digest(const digest *a, const digest *b)
{
    return a->tag == b->tag && a->check == b->check && a->shard == b->shard;
}

static const weir__store_ops mem_ops;

static bool is_mem(const weir_store *s)
{
    return s && s->ops == &mem_ops;
}

/* [0, n) from the high bits of h, without a division */
static uint32_t fastrange(uint32_t h, uint32_t n)
{
    return (uint32_t)(((uint64_t)h * n) >> 32);
}

/* The two buckets of a tag; distinct whenever there are two buckets. */
static void buckets_of(uint64_t tag, uint32_t nb, uint32_t *b1, uint32_t *b2)
{
    *b1 = fastrange((uint32_t)tag, nb);
    uint32_t x = fastrange((uint32_t)(tag >> 32), nb);
    *b2 = x != *b1 ? x : (*b1 + 1 == nb ? 0 : *b1 + 1);
}

static uint32_t other_bucket(const entry *e, uint32_t b, uint32_t nb)
{
    uint32_t b1, b2;
    buckets_of(e->tag, nb, &b1, &b2);
    return b == b1 ? b2 : b1;
}

static uint32_t nslots(const shard *sh)
{
    return sh->nbuckets * SLOTS;
}

static entry *slot_at(const shard *sh, uint32_t i)
{
    return &sh->table[i / SLOTS].e[i % SLOTS];
}

static uint64_t next_rand(shard *sh)
{
    uint64_t z = (sh->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    return z ^ (z >> 27);
}

static bool is_key(const entry *e, const digest *d)
{
    return e->tag == d->tag && (e->check & CHECK_MASK) == d->check && algo_of(e) != 0;
}

/* The key's entry in buckets t1 and t2 (its two buckets), or NULL. */
static entry *find_in(bucket *t1, bucket *t2, const digest *d)
{
    for (unsigned i = 0; i < SLOTS; i++)
        if (is_key(&t1->e[i], d))
            return &t1->e[i];
    for (unsigned i = 0; i < SLOTS; i++)
        if (is_key(&t2->e[i], d))
            return &t2->e[i];
    return NULL;
}

static void prefetch_pair(const bucket *t1, const bucket *t2)
{
    /* both buckets' lines at once: their misses overlap */
    for (unsigned line = 0; line < sizeof(bucket); line += 64) {
        __builtin_prefetch((const char *)t1 + line);
        __builtin_prefetch((const char *)t2 + line);
    }
}

/* Every caller has asked for the key's buckets before taking the lock
 * (prefetch_buckets(), mem_prefetch()), so this only reads them. */
static entry *find(const shard *sh, const digest *d)
{
    uint32_t b1, b2;
    buckets_of(d->tag, sh->nbuckets, &b1, &b2);
    return find_in(&sh->table[b1], &sh->table[b2], d);
}

/* ------------------------------------------------------------------ removal */

static void remove_entry(memstore *ms, shard *sh, entry *e)
{
    if (e->check & F_BLOB) {
        weir__free(ms->base.ctx, e->st.blob.ptr);
        sh->bytes -= heap_cost(e->st.blob.bytes);
    }
    memset(e, 0, sizeof(*e));
    sh->count--;
}

static bool live_at_rest(const entry *e, uint32_t now_tick)
{
    return algo_of(e) != 0 && e->rest <= now_tick;
}

/* Examine up to `steps` slots from the cursor; remove keys at rest. */
static size_t sweep_steps(memstore *ms, shard *sh, uint32_t now_tick, uint32_t steps)
{
    size_t removed = 0;
    uint32_t n = nslots(sh);
    for (uint32_t k = 0; k < steps && sh->count > 0; k++) {
        if (sh->cursor >= n)
            sh->cursor = 0;
        entry *e = slot_at(sh, sh->cursor++);
        if (live_at_rest(e, now_tick)) {
            remove_entry(ms, sh, e);
            sh->expirations++;
            removed++;
        }
    }
    return removed;
}

/* Remove every key at rest and make next_rest exact. */
static size_t sweep_all(memstore *ms, shard *sh, uint32_t now_tick)
{
    size_t removed = 0;
    uint32_t next = NO_REST;
    for (uint32_t i = 0, n = nslots(sh); i < n; i++) {
        entry *e = slot_at(sh, i);
        if (algo_of(e) == 0)
            continue;
        if (e->rest <= now_tick) {
            remove_entry(ms, sh, e);
            sh->expirations++;
            removed++;
        } else if (e->rest < next) {
            next = e->rest;
        }
    }
    sh->next_rest = next;
    return removed;
}

/* Is a better eviction victim than b: under its limit before over it, then
 * the one that comes to rest first. */
/* Whether @e is a better victim than @b: a key under its limit (what it
 * has used is all its eviction gives back) before one over it (whose
 * eviction is a fresh quota), then the key asked fewer times, then the one
 * back at rest sooner. */
static bool better_victim(const entry *e, const entry *b)
{
    if (!b)
        return true;
    unsigned eo = e->check & F_OVER, bo = b->check & F_OVER;
    if (eo != bo)
        return eo < bo;
    unsigned ef = e->check & FREQ_MASK, bf = b->check & FREQ_MASK;
    if (ef != bf)
        return ef < bf;
    return e->rest < b->rest;
}

static void evicted(memstore *ms, shard *sh, entry *e)
{
    remove_entry(ms, sh, e);
    sh->evictions++;
}

/* Evict one active key: of a sample taken from the cursor, the best victim.
 * Slots are sampled in order, so a run of over-limit keys could fill a
 * sample: the scan goes on past EVICT_SAMPLE (up to EVICT_SCAN) until it
 * has seen a key under its limit or one asked only once, and takes a key
 * over its limit and asked more only when none turns up. */
static void evict_one(memstore *ms, shard *sh)
{
    entry *best = NULL;
    uint32_t seen = 0, n = nslots(sh);
    for (uint32_t k = 0; k < n && k < EVICT_SCAN; k++) {
        if (seen >= EVICT_SAMPLE && best &&
            (!(best->check & F_OVER) || (best->check & FREQ_MASK) <= FREQ_ONE))
            break;
        if (sh->cursor >= n)
            sh->cursor = 0;
        entry *e = slot_at(sh, sh->cursor++);
        if (algo_of(e) == 0)
            continue;
        seen++;
        if (better_victim(e, best))
            best = e;
    }
    if (best)
        evicted(ms, sh, best);
}

/* Free memory until `extra` more bytes fit under the cap. */
static weir_status make_room(memstore *ms, shard *sh, uint32_t now_tick, uint64_t extra)
{
    if (!ms->shard_cap)
        return WEIR_OK;
    for (;;) {
        if (sh->bytes + extra <= ms->shard_cap)
            return WEIR_OK;
        if (sh->count == 0)
            return WEIR_ETOOBIG;
        if (now_tick >= sh->next_rest && sweep_all(ms, sh, now_tick) > 0)
            continue;
        evict_one(ms, sh);
    }
}

/* ------------------------------------------------------------------ the table */

static uint64_t table_cost(uint32_t nb)
{
    return (uint64_t)nb * sizeof(bucket) + BUCKET_ALIGN + ALLOC_OVERHEAD;
}

/* Whether a table of nb buckets comes from the arena: a mid-sized one,
 * unless the store has a memory cap (the arena's slack belongs to no shard,
 * so the cap could not count it). */
static bool in_arena(const memstore *ms, uint32_t nb)
{
    return ms->arena && weir__arena_holds((size_t)nb * sizeof(bucket));
}

/* A zeroed table of at least *nb buckets; *nb is set to its size (an
 * arena table fills its slot, a large one may be rounded up to whole huge
 * pages). Tables are read at random, so those past the TLB's reach are
 * put on huge pages: mid-sized ones in the arena, large ones aligned to
 * one. A large table is rounded up only without a cap, which grow()
 * checked for the size asked. */
static bucket *alloc_table(memstore *ms, uint32_t *nb, void **raw)
{
    size_t tb = (size_t)*nb * sizeof(bucket);
    bucket *t;
    if (in_arena(ms, *nb)) {
        t = *raw = weir__arena_alloc(ms->arena, &tb);
    } else if (weir__table_is_large(tb)) {
        t = weir__table_alloc_large(ms->base.ctx, &tb, !ms->shard_cap, raw);
    } else {
        *raw = weir__calloc(ms->base.ctx, 1, tb + BUCKET_ALIGN);
        if (!*raw)
            return NULL;
        uintptr_t mask = BUCKET_ALIGN - 1u;
        return (bucket *)(((uintptr_t)*raw + mask) & ~mask);
    }
    *nb = (uint32_t)(tb / sizeof(bucket));
    return t;
}

/* Free a table of nb buckets made by alloc_table(). */
static void free_table(memstore *ms, void *raw, uint32_t nb)
{
    size_t tb = (size_t)nb * sizeof(bucket);
    if (in_arena(ms, nb))
        weir__arena_release(ms->arena, raw, tb);
    else if (weir__table_is_large(tb))
        weir__table_free_large(ms->base.ctx, raw, tb);
    else
        weir__free(ms->base.ctx, raw);
}

static entry *free_slot(bucket *b)
{
    for (unsigned i = 0; i < SLOTS; i++)
        if (algo_of(&b->e[i]) == 0)
            return &b->e[i];
    return NULL;
}

/* Make a free slot in bucket b1 or b2 by moving entries along a cuckoo
 * path to their other buckets; NULL when no short path is found. The path
 * is found first and moved after, so a failed search changes nothing. */
static entry *cuckoo_slot(shard *sh, bucket *t, uint32_t nb, uint32_t b1, uint32_t b2)
{
    entry *direct = free_slot(&t[b1]);
    if (!direct)
        direct = free_slot(&t[b2]);
    if (direct)
        return direct;
    for (uint32_t walk = 0; walk < WALKS; walk++) {
        uint32_t pb[WALK_DEPTH], ps[WALK_DEPTH];
        uint32_t b = (walk & 1u) ? b2 : b1;
        for (uint32_t d = 0; d < WALK_DEPTH; d++) {
            uint32_t s = (uint32_t)(next_rand(sh) % SLOTS);
            bool again = false;
            for (uint32_t k = 0; k < d; k++)
                again |= pb[k] == b && ps[k] == s;
            if (again)
                break;
            pb[d] = b;
            ps[d] = s;
            uint32_t to = other_bucket(&t[b].e[s], b, nb);
            entry *hole = free_slot(&t[to]);
            if (hole) {
                for (uint32_t k = d + 1; k-- > 0;) {
                    entry *src = &t[pb[k]].e[ps[k]];
                    *hole = *src;
                    hole = src;
                }
                memset(hole, 0, sizeof(*hole));
                return hole;
            }
            b = to;
        }
    }
    return NULL;
}

/* Rebuild the shard's table with nb buckets; false (and nothing changed)
 * when the memory is not there or the entries do not all fit. */
static bool rebuild(memstore *ms, shard *sh, uint32_t nb)
{
    void *raw;
    bucket *t = alloc_table(ms, &nb, &raw);
    if (!t)
        return false;
    for (uint32_t i = 0, n = nslots(sh); i < n; i++) {
        entry *e = slot_at(sh, i);
        if (algo_of(e) == 0)
            continue;
        uint32_t b1, b2;
        buckets_of(e->tag, nb, &b1, &b2);
        entry *dst = cuckoo_slot(sh, t, nb, b1, b2);
        if (!dst) {
            free_table(ms, raw, nb);
            return false;
        }
        *dst = *e;
    }
    free_table(ms, sh->table_raw, sh->nbuckets);
    sh->bytes = sh->bytes - table_cost(sh->nbuckets) + table_cost(nb);
    sh->table_raw = raw;
    __atomic_store_n(&sh->table, t, __ATOMIC_RELAXED);
    __atomic_store_n(&sh->nbuckets, nb, __ATOMIC_RELAXED);
    sh->cursor = 0;
    return true;
}

/* Grow by GROW_PCT (and by as much again each time the entries do not
 * fit). Under a cap, the new table may take what the cap leaves beside
 * the shard's other bytes and `extra` still to come; its last growth is to
 * that size, when it is at least an eighth larger (smaller steps would
 * rebuild the table for little). Old and new tables both exist while the
 * entries move: one shard's table, for the length of a rebuild, passes
 * the cap (docs/OPERATIONS.md, "Memory"). */
static bool grow(memstore *ms, shard *sh, uint64_t extra)
{
    uint64_t nb = sh->nbuckets, fit = MAX_BUCKETS;
    if (ms->shard_cap) {
        uint64_t others = sh->bytes - table_cost(sh->nbuckets) + extra;
        uint64_t room = ms->shard_cap > others ? ms->shard_cap - others : 0;
        fit = room > table_cost(0) ? (room - table_cost(0)) / sizeof(bucket) : 0;
        if (fit < nb + nb / 8)
            return false;
    }
    for (int tries = 0; tries < GROW_TRIES; tries++) {
        nb = nb * GROW_PCT / 100 + 1;
        if (nb > fit)
            nb = fit;
        if (nb > MAX_BUCKETS || nb <= sh->nbuckets)
            return false;
        if (rebuild(ms, sh, (uint32_t)nb))
            return true;
        if (nb == fit)
            return false;
    }
    return false;
}

/* A free slot for a key with this hash: grow at MAX_LOAD_PCT full, search
 * a cuckoo path, and at the cap clear keys at rest or evict the best of the
 * four entries in the key's two buckets. */
static entry *claim_slot(memstore *ms, shard *sh, uint64_t tag, uint32_t now_tick, uint64_t extra)
{
    if ((uint64_t)(sh->count + 1) * 100 > (uint64_t)nslots(sh) * MAX_LOAD_PCT)
        grow(ms, sh, extra);
    bool swept = false;
    for (int grown = 0;;) {
        uint32_t b1, b2;
        buckets_of(tag, sh->nbuckets, &b1, &b2);
        entry *e = cuckoo_slot(sh, sh->table, sh->nbuckets, b1, b2);
        if (e)
            return e;
        /* the key's buckets may still be full in a larger table (it
         * places every key anew): grow again while growth is allowed */
        if (grown < GROW_TRIES && grow(ms, sh, extra)) {
            grown++;
            continue;
        }
        if (!swept && now_tick >= sh->next_rest && sweep_all(ms, sh, now_tick) > 0) {
            swept = true;
            continue;
        }
        entry *best = NULL;
        for (unsigned i = 0; i < SLOTS; i++) {
            if (better_victim(&sh->table[b1].e[i], best))
                best = &sh->table[b1].e[i];
            if (better_victim(&sh->table[b2].e[i], best))
                best = &sh->table[b2].e[i];
        }
        evicted(ms, sh, best);
        return best;
    }
}

/* Create the entry for a key; its state is fresh (zero). */
static weir_status insert(memstore *ms, shard *sh, const digest *d, const weir_limit *lim,
                          int64_t now_us, entry **out)
{
    uint32_t now_tick = tick_floor(now_us);
    sweep_steps(ms, sh, now_tick, ms->sweep_step);
    uint64_t extra = extra_bytes(lim);
    weir_status st = make_room(ms, sh, now_tick, extra);
    if (st != WEIR_OK)
        return st;

    void *blob = NULL;
    if (needs_blob(lim) && !(blob = weir__calloc(ms->base.ctx, 1, lim->state_bytes)))
        return WEIR_ENOMEM;
    entry *e = claim_slot(ms, sh, d->tag, now_tick, extra);
    memset(e, 0, sizeof(*e));
    e->tag = d->tag;
    e->check = d->check | (uint32_t)lim->algorithm;
    e->rest = NO_REST;
    if (blob) {
        e->st.blob.ptr = blob;
        e->st.blob.bytes = lim->state_bytes;
        e->check |= F_BLOB;
        sh->bytes += extra;
        if (lim->algorithm == WEIR_ALGO_CONCURRENCY) {
            /* Lease ids must not repeat when a key is removed and made
             * again: start from the time, 64 ids per microsecond. */
            uint64_t base = (uint64_t)now_us * 64u;
            memcpy(blob, &base, sizeof(base));
        }
    }
    sh->count++;
    *out = e;
    return WEIR_OK;
}

/* ------------------------------------------------------------------ decisions */

static bool state_matches(const entry *e, const weir_limit *lim)
{
    if (algo_of(e) != (unsigned)lim->algorithm)
        return false;
    if (e->check & F_BLOB)
        return e->st.blob.bytes == lim->state_bytes;
    return !needs_blob(lim);
}

static void note_decision(shard *sh, entry *e, int64_t now_us, const weir_result *res)
{
    e->rest = tick_ceil(sat_add(now_us, res->reset_after_us));
    if (e->rest < sh->next_rest)
        sh->next_rest = e->rest;
    if (!res->allowed || res->remaining == 0)
        e->check |= F_OVER;
    else
        e->check &= ~F_OVER;
    if ((e->check & FREQ_MASK) != FREQ_MASK)
        e->check += FREQ_ONE;
}

static bool op_valid(const weir_op *op, unsigned flags)
{
    if ((flags & WEIR_BATCH_DIGESTS) && op->key_len != WEIR_DIGEST_BYTES)
        return false;
    return op->key && op->key_len >= 1 && op->key_len <= WEIR_MAX_KEY_BYTES && op->limit &&
           (unsigned)op->limit->algorithm - 1u < WEIR_ALGORITHM_COUNT &&
           (unsigned)op->kind <= (unsigned)WEIR_OP_CHARGE;
}

/* The shard's clock: never behind what it has already seen, never before
 * 0 (last_now_us starts there), so decisions can skip weir_step()'s
 * argument checks. */
static int64_t shard_now(shard *sh, int64_t now_us)
{
    if (now_us < sh->last_now_us)
        return sh->last_now_us;
    sh->last_now_us = now_us;
    return now_us;
}

/* One operation; the shard is locked. */
static void run_locked(memstore *ms, shard *sh, weir_op *op, const digest *d, int64_t now_us)
{
    const weir_limit *lim = op->limit;
    now_us = shard_now(sh, now_us);
    entry *e = find(sh, d);
    if (op->kind == WEIR_OP_RESET) {
        /* whether there was a state to forget, at rest or not */
        memset(&op->result, 0, sizeof(op->result));
        op->result.allowed = e != NULL;
        if (e)
            remove_entry(ms, sh, e);
        op->status = WEIR_OK;
        return;
    }
    if ((op->kind == WEIR_OP_REFUND || op->kind == WEIR_OP_CHARGE) &&
        (lim->algorithm == WEIR_ALGO_CONCURRENCY || lim->warmup_us)) {
        /* leases go back by RELEASE; a warm-up's cost is not undone
         * (weir_refund()): nothing read or changed */
        op->status = WEIR_EALGO;
        return;
    }
    if (e && !state_matches(e, lim) && op->kind == WEIR_OP_RELEASE) {
        /* a lease is given back under the limit it was taken under: under
         * another, there is none to give back (and the state stays) */
        op->status = lim->algorithm == WEIR_ALGO_CONCURRENCY ? WEIR_ENOLEASE : WEIR_EALGO;
        return;
    }
    if (e && !state_matches(e, lim) && op->kind == WEIR_OP_REFUND) {
        /* what a TAKE of this limit charged is not in another's state */
        e = NULL;
    } else if (e && !state_matches(e, lim)) {
        /* The key's limit changed shape: start it fresh. */
        remove_entry(ms, sh, e);
        e = NULL;
    }
    weir_result *res = &op->result;
    weir_status st;

    switch (op->kind) {
    case WEIR_OP_CHECK:
        st = weir__decide(lim, e ? entry_state(e) : zero_state.b, NULL, now_us, op->hits, res);
        break;
    case WEIR_OP_RELEASE:
        if (!e) {
            st = lim->algorithm == WEIR_ALGO_CONCURRENCY ? WEIR_ENOLEASE : WEIR_EALGO;
            break;
        }
        st = weir_release(lim, entry_state(e), now_us, op->lease, res);
        if (st == WEIR_OK)
            note_decision(sh, e, now_us, res);
        break;
    case WEIR_OP_REFUND:
        if (!e) {
            /* nothing held: nothing to give back, and no key made */
            st = weir__settled(lim, zero_state.b, now_us, false, res);
        } else {
            st = weir__refund(lim, entry_state(e), now_us, op->hits, res);
            /* at rest no later than before: the rest time only moves in */
            if (st == WEIR_OK && res->allowed)
                note_decision(sh, e, now_us, res);
        }
        break;
    case WEIR_OP_CHARGE:
        if (!e && op->hits == 0) {
            st = weir__settled(lim, zero_state.b, now_us, true, res);
            break;
        }
        if (!e && (st = insert(ms, sh, d, lim, now_us, &e)) != WEIR_OK)
            break;
        st = weir__charge(lim, entry_state(e), now_us, op->hits, res);
        if (st == WEIR_OK)
            note_decision(sh, e, now_us, res);
        break;
    default:
        if (!e) {
            /* Decide on a fresh state first: a denial or a peek creates no key. */
            st = weir__decide_reserve(lim, zero_state.b, NULL, now_us, op->hits, op->reserve, res);
            if (st != WEIR_OK || !res->allowed || op->hits == 0)
                break;
            st = insert(ms, sh, d, lim, now_us, &e);
            if (st != WEIR_OK)
                break;
        }
        st = weir__decide_reserve(lim, entry_state(e), entry_state(e), now_us, op->hits,
                                  op->reserve, res);
        if (st == WEIR_OK)
            note_decision(sh, e, now_us, res);
        break;
    }
    op->status = st;
}

/* The common case, a TAKE on a key that exists under the same limit,
 * decided straight into `res`; false when it is not that case and the
 * general way (run_locked()) must decide. The shard is locked. */
static inline bool take_existing(shard *sh, entry *e, const weir_limit *lim, int64_t now_us,
                                 uint64_t hits, uint64_t reserve, weir_result *res, weir_status *st)
{
    if (!e || !state_matches(e, lim))
        return false;
    int64_t tnow = shard_now(sh, now_us);
    void *state = entry_state(e);
    *st = reserve ? weir__decide_reserve(lim, state, state, tnow, hits, reserve, res)
                  : weir__decide(lim, state, state, tnow, hits, res);
    if (*st == WEIR_OK)
        note_decision(sh, e, tnow, res);
    return true;
}

/* Fetch the key's two buckets ahead of its turn. The table pointer is read
 * without the lock: a table being replaced is only prefetched, never read. */
static void prefetch_buckets(memstore *ms, const digest *d)
{
    shard *sh = &ms->shards[d->shard];
    bucket *t = __atomic_load_n(&sh->table, __ATOMIC_RELAXED);
    uint32_t nb = __atomic_load_n(&sh->nbuckets, __ATOMIC_RELAXED);
    uint32_t b1, b2;
    buckets_of(d->tag, nb, &b1, &b2);
    prefetch_pair(&t[b1], &t[b2]);
}

static void mem_prefetch(weir_store *store, const void *key)
{
    memstore *ms = (memstore *)store;
    digest d = digest_given(ms, key);
    prefetch_buckets(ms, &d);
}

/* The independent batch: keys are hashed and their buckets fetched
 * PF_AHEAD ops ahead of their decision, so the cache misses of later keys
 * overlap the decisions of earlier ones. */
#define PF_AHEAD 8u
#define PF_RING 16u /* > PF_AHEAD: a slot is read PF_AHEAD steps after it is written */

static void run_independent(memstore *ms, weir_op *ops, size_t n, int64_t now_us, unsigned flags)
{
    digest ring[PF_RING];
    for (size_t i = 0; i < n + PF_AHEAD; i++) {
        if (i < n) {
            if (op_valid(&ops[i], flags)) {
                ring[i % PF_RING] = op_digest(ms, &ops[i], flags);
                prefetch_buckets(ms, &ring[i % PF_RING]);
            } else {
                ops[i].status = WEIR_EINVAL;
            }
        }
        if (i >= PF_AHEAD) {
            size_t k = i - PF_AHEAD;
            if (ops[k].status == WEIR_EINVAL)
                continue;
            const digest *d = &ring[k % PF_RING];
            shard *sh = &ms->shards[d->shard];
            weir_op *op = &ops[k];
            weir__spin_lock(&sh->lock);
            if (op->kind != WEIR_OP_TAKE ||
                !take_existing(sh, find(sh, d), op->limit, now_us, op->hits, op->reserve,
                               &op->result, &op->status))
                run_locked(ms, sh, op, d, now_us);
            weir__spin_unlock(&sh->lock);
        }
    }
}

/* Ascending order, the order shards are locked in. A batch has at most
 * MAX_ATOMIC_OPS shards and usually two or three: insertion sort beats
 * qsort's setup, and three compare-exchanges settle the common case. */
static void sort_shards(uint32_t *v, size_t n)
{
#define CSWAP(a, b)                                                                \
    do {                                                                           \
        uint32_t lo_ = v[a] < v[b] ? v[a] : v[b], hi_ = v[a] < v[b] ? v[b] : v[a]; \
        v[a] = lo_;                                                                \
        v[b] = hi_;                                                                \
    } while (0)
    if (n == 2) {
        CSWAP(0, 1);
        return;
    }
    if (n == 3) {
        CSWAP(0, 1);
        CSWAP(1, 2);
        CSWAP(0, 1);
        return;
    }
#undef CSWAP
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
            uint32_t t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
}

/* Decide every op once, then charge them all only if every TAKE is
 * admitted. The shards involved are locked in ascending order, so batches
 * never deadlock, and held for the whole batch, so the decisions and the
 * charges see one state.
 *
 * The decisions write the states they would leave into `next`; when the
 * batch is admitted, an op whose key exists with an inline state and
 * appears once in the batch is charged by copying that state in (its
 * result is already the charge's). The rest (new keys, out-of-line
 * states, a key named twice) are decided again as they are charged, in
 * batch order, after those copies, since creating a key may move entries. */
static weir_status run_atomic(memstore *ms, weir_op *ops, size_t n, int64_t now_us, unsigned flags)
{
    if (n == 0 || n > MAX_ATOMIC_OPS)
        return WEIR_EINVAL;
    digest d[MAX_ATOMIC_OPS];
    entry *found[MAX_ATOMIC_OPS];
    bool copy[MAX_ATOMIC_OPS];
    union {
        int64_t align;
        unsigned char b[WEIR_STATE_FIXED_BYTES];
    } next[MAX_ATOMIC_OPS];
    int64_t t[MAX_ATOMIC_OPS];
    uint32_t locks[MAX_ATOMIC_OPS];
    size_t nlocks = n;
    /* the engine's batches are valid by construction and already fetched */
    bool planned = (flags & WEIR__BATCH_PLANNED) != 0;
    for (size_t i = 0; i < n; i++) {
        if (!planned && (!op_valid(&ops[i], flags) ||
                         (ops[i].kind != WEIR_OP_TAKE && ops[i].kind != WEIR_OP_CHECK)))
            return WEIR_EINVAL;
        d[i] = op_digest(ms, &ops[i], flags);
        if (!planned)
            prefetch_buckets(ms, &d[i]);
        locks[i] = d[i].shard;
    }
    sort_shards(locks, nlocks);
    size_t u = 1;
    for (size_t i = 1; i < nlocks; i++)
        if (locks[i] != locks[u - 1])
            locks[u++] = locks[i];
    /* The same key twice needs the same shard twice: with every op in a
     * shard of its own (the usual case) no pair needs comparing. */
    bool shared_shard = u < nlocks;
    nlocks = u;
    for (size_t i = 0; i < nlocks; i++)
        weir__spin_lock(&ms->shards[locks[i]].lock);

    bool denied = false;
    size_t n_copy = 0;
    /* Last op first: the decisions are independent (each writes only its
     * own result and next state), and the first ops' buckets were asked
     * for first, so their misses get the longest start. */
    for (size_t i = n; i-- > 0;) {
        weir_op *op = &ops[i];
        shard *sh = &ms->shards[d[i].shard];
        /* the shard's clock (shard_now()), advanced only if all is charged */
        t[i] = now_us < sh->last_now_us ? sh->last_now_us : now_us;
        /* The same key twice in one batch is charged for both. */
        uint64_t hits = op->hits;
        bool twice = false;
        for (size_t j = 0; shared_shard && j < n; j++)
            if (j != i && same_digest(&d[j], &d[i])) {
                twice = true;
                if (j < i && op->kind == WEIR_OP_TAKE && ops[j].kind == WEIR_OP_TAKE)
                    hits += ops[j].hits;
            }
        entry *e = find(sh, &d[i]);
        const void *state = zero_state.b;
        found[i] = NULL;
        if (e && state_matches(e, op->limit)) {
            state = entry_state(e);
            found[i] = e;
        }
        bool take = op->kind == WEIR_OP_TAKE;
        copy[i] = take && found[i] && !(found[i]->check & F_BLOB) && !twice;
        n_copy += copy[i];
        /* a step may write only the fields it changes */
        if (copy[i])
            memcpy(next[i].b, state, sizeof(next[i].b));
        /* a TAKE's reserve stays free after the key's TAKEs so far and its own */
        op->status = weir__decide_reserve(op->limit, state, copy[i] ? next[i].b : NULL, t[i], hits,
                                          take ? op->reserve : 0, &op->result);
        if (op->status == WEIR_OK && take && !op->result.allowed)
            denied = true;
    }
    /* Denied: nothing is charged, so the ops that would have admitted
     * report their state as it stays (a look with no hits), not as it
     * would have been after a charge that never happens. */
    for (size_t i = 0; denied && i < n; i++) {
        weir_op *op = &ops[i];
        if (op->status != WEIR_OK || op->kind != WEIR_OP_TAKE || !op->result.allowed)
            continue;
        const void *state = found[i] ? entry_state(found[i]) : zero_state.b;
        op->status = weir__decide(op->limit, state, NULL, t[i], 0, &op->result);
    }
    for (size_t i = 0; !denied && i < n; i++) {
        if (!copy[i] || ops[i].status != WEIR_OK)
            continue;
        shard *sh = &ms->shards[d[i].shard];
        sh->last_now_us = t[i];
        /* a decision that charges nothing (hits 0) writes no state */
        if (ops[i].hits > 0)
            memcpy(found[i]->st.b, next[i].b, sizeof(next[i].b));
        note_decision(sh, found[i], t[i], &ops[i].result);
    }
    /* the rest, when some op could not be charged by a copy */
    for (size_t i = 0; !denied && n_copy < n && i < n; i++) {
        if (copy[i])
            continue;
        run_locked(ms, &ms->shards[d[i].shard], &ops[i], &d[i], now_us);
    }

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
        return run_atomic(ms, ops, n, now_us, flags);
    run_independent(ms, ops, n, now_us, flags);
    return WEIR_OK;
}

static weir_status mem_run_planned(weir_store *store, weir_op *ops, size_t n, int64_t now_us)
{
    return run_atomic((memstore *)store, ops, n, now_us,
                      WEIR_BATCH_ATOMIC | WEIR_BATCH_DIGESTS | WEIR__BATCH_PLANNED);
}

weir_status weir_memstore_take(weir_store *store, const void *key, size_t key_len,
                               const weir_limit *lim, int64_t now_us, uint64_t hits,
                               weir_result *res)
{
    if (!is_mem(store) || !res || !key || key_len == 0 || key_len > WEIR_MAX_KEY_BYTES || !lim ||
        (unsigned)lim->algorithm - 1u >= WEIR_ALGORITHM_COUNT)
        return WEIR_EINVAL;
    memstore *ms = (memstore *)store;
    digest d = digest_of(ms, key, key_len);
    shard *sh = &ms->shards[d.shard];
    /* Ask for the lock's line too: when another thread decided in the shard
     * last, its move from that core overlaps the rest of the set-up and
     * the bucket miss. A read prefetch, measured (bench/ab -T): 2T/1T
     * 1.02-1.04x; a prefetch for writing was no better than none. */
    __builtin_prefetch(&sh->lock, 0);
    /* Find the key's buckets and start fetching them before the lock: a
     * prefetch is not ordered with the lock's locked instruction, so the
     * miss overlaps it. The table may be rebuilt meanwhile; then look again
     * under the lock. */
    bucket *t = __atomic_load_n(&sh->table, __ATOMIC_RELAXED);
    uint32_t nb = __atomic_load_n(&sh->nbuckets, __ATOMIC_RELAXED);
    uint32_t b1, b2;
    buckets_of(d.tag, nb, &b1, &b2);
    prefetch_pair(&t[b1], &t[b2]);
    weir__spin_lock(&sh->lock);
    entry *e = (sh->table == t && sh->nbuckets == nb) ? find_in(&t[b1], &t[b2], &d) : find(sh, &d);
    weir_status st;
    if (take_existing(sh, e, lim, now_us, hits, 0, res, &st)) {
        weir__spin_unlock(&sh->lock);
        return st;
    }
    weir_op op = {.key = key, .key_len = key_len, .limit = lim, .hits = hits};
    run_locked(ms, sh, &op, &d, now_us);
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
        uint32_t n = nslots(sh);
        uint32_t steps = n < budget ? n : (uint32_t)budget;
        int64_t t = shard_now(sh, now_us);
        removed += sweep_steps(ms, sh, tick_floor(t), steps);
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
    out->bytes = fixed_bytes(ms->nshards) + (ms->arena ? weir__arena_slack(ms->arena) : 0);
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
    if (sh->table)
        for (uint32_t i = 0, n = nslots(sh); i < n; i++) {
            entry *e = slot_at(sh, i);
            if ((e->check & F_BLOB) && algo_of(e) != 0)
                weir__free(ms->base.ctx, e->st.blob.ptr);
        }
    if (sh->table_raw)
        free_table(ms, sh->table_raw, sh->nbuckets);
}

static void mem_destroy(weir_store *s)
{
    memstore *ms = (memstore *)s;
    if (ms->shards)
        for (uint32_t i = 0; i < ms->nshards; i++)
            shard_destroy(ms, &ms->shards[i]);
    weir__arena_free(ms->arena);
    weir__free(ms->base.ctx, ms->shards_raw);
    weir__free(ms->base.ctx, ms);
}

/* Entries examined per weir_store_maintain(): a bounded pause, enough
 * to keep pace with a store of millions of keys at one call a second. */
#define MAINTAIN_SWEEP 65536u

static void mem_maintain(weir_store *s, int64_t now_us)
{
    weir_memstore_sweep(s, now_us, MAINTAIN_SWEEP);
}

static const weir__store_ops mem_ops = {
    .caps = WEIR_STORE_INLINE,
    .submit = mem_submit,
    .maintain = mem_maintain,
    .stats = mem_stats,
    .destroy = mem_destroy,
    .prefetch = mem_prefetch,
    .run_planned = mem_run_planned,
};

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
    ms->base.ctx = ctx;
    ms->nshards = n;
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
    if (!ms->shards_raw || (!o.max_bytes && !(ms->arena = weir__arena_new(ctx)))) {
        weir__free(ctx, ms->shards_raw);
        weir__free(ctx, ms);
        return WEIR_ENOMEM;
    }
    ms->shards = (shard *)(((uintptr_t)ms->shards_raw + 63u) & ~(uintptr_t)63u);
    for (uint32_t i = 0; i < n; i++) {
        shard *sh = &ms->shards[i];
        uint32_t nb = MIN_BUCKETS;
        sh->table = alloc_table(ms, &nb, &sh->table_raw);
        if (!sh->table) {
            mem_destroy(&ms->base);
            return WEIR_ENOMEM;
        }
        sh->nbuckets = nb;
        sh->next_rest = NO_REST;
        sh->bytes = table_cost(nb);
        sh->rng = (uint64_t)i * 0x9e3779b97f4a7c15ull ^ o.seed;
    }
    *out = &ms->base;
    return WEIR_OK;
}
