/*
 * buf.c - the growable response buffer.
 */
#include "buf.h"
#include "utf8.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void weir_buf_init(weir_buf *b, size_t max)
{
    memset(b, 0, sizeof(*b));
    b->max = max;
}

void weir_buf_free(weir_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

void weir_buf_clear(weir_buf *b)
{
    b->len = 0;
    b->failed = false;
}

bool weir_buf_ok(const weir_buf *b)
{
    return !b->failed;
}

bool weir__buf_grow(weir_buf *b, size_t n)
{
    if (b->failed)
        return false;
    if (n <= b->cap - b->len)
        return true;
    if (n > b->max - b->len) {
        b->failed = true;
        return false;
    }
    /* the capacity never exceeds max, so len <= max always holds */
    size_t want = b->cap ? b->cap : (b->max < 256 ? b->max : 256);
    while (want - b->len < n)
        want = want > b->max / 2 ? b->max : want * 2;
    char *p = realloc(b->p, want);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->p = p;
    b->cap = want;
    return true;
}

/* Two digits at a time, written back to front straight into the buffer. */
static const char digit_pairs[201] = "00010203040506070809"
                                     "10111213141516171819"
                                     "20212223242526272829"
                                     "30313233343536373839"
                                     "40414243444546474849"
                                     "50515253545556575859"
                                     "60616263646566676869"
                                     "70717273747576777879"
                                     "80818283848586878889"
                                     "90919293949596979899";

/* Decimal digits of v: log10 from the bit length (1233 / 4096 ~ log10 2),
 * corrected by one comparison. */
static size_t digits_of(uint64_t v)
{
    static const uint64_t pow10[20] = {1ull,
                                       10ull,
                                       100ull,
                                       1000ull,
                                       10000ull,
                                       100000ull,
                                       1000000ull,
                                       10000000ull,
                                       100000000ull,
                                       1000000000ull,
                                       10000000000ull,
                                       100000000000ull,
                                       1000000000000ull,
                                       10000000000000ull,
                                       100000000000000ull,
                                       1000000000000000ull,
                                       10000000000000000ull,
                                       100000000000000000ull,
                                       1000000000000000000ull,
                                       10000000000000000000ull};
    if (v < 10)
        return 1;
    unsigned bits = 64u - (unsigned)__builtin_clzll(v);
    unsigned n = (bits * 1233u) >> 12; /* floor(log10(2^bits)) <= digits - 1 */
    return (size_t)n + (v >= pow10[n] ? 1u : 0u);
}

void weir_buf_put_u64(weir_buf *b, uint64_t v)
{
    size_t n = digits_of(v);
    if (!weir_buf_reserve(b, n))
        return;
    char *end = b->p + b->len + n;
    while (v >= 100) {
        unsigned r = (unsigned)(v % 100);
        v /= 100;
        *--end = digit_pairs[2 * r + 1];
        *--end = digit_pairs[2 * r];
    }
    if (v >= 10) {
        *--end = digit_pairs[2 * v + 1];
        *--end = digit_pairs[2 * v];
    } else {
        *--end = (char)('0' + v);
    }
    b->len += n;
}

void weir_buf_put_i64(weir_buf *b, int64_t v)
{
    if (v < 0) {
        weir_buf_putc(b, '-');
        weir_buf_put_u64(b, (uint64_t)0 - (uint64_t)v);
    } else {
        weir_buf_put_u64(b, (uint64_t)v);
    }
}

void weir_buf_printf(weir_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !weir_buf_reserve(b, (size_t)n + 1))
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* Hand-written rather than through the JSON library: responses are
 * written straight into the connection's buffer without building a tree,
 * which is most of the cost of a small answer. */
void weir_buf_put_json_str(weir_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, run = 0;
    while (i < n) {
        unsigned char c = u[i];
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            i++; /* printable ASCII, the usual case */
            continue;
        }
        size_t len = c >= 0x20 && c != '"' && c != '\\' ? weir_utf8_next(u + i, n - i, NULL) : 0;
        if (len) {
            i += len;
            continue;
        }
        weir_buf_put(b, s + run, i - run);
        switch (c) {
        case '"':
            weir_buf_puts(b, "\\\"");
            break;
        case '\\':
            weir_buf_puts(b, "\\\\");
            break;
        case '\n':
            weir_buf_puts(b, "\\n");
            break;
        case '\r':
            weir_buf_puts(b, "\\r");
            break;
        case '\t':
            weir_buf_puts(b, "\\t");
            break;
        default:
            if (c < 0x20) {
                char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
                weir_buf_put(b, esc, sizeof(esc));
            } else {
                weir_buf_puts(b, "\xef\xbf\xbd"); /* U+FFFD for a bad byte */
            }
        }
        i++;
        run = i;
    }
    weir_buf_put(b, s + run, n - run);
}
