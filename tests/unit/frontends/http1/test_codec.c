/*
 * test_http1_codec.c - the HTTP/1.1 request codec: the requests it hands
 * out (method, target split, headers, de-chunked body, keep-alive), that any
 * split of the input gives the same result, pipelining, every cap at its
 * edge, the status of each malformed input, and its state (in_request,
 * sticky errors, reset).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http1/codec.h"

/* ---------------------------------------------------------------- harness */

#define HDR_CAP 1024
#define BODY_CAP 64

typedef struct fixture {
    weir_http1 *p;
    void *mem;
    char *buf;
    size_t cap;
} fixture;

static fixture make(size_t max_header, size_t max_body, size_t cap)
{
    fixture f;
    weir_http1_limits lim = {.max_header_bytes = max_header, .max_body_bytes = max_body};
    f.mem = malloc(weir_http1_size());
    f.buf = malloc(cap > 0 ? cap : 1);
    f.cap = cap;
    assert_non_null(f.mem);
    assert_non_null(f.buf);
    f.p = weir_http1_init(f.mem, &lim, f.buf, cap);
    assert_ptr_equal(f.p, f.mem);
    return f;
}

static fixture make_default(void)
{
    return make(HDR_CAP, BODY_CAP, HDR_CAP + BODY_CAP);
}

static void drop(fixture *f)
{
    free(f->mem);
    free(f->buf);
}

static void str_is(weir_http1_str s, const char *want)
{
    assert_non_null(s.p);
    if (s.n != strlen(want) || memcmp(s.p, want, s.n) != 0)
        fail_msg("got '%.*s' (%zu bytes), want '%s'", (int)s.n, s.p, s.n, want);
}

/* Feed all of @text at once, expecting exactly one request using it all. */
static weir_http1_request one(fixture *f, const char *text)
{
    weir_http1_request req;
    weir_http1_error err = {0, NULL};
    size_t used = 99999;
    weir_http1_result r = weir_http1_feed(f->p, text, strlen(text), &used, &req, &err);
    if (r != WEIR_HTTP1_REQUEST)
        fail_msg("'%.40s': result %d, status %d (%s)", text, r, err.status,
                 err.message ? err.message : "");
    assert_int_equal(used, strlen(text));
    assert_false(weir_http1_in_request(f->p));
    return req;
}

/* Feed all of @text at once, expecting an error with @status. */
static weir_http1_error bad(fixture *f, const char *text, size_t len, int status)
{
    weir_http1_request req;
    weir_http1_error err = {0, NULL};
    size_t used;
    weir_http1_result r = weir_http1_feed(f->p, text, len, &used, &req, &err);
    if (r != WEIR_HTTP1_ERROR || err.status != status)
        fail_msg("'%.40s': result %d, status %d (%s); want %d", text, r, err.status,
                 err.message ? err.message : "", status);
    assert_non_null(err.message);
    assert_true(used <= len);
    return err;
}

static void bad_is(const char *text, int status, const char *message)
{
    fixture f = make_default();
    weir_http1_error err = bad(&f, text, strlen(text), status);
    assert_string_equal(err.message, message);
    drop(&f);
}

/* A request flattened to one line, to compare runs and state expectations. */
static void describe(const weir_http1_request *r, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%d %.*s T=%.*s P=%.*s Q=%.*s V=%u K=%d H=", (int)r->method,
                     (int)r->method_name.n, r->method_name.p, (int)r->target.n, r->target.p,
                     (int)r->path.n, r->path.p, (int)r->query.n, r->query.p, r->version_minor,
                     (int)r->keep_alive);
    for (size_t i = 0; i < r->n_headers && n > 0 && (size_t)n < cap; i++)
        n += snprintf(out + n, cap - (size_t)n, "[%.*s:%.*s]", (int)r->headers[i].name.n,
                      r->headers[i].name.p, (int)r->headers[i].value.n, r->headers[i].value.p);
    if (n > 0 && (size_t)n < cap)
        snprintf(out + n, cap - (size_t)n, " B=%zu:%.*s", r->body.n, (int)r->body.n, r->body.p);
}

#define MAX_OUT 4
#define LINE 2048

typedef struct outcome {
    size_t n_requests;
    char requests[MAX_OUT][LINE];
    size_t consumed[MAX_OUT]; /* bytes of the input used by each request */
    int status;               /* the final error's, 0 if none */
    const char *message;
    bool in_request; /* at the end */
} outcome;

/*
 * Deliver @len bytes of @text @step bytes at a time (0: all at once), the
 * way a connection does: unconsumed bytes are kept and fed again with the
 * next arrival, and the rest after each request is fed at once.
 */
static void run(const char *text, size_t len, size_t step, size_t max_header, size_t max_body,
                outcome *o)
{
    fixture f = make(max_header, max_body, max_header + max_body);
    memset(o, 0, sizeof(*o));
    size_t arrived = step == 0 || step > len ? len : step;
    size_t pos = 0, start = 0;
    for (;;) {
        weir_http1_request req;
        weir_http1_error err = {0, NULL};
        size_t used = 99999;
        weir_http1_result r = weir_http1_feed(f.p, text + pos, arrived - pos, &used, &req, &err);
        assert_true(used <= arrived - pos);
        pos += used;
        if (r == WEIR_HTTP1_REQUEST) {
            assert_true(o->n_requests < MAX_OUT);
            describe(&req, o->requests[o->n_requests], LINE);
            o->consumed[o->n_requests++] = pos - start;
            start = pos;
            continue;
        }
        if (r == WEIR_HTTP1_ERROR) {
            o->status = err.status;
            o->message = err.message;
            break;
        }
        assert_int_equal(r, WEIR_HTTP1_NEED_MORE);
        assert_int_equal(pos, arrived);
        if (arrived == len)
            break;
        arrived = step == 0 || len - arrived < step ? len : arrived + step;
    }
    o->in_request = weir_http1_in_request(f.p);
    drop(&f);
}

