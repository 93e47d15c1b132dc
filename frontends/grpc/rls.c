/*
 * rls.c - Envoy's ShouldRateLimit messages (envoy.service.ratelimit.v3)
 * with protobuf-c: a RateLimitRequest decoded into a weir_request, a
 * decision encoded as a RateLimitResponse, and a weir_request encoded as
 * a RateLimitRequest for clients.
 *
 * Decoding first walks the wire bytes once (no allocation) to count the
 * descriptors and their entries against the caps and to refuse strings
 * with NUL bytes (protobuf-c hands strings over as C strings, which would
 * silently cut "a\0b" to "a"); then protobuf_c_message_unpack() builds
 * the message in the decoder's arena: one block, reset at each decode and
 * grown when a message needed more, so a steady stream of requests makes
 * no malloc. The arena refuses to hand out more than a bound proportional
 * to the message (ARENA_PER_BYTE per byte plus ARENA_BASE), which no
 * well-formed request approaches, so a hostile message cannot make the
 * decoder allocate (or copy) without bound.
 */
#include <stdalign.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"
#include "envoy/service/ratelimit/v3/rls.pb-c.h"
#include "grpc/pb.h"
#include "grpc/rls.h"

typedef Envoy__Service__Ratelimit__V3__RateLimitRequest pb_request;
typedef Envoy__Service__Ratelimit__V3__RateLimitResponse pb_response;
typedef Envoy__Service__Ratelimit__V3__RateLimitResponse__DescriptorStatus pb_status;
typedef Envoy__Service__Ratelimit__V3__RateLimitResponse__RateLimit pb_limit;
typedef Envoy__Extensions__Common__Ratelimit__V3__RateLimitDescriptor pb_descriptor;
typedef Envoy__Extensions__Common__Ratelimit__V3__RateLimitDescriptor__Entry pb_entry;
typedef Envoy__Extensions__Common__Ratelimit__V3__RateLimitDescriptor__RateLimitOverride
    pb_override;
typedef Envoy__Config__Core__V3__HeaderValue pb_header;
typedef Google__Protobuf__Duration pb_duration;
typedef Google__Protobuf__UInt64Value pb_u64;

