/*
 * algo_support.c - shared helpers for the algorithm tests (algo_support.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "algo_support.h"

void *algo_fresh(const weir_limit *lim)
{
    void *p = calloc(1, weir_state_size(lim));
    assert_non_null(p);
    return p;
}

weir_result algo_step(const weir_limit *lim, void *state, int64_t now, uint64_t hits)
{
    weir_result r;
    assert_int_equal(weir_step(lim, state, now, hits, &r), WEIR_OK);
    return r;
}

weir_result algo_check(const weir_limit *lim, const void *state, int64_t now, uint64_t hits)
{
    size_t n = weir_state_size(lim);
    void *before = malloc(n);
    assert_non_null(before);
    memcpy(before, state, n);
    weir_result r;
    assert_int_equal(weir_check(lim, state, now, hits, &r), WEIR_OK);
    assert_memory_equal(before, state, n);
    assert_int_equal(r.lease, 0);
    free(before);
    return r;
}
