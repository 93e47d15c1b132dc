/*
 * test_concurrency.c - exact verdicts of the concurrency limiter on
 * hand-built traces: acquires that return leases, releases, and leases
 * reaped after the lease timeout (the limit's window).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "weir/weir.h"

#define S ((int64_t)1000000) /* one second in microseconds */

static weir_limit compile(uint64_t limit, int64_t window_us)
{
    weir_limit_spec spec = {
        .algorithm = WEIR_ALGO_CONCURRENCY, .limit = limit, .window_us = window_us};
    weir_limit lim;
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_OK);
    assert_int_equal(weir_state_size(&lim), 16 + 24 * limit);
    return lim;
}

static uint64_t *fresh(const weir_limit *lim)
{
    uint64_t *p = calloc(1, weir_state_size(lim));
    assert_non_null(p);
    return p;
}

static weir_result step(const weir_limit *lim, void *state, int64_t now, uint64_t hits)
{
    weir_result r;
    assert_int_equal(weir_step(lim, state, now, hits, &r), WEIR_OK);
    assert_int_equal(r.delay_us, 0);
    assert_int_equal(r.limit, lim->limit);
    return r;
}

static weir_result check(const weir_limit *lim, const void *state, int64_t now, uint64_t hits)
{
    size_t n = weir_state_size(lim);
    void *before = malloc(n);
    assert_non_null(before);
    memcpy(before, state, n);
    weir_result r;
    assert_int_equal(weir_check(lim, state, now, hits, &r), WEIR_OK);
    assert_memory_equal(before, state, n);
    free(before);
    assert_int_equal(r.lease, 0);
    return r;
}

static weir_result release(const weir_limit *lim, void *state, int64_t now, uint64_t lease)
{
    weir_result r;
    assert_int_equal(weir_release(lim, state, now, lease, &r), WEIR_OK);
    assert_true(r.allowed);
    assert_int_equal(r.lease, 0);
    assert_int_equal(r.retry_after_us, 0);
    assert_int_equal(r.limit, lim->limit);
    return r;
}

static weir_status release_status(const weir_limit *lim, void *state, int64_t now, uint64_t lease)
{
    weir_result r;
    memset(&r, 0x5a, sizeof(r));
    weir_result saved = r;
    weir_status st = weir_release(lim, state, now, lease, &r);
    if (st != WEIR_OK)
        assert_memory_equal(&r, &saved, sizeof(r));
    return st;
}

/* allowed, lease, remaining, retry_after_us, reset_after_us */
#define EXPECT(res, ok, id, rem, retry, reset)        \
    do {                                              \
        weir_result r_ = (res);                       \
        assert_int_equal(r_.allowed, (ok));           \
        assert_int_equal(r_.lease, (id));             \
        assert_int_equal(r_.remaining, (rem));        \
        assert_int_equal(r_.retry_after_us, (retry)); \
        assert_int_equal(r_.reset_after_us, (reset)); \
    } while (0)

static void acquire_and_release(void **unused)
{
    (void)unused;
    weir_limit lim = compile(3, 10 * S);
    uint64_t *st = fresh(&lim);
    EXPECT(step(&lim, st, 0, 1), true, 1, 2, 0, 10 * S);
    EXPECT(step(&lim, st, S, 2), true, 2, 0, 0, 10 * S);
    /* full: lease 1 times out at 10 s */
    EXPECT(step(&lim, st, 2 * S, 1), false, 0, 0, 8 * S, 9 * S);
    EXPECT(release(&lim, st, 3 * S, 1), true, 0, 1, 0, 8 * S);
    assert_int_equal(release_status(&lim, st, 3 * S, 1), WEIR_ENOLEASE);
    EXPECT(step(&lim, st, 4 * S, 1), true, 3, 0, 0, 10 * S);
    /* two units come back when lease 2 (2 units) times out at 11 s */
    EXPECT(step(&lim, st, 4 * S, 2), false, 0, 0, 7 * S, 10 * S);
    EXPECT(check(&lim, st, 11 * S, 2), true, 0, 0, 0, 10 * S);
    EXPECT(check(&lim, st, 11 * S, 0), true, 0, 2, 0, 3 * S);
    /* lease 2 was reaped: releasing it is too late */
    assert_int_equal(release_status(&lim, st, 12 * S, 2), WEIR_ENOLEASE);
    EXPECT(release(&lim, st, 12 * S, 3), true, 0, 3, 0, 0);
    assert_int_equal(release_status(&lim, st, 12 * S, 999), WEIR_ENOLEASE);
    assert_int_equal(release_status(&lim, st, 12 * S, 0), WEIR_ENOLEASE);
    free(st);
}

