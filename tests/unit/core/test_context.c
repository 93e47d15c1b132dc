/*
 * test_context.c - status strings, contexts, the clamped context clock and
 * the per-context allocator.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fake.h"
#include "weir/weir.h"

static void status_strings(void **unused)
{
    (void)unused;
    assert_string_equal(weir_strerror(WEIR_OK), "success");
    assert_string_equal(weir_status_name(WEIR_EINVAL), "WEIR_EINVAL");
    assert_string_equal(weir_strerror((weir_status)-999), "unknown status");
    assert_string_equal(weir_status_name((weir_status)-999), "WEIR_UNKNOWN");
    /* every listed status has a distinct, non-empty message */
#define CHECK_(name, num, msg)                           \
    assert_true(strlen(weir_strerror(WEIR_##name)) > 0); \
    assert_int_equal((int)WEIR_##name, num);
    WEIR_STATUS_MAP(CHECK_)
#undef CHECK_
}

static void clock_never_goes_back(void **unused)
{
    (void)unused;
    fake_clock fc = {1000};
    weir_ctx_options o = {.size = sizeof(o), .clock = fake_clock_read, .clock_ud = &fc};
    weir_ctx *ctx;
    assert_int_equal(weir_ctx_new(&o, &ctx), WEIR_OK);
    assert_int_equal(weir_ctx_now_us(ctx), 1000);
    fc.now_us = 500; /* stepped back */
    assert_int_equal(weir_ctx_now_us(ctx), 1000);
    fc.now_us = 2000;
    assert_int_equal(weir_ctx_now_us(ctx), 2000);
    weir_ctx_free(ctx);
    weir_ctx_free(NULL);
}

static void options_size_checked(void **unused)
{
    (void)unused;
    weir_ctx *ctx = NULL;
    weir_ctx_options o = {.size = 3};
    assert_int_equal(weir_ctx_new(&o, &ctx), WEIR_EINVAL);
    assert_null(ctx);
    assert_int_equal(weir_ctx_new(NULL, NULL), WEIR_EINVAL);
    assert_int_equal(weir_ctx_new(NULL, &ctx), WEIR_OK);
    assert_true(weir_ctx_now_us(ctx) > 1600000000LL * 1000000LL); /* the wall clock */
    weir_ctx_free(ctx);
}

static void allocator_is_used_and_balanced(void **unused)
{
    (void)unused;
    counting_alloc ca;
    counting_alloc_init(&ca);
    weir_ctx_options o = {.size = sizeof(o), .allocator = &ca.a};
    weir_ctx *ctx;
    assert_int_equal(weir_ctx_new(&o, &ctx), WEIR_OK);
    assert_true(ca.live_blocks == 1);
    weir_store *st;
    assert_int_equal(weir_memstore_new(ctx, NULL, &st), WEIR_OK);
    assert_true(ca.live_blocks > 1);
    weir_store_free(st);
    weir_ctx_free(ctx);
    assert_int_equal(ca.live_blocks, 0);
    assert_int_equal(ca.live_bytes, 0);
}

static void allocation_failure_is_an_error(void **unused)
{
    (void)unused;
    counting_alloc ca;
    counting_alloc_init(&ca);
    ca.fail_after = 1;
    weir_ctx_options o = {.size = sizeof(o), .allocator = &ca.a};
    weir_ctx *ctx = NULL;
    assert_int_equal(weir_ctx_new(&o, &ctx), WEIR_ENOMEM);
    assert_null(ctx);
    assert_int_equal(ca.live_blocks, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(status_strings),
        cmocka_unit_test(clock_never_goes_back),
        cmocka_unit_test(options_size_checked),
        cmocka_unit_test(allocator_is_used_and_balanced),
        cmocka_unit_test(allocation_failure_is_an_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
