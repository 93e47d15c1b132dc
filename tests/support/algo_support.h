/*
 * algo_support.h - shared helpers for the algorithm tests: a fresh state,
 * a step and a check that assert success (the check also asserts that it
 * changed nothing), and EXPECT for the result fields.
 */
#ifndef WEIR_TEST_ALGO_SUPPORT_H
#define WEIR_TEST_ALGO_SUPPORT_H

#include <stdint.h>

#include "weir/weir.h"

/* A zero-filled (fresh), 8-byte aligned state for @lim; free() it. */
void *algo_fresh(const weir_limit *lim);

/* weir_step(), asserting WEIR_OK. */
weir_result algo_step(const weir_limit *lim, void *state, int64_t now, uint64_t hits);

/* weir_check(), asserting WEIR_OK, an unchanged state and no lease. */
weir_result algo_check(const weir_limit *lim, const void *state, int64_t now, uint64_t hits);

/* allowed, remaining, retry_after_us, reset_after_us; delay and lease 0 */
#define EXPECT(res, ok, rem, retry, reset)            \
    do {                                              \
        weir_result r_ = (res);                       \
        assert_int_equal(r_.allowed, (ok));           \
        assert_int_equal(r_.remaining, (rem));        \
        assert_int_equal(r_.retry_after_us, (retry)); \
        assert_int_equal(r_.reset_after_us, (reset)); \
        assert_int_equal(r_.delay_us, 0);             \
        assert_int_equal(r_.lease, 0);                \
    } while (0)

#endif /* WEIR_TEST_ALGO_SUPPORT_H */
