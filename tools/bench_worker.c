/*
 * bench_worker.c - one thread of `weir bench grpc`: a libuv loop driving
 * its share of the HTTP/2 client connections, each an nghttp2 client
 * session fed with mem_recv and drained with mem_send.
 *
 * A connection keeps --streams calls in flight: a request is submitted
 * when the session starts and again each time a stream closes (unless the
 * run is over). With --rate, requests follow a fixed schedule instead:
 * request k of connection i (of C over all threads) is due at
 * t0 + (k * C + i) / rate, so the connections interleave evenly; a tick
 * of 100 us .. 1 ms (a timerfd) submits what is due, at most --streams in
 * flight per connection. A request that could not go at the first tick
 * after it was due (every stream busy, or the connection down) counts its
 * latency from when it was due, so a server that falls behind shows it
 * (no coordinated omission); one sent on time counts from when it was
 * sent, so the tick itself adds nothing.
 *
 * A stream's result: grpc-status from the trailers (or a trailers-only
 * answer), the HTTP :status, whether it was reset, and the first bytes of
 * its message, from which overall_code (field 1, the first one protobuf
 * writes) is read without decoding the rest. Only requests sent after the
 * warmup and finished before the end are counted.
 *
 * A connection that fails (refused, reset, closed, a protocol error) is
 * closed, its calls in flight counted as lost, and reconnected 100 ms
 * later. At the end each session gets a GOAWAY (best effort) and every
 * handle is closed; the loop then runs dry and the thread returns.
 */
#define _POSIX_C_SOURCE 200809L

#include <nghttp2/nghttp2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "bench_grpc.h"
#include "grpc/rls.h"

__extension__ typedef unsigned __int128 u128;

#define RETRY_MS 100
#define CHECK_MS 50
/** --rate: the pacing tick, about one request per connection per tick
 *  within these bounds (a timerfd; a 1 ms libuv timer without one). */
#define PACE_MIN_NS 100000u
#define PACE_MAX_NS 1000000u
/** Stop asking nghttp2 for more output past this many unsent bytes. */
#define OUT_HIGH ((size_t)256 * 1024)
#define OUT_MAX ((size_t)64 << 20)
#define READ_BYTES 65536
/** Our receive windows: the stream's (SETTINGS) and the connection's. */
#define STREAM_WINDOW (1u << 20)
#define CONN_WINDOW (1 << 24)
/** Bytes of a response kept: the prefix and overall_code's tag and value. */
#define HEAD_BYTES 8

typedef struct conn conn;

typedef struct stream {
    conn *c;
    uint64_t start_ns;
    const uint8_t *body;
    size_t body_len;
    size_t body_off;
    weir_buf own; /* the body when encoded per request */
    uint32_t n_descs;
    int http_status;
    int grpc_status; /* -1: none yet */
    uint8_t head[HEAD_BYTES];
    uint8_t head_len;
    bool active;
} stream;

typedef enum conn_state { C_IDLE, C_CONNECTING, C_OPEN, C_CLOSING } conn_state;

struct conn {
    weir_bench_worker *w;
    uint32_t global; /* index over every thread's connections */
    conn_state state;
    uv_tcp_t tcp;
    uv_connect_t creq;
    uv_write_t wreq;
    uv_timer_t retry;
    nghttp2_session *session;
    stream *streams;
    uint32_t *free_list;
    uint32_t n_free;
    weir_buf out;      /* from nghttp2, not yet handed to the socket */
    weir_buf inflight; /* handed to uv_write */
    bool writing;
    bool exhausted; /* takes no more calls (GOAWAY, no stream IDs): reconnect when idle */
    bool spoke_h2;  /* the server's SETTINGS arrived */
    uint64_t paced; /* --rate: requests scheduled so far */
    uint8_t rbuf[READ_BYTES];
};

