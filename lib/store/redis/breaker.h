/*
 * breaker.h - the Redis store's circuit breaker, shared by every session
 * (every worker thread) of a store, lock-free: a call that succeeds reads
 * one word; only failures and state changes write.
 *
 *   closed --(N failures within the window)--> open
 *   open --(cooldown passed: one caller becomes the probe)--> half-open
 *   half-open --(the probe succeeds)--> closed
 *   half-open --(the probe fails, or is lost for a cooldown)--> open
 */
#ifndef WEIR_STORE_REDIS_BREAKER_H
#define WEIR_STORE_REDIS_BREAKER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "weir/redis.h"

typedef struct breaker {
    uint32_t max_failures;
    int64_t window_us;
    int64_t cooldown_us;
    _Atomic int state;            /* weir_redis_breaker */
    _Atomic uint32_t failures;    /* in the window that started at window_start */
    _Atomic int64_t window_start; /* monotonic microseconds */
    _Atomic int64_t changed_at;   /* when it last opened or went half-open */
    _Atomic uint64_t opened;      /* times it opened */
} breaker;

void weir__breaker_init(breaker *b, uint32_t max_failures, int64_t window_us, int64_t cooldown_us);

/* Whether a call may go to Redis now. *probe is set when this call is the
 * half-open probe (its outcome closes or reopens the breaker). */
bool weir__breaker_allow(breaker *b, int64_t now_us, bool *probe);

/* A call's outcome. weir__breaker_failure() returns true for the failure that
 * opened the breaker (to log it once). */
void weir__breaker_success(breaker *b, bool probe);
bool weir__breaker_failure(breaker *b, int64_t now_us, bool probe);

weir_redis_breaker weir__breaker_state(breaker *b);

/* Another server now stands where the failing one was (a master Sentinel
 * named, its connection up): an open breaker lets the next call probe at
 * once instead of after the rest of its cooldown. */
void weir__breaker_retry_now(breaker *b, int64_t now_us);

#endif /* WEIR_STORE_REDIS_BREAKER_H */
