/*
 * stores.c - the store table of `weir serve --store`. A URL is a scheme,
 * then ':' and the store's own settings where it has any.
 *
 * Builds made with -DWEIR_TEST_STORES=ON add `memory+deferred[:SPEC]`, the
 * memory store behind tests/support/deferred_store.c, which completes
 * every decision later from the worker's loop: the integration tests run
 * on it to drive the daemon's asynchronous paths. It is never listed.
 */
#include "stores.h"

#include <stdio.h>
#include <string.h>

#ifdef WEIR_TEST_STORES
#include "deferred_store.h"
#endif

typedef weir_status (*open_fn)(weir_ctx *ctx, const serve_options *o, const char *spec,
                               weir_store **out, char *msg, size_t cap);

typedef struct store_row {
    const char *scheme;
    bool listed; /* named in the message for an unknown store */
    open_fn open;
} store_row;

static weir_status open_memory(weir_ctx *ctx, const serve_options *o, const char *spec,
                               weir_store **out, char *msg, size_t cap)
{
    if (spec) {
        snprintf(msg, cap, "the memory store takes no settings after ':'");
        return WEIR_EINVAL;
    }
    weir_memstore_options mo = {sizeof(mo), o->max_memory, 0, 0, 0};
    weir_status st = weir_memstore_new(ctx, &mo, out);
    if (st != WEIR_OK)
        snprintf(msg, cap, "the memory store: %s", weir_strerror(st));
    return st;
}

#ifdef WEIR_TEST_STORES
static weir_status open_deferred(weir_ctx *ctx, const serve_options *o, const char *spec,
                                 weir_store **out, char *msg, size_t cap)
{
    weir_deferred_options d;
    if (weir_deferred_options_parse(spec ? spec : "", &d) != WEIR_OK) {
        snprintf(msg, cap, "memory+deferred: bad settings '%s'", spec);
        return WEIR_EINVAL;
    }
    weir_store *mem;
    weir_status st = open_memory(ctx, o, NULL, &mem, msg, cap);
    if (st == WEIR_OK && (st = weir_deferred_store_new(ctx, mem, &d, out)) != WEIR_OK)
        snprintf(msg, cap, "memory+deferred: %s", weir_strerror(st));
    return st;
}
#endif

static const store_row stores[] = {
    {"memory", true, open_memory},
#ifdef WEIR_TEST_STORES
    {"memory+deferred", false, open_deferred},
#endif
};
#define N_STORES (sizeof(stores) / sizeof(stores[0]))

/* The row @url names, and its settings (after ':', NULL when none). */
static const store_row *find(const char *url, const char **spec)
{
    const char *colon = strchr(url, ':');
    size_t n = colon ? (size_t)(colon - url) : strlen(url);
    *spec = colon ? colon + 1 : NULL;
    for (size_t i = 0; i < N_STORES; i++)
        if (strlen(stores[i].scheme) == n && memcmp(stores[i].scheme, url, n) == 0)
            return &stores[i];
    return NULL;
}

bool stores_check(const char *url, char *msg, size_t cap)
{
    const char *spec;
    if (find(url, &spec))
        return true;
    size_t len = (size_t)snprintf(msg, cap, "not a store of this build (stores:");
    for (size_t i = 0; i < N_STORES && len < cap; i++)
        if (stores[i].listed)
            len += (size_t)snprintf(msg + len, cap - len, " %s", stores[i].scheme);
    if (len < cap)
        snprintf(msg + len, cap - len, ")");
    return false;
}

weir_status stores_open(weir_ctx *ctx, const serve_options *o, weir_store **out, char *msg,
                        size_t cap)
{
    const char *spec;
    const store_row *row = find(o->store, &spec);
    if (!row) {
        stores_check(o->store, msg, cap);
        return WEIR_EINVAL;
    }
    return row->open(ctx, o, spec, out, msg, cap);
}