struct weir_bench_worker {
    weir_bench_run *run;
    uint32_t index;
    uint32_t n_conns;
    conn *conns;
    uv_thread_t thread;
    bool started;
    uv_loop_t loop;
    uv_timer_t end_timer, check_timer, pace_timer;
    int pace_fd; /* a timerfd, or -1: pace_timer instead */
    uv_poll_t pace_poll;
    uint64_t last_tick; /* the last pacing tick (t0 before the first) */
    bool running;
    nghttp2_session_callbacks *cbs;
    nghttp2_nv nva[7];
    weir_bench_scratch scratch;
    uint64_t rng;
    weir_bench_counts counts;
    uint64_t done, decisions, errors; /* all finished, for the progress */
    _Atomic uint64_t p_done, p_decisions, p_errors, p_sessions;
    atomic_bool finished;
    char last_error[192];
    char grpc_message[160];
    weir_hist hist;
};

static void conn_flush(conn *c);
static void conn_close(conn *c, const char *why);
static void on_retry(uv_timer_t *t);

static void note(weir_bench_worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note(weir_bench_worker *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->last_error, sizeof w->last_error, fmt, ap);
    va_end(ap);
}

static bool stopping(const weir_bench_worker *w)
{
    return !w->running || atomic_load_explicit(&w->run->stop_at, memory_order_relaxed) != 0;
}

/* ------------------------------------------------------------ results */

typedef enum outcome {
    O_OK,
    O_OVER_LIMIT,
    O_UNKNOWN_CODE,
    O_GRPC_ERROR,
    O_HTTP_ERROR,
    O_RESET,
    O_LOST
} outcome;

/* overall_code from the first bytes of the message: -1 without a
 * message, 0 (UNKNOWN) when the message does not start with field 1. */
static int overall_code(const stream *s)
{
    if (s->head_len < WEIR_GRPC_PREFIX_BYTES)
        return -1;
    uint32_t len = (uint32_t)s->head[1] << 24 | (uint32_t)s->head[2] << 16 |
                   (uint32_t)s->head[3] << 8 | s->head[4];
    if (len < 2 || s->head_len < WEIR_GRPC_PREFIX_BYTES + 2)
        return 0;
    /* tag 0x08: field 1, varint; the codes fit in one byte */
    if (s->head[5] != 0x08 || (s->head[6] & 0x80))
        return 0;
    return s->head[6];
}

static outcome classify(const stream *s, uint32_t error_code)
{
    if (s->grpc_status < 0)
        return error_code != NGHTTP2_NO_ERROR ? O_RESET : O_HTTP_ERROR;
    if (s->grpc_status != 0)
        return O_GRPC_ERROR;
    switch (overall_code(s)) {
    case WEIR_CODE_OK:
        return O_OK;
    case WEIR_CODE_OVER_LIMIT:
        return O_OVER_LIMIT;
    default:
        return O_UNKNOWN_CODE;
    }
}

/* Count stream @s, finished at @now with @o. */
static void finish(weir_bench_worker *w, const stream *s, outcome o, uint64_t now)
{
    bool answered = o == O_OK || o == O_OVER_LIMIT;
    w->done++;
    if (answered)
        w->decisions += s->n_descs;
    else
        w->errors++;
    atomic_store_explicit(&w->p_done, w->done, memory_order_relaxed);
    atomic_store_explicit(&w->p_decisions, w->decisions, memory_order_relaxed);
    atomic_store_explicit(&w->p_errors, w->errors, memory_order_relaxed);

    const weir_bench_run *r = w->run;
    uint64_t stop = atomic_load_explicit(&w->run->stop_at, memory_order_relaxed);
    if (s->start_ns < r->warmup_end || now > r->end || (stop && now > stop))
        return;
    weir_bench_counts *c = &w->counts;
    c->requests++;
    switch (o) {
    case O_OK:
        c->ok++;
        break;
    case O_OVER_LIMIT:
        c->over_limit++;
        break;
    case O_UNKNOWN_CODE:
        c->unknown_code++;
        break;
    case O_GRPC_ERROR:
        c->grpc[s->grpc_status > 0 && s->grpc_status < (int)WEIR_BENCH_GRPC_CODES - 1
                    ? s->grpc_status
                    : (int)WEIR_BENCH_GRPC_CODES - 1]++;
        break;
    case O_HTTP_ERROR:
        c->http_errors++;
        break;
    case O_RESET:
        c->resets++;
        break;
    case O_LOST:
        c->lost++;
        break;
    }
    if (answered) {
        c->decisions += s->n_descs;
        weir_hist_record(&w->hist, now - s->start_ns);
    }
}

