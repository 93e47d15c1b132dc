/*
 * arena.c - a bump allocator over one anonymous mapping advised for
 * transparent huge pages, for `weir-bench --hugepages`.
 *
 * It exists to measure what TLB misses cost: the store allocates through
 * its context's allocator, so giving the context this one puts every table
 * and entry chunk on 2 MB pages without touching the library. free() is a
 * no-op and realloc() copies; the whole arena goes at once when its store
 * is done. Thread-safe (one atomic bump). Invariant: off <= cap, every
 * block is 16-byte aligned and preceded by a 16-byte header with its size.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bench.h"

#define HUGE_PAGE (2u << 20)
#define HEADER 16u

struct bench_arena {
    char *map;
    size_t map_bytes;
    char *base; /* map rounded up to a huge page */
    size_t cap;
    atomic_size_t off;
};

bench_arena *bench_arena_new(size_t cap)
{
    bench_arena *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    a->map_bytes = cap + HUGE_PAGE;
    void *m = mmap(NULL, a->map_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        free(a);
        return NULL;
    }
    a->map = m;
    a->base = (char *)(((uintptr_t)m + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    a->cap = cap;
    /* Best effort: without THP the arena still works, on 4 KB pages. */
    (void)madvise(a->base, cap, MADV_HUGEPAGE);
    return a;
}

void bench_arena_free(bench_arena *a)
{
    if (!a)
        return;
    munmap(a->map, a->map_bytes);
    free(a);
}

void *bench_arena_alloc(bench_arena *a, size_t size)
{
    size_t need = HEADER + ((size + 15u) & ~(size_t)15u);
    size_t at = atomic_fetch_add_explicit(&a->off, need, memory_order_relaxed);
    if (at + need > a->cap || at + need < at)
        return NULL;
    char *p = a->base + at;
    memcpy(p, &size, sizeof(size));
    return p + HEADER;
}

static void *arena_malloc(void *ud, size_t size)
{
    return bench_arena_alloc(ud, size);
}

static void *arena_realloc(void *ud, void *ptr, size_t size)
{
    void *n = bench_arena_alloc(ud, size);
    if (n && ptr) {
        size_t old;
        memcpy(&old, (char *)ptr - HEADER, sizeof(old));
        memcpy(n, ptr, old < size ? old : size);
    }
    return n;
}

static void arena_free(void *ud, void *ptr)
{
    (void)ud;
    (void)ptr;
}

weir_allocator bench_arena_allocator(bench_arena *a)
{
    weir_allocator al = {arena_malloc, arena_realloc, arena_free, a};
    return al;
}
