/*
 * ads.c - one gRPC bidirectional stream over an nghttp2 client session
 * that does no I/O: the request body is an open-ended queue of framed
 * messages (the data source defers while it is empty), the response body
 * is cut into messages under the cap, and whatever ends the stream is
 * reported once as a gRPC status.
 */
#include "xds/ads.h"

#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc/nv.h"
#include "grpc/rls.h"

/* The stream's and the connection's receive windows: a large rule set
 * arrives without a round trip per 64 KiB. */
#define STREAM_WINDOW (1u << 20)
#define CONN_WINDOW (16u << 20)
#define MAX_HEADERS 16u
/* SETTINGS_MAX_FRAME_SIZE: weir leaves it at HTTP/2's default. */
#define MAX_FRAME 16384u

struct weir_xds_ads {
    nghttp2_session *s;
    weir_xds_ads_callbacks cb;
    void *arg;
    size_t max_message;
    int32_t stream_id;
    weir_buf out; /* request bytes not yet taken by nghttp2 */
    size_t out_off;
    bool deferred; /* the data source said DEFERRED: resume when bytes come */
    weir_buf in;   /* response bytes not yet a whole message */
    int http_status;
    bool grpc_ct;    /* content-type application/grpc */
    int grpc_status; /* -1 until the trailers say */
    char message[256];
    bool ended;
};

static void end(weir_xds_ads *a, int status, const char *message)
{
    if (a->ended)
        return;
    a->ended = true;
    a->cb.on_end(a->arg, status, message);
}

/* ------------------------------------------------------------ request body */

static ssize_t read_out(nghttp2_session *session, int32_t stream_id, uint8_t *buf, size_t length,
                        uint32_t *data_flags, nghttp2_data_source *source, void *user_data)
{
    (void)session;
    (void)stream_id;
    (void)data_flags;
    (void)source;
    weir_xds_ads *a = user_data;
    size_t left = a->out.len - a->out_off;
    if (!left) {
        a->deferred = true;
        return NGHTTP2_ERR_DEFERRED;
    }
    size_t n = left < length ? left : length;
    memcpy(buf, a->out.p + a->out_off, n);
    a->out_off += n;
    if (a->out_off == a->out.len) {
        weir_buf_clear(&a->out);
        a->out_off = 0;
    }
    return (ssize_t)n;
}

bool weir_xds_ads_queue(weir_xds_ads *a, const void *framed, size_t len)
{
    if (a->ended)
        return false;
    weir_buf_put(&a->out, framed, len);
    if (!weir_buf_ok(&a->out))
        return false;
    if (a->deferred) {
        a->deferred = false;
        nghttp2_session_resume_data(a->s, a->stream_id);
    }
    return true;
}

/* ------------------------------------------------------------ response */

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user_data)
{
    (void)session;
    (void)flags;
    weir_xds_ads *a = user_data;
    if (frame->hd.stream_id != a->stream_id)
        return 0;
    if (weir_h2_is(name, namelen, ":status")) {
        a->http_status = 0;
        for (size_t i = 0; i < valuelen && i < 3; i++)
            a->http_status = a->http_status * 10 + (value[i] - '0');
    } else if (weir_h2_is(name, namelen, "content-type")) {
        a->grpc_ct = valuelen >= 16 && memcmp(value, "application/grpc", 16) == 0;
    } else if (weir_h2_is(name, namelen, "grpc-status")) {
        int st = 0;
        for (size_t i = 0; i < valuelen && i < 4; i++)
            st = value[i] >= '0' && value[i] <= '9' ? st * 10 + (value[i] - '0') : st;
        a->grpc_status = st;
    } else if (weir_h2_is(name, namelen, "grpc-message")) {
        size_t n = valuelen < sizeof(a->message) - 1 ? valuelen : sizeof(a->message) - 1;
        memcpy(a->message, value, n); /* percent-encoded: shown as sent */
        a->message[n] = '\0';
    }
    return 0;
}