/* ------------------------------------------------------------ requests */

static ssize_t read_body(nghttp2_session *session, int32_t stream_id, uint8_t *buf, size_t length,
                         uint32_t *data_flags, nghttp2_data_source *source, void *user_data)
{
    (void)session;
    (void)stream_id;
    (void)user_data;
    stream *s = source->ptr;
    size_t n = s->body_len - s->body_off;
    if (n > length)
        n = length;
    memcpy(buf, s->body + s->body_off, n);
    s->body_off += n;
    if (s->body_off == s->body_len)
        *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* Pick the next request and point @s at its bytes. */
static bool prepare(weir_bench_worker *w, stream *s)
{
    const weir_bench_run *r = w->run;
    const weir_bench_mix *m = r->mix;
    size_t t = m->n == 1 ? 0 : (size_t)weir_bench_below(&w->rng, m->n);
    uint64_t n = m->t[t].has_mark ? weir_bench_below(&w->rng, r->opts->keys) : 0;
    s->n_descs = (uint32_t)m->t[t].n_descs;
    s->body_off = 0;
    if (r->table) {
        s->body = weir_bench_mix_encoded(m, t, n, &s->body_len);
        return true;
    }
    weir_buf_clear(&s->own);
    if (!weir_bench_encode(&m->t[t], n, r->opts->hits, &w->scratch, &s->own))
        return false;
    s->body = (const uint8_t *)s->own.p;
    s->body_len = s->own.len;
    return true;
}

/* Submit one call on @c, its latency counted from @start_ns. */
static bool submit_one(conn *c, uint64_t start_ns)
{
    weir_bench_worker *w = c->w;
    if (c->n_free == 0 || c->exhausted)
        return false;
    stream *s = &c->streams[c->free_list[c->n_free - 1]];
    if (!prepare(w, s)) {
        note(w, "out of memory encoding a request");
        return false;
    }
    s->http_status = 0;
    s->grpc_status = -1;
    s->head_len = 0;
    s->start_ns = start_ns;
    nghttp2_data_provider prd;
    prd.source.ptr = s;
    prd.read_callback = read_body;
    int32_t id =
        nghttp2_submit_request(c->session, NULL, w->nva, sizeof w->nva / sizeof w->nva[0], &prd, s);
    if (id < 0) {
        if (id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE)
            c->exhausted = true;
        else
            note(w, "cannot submit a request: %s", nghttp2_strerror(id));
        return false;
    }
    c->n_free--;
    s->active = true;
    return true;
}

static void release(conn *c, stream *s)
{
    s->active = false;
    c->free_list[c->n_free++] = (uint32_t)(s - c->streams);
}

/* --rate: submit the requests of @c due by @now. */
static void submit_due(conn *c, uint64_t now)
{
    const weir_bench_run *r = c->w->run;
    const weir_bench_grpc_opts *o = r->opts;
    while (c->n_free > 0 && !c->exhausted) {
        u128 slot = (u128)c->paced * o->connections + c->global;
        uint64_t due = r->t0 + (uint64_t)(slot * WEIR_BENCH_NS_PER_S / o->rate);
        if (due > now || due >= r->end)
            return;
        /* late: it was due by the last tick and found no stream */
        if (!submit_one(c, due > c->w->last_tick ? now : due))
            return;
        c->paced++;
    }
}

/* Keep @c busy: after a stream closed, or when the session starts. */
static void refill(conn *c, uint64_t now)
{
    weir_bench_worker *w = c->w;
    if (c->state != C_OPEN || stopping(w) || now >= w->run->end)
        return;
    if (!nghttp2_session_check_request_allowed(c->session)) {
        /* GOAWAY, or no stream IDs left: reconnect once idle */
        c->exhausted = true;
        return;
    }
    if (w->run->opts->rate) {
        submit_due(c, now);
        return;
    }
    while (c->n_free > 0 && submit_one(c, now))
        ;
}

/* ------------------------------------------------------------ nghttp2 callbacks */

static stream *stream_of(nghttp2_session *session, int32_t id)
{
    stream *s = nghttp2_session_get_stream_user_data(session, id);
    return s && s->active ? s : NULL;
}

/* A small decimal (:status, grpc-status); -2 when it is not one. */
static int small_number(const uint8_t *v, size_t len)
{
    if (len == 0 || len > 6)
        return -2;
    int n = 0;
    for (size_t i = 0; i < len; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -2;
        n = n * 10 + (v[i] - '0');
    }
    return n;
}

static bool name_is(const uint8_t *name, size_t len, const char *lit)
{
    return len == strlen(lit) && memcmp(name, lit, len) == 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user_data)
{
    (void)flags;
    conn *c = user_data;
    if (frame->hd.type != NGHTTP2_HEADERS)
        return 0;
    stream *s = stream_of(session, frame->hd.stream_id);
    if (!s)
        return 0;
    if (name_is(name, namelen, ":status")) {
        s->http_status = small_number(value, valuelen);
    } else if (name_is(name, namelen, "grpc-status")) {
        int code = small_number(value, valuelen);
        s->grpc_status = code < 0 ? (int)WEIR_BENCH_GRPC_CODES - 1 : code;
    } else if (name_is(name, namelen, "grpc-message") && !c->w->grpc_message[0]) {
        int n = valuelen > 120 ? 120 : (int)valuelen;
        snprintf(c->w->grpc_message, sizeof c->w->grpc_message, "%.*s", n, (const char *)value);
    }
    return 0;
}

static int on_data(nghttp2_session *session, uint8_t flags, int32_t stream_id, const uint8_t *data,
                   size_t len, void *user_data)
{
    (void)flags;
    (void)user_data;
    stream *s = stream_of(session, stream_id);
    if (!s)
        return 0;
    size_t room = HEAD_BYTES - s->head_len;
    size_t n = len < room ? len : room;
    memcpy(s->head + s->head_len, data, n);
    s->head_len = (uint8_t)(s->head_len + n);
    return 0;
}

static int on_frame(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
    (void)session;
    conn *c = user_data;
    if (frame->hd.type == NGHTTP2_SETTINGS && !(frame->hd.flags & NGHTTP2_FLAG_ACK) &&
        !c->spoke_h2) {
        /* the server's first SETTINGS: it speaks HTTP/2 */
        c->spoke_h2 = true;
        c->w->counts.sessions++;
        atomic_store_explicit(&c->w->p_sessions, c->w->counts.sessions, memory_order_relaxed);
    }
    if (frame->hd.type == NGHTTP2_GOAWAY && c->w->running)
        note(c->w, "the server sent GOAWAY (%s)", nghttp2_http2_strerror(frame->goaway.error_code));
    return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
                           void *user_data)
{
    conn *c = user_data;
    stream *s = stream_of(session, stream_id);
    if (!s)
        return 0;
    uint64_t now = uv_hrtime();
    finish(c->w, s, classify(s, error_code), now);
    release(c, s);
    refill(c, now);
    return 0;
}

/* ------------------------------------------------------------ the socket */

static void on_written(uv_write_t *req, int status)
{
    conn *c = req->data;
    c->writing = false;
    weir_buf_clear(&c->inflight);
    if (status == UV_ECANCELED)
        return;
    if (status < 0) {
        conn_close(c, uv_strerror(status));
        return;
    }
    conn_flush(c);
}

/* Hand what nghttp2 has to send to the socket: uv_try_write first, the
 * rest with uv_write (one write in flight at a time; what comes meanwhile
 * waits in c->out). Then close the connection when the session is over. */
static void conn_flush(conn *c)
{
    for (;;) {
        if (c->state != C_OPEN)
            return;
        while (c->out.len < OUT_HIGH) {
            const uint8_t *data;
            ssize_t n = nghttp2_session_mem_send(c->session, &data);
            if (n < 0) {
                conn_close(c, nghttp2_strerror((int)n));
                return;
            }
            if (n == 0)
                break;
            weir_buf_put(&c->out, data, (size_t)n);
        }
        if (!weir_buf_ok(&c->out)) {
            conn_close(c, "out of memory buffering output");
            return;
        }
        if (c->writing || c->out.len == 0)
            break;
        uv_buf_t b = uv_buf_init(c->out.p, (unsigned)c->out.len);
        int n = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
        if (n == UV_EAGAIN)
            n = 0;
        if (n < 0) {
            conn_close(c, uv_strerror(n));
            return;
        }
        size_t left = c->out.len - (size_t)n;
        if (left == 0) {
            weir_buf_clear(&c->out);
            continue; /* nghttp2 may have more */
        }
        weir_buf_clear(&c->inflight);
        weir_buf_put(&c->inflight, c->out.p + n, left);
        weir_buf_clear(&c->out);
        if (!weir_buf_ok(&c->inflight)) {
            conn_close(c, "out of memory buffering output");
            return;
        }
        b = uv_buf_init(c->inflight.p, (unsigned)c->inflight.len);
        c->wreq.data = c;
        int rc = uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, on_written);
        if (rc < 0) {
            conn_close(c, uv_strerror(rc));
            return;
        }
        c->writing = true;
        break;
    }
    if (c->writing || c->out.len > 0)
        return;
    if (!nghttp2_session_want_read(c->session) && !nghttp2_session_want_write(c->session))
        conn_close(c, "the server ended the HTTP/2 session");
    else if (c->exhausted && c->n_free == c->w->run->opts->streams)
        conn_close(c, "the session takes no more calls (stream IDs used up)");
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    conn *c = h->data;
    *buf = uv_buf_init((char *)c->rbuf, sizeof c->rbuf);
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    conn *c = st->data;
    if (nread == 0 || c->state != C_OPEN)
        return;
    if (nread < 0) {
        conn_close(c,
                   nread == UV_EOF ? "the server closed the connection" : uv_strerror((int)nread));
        return;
    }
    ssize_t rv = nghttp2_session_mem_recv(c->session, (const uint8_t *)buf->base, (size_t)nread);
    if (rv < 0) {
        conn_close(c, nghttp2_strerror((int)rv));
        return;
    }
    conn_flush(c);
}

