/*
 * engine_world.h - an engine on the memory store or on the deferred test
 * store (every batch held until drained, in reverse order), and a
 * decision made on it, for the engine's tests.
 */
#ifndef WEIR_TEST_ENGINE_WORLD_H
#define WEIR_TEST_ENGINE_WORLD_H

#include <stdbool.h>

#include "deferred_store.h"
#include "weir/weir.h"

typedef struct world {
    weir_ctx *ctx;
    weir_store *store;
    weir_engine *engine;
    weir_engine_reader *reader;
} world;

/* The store the tests of the running group decide on: set by the group
 * setups world_use_memory() and world_use_deferred(). */
extern bool world_deferred;
extern weir_deferred_options world_deferred_opts;
int world_use_memory(void **unused);
int world_use_deferred(void **unused);

/* An engine on @yaml's rules (which must load). */
void open_world(world *w, const char *yaml);
/* Completes what the deferred store holds (nothing to do inline). */
void settle(world *w);
void close_world(world *w);

typedef struct outcome {
    int calls;
    weir_code overall;
    /* the first descriptor's limit outcomes, copied while they are valid */
    weir_limit_outcome first[8];
    size_t n_first;
} outcome;

void on_decided(void *arg, weir_code overall, weir_descriptor_status *st, size_t n);

#define E(k, v)                            \
    {                                      \
        k, sizeof(k) - 1, v, sizeof(v) - 1 \
    }

/* Decide a request of descriptors (completed before it returns); returns
 * the overall code. */
weir_code decide(world *w, const char *domain, const weir_descriptor *d, size_t n, uint64_t hits,
                 int64_t now, weir_descriptor_status *st);

#endif /* WEIR_TEST_ENGINE_WORLD_H */
