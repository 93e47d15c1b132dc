/*
 * test_table_arena.c - the memory store's arena of mid-sized tables: slot
 * sizes, alignment, zeroing, no overlap, slack, chunks freed with their
 * last table, and running out of memory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fake.h"
#include "store/table_arena.h"

#define CHUNK WEIR__ARENA_CHUNK_BYTES

typedef struct fixture {
    counting_alloc ca;
    weir_ctx *ctx;
} fixture;

/* An arena on a counting allocator. */
static weir__arena *open_arena(fixture *f)
{
    assert_int_equal(counting_ctx_new(&f->ca, &f->ctx), WEIR_OK);
    weir__arena *a = weir__arena_new(f->ctx);
    assert_non_null(a);
    return a;
}

/* Free the arena; nothing of it may be left. */
static void close_arena(fixture *f, weir__arena *a)
{
    weir__arena_free(a);
    weir_ctx_free(f->ctx);
    assert_int_equal(f->ca.live_blocks, 0);
}

static bool all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

/* Every size the arena holds gets a slot at least that big, at most a
 * fifteenth bigger, a multiple of 128 bytes; sizes outside get nothing. */
static void slot_sizes(void **unused)
{
    (void)unused;
    fixture f;
    weir__arena *a = open_arena(&f);
    for (size_t want = WEIR__ARENA_MIN_BYTES; want <= WEIR__ARENA_MAX_BYTES;
         want += 9 * 1024 + 77) {
        size_t got = want;
        void *t = weir__arena_alloc(a, &got);
        assert_non_null(t);
        assert_true(got >= want);
        assert_true(got - want <= want / 15);
        assert_true(weir__arena_holds(got)); /* so it is freed to the arena */
        assert_int_equal(got % 128, 0);
        assert_int_equal((uintptr_t)t % 128, 0);
        size_t again = want; /* the same request, the same size */
        void *u = weir__arena_alloc(a, &again);
        assert_int_equal(again, got);
        weir__arena_release(a, u, again);
        weir__arena_release(a, t, got);
    }
    /* just under an exact share of a page, not a multiple of 128 bytes */
    for (size_t k = 2; k < CHUNK / WEIR__ARENA_MIN_BYTES; k++) {
        size_t want = CHUNK / k - 10, got = want;
        void *t = weir__arena_alloc(a, &got);
        assert_non_null(t);
        assert_true(got >= want);
        weir__arena_release(a, t, got);
    }
    assert_int_equal(weir__arena_slack(a), 0);
    size_t small = WEIR__ARENA_MIN_BYTES - 128, big = WEIR__ARENA_MAX_BYTES + 128;
    assert_null(weir__arena_alloc(a, &small));
    assert_null(weir__arena_alloc(a, &big));
    close_arena(&f, a);
}

/* Tables of one size fill chunks side by side, each zeroed and apart from
 * the others; slack is what the chunks hold beyond the tables, and a chunk
 * goes with its last table. */
static void tables_share_chunks(void **unused)
{
    (void)unused;
    fixture f;
    weir__arena *a = open_arena(&f);
    int64_t base_blocks = f.ca.live_blocks;
    enum { N = 24 };
    unsigned char *t[N];
    size_t size = 512u << 10;
    for (int i = 0; i < N; i++) {
        size_t got = size;
        t[i] = weir__arena_alloc(a, &got);
        assert_non_null(t[i]);
        assert_int_equal(got, size); /* four to a page exactly */
        assert_true(all_zero(t[i], size));
        memset(t[i], i + 1, size);
        uint64_t held = (uint64_t)(i + 1) * size;
        assert_int_equal((weir__arena_slack(a) + held) % CHUNK, 0);
    }
    for (int i = 0; i < N; i++) {
        assert_int_equal(t[i][0], i + 1);
        assert_int_equal(t[i][size - 1], i + 1);
    }
    /* 24 tables of a quarter page: six chunks of one page, no slack */
    assert_int_equal(weir__arena_slack(a), 0);
    assert_int_equal(f.ca.live_blocks - base_blocks, 2 * N / 4);
    /* freeing three of a chunk's four leaves it; the fourth frees it */
    for (int i = 0; i < 3; i++)
        weir__arena_release(a, t[i], size);
    assert_int_equal(weir__arena_slack(a), 3 * size);
    size_t got = size;
    unsigned char *again = weir__arena_alloc(a, &got); /* a freed slot, zeroed */
    assert_non_null(again);
    assert_true(all_zero(again, size));
    assert_int_equal(weir__arena_slack(a), 2 * size);
    weir__arena_release(a, again, size);
    weir__arena_release(a, t[3], size);
    assert_int_equal(weir__arena_slack(a), 0);
    assert_int_equal(f.ca.live_blocks - base_blocks, 2 * (N / 4 - 1));
    for (int i = 4; i < N; i++)
        weir__arena_release(a, t[i], size);
    assert_int_equal(f.ca.live_blocks, base_blocks);
    close_arena(&f, a);
}

/* Out of memory: NULL, nothing leaked, and the arena still serves. */
static void out_of_memory(void **unused)
{
    (void)unused;
    fixture f;
    weir__arena *a = open_arena(&f);
    int64_t base_blocks = f.ca.live_blocks;
    for (int fail = 1; fail <= 2; fail++) {
        f.ca.fail_after = fail;
        size_t got = 700u << 10;
        assert_null(weir__arena_alloc(a, &got));
        f.ca.fail_after = 0;
        assert_int_equal(f.ca.live_blocks, base_blocks);
        assert_int_equal(weir__arena_slack(a), 0);
    }
    size_t got = 700u << 10;
    void *t = weir__arena_alloc(a, &got);
    assert_non_null(t);
    weir__arena_release(a, t, got);
    close_arena(&f, a);
}

/* Freeing the arena frees the chunks still holding tables. */
static void free_with_tables_held(void **unused)
{
    (void)unused;
    fixture f;
    weir__arena *a = open_arena(&f);
    for (size_t size = WEIR__ARENA_MIN_BYTES; size <= WEIR__ARENA_MAX_BYTES; size *= 2) {
        size_t got = size;
        assert_non_null(weir__arena_alloc(a, &got));
    }
    weir__arena_free(NULL);
    close_arena(&f, a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(slot_sizes),
        cmocka_unit_test(tables_share_chunks),
        cmocka_unit_test(out_of_memory),
        cmocka_unit_test(free_with_tables_held),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
