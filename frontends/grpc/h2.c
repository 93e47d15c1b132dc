/*
 * h2.c - gRPC's unary calls over an nghttp2 server session that does no
 * I/O: request streams are collected (headers checked as they complete,
 * the one message buffered under its cap), handed out whole, and
 * answered with a message and trailers or Trailers-Only.
 */
#include "grpc/h2.h"

#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc/nv.h"
#include "grpc/rls.h"

#define DEFAULT_MAX_STREAMS 1024u
#define DEFAULT_MAX_UNSENT (256u << 10)
#define DEFAULT_MAX_MESSAGE (64u * 1024u)
#define DEFAULT_MAX_HEADER_LIST (16u * 1024u)
#define DEFAULT_INITIAL_WINDOW (1u << 20)
#define MAX_WINDOW 0x7fffffffu
/* The opaque data of the PING that times the final GOAWAY. */
static const uint8_t bye_ping[8] = {'w', 'e', 'i', 'r', '-', 'b', 'y', 'e'};

typedef struct h2_stream h2_stream;

struct h2_stream {
    h2_stream *prev, *next;
    int32_t id;
    int64_t start_ns;    /* its first HEADERS */
    int64_t deadline_ns; /* INT64_MAX: no grpc-timeout */
    size_t header_bytes; /* RFC 9113's measure, request and trailers */
    char *path;
    size_t path_len;
    bool post;
    bool ct_ok;
    bool bad_timeout;
    bool headers_too_big;
    bool headers_done; /* the request's HEADERS (and CONTINUATIONs) are in */
    bool req_done;     /* END_STREAM received */
    bool called;       /* handed to the callback */
    bool answered;     /* a response is submitted */
    bool have_msg;     /* the one message is whole */
    weir_buf body;     /* the request's bytes: prefix and message */
    size_t msg_len;
    /* the response */
    weir_buf out; /* DATA payload */
    size_t out_off;
    size_t held;     /* counted in weir_grpc_h2.held while answered and open */
    bool trailers;   /* trailers follow the DATA */
    char status[12]; /* grpc-status */
    char *gmsg;      /* grpc-message, percent-encoded; NULL = none */
};

struct weir_grpc_h2 {
    nghttp2_session *s;
    weir_grpc_h2_limits lim;
    weir_grpc_h2_call_fn on_call;
    void *arg;
    h2_stream *streams;
    size_t n_streams;
    size_t buffered;  /* request bytes held, all streams */
    size_t held;      /* answers not sent yet, all streams (STREAM_COST each, and bytes) */
    uint64_t closed;  /* streams closed so far */
    uint64_t refused; /* streams refused while answers were held */
    int64_t now_ns;
    bool failed;   /* the connection must end */
    bool shutting; /* the first GOAWAY is queued */
    bool final_goaway;
};

/* ------------------------------------------------------------ helpers */

static int64_t add_sat(int64_t a, int64_t b)
{
    return a > INT64_MAX - b ? INT64_MAX : a + b;
}

bool weir_grpc_timeout_parse(const char *s, size_t n, int64_t *ns)
{
    if (n < 2 || n > 9)
        return false;
    int64_t v = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    int64_t mult;
    switch (s[n - 1]) {
    case 'H':
        mult = 3600 * INT64_C(1000000000);
        break;
    case 'M':
        mult = 60 * INT64_C(1000000000);
        break;
    case 'S':
        mult = INT64_C(1000000000);
        break;
    case 'm':
        mult = 1000000;
        break;
    case 'u':
        mult = 1000;
        break;
    case 'n':
        mult = 1;
        break;
    default:
        return false;
    }
    *ns = v > INT64_MAX / mult ? INT64_MAX : v * mult;
    return true;
}

size_t weir_grpc_percent_encode(const char *s, size_t n, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    if (!cap)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c <= 0x7e && c != '%') {
            if (o + 1 >= cap)
                break;
            out[o++] = (char)c;
        } else {
            if (o + 3 >= cap)
                break;
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o] = '\0';
    return o;
}

/* content-type: application/grpc or application/grpc+proto, then
 * nothing or ";parameters". */
