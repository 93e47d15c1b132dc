/*
 * fake.c - test support helpers (see fake.h).
 */
#include "fake.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int64_t fake_clock_read(void *ud)
{
    return ((fake_clock *)ud)->now_us;
}

uint64_t rng_next(test_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t rng_below(test_rng *r, uint64_t n)
{
    return rng_next(r) % n;
}

uint64_t test_seed(const char *test_name)
{
    const char *env = getenv("WEIR_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)clock();
    printf("%s: seed %llu (replay with WEIR_TEST_SEED=%llu)\n", test_name, (unsigned long long)seed,
           (unsigned long long)seed);
    fflush(stdout);
    return seed;
}

/* Each block carries its size in a 16-byte header. */
static void *c_malloc(void *ud, size_t size)
{
    counting_alloc *c = ud;
    if (c->fail_after > 0 && --c->fail_after == 0)
        return NULL;
    unsigned char *p = malloc(size + 16);
    if (!p)
        return NULL;
    memcpy(p, &size, sizeof(size));
    c->live_bytes += (int64_t)size;
    c->live_blocks++;
    return p + 16;
}

static void c_free(void *ud, void *ptr)
{
    counting_alloc *c = ud;
    if (!ptr)
        return;
    unsigned char *p = (unsigned char *)ptr - 16;
    size_t size;
    memcpy(&size, p, sizeof(size));
    c->live_bytes -= (int64_t)size;
    c->live_blocks--;
    free(p);
}

static void *c_realloc(void *ud, void *ptr, size_t size)
{
    if (!ptr)
        return c_malloc(ud, size);
    unsigned char *old = (unsigned char *)ptr - 16;
    size_t old_size;
    memcpy(&old_size, old, sizeof(old_size));
    void *n = c_malloc(ud, size);
    if (!n)
        return NULL;
    memcpy(n, ptr, old_size < size ? old_size : size);
    c_free(ud, ptr);
    return n;
}

void counting_alloc_init(counting_alloc *c)
{
    memset(c, 0, sizeof(*c));
    c->a.malloc_fn = c_malloc;
    c->a.realloc_fn = c_realloc;
    c->a.free_fn = c_free;
    c->a.ud = c;
}

weir_status counting_ctx_new(counting_alloc *c, weir_ctx **out)
{
    counting_alloc_init(c);
    weir_ctx_options o = {.size = sizeof(o), .allocator = &c->a};
    return weir_ctx_new(&o, out);
}
