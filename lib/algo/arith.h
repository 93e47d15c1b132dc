/*
 * arith.h - saturating integer arithmetic for decisions.
 *
 * Every decision is integer-only; these helpers clamp at the int64 range
 * instead of wrapping, so an absurd input (a time near INT64_MAX, a huge
 * cost) gives a conservative answer rather than undefined behaviour.
 */
#ifndef WEIR_ALGO_ARITH_H
#define WEIR_ALGO_ARITH_H

#include <stdint.h>

/* 128-bit intermediates for products such as limit * window that are exact
 * but do not fit 64 bits; both gcc and clang provide the type on 64-bit
 * targets. */
__extension__ typedef unsigned __int128 weir__u128;

static inline int64_t sat_add(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

static inline int64_t sat_sub(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r))
        return b < 0 ? INT64_MAX : INT64_MIN;
    return r;
}

/* a, b >= 0 */
static inline int64_t sat_mul(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r))
        return INT64_MAX;
    return r;
}

/* a >= 0 as uint64, b >= 0; result clamped to INT64_MAX */
static inline int64_t sat_mul_u(uint64_t a, int64_t b)
{
    if (a > (uint64_t)INT64_MAX)
        return b == 0 ? 0 : INT64_MAX;
    return sat_mul((int64_t)a, b);
}

/* ceil(a / b) for a >= 0, b > 0 */
static inline int64_t ceil_div(int64_t a, int64_t b)
{
    return a / b + (a % b != 0);
}

/* floor(a / b) for any a, b > 0 */
static inline int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

/* The reciprocal weir_limit_compile() stores for a divisor d >= 1. */
static inline uint64_t recip(uint64_t d)
{
    return UINT64_MAX / d;
}

/* floor(x / d) with m = recip(d), by multiplication: the divider is the
 * slowest instruction on a decision's path. m <= 2^64/d, and m > 2^64/d - 1
 * so the estimate is short by at most one for any 64-bit x; one compare
 * corrects it. */
static inline uint64_t div_recip(uint64_t x, uint64_t d, uint64_t m)
{
    uint64_t q = (uint64_t)(((weir__u128)x * m) >> 64);
    if (x - q * d >= d)
        q++;
    return q;
}

/* ceil(x / d) for x >= 0, by multiplication (x + d - 1 stays below 2^64
 * for any x, d < 2^63). */
static inline int64_t ceil_recip(int64_t x, int64_t d, uint64_t m)
{
    return (int64_t)div_recip((uint64_t)x + (uint64_t)d - 1u, (uint64_t)d, m);
}

/* floor(x / d) for x >= 0 */
static inline int64_t floor_recip(int64_t x, int64_t d, uint64_t m)
{
    return (int64_t)div_recip((uint64_t)x, (uint64_t)d, m);
}

static inline int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static inline int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

#endif /* WEIR_ALGO_ARITH_H */
