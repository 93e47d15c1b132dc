/*
 * context.h - the context's private layout and the allocation helpers every
 * part of the library allocates through.
 */
#ifndef WEIR_CORE_CONTEXT_H
#define WEIR_CORE_CONTEXT_H

#include <stdatomic.h>
#include <stddef.h>

#include "weir/context.h"

struct weir_ctx {
    weir_allocator alloc;
    weir_clock_fn clock;
    void *clock_ud;
    weir_log_fn log;
    void *log_ud;
    weir_log_level log_level;
    _Atomic int64_t last_now_us; /* the clamp that keeps the clock monotonic */
};

void *weir__malloc(const weir_ctx *ctx, size_t size);
void *weir__calloc(const weir_ctx *ctx, size_t n, size_t size);
void *weir__realloc(const weir_ctx *ctx, void *ptr, size_t size);
void weir__free(const weir_ctx *ctx, void *ptr);

/* Log a formatted line through the context's hook, if its level passes. */
void weir__log(const weir_ctx *ctx, weir_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Fill `buf` with `len` random bytes from the operating system. */
weir_status weir__random(void *buf, size_t len);

#endif /* WEIR_CORE_CONTEXT_H */