static void reaped_leases_free_capacity(void **unused)
{
    (void)unused;
    weir_limit lim = compile(2, S);
    uint64_t *st = fresh(&lim);
    EXPECT(step(&lim, st, 0, 2), true, 1, 0, 0, S);
    EXPECT(step(&lim, st, S - 1, 1), false, 0, 0, 1, 1);
    EXPECT(step(&lim, st, S, 2), true, 2, 0, 0, S);
    assert_int_equal(release_status(&lim, st, S, 1), WEIR_ENOLEASE);
    EXPECT(release(&lim, st, S, 2), true, 0, 2, 0, 0);
    assert_int_equal(release_status(&lim, st, S, 2), WEIR_ENOLEASE);
    free(st);
}

static void limit_one(void **unused)
{
    (void)unused;
    weir_limit lim = compile(1, S);
    uint64_t *st = fresh(&lim);
    EXPECT(step(&lim, st, 0, 1), true, 1, 0, 0, S);
    EXPECT(step(&lim, st, 0, 1), false, 0, 0, S, S);
    EXPECT(release(&lim, st, 10, 1), true, 0, 1, 0, 0);
    EXPECT(step(&lim, st, 10, 1), true, 2, 0, 0, S);
    free(st);
}

static void costs(void **unused)
{
    (void)unused;
    weir_limit lim = compile(4, S);
    uint64_t *st = fresh(&lim);
    uint64_t *zero = fresh(&lim);
    EXPECT(step(&lim, st, 0, 5), false, 0, 4, WEIR_NEVER, 0);
    EXPECT(step(&lim, st, 0, UINT64_MAX), false, 0, 4, WEIR_NEVER, 0);
    EXPECT(step(&lim, st, 0, 0), true, 0, 4, 0, 0);
    assert_memory_equal(st, zero, weir_state_size(&lim));
    EXPECT(step(&lim, st, 0, 3), true, 1, 1, 0, S);
    EXPECT(step(&lim, st, 0, 2), false, 0, 1, S, S);
    EXPECT(step(&lim, st, 0, 5), false, 0, 1, WEIR_NEVER, S);
    EXPECT(release(&lim, st, 0, 1), true, 0, 4, 0, 0);
    EXPECT(step(&lim, st, 0, 4), true, 2, 0, 0, S);
    free(zero);
    free(st);
}

static void check_takes_no_lease(void **unused)
{
    (void)unused;
    weir_limit lim = compile(3, S);
    uint64_t *st = fresh(&lim);
    EXPECT(check(&lim, st, 0, 2), true, 0, 1, 0, S);
    EXPECT(step(&lim, st, 0, 2), true, 1, 1, 0, S);
    EXPECT(check(&lim, st, 500000, 1), true, 0, 0, 0, S);
    EXPECT(check(&lim, st, 500000, 2), false, 0, 1, 500000, 500000);
    EXPECT(check(&lim, st, 500000, 0), true, 0, 1, 0, 500000);
    EXPECT(step(&lim, st, 500000, 1), true, 2, 0, 0, S);
    free(st);
}

