/*
 * lease_token.c - a decision's leases as text and back (lease_token.h).
 * Hand-written: the format is four fields, and a general parser (JSON,
 * a URL's query) would not let the token travel as one header value or
 * one RESP argument.
 */
#include "lease_token.h"

#include <stdint.h>
#include <string.h>

static const char hex[] = "0123456789abcdef";

size_t lease_token_put(weir_buf *b, const weir_descriptor_status *st, size_t n, int64_t now_us)
{
    size_t leases = 0;
    weir_buf_putc(b, '1');
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < st[i].n_outcomes; j++) {
            const weir_limit_outcome *o = &st[i].outcomes[j];
            if (!o->lease)
                continue;
            /* a request's worth of these: not through printf */
            weir_buf_putc(b, ';');
            weir_buf_put_u64(b, o->requests_per_unit);
            weir_buf_putc(b, ',');
            weir_buf_put_u64(b, o->window_us > 0 ? (uint64_t)o->window_us : 0);
            weir_buf_putc(b, ',');
            weir_buf_put_u64(b, o->lease);
            weir_buf_putc(b, ',');
            const unsigned char *key = o->key;
            for (size_t k = 0; k < o->key_len; k++) {
                weir_buf_putc(b, hex[key[k] >> 4]);
                weir_buf_putc(b, hex[key[k] & 15]);
            }
            if (o->adaptive) {
                /* what its controller learns from when the lease is back */
                weir_buf_putc(b, ',');
                weir_buf_put_u64(b, o->adaptive);
                weir_buf_putc(b, ',');
                weir_buf_put_u64(b, now_us > 0 ? (uint64_t)now_us : 1);
                weir_buf_putc(b, ',');
                uint64_t held =
                    o->requests_per_unit > o->remaining ? o->requests_per_unit - o->remaining : 1;
                weir_buf_put_u64(b, held);
            }
            leases++;
        }
    return leases;
}

/* A number from 1 to @max at *p, ended by @stop, and *p moved past it;
 * a @stop of 0: ended by the next lease's ';' or the token's end, and *p
 * moved to that end. */
static bool number(const char **p, const char *end, char stop, uint64_t max, uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;
    char until = stop ? stop : ';';
    if (s == end || *s == until || *s == '0') /* written without leading zeros */
        return false;
    for (; s < end && *s != until; s++) {
        unsigned d = (unsigned)(*s - '0');
        if (d > 9 || v > (max - d) / 10)
            return false;
        v = v * 10 + d;
    }
    if (stop && s == end)
        return false;
    *out = v;
    *p = stop ? s + 1 : s;
    return true;
}

lease_token *lease_token_scratch(void)
{
    static _Thread_local lease_token tok;
    return &tok;
}

static int hexval(char ch)
{
    return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* A lease's adaptive part at *p (its ','): ",ID,ACQUIRED_US,IN_FLIGHT",
 * ended by the next lease's ';' or the token's end. */
static bool adaptive_part(const char **p, const char *end, weir_lease *l)
{
    uint64_t id, at, held;
    (*p)++;
    if (!number(p, end, ',', UINT64_MAX, &id) || !number(p, end, ',', INT64_MAX, &at) ||
        !number(p, end, 0, WEIR_MAX_LEASES, &held))
        return false;
    l->adaptive = id;
    l->acquired_us = (int64_t)at;
    l->in_flight = (uint32_t)held;
    return true;
}

void lease_token_set_dropped(lease_token *t)
{
    for (size_t i = 0; i < t->n; i++)
        t->leases[i].dropped = true;
}

bool lease_token_parse(const char *p, size_t len, lease_token *out)
{
    out->n = 0;
    if (!p || len == 0 || len > LEASE_TOKEN_MAX_BYTES || *p != '1')
        return false;
    const char *end = p + len;
    size_t used = 0;
    p++; /* "1" alone: a decision that took no lease */
    while (p < end) {
        uint64_t limit, window, lease;
        if (out->n == LEASE_TOKEN_MAX_LEASES || *p++ != ';' ||
            !number(&p, end, ',', WEIR_MAX_LEASES, &limit) ||
            !number(&p, end, ',', (uint64_t)WEIR_MAX_WINDOW_US, &window) ||
            !number(&p, end, ',', UINT64_MAX, &lease))
            goto refused;
        const char *k = p;
        while (p < end && *p != ';' && *p != ',')
            p++;
        size_t hex_len = (size_t)(p - k);
        if (hex_len == 0 || hex_len % 2 || hex_len / 2 > WEIR_MAX_KEY_BYTES ||
            used + hex_len / 2 > sizeof(out->keys))
            goto refused;
        unsigned char *key = out->keys + used;
        for (size_t i = 0; i < hex_len; i += 2) {
            int hi = hexval(k[i]), lo = hexval(k[i + 1]);
            if (hi < 0 || lo < 0)
                goto refused;
            key[i / 2] = (unsigned char)(hi << 4 | lo);
        }
        weir_lease *l = &out->leases[out->n++];
        *l = (weir_lease){.key = key,
                          .key_len = hex_len / 2,
                          .lease = lease,
                          .limit = limit,
                          .window_us = (int64_t)window};
        used += hex_len / 2;
        if (p < end && *p == ',' && !adaptive_part(&p, end, l))
            goto refused;
    }
    return true;
refused:
    out->n = 0;
    return false;
}
