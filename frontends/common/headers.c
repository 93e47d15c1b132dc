/*
 * headers.c - the rate limit header fields of a decision: the IETF
 * RateLimit-Policy and RateLimit fields, the legacy X-RateLimit-* trio and
 * Retry-After, all from the most restrictive status, as a list of names
 * and values (headers.h).
 *
 * Integer arithmetic only; every value is clamped so nothing overflows
 * (structured-field integers have at most 15 digits).
 */
#include "common/headers.h"

#include <string.h>

#define US_PER_S 1000000
/** The largest structured-field integer (RFC 8941). */
#define SF_INT_MAX 999999999999999u

static uint64_t sf_int(uint64_t v)
{
    return v > SF_INT_MAX ? SF_INT_MAX : v;
}

/* ------------------------------------------------------------ the list */

void weir_headers_init(weir_headers *h, size_t max_bytes)
{
    weir_buf_init(&h->text, max_bytes);
    h->n = 0;
}

void weir_headers_free(weir_headers *h)
{
    weir_buf_free(&h->text);
    h->n = 0;
}

void weir_headers_clear(weir_headers *h)
{
    weir_buf_clear(&h->text);
    h->n = 0;
}

bool weir_headers_ok(const weir_headers *h)
{
    return weir_buf_ok(&h->text);
}

const char *weir_headers_name(const weir_headers *h, size_t i)
{
    return h->text.p + h->names[i];
}

const char *weir_headers_value(const weir_headers *h, size_t i)
{
    return h->text.p + h->values[i];
}

void weir_headers_put_lines(const weir_headers *h, weir_buf *out)
{
    for (size_t i = 0; i < h->n; i++) {
        weir_buf_puts(out, weir_headers_name(h, i));
        weir_buf_put(out, ": ", 2);
        weir_buf_puts(out, weir_headers_value(h, i));
        weir_buf_put(out, "\r\n", 2);
    }
}

/* A new field named @name (@len bytes): its value is what is appended to
 * h->text until end_field(). Returns the buffer to append to. */
static weir_buf *begin_field(weir_headers *h, const char *name, size_t len)
{
    if (h->n == WEIR_HEADERS_MAX) {
        h->text.failed = true;
        return &h->text;
    }
    h->names[h->n] = h->text.len;
    weir_buf_put(&h->text, name, len);
    weir_buf_putc(&h->text, '\0');
    h->values[h->n] = h->text.len;
    return &h->text;
}

#define BEGIN(h, name) begin_field((h), name, sizeof(name) - 1)

static void end_field(weir_headers *h)
{
    weir_buf_putc(&h->text, '\0');
    if (h->n < WEIR_HEADERS_MAX && weir_buf_ok(&h->text))
        h->n++;
}

void weir_headers_add(weir_headers *h, const char *name, size_t name_len, const char *value,
                      size_t value_len)
{
    weir_buf_put(begin_field(h, name, name_len), value, value_len);
    end_field(h);
}

/* Bytes of a structured-field string: '"' and '\' escaped, anything
 * outside printable ASCII replaced by '?'. */
static void put_sf_bytes(weir_buf *b, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            weir_buf_putc(b, '\\');
        weir_buf_putc(b, c >= 0x20 && c <= 0x7e ? (char)c : '?');
    }
}

/* X-RateLimit-Limit: the requests per unit, or the burst when the
 * algorithm lets a burst past them (a token bucket of 50 a second with a
 * burst of 100 says 100), so that Remaining is never above Limit. */
static uint64_t legacy_limit(const weir_descriptor_status *m)
{
    uint64_t rpu = m->requests_per_unit, burst = m->limit ? m->limit->burst : 0;
    if (!m->limit || !burst)
        return rpu; /* the defaults are at most the limit */
    switch (m->limit->algorithm) {
    case WEIR_ALGO_TOKEN_BUCKET:
    case WEIR_ALGO_GCRA:
    case WEIR_ALGO_LEAKY_BUCKET:
    case WEIR_ALGO_LEAKY_SHAPER:
        return burst > rpu ? burst : rpu;
    default:
        return rpu;
    }
}

/* A limit's name as a structured-field string: its name, else
 * "<domain>.<path>". */
static void put_sf_name(weir_buf *b, const weir_rule_limit *l)
{
    weir_buf_putc(b, '"');
    if (l->name && l->name[0]) {
        put_sf_bytes(b, l->name);
    } else {
        put_sf_bytes(b, l->domain ? l->domain : "");
        weir_buf_putc(b, '.');
        put_sf_bytes(b, l->path ? l->path : "");
    }
    weir_buf_putc(b, '"');
}

