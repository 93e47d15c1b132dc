/*
 * memtrim.c - memory given back after a burst (memtrim.h).
 */
#include "memtrim.h"

#include <malloc.h>

#include "log.h"

bool memtrim_tick(memtrim *t, int64_t connections, int64_t peak)
{
    if (peak > t->peak)
        t->peak = peak;
    if (t->peak - connections < MEMTRIM_MIN_DROP || connections > t->peak / 2)
        return false;
    /* every arena's free memory at its top, and whole free pages inside */
    malloc_trim(0);
    dlog(WEIR_LOG_DEBUG, "memory_trimmed", "detail", "connections fell to half their peak", NULL);
    t->peak = connections;
    return true;
}
