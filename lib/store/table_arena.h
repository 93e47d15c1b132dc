/*
 * table_arena.h - the memory store's mid-sized tables, several to a 2 MB
 * page.
 *
 * A decision reads a bucket at random in its shard's table, and with 4 KB
 * pages that is a TLB miss as well as a cache miss once the tables outgrow
 * the TLB's reach (a few MB). A table of 2 MB or more can sit on huge
 * pages of its own, but with 64 shards the tables of a store of 1M keys
 * are about 512 KB each: alone on a 2 MB page, each would cost four times
 * its size. Every shard's table grows through the same sizes, so tables of
 * one size share chunks: one to eight 2 MB pages, aligned, advised for
 * transparent huge pages, cut into equal slots (the fewest pages whose
 * slots waste at most a sixteenth). A chunk is freed when its last table
 * is, and its pages are given back to the system first.
 *
 * Sizes from WEIR__ARENA_MIN_BYTES to WEIR__ARENA_MAX_BYTES only; the
 * caller allocates smaller tables itself, and larger ones with
 * weir__table_alloc_large() (below). The slots of a chunk not holding a
 * table are the arena's slack, which the store reports in its bytes.
 * Memory comes from the context's allocator: each chunk's allocation is a
 * page longer than the chunk, to align it, and that room is given back to
 * the system unused.
 *
 * Thread-safe: one mutex, taken only when a table is made or freed (a
 * shard growing), never by a decision.
 */
#ifndef WEIR_STORE_TABLE_ARENA_H
#define WEIR_STORE_TABLE_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/context.h"

/** Smallest and largest table size the arena holds, in bytes. */
#define WEIR__ARENA_MIN_BYTES (64u << 10)
#define WEIR__ARENA_MAX_BYTES (1u << 20)
/** A huge page: the unit and the alignment of chunks. */
#define WEIR__ARENA_CHUNK_BYTES (2u << 20)

typedef struct weir__arena weir__arena;

/** A new, empty arena, or NULL when out of memory. */
weir__arena *weir__arena_new(weir_ctx *ctx);

/** Free the arena and every chunk it still has. NULL is a no-op. */
void weir__arena_free(weir__arena *a);

/** Whether a table of this many bytes belongs in the arena. */
static inline bool weir__arena_holds(size_t bytes)
{
    return bytes >= WEIR__ARENA_MIN_BYTES && bytes <= WEIR__ARENA_MAX_BYTES;
}

/** A zeroed table of at least *@bytes (weir__arena_holds(*bytes)), aligned
 *  to 128 bytes; NULL when out of memory. The table is a whole slot, and
 *  *@bytes is set to the slot's size (at most a fifteenth more), which the
 *  caller may use all of. The same request always gets the same size. */
void *weir__arena_alloc(weir__arena *a, size_t *bytes);

/** Give back a table of @bytes (as weir__arena_alloc() set them). */
void weir__arena_release(weir__arena *a, void *table, size_t bytes);

/** Bytes of chunks not holding a table. */
uint64_t weir__arena_slack(weir__arena *a);

/** Whether a table of this many bytes is a large one (see below). */
static inline bool weir__table_is_large(size_t bytes)
{
    return bytes > WEIR__ARENA_MAX_BYTES;
}

/** A zeroed table of at least *@bytes (weir__table_is_large()), in an
 *  allocation of its own from @ctx's allocator, a huge page longer than
 *  the table so that the table starts on a 2 MB boundary: every whole
 *  2 MB of it can be a huge page. It is advised for transparent huge
 *  pages, and the room around it is given back to the system unused. With
 *  @round, *@bytes is rounded up to whole huge pages when that adds at
 *  most a sixteenth (so the table's tail is on a huge page too); it is set
 *  to the size given, all of which the caller may use. *@raw receives the
 *  allocation, for weir__table_free_large(). NULL when out of memory. */
void *weir__table_alloc_large(weir_ctx *ctx, size_t *bytes, bool round, void **raw);

/** Free a table from weir__table_alloc_large() (@bytes as it set them);
 *  its pages go back to the system first, so that an allocator which
 *  keeps freed memory (as malloc does below its mapping threshold, which
 *  rises with the sizes it has freed) does not keep them resident. */
void weir__table_free_large(weir_ctx *ctx, void *raw, size_t bytes);

#endif /* WEIR_STORE_TABLE_ARENA_H */
