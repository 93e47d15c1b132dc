/*
 * trace.c - the CSV trace codec: bytes in, requests with interned keys out.
 *
 * The parser walks the buffer line by line and never reads past @len; every
 * line is checked against the caps in trace.h before anything is stored,
 * and the first bad line stops the parse with its number and the reason.
 * Invariant: on success the trace holds exactly the requests of the buffer,
 * in order, sorted by time; on failure it holds nothing.
 */
#include "trace.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN_SLOTS 64u
#define MIN_CAP 16u

/* What a line turned out to be, for the parse loop's bookkeeping. */
typedef struct parse_state {
    uint64_t line;
    bool seen_request;
    bool seen_header;
    int64_t last_time_us;
} parse_state;

void weir_trace_init(weir_trace *t)
{
    memset(t, 0, sizeof(*t));
}

void weir_trace_free(weir_trace *t)
{
    if (!t)
        return;
    free(t->events);
    free(t->key_bytes);
    free(t->key_off);
    free(t->slots);
    weir_trace_init(t);
}

/* Grow an array to hold at least @need elements of @elem bytes. Returns the
 * (possibly moved) array, or NULL with the old one untouched. */
static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return p;
    size_t n = *cap ? *cap : MIN_CAP;
    while (n < need) {
        if (n > SIZE_MAX / 2 / elem)
            return NULL;
        n *= 2;
    }
    void *q = realloc(p, n * elem);
    if (q)
        *cap = n;
    return q;
}

static weir_status push_event(weir_trace *t, int64_t time_us, uint32_t key, uint64_t cost,
                              uint32_t line)
{
    weir_trace_event *e =
        grow(t->events, &t->cap_events, t->n_events + 1, sizeof(weir_trace_event));
    if (!e)
        return WEIR_ENOMEM;
    t->events = e;
    t->events[t->n_events++] = (weir_trace_event){time_us, cost, key, line};
    return WEIR_OK;
}

weir_status weir_trace_push(weir_trace *t, int64_t time_us, uint32_t key, uint64_t cost)
{
    if (!t)
        return WEIR_EINVAL;
    if (t->n_events >= WEIR_TRACE_MAX_LINES || key >= WEIR_TRACE_MAX_KEYS || time_us < 0 ||
        time_us > WEIR_TRACE_MAX_TIME_US || cost == 0 || cost > WEIR_TRACE_MAX_COST)
        return WEIR_ERANGE;
    weir_status st = push_event(t, time_us, key, cost, 0);
    if (st == WEIR_OK && key >= t->n_keys)
        t->n_keys = key + 1;
    return st;
}

static int event_cmp(const void *a, const void *b)
{
    const weir_trace_event *x = a, *y = b;
    if (x->time_us != y->time_us)
        return x->time_us < y->time_us ? -1 : 1;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    if (x->line != y->line)
        return x->line < y->line ? -1 : 1;
    if (x->cost != y->cost)
        return x->cost < y->cost ? -1 : 1;
    return 0;
}

void weir_trace_sort(weir_trace *t)
{
    if (t && t->n_events > 1)
        qsort(t->events, t->n_events, sizeof(weir_trace_event), event_cmp);
}

const char *weir_trace_key(const weir_trace *t, uint32_t key, size_t *len)
{
    *len = 0;
    if (!t || !t->key_off || key >= t->n_keys)
        return NULL;
    *len = t->key_off[key + 1] - t->key_off[key];
    return t->key_bytes + t->key_off[key];
}

/* ------------------------------------------------------------------------ */
/* Key interning                                                            */

/* FNV-1a: keys come from a local file, not from an attacker on the network,
 * and the table never holds more than WEIR_TRACE_MAX_KEYS of them. */
static uint64_t hash_key(const char *k, size_t n)
{
    uint64_t h = 14695981039346656037u;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)k[i];
        h *= 1099511628211u;
    }
    return h;
}

static bool key_equals(const weir_trace *t, uint32_t idx, const char *k, size_t n)
{
    size_t off = t->key_off[idx];
    return t->key_off[idx + 1] - off == n && memcmp(t->key_bytes + off, k, n) == 0;
}

