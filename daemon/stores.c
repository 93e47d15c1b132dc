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
#include <stdlib.h>
#include <string.h>

#ifdef WEIR_TEST_STORES
#include "deferred_store.h"
#endif

/* Opens the store; a message in @msg (and *warn set) for what an
 * operator should hear about though the store opened. */
typedef weir_status (*open_fn)(weir_ctx *ctx, const serve_options *o, const char *spec,
                               weir_store **out, char *msg, size_t cap, bool *warn);
/* The URL's settings checked as the options are read (NULL: at open). */
typedef bool (*check_fn)(const char *url, char *msg, size_t cap);

typedef struct store_row {
    const char *scheme;
    bool listed; /* named in the message for an unknown store */
    open_fn open;
    check_fn check;
} store_row;

static weir_status open_memory(weir_ctx *ctx, const serve_options *o, const char *spec,
                               weir_store **out, char *msg, size_t cap, bool *warn)
{
    (void)warn;
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
                                 weir_store **out, char *msg, size_t cap, bool *warn)
{
    weir_deferred_options d;
    if (weir_deferred_options_parse(spec ? spec : "", &d) != WEIR_OK) {
        snprintf(msg, cap, "memory+deferred: bad settings '%s'", spec);
        return WEIR_EINVAL;
    }
    weir_store *mem;
    weir_status st = open_memory(ctx, o, NULL, &mem, msg, cap, warn);
    if (st == WEIR_OK && (st = weir_deferred_store_new(ctx, mem, &d, out)) != WEIR_OK)
        snprintf(msg, cap, "memory+deferred: %s", weir_strerror(st));
    return st;
}
#endif

/* The Redis options of a URL and of the --redis-* settings; the
 * password from WEIR_REDIS_PASSWORD when the URL has none, the sentinels'
 * from WEIR_REDIS_SENTINEL_PASSWORD. */
static bool redis_options(const char *url, const serve_options *o, weir_redis_options *ro,
                          char *buf, size_t cap, char *msg, size_t msg_cap)
{
    weir_redis_options_init(ro);
    if (weir_redis_url_parse(url, ro, buf, cap, msg, msg_cap) != WEIR_OK)
        return false;
    const char *env = getenv("WEIR_REDIS_PASSWORD");
    if (!ro->password && env && *env)
        ro->password = env;
    env = getenv("WEIR_REDIS_SENTINEL_PASSWORD");
    if (ro->topology == WEIR_REDIS_SENTINEL && env && *env)
        ro->sentinel_password = env;
    if (o) {
        ro->timeout_us = o->redis_timeout_ms * 1000;
        ro->connect_timeout_us = o->redis_connect_timeout_ms * 1000;
        ro->batch_window_us = o->redis_batch_window_ms * 1000;
        ro->redis_clock = !o->redis_clock_local;
        ro->breaker_failures = (uint32_t)o->redis_breaker_failures;
        ro->breaker_window_us = o->redis_breaker_window_ms * 1000;
        ro->breaker_cooldown_us = o->redis_breaker_cooldown_ms * 1000;
        ro->deny_cache_slots = (uint32_t)o->redis_over_limit_cache;
        ro->instances = (uint32_t)o->instances;
    }
    return true;
}

static bool check_redis(const char *url, char *msg, size_t cap)
{
    weir_redis_options ro;
    char buf[4096];
    return redis_options(url, NULL, &ro, buf, sizeof(buf), msg, cap);
}

static weir_status open_redis(weir_ctx *ctx, const serve_options *o, const char *spec,
                              weir_store **out, char *msg, size_t cap, bool *warn)
{
    (void)spec;
    weir_redis_options ro;
    char buf[4096];
    if (!redis_options(o->store, o, &ro, buf, sizeof(buf), msg, cap))
        return WEIR_EINVAL;
    weir_status st = weir_redis_store_new(ctx, &ro, out);
    if (st != WEIR_OK) {
        snprintf(msg, cap, "the Redis store: %s", weir_strerror(st));
        return st;
    }
    /* a configuration error stops the start; Redis being down does not
     * (decisions follow their failure mode until it answers) */
    st = weir_redis_ping(*out, msg, cap);
    if (st == WEIR_EINVAL) {
        weir_store_free(*out);
        *out = NULL;
        return st;
    }
    if (st != WEIR_OK) {
        size_t len = strlen(msg);
        snprintf(msg + len, cap - len, "; decisions follow their failure_mode until it answers");
        *warn = true;
    }
    return WEIR_OK;
}

static const store_row stores[] = {
    {"memory", true, open_memory, NULL},
    {"redis", true, open_redis, check_redis},
    {"redis+unix", true, open_redis, check_redis},
    {"redis+cluster", true, open_redis, check_redis},
    {"redis+sentinel", true, open_redis, check_redis},
    {"rediss", false, open_redis, check_redis}, /* refused with the reason */
#ifdef WEIR_TEST_STORES
    {"memory+deferred", false, open_deferred, NULL},
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
    const store_row *row = find(url, &spec);
    if (row)
        return !row->check || row->check(url, msg, cap);
    size_t len = (size_t)snprintf(msg, cap, "not a store of this build (stores:");
    for (size_t i = 0; i < N_STORES && len < cap; i++)
        if (stores[i].listed)
            len += (size_t)snprintf(msg + len, cap - len, " %s", stores[i].scheme);
    if (len < cap)
        snprintf(msg + len, cap - len, ")");
    return false;
}

void stores_describe(const char *url, char *out, size_t cap)
{
    /* scheme://user:password@rest -> scheme://user:***@rest; on Sentinel
     * the rest is master@hosts, so the credentials end at the '@' before
     * the last one */
    const char *start = strstr(url, "://");
    const char *at = start ? strrchr(start + 3, '@') : NULL;
    if (at && strncmp(url, "redis+sentinel://", 17) == 0) {
        const char *name_at = at;
        at = NULL;
        for (const char *p = start + 3; p < name_at; p++)
            if (*p == '@')
                at = p;
    }
    const char *colon = at ? memchr(start + 3, ':', (size_t)(at - start - 3)) : NULL;
    if (!colon) {
        snprintf(out, cap, "%s", url);
        return;
    }
    snprintf(out, cap, "%.*s:***%s", (int)(colon - url), url, at);
}

weir_status stores_open(weir_ctx *ctx, const serve_options *o, weir_store **out, char *msg,
                        size_t cap, bool *warn)
{
    *warn = false;
    const char *spec;
    const store_row *row = find(o->store, &spec);
    if (!row) {
        stores_check(o->store, msg, cap);
        return WEIR_EINVAL;
    }
    return row->open(ctx, o, spec, out, msg, cap, warn);
}
