/*
 * breaker.c - the circuit breaker (breaker.h): compare-and-swap on the
 * state, so exactly one caller opens it, and exactly one becomes the probe.
 */
#include "store/redis/breaker.h"

void weir__breaker_init(breaker *b, uint32_t max_failures, int64_t window_us, int64_t cooldown_us)
{
    b->max_failures = max_failures ? max_failures : 1;
    b->window_us = window_us;
    b->cooldown_us = cooldown_us;
    atomic_init(&b->state, WEIR_REDIS_CLOSED);
    atomic_init(&b->failures, 0);
    atomic_init(&b->window_start, 0);
    atomic_init(&b->changed_at, 0);
    atomic_init(&b->opened, 0);
}

bool weir__breaker_allow(breaker *b, int64_t now_us, bool *probe)
{
    *probe = false;
    int s = atomic_load_explicit(&b->state, memory_order_acquire);
    if (s == WEIR_REDIS_CLOSED)
        return true;
    int64_t since = now_us - atomic_load(&b->changed_at);
    /* open and cooled down, or half-open with its probe lost (its session
     * went away): this caller probes */
    if (since < b->cooldown_us)
        return false;
    if (!atomic_compare_exchange_strong(&b->state, &s, WEIR_REDIS_HALF_OPEN))
        return false;
    atomic_store(&b->changed_at, now_us);
    *probe = true;
    return true;
}

void weir__breaker_success(breaker *b, bool probe)
{
    if (probe) {
        atomic_store(&b->failures, 0);
        atomic_store(&b->state, WEIR_REDIS_CLOSED);
    } else if (atomic_load_explicit(&b->failures, memory_order_relaxed) != 0) {
        /* a success ends a run of failures: N failures must come close
         * together to open it */
        atomic_store_explicit(&b->failures, 0, memory_order_relaxed);
    }
}

/* Open it from state @from; true for the one caller that did. */
static bool trip(breaker *b, int from, int64_t now_us)
{
    if (!atomic_compare_exchange_strong(&b->state, &from, WEIR_REDIS_OPEN))
        return false;
    atomic_store(&b->changed_at, now_us);
    atomic_fetch_add(&b->opened, 1);
    return true;
}

bool weir__breaker_failure(breaker *b, int64_t now_us, bool probe)
{
    if (probe)
        return trip(b, WEIR_REDIS_HALF_OPEN, now_us);
    if (atomic_load(&b->state) != WEIR_REDIS_CLOSED)
        return false;
    int64_t start = atomic_load(&b->window_start);
    if (now_us - start > b->window_us) {
        /* a new window; racing failures may each start one, which only
         * delays opening by a failure or two */
        atomic_store(&b->window_start, now_us);
        atomic_store(&b->failures, 0);
    }
    if (atomic_fetch_add(&b->failures, 1) + 1 < b->max_failures)
        return false;
    return trip(b, WEIR_REDIS_CLOSED, now_us);
}

weir_redis_breaker weir__breaker_state(breaker *b)
{
    return (weir_redis_breaker)atomic_load(&b->state);
}

void weir__breaker_retry_now(breaker *b, int64_t now_us)
{
    if (atomic_load(&b->state) == WEIR_REDIS_OPEN)
        atomic_store(&b->changed_at, now_us - b->cooldown_us);
}