static weir_status rehash(weir_trace *t, size_t n_slots)
{
    uint32_t *slots = calloc(n_slots, sizeof(uint32_t));
    if (!slots)
        return WEIR_ENOMEM;
    for (uint32_t idx = 0; idx < t->n_keys; idx++) {
        size_t off = t->key_off[idx];
        size_t i = (size_t)hash_key(t->key_bytes + off, t->key_off[idx + 1] - off) & (n_slots - 1);
        while (slots[i])
            i = (i + 1) & (n_slots - 1);
        slots[i] = idx + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->n_slots = n_slots;
    return WEIR_OK;
}

/* Find or add key @k. WEIR_ERANGE when it is new and the table is full. */
static weir_status intern(weir_trace *t, const char *k, size_t n, uint32_t *out)
{
    /* Keep the load at most one half so probes stay short. */
    if ((size_t)t->n_keys + 1 > t->n_slots / 2) {
        weir_status st = rehash(t, t->n_slots ? t->n_slots * 2 : MIN_SLOTS);
        if (st != WEIR_OK)
            return st;
    }
    size_t mask = t->n_slots - 1;
    size_t i = (size_t)hash_key(k, n) & mask;
    while (t->slots[i]) {
        uint32_t idx = t->slots[i] - 1;
        if (key_equals(t, idx, k, n)) {
            *out = idx;
            return WEIR_OK;
        }
        i = (i + 1) & mask;
    }
    if (t->n_keys >= WEIR_TRACE_MAX_KEYS)
        return WEIR_ERANGE;

    char *bytes = grow(t->key_bytes, &t->key_bytes_cap, t->key_bytes_len + n, 1);
    if (!bytes)
        return WEIR_ENOMEM;
    t->key_bytes = bytes;
    size_t *off = grow(t->key_off, &t->key_off_cap, (size_t)t->n_keys + 2, sizeof(size_t));
    if (!off)
        return WEIR_ENOMEM;
    t->key_off = off;
    memcpy(t->key_bytes + t->key_bytes_len, k, n);
    t->key_off[t->n_keys] = t->key_bytes_len;
    t->key_bytes_len += n;
    t->key_off[t->n_keys + 1] = t->key_bytes_len;
    t->slots[i] = t->n_keys + 1;
    *out = t->n_keys++;
    return WEIR_OK;
}

/* ------------------------------------------------------------------------ */
/* Lines                                                                    */

typedef struct field {
    const char *s;
    size_t n;
} field;

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

static field trim(const char *s, size_t n)
{
    while (n > 0 && is_blank(s[0])) {
        s++;
        n--;
    }
    while (n > 0 && is_blank(s[n - 1]))
        n--;
    return (field){s, n};
}

static bool field_is(field f, const char *word)
{
    size_t n = strlen(word);
    return f.n == n && memcmp(f.s, word, n) == 0;
}

typedef enum num_result { NUM_OK, NUM_EMPTY, NUM_NEGATIVE, NUM_NOT_DIGITS, NUM_TOO_BIG } num_result;

/* A decimal integer of digits only, at most @max. */
static num_result parse_uint(field f, uint64_t max, uint64_t *out)
{
    if (f.n == 0)
        return NUM_EMPTY;
    if (f.s[0] == '-')
        return NUM_NEGATIVE;
    uint64_t v = 0;
    bool too_big = false;
    for (size_t i = 0; i < f.n; i++) {
        unsigned char c = (unsigned char)f.s[i];
        if (c < '0' || c > '9')
            return NUM_NOT_DIGITS;
        unsigned d = c - (unsigned)'0';
        /* Keep scanning after an overflow: a later non-digit is the better
         * message. */
        if (v > (max - d) / 10)
            too_big = true;
        else
            v = v * 10 + d;
    }
    if (too_big)
        return NUM_TOO_BIG;
    *out = v;
    return NUM_OK;
}

static weir_status fail(weir_trace_error *err, uint64_t line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static weir_status fail(weir_trace_error *err, uint64_t line, const char *fmt, ...)
{
    err->line = line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->reason, sizeof(err->reason), fmt, ap);
    va_end(ap);
    return WEIR_EPARSE;
}

static weir_status parse_time(field f, parse_state *ps, weir_trace_error *err, int64_t *out)
{
    uint64_t v = 0;
    switch (parse_uint(f, (uint64_t)WEIR_TRACE_MAX_TIME_US, &v)) {
    case NUM_OK:
        break;
    case NUM_EMPTY:
        return fail(err, ps->line, "time is empty");
    case NUM_NEGATIVE:
        return fail(err, ps->line, "time is negative: it must be a non-negative integer");
    case NUM_NOT_DIGITS:
        return fail(err, ps->line, "time is not a non-negative integer of microseconds");
    case NUM_TOO_BIG:
        return fail(err, ps->line, "time is over the cap of %lld us",
                    (long long)WEIR_TRACE_MAX_TIME_US);
    }
    if (ps->seen_request && (int64_t)v < ps->last_time_us)
        return fail(err, ps->line,
                    "time %lld is before the previous request's %lld: sort the trace by time",
                    (long long)v, (long long)ps->last_time_us);
    *out = (int64_t)v;
    return WEIR_OK;
}

static weir_status check_key(field f, parse_state *ps, weir_trace_error *err)
{
    if (f.n == 0)
        return fail(err, ps->line, "key is empty");
    if (f.n > WEIR_TRACE_MAX_KEY_BYTES)
        return fail(err, ps->line, "key is %zu bytes, over the cap of %u", f.n,
                    (unsigned)WEIR_TRACE_MAX_KEY_BYTES);
    for (size_t i = 0; i < f.n; i++) {
        unsigned char c = (unsigned char)f.s[i];
        if (c < 0x20 || c == 0x7f)
            return fail(err, ps->line, "key holds a control character (byte 0x%02x)", c);
    }
    return WEIR_OK;
}

static weir_status parse_cost(field f, parse_state *ps, weir_trace_error *err, uint64_t *out)
{
    uint64_t v = 0;
    switch (parse_uint(f, WEIR_TRACE_MAX_COST, &v)) {
    case NUM_OK:
        break;
    case NUM_EMPTY:
        return fail(err, ps->line, "cost is empty (leave out its comma for a cost of 1)");
    case NUM_NEGATIVE:
    case NUM_NOT_DIGITS:
        return fail(err, ps->line, "cost is not a positive integer");
    case NUM_TOO_BIG:
        return fail(err, ps->line, "cost is over the cap of %u", WEIR_TRACE_MAX_COST);
    }
    if (v == 0)
        return fail(err, ps->line, "cost is 0: it must be 1 .. %u", WEIR_TRACE_MAX_COST);
    *out = v;
    return WEIR_OK;
}

/* One line without its terminator. */
static weir_status parse_line(weir_trace *t, const char *s, size_t n, parse_state *ps,
                              weir_trace_error *err)
{
    if (n > WEIR_TRACE_MAX_LINE_BYTES)
        return fail(err, ps->line, "line is longer than the cap of %u bytes",
                    WEIR_TRACE_MAX_LINE_BYTES);
    field whole = trim(s, n);
    if (whole.n == 0 || whole.s[0] == '#')
        return WEIR_OK;

    field f[3];
    size_t nf = 0;
    const char *p = s, *end = s + n;
    for (;;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        if (nf == 3)
            return fail(err, ps->line, "too many fields: expected time_us,key[,cost]");
        f[nf++] = trim(p, (size_t)(stop - p));
        if (!comma)
            break;
        p = comma + 1;
    }
    if (nf < 2)
        return fail(err, ps->line, "no comma: expected time_us,key[,cost]");

    if (!ps->seen_request && !ps->seen_header && field_is(f[0], "time_us") &&
        field_is(f[1], "key") && (nf == 2 || field_is(f[2], "cost"))) {
        ps->seen_header = true;
        return WEIR_OK;
    }

    int64_t time_us = 0;
    uint64_t cost = 1;
    weir_status st = parse_time(f[0], ps, err, &time_us);
    if (st == WEIR_OK)
        st = check_key(f[1], ps, err);
    if (st == WEIR_OK && nf == 3)
        st = parse_cost(f[2], ps, err, &cost);
    if (st != WEIR_OK)
        return st;

    uint32_t key = 0;
    st = intern(t, f[1].s, f[1].n, &key);
    if (st == WEIR_ERANGE)
        return fail(err, ps->line, "more than %u distinct keys (the cap)", WEIR_TRACE_MAX_KEYS);
    if (st == WEIR_OK)
        st = push_event(t, time_us, key, cost, (uint32_t)ps->line);
    if (st != WEIR_OK) {
        fail(err, ps->line, "out of memory");
        return st;
    }
    ps->seen_request = true;
    ps->last_time_us = time_us;
    return WEIR_OK;
}

weir_status weir_trace_parse(weir_trace *t, const char *buf, size_t len, weir_trace_error *err)
{
    weir_trace_error scratch;
    if (!err)
        err = &scratch;
    err->line = 0;
    err->reason[0] = '\0';
    if (!t || (!buf && len > 0))
        return WEIR_EINVAL;
    if (t->events || t->n_events || t->n_keys || t->key_bytes || t->key_off || t->slots)
        return WEIR_EINVAL;

    parse_state ps = {0, false, false, 0};
    size_t pos = 0;
    if (len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0)
        pos = 3;
    while (pos < len) {
        const char *line = buf + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - line) : len - pos;
        pos += n + (nl ? 1 : 0);
        if (n > 0 && line[n - 1] == '\r')
            n--;
        ps.line++;
        weir_status st;
        if (ps.line > WEIR_TRACE_MAX_LINES)
            st = fail(err, ps.line, "more than %u lines (the cap)", WEIR_TRACE_MAX_LINES);
        else
            st = parse_line(t, line, n, &ps, err);
        if (st != WEIR_OK) {
            weir_trace_free(t);
            return st;
        }
    }
    return WEIR_OK;
}
