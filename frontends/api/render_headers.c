/*
 * render_headers.c - the rate limit header fields of a decision: the IETF
 * RateLimit-Policy and RateLimit fields, the legacy X-RateLimit-* trio and
 * Retry-After, all from the most restrictive status.
 *
 * Integer arithmetic only; every value is clamped so nothing overflows
 * (structured-field integers have at most 15 digits).
 */
#include <string.h>

#include "api.h"

#define US_PER_S 1000000
/** The largest structured-field integer (RFC 8941). */
#define SF_INT_MAX 999999999999999u

/* ceil(v / d) for d > 0; 0 when v <= 0. */
static uint64_t ceil_div(int64_t v, int64_t d)
{
    if (v <= 0)
        return 0;
    return (uint64_t)(v / d) + (v % d != 0);
}

static uint64_t sf_int(uint64_t v)
{
    return v > SF_INT_MAX ? SF_INT_MAX : v;
}

/* Whether retry_after @a is longer than @b (WEIR_NEVER is the longest). */
static bool longer(int64_t a, int64_t b)
{
    if (b == WEIR_NEVER)
        return false;
    return a == WEIR_NEVER || a > b;
}

/* Whether a status speaks for a limit clients are held to: a shadow-mode
 * limit is being tried out, never enforced, so it is not advertised. */
static bool has_limit(const weir_descriptor_status *s)
{
    return s->limit && !s->unlimited && !s->shadow;
}

const weir_descriptor_status *weir_api_most_restrictive(const weir_api_decision *dec)
{
    const weir_descriptor_status *best = NULL;
    for (size_t i = 0; i < dec->n; i++) {
        const weir_descriptor_status *s = &dec->statuses[i];
        if (has_limit(s) && s->code == WEIR_CODE_OVER_LIMIT && !s->shadow &&
            (!best || longer(s->retry_after_us, best->retry_after_us)))
            best = s;
    }
    if (best)
        return best;
    for (size_t i = 0; i < dec->n; i++) {
        const weir_descriptor_status *s = &dec->statuses[i];
        if (!has_limit(s))
            continue;
        if (!best || s->remaining < best->remaining ||
            (s->remaining == best->remaining && s->reset_after_us > best->reset_after_us))
            best = s;
    }
    return best;
}

int64_t weir_api_retry_after_s(const weir_api_decision *dec)
{
    if (dec->overall != WEIR_CODE_OVER_LIMIT)
        return 0;
    int64_t longest = 0;
    for (size_t i = 0; i < dec->n; i++) {
        const weir_descriptor_status *s = &dec->statuses[i];
        if (s->code != WEIR_CODE_OVER_LIMIT || s->shadow)
            continue;
        if (s->retry_after_us == WEIR_NEVER)
            return -1;
        if (s->retry_after_us > longest)
            longest = s->retry_after_us;
    }
    uint64_t secs = ceil_div(longest, US_PER_S);
    return secs < 1 ? 1 : (int64_t)secs;
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
    uint64_t window = ceil_div(window_us, US_PER_S);
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
    weir_buf_puts(b, "RateLimit-Policy: ");
    for (size_t i = 0; i < dec->n; i++) {
        const weir_descriptor_status *s = &dec->statuses[i];
        if (!has_limit(s))
            continue;
        if (!s->n_outcomes) {
            put_policy(b, s->limit, s->requests_per_unit, s->window_us, seen, &n);
            continue;
        }
        for (size_t k = 0; k < s->n_outcomes; k++) {
            const weir_limit_outcome *o = &s->outcomes[k];
            if (!o->shadow)
                put_policy(b, o->limit, o->requests_per_unit, o->window_us, seen, &n);
        }
    }
    weir_buf_puts(b, "\r\n");
}

static uint64_t reset_epoch_s(int64_t now_unix_us, int64_t reset_after_us)
{
    if (now_unix_us < 0)
        now_unix_us = 0;
    if (reset_after_us < 0)
        reset_after_us = 0;
    int64_t at =
        reset_after_us > INT64_MAX - now_unix_us ? INT64_MAX : now_unix_us + reset_after_us;
    return ceil_div(at, US_PER_S);
}

void weir_api_render_headers(weir_buf *out, const weir_api_decision *dec,
                             const weir_api_header_opts *opts, int64_t now_unix_us,
                             int64_t jitter_s)
{
    const weir_descriptor_status *m = opts ? weir_api_most_restrictive(dec) : NULL;
    if (!m)
        return;
    uint64_t remaining = sf_int(m->remaining);
    if (opts->ietf) {
        put_policies(out, dec);
        weir_buf_puts(out, "RateLimit: ");
        put_sf_name(out, m->limit);
        weir_buf_puts(out, ";r=");
        weir_buf_put_u64(out, remaining);
        weir_buf_puts(out, ";t=");
        weir_buf_put_u64(out, sf_int(ceil_div(m->reset_after_us, US_PER_S)));
        weir_buf_puts(out, "\r\n");
    }
    if (opts->legacy) {
        weir_buf_puts(out, "X-RateLimit-Limit: ");
        weir_buf_put_u64(out, m->requests_per_unit);
        weir_buf_puts(out, "\r\nX-RateLimit-Remaining: ");
        weir_buf_put_u64(out, remaining);
        weir_buf_puts(out, "\r\nX-RateLimit-Reset: ");
        weir_buf_put_u64(out, reset_epoch_s(now_unix_us, m->reset_after_us));
        weir_buf_puts(out, "\r\n");
    }
    if (opts->retry_after && dec->overall == WEIR_CODE_OVER_LIMIT) {
        int64_t s = weir_api_retry_after_s(dec);
        if (s > 0) {
            if (jitter_s > 0)
                s = jitter_s > INT64_MAX - s ? INT64_MAX : s + jitter_s;
            weir_buf_puts(out, "Retry-After: ");
            weir_buf_put_i64(out, s);
            weir_buf_puts(out, "\r\n");
        }
    }
}