static void lease_ids(void **unused)
{
    (void)unused;
    weir_limit lim = compile(3, S);
    uint64_t *st = fresh(&lim);
    for (uint64_t i = 1; i <= 1000; i++) {
        weir_result r = step(&lim, st, (int64_t)i, 1);
        assert_int_equal(r.lease, i);
        release(&lim, st, (int64_t)i, i);
    }
    /* release from the middle of the array */
    assert_int_equal(step(&lim, st, 2000, 1).lease, 1001);
    assert_int_equal(step(&lim, st, 2000, 1).lease, 1002);
    assert_int_equal(step(&lim, st, 2000, 1).lease, 1003);
    EXPECT(release(&lim, st, 2000, 1002), true, 0, 1, 0, S);
    assert_int_equal(release_status(&lim, st, 2000, 1002), WEIR_ENOLEASE);
    assert_int_equal(step(&lim, st, 2000, 1).lease, 1004);
    EXPECT(release(&lim, st, 2000, 1001), true, 0, 1, 0, S);
    EXPECT(release(&lim, st, 2000, 1004), true, 0, 2, 0, S);
    EXPECT(release(&lim, st, 2000, 1003), true, 0, 3, 0, 0);
    free(st);
}

static void stalled_clock(void **unused)
{
    (void)unused;
    weir_limit lim = compile(2, S);
    uint64_t *st = fresh(&lim);
    assert_true(step(&lim, st, 5 * S, 1).allowed);
    assert_true(step(&lim, st, 5 * S, 1).allowed);
    for (int i = 0; i < 1000; i++)
        EXPECT(step(&lim, st, 5 * S, 1), false, 0, 0, S, S);
    release(&lim, st, 5 * S, 2);
    EXPECT(step(&lim, st, 5 * S, 1), true, 3, 0, 0, S);
    free(st);
}

static void clock_backwards(void **unused)
{
    (void)unused;
    weir_limit lim = compile(2, 10 * S);
    uint64_t *st = fresh(&lim);
    EXPECT(step(&lim, st, 10 * S, 1), true, 1, 1, 0, 10 * S);
    /* a lease taken "earlier" never expires before the older one (20 s) */
    EXPECT(step(&lim, st, 5 * S, 1), true, 2, 0, 0, 15 * S);
    EXPECT(step(&lim, st, 5 * S, 1), false, 0, 0, 15 * S, 15 * S);
    EXPECT(step(&lim, st, 0, 1), false, 0, 0, 20 * S, 20 * S);
    EXPECT(step(&lim, st, 20 * S - 1, 1), false, 0, 0, 1, 1);
    EXPECT(step(&lim, st, 20 * S, 1), true, 3, 1, 0, 10 * S);
    /* going back does not resurrect reaped leases either */
    assert_int_equal(release_status(&lim, st, 0, 1), WEIR_ENOLEASE);
    EXPECT(check(&lim, st, 0, 1), true, 0, 0, 0, 30 * S);
    free(st);
}

static void negative_time_is_time_zero(void **unused)
{
    (void)unused;
    weir_limit lim = compile(1, 1000);
    uint64_t *st = fresh(&lim);
    EXPECT(step(&lim, st, -500, 1), true, 1, 0, 0, 1500);
    EXPECT(step(&lim, st, -500, 1), false, 0, 0, 1500, 1500);
    EXPECT(check(&lim, st, 999, 1), false, 0, 0, 1, 1);
    EXPECT(check(&lim, st, 1000, 1), true, 0, 0, 0, 1000);
    EXPECT(step(&lim, st, -100, 1), false, 0, 0, 1100, 1100);
    EXPECT(release(&lim, st, -100, 1), true, 0, 1, 0, 0);
    free(st);
}

static void huge_windows(void **unused)
{
    (void)unused;
    weir_limit lim = compile(1, WEIR_MAX_WINDOW_US);
    uint64_t *st = fresh(&lim);
    EXPECT(step(&lim, st, 0, 1), true, 1, 0, 0, WEIR_MAX_WINDOW_US);
    EXPECT(step(&lim, st, WEIR_MAX_WINDOW_US - 1, 1), false, 0, 0, 1, 1);
    EXPECT(step(&lim, st, WEIR_MAX_WINDOW_US, 1), true, 2, 0, 0, WEIR_MAX_WINDOW_US);
    free(st);
}