static void set_error(weir_grpc_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_error(weir_grpc_error *err, int code, const char *fmt, ...)
{
    if (!err)
        return;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------ the arena */

#define ARENA_ALIGN alignof(max_align_t)
/** The first block. */
#define ARENA_INITIAL ((size_t)16 * 1024)
/** The largest block kept between decodes (what a decode needed beyond
 *  it is freed at the next reset). */
#define ARENA_KEEP_MAX ((size_t)1024 * 1024)
/** The bound of one decode: ARENA_BASE + ARENA_PER_BYTE * message bytes.
 *  The worst well-formed request needs about 28 bytes per byte (an empty
 *  entry: 2 bytes on the wire, a 48-byte struct and a pointer) plus the
 *  weir_request arrays (at most 64 * 64 entries: 128 KiB). */
#define ARENA_BASE ((size_t)256 * 1024)
#define ARENA_PER_BYTE ((size_t)48)

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t cap;
    size_t used;
} arena_chunk;

#define CHUNK_HEADER ((sizeof(arena_chunk) + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN)

typedef struct arena {
    unsigned char *base; /* the kept block */
    size_t cap;
    size_t used;
    arena_chunk *extra; /* overflow chunks of this decode, newest first */
    size_t total;       /* bytes handed out since the reset */
    size_t limit;       /* most bytes this decode may take */
    bool over_limit;    /* a request past `limit` was refused */
    bool out_of_memory; /* malloc failed */
} arena;

static void *arena_alloc(void *data, size_t size)
{
    arena *a = data;
    if (size > SIZE_MAX / 2)
        goto refuse;
    size_t n = size ? (size + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN : ARENA_ALIGN;
    if (n > a->limit - a->total)
        goto refuse;
    void *p;
    if (n <= a->cap - a->used) {
        p = a->base + a->used;
        a->used += n;
    } else if (a->extra && n <= a->extra->cap - a->extra->used) {
        p = (unsigned char *)a->extra + CHUNK_HEADER + a->extra->used;
        a->extra->used += n;
    } else {
        size_t cap = n > a->cap ? n : a->cap;
        if (cap < ARENA_INITIAL)
            cap = ARENA_INITIAL;
        arena_chunk *c = malloc(CHUNK_HEADER + cap);
        if (!c) {
            a->out_of_memory = true;
            return NULL;
        }
        c->next = a->extra;
        c->cap = cap;
        c->used = n;
        a->extra = c;
        p = (unsigned char *)c + CHUNK_HEADER;
    }
    a->total += n;
    return p;
refuse:
    a->over_limit = true;
    return NULL;
}

static void arena_free(void *data, void *p)
{
    /* everything goes at the next reset */
    (void)data;
    (void)p;
}

/* Forget everything handed out; when the last decode needed more than the
 * kept block, grow it (up to ARENA_KEEP_MAX) so the next one fits. */
static void arena_reset(arena *a, size_t limit)
{
    size_t needed = a->total;
    bool overflowed = a->extra != NULL;
    while (a->extra) {
        arena_chunk *next = a->extra->next;
        free(a->extra);
        a->extra = next;
    }
    if (overflowed && a->cap < ARENA_KEEP_MAX) {
        size_t cap = a->cap ? a->cap : ARENA_INITIAL;
        while (cap < needed && cap < ARENA_KEEP_MAX)
            cap *= 2;
        if (cap > ARENA_KEEP_MAX)
            cap = ARENA_KEEP_MAX;
        unsigned char *p = malloc(cap);
        if (p) {
            free(a->base);
            a->base = p;
            a->cap = cap;
        }
    }
    a->used = 0;
    a->total = 0;
    a->limit = limit;
    a->over_limit = false;
    a->out_of_memory = false;
}

static void arena_fini(arena *a)
{
    arena_reset(a, 0);
    free(a->base);
    a->base = NULL;
    a->cap = 0;
}

/* ------------------------------------------------------------ the wire walk */

/* Field numbers of the request (ENVOY_COMPAT.md). */
enum {
    F_REQUEST_DOMAIN = 1,
    F_REQUEST_DESCRIPTORS = 2,
    F_DESCRIPTOR_ENTRIES = 1,
    F_ENTRY_KEY = 1,
    F_ENTRY_VALUE = 2,
};

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

typedef struct wire {
    const uint8_t *p;
    const uint8_t *end;
} wire;

/* A varint of at most 10 bytes; the bits past 64 are dropped, as
 * protobuf-c drops them. */
static bool wire_varint(wire *w, uint64_t *out)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < 10; i++) {
        if (w->p == w->end)
            return false;
        uint8_t b = *w->p++;
        v |= i < 9 ? (uint64_t)(b & 0x7f) << (7 * i) : (uint64_t)(b & 1) << 63;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

/* A tag the way protobuf-c reads it, so that the walk and the unpack see
 * the same fields: at most 5 bytes, the field number's bits past 32
 * dropped, a first byte without field bits refused. */
static bool wire_tag(wire *w, uint32_t *field, unsigned *type)
{
    size_t avail = (size_t)(w->end - w->p);
    size_t max = avail < 5 ? avail : 5;
    if (!max || (w->p[0] & 0xf8) == 0)
        return false;
    *type = w->p[0] & 7u;
    uint32_t tag = (uint32_t)(w->p[0] & 0x7f) >> 3;
    if (!(w->p[0] & 0x80)) {
        w->p++;
        *field = tag;
        return true;
    }
    unsigned shift = 4;
    for (size_t i = 1; i < max; i++, shift += 7) {
        tag |= (uint32_t)(w->p[i] & 0x7f) << shift;
        if (!(w->p[i] & 0x80)) {
            w->p += i + 1;
            *field = tag;
            return true;
        }
    }
    return false;
}

/* The next field: its number, wire type and, for WT_LEN, its bytes. */
static bool wire_field(wire *w, uint32_t *field, unsigned *type, wire *inner)
{
    if (!wire_tag(w, field, type))
        return false;
    uint64_t v;
    switch (*type) {
    case WT_VARINT:
        return wire_varint(w, &v);
    case WT_I64:
        if (w->end - w->p < 8)
            return false;
        w->p += 8;
        return true;
    case WT_I32:
        if (w->end - w->p < 4)
            return false;
        w->p += 4;
        return true;
    case WT_LEN:
        if (!wire_varint(w, &v) || v > (uint64_t)(w->end - w->p))
            return false;
        inner->p = w->p;
        inner->end = w->p + v;
        w->p += v;
        return true;
    default: /* groups (3, 4), which protobuf-c refuses too, and 6, 7 */
        return false;
    }
}

/* What is wrong with a string field, or NULL: a NUL byte (no counter
 * name may hold one), or bytes that are not UTF-8 (proto3 strings must
 * be; grpc-go and upstream refuse them too). */
static const char *string_problem(const wire *s)
{
    size_t n = (size_t)(s->end - s->p);
    if (memchr(s->p, 0, n))
        return "must not contain a NUL byte";
    if (!weir_utf8_valid((const char *)s->p, n))
        return "must be valid UTF-8";
    return NULL;
}

/* What the walk found; the first problem of each kind. */
typedef struct scan {
    size_t n_descriptors;
    bool too_many_entries;
    size_t entries_at; /* the descriptor with too many */
    size_t n_entries;  /* its count */
    const char *bad;   /* string_problem() of the first bad string */
    char bad_at[64];
} scan;

static bool scan_entry(wire w, scan *s, size_t di, size_t ei)
{
    uint32_t field;
    unsigned type;
    wire str = {0};
    while (w.p < w.end) {
        if (!wire_field(&w, &field, &type, &str))
            return false;
        if (type == WT_LEN && (field == F_ENTRY_KEY || field == F_ENTRY_VALUE) && !s->bad &&
            (s->bad = string_problem(&str)))
            snprintf(s->bad_at, sizeof s->bad_at, "descriptors[%zu].entries[%zu].%s", di, ei,
                     field == F_ENTRY_KEY ? "key" : "value");
    }
    return true;
}

static bool scan_descriptor(wire w, scan *s, size_t di, size_t max_entries)
{
    uint32_t field;
    unsigned type;
    wire sub = {0};
    size_t n = 0;
    while (w.p < w.end) {
        if (!wire_field(&w, &field, &type, &sub))
            return false;
        if (type == WT_LEN && field == F_DESCRIPTOR_ENTRIES) {
            if (!scan_entry(sub, s, di, n))
                return false;
            n++;
        }
    }
    if (n > max_entries && !s->too_many_entries) {
        s->too_many_entries = true;
        s->entries_at = di;
        s->n_entries = n;
    }
    return true;
}

static bool scan_request(const uint8_t *msg, size_t len, scan *s, size_t max_entries)
{
    /* an empty message may come as NULL: no arithmetic on it */
    wire w = {msg, msg ? msg + len : msg};
    uint32_t field;
    unsigned type;
    wire sub = {0};
    while (w.p < w.end) {
        if (!wire_field(&w, &field, &type, &sub))
            return false;
        if (type != WT_LEN)
            continue;
        if (field == F_REQUEST_DOMAIN && !s->bad && (s->bad = string_problem(&sub))) {
            snprintf(s->bad_at, sizeof s->bad_at, "domain");
        } else if (field == F_REQUEST_DESCRIPTORS) {
            if (!scan_descriptor(sub, s, s->n_descriptors, max_entries))
                return false;
            s->n_descriptors++;
        }
    }
    return true;
}

/* ------------------------------------------------------------ decoding */

struct weir_rls_decoder {
    size_t max_descriptors;
    size_t max_entries;
    arena arena;
    ProtobufCAllocator allocator;
    pb_request *msg; /* the last decoded message (in the arena) */
    weir_request req;
};

static size_t cap_or_default(size_t v, size_t max)
{
    return v == 0 || v > max ? max : v;
}

weir_rls_decoder *weir_rls_decoder_new(const weir_api_limits *limits)
{
    weir_rls_decoder *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->max_descriptors =
        cap_or_default(limits ? limits->max_descriptors : 0, WEIR_ENGINE_MAX_DESCRIPTORS);
    d->max_entries = cap_or_default(limits ? limits->max_entries : 0, WEIR_ENGINE_MAX_ENTRIES);
    d->arena.base = malloc(ARENA_INITIAL);
    if (!d->arena.base) {
        free(d);
        return NULL;
    }
    d->arena.cap = ARENA_INITIAL;
    d->allocator.alloc = arena_alloc;
    d->allocator.free = arena_free;
    d->allocator.allocator_data = &d->arena;
    return d;
}

void weir_rls_decoder_free(weir_rls_decoder *d)
{
    if (!d)
        return;
    arena_fini(&d->arena);
    free(d);
}

const weir_request *weir_rls_request(const weir_rls_decoder *d)
{
    return &d->req;
}

static bool fail(weir_rls_decoder *d)
{
    d->msg = NULL;
    memset(&d->req, 0, sizeof d->req);
    arena_reset(&d->arena, 0);
    return false;
}

static bool parse_failure(weir_rls_decoder *d, weir_grpc_error *err)
{
    if (d->arena.out_of_memory)
        set_error(err, WEIR_GRPC_RESOURCE_EXHAUSTED, "out of memory decoding RateLimitRequest");
    else if (d->arena.over_limit)
        set_error(err, WEIR_GRPC_INVALID_ARGUMENT,
                  "cannot parse RateLimitRequest (it needs more than %zu bytes to decode)",
                  d->arena.limit);
    else
        set_error(err, WEIR_GRPC_INVALID_ARGUMENT, "cannot parse RateLimitRequest");
    return fail(d);
}

/* envoy.type.v3.RateLimitUnit -> weir_rule_unit: the numbers agree from
 * UNKNOWN (WEIR_UNIT_NONE) to YEAR; there is no WEEK. */
static bool map_unit(int unit, weir_rule_unit *out)
{
    switch (unit) {
    case ENVOY__TYPE__V3__RATE_LIMIT_UNIT__UNKNOWN:
        *out = WEIR_UNIT_NONE;
        return true;
    case ENVOY__TYPE__V3__RATE_LIMIT_UNIT__SECOND:
        *out = WEIR_UNIT_SECOND;
        return true;
    case ENVOY__TYPE__V3__RATE_LIMIT_UNIT__MINUTE:
        *out = WEIR_UNIT_MINUTE;
        return true;
    case ENVOY__TYPE__V3__RATE_LIMIT_UNIT__HOUR:
        *out = WEIR_UNIT_HOUR;
        return true;
    case ENVOY__TYPE__V3__RATE_LIMIT_UNIT__DAY:
        *out = WEIR_UNIT_DAY;
        return true;
    case ENVOY__TYPE__V3__RATE_LIMIT_UNIT__MONTH:
        *out = WEIR_UNIT_MONTH;
        return true;
    case ENVOY__TYPE__V3__RATE_LIMIT_UNIT__YEAR:
        *out = WEIR_UNIT_YEAR;
        return true;
    default:
        return false;
    }
}

static const char *str_or_empty(const char *s)
{
    return s ? s : "";
}

bool weir_rls_decode(weir_rls_decoder *d, const uint8_t *msg, size_t len, weir_grpc_error *err)
{
    size_t limit = len > (SIZE_MAX - ARENA_BASE) / ARENA_PER_BYTE
                       ? SIZE_MAX
                       : ARENA_BASE + len * ARENA_PER_BYTE;
    d->msg = NULL;
    memset(&d->req, 0, sizeof d->req);
    arena_reset(&d->arena, limit);
    if (!msg && len)
        return parse_failure(d, err);

    scan s = {0};
    if (!scan_request(msg, len, &s, d->max_entries))
        return parse_failure(d, err);
    if (s.n_descriptors > d->max_descriptors) {
        set_error(err, WEIR_GRPC_INVALID_ARGUMENT, "too many descriptors (%zu > %zu)",
                  s.n_descriptors, d->max_descriptors);
        return fail(d);
    }
    if (s.too_many_entries) {
        set_error(err, WEIR_GRPC_INVALID_ARGUMENT, "descriptors[%zu]: too many entries (%zu > %zu)",
                  s.entries_at, s.n_entries, d->max_entries);
        return fail(d);
    }
    if (s.bad) {
        set_error(err, WEIR_GRPC_INVALID_ARGUMENT, "%s: %s", s.bad_at, s.bad);
        return fail(d);
    }

    static const uint8_t empty[1];
    ProtobufCMessage *m =
        protobuf_c_message_unpack(&envoy__service__ratelimit__v3__rate_limit_request__descriptor,
                                  &d->allocator, len, msg ? msg : empty);
    if (!m)
        return parse_failure(d, err);
    pb_request *r = (pb_request *)m;
    /* the walk counted what protobuf-c found; checked again all the same */
    if (r->n_descriptors > d->max_descriptors) {
        set_error(err, WEIR_GRPC_INVALID_ARGUMENT, "too many descriptors (%zu > %zu)",
                  r->n_descriptors, d->max_descriptors);
        return fail(d);
    }

    size_t n = r->n_descriptors, n_entries = 0;
    for (size_t i = 0; i < n; i++) {
        if (r->descriptors[i]->n_entries > d->max_entries) {
            set_error(err, WEIR_GRPC_INVALID_ARGUMENT,
                      "descriptors[%zu]: too many entries (%zu > %zu)", i,
                      r->descriptors[i]->n_entries, d->max_entries);
            return fail(d);
        }
        n_entries += r->descriptors[i]->n_entries;
    }
    weir_descriptor *descs = n ? arena_alloc(&d->arena, n * sizeof *descs) : NULL;
    weir_limit_override *overrides = n ? arena_alloc(&d->arena, n * sizeof *overrides) : NULL;
    weir_entry *entries = n_entries ? arena_alloc(&d->arena, n_entries * sizeof *entries) : NULL;
    if ((n && (!descs || !overrides)) || (n_entries && !entries))
        return parse_failure(d, err);

    weir_entry *e = entries;
    for (size_t i = 0; i < n; i++) {
        const pb_descriptor *pd = r->descriptors[i];
        weir_descriptor *wd = &descs[i];
        memset(wd, 0, sizeof *wd);
        wd->entries = e;
        wd->n_entries = pd->n_entries;
        for (size_t j = 0; j < pd->n_entries; j++, e++) {
            e->key = str_or_empty(pd->entries[j]->key);
            e->key_len = strlen(e->key);
            e->value = str_or_empty(pd->entries[j]->value);
            e->value_len = strlen(e->value);
        }
        if (pd->hits_addend) {
            wd->has_hits = true;
            wd->hits = pd->hits_addend->value;
        }
        if (pd->limit) {
            weir_limit_override *o = &overrides[i];
            o->requests_per_unit = pd->limit->requests_per_unit;
            if (!map_unit((int)pd->limit->unit, &o->unit)) {
                set_error(err, WEIR_GRPC_INVALID_ARGUMENT,
                          "descriptors[%zu].limit.unit: unknown RateLimitUnit %d", i,
                          (int)pd->limit->unit);
                return fail(d);
            }
            wd->limit = o;
        }
    }

    d->msg = r;
    d->req.domain = str_or_empty(r->domain);
    d->req.domain_len = strlen(d->req.domain);
    d->req.descriptors = descs;
    d->req.n_descriptors = n;
    d->req.hits = r->hits_addend;
    return true;
}

/* ------------------------------------------------------------ encoding */

/* Room on the stack for a response of this many statuses and headers;
 * larger ones (never from the engine) take the heap. */
#define STACK_STATUSES WEIR_ENGINE_MAX_DESCRIPTORS

/* weir_rule_unit -> RateLimitResponse.RateLimit.Unit (WEEK included); a
 * limit given as a window (`window:`) has no unit: UNKNOWN. */
static Envoy__Service__Ratelimit__V3__RateLimitResponse__RateLimit__Unit
response_unit(weir_rule_unit unit)
{
    switch (unit) {
    case WEIR_UNIT_SECOND:
        return ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__RATE_LIMIT__UNIT__SECOND;
    case WEIR_UNIT_MINUTE:
        return ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__RATE_LIMIT__UNIT__MINUTE;
    case WEIR_UNIT_HOUR:
        return ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__RATE_LIMIT__UNIT__HOUR;
    case WEIR_UNIT_DAY:
        return ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__RATE_LIMIT__UNIT__DAY;
    case WEIR_UNIT_MONTH:
        return ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__RATE_LIMIT__UNIT__MONTH;
    case WEIR_UNIT_YEAR:
        return ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__RATE_LIMIT__UNIT__YEAR;
    case WEIR_UNIT_WEEK:
        return ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__RATE_LIMIT__UNIT__WEEK;
    case WEIR_UNIT_NONE:
        break;
    }
    return ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__RATE_LIMIT__UNIT__UNKNOWN;
}

static Envoy__Service__Ratelimit__V3__RateLimitResponse__Code response_code(weir_code code)
{
    switch (code) {
    case WEIR_CODE_OK:
        return ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__CODE__OK;
    case WEIR_CODE_OVER_LIMIT:
        return ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__CODE__OVER_LIMIT;
    }
    return ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__CODE__UNKNOWN;
}

/* Per status: the status, its limit and its duration. */
typedef struct status_parts {
    pb_status status;
    pb_limit limit;
    pb_duration reset;
} status_parts;

static void fill_status(status_parts *sp, const weir_descriptor_status *s)
{
    pb_status st = ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__DESCRIPTOR_STATUS__INIT;
    sp->status = st;
    sp->status.code = response_code(s->code);
    if (s->unlimited) {
        sp->status.limit_remaining = UINT32_MAX;
        return;
    }
    if (!s->limit)
        return;
    pb_limit lim = ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__RATE_LIMIT__INIT;
    sp->limit = lim;
    sp->limit.requests_per_unit = s->requests_per_unit;
    sp->limit.unit = response_unit(s->unit);
    if (s->limit->name && s->limit->name[0])
        sp->limit.name = (char *)s->limit->name; /* only read by pack */
    sp->status.current_limit = &sp->limit;
    sp->status.limit_remaining = s->remaining > UINT32_MAX ? UINT32_MAX : (uint32_t)s->remaining;
    pb_duration dur = GOOGLE__PROTOBUF__DURATION__INIT;
    sp->reset = dur;
    int64_t us = s->reset_after_us > 0 ? s->reset_after_us : 0;
    sp->reset.seconds = us / 1000000;
    sp->reset.nanos = (int32_t)(us % 1000000) * 1000;
    sp->status.duration_until_reset = &sp->reset;
}

/* The failure modes that decided any descriptor, as "allow", "deny",
 * "local" joined by commas; NULL when the store failed for none. */
static const char *failure_modes(const weir_api_decision *dec, char *buf, size_t cap)
{
    bool seen[3] = {false, false, false};
    for (size_t i = 0; dec && i < dec->n; i++) {
        const weir_descriptor_status *s = &dec->statuses[i];
        if (!s->failure_mode)
            continue;
        if (s->local)
            seen[2] = true;
        else
            seen[s->limit && s->limit->failure_mode == WEIR_FAILURE_DENY] = true;
    }
    static const char *const names[3] = {"allow", "deny", "local"};
    size_t len = 0;
    buf[0] = '\0';
    for (int m = 0; m < 3; m++)
        if (seen[m])
            len += (size_t)snprintf(buf + len, cap - len, "%s%s", len ? "," : "", names[m]);
    return len ? buf : NULL;
}

void weir_rls_encode_response(weir_buf *out, const weir_api_decision *dec,
                              const weir_headers *headers, const char *raw_body, size_t raw_len)
{
    status_parts stack_parts[STACK_STATUSES];
    pb_status *stack_ptrs[STACK_STATUSES];
    pb_header hv[WEIR_HEADERS_MAX];
    pb_header *hptrs[WEIR_HEADERS_MAX];

    status_parts *parts = stack_parts;
    pb_status **ptrs = stack_ptrs;
    void *heap = NULL;

    pb_response resp = ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__INIT;
    size_t n = dec ? dec->n : 0;
    if (dec)
        resp.overall_code = response_code(dec->overall);
    if (n > STACK_STATUSES) {
        if (n > SIZE_MAX / (sizeof *parts + sizeof *ptrs) ||
            !(heap = malloc(n * (sizeof *parts + sizeof *ptrs)))) {
            out->failed = true;
            return;
        }
        parts = heap;
        ptrs = (pb_status **)(parts + n);
    }
    for (size_t i = 0; i < n; i++) {
        fill_status(&parts[i], &dec->statuses[i]);
        ptrs[i] = &parts[i].status;
    }
    resp.n_statuses = n;
    resp.statuses = n ? ptrs : NULL;

    size_t nh = headers ? headers->n : 0;
    for (size_t i = 0; i < nh; i++) {
        pb_header h = ENVOY__CONFIG__CORE__V3__HEADER_VALUE__INIT;
        hv[i] = h;
        hv[i].key = (char *)weir_headers_name(headers, i); /* only read by pack */
        hv[i].value = (char *)weir_headers_value(headers, i);
        hptrs[i] = &hv[i];
    }
    resp.n_response_headers_to_add = nh;
    resp.response_headers_to_add = nh ? hptrs : NULL;
    if (raw_body) {
        resp.raw_body.data = (uint8_t *)raw_body; /* only read by pack */
        resp.raw_body.len = raw_len;
    }
    /* a decision a failure mode made says so to Envoy, in the filter's
     * dynamic metadata: {"weir.failure_mode": "allow"} */
    char modes[24];
    Google__Protobuf__Struct meta = GOOGLE__PROTOBUF__STRUCT__INIT;
    Google__Protobuf__Struct__FieldsEntry entry = GOOGLE__PROTOBUF__STRUCT__FIELDS_ENTRY__INIT;
    Google__Protobuf__Struct__FieldsEntry *entries[1] = {&entry};
    Google__Protobuf__Value value = GOOGLE__PROTOBUF__VALUE__INIT;
    if (failure_modes(dec, modes, sizeof(modes))) {
        value.kind_case = GOOGLE__PROTOBUF__VALUE__KIND_STRING_VALUE;
        value.string_value = modes;
        entry.key = (char *)"weir.failure_mode"; /* only read by pack */
        entry.value = &value;
        meta.n_fields = 1;
        meta.fields = entries;
        resp.dynamic_metadata = &meta;
    }
    weir_pb_append(out, &resp.base);
    free(heap);
}

/* ------------------------------------------------------------ clients */

static char *copy_str(char **pool, const char *s, size_t len)
{
    char *p = *pool;
    if (len)
        memcpy(p, s, len);
    p[len] = '\0';
    *pool += len + 1;
    return p;
}

void weir_rls_encode_request(weir_buf *out, const weir_request *req)
{
    size_t n = req->n_descriptors, n_entries = 0, text = req->domain_len + 1;
    for (size_t i = 0; i < n; i++) {
        const weir_descriptor *wd = &req->descriptors[i];
        n_entries += wd->n_entries;
        for (size_t j = 0; j < wd->n_entries; j++)
            text += wd->entries[j].key_len + wd->entries[j].value_len + 2;
    }
    /* one block: descriptors, overrides, hits, entries, pointers, strings */
    size_t bytes = n * (sizeof(pb_descriptor) + sizeof(pb_override) + sizeof(pb_u64) +
                        sizeof(pb_descriptor *)) +
                   n_entries * (sizeof(pb_entry) + sizeof(pb_entry *)) + text;
    void *block = malloc(bytes);
    if (!block) {
        out->failed = true;
        return;
    }
    pb_descriptor *descs = block;
    pb_override *overrides = (pb_override *)(descs + n);
    pb_u64 *hits = (pb_u64 *)(overrides + n);
    pb_entry *entries = (pb_entry *)(hits + n);
    pb_descriptor **desc_ptrs = (pb_descriptor **)(entries + n_entries);
    pb_entry **entry_ptrs = (pb_entry **)(desc_ptrs + n);
    char *pool = (char *)(entry_ptrs + n_entries);

    pb_request r = ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_REQUEST__INIT;
    r.domain = copy_str(&pool, req->domain, req->domain_len);
    r.hits_addend = req->hits > UINT32_MAX ? UINT32_MAX : (uint32_t)req->hits;
    r.n_descriptors = n;
    r.descriptors = n ? desc_ptrs : NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const weir_descriptor *wd = &req->descriptors[i];
        pb_descriptor pd = ENVOY__EXTENSIONS__COMMON__RATELIMIT__V3__RATE_LIMIT_DESCRIPTOR__INIT;
        descs[i] = pd;
        desc_ptrs[i] = &descs[i];
        descs[i].n_entries = wd->n_entries;
        descs[i].entries = wd->n_entries ? &entry_ptrs[k] : NULL;
        for (size_t j = 0; j < wd->n_entries; j++, k++) {
            pb_entry pe =
                ENVOY__EXTENSIONS__COMMON__RATELIMIT__V3__RATE_LIMIT_DESCRIPTOR__ENTRY__INIT;
            entries[k] = pe;
            entries[k].key = copy_str(&pool, wd->entries[j].key, wd->entries[j].key_len);
            entries[k].value = copy_str(&pool, wd->entries[j].value, wd->entries[j].value_len);
            entry_ptrs[k] = &entries[k];
        }
        if (wd->limit) {
            pb_override po =
                ENVOY__EXTENSIONS__COMMON__RATELIMIT__V3__RATE_LIMIT_DESCRIPTOR__RATE_LIMIT_OVERRIDE__INIT;
            overrides[i] = po;
            overrides[i].requests_per_unit = wd->limit->requests_per_unit;
            /* the numbers agree; WEEK (7) has no RateLimitUnit and goes
             * out as 7, which a server refuses */
            overrides[i].unit = (Envoy__Type__V3__RateLimitUnit)wd->limit->unit;
            descs[i].limit = &overrides[i];
        }
        if (wd->has_hits) {
            pb_u64 h = GOOGLE__PROTOBUF__UINT64_VALUE__INIT;
            hits[i] = h;
            hits[i].value = wd->hits;
            descs[i].hits_addend = &hits[i];
        }
    }
    weir_pb_append(out, &r.base);
    free(block);
}
