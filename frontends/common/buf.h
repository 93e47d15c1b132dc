/*
 * buf.h - a growable byte buffer for building responses. Appends never
 * fail loudly: on allocation failure (or past the cap) the buffer is marked
 * failed and further appends are ignored, so a writer checks once at the
 * end (weir_buf_ok()).
 */
#ifndef WEIR_FRONTENDS_COMMON_BUF_H
#define WEIR_FRONTENDS_COMMON_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct weir_buf {
    char *p;
    size_t len;
    size_t cap;
    /** Most bytes the buffer may grow to. */
    size_t max;
    bool failed;
} weir_buf;

/** An empty buffer that may grow to @max bytes. */
void weir_buf_init(weir_buf *b, size_t max);
void weir_buf_free(weir_buf *b);
/** Empty the buffer (keeping its memory) and clear the failure. */
void weir_buf_clear(weir_buf *b);
bool weir_buf_ok(const weir_buf *b);
/** The slow half of weir_buf_reserve(): grow, or mark the buffer failed. */
bool weir__buf_grow(weir_buf *b, size_t n);

/* The appends are inline: a response is built from many short pieces
 * (keys, punctuation, numbers), and a call per piece cost more than the
 * copying. Constant strings get their length at compile time. */

/** Make room for @n more bytes; false (and failed) when it cannot. */
static inline bool weir_buf_reserve(weir_buf *b, size_t n)
{
    if (__builtin_expect(!b->failed && n <= b->cap - b->len, 1))
        return true;
    return weir__buf_grow(b, n);
}

static inline void weir_buf_put(weir_buf *b, const void *p, size_t n)
{
    if (n == 0 || !weir_buf_reserve(b, n))
        return;
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static inline void weir_buf_puts(weir_buf *b, const char *s)
{
    weir_buf_put(b, s, strlen(s));
}

static inline void weir_buf_putc(weir_buf *b, char c)
{
    if (weir_buf_reserve(b, 1))
        b->p[b->len++] = c;
}

void weir_buf_put_u64(weir_buf *b, uint64_t v);
void weir_buf_put_i64(weir_buf *b, int64_t v);
/** printf-style; for cold paths (errors, rule listings). */
void weir_buf_printf(weir_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** @n bytes as the inside of a JSON string (escaped; no quotes added;
 *  invalid UTF-8 bytes become U+FFFD). */
void weir_buf_put_json_str(weir_buf *b, const char *s, size_t n);

#endif /* WEIR_FRONTENDS_COMMON_BUF_H */
