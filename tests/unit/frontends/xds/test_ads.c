/*
 * test_ads.c - the xDS stream's client codec (frontends/xds/ads.c)
 * against a real HTTP/2 server: an nghttp2 server session in the test,
 * bytes pumped both ways in memory. Covered: the request headers, request
 * messages queued before and after the stream started (the deferred body
 * resumes), response messages split and joined across DATA frames, the
 * end of the stream in every way it can come (OK and error trailers, a
 * response that is not gRPC, a message past the cap, bytes that are not
 * HTTP/2), each reported once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <nghttp2/nghttp2.h>

#include "grpc/nv.h"
#include "grpc/rls.h"
#include "xds/ads.h"

/* ------------------------------------------------------------ the server */

typedef struct server {
    nghttp2_session *s;
    int32_t stream;
    char headers[1024]; /* "name: value\n" of the request */
    weir_buf body;      /* the request body */
    weir_buf out;       /* response DATA not yet taken */
    bool out_end;       /* end the DATA (no END_STREAM: trailers follow) */
} server;

typedef struct client {
    weir_xds_ads *a;
    char messages[8][64];
    size_t n_messages;
    int ends;
    int status;
    char reason[256];
} client;

static int srv_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                      size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                      void *user_data)
{
    (void)session;
    (void)flags;
    server *sv = user_data;
    sv->stream = frame->hd.stream_id;
    size_t n = strlen(sv->headers);
    snprintf(sv->headers + n, sizeof(sv->headers) - n, "%.*s: %.*s\n", (int)namelen, name,
             (int)valuelen, value);
    return 0;
}

static int srv_data(nghttp2_session *session, uint8_t flags, int32_t stream_id, const uint8_t *data,
                    size_t len, void *user_data)
{
    (void)session;
    (void)flags;
    (void)stream_id;
    weir_buf_put(&((server *)user_data)->body, data, len);
    return 0;
}

static ssize_t srv_read(nghttp2_session *session, int32_t stream_id, uint8_t *buf, size_t length,
                        uint32_t *data_flags, nghttp2_data_source *source, void *user_data)
{
    (void)session;
    (void)stream_id;
    (void)source;
    server *sv = user_data;
    /* at most 7 bytes a frame: messages straddle DATA frames */
    size_t n = sv->out.len < length ? sv->out.len : length;
    n = n < 7 ? n : 7;
    memcpy(buf, sv->out.p, n);
    memmove(sv->out.p, sv->out.p + n, sv->out.len - n);
    sv->out.len -= n;
    if (!sv->out.len)
        *data_flags |= NGHTTP2_DATA_FLAG_EOF | (sv->out_end ? 0 : NGHTTP2_DATA_FLAG_NO_END_STREAM);
    return (ssize_t)n;
}

static void server_init(server *sv)
{
    memset(sv, 0, sizeof(*sv));
    weir_buf_init(&sv->body, SIZE_MAX);
    weir_buf_init(&sv->out, SIZE_MAX);
    nghttp2_session_callbacks *cb;
    assert_int_equal(nghttp2_session_callbacks_new(&cb), 0);
    nghttp2_session_callbacks_set_on_header_callback(cb, srv_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, srv_data);
    assert_int_equal(nghttp2_session_server_new(&sv->s, cb, sv), 0);
    nghttp2_session_callbacks_del(cb);
    assert_int_equal(nghttp2_submit_settings(sv->s, NGHTTP2_FLAG_NONE, NULL, 0), 0);
}

static void server_free(server *sv)
{
    nghttp2_session_del(sv->s);
    weir_buf_free(&sv->body);
    weir_buf_free(&sv->out);
}

