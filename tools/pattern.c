/*
 * pattern.c - the synthetic traffic patterns of `weir sim`.
 *
 * Times are computed in 128-bit integers from the parameters (never by
 * accumulating a step), so a pattern has no rounding drift and the same
 * parameters give the same requests on every platform. Invariant: a
 * generated trace is sorted by time, every request costs 1, and every time
 * is below duration + window + one burst, far under WEIR_TRACE_MAX_TIME_US.
 */
#include "pattern.h"

#include <string.h>

#include "weir/algo.h"

__extension__ typedef unsigned __int128 u128;

static const char *const names[WEIR_PATTERN_COUNT] = {
    [WEIR_PATTERN_STEADY] = "steady",
    [WEIR_PATTERN_BURSTY] = "bursty",
    [WEIR_PATTERN_BOUNDARY] = "boundary",
    [WEIR_PATTERN_RANDOM] = "random",
};

const char *weir_pattern_name(weir_pattern_kind kind)
{
    if ((unsigned)kind >= WEIR_PATTERN_COUNT)
        return NULL;
    return names[kind];
}

weir_status weir_pattern_parse(const char *name, weir_pattern_kind *out)
{
    if (!name || !out)
        return WEIR_EINVAL;
    for (unsigned i = 0; i < WEIR_PATTERN_COUNT; i++) {
        if (strcmp(name, names[i]) == 0) {
            *out = (weir_pattern_kind)i;
            return WEIR_OK;
        }
    }
    return WEIR_EINVAL;
}

/* splitmix64 */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

/* Uniform in [0, n), n > 0, without modulo bias (Lemire's method). */
static uint64_t rng_below(uint64_t *s, uint64_t n)
{
    u128 m = (u128)rng_next(s) * n;
    if ((uint64_t)m < n) {
        uint64_t threshold = (UINT64_MAX - n + 1) % n;
        while ((uint64_t)m < threshold)
            m = (u128)rng_next(s) * n;
    }
    return (uint64_t)(m >> 64);
}

static bool duration_ok(int64_t us, int64_t min)
{
    return us >= min && us <= WEIR_MAX_WINDOW_US;
}

static u128 ceil_div128(u128 a, u128 b)
{
    return a / b + (a % b != 0);
}

/* Time between the starts of two bursts. */
static u128 burst_period(const weir_pattern *p)
{
    return (u128)(p->burst - 1) * (uint64_t)p->spacing_us + (uint64_t)p->gap_us;
}

/* Odd window boundaries below the duration: the boundary pattern attacks
 * every other one, so the window before each attack is otherwise quiet. */
static uint64_t boundary_attacks(const weir_pattern *p)
{
    uint64_t below = (uint64_t)(p->duration_us - 1) / (uint64_t)p->window_us;
    return (below + 1) / 2;
}

static weir_status per_key_count(const weir_pattern *p, u128 *out)
{
    if (!duration_ok(p->window_us, 1) || !duration_ok(p->duration_us, 1) || p->keys == 0)
        return WEIR_EINVAL;
    switch (p->kind) {
    case WEIR_PATTERN_STEADY:
    case WEIR_PATTERN_RANDOM:
        if (p->rate_num == 0 || p->rate_per_us <= 0)
            return WEIR_EINVAL;
        *out = ceil_div128((u128)(uint64_t)p->duration_us * p->rate_num, (uint64_t)p->rate_per_us);
        return WEIR_OK;
    case WEIR_PATTERN_BURSTY:
        if (p->burst == 0 || p->burst > WEIR_TRACE_MAX_LINES || !duration_ok(p->spacing_us, 0) ||
            !duration_ok(p->gap_us, 1))
            return WEIR_EINVAL;
        /* a burst itself may last no longer than a window may */
        if (burst_period(p) - (uint64_t)p->gap_us > (uint64_t)WEIR_MAX_WINDOW_US)
            return WEIR_EINVAL;
        *out = ceil_div128((uint64_t)p->duration_us, burst_period(p)) * p->burst;
        return WEIR_OK;
    case WEIR_PATTERN_BOUNDARY:
        if (p->burst == 0 || p->burst > WEIR_TRACE_MAX_LINES)
            return WEIR_EINVAL;
        *out = (u128)boundary_attacks(p) * 2 * p->burst;
        return WEIR_OK;
    }
    return WEIR_EINVAL;
}

