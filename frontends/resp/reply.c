/*
 * reply.c - RESP replies appended to a weir_buf. Integers, bulk strings and
 * array headers are most of what a busy server writes, so each checks for
 * room once and then writes straight into the buffer; only near the end of
 * the buffer's memory (or its cap) does it append piece by piece, so that a
 * reply which fits exactly is never refused for the room a longer number
 * would have needed.
 */
#include "resp.h"

#include <stdarg.h>
#include <stdio.h>

/* The longest "<type><int64>\r\n": type, sign, 19 or 20 digits, CRLF. */
#define HEADER_MAX (1 + 1 + 20 + 2)

/* Room for @n more bytes in the memory the buffer already has. */
static bool has_room(const weir_buf *b, size_t n)
{
    return !b->failed && n <= b->cap - b->len;
}

/* Only after has_room(). */
static void put_crlf(weir_buf *b)
{
    b->p[b->len++] = '\r';
    b->p[b->len++] = '\n';
}

/* "<type><n>\r\n": the header of a bulk string, an array, a map or a set. */
static void put_header(weir_buf *b, char type, uint64_t n)
{
    if (has_room(b, HEADER_MAX)) {
        b->p[b->len++] = type;
        weir_buf_put_u64(b, n);
        put_crlf(b);
        return;
    }
    weir_buf_putc(b, type);
    weir_buf_put_u64(b, n);
    weir_buf_put(b, "\r\n", 2);
}

/* "<type><s>\r\n" with CR and LF in @s made spaces: a status or an error is
 * one line, whatever it was given, or the client would read the rest of it
 * as further replies. */
static void put_line(weir_buf *b, char type, const char *s, size_t n)
{
    if (!weir_buf_reserve(b, n <= SIZE_MAX - 3 ? n + 3 : SIZE_MAX))
        return;
    char *o = b->p + b->len;
    *o++ = type;
    for (size_t i = 0; i < n; i++)
        o[i] = s[i] == '\r' || s[i] == '\n' ? ' ' : s[i];
    o[n] = '\r';
    o[n + 1] = '\n';
    b->len += n + 3;
}

void weir_resp_simple(weir_buf *b, const char *s)
{
    put_line(b, '+', s, s != NULL ? strlen(s) : 0);
}

void weir_resp_error(weir_buf *b, const char *msg, size_t n)
{
    put_line(b, '-', msg, msg != NULL ? n : 0);
}

void weir_resp_errorf(weir_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    /* '-', the message, "\r\n" (vsnprintf's NUL lands where the '\r' goes) */
    if (n < 0 || !weir_buf_reserve(b, (size_t)n + 3))
        return;
    char *o = b->p + b->len + 1;
    b->p[b->len] = '-';
    va_start(ap, fmt);
    vsnprintf(o, (size_t)n + 1, fmt, ap);
    va_end(ap);
    for (int i = 0; i < n; i++) {
        if (o[i] == '\r' || o[i] == '\n')
            o[i] = ' ';
    }
    o[n] = '\r';
    o[n + 1] = '\n';
    b->len += (size_t)n + 3;
}

void weir_resp_int(weir_buf *b, int64_t v)
{
    if (has_room(b, HEADER_MAX)) {
        b->p[b->len++] = ':';
        weir_buf_put_i64(b, v);
        put_crlf(b);
        return;
    }
    weir_buf_putc(b, ':');
    weir_buf_put_i64(b, v);
    weir_buf_put(b, "\r\n", 2);
}

void weir_resp_bulk(weir_buf *b, const void *p, size_t n)
{
    if (n <= SIZE_MAX - HEADER_MAX - 2 && has_room(b, HEADER_MAX + n + 2)) {
        b->p[b->len++] = '$';
        weir_buf_put_u64(b, n);
        put_crlf(b);
        if (n > 0)
            memcpy(b->p + b->len, p, n);
        b->len += n;
        put_crlf(b);
        return;
    }
    put_header(b, '$', n);
    weir_buf_put(b, p, n);
    weir_buf_put(b, "\r\n", 2);
}

void weir_resp_bulk_str(weir_buf *b, const char *s)
{
    weir_resp_bulk(b, s, s != NULL ? strlen(s) : 0);
}

void weir_resp_null(weir_buf *b, bool resp3)
{
    if (resp3)
        weir_buf_put(b, "_\r\n", 3);
    else
        weir_buf_put(b, "$-1\r\n", 5);
}

void weir_resp_array(weir_buf *b, size_t n)
{
    put_header(b, '*', n);
}

void weir_resp_map(weir_buf *b, size_t n, bool resp3)
{
    uint64_t elements;
    if (resp3) {
        put_header(b, '%', n);
    } else if (__builtin_mul_overflow((uint64_t)n, 2u, &elements)) {
        b->failed = true; /* no RESP2 array can say it */
    } else {
        put_header(b, '*', elements);
    }
}

void weir_resp_set(weir_buf *b, size_t n, bool resp3)
{
    put_header(b, resp3 ? '~' : '*', n);
}
