/*
 * spinlock.h - the lock of the memory store's shards and of the
 * count-min limiter's keys.
 *
 * Critical sections are a hash lookup and a step function, or a few
 * counters read and raised: tens of nanoseconds. A pthread mutex costs
 * about as much as the work it guards, so this is a test-and-test-and-set
 * lock that spins briefly and then yields the CPU, which keeps a
 * preempted holder from burning the waiter's slice.
 */
#ifndef WEIR_CORE_SPINLOCK_H
#define WEIR_CORE_SPINLOCK_H

#include <sched.h>
#include <stdatomic.h>

typedef struct weir__spinlock {
    atomic_uint held;
} weir__spinlock;

static inline void weir__spin_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static inline void weir__spin_lock(weir__spinlock *l)
{
    unsigned spins = 0;
    while (atomic_exchange_explicit(&l->held, 1u, memory_order_acquire)) {
        while (atomic_load_explicit(&l->held, memory_order_relaxed)) {
            if (++spins < 64)
                weir__spin_pause();
            else
                sched_yield();
        }
    }
}

static inline void weir__spin_unlock(weir__spinlock *l)
{
    atomic_store_explicit(&l->held, 0u, memory_order_release);
}

#endif /* WEIR_CORE_SPINLOCK_H */
