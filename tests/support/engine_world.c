/*
 * engine_world.c - the engine tests' world (engine_world.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "engine_world.h"
#include "rules_support.h"

bool world_deferred;
weir_deferred_options world_deferred_opts = {.order = WEIR_DEFERRED_REVERSE};

int world_use_memory(void **unused)
{
    (void)unused;
    world_deferred = false;
    return 0;
}

int world_use_deferred(void **unused)
{
    (void)unused;
    world_deferred = true;
    return 0;
}

void open_world(world *w, const char *yaml)
{
    assert_int_equal(weir_ctx_new(NULL, &w->ctx), WEIR_OK);
    assert_int_equal(weir_memstore_new(w->ctx, NULL, &w->store), WEIR_OK);
    if (world_deferred) {
        weir_store *mem = w->store;
        assert_int_equal(weir_deferred_store_new(w->ctx, mem, &world_deferred_opts, &w->store),
                         WEIR_OK);
        assert_int_equal(weir_store_caps(w->store),
                         world_deferred_opts.shared_keys ? WEIR_STORE_SHARED_KEYS : 0u);
    } else {
        assert_int_equal(weir_store_caps(w->store), WEIR_STORE_INLINE);
    }
    weir_engine_options o = {.size = sizeof(o), .store = w->store};
    assert_int_equal(weir_engine_new(w->ctx, &o, test_rules_parse(w->ctx, yaml), &w->engine),
                     WEIR_OK);
    assert_int_equal(weir_engine_reader_new(w->engine, &w->reader), WEIR_OK);
}

/* Completes what the deferred store holds (nothing to do inline). */
void settle(world *w)
{
    if (world_deferred)
        while (weir_deferred_store_drain(w->store) > 0)
            ;
}

void close_world(world *w)
{
    if (world_deferred)
        assert_int_equal(weir_deferred_store_pending(w->store), 0);
    weir_engine_reader_free(w->reader);
    weir_engine_free(w->engine);
    weir_store_free(w->store);
    weir_ctx_free(w->ctx);
}

void on_decided(void *arg, weir_code overall, weir_descriptor_status *st, size_t n)
{
    outcome *o = arg;
    o->calls++;
    o->overall = overall;
    o->n_first = n ? st[0].n_outcomes : 0;
    for (size_t i = 0; i < o->n_first && i < 8; i++)
        o->first[i] = st[0].outcomes[i];
}

/* Decide a request of descriptors; returns the overall code. */
weir_code decide(world *w, const char *domain, const weir_descriptor *d, size_t n, uint64_t hits,
                 int64_t now, weir_descriptor_status *st)
{
    weir_request req = {domain, strlen(domain), d, n, hits, 0};
    outcome o = {0};
    assert_int_equal(weir_engine_decide(w->reader, &req, now, st, on_decided, &o), WEIR_OK);
    /* the memory store completes inline; the deferred store when drained,
     * unless no limit went to the store (nothing matched) */
    if (world_deferred)
        assert_int_equal(o.calls == 0, weir_deferred_store_pending(w->store) > 0);
    else
        assert_int_equal(o.calls, 1);
    settle(w);
    assert_int_equal(o.calls, 1);
    return o.overall;
}