static void same(const outcome *a, const outcome *b, size_t step)
{
    if (a->n_requests != b->n_requests || a->status != b->status || a->in_request != b->in_request)
        fail_msg("step %zu: %zu requests, status %d, in_request %d; all at once: %zu, %d, %d", step,
                 b->n_requests, b->status, (int)b->in_request, a->n_requests, a->status,
                 (int)a->in_request);
    for (size_t i = 0; i < a->n_requests; i++) {
        assert_string_equal(a->requests[i], b->requests[i]);
        assert_int_equal(a->consumed[i], b->consumed[i]);
    }
    if (a->status != 0)
        assert_string_equal(a->message, b->message);
}

/* Every step size, and every cut into two pieces, gives what all at once
 * does; returns the all-at-once outcome for the caller to check. */
static void split_invariant(const char *text, size_t max_header, size_t max_body, outcome *whole)
{
    size_t len = strlen(text);
    outcome *o = malloc(sizeof(*o));
    assert_non_null(o);
    run(text, len, 0, max_header, max_body, whole);
    for (size_t step = 1; step <= len; step++) {
        run(text, len, step, max_header, max_body, o);
        same(whole, o, step);
    }
    /* two pieces: the first of @cut bytes */
    for (size_t cut = 1; cut < len; cut++) {
        fixture f = make(max_header, max_body, max_header + max_body);
        outcome got;
        memset(&got, 0, sizeof(got));
        size_t pos = 0, start = 0, arrived = cut;
        for (;;) {
            weir_http1_request req;
            weir_http1_error err = {0, NULL};
            size_t used;
            weir_http1_result r =
                weir_http1_feed(f.p, text + pos, arrived - pos, &used, &req, &err);
            pos += used;
            if (r == WEIR_HTTP1_REQUEST) {
                assert_true(got.n_requests < MAX_OUT);
                describe(&req, got.requests[got.n_requests], LINE);
                got.consumed[got.n_requests++] = pos - start;
                start = pos;
                continue;
            }
            if (r == WEIR_HTTP1_ERROR) {
                got.status = err.status;
                got.message = err.message;
                break;
            }
            if (arrived == len)
                break;
            arrived = len;
        }
        got.in_request = weir_http1_in_request(f.p);
        drop(&f);
        same(whole, &got, cut + 1000);
    }
    free(o);
}

/* ---------------------------------------------------------------- requests */

static void simple_get_with_query(void **unused)
{
    (void)unused;
    fixture f = make_default();
    weir_http1_request r =
        one(&f, "GET /v1/check?key=alice&cost=2 HTTP/1.1\r\nHost: example.com\r\n"
                "User-Agent: test/1.0\r\n\r\n");
    assert_int_equal(r.method, WEIR_HTTP1_GET);
    str_is(r.method_name, "GET");
    str_is(r.target, "/v1/check?key=alice&cost=2");
    str_is(r.path, "/v1/check");
    str_is(r.query, "key=alice&cost=2");
    assert_int_equal(r.version_minor, 1);
    assert_int_equal(r.n_headers, 2);
    str_is(r.headers[0].name, "Host");
    str_is(r.headers[0].value, "example.com");
    str_is(r.headers[1].name, "User-Agent");
    str_is(r.headers[1].value, "test/1.0");
    assert_int_equal(r.body.n, 0);
    assert_true(r.keep_alive);
    /* every view lies in the caller's buffer */
    assert_true(r.target.p >= f.buf && r.target.p + r.target.n <= f.buf + f.cap);
    assert_true(r.method_name.p >= f.buf && r.method_name.p < f.buf + f.cap);
    drop(&f);
}

static void post_with_content_length(void **unused)
{
    (void)unused;
    fixture f = make_default();
    weir_http1_request r = one(&f, "POST /v1/check HTTP/1.1\r\nContent-Length: 11\r\n"
                                   "Content-Type: text/plain\r\n\r\nhello world");
    assert_int_equal(r.method, WEIR_HTTP1_POST);
    str_is(r.method_name, "POST");
    str_is(r.path, "/v1/check");
    assert_int_equal(r.query.n, 0);
    assert_int_equal(r.n_headers, 2);
    str_is(weir_http1_header_get(&r, "content-length"), "11");
    str_is(r.body, "hello world");
    assert_true(r.body.p >= f.buf && r.body.p + r.body.n <= f.buf + f.cap);
    assert_true(r.keep_alive);
    drop(&f);
}

/* Expect: 100-continue is reported once, when the headers are whole and
 * the body is still to come, for HTTP/1.1 requests with a body only. */
static void expect_continue(void **unused)
{
    (void)unused;
    fixture f = make_default();
    size_t used;
    weir_http1_request r;
    weir_http1_error e;
    const char head[] = "POST /v1/check HTTP/1.1\r\nExpect: 100-Continue\r\n"
                        "Content-Length: 5\r\n\r\n";
    assert_int_equal(weir_http1_feed(f.p, head, 20, &used, &r, &e), WEIR_HTTP1_NEED_MORE);
    assert_false(weir_http1_take_continue(f.p)); /* headers not whole yet */
    assert_int_equal(weir_http1_feed(f.p, head + 20, sizeof(head) - 21, &used, &r, &e),
                     WEIR_HTTP1_NEED_MORE);
    assert_true(weir_http1_take_continue(f.p));
    assert_false(weir_http1_take_continue(f.p)); /* once */
    assert_int_equal(weir_http1_feed(f.p, "hello", 5, &used, &r, &e), WEIR_HTTP1_REQUEST);
    assert_false(weir_http1_take_continue(f.p));
    /* no body, another expectation, HTTP/1.0: nothing to report */
    static const char *const none[] = {
        "POST /x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n",
        "POST /x HTTP/1.1\r\nExpect: something\r\nContent-Length: 5\r\n\r\n",
        "POST /x HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n",
    };
    for (size_t i = 0; i < 3; i++) {
        weir_http1_reset(f.p);
        weir_http1_feed(f.p, none[i], strlen(none[i]), &used, &r, &e);
        assert_false(weir_http1_take_continue(f.p));
    }
    /* chunked: a body to come */
    weir_http1_reset(f.p);
    const char chunked[] = "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
                           "Expect: 100-continue\r\n\r\n";
    assert_int_equal(weir_http1_feed(f.p, chunked, sizeof(chunked) - 1, &used, &r, &e),
                     WEIR_HTTP1_NEED_MORE);
    assert_true(weir_http1_take_continue(f.p));
    drop(&f);
}