/* One policy item; false when @l was listed already (@seen, *@n). */
static bool put_policy(weir_buf *b, const weir_rule_limit *l, uint64_t quota, int64_t window_us,
                       const weir_rule_limit **seen, size_t *n)
{
    for (size_t j = 0; j < *n; j++)
        if (seen[j] == l)
            return false;
    if (*n < WEIR_ENGINE_MAX_LIMITS)
        seen[(*n)++] = l;
    if (*n > 1)
        weir_buf_puts(b, ", ");
    uint64_t window = weir_api_ceil_div(window_us, US_PER_S);
    put_sf_name(b, l);
    weir_buf_puts(b, ";q=");
    weir_buf_put_u64(b, sf_int(quota));
    weir_buf_puts(b, ";w=");
    weir_buf_put_u64(b, sf_int(window < 1 ? 1 : window));
    return true;
}

/* Every limit that took part: each status's outcomes when the engine gave
 * them (a descriptor with several limits lists each), else its limit. */
static void put_policies(weir_buf *b, const weir_api_decision *dec)
{
    const weir_rule_limit *seen[WEIR_ENGINE_MAX_LIMITS];
    size_t n = 0;
    for (size_t i = 0; i < dec->n; i++) {
        const weir_descriptor_status *s = &dec->statuses[i];
        if (!weir_api_has_limit(s))
            continue;
        if (!s->n_outcomes) {
            put_policy(b, s->limit, s->requests_per_unit, s->window_us, seen, &n);
            continue;
        }
        for (size_t k = 0; k < s->n_outcomes; k++) {
            const weir_limit_outcome *o = &s->outcomes[k];
            /* an adaptive limit's quota is its controller's of the moment */
            if (!o->shadow)
                put_policy(b, o->limit, o->adaptive ? o->adaptive_limit : o->requests_per_unit,
                           o->window_us, seen, &n);
        }
    }
}

static uint64_t reset_epoch_s(int64_t now_unix_us, int64_t reset_after_us)
{
    if (now_unix_us < 0)
        now_unix_us = 0;
    if (reset_after_us < 0)
        reset_after_us = 0;
    int64_t at =
        reset_after_us > INT64_MAX - now_unix_us ? INT64_MAX : now_unix_us + reset_after_us;
    return weir_api_ceil_div(at, US_PER_S);
}

void weir_api_render_headers(weir_headers *out, const weir_api_decision *dec,
                             const weir_api_header_opts *opts, int64_t now_unix_us,
                             int64_t jitter_s)
{
    const weir_descriptor_status *m = opts ? weir_api_most_restrictive(dec) : NULL;
    if (!m)
        return;
    uint64_t remaining = sf_int(m->remaining);
    weir_buf *b;
    if (opts->ietf) {
        put_policies(BEGIN(out, "RateLimit-Policy"), dec);
        end_field(out);
        b = BEGIN(out, "RateLimit");
        put_sf_name(b, m->limit);
        weir_buf_puts(b, ";r=");
        weir_buf_put_u64(b, remaining);
        weir_buf_puts(b, ";t=");
        weir_buf_put_u64(b, sf_int(weir_api_ceil_div(m->reset_after_us, US_PER_S)));
        end_field(out);
    }
    if (opts->legacy) {
        weir_buf_put_u64(BEGIN(out, "X-RateLimit-Limit"), legacy_limit(m));
        end_field(out);
        weir_buf_put_u64(BEGIN(out, "X-RateLimit-Remaining"), remaining);
        end_field(out);
        weir_buf_put_u64(BEGIN(out, "X-RateLimit-Reset"),
                         reset_epoch_s(now_unix_us, m->reset_after_us));
        end_field(out);
    }
    if (opts->upstream) {
        static const char *const dflt[3] = {"RateLimit-Limit", "RateLimit-Remaining",
                                            "RateLimit-Reset"};
        uint64_t v[3] = {m->requests_per_unit, remaining,
                         weir_api_ceil_div(m->reset_after_us, US_PER_S)};
        for (int i = 0; i < 3; i++) {
            const char *name = opts->upstream_names[i][0] ? opts->upstream_names[i] : dflt[i];
            weir_buf_put_u64(begin_field(out, name, strlen(name)), v[i]);
            end_field(out);
        }
    }
    if (opts->retry_after && dec->overall == WEIR_CODE_OVER_LIMIT) {
        int64_t s = weir_api_retry_after_s(dec);
        if (s > 0) {
            if (jitter_s > 0)
                s = jitter_s > INT64_MAX - s ? INT64_MAX : s + jitter_s;
            weir_buf_put_i64(BEGIN(out, "Retry-After"), s);
            end_field(out);
        }
    }
}