static void extreme_times(void **unused)
{
    (void)unused;
    weir_limit lim = compile(3, S);
    uint64_t *st = fresh(&lim);
    /* leases whose timeout saturates at INT64_MAX only end by release */
    int admitted = 0;
    for (int i = 0; i < 10; i++) {
        weir_result r = step(&lim, st, INT64_MAX - i % 2, 1);
        admitted += r.allowed;
        assert_true(r.retry_after_us >= 0);
        assert_true(r.reset_after_us >= 0);
    }
    assert_int_equal(admitted, 3);
    EXPECT(step(&lim, st, 0, 1), false, 0, 0, INT64_MAX, INT64_MAX);
    EXPECT(release(&lim, st, INT64_MAX, 2), true, 0, 1, 0, 0);
    EXPECT(step(&lim, st, INT64_MAX, 1), true, 4, 0, 0, 0);
    free(st);
}

static void largest_limit(void **unused)
{
    (void)unused;
    weir_limit lim = compile(WEIR_MAX_LEASES, S);
    uint64_t *st = fresh(&lim);
    for (uint64_t i = 1; i <= WEIR_MAX_LEASES; i++)
        assert_int_equal(step(&lim, st, (int64_t)i, 1).lease, i);
    EXPECT(step(&lim, st, 100000, 1), false, 0, 0, S + 1 - 100000, S + WEIR_MAX_LEASES - 100000);
    EXPECT(release(&lim, st, 100000, WEIR_MAX_LEASES), true, 0, 1, 0,
           S + WEIR_MAX_LEASES - 1 - 100000);
    /* all but the last have timed out at 1 s + 65535 us */
    EXPECT(step(&lim, st, S + WEIR_MAX_LEASES - 1, WEIR_MAX_LEASES), true,
           (uint64_t)WEIR_MAX_LEASES + 1, 0, 0, S);
    free(st);

    weir_limit_spec spec = {
        .algorithm = WEIR_ALGO_CONCURRENCY, .limit = WEIR_MAX_LEASES + 1, .window_us = S};
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_ERANGE);
}

static void release_errors(void **unused)
{
    (void)unused;
    weir_result r;
    uint64_t st[8] = {0};
    weir_limit_spec spec = {.algorithm = WEIR_ALGO_TOKEN_BUCKET, .limit = 1, .window_us = S};
    weir_limit lim;
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_OK);
    assert_int_equal(weir_release(&lim, st, 0, 1, &r), WEIR_EALGO);
    const weir_algorithm others[] = {WEIR_ALGO_GCRA,         WEIR_ALGO_LEAKY_BUCKET,
                                     WEIR_ALGO_LEAKY_SHAPER, WEIR_ALGO_FIXED_WINDOW,
                                     WEIR_ALGO_SLIDING_LOG,  WEIR_ALGO_SLIDING_COUNTER};
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
        spec.algorithm = others[i];
        assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_OK);
        assert_int_equal(weir_release(&lim, st, 0, 1, &r), WEIR_EALGO);
    }

    /* a ban holds no leases */
    lim = compile(0, S);
    assert_int_equal(weir_release(&lim, st, 0, 1, &r), WEIR_ENOLEASE);
    EXPECT(step(&lim, st, 0, 1), false, 0, 0, WEIR_NEVER, 0);

    lim = compile(1, S);
    assert_int_equal(weir_release(NULL, st, 0, 1, &r), WEIR_EINVAL);
    assert_int_equal(weir_release(&lim, NULL, 0, 1, &r), WEIR_EINVAL);
    assert_int_equal(weir_release(&lim, st, 0, 1, NULL), WEIR_EINVAL);
    /* states must be 8-byte aligned */
    assert_int_equal(weir_release(&lim, (char *)st + 4, 0, 1, &r), WEIR_EINVAL);
    assert_int_equal(weir_step(&lim, (char *)st + 4, 0, 1, &r), WEIR_EINVAL);
    assert_int_equal(weir_check(&lim, (char *)st + 4, 0, 1, &r), WEIR_EINVAL);
}

