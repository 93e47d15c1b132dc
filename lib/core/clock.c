/*
 * clock.c - the one file that reads the operating system's clocks.
 *
 * Decisions never read a clock: they take `now` from the caller. These are
 * the default sources a context offers its owner.
 */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "weir/context.h"

static int64_t read_us(clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t weir_clock_realtime_us(void *ud)
{
    (void)ud;
    return read_us(CLOCK_REALTIME);
}

int64_t weir_clock_monotonic_us(void *ud)
{
    (void)ud;
    return read_us(CLOCK_MONOTONIC);
}