static void on_tcp_closed(uv_handle_t *h)
{
    conn *c = h->data;
    c->state = C_IDLE;
    c->writing = false;
    weir_buf_clear(&c->out);
    weir_buf_clear(&c->inflight);
    if (c->w->running)
        uv_timer_start(&c->retry, on_retry, RETRY_MS, 0);
}

/*
 * Close @c. @why: a failure mid-run (counted, its calls in flight lost,
 * reconnected in 100 ms); NULL: the end of the run.
 */
static void conn_close(conn *c, const char *why)
{
    weir_bench_worker *w = c->w;
    if (c->state == C_IDLE || c->state == C_CLOSING)
        return;
    bool failed = why && w->running;
    if (failed) {
        note(w, "%s: %s", w->run->opts->authority, why);
        if (c->state == C_OPEN)
            w->counts.disconnects++;
        else
            w->counts.connect_failures++;
    }
    uint64_t now = uv_hrtime();
    for (uint32_t i = 0; i < w->run->opts->streams; i++) {
        stream *s = &c->streams[i];
        if (!s->active)
            continue;
        if (failed)
            finish(w, s, O_LOST, now);
        release(c, s);
    }
    if (c->session) {
        nghttp2_session_del(c->session);
        c->session = NULL;
    }
    c->state = C_CLOSING;
    uv_close((uv_handle_t *)&c->tcp, on_tcp_closed);
}