static bool grpc_content_type(const uint8_t *v, size_t n)
{
    static const char base[] = "application/grpc";
    size_t b = sizeof(base) - 1;
    if (n < b || memcmp(v, base, b) != 0)
        return false;
    v += b;
    n -= b;
    if (n >= 6 && memcmp(v, "+proto", 6) == 0) {
        v += 6;
        n -= 6;
    }
    return n == 0 || v[0] == ';';
}

static h2_stream *stream_of(weir_grpc_h2 *h, int32_t id)
{
    return id > 0 ? nghttp2_session_get_stream_user_data(h->s, id) : NULL;
}

static void drop_body(weir_grpc_h2 *h, h2_stream *st)
{
    h->buffered -= st->body.len;
    weir_buf_free(&st->body);
    weir_buf_init(&st->body, 0);
}

/* What an answered stream holds until it closes, beyond its answer's
 * bytes: its state here and nghttp2's (measured: the zero-window probe's
 * 1.07 MB for 1,024 calls). */
#define STREAM_COST 1024u

static void held_add(weir_grpc_h2 *h, h2_stream *st, size_t n)
{
    st->held += n;
    h->held += n;
}

static void held_sub(weir_grpc_h2 *h, h2_stream *st, size_t n)
{
    n = n < st->held ? n : st->held;
    st->held -= n;
    h->held -= n;
}

static void stream_free(weir_grpc_h2 *h, h2_stream *st)
{
    held_sub(h, st, st->held);
    if (st->prev)
        st->prev->next = st->next;
    else
        h->streams = st->next;
    if (st->next)
        st->next->prev = st->prev;
    h->n_streams--;
    drop_body(h, st);
    weir_buf_free(&st->out);
    free(st->path);
    free(st->gmsg);
    free(st);
}

/* ------------------------------------------------------------ answering */

static ssize_t read_out(nghttp2_session *session, int32_t stream_id, uint8_t *buf, size_t length,
                        uint32_t *data_flags, nghttp2_data_source *source, void *user_data)
{
    h2_stream *st = source->ptr;
    size_t left = st->out.len - st->out_off;
    size_t n = left < length ? left : length;
    if (n)
        memcpy(buf, st->out.p + st->out_off, n);
    st->out_off += n;
    held_sub(user_data, st, n);
    if (st->out_off == st->out.len) {
        *data_flags |= NGHTTP2_DATA_FLAG_EOF;
        if (st->trailers) {
            *data_flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
            nghttp2_nv tv[2] = {weir_h2_nv("grpc-status", st->status),
                                weir_h2_nv("grpc-message", "")};
            size_t ntv = 1;
            if (st->gmsg)
                tv[ntv++] = weir_h2_nv("grpc-message", st->gmsg);
            if (nghttp2_submit_trailer(session, stream_id, tv, ntv) != 0)
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        }
    }
    return (ssize_t)n;
}

/* Marks @st answered; the request's bytes go once the answer is built
 * (the caller's message may point into them). */
static bool begin_answer(weir_grpc_h2 *h, h2_stream *st)
{
    if (st->answered)
        return false;
    st->answered = true;
    held_add(h, st, STREAM_COST);
    return true;
}