weir_status weir_pattern_count(const weir_pattern *p, uint64_t *out)
{
    u128 n = 0;
    if (!p || !out)
        return WEIR_EINVAL;
    weir_status st = per_key_count(p, &n);
    if (st != WEIR_OK)
        return st;
    n *= p->keys; /* both factors are far below 2^64 */
    *out = n > UINT64_MAX ? UINT64_MAX : (uint64_t)n;
    return WEIR_OK;
}

static weir_status gen_steady(const weir_pattern *p, uint32_t key, int64_t offset_us, uint64_t n,
                              weir_trace *out)
{
    for (uint64_t i = 0; i < n; i++) {
        u128 t = (u128)i * (uint64_t)p->rate_per_us / p->rate_num;
        weir_status st = weir_trace_push(out, offset_us + (int64_t)t, key, 1);
        if (st != WEIR_OK)
            return st;
    }
    return WEIR_OK;
}

static weir_status gen_random(const weir_pattern *p, uint32_t key, uint64_t n, uint64_t *rng,
                              weir_trace *out)
{
    for (uint64_t i = 0; i < n; i++) {
        int64_t t = (int64_t)rng_below(rng, (uint64_t)p->duration_us);
        weir_status st = weir_trace_push(out, t, key, 1);
        if (st != WEIR_OK)
            return st;
    }
    return WEIR_OK;
}

static weir_status gen_bursty(const weir_pattern *p, uint32_t key, int64_t offset_us,
                              weir_trace *out)
{
    u128 period = burst_period(p);
    for (u128 start = 0; start < (uint64_t)p->duration_us; start += period) {
        for (uint64_t j = 0; j < p->burst; j++) {
            u128 t = start + (u128)j * (uint64_t)p->spacing_us;
            weir_status st = weir_trace_push(out, offset_us + (int64_t)t, key, 1);
            if (st != WEIR_OK)
                return st;
        }
    }
    return WEIR_OK;
}

/* `burst` requests spread over the last tenth of the window before each
 * attacked boundary and as many over the first tenth after it. */
static weir_status gen_boundary(const weir_pattern *p, uint32_t key, weir_trace *out)
{
    int64_t step = p->window_us / 10 / (int64_t)p->burst;
    uint64_t attacks = boundary_attacks(p);
    for (uint64_t a = 0; a < attacks; a++) {
        int64_t b = (int64_t)(2 * a + 1) * p->window_us;
        for (uint64_t j = 0; j < p->burst; j++) {
            int64_t t = step ? b - (int64_t)(p->burst - j) * step : b - 1;
            weir_status st = weir_trace_push(out, t, key, 1);
            if (st != WEIR_OK)
                return st;
        }
        for (uint64_t j = 0; j < p->burst; j++) {
            weir_status st = weir_trace_push(out, b + (int64_t)j * step, key, 1);
            if (st != WEIR_OK)
                return st;
        }
    }
    return WEIR_OK;
}

weir_status weir_pattern_generate(const weir_pattern *p, weir_trace *out)
{
    if (!p || !out || out->n_events || out->events)
        return WEIR_EINVAL;
    u128 n = 0;
    weir_status st = per_key_count(p, &n);
    if (st != WEIR_OK)
        return st;
    if (p->keys > WEIR_TRACE_MAX_KEYS || n * p->keys > WEIR_TRACE_MAX_LINES)
        return WEIR_ERANGE;

    uint64_t rng = p->seed;
    for (uint32_t k = 0; k < p->keys && st == WEIR_OK; k++) {
        int64_t offset_us = k ? (int64_t)rng_below(&rng, (uint64_t)p->window_us) : 0;
        switch (p->kind) {
        case WEIR_PATTERN_STEADY:
            st = gen_steady(p, k, offset_us, (uint64_t)n, out);
            break;
        case WEIR_PATTERN_RANDOM:
            st = gen_random(p, k, (uint64_t)n, &rng, out);
            break;
        case WEIR_PATTERN_BURSTY:
            st = gen_bursty(p, k, offset_us, out);
            break;
        case WEIR_PATTERN_BOUNDARY:
            st = gen_boundary(p, k, out);
            break;
        }
    }
    if (st != WEIR_OK) {
        weir_trace_free(out);
        return st;
    }
    weir_trace_sort(out);
    return WEIR_OK;
}