/* Response messages (framed) as DATA; the first call sends the headers. */
static void server_send(server *sv, bool first, const char *const *msgs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        weir_grpc_frame_prefix(&sv->out, strlen(msgs[i]));
        weir_buf_puts(&sv->out, msgs[i]);
    }
    nghttp2_data_provider prd = {{.ptr = sv}, srv_read};
    if (first) {
        nghttp2_nv h[] = {weir_h2_nv(":status", "200"),
                          weir_h2_nv("content-type", "application/grpc")};
        assert_int_equal(nghttp2_submit_response(sv->s, sv->stream, h, 2, &prd), 0);
    } else {
        assert_int_equal(nghttp2_submit_data(sv->s, NGHTTP2_FLAG_NONE, sv->stream, &prd), 0);
    }
}

/* ------------------------------------------------------------ the client */

static void on_message(void *arg, const uint8_t *msg, size_t len)
{
    client *c = arg;
    assert_true(c->n_messages < 8 && len < 64);
    memcpy(c->messages[c->n_messages], msg, len);
    c->messages[c->n_messages++][len] = '\0';
}

static void on_end(void *arg, int status, const char *message)
{
    client *c = arg;
    c->ends++;
    c->status = status;
    snprintf(c->reason, sizeof(c->reason), "%s", message);
}

static void client_init(client *c, size_t max_message)
{
    static const char *const names[] = {"x-team"}, *const values[] = {"edge"};
    memset(c, 0, sizeof(*c));
    weir_xds_ads_options o = {"xds.example:18000", "/pkg.Svc/Stream", "weir/test", names, values, 1,
                              max_message};
    weir_xds_ads_callbacks cb = {on_message, on_end};
    c->a = weir_xds_ads_new(&o, &cb, c);
    assert_non_null(c->a);
}

static void queue_text(client *c, const char *text)
{
    weir_buf b;
    weir_buf_init(&b, SIZE_MAX);
    weir_grpc_frame_prefix(&b, strlen(text));
    weir_buf_puts(&b, text);
    assert_true(weir_xds_ads_queue(c->a, b.p, b.len));
    weir_buf_free(&b);
}

/* Bytes both ways until neither side has any. */
static void pump(client *c, server *sv)
{
    for (int round = 0; round < 100; round++) {
        weir_buf b;
        weir_buf_init(&b, SIZE_MAX);
        weir_xds_ads_send(c->a, &b);
        size_t moved = b.len;
        if (b.len)
            assert_int_equal(nghttp2_session_mem_recv(sv->s, (uint8_t *)b.p, b.len),
                             (ssize_t)b.len);
        weir_buf_free(&b);
        const uint8_t *p;
        ssize_t n;
        while ((n = nghttp2_session_mem_send(sv->s, &p)) > 0) {
            moved += (size_t)n;
            weir_xds_ads_recv(c->a, p, (size_t)n);
        }
        if (!moved)
            return;
    }
    fail_msg("the two sides never settle");
}

/* A server and a client with the stream open (the request sent). */
static void start(server *sv, client *c, size_t max_message)
{
    server_init(sv);
    client_init(c, max_message);
    pump(c, sv);
}

static void finish(server *sv, client *c)
{
    weir_xds_ads_free(c->a);
    server_free(sv);
}

/* ------------------------------------------------------------ tests */