/* The state layout of lib/algo/concurrency.c: {u64 next_id, u32 n,
 * u32 held} then leases {u64 id, i64 expires_us, u64 units}. */
static void set_header(uint64_t *st, uint64_t next_id, uint32_t n, uint32_t held)
{
    st[0] = next_id;
    memcpy((char *)st + 8, &n, 4);
    memcpy((char *)st + 12, &held, 4);
}

static void set_lease(uint64_t *st, uint32_t i, uint64_t id, int64_t expires_us, uint64_t units)
{
    st[2 + 3 * i] = id;
    memcpy(&st[3 + 3 * i], &expires_us, 8);
    st[4 + 3 * i] = units;
}

static void corrupt_state(void **unused)
{
    (void)unused;
    weir_limit lim = compile(2, S);
    uint64_t *st = fresh(&lim);
    weir_result r;
    memset(&r, 0x5a, sizeof(r));
    weir_result saved = r;

    set_header(st, 0, 3, 3); /* more leases than the limit */
    assert_int_equal(weir_step(&lim, st, 0, 1, &r), WEIR_EINVAL);
    assert_int_equal(weir_check(&lim, st, 0, 1, &r), WEIR_EINVAL);
    assert_int_equal(weir_release(&lim, st, 0, 1, &r), WEIR_EINVAL);
    set_header(st, 0, 0, 3); /* more units held than the limit */
    assert_int_equal(weir_step(&lim, st, 0, 1, &r), WEIR_EINVAL);

    /* two leases but no unit held: admitting would write past the array */
    set_header(st, 2, 2, 0);
    set_lease(st, 0, 1, 5 * S, 0);
    set_lease(st, 1, 2, 5 * S, 0);
    assert_int_equal(weir_step(&lim, st, 0, 1, &r), WEIR_EINVAL);
    assert_int_equal(weir_release(&lim, st, 0, 1, &r), WEIR_EINVAL);

    /* an expired lease holding more units than the header says */
    set_header(st, 1, 1, 1);
    set_lease(st, 0, 1, 0, 5);
    assert_int_equal(weir_step(&lim, st, 0, 1, &r), WEIR_EINVAL);
    assert_int_equal(weir_release(&lim, st, 0, 1, &r), WEIR_EINVAL);
    /* a live one, caught by the release */
    set_lease(st, 0, 1, 5 * S, 2);
    assert_int_equal(weir_release(&lim, st, 0, 1, &r), WEIR_EINVAL);
    assert_memory_equal(&r, &saved, sizeof(r));

    /* units that do not add up but fit: denied, not a crash */
    set_header(st, 2, 2, 2);
    set_lease(st, 0, 1, 5 * S, 0);
    set_lease(st, 1, 2, 5 * S, 0);
    assert_int_equal(weir_step(&lim, st, 0, 1, &r), WEIR_OK);
    assert_false(r.allowed);
    free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(acquire_and_release),
        cmocka_unit_test(reaped_leases_free_capacity),
        cmocka_unit_test(limit_one),
        cmocka_unit_test(costs),
        cmocka_unit_test(check_takes_no_lease),
        cmocka_unit_test(lease_ids),
        cmocka_unit_test(stalled_clock),
        cmocka_unit_test(clock_backwards),
        cmocka_unit_test(negative_time_is_time_zero),
        cmocka_unit_test(huge_windows),
        cmocka_unit_test(extreme_times),
        cmocka_unit_test(largest_limit),
        cmocka_unit_test(release_errors),
        cmocka_unit_test(corrupt_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