/* A plain HTTP answer (405, 415): a short text body, no gRPC status. */
static void answer_http(weir_grpc_h2 *h, h2_stream *st, int status, const char *text)
{
    if (!begin_answer(h, st))
        return;
    drop_body(h, st);
    char code[8];
    snprintf(code, sizeof(code), "%d", status);
    weir_buf_init(&st->out, SIZE_MAX);
    weir_buf_puts(&st->out, text);
    weir_buf_putc(&st->out, '\n');
    held_add(h, st, st->out.len);
    nghttp2_nv hv[3] = {weir_h2_nv(":status", code),
                        weir_h2_nv("content-type", "text/plain; charset=utf-8"),
                        weir_h2_nv("allow", "POST")};
    nghttp2_data_provider dp = {.source = {.ptr = st}, .read_callback = read_out};
    if (!weir_buf_ok(&st->out) ||
        nghttp2_submit_response(h->s, st->id, hv, status == 405 ? 3 : 2, &dp) != 0)
        nghttp2_submit_rst_stream(h->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
}

static bool answer(weir_grpc_h2 *h, h2_stream *st, int grpc_status, const char *message,
                   const uint8_t *msg, size_t msg_len)
{
    if (!begin_answer(h, st))
        return false;
    snprintf(st->status, sizeof(st->status), "%d", grpc_status < 0 ? 2 : grpc_status);
    size_t mlen = message ? strlen(message) : 0;
    bool ok = true;
    if (mlen) {
        size_t cap = mlen * 3 + 1;
        st->gmsg = malloc(cap);
        if (st->gmsg)
            weir_grpc_percent_encode(message, mlen, st->gmsg, cap);
        ok = st->gmsg != NULL;
    }
    nghttp2_nv hv[4] = {weir_h2_nv(":status", "200"),
                        weir_h2_nv("content-type", "application/grpc")};
    int rc = -1;
    if (ok && msg && msg_len <= UINT32_MAX) {
        weir_buf_init(&st->out, SIZE_MAX);
        weir_grpc_frame_prefix(&st->out, msg_len);
        weir_buf_put(&st->out, msg, msg_len);
        held_add(h, st, st->out.len);
        st->trailers = true;
        nghttp2_data_provider dp = {.source = {.ptr = st}, .read_callback = read_out};
        if (weir_buf_ok(&st->out))
            rc = nghttp2_submit_response(h->s, st->id, hv, 2, &dp);
    } else if (ok && !msg) {
        size_t n = 2;
        hv[n++] = weir_h2_nv("grpc-status", st->status);
        if (st->gmsg)
            hv[n++] = weir_h2_nv("grpc-message", st->gmsg);
        rc = nghttp2_submit_response(h->s, st->id, hv, n, NULL);
    }
    drop_body(h, st);
    if (rc != 0) {
        nghttp2_submit_rst_stream(h->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
        return false;
    }
    return true;
}

bool weir_grpc_h2_respond(weir_grpc_h2 *h, int32_t stream_id, int grpc_status, const char *message,
                          const uint8_t *msg, size_t msg_len)
{
    h2_stream *st = stream_of(h, stream_id);
    if (!st || !st->called)
        return false;
    return answer(h, st, grpc_status, message, msg, msg_len);
}

/* ------------------------------------------------------------ requests */

/* The request's headers are in: answer now what can be refused now. */
static void headers_complete(weir_grpc_h2 *h, h2_stream *st)
{
    st->headers_done = true;
    if (st->headers_too_big)
        answer(h, st, WEIR_GRPC_RESOURCE_EXHAUSTED, "request headers too large", NULL, 0);
    else if (!st->post)
        answer_http(h, st, 405, "gRPC needs POST");
    else if (!st->ct_ok)
        answer_http(h, st, 415, "content-type must be application/grpc");
    else if (st->bad_timeout)
        answer(h, st, WEIR_GRPC_INTERNAL, "malformed grpc-timeout", NULL, 0);
    else if (h->now_ns >= st->deadline_ns)
        answer(h, st, WEIR_GRPC_DEADLINE_EXCEEDED, "deadline exceeded", NULL, 0);
}

/* END_STREAM: hand the call out, or say what is wrong with it. */
static void request_complete(weir_grpc_h2 *h, h2_stream *st)
{
    st->req_done = true;
    if (st->answered || st->called)
        return;
    if (!st->have_msg) {
        answer(h, st, WEIR_GRPC_INTERNAL,
               st->body.len ? "request message cut short" : "no request message", NULL, 0);
        return;
    }
    if (h->now_ns >= st->deadline_ns) {
        answer(h, st, WEIR_GRPC_DEADLINE_EXCEEDED, "deadline exceeded", NULL, 0);
        return;
    }
    st->called = true;
    weir_grpc_call call = {st->id,
                           st->path ? st->path : "",
                           st->path_len,
                           st->deadline_ns,
                           (const uint8_t *)st->body.p + WEIR_GRPC_PREFIX_BYTES,
                           st->msg_len};
    h->on_call(h->arg, h, &call);
}

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
    weir_grpc_h2 *h = user_data;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    if (h->held > h->lim.max_unsent) {
        /* answers the client does not take (a closed flow-control window)
         * hold enough: a new call is refused, unprocessed, to be retried
         * (RFC 9113 8.7); the stream is ignored from here */
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                  NGHTTP2_REFUSED_STREAM);
        h->refused++;
        return 0;
    }
    h2_stream *st = calloc(1, sizeof(*st));
    if (!st)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets this stream */
    st->id = frame->hd.stream_id;
    st->start_ns = h->now_ns;
    st->deadline_ns = INT64_MAX;
    weir_buf_init(&st->body, 0);
    weir_buf_init(&st->out, 0);
    if (nghttp2_session_set_stream_user_data(session, st->id, st) != 0) {
        free(st);
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    st->next = h->streams;
    if (h->streams)
        h->streams->prev = st;
    h->streams = st;
    h->n_streams++;
    return 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user_data)
{
    (void)session;
    (void)flags;
    weir_grpc_h2 *h = user_data;
    h2_stream *st = stream_of(h, frame->hd.stream_id);
    if (!st || st->answered || st->headers_too_big)
        return 0;
    st->header_bytes += namelen + valuelen + 32;
    if (st->header_bytes > h->lim.max_header_list) {
        st->headers_too_big = true;
        if (st->headers_done) /* trailers */
            answer(h, st, WEIR_GRPC_RESOURCE_EXHAUSTED, "request trailers too large", NULL, 0);
        return 0;
    }
    if (frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0; /* trailers: nothing in them matters */
    if (weir_h2_is(name, namelen, ":method")) {
        st->post = weir_h2_is(value, valuelen, "POST");
    } else if (weir_h2_is(name, namelen, ":path")) {
        char *p = malloc(valuelen + 1);
        if (!p)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        memcpy(p, value, valuelen);
        p[valuelen] = '\0';
        free(st->path);
        st->path = p;
        st->path_len = valuelen;
    } else if (weir_h2_is(name, namelen, "content-type")) {
        st->ct_ok = grpc_content_type(value, valuelen);
    } else if (weir_h2_is(name, namelen, "grpc-timeout")) {
        int64_t ns;
        if (weir_grpc_timeout_parse((const char *)value, valuelen, &ns))
            st->deadline_ns = add_sat(st->start_ns, ns);
        else
            st->bad_timeout = true;
    }
    return 0;
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t stream_id,
                         const uint8_t *data, size_t len, void *user_data)
{
    (void)session;
    (void)flags;
    weir_grpc_h2 *h = user_data;
    h2_stream *st = stream_of(h, stream_id);
    if (!st || st->answered || st->called || !len)
        return 0;
    if (st->have_msg) {
        answer(h, st, WEIR_GRPC_INTERNAL, "more than one request message in a unary call", NULL, 0);
        return 0;
    }
    size_t cap = h->lim.max_message + WEIR_GRPC_PREFIX_BYTES;
    size_t take = cap - st->body.len < len ? cap - st->body.len : len;
    if (h->buffered + take > h->lim.max_buffered) {
        answer(h, st, WEIR_GRPC_RESOURCE_EXHAUSTED, "too many request bytes in flight", NULL, 0);
        return 0;
    }
    if (st->body.max == 0)
        weir_buf_init(&st->body, cap);
    size_t before = st->body.len;
    weir_buf_put(&st->body, data, take);
    if (!weir_buf_ok(&st->body)) {
        st->body.len = before;
        answer(h, st, WEIR_GRPC_RESOURCE_EXHAUSTED, "out of memory", NULL, 0);
        return 0;
    }
    h->buffered += take;
    const uint8_t *msg;
    size_t msg_len, used;
    weir_grpc_error err;
    weir_grpc_frame_result r = weir_grpc_frame_parse(
        (const uint8_t *)st->body.p, st->body.len, h->lim.max_message, &msg, &msg_len, &used, &err);
    if (r == WEIR_GRPC_FRAME_ERROR) {
        answer(h, st, err.code, err.message, NULL, 0);
    } else if (r == WEIR_GRPC_FRAME_MESSAGE) {
        if (used < st->body.len || take < len) {
            answer(h, st, WEIR_GRPC_INTERNAL, "more than one request message in a unary call", NULL,
                   0);
            return 0;
        }
        st->have_msg = true;
        st->msg_len = msg_len;
    }
    return 0;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
    weir_grpc_h2 *h = user_data;
    h2_stream *st = stream_of(h, frame->hd.stream_id);
    switch (frame->hd.type) {
    case NGHTTP2_HEADERS:
        if (!st)
            return 0;
        if (frame->headers.cat == NGHTTP2_HCAT_REQUEST)
            headers_complete(h, st);
        if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
            request_complete(h, st);
        return 0;
    case NGHTTP2_DATA:
        if (st && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
            request_complete(h, st);
        return 0;
    case NGHTTP2_PING:
        if ((frame->hd.flags & NGHTTP2_FLAG_ACK) && h->shutting &&
            memcmp(frame->ping.opaque_data, bye_ping, sizeof(bye_ping)) == 0)
            weir_grpc_h2_goaway(h);
        (void)session;
        return 0;
    default:
        return 0;
    }
}

/* An answer that ended our side before the client ended its own: ask it
 * to stop sending (RFC 9113 8.1). */
static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
    weir_grpc_h2 *h = user_data;
    if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
        !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    h2_stream *st = stream_of(h, frame->hd.stream_id);
    if (st && !st->req_done)
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_NO_ERROR);
    return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
                           void *user_data)
{
    (void)error_code;
    weir_grpc_h2 *h = user_data;
    h2_stream *st = stream_of(h, stream_id);
    if (st) {
        nghttp2_session_set_stream_user_data(session, stream_id, NULL);
        stream_free(h, st);
        h->closed++;
    }
    return 0;
}

/* ------------------------------------------------------------ the session */

static void fill_limits(weir_grpc_h2_limits *l, const weir_grpc_h2_limits *in)
{
    if (in)
        *l = *in;
    else
        memset(l, 0, sizeof(*l));
    if (!l->max_streams)
        l->max_streams = DEFAULT_MAX_STREAMS;
    if (!l->max_message)
        l->max_message = DEFAULT_MAX_MESSAGE;
    if (l->max_message > UINT32_MAX)
        l->max_message = UINT32_MAX;
    if (!l->max_header_list)
        l->max_header_list = DEFAULT_MAX_HEADER_LIST;
    if (!l->initial_window)
        l->initial_window = DEFAULT_INITIAL_WINDOW;
    if (l->initial_window > MAX_WINDOW)
        l->initial_window = MAX_WINDOW;
    if (!l->max_unsent)
        l->max_unsent = DEFAULT_MAX_UNSENT;
    if (!l->max_buffered) {
        size_t m = l->max_message > SIZE_MAX / 16 ? SIZE_MAX : l->max_message * 16;
        l->max_buffered = m < (1u << 20) ? (1u << 20) : m;
    }
}

weir_grpc_h2 *weir_grpc_h2_new(const weir_grpc_h2_limits *limits, weir_grpc_h2_call_fn on_call,
                               void *arg)
{
    weir_grpc_h2 *h = calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    fill_limits(&h->lim, limits);
    h->on_call = on_call;
    h->arg = arg;
    nghttp2_session_callbacks *cb = NULL;
    nghttp2_option *opt = NULL;
    if (nghttp2_session_callbacks_new(&cb) != 0 || nghttp2_option_new(&opt) != 0) {
        nghttp2_session_callbacks_del(cb);
        free(h);
        return NULL;
    }
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    /* Closed streams are remembered only for priorities, which gRPC does
     * not use: keep no state for them. */
    nghttp2_option_set_no_closed_streams(opt, 1);
    int rc = nghttp2_session_server_new2(&h->s, cb, h, opt);
    nghttp2_session_callbacks_del(cb);
    nghttp2_option_del(opt);
    if (rc != 0) {
        free(h);
        return NULL;
    }
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, h->lim.max_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, h->lim.initial_window},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, h->lim.max_header_list},
    };
    uint64_t conn_window = (uint64_t)h->lim.initial_window * 16;
    if (conn_window > MAX_WINDOW)
        conn_window = MAX_WINDOW;
    if (nghttp2_submit_settings(h->s, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0])) != 0 ||
        nghttp2_session_set_local_window_size(h->s, NGHTTP2_FLAG_NONE, 0, (int32_t)conn_window) !=
            0) {
        weir_grpc_h2_free(h);
        return NULL;
    }
    return h;
}

