/*
 * weir/context.h - the per-context allocator, clock and log hook.
 *
 * Nothing in libweir is process-wide: every store is created from a
 * context, and everything it allocates, every time it reads and every line
 * it logs goes through the hooks given here. A context is immutable after
 * creation and may be shared by any number of threads, provided its hooks
 * are thread-safe (the defaults are).
 */
#ifndef WEIR_CONTEXT_H
#define WEIR_CONTEXT_H

#include <stddef.h>
#include <stdint.h>

#include "weir/export.h"
#include "weir/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weir_ctx weir_ctx;

/** Allocator hooks; same contracts as malloc/realloc/free (free(NULL) is a
 *  no-op). `ud` is passed back unchanged. */
typedef struct weir_allocator {
    void *(*malloc_fn)(void *ud, size_t size);
    void *(*realloc_fn)(void *ud, void *ptr, size_t size);
    void (*free_fn)(void *ud, void *ptr);
    void *ud;
} weir_allocator;

/** A clock: returns microseconds. weir_ctx_now_us() never lets it run
 *  backwards within one context. */
typedef int64_t (*weir_clock_fn)(void *ud);

typedef enum weir_log_level {
    WEIR_LOG_ERROR = 0,
    WEIR_LOG_WARN = 1,
    WEIR_LOG_INFO = 2,
    WEIR_LOG_DEBUG = 3
} weir_log_level;

/** A log hook: one event per call, `msg` is NUL-terminated, borrowed. */
typedef void (*weir_log_fn)(void *ud, weir_log_level level, const char *msg);

typedef struct weir_ctx_options {
    /** sizeof(weir_ctx_options), so fields can be appended later. */
    size_t size;
    /** NULL members or a NULL struct mean the C library's malloc family. */
    const weir_allocator *allocator;
    /** NULL means the system wall clock (CLOCK_REALTIME). */
    weir_clock_fn clock;
    void *clock_ud;
    /** NULL means: log nothing. The library never prints on its own. */
    weir_log_fn log;
    void *log_ud;
    weir_log_level log_level;
} weir_ctx_options;

/**
 * weir_ctx_new() - create a context.
 *
 * @opts: may be NULL for all defaults; its size must be at least the size
 *        of the first release's struct. Copied; not kept.
 * @out:  written only on success.
 *
 * Returns WEIR_OK; WEIR_EINVAL for a NULL @out or a bad opts->size;
 * WEIR_ENOMEM. Thread-safe.
 */
WEIR_API weir_status weir_ctx_new(const weir_ctx_options *opts, weir_ctx **out);

/** Free a context. Every store created from it must be freed first.
 *  NULL is a no-op. */
WEIR_API void weir_ctx_free(weir_ctx *ctx);

/**
 * weir_ctx_now_us() - the context clock in microseconds, clamped so that it
 * never returns less than it returned before (a wall clock stepped back by
 * NTP stalls instead). Thread-safe.
 */
WEIR_API int64_t weir_ctx_now_us(weir_ctx *ctx);

/** The system wall clock in microseconds since the Unix epoch (not clamped). */
WEIR_API int64_t weir_clock_realtime_us(void *ud);

/** The system monotonic clock in microseconds (arbitrary origin). */
WEIR_API int64_t weir_clock_monotonic_us(void *ud);

#ifdef __cplusplus
}
#endif

#endif /* WEIR_CONTEXT_H */