/* Hands out every whole message of the buffered body; false after a
 * framing error (the stream is reset and ended). */
static bool take_messages(weir_xds_ads *a)
{
    size_t off = 0;
    for (;;) {
        const uint8_t *msg;
        size_t msg_len, used;
        weir_grpc_error err;
        weir_grpc_frame_result r =
            weir_grpc_frame_parse((const uint8_t *)a->in.p + off, a->in.len - off, a->max_message,
                                  &msg, &msg_len, &used, &err);
        if (r == WEIR_GRPC_FRAME_NEED_MORE)
            break;
        if (r == WEIR_GRPC_FRAME_ERROR) {
            nghttp2_submit_rst_stream(a->s, NGHTTP2_FLAG_NONE, a->stream_id, NGHTTP2_CANCEL);
            end(a, err.code, err.message);
            return false;
        }
        a->cb.on_message(a->arg, msg, msg_len);
        off += used;
        if (a->ended)
            return false;
    }
    if (off) {
        memmove(a->in.p, a->in.p + off, a->in.len - off);
        a->in.len -= off;
    }
    return true;
}

static int on_data(nghttp2_session *session, uint8_t flags, int32_t stream_id, const uint8_t *data,
                   size_t len, void *user_data)
{
    (void)session;
    (void)flags;
    weir_xds_ads *a = user_data;
    if (stream_id != a->stream_id || a->ended)
        return 0;
    weir_buf_put(&a->in, data, len);
    if (!weir_buf_ok(&a->in)) { /* past max_message + prefix, or no memory */
        nghttp2_submit_rst_stream(a->s, NGHTTP2_FLAG_NONE, a->stream_id, NGHTTP2_CANCEL);
        end(a, WEIR_GRPC_RESOURCE_EXHAUSTED, "response message too large");
        return 0;
    }
    take_messages(a);
    return 0;
}

/* The response's first HEADERS: anything but a 200 with a gRPC
 * content-type is not a gRPC server answering (a proxy's error page, an
 * HTTP server on that port). END_STREAM from the server ends the call,
 * whatever the client's half is doing: the client's half is reset. */
static int on_frame(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
    (void)session;
    weir_xds_ads *a = user_data;
    if (frame->hd.stream_id != a->stream_id || a->ended)
        return 0;
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_RESPONSE &&
        a->grpc_status < 0 && (a->http_status != 200 || !a->grpc_ct)) {
        char why[96];
        snprintf(why, sizeof(why), "not a gRPC response (HTTP status %d%s)", a->http_status,
                 a->grpc_ct ? "" : ", no application/grpc content-type");
        nghttp2_submit_rst_stream(a->s, NGHTTP2_FLAG_NONE, a->stream_id, NGHTTP2_CANCEL);
        end(a, WEIR_GRPC_UNKNOWN, why);
        return 0;
    }
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        nghttp2_submit_rst_stream(a->s, NGHTTP2_FLAG_NONE, a->stream_id, NGHTTP2_NO_ERROR);
        if (a->grpc_status >= 0)
            end(a, a->grpc_status, a->message[0] ? a->message : "stream ended by the server");
        else
            end(a, WEIR_GRPC_UNKNOWN, "stream ended without a gRPC status");
    }
    return 0;
}

static int on_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
                    void *user_data)
{
    (void)session;
    weir_xds_ads *a = user_data;
    if (stream_id != a->stream_id)
        return 0;
    if (a->grpc_status >= 0) {
        end(a, a->grpc_status, a->message[0] ? a->message : "stream ended by the server");
    } else {
        char why[64];
        snprintf(why, sizeof(why), "stream reset (HTTP/2 error %u)", error_code);
        end(a, WEIR_GRPC_UNAVAILABLE, why);
    }
    return 0;
}

/* ------------------------------------------------------------ life */