void weir_grpc_h2_free(weir_grpc_h2 *h)
{
    if (!h)
        return;
    nghttp2_session_del(h->s); /* closes no stream through the callbacks */
    while (h->streams)
        stream_free(h, h->streams);
    free(h);
}

bool weir_grpc_h2_recv(weir_grpc_h2 *h, const uint8_t *data, size_t len, int64_t now_ns)
{
    if (h->failed)
        return false;
    h->now_ns = now_ns;
    ssize_t n = nghttp2_session_mem_recv(h->s, data, len);
    if (n < 0) {
        h->failed = true;
        uint32_t code = n == NGHTTP2_ERR_NOMEM || n == NGHTTP2_ERR_CALLBACK_FAILURE
                            ? NGHTTP2_INTERNAL_ERROR
                        : n == NGHTTP2_ERR_FLOODED ? NGHTTP2_ENHANCE_YOUR_CALM
                                                   : NGHTTP2_PROTOCOL_ERROR;
        nghttp2_session_terminate_session(h->s, code);
        return false;
    }
    return true;
}

bool weir_grpc_h2_send(weir_grpc_h2 *h, weir_buf *out, size_t budget)
{
    while (out->len < budget) {
        const uint8_t *p;
        ssize_t n = nghttp2_session_mem_send(h->s, &p);
        if (n < 0) {
            h->failed = true;
            return false;
        }
        if (n == 0)
            break;
        weir_buf_put(out, p, (size_t)n);
        if (!weir_buf_ok(out)) {
            h->failed = true;
            return false;
        }
    }
    return true;
}