static bool session_start(conn *c)
{
    weir_bench_worker *w = c->w;
    if (nghttp2_session_client_new(&c->session, w->cbs, c) != 0)
        return false;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW},
    };
    return nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]) ==
               0 &&
           nghttp2_session_set_local_window_size(c->session, NGHTTP2_FLAG_NONE, 0, CONN_WINDOW) ==
               0;
}

static void on_connect(uv_connect_t *req, int status)
{
    conn *c = req->data;
    if (status == UV_ECANCELED || c->state != C_CONNECTING)
        return;
    if (status < 0) {
        conn_close(c, uv_strerror(status));
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    c->exhausted = false;
    c->spoke_h2 = false;
    if (!session_start(c)) {
        conn_close(c, "cannot start an HTTP/2 session");
        return;
    }
    c->state = C_OPEN;
    int rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (rc < 0) {
        conn_close(c, uv_strerror(rc));
        return;
    }
    refill(c, uv_hrtime());
    conn_flush(c);
}

static void conn_connect(conn *c)
{
    weir_bench_worker *w = c->w;
    int rc = uv_tcp_init(&w->loop, &c->tcp);
    if (rc < 0) {
        note(w, "cannot make a socket: %s", uv_strerror(rc));
        w->counts.connect_failures++;
        uv_timer_start(&c->retry, on_retry, RETRY_MS, 0);
        return;
    }
    c->tcp.data = c;
    c->creq.data = c;
    c->state = C_CONNECTING;
    rc = uv_tcp_connect(&c->creq, &c->tcp, (const struct sockaddr *)&w->run->addr, on_connect);
    if (rc < 0)
        conn_close(c, uv_strerror(rc));
}

static void on_retry(uv_timer_t *t)
{
    conn *c = t->data;
    if (!c->w->running || c->state != C_IDLE)
        return;
    c->w->counts.reconnects++;
    conn_connect(c);
}

/* ------------------------------------------------------------ the thread */

/* End the run: GOAWAY to every session (best effort), close every handle. */
static void worker_stop(weir_bench_worker *w)
{
    if (!w->running)
        return;
    w->running = false;
    uv_close((uv_handle_t *)&w->end_timer, NULL);
    uv_close((uv_handle_t *)&w->check_timer, NULL);
    uv_close((uv_handle_t *)&w->pace_timer, NULL);
    if (w->pace_fd >= 0)
        uv_close((uv_handle_t *)&w->pace_poll, NULL);
    for (uint32_t i = 0; i < w->n_conns; i++) {
        conn *c = &w->conns[i];
        uv_close((uv_handle_t *)&c->retry, NULL);
        if (c->state == C_OPEN && !c->writing &&
            nghttp2_session_terminate_session(c->session, NGHTTP2_NO_ERROR) == 0) {
            const uint8_t *data;
            ssize_t n;
            while ((n = nghttp2_session_mem_send(c->session, &data)) > 0) {
                uv_buf_t b = uv_buf_init((char *)(uintptr_t)data, (unsigned)n);
                if (uv_try_write((uv_stream_t *)&c->tcp, &b, 1) != (int)n)
                    break;
            }
        }
        conn_close(c, NULL);
    }
}

static void on_end(uv_timer_t *t)
{
    worker_stop(t->data);
}

static void on_check(uv_timer_t *t)
{
    weir_bench_worker *w = t->data;
    if (stopping(w))
        worker_stop(w);
}

static void pace(weir_bench_worker *w)
{
    uint64_t now = uv_hrtime();
    for (uint32_t i = 0; i < w->n_conns && w->running; i++) {
        conn *c = &w->conns[i];
        if (c->state != C_OPEN)
            continue;
        refill(c, now);
        conn_flush(c);
    }
    w->last_tick = now;
}

static void on_pace_timer(uv_timer_t *t)
{
    pace(t->data);
}

static void on_pace_fd(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events;
    weir_bench_worker *w = h->data;
    uint64_t expirations;
    if (read(w->pace_fd, &expirations, sizeof expirations) < 0)
        return; /* EAGAIN: not yet */
    pace(w);
}

/* The tick: about one request per connection, within the bounds. */
static uint64_t pace_tick_ns(const weir_bench_run *r)
{
    uint64_t per_conn =
        (uint64_t)((u128)WEIR_BENCH_NS_PER_S * r->opts->connections / r->opts->rate);
    return per_conn < PACE_MIN_NS ? PACE_MIN_NS : per_conn > PACE_MAX_NS ? PACE_MAX_NS : per_conn;
}

static void pace_start(weir_bench_worker *w)
{
    w->last_tick = w->run->t0;
    uint64_t tick = pace_tick_ns(w->run);
    w->pace_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (w->pace_fd >= 0) {
        struct itimerspec its;
        its.it_interval.tv_sec = its.it_value.tv_sec = 0;
        its.it_interval.tv_nsec = its.it_value.tv_nsec = (long)tick;
        if (timerfd_settime(w->pace_fd, 0, &its, NULL) == 0 &&
            uv_poll_init(&w->loop, &w->pace_poll, w->pace_fd) == 0) {
            w->pace_poll.data = w;
            uv_poll_start(&w->pace_poll, UV_READABLE, on_pace_fd);
            return;
        }
        close(w->pace_fd);
        w->pace_fd = -1;
    }
    uv_timer_start(&w->pace_timer, on_pace_timer, 1, 1);
}

static void worker_main(void *arg)
{
    weir_bench_worker *w = arg;
    const weir_bench_run *r = w->run;
    w->running = true;
    uv_timer_init(&w->loop, &w->end_timer);
    uv_timer_init(&w->loop, &w->check_timer);
    uv_timer_init(&w->loop, &w->pace_timer);
    w->end_timer.data = w->check_timer.data = w->pace_timer.data = w;
    uint64_t now = uv_hrtime();
    uint64_t left_ms = r->end > now ? (r->end - now + 999999) / 1000000 : 0;
    uv_timer_start(&w->end_timer, on_end, left_ms, 0);
    uv_timer_start(&w->check_timer, on_check, CHECK_MS, CHECK_MS);
    w->pace_fd = -1;
    if (r->opts->rate)
        pace_start(w);
    for (uint32_t i = 0; i < w->n_conns; i++) {
        conn *c = &w->conns[i];
        uv_timer_init(&w->loop, &c->retry);
        c->retry.data = c;
        conn_connect(c);
    }
    uv_run(&w->loop, UV_RUN_DEFAULT);
    if (w->pace_fd >= 0)
        close(w->pace_fd);
    atomic_store(&w->finished, true);
}

/* ------------------------------------------------------------ the API */

static nghttp2_nv header(const char *name, const char *value)
{
    nghttp2_nv nv;
    nv.name = (uint8_t *)(uintptr_t)name;
    nv.namelen = strlen(name);
    nv.value = (uint8_t *)(uintptr_t)value;
    nv.valuelen = strlen(value);
    nv.flags = NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE;
    return nv;
}

weir_bench_worker *weir_bench_worker_new(weir_bench_run *run, uint32_t index, uint32_t first,
                                         uint32_t n)
{
    const weir_bench_grpc_opts *o = run->opts;
    weir_bench_worker *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->run = run;
    w->index = index;
    w->n_conns = n;
    weir_hist_init(&w->hist);
    atomic_init(&w->p_done, 0);
    atomic_init(&w->p_decisions, 0);
    atomic_init(&w->p_errors, 0);
    atomic_init(&w->p_sessions, 0);
    atomic_init(&w->finished, false);
    w->rng = 0x5745495242454e43u ^ ((uint64_t)index << 32) ^ uv_hrtime();
    w->nva[0] = header(":method", "POST");
    w->nva[1] = header(":scheme", "http");
    w->nva[2] = header(":path", WEIR_BENCH_GRPC_PATH);
    w->nva[3] = header(":authority", o->authority);
    w->nva[4] = header("content-type", "application/grpc");
    w->nva[5] = header("te", "trailers");
    w->nva[6] = header("user-agent", "weir-bench-grpc");
    bool ok = uv_loop_init(&w->loop) == 0;
    if (!ok) {
        free(w);
        return NULL;
    }
    ok = nghttp2_session_callbacks_new(&w->cbs) == 0 &&
         (run->table || weir_bench_scratch_init(&w->scratch, run->mix));
    if (ok) {
        nghttp2_session_callbacks_set_on_header_callback(w->cbs, on_header);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(w->cbs, on_data);
        nghttp2_session_callbacks_set_on_frame_recv_callback(w->cbs, on_frame);
        nghttp2_session_callbacks_set_on_stream_close_callback(w->cbs, on_stream_close);
        w->conns = calloc(n, sizeof *w->conns);
        ok = w->conns != NULL;
    }
    for (uint32_t i = 0; ok && i < n; i++) {
        conn *c = &w->conns[i];
        c->w = w;
        c->global = first + i;
        weir_buf_init(&c->out, OUT_MAX);
        weir_buf_init(&c->inflight, OUT_MAX);
        c->streams = calloc(o->streams, sizeof *c->streams);
        c->free_list = malloc(o->streams * sizeof *c->free_list);
        ok = c->streams && c->free_list;
        for (uint32_t j = 0; ok && j < o->streams; j++) {
            c->streams[j].c = c;
            weir_buf_init(&c->streams[j].own, (size_t)1 << 20);
            /* popped from the end: stream 0 first */
            c->free_list[j] = o->streams - 1 - j;
        }
        c->n_free = o->streams;
    }
    if (!ok) {
        weir_bench_worker_free(w);
        return NULL;
    }
    return w;
}

bool weir_bench_worker_start(weir_bench_worker *w)
{
    w->started = uv_thread_create(&w->thread, worker_main, w) == 0;
    return w->started;
}

void weir_bench_worker_join(weir_bench_worker *w)
{
    if (w->started)
        uv_thread_join(&w->thread);
    w->started = false;
}

void weir_bench_worker_free(weir_bench_worker *w)
{
    if (!w)
        return;
    weir_bench_worker_join(w);
    uv_loop_close(&w->loop);
    for (uint32_t i = 0; w->conns && i < w->n_conns; i++) {
        conn *c = &w->conns[i];
        for (uint32_t j = 0; c->streams && j < w->run->opts->streams; j++)
            weir_buf_free(&c->streams[j].own);
        free(c->streams);
        free(c->free_list);
        weir_buf_free(&c->out);
        weir_buf_free(&c->inflight);
    }
    free(w->conns);
    if (w->cbs)
        nghttp2_session_callbacks_del(w->cbs);
    weir_bench_scratch_free(&w->scratch);
    free(w);
}

void weir_bench_worker_progress(weir_bench_worker *w, uint64_t *done, uint64_t *decisions,
                                uint64_t *errors, uint64_t *sessions, bool *finished)
{
    *sessions = atomic_load_explicit(&w->p_sessions, memory_order_relaxed);
    *done = atomic_load_explicit(&w->p_done, memory_order_relaxed);
    *decisions = atomic_load_explicit(&w->p_decisions, memory_order_relaxed);
    *errors = atomic_load_explicit(&w->p_errors, memory_order_relaxed);
    *finished = atomic_load(&w->finished);
}

const weir_bench_counts *weir_bench_worker_counts(const weir_bench_worker *w)
{
    return &w->counts;
}

const weir_hist *weir_bench_worker_hist(const weir_bench_worker *w)
{
    return &w->hist;
}

const char *weir_bench_worker_last_error(const weir_bench_worker *w)
{
    return w->last_error;
}

const char *weir_bench_worker_grpc_message(const weir_bench_worker *w)
{
    return w->grpc_message;
}
