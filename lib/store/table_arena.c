/*
 * table_arena.c - mid-sized tables sharing 2 MB pages (see table_arena.h).
 *
 * Hand-written rather than left to malloc: malloc places a block of this
 * size in a mapping of its own at an address of its choosing, so no
 * allocator call can ask for "with the other tables of its size, on one
 * 2 MB-aligned page", which is the whole point. (aligned_alloc() could
 * align a large table, but not through the context's allocator, and its
 * room could not be given back.) The arena is small on
 * purpose: a chunk holds 2 to 32 slots of one size, marked in one word,
 * and a store has a few dozen chunks at most, found by a short walk.
 *
 * Invariant: a chunk is on the list iff at least one of its slots holds a
 * table; slack is the sum over the chunks of their bytes not holding one.
 */
#define _GNU_SOURCE
#include "store/table_arena.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>

typedef struct chunk {
    struct chunk *next;
    void *raw;      /* the allocation */
    char *base;     /* its 2 MB-aligned interior */
    size_t span;    /* bytes from base: whole 2 MB pages */
    size_t size;    /* of each slot */
    uint32_t slots; /* 2 .. 32 */
    uint32_t used;  /* bit i: slot i holds a table */
} chunk;

struct weir__arena {
    weir_ctx *ctx;
    pthread_mutex_t mu;
    chunk *chunks;
    uint64_t slack;
};

_Static_assert(WEIR__ARENA_CHUNK_BYTES / WEIR__ARENA_MIN_BYTES <= 32,
               "a one-page chunk's slots fit a word");
_Static_assert(WEIR__ARENA_CHUNK_BYTES / WEIR__ARENA_MAX_BYTES >= 2, "a page holds two tables");

weir__arena *weir__arena_new(weir_ctx *ctx)
{
    weir__arena *a = weir__calloc(ctx, 1, sizeof(*a));
    if (!a)
        return NULL;
    if (pthread_mutex_init(&a->mu, NULL) != 0) {
        weir__free(ctx, a);
        return NULL;
    }
    a->ctx = ctx;
    return a;
}

/* The whole pages inside [lo, hi), part of one of our allocations and
 * never to be read, back to the system: an allocator that recycled them
 * from freed memory would otherwise keep them resident for nothing. The
 * pages at either end, which may hold the allocator's own headers, are
 * kept. */
static void give_back(void *lo, void *hi)
{
    uintptr_t page = 4096u, a = ((uintptr_t)lo + page - 1u) & ~(page - 1u),
              b = (uintptr_t)hi & ~(page - 1u);
    if (b > a)
        madvise((void *)a, b - a, MADV_DONTNEED);
}

/* A pointer rounded up to the next huge page boundary. */
static char *huge_aligned(void *p)
{
    uintptr_t mask = WEIR__ARENA_CHUNK_BYTES - 1u;
    return (char *)(((uintptr_t)p + mask) & ~mask);
}

/* The chunk's pages go back to the system first: an allocator that keeps
 * freed memory (as malloc does below its mapping threshold, which rises
 * with the sizes it has freed) would keep them resident otherwise. */
static void chunk_free(weir__arena *a, chunk *c)
{
    give_back(c->base, c->base + c->span);
    weir__free(a->ctx, c->raw);
    weir__free(a->ctx, c);
}

void weir__arena_free(weir__arena *a)
{
    if (!a)
        return;
    for (chunk *c = a->chunks, *next; c; c = next) {
        next = c->next;
        chunk_free(a, c);
    }
    pthread_mutex_destroy(&a->mu);
    weir__free(a->ctx, a);
}

static uint32_t full_mask(uint32_t slots)
{
    return slots == 32 ? UINT32_MAX : (1u << slots) - 1u;
}

/* The shape of the chunks for tables of at least `bytes`: the fewest 2 MB
 * pages (up to MAX_PAGES, and at most 32 slots) whose equal shares waste
 * at most a sixteenth of the chunk, else the least wasteful; the slot is
 * the share rounded down to 128 bytes. A size just over a third of a page
 * would waste a third of a one-page chunk, and rounding it up to half a
 * page would grow the table by half instead of a quarter. */
#define MAX_PAGES 8u

typedef struct shape {
    size_t slot;
    uint32_t pages, slots;
} shape;

static shape shape_of(size_t bytes)
{
    shape best = {0, 0, 0};
    size_t best_waste = SIZE_MAX;
    for (uint32_t pages = 1; pages <= MAX_PAGES; pages++) {
        size_t span = (size_t)pages * WEIR__ARENA_CHUNK_BYTES, slots = span / bytes;
        if (slots > 32)
            break;
        size_t waste = span - slots * bytes;
        if (waste < best_waste) {
            best = (shape){(span / slots) & ~(size_t)127u, pages, (uint32_t)slots};
            best_waste = waste;
        }
        if (waste <= span / 16)
            break;
    }
    return best;
}