static void chunked_body_with_extensions_and_trailers(void **unused)
{
    (void)unused;
    fixture f = make_default();
    weir_http1_request r = one(&f, "POST /up HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                                   "5;name=val\r\nhello\r\n"
                                   "6;a;b=\"q\"\r\n world\r\n"
                                   "0\r\nX-Trailer: yes\r\nX-Other: 1\r\n\r\n");
    assert_int_equal(r.method, WEIR_HTTP1_POST);
    str_is(r.body, "hello world");
    /* trailers are not headers */
    assert_int_equal(r.n_headers, 1);
    str_is(r.headers[0].name, "Transfer-Encoding");
    str_is(r.headers[0].value, "chunked");
    assert_null(weir_http1_header_get(&r, "X-Trailer").p);
    assert_true(r.keep_alive);
    drop(&f);
}

static void chunked_body_empty_and_uppercase_hex(void **unused)
{
    (void)unused;
    fixture f = make_default();
    weir_http1_request r =
        one(&f, "POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n0\r\n\r\n");
    assert_int_equal(r.body.n, 0);
    assert_non_null(r.body.p);
    r = one(&f, "POST / HTTP/1.1\r\ntransfer-encoding:  chunked \r\n\r\n"
                "A\r\n0123456789\r\n0\r\n\r\n");
    str_is(r.body, "0123456789");
    drop(&f);
}

/* The inputs every split must agree on, malformed ones included. */
static const char *const split_inputs[] = {
    "GET /v1/check?key=alice&cost=2 HTTP/1.1\r\nHost: example.com\r\nX-Pad: \t a b \t\r\n\r\n",
    "POST /v1/check HTTP/1.1\r\nContent-Length: 11\r\nContent-Type: text/plain\r\n\r\nhello world",
    "POST /up HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;name=val\r\nhello\r\n6\r\n "
    "world\r\n0\r\nX-Trailer: yes\r\n\r\n",
    "\r\nGET /a HTTP/1.1\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 3\r\n\r\nxyzGET /c? "
    "HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    "GET / HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nGET /next HTTP/1.1\r\n\r\n",
    "CONNECT example.com:443 HTTP/1.1\r\n\r\nDELETE /x HTTP/1.1\r\n\r\nGET /tail HT",
    "GET / HTTP/2.0\r\n\r\n",
    "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc",
    "POST / HTTP/1.1\r\nContent-Length: 65\r\n\r\n",
    "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n"
    "0123456789012345678901234567890123456789012345678901234567890123\r\n1\r\nx\r\n0\r\n\r\n",
    "GET / HTTP/1.1\r\nX: folded\r\n line\r\n\r\n",
    "\x01garbage\r\n\r\n",
    "GET / HTTP/1.1\r\nBad Header\r\n\r\n",
    "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XX3\r\nabc\r\n0\r\n\r\n",
    "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nA: b\n\r\n",
    "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\nGET /b "
    "HTTP/1.1\r\n\r\n",
};

static void any_split_gives_the_same_result(void **unused)
{
    (void)unused;
    outcome *whole = malloc(sizeof(*whole));
    assert_non_null(whole);
    for (size_t i = 0; i < sizeof(split_inputs) / sizeof(split_inputs[0]); i++)
        split_invariant(split_inputs[i], HDR_CAP, BODY_CAP, whole);

    /* and the all-at-once results are the expected ones */
    split_invariant(split_inputs[0], HDR_CAP, BODY_CAP, whole);
    assert_int_equal(whole->n_requests, 1);
    assert_string_equal(whole->requests[0],
                        "0 GET T=/v1/check?key=alice&cost=2 P=/v1/check Q=key=alice&cost=2 V=1 "
                        "K=1 H=[Host:example.com][X-Pad:a b] B=0:");
    split_invariant(split_inputs[3], HDR_CAP, BODY_CAP, whole);
    assert_int_equal(whole->n_requests, 3);
    assert_string_equal(whole->requests[0], "0 GET T=/a P=/a Q= V=1 K=1 H= B=0:");
    assert_int_equal(whole->consumed[0], 2 + 19);
    assert_string_equal(whole->requests[1],
                        "2 POST T=/b P=/b Q= V=1 K=1 H=[Content-Length:3] B=3:xyz");
    assert_int_equal(whole->consumed[1], 42);
    assert_string_equal(whole->requests[2],
                        "0 GET T=/c? P=/c Q= V=0 K=1 H=[Connection:keep-alive] B=0:");
    assert_int_equal(whole->status, 0);
    assert_false(whole->in_request);
    split_invariant(split_inputs[5], HDR_CAP, BODY_CAP, whole);
    assert_int_equal(whole->n_requests, 2);
    assert_true(whole->in_request);
    split_invariant(split_inputs[9], HDR_CAP, BODY_CAP, whole);
    assert_int_equal(whole->n_requests, 0);
    assert_int_equal(whole->status, 413);
    free(whole);
}