int64_t weir_grpc_h2_expire(weir_grpc_h2 *h, int64_t now_ns)
{
    int64_t next = INT64_MAX;
    for (h2_stream *st = h->streams; st; st = st->next) {
        if (st->answered || st->called || st->req_done)
            continue;
        int64_t due = st->deadline_ns;
        const char *why = "deadline exceeded";
        if (h->lim.request_timeout_ns > 0) {
            int64_t cap = add_sat(st->start_ns, h->lim.request_timeout_ns);
            if (cap < due) {
                due = cap;
                why = "the request did not arrive in time";
            }
        }
        if (now_ns >= due)
            answer(h, st, WEIR_GRPC_DEADLINE_EXCEEDED, why, NULL, 0);
        else if (due < next)
            next = due;
    }
    return next;
}

void weir_grpc_h2_shutdown(weir_grpc_h2 *h)
{
    if (h->shutting || h->final_goaway || h->failed)
        return;
    h->shutting = true;
    if (nghttp2_submit_shutdown_notice(h->s) != 0 ||
        nghttp2_submit_ping(h->s, NGHTTP2_FLAG_NONE, bye_ping) != 0)
        weir_grpc_h2_goaway(h);
}

void weir_grpc_h2_goaway(weir_grpc_h2 *h)
{
    if (h->final_goaway || h->failed)
        return;
    h->final_goaway = true;
    h->shutting = true;
    if (nghttp2_submit_goaway(h->s, NGHTTP2_FLAG_NONE,
                              nghttp2_session_get_last_proc_stream_id(h->s), NGHTTP2_NO_ERROR, NULL,
                              0) != 0) {
        h->failed = true;
        nghttp2_session_terminate_session(h->s, NGHTTP2_INTERNAL_ERROR);
    }
}

size_t weir_grpc_h2_held(const weir_grpc_h2 *h)
{
    return h->held;
}

uint64_t weir_grpc_h2_refused_streams(const weir_grpc_h2 *h)
{
    return h->refused;
}

size_t weir_grpc_h2_open_streams(const weir_grpc_h2 *h)
{
    return h->n_streams;
}

uint64_t weir_grpc_h2_closed_streams(const weir_grpc_h2 *h)
{
    return h->closed;
}

size_t weir_grpc_h2_incomplete_streams(const weir_grpc_h2 *h)
{
    size_t n = 0;
    for (const h2_stream *st = h->streams; st; st = st->next)
        n += !st->answered && !st->called && !st->req_done;
    return n;
}

bool weir_grpc_h2_done(weir_grpc_h2 *h)
{
    return !nghttp2_session_want_write(h->s) && (h->failed || !nghttp2_session_want_read(h->s));
}