/* A new chunk of this shape, first on the list; NULL when out of memory.
 * The allocation is a page longer than the chunk, so that it holds a
 * 2 MB-aligned chunk wherever it starts; its bytes outside the chunk are
 * never used. */
static chunk *chunk_new(weir__arena *a, shape sh)
{
    chunk *c = weir__calloc(a->ctx, 1, sizeof(*c));
    if (!c)
        return NULL;
    c->span = (size_t)sh.pages * WEIR__ARENA_CHUNK_BYTES;
    c->raw = weir__malloc(a->ctx, c->span + WEIR__ARENA_CHUNK_BYTES);
    if (!c->raw) {
        weir__free(a->ctx, c);
        return NULL;
    }
    c->base = huge_aligned(c->raw);
    /* all of it, the chunk too (each slot is zeroed when handed out): see
     * weir__table_alloc_large() */
    give_back(c->raw, (char *)c->raw + c->span + WEIR__ARENA_CHUNK_BYTES);
#ifdef MADV_HUGEPAGE
    /* a hint: where the system grants no huge page, 4 KB pages serve */
    madvise(c->base, c->span, MADV_HUGEPAGE);
#endif
    c->size = sh.slot;
    c->slots = sh.slots;
    c->next = a->chunks;
    a->chunks = c;
    a->slack += c->span;
    return c;
}

void *weir__arena_alloc(weir__arena *a, size_t *want)
{
    if (!weir__arena_holds(*want))
        return NULL;
    /* slots are whole multiples of 128 bytes: so is what they must hold */
    shape sh = shape_of((*want + 127u) & ~(size_t)127u);
    *want = sh.slot;
    pthread_mutex_lock(&a->mu);
    chunk *c = a->chunks;
    while (c && (c->size != sh.slot || c->used == full_mask(c->slots)))
        c = c->next;
    if (!c)
        c = chunk_new(a, sh);
    void *t = NULL;
    if (c) {
        uint32_t i = (uint32_t)__builtin_ctz(~c->used);
        c->used |= 1u << i;
        a->slack -= sh.slot;
        t = c->base + (size_t)i * sh.slot;
    }
    pthread_mutex_unlock(&a->mu);
    if (t)
        memset(t, 0, sh.slot);
    return t;
}

void weir__arena_release(weir__arena *a, void *table, size_t bytes)
{
    if (!table)
        return;
    char *p = table;
    pthread_mutex_lock(&a->mu);
    for (chunk **link = &a->chunks; *link; link = &(*link)->next) {
        chunk *c = *link;
        if (c->size != bytes || p < c->base || p >= c->base + c->span)
            continue;
        c->used &= ~(1u << (uint32_t)((size_t)(p - c->base) / bytes));
        a->slack += bytes;
        if (c->used == 0) {
            *link = c->next;
            a->slack -= c->span;
            chunk_free(a, c);
        }
        break;
    }
    pthread_mutex_unlock(&a->mu);
}

void *weir__table_alloc_large(weir_ctx *ctx, size_t *bytes, bool round, void **raw)
{
    size_t want = *bytes, huge = WEIR__ARENA_CHUNK_BYTES;
    size_t whole = (want + huge - 1u) / huge * huge;
    if (round && (whole - want) * 16u <= whole)
        want = whole;
    if (want > SIZE_MAX - huge || !(*raw = weir__malloc(ctx, want + huge)))
        return NULL;
    char *t = huge_aligned(*raw);
    /* All of it, the table too: memory the allocator recycles may be
     * resident on 4 KB pages, which advice would not replace. Touched
     * again below, the table's pages come fresh, huge where granted. */
    give_back(*raw, (char *)*raw + want + huge);
#ifdef MADV_HUGEPAGE
    /* a hint: where the system grants no huge page, 4 KB pages serve */
    madvise(t, want, MADV_HUGEPAGE);
#endif
    memset(t, 0, want);
    *bytes = want;
    return t;
}

void weir__table_free_large(weir_ctx *ctx, void *raw, size_t bytes)
{
    if (!raw)
        return;
    char *t = huge_aligned(raw);
    give_back(t, t + bytes);
    weir__free(ctx, raw);
}

uint64_t weir__arena_slack(weir__arena *a)
{
    pthread_mutex_lock(&a->mu);
    uint64_t s = a->slack;
    pthread_mutex_unlock(&a->mu);
    return s;
}