weir_xds_ads *weir_xds_ads_new(const weir_xds_ads_options *o, const weir_xds_ads_callbacks *cb,
                               void *arg)
{
    if (o->n_headers > MAX_HEADERS)
        return NULL;
    weir_xds_ads *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    a->cb = *cb;
    a->arg = arg;
    a->max_message = o->max_message;
    a->grpc_status = -1;
    weir_buf_init(&a->out, SIZE_MAX);
    /* a DATA frame may carry the head of the next message too */
    weir_buf_init(&a->in, o->max_message + WEIR_GRPC_PREFIX_BYTES + MAX_FRAME);
    nghttp2_session_callbacks *cbs;
    if (nghttp2_session_callbacks_new(&cbs) != 0) {
        free(a);
        return NULL;
    }
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_close);
    int rc = nghttp2_session_client_new(&a->s, cbs, a);
    nghttp2_session_callbacks_del(cbs);
    if (rc != 0) {
        free(a);
        return NULL;
    }
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                   {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW}};
    nghttp2_nv hdrs[6 + MAX_HEADERS] = {
        weir_h2_nv(":method", "POST"),
        weir_h2_nv(":scheme", "http"),
        weir_h2_nv(":path", o->path),
        weir_h2_nv(":authority", o->authority),
        weir_h2_nv("content-type", "application/grpc"),
        weir_h2_nv("te", "trailers"),
    };
    size_t nh = 6;
    for (size_t i = 0; i < o->n_headers; i++)
        hdrs[nh++] = weir_h2_nv(o->header_names[i], o->header_values[i]);
    if (o->user_agent)
        hdrs[nh++] = weir_h2_nv("user-agent", o->user_agent);
    nghttp2_data_provider prd = {{.ptr = a}, read_out};
    if (nghttp2_submit_settings(a->s, NGHTTP2_FLAG_NONE, iv, 2) != 0 ||
        nghttp2_session_set_local_window_size(a->s, NGHTTP2_FLAG_NONE, 0, (int32_t)CONN_WINDOW) !=
            0 ||
        (a->stream_id = nghttp2_submit_request(a->s, NULL, hdrs, nh, &prd, a)) < 0) {
        weir_xds_ads_free(a);
        return NULL;
    }
    return a;
}

void weir_xds_ads_free(weir_xds_ads *a)
{
    if (!a)
        return;
    nghttp2_session_del(a->s);
    weir_buf_free(&a->out);
    weir_buf_free(&a->in);
    free(a);
}

/* Whether the session is over: a connection error nghttp2 answered with
 * a GOAWAY of its own (once that is sent it neither reads nor writes). */
static bool over(weir_xds_ads *a)
{
    if (nghttp2_session_want_read(a->s) || nghttp2_session_want_write(a->s))
        return false;
    end(a, WEIR_GRPC_UNAVAILABLE, "HTTP/2: the connection is over (a connection error)");
    return true;
}

bool weir_xds_ads_recv(weir_xds_ads *a, const uint8_t *data, size_t len)
{
    ssize_t rc = nghttp2_session_mem_recv(a->s, data, len);
    if (rc < 0) {
        char why[96];
        snprintf(why, sizeof(why), "HTTP/2: %s", nghttp2_strerror((int)rc));
        end(a, WEIR_GRPC_UNAVAILABLE, why);
        return false;
    }
    return !over(a);
}

bool weir_xds_ads_send(weir_xds_ads *a, weir_buf *out)
{
    for (;;) {
        const uint8_t *p;
        ssize_t n = nghttp2_session_mem_send(a->s, &p);
        if (n < 0) {
            end(a, WEIR_GRPC_UNAVAILABLE, nghttp2_strerror((int)n));
            return false;
        }
        if (n == 0)
            return !over(a) && weir_buf_ok(out);
        weir_buf_put(out, p, (size_t)n);
    }
}

bool weir_xds_ads_ended(const weir_xds_ads *a)
{
    return a->ended;
}