static void pipelined_two(void **unused)
{
    (void)unused;
    fixture f = make_default();
    const char *a = "GET /a HTTP/1.1\r\nHost: h\r\n\r\n";
    const char *b = "POST /b?x=1 HTTP/1.1\r\nContent-Length: 5\r\n\r\nabcde";
    char text[256];
    snprintf(text, sizeof(text), "%s%s", a, b);
    size_t len = strlen(text), used;
    weir_http1_request r;
    weir_http1_error e;

    assert_int_equal(weir_http1_feed(f.p, text, len, &used, &r, &e), WEIR_HTTP1_REQUEST);
    assert_int_equal(used, strlen(a));
    str_is(r.path, "/a");
    str_is(weir_http1_header_get(&r, "host"), "h");
    assert_int_equal(r.body.n, 0);

    size_t pos = used;
    assert_int_equal(weir_http1_feed(f.p, text + pos, len - pos, &used, &r, &e),
                     WEIR_HTTP1_REQUEST);
    assert_int_equal(used, strlen(b));
    assert_int_equal(r.method, WEIR_HTTP1_POST);
    str_is(r.path, "/b");
    str_is(r.query, "x=1");
    str_is(r.body, "abcde");
    assert_int_equal(r.n_headers, 1);

    /* nothing left: zero bytes change nothing */
    assert_int_equal(weir_http1_feed(f.p, text + len, 0, &used, &r, &e), WEIR_HTTP1_NEED_MORE);
    assert_int_equal(used, 0);
    assert_false(weir_http1_in_request(f.p));
    drop(&f);
}

static void pipelined_three(void **unused)
{
    (void)unused;
    fixture f = make_default();
    const char *parts[3] = {
        "POST /1 HTTP/1.1\r\nContent-Length: 2\r\n\r\nAB",
        "POST /2 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nCDE\r\n0\r\n\r\n",
        "GET /3?q HTTP/1.1\r\nConnection: close\r\n\r\n",
    };
    const char *bodies[3] = {"AB", "CDE", ""};
    const char *paths[3] = {"/1", "/2", "/3"};
    char text[512];
    snprintf(text, sizeof(text), "%s%s%s", parts[0], parts[1], parts[2]);
    size_t len = strlen(text), pos = 0;
    for (int i = 0; i < 3; i++) {
        weir_http1_request r;
        weir_http1_error e;
        size_t used;
        assert_int_equal(weir_http1_feed(f.p, text + pos, len - pos, &used, &r, &e),
                         WEIR_HTTP1_REQUEST);
        assert_int_equal(used, strlen(parts[i]));
        str_is(r.path, paths[i]);
        str_is(r.body, bodies[i]);
        assert_int_equal(r.keep_alive, i < 2);
        pos += used;
    }
    assert_int_equal(pos, len);
    drop(&f);
}

