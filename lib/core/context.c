/*
 * context.c - contexts: the allocator, clock and log hook a library user
 * chooses, with the C library's as defaults.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/context.h"

static void *libc_malloc(void *ud, size_t size)
{
    (void)ud;
    return malloc(size);
}

static void *libc_realloc(void *ud, void *ptr, size_t size)
{
    (void)ud;
    return realloc(ptr, size);
}

static void libc_free(void *ud, void *ptr)
{
    (void)ud;
    free(ptr);
}

static const weir_allocator libc_allocator = {libc_malloc, libc_realloc, libc_free, NULL};

/* The first release's weir_ctx_options ends after log_level. */
#define CTX_OPTIONS_V1_SIZE (offsetof(weir_ctx_options, log_level) + sizeof(weir_log_level))

weir_status weir_ctx_new(const weir_ctx_options *opts, weir_ctx **out)
{
    if (!out)
        return WEIR_EINVAL;
    weir_ctx_options o;
    memset(&o, 0, sizeof(o));
    if (opts) {
        if (opts->size < CTX_OPTIONS_V1_SIZE)
            return WEIR_EINVAL;
        memcpy(&o, opts, opts->size < sizeof(o) ? opts->size : sizeof(o));
    }
    const weir_allocator *a = &libc_allocator;
    if (o.allocator && o.allocator->malloc_fn && o.allocator->realloc_fn && o.allocator->free_fn)
        a = o.allocator;
    weir_ctx *ctx = a->malloc_fn(a->ud, sizeof(*ctx));
    if (!ctx)
        return WEIR_ENOMEM;
    memset(ctx, 0, sizeof(*ctx));
    ctx->alloc = *a;
    ctx->clock = o.clock ? o.clock : weir_clock_realtime_us;
    ctx->clock_ud = o.clock ? o.clock_ud : NULL;
    ctx->log = o.log;
    ctx->log_ud = o.log_ud;
    ctx->log_level = o.log_level;
    atomic_init(&ctx->last_now_us, INT64_MIN);
    *out = ctx;
    return WEIR_OK;
}

void weir_ctx_free(weir_ctx *ctx)
{
    if (!ctx)
        return;
    weir_allocator a = ctx->alloc;
    a.free_fn(a.ud, ctx);
}

int64_t weir_ctx_now_us(weir_ctx *ctx)
{
    int64_t now = ctx->clock(ctx->clock_ud);
    int64_t last = atomic_load_explicit(&ctx->last_now_us, memory_order_relaxed);
    while (now > last) {
        if (atomic_compare_exchange_weak_explicit(&ctx->last_now_us, &last, now,
                                                  memory_order_relaxed, memory_order_relaxed))
            return now;
    }
    return last > now ? last : now;
}

void *weir__malloc(const weir_ctx *ctx, size_t size)
{
    return ctx->alloc.malloc_fn(ctx->alloc.ud, size);
}

void *weir__calloc(const weir_ctx *ctx, size_t n, size_t size)
{
    size_t bytes;
    if (__builtin_mul_overflow(n, size, &bytes))
        return NULL;
    void *p = ctx->alloc.malloc_fn(ctx->alloc.ud, bytes);
    if (p)
        memset(p, 0, bytes);
    return p;
}

void *weir__realloc(const weir_ctx *ctx, void *ptr, size_t size)
{
    return ctx->alloc.realloc_fn(ctx->alloc.ud, ptr, size);
}

void weir__free(const weir_ctx *ctx, void *ptr)
{
    if (ptr)
        ctx->alloc.free_fn(ctx->alloc.ud, ptr);
}

void weir__log(const weir_ctx *ctx, weir_log_level level, const char *fmt, ...)
{
    if (!ctx->log || level > ctx->log_level)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    ctx->log(ctx->log_ud, level, line);
}

weir_status weir__random(void *buf, size_t len)
{
    unsigned char *p = buf;
    while (len > 0) {
        ssize_t n = getrandom(p, len, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return WEIR_EIO;
        }
        p += n;
        len -= (size_t)n;
    }
    return WEIR_OK;
}
