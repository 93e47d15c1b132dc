/*
 * snapshot.h - an immutable object swapped atomically while other threads
 * read it: the mechanism behind rule reloads.
 *
 * Readers never block and never see half an object: a reader brackets its
 * use between weir__snap_enter() and weir__snap_exit() (two atomic stores),
 * and an object replaced by weir__snap_swap() is destroyed only once no
 * reader can still hold it (epoch-based reclamation). Each reading thread
 * registers a reader of its own; the library starts no threads and keeps
 * no thread-local state.
 */
#ifndef WEIR_CORE_SNAPSHOT_H
#define WEIR_CORE_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>

#include "weir/context.h"
#include "weir/status.h"

typedef struct weir__snap weir__snap;
typedef struct weir__snap_reader weir__snap_reader;

/* Destroys an object the snapshot owns; called outside every reader. */
typedef void (*weir__snap_destroy_fn)(void *ud, void *obj);

/* A snapshot holding `initial` (owned from now on; may be NULL). */
weir_status weir__snap_new(weir_ctx *ctx, void *initial, weir__snap_destroy_fn destroy, void *ud,
                           weir__snap **out);

/* Destroy the current object and every retired one. No reader may be
 * registered any more. NULL is a no-op. */
void weir__snap_free(weir__snap *s);

/* Register the calling thread as a reader. Thread-safe. */
weir_status weir__snap_reader_new(weir__snap *s, weir__snap_reader **out);

/* Unregister a reader that is not inside enter/exit. NULL is a no-op. */
void weir__snap_reader_free(weir__snap_reader *r);

/* Begin a read: the current object, valid until weir__snap_exit(). A reader
 * is used by one thread at a time and does not nest. */
const void *weir__snap_enter(weir__snap_reader *r);

/* End a read. */
void weir__snap_exit(weir__snap_reader *r);

/* Publish `next` (owned from now on); readers entering from now on see it.
 * The replaced object is destroyed once no reader can hold it: now if
 * none can, else by a later swap or weir__snap_reclaim(). Writers are
 * serialised; thread-safe. Returns WEIR_OK or WEIR_ENOMEM (then `next`
 * is not published and still belongs to the caller). */
weir_status weir__snap_swap(weir__snap *s, void *next);

/* Destroy retired objects no reader can hold any more; returns how many
 * are still waiting. Thread-safe. */
size_t weir__snap_reclaim(weir__snap *s);

/* Whether readers publish with a plain store and reclaiming relies on the
 * kernel's membarrier (false without it, and in ThreadSanitizer builds). */
bool weir__snap_uses_membarrier(const weir__snap *s);

#endif /* WEIR_CORE_SNAPSHOT_H */