static void keep_alive_rules(void **unused)
{
    (void)unused;
    fixture f = make_default();
    weir_http1_request r = one(&f, "GET / HTTP/1.0\r\n\r\n");
    assert_int_equal(r.version_minor, 0);
    assert_false(r.keep_alive);
    r = one(&f, "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_int_equal(r.version_minor, 0);
    assert_true(r.keep_alive);
    r = one(&f, "GET / HTTP/1.1\r\nConnection: close\r\n\r\n");
    assert_int_equal(r.version_minor, 1);
    assert_false(r.keep_alive);
    r = one(&f, "GET / HTTP/1.1\r\nConnection: Keep-Alive\r\n\r\n");
    assert_true(r.keep_alive);
    /* a request after a "close" one still parses: closing is the caller's */
    r = one(&f, "GET /after HTTP/1.1\r\n\r\n");
    str_is(r.path, "/after");
    assert_true(r.keep_alive);
    drop(&f);
}

static void other_methods(void **unused)
{
    (void)unused;
    fixture f = make_default();
    weir_http1_request r = one(&f, "DELETE /x HTTP/1.1\r\n\r\n");
    assert_int_equal(r.method, WEIR_HTTP1_DELETE);
    str_is(r.method_name, "DELETE");
    r = one(&f, "PUT /y HTTP/1.1\r\nContent-Length: 1\r\n\r\nz");
    assert_int_equal(r.method, WEIR_HTTP1_PUT);
    str_is(r.method_name, "PUT");
    str_is(r.body, "z");
    r = one(&f, "OPTIONS * HTTP/1.1\r\n\r\n");
    assert_int_equal(r.method, WEIR_HTTP1_OTHER);
    str_is(r.method_name, "OPTIONS");
    str_is(r.target, "*");
    r = one(&f, "HEAD /h HTTP/1.1\r\n\r\n");
    assert_int_equal(r.method, WEIR_HTTP1_HEAD);
    str_is(r.method_name, "HEAD");
    r = one(&f, "M-SEARCH * HTTP/1.1\r\n\r\n");
    assert_int_equal(r.method, WEIR_HTTP1_OTHER);
    str_is(r.method_name, "M-SEARCH");
    drop(&f);
}

static void connect_and_upgrade_are_ordinary(void **unused)
{
    (void)unused;
    fixture f = make_default();
    weir_http1_request r = one(&f, "CONNECT example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_int_equal(r.method, WEIR_HTTP1_OTHER);
    str_is(r.method_name, "CONNECT");
    str_is(r.target, "example.com:443");
    str_is(r.path, "example.com:443");
    r = one(&f, "GET /ws HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
    str_is(r.path, "/ws");
    str_is(weir_http1_header_get(&r, "upgrade"), "websocket");
    /* the connection keeps parsing HTTP/1.1 afterwards */
    r = one(&f, "GET /next HTTP/1.1\r\n\r\n");
    str_is(r.path, "/next");
    drop(&f);
}

static void target_split(void **unused)
{
    (void)unused;
    fixture f = make_default();
    weir_http1_request r = one(&f, "GET /path? HTTP/1.1\r\n\r\n");
    str_is(r.target, "/path?");
    str_is(r.path, "/path");
    assert_non_null(r.query.p);
    assert_int_equal(r.query.n, 0);
    r = one(&f, "GET /? HTTP/1.1\r\n\r\n");
    str_is(r.path, "/");
    assert_int_equal(r.query.n, 0);
    r = one(&f, "GET /a?b?c=%20 HTTP/1.1\r\n\r\n");
    str_is(r.path, "/a");
    str_is(r.query, "b?c=%20");
    r = one(&f, "GET /a%2Fb HTTP/1.1\r\n\r\n");
    str_is(r.path, "/a%2Fb");
    assert_non_null(r.query.p);
    assert_int_equal(r.query.n, 0);
    r = one(&f, "GET /? HTTP/1.1\r\n\r\n");
    str_is(r.target, "/?");
    /* absolute form: the path starts after the authority */
    r = one(&f, "GET http://weir.test:8080/v1/check?domain=a HTTP/1.1\r\n\r\n");
    str_is(r.target, "http://weir.test:8080/v1/check?domain=a");
    str_is(r.path, "/v1/check");
    str_is(r.query, "domain=a");
    r = one(&f, "GET http://weir.test?x HTTP/1.1\r\n\r\n");
    assert_int_equal(r.path.n, 0);
    str_is(r.query, "x");
    r = one(&f, "GET http://weir.test HTTP/1.1\r\n\r\n");
    assert_int_equal(r.path.n, 0);
    assert_int_equal(r.query.n, 0);
    drop(&f);
    /* RFC 9112 5.1: no whitespace between a field name and its colon */
    bad_is("GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400, "whitespace between header name and colon");
    /* a target that is only a query (no path characters) is not a target */
    bad_is("GET ?a=1 HTTP/1.1\r\n\r\n", 400, "malformed request: invalid URL");
    /* nor is one with a fragment */
    bad_is("GET /a#frag HTTP/1.1\r\n\r\n", 400, "fragment in request target");
    /* what a proxy in front could read otherwise: a bare LF anywhere in
     * the header section, runs of spaces in the request line */
    static const char bare_lf[] = "a line of the header section ends in LF without CR";
    bad_is("GET / HTTP/1.1\nHost: x\r\n\r\n", 400, bare_lf);
    bad_is("GET / HTTP/1.1\r\nHost: x\n\r\n", 400, bare_lf);
    bad_is("GET / HTTP/1.1\r\nHost: x\r\n\n", 400, bare_lf);
    static const char spaces[] = "more than one space between the parts of the request line";
    bad_is("GET  / HTTP/1.1\r\n\r\n", 400, spaces);
    bad_is("GET /  HTTP/1.1\r\n\r\n", 400, spaces);
    /* a space in a field value is no request line */
    fixture g = make_default();
    weir_http1_request q = one(&g, "GET / HTTP/1.1\r\nX-A: b  c\r\n\r\n");
    str_is(weir_http1_header_get(&q, "x-a"), "b  c");
    drop(&g);
}

static void header_get_and_trimming(void **unused)
{
    (void)unused;
    fixture f = make_default();
    weir_http1_request r = one(&f, "GET / HTTP/1.1\r\nX-Pad: \t  value with  spaces \t \r\n"
                                   "Empty:\r\nBlank:   \r\nDup: first\r\ndup: second\r\n"
                                   "HOST: h.example\r\n\r\n");
    assert_int_equal(r.n_headers, 6);
    str_is(r.headers[0].value, "value with  spaces");
    str_is(weir_http1_header_get(&r, "x-pad"), "value with  spaces");
    str_is(weir_http1_header_get(&r, "X-PAD"), "value with  spaces");
    str_is(weir_http1_header_get(&r, "host"), "h.example");
    str_is(weir_http1_header_get(&r, "Host"), "h.example");
    str_is(r.headers[5].name, "HOST"); /* names as sent */
    weir_http1_str e = weir_http1_header_get(&r, "empty");
    assert_non_null(e.p);
    assert_int_equal(e.n, 0);
    e = weir_http1_header_get(&r, "blank");
    assert_non_null(e.p);
    assert_int_equal(e.n, 0);
    str_is(weir_http1_header_get(&r, "DUP"), "first");
    assert_null(weir_http1_header_get(&r, "missing").p);
    assert_null(weir_http1_header_get(&r, "x-pa").p);
    assert_null(weir_http1_header_get(&r, "x-pad2").p);
    assert_null(weir_http1_header_get(&r, "").p);
    drop(&f);
}

/* ---------------------------------------------------------------- caps */

/* "GET / HTTP/1.1\r\n" + "X: " + @vlen bytes + "\r\n\r\n": 23 + vlen bytes. */
static void header_request(char *out, size_t vlen)
{
    strcpy(out, "GET / HTTP/1.1\r\nX: ");
    memset(out + strlen(out), 'v', vlen);
    strcpy(out + 19 + vlen, "\r\n\r\n");
}

static void header_cap_at_its_edge(void **unused)
{
    (void)unused;
    char text[256];
    outcome *o = malloc(sizeof(*o));
    assert_non_null(o);
    header_request(text, 41); /* 64 bytes: the cap */
    assert_int_equal(strlen(text), 64);
    split_invariant(text, 64, BODY_CAP, o);
    assert_int_equal(o->n_requests, 1);
    assert_int_equal(o->status, 0);

    header_request(text, 42); /* 65 bytes: one too many */
    split_invariant(text, 64, BODY_CAP, o);
    assert_int_equal(o->n_requests, 0);
    assert_int_equal(o->status, 431);
    assert_string_equal(o->message, "header section too large");

    header_request(text, 200); /* far beyond: refused before its end */
    fixture f = make(64, BODY_CAP, 64 + BODY_CAP);
    weir_http1_error e = bad(&f, text, strlen(text), 431);
    assert_string_equal(e.message, "header section too large");
    drop(&f);
    free(o);
}

static void url_cap(void **unused)
{
    (void)unused;
    char text[256];
    outcome *o = malloc(sizeof(*o));
    assert_non_null(o);
    /* "GET " + target ending at byte 64: the target fits, the line not */
    strcpy(text, "GET /");
    memset(text + 5, 'a', 59);
    strcpy(text + 64, " HTTP/1.1\r\n\r\n");
    split_invariant(text, 64, BODY_CAP, o);
    assert_int_equal(o->status, 431);
    assert_string_equal(o->message, "header section too large");
    /* one more target byte: the target alone is too long */
    strcpy(text, "GET /");
    memset(text + 5, 'a', 60);
    strcpy(text + 65, " HTTP/1.1\r\n\r\n");
    split_invariant(text, 64, BODY_CAP, o);
    assert_int_equal(o->status, 414);
    assert_string_equal(o->message, "request target too long");
    /* a long query too */
    strcpy(text, "GET /?");
    memset(text + 6, 'q', 150);
    strcpy(text + 156, " HTTP/1.1\r\n\r\n");
    split_invariant(text, 64, BODY_CAP, o);
    assert_int_equal(o->status, 414);
    free(o);
}

static void declared_body_too_large(void **unused)
{
    (void)unused;
    fixture f = make_default();
    /* refused as soon as the headers end, no body byte sent */
    const char *head = "POST / HTTP/1.1\r\nContent-Length: 65\r\n\r\n";
    weir_http1_error e = bad(&f, head, strlen(head), 413);
    assert_string_equal(e.message, "request body too large");
    drop(&f);

    f = make_default();
    const char *huge = "POST / HTTP/1.1\r\nContent-Length: 99999999999999999\r\n\r\n";
    e = bad(&f, huge, strlen(huge), 413);
    drop(&f);

    /* exactly the cap is fine */
    char text[256];
    strcpy(text, "POST / HTTP/1.1\r\nContent-Length: 64\r\n\r\n");
    size_t n = strlen(text);
    memset(text + n, 'b', 64);
    text[n + 64] = '\0';
    f = make_default();
    weir_http1_request r = one(&f, text);
    assert_int_equal(r.body.n, 64);
    assert_int_equal(r.body.p[63], 'b');
    drop(&f);
}

static void chunked_body_too_large(void **unused)
{
    (void)unused;
    char text[512];
    const char *sixty_four = "0123456789012345678901234567890123456789012345678901234567890123";
    /* 64 bytes in two chunks is the cap */
    snprintf(text, sizeof(text),
             "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n20\r\n%.32s\r\n20\r\n%.32s"
             "\r\n0\r\n\r\n",
             sixty_four, sixty_four + 32);
    fixture f = make_default();
    weir_http1_request r = one(&f, text);
    str_is(r.body, sixty_four);
    drop(&f);

    /* a chunk that would pass the cap is refused on its size line */
    snprintf(text, sizeof(text),
             "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n%s\r\n1\r\n", sixty_four);
    f = make_default();
    weir_http1_error e = bad(&f, text, strlen(text), 413);
    assert_string_equal(e.message, "request body too large");
    drop(&f);

    /* one chunk declaring more than the cap, before any data */
    f = make_default();
    const char *big = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFF\r\n";
    bad(&f, big, strlen(big), 413);
    drop(&f);
}

static void too_many_headers(void **unused)
{
    (void)unused;
    char text[2048];
    size_t n = (size_t)sprintf(text, "GET / HTTP/1.1\r\n");
    for (unsigned i = 0; i < WEIR_HTTP1_MAX_HEADERS; i++)
        n += (size_t)sprintf(text + n, "h%u: %u\r\n", i, i);
    strcpy(text + n, "\r\n");
    fixture f = make_default();
    weir_http1_request r = one(&f, text);
    assert_int_equal(r.n_headers, WEIR_HTTP1_MAX_HEADERS);
    str_is(r.headers[63].name, "h63");
    str_is(r.headers[63].value, "63");
    drop(&f);

    strcpy(text + n, "one-more: x\r\n\r\n");
    f = make_default();
    weir_http1_error e = bad(&f, text, strlen(text), 431);
    assert_string_equal(e.message, "too many header fields");
    drop(&f);
}

/* Checks made on pieces of a field give the answer the whole field would:
 * the inputs the fuzzer found splits to disagree on, and their kin. */
static void caps_do_not_depend_on_splits(void **unused)
{
    (void)unused;
    char text[2048];
    outcome *o = malloc(sizeof(*o));
    assert_non_null(o);

    /* a fragment in a target that is also too long */
    strcpy(text, "GET /a#");
    memset(text + 7, 'a', 100);
    strcpy(text + 107, " HTTP/1.1\r\n\r\n");
    split_invariant(text, 64, BODY_CAP, o);
    assert_int_equal(o->status, 400);
    assert_string_equal(o->message, "fragment in request target");

    /* a 65th header whose name turns out malformed: 400, however split */
    size_t n = (size_t)sprintf(text, "GET / HTTP/1.1\r\n");
    for (unsigned i = 0; i < WEIR_HTTP1_MAX_HEADERS; i++)
        n += (size_t)sprintf(text + n, "h%u: %u\r\n", i, i);
    strcpy(text + n, "bad\x01name: x\r\n\r\n");
    split_invariant(text, HDR_CAP, BODY_CAP, o);
    assert_int_equal(o->status, 400);
    assert_string_equal(o->message, "malformed request: invalid character in header");

    /* and a well-formed 65th: 431 once the section ends */
    strcpy(text + n, "h64: 64\r\n\r\n");
    split_invariant(text, HDR_CAP, BODY_CAP, o);
    assert_int_equal(o->status, 431);
    assert_string_equal(o->message, "too many header fields");
    free(o);
}

static void small_buffer_fails_cleanly(void **unused)
{
    (void)unused;
    /* a 40-byte buffer cannot hold what the caps allow: errors, no overflow */
    fixture f = make(1024, 1024, 40);
    weir_http1_request r = one(&f, "GET /abc HTTP/1.1\r\nA: b\r\n\r\n");
    str_is(r.target, "/abc");
    str_is(weir_http1_header_get(&r, "a"), "b");
    static const struct {
        const char *text;
        int status;
    } cases[] = {
        {"GET /abc HTTP/1.1\r\nLong-Header-Name: 0123456789abcdef0123\r\n\r\n", 431},
        {"GET /0123456789012345678901234567890123456789 HTTP/1.1\r\n\r\n", 414},
        {"POST / HTTP/1.1\r\nContent-Length: 30\r\n\r\n", 413},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n", 413},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        weir_http1_reset(f.p);
        bad(&f, cases[i].text, strlen(cases[i].text), cases[i].status);
    }
    drop(&f);
}

/* ---------------------------------------------------------------- malformed */

static void malformed_inputs(void **unused)
{
    (void)unused;
    bad_is("\x01\x02garbage\r\n\r\n", 400, "malformed request: invalid HTTP method");
    bad_is("GET / HTTP/1.1\r\nBad Header\r\n\r\n", 400,
           "malformed request: invalid character in header");
    bad_is("GET / HTTP/1.x\r\n\r\n", 400, "malformed request: invalid HTTP version");
    bad_is("GET / HTTP/1.1\r\nX: a\r\n folded\r\n\r\n", 400, "obsolete line folding in header");
    bad_is("POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", 400,
           "malformed request: invalid character in content-length header");
    bad_is("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", 400,
           "duplicate Content-Length");
    bad_is("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400,
           "malformed request: invalid character in chunk size header");
}

static void version_not_supported(void **unused)
{
    (void)unused;
    bad_is("GET / HTTP/2.0\r\n\r\n", 505, "HTTP version not supported");
    bad_is("GET / HTTP/1.2\r\nHost: x\r\n\r\n", 505, "HTTP version not supported");
    bad_is("GET / HTTP/0.9\r\n\r\n", 505, "HTTP version not supported");
    bad_is("GET /\r\n\r\n", 505, "HTTP version not supported"); /* HTTP/0.9 form */
}

static void smuggling_and_codings(void **unused)
{
    (void)unused;
    bad_is("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
           "both Content-Length and Transfer-Encoding");
    bad_is("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 400,
           "both Content-Length and Transfer-Encoding");
    bad_is("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\nContent-Length: 3\r\n\r\n", 400,
           "both Content-Length and Transfer-Encoding");
    bad_is("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501,
           "transfer coding not supported (only chunked)");
    bad_is("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501,
           "transfer coding not supported (only chunked)");
    bad_is("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
           501, "transfer coding not supported (only chunked)");
}

/* A chunked body's framing, which http-parser does not check: CRLF after
 * each chunk's data and every line, the trailer section within the header
 * section's cap (HDR_CAP here). */
static void chunked_framing_is_strict(void **unused)
{
    (void)unused;
    const char *head = "POST /v1/check HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
    char text[40000];
    snprintf(text, sizeof(text), "%s2\r\n{}XX3\r\nabc\r\n0\r\n\r\n", head);
    bad_is(text, 400, "chunk data not followed by CRLF");
    snprintf(text, sizeof(text), "%s2\r\n{}\n3\r\nabc\r\n0\r\n\r\n", head);
    bad_is(text, 400, "chunk data not followed by CRLF");
    snprintf(text, sizeof(text), "%s2\n{}\r\n0\r\n\r\n", head); /* http-parser's own */
    bad_is(text, 400, "malformed request: invalid character in chunk size header");
    snprintf(text, sizeof(text), "%s2\r\n{}\r\n0\r\nX-T: 1\n\r\n", head);
    bad_is(text, 400, "a chunk line or trailer ends in LF without CR");
    snprintf(text, sizeof(text), "%s2\r\n{}\r\n0\r\n\n", head);
    bad_is(text, 400, "a chunk line or trailer ends in LF without CR");
    /* trailers: up to the cap, not past it */
    char pad[20001];
    memset(pad, 'a', sizeof(pad) - 1);
    pad[sizeof(pad) - 1] = '\0';
    snprintf(text, sizeof(text), "%s2\r\n{}\r\n0\r\nX-Pad: %.*s\r\n\r\n", head, HDR_CAP, pad);
    bad_is(text, 431, "trailer section too large");
    fixture f = make_default();
    snprintf(text, sizeof(text), "%s2\r\n{}\r\n0\r\nX-Pad: %.*s\r\nY: 2\r\n\r\n", head, HDR_CAP / 2,
             pad);
    weir_http1_request r = one(&f, text);
    assert_int_equal(r.body.n, 2);
    drop(&f);
    /* whitespace before an extension is allowed (RFC 9112's BWS) */
    f = make_default();
    snprintf(text, sizeof(text), "%s2 ;a=b\r\n{}\r\n0\r\n\r\n", head);
    r = one(&f, text);
    assert_int_equal(r.body.n, 2);
    drop(&f);
}

/* ---------------------------------------------------------------- state */

static void in_request_transitions(void **unused)
{
    (void)unused;
    fixture f = make_default();
    weir_http1_request r;
    weir_http1_error e;
    size_t used;
    assert_false(weir_http1_in_request(f.p));
    /* blank lines between requests are idle */
    assert_int_equal(weir_http1_feed(f.p, "\r\n", 2, &used, &r, &e), WEIR_HTTP1_NEED_MORE);
    assert_int_equal(used, 2);
    assert_false(weir_http1_in_request(f.p));
    /* the first byte of a method starts a request */
    assert_int_equal(weir_http1_feed(f.p, "G", 1, &used, &r, &e), WEIR_HTTP1_NEED_MORE);
    assert_int_equal(used, 1);
    assert_true(weir_http1_in_request(f.p));
    assert_int_equal(weir_http1_feed(f.p, "ET / HTTP/1.1\r\n\r", 16, &used, &r, &e),
                     WEIR_HTTP1_NEED_MORE);
    assert_int_equal(used, 16);
    assert_true(weir_http1_in_request(f.p));
    assert_int_equal(weir_http1_feed(f.p, "\n", 1, &used, &r, &e), WEIR_HTTP1_REQUEST);
    assert_int_equal(used, 1);
    assert_false(weir_http1_in_request(f.p));
    /* a request and the start of the next in one read */
    const char *two = "GET /x HTTP/1.1\r\n\r\nPO";
    assert_int_equal(weir_http1_feed(f.p, two, strlen(two), &used, &r, &e), WEIR_HTTP1_REQUEST);
    assert_int_equal(used, strlen(two) - 2);
    str_is(r.path, "/x");
    assert_false(weir_http1_in_request(f.p));
    assert_int_equal(weir_http1_feed(f.p, two + used, 2, &used, &r, &e), WEIR_HTTP1_NEED_MORE);
    assert_int_equal(used, 2);
    assert_true(weir_http1_in_request(f.p));
    /* reset forgets the partial request */
    weir_http1_reset(f.p);
    assert_false(weir_http1_in_request(f.p));
    r = one(&f, "GET /y HTTP/1.1\r\n\r\n");
    str_is(r.path, "/y");
    /* a body in progress is mid-request */
    const char *part = "POST / HTTP/1.1\r\nContent-Length: 4\r\n\r\nab";
    assert_int_equal(weir_http1_feed(f.p, part, strlen(part), &used, &r, &e), WEIR_HTTP1_NEED_MORE);
    assert_true(weir_http1_in_request(f.p));
    assert_int_equal(weir_http1_feed(f.p, "cd", 2, &used, &r, &e), WEIR_HTTP1_REQUEST);
    str_is(r.body, "abcd");
    assert_false(weir_http1_in_request(f.p));
    drop(&f);
}

static void errors_are_sticky_until_reset(void **unused)
{
    (void)unused;
    fixture f = make_default();
    weir_http1_request r;
    weir_http1_error e = {0, NULL};
    size_t used = 99;
    const char *good = "GET / HTTP/1.1\r\n\r\n";
    bad(&f, "BOGUS / HTTP/1.1\r\n\r\n", 20, 400);
    /* still failed: nothing consumed, the same error */
    assert_int_equal(weir_http1_feed(f.p, good, strlen(good), &used, &r, &e), WEIR_HTTP1_ERROR);
    assert_int_equal(used, 0);
    assert_int_equal(e.status, 400);
    assert_string_equal(e.message, "malformed request: invalid HTTP method");
    assert_int_equal(weir_http1_feed(f.p, good, 0, &used, &r, &e), WEIR_HTTP1_ERROR);
    assert_int_equal(e.status, 400);
    weir_http1_reset(f.p);
    r = one(&f, good);
    str_is(r.path, "/");
    /* a cap error is sticky too */
    const char *head = "POST / HTTP/1.1\r\nContent-Length: 999\r\n\r\n";
    bad(&f, head, strlen(head), 413);
    assert_int_equal(weir_http1_feed(f.p, good, strlen(good), &used, &r, &e), WEIR_HTTP1_ERROR);
    assert_int_equal(e.status, 413);
    weir_http1_reset(f.p);
    r = one(&f, good);
    assert_int_equal(r.method, WEIR_HTTP1_GET);
    drop(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(simple_get_with_query),
        cmocka_unit_test(post_with_content_length),
        cmocka_unit_test(expect_continue),
        cmocka_unit_test(chunked_body_with_extensions_and_trailers),
        cmocka_unit_test(chunked_body_empty_and_uppercase_hex),
        cmocka_unit_test(any_split_gives_the_same_result),
        cmocka_unit_test(pipelined_two),
        cmocka_unit_test(pipelined_three),
        cmocka_unit_test(keep_alive_rules),
        cmocka_unit_test(other_methods),
        cmocka_unit_test(connect_and_upgrade_are_ordinary),
        cmocka_unit_test(target_split),
        cmocka_unit_test(header_get_and_trimming),
        cmocka_unit_test(header_cap_at_its_edge),
        cmocka_unit_test(url_cap),
        cmocka_unit_test(declared_body_too_large),
        cmocka_unit_test(chunked_body_too_large),
        cmocka_unit_test(too_many_headers),
        cmocka_unit_test(caps_do_not_depend_on_splits),
        cmocka_unit_test(small_buffer_fails_cleanly),
        cmocka_unit_test(malformed_inputs),
        cmocka_unit_test(version_not_supported),
        cmocka_unit_test(smuggling_and_codings),
        cmocka_unit_test(chunked_framing_is_strict),
        cmocka_unit_test(in_request_transitions),
        cmocka_unit_test(errors_are_sticky_until_reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
