/*
 * engine_internal.h - what engine.c (the engine, its rules in force, its
 * readers) and decide.c (decisions) share; private to lib/engine.
 */
#ifndef WEIR_ENGINE_INTERNAL_H
#define WEIR_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "algo/algo.h"
#include "core/snapshot.h"
#include "engine/ruleset.h"
#include "weir/engine.h"

struct weir_engine {
    weir_ctx *ctx;
    weir_store *store;
    /* the store's table, read once: whether it completes inline, and its
     * optional fast paths (NULL when it has none) */
    bool inline_store;
    bool shared_keys; /* stable keys, not digests under the secret */
    /* failure_mode local: an inline store of the instance's own, and the
     * default share of a limit (1/instances) in millionths */
    weir_store *fallback;
    uint32_t local_share_ppm;
    bool refuse_overrides; /* weir_engine_options.refuse_overrides */
    void (*prefetch)(weir_store *s, const void *key);
    weir_status (*run_planned)(weir_store *s, weir_op *ops, size_t n, int64_t now_us);
    weir__snap *snap;
    /* Reloads and tenant tables are serialised by this lock; under it,
     * `current` is the ruleset the snapshot holds. */
    pthread_mutex_t write_lock;
    ruleset *current;
    /* Store keys are 128-bit digests of the counter keys under this
     * random secret: 16 bytes fit inside a memory-store entry, so a
     * decision costs no key allocation and one cache miss per limit. */
    unsigned char secret[SECRET_BYTES];
};

typedef struct decision decision;

/* Overrides a reader keeps compiled (a power of two). */
#define OVERRIDE_SLOTS 8u

/* An override as compiled for one configured limit: keyed by every field
 * of the spec, not by the limit, so a reload that frees a limit and makes
 * another at its address finds nothing stale. */
typedef struct override_slot {
    bool used;
    weir_limit_spec spec;
    weir_limit compiled;
} override_slot;

struct weir_engine_reader {
    weir_engine *engine;
    weir__snap_reader *snap;
    weir_store_session *session; /* borrowed; NULL: the store's own submit */
    /* Decisions not owned (below) that have yet to be freed, and the
     * READER_FREEING bit: a reader freed while some are in flight (they
     * complete on another thread) is freed by the last of them. */
    _Atomic unsigned long live;
    /* a finished decision kept for the next one (no malloc per request);
     * exchanged atomically since a store may complete on another thread */
    _Atomic(decision *) spare;
    /* Decisions of this reader under way on its own thread, and the one
     * used when none is: with a store that completes inline, a decision
     * at depth 0 runs entirely inside weir_engine_decide(), so it reads
     * the rules inside the reader's snapshot section and needs neither a
     * reference on them nor an atomic exchange for its memory. */
    unsigned depth;
    decision *own;
    /* The snapshot section of an own decision is open: decisions nested
     * inside its callback use its rules (cur); a reader never nests
     * sections. */
    bool in_section;
    const ruleset *cur;
    weir_refusal refusal; /* why the last decision was refused */
    char scratch[WEIR_MAX_KEY_BYTES];
    override_slot overrides[OVERRIDE_SLOTS]; /* direct-mapped by the spec */
};

/* A reader's `live` count has this bit once the reader was freed with
 * decisions in flight: the last of them frees it. */
#define READER_FREEING (1ul << (sizeof(unsigned long) * 8 - 1))

/* Free a reader's memory (decide.c calls it for the last decision of a
 * reader already freed). */
void weir__reader_destroy(weir_engine_reader *reader);

/* The limit share of failure_mode local: algo/algo.h's weir__limit_share(). */
#define weir__local_limit weir__limit_share

/* A decision of @reader completed after weir_engine_decide() returned:
 * the reader may be freed now if it was freed while the decision was in
 * flight. Its last touch of the reader. */
static inline void weir__reader_unhold(weir_engine_reader *rd)
{
    if (atomic_fetch_sub(&rd->live, 1) == (READER_FREEING | 1))
        weir__reader_destroy(rd);
}

/* Free a decision's memory and what it keeps (its key buffer). */
void weir__decision_destroy(weir_ctx *ctx, decision *dc);

#endif /* WEIR_ENGINE_INTERNAL_H */
