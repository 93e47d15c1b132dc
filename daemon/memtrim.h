/*
 * memtrim.h - memory given back to the system after a burst of
 * connections. glibc keeps what the connections' buffers freed in its
 * arenas, so the process's resident size stays at the burst's peak
 * (measured: ten bursts of 8,000 idle connections left 297 MB resident
 * for 0.49 MB of live heap). Once the connections have fallen to half
 * their peak, malloc_trim() returns the free pages.
 */
#ifndef WEIR_DAEMON_MEMTRIM_H
#define WEIR_DAEMON_MEMTRIM_H

#include <stdbool.h>
#include <stdint.h>

/* A burst smaller than this is not worth a trim. */
#define MEMTRIM_MIN_DROP 256

typedef struct memtrim {
    int64_t peak; /* connections at their highest since the last trim */
} memtrim;

/** Called once a second with the connections open now and the most
 *  open at once since the last call; true when it trimmed. */
bool memtrim_tick(memtrim *t, int64_t connections, int64_t peak);

#endif /* WEIR_DAEMON_MEMTRIM_H */
