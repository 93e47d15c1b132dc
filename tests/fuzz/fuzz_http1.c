/*
 * fuzz_http1.c - fuzzes the HTTP/1.1 request codec the way a connection
 * drives it: bytes arrive in pieces, unconsumed bytes are fed again, and
 * every pipelined request is taken out in turn until an error or the end.
 *
 * The first input byte chooses the piece sizes; the rest is the byte stream.
 * Each input runs twice, all at once and in pieces, and both runs must hand
 * out the same requests and end the same way. Every request's views must lie
 * in the parser's buffer within the caps, errors must carry a known status
 * and stay until reset. A broken invariant aborts, so the fuzzer reports it
 * like a crash.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http1/codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_HEADER 1024u
#define MAX_BODY 4096u
#define CAP (MAX_HEADER + MAX_BODY)

static _Alignas(max_align_t) unsigned char mem[16384];
static char buf[CAP];

/* What one run produced, to compare the two runs. */
typedef struct digest {
    size_t n_requests;
    uint64_t hash;
    int status; /* the final error's, 0 if none */
    const char *message;
    bool in_request;
} digest;

static void check(int ok)
{
    if (!ok)
        abort();
}

/* FNV-1a over @n bytes, continuing @h. */
static uint64_t mix(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211u;
    }
    return h;
}

static uint64_t mix_str(uint64_t h, weir_http1_str s)
{
    h = mix(h, &s.n, sizeof(s.n));
    return mix(h, s.p, s.n);
}

/* A view lies wholly inside the request buffer. */
static void check_view(weir_http1_str s)
{
    check(s.p != NULL && s.p >= buf && s.p <= buf + CAP);
    check(s.n <= (size_t)(buf + CAP - s.p));
}

static bool blank(char c)
{
    return c == ' ' || c == '\t';
}

static bool str_eq(weir_http1_str s, const char *z)
{
    return s.n == strlen(z) && memcmp(s.p, z, s.n) == 0;
}

static uint64_t check_request(const weir_http1_request *r, uint64_t h)
{
    check_view(r->method_name);
    check_view(r->target);
    check_view(r->path);
    check_view(r->query);
    check_view(r->body);
    check(r->method_name.n > 0 && r->target.n > 0);
    check((r->method == WEIR_HTTP1_GET) == str_eq(r->method_name, "GET"));
    check((r->method == WEIR_HTTP1_HEAD) == str_eq(r->method_name, "HEAD"));
    check((r->method == WEIR_HTTP1_POST) == str_eq(r->method_name, "POST"));
    check((r->method == WEIR_HTTP1_PUT) == str_eq(r->method_name, "PUT"));
    check((r->method == WEIR_HTTP1_DELETE) == str_eq(r->method_name, "DELETE"));
    /* path and query are the target (after the scheme and authority of an
     * absolute-form target) split at the first '?' */
    const char *t_end = r->target.p + r->target.n;
    check(r->path.p >= r->target.p && r->path.p + r->path.n <= t_end);
    check(r->target.p[0] != '/' || r->path.p == r->target.p);
    check(memchr(r->path.p, '?', r->path.n) == NULL);
    const char *after = r->path.p + r->path.n;
    if (after < t_end && *after == '?') {
        check(r->query.p == after + 1);
        check(r->query.n == (size_t)(t_end - after - 1));
    } else {
        check(after == t_end && r->query.n == 0);
    }
    check(r->version_minor <= 1);
    check(r->n_headers <= WEIR_HTTP1_MAX_HEADERS);
    check(r->body.n <= MAX_BODY);
    h = mix(h, &r->method, sizeof(r->method));
    h = mix_str(h, r->method_name);
    h = mix_str(h, r->target);
    h = mix(h, &r->version_minor, sizeof(r->version_minor));
    h = mix(h, &r->keep_alive, sizeof(r->keep_alive));
    for (size_t i = 0; i < r->n_headers; i++) {
        weir_http1_str name = r->headers[i].name, value = r->headers[i].value;
        check_view(name);
        check_view(value);
        check(name.n > 0);
        check(value.n == 0 || (!blank(value.p[0]) && !blank(value.p[value.n - 1])));
        /* header_get finds this header or an earlier one of the same name */
        char z[64];
        if (name.n < sizeof(z) && memchr(name.p, '\0', name.n) == NULL) {
            memcpy(z, name.p, name.n);
            z[name.n] = '\0';
            weir_http1_str got = weir_http1_header_get(r, z);
            check(got.p != NULL && got.p <= value.p);
        }
        h = mix_str(h, name);
        h = mix_str(h, value);
    }
    return mix_str(h, r->body);
}

static bool known_status(int s)
{
    return s == 400 || s == 413 || s == 414 || s == 431 || s == 501 || s == 505;
}

/* Feed @data in pieces of 1..@seed bytes (all at once when @seed is 0). */
static void run(const uint8_t *data, size_t size, unsigned seed, digest *d)
{
    weir_http1_limits lim = {.max_header_bytes = MAX_HEADER, .max_body_bytes = MAX_BODY};
    weir_http1 *p = weir_http1_init(mem, &lim, buf, sizeof(buf));
    check(p != NULL && !weir_http1_in_request(p));
    const char *text = (const char *)data;
    uint32_t rng = seed * 2654435761u + 1;
    size_t pos = 0, arrived = 0;
    memset(d, 0, sizeof(*d));
    d->hash = 14695981039346656037u;
    for (;;) {
        if (pos == arrived) {
            if (arrived == size)
                break;
            size_t piece = size - arrived;
            if (seed != 0) {
                rng = rng * 1103515245u + 12345u;
                size_t want = 1 + (rng >> 16) % seed;
                piece = want < piece ? want : piece;
            }
            arrived += piece;
        }
        weir_http1_request req;
        weir_http1_error err = {0, NULL};
        size_t used = SIZE_MAX;
        weir_http1_result r = weir_http1_feed(p, text + pos, arrived - pos, &used, &req, &err);
        check(used <= arrived - pos);
        pos += used;
        if (r == WEIR_HTTP1_REQUEST) {
            check(used > 0 && !weir_http1_in_request(p));
            d->hash = check_request(&req, d->hash);
            d->n_requests++;
            continue;
        }
        if (r == WEIR_HTTP1_ERROR) {
            check(known_status(err.status) && err.message != NULL && err.message[0] != '\0');
            d->status = err.status;
            d->message = err.message;
            /* sticky: nothing more is consumed */
            weir_http1_error again = {0, NULL};
            check(weir_http1_feed(p, text + pos, arrived - pos, &used, &req, &again) ==
                  WEIR_HTTP1_ERROR);
            check(used == 0 && again.status == err.status && again.message == err.message);
            break;
        }
        check(r == WEIR_HTTP1_NEED_MORE && pos == arrived);
        /* 100 Continue is asked for once, and only mid-request */
        if (weir_http1_take_continue(p))
            check(weir_http1_in_request(p) && !weir_http1_take_continue(p));
    }
    d->in_request = weir_http1_in_request(p);
    weir_http1_reset(p);
    check(!weir_http1_in_request(p));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check(weir_http1_size() <= sizeof(mem));
    if (size == 0)
        return 0;
    unsigned seed = data[0];
    digest whole, pieces;
    run(data + 1, size - 1, 0, &whole);
    run(data + 1, size - 1, seed == 0 ? 1 : seed, &pieces);
    check(whole.n_requests == pieces.n_requests && whole.hash == pieces.hash);
    check(whole.status == pieces.status && whole.in_request == pieces.in_request);
    return 0;
}