static void stream(void **unused)
{
    (void)unused;
    server sv;
    client c;
    server_init(&sv);
    client_init(&c, 1024);
    queue_text(&c, "subscribe");
    pump(&c, &sv);
    assert_non_null(strstr(sv.headers, ":method: POST\n"));
    assert_non_null(strstr(sv.headers, ":scheme: http\n"));
    assert_non_null(strstr(sv.headers, ":path: /pkg.Svc/Stream\n"));
    assert_non_null(strstr(sv.headers, ":authority: xds.example:18000\n"));
    assert_non_null(strstr(sv.headers, "content-type: application/grpc\n"));
    assert_non_null(strstr(sv.headers, "te: trailers\n"));
    assert_non_null(strstr(sv.headers, "x-team: edge\n"));
    assert_non_null(strstr(sv.headers, "user-agent: weir/test\n"));
    assert_int_equal(sv.body.len, 5 + 9);
    assert_memory_equal(sv.body.p + 5, "subscribe", 9);

    /* two messages cut into 7-byte DATA frames, then one more later */
    static const char *const two[] = {"first response", "second"};
    server_send(&sv, true, two, 2);
    pump(&c, &sv);
    assert_int_equal(c.n_messages, 2);
    assert_string_equal(c.messages[0], "first response");
    assert_string_equal(c.messages[1], "second");
    static const char *const third[] = {"third"};
    server_send(&sv, false, third, 1);
    pump(&c, &sv);
    assert_int_equal(c.n_messages, 3);

    /* a message queued after the body went idle still goes out */
    queue_text(&c, "ack");
    pump(&c, &sv);
    assert_int_equal(sv.body.len, 14 + 5 + 3);
    assert_memory_equal(sv.body.p + 19, "ack", 3);
    assert_int_equal(c.ends, 0);

    nghttp2_nv tr[] = {weir_h2_nv("grpc-status", "14"), weir_h2_nv("grpc-message", "going away")};
    assert_int_equal(nghttp2_submit_trailer(sv.s, sv.stream, tr, 2), 0);
    pump(&c, &sv);
    assert_int_equal(c.ends, 1);
    assert_int_equal(c.status, 14);
    assert_string_equal(c.reason, "going away");
    assert_true(weir_xds_ads_ended(c.a));
    assert_false(weir_xds_ads_queue(c.a, "x", 1));
    finish(&sv, &c);
}

static void not_grpc(void **unused)
{
    (void)unused;
    server sv;
    client c;
    start(&sv, &c, 1024);
    nghttp2_nv h[] = {weir_h2_nv(":status", "404"), weir_h2_nv("content-type", "text/html")};
    assert_int_equal(nghttp2_submit_response(sv.s, sv.stream, h, 2, NULL), 0);
    pump(&c, &sv);
    assert_int_equal(c.ends, 1);
    assert_int_equal(c.status, WEIR_GRPC_UNKNOWN);
    assert_non_null(strstr(c.reason, "not a gRPC response (HTTP status 404"));
    finish(&sv, &c);
}

static void over_the_cap(void **unused)
{
    (void)unused;
    server sv;
    client c;
    start(&sv, &c, 8);
    static const char *const ok[] = {"eight ch", "nine char"};
    server_send(&sv, true, ok, 2);
    pump(&c, &sv);
    assert_int_equal(c.n_messages, 1); /* 8 bytes pass, 9 do not */
    assert_int_equal(c.ends, 1);
    assert_int_equal(c.status, WEIR_GRPC_RESOURCE_EXHAUSTED);
    finish(&sv, &c);
}

static void ended_ok_and_garbage(void **unused)
{
    (void)unused;
    server sv;
    client c;
    start(&sv, &c, 1024);
    nghttp2_nv h[] = {weir_h2_nv(":status", "200"),
                      weir_h2_nv("content-type", "application/grpc+proto"),
                      weir_h2_nv("grpc-status", "0")};
    assert_int_equal(nghttp2_submit_response(sv.s, sv.stream, h, 3, NULL), 0); /* trailers-only */
    pump(&c, &sv);
    assert_int_equal(c.ends, 1);
    assert_int_equal(c.status, 0);
    finish(&sv, &c);

    client_init(&c, 1024);
    static const uint8_t junk[] = "HTTP/1.1 400 Bad Request\r\n\r\n";
    weir_xds_ads_recv(c.a, junk, sizeof(junk) - 1);
    weir_buf b;
    weir_buf_init(&b, SIZE_MAX);
    assert_false(weir_xds_ads_send(c.a, &b)); /* the GOAWAY, then nothing more */
    weir_buf_free(&b);
    assert_int_equal(c.ends, 1);
    assert_int_equal(c.status, WEIR_GRPC_UNAVAILABLE);
    weir_xds_ads_recv(c.a, junk, sizeof(junk) - 1);
    assert_int_equal(c.ends, 1); /* once */
    weir_xds_ads_free(c.a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stream),
        cmocka_unit_test(not_grpc),
        cmocka_unit_test(over_the_cap),
        cmocka_unit_test(ended_ok_and_garbage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
